//! The resources under a project, against a real `cambium up` (one per test) over HTTP and the PostgreSQL wire
//! protocol: databases and their endpoint view, suspend and resume, branches (from the latest state, an LSN or a
//! timestamp; rename, promote, delete with descendants), the rules a restore checks, and operations. Each test
//! asserts exact statuses and response shapes (wrapping keys, id prefixes, ISO UTC timestamps, `X/Y` LSNs) and,
//! where the API promises data, checks it through SQL.

mod common;

use common::api::{
    connect, insert_ids as insert, is_iso_utc, json_keys as keys, password_of, table_ids as rows, without_password,
    Reply, Up,
};
use serde_json::Value;

/// A well-formed branch id that names nothing.
const NO_BRANCH: &str = "br_01JD0000000000000000000000";

/// A request with the admin key; asserts the request id header.
async fn call(up: &Up, method: &str, path: &str, body: Option<&str>) -> Reply {
    let reply = up.call(method, path, body).await;
    assert!(
        reply.header("x-request-id").is_some_and(|id| id.starts_with("req_")),
        "{reply:?}"
    );
    reply
}

/// The string field `field` of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// The ids of a list body's `field`, in order.
fn ids(body: &Value, field: &str) -> Vec<String> {
    body[field]
        .as_array()
        .unwrap_or_else(|| panic!("`{field}` is a list: {body}"))
        .iter()
        .map(|item| text(item, "id"))
        .collect()
}

/// An `X/Y` hex LSN as a number.
fn lsn(text: &str) -> u64 {
    let (high, low) = text.split_once('/').unwrap_or_else(|| panic!("an LSN is X/Y: {text}"));
    let high = u64::from_str_radix(high, 16).unwrap_or_else(|_| panic!("hex: {text}"));
    let low = u64::from_str_radix(low, 16).unwrap_or_else(|_| panic!("hex: {text}"));
    assert!(low <= u64::from(u32::MAX), "{text}");
    (high << 32) | low
}

/// Asserts 204 with an empty body.
fn assert_no_content(reply: &Reply) {
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.body, "", "a 204 has no body");
}

/// Asserts a database's exact shape (`suspend_reason` only while it is suspended).
fn assert_database(database: &Value) {
    let mut expected = vec![
        "connection_uri",
        "created_at",
        "default_branch_id",
        "id",
        "labels",
        "name",
        "project_id",
        "region",
        "status",
        "suspend_timeout_seconds",
    ];
    if database["status"] == "suspended" {
        expected.push("suspend_reason");
        expected.sort_unstable();
    }
    assert_eq!(keys(database), expected, "{database}");
    assert!(text(database, "id").starts_with("db_"), "{database}");
    assert!(text(database, "project_id").starts_with("proj_"), "{database}");
    assert!(text(database, "default_branch_id").starts_with("br_"), "{database}");
    assert!(
        text(database, "connection_uri").starts_with("postgresql://"),
        "{database}"
    );
    assert!(
        text(database, "connection_uri").contains(&format!("/{}?", text(database, "id"))),
        "the database id names it: {database}"
    );
    assert!(is_iso_utc(&text(database, "created_at")), "{database}");
}

/// Asserts a branch's exact shape: a forked one has `parent_branch_id` and `parent_lsn`, a first one neither.
fn assert_branch(branch: &Value, forked: bool) {
    let mut expected = vec![
        "connection_uri",
        "created_at",
        "database_id",
        "id",
        "is_default",
        "labels",
        "name",
        "protected",
    ];
    if forked {
        expected.extend(["parent_branch_id", "parent_lsn"]);
        expected.sort_unstable();
        assert!(text(branch, "parent_branch_id").starts_with("br_"), "{branch}");
        lsn(&text(branch, "parent_lsn"));
    }
    assert_eq!(keys(branch), expected, "{branch}");
    assert!(text(branch, "id").starts_with("br_"), "{branch}");
    assert!(text(branch, "database_id").starts_with("db_"), "{branch}");
    assert!(branch["is_default"].is_boolean(), "{branch}");
    assert_eq!(branch["protected"], false, "{branch}");
    assert!(
        text(branch, "connection_uri").contains(&format!("/{}?", text(branch, "id"))),
        "the branch id names it: {branch}"
    );
    assert_eq!(
        password_of(&text(branch, "connection_uri")),
        None,
        "no password: {branch}"
    );
    assert!(is_iso_utc(&text(branch, "created_at")), "{branch}");
}

/// Asserts an operation's exact shape (as list and get show it); both actions name a branch (a created
/// database's is its default branch).
fn assert_operation(operation: &Value, action: &str) {
    assert_eq!(
        keys(operation),
        [
            "action",
            "branch_id",
            "created_at",
            "database_id",
            "id",
            "project_id",
            "status",
            "updated_at"
        ],
        "{operation}"
    );
    assert!(text(operation, "branch_id").starts_with("br_"), "{operation}");
    assert!(text(operation, "database_id").starts_with("db_"), "{operation}");
    assert!(text(operation, "id").starts_with("op_"), "{operation}");
    assert!(text(operation, "project_id").starts_with("proj_"), "{operation}");
    assert_eq!(operation["action"], action, "{operation}");
    assert!(is_iso_utc(&text(operation, "created_at")), "{operation}");
    assert!(is_iso_utc(&text(operation, "updated_at")), "{operation}");
}

