//! Rules PostgreSQL applies to a whole query that SQLite does not, so a statement SQLite would answer
//! silently gets PostgreSQL's answer or error:
//!
//! - **Grouping** (42803): in an aggregate query, a column of the SELECT list that is neither grouped nor
//!   inside an aggregate is an error (SQLite returns the value of an arbitrary row). Checked where it is
//!   certain: a query with aggregates and no GROUP BY, and a plain column missing from a GROUP BY that
//!   holds no primary-key column (a primary key makes the table's other columns functionally dependent,
//!   which PostgreSQL accepts).
//! - **Set operation types**: an untyped string literal in one branch of a UNION, INTERSECT or EXCEPT
//!   takes the type the other branches give that column (`SELECT 1 UNION SELECT 'a'` is 22P02).

use rusqlite::Connection;
use sqlparser::ast::{Expr, FunctionArguments, GroupByExpr, Query, Select, SelectItem, SetExpr};

use super::expr::{cast_call, last_part, Scope, Typer};
use crate::catalog::Catalog;
use crate::error::PgError;
use crate::types::PgType;

/// The aggregate functions whose presence makes a SELECT an aggregate query.
const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "array_agg",
    "string_agg",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "bool_and",
    "bool_or",
    "every",
    "stddev",
    "stddev_samp",
    "stddev_pop",
    "variance",
    "var_samp",
    "var_pop",
    "bit_and",
    "bit_or",
];

/// Whether an expression calls an aggregate outside any subquery; `columns` collects the column
/// references outside aggregates and subqueries.
fn scan(expr: &Expr, columns: &mut Vec<Expr>) -> bool {
    match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
            columns.push(expr.clone());
            false
        }
        Expr::Function(f) => {
            let name = last_part(&f.name).to_ascii_lowercase();
            if f.over.is_none() && AGGREGATES.contains(&name.as_str()) {
                return true;
            }
            let mut found = false;
            if let FunctionArguments::List(list) = &f.args {
                for arg in &list.args {
                    if let sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) = arg {
                        found |= scan(e, columns);
                    }
                }
            }
            found
        }
        Expr::BinaryOp { left, right, .. } => scan(left, columns) | scan(right, columns),
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsFalse(expr)
        | Expr::IsNotTrue(expr)
        | Expr::IsNotFalse(expr) => scan(expr, columns),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let mut found = operand.as_deref().is_some_and(|o| scan(o, columns));
            for c in conditions {
                found |= scan(&c.condition, columns);
                found |= scan(&c.result, columns);
            }
            found | else_result.as_deref().is_some_and(|e| scan(e, columns))
        }
        _ => false,
    }
}

/// The column a reference names, folded as PostgreSQL folds unquoted names.
fn column_name(expr: &Expr) -> Option<String> {
    let ident = match expr {
        Expr::Identifier(i) => i,
        Expr::CompoundIdentifier(parts) => parts.last()?,
        _ => return None,
    };
    Some(if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    })
}

/// The primary-key columns of `table` (SQLite's `pk` order), empty for none or an unknown table.
fn primary_key(conn: &Connection, table: &str) -> Vec<String> {
    conn.prepare_cached("SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk")
        .and_then(|mut s| {
            s.query_map([table], |r| r.get::<_, String>(0))
                .map(|rows| rows.filter_map(Result::ok).collect())
        })
        .unwrap_or_default()
}

/// 42803 for a SELECT that reads an ungrouped column in an aggregate query (see the module doc).
pub(crate) fn check_grouping(conn: &Connection, select: &Select) -> Result<(), PgError> {
    let mut columns = Vec::new();
    let mut aggregates = false;
    for item in &select.projection {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
            aggregates |= scan(e, &mut columns);
        }
    }
    let grouped: &[Expr] = match &select.group_by {
        GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs,
        _ => return Ok(()),
    };
    if columns.is_empty() || (!aggregates && grouped.is_empty()) {
        return Ok(());
    }
    // A GROUP BY by position or output name, or over an expression, is not second-guessed here; neither
    // is one holding a primary-key column (functional dependency).
    // The output names (`GROUP BY index_name` for `… AS index_name`, drizzle-kit's form).
    let outputs: Vec<String> = select
        .projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_ascii_lowercase()),
            _ => None,
        })
        .collect();
    let mut grouped_names = Vec::with_capacity(grouped.len());
    for g in grouped {
        let Some(name) = column_name(g) else {
            return Ok(());
        };
        if matches!(g, Expr::Identifier(_)) && outputs.contains(&name.to_ascii_lowercase()) {
            return Ok(());
        }
        grouped_names.push(name);
    }
    let tables: Vec<String> = select
        .from
        .iter()
        .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)))
        .filter_map(|factor| match factor {
            sqlparser::ast::TableFactor::Table { name, args: None, .. } => Some(last_part(name)),
            _ => None,
        })
        .collect();
    if tables.iter().any(|t| {
        primary_key(conn, t)
            .iter()
            .any(|k| grouped_names.contains(&k.to_ascii_lowercase()))
    }) {
        return Ok(());
    }
    for column in &columns {
        let Some(name) = column_name(column) else { continue };
        if !grouped_names.contains(&name) {
            let shown = column.to_string();
            return Err(PgError::new(
                crate::error::GROUPING_ERROR,
                format!("column \"{shown}\" must appear in the GROUP BY clause or be used in an aggregate function"),
            ));
        }
    }
    Ok(())
}

/// The SELECT branches of a query body, left to right (nested set operations flattened).
fn branches<'q>(body: &'q mut SetExpr, out: &mut Vec<&'q mut Select>) {
    match body {
        SetExpr::Select(select) => out.push(select),
        SetExpr::SetOperation { left, right, .. } => {
            branches(left, out);
            branches(right, out);
        }
        SetExpr::Query(q) => branches(&mut q.body, out),
        _ => {}
    }
}

fn is_string_literal(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Value(sqlparser::ast::ValueWithSpan {
            value: sqlparser::ast::Value::SingleQuotedString(_),
            ..
        })
    )
}

/// Gives the string literals of a set operation's branches the type the other branches give their column
/// (the query already rewritten, so its expressions type).
pub(crate) fn type_set_operation_literals(catalog: &Catalog, query: &mut Query) {
    if !matches!(query.body.as_ref(), SetExpr::SetOperation { .. }) {
        return;
    }
    let mut selects = Vec::new();
    branches(&mut query.body, &mut selects);
    let width = selects.iter().map(|s| s.projection.len()).min().unwrap_or(0);
    for column in 0..width {
        let mut known: Option<PgType> = None;
        for select in &selects {
            let typer = Typer {
                catalog,
                scopes: vec![Scope::of_select(select)],
                ctes: Vec::new(),
                rewritten: Vec::new(),
            };
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = &select.projection[column] {
                if !is_string_literal(e) {
                    known = known.or_else(|| typer.infer(e));
                }
            }
        }
        let Some(ty) = known.filter(|t| !t.is_string()) else {
            continue;
        };
        for select in selects.iter_mut() {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } =
                &mut select.projection[column]
            {
                if is_string_literal(e) {
                    let literal = std::mem::replace(e, Expr::value(sqlparser::ast::Value::Null));
                    *e = cast_call(literal, ty, Some(PgType::TEXT));
                }
            }
        }
    }
}
