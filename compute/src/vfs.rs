//! The SQLite VFS `cambium`: a main database file that is pages in a `PageStore` (DESIGN §5).
//!
//! A database is registered by name with the `PageStore` that holds it (`register_database`); a connection
//! opened with `open_connection(name)` reads its main file from that store and commits to it:
//!
//! - Reads come from the transaction's own buffer, then `PageStore::read_page`; pages never written read as
//!   zeros, and a read past the end is zero-filled and reported short, as SQLite requires.
//! - Writes (cache spills included) are buffered per transaction; `xSync` turns the buffer into ONE
//!   `PageStore::commit`, so a transaction is either all in the store or not at all. A failed commit fails
//!   the `COMMIT` and drops the buffer. The rollback journal lives in memory (`journal_mode=MEMORY`), so a
//!   `ROLLBACK` writes nothing to the store.
//! - SQLite's lock levels are kept in the process per database: many connections read, one writes, and
//!   readers read the snapshot they took when their read transaction began, so neither waits for the other
//!   (`file`, `lock`). A writer whose snapshot another commit passed is refused (`BusyReason`).
//! - Temporary files and every other file go to SQLite's default VFS; a rollback journal or WAL on disk for
//!   a registered database is refused (it would be a second, unreplicated copy of changes).
//!
//! SQLite keeps only an error's code (`SQLITE_IOERR_*`, "disk I/O error"), so the store error behind a failed
//! main-file operation is noted for the thread that made the SQLite call; the SQL layer takes it right after
//! the call returns an I/O error ([`take_store_error`]) and tells the client why (a closed store's reason).
//! SQLite calls the VFS on the thread that called SQLite, and a connection is used by one thread at a time,
//! so what a thread notes between [`clear_store_error`] and [`take_store_error`] belongs to its connection.
//!
//! The `unsafe` is all in `ffi`; `file` and `lock` are safe code.

mod durability;
mod ffi;
mod file;
mod lock;
mod readahead;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};

use crate::page_store::{PageStore, PageStoreError};
pub use durability::with_deferred_durability;
use lock::LockTable;

/// The name the VFS is registered under with SQLite.
pub const VFS_NAME: &str = "cambium";

/// How long a connection waits for another's lock before `SQLITE_BUSY` reaches the caller.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a database could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VfsError {
    /// The name is already registered.
    #[error("database {0:?} is already registered")]
    AlreadyRegistered(String),
    /// The name cannot be a SQLite main database file name.
    #[error("invalid database name {0:?}: {1}")]
    InvalidName(String, &'static str),
    /// SQLite refused to register the VFS.
    #[error("sqlite3_vfs_register failed with code {0}")]
    Register(i32),
}

/// One registered database: its store and the locks of every connection to it.
pub(crate) struct Database {
    store: Arc<dyn PageStore>,
    locks: Mutex<LockTable>,
    /// The threads waiting in `busy_handler` for the writer's lock, by the handle they wait with. Entered and
    /// read only while `locks` is held, so a waiter is either in it before a release looks or sees the
    /// release itself.
    parked: Mutex<HashMap<u64, std::thread::Thread>>,
}

impl Database {
    /// Wakes the one waiter whose turn the writer's lock now is (the oldest still asking, see `lock`'s
    /// queue), if it waits in `busy_handler`. Waking every waiter for each release cost 7 context switches
    /// per transaction at 8 writing clients, and the one owed the lock queued behind the others for a core.
    /// Called with `locks` held, after the writer's lock was let go.
    fn wake_next_writer(&self, locks: &mut LockTable) {
        if let Some(next) = locks.next_in_line(std::time::Instant::now()) {
            if let Some(thread) = self.parked.lock().get(&next) {
                thread.unpark();
            }
        }
    }
}

/// The longest a waiting connection sleeps before it asks for the writer's lock again: well under
/// [`lock::WAITER_STALE`], so a live waiter keeps its place in the queue.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(20);

