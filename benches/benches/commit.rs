//! Commit latency and throughput through three safekeepers, on loopback gRPC and with the same service called
//! in process (as `cambium up` does), side by side with a bare `fdatasync` loop on the same disk, in one run.
//!
//! Three `SafekeeperNode`s serve real gRPC on 127.0.0.1 (in this process, each with its own data directory);
//! a `WalProposer` commits records through them. Reports:
//! - `fdatasync`: append 100 bytes to a file and `fdatasync` it, one at a time;
//! - two concurrent `fdatasync`s of appends to two files on the same disk: the real floor of a commit here,
//!   which needs two durable writes (a majority of three) and, with all safekeepers on one disk, cannot run
//!   them on independent devices as three hosts would;
//! - commit latency with one writer (small records): p50, p99;
//! - throughput with 64 concurrent writers (small records): commits/s and p50 latency;
//! - WAL ingest with large records (256 KiB, 8 writers): MB/s.
//!
//! `cargo bench -p cambium-benches --bench commit` (set `CAMBIUM_BENCH_DATA` to choose the disk).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use safekeeper::filestore::FileStoreConfig;
use safekeeper::node::{NodeConfig, SafekeeperNode};
use storage::{Key, Lsn, Patch, TenantId, TimelineId, Value, WalRecord};
use walproposer::{WalProposer, WalProposerConfig};

const START: Lsn = Lsn(0x100_0000);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn record(payload_bytes: usize, tag: u64) -> Bytes {
    let mut data = vec![(tag % 251) as u8; payload_bytes.max(8)];
    data[..8].copy_from_slice(&tag.to_le_bytes());
    let patches = data
        .chunks(8000)
        .enumerate()
        .map(|(i, chunk)| {
            (
                Key::page(i as u32),
                Value::Delta(vec![Patch {
                    offset: 0,
                    data: Bytes::copy_from_slice(chunk),
                }]),
            )
        })
        .collect();
    WalRecord {
        commit_ts_us: tag,
        db_size_pages: 1,
        entries: patches,
    }
    .to_frame()
    .expect("valid record")
}

/// Two threads each append 100 bytes to their own file and fdatasync it, in lock step; the time per round.
fn concurrent_fdatasync_loop(dir: &std::path::Path, count: usize) -> Vec<Duration> {
    let barrier = Arc::new(std::sync::Barrier::new(3));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let path = dir.join(format!("fdatasync-probe-{i}"));
            std::thread::spawn(move || {
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .expect("open probe");
                for _ in 0..count {
                    barrier.wait();
                    file.write_all(&[0x5a; 100]).expect("append");
                    file.sync_data().expect("fdatasync");
                    barrier.wait();
                }
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        barrier.wait();
        barrier.wait();
        samples.push(started.elapsed());
    }
    for worker in workers {
        worker.join().expect("probe thread");
    }
    samples.sort();
    samples
}

fn fdatasync_loop(dir: &std::path::Path, count: usize) -> Vec<Duration> {
    let path = dir.join("fdatasync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open probe");
    let payload = [0x5au8; 100];
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        file.write_all(&payload).expect("append");
        file.sync_data().expect("fdatasync");
        samples.push(started.elapsed());
    }
    samples.sort();
    samples
}

struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    addresses: Vec<String>,
    /// The same safekeepers' services, for a proposer that calls them in process.
    local: walproposer::LocalSafekeepers,
    shutdown: tokio::sync::watch::Sender<bool>,
}

async fn start_cluster(base: &std::path::Path) -> Cluster {
    let mut dirs = Vec::new();
    let mut addresses = Vec::new();
    let mut services = Vec::new();
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
        for timeline in [TimelineId(1), TimelineId(2)] {
            node.create_timeline_blocking((TenantId(1), timeline), START)
                .expect("timeline");
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let (service, append) = safekeeper::service::SafekeeperService::new(Arc::clone(&node)).into_local();
        services.push((address.clone(), service, append));
        addresses.push(address);
        let mut stop = shutdown_rx.clone();
        tokio::spawn(safekeeper::service::serve(node, listener, async move {
            let _ = stop.wait_for(|s| *s).await;
        }));
        dirs.push(dir);
    }
    Cluster {
        _dirs: dirs,
        addresses,
        local: walproposer::LocalSafekeepers::new(tokio::runtime::Handle::current(), services),
        shutdown,
    }
}

