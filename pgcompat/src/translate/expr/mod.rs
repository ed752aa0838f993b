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
mod typer;

use sqlparser::ast::{Expr, Query, Select, SelectItem, TableFactor, Value, ValueWithSpan};

use crate::catalog::Catalog;
use crate::error::PgError;
use crate::types::PgType;

pub(crate) use build::{call, cast_call, coerce_call, plain_args, string, strip_public, written_type};
use build::{coerce_literals, field_unit, is_string_literal, negate_if, number, take};
pub(crate) use typer::{arithmetic_type, datetime_result, last_part, number_type, Scope, Typer};

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
    /// Set-returning functions rewritten in a FROM whose SELECT has not been entered yet.
    pending_functions: Vec<crate::translate::srf::FunctionTable>,
    /// The scope of the SELECT last left (for its query's ORDER BY).
    left_scope: Option<Scope>,
}

impl<'a> Rewriter<'a> {
    pub(crate) fn new(catalog: &'a Catalog) -> Rewriter<'a> {
        Rewriter {
            typer: Typer {
                catalog,
                scopes: Vec::new(),
            },
            params: Vec::new(),
            uses_now: false,
            uses_catalog: false,
            pending_functions: Vec::new(),
            left_scope: None,
        }
    }

    /// Rewrites every expression of a query.
    pub(crate) fn rewrite_query(&mut self, query: &mut Query) -> Result<(), PgError> {
        super::walk::query(self, query)
    }

    /// Rewrites an expression.
    pub(crate) fn rewrite_expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        super::walk::expr(self, expr)
    }

    /// Rewrites select items (RETURNING).
    pub(crate) fn rewrite_items(&mut self, items: &mut [SelectItem]) -> Result<(), PgError> {
        super::walk::items(self, items)
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

impl super::walk::Hooks for Rewriter<'_> {
    fn enter_select(&mut self, select: &Select) {
        let mut scope = Scope::of_select(select);
        // The set-returning functions of this FROM, made when its items were rewritten.
        let aliases: Vec<String> = select
            .from
            .iter()
            .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)))
            .filter_map(|factor| match factor {
                TableFactor::Table { alias: Some(a), .. } if a.name.value.starts_with(super::srf::ALIAS_PREFIX) => {
                    Some(a.name.value.clone())
                }
                _ => None,
            })
            .collect();
        for alias in aliases {
            if let Some(at) = self.pending_functions.iter().position(|f| f.sqlite_alias == alias) {
                scope.functions.push(self.pending_functions.swap_remove(at));
            }
        }
        self.typer.scopes.push(scope);
    }

    fn leave_select(&mut self) {
        self.left_scope = self.typer.scopes.pop();
    }

    fn reenter_select(&mut self) {
        let scope = self.left_scope.take().unwrap_or_default();
        self.typer.scopes.push(scope);
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        self.rewrite_node(expr)
    }

    fn finish_select(&mut self, select: &mut Select) -> Result<(), PgError> {
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
        if let TableFactor::Table { name, args, .. } = factor {
            // `pg_catalog.generate_series(…)`: a built-in set-returning function, named by its schema.
            if args.is_some() && name.0.len() == 2 && name.0[0].to_string().eq_ignore_ascii_case("pg_catalog") {
                name.0.remove(0);
            }
            strip_public(name)?;
        }
        if let Some((replacement, function)) = super::srf::from_item(&self.typer, factor)? {
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
