//! Conversions between the wire types of `proto::pageserver` and the engine's types, the parsing of a call's
//! `grpc-timeout`, and the mapping of [`PageserverError`] onto gRPC statuses (the contract in the header of
//! `proto/proto/pageserver.proto`).
//!
//! Everything from the wire is untrusted: ids are parsed strictly (32 lowercase hex digits, the form ids print
//! in, so one id has one spelling), and every malformed field is an `INVALID_ARGUMENT` that names it.
//!
//! # Status mapping
//!
//! | error | code |
//! |---|---|
//! | `TenantNotFound`, `TimelineNotFound`, `PageNotFound` | `NOT_FOUND` |
//! | `LsnBelowGcCutoff`, `LsnBeforeStart`, `HasChildren` | `FAILED_PRECONDITION` |
//! | `TimestampBeforeHistory` | `FAILED_PRECONDITION` (see below) |
//! | `WaitLsnTimeout`; `LsnAhead` of a read | `DEADLINE_EXCEEDED` |
//! | `LsnAhead` of a branch creation or a lease | `OUT_OF_RANGE` |
//! | `Corrupt` | `DATA_LOSS` (the message names the file; the server logs it) |
//! | `TenantExists`, `TimelineExists` | `ALREADY_EXISTS` |
//! | `AncestorBehind` | `UNAVAILABLE` (retryable: the ancestor's WAL is being re-fed) |
//! | anything else (`Io`, `Poisoned`, bad records, …) | `INTERNAL`, details only in the server's log |
//!
//! `TimestampBeforeHistory` is `FAILED_PRECONDITION`, not `NOT_FOUND`: the timeline exists but the point asked
//! for is outside the history it holds, like an LSN below the GC cutoff. Keeping `NOT_FOUND` for missing
//! tenants, timelines and pages lets a client (the API) tell "no such branch" (404) from "no such point in
//! this branch's history" (422) by the code alone.

use std::time::Duration;

use proto::pageserver as pb;
use storage::{StorageError, TenantId, TimelineId, TimelineInfo, PAGE_SIZE_BYTES};
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use crate::tenants::PageserverError;

/// The metadata key of a call's deadline, as the gRPC over HTTP/2 spec names it.
pub const GRPC_TIMEOUT_METADATA: &str = "grpc-timeout";
/// Most digits of a `grpc-timeout` value (the spec's bound, which also keeps the arithmetic from overflowing).
const GRPC_TIMEOUT_DIGITS_MAX: usize = 8;

pub use storage::TimelineKey;

/// What the failing operation was: an LSN ahead of the last record means different things to each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A read (page, database size): an LSN not yet ingested is a wait that ran out of time.
    Read,
    /// A branch creation or a lease: an LSN past the ancestor's last record is out of range.
    Manage,
}

fn parse_id_field(field: &str, text: &str) -> Result<u128, Status> {
    storage::id::parse_lower_hex(text).ok_or_else(|| {
        let shown: String = text.chars().take(64).collect();
        Status::invalid_argument(format!("{field} {shown:?} is not 32 lowercase hex digits"))
    })
}

/// A tenant id from the wire; `INVALID_ARGUMENT` naming `field` if it is not 32 lowercase hex digits.
pub fn tenant_id(field: &str, text: &str) -> Result<TenantId, Status> {
    parse_id_field(field, text).map(TenantId)
}

/// A timeline id from the wire; `INVALID_ARGUMENT` naming `field` if it is not 32 lowercase hex digits.
pub fn timeline_id(field: &str, text: &str) -> Result<TimelineId, Status> {
    parse_id_field(field, text).map(TimelineId)
}

/// The tenant and timeline a request names; `INVALID_ARGUMENT` if it names none or a malformed one.
pub fn timeline_key(timeline: Option<&pb::TimelineRef>) -> Result<TimelineKey, Status> {
    let timeline = timeline.ok_or_else(|| Status::invalid_argument("the request names no timeline"))?;
    Ok((
        tenant_id("tenant_id", &timeline.tenant_id)?,
        timeline_id("timeline_id", &timeline.timeline_id)?,
    ))
}

