//! Reads larger than the compute's memory (issue 12): full scans and random point reads through Cambium's compute
//! and through local SQLite, side by side in one run.
//!
//! In process: three safekeeper nodes and a pageserver serving real gRPC on loopback (as the `sql` bench), and
//! the compute's `RemotePageStore`s sharing one `HostCache` (memory budget, local file cache). A table `big` of
//! 4000-byte rows (`SCAN_TABLE_MIB`, default 256 MiB: 2 rows a page) is loaded through the VFS in 16 MiB
//! transactions; the memory budget is a quarter of it (`SCAN_BUDGET_PERCENT`), the file cache twice it. Query:
//! `SELECT sum(length(b)) FROM big` (checked). Sections:
//!
//! - local SQLite: the same rows in a file (8 KiB pages), the file in the OS page cache (one untimed scan first);
//! - cold: the pageserver restarted (its page cache empty; layers in the OS page cache) and a new compute with
//!   an empty memory and an empty file cache: every page comes from the pageserver, prefetched;
//! - warm: the next scans, memory holding the last quarter and the file cache the rest;
//! - a restarted compute over the file cache the scans left (what memory held at the restart is not in it);
//! - the parent's warm scan, then the first scan on a new branch of it at its latest LSN;
//! - random point reads by key with a budget of 10 % of the data: without a file cache (a miss is a `GetPage`),
//!   with the file cache holding the table, and local SQLite.
//!
//! Prints a table (median of `SCAN_RUNS` runs, default 3, for the repeatable rows) and where reads were served
//! from in each section. `cargo bench -p cambium-benches --bench scan` (release; set `CAMBIUM_BENCH_DATA` to
//! choose the disk).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_benches::SplitMix64;
use compute::cache::{FileCacheConfig, HostCache, HostCacheConfig};
use compute::metrics::METRICS;
use compute::remote_store::{RemotePageStore, RemotePageStoreConfig};
use compute::rusqlite::{params, Connection};
use compute::vfs::{open_connection, register_database, unregister_database};
use proto::pageserver as ps;
use proto::safekeeper as sk;
use safekeeper::filestore::FileStoreConfig;
use safekeeper::node::{NodeConfig, SafekeeperNode};
use storage::{Lsn, TenantId, TimelineId};