fn main() {
    let base = std::env::var_os("CAMBIUM_BENCH_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(cambium_benches::bench_data_dir);
    std::fs::create_dir_all(&base).expect("bench data dir");
    let quick = cambium_benches::is_test_mode();
    let (latency_count, window) = if quick {
        (50, Duration::from_millis(300))
    } else {
        (3000, Duration::from_secs(5))
    };

    let scratch = tempfile::tempdir_in(&base).expect("scratch");
    let fsync = fdatasync_loop(scratch.path(), latency_count);
    let two_fsyncs = concurrent_fdatasync_loop(scratch.path(), latency_count);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let cluster = start_cluster(&base).await;
        let over_grpc = measure(&cluster, TimelineId(1), false, latency_count, window).await;
        let in_process = measure(&cluster, TimelineId(2), true, latency_count, window).await;
        let _ = cluster.shutdown.send(true);

        println!("commit through 3 safekeepers (loopback gRPC, and the same service called in process) vs a bare");
        println!("fdatasync (same disk, same run)");
        println!("{:<52} {:>10} {:>10}", "", "p50 µs", "p99 µs");
        let row = |name: &str, sorted: &[Duration]| {
            println!(
                "{:<52} {:>10.1} {:>10.1}",
                name,
                micros(percentile(sorted, 0.5)),
                micros(percentile(sorted, 0.99))
            )
        };
        row("fdatasync of a 100-byte append", &fsync);
        row("two concurrent fdatasyncs (2 files, 1 disk)", &two_fsyncs);
        for (transport, m) in [("gRPC", &over_grpc), ("in-process", &in_process)] {
            row(
                &format!("commit, 1 writer, 100-byte records, {transport}"),
                &m.latencies,
            );
            row(&format!("commit, 64 writers, {transport}"), &m.concurrent_latencies);
        }
        for (transport, m) in [("gRPC", &over_grpc), ("in-process", &in_process)] {
            println!(
                "{transport}: commit p50 / fdatasync p50 {:.2}; / two concurrent fdatasyncs p50 {:.2}; \
                 64 writers {:.0} commits/s; 8 writers of 256 KiB records {:.1} MB/s",
                percentile(&m.latencies, 0.5).as_secs_f64() / percentile(&fsync, 0.5).as_secs_f64(),
                percentile(&m.latencies, 0.5).as_secs_f64() / percentile(&two_fsyncs, 0.5).as_secs_f64(),
                m.commits as f64 / window.as_secs_f64(),
                (m.large_commits * m.large_frame_bytes) as f64 / window.as_secs_f64() / 1e6,
            );
        }
        println!(
            "ratio in-process / gRPC commit p50: {:.2}",
            percentile(&in_process.latencies, 0.5).as_secs_f64() / percentile(&over_grpc.latencies, 0.5).as_secs_f64()
        );
    });
}

/// What one transport gave.
struct Measured {
    /// One writer's commit latencies, sorted.
    latencies: Vec<Duration>,
    /// Commits by 64 writers in the window, and their sorted latencies.
    commits: usize,
    concurrent_latencies: Vec<Duration>,
    /// Commits of 256 KiB records by 8 writers in the window, and the frame size.
    large_commits: usize,
    large_frame_bytes: usize,
}

/// Commits through a proposer on `timeline` (over gRPC, or calling the services in process).
async fn measure(
    cluster: &Cluster,
    timeline: TimelineId,
    in_process: bool,
    latency_count: usize,
    window: Duration,
) -> Measured {
    let mut config = WalProposerConfig::new(cluster.addresses.clone(), TenantId(1), timeline, START);
    config.commit_timeout_ms = 30_000;
    if in_process {
        config.local = cluster.local.clone();
    }
    let proposer = Arc::new(WalProposer::start(config).expect("proposer"));
    proposer.elect().await.expect("elected");

    // One writer: the latency of a commit.
    let mut latencies = Vec::with_capacity(latency_count);
    for tag in 0..latency_count as u64 {
        let frame = record(100, tag);
        let started = Instant::now();
        proposer.append(frame).await.expect("commit");
        latencies.push(started.elapsed());
    }
    latencies.sort();

    // 64 writers: throughput.
    let (commits, concurrent_latencies) = run_writers(&proposer, 64, 100, window).await;
    let (large_commits, _) = run_writers(&proposer, 8, 256 * 1024, window).await;
    Measured {
        latencies,
        commits,
        concurrent_latencies,
        large_commits,
        large_frame_bytes: record(256 * 1024, 0).len(),
    }
}

/// `writers` tasks commit records of `payload_bytes` for `window`; returns commits and sorted latencies.
async fn run_writers(
    proposer: &Arc<WalProposer>,
    writers: usize,
    payload_bytes: usize,
    window: Duration,
) -> (usize, Vec<Duration>) {
    let deadline = Instant::now() + window;
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let proposer = Arc::clone(proposer);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut tag = (writer as u64) << 40;
            while Instant::now() < deadline {
                tag += 1;
                let frame = record(payload_bytes, tag);
                let started = Instant::now();
                proposer.append(frame).await.expect("commit");
                latencies.push(started.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("writer"));
    }
    all.sort();
    (all.len(), all)
}
