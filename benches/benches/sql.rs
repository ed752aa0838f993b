//! The same SQL workload through Cambium's compute and through plain SQLite on a local file, in one run.
//!
//! (a) SQLite through the `cambium` VFS on a `RemotePageStore`: commits go through three in-process safekeeper
//! nodes and pages come from an in-process pageserver (`pageserver::runner`), all serving real gRPC on loopback;
//! the store's page cache holds the whole database and is warmed first. (b) The same SQLite on a local file
//! (8 KiB pages, `journal_mode=WAL`, `synchronous=FULL`: one `fdatasync` per commit). Reports, side by side,
//! ops/s and p50/p99 latency of point reads by primary key, short range scans (20 rows) and small one-row
//! autocommit UPDATEs, the ratio remote/local, and the WAL bytes a small UPDATE writes (how far it moves the
//! store's read LSN; LSNs are contiguous).
//!
//! DESIGN §8 targets: warm read-heavy work within 1.5x of local SQLite; a small commit costs about a
//! safekeeper commit (see the `commit` bench).
//!
//! `cargo bench -p cambium-benches --bench sql` (set `CAMBIUM_BENCH_DATA` to choose the disk).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_benches::SplitMix64;
use compute::remote_store::{RemotePageStore, RemotePageStoreConfig};
use compute::rusqlite::{params, Connection};
use compute::vfs::{open_connection, register_database, unregister_database};
use proto::pageserver as ps;
use safekeeper::filestore::FileStoreConfig;
use safekeeper::node::{NodeConfig, SafekeeperNode};
use storage::{Lsn, TenantId, TimelineId};

const START: Lsn = Lsn(0x100_0000);
const TENANT: TenantId = TenantId(0x5_0001);
const TIMELINE: TimelineId = TimelineId(0x5_0002);
const RANGE_ROWS: i64 = 20;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One measured operation kind: per-op latencies (sorted) and the wall time of the whole loop.
struct Measured {
    samples: Vec<Duration>,
    total: Duration,
}

impl Measured {
    fn ops_per_sec(&self) -> f64 {
        self.samples.len() as f64 / self.total.as_secs_f64()
    }
    fn p50(&self) -> Duration {
        percentile(&self.samples, 0.5)
    }
    fn p99(&self) -> Duration {
        percentile(&self.samples, 0.99)
    }
}

fn measure(count: usize, mut op: impl FnMut(usize)) -> Measured {
    let mut samples = Vec::with_capacity(count);
    let started = Instant::now();
    for i in 0..count {
        let t = Instant::now();
        op(i);
        samples.push(t.elapsed());
    }
    let total = started.elapsed();
    samples.sort();
    Measured { samples, total }
}

struct Counts {
    rows: i64,
    reads: usize,
    scans: usize,
    updates: usize,
}

/// Creates and fills the table.
fn load(connection: &mut Connection, rows: i64) {
    connection
        .execute_batch("CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .expect("create");
    let transaction = connection.transaction().expect("begin");
    for id in 0..rows {
        transaction
            .execute(
                "INSERT INTO kv (id, v) VALUES (?1, ?2)",
                params![id, format!("value {id} {}", "v".repeat(90))],
            )
            .expect("insert");
    }
    transaction.commit().expect("commit");
}

/// Point reads, range scans and small UPDATEs, in that order. Every read is checked.
fn workload(connection: &Connection, counts: &Counts, mut after_update: impl FnMut()) -> [Measured; 3] {
    // Warm: read every row once (the store's cache and SQLite's own).
    let total: i64 = connection
        .query_row("SELECT count(*) FROM kv WHERE length(v) > 0", [], |row| row.get(0))
        .expect("warm");
    assert_eq!(total, counts.rows);
    let mut rng = SplitMix64::new(7);
    let mut ids: Vec<i64> = (0..counts.reads.max(counts.scans).max(counts.updates))
        .map(|_| rng.below(counts.rows as u64) as i64)
        .collect();
    ids.push(0);
    let mut point = connection
        .prepare_cached("SELECT v FROM kv WHERE id = ?1")
        .expect("prepare");
    let reads = measure(counts.reads, |i| {
        let v: String = point.query_row([ids[i]], |row| row.get(0)).expect("point read");
        assert!(v.starts_with("value ") || v.starts_with("updated "));
    });
    let mut scan = connection
        .prepare_cached("SELECT id, v FROM kv WHERE id >= ?1 ORDER BY id LIMIT ?2")
        .expect("prepare");
    let scans = measure(counts.scans, |i| {
        let start = ids[i].min(counts.rows - RANGE_ROWS);
        let rows = scan
            .query_map(params![start, RANGE_ROWS], |row| row.get::<_, i64>(0))
            .expect("scan")
            .count();
        assert_eq!(rows as i64, RANGE_ROWS);
    });
    let mut update = connection
        .prepare_cached("UPDATE kv SET v = ?1 WHERE id = ?2")
        .expect("prepare");
    let updates = measure(counts.updates, |i| {
        let changed = update.execute(params![format!("updated {i}"), ids[i]]).expect("update");
        assert_eq!(changed, 1);
        after_update();
    });
    [reads, scans, updates]
}

struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    safekeepers: Vec<String>,
    pageserver: String,
    shutdown: tokio::sync::watch::Sender<bool>,
}

