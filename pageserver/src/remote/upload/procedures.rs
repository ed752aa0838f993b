//! The upload procedures: what one job of the uploader does to one timeline or tenant, in the order the
//! [remote module](super::super) argues for. Uploading a snapshot: layers, timestamps, metadata, the tenant's
//! branch log, then `remote_consistent_lsn`, then the remote layers the new metadata no longer names. Deleting
//! a timeline or a tenant. The scheduling (which job runs when) is the [uploader](super)'s.

use std::collections::HashSet;
use std::path::Path;

use bytes::Bytes;
use futures::StreamExt;
use storage::branch_log::BranchLogEntry;
use storage::layer::desc::LayerDesc;
use storage::layer::file::LayerFile;
use storage::metadata::TimelineMetadata;
use storage::{TenantId, Timeline, TimelineId};

use super::super::files::{
    branch_log_prefix, check_metadata, check_timestamps, decode_metadata, is_layer_file_name, live_timelines,
    BRANCH_LOG_FILE, METADATA_FILE, TIMESTAMPS_FILE, TIMESTAMP_ENTRY_BYTES,
};
use super::super::store::{blocking, io_error, RemoteError};
use super::{Ctx, TenantRemote, TimelineRemote, SNAPSHOT_ATTEMPTS_MAX};

/// Lists the timeline's remote objects and reads its remote metadata.
async fn load_remote_state(
    ctx: &Ctx,
    tenant: TenantId,
    timeline: TimelineId,
    state: &mut TimelineRemote,
) -> Result<(), RemoteError> {
    let remote = &ctx.remote;
    for (path, size) in remote.list_objects(&remote.timeline_prefix(tenant, timeline)).await? {
        match path.filename() {
            Some(name) if is_layer_file_name(name) => {
                state.layers.insert(name.to_string(), size);
            }
            Some(TIMESTAMPS_FILE) => state.timestamps_count = size / TIMESTAMP_ENTRY_BYTES,
            _ => {}
        }
    }
    let key = remote.timeline_key(tenant, timeline, METADATA_FILE);
    if let Some(bytes) = remote.get_bytes(&key).await? {
        match decode_metadata(&bytes).and_then(|meta| check_metadata(&meta, timeline).map(|()| meta)) {
            Ok(meta) => state.uploaded = Some(meta),
            Err(reason) => tracing::warn!(%key, reason, "damaged remote metadata; the next upload replaces it"),
        }
    }
    // Entries past the remote metadata's count may come from a snapshot whose upload was cut short: trust only
    // the counted ones, so the next upload that needs more replaces the object.
    let counted = state.uploaded.as_ref().map_or(0, |meta| meta.timestamp_count);
    state.timestamps_count = state.timestamps_count.min(counted);
    state.initialized = true;
    Ok(())
}

/// Why one snapshot upload stopped.
enum SnapshotError {
    /// A layer the snapshot names is gone: a newer metadata replaced it.
    Stale,
    Failed(RemoteError),
}

impl From<RemoteError> for SnapshotError {
    fn from(e: RemoteError) -> Self {
        SnapshotError::Failed(e)
    }
}

/// The job of one timeline: see the module doc for the order.
pub(super) async fn upload_timeline(
    ctx: &Ctx,
    tenant: TenantId,
    timeline: &Timeline,
    tenant_dir: &Path,
    tenant_state: &tokio::sync::Mutex<TenantRemote>,
    state: &mut TimelineRemote,
) -> Result<(), RemoteError> {
    if let Some(owner) = super::super::owned_elsewhere(&ctx.remote, tenant).await? {
        // Another pageserver took the tenant while this one was unreachable (the control plane re-placed it):
        // this copy is stale and must never write the remote one again. A secondary is never uploaded.
        tracing::warn!(%tenant, %owner, "the tenant is owned by another pageserver now; kept here as a secondary");
        ctx.manager
            .set_secondary(tenant, true)
            .map_err(|e| RemoteError::LocalState(e.to_string()))?;
        return Err(RemoteError::LocalState(format!(
            "tenant {tenant} is owned by pageserver {owner}; not uploaded"
        )));
    }
    if !state.initialized {
        load_remote_state(ctx, tenant, timeline.id(), state).await?;
    }
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        match upload_snapshot(ctx, tenant, timeline, state).await {
            Ok(()) => break,
            Err(SnapshotError::Stale) if attempts < SNAPSHOT_ATTEMPTS_MAX => {
                tracing::debug!(%tenant, timeline = %timeline.id(), "layers changed under the upload; new snapshot");
            }
            Err(SnapshotError::Stale) => {
                return Err(RemoteError::LocalState(format!(
                    "the layers of timeline {} changed under {SNAPSHOT_ATTEMPTS_MAX} snapshots",
                    timeline.id()
                )))
            }
            Err(SnapshotError::Failed(e)) => return Err(e),
        }
    }
    upload_branch_log(ctx, tenant, tenant_dir, tenant_state).await?;
    let Some(meta) = &state.uploaded else {
        return Ok(());
    };
    ctx.lsns.advance((tenant, timeline.id()), meta.disk_consistent_lsn);
    if ctx.manager.remote_deletions_held(tenant) {
        // A move in progress: another pageserver may read an older index naming these layers. They stay in
        // `state.layers`, so the first upload after the hold is released deletes them. Checked after the new
        // metadata is up, so a layer deleted here is named by no index read after the hold was set.
        return Ok(());
    }
    let named: HashSet<String> = meta.layers.iter().map(LayerDesc::file_name).collect();
    let unreferenced: Vec<String> = state.layers.keys().filter(|n| !named.contains(*n)).cloned().collect();
    for name in unreferenced {
        ctx.remote
            .delete(&ctx.remote.timeline_key(tenant, timeline.id(), &name))
            .await?;
        state.layers.remove(&name);
    }
    Ok(())
}

