//! The SQL functions the rewritten statements call, registered on a SQLite connection: casts and
//! assignments with PostgreSQL's checks, checked integer arithmetic and division, the session's functions
//! (`now()`, `version()`, …), date/time functions, case-sensitive `LIKE`, `ILIKE`, regular expressions,
//! arrays and jsonb operators, and the `pg_numeric` collation.
//!
//! A function raises a PostgreSQL error by returning a SQLite error whose message carries the SQLSTATE
//! ([`raise`]); [`error_of`] reads it back on the other side.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use parking_lot::RwLock;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

mod arithmetic;
mod cast;
mod catalog;
mod constraints;
pub(crate) mod enums;
mod extra;
mod operators;
mod ordered_set;
mod schemas;
pub(crate) mod sequence;
mod series;
mod session;
mod strings;
mod temporal;

pub use cast::cast;
pub(crate) use catalog::pg_quote_ident as quote_ident_pg;
pub use catalog::session_objects::{CursorRow, PreparedStatementRow};
#[cfg(test)]
pub(crate) use extra::testing;
pub(crate) use extra::{takes_types, typed_call, typed_expr};
pub use strings::like;

use arithmetic::install_arithmetic;
use cast::install_casts;
pub(crate) use catalog::viewdef::source_comment as view_source_comment;
use operators::install_arrays;
use ordered_set::install_ordered_set;
use series::install_series;
use session::install_session;
use strings::install_strings;
use temporal::install_datetime;

use crate::error::PgError;
use crate::types::PgType;
use crate::value::{self};

/// The prefix of a SQLite error message that carries a PostgreSQL error: `pgcompat:22012:division by zero`.
const ERROR_PREFIX: &str = "pgcompat:";

/// The version string `version()` reports: PostgreSQL 15 (so pg_dump 15 and drivers accept the server) and
/// what runs underneath.
pub const VERSION: &str = "PostgreSQL 15.0 (Cambium; SQLite engine) on x86_64-pc-linux-gnu, 64-bit";

/// A PostgreSQL error raised inside a SQL function.
pub fn raise(error: PgError) -> rusqlite::Error {
    rusqlite::Error::UserFunctionError(format!("{ERROR_PREFIX}{}:{}", error.code, error.message).into())
}

/// The PostgreSQL error a SQLite error message carries, if a function of this layer raised it.
pub fn error_of(message: &str) -> Option<PgError> {
    let at = message.find(ERROR_PREFIX)?;
    let rest = &message[at + ERROR_PREFIX.len()..];
    let (code, text) = rest.split_once(':')?;
    let code = crate::error::intern_code(code)?;
    Some(PgError::new(code, text))
}

/// The caller's "was the statement stopped" check.
struct InterruptCheck(Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for InterruptCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InterruptCheck")
    }
}

/// What the session's functions read: the zone, the transaction's timestamp, who and where, the
/// run-time parameters and the advisory locks.
#[derive(Debug)]
pub struct SessionState {
    time_zone: RwLock<TimeZone>,
    /// The `TimeZone` text `time_zone` was made from (a zone is looked up again only when it changes).
    time_zone_text: parking_lot::Mutex<String>,
    /// The session's run-time parameters; `time_zone` follows their `TimeZone`.
    settings: parking_lot::Mutex<crate::settings::Settings>,
    /// The session's advisory locks (released when the session's connection goes).
    advisory_locks: crate::advisory::SessionLocks,
    /// The session's `LISTEN`/`NOTIFY` side.
    notifier: crate::notify::Notifier,
    /// Whether the running statement was stopped (the caller's cancel, timeout and client-gone checks), for
    /// the waits functions do themselves.
    interrupt_check: RwLock<Option<InterruptCheck>>,
    /// The transaction timestamp (`now()`), microseconds since the Unix epoch.
    now_micros: AtomicI64,
    database: String,
    user: String,
    backend_pid: i32,
    /// What the session's sequences gave it (`currval`, `lastval`).
    pub(crate) sequences: parking_lot::Mutex<sequence::SequenceSession>,
    /// The database's enum types as of the session's last catalog read.
    pub(crate) enums: RwLock<Arc<crate::enums::EnumCatalog>>,
    /// The database's schemas other than `public` as of the session's last catalog read.
    schemas: RwLock<Arc<Vec<crate::schemas::SchemaEntry>>>,
    /// The session's last catalog snapshot (what deparsed texts name and type columns with).
    catalog: RwLock<Arc<crate::catalog::Catalog>>,
    /// The open transaction's constraint modes and deferred violations.
    constraints: parking_lot::Mutex<crate::deferrable::Modes>,
    /// The prepared statements and cursors the session last published (`pg_prepared_statements`,
    /// `pg_cursors`).
    objects: parking_lot::Mutex<catalog::session_objects::SessionObjects>,
    /// The rowids the running `INSERT … ON CONFLICT DO UPDATE` updated (not inserted), for its RETURNING's
    /// `xmax`; cleared at each statement's start ([`SessionState::start_statement`]), at most
    /// [`UPSERT_MARKS_MAX`].
    upsert_updated: parking_lot::Mutex<std::collections::HashSet<i64>>,
    /// The connection's server and client socket addresses (`inet_server_port()`, `inet_client_port()`);
    /// `None` for a session not over TCP, whose ports are NULL as over a Unix socket in PostgreSQL.
    addresses: RwLock<Option<(std::net::SocketAddr, std::net::SocketAddr)>>,
}

