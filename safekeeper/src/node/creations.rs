//! The node's timeline creation log (`<data_dir>/timelines.log`): the commit point of a timeline creation.
//!
//! A new timeline's initial state is a function of its start LSN alone (`ControlState::new`), so creating one
//! durably needs only one record saying it exists: one append and one fdatasync of this file, and no file of its
//! own. Its directory (with the tenant's, for a new tenant) and empty first segment are made by its first
//! control file write (the first vote, which comes before any WAL can be accepted) or first WAL write, and made
//! durable with the directories above it before that write returns; then a *materialized* record is appended
//! here, before the write is acknowledged (see `filestore::create_timeline_deferred`). A timeline never voted
//! for costs one record and no inode (inode allocation was most of a creation's CPU on a file system with many
//! recent deletions).
//!
//! # Format
//!
//! ```text
//! magic "CMBSKTLG" | version u32 (= 2)                                    the header, written with the file
//! crc32(rest) u32 | kind u8 | tenant u128 BE | timeline u128 BE | start_lsn u64 LE    one record, 45 bytes
//! ```
//!
//! `kind` is 1 for a creation, 2 for a deletion, 3 for a materialization (its start LSN 0). A timeline is
//! *logged* when its last creation or deletion record is a creation, and *materialized* when a materialization
//! record follows that creation (one for a timeline not logged is ignored: a write that raced its deletion). A
//! version 1 log (before materialization records, when every creation made its directory durable before it was
//! acknowledged) is read as every logged timeline materialized, and rewritten as version 2 at open.
//!
//! # Crash argument
//!
//! Records are appended one call at a time under the node's creation lock, each fdatasynced before the call
//! returns, so only the last record can be torn by a crash: at open a short or crc-failing last record is cut
//! off (set_len, fsync); a bad record before the last one is damage, and the open fails. An append that passes
//! the end of the file writes [`ZERO_AHEAD_BYTES`] of zeros after its records, so that the next appends overwrite
//! blocks inside the file's size and their fdatasync writes the data alone (no inode, no block map); zeros are
//! never a record (a record of zeros fails its crc), so "the last record" is the last before zeros only, and
//! the open cuts the zeros with it. The file itself is
//! created (header written, fsynced, its entry fsynced into the data directory) at open, so an append needs
//! only the fdatasync. What each crash point leaves:
//!
//! - before the creation record is durable: the directory and segment may be there, unsynced, without a
//!   control file: not a timeline (the creation was not acknowledged); the next `CreateTimeline` of that id
//!   takes them over, and the reconciler never sees them (`ListTimelines` lists loaded timelines only);
//! - after it: the timeline exists. At open, a logged timeline whose directory holds no control file (only the
//!   empty first segment or nothing, and perhaps a control temp file of a first write cut short), or that has no
//!   directory and is not materialized, is loaded in its initial state: it acknowledged no vote and no WAL, since
//!   both write a control file first and log the materialization before they are acknowledged. A materialized
//!   timeline with no directory is not loaded: it is a lost copy (a crash cannot remove a directory made durable
//!   before the record), rebuilt by a pull like any missing copy. A crash after the directory is durable and
//!   before its record leaves a directory with a control file, loaded as it is; the node logs its
//!   materialization at open, so that a later loss of that directory still reads as a lost copy;
//! - a deletion appends its record (fdatasync) before the directory is renamed to its tombstone, so a deleted
//!   timeline never comes back from the log. A crash between the two leaves the directory: with a control
//!   file it is still loaded (the deletion was not acknowledged and is retried); without one, it is a leftover
//!   that the next creation takes over.
//!
//! The log is rewritten (atomically: temp, fsync, rename, fsync) at open when it holds more than twice as many
//! records as logged timelines, plus [`REWRITE_SLACK_RECORDS`].

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use cambium_types::fsio::{self, Durability};
use cambium_types::{Lsn, TenantId, TimelineId};

use super::{NodeError, TimelineKey};

