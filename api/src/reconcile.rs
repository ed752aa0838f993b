//! The reconciler: at start and every [`ReconcileConfig::period_ms`], the control plane compares what the
//! metadata says the storage holds with what the safekeepers hold, and repairs the difference.
//!
//! - **Safekeeper sets** (`crate::safekeeper_sets`). Every round probes every configured safekeeper
//!   (`ListTimelines`) and records who answered. A live timeline whose set holds a safekeeper dead for
//!   [`ReconcileConfig::safekeeper_dead_after_ms`] gets a live one in its place (`replace_member`: fence the
//!   survivors with a vote in a higher term, record the new set, re-point the compute), and the repair below
//!   then pulls the new member's copy from the survivors. Branches this host serves on another set than their
//!   timeline's (moved by another API process, or a failed re-point) are re-pointed. Everything below works on
//!   each timeline's set, not on every safekeeper; a copy outside its timeline's set is a leftover.
//! - **Replica repair.** For every live timeline ([`Store::live_timelines`]: on a branch or branched from, of an
//!   `active` or `suspended` database), every safekeeper is asked for its copy's state. A copy that is missing
//!   (NOT_FOUND), broken (INTERNAL), or so far behind that no peer still holds the WAL it needs next (its flush
//!   LSN below every peer's oldest LSN) is rebuilt with `PullTimeline`, the sources being every other
//!   safekeeper (all must answer, so a copy is rebuilt only while every other one is served). A refusal to
//!   retry (UNAVAILABLE: a source down or the node in its quiet period after a start; ABORTED) is tried again
//!   with back-off, [`PULL_TRIES_MAX`] times, then next round; anything else waits for the next round.
//! - **Health.** A copy is healthy when its state is served and at or past some peer's oldest LSN (a proposer
//!   can catch it up), or it was just rebuilt. A timeline with fewer than [`HEALTHY_COPIES_WANTED`] healthy
//!   copies is *under-replicated*: a warning names its database, tenant and timeline every round, the count is
//!   the `cambium_timelines_under_replicated` gauge of `/metrics` ([`ReplicaHealth`]), and each timeline's
//!   healthy copies as of the last round ([`RoundReport`]) are what `GET /v1/databases/{id}/health` shows.
//! - **Half-done deletions.** A timeline row that nothing needs any more (a deletion cut short after the row
//!   lost its last reference) is deleted from the storage and forgotten, as the deletion would have, under its
//!   database's lock and never while an operation runs on the database.
//!
//! - **Orphan timelines.** A timeline the pageserver holds for a database's tenant but the metadata does not
//!   name (a branch creation cut short between the storage and its row) is deleted from the pageserver and the
//!   safekeepers, children first. Under the database's lock and only when no operation runs on the database:
//!   every creation of a timeline either holds that lock from the storage to the row (branches) or is a
//!   `running` operation (a database's creation, a restore), so nothing being made is taken for an orphan.
//!   Not a `provisioning` database's.
//!
//! **Invariant:** a repair never resurrects a deleted copy for good. The state is read and the pull made without
//! the database's lock (a pull may copy a lot of WAL, and a branch or restore should not wait for it); after a
//! pull that copied, the timeline is checked again under the lock, and a copy of a timeline the metadata no
//! longer names (deleted meanwhile: deletions hold that lock) is deleted again.
//!
//! Bounds: [`TIMELINES_IN_FLIGHT_MAX`] timelines checked or repaired at once; each call bounded by the
//! backend's timeouts (`PullTimeline` by its own, longer one); a failure is logged and tried again next round.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::stream::{self, StreamExt};
use std::collections::{HashMap, HashSet};

use cambium_types::{Lsn, TenantId, TimelineId};

use crate::backend::{BackendError, CopyState, PullError};
use crate::control::Control;
use crate::safekeeper_sets::{count_timelines, plan_replacement, Liveness, Plan};
use crate::store::databases::{DatabaseStatus, LiveTimeline};
#[cfg(doc)]
use crate::store::Store;

