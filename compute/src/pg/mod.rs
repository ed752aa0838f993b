//! The PostgreSQL wire protocol over SQLite sessions, through `pgwire`.
//!
//! Each client connection gets its own handlers and, once its password checks out, its own SQLite
//! connection from a [`SessionFactory`] (picked by user and database name). SQLite calls block, so they
//! run on tokio's blocking pool; the session's lock is only ever taken there, never across an await.
//!
//! Limits: results are built in memory, bounded in rows and bytes (SQLSTATE 54000 beyond); queries
//! longer than [`QUERY_BYTES_MAX`] are refused; every message is checked and bounded before pgwire decodes
//! it (`frames`).
//!
//! **Stopping work.** A running statement stops (SQLite's interrupt, SQLSTATE 57014) on a cancel request (the
//! key sent at startup, pgwire's `ConnectionManager`: pgwire answers 57014 and drops the handler's future,
//! whose drop interrupts the statement), when the session's `statement_timeout` passes, or when
//! the client's connection closes (checked every [`CLIENT_CHECK_INTERVAL`] on a duplicate of the socket while
//! a statement runs). A session idle inside a transaction for its `idle_in_transaction_session_timeout` has
//! the transaction rolled back (so its snapshot and any write lock go) and the connection ended with FATAL
//! 25P03, as PostgreSQL does. [`ServeConfig`] holds the server's defaults; sessions change theirs with `SET`.

mod cursor;
mod defend;
mod error;
mod exec;
mod frames;
pub mod scram;
mod session;
pub mod tls;
mod types;

pub use self::scram::ScramVerifier;
pub use self::session::SessionDefaults;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{stream, Sink, SinkExt, StreamExt};
use parking_lot::Mutex;
use pgwire::api::auth::mechanism::AuthMechanismFactory;
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::sasl::SaslMechanisms;
use pgwire::api::auth::{
    protocol_negotiation, save_startup_parameters_to_metadata, AuthDriver, AuthOutcome, AuthSource,
    DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeStatementResponse, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{NoopQueryParser, StoredStatement};
use pgwire::api::{ClientInfo, ConnectionHandle, ConnectionManager, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult, SEVERITY_FATAL};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{negotiate_tls, process_error, process_message};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::codec::{Framed, FramedParts};

use self::error::{
    SqlError, IDLE_IN_TRANSACTION_SESSION_TIMEOUT, INVALID_CATALOG_NAME, PROGRAM_LIMIT_EXCEEDED, TOO_MANY_CONNECTIONS,
};
use self::frames::Guarded;
use self::session::{Described, Outcome, Session, SessionShared, StopReason};

/// Longest query text accepted, in bytes.
pub const QUERY_BYTES_MAX: usize = 16 << 20;
/// Most client connections served at once; more are closed on accept.
pub const CONNECTIONS_MAX: usize = 1024;
/// How long a client has to finish its startup and authentication.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a running statement's client is checked for having gone.
pub const CLIENT_CHECK_INTERVAL: Duration = Duration::from_millis(200);
/// How often a stopped statement that has not ended yet is interrupted again (an interrupt that came before
/// SQLite started the statement is forgotten when it starts).
const REINTERRUPT_INTERVAL: Duration = Duration::from_millis(50);

/// The server's settings for every connection.
#[derive(Clone, Debug, Default)]
pub struct ServeConfig {
    /// Defaults of each new session's timeouts.
    pub session_defaults: SessionDefaults,
    /// TLS for clients that ask (`sslmode=require`); `None` answers "no TLS" to an SSLRequest.
    pub tls: Option<tls::ServerTls>,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The database name is not one this factory serves.
    #[error("invalid database name {0:?}")]
    InvalidDatabaseName(String),
    /// The database has as many sessions as it may (FATAL 53300).
    #[error("too many connections for database {database:?}: {open} open, at most {max}")]
    TooManyConnections {
        /// The name the client gave.
        database: String,
        /// Sessions open on it now.
        open: usize,
        /// Its limit.
        max: usize,
    },
    /// SQLite could not open the database.
    #[error("cannot open database: {0}")]
    Open(#[from] rusqlite::Error),
}

/// Gives each authenticated client its SQLite connection, and knows the users' passwords.
pub trait SessionFactory: Send + Sync + 'static {
    /// The SCRAM-SHA-256 verifier of the password `user` must present to open `database` (the name the client
    /// gave, time-travel suffix and all), or `None` if there is no such user there.
    fn verifier(&self, user: &str, database: &str) -> Option<Arc<ScramVerifier>>;

    /// Opens the connection for `user` on the database named `database`. Blocks; called off the
    /// async executor.
    fn open(&self, user: &str, database: &str) -> Result<rusqlite::Connection, SessionError>;

    /// Admits one more session on `database` before it is opened, or refuses it
    /// ([`SessionError::TooManyConnections`]); the returned guard is held for the session's life and lets
    /// the place go when dropped. The default admits everyone.
    fn admit(&self, database: &str) -> Result<Option<Admission>, SessionError> {
        let _ = database;
        Ok(None)
    }
}

/// A session's place among its database's sessions ([`SessionFactory::admit`]): let go when dropped.
pub struct Admission {
    /// Dropped with the admission: its drop gives the place back.
    _release: Box<dyn Send + Sync>,
}

impl Admission {
    /// A place whose release is `release`'s drop.
    pub fn new(release: impl Send + Sync + 'static) -> Admission {
        Admission {
            _release: Box::new(release),
        }
    }
}

impl Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission")
    }
}

