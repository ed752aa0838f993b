//! The `/v1` API of a real `cambium up` (release build), through HTTP, in one run (DESIGN §8), with its control
//! metadata in SQLite and in PostgreSQL side by side (issue 17):
//! - branch creation p50/p99 on a small database and a ~1 GiB one, and the ratio of their medians;
//! - restore, request to `finished` (`POST …/restore` then `GET …?wait=`), p50/p99, on both;
//! - the API's rate of authenticated GETs, with 4 keep-alive clients.
//!
//! Not criterion: percentiles of a service's latency, printed as a table with a column per metadata backend and
//! the PostgreSQL/SQLite ratio. Run with `cargo build --release && cargo bench -p cambium-benches --bench api`
//! (`CAMBIUM_BIN` overrides the binary; `API_BENCH_ITERATIONS` the samples per measurement).
//!
//! `API_BENCH_METADATA` picks the backends: `sqlite`, `postgres` or `both` (the default). Each backend is a
//! `cambium up` of its own, both running for the whole run, and every measurement runs on one, then the other,
//! so that a change in the machine's load between measurements touches both columns alike.
//! - SQLite (`metadata.sqlite`, WAL, `synchronous = FULL`): the data directory is `target/bench-data/api`, kept
//!   between runs. The ~1 GiB database is built once through SQL (4 MiB transactions of random blobs); later
//!   runs reuse it.
//! - PostgreSQL: a throwaway PostgreSQL 15 as the tests make one (`api/src/testing_postgres.rs`: `initdb` in a
//!   temp dir, a free loopback port, stopped at the end, never a system service; `$PG_BIN` or
//!   `/usr/lib/postgresql/15/bin`), here with `fsync` on, so a metadata commit is as durable as SQLite's; `up
//!   --metadata postgresql://…` over loopback TCP, with a fresh data directory under `target/bench-data`
//!   (`api-postgres-*`, deleted at the end), since the metadata it would match is gone with the server. The
//!   ~1 GiB database is measured on SQLite only unless `API_BENCH_PG_LARGE=1` (then filled afresh, ~12 s on a
//!   quiet machine and ~4 GiB on disk): the metadata's part of a branch or a restore does not depend on the
//!   database's size, which the small database's rows and the SQLite column's 1 GiB / small ratio show.
//!
//! In `cargo test`'s bench mode (`--bench` absent) it does nothing.

#[path = "../../api/src/testing_postgres.rs"]
mod postgres;
#[path = "common/service.rs"]
mod service;

use std::path::Path;
use std::time::{Duration, Instant};

use postgres::TestPostgres;
use serde_json::{json, Value};
use service::{connect, Service};

/// Bytes the large database holds at least.
const LARGE_BYTES: u64 = 1 << 30;
/// The bench's project, found by this name in a kept data directory (with its databases, already filled).
const PROJECT_NAME: &str = "bench";

/// Rows per fill transaction, and bytes per row (4 MiB per transaction).
const FILL_ROWS: u64 = 1_000;
const FILL_ROW_BYTES: u64 = 4_096;

/// The schema every bench database gets.
const SCHEMA: &str = "CREATE TABLE blobs (id INTEGER PRIMARY KEY, v BLOB NOT NULL)";

/// The database's size in bytes, as SQLite sees it.
async fn size_bytes(client: &tokio_postgres::Client) -> u64 {
    let row = client
        .query_one(
            "SELECT (page_count * page_size)::bigint FROM pragma_page_count(), pragma_page_size()",
            &[],
        )
        .await
        .expect("size");
    u64::try_from(row.get::<_, i64>(0)).expect("a size")
}

