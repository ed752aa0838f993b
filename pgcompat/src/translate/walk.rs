//! A post-order walk over the parts of statements the layer rewrites: queries (CTEs, set operations,
//! SELECT lists, FROM with joins and derived tables, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT, VALUES) and
//! every expression inside them, children before their parent. Expression kinds the walk does not enter are
//! still rewritten themselves; their insides are left as written.

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Join, JoinConstraint, JoinOperator,
    LimitClause, OrderByKind, Query, Select, SelectItem, SetExpr, TableFactor, TableWithJoins, UnaryOperator, Value,
    ValueWithSpan, WindowType,
};

use crate::error::PgError;

/// What the walk calls: scopes around each SELECT, and each expression after its children.
pub(crate) trait Hooks {
    /// Entering a SELECT (its FROM is known).
    fn enter_select(&mut self, select: &Select);
    /// Leaving it.
    fn leave_select(&mut self);
    /// One expression, its children already done.
    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError>;
    /// One FROM item, its arguments and subqueries already done.
    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError>;
    /// A CTE about to be walked, and walked (its columns' types are known from its first SELECT).
    fn cte(&mut self, cte: &sqlparser::ast::Cte) {
        let _ = cte;
    }
    /// A SELECT walked, its scope still entered.
    fn finish_select(&mut self, select: &mut Select) -> Result<(), PgError> {
        let _ = select;
        Ok(())
    }
    /// The scope of the SELECT last left, entered again (for the ORDER BY of its query).
    fn reenter_select(&mut self) {}
    /// A query (the statement's, a CTE's, a subquery's) about to be walked.
    fn enter_query(&mut self, query: &mut Query) {
        let _ = query;
    }
    /// A SELECT whose FROM is done and whose scope is entered, before its list is walked.
    fn projection(&mut self, select: &mut Select) -> Result<(), PgError> {
        let _ = select;
        Ok(())
    }
}

