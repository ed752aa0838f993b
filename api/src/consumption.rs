//! The consumption sampler: every [`ConsumptionConfig::period_ms`], each branch of every active or suspended
//! database is measured — its logical size and last record LSN from the pageserver (`Backend::timeline_state`),
//! and whether its compute runs from the compute host (a started store) — and added to its hourly bucket
//! (`store::consumption`). A running compute counts the time since the previous sample; so compute time is
//! measured to within one period, and a branch whose pageserver timeline cannot be read this round is skipped
//! (its WAL is counted at the next sample that reads it: nothing is lost, only attributed later).
//!
//! Bounded: one round reads at most [`BRANCHES_PER_ROUND_MAX`] branches (the rest wait for the next round), each
//! read within the backend's request timeout.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::control::Control;
use crate::store::consumption::{BranchSample, CONSUMPTION_RETENTION_DAYS};
use crate::store::databases::DatabaseStatus;

/// The default wait between samples.
pub const CONSUMPTION_PERIOD_MS_DEFAULT: u64 = 60_000;
/// Branches measured in one round, at most.
pub const BRANCHES_PER_ROUND_MAX: usize = 10_000;

/// How the sampler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumptionConfig {
    /// The wait between samples, in milliseconds.
    pub period_ms: u64,
}

impl Default for ConsumptionConfig {
    fn default() -> ConsumptionConfig {
        ConsumptionConfig {
            period_ms: CONSUMPTION_PERIOD_MS_DEFAULT,
        }
    }
}

/// The hour `at` is in, as buckets name it: `YYYY-MM-DDTHH:00:00Z`.
pub fn hour_of(at: jiff::Timestamp) -> String {
    let seconds = at.as_second();
    let floored = seconds - seconds.rem_euclid(3_600);
    match jiff::Timestamp::from_second(floored) {
        Ok(hour) => format!("{hour:.0}"),
        Err(_) => format!("{at:.0}"),
    }
}

/// Runs the sampler every `config.period_ms` until `control` is dropped or the task aborted.
pub fn spawn(control: &Arc<Control>, config: ConsumptionConfig) -> tokio::task::JoinHandle<()> {
    let control: Weak<Control> = Arc::downgrade(control);
    tokio::spawn(async move {
        let mut last = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(config.period_ms)).await;
            let Some(control) = control.upgrade() else {
                return;
            };
            let now = Instant::now();
            let elapsed_ms = u64::try_from(now.duration_since(last).as_millis()).unwrap_or(u64::MAX);
            last = now;
            sample(&control, elapsed_ms).await;
        }
    })
}

/// One round: measures every branch, counting `elapsed_ms` of compute for each running one, and records it.
async fn sample(control: &Control, elapsed_ms: u64) {
    let listed = control
        .blocking(|store| {
            let mut listed = Vec::new();
            for database in store.all_databases()? {
                if !matches!(database.status, DatabaseStatus::Active | DatabaseStatus::Suspended) {
                    continue;
                }
                let starts: HashMap<_, _> = store
                    .timelines_of(&database.id)?
                    .into_iter()
                    .map(|t| (t.timeline_id, t.start_lsn))
                    .collect();
                let branches = store.branches_of(&database.id)?;
                listed.push((database, starts, branches));
            }
            Ok(listed)
        })
        .await;
    let listed = match listed {
        Ok(listed) => listed,
        Err(error) => {
            tracing::warn!(?error, "the consumption sampler could not list the branches");
            return;
        }
    };
    let mut samples = Vec::new();
    for (database, starts, branches) in listed {
        if !control.is_placed_here(&database.id) {
            // Sampled by its own compute host, which knows its compute time (each branch once a round).
            continue;
        }
        for branch in branches {
            if samples.len() >= BRANCHES_PER_ROUND_MAX {
                break;
            }
            let state = match control
                .backend()
                .timeline_state(database.tenant_id, branch.timeline_id)
                .await
            {
                Ok(state) => state,
                Err(error) => {
                    tracing::debug!(branch = %branch.id, %error, "a branch's timeline could not be read for consumption");
                    continue;
                }
            };
            let active = control.host().store(&branch.id).is_some();
            samples.push(BranchSample {
                project_id: database.project_id.clone(),
                database_id: database.id.clone(),
                timeline_id: branch.timeline_id.to_string(),
                start_lsn: starts
                    .get(&branch.timeline_id)
                    .map_or(state.last_record_lsn.0, |lsn| lsn.0),
                last_record_lsn: state.last_record_lsn.0,
                logical_size_bytes: state.logical_size_bytes,
                compute_active_ms: if active { elapsed_ms } else { 0 },
                branch_id: branch.id,
            });
        }
    }
    let now = jiff::Timestamp::now();
    let hour = hour_of(now);
    let cutoff = now
        .checked_sub(jiff::SignedDuration::from_hours(CONSUMPTION_RETENTION_DAYS * 24))
        .map(hour_of)
        .unwrap_or_default();
    if let Err(error) = control
        .blocking(move |store| store.record_consumption(&hour, &cutoff, &samples))
        .await
    {
        tracing::warn!(?error, "the consumption samples could not be recorded");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    #[test]
    fn hours_are_floored_and_sort_as_time() {
        let at: jiff::Timestamp = "2026-11-24T21:39:11.123Z".parse().unwrap();
        assert_eq!(hour_of(at), "2026-11-24T21:00:00Z");
        let next: jiff::Timestamp = "2026-11-24T22:00:00Z".parse().unwrap();
        assert_eq!(hour_of(next), "2026-11-24T22:00:00Z");
        assert!(hour_of(at) < hour_of(next));
    }
}
