//! The served branches: each under its connection name with one store, started now or by its first session,
//! restarted after it failed by itself, retired (closed and unregistered) when replaced or detached, and
//! stopped when idle; and what a requested name resolves to. A store start wakes a parked database
//! (`tenants`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cambium_types::TimelineId;
use parking_lot::Mutex;

use super::{BranchTarget, HostShared, BACKGROUND_STARTS_MAX, IDLE_SCAN_INTERVAL_MAX_MS};
use crate::error::ComputeError;
use crate::remote_store::{RemotePageStore, RemotePageStoreConfig};
use crate::vfs;

/// One served branch. Replaced as a whole when its target changes, so a session holding the old one can
/// tell (`Arc::ptr_eq` against the map) that it is no longer current.
pub(super) struct Branch {
    pub(super) name: String,
    pub(super) target: BranchTarget,
    /// Set while no store of the branch has started and its timeline is known to have no WAL of its own (the
    /// host made the branch in this request: [`super::ComputeHost::define_new_branch`]): its first store reads at
    /// once while it is elected ([`RemotePageStore::start_new_branch`]). Cleared by the first start.
    pub(super) new_timeline: AtomicBool,
    /// Held across a start or restart of this branch's store, and only then.
    pub(super) starting: Mutex<()>,
    pub(super) state: Mutex<BranchState>,
}

#[derive(Default)]
pub(super) struct BranchState {
    /// The running store (registered with the VFS under the branch's name); `None` before the first start.
    pub(super) store: Option<Arc<RemotePageStore>>,
    /// The catalog the sessions of `store` share: a new one with every new store, so sessions of different
    /// stores (a restore's timeline, a failed store's successor) never share a snapshot; but for the first
    /// store of a branch made from a running parent, which starts with a copy of the parent's (`seeded`).
    pub(super) catalog: Arc<pgcompat::catalog::SharedCatalog>,
    /// `catalog` is the parent's copy, kept for the branch's first store ([`HostShared::define`]).
    pub(super) seeded: bool,
    /// Registered time-travel names and their stores, least recently used first; at most
    /// [`super::TIME_TRAVEL_STORES_MAX`].
    pub(super) time_travel: VecDeque<(String, Arc<RemotePageStore>)>,
    /// Why the branch stopped being served, once it has: it never starts a store again.
    pub(super) closed: Option<String>,
    /// When the idle-store reaper first saw the running store with no session open (reset when one is).
    pub(super) idle_since: Option<std::time::Instant>,
}

/// The host's names, under one lock.
#[derive(Default)]
pub(super) struct Names {
    /// Connection name → branch.
    pub(super) branches: HashMap<String, Arc<Branch>>,
    /// Alias → branch connection name.
    pub(super) aliases: HashMap<String, String>,
    /// Name → why it refuses sessions.
    pub(super) refusals: HashMap<String, String>,
}

/// What a requested connection name resolves to.
pub(super) enum Resolved {
    Branch(Arc<Branch>),
    Refused(String),
    Unknown,
}

impl HostShared {
    pub(super) fn store_config(&self, target: &BranchTarget) -> RemotePageStoreConfig {
        let safekeepers = if target.safekeepers.is_empty() {
            self.config.safekeepers.clone()
        } else {
            target.safekeepers.clone()
        };
        let pageserver = self
            .pageservers
            .read()
            .get(&target.tenant_id)
            .cloned()
            .unwrap_or_else(|| self.config.pageserver.clone());
        let mut config = RemotePageStoreConfig::new(
            safekeepers,
            pageserver,
            target.tenant_id,
            target.timeline_id,
            target.start_lsn,
        );
        config.local_safekeepers = self.config.local_safekeepers.clone();
        config.cache = Some(self.cache.clone());
        config.shared = Some(self.resources.clone());
        config.prefetch = self.config.prefetch;
        config.transactions = self.config.transactions;
        config
    }

    /// Makes `name` serve `target` and returns its (current) branch: the existing one if the target is the
    /// same, else a new one without a store, the old one retired (`new_timeline`: see [`Branch::new_timeline`]).
    /// Clears a refusal of `name`.
    pub(super) fn define(
        &self,
        name: &str,
        target: BranchTarget,
        new_timeline: bool,
    ) -> Result<Arc<Branch>, ComputeError> {
        self.define_from(name, target, new_timeline, None)
    }

