//! A bulk load in one transaction (issue 12 item 5 and "Done means": ≥ 50 % of local SQLite's rate), side by
//! side in one run on this machine:
//!
//! - **Cambium**: a release `cambium up` (its three safekeepers and its pageserver in the process, data on this
//!   disk), through the PostgreSQL wire protocol (tokio-postgres): `BEGIN`, `INSERT INTO big SELECT …` in
//!   statements of `BULK_CHUNK_ROWS` rows (a recursive CTE, as the `api` bench fills), `COMMIT`. The time is
//!   `BEGIN` to `COMMIT`'s answer, and the statements and the `COMMIT` are timed apart too (the statements are
//!   SQLite's work and the dirty pages' spill; the `COMMIT` streams every page to the safekeepers).
//! - **local SQLite**: the same SQL through rusqlite on a file on the same disk, `page_size` 8192 (Cambium's),
//!   the default rollback journal, `synchronous = FULL`, one transaction.
//! - **PostgreSQL 15** (when installed): `COPY big FROM STDIN (FORMAT binary)` of the same rows through
//!   tokio-postgres into a throwaway server with `fsync` on (`api/src/testing_postgres.rs`: `initdb` in a temp
//!   dir as the `postgres` user when run as root), in one transaction.
//! - **the disk**: `BULK_MIB` written in 8 MiB `write`s with an `fdatasync` after each, to one file, then to
//!   two and to three files at once (the safekeepers' copies): the physical floor of a load that must be
//!   durable on two of three safekeepers sharing this one disk.
//!
//! Rows are `(id bigint, b bytea)` of `BULK_ROW_BYTES` (4000) bytes: two rows fill an 8 KiB page, so `BULK_MIB`
//! (default 1024) MiB of rows is `BULK_MIB` MiB of pages and 256 rows a MiB. The main case is random payloads
//! (`randomblob`; random bytes for `COPY`), which no compression can shrink; `BULK_CASES=random,repeat` adds a
//! repetitive payload (`zeroblob`; zero bytes for `COPY`). Rates are MiB of rows per second of the whole
//! transaction; the ratio is to local SQLite's rate of the same case.
//!
//! `cargo build --release && cargo bench -p cambium-benches --bench bulkload` (`CAMBIUM_BIN` overrides the
//! binary; `CAMBIUM_BENCH_DATA` chooses the disk; `BULK_MIB=64` for a quick run; `BULK_PEERS=cambium,sqlite`
//! to leave out others). Each peer's data is deleted when its section ends. In `cargo test`'s bench mode
//! (`--bench` absent) it does nothing.

#[path = "../../api/src/testing_postgres.rs"]
mod postgres;
#[path = "common/service.rs"]
mod service;

use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::time::{Duration, Instant};

use cambium_benches::{scratch_dir, SplitMix64, MIB};
use service::connect;

/// Bytes per row: two rows to an 8 KiB page.
const ROW_BYTES_DEFAULT: u64 = 4000;
/// Rows per MiB of pages (two 4000-byte rows per 8 KiB page).
const ROWS_PER_MIB: u64 = 256;
/// The schema every peer gets.
const SCHEMA: &str = "CREATE TABLE big (id bigint PRIMARY KEY, b bytea NOT NULL)";

/// One payload kind.
#[derive(Clone, Copy, PartialEq)]
enum Payload {
    /// Random bytes: incompressible.
    Random,
    /// Zero bytes: as compressible as a payload gets.
    Repeat,
}

impl Payload {
    fn name(self) -> &'static str {
        match self {
            Payload::Random => "random",
            Payload::Repeat => "repetitive",
        }
    }

    /// The SQL expression of one row's payload.
    fn sql(self, row_bytes: u64) -> String {
        match self {
            Payload::Random => format!("randomblob({row_bytes})"),
            Payload::Repeat => format!("zeroblob({row_bytes})"),
        }
    }
}

/// What a load measured.
struct Load {
    total: Duration,
    /// The statements (or the `COPY`), without the commit.
    statements: Duration,
    /// The `COMMIT`.
    commit: Duration,
}

struct Plan {
    mib: u64,
    rows: u64,
    row_bytes: u64,
    chunk_rows: u64,
}

impl Plan {
    /// The `INSERT … SELECT` of rows `first..first + count` (1-based ids).
    fn insert(&self, payload: Payload, first: u64, count: u64) -> String {
        format!(
            "INSERT INTO big (id, b) WITH RECURSIVE c(x) AS (SELECT {first} UNION ALL SELECT x + 1 FROM c WHERE x < \
             {last}) SELECT x, {value} FROM c",
            last = first + count - 1,
            value = payload.sql(self.row_bytes),
        )
    }

