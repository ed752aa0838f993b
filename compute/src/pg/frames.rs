//! Frontend protocol messages checked before `pgwire` decodes them.
//!
//! `pgwire`'s decoders trust the lengths inside a message body (a 2-byte Bind panics with "advance out of
//! bounds"), so no byte from a client reaches them unchecked: [`Guarded`] sits between the socket and
//! pgwire's framing and releases a message's bytes only once the whole message is in and its structure is
//! valid for its type (every count, length and string inside the body, exactly to its end). A message that is
//! not ends the connection with `InvalidData` and a one-line, rate-limited log entry; pgwire never sees it.
//! Lengths are bounded before anything is buffered: [`STARTUP_BYTES_MAX`] for the untyped startup messages,
//! [`MESSAGE_BYTES_MAX`] for the rest.
//!
//! The first messages of a connection are untyped (a StartupMessage of protocol 3.x, or a CancelRequest);
//! after a StartupMessage every message has a type byte. An SSLRequest before them is answered by pgwire's
//! TLS negotiation, before the guard is in place.
//!
//! Writes pass through, except while the client's next messages are already in ([`Guarded::set_defer`]): then
//! replies are held (up to [`HELD_BYTES_MAX`]) and go out together, as PostgreSQL's backend flushes its output
//! only before it waits for input. An extended-protocol statement (Bind, Execute, Sync in one packet) is answered
//! with one write, not one per message (BindComplete, rows, CommandComplete, ReadyForQuery). The connection loop
//! turns the deferral off and flushes before it waits for the next message, so nothing held ever waits on the
//! client.
//!
//! A read that would sleep while the connection's session holds the writer's lock, and no other writer waits
//! for it, first watches the socket for the client's next message ([`CLIENT_WATCH`]).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Largest untyped startup-phase message, in bytes (PostgreSQL allows 10 000).
pub(crate) const STARTUP_BYTES_MAX: usize = 10_000;
/// Largest typed message, in bytes: a query or a Bind of the largest value SQLite takes (`defend`), plus room.
pub(crate) const MESSAGE_BYTES_MAX: usize = 300 << 20;

/// The protocol code of a CancelRequest.
const CANCEL_REQUEST_CODE: u32 = 80_877_102;
/// The longest cancel key (protocol 3.2 allows up to 256 bytes).
const CANCEL_KEY_BYTES_MAX: usize = 256;

/// Why a client's bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid frontend message: {0}")]
pub(crate) struct FrameError(String);

fn invalid<T>(what: impl Into<String>) -> Result<T, FrameError> {
    Err(FrameError(what.into()))
}

/// Where the connection is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Untyped messages: StartupMessage or CancelRequest.
    Startup,
    /// Typed messages.
    Typed,
}

/// Splits a byte stream into whole, valid messages.
#[derive(Debug)]
pub(crate) struct FrameChecker {
    phase: Phase,
    pending: BytesMut,
}

impl Default for FrameChecker {
    fn default() -> Self {
        FrameChecker {
            phase: Phase::Startup,
            pending: BytesMut::new(),
        }
    }
}

impl FrameChecker {
    /// Takes `data` in and appends to `ready` every message now complete and valid, in order; a message still
    /// incomplete waits for more bytes. Fails at the first invalid message (the messages before it are in
    /// `ready`).
    pub(crate) fn feed(&mut self, data: &[u8], ready: &mut BytesMut) -> Result<(), FrameError> {
        self.pending.extend_from_slice(data);
        loop {
            let (header_bytes, length_bytes) = match self.phase {
                Phase::Startup => (0, 4),
                Phase::Typed => (1, 4),
            };
            if self.pending.len() < header_bytes + length_bytes {
                return Ok(());
            }
            let length_field = &self.pending[header_bytes..header_bytes + length_bytes];
            let length = u32::from_be_bytes(length_field.try_into().expect("four bytes")) as usize;
            let limit = match self.phase {
                Phase::Startup => STARTUP_BYTES_MAX,
                Phase::Typed => MESSAGE_BYTES_MAX,
            };
            if length < 4 {
                return invalid(format!("message length {length} is below 4"));
            }
            if length > limit {
                return invalid(format!("message length {length} is over the limit of {limit}"));
            }
            let total = header_bytes + length;
            if self.pending.len() < total {
                return Ok(());
            }
            let body = &self.pending[header_bytes + 4..total];
            match self.phase {
                Phase::Startup => {
                    if check_startup(body)? {
                        self.phase = Phase::Typed;
                    }
                }
                Phase::Typed => check_typed(self.pending[0], body)?,
            }
            ready.extend_from_slice(&self.pending[..total]);
            self.pending.advance(total);
        }
    }
}

