//! `cambium proxy` (issue 17 item 4): accepts PostgreSQL connections and routes each, by the database it names,
//! to the compute host that database is placed on (`store::hosts`).
//!
//! A connection: the first message is read (bounded, within [`ProxyConfig::startup_timeout_ms`]); an SSLRequest
//! is answered `S` and TLS is terminated here (the proxy's certificate), a GSSENCRequest `N`; then the startup
//! message names the database: a connection name (`br_…`, `db_…`, either with `@LSN` or `@time` for time
//! travel), resolved through the metadata to the live host serving it ([`route::Resolver`]: a short cache,
//! re-resolved when a connect fails, waiting out a failover). The proxy connects to that host's PostgreSQL
//! address (plain TCP: the hosts are on the private network), replays the startup message and copies bytes both
//! ways (tokio's bounded copy buffers), until either side ends or the database is no longer served by that host
//! (`route::relay`: then the session is closed, and its client reconnects to the new host). The host authenticates (SCRAM) and wakes a suspended database itself.
//! Nothing the client sends before that reaches a host unchecked: a malformed first message gets an
//! ErrorResponse (08P01), an unknown database 3D000, a database whose host cannot be reached 57P03, never a
//! panic.
//!
//! **Cancel requests** are routed too: the proxy reads the host's messages up to the session's first
//! ReadyForQuery, notes its BackendKeyData (process id and secret) with the host's address while the session
//! lasts, and sends a CancelRequest carrying that key to that host. A key this proxy does not carry may belong to
//! a session another proxy carries (several proxies behind one address, a client's cancel landing on another
//! than its session): it is sent to every live compute host, and the one whose session has that secret cancels
//! (the others ignore it, as PostgreSQL ignores an unknown key). At most [`CANCEL_BROADCASTS_MAX`] such sends run
//! at once; more are dropped, so a flood of made-up keys costs the hosts a bounded number of connections.
//!
//! One job per file: this one holds the listener and a connection's life; `startup` the first messages (pure);
//! `route` the resolution of names to hosts and the relay.

mod route;
pub mod startup;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::store::Store;
use startup::{BackendKey, FirstMessage, StartupError};

pub use route::Resolver;

/// How the proxy runs.
#[derive(Clone)]
pub struct ProxyConfig {
    /// TLS for clients that ask (SSLRequest); `None` answers `N`.
    pub tls: Option<TlsAcceptor>,
    /// Connections at once; more are refused with 53300.
    pub connections_max: usize,
    /// From a connection's accept to its startup message's end.
    pub startup_timeout_ms: u64,
    /// Bound of connecting to a compute host.
    pub connect_timeout_ms: u64,
    /// How long a name's host is remembered.
    pub cache_ttl_ms: u64,
    /// How long a connection waits for a database whose host is not live (being re-placed) or not answering.
    pub failover_wait_ms: u64,
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("tls", &self.tls.is_some())
            .field("connections_max", &self.connections_max)
            .field("startup_timeout_ms", &self.startup_timeout_ms)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("cache_ttl_ms", &self.cache_ttl_ms)
            .field("failover_wait_ms", &self.failover_wait_ms)
            .finish()
    }
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        ProxyConfig {
            tls: None,
            connections_max: 1024,
            startup_timeout_ms: 10_000,
            connect_timeout_ms: 5_000,
            cache_ttl_ms: 2_000,
            failover_wait_ms: 30_000,
        }
    }
}

/// The acceptor of TLS with clients over `config` (a certificate and key, `compute::pg::tls::server_config`).
pub fn tls_acceptor(config: tokio_rustls::rustls::ServerConfig) -> TlsAcceptor {
    TlsAcceptor::from(Arc::new(config))
}

/// First messages before the startup message, at most: an SSLRequest and a GSSENCRequest, in either order.
const NEGOTIATIONS_MAX: usize = 2;

/// A client stream, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Cancel requests for keys this proxy does not carry being sent to every live host at once, at most.
pub const CANCEL_BROADCASTS_MAX: usize = 8;
/// Hosts one such cancel request is sent to, at most.
const CANCEL_BROADCAST_HOSTS_MAX: usize = 256;

/// What the connections share.
struct Shared {
    config: ProxyConfig,
    resolver: Resolver,
    /// The sessions carried now: backend key → the host's PostgreSQL address, for cancel requests.
    sessions: Mutex<HashMap<BackendKey, String>>,
    /// Slots of [`CANCEL_BROADCASTS_MAX`].
    cancel_broadcasts: Arc<Semaphore>,
}

/// Serves `listener` until `shutdown`, resolving names through `store`.
pub async fn serve(
    listener: TcpListener,
    store: Arc<Store>,
    config: ProxyConfig,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(config.connections_max));
    let shared = Arc::new(Shared {
        resolver: Resolver::new(store, Duration::from_millis(config.cache_ttl_ms)),
        config,
        sessions: Mutex::new(HashMap::new()),
        cancel_broadcasts: Arc::new(Semaphore::new(CANCEL_BROADCASTS_MAX)),
    });
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let (mut socket, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, say: wait a little rather than spin.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        if let Err(error) = compute::pg::keepalive::configure(&socket) {
            tracing::warn!(%peer, %error, "keepalive could not be set on a client's connection");
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            let refusal = startup::error_response("53300", "sorry, too many clients already (cambium proxy)");
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), socket.write_all(&refusal)).await;
            });
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            if let Err(error) = connection(&shared, socket).await {
                tracing::debug!(%peer, %error, "a proxied connection ended");
            }
            drop(slot);
        });
    }
}

