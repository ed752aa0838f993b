//! Ingest: WAL records into the open in-memory layer, and freezing it.

use super::*;

impl Timeline {
    /// Ingests one committed record that starts at `start_lsn`, which must be where the previous one ended.
    /// Returns the record's end LSN, at which its changes are visible.
    pub fn ingest_record(&self, start_lsn: Lsn, record: &WalRecord) -> Result<Lsn> {
        self.check_writable()?;
        record.validate()?;
        let frame_bytes = record.frame_len();
        let mut writer = self.writer.lock();
        let expected = self.last_record_lsn();
        if start_lsn != expected {
            return Err(StorageError::OutOfOrder {
                expected,
                got: start_lsn,
            });
        }
        let end_lsn = start_lsn.checked_add(frame_bytes).ok_or(StorageError::OutOfOrder {
            expected,
            got: start_lsn,
        })?;
        // Every record stores the size, so ingest never needs state derived from older history (perhaps an
        // ancestor's, not yet re-fed after a restart).
        let size = db_size_value(record.db_size_pages);
        let state = self.layers.read().clone();
        for (key, _) in record.entries.iter().chain(std::iter::once(&size)) {
            self.cache.invalidate(self.id, *key, end_lsn);
        }
        state.open.put_record(
            end_lsn,
            record.entries.iter().cloned().chain(std::iter::once(size)),
            frame_bytes,
        );
        // Commit timestamps must not go backwards for the index to stay sorted; a clock step back is clamped.
        writer.last_commit_ts_us = writer.last_commit_ts_us.max(record.commit_ts_us);
        self.timestamps.push(writer.last_commit_ts_us, end_lsn);
        self.last_record_lsn.store(end_lsn.0, Ordering::Release);
        if state.open.wal_bytes() >= self.conf.checkpoint_distance_bytes {
            self.freeze_locked();
        }
        Ok(end_lsn)
    }

    /// Ingests consecutive framed records starting at `start_lsn`. Returns the end LSN of the last one.
    pub fn ingest_frames(&self, start_lsn: Lsn, frames: &Bytes) -> Result<Lsn> {
        let (records, error) = crate::wal::decode_frames(frames, start_lsn);
        let mut lsn = start_lsn;
        for (record_lsn, record) in records {
            lsn = self.ingest_record(record_lsn, &record)?;
        }
        match error {
            Some(e) => Err(e.into()),
            None => Ok(lsn),
        }
    }

    /// Freezes the open in-memory layer (if it holds anything) so a flush can write it.
    pub fn freeze_open_layer(&self) {
        let _writer = self.writer.lock();
        self.freeze_locked();
    }

    /// Freezes the open layer if it has held data for longer than `checkpoint_timeout_ms`.
    pub fn freeze_if_stale(&self) {
        let _writer = self.writer.lock();
        let state = self.layers.read().clone();
        let has_data = state.open.end_lsn() > state.open.start_lsn();
        if has_data && state.open_since.elapsed().as_millis() as u64 >= self.conf.checkpoint_timeout_ms {
            self.freeze_locked();
        }
    }

    /// Caller holds the writer lock, so the open layer's end is stable.
    pub(super) fn freeze_locked(&self) {
        let mut guard = self.layers.write();
        if guard.open.end_lsn() == guard.open.start_lsn() {
            return;
        }
        let mut state = (**guard).clone();
        state.open.freeze();
        let end_lsn = state.open.end_lsn();
        state.frozen.push(Arc::clone(&state.open));
        state.open = Arc::new(InMemoryLayer::new(end_lsn));
        state.open_since = Instant::now();
        *guard = Arc::new(state);
    }

    /// How many frozen layers wait for a flush (ingest should slow down when this grows).
    pub fn frozen_layer_count(&self) -> usize {
        self.layers.read().frozen.len()
    }

    /// Whether frozen layers wait for a flush.
    pub fn has_frozen_layers(&self) -> bool {
        !self.layers.read().frozen.is_empty()
    }

    // ---------------------------------------------------------------- reads
}
