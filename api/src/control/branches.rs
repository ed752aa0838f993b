//! Branches: creation at a point of a parent, rename and promotion, deletion of a subtree, and the sweep of
//! the timelines nothing needs any more.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use cambium_types::TimelineId;
use compute::host::BranchTarget;

use super::resolution::{resolution_reads, ResolutionReads};
use super::{check_descriptors, random_u128, Control, PointInTime, PG_USER};
use crate::backend::CopyState;
use crate::error::ApiError;
use crate::faults::{self, Step};
use crate::stages;
use crate::store::audit;
use crate::store::databases::{protection_refuses, Branch, BranchUpdate, Database, DatabaseStatus, TimelineRow};
use crate::store::labels::Labels;
use crate::store::operations::Action;
use crate::store::webhooks::WebhookEvent;
use crate::store::{new_id, timestamp_text, AccountId, Store, StoreError};

/// How far ahead a branch's `expires_at` may be: a preview branch lives for days or weeks, and a year bounds how
/// long a forgotten one holds its storage.
pub const EXPIRY_AHEAD_MAX_DAYS: i64 = 365;

/// What a new branch is: its name and parent point, and how it is kept.
#[derive(Debug, Clone)]
pub struct NewBranch {
    /// Its name, unique in the database.
    pub name: String,
    /// The branch it forks (the database's default branch when `None`).
    pub parent_id: Option<String>,
    /// Where in the parent's history.
    pub point: PointInTime,
    /// Refuse deletion, restore, reset and expiry.
    pub protected: bool,
    /// When the expiry sweep deletes it.
    pub expires_at: Option<jiff::Timestamp>,
    /// Its labels (checked by the caller).
    pub labels: Labels,
}

/// What an update of a branch asks; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct BranchChanges {
    /// A new name.
    pub name: Option<String>,
    /// `Some(true)` promotes it to the database's default branch (`Some(false)` on the default is refused).
    pub is_default: Option<bool>,
    /// Protect or unprotect it.
    pub protected: Option<bool>,
    /// A new expiry; `Some(None)` clears it.
    pub expires_at: Option<Option<jiff::Timestamp>>,
    /// New labels, replacing all (checked by the caller).
    pub labels: Option<Labels>,
}

/// What a branch creation reads from the metadata ([`creation_reads`]), in one store call.
struct CreationReads {
    /// The database.
    database: Database,
    /// The parent asked for, or the database's default branch.
    parent_id: String,
    /// The parent, if it is a branch of the database.
    parent: Option<Branch>,
    /// The database's branches.
    branches: i64,
    /// Restores and resets running on the database (each may keep a branch).
    restores_keeping: i64,
    /// What resolving the parent's point needs (with the parent).
    resolution: Option<ResolutionReads>,
}

/// Running restores and resets on database `database_id`, each of which may keep a branch.
pub(super) fn restores_keeping_a_branch(store: &Store, database_id: &str) -> Result<i64, StoreError> {
    Ok(
        store.running_operations_on_database(database_id, Action::RESTORE_BRANCH)?
            + store.running_operations_on_database(database_id, Action::RESET_BRANCH)?,
    )
}

/// What creating a branch of `account`'s database `database_id` reads, in one store call; `None` if there is no
/// such database.
fn creation_reads(
    store: &Store,
    account: &AccountId,
    database_id: &str,
    parent_id: Option<String>,
) -> Result<Option<CreationReads>, StoreError> {
    let Some(database) = store.get_database(account, database_id)? else {
        return Ok(None);
    };
    let parent_id = parent_id.unwrap_or_else(|| database.default_branch_id.clone());
    let parent = store
        .get_branch(account, &parent_id)?
        .map(|(parent, _)| parent)
        .filter(|parent| parent.database_id == database.id);
    let resolution = match &parent {
        Some(parent) => Some(resolution_reads(store, &database.id, parent.timeline_id)?),
        None => None,
    };
    Ok(Some(CreationReads {
        branches: store.branch_count(&database.id)?,
        restores_keeping: restores_keeping_a_branch(store, &database.id)?,
        database,
        parent_id,
        parent,
        resolution,
    }))
}

