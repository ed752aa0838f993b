//! The `/v1` API of a real `cambium up` (release build), through HTTP, in one run (DESIGN §8):
//! - branch creation p50/p99 on a small database and a ~1 GiB one, and the ratio of their medians;
//! - restore, request to `finished` (`POST …/restore` then `GET …?wait=`), p50/p99, on both;
//! - the API's rate of authenticated GETs, with 4 keep-alive clients.
//!
//! Not criterion: percentiles of a service's latency, printed as a table. Run with
//! `cargo build --release && cargo bench -p cambium-benches --bench api` (`CAMBIUM_BIN` overrides the binary;
//! `API_BENCH_ITERATIONS` the samples per measurement). The ~1 GiB database is built once through SQL (4 MiB
//! transactions of random blobs) and kept in `target/bench-data/api`; later runs reuse it. In `cargo test`'s
//! bench mode (`--bench` absent) it does nothing.

#[path = "common/service.rs"]
mod service;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use service::{connect, Service};

/// Bytes the large database holds at least.
const LARGE_BYTES: u64 = 1 << 30;
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

/// Authenticated GETs per second with `clients` keep-alive connections for `seconds`.
async fn bench_gets(service: &Service, path: &str, clients: usize, seconds: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, url, key) = (
            reqwest::Client::new(),
            format!("{}{path}", service.url),
            service.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                let response = http.get(&url).bearer_auth(&key).send().await.expect("get");
                assert_eq!(response.status().as_u16(), 200);
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

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = service::cambium_binary();
    let iterations: usize = std::env::var("API_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let data_dir = root.join("target/bench-data/api");
    std::fs::create_dir_all(&data_dir).expect("data dir");
    // reqwest is built with rustls and no bundled provider (keeping aws-lc out): ring it is (plain HTTP here).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let service = service::start(&bin, &data_dir);
        let projects = service.get("/v1/projects").await;
        let project = match projects["projects"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "bench")
        {
            Some(project) => project["id"].as_str().expect("id").to_owned(),
            None => service.post("/v1/projects", json!({"name": "bench"})).await["project"]["id"]
                .as_str()
                .expect("id")
                .to_owned(),
        };
        let small = service.database(&project, "small", SCHEMA).await;
        let large = service.database(&project, "large", SCHEMA).await;
        let small_bytes = fill(small["connection_uri"].as_str().expect("uri"), 1 << 20).await;
        eprintln!(
            "building/checking the large database (cached in {})",
            data_dir.display()
        );
        let large_bytes = fill(large["connection_uri"].as_str().expect("uri"), LARGE_BYTES).await;

        println!("cambium up (release), {iterations} samples per row, 2-core machine");
        println!("| measurement | database | p50 | p99 |");
        println!("|---|---|---|---|");
        let (small_p50, small_p99) = bench_branch(&service, &small, iterations).await;
        println!(
            "| branch create | {} MiB | {:.2} ms | {:.2} ms |",
            small_bytes >> 20,
            ms(small_p50),
            ms(small_p99)
        );
        let (large_p50, large_p99) = bench_branch(&service, &large, iterations).await;
        println!(
            "| branch create | {} MiB | {:.2} ms | {:.2} ms |",
            large_bytes >> 20,
            ms(large_p50),
            ms(large_p99)
        );
        let restores = (iterations / 4).max(10);
        let (small_r50, small_r99) = bench_restore(&service, &small, restores).await;
        println!(
            "| restore, request to finished | {} MiB | {:.2} ms | {:.2} ms |",
            small_bytes >> 20,
            ms(small_r50),
            ms(small_r99)
        );
        let (large_r50, large_r99) = bench_restore(&service, &large, restores).await;
        println!(
            "| restore, request to finished | {} MiB | {:.2} ms | {:.2} ms |",
            large_bytes >> 20,
            ms(large_r50),
            ms(large_r99)
        );
        println!(
            "branch create p50 ratio, {} MiB / {} MiB: {:.2}; restore p50 ratio: {:.2}",
            large_bytes >> 20,
            small_bytes >> 20,
            ms(large_p50) / ms(small_p50),
            ms(large_r50) / ms(small_r50)
        );
        let database_id = small["id"].as_str().expect("id");
        let rate = bench_gets(&service, &format!("/v1/databases/{database_id}"), 4, 5).await;
        println!("GET /v1/databases/{{id}}, 4 keep-alive clients: {rate:.0} requests/s");
        let rate = bench_gets(&service, &format!("/v1/projects/{project}"), 4, 5).await;
        println!("GET /v1/projects/{{id}}, 4 keep-alive clients: {rate:.0} requests/s");
    });
}
