//! A query text cut into its statements at the semicolons between them: the tokenizer's semicolons, so never
//! one inside a string, a quoted name, a dollar-quoted body or a comment, and only outside parentheses.
//!
//! For a text of several statements that does not parse as a whole (one of them is outside what the parser
//! knows): each statement is then translated and run by itself, so the others still get the dialect's
//! translation instead of reaching SQLite as written.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

/// The statements of `sql`, each a slice of it without its semicolon and without surrounding whitespace;
/// stretches holding no token but whitespace and comments (`;;`, a comment after the last semicolon) are left
/// out. `None` when the text does not tokenize (an unterminated string or comment) or holds a `BEGIN ATOMIC`
/// body, whose inner semicolons end no statement: the caller then keeps the text whole.
pub fn split_statements(sql: &str) -> Option<Vec<&str>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let offsets = LineOffsets::new(sql);
    let mut statements = Vec::new();
    let mut start_byte = 0usize;
    let mut has_token = false;
    let mut depth = 0usize;
    let mut previous: Option<&Token> = None;
    for token in &tokens {
        match &token.token {
            Token::Whitespace(_) => continue,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(word)
                if word.keyword == Keyword::ATOMIC
                    && matches!(previous, Some(Token::Word(before)) if before.keyword == Keyword::BEGIN) =>
            {
                return None;
            }
            Token::SemiColon if depth == 0 => {
                let end_byte = offsets.byte(sql, token.span.start)?;
                if has_token {
                    statements.push(sql[start_byte..end_byte].trim());
                }
                start_byte = end_byte + 1;
                has_token = false;
                previous = Some(&token.token);
                continue;
            }
            _ => {}
        }
        has_token = true;
        previous = Some(&token.token);
    }
    if has_token {
        statements.push(sql[start_byte..].trim());
    }
    Some(statements)
}

/// Whether `tokens` hold more than one statement: a semicolon outside parentheses with a token after it.
pub(crate) fn several_statements(tokens: &[TokenWithSpan]) -> bool {
    let mut depth = 0usize;
    let mut ended = false;
    for token in tokens {
        match &token.token {
            Token::Whitespace(_) => {}
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::SemiColon if depth == 0 => ended = true,
            _ if ended => return true,
            _ => {}
        }
    }
    false
}

/// Where each line of a text starts, to turn the tokenizer's (line, column in characters) into byte offsets.
struct LineOffsets {
    starts_byte: Vec<usize>,
}

impl LineOffsets {
    fn new(sql: &str) -> LineOffsets {
        let mut starts_byte = vec![0];
        starts_byte.extend(sql.match_indices('\n').map(|(at, _)| at + 1));
        LineOffsets { starts_byte }
    }

    /// The byte offset of `location` (lines and columns from 1) in `sql`.
    fn byte(&self, sql: &str, location: Location) -> Option<usize> {
        let line_start = *self
            .starts_byte
            .get(usize::try_from(location.line).ok()?.checked_sub(1)?)?;
        let column = usize::try_from(location.column).ok()?.checked_sub(1)?;
        let line = &sql[line_start..];
        let within = line.char_indices().nth(column).map(|(at, _)| at)?;
        Some(line_start + within)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any text a client sends: no panic, and every statement is a slice of the text itself (the cuts
        /// land on character boundaries whatever the characters, quotes and line breaks).
        #[test]
        fn any_text_splits_into_slices_of_itself(
            text in proptest::collection::vec(
                prop_oneof![
                    Just(";".to_owned()), Just("'".to_owned()), Just("\"".to_owned()), Just("$$".to_owned()),
                    Just("--".to_owned()), Just("/*".to_owned()), Just("*/".to_owned()), Just("\n".to_owned()),
                    Just("\r\n".to_owned()), Just("\t".to_owned()), Just("(".to_owned()), Just(")".to_owned()),
                    Just("é€😀".to_owned()), Just("SELECT 1".to_owned()), Just("BEGIN".to_owned()),
                    Just("ATOMIC".to_owned()), "[a-z ]{0,6}",
                ],
                0..40,
            ).prop_map(|parts| parts.concat())
        ) {
            if let Some(statements) = split_statements(&text) {
                let range = text.as_ptr() as usize..=text.as_ptr() as usize + text.len();
                for statement in statements {
                    prop_assert!(!statement.is_empty());
                    prop_assert!(range.contains(&(statement.as_ptr() as usize)));
                    prop_assert!(range.contains(&(statement.as_ptr() as usize + statement.len())));
                }
            }
        }
    }

    #[test]
    fn statements_are_cut_at_semicolons_outside_strings_comments_and_parentheses() {
        let sql = "CREATE TABLE t (a text DEFAULT ';');\n  INSERT INTO t VALUES ('x;y'), ($$a;b$$); -- c;d\n\
                   /* e; */ SELECT \"q;r\" FROM t;;  ; CREATE RULE r AS ON INSERT TO t DO ALSO (SELECT 1; SELECT 2)\n";
        assert_eq!(
            split_statements(sql),
            Some(vec![
                "CREATE TABLE t (a text DEFAULT ';')",
                "INSERT INTO t VALUES ('x;y'), ($$a;b$$)",
                "-- c;d\n/* e; */ SELECT \"q;r\" FROM t",
                "CREATE RULE r AS ON INSERT TO t DO ALSO (SELECT 1; SELECT 2)",
            ])
        );
        assert_eq!(split_statements("SELECT 1; -- the end"), Some(vec!["SELECT 1"]));
        assert_eq!(
            split_statements("SELECT 1;\r\nSELECT\t2;\rSELECT 'a\nb'; SELECT 3"),
            Some(vec!["SELECT 1", "SELECT\t2", "SELECT 'a\nb'", "SELECT 3"])
        );
        assert_eq!(split_statements("  "), Some(vec![]));
    }

    #[test]
    fn characters_of_several_bytes_keep_the_cuts_on_their_boundaries() {
        let sql = "SELECT 'é€😀'; SELECT 'ü'\nFROM t ; SELECT 2";
        assert_eq!(
            split_statements(sql),
            Some(vec!["SELECT 'é€😀'", "SELECT 'ü'\nFROM t", "SELECT 2"])
        );
    }

    #[test]
    fn untokenizable_texts_and_atomic_bodies_stay_whole() {
        assert_eq!(split_statements("SELECT 'unterminated; SELECT 1"), None);
        assert_eq!(
            split_statements("CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END; SELECT f()"),
            None
        );
    }
}
