//! The tenant's branch log: an append-only file of timeline creations and deletions.
//!
//! ```text
//! file  = frame*      frame = body_len u32 | crc32(body) u32 | body (JSON of a BranchLogEntry)
//! ```
//! Creating a branch appends one frame and syncs once: the whole durable cost of a branch. An append that
//! passes the file's end writes [`ZERO_AHEAD_BYTES`] of zeros after its frame, so that the next appends
//! overwrite blocks inside the file's size and their fdatasync writes the data alone, not the inode and block
//! map too (on this project's disk an append at the end costs ~2.5× one inside the file; the safekeepers' WAL
//! and creation log do the same). Zeros are never a frame (a frame's body is never empty): the log ends at the
//! first zero header followed by zeros only.
//!
//! On load, a frame cut short or bad at the end (followed by nothing, or by zeros only: a crash mid-append) is
//! cut away with the zeros after it and reported; a bad frame followed by more frames is corruption and fails
//! the load. After a failed append the log takes no more until the process restarts (what the failed write
//! left is then read as above).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
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
/// The zeros an append that passes the file's end writes after its frame.
pub const ZERO_AHEAD_BYTES: u64 = 64 * 1024;

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
    /// Where the next frame goes: the end of the valid frames.
    end_bytes: u64,
    /// The file's length: `end_bytes` and the zeros written ahead of the frames.
    file_len_bytes: u64,
    /// An append failed: what it left past `end_bytes` is unknown, so nothing more is appended.
    poisoned: bool,
}

impl BranchLog {
    /// Opens (creating if needed) the log and returns its entries in order. A torn last frame and the zeros
    /// written ahead are cut from the file.
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<(BranchLog, Vec<BranchLogEntry>)> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err(path))?;
        if !existed {
            sync_dir(path.parent().unwrap_or(Path::new(".")), durability)?;
        }
        let bytes = std::fs::read(path).map_err(io_err(path))?;
        let (entries, valid_len) = decode(path, &bytes)?;
        if valid_len < bytes.len() {
            if is_zero(&bytes[valid_len..]) {
                tracing::debug!(path = %path.display(), valid_len, file_len = bytes.len(), "cutting the zeros after the branch log's frames");
            } else {
                tracing::warn!(path = %path.display(), valid_len, file_len = bytes.len(), "truncating a torn branch log tail");
            }
            file.set_len(valid_len as u64).map_err(io_err(path))?;
            sync_file(&file, path, durability)?;
        }
        Ok((
            BranchLog {
                path: path.to_path_buf(),
                file,
                durability,
                end_bytes: valid_len as u64,
                file_len_bytes: valid_len as u64,
                poisoned: false,
            },
            entries,
        ))
    }

    /// Appends an entry and syncs it. After a failed append every later one fails too (until a reopen).
    pub(crate) fn append(&mut self, entry: &BranchLogEntry) -> Result<()> {
        if self.poisoned {
            return Err(crate::StorageError::Io {
                path: self.path.clone(),
                source: std::io::Error::other("an earlier append failed; the branch log takes no more until a restart"),
            });
        }
        let body = serde_json::to_vec(entry).expect("log entries serialize");
        assert!(
            !body.is_empty() && body.len() <= ENTRY_BYTES_MAX,
            "log entry of {} bytes",
            body.len()
        );
        let mut bytes = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        let end_bytes = self.end_bytes + bytes.len() as u64;
        let zeros_to = end_bytes + ZERO_AHEAD_BYTES;
        if end_bytes > self.file_len_bytes {
            // Past the zeros: the next ones go with this frame (one write), so later appends land inside them.
            bytes.resize((zeros_to - self.end_bytes) as usize, 0);
        }
        let written = self
            .file
            .write_all_at(&bytes, self.end_bytes)
            .map_err(io_err(&self.path))
            .and_then(|()| Ok(sync_file(&self.file, &self.path, self.durability)?));
        if let Err(error) = written {
            tracing::error!(path = %self.path.display(), %error, "branch log append failed; poisoned");
            self.poisoned = true;
            return Err(error);
        }
        self.file_len_bytes = self.file_len_bytes.max(self.end_bytes + bytes.len() as u64);
        self.end_bytes = end_bytes;
        assert!(self.end_bytes <= self.file_len_bytes);
        Ok(())
    }
}

/// Whether `bytes` are all zeros.
fn is_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

/// Decodes the frames; returns the entries and the length of the valid prefix.
fn decode(path: &Path, bytes: &[u8]) -> Result<(Vec<BranchLogEntry>, usize)> {
    decode_prefix(bytes).map_err(|(offset, reason)| corrupt(path, offset, reason))
}

