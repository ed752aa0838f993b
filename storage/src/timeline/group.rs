//! A transaction's pending group: its parts, held until its commit applies them all at the commit's end LSN.
//!
//! A group is zero or more part frames, then one commit frame, consecutive in the WAL (see `types::wal::group`).
//! While parts arrive, nothing is visible: `last_record_lsn` stays at the group's start, so readers, branch
//! points and `disk_consistent_lsn` never stand inside a group, and a pageserver that restarts resumes at or
//! before the group's first part and reads it whole again (the pending group is never durable). The entries
//! are kept in memory up to `group_memory_bytes_max`, the rest as the parts' frames in a temporary file in the
//! timeline's directory (removed at load like every temp file). A group is discarded when a frame of another
//! group or a commit of none follows it: its writer died or a new writer took over, and its parts change nothing.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};

use crate::wal::{WalFrame, WalPart, FRAME_HEADER_BYTES};

use super::*;

/// The pending group's temporary file in the timeline's directory.
const SPILL_FILE: &str = "pending-group.tmp";

/// The parts of the group being received.
pub(super) struct PendingGroup {
    /// The start LSN of its first part: its name.
    group_lsn: Lsn,
    /// Where the next frame must start (the end of the last part).
    next_lsn: Lsn,
    /// WAL bytes of its parts.
    wal_bytes: u64,
    /// The first parts' entries, in order, while they fit the memory bound.
    entries: Vec<(Key, Value)>,
    memory_bytes: u64,
    /// The later parts' frames, in order, once the memory bound was reached.
    spill: Option<File>,
}

impl PendingGroup {
    /// Where the next frame must start.
    pub(super) fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }
}

impl Timeline {
    /// Where the next WAL frame must start: past the pending group's last part, or `last_record_lsn`. Reads are
    /// answered up to this LSN: between `last_record_lsn` and here lie only a pending group's parts, so the
    /// state there is the state at `last_record_lsn` (a group is visible at its commit's end and nowhere
    /// before). That is what lets a writer that died mid-group be followed by one whose history starts past the
    /// abandoned parts.
    pub fn wal_end_lsn(&self) -> Lsn {
        Lsn(self.wal_end_lsn.load(Ordering::Acquire))
    }

    /// Ingests consecutive frames starting at `start_lsn` (which must be [`Timeline::wal_end_lsn`]): commits,
    /// and parts of groups, held until their commit. Returns where the next frame must start.
    pub fn ingest_frames(&self, start_lsn: Lsn, frames: &Bytes) -> Result<Lsn> {
        let (decoded, error) = crate::wal::decode_wal_frames(frames, start_lsn);
        let mut next = start_lsn;
        for (lsn, frame, frame_len) in decoded {
            match frame {
                WalFrame::Part(part) => {
                    let offset = (lsn.0 - start_lsn.0) as usize;
                    self.ingest_part(lsn, &part, frames.slice(offset..offset + frame_len as usize))?;
                }
                WalFrame::Commit { group_lsn, record } => {
                    self.ingest_commit(lsn, group_lsn, &record)?;
                }
            }
            next = Lsn(lsn.0 + frame_len);
        }
        match error {
            Some(e) => Err(e.into()),
            None => Ok(next),
        }
    }

