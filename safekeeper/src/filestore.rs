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
//! The control file, replaced atomically (temp file, fsync, rename, fsync of the directory):
//!
//! ```text
//! magic "CMBSKCTL" | version u32 (= 1) | body_len u32 | crc32(body) u32 | body (JSON of ControlState)
//! ```
//!
//! # Crash argument
//!
//! What `flush_lsn` reports is durable; everything else may be lost, and recovery ([`FileWal::open`]) finds
//! the longest whole-frame prefix that survived.
//!
//! - **Appends** go to the open segment without fsync; [`WalStore::sync`] fdatasyncs it once (group commit)
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
//! - **The control file** is either the old or the new one after a crash (write-temp-fsync-rename-fsync-dir);
//!   its magic, version, length and crc are checked on load.
//! - **Errors**: after an I/O error in a write, sync, truncation or removal the store is poisoned and refuses
//!   further changes with [`StoreError::Poisoned`]: a failed fsync is never retried as if the data were safe.
//!   Reopening recovers from what is durable.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use cambium_types::codec::u32_at;
use cambium_types::fsio::{self, Durability};
use cambium_types::wal::{scan_frames, WalDecodeError, FRAME_HEADER_BYTES, RECORD_BODY_BYTES_MAX};
use cambium_types::Lsn;

use safekeeper_core::protocol::{ControlState, ControlStore, StoreError, WalStore};

/// The default segment size: 16 MiB.
pub const SEGMENT_SIZE_BYTES_DEFAULT: u64 = 16 * 1024 * 1024;
/// The suffix of segment file names.
pub const SEGMENT_SUFFIX: &str = ".seg";
/// The control file's name in the timeline directory.
pub const CONTROL_FILE_NAME: &str = "control";
/// The first bytes of a control file.
pub const CONTROL_MAGIC: &[u8; 8] = b"CMBSKCTL";
/// The control file format version written and accepted.
pub const CONTROL_FORMAT_VERSION: u32 = 1;
/// Largest control file accepted on load (bounds the memory an untrusted file may claim).
pub const CONTROL_FILE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// magic | version | body_len | crc.
const CONTROL_HEADER_BYTES: usize = 8 + 4 + 4 + 4;
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

/// Asserts that `frames` is whole frames back to back (the caller's contract; headers only, no crc).
fn assert_whole_frames(frames: &[u8]) {
    let mut at = 0usize;
    while at < frames.len() {
        assert!(
            frames.len() - at >= FRAME_HEADER_BYTES,
            "write of {} bytes ends inside a frame header at byte {at}",
            frames.len()
        );
        let frame_bytes = FRAME_HEADER_BYTES + u32_at(frames, at) as usize;
        assert!(
            frames.len() - at >= frame_bytes,
            "write of {} bytes ends inside the frame at byte {at} ({frame_bytes} bytes)",
            frames.len()
        );
        at += frame_bytes;
    }
}

/// The segment appends go to.
#[derive(Debug)]
struct OpenSegment {
    start_lsn: Lsn,
    /// The file, while appends come: an idle timeline lets it go (`FileWal::release_idle`) so that thousands
    /// of idle timelines hold no descriptors; the next append opens it again. Never `None` while `dirty`.
    file: Option<File>,
    path: PathBuf,
    len_bytes: u64,
    /// Bytes were written since its last fdatasync.
    dirty: bool,
    /// When it was last written or opened.
    last_used: std::time::Instant,
}

impl OpenSegment {
    /// The file, opened again (read-write) if it was let go.
    fn file(&mut self) -> Result<&File, StoreError> {
        self.last_used = std::time::Instant::now();
        if self.file.is_none() {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.path)
                .map_err(io_error(&self.path))?;
            self.file = Some(file);
        }
        Ok(self.file.as_ref().expect("set just above"))
    }
}

/// One timeline's WAL as segment files in a directory. See the module doc for the layout and crash argument.
///
/// **Invariant:** `oldest_lsn <= flush_lsn <= write_lsn`; `segment_starts` is sorted, starts at `oldest_lsn`
/// and is empty only when the WAL holds no segment at all (then the three LSNs are equal); the open segment
/// is the last one.
#[derive(Debug)]
pub struct FileWal {
    dir: PathBuf,
    config: FileStoreConfig,
    segment_starts: Vec<Lsn>,
    open: Option<OpenSegment>,
    oldest_lsn: Lsn,
    flush_lsn: Lsn,
    write_lsn: Lsn,
    /// A segment was created since the directory was last fsynced.
    dir_dirty: bool,
    poisoned: bool,
}

impl FileWal {
    /// Opens (recovers) the WAL in `dir`, which must exist. An empty directory is an empty WAL starting at
    /// `timeline_start_lsn`. A torn tail of the last segment is cut off (and logged); segments that are not
    /// contiguous, or start before `timeline_start_lsn`, are `Corrupt`.
    pub fn open(dir: &Path, timeline_start_lsn: Lsn, config: &FileStoreConfig) -> Result<FileWal, StoreError> {
        FileWal::open_committed(dir, timeline_start_lsn, timeline_start_lsn, config)
    }

    /// [`FileWal::open`] of a WAL known durable up to `commit_lsn` (the control file's): a bad frame below it
    /// is not a torn tail but damage to acknowledged WAL, so it is `Corrupt` (naming the segment and the
    /// frame's offset in it) and nothing is cut.
    pub fn open_committed(
        dir: &Path,
        timeline_start_lsn: Lsn,
        commit_lsn: Lsn,
        config: &FileStoreConfig,
    ) -> Result<FileWal, StoreError> {
        assert!(config.segment_size_bytes > 0, "segment_size_bytes must be positive");
        assert!(
            commit_lsn >= timeline_start_lsn,
            "commit LSN {commit_lsn} below the timeline start {timeline_start_lsn}"
        );
        let segments = list_segments(dir)?;
        if let Some(&(first_lsn, _)) = segments.first() {
            if first_lsn < timeline_start_lsn {
                return Err(corrupt(
                    &dir.join(segment_file_name(first_lsn)),
                    0,
                    format!("segment starts at {first_lsn}, before the timeline start {timeline_start_lsn}"),
                ));
            }
        }
        for pair in segments.windows(2) {
            let ((start_lsn, len_bytes), (next_lsn, _)) = (pair[0], pair[1]);
            let expected_bytes = next_lsn.0 - start_lsn.0;
            if len_bytes != expected_bytes {
                return Err(corrupt(
                    &dir.join(segment_file_name(start_lsn)),
                    len_bytes,
                    format!(
                        "segment holds {len_bytes} bytes but the next segment starts at {next_lsn}, \
                         {expected_bytes} bytes after its start"
                    ),
                ));
            }
        }
        let mut wal = FileWal {
            dir: dir.to_path_buf(),
            config: *config,
            segment_starts: segments.iter().map(|&(start, _)| start).collect(),
            open: None,
            oldest_lsn: segments.first().map_or(timeline_start_lsn, |&(start, _)| start),
            flush_lsn: timeline_start_lsn,
            write_lsn: timeline_start_lsn,
            dir_dirty: false,
            poisoned: false,
        };
        if let Some(&(start_lsn, len_bytes)) = segments.last() {
            let open = recover_last_segment(dir, start_lsn, len_bytes, commit_lsn, config.durability)?;
            wal.write_lsn = Lsn(start_lsn.0 + open.len_bytes);
            wal.flush_lsn = wal.write_lsn;
            wal.open = Some(open);
        }
        // Segment creations, temp file removals and the cut may not have reached the directory yet.
        sync_dir(dir, config.durability)?;
        Ok(wal)
    }

    /// The timeline directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The start LSNs of the segments, oldest first.
    pub fn segment_starts(&self) -> &[Lsn] {
        &self.segment_starts
    }

