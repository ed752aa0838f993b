//! What a session shares with its connection's async side without the session's lock: how to stop the
//! running statement and why, the timeouts that side enforces, and the session's notifications.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::InterruptHandle;

/// Why the running statement was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum StopReason {
    /// A cancel request (psql's Ctrl-C).
    Cancel = 1,
    /// `statement_timeout` passed.
    Timeout = 2,
    /// The client's connection closed.
    ClientGone = 3,
}

/// What the connection's async side shares with its session without taking the session's lock: how to stop
/// the running statement and why, and the settings that side enforces.
///
/// **Invariant:** a stop reaches only the call it was meant for. Each call into the session has an epoch
/// ([`SessionShared::next_call`]); a stop names its call's epoch, is seen by [`SessionShared::stopped`] only
/// while that call runs on the session's thread, and interrupts SQLite only then (checked under `gate`, which a
/// call also takes to start and end). A cancel's follow-up interrupts, still arriving after the client was told
/// 57014 and sent its next query, never stop that next query.
pub(crate) struct SessionShared {
    pub(super) interrupt: InterruptHandle,
    /// The call a stop is for and why: its epoch shifted left 8 bits, or'ed with the `StopReason`'s number;
    /// 0 for none.
    pub(super) stop: AtomicU64,
    /// The epoch of the call running on the session's thread, 0 for none.
    pub(super) running: AtomicU64,
    /// The last epoch handed out.
    pub(super) epochs: AtomicU64,
    /// Held to check which call runs and interrupt it, and to start or end a call.
    pub(super) gate: parking_lot::Mutex<()>,
    pub(super) statement_timeout_ms: AtomicU64,
    pub(super) idle_in_transaction_timeout_ms: AtomicU64,
    pub(super) in_transaction: AtomicBool,
    /// The session's queue of notifications (`LISTEN`), drained by the connection.
    pub(super) listener: Arc<pgcompat::notify::Listener>,
    /// Woken when a notification arrives for the session.
    pub(super) notified: tokio::sync::Notify,
}

