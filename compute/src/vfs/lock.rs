//! SQLite's file lock levels, kept in the process for each database, with snapshot reads: any number of
//! SHARED holders, at most one writer (RESERVED, then EXCLUSIVE to commit). Pure state, no I/O.
//!
//! Unlike SQLite's unix VFS, readers never hold a writer back: a SHARED holder reads the pages of the
//! snapshot it took when it locked (`file::MainFile`), so the writer's commit cannot change what it sees.
//! EXCLUSIVE is therefore granted to the writer at once, PENDING is never used, and SHARED is never refused.
//! Writers exclude each other only; a refused request is [`Busy`] and leaves the handle where it was.
//!
//! Writers get the lock in the order they first asked for it: a refused writer joins a queue, and while
//! anyone waits a free lock goes only to the oldest waiter. Without the queue, whoever polls at the right
//! moment wins and one client can lose for seconds under steady contention (pgbench's 8 clients did). A
//! waiter that stops asking (its statement gave up, its connection closed) leaves the queue once it has not
//! asked for [`WAITER_STALE`]: a waiting connection asks again at least every [`super::WAIT_SLICE`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a queued writer may go without asking again before it is taken for gone.
pub(crate) const WAITER_STALE: Duration = Duration::from_millis(100);

/// Most writers queued per database; past it a refused writer waits unqueued (as without the queue).
pub(crate) const WAITERS_MAX: usize = 4096;

/// A lock level of one file handle, ordered as SQLite orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LockLevel {
    None,
    Shared,
    Reserved,
    Pending,
    Exclusive,
}

/// A lock request was refused because another handle is the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy;

/// Which handle holds the writer's lock, and how far it climbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Writer {
    handle: u64,
    level: LockLevel,
}

/// A writer waiting for the writer's lock, and when it last asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Waiter {
    handle: u64,
    asked_at: Instant,
}

/// The locks of one database across every handle open on it in the process.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    /// Handles at SHARED or above.
    shared_count: usize,
    writer: Option<Writer>,
    /// Writers refused, oldest first (at most [`WAITERS_MAX`]).
    waiting: VecDeque<Waiter>,
}

/// Writers queued for a writer's lock, over every database of the process (the tables' queues' lengths).
static WRITERS_WAITING: AtomicUsize = AtomicUsize::new(0);

/// Whether any writer in the process is queued for a writer's lock (one that stopped asking stays queued up
/// to [`WAITER_STALE`]).
pub(crate) fn writers_waiting() -> bool {
    WRITERS_WAITING.load(Ordering::Relaxed) > 0
}

/// A table's queue went from `before` to `after` waiters.
fn gauge_waiting(before: usize, after: usize) {
    if after > before {
        WRITERS_WAITING.fetch_add(after - before, Ordering::Relaxed);
    } else {
        WRITERS_WAITING.fetch_sub(before - after, Ordering::Relaxed);
    }
}

impl Drop for LockTable {
    fn drop(&mut self) {
        gauge_waiting(self.waiting.len(), 0);
    }
}

impl LockTable {
    /// Moves `handle` from `current` up to `wanted` (SHARED, RESERVED or EXCLUSIVE). Returns the level the
    /// handle now holds: `wanted` if granted, else `current`.
    pub(crate) fn lock(&mut self, handle: u64, current: LockLevel, wanted: LockLevel) -> (LockLevel, Result<(), Busy>) {
        self.lock_at(handle, current, wanted, Instant::now())
    }

    /// [`LockTable::lock`] at the instant `now`.
    pub(crate) fn lock_at(
        &mut self,
        handle: u64,
        current: LockLevel,
        wanted: LockLevel,
        now: Instant,
    ) -> (LockLevel, Result<(), Busy>) {
        assert!(
            wanted != LockLevel::Pending,
            "SQLite never asks for PENDING: handle {handle}"
        );
        assert!(
            current != LockLevel::Pending,
            "PENDING is never granted: handle {handle}"
        );
        if wanted <= current {
            return (current, Ok(()));
        }
        if wanted == LockLevel::Shared {
            assert!(
                current == LockLevel::None,
                "handle {handle} at {current:?} asks for SHARED"
            );
            self.shared_count += 1;
            return (LockLevel::Shared, Ok(()));
        }
        assert!(
            current >= LockLevel::Shared,
            "handle {handle} at {current:?} asks for {wanted:?}"
        );
        if current < LockLevel::Reserved && self.blocks(handle, now) {
            self.wait(handle, now);
            return (current, Err(Busy));
        }
        assert!(
            self.writer.is_none_or(|w| w.handle == handle),
            "handle {handle} granted the writer's lock held by {:?}",
            self.writer
        );
        let before = self.waiting.len();
        self.waiting.retain(|w| w.handle != handle);
        gauge_waiting(before, self.waiting.len());
        self.writer = Some(Writer { handle, level: wanted });
        (wanted, Ok(()))
    }

