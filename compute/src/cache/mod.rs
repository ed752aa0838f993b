//! The compute host's page caches (DESIGN §5, "Reads at scale"): one memory budget in bytes shared by every
//! branch of the host (`memory`), then a local file cache on the host's disk (`file`), both holding
//! [`Fact`]s: pages keyed by timeline, block and the LSN range they are known at (`facts` argues why such an
//! entry is never wrong, across restarts, branches, restores and time travel).
//!
//! A store reads through a [`TimelineCache`], its view of the [`HostCache`] for one timeline: the writer's
//! view (it also records the writer's knowledge, which lets facts serve later reads) or a reader's (time travel,
//! read-only). A read of a timeline looks for facts of that timeline and then, where the timeline reads what it
//! held at its start, of its ancestor at the branch point, and so on up ([`facts::Link`]): so a new or restored
//! branch starts with its parent's cached pages that are valid at its branch point ("warm branches"), without
//! copying anything. The ancestry of a timeline is what the pageserver said when a store of it started.
//!
//! Lock order: a store's state → the host cache's lock → the file cache's lock. No I/O under the host cache's
//! lock: pages evicted from memory are written to the file after it is released.

pub(crate) mod facts;
pub(crate) mod file;
pub(crate) mod memory;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use cambium_types::{Lsn, TimelineId, PAGE_SIZE_BYTES};
use parking_lot::Mutex;

use facts::{same_as_start, Link, Writer};
pub use facts::{Ancestry, Fact};
pub use file::{FileCache, FileCacheConfig, FileCacheError, FILE_CACHE_BYTES_DEFAULT};
use memory::MemoryTier;
pub use memory::ENTRY_BYTES;

use crate::metrics::METRICS;

/// Timelines along a read's path through branch points, at most (the timeline and 7 ancestors).
pub const LINKS_MAX: usize = 8;
/// Timelines whose ancestry is remembered; the map is cleared when full (it is refilled as stores start).
pub const ANCESTRY_MAX: usize = 65_536;
/// The smallest default memory budget (64 MiB).
pub const MEMORY_BUDGET_BYTES_MIN: usize = 64 << 20;
/// The largest default memory budget (8 GiB).
pub const MEMORY_BUDGET_BYTES_MAX_DEFAULT: usize = 8 << 30;

/// The default memory budget: an eighth of the machine's memory, between [`MEMORY_BUDGET_BYTES_MIN`] and
/// [`MEMORY_BUDGET_BYTES_MAX_DEFAULT`] (256 MiB when the machine's memory is unknown).
pub fn memory_budget_bytes_default() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    });
    total.map_or(256 << 20, |bytes| {
        (bytes / 8).clamp(MEMORY_BUDGET_BYTES_MIN, MEMORY_BUDGET_BYTES_MAX_DEFAULT)
    })
}

/// How a page a store read enters the host cache (scan resistance, as PostgreSQL's ring buffers for bulk reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A read of its own (a point read): into memory, the coldest page going to the file cache.
    Memory,
    /// A read in a scan: into memory while the budget has room, else straight into the file cache (from the
    /// file cache: left there), so a scan larger than the budget neither flushes memory nor pays an eviction
    /// per page.
    Scan,
}

/// Where a cached page is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// In memory.
    Memory,
    /// In the local file cache.
    File,
}

/// How a host caches pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCacheConfig {
    /// Bytes of pages (and their bookkeeping) kept in memory for every branch of the host together.
    pub memory_budget_bytes: usize,
    /// The local file cache, if any.
    pub file: Option<FileCacheConfig>,
}

struct Inner {
    memory: MemoryTier,
    writers: HashMap<TimelineId, Writer>,
    ancestry: HashMap<TimelineId, Ancestry>,
}

impl Inner {
    /// The read's path: `timeline` at `lsn`, then each ancestor at its branch point while the block reads what
    /// it held at the start of the timeline below.
    fn links(&self, timeline: TimelineId, block: u32, lsn: Lsn) -> Vec<Link> {
        let mut links = Vec::with_capacity(2);
        let (mut timeline, mut lsn) = (timeline, lsn);
        loop {
            let extension = self.writers.get(&timeline).and_then(|w| w.extension(block));
            links.push(Link {
                timeline,
                lsn,
                extension,
            });
            let Some(ancestry) = self.ancestry.get(&timeline) else {
                break;
            };
            match ancestry.parent {
                Some((parent, branch_lsn))
                    if links.len() < LINKS_MAX && same_as_start(lsn, ancestry.start_lsn, extension) =>
                {
                    (timeline, lsn) = (parent, branch_lsn);
                }
                _ => break,
            }
        }
        links
    }

