//! The PostgreSQL wire protocol over SQLite sessions, through `pgwire`.
//!
//! Each client connection gets its own handlers and, once its password checks out, its own SQLite
//! connection from a [`SessionFactory`] (picked by user and database name). Each connection is served on a
//! thread of its own with a single-threaded tokio runtime of its own ([`serve_on_own_thread`]): its socket,
//! pgwire's handling and its session's SQLite calls (which block) all run there, one after the other, as a
//! PostgreSQL backend process does; the session's lock is only ever taken there, never across an await.
//!
//! Limits: results are built in memory, bounded in rows and bytes (SQLSTATE 54000 beyond); queries
//! longer than [`QUERY_BYTES_MAX`] are refused; every message is checked and bounded before pgwire decodes
//! it (`frames`).
//!
//! **Stopping work.** A running statement stops (SQLite's interrupt, SQLSTATE 57014) on a cancel request (the
//! key sent at startup names the session: `cancel`), when the session's `statement_timeout` passes, or when
//! the client's connection closes (checked every [`CLIENT_CHECK_INTERVAL`] on a duplicate of the socket while
//! a statement runs): the connection's thread is busy running it, so one thread watches every running call
//! (`watchdog`). A session idle inside a transaction for its `idle_in_transaction_session_timeout` has
//! the transaction rolled back (so its snapshot and any write lock go) and the connection ended with FATAL
//! 25P03, as PostgreSQL does. [`ServeConfig`] holds the server's defaults; sessions change theirs with `SET`.

mod cancel;
mod connection;
mod cursor;
mod defend;
mod error;
mod exec;
mod frames;
mod handlers;
pub mod keepalive;
pub mod scram;
mod session;
mod startup;
pub mod tls;
mod watchdog;

use connection::{check_query_size, Connection};
use handlers::QueryHandler;
use startup::{ConnectionAuth, Startup};
mod types;

pub use self::scram::ScramVerifier;
pub use self::session::SessionDefaults;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
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
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeStatementResponse, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{NoopQueryParser, StoredStatement};
use pgwire::api::{ClientInfo, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult, SEVERITY_FATAL};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::response::NotificationResponse;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{negotiate_tls, process_error, process_message};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::codec::{Framed, FramedParts};

use self::error::{
    SqlError, IDLE_IN_TRANSACTION_SESSION_TIMEOUT, INSUFFICIENT_RESOURCES, INVALID_CATALOG_NAME,
    PROGRAM_LIMIT_EXCEEDED, TOO_MANY_CONNECTIONS,
};
use self::frames::Guarded;
use self::session::{Described, Outcome, Session, SessionShared};

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
    /// The account owning the database has as many sessions as it may, over all its databases (FATAL 53300).
    #[error(
        "too many connections for the account owning database {database:?}: {open} open, at most {max} per account"
    )]
    TooManyConnectionsForAccount {
        /// The name the client gave.
        database: String,
        /// Sessions open on the account's databases now.
        open: usize,
        /// The per-account limit.
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

    /// [`SessionFactory::open`], with the catalog the sessions of the store it opened share
    /// ([`pgcompat::Dialect::share_catalog`]), if they share one. The default shares none.
    fn open_sharing(
        &self,
        user: &str,
        database: &str,
    ) -> Result<(rusqlite::Connection, Option<Arc<pgcompat::catalog::SharedCatalog>>), SessionError> {
        Ok((self.open(user, database)?, None))
    }

    /// Admits one more session on `database` before it is opened, or refuses it
    /// ([`SessionError::TooManyConnections`], [`SessionError::TooManyConnectionsForAccount`]); the returned guard
    /// is held for the session's life and lets the place go when dropped. The default admits everyone.
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
    let cancel = Arc::new(cancel::CancelTargets::default());
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    if let Err(error) = keepalive::configure(&socket) {
                        tracing::warn!(%peer, %error, "keepalive could not be set on a connection");
                    }
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
                    let (socket, watch) = match into_std_with_watch(socket) {
                        Ok(pair) => pair,
                        Err(error) => {
                            tracing::warn!(%peer, %error, "refusing connection: cannot watch its socket");
                            continue;
                        }
                    };
                    let tls = config.tls.as_ref().map(tls::ServerTls::acceptor);
                    let handlers = ConnectionHandlers::new(sessions.clone(), config.clone(), cancel.clone(), watch);
                    connections.spawn(serve_on_own_thread(socket, peer, tls, handlers));
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

/// Descriptors one connection takes: its socket, the duplicate that watches it, and its thread's runtime's
/// epoll instance and waker.
const FDS_PER_CONNECTION: u64 = 4;

/// The stack of a connection's thread: its session's SQLite calls (tokio's blocking threads have 2 MiB, where
/// they ran before) and the connection's protocol handling.
const CONNECTION_STACK_BYTES: usize = 4 << 20;

/// Serves one connection on a thread of its own, with a single-threaded tokio runtime of its own: the socket's
/// reads and writes, pgwire's handling and the session's SQLite calls all run there, one after the other, so a
/// statement costs no hand-over between threads (a PostgreSQL backend is one process per connection). Resolves
/// when the connection ends; dropping this future (the server shutting down) ends the connection as soon as
/// its thread is between calls (a running call is stopped by its own means: the watchdog, a cancel).
async fn serve_on_own_thread(
    socket: std::net::TcpStream,
    peer: std::net::SocketAddr,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    handlers: ConnectionHandlers,
) {
    let (ended, ended_rx) = tokio::sync::oneshot::channel::<()>();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // The socket's duplicate, to tell the client if the connection cannot be served after all.
    let watch = handlers.query.connection.watch.clone();
    let thread_watch = watch.clone();
    let spawned = std::thread::Builder::new()
        .name("pg-session".to_owned())
        .stack_size(CONNECTION_STACK_BYTES)
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(error) => {
                    tracing::warn!(%peer, %error, "refusing connection: cannot start its runtime");
                    connection::end_connection(
                        &thread_watch,
                        INSUFFICIENT_RESOURCES,
                        "could not start the connection's runtime",
                    );
                    return;
                }
            };
            runtime.block_on(async move {
                let socket = match TcpStream::from_std(socket) {
                    Ok(socket) => socket,
                    Err(error) => {
                        tracing::warn!(%peer, %error, "refusing connection: cannot register its socket");
                        return;
                    }
                };
                tokio::select! {
                    served = serve_connection(socket, peer, tls, handlers) => {
                        if let Err(error) = served {
                            tracing::debug!(%peer, %error, "connection ended");
                        }
                    }
                    // Sent or dropped: the server is shutting down.
                    _ = stop_rx => {}
                }
            });
            // The connection's tasks (an idle timer) go with the runtime, before the server hears it ended.
            drop(runtime);
            let _ = ended.send(());
        });
    if let Err(error) = spawned {
        tracing::warn!(%peer, %error, "refusing connection: cannot start its thread");
        connection::end_connection(
            &watch,
            INSUFFICIENT_RESOURCES,
            "could not start a thread for the connection",
        );
        return;
    }
    let _stop_when_dropped = stop;
    let _ = ended_rx.await;
}

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