/// Registered databases by name.
static DATABASES: LazyLock<Mutex<HashMap<String, Arc<Database>>>> = LazyLock::new(Default::default);

thread_local! {
    /// The store error of the last main-file operation that failed on this thread (see the module doc).
    static LAST_STORE_ERROR: RefCell<Option<PageStoreError>> = const { RefCell::new(None) };
    /// Why the last lock request refused on this thread was refused.
    static LAST_BUSY: RefCell<Option<BusyReason>> = const { RefCell::new(None) };
    /// The database and handle whose writer's lock this thread was last refused, for its busy handler.
    static WAITING_ON: RefCell<Option<(Arc<Database>, u64)>> = const { RefCell::new(None) };
    /// When this thread's current wait for a lock began (the busy handler's first call).
    static BUSY_SINCE: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
}

thread_local! {
    /// Writer's locks taken and not let go by handles on this thread.
    static WRITER_LOCKS_HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Notes that a handle on this thread took (`true`) or let go of (`false`) a database's writer's lock.
pub(crate) fn note_writer_lock(taken: bool) {
    WRITER_LOCKS_HELD.with(|held| {
        held.set(if taken {
            held.get().saturating_add(1)
        } else {
            held.get().saturating_sub(1)
        });
    });
}

/// Whether a handle on this thread holds a database's writer's lock (taken and let go on this thread, as a
/// connection's SQLite calls are: a handle moved between threads may leave this count off, which only changes
/// how a connection waits for its client, `pg::frames`).
pub(crate) fn holds_writer_lock() -> bool {
    WRITER_LOCKS_HELD.with(|held| held.get() > 0)
}

pub(crate) use lock::writers_waiting;

/// Notes that this thread's handle `handle` was refused the writer's lock of `database`.
fn note_waiting(database: &Arc<Database>, handle: u64) {
    WAITING_ON.with(|waiting| *waiting.borrow_mut() = Some((database.clone(), handle)));
}

/// The busy handler of every connection the VFS serves (installed by [`open_connection`]; SQLite calls it
/// with the number of times it already called it for this wait): waits, at most [`WAIT_SLICE`] at a time,
/// until the writer's lock is free for this connection's turn (see `lock`'s queue), then has SQLite ask
/// again; gives up after [`BUSY_TIMEOUT`] in all. A refusal for another reason (a stale snapshot, which
/// SQLite answers by taking a new one) is retried at once.
pub(crate) fn busy_handler(calls: i32) -> bool {
    let now = std::time::Instant::now();
    let since = BUSY_SINCE.with(|since| {
        if calls == 0 || since.get().is_none() {
            since.set(Some(now));
        }
        since.get().unwrap_or(now)
    });
    let remaining = BUSY_TIMEOUT.saturating_sub(now.saturating_duration_since(since));
    if remaining.is_zero() {
        return false;
    }
    match WAITING_ON.with(|waiting| waiting.borrow_mut().take()) {
        Some((database, handle)) => {
            let mut locks = database.locks.lock();
            if locks.blocks(handle, now) {
                database.parked.lock().insert(handle, std::thread::current());
                drop(locks);
                // Woken by `wake_next_writer` when the lock is this handle's, else asks again after a
                // slice (a spurious wake-up only makes SQLite ask again).
                std::thread::park_timeout(WAIT_SLICE.min(remaining));
                database.parked.lock().remove(&handle);
            }
        }
        // Not refused for the writer's lock: a few immediate retries, then brief sleeps, so a refusal that
        // repeats cannot spin.
        None if calls < 3 => {}
        None => std::thread::sleep(Duration::from_millis(1).min(remaining)),
    }
    true
}

/// Why a lock request was refused with `SQLITE_BUSY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyReason {
    /// Another connection is writing the database (holds the writer's lock).
    Writer,
    /// This connection's snapshot was passed by another writer's commit: it cannot write on top of what it
    /// read, and its transaction must start again (PostgreSQL's serialization failure).
    StaleSnapshot,
}