/// Walks a query.
pub(crate) fn query<H: Hooks>(hooks: &mut H, query: &mut Query) -> Result<(), PgError> {
    hooks.enter_query(query);
    if let Some(with) = &mut query.with {
        for cte in &mut with.cte_tables {
            hooks.cte(cte);
            self::query(hooks, &mut cte.query)?;
            hooks.cte(cte);
        }
    }
    set_expr(hooks, &mut query.body)?;
    if let Some(order_by) = &mut query.order_by {
        if let OrderByKind::Expressions(items) = &mut order_by.kind {
            // Over one SELECT, ORDER BY may name its FROM's columns too: it is walked in that SELECT's
            // scope, except the items that name its result columns.
            let outputs: Vec<String> = match query.body.as_ref() {
                SetExpr::Select(select) => select
                    .projection
                    .iter()
                    .filter_map(|item| match item {
                        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_ascii_lowercase()),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let over_select = matches!(query.body.as_ref(), SetExpr::Select(_));
            if over_select {
                hooks.reenter_select();
            }
            let result = (|| {
                for item in items {
                    let names_output =
                        matches!(&item.expr, Expr::Identifier(i) if outputs.contains(&i.value.to_ascii_lowercase()));
                    if !names_output {
                        expr(hooks, &mut item.expr)?;
                    }
                    postgres_nulls(&mut item.options);
                }
                Ok(())
            })();
            if over_select {
                hooks.leave_select();
            }
            result?;
        }
    }
    limit_as_sqlite(query)?;
    if let Some(limit) = &mut query.limit_clause {
        match limit {
            LimitClause::LimitOffset { limit, offset, .. } => {
                if let Some(limit) = limit {
                    expr(hooks, limit)?;
                }
                if let Some(offset) = offset {
                    expr(hooks, &mut offset.value)?;
                }
            }
            LimitClause::OffsetCommaLimit { offset, limit } => {
                expr(hooks, offset)?;
                expr(hooks, limit)?;
            }
        }
    }
    Ok(())
}

fn set_expr<H: Hooks>(hooks: &mut H, body: &mut SetExpr) -> Result<(), PgError> {
    match body {
        SetExpr::Select(s) => select(hooks, s),
        SetExpr::Query(q) => query(hooks, q),
        SetExpr::SetOperation { left, right, .. } => {
            set_expr(hooks, left)?;
            set_expr(hooks, right)
        }
        SetExpr::Values(values) => {
            for row in &mut values.rows {
                for e in &mut row.content {
                    expr(hooks, e)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn select<H: Hooks>(hooks: &mut H, select: &mut Select) -> Result<(), PgError> {
    // Derived tables and join conditions are walked before the SELECT's own scope is entered for its
    // derived tables, inside it for its conditions. The arguments of functions in FROM may read the items
    // before them (laterally): they are typed in a scope of the FROM as written.
    hooks.enter_select(select);
    let from_done = (|| {
        for from in &mut select.from {
            derived(hooks, &mut from.relation)?;
            for join in &mut from.joins {
                derived(hooks, &mut join.relation)?;
            }
        }
        Ok(())
    })();
    hooks.leave_select();
    from_done?;
    hooks.enter_select(select);
    let result = select_inside(hooks, select).and_then(|()| hooks.finish_select(select));
    hooks.leave_select();
    result
}

fn select_inside<H: Hooks>(hooks: &mut H, select: &mut Select) -> Result<(), PgError> {
    hooks.projection(select)?;
    items(hooks, &mut select.projection)?;
    for from in &mut select.from {
        joins(hooks, from)?;
    }
    if let Some(selection) = &mut select.selection {
        expr(hooks, selection)?;
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for e in exprs {
            expr(hooks, e)?;
        }
    }
    if let Some(having) = &mut select.having {
        expr(hooks, having)?;
    }
    Ok(())
}

/// Walks select items (also RETURNING lists).
pub(crate) fn items<H: Hooks>(hooks: &mut H, items: &mut [SelectItem]) -> Result<(), PgError> {
    for item in items {
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => expr(hooks, e)?,
            _ => {}
        }
    }
    Ok(())
}

/// A FROM item outside a SELECT (an UPDATE's or DELETE's tables): its tables and derived tables, then its
/// join conditions.
pub(crate) fn from_item<H: Hooks>(hooks: &mut H, from: &mut TableWithJoins) -> Result<(), PgError> {
    derived(hooks, &mut from.relation)?;
    for join in &mut from.joins {
        derived(hooks, &mut join.relation)?;
    }
    joins(hooks, from)
}

fn derived<H: Hooks>(hooks: &mut H, factor: &mut TableFactor) -> Result<(), PgError> {
    match factor {
        TableFactor::Derived { subquery, .. } => query(hooks, subquery)?,
        TableFactor::NestedJoin { table_with_joins, .. } => {
            derived(hooks, &mut table_with_joins.relation)?;
            for join in &mut table_with_joins.joins {
                derived(hooks, &mut join.relation)?;
            }
        }
        TableFactor::Table { args: Some(args), .. } => {
            for arg in &mut args.args {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
                    expr(hooks, e)?;
                }
            }
        }
        TableFactor::UNNEST { array_exprs, .. } => {
            for e in array_exprs {
                expr(hooks, e)?;
            }
        }
        TableFactor::Function { args, .. } => {
            for arg in args {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
                    expr(hooks, e)?;
                }
            }
        }
        _ => {}
    }
    hooks.table_factor(factor)
}

/// Walks the join conditions of a FROM item.
pub(crate) fn joins<H: Hooks>(hooks: &mut H, from: &mut TableWithJoins) -> Result<(), PgError> {
    for join in &mut from.joins {
        join_condition(hooks, join)?;
    }
    Ok(())
}

fn join_condition<H: Hooks>(hooks: &mut H, join: &mut Join) -> Result<(), PgError> {
    let constraint = match &mut join.join_operator {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c) => c,
        _ => return Ok(()),
    };
    if let JoinConstraint::On(e) = constraint {
        expr(hooks, e)?;
    }
    Ok(())
}

fn args<H: Hooks>(hooks: &mut H, arguments: &mut FunctionArguments) -> Result<(), PgError> {
    match arguments {
        FunctionArguments::List(list) => {
            for arg in &mut list.args {
                let inner = match arg {
                    FunctionArg::Unnamed(a)
                    | FunctionArg::Named { arg: a, .. }
                    | FunctionArg::ExprNamed { arg: a, .. } => a,
                };
                if let FunctionArgExpr::Expr(e) = inner {
                    expr(hooks, e)?;
                }
            }
            for clause in &mut list.clauses {
                if let sqlparser::ast::FunctionArgumentClause::OrderBy(items) = clause {
                    for item in items {
                        expr(hooks, &mut item.expr)?;
                        postgres_nulls(&mut item.options);
                    }
                }
            }
            Ok(())
        }
        FunctionArguments::Subquery(q) => query(hooks, q),
        FunctionArguments::None => Ok(()),
    }
}

/// PostgreSQL sorts NULL after every value ascending and before them descending; SQLite the other way, so
/// an ORDER BY item without NULLS FIRST/LAST gets PostgreSQL's explicitly.
fn postgres_nulls(options: &mut sqlparser::ast::OrderByOptions) {
    if options.nulls_first.is_none() {
        let descending = matches!(options.sort, Some(sqlparser::ast::OrderBySort::Desc));
        options.nulls_first = Some(descending);
    }
}

/// Walks an expression: its children first, then the expression itself.
pub(crate) fn expr<H: Hooks>(hooks: &mut H, e: &mut Expr) -> Result<(), PgError> {
    fold_negative_literal(e);
    match e {
        Expr::IsFalse(a)
        | Expr::IsNotFalse(a)
        | Expr::IsTrue(a)
        | Expr::IsNotTrue(a)
        | Expr::IsNull(a)
        | Expr::IsNotNull(a)
        | Expr::IsUnknown(a)
        | Expr::IsNotUnknown(a)
        | Expr::Nested(a)
        | Expr::UnaryOp { expr: a, .. }
        | Expr::Cast { expr: a, .. }
        | Expr::Collate { expr: a, .. }
        | Expr::Extract { expr: a, .. }
        | Expr::Ceil { expr: a, .. }
        | Expr::Floor { expr: a, .. } => expr(hooks, a)?,
        Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
            expr(hooks, a)?;
            expr(hooks, b)?;
        }
        Expr::BinaryOp { left, right, .. } | Expr::AnyOp { left, right, .. } | Expr::AllOp { left, right, .. } => {
            expr(hooks, left)?;
            expr(hooks, right)?;
        }
        Expr::Like { expr: a, pattern, .. }
        | Expr::ILike { expr: a, pattern, .. }
        | Expr::SimilarTo { expr: a, pattern, .. }
        | Expr::RLike { expr: a, pattern, .. } => {
            expr(hooks, a)?;
            expr(hooks, pattern)?;
        }
        Expr::In { expr: a, target, .. } => {
            expr(hooks, a)?;
            match target {
                sqlparser::ast::InTarget::List(list) => {
                    for item in list {
                        expr(hooks, item)?;
                    }
                }
                sqlparser::ast::InTarget::Subquery(q) => query(hooks, q)?,
                sqlparser::ast::InTarget::Unnest(u) => expr(hooks, u)?,
                _ => {}
            }
        }
        Expr::Between { expr: a, low, high, .. } => {
            expr(hooks, a)?;
            expr(hooks, low)?;
            expr(hooks, high)?;
        }
        Expr::AtTimeZone { timestamp, time_zone } => {
            expr(hooks, timestamp)?;
            expr(hooks, time_zone)?;
        }
        Expr::Position { expr: a, r#in } => {
            expr(hooks, a)?;
            expr(hooks, r#in)?;
        }
        Expr::Substring {
            expr: a,
            substring_from,
            substring_for,
            ..
        } => {
            expr(hooks, a)?;
            if let Some(f) = substring_from {
                expr(hooks, f)?;
            }
            if let Some(f) = substring_for {
                expr(hooks, f)?;
            }
        }
        Expr::Trim { expr: a, trim_what, .. } => {
            expr(hooks, a)?;
            if let Some(w) = trim_what {
                expr(hooks, w)?;
            }
        }
        Expr::Function(f) => {
            args(hooks, &mut f.args)?;
            if let Some(filter) = &mut f.filter {
                expr(hooks, filter)?;
            }
            if let Some(WindowType::WindowSpec(spec)) = &mut f.over {
                for p in &mut spec.partition_by {
                    expr(hooks, p)?;
                }
                for o in &mut spec.order_by {
                    expr(hooks, &mut o.expr)?;
                    postgres_nulls(&mut o.options);
                }
            }
            for o in &mut f.within_group {
                expr(hooks, &mut o.expr)?;
            }
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(o) = operand {
                expr(hooks, o)?;
            }
            for c in conditions {
                expr(hooks, &mut c.condition)?;
                expr(hooks, &mut c.result)?;
            }
            if let Some(r) = else_result {
                expr(hooks, r)?;
            }
        }
        Expr::Exists { subquery, .. } | Expr::Subquery(subquery) => query(hooks, subquery)?,
        Expr::Tuple(items) => {
            for item in items {
                expr(hooks, item)?;
            }
        }
        Expr::Array(array) => {
            for item in &mut array.elem {
                expr(hooks, item)?;
            }
        }
        Expr::CompoundFieldAccess { root, access_chain } => {
            merge_dotted_root(root, access_chain);
            expr(hooks, root)?;
            for access in access_chain {
                match access {
                    // A field's name is not a column.
                    sqlparser::ast::AccessExpr::Dot(Expr::Identifier(_)) => {}
                    sqlparser::ast::AccessExpr::Dot(e) => expr(hooks, e)?,
                    sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Index { index }) => {
                        expr(hooks, index)?
                    }
                    sqlparser::ast::AccessExpr::Subscript(_) => {}
                }
            }
        }
        _ => {}
    }
    hooks.expr(e)
}

/// `c.conkey[1]` parses as `c` with `.conkey` and `[1]`: the column is `c.conkey`. Merged before the walk
/// enters the root, so `c` is not read as a column of its own (a column `c` of another FROM item would
/// replace it).
pub(crate) fn merge_dotted_root(root: &mut Expr, access_chain: &mut Vec<sqlparser::ast::AccessExpr>) {
    while let (Some(sqlparser::ast::AccessExpr::Dot(Expr::Identifier(field))), [_, _, ..]) =
        (access_chain.first(), access_chain.as_slice())
    {
        let field = field.clone();
        let parts = match &*root {
            Expr::Identifier(ident) => vec![ident.clone(), field],
            Expr::CompoundIdentifier(parts) => {
                let mut parts = parts.clone();
                parts.push(field);
                parts
            }
            _ => break,
        };
        *root = Expr::CompoundIdentifier(parts);
        access_chain.remove(0);
    }
}

/// `-<number>` is one literal, as PostgreSQL's grammar makes it (`-9223372036854775808` is the smallest
/// bigint, not the negation of a number too large for one).
fn fold_negative_literal(e: &mut Expr) {
    let Expr::UnaryOp {
        op: UnaryOperator::Minus,
        expr: inner,
    } = e
    else {
        return;
    };
    let Expr::Value(ValueWithSpan {
        value: Value::Number(text, long),
        ..
    }) = inner.as_ref()
    else {
        return;
    };
    if text.starts_with('-') {
        return;
    }
    *e = Expr::value(Value::Number(format!("-{text}"), *long));
}

/// `FETCH FIRST n ROWS ONLY` as `LIMIT n`, and `OFFSET n` alone as `LIMIT -1 OFFSET n` (SQLite has no
/// OFFSET without LIMIT); `WITH TIES` and `PERCENT` are refused.
fn limit_as_sqlite(query: &mut Query) -> Result<(), PgError> {
    if let Some(fetch) = query.fetch.take() {
        if fetch.with_ties || fetch.percent {
            return Err(PgError::unsupported("FETCH … WITH TIES or PERCENT"));
        }
        let quantity = fetch
            .quantity
            .unwrap_or_else(|| Expr::value(Value::Number("1".to_owned(), false)));
        match &mut query.limit_clause {
            Some(LimitClause::LimitOffset { limit, .. }) => *limit = Some(quantity),
            Some(LimitClause::OffsetCommaLimit { .. }) => {
                return Err(PgError::new(crate::error::SYNTAX_ERROR, "LIMIT and FETCH together"))
            }
            None => {
                query.limit_clause = Some(LimitClause::LimitOffset {
                    limit: Some(quantity),
                    offset: None,
                    limit_by: Vec::new(),
                })
            }
        }
    }
    if let Some(LimitClause::LimitOffset {
        limit: limit @ None,
        offset: Some(_),
        ..
    }) = &mut query.limit_clause
    {
        *limit = Some(Expr::value(Value::Number("-1".to_owned(), false)));
    }
    Ok(())
}
