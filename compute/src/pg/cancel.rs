//! Cancel requests: the process id and secret key a client was given at startup name its session, whose
//! running call (if any) is stopped at once with SQLite's interrupt (SQLSTATE 57014), and interrupted again by
//! the watchdog until it ends. A request naming no session, or a session between calls, does nothing, as in
//! PostgreSQL; the requester is never told either way.
//!
//! The connection's own thread is busy running the call, so the stop comes from the requester's side
//! (pgwire's own cancel, which drops the handler's future, needs that thread free to poll it).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use pgwire::api::cancel::CancelHandler;
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::startup::SecretKey;

use super::session::{SessionShared, StopReason};

/// The sessions cancel requests may name, by process id and secret key.
#[derive(Default)]
pub(super) struct CancelTargets {
    sessions: Mutex<HashMap<(i32, Bytes), Weak<SessionShared>>>,
}

/// A session registered with [`CancelTargets`]; dropping it unregisters it.
pub(super) struct CancelRegistration {
    key: (i32, Bytes),
    targets: Arc<CancelTargets>,
}

impl Drop for CancelRegistration {
    fn drop(&mut self) {
        self.targets.sessions.lock().remove(&self.key);
    }
}

impl CancelTargets {
    /// Lets cancel requests with `pid` and `secret` stop `shared`'s calls until the registration drops. At most
    /// one registration per connection: the map is bounded by the connections served.
    pub(super) fn register(
        self: &Arc<Self>,
        pid: i32,
        secret: &SecretKey,
        shared: &Arc<SessionShared>,
    ) -> CancelRegistration {
        let key = (pid, secret.to_bytes());
        self.sessions.lock().insert(key.clone(), Arc::downgrade(shared));
        CancelRegistration {
            key,
            targets: self.clone(),
        }
    }

    /// Stops the running call of the session `pid` and `secret` name; whether there was such a session.
    pub(super) fn cancel(&self, pid: i32, secret: &SecretKey) -> bool {
        let shared = self
            .sessions
            .lock()
            .get(&(pid, secret.to_bytes()))
            .and_then(Weak::upgrade);
        match shared {
            Some(shared) => {
                shared.stop_running(StopReason::Cancel);
                super::watchdog::stopped_elsewhere();
                true
            }
            None => false,
        }
    }
}

#[async_trait]
impl CancelHandler for CancelTargets {
    async fn on_cancel_request(&self, request: CancelRequest) {
        if !self.cancel(request.pid, &request.secret_key) {
            tracing::debug!(pid = request.pid, "a cancel request named no session");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_stops_only_the_call_its_key_names_while_registered() {
        let targets = Arc::new(CancelTargets::default());
        let shared = Arc::new(SessionShared::for_tests());
        let registration = targets.register(7, &SecretKey::I32(42), &shared);

        assert!(!targets.cancel(7, &SecretKey::I32(41)), "a wrong secret names nothing");
        assert!(
            !targets.cancel(8, &SecretKey::I32(42)),
            "a wrong process id names nothing"
        );

        // Between calls: nothing to stop, and the next call is not stopped by it.
        assert!(targets.cancel(7, &SecretKey::I32(42)));
        let call = shared.next_call();
        shared.begin_call(call);
        assert_eq!(shared.stop_reason(call), None);

        // The 4-byte key of protocol 3.2 names the same session as the i32 one.
        assert!(targets.cancel(7, &SecretKey::Bytes(Bytes::copy_from_slice(&42i32.to_be_bytes()))));
        assert_eq!(shared.stop_reason(call), Some(StopReason::Cancel));
        shared.end_call(call);

        drop(registration);
        assert!(!targets.cancel(7, &SecretKey::I32(42)), "unregistered");
    }
}
