//! `GET /v1/databases/{id}/health`: whether the database's WAL lives on as many healthy safekeeper copies as it
//! should, as the reconciler last found it (`api::reconcile`), for the database and for each of its branches.
//!
//! A resource of its own rather than a field of the database: the seed and DESIGN §6 fix the database's keys
//! (tests check the exact set, and clients may refuse unknown ones), so this read-only endpoint, described in the
//! OpenAPI document, carries it instead. Timeline ids stay internal: a timeline that no branch is on (the
//! ancestor of a restored branch, say) counts for the database's verdict but is listed under no branch.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::{Extension, Json};
use cambium_types::TimelineId;
use serde::Serialize;
use utoipa::ToSchema;

use super::views::ErrorEnvelope;
use super::{parse_id, AppState};
use crate::error::ApiError;
use crate::reconcile::{RoundReport, HEALTHY_COPIES_WANTED};
use crate::store::AccountId;

/// How well some WAL is replicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Replication {
    /// Every copy wanted is healthy (served, and catchable by a proposer).
    Healthy,
    /// Fewer healthy copies than wanted: commits go on with a majority, the reconciler rebuilds the others.
    UnderReplicated,
    /// Not judged yet: no reconciler round has seen it (just created, just started, or not served).
    Unknown,
}

/// One branch's replication.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BranchHealth {
    /// `br_…`.
    branch_id: String,
    replication: Replication,
    /// Healthy safekeeper copies of the branch's WAL at the last round; null if not judged yet.
    healthy_copies: Option<u32>,
}

/// A database's replication health.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HealthView {
    /// `db_…`.
    database_id: String,
    /// `under_replicated` if any WAL the database needs (its branches', and the history they were branched
    /// from) has fewer healthy copies than wanted; else `unknown` if some is not judged yet; else `healthy`.
    replication: Replication,
    /// Healthy copies each timeline's WAL should have.
    copies_wanted: u32,
    /// The fewest healthy copies any of the database's WAL had at the last round; null if none was judged.
    healthy_copies_min: Option<u32>,
    /// When the reconciler's last round ended (ISO 8601 UTC); null before the first one.
    checked_at: Option<String>,
    /// Each branch, in id order.
    branches: Vec<BranchHealth>,
}

/// `{health}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HealthEnvelope {
    health: HealthView,
}

/// The verdict on WAL with `healthy` copies (`None`: not judged).
fn replication_of(healthy: Option<usize>) -> Replication {
    match healthy {
        None => Replication::Unknown,
        Some(healthy) if healthy < HEALTHY_COPIES_WANTED => Replication::UnderReplicated,
        Some(_) => Replication::Healthy,
    }
}

/// The health of database `database_id` whose branches are on `branches` (branch id, timeline) and which needs
/// `needed` timelines, from the last round's `report`. Pure.
fn health_of(
    database_id: String,
    branches: &[(String, TimelineId)],
    needed: &[TimelineId],
    report: Option<&RoundReport>,
) -> HealthView {
    let judged: HashMap<TimelineId, usize> = report
        .map(|report| {
            needed
                .iter()
                .filter_map(|timeline| Some((*timeline, *report.healthy_copies.get(timeline)?)))
                .collect()
        })
        .unwrap_or_default();
    let count = |healthy: usize| u32::try_from(healthy).unwrap_or(u32::MAX);
    let healthy_copies_min = judged.values().copied().min();
    let replication = if healthy_copies_min.is_some_and(|min| min < HEALTHY_COPIES_WANTED) {
        Replication::UnderReplicated
    } else if needed.is_empty() || judged.len() < needed.len() {
        Replication::Unknown
    } else {
        Replication::Healthy
    };
    HealthView {
        database_id,
        replication,
        copies_wanted: count(HEALTHY_COPIES_WANTED),
        healthy_copies_min: healthy_copies_min.map(count),
        checked_at: report.map(|report| report.ended_at.clone()),
        branches: branches
            .iter()
            .map(|(branch_id, timeline)| {
                let healthy = judged.get(timeline).copied();
                BranchHealth {
                    branch_id: branch_id.clone(),
                    replication: replication_of(healthy),
                    healthy_copies: healthy.map(count),
                }
            })
            .collect(),
    }
}

