//! The control plane: what the `/v1` calls do to the metadata, the storage and the computes.
//!
//! - **Databases** are tenants; a database's branches are served by the shared [`ComputeHost`] under their ids
//!   (`br_…`), and the database id (`db_…`) is an alias of its default branch.
//! - **Ordering.** Metadata changes are one transaction each. Storage is created *before* the metadata that
//!   points at it (an orphan is harmless; a dangling pointer is not) and deleted *after* the metadata that
//!   pointed at it is gone. Structural changes to one database (branch create/delete/promote, restore, suspend,
//!   resume, delete) hold that database's lock, so they apply one at a time.
//! - **Operations** (`create_database`, `restore_branch`) are rows first, then work for the [`worker`]; each
//!   step is idempotent, so a run resumed after a crash redoes what was done and finishes.
//!
//! [`worker`]: crate::worker

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cambium_types::{Lsn, TenantId, TimelineId};
use compute::host::{BranchTarget, ComputeHost};
use compute::pg::ScramVerifier;
use parking_lot::Mutex;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::backend::{Backend, BackendError};
use crate::error::ApiError;
use crate::faults::{self, Faults};
use crate::reconcile::ReplicaHealth;
use crate::store::databases::{Branch, Database, DatabaseStatus, NewDatabase, RestoreChange, TimelineRow};
use crate::store::operations::{NewOperation, Operation, OperationStatus};
use crate::store::{new_id, AccountId, Store, StoreError};
use crate::worker::Worker;

/// Where a database's root timeline starts its WAL.
pub const ROOT_START_LSN: Lsn = Lsn(0x100_0000);
/// The name of a new database's default branch.
pub const DEFAULT_BRANCH_NAME: &str = "main";
/// The PostgreSQL user of every connection string.
pub const PG_USER: &str = "cambium";

/// What the control plane needs to know about its deployment.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// The region code of this deployment's computes; the only one databases may ask for.
    pub region: String,
    /// The host name in connection strings.
    pub pg_host: String,
    /// The port in connection strings.
    pub pg_port: u16,
    /// Fault injection: how long the worker waits before running each operation (0 in production), so tests
    /// can crash the service while operations are `running`.
    pub operation_delay_ms: u64,
    /// Fault injection for tests (nothing in production).
    pub faults: Faults,
    /// Per-account limits.
    pub quotas: Quotas,
}

/// Descriptors a new branch may come to hold in this process (its compute store's runtime and storage
/// connections, both ends when the storage runs in process, and three safekeepers' segment files).
const FDS_PER_BRANCH: u64 = 16;

/// 503 before a database or branch is made if the process is short of file descriptors (`compute::fds`):
/// refused cleanly now rather than failing a safekeeper or a layer file later.
fn check_descriptors() -> Result<(), ApiError> {
    compute::fds::check_room(FDS_PER_BRANCH).map_err(|exhausted| ApiError::Unavailable(exhausted.to_string()))
}

/// Per-account limits, checked before anything is created, in the transaction that creates (projects,
/// databases) or under the database's lock before the storage is touched (branches); past one, 403
/// `quota_exceeded` naming the limit and the count. They bound what one account can make the service hold:
/// databases are counted per account rather than per project, because a database is what costs (a tenant on
/// the pageserver, WAL on three safekeepers, a compute) and projects are only a grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Projects an account may have.
    pub projects_per_account_max: u32,
    /// Databases an account may have, across its projects.
    pub databases_per_account_max: u32,
    /// Branches a database may have, its default branch and the ones restores keep included.
    pub branches_per_database_max: u32,
}

impl Default for Quotas {
    fn default() -> Quotas {
        Quotas {
            projects_per_account_max: 100,
            databases_per_account_max: 100,
            branches_per_database_max: 500,
        }
    }
}

/// The parameters of a `restore_branch` operation, fixed when it is created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RestoreParams {
    branch_id: String,
    old_timeline_id: String,
    /// The timeline that holds the restore point (the branch's, or an ancestor's).
    source_timeline_id: String,
    target_lsn: String,
    new_timeline_id: String,
    preserved_name: Option<String>,
    preserved_id: String,
}

/// Locks in the map before [`Control::locked`] drops the ones nobody holds or awaits (normally each is dropped
/// with its last guard; this catches those whose waiter was cancelled).
const LOCKS_PRUNE_AT: usize = 1024;

/// A held database or project lock. Dropping it lets go, and forgets the lock if nobody else holds or awaits it
/// (they all got it from the map, under the map's lock), so the map holds the locks in use, not one per id ever
/// locked.
pub(crate) struct Held<'a> {
    control: &'a Control,
    id: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = self.control.locks.lock();
        if locks.get(&self.id).is_some_and(|mutex| Arc::strong_count(mutex) == 1) {
            locks.remove(&self.id);
        }
    }
}

