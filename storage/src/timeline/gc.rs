//! Retention: branch points, LSN leases, and GC of layers no retained LSN needs.

use super::*;

impl Timeline {
    /// Registers a child branching at `lsn`. Fails if `lsn` is below the GC cutoff; from here on GC keeps
    /// `lsn` readable.
    pub(crate) fn add_branch_point(&self, child: TimelineId, lsn: Lsn) -> Result<()> {
        let mut points = self.branch_points.lock();
        let gc_cutoff = self.gc_cutoff_lsn();
        if lsn < gc_cutoff {
            return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
        }
        points.children.insert(child, lsn);
        Ok(())
    }

    /// Registers a child found on disk at load, whose branch point was checked when it was created.
    pub(crate) fn restore_branch_point(&self, child: TimelineId, lsn: Lsn) {
        self.branch_points.lock().children.insert(child, lsn);
    }

    pub(crate) fn remove_branch_point(&self, child: TimelineId) {
        self.branch_points.lock().children.remove(&child);
    }

    /// The newest branch point of its children, `None` without children.
    pub fn newest_branch_point(&self) -> Option<Lsn> {
        self.branch_points.lock().children.values().copied().max()
    }

    /// The number of child timelines.
    pub fn child_count(&self) -> usize {
        self.branch_points.lock().children.len()
    }

    /// Keeps `lsn` readable on this timeline until `until_us` (µs since the epoch): GC's cutoff does not pass
    /// it while the lease lasts. Fails if `lsn` is already below the cutoff or ahead of the last record.
    /// Leases live in memory: after a restart a holder renews its lease (as it must before expiry anyway).
    pub fn lease_lsn(&self, lsn: Lsn, until_us: u64) -> Result<()> {
        if lsn < self.start_lsn {
            return Err(StorageError::LsnBeforeStart {
                timeline: self.id,
                lsn,
                start_lsn: self.start_lsn,
            });
        }
        let mut points = self.branch_points.lock();
        let gc_cutoff = self.gc_cutoff_lsn();
        if lsn < gc_cutoff {
            return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
        }
        let last_record_lsn = self.last_record_lsn();
        if lsn > last_record_lsn.max(self.wal_end_lsn()) {
            return Err(StorageError::LsnAhead { lsn, last_record_lsn });
        }
        let until = points.leases.entry(lsn).or_insert(until_us);
        *until = (*until).max(until_us);
        Ok(())
    }

    // ---------------------------------------------------------------- flush

    /// Moves the GC cutoff to the older of `last_record_lsn - gc_horizon_bytes` and the LSN at
    /// `now_us - pitr_interval`, then removes the layers no read at or above the cutoff, and no read at a
    /// child's branch point, can need.
    pub fn gc(&self, now_us: u64) -> Result<GcOutcome> {
        let _ops = self.ops.lock();
        self.check_writable()?;
        let result = self.gc_locked(now_us);
        self.poison_on_error(result)
    }

    pub(super) fn gc_locked(&self, now_us: u64) -> Result<GcOutcome> {
        let horizon_cutoff = self.last_record_lsn().saturating_sub(self.conf.gc_horizon_bytes);
        let pitr_cutoff = match now_us.checked_sub(self.conf.pitr_interval_ms.saturating_mul(1000)) {
            Some(ts) => self.timestamps.lookup(ts, Lsn::MAX)?.unwrap_or(self.start_lsn),
            None => self.start_lsn,
        };
        let computed = horizon_cutoff.min(pitr_cutoff).max(self.start_lsn);
        let old_cutoff = self.gc_cutoff_lsn();
        let (cutoff, retain) = {
            let mut points = self.branch_points.lock();
            points.leases.retain(|_, until_us| *until_us > now_us);
            let leased = points.leases.keys().next().copied().unwrap_or(Lsn::MAX);
            let cutoff = old_cutoff.max(computed.min(leased));
            self.gc_cutoff_lsn.store(cutoff.0, Ordering::Release);
            (cutoff, points.children.values().copied().collect::<Vec<Lsn>>())
        };
        let state = self.layers.read().clone();
        let all: Vec<Arc<LayerFile>> = state.map.iter().cloned().collect();
        let (removed, keep): (Vec<_>, Vec<_>) = all
            .iter()
            .cloned()
            .partition(|layer| removable(layer.desc(), &all, cutoff, &retain));
        if !removed.is_empty() || cutoff != old_cutoff {
            self.replace_layers(keep, &removed, cutoff)?;
        }
        Ok(GcOutcome {
            gc_cutoff_lsn: cutoff,
            layers_removed: removed.len(),
        })
    }

    // ---------------------------------------------------------------- info
}

/// Whether GC may drop `layer`: all of it is at or below the cutoff, and newer images at or below the cutoff
/// cover its whole key range with no branch point between the layer and the image.
pub(super) fn removable(layer: &LayerDesc, all: &[Arc<LayerFile>], cutoff: Lsn, retain: &[Lsn]) -> bool {
    if layer.max_lsn() > cutoff {
        return false;
    }
    let mut covering: Vec<Range<Key>> = all
        .iter()
        .map(|l| l.desc())
        .filter(|image| {
            image.is_image()
                && image != &layer
                && image.max_lsn() <= cutoff
                && (image.max_lsn() > layer.max_lsn() || (!layer.is_image() && image.max_lsn() == layer.max_lsn()))
                && !retain
                    .iter()
                    .any(|&r| layer.lsn_range.start <= r && r < image.max_lsn())
        })
        .map(|image| image.key_range.clone())
        .collect();
    covering.sort_by_key(|r| r.start);
    let mut covered_to = layer.key_range.start;
    for range in covering {
        if range.start > covered_to {
            break;
        }
        covered_to = covered_to.max(range.end);
        if covered_to >= layer.key_range.end {
            return true;
        }
    }
    false
}
