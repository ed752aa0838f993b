//! The `/v1` API over HTTP(S): one authenticated call, its error envelope turned into [`ApiFailure`], and lists
//! followed across their pages. Bodies are `serde_json::Value`s, so fields the API adds reach the output without
//! a change here.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::error::{ApiFailure, ClientError};

/// How long one call may take: a long-poll asks for at most [`super::wait::LONG_POLL_S`], and the server
/// bounds its own work well inside this.
const REQUEST_TIMEOUT_S: u64 = 120;
/// How long connecting may take.
const CONNECT_TIMEOUT_S: u64 = 10;
/// Items a list gathers across pages when `--limit` is not given.
pub(crate) const LIST_ITEMS_MAX: usize = 10_000;
/// The largest page the API serves.
const PAGE_ITEMS_MAX: usize = 500;
/// Characters of a body that is not an error envelope kept in the message.
const BODY_EXCERPT_CHARS_MAX: usize = 200;

/// Where the API is and how to authenticate to it, as the flags and variables say.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The API's base URL (`http://127.0.0.1:8420`).
    pub(crate) url: String,
    /// A key given directly.
    pub(crate) key: Option<String>,
    /// The file to read the key from when none is given.
    pub(crate) key_file: PathBuf,
    /// A PEM certificate to trust besides the system's roots (a self-signed API certificate).
    pub(crate) ca_cert: Option<PathBuf>,
}

/// An authenticated client of one API.
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    /// A client of `endpoint`: its URL checked, its key found (the flag or variable, else the key file).
    pub(crate) fn new(endpoint: &Endpoint) -> Result<Api, ClientError> {
        let base = parse_base_url(&endpoint.url)?;
        let key = match &endpoint.key {
            Some(key) if !key.trim().is_empty() => key.trim().to_owned(),
            _ => read_key_file(&endpoint.key_file)?,
        };
        // reqwest's rustls has no provider of its own here (no aws-lc): ring, for the whole process. A second
        // install (another client in the same process) keeps the first, which is the same provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(REQUEST_TIMEOUT_S))
            .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_S))
            .user_agent(concat!("cambium-cli/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &endpoint.ca_cert {
            let pem = std::fs::read(path)
                .map_err(|e| ClientError::Local(format!("reading the CA certificate {}: {e}", path.display())))?;
            let certificate = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| ClientError::Usage(format!("{} is not a PEM certificate: {e}", path.display())))?;
            builder = builder.add_root_certificate(certificate);
        }
        let http = builder
            .build()
            .map_err(|e| ClientError::Local(format!("making the HTTP client: {e}")))?;
        Ok(Api { http, base, key })
    }

    /// `method path` with `body`; the response's JSON, or `None` for a bodiless success (204).
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url).bearer_auth(&self.key);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(|e| unreachable(&url, &e))?;
        let status = response.status().as_u16();
        let header_request_id = response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.map_err(|e| unreachable(&url, &e))?;
        if !(200..300).contains(&status) {
            return Err(ClientError::Api(failure_of(status, &text, header_request_id)));
        }
        if text.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&text).map(Some).map_err(|e| {
            ClientError::Local(format!(
                "the API's answer to {url} is not JSON ({e}): {}",
                excerpt(&text)
            ))
        })
    }

    /// `GET path`: its JSON (an empty success is an error here: every GET answers a body).
    pub(crate) async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::GET, path, None)
            .await?
            .ok_or_else(|| ClientError::Local(format!("GET {path} answered no body")))
    }

    /// `method path body`, expecting a body.
    pub(crate) async fn send(&self, method: Method, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.call(method.clone(), path, Some(body))
            .await?
            .ok_or_else(|| ClientError::Local(format!("{method} {path} answered no body")))
    }

    /// Every item of the list at `path` (under its plural `key`), following `next_cursor` until the end or
    /// `items_max` items. Whether more were left is the second value.
    pub(crate) async fn list(
        &self,
        path: &str,
        key: &str,
        items_max: usize,
    ) -> Result<(Vec<Value>, bool), ClientError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page_max = (items_max - items.len()).clamp(1, PAGE_ITEMS_MAX);
            let mut page_path = format!("{path}?limit={page_max}");
            if let Some(cursor) = &cursor {
                // A cursor is `[A-Za-z0-9_]`, nothing to encode.
                page_path.push_str(&format!("&cursor={cursor}"));
            }
            let page = self.get(&page_path).await?;
            let page_items = page
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| ClientError::Local(format!("GET {path} answered no `{key}` list")))?;
            items.extend(page_items.iter().cloned());
            cursor = page.get("next_cursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() {
                return Ok((items, false));
            }
            if items.len() >= items_max {
                return Ok((items, true));
            }
        }
    }
}

