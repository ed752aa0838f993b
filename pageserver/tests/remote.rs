//! Remote storage in process: a tenant manager with data on two timelines, flushed, compacted and collected
//! in rounds, uploaded after each round to a local-directory remote; then a fresh data directory rebuilt from
//! that remote (through `runner::open`) serves the same pages at the same LSNs, and reports the same
//! `disk_consistent_lsn` as the uploaded `remote_consistent_lsn`.
//!
//! Layers come on demand: right after the rebuild the local timeline directories hold no layer file; reads
//! (many at once first, inline on the runtime's workers and on blocking threads, then every page at every
//! LSN) fetch what they need, each layer exactly once (the remote's layer GETs equal the layer files that
//! appeared). Reads from a current-thread runtime's own thread work too; a layer lost locally is fetched
//! again; a layer the remote lacks fails the read with `Fetch` (and the rebuild, if it is missing already).
//! In the S3 test the server runs on the test's own two-worker runtime, so readers waiting for a download
//! must not hold the workers (they wait in `block_in_place`): if they did, the download could never be
//! served and the reads would time out.
//!
//! The remote store is the real `LocalFileSystem` behind a wrapper that, after every object written or
//! deleted, checks the remote copy: every remote metadata names only objects that exist with their size, its
//! timestamps object holds the entries it counts, and no timeline's `remote_consistent_lsn` passes what a
//! rebuild would find (a remote metadata at or past it, listed alive by the remote `branches.log`).
//!
//! Also: deletions reach the remote (a timeline's objects go after the log says so; a tenant's log goes
//! first); the running pageserver's background loop uploads by itself and `GetTimelineInfo` reports the
//! advancing `remote_consistent_lsn`, and `SealTimeline` answers durable only once the remote holds the sealed
//! timeline up to its end, the remote branch log then recording the seal; and the same round trip against a real S3 server (`s3s-fs`, in
//! process over HTTP on 127.0.0.1).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, UploadPart,
};
use pageserver::remote::{RemoteConfig, RemoteConsistentLsns, RemoteStorage, Uploader, UploaderConfig};
use pageserver::runner::{self, PageserverConfig};
use pageserver::tenants::{NewTimeline, TenantManager};
use storage::branch_log::BranchLogEntry;
use storage::metadata::TimelineMetadata;
use storage::{
    BranchPoint, Key, Lsn, PageCache, Patch, TenantId, Timeline, TimelineConfig, TimelineId, Value, WalRecord,
    PAGE_SIZE_BYTES,
};

const START: Lsn = Lsn(0x100_0000);
const BLOCKS: u32 = 12;

// ---------------------------------------------------------------------------------------------- the model

/// Every page of one timeline after each of its commits.
#[derive(Clone, Default)]
struct Model {
    pages: BTreeMap<u32, Vec<u8>>,
    history: Vec<(Lsn, BTreeMap<u32, Vec<u8>>)>,
    lsn: Lsn,
}

impl Model {
    fn new(start: Lsn) -> Model {
        Model {
            lsn: start,
            ..Model::default()
        }
    }

    /// Ingests record `n` (an image or a small patch of two blocks) and remembers the pages after it.
    fn write(&mut self, timeline: &Timeline, n: u64) {
        let mut entries: Vec<(Key, Value)> = Vec::new();
        for block in [(n % u64::from(BLOCKS)) as u32, ((n * 7 + 3) % u64::from(BLOCKS)) as u32] {
            if entries.iter().any(|(k, _)| k.block() == block) {
                continue;
            }
            let page = self.pages.entry(block).or_insert_with(|| vec![0; PAGE_SIZE_BYTES]);
            let value = if n % 4 == 0 || n < u64::from(BLOCKS) {
                page.fill((n % 251) as u8);
                Value::Image(Bytes::copy_from_slice(page))
            } else {
                let offset = (n * 37 % 8000) as usize;
                let data = format!("n{n}");
                page[offset..offset + data.len()].copy_from_slice(data.as_bytes());
                Value::Delta(vec![Patch {
                    offset: offset as u16,
                    data: Bytes::from(data),
                }])
            };
            entries.push((Key::page(block), value));
        }
        let record = WalRecord {
            commit_ts_us: n + 1,
            db_size_pages: BLOCKS,
            entries,
        };
        self.lsn = timeline.ingest_record(self.lsn, &record).expect("ingest");
        self.history.push((self.lsn, self.pages.clone()));
    }

    /// A branch at history entry `at`.
    fn branch(&self, at: usize) -> Model {
        let (lsn, pages) = self.history[at].clone();
        Model {
            pages,
            history: Vec::new(),
            lsn,
        }
    }
}

/// Reads every block at every model LSN in `lsns` from `timeline` and compares with the model.
fn check_pages(timeline: &Timeline, model: &Model, lsns: std::ops::RangeInclusive<Lsn>, what: &str) -> usize {
    let mut checked = 0;
    for (lsn, pages) in model.history.iter().filter(|(lsn, _)| lsns.contains(lsn)) {
        for block in 0..BLOCKS {
            let page = timeline
                .get_page(Key::page(block), *lsn)
                .unwrap_or_else(|e| panic!("{what}: block {block} at {lsn}: {e}"));
            let expected = pages.get(&block).cloned().unwrap_or_else(|| vec![0; PAGE_SIZE_BYTES]);
            assert!(
                page[..] == expected[..],
                "{what}: block {block} at {lsn} differs from the model"
            );
            checked += 1;
        }
    }
    checked
}

fn timeline_config() -> TimelineConfig {
    TimelineConfig {
        compaction_l0_threshold: 3,
        image_creation_threshold: 1,
        partition_keys: 8,
        gc_horizon_bytes: 48 * 1024,
        pitr_interval_ms: 0,
        ..TimelineConfig::default()
    }
}

/// Small enough that most layers go up in parts (the local store takes parts of any size).
fn remote_config() -> RemoteConfig {
    RemoteConfig {
        single_put_bytes_max: 24 * 1024,
        multipart_part_bytes: 16 * 1024,
        request_timeout_ms: 10_000,
        ..RemoteConfig::default()
    }
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_micros() as u64
}

// ---------------------------------------------------------------------------------------------- the checker

/// Checks the remote copy in a local directory after every mutation; see the file doc.
#[derive(Debug)]
struct Checker {
    root: PathBuf,
    lsns: OnceLock<Arc<RemoteConsistentLsns>>,
    checks: AtomicU64,
    puts: AtomicU64,
    multipart_puts: AtomicU64,
    /// GETs of layer objects (on-demand downloads).
    layer_gets: AtomicU64,
}