/// The log's file name in the data directory.
pub const CREATION_LOG_FILE_NAME: &str = "timelines.log";
/// The first bytes of the log.
const MAGIC: &[u8; 8] = b"CMBSKTLG";
/// The format version written.
const VERSION: u32 = 2;
/// The version before materialization records: read (every logged timeline materialized) and rewritten.
const VERSION_WITHOUT_MATERIALIZATION: u32 = 1;
/// magic | version.
const HEADER_BYTES: usize = 8 + 4;
/// crc | kind | tenant | timeline | start LSN.
const RECORD_BYTES: usize = 4 + 1 + 16 + 16 + 8;
const KIND_CREATED: u8 = 1;
const KIND_DELETED: u8 = 2;
const KIND_MATERIALIZED: u8 = 3;
/// Zeros written after the records when an append passes the last ones (one fdatasync in this many bytes of
/// records also writes the file's new size and blocks).
pub const ZERO_AHEAD_BYTES: u64 = 64 * 1024;
/// Records beyond three per logged timeline (its creation, its materialization, and one more) tolerated before
/// the log is rewritten at open.
pub const REWRITE_SLACK_RECORDS: usize = 1024;

/// One record: a timeline created with its start LSN, deleted, or given its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Record {
    /// The timeline exists from here on, starting at this LSN.
    Created(TimelineKey, Lsn),
    /// The timeline was deleted.
    Deleted(TimelineKey),
    /// The timeline's directory is durable (its first write): from here on a missing directory is a lost copy.
    Materialized(TimelineKey),
}

impl Record {
    fn encode(self, out: &mut Vec<u8>) {
        let (kind, key, lsn) = match self {
            Record::Created(key, lsn) => (KIND_CREATED, key, lsn),
            Record::Deleted(key) => (KIND_DELETED, key, Lsn(0)),
            Record::Materialized(key) => (KIND_MATERIALIZED, key, Lsn(0)),
        };
        let mut body = Vec::with_capacity(RECORD_BYTES - 4);
        body.push(kind);
        body.extend_from_slice(&key.0 .0.to_be_bytes());
        body.extend_from_slice(&key.1 .0.to_be_bytes());
        body.extend_from_slice(&lsn.0.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
    }

    /// The record in `bytes` (exactly [`RECORD_BYTES`]), or `None` if its crc or kind is wrong.
    fn decode(bytes: &[u8]) -> Option<Record> {
        let (crc, body) = bytes.split_at(4);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return None;
        }
        let tenant = u128::from_be_bytes(body[1..17].try_into().expect("16 bytes"));
        let timeline = u128::from_be_bytes(body[17..33].try_into().expect("16 bytes"));
        let lsn = u64::from_le_bytes(body[33..41].try_into().expect("8 bytes"));
        let key = (TenantId(tenant), TimelineId(timeline));
        match body[0] {
            KIND_CREATED => Some(Record::Created(key, Lsn(lsn))),
            KIND_DELETED => Some(Record::Deleted(key)),
            KIND_MATERIALIZED => Some(Record::Materialized(key)),
            _ => None,
        }
    }
}

/// The open creation log: appends records durably and knows which timelines are logged.
#[derive(Debug)]
pub(super) struct CreationLog {
    path: PathBuf,
    file: File,
    /// Where the records end.
    len_bytes: u64,
    /// The file's length: `len_bytes` and the zeros written ahead of the records ([`ZERO_AHEAD_BYTES`]), so that
    /// an append overwrites blocks allocated inside the file's size and its fdatasync writes no inode or block
    /// map. **Invariant:** `len_bytes <= file_len_bytes`, every byte in between zero.
    file_len_bytes: u64,
    durability: Durability,
    /// Every timeline whose last record is a creation, with its start LSN.
    logged: HashMap<TimelineKey, Lsn>,
    /// The logged timelines whose directory was made durable (materialization records).
    materialized: HashSet<TimelineKey>,
    /// A failed append or sync: the file's tail is unknown, so nothing more is appended until a reopen.
    poisoned: bool,
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> NodeError + '_ {
    move |source| NodeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn from_fsio(error: fsio::IoError) -> NodeError {
    NodeError::Io {
        path: error.path,
        source: error.source,
    }
}

fn damaged(path: &Path, reason: String) -> NodeError {
    NodeError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, reason),
    }
}

fn header() -> Vec<u8> {
    header_of(VERSION)
}

