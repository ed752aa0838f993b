//! Cambium side by side with its peers (DESIGN §8), in one run, on this machine:
//! 1. branch creation at 10 MiB, 200 MiB and 1 GiB: Cambium `POST /v1/databases/{id}/branches`, PostgreSQL
//!    `CREATE DATABASE … TEMPLATE` (both strategies), SQLite file copy + fsync and `VACUUM INTO`, doltlite
//!    `dolt_branch`;
//! 2. the first small commit (one-row UPDATE, autocommit) on a freshly branched 1 GiB database;
//! 3. restore to a point in time at 1 GiB: Cambium `POST /v1/branches/{id}/restore` vs PostgreSQL PITR
//!    (base backup + archived WAL, `recovery_target_time`, until the server is out of recovery);
//! 4. "page as of LSN" reads: `storage::Timeline::get_page` in process vs LMDB (heed) cursor seeks.
//!
//! Not criterion: medians and p99 of whole operations, printed as tables, written to
//! `target/bench-data/peers/results.json` and charted in `docs/benchmarks-branch.svg`. Run with
//! `cargo build --release && cargo bench -p cambium-benches --bench peers` (`CAMBIUM_BIN` overrides the binary,
//! `PEERS_RUNS` the samples per measurement, default 7; `PEERS_QUICK=1` divides every size by 64;
//! `PEERS_KEEP_DATA=1` keeps the filled sources for the next run; `PEERS_REPORT_ONLY=1` reprints the tables
//! and redraws the chart from the last `results.json`). Everything is set up here: a throwaway PostgreSQL
//! cluster from the machine's binaries, SQLite through rusqlite, doltlite from PyPI in a venv. A peer that
//! cannot be set up is recorded as skipped, with the reason, and the others go on. Each peer's data is
//! deleted when its section ends, so the run never holds more than about 4.5 GiB of bench data at once
//! (Cambium's 1 GiB database is the largest: layers plus three safekeepers' WAL). In `cargo test`'s bench
//! mode (`--bench` absent) it does nothing.

#[path = "common/service.rs"]
mod service;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_benches::{
    checkpoint, image_record, ingest, manual_config, open_tenant, scratch_dir, SplitMix64, BASE_TS_US, MIB,
    ROOT_TIMELINE, START_LSN,
};
use serde_json::{json, Value};
use service::{connect, Service};
use storage::{Durability, Key, Lsn, PageCache, PAGE_SIZE_BYTES};

/// The database sizes of the branch measurement (logical bytes of random 4 KiB blobs).
const SIZES: [(&str, u64); 3] = [("10MiB", 10 * MIB), ("200MiB", 200 * MIB), ("1GiB", 1024 * MIB)];
/// `PEERS_QUICK=1`: every size divided by 64, to check the program end to end in a minute or two (the
/// results then go to `results-quick.json`, and no chart is written).
fn quick() -> bool {
    std::env::var_os("PEERS_QUICK").is_some_and(|v| v == "1")
}

fn scaled(bytes: u64) -> u64 {
    if quick() {
        bytes / 64
    } else {
        bytes
    }
}

/// The size the commit and restore measurements use.
const LARGE: &str = "1GiB";
/// Bytes per blob row, and rows per fill transaction (4 MiB) for the SQL-filled peers.
const ROW_BYTES: u64 = 4096;
const FILL_ROWS: u64 = 1024;
/// The peers of the branch chart, in drawing order: results key, legend, colour.
const SERIES: [(&str, &str, &str); 6] = [
    ("cambium", "Cambium /v1", "#2e7d32"),
    ("postgres_template_wal_log", "PostgreSQL TEMPLATE (WAL_LOG)", "#1565c0"),
    (
        "postgres_template_file_copy",
        "PostgreSQL TEMPLATE (FILE_COPY)",
        "#64b5f6",
    ),
    ("sqlite_copy", "SQLite copy+fsync", "#ef6c00"),
    ("sqlite_vacuum_into", "SQLite VACUUM INTO", "#ffb74d"),
    ("doltlite", "doltlite dolt_branch", "#8e24aa"),
];

// ---------------------------------------------------------------------------------------------------------
// Statistics and output

/// Median and p99 of samples in seconds, as milliseconds.
fn stats(samples: &[f64]) -> Value {
    assert!(!samples.is_empty(), "no samples");
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |p: f64| sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] * 1e3;
    json!({ "p50_ms": at(0.5), "p99_ms": at(0.99), "min_ms": sorted[0] * 1e3, "runs": sorted.len() })
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn p50(v: &Value) -> Option<f64> {
    v["p50_ms"].as_f64()
}

/// `12.3 ms`, `1.52 s`, `85 µs`.
fn human_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.0} µs", ms * 1000.0)
    }
}

fn cell(v: &Value) -> String {
    match (p50(v), v["p99_ms"].as_f64()) {
        (Some(a), Some(b)) => format!("{} (p99 {})", human_ms(a), human_ms(b)),
        _ => v["skipped"]
            .as_str()
            .map_or("—".to_owned(), |why| format!("skipped: {why}")),
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fsync_file(path: &Path) {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .unwrap_or_else(|e| panic!("fsync {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|f| f.sync_all())
            .unwrap_or_else(|e| panic!("fsync {}: {e}", dir.display()));
    }
}

fn remove(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Times `UPDATE counters …` twice on `client` (the first commit after branching, then a warm one).
async fn two_commits(client: &tokio_postgres::Client) -> (f64, f64) {
    let mut took = [0.0; 2];
    for t in &mut took {
        let started = Instant::now();
        let n = client
            .execute("UPDATE counters SET n = n + 1 WHERE id = 1", &[])
            .await
            .expect("update");
        *t = secs(started.elapsed());
        assert_eq!(n, 1, "one row updated");
    }
    (took[0], took[1])
}

// ---------------------------------------------------------------------------------------------------------
// 4. Page reads as of an LSN: Cambium's timeline vs LMDB

/// Pages, and versions of each page, of the page-read data set (16 384 page versions, 128 MiB).
const READ_PAGES: u32 = 4096;
const READ_VERSIONS: u32 = 4;
const READ_LOOKUPS: usize = 2_000_000;

fn lmdb_key(block: u32, lsn: Lsn) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..4].copy_from_slice(&block.to_be_bytes());
    key[4..].copy_from_slice(&lsn.0.to_be_bytes());
    key
}

/// The newest version of `block` at or below `lsn`: one cursor seek to the greatest key ≤ (block, lsn).
fn lmdb_as_of<'t>(db: &LmdbPages, rtxn: &'t heed::RoTxn, block: u32, lsn: Lsn) -> &'t [u8] {
    let (key, page) = db
        .get_lower_than_or_equal_to(rtxn, &lmdb_key(block, lsn)[..])
        .expect("lmdb get")
        .expect("a version");
    assert_eq!(&key[..4], &block.to_be_bytes(), "the version found is of page {block}");
    page
}

