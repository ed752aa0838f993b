//! Each timeline on 3 of N safekeepers, and re-replication off a dead one (issue 17 item 3), with real
//! processes: five `cambium safekeeper`s, a `cambium pageserver` following all five, and one `cambium api` told
//! all five, a short reconciler period and `--safekeeper-dead-after-ms 3000`.
//!
//! 1. Spread: databases, branches and a restore made; every safekeeper's `ListTimelines` shows each timeline on
//!    exactly three distinct safekeepers and none holds them all; SQL works on each branch, a restore too.
//! 2. One safekeeper killed with -9 for good while the bank workload (`common::bank`) runs on a database whose
//!    set holds it: within [`REPLACEMENT_BOUND`] every timeline it held is on three live safekeepers again (the
//!    reconciler fenced the survivors, recorded a new set, re-pointed the compute and pulled the copy), the
//!    workload goes on, and the database's health is `healthy` with three copies.
//! 3. The dead one restarted: its stale copies (no longer in any set) are deleted by the leftover sweep.
//! 4. The bank's checks: every acknowledged transfer on the database and its branches, no half transfer.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::api::{connect, free_port};
use common::bank::Run;
use common::faults::ApiClient;
use common::Process;
use proto::safekeeper as sk;

/// Safekeepers in the deployment.
const SAFEKEEPERS: u32 = 5;
/// What the API is told: a safekeeper silent this long is dead.
const DEAD_AFTER_MS: &str = "3000";
/// Every timeline of a dead safekeeper is on three live ones within this long after the kill.
const REPLACEMENT_BOUND: Duration = Duration::from_secs(40);
/// A restarted safekeeper's stale copies are gone within this long.
const SWEEP_BOUND: Duration = Duration::from_secs(30);

/// Fields drop in order: the API first, then the storage processes, then their directory.
struct Deployment {
    api: Process,
    key: String,
    _pageserver: Process,
    safekeepers: Vec<Process>,
    _root: tempfile::TempDir,
}

fn start() -> Deployment {
    let root = tempfile::tempdir().expect("tempdir");
    let safekeepers: Vec<Process> = (1..=SAFEKEEPERS)
        .map(|id| {
            let mut args = Process::safekeeper_args(id, &root.path().join(format!("sk{id}")));
            // A replacement pulls onto a safekeeper that started with the test.
            args.extend(["--pull-quiet-period-ms".into(), "0".into()]);
            Process::start(args)
        })
        .collect();
    let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
    let pageserver = Process::start(vec![
        "pageserver".into(),
        "--data-dir".into(),
        root.path().join("pageserver").display().to_string(),
        "--safekeepers".into(),
        addresses.join(","),
        "--checkpoint-timeout-ms".into(),
        "1000".into(),
    ]);
    let data_dir = root.path().join("api");
    let api = Process::start(vec![
        "api".into(),
        "--data-dir".into(),
        data_dir.display().to_string(),
        "--pg-listen".into(),
        format!("127.0.0.1:{}", free_port()),
        "--pageserver".into(),
        pageserver.address.clone(),
        "--safekeepers".into(),
        addresses.join(","),
        "--reconcile-period-ms".into(),
        "500".into(),
        "--safekeeper-dead-after-ms".into(),
        DEAD_AFTER_MS.into(),
    ]);
    let key = std::fs::read_to_string(data_dir.join("api_key"))
        .expect("the admin key file")
        .trim()
        .to_owned();
    Deployment {
        api,
        key,
        _pageserver: pageserver,
        safekeepers,
        _root: root,
    }
}

/// `(tenant, timeline)` as text.
type Copy = (String, String);

/// What safekeeper `address` lists; `None` if it does not answer.
async fn list(address: &str) -> Option<HashSet<Copy>> {
    let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{address}"))
        .await
        .ok()?;
    let listed = tokio::time::timeout(
        Duration::from_secs(2),
        client.list_timelines(sk::ListTimelinesRequest {}),
    )
    .await
    .ok()?
    .ok()?;
    Some(
        listed
            .into_inner()
            .timelines
            .into_iter()
            .map(|t| (t.tenant_id, t.timeline_id))
            .collect(),
    )
}

/// Each safekeeper's listing, in order (a safekeeper that does not answer lists nothing).
async fn listings(deployment: &Deployment) -> Vec<HashSet<Copy>> {
    let mut all = Vec::new();
    for safekeeper in &deployment.safekeepers {
        all.push(list(&safekeeper.address).await.unwrap_or_default());
    }
    all
}

/// Each timeline and how many of `listings` hold it.
fn holders(listings: &[HashSet<Copy>]) -> HashMap<Copy, usize> {
    let mut count = HashMap::new();
    for listing in listings {
        for copy in listing {
            *count.entry(copy.clone()).or_insert(0) += 1;
        }
    }
    count
}

