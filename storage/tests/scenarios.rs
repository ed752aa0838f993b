//! Hand-written scenarios for the engine: the read path across in-memory layers, L0, L1 and image layers,
//! branches, GC and restart, each checked against pages computed by hand.

mod common;

use common::*;
use storage::{BranchPoint, Key, Lsn, StorageError, TimelineId, PAGE_SIZE_BYTES};

#[test]
fn reads_see_each_version_through_flush_compaction_and_images() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut lsn = START;
    let mut ends = Vec::new();
    for round in 0u8..12 {
        let entries = if round == 0 {
            vec![(0, image(0xAA)), (1, image(0xBB))]
        } else {
            vec![(0, patch(round as u16, &[round]))]
        };
        lsn = tl
            .ingest_record(lsn, &record(round as u64 * 10, 2, entries))
            .expect("ingest");
        ends.push(lsn);
        if round % 2 == 1 {
            tl.checkpoint().expect("checkpoint");
            tl.compact().expect("compact");
        }
    }
    let expected_at = |round: usize| {
        let mut page = vec![0xAAu8; PAGE_SIZE_BYTES];
        for (r, byte) in page.iter_mut().enumerate().take(round + 1).skip(1) {
            *byte = r as u8;
        }
        page
    };
    for (round, &end) in ends.iter().enumerate() {
        let (uncached, _) = tl.get_page_uncached(Key::page(0), end).expect("read");
        assert_page(&uncached, &expected_at(round), &format!("uncached, round {round}"));
        assert_page(
            &tl.get_page(Key::page(0), end).expect("read"),
            &expected_at(round),
            &format!("round {round}"),
        );
        assert_eq!(tl.get_page(Key::page(1), end).expect("read")[0], 0xBB);
    }
    let kinds: Vec<_> = tl.layer_descs().iter().map(|d| d.kind).collect();
    assert!(kinds.contains(&storage::layer::desc::LayerKind::L1), "{kinds:?}");
    assert!(kinds.contains(&storage::layer::desc::LayerKind::Image), "{kinds:?}");
    // Inside the size a never-written page is zeros; outside it does not exist.
    let zeros = tl.get_page(Key::page(1), ends[0]).expect("read");
    assert_eq!(zeros[0], 0xBB);
    assert!(matches!(
        tl.get_page(Key::page(2), lsn),
        Err(StorageError::PageNotFound { .. })
    ));
    assert!(matches!(
        tl.get_page(Key::page(0), lsn.next()),
        Err(StorageError::LsnAhead { .. })
    ));
    assert!(matches!(
        tl.get_page(Key::page(0), Lsn(1)),
        Err(StorageError::LsnBeforeStart { .. })
    ));
    // Before the first record nothing exists.
    assert!(matches!(
        tl.get_page(Key::page(0), START),
        Err(StorageError::PageNotFound { .. })
    ));

    // Restart: the same pages come back from the files alone.
    let last = tl.last_record_lsn();
    tl.checkpoint().expect("checkpoint");
    drop(tl);
    drop(tenant);
    let tenant = open(dir.path(), small_config());
    let tl = tenant.timeline(TimelineId(1)).expect("reloaded");
    assert_eq!(tl.last_record_lsn(), last);
    for (round, &end) in ends.iter().enumerate() {
        assert_page(
            &tl.get_page(Key::page(0), end).expect("read"),
            &expected_at(round),
            &format!("after restart, round {round} at {end}: {:#?}", tl.layer_descs()),
        );
    }
}