fn is_layer_name(name: &str) -> bool {
    (name.starts_with("l0_") || name.starts_with("l1_") || name.starts_with("img_")) && !name.ends_with(".tmp")
}

fn decode_metadata(bytes: &[u8]) -> TimelineMetadata {
    assert!(
        bytes.len() >= 20 && &bytes[..8] == b"CMBMETA1",
        "remote metadata header"
    );
    serde_json::from_slice(&bytes[20..]).expect("remote metadata body")
}

fn decode_branch_log(bytes: &[u8]) -> Vec<BranchLogEntry> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        entries.push(serde_json::from_slice(&bytes[at + 8..at + 8 + len]).expect("remote log entry"));
        at += 8 + len;
    }
    assert_eq!(at, bytes.len(), "the remote branch log holds whole frames");
    entries
}

fn live(entries: &[BranchLogEntry]) -> Vec<TimelineId> {
    let mut live = Vec::new();
    for entry in entries {
        match entry {
            BranchLogEntry::Create { timeline_id, .. } => live.push(*timeline_id),
            BranchLogEntry::Delete { timeline_id } => live.retain(|id| id != timeline_id),
            BranchLogEntry::Seal { .. } => {}
        }
    }
    live
}

impl Checker {
    fn check(&self) {
        self.checks.fetch_add(1, Ordering::Relaxed);
        let tenants = self.root.join("tenants");
        let Ok(dirs) = std::fs::read_dir(&tenants) else {
            return;
        };
        let mut found: BTreeMap<(TenantId, TimelineId), Lsn> = BTreeMap::new();
        let mut listed: Vec<(TenantId, TimelineId)> = Vec::new();
        for tenant_dir in dirs {
            let tenant_dir = tenant_dir.expect("entry").path();
            let tenant: TenantId = tenant_dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse().ok())
                .expect("tenant dir name");
            if let Ok(log) = std::fs::read(tenant_dir.join("branches.log")) {
                listed.extend(live(&decode_branch_log(&log)).into_iter().map(|t| (tenant, t)));
            }
            let Ok(timelines) = std::fs::read_dir(tenant_dir.join("timelines")) else {
                continue;
            };
            for timeline_dir in timelines {
                let timeline_dir = timeline_dir.expect("entry").path();
                let Ok(bytes) = std::fs::read(timeline_dir.join("metadata")) else {
                    continue;
                };
                let meta = decode_metadata(&bytes);
                for desc in &meta.layers {
                    let path = timeline_dir.join(desc.file_name());
                    let size = std::fs::metadata(&path)
                        .unwrap_or_else(|_| panic!("remote metadata names the missing {}", path.display()))
                        .len();
                    assert_eq!(size, desc.size_bytes, "remote {} has the wrong size", path.display());
                }
                let stamps = std::fs::metadata(timeline_dir.join("timestamps")).map_or(0, |m| m.len());
                assert!(
                    stamps >= meta.timestamp_count * 20,
                    "remote timestamps of {} hold {stamps} bytes, metadata counts {}",
                    timeline_dir.display(),
                    meta.timestamp_count
                );
                found.insert((tenant, meta.timeline_id), meta.disk_consistent_lsn);
            }
        }
        let Some(lsns) = self.lsns.get() else {
            return;
        };
        for (key, _) in found.iter() {
            if let Some(reported) = lsns.get(key.0, key.1) {
                let remote = found[key];
                assert!(
                    reported <= remote,
                    "{key:?}: remote_consistent_lsn {reported} past the remote {remote}"
                );
                assert!(
                    listed.contains(key),
                    "{key:?}: remote_consistent_lsn set, remote log does not list it"
                );
            }
        }
    }
}

/// The real local store, with [`Checker::check`] after every write and delete.
#[derive(Debug)]
struct CheckingStore {
    inner: Arc<LocalFileSystem>,
    checker: Arc<Checker>,
}

impl fmt::Display for CheckingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CheckingStore({})", self.inner)
    }
}

#[derive(Debug)]
struct CheckingUpload {
    inner: Box<dyn MultipartUpload>,
    checker: Arc<Checker>,
}

#[async_trait::async_trait]
impl MultipartUpload for CheckingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let result = self.inner.complete().await;
        self.checker.puts.fetch_add(1, Ordering::Relaxed);
        self.checker.multipart_puts.fetch_add(1, Ordering::Relaxed);
        self.checker.check();
        result
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

