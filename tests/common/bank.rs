//! The bank workload of the fault tests (`tests/faults.rs`, `tests/disk_faults.rs`) and its checks.
//!
//! `accounts(id, balance)` with 20 accounts of 1000 each and a `ledger` of transfers. Four clients (tokio
//! tasks, each its own PostgreSQL connection, a seeded xorshift; `FAULTS_SEED` replays another seed, and every
//! failure prints the seed) run transfers `BEGIN; UPDATE -x; UPDATE +x; INSERT INTO ledger; COMMIT` with ledger
//! ids unique per attempt. A transfer is *acknowledged* when its COMMIT returned Ok, *unknown* when its COMMIT
//! was sent and errored (it may or may not be durable), and *not committed* when an earlier statement failed
//! (it must be absent). [`check`] asserts, on one branch: every acknowledged transfer is in the ledger; every
//! ledger row is a transfer whose COMMIT was sent, exactly as generated; the total is 20 × 1000 and every
//! balance is the initial one plus the net of the ledger rows; `PRAGMA integrity_check` says ok.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::api::connect;
use super::faults::{pause, ApiClient, TestDatabase};

pub const ACCOUNTS: i64 = 20;
pub const INITIAL_BALANCE: i64 = 1_000;
pub const CLIENTS: u64 = 4;
/// The seed when `FAULTS_SEED` is not set.
pub const SEED_DEFAULT: u64 = 0x5EED_FA17_2026_0007;
/// A statement with no answer after this long counts as failed (above the bound a COMMIT must fail within).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(35);
/// Connecting (which may start the branch's store, and so campaign) gives up after this long.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Failed connects in a row before a client gives up.
pub const FAILED_CONNECTS_MAX: u32 = 60;
/// Waiting for the load to make progress gives up after this long.
pub const PROGRESS_TIMEOUT: Duration = Duration::from_secs(40);
/// Reading the state back after a fault gives up after this long.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Stopped clients finish their transfer in flight within this long.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);

pub fn seed() -> u64 {
    match std::env::var("FAULTS_SEED") {
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("FAULTS_SEED={text:?}: {e}"))
        }
        Err(_) => SEED_DEFAULT,
    }
}

/// xorshift64: small, seeded, good enough to pick accounts.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Zero is xorshift's one fixed point.
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0);
        self.next() % bound
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub id: i64,
    pub from: i64,
    pub to: i64,
    pub amount: i64,
}

#[derive(Clone, Debug)]
pub enum Outcome {
    /// COMMIT returned Ok.
    Acknowledged,
    /// COMMIT was sent and failed: durable or not.
    Unknown(String),
    /// A statement before COMMIT failed: never durable.
    NotCommitted(String),
}

#[derive(Clone, Debug)]
pub struct Attempt {
    pub transfer: Transfer,
    pub commit_started: Option<Instant>,
    pub ended: Instant,
    pub outcome: Outcome,
}

/// A failed connect: when it started, when it ended, why.
#[derive(Clone, Debug)]
pub struct FailedConnect {
    pub started: Instant,
    pub ended: Instant,
    pub error: String,
}

#[derive(Default)]
pub struct Log {
    pub attempts: Mutex<Vec<Attempt>>,
    pub failed_connects: Mutex<Vec<FailedConnect>>,
    pub acknowledged: AtomicU64,
}

pub fn error_text(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} {}", db.code().code(), db.message()),
        None => error.to_string(),
    }
}

pub async fn execute(client: &tokio_postgres::Client, sql: &str) -> Result<(), String> {
    match tokio::time::timeout(STATEMENT_TIMEOUT, client.batch_execute(sql)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(format!("{sql}: {}", error_text(&error))),
        Err(_) => Err(format!("{sql}: no answer within {STATEMENT_TIMEOUT:?}")),
    }
}

