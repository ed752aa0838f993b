//! `cambium api` alone, against three `cambium safekeeper`s and a `cambium pageserver` run as separate
//! processes (as on separate hosts): a database is created, written through SQL, branched, and read back; with
//! one safekeeper frozen a branch is still created and deleted, without waiting for it.

mod common;

use common::api::{connect, password_of, request, with_password};
use common::cluster::Cluster;
use common::Process;
use storage::{Lsn, TenantId, TimelineId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_drives_storage_processes_of_its_own() {
    // The cluster's own tenant is unused: the API creates its databases' tenants itself.
    let cluster = Cluster::start(TenantId(0xA1), TimelineId(0xA2), Lsn(0x100_0000))
        .await
        .expect("storage processes");
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("api");
    let api = Process::start(cluster.api_args(&data_dir));
    let key = std::fs::read_to_string(data_dir.join("api_key"))
        .expect("key")
        .trim()
        .to_owned();
    let call = |method: &'static str, path: String, body: Option<&'static str>| {
        let (address, key) = (api.address.clone(), key.clone());
        async move { request(&address, method, &path, Some(&key), body, &[]).await }
    };

    let project = call("POST", "/v1/projects".into(), Some(r#"{"name":"p"}"#))
        .await
        .json()["project"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let created = call(
        "POST",
        format!("/v1/projects/{project}/databases"),
        Some(r#"{"name":"d"}"#),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let operation = created.json()["operation"]["id"].as_str().expect("op").to_owned();
    let ended = call("GET", format!("/v1/operations/{operation}?wait=30s"), None)
        .await
        .json();
    assert_eq!(ended["operation"]["status"], "finished", "{ended}");
    let database = created.json()["database"].clone();
    let uri = database["connection_uri"].as_str().expect("uri");

    let client = connect(uri).await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES (1), (2);")
        .await
        .expect("write");
    let branch = call(
        "POST",
        format!("/v1/databases/{}/branches", database["id"].as_str().expect("id")),
        Some(r#"{"name":"b"}"#),
    )
    .await;
    assert_eq!(branch.status, 201, "{}", branch.body);
    client.batch_execute("INSERT INTO t VALUES (3);").await.expect("write");
    // A branch's connection string has no password: it takes the database's, given by its creation.
    let password = password_of(uri).expect("the creation gives the password");
    let branch_uri = with_password(
        branch.json()["branch"]["connection_uri"].as_str().expect("uri"),
        &password,
    );
    let branch_client = connect(&branch_uri).await.expect("connect to the branch");
    let count: i64 = branch_client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 2, "the branch sees the parent as of the branch point");
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 3);

    // One safekeeper frozen (SIGSTOP: its connections stay open, its calls hang until their 10 s timeout): a
    // creation is done once a majority made the timeline, without waiting for the frozen one's timeout.
    cluster.safekeepers[2].signal("-STOP");
    let started = std::time::Instant::now();
    let frozen = call(
        "POST",
        format!("/v1/databases/{}/branches", database["id"].as_str().expect("id")),
        Some(r#"{"name":"while-one-is-frozen"}"#),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(frozen.status, 201, "{}", frozen.body);
    assert!(
        took < std::time::Duration::from_secs(7),
        "the creation waited {took:?} with one of three safekeepers frozen"
    );
    // Nor does a deletion wait for it (the frozen copy is left for a later deletion or the reconciler).
    let frozen_id = frozen.json()["branch"]["id"].as_str().expect("id").to_owned();
    let started = std::time::Instant::now();
    let deleted = call("DELETE", format!("/v1/branches/{frozen_id}"), None).await;
    let took = started.elapsed();
    cluster.safekeepers[2].signal("-CONT");
    assert!((200..300).contains(&deleted.status), "{}", deleted.body);
    assert!(
        took < std::time::Duration::from_secs(7),
        "the deletion waited {took:?} with one of three safekeepers frozen"
    );
}
