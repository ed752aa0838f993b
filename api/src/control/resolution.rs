//! Points in a branch's history resolved to the timeline that holds them and an LSN: the latest commit, an
//! LSN, or a time, checked against the branch's head, the database's creation and the GC cutoff.

use cambium_types::{Lsn, TimelineId};

use super::Control;
use crate::backend::BackendError;
use crate::error::ApiError;
use crate::store::databases::{Branch, Database, TimelineRow};
use crate::store::{Store, StoreError};

/// The timeline of `timelines` that holds `lsn` in the history of `start`: `start` itself, or the ancestor it
/// was branched from at or below its branch point (recursively). At its branch point a branch's timeline is its
/// ancestor there (its first record ends past it), so a point there is the ancestor's: a branch or a restore
/// made at it is not chained to a timeline it reads nothing of. Restoring a branch again and again to one point
/// (a test database reset before every run) then makes each new timeline a child of the same ancestor, and the
/// one it replaces, which nothing needs, is deleted, instead of each new one hanging below the last.
pub(crate) fn timeline_holding(
    timelines: &[TimelineRow],
    start: TimelineId,
    lsn: Lsn,
) -> Result<TimelineRow, ApiError> {
    let find = |id: TimelineId| {
        timelines.iter().find(|t| t.timeline_id == id).copied().ok_or_else(|| {
            tracing::error!(timeline = %id, "a branch's timeline has no row");
            ApiError::Internal
        })
    };
    let mut current = find(start)?;
    // Bounded: each step goes to an ancestor, and there are finitely many rows.
    for _ in 0..=timelines.len() {
        match current.ancestor_timeline_id {
            Some(ancestor) if lsn <= current.start_lsn => current = find(ancestor)?,
            _ => {
                if lsn < current.start_lsn {
                    return Err(ApiError::Unprocessable(format!(
                        "LSN {lsn} is before the database's history, which starts at {}",
                        current.start_lsn
                    )));
                }
                return Ok(current);
            }
        }
    }
    tracing::error!(timeline = %start, "the timeline ancestry has a cycle");
    Err(ApiError::Internal)
}

/// The first timeline of `start`'s history: the root its ancestry goes back to.
fn root_of(timelines: &[TimelineRow], start: TimelineId) -> Result<TimelineRow, ApiError> {
    let mut current = start;
    // Bounded: each step goes to an ancestor, and there are finitely many rows.
    for _ in 0..=timelines.len() {
        let row = timelines
            .iter()
            .find(|t| t.timeline_id == current)
            .copied()
            .ok_or_else(|| {
                tracing::error!(timeline = %current, "a branch's timeline has no row");
                ApiError::Internal
            })?;
        match row.ancestor_timeline_id {
            Some(ancestor) => current = ancestor,
            None => return Ok(row),
        }
    }
    tracing::error!(timeline = %start, "the timeline ancestry has a cycle");
    Err(ApiError::Internal)
}

/// What [`Control::resolve_read`] needs from the metadata, read in one store call (the caller's, with its own
/// reads): the timelines of the branch's database and the safekeeper set of the branch's timeline.
pub(crate) fn resolution_reads(
    store: &Store,
    database_id: &str,
    timeline: TimelineId,
) -> Result<ResolutionReads, StoreError> {
    Ok(ResolutionReads {
        timelines: store.timelines_of(database_id)?,
        set: store.timeline_safekeepers(timeline)?,
    })
}

/// The metadata a resolution reads ([`resolution_reads`]).
#[derive(Debug, Clone)]
pub(crate) struct ResolutionReads {
    /// Every timeline of the branch's database.
    timelines: Vec<TimelineRow>,
    /// The branch's timeline's recorded safekeeper set, if any.
    set: Option<Vec<String>>,
}

/// A point in a branch's history, as a request gives it.
#[derive(Debug, Clone)]
pub enum PointInTime {
    /// The branch's latest committed state.
    Latest,
    /// An LSN.
    Lsn(Lsn),
    /// The state at this time: the newest commit at or before it, or the database as it was created if it had no
    /// commit yet.
    Timestamp(jiff::Timestamp),
    /// A valid RFC 3339 time past the last instant a `jiff::Timestamp` holds (late on 9999-12-30 and after), as
    /// given: always in the future.
    AfterTimestampMax(String),
}

impl Control {
    /// The LSN of `branch`'s latest committed state: its running compute's last commit, or what a majority of
    /// safekeepers hold as committed.
    /// `set` is the branch's timeline's safekeeper set.
    async fn head_lsn(&self, database: &Database, branch: &Branch, set: &[String]) -> Result<Lsn, ApiError> {
        if let Some(store) = self.host.store(&branch.id) {
            if store.failure().is_none() {
                return Ok(store.read_lsn());
            }
        }
        Ok(self
            .backend
            .committed_lsn(database.tenant_id, branch.timeline_id, set)
            .await?)
    }

