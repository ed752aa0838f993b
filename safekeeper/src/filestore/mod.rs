//! File-backed WAL segments ([`FileWal`]) and control file ([`FileControl`]) for one acceptor timeline.
//!
//! # Layout
//!
//! One directory per timeline:
//!
//! ```text
//! <dir>/control                     the control file (below)
//! <dir>/0000000000000100.seg        WAL segment whose first byte is LSN 0x100
//! <dir>/0000000000004100.seg        the next segment: starts where the previous one ends
//! ```
//!
//! A segment is named by the LSN of its first byte as 16 uppercase hex digits and `.seg`. It holds whole WAL
//! frames (`body_len u32 | crc32(body) u32 | body`, little-endian, see `cambium_types::wal`) back to back:
//! byte `i` of segment `S` is the WAL byte at LSN `S + i`. Frames never straddle segments. A frame goes into
//! the open (last) segment unless the segment already holds bytes and the frame would take it past
//! `segment_size_bytes`; then it starts a new segment. So a segment is at most `segment_size_bytes` long,
//! except one holding a single larger frame. The segments of a directory are contiguous: each one's length
//! is exactly the distance to the next one's start.
//!
//! The open segment's file may be longer than its WAL: zeros are written ahead of its frames (at least
//! `ZERO_AHEAD_BYTES_MIN`, as many as it holds, at most `ZERO_AHEAD_BYTES_MAX` at a time, never past
//! `segment_size_bytes`; after writes of at most `ZERO_AHEAD_WRITE_BYTES_MAX`, a commit's, not a bulk load's), so
//! that an append overwrites blocks already allocated inside the file's size and its
//! fdatasync writes the data alone, not the inode and block map too (PostgreSQL zero-fills its WAL segments for
//! the same reason). Zeros are never WAL: a frame header of zeros is an empty frame, which no writer makes and
//! every scan refuses. A roll-over cuts the closed segment to its WAL before syncing it; recovery and a
//! truncation cut the last segment to its valid frames.
//!
//! The control file is two slots of equal size (4 KiB, or the next power of two that holds the state), each
//! empty (zeros) or one state:
//!
//! ```text
//! magic "CMBSKCTL" | version u32 (= 2) | seq u64 | body_len u32 | crc32(seq u64 | body_len u64 | body) u32
//!   | body (JSON of ControlState) | zeros to the slot's end
//! ```
//!
//! The state is the good slot with the higher sequence number. An update writes the *other* slot with the next
//! sequence number, in place (one write, one fdatasync: the file's length never changes), so a timeline's
//! control state costs no new inode, rename or directory fsync after its file is made. The whole file is
//! written atomically (temp file, fsync, rename, fsync of the directory; the state in slot 0, slot 1 zeros)
//! when it is made, when the state outgrows its slot, and on the first update of a file in the older format
//! (version 1: `magic | version u32 (= 1) | body_len u32 | crc32(body) u32 | body`, one state, replaced whole),
//! which is still read.
//!
//! # Crash argument
//!
//! What `flush_lsn` reports is durable; everything else may be lost, and recovery ([`FileWal::open`]) finds
//! the longest whole-frame prefix that survived.
//!
//! - **Appends** go to the open segment without fsync (with the next zeros when they pass the last ones);
//!   [`WalStore::sync`] fdatasyncs it once (group commit)
//!   and fsyncs the directory if a segment was created since the last sync, and only then moves
//!   `flush_lsn`. A crash loses or tears only bytes past `flush_lsn`.
//! - **A new segment** is created only after the previous one is fdatasynced and the previous one's
//!   directory entry is durable. So when a segment exists on disk, every earlier one is whole and durable:
//!   recovery scans only the last segment and checks the others cheaply (lengths contiguous with the next
//!   start; crcs are checked on every read).
//! - **Recovery** scans the last segment's frames (length bound, completeness, crc) and cuts the file at the
//!   first frame that fails (a torn or partly written tail: unsynced bytes reach the disk in any order), with
//!   set_len and fsync — unless the bad frame starts below the commit LSN of the control file: that WAL was
//!   durable (acknowledged), so the damage is not a torn tail and the open fails with `Corrupt` naming the
//!   segment and the frame's offset, cutting nothing. (Damage between that persisted commit LSN, which lags
//!   by up to `COMMIT_PERSIST_DISTANCE_BYTES`, and the old flush LSN cannot be told from a torn tail: it is
//!   cut, and the acceptor catches up from its peers.) It then fsyncs the last segment and the directory before reporting anything as
//!   flushed, because after a *process* crash the page cache may still hold bytes that were never synced.
//!   Stray temp files are removed.
//! - **Truncation** syncs, deletes the later segments newest first, fsyncing the directory after each
//!   deletion (so a crash leaves a contiguous run, never a gap), then cuts the segment holding the
//!   truncation point (set_len, fsync). It keeps that segment even when it becomes empty, so the directory
//!   still says where the WAL ends. A crash part way leaves a longer WAL than asked for, which is what the
//!   caller sees when `truncate` did not return `Ok` (the acceptor truncates before it persists the new term
//!   history).
//! - **Removal** (`remove_below`) deletes the oldest segments first, fsyncing the directory after each, and
//!   never the last one.
//! - **The control file**: an update writes only the slot that does not hold the newest state, and is
//!   acknowledged after its fdatasync. A crash part way leaves that slot torn (its crc fails) or whole; the
//!   other slot still holds the state before the update, which is then what loads: exactly what a crash before
//!   an unacknowledged write may leave. The next update writes the torn slot again, never the good one. A
//!   whole-file write is either the old file or the new one after a crash (write-temp-fsync-rename-fsync-dir).
//!   A file that is not two slots long, or whose slots are both bad, is `Corrupt`. A damaged newest slot cannot
//!   be told from a torn write and reads as the state before it (as damage to unsynced WAL reads as a torn
//!   tail, below); each slot's magic, version, length and crc are checked on load.
//! - **Errors**: after an I/O error in a write, sync, truncation or removal the store is poisoned and refuses
//!   further changes with [`StoreError::Poisoned`]: a failed fsync is never retried as if the data were safe.
//!   Reopening recovers from what is durable.

