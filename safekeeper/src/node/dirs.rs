//! The data directory's moves on disk: tombstones (a directory renamed for removal), staging directories of
//! replicas and their installation by rename, and the listing of tenant and timeline directories. The
//! crash arguments are in the [module above](super) (Deletion, Replicas).

use std::fs;
use std::io::{self};
use std::path::{Path, PathBuf};

use cambium_types::fsio;
use cambium_types::{Lsn, TenantId, TimelineId};

use crate::filestore::{self, FileControl, FileStoreConfig};
use cambium_types::id::parse_lower_hex as parse_lower_hex_id;
use cambium_types::TimelineKey;
use safekeeper_core::acceptor::Acceptor;
use safekeeper_core::protocol::{AcceptorError, AcceptorState, ControlStore};

use super::{io_error, FileAcceptor, NodeError, STAGING_SUFFIX};

/// The suffix of a tombstone: a tenant or timeline directory renamed for removal (`<id>.deleted`).
pub const TOMBSTONE_SUFFIX: &str = ".deleted";

/// The tombstone name of the directory `dir`.
pub(super) fn tombstone_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(TOMBSTONE_SUFFIX);
    dir.with_file_name(name)
}

/// Whether `name` is a tombstone's: an id followed by [`TOMBSTONE_SUFFIX`].
pub(super) fn is_tombstone_name(name: &str) -> bool {
    name.strip_suffix(TOMBSTONE_SUFFIX)
        .and_then(parse_lower_hex_id)
        .is_some()
}

/// Removes the tree at `path` if there is one.
pub(super) fn remove_tree_if_exists(path: &Path) -> Result<(), NodeError> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io_error(path)(error)),
    }
}

/// Removes the directory `dir` so that a crash leaves it whole or a tombstone, never part of it under its own
/// name: rename to the tombstone, fsync the parent, remove the tree. Returns whether `dir` was there. Once the
/// rename is durable the deletion is done: a tree that cannot be removed is logged and left to the next open.
pub(super) fn remove_dir_durable(dir: &Path, durability: fsio::Durability) -> Result<bool, NodeError> {
    let tombstone = tombstone_path(dir);
    // A tombstone of an earlier attempt (a rename cannot replace a non-empty directory).
    remove_tree_if_exists(&tombstone)?;
    match fs::rename(dir, &tombstone) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(io_error(dir)(error)),
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    fsio::sync_dir(parent, durability).map_err(|e| NodeError::Io {
        path: parent.to_path_buf(),
        source: io::Error::other(e.to_string()),
    })?;
    if let Err(error) = remove_tree_if_exists(&tombstone) {
        tracing::warn!(path = %tombstone.display(), %error, "could not remove a tombstone; the next open will");
    }
    Ok(true)
}

/// Removes the tombstone `path` found at open (logged; a failure is logged and left for the next open).
pub(super) fn remove_leftover_tombstone(path: &Path) {
    match remove_tree_if_exists(path) {
        Ok(()) => tracing::info!(path = %path.display(), "removed the tombstone of a deletion cut short"),
        Err(error) => tracing::warn!(path = %path.display(), %error, "could not remove a tombstone"),
    }
}

/// The timeline directories under `data_dir`: `<tenant_id>/<timeline_id>`, both 32 lowercase hex digits.
/// Tombstones (`<id>.deleted`) left by deletions cut short are removed on the way.
pub(super) fn list_timeline_dirs(data_dir: &Path) -> Result<Vec<(TimelineKey, PathBuf)>, NodeError> {
    let mut found = Vec::new();
    for (tenant_name, tenant_dir) in subdirectories(data_dir)? {
        if is_tombstone_name(&tenant_name) {
            remove_leftover_tombstone(&tenant_dir);
            continue;
        }
        let Some(tenant_id) = parse_lower_hex_id(&tenant_name) else {
            tracing::warn!(path = %tenant_dir.display(), "ignoring a directory that is not a tenant id");
            continue;
        };
        let mut timeline_dirs = subdirectories(&tenant_dir)?;
        // Staging directories first: one may be renamed into place and must then be listed as a timeline.
        timeline_dirs.sort_by_key(|(name, _)| !name.ends_with(STAGING_SUFFIX));
        let mut promoted = Vec::new();
        for (timeline_name, timeline_dir) in timeline_dirs {
            if let Some(id) = timeline_name.strip_suffix(STAGING_SUFFIX) {
                if parse_lower_hex_id(id).is_some() {
                    if let Some(target) = settle_staging(&timeline_dir, &tenant_dir.join(id))? {
                        promoted.push((id.to_string(), target));
                    }
                    continue;
                }
            }
            if is_tombstone_name(&timeline_name) {
                remove_leftover_tombstone(&timeline_dir);
                continue;
            }
            let Some(timeline_id) = parse_lower_hex_id(&timeline_name) else {
                tracing::warn!(path = %timeline_dir.display(), "ignoring a directory that is not a timeline id");
                continue;
            };
            found.push(((TenantId(tenant_id), TimelineId(timeline_id)), timeline_dir));
        }
        for (id, dir) in promoted {
            let timeline_id = parse_lower_hex_id(&id).expect("checked above");
            found.push(((TenantId(tenant_id), TimelineId(timeline_id)), dir));
        }
    }
    found.sort_unstable_by_key(|(key, _)| *key);
    Ok(found)
}

