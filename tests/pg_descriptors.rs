//! Issue 13, finding 5: file descriptors are a budgeted resource. `cambium up` with a small open-files limit
//! (`--max-open-files`): PostgreSQL connections past the budget are refused with FATAL 53300 naming the cause,
//! while the process keeps a reserve, so the sessions already open, the API and new connections once others
//! closed all go on working; new branches are refused with 503 while descriptors are short (before, the process ran out and neither the API nor PostgreSQL accepted anyone).
//! And sessions are budgeted per database and per account: one database, or one account across its databases,
//! cannot take every connection of the listener; the others still connect.

mod common;

use common::api::{connect, Up};
use tokio_postgres::error::SqlState;

/// Connections tried at most: the budget runs out well before.
const ATTEMPTS_MAX: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_descriptor_budget_are_refused_and_the_service_goes_on() {
    let up = Up::start_with(&["--max-open-files", "500"]);
    let project = up.create_project("fds").await;
    let database = up.create_database(&project, "fds").await;
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();
    let first = connect(&uri).await.expect("the first session");
    first
        .batch_execute("CREATE TABLE t (x BIGINT); INSERT INTO t VALUES (1)")
        .await
        .expect("write");

    let mut sessions = Vec::new();
    let refusal = loop {
        assert!(
            sessions.len() < ATTEMPTS_MAX,
            "{ATTEMPTS_MAX} sessions open under a 500-descriptor limit: nothing is budgeted"
        );
        match connect(&uri).await {
            Ok(client) => sessions.push(client),
            Err(error) => break error,
        }
    };
    let db_error = refusal
        .as_db_error()
        .unwrap_or_else(|| panic!("a server error, not {refusal:?}"));
    assert_eq!(db_error.code(), &SqlState::TOO_MANY_CONNECTIONS, "{refusal:?}");
    assert!(
        db_error.message().contains("file descriptors"),
        "{}",
        db_error.message()
    );
    eprintln!("{} sessions opened before: {}", sessions.len() + 1, db_error.message());
    assert!(
        sessions.len() >= 10,
        "the budget should allow a few sessions: {}",
        sessions.len()
    );

    // The reserve kept the rest working: open sessions, the API.
    let count: i64 = first
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("read")
        .get(0);
    assert_eq!(count, 1);
    sessions
        .last()
        .expect("a session")
        .execute("INSERT INTO t VALUES (2)", &[])
        .await
        .expect("write on an open session");
    let reply = up.call("GET", "/v1/projects", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // New branches are refused as cleanly, before anything is made.
    let database_id = database["id"].as_str().expect("id").to_owned();
    let refused = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"while_full"}"#),
        )
        .await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.body.contains("file descriptors"), "{}", refused.body);

    // Sessions closed, new ones are accepted again.
    sessions.truncate(sessions.len() / 2);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let again = connect(&uri).await.expect("a session once others closed");
    let count: i64 = again
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("read")
        .get(0);
    assert_eq!(count, 2);
    let created = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"with_room"}"#),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
}

/// One database cannot take every connection of the host: past `--pg-connections-per-database-max` its
/// sessions are refused with FATAL 53300, while another database still connects; a closed session makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_database_cannot_take_every_connection() {
    let up = Up::start_with(&["--pg-connections-per-database-max", "3"]);
    let project = up.create_project("limits").await;
    let busy = up.create_database(&project, "busy").await;
    let other = up.create_database(&project, "other").await;
    let busy_uri = busy["connection_uri"].as_str().expect("uri").to_owned();
    let other_uri = other["connection_uri"].as_str().expect("uri").to_owned();
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(connect(&busy_uri).await.expect("a session under the limit"));
    }
    let refused = connect(&busy_uri).await.expect_err("the fourth session");
    let db_error = refused
        .as_db_error()
        .unwrap_or_else(|| panic!("a server error, not {refused:?}"));
    assert_eq!(db_error.code(), &SqlState::TOO_MANY_CONNECTIONS, "{refused:?}");
    assert!(
        db_error.message().contains("too many connections for database"),
        "{}",
        db_error.message()
    );
    let elsewhere = connect(&other_uri).await.expect("another database still connects");
    elsewhere.query_one("SELECT 1", &[]).await.expect("query");
    drop(sessions.pop());
    // The server sees the close when the connection ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match connect(&busy_uri).await {
            Ok(client) => {
                client.query_one("SELECT 1", &[]).await.expect("query");
                break;
            }
            Err(error) if std::time::Instant::now() < deadline => {
                assert_eq!(
                    error.as_db_error().map(|e| e.code()),
                    Some(&SqlState::TOO_MANY_CONNECTIONS)
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(error) => panic!("no room after a session closed: {error:?}"),
        }
    }
}

