//! The file stores' tests: round trips across segments, recovery from torn tails, truncation and removal
//! across segments, corruption detection, poisoning, the control file, an acceptor over the files, and a
//! proptest model test against `MemWal`.

use super::*;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use cambium_types::codec::u32_at;
use cambium_types::fsio::{self, Durability};
use cambium_types::wal::{scan_frames, FRAME_HEADER_BYTES};
use cambium_types::Lsn;

use safekeeper_core::protocol::{ControlState, ControlStore, StoreError, WalStore};

use proptest::prelude::*;
use safekeeper_core::acceptor::Acceptor;
use safekeeper_core::memstore::MemWal;
use safekeeper_core::protocol::{AppendRequest, ElectedRequest, TermHistory, TermSwitch, VoteRequest};
use std::os::unix::fs::FileExt;

const START: Lsn = Lsn(0x100);
const SMALL_SEGMENT_BYTES: u64 = 4096;

fn config(segment_size_bytes: u64) -> FileStoreConfig {
    FileStoreConfig {
        segment_size_bytes,
        durability: Durability::Fsync,
    }
}

/// A frame whose body is `body_bytes` bytes derived from `seed`.
fn frame(body_bytes: usize, seed: u64) -> Vec<u8> {
    let body: Vec<u8> = (0..body_bytes)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect();
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body_bytes);
    out.extend_from_slice(&(body_bytes as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// `count` frames of varied sizes (up to `body_bytes_max`), and the boundaries between them.
fn frames(count: usize, body_bytes_max: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count {
        let seed = seed * 1000 + i as u64;
        out.extend_from_slice(&frame(1 + (seed as usize * 37) % body_bytes_max.max(1), seed));
    }
    out
}

/// Everything from `lsn` to the flush LSN, in reads of at most about `max_bytes`.
fn read_all(wal: &FileWal, lsn: Lsn, max_bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = lsn;
    while at < wal.flush_lsn() {
        let chunk = wal.read(at, wal.flush_lsn(), max_bytes).expect("read");
        assert!(
            !chunk.is_empty(),
            "a read below the flush LSN returns at least one frame"
        );
        assert!(chunk.len() <= max_bytes || scan_frames(&chunk, at).0 == chunk.len());
        at = Lsn(at.0 + chunk.len() as u64);
        out.extend_from_slice(&chunk);
    }
    out
}

/// Byte equality without printing kilobytes on failure.
#[track_caller]
fn assert_bytes(actual: &[u8], expected: &[u8]) {
    let first_difference = actual.iter().zip(expected).position(|(a, b)| a != b);
    assert!(
        actual == expected,
        "{} bytes, expected {}; first difference at {first_difference:?}",
        actual.len(),
        expected.len()
    );
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(SEGMENT_SUFFIX))
        .collect();
    names.sort();
    names
}

fn last_segment_path(wal: &FileWal) -> PathBuf {
    wal.dir()
        .join(segment_file_name(*wal.segment_starts().last().expect("a segment")))
}

#[test]
fn segment_names_round_trip() {
    assert_eq!(segment_file_name(Lsn(0x100)), "0000000000000100.seg");
    assert_eq!(parse_segment_name("0000000000000100.seg"), Some(Lsn(0x100)));
    assert_eq!(parse_segment_name("00000000000001AB.seg"), Some(Lsn(0x1AB)));
    assert_eq!(parse_segment_name("00000000000001ab.seg"), None);
    assert_eq!(parse_segment_name("100.seg"), None);
    assert_eq!(parse_segment_name("0000000000000100.seg.tmp"), None);
    assert_eq!(parse_segment_name("+000000000000100.seg"), None);
}

#[test]
fn write_sync_read_across_segments_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    assert_eq!(
        (wal.oldest_lsn(), wal.flush_lsn(), wal.write_lsn()),
        (START, START, START)
    );
    assert!(wal.read(START, Lsn::MAX, 100).expect("read").is_empty());
    let mut expected = Vec::new();
    for batch in 0..20u64 {
        let data = frames(7, 300, batch);
        wal.write(wal.write_lsn(), &data).expect("write");
        expected.extend_from_slice(&data);
        if batch % 3 == 0 {
            assert_eq!(wal.sync().expect("sync"), Lsn(START.0 + expected.len() as u64));
        }
    }
    // A frame larger than a segment gets one of its own.
    let big = frame(2 * SMALL_SEGMENT_BYTES as usize, 99);
    let big_lsn = wal.write_lsn();
    wal.write(big_lsn, &big).expect("write");
    expected.extend_from_slice(&big);
    let after_big = frames(3, 50, 100);
    wal.write(wal.write_lsn(), &after_big).expect("write");
    expected.extend_from_slice(&after_big);
    let end = wal.sync().expect("sync");
    assert_eq!(end, Lsn(START.0 + expected.len() as u64));
    assert!(wal.segment_starts().contains(&big_lsn));
    let big_index = wal.segment_index(big_lsn);
    assert_eq!(wal.segment_end(big_index), Lsn(big_lsn.0 + big.len() as u64));

    let names = segment_files(dir.path());
    assert!(names.len() > 5, "{names:?}");
    assert_eq!(names[0], segment_file_name(START));
    let last_index = wal.segment_starts().len() - 1;
    for (index, &start) in wal.segment_starts().iter().enumerate() {
        let bytes = fs::read(dir.path().join(segment_file_name(start))).expect("read");
        let len = wal.segment_end(index).0 - start.0;
        let (valid, error) = scan_frames(&bytes, start);
        assert_eq!(valid as u64, len, "segment {start} holds its WAL's frames");
        if index < last_index {
            assert!(error.is_none(), "a closed segment holds whole frames and nothing else");
            assert_eq!(bytes.len() as u64, len, "a closed segment is cut to its WAL");
        } else {
            assert!(
                bytes[valid..].iter().all(|&byte| byte == 0),
                "the open segment holds zeros after its frames"
            );
        }
        assert!(
            len <= SMALL_SEGMENT_BYTES || start == big_lsn,
            "segment {start} of {len} bytes"
        );
    }

    for max_bytes in [1, 100, 1000, 5000, 100_000] {
        assert_bytes(&read_all(&wal, START, max_bytes), &expected);
    }
    // Reads stop at end_lsn (a frame boundary) and never return more than max_bytes after the first frame.
    let first = wal.read(START, Lsn::MAX, 1).expect("read");
    assert_eq!(scan_frames(&first, START), (first.len(), None));
    let two = Lsn(START.0 + first.len() as u64);
    let up_to_two = wal.read(START, two, usize::MAX).expect("read");
    assert_eq!(up_to_two, first);

    drop(wal);
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert_eq!(wal.flush_lsn(), end);
    assert_eq!(wal.write_lsn(), end);
    assert_bytes(&read_all(&wal, START, 3000), &expected);
    // And it goes on where it stopped.
    let more = frames(30, 200, 7);
    wal.write(end, &more).expect("write");
    expected.extend_from_slice(&more);
    wal.sync().expect("sync");
    drop(wal);
    let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert_bytes(&read_all(&wal, START, 3000), &expected);
}

