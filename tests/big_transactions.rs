//! Transactions of any size (issue 12 item 5), with real processes.
//!
//! Against three `cambium safekeeper`s, a `cambium pageserver` and `cambium api` (which runs the computes)
//! (`common::faults::Deployment`), through tokio-postgres:
//!
//! - A 1 GiB transaction (rows of 4000 bytes, `BIGTX_MIB` for another size) commits while one safekeeper is
//!   killed with -9 in the middle of its COMMIT (the kill is checked to land before the COMMIT answered), and a
//!   new session reads every row back. The load's rate and the compute's peak RSS are printed; the peak RSS is
//!   asserted well under the transaction's size (the pages past 64 MiB go to a temporary file).
//! - Atomic under kill -9 of the compute: killed mid-transaction (its pages spilled, no COMMIT sent), killed
//!   mid-COMMIT (parts on the safekeepers, the commit record perhaps not), and killed just after a COMMIT of
//!   64 MiB answered; after each restart on the same ports the table holds what was committed before, plus all of
//!   the big transaction or none of it (all of it once acknowledged), never a part, and the restarted compute
//!   commits on top of abandoned parts.
//! - Over `--transaction-bytes-max`, COMMIT fails with SQLSTATE 54000 naming the limit, nothing of it is
//!   anywhere, and the session goes on (`cambium up`).

mod common;

use std::time::{Duration, Instant};

use common::api::{connect, Up};
use common::faults::{Deployment, DeploymentConfig};
use tokio_postgres::Client;

/// Bytes of a row's payload: two rows a page.
const ROW_BYTES: usize = 4000;
/// Rows inserted by one statement.
const ROWS_PER_STATEMENT: u64 = 8192;

/// Rows for a load of `mib` MiB of pages (two rows a page).
fn rows_for_mib(mib: u64) -> u64 {
    mib * 1024 * 1024 / 8192 * 2
}

