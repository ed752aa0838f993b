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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use pgcompat::{Dialect, PgType, Translated, Translation};
use pgwire::api::portal::Format;
use pgwire::api::results::FieldInfo;
use pgwire::api::Type;
use pgwire::messages::data::DataRow;
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::Value;
use rusqlite::{Batch, Connection};

mod captured;
mod copy;
mod cursors;
mod describe;
mod explain;
mod implicit;
mod parameters;
mod passthrough;
mod prepared;
mod shared;
mod steps;

pub use shared::SessionDefaults;
pub(crate) use shared::{SessionShared, StopReason};

use super::cursor::{Cursor, Cursors};
use super::defend;
use super::error::{
    SqlError, ACTIVE_SQL_TRANSACTION, ADMIN_SHUTDOWN, CONNECTION_FAILURE, DUPLICATE_PREPARED_STATEMENT,
    FEATURE_NOT_SUPPORTED, INSUFFICIENT_PRIVILEGE, INTERNAL_ERROR, INVALID_SQL_STATEMENT_NAME, IO_ERROR,
    LOCK_NOT_AVAILABLE, NO_ACTIVE_SQL_TRANSACTION, PROGRAM_LIMIT_EXCEEDED, QUERY_CANCELED, READ_ONLY_SQL_TRANSACTION,
    SERIALIZATION_FAILURE, SYNTAX_ERROR,
};
use super::exec::{self, aborted, tx_after_error, Kind, TxState, Typing};
use super::types::{self, RawParams};
use crate::page_store::PageStoreError;
use crate::vfs::{self, BusyReason};
use implicit::Implicit;
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
    /// `COPY … FROM STDIN` began: the client now sends the rows (`columns` per row, in the binary format
    /// when `binary`).
    CopyIn { columns: usize, binary: bool },
    /// `COPY … TO STDOUT`: the rows, formatted, one chunk per row (binary: the end marker is not in `data`).
    CopyOut {
        columns: usize,
        binary: bool,
        data: Vec<bytes::Bytes>,
    },
}

/// A statement's parameter types (PostgreSQL numbering) and result columns.
#[derive(Clone)]
pub(crate) struct Described {
    pub(crate) params: Vec<Type>,
    pub(crate) columns: exec::Columns,
}

/// A client's session: a SQLite connection with PostgreSQL transaction semantics on top.
pub(crate) struct Session {
    conn: Connection,
    shared: Arc<SessionShared>,
    /// The database name the client connected with (for error messages).
    database: String,
    tx: TxState,
    /// A transaction block no statement has run in since its `BEGIN`: its first write may start it over
    /// as a writer (see [`Session::start_block_as_writer`]).
    block_fresh: bool,
    /// The PostgreSQL dialect: translations, the type catalog, what the session's SQL functions read.
    dialect: Dialect,
    /// Column types given to the client when it described a statement, so execution agrees.
    described: HashMap<String, Vec<PgType>>,
    /// What describing a text answered, with the translation it was made from (at most
    /// [`DESCRIBED_STATEMENTS_MAX`]): a driver of the extended protocol describes its prepared statement at
    /// every execution (pgbench `-M prepared`: Bind, Describe, Execute), which prepared it in SQLite and
    /// typed its columns each time, more than the execution itself.
    describe_cache: HashMap<String, describe::Cached>,
    /// SQL-level prepared statements (`PREPARE name AS …`).
    prepared: HashMap<String, prepared::PreparedSql>,
    /// Whether prepared statements or cursors were published to the dialect (`pg_prepared_statements`,
    /// `pg_cursors`) and may need to be taken back.
    objects_published: bool,
    /// Open cursors (`DECLARE … CURSOR`).
    cursors: Cursors,
    /// The `COPY … FROM STDIN` under way, between its statement and the client's `CopyDone`.
    copy_in: Option<copy::CopyIn>,
    /// The store's closure or failure, once an I/O error showed it: it lasts.
    store_gone: Option<PageStoreError>,
    /// The session's place among its database's sessions, let go with it.
    _admission: Option<super::Admission>,
    /// NOTICE and WARNING messages of the call under way, sent before its results (at most [`NOTICES_MAX`]).
    notices: Vec<Notice>,
}

