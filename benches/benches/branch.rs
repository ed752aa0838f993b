//! Branch creation on timelines of 1 MiB, 1 GiB and 10 GiB of logical data, with and without fsync.
//!
//! The source timelines are page images flushed to L0 layer files, built once under
//! `<bench data>/branch-<size>` and reused by later runs (see `cambium_benches::build_once`). Each iteration
//! creates a branch at the latest LSN with a fresh id. Each sample reopens the tenant from a pristine copy of
//! its branch log (untimed), so branches made by earlier samples and runs never pile up.
//!
//! `branch_reference/fdatasync_append` times the bare cost the fsync variant should be dominated by: append
//! one branch-log-sized frame to a file on the same disk and `fdatasync` it.

use std::cell::OnceCell;
use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_benches::{
    bench_data_dir, build_once, is_test_mode, manual_config, open_tenant, page_image, restore_branch_log,
    save_pristine_branch_log, scratch_dir, size_label, write_image_timeline, ImageFill, GIB, MIB, ROOT_TIMELINE,
    START_LSN,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use storage::layer::file::LAYER_FORMAT_VERSION;
use storage::{BranchPoint, Durability, Key, PageCache, TimelineId, PAGE_SIZE_BYTES};

/// Logical sizes of the source timelines.
const SIZES: [u64; 3] = [MIB, GIB, 10 * GIB];
/// Pages per WAL record while building (1 MiB records).
const PAGES_PER_RECORD: u32 = 128;
/// Flush to an L0 layer every this many WAL bytes while building.
const CHECKPOINT_EVERY_BYTES: u64 = 256 * MIB;
/// About the size of one branch log frame (header + JSON of a `Create` entry).
const LOG_FRAME_BYTES: usize = 150;

/// A prebuilt source timeline: the tenant directory holding it.
struct Source {
    dir: PathBuf,
}

/// Builds (or finds) the tenant holding a root timeline of `bytes` of page images.
fn prepare(bytes: u64) -> Source {
    let label = size_label(bytes);
    let dir = bench_data_dir().join(format!("branch-{}", label.to_lowercase()));
    let pages = u32::try_from(bytes / PAGE_SIZE_BYTES as u64).expect("page count fits u32");
    let spec = format!(
        "cambium-benches branch source v1\nlayer_format={LAYER_FORMAT_VERSION}\npages={pages}\n\
         pages_per_record={PAGES_PER_RECORD}\ncheckpoint_every_bytes={CHECKPOINT_EVERY_BYTES}\n"
    );
    build_once(&dir, &spec, |dir| {
        eprintln!("[branch] building a {label} source timeline in {}", dir.display());
        let tenant = open_tenant(dir, manual_config(Durability::Fsync), Arc::new(PageCache::new(1024)));
        let root = tenant
            .create_timeline(ROOT_TIMELINE, START_LSN)
            .expect("create the root timeline");
        let fill = ImageFill {
            pages,
            pages_per_record: PAGES_PER_RECORD,
            checkpoint_every_bytes: CHECKPOINT_EVERY_BYTES,
        };
        write_image_timeline(&root, START_LSN, fill, &format!("branch-{label}"));
        drop(root);
        drop(tenant);
        save_pristine_branch_log(dir);
    });
    // Sanity (untimed): the data is all on disk and reads back.
    restore_branch_log(&dir);
    let tenant = open_tenant(&dir, manual_config(Durability::Off), Arc::new(PageCache::new(0)));
    let root = tenant.timeline(ROOT_TIMELINE).expect("root timeline");
    let info = root.info();
    assert_eq!(info.db_size_pages, pages, "{label}: database size");
    assert_eq!(
        info.disk_consistent_lsn, info.last_record_lsn,
        "{label}: everything flushed"
    );
    for block in [0, pages / 2, pages - 1] {
        let (page, _) = root
            .get_page_uncached(Key::page(block), info.last_record_lsn)
            .expect("read back a page");
        assert_eq!(page, page_image(block, 0), "{label}: block {block}");
    }
    eprintln!(
        "[branch] {label}: {} layer files, {:.2} GiB on disk",
        info.layer_count,
        info.layer_bytes as f64 / GIB as f64
    );
    Source { dir }
}

fn bench_branch(c: &mut Criterion) {
    // Sources are prepared on first use, so `--list` and filters that skip a size never build it; criterion's
    // test mode (`cargo test --benches`) only checks the smallest.
    let sizes: &[u64] = if is_test_mode() { &SIZES[..1] } else { &SIZES };
    let sources: Vec<(u64, OnceCell<Source>)> = sizes.iter().map(|&bytes| (bytes, OnceCell::new())).collect();
    let cache = Arc::new(PageCache::new(1024));
    // Ids are unique within the process; each sample starts from the pristine log, so never across runs.
    let mut next_id: u128 = 1 << 64;
    for (name, durability) in [("branch_fsync", Durability::Fsync), ("branch_nofsync", Durability::Off)] {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(30)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(5));
        for (bytes, source) in &sources {
            group.bench_function(BenchmarkId::from_parameter(size_label(*bytes)), |b| {
                let source = source.get_or_init(|| prepare(*bytes));
                b.iter_custom(|iters| {
                    restore_branch_log(&source.dir);
                    let tenant = open_tenant(&source.dir, manual_config(durability), Arc::clone(&cache));
                    let started = Instant::now();
                    for _ in 0..iters {
                        next_id += 1;
                        let branch = tenant
                            .branch(TimelineId(next_id), ROOT_TIMELINE, BranchPoint::Latest)
                            .expect("branch");
                        black_box(branch);
                    }
                    let elapsed = started.elapsed();
                    drop(tenant);
                    elapsed
                });
            });
        }
        group.finish();
    }

    // Leave the data sets as built: no branch entries from the last sample.
    for source in sources.iter().filter_map(|(_, source)| source.get()) {
        restore_branch_log(&source.dir);
    }

    let mut group = c.benchmark_group("branch_reference");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    let dir = scratch_dir("fdatasync-probe");
    let frame = [0x5au8; LOG_FRAME_BYTES];
    group.bench_function(
        BenchmarkId::new("fdatasync_append", format!("{LOG_FRAME_BYTES}B")),
        |b| {
            b.iter_custom(|iters| {
                let path = dir.path().join("probe.log");
                let mut file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .expect("open probe file");
                file.set_len(0).expect("truncate probe file");
                let started = Instant::now();
                for _ in 0..iters {
                    file.write_all(&frame).expect("append");
                    file.sync_data().expect("fdatasync");
                }
                started.elapsed()
            });
        },
    );
    group.finish();
}

criterion_group!(benches, bench_branch);
criterion_main!(benches);
