//! Per-account quotas against a real `cambium up` over HTTP: projects per account, databases per account and
//! branches per database (a restore that keeps a branch counts as one) are refused past their limit with 403
//! `quota_exceeded` naming the limit and the count, before anything is created (no row, no operation, no
//! storage); deleting makes room again; accounts are counted apart; concurrent creations never pass a limit.

mod common;

use common::api::{request, Reply, Up};
use serde_json::Value;

/// The string field `field` of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

/// Asserts a 403 `quota_exceeded` whose message contains each of `parts`.
fn assert_quota(reply: &Reply, parts: &[&str]) {
    reply.assert_error(403, "quota_exceeded");
    let message = text(&reply.json()["error"], "message");
    for part in parts {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
}

/// The number of items of list `field` at `path`.
async fn count(up: &Up, path: &str, field: &str) -> usize {
    let reply = up.call("GET", path, None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()[field].as_array().expect("a list").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_databases_and_branches_are_refused_past_their_quotas() {
    let up = Up::start_with(&[
        "--projects-per-account-max",
        "2",
        "--databases-per-account-max",
        "2",
        "--branches-per-database-max",
        "3",
    ]);

    // Projects: two, then 403 naming the count and the limit; a deletion makes room.
    let first = up.create_project("one").await;
    let second = up.create_project("two").await;
    let refused = up.call("POST", "/v1/projects", Some(r#"{"name":"three"}"#)).await;
    assert_quota(&refused, &["2 projects", "quota is 2"]);
    assert_eq!(count(&up, "/v1/projects", "projects").await, 2);
    let deleted = up.call("DELETE", &format!("/v1/projects/{second}"), None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let second = up.create_project("two again").await;
    // Another account has quotas of its own.
    let stranger = up.keys(&["create", "--new-account"]).trim().to_owned();
    for name in ["a", "b"] {
        let reply = up
            .request(
                "POST",
                "/v1/projects",
                Some(&stranger),
                Some(&format!(r#"{{"name":"{name}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
    }

    // Databases: two across the account's projects, then 403 with no row and no operation.
    let database = up.create_database(&first, "a").await;
    up.create_database(&second, "b").await;
    let refused = up
        .call(
            "POST",
            &format!("/v1/projects/{first}/databases"),
            Some(r#"{"name":"c"}"#),
        )
        .await;
    assert_quota(&refused, &["2 databases", "quota is 2"]);
    assert_eq!(
        count(&up, &format!("/v1/projects/{first}/databases"), "databases").await,
        1
    );
    assert_eq!(
        count(&up, &format!("/v1/projects/{first}/operations"), "operations").await,
        1
    );

    // Branches: the default one and two more, then 403; a restore that keeps a branch is one more.
    let database_id = text(&database, "id");
    let main = text(&database, "default_branch_id");
    let branches = format!("/v1/databases/{database_id}/branches");
    let b1 = up.call("POST", &branches, Some(r#"{"name":"b1"}"#)).await;
    assert_eq!(b1.status, 201, "{}", b1.body);
    let lsn = text(&b1.json()["branch"], "parent_lsn");
    let b2 = up.call("POST", &branches, Some(r#"{"name":"b2"}"#)).await;
    assert_eq!(b2.status, 201, "{}", b2.body);
    let refused = up.call("POST", &branches, Some(r#"{"name":"b3"}"#)).await;
    assert_quota(&refused, &["3 branches", "quota is 3"]);
    assert_eq!(count(&up, &branches, "branches").await, 3);
    let restore = format!("/v1/branches/{main}/restore");
    let refused = up
        .call("POST", &restore, Some(&format!(r#"{{"target_lsn":"{lsn}"}}"#)))
        .await;
    assert_quota(&refused, &["3 branches", "quota is 3", "preserve"]);
    let restored = up
        .call(
            "POST",
            &restore,
            Some(&format!(r#"{{"target_lsn":"{lsn}","preserve":false}}"#)),
        )
        .await;
    assert_eq!(restored.status, 202, "{}", restored.body);
    let operation = up.wait_operation(&text(&restored.json()["operation"], "id")).await;
    assert_eq!(operation["status"], "finished", "{operation}");
    assert_eq!(count(&up, &branches, "branches").await, 3);
    let b2_id = text(&b2.json()["branch"], "id");
    let deleted = up.call("DELETE", &format!("/v1/branches/{b2_id}"), None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let b3 = up.call("POST", &branches, Some(r#"{"name":"b3"}"#)).await;
    assert_eq!(b3.status, 201, "{}", b3.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creations_never_pass_a_quota() {
    const ATTEMPTS: usize = 16;
    let up = Up::start_with(&["--projects-per-account-max", "5", "--branches-per-database-max", "4"]);
    let post_all = |path: String, bodies: Vec<String>| {
        let (address, key) = (up.process.address.clone(), up.key.clone());
        async move {
            let mut requests = tokio::task::JoinSet::new();
            for body in bodies {
                let (address, key, path) = (address.clone(), key.clone(), path.clone());
                requests.spawn(async move { request(&address, "POST", &path, Some(&key), Some(&body), &[]).await });
            }
            let mut statuses = Vec::new();
            while let Some(reply) = requests.join_next().await {
                let reply = reply.expect("a request");
                if reply.status != 201 {
                    assert_quota(&reply, &["quota is"]);
                }
                statuses.push(reply.status);
            }
            statuses
        }
    };
    let bodies = (0..ATTEMPTS).map(|i| format!(r#"{{"name":"p{i}"}}"#)).collect();
    let statuses = post_all("/v1/projects".to_owned(), bodies).await;
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 5, "{statuses:?}");
    assert_eq!(count(&up, "/v1/projects", "projects").await, 5);

    let projects = up.call("GET", "/v1/projects", None).await.json();
    let project = text(&projects["projects"][0], "id");
    let database = up.create_database(&project, "d").await;
    let database_id = text(&database, "id");
    let branches = format!("/v1/databases/{database_id}/branches");
    let bodies = (0..ATTEMPTS / 2).map(|i| format!(r#"{{"name":"b{i}"}}"#)).collect();
    let statuses = post_all(branches.clone(), bodies).await;
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 3, "{statuses:?}");
    assert_eq!(count(&up, &branches, "branches").await, 4);
}

#[test]
fn the_quotas_are_flags_with_environment_variables_and_defaults() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cambium"))
        .args(["up", "--help"])
        .output()
        .expect("run cambium up --help");
    let help = String::from_utf8(output.stdout).expect("utf-8");
    for (flag, env, default) in [
        ("--projects-per-account-max", "CAMBIUM_PROJECTS_PER_ACCOUNT_MAX", "100"),
        (
            "--databases-per-account-max",
            "CAMBIUM_DATABASES_PER_ACCOUNT_MAX",
            "100",
        ),
        (
            "--branches-per-database-max",
            "CAMBIUM_BRANCHES_PER_DATABASE_MAX",
            "500",
        ),
    ] {
        let line = help
            .split("\n\n")
            .find(|block| block.contains(flag))
            .unwrap_or_else(|| panic!("{flag} not in:\n{help}"));
        assert!(line.contains(env), "{line}");
        assert!(line.contains(&format!("[default: {default}]")), "{line}");
    }
}
