//! Optional TLS on the API (`--api-tls-cert`/`--api-tls-key`): rustls with ring, the certificate read as the
//! PostgreSQL listener reads its own (`compute::pg::tls::server_config`), no new TLS stack. Plain HTTP stays the
//! default (on loopback); with a certificate the port speaks HTTPS only.
//!
//! A connection on a TLS port is bounded like any other ([`super::serve`]): it holds a slot of the connection
//! cap from its accept, and its first byte and whole handshake must arrive within the header read timeout. A
//! client that speaks plain HTTP to it (its first byte is not a TLS handshake record) gets a plain `400` saying
//! so, and the connection is closed: a clean failure, not a hang or a reset.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

pub use compute::pg::tls::TlsError;

/// The first byte of every TLS connection: a handshake record (RFC 8446 §5.1, `ContentType.handshake`).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// Bytes of a plain-HTTP request read (and dropped) before it is answered, at most: reading them first lets the
/// close be a FIN after the answer, not a reset that could lose it.
const PLAIN_REQUEST_BYTES_MAX: usize = 16 * 1024;
/// How long a plain-HTTP client is given to read the answer and close, at most.
const PLAIN_LINGER: Duration = Duration::from_secs(1);

/// The API's TLS: a certificate and its key, ready to accept.
#[derive(Clone)]
pub struct ApiTls(TlsAcceptor);

impl std::fmt::Debug for ApiTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiTls")
    }
}

impl ApiTls {
    /// TLS serving the certificate chain in `cert_path` with the key in `key_path` (both PEM), offering
    /// HTTP/1.1 by ALPN.
    pub fn from_pem(cert_path: &Path, key_path: &Path) -> Result<ApiTls, TlsError> {
        let mut config = compute::pg::tls::server_config(cert_path, key_path)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ApiTls(TlsAcceptor::from(Arc::new(config))))
    }

    /// The TLS stream of a new connection, its handshake done by `deadline`; `None` (the connection closed) if
    /// the client went, stalled, failed the handshake, or spoke plain HTTP (answered with a `400` first).
    pub(super) async fn accept(&self, stream: TcpStream, deadline: Instant) -> Option<TlsStream<TcpStream>> {
        let mut first = [0u8; 1];
        match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
            Ok(Ok(1)) => {}
            Ok(Ok(_)) | Ok(Err(_)) => return None,
            Err(_) => {
                tracing::debug!("closing an API connection that sent nothing to the TLS port");
                return None;
            }
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            answer_plain_http(stream, deadline).await;
            return None;
        }
        match tokio::time::timeout_at(deadline, self.0.accept(stream)).await {
            Ok(Ok(tls)) => Some(tls),
            Ok(Err(error)) => {
                tracing::debug!(%error, "an API client failed the TLS handshake");
                None
            }
            Err(_) => {
                tracing::debug!("closing an API connection whose TLS handshake stalled");
                None
            }
        }
    }
}

/// Answers a plain-HTTP request on the TLS port with a `400` saying to use HTTPS, then closes.
async fn answer_plain_http(mut stream: TcpStream, deadline: Instant) {
    // What of the request has arrived (a head comes in one segment), read so the close is clean.
    let mut request = vec![0u8; PLAIN_REQUEST_BYTES_MAX];
    let _ = tokio::time::timeout_at(deadline, stream.read(&mut request)).await;
    let response = super::serve::plain_error(
        "400 Bad Request",
        "invalid_request",
        "this port speaks HTTPS only: use https://",
    );
    let _ = tokio::time::timeout_at(deadline, stream.write_all(response.as_bytes())).await;
    let _ = stream.shutdown().await;
    // Until the client closes (bounded): dropping a socket with unread bytes would reset it.
    let linger = Instant::now() + PLAIN_LINGER;
    while let Ok(Ok(read)) = tokio::time::timeout_at(linger, stream.read(&mut request)).await {
        if read == 0 {
            break;
        }
    }
    tracing::debug!("a plain-HTTP request on the TLS port was refused");
}
