//! One client's SQLite connection and transaction state. Everything here blocks: callers run it on a
//! blocking thread, never on the async executor.
//!
//! SQLite reports a failed store as an I/O error ("disk I/O error"); the session explains it with the store
//! error the VFS noted during the call (`vfs::take_store_error`): a closed store gives 57P01 (admin_shutdown)
//! with the reason its owner gave ("branch br_x moved from timeline … to timeline …; reconnect"), a failed
//! one 08006 (connection_failure), any other store error 58030 (io_error) with the store's message. A closed
//! or failed store stays so, so the session remembers it for later I/O errors that SQLite reports without
//! calling the VFS again (its pager keeps an error state).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use pgcompat::{Dialect, PgType, Translated, Translation};
use pgwire::api::portal::Format;
use pgwire::api::results::FieldInfo;
use pgwire::api::Type;
use pgwire::messages::data::DataRow;
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::Value;
use rusqlite::{Batch, Connection, InterruptHandle};

mod copy;

use super::cursor::{Cursor, Cursors};
use super::defend;
use super::error::{
    SqlError, ACTIVE_SQL_TRANSACTION, ADMIN_SHUTDOWN, CONNECTION_FAILURE, DUPLICATE_PREPARED_STATEMENT,
    FEATURE_NOT_SUPPORTED, INSUFFICIENT_PRIVILEGE, INVALID_SQL_STATEMENT_NAME, IO_ERROR, LOCK_NOT_AVAILABLE,
    NO_ACTIVE_SQL_TRANSACTION, PROGRAM_LIMIT_EXCEEDED, QUERY_CANCELED, READ_ONLY_SQL_TRANSACTION,
    SERIALIZATION_FAILURE, SYNTAX_ERROR,
};
use super::exec::{self, aborted, tx_after_error, Kind, TxState, Typing};
use super::types::{self, RawParams};
use crate::page_store::PageStoreError;
use crate::vfs::{self, BusyReason};
use pgcompat::settings::{self, Command, Scope, TxEnd};

/// Most SQL-level prepared statements (`PREPARE`) a session keeps.
const PREPARED_STATEMENTS_MAX: usize = 1024;
/// Most statements whose described column types a session remembers.
const DESCRIBED_STATEMENTS_MAX: usize = 1024;

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
    /// `COPY … FROM STDIN` began: the client now sends the rows (`columns` per row).
    CopyIn { columns: usize },
    /// `COPY … TO STDOUT`: the rows, formatted, one chunk per row.
    CopyOut { columns: usize, data: Vec<bytes::Bytes> },
}

/// A statement's parameter types (PostgreSQL numbering) and result columns.
pub(crate) struct Described {
    pub(crate) params: Vec<Type>,
    pub(crate) columns: Vec<(String, PgType)>,
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
    /// The database name the client connected with (for error messages).
    database: String,
    tx: TxState,
    /// The PostgreSQL dialect: translations, the type catalog, what the session's SQL functions read.
    dialect: Dialect,
    /// Column types given to the client when it described a statement, so execution agrees.
    described: HashMap<String, Vec<PgType>>,
    /// SQL-level prepared statements (`PREPARE name AS …`): their PostgreSQL text and parameter types.
    prepared: HashMap<String, (String, Vec<PgType>)>,
    /// Open cursors (`DECLARE … CURSOR`).
    cursors: Cursors,
    /// The `COPY … FROM STDIN` under way, between its statement and the client's `CopyDone`.
    copy_in: Option<copy::CopyIn>,
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
    pub(crate) fn new(
        conn: Connection,
        database: &str,
        user: &str,
        defaults: SessionDefaults,
        startup: &[(String, String)],
    ) -> rusqlite::Result<Session> {
        let dialect = Dialect::new(&conn, database, user, next_backend_pid())?;
        defend::harden(&conn)?;
        dialect.state().update_settings(|settings| {
            for (name, ms) in [
                (settings::STATEMENT_TIMEOUT, defaults.statement_timeout_ms),
                (
                    settings::IDLE_IN_TRANSACTION_TIMEOUT,
                    defaults.idle_in_transaction_timeout_ms,
                ),
            ] {
                if let Err(error) = settings.set_initial(name, &ms.to_string()) {
                    tracing::warn!(%error, name, "the server's default for a setting is not valid");
                }
            }
            for (name, value) in startup_settings(startup) {
                // A client's startup choice PostgreSQL would refuse is left at its default (PostgreSQL would
                // refuse the connection; a driver's optional hint is not worth that here).
                if let Err(error) = settings.set_initial(&name, &value) {
                    tracing::debug!(%error, name, "a startup parameter was not applied");
                }
            }
        });
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
            database: database.to_owned(),
            tx: TxState::Idle,
            dialect,
            described: HashMap::new(),
            prepared: HashMap::new(),
            cursors: Cursors::default(),
            copy_in: None,
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
        self.abandon_copy();
        self.before_statement();
        let (outcomes, error) = self.simple_query_inner(sql);
        let error = error.map(|error| self.explain(error));
        self.after_statement(error.is_none());
        (outcomes, error)
    }

