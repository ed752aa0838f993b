//! `cambium compute` as a process over three `cambium safekeeper`s and a `cambium pageserver`.
//!
//! Proves: a PostgreSQL client (tokio-postgres) reaches the branch its database name picks and creates,
//! inserts and selects; `NAME@LSN` is a read-only connection at that LSN that sees only what was committed by
//! then and refuses writes (in SQLite and in the read-only store); an unknown database name is refused; after kill -9 and a restart of the compute,
//! every committed row is there.

mod common;

use common::Process;
use proto::pageserver as ps;
use proto::safekeeper as sk;
use storage::{Lsn, TenantId, TimelineId};
use tokio_postgres::NoTls;

const START: Lsn = Lsn(0x100_0000);
const DB: &str = "db_cp";

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Creates the timeline on every safekeeper and the tenant and timeline on the pageserver.
async fn create_timeline(
    safekeepers: &[Process],
    pageserver: &Process,
    tenant: TenantId,
    timeline: TimelineId,
) -> TestResult {
    for s in safekeepers {
        let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address)).await?;
        client
            .create_timeline(sk::CreateTimelineRequest {
                timeline: Some(sk::TimelineRef {
                    tenant_id: tenant.to_string(),
                    timeline_id: timeline.to_string(),
                }),
                start_lsn: START.0,
            })
            .await?;
    }
    let mut management =
        ps::management_client::ManagementClient::connect(format!("http://{}", pageserver.address)).await?;
    management
        .create_tenant(ps::TenantRequest {
            tenant_id: tenant.to_string(),
        })
        .await?;
    management
        .create_timeline(ps::CreateTimelineRequest {
            timeline: Some(ps::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: timeline.to_string(),
            }),
            ancestor_timeline_id: String::new(),
            ancestor_lsn: 0,
            start_lsn: START.0,
        })
        .await?;
    Ok(())
}

/// The end of the WAL: the largest flush LSN of the safekeepers (all writes so far are acknowledged).
async fn wal_end(safekeepers: &[Process], tenant: TenantId, timeline: TimelineId) -> TestResult<Lsn> {
    let mut end = START;
    for s in safekeepers {
        let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address)).await?;
        let state = client
            .get_state(sk::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: timeline.to_string(),
            })
            .await?
            .into_inner();
        end = end.max(Lsn(state.flush_lsn));
    }
    Ok(end)
}

