//! Indexes: `CREATE INDEX` (columns and expressions), and the statements sqlparser 0.64 does not parse, read
//! with its tokenizer and parser primitives: `ALTER INDEX … RENAME TO` (SQLite cannot rename an index: it is dropped and made again under the new name,
//! from its own definition), `DROP INDEX CONCURRENTLY` (SQLite's DROP INDEX never blocks readers, so it is
//! the plain DROP INDEX) and `REINDEX` (SQLite's).

use rusqlite::Connection;
use sqlparser::ast::Statement;
use sqlparser::dialect::SQLiteDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use sqlparser::ast::{CreateIndex, Expr};

use super::ddl::{fold, fold_name, table_name};
use super::expr::{Rewriter, Scope};
use super::{Kind, Translation};
use crate::catalog::{quote_ident, Catalog};
use crate::error::{PgError, SYNTAX_ERROR, UNDEFINED_TABLE};

fn syntax(error: sqlparser::parser::ParserError) -> PgError {
    PgError::new(SYNTAX_ERROR, error.to_string())
}

fn parser(tokens: Vec<Token>) -> Parser<'static> {
    static DIALECT: sqlparser::dialect::PostgreSqlDialect = sqlparser::dialect::PostgreSqlDialect {};
    Parser::new(&DIALECT).with_tokens(tokens)
}

fn expect_end(p: &mut Parser<'_>) -> Result<(), PgError> {
    let rest = p.peek_token();
    if rest.token == Token::EOF {
        return Ok(());
    }
    Err(PgError::new(
        SYNTAX_ERROR,
        format!("syntax error at or near \"{rest}\""),
    ))
}

/// `sqlite_schema`'s text of the index `name`: `Some(None)` for an index SQLite made for a constraint.
fn index_sql(conn: &Connection, name: &str) -> Result<Option<Option<String>>, PgError> {
    let found = conn.query_row(
        "SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?1 COLLATE NOCASE",
        [name],
        |row| row.get::<_, Option<String>>(0),
    );
    match found {
        Ok(sql) => Ok(Some(sql)),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(error) => Err(PgError::new(
            crate::error::INTERNAL_ERROR,
            format!("reading an index: {error}"),
        )),
    }
}

fn missing(name: &str) -> PgError {
    PgError::new(UNDEFINED_TABLE, format!("relation \"{name}\" does not exist"))
}

fn command(tag: &str, steps: Vec<String>) -> Translation {
    let mut translation = Translation::single(String::new(), Kind::Other(tag.to_owned()));
    translation.steps = steps;
    translation
}

/// `ALTER INDEX [IF EXISTS] name RENAME TO new`; `None` for other `ALTER INDEX` forms.
pub(super) fn alter_index(
    conn: &Connection,
    catalog: &Catalog,
    tokens: Vec<Token>,
) -> Result<Option<Translation>, PgError> {
    let mut p = parser(tokens);
    p.expect_keywords(&[Keyword::ALTER, Keyword::INDEX]).map_err(syntax)?;
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = table_name(catalog, &p.parse_object_name(false).map_err(syntax)?)?;
    if !p.parse_keywords(&[Keyword::RENAME, Keyword::TO]) {
        return Ok(None);
    }
    let to = renamed(catalog, &name, &p.parse_object_name(false).map_err(syntax)?)?;
    expect_end(&mut p)?;
    rename_index(conn, &name, &to, if_exists).map(Some)
}

/// The SQLite name an index renamed to `to` takes: the new name in the index's own schema.
pub(super) fn renamed(catalog: &Catalog, index: &str, to: &sqlparser::ast::ObjectName) -> Result<String, PgError> {
    let (schema, _) = super::schema::schema_of(catalog, index);
    let (_, bare) = super::schema::split_name(to)?;
    Ok(crate::schemas::sqlite_name(&schema, &bare))
}

