//! `CREATE TABLE new (LIKE source [INCLUDING | EXCLUDING option]…, other items…)`, which sqlparser 0.64 reads
//! only without options: the statement is read here with its tokenizer and parser primitives, and the new
//! table's SQLite definition is made from the source's (its SQLite `CREATE TABLE`, parsed with sqlparser's
//! SQLite dialect, and its recorded PostgreSQL column types), as PostgreSQL copies a table:
//!
//! - always: the column names, types and `NOT NULL` (a primary key's columns are `NOT NULL` too);
//! - `DEFAULTS`: column defaults (a serial column's `nextval` of the *source's* sequence, as PostgreSQL copies
//!   it; such a column is declared `INT`, not `INTEGER`, so that SQLite evaluates its default rather than
//!   handing out a rowid, since the new table owns no sequence the INSERT rewrite would fill it from);
//! - `IDENTITY`: an identity column gets a new sequence of its own, with the source sequence's options;
//! - `GENERATED`: generated columns' expressions (without it they are ordinary columns);
//! - `CONSTRAINTS`: `CHECK` constraints, under their names;
//! - `INDEXES`: the primary key, unique constraints and indexes, under PostgreSQL's default names for the new
//!   table (`new_pkey`, `new_a_b_key`, `new_a_idx`, `new_lower_idx`);
//! - `COMMENTS`: the columns' comments;
//! - `STATISTICS`, `STORAGE`, `COMPRESSION`: nothing to copy;
//! - never: foreign keys.
//!
//! Other column definitions and constraints written beside `LIKE` are translated as any `CREATE TABLE`'s and
//! placed in the order written.

use rusqlite::Connection;
use sqlparser::ast::{
    ColumnDef, ColumnOption, CreateTable, DataType, Expr, FunctionArguments, Ident, ObjectName, Statement,
    TableConstraint,
};
use sqlparser::dialect::{PostgreSqlDialect, SQLiteDialect};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Word};

use super::Translation;
use crate::catalog::{self, quote_ident, quote_literal, Catalog};
use crate::error::{PgError, SYNTAX_ERROR, UNDEFINED_TABLE, WRONG_OBJECT_TYPE};
use crate::sequence::Sequence;

/// PostgreSQL's SQLSTATE for a column named twice.
const DUPLICATE_COLUMN: &str = "42701";

/// What a `LIKE` item copies besides names, types and `NOT NULL`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Including {
    comments: bool,
    constraints: bool,
    defaults: bool,
    generated: bool,
    identity: bool,
    indexes: bool,
}

impl Including {
    /// Applies `INCLUDING` (`on`) or `EXCLUDING` of the option named `word`, in the order written.
    fn set(&mut self, word: &str, on: bool) -> Result<(), PgError> {
        match word.to_ascii_lowercase().as_str() {
            "comments" => self.comments = on,
            "constraints" => self.constraints = on,
            "defaults" => self.defaults = on,
            "generated" => self.generated = on,
            "identity" => self.identity = on,
            "indexes" => self.indexes = on,
            "statistics" | "storage" | "compression" => {}
            "all" => {
                *self = Including {
                    comments: on,
                    constraints: on,
                    defaults: on,
                    generated: on,
                    identity: on,
                    indexes: on,
                }
            }
            other => return Err(syntax_at(other)),
        }
        Ok(())
    }
}

/// One item of the column list: a `LIKE` or anything else (its tokens, for the ordinary translation).
enum Item {
    Like { source: ObjectName, including: Including },
    Other(Vec<Token>),
}

/// The statement as read.
struct CreateLike {
    temporary: bool,
    if_not_exists: bool,
    name: ObjectName,
    items: Vec<Item>,
}

fn syntax(error: ParserError) -> PgError {
    PgError::new(SYNTAX_ERROR, error.to_string())
}

fn syntax_at(near: &str) -> PgError {
    PgError::new(SYNTAX_ERROR, format!("syntax error at or near \"{near}\""))
}

fn internal(message: impl std::fmt::Display) -> PgError {
    PgError::new(crate::error::INTERNAL_ERROR, format!("copying a table: {message}"))
}

fn parser(tokens: Vec<Token>) -> Parser<'static> {
    static DIALECT: PostgreSqlDialect = PostgreSqlDialect {};
    Parser::new(&DIALECT).with_tokens(tokens)
}

fn word(token: &Token) -> Option<&str> {
    match token {
        Token::Word(Word {
            value,
            quote_style: None,
            ..
        }) => Some(value),
        _ => None,
    }
}

fn keyword(token: &Token) -> Keyword {
    match token {
        Token::Word(Word { keyword, .. }) => *keyword,
        _ => Keyword::NoKeyword,
    }
}

