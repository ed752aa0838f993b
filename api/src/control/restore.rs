//! Restores: a branch moved to a new timeline branched at a point of its history, the old state kept as a
//! branch if asked; the request validated and queued, then the operation's work.

use std::sync::Arc;

use cambium_types::{Lsn, TimelineId};
use compute::host::BranchTarget;

use super::resolution::resolution_reads;
use super::{random_u128, retry, Control, PointInTime, PG_USER};
use crate::error::ApiError;
use crate::stages;
use crate::store::audit;
use crate::store::databases::{Branch, Database, DatabaseStatus, RestoreChange, TimelineRow};
use crate::store::operations::{Action, NewOperation, Operation, RestoreParams};
use crate::store::webhooks::WebhookEvent;
use crate::store::{new_id, AccountId, StoreError};

/// Which of the two moves of a branch onto a new timeline an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Move {
    /// `restore_branch`: to a point of its own history.
    Restore,
    /// `reset_branch`: to its parent's latest state (its `parent_lsn` moves there).
    Reset,
}

impl Move {
    /// What a refusal calls it.
    fn noun(self) -> &'static str {
        match self {
            Move::Restore => "restore",
            Move::Reset => "reset",
        }
    }
}

impl Control {
    /// Validates a restore of `branch` to `point` and starts its `restore_branch` operation.
    pub async fn restore_branch(
        self: &Arc<Self>,
        account: &AccountId,
        id: &str,
        point: PointInTime,
        preserve: bool,
    ) -> Result<Operation, ApiError> {
        // The branch and what resolving its point reads, in one store call.
        let (account_id, branch_id) = (account.clone(), id.to_owned());
        let (branch, database, reads) = self
            .read(move |store| {
                let Some((branch, database)) = store.get_branch(&account_id, &branch_id)? else {
                    return Ok(None);
                };
                let reads = resolution_reads(store, &database.id, branch.timeline_id)?;
                Ok(Some((branch, database, reads)))
            })
            .await?
            .ok_or(ApiError::NotFound)?;
        stages::mark("read_branch");
        check_movable(&branch, &database, Move::Restore)?;
        let (holder, lsn) = self.resolve_read(&database, &branch, &point, reads).await?;
        stages::mark("resolve");
        self.start_move(account, &branch, (holder.timeline_id, lsn), preserve, Move::Restore)
            .await
    }

    /// Validates a reset of `branch` to its parent's latest state and starts its `reset_branch` operation: same
    /// id, name and connection string, the parent's data as of now; the state before is kept as a branch
    /// `<name>_before_reset_<time>` if `preserve`.
    pub async fn reset_branch(
        self: &Arc<Self>,
        account: &AccountId,
        id: &str,
        preserve: bool,
    ) -> Result<Operation, ApiError> {
        let (branch, database) = self.get_branch(account, id).await?;
        check_movable(&branch, &database, Move::Reset)?;
        let parent_id = branch.parent_branch_id.clone().ok_or_else(|| {
            ApiError::Unprocessable(format!(
                "branch {} ({:?}) has no parent to reset from: it is the database's first branch",
                branch.id, branch.name
            ))
        })?;
        let (parent, _) = self.get_branch(account, &parent_id).await?;
        let (holder, lsn) = self.resolve(&database, &parent, &PointInTime::Latest).await?;
        self.start_move(account, &branch, (holder.timeline_id, lsn), preserve, Move::Reset)
            .await
    }

