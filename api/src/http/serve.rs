//! Serving the router over HTTP/1.1 so that no client can take the API down by holding connections.
//!
//! `axum::serve` keeps a connection as long as the client does: a socket that sends half a request head (or
//! nothing) and waits stays open forever, and enough of them exhaust the process's file descriptors, which the
//! PostgreSQL listener shares. Here every connection is bounded:
//!
//! - **At most [`ServeConfig::connections_max`] at once.** A connection accepted past the cap gets a best-effort
//!   `503` (written only if the socket takes it at once, with `Retry-After: 1`) and is closed at once: nothing
//!   waits for a slot, so the cap costs no memory and no task, and a client learns at once to come back. The
//!   connections it displaces are bounded by the timeouts below, so the service recovers by itself.
//! - **A request head must arrive within [`ServeConfig::header_read_timeout_ms`] of its first byte.**
//! - **An idle connection** (no request in flight and no byte of a new one since the last response, or since
//!   the accept) **is closed after [`ServeConfig::keep_alive_timeout_ms`].**
//! - The body's deadline is the router's ([`super::HttpConfig::body_read_timeout_ms`], a 408 with the envelope).
//!
//! A watchdog per connection does the first two: it knows from the service whether a request is in flight, and
//! from the socket wrapper ([`WatchedIo`]) whether bytes of a new head have arrived. A request in flight is never
//! cut: its handler bounds its own work (storage calls, `?wait=`), and dropping it midway could cancel work half
//! done. On shutdown, connections with no request in flight close at once; the others finish it (for at most
//! [`SHUTDOWN_GRACE_MS`]) and close.
//!
//! With [`ServeConfig::tls`] every connection is TLS ([`super::tls`]): the handshake is bounded by the header
//! read timeout and holds a slot of the cap, the watchdog then watches the decrypted bytes, and a connection
//! past the cap is closed without the plain `503` (which a TLS client could not read).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt as _;

use super::tls::ApiTls;
use crate::ids;

/// How long a stopping server waits for requests in flight before it closes their connections.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;
/// How long the accept loop pauses after an accept error that is not the peer's (out of file descriptors).
const ACCEPT_ERROR_PAUSE_MS: u64 = 100;

/// The connection limits; see the module doc.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Connections served at once; more are refused.
    pub connections_max: u32,
    /// From the first byte of a request head to its end.
    pub header_read_timeout_ms: u64,
    /// How long a connection with no request in flight and no new one arriving stays open.
    pub keep_alive_timeout_ms: u64,
    /// TLS on every connection; `None` serves plain HTTP.
    pub tls: Option<ApiTls>,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            connections_max: 1_024,
            header_read_timeout_ms: 10_000,
            keep_alive_timeout_ms: 5_000,
            tls: None,
        }
    }
}

impl ServeConfig {
    fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    fn keep_alive_timeout(&self) -> Duration {
        Duration::from_millis(self.keep_alive_timeout_ms)
    }
}

/// Serves `router` on `listener` until `shutdown`, with the limits of `config`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServeConfig,
    shutdown: impl Future<Output = ()> + Send,
) {
    assert!(config.connections_max > 0, "connections_max must be positive");
    assert!(
        config.header_read_timeout_ms > 0,
        "header_read_timeout_ms must be positive"
    );
    assert!(
        config.keep_alive_timeout_ms > 0,
        "keep_alive_timeout_ms must be positive"
    );
    let connections_max = usize::try_from(config.connections_max).unwrap_or(usize::MAX);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        // Reap the connections that ended, so the count is of live ones.
        while connections.try_join_next().is_some() {}
        match accepted {
            Ok((stream, _)) if connections.len() >= connections_max => refuse(&stream, config.tls.is_some()),
            Ok((stream, _)) => {
                let (router, config, stopped) = (router.clone(), config.clone(), stopped.clone());
                match config.tls.clone() {
                    None => connections.spawn(serve_connection(stream, router, config, stopped)),
                    Some(tls) => connections.spawn(async move {
                        let deadline = Instant::now() + config.header_read_timeout();
                        if let Some(stream) = tls.accept(stream, deadline).await {
                            serve_connection(stream, router, config, stopped).await;
                        }
                    }),
                };
            }
            Err(error) if is_peer_error(&error) => {}
            Err(error) => {
                tracing::warn!(%error, "accepting an API connection failed; pausing");
                tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)).await;
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            "API connections outlived the shutdown grace; closing them"
        );
        connections.shutdown().await;
    }
}