/// A project with an active database holding `t` with rows `0..n`; the project id and the database.
async fn database_with_rows(up: &Up, n: i64) -> (String, Value) {
    let project = up.create_project("p").await;
    let database = up.create_database(&project, "shop").await;
    let uri = up.uri(&database);
    connect(&uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .await
        .expect("create table");
    insert(&uri, 0..n).await;
    (project, database)
}

/// Creates a branch of `database_id` with `body`; the branch (asserting 201 and its shape).
async fn create_branch(up: &Up, database_id: &str, body: &str) -> Value {
    let reply = call(up, "POST", &format!("/v1/databases/{database_id}/branches"), Some(body)).await;
    assert_eq!(reply.status, 201, "{body}: {}", reply.body);
    let body = reply.json();
    assert_eq!(keys(&body), ["branch"], "{body}");
    let branch = body["branch"].clone();
    assert_branch(&branch, true);
    assert_eq!(branch["is_default"], false, "{branch}");
    assert_eq!(branch["database_id"], database_id, "{branch}");
    branch
}

/// The database `id`, asserting 200 and its shape.
async fn get_database(up: &Up, id: &str) -> Value {
    let reply = call(up, "GET", &format!("/v1/databases/{id}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(keys(&body), ["database"], "{body}");
    assert_database(&body["database"]);
    body["database"].clone()
}

/// The branches of database `id`, oldest first.
async fn branches(up: &Up, id: &str) -> Vec<Value> {
    let reply = call(up, "GET", &format!("/v1/databases/{id}/branches"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(keys(&body), ["branches", "next_cursor"], "{body}");
    assert_eq!(body["next_cursor"], Value::Null);
    body["branches"].as_array().expect("branches").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_are_created_listed_renamed_and_deleted() {
    let up = Up::start();
    let project = up.create_project("p").await;
    let reply = call(
        &up,
        "POST",
        &format!("/v1/projects/{project}/databases"),
        Some(r#"{"name":"shop"}"#),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let created = reply.json();
    assert_eq!(keys(&created), ["database", "operation"], "{created}");
    let database = created["database"].clone();
    assert_database(&database);
    assert_eq!(database["name"], "shop");
    assert_eq!(database["project_id"], project.as_str());
    assert_eq!(database["region"], "local");
    assert!(
        ["provisioning", "active"].contains(&database["status"].as_str().unwrap_or("")),
        "{database}"
    );
    let operation = created["operation"].clone();
    assert_operation(&operation, "create_database");
    assert_eq!(operation["status"], "running", "{operation}");
    assert_eq!(operation["database_id"], database["id"]);
    assert_eq!(operation["project_id"], project.as_str());
    let database_id = text(&database, "id");
    // The creation is the one response with the password.
    let created_uri = text(&database, "connection_uri");
    assert!(password_of(&created_uri).is_some(), "{created_uri}");
    up.remember_password(&database_id, &created_uri);

    let reply = call(
        &up,
        "GET",
        &format!("/v1/operations/{}?wait=10s", text(&operation, "id")),
        None,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(keys(&body), ["operation"], "{body}");
    assert_operation(&body["operation"], "create_database");
    assert_eq!(body["operation"]["status"], "finished", "{body}");
    assert_eq!(body["operation"]["id"], operation["id"]);
    let active = get_database(&up, &database_id).await;
    assert_eq!(active["status"], "active");
    for field in ["id", "name", "project_id", "region", "default_branch_id", "created_at"] {
        assert_eq!(active[field], database[field], "{field}");
    }
    // Elsewhere, the same connection string without the password.
    assert_eq!(text(&active, "connection_uri"), without_password(&created_uri));
    // Its default branch is `main`.
    let main = branches(&up, &database_id).await;
    assert_eq!(main.len(), 1);
    assert_eq!(main[0]["name"], "main");
    assert_eq!(main[0]["id"], database["default_branch_id"]);

    // A second one, with the region spelled out; names are unique in a project, regions must exist.
    let second = up.create_database(&project, "other").await;
    let second_id = text(&second, "id");
    assert_ne!(second["connection_uri"], active["connection_uri"]);
    for (body, status, code) in [
        (r#"{"name":"shop"}"#, 409, "conflict"),
        (r#"{"name":"x","region":"mars-1"}"#, 400, "invalid_request"),
        (r#"{"name":"x","region":""}"#, 400, "invalid_request"),
    ] {
        call(&up, "POST", &format!("/v1/projects/{project}/databases"), Some(body))
            .await
            .assert_error(status, code);
    }
    let reply = call(
        &up,
        "POST",
        "/v1/projects/proj_01JD0000000000000000000000/databases",
        Some(r#"{"name":"x"}"#),
    )
    .await;
    reply.assert_error(404, "not_found");
    // The same name in another project is fine.
    let elsewhere = up.create_project("q").await;
    let same_name = up.create_database(&elsewhere, "shop").await;
    assert_eq!(same_name["name"], "shop");

    let reply = call(&up, "GET", &format!("/v1/projects/{project}/databases"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let list = reply.json();
    assert_eq!(keys(&list), ["databases", "next_cursor"], "{list}");
    assert_eq!(list["next_cursor"], Value::Null);
    assert_eq!(ids(&list, "databases"), [database_id.clone(), second_id.clone()]);
    assert_eq!(list["databases"][0], active);
    let page = call(&up, "GET", &format!("/v1/projects/{project}/databases?limit=1"), None)
        .await
        .json();
    assert_eq!(ids(&page, "databases"), std::slice::from_ref(&database_id));
    let cursor = text(&page, "next_cursor");
    let page = call(
        &up,
        "GET",
        &format!("/v1/projects/{project}/databases?limit=1&cursor={cursor}"),
        None,
    )
    .await
    .json();
    assert_eq!(ids(&page, "databases"), std::slice::from_ref(&second_id));
    assert_eq!(page["next_cursor"], Value::Null);
    call(&up, "GET", &format!("/v1/projects/{project}/databases?limit=0"), None)
        .await
        .assert_error(400, "invalid_request");

    // Rename; a taken name is a conflict.
    let reply = call(
        &up,
        "PATCH",
        &format!("/v1/databases/{database_id}"),
        Some(r#"{"name":"store"}"#),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let renamed = reply.json()["database"].clone();
    assert_database(&renamed);
    assert_eq!(renamed["name"], "store");
    assert_eq!(renamed["status"], "active");
    assert_eq!(get_database(&up, &database_id).await["name"], "store");
    call(
        &up,
        "PATCH",
        &format!("/v1/databases/{database_id}"),
        Some(r#"{"name":"other"}"#),
    )
    .await
    .assert_error(409, "conflict");
    let reply = call(&up, "PATCH", &format!("/v1/databases/{database_id}"), Some("{}")).await;
    assert_eq!(reply.json()["database"], renamed);
    // The old name is free again.
    let reused = up.create_database(&project, "shop").await;

    // Delete: 204, then it and its branches are gone.
    let main_id = text(&database, "default_branch_id");
    assert_no_content(&call(&up, "DELETE", &format!("/v1/databases/{database_id}"), None).await);
    for path in [
        format!("/v1/databases/{database_id}"),
        format!("/v1/databases/{database_id}/endpoints"),
        format!("/v1/databases/{database_id}/health"),
        format!("/v1/databases/{database_id}/branches"),
        format!("/v1/branches/{main_id}"),
    ] {
        call(&up, "GET", &path, None).await.assert_error(404, "not_found");
    }
    call(&up, "DELETE", &format!("/v1/databases/{database_id}"), None)
        .await
        .assert_error(404, "not_found");
    assert!(
        connect(&up.uri(&active)).await.is_err(),
        "a deleted database serves nothing"
    );
    let list = call(&up, "GET", &format!("/v1/projects/{project}/databases"), None)
        .await
        .json();
    assert_eq!(ids(&list, "databases"), [second_id, text(&reused, "id")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_refuses_sql_and_resume_serves_the_same_data() {
    let up = Up::start();
    let (_, database) = database_with_rows(&up, 5).await;
    let id = text(&database, "id");
    let uri = up.uri(&database);
    let dev = create_branch(&up, &id, r#"{"name":"dev"}"#).await;

    // The endpoint view: the database as a compute.
    let reply = call(&up, "GET", &format!("/v1/databases/{id}/endpoints"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(keys(&body), ["endpoints"], "{body}");
    let endpoints = body["endpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.len(), 1, "{body}");
    let endpoint = &endpoints[0];
    assert_eq!(
        keys(endpoint),
        [
            "connection_uri",
            "database_id",
            "host",
            "id",
            "port",
            "region",
            "status"
        ],
        "{endpoint}"
    );
    assert_eq!(endpoint["id"], id.as_str());
    assert_eq!(endpoint["database_id"], id.as_str());
    assert_eq!(endpoint["region"], database["region"]);
    assert_eq!(endpoint["status"], "active");
    assert_eq!(text(endpoint, "connection_uri"), without_password(&uri));
    let (host, port) = (
        text(endpoint, "host"),
        endpoint["port"].as_u64().expect("a numeric port"),
    );
    assert!(uri.contains(&format!("@{host}:{port}/")), "{uri} vs {endpoint}");

    for _ in 0..2 {
        let reply = call(&up, "POST", &format!("/v1/databases/{id}/suspend"), None).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let body = reply.json();
        assert_eq!(keys(&body), ["database"], "{body}");
        assert_database(&body["database"]);
        assert_eq!(body["database"]["id"], id.as_str());
        assert_eq!(body["database"]["status"], "suspended");
    }
    assert_eq!(get_database(&up, &id).await["status"], "suspended");
    let endpoints = call(&up, "GET", &format!("/v1/databases/{id}/endpoints"), None)
        .await
        .json();
    assert_eq!(endpoints["endpoints"][0]["status"], "suspended");
    // Every name of the database refuses sessions, saying why.
    for name_uri in [uri.clone(), up.uri(&dev)] {
        let refused = match connect(&name_uri).await {
            Err(error) => error,
            Ok(client) => client
                .query("SELECT id FROM t", &[])
                .await
                .expect_err("a suspended database serves no SQL"),
        };
        let message = format!(
            "{refused} {refused:?} {}",
            refused.as_db_error().map(|e| e.message()).unwrap_or_default()
        );
        assert!(message.contains("suspended"), "{message}");
    }
    // Branching a suspended database works; the branch is refused like the rest.
    let while_suspended = create_branch(&up, &id, r#"{"name":"cold"}"#).await;
    let refused = connect(&up.uri(&while_suspended))
        .await
        .expect_err("a branch of a suspended database serves no SQL");
    let message = format!("{refused} {refused:?}");
    assert!(message.contains("not active"), "{message}");

    for _ in 0..2 {
        let reply = call(&up, "POST", &format!("/v1/databases/{id}/resume"), None).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let body = reply.json();
        assert_eq!(keys(&body), ["database"], "{body}");
        assert_eq!(body["database"]["status"], "active");
        assert_eq!(
            text(&body["database"], "connection_uri"),
            without_password(&uri),
            "the same connection string, without the password"
        );
    }
    assert_eq!(get_database(&up, &id).await["status"], "active");
    assert_eq!(rows(&uri).await, (0..5).collect::<Vec<_>>());
    assert_eq!(rows(&up.uri(&dev)).await, (0..5).collect::<Vec<_>>());
    assert_eq!(rows(&up.uri(&while_suspended)).await, (0..5).collect::<Vec<_>>());
    insert(&uri, 5..7).await;
    assert_eq!(rows(&uri).await, (0..7).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_fork_at_the_latest_state_an_lsn_or_a_timestamp() {
    let up = Up::start();
    let (_, database) = database_with_rows(&up, 5).await;
    let id = text(&database, "id");
    let uri = up.uri(&database);
    let main_id = text(&database, "default_branch_id");

    let first = create_branch(&up, &id, r#"{"name":"first"}"#).await;
    assert_eq!(first["name"], "first");
    assert_eq!(first["parent_branch_id"], main_id.as_str());
    let at_five = text(&first, "parent_lsn");
    assert_eq!(rows(&up.uri(&first)).await, (0..5).collect::<Vec<_>>());

    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let between = jiff::Timestamp::now();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    insert(&uri, 5..10).await;

    let latest = create_branch(&up, &id, r#"{"name":"latest"}"#).await;
    assert!(
        lsn(&text(&latest, "parent_lsn")) > lsn(&at_five),
        "{latest} vs {at_five}"
    );
    assert_eq!(rows(&up.uri(&latest)).await, (0..10).collect::<Vec<_>>());

    let at_lsn = create_branch(
        &up,
        &id,
        &format!(r#"{{"name":"at_lsn","parent_lsn":"{at_five}","parent_branch_id":"{main_id}"}}"#),
    )
    .await;
    assert_eq!(at_lsn["parent_lsn"], at_five.as_str());
    assert_eq!(at_lsn["parent_branch_id"], main_id.as_str());
    assert_eq!(rows(&up.uri(&at_lsn)).await, (0..5).collect::<Vec<_>>());

    let at_time = create_branch(
        &up,
        &id,
        &format!(r#"{{"name":"at_time","parent_timestamp":"{between}"}}"#),
    )
    .await;
    assert!(
        lsn(&text(&at_time, "parent_lsn")) <= lsn(&text(&latest, "parent_lsn")),
        "{at_time}"
    );
    assert_eq!(rows(&up.uri(&at_time)).await, (0..5).collect::<Vec<_>>());

    // A branch of a branch; writes on either side stay there.
    insert(&up.uri(&first), 100..102).await;
    let grandchild = create_branch(
        &up,
        &id,
        &format!(r#"{{"name":"grandchild","parent_branch_id":"{}"}}"#, text(&first, "id")),
    )
    .await;
    assert_eq!(grandchild["parent_branch_id"], first["id"]);
    assert_eq!(
        rows(&up.uri(&grandchild)).await,
        (0..5).chain(100..102).collect::<Vec<_>>()
    );
    assert_eq!(rows(&uri).await, (0..10).collect::<Vec<_>>());

    // Refusals.
    let path = format!("/v1/databases/{id}/branches");
    let future = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    for (body, status, code) in [
        (
            format!(r#"{{"name":"x","parent_lsn":"{at_five}","parent_timestamp":"{between}"}}"#),
            400,
            "invalid_request",
        ),
        (r#"{"name":"x","parent_lsn":"nope"}"#.to_owned(), 400, "invalid_request"),
        (
            r#"{"name":"x","parent_lsn":"1/2/3"}"#.to_owned(),
            400,
            "invalid_request",
        ),
        (r#"{"name":"x","parent_lsn":""}"#.to_owned(), 400, "invalid_request"),
        (
            r#"{"name":"x","parent_lsn":"0/XYZ"}"#.to_owned(),
            400,
            "invalid_request",
        ),
        (
            r#"{"name":"x","parent_timestamp":"yesterday"}"#.to_owned(),
            400,
            "invalid_request",
        ),
        (r#"{"name":"x","parent_lsn":"FF/0"}"#.to_owned(), 422, "unprocessable"),
        (r#"{"name":"x","parent_lsn":"0/0"}"#.to_owned(), 422, "unprocessable"),
        (
            format!(r#"{{"name":"x","parent_timestamp":"{future}"}}"#),
            422,
            "unprocessable",
        ),
        // The handler answers an unknown parent 422: the database exists, the body names no branch of it.
        (
            format!(r#"{{"name":"x","parent_branch_id":"{NO_BRANCH}"}}"#),
            422,
            "unprocessable",
        ),
        (
            r#"{"name":"x","parent_branch_id":"nope"}"#.to_owned(),
            422,
            "unprocessable",
        ),
        (r#"{"name":"first"}"#.to_owned(), 409, "conflict"),
        (r#"{"name":"main"}"#.to_owned(), 409, "conflict"),
    ] {
        let reply = call(&up, "POST", &path, Some(&body)).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
        reply.assert_error(status, code);
    }
    // A parent from another database is not a parent here.
    let project = text(&database, "project_id");
    let other = up.create_database(&project, "other").await;
    let reply = call(
        &up,
        "POST",
        &format!("/v1/databases/{}/branches", text(&other, "id")),
        Some(&format!(r#"{{"name":"x","parent_branch_id":"{main_id}"}}"#)),
    )
    .await;
    reply.assert_error(422, "unprocessable");
    call(
        &up,
        "POST",
        "/v1/databases/db_01JD0000000000000000000000/branches",
        Some(r#"{"name":"x"}"#),
    )
    .await
    .assert_error(404, "not_found");

    // The list: oldest first, the default branch without a parent, nothing the refusals made.
    let list = branches(&up, &id).await;
    let names: Vec<&str> = list.iter().map(|b| b["name"].as_str().unwrap_or("")).collect();
    assert_eq!(names, ["main", "first", "latest", "at_lsn", "at_time", "grandchild"]);
    assert_branch(&list[0], false);
    assert_eq!(list[0]["is_default"], true);
    assert_eq!(
        list[0]["connection_uri"].as_str().map(|u| u.contains(&main_id)),
        Some(true)
    );
    for branch in &list[1..] {
        assert_branch(branch, true);
        assert_eq!(branch["is_default"], false, "{branch}");
    }
    assert_eq!(list[1], first);
    let page = call(&up, "GET", &format!("/v1/databases/{id}/branches?limit=4"), None)
        .await
        .json();
    assert_eq!(page["branches"].as_array().map(Vec::len), Some(4));
    let cursor = text(&page, "next_cursor");
    let page = call(
        &up,
        "GET",
        &format!("/v1/databases/{id}/branches?limit=4&cursor={cursor}"),
        None,
    )
    .await
    .json();
    assert_eq!(ids(&page, "branches"), [text(&at_time, "id"), text(&grandchild, "id")]);
    assert_eq!(page["next_cursor"], Value::Null);

    // Get and rename.
    let reply = call(&up, "GET", &format!("/v1/branches/{}", text(&first, "id")), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(keys(&reply.json()), ["branch"]);
    assert_eq!(reply.json()["branch"], first);
    let reply = call(&up, "GET", &format!("/v1/branches/{main_id}"), None).await;
    assert_branch(&reply.json()["branch"], false);
    let reply = call(
        &up,
        "PATCH",
        &format!("/v1/branches/{}", text(&first, "id")),
        Some(r#"{"name":"renamed"}"#),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let renamed = reply.json()["branch"].clone();
    assert_branch(&renamed, true);
    assert_eq!(renamed["name"], "renamed");
    assert_eq!(renamed["is_default"], false);
    assert_eq!(
        renamed["connection_uri"], first["connection_uri"],
        "the same connection string"
    );
    call(
        &up,
        "PATCH",
        &format!("/v1/branches/{}", text(&first, "id")),
        Some(r#"{"name":"latest"}"#),
    )
    .await
    .assert_error(409, "conflict");
    let reply = call(
        &up,
        "PATCH",
        &format!("/v1/branches/{}", text(&first, "id")),
        Some("{}"),
    )
    .await;
    assert_eq!(reply.json()["branch"], renamed);
    // The old name is free again.
    create_branch(&up, &id, r#"{"name":"first"}"#).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promoting_a_branch_moves_the_default_and_the_database_connection() {
    let up = Up::start();
    let (_, database) = database_with_rows(&up, 3).await;
    let id = text(&database, "id");
    let uri = up.uri(&database);
    let main_id = text(&database, "default_branch_id");
    let dev = create_branch(&up, &id, r#"{"name":"dev"}"#).await;
    let dev_id = text(&dev, "id");
    insert(&up.uri(&dev), 100..102).await;
    assert_eq!(rows(&uri).await, (0..3).collect::<Vec<_>>());

    let reply = call(
        &up,
        "PATCH",
        &format!("/v1/branches/{dev_id}"),
        Some(r#"{"is_default":true}"#),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let promoted = reply.json()["branch"].clone();
    assert_branch(&promoted, true);
    assert_eq!(promoted["is_default"], true);
    assert_eq!(promoted["name"], "dev");
    // Promoting it again changes nothing.
    let reply = call(
        &up,
        "PATCH",
        &format!("/v1/branches/{dev_id}"),
        Some(r#"{"is_default":true}"#),
    )
    .await;
    assert_eq!(reply.json()["branch"], promoted);

    let list = branches(&up, &id).await;
    let defaults: Vec<&Value> = list.iter().filter(|b| b["is_default"] == true).collect();
    assert_eq!(defaults.len(), 1, "{list:?}");
    assert_eq!(defaults[0]["id"], dev_id.as_str());
    let database_after = get_database(&up, &id).await;
    assert_eq!(database_after["default_branch_id"], dev_id.as_str());
    assert_eq!(
        text(&database_after, "connection_uri"),
        without_password(&uri),
        "the same connection string"
    );
    assert_eq!(
        call(&up, "GET", &format!("/v1/branches/{main_id}"), None).await.json()["branch"]["is_default"],
        false
    );
    // The database's connection string now serves the promoted branch, writes included.
    assert_eq!(rows(&uri).await, (0..3).chain(100..102).collect::<Vec<_>>());
    insert(&uri, 200..201).await;
    assert_eq!(
        rows(&up.uri(&dev)).await,
        (0..3).chain(100..102).chain(200..201).collect::<Vec<_>>()
    );
    assert_eq!(rows(&up.uri(&list[0])).await, (0..3).collect::<Vec<_>>());

    // The default branch cannot be deleted or un-defaulted, nor can a branch whose subtree holds it.
    call(&up, "DELETE", &format!("/v1/branches/{dev_id}"), None)
        .await
        .assert_error(409, "conflict");
    call(&up, "DELETE", &format!("/v1/branches/{main_id}"), None)
        .await
        .assert_error(409, "conflict");
    call(
        &up,
        "PATCH",
        &format!("/v1/branches/{dev_id}"),
        Some(r#"{"is_default":false}"#),
    )
    .await
    .assert_error(422, "unprocessable");
    assert_eq!(branches(&up, &id).await.len(), 2);

    // Promote back: main serves the database again.
    let reply = call(
        &up,
        "PATCH",
        &format!("/v1/branches/{main_id}"),
        Some(r#"{"is_default":true}"#),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(get_database(&up, &id).await["default_branch_id"], main_id.as_str());
    assert_eq!(rows(&uri).await, (0..3).collect::<Vec<_>>());
    // Now dev is an ordinary branch and goes.
    assert_no_content(&call(&up, "DELETE", &format!("/v1/branches/{dev_id}"), None).await);
    assert_eq!(branches(&up, &id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_branch_deletes_its_descendants() {
    let up = Up::start();
    let (_, database) = database_with_rows(&up, 2).await;
    let id = text(&database, "id");
    let main_id = text(&database, "default_branch_id");
    let child = create_branch(&up, &id, r#"{"name":"child"}"#).await;
    let grandchild = create_branch(
        &up,
        &id,
        &format!(r#"{{"name":"grandchild","parent_branch_id":"{}"}}"#, text(&child, "id")),
    )
    .await;
    let great = create_branch(
        &up,
        &id,
        &format!(r#"{{"name":"great","parent_branch_id":"{}"}}"#, text(&grandchild, "id")),
    )
    .await;
    let sibling = create_branch(&up, &id, r#"{"name":"sibling"}"#).await;
    assert_eq!(rows(&up.uri(&great)).await, [0, 1]);

    assert_no_content(&call(&up, "DELETE", &format!("/v1/branches/{}", text(&child, "id")), None).await);
    for gone in [&child, &grandchild, &great] {
        let path = format!("/v1/branches/{}", text(gone, "id"));
        call(&up, "GET", &path, None).await.assert_error(404, "not_found");
        call(&up, "PATCH", &path, Some(r#"{"name":"ghost"}"#))
            .await
            .assert_error(404, "not_found");
        call(&up, "DELETE", &path, None).await.assert_error(404, "not_found");
        call(&up, "POST", &format!("{path}/restore"), Some(r#"{"target_lsn":"0/1"}"#))
            .await
            .assert_error(404, "not_found");
        assert!(connect(&up.uri(gone)).await.is_err(), "{gone}");
    }
    let list = branches(&up, &id).await;
    assert_eq!(
        ids(&serde_json::json!({ "b": list }), "b"),
        [main_id, text(&sibling, "id")]
    );
    assert_eq!(rows(&up.uri(&sibling)).await, [0, 1]);
    // Their names are free again.
    create_branch(&up, &id, r#"{"name":"grandchild"}"#).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_checks_its_target_and_runs_as_an_operation() {
    let up = Up::start();
    let (project, database) = database_with_rows(&up, 5).await;
    let id = text(&database, "id");
    let uri = up.uri(&database);
    let main_id = text(&database, "default_branch_id");
    let mark = create_branch(&up, &id, r#"{"name":"mark"}"#).await;
    let at_five = text(&mark, "parent_lsn");
    insert(&uri, 5..8).await;

    let path = format!("/v1/branches/{main_id}/restore");
    let now = jiff::Timestamp::now();
    let future = now + jiff::SignedDuration::from_hours(1);
    for (body, status, code) in [
        ("{}".to_owned(), 400, "invalid_request"),
        (r#"{"preserve":false}"#.to_owned(), 400, "invalid_request"),
        (
            format!(r#"{{"target_lsn":"{at_five}","target_timestamp":"{now}"}}"#),
            400,
            "invalid_request",
        ),
        (r#"{"target_lsn":"nope"}"#.to_owned(), 400, "invalid_request"),
        (r#"{"target_lsn":"1/2/3"}"#.to_owned(), 400, "invalid_request"),
        (r#"{"target_lsn":""}"#.to_owned(), 400, "invalid_request"),
        (
            r#"{"target_timestamp":"not a time"}"#.to_owned(),
            400,
            "invalid_request",
        ),
        (r#"{"target_lsn":"FF/0"}"#.to_owned(), 422, "unprocessable"),
        (r#"{"target_lsn":"0/0"}"#.to_owned(), 422, "unprocessable"),
        (format!(r#"{{"target_timestamp":"{future}"}}"#), 422, "unprocessable"),
    ] {
        let reply = call(&up, "POST", &path, Some(&body)).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
        reply.assert_error(status, code);
    }
    for unknown in [NO_BRANCH, "br_nope", &id] {
        call(
            &up,
            "POST",
            &format!("/v1/branches/{unknown}/restore"),
            Some(&format!(r#"{{"target_lsn":"{at_five}"}}"#)),
        )
        .await
        .assert_error(404, "not_found");
    }
    // None of the refusals started anything.
    let operations = call(&up, "GET", &format!("/v1/projects/{project}/operations"), None)
        .await
        .json();
    assert_eq!(
        operations["operations"].as_array().map(Vec::len),
        Some(1),
        "{operations}"
    );
    assert_eq!(rows(&uri).await, (0..8).collect::<Vec<_>>());

    let reply = call(&up, "POST", &path, Some(&format!(r#"{{"target_lsn":"{at_five}"}}"#))).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let body = reply.json();
    assert_eq!(keys(&body), ["operation"], "{body}");
    let operation = body["operation"].clone();
    assert!(text(&operation, "id").starts_with("op_"), "{operation}");
    assert_eq!(operation["action"], "restore_branch");
    assert_eq!(operation["status"], "running");
    assert_eq!(operation["branch_id"], main_id.as_str());
    let operation_id = text(&operation, "id");

    call(&up, "GET", &format!("/v1/operations/{operation_id}?wait=abc"), None)
        .await
        .assert_error(400, "invalid_request");
    call(&up, "GET", &format!("/v1/operations/{operation_id}?wait=-1s"), None)
        .await
        .assert_error(400, "invalid_request");
    // A wait past 60 s waits at most 60 s (the restore ends long before).
    let reply = call(&up, "GET", &format!("/v1/operations/{operation_id}?wait=600s"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(keys(&body), ["operation"], "{body}");
    let ended = body["operation"].clone();
    assert_operation(&ended, "restore_branch");
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(ended["id"], operation_id.as_str());
    assert_eq!(ended["database_id"], id.as_str());
    assert_eq!(ended["project_id"], project.as_str());
    // Without a wait, the same.
    let reply = call(&up, "GET", &format!("/v1/operations/{operation_id}"), None).await;
    assert_eq!(reply.json()["operation"], ended);
    call(&up, "GET", "/v1/operations/op_01JD0000000000000000000000?wait=1s", None)
        .await
        .assert_error(404, "not_found");

    // The data is as of the LSN, on the same connection string; the state before is kept as a branch.
    assert_eq!(rows(&uri).await, (0..5).collect::<Vec<_>>());
    let list = branches(&up, &id).await;
    assert_eq!(list.len(), 3, "main, mark and the preserved state: {list:?}");
    let preserved = list
        .iter()
        .find(|b| {
            b["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("main_before_restore_"))
        })
        .unwrap_or_else(|| panic!("a preserved branch: {list:?}"));
    assert_eq!(rows(&up.uri(preserved)).await, (0..8).collect::<Vec<_>>());
    let main = call(&up, "GET", &format!("/v1/branches/{main_id}"), None).await.json()["branch"].clone();
    assert_eq!(main["name"], "main");
    assert_eq!(main["is_default"], true);

    // A restore by timestamp, too.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let before_more = jiff::Timestamp::now();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    insert(&uri, 50..52).await;
    let reply = call(
        &up,
        "POST",
        &path,
        Some(&format!(r#"{{"target_timestamp":"{before_more}","preserve":false}}"#)),
    )
    .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let by_time = text(&reply.json()["operation"], "id");
    assert_eq!(up.wait_operation(&by_time).await["status"], "finished");
    assert_eq!(rows(&uri).await, (0..5).collect::<Vec<_>>());
    assert_eq!(branches(&up, &id).await.len(), 3, "preserve=false keeps no branch");

    // Operations: newest first, both actions, all ended.
    let reply = call(&up, "GET", &format!("/v1/projects/{project}/operations"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let list = reply.json();
    assert_eq!(keys(&list), ["next_cursor", "operations"], "{list}");
    assert_eq!(list["next_cursor"], Value::Null);
    let operations = list["operations"].as_array().expect("operations");
    let actions: Vec<&str> = operations.iter().map(|o| o["action"].as_str().unwrap_or("")).collect();
    assert_eq!(
        actions,
        ["restore_branch", "restore_branch", "create_database"],
        "{list}"
    );
    assert_eq!(operations[0]["id"], by_time.as_str());
    assert_eq!(operations[1]["id"], operation_id.as_str());
    for (operation, action) in operations.iter().zip(&actions) {
        assert_operation(operation, action);
        assert_eq!(operation["status"], "finished", "{operation}");
    }
    let created: Vec<String> = operations.iter().map(|o| text(o, "created_at")).collect();
    let parsed: Vec<jiff::Timestamp> = created.iter().map(|t| t.parse().expect("timestamp")).collect();
    assert!(parsed.windows(2).all(|w| w[0] >= w[1]), "newest first: {created:?}");
    // Paged, the order holds.
    let page = call(&up, "GET", &format!("/v1/projects/{project}/operations?limit=2"), None)
        .await
        .json();
    assert_eq!(ids(&page, "operations"), [by_time.clone(), operation_id.clone()]);
    let cursor = text(&page, "next_cursor");
    let page = call(
        &up,
        "GET",
        &format!("/v1/projects/{project}/operations?limit=2&cursor={cursor}"),
        None,
    )
    .await
    .json();
    assert_eq!(page["operations"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(page["operations"][0]["action"], "create_database");
    assert_eq!(page["next_cursor"], Value::Null);
    call(
        &up,
        "GET",
        &format!("/v1/projects/{project}/operations?cursor=no-pe"),
        None,
    )
    .await
    .assert_error(400, "invalid_request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_that_conflict_with_a_running_operation_are_409() {
    // Every operation waits this long before it runs, so it is reliably `running` in between.
    let up = Up::start_with(&["--operation-delay-ms", "1000"]);
    let project = up.create_project("p").await;
    let reply = call(
        &up,
        "POST",
        &format!("/v1/projects/{project}/databases"),
        Some(r#"{"name":"slow"}"#),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let database = reply.json()["database"].clone();
    let create = text(&reply.json()["operation"], "id");
    let id = text(&database, "id");
    let main_id = text(&database, "default_branch_id");

    // While it is being created.
    assert_eq!(get_database(&up, &id).await["status"], "provisioning");
    let reply = call(&up, "GET", &format!("/v1/operations/{create}?wait=100ms"), None).await;
    assert_eq!(
        reply.json()["operation"]["status"],
        "running",
        "a wait that passes answers the running one"
    );
    for (method, path, body) in [
        ("POST", format!("/v1/databases/{id}/suspend"), None),
        ("POST", format!("/v1/databases/{id}/resume"), None),
        ("DELETE", format!("/v1/databases/{id}"), None),
        ("DELETE", format!("/v1/projects/{project}"), None),
        (
            "POST",
            format!("/v1/branches/{main_id}/restore"),
            Some(r#"{"target_lsn":"0/1000000"}"#),
        ),
    ] {
        let reply = call(&up, method, &path, body).await;
        assert_eq!(reply.status, 409, "{method} {path}: {}", reply.body);
        reply.assert_error(409, "conflict");
    }
    let refused = connect(&up.uri(&database))
        .await
        .expect_err("a database being created serves no SQL");
    let message = format!("{refused} {refused:?}");
    assert!(message.contains("being created"), "{message}");

    assert_eq!(up.wait_operation(&create).await["status"], "finished");
    let uri = up.uri(&database);
    connect(&uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES (1)")
        .await
        .expect("write");
    let mark = create_branch(&up, &id, r#"{"name":"mark"}"#).await;
    insert(&uri, 2..3).await;

    // While a restore runs: a second restore, deletes and suspend wait their turn (409).
    let restore = format!(r#"{{"target_lsn":"{}"}}"#, text(&mark, "parent_lsn"));
    let reply = call(&up, "POST", &format!("/v1/branches/{main_id}/restore"), Some(&restore)).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let running = text(&reply.json()["operation"], "id");
    for (method, path, body) in [
        (
            "POST",
            format!("/v1/branches/{main_id}/restore"),
            Some(restore.as_str()),
        ),
        ("DELETE", format!("/v1/branches/{}", text(&mark, "id")), None),
        ("DELETE", format!("/v1/databases/{id}"), None),
        ("DELETE", format!("/v1/projects/{project}"), None),
    ] {
        let reply = call(&up, method, &path, body).await;
        assert_eq!(reply.status, 409, "{method} {path}: {}", reply.body);
        reply.assert_error(409, "conflict");
    }
    assert_eq!(up.wait_operation(&running).await["status"], "finished");
    assert_eq!(rows(&uri).await, [1]);
    let operations = call(&up, "GET", &format!("/v1/projects/{project}/operations"), None)
        .await
        .json();
    let actions: Vec<&str> = operations["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .map(|o| o["action"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        actions,
        ["restore_branch", "create_database"],
        "the refused restore left nothing"
    );
    // Once it ended, the same calls work.
    assert_no_content(&call(&up, "DELETE", &format!("/v1/projects/{project}"), None).await);
    call(&up, "GET", &format!("/v1/databases/{id}"), None)
        .await
        .assert_error(404, "not_found");
}
