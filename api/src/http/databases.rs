//! `/v1/projects/{id}/databases` and `/v1/databases/{id}` with its compute actions and endpoint listing.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};

use super::labels::{self, LabelParams};
use super::views::{
    CreateDatabase, CreatedDatabaseEnvelope, DatabaseEnvelope, DatabaseList, DatabaseView, EndpointList, EndpointView,
    ErrorEnvelope, UpdateDatabase,
};
use super::{object_body, parse_id, parse_name, AppState, ListParams};
use crate::error::ApiError;
use crate::store::databases::{SUSPEND_TIMEOUT_SECONDS_DEFAULT, SUSPEND_TIMEOUT_SECONDS_MAX};
use crate::store::labels::Labelled;
use crate::store::AccountId;

/// Lists a project's databases, oldest first; `?label=` keeps those with a label.
#[utoipa::path(get, path = "/v1/projects/{id}/databases", tag = "databases",
    params(("id" = String, Path, description = "project id"), ListParams, LabelParams),
    responses((status = 200, body = DatabaseList), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(project_id): Path<String>,
    params: Result<Query<ListParams>, QueryRejection>,
    label: Result<Query<LabelParams>, QueryRejection>,
) -> Result<Json<DatabaseList>, ApiError> {
    let project_id = parse_id(project_id, "proj_")?;
    let (limit, after) = params?.checked()?;
    let filter = label?.filter()?;
    let page = state
        .control
        .blocking(move |store| store.list_databases(&account, &project_id, after.as_deref(), limit, filter.as_ref()))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(DatabaseList {
        databases: page
            .items
            .into_iter()
            .map(|d| DatabaseView::new(&state.control, d))
            .collect(),
        next_cursor: page.next_after,
    }))
}

/// Creates a database with a default branch `main`; its `create_database` operation provisions the storage and
/// the compute, and finishes once a SQL session works. The response's `connection_uri` holds the database's
/// password: the only time it is shown (a retry with the same `Idempotency-Key` gets it without; see
/// `reset_password`). With no session for `suspend_timeout_seconds` (default 300, 0 never) the database is
/// suspended (`suspend_reason` `idle`, a `suspend_database` operation) and its next connection resumes it.
#[utoipa::path(post, path = "/v1/projects/{id}/databases", tag = "databases",
    params(("id" = String, Path, description = "project id")), request_body = CreateDatabase,
    responses((status = 201, body = CreatedDatabaseEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(project_id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<CreatedDatabaseEnvelope>), ApiError> {
    let project_id = parse_id(project_id, "proj_")?;
    let body: CreateDatabase = object_body(body)?;
    let name = parse_name(body.name)?;
    let labels = labels::checked(body.labels.unwrap_or_default())?;
    let suspend_timeout_seconds =
        checked_suspend_timeout(body.suspend_timeout_seconds)?.unwrap_or(SUSPEND_TIMEOUT_SECONDS_DEFAULT);
    let (database, operation, password) = state
        .control
        .create_database(
            &account,
            &project_id,
            name,
            body.region,
            labels,
            suspend_timeout_seconds,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedDatabaseEnvelope {
            database: DatabaseView::with_password(&state.control, database, &password),
            operation: operation.into(),
        }),
    ))
}

