//! The safekeeper service's wire contract on the Rust side, shared by both ends: conversions between the wire
//! types of `proto::safekeeper` and the protocol core's types, and the metadata keys that carry a refusal's
//! details (the contract in the header of `proto/proto/safekeeper.proto`). The walproposer client and the
//! safekeeper server both use this module, so the two ends cannot drift apart.
//!
//! Everything from the wire is untrusted: term histories are validated and bounded, and a failure is an
//! `INVALID_ARGUMENT` status that names the field.

use cambium_types::Lsn;
use proto::safekeeper as pb;
use safekeeper_core::protocol::{AcceptorState, TermHistory, TermSwitch};
use tonic::Status;

pub use cambium_types::TimelineKey;

/// Metadata key of a `FAILED_PRECONDITION` for a stale term: the term this safekeeper promised (decimal).
pub const CURRENT_TERM_METADATA: &str = "cambium-current-term";
/// Metadata key of a `FAILED_PRECONDITION` for a term whose election this safekeeper has not heard of.
pub const NOT_ELECTED_METADATA: &str = "cambium-not-elected";
/// Metadata key of an `OUT_OF_RANGE` for an append past the WAL end: where the WAL ends (decimal `u64`).
pub const WRITE_LSN_METADATA: &str = "cambium-write-lsn";
/// Most entries accepted in a term history from the wire. Each entry costs about 60 bytes of the control
/// file's JSON, so this keeps a control file far below `filestore::CONTROL_FILE_BYTES_MAX` (16 MiB): a
/// history accepted here can always be loaded again.
pub const TERM_HISTORY_ENTRIES_MAX: usize = 100_000;

/// The wire form of a timeline's name.
pub fn timeline_ref(key: TimelineKey) -> pb::TimelineRef {
    pb::TimelineRef {
        tenant_id: key.0.to_string(),
        timeline_id: key.1.to_string(),
    }
}

/// A term history from the wire: bounded and validated (`INVALID_ARGUMENT` otherwise).
pub fn history_from_proto(entries: &[pb::TermSwitch]) -> Result<TermHistory, Status> {
    if entries.len() > TERM_HISTORY_ENTRIES_MAX {
        return Err(Status::invalid_argument(format!(
            "a term history of {} entries, more than {TERM_HISTORY_ENTRIES_MAX}",
            entries.len()
        )));
    }
    let history = TermHistory(
        entries
            .iter()
            .map(|s| TermSwitch {
                term: s.term,
                lsn: Lsn(s.lsn),
            })
            .collect(),
    );
    history
        .validate()
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok(history)
}

/// The wire form of a term history.
pub fn history_to_proto(history: &TermHistory) -> Vec<pb::TermSwitch> {
    history
        .0
        .iter()
        .map(|s| pb::TermSwitch {
            term: s.term,
            lsn: s.lsn.0,
        })
        .collect()
}

/// The wire form of an acceptor's state.
pub fn state_to_proto(state: &AcceptorState) -> pb::AcceptorState {
    pb::AcceptorState {
        term: state.term,
        history: history_to_proto(&state.history),
        flush_lsn: state.flush_lsn.0,
        commit_lsn: state.commit_lsn.0,
        timeline_start_lsn: state.timeline_start_lsn.0,
        oldest_lsn: state.oldest_lsn.0,
        remote_consistent_lsn: state.remote_consistent_lsn.0,
    }
}

/// An acceptor's state from the wire (for clients and tests). The history is validated.
pub fn state_from_proto(state: &pb::AcceptorState) -> Result<AcceptorState, Status> {
    Ok(AcceptorState {
        term: state.term,
        history: history_from_proto(&state.history)?,
        flush_lsn: Lsn(state.flush_lsn),
        commit_lsn: Lsn(state.commit_lsn),
        timeline_start_lsn: Lsn(state.timeline_start_lsn),
        oldest_lsn: Lsn(state.oldest_lsn),
        remote_consistent_lsn: Lsn(state.remote_consistent_lsn),
    })
}

/// Reads a decimal `u64` from a status's metadata (for clients and tests).
pub fn metadata_u64(status: &Status, key: &str) -> Option<u64> {
    status.metadata().get(key)?.to_str().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histories_are_validated_and_bounded() {
        let entry = |term, lsn| pb::TermSwitch { term, lsn };
        assert!(history_from_proto(&[entry(1, 10), entry(2, 20)]).is_ok());
        assert!(history_from_proto(&[entry(2, 10), entry(1, 20)]).is_err());
        let long: Vec<_> = (1..=TERM_HISTORY_ENTRIES_MAX as u64 + 1).map(|t| entry(t, t)).collect();
        assert!(history_from_proto(&long).is_err());
    }
}
