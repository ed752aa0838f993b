//! WAL segment files ([`FileWal`]): appends, group-commit syncs, recovery of the last segment's torn tail,
//! truncation and removal across segments, reads with every frame's crc checked. The layout and the crash
//! argument are in the [module above](super).

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use cambium_types::codec::u32_at;
use cambium_types::fsio::{self, Durability};
use cambium_types::wal::{scan_frames, WalDecodeError, FRAME_HEADER_BYTES, RECORD_BODY_BYTES_MAX};
use cambium_types::Lsn;
use safekeeper_core::protocol::{StoreError, WalStore};

use super::{
    corrupt, io_error, parse_segment_name, segment_file_name, sync_all, sync_data, sync_dir, DeferredDir,
    FileStoreConfig, BOUNDARY_WALK_BUFFER_BYTES, CONTROL_FILE_NAME, SCAN_CHUNK_BYTES,
};

/// Fewest zeros written ahead of a segment's frames at a time.
pub const ZERO_AHEAD_BYTES_MIN: u64 = 16 * 1024;
/// Most zeros written ahead of a segment's frames at a time.
pub const ZERO_AHEAD_BYTES_MAX: u64 = 1024 * 1024;
/// Largest write that is followed by zeros when it passes the last ones. A larger one (a bulk load's frames)
/// extends the file without them: its data dwarfs the inode and block map its fdatasync also writes, and zeros
/// would double what the disk takes.
pub const ZERO_AHEAD_WRITE_BYTES_MAX: u64 = 64 * 1024;