fn header_of(version: u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&version.to_le_bytes());
    bytes
}

/// What `record` does to the logged and materialized sets.
fn apply(record: Record, logged: &mut HashMap<TimelineKey, Lsn>, materialized: &mut HashSet<TimelineKey>) {
    match record {
        Record::Created(key, lsn) => {
            logged.insert(key, lsn);
            materialized.remove(&key);
        }
        Record::Deleted(key) => {
            logged.remove(&key);
            materialized.remove(&key);
        }
        Record::Materialized(key) => {
            if logged.contains_key(&key) {
                materialized.insert(key);
            }
        }
    }
}

/// What a log's bytes say.
struct Parsed {
    logged: HashMap<TimelineKey, Lsn>,
    materialized: HashSet<TimelineKey>,
    /// Whole records read.
    records: usize,
    /// The header and those records: where a torn last record starts.
    good_bytes: usize,
    /// A version 1 log (every logged timeline read as materialized).
    without_materialization: bool,
}

/// Reads a log's `bytes` (the file at `path`): a torn last record is left out (and logged); a bad header, or a
/// bad record before the last one, is damage.
fn parse(bytes: &[u8], path: &Path) -> Result<Parsed, NodeError> {
    let without_materialization =
        bytes.len() >= HEADER_BYTES && bytes[..HEADER_BYTES] == header_of(VERSION_WITHOUT_MATERIALIZATION)[..];
    if bytes.len() < HEADER_BYTES || (bytes[..HEADER_BYTES] != header()[..] && !without_materialization) {
        return Err(damaged(path, "not a timeline creation log (bad header)".to_owned()));
    }
    let body = &bytes[HEADER_BYTES..];
    let mut logged = HashMap::new();
    let mut materialized = HashSet::new();
    let mut records = 0usize;
    let mut good_bytes = HEADER_BYTES;
    for (index, chunk) in body.chunks(RECORD_BYTES).enumerate() {
        let after = &body[(index * RECORD_BYTES + chunk.len())..];
        let record = (chunk.len() == RECORD_BYTES).then(|| Record::decode(chunk)).flatten();
        match record {
            Some(record) => apply(record, &mut logged, &mut materialized),
            // The zeros written ahead of the records (a record of zeros fails its crc).
            None if chunk.iter().chain(after).all(|&byte| byte == 0) => break,
            // The last record, or one followed by zeros only: an append cut short.
            None if after.iter().all(|&byte| byte == 0) => {
                tracing::warn!(
                    path = %path.display(),
                    offset = good_bytes,
                    "a torn last record of the timeline creation log (an append cut short)"
                );
                break;
            }
            None => {
                return Err(damaged(
                    path,
                    format!("a bad record at offset {good_bytes}, before the last one"),
                ))
            }
        }
        records += 1;
        good_bytes += RECORD_BYTES;
    }
    if without_materialization {
        // Every creation of version 1 made its directory durable before it was acknowledged.
        materialized = logged.keys().copied().collect();
    }
    Ok(Parsed {
        logged,
        materialized,
        records,
        good_bytes,
        without_materialization,
    })
}

/// The timelines the creation log of the safekeeper data directory `data_dir` holds (those its node serves, or
/// rebuilds: see the node's module doc), each with whether it was materialized (it wrote: its directory was made
/// durable), read without changing the file; empty if there is no log. For tools and tests that look at a
/// stopped, or running, node's data directory.
pub fn logged_timelines(data_dir: &Path) -> Result<std::collections::BTreeMap<TimelineKey, bool>, NodeError> {
    let path = data_dir.join(CREATION_LOG_FILE_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(error) => return Err(io_error(&path)(error)),
    };
    let parsed = parse(&bytes, &path)?;
    Ok(parsed
        .logged
        .keys()
        .map(|key| (*key, parsed.materialized.contains(key)))
        .collect())
}

