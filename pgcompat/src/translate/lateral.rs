//! `LATERAL` subqueries that are scalar subqueries in disguise, rewritten as such (SQLite has correlated
//! subqueries but no `LATERAL`).
//!
//! A `LEFT JOIN LATERAL (q) AS a ON true` whose `q` returns at most one row per outer row (an aggregate
//! without `GROUP BY`, a `LIMIT 1`, or a SELECT over one such derived table) adds exactly one row to each
//! outer row, its columns NULL where `q` has none: the same as reading each column `a.c` as the scalar
//! subquery `(q with only c in its list)`. The same holds for an inner or cross join when `q` returns exactly
//! one row (an aggregate without `GROUP BY` or `HAVING`, and no `LIMIT`); when it returns at most one (a
//! `LIMIT 1`: the top row per outer row), the outer rows for which `q` has none go, so `EXISTS (q)` joins the
//! SELECT's `WHERE`, and so does an inner join's `ON` condition (an inner join's condition filters the rows
//! the joins before it made, whatever joins come after). This is the form drizzle's
//! relational queries take (`left join lateral (select coalesce(json_agg(…), '[]') as data from … where
//! … = outer.id) … on true`), nested for nested relations. So the join goes and every qualified reference
//! `a.c` in that SELECT (and its query's ORDER BY) becomes the subquery.
//!
//! A column list (`AS o(n)`) names the columns in order. A `LATERAL` this does not cover (more rows, `a.*`, an
//! unqualified `*`, a column list of another length) is left for the rewriter, which refuses it with 0A000.

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, Join, JoinConstraint,
    JoinOperator, LimitClause, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TableFactor, Value,
};

use super::walk;
use crate::error::PgError;

/// Aggregate functions: a SELECT list calling one, without `GROUP BY`, makes one row.
pub(super) const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "array_agg",
    "string_agg",
    "bool_and",
    "bool_or",
    "every",
    "bit_and",
    "bit_or",
];

/// Set-returning functions: one in a SELECT list may make more rows than its FROM has.
pub(super) const SET_RETURNING: &[&str] = &[
    "unnest",
    "generate_series",
    "generate_subscripts",
    "json_array_elements",
    "jsonb_array_elements",
    "json_array_elements_text",
    "jsonb_array_elements_text",
    "json_each",
    "jsonb_each",
    "json_each_text",
    "jsonb_each_text",
    "json_object_keys",
    "jsonb_object_keys",
    "regexp_matches",
    "regexp_split_to_table",
    "string_to_table",
];

/// Rewrites the scalar `LATERAL` joins of every SELECT of `query`, innermost first.
pub(crate) fn rewrite(query: &mut Query) -> Result<(), PgError> {
    walk::query(&mut Laterals::default(), query)
}

/// `(alias, column, subquery)` of the columns of the laterals rewritten in one SELECT.
type Columns = Vec<(String, String, Expr)>;

/// The walk's hooks: each SELECT's laterals rewritten when it is done; its query's ORDER BY (walked after,
/// with the SELECT's scope entered again) has its references replaced too.
#[derive(Default)]
struct Laterals {
    /// The columns of the SELECT finished last.
    finished: Option<Columns>,
    /// The columns whose references the walk replaces now (an ORDER BY).
    active: Option<Columns>,
}

impl walk::Hooks for Laterals {
    fn enter_select(&mut self, _select: &Select) {
        self.finished = None;
    }

    fn leave_select(&mut self) {
        self.active = None;
    }

    fn reenter_select(&mut self) {
        self.active = self.finished.take();
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        if let Some(columns) = &self.active {
            replace(columns, expr);
        }
        Ok(())
    }

    fn table_factor(&mut self, _factor: &mut TableFactor) -> Result<(), PgError> {
        Ok(())
    }

    fn finish_select(&mut self, select: &mut Select) -> Result<(), PgError> {
        let columns = rewrite_select(select)?;
        self.finished = (!columns.is_empty()).then_some(columns);
        Ok(())
    }
}

