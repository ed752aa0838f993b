//! The compute's Prometheus metrics: where page reads were served from, prefetching, and the caches' sizes.
//!
//! Process-wide atomics (no lock on the read path), rendered in the text exposition format by [`render`]; the
//! API's `/metrics` (`cambium up`, `cambium api`) appends them to its own.
//!
//! - `cambium_compute_page_reads_total{source}`: page reads of SQLite that missed its own cache, by where they
//!   were served from: `memory` (the host's memory budget), `file` (the local file cache), `prefetch` (a page
//!   prefetched on the `GetPages` stream: a prefetch hit), `pageserver` (a `GetPage` round trip).
//! - `cambium_compute_prefetch_requested_pages_total`, `cambium_compute_prefetch_wasted_pages_total`: pages
//!   asked for ahead of the reader, and those dropped without being read (the window moved on, the snapshot
//!   changed, the store stopped).
//! - `cambium_compute_cache_evictions_total`, `cambium_compute_file_cache_writes_total`,
//!   `cambium_compute_file_cache_corrupt_total` (entries that failed their check and were dropped, never
//!   served), `cambium_compute_file_cache_write_errors_total`.
//! - Gauges: `cambium_compute_cache_memory_bytes`, `cambium_compute_cache_memory_budget_bytes`,
//!   `cambium_compute_file_cache_bytes`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// The compute's counters and gauges (see the module doc).
#[derive(Debug)]
pub struct Metrics {
    /// Reads served by the memory tier.
    pub reads_memory_total: AtomicU64,
    /// Reads served by the file cache.
    pub reads_file_total: AtomicU64,
    /// Reads served by a prefetched page (prefetch hits).
    pub reads_prefetch_total: AtomicU64,
    /// Reads that went to the pageserver as one `GetPage`.
    pub reads_pageserver_total: AtomicU64,
    /// Pages requested ahead of readers.
    pub prefetch_requested_pages_total: AtomicU64,
    /// Prefetched pages dropped unread.
    pub prefetch_wasted_pages_total: AtomicU64,
    /// Entries evicted from the memory tier.
    pub cache_evictions_total: AtomicU64,
    /// Pages written to the file cache.
    pub file_cache_writes_total: AtomicU64,
    /// File cache entries that failed their check (dropped, never served).
    pub file_cache_corrupt_total: AtomicU64,
    /// File cache writes that failed (the file cache is then off).
    pub file_cache_write_errors_total: AtomicU64,
    cache_memory_bytes: AtomicU64,
    cache_memory_budget_bytes: AtomicU64,
    file_cache_bytes: AtomicU64,
}

/// The metrics of this process.
pub static METRICS: Metrics = Metrics {
    reads_memory_total: AtomicU64::new(0),
    reads_file_total: AtomicU64::new(0),
    reads_prefetch_total: AtomicU64::new(0),
    reads_pageserver_total: AtomicU64::new(0),
    prefetch_requested_pages_total: AtomicU64::new(0),
    prefetch_wasted_pages_total: AtomicU64::new(0),
    cache_evictions_total: AtomicU64::new(0),
    file_cache_writes_total: AtomicU64::new(0),
    file_cache_corrupt_total: AtomicU64::new(0),
    file_cache_write_errors_total: AtomicU64::new(0),
    cache_memory_bytes: AtomicU64::new(0),
    cache_memory_budget_bytes: AtomicU64::new(0),
    file_cache_bytes: AtomicU64::new(0),
};

impl Metrics {
    /// A host cache's memory use changed from `before` to `after` bytes.
    pub fn set_cache_memory_bytes(&self, before: usize, after: usize) {
        adjust(&self.cache_memory_bytes, before as u64, after as u64);
    }

    /// A host cache with `budget` bytes came (`before` 0) or went (`after` 0).
    pub fn set_cache_memory_budget_bytes(&self, before: usize, after: usize) {
        adjust(&self.cache_memory_budget_bytes, before as u64, after as u64);
    }