/// The wire form of a timeline's name.
pub fn timeline_ref(key: TimelineKey) -> pb::TimelineRef {
    pb::TimelineRef {
        tenant_id: key.0.to_string(),
        timeline_id: key.1.to_string(),
    }
}

/// The wire form of a timeline's state.
pub fn timeline_info_to_proto(tenant: TenantId, info: &TimelineInfo) -> pb::TimelineInfo {
    let (ancestor_timeline_id, ancestor_lsn) = match info.ancestor {
        Some((ancestor, lsn)) => (ancestor.to_string(), lsn.0),
        None => (String::new(), 0),
    };
    pb::TimelineInfo {
        tenant_id: tenant.to_string(),
        timeline_id: info.timeline_id.to_string(),
        ancestor_timeline_id,
        ancestor_lsn,
        start_lsn: info.start_lsn.0,
        last_record_lsn: info.last_record_lsn.0,
        disk_consistent_lsn: info.disk_consistent_lsn.0,
        // The engine knows nothing of remote storage: the management service fills in the uploaded index's LSN
        // (0 without remote storage).
        remote_consistent_lsn: 0,
        gc_cutoff_lsn: info.gc_cutoff_lsn.0,
        logical_size_bytes: u64::from(info.db_size_pages) * PAGE_SIZE_BYTES as u64,
        layer_count: u32::try_from(info.layer_count).unwrap_or(u32::MAX),
        layer_bytes: info.layer_bytes,
        sealed_lsn: info.sealed_lsn.map_or(0, |lsn| lsn.0),
    }
}

/// Parses a `grpc-timeout` value: 1 to 8 ASCII digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`), as the gRPC
/// over HTTP/2 spec defines it. `None` if it is malformed.
pub fn parse_grpc_timeout(text: &str) -> Option<Duration> {
    let unit = text.chars().last()?;
    let digits = &text[..text.len() - unit.len_utf8()];
    let well_formed =
        !digits.is_empty() && digits.len() <= GRPC_TIMEOUT_DIGITS_MAX && digits.bytes().all(|b| b.is_ascii_digit());
    if !well_formed {
        return None;
    }
    let value: u64 = digits.parse().ok()?;
    match unit {
        'H' => Some(Duration::from_secs(value * 3600)),
        'M' => Some(Duration::from_secs(value * 60)),
        'S' => Some(Duration::from_secs(value)),
        'm' => Some(Duration::from_millis(value)),
        'u' => Some(Duration::from_micros(value)),
        'n' => Some(Duration::from_nanos(value)),
        _ => None,
    }
}

/// The call's timeout from its `grpc-timeout` metadata; `None` if absent or malformed (then the server's
/// default applies, as tonic's own deadline layer also ignores a malformed header).
pub fn call_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let value = metadata.get(GRPC_TIMEOUT_METADATA)?;
    let parsed = value.to_str().ok().and_then(parse_grpc_timeout);
    if parsed.is_none() {
        tracing::debug!(value = ?value, "ignoring a malformed grpc-timeout");
    }
    parsed
}

/// The status that reports `error` of an `operation` to the client (see the module's table). Server-side
/// failures are logged here with their details and reported as `INTERNAL` without them.
pub fn status_from_error(error: &PageserverError, operation: Operation) -> Status {
    match error {
        PageserverError::TenantNotFound(_) => Status::not_found(error.to_string()),
        PageserverError::TenantExists(_) => Status::already_exists(error.to_string()),
        PageserverError::WaitLsnTimeout { .. } => Status::deadline_exceeded(error.to_string()),
        PageserverError::Storage(storage) => status_from_storage(storage, operation),
        // No wildcard: the compiler makes a new variant be mapped here.
        PageserverError::NoRemote => Status::failed_precondition(error.to_string()),
        PageserverError::Io { .. } => internal(error),
    }
}

