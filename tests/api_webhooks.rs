//! Webhooks (issue 15) against a real `cambium up`, delivering to a real HTTP receiver started by the test: every
//! event (operation finished, branch created, deleted, expired, restored) arrives as the resource the API returns,
//! signed with HMAC-SHA256 over the timestamp and body (checked here with ring, not the service's code); a refused
//! delivery is retried with exponential backoff and logged with each status code; a delivery pending when the
//! service is killed arrives after its restart; a receiver that never answers ends `failed` after the bounded
//! attempts; and bad subscriptions are refused.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::api::{free_port, Up};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The service's retry settings in these tests: 4 attempts, 1 s then 2 s then 4 s apart.
const RETRY_ARGS: [&str; 6] = [
    "--webhook-first-retry-ms",
    "1000",
    "--webhook-attempts-max",
    "4",
    "--branch-expiry-period-ms",
    "200",
];

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: Vec<(String, String)>,
    body: String,
    /// The status the receiver answered.
    status: u16,
}

/// The value of header `name` (any case), if there is one.
fn headers_value(headers: &[(String, String)], name: &str) -> Option<String> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("a JSON body ({e}): {}", self.body))
    }
}

/// An HTTP receiver on a loopback port: records every request and answers with the next scripted status (to
/// the next request of the scripted event, when one is named), or 204 once the script is empty. Taking the
/// status and recording the request happen under one lock, so the record's order is the script's.
#[derive(Clone, Default)]
struct Receiver {
    received: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<VecDeque<Scripted>>>,
}

/// A status to answer with, to the next request of the named event (any request if `None`).
type Scripted = (Option<&'static str>, u16);

impl Receiver {
    /// Starts it; its URL.
    async fn start(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hooks/cambium", listener.local_addr().expect("address"));
        let receiver = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let receiver = receiver.clone();
                tokio::spawn(async move { receiver.serve(stream).await });
            }
        });
        url
    }

    async fn serve(&self, mut stream: TcpStream) {
        let mut raw = Vec::new();
        let mut chunk = [0u8; 4096];
        let (head_len, content_length) = loop {
            let Ok(n) = stream.read(&mut chunk).await else { return };
            if n == 0 {
                return;
            }
            raw.extend_from_slice(&chunk[..n]);
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_string();
                let length = head
                    .split("\r\n")
                    .filter_map(|l| l.split_once(':'))
                    .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                break (end + 4, length);
            }
        };
        while raw.len() < head_len + content_length {
            let Ok(n) = stream.read(&mut chunk).await else { return };
            if n == 0 {
                return;
            }
            raw.extend_from_slice(&chunk[..n]);
        }
        let head = String::from_utf8_lossy(&raw[..head_len - 4]).to_string();
        let headers: Vec<(String, String)> = head
            .split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let body = String::from_utf8_lossy(&raw[head_len..head_len + content_length]).to_string();
        let status = {
            let mut script = self.script.lock().expect("script");
            let event = headers_value(&headers, "cambium-event");
            let status = match script.front() {
                Some((Some(scripted), _)) if Some(*scripted) != event.as_deref() => 204,
                Some(_) => script.pop_front().map_or(204, |(_, status)| status),
                None => 204,
            };
            self.received
                .lock()
                .expect("received")
                .push(Received { headers, body, status });
            status
        };
        let answer = format!("HTTP/1.1 {status} Scripted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("received").clone()
    }

    /// Waits (bounded) for a request answered 2XX whose event is `event` and whose body satisfies `matches`; the
    /// last one.
    async fn wait_for(&self, event: &str, matches: impl Fn(&Value) -> bool) -> Received {
        for _ in 0..600 {
            let found =
                self.received().into_iter().rev().find(|r| {
                    (200..300).contains(&r.status) && r.header("cambium-event") == event && matches(&r.json())
                });
            if let Some(found) = found {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no {event} delivery within 60 s; got {:?}", self.received());
    }
}

/// Asserts `received` is signed by `secret` under key `key_id`: `t=<unix s>,k=<key id>,v1=<hex HMAC-SHA256 of
/// "<t>.<body>">`, with a timestamp within a minute of now.
fn assert_signed(received: &Received, secret: &str, key_id: &str) {
    let header = received.header("cambium-signature");
    let mut t = None;
    let mut k = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = Some(value.to_owned()),
            Some(("k", value)) => k = Some(value.to_owned()),
            Some(("v1", value)) => v1 = Some(value.to_owned()),
            _ => panic!("an unknown part {part:?} in {header:?}"),
        }
    }
    let (t, k, v1) = (t.expect("t="), k.expect("k="), v1.expect("v1="));
    assert_eq!(k, key_id, "{header}");
    let t_s: i64 = t.parse().expect("t is unix seconds");
    assert!((jiff::Timestamp::now().as_second() - t_s).abs() < 60, "{header}");
    let signature: Vec<u8> = (0..v1.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&v1[i..i + 2], 16).expect("hex"))
        .collect();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let message = format!("{t}.{}", received.body);
    ring::hmac::verify(&key, message.as_bytes(), &signature)
        .unwrap_or_else(|_| panic!("the signature {header} does not verify over {message}"));
    let tampered = format!("{t}.{} ", received.body);
    assert!(ring::hmac::verify(&key, tampered.as_bytes(), &signature).is_err());
}

