//! What depends on a table through foreign keys, so `DROP TABLE` and `TRUNCATE` refuse, or cascade, as
//! PostgreSQL does instead of leaving other tables' keys pointing at nothing.
//!
//! Views that read a dropped table are found by parsing their definitions: `DROP TABLE` refuses (2BP01) or,
//! with CASCADE, drops them too; the foreign keys of other tables are dropped by rebuilding those tables.

use rusqlite::Connection;

use sqlparser::ast::{Statement, TableFactor};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use crate::error::{PgError, DEPENDENT_OBJECTS_STILL_EXIST, FEATURE_NOT_SUPPORTED, INTERNAL_ERROR};

/// Tables, other than `table` itself, whose foreign keys reference `table`.
fn referencing_tables(conn: &Connection, table: &str) -> Result<Vec<String>, PgError> {
    let failed = |e: rusqlite::Error| PgError::new(INTERNAL_ERROR, format!("reading foreign keys: {e}"));
    let mut stmt = conn
        .prepare_cached(
            "SELECT DISTINCT m.name FROM sqlite_schema m, pragma_foreign_key_list(m.name) f \
             WHERE m.type = 'table' AND f.\"table\" = ?1 COLLATE NOCASE AND m.name <> ?1 COLLATE NOCASE \
             ORDER BY m.name",
        )
        .map_err(failed)?;
    let names = stmt
        .query_map([table], |row| row.get::<_, String>(0))
        .map_err(failed)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed);
    names
}

fn listed(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// Most views `DROP TABLE` follows through (views over views over the table).
const DEPENDENT_VIEWS_MAX: usize = 10_000;

/// What `DROP TABLE … CASCADE` removes besides the tables: the views that read them (directly or through
/// other views) and the foreign keys of other tables that reference them, as `(table, referenced)`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct DropPlan {
    pub(crate) views: Vec<String>,
    pub(crate) references: Vec<(String, String)>,
}

/// `DROP TABLE names`: 2BP01 if a view reads one or a table not dropped with them references one; with
/// `cascade`, those views and foreign keys to drop too.
pub(crate) fn plan_drop(conn: &Connection, names: &[String], cascade: bool) -> Result<DropPlan, PgError> {
    let mut plan = DropPlan::default();
    for name in names {
        for other in referencing_tables(conn, name)? {
            if listed(names, &other) {
                continue;
            }
            if !cascade {
                return Err(PgError::new(
                    DEPENDENT_OBJECTS_STILL_EXIST,
                    format!(
                        "cannot drop table {name} because other objects depend on it (a foreign key of table {other})"
                    ),
                ));
            }
            plan.references.push((other, name.clone()));
        }
    }
    plan.views = dependent_views(conn, names)?;
    if let (Some(view), false) = (plan.views.first(), cascade) {
        return Err(PgError::new(
            DEPENDENT_OBJECTS_STILL_EXIST,
            format!(
                "cannot drop table {} because other objects depend on it (view {view})",
                names.join(", ")
            ),
        ));
    }
    Ok(plan)
}

/// The views that read any of `tables`, directly or through other views, in the order found.
fn dependent_views(conn: &Connection, tables: &[String]) -> Result<Vec<String>, PgError> {
    let failed = |e: rusqlite::Error| PgError::new(INTERNAL_ERROR, format!("reading views: {e}"));
    let mut stmt = conn
        .prepare_cached("SELECT name, sql FROM sqlite_schema WHERE type = 'view' AND sql IS NOT NULL")
        .map_err(failed)?;
    let views = stmt
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
        .map_err(failed)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    let reads: Vec<(String, Vec<String>)> = views
        .into_iter()
        .filter(|(name, _)| !crate::catalog::is_internal_table(name))
        .map(|(name, sql)| (name, relations_of_view(&sql)))
        .collect();
    let mut gone: Vec<String> = tables.to_vec();
    let mut found = Vec::new();
    loop {
        let before = found.len();
        for (view, read) in &reads {
            if !listed(&found, view) && read.iter().any(|r| listed(&gone, r)) {
                found.push(view.clone());
                gone.push(view.clone());
            }
        }
        if found.len() == before || found.len() >= DEPENDENT_VIEWS_MAX {
            return Ok(found);
        }
    }
}

