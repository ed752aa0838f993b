//! The server side of the safekeeper's wire contract: requests parsed from the wire (ids strictly, as the
//! contract says, with the one parser of `cambium_types::id`), and the mapping of [`AcceptorError`] onto gRPC
//! statuses. The conversions both ends share (histories, states, the metadata keys) are
//! [`walproposer::wire`]'s, re-exported here.
//!
//! Everything from the wire is untrusted: every failure is an `INVALID_ARGUMENT` status that names the field.

use cambium_types::wal::WalDecodeError;
use cambium_types::{Lsn, TenantId, TimelineId};
use proto::safekeeper as pb;
use safekeeper_core::protocol::{AcceptorError, AppendRequest, AppendResponse, ElectedRequest};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

pub use walproposer::wire::*;

/// Highest timeline start LSN accepted: LSN arithmetic (`begin + len`) must never overflow, whatever WAL
/// follows.
pub const TIMELINE_START_LSN_MAX: Lsn = Lsn(u64::MAX / 2);

fn parse_id_field(field: &str, text: &str) -> Result<u128, Status> {
    cambium_types::id::parse_lower_hex(text).ok_or_else(|| {
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
        // `AcceptorError` is `#[non_exhaustive]` (it crosses from the protocol core): a variant added there is
        // a failure on the server side until this table names it.
        _ => internal(error),
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
        let status = status_from_acceptor(&AcceptorError::Storage(safekeeper_core::protocol::StoreError::Poisoned));
        assert_eq!(status.code(), Code::Internal);
        assert!(!status.message().contains("reopened"), "no internals leak");
    }
}