/// The deliveries of webhook `id` of `project`, newest first.
async fn deliveries(up: &Up, project: &str, id: &str) -> Vec<Value> {
    let reply = up
        .call("GET", &format!("/v1/projects/{project}/webhooks/{id}/deliveries"), None)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["deliveries"].as_array().expect("deliveries").clone()
}

/// Subscribes `url` to `events` in `project`; the webhook as created (with its secret).
async fn subscribe(up: &Up, project: &str, url: &str, events: &str) -> Value {
    let body = format!(r#"{{"url":"{url}","events":{events}}}"#);
    let reply = up
        .call("POST", &format!("/v1/projects/{project}/webhooks"), Some(&body))
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.json()["webhook"].clone()
}

fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is a string: {value}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn signed_events_arrive_retried_logged_and_across_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut up = Up::start_in(&root.path().join("cambium"), &RETRY_ARGS);
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let project = up.create_project("hooks").await;
    let all = r#"["operation.finished","operation.failed","branch.created","branch.deleted","branch.expired","branch.restored"]"#;
    let webhook = subscribe(&up, &project, &url, all).await;
    let (webhook_id, key_id) = (text(&webhook, "id"), text(&webhook, "signing_key_id"));
    let secret = text(&webhook, "secret");
    assert!(secret.starts_with("whsec_") && secret.len() == 70, "{secret}");
    // The secret is shown once.
    let got = up
        .call("GET", &format!("/v1/projects/{project}/webhooks/{webhook_id}"), None)
        .await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert!(got.json()["webhook"].get("secret").is_none(), "{}", got.body);
    assert_eq!(got.json()["webhook"]["url"], url.as_str());

    // The first delivery is refused once (500), then delivered by its retry.
    receiver
        .script
        .lock()
        .expect("script")
        .push_back((Some("operation.finished"), 500));
    let database = up.create_database(&project, "shop").await;
    let database_id = text(&database, "id");
    let created = receiver
        .wait_for("operation.finished", |b| {
            b["operation"]["database_id"] == database_id.as_str()
        })
        .await;
    assert_signed(&created, &secret, &key_id);
    assert_eq!(created.header("cambium-webhook"), webhook_id);
    let operation_id = text(&created.json()["operation"], "id");
    let as_api = up.call("GET", &format!("/v1/operations/{operation_id}"), None).await;
    assert_eq!(
        created.json(),
        as_api.json(),
        "the body is the resource as the API returns it"
    );
    let first = receiver.received()[0].clone();
    assert_eq!(
        first.header("cambium-delivery"),
        created.header("cambium-delivery"),
        "a retry is the same delivery"
    );
    let log = deliveries(&up, &project, &webhook_id).await;
    let logged = log
        .iter()
        .find(|d| d["id"] == created.header("cambium-delivery"))
        .expect("the delivery is logged");
    assert_eq!(logged["status"], "delivered", "{logged}");
    assert_eq!(logged["event"], "operation.finished");
    let codes: Vec<&Value> = logged["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| &a["status_code"])
        .collect();
    assert_eq!(codes, [500, 204], "{logged}");

    // Branch events: created, restored, deleted, and expired (by the sweep).
    let branch = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"feature"}"#),
        )
        .await;
    assert_eq!(branch.status, 201, "{}", branch.body);
    let branch = branch.json()["branch"].clone();
    let branch_id = text(&branch, "id");
    let arrived = receiver
        .wait_for("branch.created", |b| b["branch"]["id"] == branch_id.as_str())
        .await;
    assert_signed(&arrived, &secret, &key_id);
    assert_eq!(arrived.json()["branch"], branch, "the branch as the API returned it");
    let restore = format!(r#"{{"target_lsn":"{}"}}"#, text(&branch, "parent_lsn"));
    let reply = up
        .call("POST", &format!("/v1/branches/{branch_id}/restore"), Some(&restore))
        .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    up.wait_operation(&text(&reply.json()["operation"], "id")).await;
    let restored = receiver
        .wait_for("branch.restored", |b| b["branch"]["id"] == branch_id.as_str())
        .await;
    assert_signed(&restored, &secret, &key_id);
    let deleted = up.call("DELETE", &format!("/v1/branches/{branch_id}"), None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let gone = receiver
        .wait_for("branch.deleted", |b| b["branch"]["id"] == branch_id.as_str())
        .await;
    assert_eq!(gone.json()["branch"]["name"], "feature");
    let expires_at = format!(
        "{:.3}",
        jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(2))
            .expect("in range")
    );
    let preview = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(&format!(r#"{{"name":"preview","expires_at":"{expires_at}"}}"#)),
        )
        .await;
    assert_eq!(preview.status, 201, "{}", preview.body);
    let preview_id = text(&preview.json()["branch"], "id");
    let expired = receiver
        .wait_for("branch.expired", |b| b["branch"]["id"] == preview_id.as_str())
        .await;
    assert_signed(&expired, &secret, &key_id);
    receiver
        .wait_for("operation.finished", |b| {
            b["operation"]["action"] == "delete_branch" && b["operation"]["branch_id"] == preview_id.as_str()
        })
        .await;

    // A delivery refused just before the service is killed is still pending in the metadata: the restarted
    // service delivers it (the same delivery id).
    let before = receiver.received().len();
    receiver
        .script
        .lock()
        .expect("script")
        .push_back((Some("branch.created"), 503));
    let last = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"late"}"#),
        )
        .await;
    assert_eq!(last.status, 201, "{}", last.body);
    let late_id = text(&last.json()["branch"], "id");
    let is_late_creation =
        |r: &Received| r.header("cambium-event") == "branch.created" && r.json()["branch"]["id"] == late_id.as_str();
    let mut refused = None;
    for _ in 0..250 {
        refused = receiver.received()[before..]
            .iter()
            .find(|r| is_late_creation(r))
            .cloned();
        if refused.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = refused.expect("the late branch's creation was delivered");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["branch"]["id"], late_id.as_str());
    // The refusal is logged (the delivery pending its retry) before the kill: what the log must show after.
    let mut logged_refusal = false;
    for _ in 0..250 {
        let log = deliveries(&up, &project, &webhook_id).await;
        logged_refusal = log.iter().any(|d| {
            d["id"] == refused.header("cambium-delivery")
                && d["status"] == "pending"
                && d["attempts"][0]["status_code"] == 503
        });
        if logged_refusal {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(logged_refusal, "the refused attempt is logged, the delivery pending");
    up.process.kill9();
    up.process.restart();
    let mut after = Vec::new();
    for _ in 0..600 {
        after = receiver.received()[before..]
            .iter()
            .filter(|r| r.header("cambium-delivery") == refused.header("cambium-delivery"))
            .cloned()
            .collect::<Vec<Received>>();
        if after.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        after.len() >= 2,
        "the refused delivery was sent again after the restart: {after:?}"
    );
    assert_eq!(after[1].json()["branch"]["id"], late_id.as_str());
    assert_signed(&after[1], &secret, &key_id);
    let mut delivered = false;
    for _ in 0..100 {
        let log = deliveries(&up, &project, &webhook_id).await;
        let entry = log
            .iter()
            .find(|d| d["id"] == refused.header("cambium-delivery"))
            .expect("logged")
            .clone();
        if entry["status"] == "delivered" {
            assert_eq!(entry["attempts"][0]["status_code"], 503, "{entry}");
            delivered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(delivered, "the delivery pending across the restart is logged delivered");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_receiver_fails_after_bounded_backoff_and_bad_subscriptions_are_refused() {
    let up = Up::start_with(&RETRY_ARGS);
    let project = up.create_project("hooks").await;
    let path = format!("/v1/projects/{project}/webhooks");
    for (body, why) in [
        (
            r#"{"url":"ftp://example.com/x","events":["branch.created"]}"#,
            "an ftp URL",
        ),
        (r#"{"url":"not a url","events":["branch.created"]}"#, "no URL"),
        (r#"{"url":"http://example.com/x","events":[]}"#, "no events"),
        (
            r#"{"url":"http://example.com/x","events":["branch.created","branch.created","branch.created","branch.created","branch.created","branch.created","branch.created"]}"#,
            "more names than the schema's maxItems (found by scripts/fuzz-api.sh)",
        ),
        (
            r#"{"url":"http://example.com/x","events":["branch.renamed"]}"#,
            "an unknown event",
        ),
        (r#"{"url":"http://example.com/x"}"#, "events missing"),
        (r#"["http://example.com/x"]"#, "not an object"),
    ] {
        let reply = up.call("POST", &path, Some(body)).await;
        assert_eq!(reply.status, 400, "{why}: {}", reply.body);
        reply.assert_error(400, "invalid_request");
    }
    let other = up.create_project("other").await;
    // Nobody listens on this port: every attempt fails to connect.
    let dead = format!("http://127.0.0.1:{}/hook", free_port());
    let webhook = subscribe(&up, &project, &dead, r#"["branch.created","branch.created"]"#).await;
    assert_eq!(
        webhook["events"],
        serde_json::json!(["branch.created"]),
        "repeats count once"
    );
    let webhook_id = text(&webhook, "id");
    let listed = up.call("GET", &path, None).await;
    assert_eq!(
        listed.json()["webhooks"].as_array().map(Vec::len),
        Some(1),
        "{}",
        listed.body
    );
    assert!(listed.json()["webhooks"][0].get("secret").is_none());
    // Another project does not see it.
    let foreign = up
        .call("GET", &format!("/v1/projects/{other}/webhooks/{webhook_id}"), None)
        .await;
    foreign.assert_error(404, "not_found");

    let database = up.create_database(&project, "shop").await;
    let database_id = text(&database, "id");
    let branch = up
        .call(
            "POST",
            &format!("/v1/databases/{database_id}/branches"),
            Some(r#"{"name":"b"}"#),
        )
        .await;
    assert_eq!(branch.status, 201, "{}", branch.body);
    let mut failed = None;
    for _ in 0..300 {
        let log = deliveries(&up, &project, &webhook_id).await;
        assert_eq!(log.len(), 1, "one event subscribed to: {log:?}");
        if log[0]["status"] == "failed" {
            failed = Some(log[0].clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failed = failed.expect("the delivery failed within 30 s");
    let attempts = failed["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 4, "the configured attempts: {failed}");
    assert!(
        attempts
            .iter()
            .all(|a| a.get("status_code").is_none() && a["error"].is_string()),
        "{failed}"
    );
    assert!(failed.get("next_attempt_at").is_none(), "{failed}");
    // The waits double: 1 s, 2 s, 4 s (give or take the sender's one-second look at the queue).
    let times: Vec<jiff::Timestamp> = attempts
        .iter()
        .map(|a| a["at"].as_str().expect("at").parse().expect("a time"))
        .collect();
    for (i, expected_ms) in [1_000i64, 2_000, 4_000].into_iter().enumerate() {
        let gap_ms = times[i + 1].duration_since(times[i]).as_millis();
        assert!(
            gap_ms >= i128::from(expected_ms) && gap_ms < i128::from(expected_ms) + 3_000,
            "wait {i}: {gap_ms} ms, expected {expected_ms}: {failed}"
        );
    }
    let deleted = up.call("DELETE", &format!("{path}/{webhook_id}"), None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    up.call("GET", &format!("{path}/{webhook_id}/deliveries"), None)
        .await
        .assert_error(404, "not_found");
}