    /// `(first id, count)` of each statement.
    fn chunks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.rows.div_ceil(self.chunk_rows)).map(|i| {
            let first = i * self.chunk_rows + 1;
            (first, self.chunk_rows.min(self.rows - i * self.chunk_rows))
        })
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let mib = env_u64("BULK_MIB", 1024);
    let row_bytes = env_u64("BULK_ROW_BYTES", ROW_BYTES_DEFAULT);
    let plan = Plan {
        mib,
        rows: mib * ROWS_PER_MIB,
        row_bytes,
        chunk_rows: env_u64("BULK_CHUNK_ROWS", 8192),
    };
    let cases: Vec<Payload> = std::env::var("BULK_CASES")
        .unwrap_or_else(|_| "random".to_owned())
        .split(',')
        .filter_map(|c| match c.trim() {
            "random" => Some(Payload::Random),
            "repeat" => Some(Payload::Repeat),
            "" => None,
            other => panic!("BULK_CASES: unknown case {other:?} (random, repeat)"),
        })
        .collect();
    let peers = std::env::var("BULK_PEERS").unwrap_or_else(|_| "disk,cambium,sqlite,postgres".to_owned());
    let wants = |peer: &str| peers.split(',').any(|p| p.trim() == peer);
    println!(
        "bulk load: {} MiB ({} rows of {} bytes) in one transaction; load average at start {}",
        plan.mib,
        plan.rows,
        plan.row_bytes,
        load_average()
    );

    let mut table: Vec<(String, Option<Load>, Option<String>)> = Vec::new();
    if wants("disk") {
        for files in [1, 2, 3] {
            let took = disk_floor(plan.mib, files);
            println!("  disk, {files} file(s) at once: {took:.2?}");
            table.push((
                format!(
                    "disk: {} MiB to each of {files} file(s), 8 MiB writes + fdatasync",
                    plan.mib
                ),
                Some(Load {
                    total: took,
                    statements: took,
                    commit: Duration::ZERO,
                }),
                None,
            ));
        }
    }
    let runtime = service::runtime();
    for &payload in &cases {
        if wants("cambium") {
            let load = runtime.block_on(cambium(&plan, payload));
            table.push((format!("Cambium, {}", payload.name()), Some(load), None));
        }
        if wants("sqlite") {
            let load = sqlite(&plan, payload);
            table.push((format!("local SQLite, {}", payload.name()), Some(load), None));
        }
        if wants("postgres") {
            let label = format!("PostgreSQL 15 COPY, {}", payload.name());
            match runtime.block_on(postgres_copy(&plan, payload)) {
                Some(load) => table.push((label, Some(load), None)),
                None => table.push((label, None, Some("skipped: no PostgreSQL 15".to_owned()))),
            }
        }
    }

    println!();
    println!("load average at end {}", load_average());
    println!("| | statements | COMMIT | total | MiB/s | × local SQLite |");
    println!("|---|---|---|---|---|---|");
    for (label, load, note) in &table {
        let Some(load) = load else {
            println!("| {label} | {} | | | | |", note.as_deref().unwrap_or(""));
            continue;
        };
        let rate = plan.mib as f64 / load.total.as_secs_f64();
        let case = if label.ends_with("random") {
            "random"
        } else {
            "repetitive"
        };
        let sqlite_rate = table
            .iter()
            .find(|(l, _, _)| l == &format!("local SQLite, {case}"))
            .and_then(|(_, l, _)| l.as_ref())
            .map(|l| plan.mib as f64 / l.total.as_secs_f64());
        let ratio = sqlite_rate.map_or_else(|| "—".to_owned(), |s| format!("{:.0} %", 100.0 * rate / s));
        println!(
            "| {label} | {:.2} s | {:.2} s | {:.2} s | {rate:.1} | {ratio} |",
            load.statements.as_secs_f64(),
            load.commit.as_secs_f64(),
            load.total.as_secs_f64()
        );
    }
}

/// Writes `mib` MiB to each of `files` files at once, 8 MiB a `write` and an `fdatasync` after each: what the
/// disk does for WAL parts of 8 MiB appended by `files` safekeepers.
fn disk_floor(mib: u64, files: usize) -> Duration {
    let dir = scratch_dir("bulkload-disk");
    let block = vec![0xA5u8; 8 * MIB as usize];
    let started = Instant::now();
    std::thread::scope(|scope| {
        for i in 0..files {
            let path = dir.path().join(format!("copy-{i}"));
            let block = &block;
            scope.spawn(move || {
                let file = std::fs::File::create(&path).expect("create");
                let mut offset = 0u64;
                while offset < mib * MIB {
                    file.write_all_at(block, offset).expect("write");
                    file.sync_data().expect("fdatasync");
                    offset += block.len() as u64;
                }
            });
        }
    });
    started.elapsed()
}