/// Issue 13: an idle timeline holds no descriptor; the next append takes its segment up again, in place.
#[test]
fn an_idle_segment_file_is_let_go_and_taken_up_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(1 << 20)).expect("open");
    let first = frames(3, 100, 1);
    wal.write(START, &first).expect("write");
    assert!(
        !wal.release_idle(std::time::Duration::ZERO),
        "unsynced writes keep the file"
    );
    wal.sync().expect("sync");
    assert!(
        !wal.release_idle(std::time::Duration::from_secs(3600)),
        "not idle long enough"
    );
    assert!(wal.release_idle(std::time::Duration::ZERO), "synced and idle: let go");
    assert!(!wal.release_idle(std::time::Duration::ZERO), "nothing left to let go");
    let second = frames(2, 100, 2);
    wal.write(wal.write_lsn(), &second).expect("write after the release");
    let end = wal.sync().expect("sync");
    assert_eq!(wal.segment_starts(), &[START], "the same segment, taken up again");
    let mut expected = first.clone();
    expected.extend_from_slice(&second);
    assert_eq!(end, Lsn(START.0 + expected.len() as u64));
    assert_eq!(&wal.read(START, end, usize::MAX).expect("read")[..], &expected[..]);
    drop(wal);
    let wal = FileWal::open(dir.path(), START, &config(1 << 20)).expect("reopen");
    assert_eq!(wal.flush_lsn(), end);
}

#[test]
fn torn_tail_is_cut_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    let synced = frames(30, 200, 1);
    wal.write(START, &synced).expect("write");
    let synced_lsn = wal.sync().expect("sync");
    // Written, never synced: a crash of the process (not the machine) leaves it in the file.
    let unsynced = frames(3, 100, 2);
    wal.write(synced_lsn, &unsynced).expect("write");
    let written_lsn = wal.write_lsn();
    let last = last_segment_path(&wal);
    let last_start = *wal.segment_starts().last().expect("a segment");
    drop(wal);
    // A torn frame: a whole header and part of the body, where the next append would have gone (over the
    // zeros written ahead).
    let partial = frame(500, 3);
    let file = OpenOptions::new().write(true).open(&last).expect("open segment");
    file.write_all_at(&partial[..100], written_lsn.0 - last_start.0)
        .expect("write the torn frame");
    drop(file);

    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert!(wal.flush_lsn() >= synced_lsn);
    assert_eq!(wal.flush_lsn(), written_lsn, "the whole valid frames survive");
    assert_eq!(
        fs::metadata(&last).expect("metadata").len(),
        written_lsn.0 - last_start.0,
        "the torn tail is gone from the file"
    );
    let mut expected = synced.clone();
    expected.extend_from_slice(&unsynced);
    assert_bytes(&read_all(&wal, START, 1000), &expected);

    // A bad crc followed by a valid frame (unsynced pages reach the disk in any order): cut at the bad one.
    let mut bad = frame(40, 4);
    bad[FRAME_HEADER_BYTES + 3] ^= 0x40;
    let mut garbage = bad.clone();
    garbage.extend_from_slice(&frame(40, 5));
    garbage.extend_from_slice(&[0xAB; 13]);
    let last = last_segment_path(&wal);
    let end = wal.write_lsn();
    wal.write(end, &frame(10, 6)).expect("write");
    let end = wal.sync().expect("sync");
    let last_start = *wal.segment_starts().last().expect("a segment");
    drop(wal);
    let file = OpenOptions::new().write(true).open(&last).expect("open segment");
    file.write_all_at(&garbage, end.0 - last_start.0)
        .expect("write the garbage");
    drop(file);
    let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert_eq!(wal.flush_lsn(), end);
    expected.extend_from_slice(&frame(10, 6));
    assert_bytes(&read_all(&wal, START, 1000), &expected);
    drop(wal);

    // A new segment holding nothing but garbage (the crash came right after a roll-over).
    let garbage_segment = dir.path().join(segment_file_name(end));
    fs::write(&garbage_segment, [0xFF; 6]).expect("write");
    fs::write(dir.path().join("control.tmp"), b"half a control file").expect("write");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert_eq!(wal.flush_lsn(), end);
    assert_eq!(fs::metadata(&garbage_segment).expect("metadata").len(), 0);
    assert!(!dir.path().join("control.tmp").exists(), "stray temp files are removed");
    // The empty segment takes the next frames.
    let more = frames(5, 100, 8);
    wal.write(end, &more).expect("write");
    wal.sync().expect("sync");
    expected.extend_from_slice(&more);
    assert_bytes(&read_all(&wal, START, 1000), &expected);
    assert_eq!(*wal.segment_starts().last().expect("a segment"), end);
}

/// The open segment is zero-filled ahead of its frames, so that most appends overwrite allocated blocks inside
/// the file's size (an fdatasync then writes no metadata); the zeros are never WAL: a roll-over cuts them from
/// the closed segment, a reopen cuts them from the last one, and a truncation from the one it cuts.
#[test]
fn zeros_written_ahead_of_the_appends_are_never_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let segment_bytes = 1 << 20;
    let mut wal = FileWal::open(dir.path(), START, &config(segment_bytes)).expect("open");
    let mut expected = frames(2, 100, 1);
    wal.write(START, &expected).expect("write");
    let end = wal.sync().expect("sync");
    let first = last_segment_path(&wal);
    let file_len = |path: &Path| fs::metadata(path).expect("metadata").len();
    let wal_len = end.0 - START.0;
    assert_eq!(file_len(&first), (wal_len + ZERO_AHEAD_BYTES_MIN).div_ceil(4096) * 4096);
    assert!(fs::read(&first).expect("read")[wal_len as usize..]
        .iter()
        .all(|&b| b == 0));

    // Appends inside the zeros leave the file's length alone; one past them writes the next zeros.
    let ahead = file_len(&first);
    let small = frames(3, 50, 2);
    wal.write(end, &small).expect("write");
    expected.extend_from_slice(&small);
    let end = wal.sync().expect("sync");
    assert_eq!(file_len(&first), ahead, "inside the zeros");
    while wal.write_lsn().0 - START.0 <= ahead {
        let more = frames(4, 900, wal.write_lsn().0);
        wal.write(wal.write_lsn(), &more).expect("write");
        expected.extend_from_slice(&more);
    }
    let end = wal.sync().expect("sync").max(end);
    let wal_len = end.0 - START.0;
    assert!(file_len(&first) > wal_len, "zeros again after the frames");
    assert!(file_len(&first) - wal_len <= ZERO_AHEAD_BYTES_MAX + 4096);
    // A large write past them (a bulk load's) extends the file without zeros; the next small one writes them.
    let big = frame(ZERO_AHEAD_WRITE_BYTES_MAX as usize, 77);
    assert!(
        wal.write_lsn().0 - START.0 + big.len() as u64 > file_len(&first),
        "passes the zeros"
    );
    wal.write(wal.write_lsn(), &big).expect("write");
    expected.extend_from_slice(&big);
    wal.sync().expect("sync");
    assert_eq!(
        file_len(&first),
        wal.write_lsn().0 - START.0,
        "no zeros after a large write"
    );
    let small = frames(1, 100, 78);
    wal.write(wal.write_lsn(), &small).expect("write");
    expected.extend_from_slice(&small);
    let end = wal.sync().expect("sync");
    let wal_len = end.0 - START.0;
    assert!(file_len(&first) > wal_len, "zeros after a small write");

    // A reopen cuts the zeros and goes on from the WAL's end.
    drop(wal);
    let mut wal = FileWal::open(dir.path(), START, &config(segment_bytes)).expect("reopen");
    assert_eq!(wal.flush_lsn(), end);
    assert_eq!(file_len(&first), wal_len, "the zeros cut at the reopen");
    assert_bytes(&read_all(&wal, START, 1 << 20), &expected);

    // A truncation inside zero-filled WAL leaves no old frame after the cut for a later recovery to find.
    let more = frames(10, 300, 3);
    wal.write(end, &more).expect("write");
    let after = wal.sync().expect("sync");
    assert!(file_len(&first) > after.0 - START.0);
    wal.truncate(end).expect("truncate");
    assert_eq!(file_len(&first), wal_len, "cut at the truncation point");
    let other = frames(1, 20, 4);
    wal.write(end, &other).expect("write");
    expected.extend_from_slice(&other);
    let end = wal.sync().expect("sync");
    drop(wal);
    let mut wal = FileWal::open(dir.path(), START, &config(segment_bytes)).expect("reopen");
    assert_eq!(wal.flush_lsn(), end, "nothing of the truncated frames came back");
    assert_bytes(&read_all(&wal, START, 1 << 20), &expected);

    // Past the segment's size the next segment starts and the closed one holds exactly its WAL.
    while wal.segment_starts().len() < 2 {
        let more = frames(8, 4000, wal.write_lsn().0);
        wal.write(wal.write_lsn(), &more).expect("write");
        expected.extend_from_slice(&more);
    }
    let end = wal.sync().expect("sync");
    assert_eq!(
        file_len(&first),
        wal.segment_end(0).0 - START.0,
        "the closed segment is cut to its WAL"
    );
    assert!(file_len(&first) <= segment_bytes);
    drop(wal);
    let wal = FileWal::open(dir.path(), START, &config(segment_bytes)).expect("reopen");
    assert_eq!(wal.flush_lsn(), end);
    assert_bytes(&read_all(&wal, START, 1 << 20), &expected);
}

