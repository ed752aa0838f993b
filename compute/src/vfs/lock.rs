//! SQLite's file lock levels, kept in the process for each database: many SHARED holders, at most one
//! writer that climbs RESERVED → PENDING → EXCLUSIVE. Pure state, no I/O.
//!
//! The rules are those of SQLite's unix VFS: a PENDING writer keeps new readers out; EXCLUSIVE needs every
//! other reader gone; a refused request is `Busy` and leaves the handle where it was (except that a handle
//! refused EXCLUSIVE because of readers keeps the PENDING it got, so the readers drain).

/// A lock level of one file handle, ordered as SQLite orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LockLevel {
    None,
    Shared,
    Reserved,
    Pending,
    Exclusive,
}

/// A lock request was refused because another handle holds a conflicting level.
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
    /// handle now holds, which is `current` or `Pending` when the request was refused.
    pub(crate) fn lock(&mut self, handle: u64, current: LockLevel, wanted: LockLevel) -> (LockLevel, Result<(), Busy>) {
        assert!(
            wanted != LockLevel::Pending,
            "SQLite never asks for PENDING: handle {handle}"
        );
        if wanted <= current {
            return (current, Ok(()));
        }
        let other_writer = self.writer.filter(|w| w.handle != handle);
        match wanted {
            LockLevel::Shared => {
                assert!(
                    current == LockLevel::None,
                    "handle {handle} at {current:?} asks for SHARED"
                );
                if other_writer.is_some_and(|w| w.level >= LockLevel::Pending) {
                    return (current, Err(Busy));
                }
                self.shared_count += 1;
                (LockLevel::Shared, Ok(()))
            }
            LockLevel::Reserved => {
                assert!(
                    current == LockLevel::Shared,
                    "handle {handle} at {current:?} asks for RESERVED"
                );
                if other_writer.is_some() {
                    return (current, Err(Busy));
                }
                self.writer = Some(Writer {
                    handle,
                    level: LockLevel::Reserved,
                });
                (LockLevel::Reserved, Ok(()))
            }
            LockLevel::Exclusive => {
                assert!(
                    current >= LockLevel::Shared,
                    "handle {handle} at {current:?} asks for EXCLUSIVE"
                );
                if other_writer.is_some() {
                    return (current, Err(Busy));
                }
                // This handle's own SHARED is counted: every other reader must be gone.
                if self.shared_count > 1 {
                    self.writer = Some(Writer {
                        handle,
                        level: LockLevel::Pending,
                    });
                    return (LockLevel::Pending, Err(Busy));
                }
                self.writer = Some(Writer {
                    handle,
                    level: LockLevel::Exclusive,
                });
                (LockLevel::Exclusive, Ok(()))
            }
            LockLevel::None | LockLevel::Pending => unreachable!("checked above: {wanted:?}"),
        }
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
    fn readers_share_and_one_writer_waits_for_them() {
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
            (Pending, Err(Busy)),
            "reader 2 is still there"
        );
        assert_eq!(
            table.lock(3, None, Shared),
            (None, Err(Busy)),
            "PENDING keeps new readers out"
        );
        assert_eq!(table.unlock(2, Shared, None), None);
        assert_eq!(table.lock(1, Pending, Exclusive), (Exclusive, Ok(())));
        assert_eq!(table.unlock(1, Exclusive, Shared), Shared);
        assert!(!table.is_reserved());
        assert_eq!(table.lock(3, None, Shared), (Shared, Ok(())));
        assert_eq!(table.unlock(1, Shared, None), None);
        assert_eq!(table.unlock(3, Shared, None), None);
        assert_eq!(table.shared_count, 0);
    }

    #[test]
    fn exclusive_straight_from_shared() {
        let mut table = LockTable::default();
        assert_eq!(table.lock(1, None, Shared), (Shared, Ok(())));
        assert_eq!(table.lock(1, Shared, Exclusive), (Exclusive, Ok(())));
        assert_eq!(table.lock(2, None, Shared), (None, Err(Busy)));
        assert_eq!(table.unlock(1, Exclusive, None), None);
        assert_eq!(table.lock(2, None, Shared), (Shared, Ok(())));
    }
}
