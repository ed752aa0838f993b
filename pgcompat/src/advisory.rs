//! Advisory locks (`pg_advisory_lock` and its family) shared by the sessions of one database in this
//! process, with PostgreSQL's rules: session-level locks are re-entrant and last until unlocked or the
//! session ends; transaction-level ones (`…_xact_…`) until the transaction ends; shared locks exclude only
//! exclusive ones; one `bigint` key and two `int4` keys are separate key spaces.
//!
//! A wait ends when the lock is granted, when the session is stopped (cancel, `statement_timeout`, the
//! client gone: the caller's interrupt check), after `lock_timeout` (55P03), when waiting would deadlock
//! (40P01, found by following who waits for whom), or after [`WAIT_MAX`].

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{PgError, DEADLOCK_DETECTED, LOCK_NOT_AVAILABLE, QUERY_CANCELED};

/// Longest any advisory lock wait lasts.
pub const WAIT_MAX: Duration = Duration::from_secs(3600);
/// How often a waiter looks at its interrupt check and for deadlocks.
const WAIT_SLICE: Duration = Duration::from_millis(20);
/// Most advisory lock acquisitions one session may hold at once.
pub const HELD_MAX: usize = 10_000;

/// A lock's key: one `bigint`, or two `int4` (a separate key space, as in PostgreSQL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// `pg_advisory_lock(bigint)`.
    One(i64),
    /// `pg_advisory_lock(int4, int4)`.
    Two(i32, i32),
}

/// Exclusive or shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Excludes every other session.
    Exclusive,
    /// Excludes other sessions' exclusive locks.
    Shared,
}

/// How long a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// Until unlocked or the session ends.
    Session,
    /// Until the transaction ends.
    Transaction,
}

/// Who holds one key in one database.
#[derive(Default)]
struct Entry {
    /// Exclusive holds by backend pid (only one pid at a time).
    exclusive: HashMap<i32, u32>,
    /// Shared holds by backend pid.
    shared: HashMap<i32, u32>,
}

impl Entry {
    fn grantable(&self, pid: i32, mode: Mode) -> bool {
        let others_exclusive = self.exclusive.keys().any(|holder| *holder != pid);
        let others_shared = self.shared.keys().any(|holder| *holder != pid);
        match mode {
            Mode::Exclusive => !others_exclusive && !others_shared,
            Mode::Shared => !others_exclusive,
        }
    }

    fn holders(&self) -> impl Iterator<Item = i32> + '_ {
        self.exclusive.keys().chain(self.shared.keys()).copied()
    }

    fn is_empty(&self) -> bool {
        self.exclusive.is_empty() && self.shared.is_empty()
    }
}

/// The process's locks: by database and key; and who waits for what (for deadlock detection).
#[derive(Default)]
struct Table {
    entries: HashMap<(String, Key), Entry>,
    waiting: HashMap<(String, i32), Key>,
}

static TABLE: LazyLock<(Mutex<Table>, Condvar)> = LazyLock::new(|| (Mutex::new(Table::default()), Condvar::new()));

/// One session's advisory locks; dropping it releases them all.
pub struct SessionLocks {
    database: String,
    pid: i32,
    /// Each acquisition the session holds, in order.
    held: Mutex<Vec<(Key, Mode, Span)>>,
}

impl std::fmt::Debug for SessionLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLocks")
            .field("database", &self.database)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// What a wait may be cut short by.
pub struct WaitLimits<'a> {
    /// `lock_timeout` (`None`: none).
    pub lock_timeout: Option<Duration>,
    /// True once the session's statement was stopped.
    pub interrupted: &'a dyn Fn() -> bool,
}

impl SessionLocks {
    /// The locks of backend `pid` on `database`.
    pub fn new(database: &str, pid: i32) -> SessionLocks {
        SessionLocks {
            database: database.to_owned(),
            pid,
            held: Mutex::new(Vec::new()),
        }
    }

    /// Takes `key` in `mode` for `span` if no other session holds it in a conflicting mode; whether it did.
    pub fn try_lock(&self, key: Key, mode: Mode, span: Span) -> Result<bool, PgError> {
        self.check_room()?;
        let (table, _) = &*TABLE;
        let mut table = table.lock();
        Ok(self.grant(&mut table, key, mode, span))
    }

