//! Each timeline's safekeeper set as the control plane uses it (issue 17 item 3; the choice is
//! `crate::safekeeper_sets`, the rows `store::timeline_sets`): recorded before a timeline is made, read by
//! everything that talks to the timeline's safekeepers, and given to the compute host with each branch.

use cambium_types::TimelineId;

use super::Control;
use crate::error::ApiError;
use crate::safekeeper_sets::{choose_set, count_timelines, SET_SIZE};

impl Control {
    /// The safekeepers that hold `timeline`: its recorded set, or the default set if it has none.
    pub(crate) async fn set_of(&self, timeline: TimelineId) -> Result<Vec<String>, ApiError> {
        let recorded = self.blocking(move |store| store.timeline_safekeepers(timeline)).await?;
        Ok(recorded.unwrap_or_else(|| self.backend.default_set()))
    }

    /// The set of `timeline`, a new timeline of database `database_id`: with at most [`SET_SIZE`] safekeepers
    /// configured, all of them (not recorded: the default set); else the one recorded by an earlier try of the
    /// same creation, or one chosen now ([`choose_set`]: the reachable safekeepers with the fewest timelines) and
    /// recorded before anything is made on the storage.
    pub(super) async fn set_for_new_timeline(
        &self,
        database_id: &str,
        timeline: TimelineId,
    ) -> Result<Vec<String>, ApiError> {
        let configured = self.backend.safekeeper_addresses();
        if configured.len() <= SET_SIZE {
            // Every set is the whole configuration: nothing to record. `cambium up` binds its in-process
            // safekeepers to new ports at each start, so a recorded address would not outlive a restart.
            return Ok(self.backend.default_set());
        }
        if let Some(recorded) = self.blocking(move |store| store.timeline_safekeepers(timeline)).await? {
            return Ok(recorded);
        }
        let default_set = self.backend.default_set();
        let all = self.blocking(|store| store.all_timeline_safekeepers()).await?;
        let sets: Vec<Vec<String>> = all
            .into_values()
            .map(|set| set.unwrap_or_else(|| default_set.clone()))
            .collect();
        let counts = count_timelines(&sets);
        let chosen = choose_set(&configured, &counts, &self.replicas.liveness().unreachable());
        let database_id = database_id.to_owned();
        self.blocking(move |store| store.record_timeline_safekeepers(&database_id, timeline, &chosen))
            .await
    }
}

impl Control {
    /// Gives the compute host `timeline`'s current set for every branch of database `database_id` on it (after a
    /// replacement moved the set): each such branch is defined again with the new target, which closes its store
    /// (its sessions fail with "moved to other safekeepers; reconnect") and starts a new one that campaigns on
    /// the new set. Nothing to do for a database this host does not serve, or one not serving sessions: it
    /// reads the sets from the metadata when it is served again. The caller holds the database's lock.
    pub(crate) async fn repoint_timeline(&self, database_id: &str, timeline: TimelineId) -> Result<(), ApiError> {
        if !self.is_placed_here(database_id) {
            return Ok(());
        }
        let id = database_id.to_owned();
        let Some(database) = self.blocking(move |store| store.database(&id)).await? else {
            return Ok(());
        };
        if !database.serves_sessions() {
            return Ok(());
        }
        let id = database_id.to_owned();
        let branches = self.blocking(move |store| store.branches_of(&id)).await?;
        for branch in branches.iter().filter(|branch| branch.timeline_id == timeline) {
            let target = self.target(&database, branch).await?;
            self.host
                .define(&branch.id, target)
                .map_err(|e| ApiError::Unavailable(format!("re-pointing branch {}: {e}", branch.id)))?;
        }
        Ok(())
    }
}
