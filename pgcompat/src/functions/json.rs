//! (in progress)

use std::sync::Arc;

use rusqlite::Connection;

use crate::functions::SessionState;
use crate::types::PgType;

/// Registers the functions of this file.
pub(super) fn install(_conn: &Connection, _state: &Arc<SessionState>) -> rusqlite::Result<()> {
    Ok(())
}

/// The result type of a function of this file.
pub(super) fn result_type(_name: &str, _args: &[Option<PgType>]) -> Option<PgType> {
    None
}
