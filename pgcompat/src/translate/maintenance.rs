//! `VACUUM` and `ANALYZE` in PostgreSQL's spellings (`VACUUM ANALYZE t`, `VACUUM (VERBOSE, ANALYZE) t (a)`,
//! `ANALYZE t (a, b)`), which the parser does not know, read with sqlparser's tokenizer.
//!
//! What each one does here:
//! - **`VACUUM`** (plain, the one pgbench, ORMs and cron jobs run) reclaims dead rows' space for reuse inside
//!   the table in PostgreSQL; SQLite reuses the pages a deletion frees by itself, so it has nothing to do and
//!   runs nothing. SQLite's own `VACUUM` rebuilds the whole database: on Cambium that is every page of it
//!   written again through the quorum and kept by the pageserver for the retention window, under the writer
//!   lock for the whole time (4 s of `pgbench -i -s 10`'s 8 s was its four `vacuum analyze`s).
//! - **`VACUUM FULL`** asks for the rewrite that returns space: SQLite's `VACUUM`, which rewrites the whole
//!   database (more than the tables named, never something else).
//! - **`ANALYZE`**, and the `ANALYZE` option of `VACUUM`: SQLite's `ANALYZE` of each table named (a column list
//!   asks for less than it does), or of the whole database when none is named. Views are skipped, as
//!   PostgreSQL skips them.
//!
//! As in PostgreSQL: `VACUUM` cannot run inside a transaction block (25001, checked by the session, which knows
//! the block: [`Kind::Vacuum`]; a multi-statement text holding one is refused by [`refused_in_a_batch`]), a
//! table that does not exist is 42P01, a column 42703, a column list without `ANALYZE` 0A000, an unknown
//! parenthesized option 42601. `FREEZE`, `VERBOSE` and the other options change nothing a client can see and
//! are accepted.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{Kind, Translation};
use crate::catalog::{quote_ident, Catalog};
use crate::error::{PgError, FEATURE_NOT_SUPPORTED, SYNTAX_ERROR, UNDEFINED_COLUMN, UNDEFINED_TABLE};

/// The options of `VACUUM (…)`, as PostgreSQL 15 knows them.
const VACUUM_OPTIONS: &[&str] = &[
    "full",
    "freeze",
    "verbose",
    "analyze",
    "analyse",
    "disable_page_skipping",
    "skip_locked",
    "index_cleanup",
    "process_toast",
    "truncate",
    "parallel",
];
/// The options of `ANALYZE (…)`.
const ANALYZE_OPTIONS: &[&str] = &["verbose", "skip_locked"];

/// The translation of a `VACUUM` or `ANALYZE` statement in PostgreSQL's spelling, `None` if `sql` is not one
/// (another statement, several statements, or SQLite's `VACUUM INTO`, left to the defended path that refuses it).
pub(super) fn parse(conn: &rusqlite::Connection, catalog: &Catalog, sql: &str) -> Option<Result<Translation, PgError>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut words: Vec<Token> = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let vacuum = match words.first()? {
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("vacuum") => true,
        Token::Word(w)
            if w.quote_style.is_none()
                && (w.value.eq_ignore_ascii_case("analyze") || w.value.eq_ignore_ascii_case("analyse")) =>
        {
            false
        }
        _ => return None,
    };
    if matches!(words.last(), Some(Token::SemiColon)) {
        words.pop();
    }
    if words.iter().any(|t| matches!(t, Token::SemiColon)) {
        // Several statements: the general path reads them.
        return None;
    }
    if vacuum && words.iter().any(|t| is_word(t, "into")) {
        return None;
    }
    Some(translate(conn, catalog, vacuum, &words[1..]))
}

/// The error for a multi-statement `text` that holds a `VACUUM` (PostgreSQL runs such a text as one implicit
/// transaction block, which `VACUUM` refuses), `None` for any other text.
pub(super) fn refused_in_a_batch(sql: &str) -> Option<PgError> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut statements = 0usize;
    let mut holds_vacuum = false;
    let mut at_start = true;
    for token in tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_))) {
        if matches!(token, Token::SemiColon) {
            at_start = true;
            continue;
        }
        if at_start {
            statements += 1;
            holds_vacuum |= is_word(token, "vacuum");
            at_start = false;
        }
    }
    (statements > 1 && holds_vacuum).then(in_a_transaction_block)
}