    /// Queues the operation moving `branch` onto a new timeline branched from `source` (a timeline and an LSN on
    /// it): the row written under the database's lock, after the branch is read again there (its protection and
    /// timeline as of now) and the branch quota checked if a branch is kept.
    async fn start_move(
        self: &Arc<Self>,
        account: &AccountId,
        branch: &Branch,
        source: (TimelineId, Lsn),
        preserve: bool,
        kind: Move,
    ) -> Result<Operation, ApiError> {
        let now = jiff::Timestamp::now();
        let now_ms = u64::try_from(now.as_millisecond()).unwrap_or(0);
        let slot = self.worker.reserve()?;
        // The quota's count and the operation's row under the lock, so branch creations and other restores
        // count this one.
        let _held = self.locked(&branch.database_id).await;
        stages::mark("lock");
        // The branch again, and the quota's counts if a branch is kept, in one store call. An operation already
        // running on the branch is refused here, before the storage is asked for a timeline (the row's insert
        // checks again, in its transaction).
        let (account_id, branch_id) = (account.clone(), branch.id.clone());
        let (branch, database, counts) = self
            .read(move |store| {
                let Some((branch, database)) = store.get_branch(&account_id, &branch_id)? else {
                    return Ok(None);
                };
                if let Some(running) = store.running_operation_on_branch(&branch.id)? {
                    return Err(StoreError::Conflict(format!(
                        "operation {running} is running on this branch"
                    )));
                }
                let counts = if preserve {
                    Some((
                        store.branch_count(&database.id)?,
                        super::branches::restores_keeping_a_branch(store, &database.id)?,
                    ))
                } else {
                    None
                };
                Ok(Some((branch, database, counts)))
            })
            .await?
            .ok_or(ApiError::NotFound)?;
        stages::mark("read_branch_locked");
        check_movable(&branch, &database, kind)?;
        let params = RestoreParams {
            branch_id: branch.id.clone(),
            old_timeline_id: branch.timeline_id,
            source_timeline_id: source.0,
            target_lsn: source.1,
            new_timeline_id: TimelineId(random_u128()),
            preserved_name: preserve.then(|| {
                format!(
                    "{}_before_{}_{}",
                    branch.name,
                    kind.noun(),
                    now.strftime("%Y%m%dT%H%M%SZ")
                )
            }),
            preserved_id: new_id("br_", now_ms),
        };
        let new_timeline_id = params.new_timeline_id;
        let action = match kind {
            Move::Restore => Action::RestoreBranch(params),
            Move::Reset => Action::ResetBranch(params),
        };
        if let Some((count, pending)) = counts {
            self.refuse_over_branch_quota(count, pending)
                .map_err(|error| match error {
                    ApiError::QuotaExceeded(message) => ApiError::QuotaExceeded(format!(
                        "{message} (or {} with \"preserve\": false, which keeps no branch)",
                        kind.noun()
                    )),
                    other => other,
                })?;
            stages::mark("read_quota");
        }
        let (account, project_id, database_id, branch_id) = (
            account.clone(),
            database.project_id.clone(),
            database.id.clone(),
            branch.id.clone(),
        );
        // The new timeline on the storage at once with the operation's row, under the database's lock: the request
        // waits for the slower of the two flushes, and the work does not make it again. Until the row is written
        // the lock keeps the reconciler from judging the timeline an orphan; after, the running operation does
        // (`reconcile`). If the row is not written, the timeline is an orphan the reconciler deletes; if the
        // storage failed, the work makes it (with retries), as before.
        let new_timeline = TimelineRow {
            timeline_id: new_timeline_id,
            ancestor_timeline_id: Some(source.0),
            start_lsn: source.1,
        };
        let set = self
            .set_for_new_timeline(&database.id, new_timeline.timeline_id)
            .await?;
        stages::mark("safekeeper_set");
        // The call's audit entry (202) goes in the operation's own transaction: one metadata flush, not two.
        let audit = audit::claim(202);
        let entry = audit.as_ref().map(|claim| claim.entry().clone());
        let write_row = async {
            let began = std::time::Instant::now();
            let written = self
                .blocking(move |store| {
                    store.start_operation_audited(
                        &NewOperation {
                            project_id: &project_id,
                            account_id: &account,
                            database_id: Some(&database_id),
                            branch_id: Some(&branch_id),
                            action: &action,
                        },
                        entry.as_ref(),
                    )
                })
                .await;
            stages::record("metadata_write", began.elapsed());
            written
        };
        let make_storage = async {
            let began = std::time::Instant::now();
            let stored = self
                .backend
                .create_timeline(database.tenant_id, &new_timeline, &set)
                .await;
            stages::record("storage", began.elapsed());
            stored
        };
        let (operation, stored) = tokio::join!(write_row, make_storage);
        stages::mark("write_operation");
        let operation = operation?;
        if let Some(audit) = audit {
            audit.committed();
        }
        match stored {
            Ok(()) => {
                let mut made = self.restore_storage_made.lock();
                if made.len() >= super::RESTORE_STORAGE_MADE_MAX {
                    made.clear();
                }
                made.insert(new_timeline.timeline_id);
            }
            Err(error) => {
                tracing::info!(operation = %operation.id, %error, "a restore's timeline was not made with its request; its work makes it")
            }
        }
        slot.submit(operation.id.clone());
        Ok(operation)
    }

