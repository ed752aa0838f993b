//! The page cache: reconstructed pages, so a hot read costs a lookup and a reference-count bump.
//!
//! An entry for `(timeline, key)` holds the page as of `version_lsn` (the LSN of the newest version it
//! reflects) and is valid for reads at `version_lsn <= lsn < superseded_lsn`.
//!
//! **Invariant:** an entry never serves a read at an LSN at or past a newer version of its key. Ingest calls
//! [`PageCache::invalidate`] for every key it writes *before* publishing the new `last_record_lsn`, which
//! bounds the entry and records the LSN in the shard's per-timeline `max_written_lsn`. A reader that
//! reconstructed a page at `lsn` inserts it open-ended only if `lsn` was the timeline's `last_record_lsn` when
//! the read began (so every version at or below it was visible and none above it published) and no version
//! newer than `lsn` was written in the shard for that timeline since; otherwise the entry is valid up to `lsn`
//! only. Versions that exist on disk from before a restart never went through `invalidate`, which is why the
//! first condition is needed.

use std::collections::HashMap;
use std::hash::BuildHasher;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::id::TimelineId;
use crate::key::Key;
use crate::lsn::Lsn;

const SHARD_COUNT: usize = 64;

type CacheKey = (TimelineId, Key);

struct Slot {
    key: CacheKey,
    version_lsn: Lsn,
    superseded_lsn: Lsn,
    page: Bytes,
    referenced: bool,
}

#[derive(Default)]
struct Shard {
    slots: Vec<Slot>,
    index: HashMap<CacheKey, usize>,
    hand: usize,
    max_written_lsn: HashMap<TimelineId, Lsn>,
}

/// A sharded CLOCK cache of reconstructed pages shared by the timelines of a process.
pub struct PageCache {
    shards: Box<[Mutex<Shard>]>,
    pages_per_shard_max: usize,
    hasher: std::collections::hash_map::RandomState,
}

impl PageCache {
    /// A cache holding at most about `capacity_pages` pages (rounded up to a multiple of the shard count).
    /// Zero disables caching.
    pub fn new(capacity_pages: usize) -> PageCache {
        PageCache {
            shards: (0..SHARD_COUNT).map(|_| Mutex::new(Shard::default())).collect(),
            pages_per_shard_max: capacity_pages.div_ceil(SHARD_COUNT),
            hasher: Default::default(),
        }
    }

