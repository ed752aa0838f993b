//! Statements sqlparser 0.64 does not parse, read here with its tokenizer and parser primitives (never by
//! matching text): `ALTER SEQUENCE`, `ALTER TYPE … OWNER TO`, `ALTER TABLE … SET SCHEMA`, `FOR NO KEY UPDATE`/`FOR KEY SHARE`, `CREATE TABLE (LIKE …)` (`like`), and an identity column's `SEQUENCE NAME`
//! option (`ALTER TABLE … ALTER COLUMN c ADD GENERATED … AS IDENTITY (SEQUENCE NAME s …)`, as pg_dump writes
//! it), which is taken out of the tokens before sqlparser reads the rest; the index forms are `indexes`'.

use rusqlite::Connection;
use sqlparser::ast::{ObjectName, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer, Word};

use super::sequence::relation_name;
use super::{Kind, Translation};
use crate::catalog::{quote_literal, Catalog};
use crate::error::{PgError, SYNTAX_ERROR, UNDEFINED_TABLE};
use crate::sequence::{self, Options};

/// The statement, if it is one of the forms this module reads; `None` leaves it to SQLite as written.
pub(crate) fn translate(conn: &Connection, catalog: &Catalog, sql: &str) -> Result<Option<Translation>, PgError> {
    let dialect = PostgreSqlDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return Ok(None);
    };
    let mut tokens: Vec<Token> = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    while matches!(tokens.last(), Some(Token::SemiColon)) {
        tokens.pop();
    }
    if tokens.contains(&Token::SemiColon) {
        return Ok(None);
    }
    let words: Vec<Keyword> = tokens.iter().take(3).map(keyword).collect();
    match words.as_slice() {
        [Keyword::ALTER, Keyword::INDEX, ..] => super::indexes::alter_index(conn, catalog, tokens),
        [Keyword::DROP, Keyword::INDEX, Keyword::CONCURRENTLY] => {
            super::indexes::drop_index_concurrently(conn, catalog, tokens)
        }
        [Keyword::REINDEX, ..] => super::indexes::reindex(conn, catalog, tokens).map(Some),
        [Keyword::ALTER, Keyword::SEQUENCE, ..] => alter_sequence(conn, catalog, tokens).map(Some),
        [Keyword::ALTER, Keyword::TYPE, ..] => alter_type(tokens),
        [Keyword::ALTER, Keyword::TABLE | Keyword::VIEW, ..] if set_schema_target(&tokens).is_some() => {
            set_schema(conn, catalog, tokens).map(Some)
        }
        [Keyword::ALTER, Keyword::TABLE, ..] => identity_with_sequence_name(conn, catalog, tokens),
        // (In a subquery of a write too: `DELETE … WHERE id IN (SELECT … FOR NO KEY UPDATE SKIP LOCKED)`.)
        [Keyword::SELECT | Keyword::WITH | Keyword::UPDATE | Keyword::DELETE | Keyword::INSERT, ..] => {
            weaker_row_locks(conn, catalog, tokens)
        }
        [Keyword::CREATE, ..] if super::like::is_create_like(&tokens) => {
            super::like::create_like(conn, catalog, &tokens).map(Some)
        }
        _ => Ok(None),
    }
}

/// `FOR NO KEY UPDATE` and `FOR KEY SHARE`, which sqlparser does not know, read as `FOR UPDATE` and `FOR
/// SHARE`: the translator drops row locks anyway (a writer excludes every other writer in SQLite).
fn weaker_row_locks(conn: &Connection, catalog: &Catalog, tokens: Vec<Token>) -> Result<Option<Translation>, PgError> {
    let mut kept: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut changed = false;
    let mut i = 0;
    while i < tokens.len() {
        let after_for = kept.last().is_some_and(|t| keyword(t) == Keyword::FOR);
        let next = |k: usize| tokens.get(i + k).map_or(Keyword::NoKeyword, keyword);
        if after_for && next(0) == Keyword::NO && next(1) == Keyword::KEY && next(2) == Keyword::UPDATE {
            i += 2;
            changed = true;
        } else if after_for && next(0) == Keyword::KEY && next(1) == Keyword::SHARE {
            i += 1;
            changed = true;
        }
        if let Some(token) = tokens.get(i) {
            kept.push(token.clone());
        }
        i += 1;
    }
    if !changed {
        return Ok(None);
    }
    let statement = parser(kept).parse_statement().map_err(syntax)?;
    super::translate_statement(conn, catalog, statement)
}

