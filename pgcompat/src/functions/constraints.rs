//! The functions the triggers of deferrable UNIQUE constraints call (`crate::deferrable`): a row's key
//! counted, the violation raised at once or noted for the transaction's end.

use std::sync::Arc;

use rusqlite::Connection;

use super::{flags_session, raise, SessionState};
use crate::error::PgError;

/// 23505 in PostgreSQL's words (the constraint named without its schema).
fn violation(state: &SessionState, name: &str, key: Option<&str>) -> rusqlite::Error {
    let schemas = state.schemas();
    let name = crate::schemas::split_sqlite_name(name, &schemas).1;
    let mut message = format!("duplicate key value violates unique constraint \"{name}\"");
    if let Some(key) = key {
        message.push_str(&format!(" (Key {key} already exists.)"));
    }
    raise(PgError::new(crate::error::UNIQUE_VIOLATION, message))
}

/// Registers `pg_unique_row` and `pg_unique_violation` on a session's connection.
pub(super) fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    // pg_unique_row(constraint, initially deferred, rows holding the new row's key, the key's text).
    let s = state.clone();
    conn.create_scalar_function("pg_unique_row", 4, flags_session(), move |ctx| {
        let state = &s;
        let name: String = ctx.get(0)?;
        let initially_deferred = ctx.get::<Option<bool>>(1)?.unwrap_or(false);
        let count = ctx.get::<Option<i64>>(2)?.unwrap_or(0);
        if count <= 1 {
            return Ok(0_i64);
        }
        {
            let mut modes = state.constraint_modes();
            if modes.deferred(&name, initially_deferred) {
                modes.note(&name);
                return Ok(0);
            }
        }
        Err(violation(state, &name, ctx.get::<Option<String>>(3)?.as_deref()))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_unique_violation", 2, flags_session(), move |ctx| {
        let name: String = ctx.get(0)?;
        Err::<i64, _>(violation(&s, &name, ctx.get::<Option<String>>(1)?.as_deref()))
    })?;
    Ok(())
}
