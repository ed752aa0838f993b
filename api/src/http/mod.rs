//! The `/v1` routes over axum.
//!
//! Every response carries `X-Request-Id` (`req_<ULID>`). Errors are
//! `{"error": {"code", "message", "request_id"}}`: a handler returns an [`ApiError`], which becomes a
//! bodiless response carrying the code and message as an extension, and the request-id middleware
//! writes the envelope with the id it assigned. Every `/v1` route but the OpenAPI document requires
//! `Authorization: Bearer <key>`, and `/metrics` a key of the admin account (it counts every account's databases); each account is rate limited ([`limits`]), and a POST with an
//! `Idempotency-Key` is answered once ([`idempotency`]).
//!
//! Lists are in id order, which is creation order (ULIDs sort by time), oldest first; operations are newest
//! first. `?limit=` is 1..=500 (default 50); `next_cursor` is the last id of a full page when more follow,
//! `null` at the end, and is opaque to clients.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::auth::{self, Caller};
use crate::control::Control;
use crate::error::{ApiError, ErrorInfo};
use crate::ids;

mod admin;
mod branches;
mod console;
mod consumption;
mod databases;
pub mod forward;
mod health;
mod idempotency;
pub mod labels;
pub mod limits;
mod metrics;
pub mod openapi;
mod operations;
mod projects;
mod scope;
pub mod serve;
pub mod tls;
pub(crate) mod views;
mod webhooks;

pub use serve::{serve, ServeConfig};
pub use tls::ApiTls;

/// The request id header set on every response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// `?limit=` when absent.
const LIST_LIMIT_DEFAULT: usize = 50;
/// The largest `?limit=`.
const LIST_LIMIT_MAX: usize = 500;
/// The longest name, in characters.
const NAME_LEN_MAX_CHARS: usize = 256;
/// The longest cursor, in bytes.
const CURSOR_LEN_MAX: usize = 64;
/// The largest request body, in bytes: every body is a small JSON object (a name is at most 1 KiB of UTF-8), and
/// bodies are read whole before the handler runs, so this bounds the memory of the connections in flight.
pub const REQUEST_BODY_BYTES_MAX: usize = 64 * 1024;

/// How the HTTP layer behaves.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Requests per second allowed per account, on average; 0 turns the limit off.
    pub rate_limit_per_s: u32,
    /// Requests an account may make at once above the average; `None`: twice `rate_limit_per_s`, so a lower
    /// rate also means a smaller burst (a fixed burst of 2 000 would hide a limit of 5 a second).
    pub rate_limit_burst: Option<u32>,
    /// How long a request's body may take to arrive, from the end of its head; later is 408.
    pub body_read_timeout_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> HttpConfig {
        HttpConfig {
            rate_limit_per_s: 1_000,
            rate_limit_burst: None,
            body_read_timeout_ms: 10_000,
        }
    }
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) control: Arc<Control>,
    limiter: Arc<limits::RateLimiter>,
    metrics: Arc<metrics::Metrics>,
    forwarder: forward::Forwarder,
}

