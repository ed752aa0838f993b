//! `PageStore`: what the SQLite VFS reads pages from and commits transactions to.
//!
//! `RemotePageStore` (`remote_store`) is the real one (GetPage from the pageserver, commits through the
//! safekeepers); `MemoryPageStore` is a complete in-process one, used by tests and by anyone who wants a
//! database that lives only in memory. Both keep page versions, so reads at a [`Snapshot`] are stable.

use std::collections::BTreeMap;

use bytes::Bytes;
use cambium_types::{Lsn, PAGE_SIZE_BYTES};
use parking_lot::Mutex;

use crate::dirty_pages::{DirtyPages, DIRTY_MEMORY_BYTES_MAX_DEFAULT};

/// A page of zeros: what a block inside the database that was never written holds.
pub(crate) static ZERO_PAGE: [u8; PAGE_SIZE_BYTES] = [0; PAGE_SIZE_BYTES];

/// Why a `PageStore` could not read or commit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PageStoreError {
    /// A page that is not exactly one page long (given to `commit`, or returned by a read).
    #[error("page {block} is {len_bytes} bytes, not {PAGE_SIZE_BYTES}")]
    InvalidPage {
        /// The block (page number - 1).
        block: u32,
        /// Its length.
        len_bytes: usize,
    },
    /// A committed page beyond the database size given with it.
    #[error("page {block} is beyond the database size of {db_size_pages} pages")]
    BlockBeyondSize {
        /// The block (page number - 1).
        block: u32,
        /// The database size in pages given with the commit.
        db_size_pages: u32,
    },
    /// A read at a snapshot whose page versions the store no longer keeps. Nothing wrong is returned: the
    /// reader's transaction must start again at a newer snapshot.
    #[error("snapshot too old: versions at {snapshot_lsn} are no longer kept")]
    SnapshotTooOld {
        /// The snapshot read at.
        snapshot_lsn: Lsn,
    },
    /// A transaction larger than the store takes, refused before anything was sent: nothing of it is anywhere
    /// and the store goes on.
    #[error("the transaction writes {bytes} bytes of pages, over transaction_bytes_max ({max_bytes} bytes)")]
    TooLarge {
        /// The transaction's page bytes.
        bytes: usize,
        /// The limit.
        max_bytes: usize,
    },
    /// The store could not serve the request (a timeout, a lost quorum, an injected failure, …).
    /// For a commit, nothing of it is there.
    #[error("page store unavailable: {0}")]
    Unavailable(String),
    /// The store was closed on purpose by its owner (its branch moved to another timeline, was deleted, or
    /// stopped being served): every later call fails with this. `reason` is written for the SQL client.
    #[error("the page store is closed: {reason}")]
    Closed {
        /// Why, as the owner gave it.
        reason: String,
    },
    /// The store failed for good (a commit whose outcome is unknown, a fenced writer): every later call fails
    /// with this; a new session gets a store restarted from what is durable.
    #[error("the page store has failed: {reason}")]
    Failed {
        /// The first failure.
        reason: String,
    },
}

/// A consistent read point of a store: every commit up to and including `lsn`, and nothing after it.
///
/// Reads at a snapshot see exactly the pages as of that commit whatever commits follow, so a reader never
/// waits for the writer and the writer never waits for readers (snapshot isolation, DESIGN §5). Snapshots of
/// one store are ordered by `lsn`; a store's latest snapshot moves only by its own commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// The end LSN of the last commit included (for a store without a WAL, its commit count).
    pub lsn: Lsn,
    /// The database size in pages at that point.
    pub db_size_pages: u32,
}

