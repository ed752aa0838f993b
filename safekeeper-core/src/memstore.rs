//! In-memory [`WalStore`] and [`ControlStore`] that keep written and durable bytes apart, so a simulated
//! crash loses exactly what was never synced (optionally leaving a torn prefix of it, as a real disk may).

use bytes::Bytes;
use cambium_types::wal::scan_frames;
use cambium_types::Lsn;

use crate::protocol::{ControlState, ControlStore, StoreError, WalStore};

/// WAL in memory.
#[derive(Clone, Debug)]
pub struct MemWal {
    oldest_lsn: Lsn,
    durable: Vec<u8>,
    pending: Vec<u8>,
}

impl MemWal {
    /// An empty WAL starting at `start_lsn`.
    pub fn new(start_lsn: Lsn) -> MemWal {
        MemWal {
            oldest_lsn: start_lsn,
            durable: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// A WAL holding `durable` (whole frames) from `oldest_lsn` on: one whose older part was removed, or a
    /// replica's copy of a peer's (`PullTimeline`).
    pub fn with_durable(oldest_lsn: Lsn, durable: Vec<u8>) -> MemWal {
        let (valid, error) = scan_frames(&durable, oldest_lsn);
        assert!(
            valid == durable.len(),
            "a WAL of whole valid frames: {error:?} at +{valid}"
        );
        MemWal {
            oldest_lsn,
            durable,
            pending: Vec::new(),
        }
    }

    /// A crash: unsynced bytes are lost except the first `torn_bytes` of them, which reach the disk; then
    /// recovery keeps only whole valid frames, as a real store's startup scan does.
    pub fn crash(&mut self, torn_bytes: usize) {
        let keep = torn_bytes.min(self.pending.len());
        self.durable.extend_from_slice(&self.pending[..keep]);
        self.pending.clear();
        let (valid, _) = scan_frames(&self.durable, self.oldest_lsn);
        self.durable.truncate(valid);
    }

    /// The durable WAL bytes, from the oldest LSN.
    pub fn durable_bytes(&self) -> &[u8] {
        &self.durable
    }

    /// Bytes written but not synced.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }
}

impl WalStore for MemWal {
    fn write_lsn(&self) -> Lsn {
        Lsn(self.oldest_lsn.0 + (self.durable.len() + self.pending.len()) as u64)
    }

    fn flush_lsn(&self) -> Lsn {
        Lsn(self.oldest_lsn.0 + self.durable.len() as u64)
    }

    fn write(&mut self, lsn: Lsn, frames: &[u8]) -> Result<(), StoreError> {
        assert_eq!(lsn, self.write_lsn(), "writes are contiguous");
        self.pending.extend_from_slice(frames);
        Ok(())
    }

    fn sync(&mut self) -> Result<Lsn, StoreError> {
        self.durable.append(&mut self.pending);
        Ok(self.flush_lsn())
    }

    fn truncate(&mut self, lsn: Lsn) -> Result<(), StoreError> {
        self.sync()?;
        assert!(
            lsn >= self.oldest_lsn && lsn <= self.flush_lsn(),
            "truncate at {lsn} outside the WAL"
        );
        self.durable.truncate((lsn.0 - self.oldest_lsn.0) as usize);
        Ok(())
    }

    fn read(&self, lsn: Lsn, end_lsn: Lsn, max_bytes: usize) -> Result<Bytes, StoreError> {
        let end_lsn = end_lsn.min(self.flush_lsn());
        let from = (lsn.0 - self.oldest_lsn.0) as usize;
        let to = (end_lsn.0 - self.oldest_lsn.0) as usize;
        if lsn < self.oldest_lsn || from > to {
            return Err(StoreError::Corrupt {
                path: "memwal".into(),
                offset: lsn.0,
                reason: "read outside the WAL".into(),
            });
        }
        let available = &self.durable[from..to];
        // Untrusted start: only whole valid frames are served, at least one, about `max_bytes`.
        let (valid, _) = scan_frames(available, lsn);
        if valid == 0 && !available.is_empty() {
            return Err(StoreError::Corrupt {
                path: "memwal".into(),
                offset: lsn.0,
                reason: "no valid frame at this LSN".into(),
            });
        }
        let mut len = 0usize;
        while len < valid {
            let body = u32::from_le_bytes(available[len..len + 4].try_into().expect("validated frame header")) as usize;
            let next = len + cambium_types::wal::FRAME_HEADER_BYTES + body;
            if len > 0 && next > max_bytes {
                break;
            }
            len = next;
        }
        Ok(Bytes::copy_from_slice(&available[..len]))
    }

    fn remove_below(&mut self, _lsn: Lsn) -> Result<(), StoreError> {
        // Memory is not reclaimed: the simulation keeps everything so it can check it.
        Ok(())
    }

    fn oldest_lsn(&self) -> Lsn {
        self.oldest_lsn
    }
}

/// Control state in memory: `persist` is atomic and durable by construction.
#[derive(Clone, Debug, Default)]
pub struct MemControl {
    /// The last persisted state.
    pub state: Option<ControlState>,
}

impl ControlStore for MemControl {
    fn persist(&mut self, state: &ControlState) -> Result<(), StoreError> {
        self.state = Some(state.clone());
        Ok(())
    }
}
