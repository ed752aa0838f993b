//! The web console's server side against a real `cambium up`: `/console` and its assets are served embedded with
//! their types and a same-origin Content-Security-Policy, without a key; `/console/sql` needs a key, runs SQL on a
//! branch of the key's account through the PostgreSQL listener with the database's password (rows as text, many
//! statements, a point in time read-only), reports SQL errors with their SQLSTATE (a wrong password is 28P01),
//! refuses another account's branch and one outside a project key's project (404), a read-only key's SQL other
//! than at a point in time (403), and malformed requests (400). The page itself is driven in headless
//! Chromium by `scripts/console.sh`.

mod common;

use common::api::{password_of, Up};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread")]
async fn the_console_is_served_and_its_sql_runs_on_the_accounts_branches() {
    let up = Up::start();
    for (path, content_type) in [
        ("/console", "text/html"),
        ("/console/", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/app.css", "text/css"),
        ("/console/icon.svg", "image/svg+xml"),
    ] {
        let reply = up.request("GET", path, None, None).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        assert!(
            reply
                .header("content-type")
                .is_some_and(|t| t.starts_with(content_type)),
            "{path}"
        );
        let policy = reply.header("content-security-policy").unwrap_or_default();
        assert!(
            policy.contains("default-src 'none'") && policy.contains("connect-src 'self'"),
            "{policy}"
        );
    }
    assert!(up
        .request("GET", "/console", None, None)
        .await
        .body
        .contains("id=\"signin-form\""));

    let project = up.create_project("console").await;
    let database = up.create_database(&project, "orders").await;
    let password = password_of(database["connection_uri"].as_str().expect("uri")).expect("a password");
    let main = database["default_branch_id"].as_str().expect("main").to_owned();
    let sql = |query: &str, at: Option<&str>, password: &str| {
        let mut body = serde_json::json!({"branch_id": main, "password": password, "query": query});
        if let Some(at) = at {
            body["at"] = Value::String(at.to_owned());
        }
        body.to_string()
    };

    // A key is needed.
    let reply = up
        .request("POST", "/console/sql", None, Some(&sql("SELECT 1", None, &password)))
        .await;
    reply.assert_error(401, "unauthenticated");
    // Statements run in order, rows as text; a point in time reads the branch as it was.
    let reply = up
        .call(
            "POST",
            "/console/sql",
            Some(&sql(
                "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a'), (2, NULL); \
                 SELECT id, v FROM t ORDER BY id",
                None,
                &password,
            )),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = reply.json();
    assert_eq!(result["error"], Value::Null, "{result}");
    let statements = result["statements"].as_array().expect("statements");
    assert_eq!(statements.len(), 3, "{result}");
    assert_eq!(statements[1]["row_count"], 2);
    assert_eq!(statements[2]["columns"], serde_json::json!(["id", "v"]));
    assert_eq!(statements[2]["rows"], serde_json::json!([["1", "a"], ["2", null]]));
    // A SQL error is a result with its SQLSTATE, after what ran before it.
    let reply = up
        .call(
            "POST",
            "/console/sql",
            Some(&sql("SELECT 1; SELECT * FROM missing", None, &password)),
        )
        .await;
    let result = reply.json();
    assert_eq!(result["error"]["sqlstate"], "42P01", "{result}");
    // A wrong password is PostgreSQL's 28P01.
    let reply = up
        .call("POST", "/console/sql", Some(&sql("SELECT 1", None, "wrong")))
        .await;
    assert_eq!(reply.json()["error"]["sqlstate"], "28P01", "{}", reply.body);
    // At a point in time: the branch as it was then, read-only.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let then = jiff::Timestamp::now().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let reply = up
        .call(
            "POST",
            "/console/sql",
            Some(&sql("INSERT INTO t VALUES (3, 'c')", None, &password)),
        )
        .await;
    assert_eq!(reply.json()["error"], Value::Null, "{}", reply.body);
    let reply = up
        .call(
            "POST",
            "/console/sql",
            Some(&sql("SELECT count(*) FROM t", Some(&then), &password)),
        )
        .await;
    assert_eq!(
        reply.json()["statements"][0]["rows"],
        serde_json::json!([["2"]]),
        "{}",
        reply.body
    );
    let reply = up
        .call(
            "POST",
            "/console/sql",
            Some(&sql("INSERT INTO t VALUES (4, 'd')", Some(&then), &password)),
        )
        .await;
    assert!(
        reply.json()["error"]["sqlstate"].is_string(),
        "read-only: {}",
        reply.body
    );
    // Another account's branch is not found; malformed requests are refused.
    let other_key = up.keys(&["create", "--new-account"]).trim().to_owned();
    let reply = up
        .request(
            "POST",
            "/console/sql",
            Some(&other_key),
            Some(&sql("SELECT 1", None, &password)),
        )
        .await;
    reply.assert_error(404, "not_found");
    // A read-only key reads only at a point in time; a key of another project sees no branch here.
    let read_only = up.keys(&["create", "--read-only"]).trim().to_owned();
    let reply = up
        .request(
            "POST",
            "/console/sql",
            Some(&read_only),
            Some(&sql("SELECT 1", None, &password)),
        )
        .await;
    reply.assert_error(403, "forbidden");
    let reply = up
        .request(
            "POST",
            "/console/sql",
            Some(&read_only),
            Some(&sql("SELECT count(*) FROM t", Some(&then), &password)),
        )
        .await;
    assert_eq!(
        reply.json()["statements"][0]["rows"],
        serde_json::json!([["2"]]),
        "{}",
        reply.body
    );
    let elsewhere = up.create_project("elsewhere").await;
    let scoped = up.keys(&["create", "--project", &elsewhere]).trim().to_owned();
    let reply = up
        .request(
            "POST",
            "/console/sql",
            Some(&scoped),
            Some(&sql("SELECT 1", None, &password)),
        )
        .await;
    reply.assert_error(404, "not_found");
    let reply = up.call("POST", "/console/sql", Some(r#"{"branch_id": 1}"#)).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let reply = up
        .call("POST", "/console/sql", Some(&sql("SELECT 1", Some(""), &password)))
        .await;
    reply.assert_error(400, "invalid_request");
}
