//! `ComputeHost`: one PostgreSQL listener serving the branches of any number of databases (tenants) in one
//! process, whose set of branches changes at run time (DESIGN §5). The control plane attaches, re-points and
//! detaches branches while clients stay connected to the others.
//!
//! - **Names.** A *branch* is served under its connection name (`br_…`) with a [`BranchTarget`] (tenant,
//!   timeline, start LSN) and one [`RemotePageStore`], registered with the VFS under that name. An *alias*
//!   (`db_…`) is another connection name for a branch, resolved in [`SessionFactory::open`] and never
//!   registered; re-pointing it changes what new sessions get. A *refusal* makes a name (served or not) refuse
//!   sessions with a given reason (a suspended database, say).
//! - **Stores.** [`ComputeHost::attach`] starts the store at once (it campaigns, so the branch is writable
//!   when it returns); [`ComputeHost::define`] starts it on the first session. A store that failed by itself
//!   (an ambiguous commit: never guess) is restarted from what the safekeepers committed when the next session
//!   opens. Replacing or detaching a branch *closes* its store ([`RemotePageStore::close`]): sessions still
//!   open on it fail with the reason, and nothing restarts it, because a closed branch is no longer in the map.
//! - **Time travel.** `<name>@<LSN>` or `<name>@<RFC 3339 timestamp>` opens a read-only connection to the
//!   branch as it was then: a read-only store at that LSN registered under `<branch>@<LSN>` (`PRAGMA
//!   query_only` too). Each branch keeps at most [`TIME_TRAVEL_STORES_MAX`] of them, least recently used
//!   unregistered first (connections open on one keep it until they close); they go with their branch.
//!
//! **Invariant:** a branch name is registered with the VFS if and only if that branch is in the host's map and
//! its store is running; a time-travel name if and only if it is in its (current) branch's list. Both change
//! only under the host's name lock, so a session never reaches a replaced branch's store through the VFS.
//!
//! **Concurrency.** Lock order: a branch's `starting` lock (held across that branch's store start, so two
//! sessions never start it twice; other branches start in parallel) → the host's `names` lock → a branch's
//! `state` lock → the VFS registry. The last three are held only for map updates, never across a start or an
//! await.
//!
//! **Boundary:** the VFS registry is process-wide, so two hosts in one process must serve distinct names.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use cambium_types::{Lsn, TenantId, TimelineId};
use parking_lot::{Mutex, RwLock};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::ComputeError;
use crate::pg::{ScramVerifier, SessionError, SessionFactory, VfsSessionFactory};
use crate::remote_store::{RemotePageStore, RemotePageStoreConfig};
use crate::vfs;

/// Read-only time-travel stores kept registered per branch, at most.
pub const TIME_TRAVEL_STORES_MAX: usize = 8;

/// What a host serves with and where it listens.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Address of the PostgreSQL listener (`127.0.0.1:0` picks a free port; see [`ComputeHost::address`]).
    pub listen: String,
    /// Safekeeper addresses, shared by every branch.
    pub safekeepers: Vec<String>,
    /// The pageserver's address, shared by every branch.
    pub pageserver: String,
    /// Users and their passwords (user → password), for every name served.
    pub passwords: HashMap<String, String>,
    /// Pages cached per store, at most.
    pub page_cache_capacity_pages: usize,
    /// A branch's store with no session open for this long is stopped (its runtime, threads, connections
    /// and cache go); the next session starts it again. 0 keeps every started store running.
    pub idle_store_timeout_ms: u64,
    /// The defaults of every session's timeouts (`statement_timeout`, `idle_in_transaction_session_timeout`).
    pub session_defaults: crate::pg::SessionDefaults,
    /// TLS for the PostgreSQL listener (`pg::tls`); `None` serves plain connections only.
    pub tls: Option<crate::pg::tls::ServerTls>,
    /// Sessions one database (tenant) may have open at once, over all its branches and names (0: no limit
    /// but the listener's), so one database cannot take every connection of the host.
    pub connections_per_database_max: usize,
}

