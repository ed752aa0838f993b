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