mod control;
mod segments;
#[cfg(test)]
mod tests;
mod timeline;

use std::fs::File;
use std::path::{Path, PathBuf};

use cambium_types::fsio::{self, Durability};
use cambium_types::Lsn;
use safekeeper_core::protocol::StoreError;

pub use control::FileControl;
pub use segments::{FileWal, ZERO_AHEAD_BYTES_MAX, ZERO_AHEAD_BYTES_MIN, ZERO_AHEAD_WRITE_BYTES_MAX};
pub use timeline::{create_timeline, create_timeline_deferred, open_timeline, ReplicaWriter};

/// The default segment size: 16 MiB.
pub const SEGMENT_SIZE_BYTES_DEFAULT: u64 = 16 * 1024 * 1024;
/// The suffix of segment file names.
pub const SEGMENT_SUFFIX: &str = ".seg";
/// The control file's name in the timeline directory.
pub const CONTROL_FILE_NAME: &str = "control";
/// The first bytes of a control file.
pub const CONTROL_MAGIC: &[u8; 8] = b"CMBSKCTL";
/// The control file format version written (two slots) and accepted.
pub const CONTROL_FORMAT_VERSION: u32 = 2;
/// The older control file format (one state, replaced whole): read, and rewritten in the current one by the
/// first update.
pub const CONTROL_FORMAT_VERSION_WHOLE: u32 = 1;
/// The smallest control file slot (the file is two).
pub const CONTROL_SLOT_BYTES_MIN: u64 = 4096;
/// Largest control file accepted on load (bounds the memory an untrusted file may claim).
pub const CONTROL_FILE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// magic | version | body_len | crc: the header of a version 1 control file.
const CONTROL_HEADER_BYTES: usize = 8 + 4 + 4 + 4;
/// magic | version | seq | body_len | crc: the header of a control file slot.
const CONTROL_SLOT_HEADER_BYTES: usize = 8 + 4 + 8 + 4 + 4;
/// How much of the last segment recovery reads at a time (plus, when needed, the rest of one frame).
const SCAN_CHUNK_BYTES: usize = 1024 * 1024;
/// Read buffer of the frame-boundary walk in `truncate`.
const BOUNDARY_WALK_BUFFER_BYTES: usize = 64 * 1024;
/// `segment_name` is 16 hex digits and the suffix.
const SEGMENT_NAME_HEX_DIGITS: usize = 16;

/// Knobs of the file store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStoreConfig {
    /// A segment takes no more frames once the next would take it past this size (a single larger frame gets
    /// a segment of its own).
    pub segment_size_bytes: u64,
    /// Whether to fsync (`Off` for benchmarks only).
    pub durability: Durability,
}

impl Default for FileStoreConfig {
    fn default() -> Self {
        FileStoreConfig {
            segment_size_bytes: SEGMENT_SIZE_BYTES_DEFAULT,
            durability: Durability::Fsync,
        }
    }
}

/// The file name of the segment starting at `start_lsn`: `0000000000000100.seg`.
pub fn segment_file_name(start_lsn: Lsn) -> String {
    format!("{:016X}{SEGMENT_SUFFIX}", start_lsn.0)
}

/// The start LSN a segment file name stands for, if it is one (the exact form [`segment_file_name`] writes).
fn parse_segment_name(name: &str) -> Option<Lsn> {
    let hex = name.strip_suffix(SEGMENT_SUFFIX)?;
    if hex.len() != SEGMENT_NAME_HEX_DIGITS || !hex.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(Lsn)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.display().to_string(),
        offset,
        reason: reason.into(),
    }
}

/// The shared durable-file helpers fail with an [`fsio::IoError`] naming the path.
fn from_fsio(error: fsio::IoError) -> StoreError {
    StoreError::Io {
        path: error.path.display().to_string(),
        source: error.source,
    }
}

