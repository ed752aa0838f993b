//! A timeline creation cut by a crash at each of its steps, and the node reopened (`SafekeeperNode` in process).
//!
//! A creation makes no file: it appends one record to the node's creation log (`timelines.log`) and
//! fdatasyncs it, the commit point. The timeline's first write (its first vote) makes the tenant directory, the
//! timeline directory and its empty first segment, makes them durable, then logs a materialization record. A
//! crash (here: the files a crash may leave, made by hand, since a lost directory entry or a torn append cannot
//! be had from a live process) leaves either no timeline, whatever directories an older creation left (the next
//! creation takes them over), or the whole timeline in its initial state: term 0, no WAL, its start LSN,
//! whichever of its unsynced files the disk kept. A materialized timeline whose directory is gone altogether is
//! a lost copy, never made again empty (it may have voted); one that never wrote has no directory to lose. A
//! deletion appends its record before its directory goes, so no deleted timeline comes back from the log. Every
//! case ends with the timeline voting and taking WAL, and a second reopen keeping what it acknowledged.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use cambium_types::{Durability, Key, Lsn, Patch, TenantId, TimelineId, Value, WalRecord};
use safekeeper::filestore::{segment_file_name, FileStoreConfig, CONTROL_FILE_NAME};
use safekeeper::node::{logged_timelines, NodeConfig, NodeError, SafekeeperNode, CREATION_LOG_FILE_NAME};

const START: Lsn = Lsn(0x100);
const TENANT: TenantId = TenantId(0xabc);
const TIMELINE: TimelineId = TimelineId(0x123);
const KEY: (TenantId, TimelineId) = (TENANT, TIMELINE);

fn open_node(dir: &Path) -> Result<SafekeeperNode, NodeError> {
    SafekeeperNode::open(NodeConfig {
        node_id: 1,
        data_dir: dir.to_path_buf(),
        store: FileStoreConfig {
            segment_size_bytes: 4096,
            durability: Durability::Fsync,
        },
    })
}

fn timeline_dir(data: &Path) -> PathBuf {
    data.join(TENANT.to_string()).join(TIMELINE.to_string())
}

fn log_path(data: &Path) -> PathBuf {
    data.join(CREATION_LOG_FILE_NAME)
}

/// The timeline is there in its initial state: start LSN, term 0, nothing flushed past the start.
fn assert_initial(node: &SafekeeperNode, what: &str) {
    let timeline = node.timeline(KEY).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(timeline.start_lsn(), START, "{what}");
    let state = timeline.run_blocking(|acceptor| acceptor.state()).expect("state");
    assert_eq!(state.term, 0, "{what}");
    assert_eq!(state.flush_lsn, START, "{what}");
}

fn assert_absent(node: &SafekeeperNode, what: &str) {
    assert!(
        matches!(node.timeline(KEY), Err(NodeError::NotFound { .. })),
        "{what}: {:?}",
        node.timeline(KEY).map(|t| t.start_lsn())
    );
    assert!(node.timeline_keys().is_empty(), "{what}");
}

/// Votes for term 1, is elected, appends one frame and syncs it; returns the flush LSN.
fn vote_elect_append(node: &SafekeeperNode, what: &str) -> Lsn {
    let timeline = node.timeline(KEY).unwrap_or_else(|e| panic!("{what}: {e}"));
    common::vote_elect_append(&timeline, START, frame(), what)
}

/// After `vote_elect_append` and a reopen: term 1 and the WAL kept.
fn assert_kept(data: &Path, flushed: Lsn, what: &str) {
    let node = open_node(data).expect("reopen");
    let timeline = node.timeline(KEY).unwrap_or_else(|e| panic!("{what}: {e}"));
    let state = timeline.run_blocking(|acceptor| acceptor.state()).expect("state");
    assert_eq!(state.term, 1, "{what}");
    assert_eq!(state.flush_lsn, flushed, "{what}");
    assert!(timeline_dir(data).join(CONTROL_FILE_NAME).is_file(), "{what}");
}