/// Checks an untyped message body (after its length). Returns whether it was a StartupMessage.
fn check_startup(body: &[u8]) -> Result<bool, FrameError> {
    let mut reader = Reader(body);
    let code = reader.u32()?;
    if code == CANCEL_REQUEST_CODE {
        reader.i32()?; // process id
        if reader.0.len() < 4 || reader.0.len() > CANCEL_KEY_BYTES_MAX {
            return invalid(format!("cancel key of {} bytes", reader.0.len()));
        }
        return Ok(false);
    }
    if code >> 16 != 3 {
        return invalid(format!("unsupported protocol or request code {code}"));
    }
    // Name/value pairs, then an empty name.
    loop {
        let name = reader.cstr()?;
        if name.is_empty() {
            break;
        }
        reader.cstr()?;
    }
    reader.end()?;
    Ok(true)
}

/// Checks a typed message's body against its type's layout.
fn check_typed(kind: u8, body: &[u8]) -> Result<(), FrameError> {
    let mut r = Reader(body);
    match kind {
        // Query; CopyFail.
        b'Q' | b'f' => {
            r.cstr()?;
        }
        // Parse: name, query, parameter type oids.
        b'P' => {
            r.cstr()?;
            r.cstr()?;
            let count = r.u16()?;
            r.skip(usize::from(count) * 4)?;
        }
        // Bind: portal, statement, parameter formats, parameters, result formats.
        b'B' => {
            r.cstr()?;
            r.cstr()?;
            let formats = r.u16()?;
            r.skip(usize::from(formats) * 2)?;
            let parameters = r.u16()?;
            for _ in 0..parameters {
                let length = r.i32()?;
                if length < -1 {
                    return invalid(format!("Bind parameter length {length}"));
                }
                if length > 0 {
                    r.skip(length as usize)?;
                }
            }
            let results = r.u16()?;
            r.skip(usize::from(results) * 2)?;
        }
        // Describe, Close: 'S' or 'P' and a name.
        b'D' | b'C' => {
            let target = r.u8()?;
            if target != b'S' && target != b'P' {
                return invalid(format!("{} target {target}", kind as char));
            }
            r.cstr()?;
        }
        // Execute: portal and a row limit.
        b'E' => {
            r.cstr()?;
            r.i32()?;
        }
        // Sync, Flush, Terminate, CopyDone: no body.
        b'S' | b'H' | b'X' | b'c' => {}
        // CopyData, and the password family (a password, or SASL data whose meaning depends on the
        // mechanism): bytes pgwire does not take apart on decoding.
        b'd' | b'p' => return Ok(()),
        other => return invalid(format!("unknown message type {other:#04x}")),
    }
    r.end()
}

/// A bounds-checked big-endian reader over a message body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], FrameError> {
        if self.0.len() < len {
            return invalid(format!("{len} bytes wanted, {} left in the message", self.0.len()));
        }
        let (head, tail) = self.0.split_at(len);
        self.0 = tail;
        Ok(head)
    }

    fn skip(&mut self, len: usize) -> Result<(), FrameError> {
        self.take(len).map(|_| ())
    }

    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("two bytes")))
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("four bytes")))
    }

    fn i32(&mut self) -> Result<i32, FrameError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("four bytes")))
    }

    /// A NUL-terminated string, without its NUL.
    fn cstr(&mut self) -> Result<&'a [u8], FrameError> {
        let Some(end) = self.0.iter().position(|b| *b == 0) else {
            return invalid("a string has no terminating NUL");
        };
        let text = self.take(end + 1)?;
        Ok(&text[..end])
    }

    fn end(&self) -> Result<(), FrameError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            invalid(format!("{} bytes past the end of the message's fields", self.0.len()))
        }
    }
}