/// The status that reports an engine error of an `operation` (see the module's table).
pub fn status_from_storage(error: &StorageError, operation: Operation) -> Status {
    match error {
        StorageError::TimelineNotFound(_) | StorageError::PageNotFound { .. } => Status::not_found(error.to_string()),
        StorageError::LsnBelowGcCutoff { .. }
        | StorageError::LsnBeforeStart { .. }
        | StorageError::HasChildren { .. }
        | StorageError::NoChildren(_)
        | StorageError::TimestampBeforeHistory { .. } => Status::failed_precondition(error.to_string()),
        StorageError::PastSeal { .. } => Status::out_of_range(error.to_string()),
        StorageError::LsnAhead { .. } => match operation {
            Operation::Read => Status::deadline_exceeded(error.to_string()),
            Operation::Manage => Status::out_of_range(error.to_string()),
        },
        StorageError::TimelineExists(_) => Status::already_exists(error.to_string()),
        StorageError::AncestorBehind { .. } => Status::unavailable(error.to_string()),
        StorageError::Fetch { file, reason } => {
            // A layer could not be downloaded from remote storage: a retry may succeed.
            tracing::warn!(file = %file.display(), %reason, "layer download failed");
            Status::unavailable("a layer could not be downloaded from remote storage; retry")
        }
        StorageError::Corrupt { file, offset, reason } => {
            tracing::error!(file = %file.display(), offset, reason, "corrupt file: reads that touch it fail");
            Status::data_loss(error.to_string())
        }
        _ => internal(error),
    }
}

/// `INTERNAL`, with the details logged rather than sent (paths and OS errors are the operator's business).
pub fn internal(error: &dyn std::fmt::Display) -> Status {
    tracing::error!(%error, "pageserver request failed on the server side");
    Status::internal("pageserver internal error (details in the pageserver's log)")
}

/// The wire form of a per-request failure inside a `GetPages` response: the code the unary call would give.
pub fn page_error(status: &Status) -> pb::PageError {
    pb::PageError {
        code: status.code() as i32,
        message: status.message().to_string(),
    }
}

