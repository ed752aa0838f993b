//! `Timeline`: one branch's history of every page: ingest, reads at any LSN, flush, compaction, GC.

mod compact;
mod flush;
mod gc;
mod group;
mod ingest;
mod read;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::cache::PageCache;
use crate::config::TimelineConfig;
use crate::error::{corrupt, io_err, Result, StorageError};
use crate::fsio::{create_dir_durable, Durability, TEMP_SUFFIX};
use crate::id::TimelineId;
use crate::key::{Key, DB_SIZE_KEY, PAGE_SIZE_BYTES};
use crate::layer::desc::{LayerDesc, LayerKind};
use crate::layer::fetch::LayerFetcher;
use crate::layer::file::{LayerFile, LayerSearch, LayerSource};
use crate::layer::inmemory::InMemoryLayer;
use crate::layer::map::{LayerMap, NextLayer};
use crate::layer::writer::LayerWriter;
use crate::lsn::Lsn;
use crate::metadata::{TimelineMetadata, METADATA_FILE};
use crate::timestamps::{TimestampIndex, TIMESTAMPS_FILE};
use crate::value::{self, Value};
use crate::wal::{db_size_value, WalRecord};

/// The layers of a timeline at one moment. Replaced as a whole (copy on write), so a reader's snapshot stays
/// consistent while flushes and compactions go on.
#[derive(Clone)]
struct LayerState {
    open: Arc<InMemoryLayer>,
    /// Frozen in-memory layers waiting for flush, oldest first.
    frozen: Vec<Arc<InMemoryLayer>>,
    map: LayerMap,
    open_since: Instant,
}

struct WriterState {
    last_commit_ts_us: u64,
    /// The parts of a transaction received before its commit (see `group`).
    pending: Option<group::PendingGroup>,
}

/// What GC must keep readable besides the cutoff: children's branch points and leased LSNs.
#[derive(Default)]
struct RetainPoints {
    children: BTreeMap<TimelineId, Lsn>,
    /// Leased LSN -> expiry (µs since the epoch).
    leases: BTreeMap<Lsn, u64>,
}

/// How many layers reads visited and how many versions they gathered, for tracking read amplification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Layers (in memory and on disk) whose index a read consulted.
    pub layers_visited: u64,
    /// Versions a read gathered to reconstruct its page (the image it started from and the deltas above it).
    pub versions_read: u64,
}

/// The state of a timeline, for reports and the pageserver's timeline info.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineInfo {
    /// Its id.
    pub timeline_id: TimelineId,
    /// Its ancestor and branch point.
    pub ancestor: Option<(TimelineId, Lsn)>,
    /// The first LSN of its own history (its branch point, for a branch).
    pub start_lsn: Lsn,
    /// The end of the last ingested record: the newest readable LSN.
    pub last_record_lsn: Lsn,
    /// Everything at or below this LSN is in fsynced layer files.
    pub disk_consistent_lsn: Lsn,
    /// Reads below this are refused.
    pub gc_cutoff_lsn: Lsn,
    /// Database size in pages at `last_record_lsn` (0 if it cannot be read).
    pub db_size_pages: u32,
    /// On-disk layers.
    pub layer_count: usize,
    /// Bytes of on-disk layers.
    pub layer_bytes: u64,
    /// Frozen in-memory layers waiting for flush.
    pub frozen_layer_count: usize,
    /// Where it was sealed, if it was (see [`Timeline::sealed_lsn`]).
    pub sealed_lsn: Option<Lsn>,
}

/// What a compaction run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionOutcome {
    /// L0 layers merged away.
    pub l0_merged: usize,
    /// L1 layers written.
    pub l1_written: usize,
    /// Image layers written.
    pub images_written: usize,
}

/// What a GC run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcOutcome {
    /// The cutoff after the run.
    pub gc_cutoff_lsn: Lsn,
    /// Layers removed.
    pub layers_removed: usize,
}

/// Where the LSN for a timestamp was found: on the timeline itself, or on an ancestor below its branch point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampLsn {
    /// The timeline whose history holds the point.
    pub timeline_id: TimelineId,
    /// The end LSN of the newest commit at or before the timestamp.
    pub lsn: Lsn,
}

