//! `/v1/databases/{id}/branches` and `/v1/branches/{id}`: restore, reset and schema diff included.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use cambium_types::Lsn;

use super::labels::{self, LabelParams};
use super::views::{
    BranchEnvelope, BranchList, BranchView, CreateBranch, ErrorEnvelope, OperationEnvelope, ResetBranch, RestoreBranch,
    SchemaDiffEnvelope, UpdateBranch,
};
use super::{object_body, parse_id, parse_name, AppState, ListParams};
use crate::control::{BranchChanges, NewBranch, PointInTime, SchemaDiffRequest};
use crate::error::ApiError;
use crate::store::AccountId;

/// An LSN field: `X/Y` hex, else 400.
fn parse_lsn(field: &str, text: &str) -> Result<Lsn, ApiError> {
    text.parse()
        .map_err(|_| ApiError::InvalidRequest(format!("`{field}` must be an LSN like 0/16B3748, not {text:?}")))
}

/// A timestamp field: RFC 3339 / ISO 8601 with an offset, else 400. A valid one past the last instant a
/// `jiff::Timestamp` holds (late on 9999-12-30, up to 9999-12-31T23:59:59Z) is a point too, always in the future.
fn parse_timestamp(field: &str, text: &str) -> Result<PointInTime, ApiError> {
    if let Ok(timestamp) = text.parse::<jiff::Timestamp>() {
        return Ok(PointInTime::Timestamp(timestamp));
    }
    match jiff::fmt::temporal::Pieces::parse(text) {
        Ok(pieces) if pieces.time().is_some() && pieces.offset().is_some() && pieces.date().year() >= 9999 => {
            Ok(PointInTime::AfterTimestampMax(text.to_owned()))
        }
        _ => Err(ApiError::InvalidRequest(format!(
            "`{field}` must be an RFC 3339 timestamp like 2026-11-22T13:00:00Z, not {text:?}"
        ))),
    }
}

/// An `expires_at` field: an RFC 3339 time, else 400 (whether it is in range is the control plane's 422).
fn parse_expiry(text: &str) -> Result<jiff::Timestamp, ApiError> {
    match parse_timestamp("expires_at", text)? {
        PointInTime::Timestamp(at) => Ok(at),
        _ => Err(ApiError::Unprocessable(format!(
            "`expires_at` {text:?} is more than {} days ahead",
            crate::control::EXPIRY_AHEAD_MAX_DAYS
        ))),
    }
}

/// The point an LSN xor a timestamp names; `None` for neither. Both: 400.
fn point(
    lsn_field: &str,
    lsn: Option<&str>,
    timestamp_field: &str,
    timestamp: Option<&str>,
) -> Result<Option<PointInTime>, ApiError> {
    match (lsn, timestamp) {
        (Some(_), Some(_)) => Err(ApiError::InvalidRequest(format!(
            "give `{lsn_field}` or `{timestamp_field}`, not both"
        ))),
        (Some(lsn), None) => Ok(Some(PointInTime::Lsn(parse_lsn(lsn_field, lsn)?))),
        (None, Some(timestamp)) => Ok(Some(parse_timestamp(timestamp_field, timestamp)?)),
        (None, None) => Ok(None),
    }
}

/// Lists a database's branches, oldest first; `?label=` keeps those with a label.
#[utoipa::path(get, path = "/v1/databases/{id}/branches", tag = "branches",
    params(("id" = String, Path, description = "database id"), ListParams, LabelParams),
    responses((status = 200, body = BranchList), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(database_id): Path<String>,
    params: Result<Query<ListParams>, QueryRejection>,
    label: Result<Query<LabelParams>, QueryRejection>,
) -> Result<Json<BranchList>, ApiError> {
    let database_id = parse_id(database_id, "db_")?;
    let (limit, after) = params?.checked()?;
    let filter = label?.filter()?;
    let database = state.control.get_database(&account, &database_id).await?;
    let page = state
        .control
        .blocking(move |store| store.list_branches(&account, &database_id, after.as_deref(), limit, filter.as_ref()))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(BranchList {
        branches: page
            .items
            .into_iter()
            .map(|b| BranchView::new(&state.control, b, &database))
            .collect(),
        next_cursor: page.next_after,
    }))
}