/// Whether `tokens` (whitespace removed) are a `CREATE … TABLE` with a `LIKE` item in its column list.
pub(super) fn is_create_like(tokens: &[Token]) -> bool {
    let Some(table) = tokens.iter().take(6).position(|t| keyword(t) == Keyword::TABLE) else {
        return false;
    };
    split_items(&tokens[table..]).is_some_and(|(items, _)| {
        items
            .iter()
            .any(|item| item.first().is_some_and(|t| keyword(t) == Keyword::LIKE))
    })
}

/// The items of the first parenthesized list in `tokens` (split at its top-level commas) and the index just
/// past its closing parenthesis.
fn split_items(tokens: &[Token]) -> Option<(Vec<Vec<Token>>, usize)> {
    let open = tokens.iter().position(|t| *t == Token::LParen)?;
    let mut depth = 0usize;
    let mut items = vec![Vec::new()];
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::LParen => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some((items, i + 1));
                }
            }
            Token::Comma if depth == 1 => {
                items.push(Vec::new());
                continue;
            }
            _ => {}
        }
        items.last_mut().expect("starts with one item").push(token.clone());
    }
    None
}

fn read(tokens: &[Token]) -> Result<CreateLike, PgError> {
    let open = tokens
        .iter()
        .position(|t| *t == Token::LParen)
        .ok_or_else(|| syntax_at("end of input"))?;
    let mut p = parser(tokens[..open].to_vec());
    p.expect_keyword(Keyword::CREATE).map_err(syntax)?;
    let _ = p.parse_one_of_keywords(&[Keyword::GLOBAL, Keyword::LOCAL]);
    let temporary = p.parse_one_of_keywords(&[Keyword::TEMP, Keyword::TEMPORARY]).is_some();
    if !temporary {
        // An unlogged table is an ordinary one here: every table is durable.
        let _ = p.parse_keyword(Keyword::UNLOGGED);
    }
    p.expect_keyword(Keyword::TABLE).map_err(syntax)?;
    let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = p.parse_object_name(false).map_err(syntax)?;
    p.expect_token(&Token::EOF).map_err(syntax)?;
    let (items, end) = split_items(&tokens[open..]).ok_or_else(|| syntax_at("end of input"))?;
    if let Some(extra) = tokens.get(open + end) {
        return Err(PgError::unsupported(format!(
            "CREATE TABLE (LIKE …) followed by {extra}"
        )));
    }
    let items = items
        .into_iter()
        .map(|item| match item.first() {
            Some(first) if keyword(first) == Keyword::LIKE => read_like(item),
            Some(_) => Ok(Item::Other(item)),
            None => Err(syntax_at(")")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CreateLike {
        temporary,
        if_not_exists,
        name,
        items,
    })
}

fn read_like(tokens: Vec<Token>) -> Result<Item, PgError> {
    let mut p = parser(tokens);
    p.expect_keyword(Keyword::LIKE).map_err(syntax)?;
    let source = p.parse_object_name(false).map_err(syntax)?;
    let mut including = Including::default();
    loop {
        let on = match p.parse_one_of_keywords(&[Keyword::INCLUDING, Keyword::EXCLUDING]) {
            Some(Keyword::INCLUDING) => true,
            Some(_) => false,
            None => break,
        };
        let token = p.next_token().token;
        let option = word(&token).ok_or_else(|| syntax_at(&token.to_string()))?.to_owned();
        including.set(&option, on)?;
    }
    let rest = p.next_token().token;
    if rest != Token::EOF {
        return Err(syntax_at(&rest.to_string()));
    }
    Ok(Item::Like { source, including })
}

/// The SQLite `CREATE TABLE` of a table (of the main or the temporary schema), and whether it is temporary.
fn table_sql(conn: &Connection, table: &str) -> Result<Option<(String, bool)>, PgError> {
    let found = conn.query_row(
        "SELECT sql, temp, type FROM (SELECT sql, 0 AS temp, type, name FROM sqlite_schema \
         UNION ALL SELECT sql, 1, type, name FROM sqlite_temp_schema) WHERE name = ?1 COLLATE NOCASE \
         ORDER BY temp DESC LIMIT 1",
        [table],
        |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, bool>(1)?,
                row.get::<_, String>(2)?,
            ))
        },
    );
    match found {
        Ok((Some(sql), temp, kind)) if kind == "table" => Ok(Some((sql, temp))),
        Ok(_) => Err(PgError::new(
            WRONG_OBJECT_TYPE,
            format!("\"{table}\" is not a table (LIKE copies only tables here)"),
        )),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(e) => Err(internal(e)),
    }
}

