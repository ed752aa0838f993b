//! The branch workflow of issue 15 against a real `cambium up` over HTTP and SQL: protected branches (every
//! refusal is 409 naming the protection, lifted by unprotecting, kept across a restart), expiry (the sweep deletes
//! an expired branch as a `delete_branch` operation, keeps protected branches, the default branch and branches
//! with children with a failed operation saying why, and finishes what expired while the service was down), and
//! reset from the parent (the same connection string shows the parent's latest data; `preserve` keeps the old
//! state as a branch).

mod common;

use std::time::Duration;

use common::api::{connect, insert_ids as insert, table_ids as rows, Reply, Up};
use serde_json::Value;

/// The expiry sweep's period in these tests (the default is 5 s).
const EXPIRY_PERIOD_MS: &str = "200";

/// The string field `field` of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// An RFC 3339 time `seconds` from now (negative: in the past).
fn in_seconds(seconds: i64) -> String {
    let at = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .expect("a time in range");
    format!("{at:.3}")
}

/// A project with an active database holding `t` with rows `0..n`: (project id, database).
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

/// Creates a branch of `database_id` with `body`, asserting 201; the branch.
async fn create_branch(up: &Up, database_id: &str, body: &str) -> Value {
    let reply = up
        .call("POST", &format!("/v1/databases/{database_id}/branches"), Some(body))
        .await;
    assert_eq!(reply.status, 201, "{body}: {}", reply.body);
    reply.json()["branch"].clone()
}

/// Asserts a 409 `conflict` whose message names the protection of branch `id`.
fn assert_protected(reply: &Reply, id: &str) {
    reply.assert_error(409, "conflict");
    let message = text(&reply.json()["error"], "message");
    assert!(
        message.contains("protected") && message.contains(id),
        "the message names the protection of {id}: {message}"
    );
}

