//! `PageStore`: what the SQLite VFS reads pages from and commits transactions to.
//!
//! The real implementations (GetPage from the pageserver, commits through the safekeepers) come later;
//! `MemoryPageStore` is a complete in-process one, used by tests and by anyone who wants a database that
//! lives only in memory.

use std::collections::BTreeMap;

use bytes::Bytes;
use parking_lot::Mutex;
use storage::PAGE_SIZE_BYTES;

/// A page of zeros: what a block inside the database that was never written holds.
static ZERO_PAGE: [u8; PAGE_SIZE_BYTES] = [0; PAGE_SIZE_BYTES];

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

/// The pages of one database, read at the store's current read point and committed one transaction at a time.
pub trait PageStore: Send + Sync {
    /// The page `block` (page number - 1) as of the store's current read point; `None` if beyond the database.
    fn read_page(&self, block: u32) -> Result<Option<Bytes>, PageStoreError>;
    /// The database size in pages at the current read point.
    fn db_size_pages(&self) -> Result<u32, PageStoreError>;
    /// Makes one transaction durable: the changed pages (whole 8192-byte pages, block numbers) and the new
    /// database size, atomically (all or nothing). Returns when durable or fails (then nothing of it is there).
    fn commit(&self, pages: Vec<(u32, Bytes)>, db_size_pages: u32) -> Result<(), PageStoreError>;
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

/// A `PageStore` in memory: the latest version of every page, under one lock.
#[derive(Debug, Default)]
pub struct MemoryPageStore {
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    pages: BTreeMap<u32, Bytes>,
    db_size_pages: u32,
    commit_count: u64,
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
    fn read_page(&self, block: u32) -> Result<Option<Bytes>, PageStoreError> {
        let state = self.state.lock();
        if block >= state.db_size_pages {
            return Ok(None);
        }
        let page = state
            .pages
            .get(&block)
            .cloned()
            .unwrap_or_else(|| Bytes::from_static(&ZERO_PAGE));
        Ok(Some(page))
    }

    fn db_size_pages(&self) -> Result<u32, PageStoreError> {
        Ok(self.state.lock().db_size_pages)
    }

    fn commit(&self, pages: Vec<(u32, Bytes)>, db_size_pages: u32) -> Result<(), PageStoreError> {
        // Validated before anything is applied: all or nothing.
        validate_commit(&pages, db_size_pages)?;
        let mut state = self.state.lock();
        state.pages.extend(pages);
        let _beyond = state.pages.split_off(&db_size_pages);
        state.db_size_pages = db_size_pages;
        state.commit_count += 1;
        Ok(())
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
        assert_eq!(store.read_page(0)?, None);
        store.commit(vec![(0, page(1)), (2, page(3))], 3)?;
        assert_eq!(store.db_size_pages()?, 3);
        assert_eq!(store.read_page(0)?, Some(page(1)));
        assert_eq!(
            store.read_page(1)?,
            Some(page(0)),
            "a block never written reads as zeros"
        );
        assert_eq!(store.read_page(2)?, Some(page(3)));
        assert_eq!(store.read_page(3)?, None);
        assert_eq!(store.commit_count(), 1);
        Ok(())
    }

    #[test]
    fn shrinking_drops_pages_beyond_the_size() -> Result<(), PageStoreError> {
        let store = MemoryPageStore::new();
        store.commit(vec![(0, page(1)), (1, page(2))], 2)?;
        store.commit(vec![], 1)?;
        assert_eq!(store.read_page(1)?, None);
        store.commit(vec![], 2)?;
        assert_eq!(
            store.read_page(1)?,
            Some(page(0)),
            "regrown blocks are zeros, not the old page"
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
        assert_eq!(store.db_size_pages()?, 0);
        assert_eq!(store.read_page(0)?, None);
        assert_eq!(store.commit_count(), 0);
        Ok(())
    }
}