/// `expires_at` as stored, if it is in the future and at most [`EXPIRY_AHEAD_MAX_DAYS`] ahead (else 422).
pub(crate) fn checked_expiry(expires_at: jiff::Timestamp) -> Result<String, ApiError> {
    let now = jiff::Timestamp::now();
    if expires_at <= now {
        return Err(ApiError::Unprocessable(format!(
            "`expires_at` {expires_at} is not in the future (it is {now} now)"
        )));
    }
    let max = now
        .checked_add(jiff::SignedDuration::from_hours(EXPIRY_AHEAD_MAX_DAYS * 24))
        .map_err(|_| ApiError::Internal)?;
    if expires_at > max {
        return Err(ApiError::Unprocessable(format!(
            "`expires_at` {expires_at} is more than {EXPIRY_AHEAD_MAX_DAYS} days ahead"
        )));
    }
    Ok(timestamp_text(expires_at))
}

impl Control {
    /// Creates branch `name` of `parent` at `point`: a timeline on the storage, then the row, then the compute.
    ///
    /// The database and the parent (`parent_id`, or the default branch) are read under the database's lock, which
    /// a restore holds while it moves a branch to a new timeline: the parent's timeline and its latest LSN are
    /// then of one history. Returns the branch with its database.
    pub async fn create_branch(
        &self,
        account: &AccountId,
        database_id: &str,
        new: NewBranch,
    ) -> Result<(Branch, Database), ApiError> {
        let expires_at = new.expires_at.map(checked_expiry).transpose()?;
        faults::pause(self.config.faults.branch_create_pause_ms).await;
        stages::mark("branch_validate");
        let _held = self.locked(database_id).await;
        stages::mark("lock");
        // Everything the creation reads from the metadata, in one store call (one hand-off to the blocking pool,
        // not one per read): the database, the parent, the quota's counts, the timelines and the parent's set.
        let (account_id, id, wanted_parent) = (account.clone(), database_id.to_owned(), new.parent_id.clone());
        let reads = self
            .read(move |store| creation_reads(store, &account_id, &id, wanted_parent.clone()))
            .await?
            .ok_or(ApiError::NotFound)?;
        stages::mark("read_metadata");
        let CreationReads {
            database,
            parent_id,
            parent,
            branches,
            restores_keeping,
            resolution,
        } = reads;
        match database.status {
            status @ (DatabaseStatus::Provisioning | DatabaseStatus::Failed) => {
                return Err(ApiError::Conflict(format!("the database is {}", status.as_str())))
            }
            DatabaseStatus::Active | DatabaseStatus::Suspended => {}
        }
        let (Some(parent), Some(resolution)) = (parent, resolution) else {
            return Err(ApiError::Unprocessable(format!(
                "`parent_branch_id` {parent_id:?} is not a branch of this database"
            )));
        };
        let database = &database;
        let parent = &parent;
        // Under the lock, which every change of the database's branches holds: the count cannot move.
        self.refuse_over_branch_quota(branches, restores_keeping)?;
        check_descriptors()?;
        stages::mark("descriptors");
        let (holder, lsn) = self.resolve_read(database, parent, &new.point, resolution).await?;
        stages::mark("resolve");
        let timeline = TimelineRow {
            timeline_id: TimelineId(random_u128()),
            ancestor_timeline_id: Some(holder.timeline_id),
            start_lsn: lsn,
        };
        // The child's set may differ from its parent's: its history below the branch point is read from the
        // pageserver, never from the parent's safekeepers.
        let set = self.set_for_new_timeline(&database.id, timeline.timeline_id).await?;
        stages::mark("safekeeper_set");
        let now = jiff::Timestamp::now();
        let branch = Branch {
            id: new_id("br_", u64::try_from(now.as_millisecond()).unwrap_or(0)),
            database_id: database.id.clone(),
            name: new.name,
            parent_branch_id: Some(parent.id.clone()),
            parent_lsn: Some(lsn),
            timeline_id: timeline.timeline_id,
            created_at: timestamp_text(now),
            protected: new.protected,
            expires_at,
            labels: new.labels,
        };
        // The row and the storage at once: the reply waits for the slower of the two flushes, not their sum. The
        // row is recorded storage pending: until the storage is known to hold the timeline, whatever serves the
        // branch settles it first (`complete_pending_creations`); nothing serves it meanwhile, as every path
        // that serves a database's branches holds the database's lock, which this holds until the end.
        let (row, timeline_row) = (branch.clone(), timeline);
        // The call's audit entry (201) goes in the row's own transaction: one metadata flush, not two.
        let audit = audit::claim(201);
        let entry = audit.as_ref().map(|claim| claim.entry().clone());
        // The `branch.created` deliveries go in the row's transaction, held until the storage is known to hold
        // the timeline (`events`).
        let event_body = self.branch_event_body(branch.clone(), database);
        let confirmed = std::mem::take(&mut *self.creations_confirmed.lock());
        let confirming = confirmed.clone();
        let write_row = async {
            faults::pause(self.config.faults.branch_row_pause_ms).await;
            let began = Instant::now();
            let inserted = self
                .blocking(move |store| {
                    store.insert_branch(&row, &timeline_row, entry.as_ref(), event_body.as_deref(), &confirming)
                })
                .await;
            stages::record("metadata_write", began.elapsed());
            inserted
        };
        let make_storage = async {
            self.config.faults.pause_at(Step::BranchTimeline).await;
            let began = Instant::now();
            let stored = self.backend.create_timeline(database.tenant_id, &timeline, &set).await;
            stages::record("storage", began.elapsed());
            stored
        };
        stages::mark("before_storage");
        let (inserted, stored) = tokio::join!(write_row, make_storage);
        stages::mark("metadata_and_storage");
        let inserted = match (inserted, stored) {
            (Ok(inserted), Ok(())) => inserted,
            (Err(error), _) => {
                self.creations_confirmed.lock().extend(confirmed);
                // Nothing points at the new timeline: take it back.
                if let Err(e) = self
                    .backend
                    .delete_timeline(database.tenant_id, timeline.timeline_id)
                    .await
                {
                    tracing::warn!(%e, "an unused timeline could not be deleted");
                }
                return Err(error);
            }
            (Ok(inserted), Err(error)) => {
                // The row names a timeline the storage may lack: take the row back, then whatever the storage
                // made. A crash before that leaves the row storage pending, settled before it is served.
                let (branch_id, timeline_id) = (branch.id.clone(), timeline.timeline_id);
                let audit_id = inserted.audit.map(|entry| entry.id);
                match self
                    .blocking(move |store| store.undo_branch_creation(&branch_id, timeline_id, audit_id.as_deref()))
                    .await
                {
                    Ok(()) => {
                        if let Err(e) = self
                            .backend
                            .delete_timeline(database.tenant_id, timeline.timeline_id)
                            .await
                        {
                            tracing::warn!(%e, "an unused timeline could not be deleted");
                        }
                    }
                    Err(e) => {
                        tracing::error!(?e, branch = %branch.id, "a branch whose storage failed could not be taken back; it is settled before it is served")
                    }
                }
                return Err(error.into());
            }
        };
        if inserted.released > 0 {
            // Earlier creations confirmed with this row released their held deliveries: due now, not at the
            // worker's next look.
            self.webhook_wake.notify_one();
        }
        if inserted.held > 0 {
            // Deliveries are held for this creation: it is confirmed now, which releases them. If that fails it is
            // confirmed later (with the next creation, or before the branch is next served), and they with it.
            let id = timeline.timeline_id;
            match self.blocking(move |store| store.confirm_timelines(&[id])).await {
                Ok(_) => self.webhook_wake.notify_one(),
                Err(error) => {
                    tracing::warn!(?error, branch = %branch.id, "a branch creation could not be confirmed yet; its events wait for that");
                    self.creations_confirmed.lock().push(id);
                }
            }
        } else {
            self.creations_confirmed.lock().push(timeline.timeline_id);
        }
        if let (Some(_), Some(audit)) = (inserted.audit, audit) {
            audit.committed();
        }
        // The status cannot change under the lock (a wake from idleness can, but the names are served either way).
        let served = database.serves_sessions();
        // Served or refused, the branch checks the database's password (see `refuse`).
        self.host
            .set_credentials_verifier(&branch.id, PG_USER, Arc::clone(&database.password_verifier));
        stages::mark("after_storage");
        if served {
            let target = BranchTarget {
                tenant_id: database.tenant_id,
                timeline_id: timeline.timeline_id,
                start_lsn: lsn,
                safekeepers: set,
            };
            // The timeline was made by this request: its store may read before its election ends.
            // Its sessions start from the parent's catalog while the parent is served on the timeline it was
            // made from.
            if let Err(error) = self
                .host
                .define_new_branch_of(&branch.id, target, &parent.id, holder.timeline_id)
            {
                tracing::error!(%error, branch = %branch.id, "the new branch could not be served");
            }
        } else {
            self.host
                .refuse(&branch.id, &format!("database {} is not active", database.id));
        }
        stages::mark("define");
        Ok((branch, database.clone()))
    }