type LmdbPages = heed::Database<heed::types::Bytes, heed::types::Bytes>;

fn page_reads(runs: usize) -> Value {
    let dir = scratch_dir("peers-page-reads");
    let cache = Arc::new(PageCache::new(2 * (READ_PAGES * READ_VERSIONS) as usize));
    let tenant = open_tenant(&dir.path().join("tenant"), manual_config(Durability::Off), cache);
    let timeline = tenant
        .create_timeline(ROOT_TIMELINE, START_LSN)
        .expect("create timeline");
    // Every page written READ_VERSIONS times as a full image, 64 pages per record; LMDB gets the same images
    // keyed by (page, the record's end LSN), which is the first LSN that reads them.
    std::fs::create_dir_all(dir.path().join("lmdb")).expect("lmdb dir");
    // SAFETY: the environment is opened once, in this process only, and the directory is ours.
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .map_size(1 << 30)
            .open(dir.path().join("lmdb"))
            .expect("lmdb env")
    };
    let mut wtxn = env.write_txn().expect("txn");
    let db: LmdbPages = env.create_database(&mut wtxn, None).expect("lmdb db");
    let mut lsn = START_LSN;
    let mut readable_from = Lsn(u64::MAX);
    for version in 0..READ_VERSIONS {
        for start in (0..READ_PAGES).step_by(64) {
            let record = image_record(BASE_TS_US + u64::from(version), READ_PAGES, start..start + 64, version);
            lsn = ingest(&timeline, lsn, &record);
            for (key, value) in &record.entries {
                let storage::Value::Image(page) = value else {
                    unreachable!("images")
                };
                db.put(&mut wtxn, &lmdb_key(key.block(), lsn)[..], page).expect("put");
            }
        }
        if version == 0 {
            readable_from = lsn; // every page exists from here on
        }
        checkpoint(&timeline);
    }
    wtxn.commit().expect("commit");
    let last_lsn = lsn;
    let mut rng = SplitMix64::new(0x9eed);
    let queries: Vec<(u32, Lsn)> = (0..READ_LOOKUPS)
        .map(|_| {
            let block = rng.below(u64::from(READ_PAGES)) as u32;
            (
                block,
                Lsn(readable_from.0 + rng.below(last_lsn.0 - readable_from.0 + 1)),
            )
        })
        .collect();
    let rtxn = env.read_txn().expect("read txn");
    let lmdb_get = |block: u32, lsn: Lsn| lmdb_as_of(&db, &rtxn, block, lsn);
    // Untimed: both answer every query alike, and the timeline's cache holds every version.
    for &(block, lsn) in &queries[..20_000] {
        let page = timeline.get_page(Key::page(block), lsn).expect("get_page");
        assert_eq!(&page[..], lmdb_get(block, lsn), "page {block} at {lsn}");
    }
    let mut out = json!({
        "pages": READ_PAGES, "versions_per_page": READ_VERSIONS, "lookups_per_run": READ_LOOKUPS,
        "page_bytes": PAGE_SIZE_BYTES,
    });
    let latest: Vec<(u32, Lsn)> = queries.iter().map(|&(block, _)| (block, last_lsn)).collect();
    let mut rate = |name: &str, queries: &[(u32, Lsn)], read: &dyn Fn(u32, Lsn) -> usize| {
        let (misses_before, _) = timeline.read_amplification_counters();
        let mut samples = Vec::new();
        for _ in 0..runs {
            let started = Instant::now();
            let mut sum = 0usize;
            for &(block, lsn) in queries {
                sum = sum.wrapping_add(read(block, lsn));
            }
            std::hint::black_box(sum);
            samples.push(queries.len() as f64 / secs(started.elapsed()));
        }
        let (misses_after, _) = timeline.read_amplification_counters();
        samples.sort_by(f64::total_cmp);
        let lookups = (queries.len() * runs) as f64;
        out[name] = json!({
            "median_pages_per_s": samples[samples.len() / 2], "runs": runs,
            "cambium_cache_miss_fraction": (misses_after - misses_before) as f64 / lookups,
        });
        eprintln!("  {name}: {:.2} M pages/s", samples[samples.len() / 2] / 1e6);
    };
    let cambium_read = |block: u32, lsn: Lsn| timeline.get_page(Key::page(block), lsn).expect("get_page")[100] as usize;
    let lmdb_read = |block: u32, lsn: Lsn| lmdb_get(block, lsn)[100] as usize;
    // Random (page, LSN) over the whole history: Cambium's cache keeps several versions per page (up to 8), so
    // after the first reads of each version these are cache hits too; the miss fraction is recorded.
    rate("cambium_get_page_history", &queries, &cambium_read);
    rate("lmdb_as_of_history", &queries, &lmdb_read);
    // Random pages at the latest LSN: Cambium serves them from its page cache.
    rate("cambium_get_page_latest", &latest, &cambium_read);
    rate("lmdb_as_of_latest", &latest, &lmdb_read);
    out
}

// ---------------------------------------------------------------------------------------------------------
// SQLite (rusqlite, bundled)

