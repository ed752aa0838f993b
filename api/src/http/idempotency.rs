//! `Idempotency-Key`: a POST carrying one is answered once; a retry with the same key gets the first
//! response again (with `Idempotent-Replayed: true`) and does nothing. The key names one request: method,
//! path and body (its SHA-256). Only successful (2xx) responses are
//! kept: a refused request changed nothing, so running it again is safe. A key reused for a different
//! request is 422; a retry while the first is still running (or being looked up) is 409.
//!
//! Responses are stored without passwords (the store redacts every `scheme://user:password@` it is given): a
//! replay of a database's creation or of a password reset shows the connection string without it. A password is
//! given once, to the request that made it.
//!
//! **Invariant:** a key's request runs at most once while its response is kept: the key is reserved before the
//! stored response is looked up, and the response is stored before the reservation is let go.

use std::collections::HashSet;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use parking_lot::Mutex;

use super::AppState;
use crate::error::ApiError;
use crate::store::idempotency::StoredResponse;
use crate::store::AccountId;

/// The request header.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The longest key, in bytes.
const KEY_LEN_MAX_BYTES: usize = 255;
/// The largest response body kept.
const BODY_BYTES_MAX: usize = 1 << 20;

/// The keys whose first request is running.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    keys: Mutex<HashSet<(AccountId, String)>>,
}

/// Removes its key from [`InFlight`] when dropped (also when the request is cancelled).
struct InFlightGuard<'a> {
    in_flight: &'a InFlight,
    key: (AccountId, String),
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.in_flight.keys.lock().remove(&self.key);
    }
}

/// The middleware; runs after authentication.
pub(crate) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    let Some(key) = request.headers().get(IDEMPOTENCY_KEY_HEADER) else {
        return Ok(next.run(request).await);
    };
    if request.method() != Method::POST {
        return Ok(next.run(request).await);
    }
    let key = key
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= KEY_LEN_MAX_BYTES)
        .ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "`Idempotency-Key` must be 1 to {KEY_LEN_MAX_BYTES} visible ASCII characters"
            ))
        })?
        .to_owned();
    let account = request
        .extensions()
        .get::<AccountId>()
        .cloned()
        .ok_or(ApiError::Unauthenticated)?;
    let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
    // The request body is part of what the key names: read it (bounded), hash it, and pass it on.
    let (request_parts, request_body) = request.into_parts();
    let request_body = to_bytes(request_body, BODY_BYTES_MAX)
        .await
        .map_err(|_| ApiError::InvalidRequest(format!("the body is larger than {BODY_BYTES_MAX} bytes")))?;
    let request_hash = ring::digest::digest(&ring::digest::SHA256, &request_body)
        .as_ref()
        .to_vec();
    let request = Request::from_parts(request_parts, Body::from(request_body));
    // Reserve the key first, then look for a stored response. The other order let a retry look (nothing stored
    // yet), then reserve after the first request had stored its response and let go, and run a second time.
    // In this order a reservation is only taken once the previous holder's response is stored (it stores before
    // it lets go), so the lookup sees it. In process memory rather than a SQLite row: one process serves a
    // metadata store, and a row would outlive a crash as a stale reservation.
    let entry = (account.clone(), key.clone());
    let reserved = state.idempotency.keys.lock().insert(entry.clone());
    let guard = reserved.then(|| InFlightGuard {
        in_flight: &state.idempotency,
        key: entry,
    });
    let lookup = (account.clone(), key.clone());
    let stored = state
        .control
        .blocking(move |store| store.idempotent_response(&lookup.0, &lookup.1))
        .await?;
    crate::stages::mark("idempotency_lookup");
    // A stored response is final: it is replayed whoever holds the reservation (another retry's lookup).
    if let Some(stored) = stored {
        return replay(stored, &method, &path, &request_hash);
    }
    let Some(guard) = guard else {
        return Err(ApiError::Conflict(
            "a request with this Idempotency-Key is in progress".to_owned(),
        ));
    };
    let response = next.run(request).await;
    if !response.status().is_success() {
        drop(guard);
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let body = to_bytes(body, BODY_BYTES_MAX).await.map_err(|error| {
        tracing::error!(%error, "a response body could not be read");
        ApiError::Internal
    })?;
    let stored = StoredResponse {
        method,
        path,
        request_hash,
        status: parts.status.as_u16(),
        body: body.to_vec(),
    };
    state
        .control
        .blocking(move |store| store.store_idempotent_response(&account, &key, &stored))
        .await?;
    crate::stages::mark("idempotency_store");
    drop(guard);
    Ok(Response::from_parts(parts, Body::from(body)))
}

/// The stored response again, if it answered this method, path and body (422 if not).
fn replay(stored: StoredResponse, method: &str, path: &str, request_hash: &[u8]) -> Result<Response, ApiError> {
    if stored.method != method || stored.path != path {
        return Err(ApiError::Unprocessable(format!(
            "this Idempotency-Key was used for {} {}",
            stored.method, stored.path
        )));
    }
    if stored.request_hash != request_hash {
        return Err(ApiError::Unprocessable(
            "this Idempotency-Key was used with a different body".to_owned(),
        ));
    }
    let mut response = Response::new(Body::from(stored.body));
    *response.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    Ok(response)
}
