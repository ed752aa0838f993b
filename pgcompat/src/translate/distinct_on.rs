//! `SELECT DISTINCT ON (keys) …`, which SQLite lacks, as the first row of each key by the query's ORDER BY:
//!
//! ```sql
//! SELECT "a", "b" FROM (SELECT a AS "a", b AS "b",
//!     row_number() OVER (PARTITION BY keys ORDER BY o1, o2) AS _pgc_rn, o1 AS _pgc_o0, o2 AS _pgc_o1
//!     FROM … WHERE …) AS _pgc_distinct
//! WHERE _pgc_rn = 1 ORDER BY _pgc_o0, _pgc_o1 LIMIT …
//! ```
//!
//! ORDER BY items and keys that name a result column (by position or name) are replaced by its expression,
//! as PostgreSQL resolves them. Made before the rest of the rewrite, which then applies to the new query.

use sqlparser::ast::{Distinct, Expr, OrderByKind, Query, SelectItem, SetExpr, Value, ValueWithSpan};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::quote_ident;
use crate::error::PgError;

/// The expression a DISTINCT ON key or ORDER BY item stands for: a result column's by position or name,
/// else itself.
fn resolve(expr: &Expr, items: &[SelectItem]) -> Result<Expr, PgError> {
    let item_expr = |item: &SelectItem| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e.clone()),
        _ => None,
    };
    match expr {
        Expr::Value(ValueWithSpan {
            value: Value::Number(n, _),
            ..
        }) => {
            let position: usize = n
                .parse()
                .map_err(|_| PgError::new(crate::error::SYNTAX_ERROR, format!("non-integer position {n}")))?;
            position
                .checked_sub(1)
                .and_then(|i| items.get(i))
                .and_then(item_expr)
                .ok_or_else(|| {
                    PgError::new(
                        crate::error::INVALID_COLUMN_REFERENCE,
                        format!("position {n} is not in select list"),
                    )
                })
        }
        Expr::Identifier(ident) => Ok(items
            .iter()
            .find_map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias } if alias.value.eq_ignore_ascii_case(&ident.value) => {
                    Some(expr.clone())
                }
                _ => None,
            })
            .unwrap_or_else(|| expr.clone())),
        _ => Ok(expr.clone()),
    }
}

/// Rewrites a query whose body is `SELECT DISTINCT ON (…)`; other queries are left alone. The SELECT list
/// must be named already (`names`).
pub(crate) fn rewrite(query: &mut Query) -> Result<(), PgError> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return Ok(());
    };
    let Some(Distinct::On(keys)) = &select.distinct else {
        return Ok(());
    };
    let items = &select.projection;
    let mut aliases = Vec::with_capacity(items.len());
    for item in items {
        match item {
            SelectItem::ExprWithAlias { alias, .. } => aliases.push(alias.value.clone()),
            _ => return Err(PgError::unsupported("DISTINCT ON with * in the SELECT list")),
        }
    }
    let keys: Vec<String> = keys
        .iter()
        .map(|k| resolve(k, items).map(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let mut window_order = Vec::new();
    let mut outer_order = Vec::new();
    let mut hidden = Vec::new();
    if let Some(order_by) = &query.order_by {
        let OrderByKind::Expressions(order_items) = &order_by.kind else {
            return Err(PgError::unsupported("DISTINCT ON with ORDER BY ALL"));
        };
        for (i, item) in order_items.iter().enumerate() {
            let expr = resolve(&item.expr, items)?;
            let options = item.options.to_string();
            window_order.push(format!("{expr} {options}"));
            hidden.push(format!("{expr} AS _pgc_o{i}"));
            outer_order.push(format!("_pgc_o{i} {options}"));
        }
    }
    let mut inner = select.clone();
    inner.distinct = None;
    let window = format!(
        "row_number() OVER (PARTITION BY {}{}) AS _pgc_rn",
        keys.join(", "),
        if window_order.is_empty() {
            String::new()
        } else {
            format!(" ORDER BY {}", window_order.join(", "))
        }
    );
    let mut inner_sql = inner.to_string();
    // The window and hidden columns go after the SELECT list: rebuilt from the list's own text.
    let list: Vec<String> = inner.projection.iter().map(ToString::to_string).collect();
    let mut extended = list.clone();
    extended.push(window);
    extended.extend(hidden);
    let list_text = list.join(", ");
    if let Some(at) = inner_sql.find(&list_text) {
        inner_sql.replace_range(at..at + list_text.len(), &extended.join(", "));
    } else {
        return Err(PgError::new(crate::error::INTERNAL_ERROR, "rewriting DISTINCT ON"));
    }
    let outer_list: Vec<String> = aliases.iter().map(|a| quote_ident(a)).collect();
    let mut sql = format!(
        "SELECT {} FROM ({inner_sql}) AS _pgc_distinct WHERE _pgc_rn = 1",
        outer_list.join(", ")
    );
    if !outer_order.is_empty() {
        sql.push_str(&format!(" ORDER BY {}", outer_order.join(", ")));
    }
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, &sql)
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting DISTINCT ON: {e}")))?;
    let Some(sqlparser::ast::Statement::Query(rewritten)) = statements.pop() else {
        return Err(PgError::new(crate::error::INTERNAL_ERROR, "rewriting DISTINCT ON"));
    };
    query.body = rewritten.body;
    query.order_by = rewritten.order_by;
    Ok(())
}
