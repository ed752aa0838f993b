//! Branch expiry: a sweep, every [`ExpiryConfig::period_ms`], hands each branch whose `expires_at` has passed to
//! the worker as a `delete_branch` operation, which deletes it unless something forbids it.
//!
//! What expiry never deletes: a protected branch, the database's default branch, and a branch with children
//! (deleting it would delete them, and they did not expire). Such a branch is kept, its `expires_at` cleared (so
//! the sweep does not try again every period), and its `delete_branch` operation ends `failed` with the reason,
//! which is also logged. The expiry lives in the metadata and the operation is a row, so both survive a restart:
//! a branch that expired while the service was down is deleted by the first sweep after the start, and a
//! deletion cut short is resumed by the worker like any operation.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Control;
use crate::store::databases::{protection_refuses, Branch, Database};
use crate::store::operations::{Action, DeleteBranchParams, NewOperation, Operation};
use crate::store::webhooks::WebhookEvent;
use crate::store::{timestamp_text, StoreError};

/// The default wait between sweeps.
pub const EXPIRY_PERIOD_MS_DEFAULT: u64 = 5_000;
/// Expired branches handed to the worker by one sweep, at most (the next sweep takes the rest).
const EXPIRED_PER_SWEEP_MAX: usize = 64;

/// How the expiry sweep runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryConfig {
    /// The wait between sweeps, in milliseconds: how late after its `expires_at` a branch may be deleted.
    pub period_ms: u64,
}

impl Default for ExpiryConfig {
    fn default() -> ExpiryConfig {
        ExpiryConfig {
            period_ms: EXPIRY_PERIOD_MS_DEFAULT,
        }
    }
}

/// Runs the sweep at the start and every `config.period_ms` until `control` is dropped or the task aborted.
pub fn spawn(control: &Arc<Control>, config: ExpiryConfig) -> tokio::task::JoinHandle<()> {
    let control: Weak<Control> = Arc::downgrade(control);
    tokio::spawn(async move {
        loop {
            {
                let Some(control) = control.upgrade() else {
                    return;
                };
                control.expire_branches().await;
            }
            tokio::time::sleep(Duration::from_millis(config.period_ms)).await;
        }
    })
}

impl Control {
    /// One sweep: a `delete_branch` operation for each expired branch (at most [`EXPIRED_PER_SWEEP_MAX`]) on
    /// which no operation runs; returns how many were queued. A full worker queue ends the sweep early.
    pub async fn expire_branches(self: &Arc<Self>) -> usize {
        let now = timestamp_text(jiff::Timestamp::now());
        let expired = match self
            .blocking(move |store| store.expired_branches(&now, EXPIRED_PER_SWEEP_MAX))
            .await
        {
            Ok(expired) => expired,
            Err(error) => {
                tracing::warn!(?error, "the expiry sweep could not read the branches; next sweep");
                return 0;
            }
        };
        let mut queued = 0;
        for branch in expired {
            if !self.is_placed_here(&branch.database_id) {
                // Its database's host deletes it (its compute serves the branch).
                continue;
            }
            let Ok(slot) = self.worker.reserve() else {
                break;
            };
            let Some(expires_at) = branch.expires_at.clone() else {
                continue;
            };
            let database_id = branch.database_id.clone();
            let started = self
                .blocking(move |store| {
                    let Some(database) = store.database(&database_id)? else {
                        return Ok(None);
                    };
                    if store.running_operation_on_database(&database.id)?.is_some() {
                        // Its deletion from an earlier sweep, or another change: the next sweep looks again.
                        return Ok(None);
                    }
                    let action = Action::DeleteBranch(DeleteBranchParams {
                        branch_id: branch.id.clone(),
                        expires_at,
                    });
                    match store.start_operation(&NewOperation {
                        project_id: &database.project_id,
                        account_id: &database.account_id,
                        database_id: Some(&database.id),
                        branch_id: Some(&branch.id),
                        action: &action,
                    }) {
                        Ok(operation) => Ok(Some(operation)),
                        Err(StoreError::Conflict(_)) => Ok(None),
                        Err(error) => Err(error),
                    }
                })
                .await;
            match started {
                Ok(Some(operation)) => {
                    slot.submit(operation.id);
                    queued += 1;
                }
                Ok(None) => {}
                Err(error) => tracing::warn!(?error, "an expired branch's deletion could not be queued"),
            }
        }
        queued
    }

