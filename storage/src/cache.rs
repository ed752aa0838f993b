//! The page cache: reconstructed pages, so a hot read costs a lookup and a reference-count bump.
//!
//! An entry (a slot) for `(timeline, key)` holds the page as of `version_lsn` (the LSN of the newest version
//! it reflects) and is valid for reads at `version_lsn <= lsn < superseded_lsn`. A key holds up to
//! [`VERSIONS_PER_KEY_MAX`] slots at once, one per version of its history, so reads at LSNs spread over the
//! history (time travel, PITR, a replica behind) do not keep replacing each other's pages.
//!
//! **Invariant:** an entry never serves a read at an LSN at or past a newer version of its key. Ingest calls
//! [`PageCache::invalidate`] for every key it writes *before* publishing the new `last_record_lsn`, which
//! bounds the entry and records the LSN in the shard's per-timeline `max_written_lsn`. A reader that
//! reconstructed a page at `lsn` inserts it open-ended only if `lsn` was the timeline's `last_record_lsn` when
//! the read began (so every version at or below it was visible and none above it published) and no version
//! newer than `lsn` was written in the shard for that timeline since; otherwise the entry is valid up to `lsn`
//! only. Versions that exist on disk from before a restart never went through `invalidate`, which is why the
//! first condition is needed.
//!
//! With several slots per key the argument holds slot by slot. Call a range *true* if the page as of every
//! LSN in it is the slot's page; the single-slot argument above makes every range `insert` computes true, and
//! four rules keep the slots of a key true and disjoint:
//! * `invalidate` bounds *every* slot of the key, not only the open-ended one (at most one is).
//! * True ranges of two different pages cannot overlap (an LSN has one page), so `insert` asserts that the new
//!   range overlaps no slot with another page: an overlap would mean the invariant was broken somewhere.
//! * True ranges of one page that meet (overlap or touch) have a true union, so `insert` merges the new range
//!   and every slot of that page it meets into one slot rather than duplicating it. Ranges of one
//!   `version_lsn` always meet (both start there); differing `version_lsn`s may also hold one page, because an
//!   image layer's LSN is reported as the version of the page it materializes.
//! * Eviction and `forget_timeline` drop whole slots (the latter every slot of the timeline), never widening
//!   one.
//!
//! A key's slots are listed in the index newest version first, so a read at the latest LSN looks at one slot
//! and a historical read stops at the first slot at or below its LSN.

use std::collections::HashMap;
use std::hash::BuildHasher;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::id::TimelineId;
use crate::key::Key;
use crate::lsn::Lsn;

const SHARD_COUNT: usize = 64;
/// Versions of one key cached at once; a ninth replaces one of the key's own slots.
const VERSIONS_PER_KEY_MAX: usize = 8;

type CacheKey = (TimelineId, Key);

struct Slot {
    key: CacheKey,
    version_lsn: Lsn,
    superseded_lsn: Lsn,
    page: Bytes,
    referenced: bool,
}

impl Slot {
    fn overlaps(&self, version_lsn: Lsn, superseded_lsn: Lsn) -> bool {
        self.version_lsn < superseded_lsn && version_lsn < self.superseded_lsn
    }
}

/// The slots of one key, newest version first (`version_lsn` strictly decreasing).
#[derive(Clone, Copy, Default)]
struct KeySlots {
    slot_indices: [u32; VERSIONS_PER_KEY_MAX],
    len: u8,
}

impl KeySlots {
    fn as_slice(&self) -> &[u32] {
        &self.slot_indices[..usize::from(self.len)]
    }

    fn is_full(&self) -> bool {
        usize::from(self.len) == VERSIONS_PER_KEY_MAX
    }

    /// Adds `slot_index` in its place by version, newest first.
    fn add(&mut self, slots: &[Slot], slot_index: u32) {
        assert!(!self.is_full(), "a key holds at most {VERSIONS_PER_KEY_MAX} slots");
        let version_lsn = slots[slot_index as usize].version_lsn;
        let len = usize::from(self.len);
        let at = self.slot_indices[..len]
            .iter()
            .position(|&i| slots[i as usize].version_lsn < version_lsn)
            .unwrap_or(len);
        self.slot_indices.copy_within(at..len, at + 1);
        self.slot_indices[at] = slot_index;
        self.len += 1;
    }

