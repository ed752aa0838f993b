//! Ingest: WAL records into the open in-memory layer, and freezing it.

use super::*;

impl Timeline {
    /// Ingests one commit of a single frame (body version 1) that starts at `start_lsn`, which must be where the
    /// previous frame ended ([`Timeline::wal_end_lsn`]); a pending group before it is abandoned. Returns the
    /// record's end LSN, at which its changes are visible.
    pub fn ingest_record(&self, start_lsn: Lsn, record: &WalRecord) -> Result<Lsn> {
        self.ingest_commit(start_lsn, None, record)
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