/// The control plane; see the module doc.
pub struct Control {
    pub(crate) store: Arc<Store>,
    backend: Backend,
    host: Arc<ComputeHost>,
    config: ControlConfig,
    /// Per database: held for a structural change.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Woken whenever an operation ends.
    operation_ended: Notify,
    worker: Worker,
    /// What the reconciler last found of the timelines' copies.
    pub(crate) replicas: ReplicaHealth,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A random 128-bit id (tenants, timelines).
fn random_u128() -> u128 {
    let mut bytes = [0u8; 16];
    // SystemRandom fails only if the OS has no randomness source: nothing can run then.
    SystemRandom::new()
        .fill(&mut bytes)
        .unwrap_or_else(|_| panic!("the OS random source failed"));
    u128::from_be_bytes(bytes)
}

/// A database's password, just made: it goes to the client once and is never stored (only its verifier is).
pub struct Password(String);

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

/// The timeline of `timelines` that holds `lsn` in the history of `start`: `start` itself, or the ancestor it
/// was branched from below its branch point (recursively).
pub(crate) fn timeline_holding(
    timelines: &[TimelineRow],
    start: TimelineId,
    lsn: Lsn,
) -> Result<TimelineRow, ApiError> {
    let find = |id: TimelineId| {
        timelines.iter().find(|t| t.timeline_id == id).copied().ok_or_else(|| {
            tracing::error!(timeline = %id, "a branch's timeline has no row");
            ApiError::Internal
        })
    };
    let mut current = find(start)?;
    // Bounded: each step goes to an ancestor, and there are finitely many rows.
    for _ in 0..=timelines.len() {
        match current.ancestor_timeline_id {
            Some(ancestor) if lsn < current.start_lsn => current = find(ancestor)?,
            _ => {
                if lsn < current.start_lsn {
                    return Err(ApiError::Unprocessable(format!(
                        "LSN {lsn} is before the database's history, which starts at {}",
                        current.start_lsn
                    )));
                }
                return Ok(current);
            }
        }
    }
    tracing::error!(timeline = %start, "the timeline ancestry has a cycle");
    Err(ApiError::Internal)
}

/// The first timeline of `start`'s history: the root its ancestry goes back to.
fn root_of(timelines: &[TimelineRow], start: TimelineId) -> Result<TimelineRow, ApiError> {
    let mut current = start;
    // Bounded: each step goes to an ancestor, and there are finitely many rows.
    for _ in 0..=timelines.len() {
        let row = timelines
            .iter()
            .find(|t| t.timeline_id == current)
            .copied()
            .ok_or_else(|| {
                tracing::error!(timeline = %current, "a branch's timeline has no row");
                ApiError::Internal
            })?;
        match row.ancestor_timeline_id {
            Some(ancestor) => current = ancestor,
            None => return Ok(row),
        }
    }
    tracing::error!(timeline = %start, "the timeline ancestry has a cycle");
    Err(ApiError::Internal)
}

/// A point in a branch's history, as a request gives it.
#[derive(Debug, Clone)]
pub enum PointInTime {
    /// The branch's latest committed state.
    Latest,
    /// An LSN.
    Lsn(Lsn),
    /// The state at this time: the newest commit at or before it, or the database as it was created if it had no
    /// commit yet.
    Timestamp(jiff::Timestamp),
    /// A valid RFC 3339 time past the last instant a `jiff::Timestamp` holds (late on 9999-12-30 and after), as
    /// given: always in the future.
    AfterTimestampMax(String),
}

impl Control {
    /// The control plane over `store`, the storage behind `backend`, and `host` serving the databases. Call
    /// [`Control::resume`] once to serve what the metadata holds and resume unfinished operations.
    pub fn new(store: Arc<Store>, backend: Backend, host: Arc<ComputeHost>, config: ControlConfig) -> Arc<Control> {
        Arc::new_cyclic(|weak| Control {
            store,
            backend,
            host,
            config,
            locks: Mutex::new(HashMap::new()),
            operation_ended: Notify::new(),
            worker: Worker::new(weak.clone()),
            replicas: ReplicaHealth::default(),
        })
    }

    /// This deployment's configuration.
    pub fn config(&self) -> &ControlConfig {
        &self.config
    }

    /// Operations queued or running in the worker.
    pub fn operations_in_progress(&self) -> usize {
        self.worker.in_progress()
    }