fn sqlite_fill(path: &Path, bytes: u64) {
    let conn = rusqlite::Connection::open(path).expect("open sqlite");
    conn.execute_batch(
        "PRAGMA synchronous = FULL;
         CREATE TABLE blobs (id INTEGER PRIMARY KEY, v BLOB NOT NULL);
         CREATE TABLE counters (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
         INSERT INTO counters VALUES (1, 0);",
    )
    .expect("schema");
    let mut rows = 0i64;
    let (row_bytes, fill_rows) = (ROW_BYTES as i64, FILL_ROWS as i64);
    while u64::try_from(rows * row_bytes).expect("size") < bytes {
        conn.execute(
            "WITH RECURSIVE s(x) AS (SELECT ?1 UNION ALL SELECT x + 1 FROM s WHERE x < ?2)
             INSERT INTO blobs (id, v) SELECT x, randomblob(?3) FROM s",
            (rows + 1, rows + fill_rows, row_bytes),
        )
        .expect("fill");
        rows += fill_rows;
    }
}

fn sqlite_commits(path: &Path) -> (f64, f64) {
    let conn = rusqlite::Connection::open(path).expect("open copy");
    conn.execute_batch("PRAGMA synchronous = FULL").expect("pragma");
    let mut took = [0.0; 2];
    for t in &mut took {
        let started = Instant::now();
        let n = conn
            .execute("UPDATE counters SET n = n + 1 WHERE id = 1", [])
            .expect("update");
        *t = secs(started.elapsed());
        assert_eq!(n, 1);
    }
    (took[0], took[1])
}

fn sqlite(work: &Path, runs: usize, results: &mut Value) {
    let dir = work.join("sqlite");
    std::fs::create_dir_all(&dir).expect("sqlite dir");
    results["versions"]["sqlite"] = json!(rusqlite::version());
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for (label, bytes) in SIZES {
        let source = dir.join(format!("src-{label}.db"));
        if !source.exists() {
            sqlite_fill(&dir.join("filling.db"), scaled(bytes));
            std::fs::rename(dir.join("filling.db"), &source).expect("rename");
        }
        let copy = dir.join("copy.db");
        let (mut copies, mut vacuums) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let started = Instant::now();
            std::fs::copy(&source, &copy).expect("copy");
            fsync_file(&copy);
            copies.push(secs(started.elapsed()));
            if label == LARGE {
                let (a, b) = sqlite_commits(&copy);
                first.push(a);
                second.push(b);
            }
            remove(&copy);
            let conn = rusqlite::Connection::open(&source).expect("open source");
            let started = Instant::now();
            conn.execute("VACUUM INTO ?1", [copy.to_str().expect("utf-8 path")])
                .expect("vacuum into");
            fsync_file(&copy); // VACUUM INTO itself does not sync its output
            vacuums.push(secs(started.elapsed()));
            drop(conn);
            remove(&copy);
        }
        let size = std::fs::metadata(&source).expect("size").len();
        results["branch"]["sqlite_copy"][label] = stats(&copies);
        results["branch"]["sqlite_copy"][label]["bytes"] = json!(size);
        results["branch"]["sqlite_vacuum_into"][label] = stats(&vacuums);
        eprintln!(
            "  sqlite {label}: copy {} vacuum into {}",
            cell(&results["branch"]["sqlite_copy"][label]),
            cell(&results["branch"]["sqlite_vacuum_into"][label])
        );
    }
    results["small_commit"]["sqlite_copy"] = json!({ "first": stats(&first), "second": stats(&second) });
}

// ---------------------------------------------------------------------------------------------------------
// doltlite (PyPI, in a venv, driven by a Python helper)

