//! Commit atomicity of SQLite over `RemotePageStore`, with real processes: three `cambium safekeeper`s and one
//! `cambium pageserver`.
//!
//! Proves: after many small acknowledged transfers between accounts, a large transaction (thousands of rows
//! over many pages) whose COMMIT runs after two of the three safekeepers were killed with -9 is not
//! acknowledged; once they are back, a fresh compute (a new `RemotePageStore`, empty cache) sees every
//! acknowledged transfer, the accounts' total intact, the large transaction wholly present or wholly absent
//! (never half of it), and a database that passes `PRAGMA integrity_check`.

mod common;

use common::cluster::{Cluster, TestResult};
use compute::remote_store::RemotePageStore;
use compute::rusqlite::{params, Connection};
use compute::vfs::{open_connection, register_database, unregister_database};
use storage::{Lsn, TenantId, TimelineId};

const START: Lsn = Lsn(0x100_0000);
const ACCOUNTS: i64 = 50;
const INITIAL_BALANCE: i64 = 1_000;
const TRANSFERS: i64 = 200;
const BIG_ROWS: i64 = 5_000;

/// One transfer, in its own transaction: `(id, from, to, amount)`.
type Transfer = (i64, i64, i64, i64);

/// A deterministic pseudo-random sequence of transfers.
fn transfers() -> Vec<Transfer> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as i64
    };
    (0..TRANSFERS)
        .map(|id| {
            let from = next() % ACCOUNTS;
            let to = (from + 1 + next() % (ACCOUNTS - 1)) % ACCOUNTS;
            (id, from, to, 1 + next() % 50)
        })
        .collect()
}

fn transfer(connection: &mut Connection, (id, from, to, amount): Transfer) -> compute::rusqlite::Result<()> {
    let transaction = connection.transaction()?;
    transaction.execute(
        "UPDATE accounts SET balance = balance - ?1 WHERE id = ?2",
        params![amount, from],
    )?;
    transaction.execute(
        "UPDATE accounts SET balance = balance + ?1 WHERE id = ?2",
        params![amount, to],
    )?;
    transaction.execute(
        "INSERT INTO transfers (id, src, dst, amount) VALUES (?1, ?2, ?3, ?4)",
        params![id, from, to, amount],
    )?;
    transaction.commit()
}

/// The balances the acknowledged transfers leave.
fn expected_balances(acknowledged: &[Transfer]) -> Vec<i64> {
    let mut balances = vec![INITIAL_BALANCE; ACCOUNTS as usize];
    for &(_, from, to, amount) in acknowledged {
        balances[from as usize] -= amount;
        balances[to as usize] += amount;
    }
    balances
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_without_a_majority_is_all_or_nothing_and_acknowledged_commits_survive() -> TestResult {
    let mut cluster = Cluster::start(TenantId(0xA1), TimelineId(0xA2), START).await?;

    // The first compute: accounts, many small acknowledged transfers.
    let store = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 1_500)).await?;
    register_database("atomic", store.clone())?;
    let acknowledged = tokio::task::spawn_blocking(|| -> TestResult<Vec<Transfer>> {
        let mut connection = open_connection("atomic")?;
        connection.execute_batch(
            "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
             CREATE TABLE transfers (id INTEGER PRIMARY KEY, src INTEGER, dst INTEGER, amount INTEGER);
             CREATE TABLE big (id INTEGER PRIMARY KEY, payload TEXT NOT NULL);",
        )?;
        let transaction = connection.transaction()?;
        for id in 0..ACCOUNTS {
            transaction.execute(
                "INSERT INTO accounts (id, balance) VALUES (?1, ?2)",
                params![id, INITIAL_BALANCE],
            )?;
        }
        transaction.commit()?;
        let mut acknowledged = Vec::new();
        for t in transfers() {
            transfer(&mut connection, t)?;
            acknowledged.push(t);
        }
        Ok(acknowledged)
    })
    .await??;
    assert_eq!(acknowledged.len() as i64, TRANSFERS);
    assert_eq!(store.failure(), None);

    // A large transaction, built while all safekeepers run, committed after two of them are gone.
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
    let big = tokio::task::spawn_blocking(move || -> TestResult<bool> {
        let mut connection = open_connection("atomic")?;
        let transaction = connection.transaction()?;
        for id in 0..BIG_ROWS {
            transaction.execute(
                "INSERT INTO big (id, payload) VALUES (?1, ?2)",
                params![id, format!("big {id} {}", "y".repeat(200))],
            )?;
        }
        transaction.execute("UPDATE accounts SET balance = balance - 7 WHERE id = 0", [])?;
        transaction.execute("UPDATE accounts SET balance = balance + 7 WHERE id = 1", [])?;
        started_tx.send(())?;
        kill_rx.recv()?;
        Ok(transaction.commit().is_ok())
    });
    tokio::task::spawn_blocking(move || started_rx.recv()).await??;
    for safekeeper in &mut cluster.safekeepers[..2] {
        safekeeper.kill9();
    }
    kill_tx.send(())?;
    let big_committed = big.await??;
    assert!(!big_committed, "a commit without a majority is not acknowledged");
    assert!(store.failure().is_some(), "the store fails with its commit");
    assert!(unregister_database("atomic"));
    drop(store);

    // The safekeepers come back; a fresh compute reads what is durable.
    for safekeeper in &mut cluster.safekeepers[..2] {
        safekeeper.restart();
    }
    let store = RemotePageStore::start(cluster.store_config(cluster.timeline, START, 1_500)).await?;
    register_database("atomic", store.clone())?;
    let (balances, transfer_ids, big_rows, check) = tokio::task::spawn_blocking(|| -> TestResult<_> {
        let connection = open_connection("atomic")?;
        let mut statement = connection.prepare("SELECT balance FROM accounts ORDER BY id")?;
        let balances = statement
            .query_map([], |row| row.get::<_, i64>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut statement = connection.prepare("SELECT id FROM transfers ORDER BY id")?;
        let transfer_ids = statement
            .query_map([], |row| row.get::<_, i64>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let big_rows: i64 = connection.query_row("SELECT count(*) FROM big", [], |row| row.get(0))?;
        let check: String = connection.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        Ok((balances, transfer_ids, big_rows, check))
    })
    .await??;
    eprintln!("after the failed commit: big has {big_rows} rows of {BIG_ROWS}");
    assert_eq!(check, "ok");
    assert!(
        big_rows == 0 || big_rows == BIG_ROWS,
        "the large transaction is all or nothing: {big_rows} of {BIG_ROWS} rows"
    );
    let expected_ids: Vec<i64> = acknowledged.iter().map(|t| t.0).collect();
    assert_eq!(
        transfer_ids, expected_ids,
        "every acknowledged transfer is there, no other"
    );
    let mut expected = expected_balances(&acknowledged);
    if big_rows == BIG_ROWS {
        expected[0] -= 7;
        expected[1] += 7;
    }
    assert_eq!(balances, expected, "balances match the durable transfers");
    assert_eq!(
        balances.iter().sum::<i64>(),
        ACCOUNTS * INITIAL_BALANCE,
        "the total is intact"
    );
    assert_eq!(store.failure(), None);
    assert!(unregister_database("atomic"));
    Ok(())
}
