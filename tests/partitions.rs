//! Network partitions between hosts (issue 17 item 5, its first part): the deployment of `tests/faults.rs`
//! (three `cambium safekeeper`s, a `cambium pageserver`, `cambium api` running the computes) with each part on a
//! host of its own — a network namespace with its own address (`common::netns`) — while the bank workload of
//! `common::bank` runs. A partition is silent (frames to nowhere, no RST, no error from `send`), the failure a
//! timeout must catch; a kill (`tests/faults.rs`) is the loud one.
//!
//! - Safekeepers cut off from every other host in turn: commits go on with the majority left, the one cut off
//!   catches up once it is back, and the next one cut off leaves a majority that includes it.
//! - The compute's host cut off from two safekeepers: COMMITs fail within a bound (none hangs, none is
//!   acknowledged while the majority is out of reach), and the load goes on once the partition heals.
//! - The pageserver cut off from every other host: reads of pages the compute does not hold fail or wait (within
//!   the client's bound), and the load goes on once it is back.
//!
//! - A client that vanishes (its host cut off, silently) inside a transaction holding the database's write lock:
//!   the compute host finds it gone by TCP keepalive and rolls the transaction back, so another client writes
//!   again within a bound, long before `idle_in_transaction_session_timeout` (10 min by default) would end it.
//!
//! The bank runs end with `Run::finish`: a fresh branch (its reads all go to the pageserver), then every acknowledged
//! transfer on the database and on each branch, no half transfer, `PRAGMA integrity_check` ok.
//!
//! Skipped, saying why, where network namespaces cannot be made (not root, no iproute2).

mod common;

use std::time::{Duration, Instant};

use common::bank::{Attempt, Outcome, Run};
use common::faults::{pause, ApiClient, CHECKPOINT_TIMEOUT_MS, PAGE_CACHE_BYTES};
use common::netns::Net;
use common::Process;

/// How long a partition lasts (at least) before it heals.
const FAULT_DURATION: Duration = Duration::from_secs(3);
/// A COMMIT that cannot reach a majority fails within this long (the compute's commit timeout is 5 s).
const COMMIT_FAILURE_BOUND: Duration = Duration::from_secs(30);
/// An acknowledgement already on its way when the partition began arrives within this long.
const ACK_IN_FLIGHT_GRACE: Duration = Duration::from_secs(1);
/// The reconciler sees a copy cut off (its calls to it time out) and then back within this long.
const HEALTH_WAIT_MAX: Duration = Duration::from_secs(60);
/// The PostgreSQL port of the compute's host (its namespace has nothing else on it).
const PG_PORT: u16 = 5433;

/// The parts, each on its own host. Fields drop in order: the processes, then the network, then the files.
struct Hosts {
    api: Process,
    _pageserver: Process,
    _safekeepers: Vec<Process>,
    key: String,
    net: Net,
    _root: tempfile::TempDir,
}

