//! The deployment the fault tests break: three `cambium safekeeper`s, a `cambium pageserver` with remote storage
//! in a local directory, and `cambium api` against them with PostgreSQL on a fixed port (so connection strings
//! stay valid across its restart); and a small `/v1` client for the calls the tests make.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::api::{free_port, password_of, request, with_password, Reply};
use super::Process;

/// Database id → its password, as its creation returned it: the API shows a password only then, and a branch's
/// connection string takes its database's.
static PASSWORDS: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// How often the pageserver freezes and flushes an in-memory layer (and so uploads it): short, so the
/// remote storage holds layers within a test's run.
pub const CHECKPOINT_TIMEOUT_MS: &str = "1000";

/// Bytes of pages the compute caches (4 pages of `compute::cache::ENTRY_BYTES`), and no file cache:
/// fewer than the test databases have, so reads reach the pageserver while the load runs and a pageserver fault
/// hits transactions.
pub const PAGE_CACHE_BYTES: &str = "33536";

/// What may differ from the default deployment (everything under one temporary directory, stderr to
/// /dev/null).
#[derive(Clone, Debug, Default)]
pub struct DeploymentConfig {
    /// Safekeeper `i + 1`'s data directory (a mount point, say) instead of one under the temporary directory.
    pub safekeeper_dirs: [Option<PathBuf>; 3],
    /// The pageserver's data directory instead of one under the temporary directory.
    pub pageserver_dir: Option<PathBuf>,
    /// More arguments for `cambium pageserver`.
    pub pageserver_args: Vec<String>,
    /// More arguments for `cambium api`.
    pub api_args: Vec<String>,
    /// No remote storage for the pageserver (a test that writes gigabytes spares the disk a copy).
    pub without_remote: bool,
    /// The storage processes' stderr goes to `<log_dir>/{sk1,sk2,sk3,pageserver}.log` instead of /dev/null.
    pub log_dir: Option<PathBuf>,
}

/// Fields drop in order: the API first, then the storage processes, then their directory.
pub struct Deployment {
    /// `cambium api` (the computes live in it).
    pub api: Process,
    /// The admin key.
    pub key: String,
    /// The pageserver.
    pub pageserver: Process,
    /// The safekeepers.
    pub safekeepers: Vec<Process>,
    /// The pageserver's local data directory.
    pub pageserver_dir: PathBuf,
    /// The pageserver's remote storage (a local directory).
    pub remote_dir: PathBuf,
    _root: tempfile::TempDir,
}

impl Deployment {
    /// Starts the safekeepers, the pageserver and the API.
    pub fn start() -> Deployment {
        Deployment::start_with(DeploymentConfig::default())
    }

    /// Starts the safekeepers, the pageserver and the API as `config` says.
    pub fn start_with(config: DeploymentConfig) -> Deployment {
        let root = tempfile::tempdir().expect("tempdir");
        let log = |name: &str| config.log_dir.as_ref().map(|dir| dir.join(format!("{name}.log")));
        let start = |args: Vec<String>, name: &str| match log(name) {
            Some(path) => Process::start_logged(args, &path),
            None => Process::start(args),
        };
        let safekeepers: Vec<Process> = (1..=3u32)
            .map(|id| {
                let dir = config.safekeeper_dirs[id as usize - 1]
                    .clone()
                    .unwrap_or_else(|| root.path().join(format!("sk{id}")));
                start(Process::safekeeper_args(id, &dir), &format!("sk{id}"))
            })
            .collect();
        let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
        let pageserver_dir = config
            .pageserver_dir
            .clone()
            .unwrap_or_else(|| root.path().join("pageserver"));
        let remote_dir = root.path().join("remote");
        std::fs::create_dir_all(&remote_dir).expect("remote dir");
        let mut pageserver_args: Vec<String> = vec![
            "pageserver".into(),
            "--data-dir".into(),
            pageserver_dir.display().to_string(),
            "--safekeepers".into(),
            addresses.join(","),
            "--checkpoint-timeout-ms".into(),
            CHECKPOINT_TIMEOUT_MS.into(),
        ];
        if !config.without_remote {
            pageserver_args.extend(["--remote".into(), remote_dir.display().to_string()]);
        }
        pageserver_args.extend(config.pageserver_args.iter().cloned());
        let pageserver = start(pageserver_args, "pageserver");
        let data_dir = root.path().join("api");
        let mut api_args: Vec<String> = vec![
            "api".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--pg-listen".into(),
            format!("127.0.0.1:{}", free_port()),
            "--pageserver".into(),
            pageserver.address.clone(),
            "--safekeepers".into(),
            addresses.join(","),
        ];
        if !config.api_args.iter().any(|arg| arg == "--page-cache-bytes") {
            api_args.extend(["--page-cache-bytes".into(), PAGE_CACHE_BYTES.into()]);
            api_args.extend(["--file-cache-bytes".into(), "0".into()]);
        }
        api_args.extend(config.api_args.iter().cloned());
        let api = Process::start(api_args);
        let key = std::fs::read_to_string(data_dir.join("api_key"))
            .expect("the admin key file")
            .trim()
            .to_owned();
        Deployment {
            api,
            key,
            pageserver,
            safekeepers,
            pageserver_dir,
            remote_dir,
            _root: root,
        }
    }

