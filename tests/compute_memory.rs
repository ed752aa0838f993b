//! The compute host's memory stays within its budget with many branches, each touched once (issue 12, DESIGN
//! §8: "RSS within the configured budget + 100 MiB with 1000 branches each touched once").
//!
//! A `cambium up` (the API, the compute host, a pageserver and three safekeepers in one process) with a 64 MiB
//! page cache budget: a database with a table of ~8 MiB, then `COMPUTE_MEMORY_BRANCHES` (default 1000) branches
//! made through `/v1`, each connected to once (its store starts, campaigns, and a query reads the whole table:
//! with one memory budget per host, every branch's pages compete for the same 64 MiB). The process's RSS
//! (`/proc/<pid>/status` VmRSS) is read before the branches and after, and the growth must stay within the
//! budget + 100 MiB (the target) + 50 % of that again (generous: allocator slack, and the pageserver and
//! safekeepers, whose per-timeline state grows with the branches too, live in this process). The memory
//! budget's own gauge must stay within the budget.

mod common;

use common::api::{connect, Up};

const BUDGET_BYTES: u64 = 64 << 20;
const MIB: u64 = 1 << 20;

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
        .unwrap_or(1000);
    let budget = BUDGET_BYTES.to_string();
    let quota = (branches + 1).to_string();
    let up = Up::start_with(&[
        "--page-cache-bytes",
        &budget,
        "--branches-per-database-max",
        &quota,
        "--rate-limit",
        "0",
    ]);
    let pid = up.process.pid().expect("a running up");
    let project = up.create_project("memory").await;
    let database = up.create_database(&project, "many").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let client = connect(&up.uri(&database)).await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE t (id integer PRIMARY KEY, v text NOT NULL); \
             INSERT INTO t SELECT g, repeat('x', 4000) FROM generate_series(1, 2000) AS g",
        )
        .await
        .expect("fill");
    let total: i64 = client
        .query_one("SELECT sum(length(v))::bigint FROM t", &[])
        .await
        .expect("read")
        .get(0);
    assert_eq!(total, 2000 * 4000);
    drop(client);
    let before = rss_bytes(pid);
    let started = std::time::Instant::now();
    for i in 0..branches {
        let reply = up
            .call(
                "POST",
                &format!("/v1/databases/{database_id}/branches"),
                Some(&format!(r#"{{"name":"b{i}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "branch {i}: {}", reply.body);
        let branch = reply.json()["branch"].clone();
        let client = connect(&up.uri(&branch)).await.expect("connect to the branch");
        let read: i64 = client
            .query_one("SELECT sum(length(v))::bigint FROM t", &[])
            .await
            .expect("read on the branch")
            .get(0);
        assert_eq!(read, total, "branch {i}");
        if (i + 1) % 100 == 0 {
            eprintln!(
                "{} branches: RSS {} MiB (+{} MiB), {:.1} s",
                i + 1,
                rss_bytes(pid) / MIB,
                rss_bytes(pid).saturating_sub(before) / MIB,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let after = rss_bytes(pid);
    let metrics = up.call("GET", "/metrics", None).await;
    assert_eq!(metrics.status, 200);
    let cached = metric(&metrics.body, "cambium_compute_cache_memory_bytes");
    eprintln!(
        "RSS before {} MiB, after {branches} branches {} MiB (+{} MiB); pages cached {} MiB of a {} MiB budget",
        before / MIB,
        after / MIB,
        after.saturating_sub(before) / MIB,
        cached / MIB,
        BUDGET_BYTES / MIB
    );
    assert!(cached <= BUDGET_BYTES, "{cached} bytes cached over the budget");
    let allowed = (BUDGET_BYTES + 100 * MIB) * 3 / 2;
    assert!(
        after.saturating_sub(before) <= allowed,
        "RSS grew by {} MiB with {branches} branches, more than {} MiB",
        after.saturating_sub(before) / MIB,
        allowed / MIB
    );
}