/// Notes why a lock request of this thread was refused.
fn note_busy(reason: BusyReason) {
    LAST_BUSY.with(|last| *last.borrow_mut() = Some(reason));
}

/// Why the last lock request refused on this thread since [`clear_store_error`] was refused, taken.
pub(crate) fn take_busy_reason() -> Option<BusyReason> {
    LAST_BUSY.with(|last| last.borrow_mut().take())
}

/// Notes the store error behind a failed main-file operation for this thread's SQL layer.
fn note_store_error(error: &file::FileError) {
    if let file::FileError::Store(error) = error {
        LAST_STORE_ERROR.with(|last| *last.borrow_mut() = Some(error.clone()));
    }
}

/// Forgets the store error noted on this thread: call it before a SQLite call whose I/O errors are to be
/// explained with [`take_store_error`].
pub(crate) fn clear_store_error() {
    LAST_STORE_ERROR.with(|last| last.borrow_mut().take());
    LAST_BUSY.with(|last| last.borrow_mut().take());
    WAITING_ON.with(|waiting| waiting.borrow_mut().take());
}

/// The store error of the last main-file operation that failed on this thread since [`clear_store_error`],
/// taken: why SQLite reported an I/O error.
pub(crate) fn take_store_error() -> Option<PageStoreError> {
    LAST_STORE_ERROR.with(|last| last.borrow_mut().take())
}

/// The latest commit LSN of the store behind `conn` (a connection [`open_connection`] opened), which moves
/// with every commit to its database by any connection; `None` if the store cannot say (it failed).
pub(crate) fn latest_commit(conn: &Connection) -> Option<u64> {
    ffi::latest_commit(conn)
}

/// Registers `name` as a database held by `store`, so `open_connection(name)` serves it. Registers the VFS
/// with SQLite on first use.
pub fn register_database(name: &str, store: Arc<dyn PageStore>) -> Result<(), VfsError> {
    validate_name(name)?;
    ffi::register_vfs()?;
    let mut databases = DATABASES.lock();
    if databases.contains_key(name) {
        return Err(VfsError::AlreadyRegistered(name.to_owned()));
    }
    let database = Database {
        store,
        locks: Mutex::new(LockTable::default()),
        parked: Mutex::new(HashMap::new()),
    };
    databases.insert(name.to_owned(), Arc::new(database));
    Ok(())
}

/// Removes `name` from the registry; connections already open keep their store. Returns whether it was there.
pub fn unregister_database(name: &str) -> bool {
    DATABASES.lock().remove(name).is_some()
}

/// Removes `name` from the registry if no connection has it open (checked and removed under the registry's
/// lock, which every open takes, so no open can slip in between). Returns whether it was removed.
pub fn unregister_if_unused(name: &str) -> bool {
    let mut databases = DATABASES.lock();
    match databases.get(name) {
        // The registry's own reference is the only one: no open file holds the database.
        Some(database) if Arc::strong_count(database) == 1 => databases.remove(name).is_some(),
        _ => false,
    }
}

/// Whether `name` is registered and no connection has it open (a snapshot: an open may follow at once; see
/// [`unregister_if_unused`] for the atomic form).
pub fn is_unused(name: &str) -> bool {
    DATABASES
        .lock()
        .get(name)
        .is_some_and(|database| Arc::strong_count(database) == 1)
}

/// Whether `name` is a registered database (`open_connection` on any other name would reach SQLite's default
/// VFS, a local file).
pub fn is_registered(name: &str) -> bool {
    database(name).is_some()
}

/// The registered database `name`, if any.
fn database(name: &str) -> Option<Arc<Database>> {
    DATABASES.lock().get(name).cloned()
}

