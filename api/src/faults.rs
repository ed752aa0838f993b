//! Fault injection for tests (`cambium up --faults …`, hidden; all off in production): pauses that widen the
//! window between a control-plane call reading the metadata and acting on it, so a test can run another call in
//! between (or between a step in the storage and its row, so a crash there leaves an orphan), and failures of steps that rarely fail, so a test can check what a failure leaves behind.
//!
//! The text form is a comma-separated list of `name=value` (`branch_create_pause_ms=1500,resume_check_fails=1`,
//! `pause_at=branch_storage:60000`); an unknown name or a bad value is an error naming it.

use std::time::Duration;

/// What to inject; see the module doc. `Default` injects nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Faults {
    /// Branch creation pauses this long after the request's checks, before it takes the database's lock.
    pub branch_create_pause_ms: u64,
    /// Branch creation pauses this long after the new timeline is made in the storage, before its row is
    /// written (a crash then leaves an orphan timeline for the reconciler).
    pub branch_row_pause_ms: u64,
    /// Project deletion pauses this long after it has stopped its databases' computes, before it deletes their
    /// rows.
    pub project_delete_pause_ms: u64,
    /// A resume's SQL check fails, as it does when the storage does not answer.
    pub resume_check_fails: bool,
    /// A restore's start of the restored branch's store fails, leaving it as a failed start does: defined on the
    /// new timeline, started by the next session.
    pub restore_attach_fails: bool,
    /// A pause at one step of a deletion (`pause_at=<step>:<ms>`), so a test can kill the service there.
    pub pause_at: Option<(Step, u64)>,
}

/// A point between two steps of a deletion or a creation (storage and metadata) or of a move, where
/// `pause_at` pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Database deletion: its compute stopped, its row not deleted yet (`database_row`).
    DatabaseRow,
    /// Database deletion: its rows deleted, its tenant not deleted from the storage yet (`database_storage`).
    DatabaseStorage,
    /// A tenant's deletion: gone from the pageserver, not from the safekeepers yet (`tenant_safekeepers`).
    TenantSafekeepers,
    /// Branch deletion: its rows deleted, its compute and timelines not yet (`branch_storage`).
    BranchStorage,
    /// A timeline's deletion: gone from the pageserver, not from the safekeepers yet (`timeline_safekeepers`).
    TimelineSafekeepers,
    /// A timeline's deletion: gone from the storage, its row not deleted yet (`timeline_row`).
    TimelineRow,
    /// A pageserver move: the target attached the tenant as a secondary, the placement not switched yet
    /// (`move_attached`).
    MoveAttached,
    /// Branch creation: the storage side paused before its timeline is made, while the row is written at once
    /// (`branch_timeline`: a crash then leaves a row whose timeline the storage lacks).
    BranchTimeline,
    /// A pageserver failover: the live pageserver attached the lost one's tenant as its owner, the placement not
    /// switched yet (`failover_attached`).
    FailoverAttached,
    /// A timeline's retirement: sealed on the pageserver and its row marked retired, its safekeeper copies not
    /// deleted yet (`timeline_retired`).
    TimelineRetired,
}

impl Step {
    const ALL: [Step; 10] = [
        Step::DatabaseRow,
        Step::DatabaseStorage,
        Step::TenantSafekeepers,
        Step::BranchStorage,
        Step::TimelineSafekeepers,
        Step::TimelineRow,
        Step::MoveAttached,
        Step::BranchTimeline,
        Step::FailoverAttached,
        Step::TimelineRetired,
    ];

    /// Its name in the text form and in the log.
    pub fn name(self) -> &'static str {
        match self {
            Step::DatabaseRow => "database_row",
            Step::DatabaseStorage => "database_storage",
            Step::TenantSafekeepers => "tenant_safekeepers",
            Step::BranchStorage => "branch_storage",
            Step::TimelineSafekeepers => "timeline_safekeepers",
            Step::TimelineRow => "timeline_row",
            Step::MoveAttached => "move_attached",
            Step::BranchTimeline => "branch_timeline",
            Step::FailoverAttached => "failover_attached",
            Step::TimelineRetired => "timeline_retired",
        }
    }
}

impl Faults {
    /// Pauses if `pause_at` names `step` (logging `fault injection: pausing at <step>` first); nothing otherwise.
    pub(crate) async fn pause_at(&self, step: Step) {
        if let Some((at, ms)) = self.pause_at {
            if at == step {
                tracing::warn!(ms, "fault injection: pausing at {}", step.name());
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
        }
    }
}

/// A malformed `--faults` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad fault {entry:?}: {reason}")]
pub struct FaultsError {
    entry: String,
    reason: &'static str,
}

impl std::str::FromStr for Faults {
    type Err = FaultsError;

    fn from_str(text: &str) -> Result<Faults, FaultsError> {
        let mut faults = Faults::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |reason| FaultsError {
                entry: entry.to_owned(),
                reason,
            };
            let (name, value) = entry.split_once('=').ok_or_else(|| bad("expected name=value"))?;
            let number = || value.parse::<u64>().map_err(|_| bad("expected a whole number"));
            let flag = || match value {
                "1" | "true" => Ok(true),
                "0" | "false" => Ok(false),
                _ => Err(bad("expected 1 or 0")),
            };
            match name {
                "branch_create_pause_ms" => faults.branch_create_pause_ms = number()?,
                "branch_row_pause_ms" => faults.branch_row_pause_ms = number()?,
                "project_delete_pause_ms" => faults.project_delete_pause_ms = number()?,
                "resume_check_fails" => faults.resume_check_fails = flag()?,
                "restore_attach_fails" => faults.restore_attach_fails = flag()?,
                "pause_at" => {
                    let (step, ms) = value.split_once(':').ok_or_else(|| bad("expected <step>:<ms>"))?;
                    let step = Step::ALL
                        .into_iter()
                        .find(|known| known.name() == step)
                        .ok_or_else(|| bad("unknown step"))?;
                    let ms = ms.parse::<u64>().map_err(|_| bad("expected a whole number of ms"))?;
                    faults.pause_at = Some((step, ms));
                }
                _ => return Err(bad("unknown fault")),
            }
        }
        Ok(faults)
    }
}

/// Sleeps `ms` (a pause point; nothing when 0).
pub(crate) async fn pause(ms: u64) {
    if ms > 0 {
        tracing::warn!(ms, "fault injection: pausing");
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_parses_and_refuses_what_it_does_not_know() {
        assert_eq!("".parse::<Faults>(), Ok(Faults::default()));
        let faults: Faults = "branch_create_pause_ms=1500, resume_check_fails=1"
            .parse()
            .expect("parses");
        assert_eq!(faults.branch_create_pause_ms, 1500);
        assert!(faults.resume_check_fails);
        assert!(!faults.restore_attach_fails);
        let faults: Faults = "branch_row_pause_ms=7".parse().expect("parses");
        assert_eq!(faults.branch_row_pause_ms, 7);
        for step in Step::ALL {
            let faults: Faults = format!("pause_at={}:60000", step.name()).parse().expect("parses");
            assert_eq!(faults.pause_at, Some((step, 60_000)));
        }
        for bad in [
            "pause_at=branch_storage",
            "pause_at=nowhere:5",
            "pause_at=timeline_row:x",
            "nope=1",
            "branch_create_pause_ms",
            "branch_create_pause_ms=x",
            "resume_check_fails=2",
        ] {
            assert!(bad.parse::<Faults>().is_err(), "{bad}");
        }
    }
}
