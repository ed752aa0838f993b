//! Deletion cut by kill -9 at each of its steps (issue 13): `cambium up` pauses at one step of a database's or a
//! branch's deletion (hidden `--faults pause_at=<step>:<ms>`, which logs `fault injection: pausing at <step>`),
//! the test waits for that line in its log, checks the step's effect is visible (what came before it is done,
//! what comes after is not), kills the process with -9 and restarts it without the fault. Then the deletion is
//! finished by the reconciler, or the resource is intact — never half: the metadata and what the pageserver and
//! every safekeeper hold agree again, the database's other data is all there and takes commits.
//!
//! The steps (see `api::faults::Step`): a database's deletion stops its compute, deletes its row
//! (`database_row` is before), deletes its tenant from the pageserver (`database_storage` is before) and then
//! from the safekeepers (`tenant_safekeepers` is between). A branch's deletion deletes its rows
//! (`branch_storage` is after), then each timeline nothing needs from the pageserver, the safekeepers
//! (`timeline_safekeepers` is between) and its row (`timeline_row` is before).
//!
//! A restore without `preserve` retires the branch's old timeline in the sweep after it: sealed on the
//! pageserver, its row marked retired (`timeline_retired` is after), then deleted from the safekeepers.
//!
//! The reconciler does not run while the service is paused (its period is long until the restart), so the
//! state at the pause is the deletion's alone. What the storage holds is read from disk beside the running service: the pageserver's live timelines from the
//! tenant's branch log, each safekeeper's from its directories, the metadata read-only (SQLite WAL mode).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::api::{connect, insert_ids as insert, table_ids as ids, Up};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// How long the service pauses at the step: far longer than the test needs to kill it there.
const PAUSE_MS: u64 = 120_000;
/// Bound of every wait.
const WAIT_MAX: Duration = Duration::from_secs(60);

/// A `cambium up` paused at a step of a deletion, with one database of ten rows.
struct Scene {
    up: Up,
    data_dir: PathBuf,
    log: PathBuf,
    database: Value,
    database_id: String,
    tenant: String,
    uri: String,
    /// The deletion request, sent and never answered (the process is killed first).
    _request: Option<tokio::net::TcpStream>,
    _root: tempfile::TempDir,
}

impl Scene {
    /// `up` that pauses at `step`, a database with table `t` holding ids 0..10.
    async fn start(step: &str) -> Scene {
        let root = tempfile::tempdir().expect("tempdir");
        let data_dir = root.path().join("cambium");
        let log = root.path().join("up.log");
        let fault = format!("pause_at={step}:{PAUSE_MS}");
        let up = Up::start_in_logged(
            &data_dir,
            // The reconciler's first round runs at the start, before anything exists; the next would come after
            // the test, so nothing but the deletion itself moves while it is paused.
            &["--reconcile-period-ms", "600000", "--faults", &fault],
            &log,
            "api::faults=warn",
        );
        let project = up.create_project("deletions").await;
        let database = up.create_database(&project, "db").await;
        let database_id = text(&database, "id");
        let uri = up.uri(&database);
        connect(&uri)
            .await
            .expect("connect")
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
        insert(&uri, 0..10).await;
        let tenant = metadata_query(&data_dir, "SELECT tenant_id FROM databases WHERE id = ?1", &database_id)
            .into_iter()
            .next()
            .expect("the database's tenant");
        Scene {
            up,
            data_dir,
            log,
            database,
            database_id,
            tenant,
            uri,
            _request: None,
            _root: root,
        }
    }

    /// Sends `DELETE path` without waiting for the answer, and waits until the service pauses at `step`.
    async fn delete_until_paused(&mut self, path: &str, step: &str) {
        self.request_until_paused("DELETE", path, "", step).await;
    }

