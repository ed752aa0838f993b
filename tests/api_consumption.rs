//! Consumption (issue 15) against a real `cambium up`: writes over SQL show as WAL written and logical size on the
//! branch, the compute's running time as compute seconds, summed per database and project over a time range; the
//! numbers survive a kill -9; a range with nothing in it is zeros; bad ranges are 400.

mod common;

use std::time::Duration;

use common::api::{connect, Up};
use serde_json::Value;

/// Inserts `rows` rows of about 1 KiB into `t` of `uri`.
async fn write(uri: &str, first: i64, rows: i64) {
    let client = connect(uri).await.expect("connect");
    let padding = "x".repeat(1_000);
    for chunk in (first..first + rows).collect::<Vec<_>>().chunks(50) {
        let values: Vec<String> = chunk.iter().map(|id| format!("({id}, '{padding}')")).collect();
        client
            .batch_execute(&format!("INSERT INTO t (id, pad) VALUES {}", values.join(", ")))
            .await
            .expect("insert");
    }
}

/// The project's consumption with `query` (`?from=…&to=…` or empty).
async fn consumption(up: &Up, project: &str, query: &str) -> Value {
    let reply = up
        .call("GET", &format!("/v1/projects/{project}/consumption{query}"), None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["consumption"].clone()
}

fn number(value: &Value, field: &str) -> f64 {
    value[field]
        .as_f64()
        .unwrap_or_else(|| panic!("`{field}` is a number: {value}"))
}

/// Waits (bounded) until the project's consumption satisfies `done`; that consumption.
async fn wait_until(up: &Up, project: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = consumption(up, project, "").await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} within 30 s: {last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_and_compute_time_show_per_branch_database_and_project_and_survive_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &["--consumption-period-ms", "300"]);
    let project = up.create_project("metered").await;
    let database = up.create_database(&project, "shop").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let main = database["default_branch_id"].as_str().expect("main").to_owned();
    let uri = up.uri(&database);
    connect(&uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, pad TEXT NOT NULL)")
        .await
        .expect("create table");
    write(&uri, 0, 500).await;

    let first = wait_until(&up, &project, "500 KiB written and measured", |c| {
        number(c, "written_bytes") >= 400_000.0 && number(c, "storage_bytes") >= 400_000.0
    })
    .await;
    assert!(
        number(&first, "compute_active_seconds") > 0.0,
        "the compute ran: {first}"
    );
    let databases = first["databases"].as_array().expect("databases");
    assert_eq!(databases.len(), 1, "{first}");
    assert_eq!(databases[0]["database_id"], database_id.as_str());
    let branch = databases[0]["branches"]
        .as_array()
        .expect("branches")
        .iter()
        .find(|b| b["branch_id"] == main.as_str())
        .expect("the default branch is measured")
        .clone();
    assert_eq!(
        number(&branch, "written_bytes"),
        number(&first, "written_bytes"),
        "{first}"
    );
    assert!(number(&branch, "logical_size_bytes") >= 400_000.0, "{branch}");

    // More writes: more WAL written, a larger size.
    let before = number(&first, "written_bytes");
    write(&uri, 500, 500).await;
    let second = wait_until(&up, &project, "the second 500 KiB", |c| {
        number(c, "written_bytes") >= before + 400_000.0
    })
    .await;
    assert!(
        number(&second, "storage_bytes") > number(&first, "storage_bytes"),
        "{first} then {second}"
    );

    // A branch is measured too.
    let reply = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"dev"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let dev = reply.json()["branch"]["id"].as_str().expect("id").to_owned();
    wait_until(&up, &project, "the new branch measured", |c| {
        c["databases"][0]["branches"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["branch_id"] == dev.as_str()))
    })
    .await;

    // Durable: kill -9 and restart; what was measured is still there.
    let measured = number(&consumption(&up, &project, "").await, "written_bytes");
    up.process.kill9();
    up.process.restart();
    let after = consumption(&up, &project, "").await;
    assert!(
        number(&after, "written_bytes") >= measured,
        "{measured} before, {after} after"
    );

    // A range with nothing in it; bad ranges.
    let empty = consumption(&up, &project, "?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z").await;
    assert_eq!(number(&empty, "written_bytes"), 0.0, "{empty}");
    assert_eq!(empty["databases"], serde_json::json!([]), "{empty}");
    assert_eq!(empty["from"], "2000-01-01T00:00:00Z");
    for query in [
        "?from=yesterday",
        "?from=2000-01-02T00:00:00Z&to=2000-01-01T00:00:00Z",
        "?to=not-a-time",
    ] {
        up.call("GET", &format!("/v1/projects/{project}/consumption{query}"), None)
            .await
            .assert_error(400, "invalid_request");
    }
    up.call("GET", "/v1/projects/proj_01ARZ3NDEKTSV4RRFFQ69G5FAV/consumption", None)
        .await
        .assert_error(404, "not_found");
}
