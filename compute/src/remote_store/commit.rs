//! A commit of any size: one WAL record when the transaction fits one part, else a group of parts and a commit.
//!
//! The pages go in block order, each as a byte-range delta when little of a cached current version changed, else
//! whole, cut into chunks of about `part_bytes_max` encoded bytes. A transaction of one chunk is one version 1
//! record, as before groups existed. A larger one is a group (`cambium_types::wal::group`): its parts, named by
//! the start LSN of the first (this store's read LSN: it is the branch's only writer, and the first part's
//! acknowledged end checks it), each handed to the proposer in order (so each gets the LSNs after the one
//! before) with its own deadline and at most `appends_in_flight_max` in flight, then, once every part is on a
//! quorum, the commit record. Nothing of it is visible before the commit is, on the pageserver or here. So the deadline follows progress (a part, not the whole transaction), the
//! memory is a few parts, and the limit (`transaction_bytes_max`) is checked before anything is sent.
//!
//! Once a part was handed to the proposer any failure fails the store (DESIGN §5): if the commit record was
//! never sent the transaction is certainly not there, but the proposer's WAL now ends past parts this store
//! did not see acknowledged, so the store restarts from what the safekeepers hold.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;

use bytes::Bytes;
use cambium_types::wal::WalPart;
use cambium_types::{Key, Lsn, Value, WalRecord, PAGE_SIZE_BYTES};
use walproposer::{WalProposer, WalProposerError};

use crate::metrics::{Metrics, METRICS};

use super::in_flight::PendingCommit;
use super::{now_us, page_delta, wait_blocking, RemotePageStore, WAIT_MARGIN};
use crate::page_store::{PageStoreError, Snapshot};

/// The acknowledgement of one append: its end LSN, or why it failed.
type AppendReply = Receiver<Result<Lsn, WalProposerError>>;

/// A transaction's pages as chunks of WAL entries (see the module doc).
struct Chunks<'a, I: Iterator<Item = Result<(u32, Bytes), PageStoreError>>> {
    store: &'a RemotePageStore,
    pages: std::iter::Peekable<I>,
    db_size_pages: u32,
    committed_size_pages: u32,
    /// Every block sent, for the cache once committed.
    blocks: Vec<u32>,
    /// The last pages sent (up to the cache's capacity), cached once committed.
    recent: VecDeque<(u32, Bytes)>,
    /// The pages of the chunk taken last: all of a transaction of one part, kept for reads until it is
    /// acknowledged (`in_flight`).
    chunk_pages: BTreeMap<u32, Bytes>,
}

impl<I: Iterator<Item = Result<(u32, Bytes), PageStoreError>>> Chunks<'_, I> {
    /// The next chunk's entries, or `None` when every page was taken.
    fn next_chunk(&mut self) -> Result<Option<Vec<(Key, Value)>>, PageStoreError> {
        let part_bytes_max = self.store.part_bytes_max;
        self.chunk_pages.clear();
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        while bytes < part_bytes_max {
            let Some(page) = self.pages.next() else {
                break;
            };
            let (block, page) = page?;
            if page.len() != PAGE_SIZE_BYTES {
                return Err(PageStoreError::InvalidPage {
                    block,
                    len_bytes: page.len(),
                });
            }
            if block >= self.db_size_pages {
                let db_size_pages = self.db_size_pages;
                return Err(PageStoreError::BlockBeyondSize { block, db_size_pages });
            }
            let value = self.value(block, &page);
            bytes += 8 + value.encoded_len();
            entries.push((Key::page(block), value));
            self.blocks.push(block);
            self.chunk_pages.insert(block, page.clone());
            if self.store.cache_capacity_pages > 0 {
                if self.recent.len() == self.store.cache_capacity_pages {
                    self.recent.pop_front();
                }
                self.recent.push_back((block, page));
            }
        }
        Ok((!entries.is_empty()).then_some(entries))
    }

    /// A page inside the committed database whose current version is known goes as the byte ranges that
    /// changed: the version of a commit in flight, else the cached one (the pageserver holds exactly that
    /// version at the read LSN, since this compute is the branch's only writer). Anything else goes whole.
    fn value(&self, block: u32, page: &Bytes) -> Value {
        let previous = (block < self.committed_size_pages)
            .then(|| {
                let state = self.store.state.lock();
                match state.pending_version(block, state.head_lsn) {
                    Some(in_flight) => in_flight,
                    None => state.cache.latest(block, state.read_lsn),
                }
            })
            .flatten();
        previous
            .and_then(|old| page_delta(&old, page))
            .map_or_else(|| Value::Image(page.clone()), Value::Delta)
    }

    fn is_done(&mut self) -> bool {
        self.pages.peek().is_none()
    }
}

