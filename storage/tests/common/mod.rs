//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use bytes::Bytes;
use storage::{Durability, Key, Lsn, PageCache, Patch, Tenant, TimelineConfig, Value, WalRecord, PAGE_SIZE_BYTES};

/// A small configuration so flushes, compactions and images happen in small tests.
pub fn small_config() -> TimelineConfig {
    TimelineConfig {
        checkpoint_distance_bytes: 1 << 30,
        checkpoint_timeout_ms: u64::MAX,
        compaction_l0_threshold: 3,
        image_creation_threshold: 2,
        partition_keys: 4,
        gc_horizon_bytes: 0,
        pitr_interval_ms: 0,
        durability: Durability::Fsync,
        group_memory_bytes_max: 64 << 20,
        delta_run_max: 64,
    }
}

/// Opens a tenant in `dir` with its own page cache.
pub fn open(dir: &std::path::Path, conf: TimelineConfig) -> Tenant {
    Tenant::open(dir, conf, Arc::new(PageCache::new(1024))).expect("tenant opens")
}

/// A page image filled with `fill`.
pub fn image(fill: u8) -> Value {
    Value::Image(Bytes::from(vec![fill; PAGE_SIZE_BYTES]))
}

/// A delta writing `data` at `offset`.
pub fn patch(offset: u16, data: &[u8]) -> Value {
    Value::Delta(vec![Patch {
        offset,
        data: Bytes::copy_from_slice(data),
    }])
}

/// A record of page writes.
pub fn record(ts: u64, size: u32, entries: Vec<(u32, Value)>) -> WalRecord {
    WalRecord {
        commit_ts_us: ts,
        db_size_pages: size,
        entries: entries
            .into_iter()
            .map(|(block, value)| (Key::page(block), value))
            .collect(),
    }
}

/// Where root timelines of the tests start.
pub const START: Lsn = Lsn(0x100);

/// Asserts two pages are equal, reporting the first differing byte rather than both pages.
#[track_caller]
pub fn assert_page(actual: &[u8], expected: &[u8], context: &str) {
    if actual != expected {
        let first = actual.iter().zip(expected).position(|(a, b)| a != b);
        panic!(
            "{context}: pages differ (lengths {} and {}); first difference at {first:?}: {:?} vs {:?}",
            actual.len(),
            expected.len(),
            first.map(|i| actual[i]),
            first.map(|i| expected[i])
        );
    }
}