    /// Adds one part (its decoded form and its frame) to the pending group, starting a group or discarding an
    /// abandoned one first.
    pub fn ingest_part(&self, lsn: Lsn, part: &WalPart, frame: Bytes) -> Result<()> {
        self.check_writable()?;
        part.validate()?;
        let mut writer = self.writer.lock();
        let expected = writer
            .pending
            .as_ref()
            .map_or_else(|| self.last_record_lsn(), PendingGroup::next_lsn);
        if lsn != expected {
            return Err(StorageError::OutOfOrder { expected, got: lsn });
        }
        if writer
            .pending
            .as_ref()
            .is_some_and(|pending| pending.group_lsn != part.group_lsn)
        {
            self.discard_group(&mut writer, "a part of another group follows it");
        }
        if writer.pending.is_none() {
            if part.group_lsn != lsn {
                return Err(StorageError::GroupMismatch {
                    lsn,
                    group_lsn: part.group_lsn,
                });
            }
            writer.pending = Some(PendingGroup {
                group_lsn: lsn,
                next_lsn: lsn,
                wal_bytes: 0,
                entries: Vec::new(),
                memory_bytes: 0,
                spill: None,
            });
        }
        let pending = writer.pending.as_mut().expect("set just above");
        let frame_bytes = frame.len() as u64;
        let entry_bytes: u64 = part.entries.iter().map(|(_, v)| 8 + v.encoded_len() as u64).sum();
        if pending.spill.is_none() && pending.memory_bytes + entry_bytes <= self.conf.group_memory_bytes_max {
            pending.entries.extend(part.entries.iter().cloned());
            pending.memory_bytes += entry_bytes;
        } else {
            if let Err(e) = spill_frame(&self.dir, &mut pending.spill, &frame) {
                writer.pending = None;
                return self.poison_on_error(Err(e));
            }
        }
        pending.wal_bytes += frame_bytes;
        pending.next_lsn = Lsn(lsn.0 + frame_bytes);
        self.wal_end_lsn.store(pending.next_lsn.0, Ordering::Release);
        Ok(())
    }

    /// Ingests one commit starting at `lsn`: alone (`group_lsn` `None`) or closing the pending group.
    pub(super) fn ingest_commit(&self, lsn: Lsn, group_lsn: Option<Lsn>, record: &WalRecord) -> Result<Lsn> {
        self.check_writable()?;
        record.validate()?;
        let mut writer = self.writer.lock();
        let expected = writer
            .pending
            .as_ref()
            .map_or_else(|| self.last_record_lsn(), PendingGroup::next_lsn);
        if lsn != expected {
            return Err(StorageError::OutOfOrder { expected, got: lsn });
        }
        let frame_len = match group_lsn {
            Some(_) => record.group_commit_frame_len(),
            None => record.frame_len(),
        };
        let end_lsn = lsn
            .checked_add(frame_len)
            .ok_or(StorageError::OutOfOrder { expected, got: lsn })?;
        let closes = |pending: &PendingGroup| Some(pending.group_lsn) == group_lsn;
        if writer.pending.as_ref().is_some_and(|pending| !closes(pending)) {
            self.discard_group(&mut writer, "a commit of another group follows it");
        }
        let group = writer.pending.take();
        if group.is_none() && group_lsn.is_some_and(|group_lsn| group_lsn != lsn) {
            let group_lsn = group_lsn.expect("checked just above");
            return Err(StorageError::GroupMismatch { lsn, group_lsn });
        }
        let result = self.apply_commit(&mut writer, group, record, frame_len, end_lsn);
        self.poison_on_error(result)
    }

