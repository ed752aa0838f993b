//! Commits in flight (DESIGN §5, early lock release): a transaction of one record is handed to the proposer
//! under the commit lock, in LSN order, and its caller goes on at once; a task on the store's runtime takes
//! the proposer's acknowledgement and only then makes the commit the read LSN and updates the cache.
//!
//! - **Order.** Records are handed over one at a time ([`WalProposer::submit`], under the commit lock), so each
//!   one's end LSN is known when it is handed over: the previous end plus its frame's length. The proposer
//!   commits in LSN order, so an acknowledged record implies every earlier one.
//! - **Snapshots.** The latest snapshot is the head: the end of the last record handed over. A writer builds on
//!   its predecessor's pages, read from the commits in flight ([`PendingCommit`]) and, for a block none of them
//!   wrote, at the acknowledged LSN (the version is the same). Whatever was read or written at an LSN past the
//!   acknowledged one may leave the compute only after [`RemotePageStore::wait_acknowledged`] for that LSN
//!   (`crate::vfs::durability` waits before a statement answers), so nobody is told of a commit that could still
//!   fail.
//! - **Failure.** A record that fails (a timeout is ambiguous, a fenced proposer) fails the store: every later
//!   record fails with it, every waiter is told, and the store is restarted from what the safekeepers hold, as
//!   for any ambiguous commit. The cache only ever learns acknowledged commits.
//! - **Bounds.** The pages of the commits in flight are kept in memory, at most [`PENDING_BYTES_MAX`] past one
//!   commit: a commit beyond it first waits for the ones before it. A transaction of several parts (a group)
//!   waits for every commit before it and for its own acknowledgement, as before (`commit`).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cambium_types::{Lsn, PAGE_SIZE_BYTES};
use parking_lot::{Condvar, Mutex};
use walproposer::{WalProposer, WalProposerError};

use super::{check_state, wait_blocking, RemotePageStore, State, WAIT_MARGIN};
use crate::metrics::{Metrics, METRICS};
use crate::page_store::{PageStoreError, Snapshot, ZERO_PAGE};

/// How long a commit's waiter polls for its acknowledgement before it sleeps on the condition variable. On a
/// virtual machine whose CPUs are otherwise idle, a sleeping waiter lets its CPU halt, and the safekeepers'
/// fdatasync completions and the wake-ups along the acknowledgement's path then reach halted CPUs late (this
/// machine: a 700-byte overwrite and fdatasync 44 µs back to back, 595 µs 0.5 ms after the previous one, 54 µs
/// then with another thread busy). Polling keeps one CPU running for the commit's short wait; between looks it
/// yields, so under load it gives the CPU to whatever else is runnable.
pub(super) const ACKNOWLEDGEMENT_POLL: Duration = Duration::from_micros(500);

/// Page bytes of commits in flight kept for reads, at most (one commit larger than it still goes, alone).
pub(super) const PENDING_BYTES_MAX: usize = 64 << 20;

/// A commit handed to the proposer and not acknowledged yet.
#[derive(Debug)]
pub(super) struct PendingCommit {
    /// Its end LSN, set when it is handed over.
    end_lsn: Lsn,
    db_size_pages: u32,
    /// Every block it wrote, for the cache at its acknowledgement.
    blocks: Vec<u32>,
    /// The last pages sent (up to the cache's capacity), cached at its acknowledgement.
    recent: VecDeque<(u32, Bytes)>,
    /// Every page it wrote, for reads until it is acknowledged.
    pages: BTreeMap<u32, Bytes>,
}

impl PendingCommit {
    /// A commit of `pages` (all it wrote) setting the size to `db_size_pages`.
    pub(super) fn new(
        db_size_pages: u32,
        blocks: Vec<u32>,
        recent: VecDeque<(u32, Bytes)>,
        pages: BTreeMap<u32, Bytes>,
    ) -> PendingCommit {
        PendingCommit {
            end_lsn: Lsn(0),
            db_size_pages,
            blocks,
            recent,
            pages,
        }
    }