    /// Sends `method path` with JSON `body` without waiting for the answer, and waits until the service pauses at
    /// `step`.
    async fn request_until_paused(&mut self, method: &str, path: &str, body: &str, step: &str) {
        let address = self.up.process.address.clone();
        let mut request = tokio::net::TcpStream::connect(&address).await.expect("connect");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.up.key,
            body.len()
        );
        request.write_all(head.as_bytes()).await.expect("send");
        self._request = Some(request);
        let line = format!("fault injection: pausing at {step}");
        wait_for(&format!("the pause at {step}"), || {
            std::fs::read_to_string(&self.log).is_ok_and(|log| log.contains(&line))
        })
        .await;
    }

    /// kill -9 where it paused, then a restart on the same data and ports without the fault, the reconciler
    /// running every 300 ms.
    fn crash_and_restart(&mut self) {
        self.up.process.kill9();
        self._request = None;
        let args = self.up.process.args_mut();
        let at = args.iter().position(|arg| arg == "--faults").expect("the fault flag");
        args.drain(at..at + 2);
        let at = args
            .iter()
            .position(|arg| arg == "--reconcile-period-ms")
            .expect("the reconciler's period");
        args[at + 1] = "300".to_owned();
        self.up.process.restart();
    }

    /// The timelines the pageserver holds for the tenant (its branch log's live ones); empty if it holds no
    /// such tenant.
    fn on_pageserver(&self) -> BTreeSet<String> {
        let path = self
            .data_dir
            .join("pageserver/tenants")
            .join(&self.tenant)
            .join("branches.log");
        let Ok(log) = std::fs::read(&path) else {
            return BTreeSet::new();
        };
        let (entries, _) = storage::formats::branch_log_prefix(&log).expect("a valid branch log");
        storage::formats::live_timelines(&entries)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// The timelines safekeeper `n` holds for the tenant (its creation log's, and any directory with a control
    /// file); empty if it holds no such tenant.
    fn on_safekeeper(&self, n: u32) -> BTreeSet<String> {
        common::safekeeper_timelines(&self.data_dir.join(format!("safekeeper-{n}")), &self.tenant)
    }

    /// Whether any storage node holds anything of the tenant.
    fn tenant_held(&self) -> bool {
        self.data_dir.join("pageserver/tenants").join(&self.tenant).exists()
            || (1..=3).any(|n| {
                common::safekeeper_tenants(&self.data_dir.join(format!("safekeeper-{n}"))).contains(&self.tenant)
            })
    }

    /// Every timeline row of the database.
    fn timeline_rows(&self) -> BTreeSet<String> {
        metadata_query(
            &self.data_dir,
            "SELECT timeline_id FROM timelines WHERE database_id = ?1",
            &self.database_id,
        )
        .into_iter()
        .collect()
    }

    /// Waits until the metadata and every storage node agree on the database's timelines, which are `want`.
    async fn wait_storage_is(&self, want: &BTreeSet<String>) {
        wait_for("the storage and the metadata to agree", || {
            self.timeline_rows() == *want
                && self.on_pageserver() == *want
                && (1..=3).all(|n| self.on_safekeeper(n) == *want)
        })
        .await;
    }

    /// Every row the database had is there, and it takes a commit.
    async fn assert_intact(&self) {
        self.assert_intact_from(10).await;
    }

    /// Ids `0..rows` are there, and the database takes a commit.
    async fn assert_intact_from(&self, rows: i64) {
        assert_eq!(ids(&self.uri).await, (0..rows).collect::<Vec<_>>());
        insert(&self.uri, rows..rows + 2).await;
        assert_eq!(ids(&self.uri).await, (0..rows + 2).collect::<Vec<_>>());
    }
}

/// The text field `key` of `value`.
fn text(value: &Value, key: &str) -> String {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {value}"))
        .to_owned()
}

