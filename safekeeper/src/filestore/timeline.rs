//! A timeline directory as a whole: created durably ([`create_timeline`]), opened ([`open_timeline`]), or
//! written as a replica ([`ReplicaWriter`]) with the control file last.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cambium_types::fsio::Durability;
use cambium_types::Lsn;
use safekeeper_core::protocol::{ControlState, ControlStore, StoreError, WalStore};

use super::{corrupt, io_error, sync_dir, Deferred, DeferredDir, FileControl, FileStoreConfig, FileWal, OnDurable};

/// Opens the timeline in `dir`: its control state, WAL and control store. `None` if it has no control file.
pub fn open_timeline(
    dir: &Path,
    config: &FileStoreConfig,
) -> Result<Option<(ControlState, FileWal, FileControl)>, StoreError> {
    let Some((state, control)) = FileControl::open(dir, config.durability)? else {
        return Ok(None);
    };
    let wal = FileWal::open_committed(dir, state.timeline_start_lsn, state.commit_lsn, config)?;
    Ok(Some((state, wal, control)))
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

/// Creates the timeline in `dir` durably: the directory, its control file (of `ControlState::new`) and its
/// first (empty) segment, with three fsyncs (the control file's data, the directory, its parent). Idempotent:
/// an existing timeline with the same start LSN is opened; one with another start LSN is an `AlreadyExists`
/// I/O error.
///
/// Crash argument: nothing is durable until the parent's fsync, and by then the directory's fsync has made
/// the control file and the segment durable in it. A crash before leaves the directory absent or holding
/// any subset of {control file, empty first segment, control temp file}: a control file is whole (written
/// to a temp file, fsynced, renamed) and makes the timeline exist, possibly without its segment (the first
/// append creates it); without one, an empty first segment at the start LSN is a creation cut short, taken
/// over by the next creation. Any other WAL without a control file is refused.
///
/// A timeline directory made this way stands alone; the safekeeper node instead makes its timelines with
/// [`create_timeline_deferred`] and commits them in its creation log: one flush, and no file until used.
pub fn create_timeline(
    dir: &Path,
    timeline_start_lsn: Lsn,
    config: &FileStoreConfig,
) -> Result<(ControlState, FileWal, FileControl), StoreError> {
    let mut wal = match existing_or_prepared(dir, timeline_start_lsn, config, true)? {
        Prepared::Existing(opened) => return Ok(*opened),
        Prepared::Wal(wal) => wal,
        Prepared::Missing => unreachable!("existing_or_prepared makes a missing directory when asked to"),
    };
    let state = ControlState::new(timeline_start_lsn);
    let mut control = FileControl::new(dir, config.durability);
    control.persist_first(&state)?;
    if wal.segment_starts().is_empty() {
        // Creates the segment and fsyncs the directory: that one fsync covers the control file's rename too.
        wal.create_first_segment()?;
    } else {
        sync_dir(dir, config.durability)?;
    }
    if let Some(parent) = dir.parent() {
        sync_dir(parent, config.durability)?;
    }
    Ok((state, wal, control))
}

/// The timeline in `dir` for a creation whose durability the caller provides (the safekeeper node's creation
/// log, which records the start LSN: the whole of a new timeline's state), with *no file made*: the state is
/// `ControlState::new`, and the directory (with any missing one above it, and the empty first segment) is made
/// by the first control file write or WAL write and made durable before that write, or the next WAL sync,
/// returns; `on_durable` runs then (see [`DeferredDir`]). Since a vote writes the control file before any WAL
/// is accepted, nothing acknowledged ever depends on a directory entry that is not durable, and a timeline that
/// is never used costs no inode.
///
/// Idempotent like [`create_timeline`]: a timeline with a control file and the same start LSN is opened (made
/// already, so `on_durable` is dropped unrun), one with another start LSN is an `AlreadyExists` I/O error. A
/// directory holding only an empty first segment at the start LSN (and perhaps a control temp file) is taken
/// over: it is what a crash leaves of a first write cut short, or of an older creation. Any other WAL without a
/// control file is refused (`Corrupt`).
///
/// Crash argument, with the caller's record: until the record is durable, a crash leaves nothing, or a
/// directory without a control file, which is no timeline; after it, the caller calls this function again at
/// open and gets the same initial timeline.
pub fn create_timeline_deferred(
    dir: &Path,
    timeline_start_lsn: Lsn,
    config: &FileStoreConfig,
    on_durable: OnDurable,
) -> Result<(ControlState, FileWal, FileControl), StoreError> {
    let (mut wal, state) = match existing_or_prepared(dir, timeline_start_lsn, config, false)? {
        Prepared::Existing(opened) => return Ok(*opened),
        Prepared::Wal(wal) => {
            // Found without a control file: on disk, its entries not known durable.
            let parents = dir.ancestors().skip(1).take(2).map(Path::to_path_buf);
            (
                wal,
                Deferred::Made(std::iter::once(dir.to_path_buf()).chain(parents).collect()),
            )
        }
        Prepared::Missing => (FileWal::open_new(dir, timeline_start_lsn, config), Deferred::Absent),
    };
    let deferred = Arc::new(DeferredDir::new(
        dir,
        timeline_start_lsn,
        config.durability,
        state,
        on_durable,
    ));
    wal.defer_dir(Arc::clone(&deferred));
    let mut control = FileControl::new(dir, config.durability);
    control.defer_dir(deferred);
    Ok((ControlState::new(timeline_start_lsn), wal, control))
}

/// What a creation finds in its directory.
enum Prepared {
    /// A timeline with a control file and the start LSN asked for, opened.
    Existing(Box<(ControlState, FileWal, FileControl)>),
    /// The (empty) WAL of a directory with no control file: new, or left by a creation cut short.
    Wal(FileWal),
    /// No directory (and none made: `make_missing` was false).
    Missing,
}

/// The shared first step of [`create_timeline`] and [`create_timeline_deferred`]: an existing timeline is
/// opened (or refused for another start LSN); a directory without a control file is taken over if it holds
/// at most an empty first segment at the start LSN; a missing one is made (not synced) if `make_missing`.
fn existing_or_prepared(
    dir: &Path,
    timeline_start_lsn: Lsn,
    config: &FileStoreConfig,
    make_missing: bool,
) -> Result<Prepared, StoreError> {
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
        return Ok(Prepared::Existing(Box::new((state, wal, control))));
    }
    if dir.is_dir() {
        // Left by a creation cut short: opening it removes a stray temp file and checks what it holds.
        let wal = FileWal::open(dir, timeline_start_lsn, config)?;
        let cut_short = wal.write_lsn() == timeline_start_lsn
            && (wal.segment_starts().is_empty() || wal.segment_starts() == [timeline_start_lsn]);
        if !cut_short {
            return Err(corrupt(
                dir,
                0,
                "WAL segments without a control file: refusing to create a timeline over them",
            ));
        }
        return Ok(Prepared::Wal(wal));
    }
    if !make_missing {
        return Ok(Prepared::Missing);
    }
    fs::create_dir_all(dir).map_err(io_error(dir))?;
    Ok(Prepared::Wal(FileWal::open_new(dir, timeline_start_lsn, config)))
}
