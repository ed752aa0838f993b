//! `Idempotency-Key`: a POST carrying one is answered once; a retry with the same key gets the first
//! response again (with `Idempotent-Replayed: true`) and does nothing. The key names one request: method,
//! path and body (its SHA-256). Only successful (2xx) responses are
//! kept: a refused request changed nothing, so running it again is safe. A key reused for a different
//! request is 422; a retry while the first is still running is 409.

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
    let lookup = (account.clone(), key.clone());
    let stored = state
        .control
        .blocking(move |store| store.idempotent_response(&lookup.0, &lookup.1))
        .await?;
    if let Some(stored) = stored {
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
        return Ok(replay(stored));
    }
    let guard = {
        let entry = (account.clone(), key.clone());
        if !state.idempotency.keys.lock().insert(entry.clone()) {
            return Err(ApiError::Conflict(
                "a request with this Idempotency-Key is in progress".to_owned(),
            ));
        }
        InFlightGuard {
            in_flight: &state.idempotency,
            key: entry,
        }
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
    drop(guard);
    Ok(Response::from_parts(parts, Body::from(body)))
}

fn replay(stored: StoredResponse) -> Response {
    let mut response = Response::new(Body::from(stored.body));
    *response.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}
