//! What the compute host serves for each database: its branches under their names, its id as an alias of the
//! default branch, refusals saying why a name cannot be used, and a check that a SQL session opens.

use std::sync::Arc;

use cambium_types::Lsn;
use compute::host::BranchTarget;

use super::resolution::timeline_holding;
use super::{Control, PG_USER};
use crate::error::ApiError;
use crate::store::databases::{Branch, Database, DatabaseStatus};

impl Control {
    pub(super) async fn target(&self, database: &Database, branch: &Branch) -> Result<BranchTarget, ApiError> {
        let (database_id, timeline_id) = (database.id.clone(), branch.timeline_id);
        let timelines = self.blocking(move |store| store.timelines_of(&database_id)).await?;
        let row = timeline_holding(&timelines, timeline_id, Lsn(u64::MAX))?;
        Ok(BranchTarget {
            tenant_id: database.tenant_id,
            timeline_id,
            start_lsn: row.start_lsn,
            safekeepers: self.set_of(timeline_id).await?,
        })
    }

    /// Serves every branch of `database` (the default one started now if `eager`), its id as an alias of the
    /// default branch, with its password, telling the host the account it belongs to (for the per-account
    /// session cap).
    /// Its idle clock (scale to zero) starts now.
    pub(super) async fn serve(&self, database: &Database, eager: bool) -> Result<(), ApiError> {
        self.mark_here(database);
        // Its sessions count against its account's cap from the first one on.
        self.host.set_owner(database.tenant_id, &database.account_id.0);
        self.host.touch(database.tenant_id);
        self.point_host_at_pageserver(database).await?;
        // A branch is never served before the storage holds its timeline (one whose creation was cut before
        // the storage made it is removed here).
        let incomplete = self.complete_pending_creations(database).await?;
        let database_id = database.id.clone();
        let branches = self.blocking(move |store| store.branches_of(&database_id)).await?;
        let unsettled: Vec<String> = branches
            .iter()
            .filter(|b| incomplete.contains(&b.timeline_id))
            .map(|b| b.id.clone())
            .collect();
        for id in &unsettled {
            // Its sessions are told why (the password checked first, as `refuse` does), not that their
            // password is wrong, until a later settling serves it.
            self.host
                .set_credentials_verifier(id, PG_USER, Arc::clone(&database.password_verifier));
            self.host.refuse(id, &unsettled_reason(id));
        }
        if !unsettled.is_empty() {
            self.settle_later(&database.id, unsettled);
        }
        for branch in branches.iter().filter(|b| !incomplete.contains(&b.timeline_id)) {
            let target = self.target(database, branch).await?;
            self.host
                .set_credentials_verifier(&branch.id, PG_USER, Arc::clone(&database.password_verifier));
            let served = if eager && branch.id == database.default_branch_id {
                self.host.attach(&branch.id, target).await
            } else {
                self.host.define(&branch.id, target)
            };
            served.map_err(|e| ApiError::Unavailable(format!("starting the compute: {e}")))?;
        }
        self.host
            .set_credentials_verifier(&database.id, PG_USER, Arc::clone(&database.password_verifier));
        self.host
            .set_alias(&database.id, &database.default_branch_id)
            .map_err(|e| ApiError::Unavailable(format!("starting the compute: {e}")))?;
        Ok(())
    }

    /// Settles the creations of the branches `unsettled` of database `database_id` (refusing sessions, as
    /// [`Control::serve`] left them: the storage did not answer its settling) in a task of its own, under the
    /// database's lock: tried again after [`SETTLE_RETRY_FIRST_MS`], the wait doubling up to
    /// [`SETTLE_RETRY_MAX_MS`], at most [`SETTLE_RETRY_ATTEMPTS`] times, until none is left unsettled. A branch
    /// settled as made is served, one taken back no longer refuses (its name is unknown). One task per database:
    /// a call while it runs adds its branches to the task's. Stops early once the database is no longer served
    /// here (deleted, suspended, placed elsewhere: whatever serves it next settles again); after the last try the
    /// branches wait for the next serve (a restart, a resume).
    fn settle_later(&self, database_id: &str, unsettled: Vec<String>) {
        // The task holds the control plane only while it tries, so a shutdown is not held up by its waits.
        let me = self.me.clone();
        let database_id = database_id.to_owned();
        {
            let mut settling = self.settling.lock();
            if let Some(running) = settling.get_mut(&database_id) {
                running.extend(unsettled);
                return;
            }
            settling.insert(database_id.clone(), unsettled.into_iter().collect());
        }
        tokio::spawn(async move {
            let mut wait_ms = SETTLE_RETRY_FIRST_MS;
            for _ in 0..SETTLE_RETRY_ATTEMPTS {
                tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
                wait_ms = (wait_ms * 2).min(SETTLE_RETRY_MAX_MS);
                let Some(control) = me.upgrade() else {
                    return;
                };
                let tried: Vec<String> = control
                    .settling
                    .lock()
                    .get(&database_id)
                    .map(|set| set.iter().cloned().collect())
                    .unwrap_or_default();
                let outcome = control.settle_once(&database_id, &tried).await;
                let mut settling = control.settling.lock();
                let Some(set) = settling.get_mut(&database_id) else {
                    return;
                };
                match outcome {
                    Ok(left) => {
                        // Those added during the try stay for the next one.
                        for id in &tried {
                            set.remove(id);
                        }
                        set.extend(left);
                        if set.is_empty() {
                            settling.remove(&database_id);
                            return;
                        }
                    }
                    Err(SettleStop) => {
                        settling.remove(&database_id);
                        return;
                    }
                }
            }
            let Some(control) = me.upgrade() else {
                return;
            };
            let left = control.settling.lock().remove(&database_id);
            tracing::warn!(database = %database_id, branches = ?left, "branches whose creation could not be settled are not served until the database is served again");
        });
    }

