//! SQLite over `RemotePageStore` in real processes: three `cambium safekeeper`s and one `cambium pageserver`.
//!
//! Proves: SQL through the `cambium` VFS on a `RemotePageStore` commits through the safekeepers (create table,
//! many rows over many pages, update, delete, a rolled-back transaction), and a fresh compute, a new
//! `RemotePageStore` with an empty page cache started after the first one is dropped, reads exactly that data
//! back from the pageserver, and can go on writing; a commit that no majority confirms fails the store.

mod common;

use std::sync::{Arc, Weak};

use common::cluster::{Cluster, TestResult};
use compute::remote_store::RemotePageStore;
use compute::rusqlite::{self, params, Connection};
use compute::vfs::{open_connection, register_database, unregister_database};
use storage::{Lsn, TenantId, TimelineId};

const START: Lsn = Lsn(0x100_0000);
const ROWS: i64 = 2000;

/// The table's rows as (id, value), ordered by id.
fn rows(connection: &Connection) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut statement = connection.prepare("SELECT id, v FROM t ORDER BY id")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// The first compute's SQL; returns the rows it leaves.
fn write_first(connection: &mut Connection) -> rusqlite::Result<Vec<(i64, String)>> {
    connection.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")?;
    let transaction = connection.transaction()?;
    for id in 0..ROWS {
        transaction.execute(
            "INSERT INTO t (id, v) VALUES (?1, ?2)",
            params![id, format!("row {id} {}", "x".repeat(100))],
        )?;
    }
    transaction.commit()?;
    connection.execute("UPDATE t SET v = 'updated ' || id WHERE id % 7 = 0", [])?;
    connection.execute("DELETE FROM t WHERE id % 5 = 1", [])?;
    let transaction = connection.transaction()?;
    transaction.execute("DELETE FROM t", [])?;
    transaction.execute("INSERT INTO t (id, v) VALUES (-1, 'rolled back')", [])?;
    transaction.rollback()?;
    rows(connection)
}

/// What `write_first` must have left.
fn expected_rows() -> Vec<(i64, String)> {
    (0..ROWS)
        .filter(|id| id % 5 != 1)
        .map(|id| {
            let v = if id % 7 == 0 {
                format!("updated {id}")
            } else {
                format!("row {id} {}", "x".repeat(100))
            };
            (id, v)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_commits_through_safekeepers_and_reads_back_from_the_pageserver() -> TestResult {
    let mut cluster = Cluster::start(TenantId(0xC1), TimelineId(0xC2), START).await?;
    let expected = expected_rows();

    // The first compute writes.
    let store = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 2_000)).await?;
    assert_eq!(store.read_lsn(), START, "a new timeline's epoch starts at its start");
    register_database("db1", store.clone())?;
    let written = tokio::task::spawn_blocking(|| -> TestResult<Vec<(i64, String)>> {
        let mut connection = open_connection("db1")?;
        Ok(write_first(&mut connection)?)
    })
    .await??;
    assert!(written == expected, "the first compute reads what it wrote");
    let (end_lsn, size_pages) = (
        store.read_lsn(),
        compute::page_store::PageStore::snapshot(&*store)?.db_size_pages,
    );
    assert!(end_lsn > START, "commits moved the read LSN: {end_lsn}");
    assert!(size_pages > 10, "the rows take many pages: {size_pages}");
    assert_eq!(store.failure(), None);
    let first: Weak<RemotePageStore> = Arc::downgrade(&store);
    assert!(unregister_database("db1"));
    drop(store);
    assert!(first.upgrade().is_none(), "the first compute is gone");

    // A fresh compute, empty cache: everything comes from the pageserver.
    let store = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 2_000)).await?;
    assert!(
        store.read_lsn() >= end_lsn,
        "the new epoch starts after the first compute's commits: {} < {end_lsn}",
        store.read_lsn()
    );
    assert_eq!(
        compute::page_store::PageStore::snapshot(&*store)?.db_size_pages,
        size_pages
    );
    register_database("db1", store.clone())?;
    let (read, check, after) = tokio::task::spawn_blocking(|| -> TestResult<_> {
        let connection = open_connection("db1")?;
        let read = rows(&connection)?;
        let check: String = connection.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        connection.execute("INSERT INTO t (id, v) VALUES (?1, 'second compute')", params![ROWS])?;
        let after: i64 = connection.query_row("SELECT count(*) FROM t", [], |row| row.get(0))?;
        Ok((read, check, after))
    })
    .await??;
    assert!(read == expected, "the fresh compute reads what the first one committed");
    assert_eq!(check, "ok");
    assert_eq!(after, expected.len() as i64 + 1);
    assert!(store.read_lsn() > end_lsn);

    // Write amplification: LSNs are contiguous, so a commit's WAL bytes are how far it moves the read LSN. A
    // one-row UPDATE changes a few bytes of a leaf page and page 1's change counter: byte-range deltas, not
    // two 8 KiB pages.
    let before = store.read_lsn();
    tokio::task::spawn_blocking(|| -> TestResult<()> {
        let connection = open_connection("db1")?;
        connection.execute("UPDATE t SET v = 'tiny' WHERE id = 3", [])?;
        Ok(())
    })
    .await??;
    let update_wal_bytes = store.read_lsn().0 - before.0;
    eprintln!("a one-row UPDATE: {update_wal_bytes} WAL bytes");
    assert!(
        update_wal_bytes < 1_000,
        "a one-row UPDATE took {update_wal_bytes} WAL bytes"
    );

    // Without a majority the commit cannot be confirmed: it fails, and so does everything after it.
    for safekeeper in &mut cluster.safekeepers[..2] {
        safekeeper.kill9();
    }
    let (commit, later) = tokio::task::spawn_blocking(|| -> TestResult<_> {
        let connection = open_connection("db1")?;
        let commit = connection.execute("INSERT INTO t (id, v) VALUES (?1, 'no quorum')", params![ROWS + 1]);
        let later = connection.query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0));
        Ok((commit.is_err(), later.is_err()))
    })
    .await??;
    assert!(commit, "a commit without a majority fails");
    assert!(later, "a failed store fails every later call");
    assert!(store.failure().is_some());
    assert!(unregister_database("db1"));
    Ok(())
}

