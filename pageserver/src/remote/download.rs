//! Rebuilding tenants from remote storage at startup, before the tenants are opened.
//!
//! Every tenant the remote holds and the local disk does not is downloaded whole into a staging directory
//! (`<data_dir>/remote_download/<tenant>/`): per live timeline of its `branches.log`, the layers the remote
//! metadata names (size checked, then every checksum verified), the timestamps it counts, and the metadata
//! itself; then the branch log. Each file is written to a temp name, fsynced and renamed; the finished tenant
//! directory is then renamed into `<data_dir>/tenants/`, so a crash mid-rebuild leaves no half tenant behind
//! (the staging directory is cleared at the next start, which downloads again). The tenant then opens like
//! any other at the metadata's `disk_consistent_lsn`, and the WAL receiver resumes from there.
//!
//! This step downloads every layer eagerly before serving. Downloading layers on demand (open with the
//! remote index only, fetch a layer on its first read) is a later step.

use std::path::{Path, PathBuf};

use futures::{StreamExt, TryStreamExt};
use storage::layer::desc::LayerDesc;
use storage::layer::file::LayerFile;
use storage::{Durability, TenantId, TimelineId};

use super::files::{
    branch_log_prefix, check_metadata, check_timestamps, decode_metadata, live_timelines, BRANCH_LOG_FILE,
    METADATA_FILE, TIMELINES_DIR, TIMESTAMPS_FILE, TIMESTAMP_ENTRY_BYTES,
};
use super::store::{blocking, RemoteError, RemoteStorage};

/// The staging directory of downloads, under the data directory.
const STAGING_DIR: &str = "remote_download";
/// The tenants directory under the data directory (as [`crate::tenants::TenantManager`] lays it out).
const TENANTS_DIR: &str = "tenants";

fn corrupt(what: &impl ToString) -> impl FnOnce(String) -> RemoteError + '_ {
    move |reason| RemoteError::Corrupt {
        what: what.to_string(),
        reason,
    }
}

/// Downloads every remote tenant missing from `<data_dir>/tenants/` (see the module doc); returns the
/// tenants rebuilt. A tenant whose remote `branches.log` is missing (never fully uploaded, or being deleted)
/// is skipped. Any other failure fails the rebuild: serving without a tenant the remote holds would let a new
/// one of the same id overwrite it.
pub async fn rebuild(
    data_dir: &Path,
    remote: &RemoteStorage,
    durability: Durability,
) -> Result<Vec<TenantId>, RemoteError> {
    let tenants_dir = data_dir.join(TENANTS_DIR);
    let staging = data_dir.join(STAGING_DIR);
    {
        let (tenants_dir, staging) = (tenants_dir.clone(), staging.clone());
        blocking(move || {
            remove_dir_if_exists(&staging)?;
            Ok(storage::fsio::create_dir_durable(&tenants_dir, durability)?)
        })
        .await?;
    }
    let mut rebuilt = Vec::new();
    for name in remote.list_dirs(&remote.tenants_prefix()).await? {
        let Ok(tenant) = name.parse::<TenantId>() else {
            tracing::warn!(name, "ignoring a remote prefix that is not a tenant");
            continue;
        };
        if tenants_dir.join(&name).exists() {
            continue;
        }
        if rebuild_tenant(remote, tenant, &staging, &tenants_dir, durability).await? {
            rebuilt.push(tenant);
        }
    }
    blocking(move || remove_dir_if_exists(&staging)).await?;
    Ok(rebuilt)
}

fn remove_dir_if_exists(dir: &Path) -> Result<(), RemoteError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RemoteError::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

