//! Relations moved from one schema to another: `ALTER TABLE … SET SCHEMA` and `ALTER SCHEMA … RENAME TO`.
//! A move is a rename of SQLite names (`a.t` → `b.t`, see `crate::schemas`): tables by SQLite's `RENAME`
//! (which rewrites the foreign keys, views and triggers that name them), their types and sequence owners in
//! the layer's catalog with them; views and indexes, which SQLite cannot rename, dropped and made again
//! under the new name (views first, so the table renames after them rewrite their text); sequences by the
//! sequence rename of `translate::sequence` (refused while a column default reads one).

use rusqlite::Connection;
use sqlparser::ast::{Ident, ObjectName, Statement};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use crate::catalog::{self, quote_ident, Catalog};
use crate::error::{PgError, DUPLICATE_TABLE, INTERNAL_ERROR};
use crate::schemas;

/// One relation of SQLite's schema as the move needs it.
struct Object {
    name: String,
    kind: String,
    sql: Option<String>,
}

/// The relations of SQLite's schema whose names pass `wanted` (names as SQLite keeps them).
fn objects(conn: &Connection, wanted: impl Fn(&str, &str) -> bool) -> Result<Vec<Object>, PgError> {
    let read = || -> rusqlite::Result<Vec<Object>> {
        let mut stmt = conn.prepare(
            "SELECT name, type, sql, tbl_name FROM main.sqlite_schema WHERE type IN ('table', 'view', 'index') \
             ORDER BY rowid",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((
                Object {
                    name: row.get(0)?,
                    kind: row.get(1)?,
                    sql: row.get(2)?,
                },
                row.get::<_, String>(3)?,
            ))
        })?;
        Ok(rows
            .filter_map(Result::ok)
            .filter(|(o, table)| wanted(&o.name, table))
            .map(|(o, _)| o)
            .collect())
    };
    read().map_err(|e| PgError::new(INTERNAL_ERROR, format!("reading the schema: {e}")))
}

/// The new SQLite name of a relation moved from schema `from` to `to` (`None`: not of `from`).
fn moved_name(catalog: &Catalog, name: &str, from: &str, to: &str) -> Option<String> {
    let (schema, bare) = schemas::split_sqlite_name(name, catalog.schemas());
    (schema == from).then(|| schemas::sqlite_name(to, bare))
}

/// `ALTER TABLE t SET SCHEMA s`: the table (or view) and its indexes to `s`.
pub(crate) fn set_schema(conn: &Connection, catalog: &Catalog, table: &str, to: &str) -> Result<Vec<String>, PgError> {
    if !catalog.schema_exists(to) {
        return Err(PgError::new(
            crate::error::INVALID_SCHEMA_NAME,
            format!("schema \"{to}\" does not exist"),
        ));
    }
    let (from, _) = schemas::split_sqlite_name(table, catalog.schemas());
    let from = from.to_owned();
    if catalog.owned_sequences(table, None).next().is_some() {
        return Err(PgError::unsupported(
            "ALTER TABLE … SET SCHEMA of a table with serial or identity columns",
        ));
    }
    let list = objects(conn, |name, tbl| {
        name.eq_ignore_ascii_case(table) || (tbl.eq_ignore_ascii_case(table) && !name.starts_with("sqlite_"))
    })?;
    move_objects(conn, catalog, &list, |name| moved_name(catalog, name, &from, to))
}

/// `ALTER SCHEMA from RENAME TO to`: every relation of `from` to `to`.
pub(crate) fn rename_schema(
    conn: &Connection,
    catalog: &Catalog,
    from: &str,
    to: &str,
) -> Result<Vec<String>, PgError> {
    let list = objects(conn, |name, _| {
        !name.starts_with("sqlite_") && moved_name(catalog, name, from, to).is_some()
    })?;
    let mut steps = move_objects(conn, catalog, &list, |name| moved_name(catalog, name, from, to))?;
    for ty in catalog.enums().all() {
        if let Some(new) = moved_name(catalog, &ty.name, from, to) {
            steps.push(format!(
                "UPDATE _cambium_enums SET name = {} WHERE name = {}",
                catalog::quote_literal(&new),
                catalog::quote_literal(&ty.name)
            ));
        }
    }
    Ok(steps)
}

/// The steps that give each object its new name (`renamed`); views first, then tables, then indexes.
fn move_objects(
    conn: &Connection,
    catalog: &Catalog,
    list: &[Object],
    renamed: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, PgError> {
    let mut steps = Vec::new();
    let mut tables = Vec::new();
    let mut later = Vec::new();
    for object in list {
        let Some(to) = renamed(&object.name) else {
            continue;
        };
        if catalog.relation_exists(&to) {
            return Err(PgError::new(
                DUPLICATE_TABLE,
                format!("relation \"{to}\" already exists"),
            ));
        }
        match (object.kind.as_str(), catalog.sequence(&object.name)) {
            ("view", Some(_)) => later.extend(super::sequence::rename_steps(conn, &object.name, &to)?),
            ("view", None) => {
                steps.push(format!("DROP VIEW {}", quote_ident(&object.name)));
                steps.push(recreated(object, &to, None)?);
                steps.extend(super::comment::rename_relation(catalog, &object.name, &to));
            }
            ("table", _) => {
                tables.push(format!(
                    "ALTER TABLE {} RENAME TO {}",
                    quote_ident(&object.name),
                    quote_ident(&to)
                ));
                tables.push(catalog::rename_table(&object.name, &to));
                tables.extend(super::comment::rename_relation(catalog, &object.name, &to));
                tables.extend(super::sequence::rename_owner(catalog, &object.name, None, &to));
            }
            _ => {
                // An index: made again after its table's rename, on the table's new name.
                let table = object_table(object)?;
                let new_table = renamed(&table).unwrap_or(table);
                later.push(format!("DROP INDEX {}", quote_ident(&object.name)));
                later.push(recreated(object, &to, Some(&new_table))?);
            }
        }
    }
    steps.extend(tables);
    steps.extend(later);
    Ok(steps)
}

fn internal(what: impl std::fmt::Display) -> PgError {
    PgError::new(INTERNAL_ERROR, format!("moving a relation: {what}"))
}

fn parsed(object: &Object) -> Result<Statement, PgError> {
    let sql = object.sql.as_deref().ok_or_else(|| internal("no definition"))?;
    Parser::parse_sql(&SQLiteDialect {}, sql)
        .map_err(internal)?
        .pop()
        .ok_or_else(|| internal("an empty definition"))
}

fn object_table(object: &Object) -> Result<String, PgError> {
    match parsed(object)? {
        Statement::CreateIndex(index) => Ok(super::expr::last_part(&index.table_name)),
        _ => Err(internal("an index without CREATE INDEX")),
    }
}

/// A view's or index's definition under a new name (an index on `table`).
fn recreated(object: &Object, to: &str, table: Option<&str>) -> Result<String, PgError> {
    let quoted = |n: &str| ObjectName::from(vec![Ident::with_quote('"', n)]);
    match parsed(object)? {
        Statement::CreateView(mut view) => {
            view.name = quoted(to);
            Ok(Statement::CreateView(view).to_string())
        }
        Statement::CreateIndex(mut index) => {
            index.name = Some(quoted(to));
            if let Some(table) = table {
                index.table_name = quoted(table);
            }
            Ok(Statement::CreateIndex(index).to_string())
        }
        _ => Err(internal("not a view or index")),
    }
}