    fn replace(&mut self, old: u32, new: u32) {
        let at = self
            .as_slice()
            .iter()
            .position(|&i| i == old)
            .unwrap_or_else(|| panic!("slot {old} is not in its key's list"));
        self.slot_indices[at] = new;
    }

    fn remove(&mut self, slot_index: u32) {
        let len = usize::from(self.len);
        let at = self.slot_indices[..len]
            .iter()
            .position(|&i| i == slot_index)
            .unwrap_or_else(|| panic!("slot {slot_index} is not in its key's list"));
        self.slot_indices.copy_within(at + 1..len, at);
        self.len -= 1;
    }
}

#[derive(Default)]
struct Shard {
    slots: Vec<Slot>,
    index: HashMap<CacheKey, KeySlots>,
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
        let pages_per_shard_max = capacity_pages.div_ceil(SHARD_COUNT);
        assert!(
            pages_per_shard_max <= u32::MAX as usize,
            "{pages_per_shard_max} pages per shard do not fit a u32 slot index"
        );
        PageCache {
            shards: (0..SHARD_COUNT).map(|_| Mutex::new(Shard::default())).collect(),
            pages_per_shard_max,
            hasher: Default::default(),
        }
    }

    fn shard(&self, key: &CacheKey) -> &Mutex<Shard> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARD_COUNT]
    }

    /// The cached page of `key` valid at `lsn`, if any.
    pub fn lookup(&self, timeline: TimelineId, key: Key, lsn: Lsn) -> Option<Bytes> {
        self.lookup_versioned(timeline, key, lsn).map(|(_, page)| page)
    }

    /// Like [`PageCache::lookup`], with the LSN of the version the page reflects.
    pub fn lookup_versioned(&self, timeline: TimelineId, key: Key, lsn: Lsn) -> Option<(Lsn, Bytes)> {
        let cache_key = (timeline, key);
        let mut shard = self.shard(&cache_key).lock();
        let Shard { slots, index, .. } = &mut *shard;
        // Newest first and disjoint: only the first slot at or below `lsn` can hold it.
        let slot_index = *index
            .get(&cache_key)?
            .as_slice()
            .iter()
            .find(|&&i| slots[i as usize].version_lsn <= lsn)?;
        let slot = &mut slots[slot_index as usize];
        if lsn < slot.superseded_lsn {
            slot.referenced = true;
            return Some((slot.version_lsn, slot.page.clone()));
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
        let Shard { slots, index, .. } = &mut *shard;
        if let Some(key_slots) = index.get(&cache_key) {
            for &slot_index in key_slots.as_slice() {
                let slot = &mut slots[slot_index as usize];
                slot.superseded_lsn = slot.superseded_lsn.min(lsn);
            }
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
        if shard.merge(cache_key, version_lsn, superseded_lsn, &page) {
            return;
        }
        let Shard { slots, index, hand, .. } = &mut *shard;
        let own_victim = index
            .get(&cache_key)
            .filter(|key_slots| key_slots.is_full())
            .map(|key_slots| key_slots.own_victim(slots));
        let slot = Slot {
            key: cache_key,
            version_lsn,
            superseded_lsn,
            page,
            referenced: false,
        };
        let slot_index = match own_victim {
            None if slots.len() < self.pages_per_shard_max => {
                slots.push(slot);
                (slots.len() - 1) as u32
            }
            victim => {
                let victim = victim.unwrap_or_else(|| clock_victim(slots, hand) as u32);
                let old_key = slots[victim as usize].key;
                detach(index, old_key, victim);
                slots[victim as usize] = slot;
                victim
            }
        };
        index.entry(cache_key).or_default().add(slots, slot_index);
    }

    /// Drops every page of `timeline` (when it is deleted).
    pub fn forget_timeline(&self, timeline: TimelineId) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.max_written_lsn.remove(&timeline);
            let Shard { slots, index, hand, .. } = &mut *shard;
            slots.retain(|slot| slot.key.0 != timeline);
            index.clear();
            for slot_index in 0..slots.len() {
                index
                    .entry(slots[slot_index].key)
                    .or_default()
                    .add(slots, slot_index as u32);
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

impl KeySlots {
    /// The slot to reuse when a full key gets another version: an unreferenced one if any, the oldest version
    /// among those.
    fn own_victim(&self, slots: &[Slot]) -> u32 {
        *self
            .as_slice()
            .iter()
            .rev()
            .find(|&&i| !slots[i as usize].referenced)
            .unwrap_or_else(|| self.as_slice().last().expect("a full key has slots"))
    }
}

impl Shard {
    /// Folds the new true range `[version_lsn, superseded_lsn)` of `page` into the slots of `key` that it meets
    /// (overlaps or touches) holding the same page, and returns whether there was one; otherwise the caller
    /// adds a slot. A slot it overlaps with another page is a broken invariant.
    fn merge(&mut self, key: CacheKey, version_lsn: Lsn, superseded_lsn: Lsn, page: &Bytes) -> bool {
        let Some(&key_slots) = self.index.get(&key) else {
            return false;
        };
        let (mut merged_version_lsn, mut merged_superseded_lsn) = (version_lsn, superseded_lsn);
        let mut met = [0u32; VERSIONS_PER_KEY_MAX];
        let mut met_count = 0;
        for &slot_index in key_slots.as_slice() {
            let slot = &self.slots[slot_index as usize];
            if superseded_lsn < slot.version_lsn || slot.superseded_lsn < version_lsn {
                continue;
            }
            let same_page = if slot.version_lsn == version_lsn {
                // Both are the page as of `version_lsn`; comparing 8 KiB on every extension is not free.
                debug_assert_eq!(slot.page, *page, "{key:?}: two pages as of {version_lsn}");
                true
            } else {
                // Differing `version_lsn`s may still hold one page: an image layer's LSN names a version too.
                slot.page == *page
            };
            if !same_page {
                assert!(
                    !slot.overlaps(version_lsn, superseded_lsn),
                    "{} {}: a page as of {version_lsn} valid below {superseded_lsn} overlaps another page as of \
                     {} valid below {}",
                    key.0,
                    key.1,
                    slot.version_lsn,
                    slot.superseded_lsn
                );
                continue;
            }
            merged_version_lsn = merged_version_lsn.min(slot.version_lsn);
            merged_superseded_lsn = merged_superseded_lsn.max(slot.superseded_lsn);
            met[met_count] = slot_index;
            met_count += 1;
        }
        let Some((&mut first, others)) = met[..met_count].split_first_mut() else {
            return false;
        };
        let mut keep = first;
        // Highest index first, so a swap-remove never moves a slot still to be removed.
        others.sort_unstable_by(|a, b| b.cmp(a));
        for &other in others.iter() {
            let last = (self.slots.len() - 1) as u32;
            self.remove_slot(other);
            if keep == last {
                keep = other;
            }
        }
        // Re-listed, since its `version_lsn` may move down.
        detach(&mut self.index, key, keep);
        let slot = &mut self.slots[keep as usize];
        slot.version_lsn = merged_version_lsn;
        slot.superseded_lsn = merged_superseded_lsn;
        slot.referenced = true;
        self.index.entry(key).or_default().add(&self.slots, keep);
        true
    }

    /// Drops slot `slot_index`, moving the last slot into its place.
    fn remove_slot(&mut self, slot_index: u32) {
        let key = self.slots[slot_index as usize].key;
        detach(&mut self.index, key, slot_index);
        let last = (self.slots.len() - 1) as u32;
        self.slots.swap_remove(slot_index as usize);
        if slot_index != last {
            let moved_key = self.slots[slot_index as usize].key;
            self.index
                .get_mut(&moved_key)
                .unwrap_or_else(|| panic!("moved slot {last} of a key not in the index"))
                .replace(last, slot_index);
        }
    }
}

/// Takes `slot_index` out of the list of `key`, and the list out of the index once empty.
fn detach(index: &mut HashMap<CacheKey, KeySlots>, key: CacheKey, slot_index: u32) {
    let key_slots = index
        .get_mut(&key)
        .unwrap_or_else(|| panic!("slot {slot_index} of a key not in the index"));
    key_slots.remove(slot_index);
    if key_slots.len == 0 {
        index.remove(&key);
    }
}

/// CLOCK: sweep, clearing reference bits, until an unreferenced slot turns up (at most two sweeps).
fn clock_victim(slots: &mut [Slot], hand: &mut usize) -> usize {
    assert!(!slots.is_empty(), "no victim in an empty shard");
    loop {
        let slot_index = *hand % slots.len();
        *hand = slot_index + 1;
        let slot = &mut slots[slot_index];
        if !slot.referenced {
            return slot_index;
        }
        slot.referenced = false;
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

    #[test]
    fn several_versions_are_served_at_their_lsns() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(3);
        let key = Key::page(7);
        let (v10, v20, v30) = (
            Bytes::from_static(b"v10"),
            Bytes::from_static(b"v20"),
            Bytes::from_static(b"v30"),
        );
        // The timeline is at 100; versions at 10, 20 and 30. Historical reads first, in no particular order.
        cache.insert(tl, key, Lsn(20), Lsn(25), Lsn(100), v20.clone());
        cache.insert(tl, key, Lsn(10), Lsn(15), Lsn(100), v10.clone());
        cache.insert(tl, key, Lsn(30), Lsn(100), Lsn(100), v30.clone());
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.lookup(tl, key, Lsn(9)), None);
        assert_eq!(cache.lookup(tl, key, Lsn(10)), Some(v10.clone()));
        assert_eq!(cache.lookup(tl, key, Lsn(15)), Some(v10.clone()));
        assert_eq!(cache.lookup(tl, key, Lsn(16)), None, "v10 is known valid up to 15 only");
        assert_eq!(cache.lookup(tl, key, Lsn(20)), Some(v20.clone()));
        assert_eq!(cache.lookup(tl, key, Lsn(25)), Some(v20.clone()));
        assert_eq!(cache.lookup(tl, key, Lsn(26)), None);
        assert_eq!(cache.lookup(tl, key, Lsn(30)), Some(v30.clone()));
        assert_eq!(cache.lookup(tl, key, Lsn(1000)), Some(v30));
        // A later read of the same version extends its slot rather than adding one.
        cache.insert(tl, key, Lsn(10), Lsn(19), Lsn(100), v10.clone());
        cache.insert(tl, key, Lsn(10), Lsn(12), Lsn(100), v10.clone());
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.lookup(tl, key, Lsn(19)), Some(v10));
        assert_eq!(cache.lookup(tl, key, Lsn(20)), Some(v20));
    }

    #[test]
    fn no_read_past_a_superseded_version_after_invalidate() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(4);
        let key = Key::page(1);
        let (v10, v20) = (Bytes::from_static(b"v10"), Bytes::from_static(b"v20"));
        // Latest reads at 10 then (after a write at 20) at 20: both open-ended when inserted.
        cache.insert(tl, key, Lsn(10), Lsn(10), Lsn(10), v10.clone());
        cache.invalidate(tl, key, Lsn(20));
        cache.insert(tl, key, Lsn(20), Lsn(20), Lsn(20), v20.clone());
        cache.invalidate(tl, key, Lsn(30));
        assert_eq!(cache.lookup(tl, key, Lsn(19)), Some(v10));
        assert_eq!(cache.lookup(tl, key, Lsn(20)), Some(v20.clone()));
        assert_eq!(cache.lookup(tl, key, Lsn(29)), Some(v20));
        for lsn in [30, 31, 1000] {
            assert_eq!(cache.lookup(tl, key, Lsn(lsn)), None, "read at {lsn}");
        }
        // A reader that began at 20 and inserts after the write at 30 gets a bounded entry.
        cache.insert(tl, key, Lsn(20), Lsn(20), Lsn(20), Bytes::from_static(b"v20"));
        assert_eq!(cache.lookup(tl, key, Lsn(30)), None);
    }

    #[test]
    fn a_full_key_keeps_versions_per_key_max_slots() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(5);
        let key = Key::page(2);
        let versions = 3 * VERSIONS_PER_KEY_MAX as u64;
        for v in 1..=versions {
            // Version v at LSN 10 * v, read at 10 * v + 5 while the timeline is far ahead.
            let page = Bytes::from(v.to_le_bytes().to_vec());
            cache.insert(tl, key, Lsn(10 * v), Lsn(10 * v + 5), Lsn(10_000), page);
        }
        assert_eq!(cache.len(), VERSIONS_PER_KEY_MAX);
        let mut hits = 0;
        for v in 1..=versions {
            if let Some(page) = cache.lookup(tl, key, Lsn(10 * v + 3)) {
                assert_eq!(page, Bytes::from(v.to_le_bytes().to_vec()), "version {v}");
                hits += 1;
            }
            assert_eq!(
                cache.lookup(tl, key, Lsn(10 * v + 6)),
                None,
                "version {v} past its read"
            );
        }
        assert_eq!(hits, VERSIONS_PER_KEY_MAX);
    }

    #[test]
    fn eviction_keeps_the_bound_with_several_versions() {
        let cache = PageCache::new(64);
        let tl = TimelineId(6);
        for round in 0..20u64 {
            for block in 0..500u32 {
                let v = round + 1;
                let page = Bytes::from([block.to_le_bytes().as_slice(), &v.to_le_bytes()].concat());
                cache.insert(tl, Key::page(block), Lsn(10 * v), Lsn(10 * v + 5), Lsn(10_000), page);
                assert!(cache.len() <= 64, "{} pages cached", cache.len());
            }
        }
        for block in 0..500u32 {
            for v in 1..=20u64 {
                if let Some(page) = cache.lookup(tl, Key::page(block), Lsn(10 * v + 1)) {
                    assert_eq!(
                        page,
                        Bytes::from([block.to_le_bytes().as_slice(), &v.to_le_bytes()].concat())
                    );
                }
            }
        }
        cache.forget_timeline(tl);
        assert!(cache.is_empty());
    }

    #[test]
    fn forget_timeline_keeps_other_timelines_versions() {
        let cache = PageCache::new(1024);
        let (gone, kept) = (TimelineId(7), TimelineId(8));
        for v in 1..=4u64 {
            let page = Bytes::from(v.to_le_bytes().to_vec());
            cache.insert(gone, Key::page(0), Lsn(10 * v), Lsn(10 * v + 5), Lsn(100), page.clone());
            cache.insert(kept, Key::page(0), Lsn(10 * v), Lsn(10 * v + 5), Lsn(100), page);
        }
        cache.forget_timeline(gone);
        assert_eq!(cache.len(), 4);
        for v in 1..=4u64 {
            assert_eq!(cache.lookup(gone, Key::page(0), Lsn(10 * v)), None);
            assert_eq!(
                cache.lookup(kept, Key::page(0), Lsn(10 * v + 5)),
                Some(Bytes::from(v.to_le_bytes().to_vec()))
            );
        }
    }

    #[test]
    #[should_panic(expected = "overlaps another page")]
    fn overlapping_versions_are_a_bug() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(9);
        cache.insert(tl, Key::page(0), Lsn(10), Lsn(30), Lsn(100), Bytes::from_static(b"v10"));
        // Version 20 cannot exist if version 10 is the newest at 30.
        cache.insert(tl, Key::page(0), Lsn(20), Lsn(25), Lsn(100), Bytes::from_static(b"v20"));
    }

    #[test]
    fn ranges_of_one_page_merge_across_version_lsns() {
        let cache = PageCache::new(1024);
        let tl = TimelineId(10);
        let key = Key::page(0);
        let (p, q) = (Bytes::from_static(b"p"), Bytes::from_static(b"q"));
        // One page, seen as the version at 10 (a delta) and as an image layer's version at 20.
        cache.insert(tl, key, Lsn(10), Lsn(15), Lsn(100), p.clone());
        cache.insert(tl, key, Lsn(20), Lsn(30), Lsn(100), p.clone());
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.lookup(tl, key, Lsn(17)), None);
        // A read at 25 reconstructs from the version at 10: its range bridges both slots.
        cache.insert(tl, key, Lsn(10), Lsn(25), Lsn(100), p.clone());
        assert_eq!(cache.len(), 1);
        for lsn in [10, 17, 20, 30] {
            assert_eq!(cache.lookup(tl, key, Lsn(lsn)), Some(p.clone()), "read at {lsn}");
        }
        assert_eq!(cache.lookup(tl, key, Lsn(31)), None);
        // Another page touching the range is another slot.
        cache.insert(tl, key, Lsn(31), Lsn(40), Lsn(100), q.clone());
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.lookup(tl, key, Lsn(30)), Some(p));
        assert_eq!(cache.lookup(tl, key, Lsn(31)), Some(q));
    }
}