#[test]
fn a_bad_frame_below_the_commit_lsn_is_corrupt_and_nothing_is_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SEGMENT_SIZE_BYTES_DEFAULT)).expect("open");
    let written = frames(40, 200, 11);
    wal.write(START, &written).expect("write");
    let end = wal.sync().expect("sync");
    let last = last_segment_path(&wal);
    drop(wal);
    // Damage a frame in the middle of the (only, so last) segment.
    let middle = boundaries(&written, START)[20];
    let offset = middle.0 - START.0;
    let mut bytes = fs::read(&last).expect("read");
    bytes[offset as usize + FRAME_HEADER_BYTES + 1] ^= 0x01;
    fs::write(&last, &bytes).expect("write");

    // Committed past it: corrupt, named, and the file is untouched.
    match FileWal::open_committed(dir.path(), START, end, &config(SEGMENT_SIZE_BYTES_DEFAULT)) {
        Err(StoreError::Corrupt {
            path,
            offset: at,
            reason,
        }) => {
            assert!(path.ends_with(&segment_file_name(START)), "{path}");
            assert_eq!(at, offset, "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(fs::read(&last).expect("read"), bytes, "nothing cut");

    // Committed only up to it: a torn tail as far as anyone can tell, cut there.
    let wal = FileWal::open_committed(dir.path(), START, middle, &config(SEGMENT_SIZE_BYTES_DEFAULT)).expect("open");
    assert_eq!(wal.flush_lsn(), middle);
    assert_bytes(&read_all(&wal, START, 100_000), &written[..offset as usize]);
}

#[test]
fn a_gap_between_segments_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    wal.write(START, &frames(200, 300, 1)).expect("write");
    wal.sync().expect("sync");
    let starts = wal.segment_starts().to_vec();
    assert!(starts.len() >= 4);
    drop(wal);
    fs::remove_file(dir.path().join(segment_file_name(starts[1]))).expect("remove");
    match FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)) {
        Err(StoreError::Corrupt { path, .. }) => assert!(path.ends_with(&segment_file_name(starts[0])), "{path}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A segment before the timeline start is corrupt too.
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join(segment_file_name(Lsn(0x10))), b"").expect("write");
    assert!(matches!(
        FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)),
        Err(StoreError::Corrupt { .. })
    ));
}

/// The frame boundaries of `bytes` (whole frames starting at `start`), including its end.
fn boundaries(bytes: &[u8], start: Lsn) -> Vec<Lsn> {
    let mut out = vec![start];
    let mut at = 0usize;
    while at < bytes.len() {
        at += FRAME_HEADER_BYTES + u32_at(bytes, at) as usize;
        out.push(Lsn(start.0 + at as u64));
    }
    out
}

#[test]
fn truncate_across_segments_then_write_and_remove_below() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    let mut expected = frames(200, 300, 1);
    wal.write(START, &expected).expect("write");
    wal.sync().expect("sync");
    let segments_before = wal.segment_starts().len();
    assert!(segments_before >= 6);
    // Somewhere in the second segment, not at its start.
    let second = wal.segment_starts()[1];
    let cut = *boundaries(&expected, START)
        .iter()
        .find(|&&b| b > second)
        .expect("a boundary");
    // Unsynced writes are synced (then dropped) by the truncation.
    wal.write(wal.write_lsn(), &frames(3, 10, 2)).expect("write");
    wal.truncate(cut).expect("truncate");
    assert_eq!((wal.flush_lsn(), wal.write_lsn()), (cut, cut));
    assert_eq!(wal.segment_starts().len(), 2);
    assert_eq!(segment_files(dir.path()).len(), 2);
    expected.truncate((cut.0 - START.0) as usize);
    assert_bytes(&read_all(&wal, START, 1000), &expected);
    let more = frames(40, 300, 3);
    wal.write(cut, &more).expect("write");
    expected.extend_from_slice(&more);
    wal.sync().expect("sync");
    assert_bytes(&read_all(&wal, START, 1000), &expected);

    // At exactly a segment start: the segment stays, empty, and says where the WAL ends.
    let third = wal.segment_starts()[2];
    wal.truncate(third).expect("truncate");
    assert_eq!(*wal.segment_starts().last().expect("a segment"), third);
    assert_eq!(
        fs::metadata(dir.path().join(segment_file_name(third)))
            .expect("meta")
            .len(),
        0
    );
    expected.truncate((third.0 - START.0) as usize);
    drop(wal);
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert_eq!(wal.flush_lsn(), third);
    assert_bytes(&read_all(&wal, START, 1000), &expected);
    let more = frames(40, 300, 4);
    wal.write(third, &more).expect("write");
    expected.extend_from_slice(&more);
    wal.sync().expect("sync");

    // Truncating at the flush LSN changes nothing.
    wal.truncate(wal.flush_lsn()).expect("truncate");
    assert_bytes(&read_all(&wal, START, 1000), &expected);

    // remove_below: whole segments that end at or below the LSN.
    let starts = wal.segment_starts().to_vec();
    let horizon = Lsn(starts[2].0 + 1);
    wal.remove_below(horizon).expect("remove_below");
    assert_eq!(wal.oldest_lsn(), starts[2]);
    assert_eq!(wal.segment_starts(), &starts[2..]);
    assert!(!dir.path().join(segment_file_name(starts[0])).exists());
    let offset = (starts[2].0 - START.0) as usize;
    assert_bytes(&read_all(&wal, starts[2], 1000), &expected[offset..]);
    // The acceptor refuses reads below oldest_lsn; the store asserts it.
    assert!(wal.oldest_lsn() > START);
    // Never the segment holding the write position.
    wal.remove_below(Lsn::MAX).expect("remove_below");
    assert_eq!(wal.segment_starts().len(), 1);
    let last = wal.oldest_lsn();
    let offset = (last.0 - START.0) as usize;
    assert_bytes(&read_all(&wal, last, 1000), &expected[offset..]);
    drop(wal);
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert_eq!(wal.oldest_lsn(), last);
    assert_bytes(&read_all(&wal, last, 1000), &expected[offset..]);
    // Truncating to the oldest LSN empties the WAL but keeps its position.
    wal.truncate(last).expect("truncate");
    drop(wal);
    let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert_eq!((wal.oldest_lsn(), wal.flush_lsn()), (last, last));
}