impl Hosts {
    /// Starts every part on its host; `None` (having said why) where namespaces cannot be made.
    fn start() -> Option<Hosts> {
        let net = match Net::create(&["sk1", "sk2", "sk3", "ps", "api", "client"]) {
            Ok(net) => net,
            Err(reason) => {
                common::skipped(&format!("network namespaces cannot be made here: {reason}"));
                return None;
            }
        };
        let root = tempfile::tempdir().expect("tempdir");
        let safekeepers: Vec<Process> = (1..=3u32)
            .map(|id| {
                let host = net.host(&format!("sk{id}"));
                let dir = root.path().join(format!("sk{id}"));
                Process::start_in(&host.netns, &host.ip, Process::safekeeper_args(id, &dir), None)
            })
            .collect();
        let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
        let remote_dir = root.path().join("remote");
        std::fs::create_dir_all(&remote_dir).expect("remote dir");
        let ps = net.host("ps");
        let pageserver = Process::start_in(
            &ps.netns,
            &ps.ip,
            vec![
                "pageserver".into(),
                "--data-dir".into(),
                root.path().join("pageserver").display().to_string(),
                "--safekeepers".into(),
                addresses.join(","),
                "--checkpoint-timeout-ms".into(),
                CHECKPOINT_TIMEOUT_MS.into(),
                "--remote".into(),
                remote_dir.display().to_string(),
            ],
            None,
        );
        let host = net.host("api");
        let data_dir = root.path().join("api");
        let api = Process::start_in(
            &host.netns,
            &host.ip,
            vec![
                "api".into(),
                "--data-dir".into(),
                data_dir.display().to_string(),
                "--pg-listen".into(),
                format!("{}:{PG_PORT}", host.ip),
                "--pageserver".into(),
                pageserver.address.clone(),
                "--safekeepers".into(),
                addresses.join(","),
                "--page-cache-bytes".into(),
                PAGE_CACHE_BYTES.into(),
                "--file-cache-bytes".into(),
                "0".into(),
                "--reconcile-period-ms".into(),
                "300".into(),
            ],
            None,
        );
        let key = std::fs::read_to_string(data_dir.join("api_key"))
            .expect("the admin key file")
            .trim()
            .to_owned();
        Some(Hosts {
            api,
            _pageserver: pageserver,
            _safekeepers: safekeepers,
            key,
            net,
            _root: root,
        })
    }

    fn client(&self) -> ApiClient {
        ApiClient {
            address: self.api.address.clone(),
            key: self.key.clone(),
        }
    }
}