const START: Lsn = Lsn(0x100_0000);
const TENANT: TenantId = TenantId(0x5C_0001);
const ROOT: TimelineId = TimelineId(0x5C_0002);
/// Branches get ids from here up.
const BRANCH_FIRST: u128 = 0x5C_1000;
const ROW_BYTES: i64 = 4000;
const ROWS_PER_TRANSACTION: i64 = 4096;
const SCAN: &str = "SELECT sum(length(b)) FROM big";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The pageserver, restartable on its data directory.
struct Pageserver {
    config: pageserver::runner::PageserverConfig,
    address: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Pageserver {
    async fn start(config: pageserver::runner::PageserverConfig) -> Pageserver {
        let manager = pageserver::runner::open(&config).await.expect("open pageserver");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn({
            let config = config.clone();
            async move {
                let _ = pageserver::runner::run(manager, config, listener, async move {
                    let _ = stopped.await;
                })
                .await;
            }
        });
        Pageserver {
            config,
            address,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops it (it flushes what it ingested) and starts it again on the same directory: an empty page cache.
    async fn restart(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("pageserver task");
        }
        *self = Pageserver::start(self.config.clone()).await;
    }
}

struct Cluster {
    safekeepers: Vec<String>,
    pageserver: Pageserver,
    _dirs: Vec<tempfile::TempDir>,
    _stop_safekeepers: tokio::sync::watch::Sender<bool>,
}

async fn start_cluster() -> Cluster {
    let mut dirs = Vec::new();
    let mut safekeepers = Vec::new();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    for id in 1..=3u64 {
        let dir = cambium_benches::scratch_dir("scan-sk");
        let config = NodeConfig {
            node_id: id,
            data_dir: dir.path().to_path_buf(),
            store: FileStoreConfig::default(),
        };
        let node = Arc::new(
            tokio::task::spawn_blocking(move || SafekeeperNode::open(config))
                .await
                .expect("join")
                .expect("node"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        safekeepers.push(listener.local_addr().expect("address").to_string());
        let mut stop = stopped.clone();
        tokio::spawn(safekeeper::service::serve(node, listener, async move {
            let _ = stop.wait_for(|s| *s).await;
        }));
        dirs.push(dir);
    }
    let dir = cambium_benches::scratch_dir("scan-ps");
    let config = pageserver::runner::PageserverConfig::new(dir.path().to_path_buf(), safekeepers.clone());
    dirs.push(dir);
    let pageserver = Pageserver::start(config).await;
    let mut management = ps::management_client::ManagementClient::connect(format!("http://{}", pageserver.address))
        .await
        .expect("connect management");
    management
        .create_tenant(ps::TenantRequest {
            tenant_id: TENANT.to_string(),
        })
        .await
        .expect("create tenant");
    let cluster = Cluster {
        safekeepers,
        pageserver,
        _dirs: dirs,
        _stop_safekeepers: stop,
    };
    create_timeline(&cluster, ROOT, None).await;
    cluster
}

/// Creates `timeline` (a root at `START`, or a branch of `ROOT` at an LSN) on the pageserver and the safekeepers.
async fn create_timeline(cluster: &Cluster, timeline: TimelineId, branch_of_root_at: Option<Lsn>) {
    let mut management =
        ps::management_client::ManagementClient::connect(format!("http://{}", cluster.pageserver.address))
            .await
            .expect("connect management");
    let (ancestor, ancestor_lsn, start_lsn) = match branch_of_root_at {
        Some(lsn) => (ROOT.to_string(), lsn.0, 0),
        None => (String::new(), 0, START.0),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let created = management
            .create_timeline(ps::CreateTimelineRequest {
                timeline: Some(ps::TimelineRef {
                    tenant_id: TENANT.to_string(),
                    timeline_id: timeline.to_string(),
                }),
                ancestor_timeline_id: ancestor.clone(),
                ancestor_lsn,
                start_lsn,
            })
            .await;
        match created {
            Ok(_) => break,
            // The pageserver has not ingested the branch point yet.
            Err(status) if status.code() == tonic::Code::OutOfRange && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => panic!("create timeline: {status}"),
        }
    }
    for address in &cluster.safekeepers {
        let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{address}"))
            .await
            .expect("connect safekeeper");
        client
            .create_timeline(sk::CreateTimelineRequest {
                timeline: Some(sk::TimelineRef {
                    tenant_id: TENANT.to_string(),
                    timeline_id: timeline.to_string(),
                }),
                start_lsn: branch_of_root_at.unwrap_or(START).0,
            })
            .await
            .expect("create safekeeper timeline");
    }
}

fn store_config(cluster: &Cluster, timeline: TimelineId, start: Lsn, cache: &Arc<HostCache>) -> RemotePageStoreConfig {
    let mut config = RemotePageStoreConfig::new(
        cluster.safekeepers.clone(),
        cluster.pageserver.address.clone(),
        TENANT,
        timeline,
        start,
    );
    config.cache = Some(cache.clone());
    config.prefetch.window_pages = env_or("SCAN_PREFETCH_WINDOW", config.prefetch.window_pages);
    config
}

/// Loads `rows` rows of `ROW_BYTES` in transactions of `ROWS_PER_TRANSACTION`.
fn load(connection: &mut Connection, rows: i64) {
    connection
        .execute_batch("CREATE TABLE big (a INTEGER PRIMARY KEY, b TEXT NOT NULL)")
        .expect("create");
    let mut first = 0;
    while first < rows {
        let last = (first + ROWS_PER_TRANSACTION).min(rows) - 1;
        connection
            .execute(
                "WITH RECURSIVE g(x) AS (SELECT ?1 UNION ALL SELECT x + 1 FROM g WHERE x < ?2) \
                 INSERT INTO big SELECT x, hex(randomblob(?3)) FROM g",
                params![first, last, ROW_BYTES / 2],
            )
            .expect("insert");
        first = last + 1;
    }
}

/// One scan, checked; its time.
fn scan(connection: &Connection, rows: i64) -> Duration {
    let started = Instant::now();
    let total: i64 = connection.query_row(SCAN, [], |row| row.get(0)).expect("scan");
    let elapsed = started.elapsed();
    assert_eq!(total, rows * ROW_BYTES);
    elapsed
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

/// `count` random point reads by key; (reads/s, p50, p99).
fn point_reads(connection: &Connection, rows: i64, count: usize) -> (f64, Duration, Duration) {
    let mut statement = connection
        .prepare_cached("SELECT length(b) FROM big WHERE a = ?1")
        .expect("prepare");
    let mut rng = SplitMix64::new(11);
    let mut samples = Vec::with_capacity(count);
    let started = Instant::now();
    for _ in 0..count {
        let key = rng.below(rows as u64) as i64;
        let t = Instant::now();
        let length: i64 = statement.query_row([key], |row| row.get(0)).expect("point read");
        samples.push(t.elapsed());
        assert_eq!(length, ROW_BYTES);
    }
    let total = started.elapsed();
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p) as usize];
    (count as f64 / total.as_secs_f64(), at(0.5), at(0.99))
}

/// Read counters (memory, file, prefetched, GetPage, prefetch wasted, prefetch requested).
#[derive(Clone, Copy, Default)]
struct Sources([u64; 6]);

impl Sources {
    fn now() -> Sources {
        let m = &METRICS;
        Sources([
            m.reads_memory_total.load(Ordering::Relaxed),
            m.reads_file_total.load(Ordering::Relaxed),
            m.reads_prefetch_total.load(Ordering::Relaxed),
            m.reads_pageserver_total.load(Ordering::Relaxed),
            m.prefetch_wasted_pages_total.load(Ordering::Relaxed),
            m.prefetch_requested_pages_total.load(Ordering::Relaxed),
        ])
    }

    /// What happened since `before` (added to `self`).
    fn add_since(&mut self, before: Sources) {
        let now = Sources::now();
        for (total, (a, b)) in self.0.iter_mut().zip(now.0.iter().zip(before.0)) {
            *total += a - b;
        }
    }

    fn describe(&self) -> String {
        let d = self.0;
        format!(
            "memory {}, file {}, prefetched {}, GetPage {} (prefetch requested {}, wasted {})",
            d[0], d[1], d[2], d[3], d[5], d[4]
        )
    }
}

fn fmt(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }
}

struct Sizes {
    rows: i64,
    budget_bytes: usize,
    file_bytes: u64,
    runs: usize,
    point_reads: usize,
}

fn sizes() -> Sizes {
    let table_mib: i64 = if cambium_benches::is_test_mode() {
        4
    } else {
        env_or("SCAN_TABLE_MIB", 256)
    };
    let table_bytes = table_mib << 20;
    let budget_percent: i64 = env_or("SCAN_BUDGET_PERCENT", 25);
    Sizes {
        rows: table_bytes / 4096,
        budget_bytes: (table_bytes * budget_percent / 100) as usize,
        file_bytes: 2 * table_bytes as u64,
        runs: if cambium_benches::is_test_mode() {
            1
        } else {
            env_or("SCAN_RUNS", 3)
        },
        point_reads: if cambium_benches::is_test_mode() { 200 } else { 20_000 },
    }
}

/// What every section uses.
struct Bench {
    sizes: Sizes,
    runtime: tokio::runtime::Runtime,
    cluster: Cluster,
    cache_dir: tempfile::TempDir,
    report: Vec<(String, Duration, String)>,
    /// A new branch's first query, step by step: (step, median, p99, samples).
    first_query: Vec<(&'static str, Duration, Duration, usize)>,
}

/// A compute on one timeline: its host cache, store, and a connection registered as `name`.
struct Compute {
    name: &'static str,
    store: Arc<RemotePageStore>,
    connection: Connection,
    _cache: Arc<HostCache>,
}

impl Drop for Compute {
    fn drop(&mut self) {
        unregister_database(self.name);
    }
}

impl Bench {
    fn cache(&self, budget_bytes: usize, file: bool) -> Arc<HostCache> {
        HostCache::new(&HostCacheConfig {
            memory_budget_bytes: budget_bytes,
            file: file.then(|| FileCacheConfig {
                path: self.cache_dir.path().join("file_cache"),
                size_bytes: self.sizes.file_bytes,
            }),
        })
        .expect("cache")
    }

    fn forget_file_cache(&self) {
        for suffix in ["", ".meta"] {
            let _ = std::fs::remove_file(self.cache_dir.path().join(format!("file_cache{suffix}")));
        }
    }

    fn compute(&self, name: &'static str, timeline: TimelineId, start: Lsn, cache: &Arc<HostCache>) -> Compute {
        let config = store_config(&self.cluster, timeline, start, cache);
        let store = self
            .runtime
            .block_on(RemotePageStore::start(config))
            .expect("start store");
        register_database(name, store.clone()).expect("register");
        let connection = open_connection(name).expect("open");
        Compute {
            name,
            store,
            connection,
            _cache: cache.clone(),
        }
    }

    fn note(&mut self, what: &str, time: Duration, reads: Sources) {
        self.report.push((what.to_owned(), time, reads.describe()));
    }

    /// Cold scans: the pageserver restarted, a new compute with nothing cached; `runs` times.
    fn cold(&mut self, loaded_lsn: Lsn) {
        let mut reads = Sources::default();
        let mut runs = Vec::new();
        for _ in 0..self.sizes.runs {
            self.runtime.block_on(self.cluster.pageserver.restart());
            self.forget_file_cache();
            let cache = self.cache(self.sizes.budget_bytes, true);
            let compute = self.compute("scan_root", ROOT, START, &cache);
            assert_eq!(compute.store.read_lsn(), loaded_lsn);
            let before = Sources::now();
            runs.push(scan(&compute.connection, self.sizes.rows));
            reads.add_since(before);
        }
        self.note("Cambium cold: after a restart, nothing cached", median(runs), reads);
    }

    /// Warm scans, then a restarted compute over the file cache, then new branches of the warm parent (each:
    /// the parent's warm scan, the branch made at the parent's latest LSN, its first scan).
    fn warm_restart_and_branches(&mut self) {
        let rows = self.sizes.rows;
        let cache = self.cache(self.sizes.budget_bytes, true);
        let compute = self.compute("scan_root", ROOT, START, &cache);
        let mut reads = Sources::default();
        let before = Sources::now();
        let warm = median((0..self.sizes.runs).map(|_| scan(&compute.connection, rows)).collect());
        reads.add_since(before);
        self.note("Cambium warm: memory + file cache", warm, reads);
        drop((compute, cache));
        let cache = self.cache(self.sizes.budget_bytes, true);
        let parent = self.compute("scan_root", ROOT, START, &cache);
        let mut reads = Sources::default();
        let before = Sources::now();
        let restarted = scan(&parent.connection, rows);
        reads.add_since(before);
        self.note("Cambium after a restart, file cache kept", restarted, reads);
        let (mut parent_scans, mut branch_scans, mut second_scans) = (Vec::new(), Vec::new(), Vec::new());
        let (mut parent_reads, mut branch_reads) = (Sources::default(), Sources::default());
        for run in 0..self.sizes.runs {
            let before = Sources::now();
            parent_scans.push(scan(&parent.connection, rows));
            parent_reads.add_since(before);
            let branch_lsn = parent.store.read_lsn();
            let branch_id = TimelineId(BRANCH_FIRST + run as u128);
            self.runtime
                .block_on(create_timeline(&self.cluster, branch_id, Some(branch_lsn)));
            let branch = self.compute("scan_branch", branch_id, branch_lsn, &cache);
            let before = Sources::now();
            branch_scans.push(scan(&branch.connection, rows));
            branch_reads.add_since(before);
            second_scans.push(scan(&branch.connection, rows));
        }
        let (parent_warm, branch_first) = (median(parent_scans), median(branch_scans));
        self.note(
            "Cambium parent's warm scan (before each branch)",
            parent_warm,
            parent_reads,
        );
        self.note("Cambium first scan on a new branch of it", branch_first, branch_reads);
        let second = median(second_scans);
        self.note("Cambium second scan on the branch", second, Sources::default());
    }

    /// What a new branch's first query waits for (issue 12 item 6), `SCAN_BRANCH_STARTS` times (default 20): the
    /// branch's timelines made on the pageserver and the safekeepers (the storage part of `POST …/branches`), then
    /// what the compute host does on the branch's first session: the store's start (the proposer's election,
    /// then `GetDbSize`), a connection, and a point read (schema and B-tree pages from the parent's cached pages).
    fn branch_first_query(&mut self) {
        let count = if cambium_benches::is_test_mode() {
            2
        } else {
            env_or("SCAN_BRANCH_STARTS", 20)
        };
        let cache = self.cache(self.sizes.budget_bytes, true);
        let parent = self.compute("scan_root", ROOT, START, &cache);
        point_reads(&parent.connection, self.sizes.rows, 100); // the parent's upper B-tree pages in memory
        let mut steps: [Vec<Duration>; 7] = Default::default();
        let us = |v: u64| Duration::from_micros(v);
        for i in 0..count {
            let branch_lsn = parent.store.read_lsn();
            let branch_id = TimelineId(BRANCH_FIRST + 0x100 + i as u128);
            let started = Instant::now();
            self.runtime
                .block_on(create_timeline(&self.cluster, branch_id, Some(branch_lsn)));
            steps[0].push(started.elapsed());
            let (election, db_size) = (
                METRICS.store_start_election_us_total.load(Ordering::Relaxed),
                METRICS.store_start_db_size_us_total.load(Ordering::Relaxed),
            );
            let started = Instant::now();
            let config = store_config(&self.cluster, branch_id, branch_lsn, &cache);
            let store = self
                .runtime
                .block_on(RemotePageStore::start(config))
                .expect("start the branch's store");
            steps[1].push(started.elapsed());
            steps[2].push(us(
                METRICS.store_start_election_us_total.load(Ordering::Relaxed) - election
            ));
            steps[3].push(us(
                METRICS.store_start_db_size_us_total.load(Ordering::Relaxed) - db_size
            ));
            let opened = Instant::now();
            register_database("scan_first", store.clone()).expect("register");
            let connection = open_connection("scan_first").expect("open");
            steps[4].push(opened.elapsed());
            let read = Instant::now();
            let key = (i as i64 * 7919) % self.sizes.rows;
            let length: i64 = connection
                .query_row("SELECT length(b) FROM big WHERE a = ?1", [key], |row| row.get(0))
                .expect("first read");
            assert_eq!(length, ROW_BYTES);
            steps[5].push(read.elapsed());
            steps[6].push(started.elapsed());
            drop(connection);
            unregister_database("scan_first");
            store.close("bench");
        }
        let names = [
            "timelines made (pageserver + 3 safekeepers), the storage part of POST …/branches",
            "store start",
            "  of which the election (ancestry asked meanwhile)",
            "  of which GetDbSize",
            "register + open a SQLite connection",
            "first point read (schema + B-tree pages)",
            "total: store start to the first row",
        ];
        for (name, mut samples) in names.into_iter().zip(steps) {
            samples.sort();
            let p99 = samples[((samples.len() - 1) as f64 * 0.99) as usize];
            self.first_query
                .push((name, samples[samples.len() / 2], p99, samples.len()));
        }
    }

    /// Random point reads with a budget of 10 % of the data: without a file cache, with one holding the table.
    fn point_reads(&self) -> Vec<(String, f64, Duration, Duration, String)> {
        let budget = (self.sizes.rows * 4096 / 10) as usize;
        let mut points = Vec::new();
        for (what, file) in [("no file cache", false), ("file cache holding the table", true)] {
            let cache = self.cache(budget, file);
            let compute = self.compute("scan_points", ROOT, START, &cache);
            if file {
                scan(&compute.connection, self.sizes.rows); // the file cache gets what it lacks
            }
            point_reads(&compute.connection, self.sizes.rows, self.sizes.point_reads / 10); // warm-up
            let mut reads = Sources::default();
            let before = Sources::now();
            let (rate, p50, p99) = point_reads(&compute.connection, self.sizes.rows, self.sizes.point_reads);
            reads.add_since(before);
            points.push((format!("Cambium, {what}"), rate, p50, p99, reads.describe()));
        }
        points
    }
}

fn main() {
    let sizes = sizes();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // Local SQLite.
    let local_dir = cambium_benches::scratch_dir("scan-local");
    let mut local = Connection::open(local_dir.path().join("local.db")).expect("open local");
    local.pragma_update(None, "page_size", 8192).expect("page_size");
    let started = Instant::now();
    load(&mut local, sizes.rows);
    let local_load = started.elapsed();
    scan(&local, sizes.rows);
    let local_scan = median((0..sizes.runs).map(|_| scan(&local, sizes.rows)).collect());

    let cluster = runtime.block_on(start_cluster());
    let mut bench = Bench {
        sizes,
        runtime,
        cluster,
        cache_dir: cambium_benches::scratch_dir("scan-cache"),
        report: vec![(
            "local SQLite, file in the OS page cache".into(),
            local_scan,
            String::new(),
        )],
        first_query: Vec::new(),
    };
    // Load through the compute.
    let cache = bench.cache(bench.sizes.budget_bytes, true);
    let mut compute = bench.compute("scan_root", ROOT, START, &cache);
    let started = Instant::now();
    load(&mut compute.connection, bench.sizes.rows);
    let remote_load = started.elapsed();
    let loaded_lsn = compute.store.read_lsn();
    drop((compute, cache));

    bench.cold(loaded_lsn);
    bench.warm_restart_and_branches();
    bench.branch_first_query();
    let mut points = bench.point_reads();
    point_reads(&local, bench.sizes.rows, bench.sizes.point_reads / 10);
    let (rate, p50, p99) = point_reads(&local, bench.sizes.rows, bench.sizes.point_reads);
    points.push(("local SQLite".into(), rate, p50, p99, String::new()));
    print_report(&bench, local_load, remote_load, &points);
}

fn print_report(
    bench: &Bench,
    local_load: Duration,
    remote_load: Duration,
    points: &[(String, f64, Duration, Duration, String)],
) {
    let sizes = &bench.sizes;
    let table_mib = (sizes.rows * 4096) >> 20;
    println!(
        "Scans of a {table_mib} MiB table ({} rows of {ROW_BYTES} bytes), memory budget {} MiB, file cache {} MiB; \
         median of {} runs",
        sizes.rows,
        sizes.budget_bytes >> 20,
        sizes.file_bytes >> 20,
        sizes.runs
    );
    println!(
        "load: local SQLite {} ({:.0} MiB/s), Cambium {} ({:.0} MiB/s, {} transactions)",
        fmt(local_load),
        table_mib as f64 / local_load.as_secs_f64(),
        fmt(remote_load),
        table_mib as f64 / remote_load.as_secs_f64(),
        (sizes.rows + ROWS_PER_TRANSACTION - 1) / ROWS_PER_TRANSACTION
    );
    println!("| scan | time | × local SQLite | reads (all runs) |\n|---|---|---|---|");
    let local = bench.report[0].1;
    for (what, time, reads) in &bench.report {
        println!(
            "| {what} | {} | {:.2}× | {reads} |",
            fmt(*time),
            time.as_secs_f64() / local.as_secs_f64()
        );
    }
    let time_of = |prefix: &str| {
        bench
            .report
            .iter()
            .find(|(what, _, _)| what.starts_with(prefix))
            .map_or(Duration::ZERO, |(_, time, _)| *time)
    };
    println!(
        "first scan on a new branch / the parent's warm scan: {:.2}×",
        time_of("Cambium first scan").as_secs_f64() / time_of("Cambium parent").as_secs_f64()
    );
    println!(
        "\nRandom point reads by key, memory budget {} MiB (10 %), {} reads\n| | reads/s | p50 | p99 | reads |\n|---|---|---|---|---|",
        (sizes.rows * 4096 / 10) >> 20,
        sizes.point_reads
    );
    print_points(points);
    println!(
        "\nA new branch's first query, in process ({} branches of the warm parent at its latest LSN)\n\
         | step | median | p99 |\n|---|---|---|",
        bench.first_query.first().map_or(0, |step| step.3)
    );
    for (step, p50, p99, _) in &bench.first_query {
        println!(
            "| {step} | {:.2} ms | {:.2} ms |",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
}

fn print_points(points: &[(String, f64, Duration, Duration, String)]) {
    for (what, rate, p50, p99, reads) in points {
        println!(
            "| {what} | {rate:.0} | {:.1} µs | {:.1} µs | {reads} |",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }
}
