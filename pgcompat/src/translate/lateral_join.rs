//! `LATERAL` subqueries of many rows per outer row, decorrelated into ordinary derived tables (SQLite has no
//! `LATERAL`, and a derived table may not read the FROM items before it).
//!
//! A lateral subquery whose only references to the outer query are equalities in its `WHERE`'s top-level
//! `AND`s, `inner_expression = outer_expression`, returns for each outer row the rows of the same subquery
//! *without* those equalities whose `inner_expression` equals that row's `outer_expression`. So
//!
//! ```sql
//! … JOIN LATERAL (SELECT title FROM posts WHERE author_id = u.id AND NOT draft ORDER BY at DESC LIMIT 3) p ON c
//! ```
//!
//! becomes
//!
//! ```sql
//! … JOIN (SELECT title, author_id AS __lateral_k1,
//!                row_number() OVER (PARTITION BY author_id ORDER BY at DESC) AS __lateral_rn
//!         FROM posts WHERE NOT draft) p
//!       ON p.__lateral_k1 = u.id AND p.__lateral_rn <= 3 AND (c)
//! ```
//!
//! for an inner, cross or left join alike (a left join keeps the outer rows that match nothing, as the lateral
//! did). `LIMIT n OFFSET m` becomes the row numbers `m+1 ..= m+n` of each partition, numbered in the
//! subquery's `ORDER BY`; without `LIMIT`, the `ORDER BY` goes (the outer query orders its rows), and so may a
//! `DISTINCT` stay (distinct over the columns plus the keys is distinct per outer row).
//!
//! Only what is sure to mean the same is rewritten: a plain SELECT (no aggregate, grouping, window, set-
//! returning function, `DISTINCT ON`, CTE, set operation, `FETCH`, positional `ORDER BY`, or `DISTINCT` with
//! `LIMIT`), literal `LIMIT`/`OFFSET`, outer references (qualified by an alias of the outer FROM that the
//! subquery does not itself define) nowhere but in those equalities, each equality's outer side free of the
//! subquery's names and of unqualified names, and no `*` of the outer SELECT or of the lateral (the added
//! columns would show). Anything else stays `LATERAL`, which the rewriter refuses with 0A000. The
//! one-row-per-outer-row forms (`lateral`) are rewritten before this and keep their rewrite.

use std::collections::HashSet;

use sqlparser::ast::{
    BinaryOperator, Distinct, Expr, Function, FunctionArgumentList, FunctionArguments, GroupByExpr, Ident, Join,
    JoinConstraint, JoinOperator, LimitClause, ObjectName, OrderByKind, Query, Select, SelectItem, SetExpr,
    TableFactor, TableWithJoins, Value, WindowSpec, WindowType,
};

use super::lateral::fold;
use super::walk;
use crate::error::PgError;

/// The prefix of the columns the rewrite adds (a key per equality, the row number).
const HIDDEN_PREFIX: &str = "__lateral_";

/// Rewrites `join` in place if it is a lateral join this module covers (see the module doc); `outer` are the
/// aliases (folded) of the FROM items of the SELECT the join belongs to.
pub(crate) fn decorrelate(join: &mut Join, outer: &HashSet<String>) {
    if let Some(rewritten) = decorrelated(join, outer) {
        *join = rewritten;
    }
}