    /// Whether an earlier I/O failure poisoned the store (it must be reopened).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    fn segment_path(&self, start_lsn: Lsn) -> PathBuf {
        self.dir.join(segment_file_name(start_lsn))
    }

    /// The index of the segment holding `lsn` (the last one starting at or before it).
    fn segment_index(&self, lsn: Lsn) -> usize {
        let after = self.segment_starts.partition_point(|&start| start <= lsn);
        assert!(after > 0, "{lsn} is before the oldest segment");
        after - 1
    }

    /// Where segment `index` ends: the next one's start, or the write position for the last.
    fn segment_end(&self, index: usize) -> Lsn {
        self.segment_starts.get(index + 1).copied().unwrap_or(self.write_lsn)
    }

    fn check_healthy(&self) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        Ok(())
    }

    /// Runs a mutation; any failure poisons the store.
    fn guarded<T>(&mut self, op: impl FnOnce(&mut Self) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.check_healthy()?;
        let result = op(self);
        if let Err(error) = &result {
            tracing::error!(dir = %self.dir.display(), %error, "WAL store failed; poisoned until reopened");
            self.poisoned = true;
        }
        result
    }

    /// Creates the segment starting at the write position and makes it the open one. The previous open
    /// segment must be synced and its directory entry durable (see `roll_over`).
    fn create_segment(&mut self) -> Result<(), StoreError> {
        let start_lsn = self.write_lsn;
        let path = self.segment_path(start_lsn);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_error(&path))?;
        self.segment_starts.push(start_lsn);
        self.open = Some(OpenSegment {
            start_lsn,
            file: Some(file),
            path,
            len_bytes: 0,
            dirty: false,
            last_used: std::time::Instant::now(),
        });
        self.dir_dirty = true;
        Ok(())
    }

    /// Creates the first segment of an empty WAL now, durably (file, then directory), so that the timeline's
    /// first append pays for neither a file creation nor a directory fsync (a new branch's first commit).
    fn create_first_segment(&mut self) -> Result<(), StoreError> {
        assert!(
            self.open.is_none() && self.segment_starts.is_empty(),
            "the first segment of a WAL that has segments"
        );
        self.guarded(|wal| {
            wal.create_segment()?;
            wal.sync_open_segment_and_dir()
        })
    }

    /// Closes the open segment and starts a new one at the write position: the old one is fdatasynced and
    /// the directory entries made durable first, so recovery may trust every segment but the last.
    fn roll_over(&mut self) -> Result<(), StoreError> {
        self.sync_open_segment_and_dir()?;
        self.open = None;
        self.create_segment()
    }

    /// fdatasyncs the open segment if it was written and fsyncs the directory if a segment was created.
    fn sync_open_segment_and_dir(&mut self) -> Result<(), StoreError> {
        let durability = self.config.durability;
        if let Some(open) = &mut self.open {
            if open.dirty {
                let file = open.file.as_ref().expect("a dirty segment's file is open");
                sync_data(file, &open.path, durability)?;
                open.dirty = false;
            }
        }
        if self.dir_dirty {
            sync_dir(&self.dir, durability)?;
            self.dir_dirty = false;
        }
        Ok(())
    }

    fn write_frames(&mut self, frames: &[u8]) -> Result<(), StoreError> {
        let segment_size_bytes = self.config.segment_size_bytes;
        let mut at = 0usize;
        while at < frames.len() {
            let first_frame_bytes = (FRAME_HEADER_BYTES + u32_at(frames, at) as usize) as u64;
            match &self.open {
                None => self.create_segment()?,
                Some(open) if open.len_bytes > 0 && open.len_bytes + first_frame_bytes > segment_size_bytes => {
                    self.roll_over()?
                }
                Some(_) => {}
            }
            let open = self.open.as_mut().expect("a segment was just opened or created");
            // The run of frames that fits in this segment (at least one).
            let run_start = at;
            let mut len_bytes = open.len_bytes;
            while at < frames.len() {
                let frame_bytes = (FRAME_HEADER_BYTES + u32_at(frames, at) as usize) as u64;
                if at > run_start && len_bytes + frame_bytes > segment_size_bytes {
                    break;
                }
                len_bytes += frame_bytes;
                at += frame_bytes as usize;
            }
            let offset = open.len_bytes;
            open.file()?
                .write_all_at(&frames[run_start..at], offset)
                .map_err(io_error(&open.path))?;
            open.dirty = true;
            open.len_bytes = len_bytes;
            self.write_lsn = Lsn(open.start_lsn.0 + len_bytes);
        }
        Ok(())
    }

    /// Group commit: one fdatasync for everything written since the last sync (earlier segments were synced
    /// when they were closed).
    fn sync_all_written(&mut self) -> Result<Lsn, StoreError> {
        self.sync_open_segment_and_dir()?;
        self.flush_lsn = self.write_lsn;
        Ok(self.flush_lsn)
    }

    /// Asserts that `lsn` is a frame boundary of segment `index` by walking its frame headers from its start.
    fn assert_frame_boundary(&self, index: usize, lsn: Lsn) -> Result<(), StoreError> {
        let start_lsn = self.segment_starts[index];
        let path = self.segment_path(start_lsn);
        let file = File::open(&path).map_err(io_error(&path))?;
        let mut reader = BufReader::with_capacity(BOUNDARY_WALK_BUFFER_BYTES, file);
        let mut at = start_lsn;
        while at < lsn {
            let mut header = [0u8; FRAME_HEADER_BYTES];
            reader.read_exact(&mut header).map_err(io_error(&path))?;
            let body_bytes = u32_at(&header, 0) as usize;
            if body_bytes > RECORD_BODY_BYTES_MAX {
                return Err(corrupt(
                    &path,
                    at.0 - start_lsn.0,
                    format!("frame claims {body_bytes} bytes, more than {RECORD_BODY_BYTES_MAX}"),
                ));
            }
            reader.seek_relative(body_bytes as i64).map_err(io_error(&path))?;
            at = Lsn(at.0 + (FRAME_HEADER_BYTES + body_bytes) as u64);
        }
        assert_eq!(
            at, lsn,
            "truncate at {lsn}: not a frame boundary (a frame ends at {at})"
        );
        Ok(())
    }

    fn truncate_at(&mut self, lsn: Lsn) -> Result<(), StoreError> {
        self.sync_all_written()?;
        assert!(
            lsn >= self.oldest_lsn,
            "truncate at {lsn} below the oldest WAL {}",
            self.oldest_lsn
        );
        assert!(
            lsn <= self.flush_lsn,
            "truncate at {lsn} past the WAL end {}",
            self.flush_lsn
        );
        if lsn == self.flush_lsn {
            return Ok(());
        }
        let index = self.segment_index(lsn);
        self.assert_frame_boundary(index, lsn)?;
        // From here on only bytes below `lsn` are read, whatever happens to the rest.
        self.flush_lsn = lsn;
        self.write_lsn = lsn;
        let durability = self.config.durability;
        while self.segment_starts.len() > index + 1 {
            let start_lsn = self.segment_starts.pop().expect("more segments than index + 1");
            if self.open.as_ref().is_some_and(|open| open.start_lsn == start_lsn) {
                self.open = None;
            }
            let path = self.segment_path(start_lsn);
            fs::remove_file(&path).map_err(io_error(&path))?;
            // One at a time, newest first: a crash leaves a contiguous run of segments.
            sync_dir(&self.dir, durability)?;
        }
        let start_lsn = self.segment_starts[index];
        let mut open = match self.open.take() {
            Some(open) => {
                assert_eq!(open.start_lsn, start_lsn, "the open segment is the last one");
                open
            }
            None => {
                let path = self.segment_path(start_lsn);
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(io_error(&path))?;
                OpenSegment {
                    start_lsn,
                    file: Some(file),
                    path,
                    len_bytes: 0,
                    dirty: false,
                    last_used: std::time::Instant::now(),
                }
            }
        };
        open.len_bytes = lsn.0 - start_lsn.0;
        let len_bytes = open.len_bytes;
        open.file()?.set_len(len_bytes).map_err(io_error(&open.path))?;
        let path = open.path.clone();
        sync_all(open.file()?, &path, durability)?;
        open.dirty = false;
        self.open = Some(open);
        Ok(())
    }

    fn remove_segments_below(&mut self, lsn: Lsn) -> Result<(), StoreError> {
        let horizon = lsn.min(self.flush_lsn);
        // Never the last segment: it holds the write position.
        while self.segment_starts.len() >= 2 && self.segment_starts[1] <= horizon {
            let start_lsn = self.segment_starts.remove(0);
            self.oldest_lsn = self.segment_starts[0];
            let path = self.segment_path(start_lsn);
            fs::remove_file(&path).map_err(io_error(&path))?;
            // One at a time, oldest first: a crash leaves a contiguous run of segments.
            sync_dir(&self.dir, self.config.durability)?;
        }
        Ok(())
    }

    /// Appends to `out` whole frames of the segment starting at `start_lsn`, from `lsn` up to `limit_lsn`
    /// (`limit_is_boundary`: the limit is known to be a frame boundary, so a frame crossing it is corrupt),
    /// within the `max_bytes` of the whole answer (at least one frame). Returns where to go on, or `None`
    /// when the answer is complete.
    fn read_segment(
        &self,
        start_lsn: Lsn,
        lsn: Lsn,
        limit_lsn: Lsn,
        limit_is_boundary: bool,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Lsn>, StoreError> {
        let path = self.segment_path(start_lsn);
        let file = File::open(&path).map_err(io_error(&path))?;
        // One read for as much as the budget allows (at least a header); at most one frame more below.
        let budget_bytes = max_bytes.saturating_sub(out.len()).max(FRAME_HEADER_BYTES);
        let window_bytes = (limit_lsn.0 - lsn.0).min(budget_bytes as u64) as usize;
        let base = out.len();
        out.resize(base + window_bytes, 0);
        file.read_exact_at(&mut out[base..], lsn.0 - start_lsn.0)
            .map_err(io_error(&path))?;
        let mut at = base;
        while at < out.len() {
            let frame_lsn = Lsn(lsn.0 + (at - base) as u64);
            let offset = frame_lsn.0 - start_lsn.0;
            let room_bytes = limit_lsn.0 - frame_lsn.0;
            let crossing = |frame_bytes: u64| {
                format!("a frame of {frame_bytes} bytes at {frame_lsn} runs past {limit_lsn}, a frame boundary")
            };
            if room_bytes < FRAME_HEADER_BYTES as u64 {
                if limit_is_boundary {
                    return Err(corrupt(&path, offset, crossing(FRAME_HEADER_BYTES as u64)));
                }
                out.truncate(at);
                return Ok(None);
            }
            if out.len() - at < FRAME_HEADER_BYTES {
                // The budget cut the window inside this header.
                out.truncate(at);
                return Ok(None);
            }
            let body_bytes = u32_at(out, at) as usize;
            let frame_bytes = FRAME_HEADER_BYTES + body_bytes;
            if body_bytes > RECORD_BODY_BYTES_MAX || frame_bytes as u64 > room_bytes {
                if limit_is_boundary || body_bytes > RECORD_BODY_BYTES_MAX {
                    return Err(corrupt(&path, offset, crossing(frame_bytes as u64)));
                }
                out.truncate(at);
                return Ok(None);
            }
            if at > 0 && at + frame_bytes > max_bytes {
                out.truncate(at);
                return Ok(None);
            }
            let available_bytes = out.len() - at;
            if available_bytes < frame_bytes {
                // Past the budget yet admitted: only the answer's first frame can be, and it is read whole.
                assert_eq!(at, 0, "only the first frame may exceed max_bytes");
                out.resize(frame_bytes, 0);
                file.read_exact_at(&mut out[available_bytes..], offset + available_bytes as u64)
                    .map_err(io_error(&path))?;
            }
            let stored = u32_at(out, at + 4);
            let computed = crc32fast::hash(&out[at + FRAME_HEADER_BYTES..at + frame_bytes]);
            if stored != computed {
                return Err(corrupt(
                    &path,
                    offset,
                    format!("frame at {frame_lsn} fails its crc (stored {stored:#010x}, computed {computed:#010x})"),
                ));
            }
            at += frame_bytes;
        }
        if out.len() >= max_bytes {
            return Ok(None);
        }
        Ok(Some(Lsn(lsn.0 + (out.len() - base) as u64)))
    }
}

