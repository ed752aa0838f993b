//! Moving a database's tenant between pageservers (issue 17 item 2), all real processes: three safekeepers,
//! two `cambium pageserver`s on one local-directory remote, one `cambium api --pageservers a,b`.
//!
//! A database under the bank workload (`common::bank`), with a reader summing the balances in a loop on a
//! session of its own, is moved from the first pageserver to the second with the admin route
//! (`POST /admin/databases/{id}/move_pageserver`): every acknowledged transfer is kept, the reader's session
//! stays open and its reads answer throughout (the errors any client saw are counted and printed, and must be
//! none), the source's `ListTenants` lacks the tenant afterwards and the target's has it, the remote copy is
//! marked with the target's id, and a branch and a restore work after the move. Then the move back, with the
//! API killed -9 while the target holds the tenant as a secondary (a fault pause right after the attach):
//! restarted, it resumes the operation, which finishes; nothing acknowledged is lost.

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::api::{connect, free_port, password_of, request, with_password};
use common::bank::{self, Bank};
use common::{Logs, Process};
use proto::pageserver as ps;
use serde_json::Value;

/// Three safekeepers, two pageservers sharing a remote, and the API over them.
struct Deployment {
    _safekeepers: Vec<Process>,
    pageservers: Vec<Process>,
    api: Process,
    key: String,
    data_dir: PathBuf,
    _logs: Logs,
    root: tempfile::TempDir,
}

/// The processes' logs at `info` (their stderr, printed if the test fails).
fn info() -> Vec<(String, String)> {
    vec![("RUST_LOG".to_owned(), "info".to_owned())]
}

/// Three safekeepers and two pageservers (ids `ps1`, `ps2`) sharing a local-directory remote under `root`, their
/// logs there: (the safekeepers, their addresses, the pageservers).
fn start_storage(root: &std::path::Path) -> (Vec<Process>, Vec<String>, Vec<Process>) {
    let safekeepers: Vec<Process> = (1..=3)
        .map(|id| Process::safekeeper(id, &root.join(format!("sk{id}"))))
        .collect();
    let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
    let remote = format!("file://{}", root.join("remote").display());
    let pageservers: Vec<Process> = (1..=2)
        .map(|n| {
            Process::start_logged_with_env(
                vec![
                    "pageserver".into(),
                    "--data-dir".into(),
                    root.join(format!("ps{n}")).display().to_string(),
                    "--safekeepers".into(),
                    addresses.join(","),
                    "--remote".into(),
                    remote.clone(),
                    "--id".into(),
                    format!("ps{n}"),
                ],
                &root.join(format!("ps{n}.log")),
                info(),
            )
        })
        .collect();
    (safekeepers, addresses, pageservers)
}