#[test]
fn branch_sees_parent_as_of_branch_point_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let parent = tenant.create_timeline(TimelineId(1), START).expect("create");
    let a = parent
        .ingest_record(START, &record(1, 1, vec![(0, image(1))]))
        .expect("ingest");
    let b = parent
        .ingest_record(a, &record(2, 1, vec![(0, image(2))]))
        .expect("ingest");
    parent.checkpoint().expect("checkpoint");
    let child = tenant
        .branch(TimelineId(2), TimelineId(1), BranchPoint::At(a))
        .expect("branch");
    assert_eq!(child.get_page(Key::page(0), a).expect("read")[0], 1);
    let c = child
        .ingest_record(a, &record(3, 2, vec![(1, image(9))]))
        .expect("ingest on child");
    assert_eq!(child.get_page(Key::page(0), c).expect("read")[0], 1);
    assert_eq!(child.get_page(Key::page(1), c).expect("read")[0], 9);
    assert_eq!(parent.get_page(Key::page(0), b).expect("read")[0], 2);
    assert!(matches!(
        parent.get_page(Key::page(1), b),
        Err(StorageError::PageNotFound { .. })
    ));
    assert!(matches!(
        tenant.branch(TimelineId(3), TimelineId(1), BranchPoint::At(b.next())),
        Err(StorageError::LsnAhead { .. })
    ));
    assert!(matches!(
        tenant.branch(TimelineId(2), TimelineId(1), BranchPoint::Latest),
        Err(StorageError::TimelineExists(_))
    ));
    assert!(matches!(
        tenant.delete_timeline(TimelineId(1)),
        Err(StorageError::HasChildren { .. })
    ));
    // Restart keeps the branch; then delete it.
    drop((parent, child));
    drop(tenant);
    let tenant = open(dir.path(), small_config());
    let child = tenant.timeline(TimelineId(2)).expect("child reloaded");
    assert_eq!(
        child.last_record_lsn(),
        a,
        "child had not flushed, so it stands at its branch point"
    );
    assert_eq!(child.get_page(Key::page(0), a).expect("read")[0], 1);
    drop(child);
    tenant.delete_timeline(TimelineId(2)).expect("delete child");
    tenant.delete_timeline(TimelineId(1)).expect("delete parent");
    drop(tenant);
    let tenant = open(dir.path(), small_config());
    assert!(tenant.timelines().is_empty());
}

#[test]
fn a_hot_pages_deltas_are_cut_by_images_and_a_branchs_read_of_it_is_cached_for_every_branch_at_that_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let parent = tenant.create_timeline(TimelineId(1), START).expect("create");
    // A hot page: one image, then a chain of deltas, as a counter's page gets from a commit loop.
    let mut lsn = parent
        .ingest_record(START, &record(1, 1, vec![(0, image(0))]))
        .expect("ingest");
    let mut expected = vec![0u8; PAGE_SIZE_BYTES];
    let mut history = Vec::new();
    for i in 0..200u16 {
        let byte = (i % 251) as u8 + 1;
        lsn = parent
            .ingest_record(lsn, &record(2, 1, vec![(0, patch(i * 8, &[byte]))]))
            .expect("ingest");
        expected[usize::from(i) * 8] = byte;
        history.push((lsn, expected.clone()));
    }
    // The chain of deltas is cut by images made at ingest: a read gathers far fewer than 200 versions, and
    // every version reads as it was written, in memory and after the flush.
    let (_, stats) = parent.get_page_uncached(Key::page(0), lsn).expect("read");
    assert!(
        stats.versions_read <= 128,
        "{} versions gathered for one read",
        stats.versions_read
    );
    for flushed in [false, true] {
        if flushed {
            parent.checkpoint().expect("checkpoint");
        }
        for (at, page) in history.iter().step_by(7).chain(history.last()) {
            let (read, _) = parent.get_page_uncached(Key::page(0), *at).expect("read");
            assert_page(&read, page, &format!("page 0 at {at}, flushed {flushed}"));
        }
    }
    let point = lsn;
    // After a restart (an empty page cache) the first branch's read reconstructs the parent's page.
    drop(parent);
    drop(tenant);
    let tenant = open(dir.path(), small_config());
    let parent = tenant.timeline(TimelineId(1)).expect("parent reloaded");
    let first = tenant
        .branch(TimelineId(2), TimelineId(1), BranchPoint::At(point))
        .expect("branch");
    assert_page(
        &first.get_page(Key::page(0), point).expect("read"),
        &expected,
        "first branch",
    );
    assert!(
        first.read_amplification_counters().1 > 0,
        "the first branch reconstructed the page"
    );
    // The parent's read at the branch point and a second branch's are cache hits.
    let parent_reads = parent.read_amplification_counters();
    assert_page(
        &parent.get_page(Key::page(0), point).expect("read"),
        &expected,
        "parent",
    );
    assert_eq!(
        parent.read_amplification_counters(),
        parent_reads,
        "the parent's read was a hit"
    );
    let second = tenant
        .branch(TimelineId(3), TimelineId(1), BranchPoint::At(point))
        .expect("branch");
    assert_page(
        &second.get_page(Key::page(0), point).expect("read"),
        &expected,
        "second branch",
    );
    assert_eq!(
        second.read_amplification_counters().1,
        0,
        "no layer visited: the parent's page came from the cache"
    );
    // A branch's own write goes on top of the cached parent page.
    let after = second
        .ingest_record(point, &record(3, 1, vec![(0, patch(4000, &[7]))]))
        .expect("ingest on the branch");
    let mut written = expected.clone();
    written[4000] = 7;
    assert_page(
        &second.get_page(Key::page(0), after).expect("read"),
        &written,
        "the branch's write",
    );
    assert_page(
        &first.get_page(Key::page(0), point).expect("read"),
        &expected,
        "the other branch",
    );
    // The parent moves on: its later version is not the one cached at the branch point.
    let later = parent
        .ingest_record(point, &record(4, 1, vec![(0, patch(0, &[99]))]))
        .expect("ingest");
    let mut newer = expected.clone();
    newer[0] = 99;
    assert_page(
        &parent.get_page(Key::page(0), later).expect("read"),
        &newer,
        "parent after",
    );
    assert_page(
        &parent.get_page(Key::page(0), point).expect("read"),
        &expected,
        "parent at the point",
    );
    let third = tenant
        .branch(TimelineId(4), TimelineId(1), BranchPoint::At(later))
        .expect("branch");
    assert_page(
        &third.get_page(Key::page(0), later).expect("read"),
        &newer,
        "a branch at the later point",
    );
}

