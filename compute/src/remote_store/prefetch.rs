//! Prefetching: pages the VFS expects a reader to need next (`vfs::readahead`) requested on [`STREAMS`]
//! `GetPages` streams per store, a request batch to each in turn, so they are in flight while SQLite works on
//! the pages before them, and the pageserver reads one batch while it sends the one before (it serves each
//! stream in a task of its own).
//!
//! A prefetched page waits in a slot (block, snapshot LSN) until a read at exactly that snapshot takes it (a
//! prefetch hit; the page then goes into the host cache like any page read) or the slot is dropped unread (a
//! wasted prefetch: the window moved on, the slots were needed for newer requests, the store stopped). A read
//! that finds its block still in flight waits for it, at most the `GetPage` deadline; a failed or missing
//! prefetch is never an error, only a miss: the read then makes its own `GetPage` round trip.
//!
//! **From the file cache.** Hinted blocks the host's file cache holds are read from it the same way, ahead of
//! the reader, on a blocking thread of the store's runtime (read and checked there, `HostCache::read_from_file`),
//! into slots of their own: the reader takes the page and only counts it and admits it to memory
//! (`HostCache::admit_from_file`), so the file's reads and checks overlap SQLite's work on the pages before.
//!
//! **The file cache.** A page that arrives is kept in the host's file cache by the stream's receiver, a
//! response batch at a time (`HostCache::file_prefetched`: a write for a run of pages, not two a page), after
//! its reader was woken: the reader, SQLite's thread, only puts it in memory (`HostCache::insert_prefetched`). A
//! page that is never read is kept too: it is the page at the LSN it was asked for, as any page read is.
//!
//! Bounds: at most [`PrefetchConfig::bytes_max`] of pages requested or held per store (slots of one page each);
//! at most [`STREAM_BATCHES_MAX`] request batches queued for each stream. A stream is opened on first use
//! and again after it fails; its failure fails only the pages asked for on it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cambium_types::{Key, Lsn, TimelineId, PAGE_SIZE_BYTES};
use parking_lot::{Condvar, Mutex};
use proto::pageserver as pb;
use proto::pageserver::page_service_client::PageServiceClient;
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::cache::{Fact, HostCache};
use crate::metrics::METRICS;

/// Request batches queued for one of a store's `GetPages` streams, at most; past it new prefetches are skipped.
pub const STREAM_BATCHES_MAX: usize = 16;
/// `GetPages` streams per store: request batches go to each in turn.
pub const STREAMS: usize = 2;

/// How far ahead a store prefetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefetchConfig {
    /// Pages the VFS asks for ahead of a reader reading in order (0: no prefetching).
    pub window_pages: u32,
    /// Bytes of prefetched pages a store has requested or holds unread, at most.
    pub bytes_max: usize,
}

impl Default for PrefetchConfig {
    /// 256 pages (2 MiB) ahead, at most 8 MiB requested or held per store.
    fn default() -> Self {
        PrefetchConfig {
            window_pages: 256,
            bytes_max: 8 << 20,
        }
    }
}

#[derive(Debug)]
enum SlotState {
    InFlight,
    /// The page, and its fact if it came from the file cache (else from the pageserver).
    Arrived(Bytes, Option<Fact>),
    Failed,
}

/// The stream of slots read from the file cache (none fails with a `GetPages` stream).
const FILE_STREAM: (usize, u64) = (usize::MAX, 0);
/// Pages read from the file cache between two wake-ups of the reader.
const FILE_CHUNK_PAGES: usize = 16;

#[derive(Debug)]
struct Slot {
    id: u64,
    lsn: Lsn,
    state: SlotState,
    /// The stream it was asked for on: (index, generation).
    stream: (usize, u64),
}

/// One open `GetPages` stream: its requests' sender and its generation (streams reopened get new ones).
#[derive(Debug)]
struct Stream {
    sender: mpsc::Sender<pb::GetPageBatch>,
    generation: u64,
}

#[derive(Debug, Default)]
struct Slots {
    by_block: HashMap<u32, Slot>,
    /// Request id → block, for the slots in flight.
    by_id: HashMap<u64, u32>,
    /// Blocks in the order their slots were made (may hold blocks whose slot is gone or newer).
    order: VecDeque<(u32, u64)>,
    next_id: u64,
    streams: [Option<Stream>; STREAMS],
    /// The stream the next request batch goes to.
    next_stream: usize,
    next_stream_generation: u64,
    /// Blocks the VFS hinted at and not read since (at most `hints_max`), oldest first: reads of a scan.
    hints: HashSet<u32>,
    hint_order: VecDeque<u32>,
}