/// The pages of one database: read at a [`Snapshot`], committed one transaction at a time.
pub trait PageStore: Send + Sync {
    /// The latest snapshot: every commit so far, including those `commit_dirty` handed over and that are not
    /// durable yet (what is read at it is durable once [`PageStore::wait_durable`] for its LSN returns).
    fn snapshot(&self) -> Result<Snapshot, PageStoreError>;
    /// The page `block` (page number - 1) as of `snapshot`; `None` if beyond the database at that point.
    /// A snapshot older than the store keeps versions for fails with [`PageStoreError::SnapshotTooOld`].
    fn read_page(&self, block: u32, snapshot: &Snapshot) -> Result<Option<Bytes>, PageStoreError>;
    /// Makes one transaction durable: the changed pages (whole 8192-byte pages, block numbers) and the new
    /// database size, atomically (all or nothing), on top of the latest snapshot. Returns the snapshot that
    /// includes it once durable, or fails (then nothing of it is there).
    fn commit(&self, pages: Vec<(u32, Bytes)>, db_size_pages: u32) -> Result<Snapshot, PageStoreError>;

    /// Commits one transaction from the pages the VFS buffered (all below `db_size_pages`), as
    /// [`PageStore::commit`] does, except that a store may return once the transaction is handed over for
    /// good, before it is durable (`RemotePageStore`: early lock release, DESIGN §5): it is durable once
    /// [`PageStore::wait_durable`] for the returned snapshot's LSN returns `Ok`, and later commits build on it
    /// meanwhile. On an error nothing of it is there, or the store failed (then the outcome is unknown). The
    /// default reads them all into memory and calls `commit`; a store that can stream them (`RemotePageStore`)
    /// overrides it so that the transaction's size is bounded by its `transaction_bytes_max`, not by memory.
    fn commit_dirty(&self, pages: &DirtyPages, db_size_pages: u32) -> Result<Snapshot, PageStoreError> {
        let pages = pages
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PageStoreError::Unavailable(e.to_string()))?;
        self.commit(pages, db_size_pages)
    }

    /// Waits until every commit up to the snapshot LSN `lsn` is durable (`Ok` at once if it is; the default,
    /// for stores whose commits are durable when they return). An error means a commit up to `lsn` failed or
    /// its outcome is unknown: the store has failed, and nothing read or written at `lsn` may be reported as
    /// done.
    fn wait_durable(&self, _lsn: Lsn) -> Result<(), PageStoreError> {
        Ok(())
    }

    /// How many bytes of a transaction's pages the VFS keeps in memory before it spills them to a temporary
    /// file.
    fn dirty_memory_bytes_max(&self) -> usize {
        DIRTY_MEMORY_BYTES_MAX_DEFAULT
    }

    /// A hint that `blocks` will be read at `snapshot` soon (a reader reading in order, see
    /// `vfs::readahead`): a store may start fetching them. Best effort: it never fails and changes no result.
    fn prefetch(&self, _blocks: &[u32], _snapshot: &Snapshot) {}

    /// How many pages ahead of a reader reading in order the VFS should hint at with
    /// [`PageStore::prefetch`] (0: none, the default).
    fn prefetch_window_pages(&self) -> u32 {
        0
    }
}

/// Checks a transaction's pages before they are applied: whole pages, all inside the new size.
pub fn validate_commit(pages: &[(u32, Bytes)], db_size_pages: u32) -> Result<(), PageStoreError> {
    for (block, page) in pages {
        if page.len() != PAGE_SIZE_BYTES {
            return Err(PageStoreError::InvalidPage {
                block: *block,
                len_bytes: page.len(),
            });
        }
        if *block >= db_size_pages {
            return Err(PageStoreError::BlockBeyondSize {
                block: *block,
                db_size_pages,
            });
        }
    }
    Ok(())
}

/// How many commits back a [`MemoryPageStore`] keeps page versions for readers: a snapshot older than that
/// reads [`PageStoreError::SnapshotTooOld`]. Bounds the memory history takes to the pages written by that
/// many commits.
pub const MEMORY_HISTORY_COMMITS: u64 = 256;