    /// The file caches hold `bytes` more.
    pub fn add_file_cache_bytes(&self, bytes: u64) {
        self.file_cache_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The file caches hold `bytes` fewer.
    pub fn sub_file_cache_bytes(&self, bytes: u64) {
        adjust(&self.file_cache_bytes, bytes, 0);
    }

    /// The memory tiers' bytes in use, over every host cache of the process.
    pub fn cache_memory_bytes(&self) -> u64 {
        self.cache_memory_bytes.load(Ordering::Relaxed)
    }
}

fn adjust(gauge: &AtomicU64, before: u64, after: u64) {
    if after >= before {
        gauge.fetch_add(after - before, Ordering::Relaxed);
    } else {
        // Saturating: a gauge never wraps below zero.
        let _ = gauge.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |value| {
            Some(value.saturating_sub(before - after))
        });
    }
}

/// The whole exposition of the compute's metrics.
pub fn render() -> String {
    let m = &METRICS;
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let mut out = String::new();
    let name = "cambium_compute_page_reads_total";
    let _ = writeln!(
        out,
        "# HELP {name} Page reads that missed SQLite's cache, by where they were served from.\n# TYPE {name} counter"
    );
    for (source, counter) in [
        ("memory", &m.reads_memory_total),
        ("file", &m.reads_file_total),
        ("prefetch", &m.reads_prefetch_total),
        ("pageserver", &m.reads_pageserver_total),
    ] {
        let _ = writeln!(out, "{name}{{source=\"{source}\"}} {}", load(counter));
    }
    for (name, kind, help, value) in [
        (
            "cambium_compute_prefetch_requested_pages_total",
            "counter",
            "Pages requested ahead of readers on the GetPages stream.",
            load(&m.prefetch_requested_pages_total),
        ),
        (
            "cambium_compute_prefetch_wasted_pages_total",
            "counter",
            "Prefetched pages dropped without being read.",
            load(&m.prefetch_wasted_pages_total),
        ),
        (
            "cambium_compute_cache_evictions_total",
            "counter",
            "Pages evicted from the memory budget.",
            load(&m.cache_evictions_total),
        ),
        (
            "cambium_compute_file_cache_writes_total",
            "counter",
            "Pages written to the local file cache.",
            load(&m.file_cache_writes_total),
        ),
        (
            "cambium_compute_file_cache_corrupt_total",
            "counter",
            "Local file cache entries that failed their check (dropped, never served).",
            load(&m.file_cache_corrupt_total),
        ),
        (
            "cambium_compute_file_cache_write_errors_total",
            "counter",
            "Local file cache writes that failed (the file cache is then off).",
            load(&m.file_cache_write_errors_total),
        ),
        (
            "cambium_compute_cache_memory_bytes",
            "gauge",
            "Bytes of pages (and their bookkeeping) held in the memory budget.",
            load(&m.cache_memory_bytes),
        ),
        (
            "cambium_compute_cache_memory_budget_bytes",
            "gauge",
            "The memory budget for pages.",
            load(&m.cache_memory_budget_bytes),
        ),
        (
            "cambium_compute_file_cache_bytes",
            "gauge",
            "Bytes of pages held in the local file cache.",
            load(&m.file_cache_bytes),
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_metric_once_and_gauges_never_wrap() {
        let out = render();
        for name in [
            "cambium_compute_page_reads_total{source=\"prefetch\"}",
            "cambium_compute_prefetch_wasted_pages_total",
            "cambium_compute_file_cache_bytes",
        ] {
            assert_eq!(out.matches(&format!("\n{name} ")).count(), 1, "{name} in {out}");
        }
        let gauge = AtomicU64::new(5);
        adjust(&gauge, 10, 0);
        assert_eq!(gauge.load(Ordering::Relaxed), 0);
        adjust(&gauge, 0, 7);
        assert_eq!(gauge.load(Ordering::Relaxed), 7);
    }
}
