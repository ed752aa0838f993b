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
        self.typer.scopes.push(Scope::of_select(select));
    }

    fn leave_select(&mut self) {
        self.typer.scopes.pop();
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        self.rewrite_node(expr)
    }

    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError> {
        if let Some(replacement) = super::catalog_refs::rewrite_table(factor) {
            self.uses_catalog = true;
            *factor = replacement;
            return Ok(());
        }
        if let TableFactor::Table { name, args, .. } = factor {
            // `pg_catalog.generate_series(…)`: a built-in set-returning function, named by its schema.
            if args.is_some() && name.0.len() == 2 && name.0[0].to_string().eq_ignore_ascii_case("pg_catalog") {
                name.0.remove(0);
            }
            strip_public(name)?;
        }
        if let Some(replacement) = super::tables::rewrite_factor(self, factor)? {
            *factor = replacement;
        }
        Ok(())
    }
}
