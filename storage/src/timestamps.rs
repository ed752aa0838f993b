//! The persisted commit-timestamp → LSN index of one timeline.
//!
//! ```text
//! file = entry*      entry (20 B) = commit_ts_us u64 | end_lsn u64 | crc32(previous 16 B) u32
//! ```
//! Entries are sorted by LSN and, because ingest clamps each timestamp to be at least the previous one, by
//! timestamp too, so a lookup is a binary search over the mapped file. The timeline's metadata names how many
//! entries are durable; entries past that count (a flush cut short) are truncated on load.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use parking_lot::RwLock;

use crate::codec::{u32_at, u64_at};
use crate::error::{corrupt, io_err, Result};
use crate::fsio::{sync_file, Durability};
use crate::lsn::Lsn;
use crate::mmap::MappedFile;

const ENTRY_BYTES: usize = 20;
/// Bytes of one entry: `commit_ts_us u64 | end_lsn u64 | crc32 u32`.
pub const TIMESTAMP_ENTRY_BYTES: u64 = ENTRY_BYTES as u64;

/// The file name of the index inside a timeline directory.
pub const TIMESTAMPS_FILE: &str = "timestamps";

/// Checks that `bytes` hold at least `count` entries, each passing its crc; on damage, its offset and why.
pub(crate) fn check_entries(bytes: &[u8], count: u64) -> std::result::Result<(), (u64, String)> {
    let needed_bytes = count
        .checked_mul(TIMESTAMP_ENTRY_BYTES)
        .ok_or((0, "entry count overflows".to_owned()))?;
    if (bytes.len() as u64) < needed_bytes {
        return Err((
            bytes.len() as u64,
            format!("holds {} bytes, metadata names {count} entries", bytes.len()),
        ));
    }
    for (i, entry) in bytes[..needed_bytes as usize].chunks_exact(ENTRY_BYTES).enumerate() {
        if u32_at(entry, 16) != crc32fast::hash(&entry[..16]) {
            return Err(((i * ENTRY_BYTES) as u64, format!("timestamp entry {i} fails its crc")));
        }
    }
    Ok(())
}

pub(crate) struct TimestampIndex {
    path: PathBuf,
    durability: Durability,
    inner: RwLock<Inner>,
}

struct Inner {
    map: Option<MappedFile>,
    persisted_count: u64,
    /// Entries not yet in the file, oldest first.
    tail: Vec<(u64, Lsn)>,
}

fn encode(ts_us: u64, lsn: Lsn) -> [u8; ENTRY_BYTES] {
    let mut entry = [0u8; ENTRY_BYTES];
    entry[..8].copy_from_slice(&ts_us.to_le_bytes());
    entry[8..16].copy_from_slice(&lsn.0.to_le_bytes());
    let crc = crc32fast::hash(&entry[..16]);
    entry[16..].copy_from_slice(&crc.to_le_bytes());
    entry
}

impl TimestampIndex {
    /// An index with no entries (the file is created at the first persist).
    pub(crate) fn empty(path: PathBuf, durability: Durability) -> TimestampIndex {
        TimestampIndex {
            path,
            durability,
            inner: RwLock::new(Inner {
                map: None,
                persisted_count: 0,
                tail: Vec::new(),
            }),
        }
    }

    /// Opens the index with `count` durable entries, truncating any tail past them.
    pub(crate) fn open(path: PathBuf, count: u64, durability: Durability) -> Result<TimestampIndex> {
        let index = TimestampIndex::empty(path, durability);
        if count == 0 && !index.path.exists() {
            return Ok(index);
        }
        let needed_bytes = count * ENTRY_BYTES as u64;
        let file = OpenOptions::new()
            .write(true)
            .open(&index.path)
            .map_err(io_err(&index.path))?;
        let len = file.metadata().map_err(io_err(&index.path))?.len();
        if len < needed_bytes {
            return Err(corrupt(
                &index.path,
                len,
                format!("holds {len} bytes, metadata names {count} entries"),
            ));
        }
        if len > needed_bytes {
            tracing::info!(path = %index.path.display(), len, needed_bytes, "truncating timestamp index tail");
            file.set_len(needed_bytes).map_err(io_err(&index.path))?;
            sync_file(&file, &index.path, durability)?;
        }
        drop(file);
        {
            let mut inner = index.inner.write();
            inner.map = Some(MappedFile::open(&index.path)?);
            inner.persisted_count = count;
        }
        Ok(index)
    }

    /// Number of durable entries.
    pub(crate) fn persisted_count(&self) -> u64 {
        self.inner.read().persisted_count
    }

    /// The newest timestamp, for clamping the next one.
    pub(crate) fn last_timestamp(&self) -> Result<Option<u64>> {
        let inner = self.inner.read();
        if let Some(&(ts, _)) = inner.tail.last() {
            return Ok(Some(ts));
        }
        match inner.persisted_count {
            0 => Ok(None),
            n => Ok(Some(self.entry(&inner, n - 1)?.0)),
        }
    }

