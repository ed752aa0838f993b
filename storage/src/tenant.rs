//! `Tenant`: a set of timelines in one directory, with branch creation, deletion and restart.
//!
//! ```text
//! <tenant dir>/branches.log                    creations and deletions of timelines (see branch_log)
//! <tenant dir>/timelines/<timeline id>/        metadata, timestamps, layer files (made at the first flush)
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::branch_log::{BranchLog, BranchLogEntry};
use crate::cache::PageCache;
use crate::config::TimelineConfig;
use crate::error::{io_err, Result, StorageError};
use crate::fsio::create_dir_durable;
use crate::id::TimelineId;
use crate::layer::fetch::LayerFetcher;
use crate::lsn::Lsn;
use crate::timeline::{GcOutcome, Timeline};

use crate::branch_log::BRANCH_LOG_FILE;
/// The directory of a tenant's timelines.
pub const TIMELINES_DIR: &str = "timelines";

/// Where a branch starts on its ancestor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchPoint {
    /// The ancestor's `last_record_lsn` at the moment of creation.
    Latest,
    /// This LSN, which must be within `[gc_cutoff, last_record_lsn]` of the ancestor.
    At(Lsn),
}

/// A set of timelines that share a directory, a configuration and a page cache.
pub struct Tenant {
    dir: PathBuf,
    conf: Arc<TimelineConfig>,
    cache: Arc<PageCache>,
    /// Fetches layers the metadata names but the disk lacks; `None`: a missing layer is corruption.
    fetcher: Option<Arc<dyn LayerFetcher>>,
    timelines: RwLock<HashMap<TimelineId, Arc<Timeline>>>,
    /// Serializes creations and deletions (and their log appends).
    log: Mutex<BranchLog>,
}

impl Tenant {
    /// Opens the tenant in `dir` (creating it if needed) and loads every timeline: each stands at its
    /// `disk_consistent_lsn`, ready for WAL to be re-fed from there. Every layer the metadata names must be on
    /// disk.
    pub fn open(dir: &Path, conf: TimelineConfig, cache: Arc<PageCache>) -> Result<Tenant> {
        Tenant::open_inner(dir, conf, cache, None)
    }

    /// As [`Tenant::open`], but a layer the metadata names and the disk lacks (a tenant rebuilt from remote
    /// storage with its small files only, or a layer lost locally) is fetched through `fetcher` on first use,
    /// by every timeline of the tenant (see [`crate::layer::fetch`]).
    pub fn open_with_fetcher(
        dir: &Path,
        conf: TimelineConfig,
        cache: Arc<PageCache>,
        fetcher: Arc<dyn LayerFetcher>,
    ) -> Result<Tenant> {
        Tenant::open_inner(dir, conf, cache, Some(fetcher))
    }

    fn open_inner(
        dir: &Path,
        conf: TimelineConfig,
        cache: Arc<PageCache>,
        fetcher: Option<Arc<dyn LayerFetcher>>,
    ) -> Result<Tenant> {
        conf.validate().map_err(StorageError::InvalidConfig)?;
        create_dir_durable(&dir.join(TIMELINES_DIR), conf.durability)?;
        let (log, entries) = BranchLog::open(&dir.join(BRANCH_LOG_FILE), conf.durability)?;
        let conf = Arc::new(conf);
        let mut timelines: HashMap<TimelineId, Arc<Timeline>> = HashMap::new();
        let mut created: Vec<(TimelineId, Option<TimelineId>, Lsn)> = Vec::new();
        let mut sealed: HashMap<TimelineId, Lsn> = HashMap::new();
        for entry in entries {
            match entry {
                BranchLogEntry::Create {
                    timeline_id,
                    ancestor,
                    start_lsn,
                } => created.push((timeline_id, ancestor, start_lsn)),
                BranchLogEntry::Delete { timeline_id } => created.retain(|(id, _, _)| *id != timeline_id),
                BranchLogEntry::Seal { timeline_id, end_lsn } => {
                    sealed.insert(timeline_id, end_lsn);
                }
            }
        }
        // The log lists a parent before its children, so ancestors are loaded first.
        for (id, ancestor_id, start_lsn) in created {
            let ancestor = match ancestor_id {
                Some(ancestor_id) => Some(Arc::clone(
                    timelines
                        .get(&ancestor_id)
                        .ok_or(StorageError::TimelineNotFound(ancestor_id))?,
                )),
                None => None,
            };
            let timeline_dir = dir.join(TIMELINES_DIR).join(id.to_string());
            let timeline = Timeline::load(
                id,
                timeline_dir,
                Arc::clone(&conf),
                Arc::clone(&cache),
                fetcher.clone(),
                ancestor.clone(),
                start_lsn,
            )?;
            if let Some(ancestor) = ancestor {
                ancestor.restore_branch_point(id, start_lsn);
            }
            if let Some(end_lsn) = sealed.get(&id) {
                // Sealed here only once its layers held everything up to the end. A tenant rebuilt from remote
                // storage may pair a seal with an older metadata (an upload's log carried the seal its metadata
                // did not): then it is not sealed yet, its WAL is followed again (the safekeepers delete theirs
                // only once the remote copy holds the end), and the control plane's next seal seals it.
                if timeline.disk_consistent_lsn() >= *end_lsn {
                    timeline.set_sealed(*end_lsn);
                } else {
                    tracing::warn!(
                        timeline = %id,
                        %end_lsn,
                        disk_consistent_lsn = %timeline.disk_consistent_lsn(),
                        "a sealed timeline's layers stop before its end; loaded unsealed, to be re-fed and sealed again"
                    );
                }
            }
            timelines.insert(id, Arc::new(timeline));
        }
        remove_deleted_dirs(&dir.join(TIMELINES_DIR), &timelines)?;
        Ok(Tenant {
            dir: dir.to_path_buf(),
            conf,
            cache,
            fetcher,
            timelines: RwLock::new(timelines),
            log: Mutex::new(log),
        })
    }

