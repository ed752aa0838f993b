//! `GetPage` over loopback gRPC against the in-process `get_page`, in one run.
//!
//! A tenant with one timeline of 4096 pages (flushed to a layer file, then read once so they are hot in the
//! page cache) is served by the pageserver's gRPC services on 127.0.0.1 in this process. Reports:
//! - in-process `Timeline::get_page` of the same keys: ns per page;
//! - unary `GetPage`, one at a time: p50 / p99 latency (targets: p50 ≤ 60 µs, p99 ≤ 250 µs);
//! - `GetPages` stream with 1, 8 and 64 requests in flight (a sliding window, batches of up to 8): pages/s
//!   (target ≥ 200 k pages/s).
//!
//! The server runs on a runtime of its own (one worker), the client on a current-thread runtime: as a
//! pageserver process and a compute's page reader would, rather than contending for one scheduler.
//!
//! `cargo bench -p cambium-benches --bench get_page_grpc`

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pageserver::tenants::{NewTimeline, TenantManager};
use proto::pageserver as pb;
use storage::{
    Durability, Key, Lsn, PageCache, TenantId, TimelineConfig, TimelineId, Value, WalRecord, PAGE_SIZE_BYTES,
};

const PAGES: u32 = 4096;
/// Requests per stream batch in the sliding-window measurement.
const BATCH_REQUESTS: usize = 8;
const START: Lsn = Lsn(0x100_0000);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let quick = cambium_benches::is_test_mode();
    let (unary_count, stream_window) = if quick {
        (100, Duration::from_millis(200))
    } else {
        (20_000, Duration::from_secs(3))
    };
    let dir = tempfile::tempdir_in(cambium_benches::bench_data_dir()).expect("tempdir");
    let conf = TimelineConfig {
        durability: Durability::Off,
        ..TimelineConfig::default()
    };
    let manager =
        Arc::new(TenantManager::open(dir.path(), conf, Arc::new(PageCache::new(2 * PAGES as usize))).expect("open"));
    let (tenant, timeline_id) = (TenantId(1), TimelineId(1));
    manager.create_tenant(tenant).expect("tenant");
    let timeline = manager
        .create_timeline(tenant, timeline_id, NewTimeline::Root { start_lsn: START })
        .expect("timeline");
    let mut lsn = START;
    for chunk in (0..PAGES).collect::<Vec<_>>().chunks(64) {
        let entries = chunk
            .iter()
            .map(|&b| {
                (
                    Key::page(b),
                    Value::Image(Bytes::from(vec![(b % 251) as u8; PAGE_SIZE_BYTES])),
                )
            })
            .collect();
        lsn = timeline
            .ingest_record(
                lsn,
                &WalRecord {
                    commit_ts_us: 1,
                    db_size_pages: PAGES,
                    entries,
                },
            )
            .expect("ingest");
    }
    timeline.checkpoint().expect("flush");
    manager.notify_ingested(tenant, &timeline);

    // In process, hot.
    for block in 0..PAGES {
        timeline.get_page(Key::page(block), lsn).expect("warm");
    }
    let rounds = if quick { 2 } else { 200 };
    let started = Instant::now();
    for _ in 0..rounds {
        for block in 0..PAGES {
            std::hint::black_box(timeline.get_page(Key::page(block), lsn).expect("read"));
        }
    }
    let in_process_ns = started.elapsed().as_nanos() as f64 / (rounds as f64 * PAGES as f64);

    // The server gets a runtime of its own (as a separate pageserver process would); the client runs on one
    // thread of another, as a compute's page reader does.
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let listener = server_runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let server = server_runtime.spawn(pageserver::server::serve(Arc::clone(&manager), listener, async move {
        let mut stop_rx = stop_rx;
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    runtime.block_on(async move {
        // Large HTTP/2 windows, as a compute's page client uses: pages are 8 KiB each and a batch of 64 is 512 KiB,
        // far past the 64 KiB default window.
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .expect("address")
            .tcp_nodelay(true)
            .initial_stream_window_size(Some(8 << 20))
            .initial_connection_window_size(Some(16 << 20))
            .connect()
            .await
            .expect("connect");
        let mut client = pb::page_service_client::PageServiceClient::new(channel);
        let timeline_ref = pb::TimelineRef {
            tenant_id: tenant.to_string(),
            timeline_id: timeline_id.to_string(),
        };
        let request = |block: u32, id: u64| pb::GetPageRequest {
            timeline: Some(timeline_ref.clone()),
            key: Key::page(block).0,
            read_lsn: lsn.0,
            not_modified_since: 0,
            request_id: id,
        };

        let mut latencies = Vec::with_capacity(unary_count);
        for i in 0..unary_count {
            let started = Instant::now();
            let page = client.get_page(request(i as u32 % PAGES, 0)).await.expect("get page");
            latencies.push(started.elapsed());
            assert_eq!(page.into_inner().page.len(), PAGE_SIZE_BYTES);
        }
        latencies.sort();

        let mut stream_rates = Vec::new();
        for in_flight in [1usize, 8, 64] {
            let (tx, rx) = tokio::sync::mpsc::channel::<pb::GetPageBatch>(64);
            let mut responses = client
                .get_pages(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await
                .expect("stream")
                .into_inner();
            // A sliding window: `in_flight` requests outstanding at all times, sent in batches of up to
            // BATCH_REQUESTS, refilled as results arrive.
            let batch_size = in_flight.min(BATCH_REQUESTS);
            let deadline = Instant::now() + stream_window;
            let started = Instant::now();
            let mut pages = 0usize;
            let mut next = 0u64;
            let mut outstanding = 0usize;
            loop {
                let sending = Instant::now() < deadline;
                while sending && outstanding + batch_size <= in_flight {
                    let requests = (0..batch_size)
                        .map(|_| {
                            next += 1;
                            request((next % PAGES as u64) as u32, next)
                        })
                        .collect();
                    tx.send(pb::GetPageBatch { requests }).await.expect("send batch");
                    outstanding += batch_size;
                }
                if outstanding == 0 {
                    break;
                }
                let batch = responses.message().await.expect("receive").expect("stream open");
                outstanding -= batch.results.len();
                pages += batch.results.len();
            }
            drop(tx);
            stream_rates.push((in_flight, pages as f64 / started.elapsed().as_secs_f64()));
        }
        let _ = stop.send(true);
        let _ = server.await;

        println!("GetPage over loopback gRPC vs in process ({PAGES} hot pages, same run)");
        println!(
            "in-process get_page: {in_process_ns:.0} ns/page ({:.2} M pages/s)",
            1e3 / in_process_ns
        );
        println!(
            "unary GetPage: p50 {:.1} µs, p99 {:.1} µs ({} calls)",
            percentile(&latencies, 0.5).as_secs_f64() * 1e6,
            percentile(&latencies, 0.99).as_secs_f64() * 1e6,
            unary_count
        );
        for (in_flight, rate) in stream_rates {
            println!("GetPages stream, {in_flight:>2} in flight: {rate:.0} pages/s");
        }
    });
}
