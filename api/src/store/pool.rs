//! A bounded pool of metadata connections for the store's blocking calls.
//!
//! At most [`PoolConfig::connections_max`] connections are open; a call takes one for its statements (or its
//! transaction) and gives it back when done. Connections are made when needed, never ahead, so a process that
//! is idle holds one. With every connection in use a caller waits for one at most
//! [`PoolConfig::connection_wait_ms`], then fails with [`StoreError::Unavailable`] (the API's 503), never
//! hangs. A connection given back unfit ([`Connection::is_reusable`]: its server connection closed, or a
//! transaction it could not roll back), or found unfit when taken from the idle ones, is dropped and its place
//! freed, so the next caller makes a new one: a metadata server that restarted costs the calls that were on
//! the old connections, not every later one.
//!
//! Own code rather than `deadpool-postgres`, `bb8` or `r2d2`: the store's calls block and run on any thread
//! (`spawn_blocking` or none) and its [`Connection`] is one type over two backends (SQLite and PostgreSQL);
//! the async pools hand out `tokio_postgres::Client`s and need a runtime at the call, and `r2d2` would be a
//! new dependency for what a mutex, a condition variable and ~100 lines do here.
//!
//! **Invariant:** `open` counts the connections that exist, idle or lent, and never exceeds `connections_max`;
//! a connection is lent to one caller at a time (the [`Pooled`] guard owns it).

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::sql::{Connection, SqlError};
use super::StoreError;

/// The pool's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Connections open at most (at least 1).
    pub connections_max: u32,
    /// How long a call waits for a connection when every one is in use, before failing with
    /// [`StoreError::Unavailable`].
    pub connection_wait_ms: u64,
}

/// How long a call waits for a free connection by default: as long as a statement waits for a lock.
pub const CONNECTION_WAIT_MS_DEFAULT: u64 = 5_000;

impl PoolConfig {
    /// The default for PostgreSQL metadata: 8 connections. Every statement is a round trip, so a few
    /// connections let the API's requests and the worker's 8 operations overlap their waits; a handful of
    /// server processes per API process is cheap for PostgreSQL (its default `max_connections` is 100).
    pub const POSTGRES_DEFAULT: PoolConfig = PoolConfig {
        connections_max: 8,
        connection_wait_ms: CONNECTION_WAIT_MS_DEFAULT,
    };

    /// The default for SQLite metadata: one connection, as before the pool (see ARCHITECTURE.md: several WAL
    /// readers were measured and did not pay on this machine).
    pub const SQLITE_DEFAULT: PoolConfig = PoolConfig {
        connections_max: 1,
        connection_wait_ms: CONNECTION_WAIT_MS_DEFAULT,
    };
}

thread_local! {
    /// Set while this thread runs a call that must not wait for a connection ([`without_waiting`]).
    static NO_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every [`Pool::get`] on this thread refusing to wait: an idle connection is lent as always, but
/// with none idle the call fails at once with [`StoreError::WouldWait`] instead of waiting for one or making
/// one. For a store call run on a thread that must not block for long (an async worker), which then runs the
/// call elsewhere. Nested calls stay in the mode; the mode ends with `f`, also if it panics.
pub(crate) fn without_waiting<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            NO_WAIT.with(|flag| flag.set(self.0));
        }
    }
    let _reset = Reset(NO_WAIT.with(|flag| flag.replace(true)));
    f()
}

/// What makes a new connection.
type Connect = Box<dyn Fn() -> Result<Connection, SqlError> + Send + Sync>;

struct State {
    /// Connections not lent, the most recently given back last (it is taken first: its statements are
    /// prepared, its server process warm).
    idle: Vec<Connection>,
    /// Connections that exist: idle, lent, or being made.
    open: usize,
}

/// The pool; see the module doc.
pub(crate) struct Pool {
    state: Mutex<State>,
    /// Signalled when a connection is given back or a place freed.
    freed: Condvar,
    connections_max: usize,
    wait: Duration,
    connect: Connect,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Pool")
            .field("open", &state.open)
            .field("idle", &state.idle.len())
            .field("connections_max", &self.connections_max)
            .field("wait", &self.wait)
            .finish()
    }
}