/// The reconciler's default period.
pub const RECONCILE_PERIOD_MS_DEFAULT: u64 = 30_000;
/// Healthy copies a timeline's WAL should have; fewer is under-replicated.
pub const HEALTHY_COPIES_WANTED: usize = 3;
/// Timelines checked or repaired at once.
const TIMELINES_IN_FLIGHT_MAX: usize = 4;
/// Bound of one safekeeper's liveness probe. Shorter than the backend's request bound (10 s), so a silent one (a
/// partition: no reset, no answer) costs a round this much, not that; a live one answers a listing in
/// milliseconds, and is judged dead only after failing every probe for `--safekeeper-dead-after-ms`.
const PROBE_TIMEOUT_MS: u64 = 3_000;
/// Tries of one pull within a round while the safekeeper says to retry.
const PULL_TRIES_MAX: u32 = 3;
/// The first wait between tries of a pull; it doubles.
const PULL_FIRST_WAIT_MS: u64 = 500;

/// How the reconciler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileConfig {
    /// The wait between the end of a round and the start of the next.
    pub period_ms: u64,
    /// A safekeeper that has not answered a round's probe for this long is dead: the timelines whose set holds
    /// it move to another (`safekeeper_sets`).
    pub safekeeper_dead_after_ms: u64,
}

impl Default for ReconcileConfig {
    fn default() -> ReconcileConfig {
        ReconcileConfig {
            period_ms: RECONCILE_PERIOD_MS_DEFAULT,
            safekeeper_dead_after_ms: crate::safekeeper_sets::DEAD_AFTER_MS_DEFAULT,
        }
    }
}

/// What the reconciler found, for `/metrics` and the databases' health.
#[derive(Debug, Default)]
pub struct ReplicaHealth {
    under_replicated: AtomicU64,
    repairs: AtomicU64,
    repair_failures: AtomicU64,
    rounds: AtomicU64,
    orphans_deleted: AtomicU64,
    replacements: AtomicU64,
    /// Which safekeepers answered the rounds' probes.
    liveness: Liveness,
    /// The last round's findings, replaced whole when a round ends.
    last_round: parking_lot::Mutex<Option<Arc<RoundReport>>>,
}

/// What one round found of the live timelines' copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundReport {
    /// When the round ended, ISO 8601 UTC.
    pub ended_at: String,
    /// Every timeline live at the round's start, with its healthy copies at the round's end (at most
    /// [`HEALTHY_COPIES_WANTED`] when the deployment has that many safekeepers).
    pub healthy_copies: HashMap<TimelineId, usize>,
}

impl ReplicaHealth {
    /// What the last round found; `None` before the first round ends.
    pub fn last_round(&self) -> Option<Arc<RoundReport>> {
        self.last_round.lock().clone()
    }

    /// Live timelines with fewer than [`HEALTHY_COPIES_WANTED`] healthy copies at the end of the last round.
    pub fn under_replicated(&self) -> u64 {
        self.under_replicated.load(Ordering::Relaxed)
    }

    /// Copies rebuilt since the start.
    pub fn repairs(&self) -> u64 {
        self.repairs.load(Ordering::Relaxed)
    }

    /// Repairs tried that did not succeed since the start (each round counts its own).
    pub fn repair_failures(&self) -> u64 {
        self.repair_failures.load(Ordering::Relaxed)
    }

    /// Orphan timelines deleted since the start.
    pub fn orphans_deleted(&self) -> u64 {
        self.orphans_deleted.load(Ordering::Relaxed)
    }

    /// Set members replaced since the start (a dead safekeeper's place in a timeline's set given to another).
    pub fn replacements(&self) -> u64 {
        self.replacements.load(Ordering::Relaxed)
    }

    /// Which safekeepers answer, as the rounds' probes found them.
    pub fn liveness(&self) -> &Liveness {
        &self.liveness
    }

    /// Rounds completed since the start.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }
}

/// What to do with one safekeeper's copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Served, and catchable by a proposer.
    Healthy,
    /// Missing, broken, or behind every peer's retained WAL: to rebuild.
    Repair,
    /// The safekeeper did not answer: nothing to do, and not healthy.
    Unknown,
}

/// The verdict on each copy of one timeline (`states`: one per safekeeper). Pure.
pub(crate) fn judge(states: &[CopyState]) -> Vec<Verdict> {
    states
        .iter()
        .enumerate()
        .map(|(index, state)| match state {
            CopyState::Missing | CopyState::Broken(_) => Verdict::Repair,
            CopyState::Unknown(_) => Verdict::Unknown,
            CopyState::Served { flush_lsn, .. } => {
                let peers_oldest: Option<Lsn> = states
                    .iter()
                    .enumerate()
                    .filter(|(other, _)| *other != index)
                    .filter_map(|(_, state)| match state {
                        CopyState::Served { oldest_lsn, .. } => Some(*oldest_lsn),
                        _ => None,
                    })
                    .min();
                match peers_oldest {
                    Some(oldest) if *flush_lsn < oldest => Verdict::Repair,
                    _ => Verdict::Healthy,
                }
            }
        })
        .collect()
}