/// How many updated rows one upsert whose RETURNING reads `xmax` may mark (54000 past it): 8 bytes and the
/// set's overhead each, so at most some hundreds of MiB.
pub const UPSERT_MARKS_MAX: usize = 8 * 1024 * 1024;

impl SessionState {
    /// A session's state; `now()` is the current time until a statement or transaction starts.
    pub fn new(database: &str, user: &str, backend_pid: i32) -> SessionState {
        SessionState {
            time_zone: RwLock::new(TimeZone::UTC),
            time_zone_text: parking_lot::Mutex::new(String::new()),
            settings: parking_lot::Mutex::new(crate::settings::Settings::new()),
            advisory_locks: crate::advisory::SessionLocks::new(database, backend_pid),
            notifier: crate::notify::Notifier::new(database, backend_pid),
            interrupt_check: RwLock::new(None),
            now_micros: AtomicI64::new(Timestamp::now().as_microsecond()),
            database: database.to_owned(),
            user: user.to_owned(),
            backend_pid,
            sequences: parking_lot::Mutex::default(),
            enums: RwLock::default(),
            schemas: RwLock::default(),
            catalog: RwLock::default(),
            constraints: parking_lot::Mutex::default(),
            objects: parking_lot::Mutex::default(),
            upsert_updated: parking_lot::Mutex::default(),
            addresses: RwLock::new(None),
        }
    }

    /// The socket addresses of the session's connection: the server's end and the client's.
    pub fn set_connection_addresses(&self, server: std::net::SocketAddr, client: std::net::SocketAddr) {
        *self.addresses.write() = Some((server, client));
    }

    /// Marks the start of a statement: what lasts only for one statement goes (an upsert's marks).
    pub fn start_statement(&self) {
        let mut marks = self.upsert_updated.lock();
        if !marks.is_empty() {
            marks.clear();
            marks.shrink_to(1024);
        }
    }

    /// The session's `TimeZone`.
    pub fn time_zone(&self) -> TimeZone {
        self.time_zone.read().clone()
    }

    /// The session's advisory locks.
    pub fn advisory_locks(&self) -> &crate::advisory::SessionLocks {
        &self.advisory_locks
    }

    /// Sets how waits inside functions learn that the statement was stopped.
    pub fn set_interrupt_check(&self, check: Arc<dyn Fn() -> bool + Send + Sync>) {
        *self.interrupt_check.write() = Some(InterruptCheck(check));
    }

    /// Whether the running statement was stopped.
    pub fn interrupted(&self) -> bool {
        self.interrupt_check.read().as_ref().is_some_and(|check| (check.0)())
    }

    /// The session's `LISTEN`/`NOTIFY` side.
    pub fn notifier(&self) -> &crate::notify::Notifier {
        &self.notifier
    }

    /// The transaction ended (`committed` or rolled back): what lasts only for it goes (transaction-level
    /// advisory locks); its notifications are sent, or forgotten.
    pub fn end_transaction(&self, committed: bool) {
        self.advisory_locks.end_transaction();
        self.notifier.end_transaction(committed);
    }

