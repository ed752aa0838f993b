//! Every acknowledged commit survives faults (issue 7), with real processes.
//!
//! The workload is a bank: `accounts(id, balance)` with 20 accounts of 1000 each and a `ledger` of transfers.
//! Four clients (tokio tasks, each its own PostgreSQL connection, a seeded xorshift; `FAULTS_SEED` replays
//! another seed, and every failure prints the seed) run transfers `BEGIN; UPDATE -x; UPDATE +x; INSERT INTO
//! ledger; COMMIT` with ledger ids unique per attempt. A transfer is *acknowledged* when its COMMIT returned
//! Ok, *unknown* when its COMMIT was sent and errored (it may or may not be durable), and *not committed* when
//! an earlier statement failed (it must be absent). Clients reconnect with a capped backoff and give up (the
//! test fails) after a bounded number of failed connects in a row.
//!
//! Each test breaks one thing mid-load, repairs it, waits for the load to make progress again, branches the
//! database once more (a fresh compute, whose reads all go to the pageserver), and then checks the database
//! and both branches, the one made before the fault and the one made after the repair: (1) every acknowledged
//! transfer (on a branch: acknowledged before the branch was requested) is in the ledger; (2) every ledger row
//! is a transfer whose COMMIT was sent, exactly as generated, the total is 20 × 1000 and every balance is the
//! initial one plus the net of the ledger rows, so no transfer is half there; and `PRAGMA integrity_check`
//! says ok.
//!
//! Faults, against `cambium api` with separate storage processes (`common::faults::Deployment`) unless said:
//! one safekeeper killed with -9 (load goes on) and restarted, then another; two killed (the COMMITs in flight
//! fail within a bound, sessions opened meanwhile are refused with an error, nothing is acknowledged until they
//! are back); the pageserver killed and restarted; the pageserver's local directory wiped and rebuilt from the
//! remote storage and the safekeepers' WAL; `cambium api` (which runs the computes) killed mid-transaction and
//! restarted on the same ports; `cambium up` killed and restarted.

mod common;

use std::time::{Duration, Instant};

use common::api::Up;
use common::bank::{seed, Attempt, FailedConnect, Outcome, Rng, Run};
use common::faults::{files_under, pause, ApiClient, Deployment};

/// A COMMIT that cannot reach a majority fails within this long (the compute's commit timeout is 5 s).
const COMMIT_FAILURE_BOUND: Duration = Duration::from_secs(30);
/// How long a fault lasts (at least) before it is repaired.
const FAULT_DURATION: Duration = Duration::from_secs(2);
/// Waiting for the first uploads gives up after this long.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(20);
/// Files in the remote storage before its pageserver's disk is wiped (a branch log, a metadata, layers).
const UPLOADED_FILES_MIN: usize = 3;
/// How long the majority stays lost after the first session was refused.
const OUTAGE_AFTER_REFUSAL: Duration = Duration::from_secs(2);
/// An acknowledgement already on its way when the safekeepers were killed arrives within this long.
const ACK_IN_FLIGHT_GRACE: Duration = Duration::from_secs(1);

/// `count` distinct indices below 3, picked by the seed.
fn victims(count: usize) -> Vec<usize> {
    let mut rng = Rng::new(seed() ^ 0xFA17);
    let mut picked = Vec::new();
    while picked.len() < count {
        let index = rng.below(3) as usize;
        if !picked.contains(&index) {
            picked.push(index);
        }
    }
    picked
}