    /// The tenant's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The timeline `id`.
    pub fn timeline(&self, id: TimelineId) -> Result<Arc<Timeline>> {
        self.timelines
            .read()
            .get(&id)
            .cloned()
            .ok_or(StorageError::TimelineNotFound(id))
    }

    /// Every timeline, in no particular order.
    pub fn timelines(&self) -> Vec<Arc<Timeline>> {
        self.timelines.read().values().cloned().collect()
    }

    fn timeline_dir(&self, id: TimelineId) -> PathBuf {
        self.dir.join(TIMELINES_DIR).join(id.to_string())
    }

    /// Creates an empty root timeline whose WAL starts at `start_lsn`.
    pub fn create_timeline(&self, id: TimelineId, start_lsn: Lsn) -> Result<Arc<Timeline>> {
        let mut log = self.log.lock();
        if self.timelines.read().contains_key(&id) {
            return Err(StorageError::TimelineExists(id));
        }
        let timeline = Timeline::create(
            id,
            self.timeline_dir(id),
            Arc::clone(&self.conf),
            Arc::clone(&self.cache),
            self.fetcher.clone(),
            None,
            start_lsn,
        )?;
        log.append(&BranchLogEntry::Create {
            timeline_id: id,
            ancestor: None,
            start_lsn,
        })?;
        let timeline = Arc::new(timeline);
        self.timelines.write().insert(id, Arc::clone(&timeline));
        Ok(timeline)
    }

    /// Creates timeline `id` as a branch of `ancestor_id` at `point`. Writes one log entry and syncs once:
    /// O(1) whatever the ancestor's size. The branch point is then kept readable by the ancestor's GC.
    pub fn branch(&self, id: TimelineId, ancestor_id: TimelineId, point: BranchPoint) -> Result<Arc<Timeline>> {
        let mut log = self.log.lock();
        if self.timelines.read().contains_key(&id) {
            return Err(StorageError::TimelineExists(id));
        }
        let ancestor = self.timeline(ancestor_id)?;
        let last_record_lsn = ancestor.last_record_lsn();
        let lsn = match point {
            BranchPoint::Latest => last_record_lsn,
            BranchPoint::At(lsn) => lsn,
        };
        if let Some(end_lsn) = ancestor.sealed_lsn() {
            if lsn > end_lsn {
                return Err(StorageError::PastSeal {
                    timeline: ancestor_id,
                    end_lsn,
                    lsn,
                });
            }
        }
        // A point among a pending group's parts is the state before the group (see `Timeline::wal_end_lsn`).
        if lsn > last_record_lsn.max(ancestor.wal_end_lsn()) {
            return Err(StorageError::LsnAhead { lsn, last_record_lsn });
        }
        if lsn < ancestor.start_lsn() {
            return Err(StorageError::LsnBeforeStart {
                timeline: ancestor_id,
                lsn,
                start_lsn: ancestor.start_lsn(),
            });
        }
        // Registering the branch point checks the GC cutoff under the lock GC takes to move it.
        ancestor.add_branch_point(id, lsn)?;
        let created = Timeline::create(
            id,
            self.timeline_dir(id),
            Arc::clone(&self.conf),
            Arc::clone(&self.cache),
            self.fetcher.clone(),
            Some(Arc::clone(&ancestor)),
            lsn,
        )
        .and_then(|timeline| {
            log.append(&BranchLogEntry::Create {
                timeline_id: id,
                ancestor: Some(ancestor_id),
                start_lsn: lsn,
            })?;
            Ok(timeline)
        });
        let timeline = match created {
            Ok(timeline) => Arc::new(timeline),
            Err(e) => {
                ancestor.remove_branch_point(id);
                return Err(e);
            }
        };
        self.timelines.write().insert(id, Arc::clone(&timeline));
        Ok(timeline)
    }