/// Uploads the current local metadata and what it names, unless it is what was last uploaded.
async fn upload_snapshot(
    ctx: &Ctx,
    tenant: TenantId,
    timeline: &Timeline,
    state: &mut TimelineRemote,
) -> Result<(), SnapshotError> {
    let id = timeline.id();
    let dir = timeline.dir().to_path_buf();
    let Some((meta_bytes, meta)) = read_local_metadata(&dir, id).await? else {
        return Ok(());
    };
    if let Some(uploaded) = &state.uploaded {
        if *uploaded == meta {
            return Ok(());
        }
        if meta.disk_consistent_lsn < uploaded.disk_consistent_lsn {
            return Err(SnapshotError::Failed(RemoteError::LocalBehindRemote {
                timeline: id,
                local: meta.disk_consistent_lsn,
                remote: uploaded.disk_consistent_lsn,
            }));
        }
    }
    let missing: Vec<LayerDesc> = meta
        .layers
        .iter()
        .filter(|desc| state.layers.get(&desc.file_name()) != Some(&desc.size_bytes))
        .cloned()
        .collect();
    let concurrency = ctx.remote.config().requests_in_flight_max.max(1);
    let results: Vec<Result<(String, u64), RemoteError>> = futures::stream::iter(missing)
        .map(|desc| upload_layer(ctx, tenant, id, &dir, desc))
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut stale = false;
    for result in results {
        match result {
            Ok((name, size)) => {
                state.layers.insert(name, size);
            }
            Err(e) if e.is_local_not_found() => stale = true,
            Err(e) => return Err(e.into()),
        }
    }
    if stale {
        return Err(SnapshotError::Stale);
    }
    if meta.timestamp_count > state.timestamps_count {
        let timestamps = read_local_timestamps(&dir, meta.timestamp_count).await?;
        let key = ctx.remote.timeline_key(tenant, id, TIMESTAMPS_FILE);
        ctx.remote.put_bytes(&key, timestamps).await?;
        state.timestamps_count = meta.timestamp_count;
    }
    let key = ctx.remote.timeline_key(tenant, id, METADATA_FILE);
    ctx.remote.put_bytes(&key, meta_bytes).await?;
    tracing::debug!(%tenant, timeline = %id, disk_consistent_lsn = %meta.disk_consistent_lsn, "uploaded metadata");
    state.uploaded = Some(meta);
    Ok(())
}

/// Uploads one layer unless the remote has it already; returns its name and size.
async fn upload_layer(
    ctx: &Ctx,
    tenant: TenantId,
    timeline: TimelineId,
    dir: &Path,
    desc: LayerDesc,
) -> Result<(String, u64), RemoteError> {
    let name = desc.file_name();
    let key = ctx.remote.timeline_key(tenant, timeline, &name);
    let size_bytes = desc.size_bytes;
    if ctx.remote.head_size(&key).await? == Some(size_bytes) {
        return Ok((name, size_bytes));
    }
    let path = dir.join(&name);
    {
        // A damaged local file must not become the remote copy: check every checksum before sending.
        let path = path.clone();
        blocking(move || {
            std::fs::metadata(&path).map_err(io_error(&path))?;
            Ok(LayerFile::open_for_verify(path, desc).verify()?)
        })
        .await?;
    }
    ctx.remote.put_file(&key, &path, size_bytes).await?;
    Ok((name, size_bytes))
}