    /// Resolves `point` of `branch` to the timeline that holds it and its LSN, checking it against the
    /// branch's head and the GC cutoff (422 if out of reach).
    pub(super) async fn resolve(
        &self,
        database: &Database,
        branch: &Branch,
        point: &PointInTime,
    ) -> Result<(TimelineRow, Lsn), ApiError> {
        let (database_id, timeline) = (database.id.clone(), branch.timeline_id);
        let reads = self
            .blocking(move |store| resolution_reads(store, &database_id, timeline))
            .await?;
        crate::stages::mark("read_timelines");
        self.resolve_read(database, branch, point, reads).await
    }

    /// [`Control::resolve`] with its metadata already read (in the caller's store call).
    pub(super) async fn resolve_read(
        &self,
        database: &Database,
        branch: &Branch,
        point: &PointInTime,
        reads: ResolutionReads,
    ) -> Result<(TimelineRow, Lsn), ApiError> {
        let ResolutionReads { timelines, set } = reads;
        let set = set.unwrap_or_else(|| self.backend.default_set());
        let head = self.head_lsn(database, branch, &set).await?;
        crate::stages::mark("head_lsn");
        let lsn = match point {
            PointInTime::Latest => head,
            PointInTime::Lsn(lsn) => {
                if *lsn > head {
                    return Err(ApiError::Unprocessable(format!(
                        "LSN {lsn} is ahead of the branch, which is at {head}"
                    )));
                }
                *lsn
            }
            PointInTime::AfterTimestampMax(text) => {
                return Err(ApiError::Unprocessable(format!(
                    "{text} is in the future (it is now {:.0})",
                    jiff::Timestamp::now()
                )))
            }
            PointInTime::Timestamp(timestamp) => {
                let timestamp_us = self.check_time(database, *timestamp)?;
                // Every commit up to the head must be indexed before asking which one was last at that time.
                self.backend
                    .wait_ingested(database.tenant_id, branch.timeline_id, head)
                    .await?;
                match self
                    .backend
                    .lsn_for_timestamp(database.tenant_id, branch.timeline_id, timestamp_us)
                    .await
                {
                    Ok((_, lsn)) => lsn.min(head),
                    // No commit at or before that time in the branch's history, and the database existed then
                    // (checked above): it was as created, which is the start of its first timeline.
                    Err(BackendError::Unprocessable(_)) => root_of(&timelines, branch.timeline_id)?.start_lsn,
                    Err(error) => return Err(error.into()),
                }
            }
        };
        let holder = timeline_holding(&timelines, branch.timeline_id, lsn)?;
        if matches!(point, PointInTime::Latest) {
            // The head is at or past what the pageserver ingested, and its GC cutoff is below that: nothing to
            // check (and a creation below the cutoff is refused by the pageserver itself, under the lock its GC
            // takes), so no round trip for it.
            return Ok((holder, lsn));
        }
        let state = self
            .backend
            .timeline_state(database.tenant_id, holder.timeline_id)
            .await?;
        if lsn < state.gc_cutoff_lsn {
            return Err(ApiError::Unprocessable(format!(
                "LSN {lsn} is outside the retained history, which starts at {}",
                state.gc_cutoff_lsn
            )));
        }
        Ok((holder, lsn))
    }

    /// `timestamp` in µs if `database` has a state at that time: not in the future, not before it was created.
    fn check_time(&self, database: &Database, timestamp: jiff::Timestamp) -> Result<u64, ApiError> {
        let now = jiff::Timestamp::now();
        if timestamp > now {
            return Err(ApiError::Unprocessable(format!(
                "{timestamp} is in the future (it is now {now:.0})"
            )));
        }
        let created: jiff::Timestamp = database.created_at.parse().map_err(|_| {
            tracing::error!(database = %database.id, created_at = %database.created_at, "a malformed creation time");
            ApiError::Internal
        })?;
        if timestamp < created {
            return Err(ApiError::Unprocessable(format!(
                "{timestamp} is before database {} was created, at {created}",
                database.id
            )));
        }
        // Not before the creation, so not before 1970.
        u64::try_from(timestamp.as_microsecond()).map_err(|_| {
            tracing::error!(database = %database.id, %timestamp, "a creation time before 1970");
            ApiError::Internal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u128, ancestor: Option<u128>, start: u64) -> TimelineRow {
        TimelineRow {
            timeline_id: TimelineId(id),
            ancestor_timeline_id: ancestor.map(TimelineId),
            start_lsn: Lsn(start),
        }
    }

    #[test]
    fn a_point_at_a_branch_point_is_the_ancestors() {
        // A root from 100; A branched from it at 200; B branched from A at 300.
        let timelines = [row(1, None, 100), row(2, Some(1), 200), row(3, Some(2), 300)];
        let holder = |lsn: u64| {
            timeline_holding(&timelines, TimelineId(3), Lsn(lsn))
                .map(|row| row.timeline_id.0)
                .map_err(|error| matches!(error, ApiError::Unprocessable(_)))
        };
        assert_eq!(holder(301), Ok(3));
        assert_eq!(holder(300), Ok(2), "B at its start is A there");
        assert_eq!(holder(250), Ok(2));
        assert_eq!(
            holder(200),
            Ok(1),
            "A at its start is the root there, so B's point is too"
        );
        assert_eq!(holder(100), Ok(1), "a root's start is its own");
        assert_eq!(holder(99), Err(true), "before the history: 422");
    }
}
