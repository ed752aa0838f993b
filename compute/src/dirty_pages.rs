//! `DirtyPages`: the pages one transaction wrote, in memory up to a bound and in a temporary file past it.
//!
//! The VFS buffers a transaction's writes here until its commit (DESIGN §5, "transactions of any size"): the
//! first `memory_bytes_max` bytes of pages stay in memory, later ones go to an anonymous temporary file (unlinked
//! at creation, so a crash leaves nothing), each page at its own slot, rewritten in place when written again.
//! So a transaction of gigabytes costs the compute a bounded amount of memory, and reads inside the transaction
//! see its own writes from either place. Pages are handed to the commit in block order.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use bytes::Bytes;
use cambium_types::PAGE_SIZE_BYTES;

/// The default memory bound of one transaction's pages (64 MiB).
pub const DIRTY_MEMORY_BYTES_MAX_DEFAULT: usize = 64 << 20;

/// Where one written page is.
#[derive(Debug)]
enum Slot {
    Memory(Bytes),
    /// Its offset in the spill file.
    File(u64),
}

/// Why the spill file failed.
#[derive(Debug, thiserror::Error)]
#[error("the transaction's spill file: {0}")]
pub struct SpillError(#[from] std::io::Error);

/// One transaction's written pages by block; see the module doc.
#[derive(Debug)]
pub struct DirtyPages {
    slots: BTreeMap<u32, Slot>,
    memory_bytes_max: usize,
    memory_bytes: usize,
    /// Created on the first page past the memory bound.
    file: Option<File>,
    /// Where the next new page goes in the file.
    file_end_bytes: u64,
}

impl DirtyPages {
    /// An empty set that keeps up to `memory_bytes_max` bytes of pages in memory.
    pub fn new(memory_bytes_max: usize) -> DirtyPages {
        DirtyPages {
            slots: BTreeMap::new(),
            memory_bytes_max,
            memory_bytes: 0,
            file: None,
            file_end_bytes: 0,
        }
    }

    /// How many pages.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no page was written.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes of pages held in the spill file (pages past the memory bound), for metrics and tests.
    pub fn spilled_bytes(&self) -> u64 {
        self.file_end_bytes
    }

    /// Records `page` (one whole page) as block `block`'s new content.
    pub fn insert(&mut self, block: u32, page: &[u8]) -> Result<(), SpillError> {
        assert_eq!(page.len(), PAGE_SIZE_BYTES, "a dirty page is one whole page");
        match self.slots.get(&block) {
            Some(Slot::File(offset)) => {
                let offset = *offset;
                self.spill_file()?.write_all_at(page, offset)?;
            }
            Some(Slot::Memory(_)) => {
                self.slots.insert(block, Slot::Memory(Bytes::copy_from_slice(page)));
            }
            None if self.memory_bytes + PAGE_SIZE_BYTES <= self.memory_bytes_max => {
                self.memory_bytes += PAGE_SIZE_BYTES;
                self.slots.insert(block, Slot::Memory(Bytes::copy_from_slice(page)));
            }
            None => {
                let offset = self.file_end_bytes;
                self.spill_file()?.write_all_at(page, offset)?;
                self.file_end_bytes += PAGE_SIZE_BYTES as u64;
                self.slots.insert(block, Slot::File(offset));
            }
        }
        Ok(())
    }

    fn spill_file(&mut self) -> Result<&File, SpillError> {
        if self.file.is_none() {
            self.file = Some(tempfile::tempfile()?);
        }
        Ok(self.file.as_ref().expect("created above"))
    }

    /// Block `block`'s page, if the transaction wrote it.
    pub fn get(&self, block: u32) -> Result<Option<Bytes>, SpillError> {
        match self.slots.get(&block) {
            None => Ok(None),
            Some(Slot::Memory(page)) => Ok(Some(page.clone())),
            Some(Slot::File(offset)) => self.read_slot(*offset).map(Some),
        }
    }

    fn read_slot(&self, offset: u64) -> Result<Bytes, SpillError> {
        let file = self.file.as_ref().expect("a page in the file means the file exists");
        let mut page = vec![0u8; PAGE_SIZE_BYTES];
        file.read_exact_at(&mut page, offset)?;
        Ok(Bytes::from(page))
    }

    /// Forgets the pages at or past `size_pages` (the transaction truncated the database). Their file slots
    /// stay until [`DirtyPages::clear`].
    pub fn truncate(&mut self, size_pages: u32) {
        for (_, slot) in self.slots.split_off(&size_pages) {
            if matches!(slot, Slot::Memory(_)) {
                self.memory_bytes -= PAGE_SIZE_BYTES;
            }
        }
    }

    /// Forgets every page and drops the spill file.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.memory_bytes = 0;
        self.file = None;
        self.file_end_bytes = 0;
    }

    /// The written blocks, in order.
    pub fn blocks(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.keys().copied()
    }

    /// Every page in block order, read from memory or the file as the iteration reaches it.
    pub fn iter(&self) -> impl Iterator<Item = Result<(u32, Bytes), SpillError>> + '_ {
        self.slots.iter().map(|(block, slot)| match slot {
            Slot::Memory(page) => Ok((*block, page.clone())),
            Slot::File(offset) => self.read_slot(*offset).map(|page| (*block, page)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn page(byte: u8) -> Vec<u8> {
        vec![byte; PAGE_SIZE_BYTES]
    }

    proptest! {
        #[test]
        fn dirty_pages_match_a_map(ops in proptest::collection::vec((0u32..20, any::<u8>(), 0u8..10), 0..60),
                                   memory_pages in 0usize..5) {
            let mut dirty = DirtyPages::new(memory_pages * PAGE_SIZE_BYTES);
            let mut model = BTreeMap::new();
            for (block, byte, op) in ops {
                if op == 0 {
                    dirty.truncate(block);
                    let _ = model.split_off(&block);
                } else {
                    dirty.insert(block, &page(byte)).expect("insert");
                    model.insert(block, byte);
                }
                prop_assert!(dirty.memory_bytes <= memory_pages * PAGE_SIZE_BYTES);
            }
            prop_assert_eq!(dirty.len(), model.len());
            for block in 0..20 {
                let got = dirty.get(block).expect("get").map(|p| p[0]);
                prop_assert_eq!(got, model.get(&block).copied());
            }
            let all: Vec<(u32, u8)> = dirty.iter().map(|r| r.map(|(b, p)| (b, p[0])).expect("read")).collect();
            prop_assert_eq!(all, model.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn pages_past_the_bound_go_to_the_file() {
        let mut dirty = DirtyPages::new(2 * PAGE_SIZE_BYTES);
        for block in 0..5 {
            dirty.insert(block, &page(block as u8)).expect("insert");
        }
        assert_eq!(dirty.spilled_bytes(), 3 * PAGE_SIZE_BYTES as u64);
        dirty.insert(4, &page(9)).expect("rewrite in place");
        assert_eq!(dirty.spilled_bytes(), 3 * PAGE_SIZE_BYTES as u64);
        assert_eq!(dirty.get(4).expect("get").map(|p| p[0]), Some(9));
        dirty.clear();
        assert!(dirty.is_empty());
        assert_eq!(dirty.spilled_bytes(), 0);
    }
}
