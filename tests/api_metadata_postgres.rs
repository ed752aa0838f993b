//! `cambium up --metadata postgresql://…`: the control metadata in a real PostgreSQL 15 (started by the test in a
//! temp dir; skipped, saying so, where it is absent) instead of `metadata.sqlite`. A database is created, written
//! through SQL, branched and read back, an `Idempotency-Key` retry replays, and the rows are in PostgreSQL (the
//! data directory holds no `metadata.sqlite`). The whole black-box suite runs the same way with
//! `CAMBIUM_TEST_METADATA=postgres` (see `common::api::TEST_METADATA_ENV`). Then two `cambium api` processes share
//! one metadata database: an operation is held by the process that made it, and taken over by the other when
//! that one is killed -9 (its lease expires), one account's rate limit holds across both together (each
//! process alone would admit it again), and one `Idempotency-Key` sent to both at once runs its request once.

mod common;

use std::time::{Duration, Instant};

use common::api::{connect, insert_ids as insert, request, table_ids as ids, Up};
use common::cluster::Cluster;
use common::postgres::TestPostgres;
use common::Process;
use storage::{Lsn, TenantId, TimelineId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_keeps_its_metadata_in_postgresql() {
    let Some(server) = TestPostgres::start() else {
        return;
    };
    let url = server.create_database("metadata");
    let up = Up::start_on_metadata(&url, &[]);
    assert!(
        !up.data_dir.join(api::store::METADATA_FILE).exists(),
        "the metadata went to SQLite"
    );
    let project = up.create_project("pg").await;
    let database = up.create_database(&project, "shop").await;
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();
    let database_id = database["id"].as_str().expect("id").to_owned();
    {
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
    }
    insert(&uri, 0..5).await;
    let body = r#"{"name":"dev"}"#;
    let path = format!("/v1/databases/{database_id}/branches");
    let first = common::api::request(
        &up.process.address,
        "POST",
        &path,
        Some(&up.key),
        Some(body),
        &[("Idempotency-Key", "branch-1")],
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.body);
    let again = common::api::request(
        &up.process.address,
        "POST",
        &path,
        Some(&up.key),
        Some(body),
        &[("Idempotency-Key", "branch-1")],
    )
    .await;
    assert_eq!(
        (again.status, again.body.as_str()),
        (201, first.body.as_str()),
        "the retry replays"
    );
    let branches = up.call("GET", &path, None).await;
    assert_eq!(branches.status, 200, "{}", branches.body);
    assert_eq!(branches.json()["branches"].as_array().expect("branches").len(), 2);
    assert_eq!(ids(&uri).await, (0..5).collect::<Vec<_>>());
    // The rows are PostgreSQL's: read them there.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("metadata");
    tokio::spawn(connection);
    let row = client
        .query_one("SELECT count(*) FROM branches WHERE database_id = $1", &[&database_id])
        .await
        .expect("count");
    assert_eq!(row.get::<_, i64>(0), 2);
}

/// `cambium api` on `metadata`, against `cluster`'s storage, with each operation delayed `delay_ms` first.
fn api_process(root: &std::path::Path, name: &str, metadata: &str, cluster: &Cluster, delay_ms: u64) -> Process {
    api_process_with(root, name, metadata, cluster, delay_ms, &[])
}

/// [`api_process`] with `extra` flags.
fn api_process_with(
    root: &std::path::Path,
    name: &str,
    metadata: &str,
    cluster: &Cluster,
    delay_ms: u64,
    extra: &[&str],
) -> Process {
    let mut args = cluster.api_args(&root.join(name));
    args.extend(["--metadata".to_owned(), metadata.to_owned()]);
    args.extend(["--operation-delay-ms".to_owned(), delay_ms.to_string()]);
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    Process::start(args)
}

/// The lease of operation `id`, read from the metadata: its owner.
async fn lease_owner(metadata: &tokio_postgres::Client, id: &str) -> Option<String> {
    metadata
        .query_one("SELECT lease_owner FROM operations WHERE id = $1", &[&id])
        .await
        .expect("the operation's row")
        .get(0)
}

/// Two `cambium api` processes on one PostgreSQL metadata database: an operation created through the first is
/// held by it alone while it lives (its lease keeps the other off), and when it is killed -9 mid-operation the
/// other takes the operation over once the lease expires and finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_api_process_operation_is_taken_over_by_another() {
    const DELAY_MS: u64 = 60_000;
    let Some(server) = TestPostgres::start() else {
        return;
    };
    let url = server.create_database("metadata");
    let cluster = Cluster::start(TenantId(0xB1), TimelineId(0xB2), Lsn(0x100_0000))
        .await
        .expect("storage processes");
    let root = tempfile::tempdir().expect("tempdir");
    // The first runs no operation for a minute: it is killed before it would.
    let mut first = api_process(root.path(), "first", &url, &cluster, DELAY_MS);
    let key = std::fs::read_to_string(root.path().join("first").join("api_key"))
        .expect("the admin key, made by the first process")
        .trim()
        .to_owned();
    let second = api_process(root.path(), "second", &url, &cluster, 0);
    assert!(
        !root.path().join("second").join("api_key").exists(),
        "the second process found the admin account and made no key"
    );
    let call = |address: String, method: &'static str, path: String, body: Option<&'static str>| {
        let key = key.clone();
        async move { request(&address, method, &path, Some(&key), body, &[]).await }
    };
    let project = call(
        first.address.clone(),
        "POST",
        "/v1/projects".into(),
        Some(r#"{"name":"p"}"#),
    )
    .await;
    assert_eq!(project.status, 201, "{}", project.body);
    let project = project.json()["project"]["id"].as_str().expect("id").to_owned();
    let created = call(
        first.address.clone(),
        "POST",
        format!("/v1/projects/{project}/databases"),
        Some(r#"{"name":"d"}"#),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let operation = created.json()["operation"]["id"].as_str().expect("op").to_owned();
    let (metadata, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("metadata");
    tokio::spawn(connection);
    let holder = lease_owner(&metadata, &operation)
        .await
        .expect("leased from its creation");
    // Longer than a lease: the first renews it, and the second, scanning all along, never takes it.
    tokio::time::sleep(Duration::from_millis(api::store::leases::OPERATION_LEASE_MS + 5_000)).await;
    assert_eq!(
        lease_owner(&metadata, &operation).await.as_deref(),
        Some(holder.as_str())
    );
    let seen = call(
        second.address.clone(),
        "GET",
        format!("/v1/operations/{operation}"),
        None,
    )
    .await;
    assert_eq!(seen.json()["operation"]["status"], "running", "{}", seen.body);

    first.kill9();
    let deadline = Instant::now() + Duration::from_secs(120);
    let ended = loop {
        let reply = call(
            second.address.clone(),
            "GET",
            format!("/v1/operations/{operation}?wait=10s"),
            None,
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let operation = reply.json()["operation"].clone();
        if operation["status"] != "running" {
            break operation;
        }
        assert!(Instant::now() < deadline, "not taken over in time: {operation}");
    };
    assert_eq!(ended["status"], "finished", "{ended}");
    let taker = lease_owner(&metadata, &operation).await.expect("leased");
    assert_ne!(taker, holder, "the second process took the lease");
    let database = created.json()["database"]["id"].as_str().expect("id").to_owned();
    let database = call(second.address.clone(), "GET", format!("/v1/databases/{database}"), None).await;
    assert_eq!(database.json()["database"]["status"], "active", "{}", database.body);
}

/// Two `cambium api` processes on one PostgreSQL metadata database share each account's rate limit: one client
/// alternating between them as fast as it can gets, together, what one process's limit allows plus the
/// documented lag bound (`api::http::limits`), well under twice the limit that two unshared processes give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_api_processes_share_an_accounts_rate_limit() {
    const PER_S: u32 = 5;
    const BURST: u32 = 2 * PER_S; // the default burst
    const RUN: Duration = Duration::from_secs(5);
    let Some(server) = TestPostgres::start() else {
        return;
    };
    let url = server.create_database("metadata");
    let cluster = Cluster::start(TenantId(0xB3), TimelineId(0xB4), Lsn(0x100_0000))
        .await
        .expect("storage processes");
    let root = tempfile::tempdir().expect("tempdir");
    let rate = PER_S.to_string();
    let processes = [
        api_process_with(root.path(), "a", &url, &cluster, 0, &["--rate-limit", &rate]),
        api_process_with(root.path(), "b", &url, &cluster, 0, &["--rate-limit", &rate]),
    ];
    let key = std::fs::read_to_string(root.path().join("a").join("api_key"))
        .expect("the admin key, made by the first process")
        .trim()
        .to_owned();
    let started = Instant::now();
    let mut admitted = [0_u32; 2];
    let mut refused = [0_u32; 2];
    let mut turn = 0;
    while started.elapsed() < RUN {
        let reply = request(&processes[turn].address, "GET", "/v1/projects", Some(&key), None, &[]).await;
        match reply.status {
            200 => admitted[turn] += 1,
            429 => refused[turn] += 1,
            other => panic!("GET /v1/projects: {other} {}", reply.body),
        }
        turn = 1 - turn;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let total = f64::from(admitted[0] + admitted[1]);
    // One bucket's allowance over the run, plus what the other process can admit in one lag (~0.5 s) unseen.
    let lag_s = 0.5;
    let shared_bound = f64::from(BURST) + f64::from(PER_S) * elapsed_s + f64::from(BURST) + f64::from(PER_S) * lag_s;
    let unshared = 2.0 * (f64::from(BURST) + f64::from(PER_S) * elapsed_s);
    eprintln!(
        "admitted {admitted:?}, refused {refused:?} in {elapsed_s:.2} s: {total} together, bound {shared_bound:.1}, \
         {unshared:.1} if each process limited alone"
    );
    assert!(
        admitted.iter().all(|&n| n > 0),
        "each process serves the account: {admitted:?}"
    );
    assert!(
        refused.iter().all(|&n| n > 0),
        "each process refuses past the limit: {refused:?}"
    );
    assert!(
        total <= shared_bound,
        "{total} admitted together, more than the shared limit's bound {shared_bound:.1}"
    );
    assert!(
        total >= f64::from(BURST) + f64::from(PER_S) * (elapsed_s - 2.0 * lag_s) - 2.0,
        "{total} admitted together: the shared limit refuses more than it should"
    );
}

/// Two `cambium api` processes on one PostgreSQL metadata database share `Idempotency-Key` reservations: the same
/// keyed `POST /v1/projects` sent to both at once runs once. Each of the pair gets the project (made, or its
/// replay) or 409 while the other runs it, never a second project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_request_sent_to_two_api_processes_at_once_runs_once() {
    const ROUNDS: usize = 20;
    let Some(server) = TestPostgres::start() else {
        return;
    };
    let url = server.create_database("metadata");
    let cluster = Cluster::start(TenantId(0xB5), TimelineId(0xB6), Lsn(0x100_0000))
        .await
        .expect("storage processes");
    let root = tempfile::tempdir().expect("tempdir");
    let processes = [
        api_process(root.path(), "a", &url, &cluster, 0),
        api_process(root.path(), "b", &url, &cluster, 0),
    ];
    let key = std::fs::read_to_string(root.path().join("a").join("api_key"))
        .expect("the admin key, made by the first process")
        .trim()
        .to_owned();
    let (mut conflicts, mut replays) = (0, 0);
    for round in 0..ROUNDS {
        let idempotency_key = format!("round-{round}");
        let body = format!(r#"{{"name":"p{round}"}}"#);
        let send = |address: String| {
            let (key, idempotency_key, body) = (key.clone(), idempotency_key.clone(), body.clone());
            async move {
                request(
                    &address,
                    "POST",
                    "/v1/projects",
                    Some(&key),
                    Some(&body),
                    &[("Idempotency-Key", &idempotency_key)],
                )
                .await
            }
        };
        let (a, b) = tokio::join!(send(processes[0].address.clone()), send(processes[1].address.clone()));
        let mut ids = Vec::new();
        for reply in [&a, &b] {
            match reply.status {
                201 => {
                    ids.push(reply.json()["project"]["id"].as_str().expect("id").to_owned());
                    if reply.header("idempotent-replayed") == Some("true") {
                        replays += 1;
                    }
                }
                409 => {
                    assert!(reply.body.contains("in progress"), "{}", reply.body);
                    conflicts += 1;
                }
                other => panic!("round {round}: {other} {}", reply.body),
            }
        }
        ids.dedup();
        assert_eq!(ids.len(), 1, "round {round} made {ids:?}: {} / {}", a.body, b.body);
        // And a later retry on either process replays the same project.
        let again = send(processes[round % 2].address.clone()).await;
        assert_eq!(again.status, 201, "{}", again.body);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(again.json()["project"]["id"].as_str(), Some(ids[0].as_str()));
    }
    let listed = request(
        &processes[1].address,
        "GET",
        "/v1/projects?limit=100",
        Some(&key),
        None,
        &[],
    )
    .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let projects = listed.json()["projects"].as_array().expect("projects").len();
    eprintln!("{ROUNDS} rounds: {conflicts} answered 409 in progress, {replays} replays at once");
    assert_eq!(projects, ROUNDS, "one project per key: {}", listed.body);
}