    /// The storage clients.
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// What the reconciler last found of the timelines' copies on the safekeepers.
    pub fn replicas(&self) -> &ReplicaHealth {
        &self.replicas
    }

    /// The compute host serving the databases.
    pub fn host(&self) -> &Arc<ComputeHost> {
        &self.host
    }

    /// After a start: serves every database as its status says (lazily: stores start on first use) and hands
    /// every operation left `running` to the worker, which finishes or fails it.
    pub async fn resume(self: &Arc<Self>) -> Result<(), ApiError> {
        let store = Arc::clone(&self.store);
        let databases = tokio::task::spawn_blocking(move || store.all_databases())
            .await
            .map_err(|_| ApiError::Internal)??;
        for database in &databases {
            match database.status {
                DatabaseStatus::Active => self.serve(database, false).await?,
                status => self.refuse(database, status).await?,
            }
        }
        let store = Arc::clone(&self.store);
        let running = tokio::task::spawn_blocking(move || store.running_operations())
            .await
            .map_err(|_| ApiError::Internal)??;
        tracing::info!(databases = databases.len(), operations = running.len(), "resuming");
        for operation in running {
            self.worker.resume(operation.id);
        }
        Ok(())
    }

    /// Runs a store call on the blocking pool.
    pub async fn blocking<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        let store = Arc::clone(&self.store);
        match tokio::task::spawn_blocking(move || f(&store)).await {
            Ok(result) => Ok(result?),
            Err(error) => {
                tracing::error!(%error, "metadata store task failed");
                Err(ApiError::Internal)
            }
        }
    }

