//! Databases and projects: creation (and its operation's work), suspend and resume, passwords, deletion.

use std::sync::Arc;

use cambium_types::{TenantId, TimelineId};
use compute::pg::ScramVerifier;
use ring::rand::{SecureRandom, SystemRandom};

use super::{check_descriptors, random_u128, retry, Control, DEFAULT_BRANCH_NAME, PG_USER, ROOT_START_LSN};
use crate::error::ApiError;
use crate::faults::{self, Step};
use crate::store::databases::{
    Database, DatabaseStatus, NewDatabase, SuspendReason, TimelineRow, SUSPEND_TIMEOUT_SECONDS_MAX,
};
use crate::store::labels::Labels;
use crate::store::operations::Operation;
use crate::store::AccountId;

/// A database's password, just made: it goes to the client once and is never stored (only its verifier is).
pub struct Password(pub(super) String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(..)")
    }
}

/// A new random password and its SCRAM-SHA-256 verifier (PBKDF2, milliseconds of work: off the async workers).
async fn new_password() -> Result<(Password, Arc<ScramVerifier>), ApiError> {
    let made = tokio::task::spawn_blocking(|| {
        let password = random_password();
        ScramVerifier::from_password(&password, compute::pg::scram::ITERATIONS_DEFAULT)
            .map(|verifier| (Password(password), Arc::new(verifier)))
    })
    .await;
    match made {
        Ok(Ok(made)) => Ok(made),
        Ok(Err(error)) => {
            tracing::error!(%error, "no verifier for a new password");
            Err(ApiError::Internal)
        }
        Err(error) => {
            tracing::error!(%error, "the password task failed");
            Err(ApiError::Internal)
        }
    }
}

/// A random password: 32 characters of [A-Za-z0-9].
fn random_password() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .unwrap_or_else(|_| panic!("the OS random source failed"));
    bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

impl Control {
    /// Creates a database in `account`'s project and starts its `create_database` operation. `suspend_timeout_seconds`
    /// is at most [`SUSPEND_TIMEOUT_SECONDS_MAX`] (the caller checked it).
    pub async fn create_database(
        self: &Arc<Self>,
        account: &AccountId,
        project_id: &str,
        name: String,
        region: Option<String>,
        labels: Labels,
        suspend_timeout_seconds: u32,
    ) -> Result<(Database, Operation, Password), ApiError> {
        assert!(
            suspend_timeout_seconds <= SUSPEND_TIMEOUT_SECONDS_MAX,
            "suspend timeout {suspend_timeout_seconds} s is above {SUSPEND_TIMEOUT_SECONDS_MAX}"
        );
        let region = region.unwrap_or_else(|| self.config.region.clone());
        if region != self.config.region {
            return Err(ApiError::InvalidRequest(format!(
                "unknown region {region:?}; this deployment has {:?}",
                self.config.region
            )));
        }
        let (password, password_verifier) = new_password().await?;
        let slot = self.worker.reserve()?;
        // Under the project's lock, which a project deletion holds throughout: a database is created before the
        // deletion looks at the project's databases (and its operation makes the deletion wait), or after the
        // project is gone (404). Without it, one made in between was deleted with no compute stopped.
        let _project = self.locked(project_id).await;
        let pageserver = self.choose_new_pageserver().await?;
        let new = NewDatabase {
            project_id: project_id.to_owned(),
            name,
            region,
            tenant_id: TenantId(random_u128()),
            timeline: TimelineRow {
                timeline_id: TimelineId(random_u128()),
                ancestor_timeline_id: None,
                start_lsn: ROOT_START_LSN,
            },
            branch_name: DEFAULT_BRANCH_NAME.to_owned(),
            password_verifier,
            labels,
            suspend_timeout_seconds,
        };
        check_descriptors()?;
        let account = account.clone();
        let databases_max = self.config.quotas.databases_per_account_max;
        let created = self
            .blocking(move |store| store.create_database(&account, &new, databases_max))
            .await?
            .ok_or(ApiError::NotFound)?;
        if let Some(pageserver) = &pageserver {
            // Before the work runs (it makes the tenant where this says); a crash before this line leaves the
            // column NULL, which means the first pageserver, where the work then makes it.
            if let Err(error) = self
                .place_new_database(&created.database.id, created.database.tenant_id, pageserver)
                .await
            {
                tracing::warn!(database = %created.database.id, ?error, "placed on the first pageserver instead");
            }
        }
        {
            // Under the database's lock, which the worker takes to serve it: the refusal comes first.
            let _held = self.locked(&created.database.id).await;
            // Read again under the lock, like everything that gives the host credentials (see `reset_password`).
            let id = created.database.id.clone();
            let database = self.blocking(move |store| store.database(&id)).await?;
            // Only for a clearer message than "unknown database" while it is created.
            let refused = match &database {
                Some(database) => self.refuse(database, DatabaseStatus::Provisioning).await,
                None => Ok(()),
            };
            if let Err(error) = refused {
                tracing::warn!(database = %created.database.id, ?error, "a new database's names could not be refused");
            }
            slot.submit(created.operation.id.clone());
        }
        Ok((created.database, created.operation, password))
    }

