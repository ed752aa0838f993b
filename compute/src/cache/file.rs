//! The local file cache (LFC): pages evicted from memory kept in one file on the compute host's disk, so a
//! working set larger than the memory budget, a restarted compute and a new branch read them locally.
//!
//! **Layout** (`<path>`; all integers little-endian): a table of `slot_count` headers of [`HEADER_BYTES`], then
//! (from [`FileCache::pages_offset`], a multiple of the page size) `slot_count` pages. Slot `i`'s header:
//!
//! ```text
//! 0 magic u32 | 4 slot u32 | 8 timeline u128 | 24 block u32 | 28 from u64 | 36 to u64 | 44 page_crc u32
//! | 48..60 zero | 60 header_crc u32 (crc32 of bytes 0..60)
//! ```
//!
//! An all-zero header is an empty slot. `<path>.meta` holds the format version, the slot count and the page
//! size as text; it is written to a temporary file, fsynced and renamed (and the directory fsynced), and a
//! data file whose meta is missing or different is emptied before use.
//!
//! **Why a page read from it is right.** An entry is a [`Fact`] (see `facts`): true forever once true, so it
//! stays valid across restarts and branches and nothing needs fsyncing. A page is served only if, read
//! together, its header decodes (magic, the slot's own number, its crc), names the timeline and block asked
//! for, claims a range that serves the read, and the page's crc32 is the header's `page_crc`. A write is the
//! page first, then the header; a crash or a concurrent rewrite between the two leaves a header whose
//! `page_crc` does not match the page (or the old header naming the old page), so a torn, stale or corrupt
//! entry is detected and dropped, never served; the reader goes to the pageserver.
//!
//! **Eviction** is CLOCK over the slots. A write error poisons the cache (DESIGN's rule: never carry on after
//! a failed write); reads then miss, and the compute goes on without it.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use cambium_types::{Lsn, TimelineId, PAGE_SIZE_BYTES};
use parking_lot::Mutex;

use super::facts::{Fact, Link};
use crate::metrics::METRICS;

/// Bytes of one slot header.
pub const HEADER_BYTES: usize = 64;
/// The default size of the file cache (1 GiB).
pub const FILE_CACHE_BYTES_DEFAULT: u64 = 1 << 30;
/// The layout's version, written in the meta file.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: u32 = u32::from_le_bytes(*b"LFC1");
const PAGE_SIZE_U64: u64 = PAGE_SIZE_BYTES as u64;
/// Headers read at once when the file is opened.
const LOAD_CHUNK_SLOTS: usize = 16_384;
/// Facts kept per block of a timeline, at most: a newer one replaces the oldest (by the end of its range). Without
/// a bound the versions of a hot page (one a commit per version) filled the cache and every insert and lookup of
/// that block walked all of them (a one-row UPDATE loop spent a quarter of the process's CPU there).
pub const FILE_VERSIONS_MAX: usize = 4;
const _: () = assert!(PAGE_SIZE_BYTES % HEADER_BYTES == 0);

/// Where the file cache lives and how large it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCacheConfig {
    /// The data file (its meta file is beside it, with `.meta` added).
    pub path: PathBuf,
    /// Bytes of pages it holds, at most (rounded down to whole pages; the header table adds 1/128).
    pub size_bytes: u64,
}

/// Why the file cache could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileCacheError {
    /// Reading or writing its files failed.
    #[error("file cache {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The configured size holds no page, or too many to number.
    #[error("file cache of {size_bytes} bytes: {reason}")]
    BadSize {
        /// The configured size.
        size_bytes: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
}

#[derive(Clone, Copy, Default)]
struct SlotMeta {
    fact: Option<Fact>,
    page_crc: u32,
    referenced: bool,
    /// Bumped whenever the slot is given to a new page, so a read can tell it was overwritten meanwhile.
    generation: u64,
    /// Its page and header are being written: no victim.
    busy: bool,
}

struct FileState {
    slots: Vec<SlotMeta>,
    index: HashMap<(TimelineId, u32), Vec<u32>>,
    hand: usize,
    used_slots: usize,
}