    /// Holds the lock of database or project `id` (ids are prefixed, so the two never share one) until the
    /// returned guard drops.
    pub(crate) async fn locked(&self, id: &str) -> Held<'_> {
        let mutex = {
            let mut locks = self.locks.lock();
            if locks.len() >= LOCKS_PRUNE_AT {
                // Locks left by waiters that were cancelled (their guard never dropped): nobody holds them.
                locks.retain(|_, mutex| Arc::strong_count(mutex) > 1);
            }
            Arc::clone(locks.entry(id.to_owned()).or_default())
        };
        Held {
            control: self,
            id: id.to_owned(),
            guard: Some(mutex.lock_owned().await),
        }
    }

    /// `postgresql://cambium@host:port/<name>?sslmode=prefer`: connection name `name` without a password (the
    /// metadata has none to give; clients give theirs separately, e.g. in `PGPASSWORD`).
    pub fn connection_uri(&self, name: &str) -> String {
        format!(
            "postgresql://{PG_USER}@{}:{}/{name}?sslmode=prefer",
            self.config.pg_host, self.config.pg_port
        )
    }

    /// [`Control::connection_uri`] with `password` in it: only in the response that made the password.
    pub fn connection_uri_with_password(&self, name: &str, password: &Password) -> String {
        format!(
            "postgresql://{PG_USER}:{}@{}:{}/{name}?sslmode=prefer",
            password.0, self.config.pg_host, self.config.pg_port
        )
    }

    // ---- serving databases through the compute host ----

    async fn target(&self, database: &Database, branch: &Branch) -> Result<BranchTarget, ApiError> {
        let (database_id, timeline_id) = (database.id.clone(), branch.timeline_id);
        let timelines = self.blocking(move |store| store.timelines_of(&database_id)).await?;
        let row = timeline_holding(&timelines, timeline_id, Lsn(u64::MAX))?;
        Ok(BranchTarget {
            tenant_id: database.tenant_id,
            timeline_id,
            start_lsn: row.start_lsn,
        })
    }

    /// Serves every branch of `database` (the default one started now if `eager`), its id as an alias of the
    /// default branch, with its password.
    async fn serve(&self, database: &Database, eager: bool) -> Result<(), ApiError> {
        let database_id = database.id.clone();
        let branches = self.blocking(move |store| store.branches_of(&database_id)).await?;
        for branch in &branches {
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
    async fn refuse(&self, database: &Database, status: DatabaseStatus) -> Result<(), ApiError> {
        let reason = match status {
            DatabaseStatus::Suspended => format!("database {} is suspended; resume it to connect", database.id),
            DatabaseStatus::Provisioning => format!("database {} is being created", database.id),
            DatabaseStatus::Failed => format!("database {} failed to be created", database.id),
            DatabaseStatus::Active => format!("database {} is restarting", database.id),
        };
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
    async fn retire(&self, database: &Database) -> Result<(), ApiError> {
        for branch in self.unserve(database).await? {
            self.host.remove_credentials(&branch.id);
        }
        self.host.remove_credentials(&database.id);
        Ok(())
    }

    /// Stops serving `database` and forgets its names; returns its branches.
    async fn unserve(&self, database: &Database) -> Result<Vec<Branch>, ApiError> {
        let database_id = database.id.clone();
        let branches = self.blocking(move |store| store.branches_of(&database_id)).await?;
        self.host.remove_alias(&database.id);
        self.host.clear_refusal(&database.id);
        for branch in &branches {
            self.host.detach(&branch.id);
            self.host.clear_refusal(&branch.id);
        }
        Ok(branches)
    }

    /// Checks that a SQL session on branch `name` works: opens it and reads the schema.
    async fn check_sql(&self, name: &str) -> Result<(), String> {
        let name = name.to_owned();
        let checked = tokio::task::spawn_blocking(move || {
            let connection = compute::vfs::open_connection(&name)?;
            connection.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get::<_, i64>(0))
        })
        .await
        .map_err(|e| e.to_string())?;
        checked.map(|_| ()).map_err(|e| format!("SQL check: {e}"))
    }

    // ---- databases ----

    /// Creates a database in `account`'s project and starts its `create_database` operation.
    pub async fn create_database(
        self: &Arc<Self>,
        account: &AccountId,
        project_id: &str,
        name: String,
        region: Option<String>,
    ) -> Result<(Database, Operation, Password), ApiError> {
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
        };
        check_descriptors()?;
        let account = account.clone();
        let databases_max = self.config.quotas.databases_per_account_max;
        let created = self
            .blocking(move |store| store.create_database(&account, &new, "{}", databases_max))
            .await?
            .ok_or(ApiError::NotFound)?;
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
    pub(crate) async fn run_create_database(&self, operation: &Operation) -> Result<(), String> {
        let database_id = operation.database_id.clone().ok_or("the operation names no database")?;
        let id = database_id.clone();
        let database = self
            .blocking(move |store| store.database(&id))
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the database was deleted")?;
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
        retry(|| self.backend.create_timeline(database.tenant_id, &root)).await?;
        let _held = self.locked(&database.id).await;
        // Read again under the lock: what is served is the database as it is now.
        let id = database_id.clone();
        let database = self
            .blocking(move |store| store.database(&id))
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the database was deleted")?;
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
                ..database
            });
        }
        self.refuse(&database, DatabaseStatus::Suspended).await?;
        let id = database.id.clone();
        if let Err(error) = self
            .blocking(move |store| store.set_database_status(&id, DatabaseStatus::Suspended))
            .await
        {
            if database.status == DatabaseStatus::Active {
                // Back to what the status says: served (lazily; its stores start with their next sessions).
                if let Err(served) = self.serve(&database, false).await {
                    tracing::error!(database = %database.id, ?served, "a database whose suspend failed could not be served again");
                }
            }
            return Err(error);
        }
        Ok(Database {
            status: DatabaseStatus::Suspended,
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
        self.retire(&database).await?;
        let (account, id) = (account.clone(), id.to_owned());
        let deleted = self
            .blocking(move |store| store.delete_database(&account, &id))
            .await?
            .ok_or(ApiError::NotFound)?;
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
            .blocking(move |store| store.list_databases(&account_id, &project_id, None, usize::MAX / 2))
            .await?
            .ok_or(ApiError::NotFound)?;
        // Listed in id order.
        let mut _held = Vec::with_capacity(page.items.len());
        for database in &page.items {
            _held.push(self.locked(&database.id).await);
        }
        for database in &page.items {
            self.refuse_while_operation_runs(&database.id).await?;
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
    async fn refuse_while_operation_runs(&self, database_id: &str) -> Result<(), ApiError> {
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

    /// Deletes a deleted database's tenant; a failure is logged (the tenant is an orphan then).
    async fn delete_storage(&self, database: &Database) {
        if let Err(error) = retry(|| self.backend.delete_tenant(database.tenant_id)).await {
            tracing::error!(database = %database.id, tenant = %database.tenant_id, %error, "the tenant could not be deleted; it is orphaned");
        }
    }

    // ---- branches ----

    /// The LSN of `branch`'s latest committed state: its running compute's last commit, or what a majority of
    /// safekeepers hold as committed.
    async fn head_lsn(&self, database: &Database, branch: &Branch) -> Result<Lsn, ApiError> {
        if let Some(store) = self.host.store(&branch.id) {
            if store.failure().is_none() {
                return Ok(store.read_lsn());
            }
        }
        Ok(self
            .backend
            .committed_lsn(database.tenant_id, branch.timeline_id)
            .await?)
    }

    /// Resolves `point` of `branch` to the timeline that holds it and its LSN, checking it against the
    /// branch's head and the GC cutoff (422 if out of reach).
    async fn resolve(
        &self,
        database: &Database,
        branch: &Branch,
        point: &PointInTime,
    ) -> Result<(TimelineRow, Lsn), ApiError> {
        let head = self.head_lsn(database, branch).await?;
        let database_id = database.id.clone();
        let timelines = self.blocking(move |store| store.timelines_of(&database_id)).await?;
        let lsn = match point {
            PointInTime::Latest => head,
            PointInTime::Lsn(lsn) => {
                if *lsn > head {
                    return Err(ApiError::Unprocessable(format!(
                        "LSN {lsn} is ahead of the branch, which is at {head}"
                    )));
                }
                *lsn
            }
            PointInTime::AfterTimestampMax(text) => {
                return Err(ApiError::Unprocessable(format!(
                    "{text} is in the future (it is now {:.0})",
                    jiff::Timestamp::now()
                )))
            }
            PointInTime::Timestamp(timestamp) => {
                let timestamp_us = self.check_time(database, *timestamp)?;
                // Every commit up to the head must be indexed before asking which one was last at that time.
                self.backend
                    .wait_ingested(database.tenant_id, branch.timeline_id, head)
                    .await?;
                match self
                    .backend
                    .lsn_for_timestamp(database.tenant_id, branch.timeline_id, timestamp_us)
                    .await
                {
                    Ok((_, lsn)) => lsn.min(head),
                    // No commit at or before that time in the branch's history, and the database existed then
                    // (checked above): it was as created, which is the start of its first timeline.
                    Err(BackendError::Unprocessable(_)) => root_of(&timelines, branch.timeline_id)?.start_lsn,
                    Err(error) => return Err(error.into()),
                }
            }
        };
        let holder = timeline_holding(&timelines, branch.timeline_id, lsn)?;
        let state = self
            .backend
            .timeline_state(database.tenant_id, holder.timeline_id)
            .await?;
        if lsn < state.gc_cutoff_lsn {
            return Err(ApiError::Unprocessable(format!(
                "LSN {lsn} is outside the retained history, which starts at {}",
                state.gc_cutoff_lsn
            )));
        }
        Ok((holder, lsn))
    }

    /// `timestamp` in µs if `database` has a state at that time: not in the future, not before it was created.
    fn check_time(&self, database: &Database, timestamp: jiff::Timestamp) -> Result<u64, ApiError> {
        let now = jiff::Timestamp::now();
        if timestamp > now {
            return Err(ApiError::Unprocessable(format!(
                "{timestamp} is in the future (it is now {now:.0})"
            )));
        }
        let created: jiff::Timestamp = database.created_at.parse().map_err(|_| {
            tracing::error!(database = %database.id, created_at = %database.created_at, "a malformed creation time");
            ApiError::Internal
        })?;
        if timestamp < created {
            return Err(ApiError::Unprocessable(format!(
                "{timestamp} is before database {} was created, at {created}",
                database.id
            )));
        }
        // Not before the creation, so not before 1970.
        u64::try_from(timestamp.as_microsecond()).map_err(|_| {
            tracing::error!(database = %database.id, %timestamp, "a creation time before 1970");
            ApiError::Internal
        })
    }

    /// Creates branch `name` of `parent` at `point`: a timeline on the storage, then the row, then the compute.
    ///
    /// The database and the parent (`parent_id`, or the default branch) are read under the database's lock, which
    /// a restore holds while it moves a branch to a new timeline: the parent's timeline and its latest LSN are
    /// then of one history. Returns the branch with its database.
    pub async fn create_branch(
        &self,
        account: &AccountId,
        database_id: &str,
        parent_id: Option<String>,
        name: String,
        point: PointInTime,
    ) -> Result<(Branch, Database), ApiError> {
        faults::pause(self.config.faults.branch_create_pause_ms).await;
        let _held = self.locked(database_id).await;
        let database = self.get_database(account, database_id).await?;
        match database.status {
            status @ (DatabaseStatus::Provisioning | DatabaseStatus::Failed) => {
                return Err(ApiError::Conflict(format!("the database is {}", status.as_str())))
            }
            DatabaseStatus::Active | DatabaseStatus::Suspended => {}
        }
        let parent_id = parent_id.unwrap_or_else(|| database.default_branch_id.clone());
        let parent = match self.get_branch(account, &parent_id).await {
            Ok((parent, _)) if parent.database_id == database.id => parent,
            Ok(_) | Err(ApiError::NotFound) => {
                return Err(ApiError::Unprocessable(format!(
                    "`parent_branch_id` {parent_id:?} is not a branch of this database"
                )))
            }
            Err(other) => return Err(other),
        };
        let database = &database;
        let parent = &parent;
        // Under the lock, which every change of the database's branches holds: the count cannot move.
        self.check_branch_quota(&database.id).await?;
        check_descriptors()?;
        let (holder, lsn) = self.resolve(database, parent, &point).await?;
        let timeline = TimelineRow {
            timeline_id: TimelineId(random_u128()),
            ancestor_timeline_id: Some(holder.timeline_id),
            start_lsn: lsn,
        };
        self.backend.create_timeline(database.tenant_id, &timeline).await?;
        faults::pause(self.config.faults.branch_row_pause_ms).await;
        let now = jiff::Timestamp::now();
        let branch = Branch {
            id: new_id("br_", u64::try_from(now.as_millisecond()).unwrap_or(0)),
            database_id: database.id.clone(),
            name,
            parent_branch_id: Some(parent.id.clone()),
            parent_lsn: Some(lsn),
            timeline_id: timeline.timeline_id,
            created_at: crate::store::timestamp_text(now),
        };
        let (row, timeline_row) = (branch.clone(), timeline);
        let inserted = self
            .blocking(move |store| store.insert_branch(&row, &timeline_row))
            .await;
        if let Err(error) = inserted {
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
        // The status cannot change under the lock.
        let served = database.status == DatabaseStatus::Active;
        // Served or refused, the branch checks the database's password (see `refuse`).
        self.host
            .set_credentials_verifier(&branch.id, PG_USER, Arc::clone(&database.password_verifier));
        if served {
            let target = BranchTarget {
                tenant_id: database.tenant_id,
                timeline_id: timeline.timeline_id,
                start_lsn: lsn,
            };
            if let Err(error) = self.host.define(&branch.id, target) {
                tracing::error!(%error, branch = %branch.id, "the new branch could not be served");
            }
        } else {
            self.host
                .refuse(&branch.id, &format!("database {} is not active", database.id));
        }
        Ok((branch, database.clone()))
    }

    /// [`ApiError::QuotaExceeded`] unless database `database_id` may have one more branch than it has and the
    /// restores running on it may keep (one each). Called under the database's lock.
    async fn check_branch_quota(&self, database_id: &str) -> Result<(), ApiError> {
        let id = database_id.to_owned();
        let (count, pending) = self
            .blocking(move |store| {
                Ok((
                    store.branch_count(&id)?,
                    store.running_operations_on_database(&id, "restore_branch")?,
                ))
            })
            .await?;
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

    /// Renames and/or promotes a branch.
    pub async fn update_branch(
        &self,
        account: &AccountId,
        id: &str,
        name: Option<String>,
        is_default: Option<bool>,
    ) -> Result<(Branch, Database), ApiError> {
        let (_, database) = self.get_branch(account, id).await?;
        let _held = self.locked(&database.id).await;
        let (branch, database) = self.get_branch(account, id).await?;
        if is_default == Some(false) && database.default_branch_id == branch.id {
            return Err(ApiError::Unprocessable(
                "a database always has a default branch: promote another branch instead".to_owned(),
            ));
        }
        let branch_id = branch.id.clone();
        self.blocking(move |store| {
            if let Some(name) = name {
                store.rename_branch(&branch_id, &name)?;
            }
            if is_default == Some(true) {
                store.promote_branch(&branch_id)?;
            }
            Ok(())
        })
        .await?;
        let (branch, database) = self.get_branch(account, id).await?;
        if is_default == Some(true) && database.status == DatabaseStatus::Active {
            self.host
                .set_alias(&database.id, &branch.id)
                .map_err(|e| ApiError::Unavailable(e.to_string()))?;
        }
        Ok((branch, database))
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
        for branch in &deleted {
            self.host.detach(&branch.id);
            self.host.clear_refusal(&branch.id);
            self.host.remove_credentials(&branch.id);
        }
        self.sweep_timelines(&database).await;
        Ok(())
    }

    /// Deletes the timelines of `database` that nothing needs any more, children first; failures are logged.
    pub(crate) async fn sweep_timelines(&self, database: &Database) {
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
                if let Err(error) = self.backend.delete_timeline(database.tenant_id, timeline).await {
                    tracing::warn!(%error, %timeline, "an unused timeline could not be deleted; kept for later");
                    return;
                }
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

    // ---- restore ----

    /// Validates a restore of `branch` to `point` and starts its `restore_branch` operation.
    pub async fn restore_branch(
        self: &Arc<Self>,
        account: &AccountId,
        id: &str,
        point: PointInTime,
        preserve: bool,
    ) -> Result<Operation, ApiError> {
        let (branch, database) = self.get_branch(account, id).await?;
        if database.status == DatabaseStatus::Provisioning || database.status == DatabaseStatus::Failed {
            return Err(ApiError::Conflict(format!(
                "the database is {}",
                database.status.as_str()
            )));
        }
        let (holder, lsn) = self.resolve(&database, &branch, &point).await?;
        let now = jiff::Timestamp::now();
        let now_ms = u64::try_from(now.as_millisecond()).unwrap_or(0);
        let params = RestoreParams {
            branch_id: branch.id.clone(),
            old_timeline_id: branch.timeline_id.to_string(),
            source_timeline_id: holder.timeline_id.to_string(),
            target_lsn: lsn.to_string(),
            new_timeline_id: TimelineId(random_u128()).to_string(),
            preserved_name: preserve
                .then(|| format!("{}_before_restore_{}", branch.name, now.strftime("%Y%m%dT%H%M%SZ"))),
            preserved_id: new_id("br_", now_ms),
        };
        let params = serde_json::to_string(&params).map_err(|_| ApiError::Internal)?;
        let slot = self.worker.reserve()?;
        // The quota's count and the operation's row under the lock, so branch creations and other restores
        // count this one.
        let _held = self.locked(&database.id).await;
        if preserve {
            self.check_branch_quota(&database.id)
                .await
                .map_err(|error| match error {
                    ApiError::QuotaExceeded(message) => ApiError::QuotaExceeded(format!(
                        "{message} (or restore with \"preserve\": false, which keeps no branch)"
                    )),
                    other => other,
                })?;
        }
        let (account, project_id, database_id, branch_id) = (
            account.clone(),
            database.project_id.clone(),
            database.id.clone(),
            branch.id.clone(),
        );
        let operation = self
            .blocking(move |store| {
                store.start_operation(&NewOperation {
                    project_id: &project_id,
                    account_id: &account,
                    database_id: Some(&database_id),
                    branch_id: Some(&branch_id),
                    action: "restore_branch",
                    params: &params,
                })
            })
            .await?;
        slot.submit(operation.id.clone());
        Ok(operation)
    }

    /// The `restore_branch` work: the new timeline at the point, the rows, then the compute.
    ///
    /// The outcome is that of the rows' change (one transaction): before it, a failure leaves the branch as it
    /// was and the operation `failed` (a new restore may be asked); after it, the restore has happened, and the
    /// compute steps that follow are best effort, logged, never a failure: a branch whose store did not start
    /// stays defined on its new timeline and starts with its next session. So `failed` never hides an applied
    /// restore (whose retry would keep the old state a second time). A run resumed after a crash redoes every
    /// step: the timeline creation and the rows' change are idempotent.
    pub(crate) async fn run_restore(&self, operation: &Operation) -> Result<(), String> {
        let params: RestoreParams =
            serde_json::from_str(&operation.params).map_err(|e| format!("malformed parameters: {e}"))?;
        let parse_timeline = |text: &str| {
            text.parse::<TimelineId>()
                .map_err(|_| format!("malformed timeline {text}"))
        };
        let old_timeline_id = parse_timeline(&params.old_timeline_id)?;
        let source = parse_timeline(&params.source_timeline_id)?;
        let new_timeline_id = parse_timeline(&params.new_timeline_id)?;
        let lsn: Lsn = params
            .target_lsn
            .parse()
            .map_err(|_| format!("malformed LSN {}", params.target_lsn))?;
        let database_id = operation.database_id.clone().ok_or("the operation names no database")?;
        let _held = self.locked(&database_id).await;
        let id = database_id.clone();
        let database = self
            .blocking(move |store| store.database(&id))
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the database was deleted")?;
        let new_timeline = TimelineRow {
            timeline_id: new_timeline_id,
            ancestor_timeline_id: Some(source),
            start_lsn: lsn,
        };
        retry(|| self.backend.create_timeline(database.tenant_id, &new_timeline)).await?;
        let change = RestoreChange {
            branch_id: params.branch_id.clone(),
            old_timeline_id,
            new_timeline,
            preserved_name: params.preserved_name.clone(),
            preserved_id: params.preserved_id.clone(),
        };
        let preserved = self
            .blocking(move |store| store.apply_restore(&change))
            .await
            .map_err(|e| e.to_string())?;
        // Applied: from here on the operation finishes.
        let target = BranchTarget {
            tenant_id: database.tenant_id,
            timeline_id: new_timeline_id,
            start_lsn: lsn,
        };
        if let Err(error) = self
            .serve_restored(&database, &params.branch_id, target, preserved.as_ref())
            .await
        {
            tracing::warn!(database = %database.id, branch = %params.branch_id, %error, "a restored branch is not started yet; its next session starts it");
        }
        if params.preserved_name.is_none() {
            self.sweep_timelines(&database).await;
        }
        Ok(())
    }

    /// After a restore's rows changed: the branch's sessions move to its new timeline (its old store is closed,
    /// new sessions get the new one), and the preserved branch, if one was made, is served or refused as the
    /// database's status says.
    async fn serve_restored(
        &self,
        database: &Database,
        branch_id: &str,
        target: BranchTarget,
        preserved: Option<&Branch>,
    ) -> Result<(), String> {
        if let Some(preserved) = preserved {
            self.host
                .set_credentials_verifier(&preserved.id, PG_USER, Arc::clone(&database.password_verifier));
        }
        if database.status != DatabaseStatus::Active {
            if let Some(preserved) = preserved {
                self.host
                    .refuse(&preserved.id, &format!("database {} is not active", database.id));
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
            self.host
                .attach(branch_id, target)
                .await
                .map_err(|e| format!("starting the restored branch's compute: {e}"))
        };
        if let Some(preserved) = preserved {
            let preserved_target = self.target(database, preserved).await.map_err(|e| e.to_string())?;
            self.host
                .define(&preserved.id, preserved_target)
                .map_err(|e| format!("serving the preserved branch: {e}"))?;
        }
        attached
    }

    // ---- operations ----

    /// Records the end of `operation` and wakes the long-pollers.
    pub(crate) async fn finish(&self, operation: &Operation, outcome: Result<(), String>) {
        if let Err(error) = &outcome {
            tracing::warn!(operation = %operation.id, action = %operation.action, %error, "operation failed");
            if operation.action == "create_database" {
                if let Some(database_id) = operation.database_id.clone() {
                    let _held = self.locked(&database_id).await;
                    let id = database_id.clone();
                    let _ = self
                        .blocking(move |store| store.set_database_status(&id, DatabaseStatus::Failed))
                        .await;
                    if let Ok(Some(database)) = self.blocking(move |store| store.database(&database_id)).await {
                        if let Err(error) = self.refuse(&database, DatabaseStatus::Failed).await {
                            tracing::error!(database = %database.id, ?error, "a failed database's names could not be refused");
                        }
                    }
                }
            }
        } else {
            tracing::info!(operation = %operation.id, action = %operation.action, "operation finished");
        }
        let id = operation.id.clone();
        if let Err(error) = self.blocking(move |store| store.finish_operation(&id, outcome)).await {
            tracing::error!(operation = %operation.id, ?error, "an operation's end could not be recorded");
        }
        self.operation_ended.notify_waiters();
    }

    /// `account`'s operation `id`, once it has ended or `wait` has passed, whichever is first.
    pub async fn wait_operation(&self, account: &AccountId, id: &str, wait: Duration) -> Result<Operation, ApiError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before reading, so an end between the read and the wait is not missed.
            let ended = self.operation_ended.notified();
            let (account_id, operation_id) = (account.clone(), id.to_owned());
            let operation = self
                .blocking(move |store| store.get_operation(&account_id, &operation_id))
                .await?
                .ok_or(ApiError::NotFound)?;
            if operation.status != OperationStatus::Running || tokio::time::Instant::now() >= deadline {
                return Ok(operation);
            }
            let _ = tokio::time::timeout_at(deadline, ended).await;
        }
    }
}

/// Runs a storage step, retrying while the storage is unavailable: at most [`RETRIES_MAX`] tries with doubling
/// waits. Anything else fails at once.
async fn retry<F, Fut>(mut step: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), BackendError>>,
{
    let mut wait_ms = RETRY_FIRST_WAIT_MS;
    for attempt in 1..=RETRIES_MAX {
        match step().await {
            Ok(()) => return Ok(()),
            Err(BackendError::Unavailable(message)) if attempt < RETRIES_MAX => {
                tracing::warn!(attempt, %message, "storage unavailable; retrying");
                tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                wait_ms *= 2;
            }
            Err(error) => return Err(error.to_string()),
        }
    }
    Err("storage unavailable".to_owned())
}

/// Tries of a storage step before its operation fails.
const RETRIES_MAX: u32 = 6;
/// The first wait between tries; it doubles (100 ms … 3.2 s, about 6 s in all).
const RETRY_FIRST_WAIT_MS: u64 = 100;