/// The API's router over `control`.
///
/// On PostgreSQL metadata, which other API processes may share, the rate limit is shared with them
/// ([`limits`]): a task on the current runtime exchanges the counts until the router is dropped.
pub fn router(control: Arc<Control>, config: &HttpConfig) -> Router {
    let burst = config
        .rate_limit_burst
        .unwrap_or_else(|| config.rate_limit_per_s.saturating_mul(2));
    let shared = control.store.dialect() == crate::store::sql::Dialect::Postgres && config.rate_limit_per_s > 0;
    let limiter = if shared {
        let limiter = Arc::new(limits::RateLimiter::shared(config.rate_limit_per_s, burst));
        match tokio::runtime::Handle::try_current() {
            Ok(_) => drop(limits::spawn_sharing(&limiter, Arc::clone(&control))),
            Err(_) => tracing::warn!("no runtime: the rate limit is not shared with other API processes"),
        }
        limiter
    } else {
        Arc::new(limits::RateLimiter::new(config.rate_limit_per_s, burst))
    };
    let state = AppState {
        control,
        limiter,
        metrics: Arc::new(metrics::Metrics::default()),
        forwarder: forward::Forwarder::new(),
    };
    let v1 = Router::new()
        .route("/v1/projects", get(projects::list).post(projects::create))
        .route(
            "/v1/projects/{id}",
            get(projects::get).patch(projects::update).delete(projects::delete),
        )
        .route(
            "/v1/projects/{id}/databases",
            get(databases::list).post(databases::create),
        )
        .route("/v1/projects/{id}/operations", get(operations::list))
        .route("/v1/projects/{id}/audit", get(projects::audit))
        .route("/v1/projects/{id}/consumption", get(consumption::get))
        .route("/v1/projects/{id}/webhooks", get(webhooks::list).post(webhooks::create))
        .route(
            "/v1/projects/{id}/webhooks/{webhook_id}",
            get(webhooks::get).delete(webhooks::delete),
        )
        .route(
            "/v1/projects/{id}/webhooks/{webhook_id}/deliveries",
            get(webhooks::deliveries),
        )
        .route(
            "/v1/databases/{id}",
            get(databases::get).patch(databases::update).delete(databases::delete),
        )
        .route("/v1/databases/{id}/resume", post(databases::resume))
        .route("/v1/databases/{id}/suspend", post(databases::suspend))
        .route("/v1/databases/{id}/reset_password", post(databases::reset_password))
        .route("/v1/databases/{id}/endpoints", get(databases::endpoints))
        .route("/v1/databases/{id}/health", get(health::get))
        .route(
            "/v1/databases/{id}/branches",
            get(branches::list).post(branches::create),
        )
        .route(
            "/v1/branches/{id}",
            get(branches::get).patch(branches::update).delete(branches::delete),
        )
        .route("/v1/branches/{id}/restore", post(branches::restore))
        .route("/v1/branches/{id}/reset", post(branches::reset))
        .route("/v1/branches/{id}/schema_diff", get(branches::schema_diff))
        .route("/v1/operations/{id}", get(operations::get))
        .route_layer(middleware::from_fn_with_state(state.clone(), idempotency::layer))
        .route_layer(middleware::from_fn_with_state(state.clone(), scope::layer))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key))
        .route_layer(middleware::from_fn_with_state(state.clone(), metrics::layer))
        // Outermost: a request for another host's database is forwarded before anything else looks at it.
        .route_layer(middleware::from_fn_with_state(state.clone(), forward::layer));
    Router::new()
        .route("/v1/openapi.json", get(openapi::document))
        .route(
            "/metrics",
            get(metrics::serve).route_layer(middleware::from_fn_with_state(state.clone(), require_admin)),
        )
        .route(
            "/admin/databases/{id}/move_pageserver",
            post(admin::move_pageserver)
                .route_layer(middleware::from_fn_with_state(state.clone(), require_admin))
                // Outermost, as for `/v1`: sent to the database's host before anything else looks at it.
                .route_layer(middleware::from_fn_with_state(state.clone(), forward::layer)),
        )
        .route(
            "/admin/operations/{id}",
            get(admin::operation).route_layer(middleware::from_fn_with_state(state.clone(), require_admin)),
        )
        .route("/internal/databases/{id}/pageserver", post(admin::follow_pageserver))
        .merge(v1)
        .merge(console::routes())
        .fallback(|| async { ApiError::NotFound })
        // Without this, axum answers a known path's missing method with a bare 405 and no envelope.
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state)
        .layer(middleware::from_fn_with_state(
            Duration::from_millis(config.body_read_timeout_ms),
            read_body,
        ))
        .layer(middleware::from_fn(request_id))
}

/// Reads the whole request body within `timeout` (408 after it) and at most [`REQUEST_BODY_BYTES_MAX`] bytes
/// (400 past it) before anything else looks at the request, so a client that sends its body slowly or never
/// holds a connection for `timeout` at most.
async fn read_body(State(timeout): State<Duration>, request: Request, next: Next) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let body = match tokio::time::timeout(timeout, to_bytes(body, REQUEST_BODY_BYTES_MAX)).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => {
            return Err(ApiError::InvalidRequest(format!(
                "the body is malformed or larger than {REQUEST_BODY_BYTES_MAX} bytes"
            )))
        }
        Err(_) => {
            return Err(ApiError::RequestTimeout(format!(
                "the request body did not arrive within {} ms",
                timeout.as_millis()
            )))
        }
    };
    Ok(next.run(Request::from_parts(parts, Body::from(body))).await)
}

/// A request's id (`req_…`), in its extensions for the layers that record it.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) String);

/// Assigns the request id, sets `X-Request-Id` and writes error envelopes.
async fn request_id(mut request: Request, next: Next) -> Response {
    let now_ms = u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0);
    let id = format!("req_{}", ids::new_ulid(now_ms));
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(request).await;
    if let Some(info) = response.extensions_mut().remove::<ErrorInfo>() {
        let body = serde_json::json!({
            "error": { "code": info.code, "message": info.message, "request_id": id }
        });
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        response = (status, Json(body)).into_response();
        for (name, value) in &headers {
            if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                response.headers_mut().insert(name, value.clone());
            }
        }
    }
    match HeaderValue::from_str(&id) {
        Ok(value) => {
            response.headers_mut().insert(REQUEST_ID_HEADER, value);
        }
        Err(_) => unreachable!("a request id is ASCII: {id}"),
    }
    response
}

/// The request's bearer key (401 if there is none that is valid), within its account's rate limit (429).
async fn authenticate(state: &AppState, secret: Option<String>) -> Result<Caller, ApiError> {
    let secret = secret.ok_or(ApiError::Unauthenticated)?;
    let caller = state
        .control
        .read(move |store| auth::authenticate(store, &secret))
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    state.limiter.check(&caller.account)?;
    Ok(caller)
}