fn sync_data(file: &File, path: &Path, durability: Durability) -> Result<(), StoreError> {
    fsio::sync_file(file, path, durability).map_err(from_fsio)
}

/// fsync with metadata: after `set_len` the new size must be durable.
fn sync_all(file: &File, path: &Path, durability: Durability) -> Result<(), StoreError> {
    if durability == Durability::Fsync {
        file.sync_all().map_err(io_error(path))?;
    }
    Ok(())
}

fn sync_dir(dir: &Path, durability: Durability) -> Result<(), StoreError> {
    fsio::sync_dir(dir, durability).map_err(from_fsio)
}

/// Runs once the directory of a timeline made by [`create_timeline_deferred`] is durable, before the write that
/// made it returns (the safekeeper node logs there that the timeline has files: see `node::creations`). Its
/// error fails that write.
pub type OnDurable = Box<dyn Fn() -> Result<(), StoreError> + Send + Sync>;

/// The directory of a timeline made by [`create_timeline_deferred`], shared by its WAL and control stores: it
/// does not exist until the first write of either ([`DeferredDir::make`]: the directory, any directory above it
/// that is missing, and the empty first segment, none synced), and whichever store syncs first after that makes
/// it durable ([`DeferredDir::make_durable`]: fsyncs the timeline's directory and each one above it whose entry
/// was made, then runs the [`OnDurable`]) before it reports anything durable. So a new timeline costs no file
/// until it is used, its first vote pays for its directory, and its first commit finds the segment made.
pub(crate) struct DeferredDir {
    dir: PathBuf,
    first_segment: PathBuf,
    durability: Durability,
    state: parking_lot::Mutex<Deferred>,
    on_durable: OnDurable,
}

impl std::fmt::Debug for DeferredDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredDir")
            .field("dir", &self.dir)
            .field("state", &*self.state.lock())
            .finish_non_exhaustive()
    }
}

/// Where a [`DeferredDir`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deferred {
    /// Nothing on disk.
    Absent,
    /// On disk, not yet durable: these directories (the timeline's own first) are to be fsynced.
    Made(Vec<PathBuf>),
    /// Durable, and the [`OnDurable`] has run.
    Durable,
}

impl DeferredDir {
    /// A timeline directory `dir` whose WAL starts at `start_lsn`, in state `state` (`Absent`, or `Made` for a
    /// directory found without a control file).
    fn new(dir: &Path, start_lsn: Lsn, durability: Durability, state: Deferred, on_durable: OnDurable) -> DeferredDir {
        assert!(state != Deferred::Durable, "a deferred directory starts absent or made");
        DeferredDir {
            dir: dir.to_path_buf(),
            first_segment: dir.join(segment_file_name(start_lsn)),
            durability,
            state: parking_lot::Mutex::new(state),
            on_durable,
        }
    }

    /// Where it is now.
    #[cfg(test)]
    pub(crate) fn state(&self) -> Deferred {
        self.state.lock().clone()
    }

    /// Makes the directory, the missing ones above it, and the empty first segment, unless done already: none of
    /// it synced (see [`DeferredDir::make_durable`]). Before it is durable, a crash leaves at most a directory
    /// without a control file holding an empty first segment, which is no timeline: the node's creation log
    /// remakes it, or the next creation takes it over.
    fn make(&self) -> Result<(), StoreError> {
        let mut state = self.state.lock();
        match &mut *state {
            Deferred::Durable => return Ok(()),
            Deferred::Absent => {
                // The directories this makes: each one's entry, in the directory above it, is to be synced.
                let mut made = vec![self.dir.clone()];
                let mut above = self.dir.parent();
                while let Some(dir) = above {
                    if dir.is_dir() {
                        made.push(dir.to_path_buf());
                        break;
                    }
                    made.push(dir.to_path_buf());
                    above = dir.parent();
                }
                std::fs::create_dir_all(&self.dir).map_err(io_error(&self.dir))?;
                *state = Deferred::Made(made);
            }
            Deferred::Made(_) => {}
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.first_segment)
        {
            Ok(_) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(error) => Err(io_error(&self.first_segment)(error)),
        }
    }

    /// Makes a made directory durable (fsyncs it, unless `own_synced`: the caller just did, then each directory
    /// above whose entry it made) and runs the [`OnDurable`]. Returns whether the directory is durable now:
    /// `false` if nothing was made yet (nothing to sync). On an error it stays made, to be synced again.
    fn make_durable(&self, own_synced: bool) -> Result<bool, StoreError> {
        let mut state = self.state.lock();
        let dirs = match &*state {
            Deferred::Absent => return Ok(false),
            Deferred::Durable => return Ok(true),
            Deferred::Made(dirs) => dirs,
        };
        for dir in dirs.iter().skip(usize::from(own_synced)) {
            sync_dir(dir, self.durability)?;
        }
        (self.on_durable)()?;
        *state = Deferred::Durable;
        Ok(true)
    }
}