    /// The `delete_branch` work for an expired branch, under its database's lock: deleted (with its compute and
    /// the timelines nothing needs any more), or kept with the reason as `Err` when it is protected, the default
    /// branch, or has children (its expiry is then cleared), or when another operation runs on the database (the
    /// next sweep tries again). A branch already gone, or a database deleted meanwhile, is a success.
    pub(super) async fn delete_expired_work(
        &self,
        operation: &Operation,
        params: DeleteBranchParams,
    ) -> Result<(), String> {
        let database_id = operation.database_id.clone().ok_or("the operation names no database")?;
        let _held = self.locked(&database_id).await;
        let (id, branch_id) = (database_id.clone(), params.branch_id.clone());
        let (database, branch, children) = self
            .blocking(move |store| {
                let children = store.children_of(&branch_id)?;
                Ok((store.database(&id)?, store.branch(&branch_id)?, children))
            })
            .await
            .map_err(|e| e.to_string())?;
        let (Some(database), Some(branch)) = (database, branch) else {
            return Ok(());
        };
        if branch.expires_at.as_deref() != Some(params.expires_at.as_str()) {
            return Err(format!(
                "branch {} ({:?}) was not deleted: its expires_at changed to {} after it expired",
                branch.id,
                branch.name,
                branch.expires_at.as_deref().unwrap_or("none")
            ));
        }
        if let Some(reason) = expiry_refusal(&branch, &database, &children) {
            tracing::warn!(branch = %branch.id, database = %database.id, %reason, "an expired branch is kept");
            let (id, expires_at) = (branch.id.clone(), params.expires_at.clone());
            self.blocking(move |store| store.clear_expiry(&id, &expires_at))
                .await
                .map_err(|e| e.to_string())?;
            return Err(reason);
        }
        let (id, operation_id) = (database.id.clone(), operation.id.clone());
        if let Some(running) = self
            .blocking(move |store| store.other_running_operation_on_database(&id, &operation_id))
            .await
            .map_err(|e| e.to_string())?
        {
            return Err(format!(
                "operation {running} is running on database {}; the next expiry sweep tries again",
                database.id
            ));
        }
        let branch_id = branch.id.clone();
        let deleted = self
            .blocking(move |store| store.delete_branch_subtree(&branch_id))
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(branch = %branch.id, name = %branch.name, database = %database.id, expires_at = %params.expires_at, "an expired branch was deleted");
        self.forget_branches(&database, &deleted).await;
        for gone in deleted {
            let event = if gone.id == branch.id {
                WebhookEvent::BranchExpired
            } else {
                WebhookEvent::BranchDeleted
            };
            self.emit_branch(event, gone, &database).await;
        }
        Ok(())
    }
}

/// Why expiry must keep `branch` (of `database`, with `children`), if it must.
fn expiry_refusal(branch: &Branch, database: &Database, children: &[Branch]) -> Option<String> {
    if branch.protected {
        return Some(protection_refuses(branch, "expiry"));
    }
    if database.default_branch_id == branch.id {
        return Some(format!(
            "branch {} ({:?}) is the database's default branch, which expiry never deletes",
            branch.id, branch.name
        ));
    }
    if !children.is_empty() {
        let ids: Vec<&str> = children.iter().map(|c| c.id.as_str()).collect();
        return Some(format!(
            "branch {} ({:?}) has {} child branches ({}), which expiry never deletes: delete them first or set a \
             new expires_at",
            branch.id,
            branch.name,
            children.len(),
            ids.join(", ")
        ));
    }
    None
}
