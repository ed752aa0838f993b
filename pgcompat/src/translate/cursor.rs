//! `DECLARE … CURSOR`, `FETCH`, `MOVE` and `CLOSE`: what each asks of the session, which keeps the cursors
//! (the layer only parses them; the query a cursor runs is translated when it is declared).

use sqlparser::ast::{CloseCursor, Declare, DeclareType};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{Kind, Translation};
use crate::error::{PgError, SYNTAX_ERROR};

/// Where a `FETCH` or `MOVE` goes, in PostgreSQL's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CursorMove {
    /// `ABSOLUTE n` (`FIRST` is 1, `LAST` is -1; negative counts from the end).
    Absolute(i64),
    /// `RELATIVE n` (0 refetches the current row).
    Relative(i64),
    /// `FORWARD n` (`NEXT` is 1, a bare count too); `None`: `ALL`.
    Forward(Option<i64>),
    /// `BACKWARD n` (`PRIOR` is 1); `None`: `ALL`.
    Backward(Option<i64>),
}

/// `DECLARE name [BINARY] [[NO] SCROLL] CURSOR [WITH[OUT] HOLD] FOR query`.
pub(super) fn declare(declares: &[Declare]) -> Result<Option<Translation>, PgError> {
    let [declare] = declares else {
        return Ok(None);
    };
    let (Some(DeclareType::Cursor), [name], Some(query)) =
        (&declare.declare_type, declare.names.as_slice(), &declare.for_query)
    else {
        return Ok(None);
    };
    if declare.binary == Some(true) {
        return Err(PgError::unsupported("binary cursors (DECLARE … BINARY CURSOR)"));
    }
    Ok(Some(bare(Kind::Declare {
        name: name.value.clone(),
        query: query.to_string(),
        scroll: declare.scroll,
        hold: declare.hold == Some(true),
    })))
}

/// `CLOSE name` or `CLOSE ALL`.
pub(super) fn close(cursor: &CloseCursor) -> Translation {
    bare(Kind::Close(match cursor {
        CloseCursor::All => None,
        CloseCursor::Specific { name } => Some(name.value.clone()),
    }))
}

/// The cursor name and the count of `MOVE [FORWARD | NEXT] [count | ALL] [FROM | IN] name` (`None` for `ALL`),
/// or `None` for any other text (a `FETCH`, another direction, several statements). PostgreSQL's protocol-level
/// portals are cursors too: asyncpg's cursors skip rows with `MOVE FORWARD n portal` on a portal it bound, which
/// the compute answers from that portal when no SQL cursor has the name.
pub fn move_forward(sql: &str) -> Option<(String, Option<u64>)> {
    let translation = parse_fetch(sql)?.ok()?;
    match translation.kind {
        Kind::Fetch {
            name,
            direction: CursorMove::Forward(count),
            move_only: true,
        } => match count {
            None => Some((name, None)),
            Some(count) => u64::try_from(count).ok().map(|count| (name, Some(count))),
        },
        _ => None,
    }
}

/// `FETCH [direction] [FROM | IN] name` or `MOVE …` (`None` if `sql` is neither), read with sqlparser's
/// tokenizer: its parser knows neither `MOVE`, a bare `FETCH name`, nor signed counts (`RELATIVE -1`).
pub(super) fn parse_fetch(sql: &str) -> Option<Result<Translation, PgError>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut statements = tokens
        .split(|t| matches!(t, Token::SemiColon))
        .map(|part| {
            part.iter()
                .filter(|t| !matches!(t, Token::Whitespace(_)))
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|part| !part.is_empty());
    let first = statements.next()?;
    if statements.next().is_some() {
        // Several statements: the general path reads them.
        return None;
    }
    let mut words = first.into_iter();
    let move_only = match words.next()? {
        Token::Word(w) if w.value.eq_ignore_ascii_case("fetch") && w.quote_style.is_none() => false,
        Token::Word(w) if w.value.eq_ignore_ascii_case("move") && w.quote_style.is_none() => true,
        _ => return None,
    };
    let rest: Vec<Token> = words.collect();
    Some(fetch_tokens(&rest).map(|(name, direction)| {
        bare(Kind::Fetch {
            name,
            direction,
            move_only,
        })
    }))
}