impl RemotePageStore {
    /// Commits `page_count` pages (in block order) and the new size; see the module doc. The caller holds the
    /// commit lock and checked the store is writable and not failed.
    pub(super) fn commit_pages(
        &self,
        proposer: &Arc<WalProposer>,
        pages: impl Iterator<Item = Result<(u32, Bytes), PageStoreError>>,
        page_count: usize,
        db_size_pages: u32,
    ) -> Result<Snapshot, PageStoreError> {
        let bytes = page_count.saturating_mul(PAGE_SIZE_BYTES);
        if bytes > self.transaction_bytes_max {
            // Refused before anything is sent: the store goes on, and so do the branch's other sessions.
            return Err(PageStoreError::TooLarge {
                bytes,
                max_bytes: self.transaction_bytes_max,
            });
        }
        let (head_lsn, committed_size_pages) = {
            let state = self.state.lock();
            (state.head_lsn, state.head_db_size_pages)
        };
        let mut chunks = Chunks {
            store: self,
            pages: pages.peekable(),
            db_size_pages,
            committed_size_pages,
            blocks: Vec::with_capacity(page_count),
            recent: VecDeque::new(),
            chunk_pages: BTreeMap::new(),
        };
        let first = chunks.next_chunk()?.unwrap_or_default();
        let record = |entries| WalRecord {
            commit_ts_us: now_us(),
            db_size_pages,
            entries,
        };
        if chunks.is_done() {
            let frame = record(first).to_frame().map_err(|e| encoding_failed(&e))?;
            let commit = PendingCommit::new(db_size_pages, chunks.blocks, chunks.recent, chunks.chunk_pages);
            return self.hand_off(proposer, frame, commit);
        }
        // A group is appended after every commit before it is acknowledged: it starts at the read LSN.
        self.wait_acknowledged(head_lsn)?;
        let read_lsn = head_lsn;
        let end_lsn = {
            self.append_group(proposer, &mut chunks, first, read_lsn)?;
            let frame = record(Vec::new())
                .to_group_commit_frame(read_lsn)
                .map_err(|e| self.fail(format!("transaction not committed: encoding its commit: {e}")))?;
            // Even a refusal fails the store now: the proposer's WAL ends past this group's parts.
            let reply = self
                .send_append(proposer, frame, 0)
                .map_err(|e| self.fail(format!("commit failed: the commit record was not handed over: {e}")))?;
            match self.wait_append(reply) {
                Ok(end_lsn) => end_lsn,
                Err(e) => return Err(self.fail(format!("commit failed: {e}"))),
            }
        };
        let mut state = self.state.lock();
        assert!(state.pending.is_empty(), "a commit was handed over during a group");
        state.acknowledge_group(end_lsn, db_size_pages, &chunks.blocks, chunks.recent);
        drop(state);
        self.acknowledged.notify_all();
        Ok(Snapshot {
            lsn: end_lsn,
            db_size_pages,
        })
    }

