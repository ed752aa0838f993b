//! The `/v1` routes over axum.
//!
//! Every response carries `X-Request-Id` (`req_<ULID>`). Errors are
//! `{"error": {"code", "message", "request_id"}}`: a handler returns an [`ApiError`], which becomes a
//! bodiless response carrying the code and message as an extension, and the request-id middleware
//! writes the envelope with the id it assigned. Every `/v1` route requires `Authorization: Bearer <key>`.
//!
//! Lists are in id order, which is creation order (ULIDs sort by time; see `ids`), oldest first.
//! `?limit=` is 1..=500 (default 50); `next_cursor` is the last id of a full page when more follow,
//! `null` at the end, and is opaque to clients.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};

use crate::auth;
use crate::ids;
use crate::store::{AccountId, Project, Store, StoreError};

/// The request id header set on every response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// `?limit=` when absent.
const LIST_LIMIT_DEFAULT: usize = 50;
/// The largest `?limit=`.
const LIST_LIMIT_MAX: usize = 500;
/// The longest project name, in bytes.
const NAME_LEN_MAX_BYTES: usize = 256;

/// A failed request, rendered as the error envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// 400 `invalid_request`: bad JSON, an unknown field, a bad parameter.
    InvalidRequest(String),
    /// 401 `unauthenticated`: a missing, malformed, unknown or revoked key.
    Unauthenticated,
    /// 404 `not_found`, also for another account's resource.
    NotFound,
    /// 500 `internal`; the cause is logged, never returned.
    Internal,
}

/// The code and message of an error response, filled into the envelope by the request-id middleware.
#[derive(Debug, Clone)]
struct ErrorInfo {
    code: &'static str,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            ApiError::InvalidRequest(message) => (StatusCode::BAD_REQUEST, "invalid_request", message),
            ApiError::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "a valid `Authorization: Bearer <key>` header is required".to_owned(),
            ),
            ApiError::NotFound => (StatusCode::NOT_FOUND, "not_found", "not found".to_owned()),
            ApiError::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error".to_owned(),
            ),
        };
        (status, Extension(ErrorInfo { code, message })).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        tracing::error!(%error, "metadata store failed");
        ApiError::Internal
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

#[derive(Clone)]
struct AppState {
    store: Arc<Store>,
}

/// The API's router over `store`.
pub fn router(store: Arc<Store>) -> Router {
    let state = AppState { store };
    let v1 = Router::new()
        .route("/v1/projects", get(list_projects).post(create_project))
        .route(
            "/v1/projects/{id}",
            get(get_project).patch(update_project).delete(delete_project),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    v1.fallback(|| async { ApiError::NotFound })
        .with_state(state)
        .layer(middleware::from_fn(request_id))
}

/// Assigns the request id, sets `X-Request-Id` and writes error envelopes.
async fn request_id(request: Request, next: Next) -> Response {
    let now_ms = u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0);
    let id = format!("req_{}", ids::new_ulid(now_ms));
    let mut response = next.run(request).await;
    if let Some(info) = response.extensions_mut().remove::<ErrorInfo>() {
        let body = serde_json::json!({
            "error": { "code": info.code, "message": info.message, "request_id": id }
        });
        let status = response.status();
        response = (status, Json(body)).into_response();
    }
    match HeaderValue::from_str(&id) {
        Ok(value) => {
            response.headers_mut().insert(REQUEST_ID_HEADER, value);
        }
        Err(_) => unreachable!("a request id is ASCII: {id}"),
    }
    response
}

/// Resolves the bearer key to its account, or refuses with 401.
async fn require_key(State(state): State<AppState>, mut request: Request, next: Next) -> Result<Response, ApiError> {
    let secret = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(|secret| secret.trim().to_owned())
        .ok_or(ApiError::Unauthenticated)?;
    let account = blocking(&state, move |store| auth::authenticate(store, &secret))
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    request.extensions_mut().insert(account);
    Ok(next.run(request).await)
}

