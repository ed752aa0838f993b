//! The on-disk layer file: written once, fsynced, renamed into place, read through mmap.
//!
//! ```text
//! summary  64 B : magic "CMBLAYER" | version u16 | kind u8 | 0 u8 x5 | key_start u64 | key_end u64
//!                 | lsn_start u64 | lsn_end u64 | entry_count u64 | crc32(previous 56 B) u32 | 0 u32
//! blobs         : (value encoding | crc32(value encoding) u32)*
//! index         : (key u64 | lsn u64 | blob_offset u64 | blob_len u32)*  sorted by (key, lsn), 28 B each
//! footer   32 B : index_offset u64 | entry_count u64 | crc32(index) u32 | crc32(previous 20 B) u32
//!                 | magic "CMBLFOOT"
//! ```
//! Opening checks the sizes, both magics, the summary, footer and index crcs, that the summary matches the
//! layer's descriptor, and that the index is sorted, inside the ranges and points inside the blob area. A read
//! checks the crc of every blob it uses. So a flipped byte anywhere gives `Corrupt` naming the file.
//!
//! A layer of a timeline with a [`LayerFetcher`] may be missing locally: its first use fetches it (see
//! [`crate::layer::fetch`] for the procedure and its argument); such a file is checked in full, every blob crc too,
//! before it is renamed into place.

use std::fs::File;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::codec::{put_u32, put_u64, u32_at, u64_at};
use crate::error::{corrupt, io_err, Result, StorageError};
use crate::fsio::{sync_file, Durability, TEMP_SUFFIX};
use crate::id::TimelineId;
use crate::key::Key;
use crate::layer::desc::{LayerDesc, LayerKind};
use crate::layer::fetch::LayerFetcher;
use crate::lsn::Lsn;
use crate::mmap::MappedFile;
use crate::value::Value;

pub(super) const SUMMARY_MAGIC: &[u8; 8] = b"CMBLAYER";
pub(super) const FOOTER_MAGIC: &[u8; 8] = b"CMBLFOOT";
/// Format version written by this code.
pub const LAYER_FORMAT_VERSION: u16 = 1;
pub(super) const SUMMARY_BYTES: usize = 64;
pub(super) const FOOTER_BYTES: usize = 32;
pub(super) const INDEX_ENTRY_BYTES: usize = 28;
pub(super) const BLOB_CRC_BYTES: usize = 4;

pub(super) fn kind_code(kind: LayerKind) -> u8 {
    match kind {
        LayerKind::L0 => 1,
        LayerKind::L1 => 2,
        LayerKind::Image => 3,
    }
}

/// The summary block of a layer with `entry_count` entries (written by `writer`, checked on open).
pub(super) fn encode_summary(desc: &LayerDesc, entry_count: u64) -> Vec<u8> {
    let mut summary = Vec::with_capacity(SUMMARY_BYTES);
    summary.extend_from_slice(SUMMARY_MAGIC);
    summary.extend_from_slice(&LAYER_FORMAT_VERSION.to_le_bytes());
    summary.push(kind_code(desc.kind));
    summary.extend_from_slice(&[0u8; 5]);
    put_u64(&mut summary, desc.key_range.start.0);
    put_u64(&mut summary, desc.key_range.end.0);
    put_u64(&mut summary, desc.lsn_range.start.0);
    put_u64(&mut summary, desc.lsn_range.end.0);
    put_u64(&mut summary, entry_count);
    let crc = crc32fast::hash(&summary);
    put_u32(&mut summary, crc);
    put_u32(&mut summary, 0);
    assert_eq!(summary.len(), SUMMARY_BYTES);
    summary
}

/// What a search of one layer for one key found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LayerSearch {
    /// An image was found (pushed last); the read can stop.
    Complete,
    /// Deltas (possibly none) were pushed; older layers must be searched too.
    Continue,
    /// An image layer covering the key holds no value for it: the key does not exist at that LSN.
    Absent,
}