/// A [`SessionFactory`] over plain files: database `name` is `<dir>/<name>.sqlite`, created on first use.
/// Users and passwords are a fixed map (kept as verifiers). Until the VFS-backed factory exists, this makes the
/// server usable and testable.
#[derive(Debug, Clone)]
pub struct FileSessionFactory {
    dir: PathBuf,
    verifiers: HashMap<String, Arc<ScramVerifier>>,
}

impl FileSessionFactory {
    /// A factory serving the databases in `dir` to the users in `passwords` (user → password).
    pub fn new(dir: impl Into<PathBuf>, passwords: HashMap<String, String>) -> FileSessionFactory {
        FileSessionFactory {
            dir: dir.into(),
            verifiers: scram::verifiers_of(&passwords),
        }
    }
}

/// Whether `name` is a database name we accept: `[A-Za-z0-9_]+`, so it can never leave the directory.
fn is_valid_database_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl SessionFactory for FileSessionFactory {
    fn verifier(&self, user: &str, _database: &str) -> Option<Arc<ScramVerifier>> {
        self.verifiers.get(user).cloned()
    }

    fn open(&self, _user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
        if !is_valid_database_name(database) {
            return Err(SessionError::InvalidDatabaseName(database.to_owned()));
        }
        let conn = rusqlite::Connection::open(self.dir.join(format!("{database}.sqlite")))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(conn)
    }
}

/// A [`SessionFactory`] over the databases registered with the compute's VFS (`compute::vfs`): the database
/// name a client gives selects a registered database; any other name is refused (it never falls through to a
/// local file). Users and passwords are a fixed map (kept as verifiers).
#[derive(Debug, Clone)]
pub struct VfsSessionFactory {
    verifiers: HashMap<String, Arc<ScramVerifier>>,
}

impl VfsSessionFactory {
    /// A factory serving registered databases to the users in `passwords` (user → password).
    pub fn new(passwords: HashMap<String, String>) -> VfsSessionFactory {
        VfsSessionFactory {
            verifiers: scram::verifiers_of(&passwords),
        }
    }
}

impl SessionFactory for VfsSessionFactory {
    fn verifier(&self, user: &str, _database: &str) -> Option<Arc<ScramVerifier>> {
        self.verifiers.get(user).cloned()
    }

    fn open(&self, _user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
        if !crate::vfs::is_registered(database) {
            return Err(SessionError::InvalidDatabaseName(database.to_owned()));
        }
        Ok(crate::vfs::open_connection(database)?)
    }
}

/// Serves PostgreSQL clients on `listener` until `shutdown` completes, then closes every connection, with the
/// default [`ServeConfig`].
pub async fn serve(listener: TcpListener, sessions: Arc<dyn SessionFactory>, shutdown: impl Future<Output = ()>) {
    serve_with(listener, sessions, ServeConfig::default(), shutdown).await;
}