#[test]
#[should_panic(expected = "not a frame boundary")]
fn truncate_inside_a_frame_is_a_bug() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    wal.write(START, &frames(5, 100, 1)).expect("write");
    wal.sync().expect("sync");
    let _ = wal.truncate(Lsn(START.0 + 3));
}

#[test]
#[should_panic(expected = "below the oldest WAL")]
fn read_below_oldest_is_a_bug() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    wal.write(START, &frames(200, 300, 1)).expect("write");
    wal.sync().expect("sync");
    wal.remove_below(wal.flush_lsn()).expect("remove_below");
    let _ = wal.read(START, wal.flush_lsn(), 100);
}

#[test]
fn corruption_in_a_middle_segment_is_reported_by_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    wal.write(START, &frames(200, 300, 1)).expect("write");
    wal.sync().expect("sync");
    let middle = wal.segment_starts()[2];
    let middle_name = segment_file_name(middle);
    let path = dir.path().join(&middle_name);
    let mut bytes = fs::read(&path).expect("read");
    let flip_at = bytes.len() / 2;
    bytes[flip_at] ^= 0x01;
    fs::write(&path, &bytes).expect("write");
    // Reading up to the segment works.
    assert_eq!(read_all_until(&wal, START, middle).len() as u64, middle.0 - START.0);
    let error = (|| -> Result<(), StoreError> {
        let mut at = START;
        while at < wal.flush_lsn() {
            at = Lsn(at.0 + wal.read(at, wal.flush_lsn(), 1000)?.len() as u64);
        }
        Ok(())
    })()
    .expect_err("the flipped byte is found");
    match error {
        StoreError::Corrupt { path, offset, .. } => {
            assert!(path.ends_with(&middle_name), "{path}");
            assert!(offset <= flip_at as u64);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Opening trusts middle segments (only lengths are checked): the damage shows on read.
    drop(wal);
    let wal = FileWal::open(dir.path(), START, &config(SMALL_SEGMENT_BYTES)).expect("reopen");
    assert!(matches!(
        wal.read(middle, wal.flush_lsn(), usize::MAX),
        Err(StoreError::Corrupt { .. })
    ));
}

fn read_all_until(wal: &FileWal, lsn: Lsn, end_lsn: Lsn) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = lsn;
    while at < end_lsn {
        let chunk = wal.read(at, end_lsn, 700).expect("read");
        assert!(!chunk.is_empty());
        at = Lsn(at.0 + chunk.len() as u64);
        out.extend_from_slice(&chunk);
    }
    out
}

#[test]
fn an_io_error_poisons_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal_dir = dir.path().join("timeline");
    fs::create_dir(&wal_dir).expect("mkdir");
    let mut wal = FileWal::open(&wal_dir, START, &config(SMALL_SEGMENT_BYTES)).expect("open");
    wal.write(START, &frames(5, 100, 1)).expect("write");
    let flushed = wal.sync().expect("sync");
    // The directory vanishes: the next segment cannot be created.
    fs::remove_dir_all(&wal_dir).expect("remove");
    let big = frame(SMALL_SEGMENT_BYTES as usize, 2);
    assert!(matches!(wal.write(flushed, &big), Err(StoreError::Io { .. })));
    assert!(wal.is_poisoned());
    assert!(matches!(
        wal.write(wal.write_lsn(), &frame(1, 3)),
        Err(StoreError::Poisoned)
    ));
    assert!(matches!(wal.sync(), Err(StoreError::Poisoned)));
    assert!(matches!(wal.truncate(START), Err(StoreError::Poisoned)));
    assert!(matches!(wal.remove_below(START), Err(StoreError::Poisoned)));
    assert_eq!(
        wal.flush_lsn(),
        flushed,
        "nothing is reported durable after the failure"
    );
}

fn sample_state() -> ControlState {
    ControlState {
        term: 7,
        history: TermHistory(vec![
            TermSwitch { term: 2, lsn: START },
            TermSwitch {
                term: 7,
                lsn: Lsn(0x5A0),
            },
        ]),
        commit_lsn: Lsn(0x400),
        timeline_start_lsn: START,
        remote_consistent_lsn: Lsn(0x200),
    }
}

/// A state whose term is `term` (its history ends in it), with `extra_terms` more switches below (a longer body).
fn state_of_term(term: u64, extra_terms: u64) -> ControlState {
    let mut switches: Vec<TermSwitch> = (0..extra_terms)
        .map(|i| TermSwitch {
            term: i + 1,
            lsn: Lsn(START.0 + i * 0x10),
        })
        .collect();
    switches.push(TermSwitch {
        term: term.max(extra_terms + 1),
        lsn: Lsn(START.0 + extra_terms * 0x10),
    });
    ControlState {
        term: term.max(extra_terms + 1),
        history: TermHistory(switches),
        commit_lsn: START,
        timeline_start_lsn: START,
        remote_consistent_lsn: Lsn(0),
    }
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).expect("metadata").ino()
}

