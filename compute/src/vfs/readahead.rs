//! Read-ahead: which pages a connection will read next, from the order it reads them in, so the store can
//! have them in flight before SQLite asks (`PageStore::prefetch`).
//!
//! Two patterns, both cheap to see in the VFS:
//!
//! - **Sequential**: blocks read in ascending order, each at most [`SEQUENTIAL_GAP_MAX`] past the previous, at
//!   least [`SEQUENTIAL_RUN_MIN`] times in a row (a freshly loaded table's leaves, overflow chains, which SQLite
//!   allocates in order).
//! - **B-tree order**: SQLite walks a table or index in key order, one child of an interior page after the
//!   other. The VFS parses each interior b-tree page it reads (SQLite's own layout: page type 2 or 5, its
//!   cell pointers and right-most child) and remembers the children of the last [`PARENTS_MAX`]; a read of
//!   the child right after the previously read child of the same parent is a scan, and the next children are
//!   asked for, whatever their page numbers (a table loaded in random key order, or after updates).
//!
//! A read's place among a parent's children is found without an index of every child: it is either the
//! child after the previous read's place (a scan's next step, one comparison) or found by a linear search of
//! the most recently read parents' children, newest first (a scan's first step, or a point read's
//! descent, which reads each child right after its parent, so the first list searched holds it); interior
//! pages are not looked for at all (a descent reads their children next, not their siblings). A hash map
//! from every remembered child to its parent cost a rehash of hundreds of children for every interior page
//! read, and point reads re-read their interior pages at every transaction: 7 % of the compute's CPU under
//! pgbench's TPC-B (ARCHITECTURE.md, Decisions).
//!
//! A read that fits neither (a point lookup: root, interior, leaf) asks for nothing, so it stays one round
//! trip. Requests are topped up when less than half a window is ahead of the reader, so they go in batches.

use std::collections::VecDeque;

use cambium_types::PAGE_SIZE_BYTES;

/// Largest step between two reads that still counts as sequential.
pub const SEQUENTIAL_GAP_MAX: u32 = 4;
/// Sequential steps in a row before read-ahead starts.
pub const SEQUENTIAL_RUN_MIN: u32 = 2;
/// Interior pages whose children are remembered.
pub const PARENTS_MAX: usize = 16;
/// Remembered parents searched (most recently read first) for a read that is not a scan's next step: a
/// scan's first child is read right after its parent or a few other reads later, and a read no parent
/// holds (a small table's root leaf, page 1) costs this many children lists, not all of them.
pub const SEARCHED_PARENTS_MAX: usize = 4;
/// SQLite's database header before page 1's b-tree header.
const PAGE_ONE_HEADER_BYTES: usize = 100;

/// One connection's read-ahead state; see the module doc.
#[derive(Debug)]
pub(crate) struct ReadAhead {
    window_pages: u32,
    last_block: Option<u32>,
    run: u32,
    /// Sequential blocks below this were asked for.
    sequential_until: u32,
    /// Interior pages read, least recently read first, with their children in key order; at most
    /// [`PARENTS_MAX`], one entry per parent.
    parents: VecDeque<(u32, Vec<u32>)>,
    /// The previous read's (parent block, index among its children), if it was a remembered parent's child.
    last_position: Option<(u32, usize)>,
    /// Children of this parent below this index were asked for.
    ordered_until: Option<(u32, usize)>,
}

impl ReadAhead {
    /// Read-ahead of `window_pages` (0: never asks for anything).
    pub(crate) fn new(window_pages: u32) -> ReadAhead {
        ReadAhead {
            window_pages,
            last_block: None,
            run: 0,
            sequential_until: 0,
            parents: VecDeque::with_capacity(PARENTS_MAX),
            last_position: None,
            ordered_until: None,
        }
    }

