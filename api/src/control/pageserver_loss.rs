//! Serving through the loss of a pageserver (issue 17 item 5): a watch that probes every configured pageserver
//! (`ListTenants`) and, once one has answered none of its probes for `--pageserver-dead-after-ms`, starts a
//! `failover_pageserver` operation for each database placed on it: a durable operation like a move (a row, run by
//! the worker, its lease renewed; resumed after a crash of the API, taken over by the database's compute host on
//! shared metadata), started only while no other operation runs on the database, in the transaction that checks
//! it, so of several API processes judging the pageserver lost exactly one starts it.
//!
//! The work (`failover_pageserver_work`), under the database's lock, each step idempotent:
//! 1. the live pageserver chosen when the operation started (fewest databases) drops any copy of the tenant it
//!    holds (a stale secondary: see the work's comment), then attaches the tenant from the remote as its owner (its
//!    index and small files; layers on first use; its `owner` mark written first) and ingests the WAL past the
//!    remote copy from the safekeepers (which keep it past `remote_consistent_lsn`);
//! 2. the placement is switched, conditionally on the lost one;
//! 3. every compute host re-pointed (`repoint`).
//!
//! A run resumed after a crash starts from 1 if the column still names the lost pageserver, from 3 if it names
//! the target; a column naming a third (moved meanwhile) fails it, nothing done. A failure before the switch (the
//! target down too) fails the operation; the next probe starts another, choosing again among the live ones. The
//! lost pageserver, if it comes back, finds the `owner` mark naming another and never uploads the tenant again
//! (it keeps it as a secondary: `pageserver::remote`). With one pageserver configured, or a dead time of 0,
//! nothing runs.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::{retry, Control};
use crate::error::ApiError;
use crate::faults::Step;
use crate::store::operations::{Action, MovePageserverParams, NewOperation, Operation};
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
    /// Starts a `failover_pageserver` operation for every database placed on the dead pageserver `address`
    /// (`configured[index]`) that no operation runs on, each to the live pageserver with the fewest databases;
    /// logs what it started and what it could not.
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
            let id = database_id.clone();
            match self
                .blocking(move |store| store.running_operation_on_database(&id))
                .await
            {
                Ok(None) => {}
                // Its failover (or another operation) runs; a failover after it ends, if still needed.
                Ok(Some(operation)) => {
                    tracing::debug!(database = %database_id, %operation, "a lost pageserver's database waits for its operation");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(database = %database_id, ?error, "reading the database's operations");
                    continue;
                }
            }
            let Ok(slot) = self.worker.reserve() else {
                tracing::warn!(database = %database_id, "the worker is full; the failover waits for the next probe");
                return;
            };
            let id = database_id.clone();
            let database = match self.blocking(move |store| store.database(&id)).await {
                Ok(Some(database)) => database,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(database = %database_id, ?error, "reading a lost pageserver's database");
                    continue;
                }
            };
            let action = Action::FailoverPageserver(MovePageserverParams {
                from: placement.pageserver.clone(),
                to: target.clone(),
            });
            let started = self
                .blocking(move |store| {
                    store.start_operation_on_idle_database(&NewOperation {
                        project_id: &database.project_id,
                        account_id: &database.account_id,
                        database_id: Some(&database.id),
                        branch_id: None,
                        action: &action,
                    })
                })
                .await;
            match started {
                Ok(Some(operation)) => {
                    tracing::warn!(
                        database = %database_id, lost = %address, to = %target, operation = %operation.id,
                        "a lost pageserver's database is failing over"
                    );
                    slot.submit(operation.id);
                }
                // Another process started one, or an operation began meanwhile.
                Ok(None) => {
                    tracing::debug!(database = %database_id, "a lost pageserver's database waits for its operation")
                }
                Err(error) => tracing::warn!(database = %database_id, ?error, "starting a failover; next probe"),
            }
        }
    }

    /// The `failover_pageserver` work (the module doc's steps), under the database's lock.
    pub(super) async fn failover_pageserver_work(
        &self,
        operation: &Operation,
        params: MovePageserverParams,
    ) -> Result<(), String> {
        let started = Instant::now();
        let database_id = operation.database_id.clone().ok_or("the operation names no database")?;
        let _held = self.locked(&database_id).await;
        let database = self.database_for_work(&database_id).await?;
        let tenant = database.tenant_id;
        let to = params.to.clone();
        let column = self.pageserver_column(&database.id).await.map_err(|e| match e {
            ApiError::NotFound => "the database was deleted".to_owned(),
            e => e.to_string(),
        })?;
        if column.as_deref() != Some(to.as_str()) {
            if column != params.from {
                return Err(format!(
                    "the database moved meanwhile (to {}); nothing done",
                    column.as_deref().unwrap_or("the first pageserver")
                ));
            }
            // A copy `to` holds already is a secondary left from an earlier ownership (a pageserver lost, then
            // back, keeps its tenants so), or this operation's own attach before a crash. Promoted as it is, a
            // secondary's layer map may name remote layers the owner has deleted since (compacted away): the
            // first read or compaction that fetches one fails and poisons the timeline. So it is dropped, and the
            // tenant attached afresh from the remote.
            retry(|| self.backend.detach_tenant_on(&to, tenant))
                .await
                .map_err(|e| format!("dropping the copy the tenant has on {to}: {e} (the placement is unchanged)"))?;
            retry(|| self.backend.attach_tenant_on(&to, tenant, false))
                .await
                .map_err(|e| format!("attaching the tenant on {to}: {e} (the placement is unchanged)"))?;
            self.config.faults.pause_at(Step::FailoverAttached).await;
            let (id, from, target) = (database.id.clone(), params.from.clone(), to.clone());
            let switched = self
                .blocking(move |store| store.move_pageserver(&id, from.as_deref(), &target))
                .await
                .map_err(|e| format!("switching the placement: {e}"))?;
            if !switched {
                return Err("the database's placement changed meanwhile; nothing switched".to_owned());
            }
        }
        let repointed = self.repoint_everywhere(&database.id, tenant, &to).await?;
        tracing::warn!(
            database = %database.id, %tenant, lost = ?params.from, %to, repointed,
            took_ms = started.elapsed().as_millis() as u64,
            "re-placed a lost pageserver's database"
        );
        Ok(())
    }
}