#[test]
fn control_file_updates_alternate_slots_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(FileControl::load(dir.path()).expect("load").is_none());
    let mut control = FileControl::new(dir.path(), Durability::Fsync);
    control.persist(&ControlState::new(START)).expect("persist");
    assert_eq!(
        FileControl::load(dir.path()).expect("load"),
        Some(ControlState::new(START))
    );
    let made = inode(control.path());
    let file_bytes = fs::metadata(control.path()).expect("metadata").len();
    assert_eq!(file_bytes, 2 * CONTROL_SLOT_BYTES_MIN);
    for term in 1..=6 {
        let state = state_of_term(term, 0);
        control.persist(&state).expect("persist");
        assert_eq!(FileControl::load(dir.path()).expect("load"), Some(state.clone()));
        let slots = control.slots().expect("known");
        assert_eq!((slots.seq, slots.newest), (term + 1, term % 2), "term {term}");
        assert_eq!(inode(control.path()), made, "an update made a new file");
        assert_eq!(fs::metadata(control.path()).expect("metadata").len(), file_bytes);
        assert!(!fsio::temp_path(control.path()).exists());
    }
    // Reopened, it goes on in place from the newest slot.
    drop(control);
    let (state, mut control) = FileControl::open(dir.path(), Durability::Fsync)
        .expect("open")
        .expect("exists");
    assert_eq!(state, state_of_term(6, 0));
    control.persist(&state_of_term(9, 0)).expect("persist");
    assert_eq!(inode(control.path()), made);
    assert_eq!(control.slots().expect("known").seq, 8);
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(state_of_term(9, 0)));
}

#[test]
fn a_damaged_slot_reads_as_the_other_and_two_are_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut control = FileControl::new(dir.path(), Durability::Fsync);
    let (older, newer) = (ControlState::new(START), sample_state());
    control.persist(&older).expect("persist");
    control.persist(&newer).expect("persist");
    assert_eq!(control.slots().expect("known").newest, 1);
    let good = fs::read(control.path()).expect("read");
    let slot = CONTROL_SLOT_BYTES_MIN as usize;
    let used = |at: usize| {
        let base = at - at % slot;
        let body_len = u32_at(&good, base + 20) as usize;
        at % slot < CONTROL_SLOT_HEADER_BYTES + body_len
    };
    for at in (0..good.len()).filter(|&at| used(at)) {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        fs::write(control.path(), &bad).expect("write");
        let expected = if at < slot { &newer } else { &older };
        assert_eq!(
            FileControl::load(dir.path()).expect("one good slot"),
            Some(expected.clone()),
            "flipped byte {at}"
        );
        // And damage in both slots is corrupt.
        bad[(at + slot) % (2 * slot)] ^= 0x10;
        if used((at + slot) % (2 * slot)) {
            fs::write(control.path(), &bad).expect("write");
            assert!(
                matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })),
                "flipped bytes {at} and its twin"
            );
        }
    }
    // Padding is not checked.
    let mut padded = good.clone();
    padded[slot - 1] = 0xFF;
    fs::write(control.path(), &padded).expect("write");
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(newer.clone()));
    for len in [0, 5, CONTROL_HEADER_BYTES, slot, good.len() - 1, good.len() + 1] {
        let mut cut = good.clone();
        cut.resize(len, 0);
        fs::write(control.path(), &cut).expect("write");
        assert!(
            matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })),
            "length {len}"
        );
    }
    // Two slots with the same sequence number are corrupt.
    let mut twins = good.clone();
    twins.copy_within(slot..2 * slot, 0);
    fs::write(control.path(), &twins).expect("write");
    assert!(matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })));
    // A well framed slot around a malformed history is bad too.
    let mut bad_state = newer.clone();
    bad_state.history.0.reverse();
    let body = serde_json::to_vec(&bad_state).expect("json");
    let mut framed = good.clone();
    let mut slot_bytes = Vec::new();
    slot_bytes.extend_from_slice(CONTROL_MAGIC);
    slot_bytes.extend_from_slice(&CONTROL_FORMAT_VERSION.to_le_bytes());
    slot_bytes.extend_from_slice(&9u64.to_le_bytes());
    slot_bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&9u64.to_le_bytes());
    hasher.update(&(body.len() as u64).to_le_bytes());
    hasher.update(&body);
    slot_bytes.extend_from_slice(&hasher.finalize().to_le_bytes());
    slot_bytes.extend_from_slice(&body);
    framed[..slot_bytes.len()].copy_from_slice(&slot_bytes);
    fs::write(control.path(), &framed).expect("write");
    assert_eq!(
        FileControl::load(dir.path()).expect("the other slot"),
        Some(newer.clone()),
        "a slot with a malformed history is not the state"
    );
    fs::write(control.path(), &good).expect("write");
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(newer));
}

#[test]
fn an_older_whole_control_file_loads_and_its_first_update_rewrites_it_in_slots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(CONTROL_FILE_NAME);
    let v1 = control::encode_whole_v1(&sample_state());
    fs::write(&path, &v1).expect("write");
    let (state, mut control) = FileControl::open(dir.path(), Durability::Fsync)
        .expect("open")
        .expect("exists");
    assert_eq!(state, sample_state());
    assert_eq!(control.slots(), None);
    for at in 0..v1.len() {
        let mut bad = v1.clone();
        bad[at] ^= 0x10;
        fs::write(&path, &bad).expect("write");
        assert!(
            matches!(FileControl::load(dir.path()), Err(StoreError::Corrupt { .. })),
            "flipped byte {at} of a version 1 file"
        );
    }
    fs::write(&path, &v1).expect("write");
    let before = inode(&path);
    let next = state_of_term(8, 2);
    control.persist(&next).expect("persist");
    assert_ne!(inode(&path), before, "the first update writes a new file");
    assert_eq!(fs::metadata(&path).expect("metadata").len(), 2 * CONTROL_SLOT_BYTES_MIN);
    assert_eq!(u32_at(&fs::read(&path).expect("read"), 8), CONTROL_FORMAT_VERSION);
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(next));
    let after = inode(&path);
    control.persist(&state_of_term(9, 2)).expect("persist");
    assert_eq!(inode(&path), after, "then in place");
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(state_of_term(9, 2)));
}

