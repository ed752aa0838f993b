//! The consensus protocol's data: terms, term histories, the messages between proposer and acceptors, and
//! the rule that finds where an acceptor's WAL diverges from the proposer's.
//!
//! Terms follow Raft; WAL positions are LSNs (byte offsets of whole, crc-framed records). A *term history*
//! lists where each term's WAL begins: `[(1, 0/100), (3, 0/5A0)]` says WAL from 0/100 was written in term 1
//! and from 0/5A0 in term 3. A term has one proposer, so two histories that name the same term agree on where
//! it starts and on the WAL written in it.

use bytes::Bytes;
use cambium_types::Lsn;
use serde::{Deserialize, Serialize};

/// A term number. Zero means "none yet".
pub type Term = u64;

/// Where a term's WAL begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermSwitch {
    /// The term.
    pub term: Term,
    /// The first LSN written in it.
    pub lsn: Lsn,
}

/// The terms of a WAL, oldest first.
///
/// **Invariant:** terms strictly increase and LSNs never decrease ([`TermHistory::validate`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermHistory(pub Vec<TermSwitch>);

/// Why a term history is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed term history: {0}")]
pub struct BadTermHistory(pub String);

impl TermHistory {
    /// Checks the ordering invariant (histories from peers are untrusted).
    pub fn validate(&self) -> Result<(), BadTermHistory> {
        for pair in self.0.windows(2) {
            if pair[1].term <= pair[0].term {
                return Err(BadTermHistory(format!(
                    "term {} after term {}",
                    pair[1].term, pair[0].term
                )));
            }
            if pair[1].lsn < pair[0].lsn {
                return Err(BadTermHistory(format!(
                    "term {} starts before term {}",
                    pair[1].term, pair[0].term
                )));
            }
        }
        if self.0.first().is_some_and(|s| s.term == 0) {
            return Err(BadTermHistory("term 0 in a history".into()));
        }
        Ok(())
    }

    /// The entries describing WAL up to `flush_lsn`: those that start at or before it.
    pub fn up_to(&self, flush_lsn: Lsn) -> TermHistory {
        TermHistory(self.0.iter().copied().filter(|s| s.lsn <= flush_lsn).collect())
    }

    /// The term of the last entry (0 when empty).
    pub fn last_term(&self) -> Term {
        self.0.last().map_or(0, |s| s.term)
    }

    /// The history with `switch` appended.
    pub fn with(&self, switch: TermSwitch) -> TermHistory {
        let mut entries = self.0.clone();
        entries.push(switch);
        TermHistory(entries)
    }
}

/// Where the proposer starts streaming to an acceptor: the end of the longest WAL prefix on which the two
/// agree.
///
/// `acceptor` is the acceptor's history up to its flush LSN, `proposer` the proposer's whole history (its last
/// entry is its own term) and `proposer_end_lsn` the end of the proposer's WAL. With no common term the answer
/// is `timeline_start_lsn`: all of the acceptor's WAL goes.
pub fn divergence_lsn(
    acceptor: &TermHistory,
    acceptor_flush_lsn: Lsn,
    proposer: &TermHistory,
    proposer_end_lsn: Lsn,
    timeline_start_lsn: Lsn,
) -> Lsn {
    let common = acceptor
        .0
        .iter()
        .zip(&proposer.0)
        .take_while(|(a, p)| a.term == p.term && a.lsn == p.lsn)
        .count();
    if common == 0 {
        return timeline_start_lsn;
    }
    let end_in = |history: &TermHistory, end: Lsn| history.0.get(common).map_or(end, |next| next.lsn);
    end_in(acceptor, acceptor_flush_lsn).min(end_in(proposer, proposer_end_lsn))
}

/// An acceptor's answer to "what do you have".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptorState {
    /// The highest term it has promised.
    pub term: Term,
    /// Its term history up to its flush LSN.
    pub history: TermHistory,
    /// End of its durable WAL.
    pub flush_lsn: Lsn,
    /// Highest LSN it knows to be committed.
    pub commit_lsn: Lsn,
    /// Where the timeline's WAL begins.
    pub timeline_start_lsn: Lsn,
    /// The lowest LSN it can still serve: WAL below it was removed (below the pageserver's horizon) or, on a
    /// replica made by `PullTimeline`, never copied. At most `commit_lsn`.
    pub oldest_lsn: Lsn,
    /// What the pageserver reported durable in object storage.
    pub remote_consistent_lsn: Lsn,
}

