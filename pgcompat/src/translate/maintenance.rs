//! `VACUUM` and `ANALYZE` in PostgreSQL's spellings (`VACUUM ANALYZE t`, `VACUUM (VERBOSE) t`,
//! `ANALYZE t (a, b)`), which the parser does not know, read with sqlparser's tokenizer. SQLite's own
//! `VACUUM` and `ANALYZE` work on the whole database: a table list or a column list asks for less than they
//! do, never for something else, so they run whole. Options (`FULL`, `FREEZE`, `VERBOSE`, …) change nothing
//! a client can see and are accepted.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{Kind, Translation};

/// The translation of a `VACUUM` or `ANALYZE` statement in PostgreSQL's spelling, `None` if `sql` is not one.
pub(super) fn parse(sql: &str) -> Option<Translation> {
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
    if !valid
        || rest
            .iter()
            .any(|t| matches!(t, Token::Word(w) if w.value.eq_ignore_ascii_case("into")))
    {
        // Not PostgreSQL's spelling (SQLite's `VACUUM INTO 'file'`): SQLite's own path, where the defensive
        // policy decides.
        return None;
    }
    let (sqlite, tag) = if command == "VACUUM" {
        ("VACUUM", "VACUUM")
    } else {
        ("ANALYZE", "ANALYZE")
    };
    Some(Translation::single(sqlite.to_owned(), Kind::Other(tag.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgresql_spellings_run_whole() {
        let step = |sql: &str| parse(sql).map(|t| (t.steps, t.kind));
        assert_eq!(
            step("vacuum analyze pgbench_branches"),
            Some((vec!["VACUUM".to_owned()], Kind::Other("VACUUM".to_owned())))
        );
        assert!(step("VACUUM (VERBOSE, ANALYZE) t (a, b);").is_some());
        assert_eq!(
            step("ANALYZE VERBOSE t").map(|(s, _)| s),
            Some(vec!["ANALYZE".to_owned()])
        );
        assert!(
            step("VACUUM INTO 'x.db'").is_none(),
            "SQLite's VACUUM INTO is left to SQLite's defended path"
        );
        assert!(step("SELECT 1").is_none());
        assert!(step("VACUUM; DROP TABLE t").is_none());
    }
}
