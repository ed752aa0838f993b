//! The management service (`cambium.pageserver.v1.Management`) over a [`TenantManager`]: tenants, timelines
//! (roots and branches), timeline state and LSN leases.
//!
//! Creations and deletions write and fsync files (a tenant directory, the branch log, removed timeline
//! directories) and a timeline deletion waits out a running flush or compaction, so they run on tokio's
//! blocking pool, never on the async workers. Statuses follow [`crate::convert`]; an LSN past the ancestor's
//! last record (a branch point, a lease) is `OUT_OF_RANGE`.
//!
//! `TimelineInfo.remote_consistent_lsn` is what remote storage holds: 0 when the pageserver has no remote
//! storage, the timeline's start LSN until its first upload, then the `disk_consistent_lsn` of the last
//! metadata uploaded (see [`crate::remote`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proto::pageserver as pb;
use proto::pageserver::management_server::{Management, ManagementServer};
use storage::{BranchPoint, Lsn, StorageError, TenantId};
use tonic::{Request, Response, Status};

use crate::convert::{self, status_from_error, status_from_storage, Operation};
use crate::limits::MESSAGE_BYTES_MAX;
use crate::remote::{RemoteConsistentLsns, UploadQueue};

/// How long a branch creation waits for the WAL receiver to ingest up to the branch point.
const BRANCH_POINT_WAIT_MS: u64 = 5_000;
use crate::tenants::{NewTimeline, TenantManager};

/// The longest LSN lease granted; a longer request gets this (the response says when the lease ends).
/// A holder renews before expiry, so an hour costs nothing and bounds the history a forgotten lease pins.
pub const LEASE_DURATION_MS_MAX: u64 = 3_600_000;
/// Highest start LSN of a root timeline: LSN arithmetic (`start + record length`) must never overflow,
/// whatever WAL follows (the safekeeper has the same bound).
pub const TIMELINE_START_LSN_MAX: Lsn = Lsn(u64::MAX / 2);

/// Runs a filesystem-touching step on the blocking pool.
async fn blocking<T: Send + 'static>(step: impl FnOnce() -> Result<T, Status> + Send + 'static) -> Result<T, Status> {
    tokio::task::spawn_blocking(step)
        .await
        .map_err(|join| convert::internal(&join))?
}

fn now_us() -> Result<u64, Status> {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| convert::internal(&e))?;
    u64::try_from(since_epoch.as_micros()).map_err(|e| convert::internal(&e))
}

/// Where a requested timeline starts; `INVALID_ARGUMENT` for a malformed request.
fn new_timeline(request: &pb::CreateTimelineRequest) -> Result<NewTimeline, Status> {
    if request.ancestor_timeline_id.is_empty() {
        // The contract: `ancestor_lsn` is ignored for a root.
        let start_lsn = Lsn(request.start_lsn);
        if start_lsn > TIMELINE_START_LSN_MAX {
            return Err(Status::invalid_argument(format!(
                "start_lsn {start_lsn} is past {TIMELINE_START_LSN_MAX}"
            )));
        }
        return Ok(NewTimeline::Root { start_lsn });
    }
    let ancestor = convert::timeline_id("ancestor_timeline_id", &request.ancestor_timeline_id)?;
    // A branch starts at its branch point; a different start_lsn would be a caller's mistake, so say so.
    if request.start_lsn != 0 {
        return Err(Status::invalid_argument(
            "start_lsn is for root timelines; a branch starts at ancestor_lsn",
        ));
    }
    let point = match request.ancestor_lsn {
        0 => BranchPoint::Latest,
        lsn => BranchPoint::At(Lsn(lsn)),
    };
    Ok(NewTimeline::Branch { ancestor, point })
}

/// The management service over a tenant manager.
#[derive(Clone)]
pub struct ManagementHandler {
    manager: Arc<TenantManager>,
    /// `None` without remote storage.
    remote_consistent_lsns: Option<Arc<RemoteConsistentLsns>>,
    /// The uploader's queue; `None` without remote storage.
    upload_queue: Option<Arc<UploadQueue>>,
}

impl ManagementHandler {
    /// A service over `manager`, with no remote storage.
    pub fn new(manager: Arc<TenantManager>) -> ManagementHandler {
        ManagementHandler {
            manager,
            remote_consistent_lsns: None,
            upload_queue: None,
        }
    }