/// What [`Slots::reserve`] did for a block.
enum Reserved {
    /// A slot at that LSN exists already: nothing to ask.
    Held,
    /// Every slot is in flight: ask for nothing more now.
    Full,
    /// A new in-flight slot, by its request id.
    New(u64),
}

impl Slots {
    /// Makes an in-flight slot for `block` at `lsn` asked on `stream` (a slot at another LSN replaced, the oldest
    /// slot not in flight freed when `slots_max` are held).
    fn reserve(&mut self, block: u32, lsn: Lsn, stream: (usize, u64), slots_max: usize) -> Reserved {
        match self.by_block.get(&block) {
            Some(slot) if slot.lsn == lsn => return Reserved::Held,
            Some(_) => self.drop_slot(block, true),
            None => {}
        }
        if self.by_block.len() >= slots_max && !self.free_oldest() {
            return Reserved::Full;
        }
        let id = self.next_id;
        self.next_id += 1;
        let state = SlotState::InFlight;
        self.by_block.insert(block, Slot { id, lsn, state, stream });
        self.by_id.insert(id, block);
        self.order.push_back((block, id));
        Reserved::New(id)
    }

    /// Drops `block`'s slot; counts it wasted unless it was taken.
    fn drop_slot(&mut self, block: u32, wasted: bool) {
        if let Some(slot) = self.by_block.remove(&block) {
            self.by_id.remove(&slot.id);
            if wasted && slot.stream != FILE_STREAM && !matches!(slot.state, SlotState::Failed) {
                METRICS.prefetch_wasted_pages_total.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Frees the oldest slot that is not in flight, if any (its page was never read).
    fn free_oldest(&mut self) -> bool {
        while let Some(&(block, id)) = self.order.front() {
            match self.by_block.get(&block) {
                Some(slot) if slot.id == id => {
                    if matches!(slot.state, SlotState::InFlight) {
                        return false; // the window is all in flight
                    }
                    self.order.pop_front();
                    self.drop_slot(block, true);
                    return true;
                }
                _ => {
                    self.order.pop_front(); // stale entry
                }
            }
        }
        false
    }

    /// The stream `(index, generation)` ended: the pages asked for on it will not come.
    fn fail_in_flight(&mut self, stream: (usize, u64)) {
        for slot in self.by_block.values_mut() {
            if slot.stream == stream && matches!(slot.state, SlotState::InFlight) {
                slot.state = SlotState::Failed;
                self.by_id.remove(&slot.id);
            }
        }
        let (index, generation) = stream;
        if self.streams[index].as_ref().is_some_and(|s| s.generation == generation) {
            self.streams[index] = None;
        }
    }
}

/// A store's prefetched pages; see the module doc.
#[derive(Debug)]
pub(super) struct Prefetcher {
    slots: Mutex<Slots>,
    /// Where arrived pages are kept (its file cache), as pages of `timeline`.
    cache: Arc<HostCache>,
    timeline: TimelineId,
    arrived: Condvar,
    slots_max: usize,
    window_pages: u32,
    hints_max: usize,
}

impl Prefetcher {
    pub(super) fn new(config: PrefetchConfig, cache: Arc<HostCache>, timeline: TimelineId) -> Arc<Prefetcher> {
        Arc::new(Prefetcher {
            slots: Mutex::new(Slots::default()),
            cache,
            timeline,
            arrived: Condvar::new(),
            slots_max: config.bytes_max / PAGE_SIZE_BYTES,
            hints_max: 4 * config.window_pages as usize,
            window_pages: if config.bytes_max >= PAGE_SIZE_BYTES {
                config.window_pages
            } else {
                0
            },
        })
    }

    /// Pages the VFS should ask for ahead of a reader (0: none).
    pub(super) fn window_pages(&self) -> u32 {
        self.window_pages
    }

    /// Forgets the `GetPages` streams (the store was re-pointed): the next requests open them on the new
    /// client, and what was in flight on the old ones is answered there or failed with them.
    pub(super) fn reset_stream(&self) {
        let mut slots = self.slots.lock();
        for stream in &mut slots.streams {
            *stream = None;
        }
    }

    /// Notes that the VFS hinted at `blocks` (read-ahead of a scan), whether they are cached or not.
    pub(super) fn note_hints(&self, blocks: &[u32]) {
        let mut slots = self.slots.lock();
        for &block in blocks {
            if slots.hints.insert(block) {
                slots.hint_order.push_back(block);
            }
        }
        while slots.hint_order.len() > self.hints_max {
            if let Some(old) = slots.hint_order.pop_front() {
                slots.hints.remove(&old);
            }
        }
    }

    /// Whether `block` was hinted at (and not read since): its read is part of a scan.
    pub(super) fn take_hint(&self, block: u32) -> bool {
        self.slots.lock().hints.remove(&block)
    }

    /// Requests `blocks` at `lsn` (blocks the caches cannot serve), as many as the bounds allow.
    pub(super) fn request(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        client: &PageServiceClient<Channel>,
        timeline: &pb::TimelineRef,
        blocks: &[u32],
        lsn: Lsn,
    ) {
        let mut slots = self.slots.lock();
        let index = slots.next_stream;
        let stream = match &slots.streams[index] {
            Some(stream) if !stream.sender.is_closed() => (index, stream.generation),
            _ => {
                let generation = slots.next_stream_generation;
                slots.next_stream_generation += 1;
                (index, generation)
            }
        };
        let mut requests = Vec::new();
        let mut requested = Vec::new();
        for &block in blocks {
            let id = match slots.reserve(block, lsn, stream, self.slots_max) {
                Reserved::Held => continue,
                Reserved::Full => break,
                Reserved::New(id) => id,
            };
            requested.push(block);
            requests.push(pb::GetPageRequest {
                timeline: Some(timeline.clone()),
                key: Key::page(block).0,
                read_lsn: lsn.0,
                not_modified_since: 0,
                request_id: id,
            });
        }
        if requests.is_empty() {
            return;
        }
        let count = requests.len();
        let sender = match &slots.streams[index] {
            Some(open) if open.generation == stream.1 => open.sender.clone(),
            _ => {
                let sender = self.open_stream(runtime, client.clone(), stream);
                slots.streams[index] = Some(Stream {
                    sender: sender.clone(),
                    generation: stream.1,
                });
                sender
            }
        };
        slots.next_stream = (index + 1) % STREAMS;
        if sender.try_send(pb::GetPageBatch { requests }).is_err() {
            // The stream is full or gone: these are not in flight after all.
            for block in requested {
                slots.drop_slot(block, false);
            }
            return;
        }
        METRICS
            .prefetch_requested_pages_total
            .fetch_add(count as u64, Ordering::Relaxed);
    }

    /// Opens the `GetPages` stream on the store's runtime; its responses fill the slots.
    fn open_stream(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        mut client: PageServiceClient<Channel>,
        stream: (usize, u64),
    ) -> mpsc::Sender<pb::GetPageBatch> {
        let (sender, receiver) = mpsc::channel(STREAM_BATCHES_MAX);
        let prefetcher = Arc::downgrade(self);
        runtime.spawn(async move {
            let requests = futures::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|batch| (batch, receiver))
            });
            match client.get_pages(requests).await {
                Ok(response) => receive(&prefetcher, response.into_inner()).await,
                Err(status) => tracing::debug!(%status, "prefetch stream refused"),
            }
            if let Some(prefetcher) = prefetcher.upgrade() {
                prefetcher.slots.lock().fail_in_flight(stream);
                prefetcher.arrived.notify_all();
            }
        });
        sender
    }