/// One branch's pages at every LSN it keeps.
///
/// **Invariant:** `gc_cutoff_lsn <= last_record_lsn` once anything is ingested, `start_lsn <= disk_consistent_lsn
/// <= last_record_lsn`, and every version at or below `disk_consistent_lsn` is in a layer named by the durable
/// metadata.
pub struct Timeline {
    id: TimelineId,
    dir: PathBuf,
    conf: Arc<TimelineConfig>,
    cache: Arc<PageCache>,
    /// Fetches layers the metadata names but the disk lacks; `None`: a missing layer is corruption.
    fetcher: Option<Arc<dyn LayerFetcher>>,
    ancestor: Option<Arc<Timeline>>,
    start_lsn: Lsn,
    layers: RwLock<Arc<LayerState>>,
    last_record_lsn: AtomicU64,
    /// Where the next WAL frame starts: `last_record_lsn`, or past a pending group's parts (see `group`). Set
    /// under the writer lock, after `last_record_lsn` when both move.
    wal_end_lsn: AtomicU64,
    disk_consistent_lsn: AtomicU64,
    gc_cutoff_lsn: AtomicU64,
    writer: Mutex<WriterState>,
    /// Serializes flush, compaction and GC: everything that writes the metadata.
    ops: Mutex<()>,
    /// Children's branch points. Its lock also orders branch creation against GC's cutoff move.
    branch_points: Mutex<RetainPoints>,
    /// Set once the timeline is sealed ([`crate::Tenant::seal_timeline`]): the LSN past which nothing reads it.
    sealed_lsn: Mutex<Option<Lsn>>,
    timestamps: TimestampIndex,
    poisoned: AtomicBool,
    reads_total: AtomicU64,
    /// Versions ingest made whole pages (`TimelineConfig::delta_run_max`).
    materialized_total: AtomicU64,
    layers_visited_total: AtomicU64,
}

impl Drop for Timeline {
    /// Lets go of the ancestors one after another, not recursively: a chain of branches (a branch restored again
    /// and again makes one) may be far deeper than a thread's stack would take, one drop frame per timeline.
    fn drop(&mut self) {
        let mut next = self.ancestor.take();
        // Bounded by the chain's length: each turn takes one timeline off it.
        while let Some(ancestor) = next {
            // `into_inner`, not `try_unwrap`: of holders letting go at once, exactly one gets the timeline.
            next = match Arc::into_inner(ancestor) {
                // The last holder: its own drop then finds no ancestor left to recurse into.
                Some(mut timeline) => timeline.ancestor.take(),
                // Someone else still holds it (the tenant, a reader): the chain stays for them.
                None => None,
            };
        }
    }
}

