//! Read amplification after a long write history, without and with compaction. Not a criterion bench: it
//! prints a table.
//!
//! Each variant writes the same history into its own timeline: page images of 256 pages, flushed, then 200
//! rounds of one record of small deltas to 64 random pages, each round flushed to its own L0 layer. The
//! variants differ only in what runs after each flush:
//!
//! * `none`: nothing; every flush leaves one more L0 layer.
//! * `l0_to_l1`: `compact()` with image creation effectively off (L0 -> L1 merges only).
//! * `l0_to_l1+images`: `compact()` with the default thresholds (L0 -> L1, then image layers).
//!
//! Then it reads every page with `get_page_uncached` (no page cache) at the latest LSN and at the LSN of the
//! middle of the history, checks that every variant returns the same bytes, and prints the average and
//! largest `layers_visited` per read and the mean time per read.

use std::sync::Arc;
use std::time::Instant;

use cambium_benches::{
    checkpoint, delta_record, image_record, ingest, manual_config, open_tenant, scratch_dir, SplitMix64, BASE_TS_US,
    MIB, ROOT_TIMELINE, START_LSN,
};
use storage::layer::desc::LayerKind;
use storage::{Durability, Key, Lsn, PageCache, Tenant, Timeline, TimelineConfig};

/// Pages of the database.
const PAGES: u32 = 256;
/// Flushes of deltas after the images.
const FLUSHES: u32 = 200;
/// Pages each flush's record changes.
const PAGES_PER_FLUSH: usize = 64;
/// Timed passes over all pages at each LSN.
const READ_PASSES: usize = 20;

/// One way of maintaining the layers.
struct Variant {
    name: &'static str,
    compact: bool,
    conf: TimelineConfig,
}

/// A timeline written with one variant.
struct Built {
    _dir: tempfile::TempDir,
    _tenant: Tenant,
    timeline: Arc<Timeline>,
    mid_lsn: Lsn,
    last_lsn: Lsn,
    build_secs: f64,
}

/// Reads of every page at one LSN.
struct ReadResult {
    pages: Vec<bytes::Bytes>,
    layers_avg: f64,
    layers_max: u64,
    micros_per_read: f64,
}

fn build(variant: &Variant) -> Built {
    let dir = scratch_dir("read-amp");
    let tenant = open_tenant(dir.path(), variant.conf.clone(), Arc::new(PageCache::new(1024)));
    let timeline = tenant
        .create_timeline(ROOT_TIMELINE, START_LSN)
        .expect("create timeline");
    let started = Instant::now();
    let mut lsn = ingest(&timeline, START_LSN, &image_record(BASE_TS_US, PAGES, 0..PAGES, 0));
    checkpoint(&timeline);
    let mut rng = SplitMix64::new(0xa4a);
    let mut mid_lsn = lsn;
    for flush in 1..=FLUSHES {
        let blocks = rng.distinct(PAGES_PER_FLUSH, PAGES);
        let record = delta_record(BASE_TS_US + u64::from(flush) * 1_000, PAGES, blocks, flush);
        lsn = ingest(&timeline, lsn, &record);
        checkpoint(&timeline);
        if variant.compact {
            timeline.compact().expect("compact");
        }
        if flush == FLUSHES / 2 {
            mid_lsn = lsn;
        }
    }
    Built {
        _dir: dir,
        _tenant: tenant,
        timeline,
        mid_lsn,
        last_lsn: lsn,
        build_secs: started.elapsed().as_secs_f64(),
    }
}

fn read_all(timeline: &Timeline, lsn: Lsn) -> ReadResult {
    let mut pages = Vec::with_capacity(PAGES as usize);
    let mut layers_total = 0u64;
    let mut layers_max = 0u64;
    for block in 0..PAGES {
        let (page, stats) = timeline.get_page_uncached(Key::page(block), lsn).expect("read");
        pages.push(page);
        layers_total += stats.layers_visited;
        layers_max = layers_max.max(stats.layers_visited);
    }
    let mut rng = SplitMix64::new(7);
    let orders: Vec<Vec<u32>> = (0..READ_PASSES).map(|_| rng.distinct(PAGES as usize, PAGES)).collect();
    let started = Instant::now();
    for order in &orders {
        for &block in order {
            std::hint::black_box(timeline.get_page_uncached(Key::page(block), lsn).expect("read"));
        }
    }
    let elapsed = started.elapsed();
    ReadResult {
        pages,
        layers_avg: layers_total as f64 / f64::from(PAGES),
        layers_max,
        micros_per_read: elapsed.as_secs_f64() * 1e6 / (READ_PASSES as f64 * f64::from(PAGES)),
    }
}

fn layer_counts(timeline: &Timeline) -> String {
    let descs = timeline.layer_descs();
    let count = |kind| descs.iter().filter(|d| d.kind == kind).count();
    format!(
        "{}/{}/{}",
        count(LayerKind::L0),
        count(LayerKind::L1),
        count(LayerKind::Image)
    )
}

fn main() {
    // `cargo bench -- <filter>` passes the filter to every bench binary: run only if it names this one.
    let filters: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|filter| "read_amp".contains(filter.as_str())) {
        return;
    }
    let base = manual_config(Durability::Fsync);
    let variants = [
        Variant {
            name: "none",
            compact: false,
            conf: base.clone(),
        },
        Variant {
            name: "l0_to_l1",
            compact: true,
            conf: TimelineConfig {
                image_creation_threshold: usize::MAX,
                ..base.clone()
            },
        },
        Variant {
            name: "l0_to_l1+images",
            compact: true,
            conf: base.clone(),
        },
    ];
    println!(
        "read_amp: {PAGES} pages, {FLUSHES} flushes of deltas to {PAGES_PER_FLUSH} random pages each; \
         compaction_l0_threshold={}, image_creation_threshold={}",
        base.compaction_l0_threshold, base.image_creation_threshold
    );
    println!();
    println!(
        "| compaction      | layers L0/L1/img | MiB on disk | build s | latest: avg layers | max | µs/read | middle: avg layers | max | µs/read |"
    );
    println!(
        "|-----------------|------------------|-------------|---------|--------------------|-----|---------|--------------------|-----|---------|"
    );
    let mut reference: Option<(Vec<bytes::Bytes>, Vec<bytes::Bytes>)> = None;
    for variant in &variants {
        let built = build(variant);
        let latest = read_all(&built.timeline, built.last_lsn);
        let middle = read_all(&built.timeline, built.mid_lsn);
        match &reference {
            None => reference = Some((latest.pages.clone(), middle.pages.clone())),
            Some((latest_pages, middle_pages)) => {
                assert!(
                    &latest.pages == latest_pages && &middle.pages == middle_pages,
                    "variant {} reads different pages than the first variant",
                    variant.name
                );
            }
        }
        let info = built.timeline.info();
        println!(
            "| {:<15} | {:>16} | {:>11.1} | {:>7.2} | {:>18.1} | {:>3} | {:>7.2} | {:>18.1} | {:>3} | {:>7.2} |",
            variant.name,
            layer_counts(&built.timeline),
            info.layer_bytes as f64 / MIB as f64,
            built.build_secs,
            latest.layers_avg,
            latest.layers_max,
            latest.micros_per_read,
            middle.layers_avg,
            middle.layers_max,
            middle.micros_per_read,
        );
    }
}
