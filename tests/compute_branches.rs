//! Branch isolation through SQL, with real processes: three `cambium safekeeper`s and one `cambium pageserver`.
//!
//! Proves: a branch created at the main timeline's read LSN (on the pageserver with that ancestor and branch
//! point, on the safekeepers as a timeline starting at that LSN) is a database of its own through a
//! `RemotePageStore`: it sees the parent's rows as of the branch point and none written after; rows written
//! then on either side are seen on that side only, also by fresh computes (new stores, empty caches).

mod common;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_sees_the_parent_at_the_branch_point_and_then_only_its_own_writes() -> TestResult {
    let cluster = Cluster::start(TenantId(0xB1), TimelineId(0xB2), START).await?;

    // The parent: 500 rows, then the branch point.
    let parent = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 5_000)).await?;
    register_database("parent", parent.clone())?;
    with_db("parent", |c| {
        c.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")?;
        insert(c, 0..500, "parent")
    })
    .await?;
    let branch_lsn = parent.read_lsn();
    create_branch(&cluster, branch_lsn).await?;

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
