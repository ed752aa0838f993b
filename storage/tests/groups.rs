//! Transactions in groups of frames (parts, then a commit) against a simple model.
//!
//! A proptest generates a WAL of transactions, each a commit alone or a group of parts and a commit, some groups
//! abandoned (their parts followed by another transaction, as when a writer dies), with pages repeated across
//! parts; and a schedule that feeds the WAL a few frames at a time, flushes, and restarts the tenant (the pending
//! group is lost and the WAL is fed again from `wal_end_lsn`, which must be a frame boundary at or before any
//! group cut short). The pending group's memory bound is small, so groups spill to their file. After every step:
//! `last_record_lsn` is never inside a group, and reads at every commit's end LSN, and at LSNs inside groups,
//! equal the model's pages (a group is visible at its commit's end and nowhere before); `lsn_for_timestamp` gives
//! commit ends only.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use storage::wal::WalPart;
use storage::{Key, Lsn, TimelineConfig, TimelineId};

/// One transaction: its parts' writes, its commit's writes, and whether the commit comes.
#[derive(Clone, Debug)]
struct Txn {
    parts: Vec<Vec<(u32, u8)>>,
    commit: Vec<(u32, u8)>,
    committed: bool,
}

#[derive(Clone, Debug)]
enum Step {
    Feed(usize),
    Flush,
    Restart,
}

fn writes() -> impl Strategy<Value = Vec<(u32, u8)>> {
    proptest::collection::vec((0u32..6, 1u8..255), 0..4)
}

fn txns() -> impl Strategy<Value = Vec<Txn>> {
    let txn = (
        proptest::collection::vec(writes(), 0..4),
        writes(),
        prop::bool::weighted(0.8),
    )
        .prop_map(|(parts, commit, committed)| Txn {
            parts,
            commit,
            committed,
        });
    proptest::collection::vec(txn, 1..12)
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => (1usize..4).prop_map(Step::Feed),
        1 => Just(Step::Flush),
        1 => Just(Step::Restart),
    ];
    proptest::collection::vec(step, 1..30)
}

/// The WAL: frames with their start LSNs; and each commit's end LSN, timestamp and the pages after it.
struct Wal {
    frames: Vec<(Lsn, Bytes)>,
    commits: Vec<(Lsn, u64, BTreeMap<u32, u8>)>,
    /// (LSN inside a group, the pages before that group)
    inside: Vec<(Lsn, BTreeMap<u32, u8>)>,
}

fn build_wal(txns: &[Txn]) -> Wal {
    let mut lsn = START;
    let mut pages = BTreeMap::new();
    let mut wal = Wal {
        frames: Vec::new(),
        commits: Vec::new(),
        inside: Vec::new(),
    };
    for (index, txn) in txns.iter().enumerate() {
        let group_lsn = lsn;
        let before = pages.clone();
        let mut after = pages.clone();
        for writes in &txn.parts {
            after.extend(writes.iter().copied());
            let part = WalPart {
                group_lsn,
                entries: writes
                    .iter()
                    .map(|&(block, byte)| (Key::page(block), image(byte)))
                    .collect(),
            };
            let frame = part.to_frame().expect("part encodes");
            wal.frames.push((lsn, frame.clone()));
            lsn = Lsn(lsn.0 + frame.len() as u64);
        }
        if !txn.committed {
            continue;
        }
        for &(block, byte) in &txn.commit {
            after.insert(block, byte);
        }
        let size = after.keys().next_back().map_or(0, |b| b + 1);
        let ts = 1_000 + index as u64;
        let record = record(ts, size, txn.commit.iter().map(|&(b, v)| (b, image(v))).collect());
        let frame = if txn.parts.is_empty() {
            record.to_frame().expect("record encodes")
        } else {
            record.to_group_commit_frame(group_lsn).expect("commit encodes")
        };
        wal.frames.push((lsn, frame.clone()));
        lsn = Lsn(lsn.0 + frame.len() as u64);
        if lsn.0 - group_lsn.0 > 1 {
            wal.inside.push((Lsn(lsn.0 - 1), before.clone()));
            wal.inside.push((Lsn(group_lsn.0 + 1), before));
        }
        pages = after;
        wal.commits.push((lsn, ts, pages.clone()));
    }
    wal
}

fn config() -> TimelineConfig {
    TimelineConfig {
        // Two pages of a group in memory; the rest spills to the group's file.
        group_memory_bytes_max: 2 * (8 + 1 + 4 + 8192),
        delta_run_max: 64,
        durability: storage::Durability::Off,
        ..small_config()
    }
}

/// The model's answer at `lsn`: the pages of the newest commit ending at or before it.
fn expected_at(wal: &Wal, lsn: Lsn) -> BTreeMap<u32, u8> {
    wal.commits
        .iter()
        .rev()
        .find(|(end, _, _)| *end <= lsn)
        .map(|(_, _, pages)| pages.clone())
        .unwrap_or_default()
}