/// Fills the database to at least `bytes`.
async fn fill(uri: &str, bytes: u64) -> u64 {
    let client = connect(uri).await;
    let mut size = size_bytes(&client).await;
    let started = Instant::now();
    while size < bytes {
        let row = client
            .query_one("SELECT coalesce(max(id), 0)::bigint FROM blobs", &[])
            .await
            .expect("max");
        let next: i64 = row.get(0);
        client
            .batch_execute(&format!(
                "WITH RECURSIVE c(x) AS (SELECT {start} UNION ALL SELECT x + 1 FROM c WHERE x < {end})
                 INSERT INTO blobs (id, v) SELECT x, randomblob({FILL_ROW_BYTES}) FROM c",
                start = next + 1,
                end = next + i64::try_from(FILL_ROWS).expect("rows"),
            ))
            .await
            .expect("fill");
        size = size_bytes(&client).await;
        eprint!("\r  filled {} MiB in {:.0?}   ", size >> 20, started.elapsed());
    }
    eprintln!();
    size
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn summary(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Branch creations of `database`'s default branch (from the latest state), then their deletion.
async fn bench_branch(service: &Service, database: &Value, iterations: usize) -> (Duration, Duration) {
    let id = database["id"].as_str().expect("id");
    let mut samples = Vec::with_capacity(iterations);
    let mut created = Vec::with_capacity(iterations);
    let run = jiff::Timestamp::now().as_millisecond();
    for i in 0..iterations + 5 {
        let started = Instant::now();
        let reply = service
            .post(
                &format!("/v1/databases/{id}/branches"),
                json!({ "name": format!("b{run}_{i}") }),
            )
            .await;
        let took = started.elapsed();
        if i >= 5 {
            samples.push(took);
        }
        created.push(reply["branch"]["id"].as_str().expect("id").to_owned());
    }
    for branch in created {
        service.delete(&format!("/v1/branches/{branch}")).await;
    }
    summary(samples)
}

/// Restores of the default branch to its state a moment ago (one commit back), request to finished.
async fn bench_restore(service: &Service, database: &Value, iterations: usize) -> (Duration, Duration) {
    let id = database["id"].as_str().expect("id");
    let main = database["default_branch_id"].as_str().expect("branch");
    let client = connect(database["connection_uri"].as_str().expect("uri")).await;
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS marks (id INTEGER PRIMARY KEY)")
        .await
        .expect("marks");
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations + 3 {
        // A point to go back to: the latest state, named by a branch's parent_lsn (then the branch goes).
        let mark = service
            .post(
                &format!("/v1/databases/{id}/branches"),
                json!({ "name": format!("mark_{i}") }),
            )
            .await;
        let lsn = mark["branch"]["parent_lsn"].as_str().expect("lsn").to_owned();
        let mark_id = mark["branch"]["id"].as_str().expect("id").to_owned();
        service.delete(&format!("/v1/branches/{mark_id}")).await;
        // The connection was closed by the previous restore: a fresh one writes what the restore undoes.
        let writer = connect(database["connection_uri"].as_str().expect("uri")).await;
        writer
            .execute("INSERT INTO marks (id) VALUES (NULL)", &[])
            .await
            .expect("write");
        let started = Instant::now();
        let reply = service
            .post(
                &format!("/v1/branches/{main}/restore"),
                json!({ "target_lsn": lsn, "preserve": false }),
            )
            .await;
        service.wait(reply["operation"]["id"].as_str().expect("op")).await;
        let took = started.elapsed();
        if i >= 3 {
            samples.push(took);
        }
    }
    drop(client);
    summary(samples)
}

/// A request a rate is measured of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    /// `GET path`.
    Get,
    /// `PATCH path` renaming the project (a metadata write: the row and its audit entry, one transaction).
    RenameProject,
}

/// Authenticated requests per second with `clients` keep-alive connections for `seconds`.
async fn bench_requests(service: &Service, call: Call, path: &str, clients: usize, seconds: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (http, url, key) = (
            reqwest::Client::new(),
            format!("{}{path}", service.url),
            service.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                let request = match call {
                    Call::Get => http.get(&url),
                    Call::RenameProject => http
                        .patch(&url)
                        .header("content-type", "application/json")
                        .body(format!(r#"{{"name":"bench-{client}-{done}"}}"#)),
                };
                let response = request.bearer_auth(&key).send().await.expect("request");
                assert_eq!(response.status().as_u16(), 200, "{call:?} {url}");
                let _ = response.bytes().await.expect("body");
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("task");
    }
    total as f64 / seconds as f64
}

/// Where a `cambium up`'s control metadata lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metadata {
    /// `metadata.sqlite` in the data directory (the default).
    Sqlite,
    /// A database on the bench's own PostgreSQL 15 (`--metadata postgresql://…`).
    Postgres,
}

impl Metadata {
    fn name(self) -> &'static str {
        match self {
            Metadata::Sqlite => "SQLite",
            Metadata::Postgres => "PostgreSQL",
        }
    }
}

/// The backends `API_BENCH_METADATA` names: `sqlite`, `postgres` or `both` (the default when unset).
fn metadata_from_env() -> Result<Vec<Metadata>, String> {
    match std::env::var("API_BENCH_METADATA") {
        Err(std::env::VarError::NotPresent) => Ok(vec![Metadata::Sqlite, Metadata::Postgres]),
        Ok(value) => match value.as_str() {
            "both" => Ok(vec![Metadata::Sqlite, Metadata::Postgres]),
            "sqlite" => Ok(vec![Metadata::Sqlite]),
            "postgres" | "postgresql" => Ok(vec![Metadata::Postgres]),
            other => Err(format!(
                "API_BENCH_METADATA={other:?}: expected sqlite, postgres or both"
            )),
        },
        Err(std::env::VarError::NotUnicode(value)) => Err(format!(
            "API_BENCH_METADATA={value:?}: expected sqlite, postgres or both"
        )),
    }
}

/// One `cambium up` under bench and its databases. Fields drop in order: the service stops (cleanly) before the
/// PostgreSQL server holding its metadata and its temporary data directory go.
struct Target {
    metadata: Metadata,
    service: Service,
    project: String,
    /// The small database and its size in bytes.
    small: (Value, u64),
    /// The ~1 GiB database and its size in bytes, where it is measured.
    large: Option<(Value, u64)>,
    _postgres: Option<TestPostgres>,
    _data_dir: Option<tempfile::TempDir>,
}

/// Which of a target's databases a measurement uses.
#[derive(Clone, Copy)]
enum Size {
    Small,
    Large,
}

impl Target {
    fn database(&self, size: Size) -> Option<&(Value, u64)> {
        match size {
            Size::Small => Some(&self.small),
            Size::Large => self.large.as_ref(),
        }
    }
}

/// Starts `bin up` with its metadata on `metadata` (its data under `bench_data`), with project `bench` and its
/// databases `small` and, if `with_large`, `large`, filled (or found filled) to their sizes.
async fn start_target(metadata: Metadata, bin: &Path, bench_data: &Path, with_large: bool) -> Target {
    let (service, postgres, data_dir) = match metadata {
        Metadata::Sqlite => {
            let dir = bench_data.join("api");
            std::fs::create_dir_all(&dir).expect("data dir");
            (service::start(bin, &dir), None, None)
        }
        Metadata::Postgres => {
            let postgres = TestPostgres::start_durable().expect(
                "PostgreSQL 15 for the metadata (set PG_BIN, or API_BENCH_METADATA=sqlite to bench without it)",
            );
            let url = postgres.create_database("metadata");
            let dir = tempfile::Builder::new()
                .prefix("api-postgres-")
                .tempdir_in(bench_data)
                .expect("a data dir");
            let service = service::start_with(bin, dir.path(), &["--metadata", &url]);
            assert!(
                !dir.path().join("metadata.sqlite").exists(),
                "--metadata was given, yet the metadata went to SQLite"
            );
            (service, Some(postgres), Some(dir))
        }
    };
    let projects = service.get("/v1/projects").await;
    let project = match projects["projects"]
        .as_array()
        .into_iter()
        .flatten()
        // A run stopped during the rename measurement left it as `bench-<client>-<n>`.
        .find(|p| {
            p["name"]
                .as_str()
                .is_some_and(|name| name == PROJECT_NAME || name.starts_with("bench-"))
        }) {
        Some(project) => project["id"].as_str().expect("id").to_owned(),
        None => service.project(PROJECT_NAME).await,
    };
    let small = service.database(&project, "small", SCHEMA).await;
    let small_bytes = fill(small["connection_uri"].as_str().expect("uri"), 1 << 20).await;
    let large = if with_large {
        eprintln!("{}: building/checking the large database", metadata.name());
        let large = service.database(&project, "large", SCHEMA).await;
        let bytes = fill(large["connection_uri"].as_str().expect("uri"), LARGE_BYTES).await;
        Some((large, bytes))
    } else {
        None
    };
    Target {
        metadata,
        service,
        project,
        small: (small, small_bytes),
        large,
        _postgres: postgres,
        _data_dir: data_dir,
    }
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), or why they are unknown.
fn load_average() -> String {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(text) => text.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        Err(error) => format!("unknown ({error})"),
    }
}

