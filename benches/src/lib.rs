//! Shared helpers for the benchmarks: building timelines of a given logical size once, on disk.
//!
//! Data sets that take long to build (the 10 GiB branch source, the 10 M-commit timestamp index) live under
//! [`bench_data_dir`] and are reused by later runs: [`build_once`] writes a marker file after a successful
//! build and rebuilds only when the marker is missing or names a different data set. Short-lived data goes
//! in [`scratch_dir`]s, on the same disk (never a tmpfs, so fsync costs what it costs).
//!
//! Everything here panics on error: a benchmark that cannot set up has nothing to measure.

use std::fs;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use storage::{
    Durability, Key, Lsn, PageCache, Patch, Tenant, Timeline, TimelineConfig, TimelineId, Value, WalRecord,
    PAGE_SIZE_BYTES,
};

/// The first LSN of every benchmark's root timeline.
pub const START_LSN: Lsn = Lsn(0x100_0000);

/// The id of the root timeline in every prebuilt tenant.
pub const ROOT_TIMELINE: TimelineId = TimelineId(1);

/// A commit timestamp to start from (2023-11-14, in microseconds since the Unix epoch).
pub const BASE_TS_US: u64 = 1_700_000_000_000_000;

/// One mebibyte.
pub const MIB: u64 = 1024 * 1024;

/// One gibibyte.
pub const GIB: u64 = 1024 * MIB;

/// The name of the marker file [`build_once`] writes after a successful build.
pub const MARKER_FILE: &str = "BENCH_DATA_READY";

/// The copy of `branches.log` taken right after a build, restored by [`restore_branch_log`].
pub const PRISTINE_BRANCH_LOG: &str = "branches.log.pristine";

const BRANCH_LOG: &str = "branches.log";

/// Where cached benchmark data lives: `$CAMBIUM_BENCH_DATA` if set, else `<workspace>/target/bench-data`.
pub fn bench_data_dir() -> PathBuf {
    let dir = match std::env::var_os("CAMBIUM_BENCH_DATA") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("bench-data"),
    };
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating bench data dir {}: {e}", dir.display()));
    dir.canonicalize()
        .unwrap_or_else(|e| panic!("resolving bench data dir {}: {e}", dir.display()))
}

/// Whether the bench binary runs in criterion's test mode (`cargo test --benches`, `cargo test --all-targets`,
/// or `cargo bench -- --test`), where each benchmark runs once to check that it works. Benches then use small
/// data sets instead of building the big ones. `cargo bench` passes `--bench`, which selects the real run.
pub fn is_test_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|arg| arg == flag);
    !has("--bench") || has("--test")
}

/// A fresh directory under `<bench data>/scratch`, removed when dropped.
pub fn scratch_dir(prefix: &str) -> tempfile::TempDir {
    let parent = bench_data_dir().join("scratch");
    fs::create_dir_all(&parent).unwrap_or_else(|e| panic!("creating {}: {e}", parent.display()));
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&parent)
        .unwrap_or_else(|e| panic!("creating a scratch dir in {}: {e}", parent.display()))
}

