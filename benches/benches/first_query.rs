//! What the first query on a new branch waits for after `POST /v1/databases/{id}/branches` returns (issue 12
//! item 6: the target is ≤ 1 ms), through a release `cambium up`.
//!
//! A database with a table of 1000 short rows; then, `FIRST_QUERY_BRANCHES` times (default 30, after 3 untimed):
//! the branch is made (timed to the `201`), a connection to it is opened (TCP, startup, SCRAM, the session: the
//! compute host starts the branch's store here, the first session of the branch), a point read runs on it (timed),
//! then a one-row `UPDATE` on it (the branch's first commit, which waits for what is left of its election), and
//! then a second connection with its first read and a commit (the store already running), to tell the store's
//! start from what every connection costs. The host's `/metrics` says how long the stores' starts spent electing
//! and asking for the database size. Prints medians and p99s.
//!
//! PostgreSQL 15 beside it, as the yardstick of what a connection costs (a throwaway server as the tests make one,
//! `api/src/testing_postgres.rs`, with SCRAM-SHA-256 over TCP as a real server's clients authenticate, and the
//! same client library and table): the same number of databases made by `CREATE DATABASE … TEMPLATE` (untimed:
//! PostgreSQL's copy of a database; `fsync` on), each then connected to, read from and written as the branches
//! are, then a second connection, read and commit. Skipped, saying so, where PostgreSQL 15 is not installed
//! (`PG_BIN`).
//!
//! `cargo build --release --bin cambium && cargo bench -p cambium-benches --bench first_query` (`CAMBIUM_BIN`
//! overrides the binary; `FIRST_QUERY_PAUSE_MS` waits that long between the `201` and the connection, to see what
//! a branch's background work still costs its first query when the client comes later). In `cargo test`'s bench mode (`--bench` absent) it does nothing.

#[path = "../../api/src/testing_postgres.rs"]
mod postgres;
#[path = "common/service.rs"]
mod service;

use std::str::FromStr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const SCHEMA: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL, n BIGINT NOT NULL DEFAULT 0); \
     INSERT INTO t (id, v) SELECT g, 'row ' || g FROM generate_series(1, 1000) AS g";
const READ: &str = "SELECT v FROM t WHERE id = 500";
/// Changes the row's bytes: an `UPDATE` writing the value a row holds leaves SQLite's page clean, so its
/// "commit" writes nothing (what this bench timed before 2026-12-07).
const WRITE: &str = "UPDATE t SET n = n + 1 WHERE id = 1 RETURNING n";

