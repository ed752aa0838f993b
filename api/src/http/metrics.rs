//! Prometheus metrics of the API, in the text exposition format, at `/metrics`, for a key of the admin account
//! only (401 without a valid key, 403 with another account's): the database counts span every account, which
//! no other account may see. Prometheus sends the key with `authorization: {credentials_file: <data dir>/api_key}`
//! in its scrape config. A key rather than a separate loopback listener: one port to run and firewall, and a
//! scraper on another host works without a proxy.
//!
//! - `cambium_api_requests_total{method, route, status}`: requests by route template (`/v1/branches/{id}`),
//!   never by id, so the label set stays bounded (routes × methods × statuses).
//! - `cambium_api_request_duration_seconds`: a fixed-bucket histogram of request durations.
//! - `cambium_api_operations_in_progress`: operations queued or running in the worker.
//! - `cambium_api_databases{status}`: databases by status, read from the metadata when scraped.
//! - `cambium_pageserver_databases{pageserver}`: databases placed on each configured pageserver (issue 17 item 2;
//!   `databases.pageserver`, `NULL` counting for the first), read from the metadata when scraped.
//! - `cambium_timelines_under_replicated`: live timelines with fewer than three healthy safekeeper copies at the
//!   reconciler's last round (`crate::reconcile`); `cambium_reconcile_rounds_total`,
//!   `cambium_timeline_repairs_total` (copies rebuilt), `cambium_timeline_repair_failures_total` and
//!   `cambium_orphan_timelines_deleted_total`; `cambium_safekeeper_set_replacements_total` (dead safekeepers
//!   replaced in timelines' sets).
//! - `cambium_api_stage_seconds_sum{call, stage}` and `_count`: where successful calls and operations spend their
//!   time, stage by stage (`crate::stages`: the key check, the scope's read, each metadata read, the storage, …).
//! - The compute host's metrics (`compute::metrics`: page reads by source, prefetch hits and wasted prefetches,
//!   the caches' sizes), since it runs in the same process.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;

use super::AppState;
use crate::error::ApiError;

/// Upper bounds (seconds) of the duration buckets.
const BUCKETS_SECONDS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0,
];

/// The API's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// (method, route, status) → requests.
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    buckets: [AtomicU64; BUCKETS_SECONDS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Metrics {
    fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        *self
            .requests
            .lock()
            .entry((method.to_owned(), route.to_owned(), status))
            .or_default() += 1;
        for (bucket, bound) in self.buckets.iter().zip(BUCKETS_SECONDS) {
            if seconds <= bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        // Truncation to whole microseconds is intended; a duration does not reach u64::MAX µs.
        self.sum_us.fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }
}

/// Counts each routed request (a `route_layer`, so the route template is known).
pub(crate) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().to_string();
    let started = Instant::now();
    let call = || format!("{method} {route}");
    let response = crate::stages::timed(call, |r: &Response| r.status().is_success(), next.run(request)).await;
    state.metrics.observe(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// Serves the text exposition.
pub(crate) async fn serve(State(state): State<AppState>) -> Result<Response, ApiError> {
    let databases = state.control.blocking(|store| store.all_databases()).await?;
    let mut by_status: BTreeMap<&'static str, u64> = BTreeMap::new();
    for database in &databases {
        *by_status.entry(database.status.as_str()).or_default() += 1;
    }
    let metrics = &state.metrics;
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "# HELP cambium_api_requests_total Requests by method, route and status."
    );
    let _ = writeln!(out, "# TYPE cambium_api_requests_total counter");
    for ((method, route, status), count) in metrics.requests.lock().iter() {
        let _ = writeln!(
            out,
            "cambium_api_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {count}"
        );
    }
    let _ = writeln!(out, "# HELP cambium_api_request_duration_seconds Request durations.");
    let _ = writeln!(out, "# TYPE cambium_api_request_duration_seconds histogram");
    for (bucket, bound) in metrics.buckets.iter().zip(BUCKETS_SECONDS) {
        let _ = writeln!(
            out,
            "cambium_api_request_duration_seconds_bucket{{le=\"{bound}\"}} {}",
            bucket.load(Ordering::Relaxed)
        );
    }
    let count = metrics.count.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "cambium_api_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
    );
    let _ = writeln!(
        out,
        "cambium_api_request_duration_seconds_sum {}",
        metrics.sum_us.load(Ordering::Relaxed) as f64 / 1e6
    );
    let _ = writeln!(out, "cambium_api_request_duration_seconds_count {count}");
    let _ = writeln!(
        out,
        "# HELP cambium_api_operations_in_progress Operations queued or running."
    );
    let _ = writeln!(out, "# TYPE cambium_api_operations_in_progress gauge");
    let _ = writeln!(
        out,
        "cambium_api_operations_in_progress {}",
        state.control.operations_in_progress()
    );
    let _ = writeln!(out, "# HELP cambium_api_databases Databases by status.");
    let _ = writeln!(out, "# TYPE cambium_api_databases gauge");
    for status in ["provisioning", "active", "suspended", "failed"] {
        let _ = writeln!(
            out,
            "cambium_api_databases{{status=\"{status}\"}} {}",
            by_status.get(status).copied().unwrap_or(0)
        );
    }
    let pageservers = state.control.backend().pageserver_addresses();
    let loads = state.control.blocking(|store| store.pageserver_loads()).await?;
    let _ = writeln!(
        out,
        "# HELP cambium_pageserver_databases Databases placed on each pageserver."
    );
    let _ = writeln!(out, "# TYPE cambium_pageserver_databases gauge");
    for (index, address) in pageservers.iter().enumerate() {
        let placed: u64 = loads
            .iter()
            .filter(|load| match &load.pageserver {
                Some(placed) => placed == address,
                None => index == 0,
            })
            .map(|load| load.databases)
            .sum();
        let _ = writeln!(out, "cambium_pageserver_databases{{pageserver=\"{address}\"}} {placed}");
    }
    let replicas = state.control.replicas();
    let _ = writeln!(
        out,
        "# HELP cambium_timelines_under_replicated Live timelines with fewer than three healthy safekeeper copies."
    );
    let _ = writeln!(out, "# TYPE cambium_timelines_under_replicated gauge");
    let _ = writeln!(
        out,
        "cambium_timelines_under_replicated {}",
        replicas.under_replicated()
    );
    for (name, help, value) in [
        (
            "cambium_reconcile_rounds_total",
            "Reconciler rounds completed.",
            replicas.rounds(),
        ),
        (
            "cambium_timeline_repairs_total",
            "Safekeeper copies of timelines rebuilt from their peers.",
            replicas.repairs(),
        ),
        (
            "cambium_orphan_timelines_deleted_total",
            "Timelines the storage held and no metadata named, deleted.",
            replicas.orphans_deleted(),
        ),
        (
            "cambium_timeline_repair_failures_total",
            "Rebuilds of safekeeper copies tried that did not succeed.",
            replicas.repair_failures(),
        ),
        (
            "cambium_safekeeper_set_replacements_total",
            "Dead safekeepers replaced in timelines' safekeeper sets.",
            replicas.replacements(),
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        let _ = writeln!(out, "{name} {value}");
    }
    out.push_str(&crate::stages::render());
    // The compute host runs in this process: its page reads, prefetching and caches.
    out.push_str(&compute::metrics::render());
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response())
}
