//! The memory tier of the host cache: facts and their pages within one budget in bytes for every branch of the
//! host, evicted by CLOCK (second chance) across branches.
//!
//! Each entry costs its page plus [`ENTRY_OVERHEAD_BYTES`] of bookkeeping against the budget. A block of a
//! timeline keeps at most [`VERSIONS_MAX`] facts (readers at several snapshots, time travel); facts of one
//! block whose ranges overlap hold the same bytes, so they merge into one.

use std::collections::HashMap;

use bytes::Bytes;
use cambium_types::{Lsn, TimelineId, PAGE_SIZE_BYTES};

use super::facts::{Extension, Fact};

/// Bookkeeping counted per entry on top of its page (the slot, the index entries, the page's allocation).
pub const ENTRY_OVERHEAD_BYTES: usize = 192;
/// What one entry costs against the budget.
pub const ENTRY_BYTES: usize = PAGE_SIZE_BYTES + ENTRY_OVERHEAD_BYTES;
/// Facts kept per block of a timeline, at most.
pub const VERSIONS_MAX: usize = 4;

struct Slot {
    fact: Fact,
    page: Bytes,
    referenced: bool,
}

/// The memory tier; see the module doc. Not synchronized: the host cache holds it under its lock.
pub struct MemoryTier {
    budget_bytes: usize,
    used_bytes: usize,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    hand: usize,
    /// Timeline → block → slots of its facts.
    index: HashMap<TimelineId, HashMap<u32, Vec<usize>>>,
}

impl MemoryTier {
    /// An empty tier holding at most `budget_bytes` (entries of [`ENTRY_BYTES`]).
    pub fn new(budget_bytes: usize) -> MemoryTier {
        MemoryTier {
            budget_bytes,
            used_bytes: 0,
            slots: Vec::new(),
            free: Vec::new(),
            hand: 0,
            index: HashMap::new(),
        }
    }

    /// Bytes held, as counted against the budget.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Whether one more entry fits without an eviction.
    pub fn has_room(&self) -> bool {
        self.used_bytes + ENTRY_BYTES <= self.budget_bytes
    }

