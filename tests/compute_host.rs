//! `compute::host::ComputeHost` in this process, over three `cambium safekeeper`s and a `cambium pageserver`
//! as real processes, spoken to with tokio-postgres.
//!
//! Proves: one listener serves branches of two tenants, each seeing only its own data; a lazily defined branch
//! starts its store on the first session; an alias reaches its branch (time travel too) and re-pointing it
//! changes what new sessions get while old ones stay; a refused name fails with the reason, and serves again
//! once cleared; a detached branch is unknown and its open sessions fail; attaching a branch to a new timeline
//! (a restore) fails the old store's open sessions with the close reason (SQLSTATE 57P01, admin_shutdown) and
//! refuses its commits, while new
//! sessions see the new timeline's data and write to it; an idle branch's store is stopped (never while a session
//! is open) and the next session starts it again with the data intact; with `BranchStoreStart::WhenDefined` a
//! defined branch's store starts before any session, and the first session uses it; parking a database (scale to
//! zero) is refused while a session is open, stops its stores and starts none in the background, and its next
//! session answers and wakes it.

mod common;

use std::collections::HashMap;

use common::cluster::{Cluster, TestResult};
use compute::host::{BranchStoreStart, BranchTarget, ComputeHost, HostConfig};
use proto::pageserver as ps;
use proto::safekeeper as sk;
use storage::{Lsn, TenantId, TimelineId};
use tokio_postgres::NoTls;

const START: Lsn = Lsn(0x100_0000);

fn host_config(cluster: &Cluster) -> HostConfig {
    HostConfig {
        listen: "127.0.0.1:0".into(),
        safekeepers: cluster.safekeepers.iter().map(|s| s.address.clone()).collect(),
        local_safekeepers: Default::default(),
        pageserver: cluster.pageserver.address.clone(),
        passwords: HashMap::from([("alice".to_string(), "secret".to_string())]),
        cache: compute::cache::HostCacheConfig {
            memory_budget_bytes: 64 * compute::cache::ENTRY_BYTES,
            file: None,
        },
        prefetch: Default::default(),
        idle_store_timeout_ms: 0,
        session_defaults: compute::pg::SessionDefaults::default(),
        tls: None,
        connections_per_database_max: compute::host::CONNECTIONS_PER_DATABASE_MAX_DEFAULT,
        connections_per_account_max: compute::host::CONNECTIONS_PER_ACCOUNT_MAX_DEFAULT,
        transactions: Default::default(),
        branch_stores: BranchStoreStart::FirstSession,
    }
}

/// Creates `timeline` of `tenant` (a root timeline, or a branch of `ancestor` at its LSN) on the pageserver
/// and every safekeeper; creates the tenant on the pageserver first when it is not the cluster's.
async fn create_timeline(
    cluster: &Cluster,
    tenant: TenantId,
    timeline: TimelineId,
    ancestor: Option<(TimelineId, Lsn)>,
) -> TestResult {
    let mut management =
        ps::management_client::ManagementClient::connect(format!("http://{}", cluster.pageserver.address)).await?;
    if tenant != cluster.tenant {
        management
            .create_tenant(ps::TenantRequest {
                tenant_id: tenant.to_string(),
            })
            .await?;
    }
    let (ancestor_timeline_id, ancestor_lsn, start_lsn) = match ancestor {
        Some((parent, lsn)) => (parent.to_string(), lsn, Lsn(0)),
        None => (String::new(), Lsn(0), START),
    };
    // The pageserver may not have ingested up to the branch point yet: it refuses it until it has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let created = management
            .create_timeline(ps::CreateTimelineRequest {
                timeline: Some(ps::TimelineRef {
                    tenant_id: tenant.to_string(),
                    timeline_id: timeline.to_string(),
                }),
                ancestor_timeline_id: ancestor_timeline_id.clone(),
                ancestor_lsn: ancestor_lsn.0,
                start_lsn: start_lsn.0,
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
                    tenant_id: tenant.to_string(),
                    timeline_id: timeline.to_string(),
                }),
                start_lsn: ancestor.map_or(START, |(_, lsn)| lsn).0,
            })
            .await?;
    }
    Ok(())
}

async fn connect(host: &ComputeHost, database: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let address = host.address();
    let (client, connection) = tokio_postgres::connect(
        &format!(
            "host={} port={} user=alice password=secret dbname='{database}'",
            address.ip(),
            address.port()
        ),
        NoTls,
    )
    .await?;
    tokio::spawn(connection);
    Ok(client)
}

