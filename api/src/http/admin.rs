//! Admin-only routes outside the `/v1` contract (a key of the admin account not limited to a project, as
//! `/metrics`): `POST /admin/databases/{id}/move_pageserver` `{"pageserver": "<address>"}` starts moving a
//! database's tenant to another configured pageserver (202 with the `move_pageserver` operation), and
//! `GET /admin/operations/{id}` (`?wait=` as `/v1/operations/{id}`) reads any account's operation.
//!
//! Beside them, between the API processes: `POST /internal/databases/{id}/pageserver` tells this compute host
//! that database `id`'s pageserver changed (`control::repoint`). It takes no body: the host reads the placement
//! from the metadata itself, so the call can make it do nothing but follow the metadata. It takes the host's
//! internal token (`Authorization: Bearer …`, registered with the host in the metadata, where its peers read
//! it; not an API key), so nobody outside the deployment can call it or learn from it.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;

use super::operations::{parse_wait, WaitParams};
use super::views::OperationEnvelope;
use super::{object_body, parse_id, AppState};
use crate::error::ApiError;

/// The body of a move.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MovePageserver {
    /// The pageserver's address, as `--pageservers` names it.
    pageserver: String,
}

/// Starts moving database `id`'s tenant to the pageserver the body names.
pub(crate) async fn move_pageserver(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<OperationEnvelope>), ApiError> {
    let id = parse_id(id, "db_")?;
    let body: MovePageserver = object_body(body)?;
    let operation = state.control.move_pageserver(&id, &body.pageserver).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(OperationEnvelope {
            operation: operation.into(),
        }),
    ))
}

/// Any account's operation `id`; with `?wait=`, once it has ended or the wait has passed.
pub(crate) async fn operation(
    State(state): State<AppState>,
    Path(id): Path<String>,
    params: Result<Query<WaitParams>, QueryRejection>,
) -> Result<Json<OperationEnvelope>, ApiError> {
    let id = parse_id(id, "op_")?;
    let Query(params) = params?;
    let wait = params.wait.as_deref().map(parse_wait).transpose()?.unwrap_or_default();
    let operation = state.control.any_operation(&id).await?;
    let operation = state.control.wait_operation(&operation.account_id, &id, wait).await?;
    Ok(Json(OperationEnvelope {
        operation: operation.into(),
    }))
}

/// `POST /internal/databases/{id}/pageserver`: this host's computes of database `id`, if it serves it, read from
/// the pageserver its placement names now.
pub(crate) async fn follow_pageserver(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<crate::control::Followed>, ApiError> {
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !state.control.is_internal_token(presented) {
        return Err(ApiError::Unauthenticated);
    }
    let id = parse_id(id, "db_")?;
    Ok(Json(state.control.follow_pageserver(&id).await?))
}