impl CreationLog {
    /// Opens the log of `data_dir` (which exists and is locked by this node), creating it durably if missing;
    /// cuts a torn last record, and rewrites the log when it holds many records of deleted timelines.
    pub(super) fn open(data_dir: &Path, durability: Durability) -> Result<CreationLog, NodeError> {
        let path = data_dir.join(CREATION_LOG_FILE_NAME);
        if !path.exists() {
            // Temp, fsync, rename, fsync of the data directory: the file is there whole before any append.
            fsio::write_atomic(&path, &header(), durability).map_err(from_fsio)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_error(&path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_error(&path))?;
        let Parsed {
            logged,
            materialized,
            records,
            good_bytes,
            without_materialization,
        } = parse(&bytes, &path)?;
        if good_bytes < bytes.len() {
            file.set_len(good_bytes as u64).map_err(io_error(&path))?;
            if durability == Durability::Fsync {
                file.sync_all().map_err(io_error(&path))?;
            }
        }
        let mut log = CreationLog {
            path,
            file,
            len_bytes: good_bytes as u64,
            file_len_bytes: good_bytes as u64,
            durability,
            logged,
            materialized,
            poisoned: false,
        };
        if without_materialization || records > 3 * log.logged.len() + REWRITE_SLACK_RECORDS {
            log.rewrite()?;
        }
        Ok(log)
    }

    /// The logged timelines with their start LSNs.
    pub(super) fn logged(&self) -> &HashMap<TimelineKey, Lsn> {
        &self.logged
    }

    /// Whether `key`'s last record is a creation.
    pub(super) fn is_logged(&self, key: &TimelineKey) -> bool {
        self.logged.contains_key(key)
    }

    /// Whether `key` is logged and its directory was made durable.
    pub(super) fn is_materialized(&self, key: &TimelineKey) -> bool {
        self.materialized.contains(key)
    }

    /// Appends `records` and fdatasyncs them: durable when this returns `Ok`. A failure poisons the log.
    pub(super) fn append(&mut self, records: &[Record]) -> Result<(), NodeError> {
        if records.is_empty() {
            return Ok(());
        }
        if self.poisoned {
            return Err(damaged(
                &self.path,
                "an earlier append failed; the creation log takes no more until the safekeeper restarts".to_owned(),
            ));
        }
        let mut bytes = Vec::with_capacity(records.len() * RECORD_BYTES);
        for record in records {
            record.encode(&mut bytes);
        }
        let end_bytes = self.len_bytes + bytes.len() as u64;
        let zeros_to = end_bytes + ZERO_AHEAD_BYTES;
        if end_bytes > self.file_len_bytes {
            // Past the zeros: the next ones go with this append (one write), so later appends land inside them.
            bytes.resize((zeros_to - self.len_bytes) as usize, 0);
        }
        let written = self
            .file
            .write_all_at(&bytes, self.len_bytes)
            .map_err(io_error(&self.path))
            .and_then(|()| fsio::sync_file(&self.file, &self.path, self.durability).map_err(from_fsio));
        if let Err(error) = written {
            tracing::error!(path = %self.path.display(), %error, "timeline creation log append failed; poisoned");
            self.poisoned = true;
            return Err(error);
        }
        if end_bytes > self.file_len_bytes {
            self.file_len_bytes = zeros_to;
        }
        self.len_bytes = end_bytes;
        for record in records {
            apply(*record, &mut self.logged, &mut self.materialized);
        }
        Ok(())
    }

    /// Replaces the file by one holding a creation record per logged timeline, each followed by a
    /// materialization record if it is materialized (atomically; in the current version).
    fn rewrite(&mut self) -> Result<(), NodeError> {
        let mut keys: Vec<_> = self.logged.iter().map(|(&key, &lsn)| (key, lsn)).collect();
        keys.sort_unstable();
        let mut bytes = header();
        for (key, lsn) in keys {
            Record::Created(key, lsn).encode(&mut bytes);
            if self.materialized.contains(&key) {
                Record::Materialized(key).encode(&mut bytes);
            }
        }
        fsio::write_atomic(&self.path, &bytes, self.durability).map_err(from_fsio)?;
        self.file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(io_error(&self.path))?;
        self.len_bytes = bytes.len() as u64;
        self.file_len_bytes = self.len_bytes;
        tracing::info!(path = %self.path.display(), logged = self.logged.len(), "rewrote the timeline creation log");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tenant: u128, timeline: u128) -> TimelineKey {
        (TenantId(tenant), TimelineId(timeline))
    }

    #[test]
    fn records_survive_reopen_and_deletions_cancel_creations() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = CreationLog::open(dir.path(), Durability::Fsync).expect("open");
        log.append(&[Record::Created(key(1, 2), Lsn(0x100))]).expect("append");
        log.append(&[Record::Created(key(1, 3), Lsn(0x200))]).expect("append");
        log.append(&[Record::Deleted(key(1, 2))]).expect("append");
        drop(log);
        let log = CreationLog::open(dir.path(), Durability::Fsync).expect("reopen");
        assert_eq!(log.logged(), &HashMap::from([(key(1, 3), Lsn(0x200))]));
    }