/// The default [`HostConfig::connections_per_database_max`].
pub const CONNECTIONS_PER_DATABASE_MAX_DEFAULT: usize = 256;

/// How often the idle-store reaper looks, at most (it looks at least twice per idle timeout).
const IDLE_SCAN_INTERVAL_MAX_MS: u64 = 10_000;
/// Most password verifiers remembered by `set_credentials` (cleared when full).
const VERIFIER_MEMO_MAX: usize = 4096;

/// Where a branch's data lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchTarget {
    /// The tenant (the database of the API).
    pub tenant_id: TenantId,
    /// The branch's timeline.
    pub timeline_id: TimelineId,
    /// Where the timeline's WAL starts.
    pub start_lsn: Lsn,
}

/// A running host; see the module doc. Methods take `&self`, so it can be shared behind an `Arc`; dropping it
/// (the last `Arc`) stops serving like [`ComputeHost::stop`] without waiting for the listener task.
pub struct ComputeHost {
    address: SocketAddr,
    shared: Arc<HostShared>,
    /// Sent (or dropped) to stop the listener.
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ComputeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = self.shared.names.read();
        let mut branches: Vec<&String> = names.branches.keys().collect();
        branches.sort();
        f.debug_struct("ComputeHost")
            .field("address", &self.address)
            .field("branches", &branches)
            .field("aliases", &names.aliases.len())
            .finish_non_exhaustive()
    }
}

impl ComputeHost {
    /// Binds the listener and serves PostgreSQL clients on it; no branch is served yet, so every name is
    /// unknown until [`ComputeHost::attach`], [`ComputeHost::define`] or [`ComputeHost::set_alias`].
    pub async fn start(config: HostConfig) -> Result<ComputeHost, ComputeError> {
        let listener = TcpListener::bind(&config.listen)
            .await
            .map_err(|e| ComputeError::Listen(config.listen.clone(), e))?;
        let address = listener
            .local_addr()
            .map_err(|e| ComputeError::Listen(config.listen.clone(), e))?;
        let shared = Arc::new(HostShared {
            vfs: VfsSessionFactory::new(config.passwords.clone()),
            config,
            names: RwLock::new(Names::default()),
            credentials: RwLock::new(HashMap::new()),
            refusals_without_credentials: RwLock::new(std::collections::HashSet::new()),
            verifier_memo: parking_lot::Mutex::new(HashMap::new()),
            sessions_per_tenant: Arc::default(),
        });
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let factory: Arc<dyn SessionFactory> = shared.clone();
        let serve_config = crate::pg::ServeConfig {
            session_defaults: shared.config.session_defaults,
            tls: shared.config.tls.clone(),
        };
        let server = tokio::spawn(crate::pg::serve_with(listener, factory, serve_config, async move {
            // A send or a dropped sender both stop the listener.
            let _ = shutdown_rx.await;
        }));
        if shared.config.idle_store_timeout_ms > 0 {
            tokio::spawn(reap_idle_stores(Arc::downgrade(&shared)));
        }
        tracing::info!(%address, "compute host started");
        Ok(ComputeHost {
            address,
            shared,
            shutdown: Some(shutdown_tx),
            server: Some(server),
        })
    }

