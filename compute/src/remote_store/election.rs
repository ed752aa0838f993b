//! The proposer a writing store commits through, and a new branch's election run while its store already
//! reads (issue 12 item 6).
//!
//! A store normally starts once elected: the epoch start LSN its proposer wins with is where its reads start.
//! A branch this host has just created has no WAL of its own yet (its safekeepers made its timeline at the
//! branch point moments before, and no other proposer was ever told of it), so its reads can start at the
//! branch point at once ([`super::RemotePageStore::start_new_branch`]) while the election runs; only a commit
//! waits for the outcome. An election that ends at any other LSN means something else wrote the timeline: the
//! store fails (its sessions reconnect; the next start campaigns as usual) and nothing is committed on the reads
//! it served.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use walproposer::WalProposer;

/// The proposer of a store, once there is one.
pub(super) enum Writer {
    /// Read-only at a fixed LSN: every commit is refused.
    ReadOnly,
    /// Elected before the store started.
    Elected(Arc<WalProposer>),
    /// Being elected: a commit waits for the outcome.
    Electing(Arc<Election>),
}

/// How an election in the background ended: the elected proposer, or why the store cannot write.
pub(super) type Outcome = Result<Arc<WalProposer>, String>;

/// An election under way, decided once by the task that runs it.
pub(super) struct Election {
    outcome: Mutex<Option<Outcome>>,
    decided: Condvar,
}

impl Election {
    /// An election not decided yet.
    pub(super) fn new() -> Arc<Election> {
        Arc::new(Election {
            outcome: Mutex::new(None),
            decided: Condvar::new(),
        })
    }

    /// Records the outcome and wakes every waiter. Called once.
    pub(super) fn decide(&self, outcome: Outcome) {
        let mut slot = self.outcome.lock();
        assert!(slot.is_none(), "an election was decided twice");
        *slot = Some(outcome);
        drop(slot);
        self.decided.notify_all();
    }

    /// The outcome, waiting for it at most `timeout`; `None` if it is still undecided then.
    pub(super) fn wait(&self, timeout: Duration) -> Option<Outcome> {
        let deadline = Instant::now() + timeout;
        let mut slot = self.outcome.lock();
        while slot.is_none() {
            if self.decided.wait_until(&mut slot, deadline).timed_out() {
                break;
            }
        }
        slot.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_gets_the_outcome_decided_after_it_began_waiting() {
        let election = Election::new();
        assert!(election.wait(Duration::from_millis(1)).is_none());
        let deciding = Arc::clone(&election);
        let decider = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            deciding.decide(Err("fenced".to_owned()));
        });
        let outcome = election
            .wait(Duration::from_secs(10))
            .expect("decided within the bound");
        assert_eq!(outcome.err().as_deref(), Some("fenced"));
        assert!(election.wait(Duration::ZERO).is_some(), "the outcome stays");
        decider.join().expect("the decider ran");
    }
}