    /// Sends every chunk as a part of the group that starts at `group_lsn`, at most `appends_in_flight_max` at
    /// a time, and returns once every part is on a quorum.
    fn append_group<I: Iterator<Item = Result<(u32, Bytes), PageStoreError>>>(
        &self,
        proposer: &Arc<WalProposer>,
        chunks: &mut Chunks<'_, I>,
        first: Vec<(Key, Value)>,
        group_lsn: Lsn,
    ) -> Result<(), PageStoreError> {
        let not_committed = |why: String| self.fail(format!("transaction not committed: {why}"));
        let mut in_flight: VecDeque<(AppendReply, Option<Lsn>)> = VecDeque::new();
        let mut next = Some(first);
        let mut parts = 0u64;
        while let Some(entries) = next.take() {
            let frame = WalPart { group_lsn, entries }.to_frame().map_err(|e| {
                let error = encoding_failed(&e);
                if parts == 0 {
                    error
                } else {
                    not_committed(error.to_string())
                }
            })?;
            // The first part starts the group where this store's history ends.
            let expected_end = (parts == 0).then(|| Lsn(group_lsn.0 + frame.len() as u64));
            let reply = match self.send_append(proposer, frame, in_flight.len()) {
                Ok(reply) => reply,
                // Nothing of the group was handed over yet: the store can go on.
                Err(e @ (WalProposerError::BadRecord | WalProposerError::Overloaded)) if parts == 0 => {
                    return Err(PageStoreError::Unavailable(format!("commit refused: {e}")))
                }
                Err(e) => return Err(not_committed(format!("a part was not handed over: {e}"))),
            };
            in_flight.push_back((reply, expected_end));
            parts += 1;
            if in_flight.len() >= self.appends_in_flight_max {
                self.wait_part(&mut in_flight)?;
            }
            next = match chunks.next_chunk() {
                Ok(chunk) => chunk,
                Err(e) => return Err(not_committed(e.to_string())),
            };
        }
        while !in_flight.is_empty() {
            self.wait_part(&mut in_flight)?;
        }
        tracing::info!(parts, group = %group_lsn, pages = chunks.blocks.len(), "transaction parts on a quorum");
        Ok(())
    }

    /// Waits for the oldest part in flight.
    fn wait_part(&self, in_flight: &mut VecDeque<(AppendReply, Option<Lsn>)>) -> Result<(), PageStoreError> {
        let (reply, expected_end) = in_flight.pop_front().expect("called with parts in flight");
        match self.wait_append(reply) {
            Ok(end_lsn) if expected_end.is_none_or(|expected| expected == end_lsn) => Ok(()),
            Ok(end_lsn) => Err(self.fail(format!(
                "transaction not committed: its first part ended at {end_lsn}, not at {expected_end:?}"
            ))),
            Err(e) => Err(self.fail(format!("transaction not committed: a part failed: {e}"))),
        }
    }

    /// Hands `frame` to the proposer at once, in call order ([`WalProposer::submit`]: frames handed over one
    /// after another get consecutive LSNs, which concurrent `append`s do not promise); the reply comes on the
    /// returned channel. Refused (`Overloaded`, `Shutdown`, `BadRecord`) means nothing of `frame` was handed
    /// over.
    ///
    /// `behind` records of this transaction are in flight before it: its deadline is one commit timeout for
    /// each and one for itself, so the deadline follows the transaction's progress (a part queued behind others
    /// on a slow disk is not failed for their time).
    fn send_append(
        &self,
        proposer: &WalProposer,
        frame: Bytes,
        behind: usize,
    ) -> Result<AppendReply, WalProposerError> {
        let timeout_ms = (self.commit_timeout.as_millis() as u64).saturating_mul(behind as u64 + 1);
        let reply = proposer.submit_within(frame, timeout_ms)?;
        let (tx, rx) = mpsc::sync_channel(1);
        self.runtime.get().spawn(async move {
            let started = std::time::Instant::now();
            let appended = reply.await;
            Metrics::add_micros(&METRICS.commit_quorum_us_total, started.elapsed());
            // The caller may have stopped waiting; then nobody needs the answer.
            let _ = tx.send(appended);
        });
        Ok(rx)
    }

    /// Waits for one append's reply, at most its commit timeout plus a margin (the proposer gives up at its
    /// own timeout first).
    fn wait_append(&self, reply: AppendReply) -> Result<Lsn, WalProposerError> {
        let timeout_ms = self.commit_timeout.as_millis() as u64;
        let started = std::time::Instant::now();
        let received = wait_blocking(|| reply.recv_timeout(self.commit_timeout + WAIT_MARGIN));
        Metrics::add_micros(&METRICS.commit_append_wait_us_total, started.elapsed());
        match received {
            Ok(result) => result,
            Err(_) => Err(WalProposerError::CommitTimeout { timeout_ms }),
        }
    }
}

/// A record or part that does not encode: refused before it is sent.
fn encoding_failed(error: &cambium_types::wal::WalEncodeError) -> PageStoreError {
    PageStoreError::Unavailable(format!("encoding the commit record: {error}"))
}
