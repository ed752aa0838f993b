//! Issue 13's randomized test: concurrent SQL writers, an idle reader holding snapshots open, branch create /
//! restore / delete and database create / delete calls through `/v1`, and `kill -9` of the whole `cambium up`
//! between rounds, all seeded (`CHAOS_SEED`) and bounded (`CHAOS_ROUNDS` rounds of `CHAOS_ROUND_MS`; small by
//! default so CI runs it). Then: every acknowledged commit is on the database, no row was written that no client
//! sent, each database has exactly one default branch, no operation of the project stays `running` (those whose
//! response the kill swallowed included), every database listed is active and opens and every branch opens and
//! answers, a database whose deletion was acknowledged is gone, and once the reconciler has run, no storage holds
//! a tenant or a timeline the control metadata does not name, and the metadata keeps no timeline nothing needs
//! (no deletion left half done).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::api::{connect, Up};
use serde_json::Value;

/// The writers' shared record (a poisoned lock still gives its data: the test only appends).
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Writes>>);

impl Shared {
    fn with<R>(&self, f: impl FnOnce(&mut Writes) -> R) -> R {
        let mut guard = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// xorshift64*: the test's only randomness, from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the writers sent: acknowledged rows, and rows whose outcome is unknown (an error after sending).
#[derive(Default)]
struct Writes {
    acknowledged: BTreeSet<(i64, i64)>,
    maybe: BTreeSet<(i64, i64)>,
}

/// One writer: inserts `(client, seq)` rows in autocommit until `stop`, reconnecting after errors.
async fn writer(uri: String, client_id: i64, first_seq: i64, stop: Arc<AtomicBool>, writes: Shared) -> i64 {
    let mut seq = first_seq;
    while !stop.load(Ordering::SeqCst) {
        let Ok(client) = connect(&uri).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while !stop.load(Ordering::SeqCst) {
            seq += 1;
            let row = (client_id, seq);
            let sent = client
                .execute(
                    &format!("INSERT INTO log (client, seq) VALUES ({client_id}, {seq})"),
                    &[],
                )
                .await;
            match sent {
                Ok(_) => writes.with(|w| w.acknowledged.insert(row)),
                Err(_) => {
                    writes.with(|w| w.maybe.insert(row));
                    break;
                }
            };
        }
    }
    seq
}

/// An idle reader: holds a read transaction open for a while, again and again; returns how many it held.
async fn idle_reader(uri: String, stop: Arc<AtomicBool>) -> u64 {
    let mut held = 0;
    while !stop.load(Ordering::SeqCst) {
        let Ok(client) = connect(&uri).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let held_one = async {
            client.batch_execute("BEGIN").await?;
            client.query_one("SELECT count(*) FROM log", &[]).await?;
            tokio::time::sleep(Duration::from_millis(700)).await;
            client.batch_execute("COMMIT").await
        };
        if held_one.await.is_ok() {
            held += 1;
        }
    }
    held
}

/// Databases the test makes besides the first, at most at once.
const DATABASES_MAX: usize = 3;

/// A branch the test made: its id and the connection string its creation returned.
#[derive(Clone, Debug)]
struct Branch {
    id: String,
    uri: String,
    parent_lsn: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sql_branches_restores_and_kill_9_keep_every_promise() {
    let seed = env_u64("CHAOS_SEED", 0xC4A0_5EED);
    let rounds = env_u64("CHAOS_ROUNDS", 3);
    let round_ms = env_u64("CHAOS_ROUND_MS", 2_500);
    eprintln!("chaos: seed {seed:#x}, {rounds} rounds of {round_ms} ms (CHAOS_SEED, CHAOS_ROUNDS, CHAOS_ROUND_MS)");
    let mut rng = Rng(seed | 1);

    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("cambium");
    let mut up = Up::start_in(&data_dir, &["--reconcile-period-ms", "300"]);
    let project = up.create_project("chaos").await;
    let database = up.create_database(&project, "chaos").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();
    connect(&uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE log (client BIGINT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (client, seq))")
        .await
        .expect("create table");

    let writes: Shared = Shared::default();
    let mut branches: Vec<Branch> = Vec::new();
    let mut operations: Vec<String> = Vec::new();
    let mut seqs: HashMap<i64, i64> = HashMap::new();
    let mut api_calls = 0u64;
    // Databases made besides the first (id, connection string with its password), and those deleted (204).
    let mut databases: Vec<(String, String)> = Vec::new();
    let mut deleted_databases: Vec<String> = Vec::new();
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3i64)
            .map(|client| {
                let first = *seqs.get(&client).unwrap_or(&0);
                tokio::spawn(writer(uri.clone(), client, first, stop.clone(), writes.clone()))
            })
            .collect();
        let reader = tokio::spawn(idle_reader(uri.clone(), stop.clone()));

        // The API side, meanwhile: branch, restore and delete at random, leaving some operations running.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(round_ms);
        while tokio::time::Instant::now() < deadline {
            api_calls += 1;
            match rng.below(6) {
                0 | 1 => {
                    let name = format!("b{round}_{}", rng.below(1_000_000));
                    let reply = up
                        .call(
                            "POST",
                            &format!("/v1/databases/{database_id}/branches"),
                            Some(&format!(r#"{{"name":"{name}"}}"#)),
                        )
                        .await;
                    if reply.status == 201 {
                        let branch = &reply.json()["branch"];
                        branches.push(Branch {
                            id: branch["id"].as_str().expect("id").to_owned(),
                            // The branch's string has no password: the database's, kept from its creation.
                            uri: up.uri(branch),
                            parent_lsn: branch["parent_lsn"].as_str().unwrap_or_default().to_owned(),
                        });
                    }
                }
                2 if !branches.is_empty() => {
                    let branch = branches[rng.below(branches.len() as u64) as usize].clone();
                    let reply = up
                        .call(
                            "POST",
                            &format!("/v1/branches/{}/restore", branch.id),
                            Some(&format!(r#"{{"target_lsn":"{}"}}"#, branch.parent_lsn)),
                        )
                        .await;
                    if let Some(id) = reply.json()["operation"]["id"].as_str() {
                        operations.push(id.to_owned());
                    }
                }
                3 if !branches.is_empty() => {
                    let index = rng.below(branches.len() as u64) as usize;
                    let branch = branches.remove(index);
                    let reply = up.call("DELETE", &format!("/v1/branches/{}", branch.id), None).await;
                    if reply.status >= 300 {
                        // Refused (an operation runs on the database): it stays.
                        branches.push(branch);
                    }
                }
                4 if databases.len() < DATABASES_MAX => {
                    let name = format!("d{round}_{}", rng.below(1_000_000));
                    let reply = up
                        .call(
                            "POST",
                            &format!("/v1/projects/{project}/databases"),
                            Some(&format!(r#"{{"name":"{name}"}}"#)),
                        )
                        .await;
                    if reply.status == 201 {
                        let created = reply.json();
                        let id = created["database"]["id"].as_str().expect("id").to_owned();
                        let uri = created["database"]["connection_uri"].as_str().expect("uri").to_owned();
                        up.remember_password(&id, &uri);
                        databases.push((id, uri));
                        if let Some(operation) = created["operation"]["id"].as_str() {
                            operations.push(operation.to_owned());
                        }
                    }
                }
                5 if !databases.is_empty() => {
                    let (id, uri) = databases.remove(rng.below(databases.len() as u64) as usize);
                    let reply = up.call("DELETE", &format!("/v1/databases/{id}"), None).await;
                    match reply.status {
                        204 => deleted_databases.push(id),
                        // Refused (its creation still runs): it stays.
                        _ => databases.push((id, uri)),
                    }
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(50 + rng.below(200))).await;
        }

        // kill -9 in the middle of whatever runs, then back on the same data and ports.
        up.process.kill9();
        stop.store(true, Ordering::SeqCst);
        for (client, handle) in writers.into_iter().enumerate() {
            let last = handle.await.expect("writer");
            seqs.insert(client as i64, last);
        }
        let held = reader.await.expect("reader");
        eprintln!(
            "chaos round {round}: {} acknowledged so far, reader held {held} snapshots, {} branches",
            writes.with(|w| w.acknowledged.len()),
            branches.len()
        );
        up.process.restart();
    }

    // Every operation ends; none stays running after the crashes, the ones whose response a kill swallowed
    // included (they are in the project's list, not in `operations`).
    let listed = up
        .call("GET", &format!("/v1/projects/{project}/operations?limit=500"), None)
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    for operation in listed.json()["operations"].as_array().expect("operations") {
        let id = operation["id"].as_str().expect("id").to_owned();
        if !operations.contains(&id) {
            operations.push(id);
        }
    }
    for id in &operations {
        let ended = up.wait_operation(id).await;
        assert!(
            ended["status"] == "finished" || ended["status"] == "failed",
            "seed {seed:#x}: operation {id} ended {ended}"
        );
    }
    // Every acknowledged row is there; every row there was sent.
    let client = connect(&uri).await.expect("connect after the last restart");
    let rows: BTreeSet<(i64, i64)> = client
        .query("SELECT client, seq FROM log", &[])
        .await
        .expect("read the log")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let (acknowledged, maybe) = writes.with(|w| (w.acknowledged.clone(), w.maybe.clone()));
    assert!(!acknowledged.is_empty(), "seed {seed:#x}: nothing was acknowledged");
    let missing: Vec<_> = acknowledged.difference(&rows).take(5).collect();
    assert!(
        missing.is_empty(),
        "seed {seed:#x}: acknowledged rows missing: {missing:?}"
    );
    let phantom: Vec<_> = rows
        .iter()
        .filter(|row| !acknowledged.contains(row) && !maybe.contains(row))
        .take(5)
        .collect();
    assert!(phantom.is_empty(), "seed {seed:#x}: rows nobody sent: {phantom:?}");
    let integrity: String = client
        .query_one("PRAGMA integrity_check", &[])
        .await
        .expect("integrity")
        .get(0);
    assert_eq!(integrity, "ok");

    // Exactly one default branch; every branch listed opens and answers.
    let listed = up
        .call("GET", &format!("/v1/databases/{database_id}/branches?limit=100"), None)
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed: Vec<Value> = listed.json()["branches"].as_array().cloned().unwrap_or_default();
    let defaults = listed.iter().filter(|b| b["is_default"] == true).count();
    assert_eq!(defaults, 1, "seed {seed:#x}: {defaults} default branches");
    for branch in &branches {
        if !listed.iter().any(|b| b["id"].as_str() == Some(branch.id.as_str())) {
            continue;
        }
        let session = connect(&branch.uri)
            .await
            .unwrap_or_else(|e| panic!("seed {seed:#x}: branch {} does not open: {e:?}", branch.id));
        let integrity: String = session
            .query_one("PRAGMA integrity_check", &[])
            .await
            .unwrap_or_else(|e| panic!("seed {seed:#x}: branch {} does not answer: {e:?}", branch.id))
            .get(0);
        assert_eq!(integrity, "ok", "branch {}", branch.id);
    }
    check_databases(&up, &project, &database_id, &deleted_databases, seed).await;
    // No orphan timeline: once the reconciler has run twice after the last restart, the pageserver holds
    // exactly the timelines the metadata names for the database, and each safekeeper none other.
    let rounds_now = reconcile_rounds(&up).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while reconcile_rounds(&up).await < rounds_now + 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed:#x}: the reconciler does not run"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (tenant, named) = metadata_timelines(&data_dir, &database_id);
    // The pageserver's timelines are those its tenant's branch log leaves alive (directories come with flushes).
    let log = std::fs::read(data_dir.join("pageserver/tenants").join(&tenant).join("branches.log"))
        .expect("the tenant's branch log");
    let (entries, _) = storage::formats::branch_log_prefix(&log).expect("a valid branch log");
    let on_pageserver: BTreeSet<String> = storage::formats::live_timelines(&entries)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        !on_pageserver.is_empty(),
        "the pageserver holds no timeline of the database"
    );
    let orphans: Vec<_> = on_pageserver.difference(&named).collect();
    assert!(
        orphans.is_empty(),
        "seed {seed:#x}: orphan timelines on the pageserver: {orphans:?}"
    );
    for safekeeper in 1..=3 {
        let held = common::safekeeper_timelines(&data_dir.join(format!("safekeeper-{safekeeper}")), &tenant);
        assert!(
            !held.is_empty(),
            "safekeeper {safekeeper}'s timelines are where the test looks"
        );
        let orphans: Vec<_> = held.difference(&named).collect();
        assert!(
            orphans.is_empty(),
            "seed {seed:#x}: orphan timelines on safekeeper {safekeeper}: {orphans:?}"
        );
    }
    check_no_orphan_tenants_or_half_deletions(&data_dir, seed);
    eprintln!(
        "chaos: {} acknowledged, {} unknown, {} rows, {api_calls} API calls, {} operations, {} branches checked, \
         {} databases deleted",
        acknowledged.len(),
        maybe.len(),
        rows.len(),
        operations.len(),
        branches.len(),
        deleted_databases.len()
    );
}

/// Every database of the project is active, has exactly one default branch and opens, answering and taking a
/// write; one whose deletion was acknowledged is gone.
async fn check_databases(up: &Up, project: &str, first: &str, deleted: &[String], seed: u64) {
    let listed = up
        .call("GET", &format!("/v1/projects/{project}/databases?limit=500"), None)
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed: Vec<Value> = listed.json()["databases"].as_array().cloned().unwrap_or_default();
    assert!(
        listed.iter().any(|d| d["id"].as_str() == Some(first)),
        "seed {seed:#x}: the first database is not listed"
    );
    for database in &listed {
        let id = database["id"].as_str().expect("id");
        assert_eq!(database["status"], "active", "seed {seed:#x}: {database}");
        let branches = up
            .call("GET", &format!("/v1/databases/{id}/branches?limit=500"), None)
            .await
            .json();
        let defaults = branches["branches"]
            .as_array()
            .expect("branches")
            .iter()
            .filter(|b| b["is_default"] == true)
            .count();
        assert_eq!(
            defaults, 1,
            "seed {seed:#x}: database {id} has {defaults} default branches"
        );
        let session = connect(&up.uri(database))
            .await
            .unwrap_or_else(|e| panic!("seed {seed:#x}: database {id} does not open: {e:?}"));
        session
            .batch_execute("CREATE TABLE IF NOT EXISTS opened (x BIGINT); INSERT INTO opened VALUES (1)")
            .await
            .unwrap_or_else(|e| panic!("seed {seed:#x}: database {id} takes no write: {e:?}"));
        let integrity: String = session
            .query_one("PRAGMA integrity_check", &[])
            .await
            .expect("integrity")
            .get(0);
        assert_eq!(integrity, "ok", "database {id}");
    }
    for id in deleted {
        up.call("GET", &format!("/v1/databases/{id}"), None)
            .await
            .assert_error(404, "not_found");
    }
}

/// No storage node holds a tenant no database row names, and every timeline row is needed (a branch is on it
/// or a timeline is branched from it): no deletion is left half done. Called after two reconciler rounds.
fn check_no_orphan_tenants_or_half_deletions(data_dir: &std::path::Path, seed: u64) {
    use compute::rusqlite::{Connection, OpenFlags};
    let metadata = Connection::open_with_flags(
        data_dir.join("metadata.sqlite"),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the metadata read-only");
    let column = |sql: &str| -> BTreeSet<String> {
        let mut statement = metadata.prepare(sql).expect("prepare");
        statement
            .query_map([], |row| row.get::<_, String>(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    let tenants = column("SELECT tenant_id FROM databases");
    let unneeded = column(
        "SELECT t.timeline_id FROM timelines t
         WHERE NOT EXISTS (SELECT 1 FROM branches b WHERE b.timeline_id = t.timeline_id)
           AND NOT EXISTS (SELECT 1 FROM timelines c WHERE c.ancestor_timeline_id = t.timeline_id)",
    );
    assert!(
        unneeded.is_empty(),
        "seed {seed:#x}: timeline rows nothing needs (a deletion left half done): {unneeded:?}"
    );
    let mut holders = vec![(
        data_dir.join("pageserver/tenants"),
        dir_names(&data_dir.join("pageserver/tenants")),
    )];
    holders.extend((1..=3).map(|n| {
        let safekeeper = data_dir.join(format!("safekeeper-{n}"));
        let held = common::safekeeper_tenants(&safekeeper);
        (safekeeper, held)
    }));
    for (holder, held) in holders {
        let orphans: Vec<_> = held.difference(&tenants).cloned().collect();
        assert!(
            orphans.is_empty(),
            "seed {seed:#x}: {} holds tenants no database names: {orphans:?}",
            holder.display()
        );
    }
}

/// `cambium_reconcile_rounds_total` from the API's metrics.
async fn reconcile_rounds(up: &Up) -> u64 {
    let reply = up.call("GET", "/metrics", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply
        .body
        .lines()
        .find_map(|line| line.strip_prefix("cambium_reconcile_rounds_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The database's tenant and every timeline the control metadata names for it (read-only, beside the
/// running service: SQLite's WAL mode lets a reader in).
fn metadata_timelines(data_dir: &std::path::Path, database_id: &str) -> (String, BTreeSet<String>) {
    use compute::rusqlite::{Connection, OpenFlags};
    let metadata = Connection::open_with_flags(
        data_dir.join("metadata.sqlite"),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the metadata read-only");
    let tenant: String = metadata
        .query_row("SELECT tenant_id FROM databases WHERE id = ?1", [database_id], |row| {
            row.get(0)
        })
        .expect("the database's tenant");
    let mut statement = metadata
        .prepare("SELECT timeline_id FROM timelines WHERE database_id = ?1")
        .expect("prepare");
    let named = statement
        .query_map([database_id], |row| row.get::<_, String>(0))
        .expect("timelines")
        .collect::<Result<BTreeSet<_>, _>>()
        .expect("timeline ids");
    (tenant, named)
}

/// The names of the subdirectories of `dir` that are ids (tenants or timelines: 32 hex digits), none if it is
/// missing.
fn dir_names(dir: &std::path::Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect()
}
