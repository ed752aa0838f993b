//! A safekeeper node: the timelines of one data directory, each an [`Acceptor`] over the file store, shared by
//! the gRPC service's tasks.
//!
//! # Layout
//!
//! ```text
//! <data_dir>/LOCK                                   who owns the directory (below)
//! <data_dir>/timelines.log                          the creation log: which timelines were created (below)
//! <data_dir>/<tenant_id>/<timeline_id>/control      one timeline: see `filestore` for its files
//! <data_dir>/<tenant_id>/<timeline_id>/*.seg
//!
//! <data_dir>/<tenant_id>.deleted                   a tenant being deleted (a tombstone, below)
//! <data_dir>/<tenant_id>/<timeline_id>.deleted      a timeline being deleted
//! <data_dir>/<tenant_id>/<timeline_id>.pull         a replica being copied from a peer (below)
//! ```
//!
//! Ids are 32 lowercase hex digits. [`SafekeeperNode::open`] opens every timeline it finds; a torn WAL tail is
//! cut by `FileWal::open` (and logged there). A timeline that fails to load is *broken*: it is logged, its
//! requests fail with `INTERNAL`, and the other timelines are served.
//!
//! # Creation
//!
//! [`SafekeeperNode::create_timeline_blocking`] makes no file: it commits with one record appended to the
//! creation log and fdatasynced (`creations`, which has the crash argument). The timeline's directory, with its
//! empty first segment, is made by its first write (the first vote's control file) and made durable with the
//! directories above it before that write returns; then a materialization record is logged, before the write
//! is acknowledged (`filestore::create_timeline_deferred`). At open, a logged timeline whose directory has no
//! control file, or that has no directory and is not materialized, is loaded in its initial state (term 0, no
//! WAL); a materialized timeline with no directory at all is a lost copy (not loaded; a pull rebuilds it: it
//! may have voted before it was lost); a directory without a control file that the log does not name is a
//! creation cut short before its record: not loaded, and taken over by the next `CreateTimeline` of that id.
//!
//! # Deletion
//!
//! [`SafekeeperNode::delete_timeline_blocking`] takes the timeline out of the map, then marks it deleted under
//! its acceptor lock (so an operation in progress finishes first, and every later one, and every open
//! `Append` or `StreamWal` stream, gets `Deleted`, a `NOT_FOUND`), then removes its directory durably: rename
//! to the tombstone `<timeline_id>.deleted`, fsync the tenant directory, remove the tree; a timeline the creation
//! log names gets a deletion record there first (so it is never made again at open). A crash before the
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
//!
//! The data directory's lock file is `lock`'s; tombstones, staging directories and the listing of timeline
//! directories are `dirs`'; one timeline behind its lock is [`Timeline`] (`timeline`); a replica's pull and
//! install on this node's side are `replica`'s.

mod creations;
mod dirs;
mod lock;
mod replica;
mod timeline;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cambium_types::fsio;
use cambium_types::{Lsn, TenantId};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use crate::filestore::{self, FileControl, FileStoreConfig, FileWal};
use cambium_types::TimelineKey;
use safekeeper_core::acceptor::Acceptor;
use safekeeper_core::protocol::AcceptorError;

use creations::{CreationLog, Record};
use dirs::{list_timeline_dirs, open_timeline_dir, remove_dir_durable, remove_tree_if_exists};
use lock::DirLock;

pub use creations::{logged_timelines, CREATION_LOG_FILE_NAME};
pub use dirs::TOMBSTONE_SUFFIX;
pub use replica::{Installed, LocalCopy, PullGuard};
pub use timeline::Timeline;

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