/// The names SQLite derives from a main file name for a rollback journal or a WAL, if `name` is one of
/// those of a registered database.
fn is_journal_of_registered(name: &str) -> bool {
    ["-journal", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| name.strip_suffix(suffix))
        .any(|main| database(main).is_some())
}

fn validate_name(name: &str) -> Result<(), VfsError> {
    let invalid = |reason| Err(VfsError::InvalidName(name.to_owned(), reason));
    if name.is_empty() || name.starts_with(':') {
        return invalid("empty names and ':memory:' are SQLite's temporary databases");
    }
    if name.contains('\0') {
        return invalid("contains a NUL byte");
    }
    if name.starts_with("file:") {
        return invalid("URI file names are not used");
    }
    Ok(())
}

/// Opens a connection to the registered database `database` through the VFS, with the pragmas it relies on:
///
/// - `page_size=8192`: the store's page size; set before the first write, a no-op on an existing database.
/// - `journal_mode=MEMORY`: the rollback journal never leaves the process; atomicity comes from the store
///   committing a transaction's pages all or nothing, so a journal on disk would protect nothing.
/// - `synchronous=FULL`: `xSync` of the main file is the commit point, so it must never be skipped (`OFF`
///   skips it). With the journal in memory `FULL` costs nothing over `NORMAL` (their difference is journal
///   syncs), and it states the intent.
/// - `locking_mode=NORMAL` (the default): locks are released after each transaction so other connections to
///   the same database in the process can read and write; plus [`busy_handler`], which waits up to
///   `BUSY_TIMEOUT` for the writer's lock, writers served in the order they asked.
pub fn open_connection(database: &str) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_EXRESCODE;
    let connection = Connection::open_with_flags_and_vfs(database, flags, VFS_NAME)?;
    connection.busy_handler(Some(busy_handler))?;
    connection.pragma_update(None, "page_size", 8192)?;
    let mode: String = connection.pragma_update_and_check(None, "journal_mode", "MEMORY", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("memory") {
        let code = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR);
        return Err(rusqlite::Error::SqliteFailure(
            code,
            Some(format!("journal_mode is {mode}, not memory")),
        ));
    }
    connection.pragma_update(None, "synchronous", "FULL")?;
    let _locking_mode: String = connection.pragma_update_and_check(None, "locking_mode", "NORMAL", |row| row.get(0))?;
    Ok(connection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_store::MemoryPageStore;

    /// A connection's thread holds the writer's lock from its transaction's first write to its end (commit or
    /// rollback), and no other thread does: what `pg::frames` watches the client by.
    #[test]
    fn a_thread_holds_the_writer_lock_from_its_first_write_to_its_end() -> Result<(), Box<dyn std::error::Error>> {
        register_database("writer_lock_held", Arc::new(MemoryPageStore::new()))?;
        let connection = open_connection("writer_lock_held")?;
        connection.execute_batch("CREATE TABLE t(x)")?;
        assert!(!holds_writer_lock(), "an autocommit statement lets it go");
        connection.execute_batch("BEGIN; SELECT count(*) FROM t")?;
        assert!(!holds_writer_lock(), "a read takes no writer's lock");
        connection.execute_batch("INSERT INTO t VALUES (1)")?;
        assert!(holds_writer_lock(), "from the first write");
        let elsewhere = std::thread::spawn(holds_writer_lock).join().expect("thread");
        assert!(!elsewhere, "only on the connection's thread");
        connection.execute_batch("COMMIT")?;
        assert!(!holds_writer_lock(), "the commit lets it go");
        connection.execute_batch("BEGIN; INSERT INTO t VALUES (2)")?;
        assert!(holds_writer_lock());
        connection.execute_batch("ROLLBACK")?;
        assert!(!holds_writer_lock(), "so does a rollback");
        connection.execute_batch("BEGIN; INSERT INTO t VALUES (3)")?;
        drop(connection);
        assert!(!holds_writer_lock(), "and closing the connection");
        unregister_database("writer_lock_held");
        Ok(())
    }
}
