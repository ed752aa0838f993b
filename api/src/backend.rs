//! The storage side as the control plane drives it: the pageserver's management and page services and the
//! safekeepers, over gRPC.
//!
//! Every call is bounded by [`BackendConfig::request_timeout_ms`]. Creations are idempotent (an existing
//! tenant or an identical timeline is success) and deletions of what is gone succeed, so an operation that
//! is retried after a crash does the same thing again safely. A timeline's safekeeper calls go to the members of
//! its set (`crate::safekeeper_sets`) at once and succeed on a majority of it, as the WAL itself does; deletions
//! go to every configured safekeeper, so a copy left outside a set goes too.
//!
//! **Several pageservers** (issue 17 item 2): each tenant lives on one, the one its database's row names
//! (`databases.pageserver`, `store::pageservers`). Every tenant or timeline call goes to that pageserver: the
//! backend asks the metadata through the resolver the control plane installs
//! ([`Backend::set_placement_resolver`]) and remembers the answer for [`PLACEMENT_CACHE_MS`], so a move made by
//! another API process is seen within that time; the process that moves a tenant updates its own memory at
//! once ([`Backend::remember_placement`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_types::{Lsn, TenantId, TimelineId};
use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};
use proto::pageserver as ps;
use proto::pageserver::management_client::ManagementClient;
use proto::pageserver::page_service_client::PageServiceClient;
use proto::safekeeper as sk;
use proto::safekeeper::safekeeper_client::SafekeeperClient;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;
use walproposer::PeerService;

use crate::store::databases::TimelineRow;

/// How long a tenant's pageserver, as read from the metadata, is used before it is read again.
pub const PLACEMENT_CACHE_MS: u64 = 2_000;

/// Bound of one pageserver's liveness probe (`ListTenants`): a live one answers in milliseconds, and is judged
/// lost only after failing every probe for `--pageserver-dead-after-ms`.
pub const PAGESERVER_PROBE_TIMEOUT_MS: u64 = 3_000;

/// How long the committed-LSN read waits for the other safekeepers once a majority answered
/// (`Backend::committed_lsn`): a few round trips on a live one.
pub const COMMITTED_LSN_GRACE_MS: u64 = 200;

/// How long a deletion waits for every safekeeper's answer before it goes on without the slow ones
/// (`Backend::on_every_safekeeper`): far above a deletion's few milliseconds, far below a call's timeout.
pub const SAFEKEEPER_CLEANUP_WAIT_MS: u64 = 1_000;

/// Where the storage services are and how long a call may take.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// The pageservers' gRPC addresses (`host:port` or a URI); the first also holds every tenant the metadata
    /// places nowhere (rows from before placement).
    pub pageservers: Vec<String>,
    /// The safekeepers' gRPC addresses.
    pub safekeepers: Vec<String>,
    /// The bound of one call.
    pub request_timeout_ms: u64,
    /// The bound of connecting.
    pub connect_timeout_ms: u64,
    /// The bound of one replica repair (`PullTimeline`), which copies a timeline's WAL: longer than a call.
    pub pull_timeout_ms: u64,
}

/// Why a storage call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The request cannot be met as asked (an LSN ahead of the data or below the GC cutoff, a time before the
    /// history): the caller's to change, an API 422.
    #[error("{0}")]
    Unprocessable(String),
    /// The timeline or tenant is not there.
    #[error("not found: {0}")]
    NotFound(String),
    /// A service did not answer, or failed: worth retrying later.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

/// A pageserver timeline as the control plane needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineState {
    /// WAL ingested up to here.
    pub last_record_lsn: Lsn,
    /// Reads below this LSN are refused (GC removed the history).
    pub gc_cutoff_lsn: Lsn,
    /// Logical size of the database.
    pub logical_size_bytes: u64,
}

/// One pageserver's clients.
#[derive(Debug, Clone)]
struct PageserverClients {
    address: String,
    management: ManagementClient<PeerService>,
    pages: PageServiceClient<Channel>,
}

/// Reads a tenant's pageserver from the metadata (blocking): `Ok(None)` for the first configured one (no
/// database row, or a row placed nowhere).
pub type PlacementResolver = Arc<dyn Fn(TenantId) -> Result<Option<String>, String> + Send + Sync>;

/// The tenants' pageservers as last read, and how to read them.
#[derive(Default)]
struct Placements {
    resolver: parking_lot::RwLock<Option<PlacementResolver>>,
    /// Tenant → (index into the pageservers, when it was read).
    known: parking_lot::Mutex<HashMap<TenantId, (usize, Instant)>>,
}

impl std::fmt::Debug for Placements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placements")
            .field("known", &self.known.lock().len())
            .finish_non_exhaustive()
    }
}

/// Clients of the storage services; cheap to clone.
#[derive(Debug, Clone)]
pub struct Backend {
    /// In the configured order.
    pageservers: Vec<PageserverClients>,
    placements: Arc<Placements>,
    safekeepers: Vec<(String, SafekeeperClient<PeerService>)>,
    /// The same safekeepers in the same order, on channels bounded by [`BackendConfig::pull_timeout_ms`]
    /// (tonic bounds a request by the shorter of its channel's timeout and its own, so a longer bound needs a
    /// channel of its own).
    pullers: Vec<SafekeeperClient<PeerService>>,
    /// The bound of one call.
    timeout: Duration,
    /// The bound of one replica repair.
    pull_timeout: Duration,
}

/// One safekeeper's copy of a timeline, as its `GetState` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyState {
    /// Served: its WAL ends at `flush_lsn` and is readable from `oldest_lsn`.
    Served {
        /// The durable end of its WAL.
        flush_lsn: Lsn,
        /// The lowest LSN it can still read.
        oldest_lsn: Lsn,
    },
    /// NOT_FOUND: the safekeeper does not have the timeline.
    Missing,
    /// INTERNAL: the safekeeper has the timeline but cannot serve it (damaged WAL, a failed store).
    Broken(String),
    /// Anything else (down, timed out): nothing is known about the copy.
    Unknown(String),
}