    fn bytes(&self) -> usize {
        self.pages.len().saturating_mul(PAGE_SIZE_BYTES)
    }
}

impl State {
    /// What the commits in flight up to `lsn` say of `block`: `Some(Some(page))` the newest one wrote it,
    /// `Some(None)` a shrink dropped it since (a page of zeros if the database grew back past it), `None`
    /// none of them touched it (its version is the one at the acknowledged LSN).
    pub(super) fn pending_version(&self, block: u32, lsn: Lsn) -> Option<Option<Bytes>> {
        self.pending
            .iter()
            .rev()
            .filter(|commit| commit.end_lsn <= lsn)
            .find_map(|commit| match commit.pages.get(&block) {
                Some(page) => Some(Some(page.clone())),
                None => (block >= commit.db_size_pages).then_some(None),
            })
    }

    /// The page `block` at `lsn` if a commit in flight decides it (see [`State::pending_version`]).
    pub(super) fn pending_page(&self, block: u32, lsn: Lsn) -> Option<Bytes> {
        self.pending_version(block, lsn)
            .map(|page| page.unwrap_or_else(|| Bytes::from_static(&ZERO_PAGE)))
    }

    /// The commits in flight up to `through` were acknowledged: each, in order, becomes the read LSN.
    fn settle(&mut self, through: Lsn) {
        while self.pending.front().is_some_and(|commit| commit.end_lsn <= through) {
            let commit = self.pending.pop_front().expect("checked by the loop condition");
            self.pending_bytes = self.pending_bytes.saturating_sub(commit.bytes());
            self.acknowledge_group(commit.end_lsn, commit.db_size_pages, &commit.blocks, commit.recent);
        }
    }

    /// A commit ending at `end_lsn` is on a quorum: the read LSN, the size and the cache follow it. Commits
    /// are acknowledged in LSN order.
    pub(super) fn acknowledge_group(
        &mut self,
        end_lsn: Lsn,
        db_size_pages: u32,
        blocks: &[u32],
        recent: VecDeque<(u32, Bytes)>,
    ) {
        assert!(
            end_lsn > self.read_lsn,
            "commit end LSN {end_lsn} is not past the read LSN {}",
            self.read_lsn
        );
        self.read_lsn = end_lsn;
        self.db_size_pages = db_size_pages;
        if self.head_lsn < end_lsn {
            self.head_lsn = end_lsn;
            self.head_db_size_pages = db_size_pages;
        }
        self.cache.truncate(db_size_pages);
        for block in blocks {
            self.cache.remove(*block);
        }
        let skip = recent.len().saturating_sub(self.cache_capacity_pages);
        for (block, page) in recent.into_iter().skip(skip) {
            self.cache.insert(block, page, end_lsn);
        }
        // The writer's record follows every acknowledgement, not only the next read: the commit path's deltas
        // are made against what it says is current (`TimelineCache::latest`).
        self.cache.observe(end_lsn);
    }
}

impl RemotePageStore {
    /// Hands the record `frame` of `commit` (a transaction of one part) to the proposer and returns its
    /// snapshot at once; the acknowledgement comes later (see the module doc). The caller holds the commit
    /// lock.
    pub(super) fn hand_off(
        &self,
        proposer: &WalProposer,
        frame: Bytes,
        mut commit: PendingCommit,
    ) -> Result<Snapshot, PageStoreError> {
        let (head_lsn, pending_bytes) = {
            let state = self.state.lock();
            (state.head_lsn, state.pending_bytes)
        };
        if pending_bytes > 0 && pending_bytes.saturating_add(commit.bytes()) > PENDING_BYTES_MAX {
            self.wait_acknowledged(head_lsn)?;
        }
        let end_lsn = Lsn(head_lsn.0 + frame.len() as u64);
        let reply = match proposer.submit(frame) {
            Ok(reply) => reply,
            // Refused before it was handed over: nothing of it is there, and the store can go on.
            Err(e @ (WalProposerError::BadRecord | WalProposerError::Overloaded)) => {
                return Err(PageStoreError::Unavailable(format!("commit refused: {e}")))
            }
            Err(e) => return Err(self.fail(format!("commit failed: {e}"))),
        };
        commit.end_lsn = end_lsn;
        let db_size_pages = commit.db_size_pages;
        {
            let mut state = self.state.lock();
            assert!(
                state.head_lsn == head_lsn,
                "the head moved from {head_lsn} to {} under the commit lock",
                state.head_lsn
            );
            state.head_lsn = end_lsn;
            state.head_db_size_pages = db_size_pages;
            state.pending_bytes = state.pending_bytes.saturating_add(commit.bytes());
            state.pending.push_back(commit);
        }
        let (state, acknowledged) = (self.state.clone(), self.acknowledged.clone());
        self.runtime.get().spawn(async move {
            let started = Instant::now();
            let result = reply.await;
            Metrics::add_micros(&METRICS.commit_quorum_us_total, started.elapsed());
            acknowledge(&state, &acknowledged, end_lsn, result);
        });
        Ok(Snapshot {
            lsn: end_lsn,
            db_size_pages,
        })
    }

