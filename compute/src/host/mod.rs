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
//!
//! One job per file: this one holds the host's public calls and the state they share; `branches` the served
//! branches, their stores (start, restart, retirement, the idle-store reaper) and how a name resolves;
//! `time_travel` the read-only stores of `name@…`; `sessions` the [`SessionFactory`] the listener opens
//! sessions through (credentials, the per-database and per-account session caps, opening a name); `tenants`
//! each database's idle clock and parking (scale to zero: its stores stopped, woken by its next session).

mod branches;
mod sessions;
mod tenants;
mod time_travel;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use cambium_types::{Lsn, TenantId, TimelineId};
use parking_lot::RwLock;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::ComputeError;
use crate::pg::{ScramVerifier, SessionFactory, VfsSessionFactory};
use crate::remote_store::RemotePageStore;

pub(crate) use branches::validate_name;
use branches::{reap_idle_stores, retire, Names};

/// Read-only time-travel stores kept registered per branch, at most.
pub const TIME_TRAVEL_STORES_MAX: usize = 8;

/// What a host serves with and where it listens.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Address of the PostgreSQL listener (`127.0.0.1:0` picks a free port; see [`ComputeHost::address`]).
    pub listen: String,
    /// Safekeeper addresses, for every branch whose target names none.
    pub safekeepers: Vec<String>,
    /// Those of `safekeepers` served in this process, called directly rather than over TCP.
    pub local_safekeepers: walproposer::LocalSafekeepers,
    /// The pageserver's address: every branch's, unless [`ComputeHost::set_pageserver`] names another for its
    /// database.
    pub pageserver: String,
    /// Users and their passwords (user → password), for every name served.
    pub passwords: HashMap<String, String>,
    /// The host's page caches: one memory budget for every branch, and the local file cache.
    pub cache: crate::cache::HostCacheConfig,
    /// How far ahead every store prefetches reads in order.
    pub prefetch: crate::remote_store::PrefetchConfig,
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
    /// Sessions the databases of one account may have open at once, over all of them (0: no limit but the
    /// listener's), so one account cannot take every connection of the host. A database's account is what
    /// [`ComputeHost::set_owner`] said; a database with none is not counted.
    pub connections_per_account_max: usize,
    /// How every branch's store carries large transactions (the limit, parts, the memory of dirty pages).
    pub transactions: crate::remote_store::TransactionConfig,
    /// When a branch's store starts: on its first session, or in the background as soon as the branch is
    /// defined (so a new branch's first session finds it running).
    pub branch_stores: BranchStoreStart,
}

/// When the store of a branch defined with [`ComputeHost::define`] starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchStoreStart {
    /// On the branch's first session (which waits for the election and the database size).
    FirstSession,
    /// In the background when the branch is defined (at most [`BACKGROUND_STARTS_MAX`] at once; a branch
    /// defined meanwhile starts on its first session), so the first session of a new branch rarely waits. A
    /// new branch's store (`define_new_branch`) reads at once and campaigns only when its first session opens
    /// (or it commits): the election overlaps that session's first statements, and a branch never used costs
    /// none.
    WhenDefined,
}

/// Stores starting in the background at once, at most (each is a thread waiting on the network).
pub const BACKGROUND_STARTS_MAX: usize = 4;

/// The default [`HostConfig::connections_per_database_max`].
pub const CONNECTIONS_PER_DATABASE_MAX_DEFAULT: usize = 256;
/// The default [`HostConfig::connections_per_account_max`]: half the listener's [`crate::pg::CONNECTIONS_MAX`],
/// so another account always finds room.
pub const CONNECTIONS_PER_ACCOUNT_MAX_DEFAULT: usize = crate::pg::CONNECTIONS_MAX / 2;
const _: () = assert!(CONNECTIONS_PER_ACCOUNT_MAX_DEFAULT < crate::pg::CONNECTIONS_MAX);
const _: () = assert!(CONNECTIONS_PER_DATABASE_MAX_DEFAULT <= CONNECTIONS_PER_ACCOUNT_MAX_DEFAULT);

/// The stores' connect timeout (`RemotePageStoreConfig::new`'s default), for the shared pageserver connection.
const STORE_CONNECT_TIMEOUT_MS: u64 = 1_000;
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
    /// The safekeepers that hold the timeline's WAL (its set, issue 17 item 3); empty: the host's
    /// [`HostConfig::safekeepers`]. A target with another set is another target: defining it re-points the
    /// branch (its store closed, a new one campaigns on the new set).
    pub safekeepers: Vec<String>,
}