pub async fn attempt_transfer(client: &tokio_postgres::Client, transfer: Transfer) -> Attempt {
    let Transfer { id, from, to, amount } = transfer;
    let statements = [
        "BEGIN".to_owned(),
        format!("UPDATE accounts SET balance = balance - {amount} WHERE id = {from}"),
        format!("UPDATE accounts SET balance = balance + {amount} WHERE id = {to}"),
        format!("INSERT INTO ledger (id, src, dst, amount) VALUES ({id}, {from}, {to}, {amount})"),
    ];
    for statement in &statements {
        if let Err(error) = execute(client, statement).await {
            return Attempt {
                transfer,
                commit_started: None,
                ended: Instant::now(),
                outcome: Outcome::NotCommitted(error),
            };
        }
    }
    let commit_started = Instant::now();
    let outcome = match execute(client, "COMMIT").await {
        Ok(()) => Outcome::Acknowledged,
        Err(error) => Outcome::Unknown(error),
    };
    Attempt {
        transfer,
        commit_started: Some(commit_started),
        ended: Instant::now(),
        outcome,
    }
}

/// One client: transfers until `stop`, reconnecting after any error.
pub async fn run_client(
    uri: String,
    index: u64,
    seed: u64,
    log: Arc<Log>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let mut rng = Rng::new(seed ^ (index + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Ids unique per attempt across clients, so an unknown COMMIT is never confused with a later one.
    let mut next_id = (index as i64 + 1) * 1_000_000;
    let mut session: Option<tokio_postgres::Client> = None;
    let mut failed_connects = 0;
    let mut backoff = BACKOFF_MIN;
    while !stop.load(Ordering::SeqCst) {
        let client = match session.take() {
            Some(client) => client,
            None => {
                let started = Instant::now();
                let error = match tokio::time::timeout(CONNECT_TIMEOUT, connect(&uri)).await {
                    Ok(Ok(client)) => {
                        failed_connects = 0;
                        session = Some(client);
                        continue;
                    }
                    Ok(Err(error)) => error_text(&error),
                    Err(_) => format!("no connection within {CONNECT_TIMEOUT:?}"),
                };
                log.failed_connects.lock().expect("log lock").push(FailedConnect {
                    started,
                    ended: Instant::now(),
                    error: error.clone(),
                });
                failed_connects += 1;
                if failed_connects > FAILED_CONNECTS_MAX {
                    return Err(format!(
                        "client {index}: {failed_connects} failed connects in a row, the last: {error}"
                    ));
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let from = rng.below(ACCOUNTS as u64) as i64;
        let to = (from + 1 + rng.below(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
        let amount = 1 + rng.below(50) as i64;
        let transfer = Transfer {
            id: next_id,
            from,
            to,
            amount,
        };
        next_id += 1;
        let attempt = attempt_transfer(&client, transfer).await;
        let acknowledged = matches!(attempt.outcome, Outcome::Acknowledged);
        log.attempts.lock().expect("log lock").push(attempt);
        if acknowledged {
            log.acknowledged.fetch_add(1, Ordering::SeqCst);
            backoff = BACKOFF_MIN;
            session = Some(client);
        } else {
            // The session may be unusable (a failed store, a dead connection): start afresh.
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
    Ok(())
}

/// The workload on one database.
pub struct Bank {
    pub seed: u64,
    pub log: Arc<Log>,
    pub stop: Arc<AtomicBool>,
    pub clients: Vec<tokio::task::JoinHandle<Result<(), String>>>,
}

impl Bank {
    /// Creates the tables and the accounts, then starts the clients.
    pub async fn start(uri: &str, seed: u64) -> Bank {
        Bank::start_through(&[uri.to_owned()], seed).await
    }

    /// [`Bank::start`] with the clients spread over `uris` (the same database through several routes, such as
    /// two `cambium proxy`s): client `i` connects through `uris[i % uris.len()]`; the tables are made through the
    /// first.
    pub async fn start_through(uris: &[String], seed: u64) -> Bank {
        assert!(!uris.is_empty(), "at least one route to the database");
        let uri = uris[0].as_str();
        let client = connect(uri).await.expect("connect");
        let mut setup = String::from(
            "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL);
             CREATE TABLE ledger (id BIGINT PRIMARY KEY, src BIGINT NOT NULL, dst BIGINT NOT NULL,
                                  amount BIGINT NOT NULL);
             BEGIN;",
        );
        for id in 0..ACCOUNTS {
            setup.push_str(&format!(
                "INSERT INTO accounts (id, balance) VALUES ({id}, {INITIAL_BALANCE});"
            ));
        }
        setup.push_str("COMMIT;");
        client.batch_execute(&setup).await.expect("create the accounts");
        let log = Arc::new(Log::default());
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..CLIENTS)
            .map(|index| {
                tokio::spawn(run_client(
                    uris[index as usize % uris.len()].clone(),
                    index,
                    seed,
                    Arc::clone(&log),
                    Arc::clone(&stop),
                ))
            })
            .collect();
        Bank {
            seed,
            log,
            stop,
            clients,
        }
    }

    pub fn attempts(&self) -> Vec<Attempt> {
        self.log.attempts.lock().expect("log lock").clone()
    }

    pub fn failed_connects(&self) -> Vec<FailedConnect> {
        self.log.failed_connects.lock().expect("log lock").clone()
    }

    /// The last few errors of transfers and of connects.
    pub fn recent_errors(&self) -> Vec<String> {
        let attempts = self.attempts();
        let mut errors: Vec<String> = attempts
            .iter()
            .rev()
            .filter_map(|a| match &a.outcome {
                Outcome::Acknowledged => None,
                Outcome::Unknown(e) | Outcome::NotCommitted(e) => Some(e.clone()),
            })
            .take(5)
            .collect();
        let connects = self.failed_connects();
        errors.extend(connects.iter().rev().take(3).map(|c| format!("connect: {}", c.error)));
        errors
    }

    /// Panics, naming `what` and the recent errors, if a client's task has stopped (it runs until `stop`).
    fn assert_clients_run(&self, what: &str) {
        if let Some(finished) = self.clients.iter().position(|c| c.is_finished()) {
            panic!(
                "seed {:#x}: {what}: client {finished} stopped; recent errors: {:?}",
                self.seed,
                self.recent_errors()
            );
        }
    }

    /// Waits (bounded) for `more` transfers to be acknowledged.
    pub async fn progress(&self, more: u64, what: &str) {
        let target = self.log.acknowledged.load(Ordering::SeqCst) + more;
        let deadline = Instant::now() + PROGRESS_TIMEOUT;
        while self.log.acknowledged.load(Ordering::SeqCst) < target {
            self.assert_clients_run(what);
            assert!(
                Instant::now() < deadline,
                "seed {:#x}: {what}: {} of {target} transfers acknowledged after {PROGRESS_TIMEOUT:?}; \
                 recent errors: {:?}",
                self.seed,
                self.log.acknowledged.load(Ordering::SeqCst),
                self.recent_errors()
            );
            pause().await;
        }
    }

    /// The transfers of client `index` acknowledged so far (its ids are `(index + 1) × 1 000 000` onwards).
    pub fn acknowledged_by(&self, index: u64) -> u64 {
        let first = (index as i64 + 1) * 1_000_000;
        let attempts = self.log.attempts.lock().expect("log lock");
        attempts
            .iter()
            .filter(|a| matches!(a.outcome, Outcome::Acknowledged))
            .filter(|a| (first..first + 1_000_000).contains(&a.transfer.id))
            .count() as u64
    }

    /// Waits (bounded) for each of the clients `indexes` to have `more` transfers acknowledged: progress through
    /// the routes those clients use (see [`Bank::start_through`]).
    pub async fn progress_of(&self, indexes: &[u64], more: u64, what: &str) {
        let targets: Vec<(u64, u64)> = indexes
            .iter()
            .map(|&index| (index, self.acknowledged_by(index) + more))
            .collect();
        let deadline = Instant::now() + PROGRESS_TIMEOUT;
        loop {
            let behind: Vec<(u64, u64, u64)> = targets
                .iter()
                .map(|&(index, target)| (index, self.acknowledged_by(index), target))
                .filter(|&(_, done, target)| done < target)
                .collect();
            if behind.is_empty() {
                return;
            }
            self.assert_clients_run(what);
            assert!(
                Instant::now() < deadline,
                "seed {:#x}: {what}: clients behind after {PROGRESS_TIMEOUT:?} (client, acknowledged, wanted): \
                 {behind:?}; recent errors: {:?}",
                self.seed,
                self.recent_errors()
            );
            pause().await;
        }
    }

    /// Stops the clients; every attempt.
    pub async fn stop(self) -> Vec<Attempt> {
        self.stop.store(true, Ordering::SeqCst);
        for (index, client) in self.clients.into_iter().enumerate() {
            let result = tokio::time::timeout(STOP_TIMEOUT, client)
                .await
                .unwrap_or_else(|_| panic!("seed {:#x}: client {index} did not stop", self.seed))
                .expect("client task");
            if let Err(error) = result {
                panic!("seed {:#x}: {error}", self.seed);
            }
        }
        let attempts = self.log.attempts.lock().expect("log lock").clone();
        attempts
    }

    /// Stops the workload, reads `uri`'s final state and [`check`]s it (every acknowledged transfer there, the
    /// total conserved); the attempts and the ids of the acknowledged ones.
    pub async fn stop_and_check(self, uri: &str, what: &str) -> (Vec<Attempt>, HashSet<i64>) {
        let seed = self.seed;
        let attempts = self.stop().await;
        let acknowledged = acknowledged_ids(&attempts);
        let state = read_state(uri, seed, what).await;
        check(&state, &attempts, &acknowledged, seed, what);
        (attempts, acknowledged)
    }
}

/// The ids of the acknowledged transfers among `attempts`.
pub fn acknowledged_ids(attempts: &[Attempt]) -> HashSet<i64> {
    attempts
        .iter()
        .filter(|a| matches!(a.outcome, Outcome::Acknowledged))
        .map(|a| a.transfer.id)
        .collect()
}

/// What a branch holds.
pub struct State {
    pub balances: Vec<i64>,
    pub ledger: Vec<Transfer>,
    pub integrity: String,
}

pub async fn read_state_once(uri: &str) -> Result<State, String> {
    let client = tokio::time::timeout(CONNECT_TIMEOUT, connect(uri))
        .await
        .map_err(|_| "no connection in time".to_owned())?
        .map_err(|e| error_text(&e))?;
    let query = |sql: &'static str| {
        let client = &client;
        async move {
            tokio::time::timeout(STATEMENT_TIMEOUT, client.query(sql, &[]))
                .await
                .map_err(|_| format!("{sql}: no answer in time"))?
                .map_err(|e| format!("{sql}: {}", error_text(&e)))
        }
    };
    execute(&client, "BEGIN").await?;
    let balances: Vec<i64> = query("SELECT balance FROM accounts ORDER BY id")
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let ledger = query("SELECT id, src, dst, amount FROM ledger ORDER BY id")
        .await?
        .iter()
        .map(|row| Transfer {
            id: row.get(0),
            from: row.get(1),
            to: row.get(2),
            amount: row.get(3),
        })
        .collect();
    execute(&client, "COMMIT").await?;
    let integrity: String = query("PRAGMA integrity_check").await?[0].get(0);
    Ok(State {
        balances,
        ledger,
        integrity,
    })
}

/// Reads a branch's state, retrying (bounded) while it recovers.
pub async fn read_state(uri: &str, seed: u64, what: &str) -> State {
    let deadline = Instant::now() + READ_TIMEOUT;
    loop {
        match read_state_once(uri).await {
            Ok(state) => return state,
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "seed {seed:#x}: {what}: no read within {READ_TIMEOUT:?}: {error}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Checks invariants (1) and (2) of the module comment on one branch.
pub fn check(state: &State, attempts: &[Attempt], must_have: &HashSet<i64>, seed: u64, what: &str) {
    let by_id: HashMap<i64, &Attempt> = attempts.iter().map(|a| (a.transfer.id, a)).collect();
    assert_eq!(state.integrity, "ok", "seed {seed:#x}: {what}: integrity check");
    assert_eq!(
        state.balances.len(),
        ACCOUNTS as usize,
        "seed {seed:#x}: {what}: accounts"
    );
    assert_eq!(
        state.balances.iter().sum::<i64>(),
        ACCOUNTS * INITIAL_BALANCE,
        "seed {seed:#x}: {what}: the total"
    );
    let mut expected = vec![INITIAL_BALANCE; ACCOUNTS as usize];
    for row in &state.ledger {
        let attempt = by_id
            .get(&row.id)
            .unwrap_or_else(|| panic!("seed {seed:#x}: {what}: ledger row {row:?} was never attempted"));
        assert_eq!(
            *row, attempt.transfer,
            "seed {seed:#x}: {what}: the ledger row is the transfer as sent"
        );
        assert!(
            !matches!(attempt.outcome, Outcome::NotCommitted(_)),
            "seed {seed:#x}: {what}: transfer {row:?} failed before its COMMIT yet is present: {:?}",
            attempt.outcome
        );
        expected[row.from as usize] -= row.amount;
        expected[row.to as usize] += row.amount;
    }
    assert_eq!(
        state.balances, expected,
        "seed {seed:#x}: {what}: balances are the initial ones plus the ledger's net"
    );
    let present: HashSet<i64> = state.ledger.iter().map(|t| t.id).collect();
    let mut missing: Vec<i64> = must_have.difference(&present).copied().collect();
    missing.sort_unstable();
    assert!(
        missing.is_empty(),
        "seed {seed:#x}: {what}: {} acknowledged transfers lost, the first: {:?}",
        missing.len(),
        missing.iter().take(10).map(|id| by_id[id].transfer).collect::<Vec<_>>()
    );
}

/// A branch made while the load runs.
pub struct TestBranch {
    pub name: &'static str,
    pub uri: String,
    /// When it was requested: what was acknowledged before must be on it.
    pub requested_at: Instant,
}

/// A workload running on a fresh database, with a branch made mid-run (before the fault).
pub struct Run {
    pub seed: u64,
    pub name: &'static str,
    pub started: Instant,
    pub bank: Bank,
    pub database: TestDatabase,
    pub branches: Vec<TestBranch>,
}

impl Run {
    pub async fn start(api: &ApiClient, name: &'static str) -> Run {
        let seed = seed();
        let started = Instant::now();
        let database = api.create_database(name).await;
        let bank = Bank::start(&database.uri, seed).await;
        let mut run = Run {
            seed,
            name,
            started,
            bank,
            database,
            branches: Vec::new(),
        };
        run.bank.progress(50, "before branching").await;
        run.branch(api, "before_fault").await;
        run.bank.progress(50, "after branching").await;
        run
    }

    /// Branches the database at its latest commit while the load runs.
    pub async fn branch(&mut self, api: &ApiClient, name: &'static str) {
        let requested_at = Instant::now();
        let uri = api.create_branch(&self.database.id, name).await;
        self.branches.push(TestBranch {
            name,
            uri,
            requested_at,
        });
    }

    /// Branches once more (a fresh store: its reads go to the pageserver), stops the load and checks the
    /// database and every branch; every attempt.
    pub async fn finish(mut self, api: &ApiClient) -> Vec<Attempt> {
        self.branch(api, "after_recovery").await;
        self.bank.progress(20, "after the last branch").await;
        let Run {
            seed,
            name,
            started,
            bank,
            database,
            branches,
        } = self;
        let attempts = bank.stop().await;
        let acknowledged = |before: Option<Instant>| -> HashSet<i64> {
            attempts
                .iter()
                .filter(|a| matches!(a.outcome, Outcome::Acknowledged))
                .filter(|a| before.is_none_or(|before| a.ended < before))
                .map(|a| a.transfer.id)
                .collect()
        };
        let what = format!("{name}: main");
        let main = read_state(&database.uri, seed, &what).await;
        check(&main, &attempts, &acknowledged(None), seed, &what);
        let mut rows = vec![format!("{} on main", main.ledger.len())];
        for branch in &branches {
            let what = format!("{name}: branch {}", branch.name);
            let state = read_state(&branch.uri, seed, &what).await;
            check(&state, &attempts, &acknowledged(Some(branch.requested_at)), seed, &what);
            rows.push(format!("{} on {}", state.ledger.len(), branch.name));
        }
        let count = |f: fn(&Outcome) -> bool| attempts.iter().filter(|a| f(&a.outcome)).count();
        eprintln!(
            "{name}: seed {seed:#x}, {:.1} s: {} acknowledged, {} unknown, {} not committed; ledger rows: {}",
            started.elapsed().as_secs_f64(),
            count(|o| matches!(o, Outcome::Acknowledged)),
            count(|o| matches!(o, Outcome::Unknown(_))),
            count(|o| matches!(o, Outcome::NotCommitted(_))),
            rows.join(", "),
        );
        attempts
    }
}