    /// Reports the `remote_consistent_lsn`s of the remote storage's uploader and queues uploads on its queue
    /// (`None`: no remote storage).
    pub fn with_remote(mut self, remote: Option<(Arc<RemoteConsistentLsns>, Arc<UploadQueue>)>) -> ManagementHandler {
        let (lsns, queue) = remote.unzip();
        self.remote_consistent_lsns = lsns;
        self.upload_queue = queue;
        self
    }

    /// The wire form of a timeline's info, with its `remote_consistent_lsn` (see the module doc).
    fn info_to_proto(&self, tenant: TenantId, info: &storage::TimelineInfo) -> pb::TimelineInfo {
        let mut wire = convert::timeline_info_to_proto(tenant, info);
        wire.remote_consistent_lsn = match &self.remote_consistent_lsns {
            None => 0,
            Some(lsns) => {
                lsns.get(tenant, info.timeline_id)
                    .map_or(info.start_lsn, |lsn| lsn.max(info.start_lsn))
                    .0
            }
        };
        wire
    }

    /// The tonic server for this service, with the message size limits set.
    pub fn into_server(self) -> ManagementServer<ManagementHandler> {
        ManagementServer::new(self)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX)
    }
}

#[tonic::async_trait]
impl Management for ManagementHandler {
    async fn create_tenant(&self, request: Request<pb::TenantRequest>) -> Result<Response<pb::TenantResponse>, Status> {
        let tenant = convert::tenant_id("tenant_id", &request.get_ref().tenant_id)?;
        let manager = Arc::clone(&self.manager);
        blocking(move || {
            manager
                .create_tenant(tenant)
                .map_err(|e| status_from_error(&e, Operation::Manage))
        })
        .await?;
        tracing::info!(%tenant, "created tenant");
        Ok(Response::new(pb::TenantResponse {
            tenant_id: tenant.to_string(),
        }))
    }

    async fn attach_tenant(
        &self,
        request: Request<pb::AttachTenantRequest>,
    ) -> Result<Response<pb::TenantResponse>, Status> {
        let tenant = convert::tenant_id("tenant_id", &request.get_ref().tenant_id)?;
        let secondary = request.get_ref().secondary;
        self.manager
            .attach_tenant(tenant, secondary)
            .await
            .map_err(|e| status_from_error(&e, Operation::Manage))?;
        tracing::info!(%tenant, secondary, "attached tenant");
        Ok(Response::new(pb::TenantResponse {
            tenant_id: tenant.to_string(),
        }))
    }

    async fn hold_remote_deletions(
        &self,
        request: Request<pb::HoldRemoteDeletionsRequest>,
    ) -> Result<Response<pb::TenantResponse>, Status> {
        let tenant = convert::tenant_id("tenant_id", &request.get_ref().tenant_id)?;
        let hold = request.get_ref().hold;
        let manager = Arc::clone(&self.manager);
        blocking(move || {
            manager
                .tenant(tenant)
                .and_then(|_| manager.hold_remote_deletions(tenant, hold))
                .map_err(|e| status_from_error(&e, Operation::Manage))
        })
        .await?;
        tracing::info!(%tenant, hold, "remote layer deletions held or released");
        Ok(Response::new(pb::TenantResponse {
            tenant_id: tenant.to_string(),
        }))
    }

    async fn detach_tenant(&self, request: Request<pb::TenantRequest>) -> Result<Response<pb::TenantResponse>, Status> {
        let tenant = convert::tenant_id("tenant_id", &request.get_ref().tenant_id)?;
        let manager = Arc::clone(&self.manager);
        blocking(move || {
            manager
                .detach_tenant(tenant)
                .map_err(|e| status_from_error(&e, Operation::Manage))
        })
        .await?;
        tracing::info!(%tenant, "detached tenant (local files removed, remote copy kept)");
        Ok(Response::new(pb::TenantResponse {
            tenant_id: tenant.to_string(),
        }))
    }

    async fn delete_tenant(&self, request: Request<pb::TenantRequest>) -> Result<Response<pb::TenantResponse>, Status> {
        let tenant = convert::tenant_id("tenant_id", &request.get_ref().tenant_id)?;
        let manager = Arc::clone(&self.manager);
        blocking(move || {
            manager
                .delete_tenant(tenant)
                .map_err(|e| status_from_error(&e, Operation::Manage))
        })
        .await?;
        tracing::info!(%tenant, "deleted tenant");
        Ok(Response::new(pb::TenantResponse {
            tenant_id: tenant.to_string(),
        }))
    }