/// How many zeros to write after a segment's frames once its appends reach `len_bytes` past the zeros written
/// before: as many as the segment holds, within [`ZERO_AHEAD_BYTES_MIN`, `ZERO_AHEAD_BYTES_MAX`] and rounded
/// up to a 4 KiB block. An append that lands inside zeros (inside the file's size, on blocks allocated
/// already) is synced by an fdatasync that writes only the data; one that extends the file also writes the
/// inode and the block map (1.5-2.5× the time here: `scripts/bench-fsync-modes.py`; the reason PostgreSQL
/// zero-fills its WAL segments). A timeline written once keeps only a little; a busy one writes zeros once per
/// MiB.
fn zero_ahead_bytes(len_bytes: u64) -> u64 {
    let ahead = len_bytes.clamp(ZERO_AHEAD_BYTES_MIN, ZERO_AHEAD_BYTES_MAX);
    let end = (len_bytes + ahead).div_ceil(4096) * 4096;
    end - len_bytes
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
    /// The WAL it holds: its valid frames end here.
    len_bytes: u64,
    /// The file's length: `len_bytes` plus the zeros written ahead of the frames ([`zero_ahead_bytes`]), so
    /// that the next appends overwrite allocated blocks inside the file's size and their fdatasync writes no
    /// metadata. **Invariant:** `len_bytes <= file_len_bytes`, and every byte in between is zero.
    file_len_bytes: u64,
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
    /// A timeline created without files (`create_timeline_deferred`): its directory, made by the first segment's
    /// creation (unless the control store did it first) and made durable at the next sync before anything is
    /// reported flushed.
    pub(super) deferred: Option<Arc<DeferredDir>>,
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
            deferred: None,
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

    /// An empty WAL in `dir`, a directory this process has just created and written nothing into, or one that
    /// does not exist yet (a deferred one): nothing to list, recover or sync (the creator syncs the directory).
    pub(super) fn open_new(dir: &Path, timeline_start_lsn: Lsn, config: &FileStoreConfig) -> FileWal {
        assert!(config.segment_size_bytes > 0, "segment_size_bytes must be positive");
        FileWal {
            dir: dir.to_path_buf(),
            config: *config,
            segment_starts: Vec::new(),
            open: None,
            oldest_lsn: timeline_start_lsn,
            flush_lsn: timeline_start_lsn,
            write_lsn: timeline_start_lsn,
            dir_dirty: false,
            deferred: None,
            poisoned: false,
        }
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
    pub(super) fn segment_index(&self, lsn: Lsn) -> usize {
        let after = self.segment_starts.partition_point(|&start| start <= lsn);
        assert!(after > 0, "{lsn} is before the oldest segment");
        after - 1
    }

    /// Where segment `index` ends: the next one's start, or the write position for the last.
    pub(super) fn segment_end(&self, index: usize) -> Lsn {
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
    /// segment must be synced and its directory entry durable (see `roll_over`). The first segment of a deferred
    /// directory is the one [`DeferredDir::make`] made, whose entry is synced with the directory.
    fn create_segment(&mut self) -> Result<(), StoreError> {
        let start_lsn = self.write_lsn;
        let path = self.segment_path(start_lsn);
        let first = self.segment_starts.is_empty();
        if first {
            if let Some(deferred) = &self.deferred {
                deferred.make()?;
            }
        }
        let created = OpenOptions::new().read(true).write(true).create_new(true).open(&path);
        let (file, made_here) = match created {
            Ok(file) => (file, true),
            // Only a deferred directory's `make` leaves a first segment that this WAL does not list (every other
            // segment is listed at open or made here): empty, and named durably with the directory.
            Err(error) if first && error.kind() == std::io::ErrorKind::AlreadyExists => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(io_error(&path))?;
                let len_bytes = file.metadata().map_err(io_error(&path))?.len();
                if len_bytes != 0 {
                    return Err(corrupt(
                        &path,
                        0,
                        "a first segment found non-empty in a WAL that holds none",
                    ));
                }
                (file, false)
            }
            Err(error) => return Err(io_error(&path)(error)),
        };
        self.segment_starts.push(start_lsn);
        self.open = Some(OpenSegment {
            start_lsn,
            file: Some(file),
            path,
            len_bytes: 0,
            file_len_bytes: 0,
            dirty: false,
            last_used: std::time::Instant::now(),
        });
        self.dir_dirty |= made_here;
        Ok(())
    }

    /// Creates the first segment of an empty WAL now, durably (file, then directory), so that the timeline's
    /// first append pays for neither a file creation nor a directory fsync (a new branch's first commit).
    pub(super) fn create_first_segment(&mut self) -> Result<(), StoreError> {
        assert!(
            self.open.is_none() && self.segment_starts.is_empty(),
            "the first segment of a WAL that has segments"
        );
        self.guarded(|wal| {
            wal.create_segment()?;
            wal.sync_open_segment_and_dir()
        })
    }

    /// The directory is `deferred` (shared with the control store): the first segment's creation makes it if
    /// need be, and the next sync makes it durable.
    pub(super) fn defer_dir(&mut self, deferred: Arc<DeferredDir>) {
        self.deferred = Some(deferred);
    }

    /// Closes the open segment and starts a new one at the write position: the old one is fdatasynced and
    /// the directory entries made durable first, so recovery may trust every segment but the last.
    fn roll_over(&mut self) -> Result<(), StoreError> {
        if let Some(open) = &mut self.open {
            // A closed segment's length is its WAL's (recovery checks the segments' lengths against their
            // starts): cut the zeros written ahead; the fdatasync below makes the new size durable with the data.
            if open.file_len_bytes > open.len_bytes {
                let len_bytes = open.len_bytes;
                open.file()?.set_len(len_bytes).map_err(io_error(&open.path))?;
                open.file_len_bytes = len_bytes;
                open.dirty = true;
            }
        }
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
        if let Some(deferred) = &self.deferred {
            if deferred.make_durable(false)? {
                self.deferred = None;
            }
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
            if len_bytes > open.file_len_bytes {
                // Past the zeros: write the next ones now, so that the appends after this one stay inside them
                // (after a small write only: see `ZERO_AHEAD_WRITE_BYTES_MAX`).
                let small = (at - run_start) as u64 <= ZERO_AHEAD_WRITE_BYTES_MAX;
                let zeros_to = if small {
                    (len_bytes + zero_ahead_bytes(len_bytes)).min(segment_size_bytes)
                } else {
                    len_bytes
                };
                if zeros_to > len_bytes {
                    let zeros = vec![0u8; (zeros_to - len_bytes) as usize];
                    open.file()?
                        .write_all_at(&zeros, len_bytes)
                        .map_err(io_error(&open.path))?;
                }
                open.file_len_bytes = zeros_to.max(len_bytes);
            }
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
                    file_len_bytes: 0,
                    dirty: false,
                    last_used: std::time::Instant::now(),
                }
            }
        };
        open.len_bytes = lsn.0 - start_lsn.0;
        let len_bytes = open.len_bytes;
        open.file()?.set_len(len_bytes).map_err(io_error(&open.path))?;
        open.file_len_bytes = len_bytes;
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
        // The open segment's own descriptor when it holds one (a tailing reader reads there after every
        // commit: no open and close each time); another segment, or a let-go one, is opened for this read.
        let opened;
        let file = match &self.open {
            Some(OpenSegment {
                start_lsn: open_start,
                file: Some(file),
                ..
            }) if *open_start == start_lsn => file,
            _ => {
                opened = File::open(&path).map_err(io_error(&path))?;
                &opened
            }
        };
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
        let mut header = [0xffu8; FRAME_HEADER_BYTES];
        let header_bytes = (len_bytes - valid_bytes).min(FRAME_HEADER_BYTES as u64) as usize;
        file.read_exact_at(&mut header[..header_bytes], valid_bytes)
            .map_err(io_error(&path))?;
        if header[..header_bytes].iter().all(|&byte| byte == 0) {
            // Most often the zeros written ahead of the appends; a crash may also have left zeros in place of
            // unsynced frames. Either way nothing after the valid frames was acknowledged.
            tracing::debug!(path = %path.display(), valid_bytes, cut_bytes = len_bytes - valid_bytes, "cutting the zeros after the WAL");
        } else {
            tracing::warn!(
                path = %path.display(),
                valid_bytes,
                cut_bytes = len_bytes - valid_bytes,
                error = ?error,
                "cutting a torn WAL tail (unsynced writes cut short by a crash)"
            );
        }
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
        file_len_bytes: valid_bytes,
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