/// A layer file on disk, opened and verified lazily on first use (and fetched first, if it is missing and the
/// timeline has a fetcher).
pub struct LayerFile {
    path: PathBuf,
    desc: LayerDesc,
    opened: OnceLock<Verified>,
    /// `None`: the local file is the only copy.
    remote: Option<Remote>,
}

struct Verified {
    map: MappedFile,
    index_offset: usize,
    entry_count: usize,
}

/// Where a timeline's missing layers come from.
#[derive(Clone)]
pub(crate) struct LayerSource {
    pub(crate) fetcher: Arc<dyn LayerFetcher>,
    pub(crate) timeline: TimelineId,
    pub(crate) durability: Durability,
}

/// The fetch state of a layer with a source.
struct Remote {
    source: LayerSource,
    /// Held across a fetch: concurrent first readers of a missing layer fetch it once.
    fetching: Mutex<Option<FailedFetch>>,
    /// Failed fetches so far; changed only under `fetching`, read before waiting for it.
    failures: AtomicU64,
    /// Set when the timeline drops the layer; taken (briefly) by the removal and by a fetch's rename, so a fetch
    /// in flight never brings a dropped layer back.
    dropped: Mutex<bool>,
}

/// A failed fetch, kept to give the readers that waited on it the same answer (a `StorageError` is not `Clone`).
enum FailedFetch {
    Corrupt { offset: u64, reason: String },
    Other(String),
}

impl FailedFetch {
    fn from_error(error: &StorageError) -> FailedFetch {
        match error {
            StorageError::Corrupt { offset, reason, .. } => FailedFetch::Corrupt {
                offset: *offset,
                reason: reason.clone(),
            },
            StorageError::Fetch { reason, .. } => FailedFetch::Other(reason.clone()),
            other => FailedFetch::Other(other.to_string()),
        }
    }

    fn to_error(&self, path: &Path) -> StorageError {
        match self {
            FailedFetch::Corrupt { offset, reason } => corrupt(path, *offset, reason.clone()),
            FailedFetch::Other(reason) => fetch_error(path, reason.clone()),
        }
    }
}

fn fetch_error(path: &Path, reason: impl Into<String>) -> StorageError {
    StorageError::Fetch {
        file: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The temp name a fetch writes to: `<layer>.fetch.tmp` (removed on load, like every temp file).
fn fetch_temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".fetch");
    name.push(TEMP_SUFFIX);
    path.with_file_name(name)
}