    /// Fills the slots of `results`; returns the pages that arrived, `(block, lsn, page)`, for the file cache.
    fn deliver(&self, results: Vec<pb::GetPageResult>) -> Vec<(u32, Lsn, Bytes)> {
        let mut arrived = Vec::with_capacity(results.len());
        let mut slots = self.slots.lock();
        for result in results {
            let Some(block) = slots.by_id.remove(&result.request_id) else {
                continue; // dropped meanwhile (counted then)
            };
            let Some(slot) = slots.by_block.get_mut(&block) else {
                continue;
            };
            slot.state = match result.result {
                // Bytes from a peer are checked before use.
                Some(pb::get_page_result::Result::Page(page)) if page.len() == PAGE_SIZE_BYTES => {
                    arrived.push((block, slot.lsn, page.clone()));
                    SlotState::Arrived(page, None)
                }
                _ => SlotState::Failed,
            };
        }
        drop(slots);
        self.arrived.notify_all();
        arrived
    }

    /// Keeps pages that arrived in the host's file cache (blocking file writes: off the async workers when the
    /// runtime allows it).
    fn file(&self, arrived: &[(u32, Lsn, Bytes)]) {
        if arrived.is_empty() || !self.cache.has_file() {
            return;
        }
        let write = || self.cache.file_prefetched(self.timeline, arrived);
        match tokio::runtime::Handle::try_current().map(|handle| handle.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(write),
            _ => write(),
        }
    }

