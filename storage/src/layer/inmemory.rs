//! The in-memory layer: versions ingested since the last freeze, newest LSN range of a timeline.

use std::collections::BTreeMap;
use std::ops::Range;

use parking_lot::RwLock;

use crate::key::Key;
use crate::layer::file::LayerSearch;
use crate::lsn::Lsn;
use crate::value::Value;

/// Every version of a layer in `(key, lsn)` order, and the key range they span (`None` when empty).
pub(crate) type Snapshot = (Vec<(Key, Lsn, Value)>, Option<Range<Key>>);

/// Versions with `start_lsn < lsn <= end_lsn`. Open while it takes writes; frozen (immutable) once its
/// end is fixed, until a flush turns it into an L0 layer file.
pub(crate) struct InMemoryLayer {
    start_lsn: Lsn,
    inner: RwLock<Inner>,
}

struct Inner {
    versions: BTreeMap<Key, Vec<(Lsn, Value)>>,
    end_lsn: Lsn,
    wal_bytes: u64,
    frozen: bool,
}

impl InMemoryLayer {
    /// An empty layer holding versions after `start_lsn`.
    pub(crate) fn new(start_lsn: Lsn) -> InMemoryLayer {
        InMemoryLayer {
            start_lsn,
            inner: RwLock::new(Inner {
                versions: BTreeMap::new(),
                end_lsn: start_lsn,
                wal_bytes: 0,
                frozen: false,
            }),
        }
    }

    /// Versions are strictly after this LSN.
    pub(crate) fn start_lsn(&self) -> Lsn {
        self.start_lsn
    }

    /// The newest LSN this layer covers.
    pub(crate) fn end_lsn(&self) -> Lsn {
        self.inner.read().end_lsn
    }

    /// WAL bytes ingested into this layer.
    pub(crate) fn wal_bytes(&self) -> u64 {
        self.inner.read().wal_bytes
    }

    /// Adds more versions of the record already put at `end_lsn` (a transaction group applied in batches), and
    /// `frame_bytes` more WAL bytes.
    pub(crate) fn extend_record(&self, end_lsn: Lsn, entries: impl Iterator<Item = (Key, Value)>, frame_bytes: u64) {
        let mut inner = self.inner.write();
        assert!(!inner.frozen, "put into a frozen layer");
        assert!(
            end_lsn == inner.end_lsn,
            "extending record {end_lsn}, but the layer ends at {}",
            inner.end_lsn
        );
        // A group's later batches are not checked for long runs: a transaction changes a key once per commit.
        put_versions(&mut inner, end_lsn, entries, usize::MAX);
        inner.wal_bytes += frame_bytes;
    }

    /// Adds the versions of one record ending at `end_lsn`, of `frame_bytes` WAL bytes. Returns the keys whose
    /// version at `end_lsn` closes a run of `delta_run_max` deltas in this layer (checked each time a key's
    /// version count here reaches a multiple of it), for the caller to [`InMemoryLayer::materialize`]: a hot
    /// page (page 1, a counter's page) gets a delta with every commit, and a read reconstructs it from its
    /// newest image, so without images made at ingest a read after a few hundred thousand commits applied
    /// every one of them (200 ms for page 1 of a pgbench database).
    pub(crate) fn put_record(
        &self,
        end_lsn: Lsn,
        entries: impl Iterator<Item = (Key, Value)>,
        frame_bytes: u64,
        delta_run_max: usize,
    ) -> Vec<Key> {
        let mut inner = self.inner.write();
        assert!(!inner.frozen, "put into a frozen layer");
        assert!(
            end_lsn > inner.end_lsn,
            "record end {end_lsn} not after layer end {}",
            inner.end_lsn
        );
        let long_runs = put_versions(&mut inner, end_lsn, entries, delta_run_max);
        inner.end_lsn = end_lsn;
        inner.wal_bytes += frame_bytes;
        long_runs
    }