/// Builds the data set `dir` once. If `dir/BENCH_DATA_READY` exists and holds exactly `spec`, the data is
/// reused and `build` is not called; otherwise `dir` is emptied, `build(dir)` runs, and the marker is written
/// (and synced) after it returns. Returns whether a build ran.
///
/// `spec` should name everything that shapes the data (sizes, record shapes, format versions), so changing the
/// bench code that builds it forces a rebuild.
pub fn build_once(dir: &Path, spec: &str, build: impl FnOnce(&Path)) -> bool {
    let marker = dir.join(MARKER_FILE);
    if fs::read_to_string(&marker).is_ok_and(|found| found == spec) {
        eprintln!("[bench-data] reusing {}", dir.display());
        return false;
    }
    if dir.exists() {
        eprintln!("[bench-data] {} has no matching marker; rebuilding", dir.display());
        fs::remove_dir_all(dir).unwrap_or_else(|e| panic!("removing {}: {e}", dir.display()));
    }
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let started = Instant::now();
    build(dir);
    let mut file = fs::File::create(&marker).unwrap_or_else(|e| panic!("creating {}: {e}", marker.display()));
    file.write_all(spec.as_bytes())
        .and_then(|()| file.sync_all())
        .unwrap_or_else(|e| panic!("writing {}: {e}", marker.display()));
    eprintln!(
        "[bench-data] built {} in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    true
}

/// Saves the tenant's branch log as it is now (call at the end of a build, with the tenant closed).
pub fn save_pristine_branch_log(tenant_dir: &Path) {
    let from = tenant_dir.join(BRANCH_LOG);
    let to = tenant_dir.join(PRISTINE_BRANCH_LOG);
    fs::copy(&from, &to).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
}

/// Puts back the branch log saved by [`save_pristine_branch_log`], forgetting the branches earlier benchmark
/// runs created, so a reused data set does not grow (call with the tenant closed). Branches never flush, so
/// they own no files; `Tenant::open` removes any stray timeline directory.
pub fn restore_branch_log(tenant_dir: &Path) {
    let from = tenant_dir.join(PRISTINE_BRANCH_LOG);
    let to = tenant_dir.join(BRANCH_LOG);
    fs::copy(&from, &to).unwrap_or_else(|e| panic!("restoring {}: {e}", to.display()));
}

/// Opens (or creates) the tenant in `dir`.
pub fn open_tenant(dir: &Path, conf: TimelineConfig, cache: Arc<PageCache>) -> Tenant {
    Tenant::open(dir, conf, cache).unwrap_or_else(|e| panic!("opening tenant {}: {e}", dir.display()))
}

/// A configuration that never freezes or compacts on its own: benchmarks call `checkpoint()` and
/// `compact()` where they mean to. GC keeps everything.
pub fn manual_config(durability: Durability) -> TimelineConfig {
    TimelineConfig {
        checkpoint_distance_bytes: 1 << 50,
        checkpoint_timeout_ms: u64::MAX,
        gc_horizon_bytes: u64::MAX,
        pitr_interval_ms: u64::MAX / 2_000,
        durability,
        ..TimelineConfig::default()
    }
}

/// A page image of `block` for version `version`: distinct bytes per page and version, exactly
/// `PAGE_SIZE_BYTES` long.
pub fn page_image(block: u32, version: u32) -> Bytes {
    let mut page = vec![(block as u8) ^ (version as u8).rotate_left(3); PAGE_SIZE_BYTES];
    page[..4].copy_from_slice(&block.to_le_bytes());
    page[4..8].copy_from_slice(&version.to_le_bytes());
    Bytes::from(page)
}

/// A small delta: a 64-byte "row" somewhere in the page and an 8-byte "header" update at its start, the
/// shape of a one-row update in a B-tree page. Deterministic in `(block, version)`.
pub fn small_delta(block: u32, version: u32) -> Value {
    let row_offset = 64 + ((block.wrapping_mul(31).wrapping_add(version.wrapping_mul(97))) % 120) * 64;
    let mut row = [0u8; 64];
    row[..4].copy_from_slice(&block.to_le_bytes());
    row[4..8].copy_from_slice(&version.to_le_bytes());
    Value::Delta(vec![
        Patch {
            offset: 8,
            data: Bytes::copy_from_slice(&version.to_le_bytes()),
        },
        Patch {
            offset: row_offset as u16,
            data: Bytes::copy_from_slice(&row),
        },
    ])
}

/// A record writing page images of `blocks` (version `version`).
pub fn image_record(ts_us: u64, db_size_pages: u32, blocks: Range<u32>, version: u32) -> WalRecord {
    WalRecord {
        commit_ts_us: ts_us,
        db_size_pages,
        entries: blocks
            .map(|block| (Key::page(block), Value::Image(page_image(block, version))))
            .collect(),
    }
}

/// A record writing a [`small_delta`] to each of `blocks`.
pub fn delta_record(ts_us: u64, db_size_pages: u32, blocks: impl IntoIterator<Item = u32>, version: u32) -> WalRecord {
    WalRecord {
        commit_ts_us: ts_us,
        db_size_pages,
        entries: blocks
            .into_iter()
            .map(|block| (Key::page(block), small_delta(block, version)))
            .collect(),
    }
}

/// Ingests `record` at `lsn`; returns its end LSN.
pub fn ingest(timeline: &Timeline, lsn: Lsn, record: &WalRecord) -> Lsn {
    timeline
        .ingest_record(lsn, record)
        .unwrap_or_else(|e| panic!("ingesting at {lsn}: {e}"))
}

/// Freezes and flushes everything ingested to an L0 layer file.
pub fn checkpoint(timeline: &Timeline) {
    timeline
        .checkpoint()
        .unwrap_or_else(|e| panic!("checkpoint of {}: {e}", timeline.id()));
}

/// How to write a timeline of page images with [`write_image_timeline`].
#[derive(Clone, Copy, Debug)]
pub struct ImageFill {
    /// Pages to write, blocks `0..pages`, each once.
    pub pages: u32,
    /// Pages per WAL record.
    pub pages_per_record: u32,
    /// Checkpoint (flush to an L0 layer file) after about this many WAL bytes, and at the end.
    pub checkpoint_every_bytes: u64,
}

/// Writes blocks `0..fill.pages` as page images into `timeline` starting at `lsn`, in records of
/// `fill.pages_per_record` pages, checkpointing every `fill.checkpoint_every_bytes` and at the end, so all of
/// it is in layer files and memory stays bounded. Prints progress to stderr under `label`. Returns the end
/// LSN.
pub fn write_image_timeline(timeline: &Timeline, mut lsn: Lsn, fill: ImageFill, label: &str) -> Lsn {
    let started = Instant::now();
    let total_bytes = u64::from(fill.pages) * PAGE_SIZE_BYTES as u64;
    let mut since_checkpoint = 0u64;
    let mut next_report = Instant::now();
    let mut block = 0u32;
    let mut ts_us = BASE_TS_US;
    while block < fill.pages {
        let end = block.saturating_add(fill.pages_per_record).min(fill.pages);
        let record = image_record(ts_us, end, block..end, 0);
        lsn = ingest(timeline, lsn, &record);
        since_checkpoint += record.frame_len();
        block = end;
        ts_us += 1_000;
        if since_checkpoint >= fill.checkpoint_every_bytes || block == fill.pages {
            checkpoint(timeline);
            since_checkpoint = 0;
            if Instant::now() >= next_report || block == fill.pages {
                let written = u64::from(block) * PAGE_SIZE_BYTES as u64;
                let secs = started.elapsed().as_secs_f64();
                eprintln!(
                    "[{label}] {:.2} / {:.2} GiB flushed, {:.0} MiB/s, {:.0} s",
                    written as f64 / GIB as f64,
                    total_bytes as f64 / GIB as f64,
                    written as f64 / MIB as f64 / secs.max(1e-9),
                    secs
                );
                next_report = Instant::now() + std::time::Duration::from_secs(10);
            }
        }
    }
    lsn
}

/// A small deterministic pseudo-random generator (SplitMix64), so runs read the same keys.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound > 0`; the tiny modulo bias does not matter here).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    /// `count` distinct numbers from `0..bound`, in random order (`count <= bound`).
    pub fn distinct(&mut self, count: usize, bound: u32) -> Vec<u32> {
        assert!(count as u64 <= u64::from(bound), "{count} of {bound}");
        let mut all: Vec<u32> = (0..bound).collect();
        for i in 0..count {
            let j = i + self.below((all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count);
        all
    }
}

/// A human-readable byte size (`1MiB`, `10GiB`, `512KiB`), for benchmark ids.
pub fn size_label(bytes: u64) -> String {
    if bytes >= GIB && bytes % GIB == 0 {
        format!("{}GiB", bytes / GIB)
    } else if bytes >= MIB && bytes % MIB == 0 {
        format!("{}MiB", bytes / MIB)
    } else {
        format!("{}KiB", bytes / 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_valid() {
        image_record(1, 4, 0..4, 7).validate().expect("valid images");
        delta_record(1, 4, [0, 3], u32::MAX).validate().expect("valid deltas");
        for block in 0..300 {
            for version in 0..300 {
                small_delta(block, version)
                    .validate(Key::page(block))
                    .expect("delta fits the page");
            }
        }
    }

    #[test]
    fn distinct_is_distinct() {
        let mut rng = SplitMix64::new(3);
        let mut picked = rng.distinct(50, 64);
        picked.sort_unstable();
        picked.dedup();
        assert_eq!(picked.len(), 50);
        assert!(picked.iter().all(|&n| n < 64));
    }

    #[test]
    fn labels() {
        assert_eq!(size_label(MIB), "1MiB");
        assert_eq!(size_label(10 * GIB), "10GiB");
        assert_eq!(size_label(512 * 1024), "512KiB");
    }
}
