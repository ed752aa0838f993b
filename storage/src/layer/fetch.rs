//! Layers on demand: a [`LayerFetcher`] given to [`crate::Tenant::open_with_fetcher`] delivers a layer file the
//! metadata names but the local disk lacks (after a rebuild from remote storage, which downloads only the
//! small files; or a layer lost locally).
//!
//! The engine stays ignorant of where the bytes come from (it does no networking): the fetcher writes them,
//! the engine owns everything else. A layer's first use ([`crate::layer::file::LayerFile`]) finds the file
//! missing and, holding that layer's fetch lock (so concurrent readers fetch it once), asks the fetcher for
//! it at a temp name in the timeline directory (`<layer>.fetch.tmp`), then checks the size against the
//! descriptor, fsyncs it, verifies the whole file (summary, index, footer and every value's crc: a fetched
//! file is checked once, in full, as a downloaded one must be) and only then renames it into place. A fetched
//! file that fails is deleted and the read fails with `Corrupt` naming the layer, so a later read fetches
//! again. A fetch that fails is `StorageError::Fetch` naming the layer; readers that waited on it get the
//! same error instead of queueing one timeout each behind it. No layer-map lock is held while fetching.
//!
//! **Crash:** a fetch cut short leaves at most `<layer>.fetch.tmp`, removed on load like every temp file; a
//! renamed file was fsynced and verified first, so the layer name never holds bytes that were not checked.
//! The directory is not synced after the rename: losing it in a crash loses only the local copy, which is
//! fetched again.
//!
//! **Invariant:** a layer the timeline has dropped (compaction, GC) is never brought back by a fetch that was
//! in flight: the drop and the rename take the same per-layer lock, and the rename checks the drop.

use std::path::Path;

use crate::id::TimelineId;
use crate::layer::desc::LayerDesc;

/// Why a fetcher could not deliver a layer. The engine reports it as `StorageError::Fetch` naming the layer.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct FetchError {
    reason: String,
}

impl FetchError {
    /// A failure described by `reason` (lowercase, no trailing period).
    pub fn new(reason: impl Into<String>) -> FetchError {
        FetchError { reason: reason.into() }
    }

    /// What went wrong.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Delivers layer files that are missing locally. Called synchronously, from whatever thread reads a page
/// (or compacts, or collects): an implementation that waits on asynchronous work must be safe to call from
/// inside an async runtime, and must bound its wait.
pub trait LayerFetcher: Send + Sync {
    /// Writes the whole file of `layer` (of `timeline` in this fetcher's tenant) to `destination`, creating
    /// or truncating it. `destination` is a temp path in the timeline directory; the engine checks the size,
    /// fsyncs, verifies and renames it into place, and deletes it after a failure.
    fn fetch(&self, timeline: TimelineId, layer: &LayerDesc, destination: &Path) -> Result<(), FetchError>;

    /// Runs `work`, which may block as long as a fetch takes: the first open of a layer, which waits for
    /// another thread's fetch of it or runs one. Not only the fetch blocks: so does waiting for the layer's
    /// fetch lock. The default runs `work` as is; a fetcher whose callers may be async runtime threads runs it
    /// where the runtime allows blocking (tokio's `block_in_place`), so concurrent readers of a missing layer
    /// do not hold every worker of the runtime while one of them fetches.
    fn block(&self, work: &mut dyn FnMut()) {
        work();
    }
}

#[cfg(test)]
mod tests {
    //! Real fetchers over a directory (a copy of the tenant's files, standing in for remote storage): reads
    //! after the local layers are gone fetch each layer once and see the same pages; a layer absent from the
    //! source gives `Fetch`, a damaged one `Corrupt`, both naming the layer and leaving nothing behind, and a
    //! later read succeeds once the source is right; without a fetcher a missing layer still fails the load.

    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;
    use crate::{Key, Lsn, PageCache, Patch, StorageError, Tenant, TimelineConfig, Value, WalRecord, PAGE_SIZE_BYTES};

    const TIMELINE: TimelineId = TimelineId(0x51);
    const START: Lsn = Lsn(0x1000);
    const BLOCKS: u32 = 10;

    /// Copies `<source>/<timeline>/<layer file name>` to the destination.
    struct DirFetcher {
        source: PathBuf,
        fetches: AtomicU64,
        delay: Duration,
    }

    impl DirFetcher {
        fn new(source: PathBuf) -> Arc<DirFetcher> {
            Arc::new(DirFetcher {
                source,
                fetches: AtomicU64::new(0),
                delay: Duration::ZERO,
            })
        }

