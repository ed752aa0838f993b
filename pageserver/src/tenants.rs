//! The pageserver's tenants: one [`storage::Tenant`] per directory under `<data_dir>/tenants/`, a shared
//! page cache, and a watch of every timeline's `last_record_lsn` so reads can wait (bounded) for ingest.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use storage::{
    BranchPoint, LayerFetcher, Lsn, PageCache, StorageError, Tenant, TenantId, Timeline, TimelineConfig, TimelineId,
};
use tokio::sync::watch;

/// Why a tenant operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageserverError {
    /// No such tenant.
    #[error("tenant {0} not found")]
    TenantNotFound(TenantId),
    /// The tenant exists already.
    #[error("tenant {0} already exists")]
    TenantExists(TenantId),
    /// The engine refused or failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// `read_lsn` was not ingested before the deadline.
    #[error("timed out waiting for LSN {lsn}; ingested up to {last_record_lsn}")]
    WaitLsnTimeout {
        /// The LSN waited for.
        lsn: Lsn,
        /// How far ingest got.
        last_record_lsn: Lsn,
    },
    /// Attaching needs remote storage, and this pageserver has none.
    #[error("this pageserver has no remote storage to attach tenants from")]
    NoRemote,
    /// A file system error outside the engine.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// The shared durable-file helpers fail as the engine does (`StorageError::Io`), so callers see one error shape.
impl From<storage::fsio::IoError> for PageserverError {
    fn from(error: storage::fsio::IoError) -> PageserverError {
        PageserverError::Storage(StorageError::from(error))
    }
}

/// Where a new timeline starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewTimeline {
    /// A root timeline whose WAL starts at this LSN.
    Root {
        /// Its first LSN.
        start_lsn: Lsn,
    },
    /// A branch of `ancestor` at `point`.
    Branch {
        /// The ancestor timeline.
        ancestor: TimelineId,
        /// Where on the ancestor.
        point: BranchPoint,
    },
}

use storage::TimelineKey;

/// Makes a tenant's layer fetcher (with remote storage: downloads the layers the tenant's disk lacks).
pub type LayerFetchers = Arc<dyn Fn(TenantId) -> Arc<dyn LayerFetcher> + Send + Sync>;

/// Every tenant of this pageserver.
pub struct TenantManager {
    tenants_dir: PathBuf,
    conf: TimelineConfig,
    cache: Arc<PageCache>,
    /// `None`: the local disk is the only copy, and a missing layer is corruption.
    fetchers: Option<LayerFetchers>,
    tenants: RwLock<HashMap<TenantId, Arc<Tenant>>>,
    /// Creations and deletions of tenants, one at a time.
    lifecycle: Mutex<()>,
    /// Tenants attached as secondaries: served and ingesting, never uploaded (another pageserver still owns their
    /// remote copy). Kept as empty files `<data_dir>/secondary/<tenant>`, so a restart keeps them secondary.
    secondary: Mutex<std::collections::HashSet<TenantId>>,
    secondary_dir: PathBuf,
    /// Where attached tenants come from (`None` without remote storage).
    remote: std::sync::OnceLock<Arc<crate::remote::RemoteStorage>>,
    /// Tenants detached (their local files removed, their remote copy left alone) since this process started
    /// and not created again: the uploader forgets them instead of deleting their remote copy.
    detached: Mutex<std::collections::HashSet<TenantId>>,
    /// Upload jobs running per tenant ([`TenantManager::begin_upload`]); a detach waits for them to end.
    uploading: Mutex<HashMap<TenantId, usize>>,
    /// Tenants whose remote layer deletions are held (a move in progress: another pageserver may read the
    /// layers an older index names). Kept as empty files `<data_dir>/hold_deletions/<tenant>`, so a restart keeps
    /// holding; cleared by [`TenantManager::hold_remote_deletions`] or a detach.
    held: Mutex<std::collections::HashSet<TenantId>>,
    held_dir: PathBuf,
    last_record_lsns: Mutex<HashMap<TimelineKey, watch::Sender<Lsn>>>,
}

impl TenantManager {
    /// Opens (creating if needed) `<data_dir>/tenants` and loads every tenant in it.
    pub fn open(
        data_dir: &Path,
        conf: TimelineConfig,
        cache: Arc<PageCache>,
    ) -> Result<TenantManager, PageserverError> {
        TenantManager::open_inner(data_dir, conf, cache, None)
    }

