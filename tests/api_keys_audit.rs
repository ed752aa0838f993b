//! Scoped API keys and the audit log (issue 15) against a real `cambium up`: keys made by `cambium keys create
//! --project … --read-only --expires-in …`; a read-only key gets 403 on every mutating route and reads as before; a
//! project key sees nothing of another project (404), cannot create projects, nor read `/metrics`; an expired key
//! is 401. Every mutating call on a project, refused ones included, is in `GET /v1/projects/{id}/audit` with the
//! key's id (never its secret), method, path, status and request id, newest first, and stays after a restart.

mod common;

use std::time::Duration;

use common::api::{Reply, Up};
use serde_json::Value;

/// The string field `field` of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// A key made by `cambium keys create <args>`: (secret, id).
fn create_key(up: &Up, args: &[&str]) -> (String, String) {
    let mut all = vec!["create"];
    all.extend_from_slice(args);
    let secret = up.keys(&all).trim().to_owned();
    assert!(secret.starts_with("cmb_"), "{secret}");
    let listed = up.keys(&["list"]);
    let last = listed.lines().last().expect("a key listed");
    let id = last.split('\t').next().expect("an id").to_owned();
    (secret, id)
}

/// A request with `key`.
async fn call_as(up: &Up, key: &str, method: &str, path: &str, body: Option<&str>) -> Reply {
    up.request(method, path, Some(key), body).await
}

/// The audit entries of `project` (newest first), read with the admin key.
async fn audit(up: &Up, project: &str) -> Vec<Value> {
    let reply = up
        .call("GET", &format!("/v1/projects/{project}/audit?limit=500"), None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        !reply.body.contains("cmb_"),
        "no secret in the audit log: {}",
        reply.body
    );
    reply.json()["audit_entries"].as_array().expect("entries").clone()
}

