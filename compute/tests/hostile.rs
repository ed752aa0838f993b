//! Issue 13's findings on the compute, each reproduced as a client would do it (tokio-postgres, or raw bytes
//! on a socket) against the pg front over VFS sessions on a `MemoryPageStore`:
//!
//! 1. an idle reader inside a transaction does not block writers; a writer whose snapshot was passed gets
//!    40001, not XX000;
//! 2. plain SQL cannot brick the database (page size, writable schema, exclusive locking, files);
//! 3. a runaway statement stops on a cancel request, on `statement_timeout`, and when its client goes; an
//!    idle transaction ends at `idle_in_transaction_session_timeout`;
//!
//! Finding 6 (malformed protocol messages) is `pg_bytes.rs`, a binary of its own for its panic hook.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use compute::page_store::MemoryPageStore;
use compute::pg::{serve_with, ServeConfig, SessionDefaults, VfsSessionFactory};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// An infinite statement: counts a recursive sequence that never ends.
const RUNAWAY: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
/// How long a stopped statement may take to end: bounds every wait below.
const STOP_BOUND: Duration = Duration::from_secs(10);

/// A server over a fresh registered database `name`; returns its port and a stop handle.
async fn start(name: &str, defaults: SessionDefaults) -> (u16, tokio::sync::oneshot::Sender<()>) {
    start_with_tls(name, defaults, None).await
}

/// [`start`], with TLS.
async fn start_with_tls(
    name: &str,
    defaults: SessionDefaults,
    tls: Option<compute::pg::tls::ServerTls>,
) -> (u16, tokio::sync::oneshot::Sender<()>) {
    compute::vfs::register_database(name, Arc::new(MemoryPageStore::new())).expect("register");
    serve_registered(defaults, tls).await
}

/// A server over the databases registered already; returns its port and a stop handle.
async fn serve_registered(
    defaults: SessionDefaults,
    tls: Option<compute::pg::tls::ServerTls>,
) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let factory = Arc::new(VfsSessionFactory::new(HashMap::from([(
        "app".to_owned(),
        "secret".to_owned(),
    )])));
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let config = ServeConfig {
        session_defaults: defaults,
        tls,
    };
    tokio::spawn(serve_with(listener, factory, config, async move {
        let _ = stop_rx.await;
    }));
    (port, stop)
}

async fn connect(port: u16, database: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=app password=secret dbname={database}"),
        NoTls,
    )
    .await?;
    tokio::spawn(connection);
    Ok(client)
}

fn code(error: &tokio_postgres::Error) -> Option<&SqlState> {
    error.as_db_error().map(|db| db.code())
}

