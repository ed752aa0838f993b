//! The uploader: one task that keeps the remote copy of every timeline up to date, and the
//! `remote_consistent_lsn` of each.
//!
//! The background loop [`UploadQueue::schedule`]s a timeline after it flushed, compacted or collected it;
//! scheduling never blocks (a timeline is queued at most once, whatever the rate), so ingest never waits on
//! uploads. The uploader runs at most `uploads_in_flight_max` timeline jobs at once, one per timeline, and
//! every `scan_interval_ms` looks for work the queue missed: timelines changed since their last upload (after
//! a failure, once `retry_interval_ms` passed), new timelines, deleted timelines and tenants.
//!
//! A job uploads one consistent snapshot in the order the parent module's doc argues for: layers,
//! timestamps, metadata, the tenant's branch log; then advances `remote_consistent_lsn`; then deletes the
//! remote layers the new metadata no longer names. A deleted timeline's objects go only after the remote
//! branch log records the deletion; a deleted tenant's `branches.log` goes first, so a rebuild never finds a
//! live timeline with missing files.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use storage::layer::desc::LayerDesc;
use storage::metadata::TimelineMetadata;
use storage::{Lsn, TenantId, Timeline, TimelineId};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

use super::store::{RemoteError, RemoteStorage};
use crate::tenants::TenantManager;

mod procedures;

use procedures::{delete_tenant, delete_timeline, upload_timeline};

/// Snapshots of one timeline tried in one job before giving up until the next: a layer vanishing mid-upload
/// means a compaction or GC replaced the snapshot, and the next one is taken at once.
const SNAPSHOT_ATTEMPTS_MAX: u32 = 3;

use storage::TimelineKey;

/// How the uploader paces itself.
#[derive(Clone, Debug)]
pub struct UploaderConfig {
    /// Timelines uploading at once, at most.
    pub uploads_in_flight_max: usize,
    /// How often every timeline is checked for work the queue did not bring.
    pub scan_interval_ms: u64,
    /// After a failed job, the timeline waits this long before the next one.
    pub retry_interval_ms: u64,
    /// At shutdown, the last upload (of what the final checkpoint wrote) gives up after this long.
    pub shutdown_upload_timeout_ms: u64,
}

impl Default for UploaderConfig {
    fn default() -> Self {
        UploaderConfig {
            uploads_in_flight_max: 2,
            scan_interval_ms: 1_000,
            retry_interval_ms: 2_000,
            shutdown_upload_timeout_ms: 10_000,
        }
    }
}

/// The `remote_consistent_lsn` of every timeline uploaded at least once: everything at or below it is
/// durable in remote storage, where a rebuild finds it.
#[derive(Debug, Default)]
pub struct RemoteConsistentLsns {
    lsns: Mutex<HashMap<TimelineKey, Lsn>>,
}

impl RemoteConsistentLsns {
    /// The timeline's `remote_consistent_lsn`, or `None` if nothing of it is known to be uploaded.
    pub fn get(&self, tenant: TenantId, timeline: TimelineId) -> Option<Lsn> {
        self.lsns.lock().get(&(tenant, timeline)).copied()
    }

    /// Moves the LSN forward (never back).
    fn advance(&self, key: TimelineKey, lsn: Lsn) {
        let mut lsns = self.lsns.lock();
        let entry = lsns.entry(key).or_insert(lsn);
        *entry = (*entry).max(lsn);
    }

    fn forget(&self, key: TimelineKey) {
        self.lsns.lock().remove(&key);
    }

    fn forget_tenant(&self, tenant: TenantId) {
        self.lsns.lock().retain(|(t, _), _| *t != tenant);
    }
}

/// One unit of uploader work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Work {
    /// Bring the timeline's remote copy up to date (or remove it, if the timeline is gone).
    Timeline(TenantId, TimelineId),
    /// Remove a deleted tenant's remote copy.
    DeleteTenant(TenantId),
}