/// Runs a store call on the blocking pool.
async fn blocking<T, F>(state: &AppState, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
{
    let store = Arc::clone(&state.store);
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(result) => Ok(result?),
        Err(error) => {
            tracing::error!(%error, "metadata store task failed");
            Err(ApiError::Internal)
        }
    }
}

/// A project as the API shows it.
#[derive(Debug, Serialize)]
struct ProjectView {
    id: String,
    name: String,
    created_at: String,
}

impl From<Project> for ProjectView {
    fn from(project: Project) -> ProjectView {
        ProjectView {
            id: project.id,
            name: project.name,
            created_at: project.created_at,
        }
    }
}

#[derive(Debug, Serialize)]
struct ProjectEnvelope {
    project: ProjectView,
}

#[derive(Debug, Serialize)]
struct ProjectList {
    projects: Vec<ProjectView>,
    next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateProject {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateProject {
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ListParams {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// A project name, checked.
fn parse_name(name: String) -> Result<String, ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::InvalidRequest("`name` must not be empty".to_owned()));
    }
    if name.len() > NAME_LEN_MAX_BYTES || name.chars().any(char::is_control) {
        return Err(ApiError::InvalidRequest(format!(
            "`name` must be at most {NAME_LEN_MAX_BYTES} bytes without control characters"
        )));
    }
    Ok(name)
}

/// A project id from a path: anything but `proj_<ULID>` cannot exist.
fn parse_project_id(id: String) -> Result<String, ApiError> {
    if ids::is_id(&id, "proj_") {
        Ok(id)
    } else {
        Err(ApiError::NotFound)
    }
}

async fn list_projects(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<ProjectList>, ApiError> {
    let Query(params) = params?;
    let limit = params.limit.unwrap_or(LIST_LIMIT_DEFAULT);
    if !(1..=LIST_LIMIT_MAX).contains(&limit) {
        return Err(ApiError::InvalidRequest(format!(
            "`limit` must be between 1 and {LIST_LIMIT_MAX}"
        )));
    }
    let after = match params.cursor {
        Some(cursor) if ids::is_id(&cursor, "proj_") => Some(cursor),
        Some(_) => return Err(ApiError::InvalidRequest("malformed `cursor`".to_owned())),
        None => None,
    };
    let page = blocking(&state, move |store| {
        store.list_projects(&account, after.as_deref(), limit)
    })
    .await?;
    Ok(Json(ProjectList {
        projects: page.items.into_iter().map(ProjectView::from).collect(),
        next_cursor: page.next_after,
    }))
}

async fn create_project(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    body: Result<Json<CreateProject>, JsonRejection>,
) -> Result<(StatusCode, Json<ProjectEnvelope>), ApiError> {
    let Json(body) = body?;
    let name = parse_name(body.name)?;
    let project = blocking(&state, move |store| store.create_project(&account, &name)).await?;
    Ok((
        StatusCode::CREATED,
        Json(ProjectEnvelope {
            project: project.into(),
        }),
    ))
}

async fn get_project(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<ProjectEnvelope>, ApiError> {
    let id = parse_project_id(id)?;
    let project = blocking(&state, move |store| store.get_project(&account, &id))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(ProjectEnvelope {
        project: project.into(),
    }))
}

async fn update_project(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    body: Result<Json<UpdateProject>, JsonRejection>,
) -> Result<Json<ProjectEnvelope>, ApiError> {
    let id = parse_project_id(id)?;
    let Json(body) = body?;
    let name = body.name.map(parse_name).transpose()?;
    let project = blocking(&state, move |store| match name {
        Some(name) => store.rename_project(&account, &id, &name),
        None => store.get_project(&account, &id),
    })
    .await?
    .ok_or(ApiError::NotFound)?;
    Ok(Json(ProjectEnvelope {
        project: project.into(),
    }))
}

async fn delete_project(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_project_id(id)?;
    if blocking(&state, move |store| store.delete_project(&account, &id)).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound)
    }
}