/// The cursor name and direction of a `FETCH`'s tokens after its first word.
fn fetch_tokens(tokens: &[Token]) -> Result<(String, CursorMove), PgError> {
    let syntax = || PgError::new(SYNTAX_ERROR, "syntax error in FETCH or MOVE");
    let (name, before) = match tokens.split_last() {
        Some((Token::Word(w), before))
            if w.quote_style.is_some() || !matches!(w.value.to_ascii_uppercase().as_str(), "FROM" | "IN") =>
        {
            (
                if w.quote_style.is_some() {
                    w.value.clone()
                } else {
                    w.value.to_ascii_lowercase()
                },
                before,
            )
        }
        _ => return Err(syntax()),
    };
    let before = match before.split_last() {
        Some((Token::Word(w), rest))
            if w.quote_style.is_none() && matches!(w.value.to_ascii_uppercase().as_str(), "FROM" | "IN") =>
        {
            rest
        }
        _ => before,
    };
    let word = |t: &Token| match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let count = |ts: &[Token]| -> Result<i64, PgError> {
        let text: String = ts.iter().map(ToString::to_string).collect();
        text.parse::<i64>().map_err(|_| syntax())
    };
    let direction = match before {
        [] => CursorMove::Forward(Some(1)),
        [first, rest @ ..] => match (word(first).as_deref(), rest) {
            (Some("NEXT"), []) => CursorMove::Forward(Some(1)),
            (Some("PRIOR"), []) => CursorMove::Backward(Some(1)),
            (Some("FIRST"), []) => CursorMove::Absolute(1),
            (Some("LAST"), []) => CursorMove::Absolute(-1),
            (Some("ALL"), []) => CursorMove::Forward(None),
            (Some("ABSOLUTE"), n) => CursorMove::Absolute(count(n)?),
            (Some("RELATIVE"), n) => CursorMove::Relative(count(n)?),
            (Some("FORWARD"), []) => CursorMove::Forward(Some(1)),
            (Some("BACKWARD"), []) => CursorMove::Backward(Some(1)),
            (Some("FORWARD"), [all]) if word(all).as_deref() == Some("ALL") => CursorMove::Forward(None),
            (Some("BACKWARD"), [all]) if word(all).as_deref() == Some("ALL") => CursorMove::Backward(None),
            (Some("FORWARD"), n) => signed_forward(count(n)?),
            (Some("BACKWARD"), n) => signed_forward(count(n)?.checked_neg().ok_or_else(syntax)?),
            (None, _) => signed_forward(count(before)?),
            _ => return Err(syntax()),
        },
    };
    Ok((name, direction))
}

/// `FORWARD n` for any sign (`FORWARD -2` is `BACKWARD 2`).
fn signed_forward(n: i64) -> CursorMove {
    if n >= 0 {
        CursorMove::Forward(Some(n))
    } else {
        CursorMove::Backward(Some(n.checked_neg().unwrap_or(i64::MAX)))
    }
}

/// A translation the session carries out itself (no SQLite statement).
fn bare(kind: Kind) -> Translation {
    let mut t = Translation::single(String::new(), kind);
    t.steps.clear();
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::Statement;
    use sqlparser::parser::Parser;

    fn kind_of(sql: &str) -> Kind {
        if let Some(fetch) = parse_fetch(sql) {
            return fetch.expect("a FETCH").kind;
        }
        let statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
        match &statements[0] {
            Statement::Declare { stmts, .. } => declare(stmts).expect("declare").expect("a cursor").kind,
            Statement::Close { cursor } => close(cursor).kind,
            other => panic!("not a cursor statement: {other}"),
        }
    }

    #[test]
    fn cursor_statements_parse_into_what_they_ask() {
        assert_eq!(
            kind_of("DECLARE c SCROLL CURSOR WITH HOLD FOR SELECT 1"),
            Kind::Declare {
                name: "c".to_owned(),
                query: "SELECT 1".to_owned(),
                scroll: Some(true),
                hold: true
            }
        );
        let fetch_of = |sql| match kind_of(sql) {
            Kind::Fetch { direction, .. } => direction,
            other => panic!("{other:?}"),
        };
        assert_eq!(fetch_of("FETCH NEXT FROM c"), CursorMove::Forward(Some(1)));
        assert_eq!(fetch_of("FETCH 3 FROM c"), CursorMove::Forward(Some(3)));
        assert_eq!(fetch_of("FETCH ALL FROM c"), CursorMove::Forward(None));
        assert_eq!(fetch_of("FETCH LAST FROM c"), CursorMove::Absolute(-1));
        assert_eq!(fetch_of("FETCH BACKWARD 5 FROM c"), CursorMove::Backward(Some(5)));
        assert_eq!(fetch_of("FETCH ABSOLUTE 3 FROM c"), CursorMove::Absolute(3));
        assert_eq!(fetch_of("FETCH c"), CursorMove::Forward(Some(1)));
        assert_eq!(fetch_of("FETCH RELATIVE -1 FROM c"), CursorMove::Relative(-1));
        assert_eq!(fetch_of("FETCH FORWARD ALL IN c"), CursorMove::Forward(None));
        assert_eq!(fetch_of("FETCH -2 FROM c"), CursorMove::Backward(Some(2)));
        assert_eq!(
            kind_of("  move 2 IN C;"),
            Kind::Fetch {
                name: "c".to_owned(),
                direction: CursorMove::Forward(Some(2)),
                move_only: true
            }
        );
        assert!(parse_fetch("movement").is_none());
        assert!(parse_fetch("FETCH FROM").is_some_and(|r| r.is_err()));
        assert!(parse_fetch("FETCH sideways 3 FROM c").is_some_and(|r| r.is_err()));
        assert_eq!(kind_of("CLOSE ALL"), Kind::Close(None));
    }
}
