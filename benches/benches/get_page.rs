//! Page reads at the latest LSN, hot (served by the page cache) and cold (reconstructed from layer files).
//!
//! * `get_page_hot/<n>_keys`: `Timeline::get_page` of the same `n` pages over and over; the first read of each
//!   filled the cache, and the bench checks afterwards that no read missed it. Throughput in pages/s.
//! * `get_page_cold/image+<n>_deltas`: `Timeline::get_page_uncached` (never the cache) of random pages, each
//!   with an image followed by a chain of `n` small deltas, spread over 4 flushed L0 layers above the L0 that
//!   holds the images. Layer files are mmapped and stay in the OS page cache, so "cold" means "from layer
//!   files", not "from the disk".
//! * `get_page_history/random_lsn`: `Timeline::get_page` of random (page, LSN) pairs over the whole history of
//!   4096 pages written 4 times each as full images (the access pattern of the peers bench's "page as of LSN"
//!   section), with a page cache of twice the versions. Throughput in pages/s; the page-cache miss fraction
//!   over the run is printed.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cambium_benches::{
    checkpoint, delta_record, image_record, ingest, manual_config, open_tenant, page_image, scratch_dir, small_delta,
    write_image_timeline, ImageFill, SplitMix64, BASE_TS_US, MIB, ROOT_TIMELINE, START_LSN,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use storage::value::apply_delta;
use storage::{Durability, Key, Lsn, PageCache, Value};

/// Pages of the hot timeline.
const HOT_PAGES: u32 = 8192;
/// Hot working sets: all fit the cache.
const HOT_SET_SIZES: [usize; 2] = [64, 4096];
/// Pages of each cold timeline.
const COLD_PAGES: u32 = 1024;
/// Delta chain lengths above each page's image.
const CHAIN_LENGTHS: [u32; 3] = [0, 8, 32];
/// Flushed L0 layers the deltas are spread over.
const DELTA_LAYERS: u32 = 4;

fn bench_hot(c: &mut Criterion) {
    let dir = scratch_dir("get-page-hot");
    let cache = Arc::new(PageCache::new(64 * 1024));
    let tenant = open_tenant(dir.path(), manual_config(Durability::Off), cache);
    let timeline = tenant
        .create_timeline(ROOT_TIMELINE, START_LSN)
        .expect("create timeline");
    let fill = ImageFill {
        pages: HOT_PAGES,
        pages_per_record: 64,
        checkpoint_every_bytes: 16 * MIB,
    };
    let lsn = write_image_timeline(&timeline, START_LSN, fill, "get_page-hot");

    let mut group = c.benchmark_group("get_page_hot");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let mut rng = SplitMix64::new(0x407);
    for set_size in HOT_SET_SIZES {
        let keys: Vec<Key> = rng.distinct(set_size, HOT_PAGES).into_iter().map(Key::page).collect();
        for &key in &keys {
            let page = timeline.get_page(key, lsn).expect("warm the cache");
            assert_eq!(page, page_image(key.block(), 0));
        }
        let (misses_before, _) = timeline.read_amplification_counters();
        group.throughput(Throughput::Elements(keys.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(format!("{set_size}_keys")), |b| {
            b.iter(|| {
                for &key in &keys {
                    black_box(timeline.get_page(black_box(key), lsn).expect("hot read"));
                }
            });
        });
        let (misses_after, _) = timeline.read_amplification_counters();
        assert_eq!(
            misses_before, misses_after,
            "hot reads of {set_size} keys missed the page cache: the bench measured layer reads"
        );
    }
    group.finish();
}

/// The page `block` should read as: its image with deltas `1..=chain` applied.
fn expected_page(block: u32, chain: u32) -> Bytes {
    let mut page = page_image(block, 0).to_vec();
    for version in 1..=chain {
        match small_delta(block, version) {
            Value::Delta(patches) => apply_delta(&mut page, &patches),
            Value::Image(_) => unreachable!("small_delta makes deltas"),
        }
    }
    Bytes::from(page)
}

fn bench_cold(c: &mut Criterion) {
    let mut group = c.benchmark_group("get_page_cold");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(1));
    for chain in CHAIN_LENGTHS {
        let dir = scratch_dir("get-page-cold");
        // get_page_uncached bypasses the cache; capacity 0 disables it anyway.
        let tenant = open_tenant(dir.path(), manual_config(Durability::Off), Arc::new(PageCache::new(0)));
        let timeline = tenant
            .create_timeline(ROOT_TIMELINE, START_LSN)
            .expect("create timeline");
        let fill = ImageFill {
            pages: COLD_PAGES,
            pages_per_record: 64,
            checkpoint_every_bytes: u64::MAX,
        };
        let mut lsn = write_image_timeline(&timeline, START_LSN, fill, "get_page-cold");
        let rounds_per_layer = chain.div_ceil(DELTA_LAYERS).max(1);
        for version in 1..=chain {
            let record = delta_record(
                BASE_TS_US + u64::from(version) * 1_000_000,
                COLD_PAGES,
                0..COLD_PAGES,
                version,
            );
            lsn = ingest(&timeline, lsn, &record);
            if version % rounds_per_layer == 0 || version == chain {
                checkpoint(&timeline);
            }
        }
        let info = timeline.info();
        assert_eq!(info.disk_consistent_lsn, lsn, "everything is flushed");
        let mut rng = SplitMix64::new(0xc01d + u64::from(chain));
        let keys: Vec<Key> = (0..4096)
            .map(|_| Key::page(rng.below(u64::from(COLD_PAGES)) as u32))
            .collect();
        let mut visited = 0u64;
        for &key in &keys[..64] {
            let (page, stats) = timeline.get_page_uncached(key, lsn).expect("read a cold page");
            assert_eq!(page, expected_page(key.block(), chain), "page {key}");
            visited += stats.layers_visited;
        }
        eprintln!(
            "[get_page_cold] image+{chain}_deltas: {} layer files, {:.1} layers visited per read",
            info.layer_count,
            visited as f64 / 64.0
        );
        let mut next = 0usize;
        group.bench_function(BenchmarkId::from_parameter(format!("image+{chain}_deltas")), |b| {
            b.iter(|| {
                let key = keys[next % keys.len()];
                next += 1;
                black_box(timeline.get_page_uncached(key, lsn).expect("cold read"))
            });
        });
    }
    group.finish();
}

