//! The lease keeper: every [`LEASE_PERIOD_MS`], renews the leases of the operations this process runs and takes
//! over those a dead process left (lease expired), so on shared PostgreSQL metadata a killed `cambium api`'s
//! operations finish on a live one (see `store::leases`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Control;
use crate::store::leases::OPERATION_LEASE_MS;

/// How often leases are renewed and expired ones looked for: a fifth of a lease, so a renewal late by a few
/// periods (a slow metadata database) still lands before the lease expires.
pub const LEASE_PERIOD_MS: u64 = OPERATION_LEASE_MS / 5;

/// Starts the lease keeper, and beside it the compute host's fence watch (`placement::watch_fence`); they end
/// when `control` is dropped or the task is aborted.
pub fn spawn(control: &Arc<Control>) -> tokio::task::JoinHandle<()> {
    let control: Weak<Control> = Arc::downgrade(control);
    let fence = super::placement::watch_fence(control.clone());
    let keeper = async move {
        loop {
            tokio::time::sleep(Duration::from_millis(LEASE_PERIOD_MS)).await;
            let Some(control) = control.upgrade() else {
                return;
            };
            control.keep_leases().await;
        }
    };
    // One task, so aborting it stops both; the watch runs while the keeper waits on the metadata.
    tokio::spawn(async move {
        tokio::join!(keeper, fence);
    })
}

impl Control {
    /// One round: the compute host's heartbeat and placement (`placement`), then renew this process's leases,
    /// then claim and run each operation nobody holds (of the databases placed here, or of none).
    pub async fn keep_leases(&self) {
        self.reconcile_placement().await;
        if let Err(error) = self.blocking(|store| store.renew_leases()).await {
            tracing::warn!(?error, "renewing the operation leases failed");
        }
        let claimable = match self.blocking(|store| store.claimable_operations()).await {
            Ok(claimable) => claimable,
            Err(error) => {
                tracing::warn!(?error, "listing operations to take over failed");
                return;
            }
        };
        for id in claimable {
            match self.claim_and_run(id.clone()).await {
                Ok(true) => tracing::info!(operation = %id, "took over an operation whose lease expired"),
                Ok(false) => {} // another process claimed it first
                Err(error) => tracing::warn!(operation = %id, ?error, "claiming an operation failed"),
            }
        }
    }
}
