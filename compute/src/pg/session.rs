//! One client's SQLite connection and transaction state. Everything here blocks: callers run it on a
//! blocking thread, never on the async executor.
//!
//! SQLite reports a failed store as an I/O error ("disk I/O error"); the session explains it with the store
//! error the VFS noted during the call (`vfs::take_store_error`): a closed store gives 57P01 (admin_shutdown)
//! with the reason its owner gave ("branch br_x moved from timeline … to timeline …; reconnect"), a failed
//! one 08006 (connection_failure), any other store error 58030 (io_error) with the store's message. A closed
//! or failed store stays so, so the session remembers it for later I/O errors that SQLite reports without
//! calling the VFS again (its pager keeps an error state).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use pgwire::api::portal::Format;
use pgwire::api::results::{DataRowEncoder, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::Value;
use rusqlite::{Batch, Connection, InterruptHandle, Statement};

use super::error::{
    SqlError, ADMIN_SHUTDOWN, CONNECTION_FAILURE, INSUFFICIENT_PRIVILEGE, IN_FAILED_SQL_TRANSACTION, IO_ERROR,
    LOCK_NOT_AVAILABLE, PROGRAM_LIMIT_EXCEEDED, PROTOCOL_VIOLATION, QUERY_CANCELED, SERIALIZATION_FAILURE,
};
use super::settings::{self, Command, Settings};
use super::{defend, types};
use crate::page_store::PageStoreError;
use crate::vfs::{self, BusyReason};

/// Most rows one statement may return: results are built in memory before they are sent.
const RESULT_ROWS_MAX: usize = 1_000_000;
/// Most bytes of values one statement may return, for the same reason.
const RESULT_BYTES_MAX: usize = 256 << 20;
/// Most statements whose described column types a session remembers.
const DESCRIBED_STATEMENTS_MAX: usize = 1024;

/// Where the session is with respect to a transaction block, as PostgreSQL sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxState {
    Idle,
    InBlock,
    /// An error happened inside the block: everything but ROLLBACK/COMMIT is refused with 25P02.
    Failed,
}

/// What one statement did.
pub(crate) enum Outcome {
    /// Rows, and the command tag without its row count (`SELECT`, `INSERT 0`).
    Rows {
        fields: Arc<Vec<FieldInfo>>,
        rows: Vec<DataRow>,
        tag: String,
    },
    /// A command with its full tag (`INSERT 0 3`, `CREATE TABLE`).
    Command(String),
    /// BEGIN.
    TxStart(String),
    /// COMMIT or ROLLBACK.
    TxEnd(String),
}

/// The leading keyword of a statement, which picks its command tag and its transaction effect.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Begin,
    Commit,
    Rollback,
    RollbackTo,
    Insert,
    Update,
    Delete,
    Other(String),
}

/// A statement's parameter types (PostgreSQL numbering) and result columns.
pub(crate) struct Described {
    pub(crate) params: Vec<Type>,
    pub(crate) columns: Vec<(String, Type)>,
}

/// Why the running statement was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum StopReason {
    /// A cancel request (psql's Ctrl-C).
    Cancel = 1,
    /// `statement_timeout` passed.
    Timeout = 2,
    /// The client's connection closed.
    ClientGone = 3,
}

/// What the connection's async side shares with its session without taking the session's lock: how to stop
/// the running statement and why, and the settings that side enforces.
pub(crate) struct SessionShared {
    interrupt: InterruptHandle,
    /// A `StopReason` as its number, 0 for none: set before the interrupt, cleared when a statement starts.
    stop: AtomicU8,
    statement_timeout_ms: AtomicU64,
    idle_in_transaction_timeout_ms: AtomicU64,
    in_transaction: AtomicBool,
}