/// Connects to `branch` with the password of `database`'s connection string (a branch's string has none).
async fn connect_branch(database: &Value, branch: &Value) -> tokio_postgres::Client {
    let mut config =
        tokio_postgres::Config::from_str(database["connection_uri"].as_str().expect("uri")).expect("database uri");
    let branch_config =
        tokio_postgres::Config::from_str(branch["connection_uri"].as_str().expect("uri")).expect("branch uri");
    config.dbname(branch_config.get_dbname().expect("the branch's name"));
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect to the branch");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Median and p99 of `samples`, in ms.
fn summary(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// The value of counter `name` in the Prometheus text `metrics`.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// One timed read: the row must be there.
async fn read(client: &tokio_postgres::Client) -> Duration {
    let started = Instant::now();
    let row = client.query_one(READ, &[]).await.expect("read");
    let elapsed = started.elapsed();
    assert_eq!(row.get::<_, String>(0), "row 500");
    elapsed
}

/// One timed one-row autocommit `UPDATE` of a counter beside the row's value (reads stay as they were); its
/// counter must be `expected` after it: a database's first commit makes it 1, the second 2.
async fn commit(client: &tokio_postgres::Client, expected: i64) -> Duration {
    let started = Instant::now();
    let row = client.query_one(WRITE, &[]).await.expect("commit");
    let elapsed = started.elapsed();
    assert_eq!(row.get::<_, i64>(0), expected, "the counter after the commit");
    elapsed
}

/// What a new database (a branch, or PostgreSQL's copy) costs a client, in the order the steps are named: a
/// connection, its first read, both together (from the database's creation to the first row), its first commit,
/// then a second connection, its read and its commit.
async fn connection_round<F, Fut>(connect: F) -> [Duration; 7]
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = tokio_postgres::Client>,
{
    let opened = Instant::now();
    let first = connect().await;
    let connect_first = opened.elapsed();
    let first_read = read(&first).await;
    let ready = opened.elapsed();
    let first_commit = commit(&first, 1).await;
    let opened = Instant::now();
    let second = connect().await;
    let connect_again = opened.elapsed();
    let second_read = read(&second).await;
    let second_commit = commit(&second, 2).await;
    [
        connect_first,
        first_read,
        ready,
        first_commit,
        connect_again,
        second_read,
        second_commit,
    ]
}

/// Records one round's samples (after the untimed first ones).
fn record(steps: &mut [Vec<Duration>], samples: impl IntoIterator<Item = Duration>) {
    for (step, sample) in steps.iter_mut().zip(samples) {
        step.push(sample);
    }
}

/// Branches, their connections and reads; the samples of each step.
async fn run(
    service: &service::Service,
    database: &Value,
    count: usize,
    pause: Duration,
) -> Vec<(&'static str, Vec<Duration>)> {
    let id = database["id"].as_str().expect("id");
    let mut steps: [Vec<Duration>; 8] = Default::default();
    let mut made = Vec::with_capacity(count + 3);
    let run = jiff::Timestamp::now().as_millisecond();
    for i in 0..count + 3 {
        let started = Instant::now();
        let reply = service
            .post(
                &format!("/v1/databases/{id}/branches"),
                json!({ "name": format!("f{run}_{i}") }),
            )
            .await;
        let post = started.elapsed();
        let branch = &reply["branch"];
        made.push(branch["id"].as_str().expect("id").to_owned());
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let round = connection_round(|| connect_branch(database, branch)).await;
        if i >= 3 {
            record(&mut steps, std::iter::once(post).chain(round));
        }
    }
    for branch in made {
        service.delete(&format!("/v1/branches/{branch}")).await;
    }
    let names = [
        "POST …/branches, to the 201",
        "first connection (the branch's store starts)",
        "its first read",
        "from the 201 to the first row",
        "its first commit (one-row UPDATE, right after the read)",
        "a second connection (the store running)",
        "its first read",
        "its commit",
    ];
    names.into_iter().zip(steps).collect()
}

/// PostgreSQL 15's databases made by `CREATE DATABASE … TEMPLATE`, their connections and reads, as [`run`]'s
/// steps (the creation untimed); `None` without PostgreSQL 15.
async fn run_postgres(count: usize) -> Option<Vec<(&'static str, Vec<Duration>)>> {
    const PASSWORD: &str = "first-query";
    // `fsync` on, as on a real server: the commits are compared.
    let server = postgres::TestPostgres::start_durable()?;
    let template = server.create_database("first");
    let admin = service::connect(&server.url("postgres")).await;
    let setup = service::connect(&template).await;
    setup
        .batch_execute(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL, n BIGINT NOT NULL DEFAULT 0); \
             INSERT INTO t (id, v) SELECT g, 'row ' || g FROM generate_series(1, 1000) AS g",
        )
        .await
        .expect("the table");
    drop(setup);
    server.require_password(PASSWORD);
    let with_password = |database: &str| {
        server
            .url(database)
            .replacen("cambium@", &format!("cambium:{PASSWORD}@"), 1)
    };
    let mut steps: [Vec<Duration>; 7] = Default::default();
    for i in 0..count + 3 {
        let name = format!("f{i}");
        admin
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE first"))
            .await
            .expect("create database");
        let url = with_password(&name);
        let round = connection_round(|| service::connect(&url)).await;
        if i >= 3 {
            record(&mut steps, round);
        }
    }
    let names = [
        "first connection (SCRAM) to a database just made by CREATE DATABASE … TEMPLATE",
        "its first read",
        "from CREATE DATABASE's return to the first row",
        "its first commit (one-row UPDATE, right after the read)",
        "a second connection",
        "its first read",
        "its commit",
    ];
    Some(names.into_iter().zip(steps).collect())
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let bin = service::cambium_binary();
    let count = service::env_usize("FIRST_QUERY_BRANCHES", 30);
    let data_dir = cambium_benches::scratch_dir("first-query");
    service::runtime().block_on(async {
        let service = service::start(&bin, data_dir.path());
        let project = service.project("first").await;
        let database = service.database(&project, "first", SCHEMA).await;
        let pause = Duration::from_millis(service::env_usize("FIRST_QUERY_PAUSE_MS", 0) as u64);
        let steps = run(&service, &database, count, pause).await;
        let metrics = reqwest::Client::new()
            .get(format!("{}/metrics", service.url))
            .bearer_auth(&service.key)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics body");
        let starts = counter(&metrics, "cambium_compute_store_starts_total");
        // Every branch's first commit waits for its election: fewer elections than branches would mean commits
        // that wrote nothing.
        assert!(
            starts >= (count + 3) as f64,
            "{starts} elections for {} branches",
            count + 3
        );
        let election_ms = counter(&metrics, "cambium_compute_store_start_election_microseconds_total") / 1e3;
        let db_size_ms = counter(&metrics, "cambium_compute_store_start_db_size_microseconds_total") / 1e3;
        println!("cambium up (release), {count} new branches of a database with 1000 rows, 2-core machine");
        println!("| step | median | p99 |\n|---|---|---|");
        for (step, samples) in steps {
            let (p50, p99) = summary(samples);
            println!("| {step} | {p50:.2} ms | {p99:.2} ms |");
        }
        println!(
            "store starts: {starts:.0}, mean election {:.2} ms, mean GetDbSize {:.2} ms (from /metrics)",
            election_ms / starts.max(1.0),
            db_size_ms / starts.max(1.0)
        );
        drop(service);
        match run_postgres(count).await {
            Some(steps) => {
                println!("PostgreSQL 15 (fsync on, SCRAM-SHA-256 over TCP, same client), {count} new databases");
                println!("| step | median | p99 |\n|---|---|---|");
                for (step, samples) in steps {
                    let (p50, p99) = summary(samples);
                    println!("| {step} | {p50:.2} ms | {p99:.2} ms |");
                }
            }
            None => println!("PostgreSQL 15: skipped (no binaries; set PG_BIN)"),
        }
    });
}