fn is_not_found(error: &StorageError) -> bool {
    matches!(error, StorageError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

impl LayerFile {
    pub(crate) fn new(path: PathBuf, desc: LayerDesc) -> LayerFile {
        LayerFile {
            path,
            desc,
            opened: OnceLock::new(),
            remote: None,
        }
    }

    /// This layer, fetched from `source` on first use if its file is missing.
    pub(crate) fn with_source(self, source: LayerSource) -> LayerFile {
        LayerFile {
            remote: Some(Remote {
                source,
                fetching: Mutex::new(None),
                failures: AtomicU64::new(0),
                dropped: Mutex::new(false),
            }),
            ..self
        }
    }

    /// A handle on the layer file at `path` described by `desc`, for checking it with [`LayerFile::verify`].
    pub fn open_for_verify(path: PathBuf, desc: LayerDesc) -> LayerFile {
        LayerFile::new(path, desc)
    }

    /// The descriptor.
    pub fn desc(&self) -> &LayerDesc {
        &self.desc
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn verified(&self) -> Result<&Verified> {
        if let Some(verified) = self.opened.get() {
            return Ok(verified);
        }
        let Some(remote) = &self.remote else {
            let verified = self.open_and_verify()?;
            // Another thread may have won the race; both verified the same immutable bytes.
            let _ = self.opened.set(verified);
            return Ok(self.opened.get().expect("set just above"));
        };
        let mut opened = None;
        remote
            .source
            .fetcher
            .block(&mut || opened = Some(self.open_or_fetch(remote)));
        opened.expect("LayerFetcher::block runs its work")
    }

    /// Opens the layer, fetching it first if it is missing. One thread at a time per layer: the others wait
    /// and use what it found (or its error).
    fn open_or_fetch(&self, remote: &Remote) -> Result<&Verified> {
        let failures_seen = remote.failures.load(Ordering::Acquire);
        let mut last_failure = remote.fetching.lock();
        if let Some(verified) = self.opened.get() {
            return Ok(verified);
        }
        if remote.failures.load(Ordering::Acquire) != failures_seen {
            // A fetch failed while this reader waited for it: the same answer, rather than one more timeout each.
            let failure = last_failure.as_ref().expect("recorded with the count");
            return Err(failure.to_error(&self.path));
        }
        let verified = match self.open_and_verify() {
            Err(e) if is_not_found(&e) => match self.fetch(remote) {
                Ok(verified) => verified,
                Err(e) => {
                    *last_failure = Some(FailedFetch::from_error(&e));
                    remote.failures.fetch_add(1, Ordering::AcqRel);
                    return Err(e);
                }
            },
            other => other?,
        };
        assert!(self.opened.set(verified).is_ok(), "set only under the fetch lock");
        Ok(self.opened.get().expect("set just above"))
    }

    /// Fetches the missing file to a temp name, checks it whole and renames it into place.
    fn fetch(&self, remote: &Remote) -> Result<Verified> {
        if *remote.dropped.lock() {
            return Err(fetch_error(&self.path, "the timeline dropped this layer"));
        }
        let temp = fetch_temp_path(&self.path);
        let started = std::time::Instant::now();
        let source = &remote.source;
        let result = source
            .fetcher
            .fetch(source.timeline, &self.desc, &temp)
            .map_err(|e| fetch_error(&self.path, e.reason()))
            .and_then(|()| self.check_fetched(&temp, source.durability))
            .and_then(|verified| {
                let dropped = remote.dropped.lock();
                if *dropped {
                    return Err(fetch_error(
                        &self.path,
                        "the timeline dropped this layer during the fetch",
                    ));
                }
                std::fs::rename(&temp, &self.path).map_err(io_err(&self.path))?;
                Ok(verified)
            });
        match &result {
            Ok(_) => tracing::info!(
                layer = %self.path.display(),
                size_bytes = self.desc.size_bytes,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "fetched a missing layer"
            ),
            Err(e) => {
                tracing::warn!(layer = %self.path.display(), error = %e, "fetching a missing layer failed");
                if let Err(remove) = std::fs::remove_file(&temp) {
                    if remove.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(path = %temp.display(), error = %remove, "could not remove a fetch temp file");
                    }
                }
            }
        }
        result
    }

    /// Checks a fetched file at `temp` (errors name the layer): its size, then (after an fsync) everything
    /// opening checks, and every blob's crc.
    fn check_fetched(&self, temp: &Path, durability: Durability) -> Result<Verified> {
        let file = File::open(temp).map_err(io_err(temp))?;
        let len = file.metadata().map_err(io_err(temp))?.len();
        if len != self.desc.size_bytes {
            return Err(corrupt(
                &self.path,
                0,
                format!("fetched {len} bytes, the metadata says {}", self.desc.size_bytes),
            ));
        }
        sync_file(&file, temp, durability)?;
        drop(file);
        let verified = self.verify_map(MappedFile::open(temp)?)?;
        self.check_blobs(&verified)?;
        Ok(verified)
    }

    /// Marks the layer dropped by its timeline and removes its file. A fetch in flight will not rename its file
    /// into place after this.
    pub(crate) fn remove_file(&self) {
        let _dropped = self.remote.as_ref().map(|remote| {
            let mut dropped = remote.dropped.lock();
            *dropped = true;
            dropped
        });
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            // Never fetched: nothing to remove.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.remote.is_some() => {}
            Err(e) => tracing::warn!(path = %self.path.display(), error = %e, "could not remove a dropped layer"),
        }
    }

    fn open_and_verify(&self) -> Result<Verified> {
        self.verify_map(MappedFile::open(&self.path)?)
    }

    /// Checks the structure of a map of this layer's bytes (wherever they are: errors name the layer).
    fn verify_map(&self, map: MappedFile) -> Result<Verified> {
        let bytes = map.bytes();
        let bad = |offset: usize, reason: &str| corrupt(&self.path, offset as u64, reason);
        if bytes.len() < SUMMARY_BYTES + FOOTER_BYTES {
            return Err(bad(0, "file shorter than summary and footer"));
        }
        if &bytes[..8] != SUMMARY_MAGIC {
            return Err(bad(0, "bad summary magic"));
        }
        if u32_at(bytes, 56) != crc32fast::hash(&bytes[..56]) || u32_at(bytes, 60) != 0 {
            return Err(bad(56, "summary crc mismatch"));
        }
        let expected = encode_summary(&self.desc, u64_at(bytes, 48));
        if bytes[..SUMMARY_BYTES] != expected[..] {
            return Err(bad(8, "summary does not match the layer's descriptor"));
        }
        let footer_at = bytes.len() - FOOTER_BYTES;
        let footer = &bytes[footer_at..];
        if &footer[24..32] != FOOTER_MAGIC {
            return Err(bad(footer_at + 24, "bad footer magic"));
        }
        if u32_at(footer, 20) != crc32fast::hash(&footer[..20]) {
            return Err(bad(footer_at + 20, "footer crc mismatch"));
        }
        let index_offset = u64_at(footer, 0);
        let entry_count = u64_at(footer, 8);
        if entry_count != u64_at(bytes, 48) {
            return Err(bad(footer_at + 8, "footer and summary disagree on the entry count"));
        }
        let index_len = entry_count.checked_mul(INDEX_ENTRY_BYTES as u64);
        if index_offset < SUMMARY_BYTES as u64
            || index_len.and_then(|l| l.checked_add(index_offset)) != Some(footer_at as u64)
        {
            return Err(bad(footer_at, "index offset and entry count do not fit the file"));
        }
        let (index_offset, entry_count) = (index_offset as usize, entry_count as usize);
        let index = &bytes[index_offset..footer_at];
        if crc32fast::hash(index) != u32_at(footer, 16) {
            return Err(bad(index_offset, "index crc mismatch"));
        }
        self.check_index(index, index_offset)?;
        Ok(Verified {
            map,
            index_offset,
            entry_count,
        })
    }

    fn check_index(&self, index: &[u8], index_offset: usize) -> Result<()> {
        let mut previous: Option<(u64, u64)> = None;
        let mut expected_offset = SUMMARY_BYTES as u64;
        for (i, entry) in index.chunks_exact(INDEX_ENTRY_BYTES).enumerate() {
            let at = index_offset + i * INDEX_ENTRY_BYTES;
            let (key, lsn) = (u64_at(entry, 0), u64_at(entry, 8));
            let (blob_offset, blob_len) = (u64_at(entry, 16), u32_at(entry, 24) as u64);
            if previous >= Some((key, lsn)) {
                return Err(corrupt(&self.path, at as u64, "index not sorted"));
            }
            previous = Some((key, lsn));
            if !self.desc.covers_key(Key(key)) || lsn < self.desc.lsn_range.start.0 || lsn >= self.desc.lsn_range.end.0
            {
                return Err(corrupt(&self.path, at as u64, "index entry outside the layer's ranges"));
            }
            // Blobs are written back to back, so each one starts where the previous ended.
            if blob_offset != expected_offset || blob_len <= BLOB_CRC_BYTES as u64 {
                return Err(corrupt(
                    &self.path,
                    at as u64,
                    "index entry points outside the blob sequence",
                ));
            }
            expected_offset += blob_len;
        }
        if expected_offset != index_offset as u64 {
            return Err(corrupt(
                &self.path,
                index_offset as u64,
                "blobs do not end where the index starts",
            ));
        }
        Ok(())
    }

    fn entry(verified: &Verified, i: usize) -> (Key, Lsn, usize, usize) {
        let at = verified.index_offset + i * INDEX_ENTRY_BYTES;
        let bytes = verified.map.bytes();
        (
            Key(u64_at(bytes, at)),
            Lsn(u64_at(bytes, at + 8)),
            u64_at(bytes, at + 16) as usize,
            u32_at(bytes, at + 24) as usize,
        )
    }

    fn read_blob(&self, verified: &Verified, key: Key, offset: usize, len: usize) -> Result<Value> {
        // check_index proved the blob lies inside the blob area.
        let blob = &verified.map.bytes()[offset..offset + len];
        let (body, crc) = blob.split_at(len - BLOB_CRC_BYTES);
        if crc32fast::hash(body) != u32_at(crc, 0) {
            return Err(corrupt(
                &self.path,
                offset as u64,
                format!("value crc mismatch for key {key}"),
            ));
        }
        // The value's bytes share the map (a page image is served without a copy).
        Value::decode_exact(&verified.map.slice(offset..offset + body.len()), key)
            .map_err(|e| corrupt(&self.path, offset as u64, format!("value of key {key}: {e}")))
    }

    /// Index of the first entry `>= (key, lsn)`.
    fn lower_bound(verified: &Verified, key: Key, lsn: Lsn) -> usize {
        let (mut low, mut high) = (0usize, verified.entry_count);
        while low < high {
            let mid = low + (high - low) / 2;
            let (k, l, _, _) = Self::entry(verified, mid);
            if (k, l) < (key, lsn) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// Pushes the versions of `key` with `floor < lsn < end`, newest first, onto `out`, stopping after an image.
    pub(crate) fn search(
        &self,
        key: Key,
        floor: Option<Lsn>,
        end: Lsn,
        out: &mut Vec<(Lsn, Value)>,
    ) -> Result<LayerSearch> {
        let verified = self.verified()?;
        let mut i = Self::lower_bound(verified, key, end);
        let mut found_any = false;
        while i > 0 {
            i -= 1;
            let (k, lsn, offset, len) = Self::entry(verified, i);
            if k != key || floor.is_some_and(|f| lsn <= f) {
                break;
            }
            found_any = true;
            let value = self.read_blob(verified, key, offset, len)?;
            let will_init = value.will_init();
            out.push((lsn, value));
            if will_init {
                return Ok(LayerSearch::Complete);
            }
        }
        if self.desc.is_image() && !found_any && floor.is_none() {
            return Ok(LayerSearch::Absent);
        }
        Ok(LayerSearch::Continue)
    }

    /// Every key with a version below `end`, in `range`, appended to `out`.
    pub(crate) fn keys(&self, range: &std::ops::Range<Key>, end: Lsn, out: &mut Vec<Key>) -> Result<()> {
        let verified = self.verified()?;
        let mut i = Self::lower_bound(verified, range.start, Lsn(0));
        while i < verified.entry_count {
            let (key, lsn, _, _) = Self::entry(verified, i);
            if key >= range.end {
                break;
            }
            if lsn < end && out.last() != Some(&key) {
                out.push(key);
            }
            i += 1;
        }
        Ok(())
    }

    /// A cursor over every entry in `(key, lsn)` order, reading each value only when asked.
    pub(crate) fn cursor(&self) -> Result<LayerCursor<'_>> {
        let verified = self.verified()?;
        Ok(LayerCursor {
            layer: self,
            verified,
            next: 0,
        })
    }

    /// Every entry, in `(key, lsn)` order, for compaction. Values are read and checked.
    pub(crate) fn for_each(&self, f: impl FnMut(Key, Lsn, Value) -> Result<()>) -> Result<()> {
        let verified = self.verified()?;
        self.for_each_in(verified, f)
    }

    fn for_each_in(&self, verified: &Verified, mut f: impl FnMut(Key, Lsn, Value) -> Result<()>) -> Result<()> {
        for i in 0..verified.entry_count {
            let (key, lsn, offset, len) = Self::entry(verified, i);
            f(key, lsn, self.read_blob(verified, key, offset, len)?)?;
        }
        Ok(())
    }

    /// Reads and checks every blob.
    fn check_blobs(&self, verified: &Verified) -> Result<()> {
        self.for_each_in(verified, |_, _, _| Ok(()))
    }

    /// Verifies the whole file (summary, index, footer and every blob crc).
    pub fn verify(&self) -> Result<()> {
        self.for_each(|_, _, _| Ok(()))
    }
}

/// Walks a layer's entries in order; see [`LayerFile::cursor`].
pub(crate) struct LayerCursor<'a> {
    layer: &'a LayerFile,
    verified: &'a Verified,
    next: usize,
}

impl LayerCursor<'_> {
    /// The key and LSN of the next entry, if any.
    pub(crate) fn peek(&self) -> Option<(Key, Lsn)> {
        (self.next < self.verified.entry_count).then(|| {
            let (key, lsn, _, _) = LayerFile::entry(self.verified, self.next);
            (key, lsn)
        })
    }

    /// Reads the next entry's value (checking its crc) and moves past it.
    pub(crate) fn take(&mut self) -> Result<(Key, Lsn, Value)> {
        assert!(self.next < self.verified.entry_count, "take past the end of a layer");
        let (key, lsn, offset, len) = LayerFile::entry(self.verified, self.next);
        self.next += 1;
        Ok((key, lsn, self.layer.read_blob(self.verified, key, offset, len)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::fetch::FetchError;
    use crate::layer::writer::LayerWriter;
    use crate::value::Patch;
    use bytes::Bytes;
    use proptest::prelude::*;

    /// Fetches by copying one file.
    struct CopyFrom(PathBuf);

    impl LayerFetcher for CopyFrom {
        fn fetch(&self, _: TimelineId, _: &LayerDesc, destination: &Path) -> std::result::Result<(), FetchError> {
            std::fs::copy(&self.0, destination)
                .map(|_| ())
                .map_err(|e| FetchError::new(e.to_string()))
        }
    }

    fn fetchable(path: PathBuf, desc: LayerDesc, source: &Path) -> LayerFile {
        LayerFile::new(path, desc).with_source(LayerSource {
            fetcher: Arc::new(CopyFrom(source.to_path_buf())),
            timeline: TimelineId(1),
            durability: Durability::Fsync,
        })
    }

    fn entries_in(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_short_fetch_is_corrupt_and_a_dropped_layer_is_not_fetched_back() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut writer = LayerWriter::new(root.path(), desc(LayerKind::L1), Durability::Off).expect("writer");
        writer
            .put(
                Key(3),
                Lsn(20),
                &Value::Image(Bytes::from(vec![9; crate::PAGE_SIZE_BYTES])),
            )
            .expect("put");
        let written = writer.finish().expect("finish");
        let (name, desc) = (written.desc().file_name(), written.desc().clone());
        let bytes = std::fs::read(written.path()).expect("read");
        let short = root.path().join("short");
        std::fs::write(&short, &bytes[..bytes.len() - 1]).expect("write");
        let local = root.path().join("local");
        std::fs::create_dir(&local).expect("mkdir");

        let layer = fetchable(local.join(&name), desc.clone(), &short);
        match layer.verify() {
            Err(StorageError::Corrupt { file, reason, .. }) => {
                assert_eq!(file, local.join(&name));
                assert!(reason.contains("bytes"), "{reason}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        assert!(entries_in(&local).is_empty(), "{:?}", entries_in(&local));
        // The source repaired, the same layer fetches again.
        std::fs::write(&short, &bytes).expect("repair");
        layer.verify().expect("fetched after the repair");
        assert_eq!(entries_in(&local), vec![name.clone()]);
        layer.remove_file();
        assert!(entries_in(&local).is_empty());

        // Dropped by its timeline before its first use: never fetched back.
        let dropped = fetchable(local.join(&name), desc, &short);
        dropped.remove_file();
        match dropped.verify() {
            Err(StorageError::Fetch { file, reason }) => {
                assert_eq!(file, local.join(&name));
                assert!(reason.contains("dropped"), "{reason}");
            }
            other => panic!("expected a fetch error, got {other:?}"),
        }
        assert!(entries_in(&local).is_empty());
    }

    fn desc(kind: LayerKind) -> LayerDesc {
        LayerDesc {
            kind,
            key_range: Key(0)..Key(64),
            lsn_range: Lsn(10)..Lsn(1000),
            size_bytes: 0,
        }
    }

    fn arb_entries() -> impl Strategy<Value = Vec<(Key, Lsn, Value)>> {
        let value = prop_oneof![
            any::<u8>().prop_map(|b| Value::Image(Bytes::from(vec![b; crate::PAGE_SIZE_BYTES]))),
            (0u16..8000, proptest::collection::vec(any::<u8>(), 1..50)).prop_map(|(offset, data)| Value::Delta(vec![
                Patch {
                    offset,
                    data: Bytes::from(data)
                }
            ])),
        ];
        proptest::collection::btree_map((0u64..64, 10u64..1000), value, 0..40)
            .prop_map(|m| m.into_iter().map(|((k, l), v)| (Key(k), Lsn(l), v)).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn write_read_round_trip(entries in arb_entries()) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut writer = LayerWriter::new(dir.path(), desc(LayerKind::L1), Durability::Off).expect("writer");
            for (key, lsn, value) in &entries {
                writer.put(*key, *lsn, value).expect("put");
            }
            let layer = writer.finish().expect("finish");
            let mut read_back = Vec::new();
            layer.for_each(|k, l, v| { read_back.push((k, l, v)); Ok(()) }).expect("read back");
            prop_assert_eq!(&read_back, &entries);
            // A search returns the newest versions below `end` down to the first image.
            for (key, lsn, _) in &entries {
                let mut out = Vec::new();
                layer.search(*key, None, lsn.next(), &mut out).expect("search");
                prop_assert_eq!(out.first().map(|(l, _)| *l), Some(*lsn));
            }
        }

        #[test]
        fn any_bytes_give_a_value_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..400), key in 0u64..64) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join(desc(LayerKind::L0).file_name());
            std::fs::write(&path, &bytes).expect("write");
            let layer = LayerFile::new(path, desc(LayerKind::L0));
            let _ = layer.search(Key(key), None, Lsn(1000), &mut Vec::new());
            let _ = layer.verify();
            let _ = layer.keys(&(Key(0)..Key(64)), Lsn(1000), &mut Vec::new());
        }

        #[test]
        fn a_valid_frame_around_garbage_is_still_caught(entries in arb_entries(), garbage in proptest::collection::vec(any::<u8>(), 1..64), at in any::<prop::sample::Index>()) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut writer = LayerWriter::new(dir.path(), desc(LayerKind::L1), Durability::Off).expect("writer");
            for (key, lsn, value) in &entries {
                writer.put(*key, *lsn, value).expect("put");
            }
            let layer = writer.finish().expect("finish");
            let mut bytes = std::fs::read(layer.path()).expect("read");
            let start = at.index(bytes.len());
            let end = (start + garbage.len()).min(bytes.len());
            let changed = bytes[start..end] != garbage[..end - start];
            bytes[start..end].copy_from_slice(&garbage[..end - start]);
            std::fs::write(layer.path(), &bytes).expect("write");
            let reopened = LayerFile::new(layer.path().to_path_buf(), layer.desc().clone());
            let result = reopened.verify();
            prop_assert!(!changed || result.is_err(), "overwriting bytes {start}..{end} went unnoticed");
        }
    }
}