    /// Notes a read of `block` (holding `page`) from the store; returns the blocks to ask for ahead of it.
    pub(crate) fn observe(&mut self, block: u32, page: &[u8]) -> Vec<u32> {
        if self.window_pages == 0 {
            return Vec::new();
        }
        let children = interior_children(block, page);
        // An interior page's own place among its parent's children is not looked for: the read after it is
        // one of its own children (a descent), never its next sibling, so it starts no scan step.
        let mut wanted = if children.is_some() {
            self.last_position = None;
            Vec::new()
        } else {
            self.ordered(block)
        };
        wanted.extend(self.sequential(block));
        if let Some(children) = children {
            self.remember(block, children);
        }
        wanted
    }

    fn sequential(&mut self, block: u32) -> Vec<u32> {
        let step = self.last_block.and_then(|last| block.checked_sub(last));
        self.last_block = Some(block);
        match step {
            Some(0) => return Vec::new(),
            Some(step) if step <= SEQUENTIAL_GAP_MAX => self.run += 1,
            _ => {
                self.run = 0;
                return Vec::new();
            }
        }
        if self.run < SEQUENTIAL_RUN_MIN {
            return Vec::new();
        }
        let next = block.saturating_add(1);
        let until = next.saturating_add(self.window_pages);
        let from = self.sequential_until.max(next);
        if from >= until || until - from < self.window_pages / 2 {
            return Vec::new(); // at least half a window is still ahead
        }
        self.sequential_until = until;
        (from..until).collect()
    }

    /// `block`'s place among a remembered parent's children: right after the previous read's place, or else
    /// the first place found among the [`SEARCHED_PARENTS_MAX`] most recently read parents' children.
    fn position_of(&self, block: u32) -> Option<(u32, usize)> {
        if let Some((parent, index)) = self.last_position {
            let next = self.children_of(parent).and_then(|children| children.get(index + 1));
            if next == Some(&block) {
                return Some((parent, index + 1));
            }
        }
        self.parents
            .iter()
            .rev()
            .take(SEARCHED_PARENTS_MAX)
            .find_map(|(parent, children)| index_of(children, block).map(|index| (*parent, index)))
    }

    fn children_of(&self, parent: u32) -> Option<&Vec<u32>> {
        self.parents
            .iter()
            .rev()
            .find(|(p, _)| *p == parent)
            .map(|(_, children)| children)
    }

    fn ordered(&mut self, block: u32) -> Vec<u32> {
        let position = self.position_of(block);
        let previous = std::mem::replace(&mut self.last_position, position);
        let (Some((parent, index)), Some((last_parent, last_index))) = (position, previous) else {
            return Vec::new();
        };
        if parent != last_parent || index != last_index + 1 {
            return Vec::new();
        }
        let Some(children) = self.children_of(parent) else {
            return Vec::new();
        };
        let until = (index + 1 + self.window_pages as usize).min(children.len());
        let from = match self.ordered_until {
            Some((p, asked)) if p == parent => asked.max(index + 1),
            _ => index + 1,
        };
        if from >= until || (until - from < self.window_pages as usize / 2 && until < children.len()) {
            return Vec::new();
        }
        let wanted = children[from..until].to_vec();
        self.ordered_until = Some((parent, until));
        wanted
    }

    /// Notes `parent`'s children as the most recently read parent's (replacing what an earlier read of it
    /// said), forgetting the least recently read parent past [`PARENTS_MAX`].
    fn remember(&mut self, parent: u32, children: Vec<u32>) {
        if let Some(at) = self.parents.iter().position(|(p, _)| *p == parent) {
            self.parents.remove(at);
        } else if self.parents.len() >= PARENTS_MAX {
            self.parents.pop_front();
        }
        self.parents.push_back((parent, children));
        assert!(
            self.parents.len() <= PARENTS_MAX,
            "read-ahead remembers a bounded number of parents"
        );
    }
}

