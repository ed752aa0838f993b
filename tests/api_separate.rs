//! `cambium api` alone, against three `cambium safekeeper`s and a `cambium pageserver` run as separate
//! processes (as on separate hosts): a database is created, written through SQL, branched, and read back; with
//! one safekeeper frozen a branch is still created and deleted, and an idle branch (no running store: its head
//! read from the safekeepers) branched, without waiting for the frozen one's timeout; and a creation left
//! unconfirmed by a kill -9 of the API is settled after the restart from a majority's answers.

mod common;

use common::api::{connect, free_port, password_of, request, with_password};
use common::cluster::Cluster;
use common::Process;
use proto::safekeeper as sk;
use storage::{Lsn, TenantId, TimelineId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_drives_storage_processes_of_its_own() {
    // The cluster's own tenant is unused: the API creates its databases' tenants itself.
    let mut cluster = Cluster::start(TenantId(0xA1), TimelineId(0xA2), Lsn(0x100_0000))
        .await
        .expect("storage processes");
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("api");
    let log = root.path().join("api.log");
    let mut args = cluster.api_args(&data_dir);
    // A branch's store stops 0.5 s after its last session (its head is then read from the safekeepers).
    args.extend(["--idle-store-timeout-ms".into(), "500".into()]);
    // A fixed PostgreSQL port, so the connection strings hold across the restart below.
    let pg_listen = args
        .iter()
        .position(|arg| arg == "--pg-listen")
        .expect("the PostgreSQL listener's flag");
    args[pg_listen + 1] = format!("127.0.0.1:{}", free_port());
    let mut api = Process::start_logged_with_env(args, &log, vec![("RUST_LOG".into(), "info".into())]);
    let key = std::fs::read_to_string(data_dir.join("api_key"))
        .expect("key")
        .trim()
        .to_owned();
    let api_address = api.address.clone();
    let call = |method: &'static str, path: String, body: Option<String>| {
        let (address, key) = (api_address.clone(), key.clone());
        async move { request(&address, method, &path, Some(&key), body.as_deref(), &[]).await }
    };

    let project = call("POST", "/v1/projects".into(), Some(r#"{"name":"p"}"#.to_owned()))
        .await
        .json()["project"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let created = call(
        "POST",
        format!("/v1/projects/{project}/databases"),
        Some(r#"{"name":"d"}"#.to_owned()),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let operation = created.json()["operation"]["id"].as_str().expect("op").to_owned();
    let ended = call("GET", format!("/v1/operations/{operation}?wait=30s"), None)
        .await
        .json();
    assert_eq!(ended["operation"]["status"], "finished", "{ended}");
    let database = created.json()["database"].clone();
    let uri = database["connection_uri"].as_str().expect("uri");

    let client = connect(uri).await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES (1), (2);")
        .await
        .expect("write");
    let branch = call(
        "POST",
        format!("/v1/databases/{}/branches", database["id"].as_str().expect("id")),
        Some(r#"{"name":"b"}"#.to_owned()),
    )
    .await;
    assert_eq!(branch.status, 201, "{}", branch.body);
    client.batch_execute("INSERT INTO t VALUES (3);").await.expect("write");
    // A branch's connection string has no password: it takes the database's, given by its creation.
    let password = password_of(uri).expect("the creation gives the password");
    let branch_uri = with_password(
        branch.json()["branch"]["connection_uri"].as_str().expect("uri"),
        &password,
    );
    let branch_client = connect(&branch_uri).await.expect("connect to the branch");
    let count: i64 = branch_client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 2, "the branch sees the parent as of the branch point");
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 3);

    // One safekeeper frozen (SIGSTOP: its connections stay open, its calls hang until their 10 s timeout): a
    // creation is done once a majority made the timeline, without waiting for the frozen one's timeout.
    cluster.safekeepers[2].signal("-STOP");
    let started = std::time::Instant::now();
    let frozen = call(
        "POST",
        format!("/v1/databases/{}/branches", database["id"].as_str().expect("id")),
        Some(r#"{"name":"while-one-is-frozen"}"#.to_owned()),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(frozen.status, 201, "{}", frozen.body);
    assert!(
        took < std::time::Duration::from_secs(7),
        "the creation waited {took:?} with one of three safekeepers frozen"
    );
    // Nor does a deletion wait for it (the frozen copy is left for a later deletion or the reconciler).
    let frozen_id = frozen.json()["branch"]["id"].as_str().expect("id").to_owned();
    let started = std::time::Instant::now();
    let deleted = call("DELETE", format!("/v1/branches/{frozen_id}"), None).await;
    let took = started.elapsed();
    cluster.safekeepers[2].signal("-CONT");
    assert!((200..300).contains(&deleted.status), "{}", deleted.body);
    assert!(
        took < std::time::Duration::from_secs(7),
        "the deletion waited {took:?} with one of three safekeepers frozen"
    );

    // Branch `b` idle: its store stops, and its latest state is what the safekeepers hold as committed. With one
    // of them frozen, a branch of it is made from a majority's answers (plus a short grace for the third), not
    // after the frozen one's timeout, and holds every row of `b`.
    drop(branch_client);
    let b = branch.json()["branch"].clone();
    let b_name = b["connection_uri"]
        .as_str()
        .and_then(|uri| uri.rsplit('/').next())
        .and_then(|tail| tail.split('?').next())
        .expect("the branch's database name")
        .to_owned();
    let stopped = |text: String| {
        text.lines()
            .any(|line| line.contains("stopped an idle branch's store") && line.contains(&b_name))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&log).is_ok_and(stopped) {
        assert!(
            std::time::Instant::now() < deadline,
            "{b_name}'s store was not stopped for idleness"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A first branch of it (not timed) reads every safekeeper's state, so the connections are up when one freezes.
    let b_id = b["id"].as_str().expect("id").to_owned();
    let branch_of_b = |name: &str| {
        call(
            "POST",
            format!("/v1/databases/{}/branches", database["id"].as_str().expect("id")),
            Some(format!(r#"{{"name":"{name}","parent_branch_id":"{b_id}"}}"#)),
        )
    };
    let warm = branch_of_b("warm-up").await;
    assert_eq!(warm.status, 201, "{}", warm.body);
    cluster.safekeepers[2].signal("-STOP");
    let started = std::time::Instant::now();
    let child = branch_of_b("child-of-idle").await;
    let took = started.elapsed();
    cluster.safekeepers[2].signal("-CONT");
    assert_eq!(child.status, 201, "{}", child.body);
    assert!(
        took < std::time::Duration::from_secs(7),
        "a branch of an idle branch waited {took:?} with one of three safekeepers frozen"
    );
    let child_uri = with_password(
        child.json()["branch"]["connection_uri"].as_str().expect("uri"),
        &password,
    );
    let count: i64 = connect(&child_uri)
        .await
        .expect("connect to the child")
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 2, "the child holds every row of its idle parent");

    // A creation's row stays *storage pending* until a later creation or the settling before its database is
    // served confirms it (the project has no webhook). The API killed right after the 201 leaves it pending;
    // after the restart, with one safekeeper frozen, the settling counts a majority's copies (and gives the
    // third a short grace) rather than waiting for the frozen one's timeout, and the branch is served.
    // The 201 comes once a majority of safekeepers made the timeline, so the kill may cut the third's creation
    // before it reached that safekeeper: here it always does (the copy made on safekeeper 1 is deleted before the
    // restart), so the settling finds one copy, one safekeeper without it and one frozen, and finishes the
    // creation on the one without it.
    let timelines_on = |index: usize| {
        let address = cluster.safekeepers[index].address.clone();
        async move {
            let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{address}"))
                .await
                .expect("a safekeeper client");
            client
                .list_timelines(sk::ListTimelinesRequest {})
                .await
                .expect("the safekeeper's timelines")
                .into_inner()
                .timelines
        }
    };
    let before = timelines_on(0).await;
    let pending = call(
        "POST",
        format!("/v1/databases/{}/branches", database["id"].as_str().expect("id")),
        Some(r#"{"name":"pending-at-crash"}"#.to_owned()),
    )
    .await;
    assert_eq!(pending.status, 201, "{}", pending.body);
    api.kill9();
    let made = timelines_on(0).await;
    let cut = made
        .iter()
        .find(|timeline| !before.contains(timeline))
        .expect("the pending creation's timeline on a majority, so on safekeeper 0 or 2")
        .clone();
    let mut one =
        sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", cluster.safekeepers[1].address))
            .await
            .expect("a client of safekeeper 1");
    // The third creation call may still be under way there: wait for it (it runs to its end once received)
    // for a while, then take the copy away as if the kill had come before the call.
    let wait_for_it = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while one.get_state(cut.clone()).await.is_err() && std::time::Instant::now() < wait_for_it {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    one.delete_timeline(cut.clone())
        .await
        .expect("safekeeper 1's copy deleted");
    let status = one.get_state(cut.clone()).await.err().map(|status| status.code());
    assert_eq!(
        status,
        Some(tonic::Code::NotFound),
        "safekeeper 1 lacks the cut creation's copy"
    );
    let pending_uri = with_password(
        pending.json()["branch"]["connection_uri"].as_str().expect("uri"),
        &password,
    );
    cluster.safekeepers[2].signal("-STOP");
    let started = std::time::Instant::now();
    api.restart();
    let count = count_once_served(
        &pending_uri,
        started + std::time::Duration::from_secs(30),
        &log,
        "the pending branch was not served",
    )
    .await;
    let took = started.elapsed();
    cluster.safekeepers[2].signal("-CONT");
    assert_eq!(
        count, 3,
        "the settled branch holds its parent's rows at its branch point"
    );
    assert!(
        one.get_state(cut.clone()).await.is_ok(),
        "the settling finished the cut creation on safekeeper 1"
    );
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        log_text.contains("finished a branch creation a crash cut before it reached this safekeeper"),
        "the settling says it finished the creation"
    );
    assert!(
        took < std::time::Duration::from_secs(7),
        "the pending creation was settled after {took:?} with one of three safekeepers frozen"
    );

    // A pending creation that cannot be settled when its database is served (two of three safekeepers down:
    // neither a majority with the copy nor one without it answers) refuses sessions saying why, not with a
    // password error, and is settled and served once they are back, without another restart of the API.
    let unsettled = call(
        "POST",
        format!("/v1/databases/{}/branches", database["id"].as_str().expect("id")),
        Some(r#"{"name":"unsettled-at-start"}"#.to_owned()),
    )
    .await;
    assert_eq!(unsettled.status, 201, "{}", unsettled.body);
    api.kill9();
    let unsettled_uri = with_password(
        unsettled.json()["branch"]["connection_uri"].as_str().expect("uri"),
        &password,
    );
    cluster.safekeepers[1].kill9();
    cluster.safekeepers[2].kill9();
    api.restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let refusal = loop {
        match connect(&unsettled_uri).await {
            Err(error) => {
                let text = described(&error);
                if text.contains("is being created") {
                    break text;
                }
                // Until the API listens, or serves the database.
                assert!(std::time::Instant::now() < deadline, "no refusal came: {text}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Ok(_) => panic!("a branch whose creation is not settled was served"),
        }
    };
    assert!(!refusal.contains("assword"), "{refusal}");
    cluster.safekeepers[1].restart();
    cluster.safekeepers[2].restart();
    let count = count_once_served(
        &unsettled_uri,
        std::time::Instant::now() + std::time::Duration::from_secs(30),
        &log,
        "the unsettled branch was not served once the safekeepers were back",
    )
    .await;
    assert_eq!(count, 3, "the branch settled late holds its parent's rows");
}

/// A client error with the server's message and SQLSTATE, when the server sent one (`Display` says "db error").
fn described(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {} ({:?})", db.severity(), db.message(), db.code()),
        None => format!("{error:?}"),
    }
}

/// `SELECT count(*) FROM t` on `uri`, tried every 50 ms until it answers; past `deadline` the test fails with
/// `what`, the last error and the API's log (`log`), last lines first.
async fn count_once_served(uri: &str, deadline: std::time::Instant, log: &std::path::Path, what: &str) -> i64 {
    loop {
        let tried = async {
            let client = connect(uri).await.map_err(|e| described(&e))?;
            let row = client
                .query_one("SELECT count(*) FROM t", &[])
                .await
                .map_err(|e| described(&e))?;
            Ok::<i64, String>(row.get(0))
        };
        match tried.await {
            Ok(count) => return count,
            Err(error) => {
                if std::time::Instant::now() >= deadline {
                    let log = std::fs::read_to_string(log).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(40).collect();
                    panic!("{what}: {error}\nthe API's log, last lines first:\n{}", tail.join("\n"));
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