impl SessionShared {
    /// Stops call `epoch` (SQLite's interrupt once it runs) for `reason`; the first reason given for a call wins.
    /// Also stops the statements still to come of the same call. A stop for a call that ended does nothing.
    pub(crate) fn stop(&self, epoch: u64, reason: StopReason) {
        assert!(epoch > 0 && epoch < 1 << 56, "a call's epoch: {epoch}");
        let wanted = epoch << 8 | reason as u64;
        let mut current = self.stop.load(Ordering::SeqCst);
        loop {
            if current >> 8 >= epoch {
                break; // this call's stop is set already (its first reason wins), or a later call's is
            }
            match self
                .stop
                .compare_exchange(current, wanted, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        let _gate = self.gate.lock();
        if self.running.load(Ordering::SeqCst) == epoch {
            self.interrupt.interrupt();
        }
    }

    /// Stops the call running now, if one is (a cancel request, which names no call).
    pub(crate) fn stop_running(&self, reason: StopReason) {
        let epoch = self.running.load(Ordering::SeqCst);
        if epoch != 0 {
            self.stop(epoch, reason);
        }
    }

    /// Why call `epoch` was stopped, if it was (whether or not it still runs).
    pub(crate) fn stop_reason(&self, epoch: u64) -> Option<StopReason> {
        let stop = self.stop.load(Ordering::SeqCst);
        if stop >> 8 != epoch {
            return None;
        }
        reason_of(stop)
    }

    /// A new call's epoch, for [`SessionShared::begin_call`] and its stops.
    pub(crate) fn next_call(&self) -> u64 {
        self.epochs.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Call `epoch` starts on the session's thread: from now on its stops are seen and interrupt it.
    pub(crate) fn begin_call(&self, epoch: u64) {
        let _gate = self.gate.lock();
        self.running.store(epoch, Ordering::SeqCst);
    }

    /// Call `epoch` ended: no stop reaches the session until the next call begins.
    pub(crate) fn end_call(&self, epoch: u64) {
        let _gate = self.gate.lock();
        let _ = self
            .running
            .compare_exchange(epoch, 0, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The notifications waiting for the client, if it may have them now (outside a transaction).
    pub(crate) fn take_notifications(&self) -> Vec<pgcompat::notify::Notification> {
        if self.in_transaction() || !self.listener.has_pending() {
            return Vec::new();
        }
        let dropped = self.listener.take_dropped();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "a client's notification queue was full: its oldest notifications were dropped"
            );
        }
        self.listener.take()
    }

    /// Resolves when a notification arrives (or arrived since the last call).
    pub(crate) async fn notification_arrived(&self) {
        self.notified.notified().await;
    }

    /// Why the running call was stopped, if it was.
    pub(super) fn stopped(&self) -> Option<StopReason> {
        let stop = self.stop.load(Ordering::SeqCst);
        let running = self.running.load(Ordering::SeqCst);
        if running == 0 || stop >> 8 != running {
            return None;
        }
        reason_of(stop)
    }

    /// The session's `statement_timeout` in milliseconds (0: none).
    pub(crate) fn statement_timeout_ms(&self) -> u64 {
        self.statement_timeout_ms.load(Ordering::SeqCst)
    }

    /// The session's `idle_in_transaction_session_timeout` in milliseconds (0: none).
    pub(crate) fn idle_in_transaction_timeout_ms(&self) -> u64 {
        self.idle_in_transaction_timeout_ms.load(Ordering::SeqCst)
    }

    /// Whether the session is inside a transaction block (as of its last statement).
    pub(crate) fn in_transaction(&self) -> bool {
        self.in_transaction.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
impl SessionShared {
    /// A session's shared half over an in-memory database of its own, for tests of the stops.
    pub(crate) fn for_tests() -> SessionShared {
        let conn = rusqlite::Connection::open_in_memory().expect("an in-memory database");
        SessionShared {
            interrupt: conn.get_interrupt_handle(),
            stop: AtomicU64::new(0),
            running: AtomicU64::new(0),
            epochs: AtomicU64::new(0),
            gate: parking_lot::Mutex::new(()),
            statement_timeout_ms: AtomicU64::new(0),
            idle_in_transaction_timeout_ms: AtomicU64::new(0),
            in_transaction: AtomicBool::new(false),
            listener: pgcompat::notify::Notifier::new("d", 1).listener().clone(),
            notified: tokio::sync::Notify::new(),
        }
    }
}

/// The reason in a `stop` word (its low 8 bits).
fn reason_of(stop: u64) -> Option<StopReason> {
    match stop & 0xff {
        1 => Some(StopReason::Cancel),
        2 => Some(StopReason::Timeout),
        3 => Some(StopReason::ClientGone),
        _ => None,
    }
}

/// The server's defaults for a new session's timeouts, in milliseconds (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionDefaults {
    /// `statement_timeout`.
    pub statement_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout`.
    pub idle_in_transaction_timeout_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> SessionShared {
        SessionShared::for_tests()
    }

    #[test]
    fn a_stop_reaches_only_the_call_it_was_for() {
        let shared = shared();
        let first = shared.next_call();
        shared.begin_call(first);
        assert_eq!(shared.stopped(), None);
        shared.stop(first, StopReason::Cancel);
        shared.stop(first, StopReason::Timeout);
        assert_eq!(shared.stopped(), Some(StopReason::Cancel), "the first reason wins");
        shared.end_call(first);
        assert_eq!(shared.stopped(), None, "no call runs");

        // The next call is queued while the first's cancel still sends follow-up stops: they do not reach it.
        let second = shared.next_call();
        shared.stop(first, StopReason::Cancel);
        shared.begin_call(second);
        shared.stop(first, StopReason::Cancel);
        assert_eq!(shared.stopped(), None, "a stop of the call before");
        shared.stop(second, StopReason::Timeout);
        shared.stop(first, StopReason::Cancel);
        assert_eq!(shared.stopped(), Some(StopReason::Timeout));
        shared.end_call(second);

        // A stop that comes while its call waits for the thread is seen once the call starts.
        let third = shared.next_call();
        shared.stop(third, StopReason::ClientGone);
        assert_eq!(shared.stopped(), None);
        shared.begin_call(third);
        assert_eq!(shared.stopped(), Some(StopReason::ClientGone));
        // A late end of an older call changes nothing.
        shared.end_call(second);
        assert_eq!(shared.stopped(), Some(StopReason::ClientGone));
    }
}