/// The database's replication health as the reconciler last found it: how many healthy safekeeper copies its
/// WAL has (three wanted), overall and per branch. Read-only; the reconciler rebuilds lost copies by itself.
#[utoipa::path(get, path = "/v1/databases/{id}/health", tag = "databases", params(("id" = String, Path)),
    responses((status = 200, body = HealthEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<HealthEnvelope>, ApiError> {
    let id = parse_id(id, "db_")?;
    let database = state.control.get_database(&account, &id).await?;
    let database_id = database.id.clone();
    let (branches, needed) = state
        .control
        .blocking(move |store| {
            let branches = store.branches_of(&database_id)?;
            Ok((branches, store.needed_timelines_of(&database_id)?))
        })
        .await?;
    let branches: Vec<(String, TimelineId)> = branches
        .into_iter()
        .map(|branch| (branch.id, branch.timeline_id))
        .collect();
    let report = state.control.replicas().last_round();
    Ok(Json(HealthEnvelope {
        health: health_of(database.id, &branches, &needed, report.as_deref()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(healthy: &[(u128, usize)]) -> RoundReport {
        RoundReport {
            ended_at: "2026-01-02T03:04:05.000Z".to_owned(),
            healthy_copies: healthy.iter().map(|(id, n)| (TimelineId(*id), *n)).collect(),
        }
    }

    #[test]
    fn the_verdict_is_the_worst_needed_timeline_and_unknown_until_judged() {
        let branches = vec![("br_a".to_owned(), TimelineId(1)), ("br_b".to_owned(), TimelineId(2))];
        // Timeline 3 is the ancestor of both, on no branch.
        let needed = [TimelineId(1), TimelineId(2), TimelineId(3)];

        let before = health_of("db_x".to_owned(), &branches, &needed, None);
        assert_eq!(before.replication, Replication::Unknown);
        assert_eq!(before.healthy_copies_min, None);
        assert_eq!(before.checked_at, None);
        assert!(before.branches.iter().all(|b| b.replication == Replication::Unknown));

        let all = report(&[(1, 3), (2, 3), (3, 3), (99, 1)]);
        let healthy = health_of("db_x".to_owned(), &branches, &needed, Some(&all));
        assert_eq!(
            healthy.replication,
            Replication::Healthy,
            "another database's timeline is not ours"
        );
        assert_eq!(healthy.healthy_copies_min, Some(3));
        assert_eq!(healthy.checked_at.as_deref(), Some("2026-01-02T03:04:05.000Z"));

        let ancestor_short = report(&[(1, 3), (2, 3), (3, 2)]);
        let short = health_of("db_x".to_owned(), &branches, &needed, Some(&ancestor_short));
        assert_eq!(
            short.replication,
            Replication::UnderReplicated,
            "the history branches read counts"
        );
        assert_eq!(short.healthy_copies_min, Some(2));
        assert!(short.branches.iter().all(|b| b.replication == Replication::Healthy));

        let branch_short = report(&[(1, 3), (2, 1), (3, 3)]);
        let short = health_of("db_x".to_owned(), &branches, &needed, Some(&branch_short));
        assert_eq!(short.branches[1].replication, Replication::UnderReplicated);
        assert_eq!(short.branches[1].healthy_copies, Some(1));

        // A branch made after the last round is not judged yet, and neither is the database.
        let partial = report(&[(1, 3), (3, 3)]);
        let new = health_of("db_x".to_owned(), &branches, &needed, Some(&partial));
        assert_eq!(new.replication, Replication::Unknown);
        assert_eq!(new.branches[1].replication, Replication::Unknown);
        assert_eq!(new.branches[1].healthy_copies, None);
        // But a short copy elsewhere is reported at once.
        let partial_short = report(&[(1, 2)]);
        let short = health_of("db_x".to_owned(), &branches, &needed, Some(&partial_short));
        assert_eq!(short.replication, Replication::UnderReplicated);
    }
}