/// The first index of `block` in `children`. Compares a chunk at a time without an early exit inside it, which
/// the compiler turns into vector compares: a miss over the remembered parents (a root page's read) costs
/// about a microsecond.
fn index_of(children: &[u32], block: u32) -> Option<usize> {
    const CHUNK: usize = 16;
    for (at, chunk) in children.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(false, |found, child| found | (*child == block)) {
            let within = chunk
                .iter()
                .position(|child| *child == block)
                .expect("the chunk holds the block");
            return Some(at * CHUNK + within);
        }
    }
    None
}

/// The children (blocks, in key order) of `page` if it is an interior b-tree page (table: type 5, index: type
/// 2). The bytes are untrusted: anything out of bounds or not a page number is `None`.
pub(crate) fn interior_children(block: u32, page: &[u8]) -> Option<Vec<u32>> {
    if page.len() != PAGE_SIZE_BYTES {
        return None;
    }
    let header = if block == 0 { PAGE_ONE_HEADER_BYTES } else { 0 };
    let kind = *page.get(header)?;
    if kind != 2 && kind != 5 {
        return None;
    }
    let be_u16 = |at: usize| {
        page.get(at..at + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let be_u32 = |at: usize| {
        page.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let cells = be_u16(header + 3)?;
    if cells > PAGE_SIZE_BYTES / 4 {
        return None;
    }
    let mut children = Vec::with_capacity(cells + 1);
    for cell in 0..cells {
        let offset = be_u16(header + 12 + 2 * cell)?;
        children.push(be_u32(offset)?.checked_sub(1)?);
    }
    children.push(be_u32(header + 8)?.checked_sub(1)?);
    Some(children)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interior table page (type 5) whose children are `children` (pages numbers are blocks + 1).
    fn interior(children: &[u32]) -> Vec<u8> {
        let mut page = vec![0u8; PAGE_SIZE_BYTES];
        page[0] = 5;
        let (cells, right) = children.split_at(children.len() - 1);
        page[3..5].copy_from_slice(&(cells.len() as u16).to_be_bytes());
        page[8..12].copy_from_slice(&(right[0] + 1).to_be_bytes());
        for (i, child) in cells.iter().enumerate() {
            let offset = 4000 + 8 * i;
            page[12 + 2 * i..14 + 2 * i].copy_from_slice(&(offset as u16).to_be_bytes());
            page[offset..offset + 4].copy_from_slice(&(child + 1).to_be_bytes());
        }
        page
    }

    fn leaf() -> Vec<u8> {
        let mut page = vec![0u8; PAGE_SIZE_BYTES];
        page[0] = 13;
        page
    }

    #[test]
    fn parses_interior_pages_and_refuses_garbage() {
        assert_eq!(interior_children(7, &interior(&[3, 9, 4])), Some(vec![3, 9, 4]));
        assert_eq!(interior_children(7, &leaf()), None);
        let mut bad = interior(&[3, 9, 4]);
        bad[12..14].copy_from_slice(&9000u16.to_be_bytes());
        assert_eq!(interior_children(7, &bad), None, "a cell pointer past the page");
        let mut zero = interior(&[3, 9]);
        zero[8..12].copy_from_slice(&0u32.to_be_bytes());
        assert_eq!(interior_children(7, &zero), None, "page number 0");
        assert_eq!(interior_children(7, &[5, 0, 0]), None);
        // Page 1: the b-tree header after SQLite's 100-byte header; cell offsets count from the page's start.
        let mut page_one = vec![0u8; PAGE_SIZE_BYTES];
        page_one[100] = 5;
        page_one[103..105].copy_from_slice(&1u16.to_be_bytes());
        page_one[108..112].copy_from_slice(&3u32.to_be_bytes());
        page_one[112..114].copy_from_slice(&5000u16.to_be_bytes());
        page_one[5000..5004].copy_from_slice(&2u32.to_be_bytes());
        assert_eq!(interior_children(0, &page_one), Some(vec![1, 2]));
    }

    #[test]
    fn sequential_reads_ask_ahead_in_batches_and_point_reads_ask_nothing() {
        let mut ahead = ReadAhead::new(8);
        assert!(ahead.observe(10, &leaf()).is_empty());
        assert!(ahead.observe(11, &leaf()).is_empty());
        assert_eq!(ahead.observe(12, &leaf()), (13..21).collect::<Vec<_>>());
        assert!(
            ahead.observe(13, &leaf()).is_empty(),
            "most of the window is still ahead"
        );
        assert!(ahead.observe(15, &leaf()).is_empty());
        assert_eq!(ahead.observe(17, &leaf()), (21..26).collect::<Vec<_>>());
        assert!(ahead.observe(500, &leaf()).is_empty(), "a jump ends the run");
        let mut point = ReadAhead::new(8);
        for block in [1, 57, 1203, 3, 90, 4000] {
            assert!(point.observe(block, &leaf()).is_empty());
        }
    }

    #[test]
    fn reads_in_a_parents_child_order_ask_for_the_next_children() {
        let children = [40, 7, 300, 12, 99, 5, 61];
        let mut ahead = ReadAhead::new(4);
        assert!(ahead.observe(2, &interior(&children)).is_empty());
        assert!(ahead.observe(40, &leaf()).is_empty(), "one child is a point read");
        assert_eq!(ahead.observe(7, &leaf()), vec![300, 12, 99, 5]);
        assert_eq!(ahead.observe(300, &leaf()), vec![61], "the rest of the parent");
        assert!(ahead.observe(12, &leaf()).is_empty(), "everything was asked for");
        let mut zero = ReadAhead::new(0);
        zero.observe(2, &interior(&children));
        zero.observe(40, &leaf());
        assert!(zero.observe(7, &leaf()).is_empty());
    }

    #[test]
    fn a_scan_of_an_older_parent_is_seen_after_other_parents_were_read() {
        let mut ahead = ReadAhead::new(2);
        assert!(ahead.observe(2, &interior(&[40, 7, 300, 12])).is_empty());
        // Other interior pages (another table's root, an index) read after it: the scan's parent is older.
        assert!(ahead.observe(30, &interior(&[50, 51, 52])).is_empty());
        assert!(ahead.observe(70, &interior(&[60, 61])).is_empty());
        assert!(ahead.observe(40, &leaf()).is_empty());
        assert_eq!(ahead.observe(7, &leaf()), vec![300, 12]);
    }

    #[test]
    fn a_reread_parent_with_new_children_replaces_the_old_ones_and_parents_stay_bounded() {
        let mut ahead = ReadAhead::new(2);
        ahead.observe(2, &interior(&[40, 7, 300]));
        ahead.observe(2, &interior(&[41, 8, 301, 9]));
        assert_eq!(ahead.parents.len(), 1, "one entry per parent");
        assert!(ahead.observe(41, &leaf()).is_empty());
        assert_eq!(ahead.observe(8, &leaf()), vec![301, 9]);
        for parent in 100..100 + 2 * PARENTS_MAX as u32 {
            ahead.observe(parent, &interior(&[parent * 10, parent * 10 + 1]));
        }
        assert_eq!(ahead.parents.len(), PARENTS_MAX);
        assert!(
            ahead.children_of(2).is_none(),
            "the least recently read parent went first"
        );
        // A child of a parent read before the last SEARCHED_PARENTS_MAX is not looked for.
        let older = 100 + 2 * PARENTS_MAX as u32 - 1 - SEARCHED_PARENTS_MAX as u32;
        assert_eq!(ahead.position_of(older * 10), None);
        assert_eq!(ahead.position_of((older + 1) * 10 + 1), Some((older + 1, 1)));
    }

    #[test]
    fn index_of_finds_the_first_place_in_any_chunk() {
        let children: Vec<u32> = (0..100).map(|i| i * 3).collect();
        for (i, child) in children.iter().enumerate() {
            assert_eq!(index_of(&children, *child), Some(i));
        }
        assert_eq!(index_of(&children, 1), None);
        assert_eq!(index_of(&[], 1), None);
        assert_eq!(index_of(&[5, 5, 5], 5), Some(0));
    }
}
