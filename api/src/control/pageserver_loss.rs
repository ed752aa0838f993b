//! Serving through the loss of a pageserver (issue 17 item 5): a watch that probes every configured pageserver
//! (`ListTenants`) and, once one has answered none of its probes for `--pageserver-dead-after-ms`, re-places each
//! database placed on it on a live one: the live pageserver attaches the tenant from the remote as its owner (its
//! index and small files; layers on first use; its `owner` mark written first) and ingests the WAL past the
//! remote copy from the safekeepers (which keep it past `remote_consistent_lsn`), the placement is switched
//! (conditionally on the dead one), and this process's computes re-pointed. The lost pageserver, if it comes
//! back, finds the `owner` mark naming another and never uploads the tenant again (it keeps it as a secondary:
//! `pageserver::remote`).
//!
//! Each database is re-placed under its lock and only when no operation runs on it; one that fails (no live
//! pageserver, the attach refused) is tried again at the next probe. With one pageserver configured, or a dead
//! time of 0, nothing runs.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::{retry, Control};
use crate::store::pageservers::choose_pageserver;

/// Starts the watch (nothing with one pageserver or `dead_after_ms` 0); it ends when the control plane is
/// dropped.
pub fn spawn(control: &Arc<Control>, dead_after_ms: u64) -> Option<tokio::task::JoinHandle<()>> {
    let configured = control.backend.pageserver_addresses();
    if configured.len() <= 1 || dead_after_ms == 0 {
        return None;
    }
    let control: Weak<Control> = Arc::downgrade(control);
    let dead_after = Duration::from_millis(dead_after_ms);
    let period = Duration::from_millis((dead_after_ms / 4).clamp(100, 5_000));
    Some(tokio::spawn(async move {
        let mut last_answer = vec![Instant::now(); configured.len()];
        loop {
            {
                let Some(control) = control.upgrade() else {
                    return;
                };
                let answers = control.backend.pageserver_tenant_counts().await;
                let now = Instant::now();
                for (last, answer) in last_answer.iter_mut().zip(&answers) {
                    if answer.is_some() {
                        *last = now;
                    }
                }
                let live: Vec<bool> = last_answer.iter().map(|last| now - *last < dead_after).collect();
                for (index, address) in configured.iter().enumerate() {
                    if !live[index] {
                        control
                            .replace_lost_pageserver(&configured, &live, index, address)
                            .await;
                    }
                }
            }
            tokio::time::sleep(period).await;
        }
    }))
}

impl Control {
    /// Re-places every database placed on the dead pageserver `address` (`configured[index]`) on a live one;
    /// logs what it did and what it could not.
    async fn replace_lost_pageserver(&self, configured: &[String], live: &[bool], index: usize, address: &str) {
        let placements = match self.blocking(|store| store.pageserver_placements()).await {
            Ok(placements) => placements,
            Err(error) => {
                tracing::warn!(?error, "reading the placements to replace a lost pageserver");
                return;
            }
        };
        let on_it = placements.into_iter().filter(|placement| match &placement.pageserver {
            Some(placed) => placed == address,
            None => index == 0,
        });
        for placement in on_it {
            let started = Instant::now();
            let loads = match self.blocking(|store| store.pageserver_loads()).await {
                Ok(loads) => loads,
                Err(error) => {
                    tracing::warn!(?error, "reading the pageservers' loads");
                    return;
                }
            };
            let Some(target) = choose_pageserver(configured, live, &loads).map(|i| configured[i].clone()) else {
                tracing::error!(pageserver = %address, "a pageserver is lost and no other answers; nothing re-placed");
                return;
            };
            let database_id = placement.database_id.clone();
            let _held = self.locked(&database_id).await;
            let id = database_id.clone();
            match self
                .blocking(move |store| store.running_operation_on_database(&id))
                .await
            {
                Ok(None) => {}
                Ok(Some(operation)) => {
                    tracing::info!(database = %database_id, %operation, "a database on a lost pageserver waits for its operation");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(database = %database_id, ?error, "reading the database's operations");
                    continue;
                }
            }
            let tenant = placement.tenant_id;
            if let Err(error) = retry(|| self.backend.attach_tenant_on(&target, tenant, false)).await {
                tracing::warn!(database = %database_id, %tenant, %target, %error, "re-attaching a lost pageserver's tenant failed; next probe");
                continue;
            }
            let (id, from, to) = (database_id.clone(), placement.pageserver.clone(), target.clone());
            match self
                .blocking(move |store| store.move_pageserver(&id, from.as_deref(), &to))
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(database = %database_id, "re-placed meanwhile by another process");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(database = %database_id, ?error, "switching a lost pageserver's database");
                    continue;
                }
            }
            if let Err(error) = self.backend.remember_placement(tenant, &target) {
                tracing::warn!(%tenant, %error, "remembering the placement");
            }
            let repointed = match self.host.set_pageserver(tenant, &target) {
                Ok(repointed) => repointed,
                Err(error) => {
                    tracing::error!(database = %database_id, %error, "re-pointing the computes at the new pageserver");
                    0
                }
            };
            tracing::warn!(
                database = %database_id, %tenant, lost = %address, to = %target, repointed,
                took_ms = started.elapsed().as_millis() as u64,
                "re-placed a lost pageserver's database"
            );
        }
    }
}