/// A NOTICE or WARNING for the client, as PostgreSQL sends one beside a statement's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Notice {
    /// `NOTICE` or `WARNING`.
    pub(crate) severity: &'static str,
    /// Its SQLSTATE.
    pub(crate) code: &'static str,
    /// Its message.
    pub(crate) message: String,
}

/// Most notices one call keeps for its client; the rest are dropped (a text of many `DROP … IF EXISTS`).
const NOTICES_MAX: usize = 64;

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
            for (name, value) in parameters::startup_settings(startup) {
                // A client's startup choice PostgreSQL would refuse is left at its default (PostgreSQL would
                // refuse the connection; a driver's optional hint is not worth that here).
                if let Err(error) = settings.set_initial(&name, &value) {
                    tracing::debug!(%error, name, "a startup parameter was not applied");
                }
            }
        });
        let shared = Arc::new(SessionShared {
            interrupt: conn.get_interrupt_handle(),
            stop: AtomicU64::new(0),
            running: AtomicU64::new(0),
            epochs: AtomicU64::new(0),
            gate: parking_lot::Mutex::new(()),
            statement_timeout_ms: AtomicU64::new(defaults.statement_timeout_ms),
            idle_in_transaction_timeout_ms: AtomicU64::new(defaults.idle_in_transaction_timeout_ms),
            in_transaction: AtomicBool::new(false),
            listener: dialect.state().notifier().listener().clone(),
            notified: tokio::sync::Notify::new(),
        });
        let woken = Arc::downgrade(&shared);
        shared.listener.set_waker(Arc::new(move || {
            if let Some(shared) = woken.upgrade() {
                shared.notified.notify_one();
            }
        }));
        // Waits inside SQL functions (advisory locks) end when the statement is stopped.
        let weak = Arc::downgrade(&shared);
        dialect
            .state()
            .set_interrupt_check(Arc::new(move || weak.upgrade().is_some_and(|s| s.stopped().is_some())));
        Ok(Session {
            conn,
            shared,
            database: database.to_owned(),
            tx: TxState::Idle,
            block_fresh: false,
            dialect,
            described: HashMap::new(),
            describe_cache: HashMap::new(),
            prepared: HashMap::new(),
            objects_published: false,
            cursors: Cursors::default(),
            copy_in: None,
            store_gone: None,
            _admission: None,
            notices: Vec::new(),
        })
    }

    /// The session, taking its catalog snapshots from `shared` (and leaving its own there) when given: see
    /// [`pgcompat::Dialect::share_catalog`].
    pub(crate) fn with_shared_catalog(mut self, shared: Option<Arc<pgcompat::catalog::SharedCatalog>>) -> Session {
        if let Some(shared) = shared {
            self.dialect.share_catalog(shared);
        }
        self
    }

    /// The session, holding `admission` for its life.
    pub(crate) fn with_admission(mut self, admission: Option<super::Admission>) -> Session {
        self._admission = admission;
        self
    }

    /// The session's connection is a TCP one between these addresses (`inet_server_port()`,
    /// `inet_client_port()`).
    pub(crate) fn with_addresses(self, server: std::net::SocketAddr, client: std::net::SocketAddr) -> Session {
        self.dialect.state().set_connection_addresses(server, client);
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

    fn simple_query_inner(&mut self, sql: &str) -> (Vec<Outcome>, Option<SqlError>) {
        if exec::leading_words(sql, 1)
            .first()
            .is_some_and(|w| settings::is_setting_statement(w))
        {
            if let Some(pieces) = pgcompat::translate::split_statements(sql).filter(|pieces| pieces.len() > 1) {
                return self.run_pieces(&pieces);
            }
            return match self.run_setting(sql, &Format::UnifiedText) {
                Ok(outcome) => (vec![outcome], None),
                Err(error) => (Vec::new(), Some(error)),
            };
        }
        if let Err(error) = self.check_lock_in_block(sql) {
            return (Vec::new(), Some(error));
        }
        let translated = match self.translate(sql) {
            Ok(translated) => translated,
            Err(error) => {
                // A statement may read what one before it in the text makes (`CREATE TABLE t …; ALTER TABLE t
                // …`), which translating them all first cannot see: each one translated when its turn comes, as
                // PostgreSQL analyzes each in turn. A real error then comes at its statement, the ones before it
                // rolled back with the text's implicit block.
                return match pgcompat::translate::split_statements(sql) {
                    Some(pieces) if pieces.len() > 1 => self.run_pieces(&pieces),
                    _ => (Vec::new(), Some(error)),
                };
            }
        };
        let list = match &*translated {
            Translated::Passthrough => {
                // Several statements that do not parse as a whole: each one translated and run by itself, so
                // that one the parser does not know leaves the others' translation alone.
                return match pgcompat::translate::split_statements(sql) {
                    Some(pieces) if pieces.len() > 1 => self.run_pieces(&pieces),
                    _ => self.run_passthrough(sql),
                };
            }
            Translated::Statements(list) => list,
        };
        let mut implicit = Implicit::for_statements(list);
        let mut outcomes = Vec::with_capacity(list.len());
        for translation in list {
            if let Err((error, keep)) = self.before_text_statement(&mut implicit) {
                return (if keep { outcomes } else { Vec::new() }, Some(error));
            }
            if let Err(error) = self.run_in_text(translation, &mut implicit, &mut outcomes) {
                return (outcomes, Some(error));
            }
        }
        if let Err(error) = self.commit_implicit(&mut implicit) {
            return (outcomes, Some(error));
        }
        (outcomes, None)
    }

    /// The statements of a text that did not parse as a whole, each translated when its turn comes (so it sees
    /// what the ones before it made) and run in the text's implicit block; one the parser does not know runs
    /// as SQLite's own.
    fn run_pieces(&mut self, pieces: &[&str]) -> (Vec<Outcome>, Option<SqlError>) {
        let mut implicit = Implicit::for_pieces(pieces);
        let mut outcomes = Vec::with_capacity(pieces.len());
        for piece in pieces {
            if let Err((error, keep)) = self.before_text_statement(&mut implicit) {
                return (if keep { outcomes } else { Vec::new() }, Some(error));
            }
            if exec::leading_words(piece, 1)
                .first()
                .is_some_and(|w| settings::is_setting_statement(w))
            {
                let set = self
                    .enter_implicit(&mut implicit, &pgcompat::Kind::Other(String::new()))
                    .and_then(|_| self.run_setting(piece, &Format::UnifiedText));
                match set {
                    Ok(outcome) => outcomes.push(outcome),
                    Err(error) => {
                        self.abandon_implicit(&mut implicit);
                        return (outcomes, Some(error));
                    }
                }
                continue;
            }
            let translated = match self.translate(piece) {
                Ok(translated) => translated,
                Err(error) => {
                    self.abandon_implicit(&mut implicit);
                    return (outcomes, Some(error));
                }
            };
            let list = match &*translated {
                Translated::Passthrough => {
                    let opened = self.enter_implicit(&mut implicit, &pgcompat::Kind::Other(String::new()));
                    let (more, error) = match opened {
                        Ok(_) => self.run_passthrough(piece),
                        Err(error) => (Vec::new(), Some(error)),
                    };
                    outcomes.extend(more);
                    if let Some(error) = error {
                        self.abandon_implicit(&mut implicit);
                        return (outcomes, Some(error));
                    }
                    self.note_implicit_end(&mut implicit);
                    continue;
                }
                Translated::Statements(list) => list,
            };
            for translation in list {
                if implicit::runs_outside_a_block(translation) {
                    if let Err(error) = self.leave_implicit(&mut implicit) {
                        return (outcomes, Some(error));
                    }
                }
                if let Err(error) = self.run_in_text(translation, &mut implicit, &mut outcomes) {
                    return (outcomes, Some(error));
                }
            }
        }
        if let Err(error) = self.commit_implicit(&mut implicit) {
            return (outcomes, Some(error));
        }
        (outcomes, None)
    }

    /// Between two statements of a text: a stop ends the text (the rest is not run, the implicit block is
    /// rolled back), and so does a `COPY FROM STDIN` that is not the text's last statement.
    /// The error says whether the outcomes so far are still sent (not those of a copy that will not run).
    fn before_text_statement(&mut self, implicit: &mut Implicit) -> Result<(), (SqlError, bool)> {
        if self.shared.stopped().is_some() {
            self.abandon_implicit(implicit);
            self.tx = tx_after_error(&self.conn, self.tx);
            return Err((SqlError::new(QUERY_CANCELED, ""), true));
        }
        if self.copy_in.is_some() {
            // PostgreSQL would run the rest after the copy; the protocol handler cannot, so it is refused.
            self.abandon_copy();
            self.abandon_implicit(implicit);
            let error = SqlError::new(
                FEATURE_NOT_SUPPORTED,
                "COPY FROM STDIN must be the last statement of a query text",
            );
            return Err((error, false));
        }
        Ok(())
    }

    /// Translates a query text; in a failed transaction a translation error is 25P02 like any other.
    fn translate(&mut self, sql: &str) -> Result<Arc<Translated>, SqlError> {
        self.dialect.set_commit_version(vfs::latest_commit(&self.conn));
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

    /// Runs one translated statement; its notices (an `IF EXISTS` that found nothing) go to the client
    /// with its outcome.
    fn run_translation(
        &mut self,
        translation: &Translation,
        params: &[Value],
        param_types: &[Option<PgType>],
        format: &Format,
        hints: Option<&[PgType]>,
    ) -> Result<Outcome, SqlError> {
        // PostgreSQL warns of a BEGIN inside a block and of a COMMIT or ROLLBACK outside one (also inside a
        // text's implicit block, where the session is not in a block either), and goes on.
        let warning = match translation.kind {
            pgcompat::Kind::Begin { .. } if self.tx == TxState::InBlock => {
                Some(("25001", "there is already a transaction in progress"))
            }
            pgcompat::Kind::Commit | pgcompat::Kind::Rollback if self.tx == TxState::Idle => {
                Some(("25P01", "there is no transaction in progress"))
            }
            _ => None,
        };
        let outcome = self.run_translation_inner(translation, params, param_types, format, hints)?;
        if let Some((code, message)) = warning {
            self.notice("WARNING", code, message.to_owned());
        }
        for message in &translation.notices {
            self.notice("NOTICE", "00000", message.clone());
        }
        Ok(outcome)
    }

    /// Keeps a notice for the client of the call under way (past [`NOTICES_MAX`] it is dropped).
    pub(crate) fn notice(&mut self, severity: &'static str, code: &'static str, message: String) {
        if self.notices.len() < NOTICES_MAX {
            self.notices.push(Notice {
                severity,
                code,
                message,
            });
        }
    }

    /// The notices of the last call that `client_min_messages` lets through (`notice` by default; `warning`
    /// keeps only warnings; `error` and above none), emptied.
    pub(crate) fn take_notices(&mut self) -> Vec<Notice> {
        if self.notices.is_empty() {
            return Vec::new();
        }
        let level = self
            .dialect
            .state()
            .read_settings(|settings| settings.raw("client_min_messages").map(str::to_ascii_lowercase))
            .unwrap_or_else(|| "notice".to_owned());
        let (notices, warnings) = match level.as_str() {
            "error" => (false, false),
            "warning" => (false, true),
            _ => (true, true),
        };
        std::mem::take(&mut self.notices)
            .into_iter()
            .filter(|n| if n.severity == "WARNING" { warnings } else { notices })
            .collect()
    }

    fn run_translation_inner(
        &mut self,
        translation: &Translation,
        params: &[Value],
        param_types: &[Option<PgType>],
        format: &Format,
        hints: Option<&[PgType]>,
    ) -> Result<Outcome, SqlError> {
        if let pgcompat::Kind::ExplainAnalyze { plan, inner } = &translation.kind {
            return self.explain_analyze(plan, inner, params, param_types, format);
        }
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
                    | pgcompat::Kind::Listen(_)
                    | pgcompat::Kind::Unlisten(_)
                    | pgcompat::Kind::Notify { .. }
            )
        {
            return Err(aborted());
        }
        match &translation.kind {
            pgcompat::Kind::Prepare {
                name,
                statement,
                types,
                source,
            } => {
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
                let listed = self.listed_parameter_types(statement, types);
                let prepared = prepared::PreparedSql::new(statement, types, source, listed);
                self.prepared.insert(name.clone(), prepared);
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
            pgcompat::Kind::Listen(channel) => {
                return match self.dialect.state().notifier().listen(channel) {
                    Ok(()) => Ok(Outcome::Command("LISTEN".to_owned())),
                    Err(error) => self.fail(SqlError::from(error)),
                };
            }
            pgcompat::Kind::Unlisten(channel) => {
                self.dialect.state().notifier().unlisten(channel.as_deref());
                return Ok(Outcome::Command("UNLISTEN".to_owned()));
            }
            pgcompat::Kind::Notify { channel, payload } => {
                return match self.dialect.state().notifier().notify(channel, payload) {
                    Ok(()) => Ok(Outcome::Command("NOTIFY".to_owned())),
                    Err(error) => self.fail(SqlError::from(error)),
                };
            }
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
            pgcompat::Kind::Vacuum => {
                if self.tx == TxState::Failed {
                    return Err(aborted());
                }
                if !self.conn.is_autocommit() {
                    return self.fail(SqlError::new(
                        ACTIVE_SQL_TRANSACTION,
                        "VACUUM cannot run inside a transaction block",
                    ));
                }
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
                self.describe_cache.clear();
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
        self.sync_block();
        self.publish_session_objects();
        // What lasts one statement (an upsert's marks for its RETURNING's `xmax`) starts afresh.
        self.dialect.state().start_statement();
        let fresh = std::mem::take(&mut self.block_fresh);
        if fresh && is_write(translation) {
            self.start_block_as_writer(translation)?;
        }
        if !translation.captures.is_empty() {
            return self.run_captured(translation, params, format, hints, &kind);
        }
        if translation.steps.len() > 1 {
            return self.run_steps(translation, &kind);
        }
        let style = self.dialect.state().output_style();
        // A text filled from a shape's template, with no parameters of the client's: its literals bound, so the
        // text SQLite compiles is the shape's (`Translation::bound`).
        let bound_values: Vec<Value>;
        let (step, params) = match translation.bound.as_ref().filter(|_| params.is_empty()) {
            Some(bound) => {
                bound_values = bound.values.iter().map(|&value| Value::Integer(value)).collect();
                (&bound.step, bound_values.as_slice())
            }
            None => (&translation.steps[0], params),
        };
        // From the connection's statement cache: a text run before (a prepared statement's every execution,
        // `BEGIN`, `COMMIT`) is not compiled again. SQLite recompiles a cached statement whose schema changed.
        let mut stmt = match self.conn.prepare_cached(step) {
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
        let mut known = self.dialect.column_types(&stmt, Some(translation));
        type_param_columns(&mut known, translation, param_types);
        let typing = Typing {
            known,
            hints,
            style: &style,
            origins: self.dialect.column_origins(&stmt, Some(translation)),
        };
        let was_failed = self.tx == TxState::Failed;
        if kind == Kind::Commit && self.tx == TxState::InBlock && !self.conn.is_autocommit() {
            drop(stmt);
            self.check_deferred_constraints()?;
            stmt = self.conn.prepare_cached(step)?;
        }
        let outcome = exec::run(&self.conn, &mut self.tx, &mut stmt, params, format, &kind, &typing);
        drop(stmt);
        if outcome.is_ok() {
            self.after_transaction_statement(&translation.kind, was_failed);
            self.block_fresh = kind == Kind::Begin && self.tx == TxState::InBlock;
        }
        outcome
    }

    /// `EXPLAIN ANALYZE`: runs the statement (its rows counted, not sent), then answers the plan's lines with
    /// the rows and the time.
    fn explain_analyze(
        &mut self,
        plan: &[String],
        inner: &Translation,
        params: &[Value],
        param_types: &[Option<PgType>],
        format: &Format,
    ) -> Result<Outcome, SqlError> {
        let started = std::time::Instant::now();
        let outcome = self.run_translation(inner, params, param_types, &Format::UnifiedText, None)?;
        let elapsed = started.elapsed();
        let rows = match &outcome {
            Outcome::Rows { rows, .. } => rows.len() as u64,
            // `INSERT 0 3`, `UPDATE 3`, `DELETE 3`: the count is the tag's last word.
            Outcome::Command(tag) => tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0),
            _ => 0,
        };
        let lines = pgcompat::translate::analyzed_plan(plan, rows, elapsed);
        let rows: Vec<Vec<Value>> = lines.into_iter().map(|line| vec![Value::Text(line)]).collect();
        let outcome = exec::rows_outcome(
            vec![exec::Column::computed("QUERY PLAN", PgType::TEXT)],
            &rows,
            format,
            &Kind::Other("EXPLAIN".to_owned()),
            &self.dialect.state().output_style(),
        )?;
        Ok(match outcome {
            Outcome::Rows { fields, rows, .. } => Outcome::Rows {
                fields,
                rows,
                tag: "EXPLAIN".to_owned(),
            },
            other => other,
        })
    }

    /// The first write of a transaction block in which nothing ran yet: the block's SQLite transaction
    /// started over as `BEGIN IMMEDIATE`, which waits its turn for the writer's lock (`vfs::busy_handler`)
    /// with a snapshot taken when it gets it. Without this, the reads the dialect made since `BEGIN` (its
    /// catalog) hold a snapshot that a busy writer's commit makes stale, and SQLite refuses a read
    /// transaction's upgrade at once instead of waiting: under pgbench's eight clients most transactions
    /// failed. Nothing the client could see is lost by starting over: no statement ran in the block.
    fn start_block_as_writer(&mut self, translation: &Translation) -> Result<(), SqlError> {
        if self.tx != TxState::InBlock || self.conn.is_autocommit() {
            return Ok(());
        }
        // The catalog views the statement's translation made in this transaction go with the rollback.
        let restarted = self
            .conn
            .execute_batch("ROLLBACK")
            .and_then(|()| self.conn.execute_batch("BEGIN IMMEDIATE"))
            .and_then(|()| match translation.reads_catalog() {
                true => pgcompat::pg_catalog::ensure(&self.conn),
                false => Ok(()),
            });
        match restarted {
            Ok(()) => Ok(()),
            Err(error) => {
                let error = SqlError::from(error);
                self.fail(error)
            }
        }
    }

    /// `LOCK` outside a transaction block is 25P01, before anything else about it is checked (PostgreSQL's
    /// order: a missing table there is still 25P01).
    fn check_lock_in_block(&self, sql: &str) -> Result<(), SqlError> {
        let is_lock = exec::leading_words(sql, 1).first().is_some_and(|w| w == "LOCK");
        // A text of several statements is an implicit block, where LOCK may run.
        let alone = || pgcompat::translate::split_statements(sql).is_none_or(|statements| statements.len() < 2);
        if is_lock && self.tx == TxState::Idle && self.conn.is_autocommit() && alone() {
            return Err(SqlError::new(
                NO_ACTIVE_SQL_TRANSACTION,
                "LOCK TABLE can only be used in transaction blocks",
            ));
        }
        Ok(())
    }

    /// An error that fails the open transaction, as any statement's error does.
    fn fail<T>(&mut self, error: SqlError) -> Result<T, SqlError> {
        self.tx = tx_after_error(&self.conn, self.tx);
        Err(error)
    }

    fn execute_inner(&mut self, sql: &str, params: &RawParams, format: &Format) -> Result<Outcome, SqlError> {
        if exec::leading_words(sql, 1)
            .first()
            .is_some_and(|w| settings::is_setting_statement(w))
        {
            return self.run_setting(sql, format);
        }
        self.check_lock_in_block(sql)?;
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
        let param_types: Vec<Option<PgType>> = (0..params.values.len())
            .map(|index| params.type_of(index, &translation.params))
            .collect();
        self.run_translation(translation, &values, &param_types, format, hints.as_deref())
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

/// A process id for `pg_backend_pid()`: distinct per session of this process.
fn next_backend_pid() -> i32 {
    static NEXT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1000);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Types the result columns that are a bare parameter (`SELECT $1`) as PostgreSQL does: the parameter's type
/// (given by the client, else learned from its use), text when it has none. A column the layer typed keeps
/// its type.
pub(super) fn type_param_columns(
    known: &mut [Option<PgType>],
    translation: &Translation,
    param_types: &[Option<PgType>],
) {
    for &(column, param) in &translation.param_columns {
        if let Some(slot) = known.get_mut(column).filter(|slot| slot.is_none()) {
            *slot = Some(param_types.get(param).copied().flatten().unwrap_or(PgType::TEXT));
        }
    }
}

/// Whether a statement writes: an INSERT, UPDATE or DELETE, DDL made of several steps, or a LOCK that keeps
/// other writers out.
fn is_write(translation: &Translation) -> bool {
    matches!(
        translation.kind,
        pgcompat::Kind::Insert
            | pgcompat::Kind::Update
            | pgcompat::Kind::Delete
            | pgcompat::Kind::Lock { writers_out: true }
    ) || translation.steps.len() > 1
        || !translation.captures.is_empty()
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
