//! FROM items SQLite lacks, rewritten to subqueries it runs: `generate_series(…)` as a recursive CTE (the
//! other set-returning functions are `srf`'s), and column aliases on a derived table (`(VALUES …) AS t(a, b)`) as
//! a CTE with a column list.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlparser::ast::{FunctionArg, FunctionArgExpr, SetExpr, Statement, TableAlias, TableFactor};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::expr::{last_part, Rewriter};
use crate::catalog::quote_ident;
use crate::error::PgError;
use crate::types::{Base, PgType};

/// A fresh name for a CTE the layer adds, so nested rewrites never collide.
fn fresh(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("_cambium_{prefix}_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Parses `SELECT * FROM <from_sql>` and returns its one FROM item.
fn factor_of(from_sql: &str) -> Result<TableFactor, PgError> {
    let sql = format!("SELECT * FROM {from_sql}");
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, &sql)
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting a FROM item: {e}")))?;
    let Some(Statement::Query(query)) = statements.pop() else {
        return Err(PgError::new(
            crate::error::INTERNAL_ERROR,
            "rewriting a FROM item gave no query",
        ));
    };
    let SetExpr::Select(mut select) = *query.body else {
        return Err(PgError::new(
            crate::error::INTERNAL_ERROR,
            "rewriting a FROM item gave no SELECT",
        ));
    };
    select
        .from
        .pop()
        .map(|t| t.relation)
        .ok_or_else(|| PgError::new(crate::error::INTERNAL_ERROR, "rewriting a FROM item gave no FROM"))
}

/// The names the columns of a function in FROM get: the alias's column list, else the alias (one
/// column), else the function's name; `WITH ORDINALITY` adds `ordinality`.
fn column_names(alias: Option<&TableAlias>, function: &str, with_ordinality: bool) -> (String, Vec<String>) {
    let table = alias.map_or_else(|| function.to_owned(), |a| a.name.value.clone());
    let mut names: Vec<String> =
        alias.map_or_else(Vec::new, |a| a.columns.iter().map(|c| c.name.value.clone()).collect());
    if names.is_empty() {
        names.push(alias.map_or_else(|| function.to_owned(), |a| a.name.value.clone()));
    }
    if with_ordinality && names.len() < 2 {
        names.push("ordinality".to_owned());
    }
    (table, names)
}

/// A replacement for a FROM item, if it needs one.
pub(crate) fn rewrite_factor(rewriter: &Rewriter<'_>, factor: &TableFactor) -> Result<Option<TableFactor>, PgError> {
    match factor {
        TableFactor::Table {
            name,
            args: Some(args),
            alias,
            with_ordinality,
            ..
        } => {
            let function = last_part(name).to_ascii_lowercase();
            let exprs: Vec<&sqlparser::ast::Expr> = args
                .args
                .iter()
                .filter_map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect();
            match function.as_str() {
                "generate_series" => generate_series(rewriter, &exprs, alias.as_ref(), *with_ordinality).map(Some),
                _ => Ok(None),
            }
        }
        TableFactor::Derived {
            subquery,
            alias: Some(alias),
            ..
        } if !alias.columns.is_empty() => {
            // SQLite has no column list on a derived table's alias; a CTE has one.
            let cte = fresh("derived");
            let columns: Vec<String> = alias.columns.iter().map(|c| quote_ident(&c.name.value)).collect();
            let sql = format!(
                "(WITH {cte} ({}) AS ({subquery}) SELECT * FROM {cte}) AS {}",
                columns.join(", "),
                quote_ident(&alias.name.value)
            );
            factor_of(&sql).map(Some)
        }
        _ => Ok(None),
    }
}

/// `generate_series(start, stop[, step])` of integers, numerics or timestamps, as a recursive CTE.
fn generate_series(
    rewriter: &Rewriter<'_>,
    args: &[&sqlparser::ast::Expr],
    alias: Option<&TableAlias>,
    with_ordinality: bool,
) -> Result<TableFactor, PgError> {
    let (start, stop, step) = match args {
        [start, stop] => (start, stop, None),
        [start, stop, step] => (start, stop, Some(step)),
        _ => {
            return Err(PgError::new(
                crate::error::UNDEFINED_FUNCTION,
                "function generate_series takes 2 or 3 arguments",
            ))
        }
    };
    let ty = rewriter.typer.infer(start).or_else(|| rewriter.typer.infer(stop));
    let datetime = ty.is_some_and(|t| matches!(t.base(), Base::Timestamp | Base::Timestamptz | Base::Date));
    let cte = fresh("series");
    let (table, names) = column_names(alias, "generate_series", with_ordinality);
    let (first, next, first_ok, next_ok) = if datetime {
        let Some(step) = step else {
            return Err(PgError::new(
                crate::error::UNDEFINED_FUNCTION,
                "function generate_series(timestamp, timestamp) needs an interval step",
            ));
        };
        // Dates step as `timestamptz` (date's preferred cast), as PostgreSQL resolves the call.
        let point = if ty.is_some_and(|t| matches!(t.base(), Base::Timestamptz | Base::Date)) {
            "timestamptz"
        } else {
            "timestamp"
        };
        let source = ty.map_or_else(String::new, PgType::catalog_text);
        let first = format!("pg_cast({start}, '{point}', '{source}')");
        let last = format!("pg_cast({stop}, '{point}', '{source}')");
        let next = format!("pg_datetime_arith(v, '+', {step}, '{point}', '{point}', 'interval')");
        let first_ok = format!("{first} <= {last}");
        let next_ok = format!("{next} <= {last}");
        (first, next, first_ok, next_ok)
    } else {
        let step = step.map_or_else(|| "1".to_owned(), ToString::to_string);
        let next = format!("v + ({step})");
        let first_ok = format!("(({step}) > 0 AND {start} <= {stop}) OR (({step}) < 0 AND {start} >= {stop})");
        let next_ok = format!("(({step}) > 0 AND {next} <= {stop}) OR (({step}) < 0 AND {next} >= {stop})");
        (start.to_string(), next, first_ok, next_ok)
    };
    let mut columns = format!("v AS {}", quote_ident(&names[0]));
    if with_ordinality {
        columns.push_str(&format!(", row_number() OVER () AS {}", quote_ident(&names[1])));
    }
    let sql = format!(
        "(WITH RECURSIVE {cte} (v) AS (SELECT {first} WHERE {first_ok} UNION ALL SELECT {next} FROM {cte} WHERE {next_ok}) \
         SELECT {columns} FROM {cte}) AS {}",
        quote_ident(&table),
    );
    factor_of(&sql)
}