    /// Settles the creations of `database`'s timelines recorded storage pending (a branch's row written at once
    /// with its storage, then a crash, or a creation whose confirmation is not recorded yet). Called under the
    /// database's lock by whatever serves its branches, before it does. A creation is acknowledged only once the
    /// pageserver and a majority of the timeline's safekeepers made it, so the pageserver is asked which timelines
    /// it holds (one call) and the safekeepers for their copies: a pending timeline on the pageserver and a
    /// majority may have been acknowledged and is kept (recorded as there; a missing copy is the reconciler's to
    /// rebuild); one missing from the pageserver or from a majority was never acknowledged: its branch is removed
    /// (the row, the timeline's row, the creation's audit entry) and whatever the storage made deleted, as the
    /// failed request would have. Returns the timelines left pending (the storage did not answer), whose branches
    /// are not served; the next serve tries again.
    pub(super) async fn complete_pending_creations(
        &self,
        database: &Database,
    ) -> Result<HashSet<TimelineId>, ApiError> {
        let database_id = database.id.clone();
        let pending = self
            .blocking(move |store| store.pending_timelines_of(&database_id))
            .await?;
        if pending.is_empty() {
            return Ok(HashSet::new());
        }
        let held: HashSet<TimelineId> = match self.backend.list_timelines(database.tenant_id).await {
            Ok(held) => held.into_iter().map(|(id, _)| id).collect(),
            Err(error) => {
                tracing::warn!(database = %database.id, %error, "the pageserver's timelines could not be listed; branches being created are not served yet");
                return Ok(pending.into_iter().collect());
            }
        };
        let database_id = database.id.clone();
        let (rows, branches) = self
            .blocking(move |store| Ok((store.timelines_of(&database_id)?, store.branches_of(&database_id)?)))
            .await?;
        let (mut failed, mut done) = (HashSet::new(), Vec::new());
        for id in pending {
            if !rows.iter().any(|row| row.timeline_id == id) {
                continue;
            }
            // Never a creation call here: asked again, the pageserver would wait for the ancestor's branch point
            // (not ingested yet after a restart) and refuse, and a refusal deletes the safekeepers' copies.
            let acknowledged = if held.contains(&id) {
                let set = self.set_of(id).await?;
                // A majority decides: a frozen member is not waited for (its call's timeout would hold every
                // session of the database meanwhile).
                let states = self
                    .backend
                    .copy_states_of_a_majority(database.tenant_id, id, &set)
                    .await;
                let mut present = states
                    .iter()
                    .filter(|(_, state)| matches!(state, CopyState::Served { .. } | CopyState::Broken(_)))
                    .count();
                let lacking: Vec<&String> = states
                    .iter()
                    .filter(|(_, state)| matches!(state, CopyState::Missing))
                    .map(|(address, _)| address)
                    .collect();
                let mut missing = lacking.len();
                if present * 2 <= set.len() && missing * 2 < set.len() && present > 0 && missing > 0 {
                    // Undecided: the creation reached some members, and those that answered without a copy
                    // are no majority. The crash cut the creation's calls before they reached those members:
                    // with at most one member of three failed (the silent one), a member that answers never
                    // lost a copy, and nothing else deletes a copy while its row names it. Finishing the
                    // creation there is what the cut call would have done, and safe though the branch may have
                    // been served and written meanwhile: a fresh copy never voted (it contradicts no promise),
                    // and every commit made while it lacked the timeline is on each member that has it (a
                    // commit needed all of them), from which an election's recovery brings it.
                    let row = rows
                        .iter()
                        .find(|row| row.timeline_id == id)
                        .expect("pending timelines without a row are skipped above");
                    for address in lacking {
                        match self
                            .backend
                            .create_timeline_copy_on(address, database.tenant_id, row)
                            .await
                        {
                            Ok(()) => {
                                tracing::info!(database = %database.id, timeline = %id, safekeeper = %address, "finished a branch creation a crash cut before it reached this safekeeper");
                                present += 1;
                                missing -= 1;
                            }
                            Err(error) => {
                                tracing::warn!(database = %database.id, timeline = %id, safekeeper = %address, %error, "a cut branch creation could not be finished on this safekeeper");
                            }
                        }
                    }
                }
                if present * 2 > set.len() {
                    Some(true)
                } else if missing * 2 >= set.len() {
                    Some(false)
                } else {
                    None
                }
            } else {
                Some(false)
            };
            match acknowledged {
                // Made on the pageserver and a majority: maybe acknowledged, kept (a missing copy is the
                // reconciler's to rebuild).
                Some(true) => done.push(id),
                Some(false) => {
                    let Some(branch) = branches.iter().find(|b| b.timeline_id == id).cloned() else {
                        // No branch on it (a restore's timeline is never pending): an unreferenced row, swept.
                        done.push(id);
                        continue;
                    };
                    let project_id = database.project_id.clone();
                    let removed = branch.clone();
                    self.blocking(move |store| store.undo_unacknowledged_creation(&removed, &project_id))
                        .await?;
                    tracing::warn!(database = %database.id, branch = %branch.id, timeline = %id, "a branch creation cut before its storage was made is taken back");
                    if let Err(error) = self.backend.delete_timeline(database.tenant_id, id).await {
                        tracing::warn!(%error, timeline = %id, "a taken-back branch's timeline could not be deleted; the orphan sweep will");
                    }
                }
                None => {
                    tracing::warn!(database = %database.id, timeline = %id, "a branch's timeline copies could not be counted; its branch is not served yet");
                    failed.insert(id);
                }
            }
        }
        if !done.is_empty() {
            self.creations_confirmed.lock().retain(|id| !done.contains(id));
            if self.blocking(move |store| store.confirm_timelines(&done)).await? > 0 {
                // `branch.created` deliveries held for these creations are due now.
                self.webhook_wake.notify_one();
            }
        }
        Ok(failed)
    }