fn decorrelated(join: &Join, outer: &HashSet<String>) -> Option<Join> {
    let TableFactor::Derived {
        lateral: true,
        subquery,
        alias: Some(alias),
        ..
    } = &join.relation
    else {
        return None;
    };
    let (left, condition) = match &join.join_operator {
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (true, on_condition(c)?),
        JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => (false, on_condition(c)?),
        _ => return None,
    };
    let mut query = (**subquery).clone();
    if query.with.is_some() || query.fetch.is_some() || !query.locks.is_empty() || query.for_clause.is_some() {
        return None;
    }
    let (limit, offset) = limits(&query)?;
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    if !plain(select) || (limit.is_some() && select.distinct.is_some()) {
        return None;
    }
    let inner = from_aliases(select);
    let outer: HashSet<String> = outer.difference(&inner).cloned().collect();

    // The WHERE's top-level ANDs: the equalities with the outer query become keys, the rest stay.
    let mut keys: Vec<(Expr, Expr)> = Vec::new();
    let mut kept: Vec<Expr> = Vec::new();
    for conjunct in select.selection.take().map(conjuncts).unwrap_or_default() {
        if names(&conjunct, &outer).outer == 0 {
            kept.push(conjunct);
            continue;
        }
        let Expr::BinaryOp {
            left: a,
            op: BinaryOperator::Eq,
            right: b,
        } = &conjunct
        else {
            return None;
        };
        let (na, nb) = (names(a, &outer), names(b, &outer));
        let is_outer_side = |n: &Names| n.outer > 0 && n.inner == 0 && n.unqualified == 0;
        if na.outer == 0 && is_outer_side(&nb) {
            keys.push(((**a).clone(), (**b).clone()));
        } else if nb.outer == 0 && is_outer_side(&na) {
            keys.push(((**b).clone(), (**a).clone()));
        } else {
            return None;
        }
    }
    select.selection = kept.into_iter().reduce(and);

    // Nothing else may read the outer query.
    let mut rest = Names::default();
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => rest.add(&names(e, &outer)),
            _ => return None,
        }
    }
    for from in &select.from {
        rest.add(&from_names(from, &outer));
    }
    if let Some(order_by) = &query.order_by {
        let OrderByKind::Expressions(exprs) = &order_by.kind else {
            return None;
        };
        for e in exprs {
            if matches!(&e.expr, Expr::Value(_)) {
                return None; // positional
            }
            rest.add(&names(&e.expr, &outer));
        }
    }
    if rest.outer > 0 {
        return None;
    }

    // The lateral's own column names (a column list names them in order; it goes, as columns are added).
    let listed = &alias.columns;
    if !listed.is_empty() && listed.len() != select.projection.len() {
        return None;
    }
    if !listed.is_empty() {
        for (item, name) in select.projection.iter_mut().zip(listed) {
            let expr = match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
                _ => return None,
            };
            *item = SelectItem::ExprWithAlias {
                expr,
                alias: name.name.clone(),
            };
        }
    }
    let name = alias.name.clone();
    let mut on: Vec<Expr> = Vec::new();
    for (index, (inner_side, outer_side)) in keys.iter().enumerate() {
        let column = Ident::new(format!("{HIDDEN_PREFIX}k{}", index + 1));
        select.projection.push(SelectItem::ExprWithAlias {
            expr: inner_side.clone(),
            alias: column.clone(),
        });
        on.push(Expr::BinaryOp {
            left: Box::new(Expr::CompoundIdentifier(vec![name.clone(), column])),
            op: BinaryOperator::Eq,
            right: Box::new(outer_side.clone()),
        });
    }
    if let Some(limit) = limit {
        let row_number = Ident::new(format!("{HIDDEN_PREFIX}rn"));
        let order_by = match query.order_by.take() {
            Some(order_by) => match order_by.kind {
                OrderByKind::Expressions(exprs) => exprs,
                OrderByKind::All(_) => return None,
            },
            None => Vec::new(),
        };
        select.projection.push(SelectItem::ExprWithAlias {
            expr: Expr::Function(Function {
                name: ObjectName::from(vec![Ident::new("row_number")]),
                uses_odbc_syntax: false,
                parameters: FunctionArguments::None,
                args: FunctionArguments::List(FunctionArgumentList {
                    duplicate_treatment: None,
                    args: Vec::new(),
                    clauses: Vec::new(),
                }),
                filter: None,
                null_treatment: None,
                over: Some(WindowType::WindowSpec(WindowSpec {
                    window_name: None,
                    partition_by: keys.iter().map(|(inner_side, _)| inner_side.clone()).collect(),
                    order_by,
                    window_frame: None,
                })),
                within_group: Vec::new(),
            }),
            alias: row_number.clone(),
        });
        let reference = Expr::CompoundIdentifier(vec![name.clone(), row_number]);
        let first = offset.unwrap_or(0);
        if first > 0 {
            on.push(Expr::BinaryOp {
                left: Box::new(reference.clone()),
                op: BinaryOperator::Gt,
                right: Box::new(number(first)),
            });
        }
        on.push(Expr::BinaryOp {
            left: Box::new(reference),
            op: BinaryOperator::LtEq,
            right: Box::new(number(first.saturating_add(limit))),
        });
    } else {
        if offset.is_some() {
            return None;
        }
        // Each outer row's rows, in whatever order: the outer query orders them.
        query.order_by = None;
    }
    query.limit_clause = None;
    if let Some(condition) = condition {
        on.push(Expr::Nested(Box::new(condition)));
    }
    let on = on
        .into_iter()
        .reduce(and)
        .unwrap_or(Expr::Value(Value::Boolean(true).into()));
    let constraint = JoinConstraint::On(on);
    let mut rewritten = join.clone();
    if let TableFactor::Derived {
        lateral,
        subquery,
        alias: Some(alias),
        ..
    } = &mut rewritten.relation
    {
        *lateral = false;
        **subquery = query;
        alias.columns.clear();
    }
    rewritten.join_operator = if left {
        JoinOperator::LeftOuter(constraint)
    } else {
        JoinOperator::Inner(constraint)
    };
    Some(rewritten)
}

