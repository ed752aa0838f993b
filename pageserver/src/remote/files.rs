//! Pure checks of the engine's files as they cross the remote boundary (STYLE 6: checked when sent and when
//! received). The formats are the engine's (`docs/format.md`); the engine keeps its decoders private, so the
//! few lines needed are mirrored here and tested against files the engine wrote.

use storage::branch_log::BranchLogEntry;
use storage::layer::desc::LayerDesc;
use storage::metadata::TimelineMetadata;
use storage::TimelineId;

/// A timeline's metadata file name (local and remote).
pub(crate) const METADATA_FILE: &str = "metadata";
/// A timeline's timestamp index file name (local and remote).
pub(crate) const TIMESTAMPS_FILE: &str = "timestamps";
/// A tenant's branch log file name (local and remote).
pub(crate) const BRANCH_LOG_FILE: &str = "branches.log";
/// The directory of a tenant's timelines (local and remote).
pub(crate) const TIMELINES_DIR: &str = "timelines";
/// Bytes of one timestamp index entry: `commit_ts_us u64 | end_lsn u64 | crc32 u32`.
pub(crate) const TIMESTAMP_ENTRY_BYTES: u64 = 20;

const METADATA_MAGIC: &[u8; 8] = b"CMBMETA1";
const METADATA_FORMAT_VERSION: u32 = 1;
const METADATA_HEADER_BYTES: usize = 20;
const BRANCH_LOG_FRAME_HEADER_BYTES: usize = 8;
const BRANCH_LOG_ENTRY_BYTES_MAX: usize = 64 * 1024;

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let array: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(array))
}

/// Decodes a metadata file (format version 1): magic, version, length and crc, then the JSON body.
pub(crate) fn decode_metadata(bytes: &[u8]) -> Result<TimelineMetadata, String> {
    if bytes.len() < METADATA_HEADER_BYTES || &bytes[..8] != METADATA_MAGIC {
        return Err("bad metadata magic".into());
    }
    let version = u32_at(bytes, 8).ok_or("short metadata header")?;
    if version != METADATA_FORMAT_VERSION {
        return Err(format!("unknown metadata format version {version}"));
    }
    let body = &bytes[METADATA_HEADER_BYTES..];
    if u32_at(bytes, 12).map(|len| len as usize) != Some(body.len()) {
        return Err("metadata length mismatch".into());
    }
    if u32_at(bytes, 16) != Some(crc32fast::hash(body)) {
        return Err("metadata crc mismatch".into());
    }
    serde_json::from_slice(body).map_err(|e| format!("metadata body: {e}"))
}

/// Checks a decoded metadata belongs to `timeline` and is self-consistent.
pub(crate) fn check_metadata(meta: &TimelineMetadata, timeline: TimelineId) -> Result<(), String> {
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

/// The complete, valid frames at the start of a branch log: their entries and their length in bytes. A torn
/// or bad last frame (an append in progress, or cut by a crash) ends the prefix; a bad frame followed by more
/// data is damage and an error, as in the engine.
pub(crate) fn branch_log_prefix(bytes: &[u8]) -> Result<(Vec<BranchLogEntry>, usize), String> {
    let mut entries = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        let (Some(body_len), Some(crc)) = (u32_at(rest, 0), u32_at(rest, 4)) else {
            break;
        };
        let body_len = body_len as usize;
        let frame_len = BRANCH_LOG_FRAME_HEADER_BYTES + body_len;
        if body_len > BRANCH_LOG_ENTRY_BYTES_MAX {
            if rest.len() > BRANCH_LOG_FRAME_HEADER_BYTES + BRANCH_LOG_ENTRY_BYTES_MAX {
                return Err(format!("branch log frame at {offset} has length {body_len}"));
            }
            break;
        }
        if rest.len() < frame_len {
            break;
        }
        let body = &rest[BRANCH_LOG_FRAME_HEADER_BYTES..frame_len];
        let entry = (crc32fast::hash(body) == crc)
            .then(|| serde_json::from_slice::<BranchLogEntry>(body).ok())
            .flatten();
        match entry {
            Some(entry) => entries.push(entry),
            None if offset + frame_len == bytes.len() => break,
            None => return Err(format!("branch log frame at {offset} fails its crc")),
        }
        offset += frame_len;
    }
    Ok((entries, offset))
}

/// The timelines a branch log leaves alive, parents before children (the log's order).
pub(crate) fn live_timelines(entries: &[BranchLogEntry]) -> Vec<TimelineId> {
    let mut live: Vec<TimelineId> = Vec::new();
    for entry in entries {
        match entry {
            BranchLogEntry::Create { timeline_id, .. } => live.push(*timeline_id),
            BranchLogEntry::Delete { timeline_id } => live.retain(|id| id != timeline_id),
        }
    }
    live
}

/// Checks that `bytes` hold at least `count` timestamp entries and that each of the first `count` passes
/// its crc.
pub(crate) fn check_timestamps(bytes: &[u8], count: u64) -> Result<(), String> {
    let needed_bytes = count
        .checked_mul(TIMESTAMP_ENTRY_BYTES)
        .ok_or("entry count overflows")?;
    if (bytes.len() as u64) < needed_bytes {
        return Err(format!("holds {} bytes, metadata names {count} entries", bytes.len()));
    }
    let entry_bytes = TIMESTAMP_ENTRY_BYTES as usize;
    for (i, entry) in bytes[..needed_bytes as usize].chunks_exact(entry_bytes).enumerate() {
        if u32_at(entry, 16) != Some(crc32fast::hash(&entry[..16])) {
            return Err(format!("timestamp entry {i} fails its crc"));
        }
    }
    Ok(())
}

/// Whether a file or object name is a layer file's (`l0_…`, `l1_…`, `img_…`, not a temp file).
pub(crate) fn is_layer_file_name(name: &str) -> bool {
    let layer = name.starts_with("l0_") || name.starts_with("l1_") || name.starts_with("img_");
    layer && !name.ends_with(storage::fsio::TEMP_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use storage::{Key, Lsn, PageCache, Tenant, TimelineConfig, Value, WalRecord, PAGE_SIZE_BYTES};

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

    /// The mirrored decoders read what the engine writes, and refuse damage.
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
            .branch(TimelineId(8), id, storage::BranchPoint::Latest)
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
        assert_eq!(len, log.len());
        assert_eq!(entries.len(), 3);
        assert_eq!(live_timelines(&entries), vec![id]);
        // A torn tail ends the prefix; damage before the end is an error.
        let (torn, torn_len) = branch_log_prefix(&log[..log.len() - 2]).expect("torn");
        assert_eq!(torn.len(), 2);
        assert!(torn_len < log.len());
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