/// Timelines waiting for an upload; see [`UploadQueue::schedule`].
#[derive(Debug, Default)]
pub struct UploadQueue {
    /// A set, so its size is bounded by the number of timelines whatever the rate of requests.
    pending: Mutex<BTreeSet<Work>>,
    wake: Notify,
}

impl UploadQueue {
    /// Asks for the timeline's current state to be uploaded. Never blocks or waits: a timeline already
    /// queued stays queued once.
    pub fn schedule(&self, tenant: TenantId, timeline: TimelineId) {
        let mut pending = self.pending.lock();
        pending.insert(Work::Timeline(tenant, timeline));
        publish_queue_length(pending.len());
        drop(pending);
        self.wake.notify_one();
    }

    /// Queues without waking the uploader (work put back for later).
    fn put_back(&self, work: impl IntoIterator<Item = Work>) {
        let mut pending = self.pending.lock();
        pending.extend(work);
        publish_queue_length(pending.len());
    }

    fn take_all(&self) -> Vec<Work> {
        let taken = std::mem::take(&mut *self.pending.lock());
        publish_queue_length(0);
        taken.into_iter().collect()
    }
}

fn publish_queue_length(length: usize) {
    crate::metrics::METRICS
        .upload_queue_length
        .store(length as u64, std::sync::atomic::Ordering::Relaxed);
}

/// What the uploader knows of one timeline's remote copy.
#[derive(Debug, Default)]
struct TimelineRemote {
    /// Whether the remote copy was listed (after a start, the remote may hold anything).
    initialized: bool,
    /// Layer objects known to exist remotely: file name → size.
    layers: HashMap<String, u64>,
    /// The metadata last uploaded (or found remotely).
    uploaded: Option<TimelineMetadata>,
    /// Entries in the remote timestamps object.
    timestamps_count: u64,
    /// No job before this (after a failure).
    retry_at: Option<Instant>,
}

enum Slot {
    Idle(TimelineRemote),
    /// A job has the state.
    Busy,
}

/// What the uploader knows of one tenant's remote copy. Behind an async lock: timeline jobs of one tenant
/// share its branch log, and an older log must never overwrite a newer one.
#[derive(Debug, Default)]
struct TenantRemote {
    /// Bytes of the local branch log last uploaded; `None` until the first upload of this process.
    log_bytes_uploaded: Option<u64>,
}

#[derive(Clone)]
struct Ctx {
    remote: Arc<RemoteStorage>,
    /// Asked before each remote layer deletion whether the tenant's deletions are held (a move in progress).
    manager: Arc<TenantManager>,
    lsns: Arc<RemoteConsistentLsns>,
}

enum Outcome {
    Uploaded,
    Deleted,
}

struct JobDone {
    work: Work,
    state: TimelineRemote,
    outcome: Result<Outcome, RemoteError>,
}

enum Start {
    Job(BoxFuture<'static, JobDone>),
    /// The timeline has a job running: try again later.
    Defer,
    Nothing,
}

/// Whether [`Uploader::collect_work`] honours the pause after a failure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backoff {
    Respect,
    Ignore,
}

/// Keeps the remote copy of every tenant up to date; see the module doc.
pub struct Uploader {
    manager: Arc<TenantManager>,
    ctx: Ctx,
    config: UploaderConfig,
    queue: Arc<UploadQueue>,
    timelines: HashMap<TimelineKey, Slot>,
    tenants: HashMap<TenantId, Arc<tokio::sync::Mutex<TenantRemote>>>,
    /// Deleted tenants whose remote copy is still to be removed: when to try next (`None`: running).
    deleting: HashMap<TenantId, Option<Instant>>,
}

