//! The tenant's branch log: an append-only file of timeline creations and deletions.
//!
//! ```text
//! file  = frame*      frame = body_len u32 | crc32(body) u32 | body (JSON of a BranchLogEntry)
//! ```
//! Creating a branch appends one frame and syncs once: the whole durable cost of a branch. On load, a frame
//! cut short at the end of the file (a crash mid-append) is truncated away and reported; a bad frame followed
//! by more data is corruption and fails the load.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::codec::u32_at;
use crate::error::{corrupt, io_err, Result};
use crate::fsio::{sync_dir, sync_file, Durability};
use crate::id::TimelineId;
use crate::lsn::Lsn;

const FRAME_HEADER_BYTES: usize = 8;
/// The file name of a tenant's branch log.
pub const BRANCH_LOG_FILE: &str = "branches.log";
const ENTRY_BYTES_MAX: usize = 64 * 1024;

/// One change to the set of timelines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum BranchLogEntry {
    /// A timeline was created: a root at `start_lsn`, or a branch of `ancestor` at `start_lsn`.
    Create {
        /// The new timeline.
        timeline_id: TimelineId,
        /// Its ancestor, for a branch.
        ancestor: Option<TimelineId>,
        /// Its first LSN (the branch point, for a branch).
        start_lsn: Lsn,
    },
    /// A timeline was sealed: nothing reads it past `end_lsn` (its children's newest branch point), and
    /// everything up to there was in its layer files before this entry was written. No WAL is followed for it
    /// after a restart.
    Seal {
        /// The timeline.
        timeline_id: TimelineId,
        /// Where it ends.
        end_lsn: Lsn,
    },
    /// A timeline was deleted.
    Delete {
        /// The timeline.
        timeline_id: TimelineId,
    },
}

pub(crate) struct BranchLog {
    path: PathBuf,
    file: File,
    durability: Durability,
}

impl BranchLog {
    /// Opens (creating if needed) the log and returns its entries in order.
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<(BranchLog, Vec<BranchLogEntry>)> {
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io_err(path))?;
        if !existed {
            sync_dir(path.parent().unwrap_or(Path::new(".")), durability)?;
        }
        let bytes = std::fs::read(path).map_err(io_err(path))?;
        let (entries, valid_len) = decode(path, &bytes)?;
        if valid_len < bytes.len() {
            tracing::warn!(path = %path.display(), valid_len, file_len = bytes.len(), "truncating a torn branch log tail");
            file.set_len(valid_len as u64).map_err(io_err(path))?;
            sync_file(&file, path, durability)?;
        }
        file.flush().map_err(io_err(path))?;
        Ok((
            BranchLog {
                path: path.to_path_buf(),
                file,
                durability,
            },
            entries,
        ))
    }

    /// Appends an entry and syncs it.
    pub(crate) fn append(&mut self, entry: &BranchLogEntry) -> Result<()> {
        let body = serde_json::to_vec(entry).expect("log entries serialize");
        assert!(body.len() <= ENTRY_BYTES_MAX, "log entry of {} bytes", body.len());
        let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
        frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        frame.extend_from_slice(&body);
        self.file.write_all(&frame).map_err(io_err(&self.path))?;
        Ok(sync_file(&self.file, &self.path, self.durability)?)
    }
}

/// Decodes the frames; returns the entries and the length of the valid prefix.
fn decode(path: &Path, bytes: &[u8]) -> Result<(Vec<BranchLogEntry>, usize)> {
    decode_prefix(bytes).map_err(|(offset, reason)| corrupt(path, offset, reason))
}

/// Decodes the frames of a branch log's bytes: the entries and the length of the valid prefix (a frame cut
/// short or bad at the very end ends it); damage followed by more frames is an error with its offset.
pub(crate) fn decode_prefix(bytes: &[u8]) -> std::result::Result<(Vec<BranchLogEntry>, usize), (u64, String)> {
    let mut entries = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        if rest.len() < FRAME_HEADER_BYTES {
            return Ok((entries, offset));
        }
        let body_len = u32_at(rest, 0) as usize;
        let frame_len = FRAME_HEADER_BYTES + body_len;
        if body_len > ENTRY_BYTES_MAX || rest.len() < frame_len {
            // Cut short by a crash, unless more frames follow (then it is damage, not a torn append).
            if body_len > ENTRY_BYTES_MAX && rest.len() > FRAME_HEADER_BYTES + ENTRY_BYTES_MAX {
                return Err((offset as u64, "branch log frame length out of bounds".to_owned()));
            }
            return Ok((entries, offset));
        }
        let body = &rest[FRAME_HEADER_BYTES..frame_len];
        let parsed = (crc32fast::hash(body) == u32_at(rest, 4))
            .then(|| serde_json::from_slice::<BranchLogEntry>(body).ok())
            .flatten();
        match parsed {
            Some(entry) => entries.push(entry),
            None if offset + frame_len == bytes.len() => return Ok((entries, offset)),
            None => return Err((offset as u64, "branch log frame fails its crc".to_owned())),
        }
        offset += frame_len;
    }
    Ok((entries, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_bytes_decode_or_error(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(Path::new("x"), &bytes);
        }
    }

    #[test]
    fn torn_tail_is_truncated_and_middle_damage_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("branches.log");
        let entry = |n| BranchLogEntry::Create {
            timeline_id: TimelineId(n),
            ancestor: None,
            start_lsn: Lsn(n as u64),
        };
        {
            let (mut log, entries) = BranchLog::open(&path, Durability::Fsync).expect("open");
            assert!(entries.is_empty());
            for n in 1..=3 {
                log.append(&entry(n)).expect("append");
            }
        }
        let full = std::fs::read(&path).expect("read");
        std::fs::write(&path, &full[..full.len() - 3]).expect("tear");
        let (_, entries) = BranchLog::open(&path, Durability::Fsync).expect("open");
        assert_eq!(entries, vec![entry(1), entry(2)]);
        let mut damaged = full.clone();
        damaged[12] ^= 0xff;
        std::fs::write(&path, &damaged).expect("damage");
        assert!(matches!(
            BranchLog::open(&path, Durability::Fsync),
            Err(crate::StorageError::Corrupt { .. })
        ));
    }
}