/// Decodes the frames of a branch log's bytes: the entries and the length of the valid prefix. The frames end
/// at the end of the bytes, at zeros only (written ahead of the appends), or at a frame cut short or bad that
/// only zeros follow (an append a crash tore, over the zeros); a bad frame followed by more is damage, an
/// error with its offset.
pub(crate) fn decode_prefix(bytes: &[u8]) -> std::result::Result<(Vec<BranchLogEntry>, usize), (u64, String)> {
    let mut entries = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        if rest.len() < FRAME_HEADER_BYTES {
            return Ok((entries, offset));
        }
        let body_len = u32_at(rest, 0) as usize;
        if body_len == 0 {
            // No frame is empty: the zeros written ahead of the appends, where nothing else may follow.
            if is_zero(rest) {
                return Ok((entries, offset));
            }
            return Err((
                offset as u64,
                "branch log frame of no bytes before more data".to_owned(),
            ));
        }
        if body_len > ENTRY_BYTES_MAX {
            // A header a crash tore, when nothing but zeros lies past the reach of the longest frame (the bytes
            // of one append); damage otherwise.
            let reach = (FRAME_HEADER_BYTES + ENTRY_BYTES_MAX).min(rest.len());
            if is_zero(&rest[reach..]) {
                return Ok((entries, offset));
            }
            return Err((offset as u64, "branch log frame length out of bounds".to_owned()));
        }
        let frame_len = FRAME_HEADER_BYTES + body_len;
        if rest.len() < frame_len {
            return Ok((entries, offset));
        }
        let body = &rest[FRAME_HEADER_BYTES..frame_len];
        let parsed = (crc32fast::hash(body) == u32_at(rest, 4))
            .then(|| serde_json::from_slice::<BranchLogEntry>(body).ok())
            .flatten();
        match parsed {
            Some(entry) => entries.push(entry),
            // The last append, torn: nothing but zeros follows it.
            None if is_zero(&rest[frame_len..]) => return Ok((entries, offset)),
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

    fn entry(n: u128) -> BranchLogEntry {
        BranchLogEntry::Create {
            timeline_id: TimelineId(n),
            ancestor: None,
            start_lsn: Lsn(n as u64),
        }
    }

    #[test]
    fn torn_tail_is_truncated_and_middle_damage_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("branches.log");
        {
            let (mut log, entries) = BranchLog::open(&path, Durability::Fsync).expect("open");
            assert!(entries.is_empty());
            for n in 1..=3 {
                log.append(&entry(n)).expect("append");
            }
        }
        let file = std::fs::read(&path).expect("read");
        let (entries, frames_len) = decode_prefix(&file).expect("decode");
        assert_eq!(entries, vec![entry(1), entry(2), entry(3)]);
        assert!(
            frames_len < file.len() && is_zero(&file[frames_len..]),
            "zeros after the frames"
        );
        let frames = &file[..frames_len];
        let second_end = frames_len - (FRAME_HEADER_BYTES + serde_json::to_vec(&entry(3)).expect("json").len());
        let zeros = vec![0u8; 4096];
        // The last frame torn: cut short at the file's end, cut short over the zeros, or with a byte wrong.
        let mut bad_body = frames.to_vec();
        bad_body[frames_len - 2] ^= 0xff;
        for (what, bytes) in [
            ("short at the end", frames[..frames_len - 3].to_vec()),
            ("short over zeros", [&frames[..frames_len - 3], &zeros[..]].concat()),
            ("a bad body over zeros", [bad_body.as_slice(), &zeros[..]].concat()),
            ("a bad body at the end", bad_body.clone()),
        ] {
            std::fs::write(&path, &bytes).expect("tear");
            let (_, entries) = BranchLog::open(&path, Durability::Fsync).expect(what);
            assert_eq!(entries, vec![entry(1), entry(2)], "{what}");
            assert_eq!(std::fs::read(&path).expect("read").len(), second_end, "{what}: cut");
        }
        // Damage followed by more frames fails the load: a bad byte in the first frame, a second frame's header
        // zeroed (a zero header ends the log only when zeros alone follow it).
        let mut damaged = file.clone();
        damaged[12] ^= 0xff;
        let mut zero_header = file.clone();
        let first_end = FRAME_HEADER_BYTES + serde_json::to_vec(&entry(1)).expect("json").len();
        zero_header[first_end..first_end + FRAME_HEADER_BYTES].fill(0);
        for (what, bytes) in [("bad byte", damaged), ("zero header", zero_header)] {
            std::fs::write(&path, &bytes).expect("damage");
            assert!(
                matches!(
                    BranchLog::open(&path, Durability::Fsync),
                    Err(crate::StorageError::Corrupt { .. })
                ),
                "{what}"
            );
        }
    }

    #[test]
    fn appends_overwrite_the_zeros_written_ahead_and_a_reopen_cuts_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("branches.log");
        let file_len = || std::fs::metadata(&path).expect("metadata").len();
        let (mut log, _) = BranchLog::open(&path, Durability::Fsync).expect("open");
        log.append(&entry(1)).expect("append");
        let first_end = log.end_bytes;
        assert_eq!(
            file_len(),
            first_end + ZERO_AHEAD_BYTES,
            "the first append writes the zeros"
        );
        // Appends inside the zeros leave the file's length; the one that passes them writes the next zeros.
        let mut n = 2;
        while log.end_bytes + 200 < first_end + ZERO_AHEAD_BYTES {
            log.append(&entry(n)).expect("append");
            assert_eq!(file_len(), first_end + ZERO_AHEAD_BYTES, "inside the zeros");
            n += 1;
        }
        while log.end_bytes <= first_end + ZERO_AHEAD_BYTES {
            log.append(&entry(n)).expect("append");
            n += 1;
        }
        assert_eq!(
            file_len(),
            log.end_bytes + ZERO_AHEAD_BYTES,
            "past them: the next zeros"
        );
        let end = log.end_bytes;
        drop(log);
        let (mut log, entries) = BranchLog::open(&path, Durability::Fsync).expect("reopen");
        assert_eq!(entries, (1..n).map(entry).collect::<Vec<_>>());
        assert_eq!(file_len(), end, "the zeros cut at the open");
        log.append(&entry(n)).expect("append after the reopen");
        assert_eq!(file_len(), log.end_bytes + ZERO_AHEAD_BYTES);
        drop(log);
        let (_, entries) = BranchLog::open(&path, Durability::Fsync).expect("reopen");
        assert_eq!(entries, (1..=n).map(entry).collect::<Vec<_>>());
    }
}