/// Whether `entries` hold one by key `key_id` of `method path` with `status`.
fn has_entry(entries: &[Value], key_id: &str, method: &str, path: &str, status: u16) -> bool {
    entries.iter().any(|e| {
        e["key_id"] == key_id && e["method"] == method && e["path"] == path && e["status"] == u64::from(status)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_keys_are_limited_and_every_mutating_call_is_audited() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &[]);
    let admin_id = up
        .keys(&["list"])
        .lines()
        .next()
        .expect("the admin key")
        .split('\t')
        .next()
        .expect("id")
        .to_owned();
    let a = up.create_project("a").await;
    let b = up.create_project("b").await;
    let database = up.create_database(&a, "shop").await;
    let database_id = text(&database, "id");
    let other_database = text(&up.create_database(&b, "other").await, "id");
    let (reader, reader_id) = create_key(&up, &["--project", &a, "--read-only"]);
    let (writer, writer_id) = create_key(&up, &["--project", &a]);
    let (short, _) = create_key(&up, &["--read-only", "--expires-in", "2s"]);
    let listed = up.keys(&["list"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&reader_id) && l.contains(&a) && l.contains("read-only")),
        "{listed}"
    );

    // The read-only project key reads its project and nothing else; every change is 403.
    let projects = call_as(&up, &reader, "GET", "/v1/projects", None).await;
    assert_eq!(projects.status, 200, "{}", projects.body);
    let ids: Vec<String> = projects.json()["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .map(|p| text(p, "id"))
        .collect();
    assert_eq!(ids, [a.as_str()]);
    assert_eq!(
        call_as(&up, &reader, "GET", &format!("/v1/databases/{database_id}"), None)
            .await
            .status,
        200
    );
    let branches = format!("/v1/databases/{database_id}/branches");
    for (method, path, body) in [
        ("POST", branches.as_str(), Some(r#"{"name":"x"}"#)),
        ("PATCH", &format!("/v1/projects/{a}"), Some(r#"{"name":"y"}"#)),
        ("DELETE", &format!("/v1/databases/{database_id}"), None),
        ("POST", &format!("/v1/databases/{database_id}/suspend"), None),
    ] {
        call_as(&up, &reader, method, path, body)
            .await
            .assert_error(403, "forbidden");
    }
    for path in [
        format!("/v1/projects/{b}"),
        format!("/v1/projects/{b}/databases"),
        format!("/v1/projects/{b}/operations"),
        format!("/v1/projects/{b}/audit"),
        format!("/v1/databases/{other_database}"),
        format!("/v1/databases/{other_database}/branches"),
    ] {
        call_as(&up, &reader, "GET", &path, None)
            .await
            .assert_error(404, "not_found");
    }

    // The read-write project key changes its project only.
    let reply = call_as(&up, &writer, "POST", &branches, Some(r#"{"name":"ci"}"#)).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    call_as(&up, &writer, "POST", "/v1/projects", Some(r#"{"name":"c"}"#))
        .await
        .assert_error(403, "forbidden");
    call_as(&up, &writer, "DELETE", &format!("/v1/projects/{b}"), None)
        .await
        .assert_error(404, "not_found");
    call_as(
        &up,
        &writer,
        "POST",
        &format!("/v1/databases/{other_database}/branches"),
        Some(r#"{"name":"z"}"#),
    )
    .await
    .assert_error(404, "not_found");
    call_as(&up, &writer, "GET", "/metrics", None)
        .await
        .assert_error(403, "forbidden");
    assert_eq!(
        up.call("GET", &format!("/v1/projects/{b}"), None).await.status,
        200,
        "b is intact"
    );

    // An expired key is refused like a revoked one.
    assert_eq!(call_as(&up, &short, "GET", "/v1/projects", None).await.status, 200);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    call_as(&up, &short, "GET", "/v1/projects", None)
        .await
        .assert_error(401, "unauthenticated");

    // The audit log: who, what, when, the result; refused calls too; reads are not in it.
    let entries = audit(&up, &a).await;
    assert!(
        has_entry(&entries, &admin_id, "POST", "/v1/projects", 201),
        "{entries:?}"
    );
    assert!(
        has_entry(&entries, &admin_id, "POST", &format!("/v1/projects/{a}/databases"), 201),
        "{entries:?}"
    );
    assert!(has_entry(&entries, &writer_id, "POST", &branches, 201), "{entries:?}");
    // Written once, in the branch row's own transaction (not again after the handler).
    let created = entries
        .iter()
        .filter(|e| e["key_id"] == writer_id.as_str() && e["path"] == branches.as_str() && e["status"] == 201)
        .count();
    assert_eq!(created, 1, "{entries:?}");
    assert!(has_entry(&entries, &reader_id, "POST", &branches, 403), "{entries:?}");
    assert!(
        has_entry(
            &entries,
            &reader_id,
            "DELETE",
            &format!("/v1/databases/{database_id}"),
            403
        ),
        "{entries:?}"
    );
    assert!(entries.iter().all(|e| e["method"] != "GET"), "{entries:?}");
    assert!(entries.iter().all(|e| e["project_id"] == a.as_str()), "{entries:?}");
    let newest_first: Vec<String> = entries.iter().map(|e| text(e, "id")).collect();
    let mut sorted = newest_first.clone();
    sorted.sort_unstable_by(|x, y| y.cmp(x));
    assert_eq!(newest_first, sorted);
    let first = &entries[0];
    assert!(text(first, "request_id").starts_with("req_"), "{first}");
    assert!(text(first, "created_at").ends_with('Z'), "{first}");
    let b_entries = audit(&up, &b).await;
    assert!(
        b_entries.iter().all(|e| e["key_id"] == admin_id.as_str()),
        "{b_entries:?}"
    );
    let page = up
        .call("GET", &format!("/v1/projects/{a}/audit?limit=2"), None)
        .await
        .json();
    assert_eq!(page["audit_entries"].as_array().expect("entries").len(), 2);
    assert!(page["next_cursor"].is_string(), "{page}");

    // Durable: the keys' scopes and the log survive a restart.
    up.process.kill9();
    up.process.restart();
    assert_eq!(audit(&up, &a).await.len(), entries.len());
    call_as(&up, &reader, "POST", &branches, Some(r#"{"name":"x"}"#))
        .await
        .assert_error(403, "forbidden");
    assert_eq!(audit(&up, &a).await.len(), entries.len() + 1);
}