    /// As [`TenantManager::open`], with every tenant (those loaded and those created later) given its fetcher
    /// from `fetchers`: a layer its metadata names and its disk lacks is fetched on first use.
    pub fn open_with_fetchers(
        data_dir: &Path,
        conf: TimelineConfig,
        cache: Arc<PageCache>,
        fetchers: LayerFetchers,
    ) -> Result<TenantManager, PageserverError> {
        TenantManager::open_inner(data_dir, conf, cache, Some(fetchers))
    }

    fn open_inner(
        data_dir: &Path,
        conf: TimelineConfig,
        cache: Arc<PageCache>,
        fetchers: Option<LayerFetchers>,
    ) -> Result<TenantManager, PageserverError> {
        let tenants_dir = data_dir.join("tenants");
        storage::fsio::create_dir_durable(&tenants_dir, conf.durability)?;
        let secondary_dir = data_dir.join("secondary");
        let secondary = read_marks(&secondary_dir);
        let held_dir = data_dir.join("hold_deletions");
        let held = read_marks(&held_dir);
        let mut tenants = HashMap::new();
        let entries = std::fs::read_dir(&tenants_dir).map_err(|source| PageserverError::Io {
            path: tenants_dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| PageserverError::Io {
                path: tenants_dir.clone(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(id) = name.parse::<TenantId>() else {
                tracing::warn!(path = %entry.path().display(), "ignoring a file that is not a tenant");
                continue;
            };
            let tenant = open_tenant(&entry.path(), id, &conf, &cache, fetchers.as_ref())?;
            tracing::info!(tenant = %id, timelines = tenant.timelines().len(), "loaded tenant");
            tenants.insert(id, Arc::new(tenant));
        }
        Ok(TenantManager {
            tenants_dir,
            conf,
            cache,
            fetchers,
            tenants: RwLock::new(tenants),
            lifecycle: Mutex::new(()),
            secondary: Mutex::new(secondary),
            secondary_dir,
            remote: std::sync::OnceLock::new(),
            detached: Mutex::new(std::collections::HashSet::new()),
            uploading: Mutex::new(HashMap::new()),
            held: Mutex::new(held),
            held_dir,
            last_record_lsns: Mutex::new(HashMap::new()),
        })
    }

    /// The page cache shared by every timeline.
    pub fn cache(&self) -> &Arc<PageCache> {
        &self.cache
    }

    /// Every tenant id.
    pub fn tenant_ids(&self) -> Vec<TenantId> {
        self.tenants.read().keys().copied().collect()
    }

    /// The tenant `id`.
    pub fn tenant(&self, id: TenantId) -> Result<Arc<Tenant>, PageserverError> {
        self.tenants
            .read()
            .get(&id)
            .cloned()
            .ok_or(PageserverError::TenantNotFound(id))
    }

    /// The timeline `timeline` of tenant `tenant`.
    pub fn timeline(&self, tenant: TenantId, timeline: TimelineId) -> Result<Arc<Timeline>, PageserverError> {
        Ok(self.tenant(tenant)?.timeline(timeline)?)
    }

    /// Creates an empty tenant.
    pub fn create_tenant(&self, id: TenantId) -> Result<Arc<Tenant>, PageserverError> {
        let _lifecycle = self.lifecycle.lock();
        if self.tenants.read().contains_key(&id) {
            return Err(PageserverError::TenantExists(id));
        }
        self.detached.lock().remove(&id);
        let tenant = Arc::new(open_tenant(
            &self.tenants_dir.join(id.to_string()),
            id,
            &self.conf,
            &self.cache,
            self.fetchers.as_ref(),
        )?);
        self.tenants.write().insert(id, Arc::clone(&tenant));
        Ok(tenant)
    }

    /// Deletes a tenant and all its data. Running background work on it is waited out first; if removing the
    /// files fails, the tenant stays listed (and closed), so a restart does not bring back a half-deleted one.
    pub fn delete_tenant(&self, id: TenantId) -> Result<(), PageserverError> {
        let _lifecycle = self.lifecycle.lock();
        self.remove_tenant(id)
    }

    /// Stops serving a tenant and removes its local files, as [`TenantManager::delete_tenant`] does, but marks it
    /// detached: the uploader forgets it and leaves its remote copy alone (another pageserver owns it now). A
    /// restart finds no local files and nothing to upload, so the mark needs no file.
    pub fn detach_tenant(&self, id: TenantId) -> Result<(), PageserverError> {
        let _lifecycle = self.lifecycle.lock();
        self.tenant(id)?;
        // Marked first: the uploader never sees the tenant gone without the mark, and starts no job after it.
        self.detached.lock().insert(id);
        // A job that started before the mark may still write the remote copy: it ends before the detach does,
        // so the pageserver the tenant moves to never uploads at the same time.
        let deadline = std::time::Instant::now() + UPLOAD_DRAIN_TIMEOUT;
        while self.uploading.lock().get(&id).copied().unwrap_or(0) > 0 {
            if std::time::Instant::now() >= deadline {
                self.detached.lock().remove(&id);
                return Err(PageserverError::Io {
                    path: self.tenants_dir.join(id.to_string()),
                    source: std::io::Error::other(format!(
                        "an upload of the tenant still runs after {} s; not detached",
                        UPLOAD_DRAIN_TIMEOUT.as_secs()
                    )),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.remove_tenant(id)?;
        self.hold_remote_deletions(id, false)
    }

    /// Starts an upload job of `id`'s remote copy, or `None` if this pageserver must not write it (detached, or a
    /// secondary). The job holds the returned guard while it runs; [`TenantManager::detach_tenant`] waits for it.
    pub fn begin_upload(self: &Arc<Self>, id: TenantId) -> Option<UploadGuard> {
        // Under the detached set's lock: a detach marks the tenant before it counts the jobs, so a job either
        // sees the mark or is counted.
        let detached = self.detached.lock();
        if detached.contains(&id) || self.is_secondary(id) {
            return None;
        }
        *self.uploading.lock().entry(id).or_insert(0) += 1;
        drop(detached);
        Some(UploadGuard {
            manager: Arc::clone(self),
            tenant: id,
        })
    }

    /// Holds (`hold`) or releases the deletion of `id`'s remote layers, durably: while held, the uploader uploads
    /// as usual but deletes no remote layer (it does once released). A move sets it on the source before the
    /// target reads the remote index, so every layer that index names stays until the source is detached.
    pub fn hold_remote_deletions(&self, id: TenantId, hold: bool) -> Result<(), PageserverError> {
        set_mark(&self.held_dir, &self.held, id, hold, self.conf.durability)
    }

    /// Whether `id`'s remote layer deletions are held ([`TenantManager::hold_remote_deletions`]).
    pub fn remote_deletions_held(&self, id: TenantId) -> bool {
        self.held.lock().contains(&id)
    }

    /// Gives the manager the remote storage tenants are attached from ([`TenantManager::attach_tenant`]).
    pub fn set_remote(&self, remote: Arc<crate::remote::RemoteStorage>) {
        let _ = self.remote.set(remote);
    }

    /// Attaches tenant `id` from the remote storage (its small files; layers on first use) and serves it; as a
    /// *secondary* (`secondary`: ingesting and serving reads, uploading nothing, since another pageserver still
    /// owns the remote copy) or as the owner (uploads start, the first marking it with this pageserver's id).
    /// Attaching a tenant already here only sets that mode: the way a secondary becomes the owner.
    pub async fn attach_tenant(&self, id: TenantId, secondary: bool) -> Result<(), PageserverError> {
        let Some(remote) = self.remote.get().cloned() else {
            return Err(PageserverError::NoRemote);
        };
        // The mark first: a secondary never uploads, not even between its files and its mark.
        self.set_secondary(id, secondary)?;
        if !secondary {
            // The owner mark next, before anything is uploaded: a pageserver that owned the tenant before (lost,
            // then back) reads it before each upload and stops uploading the tenant (`remote::upload`).
            crate::remote::claim(&remote, id)
                .await
                .map_err(|e| PageserverError::Io {
                    path: self.tenants_dir.join(id.to_string()),
                    source: std::io::Error::other(e),
                })?;
        }
        let data_dir = self.tenants_dir.parent().unwrap_or(&self.tenants_dir).to_path_buf();
        let found = crate::remote::attach(&data_dir, &remote, id, self.conf.durability)
            .await
            .map_err(|e| PageserverError::Io {
                path: self.tenants_dir.join(id.to_string()),
                source: std::io::Error::other(e),
            })?;
        if !found {
            if !self.tenants.read().contains_key(&id) {
                self.set_secondary(id, false)?;
            }
            return Err(PageserverError::TenantNotFound(id));
        }
        let existing = self.tenants.read().get(&id).cloned();
        if let Some(tenant) = existing {
            if !secondary {
                // A secondary made the owner: what it ingested goes to its disk now, so its first upload is an
                // index at or past the one the old owner left (the uploader refuses to put an older one).
                tokio::task::spawn_blocking(move || tenant.timelines().iter().try_for_each(|t| t.checkpoint()))
                    .await
                    .map_err(|e| PageserverError::Io {
                        path: self.tenants_dir.join(id.to_string()),
                        source: std::io::Error::other(e.to_string()),
                    })??;
            }
            return Ok(());
        }
        let _lifecycle = self.lifecycle.lock();
        if self.tenants.read().contains_key(&id) {
            return Ok(());
        }
        let tenant = open_tenant(
            &self.tenants_dir.join(id.to_string()),
            id,
            &self.conf,
            &self.cache,
            self.fetchers.as_ref(),
        )?;
        self.detached.lock().remove(&id);
        self.tenants.write().insert(id, Arc::new(tenant));
        Ok(())
    }

    /// Marks `id` secondary (never uploaded) or not, durably.
    pub fn set_secondary(&self, id: TenantId, secondary: bool) -> Result<(), PageserverError> {
        set_mark(
            &self.secondary_dir,
            &self.secondary,
            id,
            secondary,
            self.conf.durability,
        )
    }

    /// Whether `id` is a secondary: served, never uploaded ([`TenantManager::attach_tenant`]).
    pub fn is_secondary(&self, id: TenantId) -> bool {
        self.secondary.lock().contains(&id)
    }

    /// Whether `id` was detached ([`TenantManager::detach_tenant`]) and not created again since.
    pub fn is_detached(&self, id: TenantId) -> bool {
        self.detached.lock().contains(&id)
    }

    fn remove_tenant(&self, id: TenantId) -> Result<(), PageserverError> {
        let tenant = self.tenant(id)?;
        tenant.close();
        let dir = tenant.dir().to_path_buf();
        std::fs::remove_dir_all(&dir).map_err(|source| PageserverError::Io {
            path: dir.clone(),
            source,
        })?;
        storage::fsio::sync_dir(&self.tenants_dir, self.conf.durability)?;
        self.tenants.write().remove(&id);
        self.set_secondary(id, false)?;
        for timeline in tenant.timelines() {
            self.cache.forget_timeline(timeline.id());
            self.last_record_lsns.lock().remove(&(id, timeline.id()));
        }
        Ok(())
    }

    /// Creates a timeline (a root, or a branch that writes metadata only).
    pub fn create_timeline(
        &self,
        tenant: TenantId,
        id: TimelineId,
        new: NewTimeline,
    ) -> Result<Arc<Timeline>, PageserverError> {
        // Not while the tenant is being deleted.
        let _lifecycle = self.lifecycle.lock();
        let tenant = self.tenant(tenant)?;
        let timeline = match new {
            NewTimeline::Root { start_lsn } => tenant.create_timeline(id, start_lsn)?,
            NewTimeline::Branch { ancestor, point } => tenant.branch(id, ancestor, point)?,
        };
        Ok(timeline)
    }

    /// Seals a timeline (see [`storage::Tenant::seal_timeline`]); returns its end.
    pub fn seal_timeline(&self, tenant: TenantId, id: TimelineId) -> Result<Lsn, PageserverError> {
        Ok(self.tenant(tenant)?.seal_timeline(id)?)
    }

    /// Deletes a timeline that has no children.
    pub fn delete_timeline(&self, tenant: TenantId, id: TimelineId) -> Result<(), PageserverError> {
        self.tenant(tenant)?.delete_timeline(id)?;
        self.last_record_lsns.lock().remove(&(tenant, id));
        Ok(())
    }

    fn last_record_lsn_sender(&self, key: TimelineKey, timeline: &Timeline) -> watch::Sender<Lsn> {
        self.last_record_lsns
            .lock()
            .entry(key)
            .or_insert_with(|| watch::channel(timeline.last_record_lsn()).0)
            .clone()
    }

    /// Tells waiting readers that `timeline` has ingested up to its current `last_record_lsn`.
    pub fn notify_ingested(&self, tenant: TenantId, timeline: &Timeline) {
        let sender = self.last_record_lsn_sender((tenant, timeline.id()), timeline);
        sender.send_replace(timeline.last_record_lsn());
    }

    /// Reads waiting for ingest right now, over every timeline (each holds one subscription while it waits).
    pub fn waiting_reads(&self) -> usize {
        self.last_record_lsns
            .lock()
            .values()
            .map(watch::Sender::receiver_count)
            .sum()
    }

    /// Waits until `timeline` has ingested up to `lsn`, or `timeout` passes.
    pub async fn wait_for_lsn(
        &self,
        tenant: TenantId,
        timeline: &Timeline,
        lsn: Lsn,
        timeout: Duration,
    ) -> Result<(), PageserverError> {
        if timeline.wal_end_lsn() >= lsn {
            return Ok(());
        }
        let mut receiver = self
            .last_record_lsn_sender((tenant, timeline.id()), timeline)
            .subscribe();
        let waited = tokio::time::timeout(timeout, receiver.wait_for(|_| timeline.wal_end_lsn() >= lsn)).await;
        match waited {
            Ok(Ok(_)) => Ok(()),
            _ => Err(PageserverError::WaitLsnTimeout {
                lsn,
                last_record_lsn: timeline.last_record_lsn(),
            }),
        }
    }
}

/// How long a detach waits for the tenant's running upload jobs to end.
const UPLOAD_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// An upload job of one tenant in progress ([`TenantManager::begin_upload`]); dropped when the job ends.
pub struct UploadGuard {
    manager: Arc<TenantManager>,
    tenant: TenantId,
}

impl Drop for UploadGuard {
    fn drop(&mut self) {
        let mut uploading = self.manager.uploading.lock();
        if let Some(count) = uploading.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                uploading.remove(&self.tenant);
            }
        }
    }
}

/// The tenants marked by an empty file named after them in `dir` (none if it does not exist).
fn read_marks(dir: &Path) -> std::collections::HashSet<TenantId> {
    let mut marked = std::collections::HashSet::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if let Ok(id) = entry.file_name().to_string_lossy().parse::<TenantId>() {
                marked.insert(id);
            }
        }
    }
    marked
}

/// Sets or clears `id`'s mark: the empty file `dir/<id>` (durably) and its entry in `marks`.
fn set_mark(
    dir: &Path,
    marks: &Mutex<std::collections::HashSet<TenantId>>,
    id: TenantId,
    on: bool,
    durability: storage::Durability,
) -> Result<(), PageserverError> {
    let path = dir.join(id.to_string());
    if on {
        storage::fsio::create_dir_durable(dir, durability)?;
        storage::fsio::write_atomic(&path, b"", durability)?;
        marks.lock().insert(id);
    } else {
        marks.lock().remove(&id);
        match std::fs::remove_file(&path) {
            Ok(()) => storage::fsio::sync_dir(dir, durability)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(PageserverError::Io { path, source }),
        }
    }
    Ok(())
}

/// Opens the tenant in `dir`, with its fetcher if there are fetchers.
fn open_tenant(
    dir: &Path,
    id: TenantId,
    conf: &TimelineConfig,
    cache: &Arc<PageCache>,
    fetchers: Option<&LayerFetchers>,
) -> Result<Tenant, StorageError> {
    match fetchers {
        Some(fetchers) => Tenant::open_with_fetcher(dir, conf.clone(), Arc::clone(cache), fetchers(id)),
        None => Tenant::open(dir, conf.clone(), Arc::clone(cache)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::{Key, Value, WalRecord, PAGE_SIZE_BYTES};

    #[tokio::test]
    async fn wait_for_lsn_wakes_on_ingest_and_times_out_otherwise() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manager = Arc::new(
            TenantManager::open(dir.path(), TimelineConfig::default(), Arc::new(PageCache::new(64))).expect("open"),
        );
        let tenant = TenantId(1);
        manager.create_tenant(tenant).expect("tenant");
        assert!(matches!(
            manager.create_tenant(tenant),
            Err(PageserverError::TenantExists(_))
        ));
        let timeline = manager
            .create_timeline(tenant, TimelineId(2), NewTimeline::Root { start_lsn: Lsn(0x100) })
            .expect("timeline");
        let record = WalRecord {
            commit_ts_us: 1,
            db_size_pages: 1,
            entries: vec![(Key::page(0), Value::Image(bytes::Bytes::from(vec![1; PAGE_SIZE_BYTES])))],
        };
        let end = Lsn(0x100 + record.frame_len());
        let waiter = {
            let manager = Arc::clone(&manager);
            let timeline = Arc::clone(&timeline);
            tokio::spawn(async move {
                manager
                    .wait_for_lsn(tenant, &timeline, end, Duration::from_secs(5))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        timeline.ingest_record(Lsn(0x100), &record).expect("ingest");
        manager.notify_ingested(tenant, &timeline);
        waiter.await.expect("join").expect("woken by the ingest");
        let late = manager
            .wait_for_lsn(tenant, &timeline, end.next(), Duration::from_millis(30))
            .await;
        assert!(matches!(late, Err(PageserverError::WaitLsnTimeout { .. })));
        // Reopen: the tenant and its timeline are found again.
        drop(timeline);
        drop(manager);
        let manager =
            TenantManager::open(dir.path(), TimelineConfig::default(), Arc::new(PageCache::new(64))).expect("reopen");
        assert!(manager.timeline(tenant, TimelineId(2)).is_ok());
        manager.delete_tenant(tenant).expect("delete");
        assert!(matches!(
            manager.tenant(tenant),
            Err(PageserverError::TenantNotFound(_))
        ));
    }
}
