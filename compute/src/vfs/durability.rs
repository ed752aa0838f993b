//! When what a connection read or wrote may be reported (DESIGN §5, early lock release).
//!
//! A store may return from a commit once the transaction is handed over, before a quorum has it
//! ([`PageStore::commit_dirty`]), and its latest snapshot then includes commits in flight. So that nobody is told
//! of a commit that could still fail:
//!
//! - **Deferred** (a session of the pg front, inside [`with_deferred_durability`]): a commit releases the
//!   writer's lock as soon as it is handed over, and the LSNs the call depends on are noted on this thread —
//!   the snapshot a reader took, the end of a commit, the snapshot of a write transaction that ended without
//!   committing. When the call ends, before anything is sent to the client, it waits until they are durable.
//!   A write transaction's own statements answer without waiting (it builds on its predecessor and its COMMIT
//!   waits for its own LSN, which implies the predecessor's; a ROLLBACK waits for its snapshot).
//! - **Immediate** (any other caller: tests, tools): a handle waits at its SHARED lock until its snapshot is
//!   durable and at its commit until the commit is, as if commits were durable on return.

use std::cell::RefCell;
use std::sync::Arc;

use cambium_types::Lsn;

use crate::metrics::{Metrics, METRICS};
use crate::page_store::{PageStore, PageStoreError};

/// What the call's results depend on of `store`, noted by the handle `handle`.
struct Owed {
    handle: u64,
    store: Arc<dyn PageStore>,
    /// The highest snapshot read at (dropped when the handle becomes the writer: [`forgive`]).
    read_lsn: Lsn,
    /// The end of the handle's last commit in this call (never dropped).
    commit_lsn: Lsn,
}

/// Why a handle depends on an LSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dependency {
    /// It read at a snapshot of that LSN.
    Read,
    /// Its commit ends there.
    Commit,
}

thread_local! {
    /// The LSNs the deferred call on this thread depends on; `None`: no deferred call runs on this thread.
    static DEFERRED: RefCell<Option<Vec<Owed>>> = const { RefCell::new(None) };
}

/// Runs `f` (one call of a session into SQLite, on this thread) with durability deferred to its end (see
/// the module doc); returns its value and, once it has waited, whether everything the call read or wrote
/// is durable. An `Err` means a commit it depends on failed or its outcome is unknown: the store has failed,
/// and the call's results must not be reported as done.
pub fn with_deferred_durability<T>(f: impl FnOnce() -> T) -> (T, Result<(), PageStoreError>) {
    /// Ends the deferral even if `f` unwinds, so this thread's next call starts clean.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            DEFERRED.with(|deferred| deferred.borrow_mut().take());
        }
    }
    let previous = DEFERRED.with(|deferred| deferred.borrow_mut().replace(Vec::new()));
    assert!(previous.is_none(), "deferred durability entered twice on one thread");
    let reset = Reset;
    let value = f();
    let owed = DEFERRED
        .with(|deferred| deferred.borrow_mut().replace(Vec::new()))
        .unwrap_or_default();
    drop(reset);
    let started = std::time::Instant::now();
    let durable = wait_all(owed);
    Metrics::add_micros(&METRICS.session_durable_wait_us_total, started.elapsed());
    (value, durable)
}

/// The handle `handle` of `store` read or wrote at `lsn`: in a deferred call, noted for its end; else
/// waited for now.
pub(crate) fn depend_on(
    handle: u64,
    store: &Arc<dyn PageStore>,
    lsn: Lsn,
    dependency: Dependency,
) -> Result<(), PageStoreError> {
    if note(handle, store, lsn, dependency) {
        Ok(())
    } else {
        store.wait_durable(lsn)
    }
}

/// In a deferred call, notes that the handle `handle` of `store` depends on `lsn` and returns `true`; else
/// returns `false`. One entry per handle (the highest LSNs), so a call notes at most as many as it has
/// handles.
pub(crate) fn note(handle: u64, store: &Arc<dyn PageStore>, lsn: Lsn, dependency: Dependency) -> bool {
    DEFERRED.with(|deferred| {
        let mut deferred = deferred.borrow_mut();
        let Some(owed) = deferred.as_mut() else {
            return false;
        };
        let index = match owed.iter().position(|entry| entry.handle == handle) {
            Some(index) => index,
            None => {
                owed.push(Owed {
                    handle,
                    store: Arc::clone(store),
                    read_lsn: Lsn(0),
                    commit_lsn: Lsn(0),
                });
                owed.len() - 1
            }
        };
        let entry = &mut owed[index];
        match dependency {
            Dependency::Read => entry.read_lsn = entry.read_lsn.max(lsn),
            Dependency::Commit => entry.commit_lsn = entry.commit_lsn.max(lsn),
        }
        true
    })
}

/// The handle `handle` became the writer: what it read so far is carried by its transaction's end (the
/// commit's LSN is past it; a rollback notes its snapshot again). Its earlier commits in this call stay.
pub(crate) fn forgive(handle: u64) {
    DEFERRED.with(|deferred| {
        if let Some(owed) = deferred.borrow_mut().as_mut() {
            for entry in owed.iter_mut().filter(|entry| entry.handle == handle) {
                entry.read_lsn = Lsn(0);
            }
        }
    });
}

/// Waits for the highest LSN noted of each store.
fn wait_all(mut owed: Vec<Owed>) -> Result<(), PageStoreError> {
    let lsn_of = |entry: &Owed| entry.read_lsn.max(entry.commit_lsn);
    owed.sort_by_key(|entry| std::cmp::Reverse(lsn_of(entry)));
    let mut waited: Vec<&Arc<dyn PageStore>> = Vec::new();
    for entry in &owed {
        if waited.iter().any(|store| Arc::ptr_eq(store, &entry.store)) {
            continue;
        }
        entry.store.wait_durable(lsn_of(entry))?;
        waited.push(&entry.store);
    }
    Ok(())
}