    /// Writes down, in each of `timeline`'s facts in memory, what its writer's extension proves (before that
    /// knowledge changes or goes).
    fn settle(&mut self, timeline: TimelineId, blocks: &[u32]) {
        let Some(writer) = self.writers.get(&timeline) else {
            return;
        };
        for &block in blocks {
            let extension = writer.extension(block);
            self.memory
                .update_block(timeline, block, |fact| fact.extended(extension));
        }
    }

    fn settle_all(&mut self, timeline: TimelineId) {
        let blocks = self.memory.blocks_of(timeline);
        self.settle(timeline, &blocks);
    }
}

/// The host's caches; see the module doc. Shared (`Arc`) by every store of a host.
pub struct HostCache {
    inner: Mutex<Inner>,
    file: Option<FileCache>,
    memory_budget_bytes: usize,
    next_generation: AtomicU64,
}

impl std::fmt::Debug for HostCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostCache")
            .field("memory_budget_bytes", &self.memory_budget_bytes)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl HostCache {
    /// A host cache with `config`'s budget, opening its file cache (keeping a previous run's entries).
    pub fn new(config: &HostCacheConfig) -> Result<Arc<HostCache>, FileCacheError> {
        let file = config.file.as_ref().map(FileCache::open).transpose()?;
        METRICS.set_cache_memory_budget_bytes(0, config.memory_budget_bytes);
        Ok(Arc::new(HostCache {
            inner: Mutex::new(Inner {
                memory: MemoryTier::new(config.memory_budget_bytes),
                writers: HashMap::new(),
                ancestry: HashMap::new(),
            }),
            file,
            memory_budget_bytes: config.memory_budget_bytes,
            next_generation: AtomicU64::new(1),
        }))
    }

    /// A cache of `budget_bytes` in memory only (what a store started alone gets).
    pub fn in_memory(budget_bytes: usize) -> Arc<HostCache> {
        let config = HostCacheConfig {
            memory_budget_bytes: budget_bytes,
            file: None,
        };
        HostCache::new(&config).expect("a cache without a file cannot fail to open")
    }

    /// The memory budget.
    pub fn memory_budget_bytes(&self) -> usize {
        self.memory_budget_bytes
    }

    /// Bytes held in memory, as counted against the budget (never above it).
    pub fn memory_used_bytes(&self) -> usize {
        self.inner.lock().memory.used_bytes()
    }

    /// Bytes of pages in the file cache (0 without one).
    pub fn file_used_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, FileCache::used_bytes)
    }

    /// Remembers where `timeline` comes from (as the pageserver said). A branch whose branch point is not its
    /// start LSN contradicts the storage's rule and is remembered without its parent.
    pub fn record_ancestry(&self, timeline: TimelineId, ancestry: Ancestry) {
        let ancestry = match ancestry.parent {
            Some((_, branch_lsn)) if branch_lsn != ancestry.start_lsn => {
                tracing::warn!(%timeline, ?ancestry, "a branch not starting at its branch point; not warmed");
                Ancestry {
                    parent: None,
                    ..ancestry
                }
            }
            _ => ancestry,
        };
        let mut inner = self.inner.lock();
        if inner.ancestry.len() >= ANCESTRY_MAX && !inner.ancestry.contains_key(&timeline) {
            inner.ancestry.clear();
        }
        inner.ancestry.insert(timeline, ancestry);
    }

    /// The view of the writer of `timeline`, elected at `epoch_start` where the database has `size_pages`
    /// pages. A previous writer's knowledge is written down into its facts and replaced.
    pub fn writer_view(self: &Arc<Self>, timeline: TimelineId, epoch_start: Lsn, size_pages: u32) -> TimelineCache {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner.lock();
        inner.settle_all(timeline);
        inner
            .writers
            .insert(timeline, Writer::new(generation, epoch_start, size_pages));
        TimelineCache {
            cache: Arc::clone(self),
            timeline,
            generation: Some(generation),
        }
    }

    /// The view of a reader of `timeline` (time travel: no writer's knowledge of its own).
    pub fn reader_view(self: &Arc<Self>, timeline: TimelineId) -> TimelineCache {
        TimelineCache {
            cache: Arc::clone(self),
            timeline,
            generation: None,
        }
    }

    /// A page of the file cache that serves `block` of `timeline` at `lsn` (as [`TimelineCache::get`]), then
    /// kept in memory as `admission` says. Reads the file: call it without a store's lock.
    pub fn get_from_file(&self, timeline: TimelineId, block: u32, lsn: Lsn, admission: Admission) -> Option<Bytes> {
        let (fact, page) = self.read_from_file(timeline, block, lsn)?;
        self.admit_from_file(fact, &page, admission);
        Some(page)
    }

    /// A page of the file cache that serves `block` of `timeline` at `lsn`, with its fact, read and checked but
    /// not counted nor kept in memory (a prefetch from the file: its reader calls
    /// [`HostCache::admit_from_file`]). Reads the file: call it without a store's lock.
    pub fn read_from_file(&self, timeline: TimelineId, block: u32, lsn: Lsn) -> Option<(Fact, Bytes)> {
        let file = self.file.as_ref()?;
        let links = self.inner.lock().links(timeline, block, lsn);
        file.lookup(&links, block)
    }

    /// A read was served `page` (of `fact`) from the file cache: counted, and kept in memory as `admission`
    /// says.
    pub fn admit_from_file(&self, fact: Fact, page: &Bytes, admission: Admission) {
        METRICS.reads_file_total.fetch_add(1, Ordering::Relaxed);
        match admission {
            // The page is a buffer of its own: no copy.
            Admission::Memory => self.insert_owned(fact, page.clone()),
            // With room nothing is evicted for space, but a block that has `VERSIONS_MAX` versions in memory
            // already gives up its oldest (dropped, as for the other scan admissions, `insert_read` and
            // `insert_prefetched`).
            Admission::Scan if self.inner.lock().memory.has_room() => self.insert_owned(fact, page.clone()),
            Admission::Scan => {}
        }
    }

    /// Which tier can serve `block` of `timeline` at `lsn`, if any (no read, no mark).
    pub fn locate(&self, timeline: TimelineId, block: u32, lsn: Lsn) -> Option<Tier> {
        let links = {
            let inner = self.inner.lock();
            let links = inner.links(timeline, block, lsn);
            let in_memory = links
                .iter()
                .any(|link| inner.memory.contains(link.timeline, block, link.lsn, link.extension));
            if in_memory {
                return Some(Tier::Memory);
            }
            links
        };
        self.file
            .as_ref()
            .is_some_and(|file| file.contains(&links, block))
            .then_some(Tier::File)
    }

    /// Whether memory or the file cache can serve `block` of `timeline` at `lsn` (no read, no mark).
    pub fn contains(&self, timeline: TimelineId, block: u32, lsn: Lsn) -> bool {
        self.locate(timeline, block, lsn).is_some()
    }

    /// Keeps a page of `timeline` read from the pageserver at `lsn`: in the file cache (which so holds what
    /// memory holds too, and keeps it across a restart; a later eviction from memory then writes nothing), and
    /// in memory as `admission` says.
    pub fn insert_read(&self, timeline: TimelineId, block: u32, page: &Bytes, lsn: Lsn, admission: Admission) {
        let fact = Fact::at(timeline, block, lsn);
        let Some(file) = &self.file else {
            return self.insert(fact, page);
        };
        file.insert(fact, page);
        match admission {
            Admission::Memory => self.insert(fact, page),
            Admission::Scan if self.inner.lock().memory.has_room() => self.insert(fact, page),
            Admission::Scan => {}
        }
    }

    /// Whether the host has a file cache (pages read from the pageserver are kept there).
    pub fn has_file(&self) -> bool {
        self.file.is_some()
    }

    /// Keeps pages of `timeline` prefetched from the pageserver, each `(block, lsn it was read at, page)`, in
    /// the file cache only, in one batch ([`FileCache::insert_many`]): what [`HostCache::insert_read`] does
    /// for the file, done by the prefetch stream's receiver so the reader does not pay for it. Their reader
    /// then calls [`HostCache::insert_prefetched`].
    pub fn file_prefetched(&self, timeline: TimelineId, pages: &[(u32, Lsn, Bytes)]) {
        let Some(file) = &self.file else { return };
        let entries: Vec<(Fact, &[u8])> = pages
            .iter()
            .map(|(block, lsn, page)| (Fact::at(timeline, *block, *lsn), &page[..]))
            .collect();
        file.insert_many(&entries);
    }

    /// Keeps a prefetched page a reader took (a scan's read): as [`HostCache::insert_read`] with
    /// [`Admission::Scan`], except that the file cache got it already ([`HostCache::file_prefetched`]).
    pub fn insert_prefetched(&self, timeline: TimelineId, block: u32, page: &Bytes, lsn: Lsn) {
        let fact = Fact::at(timeline, block, lsn);
        if self.file.is_none() || self.inner.lock().memory.has_room() {
            self.insert(fact, page);
        }
    }

    /// Adds `fact` to memory; what that evicts goes to the file cache (after the lock is released).
    fn insert(&self, fact: Fact, page: &Bytes) {
        assert!(page.len() == PAGE_SIZE_BYTES, "a page of {} bytes", page.len());
        // A copy: a page may be a slice of a large receive buffer, which the budget does not count.
        self.insert_owned(fact, Bytes::copy_from_slice(page));
    }

    /// [`HostCache::insert`] of a page that is a buffer of its own (counted as it is by the budget).
    fn insert_owned(&self, fact: Fact, page: Bytes) {
        assert!(page.len() == PAGE_SIZE_BYTES, "a page of {} bytes", page.len());
        let evicted = {
            let mut inner = self.inner.lock();
            let before = inner.memory.used_bytes();
            let evicted = inner.memory.insert(fact, page);
            METRICS.set_cache_memory_bytes(before, inner.memory.used_bytes());
            // What a writer's knowledge proves goes with the page: it may outlive the writer.
            evicted
                .into_iter()
                .map(|(fact, page)| {
                    let extension = inner.writers.get(&fact.timeline).and_then(|w| w.extension(fact.block));
                    (fact.extended(extension), page)
                })
                .collect::<Vec<_>>()
        };
        METRICS
            .cache_evictions_total
            .fetch_add(evicted.len() as u64, Ordering::Relaxed);
        if let Some(file) = &self.file {
            for (fact, page) in evicted {
                file.insert(fact, &page);
            }
        }
    }
}

