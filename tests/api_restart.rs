//! `cambium up` killed with -9 while operations run (the worker is told to wait before each, so the crash
//! lands while they are `running`): after a restart every operation ends `finished` or `failed`, never stays
//! `running`, and every acknowledged commit is still there.

mod common;

use common::api::{connect, insert_ids as insert, table_ids as ids, Up};

/// The worker's wait before each operation: long enough to crash inside it.
const OPERATION_DELAY: &str = "1500";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_database_creation_finishes_it_after_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &["--operation-delay-ms", OPERATION_DELAY]);
    let project = up.create_project("crash").await;
    let reply = up
        .call(
            "POST",
            &format!("/v1/projects/{project}/databases"),
            Some(r#"{"name":"db"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let operation = reply.json()["operation"]["id"].as_str().expect("id").to_owned();
    let database = reply.json()["database"]["id"].as_str().expect("id").to_owned();
    up.remember_password(
        &database,
        reply.json()["database"]["connection_uri"].as_str().expect("uri"),
    );
    let running = up
        .call("GET", &format!("/v1/operations/{operation}"), None)
        .await
        .json();
    assert_eq!(running["operation"]["status"], "running");

    up.process.kill9();
    up.process.restart();

    let ended = up.wait_operation(&operation).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    let database = up.call("GET", &format!("/v1/databases/{database}"), None).await.json()["database"].clone();
    assert_eq!(database["status"], "active", "{database}");
    let uri = up.uri(&database);
    {
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
    }
    insert(&uri, 0..5).await;
    assert_eq!(ids(&uri).await, (0..5).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_a_restore_finishes_it_after_restart_with_the_data_intact() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &["--operation-delay-ms", OPERATION_DELAY]);
    let project = up.create_project("crash").await;
    let database = up.create_database(&project, "db").await;
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();
    let database_id = database["id"].as_str().expect("id").to_owned();
    let main = database["default_branch_id"].as_str().expect("branch").to_owned();
    {
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
    }
    insert(&uri, 0..10).await;
    let mark = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"mark"}"#),
        )
        .await
        .json()["branch"]["parent_lsn"]
        .as_str()
        .expect("lsn")
        .to_owned();
    insert(&uri, 10..20).await;
    let reply = up
        .call(
            "POST",
            &format!("/v1/branches/{main}/restore"),
            Some(&format!(r#"{{"target_lsn":"{mark}"}}"#)),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let operation = reply.json()["operation"]["id"].as_str().expect("id").to_owned();

    up.process.kill9();
    up.process.restart();

    // Before the restore runs again, the branch still has every acknowledged commit.
    assert_eq!(ids(&uri).await, (0..20).collect::<Vec<_>>());
    let ended = up.wait_operation(&operation).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(ids(&uri).await, (0..10).collect::<Vec<_>>());
    let branches = up
        .call("GET", &format!("/v1/databases/{database_id}/branches"), None)
        .await
        .json();
    let preserved = branches["branches"]
        .as_array()
        .expect("branches")
        .iter()
        .find(|b| {
            b["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("main_before_restore_"))
        })
        .cloned()
        .expect("the state before the restore, kept");
    assert_eq!(ids(&up.uri(&preserved)).await, (0..20).collect::<Vec<_>>());
    // Nothing is left running.
    let project_operations = up
        .call("GET", &format!("/v1/projects/{project}/operations"), None)
        .await
        .json();
    for operation in project_operations["operations"].as_array().expect("operations") {
        assert_ne!(operation["status"], "running", "{operation}");
    }
    insert(&uri, 100..101).await;
    assert_eq!(ids(&uri).await, (0..10).chain(100..101).collect::<Vec<_>>());
}
