//! The engine's files as they cross the remote boundary (STYLE 6: checked when sent and when received),
//! through the engine's own decoders (`storage::formats`); errors as text for `RemoteError::Corrupt`.

use storage::branch_log::BranchLogEntry;
use storage::metadata::TimelineMetadata;

pub(crate) use storage::formats::{
    check_metadata, is_layer_file_name, live_timelines, BRANCH_LOG_FILE, METADATA_FILE, TIMELINES_DIR, TIMESTAMPS_FILE,
    TIMESTAMP_ENTRY_BYTES,
};

/// Decodes a metadata file.
pub(crate) fn decode_metadata(bytes: &[u8]) -> Result<TimelineMetadata, String> {
    storage::formats::decode_metadata(bytes).map_err(|e| e.to_string())
}

/// The complete, valid frames at the start of a branch log and their length (see `storage::formats`).
pub(crate) fn branch_log_prefix(bytes: &[u8]) -> Result<(Vec<BranchLogEntry>, usize), String> {
    storage::formats::branch_log_prefix(bytes).map_err(|e| e.to_string())
}

/// Checks that `bytes` hold at least `count` valid timestamp entries.
pub(crate) fn check_timestamps(bytes: &[u8], count: u64) -> Result<(), String> {
    storage::formats::check_timestamps(bytes, count).map_err(|e| e.to_string())
}
