//! Branch isolation through SQL, with real processes: three `cambium safekeeper`s and one `cambium pageserver`.
//!
//! Proves: a branch created at the main timeline's read LSN (on the pageserver with that ancestor and branch
//! point, on the safekeepers as a timeline starting at that LSN) is a database of its own through a
//! `RemotePageStore`: it sees the parent's rows as of the branch point and none written after; rows written
//! then on either side are seen on that side only, also by fresh computes (new stores, empty caches).
//!
//! And a new branch's store started before its election ends (`RemotePageStore::start_new_branch`, issue 12
//! item 6): it reads at the branch point while no safekeeper answers, and its commit fails rather than waits
//! past the election's bound; elected, it commits; started so on a timeline with WAL of its own, it fails once
//! the election tells, and nothing committed is lost.

mod common;

use std::sync::Arc;

use common::cluster::{Cluster, TestResult};
use compute::remote_store::RemotePageStore;
use compute::rusqlite::{self, params, Connection};
use compute::vfs::{open_connection, register_database, unregister_database};
use proto::pageserver as ps;
use proto::safekeeper as sk;
use storage::{Lsn, TenantId, TimelineId};

const START: Lsn = Lsn(0x100_0000);
const BRANCH: TimelineId = TimelineId(0xB3);

/// Creates `BRANCH` off the main timeline at `lsn` on the pageserver and on every safekeeper.
async fn create_branch(cluster: &Cluster, lsn: Lsn) -> TestResult {
    let mut management =
        ps::management_client::ManagementClient::connect(format!("http://{}", cluster.pageserver.address)).await?;
    // The pageserver may not have ingested up to `lsn` yet: it refuses the branch point until it has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let created = management
            .create_timeline(ps::CreateTimelineRequest {
                timeline: Some(ps::TimelineRef {
                    tenant_id: cluster.tenant.to_string(),
                    timeline_id: BRANCH.to_string(),
                }),
                ancestor_timeline_id: cluster.timeline.to_string(),
                ancestor_lsn: lsn.0,
                start_lsn: 0,
            })
            .await;
        match created {
            Ok(_) => break,
            Err(status) if status.code() == tonic::Code::OutOfRange && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(status) => return Err(status.into()),
        }
    }
    for s in &cluster.safekeepers {
        let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address)).await?;
        client
            .create_timeline(sk::CreateTimelineRequest {
                timeline: Some(sk::TimelineRef {
                    tenant_id: cluster.tenant.to_string(),
                    timeline_id: BRANCH.to_string(),
                }),
                start_lsn: lsn.0,
            })
            .await?;
    }
    Ok(())
}

/// The ids in `t`, ordered.
fn ids(connection: &Connection) -> rusqlite::Result<Vec<i64>> {
    let mut statement = connection.prepare("SELECT id FROM t ORDER BY id")?;
    let ids = statement.query_map([], |row| row.get(0))?;
    ids.collect()
}

/// Runs `f` on a connection to `database`, on a blocking thread.
async fn with_db<T: Send + 'static>(
    database: &'static str,
    f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
) -> TestResult<T> {
    tokio::task::spawn_blocking(move || -> TestResult<T> {
        let mut connection = open_connection(database)?;
        Ok(f(&mut connection)?)
    })
    .await?
}

fn insert(connection: &mut Connection, ids: std::ops::Range<i64>, tag: &str) -> rusqlite::Result<()> {
    let transaction = connection.transaction()?;
    for id in ids {
        transaction.execute(
            "INSERT INTO t (id, v) VALUES (?1, ?2)",
            params![id, format!("{tag} {id} {}", "z".repeat(100))],
        )?;
    }
    transaction.commit()
}

/// Starts the main timeline's store as `name` with rows `0..rows` in `t`, and creates `BRANCH` at its read LSN.
/// Returns the parent's store and the branch point.
async fn parent_and_branch(
    cluster: &Cluster,
    name: &'static str,
    rows: i64,
) -> TestResult<(Arc<RemotePageStore>, Lsn)> {
    let parent = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 5_000)).await?;
    register_database(name, parent.clone())?;
    with_db(name, move |c| {
        c.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")?;
        insert(c, 0..rows, "parent")
    })
    .await?;
    let branch_lsn = parent.read_lsn();
    create_branch(cluster, branch_lsn).await?;
    Ok((parent, branch_lsn))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_sees_the_parent_at_the_branch_point_and_then_only_its_own_writes() -> TestResult {
    let cluster = Cluster::start(TenantId(0xB1), TimelineId(0xB2), START).await?;

    // The parent: 500 rows, then the branch point.
    let (parent, branch_lsn) = parent_and_branch(&cluster, "parent", 500).await?;

    // The parent goes on writing after the branch point.
    with_db("parent", |c| insert(c, 1000..1300, "parent-after")).await?;

    // The branch sees the parent as of the branch point.
    let branch = RemotePageStore::start(cluster.store_config(BRANCH, branch_lsn, 5_000)).await?;
    assert!(branch.read_lsn() >= branch_lsn);
    register_database("branch", branch.clone())?;
    let seen = with_db("branch", |c| ids(c)).await?;
    assert_eq!(
        seen,
        (0..500).collect::<Vec<_>>(),
        "the branch sees the parent at the branch point"
    );

    // Each side writes its own rows.
    with_db("branch", |c| {
        insert(c, 2000..2300, "branch")?;
        c.execute("DELETE FROM t WHERE id < 100", [])?;
        Ok(())
    })
    .await?;
    with_db("parent", |c| insert(c, 3000..3100, "parent-later")).await?;
    let parent_expected: Vec<i64> = (0..500).chain(1000..1300).chain(3000..3100).collect();
    let branch_expected: Vec<i64> = (100..500).chain(2000..2300).collect();
    assert_eq!(with_db("parent", |c| ids(c)).await?, parent_expected);
    assert_eq!(with_db("branch", |c| ids(c)).await?, branch_expected);
    assert_eq!(parent.failure(), None);
    assert_eq!(branch.failure(), None);
    assert!(unregister_database("parent"));
    assert!(unregister_database("branch"));
    drop((parent, branch));

    // Fresh computes, empty caches: the same, read from the pageserver.
    for (timeline, start, name, expected) in [
        (cluster.timeline, START, "parent2", parent_expected),
        (BRANCH, branch_lsn, "branch2", branch_expected),
    ] {
        let store = RemotePageStore::start(cluster.store_config(timeline, start, 5_000)).await?;
        register_database(name, store.clone())?;
        let (seen, check) = with_db(name, |c| {
            let check: String = c.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
            Ok((ids(c)?, check))
        })
        .await?;
        assert_eq!(seen, expected, "a fresh compute on {name}");
        assert_eq!(check, "ok");
        assert!(unregister_database(name));
    }
    Ok(())
}

