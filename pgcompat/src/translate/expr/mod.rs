//! Expressions: PostgreSQL forms rewritten to SQLite ones (casts, typed literals, operators whose meaning
//! differs, functions by other names), and the PostgreSQL type of an expression inferred where the layer
//! can know it (for result columns, parameters and the operators that depend on types).
//!
//! The rewrite runs bottom-up (`walk`): each node is rewritten knowing its children
//! are already rewritten, and their types are inferred from the rewritten form, which [`Typer::infer`]
//! understands (a `pg_cast(x, 'int4')` is an `integer`).

mod binary;
mod build;
mod function;
mod node;
mod quantified;
mod typer;

use sqlparser::ast::{Expr, Query, Select, SelectItem, TableFactor, Value, ValueWithSpan};

use crate::catalog::Catalog;
use crate::error::PgError;
use crate::types::PgType;

pub(crate) use build::{call, cast_call, coerce_call, plain_args, string, strip_public, written_type};
use build::{coerce_literals, field_unit, is_string_literal, negate_if, number, take};
pub(crate) use typer::{arithmetic_type, datetime_result, last_part, number_type, CteTable, Scope, Typer};

/// Rewrites every expression of a statement (and the queries inside it), keeping the scopes of SELECTs for
/// typing; stops at the first error.
pub(crate) struct Rewriter<'a> {
    pub(crate) typer: Typer<'a>,
    /// Parameter types learned (index `n - 1` for `$n`).
    pub(crate) params: Vec<Option<PgType>>,
    /// Whether the statement reads the transaction timestamp (`now()`).
    pub(crate) uses_now: bool,
    /// Whether the statement reads the catalog views (`pg_class`, `information_schema.tables`, `::regclass`).
    pub(crate) uses_catalog: bool,
    /// Whether a FROM reads a view of the database (by its SQLite name after the schema's rewrite).
    pub(crate) reads_view: bool,
    /// Set-returning functions rewritten in a FROM whose SELECT has not been entered yet.
    pending_functions: Vec<crate::translate::srf::FunctionTable>,
    /// The scope of the SELECT last left (for its query's ORDER BY).
    left_scope: Option<Scope>,
    /// While a RETURNING list is rewritten: the alias or name of the table it reads.
    returning_target: Option<String>,
}

impl<'a> Rewriter<'a> {
    pub(crate) fn new(catalog: &'a Catalog) -> Rewriter<'a> {
        Rewriter {
            typer: Typer {
                catalog,
                scopes: Vec::new(),
                ctes: Vec::new(),
                rewritten: Vec::new(),
            },
            params: Vec::new(),
            uses_now: false,
            uses_catalog: false,
            reads_view: false,
            pending_functions: Vec::new(),
            left_scope: None,
            returning_target: None,
        }
    }

    /// Rewrites every expression of a query.
    pub(crate) fn rewrite_query(&mut self, query: &mut Query) -> Result<(), PgError> {
        super::routines::inline_query(self.typer.catalog, query)?;
        super::walk::query(self, query)
    }

    /// Rewrites an expression.
    pub(crate) fn rewrite_expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        super::routines::inline_expr(self.typer.catalog, expr)?;
        super::walk::expr(self, expr)
    }

    /// Rewrites select items (RETURNING).
    pub(crate) fn rewrite_items(&mut self, items: &mut [SelectItem]) -> Result<(), PgError> {
        super::routines::inline_items(self.typer.catalog, items)?;
        super::walk::items(self, items)
    }

    /// Rewrites a RETURNING list of a statement on the table SQLite knows as `target` (its alias or name):
    /// SQLite's RETURNING names the table's columns unqualified, so `t.col` becomes `col`.
    pub(crate) fn rewrite_returning(&mut self, items: &mut [SelectItem], target: &str) -> Result<(), PgError> {
        super::routines::inline_items(self.typer.catalog, items)?;
        self.returning_target = Some(target.to_owned());
        let result = super::walk::items(self, items);
        self.returning_target = None;
        result
    }

