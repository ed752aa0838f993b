//! The `/v1` HTTP surface as a client sees it, against a real `cambium up` (one per test): projects and their
//! pagination, keys and accounts, the error envelope on every kind of bad request, `Idempotency-Key`, the rate
//! limit, the OpenAPI document and request ids. Each test asserts exact statuses and response shapes (the seed's
//! wrapping keys, id prefixes, ISO UTC timestamps); the resources under a project are in `api_resources.rs`.

mod common;

use std::collections::BTreeSet;

use common::api::{is_iso_utc, json_keys as keys, request, Reply, Up};
use serde_json::Value;

/// A well-formed id of each kind that names nothing.
const NO_PROJECT: &str = "proj_01JD0000000000000000000000";
const NO_DATABASE: &str = "db_01JD0000000000000000000000";
const NO_BRANCH: &str = "br_01JD0000000000000000000000";
const NO_OPERATION: &str = "op_01JD0000000000000000000000";

/// Asserts the request id header every response carries; its value.
fn request_id(reply: &Reply) -> String {
    let id = reply
        .header("x-request-id")
        .unwrap_or_else(|| panic!("no x-request-id: {reply:?}"));
    assert!(id.starts_with("req_") && id.len() > 4, "{id}");
    id.to_owned()
}

/// A request with the admin key, its request id checked.
async fn call(up: &Up, method: &str, path: &str, body: Option<&str>) -> Reply {
    let reply = up.call(method, path, body).await;
    request_id(&reply);
    reply
}

/// A request with `key`, its request id checked.
async fn call_as(up: &Up, key: &str, method: &str, path: &str, body: Option<&str>) -> Reply {
    let reply = up.request(method, path, Some(key), body).await;
    request_id(&reply);
    reply
}

/// Asserts a `{project}` body's exact shape; the project.
fn assert_project(body: &Value, name: &str) -> Value {
    assert_eq!(keys(body), ["project"], "{body}");
    let project = body["project"].clone();
    assert_eq!(keys(&project), ["created_at", "id", "labels", "name"], "{project}");
    assert!(
        project["id"].as_str().is_some_and(|id| id.starts_with("proj_")),
        "{project}"
    );
    assert_eq!(project["name"], name, "{project}");
    assert!(project["created_at"].as_str().is_some_and(is_iso_utc), "{project}");
    project
}

/// Asserts 204 with an empty body.
fn assert_no_content(reply: &Reply) {
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.body, "", "a 204 has no body");
}