    /// Reads `blocks` at `lsn` from the host's file cache ahead of the reader (blocks it holds), as many as the
    /// bounds allow, on a blocking thread of `runtime`.
    pub(super) fn request_from_file(self: &Arc<Self>, runtime: &tokio::runtime::Handle, blocks: &[u32], lsn: Lsn) {
        let mut wanted = Vec::with_capacity(blocks.len());
        {
            let mut slots = self.slots.lock();
            for &block in blocks {
                let id = match slots.reserve(block, lsn, FILE_STREAM, self.slots_max) {
                    Reserved::Held => continue,
                    Reserved::Full => break,
                    Reserved::New(id) => id,
                };
                wanted.push((id, block));
            }
        }
        if wanted.is_empty() {
            return;
        }
        let prefetcher = Arc::downgrade(self);
        runtime.spawn_blocking(move || {
            for chunk in wanted.chunks(FILE_CHUNK_PAGES) {
                let Some(prefetcher) = prefetcher.upgrade() else { return };
                let pages: Vec<_> = chunk
                    .iter()
                    .map(|&(id, block)| (id, prefetcher.cache.read_from_file(prefetcher.timeline, block, lsn)))
                    .collect();
                let mut slots = prefetcher.slots.lock();
                for (id, page) in pages {
                    let Some(block) = slots.by_id.remove(&id) else { continue };
                    if let Some(slot) = slots.by_block.get_mut(&block) {
                        slot.state = match page {
                            Some((fact, page)) => SlotState::Arrived(page, Some(fact)),
                            None => SlotState::Failed,
                        };
                    }
                }
                drop(slots);
                prefetcher.arrived.notify_all();
            }
        });
    }

    /// The prefetched page of `block` at `lsn`, waiting (at most `timeout`) if it is in flight, with its fact
    /// if it was read from the file cache; `None` if there is none or it failed (the caller reads it itself).
    pub(super) fn take(&self, block: u32, lsn: Lsn, timeout: Duration) -> Option<(Bytes, Option<Fact>)> {
        let deadline = Instant::now() + timeout;
        let mut slots = self.slots.lock();
        loop {
            let slot = slots.by_block.get(&block).filter(|slot| slot.lsn == lsn)?;
            match &slot.state {
                SlotState::InFlight => {
                    if self.arrived.wait_until(&mut slots, deadline).timed_out() {
                        slots.drop_slot(block, true);
                        return None;
                    }
                }
                SlotState::Arrived(page, fact) => {
                    let taken = (page.clone(), *fact);
                    slots.drop_slot(block, false);
                    if taken.1.is_none() {
                        METRICS.reads_prefetch_total.fetch_add(1, Ordering::Relaxed);
                    }
                    return Some(taken);
                }
                SlotState::Failed => {
                    slots.drop_slot(block, false);
                    return None;
                }
            }
        }
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        let slots = self.slots.get_mut();
        let unread = slots
            .by_block
            .values()
            .filter(|slot| slot.stream != FILE_STREAM && !matches!(slot.state, SlotState::Failed))
            .count();
        METRICS
            .prefetch_wasted_pages_total
            .fetch_add(unread as u64, Ordering::Relaxed);
    }
}

/// Hands every response batch of the stream to the prefetcher while it exists.
async fn receive(prefetcher: &Weak<Prefetcher>, mut responses: tonic::Streaming<pb::GetPageResponseBatch>) {
    loop {
        match responses.message().await {
            Ok(Some(batch)) => match prefetcher.upgrade() {
                Some(prefetcher) => {
                    let arrived = prefetcher.deliver(batch.results);
                    prefetcher.file(&arrived);
                }
                None => return,
            },
            Ok(None) => return,
            Err(status) => {
                tracing::debug!(%status, "prefetch stream ended");
                return;
            }
        }
    }
}
