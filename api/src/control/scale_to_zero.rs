//! Scale to zero: a sweep, every [`SWEEP_PERIOD_MS`] and whenever the compute host says a parked database woke,
//! that suspends each active database with no session for its `suspend_timeout_seconds` and records the wakes.
//!
//! - **Suspend.** Under the database's lock, with no operation running on it, the host parks its tenant (its
//!   branches' stores stop; its names stay served: `compute::host::ComputeHost::park`); then the row becomes
//!   `suspended` with reason `idle`, and a finished `suspend_database` operation says how long it was idle
//!   (its end is an `operation.finished` event for webhooks, like any operation's).
//! - **Wake.** The next session of a parked database starts its branch's store as any first session does and
//!   so wakes it in the host: it answers at once, and the sweep then records the database `active` with a
//!   finished `resume_database` operation. A database suspended by the API is never parked: it refuses
//!   sessions, saying so, until resumed.
//! - **Restart.** The reason is in the metadata: a database suspended for idleness is parked again before it is
//!   served (`Control::resume`), and still wakes on connect. The idle clocks live in the host, so they start
//!   again from the restart.
//!
//! **Invariant:** after the sweep records a suspension it re-reads the host's mark, under the same lock, so a
//! session that woke the database meanwhile is recorded as a wake rather than lost (the row never says
//! `suspended` for long while a store runs).

use std::sync::{Arc, Weak};
use std::time::Duration;

use cambium_types::TenantId;

use super::Control;
use crate::store::databases::{Database, DatabaseStatus, SuspendReason};

/// The wait between sweeps when no wake comes: how late after its timeout a database may be suspended.
pub const SWEEP_PERIOD_MS: u64 = 500;

/// Runs the sweep every [`SWEEP_PERIOD_MS`], and at once when a parked database wakes, until `control` is
/// dropped or the task aborted.
pub fn spawn(control: &Arc<Control>) -> tokio::task::JoinHandle<()> {
    let host = Arc::clone(control.host());
    let control: Weak<Control> = Arc::downgrade(control);
    tokio::spawn(async move {
        loop {
            {
                let Some(control) = control.upgrade() else {
                    return;
                };
                control.sweep_idle().await;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(SWEEP_PERIOD_MS)) => {}
                () = host.wakes() => {}
            }
        }
    })
}

impl Control {
    /// One sweep: suspends the active databases idle for their timeout and records the wakes of the parked
    /// ones; returns how many rows it changed.
    pub async fn sweep_idle(&self) -> usize {
        let watched = match self.blocking(|store| store.databases_to_watch()).await {
            Ok(watched) => watched,
            Err(error) => {
                tracing::warn!(?error, "the idle sweep could not read the databases; next sweep");
                return 0;
            }
        };
        let mut changed = 0;
        for database in watched {
            if !self.is_placed_here(&database.id) {
                // Its host watches it.
                continue;
            }
            let tenant = database.tenant_id;
            let due = match database.status {
                DatabaseStatus::Active => self
                    .host
                    .idle_for(tenant)
                    .is_some_and(|idle| idle >= timeout(&database)),
                _ => !self.host.is_parked(tenant),
            };
            if due && self.settle(&database.id).await {
                changed += 1;
            }
        }
        changed
    }

    /// Under database `id`'s lock, suspends it if it is still active and idle for its timeout, or records its
    /// wake if it is suspended for idleness and no longer parked; returns whether its row changed.
    async fn settle(&self, id: &str) -> bool {
        let _held = self.locked(id).await;
        let database_id = id.to_owned();
        let database = match self.blocking(move |store| store.database(&database_id)).await {
            Ok(Some(database)) => database,
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(database = %id, ?error, "the idle sweep could not read a database");
                return false;
            }
        };
        let tenant = database.tenant_id;
        match (database.status, database.suspend_reason) {
            (DatabaseStatus::Active, _) => {
                if database.suspend_timeout_seconds == 0 {
                    return false;
                }
                let Some(idle) = self.host.idle_for(tenant).filter(|idle| *idle >= timeout(&database)) else {
                    return false;
                };
                if !self.suspend_idle(&database, idle).await {
                    return false;
                }
                if !self.host.is_parked(tenant) {
                    // A session woke it while the suspension was written.
                    self.record_wake(&database).await;
                }
                true
            }
            (DatabaseStatus::Suspended, Some(SuspendReason::Idle)) if !self.host.is_parked(tenant) => {
                self.record_wake(&database).await
            }
            _ => false,
        }
    }

    /// Parks `database` (idle for `idle`) and records it suspended for idleness; returns whether it did. Called
    /// under its lock. Not while an operation runs on it (a restore or an expiry's deletion moves its branches).
    async fn suspend_idle(&self, database: &Database, idle: Duration) -> bool {
        let id = database.id.clone();
        match self
            .blocking(move |store| store.running_operation_on_database(&id))
            .await
        {
            Ok(None) => {}
            Ok(Some(_)) => return false,
            Err(error) => {
                tracing::warn!(database = %database.id, ?error, "the idle sweep could not read the operations");
                return false;
            }
        }
        if !self.park(database.tenant_id).await {
            return false;
        }
        let reason = format!(
            "idle: no session for {} s (suspend_timeout_seconds {}); the next connection resumes it",
            idle.as_secs(),
            database.suspend_timeout_seconds
        );
        let id = database.id.clone();
        match self
            .blocking(move |store| store.suspend_for_idleness(&id, &reason))
            .await
        {
            Ok(Some(operation)) => {
                tracing::info!(database = %database.id, idle_s = idle.as_secs(), "suspended an idle database");
                self.emit_operation(operation).await;
                true
            }
            Ok(None) => {
                self.host.unpark(database.tenant_id);
                false
            }
            Err(error) => {
                // Back to what the row says (active): its stores start again with their sessions.
                self.host.unpark(database.tenant_id);
                tracing::warn!(database = %database.id, ?error, "an idle database's suspension could not be recorded");
                false
            }
        }
    }

    /// Records that `database`, suspended for idleness, woke; returns whether the row changed. Called under its
    /// lock.
    async fn record_wake(&self, database: &Database) -> bool {
        let id = database.id.clone();
        let reason = "a session woke it".to_owned();
        match self.blocking(move |store| store.wake_from_idleness(&id, &reason)).await {
            Ok(Some(operation)) => {
                tracing::info!(database = %database.id, "a database suspended for idleness woke");
                self.host.touch(database.tenant_id);
                self.emit_operation(operation).await;
                true
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(database = %database.id, ?error, "a wake could not be recorded; next sweep");
                false
            }
        }
    }

    /// Parks `tenant` in the host (off the async workers: stores shut down); returns whether it is parked.
    pub(super) async fn park(&self, tenant: TenantId) -> bool {
        let host = Arc::clone(&self.host);
        match tokio::task::spawn_blocking(move || host.park(tenant)).await {
            Ok(parked) => parked,
            Err(error) => {
                tracing::error!(%error, %tenant, "parking a database failed");
                false
            }
        }
    }
}

/// `database`'s suspend timeout (the sweep watches only databases with one).
fn timeout(database: &Database) -> Duration {
    Duration::from_secs(u64::from(database.suspend_timeout_seconds))
}