/// Why a connection ended before its relay.
#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error("reading or writing the client: {0}")]
    Io(#[from] std::io::Error),
    #[error("the startup message did not arrive in time")]
    Timeout,
    #[error("{0}")]
    Startup(#[from] StartupError),
    #[error("TLS handshake: {0}")]
    Tls(std::io::Error),
}

/// One client connection: negotiation, startup, routing, relay.
async fn connection(shared: &Shared, socket: TcpStream) -> Result<(), ConnectionError> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(shared.config.startup_timeout_ms);
    let mut client: Box<dyn Io> = Box::new(socket);
    let mut tls_started = false;
    let mut negotiations = 0;
    let startup = loop {
        let first = match tokio::time::timeout_at(deadline, read_first(&mut client)).await {
            Err(_) => return Err(ConnectionError::Timeout),
            Ok(Err(ConnectionError::Startup(error))) => {
                refuse(&mut client, error.sqlstate(), &error.to_string()).await;
                return Err(error.into());
            }
            Ok(first) => first?,
        };
        let negotiation = matches!(first, FirstMessage::SslRequest | FirstMessage::GssEncRequest);
        if negotiation {
            negotiations += 1;
            if negotiations > NEGOTIATIONS_MAX {
                let error = StartupError::Layout("too many SSL or GSS requests");
                refuse(&mut client, error.sqlstate(), &error.to_string()).await;
                return Err(error.into());
            }
        }
        match first {
            FirstMessage::SslRequest => match &shared.config.tls {
                Some(tls) if !tls_started => {
                    client.write_all(b"S").await?;
                    let accepted = tokio::time::timeout_at(deadline, tls.accept(client))
                        .await
                        .map_err(|_| ConnectionError::Timeout)?
                        .map_err(ConnectionError::Tls)?;
                    client = Box::new(accepted);
                    tls_started = true;
                }
                _ => client.write_all(b"N").await?,
            },
            FirstMessage::GssEncRequest => client.write_all(b"N").await?,
            FirstMessage::Cancel(key) => {
                cancel(shared, key).await;
                return Ok(());
            }
            FirstMessage::Startup(startup) => break startup,
        }
    };
    let database = startup.database().unwrap_or_default().to_owned();
    let backend = match route::connect(shared, &database).await {
        Ok(backend) => backend,
        Err(refusal) => {
            refuse(&mut client, refusal.sqlstate, &refusal.message).await;
            return Ok(());
        }
    };
    route::relay(shared, client, backend, &database, &startup.bytes).await;
    Ok(())
}

/// Reads one first message (header, then exactly the body it announces).
async fn read_first(client: &mut Box<dyn Io>) -> Result<FirstMessage, ConnectionError> {
    let mut head = [0u8; 8];
    client.read_exact(&mut head).await?;
    let header = startup::header(head)?;
    let mut body = vec![0u8; header.length - 8];
    client.read_exact(&mut body).await?;
    Ok(startup::parse(header, &body)?)
}

/// Sends an ErrorResponse and closes; a client that went away is not an error of ours.
async fn refuse(client: &mut Box<dyn Io>, sqlstate: &str, message: &str) {
    let bytes = startup::error_response(sqlstate, message);
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = client.write_all(&bytes).await;
        let _ = client.shutdown().await;
    })
    .await;
}

/// Sends a CancelRequest for `key` to the host of the session that has it if this proxy carries it, else to every
/// live host (see the module's comment).
async fn cancel(shared: &Shared, key: BackendKey) {
    let mut request = Vec::with_capacity(16);
    request.extend_from_slice(&16u32.to_be_bytes());
    request.extend_from_slice(&startup::CANCEL_REQUEST.to_be_bytes());
    request.extend_from_slice(&key.process_id.to_be_bytes());
    request.extend_from_slice(&key.secret.to_be_bytes());
    let timeout = Duration::from_millis(shared.config.connect_timeout_ms);
    let carried = shared.sessions.lock().get(&key).cloned();
    if let Some(address) = carried {
        send_cancel(&address, &request, timeout).await;
        return;
    }
    let Ok(_slot) = Arc::clone(&shared.cancel_broadcasts).try_acquire_owned() else {
        tracing::warn!("a cancel request for a session this proxy does not carry was dropped: too many at once");
        return;
    };
    let addresses = match shared.resolver.live_host_addresses().await {
        Ok(addresses) => addresses,
        Err(error) => {
            tracing::warn!(%error, "a cancel request could not be sent: the compute hosts could not be read");
            return;
        }
    };
    let sends = addresses
        .iter()
        .take(CANCEL_BROADCAST_HOSTS_MAX)
        .map(|address| send_cancel(address, &request, timeout));
    futures::future::join_all(sends).await;
}

/// Sends the CancelRequest `request` to the compute host at `address`, within `timeout`.
async fn send_cancel(address: &str, request: &[u8], timeout: Duration) {
    let sent = tokio::time::timeout(timeout, async {
        let mut host = TcpStream::connect(address).await?;
        host.write_all(request).await?;
        host.shutdown().await
    })
    .await;
    if !matches!(sent, Ok(Ok(()))) {
        tracing::warn!(%address, "a cancel request could not be sent to the compute host");
    }
}