/// The API's base URL without a trailing `/`, if it is an `http(s)://` URL.
fn parse_base_url(text: &str) -> Result<String, ClientError> {
    let url =
        reqwest::Url::parse(text).map_err(|e| ClientError::Usage(format!("--api-url {text:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ClientError::Usage(format!(
            "--api-url {text:?} must be http://HOST:PORT or https://HOST:PORT"
        )));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// The key in `path` (what `cambium up` writes to `<data dir>/api_key`).
fn read_key_file(path: &std::path::Path) -> Result<String, ClientError> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_owned()),
        Ok(_) => Err(ClientError::NoKey(format!("{} is empty", path.display()))),
        Err(e) => Err(ClientError::NoKey(format!(
            "set CAMBIUM_API_KEY (or --api-key), or point --api-key-file at the key `cambium up` wrote \
             (reading {}: {e})",
            path.display()
        ))),
    }
}

/// A transport failure as [`ClientError::Unreachable`], with its causes (reqwest's own text is only "error
/// sending request for url (…)", which the message names already).
fn unreachable(url: &str, error: &reqwest::Error) -> ClientError {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        causes.push(inner.to_string());
        source = inner.source();
    }
    let reason = if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    };
    ClientError::Unreachable {
        url: url.to_owned(),
        reason,
    }
}

/// The error an unsuccessful answer carries: its envelope, or the status and a piece of the body.
fn failure_of(status: u16, body: &str, header_request_id: Option<String>) -> ApiFailure {
    let envelope: Option<Value> = serde_json::from_str(body).ok();
    let error = envelope.as_ref().and_then(|v| v.get("error"));
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    ApiFailure {
        status,
        code: field("code").unwrap_or_else(|| format!("http_{status}")),
        message: field("message").unwrap_or_else(|| {
            if body.trim().is_empty() {
                "no error message".to_owned()
            } else {
                excerpt(body)
            }
        }),
        request_id: field("request_id").or(header_request_id),
    }
}

/// The start of `text`, on one line.
fn excerpt(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(BODY_EXCERPT_CHARS_MAX) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_gives_its_fields_and_anything_else_its_status() {
        let body = r#"{"error":{"code":"not_found","message":"no such branch","request_id":"req_A"}}"#;
        let failure = failure_of(404, body, Some("req_B".to_owned()));
        assert_eq!(failure.code, "not_found");
        assert_eq!(failure.message, "no such branch");
        assert_eq!(failure.request_id.as_deref(), Some("req_A"));
        let failure = failure_of(502, "<html>\n bad   gateway </html>", Some("req_B".to_owned()));
        assert_eq!(failure.code, "http_502");
        assert_eq!(failure.message, "<html> bad gateway </html>");
        assert_eq!(failure.request_id.as_deref(), Some("req_B"));
        assert_eq!(failure_of(500, "", None).message, "no error message");
        assert_eq!(excerpt(&"x".repeat(500)).chars().count(), BODY_EXCERPT_CHARS_MAX + 1);
    }

    #[test]
    fn only_http_urls_are_api_urls() {
        assert_eq!(
            parse_base_url("http://127.0.0.1:8420/").expect("valid"),
            "http://127.0.0.1:8420"
        );
        assert!(parse_base_url("https://api.example:443").is_ok());
        for bad in ["127.0.0.1:8420", "ftp://x", "http://", ""] {
            assert!(matches!(parse_base_url(bad), Err(ClientError::Usage(_))), "{bad}");
        }
    }
}