    /// Runs one prepared statement with its parameters (PostgreSQL numbering).
    pub(crate) fn execute(&mut self, sql: &str, params: &RawParams, format: &Format) -> Result<Outcome, SqlError> {
        vfs::clear_store_error();
        defend::take_refusal();
        self.abandon_copy();
        self.before_statement();
        let result = self
            .execute_inner(sql, params, format)
            .map_err(|error| self.explain(error));
        self.after_statement(result.is_ok());
        result
    }

    /// Parameter types (PostgreSQL numbering) and result columns of a statement, without running it
    /// unless it is read-only and takes no parameters, when one row is read to type its expressions.
    pub(crate) fn describe(&mut self, sql: &str, client_types: &[Option<Type>]) -> Result<Described, SqlError> {
        vfs::clear_store_error();
        defend::take_refusal();
        self.before_statement();
        let result = self
            .describe_inner(sql, client_types)
            .map_err(|error| self.explain(error));
        self.after_statement(result.is_ok());
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
        self.after_statement(false);
        true
    }

    /// Opens the settings' transaction of a call made outside a transaction block (each such statement is
    /// its own transaction); inside a block the block's is open already.
    fn before_statement(&mut self) {
        self.dialect.state().update_settings(|settings| settings.begin());
    }

    /// Publishes what the connection enforces after each call: the transaction state and the timeouts. A
    /// call that leaves no transaction open ends the settings' transaction: committed if the call succeeded
    /// (`SET LOCAL`s end), rolled back if it failed (its `SET`s are undone).
    fn after_statement(&mut self, succeeded: bool) {
        let in_transaction = self.tx != TxState::Idle || !self.conn.is_autocommit();
        if !in_transaction {
            self.cursors.end_transaction(succeeded);
        }
        let state = self.dialect.state();
        let (statement_timeout_ms, idle_timeout_ms) = state.update_settings(|settings| {
            if !in_transaction {
                settings.end(if succeeded { TxEnd::Commit } else { TxEnd::Rollback });
            }
            (
                settings.ms(settings::STATEMENT_TIMEOUT),
                settings.ms(settings::IDLE_IN_TRANSACTION_TIMEOUT),
            )
        });
        let shared = &self.shared;
        shared.in_transaction.store(in_transaction, Ordering::SeqCst);
        shared
            .statement_timeout_ms
            .store(statement_timeout_ms, Ordering::SeqCst);
        shared
            .idle_in_transaction_timeout_ms
            .store(idle_timeout_ms, Ordering::SeqCst);
    }

    /// Whether the open transaction may not write (`BEGIN READ ONLY`, `SET TRANSACTION READ ONLY`,
    /// `default_transaction_read_only`).
    fn read_only(&self) -> bool {
        self.dialect
            .state()
            .read_settings(|settings| settings.is_on(settings::TRANSACTION_READ_ONLY))
    }

    /// The settings' side of a transaction statement that succeeded: `BEGIN`'s modes set the transaction's
    /// parameters; `COMMIT` and `ROLLBACK` end the settings' transaction and open the next statement's.
    fn after_transaction_statement(&mut self, kind: &pgcompat::Kind, was_failed: bool) {
        if matches!(kind, pgcompat::Kind::Commit | pgcompat::Kind::Rollback) {
            let committed = !was_failed && *kind == pgcompat::Kind::Commit;
            self.cursors.end_transaction(committed);
        }
        self.dialect.state().update_settings(|settings| match kind {
            pgcompat::Kind::Begin { modes } => {
                for (name, value) in modes {
                    if let Err(error) = settings.set(name, Some(value), Scope::Local) {
                        tracing::warn!(%error, name, "a transaction mode was not applied");
                    }
                }
            }
            pgcompat::Kind::Commit | pgcompat::Kind::Rollback => {
                let end = if was_failed || *kind == pgcompat::Kind::Rollback {
                    TxEnd::Rollback
                } else {
                    TxEnd::Commit
                };
                settings.end(end);
                settings.begin();
            }
            _ => {}
        });
    }