    /// Takes `key`, waiting as the module doc says.
    pub fn lock(&self, key: Key, mode: Mode, span: Span, limits: &WaitLimits<'_>) -> Result<(), PgError> {
        self.check_room()?;
        let started = Instant::now();
        let (table, condvar) = &*TABLE;
        let mut table = table.lock();
        let waiter = (self.database.clone(), self.pid);
        let result = loop {
            if self.grant(&mut table, key, mode, span) {
                break Ok(());
            }
            table.waiting.insert(waiter.clone(), key);
            if (limits.interrupted)() {
                break Err(PgError::new(
                    QUERY_CANCELED,
                    "canceling statement: the advisory lock wait was stopped",
                ));
            }
            if self.would_deadlock(&table, key) {
                break Err(PgError::new(DEADLOCK_DETECTED, "deadlock detected (advisory locks)"));
            }
            let waited = started.elapsed();
            if limits.lock_timeout.is_some_and(|timeout| waited >= timeout) {
                break Err(PgError::new(
                    LOCK_NOT_AVAILABLE,
                    "canceling statement due to lock timeout",
                ));
            }
            if waited >= WAIT_MAX {
                break Err(PgError::new(
                    LOCK_NOT_AVAILABLE,
                    format!("an advisory lock wait passed {} s", WAIT_MAX.as_secs()),
                ));
            }
            condvar.wait_for(&mut table, WAIT_SLICE);
        };
        table.waiting.remove(&waiter);
        result
    }

    /// Releases one session-level hold of `key` in `mode`; false if the session held none.
    pub fn unlock(&self, key: Key, mode: Mode) -> bool {
        let mut held = self.held.lock();
        let Some(at) = held
            .iter()
            .rposition(|(k, m, s)| *k == key && *m == mode && *s == Span::Session)
        else {
            return false;
        };
        held.remove(at);
        drop(held);
        self.release(&[(key, mode)]);
        true
    }

    /// Releases every session-level lock (`pg_advisory_unlock_all`).
    pub fn unlock_all(&self) {
        self.release_where(|span| span == Span::Session);
    }

    /// The transaction ended: its transaction-level locks go.
    pub fn end_transaction(&self) {
        self.release_where(|span| span == Span::Transaction);
    }

    fn release_where(&self, pick: impl Fn(Span) -> bool) {
        let mut held = self.held.lock();
        let mut released = Vec::new();
        held.retain(|(key, mode, span)| {
            let go = pick(*span);
            if go {
                released.push((*key, *mode));
            }
            !go
        });
        drop(held);
        if !released.is_empty() {
            self.release(&released);
        }
    }

    fn check_room(&self) -> Result<(), PgError> {
        if self.held.lock().len() >= HELD_MAX {
            return Err(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!("a session may hold at most {HELD_MAX} advisory locks"),
            ));
        }
        Ok(())
    }

    fn grant(&self, table: &mut Table, key: Key, mode: Mode, span: Span) -> bool {
        let entry = table.entries.entry((self.database.clone(), key)).or_default();
        if !entry.grantable(self.pid, mode) {
            return false;
        }
        let holds = match mode {
            Mode::Exclusive => &mut entry.exclusive,
            Mode::Shared => &mut entry.shared,
        };
        *holds.entry(self.pid).or_insert(0) += 1;
        self.held.lock().push((key, mode, span));
        true
    }

    fn release(&self, locks: &[(Key, Mode)]) {
        let (table, condvar) = &*TABLE;
        let mut table = table.lock();
        for (key, mode) in locks {
            let slot = (self.database.clone(), *key);
            let Some(entry) = table.entries.get_mut(&slot) else {
                continue;
            };
            let holds = match mode {
                Mode::Exclusive => &mut entry.exclusive,
                Mode::Shared => &mut entry.shared,
            };
            if let Some(count) = holds.get_mut(&self.pid) {
                *count -= 1;
                if *count == 0 {
                    holds.remove(&self.pid);
                }
            }
            if entry.is_empty() {
                table.entries.remove(&slot);
            }
        }
        drop(table);
        condvar.notify_all();
    }

    /// Whether waiting for `key` closes a cycle: a holder of it waits (directly or through others) for a
    /// lock this session holds.
    fn would_deadlock(&self, table: &Table, key: Key) -> bool {
        let mut seen = HashSet::new();
        let mut frontier = vec![key];
        while let Some(wanted) = frontier.pop() {
            let Some(entry) = table.entries.get(&(self.database.clone(), wanted)) else {
                continue;
            };
            for holder in entry.holders() {
                if holder == self.pid {
                    // We hold what someone on the chain waits for.
                    if wanted != key {
                        return true;
                    }
                    continue;
                }
                if !seen.insert(holder) {
                    continue;
                }
                if let Some(next) = table.waiting.get(&(self.database.clone(), holder)) {
                    frontier.push(*next);
                }
            }
        }
        false
    }
}

