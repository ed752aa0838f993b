//! `Compute`: what the control plane runs for one database (DESIGN §5): one [`RemotePageStore`] per branch it
//! serves, registered with the VFS under the branch's connection name (`db_…` for the database's default
//! branch, `br_…` for a branch), and a PostgreSQL listener whose database name picks the branch.
//!
//! - **Time travel.** The database name `<name>@<LSN>` (`br_x@0/16B3748`) opens a read-only connection to
//!   branch `name` as it was at that LSN. Its store is a read-only [`RemotePageStore`] at that LSN, started on
//!   first use and registered with the VFS under the full name; the SQLite connection also gets
//!   `PRAGMA query_only`, so a write fails in SQLite before it reaches the store (which refuses commits too).
//!   At most [`TIME_TRAVEL_STORES_MAX`] such stores stay registered: the oldest is unregistered when a new one
//!   comes (connections open on it keep it until they close). The timestamp form comes later.
//! - **Lifecycle.** There is no suspend/resume: [`Compute::stop`] shuts the listener (closing every client
//!   connection), unregisters every name and drops the stores; resuming is a fresh [`Compute::start`], which
//!   campaigns again and so starts from what the safekeepers committed.
//!
//! **Boundary:** the VFS registry is process-wide, so two computes in one process must serve distinct names.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use storage::{Lsn, TenantId, TimelineId};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::pg::{SessionError, SessionFactory, VfsSessionFactory};
use crate::remote_store::{RemotePageStore, RemotePageStoreConfig, RemoteStoreError};
use crate::vfs::{self, VfsError};

/// Read-only time-travel stores kept registered at once, at most.
pub const TIME_TRAVEL_STORES_MAX: usize = 8;

/// One branch a compute serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchConfig {
    /// The connection name: the database name clients give (`db_…` or `br_…`).
    pub name: String,
    /// The branch's timeline.
    pub timeline_id: TimelineId,
    /// Where the timeline's WAL starts.
    pub start_lsn: Lsn,
}

/// What a compute serves and where.
#[derive(Clone, Debug)]
pub struct ComputeConfig {
    /// Address of the PostgreSQL listener (`127.0.0.1:0` picks a free port; see [`Compute::address`]).
    pub listen: String,
    /// Safekeeper addresses.
    pub safekeepers: Vec<String>,
    /// The pageserver's address.
    pub pageserver: String,
    /// The tenant (the database of the API).
    pub tenant_id: TenantId,
    /// The branches served, each under its connection name.
    pub branches: Vec<BranchConfig>,
    /// Users and their passwords.
    pub passwords: HashMap<String, String>,
    /// Pages cached per store, at most.
    pub page_cache_capacity_pages: usize,
}

impl ComputeConfig {
    /// The store configuration of `branch`: [`RemotePageStoreConfig::new`]'s timeouts, this config's cache.
    fn store_config(&self, branch: &BranchConfig) -> RemotePageStoreConfig {
        let mut config = RemotePageStoreConfig::new(
            self.safekeepers.clone(),
            self.pageserver.clone(),
            self.tenant_id,
            branch.timeline_id,
            branch.start_lsn,
        );
        config.page_cache_capacity_pages = self.page_cache_capacity_pages;
        config
    }
}