fn keyword(token: &Token) -> Keyword {
    match token {
        Token::Word(Word { keyword, .. }) => *keyword,
        _ => Keyword::NoKeyword,
    }
}

fn syntax(error: ParserError) -> PgError {
    PgError::new(SYNTAX_ERROR, error.to_string())
}

fn parser(tokens: Vec<Token>) -> Parser<'static> {
    static DIALECT: PostgreSqlDialect = PostgreSqlDialect {};
    Parser::new(&DIALECT).with_tokens(tokens)
}

/// A signed integer literal.
fn integer(p: &mut Parser<'_>) -> Result<i64, PgError> {
    let negative = p.consume_token(&Token::Minus);
    if !negative {
        let _ = p.consume_token(&Token::Plus);
    }
    let token = p.next_token();
    let Token::Number(text, _) = &token.token else {
        return Err(PgError::new(
            SYNTAX_ERROR,
            format!("syntax error at or near \"{token}\""),
        ));
    };
    let value: i64 = text
        .parse()
        .map_err(|_| PgError::new(SYNTAX_ERROR, format!("syntax error at or near \"{text}\"")))?;
    Ok(if negative { -value } else { value })
}

/// What an `ALTER SEQUENCE` changes.
#[derive(Default)]
struct AlterSequence {
    options: Options,
    owned_by: Option<Option<ObjectName>>,
    rename_to: Option<String>,
}

fn parse_alter_sequence(p: &mut Parser<'_>) -> Result<(bool, ObjectName, AlterSequence), PgError> {
    p.expect_keyword(Keyword::ALTER).map_err(syntax)?;
    p.expect_keyword(Keyword::SEQUENCE).map_err(syntax)?;
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = p.parse_object_name(false).map_err(syntax)?;
    let mut alter = AlterSequence::default();
    let o = &mut alter.options;
    loop {
        if p.parse_keyword(Keyword::AS) {
            let data_type = p.parse_data_type().map_err(syntax)?;
            o.data_type = Some(match crate::types::from_data_type(&data_type) {
                crate::types::Written::Type(ty) => sequence::sequence_type(ty)?,
                _ => sequence::sequence_type(crate::types::PgType::TEXT)?,
            });
        } else if p.parse_keyword(Keyword::INCREMENT) {
            let _ = p.parse_keyword(Keyword::BY);
            o.increment = Some(integer(p)?);
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MINVALUE]) {
            o.min = Some(None);
        } else if p.parse_keyword(Keyword::MINVALUE) {
            o.min = Some(Some(integer(p)?));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MAXVALUE]) {
            o.max = Some(None);
        } else if p.parse_keyword(Keyword::MAXVALUE) {
            o.max = Some(Some(integer(p)?));
        } else if p.parse_keyword(Keyword::START) {
            let _ = p.parse_keyword(Keyword::WITH);
            o.start = Some(integer(p)?);
        } else if p.parse_keyword(Keyword::RESTART) {
            let with = p.parse_keyword(Keyword::WITH);
            let number_next = matches!(p.peek_token().token, Token::Number(..) | Token::Minus | Token::Plus);
            o.restart = Some(if with || number_next { Some(integer(p)?) } else { None });
        } else if p.parse_keyword(Keyword::CACHE) {
            o.cache = Some(integer(p)?);
        } else if p.parse_keywords(&[Keyword::NO, Keyword::CYCLE]) {
            o.cycle = Some(false);
        } else if p.parse_keyword(Keyword::CYCLE) {
            o.cycle = Some(true);
        } else if p.parse_keywords(&[Keyword::OWNED, Keyword::BY]) {
            let owner = p.parse_object_name(false).map_err(syntax)?;
            let none = owner.to_string().eq_ignore_ascii_case("none");
            alter.owned_by = Some((!none).then_some(owner));
        } else if p.parse_keywords(&[Keyword::OWNER, Keyword::TO]) {
            // One role owns everything.
            p.parse_identifier().map_err(syntax)?;
        } else if p.parse_keywords(&[Keyword::RENAME, Keyword::TO]) {
            let to = p.parse_identifier().map_err(syntax)?;
            alter.rename_to = Some(super::schema::fold_ident(&to));
        } else if p.parse_keywords(&[Keyword::SET, Keyword::SCHEMA]) {
            return Err(PgError::unsupported("ALTER SEQUENCE … SET SCHEMA"));
        } else {
            break;
        }
    }
    let rest = p.peek_token();
    if rest.token != Token::EOF {
        return Err(PgError::new(
            SYNTAX_ERROR,
            format!("syntax error at or near \"{rest}\""),
        ));
    }
    Ok((if_exists, name, alter))
}