/// The local metadata's bytes and contents, or `None` if the timeline never flushed (or is being deleted).
async fn read_local_metadata(
    dir: &Path,
    timeline: TimelineId,
) -> Result<Option<(Bytes, TimelineMetadata)>, RemoteError> {
    let path = dir.join(METADATA_FILE);
    let read = {
        let path = path.clone();
        blocking(move || match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(RemoteError::Io { path, source }),
        })
        .await?
    };
    let Some(bytes) = read else {
        return Ok(None);
    };
    let meta = decode_metadata(&bytes)
        .and_then(|meta| check_metadata(&meta, timeline).map(|()| meta))
        .map_err(|reason| RemoteError::Corrupt {
            what: path.display().to_string(),
            reason,
        })?;
    Ok(Some((Bytes::from(bytes), meta)))
}

/// The first `count` entries of the local timestamp index, checked.
async fn read_local_timestamps(dir: &Path, count: u64) -> Result<Bytes, RemoteError> {
    let path = dir.join(TIMESTAMPS_FILE);
    let bytes = {
        let path = path.clone();
        blocking(move || std::fs::read(&path).map_err(io_error(&path))).await?
    };
    check_timestamps(&bytes, count).map_err(|reason| RemoteError::Corrupt {
        what: path.display().to_string(),
        reason,
    })?;
    Ok(Bytes::from(bytes).slice(..(count * TIMESTAMP_ENTRY_BYTES) as usize))
}

/// Uploads the tenant's branch log if it grew since the last upload; returns its entries.
async fn upload_branch_log(
    ctx: &Ctx,
    tenant: TenantId,
    tenant_dir: &Path,
    tenant_state: &tokio::sync::Mutex<TenantRemote>,
) -> Result<Vec<BranchLogEntry>, RemoteError> {
    // Held across the upload (an async lock): two jobs of one tenant never race their logs.
    let mut state = tenant_state.lock().await;
    let path = tenant_dir.join(BRANCH_LOG_FILE);
    let bytes = {
        let path = path.clone();
        blocking(move || std::fs::read(&path).map_err(io_error(&path))).await?
    };
    let (entries, valid_len) = branch_log_prefix(&bytes).map_err(|reason| RemoteError::Corrupt {
        what: path.display().to_string(),
        reason,
    })?;
    if state.log_bytes_uploaded.is_some_and(|len| len >= valid_len as u64) {
        return Ok(entries);
    }
    if state.log_bytes_uploaded.is_none() {
        if let Some(owner) = ctx.remote.owner() {
            // Before the first branch log this process uploads: a rebuild by another pageserver sharing the
            // remote then leaves the tenant alone (`download::rebuild`).
            let key = ctx.remote.owner_key(tenant);
            ctx.remote.put_bytes(&key, Bytes::from(owner.to_owned())).await?;
        }
    }
    let key = ctx.remote.branch_log_key(tenant);
    ctx.remote
        .put_bytes(&key, Bytes::from(bytes).slice(..valid_len))
        .await?;
    state.log_bytes_uploaded = Some(valid_len as u64);
    Ok(entries)
}

/// Removes a deleted timeline's remote objects, after the remote branch log records the deletion.
pub(super) async fn delete_timeline(
    ctx: &Ctx,
    tenant: TenantId,
    timeline: TimelineId,
    tenant_dir: &Path,
    tenant_state: &tokio::sync::Mutex<TenantRemote>,
) -> Result<(), RemoteError> {
    // Nothing reports it any more: the safekeepers keep what they have for a timeline that is gone.
    ctx.lsns.forget((tenant, timeline));
    let entries = upload_branch_log(ctx, tenant, tenant_dir, tenant_state).await?;
    if live_timelines(&entries).contains(&timeline) {
        return Err(RemoteError::LocalState(format!(
            "timeline {timeline} is gone but the branch log lists it alive"
        )));
    }
    let remote = &ctx.remote;
    // The metadata first: what is left of a deletion cut short is never a metadata naming missing layers.
    remote
        .delete(&remote.timeline_key(tenant, timeline, METADATA_FILE))
        .await?;
    for (path, _) in remote.list_objects(&remote.timeline_prefix(tenant, timeline)).await? {
        remote.delete(&path).await?;
    }
    Ok(())
}

/// Removes a deleted tenant's remote objects, `branches.log` first: a rebuild skips a tenant without one.
pub(super) async fn delete_tenant(ctx: &Ctx, tenant: TenantId) -> Result<(), RemoteError> {
    ctx.lsns.forget_tenant(tenant);
    let remote = &ctx.remote;
    remote.delete(&remote.branch_log_key(tenant)).await?;
    for (path, _) in remote.list_objects(&remote.tenant_prefix(tenant)).await? {
        remote.delete(&path).await?;
    }
    Ok(())
}