/// Whether copy `index` can be rebuilt now: a pull reads every other safekeeper, all of which must serve it.
fn pullable(states: &[CopyState], index: usize) -> bool {
    states
        .iter()
        .enumerate()
        .all(|(other, state)| other == index || matches!(state, CopyState::Served { .. }))
}

/// Starts the reconciler: a round now, then one every `config.period_ms` after the last ended, until `control`
/// is dropped or the task aborted.
pub fn spawn(control: &Arc<Control>, config: ReconcileConfig) -> tokio::task::JoinHandle<()> {
    let control: Weak<Control> = Arc::downgrade(control);
    tokio::spawn(async move {
        loop {
            {
                let Some(control) = control.upgrade() else {
                    return;
                };
                round(&control, &config).await;
            }
            tokio::time::sleep(Duration::from_millis(config.period_ms)).await;
        }
    })
}

/// What each configured safekeeper listed at the round's start (`None`: it did not answer).
type Listings = Vec<Option<Vec<(TenantId, TimelineId)>>>;

/// Probes every configured safekeeper (`ListTimelines`, which the leftover sweep needs anyway) and records who
/// answered; returns the listings.
async fn probe_safekeepers(control: &Control) -> Listings {
    let backend = control.backend();
    let count = backend.safekeeper_addresses().len();
    let listings: Listings = futures::future::join_all((0..count).map(|index| async move {
        let probe = tokio::time::timeout(Duration::from_millis(PROBE_TIMEOUT_MS), backend.list_copies(index));
        match probe.await {
            Ok(Ok(copies)) => Some(copies),
            Ok(Err(error)) => {
                tracing::debug!(safekeeper = index, %error, "a safekeeper did not answer the probe");
                None
            }
            Err(_) => {
                tracing::debug!(safekeeper = index, "a safekeeper did not answer the probe in time");
                None
            }
        }
    }))
    .await;
    let now = std::time::Instant::now();
    for (address, listing) in backend.safekeeper_addresses().iter().zip(&listings) {
        control.replicas.liveness.observe(address, listing.is_some(), now);
    }
    listings
}

/// One round: the safekeepers probed, half-done deletions and orphans, dead set members replaced, then every
/// live timeline's copies.
pub async fn round(control: &Control, config: &ReconcileConfig) {
    finish_deletions(control).await;
    delete_orphans(control).await;
    // After those deletions, so the leftover sweep does not delete again what they just deleted.
    let listings = probe_safekeepers(control).await;
    delete_orphan_tenants_and_copies(control, &listings).await;
    let live = match control.blocking(|store| store.live_timelines()).await {
        Ok(live) => live,
        Err(error) => {
            tracing::warn!(?error, "the reconciler could not read the timelines; next round");
            return;
        }
    };
    let sets = match current_sets(control).await {
        Ok(sets) => sets,
        Err(error) => {
            tracing::warn!(?error, "the reconciler could not read the safekeeper sets; next round");
            return;
        }
    };
    let sets = replace_dead_members(control, config, &live, sets).await;
    repoint_moved_branches(control, &sets).await;
    let default_set = control.backend().default_set();
    // A safekeeper that did not answer this round's probe is not asked again for each copy (each ask would wait
    // out the request bound on a silent one): its copies count as unknown this round.
    let unanswered: HashSet<String> = control
        .backend()
        .safekeeper_addresses()
        .iter()
        .zip(&listings)
        .filter(|(_, listing)| listing.is_none())
        .map(|(address, _)| address.clone())
        .collect();
    let unanswered = &unanswered;
    let healthy_copies: HashMap<TimelineId, usize> = stream::iter(live.iter().cloned())
        .map(|timeline| {
            let set = sets
                .get(&timeline.timeline_id)
                .cloned()
                .unwrap_or_else(|| default_set.clone());
            async move {
                let healthy = reconcile_timeline(control, &timeline, &set, unanswered).await;
                (timeline.timeline_id, healthy)
            }
        })
        .buffer_unordered(TIMELINES_IN_FLIGHT_MAX)
        .collect()
        .await;
    let under = healthy_copies
        .values()
        .filter(|healthy| **healthy < HEALTHY_COPIES_WANTED)
        .count();
    let replicas = &control.replicas;
    replicas
        .under_replicated
        .store(u64::try_from(under).unwrap_or(u64::MAX), Ordering::Relaxed);
    *replicas.last_round.lock() = Some(Arc::new(RoundReport {
        ended_at: crate::store::timestamp_text(jiff::Timestamp::now()),
        healthy_copies,
    }));
    replicas.rounds.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        timelines = live.len(),
        under_replicated = under,
        "reconciler round done"
    );
}

