//! A safekeeper node: the timelines of one data directory, each an [`Acceptor`] over the file store, shared by
//! the gRPC service's tasks.
//!
//! # Layout
//!
//! ```text
//! <data_dir>/LOCK                                   who owns the directory (below)
//! <data_dir>/<tenant_id>/<timeline_id>/control      one timeline: see `filestore` for its files
//! <data_dir>/<tenant_id>/<timeline_id>/*.seg
//!
//! <data_dir>/<tenant_id>.deleted                   a tenant being deleted (a tombstone, below)
//! <data_dir>/<tenant_id>/<timeline_id>.deleted      a timeline being deleted
//! <data_dir>/<tenant_id>/<timeline_id>.pull         a replica being copied from a peer (below)
//! ```
//!
//! Ids are 32 lowercase hex digits. [`SafekeeperNode::open`] opens every timeline it finds; a torn WAL tail is
//! cut by `FileWal::open` (and logged there). A timeline directory without a control file is a creation that
//! crashed before it was acknowledged: it is left for `CreateTimeline` to finish. A timeline that fails to
//! load is *broken*: it is logged, its requests fail with `INTERNAL`, and the other timelines are served.
//!
//! # Deletion
//!
//! [`SafekeeperNode::delete_timeline_blocking`] takes the timeline out of the map, then marks it deleted under
//! its acceptor lock (so an operation in progress finishes first, and every later one, and every open
//! `Append` or `StreamWal` stream, gets `Deleted`, a `NOT_FOUND`), then removes its directory durably: rename
//! to the tombstone `<timeline_id>.deleted`, fsync the tenant directory, remove the tree. A crash before the
//! rename is durable leaves the whole timeline (the deletion was not acknowledged, and a retry does it
//! again); after it, only a tombstone, which never loads: [`SafekeeperNode::open`] removes tombstones it
//! finds. A tenant is deleted the same way in one rename of its directory to `<tenant_id>.deleted`, after
//! each of its timelines is marked deleted. Deleting what is not there is success. Creations and deletions
//! are serialized by one lock.
//!
//! # Replicas (`PullTimeline`, see [`crate::pull`])
//!
//! A replica is written into the staging directory `<timeline_id>.pull` (WAL, then the control file last:
//! [`filestore::ReplicaWriter`]) and installed by [`SafekeeperNode::install_pull_blocking`] under the creation
//! lock: for a missing timeline, one rename of the staging directory into place; for one that is behind or
//! broken, the old directory is renamed to its tombstone, the staging directory into place, the tenant
//! directory fsynced, the tombstone removed, and the old `Timeline` marked deleted (its streams end with
//! `NOT_FOUND`; clients reconnect to the new one). At open, a staging directory with a control file and no
//! timeline directory beside it is the install cut short between its renames: it is renamed into place and
//! loaded. Any other staging directory (no control file: a copy cut short; or a timeline beside it: an
//! install that had not begun) is removed. So a crash leaves the old timeline, or the new one, never a mix,
//! and never a partial copy that is served.
//!
//! A node rebuilds a timeline it does not know (missing, or broken) only once it has been open for its
//! *quiet period* ([`PULL_QUIET_PERIOD_MS`]): the copy it lost may have promised a term to a campaign still
//! counting that vote, and campaigns end within the proposers' election timeout (10 s by default).
//!
//! # Concurrency
//!
//! Each timeline's acceptor sits behind a `parking_lot` mutex that is only ever taken on a blocking thread
//! ([`Timeline::run`] uses `spawn_blocking`): appends, fdatasyncs and reads happen under it, never on an async
//! worker and never across an `.await` (the guard is `!Send`, so a future holding it would not compile into
//! the service). A `tokio::sync::watch` carries each timeline's commit LSN to the `StreamWal` tailers; it is
//! published after every operation on the acceptor. A request that panics marks its timeline broken: the
//! acceptor may be half way through a change, and only a restart recovers from durable state (STYLE 18). A
//! failed write or fsync poisons the timeline's store the same way (`StoreError::Poisoned`, `INTERNAL`): the
//! node never retries an fsync; restarting the process reopens the timeline from what is durable.
//!
//! # The lock file
//!
//! Two processes must never open one data directory. The workspace's minimum Rust (1.85) predates
//! `File::try_lock`, and no new dependency is allowed for `flock`, so the lock is a file: `LOCK` holds the
//! owner's pid, its start time (`/proc/<pid>/stat` field 22) and the boot id, and is created atomically with
//! its content (written to a temp file, then hard-linked to `LOCK`, which fails if `LOCK` exists). It is
//! removed when the node is dropped after its last user. A `LOCK` whose owner is provably gone (another boot,
//! or no live process with that pid and start time) is stale and taken over with a warning, so a node killed
//! with `kill -9` restarts without help. Without `/proc`, or if `LOCK` cannot be parsed, the owner is assumed
//! alive and the node refuses to start: remove `LOCK` by hand once no safekeeper runs on the directory.
//! Known gap: two nodes starting at the same instant over the *same stale* lock may both take it over.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cambium_types::fsio;
use cambium_types::{Lsn, TenantId, TimelineId};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use crate::filestore::{self, FileControl, FileStoreConfig, FileWal};
use cambium_types::id::parse_lower_hex as parse_lower_hex_id;
use cambium_types::TimelineKey;
use safekeeper_core::acceptor::Acceptor;
use safekeeper_core::protocol::{AcceptorError, AcceptorState, ControlStore};

/// The lock file's name in the data directory.
pub const LOCK_FILE_NAME: &str = "LOCK";
/// How often [`SafekeeperNode::close`] checks whether the node's last users are gone.
const CLOSE_POLL_INTERVAL_MS: u64 = 10;
/// How long after it opens a node refuses to rebuild a timeline it does not know (see the module doc): more
/// than the proposers' election timeout (10 s by default) and the time a proposer takes to notice that a
/// connection to a dead host broke.
pub const PULL_QUIET_PERIOD_MS: u64 = 30_000;
/// The suffix of a replica's staging directory (`<timeline_id>.pull`).
pub const STAGING_SUFFIX: &str = ".pull";

/// The acceptor of one timeline, over its files.
pub type FileAcceptor = Acceptor<FileWal, FileControl>;

