//! Compute placement (issue 17 item 4): this process's compute host serves the databases placed on it, and only
//! those (`store::hosts` holds the registry and the placements).
//!
//! [`Control::reconcile_placement`] runs at start and every lease period (with the lease keeper):
//! 1. **Heartbeat.** Renew this host's lease (register again if its row is gone: its databases were re-placed
//!    while it was unheard of, and it comes back as a new, empty host).
//! 2. **Self-fencing.** If no renewal succeeded for [`FENCE_AFTER_MS`] (two thirds of a lease, so before any
//!    other process may judge this host dead), stop serving every database: a host cut off from the metadata
//!    stops writing on its own. The safekeepers' terms would fence it anyway once another host's store
//!    campaigns; this makes its sessions fail with a clear reason rather than at their next commit. The age of
//!    the last renewal counts from when its call started, and [`watch_fence`] checks it every 500 ms beside the
//!    lease keeper, since a heartbeat call over a silent partition waits for the connection's TCP timeouts.
//! 3. **Failover.** Databases on hosts whose lease expired, or on none, are re-placed on live hosts
//!    ([`Store::replace_orphans`]: one conditional `UPDATE` each, so exactly one process moves each).
//! 4. **Serve what is placed here.** A database newly placed here is served as its status says (as at start);
//!    one placed elsewhere is no longer served ([`ComputeHost::detach_tenant`]: its stores closed, its names
//!    refusing with the reason); one deleted by another process is forgotten.
//! 5. **Read from its pageserver.** A database served here whose computes read from another pageserver than its
//!    `databases.pageserver` names (another process moved or failed it over, and its word did not arrive) is
//!    re-pointed (`repoint`).
//!
//! What this host serves is kept in [`PlacementState`]: [`Control::serve`] and [`Control::refuse`] mark a
//! database here (they run on the host a database is placed on: requests that change a database are forwarded to
//! it, `http::forward`), [`Control::retire`] forgets it.
//!
//! [`Store::replace_orphans`]: crate::store::Store::replace_orphans
//! [`ComputeHost::detach_tenant`]: compute::host::ComputeHost::detach_tenant

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cambium_types::TenantId;
use parking_lot::Mutex;

use super::Control;
use crate::error::ApiError;
use crate::store::databases::{Database, DatabaseStatus};
use crate::store::hosts::{Placement, HOST_LEASE_MS};

/// A host whose heartbeat could not be renewed for this long stops serving every database.
pub const FENCE_AFTER_MS: u64 = HOST_LEASE_MS * 2 / 3;

/// Where this compute host is reached, as it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementConfig {
    /// `host:port` of the PostgreSQL listener, as proxies reach it.
    pub pg_address: String,
    /// The base URL of the `/v1` API (`http://host:port`), as the other API processes reach it.
    pub api_url: String,
}

/// What this host last made of each database it knows.
#[derive(Debug, Clone, Copy)]
struct Known {
    tenant: TenantId,
    /// Served here (placed here, as far as this process knows).
    here: bool,
}

/// This process's view of the placement; see the module doc.
#[derive(Debug, Default)]
pub(crate) struct PlacementState {
    known: Mutex<HashMap<String, Known>>,
    /// When the heartbeat was last renewed (or the host registered).
    renewed_at: Mutex<Option<Instant>>,
}

impl PlacementState {
    fn mark(&self, database: &Database, here: bool) {
        self.known.lock().insert(
            database.id.clone(),
            Known {
                tenant: database.tenant_id,
                here,
            },
        );
    }

    fn is_here(&self, database_id: &str) -> bool {
        self.known.lock().get(database_id).is_some_and(|known| known.here)
    }

    /// The tenant of database `database_id` if it is served here.
    pub(super) fn tenant_here(&self, database_id: &str) -> Option<TenantId> {
        self.known
            .lock()
            .get(database_id)
            .filter(|known| known.here)
            .map(|known| known.tenant)
    }

    fn forget(&self, database_id: &str) -> Option<Known> {
        self.known.lock().remove(database_id)
    }

