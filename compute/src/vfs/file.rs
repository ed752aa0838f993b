//! `MainFile`: the main database file of one SQLite connection, as pages in a `PageStore`. Safe code; the
//! callbacks in `ffi` only translate pointers and codes.
//!
//! Reads come from the transaction's buffer, then the store at the handle's snapshot; writes (cache spills
//! included) go to the buffer; `sync` turns the buffer into one `PageStore::commit`.
//!
//! **Snapshots.** A handle takes the store's latest snapshot when it takes SHARED (the start of SQLite's read
//! transaction) and reads every page at it until it lets SHARED go, so other connections' commits never change
//! what it sees and it never waits for them. To write, it must hold RESERVED (one writer per database, see
//! `lock`) *and* its snapshot must still be the latest: a handle whose snapshot another writer's commit has
//! passed is refused ([`BusyReason::StaleSnapshot`]; its transaction must start again, SQLSTATE 40001), since
//! its writes were computed from pages that are no longer current. Once it holds RESERVED nobody else commits,
//! so its snapshot stays the latest until its own commit, which becomes its new snapshot.
//!
//! **Commits in flight.** A store may return from a commit once it is handed over and include it in its latest
//! snapshot before it is durable (early lock release, `remote_store`): each snapshot taken and each commit is
//! given to `durability`, which has the caller wait for it now or, in a pg session's deferred call, before the
//! call answers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use cambium_types::PAGE_SIZE_BYTES;

use super::durability::{self, Dependency};
use super::lock::{Busy, LockLevel};
use super::readahead::ReadAhead;
use super::{BusyReason, Database};
use crate::dirty_pages::{DirtyPages, SpillError};
use crate::page_store::{PageStoreError, Snapshot};

/// `PAGE_SIZE_BYTES` as the `u64` file offsets are counted in.
const PAGE_SIZE_U64: u64 = PAGE_SIZE_BYTES as u64;

/// Gives every open main file its own lock handle.
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

/// Why an operation on the main file failed; `ffi` maps each to a `SQLITE_IOERR_*` code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] PageStoreError),
    /// SQLite asked for something this file does not do (a write that is not one whole aligned page, …).
    #[error("unsupported access: {0}")]
    Unsupported(String),
}

/// Why a lock request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Refused for now (SQLite's `SQLITE_BUSY`).
    #[error("busy: {0:?}")]
    Busy(BusyReason),
    /// The store could not give a snapshot.
    #[error(transparent)]
    File(#[from] FileError),
}

/// Whether a read found all the bytes it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    /// Every byte was inside the file.
    Full,
    /// The read went past the end of the file; the bytes beyond it are zeros.
    Short,
}

/// The main database file of one connection.
pub(crate) struct MainFile {
    database: Arc<Database>,
    handle: u64,
    lock_level: LockLevel,
    /// Pages written in the current transaction, by block: in memory up to the store's bound, then in a
    /// temporary file (reads of the transaction see them either way).
    dirty: DirtyPages,
    /// The database size in pages once the buffered writes and truncations are committed; `None` when the
    /// transaction has not changed it.
    pending_size_pages: Option<u32>,
    /// A commit failed and the writer's lock is still held: SQLite is rolling back, replaying the old pages
    /// from its journal, which is exactly what the store still holds. Those writes and their sync are
    /// discarded, so a failed commit is not followed by a second, redundant one.
    rolling_back_failed_commit: bool,
    /// The snapshot this handle reads at while it holds SHARED or above (see the module doc).
    snapshot: Option<Snapshot>,
    /// What this connection is likely to read next, hinted to the store (`PageStore::prefetch`).
    readahead: ReadAhead,
}

impl MainFile {
    pub(crate) fn new(database: Arc<Database>) -> Self {
        let dirty = DirtyPages::new(database.store.dirty_memory_bytes_max());
        let readahead = ReadAhead::new(database.store.prefetch_window_pages());
        Self {
            readahead,
            database,
            handle: NEXT_HANDLE.fetch_add(1, Ordering::Relaxed),
            lock_level: LockLevel::None,
            dirty,
            pending_size_pages: None,
            rolling_back_failed_commit: false,
            snapshot: None,
        }
    }

