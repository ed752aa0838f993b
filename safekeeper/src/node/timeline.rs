//! One timeline of a node: its acceptor behind a lock taken only on blocking threads, the watch of its commit
//! LSN, and its deleted and broken marks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cambium_types::Lsn;
use parking_lot::Mutex;
use tokio::sync::watch;

use cambium_types::TimelineKey;
use safekeeper_core::protocol::AcceptorState;

use super::{DirLock, FileAcceptor, NodeError};

/// One timeline of a node: its acceptor and the watch of its commit LSN.
pub struct Timeline {
    key: TimelineKey,
    pub(super) start_lsn: Lsn,
    pub(super) acceptor: Mutex<FileAcceptor>,
    commit_lsn: watch::Sender<Lsn>,
    /// Set when a request panicked while holding the acceptor.
    broken: AtomicBool,
    /// Turns `true` (under the acceptor lock, once) when the timeline is deleted, or replaced by a replica;
    /// never back.
    pub(super) deleted: watch::Sender<bool>,
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
    pub(super) fn new(key: TimelineKey, acceptor: FileAcceptor, lock: Arc<DirLock>) -> Timeline {
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
    pub(super) fn mark_deleted(&self) {
        let acceptor = self.acceptor.lock();
        self.deleted.send_replace(true);
        drop(acceptor);
    }

    pub(super) fn check_usable(&self) -> Result<(), NodeError> {
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