/// The SQLite text of a table's `CREATE INDEX`es.
fn index_sqls(conn: &Connection, table: &str, temporary: bool) -> Result<Vec<String>, PgError> {
    let schema = if temporary {
        "sqlite_temp_schema"
    } else {
        "sqlite_schema"
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT sql FROM {schema} WHERE type = 'index' AND tbl_name = ?1 COLLATE NOCASE AND sql IS NOT NULL \
             ORDER BY rowid"
        ))
        .map_err(internal)?;
    let rows = stmt
        .query_map([table], |row| row.get::<_, String>(0))
        .map_err(internal)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(internal)
}

fn fold(ident: &Ident) -> String {
    super::schema::fold_ident(ident)
}

/// Whether an expression is a call of `pg_nextval` (a serial or identity column's default).
fn is_nextval(expr: &Expr) -> bool {
    match expr {
        Expr::Nested(inner) => is_nextval(inner),
        Expr::Function(f) => {
            f.name.to_string().eq_ignore_ascii_case("pg_nextval") && matches!(f.args, FunctionArguments::List(_))
        }
        _ => false,
    }
}

/// Names PostgreSQL would choose, made unique against the database's relations and those chosen before.
struct Names<'a> {
    conn: &'a Connection,
    taken: Vec<String>,
}

impl Names<'_> {
    fn choose(&mut self, base: String) -> String {
        const ATTEMPTS_MAX: u32 = 1000;
        let free = |name: &str, taken: &[String]| {
            !taken.iter().any(|t| t.eq_ignore_ascii_case(name)) && !relation_named(self.conn, name)
        };
        let chosen = if free(&base, &self.taken) {
            base
        } else {
            (1..ATTEMPTS_MAX)
                .map(|n| format!("{base}{n}"))
                .find(|candidate| free(candidate, &self.taken))
                .unwrap_or(base)
        };
        self.taken.push(chosen.clone());
        chosen
    }
}

/// What one `LIKE` item gives the new table.
#[derive(Default)]
struct Copied {
    columns: Vec<ColumnDef>,
    constraints: Vec<TableConstraint>,
    /// Steps after the `CREATE TABLE`: recorded types, sequences, indexes, comments.
    steps: Vec<String>,
}

