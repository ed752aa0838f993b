//! Statement forms sqlparser 0.64 does not read, rewritten at the token level (sqlparser's tokenizer, never
//! text matching) into forms it reads, which are then translated as usual:
//!
//! - `TABLE t …` as `SELECT * FROM t …`;
//! - an UPDATE that assigns an array element (`SET a[2] = v`) as `SET a = pg_array_set(a, 2, v)`;
//! - COPY's boolean options spelled `ON`/`OFF` (`WITH (FREEZE ON)`, pgbench's) as `TRUE`/`FALSE`.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

/// The statement rewritten, if it is one of this module's forms.
pub(crate) fn rewrite(sql: &str) -> Option<String> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let first = tokens.iter().position(|t| !matches!(t, Token::Whitespace(_)))?;
    match &tokens[first] {
        Token::Word(w) if w.keyword == Keyword::TABLE && w.quote_style.is_none() => {
            let rest: String = tokens[first + 1..].iter().map(ToString::to_string).collect();
            Some(format!("SELECT * FROM{rest}"))
        }
        Token::Word(w) if w.keyword == Keyword::UPDATE && w.quote_style.is_none() => element_assignments(&tokens),
        Token::Word(w) if w.keyword == Keyword::COPY && w.quote_style.is_none() => copy_switches(&tokens),
        _ => None,
    }
}

fn keyword(token: &Token) -> Option<Keyword> {
    match token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    }
}

/// `COPY … FROM|TO … (option ON|OFF, …)`: the switches in the option list spelled as booleans; `None` when
/// there are none.
fn copy_switches(tokens: &[Token]) -> Option<String> {
    let mut depth = 0_usize;
    let mut past_direction = false;
    let mut changed = false;
    let mut out = Vec::with_capacity(tokens.len());
    for token in tokens {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && matches!(keyword(token), Some(Keyword::FROM | Keyword::TO)) {
            past_direction = true;
        }
        let switch = match keyword(token) {
            Some(Keyword::ON) => Some("TRUE"),
            Some(Keyword::OFF) => Some("FALSE"),
            _ => None,
        };
        match switch {
            Some(word) if past_direction && depth == 1 => {
                out.push(word.to_owned());
                changed = true;
            }
            _ => out.push(token.to_string()),
        }
    }
    changed.then(|| out.concat())
}

/// `UPDATE t SET a[i] = v, …`: each element assignment made a whole-column one; `None` when the UPDATE
/// has none.
fn element_assignments(tokens: &[Token]) -> Option<String> {
    let set = tokens.iter().position(|t| keyword(t) == Some(Keyword::SET))?;
    let mut out: Vec<String> = tokens[..=set].iter().map(ToString::to_string).collect();
    let mut at = set + 1;
    let mut changed = false;
    loop {
        // One assignment: its target tokens up to `=`, then its value up to a comma or clause at depth 0.
        let eq = (at..tokens.len()).find(|&i| tokens[i] == Token::Eq)?;
        let target: Vec<&Token> = tokens[at..eq]
            .iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .collect();
        let mut end = eq + 1;
        let mut depth = 0usize;
        while end < tokens.len() {
            match &tokens[end] {
                Token::LParen | Token::LBracket => depth += 1,
                Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
                Token::Comma if depth == 0 => break,
                Token::SemiColon if depth == 0 => break,
                t if depth == 0 && matches!(keyword(t), Some(Keyword::WHERE | Keyword::FROM | Keyword::RETURNING)) => {
                    break
                }
                _ => {}
            }
            end += 1;
        }
        let value: String = tokens[eq + 1..end].iter().map(ToString::to_string).collect();
        match target.as_slice() {
            [column @ Token::Word(_), Token::LBracket, index @ .., Token::RBracket] if !index.is_empty() => {
                let index: String = index.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" ");
                out.push(format!(" {column} = pg_array_set({column}, {index}, ({value}))"));
                changed = true;
            }
            _ => out.extend(tokens[at..end].iter().map(ToString::to_string)),
        }
        if end >= tokens.len() || tokens[end] != Token::Comma {
            out.extend(tokens[end..].iter().map(ToString::to_string));
            break;
        }
        out.push(",".to_owned());
        at = end + 1;
    }
    changed.then(|| out.concat())
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn forms_sqlparser_lacks_become_ones_it_reads() {
        assert_eq!(
            rewrite("TABLE t ORDER BY id").as_deref(),
            Some("SELECT * FROM t ORDER BY id")
        );
        assert_eq!(
            rewrite("UPDATE t SET a[2] = 1, b = 3 WHERE id = 2 RETURNING a").as_deref(),
            Some("UPDATE t SET a = pg_array_set(a, 2, ( 1)), b = 3 WHERE id = 2 RETURNING a")
        );
        assert_eq!(rewrite("UPDATE t SET b = 3"), None);
        assert_eq!(
            rewrite("copy pgbench_accounts from stdin with (freeze on, header off)").as_deref(),
            Some("copy pgbench_accounts from stdin with (freeze TRUE, header FALSE)")
        );
        // A join's ON inside a COPY's query is the query's.
        assert_eq!(
            rewrite("COPY (SELECT 1 FROM a JOIN b ON a.x = b.x) TO STDOUT (HEADER)"),
            None
        );
        assert_eq!(rewrite("SELECT 1"), None);
    }
}