/// Cambium through `cambium up` and the wire protocol.
async fn cambium(plan: &Plan, payload: Payload) -> Load {
    let bin = service::cambium_binary();
    let dir = scratch_dir("bulkload-cambium");
    let load = {
        let up = service::start(&bin, dir.path());
        let project = up.project("bulkload").await;
        let database = up.database(&project, "bulk", SCHEMA).await;
        let client = connect(database["connection_uri"].as_str().expect("uri")).await;
        let load = timed_sql_load(plan, payload, |sql| {
            let client = &client;
            async move { client.batch_execute(&sql).await.expect("statement") }
        })
        .await;
        let row = client
            .query_one("SELECT count(*)::bigint, sum(length(b))::bigint FROM big", &[])
            .await
            .expect("count");
        check_rows(plan, row.get::<_, i64>(0), row.get::<_, i64>(1));
        load
    };
    println!(
        "  Cambium, {}: statements {:.2?}, COMMIT {:.2?}, total {:.2?}",
        payload.name(),
        load.statements,
        load.commit,
        load.total
    );
    load
}

/// `BEGIN`, the plan's statements, `COMMIT`, each through `run`, timed.
async fn timed_sql_load<F, Fut>(plan: &Plan, payload: Payload, run: F) -> Load
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let started = Instant::now();
    run("BEGIN".to_owned()).await;
    for (first, count) in plan.chunks() {
        run(plan.insert(payload, first, count)).await;
    }
    let statements = started.elapsed();
    run("COMMIT".to_owned()).await;
    let total = started.elapsed();
    Load {
        total,
        statements,
        commit: total - statements,
    }
}

fn check_rows(plan: &Plan, count: i64, bytes: i64) {
    assert_eq!(u64::try_from(count).expect("a count"), plan.rows, "rows loaded");
    assert_eq!(
        u64::try_from(bytes).expect("a sum"),
        plan.rows * plan.row_bytes,
        "bytes loaded"
    );
}

/// Local SQLite on a file, the same SQL.
fn sqlite(plan: &Plan, payload: Payload) -> Load {
    let dir = scratch_dir("bulkload-sqlite");
    let connection = rusqlite::Connection::open(dir.path().join("bulk.db")).expect("open");
    connection
        .execute_batch("PRAGMA page_size = 8192; PRAGMA synchronous = FULL;")
        .expect("pragmas");
    connection
        .execute_batch("CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB NOT NULL)")
        .expect("schema");
    let started = Instant::now();
    connection.execute_batch("BEGIN").expect("begin");
    for (first, count) in plan.chunks() {
        connection
            .execute_batch(&plan.insert(payload, first, count))
            .expect("insert");
    }
    let statements = started.elapsed();
    connection.execute_batch("COMMIT").expect("commit");
    let total = started.elapsed();
    let (count, bytes): (i64, i64) = connection
        .query_row("SELECT count(*), sum(length(b)) FROM big", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("count");
    check_rows(plan, count, bytes);
    let load = Load {
        total,
        statements,
        commit: total - statements,
    };
    println!(
        "  local SQLite, {}: statements {:.2?}, COMMIT {:.2?}, total {:.2?}",
        payload.name(),
        load.statements,
        load.commit,
        load.total
    );
    load
}

/// PostgreSQL 15's `COPY … FROM STDIN (FORMAT binary)` in one transaction; `None` if it is not installed.
async fn postgres_copy(plan: &Plan, payload: Payload) -> Option<Load> {
    use tokio_postgres::binary_copy::BinaryCopyInWriter;
    use tokio_postgres::types::Type;

    let server = postgres::TestPostgres::start_durable()?;
    let uri = server.create_database("bulk");
    let mut client = connect(&uri).await;
    client.batch_execute(SCHEMA).await.expect("schema");
    let mut random = SplitMix64::new(0xB0_1C);
    let mut value = vec![0u8; plan.row_bytes as usize];
    let started = Instant::now();
    let transaction = client.transaction().await.expect("begin");
    let sink = transaction
        .copy_in("COPY big (id, b) FROM STDIN (FORMAT binary)")
        .await
        .expect("copy");
    let writer = BinaryCopyInWriter::new(sink, &[Type::INT8, Type::BYTEA]);
    let mut writer = std::pin::pin!(writer);
    for id in 1..=plan.rows {
        if payload == Payload::Random {
            for word in value.chunks_mut(8) {
                let bytes = random.next_u64().to_le_bytes();
                word.copy_from_slice(&bytes[..word.len()]);
            }
        }
        let id = i64::try_from(id).expect("an id");
        writer.as_mut().write(&[&id, &value.as_slice()]).await.expect("row");
    }
    let written = writer.finish().await.expect("copy done");
    assert_eq!(written, plan.rows, "rows copied");
    let statements = started.elapsed();
    transaction.commit().await.expect("commit");
    let total = started.elapsed();
    let row = client
        .query_one("SELECT count(*)::bigint, sum(length(b))::bigint FROM big", &[])
        .await
        .expect("count");
    check_rows(plan, row.get::<_, i64>(0), row.get::<_, i64>(1));
    let load = Load {
        total,
        statements,
        commit: total - statements,
    };
    println!(
        "  PostgreSQL COPY, {}: COPY {:.2?}, COMMIT {:.2?}, total {:.2?}",
        payload.name(),
        load.statements,
        load.commit,
        load.total
    );
    let _ = std::io::stdout().flush();
    drop(server);
    Some(load)
}