/// Gives the database a new random password, returned here in `connection_uri` and shown nowhere else (only a
/// verifier of it is kept). New sessions on the database and all its branches need it at once; open sessions
/// stay open. A retry with the same `Idempotency-Key` gets the database without the password (reset again
/// with a new key to get one).
#[utoipa::path(post, path = "/v1/databases/{id}/reset_password", tag = "databases", params(("id" = String, Path)),
    responses((status = 200, body = DatabaseEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn reset_password(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<DatabaseEnvelope>, ApiError> {
    let id = parse_id(id, "db_")?;
    let (database, password) = state.control.reset_password(&account, &id).await?;
    Ok(Json(DatabaseEnvelope {
        database: DatabaseView::with_password(&state.control, database, &password),
    }))
}

/// Gets a database (also: get endpoint).
#[utoipa::path(get, path = "/v1/databases/{id}", tag = "databases", params(("id" = String, Path)),
    responses((status = 200, body = DatabaseEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<DatabaseEnvelope>, ApiError> {
    let id = parse_id(id, "db_")?;
    let database = state.control.get_database(&account, &id).await?;
    Ok(Json(DatabaseEnvelope {
        database: DatabaseView::new(&state.control, database),
    }))
}

/// Renames a database, replaces its labels and/or sets its `suspend_timeout_seconds` (also: update endpoint).
#[utoipa::path(patch, path = "/v1/databases/{id}", tag = "databases", params(("id" = String, Path)),
    request_body = UpdateDatabase,
    responses((status = 200, body = DatabaseEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Json<DatabaseEnvelope>, ApiError> {
    let id = parse_id(id, "db_")?;
    let body: UpdateDatabase = object_body(body)?;
    let name = body.name.map(parse_name).transpose()?;
    let labels = body.labels.map(labels::checked).transpose()?;
    let suspend_timeout_seconds = checked_suspend_timeout(body.suspend_timeout_seconds)?;
    let database = state
        .control
        .blocking(move |store| {
            if let Some(labels) = labels {
                store.set_labels(&account, Labelled::Database, &id, &labels)?;
            }
            if let Some(seconds) = suspend_timeout_seconds {
                store.set_suspend_timeout(&account, &id, seconds)?;
            }
            match name {
                Some(name) => store.rename_database(&account, &id, &name),
                None => store.get_database(&account, &id),
            }
        })
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(DatabaseEnvelope {
        database: DatabaseView::new(&state.control, database),
    }))
}

/// Deletes a database with its branches and storage. Irreversible.
#[utoipa::path(delete, path = "/v1/databases/{id}", tag = "databases", params(("id" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(id, "db_")?;
    state.control.delete_database(&account, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Starts the database's compute, whichever way it was suspended (also: start endpoint).
#[utoipa::path(post, path = "/v1/databases/{id}/resume", tag = "databases", params(("id" = String, Path)),
    responses((status = 200, body = DatabaseEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn resume(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<DatabaseEnvelope>, ApiError> {
    let id = parse_id(id, "db_")?;
    let database = state.control.set_active(&account, &id, true).await?;
    Ok(Json(DatabaseEnvelope {
        database: DatabaseView::new(&state.control, database),
    }))
}

/// Stops the database's compute; the data is kept, and its names refuse sessions saying so until resumed
/// (`suspend_reason` `api`), even if it was suspended for idleness before (also: suspend endpoint).
#[utoipa::path(post, path = "/v1/databases/{id}/suspend", tag = "databases", params(("id" = String, Path)),
    responses((status = 200, body = DatabaseEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn suspend(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<DatabaseEnvelope>, ApiError> {
    let id = parse_id(id, "db_")?;
    let database = state.control.set_active(&account, &id, false).await?;
    Ok(Json(DatabaseEnvelope {
        database: DatabaseView::new(&state.control, database),
    }))
}

/// Lists the database's compute endpoints: the database itself, as a compute.
#[utoipa::path(get, path = "/v1/databases/{id}/endpoints", tag = "databases", params(("id" = String, Path)),
    responses((status = 200, body = EndpointList), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn endpoints(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<EndpointList>, ApiError> {
    let id = parse_id(id, "db_")?;
    let database = state.control.get_database(&account, &id).await?;
    Ok(Json(EndpointList {
        endpoints: vec![EndpointView::new(&state.control, &database)],
    }))
}

/// `seconds` if it is a suspend timeout the API accepts (at most [`SUSPEND_TIMEOUT_SECONDS_MAX`]); else 400.
fn checked_suspend_timeout(seconds: Option<u32>) -> Result<Option<u32>, ApiError> {
    match seconds {
        Some(seconds) if seconds > SUSPEND_TIMEOUT_SECONDS_MAX => Err(ApiError::InvalidRequest(format!(
            "suspend_timeout_seconds {seconds} is above {SUSPEND_TIMEOUT_SECONDS_MAX} (7 days); 0 never suspends"
        ))),
        seconds => Ok(seconds),
    }
}