/// The server's message of a failed connect or statement (or the error's text if it has none).
fn message(error: &tokio_postgres::Error) -> String {
    error
        .as_db_error()
        .map_or_else(|| error.to_string(), |e| e.message().to_owned())
}

/// The message a connection to `database` is refused with; panics if it opens.
async fn refusal(host: &ComputeHost, database: &str) -> String {
    match connect(host, database).await {
        Ok(_) => panic!("{database} must be refused"),
        Err(e) => message(&e),
    }
}

async fn values(client: &tokio_postgres::Client) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = client.query("SELECT v FROM t ORDER BY id", &[]).await?;
    Ok(rows.iter().map(|row| row.get::<_, String>(0)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_listener_serves_two_tenants_with_aliases_refusals_and_detach() -> TestResult {
    let cluster = Cluster::start(TenantId(0xD1), TimelineId(0xD2), START).await?;
    let (tenant_b, timeline_b) = (TenantId(0xD3), TimelineId(0xD4));
    create_timeline(&cluster, tenant_b, timeline_b, None).await?;
    let host = ComputeHost::start(host_config(&cluster)).await?;

    // Tenant A's branch starts now; tenant B's lazily, on its first session.
    let target_a = BranchTarget {
        tenant_id: cluster.tenant,
        timeline_id: cluster.timeline,
        start_lsn: START,
        safekeepers: Vec::new(),
    };
    host.attach("br_host_a", target_a.clone()).await?;
    assert!(host.store("br_host_a").is_some(), "attach starts the store");
    host.attach("br_host_a", target_a).await?; // the same target: nothing changes
    host.define(
        "br_host_b",
        BranchTarget {
            tenant_id: tenant_b,
            timeline_id: timeline_b,
            start_lsn: START,
            safekeepers: Vec::new(),
        },
    )?;
    assert!(host.store("br_host_b").is_none(), "define starts nothing");
    host.set_alias("db_host_a", "br_host_a")?;
    host.set_alias("db_host_b", "br_host_b")?;
    assert!(
        host.set_alias("br_host_a", "br_host_b").is_err(),
        "a branch name is not an alias"
    );

    let a = connect(&host, "db_host_a").await?;
    a.batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES (1, 'a1')")
        .await?;
    let b = connect(&host, "br_host_b").await?;
    assert!(host.store("br_host_b").is_some(), "the first session started the store");
    b.batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES (1, 'b1')")
        .await?;
    assert_eq!(values(&connect(&host, "br_host_a").await?).await?, ["a1"]);
    assert_eq!(values(&connect(&host, "db_host_b").await?).await?, ["b1"]);

    // Time travel through an alias: read-only, as of then.
    let lsn_a = host.store("br_host_a").ok_or("a's store")?.read_lsn();
    a.execute("INSERT INTO t VALUES (2, 'a2')", &[]).await?;
    let past = connect(&host, &format!("db_host_a@{lsn_a}")).await?;
    assert_eq!(values(&past).await?, ["a1"]);
    assert!(past.execute("INSERT INTO t VALUES (3, 'x')", &[]).await.is_err());

    // Re-pointing the alias: new sessions get the other branch, the open one stays where it was.
    host.set_alias("db_host_a", "br_host_b")?;
    assert_eq!(values(&connect(&host, "db_host_a").await?).await?, ["b1"]);
    assert_eq!(values(&a).await?, ["a1", "a2"]);
    host.set_alias("db_host_a", "br_host_a")?;

    // A refused name fails with the reason, its time-travel form too, and serves again once cleared.
    let reason = "database db_host_b is suspended; resume it";
    host.refuse("db_host_b", reason);
    let refused = refusal(&host, "db_host_b").await;
    assert!(refused.contains(reason), "{refused}");
    let refused = refusal(&host, &format!("db_host_b@{START}")).await;
    assert!(refused.contains(reason), "{refused}");
    assert_eq!(
        values(&connect(&host, "br_host_b").await?).await?,
        ["b1"],
        "only that name"
    );
    host.clear_refusal("db_host_b");
    assert_eq!(values(&connect(&host, "db_host_b").await?).await?, ["b1"]);

    // Detach: the branch and its alias are unknown; its open session fails on its next statement.
    let store_b = host.store("br_host_b").ok_or("b's store")?;
    assert!(host.detach("br_host_b"));
    assert!(!host.detach("br_host_b"), "detached already");
    assert!(host.store("br_host_b").is_none());
    for name in ["br_host_b", "db_host_b"] {
        let refused = refusal(&host, name).await;
        assert!(refused.contains("invalid database name"), "{name}: {refused}");
    }
    assert!(b.query("SELECT v FROM t", &[]).await.is_err(), "b's session must fail");
    let reason = store_b.failure().unwrap_or_default();
    assert!(store_b.is_closed() && reason.contains("no longer served"), "{reason}");
    assert_eq!(values(&a).await?, ["a1", "a2"], "the other tenant is untouched");
    assert!(refusal(&host, "nothing_here").await.contains("invalid database name"));

    host.stop().await;
    assert!(!compute::vfs::is_registered("br_host_a"), "stop unregisters");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attaching_a_new_timeline_closes_the_old_store() -> TestResult {
    let cluster = Cluster::start(TenantId(0xE1), TimelineId(0xE2), START).await?;
    let host = ComputeHost::start(host_config(&cluster)).await?;
    host.attach(
        "br_restore",
        BranchTarget {
            tenant_id: cluster.tenant,
            timeline_id: cluster.timeline,
            start_lsn: START,
            safekeepers: Vec::new(),
        },
    )
    .await?;
    let old_session = connect(&host, "br_restore").await?;
    old_session
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES (1, 'kept')")
        .await?;
    let old_store = host.store("br_restore").ok_or("the old store")?;
    let restore_point = old_store.read_lsn();
    old_session
        .execute("INSERT INTO t VALUES (2, 'after the restore point')", &[])
        .await?;

    // The restore: a new timeline branched from the old one at the restore point, served under the same name.
    let restored = TimelineId(0xE3);
    create_timeline(
        &cluster,
        cluster.tenant,
        restored,
        Some((cluster.timeline, restore_point)),
    )
    .await?;
    host.attach(
        "br_restore",
        BranchTarget {
            tenant_id: cluster.tenant,
            timeline_id: restored,
            start_lsn: restore_point,
            safekeepers: Vec::new(),
        },
    )
    .await?;
    assert!(old_store.is_closed(), "the old store is closed");
    let new_store = host.store("br_restore").ok_or("the new store")?;
    assert!(!std::sync::Arc::ptr_eq(&old_store, &new_store));

    // The old session's next statement fails with the close reason (SQLite reports the store's error as an
    // I/O error; the session gives the client the store's reason as admin_shutdown); its store refuses commits.
    let failed = old_session
        .execute("INSERT INTO t VALUES (3, 'lost')", &[])
        .await
        .err()
        .ok_or("the old session must fail")?;
    let reason = old_store.failure().unwrap_or_default();
    assert!(reason.contains("moved from timeline"), "{reason}");
    let db_error = failed
        .as_db_error()
        .ok_or_else(|| format!("a server error: {failed:?}"))?;
    assert_eq!(
        db_error.code(),
        &tokio_postgres::error::SqlState::ADMIN_SHUTDOWN,
        "{db_error:?}"
    );
    assert!(
        db_error.message().contains(&reason) && db_error.message().contains("reconnect"),
        "the client sees the close reason {reason:?}: {db_error:?}"
    );
    // And so does every later statement of that session, reads included.
    let again = old_session
        .query("SELECT v FROM t", &[])
        .await
        .err()
        .ok_or("the old session keeps failing")?;
    let again = again
        .as_db_error()
        .ok_or_else(|| format!("a server error: {again:?}"))?;
    assert_eq!(
        again.code(),
        &tokio_postgres::error::SqlState::ADMIN_SHUTDOWN,
        "{again:?}"
    );
    assert!(again.message().contains(&reason), "{again:?}");
    let commit = tokio::task::spawn_blocking(move || {
        use compute::page_store::PageStore;
        old_store.commit(Vec::new(), 1)
    })
    .await?;
    let refused = commit.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("closed"), "a closed store refuses commits: {refused}");

    // A new session sees the new timeline: the data as of the restore point, and writes there.
    let new_session = connect(&host, "br_restore").await?;
    assert_eq!(values(&new_session).await?, ["kept"]);
    new_session.execute("INSERT INTO t VALUES (4, 'restored')", &[]).await?;
    assert_eq!(
        values(&connect(&host, "br_restore").await?).await?,
        ["kept", "restored"]
    );
    assert!(new_store.read_lsn() > restore_point);
    assert_eq!(new_store.failure(), None);
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_is_stopped_and_the_next_session_starts_it_again() -> TestResult {
    let cluster = Cluster::start(TenantId(0xF1), TimelineId(0xF2), START).await?;
    let host = ComputeHost::start(HostConfig {
        idle_store_timeout_ms: 200,
        session_defaults: compute::pg::SessionDefaults::default(),
        tls: None,
        connections_per_database_max: compute::host::CONNECTIONS_PER_DATABASE_MAX_DEFAULT,
        connections_per_account_max: compute::host::CONNECTIONS_PER_ACCOUNT_MAX_DEFAULT,
        transactions: Default::default(),
        ..host_config(&cluster)
    })
    .await?;
    let target = BranchTarget {
        tenant_id: cluster.tenant,
        timeline_id: cluster.timeline,
        start_lsn: START,
        safekeepers: Vec::new(),
    };
    host.attach("br_idle", target).await?;
    let session = connect(&host, "br_idle").await?;
    session
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES (1, 'one')")
        .await?;
    // An open session keeps the store, however long it idles.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert!(host.store("br_idle").is_some(), "a session is open: the store stays");
    assert_eq!(values(&session).await?, ["one"]);
    drop(session);

    // No session: the store goes within a few scans.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while host.store("br_idle").is_some() {
        assert!(std::time::Instant::now() < deadline, "the idle store was not stopped");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // The next session starts it again, from what the safekeepers committed, and writes on.
    let session = connect(&host, "br_idle").await?;
    assert_eq!(values(&session).await?, ["one"]);
    session.execute("INSERT INTO t VALUES (2, 'two')", &[]).await?;
    assert_eq!(values(&session).await?, ["one", "two"]);
    assert!(host.store("br_idle").is_some());
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_starts_in_the_background_when_its_branch_is_defined() -> TestResult {
    let cluster = Cluster::start(TenantId(0xF5), TimelineId(0xF6), START).await?;
    let host = ComputeHost::start(HostConfig {
        branch_stores: BranchStoreStart::WhenDefined,
        ..host_config(&cluster)
    })
    .await?;
    let target = BranchTarget {
        tenant_id: cluster.tenant,
        timeline_id: cluster.timeline,
        start_lsn: START,
        safekeepers: Vec::new(),
    };
    host.define("br_early", target)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while host.store("br_early").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the store did not start in the background"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let started = host.store("br_early").expect("started in the background");
    let session = connect(&host, "br_early").await?;
    session
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES (1, 'one')")
        .await?;
    assert_eq!(values(&session).await?, ["one"]);
    let running = host.store("br_early").expect("running");
    assert!(
        std::sync::Arc::ptr_eq(&started, &running),
        "the first session used the store started in the background"
    );
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_database_stops_its_stores_and_its_next_session_wakes_it() -> TestResult {
    let cluster = Cluster::start(TenantId(0xF9), TimelineId(0xFA), START).await?;
    let host = ComputeHost::start(HostConfig {
        branch_stores: BranchStoreStart::WhenDefined,
        ..host_config(&cluster)
    })
    .await?;
    let tenant = cluster.tenant;
    let target = BranchTarget {
        tenant_id: tenant,
        timeline_id: cluster.timeline,
        start_lsn: START,
        safekeepers: Vec::new(),
    };
    host.attach("br_park", target.clone()).await?;
    host.touch(tenant);
    let session = connect(&host, "br_park").await?;
    session
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES (1, 'one')")
        .await?;
    // A session is open: not idle, and parking refuses.
    assert_eq!(host.idle_for(tenant), None, "a session is open");
    assert!(!host.park(tenant), "a database with a session open is not parked");
    assert!(!host.is_parked(tenant));
    assert!(host.store("br_park").is_some());
    drop(session);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while host.idle_for(tenant).is_none() {
        assert!(std::time::Instant::now() < deadline, "the session never ended");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Parked: the store is stopped, and a define (as a restore or a new branch does) starts nothing.
    let parking = std::sync::Arc::new(host);
    let host = std::sync::Arc::clone(&parking);
    assert!(tokio::task::spawn_blocking(move || parking.park(tenant)).await?);
    assert!(host.is_parked(tenant));
    assert!(host.store("br_park").is_none(), "parking stopped the store");
    host.define("br_park", target)?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        host.store("br_park").is_none(),
        "no background start for a parked database"
    );

    // The next session answers and wakes it.
    let woken = host.wakes();
    let session = connect(&host, "br_park").await?;
    assert_eq!(values(&session).await?, ["one"]);
    tokio::time::timeout(std::time::Duration::from_secs(5), woken).await?;
    assert!(!host.is_parked(tenant), "a session woke it");
    assert!(host.store("br_park").is_some());
    drop(session);
    match std::sync::Arc::try_unwrap(host) {
        Ok(host) => host.stop().await,
        Err(_) => panic!("the host is still shared"),
    }
    Ok(())
}