    /// [`ApiError::QuotaExceeded`] unless a database with `count` branches and `pending` running restores (each
    /// may keep one) may have one more. The counts are read under the database's lock.
    pub(super) fn refuse_over_branch_quota(&self, count: i64, pending: i64) -> Result<(), ApiError> {
        let max = self.config.quotas.branches_per_database_max;
        if count + pending < i64::from(max) {
            return Ok(());
        }
        let pending = if pending > 0 {
            format!(" (and {pending} running restores that each keep one)")
        } else {
            String::new()
        };
        Err(ApiError::QuotaExceeded(format!(
            "the database has {count} branches{pending}, and its quota is {max}: delete one before creating another"
        )))
    }

    /// `account`'s branch `id` with its database.
    pub async fn get_branch(&self, account: &AccountId, id: &str) -> Result<(Branch, Database), ApiError> {
        let (account, id) = (account.clone(), id.to_owned());
        self.blocking(move |store| store.get_branch(&account, &id))
            .await?
            .ok_or(ApiError::NotFound)
    }

    /// Renames, promotes, protects or unprotects a branch, or sets or clears its expiry; all or nothing.
    ///
    /// The default branch cannot expire (it cannot be deleted), so an expiry on it, or a promotion of a branch
    /// that keeps one, is 422.
    pub async fn update_branch(
        &self,
        account: &AccountId,
        id: &str,
        changes: BranchChanges,
    ) -> Result<(Branch, Database), ApiError> {
        let expires_at = match changes.expires_at {
            Some(Some(at)) => Some(Some(checked_expiry(at)?)),
            Some(None) => Some(None),
            None => None,
        };
        let (_, database) = self.get_branch(account, id).await?;
        let _held = self.locked(&database.id).await;
        let (branch, database) = self.get_branch(account, id).await?;
        let is_default = database.default_branch_id == branch.id;
        if changes.is_default == Some(false) && is_default {
            return Err(ApiError::Unprocessable(
                "a database always has a default branch: promote another branch instead".to_owned(),
            ));
        }
        let will_be_default = is_default || changes.is_default == Some(true);
        let will_expire = match &expires_at {
            Some(at) => at.is_some(),
            None => branch.expires_at.is_some(),
        };
        if will_be_default && will_expire {
            return Err(ApiError::Unprocessable(
                "the default branch cannot be deleted, so it cannot expire: clear `expires_at` (null) to promote it"
                    .to_owned(),
            ));
        }
        let update = BranchUpdate {
            name: changes.name,
            protected: changes.protected,
            expires_at,
            promote: changes.is_default == Some(true),
            labels: changes.labels,
        };
        let branch_id = branch.id.clone();
        self.blocking(move |store| store.update_branch(&branch_id, &update))
            .await?;
        let (branch, database) = self.get_branch(account, id).await?;
        if changes.is_default == Some(true) && database.serves_sessions() {
            self.host
                .set_alias(&database.id, &branch.id)
                .map_err(|e| ApiError::Unavailable(e.to_string()))?;
        }
        Ok((branch, database))
    }

