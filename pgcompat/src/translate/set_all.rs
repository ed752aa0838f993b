//! `INTERSECT ALL` and `EXCEPT ALL`, which SQLite lacks, as the plain operators over rows numbered within
//! their duplicates: each side's rows get `row_number() OVER (PARTITION BY every column)`, so a row present
//! `a` times on the left and `b` times on the right keeps `min(a, b)` copies through `INTERSECT` (the numbers
//! 1..min match) and `max(a - b, 0)` through `EXCEPT` (the numbers b+1..a remain), as PostgreSQL counts them.
//! The sides become CTEs with numbered column names inside a derived table, and the outer SELECT gives the
//! columns the left side's names. A side whose width cannot be told (`*`) is refused with 0A000.

use sqlparser::ast::{Expr, Query, SelectItem, SetExpr, SetOperator, SetQuantifier, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::quote_ident;
use crate::error::PgError;

/// Rewrites every `INTERSECT ALL`/`EXCEPT ALL` of the query's body (its set operations, not its subqueries).
pub(super) fn rewrite(query: &mut Query) -> Result<(), PgError> {
    rewrite_set(query.body.as_mut())
}

fn rewrite_set(body: &mut SetExpr) -> Result<(), PgError> {
    match body {
        SetExpr::SetOperation {
            op,
            set_quantifier,
            left,
            right,
        } => {
            rewrite_set(left)?;
            rewrite_set(right)?;
            let keyword = match op {
                SetOperator::Intersect => "INTERSECT",
                SetOperator::Except | SetOperator::Minus => "EXCEPT",
                SetOperator::Union => return Ok(()),
            };
            if !matches!(set_quantifier, SetQuantifier::All) {
                return Ok(());
            }
            let names = output_names(left).ok_or_else(|| {
                PgError::unsupported(format!("{keyword} ALL over a SELECT * or a SELECT without names"))
            })?;
            *body = numbered(keyword, left, right, &names)?;
            Ok(())
        }
        SetExpr::Query(query) => rewrite_set(query.body.as_mut()),
        _ => Ok(()),
    }
}

/// The result column names of a set operation's side (its first SELECT's), if every item names one.
fn output_names(side: &SetExpr) -> Option<Vec<String>> {
    match side {
        SetExpr::Select(select) => select
            .projection
            .iter()
            .map(|item| match item {
                SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
                SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Some(ident.value.clone()),
                SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().map(|p| p.value.clone()),
                _ => None,
            })
            .collect(),
        SetExpr::SetOperation { left, .. } => output_names(left),
        SetExpr::Query(query) => output_names(&query.body),
        SetExpr::Values(values) => {
            let width = values.rows.first()?.content.len();
            Some((1..=width).map(|i| format!("column{i}")).collect())
        }
        _ => None,
    }
}

/// `SELECT … FROM (WITH l(…) AS (left), r(…) AS (right) SELECT …, row_number() … FROM l <op> SELECT … FROM r)`.
fn numbered(keyword: &str, left: &SetExpr, right: &SetExpr, names: &[String]) -> Result<SetExpr, PgError> {
    let columns: Vec<String> = (1..=names.len()).map(|i| format!("_cambium_c{i}")).collect();
    let list = columns.join(", ");
    let outputs: Vec<String> = columns
        .iter()
        .zip(names)
        .map(|(column, name)| format!("{column} AS {}", quote_ident(name)))
        .collect();
    let side =
        |table: &str| format!("SELECT {list}, row_number() OVER (PARTITION BY {list}) AS _cambium_n FROM {table}");
    let sql = format!(
        "SELECT {} FROM (WITH _cambium_l ({list}) AS ({left}), _cambium_r ({list}) AS ({right}) {} {keyword} {}) AS _cambium_set",
        outputs.join(", "),
        side("_cambium_l"),
        side("_cambium_r"),
    );
    let internal = |what: String| PgError::new(crate::error::INTERNAL_ERROR, format!("{keyword} ALL: {what}"));
    let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql).map_err(|e| internal(e.to_string()))?;
    match parsed.pop() {
        Some(Statement::Query(query)) => Ok(*query.body),
        _ => Err(internal("no query".to_owned())),
    }
}