/// Serves PostgreSQL clients on `listener` with `config` until `shutdown` completes, then closes every
/// connection.
pub async fn serve_with(
    listener: TcpListener,
    sessions: Arc<dyn SessionFactory>,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let manager = Arc::new(ConnectionManager::new());
    let cancel = Arc::new(DefaultCancelHandler::new(manager.clone()));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    if connections.len() >= CONNECTIONS_MAX {
                        tracing::warn!(%peer, "refusing connection: {CONNECTIONS_MAX} already open");
                        refuse(socket, format!("too many connections: {CONNECTIONS_MAX} already open"));
                        continue;
                    }
                    if let Err(exhausted) = crate::fds::check_room(FDS_PER_CONNECTION) {
                        tracing::warn!(%peer, %exhausted, "refusing connection");
                        refuse(socket, exhausted.to_string());
                        continue;
                    }
                    let (socket, watch) = match with_watch(socket) {
                        Ok(pair) => pair,
                        Err(error) => {
                            tracing::warn!(%peer, %error, "refusing connection: cannot watch its socket");
                            continue;
                        }
                    };
                    let tls = config.tls.as_ref().map(tls::ServerTls::acceptor);
                    let handlers = ConnectionHandlers::new(sessions.clone(), config.clone(), manager.clone(), cancel.clone(), watch);
                    connections.spawn(async move {
                        if let Err(error) = serve_connection(socket, peer, tls, handlers).await {
                            tracing::debug!(%peer, %error, "connection ended");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    // Out of file descriptors and the like: back off rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    connections.shutdown().await;
}

/// Descriptors one connection takes: its socket and the duplicate that watches it.
const FDS_PER_CONNECTION: u64 = 2;

/// Tells a client it cannot be served (FATAL 53300 too_many_connections, as PostgreSQL does past
/// `max_connections`) and closes its socket, in the background and bounded in time.
fn refuse(mut socket: TcpStream, message: String) {
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let frame = fatal_frame(TOO_MANY_CONNECTIONS, &message);
        let _ = tokio::time::timeout(Duration::from_secs(1), socket.write_all(&frame)).await;
    });
}

/// An ErrorResponse of severity FATAL, as bytes on the wire.
fn fatal_frame(code: &str, message: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (tag, value) in [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', code), (b'M', message)] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut frame = vec![b'E'];
    let length = u32::try_from(fields.len() + 4).unwrap_or(u32::MAX);
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&fields);
    frame
}

/// The socket, and a duplicate of it to check the client is still there while a statement runs.
fn with_watch(socket: TcpStream) -> std::io::Result<(TcpStream, Arc<std::net::TcpStream>)> {
    // `into_std` leaves it non-blocking, and the duplicate shares that, so peeking never blocks.
    let socket = socket.into_std()?;
    let watch = socket.try_clone()?;
    Ok((TcpStream::from_std(socket)?, Arc::new(watch)))
}

/// Whether the client's side of `watch` is closed (end of stream or an error); pending bytes mean it is there.
fn client_gone(watch: &std::net::TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match watch.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => !matches!(
            error.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
        ),
    }
}

/// One client connection: TLS negotiation (when configured), then every message checked (`frames::Guarded`) and
/// handed to pgwire, as pgwire's own `process_socket` does.
async fn serve_connection(
    socket: TcpStream,
    peer: std::net::SocketAddr,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    handlers: ConnectionHandlers,
) -> std::io::Result<()> {
    let startup_deadline = tokio::time::sleep(STARTUP_TIMEOUT);
    tokio::pin!(startup_deadline);
    let negotiated = tokio::select! {
        () = &mut startup_deadline => return Ok(()),
        negotiated = negotiate_tls::<String>(socket, tls) => negotiated?,
    };
    let Some(framed) = negotiated else {
        return Ok(());
    };
    let old = framed.into_parts();
    let mut parts = FramedParts::new(Guarded::new(old.io, &old.read_buf), old.codec);
    parts.write_buf = old.write_buf;
    let mut socket = Framed::from_parts(parts);
    socket.set_state(PgWireConnectionState::AwaitingStartup);

    let startup = handlers.startup.clone();
    let query = handlers.query.clone();
    let copy = handlers.query.clone();
    let cancel = handlers.cancel.clone();
    loop {
        let awaiting_startup = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingStartup | PgWireConnectionState::AuthenticationInProgress
        );
        let message = if awaiting_startup {
            tokio::select! {
                () = &mut startup_deadline => None,
                message = socket.next() => message,
            }
        } else {
            socket.next().await
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(error)) => {
                if let Some(refused) = socket.get_ref().failure() {
                    frames::log_refused(peer, refused);
                }
                return Err(std::io::Error::other(error.to_string()));
            }
            None => return Ok(()),
        };
        if matches!(message, PgWireFrontendMessage::Terminate(_)) {
            return Ok(());
        }
        let is_extended_query = match socket.state() {
            PgWireConnectionState::CopyInProgress(is_extended_query) => is_extended_query,
            _ => message.is_extended_query(),
        };
        let is_cancel_request = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        if let Err(error) = process_message(
            message,
            &mut socket,
            startup.clone(),
            query.clone(),
            query.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await
        {
            let is_fatal = error.is_fatal();
            process_error(&mut socket, error, is_extended_query).await?;
            if is_fatal {
                return Ok(());
            }
        }
        if is_cancel_request {
            return Ok(());
        }
    }
}