/// Why a compute could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ComputeError {
    /// A branch's connection name cannot be served.
    #[error("invalid branch name {0:?}: {1}")]
    InvalidBranchName(String, &'static str),
    /// A branch's store did not start.
    #[error("starting the store of {name:?}: {source}")]
    Store {
        /// The branch's connection name.
        name: String,
        /// Why.
        source: RemoteStoreError,
    },
    /// A name could not be registered with the VFS.
    #[error("registering with the VFS: {0}")]
    Register(#[from] VfsError),
    /// The listener could not be bound.
    #[error("listening on {0}: {1}")]
    Listen(String, std::io::Error),
}

/// A running compute; see the module doc.
pub struct Compute {
    address: SocketAddr,
    sessions: Arc<ComputeSessions>,
    /// Sent (or dropped) to stop the listener.
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Compute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compute")
            .field("address", &self.address)
            .field("branches", &self.sessions.branches.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Compute {
    /// Starts one store per branch (each campaigns, so this is where the compute's history begins), registers
    /// them with the VFS, and serves PostgreSQL clients on `config.listen`. On error nothing stays registered.
    pub async fn start(config: ComputeConfig) -> Result<Compute, ComputeError> {
        validate_branch_names(&config.branches)?;
        let mut sessions = ComputeSessions {
            config: config.clone(),
            branches: HashMap::new(),
            time_travel: Mutex::new(VecDeque::new()),
            vfs: VfsSessionFactory::new(config.passwords.clone()),
        };
        let listener = match start_branches(&config, &mut sessions).await {
            Ok(()) => bind(&config.listen).await,
            Err(e) => Err(e),
        };
        let (listener, address) = match listener {
            Ok(bound) => bound,
            Err(e) => {
                // Nothing stays registered after a failed start.
                sessions.unregister_all();
                return Err(e);
            }
        };
        let sessions = Arc::new(sessions);
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let factory: Arc<dyn SessionFactory> = sessions.clone();
        let server = tokio::spawn(crate::pg::serve(listener, factory, async move {
            // A send or a dropped sender both stop the listener.
            let _ = shutdown_rx.await;
        }));
        tracing::info!(%address, branches = sessions.branches.len(), "compute started");
        Ok(Compute {
            address,
            sessions,
            shutdown: Some(shutdown_tx),
            server: Some(server),
        })
    }

    /// The address the PostgreSQL listener is bound to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The store of the branch served as `name`, if any.
    pub fn store(&self, name: &str) -> Option<Arc<RemotePageStore>> {
        self.sessions.branches.get(name).map(|(_, store)| store.lock().clone())
    }

    /// Stops serving: shuts the listener and every client connection, unregisters every name, drops the
    /// stores. To serve again, [`Compute::start`] anew.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            if let Err(error) = server.await {
                tracing::warn!(%error, "the pg listener task ended badly");
            }
        }
        tracing::info!(address = %self.address, "compute stopped");
        // `Drop` unregisters; the stores go with the last connection that holds them.
    }
}

impl Drop for Compute {
    fn drop(&mut self) {
        // Dropping the sender stops the listener. Only the compute unregisters (never its sessions' drop, which
        // the listener task may run after a new compute registered the same names).
        self.shutdown.take();
        self.sessions.unregister_all();
    }
}

/// Starts and registers the store of every branch, recording each in `sessions` as it is registered.
async fn start_branches(config: &ComputeConfig, sessions: &mut ComputeSessions) -> Result<(), ComputeError> {
    for branch in &config.branches {
        let store = RemotePageStore::start(config.store_config(branch))
            .await
            .map_err(|source| ComputeError::Store {
                name: branch.name.clone(),
                source,
            })?;
        vfs::register_database(&branch.name, store.clone())?;
        sessions
            .branches
            .insert(branch.name.clone(), (branch.clone(), Mutex::new(store)));
    }
    Ok(())
}

async fn bind(listen: &str) -> Result<(TcpListener, SocketAddr), ComputeError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| ComputeError::Listen(listen.to_owned(), e))?;
    let address = listener
        .local_addr()
        .map_err(|e| ComputeError::Listen(listen.to_owned(), e))?;
    Ok((listener, address))
}

fn validate_branch_names(branches: &[BranchConfig]) -> Result<(), ComputeError> {
    let mut seen = HashSet::new();
    for branch in branches {
        let invalid = |reason| Err(ComputeError::InvalidBranchName(branch.name.clone(), reason));
        if branch.name.is_empty() || !branch.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return invalid("a connection name is [A-Za-z0-9_]+");
        }
        if !seen.insert(branch.name.as_str()) {
            return invalid("served twice");
        }
    }
    Ok(())
}

/// The compute's [`SessionFactory`]: branch names and their time-travel forms, through [`VfsSessionFactory`].
struct ComputeSessions {
    config: ComputeConfig,
    /// Connection name → branch and its store.
    branches: HashMap<String, (BranchConfig, Mutex<Arc<RemotePageStore>>)>,
    /// Registered time-travel names, oldest first; at most [`TIME_TRAVEL_STORES_MAX`].
    time_travel: Mutex<VecDeque<String>>,
    vfs: VfsSessionFactory,
}

impl ComputeSessions {
    fn unregister_all(&self) {
        for name in self.branches.keys() {
            vfs::unregister_database(name);
        }
        for name in self.time_travel.lock().drain(..) {
            vfs::unregister_database(&name);
        }
    }

    /// If the branch's store failed (an ambiguous commit: DESIGN §5 — never guess), replaces it with a fresh one
    /// that starts again from what the safekeepers committed (a new election; the pageserver serves the rest).
    /// Sessions still open on the failed store keep failing; new sessions get the fresh one. Blocks.
    fn restart_if_failed(&self, name: &str) -> Result<(), String> {
        let Some((branch_config, store)) = self.branches.get(name) else {
            return Err(format!("no branch {name:?}"));
        };
        let mut current = store.lock();
        let Some(reason) = current.failure() else {
            return Ok(());
        };
        tracing::warn!(branch = %name, %reason, "restarting the branch's store from what the safekeepers committed");
        // Called on a blocking thread; the store's work runs on its own runtime, so any executor can wait.
        let fresh = futures::executor::block_on(RemotePageStore::start(self.config.store_config(branch_config)))
            .map_err(|e| format!("restarting after a failed commit: {e}"))?;
        vfs::unregister_database(name);
        vfs::register_database(name, fresh.clone()).map_err(|e| e.to_string())?;
        *current = fresh;
        Ok(())
    }