/// Accept errors that concern one connection only (it went away before we took it).
fn is_peer_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Answers a connection past the cap with a 503 if the socket takes it without waiting (not on a TLS port: a
/// TLS client could not read it), and closes it.
fn refuse(stream: &TcpStream, tls: bool) {
    if !tls {
        let response = plain_error(
            "503 Service Unavailable",
            "unavailable",
            "too many connections to the API; retry shortly",
        );
        // A fresh socket's send buffer takes a few hundred bytes; if it does not, the client sees the close alone.
        let _ = stream.try_write(response.as_bytes());
    }
    tracing::debug!("an API connection was refused: at the connection cap");
}

/// A whole HTTP/1.1 response with the error envelope, written by hand (outside the router), closing the
/// connection; with `Retry-After: 1` when `status_line` is a 503.
pub(super) fn plain_error(status_line: &str, code: &str, message: &str) -> String {
    let now_ms = u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0);
    let request_id = format!("req_{}", ids::new_ulid(now_ms));
    let body = serde_json::json!({
        "error": {
            "code": code,
            "message": message,
            "request_id": request_id,
        }
    })
    .to_string();
    let retry_after = if status_line.starts_with("503") {
        "retry-after: 1\r\n"
    } else {
        ""
    };
    format!(
        "HTTP/1.1 {status_line}\r\ncontent-type: application/json\r\n{retry_after}connection: close\r\n\
         x-request-id: {request_id}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// What the watchdog knows about one connection.
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
}

#[derive(Debug, Clone, Copy)]
struct ActivityState {
    /// Requests whose response is not produced yet (more than one only if a client pipelines).
    in_flight: u32,
    /// When the first byte of the next request head arrived, while none is in flight.
    head_started_at: Option<Instant>,
    /// When the connection last became idle: accepted, or its last response produced.
    idle_since: Instant,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new(ActivityState {
                in_flight: 0,
                head_started_at: None,
                idle_since: Instant::now(),
            }),
        }
    }

    /// Bytes arrived.
    fn on_read(&self) {
        let mut state = self.state.lock();
        if state.in_flight == 0 && state.head_started_at.is_none() {
            state.head_started_at = Some(Instant::now());
        }
    }

    /// A whole head arrived: a request is in flight until the guard drops.
    fn begin(self: &Arc<Self>) -> InFlightGuard {
        let mut state = self.state.lock();
        state.in_flight += 1;
        state.head_started_at = None;
        InFlightGuard {
            activity: Arc::clone(self),
        }
    }

    /// When the connection is to be closed unless something happens first; `None` while a request is in flight.
    fn deadline(&self, config: &ServeConfig) -> Option<Instant> {
        let state = *self.state.lock();
        if state.in_flight > 0 {
            return None;
        }
        Some(match state.head_started_at {
            Some(started) => started + config.header_read_timeout(),
            None => state.idle_since + config.keep_alive_timeout(),
        })
    }
}

/// Ends a request in flight when dropped (its response produced, or the request cancelled).
struct InFlightGuard {
    activity: Arc<Activity>,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut state = self.activity.state.lock();
        assert!(state.in_flight > 0, "a request ended that had not begun");
        state.in_flight -= 1;
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
            state.head_started_at = None;
        }
    }
}

/// A socket (plain or TLS) that tells its [`Activity`] when bytes arrive.
struct WatchedIo<S> {
    stream: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for WatchedIo<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.on_read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WatchedIo<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Serves one connection until it ends, its watchdog closes it, or the server stops.
async fn serve_connection<S>(
    stream: S,
    router: Router,
    config: ServeConfig,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(WatchedIo {
        stream,
        activity: Arc::clone(&activity),
    });
    let watched = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let guard = watched.begin();
        let router = router.clone();
        async move {
            let response = router.oneshot(request.map(Body::new)).await;
            drop(guard);
            response
        }
    });
    // hyper's own header timeout is not used: it also runs while a connection is idle, which is the watchdog's.
    let connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let mut stopping = false;
    // Bounded: every turn ends the connection, starts its shutdown (once), or sleeps at least until a deadline
    // that passed or a recheck a keep-alive timeout later.
    loop {
        let now = Instant::now();
        let wake = activity
            .deadline(&config)
            .unwrap_or(now + config.keep_alive_timeout())
            .max(now);
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!(%error, "an API connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(wake) => {
                if activity.deadline(&config).is_some_and(|deadline| deadline <= Instant::now()) {
                    tracing::debug!("closing an idle or stalled API connection");
                    return;
                }
            }
            _ = stopped.wait_for(|stopped| *stopped), if !stopping => {
                // Nothing in flight (idle, or half a head): nothing is lost by closing now.
                if activity.deadline(&config).is_some() {
                    return;
                }
                // The response is written, then the connection closes.
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}