/// The session of one connection: empty until authentication opens it.
type SessionSlot = Arc<Mutex<Option<Session>>>;

/// What the handlers of one connection share.
struct Connection {
    slot: SessionSlot,
    /// The session's shared half, set when it opens (read without the slot's lock while a statement runs).
    shared: std::sync::OnceLock<Arc<SessionShared>>,
    /// A duplicate of the client's socket: checked for the client having gone, and used to end an idle
    /// transaction's connection.
    watch: Arc<std::net::TcpStream>,
    /// Counts calls into the session: the idle-transaction timer fires only if none came since it was set.
    activity: Arc<AtomicU64>,
    config: ServeConfig,
}

impl Connection {
    /// Runs `f` on the session on the blocking pool, stopping it as the module doc says: on a cancel request,
    /// at the session's statement timeout, or when the client goes. Afterwards, if the session sits in a
    /// transaction, sets its idle-transaction timer.
    async fn run<T>(&self, f: impl FnOnce(&mut Session) -> T + Send + 'static) -> PgWireResult<T>
    where
        T: Send + 'static,
    {
        self.run_cancellable(None, f).await
    }

    /// [`Connection::run`], also stopped when `cancel` fires: for the calls pgwire does not watch for cancel
    /// requests itself (Describe, which may read a row to type a statement's columns).
    async fn run_cancellable<T>(
        &self,
        cancel: Option<futures::channel::oneshot::Receiver<()>>,
        f: impl FnOnce(&mut Session) -> T + Send + 'static,
    ) -> PgWireResult<T>
    where
        T: Send + 'static,
    {
        let shared = self.shared.get().cloned().ok_or(PgWireError::NotReadyForQuery)?;
        self.activity.fetch_add(1, Ordering::SeqCst);
        shared.begin_query();
        let slot = self.slot.clone();
        let done = Arc::new(AtomicBool::new(false));
        let mut task = {
            let done = done.clone();
            tokio::task::spawn_blocking(move || {
                let mut guard = slot.lock();
                let value = guard.as_mut().map(f);
                done.store(true, Ordering::SeqCst);
                value
            })
        };
        // pgwire drops this future on a cancel request: then the statement is stopped (see the module doc).
        let cancel_on_drop = CancelOnDrop {
            shared: shared.clone(),
            done,
        };
        let timeout_ms = shared.statement_timeout_ms();
        let timeout = tokio::time::sleep(Duration::from_millis(timeout_ms));
        tokio::pin!(timeout);
        let mut stopped: Option<StopReason> = None;
        let mut cancel = cancel;
        // The first check one period in: a statement that ends sooner costs no system call.
        let mut check = tokio::time::interval_at(
            tokio::time::Instant::now() + CLIENT_CHECK_INTERVAL,
            CLIENT_CHECK_INTERVAL,
        );
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reinterrupt =
            tokio::time::interval_at(tokio::time::Instant::now() + REINTERRUPT_INTERVAL, REINTERRUPT_INTERVAL);
        let result = loop {
            tokio::select! {
                joined = &mut task => break joined,
                fired = async { cancel.as_mut().expect("guarded by the branch condition").await }, if cancel.is_some() => {
                    cancel = None;
                    // An error is the sender replaced or dropped: no cancel.
                    if fired.is_ok() && stopped.is_none() {
                        stopped = Some(StopReason::Cancel);
                        shared.stop(StopReason::Cancel);
                    }
                }
                () = &mut timeout, if timeout_ms > 0 && stopped.is_none() => {
                    stopped = Some(StopReason::Timeout);
                    shared.stop(StopReason::Timeout);
                }
                _ = check.tick() => {
                    if stopped.is_none() && client_gone(&self.watch) {
                        stopped = Some(StopReason::ClientGone);
                        shared.stop(StopReason::ClientGone);
                    }
                }
                _ = reinterrupt.tick(), if stopped.is_some() => {
                    if let Some(reason) = stopped {
                        shared.stop(reason);
                    }
                }
            }
        };
        drop(cancel_on_drop);
        self.activity.fetch_add(1, Ordering::SeqCst);
        let value = result
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?
            .ok_or(PgWireError::NotReadyForQuery)?;
        self.arm_idle_timer(&shared);
        Ok(value)
    }

    /// If the session is in a transaction and has an idle timeout, ends the transaction and the connection
    /// once that long passes with no call into the session.
    fn arm_idle_timer(&self, shared: &SessionShared) {
        let idle_ms = shared.idle_in_transaction_timeout_ms();
        if idle_ms == 0 || !shared.in_transaction() {
            return;
        }
        let epoch = self.activity.load(Ordering::SeqCst);
        let (activity, slot, watch) = (self.activity.clone(), self.slot.clone(), self.watch.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(idle_ms)).await;
            if activity.load(Ordering::SeqCst) != epoch {
                return;
            }
            let _ended = tokio::task::spawn_blocking(move || {
                let mut guard = slot.lock();
                // Checked again under the session's lock, which every call takes: no statement slips in.
                if activity.load(Ordering::SeqCst) != epoch {
                    return;
                }
                let Some(session) = guard.as_mut() else {
                    return;
                };
                if session.abort_idle_transaction() {
                    // Nothing else uses the session from now on: the connection is told and closed.
                    *guard = None;
                    end_connection(
                        &watch,
                        IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
                        "terminating connection due to idle-in-transaction timeout",
                    );
                }
            })
            .await;
        });
    }
}