/// What a node is given at start.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This safekeeper's id (for logs).
    pub node_id: u64,
    /// The data directory (created if missing).
    pub data_dir: PathBuf,
    /// Segment size and durability of every timeline.
    pub store: FileStoreConfig,
}

/// Why a node operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// Another live process (or another node in this one) owns the data directory.
    #[error("{path} is held by another safekeeper ({holder}); if none runs on this directory, remove the file")]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// What the lock file says about its owner.
        holder: String,
    },
    /// The data directory could not be read or written.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// No such timeline here.
    #[error("timeline {}/{} not found", .key.0, .key.1)]
    NotFound {
        /// The timeline.
        key: TimelineKey,
    },
    /// The timeline exists with another start LSN.
    #[error("timeline {}/{} exists with start LSN {existing}, not {requested}", .key.0, .key.1)]
    AlreadyExists {
        /// The timeline.
        key: TimelineKey,
        /// Its start LSN.
        existing: Lsn,
        /// The start LSN asked for.
        requested: Lsn,
    },
    /// The timeline failed to load, or a request on it panicked: it serves nothing until a restart.
    #[error("timeline {}/{} is broken: {reason}", .key.0, .key.1)]
    Broken {
        /// The timeline.
        key: TimelineKey,
        /// Why.
        reason: String,
    },
    /// The acceptor refused or failed.
    #[error(transparent)]
    Acceptor(#[from] AcceptorError),
    /// The timeline was deleted while the request held it.
    #[error("timeline {}/{} was deleted", .key.0, .key.1)]
    Deleted {
        /// The timeline.
        key: TimelineKey,
    },
    /// The node is shutting down.
    #[error("the safekeeper is shutting down")]
    ShuttingDown,
    /// A pull of this timeline is already running here.
    #[error("timeline {}/{} is being pulled already", .key.0, .key.1)]
    PullInProgress {
        /// The timeline.
        key: TimelineKey,
    },
    /// The node opened too recently to rebuild a timeline it does not know (see [`PULL_QUIET_PERIOD_MS`]).
    #[error("timeline {}/{} is missing or broken here and this safekeeper opened less than its quiet period ago: retry in {remaining_ms} ms", .key.0, .key.1)]
    QuietPeriod {
        /// The timeline.
        key: TimelineKey,
        /// How long until a pull may rebuild it.
        remaining_ms: u64,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> NodeError + '_ {
    move |source| NodeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One timeline of a node: its acceptor and the watch of its commit LSN.
pub struct Timeline {
    key: TimelineKey,
    start_lsn: Lsn,
    acceptor: Mutex<FileAcceptor>,
    commit_lsn: watch::Sender<Lsn>,
    /// Set when a request panicked while holding the acceptor.
    broken: AtomicBool,
    /// Turns `true` (under the acceptor lock, once) when the timeline is deleted, or replaced by a replica;
    /// never back.
    deleted: watch::Sender<bool>,
    /// Keeps the data directory locked while any task still uses this timeline.
    _lock: Arc<DirLock>,
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline")
            .field("key", &self.key)
            .field("start_lsn", &self.start_lsn)
            .field("commit_lsn", &*self.commit_lsn.borrow())
            .finish_non_exhaustive()
    }
}

impl Timeline {
    fn new(key: TimelineKey, acceptor: FileAcceptor, lock: Arc<DirLock>) -> Timeline {
        let control = acceptor.control();
        Timeline {
            key,
            start_lsn: control.timeline_start_lsn,
            commit_lsn: watch::Sender::new(control.commit_lsn),
            acceptor: Mutex::new(acceptor),
            broken: AtomicBool::new(false),
            deleted: watch::Sender::new(false),
            _lock: lock,
        }
    }

    /// The tenant and timeline ids.
    pub fn key(&self) -> TimelineKey {
        self.key
    }

    /// Where the timeline's WAL begins (fixed at creation).
    pub fn start_lsn(&self) -> Lsn {
        self.start_lsn
    }

    /// The last published commit LSN.
    pub fn commit_lsn(&self) -> Lsn {
        *self.commit_lsn.borrow()
    }

    /// A receiver that sees every advance of the commit LSN.
    pub fn subscribe_commit_lsn(&self) -> watch::Receiver<Lsn> {
        self.commit_lsn.subscribe()
    }

    /// Runs `f` on the acceptor, on this thread, which must be allowed to block (the lock may be held by an
    /// fdatasync). Publishes the commit LSN afterwards. A panic in `f` marks the timeline broken. `Deleted` once
    /// the timeline is deleted.
    pub fn run_blocking<R>(&self, f: impl FnOnce(&mut FileAcceptor) -> R) -> Result<R, NodeError> {
        self.check_usable()?;
        let mut acceptor = self.acceptor.lock();
        // A request that panicked, or a deletion, while we waited for the lock.
        self.check_usable()?;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut acceptor))) {
            Ok(result) => {
                let commit_lsn = acceptor.control().commit_lsn;
                drop(acceptor);
                self.commit_lsn.send_if_modified(|published| {
                    let advanced = commit_lsn > *published;
                    if advanced {
                        *published = commit_lsn;
                    }
                    advanced
                });
                Ok(result)
            }
            Err(_) => {
                // The panic message went to the panic hook already.
                self.broken.store(true, Ordering::SeqCst);
                tracing::error!(tenant = %self.key.0, timeline = %self.key.1, "a request panicked; the timeline serves nothing until a restart");
                Err(self.broken_error())
            }
        }
    }

    /// Runs `f` on the acceptor on a blocking thread (see [`Timeline::run_blocking`]).
    pub async fn run<R, F>(self: &Arc<Self>, f: F) -> Result<R, NodeError>
    where
        F: FnOnce(&mut FileAcceptor) -> R + Send + 'static,
        R: Send + 'static,
    {
        let timeline = Arc::clone(self);
        match tokio::task::spawn_blocking(move || timeline.run_blocking(f)).await {
            Ok(result) => result,
            // `run_blocking` catches panics, so this is a cancelled task (the runtime is shutting down).
            Err(_) => Err(NodeError::ShuttingDown),
        }
    }

    /// The acceptor's state.
    pub async fn state(self: &Arc<Self>) -> Result<AcceptorState, NodeError> {
        self.run(|acceptor| acceptor.state()).await
    }

    /// Whether the timeline was deleted.
    pub fn is_deleted(&self) -> bool {
        *self.deleted.borrow()
    }

    /// Completes when the timeline is deleted (at once if it is already).
    pub async fn deleted(&self) {
        let mut deleted = self.deleted.subscribe();
        // The sender lives in `self`, so the wait cannot fail while we borrow it.
        let _ = deleted.wait_for(|&deleted| deleted).await;
    }

    /// Marks the timeline deleted, after the operation in progress on it (if any) finishes; blocks on the
    /// acceptor lock.
    fn mark_deleted(&self) {
        let acceptor = self.acceptor.lock();
        self.deleted.send_replace(true);
        drop(acceptor);
    }

    fn check_usable(&self) -> Result<(), NodeError> {
        if self.is_deleted() {
            return Err(NodeError::Deleted { key: self.key });
        }
        if self.broken.load(Ordering::SeqCst) {
            return Err(self.broken_error());
        }
        Ok(())
    }

    fn broken_error(&self) -> NodeError {
        NodeError::Broken {
            key: self.key,
            reason: "a request panicked on it".into(),
        }
    }
}