/// The creation log's bytes right after one creation record, and the bytes before it.
fn log_before_and_after_one_creation() -> (Vec<u8>, Vec<u8>) {
    let root = tempfile::tempdir().expect("tempdir");
    let node = open_node(root.path()).expect("open");
    let before = fs::read(log_path(root.path())).expect("log");
    node.create_timeline_blocking(KEY, START).expect("create");
    drop(node);
    // Reopened: the zeros the append wrote ahead of the records cut (a torn record may be any prefix of the
    // record, followed by zeros or not).
    drop(open_node(root.path()).expect("reopen"));
    let after = fs::read(log_path(root.path())).expect("log");
    assert!(after.len() > before.len(), "a creation appends to the log");
    (before, after)
}

/// What the disk may hold after a crash part way through one creation, before its record is durable: any
/// prefix of the unsynced steps, and any torn part of the record.
#[test]
fn a_creation_cut_before_its_record_leaves_no_timeline_and_is_taken_over() {
    let (before, after) = log_before_and_after_one_creation();
    type Leave = fn(&Path);
    let steps: [(&str, Leave); 4] = [
        ("nothing", |_| {}),
        ("the tenant directory", |data| {
            fs::create_dir(data.join(TENANT.to_string())).expect("mkdir")
        }),
        ("the timeline directory, empty", |data| {
            fs::create_dir_all(timeline_dir(data)).expect("mkdir")
        }),
        ("the timeline directory and its empty first segment", |data| {
            fs::create_dir_all(timeline_dir(data)).expect("mkdir");
            fs::write(timeline_dir(data).join(segment_file_name(START)), b"").expect("segment");
        }),
    ];
    // The record absent, or any torn prefix of it.
    let logs: Vec<Vec<u8>> = (before.len()..after.len()).map(|n| after[..n].to_vec()).collect();
    for (what, leave) in steps {
        for log in &logs {
            let what = format!("{what}, log of {} bytes", log.len());
            let root = tempfile::tempdir().expect("tempdir");
            drop(open_node(root.path()).expect("open"));
            leave(root.path());
            fs::write(log_path(root.path()), log).expect("log");
            let node = open_node(root.path()).expect("reopen");
            assert_absent(&node, &what);
            assert_eq!(
                fs::read(log_path(root.path())).expect("log"),
                before,
                "{what}: torn tail cut"
            );
            // The next creation takes the leftovers over.
            node.create_timeline_blocking(KEY, START)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_initial(&node, &what);
            let flushed = vote_elect_append(&node, &what);
            drop(node);
            assert_kept(root.path(), flushed, &what);
        }
    }
}

/// What the disk may hold after a crash once the record is durable (the creation may or may not have been
/// acknowledged) and before the timeline's first write is: nothing but the record, or that write cut short
/// (its directory, with or without its unsynced segment, perhaps a control temp file). The timeline is there,
/// whole, in its initial state.
#[test]
fn a_creation_cut_after_its_record_leaves_the_whole_timeline() {
    type Leave = fn(&Path);
    let cases: [(&str, Leave); 4] = [
        ("no file made", |_| {}),
        ("a first write's directory and segment", |data| {
            fs::create_dir_all(timeline_dir(data)).expect("mkdir");
            fs::write(timeline_dir(data).join(segment_file_name(START)), b"").expect("segment");
        }),
        ("a first write's directory without its segment", |data| {
            fs::create_dir_all(timeline_dir(data)).expect("mkdir");
        }),
        ("a first control file write cut short", |data| {
            fs::create_dir_all(timeline_dir(data)).expect("mkdir");
            fs::write(timeline_dir(data).join("control.tmp"), b"CMBSKCTL torn").expect("tmp")
        }),
    ];
    for (what, leave) in cases {
        let root = tempfile::tempdir().expect("tempdir");
        let node = open_node(root.path()).expect("open");
        node.create_timeline_blocking(KEY, START).expect("create");
        assert!(
            !root.path().join(TENANT.to_string()).exists(),
            "a creation makes no file"
        );
        drop(node);
        leave(root.path());
        let node = open_node(root.path()).expect("reopen");
        assert_initial(&node, what);
        assert!(
            !timeline_dir(root.path()).join("control.tmp").exists(),
            "{what}: temp file removed"
        );
        // Idempotent: a second creation with the same start LSN is the same timeline; another is refused.
        node.create_timeline_blocking(KEY, START).expect("create again");
        assert!(matches!(
            node.create_timeline_blocking(KEY, Lsn(0x200)),
            Err(NodeError::AlreadyExists { .. })
        ));
        let flushed = vote_elect_append(&node, what);
        drop(node);
        assert_kept(root.path(), flushed, what);
    }
}

