//! Restore and branch at the edges of a database's time (issue 13), over HTTP against a real `cambium up`: a
//! moment after the database was created but before its first SQL commit is its initial state (the start LSN of
//! its first timeline), for a restore and for a branch, before and after the database has commits; a moment before
//! it was created, or in the future (up to `9999-12-31T23:59:59Z`, valid RFC 3339), is 422 with a message a person
//! reads: RFC 3339 times, no Rust debug text (`Some(…)`, `None`) and no raw microseconds.

mod common;

use std::time::Duration;

use common::api::{connect, insert_ids, table_ids, Reply, Up};
use serde_json::Value;

/// Where a database's first timeline starts (`ROOT_START_LSN`), as the API prints LSNs.
const FIRST_LSN: &str = "0/1000000";

fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// Asserts a 422 whose message is for people; the message.
fn assert_human_422(reply: &Reply, what: &str) -> String {
    reply.assert_error(422, "unprocessable");
    let message = text(&reply.json()["error"], "message");
    for debug in ["Some(", "None", "µs", "Timestamp("] {
        assert!(!message.contains(debug), "{what}: {message:?} has {debug:?}");
    }
    // No run of 13 or more digits: a raw microsecond (or millisecond) count.
    let longest_digits = message
        .split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(longest_digits < 13, "{what}: {message:?} has a raw number");
    message
}

/// Waits for a restore of `branch` to `body` to be accepted and to finish.
async fn restore(up: &Up, branch: &str, body: &str) {
    let reply = up
        .call("POST", &format!("/v1/branches/{branch}/restore"), Some(body))
        .await;
    assert_eq!(reply.status, 202, "{body}: {}", reply.body);
    let operation = text(&reply.json()["operation"], "id");
    let ended = up.wait_operation(&operation).await;
    assert_eq!(ended["status"], "finished", "{body}: {ended}");
}

/// Creates a branch with `body`; the branch.
async fn branch(up: &Up, database: &str, body: &str) -> Value {
    let reply = up
        .call("POST", &format!("/v1/databases/{database}/branches"), Some(body))
        .await;
    assert_eq!(reply.status, 201, "{body}: {}", reply.body);
    reply.json()["branch"].clone()
}

/// Whether table `t` exists on `uri`.
async fn has_table(uri: &str) -> bool {
    let client = connect(uri).await.expect("connect");
    let rows = client
        .query("SELECT name FROM sqlite_master WHERE name = 't'", &[])
        .await
        .expect("query the schema");
    !rows.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_after_creation_and_before_the_first_commit_is_the_initial_state() {
    let up = Up::start();
    let project = up.create_project("p").await;
    let database = up.create_database(&project, "fresh").await;
    let id = text(&database, "id");
    let main = text(&database, "default_branch_id");
    let uri = up.uri(&database);
    let created: jiff::Timestamp = text(&database, "created_at").parse().expect("created_at");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before_any_commit = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_millis(50)).await;

    // No commit yet: a branch and a restore at a time since the creation are the initial state.
    let early = branch(
        &up,
        &id,
        &format!(r#"{{"name":"early","parent_timestamp":"{before_any_commit}"}}"#),
    )
    .await;
    assert_eq!(early["parent_lsn"], FIRST_LSN, "{early}");
    restore(&up, &main, &format!(r#"{{"target_timestamp":"{before_any_commit}"}}"#)).await;
    assert!(!has_table(&uri).await);

    // Commits, then the same moment again: still the initial state, on both sides of the first commit.
    connect(&uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .await
        .expect("create table");
    insert_ids(&uri, 0..3).await;
    let early_again = branch(
        &up,
        &id,
        &format!(r#"{{"name":"early_again","parent_timestamp":"{before_any_commit}"}}"#),
    )
    .await;
    assert_eq!(early_again["parent_lsn"], FIRST_LSN, "{early_again}");
    assert!(!has_table(&up.uri(&early_again)).await);
    let now = branch(
        &up,
        &id,
        &format!(r#"{{"name":"now","parent_timestamp":"{}"}}"#, jiff::Timestamp::now()),
    )
    .await;
    assert_eq!(table_ids(&up.uri(&now)).await, vec![0, 1, 2]);
    restore(
        &up,
        &main,
        &format!(r#"{{"target_timestamp":"{before_any_commit}","preserve":false}}"#),
    )
    .await;
    assert!(!has_table(&uri).await);

    // Before the creation: 422, saying when the database was created (RFC 3339).
    let before_creation = created - jiff::SignedDuration::from_secs(1);
    for body in [
        format!(r#"{{"name":"x","parent_timestamp":"{before_creation}"}}"#),
        r#"{"name":"x","parent_timestamp":"1900-01-01T00:00:00Z"}"#.to_owned(),
        r#"{"name":"x","parent_timestamp":"1970-01-01T00:00:00Z"}"#.to_owned(),
    ] {
        let reply = up
            .call("POST", &format!("/v1/databases/{id}/branches"), Some(&body))
            .await;
        let message = assert_human_422(&reply, &body);
        assert!(message.contains("before database"), "{message}");
        assert!(message.contains(&created.to_string()), "{message} names {created}");
    }
    let reply = up
        .call(
            "POST",
            &format!("/v1/branches/{main}/restore"),
            Some(&format!(r#"{{"target_timestamp":"{before_creation}"}}"#)),
        )
        .await;
    assert!(assert_human_422(&reply, "restore before creation").contains("before database"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_times_up_to_the_last_rfc_3339_second_are_422_in_the_future() {
    let up = Up::start();
    let project = up.create_project("p").await;
    let database = up.create_database(&project, "d").await;
    let id = text(&database, "id");
    let main = text(&database, "default_branch_id");
    let in_an_hour = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    for time in [
        in_an_hour.to_string(),
        "9999-12-30T00:00:00Z".to_owned(),
        "9999-12-31T23:59:59Z".to_owned(),
        "9999-12-31T23:59:59.999999999+00:00".to_owned(),
    ] {
        let restore = up
            .call(
                "POST",
                &format!("/v1/branches/{main}/restore"),
                Some(&format!(r#"{{"target_timestamp":"{time}"}}"#)),
            )
            .await;
        let message = assert_human_422(&restore, &time);
        assert!(message.contains("is in the future"), "{message}");
        assert!(message.starts_with(&time[..10]), "{message} names {time}");
        let branch = up
            .call(
                "POST",
                &format!("/v1/databases/{id}/branches"),
                Some(&format!(r#"{{"name":"x","parent_timestamp":"{time}"}}"#)),
            )
            .await;
        assert!(assert_human_422(&branch, &time).contains("is in the future"));
    }
    // Not a time at all is still 400.
    for time in ["9999-12-32T00:00:00Z", "10000-01-01T00:00:00Z", "9999-12-31"] {
        up.call(
            "POST",
            &format!("/v1/branches/{main}/restore"),
            Some(&format!(r#"{{"target_timestamp":"{time}"}}"#)),
        )
        .await
        .assert_error(400, "invalid_request");
    }
    // An LSN ahead of the branch is 422 the same way.
    let ahead = up
        .call(
            "POST",
            &format!("/v1/branches/{main}/restore"),
            Some(r#"{"target_lsn":"FF/0"}"#),
        )
        .await;
    assert!(assert_human_422(&ahead, "LSN ahead").contains("ahead of the branch"));
}
