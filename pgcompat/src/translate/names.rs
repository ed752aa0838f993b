//! Result column names as PostgreSQL gives them (its `FigureColname`): a column keeps its name folded to
//! lower case, a function call is named after the function, a cast after its operand or else its type,
//! `CASE` is `case`, and anything else `?column?`. Every unnamed item gets that name as an alias, so
//! SQLite (which names a column after its expression text) reports the same.

use sqlparser::ast::{Expr, Ident, Query, SelectItem, SetExpr, Value};

use super::expr::{last_part, written_type};

/// Names the result columns of a query.
pub(crate) fn name_columns(query: &mut Query) {
    let mut body = query.body.as_mut();
    loop {
        match body {
            SetExpr::Select(select) => {
                name_items(&mut select.projection);
                return;
            }
            SetExpr::SetOperation { left, .. } => body = left.as_mut(),
            SetExpr::Query(q) => body = q.body.as_mut(),
            _ => return,
        }
    }
}

/// Names unnamed select items (also used for RETURNING lists); every alias is quoted, folded to lower
/// case unless it was quoted (so `AS nothing`, a keyword to SQLite, is a name, and `AS Total` is `total`).
pub(crate) fn name_items(items: &mut [SelectItem]) {
    for item in items.iter_mut() {
        if let SelectItem::ExprWithAlias { alias, .. } = item {
            *alias = Ident::with_quote('"', fold(alias));
            continue;
        }
        if let SelectItem::UnnamedExpr(expr) = item {
            let name = figure(expr).unwrap_or_else(|| "?column?".to_owned());
            let expr = std::mem::replace(expr, Expr::value(Value::Null));
            *item = SelectItem::ExprWithAlias {
                expr,
                alias: Ident::with_quote('"', name),
            };
        }
    }
}

fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

/// The name PostgreSQL gives an expression's column, `None` for `?column?`.
fn figure(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(fold(ident)),
        Expr::CompoundIdentifier(parts) => parts.last().map(fold),
        Expr::Function(function) => Some(last_part(&function.name).to_ascii_lowercase()),
        Expr::Cast { expr, data_type, .. } => figure(expr).or_else(|| {
            // The reg* types share one storage type; PostgreSQL names the column by the one written.
            let written = data_type.to_string().to_ascii_lowercase();
            let written = written.strip_prefix("pg_catalog.").unwrap_or(&written);
            if matches!(written, "regtype" | "regproc" | "regprocedure" | "regnamespace") {
                return Some(written.to_owned());
            }
            written_type(data_type)
                .ok()
                .map(|t| t.element().internal_name())
                .or_else(|| {
                    // A type of the database's (an enum): PostgreSQL names the column by it.
                    match crate::types::from_data_type(data_type) {
                        crate::types::Written::Custom(name) => {
                            Some(name.rsplit('.').next().unwrap_or(&name).to_owned())
                        }
                        _ => None,
                    }
                })
        }),
        Expr::TypedString(typed) => written_type(&typed.data_type).ok().map(|t| t.internal_name()),
        Expr::Interval(_) => Some("interval".to_owned()),
        // A CASE takes the name of its ELSE result when that is a strong one (a column or a function).
        Expr::Case { else_result, .. } => else_result
            .as_deref()
            .and_then(strong_name)
            .or_else(|| Some("case".to_owned())),
        Expr::Array(_) => Some("array".to_owned()),
        Expr::Exists { .. } => Some("exists".to_owned()),
        Expr::Nested(inner) => figure(inner),
        Expr::Value(_) => None,
        Expr::Subquery(query) => match query.body.as_ref() {
            SetExpr::Select(select) => match select.projection.first() {
                Some(SelectItem::ExprWithAlias { alias, .. }) => Some(fold(alias)),
                Some(SelectItem::UnnamedExpr(e)) => figure(e),
                _ => None,
            },
            _ => None,
        },
        Expr::Extract { .. } => Some("extract".to_owned()),
        Expr::Position { .. } => Some("position".to_owned()),
        Expr::Substring { shorthand: true, .. } => Some("substr".to_owned()),
        Expr::Substring { .. } => Some("substring".to_owned()),
        Expr::Trim { .. } => Some("btrim".to_owned()),
        Expr::Ceil { .. } => Some("ceil".to_owned()),
        Expr::Floor { .. } => Some("floor".to_owned()),
        Expr::AtTimeZone { .. } => Some("timezone".to_owned()),
        _ => None,
    }
}

/// The name of an expression when PostgreSQL deems it strong (a column, a function, a cast of either).
fn strong_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Function(_) => figure(expr),
        Expr::Cast { expr, .. } | Expr::Nested(expr) => strong_name(expr),
        Expr::Case { else_result, .. } => else_result.as_deref().and_then(strong_name),
        _ => None,
    }
}