    /// 409 naming the protection if `branch` is protected and so refuses `what` (restore, reset).
    pub(super) fn refuse_if_protected(branch: &Branch, what: &str) -> Result<(), ApiError> {
        if branch.protected {
            return Err(ApiError::Conflict(protection_refuses(branch, what)));
        }
        Ok(())
    }

    /// 409 naming the branch if database `database_id` has a protected branch, which refuses the database's
    /// deletion (that would delete the branch). Called under the database's lock.
    pub(super) async fn refuse_if_database_protected(&self, database_id: &str) -> Result<(), ApiError> {
        let id = database_id.to_owned();
        if let Some(branch) = self.blocking(move |store| store.protected_branch(&id)).await? {
            return Err(ApiError::Conflict(format!(
                "database {database_id} has a protected branch, {}",
                protection_refuses(&branch, "deletion with the database")
            )));
        }
        Ok(())
    }

    /// Deletes a branch and its subtree: rows, computes, then the timelines nothing needs any more.
    pub async fn delete_branch(&self, account: &AccountId, id: &str) -> Result<(), ApiError> {
        let (_, database) = self.get_branch(account, id).await?;
        let _held = self.locked(&database.id).await;
        self.refuse_while_operation_runs(&database.id).await?;
        let branch_id = id.to_owned();
        let deleted = self
            .blocking(move |store| store.delete_branch_subtree(&branch_id))
            .await?;
        // A crash from here on leaves timeline rows nothing needs: the reconciler sweeps them as below.
        self.config.faults.pause_at(Step::BranchStorage).await;
        self.forget_branches(&database, &deleted).await;
        for branch in deleted {
            self.emit_branch(WebhookEvent::BranchDeleted, branch, &database).await;
        }
        Ok(())
    }