    /// The snapshot reads are at: the handle's own while it holds a lock, else the latest (SQLite reads the
    /// header once before it locks, at open).
    fn read_snapshot(&self) -> Result<Snapshot, FileError> {
        match self.snapshot {
            Some(snapshot) => Ok(snapshot),
            None => Ok(self.database.store.snapshot()?),
        }
    }

    /// The database size in pages this connection sees, buffered growth and truncation included.
    fn size_pages(&self) -> Result<u32, FileError> {
        match self.pending_size_pages {
            Some(size_pages) => Ok(size_pages),
            None => Ok(self.read_snapshot()?.db_size_pages),
        }
    }

    /// The file size in bytes.
    pub(crate) fn size_bytes(&self) -> Result<u64, FileError> {
        Ok(u64::from(self.size_pages()?) * PAGE_SIZE_U64)
    }

    /// Fills `buf` from `offset`; bytes beyond the file (or in a page never written) are zeros.
    pub(crate) fn read(&mut self, buf: &mut [u8], offset: u64) -> Result<ReadOutcome, FileError> {
        let size_bytes = self.size_bytes()?;
        let mut done = 0;
        while done < buf.len() {
            let position = offset + done as u64;
            let in_page = (position % PAGE_SIZE_U64) as usize;
            let len = (PAGE_SIZE_BYTES - in_page).min(buf.len() - done);
            let target = &mut buf[done..done + len];
            match self.page(position / PAGE_SIZE_U64)? {
                Some(page) => target.copy_from_slice(&page[in_page..in_page + len]),
                None => target.fill(0),
            }
            done += len;
        }
        let end = offset + buf.len() as u64;
        if end > size_bytes {
            // SQLite requires the bytes past the end to be zeros on a short read, whatever a page held.
            let inside = size_bytes.saturating_sub(offset) as usize;
            buf[inside..].fill(0);
            return Ok(ReadOutcome::Short);
        }
        Ok(ReadOutcome::Full)
    }

    /// The page at `page_index`, from the buffer or the store; `None` if there is none. A page from the store
    /// may hint the store at the pages to read next.
    fn page(&mut self, page_index: u64) -> Result<Option<Bytes>, FileError> {
        let Ok(block) = u32::try_from(page_index) else {
            return Ok(None);
        };
        if let Some(page) = self.dirty.get(block).map_err(spill_failed)? {
            return Ok(Some(page));
        }
        if self.pending_size_pages.is_some_and(|size_pages| block >= size_pages) {
            // Truncated away in this transaction.
            return Ok(None);
        }
        let snapshot = self.read_snapshot()?;
        let page = self.database.store.read_page(block, &snapshot)?;
        // Bytes from the store are checked after they are read, as before they were written.
        if let Some(len_bytes) = page.as_ref().map(Bytes::len).filter(|len| *len != PAGE_SIZE_BYTES) {
            return Err(PageStoreError::InvalidPage { block, len_bytes }.into());
        }
        if let Some(page) = &page {
            let ahead = self.readahead.observe(block, page);
            if !ahead.is_empty() {
                self.database.store.prefetch(&ahead, &snapshot);
            }
        }
        Ok(page)
    }

    /// Buffers one whole page written at a page-aligned `offset`.
    pub(crate) fn write(&mut self, data: &[u8], offset: u64) -> Result<(), FileError> {
        if data.len() != PAGE_SIZE_BYTES || offset % PAGE_SIZE_U64 != 0 {
            return Err(FileError::Unsupported(format!(
                "write of {} bytes at offset {offset}: only whole {PAGE_SIZE_BYTES}-byte pages (PRAGMA page_size)",
                data.len()
            )));
        }
        let block = u32::try_from(offset / PAGE_SIZE_U64)
            .map_err(|_| FileError::Unsupported(format!("write at offset {offset} is beyond u32 pages")))?;
        if self.rolling_back_failed_commit {
            return Ok(());
        }
        let size_pages = self.size_pages()?;
        self.pending_size_pages = Some(size_pages.max(block + 1));
        self.dirty.insert(block, data).map_err(spill_failed)?;
        Ok(())
    }