    /// Records a renewal (or registration) whose call started at `started`: the lease it wrote runs from no
    /// earlier than that, so the fence counts from it, never from the (possibly much later) reply.
    fn renewed(&self, started: Instant) {
        let mut renewed_at = self.renewed_at.lock();
        if renewed_at.is_none_or(|at| at < started) {
            *renewed_at = Some(started);
        }
    }

    fn unrenewed_for(&self) -> Option<Duration> {
        self.renewed_at.lock().map(|at| at.elapsed())
    }
}

impl Control {
    /// Whether database `id` is served by this host (placed here).
    pub fn is_placed_here(&self, id: &str) -> bool {
        self.placement.is_here(id)
    }

    /// This host's id in the registry (its store's lease owner id).
    pub fn host_id(&self) -> &str {
        self.store.lease_owner()
    }

    /// Whether `presented` is the secret this host's `/internal/` routes take.
    pub fn is_internal_token(&self, presented: &str) -> bool {
        self.store.is_internal_token(presented)
    }

    /// Marks `database` served here (called when it is served or refused for its status).
    pub(super) fn mark_here(&self, database: &Database) {
        self.placement.mark(database, true);
    }

    /// Forgets `database` (deleted).
    pub(super) fn forget_placement(&self, database_id: &str) {
        self.placement.forget(database_id);
    }

    /// Registers this host (at start).
    pub(super) async fn register_host(&self) -> Result<(), ApiError> {
        let config = self.config.placement.clone();
        let started = Instant::now();
        self.blocking(move |store| store.register_host(&config.pg_address, &config.api_url))
            .await?;
        self.placement.renewed(started);
        Ok(())
    }

    /// One round; see the module doc.
    pub async fn reconcile_placement(&self) {
        self.heartbeat().await;
        if self.lease_lapsing() {
            self.fence();
            return;
        }
        match self.blocking(|store| store.replace_orphans()).await {
            Ok(moves) => {
                for moved in moves {
                    tracing::warn!(database = %moved.database_id, from = ?moved.from, to = %moved.to,
                        "re-placed a database whose compute host is gone");
                }
            }
            Err(error) => tracing::warn!(?error, "re-placing the databases of dead hosts failed"),
        }
        let placements = match self.blocking(|store| store.placements()).await {
            Ok(placements) => placements,
            Err(error) => {
                tracing::warn!(?error, "reading the placements failed");
                return;
            }
        };
        let pageservers: Vec<(String, Option<String>)> = placements
            .iter()
            .map(|placement| (placement.database_id.clone(), placement.pageserver.clone()))
            .collect();
        self.follow(placements).await;
        self.follow_pageservers(&pageservers).await;
    }

    async fn heartbeat(&self) {
        let started = Instant::now();
        match self.blocking(|store| store.renew_host()).await {
            Ok(true) => self.placement.renewed(started),
            Ok(false) => {
                tracing::warn!(host = %self.host_id(), "this compute host was dropped from the registry; registering again");
                if let Err(error) = self.register_host().await {
                    tracing::warn!(?error, "registering the compute host failed");
                }
            }
            Err(error) => tracing::warn!(?error, "renewing the compute host's heartbeat failed"),
        }
    }

    /// Whether the heartbeat has gone unrenewed for [`FENCE_AFTER_MS`] (or never was).
    fn lease_lapsing(&self) -> bool {
        self.placement
            .unrenewed_for()
            .is_none_or(|elapsed| elapsed >= Duration::from_millis(FENCE_AFTER_MS))
    }

    /// Stops serving every database served here (no metadata needed).
    fn fence(&self) {
        let here: Vec<(String, TenantId)> = {
            let mut known = self.placement.known.lock();
            let here = known
                .iter()
                .filter(|(_, k)| k.here)
                .map(|(id, k)| (id.clone(), k.tenant))
                .collect();
            known.clear();
            here
        };
        for (id, tenant) in &here {
            let reason = format!(
                "database {id}: compute host {} lost its metadata lease; reconnect (through cambium proxy)",
                self.host_id()
            );
            self.host.detach_tenant(*tenant, &reason);
        }
        if !here.is_empty() {
            tracing::error!(
                databases = here.len(),
                "fenced: the heartbeat could not be renewed; stopped serving"
            );
        }
    }