impl Drop for HostCache {
    fn drop(&mut self) {
        let used = self.inner.get_mut().memory.used_bytes();
        METRICS.set_cache_memory_bytes(used, 0);
        METRICS.set_cache_memory_budget_bytes(self.memory_budget_bytes, 0);
    }
}

/// One store's view of the host cache for its timeline; see the module doc. The methods `latest`, `insert`,
/// `remove` and `truncate` are the commit path's (`remote_store::commit`); the others the read path's.
pub struct TimelineCache {
    cache: Arc<HostCache>,
    timeline: TimelineId,
    /// The writer's generation; `None` for a reader.
    generation: Option<u64>,
}

impl std::fmt::Debug for TimelineCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimelineCache")
            .field("timeline", &self.timeline)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl TimelineCache {
    /// The writer's record if this view is the timeline's current writer.
    fn writer<'a>(&self, inner: &'a mut Inner) -> Option<&'a mut Writer> {
        let generation = self.generation?;
        inner
            .writers
            .get_mut(&self.timeline)
            .filter(|writer| writer.generation() == generation)
    }

    /// The host cache this view reads.
    pub fn host(&self) -> &Arc<HostCache> {
        &self.cache
    }

    /// The writer's read LSN is `read_lsn` (its latest commit). Call it under the store's state lock before
    /// reading, so commits' pending writes get their LSN.
    pub fn observe(&self, read_lsn: Lsn) {
        let mut inner = self.cache.inner.lock();
        if let Some(writer) = self.writer(&mut inner) {
            writer.observe(read_lsn);
        }
    }

    /// A page of memory that serves `block` at `lsn` on this timeline (or an ancestor at a branch point).
    pub fn get(&self, block: u32, lsn: Lsn) -> Option<Bytes> {
        let mut inner = self.cache.inner.lock();
        let links = inner.links(self.timeline, block, lsn);
        let page = links
            .iter()
            .find_map(|link| inner.memory.lookup(link.timeline, block, link.lsn, link.extension));
        if page.is_some() {
            METRICS.reads_memory_total.fetch_add(1, Ordering::Relaxed);
        }
        page
    }

    /// The commit path: the current version of `block` at the writer's latest acknowledged commit, which ends
    /// at `read_lsn`, if memory holds it and every write is known (a byte-range delta is made against it, so it
    /// must be exactly that version). The writer observes `read_lsn` first: a version looked up at an older
    /// LSN could be one that an acknowledged commit has replaced since (commits overlap, so the last read may
    /// be older than the last acknowledgement), and a delta against it would corrupt the page.
    pub fn latest(&self, block: u32, read_lsn: Lsn) -> Option<Bytes> {
        let mut inner = self.cache.inner.lock();
        let writer = self.writer(&mut inner)?;
        writer.observe(read_lsn);
        if !writer.is_settled() {
            return None;
        }
        assert!(
            writer.through() == read_lsn,
            "the writer observed {read_lsn} but is through {}",
            writer.through()
        );
        let (through, extension) = (writer.through(), writer.extension(block));
        inner.memory.lookup(self.timeline, block, through, extension)
    }

    /// The commit path: `page` is `block`'s version written by the commit ending at `valid_from`.
    pub fn insert(&self, block: u32, page: Bytes, valid_from: Lsn) {
        {
            let mut inner = self.cache.inner.lock();
            if let Some(writer) = self.writer(&mut inner) {
                writer.wrote_at(block, valid_from);
            }
        }
        self.cache.insert(Fact::at(self.timeline, block, valid_from), &page);
    }

    /// The commit path: a commit (whose LSN this view learns at its next [`TimelineCache::observe`]) wrote
    /// `block`.
    pub fn remove(&self, block: u32) {
        let mut inner = self.cache.inner.lock();
        if self.writer(&mut inner).is_some() {
            inner.settle(self.timeline, &[block]);
            if let Some(writer) = self.writer(&mut inner) {
                writer.wrote(block);
            }
        }
    }

    /// The commit path: a commit set the database size to `db_size_pages`.
    pub fn truncate(&self, db_size_pages: u32) {
        let mut inner = self.cache.inner.lock();
        let Some(writer) = self.writer(&mut inner) else {
            return;
        };
        if db_size_pages < writer.size_pages() {
            // A shrink raises the floor for every block: first write down what the floor proved.
            inner.settle_all(self.timeline);
        }
        if let Some(writer) = self.writer(&mut inner) {
            writer.resized(db_size_pages);
        }
    }
}