impl Uploader {
    /// An uploader of `manager`'s tenants to `remote`.
    pub fn new(manager: Arc<TenantManager>, remote: Arc<RemoteStorage>, config: UploaderConfig) -> Uploader {
        Uploader {
            ctx: Ctx {
                remote,
                manager: Arc::clone(&manager),
                lsns: Arc::new(RemoteConsistentLsns::default()),
            },
            manager,
            config,
            queue: Arc::new(UploadQueue::default()),
            timelines: HashMap::new(),
            tenants: HashMap::new(),
            deleting: HashMap::new(),
        }
    }

    /// The queue the background loop schedules uploads on.
    pub fn queue(&self) -> Arc<UploadQueue> {
        Arc::clone(&self.queue)
    }

    /// The `remote_consistent_lsn`s this uploader advances.
    pub fn remote_consistent_lsns(&self) -> Arc<RemoteConsistentLsns> {
        Arc::clone(&self.ctx.lsns)
    }

    /// The pacing.
    pub fn config(&self) -> &UploaderConfig {
        &self.config
    }

    /// Runs until `stop` turns true, then waits for the jobs in flight and returns itself (for a last
    /// [`Uploader::upload_all`]).
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Uploader {
        let mut jobs: JoinSet<JobDone> = JoinSet::new();
        let mut scan = tokio::time::interval(Duration::from_millis(self.config.scan_interval_ms.max(1)));
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let queue = Arc::clone(&self.queue);
        loop {
            if *stop.borrow() {
                break;
            }
            self.start_jobs(&mut jobs);
            tokio::select! {
                _ = scan.tick() => {
                    let work = self.collect_work(Backoff::Respect);
                    self.queue.put_back(work);
                }
                () = queue.wake.notified() => {}
                Some(joined) = jobs.join_next(), if !jobs.is_empty() => {
                    // The error is logged where it is recorded.
                    let _ = self.finish(joined_or_panic(joined));
                }
                changed = stop.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
        while let Some(joined) = jobs.join_next().await {
            let _ = self.finish(joined_or_panic(joined));
        }
        self
    }

    /// Brings every timeline's remote copy up to date now (and removes deleted ones), one at a time, ignoring
    /// the pause after failures. Returns the first error (after trying everything). For the shutdown path
    /// and tests.
    pub async fn upload_all(&mut self) -> Result<(), RemoteError> {
        let mut first_error = None;
        let mut work = self.queue.take_all();
        work.extend(self.collect_work(Backoff::Ignore));
        work.sort();
        work.dedup();
        for item in work {
            if let Start::Job(job) = self.start(item) {
                let done = job.await;
                if let Err(e) = self.finish(done) {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Every timeline that needs a job, and tenants whose deletion is due.
    fn collect_work(&self, backoff: Backoff) -> Vec<Work> {
        let now = Instant::now();
        let due = |retry_at: Option<Instant>| backoff == Backoff::Ignore || retry_at.is_none_or(|at| at <= now);
        let mut work = Vec::new();
        let mut local = HashSet::new();
        for tenant_id in self.manager.tenant_ids() {
            if self.manager.is_secondary(tenant_id) {
                continue;
            }
            let Ok(tenant) = self.manager.tenant(tenant_id) else {
                continue;
            };
            for timeline in tenant.timelines() {
                let key = (tenant_id, timeline.id());
                local.insert(key);
                let needed = match self.timelines.get(&key) {
                    None => true,
                    Some(Slot::Busy) => false,
                    Some(Slot::Idle(state)) => due(state.retry_at) && (!state.initialized || differs(state, &timeline)),
                };
                if needed {
                    work.push(Work::Timeline(tenant_id, timeline.id()));
                }
            }
        }
        for (key, slot) in &self.timelines {
            if let Slot::Idle(state) = slot {
                if !local.contains(key) && due(state.retry_at) {
                    work.push(Work::Timeline(key.0, key.1));
                }
            }
        }
        for (tenant, retry_at) in &self.deleting {
            if let Some(at) = retry_at {
                if due(Some(*at)) {
                    work.push(Work::DeleteTenant(*tenant));
                }
            }
        }
        work
    }

    fn start_jobs(&mut self, jobs: &mut JoinSet<JobDone>) {
        let mut later = Vec::new();
        let mut pending = self.queue.take_all().into_iter();
        while jobs.len() < self.config.uploads_in_flight_max.max(1) {
            let Some(work) = pending.next() else {
                break;
            };
            match self.start(work) {
                Start::Job(job) => {
                    jobs.spawn(job);
                }
                Start::Defer => later.push(work),
                Start::Nothing => {}
            }
        }
        later.extend(pending);
        // Not woken: a job ending or the next scan runs this again.
        self.queue.put_back(later);
    }

    fn tenant_state(&mut self, tenant: TenantId) -> Arc<tokio::sync::Mutex<TenantRemote>> {
        Arc::clone(self.tenants.entry(tenant).or_default())
    }

    /// Turns a unit of work into a job, taking the timeline's state out of its slot.
    fn start(&mut self, work: Work) -> Start {
        match work {
            Work::Timeline(tenant_id, timeline_id) => self.start_timeline(tenant_id, timeline_id),
            Work::DeleteTenant(tenant_id) => self.start_tenant_deletion(tenant_id),
        }
    }

    fn start_timeline(&mut self, tenant_id: TenantId, timeline_id: TimelineId) -> Start {
        let key = (tenant_id, timeline_id);
        if matches!(self.timelines.get(&key), Some(Slot::Busy)) {
            return Start::Defer;
        }
        let Ok(tenant) = self.manager.tenant(tenant_id) else {
            if self.timelines.contains_key(&key) || self.tenants.contains_key(&tenant_id) {
                return self.start_tenant_deletion(tenant_id);
            }
            return Start::Nothing;
        };
        let Some(guard) = self.manager.begin_upload(tenant_id) else {
            // Another pageserver owns its remote copy.
            return Start::Nothing;
        };
        let timeline = tenant.timeline(timeline_id).ok();
        let known = self.timelines.contains_key(&key);
        let state = match self.timelines.insert(key, Slot::Busy) {
            Some(Slot::Idle(state)) => state,
            _ => TimelineRemote::default(),
        };
        let ctx = self.ctx.clone();
        let tenant_dir = tenant.dir().to_path_buf();
        let tenant_state = self.tenant_state(tenant_id);
        let work = Work::Timeline(tenant_id, timeline_id);
        match timeline {
            Some(timeline) => {
                if state.initialized && !differs(&state, &timeline) {
                    self.timelines.insert(key, Slot::Idle(state));
                    return Start::Nothing;
                }
                Start::Job(
                    async move {
                        let _guard = guard;
                        let mut state = state;
                        let outcome =
                            upload_timeline(&ctx, tenant_id, &timeline, &tenant_dir, &tenant_state, &mut state)
                                .await
                                .map(|()| Outcome::Uploaded);
                        JobDone { work, state, outcome }
                    }
                    .boxed(),
                )
            }
            None if known => Start::Job(
                async move {
                    let _guard = guard;
                    let outcome = delete_timeline(&ctx, tenant_id, timeline_id, &tenant_dir, &tenant_state)
                        .await
                        .map(|()| Outcome::Deleted);
                    JobDone { work, state, outcome }
                }
                .boxed(),
            ),
            None => {
                self.timelines.remove(&key);
                Start::Nothing
            }
        }
    }

    fn start_tenant_deletion(&mut self, tenant_id: TenantId) -> Start {
        if self.manager.tenant(tenant_id).is_ok() {
            // Created again meanwhile: its uploads replace the old copy.
            self.deleting.remove(&tenant_id);
            return Start::Nothing;
        }
        if self.manager.is_detached(tenant_id) {
            let busy = self
                .timelines
                .iter()
                .any(|((t, _), slot)| *t == tenant_id && matches!(slot, Slot::Busy));
            if busy {
                return Start::Defer;
            }
            // Another pageserver owns its remote copy now: forget it, delete nothing.
            self.timelines.retain(|(t, _), _| *t != tenant_id);
            self.tenants.remove(&tenant_id);
            self.deleting.remove(&tenant_id);
            self.ctx.lsns.forget_tenant(tenant_id);
            tracing::info!(tenant = %tenant_id, "a detached tenant forgotten; its remote copy kept");
            return Start::Nothing;
        }
        if self.deleting.get(&tenant_id) == Some(&None) {
            return Start::Nothing;
        }
        let busy = self
            .timelines
            .iter()
            .any(|((t, _), slot)| *t == tenant_id && matches!(slot, Slot::Busy));
        if busy {
            return Start::Defer;
        }
        self.timelines.retain(|(t, _), _| *t != tenant_id);
        self.tenants.remove(&tenant_id);
        self.deleting.insert(tenant_id, None);
        let ctx = self.ctx.clone();
        Start::Job(
            async move {
                let outcome = delete_tenant(&ctx, tenant_id).await.map(|()| Outcome::Deleted);
                JobDone {
                    work: Work::DeleteTenant(tenant_id),
                    state: TimelineRemote::default(),
                    outcome,
                }
            }
            .boxed(),
        )
    }

    /// Records a job's end; returns its error (already logged).
    fn finish(&mut self, done: JobDone) -> Result<(), RemoteError> {
        let JobDone {
            work,
            mut state,
            outcome,
        } = done;
        let retry_at = Instant::now() + Duration::from_millis(self.config.retry_interval_ms);
        match (work, outcome) {
            (Work::Timeline(tenant, timeline), Ok(Outcome::Uploaded)) => {
                state.retry_at = None;
                self.timelines.insert((tenant, timeline), Slot::Idle(state));
                Ok(())
            }
            (Work::Timeline(tenant, timeline), Ok(Outcome::Deleted)) => {
                tracing::info!(%tenant, %timeline, "removed a deleted timeline from remote storage");
                self.timelines.remove(&(tenant, timeline));
                Ok(())
            }
            (Work::Timeline(tenant, timeline), Err(e)) => {
                tracing::warn!(%tenant, %timeline, error = %e, "remote upload failed; retrying later");
                state.retry_at = Some(retry_at);
                self.timelines.insert((tenant, timeline), Slot::Idle(state));
                Err(e)
            }
            (Work::DeleteTenant(tenant), Ok(_)) => {
                tracing::info!(%tenant, "removed a deleted tenant from remote storage");
                self.deleting.remove(&tenant);
                Ok(())
            }
            (Work::DeleteTenant(tenant), Err(e)) => {
                tracing::warn!(%tenant, error = %e, "removing a deleted tenant from remote storage failed");
                self.deleting.insert(tenant, Some(retry_at));
                Err(e)
            }
        }
    }
}

/// A job's result; a panic in a job is our bug and is carried on (STYLE 8).
fn joined_or_panic(joined: Result<JobDone, tokio::task::JoinError>) -> JobDone {
    match joined {
        Ok(done) => done,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Whether the timeline's layers, `disk_consistent_lsn` or GC cutoff differ from what was last uploaded
/// (cheap: in memory only).
fn differs(state: &TimelineRemote, timeline: &Timeline) -> bool {
    let Some(meta) = &state.uploaded else {
        return timeline.disk_consistent_lsn() > timeline.start_lsn();
    };
    if meta.disk_consistent_lsn != timeline.disk_consistent_lsn() || meta.gc_cutoff_lsn != timeline.gc_cutoff_lsn() {
        return true;
    }
    let mut local: Vec<String> = timeline.layer_descs().iter().map(LayerDesc::file_name).collect();
    let mut remote: Vec<String> = meta.layers.iter().map(LayerDesc::file_name).collect();
    local.sort();
    remote.sort();
    local != remote
}