/// Forks a branch, copying no data: from the parent's latest state, or at `parent_lsn` / `parent_timestamp`.
#[utoipa::path(post, path = "/v1/databases/{id}/branches", tag = "branches",
    params(("id" = String, Path, description = "database id")), request_body = CreateBranch,
    responses((status = 201, body = BranchEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(database_id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<BranchEnvelope>), ApiError> {
    let database_id = parse_id(database_id, "db_")?;
    let body: CreateBranch = object_body(body)?;
    let name = parse_name(body.name)?;
    let point = point(
        "parent_lsn",
        body.parent_lsn.as_deref(),
        "parent_timestamp",
        body.parent_timestamp.as_deref(),
    )?
    .unwrap_or(PointInTime::Latest);
    let new = NewBranch {
        name,
        parent_id: body.parent_branch_id,
        point,
        protected: body.protected.unwrap_or(false),
        expires_at: body.expires_at.as_deref().map(parse_expiry).transpose()?,
        labels: labels::checked(body.labels.unwrap_or_default())?,
    };
    let (branch, database) = state.control.create_branch(&account, &database_id, new).await?;
    Ok((
        StatusCode::CREATED,
        Json(BranchEnvelope {
            branch: BranchView::new(&state.control, branch, &database),
        }),
    ))
}

/// Gets a branch.
#[utoipa::path(get, path = "/v1/branches/{id}", tag = "branches", params(("id" = String, Path)),
    responses((status = 200, body = BranchEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<BranchEnvelope>, ApiError> {
    let id = parse_id(id, "br_")?;
    let (branch, database) = state.control.get_branch(&account, &id).await?;
    Ok(Json(BranchEnvelope {
        branch: BranchView::new(&state.control, branch, &database),
    }))
}

/// Renames a branch, promotes it to the database's default, protects or unprotects it, sets or clears its expiry.
#[utoipa::path(patch, path = "/v1/branches/{id}", tag = "branches", params(("id" = String, Path)),
    request_body = UpdateBranch,
    responses((status = 200, body = BranchEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Json<BranchEnvelope>, ApiError> {
    let id = parse_id(id, "br_")?;
    let body: UpdateBranch = object_body(body)?;
    let changes = BranchChanges {
        name: body.name.map(parse_name).transpose()?,
        is_default: body.is_default,
        protected: body.protected,
        expires_at: match body.expires_at {
            Some(Some(text)) => Some(Some(parse_expiry(&text)?)),
            Some(None) => Some(None),
            None => None,
        },
        labels: body.labels.map(labels::checked).transpose()?,
    };
    let (branch, database) = state.control.update_branch(&account, &id, changes).await?;
    Ok(Json(BranchEnvelope {
        branch: BranchView::new(&state.control, branch, &database),
    }))
}

/// Deletes a branch and every branch forked from it. Irreversible; the default branch and protected branches
/// (this one or one forked from it) cannot be deleted (409).
#[utoipa::path(delete, path = "/v1/branches/{id}", tag = "branches", params(("id" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(id, "br_")?;
    state.control.delete_branch(&account, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Restores a branch to `target_lsn` or `target_timestamp`: same id, name and connection string; the state before
/// is kept as a branch unless `preserve` is false; child branches keep their data.
#[utoipa::path(post, path = "/v1/branches/{id}/restore", tag = "branches", params(("id" = String, Path)),
    request_body = RestoreBranch,
    responses((status = 202, body = OperationEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn restore(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<OperationEnvelope>), ApiError> {
    let id = parse_id(id, "br_")?;
    let body: RestoreBranch = object_body(body)?;
    let point = point(
        "target_lsn",
        body.target_lsn.as_deref(),
        "target_timestamp",
        body.target_timestamp.as_deref(),
    )?
    .ok_or_else(|| ApiError::InvalidRequest("give `target_lsn` or `target_timestamp`".to_owned()))?;
    let operation = state
        .control
        .restore_branch(&account, &id, point, body.preserve.unwrap_or(true))
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(OperationEnvelope {
            operation: operation.into(),
        }),
    ))
}

/// Resets a branch to its parent's latest state: same id, name and connection string, the parent's data as of
/// now; the state before is kept as a branch only if `preserve` is true. The body may be empty.
#[utoipa::path(post, path = "/v1/branches/{id}/reset", tag = "branches", params(("id" = String, Path)),
    request_body(content = ResetBranch, description = "optional"),
    responses((status = 202, body = OperationEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn reset(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<OperationEnvelope>), ApiError> {
    let id = parse_id(id, "br_")?;
    let body: ResetBranch = if body.iter().all(u8::is_ascii_whitespace) {
        ResetBranch::default()
    } else {
        let value: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| ApiError::InvalidRequest(format!("malformed body: {e}")))?;
        object_body(Ok(Json(value)))?
    };
    let operation = state
        .control
        .reset_branch(&account, &id, body.preserve.unwrap_or(false))
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(OperationEnvelope {
            operation: operation.into(),
        }),
    ))
}

/// `?…` of a schema diff: the base branch and each side's point.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SchemaDiffParams {
    /// The branch to compare against (of the same database); the branch's parent when absent.
    #[param(pattern = r"^br_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    base_branch_id: Option<String>,
    /// The base at this LSN (`X/Y`); its latest state when neither this nor `base_timestamp` is given.
    #[param(pattern = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")]
    base_lsn: Option<String>,
    /// The base as of this RFC 3339 time.
    #[param(format = DateTime)]
    base_timestamp: Option<String>,
    /// The branch at this LSN; its latest state when neither this nor `timestamp` is given.
    #[param(pattern = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")]
    lsn: Option<String>,
    /// The branch as of this RFC 3339 time.
    #[param(format = DateTime)]
    timestamp: Option<String>,
}

/// The schema differences (tables, columns, indexes, views, triggers) from a base branch to this branch, each
/// at its latest state or a point in its history, as a list and as a unified diff of their DDL. Read through
/// read-only time-travel sessions: nothing is copied.
#[utoipa::path(get, path = "/v1/branches/{id}/schema_diff", tag = "branches",
    params(("id" = String, Path), SchemaDiffParams),
    responses((status = 200, body = SchemaDiffEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn schema_diff(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    params: Result<Query<SchemaDiffParams>, QueryRejection>,
) -> Result<Json<SchemaDiffEnvelope>, ApiError> {
    let id = parse_id(id, "br_")?;
    let Query(params) = params?;
    let base_branch_id = params
        .base_branch_id
        .map(|b| parse_id(b, "br_"))
        .transpose()
        .map_err(|_| ApiError::InvalidRequest("`base_branch_id` must be a branch id (br_…)".to_owned()))?;
    let request = SchemaDiffRequest {
        base_branch_id,
        base_point: point(
            "base_lsn",
            params.base_lsn.as_deref(),
            "base_timestamp",
            params.base_timestamp.as_deref(),
        )?
        .unwrap_or(PointInTime::Latest),
        point: point("lsn", params.lsn.as_deref(), "timestamp", params.timestamp.as_deref())?
            .unwrap_or(PointInTime::Latest),
    };
    let diff = state.control.schema_diff(&account, &id, request).await?;
    Ok(Json(SchemaDiffEnvelope {
        schema_diff: diff.into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rfc_3339_time_parses_and_nothing_else_does() {
        for (text, expected) in [
            ("2026-11-22T13:00:00Z", "2026-11-22T13:00:00Z"),
            ("2026-11-22T14:00:00.5+01:00", "2026-11-22T13:00:00.5Z"),
            ("1900-01-01T00:00:00Z", "1900-01-01T00:00:00Z"),
            ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
        ] {
            match parse_timestamp("t", text) {
                Ok(PointInTime::Timestamp(at)) => assert_eq!(at.to_string(), expected),
                other => panic!("{text}: {other:?}"),
            }
        }
        for text in [
            "9999-12-31T23:59:59Z",
            "9999-12-31T23:59:59.999999999Z",
            "9999-12-31T00:00:00-12:00",
        ] {
            match parse_timestamp("t", text) {
                Ok(PointInTime::AfterTimestampMax(given)) => assert_eq!(given, text),
                other => panic!("{text}: {other:?}"),
            }
        }
        for text in [
            "",
            "yesterday",
            "2026-11-22",
            "2026-11-22T13:00:00",
            "9999-12-31",
            "2026-13-01T00:00:00Z",
        ] {
            assert!(
                matches!(parse_timestamp("t", text), Err(ApiError::InvalidRequest(_))),
                "{text}"
            );
        }
    }
}