        fn layer_path(&self, timeline: TimelineId, name: &str) -> PathBuf {
            self.source.join(timeline.to_string()).join(name)
        }
    }

    impl LayerFetcher for DirFetcher {
        fn fetch(&self, timeline: TimelineId, layer: &LayerDesc, destination: &Path) -> Result<(), FetchError> {
            self.fetches.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            let source = self.layer_path(timeline, &layer.file_name());
            std::fs::copy(&source, destination)
                .map(|_| ())
                .map_err(|e| FetchError::new(format!("copying {}: {e}", source.display())))
        }
    }

    fn config() -> TimelineConfig {
        TimelineConfig {
            compaction_l0_threshold: 3,
            image_creation_threshold: 2,
            partition_keys: 4,
            ..TimelineConfig::default()
        }
    }

    /// Pages after each commit.
    type History = Vec<(Lsn, BTreeMap<u32, Vec<u8>>)>;

    /// A tenant in `dir` with one timeline of several flushed and compacted layers; every page after each
    /// commit.
    fn write_tenant(dir: &Path) -> History {
        let tenant = Tenant::open(dir, config(), Arc::new(PageCache::new(64))).expect("open");
        let timeline = tenant.create_timeline(TIMELINE, START).expect("create");
        let mut pages: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        let mut history = Vec::new();
        let mut lsn = START;
        for n in 0..40u64 {
            let block = (n * 7 % u64::from(BLOCKS)) as u32;
            let page = pages.entry(block).or_insert_with(|| vec![0; PAGE_SIZE_BYTES]);
            let value = if n < u64::from(BLOCKS) || n % 6 == 0 {
                page.fill(n as u8);
                Value::Image(Bytes::copy_from_slice(page))
            } else {
                let offset = (n * 131 % 8000) as usize;
                page[offset] = n as u8;
                Value::Delta(vec![Patch {
                    offset: offset as u16,
                    data: Bytes::from(vec![n as u8]),
                }])
            };
            let record = WalRecord {
                commit_ts_us: n + 1,
                db_size_pages: BLOCKS,
                entries: vec![(Key::page(block), value)],
            };
            lsn = timeline.ingest_record(lsn, &record).expect("ingest");
            history.push((lsn, pages.clone()));
            if n % 5 == 4 {
                timeline.checkpoint().expect("checkpoint");
            }
            if n % 15 == 14 {
                timeline.compact().expect("compact");
            }
        }
        timeline.checkpoint().expect("checkpoint");
        history
    }

    fn timeline_dir(tenant_dir: &Path) -> PathBuf {
        tenant_dir.join("timelines").join(TIMELINE.to_string())
    }

