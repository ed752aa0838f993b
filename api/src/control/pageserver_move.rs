//! Moving a database's tenant to another pageserver (issue 17 item 2): an admin's `move_pageserver` operation,
//! durable like the others and resumed after a crash.
//!
//! The steps, each idempotent (ARCHITECTURE.md, **Several pageservers**):
//! 1. the source holds its remote layer deletions for the tenant (`HoldRemoteDeletions`), so every layer the
//!    index the target reads next names stays on the remote while the target may fetch it;
//! 2. the target drops any copy of the tenant it holds (a stale secondary) and attaches the tenant from the
//!    remote as a *secondary* (it ingests from the safekeepers and serves reads, it uploads nothing);
//! 3. the target catches up: the `last_record_lsn` of each of the tenant's timelines on the target reaches the
//!    source's as read once at this step (bounded by [`CATCH_UP_TIMEOUT`]);
//! 4. the switch: `databases.pageserver` changed from the source to the target, conditionally on the source;
//! 5. every compute host re-pointed (`repoint`: this process's computes at once, the database's compute host,
//!    if another process, told over HTTP with bounded retries, else following at its next placement round;
//!    sessions stay open) and this process's backend told;
//! 6. the source detaches the tenant (its local files go, its remote copy stays; it waits for its running
//!    uploads, and the detach releases the hold);
//! 7. the target owns the tenant (`AttachTenant` without `secondary`: it checkpoints, then uploads, marking the
//!    tenant with its id).
//!
//! A failure before the switch rolls back: the target detaches the tenant, the source releases its hold, the
//! operation fails saying why. After the switch the move only goes forward: a failed step fails the operation
//! (with the placement already on the target), and the operation's resume or a new move to the same target
//! finishes steps 5-7. A run resumed after a crash starts again from step 1 if the column still names the
//! source (every step before the switch is idempotent), from step 5 if it names the target.
//!
//! Two pageservers never upload the tenant at once: the target is a secondary (never uploads) until step 7,
//! after the source's detach in step 6 has waited out the source's uploads and left it unable to start one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cambium_types::{Lsn, TenantId, TimelineId};

use super::{retry, Control};
use crate::backend::BackendError;
use crate::error::ApiError;
use crate::faults::Step;
use crate::store::databases::{Database, DatabaseStatus};
use crate::store::operations::{Action, MovePageserverParams, NewOperation, Operation};

/// How long step 3 waits for the target to ingest up to the source's `last_record_lsn`.
pub const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often step 3 asks the target how far it got.
const CATCH_UP_POLL: Duration = Duration::from_millis(50);

impl Control {
    /// Starts moving database `database_id`'s tenant to the configured pageserver `to` (admin only: the HTTP
    /// layer checks). 422 if `to` is not configured, or the database is already there or not `active` or
    /// `suspended`; 409 while another operation runs on the database.
    pub async fn move_pageserver(self: &Arc<Self>, database_id: &str, to: &str) -> Result<Operation, ApiError> {
        let configured = self.backend.pageserver_addresses();
        if !configured.iter().any(|address| address == to) {
            return Err(ApiError::Unprocessable(format!(
                "pageserver {to:?} is not configured (--pageservers {})",
                configured.join(",")
            )));
        }
        let slot = self.worker.reserve()?;
        let _held = self.locked(database_id).await;
        let database = self.any_database(database_id).await?;
        if !matches!(database.status, DatabaseStatus::Active | DatabaseStatus::Suspended) {
            return Err(ApiError::Unprocessable(format!(
                "database {database_id} is {}; only an active or suspended database moves",
                database.status.as_str()
            )));
        }
        let from = self.pageserver_column(&database.id).await?;
        let current = from.clone().unwrap_or_else(|| configured[0].clone());
        if current == to {
            return Err(ApiError::Unprocessable(format!(
                "database {database_id} is on pageserver {to} already"
            )));
        }
        let id = database.id.clone();
        if let Some(running) = self
            .blocking(move |store| store.running_operation_on_database(&id))
            .await?
        {
            return Err(ApiError::Conflict(format!(
                "operation {running} is running on database {database_id}"
            )));
        }
        let action = Action::MovePageserver(MovePageserverParams {
            from,
            to: to.to_owned(),
        });
        let operation = self
            .blocking(move |store| {
                store.start_operation(&NewOperation {
                    project_id: &database.project_id,
                    account_id: &database.account_id,
                    database_id: Some(&database.id),
                    branch_id: None,
                    action: &action,
                })
            })
            .await?;
        slot.submit(operation.id.clone());
        Ok(operation)
    }

