//! Conversions between the wire types of `proto::safekeeper` and the protocol's core types, and the mapping of
//! [`AcceptorError`] onto gRPC statuses (the contract in the header of `proto/proto/safekeeper.proto`).
//!
//! Everything from the wire is untrusted: ids are parsed strictly (32 lowercase hex digits, as the contract
//! says), term histories are validated and bounded, and every failure is an `INVALID_ARGUMENT` status that
//! names the field.

use cambium_types::wal::WalDecodeError;
use cambium_types::{Lsn, TenantId, TimelineId};
use proto::safekeeper as pb;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use crate::protocol::{
    AcceptorError, AcceptorState, AppendRequest, AppendResponse, ElectedRequest, TermHistory, TermSwitch,
};

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
/// Highest timeline start LSN accepted: LSN arithmetic (`begin + len`) must never overflow, whatever WAL
/// follows.
pub const TIMELINE_START_LSN_MAX: Lsn = Lsn(u64::MAX / 2);

pub use cambium_types::TimelineKey;

/// A 32-digit lowercase hex id (the form ids print in, so one id has one spelling and one directory name).
pub fn parse_lower_hex_id(text: &str) -> Option<u128> {
    cambium_types::id::parse_lower_hex(text)
}

fn parse_id_field(field: &str, text: &str) -> Result<u128, Status> {
    parse_lower_hex_id(text).ok_or_else(|| {
        let shown: String = text.chars().take(64).collect();
        Status::invalid_argument(format!("{field} {shown:?} is not 32 lowercase hex digits"))
    })
}

/// The tenant and timeline a request names; `INVALID_ARGUMENT` if it names none or a malformed one.
pub fn timeline_key(timeline: Option<&pb::TimelineRef>) -> Result<TimelineKey, Status> {
    let timeline = timeline.ok_or_else(|| Status::invalid_argument("the request names no timeline"))?;
    Ok((
        TenantId(parse_id_field("tenant_id", &timeline.tenant_id)?),
        TimelineId(parse_id_field("timeline_id", &timeline.timeline_id)?),
    ))
}

/// The tenant a request names; `INVALID_ARGUMENT` if the id is malformed.
pub fn tenant_id(text: &str) -> Result<TenantId, Status> {
    Ok(TenantId(parse_id_field("tenant_id", text)?))
}

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

/// An `Elected` from the wire (its timeline is parsed apart).
pub fn elected_from_proto(request: &pb::ElectedRequest) -> Result<ElectedRequest, Status> {
    Ok(ElectedRequest {
        term: request.term,
        history: history_from_proto(&request.history)?,
        start_streaming_at: Lsn(request.start_streaming_at),
    })
}

/// An append from the wire (its timeline and request id are handled apart). Takes the data without a copy.
pub fn append_from_proto(request: pb::AppendRequest) -> AppendRequest {
    AppendRequest {
        term: request.term,
        begin_lsn: Lsn(request.begin_lsn),
        data: request.data,
        commit_lsn: Lsn(request.commit_lsn),
    }
}

/// The acknowledgement of the append `request_id`.
pub fn append_response_to_proto(request_id: u64, response: &AppendResponse) -> pb::AppendResponse {
    pb::AppendResponse {
        request_id,
        term: response.term,
        flush_lsn: response.flush_lsn.0,
        commit_lsn: response.commit_lsn.0,
    }
}

fn with_metadata(code: Code, message: String, key: &'static str, value: u64) -> Status {
    let mut metadata = MetadataMap::new();
    metadata.insert(key, MetadataValue::from(value));
    Status::with_metadata(code, message, metadata)
}