    /// Shrinks (or grows) the pending size to `size_bytes`, a whole number of pages.
    pub(crate) fn truncate(&mut self, size_bytes: u64) -> Result<(), FileError> {
        if size_bytes % PAGE_SIZE_U64 != 0 {
            return Err(FileError::Unsupported(format!(
                "truncate to {size_bytes} bytes: not whole pages"
            )));
        }
        let size_pages = u32::try_from(size_bytes / PAGE_SIZE_U64)
            .map_err(|_| FileError::Unsupported(format!("truncate to {size_bytes} bytes: beyond u32 pages")))?;
        if self.rolling_back_failed_commit {
            return Ok(());
        }
        let in_transaction = self.pending_size_pages.is_some() || !self.dirty.is_empty();
        if !in_transaction && size_pages == self.read_snapshot()?.db_size_pages {
            // SQLite truncates after the commit's sync when the database shrank; the commit already took the
            // size from the database header (see `sync`).
            return Ok(());
        }
        self.dirty.truncate(size_pages);
        self.pending_size_pages = Some(size_pages);
        Ok(())
    }

    /// Commits the buffered transaction as one `PageStore::commit`. On failure the buffer is dropped: nothing
    /// of the transaction is anywhere.
    pub(crate) fn sync(&mut self) -> Result<(), FileError> {
        let memory_bytes_max = self.database.store.dirty_memory_bytes_max();
        let mut dirty = std::mem::replace(&mut self.dirty, DirtyPages::new(memory_bytes_max));
        let Some(pending_size_pages) = self.pending_size_pages.take() else {
            assert!(dirty.is_empty(), "{} dirty pages but no pending size", dirty.len());
            return Ok(());
        };
        // When the database shrinks, SQLite truncates the file only after this sync; the header it wrote on
        // page 1 already holds the new size, so the commit takes it from there.
        let size_pages = match dirty.get(0) {
            Ok(page) => page
                .and_then(|page| header_size_pages(&page))
                .unwrap_or(pending_size_pages),
            Err(error) => {
                self.rolling_back_failed_commit = true;
                return Err(spill_failed(error));
            }
        };
        dirty.truncate(size_pages);
        tracing::debug!(
            pages = dirty.len(),
            spilled_bytes = dirty.spilled_bytes(),
            size_pages,
            "committing a transaction"
        );
        let started = std::time::Instant::now();
        let committed = self
            .database
            .store
            .commit_dirty(&dirty, size_pages)
            .and_then(|snapshot| {
                // Handed over: durable at the end of a deferred call (`durability`), else now.
                durability::depend_on(self.handle, &self.database.store, snapshot.lsn, Dependency::Commit)
                    .map(|()| snapshot)
            });
        crate::metrics::METRICS.record_commit_sync(started.elapsed());
        match committed {
            Ok(snapshot) => {
                // The writer's own commit is the latest: its next reads see it.
                assert!(
                    self.lock_level >= LockLevel::Reserved,
                    "commit without the writer's lock"
                );
                self.snapshot = Some(snapshot);
                Ok(())
            }
            Err(error) => {
                self.rolling_back_failed_commit = true;
                Err(error.into())
            }
        }
    }