    /// A client of its API.
    pub fn client(&self) -> ApiClient {
        ApiClient {
            address: self.api.address.clone(),
            key: self.key.clone(),
        }
    }
}

/// Files under `dir`, recursively (none if it does not exist).
pub fn files_under(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                files_under(&path)
            } else {
                1
            }
        })
        .sum()
}

/// A `/v1` client with the admin key.
#[derive(Clone, Debug)]
pub struct ApiClient {
    /// The API's address.
    pub address: String,
    /// The admin key.
    pub key: String,
}

/// A database made for a test: its id and its default branch's connection string.
#[derive(Clone, Debug)]
pub struct TestDatabase {
    /// `db_…`.
    pub id: String,
    /// The default branch's connection string.
    pub uri: String,
}

impl ApiClient {
    /// One call.
    pub async fn call(&self, method: &str, path: &str, body: Option<&str>) -> Reply {
        request(&self.address, method, path, Some(&self.key), body, &[]).await
    }

    /// Waits (bounded) for operation `id` to end and asserts it finished.
    pub async fn wait_finished(&self, id: &str) {
        for _ in 0..4 {
            let reply = self.call("GET", &format!("/v1/operations/{id}?wait=15s"), None).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let operation = reply.json()["operation"].clone();
            if operation["status"] != "running" {
                assert_eq!(operation["status"], "finished", "{operation}");
                return;
            }
        }
        panic!("operation {id} still running after a minute");
    }

    /// Creates a project and a database in it, waits for it; the database.
    pub async fn create_database(&self, name: &str) -> TestDatabase {
        let reply = self
            .call("POST", "/v1/projects", Some(&format!(r#"{{"name":"{name}"}}"#)))
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let project = reply.json()["project"]["id"].as_str().expect("project id").to_owned();
        let reply = self
            .call(
                "POST",
                &format!("/v1/projects/{project}/databases"),
                Some(&format!(r#"{{"name":"{name}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let body = reply.json();
        self.wait_finished(body["operation"]["id"].as_str().expect("operation id"))
            .await;
        let database = TestDatabase {
            id: body["database"]["id"].as_str().expect("database id").to_owned(),
            uri: body["database"]["connection_uri"]
                .as_str()
                .expect("connection uri")
                .to_owned(),
        };
        let password = password_of(&database.uri).expect("the creation gives the password");
        PASSWORDS
            .lock()
            .expect("passwords")
            .insert(database.id.clone(), password);
        database
    }

    /// Branches `database` (made by [`ApiClient::create_database`]) at its latest commit; the branch's connection
    /// string, with the database's password.
    pub async fn create_branch(&self, database: &str, name: &str) -> String {
        let reply = self
            .call(
                "POST",
                &format!("/v1/databases/{database}/branches"),
                Some(&format!(r#"{{"name":"{name}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let body: Value = reply.json();
        if let Some(operation) = body["operation"]["id"].as_str() {
            self.wait_finished(operation).await;
        }
        let uri = body["branch"]["connection_uri"].as_str().expect("connection uri");
        let passwords = PASSWORDS.lock().expect("passwords");
        let password = passwords
            .get(database)
            .unwrap_or_else(|| panic!("database {database} was not made by this client"));
        with_password(uri, password)
    }
}

/// Sleeps a little: the pause between polls of a condition.
pub async fn pause() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}
