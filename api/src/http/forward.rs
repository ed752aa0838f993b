//! Requests that change a database, or need its compute, are handled by the compute host it is placed on
//! (issue 17 item 4): this layer, outside every other `/v1` layer, sends such a request as it came (method, path,
//! query, headers with the key and `Idempotency-Key`, body) to that host's `/v1` URL and returns its response.
//!
//! - What goes: every non-`GET` call under `/v1/databases/{id}` and `/v1/branches/{id}`, and `GET
//!   /v1/branches/{id}/schema_diff` (it reads the branch through the compute); a database's creation (`POST
//!   /v1/projects/{id}/databases`) goes to the live host with the fewest databases, which places it on itself.
//!   Reads and project-level calls are answered by any process from the metadata. Outside `/v1`, an admin's
//!   `POST /admin/databases/{id}/move_pageserver` goes to the database's host too: the move holds the database's
//!   lock, which only the host's branch creations and restores take.
//! - What stays: a request for a database placed here, on no host, or on a host that is not live (its databases
//!   are re-placed within a lease, `control::placement`), and every request that carries
//!   [`FORWARDED_HEADER`]: a forwarded request is never forwarded again, so placements that changed meanwhile
//!   cannot make it loop. The receiving host authenticates, scopes, audits and keeps the idempotent response
//!   itself, as for any request.
//! - A host that cannot be reached gives 503 `unavailable` (retry: once its lease expires, its databases are
//!   served elsewhere).

use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderName, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AppState, REQUEST_BODY_BYTES_MAX};
use crate::error::ApiError;
use crate::store::hosts::ComputeHostRow;

/// Set on a forwarded request to the forwarding host's id; such a request is handled where it arrives.
pub const FORWARDED_HEADER: &str = "cambium-forwarded-by";

/// Bound of one forwarded request (the calls that run long are operations, answered at once).
const FORWARD_TIMEOUT_MS: u64 = 60_000;
/// Bound of connecting to the host a request goes to.
const FORWARD_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// The largest forwarded response body read back (responses are JSON objects and pages of at most 500 items).
const RESPONSE_BODY_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The HTTP client forwarded requests go through.
#[derive(Debug, Clone)]
pub(crate) struct Forwarder {
    /// `None` if the client could not be built (logged): requests are then handled where they arrive.
    client: Option<reqwest::Client>,
}

impl Forwarder {
    /// A client with the bounds above.
    pub(crate) fn new() -> Forwarder {
        // reqwest is built with rustls and no bundled provider; the process's default may already be set.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(FORWARD_TIMEOUT_MS))
            .connect_timeout(Duration::from_millis(FORWARD_CONNECT_TIMEOUT_MS))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("cambium-forward")
            .build();
        match client {
            Ok(client) => Forwarder { client: Some(client) },
            Err(error) => {
                tracing::error!(%error, "the HTTP client for forwarding requests could not be built; not forwarding");
                Forwarder { client: None }
            }
        }
    }
}

/// What a request concerns, for placement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Database(String),
    Branch(String),
    NewDatabase,
}

/// The placement target of `method path`, if the request must run on a database's host.
fn target_of(method: &Method, path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let read = *method == Method::GET || *method == Method::HEAD || *method == Method::OPTIONS;
    match segments.as_slice() {
        ["v1", "branches", id, "schema_diff"] if *method == Method::GET && !id.is_empty() => {
            Some(Target::Branch((*id).to_owned()))
        }
        _ if read => None,
        ["v1", "projects", _, "databases"] if *method == Method::POST => Some(Target::NewDatabase),
        ["v1", "databases", id, ..] if !id.is_empty() => Some(Target::Database((*id).to_owned())),
        ["v1", "branches", id, ..] if !id.is_empty() => Some(Target::Branch((*id).to_owned())),
        // A pageserver move holds the database's lock: it must be the host's, which also makes its branches.
        ["admin", "databases", id, "move_pageserver"] if !id.is_empty() => Some(Target::Database((*id).to_owned())),
        _ => None,
    }
}