    /// Whether `handle` must wait for the writer's lock: another handle holds it, or an older waiter that is
    /// still asking is owed it first.
    pub(crate) fn blocks(&mut self, handle: u64, now: Instant) -> bool {
        if self.writer.is_some_and(|w| w.handle != handle) {
            return true;
        }
        self.drop_stale_waiters(now);
        self.waiting.front().is_some_and(|w| w.handle != handle)
    }

    /// The waiter owed the writer's lock next: the oldest still asking (stale ones leave the queue here).
    pub(crate) fn next_in_line(&mut self, now: Instant) -> Option<u64> {
        self.drop_stale_waiters(now);
        self.waiting.front().map(|w| w.handle)
    }

    /// Takes out of the queue's front the waiters that stopped asking.
    fn drop_stale_waiters(&mut self, now: Instant) {
        while self
            .waiting
            .front()
            .is_some_and(|w| now.saturating_duration_since(w.asked_at) > WAITER_STALE)
        {
            self.waiting.pop_front();
            gauge_waiting(1, 0);
        }
    }

    /// Queues `handle` (or notes that it asked again).
    fn wait(&mut self, handle: u64, now: Instant) {
        if let Some(waiter) = self.waiting.iter_mut().find(|w| w.handle == handle) {
            waiter.asked_at = now;
        } else if self.waiting.len() < WAITERS_MAX {
            self.waiting.push_back(Waiter { handle, asked_at: now });
            gauge_waiting(0, 1);
        }
    }

    /// Takes `handle` out of the queue (its file closed).
    pub(crate) fn forget(&mut self, handle: u64) {
        let before = self.waiting.len();
        self.waiting.retain(|w| w.handle != handle);
        gauge_waiting(before, self.waiting.len());
    }

    /// Moves `handle` from `current` down to `wanted` (SHARED or NONE). Returns the new level.
    pub(crate) fn unlock(&mut self, handle: u64, current: LockLevel, wanted: LockLevel) -> LockLevel {
        assert!(wanted <= LockLevel::Shared, "handle {handle} unlocks to {wanted:?}");
        if wanted >= current {
            return current;
        }
        if current >= LockLevel::Reserved {
            let writer = self.writer.take();
            assert!(
                writer.is_some_and(|w| w.handle == handle),
                "handle {handle} at {current:?} is not the writer {writer:?}"
            );
        }
        if wanted == LockLevel::None {
            assert!(
                self.shared_count > 0,
                "handle {handle} at {current:?} but no SHARED holders"
            );
            self.shared_count -= 1;
        }
        wanted
    }