    async fn create_timeline(
        &self,
        request: Request<pb::CreateTimelineRequest>,
    ) -> Result<Response<pb::TimelineInfo>, Status> {
        let request = request.into_inner();
        let (tenant, id) = convert::timeline_key(request.timeline.as_ref())?;
        let new = new_timeline(&request)?;
        // A creation asked again (a retry, a restart's settling) is answered as made before anything is waited
        // for: after a restart the branch point may be ahead of what was ingested, and a refusal here reads to
        // the control plane as "this timeline will never be", whose copies it deletes.
        if self.manager.timeline(tenant, id).is_ok() {
            return Err(Status::already_exists(format!("timeline {id} already exists")));
        }
        if let NewTimeline::Branch {
            ancestor,
            point: BranchPoint::At(lsn),
        } = &new
        {
            let (ancestor, lsn) = (*ancestor, *lsn);
            // A branch point the WAL receiver has not ingested yet (the compute committed it a moment ago) is
            // waited for, bounded; only a point that stays ahead is refused (OUT_OF_RANGE).
            let timeline = self
                .manager
                .timeline(tenant, ancestor)
                .map_err(|e| status_from_error(&e, Operation::Manage))?;
            let waited = self
                .manager
                .wait_for_lsn(tenant, &timeline, lsn, Duration::from_millis(BRANCH_POINT_WAIT_MS))
                .await;
            if let Err(error) = waited {
                return Err(Status::out_of_range(format!("branch point {lsn} is ahead: {error}")));
            }
        }
        let manager = Arc::clone(&self.manager);
        let info = blocking(move || {
            let timeline = manager
                .create_timeline(tenant, id, new)
                .map_err(|e| status_from_error(&e, Operation::Manage))?;
            Ok(timeline.info())
        })
        .await?;
        tracing::info!(%tenant, timeline = %id, ancestor = ?info.ancestor, start_lsn = %info.start_lsn, "created timeline");
        Ok(Response::new(self.info_to_proto(tenant, &info)))
    }

    async fn delete_timeline(
        &self,
        request: Request<pb::TimelineRef>,
    ) -> Result<Response<pb::DeleteTimelineResponse>, Status> {
        let (tenant, id) = convert::timeline_key(Some(request.get_ref()))?;
        let manager = Arc::clone(&self.manager);
        blocking(move || {
            manager
                .delete_timeline(tenant, id)
                .map_err(|e| status_from_error(&e, Operation::Manage))
        })
        .await?;
        tracing::info!(%tenant, timeline = %id, "deleted timeline");
        Ok(Response::new(pb::DeleteTimelineResponse {}))
    }

    async fn seal_timeline(
        &self,
        request: Request<pb::TimelineRef>,
    ) -> Result<Response<pb::SealTimelineResponse>, Status> {
        let (tenant, id) = convert::timeline_key(Some(request.get_ref()))?;
        let timeline = self
            .manager
            .timeline(tenant, id)
            .map_err(|e| status_from_error(&e, Operation::Manage))?;
        // After a restart the end may not have been re-fed yet: waited for, bounded, as a branch point is.
        if timeline.sealed_lsn().is_none() {
            if let Some(end_lsn) = timeline.newest_branch_point() {
                let waited = self
                    .manager
                    .wait_for_lsn(tenant, &timeline, end_lsn, Duration::from_millis(BRANCH_POINT_WAIT_MS))
                    .await;
                if let Err(error) = waited {
                    return Err(Status::unavailable(format!(
                        "timeline {id} has not ingested up to its end {end_lsn}: {error}"
                    )));
                }
            }
        }
        let manager = Arc::clone(&self.manager);
        let (end_lsn, info) = blocking(move || {
            let end_lsn = manager
                .seal_timeline(tenant, id)
                .map_err(|e| status_from_error(&e, Operation::Manage))?;
            Ok((end_lsn, timeline.info()))
        })
        .await?;
        let info = self.info_to_proto(tenant, &info);
        // The next upload of the timeline carries the branch log with the seal (a rebuild then follows no WAL for
        // it either) and its flush.
        if let Some(queue) = &self.upload_queue {
            queue.schedule(tenant, id);
        }
        // Without remote storage the local layers are what a restart reads; with it, a rebuild reads the remote
        // copy: durable once the uploader brought it up to the end.
        let durable = info.disk_consistent_lsn >= end_lsn.0
            && (self.remote_consistent_lsns.is_none() || info.remote_consistent_lsn >= end_lsn.0);
        tracing::info!(%tenant, timeline = %id, %end_lsn, durable, "sealed timeline");
        Ok(Response::new(pb::SealTimelineResponse {
            end_lsn: end_lsn.0,
            durable,
            info: Some(info),
        }))
    }