impl Pool {
    /// A pool bounded by `config` that starts with `first` (already made, so that opening the store fails at
    /// once on a bad location) and makes more with `connect`.
    pub(crate) fn new(config: PoolConfig, first: Connection, connect: Connect) -> Pool {
        assert!(
            config.connections_max >= 1,
            "connections_max {}",
            config.connections_max
        );
        Pool {
            state: Mutex::new(State {
                idle: vec![first],
                open: 1,
            }),
            freed: Condvar::new(),
            connections_max: usize::try_from(config.connections_max).unwrap_or(usize::MAX),
            wait: Duration::from_millis(config.connection_wait_ms),
            connect,
        }
    }

    /// A connection for one call: an idle one, a new one if fewer than the maximum exist, or the first given
    /// back within the wait; else [`StoreError::Unavailable`]. Making a connection that fails is also
    /// `Unavailable` (the metadata server is out of reach).
    pub(crate) fn get(&self) -> Result<Pooled<'_>, StoreError> {
        let deadline = Instant::now() + self.wait;
        let mut state = self.state.lock();
        loop {
            while let Some(conn) = state.idle.pop() {
                if conn.is_reusable() {
                    return Ok(Pooled {
                        pool: self,
                        conn: Some(conn),
                    });
                }
                // Closed while idle (the server restarted, or ended the session): replaced below.
                state.open -= 1;
                tracing::warn!("dropping a metadata connection that closed while idle");
            }
            if NO_WAIT.with(Cell::get) {
                return Err(StoreError::WouldWait);
            }
            if state.open < self.connections_max {
                state.open += 1;
                drop(state);
                return self.make();
            }
            if self.freed.wait_until(&mut state, deadline).timed_out() {
                // A connection may have come back just as the wait ended: take it rather than fail.
                if state.idle.is_empty() && state.open >= self.connections_max {
                    return Err(StoreError::Unavailable(format!(
                        "no metadata connection free within {} ms ({} in use); retry later",
                        self.wait.as_millis(),
                        state.open
                    )));
                }
            }
        }
    }

    /// Makes a connection for a place already counted in `open`; gives the place back if that fails.
    fn make(&self) -> Result<Pooled<'_>, StoreError> {
        match (self.connect)() {
            Ok(conn) => Ok(Pooled {
                pool: self,
                conn: Some(conn),
            }),
            Err(error) => {
                self.release_place();
                Err(StoreError::Unavailable(format!(
                    "connecting to the metadata database: {error}"
                )))
            }
        }
    }

    fn release_place(&self) {
        let mut state = self.state.lock();
        assert!(state.open > 0, "a place freed with none open");
        state.open -= 1;
        drop(state);
        self.freed.notify_one();
    }

    /// Takes `conn` back: kept if fit for another caller, else dropped and its place freed.
    fn give_back(&self, conn: Connection) {
        if conn.is_reusable() {
            self.state.lock().idle.push(conn);
            self.freed.notify_one();
        } else {
            tracing::warn!("dropping a metadata connection that failed; the next call makes another");
            // Dropped before the place is freed, so `open` never undercounts what exists.
            drop(conn);
            self.release_place();
        }
    }

    /// Connections that exist (idle or lent).
    #[cfg(test)]
    fn open(&self) -> usize {
        self.state.lock().open
    }
}