/// A timeline as the node knows it.
#[derive(Debug)]
enum Slot {
    Ready(Arc<Timeline>),
    /// It failed to load; the reason was logged.
    Broken(String),
}

/// What a node knows of a timeline it is asked to pull (see [`SafekeeperNode::local_for_pull`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalCopy {
    /// No timeline here.
    Missing,
    /// The timeline is served here with this state.
    Ready(AcceptorState),
    /// The timeline failed to load; the term its control file promised, if that file is readable.
    Broken {
        /// The promised term.
        term: Option<safekeeper_core::protocol::Term>,
    },
}

/// What installing a replica did.
#[derive(Debug)]
pub enum Installed {
    /// The replica is served now.
    Replaced(Arc<Timeline>),
    /// The timeline here had caught up meanwhile: the replica was dropped.
    NotNeeded(Arc<Timeline>),
}

/// Keeps one timeline's pull exclusive while it lives.
#[derive(Debug)]
pub struct PullGuard {
    node: Arc<SafekeeperNode>,
    key: TimelineKey,
}

impl Drop for PullGuard {
    fn drop(&mut self) {
        self.node.pulling.lock().remove(&self.key);
    }
}

/// The timelines of one data directory.
#[derive(Debug)]
pub struct SafekeeperNode {
    config: NodeConfig,
    timelines: RwLock<HashMap<TimelineKey, Slot>>,
    /// Serializes timeline creations, deletions and replica installs (each is a few fsyncs; the map lock is
    /// never held across them).
    create_lock: Mutex<()>,
    lock: Arc<DirLock>,
    shutdown: watch::Sender<bool>,
    /// When the node opened (the quiet period runs from here).
    opened_at: std::time::Instant,
    pull_quiet_period: Mutex<Duration>,
    /// Timelines being pulled.
    pulling: Mutex<std::collections::HashSet<TimelineKey>>,
    /// Appends the service has taken from its append streams and not yet written (see
    /// [`SafekeeperNode::appends_pending`]).
    appends_pending: AtomicUsize,
}