/// Every timeline row's set, the default one where none is recorded.
async fn current_sets(control: &Control) -> Result<HashMap<TimelineId, Vec<String>>, crate::error::ApiError> {
    let default_set = control.backend().default_set();
    let recorded = control.blocking(|store| store.all_timeline_safekeepers()).await?;
    Ok(recorded
        .into_iter()
        .map(|(timeline, set)| (timeline, set.unwrap_or_else(|| default_set.clone())))
        .collect())
}

/// Gives each live timeline whose set holds a dead safekeeper a live replacement ([`plan_replacement`]), one
/// timeline at a time (each moves the counts the next choice reads); returns the sets as they are after.
async fn replace_dead_members(
    control: &Control,
    config: &ReconcileConfig,
    live: &[LiveTimeline],
    mut sets: HashMap<TimelineId, Vec<String>>,
) -> HashMap<TimelineId, Vec<String>> {
    let liveness = &control.replicas.liveness;
    let now = std::time::Instant::now();
    let dead = liveness.dead(Duration::from_millis(config.safekeeper_dead_after_ms), now);
    if dead.is_empty() {
        return sets;
    }
    let unreachable = liveness.unreachable();
    let configured = control.backend().safekeeper_addresses();
    let mut counts = count_timelines(sets.values());
    for timeline in live {
        let Some(set) = sets.get(&timeline.timeline_id).cloned() else {
            continue;
        };
        match plan_replacement(&set, &configured, &dead, &unreachable, &counts) {
            Plan::Keep => {}
            Plan::Stuck(reason) => tracing::warn!(
                database = %timeline.database_id, timeline = %timeline.timeline_id, %reason,
                "a timeline's safekeeper set cannot be moved off its dead members; an operator must act"
            ),
            Plan::Replace { dead, with, new_set } => {
                match replace_member(control, timeline, &set, &dead, &new_set).await {
                    Ok(true) => {
                        *counts.entry(dead.clone()).or_insert(1) -= 1;
                        *counts.entry(with.clone()).or_insert(0) += 1;
                        sets.insert(timeline.timeline_id, new_set);
                    }
                    Ok(false) => {}
                    Err(error) => tracing::warn!(
                        database = %timeline.database_id, timeline = %timeline.timeline_id, %dead, %with, %error,
                        "a dead safekeeper could not be replaced in a timeline's set; next round"
                    ),
                }
            }
        }
    }
    sets
}

/// Moves `timeline` from `old_set` to `new_set` (`dead` replaced), under its database's lock: (1) fence: a vote
/// in a higher term on every live member of the old set (a majority of it), so no writer of an older term can
/// commit on the old set any more, even if `dead` comes back; (2) the new set recorded (one conditional update);
/// (3) the compute host re-points the timeline's branches (a new election on the new set, whose new member
/// refuses until it holds the timeline, so it is won on the survivors, which hold everything committed). The
/// new member's copy is then pulled by the repair (`reconcile_timeline`) from the survivors: the most advanced
/// by term and LSN, as an election would choose. Returns whether the set moved (false: it changed meanwhile, or
/// the timeline is no longer live). The crash of the API between the steps is in ARCHITECTURE.md.
async fn replace_member(
    control: &Control,
    timeline: &LiveTimeline,
    old_set: &[String],
    dead: &str,
    new_set: &[String],
) -> Result<bool, String> {
    let (tenant, timeline_id) = (timeline.tenant_id, timeline.timeline_id);
    let _held = control.locked(&timeline.database_id).await;
    let (live, recorded) = control
        .blocking(move |store| {
            Ok((
                store.is_live_timeline(timeline_id)?,
                store.timeline_safekeepers(timeline_id)?,
            ))
        })
        .await
        .map_err(|e| format!("reading the timeline: {e:?}"))?;
    let current = recorded.clone().unwrap_or_else(|| control.backend().default_set());
    if !live || current != old_set {
        return Ok(false);
    }
    let survivors: Vec<String> = old_set.iter().filter(|member| *member != dead).cloned().collect();
    let term = control
        .backend()
        .fence(tenant, timeline_id, &survivors)
        .await
        .map_err(|e| format!("fencing the old set: {e}"))?;
    let (database_id, new) = (timeline.database_id.clone(), new_set.to_vec());
    let moved = control
        .blocking(move |store| store.replace_timeline_safekeepers(&database_id, timeline_id, recorded.as_deref(), &new))
        .await
        .map_err(|e| format!("recording the new set: {e:?}"))?;
    if !moved {
        return Ok(false);
    }
    control.replicas.replacements.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        database = %timeline.database_id, %tenant, timeline = %timeline_id, %dead, term,
        old = ?old_set, new = ?new_set, "a dead safekeeper was replaced in a timeline's set"
    );
    if let Err(error) = control.repoint_timeline(&timeline.database_id, timeline_id).await {
        // The store fenced above fails its commits; the next round's `repoint_moved_branches` tries again.
        tracing::warn!(timeline = %timeline_id, ?error, "the compute could not be re-pointed to the new set");
    }
    Ok(true)
}