/// `ALTER INDEX [IF EXISTS] name RENAME TO to`: the index dropped and made again under the new name.
pub(super) fn rename_index(conn: &Connection, name: &str, to: &str, if_exists: bool) -> Result<Translation, PgError> {
    let sql = match index_sql(conn, name)? {
        None if if_exists => return Ok(command("ALTER INDEX", Vec::new())),
        None => return Err(missing(name)),
        Some(None) => {
            return Err(PgError::unsupported(
                "renaming the index of a UNIQUE or PRIMARY KEY constraint",
            ))
        }
        Some(Some(sql)) => sql,
    };
    let mut parsed = Parser::parse_sql(&SQLiteDialect {}, &sql)
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("reading index {name}: {e}")))?;
    let Some(Statement::CreateIndex(mut index)) = parsed.pop() else {
        return Err(PgError::new(
            crate::error::INTERNAL_ERROR,
            format!("index {name} has no CREATE INDEX text"),
        ));
    };
    index.name = Some(sqlparser::ast::ObjectName::from(vec![
        sqlparser::ast::Ident::with_quote('"', to.to_owned()),
    ]));
    if index_sql(conn, to)?.is_some() {
        return Err(PgError::new(
            crate::error::DUPLICATE_TABLE,
            format!("relation \"{to}\" already exists"),
        ));
    }
    let steps = vec![
        format!("DROP INDEX {}", quote_ident(name)),
        Statement::CreateIndex(index).to_string(),
    ];
    Ok(command("ALTER INDEX", steps))
}

/// `DROP INDEX CONCURRENTLY …`: the statement without `CONCURRENTLY`, translated as DROP INDEX is.
pub(super) fn drop_index_concurrently(
    conn: &Connection,
    catalog: &Catalog,
    mut tokens: Vec<Token>,
) -> Result<Option<Translation>, PgError> {
    tokens.remove(2);
    let statement = parser(tokens).parse_statement().map_err(syntax)?;
    super::translate_statement(conn, catalog, statement)
}

/// `REINDEX [(options)] INDEX|TABLE [CONCURRENTLY] name`, or `SCHEMA|DATABASE|SYSTEM [CONCURRENTLY] [name]`.
pub(super) fn reindex(conn: &Connection, catalog: &Catalog, tokens: Vec<Token>) -> Result<Translation, PgError> {
    let mut p = parser(tokens);
    p.expect_keyword(Keyword::REINDEX).map_err(syntax)?;
    if p.consume_token(&Token::LParen) {
        // Options (VERBOSE, TABLESPACE …): nothing they change here.
        while !p.consume_token(&Token::RParen) {
            if p.next_token().token == Token::EOF {
                return Err(PgError::new(SYNTAX_ERROR, "syntax error at end of input"));
            }
        }
    }
    let kind = p
        .parse_one_of_keywords(&[
            Keyword::INDEX,
            Keyword::TABLE,
            Keyword::SCHEMA,
            Keyword::DATABASE,
            Keyword::SYSTEM,
        ])
        .ok_or_else(|| PgError::new(SYNTAX_ERROR, format!("syntax error at or near \"{}\"", p.peek_token())))?;
    let _ = p.parse_keyword(Keyword::CONCURRENTLY);
    let step = if matches!(kind, Keyword::INDEX | Keyword::TABLE) {
        let name = table_name(catalog, &p.parse_object_name(false).map_err(syntax)?)?;
        let wanted = if kind == Keyword::INDEX { "index" } else { "table" };
        let exists: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = ?1 AND name = ?2 COLLATE NOCASE)",
                [wanted, name.as_str()],
                |row| row.get(0),
            )
            .unwrap_or(false);
        if !exists {
            return Err(missing(&name));
        }
        format!("REINDEX {}", quote_ident(&name))
    } else {
        if !matches!(p.peek_token().token, Token::EOF) {
            p.parse_identifier().map_err(syntax)?;
        }
        "REINDEX".to_owned()
    };
    expect_end(&mut p)?;
    Ok(command("REINDEX", vec![step]))
}