/// A `PageStore` in memory: the versions of every page for the last [`MEMORY_HISTORY_COMMITS`] commits, under
/// one lock. Snapshot LSNs are commit counts.
#[derive(Debug, Default)]
pub struct MemoryPageStore {
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    /// Block → its versions `(commit number, page)`, oldest first; a page of zeros where the database shrank.
    pages: BTreeMap<u32, Vec<(u64, Bytes)>>,
    /// Commit number → database size after it, for the kept history (and the latest).
    sizes: BTreeMap<u64, u32>,
    commit_count: u64,
}

impl MemoryState {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            lsn: Lsn(self.commit_count),
            db_size_pages: self.sizes.get(&self.commit_count).copied().unwrap_or(0),
        }
    }

    /// The oldest commit whose snapshot can still be read.
    fn oldest_readable(&self) -> u64 {
        self.commit_count.saturating_sub(MEMORY_HISTORY_COMMITS)
    }

    /// Adds `page` as `block`'s version at `commit`, dropping versions no readable snapshot can see.
    fn push_version(&mut self, block: u32, commit: u64, page: Bytes) {
        let oldest = self.oldest_readable();
        let versions = self.pages.entry(block).or_default();
        versions.push((commit, page));
        // A version is needed while the one after it is newer than the oldest readable commit.
        let unneeded = versions.windows(2).take_while(|pair| pair[1].0 <= oldest).count();
        versions.drain(..unneeded);
        assert!(!versions.is_empty(), "block {block} lost its latest version");
    }
}

impl MemoryPageStore {
    /// An empty database (zero pages, no commits).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many transactions have been committed.
    pub fn commit_count(&self) -> u64 {
        self.state.lock().commit_count
    }
}

impl PageStore for MemoryPageStore {
    fn snapshot(&self) -> Result<Snapshot, PageStoreError> {
        Ok(self.state.lock().snapshot())
    }

    fn read_page(&self, block: u32, snapshot: &Snapshot) -> Result<Option<Bytes>, PageStoreError> {
        let state = self.state.lock();
        if snapshot.lsn.0 < state.oldest_readable() || snapshot.lsn.0 > state.commit_count {
            return Err(PageStoreError::SnapshotTooOld {
                snapshot_lsn: snapshot.lsn,
            });
        }
        if block >= snapshot.db_size_pages {
            return Ok(None);
        }
        let page = state
            .pages
            .get(&block)
            .and_then(|versions| versions.iter().rev().find(|(commit, _)| *commit <= snapshot.lsn.0))
            .map_or_else(|| Bytes::from_static(&ZERO_PAGE), |(_, page)| page.clone());
        Ok(Some(page))
    }