impl Deployment {
    fn start(api_extra: &[&str]) -> Deployment {
        let root = tempfile::tempdir().expect("tempdir");
        let log = |name: &str| root.path().join(format!("{name}.log"));
        let (safekeepers, addresses, pageservers) = start_storage(root.path());
        let data_dir = root.path().join("api");
        let pageserver_list: Vec<String> = pageservers.iter().map(|p| p.address.clone()).collect();
        let mut api_args: Vec<String> = vec![
            "api".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--pg-listen".into(),
            format!("127.0.0.1:{}", free_port()),
            "--pageservers".into(),
            pageserver_list.join(","),
            "--safekeepers".into(),
            addresses.join(","),
        ];
        api_args.extend(api_extra.iter().map(|arg| (*arg).to_owned()));
        let api = Process::start_logged_with_env(api_args, &log("api"), info());
        let key = std::fs::read_to_string(data_dir.join("api_key"))
            .expect("key")
            .trim()
            .to_owned();
        Deployment {
            _safekeepers: safekeepers,
            pageservers,
            api,
            key,
            data_dir,
            _logs: Logs(vec![log("api"), log("ps1"), log("ps2")]),
            root,
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<&str>) -> common::api::Reply {
        request(&self.api.address, method, path, Some(&self.key), body, &[]).await
    }

    /// Waits for operation `id` to end (through the admin route, which reads any account's); its JSON.
    /// A project and a database named `name` in it, its creation finished: the database's object, id and URI.
    async fn create_database(&self, name: &str) -> (Value, String, String) {
        let project = self.call("POST", "/v1/projects", Some(r#"{"name":"p"}"#)).await.json()["project"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let reply = self
            .call(
                "POST",
                &format!("/v1/projects/{project}/databases"),
                Some(&format!(r#"{{"name":"{name}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let database = reply.json()["database"].clone();
        let operation = reply.json()["operation"]["id"].as_str().expect("id").to_owned();
        assert_eq!(self.wait_operation(&operation).await["status"], "finished");
        let database_id = database["id"].as_str().expect("id").to_owned();
        let uri = database["connection_uri"].as_str().expect("uri").to_owned();
        (database, database_id, uri)
    }

    async fn wait_operation(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let reply = self
                .call("GET", &format!("/admin/operations/{id}?wait=30s"), None)
                .await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let operation = reply.json()["operation"].clone();
            if operation["status"] != "running" {
                return operation;
            }
            assert!(Instant::now() < deadline, "operation {id} still running: {operation}");
        }
    }

    /// Starts moving `database` to pageserver `index`; the operation's id.
    async fn start_move(&self, database: &str, index: usize) -> String {
        let body = format!(r#"{{"pageserver":"{}"}}"#, self.pageservers[index].address);
        let reply = self
            .call(
                "POST",
                &format!("/admin/databases/{database}/move_pageserver"),
                Some(&body),
            )
            .await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        let operation = reply.json()["operation"].clone();
        assert_eq!(operation["action"], "move_pageserver", "{operation}");
        operation["id"].as_str().expect("id").to_owned()
    }

    /// The tenants pageserver `index` holds.
    async fn tenants_on(&self, index: usize) -> Vec<String> {
        let mut client =
            ps::management_client::ManagementClient::connect(format!("http://{}", self.pageservers[index].address))
                .await
                .expect("connect to the pageserver");
        client
            .list_tenants(ps::ListTenantsRequest {})
            .await
            .expect("list tenants")
            .into_inner()
            .tenant_ids
    }

    /// The database's tenant and pageserver column, read from the metadata file.
    fn placement(&self, database: &str) -> (String, Option<String>) {
        let conn =
            compute::rusqlite::Connection::open(self.data_dir.join("metadata.sqlite")).expect("open the metadata");
        conn.query_row(
            "SELECT tenant_id, pageserver FROM databases WHERE id = ?1",
            [database],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("the database's row")
    }

    /// The operations of `action` on `database` (id and status, oldest first), read from the metadata file.
    fn operations_of(&self, database: &str, action: &str) -> Vec<(String, String)> {
        let conn =
            compute::rusqlite::Connection::open(self.data_dir.join("metadata.sqlite")).expect("open the metadata");
        let mut stmt = conn
            .prepare("SELECT id, status FROM operations WHERE database_id = ?1 AND action = ?2 ORDER BY id")
            .expect("prepare");
        let rows = stmt
            .query_map([database, action], |row| Ok((row.get(0)?, row.get(1)?)))
            .expect("operations");
        rows.collect::<Result<_, _>>().expect("operations")
    }

    /// The durable mark under which pageserver `index` deletes no remote layer of `tenant` (a move's hold).
    fn hold_mark(&self, index: usize, tenant: &str) -> PathBuf {
        self.root
            .path()
            .join(format!("ps{}", index + 1))
            .join("hold_deletions")
            .join(tenant)
    }

    fn remote_owner(&self, tenant: &str) -> Option<String> {
        std::fs::read_to_string(
            self.root
                .path()
                .join("remote")
                .join("tenants")
                .join(tenant)
                .join("owner"),
        )
        .ok()
    }

    /// Whether the remote holds the tenant's branch log (its pageserver marks it as its owner one upload
    /// before: a rebuild or an attach needs the log too).
    fn remote_has_branch_log(&self, tenant: &str) -> bool {
        self.root
            .path()
            .join("remote")
            .join("tenants")
            .join(tenant)
            .join("branches.log")
            .exists()
    }
}

/// A session that sums the balances in a loop, reconnecting after an error; counts reads and errors.
struct Reader {
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
    reconnects: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Reader {
    fn start(uri: &str) -> Reader {
        let (stop, reads, errors, reconnects) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(AtomicU64::new(0)),
        );
        let task = {
            let (uri, stop, reads, errors, reconnects) = (
                uri.to_owned(),
                Arc::clone(&stop),
                Arc::clone(&reads),
                Arc::clone(&errors),
                Arc::clone(&reconnects),
            );
            tokio::spawn(async move {
                let mut session = None;
                while !stop.load(Ordering::SeqCst) {
                    let client = match session.take() {
                        Some(client) => client,
                        None => match connect(&uri).await {
                            Ok(client) => {
                                reconnects.fetch_add(1, Ordering::SeqCst);
                                client
                            }
                            Err(error) => {
                                errors.lock().expect("lock").push(format!("connect: {error}"));
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                continue;
                            }
                        },
                    };
                    let read = tokio::time::timeout(
                        Duration::from_secs(20),
                        client.query("SELECT balance FROM accounts", &[]),
                    )
                    .await;
                    match read {
                        Ok(Ok(rows)) => {
                            let total: Result<i64, _> = rows.iter().map(|row| row.try_get::<_, i64>(0)).sum();
                            match total {
                                Ok(total) if total == bank::ACCOUNTS * bank::INITIAL_BALANCE => {
                                    reads.fetch_add(1, Ordering::SeqCst);
                                }
                                other => errors.lock().expect("lock").push(format!("the total: {other:?}")),
                            }
                            session = Some(client);
                        }
                        Ok(Err(error)) => errors.lock().expect("lock").push(bank::error_text(&error)),
                        Err(_) => errors.lock().expect("lock").push("no answer in 20 s".to_owned()),
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        Reader {
            stop,
            reads,
            errors,
            reconnects,
            task,
        }
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    fn errors(&self) -> Vec<String> {
        self.errors.lock().expect("lock").clone()
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the reader");
    }
}

/// The bank's attempts that did not succeed, ended after `since`.
fn failed_since(bank: &Bank, since: Instant) -> Vec<String> {
    bank.attempts()
        .iter()
        .filter(|a| a.ended >= since)
        .filter_map(|a| match &a.outcome {
            bank::Outcome::Acknowledged => None,
            bank::Outcome::Unknown(e) | bank::Outcome::NotCommitted(e) => Some(e.clone()),
        })
        .chain(
            bank.failed_connects()
                .iter()
                .filter(|c| c.ended >= since)
                .map(|c| format!("connect: {}", c.error)),
        )
        .collect()
}

async fn branch_and_restore(deployment: &Deployment, database: &Value, uri: &str) {
    let database_id = database["id"].as_str().expect("id");
    let client = connect(uri).await.expect("connect");
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES (1)")
        .await
        .expect("write");
    let reply = deployment
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"after_move"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let branch = reply.json()["branch"].clone();
    let point = branch["parent_lsn"].as_str().expect("lsn").to_owned();
    let password = password_of(uri).expect("password");
    let branch_uri = with_password(branch["connection_uri"].as_str().expect("uri"), &password);
    let branch_client = connect(&branch_uri).await.expect("connect to the branch");
    let count: i64 = branch_client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("read the branch")
        .get(0);
    assert_eq!(count, 1, "the branch has the row");
    client.batch_execute("INSERT INTO t VALUES (2)").await.expect("write");
    let default_branch = database["default_branch_id"].as_str().expect("branch");
    let reply = deployment
        .call(
            "POST",
            &format!("/v1/branches/{default_branch}/restore"),
            Some(&format!(r#"{{"target_lsn":"{point}","preserve":false}}"#)),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let ended = deployment
        .wait_operation(reply.json()["operation"]["id"].as_str().expect("id"))
        .await;
    assert_eq!(ended["status"], "finished", "{ended}");
    let client = connect(uri).await.expect("connect after the restore");
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("read after the restore")
        .get(0);
    assert_eq!(count, 1, "restored to the branch point");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_moves_between_pageservers_under_load_and_through_an_api_crash() {
    let mut deployment = Deployment::start(&[]);
    let (database, database_id, uri) = deployment.create_database("bank").await;
    let (tenant, placed) = deployment.placement(&database_id);
    let addresses: Vec<String> = deployment.pageservers.iter().map(|p| p.address.clone()).collect();
    assert_eq!(placed.as_deref(), Some(addresses[0].as_str()), "placed on the first");

    // Refusals: not an admin route for a bad target, nor a move to where it is.
    let reply = deployment
        .call(
            "POST",
            &format!("/admin/databases/{database_id}/move_pageserver"),
            Some(r#"{"pageserver":"127.0.0.1:1"}"#),
        )
        .await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    let reply = deployment
        .call(
            "POST",
            &format!("/admin/databases/{database_id}/move_pageserver"),
            Some(&format!(r#"{{"pageserver":"{}"}}"#, addresses[0])),
        )
        .await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    let reply = request(
        &deployment.api.address,
        "POST",
        &format!("/admin/databases/{database_id}/move_pageserver"),
        None,
        Some("{}"),
        &[],
    )
    .await;
    assert_eq!(reply.status, 401, "{}", reply.body);

    let seed = bank::seed();
    let bank = Bank::start(&uri, seed).await;
    bank.progress(40, "before the move").await;
    let reader = Reader::start(&uri);
    let deadline = Instant::now() + Duration::from_secs(30);
    while reader.reads() < 20 {
        assert!(
            Instant::now() < deadline,
            "the reader does not read: {:?}",
            reader.errors()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The move, under load.
    let (moved_at, reads_before) = (Instant::now(), reader.reads());
    let operation = deployment.start_move(&database_id, 1).await;
    let ended = deployment.wait_operation(&operation).await;
    let move_ms = moved_at.elapsed().as_millis();
    assert_eq!(ended["status"], "finished", "{ended}");
    bank.progress(40, "after the move").await;
    let reads_during = reader.reads() - reads_before;
    let (reader_errors, bank_errors) = (reader.errors(), failed_since(&bank, moved_at));
    println!(
        "move under load: {move_ms} ms; the reader: {reads_during} reads during the move and {} errors, \
         {} sessions in all; the bank: {} failed transfers or connects since the move began",
        reader_errors.len(),
        reader.reconnects.load(Ordering::SeqCst),
        bank_errors.len()
    );
    assert!(reader_errors.is_empty(), "the reader's errors: {reader_errors:?}");
    assert!(bank_errors.is_empty(), "the bank's errors: {bank_errors:?}");
    assert_eq!(
        reader.reconnects.load(Ordering::SeqCst),
        1,
        "the reader's session stayed open"
    );
    assert_eq!(
        deployment.placement(&database_id).1.as_deref(),
        Some(addresses[1].as_str())
    );
    assert!(!deployment.tenants_on(0).await.contains(&tenant), "the source lacks it");
    assert!(deployment.tenants_on(1).await.contains(&tenant), "the target has it");
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployment.remote_owner(&tenant).as_deref() != Some("ps2") {
        assert!(Instant::now() < deadline, "the remote copy is never marked ps2");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reader.stop().await;
    let (attempts, acknowledged) = bank.stop_and_check(&uri, "after the move").await;
    println!(
        "{} transfers acknowledged, all present after the move",
        acknowledged.len()
    );
    branch_and_restore(&deployment, &database, &uri).await;

    // The move back, the API killed -9 while the target holds the tenant as a secondary.
    deployment.api.kill9();
    deployment
        .api
        .args_mut()
        .extend(["--faults".to_owned(), "pause_at=move_attached:60000".to_owned()]);
    deployment.api.restart();
    let operation = deployment.start_move(&database_id, 0).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !deployment.tenants_on(0).await.contains(&tenant) {
        assert!(Instant::now() < deadline, "the target never attached the tenant");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    deployment.api.kill9();
    assert_eq!(
        deployment.placement(&database_id).1.as_deref(),
        Some(addresses[1].as_str()),
        "killed before the switch"
    );
    let args = deployment.api.args_mut();
    args.truncate(args.len() - 2);
    let restarted_at = Instant::now();
    deployment.api.restart();
    let ended = deployment.wait_operation(&operation).await;
    println!(
        "the move resumed after kill -9 of the API: ended {} {} ms after the restart",
        ended["status"],
        restarted_at.elapsed().as_millis()
    );
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(
        deployment.placement(&database_id).1.as_deref(),
        Some(addresses[0].as_str())
    );
    assert!(
        !deployment.tenants_on(1).await.contains(&tenant),
        "the old target lacks it"
    );
    assert!(
        deployment.tenants_on(0).await.contains(&tenant),
        "the first has it again"
    );
    let state = bank::read_state(&uri, seed, "after the move back").await;
    bank::check(&state, &attempts, &acknowledged, seed, "after the move back");
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployment.remote_owner(&tenant).as_deref() != Some("ps1") {
        assert!(Instant::now() < deadline, "the remote copy is never marked ps1 again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 17 item 5: the pageserver holding a database under the bank workload is killed -9; after
/// `--pageserver-dead-after-ms` the API re-places the database on the other (attached from the remote and the
/// safekeepers' WAL), the clients' transfers go on and nothing acknowledged is lost. The killed pageserver comes
/// back: it finds the tenant owned by the other and keeps it as a secondary, uploading nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_pageservers_database_is_re_placed_and_the_returning_one_uploads_nothing() {
    let mut deployment = Deployment::start(&["--pageserver-dead-after-ms", "2000"]);
    let (_, database_id, uri) = deployment.create_database("bank").await;
    let (tenant, placed) = deployment.placement(&database_id);
    let addresses: Vec<String> = deployment.pageservers.iter().map(|p| p.address.clone()).collect();
    assert_eq!(placed.as_deref(), Some(addresses[0].as_str()), "placed on the first");
    let seed = bank::seed();
    let bank = Bank::start(&uri, seed).await;
    bank.progress(60, "before the loss").await;
    // Uploaded and marked by its pageserver.
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployment.remote_owner(&tenant).as_deref() != Some("ps1") || !deployment.remote_has_branch_log(&tenant) {
        assert!(Instant::now() < deadline, "the remote copy is never marked ps1");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let killed_at = Instant::now();
    deployment.pageservers[0].kill9();
    let deadline = Instant::now() + Duration::from_secs(30);
    while deployment.placement(&database_id).1.as_deref() != Some(addresses[1].as_str()) {
        assert!(Instant::now() < deadline, "never re-placed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let replaced_ms = killed_at.elapsed().as_millis();
    bank.progress(60, "after the re-placement").await;
    let resumed_ms = killed_at.elapsed().as_millis();
    let errors = failed_since(&bank, killed_at);
    println!(
        "lost pageserver: re-placed {replaced_ms} ms after the kill (dead after 2000 ms), 60 more transfers by \
         {resumed_ms} ms; {} failed transfers or connects meanwhile",
        errors.len()
    );
    let (attempts, acknowledged) = bank.stop_and_check(&uri, "after the re-placement").await;
    println!("{} transfers acknowledged, all present", acknowledged.len());
    assert!(deployment.tenants_on(1).await.contains(&tenant), "the live one has it");
    assert_eq!(deployment.remote_owner(&tenant).as_deref(), Some("ps2"));

    // The lost one comes back with its old copy: it keeps it as a secondary and never uploads it.
    deployment.pageservers[0].restart();
    let mark = deployment.root.path().join("ps1").join("secondary").join(&tenant);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !mark.exists() {
        assert!(
            Instant::now() < deadline,
            "the returning pageserver never gave the tenant up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // More writes on the live one; the remote stays the live one's.
    let client = connect(&uri).await.expect("connect");
    client
        .batch_execute("CREATE TABLE after_return (id BIGINT PRIMARY KEY); INSERT INTO after_return VALUES (1)")
        .await
        .expect("write after the return");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        deployment.remote_owner(&tenant).as_deref(),
        Some("ps2"),
        "still the live one's"
    );
    let state = bank::read_state(&uri, seed, "after the return").await;
    bank::check(&state, &attempts, &acknowledged, seed, "after the return");
}

/// Issue 17 item 2, a move's rollback: the target pageserver is killed -9 while it catches up (the API paused
/// right after the target's attach). The catch-up runs out of time, the operation fails saying it rolled back,
/// and the database stays on the source, serving: the bank's transfers go on with no error and every
/// acknowledged one is there, and the source's hold on its remote deletions (a durable mark) is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_whose_target_dies_before_the_switch_rolls_back() {
    let mut deployment = Deployment::start(&["--faults", "pause_at=move_attached:3000"]);
    let (_, database_id, uri) = deployment.create_database("bank").await;
    let (tenant, placed) = deployment.placement(&database_id);
    let addresses: Vec<String> = deployment.pageservers.iter().map(|p| p.address.clone()).collect();
    assert_eq!(placed.as_deref(), Some(addresses[0].as_str()), "placed on the first");
    let seed = bank::seed();
    let bank = Bank::start(&uri, seed).await;
    bank.progress(40, "before the move").await;

    let moved_at = Instant::now();
    let operation = deployment.start_move(&database_id, 1).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !deployment.tenants_on(1).await.contains(&tenant) {
        assert!(Instant::now() < deadline, "the target never attached the tenant");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        deployment.hold_mark(0, &tenant).exists(),
        "the source holds its deletions"
    );
    deployment.pageservers[1].kill9();
    let ended = deployment.wait_operation(&operation).await;
    let error = ended["error"].as_str().unwrap_or_default().to_owned();
    println!(
        "a move whose target died: {} after {} ms: {error}",
        ended["status"],
        moved_at.elapsed().as_millis()
    );
    assert_eq!(ended["status"], "failed", "{ended}");
    assert!(error.contains("rolled back"), "{ended}");
    assert_eq!(
        deployment.placement(&database_id).1.as_deref(),
        Some(addresses[0].as_str()),
        "still on the source"
    );
    assert!(deployment.tenants_on(0).await.contains(&tenant), "the source has it");
    assert!(
        !deployment.hold_mark(0, &tenant).exists(),
        "the source released its remote deletions"
    );
    bank.progress(40, "after the rollback").await;
    let errors = failed_since(&bank, moved_at);
    assert!(errors.is_empty(), "the bank's errors: {errors:?}");
    let (_, acknowledged) = bank.stop_and_check(&uri, "after the rollback").await;
    println!(
        "{} transfers acknowledged, all present after the rollback",
        acknowledged.len()
    );
}

/// Issue 17 item 5, the failover as a durable operation: the pageserver holding a database under the bank
/// workload is killed -9; the API starts a `failover_pageserver` operation, which attaches the tenant on the other
/// and then (a fault pause) waits before the switch; the API is killed -9 there. Restarted, it resumes that same
/// operation (no second one is started): the database ends on the live pageserver, serves, and nothing
/// acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_cut_by_an_api_crash_is_resumed_after_the_restart() {
    let mut deployment = Deployment::start(&[
        "--pageserver-dead-after-ms",
        "2000",
        "--faults",
        "pause_at=failover_attached:60000",
    ]);
    let (_, database_id, uri) = deployment.create_database("bank").await;
    let (tenant, placed) = deployment.placement(&database_id);
    let addresses: Vec<String> = deployment.pageservers.iter().map(|p| p.address.clone()).collect();
    assert_eq!(placed.as_deref(), Some(addresses[0].as_str()), "placed on the first");
    let seed = bank::seed();
    let bank = Bank::start(&uri, seed).await;
    bank.progress(40, "before the loss").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployment.remote_owner(&tenant).as_deref() != Some("ps1") {
        assert!(Instant::now() < deadline, "the remote copy is never marked ps1");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let killed_at = Instant::now();
    deployment.pageservers[0].kill9();
    let deadline = Instant::now() + Duration::from_secs(30);
    let operation = loop {
        let running = deployment.operations_of(&database_id, "failover_pageserver");
        if let Some((id, _)) = running.first() {
            if deployment.tenants_on(1).await.contains(&tenant) {
                break id.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no failover attached the tenant: {running:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    deployment.api.kill9();
    assert_eq!(
        deployment.placement(&database_id).1.as_deref(),
        Some(addresses[0].as_str()),
        "killed before the switch"
    );
    let args = deployment.api.args_mut();
    args.truncate(args.len() - 2);
    let restarted_at = Instant::now();
    deployment.api.restart();
    let ended = deployment.wait_operation(&operation).await;
    println!(
        "the failover resumed after kill -9 of the API: ended {} {} ms after the restart ({} ms after the \
         pageserver's kill)",
        ended["status"],
        restarted_at.elapsed().as_millis(),
        killed_at.elapsed().as_millis()
    );
    assert_eq!(ended["status"], "finished", "{ended}");
    assert_eq!(
        deployment.placement(&database_id).1.as_deref(),
        Some(addresses[1].as_str()),
        "on the live pageserver"
    );
    let operations = deployment.operations_of(&database_id, "failover_pageserver");
    assert_eq!(operations.len(), 1, "resumed, not started again: {operations:?}");
    bank.progress(40, "after the failover").await;
    let (_, acknowledged) = bank.stop_and_check(&uri, "after the failover").await;
    println!(
        "{} transfers acknowledged, all present after the failover",
        acknowledged.len()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployment.remote_owner(&tenant).as_deref() != Some("ps2") {
        assert!(Instant::now() < deadline, "the remote copy is never marked ps2");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Which process runs a move sent to the first host ([`TwoHosts::move_through_first`]).
#[derive(Debug, Clone, Copy)]
enum Handling {
    ByItsHost,
    ByTheFirst,
}

/// Two `cambium api` compute hosts on PostgreSQL metadata, a `cambium proxy` in front of them, the storage of
/// [`start_storage`]; each host with a 4-page compute cache and no file cache, so reads reach the pageserver.
struct TwoHosts {
    /// The first and the second host.
    apis: Vec<Process>,
    _proxy: Process,
    pageservers: Vec<Process>,
    _safekeepers: Vec<Process>,
    metadata: tokio_postgres::Client,
    key: String,
    _logs: Logs,
    root: tempfile::TempDir,
    _server: common::postgres::TestPostgres,
}

impl TwoHosts {
    /// Everything started; `None` (having said why) where PostgreSQL 15 is absent.
    async fn start() -> Option<TwoHosts> {
        let server = common::postgres::TestPostgres::start()?;
        let url = server.create_database("metadata");
        let root = tempfile::tempdir().expect("tempdir");
        let (safekeepers, addresses, pageservers) = start_storage(root.path());
        let proxy = Process::start(vec![
            "proxy".into(),
            "--metadata".into(),
            url.clone(),
            "--data-dir".into(),
            root.path().join("proxy").display().to_string(),
            "--failover-wait-ms".into(),
            "15000".into(),
        ]);
        let pageserver_list: Vec<String> = pageservers.iter().map(|p| p.address.clone()).collect();
        let api = |name: &str| {
            Process::start_logged_with_env(
                vec![
                    "api".into(),
                    "--data-dir".into(),
                    root.path().join(name).display().to_string(),
                    "--pg-listen".into(),
                    "127.0.0.1:0".into(),
                    "--pageservers".into(),
                    pageserver_list.join(","),
                    "--safekeepers".into(),
                    addresses.join(","),
                    "--metadata".into(),
                    url.clone(),
                    "--connection-address".into(),
                    proxy.address.clone(),
                    "--page-cache-bytes".into(),
                    common::faults::PAGE_CACHE_BYTES.into(),
                    "--file-cache-bytes".into(),
                    "0".into(),
                ],
                &root.path().join(format!("{name}.log")),
                info(),
            )
        };
        let first = api("first");
        let key = std::fs::read_to_string(root.path().join("first").join("api_key"))
            .expect("the admin key")
            .trim()
            .to_owned();
        let second = api("second");
        let (metadata, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("metadata");
        tokio::spawn(connection);
        let logs = ["first", "second", "ps1", "ps2"].map(|name| root.path().join(format!("{name}.log")));
        Some(TwoHosts {
            apis: vec![first, second],
            _proxy: proxy,
            pageservers,
            _safekeepers: safekeepers,
            metadata,
            key,
            _logs: Logs(logs.to_vec()),
            root,
            _server: server,
        })
    }

    async fn call(&self, via: usize, method: &str, path: &str, body: Option<&str>) -> common::api::Reply {
        request(&self.apis[via].address, method, path, Some(&self.key), body, &[]).await
    }

    async fn wait_operation(&self, via: usize, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let reply = self
                .call(via, "GET", &format!("/admin/operations/{id}?wait=30s"), None)
                .await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let operation = reply.json()["operation"].clone();
            if operation["status"] != "running" {
                return operation;
            }
            assert!(Instant::now() < deadline, "operation {id} still running: {operation}");
        }
    }

    /// A database made through the first host (placed where creations go): its id and connection string.
    async fn create_database(&self, project: &str, name: &str) -> (String, String) {
        let reply = self
            .call(
                0,
                "POST",
                &format!("/v1/projects/{project}/databases"),
                Some(&format!(r#"{{"name":"{name}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let created = reply.json();
        let operation = created["operation"]["id"].as_str().expect("operation");
        assert_eq!(self.wait_operation(0, operation).await["status"], "finished");
        (
            created["database"]["id"].as_str().expect("id").to_owned(),
            created["database"]["connection_uri"].as_str().expect("uri").to_owned(),
        )
    }

    /// Database `id`'s tenant, pageserver column and compute host (the index in `apis`).
    async fn placement(&self, id: &str) -> (String, Option<String>, usize) {
        let row = self
            .metadata
            .query_one(
                "SELECT d.tenant_id, d.pageserver, h.api_url FROM databases d
                 JOIN compute_hosts h ON h.id = d.compute_host WHERE d.id = $1",
                &[&id],
            )
            .await
            .expect("the database's placement");
        let api_url: String = row.get(2);
        let host = self
            .apis
            .iter()
            .position(|api| api_url == format!("http://{}", api.address))
            .unwrap_or_else(|| panic!("host {api_url} is neither API process"));
        (row.get(0), row.get(1), host)
    }

    /// Moves database `id` to pageserver `index` through the first host; the ended operation. `ByItsHost`: as a
    /// client sends it (the first forwards it to the database's host, which runs it); `ByTheFirst`: marked as
    /// already forwarded, so the first runs it whatever the placement (as a forwarded request that arrives after
    /// the placement changed), and must tell the host to follow.
    async fn move_through_first(&self, id: &str, index: usize, handling: Handling) -> Value {
        let body = format!(r#"{{"pageserver":"{}"}}"#, self.pageservers[index].address);
        let headers: &[(&str, &str)] = match handling {
            Handling::ByItsHost => &[],
            Handling::ByTheFirst => &[("cambium-forwarded-by", "the-test")],
        };
        let path = format!("/admin/databases/{id}/move_pageserver");
        let reply = request(
            &self.apis[0].address,
            "POST",
            &path,
            Some(&self.key),
            Some(&body),
            headers,
        )
        .await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        let operation = reply.json()["operation"]["id"].as_str().expect("id").to_owned();
        let row = self
            .metadata
            .query_one(
                "SELECT o.lease_owner, d.compute_host, (SELECT h.id FROM compute_hosts h WHERE h.api_url = $2)
                 FROM operations o JOIN databases d ON d.id = o.database_id WHERE o.id = $1",
                &[&operation, &format!("http://{}", self.apis[0].address)],
            )
            .await
            .expect("the move's operation");
        let (holder, host, first): (Option<String>, Option<String>, Option<String>) =
            (row.get(0), row.get(1), row.get(2));
        match handling {
            // It went to the database's host (which holds the database's lock), and that host made it.
            Handling::ByItsHost => assert_eq!(holder, host, "the move of {id} was made by its host"),
            Handling::ByTheFirst => assert_eq!(holder, first, "the move of {id} was made by the first"),
        }
        self.wait_operation(0, &operation).await
    }

    /// What host `via` answers when told to follow database `id`'s pageserver, with its internal token as its
    /// peers read it from the metadata (without it, the call is refused).
    async fn follow(&self, via: usize, id: &str) -> Value {
        let path = format!("/internal/databases/{id}/pageserver");
        let address = &self.apis[via].address;
        let unauthenticated = request(address, "POST", &path, None, None, &[]).await;
        assert_eq!(unauthenticated.status, 401, "{}", unauthenticated.body);
        let token: String = self
            .metadata
            .query_one(
                "SELECT internal_token FROM compute_hosts WHERE api_url = $1",
                &[&format!("http://{address}")],
            )
            .await
            .expect("the host's internal token")
            .get(0);
        assert_eq!(token.len(), 64, "32 random bytes in hex: {token}");
        let header = format!("Bearer {token}");
        let reply = request(address, "POST", &path, None, None, &[("Authorization", &header)]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()
    }

    /// The tenants pageserver `index` holds.
    async fn tenants_on(&self, index: usize) -> Vec<String> {
        let mut client =
            ps::management_client::ManagementClient::connect(format!("http://{}", self.pageservers[index].address))
                .await
                .expect("connect to the pageserver");
        client
            .list_tenants(ps::ListTenantsRequest {})
            .await
            .expect("list tenants")
            .into_inner()
            .tenant_ids
    }

    fn log_of(&self, name: &str) -> String {
        std::fs::read_to_string(self.root.path().join(format!("{name}.log"))).unwrap_or_default()
    }
}

/// Issue 17 items 2 and 4: moves issued through one API process re-point every compute host. Two compute hosts
/// (PostgreSQL metadata, clients through `cambium proxy`) each serve one database under the bank workload and a
/// reader whose session stays open; both databases are moved to the other pageserver through the first process.
/// The second host's computes are told (`POST /internal/databases/{id}/pageserver`, logged by the first), both
/// hosts' clients see no error, each source lacks its tenant afterwards while reads that miss the 4-page cache
/// keep being answered, so by the new pageserver, and each host says its computes read from the new one. Then
/// the second host is stopped (SIGSTOP) while its database moves back: it cannot be told; continued, it
/// re-points at its next placement round (or, stopped past its heartbeat's fence, fences itself and serves the
/// database afresh at its placement), and its clients go on. Every acknowledged transfer is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_through_one_api_process_re_points_every_compute_host() {
    let Some(hosts) = TwoHosts::start().await else {
        return;
    };
    let project = hosts.call(0, "POST", "/v1/projects", Some(r#"{"name":"p"}"#)).await;
    assert_eq!(project.status, 201, "{}", project.body);
    let project = project.json()["project"]["id"].as_str().expect("id").to_owned();
    let mut databases = Vec::new();
    for name in ["a", "b"] {
        databases.push(hosts.create_database(&project, name).await);
    }
    let mut placed = Vec::new();
    for (id, _) in &databases {
        placed.push(hosts.placement(id).await);
    }
    let on_hosts: HashSet<usize> = placed.iter().map(|(_, _, host)| *host).collect();
    assert_eq!(on_hosts.len(), 2, "one database on each host: {placed:?}");
    let addresses: Vec<String> = hosts.pageservers.iter().map(|p| p.address.clone()).collect();
    let index_of = |column: &Option<String>| {
        addresses
            .iter()
            .position(|a| Some(a) == column.as_ref())
            .unwrap_or_else(|| panic!("placed on {column:?}"))
    };

    let seed = bank::seed();
    let mut banks = Vec::new();
    let mut readers = Vec::new();
    for (_, uri) in &databases {
        banks.push(Bank::start(uri, seed).await);
    }
    for (bank, (id, _)) in banks.iter().zip(&databases) {
        bank.progress(30, &format!("{id} before the moves")).await;
    }
    for (_, uri) in &databases {
        readers.push(Reader::start(uri));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while readers.iter().any(|reader| reader.reads() < 10) {
        let errors: Vec<Vec<String>> = readers.iter().map(Reader::errors).collect();
        assert!(Instant::now() < deadline, "the readers do not read: {errors:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Both moved to the other pageserver, through the first process.
    let moved_at = Instant::now();
    for ((id, _), (_, column, host)) in databases.iter().zip(&placed) {
        let target = 1 - index_of(column);
        let started = Instant::now();
        let ended = hosts.move_through_first(id, target, Handling::ByItsHost).await;
        assert_eq!(ended["status"], "finished", "{ended}");
        println!(
            "{id} (served by host {host}) moved to pageserver {} through the first process in {} ms",
            target + 1,
            started.elapsed().as_millis()
        );
    }
    for (bank, (id, _)) in banks.iter().zip(&databases) {
        bank.progress(30, &format!("{id} after the moves")).await;
    }
    for ((reader, bank), ((id, _), (tenant, column, host))) in
        readers.iter().zip(&banks).zip(databases.iter().zip(&placed))
    {
        let (source, target) = (index_of(column), 1 - index_of(column));
        assert!(
            !hosts.tenants_on(source).await.contains(tenant),
            "{id}: the source lacks it"
        );
        assert!(
            hosts.tenants_on(target).await.contains(tenant),
            "{id}: the target has it"
        );
        let (reader_errors, bank_errors) = (reader.errors(), failed_since(bank, moved_at));
        println!(
            "{id} on host {host}: {} reads, {} reader errors, {} bank errors since the moves began",
            reader.reads(),
            reader_errors.len(),
            bank_errors.len()
        );
        assert!(reader_errors.is_empty(), "{id}: the reader's errors: {reader_errors:?}");
        assert!(bank_errors.is_empty(), "{id}: the bank's errors: {bank_errors:?}");
        assert_eq!(
            reader.reconnects.load(Ordering::SeqCst),
            1,
            "{id}: the reader's session stayed open"
        );
        let followed = hosts.follow(*host, id).await;
        assert_eq!(followed["served_here"], true, "{followed}");
        assert_eq!(
            followed["pageserver"],
            addresses[target].as_str(),
            "{id} on host {host}: {followed}"
        );
        assert_eq!(followed["stores_repointed"], 0, "{id}: already re-pointed: {followed}");
        assert_eq!(hosts.follow(1 - host, id).await["served_here"], false);
    }

    // A move that the first runs itself (a forwarded request arriving after the placement changed, or a
    // pageserver failover, which any process runs): it tells the host to follow.
    let remote = placed
        .iter()
        .position(|(_, _, host)| *host == 1)
        .expect("a database on the second");
    let (id, _) = &databases[remote];
    let ended = hosts
        .move_through_first(id, index_of(&placed[remote].1), Handling::ByTheFirst)
        .await;
    assert_eq!(ended["status"], "finished", "{ended}");
    assert!(
        hosts
            .log_of("first")
            .contains("told the database's compute host to follow its pageserver"),
        "the first process told the second host"
    );
    let followed = hosts.follow(1, id).await;
    assert_eq!(
        followed["pageserver"],
        addresses[index_of(&placed[remote].1)].as_str(),
        "{followed}"
    );
    assert_eq!(
        followed["stores_repointed"], 0,
        "already re-pointed when told: {followed}"
    );

    // The second host cannot be told: stopped while the first moves its database away again; it follows at its
    // next round.
    let back = 1 - index_of(&placed[remote].1);
    hosts.apis[1].signal("-STOP");
    let stopped_at = Instant::now();
    let ended = hosts.move_through_first(id, back, Handling::ByTheFirst).await;
    hosts.apis[1].signal("-CONT");
    println!(
        "{id} moved back while its host was stopped: {} after {} ms",
        ended["status"],
        stopped_at.elapsed().as_millis()
    );
    assert_eq!(ended["status"], "finished", "{ended}");
    // Watched in its log, not asked (asking would re-point it). Stopped past its heartbeat's fence (likely on a
    // loaded machine: its last renewal may be a round before the stop), it fenced itself instead and then serves
    // the database afresh at its placement's pageserver: it follows either way, which `follow` checks below.
    let continued_at = Instant::now();
    let deadline = continued_at + Duration::from_secs(15);
    let served_before = hosts
        .log_of("second")
        .matches("serving a database placed on this host")
        .count();
    loop {
        let log = hosts.log_of("second");
        let repointed = log.contains("read from another pageserver than its placement; re-pointed");
        let fenced_and_served = log.contains("fenced: the heartbeat could not be renewed")
            && log.matches("serving a database placed on this host").count() > served_before;
        if repointed || fenced_and_served {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stopped host never re-pointed (nor fenced and served again) at its own round"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "the stopped host followed at its own round {} ms after it was continued",
        continued_at.elapsed().as_millis()
    );
    let followed = hosts.follow(1, id).await;
    assert_eq!(followed["pageserver"], addresses[back].as_str(), "{followed}");
    assert_eq!(followed["stores_repointed"], 0, "already re-pointed: {followed}");
    banks[remote].progress(30, &format!("{id} after the move back")).await;

    for reader in readers {
        reader.stop().await;
    }
    for (bank, (id, uri)) in banks.into_iter().zip(&databases) {
        let attempts = bank.stop().await;
        let acknowledged: HashSet<i64> = attempts
            .iter()
            .filter(|a| matches!(a.outcome, bank::Outcome::Acknowledged))
            .map(|a| a.transfer.id)
            .collect();
        let state = bank::read_state(uri, seed, id).await;
        bank::check(&state, &attempts, &acknowledged, seed, id);
        println!("{id}: {} transfers acknowledged, all present", acknowledged.len());
    }
}