impl WalStore for FileWal {
    fn release_idle(&mut self, idle_for: std::time::Duration) -> bool {
        match &mut self.open {
            Some(open) if !open.dirty && open.file.is_some() && open.last_used.elapsed() >= idle_for => {
                open.file = None;
                true
            }
            _ => false,
        }
    }

    fn write_lsn(&self) -> Lsn {
        self.write_lsn
    }

    fn flush_lsn(&self) -> Lsn {
        self.flush_lsn
    }

    fn write(&mut self, lsn: Lsn, frames: &[u8]) -> Result<(), StoreError> {
        self.check_healthy()?;
        assert_eq!(lsn, self.write_lsn, "writes are contiguous");
        assert_whole_frames(frames);
        self.guarded(|wal| wal.write_frames(frames))
    }

    fn sync(&mut self) -> Result<Lsn, StoreError> {
        self.guarded(Self::sync_all_written)
    }

    fn truncate(&mut self, lsn: Lsn) -> Result<(), StoreError> {
        self.guarded(|wal| wal.truncate_at(lsn))
    }

    fn read(&self, lsn: Lsn, end_lsn: Lsn, max_bytes: usize) -> Result<Bytes, StoreError> {
        assert!(
            lsn >= self.oldest_lsn,
            "read at {lsn} below the oldest WAL {}",
            self.oldest_lsn
        );
        assert!(
            lsn <= self.flush_lsn,
            "read at {lsn} past the durable end {}",
            self.flush_lsn
        );
        let end_lsn = end_lsn.min(self.flush_lsn);
        let mut out = Vec::new();
        let mut at = lsn;
        while at < end_lsn {
            let index = self.segment_index(at);
            let segment_end = self.segment_end(index);
            let limit_lsn = segment_end.min(end_lsn);
            let limit_is_boundary = limit_lsn == segment_end || limit_lsn == self.flush_lsn;
            let start_lsn = self.segment_starts[index];
            match self.read_segment(start_lsn, at, limit_lsn, limit_is_boundary, max_bytes, &mut out)? {
                Some(next) => at = next,
                None => break,
            }
        }
        Ok(Bytes::from(out))
    }

    fn remove_below(&mut self, lsn: Lsn) -> Result<(), StoreError> {
        self.guarded(|wal| wal.remove_segments_below(lsn))
    }

    fn oldest_lsn(&self) -> Lsn {
        self.oldest_lsn
    }
}

/// The segments in `dir` as (start, length), sorted; removes stray temp files and warns about unknown files.
fn list_segments(dir: &Path) -> Result<Vec<(Lsn, u64)>, StoreError> {
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            tracing::warn!(path = %path.display(), "ignoring a file with a non-UTF-8 name in a WAL directory");
            continue;
        };
        if name.ends_with(fsio::TEMP_SUFFIX) {
            tracing::info!(path = %path.display(), "removing a stray temp file");
            fs::remove_file(&path).map_err(io_error(&path))?;
        } else if let Some(start_lsn) = parse_segment_name(name) {
            let len_bytes = entry.metadata().map_err(io_error(&path))?.len();
            segments.push((start_lsn, len_bytes));
        } else if name != CONTROL_FILE_NAME {
            tracing::warn!(path = %path.display(), "ignoring an unknown file in a WAL directory");
        }
    }
    segments.sort_unstable();
    Ok(segments)
}

/// Opens the last segment, cuts off a torn tail (durably) and fsyncs what is left. A bad frame that starts
/// below `commit_lsn` is `Corrupt`, and then nothing is cut.
fn recover_last_segment(
    dir: &Path,
    start_lsn: Lsn,
    len_bytes: u64,
    commit_lsn: Lsn,
    durability: Durability,
) -> Result<OpenSegment, StoreError> {
    let path = dir.join(segment_file_name(start_lsn));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io_error(&path))?;
    let (valid_bytes, error) = scan_segment(&file, &path, start_lsn, len_bytes)?;
    let valid_end = Lsn(start_lsn.0 + valid_bytes);
    if valid_bytes < len_bytes && valid_end < commit_lsn {
        return Err(corrupt(
            &path,
            valid_bytes,
            format!(
                "bad frame at {valid_end}, below the commit LSN {commit_lsn}: damaged durable WAL, not a torn \
                 tail ({error:?}); nothing cut"
            ),
        ));
    }
    if valid_bytes < len_bytes {
        tracing::warn!(
            path = %path.display(),
            valid_bytes,
            cut_bytes = len_bytes - valid_bytes,
            error = ?error,
            "cutting a torn WAL tail (unsynced writes cut short by a crash)"
        );
        file.set_len(valid_bytes).map_err(io_error(&path))?;
    }
    // Bytes written by a process that crashed may be in the page cache only: make them durable before they
    // are reported flushed.
    sync_all(&file, &path, durability)?;
    Ok(OpenSegment {
        start_lsn,
        file: Some(file),
        path,
        len_bytes: valid_bytes,
        dirty: false,
        last_used: std::time::Instant::now(),
    })
}