    /// Gives connection name `name` (a branch or an alias, with or without a time-travel suffix) its own
    /// credentials: from now on only `user` with `password` opens it, not the users of [`HostConfig::passwords`].
    ///
    /// Only a SCRAM-SHA-256 verifier of the password is kept; the verifier of a password seen before is reused
    /// (PBKDF2 costs milliseconds, and every branch of a database shares its password).
    pub fn set_credentials(&self, name: &str, user: &str, password: &str) {
        let digest = ring::digest::digest(&ring::digest::SHA256, password.as_bytes());
        let key: Vec<u8> = digest.as_ref().to_vec();
        let known = self.shared.verifier_memo.lock().get(&key).cloned();
        let verifier = match known {
            Some(verifier) => verifier,
            None => match ScramVerifier::from_password(password, crate::pg::scram::ITERATIONS_DEFAULT) {
                Ok(verifier) => {
                    let verifier = Arc::new(verifier);
                    let mut memo = self.shared.verifier_memo.lock();
                    if memo.len() >= VERIFIER_MEMO_MAX {
                        memo.clear();
                    }
                    memo.insert(key, verifier.clone());
                    verifier
                }
                Err(error) => {
                    // Nobody can log in to it rather than anybody.
                    tracing::error!(%name, %error, "no verifier for a password");
                    self.shared.credentials.write().remove(name);
                    self.shared.refusals_without_credentials.write().insert(name.to_owned());
                    return;
                }
            },
        };
        self.set_credentials_verifier(name, user, verifier);
    }

    /// Gives connection name `name` its own credentials as a SCRAM-SHA-256 verifier (see
    /// [`ComputeHost::set_credentials`]).
    pub fn set_credentials_verifier(&self, name: &str, user: &str, verifier: Arc<ScramVerifier>) {
        self.shared.refusals_without_credentials.write().remove(name);
        self.shared
            .credentials
            .write()
            .insert(name.to_owned(), (user.to_owned(), verifier));
    }

    /// Takes back `name`'s own credentials (the users of [`HostConfig::passwords`] open it again).
    pub fn remove_credentials(&self, name: &str) {
        self.shared.credentials.write().remove(name);
        self.shared.refusals_without_credentials.write().remove(name);
    }

    /// The address the PostgreSQL listener is bound to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves `target` under the connection name `name` (`[A-Za-z0-9_]+`) and starts its store now (it
    /// campaigns), so the branch is writable when this returns `Ok`. If `name` was served with another target
    /// (a restore moved the branch to a new timeline), the old store is closed first: its open sessions fail
    /// with a clear error and it refuses further commits; new sessions get the new store. With the same target
    /// this only makes sure the store runs (restarting it if it failed by itself). Clears a refusal of `name`.
    /// On a start error the branch stays defined (as by [`ComputeHost::define`]): the next session or attach
    /// tries again.
    pub async fn attach(&self, name: &str, target: BranchTarget) -> Result<(), ComputeError> {
        let branch = self.shared.define(name, target)?;
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.ensure_started(&branch).map(drop))
            .await
            .map_err(|e| ComputeError::Task(e.to_string()))?
    }

    /// Like [`ComputeHost::attach`] but lazy: the store starts when the first session for `name` opens (on that
    /// session's blocking thread). Replacing another target closes its store now, as attach does.
    pub fn define(&self, name: &str, target: BranchTarget) -> Result<(), ComputeError> {
        self.shared.define(name, target).map(drop)
    }

    /// Stops serving branch `name` and its time-travel names: closes its stores (open sessions fail with a
    /// clear error) and unregisters them. Aliases pointing to it stay, and refuse as unknown until `name` is
    /// served again. Returns whether `name` was a served branch.
    pub fn detach(&self, name: &str) -> bool {
        let mut names = self.shared.names.write();
        let Some(branch) = names.branches.remove(name) else {
            return false;
        };
        retire(&branch, &format!("branch {name} is no longer served here; reconnect"));
        tracing::info!(branch = %name, "branch detached");
        true
    }

    /// Makes `alias` (`[A-Za-z0-9_]+`, not a branch's name) another connection name for branch `target`,
    /// read-write, with the time-travel forms too. Re-pointing an alias affects only sessions opened afterwards.
    /// `target` need not be served yet (sessions then fail as unknown). Clears a refusal of `alias`.
    pub fn set_alias(&self, alias: &str, target: &str) -> Result<(), ComputeError> {
        validate_name(alias)?;
        validate_name(target)?;
        let mut names = self.shared.names.write();
        if names.branches.contains_key(alias) {
            return Err(ComputeError::NameTaken(alias.to_owned(), "a branch"));
        }
        if names.aliases.contains_key(target) {
            return Err(ComputeError::NameTaken(
                target.to_owned(),
                "an alias, and aliases name branches",
            ));
        }
        names.aliases.insert(alias.to_owned(), target.to_owned());
        names.refusals.remove(alias);
        Ok(())
    }

    /// Removes the alias `alias`, if any; sessions already open through it stay open.
    pub fn remove_alias(&self, alias: &str) {
        self.shared.names.write().aliases.remove(alias);
    }

    /// Makes the name `name` (a branch, an alias, or neither) refuse new sessions, its time-travel forms
    /// included, with an error whose message contains `reason`. Sessions already open are not affected. Lasts
    /// until [`ComputeHost::clear_refusal`], or an attach, define or set_alias of `name`.
    pub fn refuse(&self, name: &str, reason: &str) {
        self.shared
            .names
            .write()
            .refusals
            .insert(name.to_owned(), reason.to_owned());
    }

    /// Lets `name` open sessions again (if it is served).
    pub fn clear_refusal(&self, name: &str) {
        self.shared.names.write().refusals.remove(name);
    }

    /// The running store of branch `name` (not an alias); `None` if `name` is not served or its store has not
    /// started yet.
    pub fn store(&self, name: &str) -> Option<Arc<RemotePageStore>> {
        let names = self.shared.names.read();
        let branch = names.branches.get(name)?;
        let state = branch.state.lock();
        state.store.clone()
    }

    /// Stops serving: shuts the listener and every client connection, then closes and unregisters every
    /// branch and time-travel name. To serve again, [`ComputeHost::start`] anew.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            if let Err(error) = server.await {
                tracing::warn!(%error, "the pg listener task ended badly");
            }
        }
        self.shared.retire_all();
        tracing::info!(address = %self.address, "compute host stopped");
    }
}