    /// The `restore_branch` and `reset_branch` work: the new timeline at the point, the rows, then the compute.
    ///
    /// The outcome is that of the rows' change (one transaction): before it, a failure leaves the branch as it
    /// was and the operation `failed` (a new restore may be asked); after it, the restore has happened, and the
    /// compute steps that follow are best effort, logged, never a failure: a branch whose store did not start
    /// stays defined on its new timeline and starts with its next session. So `failed` never hides an applied
    /// restore (whose retry would keep the old state a second time). A run resumed after a crash redoes every
    /// step: the timeline creation and the rows' change are idempotent.
    pub(super) async fn restore_work(
        &self,
        operation: &Operation,
        params: RestoreParams,
        kind: Move,
    ) -> Result<(), String> {
        let (old_timeline_id, source, new_timeline_id, lsn) = (
            params.old_timeline_id,
            params.source_timeline_id,
            params.new_timeline_id,
            params.target_lsn,
        );
        let database_id = operation.database_id.clone().ok_or("the operation names no database")?;
        let _held = self.locked(&database_id).await;
        stages::mark("lock");
        let database = self.database_for_work(&database_id).await?;
        stages::mark("read_database");
        let new_timeline = TimelineRow {
            timeline_id: new_timeline_id,
            ancestor_timeline_id: Some(source),
            start_lsn: lsn,
        };
        let set = self
            .set_for_new_timeline(&database.id, new_timeline.timeline_id)
            .await
            .map_err(|e| format!("choosing the safekeepers: {e:?}"))?;
        stages::mark("safekeeper_set");
        // Made by the request (in this process) unless it failed there or this run resumes after a restart.
        let made = self.restore_storage_made.lock().remove(&new_timeline_id);
        if !made {
            retry(|| self.backend.create_timeline(database.tenant_id, &new_timeline, &set)).await?;
        }
        stages::mark("storage");
        let change = RestoreChange {
            branch_id: params.branch_id.clone(),
            old_timeline_id,
            new_timeline,
            preserved_name: params.preserved_name.clone(),
            preserved_id: params.preserved_id.clone(),
            new_parent_lsn: (kind == Move::Reset).then_some(lsn),
        };
        let preserved = self
            .blocking(move |store| store.apply_restore(&change))
            .await
            .map_err(|e| e.to_string())?;
        stages::mark("apply_restore");
        // Applied: from here on the operation finishes.
        let target = BranchTarget {
            tenant_id: database.tenant_id,
            timeline_id: new_timeline_id,
            start_lsn: lsn,
            safekeepers: set,
        };
        if let Err(error) = self
            .serve_restored(&database, &params.branch_id, target, made, preserved.as_ref())
            .await
        {
            tracing::warn!(database = %database.id, branch = %params.branch_id, %error, "a restored branch is not started yet; its next session starts it");
        }
        stages::mark("define");
        if params.preserved_name.is_none() {
            // The old timeline's deletion is cleanup, not the restore: it runs after the operation ends.
            self.sweep_later(&database);
        }
        if kind == Move::Restore {
            let id = params.branch_id.clone();
            match self.read(move |store| store.branch(&id)).await {
                Ok(Some(restored)) => {
                    self.emit_branch(WebhookEvent::BranchRestored, restored, &database)
                        .await
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(branch = %params.branch_id, ?error, "a restored branch could not be read")
                }
            }
        }
        stages::mark("webhook_event");
        Ok(())
    }

    /// After a restore's rows changed: the branch's sessions move to its new timeline (its old store is closed,
    /// new sessions get the new one), and the preserved branch, if one was made, is served or refused as the
    /// database's status says. `made_here`: the new timeline was made by the restore's request in this process
    /// (not by a run resumed after a restart), so no store of it can have started: its first store may read
    /// before its election ends ([`compute::host::ComputeHost::define_new_branch`]).
    async fn serve_restored(
        &self,
        database: &Database,
        branch_id: &str,
        target: BranchTarget,
        made_here: bool,
        preserved: Option<&Branch>,
    ) -> Result<(), String> {
        let define = |name: &str, target: BranchTarget| match made_here {
            true => self.host.define_new_branch(name, target),
            false => self.host.define(name, target),
        };
        if let Some(preserved) = preserved {
            self.host
                .set_credentials_verifier(&preserved.id, PG_USER, Arc::clone(&database.password_verifier));
        }
        if !database.serves_sessions() {
            if let Some(preserved) = preserved {
                self.host
                    .refuse(&preserved.id, &format!("database {} is not active", database.id));
            }
            return Ok(());
        }
        if database.status != DatabaseStatus::Active {
            // Suspended for idleness: re-pointed but not started (it stays parked until a session wakes it).
            define(branch_id, target).map_err(|e| format!("serving the restored branch: {e}"))?;
            if let Some(preserved) = preserved {
                let preserved_target = self.target(database, preserved).await.map_err(|e| e.to_string())?;
                self.host
                    .define(&preserved.id, preserved_target)
                    .map_err(|e| format!("serving the preserved branch: {e}"))?;
            }
            return Ok(());
        }
        // The branch first: that closes its old store, which wrote the old timeline the preserved branch gets.
        let attached = if self.config.faults.restore_attach_fails {
            // As a failed start leaves it: defined on the new timeline, not started.
            self.host
                .define(branch_id, target)
                .map_err(|e| format!("starting the restored branch's compute: {e}"))
                .and(Err(
                    "starting the restored branch's compute: injected failure".to_owned()
                ))
        } else {
            // Not `attach`: the operation does not wait for the new store's election (two control file writes
            // on each safekeeper, in turn). Re-pointing closes the old store now; the new one starts in the
            // background at once (or with the first session under `--lazy-branch-stores`), as a new branch's.
            define(branch_id, target).map_err(|e| format!("serving the restored branch: {e}"))
        };
        if let Some(preserved) = preserved {
            let preserved_target = self.target(database, preserved).await.map_err(|e| e.to_string())?;
            self.host
                .define(&preserved.id, preserved_target)
                .map_err(|e| format!("serving the preserved branch: {e}"))?;
        }
        attached
    }
}

/// 409 if `branch` cannot be moved by a restore or reset now: it is protected, or its database is not made.
fn check_movable(branch: &Branch, database: &Database, kind: Move) -> Result<(), ApiError> {
    if database.status == DatabaseStatus::Provisioning || database.status == DatabaseStatus::Failed {
        return Err(ApiError::Conflict(format!(
            "the database is {}",
            database.status.as_str()
        )));
    }
    Control::refuse_if_protected(branch, kind.noun())
}
