//! Issue 13, finding 5: file descriptors are a budgeted resource. `cambium up` with a small open-files limit
//! (`--max-open-files`): PostgreSQL connections past the budget are refused with FATAL 53300 naming the cause,
//! while the process keeps a reserve, so the sessions already open, the API and new connections once others
//! closed all go on working; new branches are refused with 503 while descriptors are short (before, the process ran out and neither the API nor PostgreSQL accepted anyone).

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
