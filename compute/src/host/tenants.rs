//! Per database (tenant): its sessions and idle clock, and *parking* (scale to zero).
//!
//! - **Idle clock.** Every session holds a [`SessionActivity`] for its life (taken in `admit`); a tenant is idle
//!   from the end of its last session, or from when it was last served ([`ComputeHost::touch`]) or woken.
//!   [`ComputeHost::idle_for`] says for how long; the control plane decides when that is too long.
//! - **Parking.** [`ComputeHost::park`] stops the stores of every branch of a tenant (their runtimes, threads,
//!   connections and cache go) while no session is open on them, and marks the tenant parked: its names stay
//!   served and nothing starts its stores in the background. The first store start of a parked tenant (a
//!   session opening, the control plane attaching a branch) *wakes* it: the mark goes, the idle clock restarts,
//!   and [`ComputeHost::wakes`] is notified so the control plane can record it. A wake costs one store start,
//!   which the session that caused it waits for.
//!
//! **Invariant:** a parked tenant has no running store that started after it was parked: every start clears
//! the mark first thing after registering the store (under the branch's `starting` lock, which parking takes
//! too), so "parked" never hides a running store for long, and the control plane re-reads it after recording
//! a suspension.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_types::TenantId;

use super::branches::Branch;
use super::{ComputeHost, HostShared};
use crate::vfs;

/// One tenant's sessions and idle clock.
struct Activity {
    sessions_open: usize,
    /// When it last went without sessions (or was served or woken); meaningful while `sessions_open` is 0.
    idle_since: Instant,
}

/// The tenants' activity and parking marks, under one lock.
#[derive(Default)]
pub(super) struct Tenants {
    activity: HashMap<TenantId, Activity>,
    parked: HashSet<TenantId>,
}

/// The host's [`Tenants`], shared with every session's [`SessionActivity`].
pub(super) type SharedTenants = Arc<parking_lot::Mutex<Tenants>>;

/// A session's part in its tenant's activity: the tenant is not idle while one is held, and its idle clock
/// restarts when the last one is dropped.
pub(super) struct SessionActivity {
    tenant: TenantId,
    tenants: SharedTenants,
}

impl SessionActivity {
    /// Counts one more session open on `tenant`.
    pub(super) fn begin(tenants: &SharedTenants, tenant: TenantId) -> SessionActivity {
        let mut locked = tenants.lock();
        let activity = locked.activity.entry(tenant).or_insert_with(|| Activity {
            sessions_open: 0,
            idle_since: Instant::now(),
        });
        activity.sessions_open += 1;
        SessionActivity {
            tenant,
            tenants: Arc::clone(tenants),
        }
    }
}

impl Drop for SessionActivity {
    fn drop(&mut self) {
        let mut locked = self.tenants.lock();
        // Absent once the tenant was forgotten (a deleted database) while the session was open.
        if let Some(activity) = locked.activity.get_mut(&self.tenant) {
            assert!(
                activity.sessions_open > 0,
                "tenant {} ended a session it had not begun",
                self.tenant
            );
            activity.sessions_open -= 1;
            if activity.sessions_open == 0 {
                activity.idle_since = Instant::now();
            }
        }
    }
}

impl Tenants {
    fn restart_clock(&mut self, tenant: TenantId, now: Instant) {
        self.activity
            .entry(tenant)
            .and_modify(|activity| activity.idle_since = now)
            .or_insert(Activity {
                sessions_open: 0,
                idle_since: now,
            });
    }
}

impl HostShared {
    /// Whether `tenant` is parked.
    pub(super) fn is_parked(&self, tenant: TenantId) -> bool {
        self.tenants.lock().parked.contains(&tenant)
    }

    /// Wakes `tenant` if it is parked (a store of it just started): clears the mark, restarts its idle clock and
    /// notifies [`ComputeHost::wakes`].
    pub(super) fn wake(&self, tenant: TenantId) {
        let woke = {
            let mut tenants = self.tenants.lock();
            let woke = tenants.parked.remove(&tenant);
            if woke {
                tenants.restart_clock(tenant, Instant::now());
            }
            woke
        };
        if woke {
            tracing::info!(%tenant, "a parked database woke: one of its stores started");
            self.woken.notify_one();
        }
    }