    /// Notes the type of a `$n` parameter compared with or assigned to a value of `ty`.
    pub(crate) fn learn_param(&mut self, expr: &Expr, ty: Option<PgType>) {
        let (
            Some(ty),
            Expr::Value(ValueWithSpan {
                value: Value::Placeholder(name),
                ..
            }),
        ) = (ty, expr)
        else {
            return;
        };
        let Some(n) = name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) else {
            return;
        };
        if n == 0 || n > crate::PARAMS_MAX {
            return;
        }
        if self.params.len() < n {
            self.params.resize(n, None);
        }
        if self.params[n - 1].is_none() {
            self.params[n - 1] = Some(ty);
        }
    }
}

impl Rewriter<'_> {
    /// A typer for the expressions of `select` (a derived table's or CTE's, already rewritten): the scopes around
    /// it and its own, with `ctes`.
    fn typer_inside(&self, select: &Select, ctes: Vec<typer::CteTable>) -> Typer<'_> {
        let mut scopes = self.typer.scopes.clone();
        scopes.push(Scope::of_select(select));
        Typer {
            rewritten: self.typer.rewritten.clone(),
            catalog: self.typer.catalog,
            scopes,
            ctes,
        }
    }

    /// The result columns of a (rewritten) derived table's or CTE's SELECT that pass a catalog's vector column
    /// through unchanged (see [`typer::CteTable::vectors`]).
    fn derived_vectors(&self, query: &Query) -> Vec<String> {
        let sqlparser::ast::SetExpr::Select(select) = query.body.as_ref() else {
            return Vec::new();
        };
        let typer = self.typer_inside(select, self.typer.ctes.clone());
        select
            .projection
            .iter()
            .filter_map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias } if super::vectors::is_vector(&typer, expr) => {
                    Some(alias.value.clone())
                }
                SelectItem::UnnamedExpr(expr) if super::vectors::is_vector(&typer, expr) => match expr {
                    Expr::Identifier(i) => Some(i.value.clone()),
                    Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// The columns of a (rewritten) derived table's query, by name and type: a SELECT's list, a VALUES's
    /// first row, or the CTE a `SELECT *` over one reads (how `tables` spells a derived table's aliases).
    fn derived_columns(&self, query: &Query) -> Option<Vec<(String, Option<PgType>)>> {
        let mut body = query.body.as_ref();
        loop {
            match body {
                sqlparser::ast::SetExpr::SetOperation { left, .. } => body = left.as_ref(),
                sqlparser::ast::SetExpr::Query(q) => body = q.body.as_ref(),
                _ => break,
            }
        }
        match body {
            sqlparser::ast::SetExpr::Values(values) => {
                let row = values.rows.first()?;
                Some(
                    row.content
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (format!("column{}", i + 1), self.typer.infer(e)))
                        .collect(),
                )
            }
            sqlparser::ast::SetExpr::Select(select) => {
                if let ([SelectItem::Wildcard(_)], [from]) = (select.projection.as_slice(), select.from.as_slice()) {
                    let TableFactor::Table { name, .. } = &from.relation else {
                        return None;
                    };
                    let cte_name = last_part(name);
                    let cte = query
                        .with
                        .as_ref()?
                        .cte_tables
                        .iter()
                        .find(|c| c.alias.name.value == cte_name)?;
                    let mut columns = self.derived_columns(&cte.query)?;
                    for (column, given) in columns.iter_mut().zip(&cte.alias.columns) {
                        column.0 = given.name.value.clone();
                    }
                    return Some(columns);
                }
                // The query's own CTEs, typed by their first SELECT (the recursive CTE `tables` makes of a
                // `generate_series`: its column is typed by its first row).
                let mut ctes = self.typer.ctes.clone();
                for cte in query.with.iter().flat_map(|with| &with.cte_tables) {
                    if let Some(mut columns) = self.derived_columns(&cte.query) {
                        for (column, given) in columns.iter_mut().zip(&cte.alias.columns) {
                            column.0 = given.name.value.clone();
                        }
                        let name = cte.alias.name.value.clone();
                        ctes.retain(|c| !c.name.eq_ignore_ascii_case(&name));
                        let vectors = self.derived_vectors(&cte.query);
                        ctes.push(typer::CteTable { name, columns, vectors });
                    }
                }
                let typer = self.typer_inside(select, ctes);
                select
                    .projection
                    .iter()
                    .map(|item| match item {
                        SelectItem::ExprWithAlias { expr, alias } => Some((alias.value.clone(), typer.infer(expr))),
                        SelectItem::UnnamedExpr(expr) => {
                            let name = match expr {
                                Expr::Identifier(i) => i.value.clone(),
                                Expr::CompoundIdentifier(parts) => {
                                    parts.last().map(|p| p.value.clone()).unwrap_or_default()
                                }
                                _ => String::new(),
                            };
                            Some((name, typer.infer(expr)))
                        }
                        _ => None,
                    })
                    .collect()
            }
            _ => None,
        }
    }
}