fn doltlite(work: &Path, runs: usize, results: &mut Value) -> Result<(), String> {
    let venv = work.join("venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .map_err(|e| format!("python3 -m venv: {e}"))?;
        if !ok.success() {
            return Err(format!("python3 -m venv failed: {ok}"));
        }
    }
    let out = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "doltlite"])
        .output()
        .map_err(|e| format!("pip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "pip install doltlite: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let script = work.join("peers_doltlite.py");
    std::fs::write(&script, include_str!("peers_doltlite.py")).expect("write the helper");
    let dir = work.join("doltlite");
    std::fs::create_dir_all(&dir).expect("doltlite dir");
    for (label, bytes) in SIZES {
        let db = dir.join(format!("{label}.db"));
        let commit = if label == LARGE { "1" } else { "0" };
        let out = Command::new(&python)
            .arg(&script)
            .arg(&db)
            .args([scaled(bytes).to_string(), runs.to_string(), commit.to_owned()])
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running the helper: {e}"))?;
        if !out.status.success() {
            return Err(format!("the doltlite helper failed at {label}: {}", out.status));
        }
        let found: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("helper output: {e}"))?;
        let list = |key: &str| -> Vec<f64> {
            found[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect()
        };
        results["versions"]["doltlite"] = found["doltlite_version"].clone();
        results["versions"]["doltlite_sqlite"] = found["sqlite_version"].clone();
        results["branch"]["doltlite"][label] = stats(&list("branch_s"));
        results["branch"]["doltlite"][label]["bytes"] = found["file_bytes"].clone();
        eprintln!("  doltlite {label}: {}", cell(&results["branch"]["doltlite"][label]));
        if label == LARGE {
            results["small_commit"]["doltlite"] = json!({
                "first": stats(&list("first_commit_s")),
                "second": stats(&list("second_commit_s")),
                "checkout": stats(&list("checkout_s")),
                "dolt_commit": stats(&list("dolt_commit_s")),
            });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// PostgreSQL 15: a throwaway cluster from the machine's binaries

struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    /// `runuser -u postgres --` when we are root (postgres refuses to run as root).
    as_user: Vec<String>,
}

impl PgCluster {
    fn cmd(&self, tool: &str) -> Command {
        let mut cmd = if self.as_user.is_empty() {
            Command::new(self.bin.join(tool))
        } else {
            let mut cmd = Command::new(&self.as_user[0]);
            cmd.args(&self.as_user[1..]).arg(self.bin.join(tool));
            cmd
        };
        cmd.stdin(Stdio::null());
        cmd
    }

    /// A system tool (`cp`, `rm`, `mkdir`) run as the server's user.
    fn sys(&self, tool: &str) -> Command {
        let mut cmd = if self.as_user.is_empty() {
            Command::new(tool)
        } else {
            let mut cmd = Command::new(&self.as_user[0]);
            cmd.args(&self.as_user[1..]).arg(tool);
            cmd
        };
        cmd.stdin(Stdio::null());
        cmd
    }

    fn uri(&self, db: &str) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname={db}", self.port)
    }

    fn start(&self, data: &Path) {
        run(self
            .cmd("pg_ctl")
            .args(["-w", "-t", "600", "-l"])
            .arg(data.join("log"))
            .arg("-D")
            .arg(data)
            .arg("start"));
    }

    fn stop(&self, data: &Path) {
        let _ = self
            .cmd("pg_ctl")
            .args(["-w", "-m", "fast", "-D"])
            .arg(data)
            .arg("stop")
            .output();
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Also a restored cluster a failed PITR run left behind.
        let restored = self.data.with_file_name("restored");
        if restored.exists() {
            self.stop(&restored);
        }
        self.stop(&self.data.clone());
    }
}

fn pg_setup(root: &Path) -> Result<(PgCluster, tempfile::TempDir), String> {
    let postgres = std::fs::canonicalize("/usr/local/bin/postgres").map_err(|e| format!("postgres: {e}"))?;
    let bin = postgres.parent().expect("bin dir").to_path_buf();
    let root_user = run(Command::new("id").arg("-u")).trim() == "0";
    let tmp = tempfile::Builder::new()
        .prefix("pg-")
        .tempdir_in(root)
        .map_err(|e| format!("temp dir: {e}"))?;
    let as_user: Vec<String> = if root_user {
        run(Command::new("chown").args(["postgres:postgres"]).arg(tmp.path()));
        ["runuser", "-u", "postgres", "--"].map(str::to_owned).to_vec()
    } else {
        Vec::new()
    };
    let cluster = PgCluster {
        bin,
        data: tmp.path().join("data"),
        port: service::free_port(),
        as_user,
    };
    run(cluster
        .cmd("initdb")
        .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "-D"])
        .arg(&cluster.data));
    let archive = tmp.path().join("archive");
    run(cluster.sys("mkdir").arg(&archive)); // owned by the server's user
    let conf = format!(
        "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{sock}'\n\
         archive_mode = on\narchive_command = '/bin/true'\nwal_level = replica\nshared_buffers = '256MB'\n",
        port = cluster.port,
        sock = tmp.path().display(),
    );
    let conf_path = cluster.data.join("postgresql.auto.conf");
    let mut text = std::fs::read_to_string(&conf_path).unwrap_or_default();
    text.push_str(&conf);
    std::fs::write(&conf_path, text).map_err(|e| format!("conf: {e}"))?;
    cluster.start(&cluster.data.clone());
    Ok((cluster, tmp))
}

async fn pg_fill(pg: &PgCluster, db: &str, bytes: u64) -> u64 {
    let admin = connect(&pg.uri("postgres")).await;
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .expect("create");
    let client = connect(&pg.uri(db)).await;
    // STORAGE EXTERNAL: out of line, never compressed, like the other peers' random blobs.
    client
        .batch_execute(
            "CREATE TABLE blobs (id bigint PRIMARY KEY, v bytea NOT NULL);
             ALTER TABLE blobs ALTER COLUMN v SET STORAGE EXTERNAL;
             CREATE TABLE counters (id int PRIMARY KEY, n bigint NOT NULL);
             INSERT INTO counters VALUES (1, 0);",
        )
        .await
        .expect("schema");
    let mut rows = 0;
    while rows * ROW_BYTES < bytes {
        // 4 KiB of random bytes per row: 128 random md5 digests of 16 bytes (hex-decoded).
        client
            .execute(
                &format!(
                    "INSERT INTO blobs SELECT g, decode((SELECT string_agg(md5(random()::text || g::text || i::text), '')
                        FROM generate_series(1, {digests}) i), 'hex') FROM generate_series({from}, {to}) g",
                    digests = ROW_BYTES / 16,
                    from = rows + 1,
                    to = rows + FILL_ROWS
                ),
                &[],
            )
            .await
            .expect("fill");
        rows += FILL_ROWS;
    }
    client.batch_execute("VACUUM ANALYZE").await.expect("vacuum");
    let size: i64 = admin
        .query_one(&format!("SELECT pg_database_size('{db}')"), &[])
        .await
        .expect("size")
        .get(0);
    u64::try_from(size).expect("size")
}

async fn postgres(pg: &PgCluster, tmp: &Path, runs: usize, results: &mut Value) {
    let version = run(pg.cmd("postgres").arg("--version"));
    results["versions"]["postgres"] = json!(version.trim());
    let admin = connect(&pg.uri("postgres")).await;
    for (label, bytes) in SIZES {
        let source = format!("src_{}", label.to_lowercase());
        let size = pg_fill(pg, &source, scaled(bytes)).await;
        for strategy in ["wal_log", "file_copy"] {
            let mut samples = Vec::new();
            let (mut first, mut second) = (Vec::new(), Vec::new());
            for i in 0..runs + 1 {
                let started = Instant::now();
                admin
                    .batch_execute(&format!(
                        "CREATE DATABASE branch_copy TEMPLATE {source} STRATEGY {strategy}"
                    ))
                    .await
                    .expect("create database template");
                if i > 0 {
                    samples.push(secs(started.elapsed()));
                }
                if label == LARGE && strategy == "wal_log" && i > 0 {
                    let client = connect(&pg.uri("branch_copy")).await;
                    let (a, b) = two_commits(&client).await;
                    first.push(a);
                    second.push(b);
                }
                // Wait for the commit test's connection to go, then drop (untimed).
                admin
                    .batch_execute("DROP DATABASE branch_copy WITH (FORCE)")
                    .await
                    .expect("drop");
            }
            let key = format!("postgres_template_{strategy}");
            results["branch"][&key][label] = stats(&samples);
            results["branch"][&key][label]["bytes"] = json!(size);
            eprintln!(
                "  postgres {label} {strategy}: {}",
                cell(&results["branch"][&key][label])
            );
            if !first.is_empty() {
                results["small_commit"]["postgres"] = json!({ "first": stats(&first), "second": stats(&second) });
            }
        }
        if label != LARGE {
            admin
                .batch_execute(&format!("DROP DATABASE {source}"))
                .await
                .expect("drop source");
        }
    }
    admin.batch_execute("CHECKPOINT").await.expect("checkpoint");
    results["restore"]["postgres"] = pg_pitr(pg, tmp, &admin, runs.min(3)).await;
}