/// The `LIKE source` item copied into `table`.
fn copy(
    conn: &Connection,
    catalog: &Catalog,
    table: &str,
    temporary: bool,
    source_name: &ObjectName,
    including: Including,
    names: &mut Names<'_>,
) -> Result<Copied, PgError> {
    let source = super::schema::existing(catalog, source_name)?;
    let Some((sql, source_temporary)) = table_sql(conn, &source)? else {
        return Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{source_name}\" does not exist"),
        ));
    };
    let mut parsed = Parser::parse_sql(&SQLiteDialect {}, &sql).map_err(internal)?;
    let Some(Statement::CreateTable(create)) = parsed.pop() else {
        return Err(internal("the source's definition is not a CREATE TABLE"));
    };
    let (schema, own) = super::schema::schema_of(catalog, table);
    let own = own.to_owned();
    let mut copied = Copied::default();
    // A primary key's columns are NOT NULL in PostgreSQL whether or not the key is copied.
    let mut key_columns: Vec<String> = Vec::new();
    for constraint in &create.constraints {
        if let TableConstraint::PrimaryKey(pk) = constraint {
            key_columns.extend(pk.columns.iter().filter_map(|c| match &c.column.expr {
                Expr::Identifier(ident) => Some(fold(ident)),
                _ => None,
            }));
        }
    }
    if including.indexes
        && catalog
            .deferrable_uniques()
            .iter()
            .any(|u| u.table.eq_ignore_ascii_case(&source))
    {
        return Err(PgError::unsupported(
            "CREATE TABLE (LIKE … INCLUDING INDEXES) of a table with a deferrable unique constraint",
        ));
    }
    for mut column in create.columns {
        let name = fold(&column.name);
        let sequence = catalog.owned_sequences(&source, Some(&name)).next().cloned();
        let identity = sequence.as_ref().filter(|s| !s.identity.is_empty());
        let mut not_null = key_columns.contains(&name);
        let mut default_is_shared_sequence = false;
        let mut kept = Vec::new();
        for mut option in std::mem::take(&mut column.options) {
            let keep = match &mut option.option {
                ColumnOption::NotNull => {
                    not_null = true;
                    false
                }
                ColumnOption::Null => false,
                ColumnOption::Default(expr) => {
                    if identity.is_some() {
                        // An identity column's default is its own sequence: `IDENTITY` makes a new one.
                        false
                    } else {
                        default_is_shared_sequence = is_nextval(expr);
                        including.defaults
                    }
                }
                ColumnOption::Collation(_) => true,
                ColumnOption::PrimaryKey(_) => {
                    not_null = true;
                    if including.indexes {
                        option.name = Some(Ident::with_quote('"', names.choose(format!("{own}_pkey"))));
                    }
                    including.indexes
                }
                ColumnOption::Unique(_) => {
                    if including.indexes {
                        option.name = Some(Ident::with_quote('"', names.choose(format!("{own}_{name}_key"))));
                    }
                    including.indexes
                }
                ColumnOption::Check(_) => including.constraints,
                ColumnOption::Generated { .. } => including.generated,
                ColumnOption::ForeignKey(_) => false,
                // Anything else SQLite's text carries (AUTOINCREMENT, ON CONFLICT clauses) goes with its key.
                _ => including.indexes,
            };
            if keep {
                kept.push(option);
            }
        }
        let primary_key = kept.iter().any(|o| matches!(o.option, ColumnOption::PrimaryKey(_)));
        let mut options = Vec::new();
        // The key first, so the text reads as the translator writes it (`PRIMARY KEY NOT NULL DEFAULT …`).
        options.extend(
            kept.iter()
                .filter(|o| matches!(o.option, ColumnOption::PrimaryKey(_)))
                .cloned(),
        );
        if not_null {
            options.push(sqlparser::ast::ColumnOptionDef {
                name: None,
                option: ColumnOption::NotNull,
            });
        }
        options.extend(
            kept.into_iter()
                .filter(|o| !matches!(o.option, ColumnOption::PrimaryKey(_))),
        );
        column.options = options;
        if let Some(identity) = identity.filter(|_| including.identity) {
            if temporary {
                return Err(PgError::unsupported(
                    "CREATE TEMPORARY TABLE (LIKE … INCLUDING IDENTITY) of a table with an identity column",
                ));
            }
            let (sequence_name, steps) =
                identity_sequence(conn, table, &name, &identity.name, &identity.identity, names)?;
            column.options.push(sqlparser::ast::ColumnOptionDef {
                name: None,
                option: ColumnOption::Default(Expr::Nested(Box::new(super::sequence::nextval_default(&sequence_name)))),
            });
            copied.steps.extend(steps);
        } else if primary_key && default_is_shared_sequence && including.defaults {
            // The rowid would be handed out instead of the source sequence's next value.
            column.data_type = DataType::Int(None);
        }
        if let Some(ty) = catalog.column_type(&source, &name) {
            copied.steps.push(catalog::record_column(table, &name, ty));
        }
        copied.columns.push(column);
    }
    for mut constraint in create.constraints {
        let keep = match &mut constraint {
            TableConstraint::PrimaryKey(pk) => {
                pk.name = Some(Ident::with_quote('"', names.choose(format!("{own}_pkey"))));
                including.indexes
            }
            TableConstraint::Unique(unique) => {
                let columns: Vec<String> = unique
                    .columns
                    .iter()
                    .map(|c| match &c.column.expr {
                        Expr::Identifier(ident) => fold(ident),
                        _ => "expr".to_owned(),
                    })
                    .collect();
                unique.name = Some(Ident::with_quote(
                    '"',
                    names.choose(format!("{own}_{}_key", columns.join("_"))),
                ));
                including.indexes
            }
            TableConstraint::Check(_) => including.constraints,
            _ => false,
        };
        if keep {
            copied.constraints.push(constraint);
        }
    }
    if including.indexes {
        for sql in index_sqls(conn, &source, source_temporary)? {
            copied.steps.push(copy_index(&sql, table, &schema, &own, names)?);
        }
    }
    if including.comments {
        copied.steps.push(super::comment::CREATE_COMMENTS_TABLE.to_owned());
        copied.steps.push(format!(
            "INSERT OR REPLACE INTO _cambium_comments (kind, object, sub, comment) SELECT kind, {}, sub, comment \
             FROM _cambium_comments WHERE kind = 'column' AND object = {}",
            quote_literal(table),
            quote_literal(&source)
        ));
    }
    Ok(copied)
}

/// A new identity sequence for `table.column`, with the options of the source's `sequence`.
fn identity_sequence(
    conn: &Connection,
    table: &str,
    column: &str,
    sequence: &str,
    identity: &str,
    names: &mut Names<'_>,
) -> Result<(String, Vec<String>), PgError> {
    let source = conn
        .query_row(
            &format!("SELECT {} FROM _cambium_sequences WHERE name = ?1", Sequence::COLUMNS),
            [sequence],
            |row| Sequence::from_row(row, 0),
        )
        .map_err(internal)?;
    let name = names.choose(crate::sequence::serial_name(table, column));
    let copy = Sequence {
        name: name.clone(),
        last_value: source.start,
        is_called: false,
        ..source
    };
    let steps = super::sequence::create_steps(&copy, Some((table, column)), identity);
    Ok((name, steps))
}