/// The length of the valid whole-frame prefix of a segment file of `len_bytes`, and the error that ended it.
/// Reads a chunk at a time: memory stays under one chunk plus one frame.
fn scan_segment(
    file: &File,
    path: &Path,
    start_lsn: Lsn,
    len_bytes: u64,
) -> Result<(u64, Option<WalDecodeError>), StoreError> {
    let mut valid_bytes = 0u64;
    // The file's bytes from `valid_bytes` to `read_to`.
    let mut buf: Vec<u8> = Vec::new();
    let mut read_to = 0u64;
    loop {
        let (valid, error) = scan_frames(&buf, Lsn(start_lsn.0 + valid_bytes));
        valid_bytes += valid as u64;
        buf.drain(..valid);
        let unread_bytes = len_bytes - read_to;
        let want_bytes = match error {
            None if unread_bytes == 0 => return Ok((valid_bytes, None)),
            None => SCAN_CHUNK_BYTES,
            Some(WalDecodeError::Truncated { needed_bytes, .. }) if unread_bytes > 0 => {
                SCAN_CHUNK_BYTES.max(needed_bytes.saturating_sub(buf.len()))
            }
            Some(error) => return Ok((valid_bytes, Some(error))),
        };
        let want_bytes = (want_bytes as u64).min(unread_bytes) as usize;
        let filled = buf.len();
        buf.resize(filled + want_bytes, 0);
        file.read_exact_at(&mut buf[filled..], read_to)
            .map_err(io_error(path))?;
        read_to += want_bytes as u64;
    }
}

/// The control file of a timeline directory, replaced atomically by [`ControlStore::persist`].
#[derive(Debug)]
pub struct FileControl {
    dir: PathBuf,
    path: PathBuf,
    durability: Durability,
    poisoned: bool,
}

impl FileControl {
    /// The control file of `dir` (not read: see [`FileControl::load`]).
    pub fn new(dir: &Path, durability: Durability) -> FileControl {
        FileControl {
            dir: dir.to_path_buf(),
            path: dir.join(CONTROL_FILE_NAME),
            durability,
            poisoned: false,
        }
    }

    /// The control file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads and checks the control file of `dir`: `None` if there is none; `Corrupt` if its magic, version,
    /// length, crc or JSON body is wrong.
    pub fn load(dir: &Path) -> Result<Option<ControlState>, StoreError> {
        let path = dir.join(CONTROL_FILE_NAME);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io_error(&path)(error)),
        };
        let mut bytes = Vec::new();
        file.take(CONTROL_FILE_BYTES_MAX + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error(&path))?;
        decode_control(&bytes, &path).map(Some)
    }
}

impl ControlStore for FileControl {
    fn persist(&mut self, state: &ControlState) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        let bytes = encode_control(state);
        fsio::write_atomic(&self.path, &bytes, self.durability).map_err(|error| {
            tracing::error!(dir = %self.dir.display(), %error, "control file write failed; poisoned");
            self.poisoned = true;
            from_fsio(error)
        })
    }
}

/// The control file's bytes for `state`.
fn encode_control(state: &ControlState) -> Vec<u8> {
    if let Err(error) = state.history.validate() {
        panic!("persisting a control state with a {error}");
    }
    let body = serde_json::to_vec(state).expect("ControlState is plain data that serializes to JSON");
    let body_len = u32::try_from(body.len()).expect("a control state is far smaller than 4 GiB");
    let mut out = Vec::with_capacity(CONTROL_HEADER_BYTES + body.len());
    out.extend_from_slice(CONTROL_MAGIC);
    out.extend_from_slice(&CONTROL_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Parses and checks control file bytes (untrusted: every failure is `Corrupt`).
fn decode_control(bytes: &[u8], path: &Path) -> Result<ControlState, StoreError> {
    if bytes.len() as u64 > CONTROL_FILE_BYTES_MAX {
        return Err(corrupt(path, 0, format!("longer than {CONTROL_FILE_BYTES_MAX} bytes")));
    }
    if bytes.len() < CONTROL_HEADER_BYTES {
        return Err(corrupt(
            path,
            0,
            format!("{} bytes, shorter than the header", bytes.len()),
        ));
    }
    if &bytes[..8] != CONTROL_MAGIC {
        return Err(corrupt(path, 0, "bad magic"));
    }
    let version = u32_at(bytes, 8);
    if version != CONTROL_FORMAT_VERSION {
        return Err(corrupt(path, 8, format!("unknown format version {version}")));
    }
    let body_len = u32_at(bytes, 12) as usize;
    let body = &bytes[CONTROL_HEADER_BYTES..];
    if body.len() != body_len {
        return Err(corrupt(
            path,
            12,
            format!("body length {body_len} but {} bytes follow the header", body.len()),
        ));
    }
    let stored = u32_at(bytes, 16);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(corrupt(
            path,
            16,
            format!("crc mismatch (stored {stored:#010x}, computed {computed:#010x})"),
        ));
    }
    let state: ControlState = serde_json::from_slice(body)
        .map_err(|e| corrupt(path, CONTROL_HEADER_BYTES as u64, format!("bad JSON body: {e}")))?;
    state
        .history
        .validate()
        .map_err(|e| corrupt(path, CONTROL_HEADER_BYTES as u64, e.to_string()))?;
    Ok(state)
}

/// Opens the timeline in `dir`: its control state, WAL and control store. `None` if it has no control file.
pub fn open_timeline(
    dir: &Path,
    config: &FileStoreConfig,
) -> Result<Option<(ControlState, FileWal, FileControl)>, StoreError> {
    let Some(state) = FileControl::load(dir)? else {
        return Ok(None);
    };
    let wal = FileWal::open_committed(dir, state.timeline_start_lsn, state.commit_lsn, config)?;
    Ok(Some((state, wal, FileControl::new(dir, config.durability))))
}

/// Writes a replica's timeline (`PullTimeline`) into an empty directory: its WAL from the source's oldest LSN,
/// appended in order, then [`ReplicaWriter::finish`] makes the WAL durable and writes the control file last.
///
/// Crash argument: until the control file exists the directory is not a timeline ([`open_timeline`] returns
/// `None`, and the node removes such a staging directory at open); the control file is written only after
/// every segment is fdatasynced and named durably in the directory (a roll-over syncs the segment it closes;
/// `finish` syncs the last one and the directory), and it is written atomically (temp, fsync, rename, fsync
/// of the directory). So a crash leaves either no control file or a complete, durable timeline.
#[derive(Debug)]
pub struct ReplicaWriter {
    dir: PathBuf,
    wal: FileWal,
    durability: Durability,
}

impl ReplicaWriter {
    /// Starts a replica in `dir`, which must exist and be empty, whose WAL begins at `oldest_lsn`: its first
    /// segment is created there (so the directory says where the WAL starts even if no frame follows).
    pub fn create(dir: &Path, oldest_lsn: Lsn, config: &FileStoreConfig) -> Result<ReplicaWriter, StoreError> {
        if fs::read_dir(dir).map_err(io_error(dir))?.next().is_some() {
            return Err(StoreError::Io {
                path: dir.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a replica's directory must be empty"),
            });
        }
        let mut wal = FileWal::open(dir, oldest_lsn, config)?;
        wal.create_first_segment()?;
        Ok(ReplicaWriter {
            dir: dir.to_path_buf(),
            wal,
            durability: config.durability,
        })
    }

    /// Where the next frames go.
    pub fn write_lsn(&self) -> Lsn {
        self.wal.write_lsn()
    }

    /// Appends whole frames at the write position (the caller checked them: this asserts only their framing).
    pub fn append(&mut self, frames: &[u8]) -> Result<(), StoreError> {
        let lsn = self.wal.write_lsn();
        self.wal.write(lsn, frames)
    }

    /// Makes the WAL durable, then writes `state` as the control file. `state` must describe this WAL: it
    /// starts at or before the first segment and its commit LSN is within the WAL written.
    pub fn finish(mut self, state: &ControlState) -> Result<(), StoreError> {
        let flush_lsn = self.wal.sync()?;
        assert!(
            state.commit_lsn <= flush_lsn,
            "replica control: commit {} past the WAL end {flush_lsn}",
            state.commit_lsn
        );
        assert!(
            state.commit_lsn >= self.wal.oldest_lsn(),
            "replica control: commit {} below the WAL start {}",
            state.commit_lsn,
            self.wal.oldest_lsn()
        );
        assert!(
            state.timeline_start_lsn <= self.wal.oldest_lsn(),
            "replica control: timeline start {} after the WAL start {}",
            state.timeline_start_lsn,
            self.wal.oldest_lsn()
        );
        FileControl::new(&self.dir, self.durability).persist(state)
    }
}

/// Creates the timeline in `dir` (durably: directory, then the control file of `ControlState::new`).
/// Idempotent: an existing timeline with the same start LSN is opened; one with another start LSN is an
/// `AlreadyExists` I/O error.
pub fn create_timeline(
    dir: &Path,
    timeline_start_lsn: Lsn,
    config: &FileStoreConfig,
) -> Result<(ControlState, FileWal, FileControl), StoreError> {
    if let Some((state, wal, control)) = open_timeline(dir, config)? {
        if state.timeline_start_lsn != timeline_start_lsn {
            return Err(StoreError::Io {
                path: dir.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!(
                        "the timeline exists with start LSN {}, not {timeline_start_lsn}",
                        state.timeline_start_lsn
                    ),
                ),
            });
        }
        return Ok((state, wal, control));
    }
    fsio::create_dir_durable(dir, config.durability).map_err(from_fsio)?;
    // The directory may have been created by an attempt that crashed before syncing its parent.
    if let Some(parent) = dir.parent() {
        sync_dir(parent, config.durability)?;
    }
    let wal = FileWal::open(dir, timeline_start_lsn, config)?;
    if wal.write_lsn() != timeline_start_lsn || !wal.segment_starts().is_empty() {
        return Err(corrupt(
            dir,
            0,
            "WAL segments without a control file: refusing to create a timeline over them",
        ));
    }
    let state = ControlState::new(timeline_start_lsn);
    let mut control = FileControl::new(dir, config.durability);
    control.persist(&state)?;
    // After the control file: a crash before this leaves a timeline with no segment, which the first append
    // creates; after it, an empty segment, which opens as an empty WAL.
    let mut wal = wal;
    wal.create_first_segment()?;
    Ok((state, wal, control))
}