impl AcceptorState {
    /// The term of its last WAL record (0 if it has none): with `flush_lsn`, what donor selection compares.
    pub fn last_log_term(&self) -> Term {
        self.history.last_term()
    }

    /// How far its WAL is, as elections compare it: `(last log term, flush LSN)`. Of two acceptors, the one
    /// with the higher position holds every committed record the other holds (Raft's "at least as
    /// up-to-date"), which is what both donor selection and replica repair rely on.
    pub fn log_position(&self) -> (Term, Lsn) {
        (self.last_log_term(), self.flush_lsn)
    }
}

/// A vote request for `term`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoteRequest {
    /// The term asked for.
    pub term: Term,
}

/// The answer to a vote request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteResponse {
    /// Whether the vote is granted (the term is higher than any promised before).
    pub granted: bool,
    /// The acceptor's state after the request (its term is the one now promised).
    pub state: AcceptorState,
}

/// The proposer of `term` won: the acceptor truncates at `start_streaming_at` and adopts `history`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectedRequest {
    /// The winner's term.
    pub term: Term,
    /// The winner's history; its last entry is `(term, epoch start)`.
    pub history: TermHistory,
    /// Where the acceptor's WAL stops agreeing with the winner's.
    pub start_streaming_at: Lsn,
}

/// WAL to append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendRequest {
    /// The proposer's term.
    pub term: Term,
    /// LSN of the first byte of `data`.
    pub begin_lsn: Lsn,
    /// Whole crc-framed records.
    pub data: Bytes,
    /// The proposer's commit LSN.
    pub commit_lsn: Lsn,
}

/// What an acceptor reports after a sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendResponse {
    /// The acceptor's term.
    pub term: Term,
    /// End of its durable WAL.
    pub flush_lsn: Lsn,
    /// Its commit LSN.
    pub commit_lsn: Lsn,
}

/// Why an acceptor refused a request. Each maps to a precise gRPC status at the service edge.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcceptorError {
    /// The request's term is below the one promised (FAILED_PRECONDITION; the proposer is fenced).
    #[error("term {got} is stale: this safekeeper promised term {current}")]
    StaleTerm {
        /// The request's term.
        got: Term,
        /// The promised term.
        current: Term,
    },
    /// An append in a term whose election this acceptor has not heard of (FAILED_PRECONDITION).
    #[error("no election of term {term} was announced here")]
    NotElected {
        /// The term.
        term: Term,
    },
    /// An append that starts after the end of the WAL (OUT_OF_RANGE).
    #[error("append at {begin_lsn} leaves a gap after the WAL end {write_lsn}")]
    Gap {
        /// Where the append starts.
        begin_lsn: Lsn,
        /// Where the written WAL ends.
        write_lsn: Lsn,
    },
    /// Data that is not whole valid frames (DATA_LOSS for a crc failure, INVALID_ARGUMENT otherwise).
    #[error("bad WAL frame: {0}")]
    BadFrame(#[from] cambium_types::wal::WalDecodeError),
    /// A request that contradicts itself or the acceptor's committed WAL (INVALID_ARGUMENT).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The WAL or control file could not be written or read (INTERNAL; the acceptor must be restarted).
    #[error("safekeeper storage failed: {0}")]
    Storage(#[from] StoreError),
}

/// A storage failure on the acceptor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O error.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Stored bytes fail their checks.
    #[error("corrupt {path} at offset {offset}: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// Where.
        offset: u64,
        /// What failed.
        reason: String,
    },
    /// The store failed earlier and refuses further writes until reopened.
    #[error("the store failed earlier and must be reopened")]
    Poisoned,
}

/// The durable control state of one acceptor's timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlState {
    /// The highest term promised.
    pub term: Term,
    /// The term history of the WAL (may name terms starting beyond the WAL end: announced, not yet reached).
    pub history: TermHistory,
    /// Highest LSN known committed (a lower bound; refreshed by the proposer).
    pub commit_lsn: Lsn,
    /// Where the timeline's WAL begins.
    pub timeline_start_lsn: Lsn,
    /// What the pageserver has made durable in object storage.
    pub remote_consistent_lsn: Lsn,
}

impl ControlState {
    /// The state of a new timeline whose WAL starts at `timeline_start_lsn`.
    pub fn new(timeline_start_lsn: Lsn) -> ControlState {
        ControlState {
            term: 0,
            history: TermHistory::default(),
            commit_lsn: timeline_start_lsn,
            timeline_start_lsn,
            remote_consistent_lsn: timeline_start_lsn,
        }
    }
}