/// The join's condition: `None` for `ON true`, a cross join or a comma; `Some(c)` for `ON c`; no answer for
/// `USING` or `NATURAL`.
fn on_condition(constraint: &JoinConstraint) -> Option<Option<Expr>> {
    match constraint {
        JoinConstraint::None => Some(None),
        JoinConstraint::On(Expr::Value(v)) if v.value == Value::Boolean(true) => Some(None),
        JoinConstraint::On(condition) => Some(Some(condition.clone())),
        _ => None,
    }
}

/// `(LIMIT, OFFSET)` as numbers; no answer if either is not a literal integer.
fn limits(query: &Query) -> Option<(Option<u64>, Option<u64>)> {
    let literal = |e: &Expr| match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<u64>().ok(),
            _ => None,
        },
        _ => None,
    };
    match &query.limit_clause {
        None => Some((None, None)),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return None;
            }
            let limit = match limit {
                Some(e) => Some(literal(e)?),
                None => None,
            };
            let offset = match offset {
                Some(o) => Some(literal(&o.value)?),
                None => None,
            };
            Some((limit, offset))
        }
        Some(_) => None,
    }
}

/// A SELECT without aggregates, grouping, windows, set-returning functions or `DISTINCT ON`.
fn plain(select: &Select) -> bool {
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if exprs.is_empty());
    let special = select.projection.iter().any(|item| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => calls_special(e),
        _ => true,
    });
    !grouped
        && select.having.is_none()
        && select.qualify.is_none()
        && select.named_window.is_empty()
        && !matches!(select.distinct, Some(Distinct::On(_)))
        && !select.from.is_empty()
        && !special
}

/// Whether the expression calls an aggregate, a set-returning function or a window function (outside any
/// subquery).
fn calls_special(expr: &Expr) -> bool {
    let mut finder = Specials::default();
    let mut copy = expr.clone();
    let _ = walk::expr(&mut finder, &mut copy);
    finder.found
}

#[derive(Default)]
struct Specials {
    /// Depth in nested SELECTs (their calls are their own).
    depth: usize,
    found: bool,
}

impl walk::Hooks for Specials {
    fn enter_select(&mut self, _select: &Select) {
        self.depth += 1;
    }
    fn leave_select(&mut self) {
        self.depth -= 1;
    }
    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        if self.depth == 0 {
            if let Expr::Function(function) = expr {
                let name = super::expr::last_part(&function.name).to_ascii_lowercase();
                if function.over.is_some()
                    || super::lateral::AGGREGATES.contains(&name.as_str())
                    || super::lateral::SET_RETURNING.contains(&name.as_str())
                {
                    self.found = true;
                }
            }
        }
        Ok(())
    }
    fn table_factor(&mut self, _factor: &mut TableFactor) -> Result<(), PgError> {
        Ok(())
    }
}