#[cfg(test)]
mod tests {
    //! Round trips across segments, recovery from torn tails, truncation and removal across segments,
    //! corruption detection, poisoning, the control file, and a proptest model test against `MemWal`.

    use super::*;
    use proptest::prelude::*;
    use safekeeper_core::acceptor::Acceptor;
    use safekeeper_core::memstore::MemWal;
    use safekeeper_core::protocol::{AppendRequest, ElectedRequest, TermHistory, TermSwitch, VoteRequest};
    use std::io::Write;

    const START: Lsn = Lsn(0x100);
    const SMALL_SEGMENT_BYTES: u64 = 4096;

    fn config(segment_size_bytes: u64) -> FileStoreConfig {
        FileStoreConfig {
            segment_size_bytes,
            durability: Durability::Fsync,
        }
    }

    /// A frame whose body is `body_bytes` bytes derived from `seed`.
    fn frame(body_bytes: usize, seed: u64) -> Vec<u8> {
        let body: Vec<u8> = (0..body_bytes)
            .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
            .collect();
        let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body_bytes);
        out.extend_from_slice(&(body_bytes as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// `count` frames of varied sizes (up to `body_bytes_max`), and the boundaries between them.
    fn frames(count: usize, body_bytes_max: usize, seed: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..count {
            let seed = seed * 1000 + i as u64;
            out.extend_from_slice(&frame(1 + (seed as usize * 37) % body_bytes_max.max(1), seed));
        }
        out
    }

    /// Everything from `lsn` to the flush LSN, in reads of at most about `max_bytes`.
    fn read_all(wal: &FileWal, lsn: Lsn, max_bytes: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = lsn;
        while at < wal.flush_lsn() {
            let chunk = wal.read(at, wal.flush_lsn(), max_bytes).expect("read");
            assert!(
                !chunk.is_empty(),
                "a read below the flush LSN returns at least one frame"
            );
            assert!(chunk.len() <= max_bytes || scan_frames(&chunk, at).0 == chunk.len());
            at = Lsn(at.0 + chunk.len() as u64);
            out.extend_from_slice(&chunk);
        }
        out
    }

    /// Byte equality without printing kilobytes on failure.
    #[track_caller]
    fn assert_bytes(actual: &[u8], expected: &[u8]) {
        let first_difference = actual.iter().zip(expected).position(|(a, b)| a != b);
        assert!(
            actual == expected,
            "{} bytes, expected {}; first difference at {first_difference:?}",
            actual.len(),
            expected.len()
        );
    }

    fn segment_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(SEGMENT_SUFFIX))
            .collect();
        names.sort();
        names
    }

    fn last_segment_path(wal: &FileWal) -> PathBuf {
        wal.dir()
            .join(segment_file_name(*wal.segment_starts().last().expect("a segment")))
    }

    #[test]
    fn segment_names_round_trip() {
        assert_eq!(segment_file_name(Lsn(0x100)), "0000000000000100.seg");
        assert_eq!(parse_segment_name("0000000000000100.seg"), Some(Lsn(0x100)));
        assert_eq!(parse_segment_name("00000000000001AB.seg"), Some(Lsn(0x1AB)));
        assert_eq!(parse_segment_name("00000000000001ab.seg"), None);
        assert_eq!(parse_segment_name("100.seg"), None);
        assert_eq!(parse_segment_name("0000000000000100.seg.tmp"), None);
        assert_eq!(parse_segment_name("+000000000000100.seg"), None);
    }

    #[test]
    fn write_sync_read_across_segments_and_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        assert_eq!(
            (wal.oldest_lsn(), wal.flush_lsn(), wal.write_lsn()),
            (START, START, START)
        );
        assert!(wal.read(START, Lsn::MAX, 100).expect("read").is_empty());
        let mut expected = Vec::new();
        for batch in 0..20u64 {
            let data = frames(7, 300, batch);
            wal.write(wal.write_lsn(), &data).expect("write");
            expected.extend_from_slice(&data);
            if batch % 3 == 0 {
                assert_eq!(wal.sync().expect("sync"), Lsn(START.0 + expected.len() as u64));
            }
        }
        // A frame larger than a segment gets one of its own.
        let big = frame(2 * SMALL_SEGMENT_BYTES as usize, 99);
        let big_lsn = wal.write_lsn();
        wal.write(big_lsn, &big).expect("write");
        expected.extend_from_slice(&big);
        let after_big = frames(3, 50, 100);
        wal.write(wal.write_lsn(), &after_big).expect("write");
        expected.extend_from_slice(&after_big);
        let end = wal.sync().expect("sync");
        assert_eq!(end, Lsn(START.0 + expected.len() as u64));
        assert!(wal.segment_starts().contains(&big_lsn));
        let big_index = wal.segment_index(big_lsn);
        assert_eq!(wal.segment_end(big_index), Lsn(big_lsn.0 + big.len() as u64));

        let names = segment_files(dir.path());
        assert!(names.len() > 5, "{names:?}");
        assert_eq!(names[0], segment_file_name(START));
        for (index, &start) in wal.segment_starts().iter().enumerate() {
            let len = fs::metadata(dir.path().join(segment_file_name(start)))
                .expect("metadata")
                .len();
            assert_eq!(len, wal.segment_end(index).0 - start.0);
            let (valid, error) = scan_frames(
                &fs::read(dir.path().join(segment_file_name(start))).expect("read"),
                start,
            );
            assert!(error.is_none(), "segments hold whole frames");
            assert_eq!(valid as u64, len);
            assert!(
                len <= SMALL_SEGMENT_BYTES || start == big_lsn,
                "segment {start} of {len} bytes"
            );
        }

        for max_bytes in [1, 100, 1000, 5000, 100_000] {
            assert_bytes(&read_all(&wal, START, max_bytes), &expected);
        }
        // Reads stop at end_lsn (a frame boundary) and never return more than max_bytes after the first frame.
        let first = wal.read(START, Lsn::MAX, 1).expect("read");
        assert_eq!(scan_frames(&first, START), (first.len(), None));
        let two = Lsn(START.0 + first.len() as u64);
        let up_to_two = wal.read(START, two, usize::MAX).expect("read");
        assert_eq!(up_to_two, first);

