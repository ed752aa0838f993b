//! Time travel: `<name>@<LSN>` or `<name>@<RFC 3339 timestamp>` opens a read-only session on a store fixed at
//! that LSN, registered under `<branch>@<LSN>`; each branch keeps at most [`TIME_TRAVEL_STORES_MAX`] of them,
//! least recently used unregistered first.

use std::sync::Arc;

use cambium_types::Lsn;

use super::branches::{Branch, BranchState};
use super::sessions::cannot_open;
use super::{HostShared, TIME_TRAVEL_STORES_MAX};
use crate::pg::{SessionError, SessionFactory};
use crate::remote_store::RemotePageStore;
use crate::vfs;

impl HostShared {
    /// The LSN a time-travel suffix names: an LSN (`0/16B3748`) or an RFC 3339 timestamp
    /// (`2026-11-22T13:00:00Z`), resolved by the pageserver to the newest commit at or before it. A timestamp
    /// before the branch's own first commit resolves into its ancestor: refused here (connect to the parent).
    fn time_travel_lsn(branch: &Branch, store: &RemotePageStore, text: &str) -> Result<Lsn, String> {
        if let Ok(lsn) = text.parse::<Lsn>() {
            return Ok(lsn);
        }
        let timestamp: jiff::Timestamp = text
            .parse()
            .map_err(|_| format!("{text:?} is neither an LSN (0/16B3748) nor an RFC 3339 timestamp"))?;
        let timestamp_us =
            u64::try_from(timestamp.as_microsecond()).map_err(|_| "a timestamp before 1970".to_owned())?;
        let (timeline, lsn) = store.lsn_for_timestamp(timestamp_us).map_err(|e| e.to_string())?;
        if timeline != branch.target.timeline_id {
            return Err(format!(
                "{text} is before this branch's first commit; connect to its parent"
            ));
        }
        Ok(lsn)
    }

    /// Registers the read-only store of `name` (`branch@lsn`) for `branch` unless it already is (then it
    /// becomes the most recently used). Blocks.
    fn ensure_time_travel(
        &self,
        branch: &Arc<Branch>,
        store: &RemotePageStore,
        name: &str,
        lsn: Lsn,
    ) -> Result<(), String> {
        if touch_time_travel(&mut branch.state.lock(), name) {
            return Ok(());
        }
        if lsn < branch.target.start_lsn {
            return Err(format!(
                "LSN {lsn} is before the branch starts at {}",
                branch.target.start_lsn
            ));
        }
        let now = store.read_lsn();
        if lsn > now {
            return Err(format!("LSN {lsn} is in the future: the branch is at {now}"));
        }
        let started =
            futures::executor::block_on(RemotePageStore::start_read_only(self.store_config(&branch.target), lsn))
                .map_err(|e| e.to_string())?;
        let names = self.names.read();
        let mut state = branch.state.lock();
        if let Some(reason) = &state.closed {
            started.close(reason);
            return Err(reason.clone());
        }
        if touch_time_travel(&mut state, name) {
            // Another session registered it meanwhile: use that one, drop ours.
            return Ok(());
        }
        assert!(
            HostShared::is_current(&names, branch),
            "branch {} is not closed but not current",
            branch.name
        );
        vfs::register_database(name, started.clone()).map_err(|e| e.to_string())?;
        state.time_travel.push_back((name.to_owned(), started));
        while state.time_travel.len() > TIME_TRAVEL_STORES_MAX {
            if let Some((oldest, _)) = state.time_travel.pop_front() {
                // Connections open on it keep its store until they close.
                vfs::unregister_database(&oldest);
            }
        }
        Ok(())
    }

    pub(super) fn open_time_travel(
        &self,
        user: &str,
        database: &str,
        branch: &Arc<Branch>,
        text: &str,
    ) -> Result<rusqlite::Connection, SessionError> {
        let refused = |reason: String| cannot_open(format!("time travel to {database}: {reason}"));
        let store = self.ensure_started(branch).map_err(|e| refused(e.to_string()))?;
        let lsn = HostShared::time_travel_lsn(branch, &store, text).map_err(refused)?;
        // The canonical spelling, so `0/16b3748` and `0/16B3748` (and an alias) share one store.
        let name = format!("{}@{lsn}", branch.name);
        self.ensure_time_travel(branch, &store, &name, lsn).map_err(refused)?;
        let connection = self.vfs.open(user, &name)?;
        connection.pragma_update(None, "query_only", true)?;
        Ok(connection)
    }
}

/// Whether `name` is a registered time-travel name of the branch; if so it becomes the most recently used.
fn touch_time_travel(state: &mut BranchState, name: &str) -> bool {
    let Some(index) = state.time_travel.iter().position(|(n, _)| n == name) else {
        return false;
    };
    if let Some(entry) = state.time_travel.remove(index) {
        state.time_travel.push_back(entry);
    }
    true
}