/// The small database's path, for the GET rate.
fn database_path(target: &Target) -> String {
    format!("/v1/databases/{}", target.small.0["id"].as_str().expect("id"))
}

/// The project's path, for the GET rate.
fn project_path(target: &Target) -> String {
    format!("/v1/projects/{}", target.project)
}

/// One row of the latency table: per target (in order), p50, p99 and the database's size; `None` where the
/// target does not have that database.
struct Row {
    measurement: &'static str,
    cells: Vec<Option<(Duration, Duration, u64)>>,
}

/// `a / b` with two decimals, or `—` where either is missing.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "—".to_owned(),
    }
}

/// The latency table: a p50 and a p99 column per target, then PostgreSQL / SQLite where both ran.
fn print_latencies(targets: &[Target], rows: &[Row]) {
    let both = targets.len() == 2;
    let mut header = "| measurement | database |".to_owned();
    let mut rule = "|---|---|".to_owned();
    for target in targets {
        header += &format!(" {0} p50 | {0} p99 |", target.metadata.name());
        rule += "---|---|";
    }
    if both {
        header += " PG/SQLite p50 | PG/SQLite p99 |";
        rule += "---|---|";
    }
    println!("{header}\n{rule}");
    for row in rows {
        let sizes: Vec<String> = row
            .cells
            .iter()
            .flatten()
            .map(|(_, _, bytes)| format!("{} MiB", bytes >> 20))
            .collect();
        let mut line = format!("| {} | {} |", row.measurement, sizes.join(" / "));
        for cell in &row.cells {
            line += &match cell {
                Some((p50, p99, _)) => format!(" {:.2} ms | {:.2} ms |", ms(*p50), ms(*p99)),
                None => " — | — |".to_owned(),
            };
        }
        if both {
            let p50 = |i: usize| row.cells[i].map(|(p50, _, _)| ms(p50));
            let p99 = |i: usize| row.cells[i].map(|(_, p99, _)| ms(p99));
            line += &format!(" {} | {} |", ratio(p50(1), p50(0)), ratio(p99(1), p99(0)));
        }
        println!("{line}");
    }
}

