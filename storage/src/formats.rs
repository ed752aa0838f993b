//! The engine's small files as bytes, for code that moves them without opening a tenant (the pageserver's
//! remote storage checks every file when it is sent and when it is received). One decoder per format, the
//! engine's own: a format change is made here and nowhere else (`docs/format.md` describes them).

use crate::branch_log::BranchLogEntry;
use crate::id::TimelineId;
use crate::layer::desc::LayerDesc;
use crate::metadata::TimelineMetadata;

pub use crate::branch_log::BRANCH_LOG_FILE;
pub use crate::metadata::METADATA_FILE;
pub use crate::tenant::TIMELINES_DIR;
pub use crate::timestamps::{TIMESTAMPS_FILE, TIMESTAMP_ENTRY_BYTES};

/// Why bytes are not a valid file of the engine: where and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at offset {offset}: {reason}")]
pub struct FormatError {
    /// Byte offset of the damage.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl From<(u64, String)> for FormatError {
    fn from((offset, reason): (u64, String)) -> FormatError {
        FormatError { offset, reason }
    }
}

/// Decodes a timeline's metadata file.
pub fn decode_metadata(bytes: &[u8]) -> Result<TimelineMetadata, FormatError> {
    Ok(TimelineMetadata::decode(bytes)?)
}

/// Checks that a decoded metadata belongs to `timeline` and names no layer twice.
pub fn check_metadata(meta: &TimelineMetadata, timeline: TimelineId) -> Result<(), String> {
    if meta.timeline_id != timeline {
        return Err(format!("names timeline {}, expected {timeline}", meta.timeline_id));
    }
    let mut names: Vec<String> = meta.layers.iter().map(LayerDesc::file_name).collect();
    names.sort();
    names.dedup();
    if names.len() != meta.layers.len() {
        return Err("names a layer twice".into());
    }
    Ok(())
}

/// The complete, valid frames at the start of a branch log and their length in bytes; a frame cut short or bad
/// at the very end (an append in progress, or cut by a crash) ends the prefix; a bad frame followed by more
/// data is damage.
pub fn branch_log_prefix(bytes: &[u8]) -> Result<(Vec<BranchLogEntry>, usize), FormatError> {
    Ok(crate::branch_log::decode_prefix(bytes)?)
}

/// The timelines a branch log leaves alive, parents before children (the log's order).
pub fn live_timelines(entries: &[BranchLogEntry]) -> Vec<TimelineId> {
    let mut live: Vec<TimelineId> = Vec::new();
    for entry in entries {
        match entry {
            BranchLogEntry::Create { timeline_id, .. } => live.push(*timeline_id),
            BranchLogEntry::Delete { timeline_id } => live.retain(|id| id != timeline_id),
            BranchLogEntry::Seal { .. } => {}
        }
    }
    live
}

/// Checks that `bytes` hold at least `count` timestamp-index entries, each passing its crc.
pub fn check_timestamps(bytes: &[u8], count: u64) -> Result<(), FormatError> {
    Ok(crate::timestamps::check_entries(bytes, count)?)
}

/// Whether a file or object name is a layer file's (`l0_…`, `l1_…`, `img_…`), not a temporary file.
pub fn is_layer_file_name(name: &str) -> bool {
    let layer = name.starts_with("l0_") || name.starts_with("l1_") || name.starts_with("img_");
    layer && !name.ends_with(crate::fsio::TEMP_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Key, Lsn, PageCache, Tenant, TimelineConfig, Value, WalRecord, PAGE_SIZE_BYTES};
    use std::sync::Arc;

    fn record(fill: u8) -> WalRecord {
        WalRecord {
            commit_ts_us: u64::from(fill),
            db_size_pages: 1,
            entries: vec![(
                Key::page(0),
                Value::Image(bytes::Bytes::from(vec![fill; PAGE_SIZE_BYTES])),
            )],
        }
    }

    /// The decoders read what the engine writes, and refuse damage.
    #[test]
    fn engine_files_decode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tenant = Tenant::open(dir.path(), TimelineConfig::default(), Arc::new(PageCache::new(16))).expect("open");
        let id = TimelineId(7);
        let timeline = tenant.create_timeline(id, Lsn(0x100)).expect("create");
        let mut lsn = Lsn(0x100);
        for fill in 1..=3 {
            lsn = timeline.ingest_record(lsn, &record(fill)).expect("ingest");
            timeline.checkpoint().expect("checkpoint");
        }
        tenant
            .branch(TimelineId(8), id, crate::BranchPoint::Latest)
            .expect("branch");
        tenant.delete_timeline(TimelineId(8)).expect("delete");

        let meta_bytes = std::fs::read(timeline.dir().join(METADATA_FILE)).expect("read metadata");
        let meta = decode_metadata(&meta_bytes).expect("decode metadata");
        assert_eq!(meta.disk_consistent_lsn, lsn);
        assert_eq!(meta.layers.len(), 3);
        check_metadata(&meta, id).expect("consistent");
        assert!(check_metadata(&meta, TimelineId(9)).is_err());
        let mut damaged = meta_bytes.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert!(decode_metadata(&damaged).is_err());

        let stamps = std::fs::read(timeline.dir().join(TIMESTAMPS_FILE)).expect("read timestamps");
        check_timestamps(&stamps, meta.timestamp_count).expect("timestamps");
        assert!(check_timestamps(&stamps, meta.timestamp_count + 1).is_err());
        let mut damaged = stamps.clone();
        damaged[3] ^= 1;
        assert!(check_timestamps(&damaged, meta.timestamp_count).is_err());

        let log = std::fs::read(dir.path().join(BRANCH_LOG_FILE)).expect("read log");
        let (entries, len) = branch_log_prefix(&log).expect("log");
        assert!(log[len..].iter().all(|&b| b == 0), "zeros after the frames");
        assert_eq!(entries.len(), 3);
        assert_eq!(live_timelines(&entries), vec![id]);
        let (torn, torn_len) = branch_log_prefix(&log[..len - 2]).expect("torn");
        assert_eq!(torn.len(), 2);
        assert!(torn_len < len);
        let mut damaged = log.clone();
        damaged[10] ^= 0xff;
        assert!(branch_log_prefix(&damaged).is_err());

        for desc in &meta.layers {
            assert!(is_layer_file_name(&desc.file_name()));
        }
        assert!(!is_layer_file_name("metadata"));
        assert!(!is_layer_file_name("l0_x.tmp"));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_or_error(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = decode_metadata(&bytes);
            let _ = branch_log_prefix(&bytes);
            let _ = check_timestamps(&bytes, (bytes.len() / 20) as u64);
        }
    }
}