#[test]
fn gc_removes_superseded_layers_and_keeps_branch_points_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut lsn = START;
    let mut ends = Vec::new();
    for round in 0u8..20 {
        lsn = tl
            .ingest_record(lsn, &record(round as u64, 1, vec![(0, image(round))]))
            .expect("ingest");
        ends.push(lsn);
        tl.checkpoint().expect("checkpoint");
        tl.compact().expect("compact");
        if round == 5 {
            tenant
                .branch(TimelineId(2), TimelineId(1), BranchPoint::Latest)
                .expect("branch");
        }
    }
    let layers_before = tl.layer_descs().len();
    let outcome = tl.gc(1_000_000).expect("gc");
    assert_eq!(
        outcome.gc_cutoff_lsn, lsn,
        "zero horizon and zero pitr: the cutoff is the last record"
    );
    assert!(outcome.layers_removed > 0, "{outcome:?} of {layers_before}");
    assert_eq!(tl.get_page(Key::page(0), lsn).expect("read")[0], 19);
    assert!(matches!(
        tl.get_page(Key::page(0), ends[10]),
        Err(StorageError::LsnBelowGcCutoff { .. })
    ));
    let child = tenant.timeline(TimelineId(2)).expect("child");
    assert_eq!(child.get_page(Key::page(0), ends[5]).expect("read")[0], 5);
    assert!(matches!(
        tenant.branch(TimelineId(3), TimelineId(1), BranchPoint::At(ends[3])),
        Err(StorageError::LsnBelowGcCutoff { .. })
    ));
    // After a restart the cutoff and the child's data are still right.
    drop((tl, child));
    drop(tenant);
    let tenant = open(dir.path(), small_config());
    let tl = tenant.timeline(TimelineId(1)).expect("reloaded");
    assert_eq!(tl.gc_cutoff_lsn(), lsn);
    assert_eq!(
        tenant
            .timeline(TimelineId(2))
            .expect("child")
            .get_page(Key::page(0), ends[5])
            .expect("read")[0],
        5
    );
}