/// [`authenticate`], and in the same store call (one hand-off to the blocking pool, not two) the project that
/// `path` concerns as the key's account sees it, for the scope layer ([`scope::project_of`]).
async fn authenticate_scoped(
    state: &AppState,
    secret: Option<String>,
    path: String,
) -> Result<(Caller, scope::Scoped), ApiError> {
    let secret = secret.ok_or(ApiError::Unauthenticated)?;
    let (caller, project) = state
        .control
        .read(move |store| {
            let Some(caller) = auth::authenticate(store, &secret)? else {
                return Ok(None);
            };
            let project = scope::project_of(store, &caller.account, &path)?;
            Ok(Some((caller, project)))
        })
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    state.limiter.check(&caller.account)?;
    Ok((caller, scope::Scoped(project)))
}

/// The secret of the `Authorization: Bearer` header (owned: a request is not `Sync`, so no reference to it may
/// cross an await).
fn bearer(request: &Request) -> Option<String> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(|secret| secret.trim().to_owned())
}

/// Resolves the bearer key to its account (or refuses with 401), then applies the account's rate limit; the
/// handlers get the account, the scope layer the whole [`Caller`].
async fn require_key(State(state): State<AppState>, mut request: Request, next: Next) -> Result<Response, ApiError> {
    let path = request.uri().path().to_owned();
    let (caller, scoped) = authenticate_scoped(&state, bearer(&request), path).await?;
    crate::stages::mark("auth_and_scope");
    request.extensions_mut().insert(caller.account.clone());
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(scoped);
    Ok(next.run(request).await)
}

/// As [`require_key`], and the key must be the admin account's (403 otherwise): what it guards spans accounts.
async fn require_admin(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    let caller = authenticate(&state, bearer(&request)).await?;
    let admin = state.control.blocking(|store| store.admin_account()).await?;
    if admin.as_ref() != Some(&caller.account) || caller.scope.project_id.is_some() {
        return Err(ApiError::Forbidden(
            "this needs a key of the admin account not limited to a project (the one `cambium up` created first; \
             `cambium keys create`)"
                .to_owned(),
        ));
    }
    Ok(next.run(request).await)
}

/// `?limit=` and `?cursor=` of a list call.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Items per page, 1..=500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the previous page (opaque).
    #[param(pattern = r"^[A-Za-z0-9_]{1,64}$")]
    cursor: Option<String>,
}

impl ListParams {
    /// The checked limit and cursor. A cursor is opaque to clients (it is the last id of the previous page);
    /// any `[A-Za-z0-9_]{1,64}` is accepted, and one that names no item only moves the page.
    fn checked(&self) -> Result<(usize, Option<String>), ApiError> {
        let limit = self.limit.unwrap_or(LIST_LIMIT_DEFAULT);
        if !(1..=LIST_LIMIT_MAX).contains(&limit) {
            return Err(ApiError::InvalidRequest(format!(
                "`limit` must be between 1 and {LIST_LIMIT_MAX}"
            )));
        }
        let cursor = match &self.cursor {
            Some(cursor)
                if (1..=CURSOR_LEN_MAX).contains(&cursor.len())
                    && cursor.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                Some(cursor.clone())
            }
            Some(_) => return Err(ApiError::InvalidRequest("malformed `cursor`".to_owned())),
            None => None,
        };
        Ok((limit, cursor))
    }
}

/// A JSON request body as `T`: an object only (serde would also read a struct from an array, `[null, null]`, which
/// the schema does not allow), else 400; unknown fields and wrong types are 400 as `T` says.
fn object_body<T: serde::de::DeserializeOwned>(
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<T, ApiError> {
    let Json(value) = body?;
    if !value.is_object() {
        return Err(ApiError::InvalidRequest("the body must be a JSON object".to_owned()));
    }
    serde_json::from_value(value).map_err(|e| ApiError::InvalidRequest(format!("malformed body: {e}")))
}

/// A name, checked: 1..=256 characters, not blank, no control characters.
fn parse_name(name: String) -> Result<String, ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::InvalidRequest("`name` must not be empty".to_owned()));
    }
    if name.chars().count() > NAME_LEN_MAX_CHARS || name.chars().any(char::is_control) {
        return Err(ApiError::InvalidRequest(format!(
            "`name` must be at most {NAME_LEN_MAX_CHARS} characters without control characters"
        )));
    }
    Ok(name)
}

/// An id from a path: anything but `<prefix><ULID>` cannot exist.
fn parse_id(id: String, prefix: &str) -> Result<String, ApiError> {
    if ids::is_id(&id, prefix) {
        Ok(id)
    } else {
        Err(ApiError::NotFound)
    }
}