/// Issue 13 (finding 8): a transaction over the transaction size limit fails at once with the limit named, nothing
/// of it committed, while the store, the branch's other sessions and smaller transactions go on. (It used to
/// wait the commit timeout, say "may or may not be committed", and fail the store under every session.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_too_large_transaction_is_refused_and_nothing_else_breaks() -> TestResult {
    let cluster = Cluster::start(TenantId(0xC5), TimelineId(0xC6), START).await?;
    let mut config = cluster.store_config(cluster.timeline, START, 2_000);
    // A limit of 16 MiB (the default is 4 GiB; any size up to it goes, in parts: tests/big_transactions.rs).
    config.transactions.transaction_bytes_max = 16 << 20;
    let store = RemotePageStore::start(config).await?;
    register_database("db_large", store.clone())?;
    let (refused_in, other_count, medium) = tokio::task::spawn_blocking(|| -> TestResult<_> {
        let other = open_connection("db_large")?;
        other.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)")?;
        let mut big = open_connection("db_large")?;
        let started = std::time::Instant::now();
        let transaction = big.transaction()?;
        // About 20 MiB of rows: over the 16 MiB limit.
        for id in 0..5_000i64 {
            transaction.execute("INSERT INTO t VALUES (?1, randomblob(4000))", params![id])?;
        }
        let refused = transaction.commit();
        assert!(refused.is_err(), "a commit over the limit is refused");
        let refused_in = started.elapsed();
        // The other session is still there, and sees nothing of the big transaction.
        let other_count: i64 = other.query_row("SELECT count(*) FROM t", [], |row| row.get(0))?;
        // A transaction under the limit (about 8 MiB, so perhaps in two parts) commits on the same store.
        let transaction = big.transaction()?;
        for id in 0..2_000i64 {
            transaction.execute("INSERT INTO t VALUES (?1, randomblob(4000))", params![id])?;
        }
        transaction.commit()?;
        let medium: i64 = other.query_row("SELECT count(*) FROM t", [], |row| row.get(0))?;
        Ok((refused_in, other_count, medium))
    })
    .await??;
    assert_eq!(other_count, 0, "nothing of the refused transaction is anywhere");
    assert_eq!(medium, 2_000);
    assert_eq!(
        store.failure(),
        None,
        "the store did not fail (a commit sent and timed out would have failed it)"
    );
    eprintln!("the refused transaction took {refused_in:?}, its inserts included");
    Ok(())
}

/// A transaction of many small parts, several in flight, commits every time and reads back from a fresh
/// compute. The parts of a group used to be appended by one task each, which the proposer may take in any
/// order: when a later part got the group's first LSNs, the first part's end was not where the store's
/// history ended and the commit failed the store ("its first part ended at …"), seen in `scripts/clients.sh`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_of_many_parts_in_flight_commits_every_time() -> TestResult {
    const TRANSACTIONS: i64 = 6;
    const ROWS_EACH: i64 = 300;
    let cluster = Cluster::start(TenantId(0xC7), TimelineId(0xC8), START).await?;
    let mut config = cluster.store_config(cluster.timeline, START, 5_000);
    // Parts of two pages, eight in flight: each transaction below is a group of a hundred parts or more.
    config.transactions.part_bytes_max = 2 * 8192;
    config.transactions.appends_in_flight_max = 8;
    let store = RemotePageStore::start(config).await?;
    register_database("db_parts", store.clone())?;
    tokio::task::spawn_blocking(|| -> TestResult<()> {
        let mut connection = open_connection("db_parts")?;
        connection.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)")?;
        for round in 0..TRANSACTIONS {
            let transaction = connection.transaction()?;
            for id in round * ROWS_EACH..(round + 1) * ROWS_EACH {
                transaction.execute("INSERT INTO t VALUES (?1, randomblob(3000))", params![id])?;
            }
            transaction.commit()?;
        }
        Ok(())
    })
    .await??;
    assert_eq!(store.failure(), None, "no group failed the store");
    assert!(unregister_database("db_parts"));
    drop(store);

    let store = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 5_000)).await?;
    register_database("db_parts", store.clone())?;
    let (count, check) = tokio::task::spawn_blocking(|| -> TestResult<_> {
        let connection = open_connection("db_parts")?;
        let count: i64 = connection.query_row("SELECT count(*) FROM t WHERE length(b) = 3000", [], |row| row.get(0))?;
        let check: String = connection.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        Ok((count, check))
    })
    .await??;
    assert_eq!(
        count,
        TRANSACTIONS * ROWS_EACH,
        "a fresh compute reads every committed row"
    );
    assert_eq!(check, "ok");
    assert!(unregister_database("db_parts"));
    Ok(())
}