/// Replaces the references to `columns` inside an expression (after its children: the walk's order).
struct Replacer<'a> {
    columns: &'a Columns,
}

impl walk::Hooks for Replacer<'_> {
    fn enter_select(&mut self, _select: &Select) {}
    fn leave_select(&mut self) {}
    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        replace(self.columns, expr);
        Ok(())
    }
    fn table_factor(&mut self, _factor: &mut TableFactor) -> Result<(), PgError> {
        Ok(())
    }
}

fn replace(columns: &Columns, expr: &mut Expr) {
    let Expr::CompoundIdentifier(parts) = expr else {
        return;
    };
    let [qualifier, column] = parts.as_slice() else {
        return;
    };
    let (qualifier, column) = (fold(qualifier), fold(column));
    if let Some((_, _, subquery)) = columns.iter().find(|(a, c, _)| *a == qualifier && *c == column) {
        *expr = subquery.clone();
    }
}

/// `FROM a, LATERAL (q) l …` is `FROM a CROSS JOIN LATERAL (q) l …`: a lateral derived table after a comma
/// joins the items before it (a comma is a cross join, and what joins the lateral references only it and
/// what follows), so the rewrites of joined laterals cover it.
fn comma_laterals_as_joins(select: &mut Select) {
    let mut merged: Vec<sqlparser::ast::TableWithJoins> = Vec::with_capacity(select.from.len());
    for item in std::mem::take(&mut select.from) {
        let lateral = matches!(item.relation, TableFactor::Derived { lateral: true, .. });
        match merged.last_mut() {
            Some(previous) if lateral => {
                previous.joins.push(Join {
                    relation: item.relation,
                    global: false,
                    join_operator: JoinOperator::CrossJoin(JoinConstraint::None),
                });
                previous.joins.extend(item.joins);
            }
            _ => merged.push(item),
        }
    }
    select.from = merged;
}

/// The SELECT's scalar laterals removed from its joins, and the references to their columns replaced.
fn rewrite_select(select: &mut Select) -> Result<Columns, PgError> {
    let star = select.projection.iter().any(|i| matches!(i, SelectItem::Wildcard(_)));
    if star {
        return Ok(Vec::new());
    }
    comma_laterals_as_joins(select);
    let outer = super::lateral_join::from_aliases(select);
    let mut columns: Columns = Vec::new();
    let mut filters: Vec<Expr> = Vec::new();
    for from in &mut select.from {
        let mut kept = Vec::with_capacity(from.joins.len());
        for mut join in std::mem::take(&mut from.joins) {
            match scalar_lateral(&join) {
                Some(lateral) if !star_of(&select.projection, &lateral.alias) => {
                    let alias = lateral.alias;
                    columns.extend(lateral.columns.into_iter().map(|(c, e)| (alias.clone(), c, e)));
                    filters.extend(lateral.filter);
                }
                _ => {
                    let starred = match &join.relation {
                        TableFactor::Derived { alias: Some(alias), .. } => {
                            star_of(&select.projection, &fold(&alias.name))
                        }
                        _ => true,
                    };
                    if !starred {
                        super::lateral_join::decorrelate(&mut join, &outer);
                    }
                    kept.push(join);
                }
            }
        }
        from.joins = kept;
    }
    if columns.is_empty() {
        return Ok(columns);
    }
    for filter in filters {
        select.selection = Some(match select.selection.take() {
            None => filter,
            Some(selection) => Expr::BinaryOp {
                left: Box::new(Expr::Nested(Box::new(selection))),
                op: BinaryOperator::And,
                right: Box::new(Expr::Nested(Box::new(filter))),
            },
        });
    }
    let mut replacer = Replacer { columns: &columns };
    walk::items(&mut replacer, &mut select.projection)?;
    for from in &mut select.from {
        walk::joins(&mut replacer, from)?;
    }
    if let Some(selection) = &mut select.selection {
        walk::expr(&mut replacer, selection)?;
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for e in exprs {
            walk::expr(&mut replacer, e)?;
        }
    }
    if let Some(having) = &mut select.having {
        walk::expr(&mut replacer, having)?;
    }
    Ok(columns)
}

