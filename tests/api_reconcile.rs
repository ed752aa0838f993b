//! Replica repair by the control plane's reconciler (`api::reconcile`), black-box against `cambium up`: a
//! safekeeper's copy of a database's timeline is deleted while `up` is down; after a restart the database keeps
//! taking commits on the other two, `/metrics` reports one under-replicated timeline, the reconciler rebuilds the
//! copy (its directory comes back) once the safekeepers' quiet period is over, the gauge goes back to 0, and
//! every acknowledged row is there. Done for each safekeeper in turn, so the last copies are rebuilt from copies
//! that were themselves rebuilt, with rows written between each step: the rebuilt copies carry the data.
//!
//! And orphans: `up` killed while a branch creation pauses between making its timeline in the storage and writing
//! its row (hidden `--faults branch_row_pause_ms`); after a restart the reconciler deletes that timeline from the
//! pageserver and every safekeeper, once, and the database is as it was.
//!
//! And leftovers: a safekeeper's copy of a timeline no row names, and a tenant no database owns on a safekeeper
//! and on the pageserver, planted while `up` is down, are deleted after a restart.
//!
//! The database's health (`GET /v1/databases/{id}/health`) says the same as the gauge: under-replicated with two
//! healthy copies of its branch's WAL while a copy is lost, healthy with three after the repair.
//!
//! The reconciler runs every 300 ms and the quiet period is 4 s (hidden `--safekeeper-pull-quiet-period-ms`),
//! so each repair is first refused (the under-replicated state is observable) and then made.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::api::{connect, insert_ids as insert, table_ids as ids, Up};
use tokio::io::AsyncWriteExt;

/// Bound of each wait for the reconciler.
const WAIT_MAX: Duration = Duration::from_secs(60);

