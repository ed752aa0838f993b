//! The storage side as the control plane drives it: the pageserver's management and page services and the
//! safekeepers, over gRPC.
//!
//! Every call is bounded by [`BackendConfig::request_timeout_ms`]. Creations are idempotent (an existing
//! tenant or an identical timeline is success) and deletions of what is gone succeed, so an operation that
//! is retried after a crash does the same thing again safely. Safekeeper calls go to all of them at once and
//! succeed on a majority, as the WAL itself does.

use std::time::Duration;

use futures::future::join_all;
use proto::pageserver as ps;
use proto::pageserver::management_client::ManagementClient;
use proto::pageserver::page_service_client::PageServiceClient;
use proto::safekeeper as sk;
use proto::safekeeper::safekeeper_client::SafekeeperClient;
use storage::{Lsn, TenantId, TimelineId};
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use crate::store::databases::TimelineRow;

/// Where the storage services are and how long a call may take.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// The pageserver's gRPC address (`host:port` or a URI).
    pub pageserver: String,
    /// The safekeepers' gRPC addresses.
    pub safekeepers: Vec<String>,
    /// The bound of one call.
    pub request_timeout_ms: u64,
    /// The bound of connecting.
    pub connect_timeout_ms: u64,
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

/// Clients of the storage services; cheap to clone.
#[derive(Debug, Clone)]
pub struct Backend {
    management: ManagementClient<Channel>,
    pages: PageServiceClient<Channel>,
    safekeepers: Vec<(String, SafekeeperClient<Channel>)>,
    timeout: Duration,
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
        let pageserver = endpoint(&config.pageserver, config)?.connect_lazy();
        let safekeepers = config
            .safekeepers
            .iter()
            .map(|address| {
                let channel = endpoint(address, config)?.connect_lazy();
                Ok((address.clone(), SafekeeperClient::new(channel)))
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        if safekeepers.is_empty() {
            return Err(BackendError::Unavailable("no safekeepers configured".to_owned()));
        }
        Ok(Backend {
            management: ManagementClient::new(pageserver.clone()),
            pages: PageServiceClient::new(pageserver),
            safekeepers,
            timeout: Duration::from_millis(config.request_timeout_ms),
        })
    }

    /// A majority of the safekeepers.
    fn quorum(&self) -> usize {
        self.safekeepers.len() / 2 + 1
    }

    /// Creates `tenant` on the pageserver (success if it exists).
    pub async fn create_tenant(&self, tenant: TenantId) -> Result<(), BackendError> {
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        match self.management.clone().create_tenant(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::AlreadyExists => Ok(()),
            Err(status) => Err(unavailable("creating the tenant", &status)),
        }
    }

    /// Deletes `tenant` and all its timelines from the pageserver (success if it is gone), then from every
    /// safekeeper at once. The pageserver's deletion is the one that decides the result: a safekeeper that
    /// fails or is down is logged and keeps the tenant's WAL (a retry of the deletion removes it).
    pub async fn delete_tenant(&self, tenant: TenantId) -> Result<(), BackendError> {
        let request = ps::TenantRequest {
            tenant_id: tenant.to_string(),
        };
        match self.management.clone().delete_tenant(request).await {
            Ok(_) => {}
            Err(status) if status.code() == Code::NotFound => {}
            Err(status) => return Err(unavailable("deleting the tenant", &status)),
        }
        let request = sk::DeleteTenantRequest {
            tenant_id: tenant.to_string(),
        };
        let calls = self.safekeepers.iter().map(|(address, client)| {
            let (mut client, request) = (client.clone(), request.clone());
            async move { (address, client.delete_tenant(request).await) }
        });
        for (address, result) in join_all(calls).await {
            if let Err(status) = result {
                tracing::warn!(
                    safekeeper = %address,
                    %tenant,
                    code = ?status.code(),
                    error = %status.message(),
                    "a safekeeper did not delete a tenant; it keeps its WAL"
                );
            }
        }
        Ok(())
    }

    /// Creates `timeline` on the pageserver (a root, or a branch of its ancestor at its start LSN) and then on
    /// the safekeepers, starting at the same LSN. An identical existing timeline is success.
    pub async fn create_timeline(&self, tenant: TenantId, timeline: &TimelineRow) -> Result<(), BackendError> {
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
        match self.management.clone().create_timeline(request).await {
            Ok(_) => {}
            Err(status) if status.code() == Code::AlreadyExists => {}
            Err(status) if matches!(status.code(), Code::OutOfRange | Code::FailedPrecondition) => {
                return Err(BackendError::Unprocessable(status.message().to_owned()))
            }
            Err(status) if status.code() == Code::NotFound => {
                return Err(BackendError::NotFound(status.message().to_owned()))
            }
            Err(status) => return Err(unavailable("creating the timeline", &status)),
        }
        let request = sk::CreateTimelineRequest {
            timeline: Some(sk::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: timeline.timeline_id.to_string(),
            }),
            start_lsn: timeline.start_lsn.0,
        };
        let calls = self.safekeepers.iter().map(|(address, client)| {
            let (mut client, request) = (client.clone(), request.clone());
            async move { (address, client.create_timeline(request).await) }
        });
        let mut created = 0;
        let mut errors = Vec::new();
        for (address, result) in join_all(calls).await {
            match result {
                Ok(_) => created += 1,
                Err(status) => errors.push(format!("{address}: {}", status.message())),
            }
        }
        if created < self.quorum() {
            return Err(BackendError::Unavailable(format!(
                "creating the timeline on the safekeepers: {}",
                errors.join("; ")
            )));
        }
        if !errors.is_empty() {
            tracing::warn!(errors = %errors.join("; "), "a safekeeper missed a timeline creation");
        }
        Ok(())
    }