    /// Seals timeline `id`: an ancestor that nothing writes to any more and nothing reads past its children's
    /// newest branch point (a branch's old timeline after a restore without `preserve`). Flushes what it holds
    /// in memory, then records the seal in the branch log: from then on everything a read can reach on it is in
    /// its layer files, so its WAL is needed by no one, a pageserver follows none for it (after a restart too),
    /// and no branch is made from it past the end. Returns the end: its children's newest branch point.
    /// Sealing again returns the same end and writes nothing.
    ///
    /// Fails with `NoChildren` for a timeline nothing is branched from (delete it instead) and with
    /// `AncestorBehind` while it has not ingested up to the end (after a restart, before its WAL was re-fed;
    /// or an end inside a transaction's pending parts): try again later.
    pub fn seal_timeline(&self, id: TimelineId) -> Result<Lsn> {
        let timeline = self.timeline(id)?;
        if let Some(end_lsn) = timeline.sealed_lsn() {
            return Ok(end_lsn);
        }
        // The flush runs before the log's lock, so creations of other branches do not wait for it. All of what it
        // holds in memory goes, past the end too (WAL no read will reach): nothing is ingested into it again, so
        // its memory is freed now, not when the open layer grows stale.
        let needed = |timeline: &Timeline| -> Result<Lsn> {
            let end_lsn = timeline.newest_branch_point().ok_or(StorageError::NoChildren(id))?;
            let last_record_lsn = timeline.last_record_lsn();
            if last_record_lsn < end_lsn {
                return Err(StorageError::AncestorBehind {
                    ancestor: id,
                    branch_lsn: end_lsn,
                    last_record_lsn,
                });
            }
            Ok(end_lsn)
        };
        needed(&timeline)?;
        timeline.checkpoint()?;
        let mut log = self.log.lock();
        if let Some(end_lsn) = timeline.sealed_lsn() {
            return Ok(end_lsn);
        }
        // Under the log's lock no branch is made from it: the end cannot move any more.
        let end_lsn = needed(&timeline)?;
        if timeline.disk_consistent_lsn() < end_lsn {
            timeline.checkpoint()?;
        }
        assert!(
            timeline.disk_consistent_lsn() >= end_lsn,
            "a checkpoint of timeline {id} left disk_consistent_lsn {} behind {end_lsn}, which it had ingested",
            timeline.disk_consistent_lsn()
        );
        log.append(&BranchLogEntry::Seal {
            timeline_id: id,
            end_lsn,
        })?;
        timeline.set_sealed(end_lsn);
        Ok(end_lsn)
    }

    /// Deletes a timeline with no children: its log entry, its files, its cached pages.
    pub fn delete_timeline(&self, id: TimelineId) -> Result<()> {
        let mut log = self.log.lock();
        let timeline = self.timeline(id)?;
        let children = timeline.child_count();
        if children > 0 {
            return Err(StorageError::HasChildren { timeline: id, children });
        }
        log.append(&BranchLogEntry::Delete { timeline_id: id })?;
        // Wait out a running flush, compaction or GC, and stop later ones, before the files go.
        let _ops = timeline.lock_ops();
        timeline.poison();
        self.timelines.write().remove(&id);
        if let Some((ancestor, _)) = timeline.ancestor() {
            ancestor.remove_branch_point(id);
        }
        self.cache.forget_timeline(id);
        match std::fs::remove_dir_all(timeline.dir()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(timeline.dir())(e)),
        }
    }

    /// Stops the tenant's timelines from writing: waits out any running flush, compaction or GC and makes later
    /// ones fail (`Poisoned`). Reads go on. Used before the tenant's files are removed.
    pub fn close(&self) {
        for timeline in self.timelines() {
            let _ops = timeline.lock_ops();
            timeline.poison();
        }
    }

    /// Runs GC on every timeline.
    pub fn gc(&self, now_us: u64) -> Result<Vec<(TimelineId, GcOutcome)>> {
        let mut outcomes = Vec::new();
        for timeline in self.timelines() {
            outcomes.push((timeline.id(), timeline.gc(now_us)?));
        }
        Ok(outcomes)
    }
}

/// Removes directories of timelines the log no longer lists (a deletion cut short before the removal).
fn remove_deleted_dirs(dir: &Path, live: &HashMap<TimelineId, Arc<Timeline>>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        match name.parse::<TimelineId>() {
            Ok(id) if !live.contains_key(&id) => {
                tracing::info!(timeline = %id, "removing the directory of a deleted timeline");
                std::fs::remove_dir_all(entry.path()).map_err(io_err(entry.path()))?;
            }
            _ => {}
        }
    }
    Ok(())
}
