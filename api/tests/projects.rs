//! The projects routes over a real HTTP server, with a minimal HTTP/1.1 client.
#![allow(clippy::unwrap_used)] // a test failure is a panic

use std::net::SocketAddr;
use std::sync::Arc;

use api::auth;
use api::store::{AccountId, Store};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Server {
    addr: SocketAddr,
    store: Arc<Store>,
    _dir: tempfile::TempDir,
}

async fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = api::http::router(Arc::clone(&store));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server { addr, store, _dir: dir }
}

impl Server {
    fn account_key(&self) -> (AccountId, auth::NewKey) {
        let account = self.store.create_account().unwrap();
        let key = auth::create_key(&self.store, &account).unwrap();
        (account, key)
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Asserts the error envelope with `code` and a request id matching the header.
    fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{}", self.body);
        let body = self.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].is_string(), "{body}");
        let request_id = body["error"]["request_id"].as_str().unwrap();
        assert!(request_id.starts_with("req_"), "{body}");
        assert_eq!(self.header("x-request-id"), Some(request_id));
        assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    }
}

/// One request on a fresh connection; the server closes it after the response.
async fn request(addr: SocketAddr, method: &str, path: &str, key: Option<&str>, body: Option<&str>) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(key) = key {
        head.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (n, v) = line.split_once(':').unwrap();
            (n.trim().to_owned(), v.trim().to_owned())
        })
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

fn is_iso_utc(s: &str) -> bool {
    s.ends_with('Z') && s.parse::<jiff::Timestamp>().is_ok()
}