async fn rebuild_tenant(
    remote: &RemoteStorage,
    tenant: TenantId,
    staging: &Path,
    tenants_dir: &Path,
    durability: Durability,
) -> Result<bool, RemoteError> {
    let log_key = remote.branch_log_key(tenant);
    let Some(log) = remote.get_bytes(&log_key).await? else {
        tracing::warn!(%tenant, "remote tenant has no branches.log; not rebuilt");
        return Ok(false);
    };
    let (entries, valid_len) = branch_log_prefix(&log).map_err(corrupt(&log_key))?;
    let stage = staging.join(tenant.to_string());
    let timelines_dir = stage.join(TIMELINES_DIR);
    {
        let (stage, timelines_dir) = (stage.clone(), timelines_dir.clone());
        blocking(move || {
            remove_dir_if_exists(&stage)?;
            Ok(storage::fsio::create_dir_durable(&timelines_dir, durability)?)
        })
        .await?;
    }
    let live = live_timelines(&entries);
    for &timeline in &live {
        let dir = timelines_dir.join(timeline.to_string());
        download_timeline(remote, tenant, timeline, dir, durability).await?;
    }
    let target = tenants_dir.join(tenant.to_string());
    blocking(move || {
        storage::fsio::write_atomic(&stage.join(BRANCH_LOG_FILE), &log[..valid_len], durability)?;
        storage::fsio::sync_dir(&stage, durability)?;
        Ok(storage::fsio::rename_durable(&stage, &target, durability)?)
    })
    .await?;
    tracing::info!(%tenant, timelines = live.len(), "rebuilt tenant from remote storage");
    Ok(true)
}

/// Downloads one timeline's files into `dir`: layers and timestamps first, the metadata that names them
/// last. A timeline with no remote metadata never flushed before the upload: it starts empty.
async fn download_timeline(
    remote: &RemoteStorage,
    tenant: TenantId,
    timeline: TimelineId,
    dir: PathBuf,
    durability: Durability,
) -> Result<(), RemoteError> {
    let meta_key = remote.timeline_key(tenant, timeline, METADATA_FILE);
    let Some(meta_bytes) = remote.get_bytes(&meta_key).await? else {
        return Ok(());
    };
    let meta = decode_metadata(&meta_bytes)
        .and_then(|meta| check_metadata(&meta, timeline).map(|()| meta))
        .map_err(corrupt(&meta_key))?;
    {
        let dir = dir.clone();
        blocking(move || Ok(storage::fsio::create_dir_durable(&dir, durability)?)).await?;
    }
    let concurrency = remote.config().requests_in_flight_max.max(1);
    futures::stream::iter(meta.layers.iter().cloned())
        .map(|desc| download_layer(remote, tenant, timeline, &dir, desc, durability))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let timestamps = if meta.timestamp_count > 0 {
        let key = remote.timeline_key(tenant, timeline, TIMESTAMPS_FILE);
        let count = meta.timestamp_count;
        let bytes = remote.get_bytes(&key).await?.ok_or_else(|| RemoteError::Corrupt {
            what: key.to_string(),
            reason: format!("missing; the metadata names {count} entries"),
        })?;
        check_timestamps(&bytes, count).map_err(corrupt(&key))?;
        Some(bytes.slice(..(count * TIMESTAMP_ENTRY_BYTES) as usize))
    } else {
        None
    };
    blocking(move || {
        if let Some(timestamps) = timestamps {
            storage::fsio::write_atomic(&dir.join(TIMESTAMPS_FILE), &timestamps, durability)?;
        }
        Ok(storage::fsio::write_atomic(
            &dir.join(METADATA_FILE),
            &meta_bytes,
            durability,
        )?)
    })
    .await?;
    tracing::info!(%tenant, %timeline, layers = meta.layers.len(), disk_consistent_lsn = %meta.disk_consistent_lsn, "downloaded timeline");
    Ok(())
}

/// Downloads one layer and verifies every checksum of it before anything names it locally.
async fn download_layer(
    remote: &RemoteStorage,
    tenant: TenantId,
    timeline: TimelineId,
    dir: &Path,
    desc: LayerDesc,
    durability: Durability,
) -> Result<(), RemoteError> {
    let name = desc.file_name();
    let key = remote.timeline_key(tenant, timeline, &name);
    let path = dir.join(&name);
    remote.get_to_file(&key, &path, desc.size_bytes, durability).await?;
    blocking(move || Ok(LayerFile::open_for_verify(path, desc).verify()?)).await
}