    /// `SET`, `SHOW` or `RESET` (see `settings`).
    fn run_setting(&mut self, sql: &str, format: &Format) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        let state = self.dialect.state().clone();
        let result = match settings::parse(sql)? {
            Command::Set { assignments, scope } => state
                .update_settings(|settings| {
                    assignments
                        .iter()
                        .try_for_each(|(name, value)| settings.set(name, value.as_deref(), scope))
                })
                .map(|()| Outcome::Command("SET".to_owned()))
                .map_err(SqlError::from),
            Command::Reset(name) => state
                .update_settings(|settings| settings.reset(name.as_deref()))
                .map(|()| Outcome::Command("RESET".to_owned()))
                .map_err(SqlError::from),
            Command::Show(name) => match state.read_settings(|settings| settings.show(&name)) {
                Ok((name, value)) => show_outcome(vec![name], vec![vec![value]], format),
                Err(error) => Err(SqlError::from(error)),
            },
            Command::ShowAll => {
                let rows = state.read_settings(|settings| {
                    settings
                        .rows()
                        .into_iter()
                        .map(|row| {
                            let description = row.guc.map_or("", |g| g.short_desc).to_owned();
                            vec![row.name, row.shown, description]
                        })
                        .collect()
                });
                let names = ["name", "setting", "description"].map(str::to_owned).to_vec();
                show_outcome(names, rows, format)
            }
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
        if exec::leading_words(sql, 1)
            .first()
            .is_some_and(|w| settings::is_setting_statement(w))
        {
            return match self.run_setting(sql, &Format::UnifiedText) {
                Ok(outcome) => (vec![outcome], None),
                Err(error) => (Vec::new(), Some(error)),
            };
        }
        let translated = match self.translate(sql) {
            Ok(translated) => translated,
            Err(error) => return (Vec::new(), Some(error)),
        };
        let list = match &*translated {
            Translated::Passthrough => return self.run_passthrough(sql),
            Translated::Statements(list) => list,
        };
        let mut outcomes = Vec::with_capacity(list.len());
        for translation in list {
            if self.shared.stopped().is_some() {
                // Stopped between two statements of the query: the rest is not run.
                self.tx = tx_after_error(&self.conn, self.tx);
                return (outcomes, Some(SqlError::new(QUERY_CANCELED, "")));
            }
            if self.copy_in.is_some() {
                // PostgreSQL would run the rest after the copy; the protocol handler cannot, so it is refused.
                self.abandon_copy();
                let error = SqlError::new(
                    FEATURE_NOT_SUPPORTED,
                    "COPY FROM STDIN must be the last statement of a query text",
                );
                return (Vec::new(), Some(error));
            }
            match self.run_translation(translation, &[], &Format::UnifiedText, None) {
                Ok(outcome) => outcomes.push(outcome),
                Err(error) => return (outcomes, Some(error)),
            }
        }
        (outcomes, None)
    }