    /// One try of [`Control::settle_later`]: the branches of `unsettled` still unsettled, or `SettleStop` when
    /// the database is no longer served here.
    async fn settle_once(&self, database_id: &str, unsettled: &[String]) -> Result<Vec<String>, SettleStop> {
        let _held = self.locked(database_id).await;
        let id = database_id.to_owned();
        let database = match self.blocking(move |store| store.database(&id)).await {
            Ok(Some(database)) if database.serves_sessions() && self.placement.tenant_here(database_id).is_some() => {
                database
            }
            Ok(_) => return Err(SettleStop),
            // The metadata did not answer: the next try asks again.
            Err(_) => return Ok(unsettled.to_vec()),
        };
        let Ok(incomplete) = self.complete_pending_creations(&database).await else {
            return Ok(unsettled.to_vec());
        };
        let id = database.id.clone();
        let Ok(branches) = self.blocking(move |store| store.branches_of(&id)).await else {
            return Ok(unsettled.to_vec());
        };
        let mut left = Vec::new();
        for id in unsettled {
            let Some(branch) = branches.iter().find(|branch| &branch.id == id) else {
                // Taken back (its creation never reached the storage) or deleted meanwhile.
                self.host.clear_refusal(id);
                continue;
            };
            if incomplete.contains(&branch.timeline_id) {
                left.push(id.clone());
                continue;
            }
            let served = match self.target(&database, branch).await {
                Ok(target) => self.host.define(&branch.id, target).map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match served {
                Ok(()) => {
                    tracing::info!(database = %database.id, branch = %branch.id, "a branch whose creation was settled late is served")
                }
                Err(error) => {
                    tracing::warn!(database = %database.id, branch = %branch.id, %error, "a settled branch could not be served yet");
                    left.push(id.clone());
                }
            }
        }
        Ok(left)
    }

    /// Stops serving `database`; its names then refuse sessions saying why (its status). The names get the
    /// database's credentials too: the password is checked before the refusal, so without them a client with the
    /// right password would be told its password is wrong instead of why it cannot connect.
    pub(super) async fn refuse(&self, database: &Database, status: DatabaseStatus) -> Result<(), ApiError> {
        let reason = match status {
            DatabaseStatus::Suspended => format!("database {} is suspended; resume it to connect", database.id),
            DatabaseStatus::Provisioning => format!("database {} is being created", database.id),
            DatabaseStatus::Failed => format!("database {} failed to be created", database.id),
            DatabaseStatus::Active => format!("database {} is restarting", database.id),
        };
        self.mark_here(database);
        let branches = self.unserve(database).await?;
        self.host
            .set_credentials_verifier(&database.id, PG_USER, Arc::clone(&database.password_verifier));
        self.host.refuse(&database.id, &reason);
        for branch in branches {
            self.host
                .set_credentials_verifier(&branch.id, PG_USER, Arc::clone(&database.password_verifier));
            self.host.refuse(&branch.id, &reason);
        }
        Ok(())
    }

    /// Stops serving deleted `database` and forgets everything about its names, credentials included.
    pub(super) async fn retire(&self, database: &Database) -> Result<(), ApiError> {
        self.forget_placement(&database.id);
        for branch in self.unserve(database).await? {
            self.host.remove_credentials(&branch.id);
        }
        self.host.remove_credentials(&database.id);
        self.host.remove_owner(database.tenant_id);
        self.host.forget_tenant(database.tenant_id);
        Ok(())
    }

    /// Stops serving `database` and forgets its names (and that it was parked); returns its branches.
    async fn unserve(&self, database: &Database) -> Result<Vec<Branch>, ApiError> {
        let database_id = database.id.clone();
        let branches = self.blocking(move |store| store.branches_of(&database_id)).await?;
        self.host.unpark(database.tenant_id);
        self.host.remove_alias(&database.id);
        self.host.clear_refusal(&database.id);
        for branch in &branches {
            self.host.detach(&branch.id);
            self.host.clear_refusal(&branch.id);
        }
        Ok(branches)
    }

    /// Checks that a SQL session on branch `name` works: opens it and reads the schema.
    pub(super) async fn check_sql(&self, name: &str) -> Result<(), String> {
        let name = name.to_owned();
        let checked = tokio::task::spawn_blocking(move || {
            let connection = compute::vfs::open_connection(&name)?;
            connection.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get::<_, i64>(0))
        })
        .await
        .map_err(|e| e.to_string())?;
        checked.map(|_| ()).map_err(|e| format!("SQL check: {e}"))
    }
}

/// The first wait of [`Control::settle_later`].
const SETTLE_RETRY_FIRST_MS: u64 = 250;
/// The longest wait of [`Control::settle_later`] between two tries.
const SETTLE_RETRY_MAX_MS: u64 = 5_000;
/// Tries of [`Control::settle_later`] (with the waits above, about an hour).
const SETTLE_RETRY_ATTEMPTS: u32 = 720;

/// [`Control::settle_later`] stops: the database is no longer served here.
struct SettleStop;

/// What a session of branch `id` is told while its creation is unsettled.
fn unsettled_reason(id: &str) -> String {
    format!(
        "branch {id} is being created: the storage did not confirm its timeline yet (a safekeeper or the pageserver did not answer); try again shortly"
    )
}
