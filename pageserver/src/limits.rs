//! The bounds of the pageserver's gRPC serving, shared by the services and the server that runs them.

/// Largest gRPC message accepted or sent. The largest legitimate one is a full `GetPages` response batch:
/// `page_service::BATCH_REQUESTS_MAX` pages of 8 KiB (8 MiB) plus framing.
pub const MESSAGE_BYTES_MAX: usize = 32 * 1024 * 1024;
/// Requests in flight on one connection; more wait for a slot. A `GetPage` waiting for ingest holds one, so
/// this bounds the waits one client can pile up, while leaving a compute's readers plenty of room.
pub const CONNECTION_REQUESTS_MAX: usize = 1024;
/// HTTP/2 streams open at once on one connection.
pub const HTTP2_STREAMS_MAX: u32 = 1024;
/// HTTP/2 flow-control window of one stream: a full `GetPages` response batch flows without stalling on
/// window updates.
pub const HTTP2_STREAM_WINDOW_BYTES: u32 = 8 * 1024 * 1024;
/// HTTP/2 flow-control window of one connection (all its streams).
pub const HTTP2_CONNECTION_WINDOW_BYTES: u32 = 16 * 1024 * 1024;
/// HTTP/2 keepalive pings on idle connections, so a vanished client's streams end.
pub const HTTP2_KEEPALIVE_INTERVAL_MS: u64 = 10_000;
/// A keepalive ping unanswered for this long closes the connection.
pub const HTTP2_KEEPALIVE_TIMEOUT_MS: u64 = 20_000;
/// After the shutdown signal, how long open connections get to finish before they are cut.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;
