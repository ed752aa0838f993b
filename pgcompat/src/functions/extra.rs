//! More of PostgreSQL's built-in functions (math, strings, JSON, dates, aggregates), registered beside the
//! core ones of `functions`.

use std::sync::Arc;

use rusqlite::Connection;

use super::SessionState;
use crate::types::PgType;

/// Registers the functions of this module.
pub(super) fn install(_conn: &Connection, _state: Arc<SessionState>) -> rusqlite::Result<()> {
    Ok(())
}

/// The result type of a function of this module.
pub(super) fn result_type(_name: &str, _args: &[Option<PgType>]) -> Option<PgType> {
    None
}