/// Polls `store` until it reports a failure, at most `seconds`.
async fn failure_within(store: &RemotePageStore, seconds: u64) -> Option<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while std::time::Instant::now() < deadline {
        if let Some(reason) = store.failure() {
            return Some(reason);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_branch_reads_before_its_election_and_commits_only_once_elected_at_its_branch_point() -> TestResult {
    let cluster = Cluster::start(TenantId(0xB4), TimelineId(0xB5), START).await?;
    let (_parent, branch_lsn) = parent_and_branch(&cluster, "np-parent", 300).await?;

    // No safekeeper answers: the election cannot end, yet the store starts and reads at the branch point.
    let mut unreachable = cluster.store_config(BRANCH, branch_lsn, 5_000);
    unreachable.safekeepers = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into(), "127.0.0.1:3".into()];
    unreachable.election_timeout_ms = 1_500;
    let started = std::time::Instant::now();
    let waiting = RemotePageStore::start_new_branch(unreachable.clone()).await?;
    assert!(!waiting.is_elected());
    assert_eq!(waiting.read_lsn(), branch_lsn);
    register_database("np-waiting", waiting.clone())?;
    assert_eq!(with_db("np-waiting", |c| ids(c)).await?, (0..300).collect::<Vec<_>>());
    assert!(
        started.elapsed() < std::time::Duration::from_millis(1_500),
        "the reads waited for the election ({:?})",
        started.elapsed()
    );
    // Its commit waits for the election, which fails within its bound: refused, nothing committed.
    let refused = with_db("np-waiting", |c| insert(c, 500..510, "never")).await;
    assert!(refused.is_err(), "a commit without an elected proposer went through");
    let reason = waiting.failure().expect("the store failed with its election");
    assert!(reason.contains("election"), "{reason}");
    assert!(unregister_database("np-waiting"));
    drop(waiting);
    // A store that campaigns first cannot start at all then.
    assert!(RemotePageStore::start(unreachable).await.is_err());

    // With the safekeepers, its campaign deferred (as a host starts the stores of the branches it makes): reads
    // at once and no election until the first commit, which campaigns, waits for the election and goes through.
    let branch = RemotePageStore::start_new_branch_deferred(cluster.store_config(BRANCH, branch_lsn, 5_000)).await?;
    register_database("np-branch", branch.clone())?;
    assert_eq!(with_db("np-branch", |c| ids(c)).await?, (0..300).collect::<Vec<_>>());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !branch.is_elected(),
        "a deferred campaign began without a session or a commit"
    );
    with_db("np-branch", |c| insert(c, 1000..1050, "branch")).await?;
    assert!(branch.is_elected());
    assert_eq!(branch.failure(), None);
    let written: Vec<i64> = (0..300).chain(1000..1050).collect();
    assert_eq!(with_db("np-branch", |c| ids(c)).await?, written);
    let branch_head = branch.read_lsn();
    assert!(branch_head > branch_lsn);
    assert!(unregister_database("np-branch"));
    drop(branch);

    // Started as new although its WAL goes on past the branch point: the election tells (once the deferred
    // campaign begins), the store fails, and a commit on what it read is refused.
    let deferred = RemotePageStore::start_new_branch_deferred(cluster.store_config(BRANCH, branch_lsn, 5_000)).await?;
    assert_eq!(
        failure_within(&deferred, 1).await,
        None,
        "failed before its campaign began"
    );
    deferred.campaign();
    let reason = failure_within(&deferred, 20)
        .await
        .expect("the store fails once elected past its branch point");
    assert!(reason.contains("past its branch point"), "{reason}");
    drop(deferred);
    let stale = RemotePageStore::start_new_branch(cluster.store_config(BRANCH, branch_lsn, 5_000)).await?;
    register_database("np-stale", stale.clone())?;
    let reason = failure_within(&stale, 20)
        .await
        .expect("the store fails once elected past its branch point");
    assert!(reason.contains("past its branch point"), "{reason}");
    assert!(with_db("np-stale", |c| insert(c, 2000..2010, "stale")).await.is_err());
    assert!(unregister_database("np-stale"));
    drop(stale);

    // Nothing committed is lost: a store that campaigns first reads every row the branch committed.
    let again = RemotePageStore::start(cluster.store_config(BRANCH, branch_lsn, 5_000)).await?;
    assert!(again.read_lsn() >= branch_head);
    register_database("np-again", again.clone())?;
    assert_eq!(with_db("np-again", |c| ids(c)).await?, written);
    assert!(unregister_database("np-again"));
    assert!(unregister_database("np-parent"));
    Ok(())
}
