//! `Compute`: the compute of one database (DESIGN §5), a [`ComputeHost`] serving a fixed set of branches of
//! one tenant: one [`RemotePageStore`] per branch, registered with the VFS under the branch's connection name
//! (`db_…` for the database's default branch, `br_…` for a branch), and a PostgreSQL listener whose database
//! name picks the branch. Time travel (`name@LSN`, `name@<RFC 3339 timestamp>`) and the restart of a failed
//! store are the host's; see [`crate::host`].
//!
//! **Lifecycle.** There is no suspend/resume: [`Compute::stop`] shuts the listener (closing every client
//! connection), unregisters every name and closes the stores; resuming is a fresh [`Compute::start`], which
//! campaigns again and so starts from what the safekeepers committed.
//!
//! **Boundary:** the VFS registry is process-wide, so two computes in one process must serve distinct names.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use cambium_types::{Lsn, TenantId, TimelineId};

pub use crate::error::ComputeError;
use crate::host::{validate_name, BranchTarget, ComputeHost, HostConfig};
use crate::remote_store::RemotePageStore;

pub use crate::host::TIME_TRAVEL_STORES_MAX;

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
    /// The compute's page caches (one memory budget for every branch, the local file cache).
    pub cache: crate::cache::HostCacheConfig,
}

/// A running compute; see the module doc.
pub struct Compute {
    host: ComputeHost,
}

impl std::fmt::Debug for Compute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compute").field("host", &self.host).finish()
    }
}

impl Compute {
    /// Binds the listener, then starts one store per branch (each campaigns, so this is where the compute's
    /// history begins) and registers them with the VFS; serves PostgreSQL clients on `config.listen`. On error
    /// nothing stays registered.
    pub async fn start(config: ComputeConfig) -> Result<Compute, ComputeError> {
        validate_branch_names(&config.branches)?;
        let host = ComputeHost::start(HostConfig {
            listen: config.listen.clone(),
            safekeepers: config.safekeepers.clone(),
            local_safekeepers: walproposer::LocalSafekeepers::none(),
            pageserver: config.pageserver.clone(),
            passwords: config.passwords.clone(),
            cache: config.cache.clone(),
            prefetch: Default::default(),
            // A fixed set of branches, each started eagerly: they stay running.
            idle_store_timeout_ms: 0,
            session_defaults: crate::pg::SessionDefaults::default(),
            tls: None,
            connections_per_database_max: crate::host::CONNECTIONS_PER_DATABASE_MAX_DEFAULT,
            connections_per_account_max: crate::host::CONNECTIONS_PER_ACCOUNT_MAX_DEFAULT,
            transactions: Default::default(),
            // Attached (started) below, not defined.
            branch_stores: crate::host::BranchStoreStart::FirstSession,
        })
        .await?;
        for branch in &config.branches {
            let target = BranchTarget {
                tenant_id: config.tenant_id,
                timeline_id: branch.timeline_id,
                start_lsn: branch.start_lsn,
                safekeepers: Vec::new(),
            };
            if let Err(e) = host.attach(&branch.name, target).await {
                // Nothing stays registered after a failed start.
                host.stop().await;
                return Err(e);
            }
        }
        tracing::info!(address = %host.address(), branches = config.branches.len(), "compute started");
        Ok(Compute { host })
    }

    /// The address the PostgreSQL listener is bound to.
    pub fn address(&self) -> SocketAddr {
        self.host.address()
    }

    /// The store of the branch served as `name`, if any.
    pub fn store(&self, name: &str) -> Option<Arc<RemotePageStore>> {
        self.host.store(name)
    }

    /// Stops serving: shuts the listener and every client connection, unregisters every name, closes the
    /// stores. To serve again, [`Compute::start`] anew.
    pub async fn stop(self) {
        self.host.stop().await;
    }
}

fn validate_branch_names(branches: &[BranchConfig]) -> Result<(), ComputeError> {
    let mut seen = HashSet::new();
    for branch in branches {
        validate_name(&branch.name)?;
        if !seen.insert(branch.name.as_str()) {
            return Err(ComputeError::InvalidBranchName(branch.name.clone(), "served twice"));
        }
    }
    Ok(())
}