impl SessionShared {
    /// Stops the running statement (SQLite's interrupt) for `reason`; the first reason given wins. Also stops
    /// the statements still to come of the same query.
    pub(crate) fn stop(&self, reason: StopReason) {
        let _first = self
            .stop
            .compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst);
        self.interrupt.interrupt();
    }

    /// Forgets an earlier stop: called by the connection before it hands the session a new query.
    pub(crate) fn begin_query(&self) {
        self.stop.store(0, Ordering::SeqCst);
    }

    fn stopped(&self) -> Option<StopReason> {
        match self.stop.load(Ordering::SeqCst) {
            1 => Some(StopReason::Cancel),
            2 => Some(StopReason::Timeout),
            3 => Some(StopReason::ClientGone),
            _ => None,
        }
    }

    /// The session's `statement_timeout` in milliseconds (0: none).
    pub(crate) fn statement_timeout_ms(&self) -> u64 {
        self.statement_timeout_ms.load(Ordering::SeqCst)
    }

    /// The session's `idle_in_transaction_session_timeout` in milliseconds (0: none).
    pub(crate) fn idle_in_transaction_timeout_ms(&self) -> u64 {
        self.idle_in_transaction_timeout_ms.load(Ordering::SeqCst)
    }

    /// Whether the session is inside a transaction block (as of its last statement).
    pub(crate) fn in_transaction(&self) -> bool {
        self.in_transaction.load(Ordering::SeqCst)
    }
}