/// The user the control plane's own reads open sessions as (the factory checks no password for them).
const CONTROL_PLANE_USER: &str = "cambium";

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
        let cache = crate::cache::HostCache::new(&config.cache)?;
        let resources = crate::remote_store::SharedResources::new(&config.pageserver, STORE_CONNECT_TIMEOUT_MS)
            .map_err(ComputeError::Resources)?;
        let shared = Arc::new(HostShared {
            cache,
            resources,
            vfs: VfsSessionFactory::new(config.passwords.clone()),
            config,
            names: RwLock::new(Names::default()),
            credentials: RwLock::new(HashMap::new()),
            refusals_without_credentials: RwLock::new(std::collections::HashSet::new()),
            verifier_memo: parking_lot::Mutex::new(HashMap::new()),
            sessions_per_tenant: Arc::default(),
            owners: RwLock::new(HashMap::new()),
            pageservers: RwLock::new(HashMap::new()),
            sessions_per_account: Arc::default(),
            background_starts: std::sync::atomic::AtomicUsize::new(0),
            tenants: Arc::default(),
            woken: tokio::sync::Notify::new(),
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

    /// Records that database (tenant) `tenant` belongs to `account`: from now on its sessions count against
    /// the account's [`HostConfig::connections_per_account_max`] too (sessions already open are not counted).
    pub fn set_owner(&self, tenant: TenantId, account: &str) {
        self.shared.owners.write().insert(tenant, Arc::from(account));
    }

    /// Forgets the account of `tenant` (a deleted database); its sessions no longer count against it.
    pub fn remove_owner(&self, tenant: TenantId) {
        self.shared.owners.write().remove(&tenant);
        self.shared.pageservers.write().remove(&tenant);
    }

    /// Makes database (tenant) `tenant` read its pages from the pageserver at `address` (`host:port` or a URI)
    /// instead of [`HostConfig::pageserver`]: stores started from now on, and the running stores of its branches
    /// and time-travel names at once ([`RemotePageStore::repoint`]: a read in flight is asked again of the new
    /// one), so a tenant moved to another pageserver is served without closing a session. Returns how many
    /// running stores were re-pointed.
    pub fn set_pageserver(&self, tenant: TenantId, address: &str) -> Result<usize, ComputeError> {
        let channel = self
            .shared
            .resources
            .channel(address)
            .map_err(ComputeError::Resources)?;
        let previous = self.shared.pageservers.write().insert(tenant, address.to_owned());
        if previous.as_deref() == Some(address) {
            return Ok(0);
        }
        let mut repointed = 0;
        let names = self.shared.names.read();
        for branch in names.branches.values().filter(|b| b.target.tenant_id == tenant) {
            let state = branch.state.lock();
            let stores = state
                .store
                .iter()
                .chain(state.time_travel.iter().map(|(_, store)| store));
            for store in stores {
                store.repoint(address, channel.clone());
                repointed += 1;
            }
        }
        if repointed > 0 {
            tracing::info!(%tenant, pageserver = %address, stores = repointed, "a database's stores re-pointed");
        }
        Ok(repointed)
    }

    /// The pageserver database (tenant) `tenant` reads from.
    pub fn pageserver_of(&self, tenant: TenantId) -> String {
        self.shared
            .pageservers
            .read()
            .get(&tenant)
            .cloned()
            .unwrap_or_else(|| self.shared.config.pageserver.clone())
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
        let branch = self.shared.define(name, target, false)?;
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.ensure_started(&branch).map(|store| store.campaign()))
            .await
            .map_err(|e| ComputeError::Task(e.to_string()))?
    }

    /// Like [`ComputeHost::attach`] but without waiting: the store starts in the background now
    /// ([`BranchStoreStart::WhenDefined`]) or when the first session for `name` opens (on that session's blocking
    /// thread; also when the background starts are at their bound or the start failed). A parked database's
    /// branch starts on its first session only ([`ComputeHost::park`]). Replacing another target closes its
    /// store now, as attach does.
    pub fn define(&self, name: &str, target: BranchTarget) -> Result<(), ComputeError> {
        self.define_with(name, target, false, None)
    }

    /// [`ComputeHost::define`] for a branch made by the caller's request just now, whose timeline nothing has
    /// written yet (created at `target.start_lsn` for this branch; no store of it ever started): its first store
    /// serves reads at once at the branch point while it campaigns, and only its first commit waits for the
    /// election ([`RemotePageStore::start_new_branch`]; issue 12 item 6). Any other target (a restart's, a
    /// restore resumed after a restart, a re-pointing) must use `define`.
    pub fn define_new_branch(&self, name: &str, target: BranchTarget) -> Result<(), ComputeError> {
        self.define_with(name, target, true, None)
    }

    /// [`ComputeHost::define_new_branch`] of a branch made from branch `parent` (its name here) of the same
    /// database at a point of timeline `parent_timeline`: while `parent` is served on that timeline, the new
    /// branch's sessions start from the catalog the parent's sessions read (a fresh connection's first statement
    /// then skips reading it, 0.3-0.9 ms).
    pub fn define_new_branch_of(
        &self,
        name: &str,
        target: BranchTarget,
        parent: &str,
        parent_timeline: TimelineId,
    ) -> Result<(), ComputeError> {
        self.define_with(name, target, true, Some((parent, parent_timeline)))
    }

    fn define_with(
        &self,
        name: &str,
        target: BranchTarget,
        new_timeline: bool,
        parent: Option<(&str, TimelineId)>,
    ) -> Result<(), ComputeError> {
        let branch = self.shared.define_from(name, target, new_timeline, parent)?;
        if self.shared.config.branch_stores == BranchStoreStart::WhenDefined {
            HostShared::start_in_background(&self.shared, branch);
        }
        Ok(())
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

    /// The host's page caches (shared by every branch's store).
    pub fn cache(&self) -> &Arc<crate::cache::HostCache> {
        &self.shared.cache
    }

    /// What branch `name` (not an alias) is served with; `None` if it is not served.
    pub fn target(&self, name: &str) -> Option<BranchTarget> {
        let names = self.shared.names.read();
        names.branches.get(name).map(|branch| branch.target.clone())
    }

    /// The running store of branch `name` (not an alias); `None` if `name` is not served or its store has not
    /// started yet.
    pub fn store(&self, name: &str) -> Option<Arc<RemotePageStore>> {
        let names = self.shared.names.read();
        let branch = names.branches.get(name)?;
        let state = branch.state.lock();
        state.store.clone()
    }

    /// A read-only SQLite connection to `name` as a session would open it — a branch or an alias, or
    /// `<name>@<LSN>` for its state at that point (time travel) — without credentials or session caps: for the
    /// control plane's own reads (a schema diff). A refused or unknown name is an error saying why. Blocks (a store
    /// may start): call it off the async workers.
    pub fn open_read_only(&self, name: &str) -> Result<rusqlite::Connection, crate::pg::SessionError> {
        let connection = SessionFactory::open(&*self.shared, CONTROL_PLANE_USER, name)?;
        connection.pragma_update(None, "query_only", true)?;
        Ok(connection)
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

/// The host's [`SessionFactory`] and the state it shares with [`ComputeHost`].
struct HostShared {
    config: HostConfig,
    /// The page caches every store of the host shares.
    cache: Arc<crate::cache::HostCache>,
    /// The runtime and pageserver connection every store of the host shares.
    resources: Arc<crate::remote_store::SharedResources>,
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
    /// The account of each database, as [`ComputeHost::set_owner`] said.
    owners: RwLock<HashMap<TenantId, Arc<str>>>,
    /// The pageserver of each database that [`ComputeHost::set_pageserver`] named (others: the config's).
    pageservers: RwLock<HashMap<TenantId, String>>,
    /// Sessions open per account, for [`HostConfig::connections_per_account_max`].
    sessions_per_account: Arc<parking_lot::Mutex<HashMap<Arc<str>, usize>>>,
    /// Stores starting in the background now (at most [`BACKGROUND_STARTS_MAX`]).
    background_starts: std::sync::atomic::AtomicUsize,
    /// Every database's sessions and idle clock, and which are parked (`tenants`).
    tenants: tenants::SharedTenants,
    /// Notified when a parked database wakes.
    woken: tokio::sync::Notify,
}