impl super::walk::Hooks for Rewriter<'_> {
    fn enter_query(&mut self, query: &mut sqlparser::ast::Query) {
        // Row locks, in a subquery or CTE too (a job queue's `… FOR UPDATE SKIP LOCKED`): SQLite transactions are
        // serializable and a writer excludes every other writer, so there is no row another writer holds to wait
        // for or skip (a conflicting writer gets 40001 at its commit).
        query.locks.clear();
    }

    fn enter_select(&mut self, select: &Select) {
        let mut scope = Scope::of_select(select);
        // The set-returning functions of this FROM, made when its items were rewritten.
        let aliases: Vec<String> = select
            .from
            .iter()
            .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)))
            .filter_map(|factor| match factor {
                TableFactor::Table { alias: Some(a), .. } if a.name.value.starts_with(super::srf::ALIAS_PREFIX) => {
                    Some(vec![a.name.value.clone()])
                }
                // A flattened lateral (`lateral_srf`): the items it holds.
                TableFactor::NestedJoin { .. } => Some(super::lateral_srf::aliases_inside(factor)),
                _ => None,
            })
            .flatten()
            .collect();
        for alias in aliases {
            if let Some(at) = self.pending_functions.iter().position(|f| f.sqlite_alias == alias) {
                scope.functions.push(self.pending_functions.swap_remove(at));
            }
        }
        // Derived tables' columns typed (their queries are rewritten already), as CTEs are.
        for factor in select
            .from
            .iter()
            .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)))
        {
            if let TableFactor::Derived {
                subquery,
                alias: Some(alias),
                ..
            } = factor
            {
                if let Some(mut columns) = self.derived_columns(subquery) {
                    for (column, given) in columns.iter_mut().zip(&alias.columns) {
                        column.0 = given.name.value.clone();
                    }
                    let name = alias.name.value.clone();
                    let vectors = self.derived_vectors(subquery);
                    self.typer.ctes.retain(|c| !c.name.eq_ignore_ascii_case(&name));
                    self.typer.ctes.push(typer::CteTable { name, columns, vectors });
                }
            }
        }
        self.typer.scopes.push(scope);
    }

    fn leave_select(&mut self) {
        self.left_scope = self.typer.scopes.pop();
        if let Some(scope) = &self.left_scope {
            let columns = scope.functions.iter().flat_map(|f| f.columns.iter().cloned());
            self.typer.rewritten.extend(columns);
        }
    }

    fn reenter_select(&mut self) {
        let scope = self.left_scope.take().unwrap_or_default();
        self.typer.scopes.push(scope);
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        // `EXISTS (SELECT FROM t …)`: PostgreSQL allows an empty SELECT list, SQLite does not; EXISTS
        // reads no column, so one NULL stands in.
        if let Expr::Exists { subquery, .. } = expr {
            if let sqlparser::ast::SetExpr::Select(select) = subquery.body.as_mut() {
                if select.projection.is_empty() {
                    select
                        .projection
                        .push(SelectItem::UnnamedExpr(Expr::value(sqlparser::ast::Value::Null)));
                }
            }
        }
        self.rewrite_node(expr)
    }

    fn cte(&mut self, cte: &sqlparser::ast::Cte) {
        // The CTE's columns typed from its first SELECT (a recursive CTE's anchor): before its own
        // rewrite (so its recursive part types), and again after it.
        let mut body = cte.query.body.as_ref();
        let select = loop {
            match body {
                sqlparser::ast::SetExpr::Select(select) => break Some(select),
                sqlparser::ast::SetExpr::SetOperation { left, .. } => body = left.as_ref(),
                sqlparser::ast::SetExpr::Query(q) => body = q.body.as_ref(),
                _ => break None,
            }
        };
        let Some(select) = select else {
            return;
        };
        let typer = self.typer_inside(select, self.typer.ctes.clone());
        let mut columns = Vec::with_capacity(select.projection.len());
        for (i, item) in select.projection.iter().enumerate() {
            let (name, ty) = match item {
                SelectItem::ExprWithAlias { expr, alias } => (alias.value.clone(), typer.infer(expr)),
                SelectItem::UnnamedExpr(expr @ Expr::Identifier(ident)) => (ident.value.clone(), typer.infer(expr)),
                SelectItem::UnnamedExpr(expr @ Expr::CompoundIdentifier(parts)) => (
                    parts.last().map(|p| p.value.clone()).unwrap_or_default(),
                    typer.infer(expr),
                ),
                SelectItem::UnnamedExpr(expr) => (String::new(), typer.infer(expr)),
                _ => return,
            };
            let name = cte.alias.columns.get(i).map_or(name, |c| c.name.value.clone());
            columns.push((name, ty));
        }
        let name = cte.alias.name.value.clone();
        let vectors = self.derived_vectors(&cte.query);
        self.typer.ctes.retain(|c| !c.name.eq_ignore_ascii_case(&name));
        self.typer
            .ctes
            .push(super::expr::typer::CteTable { name, columns, vectors });
    }

    fn finish_select(&mut self, select: &mut Select) -> Result<(), PgError> {
        super::lateral_srf::splice(&mut select.from);
        // A numeric computed in a SELECT list is text to SQLite: it carries the `pg_numeric` collation, so
        // a query reading it through a CTE or derived table sorts and compares it by value (a column keeps
        // its own collation).
        for item in &mut select.projection {
            let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
                continue;
            };
            let numeric = self
                .typer
                .infer(e)
                .is_some_and(|t| t.base() == crate::types::Base::Numeric && !t.is_array());
            let plain = matches!(
                e,
                Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Collate { .. } | Expr::Value(_)
            );
            if numeric && !plain {
                let inner = std::mem::replace(e, Expr::value(Value::Null));
                *e = Expr::Collate {
                    expr: Box::new(inner),
                    collation: sqlparser::ast::ObjectName::from(vec![sqlparser::ast::Ident::new("pg_numeric")]),
                };
            }
        }
        Ok(())
    }

    fn projection(&mut self, select: &mut Select) -> Result<(), PgError> {
        super::srf::projection(self, select)
    }

    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError> {
        if let Some(replacement) = super::catalog_refs::rewrite_table(factor) {
            self.uses_catalog = true;
            *factor = replacement;
            return Ok(());
        }
        if let TableFactor::Table { sample: Some(_), .. } = factor {
            return Err(PgError::unsupported("TABLESAMPLE"));
        }
        if let TableFactor::Table {
            name,
            args,
            inheritance,
            alias,
            ..
        } = factor
        {
            // `ONLY t` (pg_dump's form) and `t *`: no table inherits from another, so both are `t`.
            *inheritance = None;
            // `pg_catalog.generate_series(…)`: a built-in set-returning function, named by its schema.
            if args.is_some() && name.0.len() == 2 && name.0[0].to_string().eq_ignore_ascii_case("pg_catalog") {
                name.0.remove(0);
            }
            if args.is_none() {
                let ctes: Vec<String> = self.typer.ctes.iter().map(|c| c.name.clone()).collect();
                super::schema::rewrite_relation(self.typer.catalog, name, alias, &ctes)?;
                if self.typer.catalog.relation_kind(&last_part(name)) == Some("view") {
                    self.reads_view = true;
                }
            } else {
                strip_public(name)?;
            }
        }
        if let Some((replacement, function)) = super::srf::from_item(&self.typer, factor)? {
            *factor = replacement;
            self.pending_functions.push(function);
            return Ok(());
        }
        // Its subquery was rewritten just before: `left_scope` is its SELECT's.
        if let Some((replacement, function)) =
            super::lateral_srf::flatten(&self.typer, self.left_scope.as_ref(), factor)
        {
            *factor = replacement;
            self.pending_functions.push(function);
            return Ok(());
        }
        if let TableFactor::Derived { lateral: true, .. } = factor {
            return Err(PgError::unsupported("LATERAL subqueries"));
        }
        if let Some(replacement) = super::tables::rewrite_factor(self, factor)? {
            *factor = replacement;
        }
        Ok(())
    }
}