/// A source index's `CREATE INDEX` made for the new table, under PostgreSQL's default name for a copy
/// (`table_keys_idx`, each key named by [`key_name`]).
fn copy_index(sql: &str, table: &str, schema: &str, own: &str, names: &mut Names<'_>) -> Result<String, PgError> {
    let mut parsed = Parser::parse_sql(&SQLiteDialect {}, sql).map_err(internal)?;
    let Some(Statement::CreateIndex(mut index)) = parsed.pop() else {
        return Err(internal("an index's definition is not a CREATE INDEX"));
    };
    let columns: Vec<String> = index.columns.iter().map(|c| key_name(&c.column.expr)).collect();
    let name = names.choose(format!("{own}_{}_idx", columns.join("_")));
    index.name = Some(ObjectName::from(vec![Ident::with_quote(
        '"',
        // An index lives in its table's schema.
        crate::schemas::sqlite_name(schema, &name),
    )]));
    index.table_name = ObjectName::from(vec![Ident::with_quote('"', table.to_owned())]);
    index.if_not_exists = false;
    Ok(Statement::CreateIndex(index).to_string())
}

/// The name PostgreSQL gives an index key in a default index name: a column's name, a function call's name
/// (as PostgreSQL spells it: the translator's `pg_` prefixes taken off), else `expr`.
fn key_name(expr: &Expr) -> String {
    match expr {
        Expr::Nested(inner) => key_name(inner),
        Expr::Identifier(ident) => fold(ident),
        Expr::Function(f) => {
            let name = f
                .name
                .0
                .last()
                .map(ToString::to_string)
                .unwrap_or_default()
                .to_ascii_lowercase();
            let name = name.trim_matches('"');
            let name = name.strip_prefix("pg_t_").unwrap_or(name);
            name.strip_prefix("pg_").unwrap_or(name).to_owned()
        }
        _ => "expr".to_owned(),
    }
}

/// `CREATE TABLE … (LIKE …)` as text (a statement sqlparser did read, printed again).
pub(super) fn create_like_text(conn: &Connection, catalog: &Catalog, sql: &str) -> Result<Translation, PgError> {
    let tokens = sqlparser::tokenizer::Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize()
        .map_err(|e| PgError::new(SYNTAX_ERROR, e.to_string()))?;
    let tokens: Vec<Token> = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    if !is_create_like(&tokens) {
        return Err(PgError::unsupported("this form of CREATE TABLE … LIKE"));
    }
    create_like(conn, catalog, &tokens)
}

/// `CREATE TABLE … (LIKE …)`.
pub(super) fn create_like(conn: &Connection, catalog: &Catalog, tokens: &[Token]) -> Result<Translation, PgError> {
    let statement = read(tokens)?;
    let table = if statement.temporary {
        super::ddl::temporary_name(&statement.name)?
    } else {
        super::schema::created(catalog, &statement.name)?
    };
    super::ddl::refuse_shadowing(conn, &table, statement.temporary)?;
    if catalog::is_internal_table(&table) {
        return Err(PgError::new(
            crate::error::RESERVED_NAME,
            format!("the name \"{table}\" is reserved for Cambium's catalog"),
        ));
    }
    if relation_named(conn, &table) {
        if statement.if_not_exists {
            return Ok(super::ddl::ddl("CREATE TABLE", Vec::new()));
        }
        return Err(PgError::new(
            crate::error::DUPLICATE_TABLE,
            format!(
                "relation \"{}\" already exists",
                super::schema::schema_of(catalog, &table).1
            ),
        ));
    }
    let mut names = Names {
        conn,
        taken: Vec::new(),
    };
    let mut columns: Vec<ColumnDef> = Vec::new();
    let mut constraints: Vec<TableConstraint> = Vec::new();
    let mut steps: Vec<String> = Vec::new();
    // The items written beside LIKE, translated together as an ordinary CREATE TABLE; their columns are then
    // placed where each was written.
    let others: Vec<&Vec<Token>> = statement
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Other(tokens) => Some(tokens),
            Item::Like { .. } => None,
        })
        .collect();
    let mut other_columns = std::collections::VecDeque::new();
    let mut other_constraints = Vec::new();
    if !others.is_empty() {
        let (defs, other_steps) = translate_others(conn, catalog, &statement, &others)?;
        for def in defs.columns {
            other_columns.push_back(def);
        }
        other_constraints = defs.constraints;
        steps.extend(other_steps);
    }
    for item in &statement.items {
        match item {
            Item::Like { source, including } => {
                let copied = copy(
                    conn,
                    catalog,
                    &table,
                    statement.temporary,
                    source,
                    *including,
                    &mut names,
                )?;
                columns.extend(copied.columns);
                constraints.extend(copied.constraints);
                steps.extend(copied.steps);
            }
            Item::Other(tokens) => {
                if is_column(tokens) {
                    let def = other_columns
                        .pop_front()
                        .ok_or_else(|| internal("a column written beside LIKE went missing"))?;
                    columns.push(def);
                }
            }
        }
    }
    constraints.extend(other_constraints);
    let mut seen: Vec<String> = Vec::new();
    for column in &columns {
        let name = fold(&column.name);
        if seen.iter().any(|s| s.eq_ignore_ascii_case(&name)) {
            return Err(PgError::new(
                DUPLICATE_COLUMN,
                format!("column \"{name}\" specified more than once"),
            ));
        }
        seen.push(name);
    }
    let parts: Vec<String> = columns
        .iter()
        .map(ToString::to_string)
        .chain(constraints.iter().map(ToString::to_string))
        .collect();
    let create = format!(
        "CREATE {}TABLE {} ({})",
        if statement.temporary { "TEMP " } else { "" },
        quote_ident(&table),
        parts.join(", ")
    );
    let mut all = vec![create];
    all.extend(steps);
    Ok(super::ddl::ddl("CREATE TABLE", all))
}

