//! [`ApiError`]: every way a `/v1` request fails, with its HTTP status and envelope code (DESIGN §6).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;

use crate::backend::BackendError;
use crate::store::StoreError;

/// Seconds a client is told to wait after a 429.
pub const RETRY_AFTER_S: u64 = 1;

/// A failed request, rendered as the error envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// 400 `invalid_request`: bad JSON, an unknown field, a bad parameter, a bad LSN or timestamp.
    InvalidRequest(String),
    /// 401 `unauthenticated`: a missing, malformed, unknown or revoked key.
    Unauthenticated,
    /// 403 `forbidden`: a valid key of an account that may not do this (`/metrics` with a non-admin key).
    Forbidden(String),
    /// 403 `quota_exceeded`: the account is at a quota (projects, databases, branches per database); the message
    /// names the limit and the count. Waiting does not help: deleting something does.
    QuotaExceeded(String),
    /// 404 `not_found`, also for another account's resource.
    NotFound,
    /// 405 `method_not_allowed`: a known path without that method (the `Allow` header lists the ones it has).
    MethodNotAllowed,
    /// 408 `request_timeout`: the request body did not arrive in time (the connection is closed after it).
    RequestTimeout(String),
    /// 409 `conflict`: deleting the default branch, a duplicate name, a conflicting operation in progress.
    Conflict(String),
    /// 422 `unprocessable`: well-formed but impossible (an LSN ahead of the branch, outside retention).
    Unprocessable(String),
    /// 429 `rate_limited`, with `Retry-After`.
    RateLimited(String),
    /// 503 `unavailable`: the storage did not answer; retrying later may work.
    Unavailable(String),
    /// 500 `internal`; the cause is logged, never returned.
    Internal,
}

/// The code and message of an error response, filled into the envelope by the request-id middleware.
#[derive(Debug, Clone)]
pub(crate) struct ErrorInfo {
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl ApiError {
    /// The HTTP status, envelope code and message.
    pub fn parts(&self) -> (StatusCode, &'static str, String) {
        match self {
            ApiError::InvalidRequest(message) => (StatusCode::BAD_REQUEST, "invalid_request", message.clone()),
            ApiError::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "a valid `Authorization: Bearer <key>` header is required".to_owned(),
            ),
            ApiError::Forbidden(message) => (StatusCode::FORBIDDEN, "forbidden", message.clone()),
            ApiError::QuotaExceeded(message) => (StatusCode::FORBIDDEN, "quota_exceeded", message.clone()),
            ApiError::NotFound => (StatusCode::NOT_FOUND, "not_found", "not found".to_owned()),
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this path does not take this method".to_owned(),
            ),
            ApiError::RequestTimeout(message) => (StatusCode::REQUEST_TIMEOUT, "request_timeout", message.clone()),
            ApiError::Conflict(message) => (StatusCode::CONFLICT, "conflict", message.clone()),
            ApiError::Unprocessable(message) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message.clone()),
            ApiError::RateLimited(message) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited", message.clone()),
            ApiError::Unavailable(message) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", message.clone()),
            ApiError::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error".to_owned(),
            ),
        }
    }
}

/// The message a client reads (the envelope's), also as an operation's `error`.
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.parts().2)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = self.parts();
        let mut response = (status, Extension(ErrorInfo { code, message })).into_response();
        if status == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from(RETRY_AFTER_S));
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still come: the connection cannot carry another request.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match error {
            StoreError::Conflict(message) => ApiError::Conflict(message),
            StoreError::QuotaExceeded(message) => ApiError::QuotaExceeded(message),
            StoreError::Unavailable(message) => {
                tracing::warn!(%message, "metadata unavailable");
                ApiError::Unavailable(message)
            }
            StoreError::Sql(error) if error.is_connection_loss() => {
                tracing::warn!(%error, "metadata unavailable");
                ApiError::Unavailable(format!("the control metadata is out of reach ({error}); retry later"))
            }
            error => {
                tracing::error!(%error, "metadata store failed");
                ApiError::Internal
            }
        }
    }
}

impl From<BackendError> for ApiError {
    fn from(error: BackendError) -> ApiError {
        match error {
            BackendError::Unprocessable(message) => ApiError::Unprocessable(message),
            BackendError::NotFound(message) | BackendError::Unavailable(message) => {
                tracing::warn!(%message, "storage call failed");
                ApiError::Unavailable(message)
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        ApiError::InvalidRequest(rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::InvalidRequest(rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::InvalidRequest(rejection.body_text())
    }
}
