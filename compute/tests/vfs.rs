//! The `cambium` SQLite VFS over a `MemoryPageStore`: SQL through `open_connection` ends up as pages in the
//! store, one `PageStore::commit` per committed transaction and none for a rolled-back one; data read back
//! through a new connection comes from the store, not SQLite's cache; a failing commit fails the `COMMIT`
//! and leaves the data as before; connections to one database lock each other as SQLite expects.
//!
//! Each test registers its own database name (the registry is process-wide) and counts commits through a
//! wrapper store that can be told to fail the next commit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use compute::page_store::{MemoryPageStore, PageStore, PageStoreError, Snapshot};
use compute::vfs::{open_connection, register_database, unregister_database, VfsError};
use rusqlite::{params, Connection, ErrorCode};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A `MemoryPageStore` that counts commit attempts and fails the next one on demand.
#[derive(Default)]
struct TestStore {
    inner: MemoryPageStore,
    fail_next_commit: AtomicBool,
    attempts: AtomicU64,
}

impl TestStore {
    fn commits(&self) -> u64 {
        self.inner.commit_count()
    }
}

impl PageStore for TestStore {
    fn read_page(&self, block: u32, snapshot: &Snapshot) -> Result<Option<Bytes>, PageStoreError> {
        self.inner.read_page(block, snapshot)
    }

    fn snapshot(&self) -> Result<Snapshot, PageStoreError> {
        self.inner.snapshot()
    }

    fn commit(&self, pages: Vec<(u32, Bytes)>, db_size_pages: u32) -> Result<Snapshot, PageStoreError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.fail_next_commit.swap(false, Ordering::SeqCst) {
            return Err(PageStoreError::Unavailable("injected failure".to_owned()));
        }
        self.inner.commit(pages, db_size_pages)
    }
}

fn register(name: &str) -> Result<Arc<TestStore>, VfsError> {
    let store = Arc::new(TestStore::default());
    register_database(name, store.clone())?;
    Ok(store)
}

fn count(connection: &Connection, table: &str) -> rusqlite::Result<i64> {
    connection.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| row.get(0))
}

#[test]
fn each_committed_statement_is_one_commit() -> TestResult {
    let store = register("crud")?;
    let connection = open_connection("crud")?;
    assert_eq!(store.commits(), 0, "opening and the pragmas write nothing");

    connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)", [])?;
    assert_eq!(store.commits(), 1);
    let page_size: i64 = connection.query_row("PRAGMA page_size", [], |row| row.get(0))?;
    assert_eq!(page_size, 8192);
    let page_count: u32 = connection.query_row("PRAGMA page_count", [], |row| row.get(0))?;
    assert_eq!(store.snapshot()?.db_size_pages, page_count);

    connection.execute(
        "INSERT INTO t (id, name) VALUES (1, 'one'), (2, 'two'), (3, 'three')",
        [],
    )?;
    assert_eq!(store.commits(), 2);
    connection.execute("UPDATE t SET name = 'TWO' WHERE id = 2", [])?;
    assert_eq!(store.commits(), 3);
    connection.execute("DELETE FROM t WHERE id = 3", [])?;
    assert_eq!(store.commits(), 4);

    connection.execute_batch("BEGIN; INSERT INTO t VALUES (4, 'four'); INSERT INTO t VALUES (5, 'five'); COMMIT;")?;
    assert_eq!(store.commits(), 5, "a multi-statement transaction is one commit");
    assert_eq!(store.attempts.load(Ordering::SeqCst), 5);

    let reader = open_connection("crud")?;
    let mut statement = reader.prepare("SELECT id, name FROM t ORDER BY id")?;
    let rows: Vec<(i64, String)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let expected = [(1, "one"), (2, "TWO"), (4, "four"), (5, "five")];
    assert_eq!(rows, expected.map(|(id, name)| (id, name.to_owned())));
    Ok(())
}

#[test]
fn rollback_commits_nothing() -> TestResult {
    let store = register("rollback")?;
    let connection = open_connection("rollback")?;
    connection.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")?;
    let commits = store.commits();

    connection.execute_batch("BEGIN; INSERT INTO t VALUES (2); UPDATE t SET x = 10 WHERE x = 1; ROLLBACK;")?;
    assert_eq!(store.commits(), commits, "a rolled-back transaction leaves no commit");
    assert_eq!(store.attempts.load(Ordering::SeqCst), commits);
    let sum: i64 = connection.query_row("SELECT sum(x) FROM t", [], |row| row.get(0))?;
    assert_eq!(sum, 1);
    let sum: i64 = open_connection("rollback")?.query_row("SELECT sum(x) FROM t", [], |row| row.get(0))?;
    assert_eq!(sum, 1);
    Ok(())
}

#[test]
fn a_big_row_spans_pages() -> TestResult {
    let store = register("big_row")?;
    let connection = open_connection("big_row")?;
    connection.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL)", [])?;
    let data: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(31) % 251) as u8).collect();
    connection.execute("INSERT INTO blobs (id, data) VALUES (1, ?1)", params![data])?;
    assert_eq!(store.commits(), 2);
    assert!(
        store.snapshot()?.db_size_pages > 200_000 / 8192,
        "overflow pages are in the store"
    );

    let reader = open_connection("big_row")?;
    let read: Vec<u8> = reader.query_row("SELECT data FROM blobs WHERE id = 1", [], |row| row.get(0))?;
    assert_eq!(read, data);
    Ok(())
}