impl Drop for SessionLocks {
    fn drop(&mut self) {
        self.release_where(|_| true);
    }
}

/// The type of what an advisory lock function returns (`bool` for the `try` and `unlock` ones).
pub(crate) fn result_type(name: &str) -> Option<crate::PgType> {
    let name = name.to_ascii_lowercase();
    (name.starts_with("pg_try_advisory_") || name.starts_with("pg_advisory_unlock") && name != "pg_advisory_unlock_all")
        .then_some(crate::PgType::BOOL)
}

/// Registers the advisory lock functions on `conn`, over the session's locks.
pub(crate) fn install(
    conn: &rusqlite::Connection,
    state: std::sync::Arc<crate::functions::SessionState>,
) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8;
    for (name, mode, span) in [
        ("pg_advisory_lock", Mode::Exclusive, Span::Session),
        ("pg_advisory_lock_shared", Mode::Shared, Span::Session),
        ("pg_advisory_xact_lock", Mode::Exclusive, Span::Transaction),
        ("pg_advisory_xact_lock_shared", Mode::Shared, Span::Transaction),
    ] {
        for arity in [1, 2] {
            let s = state.clone();
            conn.create_scalar_function(name, arity, flags, move |ctx| {
                let key = key_of(ctx)?;
                let lock_timeout_ms = s.read_settings(|settings| settings.ms("lock_timeout"));
                let interrupted = || s.interrupted();
                let limits = WaitLimits {
                    lock_timeout: (lock_timeout_ms > 0).then(|| Duration::from_millis(lock_timeout_ms)),
                    interrupted: &interrupted,
                };
                s.advisory_locks()
                    .lock(key, mode, span, &limits)
                    .map_err(crate::functions::raise)?;
                Ok(String::new())
            })?;
        }
    }
    for (name, mode, span) in [
        ("pg_try_advisory_lock", Mode::Exclusive, Span::Session),
        ("pg_try_advisory_lock_shared", Mode::Shared, Span::Session),
        ("pg_try_advisory_xact_lock", Mode::Exclusive, Span::Transaction),
        ("pg_try_advisory_xact_lock_shared", Mode::Shared, Span::Transaction),
    ] {
        for arity in [1, 2] {
            let s = state.clone();
            conn.create_scalar_function(name, arity, flags, move |ctx| {
                let key = key_of(ctx)?;
                s.advisory_locks()
                    .try_lock(key, mode, span)
                    .map_err(crate::functions::raise)
            })?;
        }
    }
    for (name, mode) in [
        ("pg_advisory_unlock", Mode::Exclusive),
        ("pg_advisory_unlock_shared", Mode::Shared),
    ] {
        for arity in [1, 2] {
            let s = state.clone();
            conn.create_scalar_function(name, arity, flags, move |ctx| {
                Ok(s.advisory_locks().unlock(key_of(ctx)?, mode))
            })?;
        }
    }
    conn.create_scalar_function("pg_advisory_unlock_all", 0, flags, move |_| {
        state.advisory_locks().unlock_all();
        Ok(String::new())
    })?;
    Ok(())
}