/// The size of the big load, in MiB (`BIGTX_MIB`, default 1024).
fn load_mib() -> u64 {
    std::env::var("BIGTX_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

/// `big(id, b)`, with an index on `id` besides the table's own key, so counting and the id range read the
/// small index, not every page of the table (there is no prefetch yet: each page is one `GetPage`).
async fn create_table(client: &Client) {
    client
        .batch_execute("CREATE TABLE big (id bigint PRIMARY KEY, b text); CREATE INDEX big_ids ON big (id)")
        .await
        .expect("create");
}

/// Inserts rows `first..first + rows` into `big` (in the caller's transaction).
async fn insert_rows(client: &Client, first: u64, rows: u64) {
    let mut next = first;
    while next < first + rows {
        let last = (next + ROWS_PER_STATEMENT).min(first + rows) - 1;
        let statement =
            format!("INSERT INTO big SELECT g, repeat('x', {ROW_BYTES}) FROM generate_series({next}, {last}) AS g");
        client.simple_query(&statement).await.expect("insert");
        next = last + 1;
    }
}

/// The row count and the largest id (-1 for none), from the primary key's index: cheap however large the rows.
async fn count(client: &Client) -> (i64, i64) {
    let row = client
        .query_one("SELECT count(*), coalesce(max(id), -1) FROM big", &[])
        .await
        .expect("count");
    (row.get(0), row.get(1))
}

/// Reads a large table back cheaply: the row count and the id range (from the primary key's index), and a
/// sample of rows across the range whole (so pages of the table itself, written by the same transaction).
async fn check_rows(client: &Client, first: u64, rows: u64) {
    check_rows_from(client, first, rows).await;
}

/// [`check_rows`] over the ids `first..first + rows` only.
async fn check_rows_from(client: &Client, first: u64, rows: u64) {
    let statement = format!("SELECT count(*), min(id), max(id) FROM big WHERE id >= {first}");
    let row = client.query_one(&statement, &[]).await.expect("count");
    let (count, min, max): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(
        (count, min, max),
        (rows as i64, first as i64, (first + rows - 1) as i64)
    );
    let step = (rows / 64).max(1);
    let sample: Vec<String> = (first..first + rows)
        .step_by(step as usize)
        .map(|id| id.to_string())
        .collect();
    let statement = format!(
        "SELECT count(*) FROM big WHERE id IN ({}) AND b = repeat('x', {ROW_BYTES})",
        sample.join(",")
    );
    let matching: i64 = client.query_one(&statement, &[]).await.expect("sample").get(0);
    assert_eq!(matching, sample.len() as i64, "sampled rows whole");
}

/// Peak resident memory of process `pid` in MiB (`VmHWM`), if it can be read.
fn peak_rss_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Connects, retrying while the compute (re)starts.
async fn connect_retrying(uri: &str) -> Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match connect(uri).await {
            Ok(client) => return client,
            Err(e) if Instant::now() < deadline => {
                eprintln!("connect: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("no connection within a minute: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1gib_transaction_commits_through_a_safekeeper_kill() {
    let mut deployment = Deployment::start_with(DeploymentConfig {
        without_remote: true,
        ..DeploymentConfig::default()
    });
    let database = deployment.client().create_database("bigtx").await;
    let client = connect(&database.uri).await.expect("connect");
    create_table(&client).await;
    let mib = load_mib();
    let rows = rows_for_mib(mib);
    let started = Instant::now();
    client.simple_query("BEGIN").await.expect("begin");
    insert_rows(&client, 0, rows).await;
    let inserted = started.elapsed();
    let committing = Instant::now();
    let commit = tokio::spawn(async move {
        let result = client.simple_query("COMMIT").await.map(|_| ());
        (client, result)
    });
    // The WAL travels at COMMIT: kill a safekeeper while its parts stream.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mid_commit = !commit.is_finished();
    deployment.safekeepers[0].kill9();
    let (client, result) = commit.await.expect("commit task");
    result.expect("the COMMIT succeeds with two safekeepers of three");
    let committed = committing.elapsed();
    assert!(
        mid_commit,
        "the COMMIT ended before the kill (in {committed:?}): the test proves nothing"
    );
    let total = started.elapsed();
    let pid = deployment.api.pid().expect("the compute runs");
    let rss_mib = peak_rss_mib(pid);
    println!(
        "BIGTX: {mib} MiB in one transaction: {:.1} MiB/s overall ({inserted:?} inserting, {committed:?} committing, \
         {:.1} MiB/s), compute peak RSS {rss_mib:?} MiB",
        mib as f64 / total.as_secs_f64(),
        mib as f64 / committed.as_secs_f64(),
    );
    check_rows(&client, 0, rows).await;
    drop(client);
    // A new session (another snapshot, the pageserver's pages) sees all of it too.
    let reader = connect(&database.uri).await.expect("connect");
    check_rows(&reader, 0, rows).await;
    if let Some(rss_mib) = rss_mib {
        // The dirty pages past 64 MiB are in a file; SQLite, the caches and the parts in flight are bounded.
        let bound_mib = 600.min(mib.max(512));
        assert!(
            rss_mib < bound_mib,
            "compute peak RSS {rss_mib} MiB for a {mib} MiB transaction"
        );
    }
    deployment.safekeepers[0].restart();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_transaction_is_all_or_nothing_when_the_compute_is_killed() {
    let config = DeploymentConfig {
        // Small enough that the test is quick, large enough that the pages spill and the COMMIT takes a while.
        api_args: vec!["--dirty-memory-bytes-max".into(), (16u64 << 20).to_string()],
        ..DeploymentConfig::default()
    };
    let mut deployment = Deployment::start_with(DeploymentConfig {
        without_remote: true,
        ..config
    });
    let database = deployment.client().create_database("atomic").await;
    let client = connect(&database.uri).await.expect("connect");
    create_table(&client).await;
    insert_rows(&client, 0, 100).await;
    let before = count(&client).await;
    let rows = rows_for_mib(256);

    // Killed mid-transaction: nothing was sent, nothing is there.
    client.simple_query("BEGIN").await.expect("begin");
    insert_rows(&client, 1_000, rows).await;
    deployment.api.kill9();
    drop(client);
    deployment.api.restart();
    let client = connect_retrying(&database.uri).await;
    assert_eq!(
        count(&client).await,
        before,
        "a transaction killed before COMMIT left rows"
    );

    // Killed mid-COMMIT: all of it or none of it.
    client.simple_query("BEGIN").await.expect("begin");
    insert_rows(&client, 1_000, rows).await;
    let commit = tokio::spawn(async move { client.simple_query("COMMIT").await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mid_commit = !commit.is_finished();
    deployment.api.kill9();
    let outcome = commit.await.expect("commit task");
    deployment.api.restart();
    let client = connect_retrying(&database.uri).await;
    let after = count(&client).await;
    let all = (before.0 + rows as i64, 1_000 + rows as i64 - 1);
    println!("mid-commit kill: in flight {mid_commit}, COMMIT {outcome:?}, rows before {before:?}, after {after:?}");
    assert!(
        after == before || after == all,
        "half a transaction: {after:?}, not {before:?} or {all:?}"
    );
    if outcome.is_ok() {
        assert_eq!(after, all, "an acknowledged COMMIT is there");
    }
    if after == all {
        check_rows_from(&client, 1_000, rows).await;
    }
    assert!(
        mid_commit || outcome.is_ok(),
        "the COMMIT failed before the kill: {outcome:?}"
    );
    // The restarted compute writes on top of whatever the killed one left (its abandoned parts discarded).
    insert_rows(&client, 5_000_000, 3).await;
    assert_eq!(count(&client).await, (after.0 + 3, 5_000_002));

    // Killed right after its COMMIT answered: all of it is there.
    let acknowledged = count(&client).await;
    client.simple_query("BEGIN").await.expect("begin");
    insert_rows(&client, 6_000_000, rows_for_mib(64)).await;
    client.simple_query("COMMIT").await.expect("commit");
    deployment.api.kill9();
    drop(client);
    deployment.api.restart();
    let client = connect_retrying(&database.uri).await;
    let last = (6_000_000 + rows_for_mib(64) - 1) as i64;
    assert_eq!(count(&client).await, (acknowledged.0 + rows_for_mib(64) as i64, last));
    check_rows_from(&client, 6_000_000, rows_for_mib(64)).await;
    let check = client.simple_query("PRAGMA integrity_check").await;
    if let Ok(messages) = check {
        let text = format!("{messages:?}");
        assert!(text.contains("ok"), "integrity_check: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_over_the_limit_fails_with_54000_and_the_session_goes_on() {
    let up = Up::start_with(&["--transaction-bytes-max", "1048576"]);
    let project = up.create_project("limits").await;
    let database = up.create_database(&project, "limits").await;
    let uri = up.uri(&database);
    let client = connect(&uri).await.expect("connect");
    create_table(&client).await;
    client.simple_query("BEGIN").await.expect("begin");
    insert_rows(&client, 0, 512).await;
    let error = client.simple_query("COMMIT").await.expect_err("over the limit");
    let db_error = error.as_db_error().expect("a server error");
    assert_eq!(db_error.code().code(), "54000", "{db_error}");
    assert!(db_error.message().contains("transaction_bytes_max"), "{db_error}");
    // The session goes on; nothing of the transaction is there.
    assert_eq!(count(&client).await, (0, -1));
    insert_rows(&client, 0, 10).await;
    assert_eq!(count(&client).await.0, 10);
    let other = connect(&uri).await.expect("connect");
    assert_eq!(count(&other).await.0, 10);
}