    /// The `create_database` work: storage, compute, a SQL check, then `active`.
    pub(super) async fn create_database_work(&self, operation: &Operation) -> Result<(), String> {
        let database_id = operation.database_id.clone().ok_or("the operation names no database")?;
        let database = self.database_for_work(&database_id).await?;
        let id = database_id.clone();
        let timelines = self
            .blocking(move |store| store.timelines_of(&id))
            .await
            .map_err(|e| e.to_string())?;
        let root = timelines
            .iter()
            .find(|t| t.ancestor_timeline_id.is_none())
            .copied()
            .ok_or("the database has no root timeline")?;
        retry(|| self.backend.create_tenant(database.tenant_id)).await?;
        let set = self
            .set_for_new_timeline(&database.id, root.timeline_id)
            .await
            .map_err(|e| format!("choosing the safekeepers: {e:?}"))?;
        retry(|| self.backend.create_timeline(database.tenant_id, &root, &set)).await?;
        let _held = self.locked(&database.id).await;
        // Read again under the lock: what is served is the database as it is now.
        let database = self.database_for_work(&database_id).await?;
        self.serve(&database, true).await.map_err(|e| e.to_string())?;
        self.check_sql(&database.default_branch_id).await?;
        let id = database_id.clone();
        let activated = self
            .blocking(move |store| store.set_database_status(&id, DatabaseStatus::Active))
            .await
            .map_err(|e| e.to_string())?;
        if !activated {
            return Err("the database was deleted".to_owned());
        }
        Ok(())
    }

    /// Resumes or suspends `account`'s database `id`: its compute starts (a SQL session is checked) or stops.
    /// A resume that fails leaves a suspended database suspended and refusing sessions, as its status says.
    pub async fn set_active(&self, account: &AccountId, id: &str, active: bool) -> Result<Database, ApiError> {
        let database = self.get_database(account, id).await?;
        let _held = self.locked(&database.id).await;
        let database = self.get_database(account, id).await?;
        match database.status {
            DatabaseStatus::Provisioning => {
                return Err(ApiError::Conflict("the database is still being created".to_owned()))
            }
            DatabaseStatus::Failed => {
                return Err(ApiError::Conflict(
                    "the database failed to be created; delete it".to_owned(),
                ))
            }
            DatabaseStatus::Active | DatabaseStatus::Suspended => {}
        }
        if active {
            if let Err(error) = self.start_serving(&database).await {
                if database.status == DatabaseStatus::Suspended {
                    // Back to what the status says: no session opens.
                    if let Err(refused) = self.refuse(&database, DatabaseStatus::Suspended).await {
                        tracing::error!(database = %database.id, ?refused, "a database whose resume failed could not be refused again");
                    }
                }
                return Err(error);
            }
            return Ok(Database {
                status: DatabaseStatus::Active,
                suspend_reason: None,
                ..database
            });
        }
        self.refuse(&database, DatabaseStatus::Suspended).await?;
        let id = database.id.clone();
        if let Err(error) = self
            .blocking(move |store| store.set_database_status(&id, DatabaseStatus::Suspended))
            .await
        {
            if database.serves_sessions() {
                // Back to what the status says: served (lazily; its stores start with their next sessions; one
                // suspended for idleness is recorded woken by the idle sweep, as it is no longer parked).
                if let Err(served) = self.serve(&database, false).await {
                    tracing::error!(database = %database.id, ?served, "a database whose suspend failed could not be served again");
                }
            }
            return Err(error);
        }
        Ok(Database {
            status: DatabaseStatus::Suspended,
            suspend_reason: Some(SuspendReason::Api),
            ..database
        })
    }

    /// Serves `database` (its default branch started now), checks a SQL session, and records it `active`.
    async fn start_serving(&self, database: &Database) -> Result<(), ApiError> {
        self.host.clear_refusal(&database.id);
        self.serve(database, true).await?;
        self.check_sql(&database.default_branch_id)
            .await
            .map_err(ApiError::Unavailable)?;
        if self.config.faults.resume_check_fails {
            return Err(ApiError::Unavailable("SQL check: injected failure".to_owned()));
        }
        let id = database.id.clone();
        self.blocking(move |store| store.set_database_status(&id, DatabaseStatus::Active))
            .await?;
        Ok(())
    }

