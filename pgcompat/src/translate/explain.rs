//! `EXPLAIN`: the plan SQLite made for the statement's translation (`EXPLAIN QUERY PLAN`), as PostgreSQL's one
//! text column `QUERY PLAN`, a line per plan step indented under its parent with PostgreSQL's `->` markers.
//!
//! The steps are SQLite's (`SCAN t`, `SEARCH t USING INDEX t_c_idx (c=?)`, `USE TEMP B-TREE FOR ORDER BY`) over
//! the SQLite names of the tables, never dressed up as PostgreSQL node types: what a user reads off them (which
//! index a query uses, whether it scans) is true of what runs. No costs or row estimates (SQLite has none to
//! show), so `COSTS`, `VERBOSE`, `SETTINGS` and `BUFFERS` change nothing. `ANALYZE` runs the statement (as
//! PostgreSQL does: an analyzed `UPDATE` updates) and adds to the plan the rows it gave, on the first line, and
//! the time it took (`Kind::ExplainAnalyze`, run by the caller); the `JSON`, `XML` and `YAML` formats are
//! refused with 0A000; options PostgreSQL does not know are 42601.
//! The plan is made at translation, so a cached translation keeps it until the schema changes (which clears the
//! cache).

use rusqlite::Connection;
use sqlparser::ast::{AnalyzeFormat, AnalyzeFormatKind, Expr, Statement, UtilityOption, Value};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::{select, translate_statement, Catalog, Kind, Translation};
use crate::error::{PgError, SYNTAX_ERROR};

/// Plan lines shown at most (SQLite's plans are a line per loop and subquery: far fewer in practice).
const PLAN_LINES_MAX: usize = 10_000;

/// The translation of `EXPLAIN … statement`: a query whose rows are the plan's lines.
pub(super) fn explain(
    conn: &Connection,
    catalog: &Catalog,
    analyze: bool,
    format: Option<&AnalyzeFormatKind>,
    options: Option<&[UtilityOption]>,
    statement: &Statement,
) -> Result<Translation, PgError> {
    let mut analyze = analyze;
    let mut text = !matches!(format, Some(AnalyzeFormatKind::Keyword(f) | AnalyzeFormatKind::Assignment(f)) if *f != AnalyzeFormat::TEXT);
    for option in options.unwrap_or_default() {
        let name = option.name.value.to_ascii_lowercase();
        let on = match &option.arg {
            None => true,
            Some(Expr::Value(v)) => match &v.value {
                Value::Boolean(b) => *b,
                Value::Number(n, _) => n != "0",
                Value::SingleQuotedString(s) => !matches!(s.to_ascii_lowercase().as_str(), "false" | "off" | "0"),
                _ => true,
            },
            Some(Expr::Identifier(i)) => !matches!(i.value.to_ascii_lowercase().as_str(), "false" | "off"),
            Some(_) => true,
        };
        match name.as_str() {
            "analyze" => analyze = on,
            "format" => {
                let value = match &option.arg {
                    Some(Expr::Identifier(i)) => i.value.to_ascii_lowercase(),
                    Some(Expr::Value(v)) => v.value.to_string().trim_matches('\'').to_ascii_lowercase(),
                    _ => String::new(),
                };
                match value.as_str() {
                    "text" => text = true,
                    "json" | "xml" | "yaml" => text = false,
                    other => {
                        return Err(PgError::new(
                            crate::error::INVALID_PARAMETER_VALUE,
                            format!("unrecognized value for EXPLAIN option \"format\": \"{other}\""),
                        ))
                    }
                }
            }
            "verbose" | "costs" | "settings" | "buffers" | "wal" | "timing" | "summary" | "generic_plan" => {}
            other => {
                return Err(PgError::new(
                    SYNTAX_ERROR,
                    format!("unrecognized EXPLAIN option \"{other}\""),
                ))
            }
        }
    }
    if !text {
        return Err(PgError::unsupported("EXPLAIN in a format other than TEXT"));
    }
    if !matches!(
        statement,
        Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)
    ) {
        return Err(PgError::unsupported(
            "EXPLAIN of anything but SELECT, VALUES, INSERT, UPDATE or DELETE",
        ));
    }
    let inner = translate_statement(conn, catalog, statement.clone())?
        .ok_or_else(|| PgError::unsupported("EXPLAIN of this statement"))?;
    let sql = inner
        .steps
        .get(inner.primary)
        .ok_or_else(|| PgError::unsupported("EXPLAIN of this statement"))?;
    let lines = plan_lines(conn, sql)?;
    let rows: Vec<String> = lines
        .iter()
        .map(|line| format!("('{}')", line.replace('\'', "''")))
        .collect();
    let query = format!("SELECT * FROM (VALUES {}) AS plan(\"QUERY PLAN\")", rows.join(", "));
    let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &query)
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("the plan's query: {e}")))?;
    let Some(Statement::Query(mut plan)) = parsed.pop() else {
        return Err(PgError::new(crate::error::INTERNAL_ERROR, "the plan's query"));
    };
    let mut translation = select::translate_query(conn, catalog, &mut plan)?;
    // The statement's parameters, which a client binds (the plan's query uses none of them).
    translation.params = inner.params.clone();
    if analyze {
        // The statement runs when the caller runs this: the plan's query is what a Describe sees.
        translation.kind = Kind::ExplainAnalyze {
            plan: lines,
            inner: Box::new(inner),
        };
    }
    Ok(translation)
}

