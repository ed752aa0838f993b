//! Maps protocol [`Request`]s onto an [`Acceptor`], for every driver: the simulation and the proposer's unit
//! tests call [`serve`], the gRPC service of the `safekeeper` crate calls [`apply`] (so it can report each
//! [`AcceptorError`] as its own status), and both run the same mapping.

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

/// Applies one request to the acceptor: the one mapping of protocol requests onto acceptor calls. A refused
/// request is its [`AcceptorError`], which each driver reports in its own terms ([`serve`] as a [`Refusal`],
/// the gRPC service as a status). An accepted append is written but not yet durable: the driver syncs
/// ([`Acceptor::sync`], once for a whole batch) and acknowledges it with the sync's response.
pub fn apply<W: WalStore, C: ControlStore>(
    acceptor: &mut Acceptor<W, C>,
    request: Request,
) -> Result<Served, AcceptorError> {
    let reply = match request {
        Request::GetState => Reply::State(acceptor.state()),
        Request::Vote(vote) => Reply::Vote(acceptor.vote(vote)?),
        Request::Elected(elected) => {
            acceptor.elected(elected)?;
            Reply::Elected
        }
        Request::Append(append) => {
            acceptor.append(&append)?;
            return Ok(Served::NeedsSync);
        }
        Request::ReadWal {
            term,
            start_lsn,
            max_bytes,
        } => Reply::Wal {
            start_lsn,
            data: acceptor.read_wal_in_term(term, start_lsn, max_bytes.min(READ_BYTES_MAX))?,
        },
    };
    Ok(Served::Reply(reply))
}

/// Serves one request: [`apply`], with a refusal told as [`Reply::Refused`].
pub fn serve<W: WalStore, C: ControlStore>(acceptor: &mut Acceptor<W, C>, request: Request) -> Served {
    apply(acceptor, request).unwrap_or_else(|e| Served::Reply(Reply::Refused(refusal(&e))))
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