    fn commit(&self, pages: Vec<(u32, Bytes)>, db_size_pages: u32) -> Result<Snapshot, PageStoreError> {
        // Validated before anything is applied: all or nothing.
        validate_commit(&pages, db_size_pages)?;
        let mut state = self.state.lock();
        let previous_size_pages = state.snapshot().db_size_pages;
        let commit = state.commit_count + 1;
        state.commit_count = commit;
        for (block, page) in pages {
            state.push_version(block, commit, page);
        }
        // Blocks cut off read as zeros if the database grows again: a zero version hides the old pages.
        let cut: Vec<u32> = state
            .pages
            .range(db_size_pages..previous_size_pages.max(db_size_pages))
            .map(|(block, _)| *block)
            .collect();
        for block in cut {
            state.push_version(block, commit, Bytes::from_static(&ZERO_PAGE));
        }
        state.sizes.insert(commit, db_size_pages);
        let oldest = state.oldest_readable();
        state.sizes = state.sizes.split_off(&oldest);
        Ok(state.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(byte: u8) -> Bytes {
        Bytes::from(vec![byte; PAGE_SIZE_BYTES])
    }

    #[test]
    fn commit_then_read() -> Result<(), PageStoreError> {
        let store = MemoryPageStore::new();
        let empty = store.snapshot()?;
        assert_eq!(store.read_page(0, &empty)?, None);
        let first = store.commit(vec![(0, page(1)), (2, page(3))], 3)?;
        assert_eq!(first, store.snapshot()?);
        assert_eq!(first.db_size_pages, 3);
        assert_eq!(store.read_page(0, &first)?, Some(page(1)));
        assert_eq!(
            store.read_page(1, &first)?,
            Some(page(0)),
            "a block never written reads as zeros"
        );
        assert_eq!(store.read_page(2, &first)?, Some(page(3)));
        assert_eq!(store.read_page(3, &first)?, None);
        assert_eq!(
            store.read_page(0, &empty)?,
            None,
            "the older snapshot still sees nothing"
        );
        assert_eq!(store.commit_count(), 1);
        Ok(())
    }

    #[test]
    fn snapshots_are_stable_across_commits() -> Result<(), PageStoreError> {
        let store = MemoryPageStore::new();
        let first = store.commit(vec![(0, page(1)), (1, page(1))], 2)?;
        let second = store.commit(vec![(0, page(2))], 2)?;
        let third = store.commit(vec![(1, page(3)), (2, page(3))], 3)?;
        assert_eq!(store.read_page(0, &first)?, Some(page(1)));
        assert_eq!(store.read_page(1, &first)?, Some(page(1)));
        assert_eq!(store.read_page(2, &first)?, None);
        assert_eq!(store.read_page(0, &second)?, Some(page(2)));
        assert_eq!(store.read_page(1, &second)?, Some(page(1)));
        assert_eq!(store.read_page(1, &third)?, Some(page(3)));
        assert_eq!(store.read_page(2, &third)?, Some(page(3)));
        Ok(())
    }

    #[test]
    fn shrinking_drops_pages_beyond_the_size() -> Result<(), PageStoreError> {
        let store = MemoryPageStore::new();
        let two = store.commit(vec![(0, page(1)), (1, page(2))], 2)?;
        let one = store.commit(vec![], 1)?;
        assert_eq!(store.read_page(1, &one)?, None);
        let regrown = store.commit(vec![], 2)?;
        assert_eq!(
            store.read_page(1, &regrown)?,
            Some(page(0)),
            "regrown blocks are zeros, not the old page"
        );
        assert_eq!(
            store.read_page(1, &two)?,
            Some(page(2)),
            "history before the shrink stays"
        );
        Ok(())
    }

    #[test]
    fn history_is_bounded_and_too_old_snapshots_fail() -> Result<(), PageStoreError> {
        let store = MemoryPageStore::new();
        let first = store.commit(vec![(0, page(0))], 1)?;
        for i in 0..MEMORY_HISTORY_COMMITS + 10 {
            store.commit(vec![(0, page(i as u8))], 1)?;
        }
        assert_eq!(
            store.read_page(0, &first),
            Err(PageStoreError::SnapshotTooOld {
                snapshot_lsn: first.lsn
            })
        );
        let versions = store.state.lock().pages.get(&0).map_or(0, Vec::len);
        assert!(
            versions as u64 <= MEMORY_HISTORY_COMMITS + 1,
            "{versions} versions kept"
        );
        let latest = store.snapshot()?;
        assert_eq!(
            store.read_page(0, &latest)?,
            Some(page((MEMORY_HISTORY_COMMITS + 9) as u8))
        );
        Ok(())
    }

    #[test]
    fn invalid_commits_apply_nothing() -> Result<(), PageStoreError> {
        let store = MemoryPageStore::new();
        let short = Bytes::from_static(b"short");
        assert_eq!(
            store.commit(vec![(0, page(1)), (1, short)], 2),
            Err(PageStoreError::InvalidPage { block: 1, len_bytes: 5 })
        );
        assert_eq!(
            store.commit(vec![(0, page(1)), (5, page(1))], 2),
            Err(PageStoreError::BlockBeyondSize {
                block: 5,
                db_size_pages: 2
            })
        );
        let snapshot = store.snapshot()?;
        assert_eq!(snapshot.db_size_pages, 0);
        assert_eq!(store.read_page(0, &snapshot)?, None);
        assert_eq!(store.commit_count(), 0);
        Ok(())
    }
}
