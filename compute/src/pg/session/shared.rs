//! What a session shares with its connection's async side without the session's lock: how to stop the
//! running statement and why, the timeouts that side enforces, and the session's notifications.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
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
pub(crate) struct SessionShared {
    pub(super) interrupt: InterruptHandle,
    /// A `StopReason` as its number, 0 for none: set before the interrupt, cleared when a statement starts.
    pub(super) stop: AtomicU8,
    pub(super) statement_timeout_ms: AtomicU64,
    pub(super) idle_in_transaction_timeout_ms: AtomicU64,
    pub(super) in_transaction: AtomicBool,
    /// The session's queue of notifications (`LISTEN`), drained by the connection.
    pub(super) listener: Arc<pgcompat::notify::Listener>,
    /// Woken when a notification arrives for the session.
    pub(super) notified: tokio::sync::Notify,
}

impl SessionShared {
    /// Stops the running statement (SQLite's interrupt) for `reason`; the first reason given wins. Also stops
    /// the statements still to come of the same query.
    pub(crate) fn stop(&self, reason: StopReason) {
        let _first = self
            .stop
            .compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst);
        self.interrupt.interrupt();
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

    /// Forgets an earlier stop: called by the connection before it hands the session a new query.
    pub(crate) fn begin_query(&self) {
        self.stop.store(0, Ordering::SeqCst);
    }

    pub(super) fn stopped(&self) -> Option<StopReason> {
        match self.stop.load(Ordering::SeqCst) {
            1 => Some(StopReason::Cancel),
            2 => Some(StopReason::Timeout),
            3 => Some(StopReason::ClientGone),
            _ => None,
        }
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

/// The server's defaults for a new session's timeouts, in milliseconds (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionDefaults {
    /// `statement_timeout`.
    pub statement_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout`.
    pub idle_in_transaction_timeout_ms: u64,
}