/// Stops the session's statement if the future running it is dropped before the statement finished (a
/// cancel request), and keeps interrupting it until it has.
struct CancelOnDrop {
    shared: Arc<SessionShared>,
    done: Arc<AtomicBool>,
}

/// How long a cancelled statement is interrupted again before it is left to finish by itself (a statement
/// waiting on the store is bounded by the store's own deadlines).
const CANCEL_FOLLOW_UP: Duration = Duration::from_secs(60);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.done.load(Ordering::SeqCst) {
            return;
        }
        self.shared.stop(StopReason::Cancel);
        let (shared, done) = (self.shared.clone(), self.done.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let deadline = tokio::time::Instant::now() + CANCEL_FOLLOW_UP;
                while !done.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(REINTERRUPT_INTERVAL).await;
                    shared.stop(StopReason::Cancel);
                }
            });
        }
    }
}

/// Sends a FATAL error to an idle client on its socket and shuts the socket down, so the connection's loop
/// sees the end and drops it.
fn end_connection(watch: &std::net::TcpStream, code: &str, message: &str) {
    use std::io::Write;
    let frame = fatal_frame(code, message);
    let mut socket = watch;
    if let Err(error) = socket.write_all(&frame) {
        tracing::debug!(%error, "telling an idle client its connection ends");
    }
    let _ = watch.shutdown(std::net::Shutdown::Both);
}

fn check_query_size(query: &str) -> Result<(), SqlError> {
    if query.len() > QUERY_BYTES_MAX {
        return Err(SqlError::new(
            PROGRAM_LIMIT_EXCEEDED,
            format!("query of {} bytes exceeds {QUERY_BYTES_MAX}", query.len()),
        ));
    }
    Ok(())
}

/// Gives pgwire's SCRAM exchange the verifier of the user and database a client names.
struct ConnectionAuth {
    sessions: Arc<dyn SessionFactory>,
}

impl Debug for ConnectionAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionAuth").finish_non_exhaustive()
    }
}

fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        SEVERITY_FATAL.to_owned(),
        code.to_owned(),
        message,
    )))
}

/// The user and database a client named (PostgreSQL's default database is the user's name).
fn login_names(login: &LoginInfo) -> (String, String) {
    let user = login.user().unwrap_or_default().to_owned();
    let database = login.database().unwrap_or(&user).to_owned();
    (user, database)
}