/// The key of a call: one `bigint` argument, or two `int4` ones.
fn key_of(ctx: &rusqlite::functions::Context<'_>) -> rusqlite::Result<Key> {
    let int = |index: usize| -> rusqlite::Result<i64> {
        match ctx.get_raw(index) {
            rusqlite::types::ValueRef::Integer(n) => Ok(n),
            rusqlite::types::ValueRef::Text(text) => std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.trim().parse::<i64>().ok())
                .ok_or_else(|| {
                    crate::functions::raise(PgError::new(
                        crate::error::INVALID_TEXT_REPRESENTATION,
                        "invalid input syntax for type bigint",
                    ))
                }),
            rusqlite::types::ValueRef::Null => Err(crate::functions::raise(PgError::new(
                crate::error::NULL_VALUE_NOT_ALLOWED,
                "an advisory lock key may not be NULL",
            ))),
            _ => Err(crate::functions::raise(PgError::new(
                crate::error::DATATYPE_MISMATCH,
                "an advisory lock key is an integer",
            ))),
        }
    };
    if ctx.len() == 1 {
        return Ok(Key::One(int(0)?));
    }
    let part = |index: usize| -> rusqlite::Result<i32> {
        i32::try_from(int(index)?).map_err(|_| {
            crate::functions::raise(PgError::new(
                crate::error::NUMERIC_VALUE_OUT_OF_RANGE,
                "integer out of range",
            ))
        })
    };
    Ok(Key::Two(part(0)?, part(1)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn limits() -> WaitLimits<'static> {
        WaitLimits {
            lock_timeout: Some(Duration::from_millis(200)),
            interrupted: &|| false,
        }
    }

    #[test]
    fn exclusive_shared_reentrant_and_released() -> Result<(), PgError> {
        let a = SessionLocks::new("advisory_test_1", 1);
        let b = SessionLocks::new("advisory_test_1", 2);
        assert!(a.try_lock(Key::One(7), Mode::Exclusive, Span::Session)?);
        assert!(a.try_lock(Key::One(7), Mode::Exclusive, Span::Session)?, "re-entrant");
        assert!(!b.try_lock(Key::One(7), Mode::Shared, Span::Session)?);
        assert!(
            b.try_lock(Key::Two(0, 7), Mode::Exclusive, Span::Session)?,
            "two-int keys are apart"
        );
        assert!(a.unlock(Key::One(7), Mode::Exclusive));
        assert!(
            !b.try_lock(Key::One(7), Mode::Exclusive, Span::Session)?,
            "still held once"
        );
        assert!(a.unlock(Key::One(7), Mode::Exclusive));
        assert!(!a.unlock(Key::One(7), Mode::Exclusive), "nothing left to unlock");
        assert!(b.try_lock(Key::One(7), Mode::Shared, Span::Transaction)?);
        assert!(
            a.try_lock(Key::One(7), Mode::Shared, Span::Session)?,
            "shared with shared"
        );
        b.end_transaction();
        a.unlock_all();
        assert!(b.try_lock(Key::One(7), Mode::Exclusive, Span::Session)?);
        drop(b);
        assert!(
            a.try_lock(Key::One(7), Mode::Exclusive, Span::Session)?,
            "a dropped session lets go"
        );
        Ok(())
    }

    #[test]
    fn waits_end_by_grant_timeout_or_deadlock() -> Result<(), PgError> {
        let a = Arc::new(SessionLocks::new("advisory_test_2", 1));
        let b = Arc::new(SessionLocks::new("advisory_test_2", 2));
        assert!(a.try_lock(Key::One(1), Mode::Exclusive, Span::Session)?);
        let timed_out = b.lock(Key::One(1), Mode::Exclusive, Span::Session, &limits());
        assert_eq!(timed_out.map_err(|e| e.code), Err(LOCK_NOT_AVAILABLE));

        assert!(b.try_lock(Key::One(2), Mode::Exclusive, Span::Session)?);
        let waiter = {
            let b = b.clone();
            std::thread::spawn(move || {
                let limits = WaitLimits {
                    lock_timeout: Some(Duration::from_secs(10)),
                    interrupted: &|| false,
                };
                b.lock(Key::One(1), Mode::Exclusive, Span::Session, &limits)
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        let deadlock = a.lock(Key::One(2), Mode::Exclusive, Span::Session, &limits());
        assert_eq!(deadlock.map_err(|e| e.code), Err(DEADLOCK_DETECTED));
        assert!(a.unlock(Key::One(1), Mode::Exclusive));
        assert!(
            waiter.join().expect("joins").is_ok(),
            "the other waiter is granted once a lets go"
        );
        Ok(())
    }
}