/// Settles a replica's staging directory found at open (see the module doc): renamed to `target` (and
/// returned) if it is complete and `target` is absent; removed otherwise.
pub(super) fn settle_staging(staging: &Path, target: &Path) -> Result<Option<PathBuf>, NodeError> {
    let complete = matches!(FileControl::load(staging), Ok(Some(_)));
    if complete && !target.exists() {
        fs::rename(staging, target).map_err(io_error(staging))?;
        let parent = target.parent().unwrap_or(Path::new("."));
        sync_dir_node(parent, fsio::Durability::Fsync)?;
        tracing::info!(path = %target.display(), "installed a replica whose install was cut short");
        return Ok(Some(target.to_path_buf()));
    }
    tracing::info!(
        path = %staging.display(),
        complete,
        "removing a replica's staging directory left by a pull cut short"
    );
    remove_tree_if_exists(staging)?;
    Ok(None)
}

/// fsync of a directory, as a node error.
pub(super) fn sync_dir_node(dir: &Path, durability: fsio::Durability) -> Result<(), NodeError> {
    fsio::sync_dir(dir, durability).map_err(|e| NodeError::Io {
        path: dir.to_path_buf(),
        source: io::Error::other(e.to_string()),
    })
}

/// Replaces the timeline directory `dir` by the complete replica in `staging`: `dir` to its tombstone, `staging`
/// to `dir`, fsync of `parent`, removal of the tombstone. A crash between the renames leaves the complete
/// staging directory and no `dir`, which the next open installs.
pub(super) fn swap_dirs(
    dir: &Path,
    staging: &Path,
    parent: &Path,
    durability: fsio::Durability,
) -> Result<(), NodeError> {
    let tombstone = tombstone_path(dir);
    remove_tree_if_exists(&tombstone)?;
    fs::rename(dir, &tombstone).map_err(io_error(dir))?;
    if let Err(error) = fs::rename(staging, dir) {
        // Put the old one back so the node serves it after a restart; the caller reports the failure.
        if let Err(back) = fs::rename(&tombstone, dir) {
            tracing::error!(path = %dir.display(), %back, "could not put a timeline back after a failed replica install");
        }
        return Err(io_error(staging)(error));
    }
    sync_dir_node(parent, durability)?;
    if let Err(error) = remove_tree_if_exists(&tombstone) {
        tracing::warn!(path = %tombstone.display(), %error, "could not remove a tombstone; the next open will");
    }
    Ok(())
}

/// Raises the staged replica's control file to what the timeline here already promised or knows committed:
/// the higher term, the higher commit LSN (within the replica's WAL, which holds every committed record).
pub(super) fn raise_staged_control(
    staging: &Path,
    current: &AcceptorState,
    replica_flush_lsn: Lsn,
    durability: fsio::Durability,
) -> Result<(), NodeError> {
    if current.commit_lsn > replica_flush_lsn {
        // A record committed here is on every copy at least as far as this one; a replica without it would
        // contradict that. Never install it.
        return Err(NodeError::Acceptor(AcceptorError::Invalid(format!(
            "the replica ends at {replica_flush_lsn}, before the commit LSN {} known here",
            current.commit_lsn
        ))));
    }
    let mut control = FileControl::load(staging)
        .map_err(AcceptorError::from)?
        .ok_or_else(|| NodeError::Io {
            path: staging.to_path_buf(),
            source: io::Error::other("a staged replica without its control file"),
        })?;
    let term = control.term.max(current.term);
    let commit_lsn = control.commit_lsn.max(current.commit_lsn);
    if (term, commit_lsn) == (control.term, control.commit_lsn) {
        return Ok(());
    }
    control.term = term;
    control.commit_lsn = commit_lsn;
    FileControl::new(staging, durability)
        .persist(&control)
        .map_err(AcceptorError::from)?;
    Ok(())
}

/// The subdirectories of `dir` with UTF-8 names (others are logged and skipped; files are skipped).
pub(super) fn subdirectories(dir: &Path) -> Result<Vec<(String, PathBuf)>, NodeError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        if !entry.file_type().map_err(io_error(&path))?.is_dir() {
            continue;
        }
        match entry.file_name().into_string() {
            Ok(name) => out.push((name, path)),
            Err(_) => tracing::warn!(path = %path.display(), "ignoring a directory with a non-UTF-8 name"),
        }
    }
    Ok(out)
}

pub(super) fn open_timeline_dir(dir: &Path, config: &FileStoreConfig) -> Result<Option<FileAcceptor>, AcceptorError> {
    let Some((control, wal, store)) = filestore::open_timeline(dir, config)? else {
        return Ok(None);
    };
    Acceptor::new(control, wal, store).map(Some)
}