/// Polls the database's health until its `replication` is `want` (the reconciler's calls to a copy cut off
/// must time out for it to get there); panics after [`HEALTH_WAIT_MAX`].
async fn wait_replication(api: &ApiClient, database_id: &str, want: &str) {
    let deadline = Instant::now() + HEALTH_WAIT_MAX;
    loop {
        let reply = api
            .call("GET", &format!("/v1/databases/{database_id}/health"), None)
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let health = reply.json()["health"].clone();
        if health["replication"] == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replication is not {want} after {HEALTH_WAIT_MAX:?}: {health}"
        );
        pause().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safekeepers_cut_off_in_turn_lose_nothing() {
    let Some(hosts) = Hosts::start() else { return };
    let api = hosts.client();
    let run = Run::start(&api, "a safekeeper cut off").await;
    wait_replication(&api, &run.database.id, "healthy").await;
    for victim in ["sk1", "sk3"] {
        hosts.net.isolate(victim);
        tokio::time::sleep(FAULT_DURATION).await;
        run.bank.progress(100, &format!("with {victim} cut off")).await;
        // The partition is real: the control plane's calls to the copy time out.
        wait_replication(&api, &run.database.id, "under_replicated").await;
        hosts.net.rejoin(victim);
        run.bank.progress(100, &format!("after {victim} rejoined")).await;
        wait_replication(&api, &run.database.id, "healthy").await;
    }
    run.finish(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compute_cut_from_two_safekeepers_fails_commits_in_bounded_time_and_loses_nothing() {
    let Some(hosts) = Hosts::start() else { return };
    let api = hosts.client();
    let run = Run::start(&api, "the compute cut from a majority").await;
    hosts.net.partition("api", "sk1");
    hosts.net.partition("api", "sk2");
    let cut_at = Instant::now();
    let failed_after_cut = |attempts: &[Attempt]| {
        attempts
            .iter()
            .any(|a| a.ended >= cut_at && matches!(a.outcome, Outcome::Unknown(_)))
    };
    while !failed_after_cut(&run.bank.attempts()) {
        assert!(
            cut_at.elapsed() < COMMIT_FAILURE_BOUND,
            "seed {:#x}: no COMMIT failed within {COMMIT_FAILURE_BOUND:?} of the partition; recent errors: {:?}",
            run.seed,
            run.bank.recent_errors()
        );
        pause().await;
    }
    tokio::time::sleep(FAULT_DURATION).await;
    hosts.net.heal("api", "sk1");
    hosts.net.heal("api", "sk2");
    let healed_at = Instant::now();
    run.bank.progress(100, "after the partition healed").await;
    let seed = run.seed;
    let attempts = run.finish(&api).await;
    for attempt in &attempts {
        let Some(started) = attempt.commit_started else {
            continue;
        };
        let during = started >= cut_at || attempt.ended >= cut_at + ACK_IN_FLIGHT_GRACE;
        if during && attempt.ended < healed_at {
            assert!(
                !matches!(attempt.outcome, Outcome::Acknowledged),
                "seed {seed:#x}: {attempt:?} was acknowledged with the majority out of reach"
            );
        }
        if let Outcome::Unknown(error) = &attempt.outcome {
            assert!(
                attempt.ended - started <= COMMIT_FAILURE_BOUND,
                "seed {seed:#x}: the COMMIT of {:?} failed only after {:?}: {error}",
                attempt.transfer,
                attempt.ended - started
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pageserver_cut_off_loses_nothing() {
    let Some(hosts) = Hosts::start() else { return };
    let api = hosts.client();
    let run = Run::start(&api, "the pageserver cut off").await;
    hosts.net.isolate("ps");
    tokio::time::sleep(FAULT_DURATION * 2).await;
    hosts.net.rejoin("ps");
    run.bank.progress(100, "after the pageserver rejoined").await;
    run.finish(&api).await;
}

/// A write waiting behind a vanished client's transaction succeeds within this: keepalive finds the client gone
/// in ~25 s (`compute::pg::keepalive`: 10 s idle, then 3 probes 5 s apart), far under the 10 min
/// `idle_in_transaction_session_timeout` that would end the transaction otherwise.
const VANISHED_CLIENT_BOUND: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_vanished_inside_a_transaction_does_not_hold_the_write_lock() {
    use std::io::Write;
    let Some(hosts) = Hosts::start() else { return };
    let api = hosts.client();
    let database = api.create_database("vanishing").await;
    let client = common::api::connect(&database.uri).await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT NOT NULL); INSERT INTO t VALUES (1, 0);")
        .await
        .expect("create");
    // psql on the client's own host opens a transaction that writes (taking the database's write lock), then
    // waits on its standard input, which the test keeps open.
    let host = hosts.net.host("client");
    let mut psql = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &host.netns,
            "psql",
            &database.uri,
            "-v",
            "ON_ERROR_STOP=1",
            "-q",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("psql in the client's namespace");
    let mut stdin = psql.stdin.take().expect("psql's standard input");
    stdin
        .write_all(b"BEGIN;\nUPDATE t SET v = 1 WHERE id = 1;\n")
        .expect("the transaction sent");
    stdin.flush().expect("flush");
    // Its transaction holds the lock: a write from here is refused meanwhile.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.batch_execute("UPDATE t SET v = 2 WHERE id = 1").await {
            Err(error) if error.to_string().contains("write lock") || format!("{error:?}").contains("write lock") => {
                break
            }
            Err(error) => panic!("a write beside the open transaction: {error:?}"),
            Ok(()) => {
                assert!(
                    Instant::now() < deadline,
                    "the vanishing client never took the write lock"
                );
                // psql has not taken the lock yet: look again.
                pause().await;
            }
        }
    }
    hosts.net.isolate("client");
    let cut_at = Instant::now();
    loop {
        match client.batch_execute("UPDATE t SET v = 3 WHERE id = 1").await {
            Ok(()) => break,
            Err(error) => {
                assert!(
                    cut_at.elapsed() < VANISHED_CLIENT_BOUND,
                    "the vanished client's transaction still holds the write lock after {VANISHED_CLIENT_BOUND:?}: \
                     {error:?}"
                );
                pause().await;
            }
        }
    }
    eprintln!(
        "a write went through {:?} after the client holding the lock vanished",
        cut_at.elapsed()
    );
    // Its transaction was rolled back, never committed.
    let v: i64 = client
        .query_one("SELECT v FROM t WHERE id = 1", &[])
        .await
        .expect("select")
        .get(0);
    assert_eq!(v, 3);
    drop(stdin);
    let _ = psql.kill();
    let _ = psql.wait();
    hosts.net.rejoin("client");
}
