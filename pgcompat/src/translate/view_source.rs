//! The PostgreSQL query of a view as written, kept in the view's own SQLite text as a trailing comment, so
//! that `pg_get_viewdef` and `pg_views.definition` print it as PostgreSQL deparses it
//! (`functions::catalog::viewdef`) rather than as its SQLite translation. Relation names are kept resolved
//! to their SQLite names (so the text reads the same relations whatever the `search_path` later is); the
//! result columns carry their names. The comment carries a fingerprint of the SQLite query beside it: a
//! rename SQLite makes in the view's text (`ALTER TABLE … RENAME`) leaves the comment stale, and a stale one
//! is not used.

use sqlparser::ast::{Expr, Ident, ObjectName, Query, SelectItem, SetExpr, TableFactor};

use crate::catalog::Catalog;
use crate::error::PgError;

/// The comment to append to a view's SQLite text, or `None` when the query cannot be kept (a relation
/// name that does not resolve, a text holding the comment's end).
pub(crate) fn source_comment(
    catalog: &Catalog,
    query: &Query,
    view_columns: &[String],
    sqlite_body: &str,
) -> Option<String> {
    let mut query = query.clone();
    rename_outputs(&mut query, view_columns);
    let mut resolver = Resolver {
        catalog,
        ctes: Vec::new(),
    };
    super::walk::query(&mut resolver, &mut query).ok()?;
    crate::functions::view_source_comment(sqlite_body, &query.to_string())
}

/// The view's column list (`CREATE VIEW v (a, b)`) given to the first SELECT's items, as PostgreSQL names
/// a view's columns.
fn rename_outputs(query: &mut Query, names: &[String]) {
    let mut body = query.body.as_mut();
    let select = loop {
        match body {
            SetExpr::Select(select) => break select,
            SetExpr::SetOperation { left, .. } => body = left.as_mut(),
            SetExpr::Query(q) => body = q.body.as_mut(),
            _ => return,
        }
    };
    for (item, name) in select.projection.iter_mut().zip(names) {
        if let SelectItem::ExprWithAlias { alias, .. } = item {
            *alias = Ident::with_quote('"', name.as_str());
        }
    }
}

/// Points every relation a query reads at its SQLite name (a CTE's name and a catalog's stay as written).
struct Resolver<'a> {
    catalog: &'a Catalog,
    ctes: Vec<String>,
}

impl super::walk::Hooks for Resolver<'_> {
    fn enter_select(&mut self, _: &sqlparser::ast::Select) {}

    fn leave_select(&mut self) {}

    fn expr(&mut self, _: &mut Expr) -> Result<(), PgError> {
        Ok(())
    }

    fn cte(&mut self, cte: &sqlparser::ast::Cte) {
        let name = super::schema::fold_ident(&cte.alias.name);
        if !self.ctes.contains(&name) {
            self.ctes.push(name);
        }
    }

    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError> {
        let TableFactor::Table { name, args: None, .. } = factor else {
            return Ok(());
        };
        let parts = super::schema::folded_parts(name);
        if parts.len() == 1 && self.ctes.contains(&parts[0]) {
            return Ok(());
        }
        if crate::pg_catalog::view_for(&parts).is_some() {
            let relation = parts.last().cloned().unwrap_or_default();
            if !self.catalog.relation_exists(&relation) || parts.len() == 2 {
                let schema = if parts.len() == 2 {
                    parts[0].as_str()
                } else {
                    "pg_catalog"
                };
                *name = ObjectName::from(vec![Ident::new(schema), Ident::new(relation)]);
                return Ok(());
            }
        }
        let sqlite = super::schema::existing(self.catalog, name)?;
        *name = ObjectName::from(vec![Ident::with_quote('"', sqlite)]);
        Ok(())
    }
}
