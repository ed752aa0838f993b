//! The control plane: what the `/v1` calls do to the metadata, the storage and the computes.
//!
//! - **Databases** are tenants; a database's branches are served by the shared [`ComputeHost`] under their ids
//!   (`br_…`), and the database id (`db_…`) is an alias of its default branch.
//! - **Ordering.** Metadata changes are one transaction each. Storage is created *before* the metadata that
//!   points at it (an orphan is harmless; a dangling pointer is not) and deleted *after* the metadata that
//!   pointed at it is gone. Structural changes to one database (branch create/delete/promote, restore, suspend,
//!   resume, delete) hold that database's lock, so they apply one at a time.
//! - **Operations** (`create_database`, `restore_branch`) are rows first (their [`Action`] with its parameters),
//!   then work for the [`worker`], which runs them through the `OperationRunner` this implements; each step is
//!   idempotent, so a run resumed after a crash redoes what was done and finishes.
//!
//! One job per file: this one holds the [`Control`] itself (its state, locks, store calls and connection
//! strings); `serving` what the compute host serves; `databases` databases and projects; `branches` branches;
//! `resolution` points in time resolved to a timeline and an LSN; `restore` restores; `operations` the runner
//! the worker calls, the end of operations and waiting for it; `events` the events queued for webhooks;
//! `scale_to_zero` the idle sweep that suspends databases without sessions and records their wakes.
//!
//! [`worker`]: crate::worker
//! [`Action`]: crate::store::operations::Action

mod branches;
mod databases;
mod events;
pub mod expiry;
pub mod leases;
mod operations;
pub mod pageserver_loss;
mod pageserver_move;
mod pageservers;
pub mod placement;
mod repoint;
mod resolution;
mod restore;
mod safekeepers;
pub mod scale_to_zero;
mod schema_diff;
mod serving;
pub mod store_calls;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cambium_types::{Lsn, TimelineId};
use compute::host::ComputeHost;
use parking_lot::Mutex;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::sync::Notify;

use crate::backend::{Backend, BackendError};
use crate::error::ApiError;
use crate::faults::Faults;
use crate::reconcile::ReplicaHealth;
use crate::store::{Store, StoreError};
use crate::worker::Worker;

pub use branches::{BranchChanges, NewBranch, EXPIRY_AHEAD_MAX_DAYS};
pub use databases::Password;
pub use repoint::Followed;
pub use resolution::PointInTime;
pub use schema_diff::{SchemaDiff, SchemaDiffRequest};

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
    /// Where this compute host is reached (`placement`).
    pub placement: placement::PlacementConfig,
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

/// Locks in the map before [`Control::locked`] drops the ones nobody holds or awaits (normally each is dropped
/// with its last guard; this catches those whose waiter was cancelled).
const LOCKS_PRUNE_AT: usize = 1024;
/// Restores' timelines remembered as made by their request, at most (past it the set is cleared: their works make
/// them again, idempotently).
const RESTORE_STORAGE_MADE_MAX: usize = 4096;

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
    worker: Worker<Control>,
    /// What the reconciler last found of the timelines' copies.
    pub(crate) replicas: ReplicaHealth,
    /// Woken when an event queued webhook deliveries (`events`), so the sender sends them at once.
    webhook_wake: Arc<Notify>,
    /// This control plane, for work it hands to a task of its own (`Control::sweep_later`).
    me: std::sync::Weak<Control>,
    /// What this host serves of the placement (`placement`).
    placement: placement::PlacementState,
    /// Timelines of branches created here whose storage is known to be there, to record so with the next branch
    /// creation's row (`Control::create_branch`; no commit of their own on the path).
    creations_confirmed: parking_lot::Mutex<Vec<TimelineId>>,
    /// New timelines of restores whose storage the request made (at once with the operation's row, under the
    /// database's lock), so their operation's work does not make them again (`restore`). At most
    /// [`RESTORE_STORAGE_MADE_MAX`]; a timeline missing here is made by the work (the creation is idempotent).
    restore_storage_made: parking_lot::Mutex<HashSet<TimelineId>>,
    /// The metadata is SQLite: this is the only API process and compute host.
    single_host: bool,
    /// Held while a database's pageserver is read and its computes re-pointed (`repoint`).
    repoint: tokio::sync::Mutex<()>,
    /// Databases with a task settling branch creations the storage did not confirm (`Control::settle_later`):
    /// one task per database at a time, with the branches it settles.
    settling: parking_lot::Mutex<HashMap<String, HashSet<String>>>,
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