/// The server's defaults for a new session's timeouts, in milliseconds (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionDefaults {
    /// `statement_timeout`.
    pub statement_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout`.
    pub idle_in_transaction_timeout_ms: u64,
}

/// A client's session: a SQLite connection with PostgreSQL transaction semantics on top.
pub(crate) struct Session {
    conn: Connection,
    shared: Arc<SessionShared>,
    settings: Settings,
    /// The database name the client connected with (for error messages).
    database: String,
    tx: TxState,
    /// Column types given to the client when it described a statement, so execution agrees.
    described: HashMap<String, Vec<Type>>,
    /// The store's closure or failure, once an I/O error showed it: it lasts.
    store_gone: Option<PageStoreError>,
    /// The session's place among its database's sessions, let go with it.
    _admission: Option<super::Admission>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("database", &self.database)
            .field("tx", &self.tx)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session over `conn`, opened for the client's `database` name, hardened against the client's SQL
    /// (`defend`) now that its own setup is done.
    pub(crate) fn new(conn: Connection, database: &str, defaults: SessionDefaults) -> rusqlite::Result<Session> {
        defend::harden(&conn)?;
        let settings = Settings::new(defaults.statement_timeout_ms, defaults.idle_in_transaction_timeout_ms);
        let shared = Arc::new(SessionShared {
            interrupt: conn.get_interrupt_handle(),
            stop: AtomicU8::new(0),
            statement_timeout_ms: AtomicU64::new(defaults.statement_timeout_ms),
            idle_in_transaction_timeout_ms: AtomicU64::new(defaults.idle_in_transaction_timeout_ms),
            in_transaction: AtomicBool::new(false),
        });
        Ok(Session {
            conn,
            shared,
            settings,
            database: database.to_owned(),
            tx: TxState::Idle,
            described: HashMap::new(),
            store_gone: None,
            _admission: None,
        })
    }

    /// The session, holding `admission` for its life.
    pub(crate) fn with_admission(mut self, admission: Option<super::Admission>) -> Session {
        self._admission = admission;
        self
    }

    /// What the connection shares with this session (see [`SessionShared`]).
    pub(crate) fn shared(&self) -> Arc<SessionShared> {
        self.shared.clone()
    }

    /// Runs every statement of a simple query in order, stopping at the first error (as PostgreSQL does).
    pub(crate) fn simple_query(&mut self, sql: &str) -> (Vec<Outcome>, Option<SqlError>) {
        vfs::clear_store_error();
        defend::take_refusal();
        let (outcomes, error) = self.simple_query_inner(sql);
        let error = error.map(|error| self.explain(error));
        self.after_statement();
        (outcomes, error)
    }

    /// Runs one prepared statement with its parameters (PostgreSQL numbering).
    pub(crate) fn execute(&mut self, sql: &str, params: &[Value], format: &Format) -> Result<Outcome, SqlError> {
        vfs::clear_store_error();
        defend::take_refusal();
        let result = self
            .execute_inner(sql, params, format)
            .map_err(|error| self.explain(error));
        self.after_statement();
        result
    }

    /// Parameter types (PostgreSQL numbering) and result columns of a statement, without running it
    /// unless it is read-only and takes no parameters, when one row is read to type its expressions.
    pub(crate) fn describe(&mut self, sql: &str, client_types: &[Option<Type>]) -> Result<Described, SqlError> {
        vfs::clear_store_error();
        defend::take_refusal();
        let result = self
            .describe_inner(sql, client_types)
            .map_err(|error| self.explain(error));
        self.after_statement();
        result
    }

    /// Rolls back the open transaction because the client sat idle in it too long; the connection is then
    /// ended by the caller. Returns whether there was one.
    pub(crate) fn abort_idle_transaction(&mut self) -> bool {
        if self.tx == TxState::Idle && self.conn.is_autocommit() {
            return false;
        }
        if !self.conn.is_autocommit() {
            if let Err(error) = self.conn.execute_batch("ROLLBACK") {
                tracing::warn!(%error, database = %self.database, "rolling back an idle transaction failed");
            }
        }
        self.tx = TxState::Idle;
        self.after_statement();
        true
    }

    /// Publishes what the connection enforces after each call: the transaction state and the timeouts; a
    /// finished transaction ends its `SET LOCAL`s.
    fn after_statement(&mut self) {
        let in_transaction = self.tx != TxState::Idle || !self.conn.is_autocommit();
        if !in_transaction {
            self.settings.end_transaction();
        }
        let shared = &self.shared;
        shared.in_transaction.store(in_transaction, Ordering::SeqCst);
        shared
            .statement_timeout_ms
            .store(self.settings.timeout_ms(settings::STATEMENT_TIMEOUT), Ordering::SeqCst);
        shared.idle_in_transaction_timeout_ms.store(
            self.settings.timeout_ms(settings::IDLE_IN_TRANSACTION_TIMEOUT),
            Ordering::SeqCst,
        );
    }

    /// `SET`, `SHOW` or `RESET` (see `settings`).
    fn run_setting(&mut self, sql: &str, format: &Format) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        let result = match settings::parse(sql)? {
            Command::Set { name, value, local } => {
                let local = local && !self.conn.is_autocommit();
                self.settings
                    .set(&name, value, local)
                    .map(|()| Outcome::Command("SET".to_owned()))
            }
            Command::Reset(name) => self
                .settings
                .reset(name.as_deref())
                .map(|()| Outcome::Command("RESET".to_owned())),
            Command::Show(name) => match self.settings.get(&name) {
                Some(value) => {
                    let fields = Arc::new(types::fields(&[(name.clone(), Type::TEXT)], format));
                    let mut encoder = DataRowEncoder::new(fields.clone());
                    let row = types::encode_row(&mut encoder, &fields, &[Value::Text(value.to_owned())])?;
                    Ok(Outcome::Rows {
                        fields,
                        rows: vec![row],
                        tag: "SHOW".to_owned(),
                    })
                }
                None => Err(SqlError::new(
                    super::error::UNDEFINED_OBJECT,
                    format!("unrecognized configuration parameter \"{name}\""),
                )),
            },
        };
        if result.is_err() && self.tx == TxState::InBlock {
            self.tx = TxState::Failed;
        }
        result
    }

    /// An error explained: an I/O error by the store error behind it (see the module doc), a busy database by
    /// why it was busy, an interrupt by who stopped it, a refusal by its reason; other errors unchanged.
    fn explain(&mut self, error: SqlError) -> SqlError {
        match error.code {
            LOCK_NOT_AVAILABLE => {
                return match vfs::take_busy_reason() {
                    Some(BusyReason::StaleSnapshot) => SqlError::new(
                        SERIALIZATION_FAILURE,
                        "could not serialize access due to concurrent update: another transaction committed \
                         after this transaction's snapshot was taken; retry the transaction",
                    ),
                    _ => SqlError::new(
                        LOCK_NOT_AVAILABLE,
                        format!(
                            "could not obtain the write lock of database {} within {} s: another transaction is \
                             writing; retry",
                            self.database,
                            vfs::BUSY_TIMEOUT.as_secs()
                        ),
                    ),
                };
            }
            QUERY_CANCELED => {
                let message = match self.shared.stopped() {
                    Some(StopReason::Timeout) => "canceling statement due to statement timeout",
                    Some(StopReason::ClientGone) => "canceling statement: the client closed its connection",
                    _ => "canceling statement due to user request",
                };
                return SqlError::new(QUERY_CANCELED, message);
            }
            INSUFFICIENT_PRIVILEGE => {
                return match defend::take_refusal() {
                    Some(reason) => SqlError::new(INSUFFICIENT_PRIVILEGE, reason),
                    None => error,
                };
            }
            IO_ERROR => {}
            _ => return error,
        }
        let noted = vfs::take_store_error();
        if let Some(gone @ (PageStoreError::Closed { .. } | PageStoreError::Failed { .. })) = &noted {
            self.store_gone = Some(gone.clone());
        }
        match (&self.store_gone, noted) {
            (Some(PageStoreError::Closed { reason }), _) => SqlError::new(ADMIN_SHUTDOWN, reason.clone()),
            (Some(PageStoreError::Failed { reason }), _) => SqlError::new(
                CONNECTION_FAILURE,
                format!("the storage of database {} failed: {reason}; reconnect", self.database),
            ),
            (_, Some(too_large @ PageStoreError::TooLarge { .. })) => SqlError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("transaction too large: {too_large}; nothing of it was committed"),
            ),
            (_, Some(other)) => SqlError::new(IO_ERROR, format!("{}: {other}", error.message)),
            (_, None) => error,
        }
    }

    fn simple_query_inner(&mut self, sql: &str) -> (Vec<Outcome>, Option<SqlError>) {
        if leading_words(sql, 1)
            .first()
            .is_some_and(|w| settings::is_setting_statement(w))
        {
            return match self.run_setting(sql, &Format::UnifiedText) {
                Ok(outcome) => (vec![outcome], None),
                Err(error) => (Vec::new(), Some(error)),
            };
        }
        let mut outcomes = Vec::new();
        let sql = translate(sql);
        let mut batch = Batch::new(&self.conn, &sql);
        loop {
            if self.shared.stopped().is_some() {
                // Stopped between two statements of the query: the rest is not run.
                self.tx = tx_after_error(&self.conn, self.tx);
                return (outcomes, Some(SqlError::new(QUERY_CANCELED, "")));
            }
            let mut stmt = match batch.next() {
                Ok(Some(stmt)) => stmt,
                Ok(None) => return (outcomes, None),
                Err(error) => {
                    let error = if self.tx == TxState::Failed {
                        aborted()
                    } else {
                        SqlError::from(error)
                    };
                    self.tx = tx_after_error(&self.conn, self.tx);
                    return (outcomes, Some(error));
                }
            };
            let result = run(&self.conn, &mut self.tx, &mut stmt, &[], &Format::UnifiedText, None);
            match result {
                Ok(outcome) => outcomes.push(outcome),
                Err(error) => return (outcomes, Some(error)),
            }
        }
    }

    fn execute_inner(&mut self, sql: &str, params: &[Value], format: &Format) -> Result<Outcome, SqlError> {
        if leading_words(sql, 1)
            .first()
            .is_some_and(|w| settings::is_setting_statement(w))
        {
            return self.run_setting(sql, format);
        }
        let hints = self.described.get(sql).cloned();
        let mut stmt = match self.conn.prepare(&translate(sql)) {
            Ok(stmt) => stmt,
            Err(error) => {
                let error = if self.tx == TxState::Failed {
                    aborted()
                } else {
                    SqlError::from(error)
                };
                self.tx = tx_after_error(&self.conn, self.tx);
                return Err(error);
            }
        };
        run(&self.conn, &mut self.tx, &mut stmt, params, format, hints.as_deref())
    }

    fn describe_inner(&mut self, sql: &str, client_types: &[Option<Type>]) -> Result<Described, SqlError> {
        if let Some(word) = leading_words(sql, 1)
            .first()
            .filter(|w| settings::is_setting_statement(w))
        {
            let columns = match (word.as_str(), settings::parse(sql)?) {
                ("SHOW", Command::Show(name)) => vec![(name, Type::TEXT)],
                _ => Vec::new(),
            };
            return Ok(Described {
                params: Vec::new(),
                columns,
            });
        }
        let mut stmt = self.conn.prepare(&translate(sql))?;
        let count = parameter_numbers(&stmt)?.into_iter().max().unwrap_or(0);
        let params = (0..count.max(client_types.len()))
            .map(|index| {
                client_types
                    .get(index)
                    .cloned()
                    .flatten()
                    .unwrap_or(types::PARAMETER_TYPE_DEFAULT)
            })
            .collect();
        let declared = declared_types(&stmt);
        let probe = if declared.iter().any(Option::is_none) && stmt.readonly() && count == 0 {
            let mut rows = stmt.raw_query();
            match rows.next()? {
                Some(row) => (0..declared.len())
                    .map(|i| row.get::<_, Value>(i))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            }
        } else {
            Vec::new()
        };
        let columns: Vec<(String, Type)> = names(&stmt)
            .into_iter()
            .zip(declared)
            .enumerate()
            .map(|(i, (name, ty))| {
                let ty = ty.unwrap_or_else(|| types::type_of_values(probe.get(i).into_iter()));
                (name, ty)
            })
            .collect();
        if self.described.len() >= DESCRIBED_STATEMENTS_MAX {
            self.described.clear();
        }
        self.described
            .insert(sql.to_owned(), columns.iter().map(|(_, ty)| ty.clone()).collect());
        Ok(Described { params, columns })
    }
}

/// PostgreSQL spellings SQLite does not know, rewritten at the start of a query: `START TRANSACTION
/// [modes]` (which `tokio-postgres` sends) and `BEGIN [TRANSACTION] ISOLATION LEVEL …` become `BEGIN`.
/// SQLite transactions are serializable, so dropping the modes only ever strengthens them.
fn translate(sql: &str) -> Cow<'_, str> {
    let words = leading_words(sql, 3);
    let is_start = words.first().is_some_and(|w| w == "START") && words.get(1).is_some_and(|w| w == "TRANSACTION");
    let is_begin_with_modes = words.first().is_some_and(|w| w == "BEGIN")
        && words
            .get(1)
            .is_some_and(|w| matches!(w.as_str(), "ISOLATION" | "READ" | "TRANSACTION" | "WORK"))
        && !(words.get(1).is_some_and(|w| w == "TRANSACTION") && words.len() == 2);
    if !(is_start || is_begin_with_modes) {
        return Cow::Borrowed(sql);
    }
    let rest = sql.split_once(';').map_or("", |(_, rest)| rest);
    Cow::Owned(format!("BEGIN;{rest}"))
}