/// Every latency measurement, each on every target in turn before the next.
async fn measure_latencies(targets: &[Target], iterations: usize, restores: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for (measurement, size) in [
        ("branch create, small", Size::Small),
        ("branch create, ~1 GiB", Size::Large),
    ] {
        let mut cells = Vec::new();
        for target in targets {
            cells.push(match target.database(size) {
                Some((database, bytes)) => {
                    let (p50, p99) = bench_branch(&target.service, database, iterations).await;
                    Some((p50, p99, *bytes))
                }
                None => None,
            });
        }
        rows.push(Row { measurement, cells });
    }
    for (measurement, size) in [
        ("restore to finished, small", Size::Small),
        ("restore to finished, ~1 GiB", Size::Large),
    ] {
        let mut cells = Vec::new();
        for target in targets {
            cells.push(match target.database(size) {
                Some((database, bytes)) => {
                    let (p50, p99) = bench_restore(&target.service, database, restores).await;
                    Some((p50, p99, *bytes))
                }
                None => None,
            });
        }
        rows.push(Row { measurement, cells });
    }
    rows
}

/// The request rates, each on every target in turn: per request, its label and a rate per target.
async fn measure_rates(targets: &[Target]) -> Vec<(&'static str, Vec<f64>)> {
    let mut rates = Vec::new();
    for (label, call, path_of) in [
        (
            "GET /v1/databases/{id}",
            Call::Get,
            database_path as fn(&Target) -> String,
        ),
        ("GET /v1/projects/{id}", Call::Get, project_path),
        ("PATCH /v1/projects/{id} (rename)", Call::RenameProject, project_path),
    ] {
        let mut cells = Vec::new();
        for target in targets {
            cells.push(bench_requests(&target.service, call, &path_of(target), 4, 5).await);
            if call == Call::RenameProject {
                // Named back, so the next run finds the project and its databases (else each run made and
                // filled a new ~1 GiB database, and left the old one on disk).
                let (status, body) = target
                    .service
                    .call(
                        reqwest::Method::PATCH,
                        &project_path(target),
                        Some(serde_json::json!({ "name": PROJECT_NAME })),
                    )
                    .await;
                assert_eq!(status, 200, "{body}");
            }
        }
        rates.push((label, cells));
    }
    rates
}