/// `alias.*` in the list.
fn star_of(items: &[SelectItem], alias: &str) -> bool {
    items.iter().any(|item| {
        matches!(item, SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _)
            if name.0.len() == 1 && name.0[0].as_ident().is_some_and(|i| fold(i) == alias))
    })
}

/// A lateral join read as scalar subqueries.
struct ScalarLateral {
    /// The join's alias (folded).
    alias: String,
    /// Per column, its name (folded) and its scalar subquery.
    columns: Vec<(String, Expr)>,
    /// What the SELECT's `WHERE` must add for the join's rows to be the same: `EXISTS (q)` for an inner join
    /// of a `q` that may have no row, and an inner join's `ON` condition.
    filter: Option<Expr>,
}

/// The join as scalar subqueries, if it is a lateral join whose subquery fits (see the module comment).
fn scalar_lateral(join: &Join) -> Option<ScalarLateral> {
    let TableFactor::Derived {
        lateral: true,
        subquery,
        alias: Some(alias),
        ..
    } = &join.relation
    else {
        return None;
    };
    let filter = match &join.join_operator {
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) if on_true(c) && at_most_one_row(subquery) => None,
        JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) if at_most_one_row(subquery) => {
            let condition = match c {
                JoinConstraint::None => None,
                JoinConstraint::On(_) if on_true(c) => None,
                JoinConstraint::On(condition) => Some(condition.clone()),
                _ => return None,
            };
            let exists = (!exactly_one_row(subquery)).then(|| Expr::Exists {
                subquery: subquery.clone(),
                negated: false,
            });
            match (exists, condition) {
                (Some(exists), Some(condition)) => Some(Expr::BinaryOp {
                    left: Box::new(exists),
                    op: BinaryOperator::And,
                    right: Box::new(Expr::Nested(Box::new(condition))),
                }),
                (exists, condition) => exists.or(condition),
            }
        }
        _ => return None,
    };
    let SetExpr::Select(inner) = subquery.body.as_ref() else {
        return None;
    };
    // A column list (`AS o(n)`) names the columns in order, and must name them all.
    let listed = &alias.columns;
    if !listed.is_empty() && listed.len() != inner.projection.len() {
        return None;
    }
    let mut columns = Vec::with_capacity(inner.projection.len());
    for (index, item) in inner.projection.iter().enumerate() {
        let (name, expr) = match (listed.get(index), item) {
            (Some(listed), SelectItem::ExprWithAlias { expr, .. } | SelectItem::UnnamedExpr(expr)) => {
                (fold(&listed.name), expr)
            }
            (None, SelectItem::ExprWithAlias { expr, alias }) => (fold(alias), expr),
            (None, SelectItem::UnnamedExpr(expr @ Expr::Identifier(ident))) => (fold(ident), expr),
            (None, SelectItem::UnnamedExpr(expr @ Expr::CompoundIdentifier(parts))) => (fold(parts.last()?), expr),
            _ => return None,
        };
        let mut single = (**subquery).clone();
        if let SetExpr::Select(select) = single.body.as_mut() {
            select.projection = vec![SelectItem::UnnamedExpr(expr.clone())];
        }
        columns.push((name, Expr::Subquery(Box::new(single))));
    }
    Some(ScalarLateral {
        alias: fold(&alias.name),
        columns,
        filter,
    })
}

fn on_true(constraint: &JoinConstraint) -> bool {
    matches!(constraint, JoinConstraint::On(Expr::Value(v)) if v.value == Value::Boolean(true))
}