/// `ALTER SEQUENCE [IF EXISTS] name options | OWNED BY t.c | NONE | OWNER TO r | RENAME TO n`. The options are
/// applied when the statement runs, to the state the sequence has then.
fn alter_sequence(conn: &Connection, catalog: &Catalog, tokens: Vec<Token>) -> Result<Translation, PgError> {
    let mut p = parser(tokens);
    let (if_exists, name, mut alter) = parse_alter_sequence(&mut p)?;
    let name = relation_name(catalog, &name)?;
    // A sequence renamed stays in its schema.
    alter.rename_to = alter
        .rename_to
        .map(|to| crate::schemas::sqlite_name(&super::schema::schema_of(catalog, &name).0, &to));
    let mut translation = Translation::single(String::new(), Kind::Other("ALTER SEQUENCE".to_owned()));
    translation.steps.clear();
    let Some(entry) = catalog.sequence(&name) else {
        if if_exists {
            return Ok(translation);
        }
        return Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{name}\" does not exist"),
        ));
    };
    let name = entry.name.clone();
    let mut steps = Vec::new();
    if alter.options != Options::default() {
        steps.push(format!(
            "SELECT pg_alter_sequence({}, {})",
            quote_literal(&name),
            quote_literal(&alter.options.to_json())
        ));
    }
    if let Some(owner) = alter.owned_by {
        let (table, column) = match owner {
            Some(owner) => {
                let (t, c) = super::sequence::owner_of(conn, catalog, &owner)?;
                (quote_literal(&t), quote_literal(&c))
            }
            None => ("NULL".to_owned(), "NULL".to_owned()),
        };
        steps.push(format!(
            "UPDATE _cambium_sequences SET owner_table = {table}, owner_column = {column} WHERE name = {}",
            quote_literal(&name)
        ));
    }
    if let Some(to) = alter.rename_to {
        steps.extend(super::sequence::rename_steps(conn, &name, &to)?);
    }
    // The translator's snapshot of the sequences (owners) follows SQLite's schema version: moved here.
    steps.extend(crate::catalog::BUMP_SCHEMA_VERSION.iter().map(|s| (*s).to_owned()));
    translation.steps = steps;
    Ok(translation)
}

/// Where `SET SCHEMA` starts in `ALTER TABLE|VIEW … SET SCHEMA s` (the last three tokens), if it is that form.
fn set_schema_target(tokens: &[Token]) -> Option<usize> {
    let at = tokens.len().checked_sub(3)?;
    (keyword(&tokens[at]) == Keyword::SET && keyword(&tokens[at + 1]) == Keyword::SCHEMA).then_some(at)
}

/// `ALTER TABLE|VIEW [IF EXISTS] [ONLY] name SET SCHEMA s`: the relation moved (`translate::schema_move`).
fn set_schema(conn: &Connection, catalog: &Catalog, mut tokens: Vec<Token>) -> Result<Translation, PgError> {
    let at = set_schema_target(&tokens).expect("checked by the caller");
    let schema_tokens = tokens.split_off(at + 2);
    tokens.truncate(at);
    let mut p = parser(tokens);
    p.expect_keyword(Keyword::ALTER).map_err(syntax)?;
    let _kind = p.parse_one_of_keywords(&[Keyword::TABLE, Keyword::VIEW]);
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let _only = p.parse_keyword(Keyword::ONLY);
    let name = p.parse_object_name(false).map_err(syntax)?;
    if p.peek_token().token != Token::EOF {
        return Err(PgError::new(
            SYNTAX_ERROR,
            format!("syntax error at or near \"{}\"", p.peek_token()),
        ));
    }
    let to = parser(schema_tokens).parse_identifier().map_err(syntax)?;
    let table = super::schema::existing(catalog, &name)?;
    let mut translation = Translation::single(String::new(), Kind::Other("ALTER TABLE".to_owned()));
    translation.steps.clear();
    if !catalog.relation_exists(&table) {
        if if_exists {
            return Ok(translation);
        }
        return Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{name}\" does not exist"),
        ));
    }
    translation.steps = super::schema_move::set_schema(conn, catalog, &table, &super::schema::fold_ident(&to))?;
    Ok(translation)
}

