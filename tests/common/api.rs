//! A `cambium up` process in a temporary data directory, a minimal HTTP/1.1 client for its `/v1` API, and a
//! PostgreSQL client for its connection strings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::postgres::TestPostgres;
use super::Process;

/// A running `cambium up`. Fields drop in order: the process is killed before its directory goes.
pub struct Up {
    /// The process.
    pub process: Process,
    /// The admin key (from `<data-dir>/api_key`).
    pub key: String,
    /// The data directory.
    pub data_dir: PathBuf,
    /// Database id → its password, as its creation (or a reset) returned it: the API shows it only then.
    passwords: Mutex<HashMap<String, String>>,
    /// The URL of the PostgreSQL metadata, if it is there (`cambium keys` gets it too).
    metadata_url: Option<String>,
    /// The PostgreSQL server holding the metadata, if it is there (after the process: stopped once it is killed).
    _metadata: Option<TestPostgres>,
    _root: Option<tempfile::TempDir>,
}

/// The environment variable that runs the `Up::start`/`Up::start_with` tests on PostgreSQL metadata: set to
/// `postgres`, each such `cambium up` gets `--metadata` on a PostgreSQL 15 of its own.
pub const TEST_METADATA_ENV: &str = "CAMBIUM_TEST_METADATA";

/// A free loopback port for a process the test starts later (bound and released, so the port is free now).
///
/// Chosen below Linux's ephemeral range (`ip_local_port_range` starts at 32768), never from it: a port the
/// kernel handed out for `:0` and took back is the next one it may hand to any `bind(":0")` or outgoing
/// connection, such as a `cambium up`'s own pageserver or safekeepers started a moment before, and the process
/// meant to listen on it then fails to start. Each call in this process returns a port it has not returned
/// before, starting from a point spread by the process id (test binaries run one after another, but a port
/// may still be in TIME_WAIT or held by a process a test left behind: those fail the bind and are skipped).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % COUNT,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..COUNT {
        let offset = NEXT.fetch_add(1, Ordering::SeqCst) % COUNT;
        let port = u16::try_from(FIRST + offset).expect("below 32768");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + COUNT);
}

impl Up {
    /// `cambium up` in a fresh temporary directory, on free ports.
    pub fn start() -> Up {
        Up::start_with(&[])
    }

    /// `cambium up` in a fresh temporary directory with `extra` arguments.
    /// With `CAMBIUM_TEST_METADATA=postgres`, its metadata is on a PostgreSQL server of its own.
    pub fn start_with(extra: &[&str]) -> Up {
        let root = tempfile::tempdir().expect("tempdir");
        let data_dir = root.path().join("cambium");
        let on_postgres = std::env::var(TEST_METADATA_ENV).is_ok_and(|value| value == "postgres");
        let server = if on_postgres { TestPostgres::start() } else { None };
        let mut up = match &server {
            Some(server) => {
                let url = server.create_database("metadata");
                let mut args = vec!["--metadata", url.as_str()];
                args.extend_from_slice(extra);
                let mut up = Up::start_in(&data_dir, &args);
                up.metadata_url = Some(url);
                up
            }
            None => Up::start_in(&data_dir, extra),
        };
        if up._metadata.is_none() && server.is_some() {
            assert!(
                !data_dir.join("metadata.sqlite").exists(),
                "--metadata was given, yet the metadata went to SQLite"
            );
        }
        up._metadata = server;
        up._root = Some(root);
        up
    }

    /// `cambium up` in a fresh temporary directory with its metadata in PostgreSQL database `url`.
    pub fn start_on_metadata(url: &str, extra: &[&str]) -> Up {
        let mut args = vec!["--metadata", url];
        args.extend_from_slice(extra);
        let root = tempfile::tempdir().expect("tempdir");
        let mut up = Up::start_in(&root.path().join("cambium"), &args);
        up.metadata_url = Some(url.to_owned());
        up._root = Some(root);
        up
    }