    /// Raises this handle's lock to `wanted`: SHARED takes the latest snapshot; RESERVED and above also need
    /// that snapshot to still be the latest (see the module doc).
    pub(crate) fn lock(&mut self, wanted: LockLevel) -> Result<(), LockError> {
        if self.lock_level == LockLevel::None && wanted >= LockLevel::Shared {
            // Taken before the lock: a commit between the two is invisible to this handle, which is the same
            // as this handle having locked just before it.
            let snapshot = self.database.store.snapshot().map_err(FileError::from)?;
            // The snapshot may hold commits in flight: nothing read at it leaves before they are durable.
            durability::depend_on(self.handle, &self.database.store, snapshot.lsn, Dependency::Read)
                .map_err(FileError::from)?;
            let (level, result) = self
                .database
                .locks
                .lock()
                .lock(self.handle, LockLevel::None, LockLevel::Shared);
            assert!(result.is_ok() && level == LockLevel::Shared, "SHARED is never refused");
            self.lock_level = level;
            self.snapshot = Some(snapshot);
        }
        let was_writer = self.lock_level >= LockLevel::Reserved;
        let mut locks = self.database.locks.lock();
        let (level, result) = locks.lock(self.handle, self.lock_level, wanted);
        self.lock_level = level;
        if let Err(Busy) = result {
            drop(locks);
            // The connection's busy handler waits on this database for the lock (see `vfs::busy_handler`).
            super::note_waiting(&self.database, self.handle);
            return Err(LockError::Busy(BusyReason::Writer));
        }
        if !was_writer && level >= LockLevel::Reserved {
            // The writer's lock is held: nobody else commits now, so "latest" cannot move under this check.
            let latest = self.database.store.snapshot().map_err(FileError::from);
            let stale = match (&latest, &self.snapshot) {
                (Ok(latest), Some(own)) => latest.lsn != own.lsn,
                (Ok(_), None) => unreachable!("a handle at SHARED or above has a snapshot"),
                (Err(_), _) => false,
            };
            if stale || latest.is_err() {
                self.lock_level = locks.unlock(self.handle, level, LockLevel::Shared);
                self.database.wake_next_writer(&mut locks);
                drop(locks);
                latest?;
                return Err(LockError::Busy(BusyReason::StaleSnapshot));
            }
            // The writer's transaction answers for what it read at its end (`durability`).
            durability::forgive(self.handle);
            super::note_writer_lock(true);
        }
        Ok(())
    }

    /// Lowers this handle's lock to `wanted`. Leaving the writer's levels without a sync abandons the buffer.
    pub(crate) fn unlock(&mut self, wanted: LockLevel) {
        if wanted < LockLevel::Reserved && (!self.dirty.is_empty() || self.pending_size_pages.is_some()) {
            // SQLite syncs before it unlocks unless `synchronous=OFF`; with that, writes are lost, loudly.
            tracing::error!(
                pages = self.dirty.len(),
                "unlock without sync: dropping the uncommitted writes"
            );
            self.dirty.clear();
            self.pending_size_pages = None;
        }
        if wanted < LockLevel::Reserved {
            self.rolling_back_failed_commit = false;
        }
        let was_writer = self.lock_level >= LockLevel::Reserved;
        let mut locks = self.database.locks.lock();
        self.lock_level = locks.unlock(self.handle, self.lock_level, wanted);
        let released = was_writer && self.lock_level < LockLevel::Reserved;
        if released {
            self.database.wake_next_writer(&mut locks);
            super::note_writer_lock(false);
        }
        drop(locks);
        if released {
            // A write transaction ended: committed (its commit is noted already) or not, what it read
            // depends on its snapshot.
            if let Some(snapshot) = self.snapshot {
                durability::note(self.handle, &self.database.store, snapshot.lsn, Dependency::Read);
            }
        }
        if self.lock_level == LockLevel::None {
            self.snapshot = None;
        }
    }

    /// The store's latest commit LSN (commits handed over included).
    pub(crate) fn latest_commit(&self) -> Result<cambium_types::Lsn, PageStoreError> {
        Ok(self.database.store.snapshot()?.lsn)
    }

    /// Whether any connection to this database holds RESERVED or above.
    pub(crate) fn is_reserved(&self) -> bool {
        self.database.locks.lock().is_reserved()
    }
}

/// A failure of the transaction's spill file, as the store error the SQL layer reports.
fn spill_failed(error: SpillError) -> FileError {
    FileError::Store(PageStoreError::Unavailable(error.to_string()))
}

/// The database size in pages that a SQLite header (page 1) records, if it is valid: SQLite trusts it only
/// when the "version valid for" number equals the change counter, and so do we.
fn header_size_pages(page: &[u8]) -> Option<u32> {
    let be_u32 = |offset: usize| {
        let bytes = page.get(offset..offset + 4)?;
        Some(u32::from_be_bytes(bytes.try_into().ok()?))
    };
    let change_counter = be_u32(24)?;
    let size_pages = be_u32(28)?;
    let version_valid_for = be_u32(92)?;
    (size_pages > 0 && version_valid_for == change_counter).then_some(size_pages)
}

impl Drop for MainFile {
    fn drop(&mut self) {
        if self.lock_level > LockLevel::None {
            self.unlock(LockLevel::None);
        }
        self.database.locks.lock().forget(self.handle);
    }
}