    /// The LSN a time-travel suffix names: an LSN (`0/16B3748`) or an RFC 3339 timestamp
    /// (`2026-11-22T13:00:00Z`), resolved by the pageserver to the newest commit at or before it. A timestamp
    /// before the branch's own first commit resolves into its ancestor: refused here (connect to the parent).
    fn time_travel_lsn(&self, branch: &str, text: &str) -> Result<Lsn, String> {
        if let Ok(lsn) = text.parse::<Lsn>() {
            return Ok(lsn);
        }
        let timestamp: jiff::Timestamp = text
            .parse()
            .map_err(|_| format!("{text:?} is neither an LSN (0/16B3748) nor an RFC 3339 timestamp"))?;
        let timestamp_us =
            u64::try_from(timestamp.as_microsecond()).map_err(|_| "a timestamp before 1970".to_owned())?;
        let Some((branch_config, store)) = self.branches.get(branch) else {
            return Err(format!("no branch {branch:?}"));
        };
        let store = store.lock().clone();
        let (timeline, lsn) = store.lsn_for_timestamp(timestamp_us).map_err(|e| e.to_string())?;
        if timeline != branch_config.timeline_id {
            return Err(format!(
                "{text} is before this branch's first commit; connect to its parent"
            ));
        }
        Ok(lsn)
    }

    /// Registers the read-only store of `name` (`branch@lsn`) unless it already is. Blocks.
    fn ensure_time_travel(&self, name: &str, branch: &str, lsn: Lsn) -> Result<(), String> {
        let Some((branch_config, store)) = self.branches.get(branch) else {
            return Err(format!("no branch {branch:?}"));
        };
        let store = store.lock().clone();
        if vfs::is_registered(name) {
            return Ok(());
        }
        if lsn < branch_config.start_lsn {
            return Err(format!(
                "LSN {lsn} is before the branch starts at {}",
                branch_config.start_lsn
            ));
        }
        let now = store.read_lsn();
        if lsn > now {
            return Err(format!("LSN {lsn} is in the future: the branch is at {now}"));
        }
        // Called on a blocking thread; the store's work runs on its own runtime, so any executor can wait.
        let started = futures::executor::block_on(RemotePageStore::start_read_only(
            self.config.store_config(branch_config),
            lsn,
        ))
        .map_err(|e| e.to_string())?;
        let mut registered = self.time_travel.lock();
        match vfs::register_database(name, started) {
            Ok(()) => registered.push_back(name.to_owned()),
            // Another connection registered it meanwhile: use that one, drop ours.
            Err(VfsError::AlreadyRegistered(_)) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
        while registered.len() > TIME_TRAVEL_STORES_MAX {
            if let Some(oldest) = registered.pop_front() {
                // Connections open on it keep its store until they close.
                vfs::unregister_database(&oldest);
            }
        }
        Ok(())
    }
}

/// A session error carrying `message` (SQLite's "cannot open").
fn cannot_open(message: String) -> SessionError {
    let code = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN);
    SessionError::Open(rusqlite::Error::SqliteFailure(code, Some(message)))
}

impl SessionFactory for ComputeSessions {
    fn password(&self, user: &str) -> Option<String> {
        self.vfs.password(user)
    }

    fn open(&self, user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
        let Some((branch, lsn_text)) = database.split_once('@') else {
            if !self.branches.contains_key(database) {
                return Err(SessionError::InvalidDatabaseName(database.to_owned()));
            }
            self.restart_if_failed(database)
                .map_err(|reason| cannot_open(format!("{database}: {reason}")))?;
            return self.vfs.open(user, database);
        };
        if !self.branches.contains_key(branch) {
            return Err(SessionError::InvalidDatabaseName(database.to_owned()));
        }
        let lsn = self
            .time_travel_lsn(branch, lsn_text)
            .map_err(|reason| cannot_open(format!("time travel to {database}: {reason}")))?;
        // The canonical spelling, so `0/16b3748` and `0/16B3748` share one store.
        let name = format!("{branch}@{lsn}");
        self.ensure_time_travel(&name, branch, lsn)
            .map_err(|reason| cannot_open(format!("time travel to {database}: {reason}")))?;
        let connection = self.vfs.open(user, &name)?;
        connection.pragma_update(None, "query_only", true)?;
        Ok(connection)
    }
}
