//! Control-plane calls that race each other, and steps that fail halfway, against a real `cambium up` (one per
//! test) over HTTP and SQL. The windows are widened with the hidden `--faults` knob (`api::faults`): a pause
//! between a call's reads and its changes, or a failure injected into a step that rarely fails. Each test asserts
//! what a client must be able to rely on whatever the interleaving: a branch forks a state its parent really had,
//! a deleted database is served by no compute, a database's status says whether it serves SQL, and an operation
//! reports what happened.

mod common;

use std::time::Duration;

use common::api::{connect, insert_ids, table_ids, Reply, Up};
use serde_json::Value;

/// The string field `field` of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// A project with an active database holding rows `0..n` in table `t`; (project id, the database).
async fn database_with_rows(up: &Up, n: i64) -> (String, Value) {
    let project = up.create_project("races").await;
    let database = up.create_database(&project, "db").await;
    let client = connect(&up.uri(&database)).await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .await
        .expect("create table");
    drop(client);
    insert_ids(&up.uri(&database), 0..n).await;
    (project, database)
}

/// The current time as RFC 3339, with a second's margin on both sides (commit times have their own clock).
async fn a_moment() -> String {
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let now = jiff::Timestamp::now().to_string();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    now
}

/// Asserts that no compute serves `uri`: the connection is refused as for a name that does not exist (a
/// password that does not match, 28P01, or an unknown name), not opened, and not failed by its storage.
async fn assert_not_served(uri: &str) {
    match connect(uri).await {
        Ok(client) => {
            let answer = client.query_one("SELECT 1", &[]).await;
            panic!("{uri} is still served: SELECT 1 gave {answer:?}");
        }
        Err(error) => {
            let code = error.code().map(|c| c.code().to_owned());
            let message = error.as_db_error().map(|e| e.message().to_owned()).unwrap_or_default();
            assert!(
                code.as_deref() == Some("28P01") || message.contains("invalid database name"),
                "{uri}: refused for another reason: {error:?}"
            );
        }
    }
}