    #[test]
    fn materializations_count_only_for_the_logged_creation_they_follow_and_survive_a_rewrite() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(logged_timelines(dir.path()).expect("no log").is_empty());
        let mut log = CreationLog::open(dir.path(), Durability::Fsync).expect("open");
        log.append(&[Record::Created(key(1, 2), Lsn(0x100))]).expect("append");
        log.append(&[Record::Created(key(1, 3), Lsn(0x200))]).expect("append");
        log.append(&[Record::Materialized(key(1, 2))]).expect("append");
        // A write that raced its timeline's deletion: ignored.
        log.append(&[Record::Deleted(key(1, 3)), Record::Materialized(key(1, 3))])
            .expect("append");
        // Made again: not materialized until it writes again.
        log.append(&[Record::Created(key(1, 3), Lsn(0x300))]).expect("append");
        assert!(log.is_materialized(&key(1, 2)) && !log.is_materialized(&key(1, 3)));
        let expected = std::collections::BTreeMap::from([(key(1, 2), true), (key(1, 3), false)]);
        assert_eq!(logged_timelines(dir.path()).expect("read"), expected);
        log.rewrite().expect("rewrite");
        drop(log);
        assert_eq!(logged_timelines(dir.path()).expect("read"), expected);
        let log = CreationLog::open(dir.path(), Durability::Fsync).expect("reopen");
        assert!(log.is_materialized(&key(1, 2)) && !log.is_materialized(&key(1, 3)));
        assert_eq!(log.logged().get(&key(1, 3)), Some(&Lsn(0x300)));
    }

    #[test]
    fn a_torn_last_record_is_cut_and_appends_continue_after_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = CreationLog::open(dir.path(), Durability::Fsync).expect("open");
        log.append(&[Record::Created(key(1, 2), Lsn(0x100))]).expect("append");
        drop(log);
        let path = dir.path().join(CREATION_LOG_FILE_NAME);
        let file = std::fs::read(&path).expect("read");
        let whole = file[..HEADER_BYTES + RECORD_BYTES].to_vec();
        assert!(
            file[whole.len()..].iter().all(|&byte| byte == 0),
            "zeros after the records"
        );
        // Every torn form of a second record, written where it goes (over the zeros): a prefix of it, or all of
        // it with a bit flipped.
        let mut second = Vec::new();
        Record::Created(key(1, 3), Lsn(0x200)).encode(&mut second);
        let mut flipped = second.clone();
        flipped[RECORD_BYTES - 1] ^= 1;
        let tails: Vec<Vec<u8>> = (1..RECORD_BYTES)
            .map(|n| second[..n].to_vec())
            .chain([flipped])
            .collect();
        for tail in tails {
            let zeros = vec![0u8; file.len() - whole.len() - tail.len()];
            std::fs::write(&path, [whole.as_slice(), tail.as_slice(), &zeros].concat()).expect("write");
            // A prefix whose missing bytes are zeros is the whole record (an unacknowledged append may survive).
            let whole_record = tail.len() < RECORD_BYTES && second[tail.len()..].iter().all(|&byte| byte == 0);
            let mut log = CreationLog::open(dir.path(), Durability::Fsync).expect("reopen");
            let mut expected = HashMap::from([(key(1, 2), Lsn(0x100))]);
            let mut kept = whole.clone();
            if whole_record {
                expected.insert(key(1, 3), Lsn(0x200));
                kept.extend_from_slice(&second);
            }
            assert_eq!(log.logged(), &expected);
            assert_eq!(std::fs::read(&path).expect("read"), kept, "the torn tail is cut");
            log.append(&[Record::Created(key(1, 4), Lsn(0x300))]).expect("append");
            drop(log);
            let log = CreationLog::open(dir.path(), Durability::Fsync).expect("reopen");
            assert_eq!(log.logged().len(), expected.len() + 1);
            std::fs::write(&path, &whole).expect("reset");
        }
    }

    #[test]
    fn appends_overwrite_the_zeros_written_ahead_and_a_reopen_cuts_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(CREATION_LOG_FILE_NAME);
        let file_len = || std::fs::metadata(&path).expect("stat").len();
        let mut log = CreationLog::open(dir.path(), Durability::Fsync).expect("open");
        log.append(&[Record::Created(key(1, 0), Lsn(0x100))]).expect("append");
        let records_end = (HEADER_BYTES + RECORD_BYTES) as u64;
        assert_eq!(file_len(), records_end + ZERO_AHEAD_BYTES);
        // Appends inside the zeros leave the file's length alone; the one past them writes the next zeros.
        let first_len = file_len();
        let inside = (ZERO_AHEAD_BYTES / RECORD_BYTES as u64) as u128;
        for timeline in 1..=inside {
            log.append(&[Record::Created(key(1, timeline), Lsn(0x100))])
                .expect("append");
        }
        assert_eq!(file_len(), first_len, "inside the zeros");
        log.append(&[Record::Created(key(1, inside + 1), Lsn(0x100))])
            .expect("append");
        let records_end = records_end + (inside as u64 + 1) * RECORD_BYTES as u64;
        assert_eq!(file_len(), records_end + ZERO_AHEAD_BYTES, "past them: the next zeros");
        let bytes = std::fs::read(&path).expect("read");
        assert!(bytes[records_end as usize..].iter().all(|&byte| byte == 0));
        assert_eq!(logged_timelines(dir.path()).expect("read").len(), inside as usize + 2);
        drop(log);
        let log = CreationLog::open(dir.path(), Durability::Fsync).expect("reopen");
        assert_eq!(log.logged().len(), inside as usize + 2);
        assert_eq!(file_len(), records_end, "the zeros cut at the open");
    }

    #[test]
    fn damage_before_the_last_record_fails_the_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = CreationLog::open(dir.path(), Durability::Fsync).expect("open");
        log.append(&[Record::Created(key(1, 2), Lsn(0x100))]).expect("append");
        log.append(&[Record::Created(key(1, 3), Lsn(0x200))]).expect("append");
        drop(log);
        let path = dir.path().join(CREATION_LOG_FILE_NAME);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[HEADER_BYTES + 10] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let error = CreationLog::open(dir.path(), Durability::Fsync).expect_err("damaged");
        assert!(error.to_string().contains("bad record at offset 12"), "{error}");
        std::fs::write(&path, b"not a log").expect("write");
        let error = CreationLog::open(dir.path(), Durability::Fsync).expect_err("bad header");
        assert!(error.to_string().contains("bad header"), "{error}");
    }

    #[test]
    fn a_log_of_mostly_deleted_timelines_is_rewritten_at_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = CreationLog::open(dir.path(), Durability::Off).expect("open");
        let churn = REWRITE_SLACK_RECORDS as u128;
        for timeline in 0..churn {
            log.append(&[
                Record::Created(key(1, timeline), Lsn(0x100)),
                Record::Deleted(key(1, timeline)),
            ])
            .expect("append");
        }
        log.append(&[Record::Created(key(2, 1), Lsn(0x400))]).expect("append");
        drop(log);
        let mut log = CreationLog::open(dir.path(), Durability::Off).expect("reopen");
        let path = dir.path().join(CREATION_LOG_FILE_NAME);
        let len = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(len, (HEADER_BYTES + RECORD_BYTES) as u64, "one record left");
        log.append(&[Record::Created(key(2, 2), Lsn(0x500))])
            .expect("append after a rewrite");
        drop(log);
        let log = CreationLog::open(dir.path(), Durability::Off).expect("reopen");
        assert_eq!(
            log.logged(),
            &HashMap::from([(key(2, 1), Lsn(0x400)), (key(2, 2), Lsn(0x500))])
        );
    }
}
