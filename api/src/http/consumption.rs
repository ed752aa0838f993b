//! `GET /v1/projects/{id}/consumption`: a project's consumption over a time range (issue 15), from the hourly
//! buckets of `store::consumption`.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::views::ErrorEnvelope;
use super::{parse_id, AppState};
use crate::consumption::hour_of;
use crate::error::ApiError;
use crate::store::consumption::{BranchUsage, CONSUMPTION_RETENTION_DAYS};
use crate::store::AccountId;

/// `?from=` and `?to=`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct RangeParams {
    /// RFC 3339; counted from the start of its hour (default: 30 days before `to`).
    #[param(format = DateTime)]
    from: Option<String>,
    /// RFC 3339, after `from` (default: now).
    #[param(format = DateTime)]
    to: Option<String>,
}

/// A branch's consumption in the range.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BranchConsumption {
    /// `br_…` (it may have been deleted since).
    branch_id: String,
    /// Its logical size at the range's last sample, as the pageserver measures it.
    logical_size_bytes: u64,
    /// The WAL written on it in the range.
    written_bytes: u64,
    /// How long its compute ran in the range.
    compute_active_seconds: f64,
}

/// A database's consumption in the range: the sums of its branches'.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DatabaseConsumption {
    /// `db_…`.
    database_id: String,
    /// The sum of its branches' logical sizes.
    storage_bytes: u64,
    written_bytes: u64,
    /// How long its computes (one per branch) ran, summed.
    compute_active_seconds: f64,
    branches: Vec<BranchConsumption>,
}

/// A project's consumption in the range: the sums of its databases'.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProjectConsumption {
    project_id: String,
    /// The range's start (the start of the hour of `from`), ISO 8601 UTC.
    from: String,
    /// The range's end, ISO 8601 UTC.
    to: String,
    storage_bytes: u64,
    written_bytes: u64,
    compute_active_seconds: f64,
    databases: Vec<DatabaseConsumption>,
}

/// `{consumption}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConsumptionEnvelope {
    consumption: ProjectConsumption,
}

fn seconds(ms: u64) -> f64 {
    // Milliseconds to seconds with three decimals; u64 ms fit f64 exactly below 2^53 (285 000 years).
    (ms as f64) / 1_000.0
}

fn parse_time(text: &str, name: &str) -> Result<jiff::Timestamp, ApiError> {
    text.parse()
        .map_err(|e| ApiError::InvalidRequest(format!("`{name}` {text:?} is not an RFC 3339 time: {e}")))
}

/// The checked range: `from` floored to its hour, `to`; 400 unless `from < to`.
fn range(params: &RangeParams) -> Result<(jiff::Timestamp, jiff::Timestamp), ApiError> {
    let to = match &params.to {
        Some(text) => parse_time(text, "to")?,
        None => jiff::Timestamp::now(),
    };
    let from = match &params.from {
        Some(text) => parse_time(text, "from")?,
        None => to
            .checked_sub(jiff::SignedDuration::from_hours(30 * 24))
            .map_err(|_| ApiError::InvalidRequest("`to` is out of range".to_owned()))?,
    };
    if from >= to {
        return Err(ApiError::InvalidRequest(format!(
            "`from` ({from}) must be before `to` ({to})"
        )));
    }
    Ok((from, to))
}

/// Groups `usage` (in database order) by database.
fn by_database(usage: Vec<BranchUsage>) -> Vec<DatabaseConsumption> {
    let mut databases: Vec<DatabaseConsumption> = Vec::new();
    let mut active_ms: Vec<u64> = Vec::new();
    for branch in usage {
        if databases.last().is_none_or(|d| d.database_id != branch.database_id) {
            databases.push(DatabaseConsumption {
                database_id: branch.database_id.clone(),
                storage_bytes: 0,
                written_bytes: 0,
                compute_active_seconds: 0.0,
                branches: Vec::new(),
            });
            active_ms.push(0);
        }
        let (Some(database), Some(ms)) = (databases.last_mut(), active_ms.last_mut()) else {
            unreachable!("a database was pushed above");
        };
        database.storage_bytes = database.storage_bytes.saturating_add(branch.logical_size_bytes);
        database.written_bytes = database.written_bytes.saturating_add(branch.written_bytes);
        *ms = ms.saturating_add(branch.compute_active_ms);
        database.compute_active_seconds = seconds(*ms);
        database.branches.push(BranchConsumption {
            branch_id: branch.branch_id,
            logical_size_bytes: branch.logical_size_bytes,
            written_bytes: branch.written_bytes,
            compute_active_seconds: seconds(branch.compute_active_ms),
        });
    }
    databases
}

/// The project's consumption from `from` to `to`, per database and branch, as the pageserver (logical size, WAL
/// written) and the compute host (compute time) measure them, sampled every minute into hourly buckets (so
/// `from` counts from the start of its hour); kept for 90 days. Storage is each branch's logical size at the
/// range's last sample.
#[utoipa::path(get, path = "/v1/projects/{id}/consumption", tag = "projects",
    params(("id" = String, Path, description = "project id"), RangeParams),
    responses((status = 200, body = ConsumptionEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(project_id): Path<String>,
    params: Result<Query<RangeParams>, QueryRejection>,
) -> Result<Json<ConsumptionEnvelope>, ApiError> {
    let project_id = parse_id(project_id, "proj_")?;
    let (from, to) = range(&params?.0)?;
    let (from_hour, to_text) = (hour_of(from), format!("{to:.0}"));
    let (id, from_key, to_key) = (project_id.clone(), from_hour.clone(), to_text.clone());
    let usage = state
        .control
        .blocking(move |store| store.project_consumption(&account, &id, &from_key, &to_key))
        .await?
        .ok_or(ApiError::NotFound)?;
    let total_ms = usage
        .iter()
        .fold(0u64, |sum, branch| sum.saturating_add(branch.compute_active_ms));
    let databases = by_database(usage);
    Ok(Json(ConsumptionEnvelope {
        consumption: ProjectConsumption {
            project_id,
            from: from_hour,
            to: to_text,
            storage_bytes: databases.iter().map(|d| d.storage_bytes).sum(),
            written_bytes: databases.iter().map(|d| d.written_bytes).sum(),
            compute_active_seconds: seconds(total_ms),
            databases,
        },
    }))
}

const _: () = assert!(CONSUMPTION_RETENTION_DAYS == 90, "the API documents 90 days");
