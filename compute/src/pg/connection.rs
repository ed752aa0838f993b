//! One connection's side of its session: calls run on the connection's own SQLite thread
//! ([`SessionThread`]), stopped by cancel requests, the statement timeout or the client going, and answered
//! only once what they read or wrote is durable (`vfs::with_deferred_durability`: a commit releases the writer's
//! lock when it is handed to the proposer, DESIGN §5); and the idle-in-transaction timer.

use super::*;
use std::time::Instant;

use super::error::{INTERNAL_ERROR, IO_ERROR, OBJECT_NOT_IN_PREREQUISITE_STATE};

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
    /// The thread the session's calls run on, started by the first call.
    pub(super) thread: std::sync::OnceLock<Option<SessionThread>>,
}

/// A job for a [`SessionThread`].
type Job = Box<dyn FnOnce() + Send>;

/// Calls handed to a session's thread and not yet taken, at most (one runs at a time; a call whose future
/// was dropped may still run while the next is handed over).
const SESSION_JOBS_MAX: usize = 4;

/// The stack of a session's thread: what tokio gives its blocking pool's threads, where calls ran before.
const SESSION_STACK_BYTES: usize = 2 << 20;

/// One connection's own thread for its SQLite work. A call wakes this one parked thread and its answer
/// wakes the connection's task, where `spawn_blocking` per call also went through the blocking pool's
/// queue and lock and ran on whichever thread was free. The thread ends once the connection (the only
/// sender) is gone and its last call has run.
pub(super) struct SessionThread {
    jobs: std::sync::mpsc::SyncSender<Job>,
}

impl SessionThread {
    fn start() -> std::io::Result<SessionThread> {
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(SESSION_JOBS_MAX);
        std::thread::Builder::new()
            .name("pg-session".to_owned())
            .stack_size(SESSION_STACK_BYTES)
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    job();
                }
            })?;
        Ok(SessionThread { jobs })
    }

    /// Runs `f` on the thread; the answer comes on the returned channel (dropped unanswered if `f`
    /// panicked, which the thread survives).
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<tokio::sync::oneshot::Receiver<T>, PgWireError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            if let Ok(value) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
                let _ = answer.send(value);
            }
        });
        self.jobs.try_send(job).map_err(|_| {
            SqlError::new(
                OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the session is still running a cancelled statement",
            )
            .into_pgwire()
        })?;
        Ok(answered)
    }
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
        // This call's stops reach it alone (`SessionShared`'s invariant): not the call before it, whose cancel's
        // follow-up may still be interrupting, nor the one after.
        let epoch = shared.next_call();
        let slot = self.slot.clone();
        let done = Arc::new(AtomicBool::new(false));
        let thread = self
            .thread
            .get_or_init(|| {
                SessionThread::start()
                    .inspect_err(|error| tracing::error!(%error, "starting a session's thread"))
                    .ok()
            })
            .as_ref()
            .ok_or_else(|| SqlError::new(INTERNAL_ERROR, "could not start the session's thread").into_pgwire())?;
        let mut task = {
            let (done, shared) = (done.clone(), shared.clone());
            thread.call(move || {
                let mut guard = slot.lock();
                shared.begin_call(epoch);
                let started = Instant::now();
                let value = guard.as_mut().map(|session| {
                    // Other threads run the session's rare calls (its opening, the idle timer).
                    session.enter_thread();
                    // Answers wait until what the call read or wrote is durable (see the module doc).
                    crate::vfs::with_deferred_durability(|| f(session))
                });
                shared.end_call(epoch);
                done.store(true, Ordering::SeqCst);
                (value, started.elapsed())
            })?
        };
        // pgwire drops this future on a cancel request: then the statement is stopped (see the module doc).
        let cancel_on_drop = CancelOnDrop {
            shared: shared.clone(),
            epoch,
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
                        shared.stop(epoch, StopReason::Cancel);
                    }
                }
                () = &mut timeout, if timeout_ms > 0 && stopped.is_none() => {
                    stopped = Some(StopReason::Timeout);
                    shared.stop(epoch, StopReason::Timeout);
                }
                _ = check.tick() => {
                    if stopped.is_none() && client_gone(&self.watch) {
                        stopped = Some(StopReason::ClientGone);
                        shared.stop(epoch, StopReason::ClientGone);
                    }
                }
                _ = reinterrupt.tick(), if stopped.is_some() => {
                    if let Some(reason) = stopped {
                        shared.stop(epoch, reason);
                    }
                }
            }
        };
        drop(cancel_on_drop);
        self.activity.fetch_add(1, Ordering::SeqCst);
        let (value, call_time) = result.map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        crate::metrics::METRICS.record_session_call(call_time, run_started.elapsed());
        let (value, durable) = value.ok_or(PgWireError::NotReadyForQuery)?;
        if let Err(error) = durable {
            // SQLite took the commit, the store did not make it durable (or what was read at it): the
            // outcome is unknown and the store has failed, as for a commit that failed in SQLite's sync.
            return Err(SqlError::new(IO_ERROR, format!("{error}: the statement's outcome is unknown")).into_pgwire());
        }
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
    /// The call it stops.
    pub(super) epoch: u64,
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
        self.shared.stop(self.epoch, StopReason::Cancel);
        let (shared, done, epoch) = (self.shared.clone(), self.done.clone(), self.epoch);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let deadline = tokio::time::Instant::now() + CANCEL_FOLLOW_UP;
                while !done.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(REINTERRUPT_INTERVAL).await;
                    shared.stop(epoch, StopReason::Cancel);
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