fn aborted() -> SqlError {
    SqlError::new(
        IN_FAILED_SQL_TRANSACTION,
        "current transaction is aborted, commands ignored until end of transaction block",
    )
}

/// After an error, a transaction block (ours, or one SQLite still has open) is failed.
fn tx_after_error(conn: &Connection, tx: TxState) -> TxState {
    if tx != TxState::Idle || !conn.is_autocommit() {
        TxState::Failed
    } else {
        TxState::Idle
    }
}

/// Runs one prepared statement under the transaction rules, updating the transaction state.
fn run(
    conn: &Connection,
    tx: &mut TxState,
    stmt: &mut Statement<'_>,
    params: &[Value],
    format: &Format,
    hints: Option<&[Type]>,
) -> Result<Outcome, SqlError> {
    let kind = kind_of(&stmt.expanded_sql().unwrap_or_default());
    if *tx == TxState::Failed {
        return match kind {
            Kind::Commit | Kind::Rollback => {
                if !conn.is_autocommit() {
                    conn.execute_batch("ROLLBACK")?;
                }
                *tx = TxState::Idle;
                Ok(Outcome::TxEnd("ROLLBACK".to_owned()))
            }
            Kind::RollbackTo => {
                // Still failed if this fails: the state is left as it is.
                bind(stmt, params)?;
                stmt.raw_execute()?;
                *tx = TxState::InBlock;
                Ok(Outcome::Command("ROLLBACK".to_owned()))
            }
            _ => Err(aborted()),
        };
    }
    match execute(stmt, params, format, hints, &kind) {
        Ok(outcome) => {
            *tx = if conn.is_autocommit() {
                TxState::Idle
            } else {
                TxState::InBlock
            };
            Ok(outcome)
        }
        Err(error) => {
            *tx = tx_after_error(conn, *tx);
            Err(error)
        }
    }
}