    /// Waits until every commit up to `lsn` is on a quorum (at once if it is), or fails: the store failed
    /// (a commit up to `lsn` failed, or the store was closed) or no acknowledgement came within the commit
    /// timeout (then the store fails: the outcome is unknown). Blocks: call it from a blocking thread.
    pub(super) fn wait_acknowledged(&self, lsn: Lsn) -> Result<(), PageStoreError> {
        let started = Instant::now();
        let deadline = started + self.commit_timeout + WAIT_MARGIN;
        self.poll_acknowledged(lsn, started + ACKNOWLEDGEMENT_POLL);
        let mut state = self.state.lock();
        let result = loop {
            if state.read_lsn >= lsn {
                break Ok(());
            }
            if let Err(error) = check_state(&state) {
                break Err(error);
            }
            assert!(
                lsn <= state.head_lsn,
                "waiting for LSN {lsn} past the last commit handed over, {}",
                state.head_lsn
            );
            let waited = wait_blocking(|| self.acknowledged.wait_until(&mut state, deadline));
            if waited.timed_out() && state.read_lsn < lsn {
                drop(state);
                let timeout_ms = self.commit_timeout.as_millis();
                break Err(self.fail(format!(
                    "commit failed: LSN {lsn} not acknowledged within {timeout_ms} ms: it may or may not be committed"
                )));
            }
        };
        Metrics::add_micros(&METRICS.commit_append_wait_us_total, started.elapsed());
        result
    }

    /// Polls for `lsn`'s acknowledgement (or a failure) until `until`, giving the CPU to any other runnable thread
    /// between looks ([`ACKNOWLEDGEMENT_POLL`]).
    fn poll_acknowledged(&self, lsn: Lsn, until: Instant) {
        loop {
            {
                let state = self.state.lock();
                if state.read_lsn >= lsn || state.failed.is_some() {
                    return;
                }
            }
            if Instant::now() >= until {
                return;
            }
            std::thread::yield_now();
        }
    }
}

/// The proposer's answer for the record handed over as ending at `end_lsn`: every commit up to it becomes
/// the read LSN, or the store fails (see the module doc). Waiters are woken either way.
fn acknowledge(state: &Mutex<State>, acknowledged: &Condvar, end_lsn: Lsn, result: Result<Lsn, WalProposerError>) {
    let mut state = state.lock();
    // A later record's acknowledgement may have settled this one already (its answer then does not matter).
    if state.read_lsn < end_lsn {
        let failure = match result {
            Ok(lsn) if lsn == end_lsn => {
                state.settle(end_lsn);
                None
            }
            Ok(lsn) => Some(format!(
                "commit failed: acknowledged as ending at {lsn}, handed over as ending at {end_lsn}"
            )),
            // Timeout (ambiguous), fenced, shut down: never guess (DESIGN §5).
            Err(e) => Some(format!("commit failed: {e}")),
        };
        if let Some(reason) = failure {
            tracing::error!(%reason, "remote page store failed");
            state.failed.get_or_insert(reason);
        }
    }
    drop(state);
    acknowledged.notify_all();
}
