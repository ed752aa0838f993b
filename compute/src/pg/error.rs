//! SQLite errors mapped to PostgreSQL SQLSTATEs, so clients can branch on the code.

use pgwire::error::{ErrorInfo, PgWireError, SEVERITY_ERROR};
use rusqlite::ffi;

/// syntax_error
pub(crate) const SYNTAX_ERROR: &str = "42601";
/// undefined_table
const UNDEFINED_TABLE: &str = "42P01";
/// undefined_function
const UNDEFINED_FUNCTION: &str = "42883";
/// duplicate_column
const DUPLICATE_COLUMN: &str = "42701";
/// ambiguous_column
const AMBIGUOUS_COLUMN: &str = "42702";
/// undefined_column
const UNDEFINED_COLUMN: &str = "42703";
/// duplicate_table
const DUPLICATE_TABLE: &str = "42P07";
/// unique_violation
const UNIQUE_VIOLATION: &str = "23505";
/// generated_always: a value given for a generated column.
const GENERATED_ALWAYS: &str = "428C9";
/// not_null_violation
const NOT_NULL_VIOLATION: &str = "23502";
/// foreign_key_violation
const FOREIGN_KEY_VIOLATION: &str = "23503";
/// check_violation
const CHECK_VIOLATION: &str = "23514";
/// integrity_constraint_violation
const INTEGRITY_CONSTRAINT_VIOLATION: &str = "23000";
/// invalid_text_representation
pub(crate) const INVALID_TEXT_REPRESENTATION: &str = "22P02";
/// in_failed_sql_transaction
pub(crate) const IN_FAILED_SQL_TRANSACTION: &str = "25P02";
/// protocol_violation
pub(crate) const PROTOCOL_VIOLATION: &str = "08P01";
/// active_sql_transaction
pub(crate) const ACTIVE_SQL_TRANSACTION: &str = "25001";
/// bad_copy_file_format
pub(crate) const BAD_COPY_FILE_FORMAT: &str = "22P04";
/// no_active_sql_transaction
pub(crate) const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
/// object_not_in_prerequisite_state
pub(crate) const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
/// duplicate_prepared_statement
pub(crate) const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
/// invalid_sql_statement_name (an unknown prepared statement)
pub(crate) const INVALID_SQL_STATEMENT_NAME: &str = "26000";
/// read_only_sql_transaction
pub(crate) const READ_ONLY_SQL_TRANSACTION: &str = "25006";
/// feature_not_supported
pub(crate) const FEATURE_NOT_SUPPORTED: &str = "0A000";
/// program_limit_exceeded
pub(crate) const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
/// invalid_catalog_name (unknown database)
pub(crate) const INVALID_CATALOG_NAME: &str = "3D000";
/// invalid_savepoint_specification
const INVALID_SAVEPOINT_SPECIFICATION: &str = "3B001";
/// invalid_column_reference (an ORDER BY position out of range)
const INVALID_COLUMN_REFERENCE: &str = "42P10";
/// internal_error
pub(crate) const INTERNAL_ERROR: &str = "XX000";
/// insufficient_privilege: a statement the defensive policy refuses (`defend`)
pub(crate) const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// query_canceled: a cancel request, the statement timeout, or the client gone
pub(crate) const QUERY_CANCELED: &str = "57014";
/// lock_not_available: another transaction holds the database's write lock
pub(crate) const LOCK_NOT_AVAILABLE: &str = "55P03";
/// serialization_failure: the transaction's snapshot was passed by another commit; retry it
pub(crate) const SERIALIZATION_FAILURE: &str = "40001";
/// too_many_connections: the listener's connection cap, or the process out of file descriptors
pub(crate) const TOO_MANY_CONNECTIONS: &str = "53300";
/// insufficient_resources: the server could not start what serves a connection (its thread or runtime).
pub(crate) const INSUFFICIENT_RESOURCES: &str = "53000";
/// idle_in_transaction_session_timeout
pub(crate) const IDLE_IN_TRANSACTION_SESSION_TIMEOUT: &str = "25P03";
/// io_error: SQLite reported an I/O error on the database file (a store error, see `session`)
pub(crate) const IO_ERROR: &str = "58030";
/// admin_shutdown: the database's store was closed on purpose (its branch moved, was deleted, suspended)
pub(crate) const ADMIN_SHUTDOWN: &str = "57P01";
/// connection_failure: the database's store failed for good; a new connection gets a restarted one
pub(crate) const CONNECTION_FAILURE: &str = "08006";