impl Timeline {
    /// A new, empty timeline (a root at `start_lsn`, or a branch of `ancestor` at `start_lsn`). Writes nothing:
    /// its directory appears at its first flush.
    pub(crate) fn create(
        id: TimelineId,
        dir: PathBuf,
        conf: Arc<TimelineConfig>,
        cache: Arc<PageCache>,
        fetcher: Option<Arc<dyn LayerFetcher>>,
        ancestor: Option<Arc<Timeline>>,
        start_lsn: Lsn,
    ) -> Result<Timeline> {
        let timestamps = TimestampIndex::empty(dir.join(TIMESTAMPS_FILE), conf.durability);
        Ok(Timeline::assemble(
            id,
            dir,
            conf,
            cache,
            fetcher,
            ancestor,
            start_lsn,
            LayerMap::default(),
            start_lsn,
            start_lsn,
            timestamps,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        id: TimelineId,
        dir: PathBuf,
        conf: Arc<TimelineConfig>,
        cache: Arc<PageCache>,
        fetcher: Option<Arc<dyn LayerFetcher>>,
        ancestor: Option<Arc<Timeline>>,
        start_lsn: Lsn,
        map: LayerMap,
        disk_consistent_lsn: Lsn,
        gc_cutoff_lsn: Lsn,
        timestamps: TimestampIndex,
    ) -> Timeline {
        assert!(
            start_lsn <= disk_consistent_lsn,
            "start {start_lsn} after disk consistent {disk_consistent_lsn}"
        );
        let state = LayerState {
            open: Arc::new(InMemoryLayer::new(disk_consistent_lsn)),
            frozen: Vec::new(),
            map,
            open_since: Instant::now(),
        };
        Timeline {
            id,
            dir,
            conf,
            cache,
            fetcher,
            ancestor,
            start_lsn,
            layers: RwLock::new(Arc::new(state)),
            last_record_lsn: AtomicU64::new(disk_consistent_lsn.0),
            wal_end_lsn: AtomicU64::new(disk_consistent_lsn.0),
            disk_consistent_lsn: AtomicU64::new(disk_consistent_lsn.0),
            gc_cutoff_lsn: AtomicU64::new(gc_cutoff_lsn.0),
            writer: Mutex::new(WriterState {
                last_commit_ts_us: 0,
                pending: None,
            }),
            ops: Mutex::new(()),
            branch_points: Mutex::new(RetainPoints::default()),
            sealed_lsn: Mutex::new(None),
            timestamps,
            poisoned: AtomicBool::new(false),
            reads_total: AtomicU64::new(0),
            materialized_total: AtomicU64::new(0),
            layers_visited_total: AtomicU64::new(0),
        }
    }

    /// Loads a timeline from its directory: the durable metadata names the layers; stray temp files and layer
    /// files that no metadata names (a flush or compaction cut short) are removed. The timeline then stands at
    /// `disk_consistent_lsn`, and the caller re-feeds WAL from there. A layer the metadata names but the disk
    /// lacks is corruption, unless there is a fetcher: then it is fetched on first use.
    pub(crate) fn load(
        id: TimelineId,
        dir: PathBuf,
        conf: Arc<TimelineConfig>,
        cache: Arc<PageCache>,
        fetcher: Option<Arc<dyn LayerFetcher>>,
        ancestor: Option<Arc<Timeline>>,
        start_lsn: Lsn,
    ) -> Result<Timeline> {
        let Some(meta) = TimelineMetadata::load(&dir)? else {
            if dir.exists() {
                remove_unreferenced(&dir, &[])?;
            }
            return Timeline::create(id, dir, conf, cache, fetcher, ancestor, start_lsn);
        };
        if meta.timeline_id != id {
            return Err(corrupt(
                dir.join(METADATA_FILE),
                0,
                format!("names timeline {}", meta.timeline_id),
            ));
        }
        if meta.disk_consistent_lsn < start_lsn {
            return Err(corrupt(
                dir.join(METADATA_FILE),
                0,
                "disk_consistent_lsn before the timeline start",
            ));
        }
        let names: Vec<String> = meta.layers.iter().map(LayerDesc::file_name).collect();
        remove_unreferenced(&dir, &names)?;
        let mut layers = Vec::with_capacity(meta.layers.len());
        let mut missing = 0usize;
        for desc in &meta.layers {
            let path = dir.join(desc.file_name());
            if !path.exists() {
                if fetcher.is_none() {
                    return Err(corrupt(&path, 0, "layer named by the metadata is missing"));
                }
                missing += 1;
            }
            let layer = LayerFile::new(path, desc.clone());
            layers.push(Arc::new(with_fetcher(layer, fetcher.as_ref(), id, conf.durability)));
        }
        if missing > 0 {
            tracing::info!(
                timeline = %id,
                missing,
                layers = layers.len(),
                "layers missing locally will be fetched on first use"
            );
        }
        let timestamps = TimestampIndex::open(dir.join(TIMESTAMPS_FILE), meta.timestamp_count, conf.durability)?;
        let last_commit_ts_us = timestamps.last_timestamp()?.unwrap_or(0);
        let timeline = Timeline::assemble(
            id,
            dir,
            conf,
            cache,
            fetcher,
            ancestor,
            start_lsn,
            LayerMap::new(layers),
            meta.disk_consistent_lsn,
            meta.gc_cutoff_lsn,
            timestamps,
        );
        timeline.writer.lock().last_commit_ts_us = last_commit_ts_us;
        Ok(timeline)
    }

    /// The id.
    pub fn id(&self) -> TimelineId {
        self.id
    }

    /// The ancestor timeline and the branch point, if this is a branch.
    pub fn ancestor(&self) -> Option<(&Arc<Timeline>, Lsn)> {
        self.ancestor.as_ref().map(|a| (a, self.start_lsn))
    }

    /// The first LSN of this timeline's own history.
    pub fn start_lsn(&self) -> Lsn {
        self.start_lsn
    }

    /// The end of the last ingested record: reads at up to this LSN are answered.
    pub fn last_record_lsn(&self) -> Lsn {
        Lsn(self.last_record_lsn.load(Ordering::Acquire))
    }

    /// Everything at or below this LSN is durable in layer files.
    pub fn disk_consistent_lsn(&self) -> Lsn {
        Lsn(self.disk_consistent_lsn.load(Ordering::Acquire))
    }

    /// Reads below this LSN are refused.
    pub fn gc_cutoff_lsn(&self) -> Lsn {
        Lsn(self.gc_cutoff_lsn.load(Ordering::Acquire))
    }

    /// The timeline's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A layer this timeline just wrote, fetchable again (once uploaded) if its file is lost.
    fn adopt(&self, layer: LayerFile) -> Arc<LayerFile> {
        Arc::new(with_fetcher(
            layer,
            self.fetcher.as_ref(),
            self.id,
            self.conf.durability,
        ))
    }

    fn check_writable(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(StorageError::Poisoned(self.id));
        }
        Ok(())
    }

    /// Runs a step that writes files; a failure poisons the timeline (STYLE 18: never carry on after a failed
    /// write or fsync as if the data were safe; reload from durable state instead).
    fn poison_on_error<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            tracing::error!(timeline = %self.id, error = %e, "write failed; timeline poisoned until reloaded");
            self.poisoned.store(true, Ordering::Release);
        }
        result
    }

    /// Holds the lock of flush, compaction and GC (for deletion).
    pub(crate) fn lock_ops(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.ops.lock()
    }

    /// Where the timeline was sealed ([`crate::Tenant::seal_timeline`]): no WAL is followed for it any more and no
    /// branch is made from it past this LSN. `None` while it is not sealed.
    pub fn sealed_lsn(&self) -> Option<Lsn> {
        *self.sealed_lsn.lock()
    }

    pub(crate) fn set_sealed(&self, end_lsn: Lsn) {
        *self.sealed_lsn.lock() = Some(end_lsn);
    }

    /// Marks the timeline dead (it is being deleted): it takes no more writes.
    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    // ---------------------------------------------------------------- ingest

    /// The timeline's state.
    pub fn info(&self) -> TimelineInfo {
        let state = self.layers.read().clone();
        TimelineInfo {
            timeline_id: self.id,
            ancestor: self.ancestor.as_ref().map(|a| (a.id, self.start_lsn)),
            start_lsn: self.start_lsn,
            last_record_lsn: self.last_record_lsn(),
            disk_consistent_lsn: self.disk_consistent_lsn(),
            gc_cutoff_lsn: self.gc_cutoff_lsn(),
            db_size_pages: self.db_size_at(self.last_record_lsn()).unwrap_or(0),
            layer_count: state.map.len(),
            layer_bytes: state.map.iter().map(|l| l.desc().size_bytes).sum(),
            frozen_layer_count: state.frozen.len(),
            sealed_lsn: self.sealed_lsn(),
        }
    }

    /// The on-disk layers' descriptors.
    pub fn layer_descs(&self) -> Vec<LayerDesc> {
        self.layers.read().map.iter().map(|l| l.desc().clone()).collect()
    }

    /// Versions ingest made whole pages because their key's run of deltas reached
    /// `TimelineConfig::delta_run_max`, since this timeline was opened.
    pub fn materialized_total(&self) -> u64 {
        self.materialized_total.load(Ordering::Relaxed)
    }

    /// Reads served without the cache, and the layers they visited in all (read amplification =
    /// `layers_visited / reads`).
    pub fn read_amplification_counters(&self) -> (u64, u64) {
        (
            self.reads_total.load(Ordering::Relaxed),
            self.layers_visited_total.load(Ordering::Relaxed),
        )
    }
}

/// `layer`, fetched by `fetcher` (if any) when its file is missing.
fn with_fetcher(
    layer: LayerFile,
    fetcher: Option<&Arc<dyn LayerFetcher>>,
    timeline: TimelineId,
    durability: Durability,
) -> LayerFile {
    match fetcher {
        Some(fetcher) => layer.with_source(LayerSource {
            fetcher: Arc::clone(fetcher),
            timeline,
            durability,
        }),
        None => layer,
    }
}

/// Removes temp files and layer files not in `keep` from a timeline directory.
fn remove_unreferenced(dir: &Path, keep: &[String]) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(io_err(dir))?;
    for entry in entries {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(TEMP_SUFFIX) || (crate::formats::is_layer_file_name(&name) && !keep.contains(&name)) {
            tracing::info!(file = %entry.path().display(), "removing a file left by an interrupted write");
            std::fs::remove_file(entry.path()).map_err(io_err(entry.path()))?;
        }
    }
    Ok(())
}