/// 8000 rows of ~300 bytes is ~2.4 MB against a page cache of 16 pages (128 KiB): SQLite spills dirty
/// pages to the main file mid-transaction, and they must all land in the one commit.
#[test]
fn a_table_much_larger_than_the_page_cache() -> TestResult {
    let store = register("large")?;
    let connection = open_connection("large")?;
    connection.execute_batch("PRAGMA cache_size = 16; CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT);")?;
    let commits = store.commits();

    let transaction = connection.unchecked_transaction()?;
    {
        let mut insert = transaction.prepare("INSERT INTO t (id, payload) VALUES (?1, ?2)")?;
        for id in 0..8000i64 {
            insert.execute(params![id, format!("{id:0>300}")])?;
        }
    }
    transaction.commit()?;
    assert_eq!(
        store.commits(),
        commits + 1,
        "a spilling transaction is still one commit"
    );
    assert!(
        store.snapshot()?.db_size_pages > 250,
        "{} pages",
        store.snapshot()?.db_size_pages
    );

    let reader = open_connection("large")?;
    reader.execute_batch("PRAGMA cache_size = 16;")?;
    assert_eq!(count(&reader, "t")?, 8000);
    let payload: String = reader.query_row("SELECT payload FROM t WHERE id = 4321", [], |row| row.get(0))?;
    assert_eq!(payload, format!("{:0>300}", 4321));
    let integrity: String = reader.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
    assert_eq!(integrity, "ok");

    // A spilling transaction rolled back leaves the data as it was.
    connection
        .execute_batch("BEGIN; UPDATE t SET payload = 'x' || payload; DELETE FROM t WHERE id % 2 = 0; ROLLBACK;")?;
    assert_eq!(count(&reader, "t")?, 8000);
    let payload: String = reader.query_row("SELECT payload FROM t WHERE id = 4321", [], |row| row.get(0))?;
    assert_eq!(payload, format!("{:0>300}", 4321));

    // Deleting most of it and vacuuming shrinks the database in the same commit (the size from the header).
    let size_before = store.snapshot()?.db_size_pages;
    connection.execute_batch("DELETE FROM t WHERE id >= 100; VACUUM;")?;
    assert!(
        store.snapshot()?.db_size_pages < size_before / 10,
        "{} pages",
        store.snapshot()?.db_size_pages
    );
    let reader = open_connection("large")?;
    assert_eq!(count(&reader, "t")?, 100);
    let integrity: String = reader.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
    assert_eq!(integrity, "ok");
    Ok(())
}

#[test]
fn a_failed_commit_fails_the_transaction_and_changes_nothing() -> TestResult {
    let store = register("failing")?;
    let connection = open_connection("failing")?;
    connection.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")?;
    let commits = store.commits();

    store.fail_next_commit.store(true, Ordering::SeqCst);
    let error = connection.execute("INSERT INTO t VALUES (2)", []).err();
    assert_eq!(
        error.and_then(|e| e.sqlite_error_code()),
        Some(ErrorCode::SystemIoFailure)
    );
    assert_eq!(store.commits(), commits);
    assert_eq!(
        count(&connection, "t")?,
        1,
        "the same connection sees the data as before"
    );
    assert_eq!(count(&open_connection("failing")?, "t")?, 1, "so does a new one");

    // A failed explicit COMMIT of a spilling transaction, then the connection carries on.
    connection.execute_batch("PRAGMA cache_size = 16; BEGIN;")?;
    for x in 0..2000 {
        connection.execute("INSERT INTO t VALUES (?1)", params![x])?;
    }
    store.fail_next_commit.store(true, Ordering::SeqCst);
    assert!(connection.execute_batch("COMMIT").is_err());
    assert!(connection.is_autocommit(), "SQLite rolled the transaction back");
    assert_eq!(count(&open_connection("failing")?, "t")?, 1);
    assert_eq!(count(&connection, "t")?, 1);
    connection.execute("INSERT INTO t VALUES (3)", [])?;
    assert_eq!(count(&open_connection("failing")?, "t")?, 2);
    let integrity: String = connection.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
    assert_eq!(integrity, "ok");
    Ok(())
}