/// 25001, as PostgreSQL words it.
pub(super) fn in_a_transaction_block() -> PgError {
    PgError::new(
        crate::error::ACTIVE_SQL_TRANSACTION,
        "VACUUM cannot run inside a transaction block",
    )
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

fn syntax(near: Option<&Token>) -> PgError {
    match near {
        Some(token) => PgError::new(SYNTAX_ERROR, format!("syntax error at or near \"{token}\"")),
        None => PgError::new(SYNTAX_ERROR, "syntax error at end of input"),
    }
}

/// After an item of a parenthesized list: `true` past a comma (another item follows), `false` past the closing
/// parenthesis, a syntax error at anything else.
fn list_goes_on(tokens: &[Token], at: &mut usize) -> Result<bool, PgError> {
    match tokens.get(*at) {
        Some(Token::Comma) => {
            *at += 1;
            Ok(true)
        }
        Some(Token::RParen) => {
            *at += 1;
            Ok(false)
        }
        other => Err(syntax(other)),
    }
}

/// What an option of `VACUUM (…)` or `ANALYZE (…)` is set to (`true` for the options that are not on/off),
/// or PostgreSQL's 42601 for a value it does not take: `parallel` an integer from 0 to 1024, `index_cleanup` a
/// boolean or `auto`, every other option a boolean or nothing.
fn option_value(option: &str, given: Option<&Token>) -> Result<bool, PgError> {
    match option {
        "parallel" => {
            let workers = match given {
                Some(Token::Number(n, _)) => n.parse::<u32>().ok(),
                _ => None,
            };
            match workers {
                Some(0..=1024) => Ok(true),
                _ => Err(PgError::new(
                    SYNTAX_ERROR,
                    "parallel option requires a value between 0 and 1024",
                )),
            }
        }
        _ => match given {
            None => Ok(true),
            Some(token) => match boolean(token) {
                Some(value) => Ok(value),
                None if option == "index_cleanup" && is_word(token, "auto") => Ok(true),
                None => Err(PgError::new(SYNTAX_ERROR, format!("{option} requires a Boolean value"))),
            },
        },
    }
}

/// A boolean option's value (`true`, `off`, `1`, …), `None` when it is not one.
fn boolean(token: &Token) -> Option<bool> {
    let text = match token {
        Token::Word(w) => w.value.to_ascii_lowercase(),
        Token::Number(n, _) => n.clone(),
        Token::SingleQuotedString(s) => s.to_ascii_lowercase(),
        _ => return None,
    };
    match text.as_str() {
        "true" | "on" | "1" | "yes" => Some(true),
        "false" | "off" | "0" | "no" => Some(false),
        _ => None,
    }
}

/// A table named by the statement, with its column list.
struct Target {
    name: Vec<sqlparser::ast::Ident>,
    columns: Vec<String>,
}

fn translate(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    vacuum: bool,
    tokens: &[Token],
) -> Result<Translation, PgError> {
    let command = if vacuum { "VACUUM" } else { "ANALYZE" };
    let mut at = 0;
    let mut full = false;
    let mut analyze = !vacuum;
    if matches!(tokens.first(), Some(Token::LParen)) {
        // `(option [value] [, …])`
        at = 1;
        loop {
            let option = match tokens.get(at) {
                Some(Token::Word(w)) => w.value.to_ascii_lowercase(),
                other => return Err(syntax(other)),
            };
            at += 1;
            let known = if vacuum { VACUUM_OPTIONS } else { ANALYZE_OPTIONS };
            if !known.contains(&option.as_str()) {
                return Err(PgError::new(
                    SYNTAX_ERROR,
                    format!("unrecognized {command} option \"{option}\""),
                ));
            }
            let given = match tokens.get(at) {
                Some(Token::Comma | Token::RParen) | None => None,
                Some(token) => {
                    at += 1;
                    Some(token)
                }
            };
            let value = option_value(&option, given)?;
            match option.as_str() {
                "full" => full = value,
                "analyze" | "analyse" => analyze = value,
                _ => {}
            }
            if !list_goes_on(tokens, &mut at)? {
                break;
            }
        }
    } else {
        // The older form: `VACUUM [FULL] [FREEZE] [VERBOSE] [ANALYZE]`, `ANALYZE [VERBOSE]`, in that order.
        let order: &[&str] = if vacuum {
            &["full", "freeze", "verbose", "analyze"]
        } else {
            &["verbose"]
        };
        for &keyword in order {
            let matched = tokens
                .get(at)
                .is_some_and(|t| is_word(t, keyword) || (keyword == "analyze" && is_word(t, "analyse")));
            if matched {
                at += 1;
                match keyword {
                    "full" => full = true,
                    "analyze" => analyze = true,
                    _ => {}
                }
            }
        }
    }
    let mut targets = Vec::new();
    while at < tokens.len() {
        let mut name = Vec::new();
        loop {
            match tokens.get(at) {
                Some(Token::Word(w)) => name.push(sqlparser::ast::Ident {
                    value: w.value.clone(),
                    quote_style: w.quote_style,
                    span: sqlparser::tokenizer::Span::empty(),
                }),
                other => return Err(syntax(other)),
            }
            at += 1;
            if !matches!(tokens.get(at), Some(Token::Period)) {
                break;
            }
            at += 1;
        }
        let mut columns = Vec::new();
        if matches!(tokens.get(at), Some(Token::LParen)) {
            at += 1;
            loop {
                match tokens.get(at) {
                    Some(Token::Word(w)) => columns.push(if w.quote_style.is_some() {
                        w.value.clone()
                    } else {
                        w.value.to_lowercase()
                    }),
                    other => return Err(syntax(other)),
                }
                at += 1;
                if !list_goes_on(tokens, &mut at)? {
                    break;
                }
            }
        }
        targets.push(Target { name, columns });
        match tokens.get(at) {
            Some(Token::Comma) => at += 1,
            None => {}
            other => return Err(syntax(other)),
        }
    }
    let mut analyzed = Vec::new();
    for target in &targets {
        let table = super::schema::existing(catalog, &sqlparser::ast::ObjectName::from(target.name.clone()))?;
        // The catalog, which also knows a table made earlier in the same text.
        let kind = match catalog.relation_kind(&table) {
            Some(kind @ ("table" | "view")) => kind,
            _ => {
                return Err(PgError::new(
                    UNDEFINED_TABLE,
                    format!("relation \"{table}\" does not exist"),
                ))
            }
        };
        if !target.columns.is_empty() {
            if !analyze {
                return Err(PgError::new(
                    FEATURE_NOT_SUPPORTED,
                    "ANALYZE option must be specified when a column list is provided",
                ));
            }
            let known: Vec<String> = {
                let mut statement = conn
                    .prepare_cached("SELECT name FROM pragma_table_info(?1)")
                    .map_err(|e| {
                        PgError::new(
                            crate::error::INTERNAL_ERROR,
                            format!("{command}: reading the columns: {e}"),
                        )
                    })?;
                let names = statement
                    .query_map([&table], |row| row.get(0))
                    .and_then(|rows| rows.collect::<Result<Vec<String>, _>>());
                names.map_err(|e| {
                    PgError::new(
                        crate::error::INTERNAL_ERROR,
                        format!("{command}: reading the columns: {e}"),
                    )
                })?
            };
            for column in &target.columns {
                // A table made earlier in the same text has no columns in SQLite yet: nothing to check against.
                if !known.is_empty() && !known.iter().any(|name| name.eq_ignore_ascii_case(column)) {
                    return Err(PgError::new(
                        UNDEFINED_COLUMN,
                        format!("column \"{column}\" of relation \"{table}\" does not exist"),
                    ));
                }
            }
        }
        // A view has nothing to vacuum or analyze (PostgreSQL skips it with a warning).
        if kind == "table" && !analyzed.contains(&table) {
            analyzed.push(table);
        }
    }
    let mut steps = Vec::new();
    if vacuum && full {
        steps.push("VACUUM".to_owned());
    }
    if analyze {
        if targets.is_empty() {
            steps.push("ANALYZE".to_owned());
        } else {
            steps.extend(analyzed.iter().map(|table| format!("ANALYZE {}", quote_ident(table))));
        }
    }
    let kind = if vacuum {
        Kind::Vacuum
    } else {
        Kind::Other("ANALYZE".to_owned())
    };
    let mut translation = Translation::single(String::new(), kind);
    translation.steps = steps;
    Ok(translation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(sql: &str) -> Option<Result<(Vec<String>, Kind), String>> {
        let conn = rusqlite::Connection::open_in_memory().expect("opens");
        conn.execute_batch("CREATE TABLE t (a, b); CREATE TABLE u (x); CREATE VIEW v AS SELECT 1;")
            .expect("tables");
        let mut catalog = Catalog::default();
        catalog.refresh(&conn).expect("catalog");
        parse(&conn, &catalog, sql).map(|r| r.map(|t| (t.steps, t.kind)).map_err(|e| e.code.to_owned()))
    }

    fn ok(steps: &[&str], kind: Kind) -> Option<Result<(Vec<String>, Kind), String>> {
        Some(Ok((steps.iter().map(|s| (*s).to_owned()).collect(), kind)))
    }

    fn err(code: &str) -> Option<Result<(Vec<String>, Kind), String>> {
        Some(Err(code.to_owned()))
    }

    #[test]
    fn a_plain_vacuum_runs_nothing_and_a_full_one_rebuilds() {
        assert_eq!(steps("vacuum"), ok(&[], Kind::Vacuum));
        assert_eq!(
            steps("VACUUM t;"),
            ok(&[], Kind::Vacuum),
            "SQLite would read `t` as a schema"
        );
        assert_eq!(steps("vacuum freeze verbose t, u"), ok(&[], Kind::Vacuum));
        assert_eq!(steps("VACUUM FULL t"), ok(&["VACUUM"], Kind::Vacuum));
        assert_eq!(steps("VACUUM (FULL) t"), ok(&["VACUUM"], Kind::Vacuum));
        assert_eq!(steps("VACUUM (FULL false, VERBOSE) t"), ok(&[], Kind::Vacuum));
        assert_eq!(steps("vacuum v"), ok(&[], Kind::Vacuum), "a view: skipped");
    }

    #[test]
    fn analyze_runs_for_the_tables_named() {
        assert_eq!(
            steps("vacuum analyze t"),
            ok(&["ANALYZE \"t\""], Kind::Vacuum),
            "pgbench -i: statistics, no rebuild"
        );
        assert_eq!(
            steps("VACUUM (VERBOSE, ANALYZE) t (a, b), public.u;"),
            ok(&["ANALYZE \"t\"", "ANALYZE \"u\""], Kind::Vacuum)
        );
        assert_eq!(steps("VACUUM FULL ANALYZE"), ok(&["VACUUM", "ANALYZE"], Kind::Vacuum));
        assert_eq!(
            steps("ANALYZE VERBOSE t"),
            ok(&["ANALYZE \"t\""], Kind::Other("ANALYZE".to_owned()))
        );
        assert_eq!(steps("analyse"), ok(&["ANALYZE"], Kind::Other("ANALYZE".to_owned())));
        assert_eq!(
            steps("analyze v, t"),
            ok(&["ANALYZE \"t\""], Kind::Other("ANALYZE".to_owned()))
        );
    }

    #[test]
    fn bad_names_and_options_are_postgresql_errors() {
        assert_eq!(steps("vacuum nope"), err("42P01"));
        assert_eq!(steps("analyze nope"), err("42P01"));
        assert_eq!(steps("analyze t (nope)"), err("42703"));
        assert_eq!(steps("vacuum t (a)"), err("0A000"));
        assert_eq!(steps("vacuum (bogus) t"), err("42601"));
        assert_eq!(steps("analyze (full) t"), err("42601"));
        assert_eq!(steps("vacuum (full foo) t"), err("42601"));
        assert_eq!(steps("vacuum (analyze 2) t"), err("42601"));
        assert_eq!(steps("vacuum (parallel) t"), err("42601"));
        assert_eq!(steps("vacuum (index_cleanup maybe) t"), err("42601"));
        assert_eq!(
            steps("vacuum (parallel 2, index_cleanup auto, truncate off, process_toast 'on', full 0) t"),
            ok(&[], Kind::Vacuum)
        );
        assert_eq!(steps("vacuum t u"), err("42601"));
        assert_eq!(steps("vacuum t ("), err("42601"));
    }

    #[test]
    fn other_texts_go_elsewhere() {
        assert!(
            steps("VACUUM INTO 'x.db'").is_none(),
            "SQLite's VACUUM INTO is left to SQLite's defended path"
        );
        assert!(steps("SELECT 1").is_none());
        assert!(steps("VACUUM; DROP TABLE t").is_none());
        assert!(refused_in_a_batch("VACUUM; DROP TABLE t").is_some());
        assert!(refused_in_a_batch("select 1; vacuum analyze t;").is_some());
        assert!(refused_in_a_batch("vacuum t;").is_none(), "one statement");
        assert!(refused_in_a_batch("analyze t; select 1").is_none());
        assert!(refused_in_a_batch("select 'vacuum'; select 1").is_none());
    }
}
