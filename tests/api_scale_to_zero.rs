//! Scale to zero (issue 15 item 8) against a real `cambium up` over HTTP and SQL, with a 1 s
//! `suspend_timeout_seconds` set per database through the API: a database with no session for that long becomes
//! `suspended` with reason `idle` and a finished `suspend_database` operation; a connection to it (its own name or
//! a branch's) answers, and the database is `active` again with a `resume_database` operation. A suspension by
//! the API still refuses sessions with its reason until resumed, idle or not. The timeout defaults to 300, is
//! validated, 0 never suspends, and it is in `/v1/openapi.json`. An idle suspension survives a restart
//! (`kill -9`) and still wakes on connect. How fast a wake answers is measured by the `wake` bench, not here.

mod common;

use std::time::{Duration, Instant};

use common::api::{connect, insert_ids as insert, table_ids as rows, Up};
use serde_json::Value;

/// How long a status change may take here: the 1 s timeout, the sweep's period, and a slow shared machine.
const SETTLE: Duration = Duration::from_secs(20);

/// The string field `field` of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// Creates database `name` with `body` (a JSON object with at least its name) and waits for it to be active.
async fn create(up: &Up, project: &str, body: &str) -> Value {
    let reply = up
        .call("POST", &format!("/v1/projects/{project}/databases"), Some(body))
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let created = reply.json();
    let ended = up.wait_operation(&text(&created["operation"], "id")).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    let id = text(&created["database"], "id");
    up.remember_password(&id, &text(&created["database"], "connection_uri"));
    created["database"].clone()
}

