//! One connection's side of its session: calls run on the connection's own thread, the one that reads and
//! writes its socket (`serve_on_own_thread`), stopped by cancel requests (`cancel`), the statement timeout or
//! the client going (`watchdog`), and answered only once what they read or wrote is durable
//! (`vfs::with_deferred_durability`: a commit releases the writer's lock when it is handed to the proposer,
//! DESIGN §5); and the end of a transaction left idle too long.

use super::*;
use std::time::Instant;

use super::error::{INTERNAL_ERROR, IO_ERROR};

/// The session of one connection: empty until authentication opens it.
pub(super) type SessionSlot = Arc<Mutex<Option<Session>>>;

/// What the handlers of one connection share.
pub(super) struct Connection {
    pub(super) slot: SessionSlot,
    /// The session's shared half, set when it opens (read without the slot's lock while a statement runs).
    pub(super) shared: std::sync::OnceLock<Arc<SessionShared>>,
    /// A duplicate of the client's socket: checked for the client having gone, and used to end an idle
    /// transaction's connection.
    pub(super) watch: Arc<std::net::TcpStream>,
    pub(super) config: ServeConfig,
    /// Lets cancel requests reach the session, once it is open and the client has its key.
    pub(super) cancel: std::sync::OnceLock<super::cancel::CancelRegistration>,
}

impl Connection {
    /// Runs `f` on the session, on the connection's own thread (this one: the call blocks it, and nothing else
    /// runs on it), watched as the module doc says: stopped on a cancel request (`cancel`), at the session's
    /// statement timeout or when the client goes (`watchdog`). Afterwards, if the session sits in a
    /// transaction, sets its idle-transaction timer. A call that panics is an internal error of that call; the
    /// session stays.
    pub(super) async fn run<T>(&self, f: impl FnOnce(&mut Session) -> T) -> PgWireResult<T> {
        let shared = self.shared.get().cloned().ok_or(PgWireError::NotReadyForQuery)?;
        let started = Instant::now();
        // This call's stops reach it alone (`SessionShared`'s invariant): not the call before it, whose stop's
        // follow-up may still be interrupting, nor the one after.
        let epoch = shared.next_call();
        let watched = super::watchdog::watch(&shared, epoch, shared.statement_timeout_ms(), &self.watch);
        let called = {
            let mut guard = self.slot.lock();
            shared.begin_call(epoch);
            let call_started = Instant::now();
            let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                guard.as_mut().map(|session| {
                    // Other threads run the session's rare calls (its opening, the idle timer).
                    session.enter_thread();
                    // Answers wait until what the call read or wrote is durable (see the module doc).
                    crate::vfs::with_deferred_durability(|| f(session))
                })
            }));
            let call_time = call_started.elapsed();
            shared.end_call(epoch);
            (called, call_time)
        };
        let (called, call_time) = called;
        drop(watched);
        crate::metrics::METRICS.record_session_call(call_time, started.elapsed());
        let value = called
            .map_err(|_| SqlError::new(INTERNAL_ERROR, "the statement failed inside the server").into_pgwire())?;
        let (value, durable) = value.ok_or(PgWireError::NotReadyForQuery)?;
        if let Err(error) = durable {
            // SQLite took the commit, the store did not make it durable (or what was read at it): the
            // outcome is unknown and the store has failed, as for a commit that failed in SQLite's sync.
            return Err(SqlError::new(IO_ERROR, format!("{error}: the statement's outcome is unknown")).into_pgwire());
        }
        Ok(value)
    }

    /// Ends the session's transaction and the connection if it is still in a transaction: the connection waited
    /// for its client for the session's `idle_in_transaction_session_timeout`. Returns whether it ended.
    pub(super) fn end_idle_transaction(&self) -> bool {
        let mut guard = self.slot.lock();
        let Some(session) = guard.as_mut() else {
            return false;
        };
        if !session.abort_idle_transaction() {
            return false;
        }
        // Nothing else uses the session from now on: the connection is told and closed.
        *guard = None;
        end_connection(
            &self.watch,
            IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
            "terminating connection due to idle-in-transaction timeout",
        );
        true
    }
}

/// Sends a FATAL error to an idle client on its socket and shuts the socket down, so the connection's loop
/// sees the end and drops it.
pub(super) fn end_connection(watch: &std::net::TcpStream, code: &str, message: &str) {
    use std::io::Write;
    let frame = fatal_frame(code, message);
    let mut socket = watch;
    if let Err(error) = socket.write_all(&frame) {
        tracing::debug!(%error, "telling an idle client its connection ends");
    }
    let _ = watch.shutdown(std::net::Shutdown::Both);
}

pub(super) fn check_query_size(query: &str) -> Result<(), SqlError> {
    if query.len() > QUERY_BYTES_MAX {
        return Err(SqlError::new(
            PROGRAM_LIMIT_EXCEEDED,
            format!("query of {} bytes exceeds {QUERY_BYTES_MAX}", query.len()),
        ));
    }
    Ok(())
}
