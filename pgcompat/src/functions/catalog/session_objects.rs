//! The session's SQL-level prepared statements and open cursors, as `pg_prepared_statements` and
//! `pg_cursors` show them. The caller (the compute's session, which keeps both) publishes them with
//! [`SessionState::set_prepared_statements`] and [`SessionState::set_cursors`] before a statement runs;
//! `pg_prepared_statements_json()` and `pg_cursors_json()` give the views their rows.

use std::sync::Arc;
use std::time::SystemTime;

use rusqlite::Connection;

use super::helpers::type_shown;
use super::names::Namer;
use crate::functions::{flags_session, SessionState};
use crate::types::PgType;

/// One SQL-level prepared statement (`PREPARE name (types) AS …`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedStatementRow {
    /// Its name.
    pub name: String,
    /// The `PREPARE` statement that made it (as Cambium's parser prints it).
    pub statement: String,
    /// When it was prepared.
    pub prepared_at: SystemTime,
    /// The parameter types: declared, or inferred from the statement (`None`: `unknown`, inferred from
    /// nothing).
    pub parameter_types: Vec<Option<PgType>>,
}

/// One open cursor (`DECLARE name CURSOR …`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CursorRow {
    /// Its name.
    pub name: String,
    /// The `DECLARE` statement that opened it (as Cambium's parser prints it).
    pub statement: String,
    /// `WITH HOLD`.
    pub holdable: bool,
    /// Whether it moves backward (not `NO SCROLL`).
    pub scrollable: bool,
    /// When it was opened.
    pub created_at: SystemTime,
}

/// What the session last published of its prepared statements and cursors.
#[derive(Debug, Default)]
pub(crate) struct SessionObjects {
    prepared: Vec<PreparedStatementRow>,
    cursors: Vec<CursorRow>,
}

impl SessionState {
    /// Replaces the rows `pg_prepared_statements` shows (the session's SQL-level prepared statements).
    pub fn set_prepared_statements(&self, rows: Vec<PreparedStatementRow>) {
        self.objects.lock().prepared = rows;
    }

    /// Replaces the rows `pg_cursors` shows (the session's open cursors).
    pub fn set_cursors(&self, rows: Vec<CursorRow>) {
        self.objects.lock().cursors = rows;
    }
}

/// Registers `pg_prepared_statements_json()` and `pg_cursors_json()`: the published rows as JSON arrays of
/// objects (read with `json_each` by the views).
pub(super) fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_prepared_statements_json", 0, flags_session(), move |_| {
        let rows = s.objects.lock().prepared.clone();
        let namer = Namer::of(&s);
        let array: Vec<serde_json::Value> = rows
            .iter()
            .map(|row| {
                let types: Vec<Option<String>> = row
                    .parameter_types
                    .iter()
                    .map(|t| Some(t.map_or_else(|| "unknown".to_owned(), |t| type_shown(&s, &namer, t))))
                    .collect();
                serde_json::json!({
                    "name": row.name,
                    "statement": row.statement,
                    "prepare_time": stored_time(row.prepared_at),
                    "parameter_types": crate::value::array::format(&types),
                })
            })
            .collect();
        Ok(serde_json::Value::Array(array).to_string())
    })?;
    conn.create_scalar_function("pg_cursors_json", 0, flags_session(), move |_| {
        let rows = state.objects.lock().cursors.clone();
        let array: Vec<serde_json::Value> = rows
            .iter()
            .map(|row| {
                serde_json::json!({
                    "name": row.name,
                    "statement": row.statement,
                    "is_holdable": row.holdable,
                    "is_scrollable": row.scrollable,
                    "creation_time": stored_time(row.created_at),
                })
            })
            .collect();
        Ok(serde_json::Value::Array(array).to_string())
    })?;
    Ok(())
}

/// A time as a `timestamptz` is stored; `None` for one jiff cannot represent (not a real clock's).
fn stored_time(time: SystemTime) -> Option<String> {
    let timestamp = jiff::Timestamp::try_from(time).ok()?;
    Some(crate::value::datetime::format_timestamptz(
        timestamp,
        &jiff::tz::TimeZone::UTC,
    ))
}
