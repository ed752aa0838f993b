//! Rebuilding tenants from remote storage at startup, before the tenants are opened.
//!
//! Every tenant the remote holds and the local disk does not is rebuilt in a staging directory
//! (`<data_dir>/remote_download/<tenant>/`) from its small files only: per live timeline of its
//! `branches.log`, the metadata (checked) and the timestamps it counts; then the branch log. No layer is
//! downloaded: the tenant opens with a fetcher ([`super::fetch`]) and each layer comes down the first time a
//! read needs it. The remote listing of each timeline is checked to hold every layer the metadata names, with
//! its size, so a damaged remote copy fails the start rather than a read later. Each file is written to a
//! temp name, fsynced and renamed; the finished tenant directory is then renamed into `<data_dir>/tenants/`,
//! so a crash mid-rebuild leaves no half tenant behind (the staging directory is cleared at the next start,
//! which downloads again). The tenant then opens like any other at the metadata's `disk_consistent_lsn`, and
//! the WAL receiver resumes from there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use storage::metadata::TimelineMetadata;
use storage::{Durability, TenantId, TimelineId};

use super::files::{
    branch_log_prefix, check_metadata, check_timestamps, decode_metadata, is_layer_file_name, live_timelines,
    BRANCH_LOG_FILE, METADATA_FILE, TIMELINES_DIR, TIMESTAMPS_FILE, TIMESTAMP_ENTRY_BYTES,
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

/// Rebuilds every remote tenant missing from `<data_dir>/tenants/` from its small files (see the module doc);
/// returns the tenants rebuilt. Their layers are left to be fetched on demand. A tenant whose remote
/// `branches.log` is missing (never fully uploaded, or being deleted) is skipped. Any other failure fails the
/// rebuild: serving without a tenant the remote holds would let a new one of the same id overwrite it.
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
        let marker = remote.get_bytes(&remote.owner_key(tenant)).await?;
        let marker = marker.as_ref().map(|bytes| String::from_utf8_lossy(bytes).into_owned());
        if !rebuilds(remote.owner(), marker.as_deref()) {
            tracing::info!(%tenant, owner = ?marker, "a remote tenant of another pageserver; not rebuilt");
            continue;
        }
        if rebuild_tenant(remote, tenant, &staging, &tenants_dir, durability).await? {
            rebuilt.push(tenant);
        }
    }
    blocking(move || remove_dir_if_exists(&staging)).await?;
    Ok(rebuilt)
}

/// Whether a pageserver with id `own` rebuilds a remote tenant whose `owner` object says `marker`: its own
/// (`own` equals `marker`), or, for a pageserver without an id (one alone on its remote), one nobody marked
/// (uploaded before owners were written). So of several pageservers sharing a remote, none takes another's
/// tenants at start: a tenant moves only when the control plane moves it.
pub(crate) fn rebuilds(own: Option<&str>, marker: Option<&str>) -> bool {
    match (own, marker) {
        (Some(own), Some(marker)) => own == marker,
        (None, None) => true,
        (Some(_), None) | (None, Some(_)) => false,
    }
}

/// Rebuilds remote tenant `tenant` in `<data_dir>/tenants/` from its small files, as [`rebuild`] does at start,
/// whoever its owner (the control plane asks: a tenant moving here); `Ok(false)` if the remote has no
/// `branches.log` for it. A tenant already on the local disk is left as it is (`Ok(true)`).
pub async fn attach(
    data_dir: &Path,
    remote: &RemoteStorage,
    tenant: TenantId,
    durability: Durability,
) -> Result<bool, RemoteError> {
    let tenants_dir = data_dir.join(TENANTS_DIR);
    if tenants_dir.join(tenant.to_string()).exists() {
        return Ok(true);
    }
    let staging = data_dir.join(STAGING_DIR);
    {
        let staging = staging.clone();
        blocking(move || Ok(storage::fsio::create_dir_durable(&staging, durability)?)).await?;
    }
    rebuild_tenant(remote, tenant, &staging, &tenants_dir, durability).await
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

/// Downloads one timeline's small files into `dir`, after checking the remote holds every layer its metadata
/// names: timestamps first, the metadata that counts them last. A timeline with no remote metadata never
/// flushed before the upload: it starts empty.
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
    check_remote_layers(remote, tenant, timeline, &meta).await?;
    {
        let dir = dir.clone();
        blocking(move || Ok(storage::fsio::create_dir_durable(&dir, durability)?)).await?;
    }
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
    tracing::info!(
        %tenant,
        %timeline,
        layers = meta.layers.len(),
        disk_consistent_lsn = %meta.disk_consistent_lsn,
        "downloaded timeline metadata; layers come on demand"
    );
    Ok(())
}

/// Checks, with one listing, that the remote holds every layer `meta` names, with its size.
async fn check_remote_layers(
    remote: &RemoteStorage,
    tenant: TenantId,
    timeline: TimelineId,
    meta: &TimelineMetadata,
) -> Result<(), RemoteError> {
    let listed: HashMap<String, u64> = remote
        .list_objects(&remote.timeline_prefix(tenant, timeline))
        .await?
        .into_iter()
        .filter_map(|(path, size)| {
            let name = path.filename()?;
            is_layer_file_name(name).then(|| (name.to_string(), size))
        })
        .collect();
    for desc in &meta.layers {
        let name = desc.file_name();
        let reason = match listed.get(&name) {
            Some(&size) if size == desc.size_bytes => continue,
            Some(&size) => format!(
                "names layer {name} of {} bytes; the remote one holds {size}",
                desc.size_bytes
            ),
            None => format!("names layer {name}, which the remote lacks"),
        };
        return Err(RemoteError::Corrupt {
            what: remote.timeline_key(tenant, timeline, METADATA_FILE).to_string(),
            reason,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rebuilds;

    #[test]
    fn a_pageserver_rebuilds_only_its_own_tenants() {
        assert!(rebuilds(Some("ps1"), Some("ps1")));
        assert!(!rebuilds(Some("ps1"), Some("ps2")));
        // Unmarked tenants are a lone pageserver's (uploaded before owners): one with an id leaves them.
        assert!(!rebuilds(Some("ps1"), None));
        assert!(rebuilds(None, None));
        assert!(!rebuilds(None, Some("ps2")));
    }
}