/// Re-points every branch this host serves whose store was given another set than its timeline's `sets` entry:
/// a replacement another API process made (on shared metadata), or one whose re-point failed here. Under the
/// database's lock, reading the sets again.
async fn repoint_moved_branches(control: &Control, sets: &HashMap<TimelineId, Vec<String>>) {
    let databases = match control.blocking(|store| store.all_databases()).await {
        Ok(databases) => databases,
        Err(error) => {
            tracing::warn!(?error, "the reconciler could not read the databases; next round");
            return;
        }
    };
    for database in databases
        .iter()
        .filter(|database| database.serves_sessions() && control.is_placed_here(&database.id))
    {
        let id = database.id.clone();
        let Ok(branches) = control.blocking(move |store| store.branches_of(&id)).await else {
            continue;
        };
        let moved: HashSet<TimelineId> = branches
            .iter()
            .filter(|branch| {
                control.host().target(&branch.id).is_some_and(|target| {
                    target.timeline_id == branch.timeline_id
                        && sets
                            .get(&branch.timeline_id)
                            .is_some_and(|set| *set != target.safekeepers)
                })
            })
            .map(|branch| branch.timeline_id)
            .collect();
        if moved.is_empty() {
            continue;
        }
        let _held = control.locked(&database.id).await;
        for timeline in moved {
            tracing::info!(database = %database.id, %timeline, "re-pointing a branch's store to its timeline's set");
            if let Err(error) = control.repoint_timeline(&database.id, timeline).await {
                tracing::warn!(database = %database.id, %timeline, ?error, "a branch could not be re-pointed; next round");
            }
        }
    }
}

/// Checks and repairs the copies of one timeline on its `set`; returns how many are healthy afterwards.
async fn reconcile_timeline(
    control: &Control,
    timeline: &LiveTimeline,
    set: &[String],
    unanswered: &HashSet<String>,
) -> usize {
    let backend = control.backend();
    let (tenant, timeline_id) = (timeline.tenant_id, timeline.timeline_id);
    let asked: Vec<String> = set.iter().filter(|a| !unanswered.contains(*a)).cloned().collect();
    let mut answers = backend.copy_states(tenant, timeline_id, &asked).await.into_iter();
    let states: Vec<CopyState> = set
        .iter()
        .map(|address| match unanswered.contains(address) {
            true => CopyState::Unknown("did not answer this round's probe".to_owned()),
            false => answers
                .next()
                .unwrap_or_else(|| CopyState::Unknown("no answer".to_owned())),
        })
        .collect();
    let verdicts = judge(&states);
    let mut healthy = verdicts.iter().filter(|v| **v == Verdict::Healthy).count();
    for (index, verdict) in verdicts.iter().enumerate() {
        if *verdict != Verdict::Repair || !pullable(&states, index) {
            continue;
        }
        tracing::info!(
            database = %timeline.database_id, %tenant, timeline = %timeline_id, safekeeper = %set[index],
            state = ?states[index], "rebuilding a safekeeper's copy of a timeline from its peers"
        );
        match pull(control, timeline, set, index).await {
            Ok(()) => healthy += 1,
            Err(error) => {
                control.replicas.repair_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    database = %timeline.database_id, %tenant, timeline = %timeline_id,
                    safekeeper = %set[index], %error, "a copy could not be rebuilt; next round"
                );
            }
        }
    }
    if healthy < HEALTHY_COPIES_WANTED {
        let copies: Vec<String> = set
            .iter()
            .zip(&states)
            .map(|(address, state)| format!("{address}: {state:?}"))
            .collect();
        tracing::warn!(
            database = %timeline.database_id, %tenant, timeline = %timeline_id, healthy,
            wanted = HEALTHY_COPIES_WANTED, copies = %copies.join("; "),
            "a database's WAL lives on fewer than three healthy safekeepers"
        );
    }
    healthy
}

