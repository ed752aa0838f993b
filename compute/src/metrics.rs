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
//! - `cambium_compute_store_starts_total`, `cambium_compute_store_start_election_microseconds_total` (the
//!   proposer's campaign, with the timeline's ancestry asked meanwhile), `cambium_compute_store_start_db_size_microseconds_total`
//!   (the `GetDbSize` after it): what a branch's first session waits for before its first query (issue 12 item 6).
//! - Where a statement's time goes (issue 12 item 8; `scripts/bench-commit-stages.sh` reads them):
//!   `cambium_compute_session_calls_total` with `…_session_call_microseconds_total` (SQLite's work for one
//!   call from the wire: a simple query, an Execute, a Describe) and `…_session_run_microseconds_total` (the
//!   same calls with their watching by the statements' watchdog: both run on the connection's own thread); `cambium_compute_commits_total` with `…_commit_sync_microseconds_total` (the VFS's xSync: the
//!   store's commit: with early lock release only its hand-over to the proposer),
//!   `…_commit_append_wait_microseconds_total` (SQLite threads waiting for acknowledgements, inside the
//!   commit or after the call), `…_session_durable_wait_microseconds_total` (a session call's wait, after its
//!   SQLite work, until what it read or wrote is durable: `vfs::with_deferred_durability`) and
//!   `…_commit_quorum_microseconds_total` (the proposer's appends, on the store's runtime: the safekeepers'
//!   writes and a majority's acknowledgement).
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
    /// Stores started (a branch's first session, or one after its store stopped).
    pub store_starts_total: AtomicU64,
    /// Microseconds the stores' starts spent campaigning (and asking for the timeline's ancestry meanwhile).
    pub store_start_election_us_total: AtomicU64,
    /// Microseconds the stores' starts spent on `GetDbSize` after the election.
    pub store_start_db_size_us_total: AtomicU64,
    /// Calls from the wire into a session (simple query, Execute, Describe, COPY messages).
    pub session_calls_total: AtomicU64,
    /// Microseconds those calls ran on the session's SQLite thread.
    pub session_call_us_total: AtomicU64,
    /// Microseconds those calls took as the connection's async side saw them (hand-offs included).
    pub session_run_us_total: AtomicU64,
    /// Microseconds session calls waited, after their SQLite work, for durability.
    pub session_durable_wait_us_total: AtomicU64,
    /// Commits of the VFS (xSync with pages to commit).
    pub commits_total: AtomicU64,
    /// Microseconds of those commits, the whole store commit.
    pub commit_sync_us_total: AtomicU64,
    /// Microseconds the commits' SQLite threads waited for the proposer's answer.
    pub commit_append_wait_us_total: AtomicU64,
    /// Microseconds of the proposer's appends of commit records (one per record or part), on the runtime.
    pub commit_quorum_us_total: AtomicU64,
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
    store_starts_total: AtomicU64::new(0),
    store_start_election_us_total: AtomicU64::new(0),
    store_start_db_size_us_total: AtomicU64::new(0),
    session_calls_total: AtomicU64::new(0),
    session_call_us_total: AtomicU64::new(0),
    session_run_us_total: AtomicU64::new(0),
    session_durable_wait_us_total: AtomicU64::new(0),
    commits_total: AtomicU64::new(0),
    commit_sync_us_total: AtomicU64::new(0),
    commit_append_wait_us_total: AtomicU64::new(0),
    commit_quorum_us_total: AtomicU64::new(0),
    cache_memory_bytes: AtomicU64::new(0),
    cache_memory_budget_bytes: AtomicU64::new(0),
    file_cache_bytes: AtomicU64::new(0),
};

impl Metrics {
    /// Counts one store start that spent `election_us` campaigning and `db_size_us` on `GetDbSize`.
    pub fn record_store_start(&self, election_us: u128, db_size_us: u128) {
        self.store_starts_total.fetch_add(1, Ordering::Relaxed);
        let saturated = |us: u128| u64::try_from(us).unwrap_or(u64::MAX);
        self.store_start_election_us_total
            .fetch_add(saturated(election_us), Ordering::Relaxed);
        self.store_start_db_size_us_total
            .fetch_add(saturated(db_size_us), Ordering::Relaxed);
    }

    /// Counts one call into a session whose SQLite work took `call` and which took `run` in all.
    pub fn record_session_call(&self, call: std::time::Duration, run: std::time::Duration) {
        self.session_calls_total.fetch_add(1, Ordering::Relaxed);
        self.session_call_us_total.fetch_add(micros(call), Ordering::Relaxed);
        self.session_run_us_total.fetch_add(micros(run), Ordering::Relaxed);
    }

    /// Counts one VFS commit that took `sync` in all.
    pub fn record_commit_sync(&self, sync: std::time::Duration) {
        self.commits_total.fetch_add(1, Ordering::Relaxed);
        self.commit_sync_us_total.fetch_add(micros(sync), Ordering::Relaxed);
    }

    /// Adds `elapsed` to the counter `total` (one of the `…_us_total` fields).
    pub fn add_micros(total: &AtomicU64, elapsed: std::time::Duration) {
        total.fetch_add(micros(elapsed), Ordering::Relaxed);
    }

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

/// `elapsed` in whole microseconds, saturated.
fn micros(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
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
            "cambium_compute_store_starts_total",
            "counter",
            "Branch stores started (a first session, or one after the store stopped).",
            load(&m.store_starts_total),
        ),
        (
            "cambium_compute_store_start_election_microseconds_total",
            "counter",
            "Time store starts spent campaigning for the branch's WAL (ancestry asked meanwhile).",
            load(&m.store_start_election_us_total),
        ),
        (
            "cambium_compute_store_start_db_size_microseconds_total",
            "counter",
            "Time store starts spent asking the pageserver for the database size after the election.",
            load(&m.store_start_db_size_us_total),
        ),
        (
            "cambium_compute_session_calls_total",
            "counter",
            "Calls from the wire into a session (simple query, Execute, Describe, COPY messages).",
            load(&m.session_calls_total),
        ),
        (
            "cambium_compute_session_call_microseconds_total",
            "counter",
            "Time those calls ran on the session's SQLite thread.",
            load(&m.session_call_us_total),
        ),
        (
            "cambium_compute_session_run_microseconds_total",
            "counter",
            "Time those calls took seen from the connection's async side (the hand-offs included).",
            load(&m.session_run_us_total),
        ),
        (
            "cambium_compute_session_durable_wait_microseconds_total",
            "counter",
            "Time session calls waited after their SQLite work until what they read or wrote was durable.",
            load(&m.session_durable_wait_us_total),
        ),
        (
            "cambium_compute_commits_total",
            "counter",
            "Commits of the VFS (an xSync with pages to commit).",
            load(&m.commits_total),
        ),
        (
            "cambium_compute_commit_sync_microseconds_total",
            "counter",
            "Time of those commits (the store's commit from the VFS's xSync; with early lock release, its hand-over).",
            load(&m.commit_sync_us_total),
        ),
        (
            "cambium_compute_commit_append_wait_microseconds_total",
            "counter",
            "Time SQLite threads waited for commits' acknowledgements (in the commit or after the call).",
            load(&m.commit_append_wait_us_total),
        ),
        (
            "cambium_compute_commit_quorum_microseconds_total",
            "counter",
            "Time of the proposer's appends of commit records on the store's runtime (safekeepers and quorum).",
            load(&m.commit_quorum_us_total),
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