/// PITR: base backup, WAL archived by `cp`, a mistake, then `runs` restores of a fresh data directory from the
/// backup to the time before the mistake. Timed: the copy of the backup, and start to out-of-recovery.
async fn pg_pitr(pg: &PgCluster, tmp: &Path, admin: &tokio_postgres::Client, runs: usize) -> Value {
    let archive = tmp.join("archive");
    admin
        .batch_execute(&format!(
            "ALTER SYSTEM SET archive_command = 'test ! -f {a}/%f && cp %p {a}/%f'",
            a = archive.display()
        ))
        .await
        .expect("archive_command");
    admin.batch_execute("SELECT pg_reload_conf()").await.expect("reload");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = tmp.join("base");
    let started = Instant::now();
    run(pg
        .cmd("pg_basebackup")
        .args(["-h", "127.0.0.1", "-p", &pg.port.to_string(), "-U", "postgres"])
        .args(["-X", "stream", "-c", "fast", "-D"])
        .arg(&base));
    let basebackup_s = secs(started.elapsed());
    let db = format!("src_{}", LARGE.to_lowercase());
    let client = connect(&pg.uri(&db)).await;
    client
        .batch_execute("UPDATE counters SET n = 42 WHERE id = 1")
        .await
        .expect("before");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let target: String = client.query_one("SELECT now()::text", &[]).await.expect("now").get(0);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client.batch_execute("DELETE FROM counters").await.expect("the mistake");
    // Close the WAL segment holding the mistake and wait until it is archived.
    let segment: String = admin
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !archive.join(&segment).exists() {
        assert!(Instant::now() < deadline, "segment {segment} never archived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut copies, mut recoveries, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let restored = tmp.join("restored");
        let port = service::free_port();
        let started = Instant::now();
        run(pg.sys("cp").arg("-a").arg(&base).arg(&restored));
        let copied = started.elapsed();
        let conf = format!(
            "port = {port}\narchive_mode = off\nrestore_command = 'cp {a}/%f %p'\n\
             recovery_target_time = '{target}'\nrecovery_target_action = 'promote'\n",
            a = archive.display()
        );
        let auto = restored.join("postgresql.auto.conf");
        let text = std::fs::read_to_string(&auto).expect("auto conf") + &conf;
        std::fs::write(&auto, text).expect("auto conf");
        std::fs::write(restored.join("recovery.signal"), "").expect("signal");
        pg.start(&restored);
        let uri = format!("host=127.0.0.1 port={port} user=postgres dbname={db}");
        let n = loop {
            if let Ok((c, conn)) = tokio_postgres::connect(&uri, tokio_postgres::NoTls).await {
                tokio::spawn(conn);
                let out_of_recovery = c
                    .query_one("SELECT NOT pg_is_in_recovery()", &[])
                    .await
                    .is_ok_and(|r| r.get(0));
                if out_of_recovery {
                    let n: i64 = c.query_one("SELECT n FROM counters", &[]).await.expect("row").get(0);
                    break n;
                }
            }
            assert!(started.elapsed() < Duration::from_secs(600), "recovery never finished");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let total = started.elapsed();
        assert_eq!(n, 42, "restored to the state before the mistake");
        copies.push(secs(copied));
        recoveries.push(secs(total - copied));
        totals.push(secs(total));
        pg.stop(&restored);
        run(pg.sys("rm").arg("-rf").arg(&restored));
    }
    run(pg.sys("rm").arg("-rf").arg(&base));
    json!({
        "total": stats(&totals), "copy_base_backup": stats(&copies), "recovery": stats(&recoveries),
        "total_samples_s": totals,
        "pg_basebackup_s": basebackup_s,
    })
}

// ---------------------------------------------------------------------------------------------------------
// Cambium: a release `cambium up`, through /v1 and SQL (as api.rs)

/// The schema every bench database gets.
const SCHEMA: &str = "CREATE TABLE blobs (id INTEGER PRIMARY KEY, v BLOB NOT NULL);
     CREATE TABLE counters (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
     INSERT INTO counters VALUES (1, 0);";

impl Service {
    /// A new branch of `database` (as [`Service::database`] gives it, with the password) from its latest state;
    /// its `connection_uri` gets the database's password, which the API shows only when it makes one.
    async fn branch(&self, database: &Value, name: &str) -> Value {
        let id = database["id"].as_str().expect("id");
        let mut branch = self
            .post(&format!("/v1/databases/{id}/branches"), json!({ "name": name }))
            .await["branch"]
            .clone();
        let database_uri = database["connection_uri"].as_str().expect("uri");
        let userinfo = database_uri
            .strip_prefix("postgresql://")
            .and_then(|rest| rest.split_once('@'))
            .map(|(userinfo, _)| userinfo)
            .expect("the database's connection string has user:password@");
        let uri = branch["connection_uri"].as_str().expect("uri");
        let (_, host_and_name) = uri.split_once('@').expect("user@host");
        branch["connection_uri"] = Value::String(format!("postgresql://{userinfo}@{host_and_name}"));
        branch
    }
}

/// Fills the database to at least `bytes` (4 MiB transactions of random blobs); returns its size.
async fn cambium_fill(uri: &str, bytes: u64) -> u64 {
    let client = connect(uri).await;
    let size_sql = "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()";
    let size = |row: tokio_postgres::Row| u64::try_from(row.get::<_, i64>(0)).expect("size");
    let mut current = size(client.query_one(size_sql, &[]).await.expect("size"));
    let started = Instant::now();
    while current < bytes {
        let next: i64 = client
            .query_one("SELECT coalesce(max(id), 0)::bigint FROM blobs", &[])
            .await
            .expect("max")
            .get(0);
        client
            .batch_execute(&format!(
                "WITH RECURSIVE c(x) AS (SELECT {start} UNION ALL SELECT x + 1 FROM c WHERE x < {end})
                 INSERT INTO blobs (id, v) SELECT x, randomblob({ROW_BYTES}) FROM c",
                start = next + 1,
                end = next + i64::try_from(FILL_ROWS).expect("rows"),
            ))
            .await
            .expect("fill");
        current = size(client.query_one(size_sql, &[]).await.expect("size"));
        eprint!(
            "\r  cambium: filled {} MiB in {:.0?}   ",
            current >> 20,
            started.elapsed()
        );
    }
    eprintln!();
    current
}

async fn cambium(bin: &Path, work: &Path, runs: usize, results: &mut Value) {
    let data_dir = work.join(if quick() { "cambium-quick" } else { "cambium" });
    std::fs::create_dir_all(&data_dir).expect("data dir");
    let service = service::start(bin, &data_dir);
    let projects = service.get("/v1/projects").await;
    let project = match projects["projects"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "peers")
    {
        Some(p) => p["id"].as_str().expect("id").to_owned(),
        None => service.post("/v1/projects", json!({"name": "peers"})).await["project"]["id"]
            .as_str()
            .expect("id")
            .to_owned(),
    };
    let tag = jiff::Timestamp::now().as_millisecond();
    // Fill every database first, then let the background flush of the fill settle before measuring.
    let mut databases = Vec::new();
    for (label, bytes) in SIZES {
        let database = service
            .database(&project, &format!("peers_{}", label.to_lowercase()), SCHEMA)
            .await;
        let size = cambium_fill(database["connection_uri"].as_str().expect("uri"), scaled(bytes)).await;
        databases.push((label, database, size));
    }
    tokio::time::sleep(Duration::from_secs(if quick() { 1 } else { 15 })).await;
    let mut large = Value::Null;
    for (label, database, size) in databases {
        let mut samples = Vec::new();
        let mut created = Vec::new();
        // More samples than the other peers: each costs milliseconds, and 5 warm-ups.
        for i in 0..runs * 4 + 5 {
            let started = Instant::now();
            let branch = service.branch(&database, &format!("b{tag}_{label}_{i}")).await;
            if i >= 5 {
                samples.push(secs(started.elapsed()));
            }
            created.push(branch["id"].as_str().expect("id").to_owned());
        }
        for id in created {
            service.delete(&format!("/v1/branches/{id}")).await;
        }
        results["branch"]["cambium"][label] = stats(&samples);
        results["branch"]["cambium"][label]["bytes"] = json!(size);
        eprintln!("  cambium {label}: {}", cell(&results["branch"]["cambium"][label]));
        if label == LARGE {
            large = database;
        }
    }
    // The first commit on a fresh branch: create, connect (timed apart), two UPDATEs, delete.
    let (mut connects, mut first, mut second) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let branch = service.branch(&large, &format!("c{tag}_{i}")).await;
        let started = Instant::now();
        let client = connect(branch["connection_uri"].as_str().expect("uri")).await;
        connects.push(secs(started.elapsed()));
        let (a, b) = two_commits(&client).await;
        first.push(a);
        second.push(b);
        drop(client);
        service
            .delete(&format!("/v1/branches/{}", branch["id"].as_str().expect("id")))
            .await;
    }
    results["small_commit"]["cambium"] =
        json!({ "first": stats(&first), "second": stats(&second), "connect": stats(&connects) });
    results["restore"]["cambium"] = json!({ "total": cambium_restore(&service, &large, runs).await });
}

/// Restores of the 1 GiB database's default branch to the state before its last write, request to finished.
async fn cambium_restore(service: &Service, database: &Value, runs: usize) -> Value {
    let main = database["default_branch_id"].as_str().expect("branch");
    let uri = database["connection_uri"].as_str().expect("uri");
    let mut samples = Vec::new();
    for i in 0..runs + 2 {
        // The point to go back to: the latest state, named by a branch's parent_lsn (then the branch goes).
        let mark = service.branch(database, &format!("mark_{i}")).await;
        let lsn = mark["parent_lsn"].as_str().expect("lsn").to_owned();
        service
            .delete(&format!("/v1/branches/{}", mark["id"].as_str().expect("id")))
            .await;
        // A restore closes connections: a fresh one writes what the restore undoes.
        let writer = connect(uri).await;
        writer
            .execute("UPDATE counters SET n = n + 1 WHERE id = 1", &[])
            .await
            .expect("write");
        drop(writer);
        let started = Instant::now();
        let reply = service
            .post(
                &format!("/v1/branches/{main}/restore"),
                json!({ "target_lsn": lsn, "preserve": false }),
            )
            .await;
        service.wait(reply["operation"]["id"].as_str().expect("op")).await;
        if i >= 2 {
            samples.push(secs(started.elapsed()));
        }
    }
    stats(&samples)
}

// ---------------------------------------------------------------------------------------------------------
// Report: tables on stdout, the chart as SVG

fn ratio(cambium: Option<f64>, peer: Option<f64>) -> String {
    match (cambium, peer) {
        (Some(c), Some(p)) if c > 0.0 && p / c >= 10.0 => format!("{:.0}×", p / c),
        (Some(c), Some(p)) if c > 0.0 => format!("{:.2}×", p / c),
        _ => "—".to_owned(),
    }
}

fn report(results: &Value) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "{}; {} runs per peer measurement (Cambium branch creation: 4 × as many); load average at each section's start: {}\n",
        results["machine"]["summary"].as_str().unwrap_or(""),
        results["runs"],
        results["loadavg_at_start"]
    );
    let _ = writeln!(
        w,
        "### 1. Branch creation (median, p99; ratio = peer median / Cambium median)\n"
    );
    let _ = writeln!(w, "| peer | {} |", SIZES.map(|(l, _)| l).join(" | "));
    let _ = writeln!(w, "|---|{}", "---|".repeat(SIZES.len()));
    for (key, legend, _) in SERIES {
        let cells: Vec<String> = SIZES
            .iter()
            .map(|(label, _)| {
                let v = &results["branch"][key][label];
                if key == "cambium" {
                    cell(v)
                } else {
                    format!(
                        "{} — {}",
                        cell(v),
                        ratio(p50(&results["branch"]["cambium"][label]), p50(v))
                    )
                }
            })
            .collect();
        let _ = writeln!(w, "| {legend} | {} |", cells.join(" | "));
    }
    let _ = writeln!(
        w,
        "\n### 2. Small commit (one-row UPDATE, autocommit) on a fresh branch of 1 GiB\n"
    );
    let _ = writeln!(
        w,
        "| peer | first commit after branching | second commit | ratio (first) |"
    );
    let _ = writeln!(w, "|---|---|---|---|");
    let cambium_first = p50(&results["small_commit"]["cambium"]["first"]);
    for (key, legend) in [
        ("cambium", "Cambium (SQL on the branch's connection_uri)"),
        ("postgres", "PostgreSQL (database made by TEMPLATE)"),
        ("sqlite_copy", "SQLite (the copied file, synchronous=FULL)"),
        ("doltlite", "doltlite (after dolt_checkout of the new branch)"),
    ] {
        let v = &results["small_commit"][key];
        let _ = writeln!(
            w,
            "| {legend} | {} | {} | {} |",
            cell(&v["first"]),
            cell(&v["second"]),
            if key == "cambium" {
                "1×".to_owned()
            } else {
                ratio(cambium_first, p50(&v["first"]))
            }
        );
    }
    let sc = &results["small_commit"];
    let _ = writeln!(
        w,
        "\nCambium connect to the new branch: {}; doltlite dolt_checkout: {}, dolt_commit after the UPDATEs: {}",
        cell(&sc["cambium"]["connect"]),
        cell(&sc["doltlite"]["checkout"]),
        cell(&sc["doltlite"]["dolt_commit"])
    );
    let _ = writeln!(w, "\n### 3. Restore to a point in time, 1 GiB\n");
    let _ = writeln!(w, "| peer | request to usable | parts |");
    let _ = writeln!(w, "|---|---|---|");
    let r = &results["restore"];
    let _ = writeln!(
        w,
        "| Cambium `POST /v1/branches/{{id}}/restore` → finished | {} | |",
        cell(&r["cambium"]["total"])
    );
    let _ = writeln!(
        w,
        "| PostgreSQL PITR (copy base backup + replay archived WAL to recovery_target_time) | {} — {} | {} runs, each (s): {}; copy {}; start+recovery {}; (pg_basebackup itself: {:.1} s, untimed) |",
        cell(&r["postgres"]["total"]),
        ratio(p50(&r["cambium"]["total"]), p50(&r["postgres"]["total"])),
        r["postgres"]["total"]["runs"],
        r["postgres"]["total_samples_s"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .map(|t| format!("{t:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        cell(&r["postgres"]["copy_base_backup"]),
        cell(&r["postgres"]["recovery"]),
        r["postgres"]["pg_basebackup_s"].as_f64().unwrap_or(f64::NAN)
    );
    let _ = writeln!(w, "\n### 4. Page as of LSN, single thread\n");
    let p = &results["page_reads"];
    let rate = |v: &Value| {
        v["median_pages_per_s"]
            .as_f64()
            .map_or("—".to_owned(), |r| format!("{:.2} M pages/s", r / 1e6))
    };
    let _ = writeln!(
        w,
        "| lookups | Cambium `Timeline::get_page` | LMDB (heed) cursor seek ≤ (page, LSN) | Cambium / LMDB |"
    );
    let _ = writeln!(w, "|---|---|---|---|");
    for (what, suffix) in [
        ("random page, random LSN in the history", "history"),
        ("random page, latest LSN", "latest"),
    ] {
        let c = &p[format!("cambium_get_page_{suffix}")];
        let l = &p[format!("lmdb_as_of_{suffix}")];
        let share = match (c["median_pages_per_s"].as_f64(), l["median_pages_per_s"].as_f64()) {
            (Some(c), Some(l)) => format!("{:.0} %", 100.0 * c / l),
            _ => "—".to_owned(),
        };
        let _ = writeln!(
            w,
            "| {what} | {} ({:.0} % page-cache misses) | {} | {share} |",
            rate(c),
            100.0 * c["cambium_cache_miss_fraction"].as_f64().unwrap_or(f64::NAN),
            rate(l)
        );
    }
    out
}

/// Three significant digits at most, for labels on bars: `5.6 ms`, `736 ms`, `3.7 s`, `261 µs`.
fn short_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.0} µs", ms * 1000.0)
    }
}

