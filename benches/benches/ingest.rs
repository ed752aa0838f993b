//! WAL ingest throughput, in WAL bytes per second (`WalRecord::frame_len`).
//!
//! * `ingest_in_memory/*`: into the open in-memory layer only (it never freezes here).
//!   `*_record` calls `Timeline::ingest_record` with prebuilt records; `*_frames_x64` calls
//!   `Timeline::ingest_frames` on a buffer of 64 encoded frames, so decoding and the crc check are included.
//!   `page_image_*` records carry one 8 KiB page image; `small_delta_*` records one page delta of two patches
//!   (72 bytes of data), the shape of a one-row update.
//! * `ingest_flush/<durability>`: 16 MiB of one-page-image records, then `Timeline::checkpoint()`, which
//!   writes them as an L0 layer file (plus the timestamp index and the metadata), timed together.
//!
//! Each sample starts a fresh timeline (untimed), so memory and disk use stay bounded.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cambium_benches::{
    delta_record, image_record, manual_config, open_tenant, scratch_dir, BASE_TS_US, MIB, START_LSN,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use storage::{Durability, PageCache, TimelineId, WalRecord};

/// Distinct pages the in-memory records cycle over.
const RECORD_KEYS: u32 = 4096;
/// Frames per `ingest_frames` call.
const FRAMES_PER_BATCH: u32 = 64;
/// Pages ingested per flush iteration (16 MiB).
const FLUSH_BATCH_PAGES: u32 = 2048;

fn image_records(count: u32) -> Vec<WalRecord> {
    (0..count)
        .map(|block| image_record(BASE_TS_US, RECORD_KEYS, block..block + 1, 1))
        .collect()
}

fn delta_records(count: u32) -> Vec<WalRecord> {
    (0..count)
        .map(|block| delta_record(BASE_TS_US, RECORD_KEYS, [block], 1))
        .collect()
}

fn encode_frames(records: &[WalRecord]) -> Bytes {
    let mut out = Vec::new();
    for record in records {
        record.encode(&mut out).expect("encode a record");
    }
    Bytes::from(out)
}

fn bench_in_memory(c: &mut Criterion) {
    let dir = scratch_dir("ingest-in-memory");
    let tenant = open_tenant(
        dir.path(),
        manual_config(Durability::Off),
        Arc::new(PageCache::new(16 * 1024)),
    );
    let mut next_id: u128 = 1 << 64;
    // Runs `iters` calls of `ingest_one` on a fresh timeline, timing only the calls.
    let mut timed_on_fresh_timeline =
        |iters: u64, ingest_one: &mut dyn FnMut(&storage::Timeline, u64, storage::Lsn) -> storage::Lsn| {
            next_id += 1;
            let id = TimelineId(next_id);
            let timeline = tenant.create_timeline(id, START_LSN).expect("create timeline");
            let mut lsn = START_LSN;
            let started = Instant::now();
            for i in 0..iters {
                lsn = ingest_one(&timeline, i, lsn);
            }
            let elapsed = started.elapsed();
            black_box(lsn);
            drop(timeline);
            tenant.delete_timeline(id).expect("delete timeline");
            elapsed
        };

    let mut group = c.benchmark_group("ingest_in_memory");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for (name, records) in [
        ("page_image", image_records(RECORD_KEYS)),
        ("small_delta", delta_records(RECORD_KEYS)),
    ] {
        let frame_len = records[0].frame_len();
        assert!(records.iter().all(|r| r.frame_len() == frame_len));
        group.throughput(Throughput::Bytes(frame_len));
        group.bench_function(BenchmarkId::from_parameter(format!("{name}_record")), |b| {
            b.iter_custom(|iters| {
                timed_on_fresh_timeline(iters, &mut |timeline, i, lsn| {
                    let record = &records[(i % u64::from(RECORD_KEYS)) as usize];
                    timeline.ingest_record(lsn, record).expect("ingest")
                })
            });
        });

        let frames = encode_frames(&records[..FRAMES_PER_BATCH as usize]);
        group.throughput(Throughput::Bytes(frames.len() as u64));
        group.bench_function(
            BenchmarkId::from_parameter(format!("{name}_frames_x{FRAMES_PER_BATCH}")),
            |b| {
                b.iter_custom(|iters| {
                    timed_on_fresh_timeline(iters, &mut |timeline, _, lsn| {
                        timeline.ingest_frames(lsn, &frames).expect("ingest frames")
                    })
                });
            },
        );
    }
    group.finish();
}

fn bench_flush(c: &mut Criterion) {
    let records = image_records(FLUSH_BATCH_PAGES);
    let batch_bytes: u64 = records.iter().map(WalRecord::frame_len).sum();
    assert!(batch_bytes >= 16 * MIB);
    let mut group = c.benchmark_group("ingest_flush");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(15))
        .throughput(Throughput::Bytes(batch_bytes));
    for (name, durability) in [("fsync", Durability::Fsync), ("nofsync", Durability::Off)] {
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                let dir = scratch_dir("ingest-flush");
                let tenant = open_tenant(dir.path(), manual_config(durability), Arc::new(PageCache::new(1024)));
                let timeline = tenant
                    .create_timeline(TimelineId(1), START_LSN)
                    .expect("create timeline");
                let mut lsn = START_LSN;
                let started = Instant::now();
                for _ in 0..iters {
                    for record in &records {
                        lsn = timeline.ingest_record(lsn, record).expect("ingest");
                    }
                    timeline.checkpoint().expect("checkpoint");
                }
                let elapsed = started.elapsed();
                assert_eq!(timeline.disk_consistent_lsn(), lsn);
                elapsed
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_in_memory, bench_flush);
criterion_main!(benches);