/// A materialized timeline (it wrote: its directory was made durable and logged) whose directory is gone
/// (removed, or its disk lost it) is a lost copy: it may have voted, so it is not made again empty (it would have
/// forgotten its promise) but left to a pull; the log still knows its start LSN, so a `CreateTimeline` of the
/// same start makes it again, and one of another start is refused. A timeline that never wrote has no directory
/// to lose: it is there, in its initial state, with no file.
#[test]
fn a_logged_timeline_whose_directory_is_lost_is_not_made_again_empty() {
    type Leave = fn(&Path);
    let cases: [(&str, Leave); 2] = [
        ("the timeline directory lost", |data| {
            fs::remove_dir_all(timeline_dir(data)).expect("rm")
        }),
        ("the tenant directory lost", |data| {
            fs::remove_dir_all(data.join(TENANT.to_string())).expect("rm")
        }),
    ];
    for (what, leave) in cases {
        let root = tempfile::tempdir().expect("tempdir");
        let node = open_node(root.path()).expect("open");
        node.create_timeline_blocking(KEY, START).expect("create");
        vote_elect_append(&node, what);
        drop(node);
        leave(root.path());
        let node = open_node(root.path()).expect("reopen");
        assert_absent(&node, what);
        node.create_timeline_blocking(KEY, START)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_initial(&node, what);
    }
    let root = tempfile::tempdir().expect("tempdir");
    let node = open_node(root.path()).expect("open");
    node.create_timeline_blocking(KEY, START).expect("create");
    drop(node);
    let node = open_node(root.path()).expect("reopen");
    assert_initial(&node, "never wrote");
    assert!(!root.path().join(TENANT.to_string()).exists(), "still no file");
}

/// A first write whose directory became durable and whose materialization record a crash cut off: the
/// directory, with its control file, is loaded as it is, and the open logs the materialization, so a later loss
/// of the directory still reads as a lost copy.
#[test]
fn a_first_write_cut_before_its_materialization_record_is_logged_at_open() {
    let root = tempfile::tempdir().expect("tempdir");
    let node = open_node(root.path()).expect("open");
    node.create_timeline_blocking(KEY, START).expect("create");
    let created_only = fs::read(log_path(root.path())).expect("log");
    let materialized = |data: &Path| logged_timelines(data).expect("read the log").get(&KEY).copied();
    assert_eq!(materialized(root.path()), Some(false));
    let flushed = vote_elect_append(&node, "voted");
    assert_eq!(
        materialized(root.path()),
        Some(true),
        "the first write logs its materialization"
    );
    drop(node);
    // The crash: the directory durable, the record not.
    fs::write(log_path(root.path()), &created_only).expect("log");
    assert_eq!(materialized(root.path()), Some(false), "the crash cut the record");
    assert_kept(root.path(), flushed, "record cut off");
    assert_eq!(materialized(root.path()), Some(true), "logged at open");
    fs::remove_dir_all(timeline_dir(root.path())).expect("rm");
    let node = open_node(root.path()).expect("reopen");
    assert_absent(&node, "the directory lost after the open logged it");
}

