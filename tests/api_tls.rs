//! Optional TLS on the API (issue 13): `cambium up --api-tls-cert --api-tls-key` with a certificate made for
//! the test serves HTTPS to a real client (reqwest over rustls, trusting only that certificate) and nothing
//! else: a client that does not trust the certificate fails its handshake, plain HTTP to the port gets a clean
//! `400` saying to use HTTPS, and the connection limits still hold: a socket that sends nothing, or finishes the
//! handshake and sends half a request head, is closed within the timeouts, and past the connection cap a new
//! connection is closed at once while the service recovers when the holders go. Without the flags the API stays
//! plain HTTP (every other test). All traffic is to 127.0.0.1.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::api::{request, Up};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The short timeouts the test configures, in ms.
const TIMEOUT_MS: u64 = 1_000;
/// How long after a timeout a connection must be closed by.
const CLOSE_MARGIN: Duration = Duration::from_secs(4);
/// The connection cap the test configures.
const CONNECTIONS_MAX: usize = 8;

/// A rustls client configuration (ring) trusting only the certificate in `cert`.
fn client_config(cert: &Path) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(cert).expect("read the certificate") {
        roots.add(cert.expect("a PEM certificate")).expect("a trusted root");
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A reqwest client speaking HTTPS with `tls`, reaching `localhost` at `address`.
fn https_client(tls: rustls::ClientConfig, address: SocketAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .resolve("localhost", address)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTPS client")
}

/// Reads until the server closes the connection (EOF or reset) or `within` passes; whether it closed in time.
async fn closed_within<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut buf = [0u8; 4096];
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_serves_https_with_its_limits_and_refuses_plain_http_cleanly() {
    let certs = tempfile::tempdir().expect("tempdir");
    let (cert, key) = compute::pg::tls::ensure_self_signed(&certs.path().join("tls"), &["localhost".to_owned()])
        .expect("a self-signed certificate");
    let timeout = TIMEOUT_MS.to_string();
    let connections_max = CONNECTIONS_MAX.to_string();
    let up = Up::start_with(&[
        "--api-tls-cert",
        &cert.display().to_string(),
        "--api-tls-key",
        &key.display().to_string(),
        "--http-header-read-timeout-ms",
        &timeout,
        "--http-keep-alive-timeout-ms",
        &timeout,
        "--http-connections-max",
        &connections_max,
    ]);
    let address: SocketAddr = up.process.address.parse().expect("an address");
    let base = format!("https://localhost:{}", address.port());
    let client = https_client(client_config(&cert), address);

    // A real HTTPS client: authenticated calls, a creation, the request id header.
    let listed = client
        .get(format!("{base}/v1/projects"))
        .bearer_auth(&up.key)
        .send()
        .await
        .expect("GET over HTTPS");
    assert_eq!(listed.status().as_u16(), 200);
    assert!(listed.headers().contains_key("x-request-id"));
    let created = client
        .post(format!("{base}/v1/projects"))
        .bearer_auth(&up.key)
        .header("content-type", "application/json")
        .body(r#"{"name":"over_tls"}"#)
        .send()
        .await
        .expect("POST over HTTPS");
    assert_eq!(created.status().as_u16(), 201);
    let body = created.text().await.expect("a body");
    assert!(body.contains("over_tls"), "{body}");
    let unauthenticated = client.get(format!("{base}/v1/projects")).send().await.expect("GET");
    assert_eq!(unauthenticated.status().as_u16(), 401);

    // A client that does not trust the certificate cannot talk to it: this is TLS, with this certificate.
    let other = tempfile::tempdir().expect("tempdir");
    let (other_cert, _) =
        compute::pg::tls::ensure_self_signed(other.path(), &["localhost".to_owned()]).expect("another certificate");
    let stranger = https_client(client_config(&other_cert), address);
    let refused = stranger.get(format!("{base}/v1/projects")).send().await;
    assert!(refused.is_err(), "a certificate the client does not trust: {refused:?}");

    // Plain HTTP to the TLS port: a clean 400 with the error envelope, then the close.
    let plain = request(&up.process.address, "GET", "/v1/projects", Some(&up.key), None, &[]).await;
    plain.assert_error(400, "invalid_request");
    assert!(plain.body.contains("HTTPS"), "{}", plain.body);

    // The timeouts hold on the TLS port: nothing sent, and half a head after the handshake.
    let mut silent = TcpStream::connect(address).await.expect("connect");
    let started = Instant::now();
    assert!(
        closed_within(&mut silent, Duration::from_millis(TIMEOUT_MS) + CLOSE_MARGIN).await,
        "a socket that sent nothing to the TLS port stayed open"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(TIMEOUT_MS / 2),
        "closed too early"
    );
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(&cert)));
    let tcp = TcpStream::connect(address).await.expect("connect");
    let mut half = connector
        .connect(ServerName::try_from("localhost").expect("a name"), tcp)
        .await
        .expect("a handshake");
    half.write_all(b"GET /v1/projects HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .expect("half a head");
    half.flush().await.expect("flush");
    assert!(
        closed_within(&mut half, Duration::from_millis(TIMEOUT_MS) + CLOSE_MARGIN).await,
        "half a head over TLS stayed open"
    );

    // The cap holds on the TLS port: the holders' handshakes take every slot, a new connection is closed at
    // once (no plain 503 a TLS client could not read), and the service recovers when the holders are closed.
    let mut holders = Vec::new();
    for _ in 0..CONNECTIONS_MAX {
        holders.push(TcpStream::connect(address).await.expect("connect"));
    }
    // The server accepts them in order; one more is past the cap once all are counted.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = TcpStream::connect(address).await.expect("connect");
    let started = Instant::now();
    assert!(
        closed_within(&mut extra, Duration::from_millis(TIMEOUT_MS / 2)).await,
        "a connection past the cap was not closed at once"
    );
    assert!(started.elapsed() < Duration::from_millis(TIMEOUT_MS / 2));
    for mut holder in holders {
        assert!(
            closed_within(&mut holder, Duration::from_millis(TIMEOUT_MS) + CLOSE_MARGIN).await,
            "a holder stayed open"
        );
    }
    let again = client
        .get(format!("{base}/v1/projects"))
        .bearer_auth(&up.key)
        .send()
        .await
        .expect("served again after the holders went");
    assert_eq!(again.status().as_u16(), 200);
}