fn check(timeline: &storage::Timeline, wal: &Wal) {
    let last = timeline.last_record_lsn();
    assert!(
        last == START || wal.commits.iter().any(|(end, _, _)| *end == last),
        "last_record_lsn {last} is not a commit's end"
    );
    let commits = wal.commits.iter().map(|(end, _, pages)| (*end, pages));
    // Inside a group: the state before the group.
    let points = commits.chain(wal.inside.iter().map(|(lsn, before)| (*lsn, before)));
    // Readable up to `wal_end_lsn`: among a pending group's parts, the state before the group.
    let readable = timeline.wal_end_lsn();
    assert!(readable >= last, "wal_end_lsn {readable} behind last_record_lsn {last}");
    for (lsn, expected) in points.filter(|(lsn, _)| *lsn <= readable && *lsn > START) {
        assert_eq!(&expected_at(wal, lsn), expected, "model at {lsn}");
        for block in 0..6u32 {
            // A block never written reads as missing, or as zeros inside the database's size.
            let got = timeline
                .get_page(Key::page(block), lsn)
                .ok()
                .map(|page| page[0])
                .filter(|byte| *byte != 0);
            assert_eq!(
                got,
                expected.get(&block).copied(),
                "block {block} at {lsn} (last {last})"
            );
        }
    }
    for (end, ts, _) in wal.commits.iter().filter(|(end, _, _)| *end <= last) {
        let found = timeline.lsn_for_timestamp(*ts).expect("a commit at this time");
        assert_eq!(found.lsn, *end, "lsn_for_timestamp({ts})");
    }
}

fn run(txns: &[Txn], steps: &[Step]) {
    let wal = build_wal(txns);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut tenant = open(dir.path(), config());
    let mut timeline = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut next = 0usize;
    for step in steps.iter().chain(std::iter::once(&Step::Feed(usize::MAX))) {
        match step {
            Step::Feed(count) => {
                let end = next.saturating_add(*count).min(wal.frames.len());
                if next < end {
                    let mut bytes = Vec::new();
                    for (_, frame) in &wal.frames[next..end] {
                        bytes.extend_from_slice(frame);
                    }
                    let start = wal.frames[next].0;
                    assert_eq!(timeline.wal_end_lsn(), start);
                    timeline.ingest_frames(start, &Bytes::from(bytes)).expect("ingest");
                    next = end;
                }
            }
            Step::Flush => timeline.checkpoint().expect("checkpoint"),
            Step::Restart => {
                drop(timeline);
                tenant.close();
                drop(tenant);
                tenant = open(dir.path(), config());
                timeline = tenant.timeline(TimelineId(1)).expect("reloaded");
                let resume = timeline.wal_end_lsn();
                assert_eq!(resume, timeline.last_record_lsn(), "no pending group after a restart");
                next = wal
                    .frames
                    .iter()
                    .position(|(lsn, _)| *lsn == resume)
                    .unwrap_or(wal.frames.len());
                assert!(
                    next == wal.frames.len() || wal.frames[next].0 == resume,
                    "resume point {resume} is a frame boundary"
                );
            }
        }
        check(&timeline, &wal);
    }
    assert_eq!(next, wal.frames.len(), "all fed");
    let last = wal.commits.last().map_or(START, |(end, _, _)| *end);
    assert_eq!(timeline.last_record_lsn(), last, "ends at the last commit");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("tenant dir")
        .flat_map(|entry| entry.ok())
        .filter(|entry| entry.path().is_dir())
        .flat_map(|timeline_dir| std::fs::read_dir(timeline_dir.path()).into_iter().flatten())
        .flat_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("pending-group"))
        .collect();
    // The last transaction may be an abandoned group still pending; otherwise no group file is left.
    if txns.last().is_some_and(|txn| txn.committed) {
        assert!(leftovers.is_empty(), "a pending group's file is left: {leftovers:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn groups_are_visible_at_their_commit_and_nowhere_before(txns in txns(), steps in steps()) {
        run(&txns, &steps);
    }
}

#[test]
fn a_commit_naming_a_group_it_did_not_follow_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), config());
    let timeline = tenant.create_timeline(TimelineId(1), START).expect("create");
    let commit = record(1, 1, vec![(0, image(1))]);
    let frame = commit.to_group_commit_frame(Lsn(START.0 - 50)).expect("encodes");
    let error = timeline.ingest_frames(START, &frame).expect_err("refused");
    assert!(matches!(error, storage::StorageError::GroupMismatch { .. }), "{error}");
    let part = WalPart {
        group_lsn: Lsn(7),
        entries: vec![],
    };
    let error = timeline
        .ingest_frames(START, &part.to_frame().expect("encodes"))
        .expect_err("refused");
    assert!(matches!(error, storage::StorageError::GroupMismatch { .. }), "{error}");
    assert_eq!(timeline.last_record_lsn(), START);
}