    /// Gives `account`'s database `id` a new random password, which this returns (and nothing stores: the
    /// metadata gets its verifier). It takes effect for new sessions on every name of the database at once;
    /// sessions already open stay open, as in PostgreSQL.
    pub async fn reset_password(&self, account: &AccountId, id: &str) -> Result<(Database, Password), ApiError> {
        let database = self.get_database(account, id).await?;
        let (password, verifier) = new_password().await?;
        // Under the lock, which everything that gives the host a database's credentials holds (having read the
        // database under it): none of them can give it the old verifier after this.
        let _held = self.locked(&database.id).await;
        let (database_id, stored) = (database.id.clone(), Arc::clone(&verifier));
        if !self
            .blocking(move |store| store.set_password_verifier(&database_id, &stored))
            .await?
        {
            return Err(ApiError::NotFound);
        }
        let database = self.get_database(account, id).await?;
        let database_id = database.id.clone();
        let branches = self.blocking(move |store| store.branches_of(&database_id)).await?;
        self.host
            .set_credentials_verifier(&database.id, PG_USER, Arc::clone(&verifier));
        for branch in &branches {
            self.host
                .set_credentials_verifier(&branch.id, PG_USER, Arc::clone(&verifier));
        }
        Ok((database, password))
    }

    /// `account`'s database `id`.
    pub async fn get_database(&self, account: &AccountId, id: &str) -> Result<Database, ApiError> {
        let (account, id) = (account.clone(), id.to_owned());
        self.blocking(move |store| store.get_database(&account, &id))
            .await?
            .ok_or(ApiError::NotFound)
    }

    /// Deletes `account`'s database `id`: metadata, compute, then storage. Refused while an operation runs on it.
    pub async fn delete_database(&self, account: &AccountId, id: &str) -> Result<(), ApiError> {
        let database = self.get_database(account, id).await?;
        let _held = self.locked(&database.id).await;
        let database = self.get_database(account, id).await?;
        self.refuse_while_operation_runs(&database.id).await?;
        self.refuse_if_database_protected(&database.id).await?;
        self.retire(&database).await?;
        // A crash from here until the row is deleted leaves the database as it was: served again at the restart.
        self.config.faults.pause_at(Step::DatabaseRow).await;
        let (account, id) = (account.clone(), id.to_owned());
        let deleted = self
            .blocking(move |store| store.delete_database(&account, &id))
            .await?
            .ok_or(ApiError::NotFound)?;
        // A crash from here on leaves a tenant no row names, which the reconciler deletes.
        self.config.faults.pause_at(Step::DatabaseStorage).await;
        self.delete_storage(&deleted).await;
        Ok(())
    }

    /// Deletes `account`'s project `id` with its databases and their storage.
    ///
    /// Holds the project's lock (no database is created in it meanwhile) and then every one of its databases'
    /// locks, in id order (no resume, restore or branch change runs on them meanwhile), from before it looks at
    /// them until their rows and storage are gone; the other calls take at most one database lock, after the
    /// project's, so the order cannot deadlock.
    pub async fn delete_project(&self, account: &AccountId, id: &str) -> Result<(), ApiError> {
        let _project = self.locked(id).await;
        let (account_id, project_id) = (account.clone(), id.to_owned());
        let page = self
            .blocking(move |store| store.list_databases(&account_id, &project_id, None, usize::MAX / 2, None))
            .await?
            .ok_or(ApiError::NotFound)?;
        // Listed in id order.
        let mut _held = Vec::with_capacity(page.items.len());
        for database in &page.items {
            _held.push(self.locked(&database.id).await);
        }
        for database in &page.items {
            self.refuse_while_operation_runs(&database.id).await?;
            self.refuse_if_database_protected(&database.id).await?;
        }
        for database in &page.items {
            self.retire(database).await?;
        }
        faults::pause(self.config.faults.project_delete_pause_ms).await;
        let (account, id) = (account.clone(), id.to_owned());
        let deleted = self
            .blocking(move |store| store.delete_project(&account, &id))
            .await?
            .ok_or(ApiError::NotFound)?;
        for database in &deleted {
            self.delete_storage(database).await;
        }
        Ok(())
    }

    /// 409 if an operation runs on database `database_id` (a deletion must not race its work).
    pub(super) async fn refuse_while_operation_runs(&self, database_id: &str) -> Result<(), ApiError> {
        let id = database_id.to_owned();
        match self
            .blocking(move |store| store.running_operation_on_database(&id))
            .await?
        {
            Some(running) => Err(ApiError::Conflict(format!(
                "operation {running} is running on database {database_id}"
            ))),
            None => Ok(()),
        }
    }

    /// Deletes a deleted database's tenant, from the pageserver then the safekeepers; a failure is logged (the
    /// tenant is an orphan then, for the reconciler).
    async fn delete_storage(&self, database: &Database) {
        let tenant = database.tenant_id;
        if let Err(error) = retry(|| self.backend.delete_tenant_from_pageserver(tenant)).await {
            tracing::error!(database = %database.id, %tenant, %error, "the tenant could not be deleted; it is orphaned");
            return;
        }
        // A crash here leaves the safekeepers' copies of a tenant no row names: the reconciler deletes them.
        self.config.faults.pause_at(Step::TenantSafekeepers).await;
        self.backend.delete_tenant_from_safekeepers(tenant).await;
    }
}