/// The local file cache; see the module doc. Shared by every branch of a host.
pub struct FileCache {
    path: PathBuf,
    file: File,
    slot_count: u32,
    state: Mutex<FileState>,
    poisoned: AtomicBool,
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("path", &self.path)
            .field("slot_count", &self.slot_count)
            .finish_non_exhaustive()
    }
}

/// One slot's header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    slot: u32,
    fact: Fact,
    page_crc: u32,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&self.slot.to_le_bytes());
        out[8..24].copy_from_slice(&self.fact.timeline.0.to_le_bytes());
        out[24..28].copy_from_slice(&self.fact.block.to_le_bytes());
        out[28..36].copy_from_slice(&self.fact.from.0.to_le_bytes());
        out[36..44].copy_from_slice(&self.fact.to.0.to_le_bytes());
        out[44..48].copy_from_slice(&self.page_crc.to_le_bytes());
        let crc = crc32fast::hash(&out[0..60]);
        out[60..64].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses untrusted bytes: `None` for an empty, torn or foreign header.
    fn decode(bytes: &[u8]) -> Option<Header> {
        let bytes: &[u8; HEADER_BYTES] = bytes.try_into().ok()?;
        let u32_at = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let u64_at = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(word)
        };
        if u32_at(0) != MAGIC || u32_at(60) != crc32fast::hash(&bytes[0..60]) {
            return None;
        }
        let mut timeline = [0u8; 16];
        timeline.copy_from_slice(&bytes[8..24]);
        let fact = Fact {
            timeline: TimelineId(u128::from_le_bytes(timeline)),
            block: u32_at(24),
            from: Lsn(u64_at(28)),
            to: Lsn(u64_at(36)),
        };
        (fact.from <= fact.to).then_some(Header {
            slot: u32_at(4),
            fact,
            page_crc: u32_at(44),
        })
    }
}

