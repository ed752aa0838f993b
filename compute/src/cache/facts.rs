//! What a cached page claims, and what the branch's writer knows that lets a claim serve later reads.
//!
//! A cached page is a [`Fact`]: on timeline `timeline`, block `block` holds these bytes at every LSN in
//! `[from, to]`. A page at an LSN never changes and a timeline id is never reused, so a fact once true is true
//! forever: it may be kept in memory or on disk, across restarts, branches and restores, and served to any read
//! it covers. Nothing else is ever served, which is the whole correctness argument of the compute's caches:
//! every fact they hold was true when it was made, and each way of making one is argued below.
//!
//! - **A read.** A page read from the pageserver at LSN `S` makes the fact `[S, S]`.
//! - **The writer's knowledge** ([`Writer`]). One compute writes a timeline (DESIGN §5; its proposer was
//!   elected at the epoch start `E`, and any later writer's WAL starts past every commit this one saw
//!   acknowledged). So between `E` and the last commit it saw (`through`), every change of a block is one of
//!   its own commits, and it records, per block, the LSN of its last write (at most [`LAST_WRITES_MAX`]
//!   blocks; past that, and when the database shrinks, a floor stands for every block). A block's version is
//!   then the same at every LSN of `[last_write, through]`, and a fact overlapping that range serves any read
//!   in it ([`Extension`]). A write whose LSN is not known yet (the commit path tells the cache which blocks
//!   it wrote before the cache sees the commit's LSN) is *pending* until the writer next observes its read LSN:
//!   meanwhile that block extends nothing, so an unknown write can only shorten what a fact serves.
//! - **A branch point.** A timeline at its start LSN is its ancestor at the branch point, so a read of a
//!   timeline at its start, or of a block the writer has not written since a start it began at, is served by
//!   the ancestor's facts at the branch point ([`Link`]).

use std::collections::HashMap;

use cambium_types::{Lsn, TimelineId};

/// Blocks whose last write a [`Writer`] remembers one by one; past this, one floor stands for all of them.
pub const LAST_WRITES_MAX: usize = 65_536;

/// A page's bytes are the same on `timeline` at every LSN of `[from, to]` (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fact {
    /// The timeline.
    pub timeline: TimelineId,
    /// The block (page number - 1).
    pub block: u32,
    /// The first LSN the bytes are known at.
    pub from: Lsn,
    /// The last LSN the bytes are known at (`from <= to`).
    pub to: Lsn,
}

impl Fact {
    /// The fact of one read at `lsn`.
    pub fn at(timeline: TimelineId, block: u32, lsn: Lsn) -> Fact {
        Fact {
            timeline,
            block,
            from: lsn,
            to: lsn,
        }
    }

    /// Whether this fact serves a read at `lsn`, directly or through the writer's `extension` of its block.
    pub fn serves(&self, lsn: Lsn, extension: Option<Extension>) -> bool {
        let direct = self.from <= lsn && lsn <= self.to;
        direct || extension.is_some_and(|e| e.covers(lsn) && self.overlaps(e))
    }

    /// The fact with `to` pushed as far as the writer's `extension` allows (what a copy of it kept after the
    /// writer is gone may claim).
    pub fn extended(&self, extension: Option<Extension>) -> Fact {
        match extension {
            Some(e) if self.overlaps(e) && e.through > self.to => Fact { to: e.through, ..*self },
            _ => *self,
        }
    }

    fn overlaps(&self, extension: Extension) -> bool {
        self.to >= extension.last_write && self.from <= extension.through
    }
}

/// A block's unchanged range on its timeline, as the writer knows it: the same bytes at every LSN of
/// `[last_write, through]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extension {
    /// The LSN of the block's last change that the writer knows of (at least its epoch start).
    pub last_write: Lsn,
    /// The writer's latest commit (its read LSN when last observed).
    pub through: Lsn,
}

impl Extension {
    fn covers(&self, lsn: Lsn) -> bool {
        self.last_write <= lsn && lsn <= self.through
    }
}

/// A pending write: its LSN is known once the writer observes its read LSN again.
const PENDING: Lsn = Lsn(u64::MAX);

