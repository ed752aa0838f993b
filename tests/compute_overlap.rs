//! Overlapping commits (DESIGN §5, early lock release) over real processes: three `cambium safekeeper`s and a
//! `cambium pageserver`, with sessions that defer durability as the pg front does
//! (`compute::vfs::with_deferred_durability`).
//!
//! Proves: writers on one branch commit while earlier commits are still in flight (the writer's lock is
//! released at the hand-over), and each statement is reported done only once a quorum has it. Then the quorum
//! is lost mid-flight (two safekeepers killed while four writers and a reader run), the third is killed too, and
//! a fresh store elects with only the first two restarted — so a commit that reached only the third is gone.
//! After that restart every commit a writer was told of is there, nothing a reader was shown is missing (a
//! reader never saw a commit that could still fail), and each writer has at most its one ambiguous commit
//! beyond what it was told of.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::{Cluster, TestResult};
use compute::page_store::PageStore;
use compute::remote_store::RemotePageStore;
use compute::rusqlite::{params, Connection};
use compute::vfs::{open_connection, register_database, unregister_database, with_deferred_durability};
use storage::{Lsn, TenantId, TimelineId};

const START: Lsn = Lsn(0x100_0000);
const WRITERS: i64 = 4;

/// One writer: inserts `(writer, seq)` for seq = 0, 1, … one autocommit statement at a time until a statement
/// fails or `stop` is set; returns how many it was told are durable (they are seq 0..n).
fn write(name: &str, writer: i64, stop: &AtomicBool) -> TestResult<i64> {
    let connection = open_connection(name)?;
    let mut seq = 0i64;
    while !stop.load(Ordering::SeqCst) {
        let (inserted, durable) = with_deferred_durability(|| {
            connection.execute("INSERT INTO t (writer, seq) VALUES (?1, ?2)", params![writer, seq])
        });
        if inserted.is_err() || durable.is_err() {
            break;
        }
        seq += 1;
    }
    Ok(seq)
}

/// The highest seq of each writer, as one statement sees it.
fn maxima(connection: &Connection) -> compute::rusqlite::Result<BTreeMap<i64, i64>> {
    let mut statement = connection.prepare("SELECT writer, max(seq) FROM t GROUP BY writer")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// A reader: the highest seq of each writer it was shown (only reads reported durable count), until a read
/// fails or `stop` is set.
fn read(name: &str, stop: &AtomicBool) -> TestResult<BTreeMap<i64, i64>> {
    let connection = open_connection(name)?;
    let mut shown = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        let (seen, durable) = with_deferred_durability(|| maxima(&connection));
        let (Ok(seen), Ok(())) = (seen, durable) else {
            break;
        };
        for (writer, seq) in seen {
            let entry = shown.entry(writer).or_insert(seq);
            *entry = (*entry).max(seq);
        }
    }
    Ok(shown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_commits_report_only_what_a_quorum_has() -> TestResult {
    let mut cluster = Cluster::start(TenantId(0xD1), TimelineId(0xD2), START).await?;
    let store = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 1_000)).await?;
    register_database("db_overlap", store.clone())?;
    tokio::task::spawn_blocking(|| -> TestResult {
        let connection = open_connection("db_overlap")?;
        connection.execute_batch(
            "CREATE TABLE t (writer INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (writer, seq))",
        )?;
        Ok(())
    })
    .await??;

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let stop = stop.clone();
            std::thread::spawn(move || write("db_overlap", writer, &stop).map_err(|e| e.to_string()))
        })
        .collect();
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || read("db_overlap", &stop).map_err(|e| e.to_string()))
    };
    // Commits overlap: while they run, the store's latest snapshot is often past what a quorum acknowledged.
    let started = Instant::now();
    let (mut samples, mut ahead) = (0u32, 0u32);
    while started.elapsed() < Duration::from_millis(1_500) {
        let latest = store.snapshot()?.lsn;
        samples += 1;
        ahead += u32::from(latest > store.read_lsn());
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    eprintln!("{ahead} of {samples} samples saw commits in flight past the acknowledged LSN");
    assert!(ahead > 0, "commits never overlapped: no sample saw one in flight");

    // The quorum goes mid-flight: the writers' and the reader's next statements fail with the store.
    for safekeeper in &mut cluster.safekeepers[..2] {
        safekeeper.kill9();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.failure().is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        store.failure().is_some(),
        "the store failed once no majority acknowledged"
    );
    stop.store(true, Ordering::SeqCst);
    let mut told = Vec::new();
    for writer in writers {
        told.push(writer.join().map_err(|_| "a writer panicked")??);
    }
    let shown = reader.join().map_err(|_| "the reader panicked")??;
    eprintln!("writers were told of {told:?}; the reader was shown up to {shown:?}");
    assert!(
        told.iter().all(|&n| n > 0),
        "every writer committed before the quorum went: {told:?}"
    );

    // Only the first two safekeepers come back: a record that reached only the third is lost for good.
    cluster.safekeepers[2].kill9();
    assert!(unregister_database("db_overlap"));
    drop(store);
    for safekeeper in &mut cluster.safekeepers[..2] {
        safekeeper.restart();
    }
    let fresh = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 5_000)).await?;
    register_database("db_overlap_after", fresh.clone())?;
    let (counts, after) = tokio::task::spawn_blocking(|| -> TestResult<_> {
        let connection = open_connection("db_overlap_after")?;
        let mut statement = connection.prepare("SELECT writer, count(*) FROM t GROUP BY writer")?;
        let counts: BTreeMap<i64, i64> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok((counts, maxima(&connection)?))
    })
    .await??;
    eprintln!("after the restart: {counts:?} rows per writer, maxima {after:?}");
    for (writer, &n) in (0..WRITERS).zip(&told) {
        let count = counts.get(&writer).copied().unwrap_or(0);
        let top = after.get(&writer).copied().unwrap_or(-1);
        assert_eq!(
            count,
            top + 1,
            "writer {writer}'s rows have no gap: {count} rows, highest {top}"
        );
        assert!(count >= n, "writer {writer} was told of {n} commits, {count} are there");
        assert!(
            count <= n + 1,
            "writer {writer}: {count} rows, told of {n}: at most one ambiguous"
        );
        if let Some(&seen) = shown.get(&writer) {
            assert!(
                top >= seen,
                "the reader was shown writer {writer}'s seq {seen}, lost after the restart ({top})"
            );
        }
    }
    assert!(unregister_database("db_overlap_after"));
    Ok(())
}
