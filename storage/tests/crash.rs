//! Crash tests: every on-disk state a flush or a compaction can leave when cut short.
//!
//! Each test captures the tenant directory before an operation and after it, then builds the intermediate
//! images a crash could leave (a layer temp file truncated at several lengths, a layer written but never named
//! by the metadata, a torn timestamp append, a metadata temp file cut short, old layers not yet removed) and
//! opens each one: the timeline must stand at the last durable `disk_consistent_lsn`, read every page right up
//! to it, accept the WAL re-fed from there, and then read every page right at every LSN.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;
use storage::{Key, Lsn, StorageError, Tenant, TimelineConfig, TimelineId, WalRecord};

const BLOCKS: u32 = 4;

/// Records where record `i` writes block `i % BLOCKS` with an image filled with `i`, and a small delta to
/// block 0 at offset 100 (so there are deltas to chain).
fn records(count: usize) -> Vec<WalRecord> {
    (0..count)
        .map(|i| {
            let mut entries = vec![((i as u32) % BLOCKS, image(i as u8))];
            if i % BLOCKS as usize != 0 {
                entries.push((0, patch(100, &[i as u8, 0xEE])));
            }
            record(i as u64 * 1000, BLOCKS, entries)
        })
        .collect()
}

/// The expected page for block at `lsn`, given the records and their end LSNs.
fn expected(records: &[WalRecord], ends: &[Lsn], block: u32, lsn: Lsn) -> Vec<u8> {
    let mut page = vec![0u8; storage::PAGE_SIZE_BYTES];
    for (record, end) in records.iter().zip(ends) {
        if *end > lsn {
            break;
        }
        for (key, value) in &record.entries {
            if key.block() == block {
                match value {
                    storage::Value::Image(bytes) => page.copy_from_slice(bytes),
                    storage::Value::Delta(patches) => storage::value::apply_delta(&mut page, patches),
                }
            }
        }
    }
    page
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn timeline_dir(tenant_dir: &Path) -> PathBuf {
    tenant_dir.join("timelines").join(TimelineId(1).to_string())
}

/// Opens the crash image, checks it stands at `durable_lsn` with right pages, re-feeds the rest, checks all.
fn check_recovers(
    image: &Path,
    conf: &TimelineConfig,
    records: &[WalRecord],
    starts: &[Lsn],
    ends: &[Lsn],
    durable_lsn: Lsn,
    what: &str,
) {
    let tenant = Tenant::open(image, conf.clone(), std::sync::Arc::new(storage::PageCache::new(64)))
        .unwrap_or_else(|e| panic!("{what}: the crash image must open: {e}"));
    let tl = tenant.timeline(TimelineId(1)).expect("timeline");
    assert_eq!(tl.disk_consistent_lsn(), durable_lsn, "{what}: disk_consistent_lsn");
    assert_eq!(
        tl.last_record_lsn(),
        durable_lsn,
        "{what}: stands at disk_consistent_lsn"
    );
    let leftovers: Vec<String> = files(tl.dir()).into_iter().filter(|f| f.ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "{what}: temp files left: {leftovers:?}");
    let check_upto = |upto: Lsn| {
        for &end in ends.iter().filter(|&&e| e <= upto) {
            for block in 0..BLOCKS {
                let page = tl
                    .get_page(Key::page(block), end)
                    .unwrap_or_else(|e| panic!("{what}: read {block}@{end}: {e}"));
                assert_page(
                    &page,
                    &expected(records, ends, block, end),
                    &format!("{what}: block {block} at {end}"),
                );
            }
        }
    };
    check_upto(durable_lsn);
    for (record, &start) in records.iter().zip(starts).filter(|(_, &s)| s >= durable_lsn) {
        tl.ingest_record(start, record)
            .unwrap_or_else(|e| panic!("{what}: re-feed at {start}: {e}"));
    }
    check_upto(Lsn::MAX);
    // The recovered timeline flushes again without trouble.
    tl.checkpoint().expect("checkpoint after recovery");
}

fn ingest(tl: &storage::Timeline, records: &[WalRecord]) -> (Vec<Lsn>, Vec<Lsn>) {
    let mut lsn = tl.last_record_lsn();
    let (mut starts, mut ends) = (Vec::new(), Vec::new());
    for record in records {
        starts.push(lsn);
        lsn = tl.ingest_record(lsn, record).expect("ingest");
        ends.push(lsn);
    }
    (starts, ends)
}

#[test]
fn flush_cut_short_at_every_step_recovers_to_the_last_durable_lsn() {
    let work = tempfile::tempdir().expect("tempdir");
    let live = work.path().join("live");
    let conf = small_config();
    let all = records(24);
    let tenant = open(&live, conf.clone());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let (mut starts, mut ends) = ingest(&tl, &all[..12]);
    tl.checkpoint().expect("first flush");
    let durable = tl.disk_consistent_lsn();
    let (s2, e2) = ingest(&tl, &all[12..]);
    starts.extend(s2);
    ends.extend(e2);
    let before = work.path().join("before");
    copy_dir(&live, &before);
    tl.checkpoint().expect("second flush");
    let after_lsn = tl.disk_consistent_lsn();
    let after = work.path().join("after");
    copy_dir(&live, &after);
    drop(tl);
    drop(tenant);

    let tl_before = timeline_dir(&before);
    let tl_after = timeline_dir(&after);
    let new_layers: Vec<String> = files(&tl_after).difference(&files(&tl_before)).cloned().collect();
    assert_eq!(new_layers.len(), 1, "one new L0 layer: {new_layers:?}");
    let layer_bytes = std::fs::read(tl_after.join(&new_layers[0])).expect("layer");
    let timestamps_after = std::fs::read(tl_after.join("timestamps")).expect("timestamps");
    let timestamps_before = std::fs::read(tl_before.join("timestamps")).expect("timestamps");
    let metadata_after = std::fs::read(tl_after.join("metadata")).expect("metadata");

    let mut case = 0;
    let mut image_of = |what: &str, build: &dyn Fn(&Path)| {
        case += 1;
        let image = work.path().join(format!("crash-{case}"));
        copy_dir(&before, &image);
        build(&timeline_dir(&image));
        (image, what.to_string())
    };
    let mut images = Vec::new();
    for cut in [
        0,
        1,
        63,
        64,
        layer_bytes.len() / 2,
        layer_bytes.len() - 1,
        layer_bytes.len(),
    ] {
        let layer = layer_bytes[..cut].to_vec();
        let name = format!("{}.tmp", new_layers[0]);
        images.push(image_of(&format!("layer temp cut at {cut}"), &move |dir: &Path| {
            std::fs::write(dir.join(&name), &layer).expect("write");
        }));
    }
    for torn in [0, 7, timestamps_after.len() - timestamps_before.len()] {
        let layer = layer_bytes.clone();
        let name = new_layers[0].clone();
        let mut timestamps = timestamps_before.clone();
        timestamps.extend_from_slice(&timestamps_after[timestamps_before.len()..timestamps_before.len() + torn]);
        images.push(image_of(
            &format!("layer renamed, timestamps +{torn} bytes, metadata old"),
            &move |dir: &Path| {
                std::fs::write(dir.join(&name), &layer).expect("write");
                std::fs::write(dir.join("timestamps"), &timestamps).expect("write");
            },
        ));
    }
    for cut in [0, 10, metadata_after.len() - 1] {
        let layer = layer_bytes.clone();
        let name = new_layers[0].clone();
        let timestamps = timestamps_after.clone();
        let metadata = metadata_after[..cut].to_vec();
        images.push(image_of(&format!("metadata temp cut at {cut}"), &move |dir: &Path| {
            std::fs::write(dir.join(&name), &layer).expect("write");
            std::fs::write(dir.join("timestamps"), &timestamps).expect("write");
            std::fs::write(dir.join("metadata.tmp"), &metadata).expect("write");
        }));
    }
    for (image, what) in &images {
        check_recovers(image, &conf, &all, &starts, &ends, durable, what);
    }
    check_recovers(&after, &conf, &all, &starts, &ends, after_lsn, "metadata renamed");
}

#[test]
fn compaction_cut_short_keeps_the_old_layers_or_the_new_ones() {
    let work = tempfile::tempdir().expect("tempdir");
    let live = work.path().join("live");
    let conf = small_config();
    let all = records(16);
    let tenant = open(&live, conf.clone());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let (mut starts, mut ends) = (Vec::new(), Vec::new());
    for chunk in all.chunks(4) {
        let (s, e) = ingest(&tl, chunk);
        starts.extend(s);
        ends.extend(e);
        tl.checkpoint().expect("flush");
    }
    let durable = tl.disk_consistent_lsn();
    let before = work.path().join("before");
    copy_dir(&live, &before);
    let outcome = tl.compact().expect("compact");
    assert!(outcome.l0_merged >= 3 && outcome.l1_written > 0, "{outcome:?}");
    let after = work.path().join("after");
    copy_dir(&live, &after);
    drop(tl);
    drop(tenant);

    let (tl_before, tl_after) = (timeline_dir(&before), timeline_dir(&after));
    let added: Vec<String> = files(&tl_after).difference(&files(&tl_before)).cloned().collect();
    let removed: Vec<String> = files(&tl_before).difference(&files(&tl_after)).cloned().collect();
    assert!(
        !added.is_empty() && !removed.is_empty(),
        "added {added:?} removed {removed:?}"
    );

    // New layers written (one of them only as a temp file), metadata still old.
    let image = work.path().join("new-layers-unnamed");
    copy_dir(&before, &image);
    for (i, name) in added.iter().enumerate() {
        let bytes = std::fs::read(tl_after.join(name)).expect("read");
        let target = if i == 0 { format!("{name}.tmp") } else { name.clone() };
        std::fs::write(timeline_dir(&image).join(target), &bytes[..bytes.len() / (i + 1)]).expect("write");
    }
    check_recovers(
        &image,
        &conf,
        &all,
        &starts,
        &ends,
        durable,
        "compaction: new layers not named yet",
    );

    // Metadata replaced, old L0 files not yet removed.
    let image = work.path().join("old-layers-left");
    copy_dir(&after, &image);
    for name in &removed {
        std::fs::copy(tl_before.join(name), timeline_dir(&image).join(name)).expect("copy");
    }
    check_recovers(
        &image,
        &conf,
        &all,
        &starts,
        &ends,
        durable,
        "compaction: old layers left behind",
    );
    let left: BTreeSet<String> = files(&timeline_dir(&image));
    assert!(
        removed.iter().all(|name| !left.contains(name)),
        "old layers are removed on load"
    );
}

#[test]
fn missing_layer_named_by_the_metadata_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = open(dir.path(), small_config());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    ingest(&tl, &records(4));
    tl.checkpoint().expect("flush");
    let layer = tl.layer_descs()[0].file_name();
    drop(tl);
    drop(tenant);
    std::fs::remove_file(timeline_dir(dir.path()).join(&layer)).expect("remove");
    match Tenant::open(
        dir.path(),
        small_config(),
        std::sync::Arc::new(storage::PageCache::new(8)),
    ) {
        Err(StorageError::Corrupt { file, .. }) => assert!(file.ends_with(&layer), "{}", file.display()),
        Err(other) => panic!("expected Corrupt naming the layer, got {other}"),
        Ok(_) => panic!("a tenant missing a layer must not open"),
    }
}
