//! The user story end to end, against a real `cambium up` over HTTP and the PostgreSQL wire protocol: create a
//! database, write through SQL, branch, write on both sides, restore by timestamp and by LSN, and see each result
//! through SQL on the same connection string.

mod common;

use common::api::{connect, insert_ids as insert, table_ids as ids, Up};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_write_branch_write_both_restore_by_time_and_lsn() {
    let up = Up::start();
    let project = up.create_project("story").await;
    let database = up.create_database(&project, "shop").await;
    let db_uri = database["connection_uri"].as_str().expect("uri").to_owned();
    let database_id = database["id"].as_str().expect("id").to_owned();
    let main_id = database["default_branch_id"].as_str().expect("branch").to_owned();

    // Write through SQL.
    {
        let client = connect(&db_uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
    }
    insert(&db_uri, 0..10).await;
    // A moment between writes, so a timestamp falls between them.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let after_ten = jiff::Timestamp::now();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    insert(&db_uri, 10..20).await;

    // Branch from the latest state; the response resolves parent_lsn.
    let reply = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"dev"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let branch = reply.json()["branch"].clone();
    assert_eq!(branch["parent_branch_id"], main_id.as_str());
    assert_eq!(branch["is_default"], false);
    let branch_point = branch["parent_lsn"].as_str().expect("parent_lsn");
    let (high, low) = branch_point.split_once('/').expect("an LSN is X/Y");
    assert!(
        u64::from_str_radix(high, 16).is_ok() && u64::from_str_radix(low, 16).is_ok(),
        "{branch_point}"
    );
    let branch_uri = up.uri(&branch);
    assert_eq!(ids(&branch_uri).await, (0..20).collect::<Vec<_>>());

    // Write on both sides: each sees only its own.
    insert(&db_uri, 100..105).await;
    insert(&branch_uri, 200..205).await;
    assert_eq!(ids(&db_uri).await, (0..20).chain(100..105).collect::<Vec<_>>());
    assert_eq!(ids(&branch_uri).await, (0..20).chain(200..205).collect::<Vec<_>>());

    // Restore main by timestamp: back to the first ten rows, on the same connection string.
    let reply = up
        .call(
            "POST",
            &format!("/v1/branches/{main_id}/restore"),
            Some(&format!(r#"{{"target_timestamp":"{after_ten}"}}"#)),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let operation = reply.json()["operation"].clone();
    assert_eq!(operation["action"], "restore_branch");
    assert_eq!(operation["status"], "running");
    let ended = up.wait_operation(operation["id"].as_str().expect("id")).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(ids(&db_uri).await, (0..10).collect::<Vec<_>>());
    // The branch is untouched by its parent's restore.
    assert_eq!(ids(&branch_uri).await, (0..20).chain(200..205).collect::<Vec<_>>());

    // The state before the restore is kept as a branch.
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
        .expect("a preserved branch");
    let preserved_uri = up.uri(&preserved);
    assert_eq!(ids(&preserved_uri).await, (0..20).chain(100..105).collect::<Vec<_>>());

    // Writes go on after a restore. A branch from the latest state names an LSN of main's (new) history; then
    // main is restored to that LSN, without keeping the state before.
    insert(&db_uri, 300..303).await;
    let reply = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"mark"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let mark = reply.json()["branch"]["parent_lsn"].as_str().expect("lsn").to_owned();
    insert(&db_uri, 303..306).await;
    let reply = up
        .call(
            "POST",
            &format!("/v1/branches/{main_id}/restore"),
            Some(&format!(r#"{{"target_lsn":"{mark}","preserve":false}}"#)),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let ended = up
        .wait_operation(reply.json()["operation"]["id"].as_str().expect("id"))
        .await;
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(ids(&db_uri).await, (0..10).chain(300..303).collect::<Vec<_>>());
    // The same branch id, name and connection string.
    let main = up.call("GET", &format!("/v1/branches/{main_id}"), None).await.json()["branch"].clone();
    assert_eq!(main["name"], "main");
    assert_eq!(main["is_default"], true);
    let count = up
        .call("GET", &format!("/v1/databases/{database_id}/branches"), None)
        .await
        .json()["branches"]
        .as_array()
        .expect("branches")
        .len();
    assert_eq!(
        count, 4,
        "main, dev, the preserved branch and mark: preserve=false keeps no new branch"
    );
    // And it is writable.
    insert(&db_uri, 400..401).await;
    assert_eq!(
        ids(&db_uri).await,
        (0..10).chain(300..303).chain(400..401).collect::<Vec<_>>()
    );
}