impl Drop for ComputeHost {
    fn drop(&mut self) {
        // Dropping the sender stops the listener. Only the host unregisters (never its sessions' drop, which
        // the listener task may run after a new host registered the same names).
        self.shutdown.take();
        self.shared.retire_all();
    }
}

/// One served branch. Replaced as a whole when its target changes, so a session holding the old one can
/// tell (`Arc::ptr_eq` against the map) that it is no longer current.
struct Branch {
    name: String,
    target: BranchTarget,
    /// Held across a start or restart of this branch's store, and only then.
    starting: Mutex<()>,
    state: Mutex<BranchState>,
}

#[derive(Default)]
struct BranchState {
    /// The running store (registered with the VFS under the branch's name); `None` before the first start.
    store: Option<Arc<RemotePageStore>>,
    /// Registered time-travel names and their stores, least recently used first; at most
    /// [`TIME_TRAVEL_STORES_MAX`].
    time_travel: VecDeque<(String, Arc<RemotePageStore>)>,
    /// Why the branch stopped being served, once it has: it never starts a store again.
    closed: Option<String>,
    /// When the idle-store reaper first saw the running store with no session open (reset when one is).
    idle_since: Option<std::time::Instant>,
}

/// The host's names, under one lock.
#[derive(Default)]
struct Names {
    /// Connection name → branch.
    branches: HashMap<String, Arc<Branch>>,
    /// Alias → branch connection name.
    aliases: HashMap<String, String>,
    /// Name → why it refuses sessions.
    refusals: HashMap<String, String>,
}

/// What a requested connection name resolves to.
enum Resolved {
    Branch(Arc<Branch>),
    Refused(String),
    Unknown,
}

/// The host's [`SessionFactory`] and the state it shares with [`ComputeHost`].
struct HostShared {
    config: HostConfig,
    names: RwLock<Names>,
    vfs: VfsSessionFactory,
    /// Connection name → (user, password verifier), for names with their own credentials.
    credentials: RwLock<HashMap<String, (String, Arc<ScramVerifier>)>>,
    /// Names whose credentials could not be made: nobody logs in to them.
    refusals_without_credentials: RwLock<std::collections::HashSet<String>>,
    /// SHA-256 of a password → its verifier, for passwords given to `set_credentials` before.
    verifier_memo: parking_lot::Mutex<HashMap<Vec<u8>, Arc<ScramVerifier>>>,
    /// Sessions open per database (tenant), for [`HostConfig::connections_per_database_max`].
    sessions_per_tenant: Arc<parking_lot::Mutex<HashMap<TenantId, usize>>>,
}