    /// SQL the dialect layer does not parse, run as SQLite's own (each statement of the text in turn).
    fn run_passthrough(&mut self, sql: &str) -> (Vec<Outcome>, Option<SqlError>) {
        let mut outcomes = Vec::new();
        let sql = exec::passthrough_text(sql);
        let mut batch = Batch::new(&self.conn, &sql);
        let tz = self.dialect.state().time_zone();
        loop {
            if self.shared.stopped().is_some() {
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
            let kind = exec::kind_of(&stmt.expanded_sql().unwrap_or_default());
            if let Err(error) = check_read_only(self.read_only(), &stmt, &kind) {
                self.tx = tx_after_error(&self.conn, self.tx);
                return (outcomes, Some(error));
            }
            let typing = Typing {
                known: self.dialect.column_types(&stmt, None),
                hints: None,
                tz: &tz,
            };
            match exec::run(
                &self.conn,
                &mut self.tx,
                &mut stmt,
                &[],
                &Format::UnifiedText,
                &kind,
                &typing,
            ) {
                Ok(outcome) => outcomes.push(outcome),
                Err(error) => return (outcomes, Some(error)),
            }
        }
    }

    /// Translates a query text; in a failed transaction a translation error is 25P02 like any other.
    fn translate(&mut self, sql: &str) -> Result<Arc<Translated>, SqlError> {
        match self.dialect.translate(&self.conn, sql) {
            Ok(translated) => Ok(translated),
            Err(error) => {
                let error = match error {
                    _ if self.tx == TxState::Failed => aborted(),
                    pgcompat::TranslateError::Sql(error) => SqlError::from(error),
                    pgcompat::TranslateError::Sqlite(error) => SqlError::from(error),
                };
                self.tx = tx_after_error(&self.conn, self.tx);
                Err(error)
            }
        }
    }

    /// Runs one translated statement.
    fn run_translation(
        &mut self,
        translation: &Translation,
        params: &[Value],
        format: &Format,
        hints: Option<&[PgType]>,
    ) -> Result<Outcome, SqlError> {
        let kind = Kind::from(&translation.kind);
        if self.tx == TxState::Failed
            && matches!(
                translation.kind,
                pgcompat::Kind::Prepare { .. }
                    | pgcompat::Kind::Execute { .. }
                    | pgcompat::Kind::Deallocate(_)
                    | pgcompat::Kind::DiscardAll
                    | pgcompat::Kind::Declare { .. }
                    | pgcompat::Kind::Fetch { .. }
                    | pgcompat::Kind::Close(_)
                    | pgcompat::Kind::CopyFrom { .. }
                    | pgcompat::Kind::CopyTo { .. }
            )
        {
            return Err(aborted());
        }
        match &translation.kind {
            pgcompat::Kind::Prepare { name, statement, types } => {
                if self.prepared.contains_key(name) {
                    return self.fail(SqlError::new(
                        DUPLICATE_PREPARED_STATEMENT,
                        format!("prepared statement \"{name}\" already exists"),
                    ));
                }
                if self.prepared.len() >= PREPARED_STATEMENTS_MAX {
                    return self.fail(SqlError::new(
                        PROGRAM_LIMIT_EXCEEDED,
                        format!("more than {PREPARED_STATEMENTS_MAX} prepared statements; DEALLOCATE some"),
                    ));
                }
                self.prepared.insert(name.clone(), (statement.clone(), types.clone()));
                return Ok(Outcome::Command("PREPARE".to_owned()));
            }
            pgcompat::Kind::Execute { name, args } => return self.execute_prepared(name, args, format),
            pgcompat::Kind::Declare {
                name,
                query,
                scroll,
                hold,
            } => return self.declare_cursor(name, query, *scroll, *hold),
            pgcompat::Kind::Fetch {
                name,
                direction,
                move_only,
            } => return self.fetch_cursor(name, *direction, *move_only, format),
            pgcompat::Kind::CopyFrom {
                table,
                columns,
                options,
            } => {
                return self.start_copy_in(table, columns, options);
            }
            pgcompat::Kind::CopyTo { query, options } => return self.copy_out(query, options),
            pgcompat::Kind::Close(name) => {
                return match self.cursors.close(name.as_deref()) {
                    Ok(()) => Ok(Outcome::Command("CLOSE CURSOR".to_owned())),
                    Err(error) => self.fail(error),
                };
            }
            pgcompat::Kind::Deallocate(name) => {
                match name {
                    None => self.prepared.clear(),
                    Some(name) => {
                        if self.prepared.remove(name).is_none() {
                            return self.fail(SqlError::new(
                                INVALID_SQL_STATEMENT_NAME,
                                format!("prepared statement \"{name}\" does not exist"),
                            ));
                        }
                    }
                }
                return Ok(Outcome::Command("DEALLOCATE".to_owned()));
            }
            pgcompat::Kind::DiscardAll => {
                if !self.conn.is_autocommit() {
                    return self.fail(SqlError::new(
                        ACTIVE_SQL_TRANSACTION,
                        "DISCARD ALL cannot run inside a transaction block",
                    ));
                }
                self.dialect.state().update_settings(|settings| settings.reset(None))?;
                self.prepared.clear();
                self.described.clear();
                self.cursors.close(None)?;
                return Ok(Outcome::Command("DISCARD ALL".to_owned()));
            }
            _ => {}
        }
        if translation.steps.is_empty() {
            if self.tx == TxState::Failed {
                return Err(aborted());
            }
            return Ok(Outcome::Command(match kind {
                Kind::Other(tag) => tag,
                _ => String::new(),
            }));
        }
        if self.conn.is_autocommit() && self.tx != TxState::Failed {
            // now() is the time its transaction began: this statement's own, or the BEGIN's.
            self.dialect.state().start_transaction();
        }
        if translation.steps.len() > 1 {
            return self.run_steps(translation, &kind);
        }
        let tz = self.dialect.state().time_zone();
        let mut stmt = match self.conn.prepare(&translation.steps[0]) {
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
        if self.tx != TxState::Failed {
            if let Err(error) = check_read_only(self.read_only(), &stmt, &kind) {
                self.tx = tx_after_error(&self.conn, self.tx);
                return Err(error);
            }
        }
        let typing = Typing {
            known: self.dialect.column_types(&stmt, Some(translation)),
            hints,
            tz: &tz,
        };
        let was_failed = self.tx == TxState::Failed;
        let outcome = exec::run(&self.conn, &mut self.tx, &mut stmt, params, format, &kind, &typing);
        drop(stmt);
        if outcome.is_ok() {
            self.after_transaction_statement(&translation.kind, was_failed);
        }
        outcome
    }

    /// `DECLARE name CURSOR FOR query`: the query runs now, in the transaction's snapshot, and the cursor
    /// keeps its rows (see `cursor`).
    fn declare_cursor(
        &mut self,
        name: &str,
        query: &str,
        scroll: Option<bool>,
        hold: bool,
    ) -> Result<Outcome, SqlError> {
        if !hold && self.tx == TxState::Idle && self.conn.is_autocommit() {
            return self.fail(SqlError::new(
                NO_ACTIVE_SQL_TRANSACTION,
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        let translated = self.translate(query)?;
        let translation = match &*translated {
            Translated::Statements(list) => match list.as_slice() {
                [t] if t.steps.len() == 1 && t.kind == pgcompat::Kind::Select => t.clone(),
                _ => {
                    return self.fail(SqlError::new(
                        FEATURE_NOT_SUPPORTED,
                        "a cursor's query must be one SELECT",
                    ))
                }
            },
            Translated::Passthrough => {
                return self.fail(SqlError::new(SYNTAX_ERROR, "a cursor's query must be one SELECT"));
            }
        };
        if self.conn.is_autocommit() {
            self.dialect.state().start_transaction();
        }
        let tz = self.dialect.state().time_zone();
        let read = self
            .conn
            .prepare(&translation.steps[0])
            .map_err(SqlError::from)
            .and_then(|mut stmt| {
                let typing = Typing {
                    known: self.dialect.column_types(&stmt, Some(&translation)),
                    hints: None,
                    tz: &tz,
                };
                exec::query_values(&mut stmt, &typing)
            });
        let declared =
            read.and_then(|(columns, rows)| self.cursors.declare(name, Cursor::new(columns, rows, scroll, hold)));
        match declared {
            Ok(()) => Ok(Outcome::Command("DECLARE CURSOR".to_owned())),
            Err(error) => self.fail(error),
        }
    }

    /// `FETCH` or `MOVE` on an open cursor.
    fn fetch_cursor(
        &mut self,
        name: &str,
        direction: pgcompat::translate::cursor::CursorMove,
        move_only: bool,
        format: &Format,
    ) -> Result<Outcome, SqlError> {
        let tz = self.dialect.state().time_zone();
        let fetched = self.cursors.get(name).and_then(|cursor| {
            let rows = cursor.step(name, direction)?;
            Ok((cursor.columns.clone(), rows))
        });
        let (columns, rows) = match fetched {
            Ok(fetched) => fetched,
            Err(error) => return self.fail(error),
        };
        if move_only {
            return Ok(Outcome::Command(format!("MOVE {}", rows.len())));
        }
        match exec::rows_outcome(columns, &rows, format, &Kind::Other("FETCH".to_owned()), &tz) {
            Ok(Outcome::Rows { fields, rows, .. }) => Ok(Outcome::Rows {
                fields,
                rows,
                tag: "FETCH".to_owned(),
            }),
            Ok(other) => Ok(other),
            Err(error) => self.fail(error),
        }
    }

    /// An error that fails the open transaction, as any statement's error does.
    fn fail<T>(&mut self, error: SqlError) -> Result<T, SqlError> {
        self.tx = tx_after_error(&self.conn, self.tx);
        Err(error)
    }

    /// `EXECUTE name (args)`: the arguments evaluated (as a `SELECT` of them), made the declared parameter
    /// types, and the prepared statement run with them.
    fn execute_prepared(&mut self, name: &str, args: &[String], format: &Format) -> Result<Outcome, SqlError> {
        let Some((sql, types)) = self.prepared.get(name).cloned() else {
            return self.fail(SqlError::new(
                INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{name}\" does not exist"),
            ));
        };
        let tz = self.dialect.state().time_zone();
        let mut values = Vec::with_capacity(args.len());
        if !args.is_empty() {
            let select = format!("SELECT {}", args.join(", "));
            let translated = self.translate(&select)?;
            let Translated::Statements(list) = &*translated else {
                return self.fail(SqlError::new(SYNTAX_ERROR, "EXECUTE arguments are not expressions"));
            };
            let [evaluate] = list.as_slice() else {
                return self.fail(SqlError::new(SYNTAX_ERROR, "EXECUTE arguments are not expressions"));
            };
            let row = self.conn.prepare(&evaluate.steps[0]).and_then(|mut stmt| {
                let width = stmt.column_count();
                stmt.query_row([], |row| {
                    (0..width)
                        .map(|i| row.get::<_, Value>(i))
                        .collect::<Result<Vec<_>, _>>()
                })
            });
            match row {
                Ok(row) => values = row,
                Err(error) => return self.fail(SqlError::from(error)),
            }
        }
        if values.len() != types.len() && !types.is_empty() {
            return self.fail(SqlError::new(
                SYNTAX_ERROR,
                format!(
                    "wrong number of parameters for prepared statement \"{name}\": expected {}, got {}",
                    types.len(),
                    values.len()
                ),
            ));
        }
        for (value, ty) in values.iter_mut().zip(&types) {
            match pgcompat::value::coerce(*ty, std::mem::replace(value, Value::Null), &tz) {
                Ok(coerced) => *value = coerced,
                Err(error) => return self.fail(SqlError::from(error)),
            }
        }
        let translated = self.translate(&sql)?;
        let Translated::Statements(list) = &*translated else {
            return self.fail(SqlError::new(
                FEATURE_NOT_SUPPORTED,
                "EXECUTE of a statement in SQLite's own dialect",
            ));
        };
        let [translation] = list.as_slice() else {
            return self.fail(SqlError::new(SYNTAX_ERROR, "a prepared statement holds one statement"));
        };
        self.run_translation(translation, &values, format, None)
    }

    /// A statement the layer made of several SQLite statements (DDL that also records types, TRUNCATE of
    /// several tables): all of them or none, in one savepoint.
    fn run_steps(&mut self, translation: &Translation, kind: &Kind) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        let tag = match kind {
            Kind::Other(tag) => tag.clone(),
            _ => String::new(),
        };
        if self.read_only() {
            self.tx = tx_after_error(&self.conn, self.tx);
            return Err(read_only_error(&tag));
        }
        let outer = self.tx;
        let foreign_keys_off = translation.foreign_keys_off;
        if foreign_keys_off && !self.conn.is_autocommit() {
            return self.fail(SqlError::new(
                FEATURE_NOT_SUPPORTED,
                "this ALTER TABLE rebuilds a table other tables reference, which Cambium can do only outside a \
                 transaction block",
            ));
        }
        if foreign_keys_off {
            // Outside a transaction (checked above), where SQLite lets foreign keys be switched.
            self.conn.execute_batch("PRAGMA foreign_keys = OFF")?;
        }
        let result = self.conn.execute_batch("SAVEPOINT pgcompat_statement").and_then(|()| {
            for step in &translation.steps {
                self.conn.execute_batch(step)?;
            }
            self.conn.execute_batch("RELEASE pgcompat_statement")
        });
        if foreign_keys_off {
            if let Err(error) = self.conn.execute_batch("PRAGMA foreign_keys = ON") {
                tracing::warn!(%error, "turning foreign keys back on failed");
            }
        }
        match result {
            Ok(()) => {
                self.tx = if self.conn.is_autocommit() {
                    TxState::Idle
                } else {
                    TxState::InBlock
                };
                Ok(Outcome::Command(tag))
            }
            Err(error) => {
                if !self.conn.is_autocommit() {
                    let undo = self
                        .conn
                        .execute_batch("ROLLBACK TO pgcompat_statement; RELEASE pgcompat_statement");
                    if let Err(undo) = undo {
                        tracing::warn!(%undo, "undoing a failed statement's savepoint failed");
                    }
                }
                self.tx = if outer == TxState::Idle && self.conn.is_autocommit() {
                    TxState::Idle
                } else {
                    TxState::Failed
                };
                Err(SqlError::from(error))
            }
        }
    }

    fn execute_inner(&mut self, sql: &str, params: &RawParams, format: &Format) -> Result<Outcome, SqlError> {
        if exec::leading_words(sql, 1)
            .first()
            .is_some_and(|w| settings::is_setting_statement(w))
        {
            return self.run_setting(sql, format);
        }
        let hints = self.described.get(sql).cloned();
        let translated = self.translate(sql)?;
        let tz = self.dialect.state().time_zone();
        let translation = match &*translated {
            Translated::Passthrough => return self.execute_passthrough(sql, params, format, hints.as_deref()),
            Translated::Statements(list) => match list.as_slice() {
                [] => return Ok(Outcome::Command(String::new())),
                [translation] => translation,
                _ => {
                    return Err(SqlError::new(
                        SYNTAX_ERROR,
                        "cannot insert multiple commands into a prepared statement",
                    ))
                }
            },
        };
        let values = match params.decode(&translation.params, &tz) {
            Ok(values) => values,
            Err(error) => {
                let error = if self.tx == TxState::Failed { aborted() } else { error };
                self.tx = tx_after_error(&self.conn, self.tx);
                return Err(error);
            }
        };
        self.run_translation(translation, &values, format, hints.as_deref())
    }

    fn execute_passthrough(
        &mut self,
        sql: &str,
        params: &RawParams,
        format: &Format,
        hints: Option<&[PgType]>,
    ) -> Result<Outcome, SqlError> {
        let tz = self.dialect.state().time_zone();
        let values = params.decode(&[], &tz)?;
        let mut stmt = match self.conn.prepare(&exec::passthrough_text(sql)) {
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
        let kind = exec::kind_of(&stmt.expanded_sql().unwrap_or_default());
        if self.tx != TxState::Failed {
            if let Err(error) = check_read_only(self.read_only(), &stmt, &kind) {
                self.tx = tx_after_error(&self.conn, self.tx);
                return Err(error);
            }
        }
        let typing = Typing {
            known: self.dialect.column_types(&stmt, None),
            hints,
            tz: &tz,
        };
        exec::run(&self.conn, &mut self.tx, &mut stmt, &values, format, &kind, &typing)
    }

    fn describe_inner(&mut self, sql: &str, client_types: &[Option<Type>]) -> Result<Described, SqlError> {
        if let Some(word) = exec::leading_words(sql, 1)
            .first()
            .filter(|w| settings::is_setting_statement(w))
        {
            let columns = match (word.as_str(), settings::parse(sql)?) {
                ("SHOW", Command::Show(name)) => {
                    let (name, _) = self.dialect.state().read_settings(|settings| settings.show(&name))?;
                    vec![(name, PgType::TEXT)]
                }
                ("SHOW", Command::ShowAll) => ["name", "setting", "description"]
                    .map(|name| (name.to_owned(), PgType::TEXT))
                    .to_vec(),
                _ => Vec::new(),
            };
            return Ok(Described {
                params: Vec::new(),
                columns,
            });
        }
        let translated = self.translate(sql)?;
        let (step, translation) = match &*translated {
            Translated::Passthrough => (exec::passthrough_text(sql).into_owned(), None),
            Translated::Statements(list) => match list.as_slice() {
                [translation] if !translation.steps.is_empty() => {
                    (translation.steps[translation.primary].clone(), Some(translation))
                }
                [Translation {
                    kind:
                        pgcompat::Kind::Fetch {
                            name, move_only: false, ..
                        },
                    ..
                }] => {
                    let columns = self.cursors.get(name)?.columns.clone();
                    return Ok(Described {
                        params: Vec::new(),
                        columns,
                    });
                }
                [_] | [] => {
                    return Ok(Described {
                        params: Vec::new(),
                        columns: Vec::new(),
                    })
                }
                _ => {
                    return Err(SqlError::new(
                        SYNTAX_ERROR,
                        "cannot insert multiple commands into a prepared statement",
                    ))
                }
            },
        };
        let learned: &[Option<PgType>] = translation.map_or(&[], |t| t.params.as_slice());
        let mut stmt = self.conn.prepare(&step)?;
        let count = exec::parameter_numbers(&stmt)?.into_iter().max().unwrap_or(0);
        let raw = RawParams {
            values: Vec::new(),
            formats: Format::UnifiedText,
            client_types: client_types.to_vec(),
        };
        let params = (0..count.max(client_types.len()))
            .map(
                |index| match client_types.get(index).cloned().flatten().filter(|t| t.oid() != 0) {
                    Some(ty) => ty,
                    None => types::wire_type(raw.type_of(index, learned).unwrap_or(types::PARAMETER_TYPE_DEFAULT)),
                },
            )
            .collect();
        let known = self.dialect.column_types(&stmt, translation);
        let declared = exec::declared_types(&stmt);
        let unknown = known.iter().zip(&declared).any(|(k, d)| k.is_none() && d.is_none());
        let probe = if unknown && stmt.readonly() && count == 0 {
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
        let columns: Vec<(String, PgType)> = exec::names(&stmt)
            .into_iter()
            .zip(known.into_iter().zip(declared))
            .enumerate()
            .map(|(i, (name, (known, declared)))| {
                let ty = known
                    .or(declared)
                    .unwrap_or_else(|| types::type_of_values(probe.get(i).into_iter()));
                (name, ty)
            })
            .collect();
        if self.described.len() >= DESCRIBED_STATEMENTS_MAX {
            self.described.clear();
        }
        self.described
            .insert(sql.to_owned(), columns.iter().map(|(_, ty)| *ty).collect());
        Ok(Described { params, columns })
    }
}

/// Refuses a statement that writes inside a `READ ONLY` transaction (25006).
fn check_read_only(read_only: bool, stmt: &rusqlite::Statement<'_>, kind: &Kind) -> Result<(), SqlError> {
    if !read_only || stmt.readonly() {
        return Ok(());
    }
    let tag = match kind {
        Kind::Insert => "INSERT".to_owned(),
        Kind::Update => "UPDATE".to_owned(),
        Kind::Delete => "DELETE".to_owned(),
        Kind::Other(tag) => tag.clone(),
        _ => return Ok(()),
    };
    Err(read_only_error(&tag))
}

fn read_only_error(tag: &str) -> SqlError {
    SqlError::new(
        READ_ONLY_SQL_TRANSACTION,
        format!("cannot execute {tag} in a read-only transaction"),
    )
}

/// The zone a `TimeZone` setting names (`UTC`, `Europe/Paris`), if known.
/// The rows of a `SHOW`, all text, tagged `SHOW`.
fn show_outcome(names: Vec<String>, rows: Vec<Vec<String>>, format: &Format) -> Result<Outcome, SqlError> {
    let rows: Vec<Vec<Value>> = rows
        .into_iter()
        .map(|row| row.into_iter().map(Value::Text).collect())
        .collect();
    let columns = names.into_iter().map(|name| (name, PgType::TEXT)).collect();
    let outcome = exec::rows_outcome(
        columns,
        &rows,
        format,
        &Kind::Other("SHOW".to_owned()),
        &jiff::tz::TimeZone::UTC,
    )?;
    Ok(match outcome {
        Outcome::Rows { fields, rows, .. } => Outcome::Rows {
            fields,
            rows,
            tag: "SHOW".to_owned(),
        },
        other => other,
    })
}

/// The settings a client's startup packet asks for: its parameters other than who and where, and each
/// `-c name=value` (or `--name=value`) of its `options`.
fn startup_settings(startup: &[(String, String)]) -> Vec<(String, String)> {
    let mut settings = Vec::new();
    for (name, value) in startup {
        match name.as_str() {
            "user" | "database" | "replication" => {}
            "options" => {
                let mut words = value.split_whitespace();
                while let Some(word) = words.next() {
                    let assignment = match word {
                        "-c" => words.next(),
                        _ => word.strip_prefix("-c").or_else(|| word.strip_prefix("--")),
                    };
                    if let Some((name, value)) = assignment.and_then(|a| a.split_once('=')) {
                        settings.push((name.replace('-', "_"), value.to_owned()));
                    }
                }
            }
            _ => settings.push((name.clone(), value.clone())),
        }
    }
    settings
}

/// A process id for `pg_backend_pid()`: distinct per session of this process.
fn next_backend_pid() -> i32 {
    static NEXT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1000);
    NEXT.fetch_add(1, Ordering::Relaxed)
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
        let mut session = Session::new(conn, name, "cambium", SessionDefaults::default(), &[]).expect("session");
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
        let read = session
            .execute("SELECT x FROM t", &RawParams::none(), &Format::UnifiedText)
            .err();
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
        let error = session
            .execute("SELECT x FROM t", &RawParams::none(), &Format::UnifiedText)
            .err();
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
}