/// The names (folded) the SELECT's FROM items go by, joins included: their aliases, else their tables' last
/// name part.
pub(super) fn from_aliases(select: &Select) -> HashSet<String> {
    let mut names = HashSet::new();
    let mut add = |factor: &TableFactor| match factor {
        TableFactor::Table { name, alias, .. } => {
            if let Some(alias) = alias {
                names.insert(fold(&alias.name));
            } else if let Some(last) = name.0.last().and_then(|part| part.as_ident()) {
                names.insert(fold(last));
            }
        }
        TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::TableFunction { alias: Some(a), .. }
        | TableFactor::Function { alias: Some(a), .. }
        | TableFactor::UNNEST { alias: Some(a), .. }
        | TableFactor::NestedJoin { alias: Some(a), .. } => {
            names.insert(fold(&a.name));
        }
        _ => {}
    };
    for from in &select.from {
        add(&from.relation);
        for join in &from.joins {
            add(&join.relation);
        }
    }
    names
}

/// What names an expression reads.
#[derive(Debug, Default, Clone, Copy)]
struct Names {
    /// Qualified by an alias of the outer query.
    outer: usize,
    /// Qualified otherwise.
    inner: usize,
    /// Unqualified.
    unqualified: usize,
}

impl Names {
    fn add(&mut self, other: &Names) {
        self.outer += other.outer;
        self.inner += other.inner;
        self.unqualified += other.unqualified;
    }
}

struct NameCounter<'a> {
    outer: &'a HashSet<String>,
    names: Names,
}

impl walk::Hooks for NameCounter<'_> {
    fn enter_select(&mut self, _select: &Select) {}
    fn leave_select(&mut self) {}
    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        match expr {
            Expr::Identifier(_) => self.names.unqualified += 1,
            Expr::CompoundIdentifier(parts) => {
                // `q.c` or `s.q.c`: the qualifier is the part before the column.
                let qualifier = parts.len().checked_sub(2).and_then(|i| parts.get(i));
                if qualifier.is_some_and(|q| self.outer.contains(&fold(q))) {
                    self.names.outer += 1;
                } else {
                    self.names.inner += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }
    fn table_factor(&mut self, _factor: &mut TableFactor) -> Result<(), PgError> {
        Ok(())
    }
}

/// The names `expr` reads (subqueries in it included), told apart by `outer`.
fn names(expr: &Expr, outer: &HashSet<String>) -> Names {
    let mut counter = NameCounter {
        outer,
        names: Names::default(),
    };
    let mut copy = expr.clone();
    if walk::expr(&mut counter, &mut copy).is_err() {
        // Not walkable: count it as reading the outer query, so nothing is rewritten.
        counter.names.outer += 1;
    }
    counter.names
}

/// The names a FROM item (its join conditions, function arguments and derived tables) reads.
fn from_names(from: &TableWithJoins, outer: &HashSet<String>) -> Names {
    let mut counter = NameCounter {
        outer,
        names: Names::default(),
    };
    let mut copy = from.clone();
    if walk::from_item(&mut counter, &mut copy).is_err() {
        counter.names.outer += 1;
    }
    counter.names
}

/// The top-level `AND`s of a condition (parentheses around one opened).
fn conjuncts(expr: Expr) -> Vec<Expr> {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut all = conjuncts(*left);
            all.extend(conjuncts(*right));
            all
        }
        Expr::Nested(inner)
            if matches!(
                inner.as_ref(),
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) =>
        {
            conjuncts(*inner)
        }
        other => vec![other],
    }
}

fn and(left: Expr, right: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(left),
        op: BinaryOperator::And,
        right: Box::new(right),
    }
}