    async fn get_timeline_info(&self, request: Request<pb::TimelineRef>) -> Result<Response<pb::TimelineInfo>, Status> {
        let (tenant, id) = convert::timeline_key(Some(request.get_ref()))?;
        let timeline = self
            .manager
            .timeline(tenant, id)
            .map_err(|e| status_from_error(&e, Operation::Manage))?;
        Ok(Response::new(self.info_to_proto(tenant, &timeline.info())))
    }

    async fn list_timelines(
        &self,
        request: Request<pb::TenantRequest>,
    ) -> Result<Response<pb::ListTimelinesResponse>, Status> {
        let tenant_id: TenantId = convert::tenant_id("tenant_id", &request.get_ref().tenant_id)?;
        let tenant = self
            .manager
            .tenant(tenant_id)
            .map_err(|e| status_from_error(&e, Operation::Manage))?;
        // Each info reads the database size, which may touch layer files: off the async workers.
        let mut infos = blocking(move || Ok(tenant.timelines().iter().map(|t| t.info()).collect::<Vec<_>>())).await?;
        infos.sort_by_key(|info| info.timeline_id);
        let timelines = infos.iter().map(|info| self.info_to_proto(tenant_id, info)).collect();
        Ok(Response::new(pb::ListTimelinesResponse { timelines }))
    }

    async fn list_tenants(
        &self,
        _request: Request<pb::ListTenantsRequest>,
    ) -> Result<Response<pb::ListTenantsResponse>, Status> {
        let mut tenants = self.manager.tenant_ids();
        tenants.sort_unstable();
        let tenant_ids = tenants.iter().map(ToString::to_string).collect();
        Ok(Response::new(pb::ListTenantsResponse { tenant_ids }))
    }

    async fn lease_lsn(&self, request: Request<pb::LeaseLsnRequest>) -> Result<Response<pb::LeaseLsnResponse>, Status> {
        let request = request.into_inner();
        let (tenant, id) = convert::timeline_key(request.timeline.as_ref())?;
        if request.duration_ms == 0 {
            return Err(Status::invalid_argument("duration_ms must be positive"));
        }
        let duration_ms = request.duration_ms.min(LEASE_DURATION_MS_MAX);
        let timeline = self
            .manager
            .timeline(tenant, id)
            .map_err(|e| status_from_error(&e, Operation::Manage))?;
        let lsn = Lsn(request.lsn);
        // The engine checks the cutoff and the last record; below the timeline's own start the history is the
        // ancestor's, and a lease here would pin nothing.
        if lsn < timeline.start_lsn() {
            let error = StorageError::LsnBeforeStart {
                timeline: id,
                lsn,
                start_lsn: timeline.start_lsn(),
            };
            return Err(status_from_storage(&error, Operation::Manage));
        }
        let until_us = now_us()?.saturating_add(duration_ms * 1000);
        timeline
            .lease_lsn(lsn, until_us)
            .map_err(|e| status_from_storage(&e, Operation::Manage))?;
        tracing::debug!(%tenant, timeline = %id, %lsn, until_us, "leased LSN");
        Ok(Response::new(pb::LeaseLsnResponse {
            valid_until_ms: until_us / 1000,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::TimelineId;
    use tonic::Code;

    fn request(ancestor: &str, ancestor_lsn: u64, start_lsn: u64) -> pb::CreateTimelineRequest {
        pb::CreateTimelineRequest {
            timeline: None,
            ancestor_timeline_id: ancestor.into(),
            ancestor_lsn,
            start_lsn,
        }
    }

    #[test]
    fn timeline_creations_are_parsed() {
        let ancestor = TimelineId(7).to_string();
        assert_eq!(
            new_timeline(&request("", 5, 0x100)).expect("root"),
            NewTimeline::Root { start_lsn: Lsn(0x100) }
        );
        assert_eq!(
            new_timeline(&request(&ancestor, 0, 0)).expect("latest"),
            NewTimeline::Branch {
                ancestor: TimelineId(7),
                point: BranchPoint::Latest
            }
        );
        assert_eq!(
            new_timeline(&request(&ancestor, 0x80, 0)).expect("at"),
            NewTimeline::Branch {
                ancestor: TimelineId(7),
                point: BranchPoint::At(Lsn(0x80))
            }
        );
        for bad in [
            request(&ancestor, 0x80, 0x80),
            request("7", 0, 0),
            request("", 0, u64::MAX),
        ] {
            assert_eq!(new_timeline(&bad).expect_err("refused").code(), Code::InvalidArgument);
        }
    }
}
