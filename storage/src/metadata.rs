//! A timeline's persisted index: its layers and how far they reach, written atomically after every flush,
//! compaction and GC.
//!
//! ```text
//! file = magic "CMBMETA1" | format_version u32 | body_len u32 | crc32(body) u32 | body (JSON)
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::codec::u32_at;
use crate::error::{corrupt, io_err, Result};
use crate::fsio::{write_atomic, Durability};
use crate::id::TimelineId;
use crate::layer::desc::LayerDesc;
use crate::lsn::Lsn;

const MAGIC: &[u8; 8] = b"CMBMETA1";
/// Format version written by this code.
pub const METADATA_FORMAT_VERSION: u32 = 1;
const HEADER_BYTES: usize = 20;

/// The file name of the metadata inside a timeline directory.
pub const METADATA_FILE: &str = "metadata";

/// What a timeline keeps durable about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineMetadata {
    /// The timeline.
    pub timeline_id: TimelineId,
    /// Every version at or below this LSN is in the listed layers.
    pub disk_consistent_lsn: Lsn,
    /// Reads below this LSN are refused; layers needed only below it may be gone.
    pub gc_cutoff_lsn: Lsn,
    /// Durable entries of the timestamp index.
    pub timestamp_count: u64,
    /// The layer files.
    pub layers: Vec<LayerDesc>,
}

impl TimelineMetadata {
    /// Writes the metadata atomically into `dir`.
    pub(crate) fn store(&self, dir: &Path, durability: Durability) -> Result<()> {
        let body = serde_json::to_vec(self).expect("metadata serializes");
        let mut bytes = Vec::with_capacity(HEADER_BYTES + body.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&METADATA_FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&u32::try_from(body.len()).expect("metadata under 4 GiB").to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        Ok(write_atomic(&dir.join(METADATA_FILE), &bytes, durability)?)
    }

    /// Reads the metadata in `dir`; `None` if the timeline never flushed.
    pub(crate) fn load(dir: &Path) -> Result<Option<TimelineMetadata>> {
        let path = dir.join(METADATA_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        Self::decode(&bytes)
            .map(Some)
            .map_err(|(offset, reason)| corrupt(&path, offset, reason))
    }

    /// Decodes a metadata file's bytes; on damage, its offset and what is wrong.
    pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<TimelineMetadata, (u64, String)> {
        if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
            return Err((0, "bad metadata magic".into()));
        }
        let version = u32_at(bytes, 8);
        if version != METADATA_FORMAT_VERSION {
            return Err((8, format!("unknown metadata format version {version}")));
        }
        let body = &bytes[HEADER_BYTES..];
        if u32_at(bytes, 12) as usize != body.len() {
            return Err((12, "metadata length mismatch".into()));
        }
        if u32_at(bytes, 16) != crc32fast::hash(body) {
            return Err((16, "metadata crc mismatch".into()));
        }
        serde_json::from_slice(body).map_err(|e| (HEADER_BYTES as u64, format!("metadata body: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_bytes_decode_or_error(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = TimelineMetadata::decode(&bytes);
        }
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = TimelineMetadata {
            timeline_id: TimelineId(5),
            disk_consistent_lsn: Lsn(100),
            gc_cutoff_lsn: Lsn(10),
            timestamp_count: 3,
            layers: vec![],
        };
        assert_eq!(TimelineMetadata::load(dir.path()).expect("load"), None);
        meta.store(dir.path(), Durability::Fsync).expect("store");
        assert_eq!(TimelineMetadata::load(dir.path()).expect("load"), Some(meta));
        let path = dir.path().join(METADATA_FILE);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 2;
        bytes[last] ^= 0x40;
        std::fs::write(&path, bytes).expect("write");
        assert!(matches!(
            TimelineMetadata::load(dir.path()),
            Err(crate::StorageError::Corrupt { .. })
        ));
    }
}