/// The status that reports `error` to the client, as the service contract specifies. Storage failures are
/// logged here with their details and reported as `INTERNAL` without them (paths and OS errors are the
/// operator's business, not the client's).
pub fn status_from_acceptor(error: &AcceptorError) -> Status {
    match error {
        AcceptorError::StaleTerm { current, .. } => with_metadata(
            Code::FailedPrecondition,
            error.to_string(),
            CURRENT_TERM_METADATA,
            *current,
        ),
        AcceptorError::NotElected { .. } => {
            with_metadata(Code::FailedPrecondition, error.to_string(), NOT_ELECTED_METADATA, 1)
        }
        AcceptorError::Gap { write_lsn, .. } => {
            with_metadata(Code::OutOfRange, error.to_string(), WRITE_LSN_METADATA, write_lsn.0)
        }
        AcceptorError::BadFrame(WalDecodeError::Checksum { .. }) => Status::data_loss(error.to_string()),
        AcceptorError::BadFrame(_) | AcceptorError::Invalid(_) => Status::invalid_argument(error.to_string()),
        AcceptorError::Storage(_) => internal(error),
    }
}

/// The status for an error of a *read* (`ReadWal`, `StreamWal`): the acceptor reports a start outside the
/// available WAL as `Invalid`, which the contract makes `OUT_OF_RANGE` for reads.
pub fn status_from_read_error(error: &AcceptorError) -> Status {
    match error {
        AcceptorError::Invalid(_) => Status::out_of_range(error.to_string()),
        other => status_from_acceptor(other),
    }
}

/// `INTERNAL`, with the details logged rather than sent.
pub fn internal(error: &dyn std::fmt::Display) -> Status {
    tracing::error!(%error, "safekeeper request failed on the server side");
    Status::internal("safekeeper storage failure (details in the safekeeper's log)")
}

/// Reads a decimal `u64` from a status's metadata (for clients and tests).
pub fn metadata_u64(status: &Status, key: &str) -> Option<u64> {
    status.metadata().get(key)?.to_str().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strict_lowercase_hex() {
        let good = pb::TimelineRef {
            tenant_id: "0123456789abcdef0123456789abcdef".into(),
            timeline_id: "ffffffffffffffffffffffffffffffff".into(),
        };
        let key = timeline_key(Some(&good)).expect("valid");
        assert_eq!(timeline_ref(key), good);
        for bad in [
            "",
            "0123456789ABCDEF0123456789ABCDEF",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdeg",
            "+123456789abcdef0123456789abcdef",
        ] {
            let r = pb::TimelineRef {
                tenant_id: bad.into(),
                ..good.clone()
            };
            assert_eq!(timeline_key(Some(&r)).expect_err(bad).code(), Code::InvalidArgument);
        }
        assert_eq!(timeline_key(None).expect_err("none").code(), Code::InvalidArgument);
    }

    #[test]
    fn statuses_carry_their_metadata() {
        let status = status_from_acceptor(&AcceptorError::StaleTerm { got: 1, current: 7 });
        assert_eq!(status.code(), Code::FailedPrecondition);
        assert_eq!(metadata_u64(&status, CURRENT_TERM_METADATA), Some(7));
        let status = status_from_acceptor(&AcceptorError::NotElected { term: 3 });
        assert_eq!(metadata_u64(&status, NOT_ELECTED_METADATA), Some(1));
        let status = status_from_acceptor(&AcceptorError::Gap {
            begin_lsn: Lsn(900),
            write_lsn: Lsn(500),
        });
        assert_eq!(status.code(), Code::OutOfRange);
        assert_eq!(metadata_u64(&status, WRITE_LSN_METADATA), Some(500));
        let status = status_from_acceptor(&AcceptorError::BadFrame(WalDecodeError::Checksum {
            lsn: Lsn(1),
            stored: 1,
            computed: 2,
        }));
        assert_eq!(status.code(), Code::DataLoss);
        let status = status_from_acceptor(&AcceptorError::Storage(crate::protocol::StoreError::Poisoned));
        assert_eq!(status.code(), Code::Internal);
        assert!(!status.message().contains("reopened"), "no internals leak");
    }

    #[test]
    fn histories_are_validated_and_bounded() {
        let entry = |term, lsn| pb::TermSwitch { term, lsn };
        assert!(history_from_proto(&[entry(1, 10), entry(2, 20)]).is_ok());
        assert!(history_from_proto(&[entry(2, 10), entry(1, 20)]).is_err());
        let long: Vec<_> = (1..=TERM_HISTORY_ENTRIES_MAX as u64 + 1).map(|t| entry(t, t)).collect();
        assert!(history_from_proto(&long).is_err());
    }
}
