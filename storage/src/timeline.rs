//! `Timeline`: one branch's history of every page: ingest, reads at any LSN, flush, compaction, GC.

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
use crate::fetch::LayerFetcher;
use crate::fsio::{create_dir_durable, Durability, TEMP_SUFFIX};
use crate::id::TimelineId;
use crate::key::{Key, DB_SIZE_KEY, PAGE_SIZE_BYTES};
use crate::layer::desc::{LayerDesc, LayerKind};
use crate::layer::file::{LayerFile, LayerSearch, LayerSource, LayerWriter};
use crate::layer::inmemory::InMemoryLayer;
use crate::layer::map::{LayerMap, NextLayer};
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
}

/// What GC must keep readable besides the cutoff: children's branch points and leased LSNs.
#[derive(Default)]
struct RetainPoints {
    children: BTreeMap<TimelineId, Lsn>,
    /// Leased LSN -> expiry (µs since the epoch).
    leases: BTreeMap<Lsn, u64>,
}

/// How many layers reads visited, for tracking read amplification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Layers (in memory and on disk) whose index a read consulted.
    pub layers_visited: u64,
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
    disk_consistent_lsn: AtomicU64,
    gc_cutoff_lsn: AtomicU64,
    writer: Mutex<WriterState>,
    /// Serializes flush, compaction and GC: everything that writes the metadata.
    ops: Mutex<()>,
    /// Children's branch points. Its lock also orders branch creation against GC's cutoff move.
    branch_points: Mutex<RetainPoints>,
    timestamps: TimestampIndex,
    poisoned: AtomicBool,
    reads_total: AtomicU64,
    layers_visited_total: AtomicU64,
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
            disk_consistent_lsn: AtomicU64::new(disk_consistent_lsn.0),
            gc_cutoff_lsn: AtomicU64::new(gc_cutoff_lsn.0),
            writer: Mutex::new(WriterState { last_commit_ts_us: 0 }),
            ops: Mutex::new(()),
            branch_points: Mutex::new(RetainPoints::default()),
            timestamps,
            poisoned: AtomicBool::new(false),
            reads_total: AtomicU64::new(0),
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
        *timeline.writer.lock() = WriterState { last_commit_ts_us };
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

    /// Marks the timeline dead (it is being deleted): it takes no more writes.
    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    // ---------------------------------------------------------------- ingest

    /// Ingests one committed record that starts at `start_lsn`, which must be where the previous one ended.
    /// Returns the record's end LSN, at which its changes are visible.
    pub fn ingest_record(&self, start_lsn: Lsn, record: &WalRecord) -> Result<Lsn> {
        self.check_writable()?;
        record.validate()?;
        let frame_bytes = record.frame_len();
        let mut writer = self.writer.lock();
        let expected = self.last_record_lsn();
        if start_lsn != expected {
            return Err(StorageError::OutOfOrder {
                expected,
                got: start_lsn,
            });
        }
        let end_lsn = start_lsn.checked_add(frame_bytes).ok_or(StorageError::OutOfOrder {
            expected,
            got: start_lsn,
        })?;
        // Every record stores the size, so ingest never needs state derived from older history (perhaps an
        // ancestor's, not yet re-fed after a restart).
        let size = db_size_value(record.db_size_pages);
        let state = self.layers.read().clone();
        for (key, _) in record.entries.iter().chain(std::iter::once(&size)) {
            self.cache.invalidate(self.id, *key, end_lsn);
        }
        state.open.put_record(
            end_lsn,
            record.entries.iter().cloned().chain(std::iter::once(size)),
            frame_bytes,
        );
        // Commit timestamps must not go backwards for the index to stay sorted; a clock step back is clamped.
        writer.last_commit_ts_us = writer.last_commit_ts_us.max(record.commit_ts_us);
        self.timestamps.push(writer.last_commit_ts_us, end_lsn);
        self.last_record_lsn.store(end_lsn.0, Ordering::Release);
        if state.open.wal_bytes() >= self.conf.checkpoint_distance_bytes {
            self.freeze_locked();
        }
        Ok(end_lsn)
    }

    /// Ingests consecutive framed records starting at `start_lsn`. Returns the end LSN of the last one.
    pub fn ingest_frames(&self, start_lsn: Lsn, frames: &Bytes) -> Result<Lsn> {
        let (records, error) = crate::wal::decode_frames(frames, start_lsn);
        let mut lsn = start_lsn;
        for (record_lsn, record) in records {
            lsn = self.ingest_record(record_lsn, &record)?;
        }
        match error {
            Some(e) => Err(e.into()),
            None => Ok(lsn),
        }
    }

    /// Freezes the open in-memory layer (if it holds anything) so a flush can write it.
    pub fn freeze_open_layer(&self) {
        let _writer = self.writer.lock();
        self.freeze_locked();
    }

    /// Freezes the open layer if it has held data for longer than `checkpoint_timeout_ms`.
    pub fn freeze_if_stale(&self) {
        let _writer = self.writer.lock();
        let state = self.layers.read().clone();
        let has_data = state.open.end_lsn() > state.open.start_lsn();
        if has_data && state.open_since.elapsed().as_millis() as u64 >= self.conf.checkpoint_timeout_ms {
            self.freeze_locked();
        }
    }

    /// Caller holds the writer lock, so the open layer's end is stable.
    fn freeze_locked(&self) {
        let mut guard = self.layers.write();
        if guard.open.end_lsn() == guard.open.start_lsn() {
            return;
        }
        let mut state = (**guard).clone();
        state.open.freeze();
        let end_lsn = state.open.end_lsn();
        state.frozen.push(Arc::clone(&state.open));
        state.open = Arc::new(InMemoryLayer::new(end_lsn));
        state.open_since = Instant::now();
        *guard = Arc::new(state);
    }

    /// How many frozen layers wait for a flush (ingest should slow down when this grows).
    pub fn frozen_layer_count(&self) -> usize {
        self.layers.read().frozen.len()
    }

    /// Whether frozen layers wait for a flush.
    pub fn has_frozen_layers(&self) -> bool {
        !self.layers.read().frozen.is_empty()
    }

    // ---------------------------------------------------------------- reads

    /// Checks `lsn` is readable; returns the `last_record_lsn` it was checked against.
    fn check_read_lsn(&self, lsn: Lsn) -> Result<Lsn> {
        let last_record_lsn = self.last_record_lsn();
        if lsn > last_record_lsn {
            return Err(StorageError::LsnAhead { lsn, last_record_lsn });
        }
        if lsn < self.start_lsn {
            return Err(StorageError::LsnBeforeStart {
                timeline: self.id,
                lsn,
                start_lsn: self.start_lsn,
            });
        }
        let gc_cutoff = self.gc_cutoff_lsn();
        if lsn < gc_cutoff {
            return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
        }
        Ok(last_record_lsn)
    }

    /// The page `key` as of `lsn`: the newest image at or below `lsn` with the deltas above it applied,
    /// falling through to the ancestor below the branch point. A page never written reads as zeros inside the
    /// database size at `lsn`, and is `PageNotFound` outside it.
    pub fn get_page(&self, key: Key, lsn: Lsn) -> Result<Bytes> {
        let last_record_lsn = self.check_read_lsn(lsn)?;
        if let Some(page) = self.cache.lookup(self.id, key, lsn) {
            return Ok(page);
        }
        let mut stats = ReadStats::default();
        let result = self.get_uncached(key, lsn, last_record_lsn, &mut stats);
        self.reads_total.fetch_add(1, Ordering::Relaxed);
        self.layers_visited_total
            .fetch_add(stats.layers_visited, Ordering::Relaxed);
        result
    }

    /// Like [`Timeline::get_page`] but never uses the cache, and reports the layers visited.
    pub fn get_page_uncached(&self, key: Key, lsn: Lsn) -> Result<(Bytes, ReadStats)> {
        let last_record_lsn = self.check_read_lsn(lsn)?;
        let mut stats = ReadStats::default();
        let page = self.get_uncached(key, lsn, last_record_lsn, &mut stats)?;
        Ok((page, stats))
    }

    fn get_uncached(&self, key: Key, lsn: Lsn, last_record_lsn: Lsn, stats: &mut ReadStats) -> Result<Bytes> {
        match self.reconstruct(key, lsn, stats) {
            Ok(Some((version_lsn, page))) => {
                self.cache
                    .insert(self.id, key, version_lsn, lsn, last_record_lsn, page.clone());
                Ok(page)
            }
            Ok(None) if key.is_page() && key.block() < self.db_size_at_checked(lsn)? => {
                Ok(Bytes::from(vec![0u8; PAGE_SIZE_BYTES]))
            }
            Ok(None) => Err(StorageError::PageNotFound { key, lsn }),
            Err(e) => {
                // GC may have moved the cutoff past `lsn` during the read and removed a layer under it.
                let gc_cutoff = self.gc_cutoff_lsn();
                if lsn < gc_cutoff {
                    return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
                }
                Err(e)
            }
        }
    }

    /// The database size in pages at `lsn` (zero before the first record). `lsn` is checked like a page read's.
    pub fn db_size_at(&self, lsn: Lsn) -> Result<u32> {
        self.check_read_lsn(lsn)?;
        self.db_size_at_checked(lsn)
    }

    /// [`Timeline::db_size_at`] for an LSN already checked.
    fn db_size_at_checked(&self, lsn: Lsn) -> Result<u32> {
        if let Some(bytes) = self.cache.lookup(self.id, DB_SIZE_KEY, lsn) {
            return decode_db_size(&bytes);
        }
        let last_record_lsn = self.last_record_lsn();
        match self.reconstruct(DB_SIZE_KEY, lsn, &mut ReadStats::default())? {
            Some((version_lsn, bytes)) => {
                self.cache
                    .insert(self.id, DB_SIZE_KEY, version_lsn, lsn, last_record_lsn, bytes.clone());
                decode_db_size(&bytes)
            }
            None => Ok(0),
        }
    }

    /// The newest version of `key` at or below `lsn`, reconstructed, with the LSN of that version; `None` if the
    /// key has no version there.
    fn reconstruct(&self, key: Key, lsn: Lsn, stats: &mut ReadStats) -> Result<Option<(Lsn, Bytes)>> {
        let mut versions: Vec<(Lsn, Value)> = Vec::new();
        let mut timeline = self;
        let mut end = lsn.next();
        'timelines: loop {
            let state = timeline.layers.read().clone();
            for layer in std::iter::once(&state.open).chain(state.frozen.iter().rev()) {
                if layer.end_lsn() > layer.start_lsn() {
                    stats.layers_visited += 1;
                }
                if layer.search(key, end, &mut versions) == LayerSearch::Complete {
                    break 'timelines;
                }
            }
            loop {
                match state.map.search(key, end) {
                    NextLayer::Delta(delta) => {
                        stats.layers_visited += 1;
                        if delta.search(key, None, end, &mut versions)? == LayerSearch::Complete {
                            break 'timelines;
                        }
                        end = delta.desc().lsn_range.start;
                    }
                    NextLayer::Image { image, delta } => {
                        if let Some(delta) = delta {
                            stats.layers_visited += 1;
                            if delta.search(key, Some(image.desc().max_lsn()), end, &mut versions)?
                                == LayerSearch::Complete
                            {
                                break 'timelines;
                            }
                        }
                        stats.layers_visited += 1;
                        // Complete, or absent: an image layer is the whole truth for its range at its LSN.
                        image.search(key, None, end, &mut versions)?;
                        break 'timelines;
                    }
                    NextLayer::None => break,
                }
            }
            match &timeline.ancestor {
                Some(ancestor) => {
                    end = end.min(timeline.start_lsn.next());
                    // After a restart the ancestor may not have been re-fed up to the branch point yet; its
                    // answer would be incomplete, so refuse rather than guess.
                    let ancestor_last = ancestor.last_record_lsn();
                    if ancestor_last < timeline.start_lsn {
                        return Err(StorageError::AncestorBehind {
                            ancestor: ancestor.id,
                            branch_lsn: timeline.start_lsn,
                            last_record_lsn: ancestor_last,
                        });
                    }
                    timeline = ancestor;
                }
                None => break,
            }
        }
        let Some(&(version_lsn, _)) = versions.first() else {
            return Ok(None);
        };
        let base = match versions.last() {
            Some((_, Value::Image(image))) => {
                let image = image.clone();
                versions.pop();
                Some(image)
            }
            _ => None,
        };
        let deltas: Vec<Value> = versions.into_iter().map(|(_, v)| v).collect();
        Ok(Some((version_lsn, value::reconstruct(base.as_ref(), &deltas))))
    }

    /// Every key in `range` with a version at or below `lsn`, here or in the ancestors, sorted.
    fn keys_at(&self, range: &Range<Key>, lsn: Lsn) -> Result<Vec<Key>> {
        let mut keys = Vec::new();
        let mut timeline = self;
        let mut end = lsn.next();
        loop {
            let state = timeline.layers.read().clone();
            for layer in std::iter::once(&state.open).chain(state.frozen.iter()) {
                layer.keys(range, end, &mut keys);
            }
            for layer in state.map.iter() {
                let desc = layer.desc();
                let overlaps = desc.key_range.start < range.end && range.start < desc.key_range.end;
                if overlaps && desc.lsn_range.start < end {
                    layer.keys(range, end, &mut keys)?;
                }
            }
            match &timeline.ancestor {
                Some(ancestor) => {
                    end = end.min(timeline.start_lsn.next());
                    timeline = ancestor;
                }
                None => break,
            }
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    // ---------------------------------------------------------------- point in time

    /// The end LSN of the newest commit at or before `timestamp_us`, looking into the ancestors below the branch
    /// point when this timeline has no commit that old.
    pub fn lsn_for_timestamp(&self, timestamp_us: u64) -> Result<TimestampLsn> {
        let mut timeline = self;
        let mut lsn_max = Lsn::MAX;
        loop {
            if let Some(lsn) = timeline.timestamps.lookup(timestamp_us, lsn_max)? {
                return Ok(TimestampLsn {
                    timeline_id: timeline.id,
                    lsn,
                });
            }
            match &timeline.ancestor {
                Some(ancestor) => {
                    lsn_max = timeline.start_lsn;
                    timeline = ancestor;
                }
                None => {
                    let earliest_us = timeline.timestamps.first_timestamp()?;
                    return Err(StorageError::TimestampBeforeHistory {
                        timestamp_us,
                        earliest_us,
                    });
                }
            }
        }
    }

    // ---------------------------------------------------------------- branch points

    /// Registers a child branching at `lsn`. Fails if `lsn` is below the GC cutoff; from here on GC keeps
    /// `lsn` readable.
    pub(crate) fn add_branch_point(&self, child: TimelineId, lsn: Lsn) -> Result<()> {
        let mut points = self.branch_points.lock();
        let gc_cutoff = self.gc_cutoff_lsn();
        if lsn < gc_cutoff {
            return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
        }
        points.children.insert(child, lsn);
        Ok(())
    }

    /// Registers a child found on disk at load, whose branch point was checked when it was created.
    pub(crate) fn restore_branch_point(&self, child: TimelineId, lsn: Lsn) {
        self.branch_points.lock().children.insert(child, lsn);
    }

    pub(crate) fn remove_branch_point(&self, child: TimelineId) {
        self.branch_points.lock().children.remove(&child);
    }

    /// The number of child timelines.
    pub fn child_count(&self) -> usize {
        self.branch_points.lock().children.len()
    }

    /// Keeps `lsn` readable on this timeline until `until_us` (µs since the epoch): GC's cutoff does not pass
    /// it while the lease lasts. Fails if `lsn` is already below the cutoff or ahead of the last record.
    /// Leases live in memory: after a restart a holder renews its lease (as it must before expiry anyway).
    pub fn lease_lsn(&self, lsn: Lsn, until_us: u64) -> Result<()> {
        if lsn < self.start_lsn {
            return Err(StorageError::LsnBeforeStart {
                timeline: self.id,
                lsn,
                start_lsn: self.start_lsn,
            });
        }
        let mut points = self.branch_points.lock();
        let gc_cutoff = self.gc_cutoff_lsn();
        if lsn < gc_cutoff {
            return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
        }
        let last_record_lsn = self.last_record_lsn();
        if lsn > last_record_lsn {
            return Err(StorageError::LsnAhead { lsn, last_record_lsn });
        }
        let until = points.leases.entry(lsn).or_insert(until_us);
        *until = (*until).max(until_us);
        Ok(())
    }

    // ---------------------------------------------------------------- flush

    /// Freezes the open layer and flushes every frozen layer: after it returns, everything ingested before the
    /// call is durable in layer files and `disk_consistent_lsn` covers it.
    pub fn checkpoint(&self) -> Result<()> {
        self.freeze_open_layer();
        self.flush_frozen_layers()
    }

    /// Writes the frozen layers, oldest first, as L0 layer files, advancing `disk_consistent_lsn` after each.
    pub fn flush_frozen_layers(&self) -> Result<()> {
        let _ops = self.ops.lock();
        self.check_writable()?;
        loop {
            let Some(frozen) = self.layers.read().frozen.first().cloned() else {
                return Ok(());
            };
            let result = self.flush_one(&frozen);
            self.poison_on_error(result)?;
        }
    }

    fn flush_one(&self, frozen: &Arc<InMemoryLayer>) -> Result<()> {
        let end_lsn = frozen.end_lsn();
        let (entries, key_range) = frozen.snapshot();
        create_dir_durable(&self.dir, self.conf.durability)?;
        let new_layer = match key_range {
            Some(key_range) => {
                let desc = LayerDesc {
                    kind: LayerKind::L0,
                    key_range,
                    lsn_range: frozen.start_lsn().next()..end_lsn.next(),
                    size_bytes: 0,
                };
                let mut writer = LayerWriter::new(&self.dir, desc, self.conf.durability)?;
                for (key, lsn, value) in &entries {
                    writer.put(*key, *lsn, value)?;
                }
                Some(self.adopt(writer.finish()?))
            }
            None => None,
        };
        let timestamp_count = self.timestamps.persist_up_to(end_lsn)?;
        let current = self.layers.read().clone();
        let layers: Vec<Arc<LayerFile>> = current.map.iter().cloned().chain(new_layer).collect();
        self.store_metadata(end_lsn, self.gc_cutoff_lsn(), timestamp_count, &layers)?;
        let mut guard = self.layers.write();
        let mut state = (**guard).clone();
        assert!(
            Arc::ptr_eq(&state.frozen[0], frozen),
            "the flushed layer must still be the oldest frozen one"
        );
        state.frozen.remove(0);
        state.map = LayerMap::new(layers);
        *guard = Arc::new(state);
        self.disk_consistent_lsn.store(end_lsn.0, Ordering::Release);
        Ok(())
    }

    fn store_metadata(
        &self,
        disk_consistent_lsn: Lsn,
        gc_cutoff_lsn: Lsn,
        timestamp_count: u64,
        layers: &[Arc<LayerFile>],
    ) -> Result<()> {
        create_dir_durable(&self.dir, self.conf.durability)?;
        let meta = TimelineMetadata {
            timeline_id: self.id,
            disk_consistent_lsn,
            gc_cutoff_lsn,
            timestamp_count,
            layers: layers.iter().map(|l| l.desc().clone()).collect(),
        };
        meta.store(&self.dir, self.conf.durability)
    }

    /// Persists a new layer set (same LSNs), swaps it in, then deletes the layers dropped from it.
    fn replace_layers(&self, keep: Vec<Arc<LayerFile>>, removed: &[Arc<LayerFile>], gc_cutoff_lsn: Lsn) -> Result<()> {
        self.store_metadata(
            self.disk_consistent_lsn(),
            gc_cutoff_lsn,
            self.timestamps.persisted_count(),
            &keep,
        )?;
        {
            let mut guard = self.layers.write();
            let mut state = (**guard).clone();
            state.map = LayerMap::new(keep);
            *guard = Arc::new(state);
        }
        for layer in removed {
            // Readers holding an older snapshot keep their mapping; an unopened layer they still name makes that
            // read fail (it is not fetched back), and get_page then reports the cutoff it fell below.
            layer.remove_file();
        }
        Ok(())
    }

    // ---------------------------------------------------------------- compaction

    /// Merges L0 layers into L1 layers partitioned by key once there are enough of them, then writes image
    /// layers for partitions that gathered enough deltas since their last image.
    pub fn compact(&self) -> Result<CompactionOutcome> {
        let _ops = self.ops.lock();
        self.check_writable()?;
        let result = self.compact_locked();
        self.poison_on_error(result)
    }

    fn compact_locked(&self) -> Result<CompactionOutcome> {
        let mut outcome = CompactionOutcome::default();
        let state = self.layers.read().clone();
        let mut l0: Vec<Arc<LayerFile>> = state
            .map
            .iter()
            .filter(|l| l.desc().kind == LayerKind::L0)
            .cloned()
            .collect();
        if l0.len() >= self.conf.compaction_l0_threshold {
            l0.sort_by_key(|l| l.desc().lsn_range.start);
            let l1 = self.merge_l0(&l0)?;
            outcome.l0_merged = l0.len();
            outcome.l1_written = l1.len();
            let keep: Vec<Arc<LayerFile>> = state
                .map
                .iter()
                .filter(|l| l.desc().kind != LayerKind::L0)
                .cloned()
                .chain(l1)
                .collect();
            self.replace_layers(keep, &l0, self.gc_cutoff_lsn())?;
        }
        outcome.images_written = self.create_images()?;
        Ok(outcome)
    }

    fn partition_of(&self, key: Key) -> Range<Key> {
        let size = self.conf.partition_keys;
        let start = key.0 - key.0 % size;
        Key(start)..Key(start.saturating_add(size))
    }

    /// Merges the L0 layers (sorted by LSN, contiguous) into one L1 layer per key partition, streaming: a k-way
    /// merge over the layers' sorted indexes holds one value at a time, whatever the layers' size.
    fn merge_l0(&self, l0: &[Arc<LayerFile>]) -> Result<Vec<Arc<LayerFile>>> {
        let lsn_range = l0[0].desc().lsn_range.start..l0[l0.len() - 1].desc().lsn_range.end;
        let mut cursors = l0.iter().map(|layer| layer.cursor()).collect::<Result<Vec<_>>>()?;
        let mut heap: BinaryHeap<Reverse<(Key, Lsn, usize)>> = BinaryHeap::with_capacity(cursors.len());
        for (i, cursor) in cursors.iter().enumerate() {
            if let Some((key, lsn)) = cursor.peek() {
                heap.push(Reverse((key, lsn, i)));
            }
        }
        let mut written = Vec::new();
        let mut writer: Option<LayerWriter> = None;
        while let Some(Reverse((key, _, i))) = heap.pop() {
            let (key_read, lsn, value) = cursors[i].take()?;
            assert_eq!(key_read, key, "cursor moved under the merge");
            if let Some((next_key, next_lsn)) = cursors[i].peek() {
                heap.push(Reverse((next_key, next_lsn, i)));
            }
            let partition = self.partition_of(key);
            if writer.as_ref().is_some_and(|w| w.desc_key_range() != &partition) {
                written.push(self.adopt(writer.take().expect("checked above").finish()?));
            }
            if writer.is_none() {
                let desc = LayerDesc {
                    kind: LayerKind::L1,
                    key_range: partition,
                    lsn_range: lsn_range.clone(),
                    size_bytes: 0,
                };
                writer = Some(LayerWriter::new(&self.dir, desc, self.conf.durability)?);
            }
            writer.as_mut().expect("created above").put(key, lsn, &value)?;
        }
        if let Some(writer) = writer {
            written.push(self.adopt(writer.finish()?));
        }
        Ok(written)
    }

    /// Writes an image layer at `disk_consistent_lsn` for every partition with at least
    /// `image_creation_threshold` L1 layers above its newest image.
    fn create_images(&self) -> Result<usize> {
        let state = self.layers.read().clone();
        let image_lsn = self.disk_consistent_lsn();
        let mut deltas_above_image: BTreeMap<Key, (Range<Key>, usize)> = BTreeMap::new();
        for layer in state.map.iter().filter(|l| l.desc().kind == LayerKind::L1) {
            let partition = layer.desc().key_range.clone();
            let last_image = state
                .map
                .iter()
                .filter(|i| i.desc().is_image() && i.desc().key_range == partition)
                .map(|i| i.desc().max_lsn())
                .max();
            if last_image.is_none_or(|image| layer.desc().lsn_range.start > image) {
                deltas_above_image.entry(partition.start).or_insert((partition, 0)).1 += 1;
            }
        }
        let mut images = Vec::new();
        for (partition, count) in deltas_above_image.into_values() {
            if count < self.conf.image_creation_threshold {
                continue;
            }
            let desc = LayerDesc {
                kind: LayerKind::Image,
                key_range: partition.clone(),
                lsn_range: image_lsn..image_lsn.next(),
                size_bytes: 0,
            };
            if state.map.iter().any(|l| l.desc().file_name() == desc.file_name()) {
                continue;
            }
            let mut writer = LayerWriter::new(&self.dir, desc, self.conf.durability)?;
            for key in self.keys_at(&partition, image_lsn)? {
                if let Some((_, page)) = self.reconstruct(key, image_lsn, &mut ReadStats::default())? {
                    writer.put(key, image_lsn, &Value::Image(page))?;
                }
            }
            images.push(self.adopt(writer.finish()?));
        }
        if images.is_empty() {
            return Ok(0);
        }
        let count = images.len();
        let keep: Vec<Arc<LayerFile>> = state.map.iter().cloned().chain(images).collect();
        self.replace_layers(keep, &[], self.gc_cutoff_lsn())?;
        Ok(count)
    }

    // ---------------------------------------------------------------- gc

    /// Moves the GC cutoff to the older of `last_record_lsn - gc_horizon_bytes` and the LSN at
    /// `now_us - pitr_interval`, then removes the layers no read at or above the cutoff, and no read at a
    /// child's branch point, can need.
    pub fn gc(&self, now_us: u64) -> Result<GcOutcome> {
        let _ops = self.ops.lock();
        self.check_writable()?;
        let result = self.gc_locked(now_us);
        self.poison_on_error(result)
    }

    fn gc_locked(&self, now_us: u64) -> Result<GcOutcome> {
        let horizon_cutoff = self.last_record_lsn().saturating_sub(self.conf.gc_horizon_bytes);
        let pitr_cutoff = match now_us.checked_sub(self.conf.pitr_interval_ms.saturating_mul(1000)) {
            Some(ts) => self.timestamps.lookup(ts, Lsn::MAX)?.unwrap_or(self.start_lsn),
            None => self.start_lsn,
        };
        let computed = horizon_cutoff.min(pitr_cutoff).max(self.start_lsn);
        let old_cutoff = self.gc_cutoff_lsn();
        let (cutoff, retain) = {
            let mut points = self.branch_points.lock();
            points.leases.retain(|_, until_us| *until_us > now_us);
            let leased = points.leases.keys().next().copied().unwrap_or(Lsn::MAX);
            let cutoff = old_cutoff.max(computed.min(leased));
            self.gc_cutoff_lsn.store(cutoff.0, Ordering::Release);
            (cutoff, points.children.values().copied().collect::<Vec<Lsn>>())
        };
        let state = self.layers.read().clone();
        let all: Vec<Arc<LayerFile>> = state.map.iter().cloned().collect();
        let (removed, keep): (Vec<_>, Vec<_>) = all
            .iter()
            .cloned()
            .partition(|layer| removable(layer.desc(), &all, cutoff, &retain));
        if !removed.is_empty() || cutoff != old_cutoff {
            self.replace_layers(keep, &removed, cutoff)?;
        }
        Ok(GcOutcome {
            gc_cutoff_lsn: cutoff,
            layers_removed: removed.len(),
        })
    }

    // ---------------------------------------------------------------- info

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
        }
    }

    /// The on-disk layers' descriptors.
    pub fn layer_descs(&self) -> Vec<LayerDesc> {
        self.layers.read().map.iter().map(|l| l.desc().clone()).collect()
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

fn decode_db_size(bytes: &Bytes) -> Result<u32> {
    let array: [u8; 4] = bytes[..]
        .try_into()
        .map_err(|_| corrupt("<db size value>", 0, "not 4 bytes"))?;
    Ok(u32::from_le_bytes(array))
}

/// Whether GC may drop `layer`: all of it is at or below the cutoff, and newer images at or below the cutoff
/// cover its whole key range with no branch point between the layer and the image.
fn removable(layer: &LayerDesc, all: &[Arc<LayerFile>], cutoff: Lsn, retain: &[Lsn]) -> bool {
    if layer.max_lsn() > cutoff {
        return false;
    }
    let mut covering: Vec<Range<Key>> = all
        .iter()
        .map(|l| l.desc())
        .filter(|image| {
            image.is_image()
                && image != &layer
                && image.max_lsn() <= cutoff
                && (image.max_lsn() > layer.max_lsn() || (!layer.is_image() && image.max_lsn() == layer.max_lsn()))
                && !retain
                    .iter()
                    .any(|&r| layer.lsn_range.start <= r && r < image.max_lsn())
        })
        .map(|image| image.key_range.clone())
        .collect();
    covering.sort_by_key(|r| r.start);
    let mut covered_to = layer.key_range.start;
    for range in covering {
        if range.start > covered_to {
            break;
        }
        covered_to = covered_to.max(range.end);
        if covered_to >= layer.key_range.end {
            return true;
        }
    }
    false
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
