//! Compaction: L0 layers merged into L1 layers by key range, and image layers.

use super::*;

impl Timeline {
    /// Merges L0 layers into L1 layers partitioned by key once there are enough of them, then writes image
    /// layers for partitions that gathered enough deltas since their last image.
    pub fn compact(&self) -> Result<CompactionOutcome> {
        let _ops = self.ops.lock();
        self.check_writable()?;
        let result = self.compact_locked();
        self.poison_on_error(result)
    }

    pub(super) fn compact_locked(&self) -> Result<CompactionOutcome> {
        let mut outcome = CompactionOutcome::default();
        let state = self.layers.read().clone();
        let mut l0: Vec<Arc<LayerFile>> = state
            .map
            .iter()
            .filter(|l| l.desc().kind == LayerKind::L0)
            .cloned()
            .collect();
        if l0.len() >= self.conf.compaction_l0_threshold {
            l0.sort_by_key(|l| l.desc().lsn_range.start);
            let l1 = self.merge_l0(&l0)?;
            outcome.l0_merged = l0.len();
            outcome.l1_written = l1.len();
            let keep: Vec<Arc<LayerFile>> = state
                .map
                .iter()
                .filter(|l| l.desc().kind != LayerKind::L0)
                .cloned()
                .chain(l1)
                .collect();
            self.replace_layers(keep, &l0, self.gc_cutoff_lsn())?;
        }
        outcome.images_written = self.create_images()?;
        Ok(outcome)
    }

    pub(super) fn partition_of(&self, key: Key) -> Range<Key> {
        let size = self.conf.partition_keys;
        let start = key.0 - key.0 % size;
        Key(start)..Key(start.saturating_add(size))
    }

    /// Merges the L0 layers (sorted by LSN, contiguous) into one L1 layer per key partition, streaming: a k-way
    /// merge over the layers' sorted indexes holds one value at a time, whatever the layers' size.
    pub(super) fn merge_l0(&self, l0: &[Arc<LayerFile>]) -> Result<Vec<Arc<LayerFile>>> {
        let lsn_range = l0[0].desc().lsn_range.start..l0[l0.len() - 1].desc().lsn_range.end;
        let mut cursors = l0.iter().map(|layer| layer.cursor()).collect::<Result<Vec<_>>>()?;
        let mut heap: BinaryHeap<Reverse<(Key, Lsn, usize)>> = BinaryHeap::with_capacity(cursors.len());
        for (i, cursor) in cursors.iter().enumerate() {
            if let Some((key, lsn)) = cursor.peek() {
                heap.push(Reverse((key, lsn, i)));
            }
        }
        let mut written = Vec::new();
        let mut writer: Option<LayerWriter> = None;
        while let Some(Reverse((key, _, i))) = heap.pop() {
            let (key_read, lsn, value) = cursors[i].take()?;
            assert_eq!(key_read, key, "cursor moved under the merge");
            if let Some((next_key, next_lsn)) = cursors[i].peek() {
                heap.push(Reverse((next_key, next_lsn, i)));
            }
            let partition = self.partition_of(key);
            if writer.as_ref().is_some_and(|w| w.desc_key_range() != &partition) {
                written.push(self.adopt(writer.take().expect("checked above").finish()?));
            }
            if writer.is_none() {
                let desc = LayerDesc {
                    kind: LayerKind::L1,
                    key_range: partition,
                    lsn_range: lsn_range.clone(),
                    size_bytes: 0,
                };
                writer = Some(LayerWriter::new(&self.dir, desc, self.conf.durability)?);
            }
            writer.as_mut().expect("created above").put(key, lsn, &value)?;
        }
        if let Some(writer) = writer {
            written.push(self.adopt(writer.finish()?));
        }
        Ok(written)
    }

    /// Writes an image layer at `disk_consistent_lsn` for every partition with at least
    /// `image_creation_threshold` L1 layers above its newest image.
    pub(super) fn create_images(&self) -> Result<usize> {
        let state = self.layers.read().clone();
        let image_lsn = self.disk_consistent_lsn();
        let mut deltas_above_image: BTreeMap<Key, (Range<Key>, usize)> = BTreeMap::new();
        for layer in state.map.iter().filter(|l| l.desc().kind == LayerKind::L1) {
            let partition = layer.desc().key_range.clone();
            let last_image = state
                .map
                .iter()
                .filter(|i| i.desc().is_image() && i.desc().key_range == partition)
                .map(|i| i.desc().max_lsn())
                .max();
            if last_image.is_none_or(|image| layer.desc().lsn_range.start > image) {
                deltas_above_image.entry(partition.start).or_insert((partition, 0)).1 += 1;
            }
        }
        let mut images = Vec::new();
        for (partition, count) in deltas_above_image.into_values() {
            if count < self.conf.image_creation_threshold {
                continue;
            }
            let desc = LayerDesc {
                kind: LayerKind::Image,
                key_range: partition.clone(),
                lsn_range: image_lsn..image_lsn.next(),
                size_bytes: 0,
            };
            if state.map.iter().any(|l| l.desc().file_name() == desc.file_name()) {
                continue;
            }
            let mut writer = LayerWriter::new(&self.dir, desc, self.conf.durability)?;
            for key in self.keys_at(&partition, image_lsn)? {
                if let Some((_, page)) = self.reconstruct(key, image_lsn, &mut ReadStats::default())? {
                    writer.put(key, image_lsn, &Value::Image(page))?;
                }
            }
            images.push(self.adopt(writer.finish()?));
        }
        if images.is_empty() {
            return Ok(0);
        }
        let count = images.len();
        let keep: Vec<Arc<LayerFile>> = state.map.iter().cloned().chain(images).collect();
        self.replace_layers(keep, &[], self.gc_cutoff_lsn())?;
        Ok(count)
    }

    // ---------------------------------------------------------------- gc
}