    fn layer_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| crate::formats::is_layer_file_name(name))
            .collect();
        names.sort();
        names
    }

    /// Writes a tenant, copies its layers to `<root>/remote/<timeline>/` and removes them locally.
    fn tenant_without_layers(root: &Path) -> (PathBuf, PathBuf, History, Vec<String>) {
        let tenant_dir = root.join("tenant");
        let history = write_tenant(&tenant_dir);
        let local = timeline_dir(&tenant_dir);
        let remote = root.join("remote");
        std::fs::create_dir_all(remote.join(TIMELINE.to_string())).expect("remote dir");
        let names = layer_files(&local);
        assert!(names.len() >= 4, "several layers: {names:?}");
        for name in &names {
            std::fs::copy(local.join(name), remote.join(TIMELINE.to_string()).join(name)).expect("copy");
            std::fs::remove_file(local.join(name)).expect("remove");
        }
        (tenant_dir, remote, history, names)
    }

    fn check_pages(timeline: &crate::Timeline, history: &History) {
        let readable = timeline.gc_cutoff_lsn();
        for (lsn, pages) in history.iter().filter(|(lsn, _)| *lsn >= readable) {
            for block in 0..BLOCKS {
                let page = timeline.get_page(Key::page(block), *lsn).expect("read");
                let expected = pages.get(&block).cloned().unwrap_or_else(|| vec![0; PAGE_SIZE_BYTES]);
                assert!(page[..] == expected[..], "block {block} at {lsn}");
            }
        }
    }

    #[test]
    fn missing_layers_are_fetched_once_on_first_use() {
        let root = tempfile::tempdir().expect("tempdir");
        let (tenant_dir, remote, history, names) = tenant_without_layers(root.path());

        // Without a fetcher, the load refuses, as it always did.
        match Tenant::open(&tenant_dir, config(), Arc::new(PageCache::new(64))) {
            Err(StorageError::Corrupt { reason, .. }) => assert!(reason.contains("missing"), "{reason}"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("a tenant missing a layer must not open without a fetcher"),
        }

        let fetcher = DirFetcher::new(remote.clone());
        let tenant = Tenant::open_with_fetcher(&tenant_dir, config(), Arc::new(PageCache::new(64)), fetcher.clone())
            .expect("open with a fetcher");
        let timeline = tenant.timeline(TIMELINE).expect("timeline");
        assert!(
            layer_files(&timeline_dir(&tenant_dir)).is_empty(),
            "nothing fetched at load"
        );
        assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 0);

        check_pages(&timeline, &history);
        let fetched = layer_files(&timeline_dir(&tenant_dir));
        assert!(!fetched.is_empty());
        assert!(fetched.iter().all(|name| names.contains(name)), "{fetched:?}");
        assert_eq!(
            fetcher.fetches.load(Ordering::SeqCst),
            fetched.len() as u64,
            "each layer fetched once"
        );
        for name in &fetched {
            let local = std::fs::read(timeline_dir(&tenant_dir).join(name)).expect("local");
            let source = std::fs::read(remote.join(TIMELINE.to_string()).join(name)).expect("source");
            assert!(local == source, "{name} fetched byte for byte");
        }
        // No temp file is left behind, and reads again (cache off) fetch nothing more.
        let files: Vec<String> = std::fs::read_dir(timeline_dir(&tenant_dir))
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            files.iter().all(|f| !f.ends_with(crate::fsio::TEMP_SUFFIX)),
            "{files:?}"
        );
        let before = fetcher.fetches.load(Ordering::SeqCst);
        let (lsn, _) = history[history.len() - 1];
        for block in 0..BLOCKS {
            timeline.get_page_uncached(Key::page(block), lsn).expect("read");
        }
        assert_eq!(fetcher.fetches.load(Ordering::SeqCst), before);

        // Compaction and image creation read the layers still missing through the same path, and a restart
        // keeps what was fetched.
        let (mut lsn, mut n) = (timeline.last_record_lsn(), 100u64);
        for _ in 0..8 {
            let record = WalRecord {
                commit_ts_us: n,
                db_size_pages: BLOCKS,
                entries: vec![(
                    Key::page((n % 3) as u32),
                    Value::Image(Bytes::from(vec![7; PAGE_SIZE_BYTES])),
                )],
            };
            lsn = timeline.ingest_record(lsn, &record).expect("ingest");
            timeline.checkpoint().expect("checkpoint");
            n += 1;
        }
        timeline.compact().expect("compact with missing layers");
        drop(timeline);
        drop(tenant);
        let tenant =
            Tenant::open_with_fetcher(&tenant_dir, config(), Arc::new(PageCache::new(64)), fetcher).expect("reopen");
        let timeline = tenant.timeline(TIMELINE).expect("timeline");
        assert_eq!(timeline.disk_consistent_lsn(), lsn);
        check_pages(&timeline, &history);
    }

    #[test]
    fn concurrent_readers_fetch_a_layer_once() {
        let root = tempfile::tempdir().expect("tempdir");
        let (tenant_dir, remote, history, _) = tenant_without_layers(root.path());
        let fetcher = Arc::new(DirFetcher {
            source: remote,
            fetches: AtomicU64::new(0),
            delay: Duration::from_millis(30),
        });
        let tenant = Tenant::open_with_fetcher(&tenant_dir, config(), Arc::new(PageCache::new(64)), fetcher.clone())
            .expect("open");
        let timeline = tenant.timeline(TIMELINE).expect("timeline");
        let (lsn, pages) = history[history.len() - 1].clone();
        let readers = 8;
        let barrier = Barrier::new(readers);
        std::thread::scope(|scope| {
            for _ in 0..readers {
                scope.spawn(|| {
                    barrier.wait();
                    let page = timeline.get_page_uncached(Key::page(3), lsn).expect("read").0;
                    assert!(page[..] == pages[&3][..]);
                });
            }
        });
        let fetched = layer_files(&timeline_dir(&tenant_dir)).len() as u64;
        assert!(fetched > 0);
        assert_eq!(
            fetcher.fetches.load(Ordering::SeqCst),
            fetched,
            "one fetch per layer, not per reader"
        );
    }

    #[test]
    fn readers_waiting_on_a_failed_fetch_share_its_error() {
        let root = tempfile::tempdir().expect("tempdir");
        let (tenant_dir, _, history, _) = tenant_without_layers(root.path());
        let fetcher = Arc::new(DirFetcher {
            source: root.path().join("nowhere"),
            fetches: AtomicU64::new(0),
            delay: Duration::from_millis(300),
        });
        let tenant = Tenant::open_with_fetcher(&tenant_dir, config(), Arc::new(PageCache::new(64)), fetcher.clone())
            .expect("open");
        let timeline = tenant.timeline(TIMELINE).expect("timeline");
        let (lsn, _) = history[history.len() - 1];
        let readers = 6;
        let barrier = Barrier::new(readers);
        std::thread::scope(|scope| {
            for _ in 0..readers {
                scope.spawn(|| {
                    barrier.wait();
                    let result = timeline.get_page_uncached(Key::page(3), lsn);
                    assert!(
                        matches!(result, Err(StorageError::Fetch { .. })),
                        "{:?}",
                        result.map(|_| ())
                    );
                });
            }
        });
        // Readers that waited on the failing fetch did not each try again (a late one may).
        let fetches = fetcher.fetches.load(Ordering::SeqCst);
        assert!(fetches < readers as u64, "{fetches} fetches for {readers} readers");
    }

    #[test]
    fn a_failed_fetch_is_reported_and_retried_later() {
        let root = tempfile::tempdir().expect("tempdir");
        let (tenant_dir, remote, history, names) = tenant_without_layers(root.path());
        let source = remote.join(TIMELINE.to_string());
        let aside = root.path().join("aside");
        std::fs::rename(&source, &aside).expect("hide the source");
        std::fs::create_dir_all(&source).expect("empty source");
        let fetcher = DirFetcher::new(remote.clone());
        let tenant =
            Tenant::open_with_fetcher(&tenant_dir, config(), Arc::new(PageCache::new(64)), fetcher).expect("open");
        let timeline = tenant.timeline(TIMELINE).expect("timeline");
        let (lsn, pages) = history[history.len() - 1].clone();
        match timeline.get_page(Key::page(1), lsn) {
            Err(StorageError::Fetch { file, reason }) => {
                let name = file.file_name().expect("a file name").to_string_lossy().into_owned();
                assert!(names.contains(&name), "names the layer: {}", file.display());
                assert!(reason.contains("copying"), "{reason}");
            }
            other => panic!("expected a fetch error, got {:?}", other.map(|_| ())),
        }
        let left = std::fs::read_dir(timeline_dir(&tenant_dir)).expect("dir").count();
        assert_eq!(left, 2, "only metadata and timestamps: no layer, no temp file");
        // The source comes back: the next read fetches again and succeeds.
        std::fs::remove_dir(&source).expect("remove empty");
        std::fs::rename(&aside, &source).expect("restore the source");
        let page = timeline
            .get_page(Key::page(1), lsn)
            .expect("read after the source is back");
        assert!(page[..] == pages[&1][..]);
    }

    #[test]
    fn a_damaged_fetched_layer_is_corrupt_and_deleted() {
        let root = tempfile::tempdir().expect("tempdir");
        let (tenant_dir, remote, history, names) = tenant_without_layers(root.path());
        let source = remote.join(TIMELINE.to_string());
        // Damage one value in every source layer (past the summary, before the index), keeping sizes.
        let mut originals = Vec::new();
        for name in &names {
            let path = source.join(name);
            let bytes = std::fs::read(&path).expect("read");
            let mut damaged = bytes.clone();
            damaged[70] ^= 0x5A;
            std::fs::write(&path, &damaged).expect("write");
            originals.push((path, bytes));
        }
        let fetcher = DirFetcher::new(remote.clone());
        let tenant =
            Tenant::open_with_fetcher(&tenant_dir, config(), Arc::new(PageCache::new(64)), fetcher).expect("open");
        let timeline = tenant.timeline(TIMELINE).expect("timeline");
        let (lsn, pages) = history[history.len() - 1].clone();
        match timeline.get_page(Key::page(2), lsn) {
            Err(StorageError::Corrupt { file, reason, .. }) => {
                assert_eq!(
                    file.parent(),
                    Some(timeline_dir(&tenant_dir).as_path()),
                    "{}",
                    file.display()
                );
                let name = file.file_name().expect("a file name").to_string_lossy().into_owned();
                assert!(names.contains(&name), "names the layer: {}", file.display());
                assert!(reason.contains("crc"), "{reason}");
            }
            other => panic!("expected corruption, got {:?}", other.map(|_| ())),
        }
        let left = std::fs::read_dir(timeline_dir(&tenant_dir)).expect("dir").count();
        assert_eq!(left, 2, "the damaged file is deleted, no temp file left");
        // Repaired at the source: every read succeeds.
        for (path, bytes) in &originals {
            std::fs::write(path, bytes).expect("repair");
        }
        for block in 0..BLOCKS {
            let page = timeline.get_page(Key::page(block), lsn).expect("read after the repair");
            assert!(page[..] == pages[&block][..]);
        }
    }
}
