//! One connection's side of its session: calls run on the blocking pool, stopped by cancel requests, the
//! statement timeout or the client going, and the idle-in-transaction timer.

use super::*;
use std::time::Instant;

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
    /// Counts calls into the session: the idle-transaction timer fires only if none came since it was set.
    pub(super) activity: Arc<AtomicU64>,
    pub(super) config: ServeConfig,
}

impl Connection {
    /// Runs `f` on the session on the blocking pool, stopping it as the module doc says: on a cancel request,
    /// at the session's statement timeout, or when the client goes. Afterwards, if the session sits in a
    /// transaction, sets its idle-transaction timer.
    pub(super) async fn run<T>(&self, f: impl FnOnce(&mut Session) -> T + Send + 'static) -> PgWireResult<T>
    where
        T: Send + 'static,
    {
        self.run_cancellable(None, f).await
    }

    /// [`Connection::run`], also stopped when `cancel` fires: for the calls pgwire does not watch for cancel
    /// requests itself (Describe, which may read a row to type a statement's columns).
    pub(super) async fn run_cancellable<T>(
        &self,
        cancel: Option<futures::channel::oneshot::Receiver<()>>,
        f: impl FnOnce(&mut Session) -> T + Send + 'static,
    ) -> PgWireResult<T>
    where
        T: Send + 'static,
    {
        let shared = self.shared.get().cloned().ok_or(PgWireError::NotReadyForQuery)?;
        let run_started = Instant::now();
        self.activity.fetch_add(1, Ordering::SeqCst);
        shared.begin_query();
        let slot = self.slot.clone();
        let done = Arc::new(AtomicBool::new(false));
        let mut task = {
            let done = done.clone();
            tokio::task::spawn_blocking(move || {
                let mut guard = slot.lock();
                let started = Instant::now();
                let value = guard.as_mut().map(|session| {
                    // This pool thread may have run another session's call: the date order is this one's.
                    session.enter_thread();
                    f(session)
                });
                done.store(true, Ordering::SeqCst);
                (value, started.elapsed())
            })
        };
        // pgwire drops this future on a cancel request: then the statement is stopped (see the module doc).
        let cancel_on_drop = CancelOnDrop {
            shared: shared.clone(),
            done,
        };
        let timeout_ms = shared.statement_timeout_ms();
        let timeout = tokio::time::sleep(Duration::from_millis(timeout_ms));
        tokio::pin!(timeout);
        let mut stopped: Option<StopReason> = None;
        let mut cancel = cancel;
        // The first check one period in: a statement that ends sooner costs no system call.
        let mut check = tokio::time::interval_at(
            tokio::time::Instant::now() + CLIENT_CHECK_INTERVAL,
            CLIENT_CHECK_INTERVAL,
        );
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reinterrupt =
            tokio::time::interval_at(tokio::time::Instant::now() + REINTERRUPT_INTERVAL, REINTERRUPT_INTERVAL);
        let result = loop {
            tokio::select! {
                joined = &mut task => break joined,
                fired = async { cancel.as_mut().expect("guarded by the branch condition").await }, if cancel.is_some() => {
                    cancel = None;
                    // An error is the sender replaced or dropped: no cancel.
                    if fired.is_ok() && stopped.is_none() {
                        stopped = Some(StopReason::Cancel);
                        shared.stop(StopReason::Cancel);
                    }
                }
                () = &mut timeout, if timeout_ms > 0 && stopped.is_none() => {
                    stopped = Some(StopReason::Timeout);
                    shared.stop(StopReason::Timeout);
                }
                _ = check.tick() => {
                    if stopped.is_none() && client_gone(&self.watch) {
                        stopped = Some(StopReason::ClientGone);
                        shared.stop(StopReason::ClientGone);
                    }
                }
                _ = reinterrupt.tick(), if stopped.is_some() => {
                    if let Some(reason) = stopped {
                        shared.stop(reason);
                    }
                }
            }
        };
        drop(cancel_on_drop);
        self.activity.fetch_add(1, Ordering::SeqCst);
        let (value, call_time) = result.map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        crate::metrics::METRICS.record_session_call(call_time, run_started.elapsed());
        let value = value.ok_or(PgWireError::NotReadyForQuery)?;
        self.arm_idle_timer(&shared);
        Ok(value)
    }

    /// If the session is in a transaction and has an idle timeout, ends the transaction and the connection
    /// once that long passes with no call into the session.
    pub(super) fn arm_idle_timer(&self, shared: &SessionShared) {
        let idle_ms = shared.idle_in_transaction_timeout_ms();
        if idle_ms == 0 || !shared.in_transaction() {
            return;
        }
        let epoch = self.activity.load(Ordering::SeqCst);
        let (activity, slot, watch) = (self.activity.clone(), self.slot.clone(), self.watch.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(idle_ms)).await;
            if activity.load(Ordering::SeqCst) != epoch {
                return;
            }
            let _ended = tokio::task::spawn_blocking(move || {
                let mut guard = slot.lock();
                // Checked again under the session's lock, which every call takes: no statement slips in.
                if activity.load(Ordering::SeqCst) != epoch {
                    return;
                }
                let Some(session) = guard.as_mut() else {
                    return;
                };
                if session.abort_idle_transaction() {
                    // Nothing else uses the session from now on: the connection is told and closed.
                    *guard = None;
                    end_connection(
                        &watch,
                        IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
                        "terminating connection due to idle-in-transaction timeout",
                    );
                }
            })
            .await;
        });
    }
}

/// Stops the session's statement if the future running it is dropped before the statement finished (a
/// cancel request), and keeps interrupting it until it has.
pub(super) struct CancelOnDrop {
    pub(super) shared: Arc<SessionShared>,
    pub(super) done: Arc<AtomicBool>,
}

/// How long a cancelled statement is interrupted again before it is left to finish by itself (a statement
/// waiting on the store is bounded by the store's own deadlines).
pub(super) const CANCEL_FOLLOW_UP: Duration = Duration::from_secs(60);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.done.load(Ordering::SeqCst) {
            return;
        }
        self.shared.stop(StopReason::Cancel);
        let (shared, done) = (self.shared.clone(), self.done.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let deadline = tokio::time::Instant::now() + CANCEL_FOLLOW_UP;
                while !done.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(REINTERRUPT_INTERVAL).await;
                    shared.stop(StopReason::Cancel);
                }
            });
        }
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
