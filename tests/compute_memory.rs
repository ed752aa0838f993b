//! The compute host's memory stays within its budget with many branches, each touched once (issue 12, DESIGN
//! §8: "RSS within the configured budget + 100 MiB with 1000 branches each touched once").
//!
//! Three `cambium safekeeper`s and a `cambium pageserver`, and `cambium api` (the `/v1` API and the compute
//! host, whose RSS is measured: the storage processes are not the compute's memory) with a 64 MiB page cache
//! budget and the default file cache. A database, then a table of ~8 MiB in it, then
//! `COMPUTE_MEMORY_BRANCHES` (default 300, about a minute and a half; 1000 for the target's count, 4–13
//! minutes with the machine's load) branches made through `/v1`, each connected to once: its store starts (in
//! the background when the branch is made) and campaigns, and a query reads the whole table (through the parent's cached pages: warm branches). With one memory budget per
//! host, no branch holds pages of its own: the cache's gauge stays within the budget however many branches
//! there are (before issue 12, each branch had 32 MiB).
//!
//! A running store has fixed costs besides (its proposer's three connections and timers); the host stops idle
//! ones (`--idle-store-timeout-ms`, 300 s by default, 2 s here, so the test's thousand branches are not a
//! thousand running stores at once). The RSS growth over the whole run (sampled every 50 branches, and after
//! the last idle stores stopped) over the RSS before the table was filled must stay within the budget + 100 MiB.

mod common;

use common::api::connect;
use common::faults::{Deployment, DeploymentConfig};

const BUDGET_BYTES: u64 = 64 << 20;
const MIB: u64 = 1 << 20;
const IDLE_STORE_TIMEOUT_MS: u64 = 2_000;

/// The resident set of process `pid`, in bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("a VmRSS line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in kB");
    kib * 1024
}

/// The value of a metric line `name value` in a Prometheus exposition.
fn metric(exposition: &str, name: &str) -> u64 {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rss_stays_within_the_budget_with_many_branches_each_touched_once() {
    let branches: u64 = std::env::var("COMPUTE_MEMORY_BRANCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let deployment = Deployment::start_with(DeploymentConfig {
        api_args: vec![
            "--page-cache-bytes".into(),
            BUDGET_BYTES.to_string(),
            "--branches-per-database-max".into(),
            (branches + 1).to_string(),
            "--rate-limit".into(),
            "0".into(),
            "--idle-store-timeout-ms".into(),
            IDLE_STORE_TIMEOUT_MS.to_string(),
        ],
        without_remote: true,
        ..DeploymentConfig::default()
    });
    let pid = deployment.api.pid().expect("a running api");
    let api = deployment.client();
    let database = api.create_database("many").await;
    let before = rss_bytes(pid);
    let client = connect(&database.uri).await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE t (id integer PRIMARY KEY, v text NOT NULL); \
             INSERT INTO t SELECT g, repeat('x', 4000) FROM generate_series(1, 2000) AS g",
        )
        .await
        .expect("fill");
    let read = "SELECT sum(length(v))::bigint FROM t";
    let total: i64 = client.query_one(read, &[]).await.expect("read").get(0);
    assert_eq!(total, 2000 * 4000);
    drop(client);
    let mut peak = rss_bytes(pid);
    let started = std::time::Instant::now();
    for i in 0..branches {
        let uri = api.create_branch(&database.id, &format!("b{i}")).await;
        let client = connect(&uri).await.expect("connect to the branch");
        let on_branch: i64 = client.query_one(read, &[]).await.expect("read on the branch").get(0);
        assert_eq!(on_branch, total, "branch {i}");
        if (i + 1) % 50 == 0 {
            let rss = rss_bytes(pid);
            peak = peak.max(rss);
            eprintln!(
                "{} branches: RSS {} MiB (+{} MiB), {:.1} s",
                i + 1,
                rss / MIB,
                rss.saturating_sub(before) / MIB,
                started.elapsed().as_secs_f64()
            );
        }
    }
    // The last stores go idle and stop.
    tokio::time::sleep(std::time::Duration::from_millis(3 * IDLE_STORE_TIMEOUT_MS)).await;
    let after = rss_bytes(pid);
    peak = peak.max(after);
    let metrics = api.call("GET", "/metrics", None).await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let cached = metric(&metrics.body, "cambium_compute_cache_memory_bytes");
    let from_memory = metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix("cambium_compute_page_reads_total{source=\"memory\"} "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    eprintln!(
        "RSS before {} MiB, peak {} MiB (+{} MiB), after {branches} branches {} MiB (+{} MiB); pages cached {} MiB \
         of a {} MiB budget; reads served by memory {from_memory}",
        before / MIB,
        peak / MIB,
        peak.saturating_sub(before) / MIB,
        after / MIB,
        after.saturating_sub(before) / MIB,
        cached / MIB,
        BUDGET_BYTES / MIB
    );
    assert!(cached <= BUDGET_BYTES, "{cached} bytes cached over the budget");
    assert!(
        from_memory >= branches * 1000,
        "the branches read their parent's cached pages: {from_memory} reads from memory"
    );
    let allowed = BUDGET_BYTES + 100 * MIB;
    assert!(
        peak.saturating_sub(before) <= allowed,
        "RSS grew by {} MiB with {branches} branches, more than {} MiB",
        peak.saturating_sub(before) / MIB,
        allowed / MIB
    );
}