async fn start_cluster(base: &std::path::Path) -> Cluster {
    let mut dirs = Vec::new();
    let mut safekeepers = Vec::new();
    let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
    for id in 1..=3u64 {
        let dir = tempfile::tempdir_in(base).expect("tempdir");
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
        node.create_timeline_blocking((TENANT, TIMELINE), START)
            .expect("timeline");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        safekeepers.push(listener.local_addr().expect("address").to_string());
        let mut stop = shutdown_rx.clone();
        tokio::spawn(safekeeper::service::serve(node, listener, async move {
            let _ = stop.wait_for(|s| *s).await;
        }));
        dirs.push(dir);
    }

    let dir = tempfile::tempdir_in(base).expect("tempdir");
    let config = pageserver::runner::PageserverConfig::new(dir.path().to_path_buf(), safekeepers.clone());
    let manager = pageserver::runner::open(&config).await.expect("open pageserver");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let pageserver = listener.local_addr().expect("address").to_string();
    let mut stop = shutdown_rx.clone();
    tokio::spawn(pageserver::runner::run(manager, config, listener, async move {
        let _ = stop.wait_for(|s| *s).await;
    }));
    dirs.push(dir);

    let mut management = ps::management_client::ManagementClient::connect(format!("http://{pageserver}"))
        .await
        .expect("connect management");
    management
        .create_tenant(ps::TenantRequest {
            tenant_id: TENANT.to_string(),
        })
        .await
        .expect("create tenant");
    management
        .create_timeline(ps::CreateTimelineRequest {
            timeline: Some(ps::TimelineRef {
                tenant_id: TENANT.to_string(),
                timeline_id: TIMELINE.to_string(),
            }),
            ancestor_timeline_id: String::new(),
            ancestor_lsn: 0,
            start_lsn: START.0,
        })
        .await
        .expect("create timeline");
    Cluster {
        _dirs: dirs,
        safekeepers,
        pageserver,
        shutdown,
    }
}

fn main() {
    let base = std::env::var_os("CAMBIUM_BENCH_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(cambium_benches::bench_data_dir);
    std::fs::create_dir_all(&base).expect("bench data dir");
    let counts = if cambium_benches::is_test_mode() {
        Counts {
            rows: 500,
            reads: 200,
            scans: 100,
            updates: 20,
        }
    } else {
        Counts {
            rows: 100_000,
            reads: 50_000,
            scans: 20_000,
            updates: 1_000,
        }
    };

    // (a) Remote.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let cluster = runtime.block_on(start_cluster(&base));
    let mut config = RemotePageStoreConfig::new(
        cluster.safekeepers.clone(),
        cluster.pageserver.clone(),
        TENANT,
        TIMELINE,
        START,
    );
    config.page_cache_capacity_pages = 16 * 1024;
    let store = runtime
        .block_on(RemotePageStore::start(config))
        .expect("start the remote store");
    register_database("bench_sql", store.clone()).expect("register");
    let mut connection = open_connection("bench_sql").expect("open remote");
    load(&mut connection, counts.rows);
    let mut wal_bytes = Vec::with_capacity(counts.updates);
    let mut last_lsn = store.read_lsn();
    let remote = workload(&connection, &counts, || {
        let lsn = store.read_lsn();
        wal_bytes.push(lsn.0 - last_lsn.0);
        last_lsn = lsn;
    });
    assert_eq!(store.failure(), None);
    let pages = compute::page_store::PageStore::snapshot(&*store)
        .expect("size")
        .db_size_pages;
    drop(connection);
    assert!(unregister_database("bench_sql"));
    drop(store);
    let _ = cluster.shutdown.send(true);

    // (b) Local.
    let scratch = tempfile::tempdir_in(&base).expect("scratch");
    let mut local = Connection::open(scratch.path().join("local.db")).expect("open local");
    local.pragma_update(None, "page_size", 8192).expect("page_size");
    let mode: String = local
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .expect("journal_mode");
    assert!(mode.eq_ignore_ascii_case("wal"));
    local.pragma_update(None, "synchronous", "FULL").expect("synchronous");
    load(&mut local, counts.rows);
    let local_results = workload(&local, &counts, || {});
    drop(local);

    wal_bytes.sort();
    println!(
        "SQL workload: {} rows of ~100 bytes ({pages} pages of 8 KiB); {} point reads, {} range scans of \
         {RANGE_ROWS} rows, {} one-row UPDATEs",
        counts.rows, counts.reads, counts.scans, counts.updates
    );
    println!(
        "{:<14} {:>12} {:>10} {:>10} | {:>12} {:>10} {:>10} | {:>8} {:>8}",
        "op", "remote op/s", "p50 µs", "p99 µs", "local op/s", "p50 µs", "p99 µs", "op/s ×", "p50 ×"
    );
    for (name, (r, l)) in ["point read", "range scan", "small UPDATE"]
        .iter()
        .zip(remote.iter().zip(local_results.iter()))
    {
        println!(
            "{:<14} {:>12.0} {:>10.1} {:>10.1} | {:>12.0} {:>10.1} {:>10.1} | {:>8.2} {:>8.2}",
            name,
            r.ops_per_sec(),
            micros(r.p50()),
            micros(r.p99()),
            l.ops_per_sec(),
            micros(l.p50()),
            micros(l.p99()),
            l.ops_per_sec() / r.ops_per_sec(),
            micros(r.p50()) / micros(l.p50()),
        );
    }
    println!(
        "WAL bytes per small UPDATE (read LSN advance): p50 {}, max {}, mean {:.0}",
        wal_bytes[wal_bytes.len() / 2],
        wal_bytes[wal_bytes.len() - 1],
        wal_bytes.iter().sum::<u64>() as f64 / wal_bytes.len() as f64
    );
    println!("(×: how many times slower the remote store is; DESIGN §8: reads within 1.5×)");
    drop(runtime);
}