#[test]
fn a_state_that_outgrows_its_slot_gets_a_larger_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut control = FileControl::new(dir.path(), Durability::Fsync);
    control.persist(&ControlState::new(START)).expect("persist");
    // Each switch is ~30 bytes of JSON: 400 of them pass 4 KiB.
    let big = state_of_term(500, 400);
    control.persist(&big).expect("persist");
    let slots = control.slots().expect("known");
    assert!(slots.slot_bytes > CONTROL_SLOT_BYTES_MIN, "{slots:?}");
    assert_eq!(
        fs::metadata(control.path()).expect("metadata").len(),
        2 * slots.slot_bytes
    );
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(big));
    let bigger = state_of_term(501, 400);
    control.persist(&bigger).expect("persist");
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(bigger.clone()));
    // One whose file would pass the bound a load accepts is refused, and the file stays as it was.
    let huge = state_of_term(400_000, 300_000);
    let refused = control.persist(&huge).expect_err("a state over the file's bound");
    assert!(refused.to_string().contains("needs a file over"), "{refused}");
    assert_eq!(FileControl::load(dir.path()).expect("load"), Some(bigger));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(model_cases()))]

    /// A crash during any update leaves the slot it wrote with any prefix of its bytes (or garbage where they were
    /// going): the file then loads as the update before it, or, if every byte landed, as the update itself; and
    /// updates after the crash go on from what loaded.
    #[test]
    fn a_torn_update_loads_as_the_state_before_it(
        terms in proptest::collection::vec((1u64..1_000, 0u64..20), 2..8),
        tear_at in any::<prop::sample::Index>(),
        garbage in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut control = FileControl::new(dir.path(), Durability::Fsync);
        let states: Vec<ControlState> = terms.iter().map(|&(term, extra)| state_of_term(term, extra)).collect();
        let (last, before) = states.split_last().expect("two or more");
        for state in before {
            control.persist(state).expect("persist");
        }
        let old = fs::read(control.path()).expect("read");
        control.persist(last).expect("persist");
        let new = fs::read(control.path()).expect("read");
        drop(control);
        if new.len() != old.len() {
            // Outgrew its slot: a whole-file write, old or new after a crash, never torn.
            return Ok(());
        }
        let changed: Vec<usize> = (0..new.len()).filter(|&i| old[i] != new[i]).collect();
        prop_assume!(!changed.is_empty());
        let (first, end) = (changed[0], changed[changed.len() - 1] + 1);
        let landed = first + tear_at.index(end - first + 1);
        let mut torn = old.clone();
        torn[first..landed].copy_from_slice(&new[first..landed]);
        if garbage {
            for (i, byte) in torn[landed..end].iter_mut().enumerate() {
                *byte = (i as u8).wrapping_mul(151).wrapping_add(7);
            }
        }
        fs::write(dir.path().join(CONTROL_FILE_NAME), &torn).expect("write");
        let (loaded, mut control) = FileControl::open(dir.path(), Durability::Fsync).expect("open").expect("exists");
        // Every changed byte is in the slot's header or body (the write covers no padding), which its crc covers.
        let expected = if landed == end { last } else { before.last().expect("one or more") };
        prop_assert_eq!(&loaded, expected);
        let after = state_of_term(2_000, 1);
        control.persist(&after).expect("persist after the crash");
        prop_assert_eq!(FileControl::load(dir.path()).expect("load"), Some(after));
    }
}

/// Every state a crash may leave a creation in (the directory alone, with a temp control file, with the empty
/// first segment alone, with the control file alone) is taken over by the next creation, and the timeline it
/// makes takes appends.
#[test]
fn creation_cut_short_anywhere_is_taken_over() {
    let cfg = config(SMALL_SEGMENT_BYTES);
    let control_bytes = {
        let made = tempfile::tempdir().expect("tempdir");
        let dir = made.path().join("timeline");
        drop(create_timeline(&dir, START, &cfg).expect("create"));
        assert!(
            dir.join(segment_file_name(START)).is_file(),
            "the first segment is made at creation"
        );
        fs::read(dir.join(CONTROL_FILE_NAME)).expect("control")
    };
    type Leave = fn(&Path, &[u8]);
    let cases: [(&str, Leave); 4] = [
        ("empty directory", |_, _| {}),
        ("temp control file", |dir, bytes| {
            fs::write(fsio::temp_path(&dir.join(CONTROL_FILE_NAME)), &bytes[..bytes.len() / 2]).expect("write")
        }),
        ("empty first segment", |dir, _| {
            fs::write(dir.join(segment_file_name(START)), b"").expect("write")
        }),
        ("control file alone", |dir, bytes| {
            fs::write(dir.join(CONTROL_FILE_NAME), bytes).expect("write")
        }),
    ];
    for (what, leave) in cases {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("timeline");
        fs::create_dir(&dir).expect("mkdir");
        leave(&dir, &control_bytes);
        let (state, mut wal, _) = create_timeline(&dir, START, &cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state, ControlState::new(START), "{what}");
        assert!(
            !fsio::temp_path(&dir.join(CONTROL_FILE_NAME)).exists(),
            "{what}: temp file left"
        );
        wal.write(START, &frames(2, 10, 1)).expect("write");
        let end = wal.sync().expect("sync");
        drop(wal);
        let (_, wal, _) = open_timeline(&dir, &cfg).expect("open").expect("exists");
        assert_eq!(wal.flush_lsn(), end, "{what}");
    }
}

/// A counter of `OnDurable` runs, and the hook that counts (failing while `fail` is set).
fn counting_hook() -> (
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<std::sync::atomic::AtomicBool>,
    OnDurable,
) {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (counted, failing) = (Arc::clone(&runs), Arc::clone(&fail));
    let hook: OnDurable = Box::new(move || {
        if failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Io {
                path: "the log".to_owned(),
                source: std::io::Error::other("injected"),
            });
        }
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    });
    (runs, fail, hook)
}

fn runs(counter: &std::sync::atomic::AtomicUsize) -> usize {
    counter.load(std::sync::atomic::Ordering::SeqCst)
}

/// `create_timeline_deferred` makes no file (not even the tenant's directory); the first persist makes the
/// directories, the empty first segment and the control file, makes them durable and runs the hook once; the
/// WAL then writes into the segment made, and its first sync has nothing left to make durable. Reopening finds
/// the timeline as persisted, without running the hook.
#[test]
fn a_deferred_creation_makes_no_file_until_its_first_vote() {
    let cfg = config(SMALL_SEGMENT_BYTES);
    let root = tempfile::tempdir().expect("tempdir");
    let tenant = root.path().join("tenant");
    let dir = tenant.join("timeline");
    let (count, _, hook) = counting_hook();
    let (state, mut wal, mut control) = create_timeline_deferred(&dir, START, &cfg, hook).expect("create");
    assert_eq!(state, ControlState::new(START));
    assert!(!tenant.exists(), "no directory at creation");
    let shared = Arc::clone(
        control
            .deferred
            .as_ref()
            .expect("the control store makes the directory"),
    );
    assert_eq!(shared.state(), Deferred::Absent);
    assert!(wal.deferred.is_some(), "the WAL store shares it");
    assert_eq!(wal.sync().expect("a sync before any write"), START);
    assert!(
        !tenant.exists() && runs(&count) == 0,
        "a sync with nothing written makes nothing"
    );
    let mut voted = state.clone();
    voted.term = 1;
    control.persist(&voted).expect("persist");
    assert!(dir.join(CONTROL_FILE_NAME).is_file());
    assert!(
        dir.join(segment_file_name(START)).is_file(),
        "the first segment is made with the directory"
    );
    assert_eq!(shared.state(), Deferred::Durable);
    assert_eq!(runs(&count), 1, "the hook ran once the directory was durable");
    assert!(control.deferred.is_none());
    wal.write(START, &frames(2, 10, 1)).expect("write");
    let end = wal.sync().expect("sync");
    assert!(wal.deferred.is_none(), "nothing left for the WAL to make durable");
    voted.term = 2;
    control.persist(&voted).expect("persist again");
    assert_eq!(runs(&count), 1, "the hook runs once");
    drop((wal, control));
    let (_, _, hook) = counting_hook();
    let (again, wal, control) = create_timeline_deferred(&dir, START, &cfg, hook).expect("open");
    assert_eq!(again, voted, "an existing timeline is opened");
    assert_eq!(wal.flush_lsn(), end);
    assert!(
        wal.deferred.is_none() && control.deferred.is_none(),
        "an opened timeline has nothing deferred"
    );
}