/// The relations a view's definition names (empty if SQLite's text does not parse).
pub(crate) fn relations_of_view(sql: &str) -> Vec<String> {
    let Ok(mut parsed) = Parser::parse_sql(&SQLiteDialect {}, sql) else {
        return Vec::new();
    };
    let Some(Statement::CreateView(view)) = parsed.first_mut() else {
        return Vec::new();
    };
    let mut names = Names(Vec::new());
    if super::walk::query(&mut names, &mut view.query).is_err() {
        return Vec::new();
    }
    names.0
}

/// Collects the last part of every table name a query reads.
struct Names(Vec<String>);

impl super::walk::Hooks for Names {
    fn enter_select(&mut self, _: &sqlparser::ast::Select) {}

    fn leave_select(&mut self) {}

    fn expr(&mut self, _: &mut sqlparser::ast::Expr) -> Result<(), PgError> {
        Ok(())
    }

    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError> {
        if let TableFactor::Table { name, .. } = factor {
            if let Some(ident) = name.0.last().and_then(|part| part.as_ident()) {
                self.0.push(ident.value.clone());
            }
        }
        Ok(())
    }
}

/// The tables `TRUNCATE names` empties, children before parents: with `cascade`, every table that
/// references one of them (transitively); without, 0A000 if such a table is not in the list.
pub(crate) fn truncate_order(conn: &Connection, names: &[String], cascade: bool) -> Result<Vec<String>, PgError> {
    let mut all: Vec<String> = names.to_vec();
    let mut at = 0;
    while at < all.len() {
        let name = all[at].clone();
        for other in referencing_tables(conn, &name)? {
            if listed(&all, &other) {
                continue;
            }
            if !cascade {
                return Err(PgError::new(
                    FEATURE_NOT_SUPPORTED,
                    format!("cannot truncate a table referenced in a foreign key constraint: table {other} references {name} (truncate it too, or use TRUNCATE … CASCADE)"),
                ));
            }
            all.push(other);
        }
        at += 1;
    }
    // Referencing tables were found after what they reference: emptied first.
    all.reverse();
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let conn = Connection::open_in_memory().expect("opens");
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; CREATE TABLE a (id INTEGER PRIMARY KEY); \
             CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a(id)); \
             CREATE TABLE c (id INTEGER PRIMARY KEY, b_id INTEGER REFERENCES b(id), me INTEGER REFERENCES c(id));",
        )
        .expect("schema");
        conn
    }

    #[test]
    fn drops_and_truncates_see_foreign_keys() -> Result<(), PgError> {
        let conn = conn();
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            plan_drop(&conn, &names(&["a"]), false).map_err(|e| e.code),
            Err(DEPENDENT_OBJECTS_STILL_EXIST)
        );
        assert_eq!(
            plan_drop(&conn, &names(&["a"]), true)?.references,
            vec![("b".to_owned(), "a".to_owned())]
        );
        plan_drop(&conn, &names(&["A", "b", "c"]), false)?;
        plan_drop(&conn, &names(&["c"]), false)?;
        conn.execute_batch("CREATE VIEW vb AS SELECT id FROM b; CREATE VIEW vvb AS SELECT * FROM vb, c")
            .expect("views");
        assert_eq!(
            plan_drop(&conn, &names(&["b", "c"]), false).map_err(|e| e.code),
            Err(DEPENDENT_OBJECTS_STILL_EXIST)
        );
        assert_eq!(
            plan_drop(&conn, &names(&["b", "c"]), true)?.views,
            names(&["vb", "vvb"])
        );
        assert!(truncate_order(&conn, &names(&["a"]), false).is_err());
        assert_eq!(truncate_order(&conn, &names(&["a"]), true)?, names(&["c", "b", "a"]));
        assert_eq!(truncate_order(&conn, &names(&["c"]), false)?, names(&["c"]));
        Ok(())
    }
}