/// The request rate table: a column per backend named in `names`, then PostgreSQL / SQLite where both ran.
fn print_rates(names: &[&str], rates: &[(&str, Vec<f64>)]) {
    let mut header = "| 4 keep-alive clients |".to_owned();
    let mut rule = "|---|".to_owned();
    for name in names {
        header += &format!(" {name} |");
        rule += "---|";
    }
    if names.len() == 2 {
        header += " PG/SQLite |";
        rule += "---|";
    }
    println!("{header}\n{rule}");
    for (label, cells) in rates {
        let mut line = format!("| `{label}` |");
        for rate in cells {
            line += &format!(" {rate:.0} requests/s |");
        }
        if names.len() == 2 {
            line += &format!(" {} |", ratio(Some(cells[1]), Some(cells[0])));
        }
        println!("{line}");
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let backends = match metadata_from_env() {
        Ok(backends) => backends,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let large_on_postgres = std::env::var("API_BENCH_PG_LARGE").is_ok_and(|v| v == "1");
    let bench_data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data");
    std::fs::create_dir_all(&bench_data).expect("bench data dir");
    let bin = service::cambium_binary();
    let iterations = service::env_usize("API_BENCH_ITERATIONS", 200);
    let restores = (iterations / 4).max(10);
    service::runtime().block_on(async {
        let mut targets = Vec::new();
        for metadata in backends {
            let with_large = metadata == Metadata::Sqlite || large_on_postgres;
            targets.push(start_target(metadata, &bin, &bench_data, with_large).await);
        }

        // Each measurement on every target in turn, before the next measurement.
        let load_at_start = load_average();
        let rows = measure_latencies(&targets, iterations, restores).await;
        let rates = measure_rates(&targets).await;
        let load_at_end = load_average();
        let names: Vec<&str> = targets.iter().map(|t| t.metadata.name()).collect();
        println!(
            "cambium up (release), control metadata on {}; {iterations} samples per branch row, {restores} per \
             restore row; measurements alternate between the backends",
            names.join(" and ")
        );
        if targets.iter().any(|t| t.metadata == Metadata::Postgres) {
            println!(
                "PostgreSQL: a PostgreSQL 15 of the bench's own (initdb in a temp dir, fsync on), loopback TCP; \
                 SQLite: metadata.sqlite, WAL, synchronous FULL"
            );
        }
        println!(
            "load average (1, 5, 15 min) as the measurements started: {load_at_start}; as they ended: {load_at_end}"
        );
        println!();
        print_latencies(&targets, &rows);
        if rows.iter().any(|row| row.cells.iter().any(Option::is_none)) {
            println!(
                "—: not measured. The ~1 GiB database is on SQLite only (the metadata's part of a branch or a \
                 restore does not depend on the database's size); API_BENCH_PG_LARGE=1 measures it on PostgreSQL too"
            );
        }
        println!();
        for (i, target) in targets.iter().enumerate() {
            let p50 = |row: usize| rows[row].cells[i].map(|(p50, _, _)| ms(p50));
            if target.large.is_some() {
                println!(
                    "{}: p50 ratio ~1 GiB / small: branch create {}, restore {}",
                    target.metadata.name(),
                    ratio(p50(1), p50(0)),
                    ratio(p50(3), p50(2))
                );
            }
        }
        println!();
        print_rates(&names, &rates);
    });
}
