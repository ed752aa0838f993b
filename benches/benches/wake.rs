//! Scale to zero (issue 15 item 8): how long the first query on a database suspended for idleness takes from the
//! start of the connection (the target is 50 ms), through a release `cambium up`.
//!
//! A database with a table of 1000 short rows and `suspend_timeout_seconds` 1; then, `WAKE_ROUNDS` times (default
//! 20, after 2 untimed): wait until the API shows it `suspended` for idleness (its stores stopped), then open a
//! connection (TCP, startup, SCRAM, the session: the compute host starts the default branch's store here, which
//! wakes the database) and run a point read on it, timed together from before the connect to the row; then
//! close it. For comparison, the same connection and read on the database while it is active. Prints medians
//! and p99s.
//!
//! `cargo build --release --bin cambium && cargo bench -p cambium-benches --bench wake` (`CAMBIUM_BIN` overrides
//! the binary). In `cargo test`'s bench mode (`--bench` absent) it does nothing.

#[path = "common/service.rs"]
mod service;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

const SCHEMA: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL); \
     INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 1000) AS g";
const READ: &str = "SELECT v FROM t WHERE id = 500";
/// The longest wait for the database to be suspended or active again.
const SETTLE: Duration = Duration::from_secs(30);

/// Median and p99 of `samples`, in ms.
fn summary(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// Waits until database `id` shows `status`.
async fn wait_status(service: &service::Service, id: &str, status: &str) {
    let deadline = Instant::now() + SETTLE;
    loop {
        let database = service.get(&format!("/v1/databases/{id}")).await;
        if database["database"]["status"] == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "database {id} never became {status}: {database}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// From the start of a connection to `uri` to the row of its first read.
async fn connect_and_read(uri: &str) -> Duration {
    let started = Instant::now();
    let client = service::connect(uri).await;
    let row = client.query_one(READ, &[]).await.expect("read");
    let elapsed = started.elapsed();
    assert_eq!(row.get::<_, String>(0), "row 500");
    elapsed
}

/// `rounds` wakes and `rounds` connections to the active database; the samples of each.
async fn run(service: &service::Service, database: &Value, rounds: usize) -> [Vec<Duration>; 2] {
    let id = database["id"].as_str().expect("id");
    let uri = database["connection_uri"].as_str().expect("uri");
    let mut woken = Vec::with_capacity(rounds);
    let mut active = Vec::with_capacity(rounds);
    for i in 0..rounds + 2 {
        wait_status(service, id, "suspended").await;
        let wake = connect_and_read(uri).await;
        wait_status(service, id, "active").await;
        let warm = connect_and_read(uri).await;
        if i >= 2 {
            woken.push(wake);
            active.push(warm);
        }
    }
    [woken, active]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let bin = service::cambium_binary();
    let rounds = service::env_usize("WAKE_ROUNDS", 20);
    let data_dir = cambium_benches::scratch_dir("wake");
    service::runtime().block_on(async {
        let service = service::start(&bin, data_dir.path());
        let project = service.project("wake").await;
        let database = service.database(&project, "wake", SCHEMA).await;
        let id = database["id"].as_str().expect("id");
        let (status, body) = service
            .call(
                reqwest::Method::PATCH,
                &format!("/v1/databases/{id}"),
                Some(json!({"suspend_timeout_seconds": 1})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let [woken, active] = run(&service, &database, rounds).await;
        service.delete(&format!("/v1/databases/{id}")).await;
        println!(
            "cambium up (release), {rounds} wakes of a database with 1000 rows suspended for idleness, 2-core machine"
        );
        println!("| from the connect to the first row | median | p99 |\n|---|---|---|");
        for (what, samples) in [("suspended for idleness (wakes it)", woken), ("active", active)] {
            let (p50, p99) = summary(samples);
            println!("| {what} | {p50:.2} ms | {p99:.2} ms |");
        }
    });
}
