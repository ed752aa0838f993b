//! The engine's commands over a tenant directory, with no service running: `demo` (a database's worth of pages
//! written, branched, written on both sides, reopened and read back), `inspect` (every timeline) and `verify`
//! (every layer file's checksums).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use bytes::Bytes;
use storage::{
    BranchPoint, Key, Lsn, PageCache, Patch, Tenant, TimelineConfig, TimelineId, Value, WalRecord, PAGE_SIZE_BYTES,
};

fn open_tenant(dir: &Path) -> Result<Tenant> {
    Tenant::open(dir, TimelineConfig::default(), Arc::new(PageCache::new(16 * 1024)))
        .with_context(|| format!("opening tenant at {}", dir.display()))
}

fn page_record(ts_us: u64, db_size_pages: u32, blocks: std::ops::Range<u32>, fill: u8) -> WalRecord {
    let entries = blocks
        .map(|b| (Key::page(b), Value::Image(Bytes::from(vec![fill; PAGE_SIZE_BYTES]))))
        .collect();
    WalRecord {
        commit_ts_us: ts_us,
        db_size_pages,
        entries,
    }
}

pub(crate) fn demo(dir: &Path, pages: u32) -> Result<()> {
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        anyhow::bail!("{} is not empty; pass an empty or new --data-dir", dir.display());
    }
    let tenant = open_tenant(dir)?;
    let main_id = TimelineId::generate();
    let main = tenant.create_timeline(main_id, Lsn(0x100_0000))?;
    let started = Instant::now();
    let mut lsn = main.start_lsn();
    for chunk_start in (0..pages).step_by(64) {
        let chunk_end = (chunk_start + 64).min(pages);
        lsn = main.ingest_record(lsn, &page_record(1, chunk_end, chunk_start..chunk_end, 1))?;
    }
    main.checkpoint()?;
    println!(
        "wrote {pages} pages ({} MiB) in {:?}, up to LSN {lsn}",
        pages as u64 * 8 / 1024,
        started.elapsed()
    );

    let started = Instant::now();
    let branch_id = TimelineId::generate();
    let branch = tenant.branch(branch_id, main_id, BranchPoint::Latest)?;
    println!(
        "branched {branch_id} at {} in {:?}",
        branch.start_lsn(),
        started.elapsed()
    );

    let patch = Value::Delta(vec![Patch {
        offset: 0,
        data: Bytes::from_static(b"branch"),
    }]);
    let branch_lsn = branch.ingest_record(
        branch.start_lsn(),
        &WalRecord {
            commit_ts_us: 2,
            db_size_pages: pages,
            entries: vec![(Key::page(0), patch)],
        },
    )?;
    let main_lsn = main.ingest_record(lsn, &page_record(3, pages, 0..1, 9))?;
    branch.checkpoint()?;
    main.checkpoint()?;
    drop((main, branch));
    drop(tenant);

    let tenant = open_tenant(dir)?;
    let main = tenant.timeline(main_id)?;
    let branch = tenant.timeline(branch_id)?;
    let on_branch = branch.get_page(Key::page(0), branch_lsn)?;
    let on_main = main.get_page(Key::page(0), main_lsn)?;
    let before = main.get_page(Key::page(0), lsn)?;
    anyhow::ensure!(
        &on_branch[..6] == b"branch" && on_branch[6] == 1,
        "branch page is wrong"
    );
    anyhow::ensure!(on_main[0] == 9 && before[0] == 1, "main pages are wrong");
    println!(
        "after restart: branch page 1 starts {:?}, main page 1 is {} now and {} at {lsn}",
        String::from_utf8_lossy(&on_branch[..6]),
        on_main[0],
        before[0]
    );
    inspect(dir)
}

pub(crate) fn inspect(dir: &Path) -> Result<()> {
    let tenant = open_tenant(dir)?;
    let mut timelines = tenant.timelines();
    timelines.sort_by_key(|t| t.start_lsn());
    for timeline in timelines {
        let info = timeline.info();
        let ancestor = info
            .ancestor
            .map(|(id, lsn)| format!("{id}@{lsn}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{} ancestor={} start={} last_record={} disk_consistent={} gc_cutoff={} size={} pages layers={} ({} bytes)",
            info.timeline_id,
            ancestor,
            info.start_lsn,
            info.last_record_lsn,
            info.disk_consistent_lsn,
            info.gc_cutoff_lsn,
            info.db_size_pages,
            info.layer_count,
            info.layer_bytes
        );
    }
    Ok(())
}

pub(crate) fn verify(dir: &Path) -> Result<()> {
    let tenant = open_tenant(dir)?;
    let mut damaged = 0usize;
    let mut checked = 0usize;
    for timeline in tenant.timelines() {
        for desc in timeline.layer_descs() {
            let file = storage::layer::file::LayerFile::open_for_verify(timeline.dir().join(desc.file_name()), desc);
            checked += 1;
            if let Err(e) = file.verify() {
                damaged += 1;
                eprintln!("{e}");
            }
        }
    }
    println!("checked {checked} layer files, {damaged} damaged");
    anyhow::ensure!(damaged == 0, "{damaged} damaged layer files");
    Ok(())
}