/// Rebuilds the copy of `timeline` on `set[index]` from the other members of `set`, retrying what the
/// safekeeper says to retry; then undoes it if the timeline was deleted meanwhile (see the module doc).
async fn pull(control: &Control, timeline: &LiveTimeline, set: &[String], index: usize) -> Result<(), PullError> {
    let backend = control.backend();
    let (tenant, timeline_id) = (timeline.tenant_id, timeline.timeline_id);
    let target = &set[index];
    let sources: Vec<String> = set
        .iter()
        .enumerate()
        .filter(|(other, _)| *other != index)
        .map(|(_, address)| address.clone())
        .collect();
    let mut wait_ms = PULL_FIRST_WAIT_MS;
    let mut tries = 0;
    let copied = loop {
        tries += 1;
        match backend.pull_timeline(target, &sources, tenant, timeline_id).await {
            Ok(copied) => break copied,
            Err(PullError::Retry(message)) if tries < PULL_TRIES_MAX => {
                tracing::info!(timeline = %timeline_id, tries, %message, "a pull was refused for now; retrying");
                tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                wait_ms *= 2;
            }
            Err(error) => return Err(error),
        }
    };
    if copied {
        control.replicas.repairs.fetch_add(1, Ordering::Relaxed);
        let _held = control.locked(&timeline.database_id).await;
        let still_live = control
            .blocking(move |store| store.is_live_timeline(timeline_id))
            .await
            .map_err(|error| PullError::Failed(format!("checking the timeline after the pull: {error:?}")))?;
        if !still_live {
            tracing::info!(timeline = %timeline_id, "the timeline was deleted during its repair; deleting the copy");
            let index = backend
                .safekeeper_index(target)
                .ok_or_else(|| PullError::Failed(format!("{target} is not a configured safekeeper")))?;
            backend
                .delete_copy(index, tenant, timeline_id)
                .await
                .map_err(|error| PullError::Failed(format!("deleting a copy made after the deletion: {error}")))?;
            return Err(PullError::Failed(
                "the timeline was deleted during the repair".to_owned(),
            ));
        }
        tracing::info!(
            database = %timeline.database_id, %tenant, timeline = %timeline_id,
            "a safekeeper's copy of a timeline was rebuilt"
        );
    }
    Ok(())
}

/// Finishes the deletions cut short: the timelines of each database that nothing needs any more (rows left
/// after their last branch went) are deleted from the storage and forgotten, under the database's lock and not
/// while an operation runs on it (a restore deletes its old timeline itself).
async fn finish_deletions(control: &Control) {
    let databases = match control.blocking(|store| store.all_databases()).await {
        Ok(databases) => databases,
        Err(error) => {
            tracing::warn!(?error, "the reconciler could not read the databases; next round");
            return;
        }
    };
    for database in databases {
        let id = database.id.clone();
        let has_work = control
            .blocking(move |store| {
                Ok(!store.unreferenced_timelines(&id)?.is_empty() || !store.retirable_timelines(&id)?.is_empty())
            })
            .await
            .unwrap_or(false);
        if !has_work {
            continue;
        }
        let _held = control.locked(&database.id).await;
        let id = database.id.clone();
        match control
            .blocking(move |store| store.running_operation_on_database(&id))
            .await
        {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => continue,
        }
        tracing::info!(database = %database.id, "finishing the deletion of timelines nothing needs, and the retirement of those only branched from");
        control.sweep_timelines(&database).await;
    }
}

