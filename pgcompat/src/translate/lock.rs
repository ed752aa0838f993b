//! `LOCK [TABLE] [ONLY] name [*] [, …] [IN mode MODE] [NOWAIT]`, which the parser does not know, read with
//! sqlparser's tokenizer (pg_dump locks every table it dumps `IN ACCESS SHARE MODE`).
//!
//! Cambium's transactions see one snapshot and one writer at a time (see the compute's VFS), so the modes
//! come to two kinds. Those that conflict only with `ACCESS EXCLUSIVE` (`ACCESS SHARE`, `ROW SHARE`,
//! `ROW EXCLUSIVE`) guard against a table being dropped or altered under a reader, which a snapshot already
//! guarantees: they check that the tables exist and do nothing else. The others (`SHARE` and stronger, the
//! default `ACCESS EXCLUSIVE` among them) keep other writers out until the transaction ends: they take the
//! database's writer lock, as a write does, by a statement that writes nothing (`DELETE … WHERE 0`), so a
//! transaction whose snapshot another commit passed gets 40001, as its first write would.

use sqlparser::ast::{Ident, ObjectName};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{Kind, Translation};
use crate::catalog::{quote_ident, Catalog};
use crate::error::PgError;

/// The translation of a `LOCK` statement, `None` if `sql` is not one.
pub(super) fn parse(conn: &rusqlite::Connection, catalog: &Catalog, sql: &str) -> Option<Result<Translation, PgError>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut words = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .peekable();
    match words.next()? {
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("lock") => {}
        _ => return None,
    }
    let rest: Vec<Token> = words.collect();
    Some(translate(conn, catalog, &rest))
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

fn syntax(message: &str) -> PgError {
    PgError::new(crate::error::SYNTAX_ERROR, format!("LOCK: {message}"))
}

fn translate(conn: &rusqlite::Connection, catalog: &Catalog, tokens: &[Token]) -> Result<Translation, PgError> {
    let mut at = 0;
    if tokens.get(at).is_some_and(|t| is_word(t, "table")) {
        at += 1;
    }
    let mut tables = Vec::new();
    loop {
        if tokens.get(at).is_some_and(|t| is_word(t, "only")) {
            at += 1;
        }
        let mut parts = Vec::new();
        loop {
            match tokens.get(at) {
                Some(Token::Word(w)) => parts.push(Ident {
                    value: w.value.clone(),
                    quote_style: w.quote_style,
                    span: sqlparser::tokenizer::Span::empty(),
                }),
                _ => return Err(syntax("a table name is expected")),
            }
            at += 1;
            if !matches!(tokens.get(at), Some(Token::Period)) {
                break;
            }
            at += 1;
        }
        if matches!(tokens.get(at), Some(Token::Mul)) {
            at += 1;
        }
        // The SQLite name, through the schema named or the search_path.
        tables.push(super::schema::existing(catalog, &ObjectName::from(parts))?);
        if !matches!(tokens.get(at), Some(Token::Comma)) {
            break;
        }
        at += 1;
    }
    let mut mode = Vec::new();
    if tokens.get(at).is_some_and(|t| is_word(t, "in")) {
        at += 1;
        while let Some(Token::Word(w)) = tokens.get(at) {
            if w.value.eq_ignore_ascii_case("mode") {
                break;
            }
            mode.push(w.value.to_ascii_uppercase());
            at += 1;
        }
        if !tokens.get(at).is_some_and(|t| is_word(t, "mode")) {
            return Err(syntax("IN … MODE is expected"));
        }
        at += 1;
    }
    if tokens.get(at).is_some_and(|t| is_word(t, "nowait")) {
        at += 1;
    }
    if matches!(tokens.get(at), Some(Token::SemiColon)) {
        at += 1;
    }
    if at != tokens.len() {
        return Err(syntax("unexpected words after the lock mode"));
    }
    let mode = if mode.is_empty() {
        "ACCESS EXCLUSIVE".to_owned()
    } else {
        mode.join(" ")
    };
    let keeps_writers_out = match mode.as_str() {
        "ACCESS SHARE" | "ROW SHARE" | "ROW EXCLUSIVE" => false,
        "SHARE UPDATE EXCLUSIVE" | "SHARE" | "SHARE ROW EXCLUSIVE" | "EXCLUSIVE" | "ACCESS EXCLUSIVE" => true,
        other => return Err(syntax(&format!("unrecognized lock mode \"{other}\""))),
    };
    for table in &tables {
        let exists = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ?1 COLLATE NOCASE)",
                [table],
                |row| row.get::<_, bool>(0),
            )
            .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("LOCK: reading the schema: {e}")))?;
        if !exists {
            return Err(PgError::new(
                crate::error::UNDEFINED_TABLE,
                format!("relation \"{table}\" does not exist"),
            ));
        }
    }
    // The weak modes: nothing to run (the tables' existence was checked here, and a translation is made
    // again when the schema changes).
    let steps: Vec<String> = if keeps_writers_out {
        tables
            .iter()
            .map(|table| format!("DELETE FROM {} WHERE 0", quote_ident(table)))
            .collect()
    } else {
        Vec::new()
    };
    let mut translation = Translation::single(
        String::new(),
        Kind::Lock {
            writers_out: keeps_writers_out,
        },
    );
    translation.steps = steps;
    Ok(translation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(sql: &str) -> Result<Vec<String>, String> {
        let conn = rusqlite::Connection::open_in_memory().expect("opens");
        conn.execute_batch("CREATE TABLE users (id); CREATE TABLE a (x); CREATE TABLE b (x); CREATE TABLE t (x);")
            .expect("tables");
        let mut catalog = Catalog::default();
        catalog.refresh(&conn).expect("catalog");
        parse(&conn, &catalog, sql)
            .expect("a LOCK statement")
            .map(|t| t.steps)
            .map_err(|e| e.code.to_owned())
    }

    #[test]
    fn modes_that_keep_writers_out_take_the_writer_lock() {
        assert_eq!(
            steps("LOCK TABLE public.users IN ACCESS SHARE MODE"),
            Ok(Vec::new()),
            "nothing to run"
        );
        assert_eq!(steps("LOCK TABLE nosuch IN ACCESS SHARE MODE"), Err("42P01".to_owned()));
        assert_eq!(
            steps("lock a, ONLY b * in share row exclusive mode nowait;").as_deref(),
            Ok(&[
                "DELETE FROM \"a\" WHERE 0".to_owned(),
                "DELETE FROM \"b\" WHERE 0".to_owned()
            ][..])
        );
        assert_eq!(steps("LOCK t").map(|s| s.len()), Ok(1), "ACCESS EXCLUSIVE by default");
        assert_eq!(steps("LOCK TABLE t IN SOME MODE"), Err("42601".to_owned()));
        assert_eq!(steps("LOCK TABLE t IN SHARE"), Err("42601".to_owned()));
        assert_eq!(steps("LOCK TABLE"), Err("42601".to_owned()));
        let conn = rusqlite::Connection::open_in_memory().expect("opens");
        let mut catalog = Catalog::default();
        catalog.refresh(&conn).expect("catalog");
        assert!(parse(&conn, &catalog, "SELECT 1").is_none());
    }
}
