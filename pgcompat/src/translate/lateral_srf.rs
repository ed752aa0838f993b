//! `LATERAL` subqueries over set-returning functions, flattened into the FROM around them: drizzle-kit's
//! `CROSS JOIN LATERAL (SELECT unnest(i.indkey), generate_subscripts(i.indkey, 1) + 1) AS k(attnum, i)`.
//!
//! Once rewritten (`srf`), such a subquery is `SELECT <expressions> FROM <json_each items>`: one table-valued
//! `json_each` per function (several zipped on a series of positions). SQLite has no `LATERAL`, but a
//! table-valued function may read the FROM items before it — which a derived table may not, nor a
//! parenthesized join. So the subquery's FROM items take its place in the outer join list ([`flatten`], then
//! [`splice`] once the SELECT is done), and its columns (`k.attnum`) are its expressions over them, known to
//! the rewriter as a set-returning function's columns are.
//!
//! Only a subquery with nothing but those items and a list qualifies (no WHERE, grouping, DISTINCT, ORDER BY
//! or LIMIT), joined by `CROSS JOIN`, a comma, or `[INNER|LEFT] JOIN … ON true`; any other `LATERAL` stays
//! for the rewriter to refuse.

use sqlparser::ast::{
    Expr, GroupByExpr, Join, JoinConstraint, JoinOperator, SelectItem, SetExpr, TableFactor, TableWithJoins, Value,
};

use super::expr::{Scope, Typer};
use super::srf::{FunctionColumn, FunctionTable, ALIAS_PREFIX};

/// A lateral subquery over set-returning functions as the join of its FROM items (a parenthesized join for
/// [`splice`] to open), and its columns under its alias. `inner` is the scope of the subquery's SELECT (its
/// functions' columns, for the types).
pub(crate) fn flatten(
    typer: &Typer<'_>,
    inner: Option<&Scope>,
    factor: &TableFactor,
) -> Option<(TableFactor, FunctionTable)> {
    let TableFactor::Derived {
        lateral: true,
        subquery,
        alias: Some(alias),
        ..
    } = factor
    else {
        return None;
    };
    let plain_query = subquery.with.is_none()
        && subquery.order_by.is_none()
        && subquery.limit_clause.is_none()
        && subquery.fetch.is_none();
    let SetExpr::Select(select) = subquery.body.as_ref() else {
        return None;
    };
    let plain_select = select.selection.is_none()
        && select.having.is_none()
        && select.distinct.is_none()
        && matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty());
    let [from] = select.from.as_slice() else {
        return None;
    };
    let first = function_alias(&from.relation)?;
    if !plain_query || !plain_select || !from.joins.iter().all(|j| function_alias(&j.relation).is_some()) {
        return None;
    }
    let typer = Typer {
        rewritten: typer.rewritten.clone(),
        catalog: typer.catalog,
        scopes: inner.cloned().into_iter().collect(),
        ctes: typer.ctes.clone(),
    };
    let mut columns = Vec::with_capacity(select.projection.len());
    for (i, item) in select.projection.iter().enumerate() {
        let (own, expr) = match item {
            SelectItem::ExprWithAlias { expr, alias } => (Some(alias.value.clone()), expr),
            SelectItem::UnnamedExpr(expr) => (None, expr),
            _ => return None,
        };
        let name = match alias.columns.get(i) {
            Some(given) => given.name.value.clone(),
            None => own?,
        };
        columns.push(FunctionColumn {
            name,
            ty: typer.infer(expr),
            expr: expr.clone(),
        });
    }
    let table = FunctionTable {
        sqlite_alias: first,
        alias: alias.name.value.clone(),
        columns,
    };
    let replacement = if from.joins.is_empty() {
        from.relation.clone()
    } else {
        TableFactor::NestedJoin {
            table_with_joins: Box::new(from.clone()),
            alias: None,
        }
    };
    Some((replacement, table))
}

/// The alias of a `json_each` item made for a set-returning function.
fn function_alias(factor: &TableFactor) -> Option<String> {
    match factor {
        TableFactor::Table {
            alias: Some(alias),
            args: Some(_),
            ..
        } if alias.name.value.starts_with(ALIAS_PREFIX) => Some(alias.name.value.clone()),
        _ => None,
    }
}

/// Whether a factor is a flattened lateral's parenthesized join.
fn flattened(factor: &TableFactor) -> bool {
    matches!(factor, TableFactor::NestedJoin { table_with_joins, alias: None }
        if function_alias(&table_with_joins.relation).is_some()
            && table_with_joins.joins.iter().all(|j| function_alias(&j.relation).is_some()))
}

/// The aliases of the function items a flattened lateral holds (for the scope that reads its columns).
pub(crate) fn aliases_inside(factor: &TableFactor) -> Vec<String> {
    match factor {
        TableFactor::NestedJoin { table_with_joins, .. } if flattened(factor) => {
            std::iter::once(&table_with_joins.relation)
                .chain(table_with_joins.joins.iter().map(|j| &j.relation))
                .filter_map(function_alias)
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Opens each flattened lateral's parenthesized join into the join list around it (SQLite lets a
/// table-valued function read the items before it only at that level). Joined `CROSS`, by a comma or
/// `ON true`, the items joined one after the other make the same rows; a `LEFT JOIN … ON true` keeps the
/// outer row with NULLs when the functions make none, as the first item's `LEFT JOIN … ON true` does.
pub(crate) fn splice(from: &mut Vec<TableWithJoins>) {
    *from = std::mem::take(from).into_iter().map(open_table).collect();
}

fn open_table(table: TableWithJoins) -> TableWithJoins {
    let (relation, mut joins_out) = open(table.relation);
    for join in table.joins {
        if !joined_on_true(&join.join_operator) {
            joins_out.push(join);
            continue;
        }
        let (relation, inner_joins) = open(join.relation);
        joins_out.push(Join { relation, ..join });
        joins_out.extend(inner_joins);
    }
    TableWithJoins {
        relation,
        joins: joins_out,
    }
}

/// A flattened lateral's join opened: its first item and the joins after it; any other factor as it is.
fn open(factor: TableFactor) -> (TableFactor, Vec<Join>) {
    if !flattened(&factor) {
        return (factor, Vec::new());
    }
    match factor {
        TableFactor::NestedJoin { table_with_joins, .. } => (table_with_joins.relation, table_with_joins.joins),
        other => (other, Vec::new()),
    }
}

fn joined_on_true(operator: &JoinOperator) -> bool {
    let on_true = |c: &JoinConstraint| {
        matches!(c, JoinConstraint::On(Expr::Value(v)) if v.value == Value::Boolean(true))
            || matches!(c, JoinConstraint::None)
    };
    match operator {
        JoinOperator::CrossJoin(c)
        | JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c) => on_true(c),
        _ => false,
    }
}