/// The timelines the metadata names for database `database_id`, or `None` while an operation runs on it (it
/// may be creating one) or the metadata cannot be read: then nothing of it is judged an orphan this round. The
/// caller holds the database's lock.
async fn named_timelines(control: &Control, database_id: &str) -> Option<HashSet<TimelineId>> {
    let id = database_id.to_owned();
    let rows = control
        .blocking(move |store| {
            Ok(match store.running_operation_on_database(&id)? {
                Some(_) => None,
                None => Some(store.timelines_of(&id)?),
            })
        })
        .await;
    match rows {
        Ok(Some(rows)) => Some(rows.iter().map(|row| row.timeline_id).collect()),
        Ok(None) | Err(_) => None,
    }
}

/// Deletes the orphan timelines of every database's tenant (see the module doc).
async fn delete_orphans(control: &Control) {
    let databases = match control.blocking(|store| store.all_databases()).await {
        Ok(databases) => databases,
        Err(error) => {
            tracing::warn!(?error, "the reconciler could not read the databases; next round");
            return;
        }
    };
    for database in databases {
        if database.status == DatabaseStatus::Provisioning {
            continue;
        }
        let _held = control.locked(&database.id).await;
        let Some(known) = named_timelines(control, &database.id).await else {
            continue;
        };
        let held = match control.backend().list_timelines(database.tenant_id).await {
            Ok(held) => held,
            Err(BackendError::NotFound(_)) => continue,
            Err(error) => {
                tracing::warn!(database = %database.id, %error, "the pageserver's timelines could not be listed; next round");
                continue;
            }
        };
        for timeline in orphans_children_first(&held, &known) {
            tracing::warn!(
                database = %database.id, tenant = %database.tenant_id, %timeline,
                "deleting an orphan timeline (held by the storage, named by no metadata)"
            );
            match control.backend().delete_timeline(database.tenant_id, timeline).await {
                Ok(()) => {
                    control.replicas.orphans_deleted.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    tracing::warn!(database = %database.id, %timeline, %error, "an orphan timeline could not be deleted; next round");
                    break;
                }
            }
        }
    }
}