/// What the live writer of a timeline knows about its blocks (see the module doc). Kept by the host cache,
/// changed only by the writer's own store.
#[derive(Debug)]
pub struct Writer {
    generation: u64,
    through: Lsn,
    /// Every block's last write is at or below this.
    floor: Lsn,
    /// The floor must rise to the next observed read LSN (the database shrank, or the map overflowed).
    floor_pending: bool,
    /// Block → the LSN of its last write since the epoch start ([`PENDING`]: not known yet).
    last_writes: HashMap<u32, Lsn>,
    pending_count: usize,
    size_pages: u32,
}

impl Writer {
    /// A writer elected at `epoch_start`, where the database has `size_pages` pages.
    pub fn new(generation: u64, epoch_start: Lsn, size_pages: u32) -> Writer {
        Writer {
            generation,
            through: epoch_start,
            floor: epoch_start,
            floor_pending: false,
            last_writes: HashMap::new(),
            pending_count: 0,
            size_pages,
        }
    }

    /// Which store this record belongs to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The writer's latest commit, as last observed.
    pub fn through(&self) -> Lsn {
        self.through
    }

    /// The database size as of the writer's latest commit.
    pub fn size_pages(&self) -> u32 {
        self.size_pages
    }

    /// Whether every write is known with its LSN (no commit since the last observation changed anything).
    pub fn is_settled(&self) -> bool {
        self.pending_count == 0 && !self.floor_pending
    }

    /// The writer's read LSN is now `read_lsn` (its latest commit): pending writes happened at or before it.
    pub fn observe(&mut self, read_lsn: Lsn) {
        assert!(
            read_lsn >= self.through,
            "read LSN went back from {} to {read_lsn}",
            self.through
        );
        self.through = read_lsn;
        if self.pending_count > 0 {
            for lsn in self.last_writes.values_mut().filter(|lsn| **lsn == PENDING) {
                *lsn = read_lsn;
            }
            self.pending_count = 0;
        }
        if self.floor_pending || self.last_writes.len() > LAST_WRITES_MAX {
            self.floor = read_lsn;
            self.floor_pending = false;
            self.last_writes.clear();
        }
    }

    /// `block` was written by a commit not observed yet.
    pub fn wrote(&mut self, block: u32) {
        if self.last_writes.insert(block, PENDING) != Some(PENDING) {
            self.pending_count += 1;
        }
    }

    /// `block` was written by the commit ending at `lsn`.
    pub fn wrote_at(&mut self, block: u32, lsn: Lsn) {
        assert!(
            lsn > self.floor,
            "a write at {lsn} at or below the floor {}",
            self.floor
        );
        if self.last_writes.insert(block, lsn) == Some(PENDING) {
            self.pending_count -= 1;
        }
    }

    /// A commit set the database size to `size_pages`; blocks cut off may come back with other bytes.
    pub fn resized(&mut self, size_pages: u32) {
        if size_pages < self.size_pages {
            self.floor_pending = true;
        }
        self.size_pages = size_pages;
    }

    /// What the writer knows of `block`'s unchanged range; `None` while a write of it is pending.
    pub fn extension(&self, block: u32) -> Option<Extension> {
        if self.floor_pending {
            return None;
        }
        let last_write = match self.last_writes.get(&block) {
            Some(&PENDING) => return None,
            Some(&lsn) => lsn.max(self.floor),
            None => self.floor,
        };
        Some(Extension {
            last_write,
            through: self.through,
        })
    }
}

/// One timeline of a read's path through the branch points: read `timeline` at `lsn`, with its writer's
/// extension of the block, if it has a live writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The timeline.
    pub timeline: TimelineId,
    /// The LSN on it.
    pub lsn: Lsn,
    /// Its writer's knowledge of the block.
    pub extension: Option<Extension>,
}

/// Where a timeline comes from, as the pageserver said: its start LSN and, for a branch, its ancestor and the
/// branch point (equal to the start LSN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ancestry {
    /// The timeline's first LSN.
    pub start_lsn: Lsn,
    /// The ancestor timeline and the branch point, for a branch.
    pub parent: Option<(TimelineId, Lsn)>,
}