/// `ALTER TYPE name OWNER TO role`: one role owns everything. Other `ALTER TYPE` forms are sqlparser's.
fn alter_type(tokens: Vec<Token>) -> Result<Option<Translation>, PgError> {
    let mut p = parser(tokens);
    p.expect_keyword(Keyword::ALTER).map_err(syntax)?;
    p.expect_keyword(Keyword::TYPE).map_err(syntax)?;
    p.parse_object_name(false).map_err(syntax)?;
    if !p.parse_keywords(&[Keyword::OWNER, Keyword::TO]) {
        return Ok(None);
    }
    p.parse_identifier().map_err(syntax)?;
    if p.peek_token().token != Token::EOF {
        return Ok(None);
    }
    let mut translation = Translation::single(String::new(), Kind::Other("ALTER TYPE".to_owned()));
    translation.steps.clear();
    Ok(Some(translation))
}

/// `ALTER TABLE … ADD GENERATED … AS IDENTITY (SEQUENCE NAME s …)`: the `SEQUENCE NAME s` tokens taken out,
/// the rest parsed by sqlparser, and `s` given to the DDL.
fn identity_with_sequence_name(
    conn: &Connection,
    catalog: &Catalog,
    mut tokens: Vec<Token>,
) -> Result<Option<Translation>, PgError> {
    let Some(at) = tokens
        .windows(2)
        .position(|w| keyword(&w[0]) == Keyword::SEQUENCE && keyword(&w[1]) == Keyword::NAME)
    else {
        return Ok(None);
    };
    // The name: identifiers joined by periods.
    let mut end = at + 2;
    while end < tokens.len() {
        let is_name = matches!(tokens[end], Token::Word(_));
        end += 1;
        if !is_name || tokens.get(end) != Some(&Token::Period) {
            break;
        }
        end += 1;
    }
    let name_tokens: Vec<Token> = tokens.drain(at..end).skip(2).collect();
    let name = parser(name_tokens).parse_object_name(false).map_err(syntax)?;
    let name = super::schema::created(catalog, &name)?;
    let statement = parser(tokens).parse_statement().map_err(syntax)?;
    let Statement::AlterTable(mut alter) = statement else {
        return Ok(None);
    };
    super::alter::alter_table(conn, catalog, &mut alter, Some(&name)).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alter(sql: &str) -> Result<(bool, String, AlterSequence), PgError> {
        let tokens: Vec<Token> = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .expect("tokens")
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .collect();
        let (if_exists, name, alter) = parse_alter_sequence(&mut parser(tokens))?;
        Ok((if_exists, name.to_string(), alter))
    }

    #[test]
    fn alter_sequence_options_are_read() {
        let (if_exists, name, a) =
            alter("ALTER SEQUENCE IF EXISTS public.s RESTART WITH 5 INCREMENT BY -2 NO MAXVALUE CYCLE")
                .expect("parses");
        assert!(if_exists);
        assert_eq!(name, "public.s");
        assert_eq!(a.options.restart, Some(Some(5)));
        assert_eq!(a.options.increment, Some(-2));
        assert_eq!(a.options.max, Some(None));
        assert_eq!(a.options.cycle, Some(true));
        let (_, _, a) = alter("ALTER SEQUENCE s RESTART").expect("parses");
        assert_eq!(a.options.restart, Some(None));
        let (_, _, a) = alter("ALTER SEQUENCE s OWNED BY public.t.id").expect("parses");
        assert_eq!(
            a.owned_by.flatten().map(|n| n.to_string()).as_deref(),
            Some("public.t.id")
        );
        let (_, _, a) = alter("ALTER SEQUENCE s OWNED BY NONE").expect("parses");
        assert_eq!(a.owned_by, Some(None));
        assert_eq!(
            alter("ALTER SEQUENCE s RESTART WITH").err().map(|e| e.code),
            Some(SYNTAX_ERROR)
        );
        assert_eq!(
            alter("ALTER SEQUENCE s BOGUS").err().map(|e| e.code),
            Some(SYNTAX_ERROR)
        );
    }
}