    /// Deletes `timeline` from the pageserver (success if it is gone), then from every safekeeper at once. The
    /// pageserver's deletion is the one that decides the result: a safekeeper that fails or is down is logged
    /// and keeps the timeline's WAL (a retry of the deletion removes it).
    pub async fn delete_timeline(&self, tenant: TenantId, timeline: TimelineId) -> Result<(), BackendError> {
        match self
            .management
            .clone()
            .delete_timeline(timeline_ref(tenant, timeline))
            .await
        {
            Ok(_) => {}
            Err(status) if status.code() == Code::NotFound => {}
            Err(status) => return Err(unavailable("deleting the timeline", &status)),
        }
        let request = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        let calls = self.safekeepers.iter().map(|(address, client)| {
            let (mut client, request) = (client.clone(), request.clone());
            async move { (address, client.delete_timeline(request).await) }
        });
        for (address, result) in join_all(calls).await {
            if let Err(status) = result {
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
        Ok(())
    }

    /// The pageserver's view of `timeline`.
    pub async fn timeline_state(&self, tenant: TenantId, timeline: TimelineId) -> Result<TimelineState, BackendError> {
        match self
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
        match self.pages.clone().lsn_for_timestamp(request).await {
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

    /// What a majority of safekeepers hold as committed on `timeline`: the highest commit LSN among a majority
    /// of answers, and never below the timeline's start.
    pub async fn committed_lsn(&self, tenant: TenantId, timeline: TimelineId) -> Result<Lsn, BackendError> {
        let request = sk::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline.to_string(),
        };
        let calls = self.safekeepers.iter().map(|(address, client)| {
            let (mut client, request) = (client.clone(), request.clone());
            async move { (address, client.get_state(request).await) }
        });
        let mut answers = 0;
        let mut committed = Lsn(0);
        let mut errors = Vec::new();
        for (address, result) in join_all(calls).await {
            match result {
                Ok(state) => {
                    let state = state.into_inner();
                    answers += 1;
                    committed = committed.max(Lsn(state.commit_lsn)).max(Lsn(state.timeline_start_lsn));
                }
                Err(status) => errors.push(format!("{address}: {}", status.message())),
            }
        }
        if answers < self.quorum() {
            return Err(BackendError::Unavailable(format!(
                "reading the safekeepers: {}",
                errors.join("; ")
            )));
        }
        Ok(committed)
    }
}