/// Why a replica repair did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PullError {
    /// UNAVAILABLE (a source down, or the node in its quiet period) or ABORTED (the sources moved under the
    /// copy, or another pull of the timeline runs): worth retrying soon.
    #[error("retry later: {0}")]
    Retry(String),
    /// Anything else (a source lacks the timeline, sources that disagree, a bad frame): the next round tries
    /// again, but the cause is not a passing one.
    #[error("{0}")]
    Failed(String),
}

fn endpoint(address: &str, config: &BackendConfig) -> Result<Endpoint, BackendError> {
    let uri = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    Ok(Endpoint::from_shared(uri)
        .map_err(|_| BackendError::Unavailable(format!("bad address {address:?}")))?
        .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
        .timeout(Duration::from_millis(config.request_timeout_ms))
        .tcp_nodelay(true))
}

fn unavailable(what: &str, status: &tonic::Status) -> BackendError {
    BackendError::Unavailable(format!("{what}: {}", status.message()))
}

fn timeline_ref(tenant: TenantId, timeline: TimelineId) -> ps::TimelineRef {
    ps::TimelineRef {
        tenant_id: tenant.to_string(),
        timeline_id: timeline.to_string(),
    }
}

impl Backend {
    /// Clients for `config`; connects lazily (the services may start later).
    pub fn new(config: &BackendConfig) -> Result<Backend, BackendError> {
        if config.pageservers.is_empty() {
            return Err(BackendError::Unavailable("no pageservers configured".to_owned()));
        }
        let pageservers = config
            .pageservers
            .iter()
            .map(|address| {
                let channel = endpoint(address, config)?.connect_lazy();
                Ok(PageserverClients {
                    address: address.clone(),
                    management: ManagementClient::new(walproposer::over_grpc(channel.clone())),
                    pages: PageServiceClient::new(channel),
                })
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        let safekeepers = config
            .safekeepers
            .iter()
            .map(|address| {
                let channel = endpoint(address, config)?.connect_lazy();
                Ok((address.clone(), SafekeeperClient::new(walproposer::over_grpc(channel))))
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        if safekeepers.is_empty() {
            return Err(BackendError::Unavailable("no safekeepers configured".to_owned()));
        }
        let pull_config = BackendConfig {
            request_timeout_ms: config.pull_timeout_ms,
            ..config.clone()
        };
        let pullers = config
            .safekeepers
            .iter()
            .map(|address| {
                let channel = endpoint(address, &pull_config)?.connect_lazy();
                Ok(SafekeeperClient::new(walproposer::over_grpc(channel)))
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        Ok(Backend {
            pageservers,
            placements: Arc::default(),
            safekeepers,
            pullers,
            timeout: Duration::from_millis(config.request_timeout_ms),
            pull_timeout: Duration::from_millis(config.pull_timeout_ms),
        })
    }

    /// Calls the management service of the configured pageserver at `address` in this process, through
    /// `service` (see `walproposer::in_process`; each call bounded as a channel's is): a branch creation's and a
    /// restore's pageserver calls without HTTP/2 and the loopback round trip, as `cambium up` runs its
    /// pageserver. The page service stays on gRPC. `Unavailable` if no configured pageserver is at `address`.
    pub fn with_local_pageserver(mut self, address: &str, service: PeerService) -> Result<Backend, BackendError> {
        let index = self.pageserver_index(address)?;
        self.pageservers[index].management = ManagementClient::new(walproposer::bounded(service, self.timeout));
        Ok(self)
    }

    /// Calls the safekeepers of `local` that are among the configured ones in this process, through their
    /// services (the same contract and bounds, without HTTP/2 and the loopback TCP round trip: most of a
    /// timeline creation's wait when the safekeepers share the process, as in `cambium up`); the others stay
    /// on gRPC.
    #[must_use]
    pub fn with_local_safekeepers(mut self, local: &walproposer::LocalSafekeepers) -> Backend {
        for (index, (address, client)) in self.safekeepers.iter_mut().enumerate() {
            if let Some(peer) = local.get(address) {
                *client = SafekeeperClient::new(walproposer::bounded(peer.service(), self.timeout));
                self.pullers[index] = SafekeeperClient::new(walproposer::bounded(peer.service(), self.pull_timeout));
            }
        }
        self
    }

    /// The pageservers' addresses, as configured.
    pub fn pageserver_addresses(&self) -> Vec<String> {
        self.pageservers.iter().map(|server| server.address.clone()).collect()
    }

    /// Installs how a tenant's pageserver is read from the metadata (until then, and for a tenant no row
    /// names, every tenant is on the first configured pageserver).
    pub fn set_placement_resolver(&self, resolver: PlacementResolver) {
        *self.placements.resolver.write() = Some(resolver);
        self.placements.known.lock().clear();
    }

    /// Remembers that `tenant` is on the pageserver at `address` now (a placement this process just wrote).
    pub fn remember_placement(&self, tenant: TenantId, address: &str) -> Result<(), BackendError> {
        let index = self.pageserver_index(address)?;
        self.placements.known.lock().insert(tenant, (index, Instant::now()));
        Ok(())
    }

    /// The index of the configured pageserver at `address`.
    fn pageserver_index(&self, address: &str) -> Result<usize, BackendError> {
        self.pageservers
            .iter()
            .position(|server| server.address == address)
            .ok_or_else(|| {
                BackendError::Unavailable(format!(
                    "pageserver {address} is not among this process's --pageservers ({})",
                    self.pageserver_addresses().join(",")
                ))
            })
    }

    /// The address of the pageserver `tenant` lives on (see the module doc).
    pub async fn pageserver_of(&self, tenant: TenantId) -> Result<String, BackendError> {
        Ok(self.clients(tenant).await?.address.clone())
    }

    /// The clients of `tenant`'s pageserver.
    async fn clients(&self, tenant: TenantId) -> Result<&PageserverClients, BackendError> {
        if let Some((index, read_at)) = self.placements.known.lock().get(&tenant).copied() {
            if read_at.elapsed() < Duration::from_millis(PLACEMENT_CACHE_MS) {
                return Ok(&self.pageservers[index]);
            }
        }
        let resolver = self.placements.resolver.read().clone();
        let index = match resolver {
            None => 0,
            Some(resolver) => {
                let read = tokio::task::spawn_blocking(move || resolver(tenant))
                    .await
                    .map_err(|e| BackendError::Unavailable(format!("reading the placement: {e}")))?
                    .map_err(|e| BackendError::Unavailable(format!("reading the placement: {e}")))?;
                match read {
                    Some(address) => self.pageserver_index(&address)?,
                    None => 0,
                }
            }
        };
        self.placements.known.lock().insert(tenant, (index, Instant::now()));
        Ok(&self.pageservers[index])
    }

    /// Which pageservers answer now (`ListTenants`, asked of all at once), in the configured order, with how
    /// many tenants each holds (`None`: no answer).
    /// Each call is bounded by [`PAGESERVER_PROBE_TIMEOUT_MS`], not the request bound, so a silent pageserver
    /// (a partition) costs a probe round that much.
    pub async fn pageserver_tenant_counts(&self) -> Vec<Option<usize>> {
        let calls = self.pageservers.iter().map(|server| {
            let mut client = server.management.clone();
            async move {
                tokio::time::timeout(
                    Duration::from_millis(PAGESERVER_PROBE_TIMEOUT_MS),
                    client.list_tenants(ps::ListTenantsRequest {}),
                )
                .await
            }
        });
        join_all(calls)
            .await
            .into_iter()
            .map(|result| match result {
                Ok(Ok(response)) => Some(response.into_inner().tenant_ids.len()),
                Ok(Err(_)) | Err(_) => None,
            })
            .collect()
    }

    /// The configured safekeepers' addresses (the indices of [`Backend::list_copies`] and the other per-copy
    /// calls).
    pub fn safekeeper_addresses(&self) -> Vec<String> {
        self.safekeepers.iter().map(|(address, _)| address.clone()).collect()
    }

    /// The client of the configured safekeeper at `address`, if it is one.
    fn client_of(&self, address: &str) -> Option<&SafekeeperClient<PeerService>> {
        self.safekeepers
            .iter()
            .find(|(configured, _)| configured == address)
            .map(|(_, client)| client)
    }

    /// The position of `address` among the configured safekeepers.
    pub fn safekeeper_index(&self, address: &str) -> Option<usize> {
        self.safekeepers
            .iter()
            .position(|(configured, _)| configured == address)
    }

    /// The set of a timeline that has none recorded: the first three configured safekeepers.
    pub fn default_set(&self) -> Vec<String> {
        crate::safekeeper_sets::default_set(&self.safekeeper_addresses())
    }

    /// Each member of `set`'s copy of `timeline`, asked at once; one answer per member, in `set`'s order (a
    /// member that is not configured is [`CopyState::Unknown`]).
    pub async fn copy_states(&self, tenant: TenantId, timeline: TimelineId, set: &[String]) -> Vec<CopyState> {
        let request = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        let calls = set.iter().map(|address| {
            let (client, request) = (self.client_of(address).cloned(), request.clone());
            async move {
                match client {
                    Some(mut client) => client.get_state(request).await,
                    None => Err(tonic::Status::failed_precondition(format!(
                        "{address} is not a configured safekeeper"
                    ))),
                }
            }
        });
        join_all(calls)
            .await
            .into_iter()
            .map(|result| copy_state_of(result.map(tonic::Response::into_inner)))
            .collect()
    }

    /// What a majority of `set` holds of `timeline`, for deciding whether a creation reached a majority: each
    /// member asked at once, and once a majority answered (a missing copy is an answer) the others get
    /// [`COMMITTED_LSN_GRACE_MS`] more, so a frozen member never holds the caller for its call's timeout. One
    /// `(address, state)` per member that answered, then one [`CopyState::Unknown`] per member that failed (its
    /// address empty: the message names it); members still silent after the grace are left out (their calls go
    /// on, detached, to their end).
    pub async fn copy_states_of_a_majority(
        &self,
        tenant: TenantId,
        timeline: TimelineId,
        set: &[String],
    ) -> Vec<(String, CopyState)> {
        let request = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        let (mut states, errors) = self
            .on_a_majority(
                set,
                Duration::from_millis(COMMITTED_LSN_GRACE_MS),
                move |address, mut client| {
                    let request = request.clone();
                    async move {
                        match client.get_state(request).await {
                            Ok(state) => Ok((address, copy_state_of(Ok(state.into_inner())))),
                            Err(status) if matches!(status.code(), Code::NotFound | Code::Internal) => {
                                Ok((address, copy_state_of(Err(status))))
                            }
                            Err(status) => Err(status),
                        }
                    }
                },
            )
            .await;
        states.extend(
            errors
                .into_iter()
                .map(|error| (String::new(), CopyState::Unknown(error))),
        );
        states
    }

    /// Fences the writers of `timeline` on `members` (the live members of its old set, a majority of it): asks
    /// each for its state, then for a vote in a term above every term they promised. From then on a proposer of
    /// a lower term cannot reach a majority of the old set (every majority includes one of `members`), and a
    /// new one must campaign above this term. Every member must answer; returns the fencing term.
    pub async fn fence(&self, tenant: TenantId, timeline: TimelineId, members: &[String]) -> Result<u64, BackendError> {
        let reference = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        let clients = members
            .iter()
            .map(|address| {
                self.client_of(address)
                    .cloned()
                    .map(|client| (address, client))
                    .ok_or_else(|| BackendError::Unavailable(format!("{address} is not a configured safekeeper")))
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        let states = join_all(clients.iter().map(|(address, client)| {
            let (mut client, request) = (client.clone(), reference.clone());
            async move { (address, client.get_state(request).await) }
        }))
        .await;
        let mut highest = 0;
        for (address, state) in states {
            let state = state.map_err(|status| unavailable(&format!("reading {address}'s term"), &status))?;
            highest = highest.max(state.into_inner().term);
        }
        let term = highest
            .checked_add(1)
            .ok_or_else(|| BackendError::Unavailable("the term cannot grow past u64::MAX".to_owned()))?;
        let votes = join_all(clients.iter().map(|(address, client)| {
            let mut client = client.clone();
            let request = sk::VoteRequest {
                timeline: Some(reference.clone()),
                term,
            };
            async move { (address, client.vote(request).await) }
        }))
        .await;
        for (address, vote) in votes {
            let vote = vote.map_err(|status| unavailable(&format!("fencing on {address}"), &status))?;
            let vote = vote.into_inner();
            // Refused only if it promised a term at least this one meanwhile: fenced all the same.
            let promised = vote.state.map_or(0, |state| state.term);
            if !vote.granted && promised < term {
                return Err(BackendError::Unavailable(format!(
                    "{address} refused the fencing vote in term {term} (it promised {promised})"
                )));
            }
        }
        Ok(term)
    }

    /// Rebuilds `target`'s copy of `timeline` from `sources` (the other members of its set, every one of which
    /// must answer: `PullTimeline`); returns whether WAL was copied (false: the copy was already as far as every
    /// source).
    pub async fn pull_timeline(
        &self,
        target: &str,
        sources: &[String],
        tenant: TenantId,
        timeline: TimelineId,
    ) -> Result<bool, PullError> {
        let Some(index) = self.safekeeper_index(target) else {
            return Err(PullError::Failed(format!("{target} is not a configured safekeeper")));
        };
        let request = sk::PullTimelineRequest {
            timeline: Some(sk::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: timeline.to_string(),
            }),
            sources: sources.to_vec(),
        };
        match self.pullers[index].clone().pull_timeline(request).await {
            Ok(response) => Ok(response.into_inner().copied),
            Err(status)
                if matches!(
                    status.code(),
                    Code::Unavailable | Code::Aborted | Code::DeadlineExceeded
                ) =>
            {
                Err(PullError::Retry(format!("{:?}: {}", status.code(), status.message())))
            }
            Err(status) => Err(PullError::Failed(format!("{:?}: {}", status.code(), status.message()))),
        }
    }

    /// Deletes `timeline` from safekeeper `index` only (a copy a repair rebuilt after its deletion).
    pub async fn delete_copy(&self, index: usize, tenant: TenantId, timeline: TimelineId) -> Result<(), BackendError> {
        assert!(
            index < self.safekeepers.len(),
            "safekeeper {index} of {}",
            self.safekeepers.len()
        );
        let (address, client) = &self.safekeepers[index];
        let request = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        client
            .clone()
            .delete_timeline(request)
            .await
            .map(|_| ())
            .map_err(|status| unavailable(&format!("deleting the timeline on {address}"), &status))
    }

    /// Every tenant a pageserver holds, over every pageserver that answers (an error only if none does).
    pub async fn list_tenants(&self) -> Result<Vec<TenantId>, BackendError> {
        let mut tenants = Vec::new();
        let mut answered = false;
        let mut errors = Vec::new();
        for index in 0..self.pageservers.len() {
            match self.list_tenants_on(index).await {
                Ok(listed) => {
                    answered = true;
                    tenants.extend(listed);
                }
                Err(error) => errors.push(error.to_string()),
            }
        }
        tenants.sort();
        tenants.dedup();
        if !answered {
            return Err(BackendError::Unavailable(errors.join("; ")));
        }
        Ok(tenants)
    }

    /// Every tenant pageserver `index` (in the configured order) holds.
    pub async fn list_tenants_on(&self, index: usize) -> Result<Vec<TenantId>, BackendError> {
        let server = self
            .pageservers
            .get(index)
            .ok_or_else(|| BackendError::Unavailable(format!("pageserver {index} of {}", self.pageservers.len())))?;
        let response = server
            .management
            .clone()
            .list_tenants(ps::ListTenantsRequest {})
            .await
            .map_err(|status| unavailable(&format!("listing the tenants on {}", server.address), &status))?
            .into_inner();
        response
            .tenant_ids
            .iter()
            .map(|text| {
                text.parse::<TenantId>()
                    .map_err(|_| BackendError::Unavailable(format!("malformed tenant id {text:?}")))
            })
            .collect()
    }

    /// Every timeline safekeeper `index` holds.
    pub async fn list_copies(&self, index: usize) -> Result<Vec<(TenantId, TimelineId)>, BackendError> {
        assert!(
            index < self.safekeepers.len(),
            "safekeeper {index} of {}",
            self.safekeepers.len()
        );
        let (address, client) = &self.safekeepers[index];
        let response = client
            .clone()
            .list_timelines(sk::ListTimelinesRequest {})
            .await
            .map_err(|status| unavailable(&format!("listing the timelines on {address}"), &status))?
            .into_inner();
        response
            .timelines
            .iter()
            .map(|reference| {
                let tenant = reference.tenant_id.parse::<TenantId>();
                let timeline = reference.timeline_id.parse::<TimelineId>();
                match (tenant, timeline) {
                    (Ok(tenant), Ok(timeline)) => Ok((tenant, timeline)),
                    _ => Err(BackendError::Unavailable(format!(
                        "{address} listed a malformed timeline {reference:?}"
                    ))),
                }
            })
            .collect()
    }

    /// Deletes `tenant` from safekeeper `index` only (success if it is not there).
    pub async fn delete_tenant_copy(&self, index: usize, tenant: TenantId) -> Result<(), BackendError> {
        assert!(
            index < self.safekeepers.len(),
            "safekeeper {index} of {}",
            self.safekeepers.len()
        );
        let (address, client) = &self.safekeepers[index];
        let request = sk::DeleteTenantRequest {
            tenant_id: tenant.to_string(),
        };
        client
            .clone()
            .delete_tenant(request)
            .await
            .map(|_| ())
            .map_err(|status| unavailable(&format!("deleting the tenant on {address}"), &status))
    }

    /// A majority of `set`.
    fn quorum(set: &[String]) -> usize {
        set.len() / 2 + 1
    }

    /// Calls `call` on every member of `set` at once, each call in a task of its own (bounded as every call is),
    /// and returns once a majority of them succeeded and then `grace` passed or every call ended (at once for a
    /// zero `grace`), or as soon as so many failed that a majority cannot succeed: the answers so far and the
    /// failures' messages (`address: message`). The calls still under way go on, detached, to their end: a slow
    /// or frozen member never holds up what a majority decides for more than `grace`.
    async fn on_a_majority<T, F, Fut>(&self, set: &[String], grace: Duration, call: F) -> (Vec<T>, Vec<String>)
    where
        T: Send + 'static,
        F: Fn(String, SafekeeperClient<PeerService>) -> Fut,
        Fut: std::future::Future<Output = Result<T, tonic::Status>> + Send + 'static,
    {
        let mut calls: FuturesUnordered<_> = set
            .iter()
            .map(|address| {
                let called = self
                    .client_of(address)
                    .cloned()
                    .map(|client| call(address.clone(), client));
                let address = address.clone();
                tokio::spawn(async move {
                    let answer = match called {
                        Some(called) => called.await,
                        None => Err(tonic::Status::failed_precondition("not a configured safekeeper")),
                    };
                    answer.map_err(|status| format!("{address}: {}", status.message()))
                })
            })
            .collect();
        let quorum = Self::quorum(set);
        let (mut answers, mut errors) = (Vec::new(), Vec::new());
        while let Some(joined) = calls.next().await {
            match joined {
                Ok(Ok(answer)) => answers.push(answer),
                Ok(Err(error)) => errors.push(error),
                Err(error) => errors.push(format!("a safekeeper call failed: {error}")),
            }
            if answers.len() >= quorum || set.len() - errors.len() < quorum {
                break;
            }
        }
        if answers.len() >= quorum && !grace.is_zero() {
            let rest = async {
                while let Some(joined) = calls.next().await {
                    match joined {
                        Ok(Ok(answer)) => answers.push(answer),
                        Ok(Err(error)) => errors.push(error),
                        Err(error) => errors.push(format!("a safekeeper call failed: {error}")),
                    }
                }
            };
            // Past the grace the rest are left to their tasks.
            let _ = tokio::time::timeout(grace, rest).await;
        }
        (answers, errors)
    }

    /// Calls `call` on every configured safekeeper at once, each call in a task of its own that reports its own
    /// outcome, and waits for them all for at most [`SAFEKEEPER_CLEANUP_WAIT_MS`]: the calls still under way
    /// then go on, detached, to their end (each bounded as every call is). For deletions, whose outcome on one
    /// safekeeper decides nothing (a copy left behind is the reconciler's to delete): a frozen safekeeper does not
    /// hold the request for its timeout.
    async fn on_every_safekeeper<F, Fut>(&self, call: F)
    where
        F: Fn(String, SafekeeperClient<PeerService>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut calls: FuturesUnordered<_> = self
            .safekeepers
            .iter()
            .map(|(address, client)| tokio::spawn(call(address.clone(), client.clone())))
            .collect();
        let all = async { while calls.next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_millis(SAFEKEEPER_CLEANUP_WAIT_MS), all)
            .await
            .is_err()
        {
            tracing::warn!(
                waiting = calls.len(),
                "safekeepers have not answered a deletion in {SAFEKEEPER_CLEANUP_WAIT_MS} ms; it goes on without waiting"
            );
        }
    }

    /// Creates `tenant` on its pageserver (success if it exists).
    pub async fn create_tenant(&self, tenant: TenantId) -> Result<(), BackendError> {
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        match self
            .clients(tenant)
            .await?
            .management
            .clone()
            .create_tenant(request)
            .await
        {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::AlreadyExists => Ok(()),
            Err(status) => Err(unavailable("creating the tenant", &status)),
        }
    }

    /// Deletes `tenant` and all its timelines from the pageserver (success if it is gone), then from every
    /// safekeeper at once. The pageserver's deletion is the one that decides the result: a safekeeper that fails
    /// or is down is logged and keeps the tenant's WAL (a retry of the deletion removes it).
    pub async fn delete_tenant(&self, tenant: TenantId) -> Result<(), BackendError> {
        self.delete_tenant_from_pageserver(tenant).await?;
        self.delete_tenant_from_safekeepers(tenant).await;
        Ok(())
    }

    /// The first step of [`Backend::delete_tenant`]: `tenant` deleted from every pageserver at once (success if
    /// it is gone). The result is its own pageserver's (a tenant no row names: the first's); another that fails
    /// is logged (it held no copy, or a move's leftover the reconciler deletes later).
    pub async fn delete_tenant_from_pageserver(&self, tenant: TenantId) -> Result<(), BackendError> {
        let own = self.clients(tenant).await?.address.clone();
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        let calls = self.pageservers.iter().map(|server| {
            let (mut client, request) = (server.management.clone(), request.clone());
            async move { (&server.address, client.delete_tenant(request).await) }
        });
        let mut result = Ok(());
        for (address, answer) in join_all(calls).await {
            match answer {
                Ok(_) => {}
                Err(status) if status.code() == Code::NotFound => {}
                Err(status) if *address == own => result = Err(unavailable("deleting the tenant", &status)),
                Err(status) => tracing::warn!(
                    pageserver = %address, %tenant, code = ?status.code(), error = %status.message(),
                    "a pageserver that does not hold the tenant's placement did not delete it"
                ),
            }
        }
        result
    }

    /// Deletes `tenant` from pageserver `address` only, if it is configured (success if it is gone): a copy left
    /// on a pageserver the tenant moved away from.
    pub async fn delete_tenant_on(&self, address: &str, tenant: TenantId) -> Result<(), BackendError> {
        let index = self.pageserver_index(address)?;
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        match self.pageservers[index].management.clone().delete_tenant(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Ok(()),
            Err(status) => Err(unavailable(&format!("deleting the tenant on {address}"), &status)),
        }
    }

    /// The second step of [`Backend::delete_tenant`]: `tenant` deleted from every safekeeper at once; one that
    /// fails or is down is logged and keeps the tenant's WAL.
    pub async fn delete_tenant_from_safekeepers(&self, tenant: TenantId) {
        let request = sk::DeleteTenantRequest {
            tenant_id: tenant.to_string(),
        };
        self.on_every_safekeeper(move |address, mut client| {
            let request = request.clone();
            async move {
                if let Err(status) = client.delete_tenant(request).await {
                    tracing::warn!(
                        safekeeper = %address,
                        %tenant,
                        code = ?status.code(),
                        error = %status.message(),
                        "a safekeeper did not delete a tenant; it keeps its WAL"
                    );
                }
            }
        })
        .await;
    }

    /// Creates `timeline` on the pageserver (a root, or a branch of its ancestor at its start LSN) and on the
    /// safekeepers, starting at the same LSN, all at once: each makes its creation durable with its own fsync,
    /// and none needs another's, so they overlap rather than wait in turn (issue 12 item 7). An identical
    /// existing timeline is success.
    ///
    /// If the pageserver refuses (a start LSN its ancestor does not have, an unknown ancestor), the safekeeper
    /// copies just made are deleted again; whatever a crash, another failure, a failed deletion or a copy's
    /// creation still under way (one past the majority's) leaves is a copy no metadata names, which the
    /// reconciler deletes (`reconcile`'s orphan copies), as it deletes a pageserver timeline whose row was never
    /// written.
    pub async fn create_timeline(
        &self,
        tenant: TenantId,
        timeline: &TimelineRow,
        set: &[String],
    ) -> Result<(), BackendError> {
        let (on_pageserver, on_safekeepers) = tokio::join!(
            async {
                let began = std::time::Instant::now();
                let made = self.create_timeline_on_pageserver(tenant, timeline).await;
                crate::stages::record("storage_pageserver", began.elapsed());
                made
            },
            async {
                let began = std::time::Instant::now();
                let made = self.create_timeline_on_safekeepers(tenant, timeline, set).await;
                crate::stages::record("storage_safekeepers", began.elapsed());
                made
            }
        );
        if let Err(error) = on_pageserver {
            // A refusal is final: the copies are of a timeline that will never be. After anything else the
            // caller may ask again, and the copies made are the ones it wants.
            if matches!(error, BackendError::Unprocessable(_) | BackendError::NotFound(_)) {
                self.delete_timeline_from_safekeepers(tenant, timeline.timeline_id)
                    .await;
            }
            return Err(error);
        }
        on_safekeepers
    }

    /// The pageserver's half of [`Backend::create_timeline`].
    async fn create_timeline_on_pageserver(
        &self,
        tenant: TenantId,
        timeline: &TimelineRow,
    ) -> Result<(), BackendError> {
        let (ancestor_timeline_id, ancestor_lsn, start_lsn) = match timeline.ancestor_timeline_id {
            Some(ancestor) => (ancestor.to_string(), timeline.start_lsn.0, 0),
            None => (String::new(), 0, timeline.start_lsn.0),
        };
        let request = ps::CreateTimelineRequest {
            timeline: Some(timeline_ref(tenant, timeline.timeline_id)),
            ancestor_timeline_id,
            ancestor_lsn,
            start_lsn,
        };
        match self
            .clients(tenant)
            .await?
            .management
            .clone()
            .create_timeline(request)
            .await
        {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::AlreadyExists => Ok(()),
            Err(status) if matches!(status.code(), Code::OutOfRange | Code::FailedPrecondition) => {
                Err(BackendError::Unprocessable(status.message().to_owned()))
            }
            Err(status) if status.code() == Code::NotFound => Err(BackendError::NotFound(status.message().to_owned())),
            Err(status) => Err(unavailable("creating the timeline", &status)),
        }
    }

    /// The safekeepers' half of [`Backend::create_timeline`]: every member of `set` asked at once, and done as
    /// soon as a majority made it (or can no longer). The others' calls go on in tasks of their own, each bounded
    /// as every call is, and log their failure: the reply does not wait for the slowest copy's flush or for a
    /// dead member's timeout, and a copy missing for good is the reconciler's to rebuild.
    async fn create_timeline_on_safekeepers(
        &self,
        tenant: TenantId,
        timeline: &TimelineRow,
        set: &[String],
    ) -> Result<(), BackendError> {
        let request = sk::CreateTimelineRequest {
            timeline: Some(sk::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: timeline.timeline_id.to_string(),
            }),
            start_lsn: timeline.start_lsn.0,
        };
        let timeline_id = timeline.timeline_id;
        let (made, errors) = self
            .on_a_majority(set, Duration::ZERO, move |address, mut client| {
                let request = request.clone();
                async move {
                    let made = client.create_timeline(request).await.map(|_| ());
                    if let Err(status) = &made {
                        tracing::warn!(safekeeper = %address, %tenant, timeline = %timeline_id, error = %status.message(), "a safekeeper missed a timeline creation");
                    }
                    made
                }
            })
            .await;
        if made.len() < Self::quorum(set) {
            return Err(BackendError::Unavailable(format!(
                "creating the timeline on the safekeepers: {}",
                errors.join("; ")
            )));
        }
        Ok(())
    }

    /// Makes `timeline`'s copy on the one safekeeper `address` (a member of its set), as
    /// [`Backend::create_timeline`] does on each: an existing copy with the same start LSN is success. For
    /// finishing a creation a crash cut before it reached that member (`control`'s settling of pending
    /// creations).
    pub async fn create_timeline_copy_on(
        &self,
        address: &str,
        tenant: TenantId,
        timeline: &TimelineRow,
    ) -> Result<(), BackendError> {
        let mut client = self
            .client_of(address)
            .cloned()
            .ok_or_else(|| BackendError::Unavailable(format!("{address} is not a configured safekeeper")))?;
        client
            .create_timeline(sk::CreateTimelineRequest {
                timeline: Some(sk::TimelineRef {
                    tenant_id: tenant.to_string(),
                    timeline_id: timeline.timeline_id.to_string(),
                }),
                start_lsn: timeline.start_lsn.0,
            })
            .await
            .map(|_| ())
            .map_err(|status| unavailable(&format!("creating the timeline's copy on {address}"), &status))
    }

    /// Deletes `timeline` from the pageserver (success if it is gone), then from every safekeeper at once. The
    /// pageserver's deletion is the one that decides the result: a safekeeper that fails or is down is logged
    /// and keeps the timeline's WAL (a retry of the deletion removes it).
    pub async fn delete_timeline(&self, tenant: TenantId, timeline: TimelineId) -> Result<(), BackendError> {
        self.delete_timeline_from_pageserver(tenant, timeline).await?;
        self.delete_timeline_from_safekeepers(tenant, timeline).await;
        Ok(())
    }

    /// The first step of [`Backend::delete_timeline`]: `timeline` deleted from the pageserver (success if it is
    /// gone).
    pub async fn delete_timeline_from_pageserver(
        &self,
        tenant: TenantId,
        timeline: TimelineId,
    ) -> Result<(), BackendError> {
        match self
            .clients(tenant)
            .await?
            .management
            .clone()
            .delete_timeline(timeline_ref(tenant, timeline))
            .await
        {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Ok(()),
            Err(status) => Err(unavailable("deleting the timeline", &status)),
        }
    }

    /// Seals `timeline` on the pageserver (an ancestor no branch is on; see the pageserver's `SealTimeline`);
    /// returns whether everything its children read is durable where the pageserver's recovery finds it, so
    /// that its safekeeper copies may go. `false` (not yet: an upload to remote storage pending) and every error
    /// mean "try again later".
    pub async fn seal_timeline(&self, tenant: TenantId, timeline: TimelineId) -> Result<bool, BackendError> {
        match self
            .clients(tenant)
            .await?
            .management
            .clone()
            .seal_timeline(timeline_ref(tenant, timeline))
            .await
        {
            Ok(response) => Ok(response.into_inner().durable),
            Err(status) => Err(unavailable("sealing the timeline", &status)),
        }
    }

    /// The second step of [`Backend::delete_timeline`]: `timeline` deleted from every safekeeper at once; one
    /// that fails or is down is logged and keeps the timeline's WAL.
    pub async fn delete_timeline_from_safekeepers(&self, tenant: TenantId, timeline: TimelineId) {
        let request = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        self.on_every_safekeeper(move |address, mut client| {
            let request = request.clone();
            async move {
                if let Err(status) = client.delete_timeline(request).await {
                    tracing::warn!(
                        safekeeper = %address,
                        %tenant,
                        %timeline,
                        code = ?status.code(),
                        error = %status.message(),
                        "a safekeeper did not delete a timeline; it keeps its WAL"
                    );
                }
            }
        })
        .await;
    }

    /// The timelines the pageserver holds for `tenant`, each with its ancestor; [`BackendError::NotFound`] if it
    /// does not hold the tenant.
    pub async fn list_timelines(
        &self,
        tenant: TenantId,
    ) -> Result<Vec<(TimelineId, Option<TimelineId>)>, BackendError> {
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        let response = match self
            .clients(tenant)
            .await?
            .management
            .clone()
            .list_timelines(request)
            .await
        {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == Code::NotFound => {
                return Err(BackendError::NotFound(status.message().to_owned()))
            }
            Err(status) => return Err(unavailable("listing the timelines", &status)),
        };
        let parse = |text: &str| {
            text.parse::<TimelineId>()
                .map_err(|_| BackendError::Unavailable(format!("malformed timeline id {text:?}")))
        };
        response
            .timelines
            .iter()
            .map(|info| {
                let ancestor = if info.ancestor_timeline_id.is_empty() {
                    None
                } else {
                    Some(parse(&info.ancestor_timeline_id)?)
                };
                Ok((parse(&info.timeline_id)?, ancestor))
            })
            .collect()
    }

    /// The pageserver's view of `timeline`.
    pub async fn timeline_state(&self, tenant: TenantId, timeline: TimelineId) -> Result<TimelineState, BackendError> {
        match self
            .clients(tenant)
            .await?
            .management
            .clone()
            .get_timeline_info(timeline_ref(tenant, timeline))
            .await
        {
            Ok(info) => {
                let info = info.into_inner();
                Ok(TimelineState {
                    last_record_lsn: Lsn(info.last_record_lsn),
                    gc_cutoff_lsn: Lsn(info.gc_cutoff_lsn),
                    logical_size_bytes: info.logical_size_bytes,
                })
            }
            Err(status) if status.code() == Code::NotFound => Err(BackendError::NotFound(status.message().to_owned())),
            Err(status) => Err(unavailable("reading the timeline", &status)),
        }
    }

    /// Waits (polling, bounded by the request timeout) until the pageserver has ingested `timeline` up to
    /// `lsn`: what the safekeepers committed is then readable there, and its timestamps are indexed.
    pub async fn wait_ingested(&self, tenant: TenantId, timeline: TimelineId, lsn: Lsn) -> Result<(), BackendError> {
        const POLL_MS: u64 = 2;
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let state = self.timeline_state(tenant, timeline).await?;
            if state.last_record_lsn >= lsn {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(BackendError::Unavailable(format!(
                    "the pageserver has ingested up to {}, not yet {lsn}",
                    state.last_record_lsn
                )));
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// The newest commit at or before `timestamp_us` in `timeline`'s history: the timeline that holds it (this
    /// one or an ancestor) and its LSN. A time before the history is [`BackendError::Unprocessable`].
    pub async fn lsn_for_timestamp(
        &self,
        tenant: TenantId,
        timeline: TimelineId,
        timestamp_us: u64,
    ) -> Result<(TimelineId, Lsn), BackendError> {
        let request = ps::LsnForTimestampRequest {
            timeline: Some(timeline_ref(tenant, timeline)),
            timestamp_us,
        };
        match self
            .clients(tenant)
            .await?
            .pages
            .clone()
            .lsn_for_timestamp(request)
            .await
        {
            Ok(response) => {
                let response = response.into_inner();
                let found: TimelineId = response.timeline_id.parse().map_err(|_| {
                    BackendError::Unavailable(format!("malformed timeline id {:?}", response.timeline_id))
                })?;
                Ok((found, Lsn(response.lsn)))
            }
            Err(status) if matches!(status.code(), Code::FailedPrecondition | Code::OutOfRange) => {
                Err(BackendError::Unprocessable(status.message().to_owned()))
            }
            Err(status) if status.code() == Code::NotFound => Err(BackendError::NotFound(status.message().to_owned())),
            Err(status) => Err(unavailable("resolving the timestamp", &status)),
        }
    }

    /// What a majority of `timeline`'s set holds as committed: the highest commit LSN among a majority of its
    /// members' answers, and never below the timeline's start.
    pub async fn committed_lsn(
        &self,
        tenant: TenantId,
        timeline: TimelineId,
        set: &[String],
    ) -> Result<Lsn, BackendError> {
        let request = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        // Once a majority answered, the others get [`COMMITTED_LSN_GRACE_MS`] more: the answer is the highest
        // commit LSN any of them has heard of (the proposer tells every member of each commit right after it),
        // and a member frozen or dead gives none either way, so waiting for its call's timeout adds nothing.
        let (states, errors) = self
            .on_a_majority(
                set,
                Duration::from_millis(COMMITTED_LSN_GRACE_MS),
                move |_, mut client| {
                    let request = request.clone();
                    async move { client.get_state(request).await.map(tonic::Response::into_inner) }
                },
            )
            .await;
        let answers = states.len();
        let committed = states
            .iter()
            .map(|state| Lsn(state.commit_lsn).max(Lsn(state.timeline_start_lsn)))
            .max()
            .unwrap_or(Lsn(0));
        if answers < Self::quorum(set) {
            return Err(BackendError::Unavailable(format!(
                "reading the safekeepers: {}",
                errors.join("; ")
            )));
        }
        Ok(committed)
    }
}

/// A safekeeper's answer to `GetState` as what it says of its copy.
fn copy_state_of(answer: Result<sk::AcceptorState, tonic::Status>) -> CopyState {
    match answer {
        Ok(state) => CopyState::Served {
            flush_lsn: Lsn(state.flush_lsn),
            oldest_lsn: Lsn(state.oldest_lsn),
        },
        Err(status) if status.code() == Code::NotFound => CopyState::Missing,
        Err(status) if status.code() == Code::Internal => CopyState::Broken(status.message().to_owned()),
        Err(status) => CopyState::Unknown(format!("{:?}: {}", status.code(), status.message())),
    }
}

/// A move's calls (issue 17 item 2, `control::pageserver_move`): each to one named pageserver, whatever the
/// tenant's placement says, and each idempotent (what is done already is success).
impl Backend {
    /// The management client of configured pageserver `address`.
    fn management_of(&self, address: &str) -> Result<ManagementClient<PeerService>, BackendError> {
        Ok(self.pageservers[self.pageserver_index(address)?].management.clone())
    }

    /// Has pageserver `address` attach `tenant` from the remote storage, as a secondary (serves and ingests,
    /// never uploads) or as its owner; a tenant already there only changes mode. [`BackendError::NotFound`] if
    /// the remote lacks it.
    pub async fn attach_tenant_on(&self, address: &str, tenant: TenantId, secondary: bool) -> Result<(), BackendError> {
        let request = ps::AttachTenantRequest {
            tenant_id: tenant.to_string(),
            secondary,
        };
        match self.management_of(address)?.attach_tenant(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Err(BackendError::NotFound(status.message().to_owned())),
            Err(status) => Err(unavailable(&format!("attaching the tenant on {address}"), &status)),
        }
    }

    /// Has pageserver `address` detach `tenant` (its local files removed, the remote copy kept); success if it
    /// is not there.
    pub async fn detach_tenant_on(&self, address: &str, tenant: TenantId) -> Result<(), BackendError> {
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        match self.management_of(address)?.detach_tenant(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Ok(()),
            Err(status) => Err(unavailable(&format!("detaching the tenant on {address}"), &status)),
        }
    }

    /// Has pageserver `address` hold (or release) the deletion of `tenant`'s remote layers.
    /// [`BackendError::NotFound`] if the tenant is not there.
    pub async fn hold_remote_deletions_on(
        &self,
        address: &str,
        tenant: TenantId,
        hold: bool,
    ) -> Result<(), BackendError> {
        let request = ps::HoldRemoteDeletionsRequest {
            tenant_id: tenant.to_string(),
            hold,
        };
        match self.management_of(address)?.hold_remote_deletions(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Err(BackendError::NotFound(status.message().to_owned())),
            Err(status) => Err(unavailable(
                &format!("holding the remote deletions on {address}"),
                &status,
            )),
        }
    }

    /// Each timeline of `tenant` on pageserver `address` with its `last_record_lsn`; [`BackendError::NotFound`]
    /// if the tenant is not there.
    pub async fn last_record_lsns_on(
        &self,
        address: &str,
        tenant: TenantId,
    ) -> Result<HashMap<TimelineId, Lsn>, BackendError> {
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        let response = match self.management_of(address)?.list_timelines(request).await {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == Code::NotFound => {
                return Err(BackendError::NotFound(status.message().to_owned()))
            }
            Err(status) => return Err(unavailable(&format!("listing the timelines on {address}"), &status)),
        };
        response
            .timelines
            .iter()
            .map(|info| {
                let id = info
                    .timeline_id
                    .parse::<TimelineId>()
                    .map_err(|_| BackendError::Unavailable(format!("malformed timeline id {:?}", info.timeline_id)))?;
                Ok((id, Lsn(info.last_record_lsn)))
            })
            .collect()
    }
}