    /// Reads the session's run-time parameters.
    pub fn read_settings<R>(&self, read: impl FnOnce(&crate::settings::Settings) -> R) -> R {
        read(&self.settings.lock())
    }

    /// Changes the session's run-time parameters; the zone functions use follows `TimeZone`.
    pub fn update_settings<R>(&self, update: impl FnOnce(&mut crate::settings::Settings) -> R) -> R {
        let mut settings = self.settings.lock();
        let result = update(&mut settings);
        let zone_text = settings.raw(crate::settings::TIME_ZONE).unwrap_or_default();
        let mut applied_text = self.time_zone_text.lock();
        if *applied_text != zone_text || applied_text.is_empty() {
            let zone = crate::settings::zone_of(zone_text).unwrap_or(TimeZone::UTC);
            zone_text.clone_into(&mut applied_text);
            *self.time_zone.write() = zone;
        }
        drop(applied_text);
        let order = crate::value::datetime::DateOrder::of_datestyle(settings.raw("datestyle").unwrap_or_default());
        drop(settings);
        crate::value::datetime::set_date_order(order);
        result
    }

    /// Makes this session's `DateStyle` field order the one dates are read with on the calling thread (call
    /// when a session's call starts on a thread that may have run another session's).
    pub fn enter_thread(&self) {
        let order = self
            .read_settings(|s| crate::value::datetime::DateOrder::of_datestyle(s.raw("DateStyle").unwrap_or_default()));
        crate::value::datetime::set_date_order(order);
    }

    /// Records a catalog read: the database's schemas (what `search_path` may name) and the snapshot the
    /// catalog functions read relations and column types from.
    pub fn set_catalog(&self, catalog: &crate::catalog::Catalog) {
        *self.schemas.write() = catalog.schemas().clone();
        *self.catalog.write() = Arc::new(catalog.clone());
    }