#[test]
fn lsn_for_timestamp_walks_into_the_ancestor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let parent = tenant.create_timeline(TimelineId(1), START).expect("create");
    let a = parent
        .ingest_record(START, &record(100, 1, vec![(0, image(1))]))
        .expect("ingest");
    let b = parent
        .ingest_record(a, &record(200, 1, vec![(0, image(2))]))
        .expect("ingest");
    parent.checkpoint().expect("checkpoint");
    let c = parent
        .ingest_record(b, &record(300, 1, vec![(0, image(3))]))
        .expect("ingest");
    let child = tenant
        .branch(TimelineId(2), TimelineId(1), BranchPoint::At(b))
        .expect("branch");
    let d = child
        .ingest_record(b, &record(400, 1, vec![(0, image(4))]))
        .expect("ingest");
    assert!(matches!(
        parent.lsn_for_timestamp(99),
        Err(StorageError::TimestampBeforeHistory {
            earliest_us: Some(100),
            ..
        })
    ));
    assert_eq!(parent.lsn_for_timestamp(100).expect("lookup").lsn, a);
    assert_eq!(parent.lsn_for_timestamp(250).expect("lookup").lsn, b);
    assert_eq!(parent.lsn_for_timestamp(1000).expect("lookup").lsn, c);
    let found = child.lsn_for_timestamp(350).expect("lookup");
    assert_eq!(
        (found.timeline_id, found.lsn),
        (TimelineId(1), b),
        "below the child's first commit: the parent at or before the branch point"
    );
    assert_eq!(child.lsn_for_timestamp(400).expect("lookup").lsn, d);
    // A clock that steps back is clamped, so the index stays sorted.
    let e = child
        .ingest_record(d, &record(50, 1, vec![(0, image(5))]))
        .expect("ingest");
    assert_eq!(child.lsn_for_timestamp(400).expect("lookup").lsn, e);
}

#[test]
fn ingest_rejects_gaps_and_bad_records_without_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let a = tl
        .ingest_record(START, &record(1, 1, vec![(0, image(1))]))
        .expect("ingest");
    assert!(matches!(
        tl.ingest_record(a.next(), &record(2, 1, vec![])),
        Err(StorageError::OutOfOrder { .. })
    ));
    let bad = record(2, 1, vec![(0, patch(8190, b"abc"))]);
    assert!(matches!(tl.ingest_record(a, &bad), Err(StorageError::InvalidRecord(_))));
    assert_eq!(tl.last_record_lsn(), a);
    assert_eq!(tl.get_page(Key::page(0), a).expect("read")[0], 1);
}

#[test]
fn gc_cutoff_is_the_older_of_horizon_and_pitr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut conf = small_config();
    conf.pitr_interval_ms = 5; // 5000 µs of history kept by time
    conf.gc_horizon_bytes = 0;
    let tenant = open(dir.path(), conf.clone());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut lsn = START;
    let mut ends = Vec::new();
    for i in 0..20u64 {
        lsn = tl
            .ingest_record(lsn, &record(i * 1000, 1, vec![(0, image(i as u8))]))
            .expect("ingest");
        ends.push(lsn);
    }
    // now = 19_500 µs: the LSN at now - 5000 µs is the end of the commit at 14_000 µs.
    assert_eq!(tl.gc(19_500).expect("gc").gc_cutoff_lsn, ends[14]);
    // A time before every commit keeps everything; the cutoff never moves back.
    assert_eq!(tl.gc(100).expect("gc").gc_cutoff_lsn, ends[14]);
    drop(tl);
    drop(tenant);

    // With a byte horizon older than the time horizon, the horizon wins.
    let dir = tempfile::tempdir().expect("tempdir");
    conf.gc_horizon_bytes = 3 * (ends[1].0 - ends[0].0) + 1;
    let tenant = open(dir.path(), conf);
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut lsn = START;
    for i in 0..20u64 {
        lsn = tl
            .ingest_record(lsn, &record(i * 1000, 1, vec![(0, image(i as u8))]))
            .expect("ingest");
    }
    let cutoff = tl.gc(1_000_000).expect("gc").gc_cutoff_lsn;
    assert_eq!(cutoff, lsn.saturating_sub(3 * (ends[1].0 - ends[0].0) + 1));
}