/// Polls `done` every 50 ms; panics naming `what` after [`WAIT_MAX`].
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !done() {
        assert!(Instant::now() < deadline, "waited {WAIT_MAX:?} for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first column of `sql` (one `?1` parameter, `arg`) over the control metadata, read-only beside the service.
fn metadata_query(data_dir: &Path, sql: &str, arg: &str) -> Vec<String> {
    use compute::rusqlite::{Connection, OpenFlags};
    let metadata = Connection::open_with_flags(
        data_dir.join("metadata.sqlite"),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the metadata read-only");
    let mut statement = metadata.prepare(sql).expect("prepare");
    statement
        .query_map([arg], |row| row.get::<_, String>(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_deletion_killed_before_its_row_goes_leaves_the_database_intact() {
    let mut scene = Scene::start("database_row").await;
    let path = format!("/v1/databases/{}", scene.database_id);
    let branches = scene.up.call("GET", &format!("{path}/branches"), None).await.json();
    scene.delete_until_paused(&path, "database_row").await;
    // The compute is stopped, nothing else is done.
    assert!(connect(&scene.uri).await.is_err(), "the compute is stopped first");
    let timelines = scene.timeline_rows();
    assert_eq!(timelines.len(), 1, "{timelines:?}");
    scene.crash_and_restart();

    // Intact: the same database, served again, all its data, its branches.
    let reply = scene.up.call("GET", &path, None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let mut database = reply.json()["database"].clone();
    assert_eq!(database["status"], "active", "{database}");
    database["connection_uri"] = scene.database["connection_uri"].clone();
    assert_eq!(database, scene.database);
    scene.assert_intact().await;
    let again = scene.up.call("GET", &format!("{path}/branches"), None).await.json();
    assert_eq!(again, branches);
    scene.wait_storage_is(&timelines).await;
    // And the deletion, asked again, is done.
    let deleted = scene.up.call("DELETE", &path, None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    wait_for("the tenant to be deleted", || !scene.tenant_held()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_deletion_killed_after_its_row_went_is_finished_by_the_reconciler() {
    let mut scene = Scene::start("database_storage").await;
    let path = format!("/v1/databases/{}", scene.database_id);
    scene.delete_until_paused(&path, "database_storage").await;
    // The rows are gone, the storage is not.
    scene.up.call("GET", &path, None).await.assert_error(404, "not_found");
    assert!(scene.timeline_rows().is_empty(), "{:?}", scene.timeline_rows());
    assert!(!scene.on_pageserver().is_empty());
    assert!((1..=3).all(|n| !scene.on_safekeeper(n).is_empty()));
    scene.crash_and_restart();

    scene.up.call("GET", &path, None).await.assert_error(404, "not_found");
    wait_for("the tenant to be deleted from every storage node", || {
        !scene.tenant_held()
    })
    .await;
    assert!(connect(&scene.uri).await.is_err(), "a deleted database serves nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_deletion_killed_between_the_pageserver_and_the_safekeepers_is_finished() {
    let mut scene = Scene::start("tenant_safekeepers").await;
    let path = format!("/v1/databases/{}", scene.database_id);
    scene.delete_until_paused(&path, "tenant_safekeepers").await;
    // Gone from the pageserver, still on the safekeepers.
    assert!(!scene.data_dir.join("pageserver/tenants").join(&scene.tenant).exists());
    assert!((1..=3).all(|n| !scene.on_safekeeper(n).is_empty()));
    scene.crash_and_restart();
    scene.up.call("GET", &path, None).await.assert_error(404, "not_found");
    wait_for("the safekeepers' copies to be deleted", || !scene.tenant_held()).await;
}

/// A branch `doomed` of the database's main branch, written on both sides; its id and its timeline.
async fn doomed_branch(scene: &Scene) -> (String, String) {
    let created = scene
        .up
        .call(
            "POST",
            &format!("/v1/databases/{}/branches", scene.database_id),
            Some(r#"{"name":"doomed"}"#),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let branch = created.json()["branch"].clone();
    let branch_id = text(&branch, "id");
    insert(&scene.up.uri(&branch), 100..105).await;
    let timeline = metadata_query(
        &scene.data_dir,
        "SELECT timeline_id FROM branches WHERE id = ?1",
        &branch_id,
    )
    .into_iter()
    .next()
    .expect("the branch's timeline");
    (branch_id, timeline)
}

/// A branch deletion paused and killed at `step`; `check_paused` looks at the state there. After the restart
/// the branch is gone from the metadata and every storage node, and the database is intact.
async fn branch_deletion_is_finished(step: &str, check_paused: impl FnOnce(&Scene, &str)) {
    let mut scene = Scene::start(step).await;
    let (branch_id, timeline) = doomed_branch(&scene).await;
    let before = scene.timeline_rows();
    assert!(before.contains(&timeline), "{before:?}");
    scene.wait_storage_is(&before).await;
    scene
        .delete_until_paused(&format!("/v1/branches/{branch_id}"), step)
        .await;
    check_paused(&scene, &timeline);
    scene.crash_and_restart();

    scene
        .up
        .call("GET", &format!("/v1/branches/{branch_id}"), None)
        .await
        .assert_error(404, "not_found");
    let listed = scene
        .up
        .call("GET", &format!("/v1/databases/{}/branches", scene.database_id), None)
        .await
        .json();
    let listed = listed["branches"].as_array().expect("branches").clone();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["is_default"], true);
    let mut after = before.clone();
    after.remove(&timeline);
    scene.wait_storage_is(&after).await;
    scene.assert_intact().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_deletion_killed_after_its_rows_went_is_finished_by_the_reconciler() {
    branch_deletion_is_finished("branch_storage", |scene, timeline| {
        // The branch row is gone; its timeline's row and its storage are not.
        assert!(scene.timeline_rows().contains(timeline));
        assert!(scene.on_pageserver().contains(timeline));
        assert!((1..=3).all(|n| scene.on_safekeeper(n).contains(timeline)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_deletion_killed_between_the_pageserver_and_the_safekeepers_is_finished() {
    branch_deletion_is_finished("timeline_safekeepers", |scene, timeline| {
        assert!(scene.timeline_rows().contains(timeline));
        assert!(
            !scene.on_pageserver().contains(timeline),
            "deleted from the pageserver first"
        );
        assert!((1..=3).all(|n| scene.on_safekeeper(n).contains(timeline)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_deletion_killed_before_its_timeline_row_goes_is_finished() {
    branch_deletion_is_finished("timeline_row", |scene, timeline| {
        assert!(scene.timeline_rows().contains(timeline));
        assert!(!scene.on_pageserver().contains(timeline));
        assert!((1..=3).all(|n| !scene.on_safekeeper(n).contains(timeline)));
    })
    .await;
}

/// A branch creation writes its row at once with its timeline on the storage (issue 12 item 7). Killed with the
/// row committed and the storage not yet asked (`branch_timeline`), it leaves a row whose timeline no storage node
/// holds, a creation never acknowledged; after the restart, before the database is served, it is taken back: no
/// branch, no timeline row, no audit entry of it, nothing on the storage, and the database intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_creation_killed_after_its_row_before_its_storage_is_taken_back() {
    let mut scene = Scene::start("branch_timeline").await;
    let before = scene.timeline_rows();
    scene.wait_storage_is(&before).await;
    let path = format!("/v1/databases/{}/branches", scene.database_id);
    let created_audits = |scene: &Scene| {
        metadata_query(
            &scene.data_dir,
            "SELECT id FROM audit_log WHERE status = 201 AND path = ?1",
            &path,
        )
        .len()
    };
    // A webhook on `branch.created` (at an address nothing listens on: its deliveries stay in the log).
    let project = text(&scene.database, "project_id");
    let hook = scene
        .up
        .call(
            "POST",
            &format!("/v1/projects/{project}/webhooks"),
            Some(r#"{"url":"http://127.0.0.1:9/hook","events":["branch.created"]}"#),
        )
        .await;
    assert_eq!(hook.status, 201, "{}", hook.body);
    let deliveries_of = |scene: &Scene, branch_id: &str| {
        metadata_query(
            &scene.data_dir,
            "SELECT coalesce(held_for_timeline, 'released') FROM webhook_deliveries
             WHERE instr(body, ?1) > 0",
            branch_id,
        )
    };
    scene
        .request_until_paused("POST", &path, r#"{"name":"early"}"#, "branch_timeline")
        .await;
    // The row, its timeline's row (storage pending), its audit entry and its event's delivery, held, are committed
    // (the row's write runs at once with the storage call, so it may land just after the pause is logged); no
    // storage node holds it.
    let early = || metadata_query(&scene.data_dir, "SELECT id FROM branches WHERE name = ?1", "early");
    wait_for("the branch row, written at once with the storage", || {
        !early().is_empty()
    })
    .await;
    let branch_id = early().into_iter().next().expect("the branch row");
    let timeline = metadata_query(
        &scene.data_dir,
        "SELECT timeline_id FROM branches WHERE id = ?1",
        &branch_id,
    )
    .into_iter()
    .next()
    .expect("its timeline");
    assert!(scene.timeline_rows().contains(&timeline));
    let pending = metadata_query(
        &scene.data_dir,
        "SELECT timeline_id FROM timelines WHERE storage_pending = 1 AND database_id = ?1",
        &scene.database_id,
    );
    assert_eq!(pending, std::slice::from_ref(&timeline));
    assert_eq!(created_audits(&scene), 1);
    assert_eq!(deliveries_of(&scene, &branch_id), std::slice::from_ref(&timeline));
    assert!(!scene.on_pageserver().contains(&timeline));
    assert!((1..=3).all(|n| !scene.on_safekeeper(n).contains(&timeline)));
    scene.crash_and_restart();

    // Taken back before the database was served: the database answers SQL, so it was served.
    scene.assert_intact().await;
    scene
        .up
        .call("GET", &format!("/v1/branches/{branch_id}"), None)
        .await
        .assert_error(404, "not_found");
    let listed = scene.up.call("GET", &path, None).await.json();
    assert_eq!(listed["branches"].as_array().expect("branches").len(), 1, "{listed}");
    scene.wait_storage_is(&before).await;
    assert_eq!(created_audits(&scene), 0);
    // Its event went with it: never sent for a branch that was never made.
    assert!(deliveries_of(&scene, &branch_id).is_empty());
    // And the same name can be created now, served at once; its event is released with the reply.
    let again = scene.up.call("POST", &path, Some(r#"{"name":"early"}"#)).await;
    assert_eq!(again.status, 201, "{}", again.body);
    let again_id = text(&again.json()["branch"], "id");
    assert_eq!(deliveries_of(&scene, &again_id), ["released"]);
    let uri = scene.up.uri(&again.json()["branch"]);
    assert_eq!(ids(&uri).await.len(), 12);
}

/// The common case of a pending row: the last branch created before a crash was acknowledged, but its timeline's
/// confirmation waits for the next creation's commit. After kill -9 and a restart the pageserver and every
/// safekeeper hold its timeline, so it is kept (no longer pending, no creation call: asked again, the pageserver
/// would wait for the parent's branch point, not ingested yet, and refuse) and served with its rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_branch_still_recorded_pending_is_kept_and_served_after_a_crash() {
    // The fault's step is never reached here (no database is deleted).
    let mut scene = Scene::start("database_row").await;
    let before = scene.timeline_rows();
    let path = format!("/v1/databases/{}/branches", scene.database_id);
    let created = scene.up.call("POST", &path, Some(r#"{"name":"last"}"#)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let branch = created.json()["branch"].clone();
    let timeline = metadata_query(
        &scene.data_dir,
        "SELECT timeline_id FROM branches WHERE id = ?1",
        &text(&branch, "id"),
    )
    .into_iter()
    .next()
    .expect("its timeline");
    let (data_dir, database_id) = (scene.data_dir.clone(), scene.database_id.clone());
    let pending = move || {
        metadata_query(
            &data_dir,
            "SELECT timeline_id FROM timelines WHERE storage_pending = 1 AND database_id = ?1",
            &database_id,
        )
    };
    assert_eq!(pending(), std::slice::from_ref(&timeline));
    let uri = scene.up.uri(&branch);
    insert(&uri, 100..103).await;
    scene.crash_and_restart();

    assert_eq!(ids(&uri).await.len(), 13);
    assert!(pending().is_empty(), "{:?}", pending());
    let mut after = before.clone();
    after.insert(timeline);
    scene.wait_storage_is(&after).await;
    scene.assert_intact().await;
}

/// A mark of main's latest state (a branch made and deleted at once), as `parent_lsn` gives it.
async fn mark_lsn(scene: &Scene, name: &str) -> String {
    let created = scene
        .up
        .call(
            "POST",
            &format!("/v1/databases/{}/branches", scene.database_id),
            Some(&format!(r#"{{"name":"{name}"}}"#)),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let branch = created.json()["branch"].clone();
    let deleted = scene
        .up
        .call("DELETE", &format!("/v1/branches/{}", text(&branch, "id")), None)
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    text(&branch, "parent_lsn")
}

/// Restores main to `lsn` (keeping the state before it as a branch with `preserve`) and waits for the
/// operation's end (not for the sweep after it).
async fn restore_main(scene: &Scene, lsn: &str, preserve: bool) {
    let main = text(&scene.database, "default_branch_id");
    let reply = scene
        .up
        .call(
            "POST",
            &format!("/v1/branches/{main}/restore"),
            Some(&format!(r#"{{"target_lsn":"{lsn}","preserve":{preserve}}}"#)),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let operation = text(&reply.json()["operation"], "id");
    let ended = scene.up.wait_operation(&operation).await;
    assert_eq!(ended["status"], "finished", "{ended}");
}

/// Main's timeline now.
fn main_timeline(scene: &Scene) -> String {
    metadata_query(
        &scene.data_dir,
        "SELECT timeline_id FROM branches WHERE id = ?1",
        &text(&scene.database, "default_branch_id"),
    )
    .into_iter()
    .next()
    .expect("main's timeline")
}

/// The database's retired timeline rows.
fn retired_rows(scene: &Scene) -> BTreeSet<String> {
    metadata_query(
        &scene.data_dir,
        "SELECT timeline_id FROM timelines WHERE database_id = ?1 AND retired = 1",
        &scene.database_id,
    )
    .into_iter()
    .collect()
}

/// The timelines the tenant's branch log records as sealed.
fn sealed_on_pageserver(scene: &Scene) -> BTreeSet<String> {
    let path = scene
        .data_dir
        .join("pageserver/tenants")
        .join(&scene.tenant)
        .join("branches.log");
    let log = std::fs::read(&path).expect("the branch log");
    let (entries, _) = storage::formats::branch_log_prefix(&log).expect("a valid branch log");
    entries
        .iter()
        .filter_map(|entry| match entry {
            storage::branch_log::BranchLogEntry::Seal { timeline_id, .. } => Some(timeline_id.to_string()),
            _ => None,
        })
        .collect()
}

/// Restores without `preserve` chain each new timeline to the old one (the new reads through it below the restore
/// point), so none of the old ones can be deleted. Each old one is retired instead: sealed on the pageserver
/// (flushed, followed no more) and deleted from every safekeeper, so a branch restored before every test run does
/// not pile up a timeline per restore on the safekeepers. Killed between the row marked retired and the
/// safekeepers' deletion (`timeline_retired`), the reconciler deletes the copies left. Through restarts, main
/// reads its restored state and a branch made at a point inside a retired timeline reads that point, from the
/// pageserver alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_without_preserve_retire_the_old_timelines_from_the_safekeepers_even_through_a_crash() {
    let mut scene = Scene::start("timeline_retired").await;
    let first = main_timeline(&scene);
    scene.wait_storage_is(&BTreeSet::from([first.clone()])).await;
    let ten = mark_lsn(&scene, "ten").await;
    insert(&scene.uri, 10..20).await;
    restore_main(&scene, &ten, false).await;
    let line = "fault injection: pausing at timeline_retired";
    wait_for("the pause in the retirement", || {
        std::fs::read_to_string(&scene.log).is_ok_and(|log| log.contains(line))
    })
    .await;
    let second = main_timeline(&scene);
    assert_ne!(first, second);
    // Paused: the old timeline sealed and its row retired; the safekeepers still hold it.
    assert_eq!(retired_rows(&scene), BTreeSet::from([first.clone()]));
    assert_eq!(sealed_on_pageserver(&scene), BTreeSet::from([first.clone()]));
    let both = BTreeSet::from([first.clone(), second.clone()]);
    assert_eq!(scene.on_pageserver(), both);
    assert!((1..=3).all(|n| scene.on_safekeeper(n).contains(&first)));
    scene.crash_and_restart();

    // The reconciler deletes the copies the crash left; the pageserver keeps both, main reads its restored state.
    wait_for("the retired timeline's copies to be deleted", || {
        (1..=3).all(|n| scene.on_safekeeper(n) == BTreeSet::from([second.clone()]))
    })
    .await;
    assert_eq!(scene.on_pageserver(), both);
    assert_eq!(scene.timeline_rows(), both);
    assert_eq!(ids(&scene.uri).await, (0..10).collect::<Vec<_>>());

    // More restores (no fault now), all to one point, as a test database reset before every run: the first one
    // retires the timeline it leaves (the point is inside it); each later one restores to the start of the
    // timeline it leaves, which is the same point of that first ancestor, so the new timeline hangs below that
    // ancestor and the one it replaces, needed by nothing, is deleted everywhere: no chain grows.
    insert(&scene.uri, 10..12).await;
    let twelve = mark_lsn(&scene, "twelve").await;
    for round in 0..3_i64 {
        insert(&scene.uri, 100 + round * 10..105 + round * 10).await;
        restore_main(&scene, &twelve, false).await;
    }
    let last = main_timeline(&scene);
    let kept = BTreeSet::from([first.clone(), second.clone(), last.clone()]);
    wait_for("the old timelines to be retired or deleted", || {
        retired_rows(&scene) == both
            && scene.timeline_rows() == kept
            && scene.on_pageserver() == kept
            && (1..=3).all(|n| scene.on_safekeeper(n) == BTreeSet::from([last.clone()]))
    })
    .await;
    assert_eq!(sealed_on_pageserver(&scene), both);
    assert_eq!(ids(&scene.uri).await, (0..12).collect::<Vec<_>>());
    // The retired timelines have no copies, and the database's replication is healthy all the same.
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        let health = scene
            .up
            .call("GET", &format!("/v1/databases/{}/health", scene.database_id), None)
            .await;
        assert_eq!(health.status, 200, "{}", health.body);
        match health.json()["health"]["replication"].as_str() {
            Some("healthy") => break,
            Some("unknown") if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => panic!("replication is not healthy: {}", health.body),
        }
    }

    // Killed and restarted: the pageserver follows no WAL for the sealed timelines (the safekeepers have none),
    // yet main and a branch at the first mark, inside the first (retired) timeline, read what they did.
    scene.up.process.kill9();
    scene.up.process.restart();
    assert_eq!(ids(&scene.uri).await, (0..12).collect::<Vec<_>>());
    let created = scene
        .up
        .call(
            "POST",
            &format!("/v1/databases/{}/branches", scene.database_id),
            Some(&format!(r#"{{"name":"at_ten","parent_lsn":"{ten}"}}"#)),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let at_ten = scene.up.uri(&created.json()["branch"]);
    assert_eq!(ids(&at_ten).await, (0..10).collect::<Vec<_>>());
    insert(&at_ten, 10..11).await;
    scene.assert_intact_from(12).await;

    // A restore that keeps the state before it as a branch leaves nothing to retire; deleting that kept branch
    // (with its subtree: `at_ten`, made from main before the restore, is now below it) leaves its timeline only
    // branched from, and it is retired after the deletion's reply.
    let before_keep = main_timeline(&scene);
    let fourteen = mark_lsn(&scene, "fourteen").await;
    insert(&scene.uri, 14..16).await;
    restore_main(&scene, &fourteen, true).await;
    let kept = metadata_query(
        &scene.data_dir,
        "SELECT id FROM branches WHERE timeline_id = ?1",
        &before_keep,
    );
    assert_eq!(kept.len(), 1, "the kept branch is on the old timeline: {kept:?}");
    let restored = main_timeline(&scene);
    assert!(!retired_rows(&scene).contains(&before_keep), "a branch is on it");
    let deleted = scene
        .up
        .call("DELETE", &format!("/v1/branches/{}", kept[0]), None)
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    wait_for("the kept branch's timeline to be retired", || {
        retired_rows(&scene).contains(&before_keep)
            && (1..=3).all(|n| scene.on_safekeeper(n) == BTreeSet::from([restored.clone()]))
    })
    .await;
    assert!(scene.on_pageserver().contains(&before_keep));
    assert_eq!(ids(&scene.uri).await, (0..14).collect::<Vec<_>>());
}
