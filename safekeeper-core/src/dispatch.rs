//! Maps protocol [`Request`]s onto an [`Acceptor`], for every driver (the gRPC service and the simulator).

use crate::acceptor::Acceptor;
use crate::proposer::{Refusal, Reply, Request};
use crate::protocol::{AcceptorError, ControlStore, WalStore};

/// Largest read served in one reply.
pub const READ_BYTES_MAX: usize = 4 * 1024 * 1024;

/// What serving a request produced.
#[derive(Debug)]
pub enum Served {
    /// The reply to send now.
    Reply(Reply),
    /// An append was written: its acknowledgement follows the next [`Acceptor::sync`].
    NeedsSync,
}

/// Serves one request.
pub fn serve<W: WalStore, C: ControlStore>(acceptor: &mut Acceptor<W, C>, request: Request) -> Served {
    let result = match request {
        Request::GetState => Ok(Reply::State(acceptor.state())),
        Request::Vote(vote) => acceptor.vote(vote).map(Reply::Vote),
        Request::Elected(elected) => acceptor.elected(elected).map(|()| Reply::Elected),
        Request::Append(append) => match acceptor.append(&append) {
            Ok(()) => return Served::NeedsSync,
            Err(e) => Err(e),
        },
        Request::ReadWal {
            term,
            start_lsn,
            max_bytes,
        } => acceptor
            .read_wal_in_term(term, start_lsn, max_bytes.min(READ_BYTES_MAX))
            .map(|data| Reply::Wal { start_lsn, data }),
    };
    Served::Reply(result.unwrap_or_else(|e| Reply::Refused(refusal(&e))))
}

/// The refusal that reports `error` to a proposer.
pub fn refusal(error: &AcceptorError) -> Refusal {
    match error {
        AcceptorError::StaleTerm { current, .. } => Refusal::StaleTerm { current: *current },
        AcceptorError::NotElected { .. } => Refusal::NotElected,
        AcceptorError::Gap { write_lsn, .. } => Refusal::Gap { write_lsn: *write_lsn },
        other => Refusal::Other(other.to_string()),
    }
}