#[test]
fn a_reader_and_a_writer() -> TestResult {
    let store = register("two")?;
    let writer = open_connection("two")?;
    writer.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")?;
    let reader = open_connection("two")?;
    let other = open_connection("two")?;

    // The writer's open transaction (RESERVED) does not stop the reader, who sees the committed state.
    writer.execute_batch("BEGIN; INSERT INTO t VALUES (2);")?;
    assert_eq!(count(&reader, "t")?, 1);
    writer.execute_batch("COMMIT")?;
    assert_eq!(count(&reader, "t")?, 2);

    // A reader inside a read transaction does not keep the writer out: it reads its snapshot throughout.
    writer.busy_timeout(Duration::from_millis(50))?;
    reader.execute_batch("BEGIN")?;
    assert_eq!(count(&reader, "t")?, 2);
    writer.execute_batch("BEGIN; INSERT INTO t VALUES (3);")?;
    writer.execute_batch("COMMIT")?;
    assert_eq!(count(&reader, "t")?, 2, "the reader's snapshot holds");
    assert_eq!(count(&other, "t")?, 3, "a new read transaction sees the commit");
    // The reader cannot write on top of its passed snapshot: refused at once, retryable.
    reader.busy_timeout(Duration::from_millis(50))?;
    let stale = reader.execute("INSERT INTO t VALUES (50)", []).err();
    assert_eq!(stale.and_then(|e| e.sqlite_error_code()), Some(ErrorCode::DatabaseBusy));
    assert_eq!(count(&reader, "t")?, 2, "still its snapshot, nothing written");
    reader.execute_batch("ROLLBACK")?;
    assert_eq!(count(&reader, "t")?, 3);
    // While one writer holds its transaction open, a second writer cannot start.
    writer.execute_batch("BEGIN; INSERT INTO t VALUES (4);")?;
    other.busy_timeout(Duration::from_millis(50))?;
    assert!(other.execute("INSERT INTO t VALUES (99)", []).is_err());
    writer.execute_batch("COMMIT")?;
    // An autocommit write takes a new snapshot: the commits before it do not refuse it.
    other.execute("INSERT INTO t VALUES (5)", [])?;
    assert_eq!(count(&reader, "t")?, 5);
    assert_eq!(count(&other, "t")?, 5);
    assert_eq!(store.commits(), 6);
    Ok(())
}

/// Writers move value between rows while readers check the total; threads, one connection each.
#[test]
fn concurrent_readers_see_consistent_snapshots() -> TestResult {
    let _store = register("concurrent")?;
    let setup = open_connection("concurrent")?;
    setup.execute_batch("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);")?;
    for id in 0..10 {
        setup.execute("INSERT INTO accounts VALUES (?1, 100)", params![id])?;
    }
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            std::thread::spawn(move || -> rusqlite::Result<()> {
                let connection = open_connection("concurrent")?;
                for i in 0..50i64 {
                    if thread == 0 {
                        let (from, to) = (i % 10, (i * 7 + 3) % 10);
                        connection.execute_batch(&format!(
                            "BEGIN IMMEDIATE; UPDATE accounts SET balance = balance - 5 WHERE id = {from}; \
                             UPDATE accounts SET balance = balance + 5 WHERE id = {to}; COMMIT;"
                        ))?;
                    } else {
                        let total: i64 =
                            connection.query_row("SELECT sum(balance) FROM accounts", [], |row| row.get(0))?;
                        assert_eq!(total, 1000);
                    }
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a thread panicked")??;
    }
    let total: i64 = setup.query_row("SELECT sum(balance) FROM accounts", [], |row| row.get(0))?;
    assert_eq!(total, 1000);
    Ok(())
}

#[test]
fn unregistered_and_invalid_names() -> TestResult {
    assert!(open_connection("never_registered").is_err());
    assert!(matches!(
        register_database(":memory:", Arc::new(MemoryPageStore::new())),
        Err(VfsError::InvalidName(..))
    ));
    register("twice")?;
    assert_eq!(
        register("twice").err(),
        Some(VfsError::AlreadyRegistered("twice".to_owned()))
    );
    assert!(unregister_database("twice"));
    assert!(!unregister_database("twice"));
    Ok(())
}

/// Writers contending for the one writer's lock, as pgbench's clients do (BEGIN; writes; COMMIT, each
/// transaction holding the lock a little while): every transaction gets its turn, none runs out of the busy
/// timeout, and every increment lands.
#[test]
fn contending_writers_all_get_their_turn() -> TestResult {
    const WRITERS: usize = 8;
    const TRANSACTIONS_PER_WRITER: usize = 40;
    let name = "contending_writers.db";
    register(name)?;
    let setup = open_connection(name)?;
    setup.execute_batch(
        "CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER); INSERT INTO counter VALUES (1, 0);",
    )?;
    let threads: Vec<_> = (0..WRITERS)
        .map(|_| {
            std::thread::spawn(move || -> Result<(), String> {
                let connection = open_connection(name).map_err(|e| e.to_string())?;
                for _ in 0..TRANSACTIONS_PER_WRITER {
                    connection
                        .execute_batch("BEGIN; UPDATE counter SET n = n + 1 WHERE id = 1;")
                        .map_err(|e| format!("first write: {e}"))?;
                    std::thread::sleep(Duration::from_millis(2));
                    connection
                        .execute_batch("UPDATE counter SET n = n + 0 WHERE id = 1; COMMIT;")
                        .map_err(|e| format!("commit: {e}"))?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a writer panicked")??;
    }
    let n: i64 = setup.query_row("SELECT n FROM counter", [], |row| row.get(0))?;
    assert_eq!(n, (WRITERS * TRANSACTIONS_PER_WRITER) as i64);
    drop(setup);
    unregister_database(name);
    Ok(())
}
