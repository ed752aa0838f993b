//! Result column names as PostgreSQL gives them (its `FigureColname`): a column keeps its name folded to
//! lower case, a function call is named after the function, a cast after its operand or else its type,
//! `CASE` is `case`, and anything else `?column?`. Every unnamed item gets that name as an alias, so
//! SQLite (which names a column after its expression text) reports the same.

use sqlparser::ast::{Expr, Ident, Query, SelectItem, SetExpr, Value};

use super::expr::{last_part, written_type};

/// Names the result columns of a query, and of its CTEs without a column list (a later part reads a CTE's
/// `count(1)` as `count`, as PostgreSQL names it).
pub(crate) fn name_columns(query: &mut Query) {
    if let Some(with) = &mut query.with {
        for cte in &mut with.cte_tables {
            if cte.alias.columns.is_empty() {
                name_columns(&mut cte.query);
            }
        }
    }
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
    figure_with_strength(expr).map(|(name, _)| name)
}

/// How firmly a name sticks (PostgreSQL's `FigureColnameInternal` strengths): a cast names its column
/// after its type only when its operand has no better name than a weak one.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Strength {
    /// A type name (`'1'::int4` is `int4`), `case`.
    Weak,
    /// A column, a function, a keyword construct (`array`, `exists`).
    Strong,
}

fn figure_with_strength(expr: &Expr) -> Option<(String, Strength)> {
    let strong = |name: &str| Some((name.to_owned(), Strength::Strong));
    match expr {
        Expr::Identifier(ident) => Some((fold(ident), Strength::Strong)),
        Expr::CompoundIdentifier(parts) => parts.last().map(|p| (fold(p), Strength::Strong)),
        Expr::Function(function) => strong(&last_part(&function.name).to_ascii_lowercase()),
        Expr::Cast { expr, data_type, .. } => match figure_with_strength(expr) {
            Some(named @ (_, Strength::Strong)) => Some(named),
            _ => cast_name(data_type).map(|name| (name, Strength::Weak)),
        },
        Expr::TypedString(typed) => written_type(&typed.data_type)
            .ok()
            .map(|t| (t.internal_name(), Strength::Weak)),
        Expr::Interval(_) => Some(("interval".to_owned(), Strength::Weak)),
        // A CASE takes the name of its ELSE result when that is a strong one (a column or a function).
        Expr::Case { else_result, .. } => match else_result.as_deref().and_then(figure_with_strength) {
            Some(named @ (_, Strength::Strong)) => Some(named),
            _ => Some(("case".to_owned(), Strength::Weak)),
        },
        Expr::Array(_) => strong("array"),
        Expr::Exists { negated: false, .. } => strong("exists"),
        Expr::Nested(inner) => figure_with_strength(inner),
        // A subscript or field access is named after what it reads (`(ARRAY[1])[1]` is `array`), or after
        // the last field named.
        Expr::CompoundFieldAccess { root, access_chain } => {
            let field = access_chain.iter().rev().find_map(|access| match access {
                sqlparser::ast::AccessExpr::Dot(Expr::Identifier(ident)) => Some(fold(ident)),
                _ => None,
            });
            match field {
                Some(name) => Some((name, Strength::Strong)),
                None => figure_with_strength(root),
            }
        }
        Expr::Value(_) => None,
        Expr::Subquery(query) => match query.body.as_ref() {
            SetExpr::Select(select) => match select.projection.first() {
                Some(SelectItem::ExprWithAlias { alias, .. }) => Some((fold(alias), Strength::Strong)),
                Some(SelectItem::UnnamedExpr(e)) => figure_with_strength(e),
                _ => None,
            },
            _ => None,
        },
        Expr::Extract { .. } => strong("extract"),
        Expr::Position { .. } => strong("position"),
        Expr::Substring { shorthand: true, .. } => strong("substr"),
        Expr::Substring { .. } => strong("substring"),
        // PostgreSQL parses `trim(LEADING …)` as `ltrim(…)` and `trim(TRAILING …)` as `rtrim(…)`.
        Expr::Trim { trim_where, .. } => strong(match trim_where {
            Some(sqlparser::ast::TrimWhereField::Leading) => "ltrim",
            Some(sqlparser::ast::TrimWhereField::Trailing) => "rtrim",
            _ => "btrim",
        }),
        Expr::Overlay { .. } => strong("overlay"),
        Expr::BinaryOp {
            op: sqlparser::ast::BinaryOperator::Overlaps,
            ..
        } => strong("overlaps"),
        Expr::Ceil { .. } => strong("ceil"),
        Expr::Floor { .. } => strong("floor"),
        Expr::AtTimeZone { .. } => strong("timezone"),
        _ => None,
    }
}

/// The name a cast to `data_type` gives its column: the type's name as PostgreSQL prints it internally.
fn cast_name(data_type: &sqlparser::ast::DataType) -> Option<String> {
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
            // A type of the database's (an enum), or an array of one: PostgreSQL names the column by it.
            let element = match data_type {
                sqlparser::ast::DataType::Array(
                    sqlparser::ast::ArrayElemTypeDef::AngleBracket(element)
                    | sqlparser::ast::ArrayElemTypeDef::SquareBracket(element, _)
                    | sqlparser::ast::ArrayElemTypeDef::Parenthesis(element),
                ) => element.as_ref(),
                _ => data_type,
            };
            match crate::types::from_data_type(element) {
                crate::types::Written::Custom(name) => Some(name.rsplit('.').next().unwrap_or(&name).to_owned()),
                _ => None,
            }
        })
}