/// A log of the version before materialization records: every creation then made its directory durable before
/// it was acknowledged, so each logged timeline is read as materialized (its directory lost: a lost copy), and
/// the log is rewritten in the current version at open.
#[test]
fn a_log_of_the_version_before_materialization_reads_every_timeline_materialized() {
    let (_, mut after) = log_before_and_after_one_creation();
    after[8..12].copy_from_slice(&1u32.to_le_bytes());
    for with_dir in [false, true] {
        let what = format!("with its directory: {with_dir}");
        let root = tempfile::tempdir().expect("tempdir");
        drop(open_node(root.path()).expect("open"));
        fs::write(log_path(root.path()), &after).expect("log");
        if with_dir {
            fs::create_dir_all(timeline_dir(root.path())).expect("mkdir");
            fs::write(timeline_dir(root.path()).join(segment_file_name(START)), b"").expect("segment");
        }
        let node = open_node(root.path()).expect("reopen");
        if with_dir {
            assert_initial(&node, &what);
        } else {
            assert_absent(&node, &what);
        }
        let log = fs::read(log_path(root.path())).expect("log");
        assert_eq!(log[8..12], 2u32.to_le_bytes(), "{what}: rewritten");
        drop(node);
        // Still materialized after the rewrite: with its directory gone it stays a lost copy.
        if with_dir {
            fs::remove_dir_all(timeline_dir(root.path())).expect("rm");
        }
        assert_absent(&open_node(root.path()).expect("reopen"), &what);
    }
}

/// A deletion's record goes first: cut after it, the directory left behind is a timeline only if it has a
/// control file (the deletion was not acknowledged; a retry deletes it); without one it is a leftover, and a
/// creation afterwards starts afresh.
#[test]
fn a_deletion_cut_after_its_record_never_brings_the_timeline_back() {
    for voted in [false, true] {
        let what = if voted { "voted" } else { "in its initial state" };
        let root = tempfile::tempdir().expect("tempdir");
        let backup = tempfile::tempdir().expect("tempdir");
        let node = open_node(root.path()).expect("open");
        node.create_timeline_blocking(KEY, START).expect("create");
        if voted {
            vote_elect_append(&node, what);
        } else {
            // What a first write cut short leaves.
            fs::create_dir_all(timeline_dir(root.path())).expect("mkdir");
            fs::write(timeline_dir(root.path()).join(segment_file_name(START)), b"").expect("segment");
        }
        copy_dir(&timeline_dir(root.path()), backup.path());
        node.delete_timeline_blocking(KEY).expect("delete");
        drop(node);
        // The crash: the record is durable, the directory's rename is not.
        copy_dir(backup.path(), &timeline_dir(root.path()));
        let node = open_node(root.path()).expect("reopen");
        if voted {
            let timeline = node.timeline(KEY).expect("a timeline with a control file stays");
            assert_eq!(timeline.run_blocking(|a| a.state()).expect("state").term, 1);
            node.delete_timeline_blocking(KEY).expect("delete again");
        } else {
            assert_absent(&node, what);
        }
        drop(node);
        let node = open_node(root.path()).expect("reopen");
        assert_absent(&node, what);
        node.create_timeline_blocking(KEY, START).expect("create afresh");
        assert_initial(&node, what);
        drop(node);
        let node = open_node(root.path()).expect("reopen");
        assert_initial(&node, what);
    }
}

/// A tenant's deletion logs the deletion of each of its timelines: none comes back at open, even those
/// that never wrote a control file, and another tenant's stay.
#[test]
fn a_deleted_tenant_stays_deleted() {
    let root = tempfile::tempdir().expect("tempdir");
    let other = (TenantId(0xdef), TIMELINE);
    let node = open_node(root.path()).expect("open");
    node.create_timeline_blocking(KEY, START).expect("create");
    node.create_timeline_blocking((TENANT, TimelineId(0x456)), START)
        .expect("create");
    node.create_timeline_blocking(other, START).expect("create");
    node.delete_tenant_blocking(TENANT).expect("delete");
    drop(node);
    let node = open_node(root.path()).expect("reopen");
    assert_eq!(node.timeline_keys(), vec![other]);
}

fn frame() -> Bytes {
    WalRecord {
        commit_ts_us: 1,
        db_size_pages: 1,
        entries: vec![(
            Key::page(0),
            Value::Delta(vec![Patch {
                offset: 0,
                data: Bytes::from(vec![7; 40]),
            }]),
        )],
    }
    .to_frame()
    .expect("encodes")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}