    /// [`HostShared::define`] of a branch made from `parent` = (its name here, the timeline the branch was made
    /// from): if the parent is served on that timeline, the branch's first store starts with a copy of the
    /// catalog the parent's sessions share (the branch point is on the line of commits the parent's store
    /// reads, where a schema version names one catalog; see `pgcompat::catalog::SharedCatalog`).
    pub(super) fn define_from(
        &self,
        name: &str,
        target: BranchTarget,
        new_timeline: bool,
        parent: Option<(&str, TimelineId)>,
    ) -> Result<Arc<Branch>, ComputeError> {
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
        let mut state = BranchState::default();
        let parent = parent.and_then(|(parent, timeline)| {
            names
                .branches
                .get(parent)
                .filter(|parent| parent.target.timeline_id == timeline)
        });
        if let Some(parent) = parent {
            let parent = parent.state.lock();
            if parent.store.is_some() {
                state.catalog = Arc::new(parent.catalog.copy_for_branch());
                state.seeded = true;
            }
        }
        let branch = Arc::new(Branch {
            name: name.to_owned(),
            target,
            new_timeline: AtomicBool::new(new_timeline),
            starting: Mutex::new(()),
            state: Mutex::new(state),
        });
        if let Some(old) = names.branches.insert(name.to_owned(), branch.clone()) {
            let reason = if old.target.timeline_id == branch.target.timeline_id {
                format!("branch {name} moved to other safekeepers; reconnect")
            } else {
                format!(
                    "branch {name} moved from timeline {} to timeline {}; reconnect",
                    old.target.timeline_id, branch.target.timeline_id
                )
            };
            tracing::info!(branch = %name, %reason, "branch replaced");
            retire(&old, &reason);
        }
        Ok(branch)
    }

    /// Starts `branch`'s store on a thread of its own unless it has one or [`BACKGROUND_STARTS_MAX`] starts are
    /// under way (then its first session starts it). A failed start is logged; the first session tries again.
    pub(super) fn start_in_background(shared: &Arc<HostShared>, branch: Arc<Branch>) {
        // A parked database's stores start with its sessions, not before (that would wake it).
        if branch.state.lock().store.is_some() || shared.is_parked(branch.target.tenant_id) {
            return;
        }
        if shared.background_starts.fetch_add(1, Ordering::SeqCst) >= BACKGROUND_STARTS_MAX {
            shared.background_starts.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let host = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("compute-store-start".into())
            .spawn(move || {
                if let Err(error) = host.ensure_started(&branch) {
                    tracing::warn!(branch = %branch.name, %error, "a background store start failed");
                }
                host.background_starts.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(error) = spawned {
            shared.background_starts.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(%error, "no thread for a background store start");
        }
    }

    /// Closes and unregisters every branch.
    pub(super) fn retire_all(&self) {
        let mut names = self.names.write();
        for (_, branch) in names.branches.drain() {
            retire(&branch, "the compute stopped serving");
        }
    }

    /// Stops the stores of branches with no session open for `timeout` (seen unused by two scans at least that
    /// far apart): unregistered only if still unused (atomically with every open) and dropped. A branch whose
    /// store is starting, or whose sessions are opening (both hold `starting`), is skipped this round.
    pub(super) fn reap_idle_stores(&self, now: std::time::Instant, timeout: std::time::Duration) {
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

    pub(super) fn is_current(names: &Names, branch: &Arc<Branch>) -> bool {
        names
            .branches
            .get(&branch.name)
            .is_some_and(|current| Arc::ptr_eq(current, branch))
    }

    pub(super) fn resolve(&self, requested: &str) -> Resolved {
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
    pub(super) fn ensure_started(&self, branch: &Arc<Branch>) -> Result<Arc<RemotePageStore>, ComputeError> {
        let starting = branch.starting.lock();
        self.ensure_started_holding(branch, &starting)
    }

    /// [`HostShared::ensure_started`] for a caller that holds `branch.starting` (`_starting` proves it).
    pub(super) fn ensure_started_holding(
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
        // Only the first start may read before its election: after it (a failure, an idle stop) the timeline may
        // have WAL of its own. Its campaign begins with its first session ([`RemotePageStore::campaign`]) or
        // commit: a branch made and never used costs no election.
        let config = self.store_config(&branch.target);
        let started = if branch.new_timeline.swap(false, Ordering::SeqCst) {
            futures::executor::block_on(RemotePageStore::start_new_branch_deferred(config))
        } else {
            futures::executor::block_on(RemotePageStore::start(config))
        };
        let fresh = started.map_err(|source| ComputeError::Store {
            name: branch.name.clone(),
            source,
        })?;
        {
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
            // Re-pointed while it started (`ComputeHost::set_pageserver` changes the map, then the stores it finds
            // under their branch's lock): this store was made with the old address and not found then.
            let wanted = self.pageservers.read().get(&branch.target.tenant_id).cloned();
            if let Some(wanted) = wanted.filter(|wanted| *wanted != fresh.pageserver()) {
                match self.resources.channel(&wanted) {
                    Ok(channel) => fresh.repoint(&wanted, channel),
                    Err(error) => tracing::warn!(pageserver = %wanted, %error, "re-pointing a store that just started"),
                }
            }
            vfs::register_database(&branch.name, fresh.clone())?;
            state.store = Some(fresh.clone());
            if !std::mem::take(&mut state.seeded) {
                state.catalog = Arc::default();
            }
            state.idle_since = None;
        }
        // A store of a parked database runs again: it is awake (still under `starting`, so parking cannot
        // stop this store before the mark goes).
        self.wake(branch.target.tenant_id);
        Ok(fresh)
    }
}

/// Marks `branch` closed with `reason`, closes its stores and unregisters its names. Called with the host's
/// name lock held for writing, after `branch` left the map.
pub(super) fn retire(branch: &Branch, reason: &str) {
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
pub(super) async fn reap_idle_stores(shared: std::sync::Weak<HostShared>) {
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