    /// Adds a commit. `ts_us` must be at least the previous one and `lsn` greater.
    pub(crate) fn push(&self, ts_us: u64, lsn: Lsn) {
        let mut inner = self.inner.write();
        if let Some(&(last_ts, last_lsn)) = inner.tail.last() {
            assert!(ts_us >= last_ts, "timestamp {ts_us} before {last_ts}");
            assert!(lsn > last_lsn, "lsn {lsn} not after {last_lsn}");
        }
        inner.tail.push((ts_us, lsn));
    }

    /// Appends the entries with LSN `<= upto` to the file and syncs it. Returns the new durable count.
    pub(crate) fn persist_up_to(&self, upto: Lsn) -> Result<u64> {
        let mut inner = self.inner.write();
        let take = inner.tail.partition_point(|&(_, lsn)| lsn <= upto);
        if take == 0 {
            return Ok(inner.persisted_count);
        }
        let mut bytes = Vec::with_capacity(take * ENTRY_BYTES);
        for &(ts, lsn) in &inner.tail[..take] {
            bytes.extend_from_slice(&encode(ts, lsn));
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io_err(&self.path))?;
        // Writing at the durable length drops any torn tail of an earlier failed append.
        file.set_len(inner.persisted_count * ENTRY_BYTES as u64)
            .map_err(io_err(&self.path))?;
        file.write_all(&bytes).map_err(io_err(&self.path))?;
        sync_file(&file, &self.path, self.durability)?;
        drop(file);
        inner.map = Some(MappedFile::open(&self.path)?);
        inner.persisted_count += take as u64;
        inner.tail.drain(..take);
        Ok(inner.persisted_count)
    }

    fn entry(&self, inner: &Inner, i: u64) -> Result<(u64, Lsn)> {
        let bytes = inner.map.as_ref().map(MappedFile::bytes).unwrap_or(&[]);
        let at = (i as usize) * ENTRY_BYTES;
        let entry = bytes
            .get(at..at + ENTRY_BYTES)
            .ok_or_else(|| corrupt(&self.path, at as u64, "entry past the end"))?;
        if u32_at(entry, 16) != crc32fast::hash(&entry[..16]) {
            return Err(corrupt(&self.path, at as u64, "timestamp entry crc mismatch"));
        }
        Ok((u64_at(entry, 0), Lsn(u64_at(entry, 8))))
    }

    /// The end LSN of the newest commit with timestamp `<= ts_us` and LSN `<= lsn_max`, if any.
    pub(crate) fn lookup(&self, ts_us: u64, lsn_max: Lsn) -> Result<Option<Lsn>> {
        let inner = self.inner.read();
        let fits = |(ts, lsn): (u64, Lsn)| ts <= ts_us && lsn <= lsn_max;
        let in_tail = inner.tail.partition_point(|&e| fits(e));
        if in_tail > 0 {
            return Ok(Some(inner.tail[in_tail - 1].1));
        }
        // Both orders agree, so "fits" is a prefix of the file: binary search for its end.
        let (mut low, mut high) = (0u64, inner.persisted_count);
        while low < high {
            let mid = low + (high - low) / 2;
            if fits(self.entry(&inner, mid)?) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        match low {
            0 => Ok(None),
            n => Ok(Some(self.entry(&inner, n - 1)?.1)),
        }
    }

    /// The oldest timestamp known, if any.
    pub(crate) fn first_timestamp(&self) -> Result<Option<u64>> {
        let inner = self.inner.read();
        if inner.persisted_count > 0 {
            return Ok(Some(self.entry(&inner, 0)?.0));
        }
        Ok(inner.tail.first().map(|&(ts, _)| ts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_spans_file_and_tail_and_survives_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(TIMESTAMPS_FILE);
        let index = TimestampIndex::empty(path.clone(), Durability::Fsync);
        for i in 1..=100u64 {
            index.push(i * 10, Lsn(i * 1000));
        }
        assert_eq!(index.persist_up_to(Lsn(50_000)).expect("persist"), 50);
        assert_eq!(index.lookup(5, Lsn::MAX).expect("lookup"), None);
        assert_eq!(index.lookup(10, Lsn::MAX).expect("lookup"), Some(Lsn(1000)));
        assert_eq!(index.lookup(255, Lsn::MAX).expect("lookup"), Some(Lsn(25_000)));
        assert_eq!(index.lookup(755, Lsn::MAX).expect("lookup"), Some(Lsn(75_000)));
        assert_eq!(index.lookup(755, Lsn(30_500)).expect("lookup"), Some(Lsn(30_000)));
        // A torn append past the durable count is dropped on open.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&[1, 2, 3]))
            .expect("append");
        let reopened = TimestampIndex::open(path.clone(), 50, Durability::Fsync).expect("open");
        assert_eq!(reopened.lookup(u64::MAX, Lsn::MAX).expect("lookup"), Some(Lsn(50_000)));
        assert!(TimestampIndex::open(path, 51, Durability::Fsync).is_err());
    }
}