#[async_trait::async_trait]
impl ObjectStore for CheckingStore {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let result = self.inner.put_opts(location, payload, opts).await;
        self.checker.puts.fetch_add(1, Ordering::Relaxed);
        self.checker.check();
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CheckingUpload {
            inner,
            checker: Arc::clone(&self.checker),
        }))
    }

    async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
        if location.filename().is_some_and(is_layer_name) && !options.head {
            self.checker.layer_gets.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        let checker = Arc::clone(&self.checker);
        self.inner
            .delete_stream(locations)
            .inspect(move |_| checker.check())
            .boxed()
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &ObjectPath, to: &ObjectPath, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

fn checked_remote(dir: &Path) -> (Arc<RemoteStorage>, Arc<Checker>) {
    let checker = Arc::new(Checker {
        root: dir.to_path_buf(),
        lsns: OnceLock::new(),
        checks: AtomicU64::new(0),
        puts: AtomicU64::new(0),
        multipart_puts: AtomicU64::new(0),
        layer_gets: AtomicU64::new(0),
    });
    let inner = Arc::new(LocalFileSystem::new_with_prefix(dir).expect("local store"));
    let store = CheckingStore {
        inner,
        checker: Arc::clone(&checker),
    };
    let remote = RemoteStorage::from_store(Arc::new(store), "", remote_config());
    (Arc::new(remote), checker)
}

fn open_manager(dir: &Path) -> Arc<TenantManager> {
    Arc::new(TenantManager::open(dir, timeline_config(), Arc::new(PageCache::new(256))).expect("open"))
}

// ---------------------------------------------------------------------------------------------- the flow

/// What [`write_upload_rounds`] left.
struct Written {
    main: Model,
    branch: Model,
    main_id: TimelineId,
    branch_id: TimelineId,
    /// `remote_consistent_lsn` of each timeline after the last upload.
    uploaded: (Lsn, Lsn),
}

/// Writes rounds of records on a root timeline and (from round 2) a branch, flushes, compacts and collects,
/// and uploads after each round; checks `remote_consistent_lsn` follows `disk_consistent_lsn` up. Writes a
/// few more records at the end that are never flushed (a rebuild must not have them).
async fn write_upload_rounds(manager: &Arc<TenantManager>, uploader: &mut Uploader, tenant: TenantId) -> Written {
    let (main_id, branch_id) = (TimelineId(0xA1), TimelineId(0xB2));
    manager.create_tenant(tenant).expect("tenant");
    let main = manager
        .create_timeline(tenant, main_id, NewTimeline::Root { start_lsn: START })
        .expect("timeline");
    let lsns = uploader.remote_consistent_lsns();
    let mut model = Model::new(START);
    let mut branch_model: Option<(Arc<Timeline>, Model)> = None;
    let mut n = 0u64;
    let mut last_uploaded = START;
    for round in 0..8 {
        for _ in 0..6 {
            model.write(&main, n);
            n += 1;
        }
        if round == 2 {
            let at = model.history.len() - 4;
            let branch = manager
                .create_timeline(
                    tenant,
                    branch_id,
                    NewTimeline::Branch {
                        ancestor: main_id,
                        point: BranchPoint::At(model.history[at].0),
                    },
                )
                .expect("branch");
            branch_model = Some((branch, model.branch(at)));
        }
        if let Some((branch, branch_model)) = branch_model.as_mut() {
            for _ in 0..3 {
                branch_model.write(branch, n);
                n += 1;
            }
            branch.checkpoint().expect("checkpoint branch");
        }
        main.checkpoint().expect("checkpoint");
        if round % 2 == 1 {
            main.compact().expect("compact");
        }
        if round >= 5 {
            main.gc(now_us()).expect("gc");
        }
        uploader.upload_all().await.expect("upload");
        let uploaded = lsns.get(tenant, main_id).expect("uploaded");
        assert_eq!(uploaded, main.disk_consistent_lsn(), "round {round}");
        assert!(
            uploaded > last_uploaded,
            "round {round}: {uploaded} after {last_uploaded}"
        );
        last_uploaded = uploaded;
        if let Some((branch, _)) = &branch_model {
            assert_eq!(lsns.get(tenant, branch_id), Some(branch.disk_consistent_lsn()));
        }
    }
    assert!(main.gc_cutoff_lsn() > START, "GC moved the cutoff");
    let (branch, branch_model) = branch_model.expect("branched");
    let uploaded = (
        lsns.get(tenant, main_id).expect("main uploaded"),
        lsns.get(tenant, branch_id).expect("branch uploaded"),
    );
    // Ingested but never flushed: not in the remote copy.
    for _ in 0..3 {
        model.write(&main, n);
        n += 1;
    }
    drop(branch);
    Written {
        main: model,
        branch: branch_model,
        main_id,
        branch_id,
        uploaded,
    }
}

/// The layer files in a local timeline directory.
fn local_layer_files(timeline: &Timeline) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(timeline.dir()) {
        Ok(entries) => entries
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| is_layer_name(name))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// Reads every block at `lsn` (a commit of the model) from many readers at once: half inline in async tasks
/// (on the runtime's workers, as the page service does), half on blocking threads.
async fn read_all_at_once(timeline: &Arc<Timeline>, model: &Model, lsn: Lsn) {
    let pages = model
        .history
        .iter()
        .find(|(l, _)| *l == lsn)
        .map(|(_, pages)| pages.clone())
        .expect("a commit of the model");
    let mut tasks = Vec::new();
    for reader in 0..8u32 {
        let (timeline, pages) = (Arc::clone(timeline), pages.clone());
        let read = move || {
            for block in (0..BLOCKS).map(|b| (b + reader) % BLOCKS) {
                let page = timeline
                    .get_page(Key::page(block), lsn)
                    .unwrap_or_else(|e| panic!("reader {reader}: block {block} at {lsn}: {e}"));
                let expected = pages.get(&block).cloned().unwrap_or_else(|| vec![0; PAGE_SIZE_BYTES]);
                assert!(page[..] == expected[..], "reader {reader}: block {block} at {lsn}");
            }
        };
        tasks.push(if reader % 2 == 0 {
            tokio::spawn(async move { read() })
        } else {
            tokio::task::spawn_blocking(read)
        });
    }
    for task in tasks {
        task.await.expect("reader");
    }
}

/// Rebuilds `data_dir` from `remote` through `runner::open` and checks every page at every LSN up to the
/// uploaded one against the model and the original. Checks no layer was downloaded before the first read;
/// returns the rebuilt manager and how many layer files the reads brought down.
async fn rebuild_and_compare(
    data_dir: &Path,
    remote: Arc<RemoteStorage>,
    original: &TenantManager,
    tenant: TenantId,
    written: &Written,
) -> (Arc<TenantManager>, usize) {
    let mut config = PageserverConfig::new(data_dir.to_path_buf(), Vec::new());
    config.timeline = timeline_config();
    config.remote = Some(remote);
    let rebuilt = runner::open(&config).await.expect("rebuild");
    assert_eq!(rebuilt.tenant_ids(), vec![tenant]);
    let ids = [written.main_id, written.branch_id];
    let timelines: Vec<Arc<Timeline>> = ids
        .iter()
        .map(|id| rebuilt.timeline(tenant, *id).expect("rebuilt timeline"))
        .collect();
    for timeline in &timelines {
        assert!(!timeline.layer_descs().is_empty(), "the metadata names layers");
        assert_eq!(
            local_layer_files(timeline),
            Vec::<String>::new(),
            "no layer before the first read"
        );
    }
    read_all_at_once(&timelines[0], &written.main, written.uploaded.0).await;
    read_all_at_once(&timelines[1], &written.branch, written.uploaded.1).await;
    let mut checked = 0;
    for (id, model, uploaded) in [
        (written.main_id, &written.main, written.uploaded.0),
        (written.branch_id, &written.branch, written.uploaded.1),
    ] {
        let copy = rebuilt.timeline(tenant, id).expect("rebuilt timeline");
        let source = original.timeline(tenant, id).expect("original timeline");
        assert_eq!(copy.disk_consistent_lsn(), uploaded, "rebuilt at the uploaded LSN");
        assert_eq!(copy.last_record_lsn(), uploaded);
        assert_eq!(copy.gc_cutoff_lsn(), source.gc_cutoff_lsn());
        assert_eq!(copy.start_lsn(), source.start_lsn());
        let readable = copy.gc_cutoff_lsn().max(copy.start_lsn())..=uploaded;
        checked += check_pages(&copy, model, readable.clone(), "rebuilt");
        check_pages(&source, model, readable, "original");
    }
    // The branch reads its parent below the branch point, also after the rebuild.
    let branch = rebuilt.timeline(tenant, written.branch_id).expect("branch");
    let (ancestor, point) = branch.ancestor().expect("a branch");
    assert_eq!(ancestor.id(), written.main_id);
    assert!(branch.get_page(Key::page(0), point).is_ok());
    assert!(checked > 100, "checked {checked} pages");
    let mut fetched = 0;
    for timeline in &timelines {
        let names = local_layer_files(timeline);
        let named: Vec<String> = timeline.layer_descs().iter().map(|d| d.file_name()).collect();
        assert!(
            names.iter().all(|n| named.contains(n)),
            "only named layers come down: {names:?}"
        );
        fetched += names.len();
    }
    assert!(fetched > 0, "the reads fetched layers");
    (rebuilt, fetched)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploaded_tenant_rebuilds_with_the_same_pages() {
    let root = tempfile::tempdir().expect("tempdir");
    let remote_dir = root.path().join("remote");
    std::fs::create_dir_all(&remote_dir).expect("remote dir");
    let (remote, checker) = checked_remote(&remote_dir);
    let manager = open_manager(&root.path().join("ps1"));
    let mut uploader = Uploader::new(Arc::clone(&manager), Arc::clone(&remote), UploaderConfig::default());
    checker.lsns.set(uploader.remote_consistent_lsns()).expect("set once");
    let tenant = TenantId(0x7E);
    let written = write_upload_rounds(&manager, &mut uploader, tenant).await;
    assert!(checker.checks.load(Ordering::Relaxed) > 50, "the checker ran");
    assert!(
        checker.multipart_puts.load(Ordering::Relaxed) > 0,
        "large layers went up in parts"
    );

    // Compacted-away and collected layers are gone from the remote too.
    let main = manager.timeline(tenant, written.main_id).expect("main");
    let mut remote_layers: Vec<String> = std::fs::read_dir(
        remote_dir
            .join("tenants")
            .join(tenant.to_string())
            .join("timelines")
            .join(written.main_id.to_string()),
    )
    .expect("remote timeline dir")
    .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
    .filter(|name| name.starts_with("l0_") || name.starts_with("l1_") || name.starts_with("img_"))
    .collect();
    let mut local_layers: Vec<String> = main.layer_descs().iter().map(|d| d.file_name()).collect();
    remote_layers.sort();
    local_layers.sort();
    assert_eq!(remote_layers, local_layers);

    let gets_before = checker.layer_gets.load(Ordering::Relaxed);
    let (rebuilt, fetched) = rebuild_and_compare(
        &root.path().join("ps2"),
        Arc::clone(&remote),
        &manager,
        tenant,
        &written,
    )
    .await;
    assert_eq!(
        checker.layer_gets.load(Ordering::Relaxed) - gets_before,
        fetched as u64,
        "each layer downloaded once, by concurrent readers too"
    );
    drop(rebuilt);

    // A restart with the local disk intact reads remote_consistent_lsn back from the remote, uploading nothing.
    let puts = checker.puts.load(Ordering::Relaxed);
    let mut restarted = Uploader::new(Arc::clone(&manager), Arc::clone(&remote), UploaderConfig::default());
    assert_eq!(restarted.remote_consistent_lsns().get(tenant, written.main_id), None);
    restarted.upload_all().await.expect("upload after restart");
    let lsns = restarted.remote_consistent_lsns();
    assert_eq!(lsns.get(tenant, written.main_id), Some(written.uploaded.0));
    assert_eq!(lsns.get(tenant, written.branch_id), Some(written.uploaded.1));
    // Only the branch log goes up again (its uploaded length is not remembered across restarts).
    assert_eq!(checker.puts.load(Ordering::Relaxed), puts + 1);

    // A second rebuild finds the tenant present locally and downloads nothing.
    let rebuilt = pageserver::remote::rebuild(&root.path().join("ps2"), &remote, storage::Durability::Fsync)
        .await
        .expect("rebuild again");
    assert!(rebuilt.is_empty());
}

/// Every error the reads of every block at every LSN of `model` give.
fn read_errors(timeline: &Timeline, model: &Model) -> Vec<storage::StorageError> {
    let mut errors = Vec::new();
    for (lsn, _) in &model.history {
        for block in 0..BLOCKS {
            if let Err(e) = timeline.get_page(Key::page(block), *lsn) {
                errors.push(e);
            }
        }
    }
    errors
}

// A current-thread runtime: the reads below run on its only thread, which must not wait for a download that
// needs that thread.
#[tokio::test]
async fn layers_on_demand_from_a_current_thread_runtime_and_after_local_loss() {
    let root = tempfile::tempdir().expect("tempdir");
    let remote_dir = root.path().join("remote");
    std::fs::create_dir_all(&remote_dir).expect("remote dir");
    let (remote, checker) = checked_remote(&remote_dir);
    let manager = open_manager(&root.path().join("ps1"));
    let mut uploader = Uploader::new(Arc::clone(&manager), Arc::clone(&remote), UploaderConfig::default());
    let (tenant, id) = (TenantId(0xC7), TimelineId(0xD8));
    manager.create_tenant(tenant).expect("tenant");
    let timeline = manager
        .create_timeline(tenant, id, NewTimeline::Root { start_lsn: START })
        .expect("timeline");
    let mut model = Model::new(START);
    for n in 0..30 {
        model.write(&timeline, n);
        if n % 6 == 5 {
            timeline.checkpoint().expect("checkpoint");
        }
    }
    uploader.upload_all().await.expect("upload");
    drop(timeline);

    let mut config = PageserverConfig::new(root.path().join("ps2"), Vec::new());
    config.timeline = timeline_config();
    config.remote = Some(Arc::clone(&remote));
    let rebuilt = runner::open(&config).await.expect("rebuild");
    let copy = rebuilt.timeline(tenant, id).expect("timeline");
    assert!(local_layer_files(&copy).is_empty(), "no layer before the first read");
    let all = START..=model.lsn;
    check_pages(&copy, &model, all.clone(), "read on a current-thread runtime");
    let fetched = local_layer_files(&copy);
    assert!(!fetched.is_empty());
    assert_eq!(checker.layer_gets.load(Ordering::Relaxed), fetched.len() as u64);

    // A layer lost locally is fetched again (a tenant present locally has a fetcher too).
    let lost = copy.dir().join(&fetched[0]);
    drop(copy);
    drop(rebuilt);
    std::fs::remove_file(&lost).expect("lose a layer");
    let reopened = runner::open(&config).await.expect("reopen");
    let copy = reopened.timeline(tenant, id).expect("timeline");
    check_pages(&copy, &model, all.clone(), "after losing a layer locally");
    assert!(lost.exists(), "fetched again");

    // Lost locally and missing from the remote: the reads that need it fail with `Fetch` naming it; the others
    // are served.
    drop(copy);
    drop(reopened);
    std::fs::remove_file(&lost).expect("lose the layer again");
    let remote_object = remote_dir
        .join("tenants")
        .join(tenant.to_string())
        .join("timelines")
        .join(id.to_string())
        .join(&fetched[0]);
    let aside = root.path().join("aside");
    std::fs::rename(&remote_object, &aside).expect("hide the remote layer");
    let reopened = runner::open(&config).await.expect("reopen without the layer");
    let copy = reopened.timeline(tenant, id).expect("timeline");
    let errors = read_errors(&copy, &model);
    assert!(!errors.is_empty(), "some reads need the missing layer");
    for error in &errors {
        match error {
            storage::StorageError::Fetch { file, reason } => {
                assert_eq!(file, &lost, "names the layer");
                assert!(reason.contains("remote"), "{reason}");
            }
            other => panic!("expected a fetch error, got {other}"),
        }
    }
    assert!(
        errors.len() < model.history.len() * BLOCKS as usize,
        "reads not needing it are served"
    );
    assert!(!lost.exists());
    // A rebuild from a remote whose metadata names a missing layer refuses to start.
    let mut fresh = config.clone();
    fresh.data_dir = root.path().join("ps3");
    let refused = runner::open(&fresh)
        .await
        .err()
        .expect("a rebuild from a broken remote fails");
    assert!(refused.to_string().contains("lacks"), "{refused}");
    // Back in the remote: the same pageserver reads it.
    std::fs::rename(&aside, &remote_object).expect("restore the remote layer");
    check_pages(&copy, &model, all, "after the remote layer is back");
}

fn remote_files(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path.display().to_string());
            }
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_reach_the_remote() {
    let root = tempfile::tempdir().expect("tempdir");
    let remote_dir = root.path().join("remote");
    std::fs::create_dir_all(&remote_dir).expect("remote dir");
    let (remote, checker) = checked_remote(&remote_dir);
    let manager = open_manager(&root.path().join("ps"));
    let mut uploader = Uploader::new(Arc::clone(&manager), Arc::clone(&remote), UploaderConfig::default());
    checker.lsns.set(uploader.remote_consistent_lsns()).expect("set once");
    let (kept, gone) = (TenantId(1), TenantId(2));
    let (root_id, branch_id) = (TimelineId(0x10), TimelineId(0x20));
    for tenant in [kept, gone] {
        manager.create_tenant(tenant).expect("tenant");
        let timeline = manager
            .create_timeline(tenant, root_id, NewTimeline::Root { start_lsn: START })
            .expect("timeline");
        let mut model = Model::new(START);
        for n in 0..5 {
            model.write(&timeline, n);
        }
        timeline.checkpoint().expect("checkpoint");
        let branch = manager
            .create_timeline(
                tenant,
                branch_id,
                NewTimeline::Branch {
                    ancestor: root_id,
                    point: BranchPoint::Latest,
                },
            )
            .expect("branch");
        let mut branch_model = Model::new(branch.start_lsn());
        branch_model.write(&branch, 9);
        branch.checkpoint().expect("checkpoint");
    }
    uploader.upload_all().await.expect("upload");
    let tenant_dir = |t: TenantId| remote_dir.join("tenants").join(t.to_string());
    let branch_dir = tenant_dir(kept).join("timelines").join(branch_id.to_string());
    assert!(branch_dir.join("metadata").exists());
    assert!(!remote_files(&tenant_dir(gone)).is_empty());

    manager.delete_timeline(kept, branch_id).expect("delete timeline");
    manager.delete_tenant(gone).expect("delete tenant");
    uploader.upload_all().await.expect("upload deletions");
    assert!(remote_files(&branch_dir).is_empty(), "{:?}", remote_files(&branch_dir));
    let log = std::fs::read(tenant_dir(kept).join("branches.log")).expect("remote log");
    assert_eq!(live(&decode_branch_log(&log)), vec![root_id]);
    assert!(tenant_dir(kept)
        .join("timelines")
        .join(root_id.to_string())
        .join("metadata")
        .exists());
    assert!(
        remote_files(&tenant_dir(gone)).is_empty(),
        "{:?}",
        remote_files(&tenant_dir(gone))
    );
    let lsns = uploader.remote_consistent_lsns();
    assert!(lsns.get(kept, root_id).is_some());
    assert_eq!(lsns.get(kept, branch_id), None);
    assert_eq!(lsns.get(gone, root_id), None);

    // A rebuild finds only what is left.
    let mut config = PageserverConfig::new(root.path().join("rebuilt"), Vec::new());
    config.timeline = timeline_config();
    config.remote = Some(remote);
    let rebuilt = runner::open(&config).await.expect("rebuild");
    assert_eq!(rebuilt.tenant_ids(), vec![kept]);
    let tenant = rebuilt.tenant(kept).expect("tenant");
    assert_eq!(tenant.timelines().len(), 1);
}

/// A detached tenant (moved to another pageserver) leaves this pageserver's disk, and its remote copy stays whole:
/// the uploader forgets it rather than deleting it, and a rebuild from the remote brings it back, pages and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_tenant_keeps_its_remote_copy() {
    let root = tempfile::tempdir().expect("tempdir");
    let remote_dir = root.path().join("remote");
    std::fs::create_dir_all(&remote_dir).expect("remote dir");
    let (remote, checker) = checked_remote(&remote_dir);
    let manager = open_manager(&root.path().join("ps"));
    let mut uploader = Uploader::new(Arc::clone(&manager), Arc::clone(&remote), UploaderConfig::default());
    checker.lsns.set(uploader.remote_consistent_lsns()).expect("set once");
    let (moved, stays) = (TenantId(3), TenantId(4));
    let timeline_id = TimelineId(0x30);
    let mut models = Vec::new();
    for tenant in [moved, stays] {
        manager.create_tenant(tenant).expect("tenant");
        let timeline = manager
            .create_timeline(tenant, timeline_id, NewTimeline::Root { start_lsn: START })
            .expect("timeline");
        let mut model = Model::new(START);
        for n in 0..5 {
            model.write(&timeline, n);
        }
        timeline.checkpoint().expect("checkpoint");
        models.push(model);
    }
    uploader.upload_all().await.expect("upload");
    let tenant_dir = |t: TenantId| remote_dir.join("tenants").join(t.to_string());
    let mut before = remote_files(&tenant_dir(moved));
    before.sort();
    assert!(!before.is_empty());
    let local = manager.tenant(moved).expect("tenant").dir().to_path_buf();

    manager.detach_tenant(moved).expect("detach");
    assert!(matches!(
        manager.detach_tenant(moved),
        Err(pageserver::tenants::PageserverError::TenantNotFound(_))
    ));
    assert!(!local.exists(), "the local files go");
    assert_eq!(manager.tenant_ids(), vec![stays]);
    uploader.upload_all().await.expect("upload after the detach");
    let mut after = remote_files(&tenant_dir(moved));
    after.sort();
    assert_eq!(after, before, "the remote copy is untouched");
    assert_eq!(uploader.remote_consistent_lsns().get(moved, timeline_id), None);

    // Another pageserver rebuilds it from the remote with the same pages.
    let mut config = PageserverConfig::new(root.path().join("target"), Vec::new());
    config.timeline = timeline_config();
    config.remote = Some(remote);
    let rebuilt = runner::open(&config).await.expect("rebuild");
    let mut tenants = rebuilt.tenant_ids();
    tenants.sort();
    assert_eq!(tenants, vec![moved, stays]);
    let timeline = rebuilt.timeline(moved, timeline_id).expect("timeline");
    let lsn = models[0].lsn;
    assert!(check_pages(&timeline, &models[0], START..=lsn, "rebuilt after the detach") > 0);
}

