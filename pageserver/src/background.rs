//! Background work for every timeline: freeze layers that have been open too long, flush frozen layers,
//! compact, collect garbage. Blocking work (it writes and fsyncs files) runs on the blocking pool, at most
//! `concurrency_max` jobs at a time across all timelines. With remote storage, a timeline whose files changed
//! is then scheduled for upload (which never blocks: see [`crate::remote::UploadQueue`]).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use storage::Timeline;
use tokio::sync::{watch, Semaphore};

use crate::remote::UploadQueue;
use crate::tenants::TenantManager;

/// How often each kind of work runs.
#[derive(Clone, Debug)]
pub struct BackgroundConfig {
    /// Freeze stale layers and flush frozen ones this often.
    pub flush_interval_ms: u64,
    /// Compact this often.
    pub compaction_interval_ms: u64,
    /// Run GC this often.
    pub gc_interval_ms: u64,
    /// Blocking jobs running at once, at most.
    pub concurrency_max: usize,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        BackgroundConfig {
            flush_interval_ms: 200,
            compaction_interval_ms: 10_000,
            gc_interval_ms: 60_000,
            concurrency_max: 2,
        }
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Runs the background loop until `stop` turns true; timelines whose files changed are scheduled on `uploads`
/// (if remote storage is configured).
pub async fn run(
    manager: Arc<TenantManager>,
    config: BackgroundConfig,
    uploads: Option<Arc<UploadQueue>>,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(config.concurrency_max.max(1)));
    let mut tick = tokio::time::interval(Duration::from_millis(config.flush_interval_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_compaction = Instant::now();
    let mut last_gc = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        let compact = last_compaction.elapsed() >= Duration::from_millis(config.compaction_interval_ms);
        let gc = last_gc.elapsed() >= Duration::from_millis(config.gc_interval_ms);
        if compact {
            last_compaction = Instant::now();
        }
        if gc {
            last_gc = Instant::now();
        }
        let mut jobs = Vec::new();
        for tenant_id in manager.tenant_ids() {
            let Ok(tenant) = manager.tenant(tenant_id) else {
                continue;
            };
            for timeline in tenant.timelines() {
                timeline.freeze_if_stale();
                if !(timeline.has_frozen_layers() || compact || gc) {
                    continue;
                }
                let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                    return;
                };
                let uploads = uploads.clone();
                jobs.push(tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    if maintain(&timeline, compact, gc) {
                        if let Some(uploads) = uploads {
                            uploads.schedule(tenant_id, timeline.id());
                        }
                    }
                }));
            }
        }
        for job in jobs {
            let _ = job.await;
        }
    }
}

/// Flushes, compacts and collects one timeline; returns whether its files changed.
fn maintain(timeline: &Timeline, compact: bool, gc: bool) -> bool {
    let id = timeline.id();
    let mut changed = false;
    if timeline.has_frozen_layers() {
        if let Err(e) = timeline.flush_frozen_layers() {
            tracing::error!(timeline = %id, error = %e, "flush failed");
            return false;
        }
        changed = true;
    }
    if compact {
        match timeline.compact() {
            Ok(outcome) if outcome != storage::CompactionOutcome::default() => {
                tracing::info!(timeline = %id, ?outcome, "compacted");
                changed = true;
            }
            Ok(_) => {}
            Err(e) => tracing::error!(timeline = %id, error = %e, "compaction failed"),
        }
    }
    if gc {
        let cutoff_before = timeline.gc_cutoff_lsn();
        match timeline.gc(now_us()) {
            Ok(outcome) => {
                if outcome.layers_removed > 0 {
                    tracing::info!(timeline = %id, ?outcome, "collected");
                }
                changed |= outcome.layers_removed > 0 || outcome.gc_cutoff_lsn != cutoff_before;
            }
            Err(e) => tracing::error!(timeline = %id, error = %e, "gc failed"),
        }
    }
    changed
}