/// A deferred timeline whose WAL writes first: the write makes the directory and segment, the sync makes them
/// durable and runs the hook, and the control file's first persist then only writes itself. A failing hook
/// fails the write that made the directory durable (the store is poisoned), and the directory stays made.
#[test]
fn a_deferred_directory_made_by_the_wal_is_durable_at_its_sync_and_a_failing_hook_fails_it() {
    let cfg = config(SMALL_SEGMENT_BYTES);
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("tenant").join("timeline");
    let (count, _, hook) = counting_hook();
    let (state, mut wal, mut control) = create_timeline_deferred(&dir, START, &cfg, hook).expect("create");
    let shared = Arc::clone(wal.deferred.as_ref().expect("deferred"));
    wal.write(START, &frames(3, 10, 2)).expect("write");
    assert!(dir.join(segment_file_name(START)).is_file());
    assert!(
        matches!(shared.state(), Deferred::Made(ref dirs) if dirs.len() == 3),
        "{:?}",
        shared.state()
    );
    assert_eq!(runs(&count), 0);
    let end = wal.sync().expect("sync");
    assert_eq!(shared.state(), Deferred::Durable);
    assert_eq!(runs(&count), 1);
    control.persist(&state).expect("persist");
    assert_eq!(runs(&count), 1);
    drop((wal, control));
    assert_eq!(
        open_timeline(&dir, &cfg).expect("open").expect("exists").1.flush_lsn(),
        end
    );

    let dir = root.path().join("tenant").join("failing");
    let (count, fail, hook) = counting_hook();
    fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let (state, _wal, mut control) = create_timeline_deferred(&dir, START, &cfg, hook).expect("create");
    let shared = Arc::clone(control.deferred.as_ref().expect("deferred"));
    control.persist(&state).expect_err("the hook failed");
    assert!(
        matches!(shared.state(), Deferred::Made(ref dirs) if dirs.len() == 2),
        "{:?}",
        shared.state()
    );
    assert!(matches!(control.persist(&state), Err(StoreError::Poisoned)));
    assert_eq!(runs(&count), 0);
}

/// A directory without a control file (a first write cut short, or a creation of an older version) is taken
/// over: opening it removes a stray temp file; the first write makes it durable and runs the hook.
#[test]
fn a_deferred_creation_takes_over_the_leftovers_of_a_first_write_cut_short() {
    let cfg = config(SMALL_SEGMENT_BYTES);
    let root = tempfile::tempdir().expect("tempdir");
    for leave in ["", "segment", "temp"] {
        let dir = root.path().join(format!("left-{leave}"));
        fs::create_dir(&dir).expect("mkdir");
        match leave {
            "segment" => fs::write(dir.join(segment_file_name(START)), b"").expect("segment"),
            "temp" => fs::write(fsio::temp_path(&dir.join(CONTROL_FILE_NAME)), b"torn").expect("temp"),
            _ => {}
        }
        let (count, _, hook) = counting_hook();
        let (state, mut wal, _) = create_timeline_deferred(&dir, START, &cfg, hook).expect("take over");
        assert_eq!(state, ControlState::new(START), "{leave}");
        assert!(!fsio::temp_path(&dir.join(CONTROL_FILE_NAME)).exists(), "{leave}");
        assert!(
            matches!(wal.deferred.as_ref().expect("deferred").state(), Deferred::Made(_)),
            "{leave}"
        );
        wal.write(START, &frames(1, 10, 2)).expect("write");
        wal.sync().expect("sync");
        assert_eq!(runs(&count), 1, "{leave}");
    }
    // WAL past the start without a control file is not a leftover of a creation.
    let dir = root.path().join("wal");
    let (_, mut wal, _) = create_timeline(&dir, START, &cfg).expect("create");
    wal.write(START, &frames(2, 10, 3)).expect("write");
    wal.sync().expect("sync");
    fs::remove_file(dir.join(CONTROL_FILE_NAME)).expect("remove control");
    let (_, _, hook) = counting_hook();
    let refused = create_timeline_deferred(&dir, START, &cfg, hook).expect_err("refused");
    assert!(matches!(refused, StoreError::Corrupt { .. }), "{refused}");
}

#[test]
fn create_and_open_timeline() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("tenant").join("timeline");
    let cfg = config(SMALL_SEGMENT_BYTES);
    assert!(open_timeline(&dir, &cfg).expect("open").is_none());
    let (state, mut wal, mut control) = create_timeline(&dir, START, &cfg).expect("create");
    assert_eq!(state, ControlState::new(START));
    assert_eq!(wal.flush_lsn(), START);
    wal.write(START, &frames(3, 10, 1)).expect("write");
    let end = wal.sync().expect("sync");
    let mut persisted = state.clone();
    persisted.term = 3;
    control.persist(&persisted).expect("persist");
    drop((wal, control));
    // Idempotent with the same start LSN: the existing timeline.
    let (again, wal, _) = create_timeline(&dir, START, &cfg).expect("create again");
    assert_eq!(again, persisted);
    assert_eq!(wal.flush_lsn(), end);
    drop(wal);
    assert!(matches!(
        create_timeline(&dir, Lsn(0x200), &cfg),
        Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists
    ));
    let (state, wal, _) = open_timeline(&dir, &cfg).expect("open").expect("exists");
    assert_eq!(state, persisted);
    assert_eq!(wal.flush_lsn(), end);
    drop(wal);
    // Segments without a control file are not silently adopted.
    fs::remove_file(dir.join(CONTROL_FILE_NAME)).expect("remove");
    assert!(matches!(
        create_timeline(&dir, START, &cfg),
        Err(StoreError::Corrupt { .. })
    ));
}

/// `count` encoded WAL records, each a 10-byte delta of `fill`.
fn record_frames(count: usize, fill: u8) -> Bytes {
    let mut out = Vec::new();
    for i in 0..count {
        let record = cambium_types::WalRecord {
            commit_ts_us: i as u64,
            db_size_pages: 1,
            entries: vec![(
                cambium_types::Key::page(0),
                cambium_types::Value::Delta(vec![cambium_types::Patch {
                    offset: 0,
                    data: Bytes::from(vec![fill; 10]),
                }]),
            )],
        };
        record.encode(&mut out).expect("encodes");
    }
    Bytes::from(out)
}

/// An acceptor over the file stores refuses a read that starts inside a frame (moved here from the protocol
/// core's unit tests, which have no file store).
#[test]
fn a_read_inside_a_frame_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = FileStoreConfig {
        segment_size_bytes: 4096,
        durability: cambium_types::Durability::Fsync,
    };
    let (control, wal, store) = create_timeline(dir.path(), START, &config).expect("create");
    let mut a = Acceptor::new(control, wal, store).expect("new");
    a.vote(VoteRequest { term: 1 }).expect("vote");
    a.elected(ElectedRequest {
        term: 1,
        history: TermHistory(vec![TermSwitch { term: 1, lsn: START }]),
        start_streaming_at: START,
    })
    .expect("elected");
    let data = record_frames(3, 9);
    a.append(&AppendRequest {
        term: 1,
        begin_lsn: START,
        data: data.clone(),
        commit_lsn: START,
    })
    .expect("append");
    a.sync().expect("sync");
    for offset in [1u64, 5, 8, 13, data.len() as u64 - 1] {
        let result = a.read_wal_in_term(1, Lsn(START.0 + offset), 1 << 20);
        assert!(result.is_err(), "a read at +{offset}, inside a frame, must fail");
    }
    assert_eq!(a.read_wal_in_term(1, START, 1 << 20).expect("aligned read"), data);
}

