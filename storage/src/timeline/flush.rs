//! Flush: frozen in-memory layers become layer files, then the durable metadata names them.

use super::*;

impl Timeline {
    /// Freezes the open layer and flushes every frozen layer: after it returns, everything ingested before the
    /// call is durable in layer files and `disk_consistent_lsn` covers it.
    pub fn checkpoint(&self) -> Result<()> {
        self.freeze_open_layer();
        self.flush_frozen_layers()
    }

    /// Writes the frozen layers, oldest first, as L0 layer files, advancing `disk_consistent_lsn` after each.
    pub fn flush_frozen_layers(&self) -> Result<()> {
        let _ops = self.ops.lock();
        self.check_writable()?;
        loop {
            let Some(frozen) = self.layers.read().frozen.first().cloned() else {
                return Ok(());
            };
            let result = self.flush_one(&frozen);
            self.poison_on_error(result)?;
        }
    }

    pub(super) fn flush_one(&self, frozen: &Arc<InMemoryLayer>) -> Result<()> {
        let end_lsn = frozen.end_lsn();
        let (entries, key_range) = frozen.snapshot();
        create_dir_durable(&self.dir, self.conf.durability)?;
        let new_layer = match key_range {
            Some(key_range) => {
                let desc = LayerDesc {
                    kind: LayerKind::L0,
                    key_range,
                    lsn_range: frozen.start_lsn().next()..end_lsn.next(),
                    size_bytes: 0,
                };
                let mut writer = LayerWriter::new(&self.dir, desc, self.conf.durability)?;
                for (key, lsn, value) in &entries {
                    writer.put(*key, *lsn, value)?;
                }
                Some(self.adopt(writer.finish()?))
            }
            None => None,
        };
        let timestamp_count = self.timestamps.persist_up_to(end_lsn)?;
        let current = self.layers.read().clone();
        let layers: Vec<Arc<LayerFile>> = current.map.iter().cloned().chain(new_layer).collect();
        self.store_metadata(end_lsn, self.gc_cutoff_lsn(), timestamp_count, &layers)?;
        let mut guard = self.layers.write();
        let mut state = (**guard).clone();
        assert!(
            Arc::ptr_eq(&state.frozen[0], frozen),
            "the flushed layer must still be the oldest frozen one"
        );
        state.frozen.remove(0);
        state.map = LayerMap::new(layers);
        *guard = Arc::new(state);
        self.disk_consistent_lsn.store(end_lsn.0, Ordering::Release);
        Ok(())
    }

    pub(super) fn store_metadata(
        &self,
        disk_consistent_lsn: Lsn,
        gc_cutoff_lsn: Lsn,
        timestamp_count: u64,
        layers: &[Arc<LayerFile>],
    ) -> Result<()> {
        create_dir_durable(&self.dir, self.conf.durability)?;
        let meta = TimelineMetadata {
            timeline_id: self.id,
            disk_consistent_lsn,
            gc_cutoff_lsn,
            timestamp_count,
            layers: layers.iter().map(|l| l.desc().clone()).collect(),
        };
        meta.store(&self.dir, self.conf.durability)
    }

    /// Persists a new layer set (same LSNs), swaps it in, then deletes the layers dropped from it.
    pub(super) fn replace_layers(
        &self,
        keep: Vec<Arc<LayerFile>>,
        removed: &[Arc<LayerFile>],
        gc_cutoff_lsn: Lsn,
    ) -> Result<()> {
        self.store_metadata(
            self.disk_consistent_lsn(),
            gc_cutoff_lsn,
            self.timestamps.persisted_count(),
            &keep,
        )?;
        {
            let mut guard = self.layers.write();
            let mut state = (**guard).clone();
            state.map = LayerMap::new(keep);
            *guard = Arc::new(state);
        }
        for layer in removed {
            // Readers holding an older snapshot keep their mapping; an unopened layer they still name makes that
            // read fail (it is not fetched back), and get_page then reports the cutoff it fell below.
            layer.remove_file();
        }
        Ok(())
    }

    // ---------------------------------------------------------------- compaction
}