#[test]
fn open_layer_freezes_by_distance_and_by_age() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut conf = small_config();
    conf.checkpoint_distance_bytes = 20_000;
    conf.checkpoint_timeout_ms = 0;
    let tenant = open(dir.path(), conf);
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut lsn = START;
    for i in 0..2u8 {
        lsn = tl
            .ingest_record(lsn, &record(1, 1, vec![(0, image(i))]))
            .expect("ingest");
    }
    assert!(!tl.has_frozen_layers(), "two 8 KiB records stay under 20 000 bytes");
    lsn = tl
        .ingest_record(lsn, &record(1, 1, vec![(0, image(2))]))
        .expect("ingest");
    assert!(tl.has_frozen_layers(), "the third passes the distance");
    tl.flush_frozen_layers().expect("flush");
    assert_eq!(tl.disk_consistent_lsn(), lsn);
    lsn = tl
        .ingest_record(lsn, &record(1, 1, vec![(0, image(3))]))
        .expect("ingest");
    tl.freeze_if_stale();
    assert!(tl.has_frozen_layers(), "a zero timeout freezes any layer with data");
    tl.flush_frozen_layers().expect("flush");
    assert_eq!(tl.disk_consistent_lsn(), lsn);
    tl.freeze_if_stale();
    assert!(!tl.has_frozen_layers(), "an empty open layer is never frozen");
}

#[test]
fn ingest_frames_takes_whole_frames_and_reports_a_torn_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let a = record(1, 1, vec![(0, image(1))]);
    let b = record(2, 1, vec![(0, patch(0, b"xy"))]);
    let mut frames = a.to_frame().expect("frame").to_vec();
    frames.extend_from_slice(&b.to_frame().expect("frame"));
    let cut = bytes::Bytes::from(frames[..frames.len() - 1].to_vec());
    match tl.ingest_frames(START, &cut) {
        Err(StorageError::Wal(storage::wal::WalDecodeError::Truncated { lsn, .. })) => {
            assert_eq!(
                lsn,
                Lsn(START.0 + a.frame_len()),
                "the error names the torn frame's LSN"
            )
        }
        other => panic!("expected a truncation error, got {other:?}"),
    }
    assert_eq!(
        tl.last_record_lsn(),
        Lsn(START.0 + a.frame_len()),
        "the whole first frame was ingested"
    );
    let end = tl
        .ingest_frames(tl.last_record_lsn(), &b.to_frame().expect("frame"))
        .expect("the rest");
    assert_eq!(&tl.get_page(Key::page(0), end).expect("read")[..3], b"xy\x01");
}

#[test]
fn nonsense_configuration_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut conf = small_config();
    conf.partition_keys = 0;
    let result = storage::Tenant::open(dir.path(), conf, std::sync::Arc::new(storage::PageCache::new(8)));
    assert!(matches!(result, Err(StorageError::InvalidConfig(_))));
}

#[test]
fn a_lease_holds_the_gc_cutoff_until_it_expires() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut lsn = START;
    let mut ends = Vec::new();
    for i in 0..10u8 {
        lsn = tl
            .ingest_record(lsn, &record(i as u64, 1, vec![(0, image(i))]))
            .expect("ingest");
        ends.push(lsn);
    }
    tl.lease_lsn(ends[3], 5_000).expect("lease");
    assert!(matches!(
        tl.lease_lsn(lsn.next(), 5_000),
        Err(StorageError::LsnAhead { .. })
    ));
    assert_eq!(
        tl.gc(1_000).expect("gc").gc_cutoff_lsn,
        ends[3],
        "the lease holds the cutoff"
    );
    assert_eq!(tl.get_page(Key::page(0), ends[3]).expect("leased LSN readable")[0], 3);
    assert_eq!(
        tl.gc(6_000).expect("gc").gc_cutoff_lsn,
        lsn,
        "expired: the cutoff moves on"
    );
    assert!(matches!(
        tl.lease_lsn(ends[3], 9_000),
        Err(StorageError::LsnBelowGcCutoff { .. })
    ));
}

/// A tenant in `dir` with root timeline 1 holding one record (page 0 filled with 1); the record's end.
fn root_with_one_record(dir: &std::path::Path) -> (storage::Tenant, std::sync::Arc<storage::Timeline>, Lsn) {
    let tenant = open(dir, small_config());
    let root = tenant.create_timeline(TimelineId(1), START).expect("create");
    let end = root
        .ingest_record(START, &record(1, 1, vec![(0, image(1))]))
        .expect("ingest");
    (tenant, root, end)
}

