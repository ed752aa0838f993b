//! `INSERT … ON CONFLICT` made what SQLite runs the way PostgreSQL would: `ON CONFLICT ON CONSTRAINT name`
//! becomes the constraint's columns; a conflict target no unique key of the table matches is PostgreSQL's
//! 42P10 (SQLite's own error would carry no SQLSTATE); a `DO UPDATE` whose VALUES rows repeat a key as
//! literals is 21000, as PostgreSQL refuses to update one row twice (SQLite would update it twice); and an
//! `INSERT … SELECT` gets the `WHERE true` SQLite's grammar needs before `ON CONFLICT`.
//!
//! The unique keys of a table are its primary key and UNIQUE constraints with PostgreSQL's names (read
//! from its `CREATE TABLE` text by `_pgc_constraints`) and its unique indexes.

use rusqlite::Connection;
use sqlparser::ast::{ConflictTarget, Expr, Ident, Insert, OnConflictAction, OnInsert, SetExpr};

use crate::error::PgError;

/// A unique key of a table: its constraint's (or index's) name and columns.
#[derive(Debug, PartialEq)]
struct UniqueKey {
    name: String,
    columns: Vec<String>,
}

/// The unique keys of `table`.
fn unique_keys(conn: &Connection, table: &str) -> Vec<UniqueKey> {
    let mut keys = Vec::new();
    let declared: Option<String> = conn
        .prepare_cached("SELECT _pgc_constraints(name, sql) FROM sqlite_schema WHERE type = 'table' AND name = ?1")
        .and_then(|mut s| s.query_row([table], |r| r.get(0)))
        .ok();
    if let Some(serde_json::Value::Array(items)) = declared.and_then(|j| serde_json::from_str(&j).ok()) {
        for item in items {
            if !matches!(item["type"].as_str(), Some("p" | "u")) {
                continue;
            }
            let columns = item["cols"]
                .as_array()
                .map(|c| c.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            keys.push(UniqueKey {
                name: item["name"].as_str().unwrap_or_default().to_owned(),
                columns,
            });
        }
    }
    let indexes: Vec<String> = conn
        .prepare_cached(
            "SELECT name FROM pragma_index_list(?1) WHERE \"unique\" AND origin = 'c' AND NOT partial ORDER BY seq",
        )
        .and_then(|mut s| {
            s.query_map([table], |r| r.get::<_, String>(0))
                .map(|rows| rows.filter_map(Result::ok).collect())
        })
        .unwrap_or_default();
    for name in indexes {
        let columns: Vec<String> = conn
            .prepare_cached("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
            .and_then(|mut s| {
                s.query_map([name.as_str()], |r| r.get::<_, Option<String>>(0))
                    .map(|rows| rows.filter_map(Result::ok).flatten().collect())
            })
            .unwrap_or_default();
        keys.push(UniqueKey { name, columns });
    }
    keys
}

fn same_columns(key: &[String], target: &[String]) -> bool {
    key.len() == target.len() && key.iter().all(|k| target.iter().any(|t| t.eq_ignore_ascii_case(k)))
}

/// Makes an `INSERT … ON CONFLICT` into `table` (columns `columns`, in the order the VALUES give them)
/// what SQLite runs as PostgreSQL would; nothing for an INSERT without ON CONFLICT.
pub(crate) fn prepare(conn: &Connection, table: &str, columns: &[String], insert: &mut Insert) -> Result<(), PgError> {
    let Some(OnInsert::OnConflict(conflict)) = &mut insert.on else {
        return Ok(());
    };
    let keys = unique_keys(conn, table);
    let target: Option<Vec<String>> = match &mut conflict.conflict_target {
        None => None,
        Some(ConflictTarget::OnConstraint(name)) => {
            let name = super::expr::last_part(name);
            let Some(key) = keys.iter().find(|k| k.name == name) else {
                return Err(PgError::new(
                    crate::error::UNDEFINED_OBJECT,
                    format!("constraint \"{name}\" for table \"{table}\" does not exist"),
                ));
            };
            conflict.conflict_target = Some(ConflictTarget::Columns {
                columns: key.columns.iter().map(|c| Ident::with_quote('"', c.clone())).collect(),
                predicate: None,
            });
            Some(key.columns.clone())
        }
        Some(ConflictTarget::Columns { columns, predicate }) => {
            let target: Vec<String> = columns.iter().map(|c| c.value.clone()).collect();
            if predicate.is_none() && !keys.iter().any(|k| same_columns(&k.columns, &target)) {
                return Err(PgError::new(
                    crate::error::INVALID_COLUMN_REFERENCE,
                    "there is no unique or exclusion constraint matching the ON CONFLICT specification",
                ));
            }
            Some(target)
        }
    };
    let updates = matches!(conflict.action, OnConflictAction::DoUpdate(_));
    if let (true, Some(target), Some(source)) = (updates, &target, insert.source.as_deref()) {
        check_repeated_keys(source.body.as_ref(), columns, target)?;
    }
    // SQLite reads `SELECT … FROM t ON CONFLICT` as a join constraint unless the SELECT has a WHERE.
    if let Some(source) = insert.source.as_deref_mut() {
        if let SetExpr::Select(select) = source.body.as_mut() {
            if select.selection.is_none() {
                select.selection = Some(Expr::value(sqlparser::ast::Value::Boolean(true)));
            }
        }
    }
    Ok(())
}

/// 21000 when two VALUES rows give the same literals for the conflict target's columns.
fn check_repeated_keys(body: &SetExpr, columns: &[String], target: &[String]) -> Result<(), PgError> {
    let SetExpr::Values(values) = body else {
        return Ok(());
    };
    let positions: Option<Vec<usize>> = target
        .iter()
        .map(|t| columns.iter().position(|c| c.eq_ignore_ascii_case(t)))
        .collect();
    let Some(positions) = positions else {
        return Ok(());
    };
    let mut seen: Vec<Vec<String>> = Vec::with_capacity(values.rows.len());
    for row in &values.rows {
        let key: Option<Vec<String>> = positions
            .iter()
            .map(|&p| match row.content.get(p) {
                Some(Expr::Value(v))
                    if !matches!(
                        v.value,
                        sqlparser::ast::Value::Null | sqlparser::ast::Value::Placeholder(_)
                    ) =>
                {
                    Some(v.value.to_string())
                }
                _ => None,
            })
            .collect();
        let Some(key) = key else { continue };
        if seen.contains(&key) {
            return Err(PgError::new(
                crate::error::CARDINALITY_VIOLATION,
                "ON CONFLICT DO UPDATE command cannot affect row a second time",
            ));
        }
        seen.push(key);
    }
    Ok(())
}
