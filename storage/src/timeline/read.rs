//! Reads: a page at any retained LSN, the database size, keys of a range, the LSN of a timestamp.

use super::*;

impl Timeline {
    /// Checks `lsn` is readable (at most [`Timeline::wal_end_lsn`]); returns the `last_record_lsn` it was checked
    /// against. A read past it, among a pending group's parts, is a read at it: callers read at
    /// `lsn.min(last_record_lsn)`.
    pub(super) fn check_read_lsn(&self, lsn: Lsn) -> Result<Lsn> {
        // In this order: a commit stores `last_record_lsn` before `wal_end_lsn`, so a `wal_end_lsn` seen here is
        // never past the `last_record_lsn` loaded after it unless only parts lie between.
        let wal_end_lsn = self.wal_end_lsn();
        let last_record_lsn = self.last_record_lsn();
        if lsn > last_record_lsn.max(wal_end_lsn) {
            return Err(StorageError::LsnAhead { lsn, last_record_lsn });
        }
        if lsn < self.start_lsn {
            return Err(StorageError::LsnBeforeStart {
                timeline: self.id,
                lsn,
                start_lsn: self.start_lsn,
            });
        }
        let gc_cutoff = self.gc_cutoff_lsn();
        if lsn < gc_cutoff {
            return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
        }
        Ok(last_record_lsn)
    }

    /// The page `key` as of `lsn`: the newest image at or below `lsn` with the deltas above it applied,
    /// falling through to the ancestor below the branch point. A page never written reads as zeros inside the
    /// database size at `lsn`, and is `PageNotFound` outside it.
    pub fn get_page(&self, key: Key, lsn: Lsn) -> Result<Bytes> {
        let last_record_lsn = self.check_read_lsn(lsn)?;
        let lsn = lsn.min(last_record_lsn);
        if let Some(page) = self.cache.lookup(self.id, key, lsn) {
            return Ok(page);
        }
        let mut stats = ReadStats::default();
        let result = self.get_uncached(key, lsn, last_record_lsn, &mut stats);
        self.reads_total.fetch_add(1, Ordering::Relaxed);
        self.layers_visited_total
            .fetch_add(stats.layers_visited, Ordering::Relaxed);
        result
    }

    /// Like [`Timeline::get_page`] but never uses the cache, and reports the layers visited.
    pub fn get_page_uncached(&self, key: Key, lsn: Lsn) -> Result<(Bytes, ReadStats)> {
        let last_record_lsn = self.check_read_lsn(lsn)?;
        let lsn = lsn.min(last_record_lsn);
        let mut stats = ReadStats::default();
        let page = self.get_uncached(key, lsn, last_record_lsn, &mut stats)?;
        Ok((page, stats))
    }

    pub(super) fn get_uncached(
        &self,
        key: Key,
        lsn: Lsn,
        last_record_lsn: Lsn,
        stats: &mut ReadStats,
    ) -> Result<Bytes> {
        match self.reconstruct(key, lsn, stats) {
            Ok(Some((version_lsn, page))) => {
                self.cache
                    .insert(self.id, key, version_lsn, lsn, last_record_lsn, page.clone());
                Ok(page)
            }
            Ok(None) if key.is_page() && key.block() < self.db_size_at_checked(lsn)? => {
                Ok(Bytes::from(vec![0u8; PAGE_SIZE_BYTES]))
            }
            Ok(None) => Err(StorageError::PageNotFound { key, lsn }),
            Err(e) => {
                // GC may have moved the cutoff past `lsn` during the read and removed a layer under it.
                let gc_cutoff = self.gc_cutoff_lsn();
                if lsn < gc_cutoff {
                    return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
                }
                Err(e)
            }
        }
    }

    /// The database size in pages at `lsn` (zero before the first record). `lsn` is checked like a page read's.
    pub fn db_size_at(&self, lsn: Lsn) -> Result<u32> {
        let last_record_lsn = self.check_read_lsn(lsn)?;
        self.db_size_at_checked(lsn.min(last_record_lsn))
    }