fn execute(
    stmt: &mut Statement<'_>,
    params: &[Value],
    format: &Format,
    hints: Option<&[Type]>,
    kind: &Kind,
) -> Result<Outcome, SqlError> {
    bind(stmt, params)?;
    if stmt.column_count() == 0 {
        let changed = stmt.raw_execute()?;
        return Ok(match kind {
            Kind::Begin => Outcome::TxStart("BEGIN".to_owned()),
            Kind::Commit => Outcome::TxEnd("COMMIT".to_owned()),
            Kind::Rollback => Outcome::TxEnd("ROLLBACK".to_owned()),
            Kind::RollbackTo => Outcome::Command("ROLLBACK".to_owned()),
            Kind::Insert => Outcome::Command(format!("INSERT 0 {changed}")),
            Kind::Update => Outcome::Command(format!("UPDATE {changed}")),
            Kind::Delete => Outcome::Command(format!("DELETE {changed}")),
            Kind::Other(tag) => Outcome::Command(tag.clone()),
        });
    }
    let names = names(stmt);
    let declared = declared_types(stmt);
    let values = collect_rows(stmt, names.len())?;
    let columns: Vec<(String, Type)> = names
        .into_iter()
        .zip(declared)
        .enumerate()
        .map(|(i, (name, declared))| {
            let ty = declared
                .or_else(|| hints.and_then(|h| h.get(i).cloned()))
                .unwrap_or_else(|| types::type_of_values(values.iter().map(|row| &row[i])));
            (name, ty)
        })
        .collect();
    let fields = Arc::new(types::fields(&columns, format));
    let mut encoder = DataRowEncoder::new(fields.clone());
    let rows = values
        .iter()
        .map(|row| types::encode_row(&mut encoder, &fields, row))
        .collect::<Result<Vec<_>, _>>()?;
    let tag = match kind {
        Kind::Insert => "INSERT 0",
        Kind::Update => "UPDATE",
        Kind::Delete => "DELETE",
        _ => "SELECT",
    };
    Ok(Outcome::Rows {
        fields,
        rows,
        tag: tag.to_owned(),
    })
}