impl Drop for TimelineCache {
    fn drop(&mut self) {
        let mut inner = self.cache.inner.lock();
        if self.writer(&mut inner).is_some() {
            inner.settle_all(self.timeline);
            inner.writers.remove(&self.timeline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(byte: u8) -> Bytes {
        Bytes::from(vec![byte; PAGE_SIZE_BYTES])
    }

    /// A scan's page taken from the file cache (a prefetch) for a block that has every version it may keep in
    /// memory already pushes the oldest out, as any insert does; it panicked ("an insert with room evicted 1
    /// pages"), failing the read with a disk I/O error (tests/partitions_cluster.rs, a branch read after a
    /// takeover).
    #[test]
    fn a_scan_admission_from_the_file_of_a_block_with_every_version_evicts_its_oldest() {
        let cache = HostCache::in_memory(16 * ENTRY_BYTES);
        let timeline = TimelineId(1);
        for version in 1..=memory::VERSIONS_MAX as u8 {
            cache.insert(Fact::at(timeline, 2, Lsn(100 * u64::from(version))), &page(version));
        }
        cache.admit_from_file(Fact::at(timeline, 2, Lsn(1_000)), &page(9), Admission::Scan);
        assert_eq!(cache.inner.lock().memory.entry_count(), memory::VERSIONS_MAX);
    }

    /// Which of the test's pages `page` is (its fill byte), so failures print a byte, not 8 KiB.
    fn which(page: Option<Bytes>) -> Option<u8> {
        page.map(|page| page[0])
    }

    /// Two commits of one block acknowledged back to back with no read between them (commits overlap: a
    /// writer builds on pages of a commit in flight, which are not read through the cache): the version the
    /// commit path makes its next delta against is the second one, never the first (a delta against the
    /// first, applied by the pageserver to the second, would corrupt the page).
    #[test]
    fn the_latest_version_follows_every_acknowledged_commit_without_a_read() {
        let cache = HostCache::in_memory(16 * ENTRY_BYTES);
        let timeline = TimelineId(1);
        let view = cache.writer_view(timeline, Lsn(100), 4);
        // The first commit, acknowledged at 200 and read since.
        view.remove(2);
        view.insert(2, page(1), Lsn(200));
        view.observe(Lsn(200));
        assert_eq!(which(view.latest(2, Lsn(200))), Some(1));
        // The second, acknowledged at 300; nothing read since.
        view.remove(2);
        view.insert(2, page(2), Lsn(300));
        assert_eq!(
            which(view.latest(2, Lsn(300))),
            Some(2),
            "the version of the last acknowledged commit"
        );
        // A block only the first commit wrote is still that version at 300.
        view.remove(3);
        view.insert(3, page(3), Lsn(400));
        view.observe(Lsn(400));
        assert_eq!(which(view.latest(2, Lsn(400))), Some(2));
        // A write whose version the cache was not given (a commit larger than it keeps) leaves no version.
        view.remove(2);
        assert_eq!(which(view.latest(2, Lsn(500))), None, "not cached");
        assert_eq!(which(view.latest(3, Lsn(500))), Some(3));
    }
}