/// [`fsio::create_dir_durable`], its failure a [`NodeError::Io`] naming `path`.
fn create_dir_durable(path: &Path, durability: fsio::Durability) -> Result<(), NodeError> {
    fsio::create_dir_durable(path, durability).map_err(|e| NodeError::Io {
        path: path.to_path_buf(),
        source: io::Error::other(e.to_string()),
    })
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> NodeError + '_ {
    move |source| NodeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a deferred timeline does once its directory is durable: logs its materialization (see `creations`).
/// The log's lock is the innermost: taken under a timeline's acceptor lock, never the other way round.
fn materialization(log: &Arc<Mutex<CreationLog>>, key: TimelineKey) -> filestore::OnDurable {
    let log = Arc::clone(log);
    Box::new(move || {
        log.lock()
            .append(&[Record::Materialized(key)])
            .map_err(|error| safekeeper_core::protocol::StoreError::Io {
                path: CREATION_LOG_FILE_NAME.to_owned(),
                source: io::Error::other(error.to_string()),
            })
    })
}

/// The timeline `key` of the creation log that never voted (its directory has no control file, or it has no
/// directory and is not materialized: a vote writes the control file first, and logs the materialization before
/// it is acknowledged), so it is its initial state; made again from what the directory holds (at most an empty
/// first segment), or with no file until its first write.
fn open_logged(
    config: &NodeConfig,
    key: TimelineKey,
    start_lsn: Lsn,
    lock: &Arc<DirLock>,
    log: &Arc<Mutex<CreationLog>>,
) -> Slot {
    let dir = config.data_dir.join(key.0.to_string()).join(key.1.to_string());
    let opened = filestore::create_timeline_deferred(&dir, start_lsn, &config.store, materialization(log, key))
        .map_err(|e| e.to_string())
        .and_then(|(control, wal, store)| Acceptor::new(control, wal, store).map_err(|e| e.to_string()));
    match opened {
        Ok(acceptor) => {
            tracing::info!(
                node = config.node_id,
                tenant = %key.0,
                timeline = %key.1,
                %start_lsn,
                files = dir.is_dir(),
                "opened a logged timeline in its initial state (no control file written yet)"
            );
            Slot::Ready(Arc::new(Timeline::new(key, acceptor, Arc::clone(lock))))
        }
        Err(reason) => {
            tracing::error!(dir = %dir.display(), %reason, "a logged timeline failed to load; it is served as broken");
            Slot::Broken(reason)
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

/// The timelines of one data directory.
#[derive(Debug)]
pub struct SafekeeperNode {
    config: NodeConfig,
    timelines: RwLock<HashMap<TimelineKey, Slot>>,
    /// Serializes timeline creations, deletions and replica installs (each is a few fsyncs; the map lock is
    /// never held across them). Taken before a timeline's acceptor lock.
    create_lock: Mutex<()>,
    /// The creation log: appended to by creations and deletions (under `create_lock`) and by a deferred
    /// timeline's first write (under its acceptor lock). The innermost lock: nothing is locked under it.
    log: Arc<Mutex<CreationLog>>,
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
        create_dir_durable(&data_dir, config.store.durability)?;
        let lock = Arc::new(DirLock::acquire(&data_dir)?);
        let log = Arc::new(Mutex::new(CreationLog::open(&data_dir, config.store.durability)?));
        let mut timelines = HashMap::new();
        let mut logged_without_dir = log.lock().logged().clone();
        // Logged timelines with a control file whose materialization record a crash cut off.
        let mut unrecorded = Vec::new();
        for (key, dir) in list_timeline_dirs(&data_dir)? {
            let logged_start = logged_without_dir.remove(&key);
            match open_timeline_dir(&dir, &config.store) {
                Ok(Some(acceptor)) => {
                    if logged_start.is_some() && !log.lock().is_materialized(&key) {
                        unrecorded.push(Record::Materialized(key));
                    }
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
                Ok(None) => match logged_start {
                    Some(start_lsn) => {
                        let slot = open_logged(&config, key, start_lsn, &lock, &log);
                        timelines.insert(key, slot);
                    }
                    None => tracing::warn!(
                        dir = %dir.display(),
                        "a timeline directory without a control file and not in the creation log (a creation cut \
                         short); CreateTimeline will take it over"
                    ),
                },
                Err(error) => {
                    tracing::error!(dir = %dir.display(), %error, "timeline failed to load; it is served as broken");
                    timelines.insert(key, Slot::Broken(error.to_string()));
                }
            }
        }
        log.lock().append(&unrecorded)?;
        // Materialized timelines with no directory at all are lost copies, never made again here: the copy may
        // have voted before it was lost (its first vote made its directory durable, so no crash removes it), and
        // an empty copy would have forgotten the promise. A pull rebuilds them after the quiet period, with the
        // highest term any peer promised. One never materialized never voted: it has no file until it does.
        for (key, start_lsn) in logged_without_dir {
            if !log.lock().is_materialized(&key) {
                timelines.insert(key, open_logged(&config, key, start_lsn, &lock, &log));
                continue;
            }
            tracing::warn!(
                node = config.node_id,
                tenant = %key.0,
                timeline = %key.1,
                %start_lsn,
                "a logged timeline has no directory: a lost copy, not loaded (a pull rebuilds it)"
            );
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
            log,
            lock,
            shutdown: watch::Sender::new(false),
            opened_at: std::time::Instant::now(),
            pull_quiet_period: Mutex::new(Duration::from_millis(PULL_QUIET_PERIOD_MS)),
            pulling: Mutex::new(std::collections::HashSet::new()),
            appends_pending: AtomicUsize::new(0),
        })
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

    /// Creates the timeline `key` whose WAL starts at `start_lsn`, durably (one fdatasync of the creation log,
    /// and no file of its own until its first write: see the module doc); blocks on disk I/O. Idempotent for
    /// the same start LSN; `AlreadyExists` for another.
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
        // The log record is the commit point (see `creations`). A directory found here (a creation cut short
        // before its record) is taken over; none is made.
        let dir = self.timeline_dir(key);
        let (control, wal, store) =
            filestore::create_timeline_deferred(&dir, start_lsn, &self.config.store, materialization(&self.log, key))
                .map_err(AcceptorError::from)?;
        if control.timeline_start_lsn != start_lsn {
            // `create_timeline_deferred` checks this too; a directory left by a crash holds whatever it holds.
            return Err(NodeError::AlreadyExists {
                key,
                existing: control.timeline_start_lsn,
                requested: start_lsn,
            });
        }
        let acceptor = Acceptor::new(control, wal, store)?;
        {
            let mut log = self.log.lock();
            let record = (log.logged().get(&key) != Some(&start_lsn)).then_some(Record::Created(key, start_lsn));
            log.append(record.as_slice())?;
        }
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
        // First, so that a timeline the log made is never made again at open once its directory goes.
        {
            let mut log = self.log.lock();
            if log.is_logged(&key) {
                log.append(&[Record::Deleted(key)])?;
            }
        }
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
        {
            let mut log = self.log.lock();
            let mut logged: Vec<TimelineKey> = log.logged().keys().filter(|key| key.0 == tenant).copied().collect();
            logged.sort_unstable();
            let deleted: Vec<Record> = logged.into_iter().map(Record::Deleted).collect();
            log.append(&deleted)?;
        }
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