    fn shard(&self, key: &CacheKey) -> &Mutex<Shard> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARD_COUNT]
    }

    /// The cached page of `key` valid at `lsn`, if any.
    pub fn lookup(&self, timeline: TimelineId, key: Key, lsn: Lsn) -> Option<Bytes> {
        let cache_key = (timeline, key);
        let mut shard = self.shard(&cache_key).lock();
        let slot_index = *shard.index.get(&cache_key)?;
        let slot = &mut shard.slots[slot_index];
        if slot.version_lsn <= lsn && lsn < slot.superseded_lsn {
            slot.referenced = true;
            return Some(slot.page.clone());
        }
        None
    }

    /// Records that `key` got a new version at `lsn`: cached pages of the key stop serving reads at `lsn`
    /// and later.
    pub fn invalidate(&self, timeline: TimelineId, key: Key, lsn: Lsn) {
        let cache_key = (timeline, key);
        let mut shard = self.shard(&cache_key).lock();
        let max = shard.max_written_lsn.entry(timeline).or_insert(lsn);
        *max = (*max).max(lsn);
        if let Some(&slot_index) = shard.index.get(&cache_key) {
            let slot = &mut shard.slots[slot_index];
            slot.superseded_lsn = slot.superseded_lsn.min(lsn);
        }
    }

    /// Caches `page`, the value of `key` reconstructed at `read_lsn` from a newest version at `version_lsn`;
    /// `last_record_lsn` is the timeline's, read before the reconstruction began.
    pub fn insert(
        &self,
        timeline: TimelineId,
        key: Key,
        version_lsn: Lsn,
        read_lsn: Lsn,
        last_record_lsn: Lsn,
        page: Bytes,
    ) {
        assert!(
            version_lsn <= read_lsn,
            "version {version_lsn} newer than the read at {read_lsn}"
        );
        if self.pages_per_shard_max == 0 {
            return;
        }
        let cache_key = (timeline, key);
        let mut shard = self.shard(&cache_key).lock();
        let newer_written = shard.max_written_lsn.get(&timeline).is_some_and(|&max| max > read_lsn);
        let historical = read_lsn < last_record_lsn;
        let superseded_lsn = if newer_written || historical {
            read_lsn.next()
        } else {
            Lsn::MAX
        };
        if let Some(&slot_index) = shard.index.get(&cache_key) {
            let slot = &mut shard.slots[slot_index];
            // Keep whichever entry reaches further forward.
            if (slot.version_lsn, slot.superseded_lsn) < (version_lsn, superseded_lsn) {
                slot.version_lsn = version_lsn;
                slot.superseded_lsn = superseded_lsn;
                slot.page = page;
                slot.referenced = true;
            }
            return;
        }
        let slot = Slot {
            key: cache_key,
            version_lsn,
            superseded_lsn,
            page,
            referenced: false,
        };
        if shard.slots.len() < self.pages_per_shard_max {
            let slot_index = shard.slots.len();
            shard.slots.push(slot);
            shard.index.insert(cache_key, slot_index);
            return;
        }
        let victim = shard.clock_victim();
        let old_key = shard.slots[victim].key;
        shard.index.remove(&old_key);
        shard.slots[victim] = slot;
        shard.index.insert(cache_key, victim);
    }

    /// Drops every page of `timeline` (when it is deleted).
    pub fn forget_timeline(&self, timeline: TimelineId) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.max_written_lsn.remove(&timeline);
            let Shard { slots, index, hand, .. } = &mut *shard;
            slots.retain(|slot| slot.key.0 != timeline);
            index.clear();
            for (i, slot) in slots.iter().enumerate() {
                index.insert(slot.key, i);
            }
            *hand = 0;
        }
    }

    /// Pages cached now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().slots.len()).sum()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Shard {
    /// CLOCK: sweep, clearing reference bits, until an unreferenced slot turns up (at most two sweeps).
    fn clock_victim(&mut self) -> usize {
        assert!(!self.slots.is_empty(), "no victim in an empty shard");
        loop {
            let slot_index = self.hand % self.slots.len();
            self.hand = slot_index + 1;
            let slot = &mut self.slots[slot_index];
            if !slot.referenced {
                return slot_index;
            }
            slot.referenced = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_stops_serving_at_a_newer_version() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(1);
        let page = Bytes::from_static(b"v1");
        cache.insert(tl, Key::page(0), Lsn(10), Lsn(20), Lsn(20), page.clone());
        assert_eq!(cache.lookup(tl, Key::page(0), Lsn(9)), None);
        assert_eq!(cache.lookup(tl, Key::page(0), Lsn(10)), Some(page.clone()));
        assert_eq!(cache.lookup(tl, Key::page(0), Lsn(1000)), Some(page.clone()));
        cache.invalidate(tl, Key::page(0), Lsn(30));
        assert_eq!(cache.lookup(tl, Key::page(0), Lsn(29)), Some(page));
        assert_eq!(cache.lookup(tl, Key::page(0), Lsn(30)), None);
    }

    #[test]
    fn insert_after_a_newer_write_is_bounded() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(1);
        // A write at 50 was ingested (not yet visible to the reader at 40).
        cache.invalidate(tl, Key::page(0), Lsn(50));
        cache.insert(tl, Key::page(0), Lsn(10), Lsn(40), Lsn(40), Bytes::from_static(b"old"));
        assert!(cache.lookup(tl, Key::page(0), Lsn(40)).is_some());
        assert!(cache.lookup(tl, Key::page(0), Lsn(41)).is_none());
    }

    #[test]
    fn historical_read_is_bounded_to_its_lsn() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(1);
        // Read at 40 while the timeline is at 90 (versions above 40 may exist on disk, unknown to the cache).
        cache.insert(tl, Key::page(0), Lsn(10), Lsn(40), Lsn(90), Bytes::from_static(b"old"));
        assert!(cache.lookup(tl, Key::page(0), Lsn(40)).is_some());
        assert!(cache.lookup(tl, Key::page(0), Lsn(41)).is_none());
    }

    #[test]
    fn eviction_keeps_the_bound() {
        let cache = PageCache::new(64);
        let tl = TimelineId(2);
        for block in 0..10_000 {
            cache.insert(tl, Key::page(block), Lsn(1), Lsn(1), Lsn(1), Bytes::from_static(b"x"));
        }
        assert!(cache.len() <= 64, "{} pages cached", cache.len());
        cache.forget_timeline(tl);
        assert!(cache.is_empty());
    }
}