    /// Whether any handle holds RESERVED or above (SQLite's xCheckReservedLock).
    pub(crate) fn is_reserved(&self) -> bool {
        self.writer.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::LockLevel::*;
    use super::*;

    #[test]
    fn readers_never_hold_back_the_one_writer() {
        let mut table = LockTable::default();
        assert_eq!(table.lock(1, None, Shared), (Shared, Ok(())));
        assert_eq!(table.lock(2, None, Shared), (Shared, Ok(())));
        assert_eq!(table.lock(1, Shared, Reserved), (Reserved, Ok(())));
        assert!(table.is_reserved());
        assert_eq!(
            table.lock(2, Shared, Reserved),
            (Shared, Err(Busy)),
            "one writer at a time"
        );
        assert_eq!(
            table.lock(1, Reserved, Exclusive),
            (Exclusive, Ok(())),
            "reader 2 reads its snapshot: the writer commits at once"
        );
        assert_eq!(
            table.lock(3, None, Shared),
            (Shared, Ok(())),
            "new readers come in meanwhile"
        );
        assert_eq!(table.lock(3, Shared, Exclusive), (Shared, Err(Busy)));
        table.forget(3); // 3 gives up (else it would be owed the lock next)
        assert_eq!(table.unlock(1, Exclusive, Shared), Shared);
        assert!(!table.is_reserved());
        assert_eq!(table.lock(2, Shared, Reserved), (Reserved, Ok(())), "the next writer");
        assert_eq!(table.unlock(2, Reserved, None), None);
        assert_eq!(table.unlock(1, Shared, None), None);
        assert_eq!(table.unlock(3, Shared, None), None);
        assert_eq!(table.shared_count, 0);
    }

    #[test]
    fn a_free_lock_goes_to_the_oldest_waiter() {
        let mut table = LockTable::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for handle in 1..=3 {
            assert_eq!(table.lock_at(handle, None, Shared, at(0)), (Shared, Ok(())));
        }
        assert_eq!(table.lock_at(1, Shared, Reserved, at(0)), (Reserved, Ok(())));
        assert_eq!(table.lock_at(2, Shared, Reserved, at(1)), (Shared, Err(Busy)));
        assert_eq!(table.lock_at(3, Shared, Reserved, at(2)), (Shared, Err(Busy)));
        assert_eq!(table.unlock(1, Reserved, Shared), Shared);
        // Handle 1 comes straight back, and 3 asks before 2: both are behind 2.
        assert_eq!(table.lock_at(1, Shared, Reserved, at(3)), (Shared, Err(Busy)));
        assert_eq!(table.lock_at(3, Shared, Reserved, at(4)), (Shared, Err(Busy)));
        assert_eq!(table.lock_at(2, Shared, Reserved, at(5)), (Reserved, Ok(())));
        assert_eq!(table.unlock(2, Reserved, Shared), Shared);
        assert_eq!(
            table.lock_at(1, Shared, Reserved, at(6)),
            (Shared, Err(Busy)),
            "3 queued before 1"
        );
        assert_eq!(table.lock_at(3, Shared, Reserved, at(7)), (Reserved, Ok(())));
        assert_eq!(table.unlock(3, Reserved, Shared), Shared);
        assert_eq!(table.lock_at(1, Shared, Reserved, at(8)), (Reserved, Ok(())));
        assert!(table.waiting.is_empty());
    }

    #[test]
    fn a_waiter_that_stops_asking_leaves_the_queue() {
        let mut table = LockTable::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for handle in 1..=3 {
            assert_eq!(table.lock_at(handle, None, Shared, at(0)), (Shared, Ok(())));
        }
        assert_eq!(table.lock_at(1, Shared, Reserved, at(0)), (Reserved, Ok(())));
        assert_eq!(table.lock_at(2, Shared, Reserved, at(1)), (Shared, Err(Busy)));
        table.unlock(1, Reserved, Shared);
        // 2 never asks again: 3 waits for it only until it is stale.
        assert_eq!(table.lock_at(3, Shared, Reserved, at(50)), (Shared, Err(Busy)));
        let later = 1 + WAITER_STALE.as_millis() as u64 + 1;
        assert_eq!(table.lock_at(3, Shared, Reserved, at(later)), (Reserved, Ok(())));
        table.unlock(3, Reserved, Shared);
        // A closed handle leaves at once.
        assert_eq!(table.lock_at(1, Shared, Reserved, at(later)), (Reserved, Ok(())));
        assert_eq!(table.lock_at(2, Shared, Reserved, at(later)), (Shared, Err(Busy)));
        table.forget(2);
        table.unlock(1, Reserved, Shared);
        assert_eq!(table.lock_at(3, Shared, Reserved, at(later + 1)), (Reserved, Ok(())));
    }

    #[test]
    fn the_next_in_line_is_the_oldest_waiter_still_asking() {
        let mut table = LockTable::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(table.next_in_line(at(0)), Option::None, "nobody waits");
        for handle in 1..=3 {
            assert_eq!(table.lock_at(handle, None, Shared, at(0)), (Shared, Ok(())));
        }
        assert_eq!(table.lock_at(1, Shared, Reserved, at(0)), (Reserved, Ok(())));
        assert_eq!(table.lock_at(2, Shared, Reserved, at(1)), (Shared, Err(Busy)));
        assert_eq!(table.lock_at(3, Shared, Reserved, at(2)), (Shared, Err(Busy)));
        table.unlock(1, Reserved, Shared);
        assert_eq!(table.next_in_line(at(3)), Some(2));
        // 3 keeps asking, 2 stops: once 2 is stale, 3 is owed the lock.
        let later = 1 + WAITER_STALE.as_millis() as u64 + 1;
        assert_eq!(table.lock_at(3, Shared, Reserved, at(later - 1)), (Shared, Err(Busy)));
        assert_eq!(table.next_in_line(at(later)), Some(3));
        assert_eq!(table.lock_at(3, Shared, Reserved, at(later)), (Reserved, Ok(())));
        assert_eq!(table.next_in_line(at(later)), Option::None, "the one in line got it");
    }

    #[test]
    fn relocking_at_or_below_the_current_level_is_a_no_op() {
        let mut table = LockTable::default();
        assert_eq!(table.lock(1, None, Shared), (Shared, Ok(())));
        assert_eq!(table.lock(1, Shared, Shared), (Shared, Ok(())));
        assert_eq!(table.shared_count, 1);
        assert_eq!(table.unlock(1, Shared, Shared), Shared);
        assert_eq!(table.unlock(1, Shared, None), None);
        assert_eq!(table.unlock(1, None, None), None);
    }
}