impl SafekeeperNode {
    /// Locks `config.data_dir` (creating it if missing) and opens every timeline in it. Blocks on disk I/O:
    /// call it before serving or from a blocking thread.
    pub fn open(config: NodeConfig) -> Result<SafekeeperNode, NodeError> {
        let data_dir = config.data_dir.clone();
        fsio::create_dir_durable(&data_dir, config.store.durability).map_err(|e| NodeError::Io {
            path: data_dir.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        let lock = Arc::new(DirLock::acquire(&data_dir)?);
        let mut timelines = HashMap::new();
        for (key, dir) in list_timeline_dirs(&data_dir)? {
            match open_timeline_dir(&dir, &config.store) {
                Ok(Some(acceptor)) => {
                    let timeline = Timeline::new(key, acceptor, Arc::clone(&lock));
                    tracing::info!(
                        node = config.node_id,
                        tenant = %key.0,
                        timeline = %key.1,
                        start_lsn = %timeline.start_lsn,
                        commit_lsn = %timeline.commit_lsn(),
                        "opened timeline"
                    );
                    timelines.insert(key, Slot::Ready(Arc::new(timeline)));
                }
                Ok(None) => {
                    tracing::warn!(
                        dir = %dir.display(),
                        "a timeline directory without a control file (a creation cut short); \
                         CreateTimeline will finish it"
                    );
                }
                Err(error) => {
                    tracing::error!(dir = %dir.display(), %error, "timeline failed to load; it is served as broken");
                    timelines.insert(key, Slot::Broken(error.to_string()));
                }
            }
        }
        tracing::info!(
            node = config.node_id,
            data_dir = %data_dir.display(),
            timelines = timelines.len(),
            "safekeeper node opened"
        );
        Ok(SafekeeperNode {
            config,
            timelines: RwLock::new(timelines),
            create_lock: Mutex::new(()),
            lock,
            shutdown: watch::Sender::new(false),
            opened_at: std::time::Instant::now(),
            pull_quiet_period: Mutex::new(Duration::from_millis(PULL_QUIET_PERIOD_MS)),
            pulling: Mutex::new(std::collections::HashSet::new()),
            appends_pending: AtomicUsize::new(0),
        })
    }

    /// Sets the quiet period (default [`PULL_QUIET_PERIOD_MS`]). Shorter only where no proposer can hold a vote
    /// of a lost copy: tests, or a node that is known never to have had the timelines it will pull.
    pub fn set_pull_quiet_period(&self, period: Duration) {
        *self.pull_quiet_period.lock() = period;
    }

    /// The directory a replica of `key` is written to before it is installed.
    pub fn staging_dir(&self, key: TimelineKey) -> PathBuf {
        self.config
            .data_dir
            .join(key.0.to_string())
            .join(format!("{}{STAGING_SUFFIX}", key.1))
    }

    /// Makes the pull of `key` exclusive until the guard is dropped (`PullInProgress` if one runs).
    pub fn begin_pull(self: &Arc<Self>, key: TimelineKey) -> Result<PullGuard, NodeError> {
        if self.is_shut_down() {
            return Err(NodeError::ShuttingDown);
        }
        if !self.pulling.lock().insert(key) {
            return Err(NodeError::PullInProgress { key });
        }
        Ok(PullGuard {
            node: Arc::clone(self),
            key,
        })
    }

    /// What this node has of `key`, for a pull: `QuietPeriod` if it is missing or broken here and the node
    /// opened less than its quiet period ago. Blocks on the timeline's lock (and reads a broken one's control
    /// file).
    pub fn local_for_pull(&self, key: TimelineKey) -> Result<LocalCopy, NodeError> {
        let local = match self.timeline(key) {
            Ok(timeline) => return Ok(LocalCopy::Ready(timeline.run_blocking(|acceptor| acceptor.state())?)),
            Err(NodeError::NotFound { .. }) => LocalCopy::Missing,
            Err(NodeError::Broken { .. }) => LocalCopy::Broken {
                term: FileControl::load(&self.timeline_dir(key))
                    .ok()
                    .flatten()
                    .map(|control| control.term),
            },
            Err(other) => return Err(other),
        };
        let quiet = *self.pull_quiet_period.lock();
        let open_for = self.opened_at.elapsed();
        if open_for < quiet {
            return Err(NodeError::QuietPeriod {
                key,
                remaining_ms: (quiet - open_for).as_millis() as u64,
            });
        }
        Ok(local)
    }

    /// Creates the empty staging directory of `key` (durably, with the tenant directory), after removing any
    /// left by an earlier attempt. Blocks on disk I/O.
    pub fn prepare_staging_blocking(&self, key: TimelineKey) -> Result<PathBuf, NodeError> {
        let durability = self.config.store.durability;
        let tenant_dir = self.config.data_dir.join(key.0.to_string());
        fsio::create_dir_durable(&tenant_dir, durability).map_err(|e| NodeError::Io {
            path: tenant_dir.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        let staging = self.staging_dir(key);
        remove_tree_if_exists(&staging)?;
        fsio::create_dir_durable(&staging, durability).map_err(|e| NodeError::Io {
            path: staging.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        Ok(staging)
    }

    /// Removes the staging directory of `key` (a pull that failed). Blocks on disk I/O; failures are logged.
    pub fn discard_staging_blocking(&self, key: TimelineKey) {
        let staging = self.staging_dir(key);
        if let Err(error) = remove_tree_if_exists(&staging) {
            tracing::warn!(path = %staging.display(), %error, "could not remove a replica's staging directory; the next pull or open will");
        }
    }

    /// Installs the complete replica in the staging directory of `key` (see the module doc), unless the
    /// timeline here is, by now, at least at `copy_position` (the replica's `(last log term, flush LSN)`):
    /// then the replica is dropped. The replica's control file gets the higher of its term and the term
    /// promised here, and the higher commit LSN. Blocks on disk I/O and on the timeline's lock.
    pub fn install_pull_blocking(
        &self,
        key: TimelineKey,
        copy_position: (safekeeper_core::protocol::Term, Lsn),
    ) -> Result<Installed, NodeError> {
        if self.is_shut_down() {
            return Err(NodeError::ShuttingDown);
        }
        let _installing = self.create_lock.lock();
        let slot = match self.timelines.read().get(&key) {
            Some(Slot::Ready(timeline)) => Some(Arc::clone(timeline)),
            Some(Slot::Broken(_)) | None => None,
        };
        let staging = self.staging_dir(key);
        let dir = self.timeline_dir(key);
        let durability = self.config.store.durability;
        let tenant_dir = self.config.data_dir.join(key.0.to_string());
        match slot {
            Some(timeline) => {
                // Under the acceptor lock from the check to the swap: nothing is appended to the old copy after
                // it was judged behind.
                let acceptor = timeline.acceptor.lock();
                timeline.check_usable()?;
                let current = acceptor.state();
                if current.log_position() >= copy_position {
                    drop(acceptor);
                    self.discard_staging_blocking(key);
                    tracing::info!(node = self.config.node_id, tenant = %key.0, timeline = %key.1, "the timeline caught up during the pull; replica dropped");
                    return Ok(Installed::NotNeeded(timeline));
                }
                raise_staged_control(&staging, &current, copy_position.1, durability)?;
                swap_dirs(&dir, &staging, &tenant_dir, durability)?;
                timeline.deleted.send_replace(true);
                drop(acceptor);
            }
            None => {
                // A broken timeline, or a creation cut short (a directory without a control file): replaced.
                if dir.exists() {
                    swap_dirs(&dir, &staging, &tenant_dir, durability)?;
                } else {
                    fs::rename(&staging, &dir).map_err(io_error(&staging))?;
                    sync_dir_node(&tenant_dir, durability)?;
                }
            }
        }
        let timeline = match open_timeline_dir(&dir, &self.config.store) {
            Ok(Some(acceptor)) => Arc::new(Timeline::new(key, acceptor, Arc::clone(&self.lock))),
            Ok(None) => unreachable!("a replica is installed with its control file"),
            Err(error) => {
                tracing::error!(dir = %dir.display(), %error, "an installed replica failed to load; served as broken");
                self.timelines.write().insert(key, Slot::Broken(error.to_string()));
                return Err(NodeError::Acceptor(error));
            }
        };
        self.timelines.write().insert(key, Slot::Ready(Arc::clone(&timeline)));
        tracing::info!(
            node = self.config.node_id,
            tenant = %key.0,
            timeline = %key.1,
            commit_lsn = %timeline.commit_lsn(),
            "installed a replica pulled from a peer"
        );
        Ok(Installed::Replaced(timeline))
    }

    /// How many appends the service has received on its append streams and not yet written (waiting for the
    /// acceptor, in the batch being written, or read ahead for the next group commit), over every stream. A
    /// gauge for tests and metrics: a test can hold a timeline's acceptor and know when its appends are all in.
    pub fn appends_pending(&self) -> usize {
        self.appends_pending.load(Ordering::SeqCst)
    }

    /// The gauge behind [`SafekeeperNode::appends_pending`], kept by the service.
    pub(crate) fn appends_pending_gauge(&self) -> &AtomicUsize {
        &self.appends_pending
    }

    /// This safekeeper's id.
    pub fn node_id(&self) -> u64 {
        self.config.node_id
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    /// Segment size and durability of its timelines.
    pub fn store_config(&self) -> &FileStoreConfig {
        &self.config.store
    }

    /// The directory of a timeline.
    pub fn timeline_dir(&self, key: TimelineKey) -> PathBuf {
        self.config.data_dir.join(key.0.to_string()).join(key.1.to_string())
    }

    /// Lets go of the open segment files of timelines with no append for `idle_for` (see
    /// `WalStore::release_idle`), so idle timelines hold no descriptors. Blocks on each timeline's lock in turn.
    /// Returns how many were let go.
    pub fn release_idle_files(&self, idle_for: Duration) -> usize {
        let timelines: Vec<Arc<Timeline>> = self
            .timelines
            .read()
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(timeline) => Some(Arc::clone(timeline)),
                _ => None,
            })
            .collect();
        timelines
            .iter()
            .filter(|timeline| {
                matches!(
                    timeline.run_blocking(|acceptor| acceptor.release_idle(idle_for)),
                    Ok(true)
                )
            })
            .count()
    }

    /// The ids of the timelines loaded (broken ones included), sorted.
    pub fn timeline_keys(&self) -> Vec<TimelineKey> {
        let mut keys: Vec<_> = self.timelines.read().keys().copied().collect();
        keys.sort_unstable();
        keys
    }

    /// The timeline `key`: `NotFound` if there is none, `Broken` if it failed to load.
    pub fn timeline(&self, key: TimelineKey) -> Result<Arc<Timeline>, NodeError> {
        match self.timelines.read().get(&key) {
            Some(Slot::Ready(timeline)) => Ok(Arc::clone(timeline)),
            Some(Slot::Broken(reason)) => Err(NodeError::Broken {
                key,
                reason: reason.clone(),
            }),
            None => Err(NodeError::NotFound { key }),
        }
    }

    /// Creates the timeline `key` whose WAL starts at `start_lsn`, durably; blocks on disk I/O. Idempotent
    /// for the same start LSN; `AlreadyExists` for another.
    pub fn create_timeline_blocking(&self, key: TimelineKey, start_lsn: Lsn) -> Result<Arc<Timeline>, NodeError> {
        if self.is_shut_down() {
            return Err(NodeError::ShuttingDown);
        }
        let _creating = self.create_lock.lock();
        match self.timeline(key) {
            Ok(timeline) if timeline.start_lsn == start_lsn => return Ok(timeline),
            Ok(timeline) => {
                return Err(NodeError::AlreadyExists {
                    key,
                    existing: timeline.start_lsn,
                    requested: start_lsn,
                })
            }
            Err(NodeError::NotFound { .. }) => {}
            Err(other) => return Err(other),
        }
        let durability = self.config.store.durability;
        let tenant_dir = self.config.data_dir.join(key.0.to_string());
        // The tenant directory's own entry in the data directory must be durable too.
        fsio::create_dir_durable(&tenant_dir, durability).map_err(|e| NodeError::Io {
            path: tenant_dir.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        let dir = self.timeline_dir(key);
        let (control, wal, store) =
            filestore::create_timeline(&dir, start_lsn, &self.config.store).map_err(AcceptorError::from)?;
        if control.timeline_start_lsn != start_lsn {
            // `create_timeline` checks this too; a directory left by a crash holds whatever it holds.
            return Err(NodeError::AlreadyExists {
                key,
                existing: control.timeline_start_lsn,
                requested: start_lsn,
            });
        }
        let acceptor = Acceptor::new(control, wal, store)?;
        let timeline = Arc::new(Timeline::new(key, acceptor, Arc::clone(&self.lock)));
        self.timelines.write().insert(key, Slot::Ready(Arc::clone(&timeline)));
        tracing::info!(node = self.config.node_id, tenant = %key.0, timeline = %key.1, %start_lsn, "created timeline");
        Ok(timeline)
    }

    /// [`SafekeeperNode::create_timeline_blocking`] on a blocking thread.
    pub async fn create_timeline(
        self: &Arc<Self>,
        key: TimelineKey,
        start_lsn: Lsn,
    ) -> Result<Arc<Timeline>, NodeError> {
        let node = Arc::clone(self);
        tokio::task::spawn_blocking(move || node.create_timeline_blocking(key, start_lsn))
            .await
            .unwrap_or(Err(NodeError::ShuttingDown))
    }

    /// Deletes the timeline `key` and its directory, durably (see the module doc); blocks on disk I/O. Open
    /// requests and streams on it end with `Deleted`. Success if there is no such timeline.
    pub fn delete_timeline_blocking(&self, key: TimelineKey) -> Result<(), NodeError> {
        if self.is_shut_down() {
            return Err(NodeError::ShuttingDown);
        }
        let _deleting = self.create_lock.lock();
        let slot = self.timelines.write().remove(&key);
        if let Some(Slot::Ready(timeline)) = &slot {
            timeline.mark_deleted();
        }
        // A replica being copied must not be installed at the next open as if the deletion had not happened.
        remove_tree_if_exists(&self.staging_dir(key))?;
        // Whatever the map said: a directory may be there without a slot (a creation cut short).
        let removed = remove_dir_durable(&self.timeline_dir(key), self.config.store.durability)?;
        tracing::info!(
            node = self.config.node_id,
            tenant = %key.0,
            timeline = %key.1,
            loaded = slot.is_some(),
            removed,
            "deleted timeline"
        );
        Ok(())
    }

    /// [`SafekeeperNode::delete_timeline_blocking`] on a blocking thread.
    pub async fn delete_timeline(self: &Arc<Self>, key: TimelineKey) -> Result<(), NodeError> {
        let node = Arc::clone(self);
        tokio::task::spawn_blocking(move || node.delete_timeline_blocking(key))
            .await
            .unwrap_or(Err(NodeError::ShuttingDown))
    }

    /// Deletes every timeline of `tenant` and the tenant's directory, durably (one rename of the directory to
    /// its tombstone); blocks on disk I/O. Success if the tenant is not there.
    pub fn delete_tenant_blocking(&self, tenant: TenantId) -> Result<(), NodeError> {
        if self.is_shut_down() {
            return Err(NodeError::ShuttingDown);
        }
        let _deleting = self.create_lock.lock();
        let slots: Vec<Slot> = {
            let mut timelines = self.timelines.write();
            let keys: Vec<TimelineKey> = timelines.keys().filter(|key| key.0 == tenant).copied().collect();
            keys.iter().filter_map(|key| timelines.remove(key)).collect()
        };
        for slot in &slots {
            if let Slot::Ready(timeline) = slot {
                timeline.mark_deleted();
            }
        }
        let tenant_dir = self.config.data_dir.join(tenant.to_string());
        let removed = remove_dir_durable(&tenant_dir, self.config.store.durability)?;
        tracing::info!(
            node = self.config.node_id,
            %tenant,
            timelines = slots.len(),
            removed,
            "deleted tenant"
        );
        Ok(())
    }

    /// [`SafekeeperNode::delete_tenant_blocking`] on a blocking thread.
    pub async fn delete_tenant(self: &Arc<Self>, tenant: TenantId) -> Result<(), NodeError> {
        let node = Arc::clone(self);
        tokio::task::spawn_blocking(move || node.delete_tenant_blocking(tenant))
            .await
            .unwrap_or(Err(NodeError::ShuttingDown))
    }

    /// Starts shutting down: streams end, new requests are refused with `ShuttingDown`. Idempotent.
    pub fn shut_down(&self) {
        self.shutdown.send_replace(true);
    }

    /// Whether [`SafekeeperNode::shut_down`] was called.
    pub fn is_shut_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// A receiver that turns `true` when the node shuts down (and errs if the node is dropped).
    pub fn subscribe_shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Shuts the node down, waits up to `timeout` for every other user of it and of its timelines (request
    /// tasks) to let go, then drops it, which removes the lock file. Returns whether the lock file is gone;
    /// if not, it goes when the last user drops its reference.
    pub async fn close(self: Arc<Self>, timeout: Duration) -> bool {
        self.shut_down();
        let deadline = tokio::time::Instant::now() + timeout;
        let in_use = |node: &Arc<SafekeeperNode>| {
            Arc::strong_count(node) > 1
                || node.timelines.read().values().any(|slot| match slot {
                    Slot::Ready(timeline) => Arc::strong_count(timeline) > 1,
                    Slot::Broken(_) => false,
                })
        };
        while in_use(&self) {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    node = self.config.node_id,
                    "requests still hold the node after the close timeout; the lock file goes with the last"
                );
                return false;
            }
            tokio::time::sleep(Duration::from_millis(CLOSE_POLL_INTERVAL_MS)).await;
        }
        let lock = Arc::clone(&self.lock);
        drop(self);
        // Ours is now the last reference: dropping it removes the file.
        let released = Arc::strong_count(&lock) == 1;
        drop(lock);
        released
    }
}

/// The suffix of a tombstone: a tenant or timeline directory renamed for removal (`<id>.deleted`).
pub const TOMBSTONE_SUFFIX: &str = ".deleted";

/// The tombstone name of the directory `dir`.
fn tombstone_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(TOMBSTONE_SUFFIX);
    dir.with_file_name(name)
}

/// Whether `name` is a tombstone's: an id followed by [`TOMBSTONE_SUFFIX`].
fn is_tombstone_name(name: &str) -> bool {
    name.strip_suffix(TOMBSTONE_SUFFIX)
        .and_then(parse_lower_hex_id)
        .is_some()
}

/// Removes the tree at `path` if there is one.
fn remove_tree_if_exists(path: &Path) -> Result<(), NodeError> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io_error(path)(error)),
    }
}

/// Removes the directory `dir` so that a crash leaves it whole or a tombstone, never part of it under its own
/// name: rename to the tombstone, fsync the parent, remove the tree. Returns whether `dir` was there. Once the
/// rename is durable the deletion is done: a tree that cannot be removed is logged and left to the next open.
fn remove_dir_durable(dir: &Path, durability: fsio::Durability) -> Result<bool, NodeError> {
    let tombstone = tombstone_path(dir);
    // A tombstone of an earlier attempt (a rename cannot replace a non-empty directory).
    remove_tree_if_exists(&tombstone)?;
    match fs::rename(dir, &tombstone) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(io_error(dir)(error)),
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    fsio::sync_dir(parent, durability).map_err(|e| NodeError::Io {
        path: parent.to_path_buf(),
        source: io::Error::other(e.to_string()),
    })?;
    if let Err(error) = remove_tree_if_exists(&tombstone) {
        tracing::warn!(path = %tombstone.display(), %error, "could not remove a tombstone; the next open will");
    }
    Ok(true)
}

/// Removes the tombstone `path` found at open (logged; a failure is logged and left for the next open).
fn remove_leftover_tombstone(path: &Path) {
    match remove_tree_if_exists(path) {
        Ok(()) => tracing::info!(path = %path.display(), "removed the tombstone of a deletion cut short"),
        Err(error) => tracing::warn!(path = %path.display(), %error, "could not remove a tombstone"),
    }
}

/// The timeline directories under `data_dir`: `<tenant_id>/<timeline_id>`, both 32 lowercase hex digits.
/// Tombstones (`<id>.deleted`) left by deletions cut short are removed on the way.
fn list_timeline_dirs(data_dir: &Path) -> Result<Vec<(TimelineKey, PathBuf)>, NodeError> {
    let mut found = Vec::new();
    for (tenant_name, tenant_dir) in subdirectories(data_dir)? {
        if is_tombstone_name(&tenant_name) {
            remove_leftover_tombstone(&tenant_dir);
            continue;
        }
        let Some(tenant_id) = parse_lower_hex_id(&tenant_name) else {
            tracing::warn!(path = %tenant_dir.display(), "ignoring a directory that is not a tenant id");
            continue;
        };
        let mut timeline_dirs = subdirectories(&tenant_dir)?;
        // Staging directories first: one may be renamed into place and must then be listed as a timeline.
        timeline_dirs.sort_by_key(|(name, _)| !name.ends_with(STAGING_SUFFIX));
        let mut promoted = Vec::new();
        for (timeline_name, timeline_dir) in timeline_dirs {
            if let Some(id) = timeline_name.strip_suffix(STAGING_SUFFIX) {
                if parse_lower_hex_id(id).is_some() {
                    if let Some(target) = settle_staging(&timeline_dir, &tenant_dir.join(id))? {
                        promoted.push((id.to_string(), target));
                    }
                    continue;
                }
            }
            if is_tombstone_name(&timeline_name) {
                remove_leftover_tombstone(&timeline_dir);
                continue;
            }
            let Some(timeline_id) = parse_lower_hex_id(&timeline_name) else {
                tracing::warn!(path = %timeline_dir.display(), "ignoring a directory that is not a timeline id");
                continue;
            };
            found.push(((TenantId(tenant_id), TimelineId(timeline_id)), timeline_dir));
        }
        for (id, dir) in promoted {
            let timeline_id = parse_lower_hex_id(&id).expect("checked above");
            found.push(((TenantId(tenant_id), TimelineId(timeline_id)), dir));
        }
    }
    found.sort_unstable_by_key(|(key, _)| *key);
    Ok(found)
}

/// Settles a replica's staging directory found at open (see the module doc): renamed to `target` (and
/// returned) if it is complete and `target` is absent; removed otherwise.
fn settle_staging(staging: &Path, target: &Path) -> Result<Option<PathBuf>, NodeError> {
    let complete = matches!(FileControl::load(staging), Ok(Some(_)));
    if complete && !target.exists() {
        fs::rename(staging, target).map_err(io_error(staging))?;
        let parent = target.parent().unwrap_or(Path::new("."));
        sync_dir_node(parent, fsio::Durability::Fsync)?;
        tracing::info!(path = %target.display(), "installed a replica whose install was cut short");
        return Ok(Some(target.to_path_buf()));
    }
    tracing::info!(
        path = %staging.display(),
        complete,
        "removing a replica's staging directory left by a pull cut short"
    );
    remove_tree_if_exists(staging)?;
    Ok(None)
}

/// fsync of a directory, as a node error.
fn sync_dir_node(dir: &Path, durability: fsio::Durability) -> Result<(), NodeError> {
    fsio::sync_dir(dir, durability).map_err(|e| NodeError::Io {
        path: dir.to_path_buf(),
        source: io::Error::other(e.to_string()),
    })
}

/// Replaces the timeline directory `dir` by the complete replica in `staging`: `dir` to its tombstone, `staging`
/// to `dir`, fsync of `parent`, removal of the tombstone. A crash between the renames leaves the complete
/// staging directory and no `dir`, which the next open installs.
fn swap_dirs(dir: &Path, staging: &Path, parent: &Path, durability: fsio::Durability) -> Result<(), NodeError> {
    let tombstone = tombstone_path(dir);
    remove_tree_if_exists(&tombstone)?;
    fs::rename(dir, &tombstone).map_err(io_error(dir))?;
    if let Err(error) = fs::rename(staging, dir) {
        // Put the old one back so the node serves it after a restart; the caller reports the failure.
        if let Err(back) = fs::rename(&tombstone, dir) {
            tracing::error!(path = %dir.display(), %back, "could not put a timeline back after a failed replica install");
        }
        return Err(io_error(staging)(error));
    }
    sync_dir_node(parent, durability)?;
    if let Err(error) = remove_tree_if_exists(&tombstone) {
        tracing::warn!(path = %tombstone.display(), %error, "could not remove a tombstone; the next open will");
    }
    Ok(())
}

/// Raises the staged replica's control file to what the timeline here already promised or knows committed:
/// the higher term, the higher commit LSN (within the replica's WAL, which holds every committed record).
fn raise_staged_control(
    staging: &Path,
    current: &AcceptorState,
    replica_flush_lsn: Lsn,
    durability: fsio::Durability,
) -> Result<(), NodeError> {
    if current.commit_lsn > replica_flush_lsn {
        // A record committed here is on every copy at least as far as this one; a replica without it would
        // contradict that. Never install it.
        return Err(NodeError::Acceptor(AcceptorError::Invalid(format!(
            "the replica ends at {replica_flush_lsn}, before the commit LSN {} known here",
            current.commit_lsn
        ))));
    }
    let mut control = FileControl::load(staging)
        .map_err(AcceptorError::from)?
        .ok_or_else(|| NodeError::Io {
            path: staging.to_path_buf(),
            source: io::Error::other("a staged replica without its control file"),
        })?;
    let term = control.term.max(current.term);
    let commit_lsn = control.commit_lsn.max(current.commit_lsn);
    if (term, commit_lsn) == (control.term, control.commit_lsn) {
        return Ok(());
    }
    control.term = term;
    control.commit_lsn = commit_lsn;
    FileControl::new(staging, durability)
        .persist(&control)
        .map_err(AcceptorError::from)?;
    Ok(())
}

/// The subdirectories of `dir` with UTF-8 names (others are logged and skipped; files are skipped).
fn subdirectories(dir: &Path) -> Result<Vec<(String, PathBuf)>, NodeError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        if !entry.file_type().map_err(io_error(&path))?.is_dir() {
            continue;
        }
        match entry.file_name().into_string() {
            Ok(name) => out.push((name, path)),
            Err(_) => tracing::warn!(path = %path.display(), "ignoring a directory with a non-UTF-8 name"),
        }
    }
    Ok(out)
}