/// Database `id` as the API shows it.
async fn database(up: &Up, id: &str) -> Value {
    let reply = up.call("GET", &format!("/v1/databases/{id}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["database"].clone()
}

/// Waits (at most [`SETTLE`]) until database `id` has `status`; the database.
async fn wait_status(up: &Up, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + SETTLE;
    loop {
        let now = database(up, id).await;
        if now["status"] == status {
            return now;
        }
        assert!(Instant::now() < deadline, "database {id} never became {status}: {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The operations of `project` on database `id` with `action`, newest first.
async fn operations(up: &Up, project: &str, id: &str, action: &str) -> Vec<Value> {
    let reply = up
        .call("GET", &format!("/v1/projects/{project}/operations?limit=500"), None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let listed = reply.json()["operations"].as_array().expect("operations").clone();
    listed
        .into_iter()
        .filter(|op| op["database_id"] == id && op["action"] == action)
        .collect()
}

/// Opens a session on `uri`, runs a query, and closes it: a session for the idle clock.
async fn session(uri: &str) -> Vec<i64> {
    rows(uri).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_database_is_suspended_and_a_connection_wakes_it() {
    let up = Up::start();
    let project = up.create_project("idle").await;
    let created = create(&up, &project, r#"{"name":"idle","suspend_timeout_seconds":1}"#).await;
    assert_eq!(created["suspend_timeout_seconds"], 1, "{created}");
    let id = text(&created, "id");
    let uri = up.uri(&created);
    {
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
            .await
            .expect("create table");
        // Open past the timeout: a database with a session open is never suspended.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        client.simple_query("SELECT 1").await.expect("still served");
        assert_eq!(database(&up, &id).await["status"], "active", "a session is open");
    }
    insert(&uri, 0..5).await;
    wait_status(&up, &id, "active").await;

    let suspended = wait_status(&up, &id, "suspended").await;
    assert_eq!(suspended["suspend_reason"], "idle", "{suspended}");
    let suspends = operations(&up, &project, &id, "suspend_database").await;
    assert!(!suspends.is_empty(), "a suspend_database operation");
    assert_eq!(suspends[0]["status"], "finished", "{}", suspends[0]);
    assert!(
        text(&suspends[0], "reason").contains("idle"),
        "the operation says it was idle: {}",
        suspends[0]
    );

    // A connection wakes it: the data is there at once.
    assert_eq!(session(&uri).await, (0..5).collect::<Vec<_>>());
    let woken = wait_status(&up, &id, "active").await;
    assert!(woken.get("suspend_reason").is_none(), "{woken}");
    let resumes = operations(&up, &project, &id, "resume_database").await;
    assert!(!resumes.is_empty(), "a resume_database operation");
    assert_eq!(resumes[0]["status"], "finished", "{}", resumes[0]);

    // Idle again, then woken through a branch made while it was suspended.
    wait_status(&up, &id, "suspended").await;
    let reply = up
        .call(
            "POST",
            &format!("/v1/databases/{id}/branches"),
            Some(r#"{"name":"preview"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let branch = reply.json()["branch"].clone();
    assert_eq!(session(&up.uri(&branch)).await, (0..5).collect::<Vec<_>>());
    wait_status(&up, &id, "active").await;
    insert(&uri, 5..7).await;
    assert_eq!(session(&uri).await, (0..7).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_by_the_api_still_refuses_sessions_until_resumed() {
    let up = Up::start();
    let project = up.create_project("api").await;
    let created = create(&up, &project, r#"{"name":"api","suspend_timeout_seconds":1}"#).await;
    let id = text(&created, "id");
    let uri = up.uri(&created);
    insert_table(&uri).await;

    // Suspended for idleness first, then by the API: the API's reason wins, and sessions are refused.
    wait_status(&up, &id, "suspended").await;
    let reply = up.call("POST", &format!("/v1/databases/{id}/suspend"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["database"]["suspend_reason"], "api", "{}", reply.body);
    for _ in 0..2 {
        let refused = connect(&uri)
            .await
            .expect_err("a database suspended by the API refuses sessions");
        let message = refused
            .as_db_error()
            .map(|e| e.message().to_owned())
            .unwrap_or_else(|| refused.to_string());
        assert!(message.contains("suspended"), "{message}");
        assert!(message.contains("resume"), "the refusal says how to connect: {message}");
        tokio::time::sleep(Duration::from_millis(1_500)).await;
    }
    let still = database(&up, &id).await;
    assert_eq!(still["status"], "suspended", "{still}");
    assert_eq!(still["suspend_reason"], "api", "connecting does not wake it: {still}");

    let reply = up.call("POST", &format!("/v1/databases/{id}/resume"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["database"]["status"], "active", "{}", reply.body);
    assert_eq!(session(&uri).await, Vec::<i64>::new());
}

/// Creates the table [`insert`] and [`rows`] use, with no rows.
async fn insert_table(uri: &str) {
    let client = connect(uri).await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'row')")
        .await
        .expect("create table");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeout_defaults_is_validated_and_zero_never_suspends() {
    let up = Up::start();
    let project = up.create_project("timeouts").await;
    let created = create(&up, &project, r#"{"name":"default"}"#).await;
    assert_eq!(created["suspend_timeout_seconds"], 300, "{created}");
    let id = text(&created, "id");
    for bad in [
        r#"{"suspend_timeout_seconds":604801}"#,
        r#"{"suspend_timeout_seconds":-1}"#,
        r#"{"suspend_timeout_seconds":1.5}"#,
        r#"{"suspend_timeout_seconds":"60"}"#,
        r#"{"suspend_timeout_seconds":4294967296}"#,
    ] {
        let reply = up.call("PATCH", &format!("/v1/databases/{id}"), Some(bad)).await;
        reply.assert_error(400, "invalid_request");
        let reply = up
            .call(
                "POST",
                &format!("/v1/projects/{project}/databases"),
                Some(&bad.replace('{', r#"{"name":"bad","#)),
            )
            .await;
        reply.assert_error(400, "invalid_request");
    }
    let reply = up
        .call(
            "PATCH",
            &format!("/v1/databases/{id}"),
            Some(r#"{"suspend_timeout_seconds":0}"#),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["database"]["suspend_timeout_seconds"], 0, "{}", reply.body);

    let openapi = up.call("GET", "/v1/openapi.json", None).await.json();
    for schema in ["CreateDatabase", "UpdateDatabase", "DatabaseView"] {
        let properties = &openapi["components"]["schemas"][schema]["properties"];
        assert!(
            properties.get("suspend_timeout_seconds").is_some(),
            "{schema} has suspend_timeout_seconds: {properties}"
        );
    }

    // 0: a session comes and goes, and the database stays active well past a short timeout.
    let uri = up.uri(&database(&up, &id).await);
    insert_table(&uri).await;
    // And a database whose timeout is set short through PATCH is suspended.
    let other = create(&up, &project, r#"{"name":"patched"}"#).await;
    let other_id = text(&other, "id");
    let reply = up
        .call(
            "PATCH",
            &format!("/v1/databases/{other_id}"),
            Some(r#"{"suspend_timeout_seconds":1}"#),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    wait_status(&up, &other_id, "suspended").await;
    let kept = database(&up, &id).await;
    assert_eq!(kept["status"], "active", "0 never suspends: {kept}");
    assert!(operations(&up, &project, &id, "suspend_database").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_suspension_survives_a_restart_and_still_wakes_on_connect() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &[]);
    let project = up.create_project("restart").await;
    let created = create(&up, &project, r#"{"name":"restart","suspend_timeout_seconds":1}"#).await;
    let id = text(&created, "id");
    let uri = up.uri(&created);
    insert_table(&uri).await;
    insert(&uri, 0..3).await;
    wait_status(&up, &id, "active").await;
    wait_status(&up, &id, "suspended").await;

    up.process.kill9();
    up.process.restart();

    let after = database(&up, &id).await;
    assert_eq!(after["status"], "suspended", "{after}");
    assert_eq!(after["suspend_reason"], "idle", "{after}");
    assert_eq!(
        session(&uri).await,
        vec![0, 1, 2],
        "a connection wakes it after the restart"
    );
    wait_status(&up, &id, "active").await;
    // And its idle clock runs again: suspended once more.
    wait_status(&up, &id, "suspended").await;
}