/// A verifier no password matches, for names that have none: the exchange runs to the end and fails like a
/// wrong password, so a client cannot tell which users or databases exist (as PostgreSQL does).
static DOOMED: std::sync::LazyLock<Option<Arc<scram::ScramVerifier>>> = std::sync::LazyLock::new(|| {
    let mut password = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut password).ok()?;
    let password: String = password.iter().map(|b| format!("{b:02x}")).collect();
    scram::ScramVerifier::from_password(&password, scram::ITERATIONS_DEFAULT)
        .ok()
        .map(Arc::new)
});

#[async_trait]
impl AuthSource for ConnectionAuth {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        // Only SCRAM is offered; no password is ever kept to hand out.
        Err(PgWireError::InvalidPassword(
            login.user().unwrap_or_default().to_owned(),
        ))
    }

    async fn get_scram_secret(
        &self,
        login: &LoginInfo,
    ) -> PgWireResult<(pgwire::api::auth::sasl::scram::ScramSecret, Option<()>)> {
        let (user, database) = login_names(login);
        let verifier = self.sessions.verifier(&user, &database).or_else(|| DOOMED.clone());
        let verifier = verifier.ok_or_else(|| PgWireError::InvalidPassword(user.clone()))?;
        Ok((verifier.secret(), None))
    }
}

/// Startup: SCRAM-SHA-256, then the session opens before the client is told it is in, so a database that
/// cannot be opened is a FATAL error of the connection attempt, as in PostgreSQL.
struct Startup {
    driver: AuthDriver<DefaultServerParameterProvider>,
    mechanisms: SaslMechanisms,
    sessions: Arc<dyn SessionFactory>,
    connection: Arc<Connection>,
}

impl Startup {
    /// Opens the session of the authenticated client.
    async fn open_session<C: ClientInfo>(&self, client: &C) -> PgWireResult<()> {
        let (user, database) = login_names(&LoginInfo::from_client_info(client));
        let sessions = self.sessions.clone();
        let defaults = self.connection.config.session_defaults;
        let mut startup: Vec<(String, String)> = client
            .metadata()
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        startup.sort();
        let opened = tokio::task::spawn_blocking(move || {
            let admission = sessions.admit(&database)?;
            let conn = sessions.open(&user, &database)?;
            let session = Session::new(conn, &database, &user, defaults, &startup)?;
            Ok::<_, SessionError>(session.with_admission(admission))
        })
        .await
        .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        match opened {
            Ok(session) => {
                let _first = self.connection.shared.set(session.shared());
                *self.connection.slot.lock() = Some(session);
                Ok(())
            }
            Err(error @ SessionError::TooManyConnections { .. }) => Err(fatal(TOO_MANY_CONNECTIONS, error.to_string())),
            Err(error) => Err(fatal(INVALID_CATALOG_NAME, error.to_string())),
        }
    }

    async fn finish<C>(&self, client: &mut C, outcome: AuthOutcome) -> PgWireResult<()>
    where
        C: ClientInfo + futures::Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as futures::Sink<PgWireBackendMessage>>::Error>,
    {
        match outcome {
            AuthOutcome::InProgress => Ok(()),
            AuthOutcome::Authenticated { final_message, .. } => {
                self.open_session(client).await?;
                self.driver.complete_authentication(client, final_message).await
            }
        }
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + futures::Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as futures::Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                let outcome = self
                    .driver
                    .begin_authentication(client, self.mechanisms.create())
                    .await?;
                self.finish(client, outcome).await
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                let outcome = self.driver.advance_authentication(client, message).await?;
                self.finish(client, outcome).await
            }
            _ => Ok(()),
        }
    }
}

/// Simple and extended query handling over the connection's session.
struct QueryHandler {
    connection: Arc<Connection>,
    parser: Arc<NoopQueryParser>,
}

fn outcome_response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Rows { fields, rows, tag } => {
            let mut response = QueryResponse::new(fields, stream::iter(rows.into_iter().map(Ok)));
            response.set_command_tag(&tag);
            Response::Query(response)
        }
        Outcome::Command(tag) => Response::Execution(Tag::new(&tag)),
        Outcome::TxStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        Outcome::TxEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        Outcome::CopyIn { columns } => Response::CopyIn(CopyResponse::new(0, columns, stream::empty())),
        Outcome::CopyOut { columns, data } => Response::CopyOut(CopyResponse::new(
            0,
            columns,
            stream::iter(data.into_iter().map(|chunk| Ok(CopyData::new(chunk)))),
        )),
    }
}

