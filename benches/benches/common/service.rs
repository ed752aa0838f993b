//! A release `cambium up` driven through `/v1` and SQL, shared by the `api` and `peers` benches
//! (`#[path = "common/service.rs"] mod service;` in each).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `cambium up`; stopped with SIGINT (a clean stop keeps a cached data directory consistent) when
/// dropped.
pub struct Service {
    child: Child,
    /// `http://host:port` of the API.
    pub url: String,
    /// The admin key.
    pub key: String,
    http: reqwest::Client,
}

impl Drop for Service {
    fn drop(&mut self) {
        // SIGINT: a clean stop keeps the cached data directory consistent.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `cambium` binary a bench runs: `CAMBIUM_BIN`, else the workspace's release build, which must exist.
pub fn cambium_binary() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = std::env::var_os("CAMBIUM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/cambium"));
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release` first",
        bin.display()
    );
    bin
}

/// The runtime a bench against `cambium up` drives it from, with rustls's ring provider installed (reqwest is
/// built with rustls and no bundled provider, keeping aws-lc out; the calls are plain HTTP).
// Each bench includes this module; not all of them call this.
#[allow(dead_code)]
pub fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The environment variable `name` as a number, `default` when unset or not one.
// Each bench includes this module; not all of them call this.
#[allow(dead_code)]
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `bin up` on `data_dir` (API and PostgreSQL on free ports, no rate limit) and reads its key.
// Each bench includes this module; not all of them call this.
#[allow(dead_code)]
pub fn start(bin: &Path, data_dir: &Path) -> Service {
    start_with(bin, data_dir, &[])
}

/// [`start`] with `extra` arguments to `up` (`--metadata postgresql://…`).
// Each bench includes this module; not all of them call this.
#[allow(dead_code)]
pub fn start_with(bin: &Path, data_dir: &Path, extra: &[&str]) -> Service {
    let mut child = Command::new(bin)
        .args(["up", "--data-dir"])
        .arg(data_dir)
        .args(["--listen", "127.0.0.1:0", "--pg-listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .args(["--rate-limit", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cambium up");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let url = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    let key = std::fs::read_to_string(data_dir.join("api_key"))
        .expect("api_key")
        .trim()
        .to_owned();
    Service {
        child,
        url,
        key,
        http: reqwest::Client::new(),
    }
}

impl Service {
    /// One request with the admin key: status and JSON body (`Null` if none).
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A GET that must answer 200.
    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// A POST that must answer 200, 201 or 202.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        let (status, reply) = self.call(reqwest::Method::POST, path, Some(body)).await;
        assert!(status == 201 || status == 202 || status == 200, "{status} {reply}");
        reply
    }

    /// A DELETE that must answer 204.
    // Each bench includes this module; not all of them call this.
    #[allow(dead_code)]
    pub async fn delete(&self, path: &str) {
        let (status, body) = self.call(reqwest::Method::DELETE, path, None).await;
        assert_eq!(status, 204, "{body}");
    }

    /// Creates a project named `name`; its id.
    // Each bench includes this module; not all of them call this.
    #[allow(dead_code)]
    pub async fn project(&self, name: &str) -> String {
        self.post("/v1/projects", serde_json::json!({ "name": name })).await["project"]["id"]
            .as_str()
            .expect("a project id")
            .to_owned()
    }

    /// The database `name` of `project`, its `connection_uri` with the password; if missing, created (its operation
    /// waited for) and given `schema` (SQL). The API shows a password only when it makes one: a database found
    /// (cached from an earlier run) gets a new one.
    pub async fn database(&self, project: &str, name: &str, schema: &str) -> Value {
        let listed = self.get(&format!("/v1/projects/{project}/databases?limit=500")).await;
        if let Some(found) = listed["databases"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["name"] == name)
        {
            let id = found["id"].as_str().expect("id");
            return self
                .post(&format!("/v1/databases/{id}/reset_password"), Value::Null)
                .await["database"]
                .clone();
        }
        let created = self
            .post(
                &format!("/v1/projects/{project}/databases"),
                serde_json::json!({ "name": name }),
            )
            .await;
        self.wait(created["operation"]["id"].as_str().expect("op")).await;
        let database = created["database"].clone();
        let client = connect(database["connection_uri"].as_str().expect("uri")).await;
        client.batch_execute(schema).await.expect("schema");
        database
    }

    /// Long-polls operation `operation` until it has finished (it must not fail).
    pub async fn wait(&self, operation: &str) {
        let reply = self.get(&format!("/v1/operations/{operation}?wait=30s")).await;
        assert_eq!(reply["operation"]["status"], "finished", "{reply}");
    }
}

/// Connects to a `postgresql://` connection string (the connection runs in the background).
pub async fn connect(uri: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(uri, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect {uri}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}