    /// After `deleted` branches' rows are gone: the compute host forgets them, then the timelines nothing needs
    /// any more are deleted; those left only branched from are retired afterwards, in a task of its own (a seal
    /// may flush a timeline's recent WAL: not on the deletion's reply path).
    pub(super) async fn forget_branches(&self, database: &Database, deleted: &[Branch]) {
        for branch in deleted {
            self.host.detach(&branch.id);
            self.host.clear_refusal(&branch.id);
            self.host.remove_credentials(&branch.id);
        }
        self.delete_unreferenced_timelines(database).await;
        self.sweep_later(database);
    }

    /// [`Control::sweep_timelines`] in a task of its own, under the database's lock (taken once the caller lets
    /// it go), so that the operation that left timelines unreferenced ends without waiting for their deletion
    /// (three storage calls and a metadata commit each). A crash before it or during it leaves rows of
    /// unreferenced timelines, which the reconciler's sweep deletes, as after a crash inside a sweep.
    pub(crate) fn sweep_later(&self, database: &Database) {
        let Some(control) = self.me.upgrade() else {
            return;
        };
        let database = database.clone();
        tokio::spawn(async move {
            let _held = control.locked(&database.id).await;
            control.sweep_timelines(&database).await;
        });
    }

    /// Deletes the timelines of `database` that nothing needs any more, children first, then retires those only
    /// branched from ([`Control::retire_timelines`]); failures are logged.
    pub(crate) async fn sweep_timelines(&self, database: &Database) {
        self.delete_unreferenced_timelines(database).await;
        self.retire_timelines(database).await;
    }

