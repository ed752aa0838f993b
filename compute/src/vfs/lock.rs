//! SQLite's file lock levels, kept in the process for each database, with snapshot reads: any number of
//! SHARED holders, at most one writer (RESERVED, then EXCLUSIVE to commit). Pure state, no I/O.
//!
//! Unlike SQLite's unix VFS, readers never hold a writer back: a SHARED holder reads the pages of the
//! snapshot it took when it locked (`file::MainFile`), so the writer's commit cannot change what it sees.
//! EXCLUSIVE is therefore granted to the writer at once, PENDING is never used, and SHARED is never refused.
//! Writers exclude each other only; a refused request is [`Busy`] and leaves the handle where it was.

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

/// The locks of one database across every handle open on it in the process.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    /// Handles at SHARED or above.
    shared_count: usize,
    writer: Option<Writer>,
}

impl LockTable {
    /// Moves `handle` from `current` up to `wanted` (SHARED, RESERVED or EXCLUSIVE). Returns the level the
    /// handle now holds: `wanted` if granted, else `current`.
    pub(crate) fn lock(&mut self, handle: u64, current: LockLevel, wanted: LockLevel) -> (LockLevel, Result<(), Busy>) {
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
        if self.writer.is_some_and(|w| w.handle != handle) {
            return (current, Err(Busy));
        }
        self.writer = Some(Writer { handle, level: wanted });
        (wanted, Ok(()))
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
        assert_eq!(table.unlock(1, Exclusive, Shared), Shared);
        assert!(!table.is_reserved());
        assert_eq!(table.lock(2, Shared, Reserved), (Reserved, Ok(())), "the next writer");
        assert_eq!(table.unlock(2, Reserved, None), None);
        assert_eq!(table.unlock(1, Shared, None), None);
        assert_eq!(table.unlock(3, Shared, None), None);
        assert_eq!(table.shared_count, 0);
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
