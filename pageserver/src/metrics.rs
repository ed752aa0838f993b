//! Prometheus metrics of the pageserver, in the text exposition format, served at `/metrics`.
//!
//! Counters and the get-page histogram are process-wide atomics (no lock on the read path); per-timeline
//! gauges (LSNs, ingest lag, layers, read amplification) are read from the timelines when scraped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use storage::{Lsn, TenantId, TimelineId};

use crate::tenants::TenantManager;

/// Upper bounds (seconds) of the get-page latency buckets.
const GET_PAGE_BUCKETS_SECONDS: [f64; 12] = [
    0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.005, 0.025, 0.1, 1.0,
];

/// A fixed-bucket histogram on atomics.
pub struct Histogram {
    buckets: [AtomicU64; GET_PAGE_BUCKETS_SECONDS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    const fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; GET_PAGE_BUCKETS_SECONDS.len()],
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = GET_PAGE_BUCKETS_SECONDS.iter().position(|&bound| seconds <= bound) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0u64;
        for (bound, bucket) in GET_PAGE_BUCKETS_SECONDS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9);
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// Process-wide pageserver metrics.
pub struct Metrics {
    /// Time to read one page from the engine (after any wait for ingest).
    pub get_page_seconds: Histogram,
    /// Page reads that failed.
    pub get_page_errors_total: AtomicU64,
    /// WAL bytes ingested.
    pub wal_ingested_bytes_total: AtomicU64,
    /// Timelines waiting in the upload queue.
    pub upload_queue_length: AtomicU64,
    /// Per timeline: the commit LSN of the safekeeper being followed, as of its last message.
    followed_commit_lsn: Mutex<BTreeMap<(TenantId, TimelineId), Lsn>>,
}

/// The metrics of this process.
pub static METRICS: Metrics = Metrics {
    get_page_seconds: Histogram::new(),
    get_page_errors_total: AtomicU64::new(0),
    wal_ingested_bytes_total: AtomicU64::new(0),
    upload_queue_length: AtomicU64::new(0),
    followed_commit_lsn: parking_lot::const_mutex(BTreeMap::new()),
};

impl Metrics {
    /// Records the commit LSN the followed safekeeper reported for a timeline (for the ingest lag).
    pub fn set_followed_commit_lsn(&self, tenant: TenantId, timeline: TimelineId, lsn: Lsn) {
        self.followed_commit_lsn.lock().insert((tenant, timeline), lsn);
    }

    /// The whole exposition.
    pub fn render(&self, manager: &TenantManager) -> String {
        let mut out = String::new();
        self.get_page_seconds.render(
            "cambium_pageserver_get_page_seconds",
            "Time to read one page from the storage engine.",
            &mut out,
        );
        counter(
            &mut out,
            "cambium_pageserver_get_page_errors_total",
            "Page reads that failed.",
            self.get_page_errors_total.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "cambium_pageserver_wal_ingested_bytes_total",
            "WAL bytes ingested.",
            self.wal_ingested_bytes_total.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP cambium_pageserver_upload_queue_length Timelines waiting to be uploaded to remote storage.\n\
             # TYPE cambium_pageserver_upload_queue_length gauge\ncambium_pageserver_upload_queue_length {}",
            self.upload_queue_length.load(Ordering::Relaxed)
        );
        let followed = self.followed_commit_lsn.lock().clone();
        let gauges: [(&str, &str); 7] = [
            ("cambium_pageserver_last_record_lsn", "End of the last ingested record."),
            (
                "cambium_pageserver_disk_consistent_lsn",
                "Everything up to here is in fsynced layer files.",
            ),
            (
                "cambium_pageserver_ingest_lag_bytes",
                "Followed safekeeper's commit LSN minus the last ingested LSN.",
            ),
            ("cambium_pageserver_layers", "On-disk layer files."),
            ("cambium_pageserver_layer_bytes", "Bytes of on-disk layer files."),
            (
                "cambium_pageserver_uncached_reads_total",
                "Page reads that reconstructed a page (missed the cache).",
            ),
            (
                "cambium_pageserver_layers_visited_total",
                "Layers visited by uncached reads (divide by reads: read amplification).",
            ),
        ];
        let mut rows: Vec<[String; 7]> = Vec::new();
        let mut labels = Vec::new();
        for tenant_id in manager.tenant_ids() {
            let Ok(tenant) = manager.tenant(tenant_id) else {
                continue;
            };
            for timeline in tenant.timelines() {
                let layers = timeline.layer_descs();
                let last = timeline.last_record_lsn();
                let lag = followed
                    .get(&(tenant_id, timeline.id()))
                    .map_or(0, |c| c.0.saturating_sub(last.0));
                let (reads, visited) = timeline.read_amplification_counters();
                labels.push(format!("tenant_id=\"{tenant_id}\",timeline_id=\"{}\"", timeline.id()));
                rows.push([
                    last.0.to_string(),
                    timeline.disk_consistent_lsn().0.to_string(),
                    lag.to_string(),
                    layers.len().to_string(),
                    layers.iter().map(|d| d.size_bytes).sum::<u64>().to_string(),
                    reads.to_string(),
                    visited.to_string(),
                ]);
            }
        }
        for (column, (name, help)) in gauges.iter().enumerate() {
            let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (row, label) in rows.iter().zip(&labels) {
                let _ = writeln!(out, "{name}{{{label}}} {}", row[column]);
            }
        }
        out
    }
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
}

/// Serves `GET /metrics` on `listener` until `shutdown` resolves.
pub async fn serve(
    manager: Arc<TenantManager>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let manager = Arc::clone(&manager);
            async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                    METRICS.render(&manager),
                )
            }
        }),
    );
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let histogram = Histogram::new();
        histogram.observe(Duration::from_micros(3));
        histogram.observe(Duration::from_micros(70));
        histogram.observe(Duration::from_secs(5));
        let mut out = String::new();
        histogram.render("h", "help", &mut out);
        assert!(out.contains("h_bucket{le=\"0.000005\"} 1"), "{out}");
        assert!(out.contains("h_bucket{le=\"0.0001\"} 2"), "{out}");
        assert!(out.contains("h_bucket{le=\"+Inf\"} 3"), "{out}");
        assert!(out.contains("h_count 3"), "{out}");
    }
}
