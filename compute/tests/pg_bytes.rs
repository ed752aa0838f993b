//! Issue 13, finding 6: malformed protocol messages (a startup message then a 2-byte Bind, short Parse
//! fields, bad lengths, seeded random mutations) close the connection; none panics pgwire's decoder (a panic
//! hook counts them: this binary holds this one test), and the server goes on serving.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use compute::page_store::MemoryPageStore;
use compute::pg::{serve, VfsSessionFactory};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::NoTls;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// How long one raw conversation may take.
const STOP_BOUND: Duration = Duration::from_secs(10);

/// A StartupMessage for user `app` on database `db`.
fn startup_message(db: &str) -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec();
    for (key, value) in [("user", "app"), ("database", db)] {
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut message = u32::try_from(body.len() + 4).expect("short").to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    message
}

/// Sends `bytes` on a fresh connection and reads until the server closes it (bounded).
async fn send_raw(port: u16, bytes: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    socket.write_all(bytes).await?;
    // Nothing more comes: a server waiting for a password sees the end at once.
    socket.shutdown().await?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(STOP_BOUND, socket.read_to_end(&mut answer)).await;
    match read {
        Ok(Ok(_)) => Ok(answer),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionReset => Ok(answer),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the server kept the connection open",
        )),
    }
}

/// Counts panics in this test binary (it holds this one test, so no other test's panic counts).
static PANICS: AtomicUsize = AtomicUsize::new(0);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_close_the_connection_without_a_panic() -> TestResult {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    compute::vfs::register_database("hostile_bytes", Arc::new(MemoryPageStore::new()))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let factory = Arc::new(VfsSessionFactory::new(HashMap::from([(
        "app".to_owned(),
        "secret".to_owned(),
    )])));
    tokio::spawn(serve(listener, factory, std::future::pending()));
    let startup = startup_message("hostile_bytes");
    let mut cases: Vec<Vec<u8>> = Vec::new();
    // The finding: a startup message, then a Bind of 2 bytes.
    let mut short_bind = startup.clone();
    short_bind.extend_from_slice(&[b'B', 0, 0, 0, 6, 0, 0]);
    cases.push(short_bind);
    // A Parse that claims more parameter types than it has; a length below 4; a huge length; junk.
    let mut parse = startup.clone();
    parse.extend_from_slice(&[b'P', 0, 0, 0, 8, 0, 0, 0xff, 0xff]);
    cases.push(parse);
    cases.push(vec![0, 0, 0, 2]);
    let mut huge = startup.clone();
    huge.extend_from_slice(&[b'Q', 0x7f, 0xff, 0xff, 0xff]);
    cases.push(huge);
    cases.push(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec());
    // Seeded random mutations of a valid conversation.
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..200 {
        let mut bytes = startup.clone();
        bytes.extend_from_slice(&[b'B', 0, 0, 0, 14, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0]);
        let flips = 1 + next() % 4;
        for _ in 0..flips {
            let at = (next() as usize) % bytes.len();
            bytes[at] = next() as u8;
        }
        if next() % 3 == 0 {
            let cut = (next() as usize) % bytes.len();
            bytes.truncate(cut.max(1));
        }
        cases.push(bytes);
    }
    for bytes in &cases {
        // Each ends, one way or another, in bounded time: closed, or refused at authentication.
        let _ = send_raw(port, bytes).await;
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "no byte sequence panics the server");
    // The server still serves.
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=app password=secret dbname=hostile_bytes"),
        NoTls,
    )
    .await?;
    tokio::spawn(connection);
    client.query_one("SELECT 1", &[]).await?;
    Ok(())
}