    /// Makes the host serve what `placements` places here and nothing else.
    async fn follow(&self, placements: Vec<Placement>) {
        let me = self.host_id().to_owned();
        let mut present = std::collections::HashSet::with_capacity(placements.len());
        for placement in placements {
            present.insert(placement.database_id.clone());
            let here = placement.host.as_deref() == Some(me.as_str());
            let known = self.placement.known.lock().get(&placement.database_id).copied();
            match (here, known) {
                (true, Some(Known { here: true, .. })) | (false, Some(Known { here: false, .. })) => {}
                (true, _) => self.adopt(&placement.database_id).await,
                (false, Some(Known { tenant, here: true })) => {
                    let _held = self.locked(&placement.database_id).await;
                    let reason = format!(
                        "database {} is served by another compute host now; reconnect through cambium proxy",
                        placement.database_id
                    );
                    self.host.detach_tenant(tenant, &reason);
                    self.mark_elsewhere(&placement.database_id, tenant);
                }
                (false, None) => match placement.tenant_id.parse::<TenantId>() {
                    Ok(tenant) => self.mark_elsewhere(&placement.database_id, tenant),
                    Err(_) => tracing::warn!(database = %placement.database_id, "malformed tenant id"),
                },
            }
        }
        let gone: Vec<(String, Known)> = self
            .placement
            .known
            .lock()
            .iter()
            .filter(|(id, _)| !present.contains(*id))
            .map(|(id, known)| (id.clone(), *known))
            .collect();
        for (id, known) in gone {
            let _held = self.locked(&id).await;
            if self.placement.forget(&id).is_some_and(|k| k.here) {
                self.host
                    .detach_tenant(known.tenant, &format!("database {id} was deleted"));
                self.host.remove_owner(known.tenant);
                self.host.forget_tenant(known.tenant);
            }
        }
    }

    fn mark_elsewhere(&self, id: &str, tenant: TenantId) {
        self.placement
            .known
            .lock()
            .insert(id.to_owned(), Known { tenant, here: false });
    }

    /// Serves database `id`, now placed here, as its status says (as at start: lazily).
    async fn adopt(&self, id: &str) {
        let _held = self.locked(id).await;
        let database_id = id.to_owned();
        let database = match self.blocking(move |store| store.database(&database_id)).await {
            Ok(Some(database)) => database,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(database = %id, ?error, "reading a database placed here failed");
                return;
            }
        };
        if let Err(error) = self.serve_as_status(&database).await {
            tracing::warn!(database = %id, ?error, "serving a database placed here failed; next round");
            self.placement.forget(id);
            return;
        }
        tracing::info!(database = %id, "serving a database placed on this host");
    }

    /// Serves `database` as its status says: its names served (a database suspended for idleness parked first,
    /// so none of its stores starts until a session wakes it), or refusing with the reason.
    pub(super) async fn serve_as_status(&self, database: &Database) -> Result<(), ApiError> {
        if database.status == DatabaseStatus::Suspended && database.serves_sessions() {
            self.park(database.tenant_id).await;
        }
        match database.status {
            _ if database.serves_sessions() => self.serve(database, false).await,
            status => self.refuse(database, status).await,
        }
    }
}

/// How often [`watch_fence`] looks at the heartbeat's age.
const FENCE_WATCH_PERIOD_MS: u64 = 500;

/// Fences this host (see the module doc) as soon as its heartbeat has gone unrenewed for [`FENCE_AFTER_MS`],
/// whether or not a renewal is still waiting on the metadata: the heartbeat's own round cannot be relied on for
/// that, since over a silent partition its call waits for the connection's TCP timeouts. Only with PostgreSQL
/// metadata, shared by several hosts: on SQLite there is one host and no one to fence against. Returns when
/// `control` is dropped.
pub async fn watch_fence(control: std::sync::Weak<Control>) {
    loop {
        tokio::time::sleep(Duration::from_millis(FENCE_WATCH_PERIOD_MS)).await;
        let Some(control) = control.upgrade() else {
            return;
        };
        if control.store.dialect() == crate::store::sql::Dialect::Postgres && control.lease_lapsing() {
            control.fence();
        }
    }
}