impl FileCache {
    /// Opens the cache at `config.path`, keeping the entries of a previous run when the meta file matches,
    /// else starting empty.
    pub fn open(config: &FileCacheConfig) -> Result<FileCache, FileCacheError> {
        let slot_count = u32::try_from(config.size_bytes / PAGE_SIZE_U64)
            .ok()
            .filter(|count| *count > 0 && *count < u32::MAX)
            .ok_or(FileCacheError::BadSize {
                size_bytes: config.size_bytes,
                reason: "it must hold between one page and 2^32 - 1 pages",
            })?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| FileCacheError::Io { path, source }
        };
        let meta_path = meta_path(&config.path);
        let expected_meta = meta_text(slot_count);
        let meta_matches = std::fs::read_to_string(&meta_path).is_ok_and(|text| text == expected_meta);
        let total_bytes = pages_offset(slot_count) + u64::from(slot_count) * PAGE_SIZE_U64;
        if let Some(dir) = config.path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&config.path)
            .map_err(io(&config.path))?;
        let length = file.metadata().map_err(io(&config.path))?.len();
        let keep = meta_matches && length == total_bytes;
        if !keep {
            // A different layout, or a file never finished: start empty (sparse), then say so in the meta.
            file.set_len(0).map_err(io(&config.path))?;
            file.set_len(total_bytes).map_err(io(&config.path))?;
            file.sync_all().map_err(io(&config.path))?;
            write_meta(&meta_path, &expected_meta).map_err(io(&meta_path))?;
        }
        let cache = FileCache {
            path: config.path.clone(),
            file,
            slot_count,
            state: Mutex::new(FileState {
                slots: vec![SlotMeta::default(); slot_count as usize],
                index: HashMap::new(),
                hand: 0,
                used_slots: 0,
            }),
            poisoned: AtomicBool::new(false),
        };
        if keep {
            cache.load().map_err(io(&config.path))?;
        }
        tracing::info!(path = %config.path.display(), slot_count, kept = keep,
            entries = cache.state.lock().used_slots, "file cache opened");
        Ok(cache)
    }

    /// Reads every header of a previous run into the index.
    fn load(&self) -> std::io::Result<()> {
        let mut state = self.state.lock();
        let mut buffer = vec![0u8; LOAD_CHUNK_SLOTS * HEADER_BYTES];
        let mut dropped = 0u64;
        for first in (0..self.slot_count as usize).step_by(LOAD_CHUNK_SLOTS) {
            let count = LOAD_CHUNK_SLOTS.min(self.slot_count as usize - first);
            let chunk = &mut buffer[..count * HEADER_BYTES];
            self.file.read_exact_at(chunk, (first * HEADER_BYTES) as u64)?;
            for (offset, bytes) in chunk.chunks_exact(HEADER_BYTES).enumerate() {
                let slot = first + offset;
                match Header::decode(bytes) {
                    Some(header) if header.slot as usize == slot => {
                        state.slots[slot].fact = Some(header.fact);
                        state.slots[slot].page_crc = header.page_crc;
                        let key = (header.fact.timeline, header.fact.block);
                        state.index.entry(key).or_default().push(slot as u32);
                        state.used_slots += 1;
                    }
                    _ if bytes.iter().all(|b| *b == 0) => {}
                    _ => dropped += 1,
                }
            }
        }
        if dropped > 0 {
            tracing::warn!(dropped, "file cache headers that did not decode were dropped");
            METRICS.file_cache_corrupt_total.fetch_add(dropped, Ordering::Relaxed);
        }
        METRICS.add_file_cache_bytes(state.used_slots as u64 * PAGE_SIZE_U64);
        Ok(())
    }

    /// Bytes of pages held.
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used_slots as u64 * PAGE_SIZE_U64
    }

    /// Whether some entry serves `block` along `links`, without reading it.
    pub fn contains(&self, links: &[Link], block: u32) -> bool {
        !self.poisoned.load(Ordering::Relaxed) && self.find(&self.state.lock(), links, block).is_some()
    }

    /// A slot whose fact serves `block` at one of `links`, in order.
    fn find(&self, state: &FileState, links: &[Link], block: u32) -> Option<(u32, Link)> {
        links.iter().find_map(|link| {
            let slots = state.index.get(&(link.timeline, block))?;
            let slot = slots.iter().copied().find(|&slot| {
                state.slots[slot as usize]
                    .fact
                    .is_some_and(|fact| fact.serves(link.lsn, link.extension))
            })?;
            Some((slot, *link))
        })
    }

    /// A page that serves `block` along `links` (the read's timeline first, then its ancestors at their branch
    /// points), with its fact, read and checked (see the module doc); `None` on a miss or a bad entry.
    ///
    /// One read: the page. Its header was decoded and checked when it was written or when the file was opened,
    /// and what it says is in memory; the page must have the crc32 the header vouched for, and the slot must
    /// not have been given to another page while it was read (its generation, bumped before any rewrite).
    pub fn lookup(&self, links: &[Link], block: u32) -> Option<(Fact, Bytes)> {
        if self.poisoned.load(Ordering::Relaxed) {
            return None;
        }
        let (slot, fact, page_crc, generation) = {
            let mut state = self.state.lock();
            let (slot, _) = self.find(&state, links, block)?;
            let meta = &mut state.slots[slot as usize];
            meta.referenced = true;
            (slot, meta.fact?, meta.page_crc, meta.generation)
        };
        let mut page = vec![0u8; PAGE_SIZE_BYTES];
        let read = self.file.read_exact_at(&mut page, self.page_offset(slot));
        let good = read.is_ok() && crc32fast::hash(&page) == page_crc;
        let mut state = self.state.lock();
        if state.slots[slot as usize].generation != generation {
            // Given to another page while it was read: what was read may be torn. A miss.
            return None;
        }
        if !good {
            // Not a concurrent rewrite: the entry itself is bad. Drop it; the reader refetches.
            tracing::warn!(slot, block, "file cache entry failed its check; dropped");
            METRICS.file_cache_corrupt_total.fetch_add(1, Ordering::Relaxed);
            remove_slot(&mut state, slot);
            return None;
        }
        // The fact as it is now: it may have been widened while the page was read.
        let fact = state.slots[slot as usize].fact.unwrap_or(fact);
        Some((fact, Bytes::from(page)))
    }

    /// Keeps `fact` and its `page` (an entry evicted from memory). An entry of the block whose range overlaps
    /// it only has its range widened.
    pub fn insert(&self, fact: Fact, page: &[u8]) {
        self.insert_many(&[(fact, page)]);
    }

    /// Keeps each fact and its page, as [`FileCache::insert`] does one by one, but writes the pages given
    /// consecutive slots (a scan's pages in an empty or sequentially evicted cache) with one write, then their
    /// headers with one more: a batch of prefetched pages costs two writes, not two a page.
    pub fn insert_many(&self, entries: &[(Fact, &[u8])]) {
        if self.poisoned.load(Ordering::Relaxed) {
            return;
        }
        let crcs: Vec<u32> = entries
            .iter()
            .map(|(_, page)| {
                if page.len() == PAGE_SIZE_BYTES {
                    crc32fast::hash(page)
                } else {
                    0
                }
            })
            .collect();
        // (slot, generation, header, index into `entries`), in the order the slots were given.
        let mut claimed = Vec::with_capacity(entries.len());
        {
            let mut state = self.state.lock();
            for (index, ((fact, page), page_crc)) in entries.iter().zip(&crcs).enumerate() {
                if page.len() != PAGE_SIZE_BYTES {
                    continue;
                }
                match widen_overlapping(&mut state, *fact) {
                    Overlap::None => {}
                    Overlap::Covered => continue,
                    Overlap::Widened(header) => {
                        // Under the lock (64 bytes), so the slot cannot be given to another page meanwhile.
                        if !self.write(header.slot, &header.encode(), header_offset(header.slot)) {
                            return;
                        }
                        continue;
                    }
                }
                if claimed.iter().any(|&(_, _, header, _): &(u32, u64, Header, usize)| {
                    header.fact.timeline == fact.timeline && header.fact.block == fact.block
                }) {
                    continue; // the same block twice in one batch: the first is kept
                }
                if !make_room_for_version(&mut state, *fact) {
                    continue; // older than every version kept of its block
                }
                let Some(slot) = self.victim(&mut state) else {
                    break; // every slot is being written: the rest are not kept
                };
                let meta = &mut state.slots[slot as usize];
                meta.generation += 1;
                meta.busy = true;
                let header = Header {
                    slot,
                    fact: *fact,
                    page_crc: *page_crc,
                };
                claimed.push((slot, meta.generation, header, index));
            }
        }
        if claimed.is_empty() {
            return;
        }
        // Pages first, then the headers that vouch for them (see the module doc), a run of consecutive slots at
        // a time.
        let mut written = true;
        let mut buffer = Vec::new();
        for run in claimed.chunk_by(|a, b| a.0.checked_add(1) == Some(b.0)) {
            let first = run[0].0;
            written = if let [(slot, _, _, index)] = run {
                self.write(*slot, entries[*index].1, self.page_offset(*slot))
            } else {
                buffer.clear();
                for &(_, _, _, index) in run {
                    buffer.extend_from_slice(entries[index].1);
                }
                self.write(first, &buffer, self.page_offset(first))
            };
            if !written {
                break;
            }
            buffer.clear();
            for (_, _, header, _) in run {
                buffer.extend_from_slice(&header.encode());
            }
            written = self.write(first, &buffer, header_offset(first));
            if !written {
                break;
            }
        }
        let mut state = self.state.lock();
        for &(slot, generation, header, _) in &claimed {
            let meta = &mut state.slots[slot as usize];
            assert!(
                meta.generation == generation && meta.fact.is_none(),
                "file cache slot {slot} was reused while busy"
            );
            meta.busy = false;
            if !written {
                continue; // the cache is poisoned: nothing more is read from it
            }
            meta.fact = Some(header.fact);
            meta.page_crc = header.page_crc;
            meta.referenced = false;
            let key = (header.fact.timeline, header.fact.block);
            state.index.entry(key).or_default().push(slot);
            state.used_slots += 1;
            METRICS.add_file_cache_bytes(PAGE_SIZE_U64);
        }
        if written {
            METRICS
                .file_cache_writes_total
                .fetch_add(claimed.len() as u64, Ordering::Relaxed);
        }
    }

    /// An empty slot, or one freed by CLOCK and removed from the index; `None` if every slot is being written.
    fn victim(&self, state: &mut FileState) -> Option<u32> {
        for _ in 0..2 * state.slots.len() {
            state.hand = (state.hand + 1) % state.slots.len();
            let meta = &mut state.slots[state.hand];
            match meta.fact {
                None if meta.busy => {}
                None => return Some(state.hand as u32),
                Some(_) if meta.referenced => meta.referenced = false,
                Some(_) => {
                    let slot = state.hand as u32;
                    remove_slot(state, slot);
                    return Some(slot);
                }
            }
        }
        None
    }

    /// Writes `bytes` at `offset`; on failure poisons the cache and returns false.
    fn write(&self, slot: u32, bytes: &[u8], offset: u64) -> bool {
        match self.file.write_all_at(bytes, offset) {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(path = %self.path.display(), slot, %error, "file cache write failed; the file cache is off");
                self.poisoned.store(true, Ordering::Relaxed);
                METRICS.file_cache_write_errors_total.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    fn page_offset(&self, slot: u32) -> u64 {
        pages_offset(self.slot_count) + u64::from(slot) * PAGE_SIZE_U64
    }
}

impl Drop for FileCache {
    fn drop(&mut self) {
        METRICS.sub_file_cache_bytes(self.state.lock().used_slots as u64 * PAGE_SIZE_U64);
    }
}

/// What an entry of the same block whose range overlaps a new fact (so: the same bytes) made of it.
enum Overlap {
    /// There is none.
    None,
    /// One covers the fact already.
    Covered,
    /// One was widened to cover it: its header must be written again.
    Widened(Header),
}

/// Widens an entry of `fact`'s block whose range overlaps it (see [`Overlap`]).
fn widen_overlapping(state: &mut FileState, fact: Fact) -> Overlap {
    let FileState { slots, index, .. } = state;
    let Some(kept) = index.get(&(fact.timeline, fact.block)) else {
        return Overlap::None;
    };
    for &slot in kept {
        let meta = &mut slots[slot as usize];
        let Some(old) = meta.fact else { continue };
        if old.from <= fact.to && fact.from <= old.to {
            meta.referenced = true;
            let widened = Fact {
                from: old.from.min(fact.from),
                to: old.to.max(fact.to),
                ..old
            };
            if widened == old {
                return Overlap::Covered;
            }
            meta.fact = Some(widened);
            return Overlap::Widened(Header {
                slot,
                fact: widened,
                page_crc: meta.page_crc,
            });
        }
    }
    Overlap::None
}

/// Makes room for a new version `fact` of its block ([`FILE_VERSIONS_MAX`]): while the block has that many,
/// the oldest goes (its slot is free for the victim search). Returns `false`, removing nothing, when `fact` is
/// older than every version kept (the block's newest versions are the ones worth keeping).
fn make_room_for_version(state: &mut FileState, fact: Fact) -> bool {
    loop {
        let oldest = {
            let Some(kept) = state.index.get(&(fact.timeline, fact.block)) else {
                return true;
            };
            if kept.len() < FILE_VERSIONS_MAX {
                return true;
            }
            kept.iter()
                .filter_map(|&slot| state.slots[slot as usize].fact.map(|old| (old.to, slot)))
                .min()
        };
        let Some((oldest_to, slot)) = oldest else {
            return true;
        };
        if fact.to <= oldest_to {
            return false;
        }
        remove_slot(state, slot);
    }
}

fn remove_slot(state: &mut FileState, slot: u32) {
    let meta = &mut state.slots[slot as usize];
    let Some(fact) = meta.fact.take() else { return };
    let key = (fact.timeline, fact.block);
    if let Some(slots) = state.index.get_mut(&key) {
        slots.retain(|s| *s != slot);
        if slots.is_empty() {
            state.index.remove(&key);
        }
    }
    state.used_slots -= 1;
    METRICS.sub_file_cache_bytes(PAGE_SIZE_U64);
}

fn header_offset(slot: u32) -> u64 {
    u64::from(slot) * HEADER_BYTES as u64
}

/// Where the pages start: after the header table, rounded up to a page.
fn pages_offset(slot_count: u32) -> u64 {
    (u64::from(slot_count) * HEADER_BYTES as u64).div_ceil(PAGE_SIZE_U64) * PAGE_SIZE_U64
}

fn meta_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".meta");
    PathBuf::from(name)
}