async fn count(client: &Client) -> Result<i64, tokio_postgres::Error> {
    Ok(client.query_one("SELECT count(*) FROM t", &[]).await?.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_reader_does_not_block_writers() -> TestResult {
    let (port, _stop) = start("hostile_reader", SessionDefaults::default()).await;
    let writer = connect(port, "hostile_reader").await?;
    writer
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a')")
        .await?;
    let reader = connect(port, "hostile_reader").await?;
    reader.batch_execute("BEGIN").await?;
    assert_eq!(count(&reader).await?, 1);

    // Today's failure: every INSERT waited 5 s and failed with `database is locked` (XX000).
    let started = Instant::now();
    for id in 2..=20 {
        writer
            .execute(&format!("INSERT INTO t VALUES ({id}, 'w')"), &[])
            .await?;
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "19 inserts took {:?}: they waited on the reader",
        started.elapsed()
    );
    assert_eq!(
        count(&reader).await?,
        1,
        "the reader's snapshot is the one its transaction began with"
    );
    assert_eq!(count(&writer).await?, 20);

    // The reader may not write on top of its passed snapshot: a retryable serialization failure.
    let stale = reader
        .execute("INSERT INTO t VALUES (100, 'r')", &[])
        .await
        .expect_err("a passed snapshot cannot write");
    assert_eq!(code(&stale), Some(&SqlState::T_R_SERIALIZATION_FAILURE), "{stale:?}");
    reader.batch_execute("ROLLBACK").await?;
    // Retried, it goes through.
    reader.execute("INSERT INTO t VALUES (100, 'r')", &[]).await?;
    assert_eq!(count(&writer).await?, 21);

    // Two writers: the second waits for the first's transaction, then is told the lock is not available.
    writer.batch_execute("BEGIN; INSERT INTO t VALUES (200, 'x')").await?;
    let blocked = reader
        .execute("INSERT INTO t VALUES (201, 'y')", &[])
        .await
        .expect_err("one writer at a time");
    assert_eq!(code(&blocked), Some(&SqlState::LOCK_NOT_AVAILABLE), "{blocked:?}");
    writer.batch_execute("COMMIT").await?;
    reader.execute("INSERT INTO t VALUES (201, 'y')", &[]).await?;
    assert_eq!(count(&reader).await?, 23);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_sql_cannot_brick_the_database() -> TestResult {
    let (port, _stop) = start("hostile_brick", SessionDefaults::default()).await;
    let client = connect(port, "hostile_brick").await?;
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a')")
        .await?;
    for sql in [
        "PRAGMA page_size=16384",
        "PRAGMA writable_schema=ON",
        "PRAGMA locking_mode=EXCLUSIVE",
        "PRAGMA journal_mode=DELETE",
        "PRAGMA synchronous=OFF",
        "ATTACH '/tmp/cambium-hostile.db' AS other",
        "VACUUM INTO '/tmp/cambium-hostile-copy.db'",
    ] {
        let error = client.batch_execute(sql).await.expect_err(sql);
        assert_eq!(
            code(&error),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "{sql}: {error:?}"
        );
        let message = error
            .as_db_error()
            .map(|db| db.message().to_owned())
            .unwrap_or_default();
        assert!(
            message.contains("not allowed") || message.contains("not set"),
            "{sql}: {message}"
        );
    }
    let error = client
        .batch_execute("UPDATE sqlite_master SET sql = 'garbage' WHERE name = 't'")
        .await
        .expect_err("the schema table is not writable");
    assert_eq!(code(&error), Some(&SqlState::INSUFFICIENT_PRIVILEGE), "{error:?}");
    // VACUUM itself works and keeps the page size; every connection still opens and reads.
    client.batch_execute("VACUUM").await?;
    let other = connect(port, "hostile_brick").await?;
    let page_size: i64 = other.query_one("PRAGMA page_size", &[]).await?.get(0);
    assert_eq!(page_size, 8192);
    let integrity: String = other.query_one("PRAGMA integrity_check", &[]).await?.get(0);
    assert_eq!(integrity, "ok");
    other.execute("INSERT INTO t VALUES (2, 'b')", &[]).await?;
    assert_eq!(count(&client).await?, 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_statement_stops_on_cancel() -> TestResult {
    let (port, _stop) = start("hostile_cancel", SessionDefaults::default()).await;
    let client = connect(port, "hostile_cancel").await?;
    client.batch_execute("CREATE TABLE t (x BIGINT)").await?;
    let token = client.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel_query(NoTls).await
    });
    let started = Instant::now();
    let error = tokio::time::timeout(STOP_BOUND, client.query_one(RUNAWAY, &[]))
        .await?
        .expect_err("cancelled");
    canceller.await??;
    assert_eq!(code(&error), Some(&SqlState::QUERY_CANCELED), "{error:?}");
    assert!(started.elapsed() < STOP_BOUND);
    // The statement really ended: the session answers its next query.
    let answered = tokio::time::timeout(STOP_BOUND, count(&client)).await??;
    assert_eq!(answered, 0);
    // A cancel stops the statement it was for, never the next ones: the client is told 57014 at once, while
    // the cancelled statement may still be being interrupted; a statement sent right after it runs to its end.
    for round in 0..5 {
        let token = client.cancel_token();
        let canceller = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            token.cancel_query(NoTls).await
        });
        let error = tokio::time::timeout(STOP_BOUND, client.query_one(RUNAWAY, &[]))
            .await?
            .expect_err("cancelled");
        canceller.await??;
        assert_eq!(
            code(&error),
            Some(&SqlState::QUERY_CANCELED),
            "round {round}: {error:?}"
        );
        tokio::time::timeout(STOP_BOUND, client.simple_query("SELECT pg_sleep(0.3)"))
            .await?
            .unwrap_or_else(|e| panic!("round {round}: the statement after a cancel was stopped: {e:?}"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_is_a_session_setting_and_a_server_default() -> TestResult {
    let defaults = SessionDefaults {
        statement_timeout_ms: 400,
        idle_in_transaction_timeout_ms: 0,
    };
    let (port, _stop) = start("hostile_timeout", defaults).await;
    let client = connect(port, "hostile_timeout").await?;
    let shown: String = client.query_one("SHOW statement_timeout", &[]).await?.get(0);
    assert_eq!(shown, "400ms", "shown as PostgreSQL shows it");
    let error = tokio::time::timeout(STOP_BOUND, client.query_one(RUNAWAY, &[]))
        .await?
        .expect_err("timed out");
    assert_eq!(code(&error), Some(&SqlState::QUERY_CANCELED), "{error:?}");
    let message = error
        .as_db_error()
        .map(|db| db.message().to_owned())
        .unwrap_or_default();
    assert!(message.contains("statement timeout"), "{message}");
    client.batch_execute("SET statement_timeout = '2s'").await?;
    let shown: String = client.query_one("SHOW statement_timeout", &[]).await?.get(0);
    assert_eq!(shown, "2s");
    // A quick statement is not affected.
    client.query_one("SELECT 1", &[]).await?;
    let bad = client
        .batch_execute("SET statement_timeout = 'soon'")
        .await
        .expect_err("not a duration");
    assert_eq!(code(&bad), Some(&SqlState::INVALID_PARAMETER_VALUE), "{bad:?}");
    let unknown = client
        .batch_execute("SET no_such_setting = 1")
        .await
        .expect_err("unknown");
    assert_eq!(code(&unknown), Some(&SqlState::UNDEFINED_OBJECT), "{unknown:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_whose_client_disappears_ends() -> TestResult {
    let (port, _stop) = start("hostile_gone", SessionDefaults::default()).await;
    let setup = connect(port, "hostile_gone").await?;
    setup.batch_execute("CREATE TABLE t (x BIGINT)").await?;
    // A runaway *write*: while it runs it holds the database's write lock.
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=app password=secret dbname=hostile_gone"),
        NoTls,
    )
    .await?;
    let connection = tokio::spawn(connection);
    let runaway = tokio::spawn(async move {
        client
            .batch_execute(
                "INSERT INTO t WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The client dies: its connection closes with the statement still running.
    runaway.abort();
    connection.abort();
    // Once the server notices, the statement stops and its lock goes: another session writes.
    let deadline = Instant::now() + STOP_BOUND;
    loop {
        match setup.execute("INSERT INTO t VALUES (-1)", &[]).await {
            Ok(_) => break,
            Err(error) if code(&error) == Some(&SqlState::LOCK_NOT_AVAILABLE) && Instant::now() < deadline => {}
            Err(error) => return Err(error.into()),
        }
    }
    let rows: i64 = setup
        .query_one("SELECT count(*) FROM t WHERE x = -1", &[])
        .await?
        .get(0);
    assert_eq!(rows, 1);
    let partial: i64 = setup.query_one("SELECT count(*) FROM t WHERE x > 0", &[]).await?.get(0);
    assert_eq!(partial, 0, "the interrupted INSERT left nothing");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_transaction_ends_and_lets_writers_in() -> TestResult {
    let (port, _stop) = start("hostile_idle", SessionDefaults::default()).await;
    let setup = connect(port, "hostile_idle").await?;
    setup.batch_execute("CREATE TABLE t (x BIGINT)").await?;
    let idle = connect(port, "hostile_idle").await?;
    // A SET in a text of several statements, as PostgreSQL takes it (it once had to be a text of its own).
    idle.batch_execute("SET idle_in_transaction_session_timeout = 300; BEGIN; INSERT INTO t VALUES (1)")
        .await?;
    // It sits on the write lock; after the timeout its transaction is rolled back and its connection ended.
    tokio::time::sleep(Duration::from_millis(900)).await;
    setup.execute("INSERT INTO t VALUES (2)", &[]).await?;
    let error = idle
        .batch_execute("COMMIT")
        .await
        .expect_err("the connection was ended");
    assert!(
        code(&error) == Some(&SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT) || error.is_closed(),
        "{error:?}"
    );
    let values: Vec<i64> = setup
        .query("SELECT x FROM t ORDER BY x", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(values, vec![2], "the idle transaction's row was rolled back");
    Ok(())
}

/// A client that disconnects inside a transaction lets go of the write lock at once: its session ends with
/// its connection (it used to live on in the idle-transaction timer, holding the lock for that timer's 10
/// minutes, so every other writer failed with 55P03 meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_inside_a_transaction_lets_writers_in_at_once() -> TestResult {
    let defaults = SessionDefaults {
        idle_in_transaction_timeout_ms: 600_000,
        ..SessionDefaults::default()
    };
    let (port, _stop) = start("hostile_gone_in_tx", defaults).await;
    let setup = connect(port, "hostile_gone_in_tx").await?;
    setup.batch_execute("CREATE TABLE t (x BIGINT)").await?;
    let gone = connect(port, "hostile_gone_in_tx").await?;
    gone.batch_execute("BEGIN; INSERT INTO t VALUES (1)").await?;
    drop(gone);
    let started = Instant::now();
    let mut inserted = false;
    while started.elapsed() < Duration::from_secs(20) {
        if setup.execute("INSERT INTO t VALUES (2)", &[]).await.is_ok() {
            inserted = true;
            break;
        }
    }
    assert!(inserted, "the write lock stayed with a client that was gone");
    let values: Vec<i64> = setup
        .query("SELECT x FROM t ORDER BY x", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(values, vec![2], "the gone client's row was rolled back");
    Ok(())
}

/// Finding 7: passwords never travel in cleartext. The server asks for SCRAM-SHA-256 (never a cleartext
/// password); a wrong password and an unknown user fail the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_is_scram_sha_256() -> TestResult {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (port, _stop) = start("hostile_scram", SessionDefaults::default()).await;
    let mut body = 196_608u32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0app\0database\0hostile_scram\0\0");
    let mut startup = u32::try_from(body.len() + 4)?.to_be_bytes().to_vec();
    startup.extend_from_slice(&body);
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    socket.write_all(&startup).await?;
    let mut header = [0u8; 9];
    tokio::time::timeout(STOP_BOUND, socket.read_exact(&mut header)).await??;
    assert_eq!(header[0], b'R', "an authentication request");
    let auth_code = u32::from_be_bytes(header[5..9].try_into()?);
    assert_eq!(auth_code, 10, "AuthenticationSASL, not 3 (cleartext) or 5 (MD5)");
    let length = u32::from_be_bytes(header[1..5].try_into()?) as usize;
    let mut mechanisms = vec![0u8; length - 8];
    socket.read_exact(&mut mechanisms).await?;
    assert!(String::from_utf8_lossy(&mechanisms).contains("SCRAM-SHA-256"));

    for (user, password) in [("app", "wrong"), ("nobody", "secret")] {
        let refused = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={port} user={user} password={password} dbname=hostile_scram"),
            NoTls,
        )
        .await
        .err()
        .ok_or("refused")?;
        assert_eq!(code(&refused), Some(&SqlState::INVALID_PASSWORD), "{user}: {refused:?}");
    }
    let client = connect(port, "hostile_scram").await?;
    client.query_one("SELECT 1", &[]).await?;
    Ok(())
}

/// Finding 7: TLS on the PostgreSQL listener. With a self-signed certificate made at first start, psql
/// connects with `sslmode=require`, and with `sslmode=verify-full` when it trusts that certificate; a client
/// that does not ask for TLS still connects (as PostgreSQL's `host` lines allow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_self_signed_certificate() -> TestResult {
    if std::process::Command::new("psql").arg("--version").output().is_err() {
        eprintln!("SKIPPED: psql is not installed");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let (cert, key) = compute::pg::tls::ensure_self_signed(&dir.path().join("tls"), &names)?;
    let tls = compute::pg::tls::acceptor(&cert, &key)?;
    let (port, _stop) = start_with_tls("hostile_tls", SessionDefaults::default(), Some(tls)).await;
    let cert_path = cert.to_string_lossy().into_owned();
    for (host, options) in [
        ("127.0.0.1", "sslmode=require".to_owned()),
        ("localhost", format!("sslmode=verify-full sslrootcert={cert_path}")),
        ("127.0.0.1", "sslmode=disable".to_owned()),
    ] {
        let uri = format!("host={host} port={port} user=app dbname=hostile_tls {options}");
        let output = tokio::process::Command::new("psql")
            .args([uri.as_str(), "-XAtc", "SELECT 40 + 2"])
            .env("PGPASSWORD", "secret")
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .await?;
        assert!(
            output.status.success(),
            "{options}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "42", "{options}");
    }
    // A certificate the client does not trust is refused by verify-full.
    let other = tempfile::tempdir()?;
    let (other_cert, _) = compute::pg::tls::ensure_self_signed(other.path(), &names)?;
    let uri = format!(
        "host=localhost port={port} user=app dbname=hostile_tls sslmode=verify-full sslrootcert={}",
        other_cert.to_string_lossy()
    );
    let output = tokio::process::Command::new("psql")
        .args([uri.as_str(), "-XAtc", "SELECT 1"])
        .env("PGPASSWORD", "secret")
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .await?;
    assert!(
        !output.status.success(),
        "an untrusted certificate must fail verify-full"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_shutdown_ends_its_connections_and_their_write_locks() -> TestResult {
    let (port, stop) = start("hostile_shutdown", SessionDefaults::default()).await;
    let holder = connect(port, "hostile_shutdown").await?;
    // (Two texts: in one, the BEGIN would make the CREATE part of the block the shutdown rolls back.)
    holder.batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY)").await?;
    holder.batch_execute("BEGIN; INSERT INTO t VALUES (1)").await?;
    let idle = connect(port, "hostile_shutdown").await?;
    stop.send(()).map_err(|()| "the server stopped already")?;

    // Each connection's own thread sees the shutdown while its connection waits for its client.
    for client in [&holder, &idle] {
        let ended = tokio::time::timeout(STOP_BOUND, async {
            loop {
                if client.simple_query("SELECT 1").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            ended.is_ok(),
            "a connection still answered {STOP_BOUND:?} after the shutdown"
        );
    }

    // The holder's session went with its connection: its transaction rolled back, the writer's lock free.
    assert!(compute::vfs::is_registered("hostile_shutdown"));
    let (port, _stop) = serve_registered(SessionDefaults::default(), None).await;
    let writer = connect(port, "hostile_shutdown").await?;
    let started = Instant::now();
    writer.execute("INSERT INTO t VALUES (2)", &[]).await?;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the write waited on the ended session"
    );
    assert_eq!(count(&writer).await?, 1, "the ended session's insert was rolled back");
    Ok(())
}