/// Whether the query returns at most one row whatever its outer row.
fn at_most_one_row(query: &Query) -> bool {
    if limit_at_most_one(query) {
        return true;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    if !no_group_by(select) || select.projection.iter().any(|i| item_calls(i, SET_RETURNING)) {
        return false;
    }
    // An aggregate without GROUP BY, or a SELECT without FROM, makes one row (WHERE may take it away).
    if select.projection.iter().any(|i| item_calls(i, AGGREGATES)) || select.from.is_empty() {
        return true;
    }
    // A SELECT over one derived table of at most one row (WHERE only takes rows away).
    match select.from.as_slice() {
        [only] if only.joins.is_empty() => {
            matches!(&only.relation, TableFactor::Derived { subquery, .. } if at_most_one_row(subquery))
        }
        _ => false,
    }
}

/// Whether the query returns exactly one row: an aggregate without `GROUP BY`, `HAVING` or `LIMIT`, or a
/// SELECT of expressions without FROM or WHERE (pgbench's `(SELECT array_position(current_schemas(true),
/// n.nspname)) AS o(n)`).
fn exactly_one_row(query: &Query) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    let one_row_source = select.projection.iter().any(|i| item_calls(i, AGGREGATES))
        || (select.from.is_empty() && select.selection.is_none());
    query.limit_clause.is_none()
        && query.fetch.is_none()
        && no_group_by(select)
        && select.having.is_none()
        && one_row_source
        && !select.projection.iter().any(|i| item_calls(i, SET_RETURNING))
}

fn no_group_by(select: &Select) -> bool {
    matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if exprs.is_empty())
}

fn limit_at_most_one(query: &Query) -> bool {
    let one_or_less =
        |e: &Expr| matches!(e, Expr::Value(v) if matches!(&v.value, Value::Number(n, _) if n == "1" || n == "0"));
    match &query.limit_clause {
        Some(LimitClause::LimitOffset { limit: Some(limit), .. }) => one_or_less(limit),
        _ => query
            .fetch
            .as_ref()
            .is_some_and(|f| !f.percent && f.quantity.as_ref().is_none_or(one_or_less)),
    }
}

fn item_calls(item: &SelectItem, names: &[&str]) -> bool {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => calls(e, names),
        _ => false,
    }
}

/// Whether the expression calls one of `names` (not as a window function), outside any subquery.
fn calls(expr: &Expr, names: &[&str]) -> bool {
    match expr {
        Expr::Function(function) => {
            let name = super::expr::last_part(&function.name).to_ascii_lowercase();
            if function.over.is_none() && names.contains(&name.as_str()) {
                return true;
            }
            match &function.args {
                FunctionArguments::List(list) => list.args.iter().any(|arg| match arg {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
                    | FunctionArg::Named {
                        arg: FunctionArgExpr::Expr(e),
                        ..
                    } => calls(e, names),
                    _ => false,
                }),
                _ => false,
            }
        }
        Expr::Nested(e) | Expr::Cast { expr: e, .. } | Expr::UnaryOp { expr: e, .. } => calls(e, names),
        Expr::BinaryOp { left, right, .. } => calls(left, names) || calls(right, names),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(|e| calls(e, names))
                || conditions
                    .iter()
                    .any(|c| calls(&c.condition, names) || calls(&c.result, names))
                || else_result.as_deref().is_some_and(|e| calls(e, names))
        }
        _ => false,
    }
}