fn meta_text(slot_count: u32) -> String {
    format!("cambium file cache\nformat_version {FORMAT_VERSION}\nslot_count {slot_count}\npage_size_bytes {PAGE_SIZE_BYTES}\n")
}

/// Write-temp, fsync, rename, fsync the directory.
fn write_meta(path: &Path, text: &str) -> std::io::Result<()> {
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(".tmp");
    let temp = PathBuf::from(temp_name);
    let mut file = File::create(&temp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, path)?;
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: TimelineId = TimelineId(0xabc);

    fn page(byte: u8) -> Vec<u8> {
        vec![byte; PAGE_SIZE_BYTES]
    }

    fn link(lsn: u64) -> [Link; 1] {
        [Link {
            timeline: T,
            lsn: Lsn(lsn),
            extension: None,
        }]
    }

    fn open(dir: &Path, pages: u64) -> FileCache {
        FileCache::open(&FileCacheConfig {
            path: dir.join("lfc"),
            size_bytes: pages * PAGE_SIZE_U64,
        })
        .expect("open")
    }

    #[test]
    fn header_round_trip_and_any_damage_is_refused() {
        let header = Header {
            slot: 5,
            fact: Fact {
                timeline: T,
                block: 9,
                from: Lsn(10),
                to: Lsn(20),
            },
            page_crc: 0xdead_beef,
        };
        let bytes = header.encode();
        assert_eq!(Header::decode(&bytes), Some(header));
        for at in 0..HEADER_BYTES {
            let mut damaged = bytes;
            damaged[at] ^= 0x40;
            assert_eq!(Header::decode(&damaged), None, "a flipped bit at byte {at}");
        }
        assert_eq!(Header::decode(&[0u8; HEADER_BYTES]), None);
        assert_eq!(Header::decode(&bytes[..10]), None);
    }

    #[test]
    fn entries_survive_a_reopen_and_a_new_size_starts_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let cache = open(dir.path(), 8);
            cache.insert(Fact::at(T, 1, Lsn(100)), &page(1));
            cache.insert(Fact::at(T, 2, Lsn(100)), &page(2));
            assert_eq!(cache.lookup(&link(100), 1).map(|(_, p)| p), Some(Bytes::from(page(1))));
            assert_eq!(cache.lookup(&link(101), 1), None, "outside the fact's range");
        }
        let cache = open(dir.path(), 8);
        assert_eq!(cache.used_bytes(), 2 * PAGE_SIZE_U64);
        assert_eq!(cache.lookup(&link(100), 2).map(|(_, p)| p), Some(Bytes::from(page(2))));
        drop(cache);
        let cache = open(dir.path(), 16);
        assert_eq!(cache.used_bytes(), 0);
        assert_eq!(cache.lookup(&link(100), 2), None);
    }

    #[test]
    fn a_block_keeps_its_newest_versions_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = open(dir.path(), 32);
        let versions = FILE_VERSIONS_MAX as u64 + 3;
        for version in 1..=versions {
            cache.insert(Fact::at(T, 7, Lsn(100 * version)), &page(version as u8));
        }
        assert_eq!(cache.state.lock().index[&(T, 7)].len(), FILE_VERSIONS_MAX);
        assert_eq!(cache.used_bytes(), FILE_VERSIONS_MAX as u64 * PAGE_SIZE_U64);
        let newest = 100 * versions;
        assert_eq!(
            cache.lookup(&link(newest), 7).map(|(_, p)| p),
            Some(Bytes::from(page(versions as u8)))
        );
        let oldest_kept = versions + 1 - FILE_VERSIONS_MAX as u64;
        assert!(cache.lookup(&link(100 * oldest_kept), 7).is_some());
        assert_eq!(cache.lookup(&link(100), 7), None, "the oldest versions went first");
        // A version older than every one kept is not kept, and removes nothing.
        cache.insert(Fact::at(T, 7, Lsn(50)), &page(0));
        assert_eq!(cache.lookup(&link(50), 7), None);
        assert_eq!(cache.state.lock().index[&(T, 7)].len(), FILE_VERSIONS_MAX);
        // Another block is not limited by this one's versions.
        cache.insert(Fact::at(T, 8, Lsn(50)), &page(8));
        assert!(cache.lookup(&link(50), 8).is_some());
    }

    #[test]
    fn a_corrupt_page_is_detected_dropped_and_never_served() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = open(dir.path(), 4);
        cache.insert(Fact::at(T, 3, Lsn(50)), &page(3));
        let slot = cache.state.lock().index[&(T, 3)][0];
        cache
            .file
            .write_all_at(&[0xff], cache.page_offset(slot) + 100)
            .expect("damage");
        assert_eq!(cache.lookup(&link(50), 3), None);
        assert_eq!(cache.used_bytes(), 0, "the bad entry is gone");
        // A header torn from its page: the old page under a new header.
        cache.insert(Fact::at(T, 4, Lsn(50)), &page(4));
        let slot = cache.state.lock().index[&(T, 4)][0];
        cache
            .file
            .write_all_at(&page(9), cache.page_offset(slot))
            .expect("tear");
        assert_eq!(cache.lookup(&link(50), 4), None);
    }

    #[test]
    fn a_batch_is_kept_in_runs_of_slots_and_survives_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pages: Vec<Vec<u8>> = (0..6u8).map(page).collect();
        {
            let cache = open(dir.path(), 8);
            // Block 9 first, alone; then a batch that repeats a block and covers one already kept.
            cache.insert(Fact::at(T, 9, Lsn(10)), &pages[5]);
            let batch: Vec<(Fact, &[u8])> = vec![
                (Fact::at(T, 1, Lsn(10)), &pages[1]),
                (Fact::at(T, 2, Lsn(10)), &pages[2]),
                (Fact::at(T, 2, Lsn(10)), &pages[3]),
                (Fact::at(T, 9, Lsn(10)), &pages[5]),
                (Fact::at(T, 3, Lsn(10)), &pages[3]),
                (Fact::at(T, 4, Lsn(10)), &pages[4][..100]),
            ];
            cache.insert_many(&batch);
            assert_eq!(
                cache.used_bytes(),
                4 * PAGE_SIZE_U64,
                "9, then 1, 2 and 3 once each; no short page"
            );
            for block in 1..=3u32 {
                assert_eq!(
                    cache.lookup(&link(10), block).map(|(_, p)| p),
                    Some(Bytes::from(pages[block as usize].clone())),
                    "block {block}"
                );
            }
        }
        let cache = open(dir.path(), 8);
        assert_eq!(cache.used_bytes(), 4 * PAGE_SIZE_U64, "the headers were written");
        assert_eq!(
            cache.lookup(&link(10), 2).map(|(_, p)| p),
            Some(Bytes::from(pages[2].clone()))
        );
        assert_eq!(
            cache.lookup(&link(10), 9).map(|(_, p)| p),
            Some(Bytes::from(pages[5].clone()))
        );
        assert_eq!(cache.lookup(&link(10), 4), None);
        // A batch larger than the cache: CLOCK gives it slots that are not all consecutive; every page kept
        // reads back as itself.
        let many: Vec<Vec<u8>> = (0..12u8).map(|b| page(100 + b)).collect();
        let batch: Vec<(Fact, &[u8])> = many
            .iter()
            .enumerate()
            .map(|(i, p)| (Fact::at(T, 20 + i as u32, Lsn(30)), &p[..]))
            .collect();
        cache.insert_many(&batch);
        for (i, p) in many.iter().enumerate() {
            if let Some((fact, got)) = cache.lookup(&link(30), 20 + i as u32) {
                assert_eq!(fact.block, 20 + i as u32);
                assert_eq!(got, Bytes::from(p.clone()), "block {}", 20 + i);
            }
        }
    }

    #[test]
    fn clock_evicts_and_overlapping_entries_widen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = open(dir.path(), 2);
        cache.insert(Fact::at(T, 1, Lsn(10)), &page(1));
        cache.insert(
            Fact {
                timeline: T,
                block: 1,
                from: Lsn(10),
                to: Lsn(30),
            },
            &page(1),
        );
        assert_eq!(cache.used_bytes(), PAGE_SIZE_U64, "widened, not added");
        assert!(cache.lookup(&link(30), 1).is_some());
        drop(cache);
        let cache = open(dir.path(), 2);
        assert!(cache.lookup(&link(25), 1).is_some(), "the widened header was written");
        for block in 2..6 {
            cache.insert(Fact::at(T, block, Lsn(10)), &page(block as u8));
        }
        assert_eq!(cache.used_bytes(), 2 * PAGE_SIZE_U64);
        assert!(cache.lookup(&link(10), 5).is_some());
    }
}