/// Pages of the history timeline, each written `HISTORY_VERSIONS` times.
const HISTORY_PAGES: u32 = 4096;
const HISTORY_VERSIONS: u32 = 4;
/// Random (page, LSN) queries, cycled through; reads per iteration.
const HISTORY_QUERIES: usize = 1 << 20;
const HISTORY_BATCH: usize = 4096;

fn bench_history(c: &mut Criterion) {
    let dir = scratch_dir("get-page-history");
    let cache = Arc::new(PageCache::new(2 * (HISTORY_PAGES * HISTORY_VERSIONS) as usize));
    let tenant = open_tenant(dir.path(), manual_config(Durability::Off), cache);
    let timeline = tenant
        .create_timeline(ROOT_TIMELINE, START_LSN)
        .expect("create timeline");
    // Every page written HISTORY_VERSIONS times as a full image, 64 pages per record, a layer file per version.
    let mut lsn = START_LSN;
    let mut readable_from = Lsn(u64::MAX);
    for version in 0..HISTORY_VERSIONS {
        for start in (0..HISTORY_PAGES).step_by(64) {
            let record = image_record(
                BASE_TS_US + u64::from(version),
                HISTORY_PAGES,
                start..start + 64,
                version,
            );
            lsn = ingest(&timeline, lsn, &record);
        }
        if version == 0 {
            readable_from = lsn; // every page exists from here on
        }
        checkpoint(&timeline);
    }
    let last_lsn = lsn;
    let mut rng = SplitMix64::new(0x9eed);
    let queries: Vec<(Key, Lsn)> = (0..HISTORY_QUERIES)
        .map(|_| {
            let block = rng.below(u64::from(HISTORY_PAGES)) as u32;
            let lsn = Lsn(readable_from.0 + rng.below(last_lsn.0 - readable_from.0 + 1));
            (Key::page(block), lsn)
        })
        .collect();
    // The first page bytes name the page and its version; check a sample against a read without the cache.
    for &(key, lsn) in &queries[..4096] {
        let page = timeline.get_page(key, lsn).expect("get_page");
        let (expected, _) = timeline.get_page_uncached(key, lsn).expect("get_page_uncached");
        assert_eq!(page, expected, "page {key} at {lsn}");
    }

    let mut group = c.benchmark_group("get_page_history");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(HISTORY_BATCH as u64));
    let (misses_before, _) = timeline.read_amplification_counters();
    let mut next = 0usize;
    let mut lookups = 0u64;
    group.bench_function("random_lsn", |b| {
        b.iter(|| {
            for _ in 0..HISTORY_BATCH {
                let (key, lsn) = queries[next % queries.len()];
                next += 1;
                black_box(timeline.get_page(black_box(key), lsn).expect("history read"));
            }
            lookups += HISTORY_BATCH as u64;
        });
    });
    let (misses_after, _) = timeline.read_amplification_counters();
    eprintln!(
        "[get_page_history] random_lsn: {:.1} % page-cache misses over {lookups} reads",
        100.0 * (misses_after - misses_before) as f64 / (lookups.max(1)) as f64
    );
    group.finish();
}

criterion_group!(benches, bench_hot, bench_cold, bench_history);
criterion_main!(benches);