    /// Entries held.
    pub fn entry_count(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn slots_of(&self, timeline: TimelineId, block: u32) -> &[usize] {
        self.index
            .get(&timeline)
            .and_then(|blocks| blocks.get(&block))
            .map_or(&[], Vec::as_slice)
    }

    fn slot(&self, index: usize) -> &Slot {
        match &self.slots[index] {
            Some(slot) => slot,
            None => unreachable!("slot {index} is indexed but empty"),
        }
    }

    /// The page of a fact of `timeline` that serves `block` at `lsn` (see [`Fact::serves`]), marked used.
    pub fn lookup(
        &mut self,
        timeline: TimelineId,
        block: u32,
        lsn: Lsn,
        extension: Option<Extension>,
    ) -> Option<Bytes> {
        let found = self
            .slots_of(timeline, block)
            .iter()
            .copied()
            .find(|&index| self.slot(index).fact.serves(lsn, extension))?;
        let slot = self.slots[found].as_mut()?;
        slot.referenced = true;
        Some(slot.page.clone())
    }

    /// Whether some fact of `timeline` serves `block` at `lsn`, without marking it used.
    pub fn contains(&self, timeline: TimelineId, block: u32, lsn: Lsn, extension: Option<Extension>) -> bool {
        self.slots_of(timeline, block)
            .iter()
            .any(|&index| self.slot(index).fact.serves(lsn, extension))
    }

    /// Adds `fact` with its `page` (a copy owned by the cache), merged with an overlapping fact of the block.
    /// Returns the entries evicted to stay within the budget, for the next tier (a block's oldest version
    /// dropped for [`VERSIONS_MAX`] is not among them).
    pub fn insert(&mut self, fact: Fact, page: Bytes) -> Vec<(Fact, Bytes)> {
        assert!(fact.from <= fact.to, "fact {fact:?} has an empty range");
        assert!(page.len() == PAGE_SIZE_BYTES, "a cached page of {} bytes", page.len());
        if self.budget_bytes < ENTRY_BYTES {
            return vec![(fact, page)];
        }
        let mut evicted = Vec::new();
        let existing: Vec<usize> = self.slots_of(fact.timeline, fact.block).to_vec();
        for index in &existing {
            let slot = self.slots[*index].as_mut().expect("indexed slots are full");
            if slot.fact.from <= fact.to && fact.from <= slot.fact.to {
                // Overlapping facts of one block hold the same bytes (both are true at a common LSN).
                slot.fact.from = slot.fact.from.min(fact.from);
                slot.fact.to = slot.fact.to.max(fact.to);
                slot.referenced = true;
                return evicted;
            }
        }
        if existing.len() >= VERSIONS_MAX {
            // The oldest version of the block makes room. It is dropped, not handed to the next tier: a hot
            // block's superseded versions (one per commit) would otherwise cost a file-cache write on every
            // commit's acknowledgement, for reads at old snapshots that are rare.
            let oldest = existing
                .iter()
                .copied()
                .min_by_key(|&index| self.slot(index).fact.to)
                .expect("the block has versions");
            self.remove_slot(oldest);
        }
        while self.used_bytes + ENTRY_BYTES > self.budget_bytes {
            match self.evict_one() {
                Some(victim) => evicted.push(victim),
                None => break,
            }
        }
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        self.slots[index] = Some(Slot {
            fact,
            page,
            referenced: false,
        });
        self.index
            .entry(fact.timeline)
            .or_default()
            .entry(fact.block)
            .or_default()
            .push(index);
        self.used_bytes += ENTRY_BYTES;
        assert!(
            self.used_bytes <= self.budget_bytes,
            "{} bytes used of a budget of {}",
            self.used_bytes,
            self.budget_bytes
        );
        evicted
    }

    /// Picks a victim by CLOCK and removes it.
    fn evict_one(&mut self) -> Option<(Fact, Bytes)> {
        if self.entry_count() == 0 {
            return None;
        }
        // Two sweeps at most: the first clears every reference bit it passes.
        for _ in 0..2 * self.slots.len() {
            self.hand = (self.hand + 1) % self.slots.len();
            match &mut self.slots[self.hand] {
                Some(slot) if slot.referenced => slot.referenced = false,
                Some(_) => return self.remove_slot(self.hand),
                None => {}
            }
        }
        unreachable!("a full tier always has a victim after two sweeps")
    }

    fn remove_slot(&mut self, index: usize) -> Option<(Fact, Bytes)> {
        let slot = self.slots[index].take()?;
        let fact = slot.fact;
        if let Some(blocks) = self.index.get_mut(&fact.timeline) {
            if let Some(slots) = blocks.get_mut(&fact.block) {
                slots.retain(|&i| i != index);
                if slots.is_empty() {
                    blocks.remove(&fact.block);
                }
            }
            if blocks.is_empty() {
                self.index.remove(&fact.timeline);
            }
        }
        self.free.push(index);
        self.used_bytes -= ENTRY_BYTES;
        Some((fact, slot.page))
    }

    /// Replaces every fact of `timeline`'s `block` by `change(fact)` (used to write down what a writer's
    /// extension proves before the writer's knowledge changes or goes).
    pub fn update_block(&mut self, timeline: TimelineId, block: u32, change: impl Fn(Fact) -> Fact) {
        let indexes: Vec<usize> = self.slots_of(timeline, block).to_vec();
        for index in indexes {
            if let Some(slot) = self.slots[index].as_mut() {
                slot.fact = change(slot.fact);
            }
        }
    }

    /// The blocks of `timeline` held.
    pub fn blocks_of(&self, timeline: TimelineId) -> Vec<u32> {
        self.index
            .get(&timeline)
            .map_or_else(Vec::new, |blocks| blocks.keys().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: TimelineId = TimelineId(1);

    fn page(byte: u8) -> Bytes {
        Bytes::from(vec![byte; PAGE_SIZE_BYTES])
    }

    #[test]
    fn stays_within_the_budget_and_evicts_the_unreferenced_first() {
        let mut tier = MemoryTier::new(3 * ENTRY_BYTES);
        for block in 0..3 {
            assert!(tier.insert(Fact::at(T, block, Lsn(10)), page(block as u8)).is_empty());
        }
        assert_eq!(tier.lookup(T, 0, Lsn(10), None), Some(page(0)));
        let evicted = tier.insert(Fact::at(T, 3, Lsn(10)), page(3));
        assert_eq!(evicted.len(), 1);
        assert_ne!(evicted[0].0.block, 0, "block 0 was referenced");
        assert_eq!(tier.used_bytes(), 3 * ENTRY_BYTES);
        assert_eq!(tier.entry_count(), 3);
    }

    #[test]
    fn overlapping_facts_merge_and_disjoint_ones_are_versions() {
        let mut tier = MemoryTier::new(10 * ENTRY_BYTES);
        tier.insert(Fact::at(T, 0, Lsn(10)), page(1));
        tier.insert(
            Fact {
                timeline: T,
                block: 0,
                from: Lsn(5),
                to: Lsn(10),
            },
            page(1),
        );
        assert_eq!(tier.entry_count(), 1);
        assert_eq!(tier.lookup(T, 0, Lsn(5), None), Some(page(1)));
        tier.insert(Fact::at(T, 0, Lsn(20)), page(2));
        assert_eq!(tier.entry_count(), 2);
        assert_eq!(tier.lookup(T, 0, Lsn(20), None), Some(page(2)));
        assert_eq!(tier.lookup(T, 0, Lsn(15), None), None);
        for lsn in 30..40 {
            let evicted = tier.insert(Fact::at(T, 0, Lsn(lsn)), page(lsn as u8));
            assert!(
                evicted.is_empty(),
                "a superseded version is dropped, not passed to the file cache"
            );
        }
        assert_eq!(tier.entry_count(), VERSIONS_MAX);
        assert_eq!(tier.lookup(T, 0, Lsn(39), None), Some(page(39)));
        assert_eq!(tier.lookup(T, 0, Lsn(10), None), None, "the oldest versions went first");
        assert_eq!(
            tier.lookup(TimelineId(2), 0, Lsn(39), None),
            None,
            "other timelines see nothing"
        );
    }

    #[test]
    fn a_budget_below_one_entry_keeps_nothing() {
        let mut tier = MemoryTier::new(ENTRY_BYTES - 1);
        assert_eq!(tier.insert(Fact::at(T, 0, Lsn(1)), page(0)).len(), 1);
        assert_eq!(tier.entry_count(), 0);
    }
}