        drop(wal);
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert_eq!(wal.flush_lsn(), end);
        assert_eq!(wal.write_lsn(), end);
        assert_bytes(&read_all(&wal, START, 3000), &expected);
        // And it goes on where it stopped.
        let more = frames(30, 200, 7);
        wal.write(end, &more).expect("write");
        expected.extend_from_slice(&more);
        wal.sync().expect("sync");
        drop(wal);
        let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert_bytes(&read_all(&wal, START, 3000), &expected);
    }

    /// Issue 13: an idle timeline holds no descriptor; the next append takes its segment up again, in place.
    #[test]
    fn an_idle_segment_file_is_let_go_and_taken_up_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(1 << 20)).expect("open");
        let first = frames(3, 100, 1);
        wal.write(START, &first).expect("write");
        assert!(
            !wal.release_idle(std::time::Duration::ZERO),
            "unsynced writes keep the file"
        );
        wal.sync().expect("sync");
        assert!(
            !wal.release_idle(std::time::Duration::from_secs(3600)),
            "not idle long enough"
        );
        assert!(wal.release_idle(std::time::Duration::ZERO), "synced and idle: let go");
        assert!(!wal.release_idle(std::time::Duration::ZERO), "nothing left to let go");
        let second = frames(2, 100, 2);
        wal.write(wal.write_lsn(), &second).expect("write after the release");
        let end = wal.sync().expect("sync");
        assert_eq!(wal.segment_starts(), &[START], "the same segment, taken up again");
        let mut expected = first.clone();
        expected.extend_from_slice(&second);
        assert_eq!(end, Lsn(START.0 + expected.len() as u64));
        assert_eq!(&wal.read(START, end, usize::MAX).expect("read")[..], &expected[..]);
        drop(wal);
        let wal = FileWal::open(dir.path(), START, &config(1 << 20)).expect("reopen");
        assert_eq!(wal.flush_lsn(), end);
    }

    #[test]
    fn torn_tail_is_cut_on_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        let synced = frames(30, 200, 1);
        wal.write(START, &synced).expect("write");
        let synced_lsn = wal.sync().expect("sync");
        // Written, never synced: a crash of the process (not the machine) leaves it in the file.
        let unsynced = frames(3, 100, 2);
        wal.write(synced_lsn, &unsynced).expect("write");
        let written_lsn = wal.write_lsn();
        let last = last_segment_path(&wal);
        let last_start = *wal.segment_starts().last().expect("a segment");
        drop(wal);
        // A torn frame: a whole header and part of the body.
        let partial = frame(500, 3);
        let mut file = OpenOptions::new().append(true).open(&last).expect("open segment");
        file.write_all(&partial[..100]).expect("append");
        drop(file);

        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert!(wal.flush_lsn() >= synced_lsn);
        assert_eq!(wal.flush_lsn(), written_lsn, "the whole valid frames survive");
        assert_eq!(
            fs::metadata(&last).expect("metadata").len(),
            written_lsn.0 - last_start.0,
            "the torn tail is gone from the file"
        );
        let mut expected = synced.clone();
        expected.extend_from_slice(&unsynced);
        assert_bytes(&read_all(&wal, START, 1000), &expected);

        // A bad crc followed by a valid frame (unsynced pages reach the disk in any order): cut at the bad one.
        let mut bad = frame(40, 4);
        bad[FRAME_HEADER_BYTES + 3] ^= 0x40;
        let mut garbage = bad.clone();
        garbage.extend_from_slice(&frame(40, 5));
        garbage.extend_from_slice(&[0xAB; 13]);
        let last = last_segment_path(&wal);
        let end = wal.write_lsn();
        wal.write(end, &frame(10, 6)).expect("write");
        let end = wal.sync().expect("sync");
        drop(wal);
        let mut file = OpenOptions::new().append(true).open(&last).expect("open segment");
        file.write_all(&garbage).expect("append");
        drop(file);
        let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert_eq!(wal.flush_lsn(), end);
        expected.extend_from_slice(&frame(10, 6));
        assert_bytes(&read_all(&wal, START, 1000), &expected);
        drop(wal);

        // A new segment holding nothing but garbage (the crash came right after a roll-over).
        let garbage_segment = dir.path().join(segment_file_name(end));
        fs::write(&garbage_segment, [0xFF; 6]).expect("write");
        fs::write(dir.path().join("control.tmp"), b"half a control file").expect("write");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert_eq!(wal.flush_lsn(), end);
        assert_eq!(fs::metadata(&garbage_segment).expect("metadata").len(), 0);
        assert!(!dir.path().join("control.tmp").exists(), "stray temp files are removed");
        // The empty segment takes the next frames.
        let more = frames(5, 100, 8);
        wal.write(end, &more).expect("write");
        wal.sync().expect("sync");
        expected.extend_from_slice(&more);
        assert_bytes(&read_all(&wal, START, 1000), &expected);
        assert_eq!(*wal.segment_starts().last().expect("a segment"), end);
    }

    #[test]
    fn a_bad_frame_below_the_commit_lsn_is_corrupt_and_nothing_is_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SEGMENT_SIZE_BYTES_DEFAULT)).expect("open");
        let written = frames(40, 200, 11);
        wal.write(START, &written).expect("write");
        let end = wal.sync().expect("sync");
        let last = last_segment_path(&wal);
        drop(wal);
        // Damage a frame in the middle of the (only, so last) segment.
        let middle = boundaries(&written, START)[20];
        let offset = middle.0 - START.0;
        let mut bytes = fs::read(&last).expect("read");
        bytes[offset as usize + FRAME_HEADER_BYTES + 1] ^= 0x01;
        fs::write(&last, &bytes).expect("write");

        // Committed past it: corrupt, named, and the file is untouched.
        match FileWal::open_committed(dir.path(), START, end, &config(SEGMENT_SIZE_BYTES_DEFAULT)) {
            Err(StoreError::Corrupt {
                path,
                offset: at,
                reason,
            }) => {
                assert!(path.ends_with(&segment_file_name(START)), "{path}");
                assert_eq!(at, offset, "{reason}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert_eq!(fs::read(&last).expect("read"), bytes, "nothing cut");

        // Committed only up to it: a torn tail as far as anyone can tell, cut there.
        let wal =
            FileWal::open_committed(dir.path(), START, middle, &config(SEGMENT_SIZE_BYTES_DEFAULT)).expect("open");
        assert_eq!(wal.flush_lsn(), middle);
        assert_bytes(&read_all(&wal, START, 100_000), &written[..offset as usize]);
    }

    #[test]
    fn a_gap_between_segments_is_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        wal.write(START, &frames(200, 300, 1)).expect("write");
        wal.sync().expect("sync");
        let starts = wal.segment_starts().to_vec();
        assert!(starts.len() >= 4);
        drop(wal);
        fs::remove_file(dir.path().join(segment_file_name(starts[1]))).expect("remove");
        match FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)) {
            Err(StoreError::Corrupt { path, .. }) => assert!(path.ends_with(&segment_file_name(starts[0])), "{path}"),
            other => panic!("expected Corrupt, got {other:?}"),
        }
        // A segment before the timeline start is corrupt too.
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(segment_file_name(Lsn(0x10))), b"").expect("write");
        assert!(matches!(
            FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)),
            Err(StoreError::Corrupt { .. })
        ));
    }

    /// The frame boundaries of `bytes` (whole frames starting at `start`), including its end.
    fn boundaries(bytes: &[u8], start: Lsn) -> Vec<Lsn> {
        let mut out = vec![start];
        let mut at = 0usize;
        while at < bytes.len() {
            at += FRAME_HEADER_BYTES + u32_at(bytes, at) as usize;
            out.push(Lsn(start.0 + at as u64));
        }
        out
    }

    #[test]
    fn truncate_across_segments_then_write_and_remove_below() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        let mut expected = frames(200, 300, 1);
        wal.write(START, &expected).expect("write");
        wal.sync().expect("sync");
        let segments_before = wal.segment_starts().len();
        assert!(segments_before >= 6);
        // Somewhere in the second segment, not at its start.
        let second = wal.segment_starts()[1];
        let cut = *boundaries(&expected, START)
            .iter()
            .find(|&&b| b > second)
            .expect("a boundary");
        // Unsynced writes are synced (then dropped) by the truncation.
        wal.write(wal.write_lsn(), &frames(3, 10, 2)).expect("write");
        wal.truncate(cut).expect("truncate");
        assert_eq!((wal.flush_lsn(), wal.write_lsn()), (cut, cut));
        assert_eq!(wal.segment_starts().len(), 2);
        assert_eq!(segment_files(dir.path()).len(), 2);
        expected.truncate((cut.0 - START.0) as usize);
        assert_bytes(&read_all(&wal, START, 1000), &expected);
        let more = frames(40, 300, 3);
        wal.write(cut, &more).expect("write");
        expected.extend_from_slice(&more);
        wal.sync().expect("sync");
        assert_bytes(&read_all(&wal, START, 1000), &expected);

        // At exactly a segment start: the segment stays, empty, and says where the WAL ends.
        let third = wal.segment_starts()[2];
        wal.truncate(third).expect("truncate");
        assert_eq!(*wal.segment_starts().last().expect("a segment"), third);
        assert_eq!(
            fs::metadata(dir.path().join(segment_file_name(third)))
                .expect("meta")
                .len(),
            0
        );
        expected.truncate((third.0 - START.0) as usize);
        drop(wal);
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert_eq!(wal.flush_lsn(), third);
        assert_bytes(&read_all(&wal, START, 1000), &expected);
        let more = frames(40, 300, 4);
        wal.write(third, &more).expect("write");
        expected.extend_from_slice(&more);
        wal.sync().expect("sync");

        // Truncating at the flush LSN changes nothing.
        wal.truncate(wal.flush_lsn()).expect("truncate");
        assert_bytes(&read_all(&wal, START, 1000), &expected);

        // remove_below: whole segments that end at or below the LSN.
        let starts = wal.segment_starts().to_vec();
        let horizon = Lsn(starts[2].0 + 1);
        wal.remove_below(horizon).expect("remove_below");
        assert_eq!(wal.oldest_lsn(), starts[2]);
        assert_eq!(wal.segment_starts(), &starts[2..]);
        assert!(!dir.path().join(segment_file_name(starts[0])).exists());
        let offset = (starts[2].0 - START.0) as usize;
        assert_bytes(&read_all(&wal, starts[2], 1000), &expected[offset..]);
        // The acceptor refuses reads below oldest_lsn; the store asserts it.
        assert!(wal.oldest_lsn() > START);
        // Never the segment holding the write position.
        wal.remove_below(Lsn::MAX).expect("remove_below");
        assert_eq!(wal.segment_starts().len(), 1);
        let last = wal.oldest_lsn();
        let offset = (last.0 - START.0) as usize;
        assert_bytes(&read_all(&wal, last, 1000), &expected[offset..]);
        drop(wal);
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert_eq!(wal.oldest_lsn(), last);
        assert_bytes(&read_all(&wal, last, 1000), &expected[offset..]);
        // Truncating to the oldest LSN empties the WAL but keeps its position.
        wal.truncate(last).expect("truncate");
        drop(wal);
        let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert_eq!((wal.oldest_lsn(), wal.flush_lsn()), (last, last));
    }

    #[test]
    #[should_panic(expected = "not a frame boundary")]
    fn truncate_inside_a_frame_is_a_bug() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        wal.write(START, &frames(5, 100, 1)).expect("write");
        wal.sync().expect("sync");
        let _ = wal.truncate(Lsn(START.0 + 3));
    }

    #[test]
    #[should_panic(expected = "below the oldest WAL")]
    fn read_below_oldest_is_a_bug() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        wal.write(START, &frames(200, 300, 1)).expect("write");
        wal.sync().expect("sync");
        wal.remove_below(wal.flush_lsn()).expect("remove_below");
        let _ = wal.read(START, wal.flush_lsn(), 100);
    }

    #[test]
    fn corruption_in_a_middle_segment_is_reported_by_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        wal.write(START, &frames(200, 300, 1)).expect("write");
        wal.sync().expect("sync");
        let middle = wal.segment_starts()[2];
        let middle_name = segment_file_name(middle);
        let path = dir.path().join(&middle_name);
        let mut bytes = fs::read(&path).expect("read");
        let flip_at = bytes.len() / 2;
        bytes[flip_at] ^= 0x01;
        fs::write(&path, &bytes).expect("write");
        // Reading up to the segment works.
        assert_eq!(read_all_until(&wal, START, middle).len() as u64, middle.0 - START.0);
        let error = (|| -> Result<(), StoreError> {
            let mut at = START;
            while at < wal.flush_lsn() {
                at = Lsn(at.0 + wal.read(at, wal.flush_lsn(), 1000)?.len() as u64);
            }
            Ok(())
        })()
        .expect_err("the flipped byte is found");
        match error {
            StoreError::Corrupt { path, offset, .. } => {
                assert!(path.ends_with(&middle_name), "{path}");
                assert!(offset <= flip_at as u64);
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        // Opening trusts middle segments (only lengths are checked): the damage shows on read.
        drop(wal);
        let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
        assert!(matches!(
            wal.read(middle, wal.flush_lsn(), usize::MAX),
            Err(StoreError::Corrupt { .. })
        ));
    }

    fn read_all_until(wal: &FileWal, lsn: Lsn, end_lsn: Lsn) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = lsn;
        while at < end_lsn {
            let chunk = wal.read(at, end_lsn, 700).expect("read");
            assert!(!chunk.is_empty());
            at = Lsn(at.0 + chunk.len() as u64);
            out.extend_from_slice(&chunk);
        }
        out
    }

    #[test]
    fn an_io_error_poisons_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal_dir = dir.path().join("timeline");
        fs::create_dir(&wal_dir).expect("mkdir");
        let mut wal = FileWal::open(&wal_dir, START, &config(SMALL_SEGMENT_BYTES)).expect("open");
        wal.write(START, &frames(5, 100, 1)).expect("write");
        let flushed = wal.sync().expect("sync");
        // The directory vanishes: the next segment cannot be created.
        fs::remove_dir_all(&wal_dir).expect("remove");
        let big = frame(SMALL_SEGMENT_BYTES as usize, 2);
        assert!(matches!(wal.write(flushed, &big), Err(StoreError::Io { .. })));
        assert!(wal.is_poisoned());
        assert!(matches!(
            wal.write(wal.write_lsn(), &frame(1, 3)),
            Err(StoreError::Poisoned)
        ));
        assert!(matches!(wal.sync(), Err(StoreError::Poisoned)));
        assert!(matches!(wal.truncate(START), Err(StoreError::Poisoned)));
        assert!(matches!(wal.remove_below(START), Err(StoreError::Poisoned)));
        assert_eq!(
            wal.flush_lsn(),
            flushed,
            "nothing is reported durable after the failure"
        );
    }

    fn sample_state() -> ControlState {
        ControlState {
            term: 7,
            history: TermHistory(vec![
                TermSwitch { term: 2, lsn: START },
                TermSwitch {
                    term: 7,
                    lsn: Lsn(0x5A0),
                },
            ]),
            commit_lsn: Lsn(0x400),
            timeline_start_lsn: START,
            remote_consistent_lsn: Lsn(0x200),
        }
    }

    #[test]
    fn control_file_round_trip_and_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(FileControl::load(dir.path()).expect("load").is_none());
        let mut control = FileControl::new(dir.path(), Durability::Fsync);
        control.persist(&ControlState::new(START)).expect("persist");
        assert_eq!(
            FileControl::load(dir.path()).expect("load"),
            Some(ControlState::new(START))
        );
        let state = sample_state();
        control.persist(&state).expect("persist");
        assert_eq!(FileControl::load(dir.path()).expect("load"), Some(state.clone()));
        assert!(!fsio::temp_path(control.path()).exists());

        let good = fs::read(control.path()).expect("read");
        assert_eq!(&good[..8], CONTROL_MAGIC);
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            fs::write(control.path(), &bad).expect("write");
            assert!(
                matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })),
                "flipped byte {at}"
            );
        }
        for len in [0, 5, CONTROL_HEADER_BYTES, good.len() - 1] {
            fs::write(control.path(), &good[..len]).expect("write");
            assert!(
                matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })),
                "truncated to {len}"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        fs::write(control.path(), &longer).expect("write");
        assert!(matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })));
        // A valid frame around a malformed history is corrupt too.
        let mut bad_state = state.clone();
        bad_state.history.0.reverse();
        let body = serde_json::to_vec(&bad_state).expect("json");
        let mut framed = Vec::new();
        framed.extend_from_slice(CONTROL_MAGIC);
        framed.extend_from_slice(&CONTROL_FORMAT_VERSION.to_le_bytes());
        framed.extend_from_slice(&(body.len() as u32).to_le_bytes());
        framed.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        framed.extend_from_slice(&body);
        fs::write(control.path(), &framed).expect("write");
        assert!(matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })));
        fs::write(control.path(), &good).expect("write");
        assert_eq!(FileControl::load(dir.path()).expect("load"), Some(state));
    }

    #[test]
    fn create_and_open_timeline() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("tenant").join("timeline");
        let cfg = config(SMALL_SEGMENT_BYTES);
        assert!(open_timeline(&dir, &cfg).expect("open").is_none());
        let (state, mut wal, mut control) = create_timeline(&dir, START, &cfg).expect("create");
        assert_eq!(state, ControlState::new(START));
        assert_eq!(wal.flush_lsn(), START);
        wal.write(START, &frames(3, 10, 1)).expect("write");
        let end = wal.sync().expect("sync");
        let mut persisted = state.clone();
        persisted.term = 3;
        control.persist(&persisted).expect("persist");
        drop((wal, control));
        // Idempotent with the same start LSN: the existing timeline.
        let (again, wal, _) = create_timeline(&dir, START, &cfg).expect("create again");
        assert_eq!(again, persisted);
        assert_eq!(wal.flush_lsn(), end);
        drop(wal);
        assert!(matches!(
            create_timeline(&dir, Lsn(0x200), &cfg),
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists
        ));
        let (state, wal, _) = open_timeline(&dir, &cfg).expect("open").expect("exists");
        assert_eq!(state, persisted);
        assert_eq!(wal.flush_lsn(), end);
        drop(wal);
        // Segments without a control file are not silently adopted.
        fs::remove_file(dir.join(CONTROL_FILE_NAME)).expect("remove");
        assert!(matches!(
            create_timeline(&dir, START, &cfg),
            Err(StoreError::Corrupt { .. })
        ));
    }

    /// `count` encoded WAL records, each a 10-byte delta of `fill`.
    fn record_frames(count: usize, fill: u8) -> Bytes {
        let mut out = Vec::new();
        for i in 0..count {
            let record = cambium_types::WalRecord {
                commit_ts_us: i as u64,
                db_size_pages: 1,
                entries: vec![(
                    cambium_types::Key::page(0),
                    cambium_types::Value::Delta(vec![cambium_types::Patch {
                        offset: 0,
                        data: Bytes::from(vec![fill; 10]),
                    }]),
                )],
            };
            record.encode(&mut out).expect("encodes");
        }
        Bytes::from(out)
    }

    /// An acceptor over the file stores refuses a read that starts inside a frame (moved here from the protocol
    /// core's unit tests, which have no file store).
    #[test]
    fn a_read_inside_a_frame_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = FileStoreConfig {
            segment_size_bytes: 4096,
            durability: cambium_types::Durability::Fsync,
        };
        let (control, wal, store) = create_timeline(dir.path(), START, &config).expect("create");
        let mut a = Acceptor::new(control, wal, store).expect("new");
        a.vote(VoteRequest { term: 1 }).expect("vote");
        a.elected(ElectedRequest {
            term: 1,
            history: TermHistory(vec![TermSwitch { term: 1, lsn: START }]),
            start_streaming_at: START,
        })
        .expect("elected");
        let data = record_frames(3, 9);
        a.append(&AppendRequest {
            term: 1,
            begin_lsn: START,
            data: data.clone(),
            commit_lsn: START,
        })
        .expect("append");
        a.sync().expect("sync");
        for offset in [1u64, 5, 8, 13, data.len() as u64 - 1] {
            let result = a.read_wal_in_term(1, Lsn(START.0 + offset), 1 << 20);
            assert!(result.is_err(), "a read at +{offset}, inside a frame, must fail");
        }
        assert_eq!(a.read_wal_in_term(1, START, 1 << 20).expect("aligned read"), data);
    }

    #[test]
    fn acceptor_over_files_survives_a_restart() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("timeline");
        let cfg = config(SMALL_SEGMENT_BYTES);
        let (state, wal, control) = create_timeline(&dir, START, &cfg).expect("create");
        let mut acceptor = Acceptor::new(state, wal, control).expect("acceptor");
        acceptor.vote(VoteRequest { term: 1 }).expect("vote");
        acceptor
            .elected(ElectedRequest {
                term: 1,
                history: TermHistory(vec![TermSwitch { term: 1, lsn: START }]),
                start_streaming_at: START,
            })
            .expect("elected");
        let data = Bytes::from(frames(50, 300, 1));
        let end = Lsn(START.0 + data.len() as u64);
        acceptor
            .append(&AppendRequest {
                term: 1,
                begin_lsn: START,
                data: data.clone(),
                commit_lsn: end,
            })
            .expect("append");
        let response = acceptor.sync().expect("sync");
        assert_eq!(response.flush_lsn, end);
        let control = acceptor.control().clone();
        drop(acceptor);
        let (state, wal, store) = open_timeline(&dir, &cfg).expect("open").expect("exists");
        assert_eq!(state.term, control.term);
        assert_eq!(state.history, control.history);
        let acceptor = Acceptor::new(state, wal, store).expect("acceptor");
        assert_eq!(acceptor.state().flush_lsn, end);
        // The commit LSN is persisted lazily; the WAL itself is all there.
        assert!(acceptor.wal().read(START, end, usize::MAX).expect("read") == data);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Frames with these body sizes.
        Write(Vec<usize>),
        Sync,
        /// At a synced frame boundary at or above the oldest LSN.
        Truncate(prop::sample::Index),
        RemoveBelow(prop::sample::Index),
        /// A clean restart of the process: unsynced bytes are in the page cache and may survive.
        Reopen,
        /// From and to frame boundaries, with a byte budget.
        Read(prop::sample::Index, prop::sample::Index, usize),
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => prop::collection::vec(1usize..700, 1..6).prop_map(Op::Write),
            3 => Just(Op::Sync),
            1 => any::<prop::sample::Index>().prop_map(Op::Truncate),
            1 => any::<prop::sample::Index>().prop_map(Op::RemoveBelow),
            1 => Just(Op::Reopen),
            2 => (any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1usize..3000)
                .prop_map(|(a, b, max)| Op::Read(a, b, max)),
        ]
    }

    fn model_cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|cases| cases.parse().ok())
            .unwrap_or(48)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(model_cases()))]

        #[test]
        fn matches_the_memory_model(ops in prop::collection::vec(arb_op(), 1..40), segment_size_bytes in 200u64..3000) {
            let dir = tempfile::tempdir().expect("tempdir");
            let cfg = config(segment_size_bytes);
            let mut wal = FileWal::open(dir.path(), START, &cfg).expect("open");
            let mut model = MemWal::new(START);
            // Every frame boundary of the written WAL, ascending.
            let mut bounds = vec![START];
            let mut seed = 0u64;
            for op in ops {
                match op {
                    Op::Write(sizes) => {
                        let mut data = Vec::new();
                        for size in sizes {
                            seed += 1;
                            data.extend_from_slice(&frame(size, seed));
                            bounds.push(Lsn(START.0 + (model.write_lsn().0 - START.0) + data.len() as u64));
                        }
                        let lsn = model.write_lsn();
                        wal.write(lsn, &data).expect("write");
                        model.write(lsn, &data).expect("write");
                    }
                    Op::Sync => {
                        prop_assert_eq!(wal.sync().expect("sync"), model.sync().expect("sync"));
                    }
                    Op::Truncate(index) => {
                        wal.sync().expect("sync");
                        model.sync().expect("sync");
                        let candidates: Vec<Lsn> =
                            bounds.iter().copied().filter(|&b| b >= wal.oldest_lsn()).collect();
                        let lsn = *index.get(&candidates);
                        wal.truncate(lsn).expect("truncate");
                        model.truncate(lsn).expect("truncate");
                        bounds.retain(|&b| b <= lsn);
                    }
                    Op::RemoveBelow(index) => {
                        let candidates: Vec<Lsn> = bounds
                            .iter()
                            .copied()
                            .filter(|&b| b >= wal.oldest_lsn() && b <= wal.flush_lsn())
                            .collect();
                        let lsn = *index.get(&candidates);
                        let before = wal.oldest_lsn();
                        wal.remove_below(lsn).expect("remove_below");
                        prop_assert!(wal.oldest_lsn() >= before);
                        prop_assert!(wal.oldest_lsn() <= lsn.max(before));
                    }
                    Op::Reopen => {
                        let oldest = wal.oldest_lsn();
                        let synced = model.flush_lsn();
                        drop(wal);
                        wal = FileWal::open(dir.path(), START, &cfg).expect("reopen");
                        prop_assert!(wal.flush_lsn() >= synced);
                        prop_assert_eq!(wal.oldest_lsn(), oldest);
                        let kept = (wal.flush_lsn().0 - synced.0) as usize;
                        prop_assert!(kept <= model.pending_bytes());
                        model.crash(kept);
                        bounds.retain(|&b| b <= model.write_lsn());
                    }
                    Op::Read(a, b, max_bytes) => {
                        let candidates: Vec<Lsn> = bounds
                            .iter()
                            .copied()
                            .filter(|&b| b >= wal.oldest_lsn() && b <= wal.flush_lsn())
                            .collect();
                        let (a, b) = (*a.get(&candidates), *b.get(&candidates));
                        let (from, to) = (a.min(b), a.max(b));
                        let got = wal.read(from, to, max_bytes).expect("read");
                        let want = model.read(from, to, max_bytes).expect("read");
                        prop_assert!(
                            got == want,
                            "read({}, {}, {}): {} bytes, the model {}", from, to, max_bytes, got.len(), want.len()
                        );
                    }
                }
                prop_assert_eq!(wal.flush_lsn(), model.flush_lsn());
                prop_assert_eq!(wal.write_lsn(), model.write_lsn());
            }
            wal.sync().expect("sync");
            model.sync().expect("sync");
            let oldest = wal.oldest_lsn();
            let expected = model.read(oldest, Lsn::MAX, usize::MAX).expect("read");
            prop_assert!(read_all(&wal, oldest, 1500) == expected, "the WAL differs from the model");
            drop(wal);
            let wal = FileWal::open(dir.path(), START, &cfg).expect("reopen");
            prop_assert_eq!(wal.flush_lsn(), model.flush_lsn());
            prop_assert!(read_all(&wal, oldest, usize::MAX) == expected, "the reopened WAL differs from the model");
        }
    }
}