/// An error to send to the client: a SQLSTATE and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SqlError {
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl SqlError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> SqlError {
        SqlError {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn into_info(self) -> ErrorInfo {
        ErrorInfo::new(SEVERITY_ERROR.to_owned(), self.code.to_owned(), self.message)
    }

    pub(crate) fn into_pgwire(self) -> PgWireError {
        PgWireError::UserError(Box::new(self.into_info()))
    }
}

impl From<rusqlite::Error> for SqlError {
    fn from(error: rusqlite::Error) -> SqlError {
        let mut message = error.to_string();
        // An error a function of the dialect layer raised carries its own SQLSTATE.
        if let Some(pg) = pgcompat::error_of(&message) {
            return SqlError::new(pg.code, pg.message);
        }
        let code = match &error {
            rusqlite::Error::SqliteFailure(failure, text) => sqlstate_of(failure, text.as_deref().unwrap_or("")),
            rusqlite::Error::SqlInputError { error, msg, .. } => {
                message.clone_from(msg);
                sqlstate_of(error, msg)
            }
            rusqlite::Error::InvalidParameterCount(..) => PROTOCOL_VIOLATION,
            _ => INTERNAL_ERROR,
        };
        if code == GENERATED_ALWAYS {
            // PostgreSQL's words: `cannot INSERT into generated column "b"` names the column the same way.
            if let Some(column) = message.rsplit_once(" column ").map(|(_, c)| c.to_owned()) {
                message = if message.starts_with("cannot UPDATE") {
                    format!("column {column} can only be updated to DEFAULT")
                } else {
                    format!("cannot insert a non-DEFAULT value into column {column}")
                };
            }
        }
        SqlError { code, message }
    }
}

/// The SQLSTATE for a SQLite failure: the extended code where it says enough, else the message, since
/// SQLite reports most compile errors as plain `SQLITE_ERROR`.
fn sqlstate_of(failure: &ffi::Error, message: &str) -> &'static str {
    match failure.extended_code {
        ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
            return UNIQUE_VIOLATION;
        }
        ffi::SQLITE_CONSTRAINT_NOTNULL => return NOT_NULL_VIOLATION,
        ffi::SQLITE_CONSTRAINT_FOREIGNKEY => return FOREIGN_KEY_VIOLATION,
        ffi::SQLITE_CONSTRAINT_CHECK => return CHECK_VIOLATION,
        ffi::SQLITE_CONSTRAINT_DATATYPE => return INVALID_TEXT_REPRESENTATION,
        _ => {}
    }
    match failure.code {
        ffi::ErrorCode::SystemIoFailure => IO_ERROR,
        ffi::ErrorCode::ConstraintViolation => INTEGRITY_CONSTRAINT_VIOLATION,
        ffi::ErrorCode::TypeMismatch => INVALID_TEXT_REPRESENTATION,
        ffi::ErrorCode::TooBig => PROGRAM_LIMIT_EXCEEDED,
        ffi::ErrorCode::DatabaseBusy | ffi::ErrorCode::DatabaseLocked => LOCK_NOT_AVAILABLE,
        ffi::ErrorCode::OperationInterrupted => QUERY_CANCELED,
        ffi::ErrorCode::AuthorizationForStatementDenied => INSUFFICIENT_PRIVILEGE,
        ffi::ErrorCode::Unknown => {
            if message.starts_with("no such table") {
                UNDEFINED_TABLE
            } else if message.starts_with("no such function")
                || message.starts_with("wrong number of arguments to function")
            {
                UNDEFINED_FUNCTION
            } else if message.starts_with("no such column") || message.contains("has no column named") {
                UNDEFINED_COLUMN
            } else if message.starts_with("duplicate column name") {
                DUPLICATE_COLUMN
            } else if message.starts_with("cannot INSERT into generated column")
                || message.starts_with("cannot UPDATE generated column")
            {
                GENERATED_ALWAYS
            } else if message.starts_with("ambiguous column name") {
                AMBIGUOUS_COLUMN
            } else if message.contains("syntax error")
                || message.starts_with("incomplete input")
                || message.starts_with("unrecognized token")
            {
                SYNTAX_ERROR
            } else if message.contains("already exists") {
                DUPLICATE_TABLE
            } else if message.starts_with("no such savepoint") {
                INVALID_SAVEPOINT_SPECIFICATION
            } else if message.contains("ORDER BY term out of range") || message.contains("GROUP BY term out of range") {
                INVALID_COLUMN_REFERENCE
            } else if message.contains("may not be modified") || message.starts_with("not authorized") {
                // SQLITE_DBCONFIG_DEFENSIVE refusing a write to the schema table (`defend`).
                INSUFFICIENT_PRIVILEGE
            } else {
                INTERNAL_ERROR
            }
        }
        _ => INTERNAL_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(sql: &str) -> &'static str {
        let conn = rusqlite::Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
            .expect("create");
        conn.execute_batch("INSERT INTO t VALUES (1, 'a')").expect("insert");
        let error = conn.execute_batch(sql).expect_err("must fail");
        SqlError::from(error).code
    }

    #[test]
    fn sqlite_errors_map_to_sqlstates() {
        assert_eq!(code_of("SELEC 1"), SYNTAX_ERROR);
        assert_eq!(code_of("SELECT * FROM missing"), UNDEFINED_TABLE);
        assert_eq!(code_of("SELECT nope FROM t"), UNDEFINED_COLUMN);
        assert_eq!(code_of("INSERT INTO t VALUES (1, 'b')"), UNIQUE_VIOLATION);
        assert_eq!(code_of("INSERT INTO t VALUES (2, NULL)"), NOT_NULL_VIOLATION);
        assert_eq!(code_of("CREATE TABLE t (x)"), DUPLICATE_TABLE);
    }
}