    /// Retires the timelines of `database` that no branch is on and others are branched from: a branch's old
    /// timeline after a restore without `preserve` (without this, a branch restored before every test run
    /// would pile up one timeline per restore on each safekeeper, with its files and its descriptors, and one
    /// WAL stream per timeline on the pageserver). Each is sealed on the pageserver (flushed up to its
    /// children's newest branch point, no WAL followed for it any more); once the pageserver says that is
    /// durable where its recovery finds it, the row is marked retired and the safekeepers' copies deleted. A
    /// copy a safekeeper kept (down, or a crash between the two) is a leftover the reconciler deletes; a
    /// timeline not durable yet (remote storage) is retired by a later sweep (the reconciler's). The caller
    /// holds the database's lock.
    pub(crate) async fn retire_timelines(&self, database: &Database) {
        let database_id = database.id.clone();
        let Ok(retirable) = self
            .blocking(move |store| store.retirable_timelines(&database_id))
            .await
        else {
            return;
        };
        for timeline in retirable {
            match self.backend.seal_timeline(database.tenant_id, timeline).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(%timeline, "a sealed timeline is not durable on the pageserver yet; retired later");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(%error, %timeline, "a timeline only branched from could not be sealed; retired later");
                    continue;
                }
            }
            if self
                .blocking(move |store| store.retire_timeline(timeline))
                .await
                .is_err()
            {
                return;
            }
            self.config.faults.pause_at(Step::TimelineRetired).await;
            self.backend
                .delete_timeline_from_safekeepers(database.tenant_id, timeline)
                .await;
            tracing::info!(database = %database.id, %timeline, "retired a timeline only branched from");
        }
    }

    /// Deletes the timelines of `database` that nothing needs any more, children first.
    async fn delete_unreferenced_timelines(&self, database: &Database) {
        // Bounded: every round deletes at least one row or stops.
        for _ in 0..1_000 {
            let database_id = database.id.clone();
            let unreferenced = match self
                .blocking(move |store| store.unreferenced_timelines(&database_id))
                .await
            {
                Ok(unreferenced) if !unreferenced.is_empty() => unreferenced,
                _ => return,
            };
            for timeline in unreferenced {
                let deleted = self
                    .backend
                    .delete_timeline_from_pageserver(database.tenant_id, timeline)
                    .await;
                if let Err(error) = deleted {
                    tracing::warn!(%error, %timeline, "an unused timeline could not be deleted; kept for later");
                    return;
                }
                // A crash at either pause keeps the row, so the reconciler's sweep does this again (every step
                // accepts "already gone").
                self.config.faults.pause_at(Step::TimelineSafekeepers).await;
                self.backend
                    .delete_timeline_from_safekeepers(database.tenant_id, timeline)
                    .await;
                self.config.faults.pause_at(Step::TimelineRow).await;
                if self
                    .blocking(move |store| store.remove_timeline(timeline))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}