fn number(n: u64) -> Expr {
    Expr::Value(Value::Number(n.to_string(), false).into())
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::Statement;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    use crate::error::PgError;

    fn rewritten(sql: &str) -> Result<String, PgError> {
        let mut query = match Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses").remove(0) {
            Statement::Query(q) => q,
            other => panic!("not a query: {other}"),
        };
        super::super::lateral::rewrite(&mut query)?;
        Ok(query.to_string())
    }

    #[test]
    fn a_correlated_equality_becomes_a_key_of_a_plain_derived_table() -> Result<(), PgError> {
        let sql = rewritten(
            "SELECT u.id, p.title FROM lc_users u JOIN LATERAL (SELECT title FROM lc_posts WHERE author_id = u.id) p ON true ORDER BY 1, 2",
        )?;
        assert_eq!(
            sql,
            "SELECT u.id, p.title FROM lc_users u INNER JOIN (SELECT title, author_id AS __lateral_k1 FROM lc_posts) p \
             ON p.__lateral_k1 = u.id ORDER BY 1 NULLS LAST, 2 NULLS LAST"
        );
        Ok(())
    }

    #[test]
    fn top_n_per_outer_row_is_numbered_in_the_subquerys_order() -> Result<(), PgError> {
        let sql = rewritten(
            "SELECT u.name, p.title FROM users u LEFT JOIN LATERAL (SELECT p.title FROM posts p WHERE p.author_id = u.id AND NOT p.draft ORDER BY p.at DESC LIMIT 2 OFFSET 1) AS p ON p.title <> 'x'",
        )?;
        assert_eq!(
            sql,
            "SELECT u.name, p.title FROM users u LEFT OUTER JOIN (SELECT p.title, p.author_id AS __lateral_k1, \
             row_number() OVER (PARTITION BY p.author_id ORDER BY p.at DESC NULLS FIRST) AS __lateral_rn FROM posts p WHERE NOT \
             p.draft) AS p ON p.__lateral_k1 = u.id AND p.__lateral_rn > 1 AND p.__lateral_rn <= 3 AND (p.title <> 'x')"
        );
        Ok(())
    }

    #[test]
    fn a_column_list_names_the_columns_before_keys_are_added() -> Result<(), PgError> {
        let sql = rewritten("SELECT o.n FROM t CROSS JOIN LATERAL (SELECT v * 2 FROM s WHERE s.t_id = t.id) AS o(n)")?;
        assert_eq!(
            sql,
            "SELECT o.n FROM t INNER JOIN (SELECT v * 2 AS n, s.t_id AS __lateral_k1 FROM s) AS o ON o.__lateral_k1 = t.id"
        );
        Ok(())
    }

    #[test]
    fn what_cannot_be_proved_the_same_stays_lateral() -> Result<(), PgError> {
        for sql in [
            // An outer reference outside the WHERE's equalities.
            "SELECT p.x FROM u JOIN LATERAL (SELECT title || u.name AS x FROM posts WHERE author_id = u.id) p ON true",
            "SELECT p.x FROM u JOIN LATERAL (SELECT title AS x FROM posts WHERE author_id > u.id) p ON true",
            "SELECT p.x FROM u JOIN LATERAL (SELECT title AS x FROM posts WHERE author_id = u.id OR true) p ON true",
            // An unqualified name on the outer side could be either query's.
            "SELECT p.x FROM u JOIN LATERAL (SELECT title AS x FROM posts WHERE author_id = u.id + k) p ON true",
            // Grouping, windows, several rows of set-returning functions, DISTINCT ON.
            "SELECT p.c FROM u JOIN LATERAL (SELECT count(*) AS c FROM posts WHERE author_id = u.id GROUP BY kind) p ON true",
            "SELECT p.r FROM u JOIN LATERAL (SELECT rank() OVER (ORDER BY at) AS r FROM posts WHERE author_id = u.id) p ON true",
            "SELECT p.x FROM u JOIN LATERAL (SELECT DISTINCT ON (kind) title AS x FROM posts WHERE author_id = u.id) p ON true",
            // DISTINCT with LIMIT, a positional ORDER BY, a LIMIT that is not a literal.
            "SELECT p.x FROM u JOIN LATERAL (SELECT DISTINCT title AS x FROM posts WHERE author_id = u.id LIMIT 2) p ON true",
            "SELECT p.x FROM u JOIN LATERAL (SELECT title AS x FROM posts WHERE author_id = u.id ORDER BY 1 LIMIT 2) p ON true",
            "SELECT p.x FROM u JOIN LATERAL (SELECT title AS x FROM posts WHERE author_id = u.id LIMIT u.n) p ON true",
            // The added columns would show.
            "SELECT * FROM u JOIN LATERAL (SELECT title FROM posts WHERE author_id = u.id) p ON true",
            "SELECT p.* FROM u JOIN LATERAL (SELECT title FROM posts WHERE author_id = u.id) p ON true",
        ] {
            let out = rewritten(sql)?;
            assert!(out.contains("LATERAL"), "{sql} became {out}");
        }
        Ok(())
    }
}