    /// Replaces `key`'s version at `lsn` (its newest here) with `page`, the page that version makes: reads
    /// gather the same page, stopping at it. Does nothing if the key's newest version here is not at `lsn`.
    pub(crate) fn materialize(&self, key: Key, lsn: Lsn, page: bytes::Bytes) {
        let mut inner = self.inner.write();
        assert!(!inner.frozen, "materialize in a frozen layer");
        if let Some(newest) = inner
            .versions
            .get_mut(&key)
            .and_then(|versions| versions.last_mut())
            .filter(|(at, _)| *at == lsn)
        {
            newest.1 = Value::Image(page);
        }
    }

    /// Marks the layer immutable; its end LSN is now fixed.
    pub(crate) fn freeze(&self) {
        self.inner.write().frozen = true;
    }

    /// Pushes versions of `key` below `end`, newest first, stopping after an image.
    pub(crate) fn search(&self, key: Key, end: Lsn, out: &mut Vec<(Lsn, Value)>) -> LayerSearch {
        let inner = self.inner.read();
        let Some(versions) = inner.versions.get(&key) else {
            return LayerSearch::Continue;
        };
        let below = versions.partition_point(|(lsn, _)| *lsn < end);
        for (lsn, value) in versions[..below].iter().rev() {
            out.push((*lsn, value.clone()));
            if value.will_init() {
                return LayerSearch::Complete;
            }
        }
        LayerSearch::Continue
    }

    /// Every key with a version in `range` below `end`.
    pub(crate) fn keys(&self, range: &Range<Key>, end: Lsn, out: &mut Vec<Key>) {
        let inner = self.inner.read();
        for (key, versions) in inner.versions.range(range.clone()) {
            if versions.first().is_some_and(|(lsn, _)| *lsn < end) {
                out.push(*key);
            }
        }
    }

    /// Every version in `(key, lsn)` order, with the key range they span (`None` when empty).
    pub(crate) fn snapshot(&self) -> Snapshot {
        let inner = self.inner.read();
        let mut all = Vec::new();
        for (key, versions) in &inner.versions {
            for (lsn, value) in versions {
                all.push((*key, *lsn, value.clone()));
            }
        }
        let range = match (inner.versions.keys().next(), inner.versions.keys().next_back()) {
            (Some(first), Some(last)) => Some(*first..last.next()),
            _ => None,
        };
        (all, range)
    }
}

/// Puts `entries` at `end_lsn`. One record may change a key twice; the later change wins, as it would on replay.
/// Returns the keys whose newest `delta_run_max` versions here are all deltas, checked when a key's count of
/// versions reaches a multiple of it.
fn put_versions(
    inner: &mut Inner,
    end_lsn: Lsn,
    entries: impl Iterator<Item = (Key, Value)>,
    delta_run_max: usize,
) -> Vec<Key> {
    let mut long_runs = Vec::new();
    for (key, value) in entries {
        let versions = inner.versions.entry(key).or_default();
        if let Some(last) = versions.last_mut().filter(|(lsn, _)| *lsn == end_lsn) {
            last.1 = merge_same_lsn(&last.1, value);
        } else {
            versions.push((end_lsn, value));
            if versions.len() % delta_run_max == 0
                && versions
                    .iter()
                    .rev()
                    .take(delta_run_max)
                    .all(|(_, value)| !value.will_init())
            {
                long_runs.push(key);
            }
        }
    }
    long_runs
}

/// Combines two changes of one key at the same LSN into one value.
fn merge_same_lsn(older: &Value, newer: Value) -> Value {
    match (older, newer) {
        (_, image @ Value::Image(_)) => image,
        (Value::Image(base), Value::Delta(patches)) => {
            let mut page = base.to_vec();
            crate::value::apply_delta(&mut page, &patches);
            Value::Image(bytes::Bytes::from(page))
        }
        (Value::Delta(first), Value::Delta(second)) => {
            let mut patches = first.clone();
            patches.extend(second);
            Value::Delta(patches)
        }
    }
}