/// Seconds since the epoch of the last protocol-error log line, and lines suppressed since.
static LAST_LOG_S: AtomicU64 = AtomicU64::new(0);
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

/// Logs a refused message: at most one line a second for the whole process, with a count of the suppressed.
pub(crate) fn log_refused(peer: std::net::SocketAddr, error: &FrameError) {
    let now_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let last_s = LAST_LOG_S.load(Ordering::Relaxed);
    if now_s > last_s
        && LAST_LOG_S
            .compare_exchange(last_s, now_s, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        let suppressed = SUPPRESSED.swap(0, Ordering::Relaxed);
        tracing::warn!(%peer, %error, suppressed, "closing a connection that sent an invalid message");
    } else {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Most reply bytes held while the deferral is on; past it they are written at once.
pub(crate) const HELD_BYTES_MAX: usize = 64 << 10;

/// A stream whose reads release only whole, valid frontend messages, and whose writes are held while the
/// deferral is on (see the module doc).
pub(crate) struct Guarded<S> {
    inner: S,
    checker: FrameChecker,
    ready: BytesMut,
    failed: Option<FrameError>,
    /// Where socket reads land, allocated once (not a zeroed array on every read).
    chunk: Vec<u8>,
    /// Reply bytes not written to the socket yet (at most [`HELD_BYTES_MAX`]), in order before any later write.
    held: BytesMut,
    /// Hold writes and make flushes no-ops: the client's next messages are already in.
    defer: bool,
    /// The socket's duplicate, watched for the client's next message while this thread holds the writer's lock
    /// uncontended ([`CLIENT_WATCH`]).
    client_watch: Option<std::sync::Arc<std::net::TcpStream>>,
}

impl<S> Guarded<S> {
    /// Guards `inner`; `already_read` are bytes taken from it before (by the TLS negotiation), checked first.
    pub(crate) fn new(inner: S, already_read: &[u8]) -> Guarded<S> {
        let mut guarded = Guarded {
            inner,
            checker: FrameChecker::default(),
            ready: BytesMut::new(),
            failed: None,
            chunk: vec![0u8; READ_CHUNK_BYTES],
            held: BytesMut::new(),
            defer: false,
            client_watch: None,
        };
        if let Err(error) = guarded.checker.feed(already_read, &mut guarded.ready) {
            guarded.failed = Some(error);
        }
        guarded
    }

    /// Watches `socket` (a duplicate of the one read, non-blocking) for the client's next message before a read
    /// sleeps, while this thread holds the writer's lock uncontended ([`CLIENT_WATCH`]).
    pub(crate) fn watch_client_on(&mut self, socket: std::sync::Arc<std::net::TcpStream>) {
        self.client_watch = Some(socket);
    }

    /// The first invalid message's error, once one came.
    pub(crate) fn failure(&self) -> Option<&FrameError> {
        self.failed.as_ref()
    }

    /// Whether whole messages the reader has not taken yet are in (bytes checked but not read).
    pub(crate) fn has_unread_messages(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Holds writes (and ignores flushes) while `defer`; turned off, the next flush writes what is held.
    pub(crate) fn set_defer(&mut self, defer: bool) {
        self.defer = defer;
    }

    /// Whether reply bytes are held, unwritten.
    pub(crate) fn holds_output(&self) -> bool {
        !self.held.is_empty()
    }
}

impl<S: AsyncWrite + Unpin> Guarded<S> {
    /// Writes what is held to the socket.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.held.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.held) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(written)) => self.held.advance(written),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `len` bytes (given by `put`) into the held bytes if the deferral is on, or if bytes are held
    /// already (they go first), within the bound; `false` if the caller is to write them itself.
    fn hold(&mut self, cx: &mut Context<'_>, len: usize, put: impl FnOnce(&mut BytesMut)) -> Poll<io::Result<bool>> {
        if !self.defer && self.held.is_empty() {
            return Poll::Ready(Ok(false));
        }
        if self.held.len() + len <= HELD_BYTES_MAX {
            put(&mut self.held);
            if !self.defer {
                // Written now if the socket takes it; else the next flush does.
                if let Poll::Ready(Err(error)) = self.poll_drain(cx) {
                    return Poll::Ready(Err(error));
                }
            }
            return Poll::Ready(Ok(true));
        }
        self.poll_drain(cx).map_ok(|()| false)
    }
}

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 16 << 10;

/// How long a connection whose session holds the writer's lock, uncontended, watches for the client's next
/// message before it sleeps. Inside a write transaction the client's next statement usually follows within
/// a round trip; on a virtual machine whose CPUs halt when idle, a sleeping thread is woken late for it (see
/// `remote_store::in_flight::ACKNOWLEDGEMENT_POLL`), and the writer's lock is held all that while. Only when no
/// writer waits: then the CPUs are busy anyway, and watching would take CPU from the others.
pub(crate) const CLIENT_WATCH: std::time::Duration = std::time::Duration::from_micros(500);

/// Watches `socket` (a duplicate of the connection's) for the client's next bytes for up to [`CLIENT_WATCH`],
/// giving the CPU to any other runnable thread between looks. If they come (or the socket errs or closes), wakes
/// the task: the connection's runtime then polls its I/O driver, which sees the socket readable, and reads.
fn watch_for_client(socket: &std::net::TcpStream, cx: &mut Context<'_>) {
    let until = std::time::Instant::now() + CLIENT_WATCH;
    let mut byte = [0u8; 1];
    loop {
        match socket.peek(&mut byte) {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            _ => {
                cx.waker().wake_by_ref();
                return;
            }
        }
        if std::time::Instant::now() >= until {
            return;
        }
        std::thread::yield_now();
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.ready.is_empty() {
                let len = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready[..len]);
                this.ready.advance(len);
                return Poll::Ready(Ok(()));
            }
            if let Some(error) = &this.failed {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, error.clone())));
            }
            let mut chunk_buf = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut chunk_buf) {
                Poll::Pending => {
                    if let Some(socket) = &this.client_watch {
                        if crate::vfs::holds_writer_lock() && !crate::vfs::writers_waiting() {
                            watch_for_client(socket, cx);
                        }
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(())) => {}
            }
            let data = chunk_buf.filled();
            if data.is_empty() {
                // End of stream; a partial message left behind is dropped with the connection.
                return Poll::Ready(Ok(()));
            }
            if let Err(error) = this.checker.feed(data, &mut this.ready) {
                this.failed = Some(error);
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match this.hold(cx, buf.len(), |held| held.extend_from_slice(buf)) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Ready(Ok(true)) => Poll::Ready(Ok(buf.len())),
            Poll::Ready(Ok(false)) => Pin::new(&mut this.inner).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.defer {
            return Poll::Ready(Ok(()));
        }
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let len = bufs.iter().map(|b| b.len()).sum();
        let put = |held: &mut BytesMut| bufs.iter().for_each(|b| held.extend_from_slice(b));
        match this.hold(cx, len, put) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Ready(Ok(true)) => Poll::Ready(Ok(len)),
            Poll::Ready(Ok(false)) => Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};
    use proptest::prelude::*;

    use super::*;

    /// What the peer of `duplex` can read within 50 ms.
    async fn readable(peer: &mut tokio::io::DuplexStream) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(Ok(n)) = tokio::time::timeout(std::time::Duration::from_millis(50), peer.read(&mut buf)).await {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    /// A loopback TCP pair: the server's side (tokio, with a std duplicate to watch) and the client's.
    async fn tcp_pair() -> (
        tokio::net::TcpStream,
        std::sync::Arc<std::net::TcpStream>,
        std::net::TcpStream,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let client = std::net::TcpStream::connect(address).expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let server = server.into_std().expect("std");
        let watch = server.try_clone().expect("duplicate");
        (
            tokio::net::TcpStream::from_std(server).expect("tokio"),
            std::sync::Arc::new(watch),
            client,
        )
    }

    /// While the thread holds the writer's lock, a read that would sleep watches for the client first: bytes
    /// that come while it watches, and bytes that come only after it gave up and slept, are both read.
    #[tokio::test(flavor = "current_thread")]
    async fn a_read_watched_for_the_client_gets_what_comes_during_and_after_the_watch() {
        use std::io::Write;
        use tokio::io::AsyncReadExt;
        let (server, watch, mut client) = tcp_pair().await;
        let mut guarded = Guarded::new(server, &[]);
        guarded.watch_client_on(watch);
        crate::vfs::note_writer_lock(true);
        let startup = startup();
        let (early, late) = startup.split_at(4);
        let (early, late) = (early.to_vec(), late.to_vec());
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_micros(100));
            client.write_all(&early).expect("write");
            std::thread::sleep(CLIENT_WATCH * 20);
            client.write_all(&late).expect("write");
            client
        });
        let mut got = vec![0u8; startup.len()];
        tokio::time::timeout(std::time::Duration::from_secs(10), guarded.read_exact(&mut got))
            .await
            .expect("read within the bound")
            .expect("read");
        assert_eq!(got, startup);
        crate::vfs::note_writer_lock(false);
        drop(writer.join().expect("writer"));
    }

    #[tokio::test]
    async fn deferred_writes_are_held_until_the_deferral_ends_and_go_out_in_order() {
        use tokio::io::AsyncWriteExt;
        let (ours, mut peer) = tokio::io::duplex(1 << 20);
        let mut guarded = Guarded::new(ours, &[]);
        guarded.write_all(b"one ").await.expect("write");
        guarded.flush().await.expect("flush");
        assert_eq!(readable(&mut peer).await, b"one ");
        guarded.set_defer(true);
        guarded.write_all(b"two ").await.expect("write");
        guarded.flush().await.expect("a flush while deferring is a no-op");
        guarded.write_all(b"three ").await.expect("write");
        assert!(guarded.holds_output());
        assert_eq!(readable(&mut peer).await, b"", "nothing goes out while deferring");
        guarded.set_defer(false);
        guarded.write_all(b"four").await.expect("write");
        guarded.flush().await.expect("flush");
        assert!(!guarded.holds_output());
        assert_eq!(readable(&mut peer).await, b"two three four");
    }

    #[tokio::test]
    async fn held_writes_past_the_bound_go_out_at_once() {
        use tokio::io::AsyncWriteExt;
        let (ours, mut peer) = tokio::io::duplex(4 << 20);
        let mut guarded = Guarded::new(ours, &[]);
        guarded.set_defer(true);
        let first = vec![b'a'; HELD_BYTES_MAX - 10];
        let second = vec![b'b'; 100];
        guarded.write_all(&first).await.expect("write");
        guarded.write_all(&second).await.expect("write");
        let got = readable(&mut peer).await;
        assert!(
            got.len() >= first.len(),
            "the held bytes went out past the bound: {}",
            got.len()
        );
        assert!(got[..first.len()].iter().all(|&b| b == b'a'), "in order");
        guarded.set_defer(false);
        guarded.flush().await.expect("flush");
        let mut all = got;
        all.extend(readable(&mut peer).await);
        assert_eq!(all.len(), first.len() + second.len());
        assert!(all[first.len()..].iter().all(|&b| b == b'b'));
    }

    fn startup() -> Vec<u8> {
        let mut body = 196_608u32.to_be_bytes().to_vec();
        body.extend_from_slice(b"user\0app\0database\0db\0\0");
        let mut message = u32::try_from(body.len() + 4).expect("short").to_be_bytes().to_vec();
        message.extend_from_slice(&body);
        message
    }

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut message = vec![kind];
        message.extend_from_slice(&u32::try_from(body.len() + 4).expect("short").to_be_bytes());
        message.extend_from_slice(body);
        message
    }

    /// A conversation every message of which is valid.
    fn conversation() -> Vec<u8> {
        let mut bytes = startup();
        bytes.extend(typed(b'p', b"secret\0"));
        bytes.extend(typed(b'Q', b"SELECT 1\0"));
        bytes.extend(typed(b'P', b"s1\0SELECT $1\0\0\x01\0\0\0\x17"));
        bytes.extend(typed(b'B', b"\0s1\0\0\x01\0\0\0\x01\0\0\0\x0242\0\x01\0\0"));
        bytes.extend(typed(b'D', b"P\0"));
        bytes.extend(typed(b'E', b"\0\0\0\0\0"));
        bytes.extend(typed(b'C', b"S\0"));
        bytes.extend(typed(b'S', b""));
        bytes.extend(typed(b'X', b""));
        bytes
    }

    /// Decodes every message of `released` with pgwire, as its server codec would, and fails the test on a
    /// panic; returns how many decoded.
    fn decode_all(released: &[u8]) -> Result<usize, TestCaseError> {
        let mut buf = BytesMut::from(released);
        let mut context = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
        context.awaiting_frontend_ssl = false;
        let mut decoded = 0;
        loop {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                PgWireFrontendMessage::decode(&mut buf, &context)
            }));
            match outcome {
                Err(_) => return Err(TestCaseError::fail(format!("pgwire panicked on {released:?}"))),
                Ok(Ok(Some(message))) => {
                    decoded += 1;
                    if matches!(message, PgWireFrontendMessage::Startup(_)) {
                        context.awaiting_frontend_startup = false;
                    }
                }
                Ok(Ok(None)) | Ok(Err(_)) => return Ok(decoded),
            }
        }
    }

    #[test]
    fn a_valid_conversation_passes_whole_in_any_chunking() -> Result<(), FrameError> {
        let bytes = conversation();
        for chunk in [1, 3, 7, 64, bytes.len()] {
            let mut checker = FrameChecker::default();
            let mut ready = BytesMut::new();
            for part in bytes.chunks(chunk) {
                checker.feed(part, &mut ready)?;
            }
            assert_eq!(&ready[..], &bytes[..], "chunks of {chunk}");
        }
        Ok(())
    }

    #[test]
    fn the_short_bind_of_the_finding_is_refused() {
        let mut bytes = startup();
        bytes.extend_from_slice(&[b'B', 0, 0, 0, 6, 0, 0]);
        let mut ready = BytesMut::new();
        assert!(FrameChecker::default().feed(&bytes, &mut ready).is_err());
        assert_eq!(&ready[..], &startup()[..], "the startup message before it passed");
    }

    #[test]
    fn lengths_are_bounded_before_anything_is_buffered() {
        let mut ready = BytesMut::new();
        let mut checker = FrameChecker::default();
        assert!(
            checker.feed(&[0, 0, 0x40, 0], &mut ready).is_err(),
            "a 16 KiB startup message"
        );
        let mut checker = FrameChecker::default();
        let mut bytes = startup();
        bytes.extend_from_slice(&[b'Q', 0x7f, 0xff, 0xff, 0xff]);
        assert!(checker.feed(&bytes, &mut ready).is_err(), "a 2 GiB query");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the checker releases, pgwire decodes without a panic; and bytes it refuses are never
        /// released.
        #[test]
        fn whatever_is_released_decodes_without_a_panic(
            edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
            tail in prop::collection::vec(any::<u8>(), 0..40),
            chunk in 1usize..50,
        ) {
            let mut bytes = conversation();
            for (at, byte) in edits {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            bytes.truncate(cut % (bytes.len() + 1));
            bytes.extend(tail);
            let mut checker = FrameChecker::default();
            let mut ready = BytesMut::new();
            for part in bytes.chunks(chunk) {
                if checker.feed(part, &mut ready).is_err() {
                    break;
                }
            }
            prop_assert!(bytes.starts_with(&ready), "only a prefix of the input is released");
            decode_all(&ready)?;
        }

        /// Random bytes after a valid startup message: the same property for every message type.
        #[test]
        fn random_typed_messages_decode_without_a_panic(
            kind in prop::sample::select(b"QPBDECSHXcdfpFZ?".to_vec()),
            body in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = startup();
            bytes.extend(typed(kind, &body));
            let mut checker = FrameChecker::default();
            let mut ready = BytesMut::new();
            let _ = checker.feed(&bytes, &mut ready);
            decode_all(&ready)?;
        }
    }
}