/// Whether a read of `block` at `lsn` on a timeline that starts at `start_lsn` reads what it held at its start:
/// `lsn` is the start, or the writer's extension reaches back to it.
pub fn same_as_start(lsn: Lsn, start_lsn: Lsn, extension: Option<Extension>) -> bool {
    lsn == start_lsn || extension.is_some_and(|e| e.last_write == start_lsn && e.covers(lsn))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: TimelineId = TimelineId(7);

    fn fact(from: u64, to: u64) -> Fact {
        Fact {
            timeline: T,
            block: 3,
            from: Lsn(from),
            to: Lsn(to),
        }
    }

    #[test]
    fn a_fact_serves_its_range_and_what_the_writer_extends() {
        let mut writer = Writer::new(1, Lsn(100), 10);
        writer.observe(Lsn(200));
        let read = fact(150, 150);
        assert!(read.serves(Lsn(150), None));
        assert!(!read.serves(Lsn(160), None));
        let extension = writer.extension(3);
        assert_eq!(
            extension,
            Some(Extension {
                last_write: Lsn(100),
                through: Lsn(200)
            })
        );
        assert!(read.serves(Lsn(100), extension), "not written since the epoch start");
        assert!(read.serves(Lsn(200), extension));
        assert!(!read.serves(Lsn(201), extension), "past what the writer knows");
        assert_eq!(read.extended(extension), fact(150, 200));
        assert!(!fact(10, 20).serves(Lsn(150), extension), "older than the epoch start");
        assert!(fact(10, 100).serves(Lsn(150), extension), "covers the epoch start");
    }

    #[test]
    fn a_pending_write_extends_nothing_until_observed() {
        let mut writer = Writer::new(1, Lsn(100), 10);
        writer.observe(Lsn(200));
        writer.wrote(3);
        assert_eq!(writer.extension(3), None);
        assert!(!writer.is_settled());
        assert!(writer.extension(4).is_some(), "other blocks keep theirs");
        writer.observe(Lsn(300));
        assert!(writer.is_settled());
        let extension = writer.extension(3);
        assert_eq!(
            extension,
            Some(Extension {
                last_write: Lsn(300),
                through: Lsn(300)
            })
        );
        assert!(
            !fact(150, 200).serves(Lsn(300), extension),
            "the old version ends before the write"
        );
        writer.wrote_at(3, Lsn(400));
        writer.observe(Lsn(400));
        assert_eq!(writer.extension(3).map(|e| e.last_write), Some(Lsn(400)));
    }

    #[test]
    fn shrinking_and_overflow_raise_the_floor_for_every_block() {
        let mut writer = Writer::new(1, Lsn(100), 10);
        writer.resized(12);
        writer.observe(Lsn(150));
        assert_eq!(writer.extension(5).map(|e| e.last_write), Some(Lsn(100)));
        writer.resized(4);
        assert_eq!(writer.extension(5), None, "a pending floor hides every block");
        writer.observe(Lsn(200));
        assert_eq!(writer.extension(5).map(|e| e.last_write), Some(Lsn(200)));
        for block in 0..=LAST_WRITES_MAX as u32 {
            writer.wrote(block);
        }
        writer.observe(Lsn(300));
        assert_eq!(writer.extension(1).map(|e| e.last_write), Some(Lsn(300)));
        assert!(writer.last_writes.is_empty());
    }

    #[test]
    fn a_branch_reads_its_start_until_the_writer_changes_the_block() {
        let mut writer = Writer::new(1, Lsn(500), 10);
        writer.observe(Lsn(600));
        assert!(same_as_start(Lsn(500), Lsn(500), None));
        assert!(same_as_start(Lsn(600), Lsn(500), writer.extension(1)));
        writer.wrote_at(1, Lsn(550));
        assert!(!same_as_start(Lsn(600), Lsn(500), writer.extension(1)));
        let late = Writer::new(2, Lsn(520), 10);
        assert!(
            !same_as_start(Lsn(520), Lsn(500), late.extension(1)),
            "a writer that began after the start does not know what changed before it"
        );
    }
}