    /// Operation `id`, whoever's account owns it (for the admin who started a move).
    pub async fn any_operation(&self, id: &str) -> Result<Operation, ApiError> {
        let id = id.to_owned();
        self.blocking(move |store| store.operation(&id))
            .await?
            .ok_or(ApiError::NotFound)
    }

    /// Database `id`, whoever's account owns it.
    async fn any_database(&self, id: &str) -> Result<Database, ApiError> {
        let id = id.to_owned();
        self.blocking(move |store| store.database(&id))
            .await?
            .ok_or(ApiError::NotFound)
    }

    /// The `move_pageserver` work (the module doc's steps), under the database's lock: no branch is made,
    /// restored or deleted on the tenant meanwhile.
    pub(super) async fn move_pageserver_work(
        &self,
        operation: &Operation,
        params: MovePageserverParams,
    ) -> Result<(), String> {
        let database_id = operation.database_id.clone().ok_or("the operation names no database")?;
        let _held = self.locked(&database_id).await;
        let database = self.database_for_work(&database_id).await?;
        let tenant = database.tenant_id;
        let configured = self.backend.pageserver_addresses();
        let first = configured.first().cloned().ok_or("no pageserver is configured")?;
        let source = params.from.clone().unwrap_or(first);
        let to = params.to.clone();
        let column = self.pageserver_column(&database.id).await.map_err(|e| match e {
            ApiError::NotFound => "the database was deleted".to_owned(),
            e => e.to_string(),
        })?;
        if column.as_deref() != Some(to.as_str()) {
            if column != params.from {
                return Err(format!(
                    "the database moved meanwhile (to {}); nothing done",
                    column.as_deref().unwrap_or(&source)
                ));
            }
            let started = tokio::time::Instant::now();
            if let Err(error) = self.move_before_switch(&database, &params, &source).await {
                self.roll_back(tenant, &source, &to).await;
                return Err(format!("{error}; rolled back (the database stays on {source})"));
            }
            tracing::info!(
                database = %database.id, %tenant, from = %source, %to,
                caught_up_ms = started.elapsed().as_millis() as u64,
                "the move's target caught up; switched the placement"
            );
        }
        // Switched: from here on only forward. Every compute host is re-pointed (told) before the source detaches.
        let repointed = self
            .repoint_everywhere(&database.id, tenant, &to)
            .await
            .map_err(|e| format!("{e} (the placement is on {to}; resume the move)"))?;
        retry(|| self.backend.detach_tenant_on(&source, tenant))
            .await
            .map_err(|e| format!("detaching the tenant from {source}: {e} (the placement is on {to} already)"))?;
        retry(|| self.backend.attach_tenant_on(&to, tenant, false))
            .await
            .map_err(|e| format!("making {to} the tenant's owner: {e} (the placement is on {to} already)"))?;
        tracing::info!(database = %database.id, %tenant, from = %source, %to, repointed, "moved a database's tenant");
        Ok(())
    }

    /// Steps 1-4: the hold, the secondary, the catch-up and the switch. `Err` before the switch only.
    async fn move_before_switch(
        &self,
        database: &Database,
        params: &MovePageserverParams,
        source: &str,
    ) -> Result<(), String> {
        let (tenant, to) = (database.tenant_id, params.to.as_str());
        retry(|| self.backend.hold_remote_deletions_on(source, tenant, true))
            .await
            .map_err(|e| format!("holding the remote deletions on {source}: {e}"))?;
        let wanted = self.source_timelines(source, tenant).await?;
        self.attach_every_timeline(tenant, to, &wanted).await?;
        self.config.faults.pause_at(Step::MoveAttached).await;
        self.catch_up(tenant, to, &wanted).await?;
        let (id, from, target) = (database.id.clone(), params.from.clone(), to.to_owned());
        let switched = self
            .blocking(move |store| store.move_pageserver(&id, from.as_deref(), &target))
            .await
            .map_err(|e| format!("switching the placement: {e}"))?;
        if !switched {
            return Err("the database's placement changed meanwhile".to_owned());
        }
        Ok(())
    }

