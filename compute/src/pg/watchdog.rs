//! One thread that stops the session calls that must stop while their connection's thread is busy running
//! them: at the session's `statement_timeout`, when the client's connection has closed (checked every
//! [`CLIENT_CHECK_INTERVAL`] on a duplicate of its socket), and, once a call is stopped for any reason (a cancel
//! request too), again every [`REINTERRUPT_INTERVAL`] until it ends (an interrupt that comes before SQLite
//! starts a statement is forgotten when it starts).
//!
//! A connection's thread runs its session's calls itself (`connection`), so nothing on that thread can watch
//! the clock or the socket while a call runs: this thread does, for every connection. A call registers here
//! when it starts ([`watch`]) and leaves when its [`Watched`] guard drops; neither wakes this thread unless the
//! call's deadline comes before the thread's next planned wake (it wakes at least every
//! [`CLIENT_CHECK_INTERVAL`]). A client's check therefore comes between one and two intervals into its call.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::session::{SessionShared, StopReason};
use super::{client_gone, CLIENT_CHECK_INTERVAL, REINTERRUPT_INTERVAL};

/// Calls watched at once, at most: one per connection, and connections are bounded by `CONNECTIONS_MAX`.
const CALLS_MAX: usize = super::CONNECTIONS_MAX;

/// A call being watched.
struct Call {
    shared: Arc<SessionShared>,
    epoch: u64,
    /// When its `statement_timeout` passes, if it has one.
    deadline: Option<Instant>,
    /// When its client is checked next.
    next_check: Instant,
    /// When a stopped call is interrupted again.
    next_interrupt: Option<Instant>,
    watch: Arc<std::net::TcpStream>,
}

#[derive(Default)]
struct State {
    calls: HashMap<u64, Call>,
    next_id: u64,
    /// When the thread wakes next by itself (`None` before it first waits).
    planned_wake: Option<Instant>,
}

struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
}

static WATCHDOG: OnceLock<Option<&'static Watchdog>> = OnceLock::new();

/// The watchdog, its thread started by the first call; `None` if the thread could not be started (then
/// nothing stops calls from outside but cancel requests, which interrupt once: logged).
fn watchdog() -> Option<&'static Watchdog> {
    *WATCHDOG.get_or_init(|| {
        let watchdog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }));
        match std::thread::Builder::new()
            .name("pg-watchdog".to_owned())
            .spawn(move || watchdog.run())
        {
            Ok(_) => Some(watchdog),
            Err(error) => {
                tracing::error!(%error, "starting the statements' watchdog thread: timeouts will not be enforced");
                None
            }
        }
    })
}

/// A call registered with the watchdog; dropping it ends the watch.
pub(super) struct Watched {
    id: Option<u64>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let (Some(id), Some(watchdog)) = (self.id, watchdog()) {
            watchdog.state.lock().calls.remove(&id);
        }
    }
}

/// Watches call `epoch` of `shared`'s session, which starts now: stopped once `timeout_ms` passes (0: never)
/// or its client (`watch`) has gone, and interrupted again while stopped, until the returned guard drops.
pub(super) fn watch(
    shared: &Arc<SessionShared>,
    epoch: u64,
    timeout_ms: u64,
    watch: &Arc<std::net::TcpStream>,
) -> Watched {
    let Some(watchdog) = watchdog() else {
        return Watched { id: None };
    };
    let now = Instant::now();
    let deadline = (timeout_ms > 0).then(|| now + std::time::Duration::from_millis(timeout_ms));
    let mut state = watchdog.state.lock();
    if state.calls.len() >= CALLS_MAX {
        // More calls than connections: a bug elsewhere; the call runs unwatched rather than not at all.
        tracing::error!(
            calls = state.calls.len(),
            "the statements' watchdog is full: a call runs unwatched"
        );
        return Watched { id: None };
    }
    state.next_id += 1;
    let id = state.next_id;
    state.calls.insert(
        id,
        Call {
            shared: shared.clone(),
            epoch,
            deadline,
            next_check: now + CLIENT_CHECK_INTERVAL,
            next_interrupt: None,
            watch: watch.clone(),
        },
    );
    let sooner = match (deadline, state.planned_wake) {
        (Some(deadline), Some(planned)) => deadline < planned,
        (Some(_), None) => true,
        (None, _) => false,
    };
    drop(state);
    if sooner {
        watchdog.wake.notify_one();
    }
    Watched { id: Some(id) }
}

/// Tells the watchdog a call was stopped from elsewhere (a cancel request), so it interrupts it again until it
/// ends.
pub(super) fn stopped_elsewhere() {
    if let Some(watchdog) = watchdog() {
        watchdog.wake.notify_one();
    }
}

impl Watchdog {
    fn run(&self) {
        let mut state = self.state.lock();
        loop {
            let now = Instant::now();
            let mut next = now + CLIENT_CHECK_INTERVAL;
            for call in state.calls.values_mut() {
                if call.shared.stop_reason(call.epoch).is_none() {
                    if call.deadline.is_some_and(|deadline| deadline <= now) {
                        call.shared.stop(call.epoch, StopReason::Timeout);
                    } else if call.next_check <= now {
                        if client_gone(&call.watch) {
                            call.shared.stop(call.epoch, StopReason::ClientGone);
                        }
                        call.next_check = now + CLIENT_CHECK_INTERVAL;
                    }
                }
                match call.shared.stop_reason(call.epoch) {
                    Some(reason) => {
                        let at = *call.next_interrupt.get_or_insert(now + REINTERRUPT_INTERVAL);
                        if at <= now {
                            call.shared.stop(call.epoch, reason);
                            call.next_interrupt = Some(now + REINTERRUPT_INTERVAL);
                        }
                        next = next.min(call.next_interrupt.unwrap_or(next));
                    }
                    None => {
                        next = next.min(call.next_check);
                        if let Some(deadline) = call.deadline {
                            next = next.min(deadline);
                        }
                    }
                }
            }
            state.planned_wake = Some(next);
            self.wake.wait_until(&mut state, next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn socket_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let client = std::net::TcpStream::connect(listener.local_addr().expect("its address")).expect("a client");
        let (server, _) = listener.accept().expect("the server's side");
        server.set_nonblocking(true).expect("non-blocking");
        (client, server)
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}: not within 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_call_is_stopped_at_its_timeout_and_when_its_client_goes_and_not_after_it_ended() {
        let (client, server) = socket_pair();
        let server = Arc::new(server);

        let shared = Arc::new(SessionShared::for_tests());
        let first = shared.next_call();
        shared.begin_call(first);
        let watched = watch(&shared, first, 30, &server);
        wait_for("the timeout", || shared.stop_reason(first) == Some(StopReason::Timeout));
        shared.end_call(first);
        drop(watched);

        let second = shared.next_call();
        shared.begin_call(second);
        let watched = watch(&shared, second, 0, &server);
        std::thread::sleep(CLIENT_CHECK_INTERVAL * 2 + Duration::from_millis(50));
        assert_eq!(shared.stop_reason(second), None, "no timeout, the client is there");
        drop(client);
        wait_for("the client's going", || {
            shared.stop_reason(second) == Some(StopReason::ClientGone)
        });
        shared.end_call(second);
        drop(watched);

        // A call that ended is no longer watched: its timeout never stops the next one.
        let third = shared.next_call();
        let watched = watch(&shared, third, 20, &server);
        drop(watched);
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(shared.stop_reason(third), None);
    }
}