/// Timeline 2, a branch of timeline 1 at `lsn`.
fn branch_of_root(tenant: &storage::Tenant, lsn: Lsn) {
    tenant
        .branch(TimelineId(2), TimelineId(1), BranchPoint::At(lsn))
        .expect("child");
}

#[test]
fn a_sealed_timeline_holds_in_its_layers_what_its_children_read_and_stays_sealed_across_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let old = tenant.create_timeline(TimelineId(1), START).expect("create");
    let a = old
        .ingest_record(START, &record(1, 2, vec![(0, image(1)), (1, image(1))]))
        .expect("ingest");
    assert!(matches!(
        tenant.seal_timeline(TimelineId(1)),
        Err(StorageError::NoChildren(_))
    ));
    let b = old
        .ingest_record(a, &record(2, 2, vec![(0, image(2))]))
        .expect("ingest");
    // The abandoned future after the restore point.
    let c = old
        .ingest_record(b, &record(3, 2, vec![(0, image(3))]))
        .expect("ingest");
    tenant
        .branch(TimelineId(2), TimelineId(1), BranchPoint::At(a))
        .expect("first child");
    let restored = tenant
        .branch(TimelineId(3), TimelineId(1), BranchPoint::At(b))
        .expect("restored");
    assert!(old.disk_consistent_lsn() < b, "nothing was flushed yet");
    assert_eq!(
        tenant.seal_timeline(TimelineId(1)).expect("seal"),
        b,
        "the newest branch point"
    );
    assert!(
        old.disk_consistent_lsn() >= c,
        "the seal flushed all it held, past the end too"
    );
    assert_eq!(old.info().frozen_layer_count, 0);
    assert_eq!(old.sealed_lsn(), Some(b));
    assert_eq!(tenant.seal_timeline(TimelineId(1)).expect("again"), b);
    assert!(matches!(
        tenant.branch(TimelineId(4), TimelineId(1), BranchPoint::At(c)),
        Err(StorageError::PastSeal { .. })
    ));
    assert!(matches!(
        tenant.branch(TimelineId(4), TimelineId(1), BranchPoint::Latest),
        Err(StorageError::PastSeal { .. })
    ));
    tenant
        .branch(TimelineId(4), TimelineId(1), BranchPoint::At(a))
        .expect("a branch at or before the end");
    assert_eq!(restored.get_page(Key::page(0), b).expect("read")[0], 2);
    // After a restart nothing is re-fed to the old timeline (no WAL is followed for it), and its children
    // read what they read before, from its layer files.
    drop((old, restored));
    drop(tenant);
    let tenant = open(dir.path(), small_config());
    let old = tenant.timeline(TimelineId(1)).expect("reloaded");
    assert_eq!(old.sealed_lsn(), Some(b));
    assert!(old.last_record_lsn() >= b);
    let restored = tenant.timeline(TimelineId(3)).expect("reloaded");
    assert_eq!(restored.get_page(Key::page(0), b).expect("read")[0], 2);
    assert_eq!(restored.get_page(Key::page(1), b).expect("read")[0], 1);
    let first = tenant.timeline(TimelineId(2)).expect("reloaded");
    assert_eq!(first.get_page(Key::page(0), a).expect("read")[0], 1);
    assert!(matches!(
        tenant.branch(TimelineId(5), TimelineId(1), BranchPoint::At(c)),
        Err(StorageError::PastSeal { .. })
    ));
}

#[test]
fn a_timeline_is_sealed_only_once_it_has_ingested_up_to_its_childrens_newest_branch_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (tenant, old, a) = root_with_one_record(dir.path());
    branch_of_root(&tenant, a);
    // A restart before any flush: the old timeline stands at its start until its WAL is re-fed.
    drop(old);
    drop(tenant);
    let tenant = open(dir.path(), small_config());
    assert!(matches!(
        tenant.seal_timeline(TimelineId(1)),
        Err(StorageError::AncestorBehind { .. })
    ));
    let old = tenant.timeline(TimelineId(1)).expect("reloaded");
    assert_eq!(old.sealed_lsn(), None, "a refused seal records nothing");
    old.ingest_record(START, &record(1, 1, vec![(0, image(1))]))
        .expect("re-fed");
    assert_eq!(tenant.seal_timeline(TimelineId(1)).expect("seal"), a);
}