/// An acceptor's WAL: whole frames from `timeline_start_lsn` on, written, then made durable by `sync`.
pub trait WalStore {
    /// End of the written WAL (durable or not).
    fn write_lsn(&self) -> Lsn;
    /// End of the durable WAL.
    fn flush_lsn(&self) -> Lsn;
    /// Appends whole frames at `lsn`, which must equal `write_lsn()`. Not durable until `sync`.
    fn write(&mut self, lsn: Lsn, frames: &[u8]) -> Result<(), StoreError>;
    /// Makes everything written durable (one fdatasync for any number of writes). Returns `flush_lsn`.
    fn sync(&mut self) -> Result<Lsn, StoreError>;
    /// Durably drops the WAL at and after `lsn` (a frame boundary).
    fn truncate(&mut self, lsn: Lsn) -> Result<(), StoreError>;
    /// Up to `max_bytes` of whole frames starting at `lsn` (at least one frame if any is there, even if longer),
    /// not past `end_lsn`.
    fn read(&self, lsn: Lsn, end_lsn: Lsn, max_bytes: usize) -> Result<Bytes, StoreError>;
    /// Removes WAL that lies wholly below `lsn` (whole segments only); never what a read may still need.
    fn remove_below(&mut self, lsn: Lsn) -> Result<(), StoreError>;
    /// The lowest LSN still readable.
    fn oldest_lsn(&self) -> Lsn;
    /// Lets go of resources held for appends (an open file) if no append came for `idle_for`; they are taken
    /// again by the next append. Changes nothing durable. Returns whether anything was let go.
    fn release_idle(&mut self, idle_for: std::time::Duration) -> bool {
        let _ = idle_for;
        false
    }
}

/// Where an acceptor keeps its control state.
pub trait ControlStore {
    /// Replaces the durable state atomically (temp file, fsync, rename, fsync dir, or equivalent).
    fn persist(&mut self, state: &ControlState) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(entries: &[(Term, u64)]) -> TermHistory {
        TermHistory(
            entries
                .iter()
                .map(|&(term, lsn)| TermSwitch { term, lsn: Lsn(lsn) })
                .collect(),
        )
    }

    #[test]
    fn divergence_is_the_end_of_the_common_prefix() {
        let start = Lsn(100);
        // Fresh acceptor: from the start.
        assert_eq!(divergence_lsn(&h(&[]), start, &h(&[(1, 100)]), Lsn(100), start), start);
        // Same term 1, acceptor has more term-1 WAL than the proposer carried into term 2: cut at 500.
        assert_eq!(
            divergence_lsn(&h(&[(1, 100)]), Lsn(700), &h(&[(1, 100), (2, 500)]), Lsn(900), start),
            Lsn(500)
        );
        // Acceptor behind in term 1: continue from its end.
        assert_eq!(
            divergence_lsn(&h(&[(1, 100)]), Lsn(300), &h(&[(1, 100), (2, 500)]), Lsn(900), start),
            Lsn(300)
        );
        // Acceptor wrote term 2 from another proposer; this proposer skipped term 2: cut where term 2 began.
        assert_eq!(
            divergence_lsn(
                &h(&[(1, 100), (2, 400)]),
                Lsn(800),
                &h(&[(1, 100), (3, 600)]),
                Lsn(900),
                start
            ),
            Lsn(400)
        );
        // Reconnect within the same term: continue from the acceptor's end.
        assert_eq!(
            divergence_lsn(
                &h(&[(1, 100), (2, 500)]),
                Lsn(650),
                &h(&[(1, 100), (2, 500)]),
                Lsn(900),
                start
            ),
            Lsn(650)
        );
    }

    #[test]
    fn validate_and_up_to() {
        assert!(h(&[(1, 100), (3, 100), (4, 200)]).validate().is_ok());
        assert!(h(&[(2, 100), (2, 200)]).validate().is_err());
        assert!(h(&[(2, 300), (3, 200)]).validate().is_err());
        assert!(h(&[(0, 1)]).validate().is_err());
        assert_eq!(h(&[(1, 100), (2, 500)]).up_to(Lsn(499)), h(&[(1, 100)]));
        assert_eq!(h(&[(1, 100), (2, 500)]).up_to(Lsn(500)).last_term(), 2);
    }
}