    /// `cambium up` on `data_dir` (kept by the caller), PostgreSQL on a fixed free port so a restart keeps the
    /// connection strings.
    pub fn start_in(data_dir: &Path, extra: &[&str]) -> Up {
        Up::start_with_process(data_dir, extra, Process::start)
    }

    /// [`Up::start_in`] with its stderr appended to `stderr_log` and `RUST_LOG` set to `rust_log`, for tests that
    /// wait for what it logs.
    pub fn start_in_logged(data_dir: &Path, extra: &[&str], stderr_log: &Path, rust_log: &str) -> Up {
        let envs = vec![("RUST_LOG".to_owned(), rust_log.to_owned())];
        Up::start_with_process(data_dir, extra, |args| {
            Process::start_logged_with_env(args, stderr_log, envs)
        })
    }

    fn start_with_process(data_dir: &Path, extra: &[&str], start: impl FnOnce(Vec<String>) -> Process) -> Up {
        let mut args: Vec<String> = vec![
            "up".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--pg-listen".into(),
            format!("127.0.0.1:{}", free_port()),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let process = start(args);
        let key = std::fs::read_to_string(data_dir.join("api_key"))
            .expect("the admin key file")
            .trim()
            .to_owned();
        Up {
            process,
            key,
            data_dir: data_dir.to_owned(),
            passwords: Mutex::new(HashMap::new()),
            metadata_url: None,
            _metadata: None,
            _root: None,
        }
    }

    /// Runs `cambium keys <args> --data-dir <dir>` and returns its stdout.
    pub fn keys(&self, args: &[&str]) -> String {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_cambium"))
            .arg("keys")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(self.metadata_url.iter().flat_map(|url| ["--metadata", url.as_str()]))
            .args(args)
            .output()
            .expect("run cambium keys");
        assert!(
            output.status.success(),
            "cambium keys {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("utf-8")
    }

    /// A request with `key`.
    pub async fn request(&self, method: &str, path: &str, key: Option<&str>, body: Option<&str>) -> Reply {
        request(&self.process.address, method, path, key, body, &[]).await
    }

    /// A request with the admin key.
    pub async fn call(&self, method: &str, path: &str, body: Option<&str>) -> Reply {
        self.request(method, path, Some(&self.key.clone()), body).await
    }

    /// Creates a project; its id.
    pub async fn create_project(&self, name: &str) -> String {
        let reply = self
            .call("POST", "/v1/projects", Some(&format!(r#"{{"name":"{name}"}}"#)))
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply.json()["project"]["id"].as_str().expect("id").to_owned()
    }

    /// Waits for operation `id` to end; the operation.
    pub async fn wait_operation(&self, id: &str) -> Value {
        for _ in 0..6 {
            let reply = self.call("GET", &format!("/v1/operations/{id}?wait=10s"), None).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let operation = reply.json()["operation"].clone();
            if operation["status"] != "running" {
                return operation;
            }
        }
        panic!("operation {id} still running after a minute");
    }

    /// Creates a database and waits for it to be active; the database.
    pub async fn create_database(&self, project: &str, name: &str) -> Value {
        let reply = self
            .call(
                "POST",
                &format!("/v1/projects/{project}/databases"),
                Some(&format!(r#"{{"name":"{name}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let operation = reply.json()["operation"]["id"].as_str().expect("op id").to_owned();
        let ended = self.wait_operation(&operation).await;
        assert_eq!(ended["status"], "finished", "{ended}");
        let id = reply.json()["database"]["id"].as_str().expect("db id").to_owned();
        let created_uri = reply.json()["database"]["connection_uri"]
            .as_str()
            .expect("uri")
            .to_owned();
        self.remember_password(&id, &created_uri);
        let mut database = self.call("GET", &format!("/v1/databases/{id}"), None).await.json()["database"].clone();
        assert_eq!(database["status"], "active", "{database}");
        // The connection string as created, with the password.
        database["connection_uri"] = Value::String(created_uri);
        database
    }

    /// Remembers the password in `uri` (a connection string as a creation or reset returned it) for database
    /// `database_id`.
    pub fn remember_password(&self, database_id: &str, uri: &str) {
        let password = password_of(uri).unwrap_or_else(|| panic!("no password in {uri}"));
        self.passwords
            .lock()
            .expect("passwords")
            .insert(database_id.to_owned(), password);
    }

    /// The connection string of `resource` (a database, branch or endpoint as the API shows it) with its
    /// database's password put in, as a client that kept the password from the creation would.
    pub fn uri(&self, resource: &Value) -> String {
        let uri = resource["connection_uri"]
            .as_str()
            .unwrap_or_else(|| panic!("a connection_uri: {resource}"));
        if password_of(uri).is_some() {
            return uri.to_owned();
        }
        let database_id = resource["database_id"]
            .as_str()
            .or_else(|| resource["id"].as_str())
            .unwrap_or_else(|| panic!("a database id: {resource}"));
        let passwords = self.passwords.lock().expect("passwords");
        let password = passwords
            .get(database_id)
            .unwrap_or_else(|| panic!("no password known for {database_id}"));
        with_password(uri, password)
    }
}

/// The password of a `postgresql://user:password@host…` connection string, if it has one.
pub fn password_of(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("postgresql://")?;
    let userinfo = rest.split_once('@')?.0;
    userinfo.split_once(':').map(|(_, password)| password.to_owned())
}

/// `uri` without its password, if it has one.
pub fn without_password(uri: &str) -> String {
    match password_of(uri) {
        Some(password) => uri.replacen(&format!(":{password}@"), "@", 1),
        None => uri.to_owned(),
    }
}

/// `uri` (`postgresql://user@host…`, without a password) with `password` put in.
pub fn with_password(uri: &str, password: &str) -> String {
    let rest = uri
        .strip_prefix("postgresql://")
        .unwrap_or_else(|| panic!("a postgresql:// URI: {uri}"));
    let (user, host) = rest.split_once('@').unwrap_or_else(|| panic!("a user: {uri}"));
    assert!(!user.contains(':'), "{uri} has a password already");
    format!("postgresql://{user}:{password}@{host}")
}

/// An HTTP response.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }

    /// A header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Asserts the error envelope with `status`, `code` and a request id matching the header.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{}", self.body);
        let body = self.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].is_string(), "{body}");
        let request_id = body["error"]["request_id"].as_str().expect("request id");
        assert!(request_id.starts_with("req_"), "{body}");
        assert_eq!(self.header("x-request-id"), Some(request_id));
        assert_eq!(body.as_object().expect("object").len(), 1, "{body}");
    }
}

/// One request on a fresh connection (closed after the response), with `headers` added.
pub async fn request(
    address: &str,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(address))
        .await
        .expect("connect in time")
        .expect("connect");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    if let Some(key) = key {
        head.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(90), stream.read_to_end(&mut raw))
        .await
        .expect("a response in time")
        .expect("read");
    let raw = String::from_utf8(raw).expect("utf-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    assert!(
        !headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v == "chunked"),
        "this client reads only content-length bodies"
    );
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// Connects to a `postgresql://` connection string (the connection runs in the background).
pub async fn connect(uri: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(uri, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Whether `s` is an ISO 8601 UTC timestamp.
pub fn is_iso_utc(s: &str) -> bool {
    s.ends_with('Z') && s.parse::<jiff::Timestamp>().is_ok()
}

/// The keys of a JSON object, sorted.
pub fn json_keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// The ids in table `t` (`id INTEGER PRIMARY KEY`), ordered, through a fresh connection to `uri`.
pub async fn table_ids(uri: &str) -> Vec<i64> {
    let client = connect(uri).await.expect("connect");
    client
        .query("SELECT id FROM t ORDER BY id", &[])
        .await
        .expect("select")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Inserts rows with `ids` into `t` through a fresh connection to `uri`, one autocommit each (only `id` is
/// given: any other column needs a default).
pub async fn insert_ids(uri: &str, ids: std::ops::Range<i64>) {
    let client = connect(uri).await.expect("connect");
    for id in ids {
        client
            .execute(&format!("INSERT INTO t (id) VALUES ({id})"), &[])
            .await
            .expect("insert");
    }
}