/// Whether any relation (of the main or the temporary schema) has this name.
fn relation_named(conn: &Connection, name: &str) -> bool {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?1 COLLATE NOCASE) \
         OR EXISTS (SELECT 1 FROM sqlite_temp_schema WHERE name = ?1 COLLATE NOCASE)",
        [name],
        |row| row.get(0),
    )
    .unwrap_or(false)
}

/// Whether an item written beside `LIKE` is a column definition (not a table constraint).
fn is_column(tokens: &[Token]) -> bool {
    !matches!(
        tokens.first().map(keyword),
        Some(
            Keyword::CONSTRAINT
                | Keyword::PRIMARY
                | Keyword::UNIQUE
                | Keyword::CHECK
                | Keyword::FOREIGN
                | Keyword::EXCLUDE
        )
    )
}

/// The SQLite column definitions and constraints of the items written beside `LIKE` (translated as a
/// `CREATE TABLE` of them alone), and the steps that go with them (recorded types, sequences).
fn translate_others(
    conn: &Connection,
    catalog: &Catalog,
    statement: &CreateLike,
    others: &[&Vec<Token>],
) -> Result<(CreateTable, Vec<String>), PgError> {
    let mut text = format!(
        "CREATE {}TABLE {} (",
        if statement.temporary { "TEMPORARY " } else { "" },
        statement.name
    );
    for (i, item) in others.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        for token in item.iter() {
            text.push_str(&token.to_string());
            text.push(' ');
        }
    }
    text.push(')');
    let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &text).map_err(syntax)?;
    let Some(Statement::CreateTable(mut create)) = parsed.pop() else {
        return Err(internal("the items beside LIKE are not a table's"));
    };
    let translation = super::ddl::create_table(conn, catalog, &mut create)?;
    // The translation's steps: the columns table's creation (`ddl`), the CREATE TABLE, then the rest.
    let mut steps = translation.steps.into_iter().skip(1);
    let definition = steps
        .next()
        .ok_or_else(|| internal("no CREATE TABLE for the items beside LIKE"))?;
    let rest: Vec<String> = steps.collect();
    let mut parsed = Parser::parse_sql(&SQLiteDialect {}, &definition).map_err(internal)?;
    let Some(Statement::CreateTable(sqlite)) = parsed.pop() else {
        return Err(internal("the items beside LIKE did not make a CREATE TABLE"));
    };
    Ok((sqlite, rest))
}

#[cfg(test)]
mod tests {
    use crate::functions::testing::row_after;