/// A branch restored before every test run makes a chain of timelines, each the ancestor of the next. Dropping a
/// tenant (a detach, a deletion, a shutdown) must not recurse down that chain: on a 256 KiB stack (a tokio
/// worker's is 2 MiB), a chain of 20 000 timelines is dropped, reopened and dropped again.
#[test]
fn a_long_chain_of_branches_is_dropped_without_recursing_down_it() {
    const CHAIN: u128 = 20_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = || storage::TimelineConfig {
        durability: storage::Durability::Off,
        ..small_config()
    };
    let path = dir.path().to_path_buf();
    let run = move || {
        let tenant = open(&path, conf());
        let root = tenant.create_timeline(TimelineId(1), START).expect("create");
        let end = root
            .ingest_record(START, &record(1, 1, vec![(0, image(7))]))
            .expect("ingest");
        root.checkpoint().expect("checkpoint");
        drop(root);
        for id in 2..=CHAIN {
            tenant
                .branch(TimelineId(id), TimelineId(id - 1), BranchPoint::Latest)
                .expect("branch");
        }
        drop(tenant);
        let tenant = open(&path, conf());
        assert_eq!(tenant.timelines().len(), CHAIN as usize);
        let last = tenant.timeline(TimelineId(CHAIN)).expect("the last");
        assert_eq!(last.start_lsn(), end, "every branch point is the root's one record");
        // A read falls through the whole chain to the root's layer.
        assert_eq!(last.get_page(Key::page(0), end).expect("read")[0], 7);
        drop(last);
        drop(tenant);
    };
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(run)
        .expect("spawn")
        .join()
        .expect("no stack overflow");
}

#[test]
fn a_seal_flushes_what_its_timeline_holds_past_its_end_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (tenant, old, a) = root_with_one_record(dir.path());
    branch_of_root(&tenant, a);
    old.checkpoint().expect("checkpoint");
    // Durable up to the end already; WAL past it (no read reaches it) is in memory only.
    let past = old
        .ingest_record(a, &record(2, 1, vec![(0, image(2))]))
        .expect("ingest");
    assert_eq!(tenant.seal_timeline(TimelineId(1)).expect("seal"), a);
    assert_eq!(old.disk_consistent_lsn(), past, "nothing left in memory");
}

/// A tenant rebuilt from remote storage may find a seal in its branch log beside a metadata from before the
/// seal's flush: the timeline is loaded unsealed, at that metadata, to be re-fed and sealed again.
#[test]
fn a_seal_beside_an_older_metadata_loads_unsealed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (tenant, old, a) = root_with_one_record(dir.path());
    old.checkpoint().expect("checkpoint");
    let metadata = old.dir().join(storage::metadata::METADATA_FILE);
    let older = std::fs::read(&metadata).expect("the metadata at a");
    let b = old
        .ingest_record(a, &record(2, 1, vec![(0, image(2))]))
        .expect("ingest");
    tenant
        .branch(TimelineId(2), TimelineId(1), BranchPoint::At(b))
        .expect("child");
    assert_eq!(tenant.seal_timeline(TimelineId(1)).expect("seal"), b);
    drop(old);
    drop(tenant);
    std::fs::write(&metadata, older).expect("the older metadata back");

    let tenant = open(dir.path(), small_config());
    let old = tenant.timeline(TimelineId(1)).expect("reloaded");
    assert_eq!(old.sealed_lsn(), None, "its layers stop at {a}, before its end {b}");
    assert_eq!(old.last_record_lsn(), a);
    assert!(matches!(
        tenant.seal_timeline(TimelineId(1)),
        Err(StorageError::AncestorBehind { .. })
    ));
    old.ingest_record(a, &record(2, 1, vec![(0, image(2))]))
        .expect("re-fed");
    assert_eq!(tenant.seal_timeline(TimelineId(1)).expect("sealed again"), b);
    let child = tenant.timeline(TimelineId(2)).expect("child");
    assert_eq!(child.get_page(Key::page(0), b).expect("read")[0], 2);
}