/// Grouped bars of the branch-creation medians per size, log scale, as SVG text.
fn chart(results: &Value) -> String {
    let (width, height, left, top, bottom) = (1040.0, 460.0, 70.0, 50.0, 380.0);
    let (lo, hi) = (-2.0_f64, 5.0_f64); // 10 µs .. 100 s, in log10(ms)
    let y = |ms: f64| bottom - (ms.max(1e-2).log10() - lo) / (hi - lo) * (bottom - top);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle">Branch creation, median (log scale; lower is better)</text>"#,
        width / 2.0
    );
    for e in (lo as i32)..=(hi as i32) {
        let ms = 10f64.powi(e);
        let label = ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s"][(e - lo as i32) as usize];
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
            width - 270.0,
            left - 6.0,
            y(ms) + 4.0,
            y = y(ms)
        );
    }
    let group_w = (width - 270.0 - left) / SIZES.len() as f64;
    let bar_w = group_w * 0.8 / SERIES.len() as f64;
    for (g, (label, _)) in SIZES.iter().enumerate() {
        let x0 = left + g as f64 * group_w + group_w * 0.1;
        for (i, (key, _, colour)) in SERIES.iter().enumerate() {
            if let Some(ms) = p50(&results["branch"][key][label]) {
                let x = x0 + i as f64 * bar_w;
                let _ = writeln!(
                    s,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"><title>{} {label}: {}</title></rect>"#,
                    y(ms),
                    bar_w - 2.0,
                    bottom - y(ms),
                    key,
                    human_ms(ms)
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">{}</text>"#,
                    x + (bar_w - 2.0) / 2.0,
                    y(ms) - 3.0,
                    short_ms(ms)
                );
            }
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="14">{label}</text>"#,
            x0 + group_w * 0.4,
            bottom + 20.0
        );
    }
    for (i, (_, legend, colour)) in SERIES.iter().enumerate() {
        let ly = top + 20.0 + i as f64 * 22.0;
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{:.1}" width="14" height="14" fill="{colour}"/><text x="{}" y="{:.1}">{legend}</text>"#,
            width - 260.0,
            ly,
            width - 240.0,
            ly + 11.0
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="{}" fill="#555">{}</text>"##,
        height - 20.0,
        results["machine"]["summary"].as_str().unwrap_or("")
    );
    s.push_str("</svg>\n");
    s
}