async fn connect(address: &str, database: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (host, port) = address.rsplit_once(':').unwrap_or((address, "5433"));
    let (client, connection) = tokio_postgres::connect(
        &format!("host={host} port={port} user=alice password=secret dbname='{database}'"),
        NoTls,
    )
    .await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn ids(client: &tokio_postgres::Client) -> Result<Vec<i64>, tokio_postgres::Error> {
    let rows = client.query("SELECT id FROM t ORDER BY id", &[]).await?;
    Ok(rows.iter().map(|row| row.get::<_, i64>(0)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compute_process_serves_branches_time_travel_and_survives_kill9() -> TestResult {
    let root = tempfile::tempdir()?;
    let mut safekeepers: Vec<Process> = (1..=3)
        .map(|id| Process::safekeeper(id, &root.path().join(format!("sk{id}"))))
        .collect();
    let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
    let pageserver = Process::start(vec![
        "pageserver".into(),
        "--data-dir".into(),
        root.path().join("pageserver").display().to_string(),
        "--safekeepers".into(),
        addresses.join(","),
    ]);
    let (tenant, timeline) = (TenantId(0xC3), TimelineId(0xC4));
    create_timeline(&safekeepers, &pageserver, tenant, timeline).await?;

    let mut compute = Process::start(vec![
        "compute".into(),
        "--safekeepers".into(),
        addresses.join(","),
        "--pageserver".into(),
        pageserver.address.clone(),
        "--tenant".into(),
        tenant.to_string(),
        "--branch".into(),
        format!("{DB}={timeline}:{START}"),
        "--password".into(),
        "alice=secret".into(),
    ]);

    let client = connect(&compute.address, DB).await?;
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES (1, 'one')")
        .await?;
    let after_first = wal_end(&safekeepers, tenant, timeline).await?;
    // A moment between the two commits (the compute stamps commits with the same system clock).
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = jiff::Timestamp::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    client.execute("INSERT INTO t VALUES (2, 'two')", &[]).await?;
    assert_eq!(ids(&client).await?, vec![1, 2]);

    // Time travel by timestamp: the newest commit at or before it is the first insert.
    let at_time = connect(&compute.address, &format!("{DB}@{between}")).await?;
    assert_eq!(
        ids(&at_time).await?,
        vec![1],
        "at {between} only the first insert is there"
    );
    assert!(
        connect(&compute.address, &format!("{DB}@2000-01-01T00:00:00Z"))
            .await
            .is_err(),
        "a time before any commit has no state to show"
    );

    // Time travel: the first insert only, read-only.
    let past = connect(&compute.address, &format!("{DB}@{after_first}")).await?;
    assert_eq!(
        ids(&past).await?,
        vec![1],
        "at {after_first} only the first insert is there"
    );
    let write = past.execute("INSERT INTO t VALUES (3, 'three')", &[]).await;
    let message = write
        .err()
        .and_then(|e| e.as_db_error().map(|e| e.message().to_owned()));
    assert!(
        message.as_deref().is_some_and(|m| m.contains("readonly")),
        "a time-travel connection refuses writes: {message:?}"
    );
    assert_eq!(ids(&past).await?, vec![1], "and stays usable");
    assert_eq!(ids(&client).await?, vec![1, 2], "the branch is untouched");

    // The read-only store itself refuses a commit (below SQLite's `query_only`), and stays usable.
    let config = compute::remote_store::RemotePageStoreConfig::new(
        addresses.clone(),
        pageserver.address.clone(),
        tenant,
        timeline,
        START,
    );
    let store = compute::remote_store::RemotePageStore::start_read_only(config, after_first).await?;
    assert!(store.is_read_only());
    let refused = tokio::task::spawn_blocking(move || {
        use compute::page_store::PageStore;
        let snapshot = store.snapshot()?;
        let page = store.read_page(0, &snapshot)?.ok_or("page 0 is there")?;
        let refused = store.commit(vec![(0, page)], snapshot.db_size_pages).is_err();
        store.read_page(0, &snapshot)?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(refused)
    })
    .await??;
    assert!(refused, "a read-only store refuses commits");

    // Unknown names, and malformed or future LSNs, are refused.
    assert!(connect(&compute.address, "db_unknown").await.is_err());
    assert!(connect(&compute.address, "db_unknown@0/1000000").await.is_err());
    assert!(connect(&compute.address, &format!("{DB}@nonsense")).await.is_err());
    assert!(connect(&compute.address, &format!("{DB}@FFFF/0")).await.is_err());

    // kill -9 the compute and start it again: every committed row is there, and it goes on writing.
    drop((client, past));
    compute.kill9();
    compute.restart();
    let client = connect(&compute.address, DB).await?;
    assert_eq!(ids(&client).await?, vec![1, 2]);
    client.execute("INSERT INTO t VALUES (3, 'three')", &[]).await?;
    assert_eq!(ids(&client).await?, vec![1, 2, 3]);
    let past = connect(&compute.address, &format!("{DB}@{after_first}")).await?;
    assert_eq!(ids(&past).await?, vec![1], "time travel after the restart");

    // An ambiguous commit (a majority dies before it is acknowledged) fails the session; once the safekeepers
    // are back, a new session gets a store restarted from what they committed (DESIGN §5): every
    // acknowledged row is there, the ambiguous one may or may not be, and writes go on.
    safekeepers[0].kill9();
    safekeepers[1].kill9();
    assert!(
        client
            .execute("INSERT INTO t VALUES (10, 'ambiguous')", &[])
            .await
            .is_err(),
        "a commit without a majority is not acknowledged"
    );
    safekeepers[0].restart();
    safekeepers[1].restart();
    let client = connect(&compute.address, DB).await?;
    let after = ids(&client).await?;
    assert!(
        after == vec![1, 2, 3] || after == vec![1, 2, 3, 10],
        "acknowledged rows survive: {after:?}"
    );
    client
        .execute("INSERT INTO t VALUES (11, 'after the restart')", &[])
        .await?;
    assert_eq!(ids(&client).await?.last(), Some(&11));
    Ok(())
}
