//! Compute placement across `cambium api` processes, and `cambium proxy` (issue 17 item 4), end to end with real
//! processes: PostgreSQL metadata (a throwaway PostgreSQL 15; skipped, saying so, where it is absent), three
//! safekeepers and a pageserver, two `cambium api` processes and one `cambium proxy`, every connection string
//! pointing at the proxy (`--connection-address`).
//!
//! It proves: databases land on both hosts (creations go to the one with fewer); SQL through the proxy reaches
//! each; a host serves only what is placed on it (a database of the other host is not served on its port); a
//! branch created and a restore done through the API process that does not host the database work (forwarded)
//! and are served through the proxy right after; time travel (`name@LSN`) and cancel requests go through the
//! proxy, also a cancel sent to a second proxy (it reaches the host through every live host); a database
//! suspended for idleness is woken by a connection through a proxy; malformed startups get an ErrorResponse. A
//! host frozen (SIGSTOP) past its lease while a bank workload runs on one of its databases cannot fence itself:
//! its databases are re-placed on the other host, the workload goes on there, and continued it serves none of
//! them and nothing it had in flight lands (the safekeepers' terms fence it). Then one API process is killed with
//! -9 while a bank workload runs through the proxy on one of its databases: its databases are re-placed on the other and served within a bound, every
//! acknowledged transfer is there and the total is conserved, and each database is placed on exactly one live
//! host. Restarted, the killed process is a new, empty host: it serves none of them, and takes the next one.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::api::{connect, insert_ids as insert, request, table_ids as ids, with_password};
use common::bank::{self, Bank};
use common::cluster::Cluster;
use common::postgres::TestPostgres;
use common::Process;
use serde_json::Value;
use storage::{Lsn, TenantId, TimelineId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Re-placement after a kill -9: the host lease (15 s) plus a lease period (3 s) plus slack.
const FAILOVER_BOUND: Duration = Duration::from_secs(30);

/// `cambium api` on `metadata` against `cluster`, its connection strings naming `proxy`.
fn api_process(root: &std::path::Path, name: &str, metadata: &str, cluster: &Cluster, proxy: &str) -> Process {
    let mut args = cluster.api_args(&root.join(name));
    args.extend(["--metadata", metadata, "--connection-address", proxy].map(str::to_owned));
    Process::start(args)
}

/// Each database's host's API URL, from the metadata.
async fn placements(metadata: &tokio_postgres::Client) -> Vec<(String, String)> {
    metadata
        .query(
            "SELECT d.id, h.api_url FROM databases d JOIN compute_hosts h ON h.id = d.compute_host ORDER BY d.id",
            &[],
        )
        .await
        .expect("placements")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// The PostgreSQL address registered for the host whose API is at `api_url`.
async fn pg_address_of(metadata: &tokio_postgres::Client, api_url: &str) -> String {
    metadata
        .query_one("SELECT pg_address FROM compute_hosts WHERE api_url = $1", &[&api_url])
        .await
        .expect("a registered host")
        .get(0)
}

struct Deployment {
    key: String,
    first: Process,
    second: Process,
    proxy: Process,
    /// A second proxy on the same metadata (several proxies behind one address).
    other_proxy: Process,
    metadata: tokio_postgres::Client,
}

impl Deployment {
    async fn call(&self, via: &Process, method: &str, path: &str, body: Option<&str>) -> common::api::Reply {
        request(&via.address, method, path, Some(&self.key), body, &[]).await
    }

    async fn wait_operation(&self, via: &Process, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let reply = self
                .call(via, "GET", &format!("/v1/operations/{id}?wait=5s"), None)
                .await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let operation = reply.json()["operation"].clone();
            if operation["status"] != "running" {
                return operation;
            }
            assert!(Instant::now() < deadline, "operation {id} still running");
        }
    }
}

/// A database made through `via`: (its id, its default branch id, its connection string with the password).
async fn create_database(
    deployment: &Deployment,
    via: &Process,
    project: &str,
    name: &str,
) -> (String, String, String) {
    let reply = deployment
        .call(
            via,
            "POST",
            &format!("/v1/projects/{project}/databases"),
            Some(&format!(r#"{{"name":"{name}"}}"#)),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let created = reply.json();
    let operation = created["operation"]["id"].as_str().expect("operation");
    let ended = deployment.wait_operation(via, operation).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    (
        created["database"]["id"].as_str().expect("id").to_owned(),
        created["database"]["default_branch_id"]
            .as_str()
            .expect("branch")
            .to_owned(),
        created["database"]["connection_uri"].as_str().expect("uri").to_owned(),
    )
}

/// Sends `bytes` to `address` as a client's first message and returns what came back before the close.
async fn first_message_reply(address: &str, bytes: &[u8]) -> Vec<u8> {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut reply)).await;
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn databases_are_placed_routed_forwarded_and_failed_over() {
    let Some(server) = TestPostgres::start() else {
        return;
    };
    let url = server.create_database("metadata");
    let cluster = Cluster::start(TenantId(0xC1), TimelineId(0xC2), Lsn(0x100_0000))
        .await
        .expect("storage processes");
    let root = tempfile::tempdir().expect("tempdir");
    let proxy = Process::start(vec![
        "proxy".into(),
        "--metadata".into(),
        url.clone(),
        "--data-dir".into(),
        root.path().join("proxy").display().to_string(),
        "--failover-wait-ms".into(),
        "15000".into(),
    ]);
    let other_proxy = Process::start(vec![
        "proxy".into(),
        "--metadata".into(),
        url.clone(),
        "--data-dir".into(),
        root.path().join("other_proxy").display().to_string(),
    ]);
    let first = api_process(root.path(), "first", &url, &cluster, &proxy.address);
    let key = std::fs::read_to_string(root.path().join("first").join("api_key"))
        .expect("the admin key")
        .trim()
        .to_owned();
    let second = api_process(root.path(), "second", &url, &cluster, &proxy.address);
    let (metadata, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("metadata");
    tokio::spawn(connection);
    let mut deployment = Deployment {
        key,
        first,
        second,
        proxy,
        other_proxy,
        metadata,
    };
    let (first, second) = (&deployment.first, &deployment.second);
    let first_url = format!("http://{}", first.address);
    let second_url = format!("http://{}", second.address);

    // Databases land on both hosts: four creations, all through the first process.
    let project = deployment
        .call(first, "POST", "/v1/projects", Some(r#"{"name":"p"}"#))
        .await;
    assert_eq!(project.status, 201, "{}", project.body);
    let project = project.json()["project"]["id"].as_str().expect("id").to_owned();
    let mut databases = Vec::new();
    for index in 0..4 {
        databases.push(create_database(&deployment, first, &project, &format!("d{index}")).await);
    }
    let placed = placements(&deployment.metadata).await;
    assert_eq!(placed.len(), 4, "{placed:?}");
    let on_first: Vec<String> = placed
        .iter()
        .filter(|(_, h)| *h == first_url)
        .map(|(d, _)| d.clone())
        .collect();
    let on_second: Vec<String> = placed
        .iter()
        .filter(|(_, h)| *h == second_url)
        .map(|(d, _)| d.clone())
        .collect();
    assert_eq!((on_first.len(), on_second.len()), (2, 2), "{placed:?}");

    // SQL through the proxy reaches each.
    for (id, _, uri) in &databases {
        assert!(uri.contains(&deployment.proxy.address), "{uri} names the proxy");
        let client = connect(uri)
            .await
            .unwrap_or_else(|e| panic!("{id} through the proxy: {e}"));
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
        drop(client);
        insert(uri, 0..5).await;
        assert_eq!(ids(uri).await, (0..5).collect::<Vec<_>>(), "{id}");
    }

    // A host serves only what is placed on it: the second's port does not serve the first's databases.
    let second_pg = pg_address_of(&deployment.metadata, &second_url).await;
    let (foreign, _, foreign_uri) = databases.iter().find(|(id, _, _)| on_first.contains(id)).expect("one");
    let direct = foreign_uri.replace(&deployment.proxy.address, &second_pg);
    assert!(
        connect(&direct).await.is_err(),
        "{foreign} is served by a host it is not placed on"
    );

    // Through the first process, on a database placed on the second: a branch, then a restore; both forwarded.
    let (target, target_branch, target_uri) = databases.iter().find(|(id, _, _)| on_second.contains(id)).expect("one");
    let password = common::api::password_of(target_uri).expect("a password");
    let reply = deployment
        .call(
            first,
            "POST",
            &format!("/v1/databases/{target}/branches"),
            Some(r#"{"name":"dev"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let branch = reply.json()["branch"].clone();
    let branch_point = branch["parent_lsn"].as_str().expect("lsn").to_owned();
    let branch_uri = with_password(branch["connection_uri"].as_str().expect("uri"), &password);
    assert_eq!(
        ids(&branch_uri).await,
        (0..5).collect::<Vec<_>>(),
        "the branch, served at once"
    );
    insert(target_uri, 5..10).await;
    // Time travel through the proxy: the database as it was at the branch point.
    let at_point = target_uri.replace(&format!("/{target}?"), &format!("/{target}@{branch_point}?"));
    assert_eq!(ids(&at_point).await, (0..5).collect::<Vec<_>>(), "time travel");
    let reply = deployment
        .call(
            first,
            "POST",
            &format!("/v1/branches/{target_branch}/restore"),
            Some(&format!(r#"{{"target_lsn":"{branch_point}","preserve":false}}"#)),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let ended = deployment
        .wait_operation(first, reply.json()["operation"]["id"].as_str().expect("id"))
        .await;
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(
        ids(target_uri).await,
        (0..5).collect::<Vec<_>>(),
        "restored, served at once"
    );

    // A cancel request sent to the proxy reaches the host running the statement.
    let client = connect(target_uri).await.expect("connect");
    let token = client.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        token.cancel_query(tokio_postgres::NoTls).await
    });
    let runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let error = tokio::time::timeout(Duration::from_secs(20), client.query_one(runaway, &[]))
        .await
        .expect("cancelled within 20 s")
        .expect_err("cancelled");
    canceller
        .await
        .expect("canceller")
        .expect("the cancel request was sent");
    assert_eq!(error.code().map(|c| c.code()), Some("57014"), "{error:?}");
    client
        .simple_query("SELECT 1")
        .await
        .expect("the session answers after the cancel");

    // A cancel request that reaches another proxy than its session's (two proxies behind one address) is sent on
    // to every live host, and the one running the statement cancels it.
    let token = client.cancel_token();
    let other_proxy = deployment.other_proxy.address.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let stream = tokio::net::TcpStream::connect(&other_proxy)
            .await
            .expect("the other proxy");
        token.cancel_query_raw(stream, tokio_postgres::NoTls).await
    });
    let error = tokio::time::timeout(Duration::from_secs(20), client.query_one(runaway, &[]))
        .await
        .expect("cancelled through the other proxy within 20 s")
        .expect_err("cancelled through the other proxy");
    canceller
        .await
        .expect("canceller")
        .expect("the cancel request was sent to the other proxy");
    assert_eq!(error.code().map(|c| c.code()), Some("57014"), "{error:?}");
    // A made-up key sent to the other proxy while a statement runs is ignored by every host: it runs on.
    let other_proxy = deployment.other_proxy.address.clone();
    let bogus = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut stream = tokio::net::TcpStream::connect(&other_proxy)
            .await
            .expect("the other proxy");
        let mut request = Vec::new();
        for word in [16u32, 80_877_102, 1, 2] {
            request.extend_from_slice(&word.to_be_bytes());
        }
        tokio::io::AsyncWriteExt::write_all(&mut stream, &request)
            .await
            .expect("a made-up cancel request");
    });
    client
        .simple_query("SELECT pg_sleep(1)")
        .await
        .expect("a made-up cancel key cancels nothing");
    bogus.await.expect("the made-up cancel request was sent");
    drop(client);

    // A database suspended for idleness is woken by a connection through a proxy (its host wakes it).
    let reply = deployment
        .call(
            first,
            "PATCH",
            &format!("/v1/databases/{target}"),
            Some(r#"{"suspend_timeout_seconds":1}"#),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = deployment
            .call(first, "GET", &format!("/v1/databases/{target}"), None)
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        if reply.json()["database"]["status"] == "suspended" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{target} not suspended for idleness: {}",
            reply.body
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let through_other = target_uri.replace(&deployment.proxy.address, &deployment.other_proxy.address);
    assert_eq!(
        ids(&through_other).await,
        (0..5).collect::<Vec<_>>(),
        "woken through the other proxy"
    );
    let reply = deployment
        .call(
            first,
            "PATCH",
            &format!("/v1/databases/{target}"),
            Some(r#"{"suspend_timeout_seconds":0}"#),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    // Malformed and unknown startups get an ErrorResponse from the proxy, and it goes on serving.
    let reply = first_message_reply(&deployment.proxy.address, &[0, 0, 0, 4, 0, 3, 0, 0]).await;
    assert_eq!(reply.first(), Some(&b'E'), "{reply:?}");
    assert!(String::from_utf8_lossy(&reply).contains("08P01"), "{reply:?}");
    let unknown = format!(
        "postgresql://cambium:x@{}/db_unknown?sslmode=disable",
        deployment.proxy.address
    );
    let error = connect(&unknown).await.expect_err("an unknown database");
    assert_eq!(error.code().map(|c| c.code()), Some("3D000"), "{error}");

    // A frozen host (SIGSTOP past its lease: it cannot fence itself) is fenced by the safekeepers' terms: a bank
    // workload through the proxy on a database of the second host, the second stopped; its databases are
    // re-placed on the first and the workload goes on there; continued, the second serves none of them and
    // nothing it had in flight lands beside the first's commits (every acknowledged transfer, total conserved).
    let (frozen_db, _, frozen_uri) = databases
        .iter()
        .find(|(id, _, _)| on_second.contains(id) && id != target)
        .expect("a second database on the second host");
    let seed = bank::seed();
    let client = connect(frozen_uri).await.expect("connect");
    client.batch_execute("DROP TABLE t").await.expect("drop");
    drop(client);
    let workload = Bank::start(frozen_uri, seed).await;
    workload.progress(20, "before the freeze").await;
    // A session open through the proxy on the host about to freeze.
    let stranded = connect(frozen_uri).await.expect("a session before the freeze");
    deployment.second.signal("-STOP");
    let frozen = Instant::now();
    loop {
        let placed = placements(&deployment.metadata).await;
        if placed.iter().all(|(_, host)| *host == first_url) {
            break;
        }
        assert!(
            frozen.elapsed() < FAILOVER_BOUND,
            "not re-placed off the frozen host in {FAILOVER_BOUND:?}: {placed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let replaced_after = frozen.elapsed();
    // The proxy closes it once the database is served elsewhere, instead of leaving it on the frozen host until
    // the client's own timeouts: its next query fails at once and the client can reconnect.
    let answer = tokio::time::timeout(Duration::from_secs(15), stranded.simple_query("SELECT 1"))
        .await
        .expect("the session on the frozen host is closed by the proxy, not left hanging");
    assert!(answer.is_err(), "a session on the frozen host answered");
    drop(stranded);
    workload.progress(20, "after the frozen host's databases moved").await;
    eprintln!(
        "the frozen host's databases re-placed {replaced_after:?} and transfers acknowledged again {:?} after the \
         freeze",
        frozen.elapsed()
    );
    deployment.second.signal("-CONT");
    let continued = Instant::now();
    // Continued, it learns it lost its lease and registers again, serving nothing it lost.
    loop {
        let live: bool = deployment
            .metadata
            .query_one(
                "SELECT COALESCE(bool_or(lease_expires_at >= $1), false) FROM compute_hosts WHERE api_url = $2",
                &[&now_text(), &second_url],
            )
            .await
            .expect("the second host's row")
            .get(0);
        if live {
            break;
        }
        assert!(
            continued.elapsed() < FAILOVER_BOUND,
            "the continued host never registered again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let direct = frozen_uri.replace(&deployment.proxy.address, &second_pg);
    assert!(
        connect(&direct).await.is_err(),
        "{frozen_db} is still served by the host it was taken from"
    );
    workload.progress(20, "after the frozen host was continued").await;
    workload.stop_and_check(frozen_uri, "after the freeze").await;

    // Failover: a bank workload through the proxy on a database of the first host, then kill -9 of the first.
    let (bank_db, _, bank_uri) = databases.iter().find(|(id, _, _)| on_first.contains(id)).expect("one");
    let client = connect(bank_uri).await.expect("connect");
    client.batch_execute("DROP TABLE t").await.expect("drop");
    drop(client);
    let workload = Bank::start(bank_uri, seed).await;
    workload.progress(20, "before the kill").await;
    // The kill's takeover needs the second host live again (it registered after the freeze).
    deployment.first.kill9();
    let killed = Instant::now();
    loop {
        let placed = placements(&deployment.metadata).await;
        if placed.iter().all(|(_, host)| *host == second_url) {
            break;
        }
        assert!(
            killed.elapsed() < FAILOVER_BOUND,
            "not re-placed in {FAILOVER_BOUND:?}: {placed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let replaced_after = killed.elapsed();
    workload.progress(20, "after the failover").await;
    let served_after = killed.elapsed();
    eprintln!("re-placed {replaced_after:?} and transfers acknowledged again {served_after:?} after the kill");
    for (id, _, uri) in &databases {
        if id != bank_db && id != frozen_db {
            assert!(!ids(uri).await.is_empty(), "{id} served after the failover");
        }
    }
    // Every database on exactly one live host.
    let hosts: Vec<(String, bool)> = deployment
        .metadata
        .query(
            "SELECT api_url, lease_expires_at >= $1 FROM compute_hosts",
            &[&now_text()],
        )
        .await
        .expect("hosts")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let live: HashSet<&str> = hosts
        .iter()
        .filter(|(_, live)| *live)
        .map(|(url, _)| url.as_str())
        .collect();
    assert_eq!(live, HashSet::from([second_url.as_str()]), "{hosts:?}");
    workload.stop_and_check(bank_uri, "after the failover").await;

    // The killed process restarted (a new, empty host: its old row went with its databases) serves none of them,
    // and the next database goes to it, the host with fewer.
    deployment.first.restart();
    let first_pg = pg_address_of(&deployment.metadata, &first_url).await;
    for (id, _, uri) in &databases {
        let direct = uri.replace(&deployment.proxy.address, &first_pg);
        assert!(
            connect(&direct).await.is_err(),
            "{id} is served by the restarted host too"
        );
    }
    let (late, _, late_uri) = create_database(&deployment, second, &project, "late").await;
    let placed = placements(&deployment.metadata).await;
    assert!(placed.contains(&(late.clone(), first_url.clone())), "{placed:?}");
    let client = connect(&late_uri).await.expect("the new database through the proxy");
    client.simple_query("SELECT 1").await.expect("answers");
}

/// Now as the metadata stores times (ISO 8601 UTC, three fractional digits).
fn now_text() -> String {
    format!("{:.3}", jiff::Timestamp::now())
}