/// The operations of `project`, newest first.
async fn operations(up: &Up, project: &str) -> Vec<Value> {
    let reply = up
        .call("GET", &format!("/v1/projects/{project}/operations"), None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["operations"].as_array().expect("operations").clone()
}

/// Waits (bounded) until `project` has an ended `delete_branch` operation on `branch`; that operation.
async fn ended_deletion(up: &Up, project: &str, branch: &str) -> Value {
    for _ in 0..150 {
        let found = operations(up, project)
            .await
            .into_iter()
            .find(|op| op["action"] == "delete_branch" && op["branch_id"] == branch && op["status"] != "running");
        if let Some(operation) = found {
            return operation;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no delete_branch operation on {branch} ended within 15 s");
}

/// The branch `id`'s status code and body.
async fn get_branch(up: &Up, id: &str) -> Reply {
    up.call("GET", &format!("/v1/branches/{id}"), None).await
}

/// Starts a reset of branch `id` with `body`, asserting 202 and the operation's shape; waits for it to end and
/// returns it.
async fn reset(up: &Up, id: &str, body: Option<&str>) -> Value {
    let reply = up.call("POST", &format!("/v1/branches/{id}/reset"), body).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let operation = reply.json()["operation"].clone();
    assert_eq!(operation["action"], "reset_branch", "{operation}");
    assert_eq!(operation["status"], "running", "{operation}");
    assert_eq!(operation["branch_id"], id, "{operation}");
    up.wait_operation(&text(&operation, "id")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_branches_refuse_deletion_restore_and_reset_until_unprotected() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &[]);
    let (project, database) = database_with_rows(&up, 3).await;
    let database_id = text(&database, "id");
    let main = text(&database, "default_branch_id");

    let prod = create_branch(&up, &database_id, r#"{"name":"prod","protected":true}"#).await;
    let prod_id = text(&prod, "id");
    assert_eq!(prod["protected"], true, "{prod}");
    let lsn = text(&prod, "parent_lsn");
    assert_protected(
        &up.call("DELETE", &format!("/v1/branches/{prod_id}"), None).await,
        &prod_id,
    );
    let restore = format!(r#"{{"target_lsn":"{lsn}"}}"#);
    assert_protected(
        &up.call("POST", &format!("/v1/branches/{prod_id}/restore"), Some(&restore))
            .await,
        &prod_id,
    );
    assert_protected(
        &up.call("POST", &format!("/v1/branches/{prod_id}/reset"), None).await,
        &prod_id,
    );
    // A protected branch forked from the one deleted refuses the deletion too, naming the descendant.
    let feature = create_branch(&up, &database_id, r#"{"name":"feature"}"#).await;
    let feature_id = text(&feature, "id");
    let child = create_branch(
        &up,
        &database_id,
        &format!(r#"{{"name":"child","parent_branch_id":"{feature_id}","protected":true}}"#),
    )
    .await;
    let child_id = text(&child, "id");
    assert_protected(
        &up.call("DELETE", &format!("/v1/branches/{feature_id}"), None).await,
        &child_id,
    );
    // The database and the project would delete the protected branches with them.
    assert_protected(
        &up.call("DELETE", &format!("/v1/databases/{database_id}"), None).await,
        &prod_id,
    );
    assert_protected(
        &up.call("DELETE", &format!("/v1/projects/{project}"), None).await,
        &prod_id,
    );
    // The default branch may be protected too.
    let reply = up
        .call("PATCH", &format!("/v1/branches/{main}"), Some(r#"{"protected":true}"#))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["branch"]["protected"], true);
    // Nothing was touched: the protected branch serves its rows.
    assert_eq!(rows(&up.uri(&prod)).await, vec![0, 1, 2]);
    let reply = up
        .call(
            "PATCH",
            &format!("/v1/branches/{prod_id}"),
            Some(r#"{"protected":"yes"}"#),
        )
        .await;
    reply.assert_error(400, "invalid_request");

    // The protection is in the metadata: it holds across a restart.
    up.process.kill9();
    up.process.restart();
    let reply = get_branch(&up, &prod_id).await;
    assert_eq!(reply.json()["branch"]["protected"], true, "{}", reply.body);
    assert_protected(
        &up.call("DELETE", &format!("/v1/branches/{prod_id}"), None).await,
        &prod_id,
    );

    // Unprotected, everything is allowed again.
    for id in [&prod_id, &child_id] {
        let reply = up
            .call("PATCH", &format!("/v1/branches/{id}"), Some(r#"{"protected":false}"#))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.json()["branch"]["protected"], false);
    }
    let reply = up
        .call("POST", &format!("/v1/branches/{prod_id}/restore"), Some(&restore))
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let restored = up.wait_operation(&text(&reply.json()["operation"], "id")).await;
    assert_eq!(restored["status"], "finished", "{restored}");
    let reply = up.call("DELETE", &format!("/v1/branches/{feature_id}"), None).await;
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(get_branch(&up, &child_id).await.status, 404);
    let reply = up.call("DELETE", &format!("/v1/branches/{prod_id}"), None).await;
    assert_eq!(reply.status, 204, "{}", reply.body);
    // The default branch is still protected: the database cannot be deleted.
    assert_protected(
        &up.call("DELETE", &format!("/v1/databases/{database_id}"), None).await,
        &main,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_branches_are_deleted_as_operations_and_the_ones_expiry_must_keep_say_why() {
    let up = Up::start_with(&["--branch-expiry-period-ms", EXPIRY_PERIOD_MS]);
    let (project, database) = database_with_rows(&up, 2).await;
    let database_id = text(&database, "id");
    let main = text(&database, "default_branch_id");

    // Bad expiries: malformed 400, past or too far 422, on the default branch 422.
    for (body, status) in [
        (r#"{"name":"x","expires_at":"tomorrow"}"#.to_owned(), 400),
        (format!(r#"{{"name":"x","expires_at":"{}"}}"#, in_seconds(-5)), 422),
        (
            format!(r#"{{"name":"x","expires_at":"{}"}}"#, in_seconds(400 * 86_400)),
            422,
        ),
    ] {
        let reply = up
            .call("POST", &format!("/v1/databases/{database_id}/branches"), Some(&body))
            .await;
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
    }
    let reply = up
        .call(
            "PATCH",
            &format!("/v1/branches/{main}"),
            Some(&format!(r#"{{"expires_at":"{}"}}"#, in_seconds(60))),
        )
        .await;
    reply.assert_error(422, "unprocessable");

    let preview = create_branch(
        &up,
        &database_id,
        &format!(r#"{{"name":"preview","expires_at":"{}"}}"#, in_seconds(2)),
    )
    .await;
    let preview_id = text(&preview, "id");
    assert!(
        preview["expires_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{preview}"
    );
    let preview_uri = up.uri(&preview);
    assert_eq!(rows(&preview_uri).await, vec![0, 1]);
    let guarded = create_branch(
        &up,
        &database_id,
        &format!(
            r#"{{"name":"guarded","protected":true,"expires_at":"{}"}}"#,
            in_seconds(2)
        ),
    )
    .await;
    let guarded_id = text(&guarded, "id");
    let parent = create_branch(
        &up,
        &database_id,
        &format!(r#"{{"name":"parent","expires_at":"{}"}}"#, in_seconds(2)),
    )
    .await;
    let parent_id = text(&parent, "id");
    let kid = create_branch(
        &up,
        &database_id,
        &format!(r#"{{"name":"kid","parent_branch_id":"{parent_id}"}}"#),
    )
    .await;
    // An expiry set and then cleared never fires.
    let cleared = create_branch(
        &up,
        &database_id,
        &format!(r#"{{"name":"cleared","expires_at":"{}"}}"#, in_seconds(2)),
    )
    .await;
    let cleared_id = text(&cleared, "id");
    let reply = up
        .call(
            "PATCH",
            &format!("/v1/branches/{cleared_id}"),
            Some(r#"{"expires_at":null}"#),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.json()["branch"].get("expires_at").is_none(), "{}", reply.body);

    let deleted = ended_deletion(&up, &project, &preview_id).await;
    assert_eq!(deleted["status"], "finished", "{deleted}");
    assert_eq!(deleted["database_id"], database_id, "{deleted}");
    assert_eq!(get_branch(&up, &preview_id).await.status, 404);
    assert!(
        connect(&preview_uri).await.is_err(),
        "the expired branch no longer serves SQL"
    );

    let kept = ended_deletion(&up, &project, &guarded_id).await;
    assert_eq!(kept["status"], "failed", "{kept}");
    assert!(text(&kept, "error").contains("protected"), "{kept}");
    let reply = get_branch(&up, &guarded_id).await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.json()["branch"].get("expires_at").is_none(),
        "expiry cleared: {}",
        reply.body
    );
    assert_eq!(rows(&up.uri(&guarded)).await, vec![0, 1]);

    let kept = ended_deletion(&up, &project, &parent_id).await;
    assert_eq!(kept["status"], "failed", "{kept}");
    assert!(
        text(&kept, "error").contains(&text(&kid, "id")),
        "names the child: {kept}"
    );
    assert_eq!(get_branch(&up, &parent_id).await.status, 200);
    assert_eq!(get_branch(&up, &text(&kid, "id")).await.status, 200);

    assert_eq!(get_branch(&up, &cleared_id).await.status, 200);
    assert!(
        !operations(&up, &project)
            .await
            .iter()
            .any(|op| op["branch_id"] == cleared_id.as_str()),
        "no operation on the branch whose expiry was cleared"
    );
    // One operation per expired branch: a kept branch is not tried again every sweep.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let deletions = operations(&up, &project)
        .await
        .into_iter()
        .filter(|op| op["action"] == "delete_branch")
        .count();
    assert_eq!(deletions, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_that_expires_while_the_service_is_down_is_deleted_after_the_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(
        &root.path().join("cambium"),
        &["--branch-expiry-period-ms", EXPIRY_PERIOD_MS],
    );
    let (project, database) = database_with_rows(&up, 1).await;
    let preview = create_branch(
        &up,
        &text(&database, "id"),
        &format!(r#"{{"name":"preview","expires_at":"{}"}}"#, in_seconds(3)),
    )
    .await;
    let preview_id = text(&preview, "id");
    up.process.kill9();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    up.process.restart();
    let deleted = ended_deletion(&up, &project, &preview_id).await;
    assert_eq!(deleted["status"], "finished", "{deleted}");
    assert_eq!(get_branch(&up, &preview_id).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_brings_a_branch_to_its_parents_latest_state_on_the_same_connection_string() {
    let up = Up::start();
    let (_project, database) = database_with_rows(&up, 3).await;
    let database_id = text(&database, "id");
    let main = text(&database, "default_branch_id");
    let main_uri = up.uri(&database);
    let dev = create_branch(&up, &database_id, r#"{"name":"dev"}"#).await;
    let dev_id = text(&dev, "id");
    let dev_uri = up.uri(&dev);
    insert(&dev_uri, 100..102).await;
    insert(&main_uri, 3..5).await;
    assert_eq!(rows(&dev_uri).await, vec![0, 1, 2, 100, 101]);

    // An empty body: no backup kept.
    let ended = reset(&up, &dev_id, None).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(rows(&dev_uri).await, vec![0, 1, 2, 3, 4], "the parent's latest state");
    let after = get_branch(&up, &dev_id).await.json()["branch"].clone();
    assert_eq!(after["name"], "dev");
    assert_eq!(after["connection_uri"], dev["connection_uri"]);
    assert_eq!(after["parent_branch_id"], main.as_str());
    assert_ne!(
        after["parent_lsn"], dev["parent_lsn"],
        "the branch point moved: {after}"
    );
    let listed = up
        .call("GET", &format!("/v1/databases/{database_id}/branches"), None)
        .await
        .json();
    assert_eq!(listed["branches"].as_array().expect("branches").len(), 2, "{listed}");
    // The branch writes on from there, and the parent is untouched.
    insert(&dev_uri, 200..201).await;
    assert_eq!(rows(&main_uri).await, vec![0, 1, 2, 3, 4]);

    // `preserve` keeps the state before as a branch, with its own connection string.
    insert(&main_uri, 5..6).await;
    let ended = reset(&up, &dev_id, Some(r#"{"preserve":true}"#)).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(rows(&dev_uri).await, vec![0, 1, 2, 3, 4, 5]);
    let listed = up
        .call("GET", &format!("/v1/databases/{database_id}/branches"), None)
        .await
        .json();
    let backup = listed["branches"]
        .as_array()
        .expect("branches")
        .iter()
        .find(|b| b["name"].as_str().is_some_and(|n| n.starts_with("dev_before_reset_")))
        .unwrap_or_else(|| panic!("a backup branch: {listed}"))
        .clone();
    assert_eq!(rows(&up.uri(&backup)).await, vec![0, 1, 2, 3, 4, 200]);

    // The default branch has no parent; bad bodies are 400; unknown branches 404.
    up.call("POST", &format!("/v1/branches/{main}/reset"), None)
        .await
        .assert_error(422, "unprocessable");
    up.call(
        "POST",
        &format!("/v1/branches/{dev_id}/reset"),
        Some(r#"{"preserve":1}"#),
    )
    .await
    .assert_error(400, "invalid_request");
    up.call(
        "POST",
        &format!("/v1/branches/{dev_id}/reset"),
        Some(r#"{"keep":true}"#),
    )
    .await
    .assert_error(400, "invalid_request");
    up.call("POST", "/v1/branches/br_01JD0000000000000000000000/reset", None)
        .await
        .assert_error(404, "not_found");
}

/// The ids of the list `field` of the reply to `GET path`.
async fn listed_ids(up: &Up, path: &str, field: &str) -> Vec<String> {
    let reply = up.call("GET", path, None).await;
    assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    reply.json()[field]
        .as_array()
        .unwrap_or_else(|| panic!("{path}: {}", reply.body))
        .iter()
        .map(|item| text(item, "id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_on_projects_databases_and_branches_filter_every_list_and_survive_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &[]);
    let reply = up
        .call(
            "POST",
            "/v1/projects",
            Some(r#"{"name":"a","labels":{"team":"web","env":"dev"}}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let project = text(&reply.json()["project"], "id");
    assert_eq!(
        reply.json()["project"]["labels"],
        serde_json::json!({"env": "dev", "team": "web"})
    );
    let other = up.create_project("b").await;
    assert_eq!(
        listed_ids(&up, "/v1/projects?label=team:web", "projects").await,
        [project.as_str()]
    );
    assert_eq!(
        listed_ids(&up, "/v1/projects?label=team", "projects").await,
        [project.as_str()]
    );
    assert!(listed_ids(&up, "/v1/projects?label=team:db", "projects")
        .await
        .is_empty());
    assert_eq!(
        listed_ids(&up, "/v1/projects", "projects").await,
        [project.as_str(), other.as_str()]
    );

    let reply = up
        .call(
            "POST",
            &format!("/v1/projects/{project}/databases"),
            Some(r#"{"name":"shop","labels":{"tier":"gold"}}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let database = text(&reply.json()["database"], "id");
    up.wait_operation(&text(&reply.json()["operation"], "id")).await;
    let plain = text(&up.create_database(&project, "plain").await, "id");
    let databases = format!("/v1/projects/{project}/databases");
    assert_eq!(
        listed_ids(&up, &format!("{databases}?label=tier:gold"), "databases").await,
        [database.as_str()]
    );
    assert_eq!(
        listed_ids(&up, &format!("{databases}?limit=1"), "databases").await,
        [database.as_str()]
    );

    let branches = format!("/v1/databases/{database}/branches");
    let pr = create_branch(
        &up,
        &database,
        r#"{"name":"pr-12","labels":{"pr":"12","kind":"preview"}}"#,
    )
    .await;
    let pr_id = text(&pr, "id");
    let other_pr = create_branch(
        &up,
        &database,
        r#"{"name":"pr-13","labels":{"pr":"13","kind":"preview"}}"#,
    )
    .await;
    assert_eq!(
        listed_ids(&up, &format!("{branches}?label=pr:12"), "branches").await,
        [pr_id.as_str()]
    );
    assert_eq!(
        listed_ids(&up, &format!("{branches}?label=kind:preview&limit=1"), "branches").await,
        [pr_id.as_str()],
        "a filter pages like any list"
    );
    let reply = up
        .call("GET", &format!("{branches}?label=kind:preview&limit=1"), None)
        .await
        .json();
    let cursor = text(&reply, "next_cursor");
    assert_eq!(
        listed_ids(
            &up,
            &format!("{branches}?label=kind:preview&cursor={cursor}"),
            "branches"
        )
        .await,
        [text(&other_pr, "id")]
    );

    // PATCH replaces the whole map; `{}` removes every label.
    for (path, body) in [
        (format!("/v1/projects/{project}"), r#"{"labels":{"team":"data"}}"#),
        (format!("/v1/databases/{plain}"), r#"{"labels":{"tier":"gold"}}"#),
        (format!("/v1/branches/{pr_id}"), r#"{"labels":{}}"#),
    ] {
        let reply = up.call("PATCH", &path, Some(body)).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    }
    assert!(listed_ids(&up, "/v1/projects?label=team:web", "projects")
        .await
        .is_empty());
    assert!(listed_ids(&up, &format!("{branches}?label=pr:12"), "branches")
        .await
        .is_empty());

    // Bad labels and bad filters are 400, and nothing changes.
    let many: serde_json::Map<String, Value> = (0..65).map(|i| (format!("k{i}"), Value::from("v"))).collect();
    let many = serde_json::json!({ "labels": many }).to_string();
    let long_value = format!(r#"{{"labels":{{"k":"{}"}}}}"#, "v".repeat(256));
    for body in [
        many.as_str(),
        r#"{"labels":{"bad key":"v"}}"#,
        r#"{"labels":{"":"v"}}"#,
        r#"{"labels":{"k":1}}"#,
        r#"{"labels":["k"]}"#,
        long_value.as_str(),
        // serde reads a struct from an array too; the schema says object.
        "[null, null]",
    ] {
        up.call("PATCH", &format!("/v1/projects/{project}"), Some(body))
            .await
            .assert_error(400, "invalid_request");
    }
    for filter in ["label=", "label=:x", "label=bad%20key:x"] {
        up.call("GET", &format!("/v1/projects?{filter}"), None)
            .await
            .assert_error(400, "invalid_request");
    }

    // Labels are in the metadata: a restart keeps them.
    up.process.kill9();
    up.process.restart();
    assert_eq!(
        listed_ids(&up, "/v1/projects?label=team:data", "projects").await,
        [project.as_str()]
    );
    assert_eq!(
        listed_ids(&up, &format!("{databases}?label=tier:gold"), "databases").await,
        [database.as_str(), plain.as_str()]
    );
    assert_eq!(
        listed_ids(&up, &format!("{branches}?label=pr:13"), "branches").await,
        [text(&other_pr, "id")]
    );
}

/// The schema diff of branch `id` with `query`, asserting 200; the `schema_diff` object.
async fn schema_diff(up: &Up, id: &str, query: &str) -> Value {
    let reply = up
        .call("GET", &format!("/v1/branches/{id}/schema_diff{query}"), None)
        .await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.body);
    reply.json()["schema_diff"].clone()
}

/// The `(kind, change, name)` of each change of a schema diff.
fn change_list(diff: &Value) -> Vec<(String, String, String)> {
    diff["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("changes: {diff}"))
        .iter()
        .map(|c| (text(c, "kind"), text(c, "change"), text(c, "name")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_diff_compares_each_side_at_its_point() {
    let up = Up::start();
    let project = up.create_project("p").await;
    let database = up.create_database(&project, "app").await;
    let database_id = text(&database, "id");
    let main = text(&database, "default_branch_id");
    let main_uri = up.uri(&database);
    connect(&main_uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE users (id BIGINT PRIMARY KEY, email TEXT NOT NULL)")
        .await
        .expect("create table");
    let dev = create_branch(&up, &database_id, r#"{"name":"dev"}"#).await;
    let dev_id = text(&dev, "id");
    let fork = text(&dev, "parent_lsn");
    // Nothing changed yet: no changes, an empty diff.
    let same = schema_diff(&up, &dev_id, "").await;
    assert_eq!(same["changes"], serde_json::json!([]), "{same}");
    assert_eq!(same["diff"], "");
    assert_eq!(same["base_branch_id"], main.as_str(), "the parent by default");

    // The migration on the preview branch.
    connect(&up.uri(&dev))
        .await
        .expect("connect")
        .batch_execute(
            "ALTER TABLE users ADD COLUMN name VARCHAR(20);
             CREATE INDEX users_email ON users (email);
             CREATE TABLE posts (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, body TEXT);
             CREATE VIEW user_ids AS SELECT id FROM users;",
        )
        .await
        .expect("migrate");
    // And a change on main after the fork.
    connect(&main_uri)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE audit (at TIMESTAMPTZ)")
        .await
        .expect("create table");

    let diff = schema_diff(&up, &dev_id, &format!("?base_branch_id={main}")).await;
    let expected = |extra: &[(&str, &str, &str)]| {
        let mut all: Vec<(String, String, String)> = [
            ("table", "added", "posts"),
            ("column", "added", "users.name"),
            ("index", "added", "users_email"),
            ("view", "added", "user_ids"),
        ]
        .iter()
        .chain(extra)
        .map(|(k, c, n)| ((*k).to_owned(), (*c).to_owned(), (*n).to_owned()))
        .collect();
        all.sort_by_key(|(k, _, n)| {
            (
                ["table", "column", "index", "view", "trigger"]
                    .iter()
                    .position(|x| x == k),
                n.clone(),
            )
        });
        all
    };
    assert_eq!(change_list(&diff), expected(&[("table", "removed", "audit")]), "{diff}");
    let column = diff["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["name"] == "users.name")
        .expect("the column")
        .clone();
    assert!(text(&column, "target").contains("20"), "the PostgreSQL type: {column}");
    assert!(column.get("base").is_none(), "{column}");
    let unified = text(&diff, "diff");
    assert!(unified.starts_with(&format!("--- {main}@")), "{unified}");
    assert!(unified.contains(&format!("+++ {dev_id}@")), "{unified}");
    assert!(unified.contains("+CREATE TABLE posts ("), "{unified}");
    assert!(unified.contains("-CREATE TABLE audit ("), "{unified}");

    // Main as it was at the fork: the table made on main since is not in the base.
    let at_fork = schema_diff(&up, &dev_id, &format!("?base_lsn={fork}")).await;
    assert_eq!(at_fork["base_lsn"], fork.as_str());
    assert_eq!(change_list(&at_fork), expected(&[]), "{at_fork}");
    // The branch as it was at its start against main at the fork: the same schema.
    let before = schema_diff(&up, &dev_id, &format!("?base_lsn={fork}&lsn={fork}")).await;
    assert_eq!(before["changes"], serde_json::json!([]), "{before}");
    // By time: main now, the branch as of now.
    let now = jiff::Timestamp::now().to_string();
    let by_time = schema_diff(&up, &dev_id, &format!("?timestamp={now}")).await;
    assert_eq!(change_list(&by_time), change_list(&diff));

    // Refusals: both points of a side 400; no parent and no base 422; a base of another database 422.
    up.call(
        "GET",
        &format!("/v1/branches/{dev_id}/schema_diff?lsn={fork}&timestamp={now}"),
        None,
    )
    .await
    .assert_error(400, "invalid_request");
    up.call("GET", &format!("/v1/branches/{main}/schema_diff"), None)
        .await
        .assert_error(422, "unprocessable");
    let other = up.create_database(&project, "other").await;
    let other_main = text(&other, "default_branch_id");
    up.call(
        "GET",
        &format!("/v1/branches/{dev_id}/schema_diff?base_branch_id={other_main}"),
        None,
    )
    .await
    .assert_error(422, "unprocessable");
    up.call(
        "GET",
        &format!("/v1/branches/{dev_id}/schema_diff?base_branch_id=nope"),
        None,
    )
    .await
    .assert_error(400, "invalid_request");
}

/// The PostgreSQL type names of `table`'s columns as a session on `uri` types a `SELECT *` of it (the catalog the
/// session translates with, not only what `information_schema` reads).
async fn column_types(uri: &str, table: &str) -> Vec<String> {
    let client = connect(uri).await.expect("connect");
    let statement = client
        .prepare(&format!("SELECT * FROM {table}"))
        .await
        .expect("prepare");
    statement
        .columns()
        .iter()
        .map(|column| column.type_().name().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_starts_from_its_parents_catalog_only_at_the_same_schema() {
    // A new branch's sessions start from the catalog its parent's sessions read (compute host, `define_from`),
    // which is right only where the schema version at the branch point is the version of that catalog.
    let root = tempfile::tempdir().expect("tempdir");
    let up = Up::start_in(&root.path().join("cambium"), &[]);
    let project = up.create_project("p").await;
    let database = up.create_database(&project, "shop").await;
    let (database_id, uri) = (text(&database, "id"), up.uri(&database));
    let password = common::api::password_of(&uri).expect("the creation gives the password");
    let branch_uri = |branch: &Value| common::api::with_password(&text(branch, "connection_uri"), &password);
    let parent = connect(&uri).await.expect("connect");
    parent
        .batch_execute("CREATE TABLE m (a INT4, b TEXT); INSERT INTO m VALUES (1, 'x');")
        .await
        .expect("schema");
    assert_eq!(column_types(&uri, "m").await, ["int4", "text"]);
    let before = create_branch(&up, &database_id, r#"{"name":"before"}"#).await;
    let lsn = text(&before, "parent_lsn");
    // The parent's schema moves on, and its sessions share the newer catalog.
    parent
        .batch_execute("ALTER TABLE m ALTER COLUMN a TYPE INT8; ALTER TABLE m ADD COLUMN c BOOLEAN;")
        .await
        .expect("alter");
    assert_eq!(column_types(&uri, "m").await, ["int8", "text", "bool"]);
    // At the older point: the older schema, though the parent's catalog is newer.
    let old = create_branch(&up, &database_id, &format!(r#"{{"name":"old","parent_lsn":"{lsn}"}}"#)).await;
    assert_eq!(column_types(&branch_uri(&old), "m").await, ["int4", "text"]);
    assert_eq!(column_types(&branch_uri(&before), "m").await, ["int4", "text"]);
    // At the head: the newer one, in every session of it.
    let head = create_branch(&up, &database_id, r#"{"name":"head"}"#).await;
    for _ in 0..2 {
        assert_eq!(column_types(&branch_uri(&head), "m").await, ["int8", "text", "bool"]);
    }
    // The branch's own schema change is its own: the parent's sessions keep theirs.
    connect(&branch_uri(&head))
        .await
        .expect("connect")
        .batch_execute("ALTER TABLE m DROP COLUMN c")
        .await
        .expect("drop");
    assert_eq!(column_types(&branch_uri(&head), "m").await, ["int8", "text"]);
    assert_eq!(column_types(&uri, "m").await, ["int8", "text", "bool"]);
}