/// The ids of a list body's `field`, in order.
fn ids(body: &Value, field: &str) -> Vec<String> {
    body[field]
        .as_array()
        .unwrap_or_else(|| panic!("`{field}` is a list: {body}"))
        .iter()
        .map(|item| item["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_create_get_rename_list_and_delete_with_their_databases() {
    let up = Up::start();
    let reply = call(&up, "POST", "/v1/projects", Some(r#"{"name":"alpha"}"#)).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let created = assert_project(&reply.json(), "alpha");
    let id = created["id"].as_str().expect("id").to_owned();

    let reply = call(&up, "GET", &format!("/v1/projects/{id}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["project"], created);

    let reply = call(&up, "PATCH", &format!("/v1/projects/{id}"), Some(r#"{"name":"beta"}"#)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let renamed = assert_project(&reply.json(), "beta");
    assert_eq!(renamed["id"], created["id"]);
    assert_eq!(renamed["created_at"], created["created_at"]);
    // An empty update changes nothing.
    let reply = call(&up, "PATCH", &format!("/v1/projects/{id}"), Some("{}")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["project"], renamed);
    assert_eq!(
        call(&up, "GET", &format!("/v1/projects/{id}"), None).await.json()["project"]["name"],
        "beta"
    );

    let other = up.create_project("other").await;
    let reply = call(&up, "GET", "/v1/projects", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let list = reply.json();
    assert_eq!(keys(&list), ["next_cursor", "projects"], "{list}");
    assert_eq!(list["next_cursor"], Value::Null);
    assert_eq!(ids(&list, "projects"), [id.clone(), other.clone()], "oldest first");
    assert_eq!(list["projects"][0], renamed);

    // Deleting a project deletes its databases.
    let database = up.create_database(&id, "doomed").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let branch_id = database["default_branch_id"].as_str().expect("branch").to_owned();
    assert_no_content(&call(&up, "DELETE", &format!("/v1/projects/{id}"), None).await);
    call(&up, "GET", &format!("/v1/projects/{id}"), None)
        .await
        .assert_error(404, "not_found");
    call(&up, "GET", &format!("/v1/databases/{database_id}"), None)
        .await
        .assert_error(404, "not_found");
    call(&up, "GET", &format!("/v1/branches/{branch_id}"), None)
        .await
        .assert_error(404, "not_found");
    call(&up, "GET", &format!("/v1/projects/{id}/databases"), None)
        .await
        .assert_error(404, "not_found");
    call(&up, "DELETE", &format!("/v1/projects/{id}"), None)
        .await
        .assert_error(404, "not_found");
    let list = call(&up, "GET", "/v1/projects", None).await.json();
    assert_eq!(ids(&list, "projects"), [other]);

    // Ids that name nothing, or are not ids at all.
    for path in [format!("/v1/projects/{NO_PROJECT}"), "/v1/projects/nope".to_owned()] {
        call(&up, "GET", &path, None).await.assert_error(404, "not_found");
        call(&up, "PATCH", &path, Some(r#"{"name":"x"}"#))
            .await
            .assert_error(404, "not_found");
        call(&up, "DELETE", &path, None).await.assert_error(404, "not_found");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_paginate_by_limit_and_cursor() {
    let up = Up::start();
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(up.create_project(&format!("p{i}")).await);
    }
    // Pages of two: the cursor is opaque, followed until it is null.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/v1/projects?limit=2&cursor={cursor}"),
            None => "/v1/projects?limit=2".to_owned(),
        };
        let reply = call(&up, "GET", &path, None).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let page = reply.json();
        assert_eq!(keys(&page), ["next_cursor", "projects"], "{page}");
        let page_ids = ids(&page, "projects");
        assert!(page_ids.len() <= 2, "{page}");
        seen.extend(page_ids);
        pages += 1;
        assert!(pages <= 3, "more pages than five projects need: {seen:?}");
        match &page["next_cursor"] {
            Value::Null => break,
            Value::String(next) => cursor = Some(next.clone()),
            other => panic!("next_cursor is a string or null: {other}"),
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, created);

    // A page that ends exactly at the end says so.
    let page = call(&up, "GET", "/v1/projects?limit=5", None).await.json();
    assert_eq!(ids(&page, "projects"), created);
    assert_eq!(page["next_cursor"], Value::Null);
    let page = call(&up, "GET", "/v1/projects?limit=500", None).await.json();
    assert_eq!(ids(&page, "projects"), created);
    let page = call(&up, "GET", "/v1/projects?limit=1", None).await.json();
    assert_eq!(ids(&page, "projects"), [created[0].clone()]);
    assert!(page["next_cursor"].is_string(), "{page}");
    // The default page holds them all.
    let page = call(&up, "GET", "/v1/projects", None).await.json();
    assert_eq!(ids(&page, "projects"), created);
    assert_eq!(page["next_cursor"], Value::Null);

    for query in [
        "limit=0",
        "limit=501",
        "limit=-1",
        "limit=ten",
        "cursor=no-pe",
        "cursor=%20",
        "cursor=",
        "cursor=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ] {
        call(&up, "GET", &format!("/v1/projects?{query}"), None)
            .await
            .assert_error(400, "invalid_request");
    }
    // A cursor is opaque: one that names no project only moves the page.
    let page = call(&up, "GET", "/v1/projects?cursor=zzz", None).await.json();
    assert_eq!(page["projects"], serde_json::json!([]), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_wrong_malformed_and_revoked_keys_are_401() {
    let up = Up::start();
    let reply = up.request("GET", "/v1/projects", None, None).await;
    reply.assert_error(401, "unauthenticated");
    for key in ["cmb_wrong", "garbage", "", "cmb_"] {
        up.request("GET", "/v1/projects", Some(key), None)
            .await
            .assert_error(401, "unauthenticated");
    }
    // Not a bearer scheme.
    let header = format!("Basic {}", up.key);
    request(
        &up.process.address,
        "GET",
        "/v1/projects",
        None,
        None,
        &[("Authorization", &header)],
    )
    .await
    .assert_error(401, "unauthenticated");
    // Every route needs a key, writes included; nothing is created without one.
    up.request("POST", "/v1/projects", None, Some(r#"{"name":"x"}"#))
        .await
        .assert_error(401, "unauthenticated");
    up.request(
        "GET",
        &format!("/v1/operations/{NO_OPERATION}"),
        Some("cmb_wrong"),
        None,
    )
    .await
    .assert_error(401, "unauthenticated");
    assert_eq!(
        call(&up, "GET", "/v1/projects", None).await.json()["projects"],
        serde_json::json!([])
    );

    // A second key of the admin's account sees the same projects, until it is revoked.
    let project = up.create_project("mine").await;
    let before: BTreeSet<String> = up.keys(&["list"]).lines().map(str::to_owned).collect();
    let key = up.keys(&["create"]).trim().to_owned();
    assert!(key.starts_with("cmb_"), "{key}");
    let after = up.keys(&["list"]);
    let new_lines: Vec<&str> = after.lines().filter(|line| !before.contains(*line)).collect();
    assert_eq!(new_lines.len(), 1, "{after}");
    let fields: Vec<&str> = new_lines[0].split('\t').collect();
    assert_eq!(
        fields.len(),
        7,
        "id, account, created, revoked, project, read-only, expires: {after}"
    );
    let (key_id, revoked) = (fields[0], fields[3]);
    assert_eq!(revoked, "-", "{after}");
    let reply = call_as(&up, &key, "GET", &format!("/v1/projects/{project}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let out = up.keys(&["revoke", key_id]);
    assert!(out.contains(key_id), "{out}");
    up.request("GET", &format!("/v1/projects/{project}"), Some(&key), None)
        .await
        .assert_error(401, "unauthenticated");
    up.request("POST", "/v1/projects", Some(&key), Some(r#"{"name":"late"}"#))
        .await
        .assert_error(401, "unauthenticated");
    let listed = up.keys(&["list"]);
    let line = listed
        .lines()
        .find(|line| line.starts_with(key_id))
        .unwrap_or_else(|| panic!("{listed}"));
    assert_ne!(line.split('\t').nth(3), Some("-"), "revoked: {line}");
    // The route between API processes takes the host's internal token, which no API key is, not even the
    // admin's.
    let internal = "/internal/databases/db_01ARZ3NDEKTSV4RRFFQ69G5FAV/pageserver";
    for key in [None, Some(up.key.as_str()), Some("0000")] {
        up.request("POST", internal, key, None)
            .await
            .assert_error(401, "unauthenticated");
    }
    // The admin key still works.
    let reply = call(&up, "GET", "/v1/projects", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(ids(&reply.json(), "projects"), [project]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_account_sees_none_of_the_admins_resources() {
    let up = Up::start();
    let project = up.create_project("admin").await;
    let database = up.create_database(&project, "shop").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let main_id = database["default_branch_id"].as_str().expect("branch").to_owned();
    let reply = call(
        &up,
        "POST",
        &format!("/v1/databases/{database_id}/branches"),
        Some(r#"{"name":"dev"}"#),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let branch = reply.json()["branch"].clone();
    let branch_id = branch["id"].as_str().expect("id").to_owned();
    let lsn = branch["parent_lsn"].as_str().expect("lsn").to_owned();
    let operations = call(&up, "GET", &format!("/v1/projects/{project}/operations"), None)
        .await
        .json();
    let operation_id = ids(&operations, "operations")[0].clone();

    let stranger = up.keys(&["create", "--new-account"]).trim().to_owned();
    let reply = call_as(&up, &stranger, "GET", "/v1/projects", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json(), serde_json::json!({"projects": [], "next_cursor": null}));

    let name = Some(r#"{"name":"stolen"}"#);
    let restore = format!(r#"{{"target_lsn":"{lsn}"}}"#);
    let attempts: Vec<(&str, String, Option<&str>)> = vec![
        ("GET", format!("/v1/projects/{project}"), None),
        ("PATCH", format!("/v1/projects/{project}"), name),
        ("DELETE", format!("/v1/projects/{project}"), None),
        ("GET", format!("/v1/projects/{project}/databases"), None),
        ("POST", format!("/v1/projects/{project}/databases"), name),
        ("GET", format!("/v1/projects/{project}/operations"), None),
        ("GET", format!("/v1/databases/{database_id}"), None),
        ("PATCH", format!("/v1/databases/{database_id}"), name),
        ("DELETE", format!("/v1/databases/{database_id}"), None),
        ("POST", format!("/v1/databases/{database_id}/suspend"), None),
        ("POST", format!("/v1/databases/{database_id}/resume"), None),
        ("GET", format!("/v1/databases/{database_id}/endpoints"), None),
        ("GET", format!("/v1/databases/{database_id}/branches"), None),
        ("POST", format!("/v1/databases/{database_id}/branches"), name),
        ("GET", format!("/v1/branches/{branch_id}"), None),
        ("PATCH", format!("/v1/branches/{branch_id}"), name),
        (
            "PATCH",
            format!("/v1/branches/{branch_id}"),
            Some(r#"{"is_default":true}"#),
        ),
        ("DELETE", format!("/v1/branches/{branch_id}"), None),
        ("DELETE", format!("/v1/branches/{main_id}"), None),
        ("POST", format!("/v1/branches/{main_id}/restore"), Some(&restore)),
        ("GET", format!("/v1/operations/{operation_id}"), None),
        ("GET", format!("/v1/operations/{operation_id}?wait=1s"), None),
    ];
    for (method, path, body) in &attempts {
        let reply = call_as(&up, &stranger, method, path, *body).await;
        assert_eq!(reply.status, 404, "{method} {path}: {}", reply.body);
        reply.assert_error(404, "not_found");
    }
    // The stranger's own project cannot reach into the admin's database either.
    let theirs = call_as(&up, &stranger, "POST", "/v1/projects", Some(r#"{"name":"theirs"}"#)).await;
    assert_eq!(theirs.status, 201, "{}", theirs.body);
    let theirs = theirs.json()["project"]["id"].as_str().expect("id").to_owned();
    let reply = call_as(
        &up,
        &stranger,
        "GET",
        &format!("/v1/projects/{theirs}/operations"),
        None,
    )
    .await;
    assert_eq!(reply.json(), serde_json::json!({"operations": [], "next_cursor": null}));

    // Nothing of the admin's changed.
    let reply = call(&up, "GET", &format!("/v1/projects/{project}"), None).await;
    assert_eq!(reply.json()["project"]["name"], "admin");
    let reply = call(&up, "GET", &format!("/v1/databases/{database_id}"), None).await;
    let after = reply.json()["database"].clone();
    assert_eq!(after["name"], "shop");
    assert_eq!(after["status"], "active");
    assert_eq!(after["default_branch_id"], main_id.as_str());
    let branches = call(&up, "GET", &format!("/v1/databases/{database_id}/branches"), None)
        .await
        .json();
    assert_eq!(ids(&branches, "branches"), [main_id, branch_id]);
    assert_eq!(branches["branches"][1]["name"], "dev");
    let operations = call(&up, "GET", &format!("/v1/projects/{project}/operations"), None)
        .await
        .json();
    assert_eq!(ids(&operations, "operations"), [operation_id], "no restore ran");
    // And the admin does not see the stranger's project.
    let list = call(&up, "GET", "/v1/projects", None).await.json();
    assert_eq!(ids(&list, "projects"), [project]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_body_is_400_invalid_request() {
    let up = Up::start();
    let project = up.create_project("bodies").await;
    let database = up.create_database(&project, "shop").await;
    let database_id = database["id"].as_str().expect("id").to_owned();
    let main_id = database["default_branch_id"].as_str().expect("branch").to_owned();

    let long = format!(r#"{{"name":"{}"}}"#, "x".repeat(257));
    let named_bodies = [
        "",
        "{",
        r#"{"name":"#,
        "not json",
        "[]",
        "null",
        r#"{"name":5}"#,
        r#"{"name":"ok","bogus":1}"#,
        r#"{"name":""}"#,
        r#"{"name":"   "}"#,
        r#"{"name":"tab\there"}"#,
        &long,
    ];
    let targets = [
        ("POST", "/v1/projects".to_owned()),
        ("PATCH", format!("/v1/projects/{project}")),
        ("POST", format!("/v1/projects/{project}/databases")),
        ("PATCH", format!("/v1/databases/{database_id}")),
        ("POST", format!("/v1/databases/{database_id}/branches")),
        ("PATCH", format!("/v1/branches/{main_id}")),
    ];
    for (method, path) in &targets {
        for body in named_bodies {
            let reply = call(&up, method, path, Some(body)).await;
            assert_eq!(reply.status, 400, "{method} {path} {body:?}: {}", reply.body);
            reply.assert_error(400, "invalid_request");
        }
    }
    // The creates need a name; the updates take optional fields, but not of the wrong type.
    for path in [
        "/v1/projects".to_owned(),
        format!("/v1/projects/{project}/databases"),
        format!("/v1/databases/{database_id}/branches"),
    ] {
        for body in ["{}", r#"{"name":null}"#] {
            call(&up, "POST", &path, Some(body))
                .await
                .assert_error(400, "invalid_request");
        }
    }
    for body in [
        r#"{"is_default":"yes"}"#,
        r#"{"is_default":1}"#,
        r#"{"parent_lsn":"0/1"}"#,
    ] {
        call(&up, "PATCH", &format!("/v1/branches/{main_id}"), Some(body))
            .await
            .assert_error(400, "invalid_request");
    }
    for body in [
        "",
        "{",
        "[]",
        r#"{"target_lsn":5}"#,
        r#"{"target_lsn":"0/1","bogus":true}"#,
        r#"{"name":"x"}"#,
        r#"{"preserve":"no","target_lsn":"0/1"}"#,
    ] {
        let reply = call(&up, "POST", &format!("/v1/branches/{main_id}/restore"), Some(body)).await;
        assert_eq!(reply.status, 400, "restore {body:?}: {}", reply.body);
        reply.assert_error(400, "invalid_request");
    }
    // Nothing changed.
    assert_eq!(
        call(&up, "GET", &format!("/v1/projects/{project}"), None).await.json()["project"]["name"],
        "bodies"
    );
    let list = call(&up, "GET", "/v1/projects", None).await.json();
    assert_eq!(ids(&list, "projects"), std::slice::from_ref(&project));
    let list = call(&up, "GET", &format!("/v1/projects/{project}/databases"), None)
        .await
        .json();
    assert_eq!(ids(&list, "databases"), std::slice::from_ref(&database_id));
    assert_eq!(list["databases"][0]["name"], "shop");
    let list = call(&up, "GET", &format!("/v1/databases/{database_id}/branches"), None)
        .await
        .json();
    assert_eq!(ids(&list, "branches"), std::slice::from_ref(&main_id));
    assert_eq!(list["branches"][0]["name"], "main");
    let operations = call(&up, "GET", &format!("/v1/projects/{project}/operations"), None)
        .await
        .json();
    assert_eq!(
        operations["operations"].as_array().map(Vec::len),
        Some(1),
        "{operations}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_answers_a_post_once() {
    let up = Up::start();
    let address = up.process.address.clone();
    let key = up.key.clone();
    let post = |path: &'static str, body: &'static str, idempotency_key: &'static str| {
        let (address, key) = (address.clone(), key.clone());
        async move {
            let reply = request(
                &address,
                "POST",
                path,
                Some(&key),
                Some(body),
                &[("Idempotency-Key", idempotency_key)],
            )
            .await;
            request_id(&reply);
            reply
        }
    };
    let first = post("/v1/projects", r#"{"name":"once"}"#, "k-1").await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.header("idempotent-replayed"), None);
    let project = assert_project(&first.json(), "once");
    let second = post("/v1/projects", r#"{"name":"once"}"#, "k-1").await;
    assert_eq!(second.status, 201, "{}", second.body);
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    assert_eq!(second.json(), first.json());
    assert_ne!(second.header("x-request-id"), first.header("x-request-id"));
    let list = call(&up, "GET", "/v1/projects", None).await.json();
    assert_eq!(list["projects"], serde_json::json!([project.clone()]), "one project");

    // The same key on another path is refused, and does nothing.
    post(
        "/v1/projects/proj_01JD0000000000000000000000/databases",
        r#"{"name":"x"}"#,
        "k-1",
    )
    .await
    .assert_error(422, "unprocessable");
    // The same key with another body is refused, and does nothing.
    post("/v1/projects", r#"{"name":"other"}"#, "k-1")
        .await
        .assert_error(422, "unprocessable");
    // A refused request is not remembered: the same key works once the request is right.
    post("/v1/projects", r#"{"name":""}"#, "k-2")
        .await
        .assert_error(400, "invalid_request");
    let third = post("/v1/projects", r#"{"name":"twice"}"#, "k-2").await;
    assert_eq!(third.status, 201, "{}", third.body);
    assert_eq!(third.header("idempotent-replayed"), None);
    assert_project(&third.json(), "twice");
    // A request without a key is never replayed.
    let plain = call(&up, "POST", "/v1/projects", Some(r#"{"name":"once"}"#)).await;
    assert_eq!(plain.status, 201, "{}", plain.body);
    assert_eq!(plain.header("idempotent-replayed"), None);
    let list = call(&up, "GET", "/v1/projects", None).await.json();
    assert_eq!(list["projects"].as_array().map(Vec::len), Some(3), "{list}");

    // Keys are per account: another account's same key runs its own request.
    let stranger = up.keys(&["create", "--new-account"]).trim().to_owned();
    let theirs = request(
        &up.process.address,
        "POST",
        "/v1/projects",
        Some(&stranger),
        Some(r#"{"name":"once"}"#),
        &[("Idempotency-Key", "k-1")],
    )
    .await;
    assert_eq!(theirs.status, 201, "{}", theirs.body);
    assert_eq!(theirs.header("idempotent-replayed"), None);
    assert_ne!(theirs.json()["project"]["id"], project["id"]);
    let list = call_as(&up, &stranger, "GET", "/v1/projects", None).await.json();
    assert_eq!(list["projects"], serde_json::json!([theirs.json()["project"].clone()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_answers_429_with_retry_after() {
    let up = Up::start_with(&["--rate-limit", "5"]);
    let mut limited = 0;
    let mut passed = 0;
    for _ in 0..30 {
        let reply = call(&up, "GET", "/v1/projects", None).await;
        match reply.status {
            200 => passed += 1,
            429 => {
                reply.assert_error(429, "rate_limited");
                let retry_after: u64 = reply
                    .header("retry-after")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("a numeric retry-after: {reply:?}"));
                assert!((1..=60).contains(&retry_after), "{retry_after}");
                limited += 1;
            }
            other => panic!("{other}: {}", reply.body),
        }
    }
    assert!(limited > 0, "30 quick requests at 5/s: none limited ({passed} passed)");
    assert!(passed >= 1, "the first requests pass");
    // The document needs no key and is not limited; another account has its own budget.
    let reply = up.request("GET", "/v1/openapi.json", None, None).await;
    assert_eq!(reply.status, 200);
    let stranger = up.keys(&["create", "--new-account"]).trim().to_owned();
    let reply = call_as(&up, &stranger, "GET", "/v1/projects", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // The budget comes back after the advertised wait.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let reply = call(&up, "GET", "/v1/projects", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_every_route() {
    let up = Up::start();
    let reply = up.request("GET", "/v1/openapi.json", None, None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    request_id(&reply);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "{reply:?}"
    );
    let document = reply.json();
    assert!(
        document["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")),
        "{}",
        document["openapi"]
    );
    let paths = document["paths"].as_object().expect("paths");
    let routes: &[(&str, &[&str])] = &[
        ("/v1/projects", &["get", "post"]),
        ("/v1/projects/{id}", &["get", "patch", "delete"]),
        ("/v1/projects/{id}/databases", &["get", "post"]),
        ("/v1/projects/{id}/operations", &["get"]),
        ("/v1/projects/{id}/audit", &["get"]),
        ("/v1/projects/{id}/consumption", &["get"]),
        ("/v1/projects/{id}/webhooks", &["get", "post"]),
        ("/v1/projects/{id}/webhooks/{webhook_id}", &["get", "delete"]),
        ("/v1/projects/{id}/webhooks/{webhook_id}/deliveries", &["get"]),
        ("/v1/databases/{id}", &["get", "patch", "delete"]),
        ("/v1/databases/{id}/resume", &["post"]),
        ("/v1/databases/{id}/suspend", &["post"]),
        ("/v1/databases/{id}/reset_password", &["post"]),
        ("/v1/databases/{id}/endpoints", &["get"]),
        ("/v1/databases/{id}/health", &["get"]),
        ("/v1/databases/{id}/branches", &["get", "post"]),
        ("/v1/branches/{id}", &["get", "patch", "delete"]),
        ("/v1/branches/{id}/restore", &["post"]),
        ("/v1/branches/{id}/reset", &["post"]),
        ("/v1/branches/{id}/schema_diff", &["get"]),
        ("/v1/operations/{id}", &["get"]),
    ];
    for (path, methods) in routes {
        let item = paths
            .get(*path)
            .unwrap_or_else(|| panic!("{path} missing: {:?}", paths.keys()));
        for method in *methods {
            assert!(item.get(*method).is_some(), "{method} {path} missing: {item}");
        }
    }
    assert_eq!(paths.len(), routes.len(), "{:?}", paths.keys());
    // The bearer scheme is declared.
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"]["scheme"], "bearer",
        "{}",
        document["components"]
    );
    // The same document with a key, too.
    let reply = call(&up, "GET", "/v1/openapi.json", None).await;
    assert_eq!(reply.json(), document);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_404_envelopes_and_every_response_has_a_request_id() {
    let up = Up::start();
    for path in ["/", "/nope", "/v1", "/v1/nope", "/v2/projects", "/v1/projects/x/y/z"] {
        up.request("GET", path, None, None).await.assert_error(404, "not_found");
        call(&up, "GET", path, None).await.assert_error(404, "not_found");
        call(&up, "POST", path, Some("{}")).await.assert_error(404, "not_found");
    }
    for path in [
        format!("/v1/projects/{NO_PROJECT}"),
        format!("/v1/projects/{NO_PROJECT}/databases"),
        format!("/v1/projects/{NO_PROJECT}/operations"),
        format!("/v1/databases/{NO_DATABASE}"),
        format!("/v1/databases/{NO_DATABASE}/endpoints"),
        format!("/v1/databases/{NO_DATABASE}/branches"),
        format!("/v1/branches/{NO_BRANCH}"),
        format!("/v1/operations/{NO_OPERATION}"),
        // An id of the wrong kind names nothing.
        format!("/v1/databases/{NO_BRANCH}"),
        format!("/v1/branches/{NO_DATABASE}"),
    ] {
        call(&up, "GET", &path, None).await.assert_error(404, "not_found");
    }
    for path in [
        format!("/v1/databases/{NO_DATABASE}/resume"),
        format!("/v1/databases/{NO_DATABASE}/suspend"),
    ] {
        call(&up, "POST", &path, None).await.assert_error(404, "not_found");
    }
    // A known path with a method it does not have.
    let reply = call(&up, "PUT", "/v1/projects", Some(r#"{"name":"x"}"#)).await;
    assert_eq!(reply.status, 405, "{}", reply.body);
    reply.assert_error(405, "method_not_allowed");
    let allow = reply
        .header("allow")
        .unwrap_or_else(|| panic!("an Allow header: {reply:?}"));
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    let reply = call(&up, "DELETE", &format!("/v1/branches/{NO_BRANCH}/restore"), None).await;
    reply.assert_error(405, "method_not_allowed");
    let reply = up.request("POST", "/v1/openapi.json", None, Some("{}")).await;
    reply.assert_error(405, "method_not_allowed");

    // Request ids are unique: successes, creations, deletions and errors all carry one.
    let mut seen = BTreeSet::new();
    let project = call(&up, "POST", "/v1/projects", Some(r#"{"name":"ids"}"#)).await;
    assert!(seen.insert(request_id(&project)));
    let id = project.json()["project"]["id"].as_str().expect("id").to_owned();
    for reply in [
        call(&up, "GET", "/v1/projects", None).await,
        call(&up, "GET", &format!("/v1/projects/{id}"), None).await,
        up.request("GET", "/v1/projects", None, None).await,
        up.request("GET", "/v1/openapi.json", None, None).await,
        call(&up, "DELETE", &format!("/v1/projects/{id}"), None).await,
        call(&up, "GET", "/nope", None).await,
    ] {
        assert!(seen.insert(request_id(&reply)), "a repeated request id: {reply:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_template() {
    let up = Up::start();
    let project = up.create_project("m").await;
    call(&up, "GET", &format!("/v1/projects/{project}"), None).await;
    call(&up, "GET", "/v1/projects/proj_01JD0000000000000000000000", None).await;
    let reply = request(&up.process.address, "GET", "/metrics", Some(&up.key), None, &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/plain")));
    for line in [
        r#"cambium_api_requests_total{method="POST",route="/v1/projects",status="201"} 1"#,
        r#"cambium_api_requests_total{method="GET",route="/v1/projects/{id}",status="200"} 1"#,
        r#"cambium_api_requests_total{method="GET",route="/v1/projects/{id}",status="404"} 1"#,
        "cambium_api_request_duration_seconds_count 3",
        r#"cambium_api_databases{status="active"} 0"#,
        "cambium_api_operations_in_progress 0",
        // Each successful call's stages (`api::stages`), the 404 not counted: the key check with its scope read,
        // then the rest.
        r#"cambium_api_stage_seconds_count{call="GET /v1/projects/{id}",stage="auth_and_scope"} 1"#,
        r#"cambium_api_stage_seconds_count{call="GET /v1/projects/{id}",stage="rest"} 1"#,
        r#"cambium_api_stage_seconds_count{call="POST /v1/projects",stage="auth_and_scope"} 1"#,
    ] {
        assert!(
            reply.body.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            reply.body
        );
    }
    assert!(!reply.body.contains("proj_"), "no ids in labels");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_key_of_the_admin_account() {
    let up = Up::start();
    let address = up.process.address.clone();
    let metrics = |key: Option<String>| {
        let address = address.clone();
        async move { request(&address, "GET", "/metrics", key.as_deref(), None, &[]).await }
    };
    metrics(None).await.assert_error(401, "unauthenticated");
    metrics(Some("cmb_nope".to_owned()))
        .await
        .assert_error(401, "unauthenticated");
    // Another account's valid key: it may not see how many databases every account has.
    let other = up.keys(&["create", "--new-account"]).trim().to_owned();
    assert_eq!(call_as(&up, &other, "GET", "/v1/projects", None).await.status, 200);
    let refused = metrics(Some(other)).await;
    refused.assert_error(403, "forbidden");
    assert!(!refused.body.contains("cambium_api"), "{}", refused.body);
    // Any key of the admin account: the one `up` wrote, and another made by `cambium keys create`.
    let second_admin = up.keys(&["create"]).trim().to_owned();
    for key in [up.key.clone(), second_admin.clone()] {
        let reply = metrics(Some(key)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert!(
            reply.body.lines().any(|l| l == "cambium_api_operations_in_progress 0"),
            "{}",
            reply.body
        );
    }
    // A revoked admin key is refused like any other.
    let listed = up.keys(&["list"]);
    let second_id = listed
        .lines()
        .last()
        .and_then(|line| line.split('\t').next())
        .expect("a key id")
        .to_owned();
    up.keys(&["revoke", &second_id]);
    metrics(Some(second_admin)).await.assert_error(401, "unauthenticated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_with_one_idempotency_key_create_one_resource() {
    const ROUNDS: usize = 10;
    const RETRIES: usize = 8;
    const CLIENTS: usize = 8;
    let up = Up::start();
    for round in 0..ROUNDS {
        let name = format!("race-{round}");
        let body = format!(r#"{{"name":"{name}"}}"#);
        // Clients that retry at once and again as soon as they are answered, so every retry lands while
        // another is being looked up, run, or stored.
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..CLIENTS {
            let (address, key, body, name) = (up.process.address.clone(), up.key.clone(), body.clone(), name.clone());
            clients.spawn(async move {
                let mut replies = Vec::new();
                for _ in 0..RETRIES {
                    let reply = request(
                        &address,
                        "POST",
                        "/v1/projects",
                        Some(&key),
                        Some(&body),
                        &[("Idempotency-Key", &name)],
                    )
                    .await;
                    replies.push((reply.status, reply.body));
                }
                replies
            });
        }
        let mut created = BTreeSet::new();
        while let Some(replies) = clients.join_next().await {
            for (status, body) in replies.expect("a client") {
                match status {
                    201 => {
                        let body: Value = serde_json::from_str(&body).expect("json");
                        created.insert(body["project"]["id"].as_str().expect("id").to_owned());
                    }
                    409 => assert!(body.contains("in progress"), "{body}"),
                    other => panic!("{other}: {body}"),
                }
            }
        }
        assert_eq!(
            created.len(),
            1,
            "round {round}: one project for one key, not {created:?}"
        );
        let list = call(&up, "GET", "/v1/projects?limit=500", None).await.json();
        let named = list["projects"]
            .as_array()
            .expect("projects")
            .iter()
            .filter(|p| p["name"] == name.as_str())
            .count();
        assert_eq!(named, 1, "round {round}: {list}");
    }
}