fn open_timeline_dir(dir: &Path, config: &FileStoreConfig) -> Result<Option<FileAcceptor>, AcceptorError> {
    let Some((control, wal, store)) = filestore::open_timeline(dir, config)? else {
        return Ok(None);
    };
    Acceptor::new(control, wal, store).map(Some)
}

/// Who owns a lock file: a process named by its pid, start time and boot.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Owner {
    pid: u32,
    /// Clock ticks after boot at which the process started (`/proc/<pid>/stat` field 22), if known.
    start_ticks: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id`, if known.
    boot_id: Option<String>,
}

impl Owner {
    fn current() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start_ticks: process_start_ticks(pid),
            boot_id: boot_id(),
        }
    }

    fn encode(&self) -> String {
        let mut out = format!("pid {}\n", self.pid);
        if let Some(ticks) = self.start_ticks {
            out.push_str(&format!("start_ticks {ticks}\n"));
        }
        if let Some(boot) = &self.boot_id {
            out.push_str(&format!("boot_id {boot}\n"));
        }
        out
    }

    fn decode(text: &str) -> Option<Owner> {
        let mut pid = None;
        let mut start_ticks = None;
        let mut boot_id = None;
        for line in text.lines() {
            let (name, value) = line.split_once(' ')?;
            match name {
                "pid" => pid = Some(value.parse().ok()?),
                "start_ticks" => start_ticks = Some(value.parse().ok()?),
                "boot_id" => boot_id = Some(value.to_string()),
                _ => return None,
            }
        }
        Some(Owner {
            pid: pid?,
            start_ticks,
            boot_id,
        })
    }

    /// Whether this owner is provably gone (otherwise it is assumed alive).
    fn is_gone(&self) -> bool {
        if let (Some(theirs), Some(ours)) = (&self.boot_id, boot_id()) {
            if *theirs != ours {
                return true;
            }
        }
        if !Path::new("/proc/self/stat").exists() {
            return false;
        }
        match process_start_ticks(self.pid) {
            None => !Path::new(&format!("/proc/{}", self.pid)).exists(),
            Some(now) if self.start_ticks.is_some_and(|then| then != now) => true,
            // Killed but not yet reaped by its parent: a zombie holds no file and writes nothing more, so a
            // restart right after a kill -9 need not wait for the reaping.
            Some(_) => matches!(process_state(self.pid), Some('Z' | 'X')),
        }
    }
}

/// Field 3 of `/proc/<pid>/stat`: the process state (`R`, `S`, `D`, `Z` zombie, `X` dead, …).
fn process_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().next()?.chars().next()
}

fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
}

/// Field 22 of `/proc/<pid>/stat`. The second field (the command) is in parentheses and may hold spaces, so
/// fields are counted after the last `)`, where field 3 begins.
fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_command = &stat[stat.rfind(')')? + 1..];
    after_command.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The data directory's lock file; removed on drop.
#[derive(Debug)]
struct DirLock {
    path: PathBuf,
}

impl DirLock {
    fn acquire(data_dir: &Path) -> Result<DirLock, NodeError> {
        static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = data_dir.join(LOCK_FILE_NAME);
        let me = Owner::current();
        let temp = data_dir.join(format!(
            "{LOCK_FILE_NAME}.{}.{}.tmp",
            me.pid,
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::File::create(&temp)
            .and_then(|mut file| file.write_all(me.encode().as_bytes()))
            .map_err(io_error(&temp))?;
        let result = Self::link(&temp, &path);
        if let Err(error) = fs::remove_file(&temp) {
            tracing::warn!(path = %temp.display(), %error, "could not remove a lock temp file");
        }
        result?;
        Ok(DirLock { path })
    }

    /// Links `temp` to `path` (atomic: `path` appears with its whole content), taking over a stale lock once.
    fn link(temp: &Path, path: &Path) -> Result<(), NodeError> {
        let mut took_over = false;
        loop {
            match fs::hard_link(temp, path) {
                Ok(()) => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(io_error(path)(error)),
            }
            let text = match fs::read_to_string(path) {
                Ok(text) => text,
                // Its owner just removed it: try again.
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(io_error(path)(error)),
            };
            let holder = Owner::decode(&text);
            let stale = holder.as_ref().is_some_and(Owner::is_gone);
            if !stale || took_over {
                return Err(NodeError::Locked {
                    path: path.to_path_buf(),
                    holder: text.trim().replace('\n', ", "),
                });
            }
            tracing::warn!(path = %path.display(), holder = ?holder, "taking over a stale lock file (its owner is gone)");
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(io_error(path)(error)),
            }
            took_over = true;
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        match fs::remove_file(&self.path) {
            Ok(()) => tracing::info!(path = %self.path.display(), "released the data directory lock"),
            Err(error) => tracing::warn!(path = %self.path.display(), %error, "could not remove the lock file"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_round_trips_and_we_are_alive() {
        let me = Owner::current();
        assert_eq!(Owner::decode(&me.encode()), Some(me.clone()));
        assert!(!me.is_gone(), "this process is alive");
        assert_eq!(Owner::decode("garbage"), None);
        assert_eq!(Owner::decode("pid 12\nsurprise 1\n"), None);
    }

    #[test]
    fn a_lock_of_a_gone_process_is_taken_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(LOCK_FILE_NAME);
        let mut gone = Owner::current();
        gone.start_ticks = gone.start_ticks.map(|t| t + 1);
        gone.boot_id = Some("another-boot".into());
        fs::write(&path, gone.encode()).expect("write");
        let lock = DirLock::acquire(dir.path()).expect("stale lock taken over");
        assert!(DirLock::acquire(dir.path()).is_err(), "held by this process now");
        drop(lock);
        assert!(!path.exists(), "removed on drop");
        fs::write(&path, "not a lock file").expect("write");
        assert!(
            matches!(DirLock::acquire(dir.path()), Err(NodeError::Locked { .. })),
            "an unreadable lock is assumed held"
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temp files left: {leftovers:?}");
    }

    /// Issue 13: a restart within a second or two of a kill -9 found the lock held by the killed process,
    /// still a zombie until its parent reaped it.
    #[test]
    fn a_lock_of_a_killed_unreaped_process_is_taken_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        let owner = Owner {
            pid: child.id(),
            start_ticks: process_start_ticks(child.id()),
            boot_id: boot_id(),
        };
        fs::write(dir.path().join(LOCK_FILE_NAME), owner.encode()).expect("write");
        assert!(
            matches!(DirLock::acquire(dir.path()), Err(NodeError::Locked { .. })),
            "a live owner keeps its lock"
        );
        child.kill().expect("kill -9");
        // Not reaped: a zombie until `wait`. Wait for the kernel to make it one.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_state(child.id()) != Some('Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "no zombie: {:?}",
                process_state(child.id())
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let lock = DirLock::acquire(dir.path()).expect("a zombie's lock is taken over");
        drop(lock);
        child.wait().expect("reap");
    }
}