/// A connection lent by the [`Pool`], given back when dropped.
pub(crate) struct Pooled<'p> {
    pool: &'p Pool,
    /// `Some` until dropped.
    conn: Option<Connection>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("a lent connection is present until dropped")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("a lent connection is present until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.give_back(conn);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::testing_postgres::TestPostgres;

    /// A pool of SQLite connections to one file in `dir`, counting the connections it makes.
    fn sqlite_pool(dir: &std::path::Path, config: PoolConfig) -> (Pool, Arc<AtomicUsize>) {
        let path = dir.join("pool.sqlite");
        let open = move || -> Result<Connection, SqlError> {
            let conn = rusqlite::Connection::open(&path)?;
            conn.busy_timeout(Duration::from_millis(5_000))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            Ok(Connection::sqlite(conn))
        };
        let made = Arc::new(AtomicUsize::new(1));
        let first = open().unwrap();
        first.execute_batch("CREATE TABLE t (v INTEGER NOT NULL)").unwrap();
        let counter = Arc::clone(&made);
        let pool = Pool::new(
            config,
            first,
            Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                open()
            }),
        );
        (pool, made)
    }

    #[test]
    fn at_most_the_maximum_is_open_and_a_wait_ends_in_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let config = PoolConfig {
            connections_max: 3,
            connection_wait_ms: 200,
        };
        let (pool, made) = sqlite_pool(dir.path(), config);
        let held: Vec<Pooled<'_>> = (0..3).map(|_| pool.get().unwrap()).collect();
        assert_eq!((pool.open(), made.load(Ordering::SeqCst)), (3, 3));
        let started = Instant::now();
        let Err(StoreError::Unavailable(message)) = pool.get() else {
            panic!("a fourth connection past the maximum of 3")
        };
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(200), "gave up after {waited:?}");
        assert!(waited < Duration::from_secs(5), "waited {waited:?}");
        assert!(
            message.contains("no metadata connection free within 200 ms"),
            "{message}"
        );
        drop(held);
        // Given back, they are reused: no new connection is made.
        let again: Vec<Pooled<'_>> = (0..3).map(|_| pool.get().unwrap()).collect();
        assert_eq!((pool.open(), made.load(Ordering::SeqCst)), (3, 3));
        drop(again);
    }

    #[test]
    fn a_call_that_may_not_wait_takes_an_idle_connection_or_gives_up_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let config = PoolConfig {
            connections_max: 2,
            connection_wait_ms: 5_000,
        };
        let (pool, made) = sqlite_pool(dir.path(), config);
        // The idle one is lent as always, and given back.
        let value: i64 = without_waiting(|| {
            let conn = pool.get().unwrap();
            conn.query_row("SELECT 7", [], |row| row.get(0)).unwrap()
        });
        assert_eq!(value, 7);
        // None idle: it neither makes one (though under the maximum) nor waits.
        let held = pool.get().unwrap();
        let started = Instant::now();
        assert!(matches!(
            without_waiting(|| pool.get().map(drop)),
            Err(StoreError::WouldWait)
        ));
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        assert_eq!((pool.open(), made.load(Ordering::SeqCst)), (1, 1));
        // Nested calls stay in the mode; it ends with the outer call, also when that panics.
        without_waiting(|| {
            without_waiting(|| {});
            assert!(matches!(pool.get().map(drop), Err(StoreError::WouldWait)));
        });
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            without_waiting(|| panic!("a call that panics"));
        }));
        assert!(unwound.is_err());
        // Outside it a call makes a second connection rather than fail.
        let second = pool.get().unwrap();
        assert_eq!((pool.open(), made.load(Ordering::SeqCst)), (2, 2));
        drop((held, second));
    }

    #[test]
    fn a_waiter_gets_the_connection_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let config = PoolConfig {
            connections_max: 1,
            connection_wait_ms: 5_000,
        };
        let (pool, made) = sqlite_pool(dir.path(), config);
        std::thread::scope(|scope| {
            let held = pool.get().unwrap();
            held.execute("INSERT INTO t (v) VALUES (1)", []).unwrap();
            let waiter = scope.spawn(|| {
                let conn = pool.get().unwrap();
                conn.query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0))
                    .unwrap()
            });
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
            assert_eq!(waiter.join().unwrap(), 1, "the waiter reads the committed row");
        });
        assert_eq!(made.load(Ordering::SeqCst), 1, "one connection, shared in turn");
    }

    #[test]
    fn a_connection_left_in_a_transaction_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let config = PoolConfig {
            connections_max: 1,
            connection_wait_ms: 1_000,
        };
        let (pool, made) = sqlite_pool(dir.path(), config);
        {
            let conn = pool.get().unwrap();
            // As a transaction whose rollback failed leaves it: open.
            conn.as_sqlite().unwrap().execute_batch("BEGIN IMMEDIATE").unwrap();
            assert!(!conn.is_reusable());
        }
        assert_eq!(pool.open(), 0, "the broken one is gone");
        let conn = pool.get().unwrap();
        assert!(conn.is_reusable());
        // The new connection can write: the old one's write lock went with it.
        conn.execute("INSERT INTO t (v) VALUES (1)", []).unwrap();
        assert_eq!((pool.open(), made.load(Ordering::SeqCst)), (1, 2));
    }

    #[test]
    fn a_failed_connect_frees_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        let first = Connection::sqlite(rusqlite::Connection::open(&path).unwrap());
        let config = PoolConfig {
            connections_max: 2,
            connection_wait_ms: 100,
        };
        let pool = Pool::new(
            config,
            first,
            Box::new(|| Err(SqlError::Connection("refused".to_owned()))),
        );
        let held = pool.get().unwrap();
        for _ in 0..3 {
            let Err(StoreError::Unavailable(message)) = pool.get() else {
                panic!("a connect that fails")
            };
            assert!(message.contains("refused"), "{message}");
        }
        assert_eq!(pool.open(), 1, "failed connects hold no place");
        drop(held);
        assert!(pool.get().is_ok(), "the first is still there");
    }

    /// On PostgreSQL a slow statement holds one connection, not the store: another call runs beside it.
    #[test]
    fn a_slow_statement_does_not_stall_other_calls() {
        let Some(server) = TestPostgres::start() else {
            return;
        };
        let url = server.create_database("slow");
        let store = crate::store::Store::open_postgres(&url).unwrap();
        std::thread::scope(|scope| {
            let slow = scope.spawn(|| {
                let conn = store.conn().unwrap();
                let started = Instant::now();
                conn.query_row("SELECT 1::bigint FROM pg_sleep(2)", [], |row| row.get::<_, i64>(0))
                    .unwrap();
                started.elapsed()
            });
            std::thread::sleep(Duration::from_millis(200));
            let started = Instant::now();
            assert_eq!(store.schema_version().unwrap(), crate::store::MIGRATIONS.len());
            let quick = started.elapsed();
            let slow = slow.join().unwrap();
            assert!(slow >= Duration::from_secs(2), "the slow statement took {slow:?}");
            assert!(quick < Duration::from_millis(1_500), "a call beside it took {quick:?}");
        });
    }

    /// The pool over a real PostgreSQL: the server ends every session of the pool (as a restart does), and the
    /// next calls get new connections, on new server processes, instead of failing forever.
    #[test]
    fn postgresql_connections_closed_by_the_server_are_replaced() {
        let Some(server) = TestPostgres::start() else {
            return;
        };
        let url = server.create_database("pool");
        let connect_url = url.clone();
        let pool = Pool::new(
            PoolConfig {
                connections_max: 2,
                connection_wait_ms: 5_000,
            },
            Connection::postgres(&url).unwrap(),
            Box::new(move || Connection::postgres(&connect_url)),
        );
        let pid = |conn: &Connection| -> i64 {
            conn.query_row("SELECT pg_backend_pid()::bigint", [], |row| row.get(0))
                .unwrap()
        };
        let (a, b) = (pool.get().unwrap(), pool.get().unwrap());
        let old = [pid(&a), pid(&b)];
        drop((a, b));
        let killer = Connection::postgres(&url).unwrap();
        let ended: i64 = killer
            .query_row(
                // `OFFSET 0` keeps the planner from ending sessions before the filter leaves this one out.
                "SELECT count(*) FROM (SELECT pid FROM pg_stat_activity WHERE datname = 'pool' \
                 AND pid <> pg_backend_pid() OFFSET 0) AS s WHERE pg_terminate_backend(s.pid)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(ended, 2, "both pool sessions ended");
        // The connection tasks notice the server's goodbye; until one does, the first statement on it fails.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut new = Vec::new();
        while new.len() < 2 {
            assert!(
                Instant::now() < deadline,
                "no working connection 10 s after the sessions ended"
            );
            let conn = pool.get().unwrap();
            let worked = conn.query_row("SELECT pg_backend_pid()::bigint", [], |row| row.get::<_, i64>(0));
            match worked {
                Ok(pid) => new.push((pid, conn)),
                Err(error) => {
                    // What the API answers 503 for, not 500.
                    assert!(error.is_connection_loss(), "{error:?}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        for (pid, _) in &new {
            assert!(!old.contains(pid), "pid {pid} is an ended session's");
        }
        assert!(pool.open() <= 2, "open {}", pool.open());
    }
}
