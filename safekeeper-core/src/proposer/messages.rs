//! What the proposer and the acceptors say to each other: requests, replies and refusals, the envelope that
//! addresses a request, and what the proposer reports to its caller.

use bytes::Bytes;
use cambium_types::Lsn;

use crate::protocol::{AcceptorState, AppendRequest, AppendResponse, ElectedRequest, Term, VoteRequest, VoteResponse};

/// A request to an acceptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// What do you have?
    GetState,
    /// Vote for this term.
    Vote(VoteRequest),
    /// This term was won.
    Elected(ElectedRequest),
    /// Append WAL.
    Append(AppendRequest),
    /// Send up to `max_bytes` of whole frames of durable WAL from `start_lsn` (for catching another up), if
    /// still in `term`'s election (so the WAL read is that term's).
    ReadWal {
        /// The proposer's term.
        term: Term,
        /// First LSN.
        start_lsn: Lsn,
        /// Size bound.
        max_bytes: usize,
    },
}

/// Why an acceptor refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It promised a higher term.
    StaleTerm {
        /// That term.
        current: Term,
    },
    /// It has not heard of this term's election.
    NotElected,
    /// The append starts past its WAL end.
    Gap {
        /// Its WAL end.
        write_lsn: Lsn,
    },
    /// Anything else (bad input, storage failure, unknown timeline).
    Other(String),
}

/// An acceptor's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Answer to `GetState`.
    State(AcceptorState),
    /// Answer to `Vote`.
    Vote(VoteResponse),
    /// `Elected` was applied.
    Elected,
    /// Append acknowledged after a sync.
    Append(AppendResponse),
    /// WAL read for `ReadWal`.
    Wal {
        /// Where it starts.
        start_lsn: Lsn,
        /// Whole frames.
        data: Bytes,
    },
    /// The request was refused.
    Refused(Refusal),
}

/// A request addressed to acceptor `to`, tagged with an id its reply must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Acceptor index.
    pub to: usize,
    /// Request id.
    pub id: u64,
    /// The request.
    pub request: Request,
}

/// Why a record was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// Not (yet) the leader.
    #[error("the proposer is not elected")]
    NotLeader,
    /// Another proposer won a higher term; this one never writes again.
    #[error("fenced: another proposer won term {term}")]
    Fenced {
        /// The higher term.
        term: Term,
    },
    /// Too much uncommitted WAL; retry after commits advance.
    #[error("backlog full: {backlog_bytes} uncommitted bytes")]
    Backpressure {
        /// Uncommitted bytes held.
        backlog_bytes: usize,
    },
    /// The record is not one valid frame.
    #[error("not a single valid WAL frame")]
    BadFrame,
}

/// Where the proposer stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not started.
    Idle,
    /// Campaigning for a term.
    Campaigning,
    /// Elected for `term`; WAL continues at `epoch_start_lsn`.
    Leader {
        /// The term.
        term: Term,
        /// Where this term's WAL begins.
        epoch_start_lsn: Lsn,
    },
    /// Fenced by a higher term.
    Fenced {
        /// The higher term.
        term: Term,
    },
    /// The campaign failed (no majority in time).
    Failed(String),
}