fn collect_rows(stmt: &mut Statement<'_>, width: usize) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = rows.next()? {
        let values = (0..width)
            .map(|i| row.get::<_, Value>(i))
            .collect::<Result<Vec<_>, _>>()?;
        bytes += values
            .iter()
            .map(|v| match v {
                Value::Text(t) => t.len(),
                Value::Blob(b) => b.len(),
                _ => 8,
            })
            .sum::<usize>();
        out.push(values);
        if out.len() > RESULT_ROWS_MAX || bytes > RESULT_BYTES_MAX {
            return Err(SqlError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("result exceeds {RESULT_ROWS_MAX} rows or {RESULT_BYTES_MAX} bytes; add a LIMIT"),
            ));
        }
    }
    Ok(out)
}

fn names(stmt: &Statement<'_>) -> Vec<String> {
    stmt.column_names().into_iter().map(str::to_owned).collect()
}

fn declared_types(stmt: &Statement<'_>) -> Vec<Option<Type>> {
    stmt.columns()
        .iter()
        .map(|c| c.decl_type().and_then(types::type_of_declared))
        .collect()
}

/// The PostgreSQL number (1-based) of each SQLite parameter, in SQLite's order: `$N` and `?N` name
/// theirs, a bare `?` is its position.
fn parameter_numbers(stmt: &Statement<'_>) -> Result<Vec<usize>, SqlError> {
    (1..=stmt.parameter_count())
        .map(|index| match stmt.parameter_name(index) {
            None => Ok(index),
            Some(name) => name
                .strip_prefix('$')
                .or_else(|| name.strip_prefix('?'))
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| SqlError::new(PROTOCOL_VIOLATION, format!("parameter {name} is not of the form $N"))),
        })
        .collect()
}

