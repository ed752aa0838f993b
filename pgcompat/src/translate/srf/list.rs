//! Set-returning functions in a SELECT list (`SELECT unnest(a) FROM t`): each moved into the FROM as its
//! `json_each` item (several side by side, zipped on a series of positions, as PostgreSQL 10+ runs them), the
//! item reading its column; and `*` over a FROM with such items spelled out with their PostgreSQL columns.

use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, ObjectName, Select,
    SelectItem, SelectItemQualifiedWildcardKind, TableFactor, TableWithJoins, WildcardAdditionalOptions,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::super::expr::{last_part, Rewriter};
use super::{fresh_alias, function_table, grouping, handles, FunctionTable};
use crate::catalog::quote_ident;
use crate::error::PgError;
use crate::types::PgType;

/// The SELECT list of a SELECT whose scope is entered: a set-returning function call that is a whole item
/// moves into the FROM (a `json_each` item joined after the others, as PostgreSQL runs it once per row of
/// the FROM), and `*` is spelled out where the FROM has rewritten functions.
pub(crate) fn projection(rewriter: &mut Rewriter<'_>, select: &mut Select) -> Result<(), PgError> {
    move_list_functions(rewriter, select)?;
    let has_functions = rewriter.typer.scopes.last().is_some_and(|s| !s.functions.is_empty());
    let has_wildcard = select
        .projection
        .iter()
        .any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)));
    if has_functions && has_wildcard {
        expand_wildcards(rewriter, select)?;
    }
    Ok(())
}

/// The expression of a select item where a set-returning function may stand: the item, what it casts, or
/// an operand of an operator over it (`generate_subscripts(a, 1) + 1`: the expression is computed per row).
fn list_slot(item: &mut SelectItem) -> Option<&mut Expr> {
    let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
        return None;
    };
    match e {
        Expr::Cast { expr, .. } => Some(expr.as_mut()),
        Expr::BinaryOp { left, right, .. } => {
            if slot_function(left).is_some() {
                Some(left.as_mut())
            } else {
                Some(right.as_mut())
            }
        }
        other => Some(other),
    }
}

/// The set-returning function an item calls, if the item is one call of one (or a cast of one, or an
/// operator over one).
fn list_function(item: &SelectItem) -> Option<&Function> {
    let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
        return None;
    };
    match e {
        Expr::Cast { expr, .. } => slot_function(expr),
        Expr::BinaryOp { left, right, .. } => slot_function(left).or_else(|| slot_function(right)),
        other => slot_function(other),
    }
}

/// The expression as a call of a set-returning function the layer handles.
fn slot_function(e: &Expr) -> Option<&Function> {
    let Expr::Function(f) = e else {
        return None;
    };
    let name = last_part(&f.name).to_ascii_lowercase();
    (handles(&name) && f.over.is_none() && matches!(f.args, FunctionArguments::List(_))).then_some(f)
}

fn move_list_functions(rewriter: &mut Rewriter<'_>, select: &mut Select) -> Result<(), PgError> {
    let count = select.projection.iter().filter(|i| list_function(i).is_some()).count();
    if count == 0 {
        return Ok(());
    }
    let grouped =
        !matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty()) || select.having.is_some();
    if grouped && !grouping::functions_are_grouping_keys(rewriter, select, |item| list_function(item).is_some()) {
        return Err(PgError::unsupported(
            "a set-returning function in the SELECT list of a grouped query",
        ));
    }
    let mut moved = Vec::with_capacity(count);
    for item in &mut select.projection {
        let Some(function) = list_function(item) else {
            continue;
        };
        let name = last_part(&function.name).to_ascii_lowercase();
        if count > 1 && (name.ends_with("_each") || name.ends_with("_each_text") || name.ends_with("_object_keys")) {
            return Err(PgError::unsupported(format!(
                "{name} beside another set-returning function in one SELECT list"
            )));
        }
        let mut args: Vec<Expr> = Vec::new();
        if let FunctionArguments::List(list) = &function.args {
            for arg in &list.args {
                let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg else {
                    return Err(PgError::unsupported(format!("the argument {arg} of {name}")));
                };
                args.push(e.clone());
            }
        }
        for arg in &mut args {
            super::super::walk::expr(rewriter, arg)?;
        }
        let refs: Vec<&Expr> = args.iter().collect();
        let (factor, table) = function_table(&rewriter.typer, &name, &refs, None, false)?;
        let column = table.columns[0].expr.clone();
        let Some(slot) = list_slot(item) else {
            continue;
        };
        *slot = column;
        moved.push(factor);
        if let Some(scope) = rewriter.typer.scopes.last_mut() {
            scope.functions.push(table);
        }
    }
    match moved.as_slice() {
        [one] => select.from.push(TableWithJoins {
            relation: one.clone(),
            joins: Vec::new(),
        }),
        several => select.from.push(zipped(several)?),
    }
    Ok(())
}