/// The gRPC code a `PageError` carries (`Unknown` for a value outside the enum), for clients and tests.
pub fn page_error_code(error: &pb::PageError) -> Code {
    Code::from_i32(error.code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use storage::{Key, Lsn};

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
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef0123456789abcdeg",
            "+123456789abcdef0123456789abcdef",
        ] {
            let tenant = pb::TimelineRef {
                tenant_id: bad.into(),
                ..good.clone()
            };
            let status = timeline_key(Some(&tenant)).expect_err(bad);
            assert_eq!(status.code(), Code::InvalidArgument);
            assert!(status.message().contains("tenant_id"), "{}", status.message());
            let timeline = pb::TimelineRef {
                timeline_id: bad.into(),
                ..good.clone()
            };
            let status = timeline_key(Some(&timeline)).expect_err(bad);
            assert!(status.message().contains("timeline_id"), "{}", status.message());
        }
        assert_eq!(timeline_key(None).expect_err("none").code(), Code::InvalidArgument);
    }

    #[test]
    fn grpc_timeouts_parse_per_the_spec() {
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("200u"), Some(Duration::from_micros(200)));
        assert_eq!(parse_grpc_timeout("7n"), Some(Duration::from_nanos(7)));
        assert_eq!(parse_grpc_timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(
            parse_grpc_timeout("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        for bad in ["", "m", "100", "100x", "123456789m", "-1m", "+1m", "1.5S", "1 S", "10é"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
        let mut metadata = MetadataMap::new();
        assert_eq!(call_timeout(&metadata), None);
        metadata.insert(GRPC_TIMEOUT_METADATA, "250m".parse().expect("ascii"));
        assert_eq!(call_timeout(&metadata), Some(Duration::from_millis(250)));
        metadata.insert(GRPC_TIMEOUT_METADATA, "soon".parse().expect("ascii"));
        assert_eq!(call_timeout(&metadata), None);
    }

    #[test]
    fn statuses_follow_the_contract() {
        let read = |e: StorageError| status_from_storage(&e, Operation::Read).code();
        let manage = |e: StorageError| status_from_storage(&e, Operation::Manage).code();
        assert_eq!(read(StorageError::TimelineNotFound(TimelineId(1))), Code::NotFound);
        assert_eq!(
            read(StorageError::PageNotFound {
                key: Key::page(3),
                lsn: Lsn(1)
            }),
            Code::NotFound
        );
        let below = || StorageError::LsnBelowGcCutoff {
            lsn: Lsn(1),
            gc_cutoff: Lsn(2),
        };
        assert_eq!(read(below()), Code::FailedPrecondition);
        assert_eq!(manage(below()), Code::FailedPrecondition);
        assert_eq!(
            read(StorageError::HasChildren {
                timeline: TimelineId(1),
                children: 2
            }),
            Code::FailedPrecondition
        );
        assert_eq!(
            read(StorageError::TimestampBeforeHistory {
                timestamp_us: 1,
                earliest_us: Some(5)
            }),
            Code::FailedPrecondition
        );
        let ahead = || StorageError::LsnAhead {
            lsn: Lsn(9),
            last_record_lsn: Lsn(5),
        };
        assert_eq!(read(ahead()), Code::DeadlineExceeded);
        assert_eq!(manage(ahead()), Code::OutOfRange);
        assert_eq!(read(StorageError::TimelineExists(TimelineId(1))), Code::AlreadyExists);
        assert_eq!(
            read(StorageError::AncestorBehind {
                ancestor: TimelineId(1),
                branch_lsn: Lsn(9),
                last_record_lsn: Lsn(5)
            }),
            Code::Unavailable
        );
        let corrupt = status_from_storage(
            &StorageError::Corrupt {
                file: PathBuf::from("/data/l0_x"),
                offset: 7,
                reason: "bad crc".into(),
            },
            Operation::Read,
        );
        assert_eq!(corrupt.code(), Code::DataLoss);
        assert!(corrupt.message().contains("l0_x"), "{}", corrupt.message());
        let io = status_from_storage(
            &StorageError::Io {
                path: PathBuf::from("/secret/path"),
                source: std::io::Error::other("disk on fire"),
            },
            Operation::Read,
        );
        assert_eq!(io.code(), Code::Internal);
        assert!(!io.message().contains("secret"), "no internals leak: {}", io.message());
        assert_eq!(read(StorageError::Poisoned(TimelineId(1))), Code::Internal);

        let status = |e: PageserverError| status_from_error(&e, Operation::Read).code();
        assert_eq!(status(PageserverError::TenantNotFound(TenantId(1))), Code::NotFound);
        assert_eq!(status(PageserverError::TenantExists(TenantId(1))), Code::AlreadyExists);
        assert_eq!(
            status(PageserverError::WaitLsnTimeout {
                lsn: Lsn(9),
                last_record_lsn: Lsn(5)
            }),
            Code::DeadlineExceeded
        );
        assert_eq!(
            status(PageserverError::Io {
                path: PathBuf::from("/x"),
                source: std::io::Error::other("no")
            }),
            Code::Internal
        );
    }

    #[test]
    fn timeline_info_reports_sizes_in_bytes() {
        let info = TimelineInfo {
            timeline_id: TimelineId(2),
            ancestor: Some((TimelineId(1), Lsn(0x40))),
            start_lsn: Lsn(0x40),
            last_record_lsn: Lsn(0x90),
            disk_consistent_lsn: Lsn(0x60),
            gc_cutoff_lsn: Lsn(0x40),
            db_size_pages: 3,
            layer_count: 2,
            layer_bytes: 1000,
            frozen_layer_count: 0,
            sealed_lsn: Some(Lsn(0x50)),
        };
        let wire = timeline_info_to_proto(TenantId(7), &info);
        assert_eq!(wire.sealed_lsn, 0x50);
        assert_eq!(wire.tenant_id, TenantId(7).to_string());
        assert_eq!(wire.ancestor_timeline_id, TimelineId(1).to_string());
        assert_eq!(wire.ancestor_lsn, 0x40);
        assert_eq!(wire.logical_size_bytes, 3 * 8192);
        assert_eq!(wire.remote_consistent_lsn, 0);
        assert_eq!(wire.layer_count, 2);
        let root = TimelineInfo { ancestor: None, ..info };
        assert_eq!(timeline_info_to_proto(TenantId(7), &root).ancestor_timeline_id, "");
    }
}