/// Deletes what no database row names: tenants the pageserver holds for no database (on every storage node),
/// and safekeeper copies the pageserver no longer lists (a safekeeper that was down while a timeline or a
/// tenant was deleted keeps its WAL until this). A database's rows are written before its storage is made, so
/// a tenant with no row is a deletion's leftover, never a creation in progress; a known tenant's copies are
/// judged under its database's lock and skipped while an operation runs on it, as `delete_orphans` does.
async fn delete_orphan_tenants_and_copies(control: &Control, listings: &Listings) {
    let databases = match control.blocking(|store| store.all_databases()).await {
        Ok(databases) => databases,
        Err(error) => {
            tracing::warn!(?error, "the reconciler could not read the databases; next round");
            return;
        }
    };
    let known: HashMap<TenantId, _> = databases.into_iter().map(|db| (db.tenant_id, db)).collect();
    match control.backend().list_tenants().await {
        Ok(tenants) => {
            for tenant in tenants.into_iter().filter(|tenant| !known.contains_key(tenant)) {
                tracing::warn!(%tenant, "deleting an orphan tenant (held by the storage, named by no database)");
                match control.backend().delete_tenant(tenant).await {
                    Ok(()) => {
                        control.replicas.orphans_deleted.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => tracing::warn!(%tenant, %error, "an orphan tenant could not be deleted; next round"),
                }
            }
        }
        Err(error) => tracing::warn!(%error, "the pageserver's tenants could not be listed; next round"),
    }
    let addresses = control.backend().safekeeper_addresses();
    for (index, listing) in listings.iter().enumerate() {
        let Some(copies) = listing.clone() else {
            continue;
        };
        let mut by_tenant: HashMap<TenantId, Vec<TimelineId>> = HashMap::new();
        for (tenant, timeline) in copies {
            by_tenant.entry(tenant).or_default().push(timeline);
        }
        for (tenant, timelines) in by_tenant {
            let Some(database) = known.get(&tenant) else {
                tracing::warn!(safekeeper = index, %tenant, "deleting a safekeeper's copy of an orphan tenant");
                if control.backend().delete_tenant_copy(index, tenant).await.is_ok() {
                    control.replicas.orphans_deleted.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            };
            if database.status == DatabaseStatus::Provisioning {
                continue;
            }
            let _held = control.locked(&database.id).await;
            let Some(named) = named_timelines(control, &database.id).await else {
                continue;
            };
            // Read under the lock, after the listing: a set a replacement moved meanwhile is seen as moved.
            let Ok(sets) = current_sets(control).await else {
                continue;
            };
            let id = database.id.clone();
            let Ok(retired) = control.blocking(move |store| store.retired_timelines(&id)).await else {
                continue;
            };
            let stale = |timeline: &TimelineId| {
                retired.contains(timeline)
                    || sets
                        .get(timeline)
                        .is_some_and(|set| !set.iter().any(|member| *member == addresses[index]))
            };
            for timeline in timelines
                .into_iter()
                .filter(|timeline| !named.contains(timeline) || stale(timeline))
            {
                tracing::warn!(
                    safekeeper = index, database = %database.id, %tenant, %timeline, stale = stale(&timeline),
                    "deleting a safekeeper's copy of an orphan timeline, or one not in the timeline's set"
                );
                if control.backend().delete_copy(index, tenant, timeline).await.is_ok() {
                    control.replicas.orphans_deleted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The timelines of `held` (id, ancestor) not in `known`, each after every orphan branched from it. Pure.
fn orphans_children_first(held: &[(TimelineId, Option<TimelineId>)], known: &HashSet<TimelineId>) -> Vec<TimelineId> {
    let mut left: Vec<(TimelineId, Option<TimelineId>)> =
        held.iter().copied().filter(|(id, _)| !known.contains(id)).collect();
    let mut order = Vec::with_capacity(left.len());
    // Each pass takes at least one (ancestry has no cycle); bounded by the count in case the storage says one.
    for _ in 0..=held.len() {
        if left.is_empty() {
            break;
        }
        let (leaves, rest): (Vec<_>, Vec<_>) = left
            .iter()
            .copied()
            .partition(|(id, _)| !left.iter().any(|(_, ancestor)| *ancestor == Some(*id)));
        order.extend(leaves.iter().map(|(id, _)| *id));
        left = rest;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(flush: u64, oldest: u64) -> CopyState {
        CopyState::Served {
            flush_lsn: Lsn(flush),
            oldest_lsn: Lsn(oldest),
        }
    }

    #[test]
    fn missing_broken_and_hopelessly_behind_copies_are_repaired() {
        use Verdict::*;
        assert_eq!(judge(&[served(100, 10), served(90, 10), served(100, 0)]), [Healthy; 3]);
        assert_eq!(
            judge(&[CopyState::Missing, served(100, 10), served(100, 10)]),
            [Repair, Healthy, Healthy]
        );
        assert_eq!(
            judge(&[served(100, 10), CopyState::Broken("x".into()), served(100, 10)]),
            [Healthy, Repair, Healthy]
        );
        // Behind every peer's oldest retained LSN: no proposer can catch it up.
        assert_eq!(judge(&[served(5, 0), served(100, 50), served(100, 60)])[0], Repair);
        // Behind one peer's oldest LSN only: the other can catch it up.
        assert_eq!(judge(&[served(55, 0), served(100, 50), served(100, 60)])[0], Healthy);
        assert_eq!(
            judge(&[CopyState::Unknown("down".into()), served(100, 10), CopyState::Missing]),
            [Unknown, Healthy, Repair]
        );
    }

    #[test]
    fn orphans_are_the_unknown_timelines_children_first() {
        let id = TimelineId;
        let held = [
            (id(1), None),
            (id(2), Some(id(1))),
            (id(3), Some(id(2))),
            (id(4), Some(id(1))),
        ];
        let known: HashSet<TimelineId> = [id(1)].into_iter().collect();
        let order = orphans_children_first(&held, &known);
        assert_eq!(order.len(), 3, "{order:?}");
        let at = |t| order.iter().position(|o| *o == id(t)).expect("listed");
        assert!(at(3) < at(2), "{order:?}");
        let known: HashSet<TimelineId> = held.iter().map(|(t, _)| *t).collect();
        assert!(orphans_children_first(&held, &known).is_empty());
    }

    #[test]
    fn a_copy_is_pulled_only_while_every_other_is_served() {
        let states = [CopyState::Missing, served(100, 10), served(100, 10)];
        assert!(pullable(&states, 0));
        let states = [CopyState::Missing, CopyState::Missing, served(100, 10)];
        assert!(!pullable(&states, 0));
        let states = [CopyState::Missing, CopyState::Unknown("down".into()), served(100, 10)];
        assert!(!pullable(&states, 0));
    }
}
