//! A set-returning function in the SELECT list of a grouped query, which `srf` moves to FROM only when it
//! is one of the query's grouping keys.

use sqlparser::ast::{Expr, GroupByExpr, Select, SelectItem, Value};

use super::super::expr::Rewriter;

/// Whether every set-returning item of a grouped SELECT list is one of its grouping keys, named by its
/// alias (one that names no input column, which PostgreSQL would group by instead) or its position:
/// PostgreSQL then runs the functions before grouping, as FROM items run. Otherwise they run once per
/// group, which a FROM item cannot.
pub(super) fn functions_are_grouping_keys(
    rewriter: &Rewriter<'_>,
    select: &Select,
    is_function: impl Fn(&SelectItem) -> bool,
) -> bool {
    let GroupByExpr::Expressions(keys, modifiers) = &select.group_by else {
        return false;
    };
    if !modifiers.is_empty() {
        return false;
    }
    let is_key = |position: usize, item: &SelectItem| {
        keys.iter().any(|key| match key {
            Expr::Value(value) => matches!(
                &value.value,
                Value::Number(n, _) if n.parse::<usize>().ok() == Some(position + 1)
            ),
            Expr::Identifier(ident) => {
                matches!(item, SelectItem::ExprWithAlias { alias, .. } if alias.value.eq_ignore_ascii_case(&ident.value))
                    && !rewriter.typer.has_column(&ident.value)
            }
            _ => false,
        })
    };
    select
        .projection
        .iter()
        .enumerate()
        .filter(|(_, item)| is_function(item))
        .all(|(position, item)| is_key(position, item))
}