/// A move's storage steps: a second pageserver (its own id) attaches a tenant from the remote as a secondary,
/// reads its pages (layers on first use) and ingests more, uploading nothing; the first detaches it; the second
/// becomes the owner and uploads, marking the tenant with its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_uploads_nothing_until_it_owns_the_tenant() {
    let root = tempfile::tempdir().expect("tempdir");
    let remote_dir = root.path().join("remote");
    std::fs::create_dir_all(&remote_dir).expect("remote dir");
    let (remote, checker) = checked_remote(&remote_dir);
    let source = open_manager(&root.path().join("source"));
    let mut source_uploader = Uploader::new(Arc::clone(&source), Arc::clone(&remote), UploaderConfig::default());
    checker
        .lsns
        .set(source_uploader.remote_consistent_lsns())
        .expect("set once");
    let (tenant, timeline_id) = (TenantId(5), TimelineId(0x50));
    source.create_tenant(tenant).expect("tenant");
    let timeline = source
        .create_timeline(tenant, timeline_id, NewTimeline::Root { start_lsn: START })
        .expect("timeline");
    let mut model = Model::new(START);
    for n in 0..6 {
        model.write(&timeline, n);
    }
    timeline.checkpoint().expect("checkpoint");
    source_uploader.upload_all().await.expect("upload");
    let tenant_dir = remote_dir.join("tenants").join(tenant.to_string());
    let listing = || {
        let mut files = remote_files(&tenant_dir);
        files.sort();
        files
            .iter()
            .map(|f| (f.clone(), std::fs::read(f).expect("read")))
            .collect::<Vec<_>>()
    };
    let uploaded = listing();

    // The target: its own id; at start it rebuilds nothing (the tenant is not marked with its id).
    let target_remote = Arc::new(
        RemoteStorage::from_store(
            Arc::new(LocalFileSystem::new_with_prefix(&remote_dir).expect("local store")),
            "",
            remote_config(),
        )
        .with_owner(Some("ps2".to_owned())),
    );
    let mut config = PageserverConfig::new(root.path().join("target"), Vec::new());
    config.timeline = timeline_config();
    config.remote = Some(Arc::clone(&target_remote));
    let target = runner::open(&config).await.expect("open the target");
    assert!(target.tenant_ids().is_empty(), "nothing rebuilt at start");
    let mut target_uploader = Uploader::new(Arc::clone(&target), target_remote, UploaderConfig::default());

    target.attach_tenant(tenant, true).await.expect("attach as a secondary");
    assert!(target.is_secondary(tenant));
    let attached = target.timeline(tenant, timeline_id).expect("timeline");
    let lsn = model.lsn;
    assert!(check_pages(&attached, &model, START..=lsn, "the secondary") > 0);
    // It ingests past the remote copy (as from the safekeepers) and flushes: nothing is uploaded.
    let mut target_model = model.clone();
    for n in 6..10 {
        target_model.write(&attached, n);
    }
    attached.checkpoint().expect("checkpoint");
    target_uploader.upload_all().await.expect("upload round");
    assert_eq!(listing(), uploaded, "a secondary uploads nothing");

    // The source detaches; the target becomes the owner and uploads, marked with its id.
    source.detach_tenant(tenant).expect("detach");
    source_uploader.upload_all().await.expect("the source's round");
    assert_eq!(listing(), uploaded, "the detached source deletes nothing");
    target.attach_tenant(tenant, false).await.expect("own it");
    assert!(!target.is_secondary(tenant));
    target_uploader.upload_all().await.expect("the owner's upload");
    assert_eq!(std::fs::read_to_string(tenant_dir.join("owner")).expect("owner"), "ps2");
    let meta = decode_metadata(
        &std::fs::read(
            tenant_dir
                .join("timelines")
                .join(timeline_id.to_string())
                .join("metadata"),
        )
        .expect("metadata"),
    );
    assert_eq!(
        meta.disk_consistent_lsn,
        attached.disk_consistent_lsn(),
        "the owner's index uploaded"
    );
    assert!(meta.disk_consistent_lsn > lsn);
    // A missing tenant is NOT_FOUND, not an empty one.
    assert!(matches!(
        target.attach_tenant(TenantId(0x77), true).await,
        Err(pageserver::tenants::PageserverError::TenantNotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_pageserver_uploads_and_reports_remote_consistent_lsn() {
    use proto::pageserver as pb;
    let root = tempfile::tempdir().expect("tempdir");
    let remote = Arc::new(
        RemoteStorage::from_url(
            &format!("file://{}", root.path().join("remote").display()),
            remote_config(),
        )
        .expect("remote"),
    );
    let mut config = PageserverConfig::new(root.path().join("ps"), Vec::new());
    config.timeline = TimelineConfig {
        checkpoint_timeout_ms: 50,
        ..timeline_config()
    };
    config.background.flush_interval_ms = 20;
    config.remote = Some(remote);
    config.uploader.scan_interval_ms = 100;
    let manager = runner::open(&config).await.expect("open");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(runner::run(Arc::clone(&manager), config, listener, async {
        let _ = stop_rx.await;
    }));
    let mut client = pb::management_client::ManagementClient::connect(format!("http://{address}"))
        .await
        .expect("connect");
    let (tenant, timeline_id) = (TenantId(0x55), TimelineId(0x66));
    client
        .create_tenant(pb::TenantRequest {
            tenant_id: tenant.to_string(),
        })
        .await
        .expect("create tenant");
    let timeline_ref = pb::TimelineRef {
        tenant_id: tenant.to_string(),
        timeline_id: timeline_id.to_string(),
    };
    let info = client
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline_ref.clone()),
            ancestor_timeline_id: String::new(),
            ancestor_lsn: 0,
            start_lsn: START.0,
        })
        .await
        .expect("create timeline")
        .into_inner();
    assert_eq!(info.remote_consistent_lsn, START.0, "nothing uploaded: the start");
    let timeline = manager.timeline(tenant, timeline_id).expect("timeline");
    let mut model = Model::new(START);
    for round in 0..3u64 {
        for n in 0..4 {
            model.write(&timeline, round * 10 + n);
        }
        manager.notify_ingested(tenant, &timeline);
        let target = model.lsn;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let info = client
                .get_timeline_info(timeline_ref.clone())
                .await
                .expect("info")
                .into_inner();
            assert!(info.remote_consistent_lsn <= info.disk_consistent_lsn);
            if info.remote_consistent_lsn >= target.0 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "round {round}: remote_consistent_lsn {} never reached {target}",
                Lsn(info.remote_consistent_lsn)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // A child at the newest LSN, more WAL after it (its abandoned future), then the seal: it answers durable only
    // once the remote copy holds everything up to the child's branch point, and the remote branch log then
    // records the seal (a rebuild follows no WAL for it either).
    let child = TimelineId(0x67);
    let end = model.lsn;
    client
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(pb::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: child.to_string(),
            }),
            ancestor_timeline_id: timeline_id.to_string(),
            ancestor_lsn: end.0,
            start_lsn: 0,
        })
        .await
        .expect("branch");
    for n in 0..4 {
        model.write(&timeline, 100 + n);
    }
    manager.notify_ingested(tenant, &timeline);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let sealed = client
            .seal_timeline(timeline_ref.clone())
            .await
            .expect("seal")
            .into_inner();
        let info = sealed.info.expect("info");
        assert_eq!(sealed.end_lsn, end.0, "the child's branch point");
        assert_eq!(info.sealed_lsn, end.0);
        assert!(info.disk_consistent_lsn >= end.0, "flushed before it answers");
        if sealed.durable {
            assert!(
                info.remote_consistent_lsn >= end.0,
                "durable only once the remote holds the end: {}",
                Lsn(info.remote_consistent_lsn)
            );
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the seal never became durable");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let remote_log = root
        .path()
        .join("remote/tenants")
        .join(tenant.to_string())
        .join("branches.log");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read(&remote_log).is_ok_and(|bytes| {
        decode_branch_log(&bytes).iter().any(|entry| {
            matches!(entry, BranchLogEntry::Seal { timeline_id: sealed, end_lsn } if *sealed == timeline_id && *end_lsn == end)
        })
    }) {
        assert!(tokio::time::Instant::now() < deadline, "the remote branch log never recorded the seal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_tx.send(());
    server.await.expect("join").expect("serve");
}

// ---------------------------------------------------------------------------------------------- S3

/// Serves `dir` as an S3 endpoint (s3s-fs) on 127.0.0.1 until the returned sender is dropped.
async fn start_s3_server(dir: &Path, access_key: &str, secret_key: &str) -> (String, tokio::sync::oneshot::Sender<()>) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder as ConnBuilder;
    let fs = s3s_fs::FileSystem::new(dir).expect("s3s-fs");
    let service = {
        let mut builder = s3s::service::S3ServiceBuilder::new(fs);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(access_key, secret_key));
        builder.build()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        loop {
            let socket = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((socket, _)) => socket,
                    Err(_) => continue,
                },
                _ = &mut stop_rx => return,
            };
            let connection = http
                .serve_connection(TokioIo::new(socket), service.clone())
                .into_owned();
            tokio::spawn(async move {
                let _ = connection.await;
            });
        }
    });
    (format!("http://{address}"), stop_tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_round_trip_through_a_real_s3_server() {
    let root = tempfile::tempdir().expect("tempdir");
    let s3_dir = root.path().join("s3");
    std::fs::create_dir_all(s3_dir.join("bkt")).expect("bucket dir");
    let (endpoint, _stop) = start_s3_server(&s3_dir, "test-access-key", "test-secret-key").await;
    let env = [
        ("AWS_ENDPOINT", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test-access-key"),
        ("AWS_SECRET_ACCESS_KEY", "test-secret-key"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ALLOW_HTTP", "true"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    // s3s-fs keeps each object's attributes in a file at its root named after the base64 of bucket and key:
    // with our keys (up to ~160 bytes) that name fits NAME_MAX (255) only with a three-letter bucket (the shortest S3 allows) and a one-letter prefix,
    // and not at all for a multipart upload's (which adds the upload id). So: short names, single-request
    // uploads (multipart is covered against the local store above).
    let config = RemoteConfig {
        request_timeout_ms: 10_000,
        ..RemoteConfig::default()
    };
    let remote = Arc::new(RemoteStorage::from_url_and_env("s3://bkt/p", env, config).expect("s3 remote"));
    let manager = open_manager(&root.path().join("ps1"));
    let mut uploader = Uploader::new(Arc::clone(&manager), Arc::clone(&remote), UploaderConfig::default());
    let tenant = TenantId(0x53);
    let written = write_upload_rounds(&manager, &mut uploader, tenant).await;
    assert!(
        s3_dir
            .join("bkt/p/tenants")
            .join(tenant.to_string())
            .join("branches.log")
            .exists(),
        "objects live under the prefix"
    );
    rebuild_and_compare(&root.path().join("ps2"), remote, &manager, tenant, &written).await;
}

/// The remote layer names of `timeline`'s remote metadata.
fn remote_layer_names(tenant_dir: &Path, timeline: TimelineId) -> Vec<String> {
    let meta = decode_metadata(
        &std::fs::read(tenant_dir.join("timelines").join(timeline.to_string()).join("metadata")).expect("metadata"),
    );
    let mut names: Vec<String> = meta
        .layers
        .iter()
        .map(storage::layer::desc::LayerDesc::file_name)
        .collect();
    names.sort();
    names
}

/// The layer-deletion gap of a move: the target attaches from the remote index as a secondary (layers on first
/// use); the source, its remote deletions held, then ingests, flushes, compacts and collects, and uploads an
/// index that no longer names the layers the target's index names. They stay on the remote, and the secondary
/// reads every page of every LSN it attached with. The source's detach releases the hold; the owner's first
/// upload deletes the layers its own index does not name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_source_deletes_no_layer_a_secondary_reads() {
    let root = tempfile::tempdir().expect("tempdir");
    let remote_dir = root.path().join("remote");
    std::fs::create_dir_all(&remote_dir).expect("remote dir");
    let (remote, checker) = checked_remote(&remote_dir);
    let source = open_manager(&root.path().join("source"));
    let mut source_uploader = Uploader::new(Arc::clone(&source), Arc::clone(&remote), UploaderConfig::default());
    checker
        .lsns
        .set(source_uploader.remote_consistent_lsns())
        .expect("set once");
    let (tenant, timeline_id) = (TenantId(6), TimelineId(0x60));
    source.create_tenant(tenant).expect("tenant");
    let timeline = source
        .create_timeline(tenant, timeline_id, NewTimeline::Root { start_lsn: START })
        .expect("timeline");
    let mut model = Model::new(START);
    let mut n = 0;
    for _ in 0..4 {
        for _ in 0..6 {
            model.write(&timeline, n);
            n += 1;
        }
        timeline.checkpoint().expect("checkpoint");
    }
    source_uploader.upload_all().await.expect("upload");
    let tenant_dir = remote_dir.join("tenants").join(tenant.to_string());
    let attached_index = remote_layer_names(&tenant_dir, timeline_id);
    assert!(attached_index.len() >= 4, "several L0 layers: {attached_index:?}");

    // The move: the source holds its deletions (durably), then the target attaches as a secondary.
    source.hold_remote_deletions(tenant, true).expect("hold");
    let target_remote = Arc::new(
        RemoteStorage::from_store(
            Arc::new(LocalFileSystem::new_with_prefix(&remote_dir).expect("local store")),
            "",
            remote_config(),
        )
        .with_owner(Some("ps2".to_owned())),
    );
    let mut config = PageserverConfig::new(root.path().join("target"), Vec::new());
    config.timeline = timeline_config();
    config.remote = Some(Arc::clone(&target_remote));
    let target = runner::open(&config).await.expect("open the target");
    let mut target_uploader = Uploader::new(Arc::clone(&target), target_remote, UploaderConfig::default());
    target.attach_tenant(tenant, true).await.expect("attach as a secondary");
    let attached = target.timeline(tenant, timeline_id).expect("timeline");
    assert!(local_layer_files(&attached).is_empty(), "layers come on first use");

    // The source goes on: more WAL, a compaction and a GC, each uploaded.
    let attached_model = model.clone();
    for round in 0..3 {
        for _ in 0..6 {
            model.write(&timeline, n);
            n += 1;
        }
        timeline.checkpoint().expect("checkpoint");
        timeline.compact().expect("compact");
        if round == 2 {
            timeline.gc(now_us()).expect("gc");
        }
        source_uploader.upload_all().await.expect("upload");
    }
    assert!(timeline.gc_cutoff_lsn() > START, "GC moved the cutoff");
    let source_index = remote_layer_names(&tenant_dir, timeline_id);
    let superseded: Vec<&String> = attached_index.iter().filter(|n| !source_index.contains(n)).collect();
    assert!(
        !superseded.is_empty(),
        "the compaction replaced layers the target's index names"
    );
    let remote_layers = |dir: &Path| -> Vec<String> {
        remote_files(dir)
            .iter()
            .filter_map(|f| Path::new(f).file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| is_layer_name(n))
            .collect()
    };
    let on_remote = remote_layers(&tenant_dir);
    for name in &superseded {
        assert!(on_remote.contains(name), "held: {name} kept on the remote");
    }
    // The source restarts: the hold survives it.
    drop(timeline);
    drop(source_uploader);
    drop(source);
    let source = open_manager(&root.path().join("source"));
    assert!(source.remote_deletions_held(tenant), "the hold is durable");
    let mut source_uploader = Uploader::new(Arc::clone(&source), Arc::clone(&remote), UploaderConfig::default());
    source_uploader
        .upload_all()
        .await
        .expect("the source's round after its restart");
    let on_remote = remote_layers(&tenant_dir);
    for name in &superseded {
        assert!(
            on_remote.contains(name),
            "held after a restart: {name} kept on the remote"
        );
    }

    // The secondary reads every page at every LSN it attached with (its layers fetched now).
    let lsn = attached_model.lsn;
    let checked = check_pages(
        &attached,
        &attached_model,
        START..=lsn,
        "the secondary after the source's GC",
    );
    assert!(checked >= 24 * BLOCKS as usize, "{checked} pages read");
    assert!(!local_layer_files(&attached).is_empty(), "fetched from the remote");

    // The secondary ingests what the source did (as from the safekeepers).
    let mut replay = attached_model.clone();
    for k in 24..n {
        replay.write(&attached, k);
    }
    assert_eq!(replay.lsn, model.lsn, "the same WAL");

    // The source detaches (its hold released with it); the target owns the tenant and its first upload deletes
    // the remote layers its index does not name.
    source.detach_tenant(tenant).expect("detach");
    assert!(!source.remote_deletions_held(tenant), "a detach releases the hold");
    source_uploader.upload_all().await.expect("the detached source's round");
    target.attach_tenant(tenant, false).await.expect("own it");
    target_uploader.upload_all().await.expect("the owner's upload");
    let owner_index = remote_layer_names(&tenant_dir, timeline_id);
    let mut on_remote = remote_layers(&tenant_dir);
    on_remote.sort();
    assert_eq!(
        on_remote, owner_index,
        "the owner's upload leaves exactly its index's layers"
    );
    assert_eq!(std::fs::read_to_string(tenant_dir.join("owner")).expect("owner"), "ps2");
}
