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
//! The key is reserved in the metadata while its first request runs ([`crate::store::idempotency`]), so every API
//! process sharing the metadata sees it: a retry sent to another process meanwhile is 409 too.
//!
//! **Invariant:** a key's request runs at most once while its response is kept: the key is reserved before the
//! stored response is looked up, and the response is stored in the same transaction that lets the reservation
//! go (the store's invariant); a reservation is renewed while its request runs and let go when it ends without a
//! response to keep (also when the request is cancelled).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use crate::control::Control;
use crate::error::ApiError;
use crate::store::idempotency::{Reservation, StoredResponse, RESERVATION_LEASE_MS};
use crate::store::AccountId;

/// The request header.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The longest key, in bytes.
const KEY_LEN_MAX_BYTES: usize = 255;
/// The largest response body kept.
const BODY_BYTES_MAX: usize = 1 << 20;

/// This process's reservation of a key while its request runs: renewed in the background, and let go when
/// dropped unless the response was stored (which lets it go itself).
struct Reserved {
    control: Arc<Control>,
    account: AccountId,
    key: String,
    renewal: tokio::task::JoinHandle<()>,
    /// Whether the reservation is already gone (stored or released).
    ended: bool,
}

impl Reserved {
    fn new(control: Arc<Control>, account: AccountId, key: String) -> Reserved {
        let renewal = tokio::spawn({
            let (control, account, key) = (Arc::clone(&control), account.clone(), key.clone());
            async move {
                let period = Duration::from_millis(RESERVATION_LEASE_MS / 3);
                loop {
                    tokio::time::sleep(period).await;
                    let (account, key) = (account.clone(), key.clone());
                    match control
                        .blocking(move |store| store.renew_idempotency_reservation(&account, &key))
                        .await
                    {
                        Ok(true) => {}
                        // Taken over (this process was thought dead): the request runs on; its response is
                        // stored as usual, but a retry may have run too.
                        Ok(false) => {
                            tracing::warn!("an Idempotency-Key reservation was lost while its request ran");
                            return;
                        }
                        Err(error) => tracing::warn!(%error, "an Idempotency-Key reservation was not renewed"),
                    }
                }
            }
        });
        Reserved {
            control,
            account,
            key,
            renewal,
            ended: false,
        }
    }

    /// Lets the reservation go now (the request ended without a response to keep).
    async fn release(mut self) -> Result<(), ApiError> {
        self.renewal.abort();
        self.ended = true;
        let (account, key) = (self.account.clone(), self.key.clone());
        self.control
            .blocking(move |store| store.release_idempotency_key(&account, &key))
            .await
    }

    /// Stores `response` as the key's answer, which lets the reservation go.
    async fn store(mut self, response: StoredResponse) -> Result<(), ApiError> {
        self.renewal.abort();
        let (account, key) = (self.account.clone(), self.key.clone());
        self.control
            .blocking(move |store| store.store_idempotent_response(&account, &key, &response))
            .await?;
        self.ended = true;
        Ok(())
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.renewal.abort();
        if self.ended {
            return;
        }
        // Cancelled (the client went away) or failed before its end: let go in the background; if even that
        // fails, the lease expires.
        let (control, account, key) = (Arc::clone(&self.control), self.account.clone(), self.key.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = control
                    .blocking(move |store| store.release_idempotency_key(&account, &key))
                    .await
                {
                    tracing::warn!(
                        ?error,
                        "an Idempotency-Key reservation was not let go; its lease expires"
                    );
                }
            });
        }
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
    // Reserve the key first, then look for a stored response (one store call: see the invariant).
    let (lookup_account, lookup_key) = (account.clone(), key.clone());
    let reservation = state
        .control
        .blocking(move |store| store.reserve_idempotency_key(&lookup_account, &lookup_key))
        .await?;
    crate::stages::mark("idempotency_lookup");
    let reserved = match reservation {
        // A stored response is final: it is replayed whoever holds the key.
        Reservation::Stored(stored) => return replay(stored, &method, &path, &request_hash),
        Reservation::Held => {
            return Err(ApiError::Conflict(
                "a request with this Idempotency-Key is in progress".to_owned(),
            ))
        }
        Reservation::Reserved => Reserved::new(Arc::clone(&state.control), account, key),
    };
    let response = next.run(request).await;
    if !response.status().is_success() {
        reserved.release().await?;
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
    reserved.store(stored).await?;
    crate::stages::mark("idempotency_store");
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