    /// The open transaction's constraint modes (`SET CONSTRAINTS`) and the deferrable constraints it saw
    /// violated while deferred (`crate::deferrable`).
    pub fn constraint_modes(&self) -> parking_lot::MutexGuard<'_, crate::deferrable::Modes> {
        self.constraints.lock()
    }

    /// Whether a transaction block is open, as the caller knows it after each statement: deferred
    /// constraints are deferred only inside one, and leaving one forgets its constraint modes.
    pub fn set_in_block(&self, in_block: bool) {
        self.constraints.lock().set_in_block(in_block);
    }

    /// The session's last catalog snapshot (its `search_path` is not the session's: read
    /// [`SessionState::effective_search_path`]).
    pub fn catalog(&self) -> Arc<crate::catalog::Catalog> {
        self.catalog.read().clone()
    }

    /// The database's schemas other than `public`, as of the last catalog read.
    pub fn schemas(&self) -> Arc<Vec<crate::schemas::SchemaEntry>> {
        self.schemas.read().clone()
    }

    /// The session's effective `search_path`: the schemas it names that exist, in order.
    pub fn effective_search_path(&self) -> Vec<String> {
        let entries = self.read_settings(|s| {
            crate::schemas::parse_search_path(s.raw(crate::settings::SEARCH_PATH).unwrap_or_default())
        });
        crate::schemas::effective_search_path(&entries, &self.user, &self.schemas.read())
    }

    /// How result values are printed to the client: `TimeZone`, `IntervalStyle`, `bytea_output`.
    pub fn output_style(&self) -> crate::value::OutputStyle {
        let settings = self.settings.lock();
        let interval = match settings.raw("IntervalStyle") {
            Some("iso_8601") => crate::value::IntervalStyle::Iso8601,
            _ => crate::value::IntervalStyle::Postgres,
        };
        let bytea = match settings.raw("bytea_output") {
            Some("escape") => crate::value::ByteaOutput::Escape,
            _ => crate::value::ByteaOutput::Hex,
        };
        drop(settings);
        crate::value::OutputStyle {
            tz: self.time_zone(),
            interval,
            bytea,
        }
    }

    /// Marks the start of a transaction: `now()` is this instant until the next one.
    pub fn start_transaction(&self) {
        self.now_micros
            .store(Timestamp::now().as_microsecond(), Ordering::SeqCst);
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_microsecond(self.now_micros.load(Ordering::SeqCst)).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

fn flags_pure() -> FunctionFlags {
    FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC | FunctionFlags::SQLITE_INNOCUOUS
}

fn flags_session() -> FunctionFlags {
    FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS
}

fn owned(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        // Text that is not UTF-8 (SQLite does not check) is kept, its bad bytes replaced.
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

fn type_arg(ctx: &Context<'_>, index: usize) -> rusqlite::Result<Option<PgType>> {
    let text: String = ctx.get(index)?;
    if text.is_empty() {
        return Ok(None);
    }
    PgType::from_catalog(&text).map(Some).ok_or_else(|| {
        raise(PgError::new(
            crate::error::UNDEFINED_OBJECT,
            format!("type \"{text}\" does not exist"),
        ))
    })
}

/// Registers every function and the `pg_numeric` collation on `conn`, reading `state` for the session's.
pub fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    conn.create_collation("pg_numeric", value::numeric::collate)?;
    install_casts(conn, state.clone())?;
    install_arithmetic(conn)?;
    install_session(conn, state.clone())?;
    install_strings(conn)?;
    install_datetime(conn, state.clone())?;
    install_arrays(conn, state.clone())?;
    install_series(conn, state.clone())?;
    install_ordered_set(conn)?;
    extra::install(conn, state.clone())?;
    sequence::install(conn, &state)?;
    enums::install(conn, &state)?;
    catalog::install(conn, state.clone())?;
    schemas::install(conn, state.clone())?;
    constraints::install(conn, state.clone())?;
    crate::settings::install_functions(conn, state.clone())?;
    crate::advisory::install(conn, state.clone())?;
    crate::notify::install(conn, state)?;
    Ok(())
}

/// The result type of a function the layer registers, by name and argument types (`None` where unknown);
/// the translator's typer asks this for calls it has no rule of its own for.
pub fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    extra::result_type(name, args)
        .or_else(|| crate::advisory::result_type(name))
        .or_else(|| sequence::result_type(name))
        .or_else(|| enums::result_type(name, args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DIVISION_BY_ZERO;

    #[test]
    fn like_is_case_sensitive_with_backslash_escape() {
        assert!(like("abc", "a%", Some('\\')));
        assert!(!like("abc", "A%", Some('\\')));
        assert!(like("a_c", "a\\_c", Some('\\')));
        assert!(!like("abc", "a\\_c", Some('\\')));
        assert!(like("", "%", Some('\\')));
        assert!(like("xyz", "_y_", Some('\\')));
        assert!(!like("xyz", "_y", Some('\\')));
        assert!(like("abcabd", "%ab_", Some('\\')));
        assert!(!like(&"a".repeat(5000), &format!("{}b", "%a".repeat(50)), Some('\\')));
    }

    #[test]
    fn errors_carry_their_sqlstate_through_sqlite() {
        let conn = Connection::open_in_memory().expect("memory database");
        install(&conn, Arc::new(SessionState::new("db", "user", 7))).expect("installs");
        let error = conn
            .query_row("SELECT pg_div(1, 0, 'int')", [], |r| r.get::<_, i64>(0))
            .expect_err("division by zero");
        let pg = error_of(&error.to_string()).expect("a PostgreSQL error");
        assert_eq!(pg.code, DIVISION_BY_ZERO);
        let sum: String = conn
            .query_row(
                "SELECT pg_numeric_sum(x) FROM (SELECT '1.10' AS x UNION ALL SELECT '2.2')",
                [],
                |r| r.get(0),
            )
            .expect("sums");
        assert_eq!(sum, "3.30");
        let product: String = conn
            .query_row("SELECT pg_numeric_mul('1.5', '-2.25')", [], |r| r.get(0))
            .expect("multiplies");
        assert_eq!(product, "-3.375");
        let quotient: String = conn
            .query_row("SELECT pg_numeric_div('7.0', '2')", [], |r| r.get(0))
            .expect("divides");
        assert_eq!(quotient, "3.5000000000000000");
        let third: String = conn
            .query_row("SELECT pg_numeric_div('1', '3')", [], |r| r.get(0))
            .expect("divides");
        assert_eq!(third, "0.33333333333333333333");
        let avg: String = conn
            .query_row(
                "SELECT pg_numeric_avg(x) FROM (SELECT 1 AS x UNION ALL SELECT 2)",
                [],
                |r| r.get(0),
            )
            .expect("averages");
        assert_eq!(avg, "1.5000000000000000");
    }
}