fn bind(stmt: &mut Statement<'_>, params: &[Value]) -> Result<(), SqlError> {
    let numbers = parameter_numbers(stmt)?;
    for (index, number) in numbers.into_iter().enumerate() {
        let value = params.get(number - 1).ok_or_else(|| {
            SqlError::new(
                PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but the statement uses ${number}",
                    params.len()
                ),
            )
        })?;
        stmt.raw_bind_parameter(index + 1, value)?;
    }
    Ok(())
}

/// The statement's kind from its first keywords, past whitespace and comments.
fn kind_of(sql: &str) -> Kind {
    let words = leading_words(sql, 4);
    let word = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    match word(0) {
        "BEGIN" => Kind::Begin,
        "COMMIT" | "END" => Kind::Commit,
        "ROLLBACK" if word(1) == "TO" || (word(1) == "TRANSACTION" && word(2) == "TO") => Kind::RollbackTo,
        "ROLLBACK" => Kind::Rollback,
        "INSERT" | "REPLACE" => Kind::Insert,
        "UPDATE" => Kind::Update,
        "DELETE" => Kind::Delete,
        "CREATE" | "DROP" | "ALTER" => {
            let object = words[1..]
                .iter()
                .find(|w| !matches!(w.as_str(), "UNIQUE" | "TEMP" | "TEMPORARY" | "VIRTUAL"))
                .map(String::as_str)
                .unwrap_or("");
            Kind::Other(format!("{} {object}", word(0)).trim_end().to_owned())
        }
        other => Kind::Other(other.to_owned()),
    }
}

