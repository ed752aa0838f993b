//! Database passwords against a real `cambium up` over HTTP and SQL: a password is shown once, by the database's
//! creation or by `POST /v1/databases/{id}/reset_password`, and stored nowhere (the metadata keeps a SCRAM-SHA-256
//! verifier; responses kept for `Idempotency-Key` retries keep the connection string without it); every other
//! response shows the connection string without a password; a reset takes effect for new sessions on every name
//! of the database at once and survives a restart; metadata written by an older version, with the passwords in
//! plaintext, is migrated: the old password still works and is gone from every file.

mod common;

use std::path::Path;

use common::api::{connect, password_of, request, with_password, without_password, Reply, Up};
use serde_json::Value;

/// The string field `field` of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// Whether any file under `dir` holds the bytes of `secret`.
fn stored_anywhere(dir: &Path, secret: &str) -> Option<String> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(secret.len()).any(|w| w == secret.as_bytes()) {
                    return Some(path.display().to_string());
                }
            }
        }
    }
    None
}

/// A POST with an `Idempotency-Key`.
async fn post_once(up: &Up, path: &str, body: Option<&str>, key: &str) -> Reply {
    request(
        &up.process.address,
        "POST",
        path,
        Some(&up.key),
        body,
        &[("Idempotency-Key", key)],
    )
    .await
}

/// Asserts that a connection with `uri` is refused for its password (28P01).
async fn assert_password_refused(uri: &str) {
    let error = connect(uri).await.err().unwrap_or_else(|| panic!("{uri} was let in"));
    assert_eq!(error.code().map(|c| c.code()), Some("28P01"), "{uri}: {error:?}");
}

/// Asserts that `uri` serves SQL.
async fn assert_serves(uri: &str) {
    let client = connect(uri).await.unwrap_or_else(|e| panic!("{uri}: {e:?}"));
    client.query_one("SELECT 1", &[]).await.expect("SELECT 1");
}