/// The listings once every timeline is on exactly three safekeepers (a deletion in progress, the restore's old
/// timeline say, may be on fewer for a moment); panics after [`SWEEP_BOUND`].
async fn settled(deployment: &Deployment) -> Vec<HashSet<Copy>> {
    let deadline = Instant::now() + SWEEP_BOUND;
    loop {
        let listed = listings(deployment).await;
        let wrong: Vec<(Copy, usize)> = holders(&listed)
            .into_iter()
            .filter(|(_, holders)| *holders != 3)
            .collect();
        if wrong.is_empty() {
            return listed;
        }
        assert!(
            Instant::now() < deadline,
            "timelines not on exactly three safekeepers: {wrong:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn rows(uri: &str) -> Vec<i64> {
    let client = connect(uri).await.expect("connect");
    client
        .query("SELECT id FROM t ORDER BY id", &[])
        .await
        .expect("select")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A database with a table, a branch and a restore: SQL on each, and three more timelines.
async fn sql_branch_and_restore(api: &ApiClient) {
    let database = api.create_database("sql").await;
    let client = connect(&database.uri).await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES (1), (2);")
        .await
        .expect("write");
    let reply = api
        .call(
            "POST",
            &format!("/v1/databases/{}/branches", database.id),
            Some(r#"{"name":"mark"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let mark = reply.json()["branch"]["parent_lsn"].as_str().expect("lsn").to_owned();
    client.batch_execute("INSERT INTO t VALUES (3);").await.expect("write");
    let branch_uri = api.create_branch(&database.id, "side").await;
    assert_eq!(rows(&branch_uri).await, [1, 2, 3]);
    let main_id = api
        .call("GET", &format!("/v1/databases/{}", database.id), None)
        .await
        .json()["database"]["default_branch_id"]
        .as_str()
        .expect("default branch")
        .to_owned();
    let reply = api
        .call(
            "POST",
            &format!("/v1/branches/{main_id}/restore"),
            Some(&format!(r#"{{"target_lsn":"{mark}","preserve":false}}"#)),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    api.wait_finished(reply.json()["operation"]["id"].as_str().expect("operation id"))
        .await;
    assert_eq!(rows(&database.uri).await, [1, 2], "main restored to the mark");
    assert_eq!(rows(&branch_uri).await, [1, 2, 3], "the branch untouched");
}

/// A value of `/metrics` by its full name (no labels).
async fn metric(api: &ApiClient, name: &str) -> u64 {
    let reply = api.call("GET", "/metrics", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply
        .body
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
        .parse()
        .expect("a whole number")
}

/// Polls the database's health until it is `healthy` with three copies everywhere; panics after `bound`.
async fn wait_healthy(api: &ApiClient, database_id: &str, bound: Duration) -> serde_json::Value {
    let deadline = Instant::now() + bound;
    loop {
        let reply = api
            .call("GET", &format!("/v1/databases/{database_id}/health"), None)
            .await;
        let health = reply.json()["health"].clone();
        if health["replication"] == "healthy" && health["healthy_copies_min"] == 3 {
            return health;
        }
        assert!(Instant::now() < deadline, "not healthy after {bound:?}: {health}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timelines_spread_over_five_safekeepers_and_move_off_a_dead_one() {
    let mut deployment = start();
    let api = ApiClient {
        address: deployment.api.address.clone(),
        key: deployment.key.clone(),
    };
    // The first database of a fresh deployment is on the first three safekeepers (all hold none: ties in
    // configuration order), so the one killed below is in its set.
    let run = Run::start(&api, "sets").await;
    sql_branch_and_restore(&api).await;

    // 1. Spread.
    let before = settled(&deployment).await;
    let count = holders(&before);
    assert!(count.len() >= 5, "{count:?}");
    for (index, listing) in before.iter().enumerate() {
        assert!(
            listing.len() < count.len(),
            "safekeeper {} holds all {} timelines",
            index + 1,
            count.len()
        );
    }
    let victim_held = before[0].clone();
    assert!(
        !victim_held.is_empty(),
        "the first safekeeper holds the bank's timeline"
    );
    eprintln!(
        "spread: {} timelines, per safekeeper {:?}",
        count.len(),
        before.iter().map(HashSet::len).collect::<Vec<_>>()
    );

    // 2. One safekeeper dead for good while the load runs.
    deployment.safekeepers[0].kill9();
    let killed_at = Instant::now();
    run.bank.progress(30, "with a safekeeper dead").await;
    loop {
        let now = listings(&deployment).await;
        let live = holders(&now[1..]);
        let missing: Vec<&Copy> = victim_held
            .iter()
            .filter(|copy| live.get(*copy).copied().unwrap_or(0) < 3)
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            killed_at.elapsed() < REPLACEMENT_BOUND,
            "{} timelines of the dead safekeeper not on three live ones after {REPLACEMENT_BOUND:?}: {missing:?}",
            missing.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let replaced_in = killed_at.elapsed();
    // Each of its timelines moved once, by the reconciler's replacement (not by anything else).
    assert_eq!(
        metric(&api, "cambium_safekeeper_set_replacements_total").await,
        victim_held.len() as u64
    );
    run.bank.progress(100, "after the replacement").await;
    let health = wait_healthy(&api, &run.database.id, REPLACEMENT_BOUND).await;
    eprintln!(
        "replaced: {} timelines on three live safekeepers {:.1} s after the kill; health {health}",
        victim_held.len(),
        replaced_in.as_secs_f64()
    );

    // 3. The dead one back: its stale copies go.
    deployment.safekeepers[0].restart();
    let restarted_at = Instant::now();
    loop {
        let listed = list(&deployment.safekeepers[0].address).await;
        let stale: Vec<&Copy> = listed
            .as_ref()
            .map(|listed| victim_held.iter().filter(|copy| listed.contains(*copy)).collect())
            .unwrap_or_default();
        if listed.is_some() && stale.is_empty() {
            break;
        }
        assert!(
            restarted_at.elapsed() < SWEEP_BOUND,
            "stale copies on the restarted safekeeper after {SWEEP_BOUND:?}: {stale:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "stale copies deleted {:.1} s after the restart",
        restarted_at.elapsed().as_secs_f64()
    );
    settled(&deployment).await;

    // 4. Every acknowledged transfer, on the database and its branches.
    run.bank.progress(20, "after the restart").await;
    run.finish(&api).await;
}