#[async_trait]
impl CopyHandler for QueryHandler {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let data = copy_data.data;
        self.connection.run(move |s| s.copy_data(&data)).await?;
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let rows = self
            .connection
            .run(|s| s.copy_done())
            .await?
            .map_err(SqlError::into_pgwire)?;
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        client
            .send(PgWireBackendMessage::CommandComplete(
                Tag::new("COPY").with_rows(rows).into(),
            ))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let message = fail.message;
        match self.connection.run(move |s| s.copy_fail(&message)).await {
            Ok(error) => error.into_pgwire(),
            Err(error) => error,
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for QueryHandler {
    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        check_query_size(query).map_err(SqlError::into_pgwire)?;
        let query = query.to_owned();
        let (outcomes, error) = self.connection.run(move |s| s.simple_query(&query)).await?;
        let mut responses: Vec<Response> = outcomes.into_iter().map(outcome_response).collect();
        if let Some(error) = error {
            // An error response in the list (not an `Err`) keeps the results before it.
            responses.push(Response::Error(Box::new(error.into_info())));
        }
        Ok(responses)
    }
}

#[async_trait]
impl ExtendedQueryHandler for QueryHandler {
    type Statement = String;
    type QueryParser = NoopQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let sql = portal.statement.statement.clone();
        check_query_size(&sql).map_err(SqlError::into_pgwire)?;
        let params = types::RawParams {
            values: portal.parameters.clone(),
            formats: portal.parameter_format.clone(),
            client_types: portal.statement.parameter_types.clone(),
        };
        let format = portal.result_column_format.clone();
        let outcome = self.connection.run(move |s| s.execute(&sql, &params, &format)).await?;
        outcome.map(outcome_response).map_err(SqlError::into_pgwire)
    }

    async fn do_describe_statement<C>(
        &self,
        client: &mut C,
        stmt: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let described = self.describe(client, stmt).await?;
        let fields = types::fields(&described.columns, &Format::UnifiedText);
        Ok(DescribeStatementResponse::new(described.params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let described = self.describe(client, &portal.statement).await?;
        let fields = types::fields(&described.columns, &portal.result_column_format);
        Ok(DescribePortalResponse::new(fields))
    }
}

impl QueryHandler {
    async fn describe<C: ClientInfo>(&self, client: &C, stmt: &StoredStatement<String>) -> PgWireResult<Described> {
        let sql = stmt.statement.clone();
        check_query_size(&sql).map_err(SqlError::into_pgwire)?;
        let client_types = stmt.parameter_types.clone();
        let cancel = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        self.connection
            .run_cancellable(cancel, move |s| s.describe(&sql, &client_types))
            .await?
            .map_err(SqlError::into_pgwire)
    }
}

/// The pgwire handlers of one connection, sharing its session.
struct ConnectionHandlers {
    startup: Arc<Startup>,
    query: Arc<QueryHandler>,
    cancel: Arc<DefaultCancelHandler>,
}

impl ConnectionHandlers {
    fn new(
        sessions: Arc<dyn SessionFactory>,
        config: ServeConfig,
        manager: Arc<ConnectionManager>,
        cancel: Arc<DefaultCancelHandler>,
        watch: Arc<std::net::TcpStream>,
    ) -> ConnectionHandlers {
        let connection = Arc::new(Connection {
            slot: Arc::new(Mutex::new(None)),
            shared: std::sync::OnceLock::new(),
            watch,
            activity: Arc::new(AtomicU64::new(0)),
            config,
        });
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = format!("15.0 (Cambium, SQLite {})", rusqlite::version());
        let auth = ConnectionAuth {
            sessions: sessions.clone(),
        };
        let mut scram = ScramAuth::new(Arc::new(auth));
        scram.set_iterations(scram::ITERATIONS_DEFAULT);
        ConnectionHandlers {
            startup: Arc::new(Startup {
                driver: AuthDriver::new(parameters).with_connection_manager(manager),
                mechanisms: SaslMechanisms::new(vec![Arc::new(scram)]),
                sessions,
                connection: connection.clone(),
            }),
            query: Arc::new(QueryHandler {
                connection,
                parser: Arc::new(NoopQueryParser::new()),
            }),
            cancel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_stay_in_the_directory() {
        assert!(is_valid_database_name("db_1"));
        assert!(!is_valid_database_name(""));
        assert!(!is_valid_database_name("../etc"));
        assert!(!is_valid_database_name("a.b"));
        assert!(!is_valid_database_name("a b"));
    }
}