/// The layer; see the module doc.
pub(super) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.headers().contains_key(FORWARDED_HEADER) || state.control.is_single_host() {
        return next.run(request).await;
    }
    let Some(client) = state.forwarder.client.clone() else {
        return next.run(request).await;
    };
    let Some(target) = target_of(request.method(), request.uri().path()) else {
        return next.run(request).await;
    };
    let control = &state.control;
    let host = match target {
        Target::Database(id) => control.blocking(move |store| store.host_of_database(&id)).await,
        Target::Branch(id) => control.blocking(move |store| store.host_of_branch(&id)).await,
        Target::NewDatabase => control.blocking(|store| store.least_loaded_host()).await,
    };
    match host {
        Ok(Some(host)) if host.live && host.id != control.host_id() => {
            match forward(&client, control.host_id(), &host, request).await {
                Ok(response) => response,
                Err(error) => error.into_response(),
            }
        }
        // Here, on no live host (re-placed within a lease), or unknown (the handler says 404).
        Ok(_) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and the ones the client recomputes: not copied either way.
fn copied(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// Sends `request` to `host` and returns its response as it came.
async fn forward(
    client: &reqwest::Client,
    me: &str,
    host: &ComputeHostRow,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, REQUEST_BODY_BYTES_MAX)
        .await
        .map_err(|_| ApiError::InvalidRequest(format!("the body is larger than {REQUEST_BODY_BYTES_MAX} bytes")))?;
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path_and_query}", host.api_url.trim_end_matches('/'));
    let mut outgoing = client.request(parts.method.clone(), &url);
    for (name, value) in &parts.headers {
        if copied(name) {
            outgoing = outgoing.header(name, value);
        }
    }
    let unreachable = |error: reqwest::Error| {
        tracing::warn!(host = %host.id, %url, %error, "forwarding a request to the database's compute host failed");
        ApiError::Unavailable(format!(
            "the compute host serving this database ({}) did not answer; retry",
            host.id
        ))
    };
    let response = outgoing
        .header(FORWARDED_HEADER, me)
        .body(body)
        .send()
        .await
        .map_err(unreachable)?;
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.map_err(unreachable)?;
    if bytes.len() > RESPONSE_BODY_BYTES_MAX {
        return Err(ApiError::Unavailable(
            "the compute host's response is too large".to_owned(),
        ));
    }
    let mut answer = Response::new(Body::from(bytes));
    *answer.status_mut() = status;
    for (name, value) in &headers {
        if copied(name) {
            answer.headers_mut().append(name, value.clone());
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_forwarded() {
        let branch = |id: &str| Some(Target::Branch(id.to_owned()));
        let database = |id: &str| Some(Target::Database(id.to_owned()));
        assert_eq!(target_of(&Method::GET, "/v1/branches/br_1"), None);
        assert_eq!(target_of(&Method::GET, "/v1/branches/br_1/schema_diff"), branch("br_1"));
        assert_eq!(target_of(&Method::POST, "/v1/branches/br_1/restore"), branch("br_1"));
        assert_eq!(target_of(&Method::DELETE, "/v1/branches/br_1"), branch("br_1"));
        assert_eq!(target_of(&Method::PATCH, "/v1/databases/db_1"), database("db_1"));
        assert_eq!(
            target_of(&Method::POST, "/v1/databases/db_1/branches"),
            database("db_1")
        );
        assert_eq!(target_of(&Method::POST, "/v1/databases/db_1/suspend"), database("db_1"));
        assert_eq!(target_of(&Method::GET, "/v1/databases/db_1"), None);
        assert_eq!(
            target_of(&Method::POST, "/v1/projects/p/databases"),
            Some(Target::NewDatabase)
        );
        assert_eq!(target_of(&Method::POST, "/v1/projects"), None);
        assert_eq!(
            target_of(&Method::POST, "/admin/databases/db_1/move_pageserver"),
            database("db_1")
        );
        assert_eq!(target_of(&Method::GET, "/admin/operations/op_1"), None);
        assert_eq!(target_of(&Method::DELETE, "/v1/projects/p"), None);
        assert_eq!(target_of(&Method::POST, "/v1/projects/p/webhooks"), None);
        assert_eq!(target_of(&Method::DELETE, "/v1/databases/"), None);
        assert_eq!(target_of(&Method::POST, "/console/sql"), None);
    }

    #[test]
    fn hop_by_hop_headers_stay() {
        assert!(!copied(&HeaderName::from_static("connection")));
        assert!(!copied(&HeaderName::from_static("host")));
        assert!(copied(&HeaderName::from_static("authorization")));
        assert!(copied(&HeaderName::from_static("idempotency-key")));
    }
}