    fn run(setup: &[&str], sql: &str) -> Vec<Option<String>> {
        row_after(setup, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The SQLite constraint `sql` (after `setup`) breaks: its message (the compute maps it to 23xxx).
    fn violation(setup: &[&str], sql: &str) -> String {
        let conn = rusqlite::Connection::open_in_memory().expect("memory database");
        let mut dialect = crate::Dialect::new(&conn, "db", "user", 1).expect("installs");
        for statement in setup.iter().chain(std::iter::once(&sql)) {
            let translated = dialect
                .translate(&conn, statement)
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
            let crate::Translated::Statements(list) = &*translated else {
                panic!("not a statement: {statement}");
            };
            for step in list.iter().flat_map(|t| &t.steps) {
                if let Err(e) = conn.execute_batch(step) {
                    assert_eq!(*statement, sql, "{step}: {e}");
                    return e.to_string();
                }
            }
        }
        panic!("{sql}: no constraint failed");
    }

    fn code(setup: &[&str], sql: &str) -> &'static str {
        match row_after(setup, sql) {
            Ok(row) => panic!("{sql}: expected an error, got {row:?}"),
            Err(e) => e.code,
        }
    }

    const SOURCE: &[&str] = &[
        "CREATE TABLE p (id int PRIMARY KEY)",
        "INSERT INTO p VALUES (1)",
        "CREATE TABLE s (id serial PRIMARY KEY, a int NOT NULL DEFAULT 7 CHECK (a > 0), b text UNIQUE, \
         d int REFERENCES p(id), e int GENERATED ALWAYS AS (a * 2) STORED, CONSTRAINT two CHECK (a < 100))",
        "CREATE INDEX ON s (lower(b))",
        "CREATE UNIQUE INDEX si ON s (a) WHERE a > 5",
        "COMMENT ON COLUMN s.b IS 'the b'",
        "INSERT INTO s (a, b) VALUES (1, 'x')",
    ];

    fn with(extra: &[&str]) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = SOURCE.to_vec();
        for e in extra {
            all.push(Box::leak(e.to_string().into_boxed_str()));
        }
        all
    }

    #[test]
    fn without_options_copies_names_types_and_not_null_only() {
        let setup = with(&["CREATE TABLE c (LIKE s)"]);
        // No default: NOT NULL a refuses a row without it; no check, no key, no foreign key, no generation.
        assert_eq!(
            violation(&setup, "INSERT INTO c (id, b) VALUES (1, 'x')"),
            "NOT NULL constraint failed: c.a"
        );
        assert_eq!(
            run(
                &setup,
                "INSERT INTO c (id, a, b, d, e) VALUES (1, -1, 'x', 42, 5), (1, 500, 'x', 43, 6) RETURNING e"
            ),
            [Some("5".to_owned())]
        );
        assert_eq!(
            run(
                &with(&["CREATE TABLE c (LIKE s)", "INSERT INTO c VALUES (1, 1, 'b', 1, 1)"]),
                "SELECT pg_typeof(id)::text, pg_typeof(b)::text FROM c"
            ),
            [Some("integer".to_owned()), Some("text".to_owned())]
        );
    }

    #[test]
    fn including_all_copies_keys_checks_defaults_indexes_and_comments() {
        let setup = with(&["CREATE TABLE c (LIKE s INCLUDING ALL)"]);
        // The serial column's default is the source's sequence (already at 1): the next value is 2.
        assert_eq!(
            run(&setup, "INSERT INTO c (b) VALUES ('y') RETURNING id, a, e"),
            [Some("2".to_owned()), Some("7".to_owned()), Some("14".to_owned())]
        );
        assert_eq!(
            violation(&setup, "INSERT INTO c (a, b) VALUES (-1, 'z')"),
            "CHECK constraint failed: a > 0"
        );
        assert_eq!(
            violation(&setup, "INSERT INTO c (a, b) VALUES (200, 'z')"),
            "CHECK constraint failed: two"
        );
        assert_eq!(
            violation(&setup, "INSERT INTO c (a, b) VALUES (1, 'z'), (2, 'z')"),
            "UNIQUE constraint failed: c.b"
        );
        assert_eq!(
            violation(&setup, "INSERT INTO c (a, b) VALUES (6, 'z1'), (6, 'z2')"),
            "UNIQUE constraint failed: c.a"
        );
        // Foreign keys are never copied.
        assert_eq!(
            run(&setup, "INSERT INTO c (a, b, d) VALUES (1, 'q', 99) RETURNING d"),
            [Some("99".to_owned())]
        );
        assert_eq!(
            run(
                &setup,
                "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'c'"
            ),
            [Some("c_a_idx,c_b_key,c_lower_idx,c_pkey".to_owned())]
        );
        assert_eq!(
            run(&setup, "SELECT col_description('c'::regclass, 3)"),
            [Some("the b".to_owned())]
        );
    }