impl HostShared {
    fn store_config(&self, target: &BranchTarget) -> RemotePageStoreConfig {
        let mut config = RemotePageStoreConfig::new(
            self.config.safekeepers.clone(),
            self.config.pageserver.clone(),
            target.tenant_id,
            target.timeline_id,
            target.start_lsn,
        );
        config.page_cache_capacity_pages = self.config.page_cache_capacity_pages;
        config
    }

    /// Makes `name` serve `target` and returns its (current) branch: the existing one if the target is the
    /// same, else a new one without a store, the old one retired. Clears a refusal of `name`.
    fn define(&self, name: &str, target: BranchTarget) -> Result<Arc<Branch>, ComputeError> {
        validate_name(name)?;
        let mut names = self.names.write();
        if names.aliases.contains_key(name) {
            return Err(ComputeError::NameTaken(name.to_owned(), "an alias"));
        }
        names.refusals.remove(name);
        if let Some(existing) = names.branches.get(name) {
            if existing.target == target {
                return Ok(existing.clone());
            }
        }
        let branch = Arc::new(Branch {
            name: name.to_owned(),
            target,
            starting: Mutex::new(()),
            state: Mutex::new(BranchState::default()),
        });
        if let Some(old) = names.branches.insert(name.to_owned(), branch.clone()) {
            let reason = format!(
                "branch {name} moved from timeline {} to timeline {}; reconnect",
                old.target.timeline_id, branch.target.timeline_id
            );
            tracing::info!(branch = %name, %reason, "branch replaced");
            retire(&old, &reason);
        }
        Ok(branch)
    }

    /// Closes and unregisters every branch.
    fn retire_all(&self) {
        let mut names = self.names.write();
        for (_, branch) in names.branches.drain() {
            retire(&branch, "the compute stopped serving");
        }
    }

    /// Stops the stores of branches with no session open for `timeout` (seen unused by two scans at least that
    /// far apart): unregistered only if still unused (atomically with every open) and dropped. A branch whose
    /// store is starting, or whose sessions are opening (both hold `starting`), is skipped this round.
    fn reap_idle_stores(&self, now: std::time::Instant, timeout: std::time::Duration) {
        let branches: Vec<Arc<Branch>> = self.names.read().branches.values().cloned().collect();
        for branch in branches {
            let Some(_starting) = branch.starting.try_lock() else {
                continue;
            };
            let stopped = {
                let mut state = branch.state.lock();
                if state.store.is_none() || !vfs::is_unused(&branch.name) {
                    state.idle_since = None;
                    continue;
                }
                match state.idle_since {
                    None => {
                        state.idle_since = Some(now);
                        None
                    }
                    Some(since) if now.duration_since(since) < timeout => None,
                    Some(_) => {
                        state.idle_since = None;
                        if vfs::unregister_if_unused(&branch.name) {
                            state.store.take()
                        } else {
                            None // a session opened just now
                        }
                    }
                }
            };
            if let Some(store) = stopped {
                tracing::info!(branch = %branch.name, "stopped an idle branch's store");
                drop(store);
            }
        }
    }

    fn is_current(names: &Names, branch: &Arc<Branch>) -> bool {
        names
            .branches
            .get(&branch.name)
            .is_some_and(|current| Arc::ptr_eq(current, branch))
    }