/// `CREATE [UNIQUE] INDEX [CONCURRENTLY] [IF NOT EXISTS] [name] ON t [USING btree] (cols) [WHERE …]`.
pub(crate) fn create_index(catalog: &Catalog, index: &mut CreateIndex) -> Result<Translation, PgError> {
    // Every access method becomes SQLite's b-tree index: queries give the same answers, a GIN or GiST index's
    // speed-up for containment or search is what is not there (documented in ARCHITECTURE.md).
    if let Some(using) = &index.using {
        let method = using.to_string().to_ascii_lowercase();
        if !matches!(method.as_str(), "btree" | "hash" | "gin" | "gist" | "brin" | "spgist") {
            return Err(PgError::unsupported(format!("index method {method}")));
        }
    }
    let table = table_name(catalog, &index.table_name)?;
    let columns = index_keys(catalog, &table, &mut index.columns)?;
    // PostgreSQL's default name takes each column's name, a function call's name, else `expr`.
    let bare: Vec<String> = index
        .columns
        .iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(i) => fold(i),
            Expr::Function(f) => fold_name(&f.name),
            _ => "expr".to_owned(),
        })
        .collect();
    let name = match &index.name {
        // An index lives in its table's schema.
        Some(name) => crate::schemas::sqlite_name(&super::schema::schema_of(catalog, &table).0, &fold_name(name)),
        // PostgreSQL's default name: table_columns_idx (or _key for unique ones).
        None => format!(
            "{table}_{}_{}",
            bare.join("_"),
            if index.unique { "key" } else { "idx" }
        ),
    };
    let with_order: Vec<String> = index
        .columns
        .iter()
        .zip(columns)
        .map(|(c, col)| match c.column.options.sort {
            Some(sqlparser::ast::OrderBySort::Desc) => format!("{col} DESC"),
            _ => col,
        })
        .collect();
    let mut sql = format!(
        "CREATE {}INDEX {}{} ON {} ({})",
        if index.unique { "UNIQUE " } else { "" },
        if index.if_not_exists { "IF NOT EXISTS " } else { "" },
        quote_ident(&name),
        quote_ident(&table),
        with_order.join(", ")
    );
    if let Some(predicate) = &mut index.predicate {
        let mut rewriter = Rewriter::new(catalog);
        rewriter.typer.scopes.push(Scope::of_table(&table));
        rewriter.rewrite_expr(predicate)?;
        sql.push_str(&format!(" WHERE {predicate}"));
    }
    let mut translation = Translation::single(sql, Kind::Other("CREATE INDEX".to_owned()));
    if index.if_not_exists && catalog.relation_exists(&name) {
        let shown = crate::schemas::split_sqlite_name(&name, catalog.schemas()).1.to_owned();
        translation
            .notices
            .push(format!("relation \"{shown}\" already exists, skipping"));
    }
    Ok(translation)
}

/// An index's keys as SQLite takes them: columns by name, expressions (`lower(email)`) rewritten as any
/// expression over the table is, in parentheses. SQLite, like PostgreSQL, accepts only deterministic
/// functions and no subqueries there.
fn index_keys(
    catalog: &Catalog,
    table: &str,
    columns: &mut [sqlparser::ast::IndexColumn],
) -> Result<Vec<String>, PgError> {
    let mut keys = Vec::with_capacity(columns.len());
    for column in columns {
        match &mut column.column.expr {
            Expr::Identifier(ident) => keys.push(quote_ident(&fold(ident))),
            expr => {
                let mut rewriter = Rewriter::new(catalog);
                rewriter.typer.scopes.push(Scope::of_table(table));
                let key = if let Expr::Nested(inner) = expr {
                    inner.as_mut()
                } else {
                    expr
                };
                rewriter.rewrite_expr(key)?;
                keys.push(format!("({key})"));
            }
        }
    }
    Ok(keys)
}