#[test]
fn acceptor_over_files_survives_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("timeline");
    let cfg = config(SMALL_SEGMENT_BYTES);
    let (state, wal, control) = create_timeline(&dir, START, &cfg).expect("create");
    let mut acceptor = Acceptor::new(state, wal, control).expect("acceptor");
    acceptor.vote(VoteRequest { term: 1 }).expect("vote");
    acceptor
        .elected(ElectedRequest {
            term: 1,
            history: TermHistory(vec![TermSwitch { term: 1, lsn: START }]),
            start_streaming_at: START,
        })
        .expect("elected");
    let data = Bytes::from(frames(50, 300, 1));
    let end = Lsn(START.0 + data.len() as u64);
    acceptor
        .append(&AppendRequest {
            term: 1,
            begin_lsn: START,
            data: data.clone(),
            commit_lsn: end,
        })
        .expect("append");
    let response = acceptor.sync().expect("sync");
    assert_eq!(response.flush_lsn, end);
    let control = acceptor.control().clone();
    drop(acceptor);
    let (state, wal, store) = open_timeline(&dir, &cfg).expect("open").expect("exists");
    assert_eq!(state.term, control.term);
    assert_eq!(state.history, control.history);
    let acceptor = Acceptor::new(state, wal, store).expect("acceptor");
    assert_eq!(acceptor.state().flush_lsn, end);
    // The commit LSN is persisted lazily; the WAL itself is all there.
    assert!(acceptor.wal().read(START, end, usize::MAX).expect("read") == data);
}

#[derive(Clone, Debug)]
enum Op {
    /// Frames with these body sizes.
    Write(Vec<usize>),
    Sync,
    /// At a synced frame boundary at or above the oldest LSN.
    Truncate(prop::sample::Index),
    RemoveBelow(prop::sample::Index),
    /// A clean restart of the process: unsynced bytes are in the page cache and may survive.
    Reopen,
    /// From and to frame boundaries, with a byte budget.
    Read(prop::sample::Index, prop::sample::Index, usize),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => prop::collection::vec(1usize..700, 1..6).prop_map(Op::Write),
        3 => Just(Op::Sync),
        1 => any::<prop::sample::Index>().prop_map(Op::Truncate),
        1 => any::<prop::sample::Index>().prop_map(Op::RemoveBelow),
        1 => Just(Op::Reopen),
        2 => (any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1usize..3000)
            .prop_map(|(a, b, max)| Op::Read(a, b, max)),
    ]
}

fn model_cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(model_cases()))]

    #[test]
    fn matches_the_memory_model(ops in prop::collection::vec(arb_op(), 1..40), segment_size_bytes in 200u64..3000) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = config(segment_size_bytes);
        let mut wal = FileWal::open(dir.path(), START, &cfg).expect("open");
        let mut model = MemWal::new(START);
        // Every frame boundary of the written WAL, ascending.
        let mut bounds = vec![START];
        let mut seed = 0u64;
        for op in ops {
            match op {
                Op::Write(sizes) => {
                    let mut data = Vec::new();
                    for size in sizes {
                        seed += 1;
                        data.extend_from_slice(&frame(size, seed));
                        bounds.push(Lsn(START.0 + (model.write_lsn().0 - START.0) + data.len() as u64));
                    }
                    let lsn = model.write_lsn();
                    wal.write(lsn, &data).expect("write");
                    model.write(lsn, &data).expect("write");
                }
                Op::Sync => {
                    prop_assert_eq!(wal.sync().expect("sync"), model.sync().expect("sync"));
                }
                Op::Truncate(index) => {
                    wal.sync().expect("sync");
                    model.sync().expect("sync");
                    let candidates: Vec<Lsn> =
                        bounds.iter().copied().filter(|&b| b >= wal.oldest_lsn()).collect();
                    let lsn = *index.get(&candidates);
                    wal.truncate(lsn).expect("truncate");
                    model.truncate(lsn).expect("truncate");
                    bounds.retain(|&b| b <= lsn);
                }
                Op::RemoveBelow(index) => {
                    let candidates: Vec<Lsn> = bounds
                        .iter()
                        .copied()
                        .filter(|&b| b >= wal.oldest_lsn() && b <= wal.flush_lsn())
                        .collect();
                    let lsn = *index.get(&candidates);
                    let before = wal.oldest_lsn();
                    wal.remove_below(lsn).expect("remove_below");
                    prop_assert!(wal.oldest_lsn() >= before);
                    prop_assert!(wal.oldest_lsn() <= lsn.max(before));
                }
                Op::Reopen => {
                    let oldest = wal.oldest_lsn();
                    let synced = model.flush_lsn();
                    drop(wal);
                    wal = FileWal::open(dir.path(), START, &cfg).expect("reopen");
                    prop_assert!(wal.flush_lsn() >= synced);
                    prop_assert_eq!(wal.oldest_lsn(), oldest);
                    let kept = (wal.flush_lsn().0 - synced.0) as usize;
                    prop_assert!(kept <= model.pending_bytes());
                    model.crash(kept);
                    bounds.retain(|&b| b <= model.write_lsn());
                }
                Op::Read(a, b, max_bytes) => {
                    let candidates: Vec<Lsn> = bounds
                        .iter()
                        .copied()
                        .filter(|&b| b >= wal.oldest_lsn() && b <= wal.flush_lsn())
                        .collect();
                    let (a, b) = (*a.get(&candidates), *b.get(&candidates));
                    let (from, to) = (a.min(b), a.max(b));
                    let got = wal.read(from, to, max_bytes).expect("read");
                    let want = model.read(from, to, max_bytes).expect("read");
                    prop_assert!(
                        got == want,
                        "read({}, {}, {}): {} bytes, the model {}", from, to, max_bytes, got.len(), want.len()
                    );
                }
            }
            prop_assert_eq!(wal.flush_lsn(), model.flush_lsn());
            prop_assert_eq!(wal.write_lsn(), model.write_lsn());
        }
        wal.sync().expect("sync");
        model.sync().expect("sync");
        let oldest = wal.oldest_lsn();
        let expected = model.read(oldest, Lsn::MAX, usize::MAX).expect("read");
        prop_assert!(read_all(&wal, oldest, 1500) == expected, "the WAL differs from the model");
        drop(wal);
        let wal = FileWal::open(dir.path(), START, &cfg).expect("reopen");
        prop_assert_eq!(wal.flush_lsn(), model.flush_lsn());
        prop_assert!(read_all(&wal, oldest, usize::MAX) == expected, "the reopened WAL differs from the model");
    }
}