    #[test]
    fn a_copy_in_another_schema_keeps_its_indexes_in_that_schema() {
        let setup = [
            "CREATE SCHEMA app",
            "CREATE TABLE app.s (a int, b text)",
            "CREATE INDEX ON app.s (a)",
            "CREATE TABLE app.c (LIKE app.s INCLUDING INDEXES)",
        ];
        assert_eq!(
            run(
                &setup,
                "SELECT schemaname, indexname FROM pg_indexes WHERE tablename = 'c'"
            ),
            [Some("app".to_owned()), Some("c_a_idx".to_owned())]
        );
    }

    #[test]
    fn identity_gets_a_sequence_of_its_own() {
        let setup = [
            "CREATE TABLE i (id bigint GENERATED ALWAYS AS IDENTITY (START WITH 10) PRIMARY KEY, v text)",
            "INSERT INTO i (v) VALUES ('a'), ('b')",
            "CREATE TABLE j (LIKE i INCLUDING IDENTITY INCLUDING INDEXES)",
            "INSERT INTO j (v) VALUES ('x')",
        ];
        assert_eq!(run(&setup, "SELECT id FROM j"), [Some("10".to_owned())]);
        assert_eq!(code(&setup, "INSERT INTO j (id, v) VALUES (1, 'y')"), "428C9");
        // Without IDENTITY the column is plain and NOT NULL.
        let plain = [
            "CREATE TABLE i (id bigint GENERATED ALWAYS AS IDENTITY, v text)",
            "CREATE TABLE j (LIKE i INCLUDING DEFAULTS)",
        ];
        assert_eq!(
            violation(&plain, "INSERT INTO j (v) VALUES ('x')"),
            "NOT NULL constraint failed: j.id"
        );
    }

    #[test]
    fn composite_keys_and_items_beside_like() {
        let setup = [
            "CREATE TABLE composite (a int, b int, c text, PRIMARY KEY (a, b))",
            "CREATE TABLE lc (LIKE composite INCLUDING ALL)",
        ];
        assert_eq!(
            violation(&setup, "INSERT INTO lc VALUES (1, 1, 'x'), (1, 1, 'y')"),
            "UNIQUE constraint failed: lc.a, lc.b"
        );
        let plain = [
            "CREATE TABLE composite (a int, b int, c text, PRIMARY KEY (a, b))",
            "CREATE TABLE lc (LIKE composite)",
            "INSERT INTO lc VALUES (1, 1, 'x'), (1, 1, 'y')",
        ];
        assert_eq!(run(&plain, "SELECT count(*) FROM lc"), [Some("2".to_owned())]);
        assert_eq!(
            violation(&plain, "INSERT INTO lc (c) VALUES ('z')"),
            "NOT NULL constraint failed: lc.a"
        );
        let beside = [
            "CREATE TABLE composite (a int, b int, c text, PRIMARY KEY (a, b))",
            "CREATE TABLE wide (id serial PRIMARY KEY, LIKE composite, note text DEFAULT 'n')",
            "INSERT INTO wide (a, b, c) VALUES (1, 2, 'x')",
        ];
        assert_eq!(
            run(&beside, "SELECT id, a, b, c, note FROM wide"),
            ["1", "1", "2", "x", "n"].map(|s| Some(s.to_owned()))
        );
        assert_eq!(
            run(&beside, "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'wide'"),
            [Some("id,a,b,c,note".to_owned())]
        );
        assert_eq!(code(&setup, "CREATE TABLE twice (a int, LIKE composite)"), "42701");
    }

    #[test]
    fn bad_forms_are_refused_clearly() {
        assert_eq!(code(&[], "CREATE TABLE c (LIKE nothing)"), "42P01");
        assert_eq!(
            code(
                &["CREATE TABLE t (a int)"],
                "CREATE TABLE c (LIKE t INCLUDING EVERYTHING)"
            ),
            "42601"
        );
        assert_eq!(
            code(
                &["CREATE TABLE t (a int)", "CREATE VIEW v AS SELECT 1 AS x"],
                "CREATE TABLE c (LIKE v)"
            ),
            "42809"
        );
        assert_eq!(code(&["CREATE TABLE t (a int)"], "CREATE TABLE t (LIKE t)"), "42P07");
        assert_eq!(
            run(
                &["CREATE TABLE t (a int)", "CREATE TABLE IF NOT EXISTS t (LIKE t)"],
                "SELECT count(*) FROM t"
            ),
            [Some("0".to_owned())]
        );
        assert_eq!(
            run(
                &[
                    "CREATE TABLE t (a int)",
                    "CREATE TEMP TABLE tt (LIKE t)",
                    "INSERT INTO tt VALUES (3)"
                ],
                "SELECT a FROM tt"
            ),
            [Some("3".to_owned())]
        );
    }
}