    /// Stops `branch`'s stores (its own and its time-travel ones) that no session uses; returns whether its own
    /// is stopped (or was not running). A branch whose store is starting, or whose sessions are opening, counts
    /// as used.
    fn stop_unused_stores(branch: &Branch) -> bool {
        let Some(_starting) = branch.starting.try_lock() else {
            return false;
        };
        let (own, time_travel, stopped) = {
            let mut state = branch.state.lock();
            let mut kept = std::collections::VecDeque::with_capacity(state.time_travel.len());
            let mut time_travel = Vec::new();
            for (name, store) in state.time_travel.drain(..) {
                if vfs::unregister_if_unused(&name) {
                    time_travel.push(store);
                } else {
                    kept.push_back((name, store));
                }
            }
            state.time_travel = kept;
            let (own, stopped) = if state.store.is_none() {
                (None, true)
            } else if vfs::unregister_if_unused(&branch.name) {
                state.idle_since = None;
                (state.store.take(), true)
            } else {
                (None, false)
            };
            (own, time_travel, stopped)
        };
        // Dropped outside the state lock: a store's shutdown joins its threads.
        if own.is_some() {
            tracing::info!(branch = %branch.name, "stopped a parked database's store");
        }
        drop((own, time_travel));
        stopped
    }
}

impl ComputeHost {
    /// How long database `tenant` has had no session open (see the module doc for when its clock starts);
    /// `None` while one is open or if this host never served it.
    pub fn idle_for(&self, tenant: TenantId) -> Option<Duration> {
        let tenants = self.shared.tenants.lock();
        let activity = tenants.activity.get(&tenant)?;
        (activity.sessions_open == 0).then(|| activity.idle_since.elapsed())
    }

    /// Restarts `tenant`'s idle clock (it is being served now).
    pub fn touch(&self, tenant: TenantId) {
        self.shared.tenants.lock().restart_clock(tenant, Instant::now());
    }

    /// Parks database `tenant` (scale to zero): marks it parked, then stops the store of every branch of it that
    /// no session uses. Returns whether it is parked at the end: `false` (and no longer marked) if a session is
    /// open on it or a store of it is starting, or if a session woke it meanwhile. Its names stay served: the
    /// next session starts its branch's store again and wakes it. Blocks (stores shut down): call it off the
    /// async workers.
    pub fn park(&self, tenant: TenantId) -> bool {
        {
            let mut tenants = self.shared.tenants.lock();
            if tenants.activity.get(&tenant).is_some_and(|a| a.sessions_open > 0) {
                return false;
            }
            tenants.parked.insert(tenant);
        }
        let branches: Vec<Arc<Branch>> = {
            let names = self.shared.names.read();
            names
                .branches
                .values()
                .filter(|branch| branch.target.tenant_id == tenant)
                .cloned()
                .collect()
        };
        let mut all_stopped = true;
        for branch in &branches {
            all_stopped &= HostShared::stop_unused_stores(branch);
        }
        let mut tenants = self.shared.tenants.lock();
        if !all_stopped {
            tenants.parked.remove(&tenant);
            return false;
        }
        tenants.parked.contains(&tenant)
    }

    /// Whether database `tenant` is parked (not woken since [`ComputeHost::park`]).
    pub fn is_parked(&self, tenant: TenantId) -> bool {
        self.shared.is_parked(tenant)
    }

    /// Clears `tenant`'s parking mark without waking it (no notification): the control plane serves it another
    /// way now (refused, or resumed by the API).
    pub fn unpark(&self, tenant: TenantId) {
        self.shared.tenants.lock().parked.remove(&tenant);
    }

    /// Stops serving every branch of database `tenant` (placed on another host now, or this host fenced itself):
    /// closes their stores as [`ComputeHost::detach`] does, and makes their names and every alias of them refuse
    /// new sessions with a message containing `reason`, until served again. Reads nothing but the host's own
    /// map, so it works with the metadata out of reach. Returns how many branches it stopped.
    pub fn detach_tenant(&self, tenant: TenantId, reason: &str) -> usize {
        let mut names = self.shared.names.write();
        let detached: Vec<String> = names
            .branches
            .iter()
            .filter(|(_, branch)| branch.target.tenant_id == tenant)
            .map(|(name, _)| name.clone())
            .collect();
        for name in &detached {
            if let Some(branch) = names.branches.remove(name) {
                super::branches::retire(&branch, reason);
            }
            names.refusals.insert(name.clone(), reason.to_owned());
        }
        let aliases: Vec<String> = names
            .aliases
            .iter()
            .filter(|(_, target)| detached.contains(target))
            .map(|(alias, _)| alias.clone())
            .collect();
        for alias in aliases {
            names.refusals.insert(alias, reason.to_owned());
        }
        drop(names);
        self.unpark(tenant);
        if !detached.is_empty() {
            tracing::info!(%tenant, branches = detached.len(), reason, "stopped serving a database");
        }
        detached.len()
    }

    /// Forgets everything about `tenant`'s activity and parking (a deleted database).
    pub fn forget_tenant(&self, tenant: TenantId) {
        let mut tenants = self.shared.tenants.lock();
        tenants.activity.remove(&tenant);
        tenants.parked.remove(&tenant);
    }

    /// Completes when a parked database woke since the last wake was taken (a wake before the call counts):
    /// the control plane then looks at which of its parked databases are no longer parked.
    pub fn wakes(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.woken.notified()
    }
}