/// Asserts that a kill sent at `killing_at` cut transfers short (the fault landed mid-transaction).
fn assert_cut_short(attempts: &[Attempt], killing_at: Instant, seed: u64) {
    let cut = attempts
        .iter()
        .filter(|a| a.ended >= killing_at && !matches!(a.outcome, Outcome::Acknowledged))
        .count();
    assert!(cut > 0, "seed {seed:#x}: the kill cut no transfer short");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_safekeeper_killed_and_restarted_loses_nothing() {
    let mut deployment = Deployment::start();
    let api = deployment.client();
    let run = Run::start(&api, "one safekeeper").await;
    // Then another one: the majority left must include the first, which caught up after its restart.
    for victim in victims(2) {
        deployment.safekeepers[victim].kill9();
        tokio::time::sleep(FAULT_DURATION).await;
        run.bank.progress(100, "with one safekeeper down").await;
        deployment.safekeepers[victim].restart();
        run.bank.progress(100, "after the safekeeper's restart").await;
    }
    run.finish(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_safekeepers_killed_fail_commits_in_bounded_time_and_lose_nothing() {
    let mut deployment = Deployment::start();
    let api = deployment.client();
    let run = Run::start(&api, "two safekeepers").await;
    let victims = victims(2);
    for &victim in &victims {
        deployment.safekeepers[victim].kill9();
    }
    let killed_at = Instant::now();
    // The COMMITs in flight at the kill, or started after it, fail.
    let failed_after_kill = |attempts: &[Attempt]| {
        attempts
            .iter()
            .filter(|a| a.ended >= killed_at)
            .any(|a| matches!(a.outcome, Outcome::Unknown(_)))
    };
    while !failed_after_kill(&run.bank.attempts()) {
        assert!(
            killed_at.elapsed() < COMMIT_FAILURE_BOUND,
            "seed {:#x}: no COMMIT failed within {COMMIT_FAILURE_BOUND:?} of losing the majority; \
             recent errors: {:?}",
            run.seed,
            run.bank.recent_errors()
        );
        pause().await;
    }
    // Clients keep trying while the majority is gone: their sessions are refused (the failed store restarts, and
    // its election times out).
    while !run.bank.failed_connects().iter().any(|c| c.started >= killed_at) {
        assert!(
            killed_at.elapsed() < COMMIT_FAILURE_BOUND * 2,
            "seed {:#x}: no session refused within {:?} of losing the majority; recent errors: {:?}",
            run.seed,
            COMMIT_FAILURE_BOUND * 2,
            run.bank.recent_errors()
        );
        pause().await;
    }
    tokio::time::sleep(OUTAGE_AFTER_REFUSAL).await;
    let restarting_at = Instant::now();
    for &victim in &victims {
        deployment.safekeepers[victim].restart();
    }
    run.bank.progress(100, "after the safekeepers' restart").await;
    let seed = run.seed;
    let failed_connects = run.bank.failed_connects();
    let attempts = run.finish(&api).await;

    let in_outage = |ended: Instant| ended >= killed_at && ended < restarting_at;
    for attempt in &attempts {
        let Some(started) = attempt.commit_started else {
            continue;
        };
        let during_outage = started >= killed_at || attempt.ended >= killed_at + ACK_IN_FLIGHT_GRACE;
        if during_outage && attempt.ended < restarting_at {
            assert!(
                !matches!(attempt.outcome, Outcome::Acknowledged),
                "seed {seed:#x}: {attempt:?} was acknowledged with two safekeepers down"
            );
        }
        if let (true, Outcome::Unknown(error)) = (in_outage(attempt.ended), &attempt.outcome) {
            let reason = error.strip_prefix("COMMIT: ").unwrap_or(error);
            assert!(
                reason.to_lowercase().contains("commit"),
                "seed {seed:#x}: the COMMIT's error says that the commit failed: {error}"
            );
            assert!(
                attempt.ended - started <= COMMIT_FAILURE_BOUND,
                "seed {seed:#x}: the COMMIT of {:?} failed only after {:?}: {error}",
                attempt.transfer,
                attempt.ended - started
            );
        }
    }
    // Sessions opened during the outage are refused, in bounded time, with a reason.
    let refused: Vec<&FailedConnect> = failed_connects.iter().filter(|c| in_outage(c.ended)).collect();
    assert!(
        !refused.is_empty(),
        "seed {seed:#x}: no session was refused during the outage"
    );
    for connect in &refused {
        assert!(
            connect.ended - connect.started <= COMMIT_FAILURE_BOUND,
            "seed {seed:#x}: a connect took {:?} to fail: {}",
            connect.ended - connect.started,
            connect.error
        );
    }
    let failed_commits: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| in_outage(a.ended) && matches!(a.outcome, Outcome::Unknown(_)))
        .collect();
    eprintln!(
        "two safekeepers: {} COMMITs failed during the outage ({:?}), the first: {:?}; {} connects refused, the \
         slowest after {:?}, the first: {:?}",
        failed_commits.len(),
        failed_commits
            .iter()
            .map(|a| a.ended - a.commit_started.expect("a COMMIT"))
            .collect::<Vec<_>>(),
        failed_commits.first().map(|a| &a.outcome),
        refused.len(),
        refused.iter().map(|c| c.ended - c.started).max(),
        refused.first().map(|c| &c.error),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pageserver_killed_and_restarted_loses_nothing() {
    let mut deployment = Deployment::start();
    let api = deployment.client();
    let run = Run::start(&api, "pageserver").await;
    deployment.pageserver.kill9();
    // Reads the computes do not have cached fail meanwhile; nothing may be lost either way.
    tokio::time::sleep(FAULT_DURATION).await;
    deployment.pageserver.restart();
    run.bank.progress(100, "after the pageserver's restart").await;
    run.finish(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pageserver_rebuilds_a_wiped_disk_from_remote_storage_and_loses_nothing() {
    let mut deployment = Deployment::start();
    let api = deployment.client();
    let run = Run::start(&api, "pageserver wiped").await;
    // Layers reach the remote storage (the pageserver flushes every second, then uploads).
    let deadline = Instant::now() + UPLOAD_TIMEOUT;
    while files_under(&deployment.remote_dir) < UPLOADED_FILES_MIN {
        assert!(
            Instant::now() < deadline,
            "nothing uploaded to {} within {UPLOAD_TIMEOUT:?}",
            deployment.remote_dir.display()
        );
        pause().await;
    }
    // More WAL than the remote has: the rebuilt pageserver gets it from the safekeepers.
    run.bank.progress(100, "after the first uploads").await;
    deployment.pageserver.kill9();
    std::fs::remove_dir_all(&deployment.pageserver_dir).expect("wipe the pageserver's disk");
    tokio::time::sleep(FAULT_DURATION).await;
    deployment.pageserver.restart();
    run.bank.progress(100, "after the pageserver's rebuild").await;
    run.finish(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_with_its_computes_killed_mid_transaction_loses_nothing() {
    let mut deployment = Deployment::start();
    let api = deployment.client();
    let run = Run::start(&api, "api").await;
    // Four clients run transfers back to back: the kill lands inside some of them.
    let killing_at = Instant::now();
    deployment.api.kill9();
    deployment.api.restart();
    run.bank.progress(100, "after the API's restart").await;
    let seed = run.seed;
    let attempts = run.finish(&api).await;
    assert_cut_short(&attempts, killing_at, seed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cambium_up_killed_and_restarted_loses_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &[]);
    let api = ApiClient {
        address: up.process.address.clone(),
        key: up.key.clone(),
    };
    let run = Run::start(&api, "up").await;
    let killing_at = Instant::now();
    up.process.kill9();
    up.process.restart();
    run.bank.progress(100, "after the restart of up").await;
    let seed = run.seed;
    let attempts = run.finish(&api).await;
    assert_cut_short(&attempts, killing_at, seed);
}