/// A value of `/metrics` by its full name (no labels).
async fn metric(up: &Up, name: &str) -> u64 {
    let reply = up.call("GET", "/metrics", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply
        .body
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in {}", reply.body))
        .parse()
        .expect("a whole number")
}

/// Polls until `metric` is `want`; panics after [`WAIT_MAX`].
async fn wait_metric(up: &Up, name: &str, want: u64) {
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        let value = metric(up, name).await;
        if value == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} is {value}, not {want}, after {WAIT_MAX:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `GET /v1/databases/{id}/health` until its `replication` is `want`; the health then. Panics after
/// [`WAIT_MAX`].
async fn wait_health(up: &Up, database_id: &str, want: &str) -> serde_json::Value {
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        let reply = up
            .call("GET", &format!("/v1/databases/{database_id}/health"), None)
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let health = reply.json()["health"].clone();
        if health["replication"] == want {
            return health;
        }
        assert!(
            Instant::now() < deadline,
            "the health is not {want} after {WAIT_MAX:?}: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The subdirectories of `dir`, sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The only subdirectory of `dir`.
fn only_subdir(dir: &Path) -> PathBuf {
    let dirs = subdirs(dir);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.into_iter().next().expect("one")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_safekeeper_copy_is_rebuilt_by_the_reconciler_and_carries_the_data() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("cambium");
    let mut up = Up::start_in(
        &data_dir,
        &[
            "--reconcile-period-ms",
            "300",
            "--safekeeper-pull-quiet-period-ms",
            "4000",
        ],
    );
    let project = up.create_project("repair").await;
    let database = up.create_database(&project, "db").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let main = database["default_branch_id"].as_str().expect("branch").to_owned();
    let uri = up.uri(&database);
    {
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
    }
    insert(&uri, 0..20).await;
    // Every copy healthy: a round has seen them all.
    let rounds = metric(&up, "cambium_reconcile_rounds_total").await;
    let deadline = Instant::now() + WAIT_MAX;
    while metric(&up, "cambium_reconcile_rounds_total").await < rounds + 1 {
        assert!(Instant::now() < deadline, "no reconciler round");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(metric(&up, "cambium_timelines_under_replicated").await, 0);
    let health = wait_health(&up, &database_id, "healthy").await;
    assert_eq!(health["database_id"], database_id.as_str(), "{health}");
    assert_eq!(health["copies_wanted"], 3, "{health}");
    assert_eq!(health["healthy_copies_min"], 3, "{health}");
    assert!(health["checked_at"].is_string(), "{health}");
    assert_eq!(health["branches"][0]["branch_id"], main.as_str(), "{health}");
    assert_eq!(health["branches"][0]["healthy_copies"], 3, "{health}");

    let tenant = only_subdir(&data_dir.join("safekeeper-1"))
        .file_name()
        .expect("name")
        .to_owned();
    let timeline = only_subdir(&data_dir.join("safekeeper-1").join(&tenant))
        .file_name()
        .expect("name")
        .to_owned();
    let mut written = 20;
    for safekeeper in 1..=3 {
        let copy = data_dir
            .join(format!("safekeeper-{safekeeper}"))
            .join(&tenant)
            .join(&timeline);
        up.process.kill9();
        std::fs::remove_dir_all(&copy).unwrap_or_else(|e| panic!("remove {}: {e}", copy.display()));
        up.process.restart();
        let repairs = metric(&up, "cambium_timeline_repairs_total").await;
        assert_eq!(repairs, 0, "a fresh process has repaired nothing yet");

        // Refused during the quiet period: under-replicated, and commits go on with the other two.
        wait_metric(&up, "cambium_timelines_under_replicated", 1).await;
        let health = wait_health(&up, &database_id, "under_replicated").await;
        assert_eq!(health["healthy_copies_min"], 2, "{health}");
        assert_eq!(health["branches"][0]["replication"], "under_replicated", "{health}");
        assert_eq!(health["branches"][0]["healthy_copies"], 2, "{health}");
        insert(&uri, written..written + 10).await;
        written += 10;

        // Then rebuilt.
        wait_metric(&up, "cambium_timelines_under_replicated", 0).await;
        let health = wait_health(&up, &database_id, "healthy").await;
        assert_eq!(health["branches"][0]["healthy_copies"], 3, "{health}");
        assert!(copy.is_dir(), "{} was not rebuilt", copy.display());
        assert!(metric(&up, "cambium_timeline_repairs_total").await >= 1);
        assert_eq!(
            ids(&uri).await,
            (0..written).collect::<Vec<_>>(),
            "after rebuilding safekeeper {safekeeper}"
        );
        insert(&uri, written..written + 10).await;
        written += 10;
    }
    // Every copy now is a rebuilt one (the last two rebuilt from rebuilt copies): a restart reads them all.
    up.process.kill9();
    up.process.restart();
    assert_eq!(ids(&uri).await, (0..written).collect::<Vec<_>>());
    insert(&uri, written..written + 5).await;
    assert_eq!(ids(&uri).await, (0..written + 5).collect::<Vec<_>>());
    assert_eq!(metric(&up, "cambium_timelines_under_replicated").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeline_made_just_before_a_crash_is_deleted_as_an_orphan_after_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("cambium");
    let mut up = Up::start_in(
        &data_dir,
        &["--reconcile-period-ms", "300", "--faults", "branch_row_pause_ms=60000"],
    );
    let project = up.create_project("orphans").await;
    let database = up.create_database(&project, "db").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let uri = up.uri(&database);
    {
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
    }
    insert(&uri, 0..10).await;
    let tenant = only_subdir(&data_dir.join("safekeeper-1"));
    let tenant = tenant.file_name().expect("name").to_owned();
    // The timelines safekeeper `n` holds for the tenant, by name (a timeline has no directory until it writes).
    let tenant = tenant.to_string_lossy().into_owned();
    let copies = |n: u32| common::safekeeper_timelines(&data_dir.join(format!("safekeeper-{n}")), &tenant);
    let main = copies(1);
    assert_eq!(main.len(), 1, "{main:?}");

    // A branch creation that makes its timeline and then pauses before its row; killed there.
    let (address, key, path) = (
        up.process.address.clone(),
        up.key.clone(),
        format!("/v1/databases/{database_id}/branches"),
    );
    // Its response never comes (the process is killed): sent raw, not read.
    let body = r#"{"name":"cut"}"#;
    let mut creation = tokio::net::TcpStream::connect(&address).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    creation.write_all(head.as_bytes()).await.expect("send");
    let deadline = Instant::now() + WAIT_MAX;
    while (1..=3).any(|safekeeper| copies(safekeeper).len() < 2) {
        assert!(Instant::now() < deadline, "the branch's timeline was not made");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    up.process.kill9();
    drop(creation);
    up.process.restart();

    wait_metric(&up, "cambium_orphan_timelines_deleted_total", 1).await;
    let deadline = Instant::now() + WAIT_MAX;
    while (1..=3).any(|safekeeper| copies(safekeeper) != main) {
        assert!(Instant::now() < deadline, "an orphan copy is left: {:?}", copies(1));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Deleted once: later rounds no longer find it on the pageserver.
    let rounds = metric(&up, "cambium_reconcile_rounds_total").await;
    while metric(&up, "cambium_reconcile_rounds_total").await < rounds + 2 {
        assert!(Instant::now() < deadline, "no reconciler round");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(metric(&up, "cambium_orphan_timelines_deleted_total").await, 1);
    let branches = up.call("GET", &path_of(&database_id), None).await;
    assert_eq!(branches.status, 200, "{}", branches.body);
    let listed = branches.json()["branches"].as_array().expect("branches").len();
    assert_eq!(listed, 1, "{}", branches.body);
    assert_eq!(ids(&uri).await, (0..10).collect::<Vec<_>>());
    insert(&uri, 10..15).await;
    assert_eq!(ids(&uri).await, (0..15).collect::<Vec<_>>());
}

/// The branches of database `id`.
fn path_of(id: &str) -> String {
    format!("/v1/databases/{id}/branches")
}

/// Copies the directory tree `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap_or_else(|e| panic!("copy to {}: {e}", target.display()));
        }
    }
}

/// What a deletion cut short (or a safekeeper down during one) leaves: a safekeeper's copy of a timeline the
/// metadata does not name, a whole tenant on a safekeeper and on the pageserver that no database owns. The
/// reconciler deletes all of them after a restart, and the database is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_copies_and_tenants_are_deleted_by_the_reconciler() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("cambium");
    let mut up = Up::start_in(&data_dir, &["--reconcile-period-ms", "300"]);
    let project = up.create_project("leftovers").await;
    let database = up.create_database(&project, "db").await;
    let uri = up.uri(&database);
    connect(&uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
        .await
        .expect("create table");
    insert(&uri, 0..10).await;

    let tenant = only_subdir(&data_dir.join("safekeeper-1"));
    let timeline = only_subdir(&tenant);
    up.process.kill9();
    // A copy of the database's timeline under an id no row names, on safekeeper 2.
    let stray_copy = data_dir
        .join("safekeeper-2")
        .join(tenant.file_name().expect("name"))
        .join("0000000000000000000000000000abcd");
    copy_tree(&timeline, &stray_copy);
    // A tenant no database owns, on safekeeper 3 and on the pageserver.
    let stray_tenant = "00000000000000000000000000001234";
    let stray_on_safekeeper = data_dir.join("safekeeper-3").join(stray_tenant);
    copy_tree(&tenant, &stray_on_safekeeper);
    let pageserver_tenants = data_dir.join("pageserver").join("tenants");
    let own_tenant = only_subdir(&pageserver_tenants);
    let stray_on_pageserver = pageserver_tenants.join(stray_tenant);
    copy_tree(&own_tenant, &stray_on_pageserver);
    up.process.restart();

    let deadline = Instant::now() + WAIT_MAX;
    while stray_copy.exists() || stray_on_safekeeper.exists() || stray_on_pageserver.exists() {
        assert!(
            Instant::now() < deadline,
            "leftovers still there after {WAIT_MAX:?}: copy {}, safekeeper tenant {}, pageserver tenant {}",
            stray_copy.exists(),
            stray_on_safekeeper.exists(),
            stray_on_pageserver.exists()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The stray copy, and the stray tenant (its pageserver deletion takes its safekeeper copies along). Polled: a
    // file goes before the reconciler counts its deletion.
    let deadline = Instant::now() + WAIT_MAX;
    while metric(&up, "cambium_orphan_timelines_deleted_total").await < 2 {
        assert!(
            Instant::now() < deadline,
            "fewer than 2 orphans counted after {WAIT_MAX:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(timeline.is_dir(), "the database's own copy stays");
    assert!(own_tenant.is_dir(), "the database's own tenant stays");
    assert_eq!(ids(&uri).await, (0..10).collect::<Vec<_>>());
    insert(&uri, 10..12).await;
}