fn leading_words(sql: &str, count: usize) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = sql;
    while words.len() < count {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
            continue;
        }
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        words.push(rest[..end].to_ascii_uppercase());
        rest = &rest[end..];
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that serves an empty database until `gone` is set, then fails every call with it.
    #[derive(Default)]
    struct GoingStore {
        inner: crate::page_store::MemoryPageStore,
        gone: parking_lot::Mutex<Option<PageStoreError>>,
    }

    impl crate::page_store::PageStore for GoingStore {
        fn read_page(
            &self,
            block: u32,
            snapshot: &crate::page_store::Snapshot,
        ) -> Result<Option<bytes::Bytes>, PageStoreError> {
            self.gone
                .lock()
                .clone()
                .map_or_else(|| self.inner.read_page(block, snapshot), Err)
        }

        fn snapshot(&self) -> Result<crate::page_store::Snapshot, PageStoreError> {
            self.gone.lock().clone().map_or_else(|| self.inner.snapshot(), Err)
        }

        fn commit(
            &self,
            pages: Vec<(u32, bytes::Bytes)>,
            db_size_pages: u32,
        ) -> Result<crate::page_store::Snapshot, PageStoreError> {
            self.gone
                .lock()
                .clone()
                .map_or_else(|| self.inner.commit(pages, db_size_pages), Err)
        }
    }

    fn session_over(name: &str) -> (Session, Arc<GoingStore>) {
        let store = Arc::new(GoingStore::default());
        vfs::register_database(name, store.clone()).expect("register");
        let conn = vfs::open_connection(name).expect("open");
        let mut session = Session::new(conn, name, SessionDefaults::default()).expect("session");
        let (_, error) = session.simple_query("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)");
        assert_eq!(error, None);
        (session, store)
    }

    #[test]
    fn a_closed_store_reaches_the_client_with_its_reason() {
        let (mut session, store) = session_over("session_closed_store");
        let reason = "branch br_x moved from timeline a to timeline b; reconnect";
        *store.gone.lock() = Some(PageStoreError::Closed {
            reason: reason.to_owned(),
        });
        let (_, error) = session.simple_query("INSERT INTO t VALUES (2)");
        assert_eq!(error, Some(SqlError::new(ADMIN_SHUTDOWN, reason)));
        let read = session.execute("SELECT x FROM t", &[], &Format::UnifiedText).err();
        assert_eq!(
            read,
            Some(SqlError::new(ADMIN_SHUTDOWN, reason)),
            "later statements too"
        );
        assert!(vfs::unregister_database("session_closed_store"));
    }

    #[test]
    fn a_failed_or_unavailable_store_reaches_the_client_with_its_sqlstate() {
        let (mut session, store) = session_over("session_failed_store");
        *store.gone.lock() = Some(PageStoreError::Unavailable("no answer in time".to_owned()));
        let error = session.execute("SELECT x FROM t", &[], &Format::UnifiedText).err();
        let error = error.expect("the read fails");
        assert_eq!(error.code, IO_ERROR);
        assert!(error.message.contains("no answer in time"), "{error:?}");
        *store.gone.lock() = Some(PageStoreError::Failed {
            reason: "commit failed: fenced".to_owned(),
        });
        let (_, error) = session.simple_query("INSERT INTO t VALUES (2)");
        let error = error.expect("the commit fails");
        assert_eq!(error.code, CONNECTION_FAILURE);
        assert!(
            error.message.contains("session_failed_store") && error.message.contains("commit failed: fenced"),
            "{error:?}"
        );
        assert!(vfs::unregister_database("session_failed_store"));
    }

    #[test]
    fn postgres_begin_spellings_become_begin() {
        assert_eq!(translate("START TRANSACTION"), "BEGIN;");
        assert_eq!(
            translate("begin isolation level serializable; select 1"),
            "BEGIN; select 1"
        );
        assert_eq!(translate("BEGIN TRANSACTION"), "BEGIN TRANSACTION");
        assert_eq!(translate("SELECT 1"), "SELECT 1");
    }

    #[test]
    fn kinds_come_from_leading_keywords() {
        assert_eq!(kind_of("  -- hi\n begin"), Kind::Begin);
        assert_eq!(kind_of("/* x */ insert into t values (1)"), Kind::Insert);
        assert_eq!(kind_of("rollback to sp"), Kind::RollbackTo);
        assert_eq!(
            kind_of("create unique index i on t(x)"),
            Kind::Other("CREATE INDEX".to_owned())
        );
        assert_eq!(kind_of("select 1"), Kind::Other("SELECT".to_owned()));
        assert_eq!(kind_of(""), Kind::Other(String::new()));
    }
}