/// The socket, out of this runtime (for the connection's own), and a duplicate of it to check the client is
/// still there while a statement runs.
fn into_std_with_watch(socket: TcpStream) -> std::io::Result<(std::net::TcpStream, Arc<std::net::TcpStream>)> {
    // `into_std` leaves it non-blocking, and the duplicate shares that, so peeking never blocks.
    let socket = socket.into_std()?;
    let watch = socket.try_clone()?;
    Ok((socket, Arc::new(watch)))
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

/// One client connection (see [`serve_messages`]); when it ends, for whatever reason, its session ends with
/// it: an open transaction is rolled back and its write lock let go at once, not when some timer that still
/// holds the session fires.
async fn serve_connection(
    socket: TcpStream,
    peer: std::net::SocketAddr,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    handlers: ConnectionHandlers,
) -> std::io::Result<()> {
    let slot = handlers.query.connection.slot.clone();
    let served = serve_messages(socket, peer, tls, handlers).await;
    // Calls run on this thread, so none holds the slot now: the session goes at once.
    drop(slot.lock().take());
    served
}

/// TLS negotiation (when configured), then every message checked (`frames::Guarded`) and handed to pgwire, as
/// pgwire's own `process_socket` does.
async fn serve_messages(
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
    let mut guarded = Guarded::new(old.io, &old.read_buf);
    guarded.watch_client_on(handlers.query.connection.watch.clone());
    let mut parts = FramedParts::new(guarded, old.codec);
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
            match handlers.query.connection.shared.get().cloned() {
                // A session: notifications are sent as they arrive, while the client is idle; a transaction left
                // idle for the session's `idle_in_transaction_session_timeout` ends, and the connection with it
                // (the timer restarts with every wait for the client, as PostgreSQL's does).
                Some(shared) => {
                    let idle_ms = shared.idle_in_transaction_timeout_ms();
                    let idle_limit = (idle_ms > 0 && shared.in_transaction()).then_some(idle_ms);
                    let idle = tokio::time::sleep(Duration::from_millis(idle_limit.unwrap_or(0)));
                    tokio::select! {
                        message = socket.next() => message,
                        () = shared.notification_arrived() => {
                            send_notifications(&mut socket, &shared).await?;
                            continue;
                        }
                        () = idle, if idle_limit.is_some() => {
                            if handlers.query.connection.end_idle_transaction() {
                                return Ok(());
                            }
                            continue;
                        }
                    }
                }
                None => socket.next().await,
            }
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
        // The client's next messages are in already (a Bind, Execute and Sync in one packet): this message's
        // replies are held and go out with theirs (`frames`, as PostgreSQL flushes only before it waits).
        let more_in = !awaiting_startup && (!socket.read_buffer().is_empty() || socket.get_ref().has_unread_messages());
        socket.get_mut().set_defer(more_in);
        if describe_sql_cursor(&mut socket, &handlers.query, &message).await? {
            socket.get_mut().set_defer(false);
            flush_before_waiting(&mut socket).await?;
            continue;
        }
        let processed = process_message(
            message,
            &mut socket,
            startup.clone(),
            query.clone(),
            query.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await;
        socket.get_mut().set_defer(false);
        if let Err(error) = processed {
            let is_fatal = error.is_fatal();
            process_error(&mut socket, error, is_extended_query).await?;
            if is_fatal {
                return Ok(());
            }
        }
        if is_cancel_request {
            return Ok(());
        }
        if let Some(shared) = handlers.query.connection.shared.get() {
            // Notifications that came while a statement ran, or that it sent itself, go after its reply.
            send_notifications(&mut socket, shared).await?;
        }
        flush_before_waiting(&mut socket).await?;
    }
}

/// Writes the replies held (`frames`) if no whole message of the client waits unread: the loop is about to wait
/// for one, and nothing held may wait with it.
async fn flush_before_waiting<S>(
    socket: &mut Framed<frames::Guarded<S>, pgwire::tokio::server::PgWireMessageServerCodec<String>>,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let guarded = socket.get_ref();
    if guarded.holds_output() && socket.read_buffer().is_empty() && !guarded.has_unread_messages() {
        SinkExt::flush(socket)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    Ok(())
}

/// A Describe of a portal pgwire does not hold but the session has as a SQL cursor (`DECLARE c CURSOR`):
/// answered with the cursor's columns, as PostgreSQL (whose cursors are portals) answers. Returns whether
/// the message was answered here.
async fn describe_sql_cursor<S>(
    socket: &mut Framed<S, pgwire::tokio::server::PgWireMessageServerCodec<String>>,
    query: &QueryHandler,
    message: &PgWireFrontendMessage,
) -> std::io::Result<bool>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + Sync + 'static,
{
    use pgwire::api::store::PortalStore;
    use pgwire::api::ClientPortalStore;
    let PgWireFrontendMessage::Describe(describe) = message else {
        return Ok(false);
    };
    let Some(name) = describe
        .name
        .clone()
        .filter(|n| describe.target_type == b'P' && !n.is_empty())
    else {
        return Ok(false);
    };
    if !matches!(
        socket.state(),
        PgWireConnectionState::ReadyForQuery | PgWireConnectionState::QueryInProgress
    ) || socket.portal_store().get_portal(&name).is_some()
    {
        return Ok(false);
    }
    let columns = match query.connection.run(move |s| s.cursor_columns(&name)).await {
        Ok(Ok(columns)) => columns,
        Ok(Err(error)) => {
            process_error(socket, error.into_pgwire(), true).await?;
            return Ok(true);
        }
        Err(error) => {
            process_error(socket, error, true).await?;
            return Ok(true);
        }
    };
    let reply = if columns.is_empty() {
        PgWireBackendMessage::NoData(pgwire::messages::data::NoData::new())
    } else {
        let fields = types::fields(&columns, &Format::UnifiedText);
        PgWireBackendMessage::RowDescription(pgwire::messages::data::RowDescription::new(
            fields.iter().map(Into::into).collect(),
        ))
    };
    socket.send(reply).await?;
    Ok(true)
}

/// Sends the session's waiting notifications, if the connection is between queries and the session
/// outside a transaction (else they wait, as PostgreSQL holds them until the transaction ends).
async fn send_notifications<S>(socket: &mut S, shared: &SessionShared) -> std::io::Result<()>
where
    S: Sink<PgWireBackendMessage> + ClientInfo + Unpin,
    S::Error: std::fmt::Display,
{
    if !matches!(socket.state(), PgWireConnectionState::ReadyForQuery) {
        return Ok(());
    }
    let notifications = shared.take_notifications();
    if notifications.is_empty() {
        return Ok(());
    }
    for notification in notifications {
        let message = NotificationResponse::new(notification.sender_pid, notification.channel, notification.payload);
        socket
            .feed(PgWireBackendMessage::NotificationResponse(message))
            .await
            .map_err(|error| std::io::Error::other(error.to_string()))?;
    }
    socket
        .flush()
        .await
        .map_err(|error| std::io::Error::other(error.to_string()))
}

/// The pgwire handlers of one connection, sharing its session.
struct ConnectionHandlers {
    startup: Arc<Startup>,
    query: Arc<QueryHandler>,
    cancel: Arc<cancel::CancelTargets>,
}

impl ConnectionHandlers {
    fn new(
        sessions: Arc<dyn SessionFactory>,
        config: ServeConfig,
        cancel: Arc<cancel::CancelTargets>,
        watch: Arc<std::net::TcpStream>,
    ) -> ConnectionHandlers {
        let connection = Arc::new(Connection {
            slot: Arc::new(Mutex::new(None)),
            shared: std::sync::OnceLock::new(),
            watch,
            config,
            cancel: std::sync::OnceLock::new(),
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
                driver: AuthDriver::new(parameters),
                mechanisms: SaslMechanisms::new(vec![Arc::new(scram)]),
                sessions,
                connection: connection.clone(),
                cancel: cancel.clone(),
            }),
            query: Arc::new(QueryHandler {
                connection,
                parser: Arc::new(NoopQueryParser::new()),
                copy_pending: parking_lot::Mutex::new(Vec::new()),
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