impl Control {
    /// The control plane over `store`, the storage behind `backend`, and `host` serving the databases. Call
    /// [`Control::resume`] once to serve what the metadata holds and resume unfinished operations.
    pub fn new(store: Arc<Store>, backend: Backend, host: Arc<ComputeHost>, config: ControlConfig) -> Arc<Control> {
        let single_host = store.dialect() == crate::store::sql::Dialect::Sqlite;
        backend.set_placement_resolver(pageservers::resolver(&store));
        Arc::new_cyclic(|weak| Control {
            single_host,
            store,
            backend,
            host,
            config,
            locks: Mutex::new(HashMap::new()),
            operation_ended: Notify::new(),
            worker: Worker::new(weak.clone()),
            replicas: ReplicaHealth::default(),
            webhook_wake: crate::webhooks::new_wake(),
            me: weak.clone(),
            placement: placement::PlacementState::default(),
            creations_confirmed: parking_lot::Mutex::new(Vec::new()),
            restore_storage_made: parking_lot::Mutex::new(HashSet::new()),
            repoint: tokio::sync::Mutex::new(()),
            settling: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    /// Whether this is the only API process and compute host (SQLite metadata): nothing is forwarded.
    pub fn is_single_host(&self) -> bool {
        self.single_host
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

    /// What wakes the webhook sender when deliveries were queued.
    pub(crate) fn webhook_wake(&self) -> Arc<Notify> {
        Arc::clone(&self.webhook_wake)
    }

    /// The compute host serving the databases.
    pub fn host(&self) -> &Arc<ComputeHost> {
        &self.host
    }

    /// After a start: registers this compute host, serves every database placed on it as its status says
    /// (lazily: stores start on first use; on SQLite metadata every database is placed here) and hands every
    /// operation left `running` that this process can claim (see `store::leases`: all of them on SQLite; on shared
    /// PostgreSQL metadata those of its databases no live process holds) to the worker, which finishes or fails
    /// it.
    pub async fn resume(self: &Arc<Self>) -> Result<(), ApiError> {
        self.register_host().await?;
        self.reconcile_placement().await;
        let store = Arc::clone(&self.store);
        let running = tokio::task::spawn_blocking(move || store.running_operations())
            .await
            .map_err(|_| ApiError::Internal)??;
        let mut claimed = 0_usize;
        for operation in running {
            if self.claim_and_run(operation.id).await? {
                claimed += 1;
            }
        }
        tracing::info!(host = %self.host_id(), operations = claimed, "resuming");
        Ok(())
    }

    /// Claims running operation `id` for this process ([`Store::claim_operation`]) and, if it got it, hands it to
    /// the worker; returns whether it did.
    pub(crate) async fn claim_and_run(&self, id: String) -> Result<bool, ApiError> {
        let claim_id = id.clone();
        if !self.blocking(move |store| store.claim_operation(&claim_id)).await? {
            return Ok(false);
        }
        self.worker.resume(id);
        Ok(true)
    }

    /// Runs a store call that only reads, on this thread when it can do so without waiting
    /// ([`store_calls::read`]); `f` must not write.
    pub async fn read<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: Fn(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        store_calls::read(&self.store, f).await
    }

    /// Runs a store call on the blocking pool ([`store_calls::blocking`]).
    pub async fn blocking<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        store_calls::blocking(&self.store, f).await
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
/// The first wait between tries; it doubles (100 ms … 1.6 s between the six tries, about 3 s in all).
const RETRY_FIRST_WAIT_MS: u64 = 100;