/// Waits for `operation` to end; it.
async fn ended(up: &Up, operation: &str) -> Value {
    up.wait_operation(operation).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_made_while_its_parent_is_restored_forks_a_state_the_parent_had() {
    // The restore waits 1 s before it runs; the branch creation waits 5 s before it takes the database's lock:
    // the restore runs, and the parent gets new commits on its new timeline, while the creation waits.
    let up = Up::start_with(&[
        "--operation-delay-ms",
        "1000",
        "--faults",
        "branch_create_pause_ms=5000",
    ]);
    let (_, database) = database_with_rows(&up, 5).await;
    let uri = up.uri(&database);
    let database_id = text(&database, "id");
    let main = text(&database, "default_branch_id");
    let before = a_moment().await;
    insert_ids(&uri, 5..10).await;
    let restore = up
        .call(
            "POST",
            &format!("/v1/branches/{main}/restore"),
            Some(&format!(r#"{{"target_timestamp":"{before}"}}"#)),
        )
        .await;
    assert_eq!(restore.status, 202, "{}", restore.body);
    let restore_id = restore.json()["operation"]["id"].as_str().expect("id").to_owned();
    let branch = {
        let (address, key, database_id) = (up.process.address.clone(), up.key.clone(), database_id.clone());
        tokio::spawn(async move {
            common::api::request(
                &address,
                "POST",
                &format!("/v1/databases/{database_id}/branches"),
                Some(&key),
                Some(r#"{"name":"child"}"#),
                &[],
            )
            .await
        })
    };
    let restored = ended(&up, &restore_id).await;
    assert_eq!(restored["status"], "finished", "{restored}");
    // More commits on the restored timeline than the old one had past the restore point, so an LSN of the new
    // timeline is past the end of the old one.
    insert_ids(&uri, 100..120).await;
    let main_rows = table_ids(&uri).await;
    let expected: Vec<i64> = (0..5).chain(100..120).collect();
    assert_eq!(main_rows, expected);
    let branch: Reply = branch.await.expect("the branch request");
    assert_eq!(branch.status, 201, "{}", branch.body);
    let child = branch.json()["branch"].clone();
    assert_eq!(table_ids(&up.uri(&child)).await, main_rows, "{child}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_created_while_its_project_is_deleted_is_not_left_served() {
    let up = Up::start_with(&["--faults", "project_delete_pause_ms=3000"]);
    let project = up.create_project("doomed").await;
    let deletion = {
        let (address, key, project) = (up.process.address.clone(), up.key.clone(), project.clone());
        tokio::spawn(async move {
            common::api::request(
                &address,
                "DELETE",
                &format!("/v1/projects/{project}"),
                Some(&key),
                None,
                &[],
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let created = up
        .call(
            "POST",
            &format!("/v1/projects/{project}/databases"),
            Some(r#"{"name":"late"}"#),
        )
        .await;
    let created_database = match created.status {
        201 => {
            let body = created.json();
            let operation = ended(&up, body["operation"]["id"].as_str().expect("id")).await;
            Some((body["database"].clone(), operation))
        }
        _ => {
            created.assert_error(404, "not_found");
            None
        }
    };
    let deleted = deletion.await.expect("the deletion");
    let project_now = up.call("GET", &format!("/v1/projects/{project}"), None).await;
    match deleted.status {
        204 => project_now.assert_error(404, "not_found"),
        _ => {
            deleted.assert_error(409, "conflict");
            assert_eq!(project_now.status, 200, "{}", project_now.body);
        }
    }
    if let Some((database, operation)) = created_database {
        let id = text(&database, "id");
        let now = up.call("GET", &format!("/v1/databases/{id}"), None).await;
        let uri = text(&database, "connection_uri");
        if now.status == 404 {
            assert_not_served(&uri).await;
        } else {
            // It survived (the deletion was refused): it is what its operation says.
            assert_eq!(now.status, 200, "{}", now.body);
            assert_eq!(operation["status"], "finished", "{operation}");
            assert_eq!(now.json()["database"]["status"], "active", "{}", now.body);
            connect(&uri).await.expect("the surviving database serves SQL");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_resumed_while_its_project_is_deleted_is_not_left_served() {
    let up = Up::start_with(&["--faults", "project_delete_pause_ms=3000"]);
    let (project, database) = database_with_rows(&up, 1).await;
    let id = text(&database, "id");
    let uri = up.uri(&database);
    let suspended = up.call("POST", &format!("/v1/databases/{id}/suspend"), None).await;
    assert_eq!(suspended.status, 200, "{}", suspended.body);
    let deletion = {
        let (address, key, project) = (up.process.address.clone(), up.key.clone(), project.clone());
        tokio::spawn(async move {
            common::api::request(
                &address,
                "DELETE",
                &format!("/v1/projects/{project}"),
                Some(&key),
                None,
                &[],
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resumed = up.call("POST", &format!("/v1/databases/{id}/resume"), None).await;
    let deleted = deletion.await.expect("the deletion");
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    // The resume ran before the deletion (then the deletion stopped it again) or after it (then it found
    // nothing): either way the database is gone and nothing serves it.
    assert!(resumed.status == 200 || resumed.status == 404, "{resumed:?}");
    up.call("GET", &format!("/v1/databases/{id}"), None)
        .await
        .assert_error(404, "not_found");
    assert_not_served(&uri).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resume_leaves_the_database_suspended_and_refusing_sql() {
    let up = Up::start_with(&["--faults", "resume_check_fails=1"]);
    let (_, database) = database_with_rows(&up, 3).await;
    let id = text(&database, "id");
    let uri = up.uri(&database);
    let suspended = up.call("POST", &format!("/v1/databases/{id}/suspend"), None).await;
    assert_eq!(suspended.status, 200, "{}", suspended.body);
    up.call("POST", &format!("/v1/databases/{id}/resume"), None)
        .await
        .assert_error(503, "unavailable");
    let now = up.call("GET", &format!("/v1/databases/{id}"), None).await.json();
    assert_eq!(now["database"]["status"], "suspended", "{now}");
    for name_uri in [
        uri.clone(),
        uri.replace(
            &format!("/{id}?"),
            &format!("/{}?", text(&database, "default_branch_id")),
        ),
    ] {
        let refused = connect(&name_uri)
            .await
            .err()
            .unwrap_or_else(|| panic!("{name_uri} serves SQL while suspended"));
        let message = refused
            .as_db_error()
            .map(|e| e.message().to_owned())
            .unwrap_or_default();
        assert!(message.contains("suspended"), "{refused:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_whose_compute_start_fails_is_reported_as_what_happened() {
    let up = Up::start_with(&["--faults", "restore_attach_fails=1"]);
    let (_, database) = database_with_rows(&up, 5).await;
    let uri = up.uri(&database);
    let database_id = text(&database, "id");
    let main = text(&database, "default_branch_id");
    let before = a_moment().await;
    insert_ids(&uri, 5..10).await;
    let restore = up
        .call(
            "POST",
            &format!("/v1/branches/{main}/restore"),
            Some(&format!(r#"{{"target_timestamp":"{before}"}}"#)),
        )
        .await;
    assert_eq!(restore.status, 202, "{}", restore.body);
    let operation = ended(&up, restore.json()["operation"]["id"].as_str().expect("id")).await;
    // The rows moved and the state before was kept: the restore happened, so it says so. The branch's store
    // starts with its next session.
    assert_eq!(operation["status"], "finished", "{operation}");
    assert_eq!(table_ids(&uri).await, (0..5).collect::<Vec<_>>());
    let branches = up
        .call("GET", &format!("/v1/databases/{database_id}/branches"), None)
        .await
        .json();
    let kept: Vec<&Value> = branches["branches"]
        .as_array()
        .expect("branches")
        .iter()
        .filter(|b| {
            b["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("main_before_restore_"))
        })
        .collect();
    assert_eq!(kept.len(), 1, "{branches}");
    assert_eq!(table_ids(&up.uri(kept[0])).await, (0..10).collect::<Vec<_>>());
}
