//! `VACUUM` and `ANALYZE` in PostgreSQL's spellings (`VACUUM ANALYZE t`, `VACUUM (VERBOSE) t`,
//! `ANALYZE t (a, b)`), which the parser does not know, read with sqlparser's tokenizer. SQLite's own
//! `VACUUM` and `ANALYZE` work on the whole database: a table list or a column list asks for less than they
//! do, never for something else, so they run whole. Options (`FULL`, `FREEZE`, `VERBOSE`, …) change nothing
//! a client can see and are accepted.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{Kind, Translation};
use crate::error::{PgError, SYNTAX_ERROR};

/// The translation of a `VACUUM` or `ANALYZE` statement, `None` if `sql` is neither.
pub(super) fn parse(sql: &str) -> Option<Result<Translation, PgError>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut words = tokens.into_iter().filter(|t| !matches!(t, Token::Whitespace(_)));
    let command = match words.next()? {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
        _ => return None,
    };
    if command != "VACUUM" && command != "ANALYZE" && command != "ANALYSE" {
        return None;
    }
    let rest: Vec<Token> = words.collect();
    if rest.iter().any(|t| matches!(t, Token::SemiColon)) && !matches!(rest.last(), Some(Token::SemiColon)) {
        // Several statements: the general path reads them.
        return None;
    }
    // Everything after the command must be words, commas and parenthesized lists: options or names.
    let valid = rest.iter().all(|t| {
        matches!(
            t,
            Token::Word(_)
                | Token::Comma
                | Token::LParen
                | Token::RParen
                | Token::Period
                | Token::SemiColon
                | Token::Number(..)
        )
    });
    if !valid {
        return Some(Err(PgError::new(SYNTAX_ERROR, format!("syntax error in {command}"))));
    }
    let (sqlite, tag) = if command == "VACUUM" {
        ("VACUUM", "VACUUM")
    } else {
        ("ANALYZE", "ANALYZE")
    };
    Some(Ok(Translation::single(sqlite.to_owned(), Kind::Other(tag.to_owned()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgresql_spellings_run_whole() {
        let step = |sql: &str| parse(sql).map(|t| t.map(|t| (t.steps, t.kind)));
        assert_eq!(
            step("vacuum analyze pgbench_branches").and_then(Result::ok),
            Some((vec!["VACUUM".to_owned()], Kind::Other("VACUUM".to_owned())))
        );
        assert!(step("VACUUM (VERBOSE, ANALYZE) t (a, b);").is_some_and(|r| r.is_ok()));
        assert_eq!(
            step("ANALYZE VERBOSE t").and_then(Result::ok).map(|(s, _)| s),
            Some(vec!["ANALYZE".to_owned()])
        );
        assert!(
            step("VACUUM INTO 'x.db'").is_some_and(|r| r.is_err()),
            "SQLite's VACUUM INTO is not PostgreSQL"
        );
        assert!(step("SELECT 1").is_none());
        assert!(step("VACUUM; DROP TABLE t").is_none());
    }
}
