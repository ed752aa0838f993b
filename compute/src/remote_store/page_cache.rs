//! The store's page cache: bounded, least recently used evicted first, each page valid from an LSN.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use cambium_types::Lsn;

/// A bounded page cache: block → the branch's latest version of the page and the LSN it is known valid from,
/// least recently used evicted first.
pub(super) struct PageLru {
    capacity_pages: usize,
    /// Block → (page, valid from LSN, last use tick).
    pages: HashMap<u32, (Bytes, Lsn, u64)>,
    /// Use tick → block, oldest first.
    by_use: BTreeMap<u64, u32>,
    tick: u64,
}

impl PageLru {
    pub(super) fn new(capacity_pages: usize) -> PageLru {
        PageLru {
            capacity_pages,
            pages: HashMap::new(),
            by_use: BTreeMap::new(),
            tick: 0,
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The cached page if it is `block`'s version at `read_lsn` (valid from at or before it), marked used.
    pub(super) fn get(&mut self, block: u32, read_lsn: Lsn) -> Option<Bytes> {
        let tick = self.next_tick();
        let (page, valid_from, used) = self.pages.get_mut(&block)?;
        if *valid_from > read_lsn {
            return None;
        }
        self.by_use.remove(used);
        *used = tick;
        self.by_use.insert(tick, block);
        Some(page.clone())
    }

    /// The cached latest version of `block`, whatever it is valid from, without marking it used.
    pub(super) fn latest(&self, block: u32) -> Option<Bytes> {
        self.pages.get(&block).map(|(page, _, _)| page.clone())
    }

    /// Caches `page` as `block`'s latest version, valid from `valid_from`.
    pub(super) fn insert(&mut self, block: u32, page: Bytes, valid_from: Lsn) {
        if self.capacity_pages == 0 {
            return;
        }
        let tick = self.next_tick();
        if let Some((_, _, used)) = self.pages.insert(block, (page, valid_from, tick)) {
            self.by_use.remove(&used);
        }
        self.by_use.insert(tick, block);
        while self.pages.len() > self.capacity_pages {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.pages.remove(&oldest);
        }
        assert!(
            self.pages.len() == self.by_use.len(),
            "cache map has {} pages, use order {}",
            self.pages.len(),
            self.by_use.len()
        );
    }

    /// Forgets `block`'s cached version (a commit replaced it).
    pub(super) fn remove(&mut self, block: u32) {
        if let Some((_, _, used)) = self.pages.remove(&block) {
            self.by_use.remove(&used);
        }
    }

    /// Drops every block at or beyond `db_size_pages`.
    pub(super) fn truncate(&mut self, db_size_pages: u32) {
        let by_use = &mut self.by_use;
        self.pages.retain(|block, (_, _, used)| {
            let keep = *block < db_size_pages;
            if !keep {
                by_use.remove(used);
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cambium_types::PAGE_SIZE_BYTES;

    fn page(byte: u8) -> Bytes {
        Bytes::from(vec![byte; PAGE_SIZE_BYTES])
    }

    const AT: Lsn = Lsn(100);

    #[test]
    fn lru_evicts_least_recently_used_and_truncates() {
        let mut cache = PageLru::new(2);
        cache.insert(0, page(0), AT);
        cache.insert(1, page(1), AT);
        assert_eq!(cache.get(0, AT), Some(page(0)));
        cache.insert(2, page(2), AT);
        assert_eq!(cache.get(1, AT), None, "block 1 was the least recently used");
        assert_eq!(cache.get(0, AT), Some(page(0)));
        cache.insert(0, page(9), AT);
        assert_eq!(cache.get(0, AT), Some(page(9)), "an insert replaces the page");
        cache.truncate(1);
        assert_eq!(cache.get(2, AT), None);
        assert_eq!(cache.pages.len(), 1);
        assert_eq!(cache.by_use.len(), 1);
    }

    #[test]
    fn a_version_serves_reads_at_or_after_the_lsn_it_is_valid_from() {
        let mut cache = PageLru::new(4);
        cache.insert(0, page(1), AT);
        assert_eq!(cache.get(0, Lsn(AT.0 + 50)), Some(page(1)));
        assert_eq!(cache.get(0, AT), Some(page(1)));
        assert_eq!(
            cache.get(0, Lsn(AT.0 - 1)),
            None,
            "an older snapshot may need an older version"
        );
        cache.insert(0, page(2), Lsn(AT.0 + 10));
        assert_eq!(cache.get(0, Lsn(AT.0 + 5)), None);
        assert_eq!(cache.latest(0), Some(page(2)));
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let mut cache = PageLru::new(0);
        cache.insert(0, page(0), AT);
        assert_eq!(cache.get(0, AT), None);
    }
}