/// A database of the account behind `key` (another account than the admin's), created and active; its
/// connection string with the password.
async fn database_of(up: &Up, key: &str, name: &str) -> String {
    let project = up
        .request(
            "POST",
            "/v1/projects",
            Some(key),
            Some(&format!(r#"{{"name":"{name}"}}"#)),
        )
        .await;
    assert_eq!(project.status, 201, "{}", project.body);
    let project = project.json()["project"]["id"].as_str().expect("id").to_owned();
    let created = up
        .request(
            "POST",
            &format!("/v1/projects/{project}/databases"),
            Some(key),
            Some(&format!(r#"{{"name":"{name}"}}"#)),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let operation = created.json()["operation"]["id"].as_str().expect("id").to_owned();
    for _ in 0..6 {
        let polled = up
            .request("GET", &format!("/v1/operations/{operation}?wait=10s"), Some(key), None)
            .await;
        assert_eq!(polled.status, 200, "{}", polled.body);
        match polled.json()["operation"]["status"].as_str() {
            Some("running") => continue,
            Some("finished") => {
                return created.json()["database"]["connection_uri"]
                    .as_str()
                    .expect("uri")
                    .to_owned()
            }
            other => panic!("the creation ended {other:?}: {}", polled.body),
        }
    }
    panic!("database {name} still provisioning after a minute");
}

/// One account cannot take every connection of the host: past `--pg-connections-per-account-max` the sessions
/// of all its databases together are refused with FATAL 53300 naming the per-account limit, before the session
/// opens, while another account's database still connects; a closed session makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_account_cannot_take_every_connection() {
    let up = Up::start_with(&[
        "--pg-connections-per-account-max",
        "4",
        "--pg-connections-per-database-max",
        "3",
    ]);
    let project = up.create_project("greedy").await;
    let first = up.create_database(&project, "first").await;
    let second = up.create_database(&project, "second").await;
    let first_uri = first["connection_uri"].as_str().expect("uri").to_owned();
    let second_uri = second["connection_uri"].as_str().expect("uri").to_owned();
    let other_key = up.keys(&["create", "--new-account"]).trim().to_owned();
    let other_uri = database_of(&up, &other_key, "other").await;

    // Three on the first database (its own cap), one on the second: the account's four.
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(connect(&first_uri).await.expect("a session under both limits"));
    }
    sessions.push(connect(&second_uri).await.expect("the account's fourth session"));
    let refused = connect(&second_uri).await.expect_err("the account's fifth session");
    let db_error = refused
        .as_db_error()
        .unwrap_or_else(|| panic!("a server error, not {refused:?}"));
    assert_eq!(db_error.code(), &SqlState::TOO_MANY_CONNECTIONS, "{refused:?}");
    assert!(
        db_error.message().contains("per account") && db_error.message().contains("at most 4"),
        "the message names the per-account limit: {}",
        db_error.message()
    );
    // The database's own cap still speaks for itself.
    let refused = connect(&first_uri)
        .await
        .expect_err("a fourth session on the first database");
    assert_eq!(
        refused.as_db_error().map(|e| e.code()),
        Some(&SqlState::TOO_MANY_CONNECTIONS),
        "{refused:?}"
    );

    // Another account is not starved: its database takes as many sessions as a database may.
    let mut others = Vec::new();
    for _ in 0..3 {
        let client = connect(&other_uri).await.expect("another account still connects");
        client.query_one("SELECT 1", &[]).await.expect("query");
        others.push(client);
    }
    for session in &sessions {
        session.query_one("SELECT 1", &[]).await.expect("open sessions go on");
    }

    // A closed session of the account makes room on any of its databases; refused ones took none.
    drop(sessions.pop());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match connect(&second_uri).await {
            Ok(client) => {
                client.query_one("SELECT 1", &[]).await.expect("query");
                break;
            }
            Err(error) if std::time::Instant::now() < deadline => {
                assert_eq!(
                    error.as_db_error().map(|e| e.code()),
                    Some(&SqlState::TOO_MANY_CONNECTIONS)
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(error) => panic!("no room after a session closed: {error:?}"),
        }
    }
}
