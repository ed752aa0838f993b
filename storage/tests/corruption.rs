//! Corruption tests: flip any byte of a layer file and every read either returns the right page or fails
//! with `Corrupt` naming that file; no wrong page, no panic. The same for truncation, and for damaged
//! metadata and timestamp files at load.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use storage::{Key, Lsn, StorageError, Tenant, TimelineId};

const BLOCKS: u32 = 3;

/// Builds a timeline with small layers (deltas only, so every byte of a layer can be flipped in turn):
/// two L0 layers. Returns the tenant dir, the end LSNs and the expected pages at each.
fn build(dir: &Path) -> (Vec<Lsn>, Vec<Vec<Vec<u8>>>) {
    let tenant = open(dir, small_config());
    let tl = tenant.create_timeline(TimelineId(1), START).expect("create");
    let mut lsn = START;
    let mut ends = Vec::new();
    let mut pages = vec![vec![0u8; storage::PAGE_SIZE_BYTES]; BLOCKS as usize];
    let mut expected = Vec::new();
    for i in 0..8u8 {
        let block = (i as u32) % BLOCKS;
        let offset = 10 * i as u16;
        pages[block as usize][offset as usize..offset as usize + 2].copy_from_slice(&[i, i ^ 0x5A]);
        lsn = tl
            .ingest_record(
                lsn,
                &record(i as u64, BLOCKS, vec![(block, patch(offset, &[i, i ^ 0x5A]))]),
            )
            .expect("ingest");
        ends.push(lsn);
        expected.push(pages.clone());
        if i == 3 || i == 7 {
            tl.checkpoint().expect("flush");
        }
    }
    (ends, expected)
}

fn layer_paths(dir: &Path) -> Vec<PathBuf> {
    let timeline_dir = dir.join("timelines").join(TimelineId(1).to_string());
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&timeline_dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("l0_")))
        .collect();
    paths.sort();
    paths
}

/// Reads every page and the database size at every LSN; each must be right or `Corrupt` naming `damaged`. Returns how many failed.
fn read_all(dir: &Path, ends: &[Lsn], expected: &[Vec<Vec<u8>>], damaged: &Path, what: &str) -> usize {
    let tenant = open(dir, small_config());
    let tl = tenant.timeline(TimelineId(1)).expect("timeline");
    let mut corrupt_reads = 0;
    for (i, &end) in ends.iter().enumerate() {
        match tl.db_size_at(end) {
            Ok(size) => assert_eq!(size, BLOCKS, "{what}: database size at {end}"),
            Err(StorageError::Corrupt { file, .. }) => {
                assert_eq!(file, damaged, "{what}: the error names the damaged file");
                corrupt_reads += 1;
            }
            Err(other) => panic!("{what}: database size at {end}: unexpected error {other}"),
        }
        for block in 0..BLOCKS {
            match tl.get_page_uncached(Key::page(block), end) {
                Ok((page, _)) => assert_page(
                    &page,
                    &expected[i][block as usize],
                    &format!("{what}: block {block} at {end}"),
                ),
                Err(StorageError::Corrupt { file, .. }) => {
                    assert_eq!(file, damaged, "{what}: the error names the damaged file");
                    corrupt_reads += 1;
                }
                Err(other) => panic!("{what}: block {block} at {end}: unexpected error {other}"),
            }
        }
    }
    corrupt_reads
}

#[test]
fn every_flipped_byte_of_every_layer_is_caught() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ends, expected) = build(dir.path());
    let layers = layer_paths(dir.path());
    assert_eq!(layers.len(), 2, "{layers:?}");
    for layer in &layers {
        let original = std::fs::read(layer).expect("read");
        for position in 0..original.len() {
            let mut damaged = original.clone();
            damaged[position] ^= 0x01 << (position % 8);
            std::fs::write(layer, &damaged).expect("write");
            let failed = read_all(
                dir.path(),
                &ends,
                &expected,
                layer,
                &format!("{} byte {position}", layer.display()),
            );
            assert!(
                failed > 0,
                "flipping byte {position} of {} went unnoticed by every read",
                layer.display()
            );
        }
        std::fs::write(layer, &original).expect("restore");
    }
    // Undamaged again: every read succeeds.
    assert_eq!(read_all(dir.path(), &ends, &expected, Path::new("-"), "restored"), 0);
}

#[test]
fn truncated_layer_is_caught() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ends, expected) = build(dir.path());
    let layer = layer_paths(dir.path()).pop().expect("a layer");
    let original = std::fs::read(&layer).expect("read");
    for len in [0, 1, 50, original.len() / 2, original.len() - 1] {
        std::fs::write(&layer, &original[..len]).expect("truncate");
        assert!(read_all(dir.path(), &ends, &expected, &layer, &format!("truncated to {len}")) > 0);
    }
}

#[test]
fn damaged_metadata_or_timestamps_fail_the_load_with_the_file_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path());
    let timeline_dir = dir.path().join("timelines").join(TimelineId(1).to_string());
    for name in ["metadata", "timestamps"] {
        let path = timeline_dir.join(name);
        let original = std::fs::read(&path).expect("read");
        let mut damaged = original.clone();
        let at = damaged.len() - 3;
        damaged[at] ^= 0xFF;
        std::fs::write(&path, &damaged).expect("damage");
        let result = Tenant::open(
            dir.path(),
            small_config(),
            std::sync::Arc::new(storage::PageCache::new(8)),
        );
        match (name, result) {
            (_, Err(StorageError::Corrupt { file, .. })) => assert_eq!(file, path),
            // A damaged timestamp entry is found when a lookup touches it, not at load.
            ("timestamps", Ok(tenant)) => {
                let tl = tenant.timeline(TimelineId(1)).expect("timeline");
                match tl.lsn_for_timestamp(u64::MAX) {
                    Err(StorageError::Corrupt { file, .. }) => assert_eq!(file, path),
                    other => panic!("expected Corrupt from the damaged index, got {other:?}"),
                }
            }
            (_, other) => panic!("{name}: expected Corrupt, got {:?}", other.err()),
        }
        std::fs::write(&path, &original).expect("restore");
    }
}