    /// Each timeline of `tenant` on the source with its `last_record_lsn` (retried a few times while the source
    /// does not answer).
    async fn source_timelines(&self, source: &str, tenant: TenantId) -> Result<HashMap<TimelineId, Lsn>, String> {
        let mut attempt = 0;
        loop {
            match self.backend.last_record_lsns_on(source, tenant).await {
                Ok(wanted) => return Ok(wanted),
                Err(BackendError::Unavailable(message)) if attempt < 5 => {
                    tracing::warn!(attempt, %message, "reading the source's timelines; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => return Err(format!("reading the source's timelines on {source}: {error}")),
            }
        }
    }

    /// Step 2: the target attaches the tenant as a secondary, with every timeline of `wanted`. A timeline made
    /// on the source a moment ago (a branch, a restore) may not be in the remote branch log yet (the source's
    /// uploader brings it within its scan interval): then the target detaches and attaches again, bounded by
    /// [`CATCH_UP_TIMEOUT`].
    async fn attach_every_timeline(
        &self,
        tenant: TenantId,
        to: &str,
        wanted: &HashMap<TimelineId, Lsn>,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + CATCH_UP_TIMEOUT;
        loop {
            // Any copy the target holds goes first: a secondary left from an earlier ownership (a pageserver
            // lost, then back, keeps its tenants so; one the tenant moved away from and back to), or this move's
            // own attach before a crash or a retry. Attached over as it is, its layer map may name remote layers
            // the owner has deleted since (compacted away): the first read that fetches one fails and poisons the
            // timeline. So the attach always starts from the remote copy.
            retry(|| self.backend.detach_tenant_on(to, tenant))
                .await
                .map_err(|e| format!("dropping the copy the tenant has on {to}: {e}"))?;
            // A tenant the source has not uploaded yet (made moments ago: its uploader runs every second) is not
            // on the remote: waited for as a timeline not uploaded yet is, below.
            let not_uploaded = AtomicBool::new(false);
            retry(|| async {
                match self.backend.attach_tenant_on(to, tenant, true).await {
                    Err(BackendError::NotFound(_)) => {
                        not_uploaded.store(true, Ordering::Relaxed);
                        Ok(())
                    }
                    other => other,
                }
            })
            .await
            .map_err(|e| format!("attaching the tenant on {to}: {e}"))?;
            if not_uploaded.load(Ordering::Relaxed) {
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!(
                        "the remote copy still lacks the tenant after {} s (the source has not uploaded it)",
                        CATCH_UP_TIMEOUT.as_secs()
                    ));
                }
                tracing::info!(%tenant, "the remote copy lacks the tenant yet; attaching again");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            let attached = self
                .backend
                .last_record_lsns_on(to, tenant)
                .await
                .map_err(|e| format!("reading the target's timelines on {to}: {e}"))?;
            let Some(missing) = wanted.keys().find(|timeline| !attached.contains_key(timeline)) else {
                return Ok(());
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the remote copy still lacks timeline {missing} after {} s (the source has not uploaded it)",
                    CATCH_UP_TIMEOUT.as_secs()
                ));
            }
            tracing::info!(%tenant, timeline = %missing, "the remote copy lacks a timeline yet; attaching again");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Step 3: waits until the target's `last_record_lsn` of every timeline in `wanted` reaches it.
    async fn catch_up(&self, tenant: TenantId, to: &str, wanted: &HashMap<TimelineId, Lsn>) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + CATCH_UP_TIMEOUT;
        loop {
            let behind = match self.backend.last_record_lsns_on(to, tenant).await {
                Ok(reached) => wanted
                    .iter()
                    .find(|(timeline, lsn)| reached.get(timeline).is_none_or(|at| at < lsn))
                    .map(|(timeline, lsn)| {
                        let at = reached.get(timeline).map_or("nothing".to_owned(), |at| at.to_string());
                        format!("timeline {timeline} ingested up to {at} of {lsn}")
                    }),
                Err(BackendError::Unavailable(message)) => Some(message),
                Err(error) => return Err(format!("reading the target's timelines on {to}: {error}")),
            };
            let Some(behind) = behind else {
                return Ok(());
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "pageserver {to} did not catch up with the source within {} s: {behind}",
                    CATCH_UP_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(CATCH_UP_POLL).await;
        }
    }

    /// Undoes steps 1-2 (best effort, logged): the target detaches the tenant, the source releases its hold.
    async fn roll_back(&self, tenant: TenantId, source: &str, to: &str) {
        if let Err(error) = retry(|| self.backend.detach_tenant_on(to, tenant)).await {
            tracing::error!(%tenant, pageserver = %to, %error, "a rolled back move's target did not detach the tenant");
        }
        match retry(|| self.backend.hold_remote_deletions_on(source, tenant, false)).await {
            Ok(()) => {}
            Err(error) => {
                tracing::error!(%tenant, pageserver = %source, %error, "a rolled back move's source still holds its deletions")
            }
        }
    }
}