    fn resolve(&self, requested: &str) -> Resolved {
        let names = self.names.read();
        if let Some(reason) = names.refusals.get(requested) {
            return Resolved::Refused(reason.clone());
        }
        let branch_name = names.aliases.get(requested).map_or(requested, String::as_str);
        if let Some(reason) = names.refusals.get(branch_name) {
            return Resolved::Refused(reason.clone());
        }
        match names.branches.get(branch_name) {
            Some(branch) => Resolved::Branch(branch.clone()),
            None => Resolved::Unknown,
        }
    }

    /// The running store of `branch`, starting it if it has not started and restarting it from what the
    /// safekeepers committed if it failed by itself (DESIGN §5: an ambiguous commit is never guessed; a new
    /// election starts again from the committed WAL, the pageserver serves the rest). Sessions still open on a
    /// failed store keep failing. Blocks (the store's work runs on its own runtime, so any thread can wait).
    fn ensure_started(&self, branch: &Arc<Branch>) -> Result<Arc<RemotePageStore>, ComputeError> {
        let starting = branch.starting.lock();
        self.ensure_started_holding(branch, &starting)
    }

    /// [`HostShared::ensure_started`] for a caller that holds `branch.starting` (`_starting` proves it).
    fn ensure_started_holding(
        &self,
        branch: &Arc<Branch>,
        _starting: &parking_lot::MutexGuard<'_, ()>,
    ) -> Result<Arc<RemotePageStore>, ComputeError> {
        {
            let state = branch.state.lock();
            if let Some(reason) = &state.closed {
                return Err(ComputeError::Detached(branch.name.clone(), reason.clone()));
            }
            if let Some(store) = &state.store {
                match store.failure() {
                    None => return Ok(store.clone()),
                    Some(reason) => {
                        tracing::warn!(branch = %branch.name, %reason,
                            "restarting the branch's store from what the safekeepers committed");
                    }
                }
            }
        }
        let fresh = futures::executor::block_on(RemotePageStore::start(self.store_config(&branch.target))).map_err(
            |source| ComputeError::Store {
                name: branch.name.clone(),
                source,
            },
        )?;
        let names = self.names.read();
        let mut state = branch.state.lock();
        if let Some(reason) = &state.closed {
            // Retired while the store started: it must never serve.
            fresh.close(reason);
            return Err(ComputeError::Detached(branch.name.clone(), reason.clone()));
        }
        assert!(
            HostShared::is_current(&names, branch),
            "branch {} is not closed but not current",
            branch.name
        );
        if state.store.take().is_some() {
            vfs::unregister_database(&branch.name);
        }
        vfs::register_database(&branch.name, fresh.clone())?;
        state.store = Some(fresh.clone());
        state.idle_since = None;
        Ok(fresh)
    }

    /// The LSN a time-travel suffix names: an LSN (`0/16B3748`) or an RFC 3339 timestamp
    /// (`2026-11-22T13:00:00Z`), resolved by the pageserver to the newest commit at or before it. A timestamp
    /// before the branch's own first commit resolves into its ancestor: refused here (connect to the parent).
    fn time_travel_lsn(branch: &Branch, store: &RemotePageStore, text: &str) -> Result<Lsn, String> {
        if let Ok(lsn) = text.parse::<Lsn>() {
            return Ok(lsn);
        }
        let timestamp: jiff::Timestamp = text
            .parse()
            .map_err(|_| format!("{text:?} is neither an LSN (0/16B3748) nor an RFC 3339 timestamp"))?;
        let timestamp_us =
            u64::try_from(timestamp.as_microsecond()).map_err(|_| "a timestamp before 1970".to_owned())?;
        let (timeline, lsn) = store.lsn_for_timestamp(timestamp_us).map_err(|e| e.to_string())?;
        if timeline != branch.target.timeline_id {
            return Err(format!(
                "{text} is before this branch's first commit; connect to its parent"
            ));
        }
        Ok(lsn)
    }