/// An identifier as PostgreSQL compares it: folded to lower case unless quoted.
pub(super) fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::Statement;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> Result<String, PgError> {
        let mut query = match Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses").remove(0) {
            Statement::Query(q) => q,
            other => panic!("not a query: {other}"),
        };
        rewrite(&mut query)?;
        Ok(query.to_string())
    }

    #[test]
    fn drizzles_json_agg_lateral_becomes_a_scalar_subquery() -> Result<(), PgError> {
        let sql = rewritten(
            "select u.id, p.data as posts from users u left join lateral (select coalesce(json_agg(json_build_array(p.title)), '[]'::json) as data from posts p where p.author_id = u.id) p on true order by p.data",
        )?;
        assert!(!sql.to_ascii_uppercase().contains("LATERAL"), "{sql}");
        assert!(
            sql.starts_with("SELECT u.id, (SELECT coalesce(json_agg(json_build_array(p.title)), "),
            "{sql}"
        );
        assert!(
            sql.contains("FROM posts p WHERE p.author_id = u.id) AS posts FROM users u ORDER BY (SELECT coalesce("),
            "{sql}"
        );
        Ok(())
    }

    #[test]
    fn a_nested_one_row_lateral_is_rewritten_inside_out() -> Result<(), PgError> {
        let sql = rewritten(
            "select u.id, r.data from users u left join lateral (select json_build_array(a.name, b.data) as data from (select * from authors a where a.id = u.author_id limit 1) a left join lateral (select count(*) as data from books b where b.author_id = a.id) b on true) r on true",
        )?;
        assert!(!sql.to_ascii_uppercase().contains("LATERAL"), "{sql}");
        assert!(
            sql.contains("(SELECT count(*) FROM books b WHERE b.author_id = a.id)"),
            "{sql}"
        );
        Ok(())
    }

    #[test]
    fn an_inner_lateral_of_at_most_one_row_filters_the_outer_rows_it_has_none_for() -> Result<(), PgError> {
        let sql = rewritten(
            "select d.name, top.name from dept d cross join lateral (select name from emp e where e.dept_id = d.id order by salary desc limit 1) as top where d.id > 0",
        )?;
        assert!(!sql.to_ascii_uppercase().contains("LATERAL"), "{sql}");
        assert_eq!(
            sql,
            "SELECT d.name, (SELECT name FROM emp e WHERE e.dept_id = d.id ORDER BY salary DESC NULLS FIRST LIMIT 1) \
             FROM dept d WHERE (d.id > 0) AND (EXISTS (SELECT name FROM emp e WHERE e.dept_id = d.id \
             ORDER BY salary DESC NULLS FIRST LIMIT 1))"
        );
        let sql = rewritten(
            "select u.id, c.n from users u join lateral (select count(*) as n from posts p where p.u = u.id having count(*) > 1) c on c.n < 5",
        )?;
        assert_eq!(
            sql,
            "SELECT u.id, (SELECT count(*) FROM posts p WHERE p.u = u.id HAVING count(*) > 1) FROM users u \
             WHERE EXISTS (SELECT count(*) AS n FROM posts p WHERE p.u = u.id HAVING count(*) > 1) \
             AND ((SELECT count(*) FROM posts p WHERE p.u = u.id HAVING count(*) > 1) < 5)"
        );
        Ok(())
    }

    #[test]
    fn a_lateral_select_without_from_is_one_row_named_by_its_column_list() -> Result<(), PgError> {
        let sql = rewritten(
            "select o.n from pg_class c join pg_namespace n on n.oid = c.relnamespace cross join lateral (select array_position(current_schemas(true), n.nspname)) as o(n) where o.n is not null",
        )?;
        assert_eq!(
            sql,
            "SELECT (SELECT array_position(current_schemas(true), n.nspname)) FROM pg_class c JOIN pg_namespace n \
             ON n.oid = c.relnamespace WHERE (SELECT array_position(current_schemas(true), n.nspname)) IS NOT NULL"
        );
        // A column list naming fewer columns than the query has is left (the rewriter refuses it).
        let sql = "select o.a from t cross join lateral (select 1, 2) as o(a)";
        assert!(rewritten(sql)?.to_ascii_uppercase().contains("LATERAL"), "{sql}");
        Ok(())
    }

    #[test]
    fn laterals_of_many_rows_or_read_by_star_stay() -> Result<(), PgError> {
        for sql in [
            "select * from users u left join lateral (select count(*) as n from posts p where p.u = u.id) c on true",
            "select c.* from users u left join lateral (select count(*) as n from posts p where p.u = u.id) c on true",
            "select c.n from users u left join lateral (select p.n from posts p where p.u = u.id) c on true",
            "select k.a from t cross join lateral (select unnest(t.arr)) as k(a)",
        ] {
            assert!(rewritten(sql)?.to_ascii_uppercase().contains("LATERAL"), "{sql}");
        }
        Ok(())
    }
}
