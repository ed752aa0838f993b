//! How PostgreSQL prints the name of a relation or a type in the texts it deparses (`pg_get_constraintdef`,
//! `pg_get_expr`, `pg_get_viewdef`, `format_type`, regclass output): bare when the session's `search_path`
//! reaches that very object by its bare name, else qualified by its schema (ruleutils'
//! `generate_relation_name`, `format_type`'s `TypeIsVisible`). So `pg_dump`, which reads these texts with an
//! empty `search_path`, writes names its restore resolves.

use crate::catalog::Catalog;
use crate::functions::SessionState;
use crate::schemas;

use super::deparse::quote_ident;

/// What a name is shown against: the session's effective `search_path` and its catalog snapshot.
pub(crate) struct Namer {
    path: Vec<String>,
    catalog: std::sync::Arc<Catalog>,
}

impl Namer {
    /// The session's path and catalog as they are now.
    pub(crate) fn of(state: &SessionState) -> Namer {
        Namer {
            path: state.effective_search_path(),
            catalog: state.catalog(),
        }
    }

    /// A relation (table, view, sequence, index) of this SQLite name as PostgreSQL prints it.
    pub(crate) fn relation(&self, sqlite_name: &str) -> String {
        let (schema, bare) = schemas::split_sqlite_name(sqlite_name, self.catalog.schemas());
        let shadowed = |earlier: &String| self.catalog.relation_exists(&schemas::sqlite_name(earlier, bare));
        let visible = !is_catalog_relation(bare) && self.reaches(schema, shadowed);
        shown(visible, schema, bare)
    }

    /// An enum type of this stored name (`mood`, `app.mood`) as PostgreSQL prints it.
    pub(crate) fn enum_type(&self, stored_name: &str) -> String {
        let (schema, bare) = schemas::split_sqlite_name(stored_name, self.catalog.schemas());
        let enums = self.catalog.enums();
        let shadowed = |earlier: &String| enums.by_name(&schemas::sqlite_name(earlier, bare)).is_some();
        let visible = crate::types::PgType::from_name(bare).is_none() && self.reaches(schema, shadowed);
        shown(visible, schema, bare)
    }

    /// The database's schemas other than `public`.
    pub(crate) fn schemas(&self) -> std::sync::Arc<Vec<schemas::SchemaEntry>> {
        self.catalog.schemas().clone()
    }

    /// Whether `schema` is on the path and no schema before it holds an object of the same name.
    fn reaches(&self, schema: &str, shadowed: impl Fn(&String) -> bool) -> bool {
        match self.path.iter().position(|p| p == schema) {
            Some(position) => !self.path[..position].iter().any(shadowed),
            None => false,
        }
    }
}

/// Whether `pg_catalog`, searched first, holds a relation of this name (which would hide the user's).
fn is_catalog_relation(name: &str) -> bool {
    crate::pg_catalog::view_for(&[name.to_owned()]).is_some()
}

fn shown(visible: bool, schema: &str, bare: &str) -> String {
    if visible {
        quote_ident(bare)
    } else {
        format!("{}.{}", quote_ident(schema), quote_ident(bare))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namer(path: &[&str], setup: &str) -> Namer {
        let conn = rusqlite::Connection::open_in_memory().expect("memory");
        conn.execute_batch(setup).expect("setup");
        let mut catalog = Catalog::default();
        catalog.refresh(&conn).expect("catalog");
        Namer {
            path: path.iter().map(|p| (*p).to_owned()).collect(),
            catalog: std::sync::Arc::new(catalog),
        }
    }

    const SETUP: &str = "CREATE TABLE _cambium_schemas (id INTEGER PRIMARY KEY, name TEXT, owner TEXT); \
         INSERT INTO _cambium_schemas VALUES (1, 'app', 'u'); \
         CREATE TABLE t (a); CREATE TABLE \"app.t\" (a); CREATE TABLE \"app.only\" (a); CREATE TABLE \"Odd\" (a)";

    #[test]
    fn a_relation_is_bare_only_where_the_path_reaches_it() {
        let on_path = namer(&["public"], SETUP);
        assert_eq!(on_path.relation("t"), "t");
        assert_eq!(on_path.relation("app.t"), "app.t");
        assert_eq!(on_path.relation("Odd"), "\"Odd\"");
        let empty = namer(&[], SETUP);
        assert_eq!(empty.relation("t"), "public.t");
        assert_eq!(empty.relation("app.only"), "app.only");
        // `app` first: its `t` hides public's, which must then be qualified.
        let app_first = namer(&["app", "public"], SETUP);
        assert_eq!(app_first.relation("t"), "public.t");
        assert_eq!(app_first.relation("app.t"), "t");
        assert_eq!(app_first.relation("app.only"), "only");
    }

    #[test]
    fn a_relation_named_as_a_catalog_is_qualified() {
        let namer = namer(&["public"], "CREATE TABLE pg_class (a)");
        assert_eq!(namer.relation("pg_class"), "public.pg_class");
    }
}
