//! `Timeline::lsn_for_timestamp` on a timeline of 10 M commits, all in the persisted (mmapped) index.
//!
//! The timeline is built once under `<bench data>/lsn-for-timestamp-10m` and reused: 10 M records, most with
//! no entries, every 1000th with one small page delta, one commit timestamp each (about 1 ms apart, strictly
//! increasing), checkpointed every 1 M commits and at the end so the whole index is in its file. In
//! criterion's test mode (`cargo test --benches`) it uses 100 k commits instead.
//!
//! * `lsn_for_timestamp/random`: lookups of random timestamps inside the history.
//! * `lsn_for_timestamp/after_last`: a timestamp past the last commit (the newest LSN).

use std::cell::OnceCell;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_benches::{
    bench_data_dir, build_once, checkpoint, delta_record, is_test_mode, manual_config, open_tenant, restore_branch_log,
    save_pristine_branch_log, SplitMix64, BASE_TS_US, ROOT_TIMELINE, START_LSN,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use storage::{Durability, Lsn, PageCache, StorageError, Tenant, Timeline, WalRecord};

/// Commits in the timeline of a real run.
const COMMITS: u64 = 10_000_000;
/// Commits in the timeline of a test-mode run.
const COMMITS_TEST_MODE: u64 = 100_000;
/// Checkpoints while building (every `commits / CHECKPOINTS` commits).
const CHECKPOINTS: u64 = 10;
/// Every this many commits carries one small page delta; the others carry no entries.
const DELTA_EVERY: u64 = 1_000;
/// Pages the deltas cycle over.
const PAGES: u32 = 1024;

/// The commit timestamp of commit `i`: about 1 ms apart with jitter, strictly increasing.
fn commit_ts(i: u64) -> u64 {
    let jitter = SplitMix64::new(i).next_u64() % 1_000;
    BASE_TS_US + i * 1_000 + jitter
}

fn build(dir: &Path, commits: u64) {
    let tenant = open_tenant(dir, manual_config(Durability::Fsync), Arc::new(PageCache::new(1024)));
    let timeline = tenant
        .create_timeline(ROOT_TIMELINE, START_LSN)
        .expect("create the root timeline");
    let started = Instant::now();
    let checkpoint_every = commits / CHECKPOINTS;
    let mut lsn = START_LSN;
    for i in 0..commits {
        let record = if i % DELTA_EVERY == DELTA_EVERY - 1 {
            let block = ((i / DELTA_EVERY) % u64::from(PAGES)) as u32;
            delta_record(commit_ts(i), PAGES, [block], (i / DELTA_EVERY) as u32)
        } else {
            WalRecord {
                commit_ts_us: commit_ts(i),
                db_size_pages: PAGES,
                entries: Vec::new(),
            }
        };
        lsn = timeline.ingest_record(lsn, &record).expect("ingest");
        if (i + 1) % checkpoint_every == 0 || i + 1 == commits {
            checkpoint(&timeline);
            eprintln!(
                "[lsn_for_timestamp] {} / {commits} commits flushed, {:.0} s",
                i + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    drop(timeline);
    drop(tenant);
    save_pristine_branch_log(dir);
}

/// The opened timeline and the timestamps to look up.
struct Fixture {
    _tenant: Tenant,
    timeline: Arc<Timeline>,
    targets: Vec<u64>,
    after_last: u64,
}

fn prepare(commits: u64) -> Fixture {
    let count = if commits % 1_000_000 == 0 {
        format!("{}m", commits / 1_000_000)
    } else {
        format!("{}k", commits / 1_000)
    };
    let dir = bench_data_dir().join(format!("lsn-for-timestamp-{count}"));
    let spec = format!(
        "cambium-benches lsn_for_timestamp v1\ncommits={commits}\ncheckpoints={CHECKPOINTS}\n\
         delta_every={DELTA_EVERY}\npages={PAGES}\n"
    );
    build_once(&dir, &spec, |dir| build(dir, commits));
    restore_branch_log(&dir);
    let tenant = open_tenant(&dir, manual_config(Durability::Off), Arc::new(PageCache::new(1024)));
    let timeline = tenant.timeline(ROOT_TIMELINE).expect("root timeline");
    let last = timeline.last_record_lsn();
    assert_eq!(timeline.disk_consistent_lsn(), last, "everything is flushed");

    // Sanity (untimed): the ends of the history answer as they must, and lookups are monotonic.
    let newest = timeline
        .lsn_for_timestamp(commit_ts(commits - 1))
        .expect("lookup the last commit");
    assert_eq!((newest.timeline_id, newest.lsn), (ROOT_TIMELINE, last));
    assert!(matches!(
        timeline.lsn_for_timestamp(BASE_TS_US - 1),
        Err(StorageError::TimestampBeforeHistory { .. })
    ));
    let first = timeline
        .lsn_for_timestamp(commit_ts(0))
        .expect("lookup the first commit");
    assert!(first.lsn > START_LSN && first.lsn < last);
    let mut rng = SplitMix64::new(0x715);
    let span = commit_ts(commits - 1) - commit_ts(0);
    let targets: Vec<u64> = (0..1 << 16).map(|_| commit_ts(0) + rng.below(span)).collect();
    let mut previous = (0u64, Lsn(0));
    for &ts in &targets[..1024] {
        let found = timeline.lsn_for_timestamp(ts).expect("lookup").lsn;
        assert!(found > START_LSN && found <= last);
        if ts >= previous.0 {
            assert!(found >= previous.1, "lookups are monotonic");
        }
        previous = (ts, found);
    }
    Fixture {
        _tenant: tenant,
        timeline,
        targets,
        after_last: commit_ts(commits - 1) + 1_000_000,
    }
}

fn bench_lookup(c: &mut Criterion) {
    let commits = if is_test_mode() { COMMITS_TEST_MODE } else { COMMITS };
    // Built on first use, so `--list` and filters that match nothing never build it.
    let fixture: OnceCell<Fixture> = OnceCell::new();
    let mut group = c.benchmark_group("lsn_for_timestamp");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(1));
    let mut next = 0usize;
    group.bench_function(BenchmarkId::from_parameter("random"), |b| {
        let fixture = fixture.get_or_init(|| prepare(commits));
        b.iter(|| {
            let ts = fixture.targets[next % fixture.targets.len()];
            next += 1;
            black_box(fixture.timeline.lsn_for_timestamp(black_box(ts)).expect("lookup"))
        });
    });
    group.bench_function(BenchmarkId::from_parameter("after_last"), |b| {
        let fixture = fixture.get_or_init(|| prepare(commits));
        b.iter(|| {
            black_box(
                fixture
                    .timeline
                    .lsn_for_timestamp(black_box(fixture.after_last))
                    .expect("lookup"),
            )
        });
    });
    group.finish();
}

criterion_group!(benches, bench_lookup);
criterion_main!(benches);