#[tokio::test]
async fn project_lifecycle_has_the_seed_shapes() {
    let server = start().await;
    let (_, key) = server.account_key();
    let key = Some(key.secret.as_str());

    let created = request(server.addr, "POST", "/v1/projects", key, Some(r#"{"name":"alpha"}"#)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(created.header("x-request-id").unwrap().starts_with("req_"));
    let project = created.json()["project"].clone();
    assert_eq!(project.as_object().unwrap().len(), 3, "{project}");
    let id = project["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("proj_") && id.len() == 5 + 26, "{id}");
    assert_eq!(project["name"], "alpha");
    assert!(is_iso_utc(project["created_at"].as_str().unwrap()), "{project}");

    let listed = request(server.addr, "GET", "/v1/projects", key, None).await;
    assert_eq!(listed.status, 200);
    assert_eq!(
        listed.json(),
        json!({"projects": [project.clone()], "next_cursor": null})
    );

    let path = format!("/v1/projects/{id}");
    let got = request(server.addr, "GET", &path, key, None).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json(), json!({ "project": project.clone() }));

    let patched = request(server.addr, "PATCH", &path, key, Some(r#"{"name":"beta"}"#)).await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    let renamed = patched.json()["project"].clone();
    assert_eq!(renamed["name"], "beta");
    assert_eq!(renamed["id"], project["id"]);
    assert_eq!(renamed["created_at"], project["created_at"]);

    let deleted = request(server.addr, "DELETE", &path, key, None).await;
    assert_eq!(deleted.status, 204);
    assert_eq!(deleted.body, "");
    assert!(deleted.header("x-request-id").is_some());

    request(server.addr, "GET", &path, key, None)
        .await
        .assert_error(404, "not_found");
    request(server.addr, "DELETE", &path, key, None)
        .await
        .assert_error(404, "not_found");
    request(server.addr, "GET", "/v1/projects/nonsense", key, None)
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn keys_are_required_and_checked() {
    let server = start().await;
    let (_, key) = server.account_key();

    request(server.addr, "GET", "/v1/projects", None, None)
        .await
        .assert_error(401, "unauthenticated");
    request(server.addr, "GET", "/v1/projects", Some("cmb_wrong"), None)
        .await
        .assert_error(401, "unauthenticated");
    request(
        server.addr,
        "POST",
        "/v1/projects",
        Some("garbage"),
        Some(r#"{"name":"x"}"#),
    )
    .await
    .assert_error(401, "unauthenticated");

    let ok = request(server.addr, "GET", "/v1/projects", Some(&key.secret), None).await;
    assert_eq!(ok.status, 200);
    assert!(server.store.revoke_key(&key.id).unwrap());
    request(server.addr, "GET", "/v1/projects", Some(&key.secret), None)
        .await
        .assert_error(401, "unauthenticated");
}

#[tokio::test]
async fn bad_bodies_are_invalid_requests() {
    let server = start().await;
    let (_, key) = server.account_key();
    let key = Some(key.secret.as_str());

    for body in [
        r#"{"name":"#,
        r#"{"name":"a","extra":1}"#,
        r#"{}"#,
        r#"{"name":""}"#,
        r#"[1]"#,
    ] {
        request(server.addr, "POST", "/v1/projects", key, Some(body))
            .await
            .assert_error(400, "invalid_request");
    }
    let created = request(server.addr, "POST", "/v1/projects", key, Some(r#"{"name":"a"}"#)).await;
    let id = created.json()["project"]["id"].as_str().unwrap().to_owned();
    request(
        server.addr,
        "PATCH",
        &format!("/v1/projects/{id}"),
        key,
        Some(r#"{"nam":"b"}"#),
    )
    .await
    .assert_error(400, "invalid_request");
    request(server.addr, "GET", "/v1/projects?limit=0", key, None)
        .await
        .assert_error(400, "invalid_request");
    request(server.addr, "GET", "/v1/projects?limit=501", key, None)
        .await
        .assert_error(400, "invalid_request");
    request(server.addr, "GET", "/v1/projects?cursor=zzz", key, None)
        .await
        .assert_error(400, "invalid_request");
}

#[tokio::test]
async fn another_accounts_project_is_not_found() {
    let server = start().await;
    let (_, owner) = server.account_key();
    let (_, other) = server.account_key();

    let created = request(
        server.addr,
        "POST",
        "/v1/projects",
        Some(&owner.secret),
        Some(r#"{"name":"mine"}"#),
    )
    .await;
    let path = format!("/v1/projects/{}", created.json()["project"]["id"].as_str().unwrap());
    let other = Some(other.secret.as_str());
    request(server.addr, "GET", &path, other, None)
        .await
        .assert_error(404, "not_found");
    request(server.addr, "PATCH", &path, other, Some(r#"{"name":"theirs"}"#))
        .await
        .assert_error(404, "not_found");
    request(server.addr, "DELETE", &path, other, None)
        .await
        .assert_error(404, "not_found");
    let listed = request(server.addr, "GET", "/v1/projects", other, None).await;
    assert_eq!(listed.json(), json!({"projects": [], "next_cursor": null}));
    let still = request(server.addr, "GET", &path, Some(&owner.secret), None).await;
    assert_eq!(still.json()["project"]["name"], "mine");
}

#[tokio::test]
async fn pagination_walks_every_project_in_creation_order() {
    let server = start().await;
    let (_, key) = server.account_key();
    let key = Some(key.secret.as_str());
    let mut created = Vec::new();
    for i in 0..5 {
        let reply = request(
            server.addr,
            "POST",
            "/v1/projects",
            key,
            Some(&format!(r#"{{"name":"p{i}"}}"#)),
        )
        .await;
        created.push(reply.json()["project"]["id"].as_str().unwrap().to_owned());
    }

    let mut seen = Vec::new();
    let mut path = "/v1/projects?limit=2".to_owned();
    let mut pages = 0;
    loop {
        let page = request(server.addr, "GET", &path, key, None).await.json();
        pages += 1;
        assert!(pages <= 3, "too many pages");
        let projects = page["projects"].as_array().unwrap();
        assert!(projects.len() <= 2, "{page}");
        seen.extend(projects.iter().map(|p| p["id"].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/projects?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, created);
}