    /// Registers the read-only store of `name` (`branch@lsn`) for `branch` unless it already is (then it
    /// becomes the most recently used). Blocks.
    fn ensure_time_travel(
        &self,
        branch: &Arc<Branch>,
        store: &RemotePageStore,
        name: &str,
        lsn: Lsn,
    ) -> Result<(), String> {
        if touch_time_travel(&mut branch.state.lock(), name) {
            return Ok(());
        }
        if lsn < branch.target.start_lsn {
            return Err(format!(
                "LSN {lsn} is before the branch starts at {}",
                branch.target.start_lsn
            ));
        }
        let now = store.read_lsn();
        if lsn > now {
            return Err(format!("LSN {lsn} is in the future: the branch is at {now}"));
        }
        let started =
            futures::executor::block_on(RemotePageStore::start_read_only(self.store_config(&branch.target), lsn))
                .map_err(|e| e.to_string())?;
        let names = self.names.read();
        let mut state = branch.state.lock();
        if let Some(reason) = &state.closed {
            started.close(reason);
            return Err(reason.clone());
        }
        if touch_time_travel(&mut state, name) {
            // Another session registered it meanwhile: use that one, drop ours.
            return Ok(());
        }
        assert!(
            HostShared::is_current(&names, branch),
            "branch {} is not closed but not current",
            branch.name
        );
        vfs::register_database(name, started.clone()).map_err(|e| e.to_string())?;
        state.time_travel.push_back((name.to_owned(), started));
        while state.time_travel.len() > TIME_TRAVEL_STORES_MAX {
            if let Some((oldest, _)) = state.time_travel.pop_front() {
                // Connections open on it keep its store until they close.
                vfs::unregister_database(&oldest);
            }
        }
        Ok(())
    }

    fn open_time_travel(
        &self,
        user: &str,
        database: &str,
        branch: &Arc<Branch>,
        text: &str,
    ) -> Result<rusqlite::Connection, SessionError> {
        let refused = |reason: String| cannot_open(format!("time travel to {database}: {reason}"));
        let store = self.ensure_started(branch).map_err(|e| refused(e.to_string()))?;
        let lsn = HostShared::time_travel_lsn(branch, &store, text).map_err(refused)?;
        // The canonical spelling, so `0/16b3748` and `0/16B3748` (and an alias) share one store.
        let name = format!("{}@{lsn}", branch.name);
        self.ensure_time_travel(branch, &store, &name, lsn).map_err(refused)?;
        let connection = self.vfs.open(user, &name)?;
        connection.pragma_update(None, "query_only", true)?;
        Ok(connection)
    }
}

/// Marks `branch` closed with `reason`, closes its stores and unregisters its names. Called with the host's
/// name lock held for writing, after `branch` left the map.
fn retire(branch: &Branch, reason: &str) {
    let mut state = branch.state.lock();
    state.closed = Some(reason.to_owned());
    if let Some(store) = state.store.take() {
        store.close(reason);
        vfs::unregister_database(&branch.name);
    }
    for (name, store) in state.time_travel.drain(..) {
        store.close(reason);
        vfs::unregister_database(&name);
    }
}

/// Whether `name` is a registered time-travel name of the branch; if so it becomes the most recently used.
fn touch_time_travel(state: &mut BranchState, name: &str) -> bool {
    let Some(index) = state.time_travel.iter().position(|(n, _)| n == name) else {
        return false;
    };
    if let Some(entry) = state.time_travel.remove(index) {
        state.time_travel.push_back(entry);
    }
    true
}

/// A connection name is `[A-Za-z0-9_]+`: it is a VFS name and a PostgreSQL database name, and `@` starts
/// the time-travel suffix.
pub(crate) fn validate_name(name: &str) -> Result<(), ComputeError> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(ComputeError::InvalidBranchName(
            name.to_owned(),
            "a connection name is [A-Za-z0-9_]+",
        ));
    }
    Ok(())
}