/// Creates a database with an `Idempotency-Key` and waits for it; the creation's reply.
async fn create_database(up: &Up, project: &str, name: &str, key: &str) -> Reply {
    let reply = post_once(
        up,
        &format!("/v1/projects/{project}/databases"),
        Some(&format!(r#"{{"name":"{name}"}}"#)),
        key,
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let operation = up.wait_operation(&text(&reply.json()["operation"], "id")).await;
    assert_eq!(operation["status"], "finished", "{operation}");
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_is_shown_once_and_stored_nowhere() {
    let up = Up::start();
    let project = up.create_project("p").await;
    let created = create_database(&up, &project, "d", "create-d").await;
    let database = created.json()["database"].clone();
    let id = text(&database, "id");
    let uri = text(&database, "connection_uri");
    let password = password_of(&uri).expect("the creation shows the password");
    assert_eq!(password.len(), 32, "{uri}");
    assert_serves(&uri).await;

    // Everything else shows the connection strings without it.
    let branch = up
        .call("POST", &format!("/v1/databases/{id}/branches"), Some(r#"{"name":"b"}"#))
        .await;
    assert_eq!(branch.status, 201, "{}", branch.body);
    let branch_id = text(&branch.json()["branch"], "id");
    let mut replies = vec![branch];
    for (method, path, body) in [
        ("GET", format!("/v1/databases/{id}"), None),
        ("GET", format!("/v1/projects/{project}/databases"), None),
        ("GET", format!("/v1/databases/{id}/endpoints"), None),
        ("GET", format!("/v1/databases/{id}/branches"), None),
        ("GET", format!("/v1/branches/{branch_id}"), None),
        ("PATCH", format!("/v1/branches/{branch_id}"), Some(r#"{"name":"c"}"#)),
        ("PATCH", format!("/v1/databases/{id}"), Some(r#"{"name":"e"}"#)),
        ("POST", format!("/v1/databases/{id}/suspend"), None),
        ("POST", format!("/v1/databases/{id}/resume"), None),
    ] {
        replies.push(up.call(method, &path, body).await);
    }
    for reply in &replies {
        assert_eq!(reply.status / 100, 2, "{}", reply.body);
        assert!(reply.body.contains("postgresql://cambium@"), "{}", reply.body);
        assert!(!reply.body.contains(&password), "{}", reply.body);
    }
    let shown = up.call("GET", &format!("/v1/databases/{id}"), None).await.json()["database"].clone();
    assert_eq!(text(&shown, "connection_uri"), without_password(&uri));
    // That string is complete but for the password, which the client gives (here in the URI; PGPASSWORD works
    // too, see the README): a wrong one is refused like any.
    assert_serves(&with_password(&text(&shown, "connection_uri"), &password)).await;
    assert_password_refused(&with_password(&text(&shown, "connection_uri"), "wrong")).await;

    // A retry of the creation gets the database again, without the password.
    let replayed = post_once(
        &up,
        &format!("/v1/projects/{project}/databases"),
        Some(r#"{"name":"d"}"#),
        "create-d",
    )
    .await;
    assert_eq!(replayed.status, 201, "{}", replayed.body);
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    assert_eq!(replayed.json()["database"]["id"], database["id"]);
    assert_eq!(
        text(&replayed.json()["database"], "connection_uri"),
        without_password(&uri)
    );
    assert!(!replayed.body.contains(&password), "{}", replayed.body);

    // No file of the data directory holds it: the metadata has a verifier.
    assert_eq!(stored_anywhere(&up.data_dir, &password), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_password_takes_effect_at_once_on_every_name_and_survives_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &[]);
    let project = up.create_project("p").await;
    let created = create_database(&up, &project, "d", "create").await;
    let database = created.json()["database"].clone();
    let id = text(&database, "id");
    let old_uri = text(&database, "connection_uri");
    let old_password = password_of(&old_uri).expect("a password");
    let branch = up
        .call("POST", &format!("/v1/databases/{id}/branches"), Some(r#"{"name":"b"}"#))
        .await;
    assert_eq!(branch.status, 201, "{}", branch.body);
    let branch_uri = text(&branch.json()["branch"], "connection_uri");
    let open = connect(&old_uri).await.expect("connect");

    let reset = post_once(&up, &format!("/v1/databases/{id}/reset_password"), None, "reset-1").await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    let body = reset.json();
    assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
    assert_eq!(body["database"]["id"], id.as_str());
    let new_uri = text(&body["database"], "connection_uri");
    let new_password = password_of(&new_uri).expect("the reset shows the new password");
    assert_ne!(new_password, old_password);
    assert_eq!(without_password(&new_uri), without_password(&old_uri));

    // New sessions: the old password is refused on every name, the new one works; open sessions stay.
    for name_uri in [
        old_uri.clone(),
        with_password(&branch_uri, &old_password),
        // A time-travel name (`br_…@0/1000000`, percent-encoded in the URI) checks the same password.
        with_password(&branch_uri, &old_password).replace("?", "%400%2F1000000?"),
    ] {
        assert_password_refused(&name_uri).await;
    }
    assert_serves(&new_uri).await;
    assert_serves(&with_password(&branch_uri, &new_password)).await;
    open.query_one("SELECT 1", &[])
        .await
        .expect("an open session stays open");

    // A retry of the reset changes nothing and shows no password.
    let replayed = post_once(&up, &format!("/v1/databases/{id}/reset_password"), None, "reset-1").await;
    assert_eq!(replayed.status, 200, "{}", replayed.body);
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        text(&replayed.json()["database"], "connection_uri"),
        without_password(&new_uri)
    );
    assert_serves(&new_uri).await;

    // Unknown, malformed and other accounts' databases are 404.
    let stranger = up.keys(&["create", "--new-account"]).trim().to_owned();
    for (path, key) in [
        (format!("/v1/databases/{id}/reset_password"), stranger.as_str()),
        (
            "/v1/databases/db_01JD0000000000000000000000/reset_password".to_owned(),
            up.key.as_str(),
        ),
        ("/v1/databases/nope/reset_password".to_owned(), up.key.as_str()),
    ] {
        up.request("POST", &path, Some(key), None)
            .await
            .assert_error(404, "not_found");
    }
    up.call("GET", &format!("/v1/databases/{id}/reset_password"), None)
        .await
        .assert_error(405, "method_not_allowed");

    // A suspended database's password can be reset too; it holds after a resume and a restart.
    let suspended = up.call("POST", &format!("/v1/databases/{id}/suspend"), None).await;
    assert_eq!(suspended.status, 200, "{}", suspended.body);
    let reset = up
        .call("POST", &format!("/v1/databases/{id}/reset_password"), None)
        .await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    assert_eq!(reset.json()["database"]["status"], "suspended");
    let newest_uri = text(&reset.json()["database"], "connection_uri");
    let resumed = up.call("POST", &format!("/v1/databases/{id}/resume"), None).await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_serves(&newest_uri).await;
    assert_password_refused(&new_uri).await;
    up.process.kill9();
    up.process.restart();
    assert_serves(&newest_uri).await;
    assert_password_refused(&new_uri).await;
    for secret in [
        &old_password,
        &new_password,
        &password_of(&newest_uri).expect("password"),
    ] {
        assert_eq!(stored_anywhere(&up.data_dir, secret), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_with_plaintext_passwords_from_an_older_version_is_migrated() {
    use compute::rusqlite;

    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &[]);
    let project = up.create_project("p").await;
    let created = create_database(&up, &project, "d", "create").await;
    let database = created.json()["database"].clone();
    let id = text(&database, "id");
    let uri = text(&database, "connection_uri");
    let password = password_of(&uri).expect("a password");
    {
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES (7);")
            .await
            .expect("write");
    }
    up.process.kill9();

    // Turn the metadata back into what schema version 3 wrote: the password in the database's row and in the
    // stored response of its creation, no verifier, and nothing of the migrations after the passwords' (each
    // new migration is undone here too, last first).
    {
        let conn = rusqlite::Connection::open(up.data_dir.join("metadata.sqlite")).expect("open the metadata");
        conn.execute_batch(
            "DROP INDEX audit_by_project_seq;
             ALTER TABLE audit_log DROP COLUMN seq;
             DROP INDEX deliveries_held;
             ALTER TABLE webhook_deliveries DROP COLUMN held_for_timeline;
             ALTER TABLE timelines DROP COLUMN retired;
             DROP TABLE idempotency_reservations;
             ALTER TABLE timelines DROP COLUMN storage_pending;
             ALTER TABLE databases DROP COLUMN pageserver;
             DROP INDEX timeline_safekeepers_by_database;
             DROP TABLE timeline_safekeepers;
             DROP INDEX databases_by_compute_host;
             ALTER TABLE databases DROP COLUMN compute_host;
             DROP TABLE compute_hosts;
             DROP INDEX rate_limit_counts_by_window;
             DROP TABLE rate_limit_counts;
             ALTER TABLE operations DROP COLUMN lease_expires_at;
             ALTER TABLE operations DROP COLUMN lease_owner;
             ALTER TABLE databases DROP COLUMN suspended_reason;
             ALTER TABLE databases DROP COLUMN suspend_timeout_seconds;
             DROP TABLE consumption_cursors;
             DROP TABLE consumption;
             DROP TABLE webhook_deliveries;
             DROP TABLE webhooks;
             DROP INDEX audit_by_project;
             DROP TABLE audit_log;
             ALTER TABLE api_keys DROP COLUMN expires_at;
             ALTER TABLE api_keys DROP COLUMN read_only;
             ALTER TABLE api_keys DROP COLUMN project_id;
             ALTER TABLE branches DROP COLUMN labels;
             ALTER TABLE databases DROP COLUMN labels;
             ALTER TABLE projects DROP COLUMN labels;
             DROP INDEX branches_by_expiry;
             ALTER TABLE branches DROP COLUMN expires_at;
             ALTER TABLE branches DROP COLUMN protected;",
        )
        .expect("undo the migrations after version 4");
        conn.execute_batch(&format!(
            "ALTER TABLE databases ADD COLUMN password TEXT NOT NULL DEFAULT '';
             UPDATE databases SET password = '{password}';
             ALTER TABLE databases DROP COLUMN password_verifier;
             UPDATE idempotency_keys SET body = CAST('{}' AS BLOB);
             UPDATE schema_version SET version = 3;",
            created.body.replace('\'', "''")
        ))
        .expect("downgrade");
    }
    assert!(
        stored_anywhere(&up.data_dir, &password).is_some(),
        "the old version's plaintext"
    );

    up.process.restart();
    // The old password still opens the database (its verifier was computed from it), its data is there, and it
    // is in no file any more, nor in the replayed creation.
    let client = connect(&uri).await.expect("the old password works after the migration");
    let row = client.query_one("SELECT id FROM t", &[]).await.expect("select");
    assert_eq!(row.get::<_, i64>(0), 7);
    assert_password_refused(&with_password(&without_password(&uri), "wrong")).await;
    let replayed = post_once(
        &up,
        &format!("/v1/projects/{project}/databases"),
        Some(r#"{"name":"d"}"#),
        "create",
    )
    .await;
    assert_eq!(replayed.status, 201, "{}", replayed.body);
    assert_eq!(replayed.json()["database"]["id"], id.as_str());
    assert!(!replayed.body.contains(&password), "{}", replayed.body);
    let shown = up.call("GET", &format!("/v1/databases/{id}"), None).await;
    assert!(!shown.body.contains(&password), "{}", shown.body);
    drop(client);
    assert_eq!(stored_anywhere(&up.data_dir, &password), None);
}