/// The lines `EXPLAIN ANALYZE` answers: the plan's, its first line with the rows the statement gave (SQLite
/// counts no rows per step), and the time it took to run.
pub fn analyzed_plan(plan: &[String], rows: u64, elapsed: std::time::Duration) -> Vec<String> {
    let mut lines = plan.to_vec();
    if let Some(first) = lines.first_mut() {
        first.push_str(&format!("  (actual rows={rows} loops=1)"));
    }
    lines.push(format!("Execution Time: {:.3} ms", elapsed.as_secs_f64() * 1e3));
    lines
}

/// SQLite's plan of `sql`, a line per step, children under their parent.
fn plan_lines(conn: &Connection, sql: &str) -> Result<Vec<String>, PgError> {
    // SQLite finds what the translation did not check (a column the statement names that no table has): the
    // error PostgreSQL gives for it, not an internal one.
    let sqlite_error = |e: rusqlite::Error| {
        let message = e.to_string();
        let code = if message.starts_with("no such column") {
            crate::error::UNDEFINED_COLUMN
        } else if message.starts_with("no such table") {
            crate::error::UNDEFINED_TABLE
        } else if message.starts_with("no such function") {
            crate::error::UNDEFINED_FUNCTION
        } else {
            crate::error::INTERNAL_ERROR
        };
        PgError::new(code, format!("EXPLAIN: {message}"))
    };
    let mut statement = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .map_err(sqlite_error)?;
    // A plan is made without the statement's parameters: each bound as NULL (SQLite plans the same).
    let nulls = vec![rusqlite::types::Null; statement.parameter_count()];
    let steps: Vec<(i64, i64, String)> = statement
        .query_map(rusqlite::params_from_iter(nulls.iter()), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(3)?))
        })
        .map_err(sqlite_error)?
        .take(PLAN_LINES_MAX)
        .collect::<Result<_, _>>()
        .map_err(sqlite_error)?;
    Ok(render(&steps))
}

/// `(id, parent, detail)` rows, in SQLite's order (a parent before its children), as indented lines.
fn render(steps: &[(i64, i64, String)]) -> Vec<String> {
    if steps.is_empty() {
        return vec!["Result".to_owned()];
    }
    let mut depths: Vec<(i64, usize)> = Vec::with_capacity(steps.len());
    let mut lines = Vec::with_capacity(steps.len());
    for (id, parent, detail) in steps {
        let depth = depths
            .iter()
            .rev()
            .find(|(known, _)| known == parent)
            .map_or(0, |(_, depth)| depth + 1);
        depths.push((*id, depth));
        lines.push(if depth == 0 {
            detail.clone()
        } else {
            format!("{}->  {detail}", " ".repeat(2 + 6 * (depth - 1)))
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::{analyzed_plan, render};

    #[test]
    fn an_analyzed_plan_has_the_rows_on_its_first_line_and_the_time_last() {
        let plan = vec!["SCAN t".to_owned(), "  ->  SEARCH u USING INDEX u_t (t=?)".to_owned()];
        assert_eq!(
            analyzed_plan(&plan, 7, std::time::Duration::from_micros(1250)),
            vec![
                "SCAN t  (actual rows=7 loops=1)".to_owned(),
                "  ->  SEARCH u USING INDEX u_t (t=?)".to_owned(),
                "Execution Time: 1.250 ms".to_owned(),
            ]
        );
    }

    #[test]
    fn children_are_indented_under_their_parents() {
        let steps = vec![
            (2, 0, "SCAN t".to_owned()),
            (5, 0, "CORRELATED SCALAR SUBQUERY 1".to_owned()),
            (9, 5, "SEARCH u USING INDEX u_t (t=?)".to_owned()),
            (12, 9, "LIST SUBQUERY".to_owned()),
            (20, 0, "USE TEMP B-TREE FOR ORDER BY".to_owned()),
        ];
        assert_eq!(
            render(&steps),
            vec![
                "SCAN t",
                "CORRELATED SCALAR SUBQUERY 1",
                "  ->  SEARCH u USING INDEX u_t (t=?)",
                "        ->  LIST SUBQUERY",
                "USE TEMP B-TREE FOR ORDER BY",
            ]
        );
        assert_eq!(render(&[]), vec!["Result"]);
    }
}