/// Several set-returning functions of one SELECT list run side by side, as PostgreSQL runs them: row `n` has
/// each one's `n`th value, NULL for those that ended, as many rows as the longest has. Each is an array's
/// `json_each` (its `key` is the position), joined on a series of positions.
fn zipped(factors: &[TableFactor]) -> Result<TableWithJoins, PgError> {
    let counts: Vec<String> = factors
        .iter()
        .map(|factor| format!("(SELECT count(*) FROM {factor})"))
        .collect();
    let positions = fresh_alias();
    let mut sql = format!(
        "SELECT * FROM json_each(pg_series_json('{}', 0, max({}, 0) - 1)) AS {}",
        PgType::INT8.catalog_text(),
        counts.join(", "),
        quote_ident(&positions)
    );
    for factor in factors {
        let TableFactor::Table { alias: Some(alias), .. } = factor else {
            return Err(PgError::new(
                crate::error::INTERNAL_ERROR,
                "a set-returning function's FROM item has no alias",
            ));
        };
        sql.push_str(&format!(
            " LEFT JOIN {factor} ON {}.key = {}.value",
            quote_ident(&alias.name.value),
            quote_ident(&positions)
        ));
    }
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql).map_err(|e| {
        PgError::new(
            crate::error::INTERNAL_ERROR,
            format!("zipping set-returning functions: {e}"),
        )
    })?;
    match parsed.into_iter().next() {
        Some(sqlparser::ast::Statement::Query(query)) => match *query.body {
            sqlparser::ast::SetExpr::Select(mut select) if select.from.len() == 1 => Ok(select.from.remove(0)),
            _ => Err(PgError::new(
                crate::error::INTERNAL_ERROR,
                "zipping set-returning functions: not one FROM item",
            )),
        },
        _ => Err(PgError::new(
            crate::error::INTERNAL_ERROR,
            "zipping set-returning functions: not a query",
        )),
    }
}

/// `*` and `t.*` over a FROM with rewritten functions: their PostgreSQL columns, `t.*` for the others.
fn expand_wildcards(rewriter: &Rewriter<'_>, select: &mut Select) -> Result<(), PgError> {
    let Some(scope) = rewriter.typer.scopes.last() else {
        return Ok(());
    };
    let function_items = |table: &FunctionTable| -> Vec<SelectItem> {
        let named_once = |name: &str| {
            table
                .columns
                .iter()
                .filter(|c| c.name.eq_ignore_ascii_case(name))
                .count()
                == 1
        };
        table
            .columns
            .iter()
            .map(|c| SelectItem::ExprWithAlias {
                // A reference to the column, resolved (and typed) as any `alias.column` is: its expression is
                // already SQLite's and must not be translated again (`->` in it is SQLite's, not PostgreSQL's).
                // A name several columns share (`unnest(a, b)`: both `unnest`) would resolve to the first of
                // them: those columns are spelled out (they are casts of the zipped elements, which translate
                // to themselves).
                expr: if named_once(&c.name) {
                    Expr::CompoundIdentifier(vec![
                        Ident::with_quote('"', table.alias.clone()),
                        Ident::with_quote('"', c.name.clone()),
                    ])
                } else {
                    c.expr.clone()
                },
                alias: Ident::with_quote('"', c.name.clone()),
            })
            .collect()
    };
    let mut everything: Vec<SelectItem> = Vec::new();
    for factor in select
        .from
        .iter()
        .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)))
    {
        let key = match factor {
            TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
                a.name.value.clone()
            }
            TableFactor::Table { name, alias: None, .. } => last_part(name),
            _ => {
                return Err(PgError::unsupported(
                    "SELECT * over this FROM with a set-returning function",
                ))
            }
        };
        match scope.functions.iter().find(|f| f.sqlite_alias == key) {
            Some(table) => everything.extend(function_items(table)),
            None => everything.push(SelectItem::QualifiedWildcard(
                SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(vec![Ident::with_quote('"', key)])),
                WildcardAdditionalOptions::default(),
            )),
        }
    }
    let mut projection = Vec::with_capacity(select.projection.len());
    for item in select.projection.drain(..) {
        match &item {
            SelectItem::Wildcard(_) => projection.extend(everything.iter().cloned()),
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                match scope
                    .functions
                    .iter()
                    .find(|f| f.alias.eq_ignore_ascii_case(&last_part(name)))
                {
                    Some(table) => projection.extend(function_items(table)),
                    None => projection.push(item),
                }
            }
            _ => projection.push(item),
        }
    }
    select.projection = projection;
    Ok(())
}