/// Runs [`HostShared::reap_idle_stores`] every half idle timeout (at most every
/// [`IDLE_SCAN_INTERVAL_MAX_MS`]) until the host is gone.
async fn reap_idle_stores(shared: std::sync::Weak<HostShared>) {
    let Some(timeout_ms) = shared.upgrade().map(|s| s.config.idle_store_timeout_ms) else {
        return;
    };
    let timeout = std::time::Duration::from_millis(timeout_ms);
    let interval_ms = (timeout_ms / 2).clamp(1, IDLE_SCAN_INTERVAL_MAX_MS);
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        let Some(host) = shared.upgrade() else {
            return;
        };
        // Locks and store shutdowns: off the async workers.
        let scanned = tokio::task::spawn_blocking(move || host.reap_idle_stores(std::time::Instant::now(), timeout));
        if scanned.await.is_err() {
            return;
        }
    }
}

/// One session's place in [`HostShared::sessions_per_tenant`], given back when dropped.
struct TenantSession {
    tenant: TenantId,
    counts: Arc<parking_lot::Mutex<HashMap<TenantId, usize>>>,
}

impl Drop for TenantSession {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(open) = counts.get_mut(&self.tenant) {
            assert!(*open > 0, "a session let go of a place nobody held");
            *open -= 1;
            if *open == 0 {
                counts.remove(&self.tenant);
            }
        }
    }
}

/// A session error carrying `message` (SQLite's "cannot open").
fn cannot_open(message: String) -> SessionError {
    let code = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN);
    SessionError::Open(rusqlite::Error::SqliteFailure(code, Some(message)))
}

impl SessionFactory for HostShared {
    fn verifier(&self, user: &str, database: &str) -> Option<Arc<ScramVerifier>> {
        let name = database.split_once('@').map_or(database, |(name, _)| name);
        if self.refusals_without_credentials.read().contains(name) {
            return None;
        }
        match self.credentials.read().get(name) {
            // A name with its own credentials accepts only them.
            Some((own_user, verifier)) => (own_user == user).then(|| verifier.clone()),
            None => self.vfs.verifier(user, database),
        }
    }

    fn admit(&self, database: &str) -> Result<Option<crate::pg::Admission>, SessionError> {
        let max = self.config.connections_per_database_max;
        let requested = database.split_once('@').map_or(database, |(name, _)| name);
        let Resolved::Branch(branch) = self.resolve(requested) else {
            // Refused or unknown: `open` says why.
            return Ok(None);
        };
        if max == 0 {
            return Ok(None);
        }
        let tenant = branch.target.tenant_id;
        {
            let mut counts = self.sessions_per_tenant.lock();
            let open = counts.entry(tenant).or_insert(0);
            if *open >= max {
                return Err(SessionError::TooManyConnections {
                    database: database.to_owned(),
                    open: *open,
                    max,
                });
            }
            *open += 1;
        }
        Ok(Some(crate::pg::Admission::new(TenantSession {
            tenant,
            counts: Arc::clone(&self.sessions_per_tenant),
        })))
    }

    fn open(&self, user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
        let (requested, time_travel) = match database.split_once('@') {
            Some((requested, text)) => (requested, Some(text)),
            None => (database, None),
        };
        let branch = match self.resolve(requested) {
            Resolved::Branch(branch) => branch,
            Resolved::Refused(reason) => return Err(cannot_open(format!("{database}: {reason}"))),
            Resolved::Unknown => return Err(SessionError::InvalidDatabaseName(database.to_owned())),
        };
        if let Some(text) = time_travel {
            return self.open_time_travel(user, database, &branch, text);
        }
        // Held until the connection has the database open, so the idle-store reaper cannot stop the store
        // between its start and this open.
        let starting = branch.starting.lock();
        self.ensure_started_holding(&branch, &starting)
            .map_err(|e| cannot_open(format!("{database}: {e}")))?;
        // Opening reads page 1: if the store fails (or is closed) meanwhile, say why, not just "disk I/O error".
        vfs::clear_store_error();
        let opened = self
            .vfs
            .open(user, &branch.name)
            .map_err(|error| match vfs::take_store_error() {
                Some(store_error) => cannot_open(format!("{database}: {store_error}")),
                None => error,
            });
        drop(starting);
        opened
    }
}