    /// [`Timeline::db_size_at`] for an LSN already checked.
    pub(super) fn db_size_at_checked(&self, lsn: Lsn) -> Result<u32> {
        if let Some(bytes) = self.cache.lookup(self.id, DB_SIZE_KEY, lsn) {
            return decode_db_size(&bytes);
        }
        let last_record_lsn = self.last_record_lsn();
        match self.reconstruct(DB_SIZE_KEY, lsn, &mut ReadStats::default())? {
            Some((version_lsn, bytes)) => {
                self.cache
                    .insert(self.id, DB_SIZE_KEY, version_lsn, lsn, last_record_lsn, bytes.clone());
                decode_db_size(&bytes)
            }
            None => Ok(0),
        }
    }

    /// The newest version of `key` at or below `lsn`, reconstructed, with the LSN of that version; `None` if the
    /// key has no version there.
    ///
    /// Below a branch point the ancestor's page there is looked up in the page cache under the ancestor (where
    /// its own reads and every other branch's reads at that point find it), and when reconstructed here it is
    /// cached there: a branch's first reads are of pages it never wrote, its parent's at the branch point, and
    /// before this every new branch of a parent reconstructed them again (a hot page's chain of deltas: 200 ms
    /// for page 1 of a database after a few hundred thousand commits).
    pub(super) fn reconstruct(&self, key: Key, lsn: Lsn, stats: &mut ReadStats) -> Result<Option<(Lsn, Bytes)>> {
        let mut versions: Vec<(Lsn, Value)> = Vec::new();
        let mut timeline = self;
        let mut end = lsn.next();
        // The nearest ancestor's part when it is not cached: (ancestor, the LSN read there, where its versions
        // start in `versions`, its `last_record_lsn` when its part of the read began).
        let mut ancestor_part: Option<(&Timeline, Lsn, usize, Lsn)> = None;
        'timelines: loop {
            let state = timeline.layers.read().clone();
            for layer in std::iter::once(&state.open).chain(state.frozen.iter().rev()) {
                if layer.end_lsn() > layer.start_lsn() {
                    stats.layers_visited += 1;
                }
                if layer.search(key, end, &mut versions) == LayerSearch::Complete {
                    break 'timelines;
                }
            }
            loop {
                match state.map.search(key, end) {
                    NextLayer::Delta(delta) => {
                        stats.layers_visited += 1;
                        if delta.search(key, None, end, &mut versions)? == LayerSearch::Complete {
                            break 'timelines;
                        }
                        end = delta.desc().lsn_range.start;
                    }
                    NextLayer::Image { image, delta } => {
                        if let Some(delta) = delta {
                            stats.layers_visited += 1;
                            if delta.search(key, Some(image.desc().max_lsn()), end, &mut versions)?
                                == LayerSearch::Complete
                            {
                                break 'timelines;
                            }
                        }
                        stats.layers_visited += 1;
                        // Complete, or absent: an image layer is the whole truth for its range at its LSN.
                        image.search(key, None, end, &mut versions)?;
                        break 'timelines;
                    }
                    NextLayer::None => break,
                }
            }
            match &timeline.ancestor {
                Some(ancestor) => {
                    end = end.min(timeline.start_lsn.next());
                    // After a restart the ancestor may not have been re-fed up to the branch point yet; its
                    // answer would be incomplete, so refuse rather than guess.
                    // A branch point among the ancestor's pending group's parts reads the state before the group.
                    let ancestor_last = ancestor.wal_end_lsn().max(ancestor.last_record_lsn());
                    if ancestor_last < timeline.start_lsn {
                        return Err(StorageError::AncestorBehind {
                            ancestor: ancestor.id,
                            branch_lsn: timeline.start_lsn,
                            last_record_lsn: ancestor_last,
                        });
                    }
                    let at = Lsn(end.0 - 1);
                    if let Some((version_lsn, page)) = ancestor.cache.lookup_versioned(ancestor.id, key, at) {
                        versions.push((version_lsn, Value::Image(page)));
                        break 'timelines;
                    }
                    if ancestor_part.is_none() {
                        ancestor_part = Some((ancestor, at, versions.len(), ancestor.last_record_lsn()));
                    }
                    timeline = ancestor;
                }
                None => break,
            }
        }
        stats.versions_read += versions.len() as u64;
        if let Some((ancestor, at, from, ancestor_last)) = ancestor_part {
            // A branch point among the ancestor's pending group's parts (past its `last_record_lsn`) is not cached.
            if versions.len() > from && at <= ancestor_last {
                let (version_lsn, page) = reconstruct_versions(versions.split_off(from));
                ancestor
                    .cache
                    .insert(ancestor.id, key, version_lsn, at, ancestor_last, page.clone());
                versions.push((version_lsn, Value::Image(page)));
            }
        }
        if versions.is_empty() {
            return Ok(None);
        }
        Ok(Some(reconstruct_versions(versions)))
    }

    /// Every key in `range` with a version at or below `lsn`, here or in the ancestors, sorted.
    pub(super) fn keys_at(&self, range: &Range<Key>, lsn: Lsn) -> Result<Vec<Key>> {
        let mut keys = Vec::new();
        let mut timeline = self;
        let mut end = lsn.next();
        loop {
            let state = timeline.layers.read().clone();
            for layer in std::iter::once(&state.open).chain(state.frozen.iter()) {
                layer.keys(range, end, &mut keys);
            }
            for layer in state.map.iter() {
                let desc = layer.desc();
                let overlaps = desc.key_range.start < range.end && range.start < desc.key_range.end;
                if overlaps && desc.lsn_range.start < end {
                    layer.keys(range, end, &mut keys)?;
                }
            }
            match &timeline.ancestor {
                Some(ancestor) => {
                    end = end.min(timeline.start_lsn.next());
                    timeline = ancestor;
                }
                None => break,
            }
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    // ---------------------------------------------------------------- point in time

    /// The end LSN of the newest commit at or before `timestamp_us`, looking into the ancestors below the branch
    /// point when this timeline has no commit that old.
    pub fn lsn_for_timestamp(&self, timestamp_us: u64) -> Result<TimestampLsn> {
        let mut timeline = self;
        let mut lsn_max = Lsn::MAX;
        loop {
            if let Some(lsn) = timeline.timestamps.lookup(timestamp_us, lsn_max)? {
                return Ok(TimestampLsn {
                    timeline_id: timeline.id,
                    lsn,
                });
            }
            match &timeline.ancestor {
                Some(ancestor) => {
                    lsn_max = timeline.start_lsn;
                    timeline = ancestor;
                }
                None => {
                    let earliest_us = timeline.timestamps.first_timestamp()?;
                    return Err(StorageError::TimestampBeforeHistory {
                        timestamp_us,
                        earliest_us,
                    });
                }
            }
        }
    }

    // ---------------------------------------------------------------- branch points
}

pub(super) fn decode_db_size(bytes: &Bytes) -> Result<u32> {
    let array: [u8; 4] = bytes[..]
        .try_into()
        .map_err(|_| corrupt("<db size value>", 0, "not 4 bytes"))?;
    Ok(u32::from_le_bytes(array))
}

/// The page `versions` (newest first, from one or more timelines, down to an image or the key's first version)
/// make, with the newest version's LSN.
fn reconstruct_versions(mut versions: Vec<(Lsn, Value)>) -> (Lsn, Bytes) {
    let version_lsn = versions.first().expect("a key with versions").0;
    let base = match versions.last() {
        Some((_, Value::Image(image))) => {
            let image = image.clone();
            versions.pop();
            Some(image)
        }
        _ => None,
    };
    let deltas: Vec<Value> = versions.into_iter().map(|(_, v)| v).collect();
    (version_lsn, value::reconstruct(base.as_ref(), &deltas))
}