fn machine() -> Value {
    let sh = |c: &str| {
        Command::new("sh")
            .args(["-c", c])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let nproc = sh("nproc");
    let mem = sh("free -h | awk '/Mem:/ {print $2}'");
    let kernel = sh("uname -r");
    let disk = sh("df -h / | awk 'NR==2 {print $1\" \"$2}'");
    let cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2");
    json!({
        "nproc": nproc, "memory": mem, "kernel": kernel, "disk": disk, "cpu": cpu,
        "summary": format!("{nproc} cores, {mem} RAM, Linux {kernel}; {}", jiff::Timestamp::now().strftime("%Y-%m-%d")),
    })
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = service::cambium_binary();
    let runs: usize = std::env::var("PEERS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    assert!(runs >= 5, "PEERS_RUNS={runs}: at least 5 runs per measurement");
    let keep = std::env::var_os("PEERS_KEEP_DATA").is_some_and(|v| v == "1");
    let work = root.join("target/bench-data/peers");
    std::fs::create_dir_all(&work).expect("work dir");
    let work = work.canonicalize().expect("work dir");
    if std::env::var_os("PEERS_REPORT_ONLY").is_some_and(|v| v == "1") {
        // Print the tables and redraw the chart from the last run's results, measuring nothing.
        let text = std::fs::read_to_string(work.join("results.json")).expect("results.json of a run");
        let results: Value = serde_json::from_str(&text).expect("results.json");
        println!("{}", report(&results));
        std::fs::write(root.join("docs/benchmarks-branch.svg"), chart(&results)).expect("svg");
        return;
    }
    if std::env::var_os("PEERS_PAGE_READS_ONLY").is_some_and(|v| v == "1") {
        // Re-measure section 4 alone into the last run's results (the other sections keep their numbers).
        let path = work.join("results.json");
        let text = std::fs::read_to_string(&path).expect("results.json of a run");
        let mut results: Value = serde_json::from_str(&text).expect("results.json");
        let avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        results["loadavg_at_start"]["page_reads"] = json!(avg.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
        eprintln!("[peers] page reads only: Cambium timeline vs LMDB");
        results["page_reads"] = page_reads(runs);
        let text = report(&results);
        println!("{text}");
        results["report_markdown"] = json!(text);
        std::fs::write(&path, serde_json::to_string_pretty(&results).expect("json")).expect("results.json");
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut results = json!({ "machine": machine(), "runs": runs, "branch": {}, "small_commit": {}, "restore": {} });
    let started = Instant::now();

    // The machine is shared (2 cores): the load average at each section's start goes in the results.
    let load = |results: &mut Value, section: &str| {
        let avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        results["loadavg_at_start"][section] = json!(avg.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    };
    load(&mut results, "page_reads");
    eprintln!("[peers] page reads: Cambium timeline vs LMDB");
    results["page_reads"] = page_reads(runs);

    load(&mut results, "sqlite");
    eprintln!("[peers] SQLite");
    sqlite(&work, runs, &mut results);
    if !keep {
        remove(&work.join("sqlite"));
    }

    load(&mut results, "doltlite");
    eprintln!("[peers] doltlite");
    if let Err(why) = doltlite(&work, runs, &mut results) {
        eprintln!("  doltlite skipped: {why}");
        results["branch"]["doltlite"]["skipped"] = json!(why);
    }
    if !keep {
        remove(&work.join("doltlite"));
    }

    load(&mut results, "postgres");
    eprintln!("[peers] PostgreSQL");
    match pg_setup(&work) {
        Ok((pg, tmp)) => {
            runtime.block_on(postgres(&pg, tmp.path(), runs, &mut results));
            drop(pg);
            let _ = Command::new("rm").arg("-rf").arg(tmp.path()).status();
        }
        Err(why) => {
            eprintln!("  postgres skipped: {why}");
            results["branch"]["postgres_template_wal_log"]["skipped"] = json!(why);
        }
    }

    load(&mut results, "cambium");
    eprintln!("[peers] Cambium (data in {})", work.join("cambium").display());
    runtime.block_on(cambium(&bin, &work, runs, &mut results));
    if !keep {
        remove(&work.join("cambium"));
        remove(&work.join("cambium-quick"));
    }
    results["elapsed_s"] = json!(started.elapsed().as_secs());

    load(&mut results, "end");
    let text = report(&results);
    println!("{text}");
    results["report_markdown"] = json!(text);
    let json_path = work.join(if quick() { "results-quick.json" } else { "results.json" });
    std::fs::write(&json_path, serde_json::to_string_pretty(&results).expect("json")).expect("results.json");
    eprintln!("[peers] wrote {}", json_path.display());
    if !quick() {
        let svg_path = root.join("docs/benchmarks-branch.svg");
        std::fs::write(&svg_path, chart(&results)).expect("svg");
        eprintln!("[peers] wrote {}", svg_path.display());
    }
}
