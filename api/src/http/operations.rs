//! `/v1/projects/{id}/operations` and `/v1/operations/{id}`, with `?wait=` long-polling.

use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use serde::Deserialize;

use super::views::{ErrorEnvelope, OperationEnvelope, OperationList, OperationView};
use super::{parse_id, AppState, ListParams};
use crate::error::ApiError;
use crate::store::AccountId;

/// The longest `?wait=`.
pub const WAIT_MAX_MS: u64 = 60_000;
/// Digits of a `?wait=` number, at most.
const WAIT_DIGITS_MAX: usize = 9;

/// `?wait=` of a get.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct WaitParams {
    /// Long-poll: answer once the operation has ended or this long has passed (`10s`, `500ms`, or seconds;
    /// longer than 60 s waits 60 s).
    #[param(pattern = r"^[0-9]{1,9}(ms|s)?$")]
    pub(super) wait: Option<String>,
}

/// `10s`, `500ms`, `2` (seconds) as a duration, at most [`WAIT_MAX_MS`] (longer waits are cut to it).
pub(super) fn parse_wait(text: &str) -> Result<Duration, ApiError> {
    let bad = || ApiError::InvalidRequest(format!("`wait` must be like 10s or 500ms, not {text:?}"));
    let (digits, unit_ms) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1_000)
    } else {
        (text, 1_000)
    };
    if digits.is_empty() || digits.len() > WAIT_DIGITS_MAX || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let value: u64 = digits.parse().map_err(|_| bad())?;
    Ok(Duration::from_millis(value.saturating_mul(unit_ms).min(WAIT_MAX_MS)))
}

/// Lists a project's operations, newest first.
#[utoipa::path(get, path = "/v1/projects/{id}/operations", tag = "operations",
    params(("id" = String, Path, description = "project id"), ListParams),
    responses((status = 200, body = OperationList), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(project_id): Path<String>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<OperationList>, ApiError> {
    let project_id = parse_id(project_id, "proj_")?;
    let (limit, before) = params?.checked()?;
    let page = state
        .control
        .blocking(move |store| store.list_operations(&account, &project_id, before.as_deref(), limit))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(OperationList {
        operations: page.items.into_iter().map(OperationView::from).collect(),
        next_cursor: page.next_after,
    }))
}

/// Gets an operation; with `?wait=`, once it has ended or the wait has passed.
#[utoipa::path(get, path = "/v1/operations/{id}", tag = "operations", params(("id" = String, Path), WaitParams),
    responses((status = 200, body = OperationEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    params: Result<Query<WaitParams>, QueryRejection>,
) -> Result<Json<OperationEnvelope>, ApiError> {
    let id = parse_id(id, "op_")?;
    let Query(params) = params?;
    let wait = params.wait.as_deref().map(parse_wait).transpose()?.unwrap_or_default();
    let operation = state.control.wait_operation(&account, &id, wait).await?;
    Ok(Json(OperationEnvelope {
        operation: operation.into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_parse_with_units_and_bounds() {
        assert_eq!(parse_wait("10s").ok(), Some(Duration::from_secs(10)));
        assert_eq!(parse_wait("250ms").ok(), Some(Duration::from_millis(250)));
        assert_eq!(parse_wait("3").ok(), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_wait("61s").ok(),
            Some(Duration::from_secs(60)),
            "cut to the longest wait"
        );
        assert_eq!(parse_wait("999999999s").ok(), Some(Duration::from_secs(60)));
        assert!(parse_wait("-1s").is_err());
        assert!(parse_wait("+1s").is_err());
        assert!(parse_wait("").is_err());
        assert!(parse_wait("s").is_err());
        assert!(parse_wait("soon").is_err());
        assert!(parse_wait("9999999999s").is_err());
    }
}