    /// Puts the group's entries (if any) and the commit's at `end_lsn`, then publishes `end_lsn`. The caller
    /// holds the writer lock: nothing freezes the open layer between the batches, and readers never look past
    /// `last_record_lsn`, so none sees a batch before the last.
    fn apply_commit(
        &self,
        writer: &mut WriterState,
        group: Option<PendingGroup>,
        record: &WalRecord,
        frame_len: u64,
        end_lsn: Lsn,
    ) -> Result<Lsn> {
        let state = self.layers.read().clone();
        let mut long_runs = Vec::new();
        let mut put = |entries: Vec<(Key, Value)>, frame_bytes: u64, first: bool| {
            for (key, _) in &entries {
                self.cache.invalidate(self.id, *key, end_lsn);
            }
            if first {
                long_runs = state
                    .open
                    .put_record(end_lsn, entries.into_iter(), frame_bytes, self.conf.delta_run_max);
            } else {
                state.open.extend_record(end_lsn, entries.into_iter(), frame_bytes);
            }
        };
        let mut first = true;
        if let Some(mut group) = group {
            put(std::mem::take(&mut group.entries), group.wal_bytes, true);
            first = false;
            if let Some(file) = group.spill.take() {
                replay_spill(&self.dir, file, |entries| put(entries, 0, false))?;
            }
        }
        // Every commit stores the size, so ingest never needs state derived from older history (perhaps an
        // ancestor's, not yet re-fed after a restart).
        let mut entries = record.entries.clone();
        entries.push(db_size_value(record.db_size_pages));
        put(entries, frame_len, first);
        // A key's run of deltas in the open layer reached the bound: its version here becomes the page it makes,
        // before `end_lsn` is published (reads below it never look this far). A page that cannot be read now (an
        // ancestor not re-fed up to the branch point after a restart) keeps its delta: the next run tries again.
        for key in long_runs {
            match self.reconstruct(key, end_lsn, &mut ReadStats::default()) {
                Ok(Some((_, page))) => {
                    state.open.materialize(key, end_lsn, page);
                    self.materialized_total.fetch_add(1, Ordering::Relaxed);
                }
                Ok(None) => {}
                Err(error) => tracing::debug!(timeline = %self.id, %key, %error, "a long run of deltas kept"),
            }
        }
        // Commit timestamps must not go backwards for the index to stay sorted; a clock step back is clamped.
        writer.last_commit_ts_us = writer.last_commit_ts_us.max(record.commit_ts_us);
        self.timestamps.push(writer.last_commit_ts_us, end_lsn);
        self.last_record_lsn.store(end_lsn.0, Ordering::Release);
        self.wal_end_lsn.store(end_lsn.0, Ordering::Release);
        if state.open.wal_bytes() >= self.conf.checkpoint_distance_bytes {
            self.freeze_locked();
        }
        Ok(end_lsn)
    }

    /// Drops the pending group: its parts change nothing.
    fn discard_group(&self, writer: &mut WriterState, why: &str) {
        if let Some(pending) = writer.pending.take() {
            tracing::info!(
                timeline = %self.id,
                group = %pending.group_lsn,
                wal_bytes = pending.wal_bytes,
                why,
                "discarding a transaction group that never committed"
            );
            if pending.spill.is_some() {
                let path = self.dir.join(SPILL_FILE);
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!(file = %path.display(), error = %e, "could not remove a pending group's file");
                }
            }
        }
    }
}

/// Appends `frame` to the spill file, creating it (and the timeline's directory) first.
fn spill_frame(dir: &Path, spill: &mut Option<File>, frame: &[u8]) -> Result<()> {
    let path = dir.join(SPILL_FILE);
    if spill.is_none() {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io_err(&path))?;
        *spill = Some(file);
    }
    let file = spill.as_mut().expect("created above");
    file.write_all(frame).map_err(io_err(&path))
}

/// Reads the spill file's frames back in order and hands each part's entries to `put`, then removes the file.
/// The file is this process's own, written just before; a frame that does not decode is still reported as
/// corruption, never trusted.
fn replay_spill(dir: &Path, mut file: File, mut put: impl FnMut(Vec<(Key, Value)>)) -> Result<()> {
    let path = dir.join(SPILL_FILE);
    file.seek(SeekFrom::Start(0)).map_err(io_err(&path))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut offset = 0u64;
    loop {
        let mut header = [0u8; FRAME_HEADER_BYTES];
        match reader.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(io_err(&path)(e)),
        }
        let body_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        if body_len > crate::wal::RECORD_BODY_BYTES_MAX {
            return Err(corrupt(&path, offset, format!("frame of {body_len} bytes")));
        }
        let mut frame = vec![0u8; FRAME_HEADER_BYTES + body_len];
        frame[..FRAME_HEADER_BYTES].copy_from_slice(&header);
        reader
            .read_exact(&mut frame[FRAME_HEADER_BYTES..])
            .map_err(io_err(&path))?;
        let frame = Bytes::from(frame);
        match WalFrame::decode(&frame, Lsn(offset)) {
            Ok((WalFrame::Part(part), _)) => put(part.entries),
            Ok((WalFrame::Commit { .. }, _)) => return Err(corrupt(&path, offset, "a commit among the parts")),
            Err(e) => return Err(corrupt(&path, offset, e.to_string())),
        }
        offset += frame.len() as u64;
    }
    drop(reader);
    std::fs::remove_file(&path).map_err(io_err(&path))
}
