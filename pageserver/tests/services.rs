//! The pageserver's gRPC services end to end, in process: a `TenantManager` over a temp directory served by
//! `pageserver::server::serve` on 127.0.0.1:0, driven by the generated tonic clients. WAL is ingested straight
//! into the engine (`Timeline::ingest_record` + `TenantManager::notify_ingested`), standing in for the WAL
//! receiver.
//!
//! Proves: pages read back right at several LSNs, unary and batched (results matched by request id, one
//! result per request, per-request errors with the unary call's code); a branch at a past LSN reads its
//! parent as of then; a read at an LSN not yet ingested waits and is answered when the record arrives during
//! the wait, and with a short deadline gets `DEADLINE_EXCEEDED`; a batch serves its ready requests without
//! waiting for the others; every refusal has its contract code (`NOT_FOUND`, `INVALID_ARGUMENT`,
//! `FAILED_PRECONDITION` below the GC cutoff or for a timeline with children, `OUT_OF_RANGE` for a branch
//! ahead, `ALREADY_EXISTS`); a corrupt layer file is `DATA_LOSS` naming the file while other timelines keep
//! being served; `GetDbSize`, `LsnForTimestamp`, `LeaseLsn` (which holds GC back) and the timeline info round
//! trip; shutdown ends a waiting read with `UNAVAILABLE` and returns promptly; `SealTimeline` flushes an
//! ancestor to its children's newest branch point, refuses branches past it, and holds across a restart.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use pageserver::convert::page_error_code;
use pageserver::server::{serve, MESSAGE_BYTES_MAX};
use pageserver::tenants::TenantManager;
use proto::pageserver as pb;
use proto::pageserver::get_page_result::Result as PageOutcome;
use proto::pageserver::management_client::ManagementClient;
use proto::pageserver::page_service_client::PageServiceClient;
use storage::{Key, Lsn, PageCache, TenantId, TimelineConfig, TimelineId, Value, WalRecord, PAGE_SIZE_BYTES};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::Code;

const TENANT: TenantId = TenantId(0xabc);
const MAIN: TimelineId = TimelineId(0x1);
const START: Lsn = Lsn(0x100);
const WAIT: Duration = Duration::from_secs(10);

type Pages = PageServiceClient<Channel>;
type Admin = ManagementClient<Channel>;

struct Server {
    manager: Arc<TenantManager>,
    address: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

fn open_manager(dir: &Path, conf: TimelineConfig) -> Arc<TenantManager> {
    Arc::new(TenantManager::open(dir, conf, Arc::new(PageCache::new(1024))).expect("open tenant manager"))
}

async fn start(manager: Arc<TenantManager>) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(Arc::clone(&manager), listener, async {
        let _ = stopped.await;
    }));
    Server {
        manager,
        address,
        stop,
        task,
    }
}

impl Server {
    async fn clients(&self) -> (Pages, Admin) {
        let channel = Channel::from_shared(format!("http://{}", self.address))
            .expect("uri")
            .connect()
            .await
            .expect("connect");
        let pages = PageServiceClient::new(channel.clone())
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        (pages, ManagementClient::new(channel))
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("server stops")
            .expect("server task")
            .expect("serve");
    }
}

fn timeline_ref(tenant: TenantId, timeline: TimelineId) -> pb::TimelineRef {
    pb::TimelineRef {
        tenant_id: tenant.to_string(),
        timeline_id: timeline.to_string(),
    }
}

fn record(commit_ts_us: u64, db_size_pages: u32, pages: &[(u32, u8)]) -> WalRecord {
    WalRecord {
        commit_ts_us,
        db_size_pages,
        entries: pages
            .iter()
            .map(|&(block, fill)| (Key::page(block), Value::Image(Bytes::from(vec![fill; PAGE_SIZE_BYTES]))))
            .collect(),
    }
}

/// Ingests `record` at the end of `timeline` and wakes waiting readers, as the WAL receiver does.
fn ingest(manager: &TenantManager, tenant: TenantId, timeline: TimelineId, record: &WalRecord) -> Lsn {
    let timeline = manager.timeline(tenant, timeline).expect("timeline");
    let end = timeline
        .ingest_record(timeline.last_record_lsn(), record)
        .expect("ingest");
    manager.notify_ingested(tenant, &timeline);
    end
}

/// Where `record` would end if ingested next.
fn next_end(manager: &TenantManager, tenant: TenantId, timeline: TimelineId, record: &WalRecord) -> Lsn {
    let timeline = manager.timeline(tenant, timeline).expect("timeline");
    Lsn(timeline.last_record_lsn().0 + record.frame_len())
}

fn assert_page(page: &[u8], fill: u8, what: &str) {
    assert_eq!(page.len(), PAGE_SIZE_BYTES, "{what}: page size");
    assert!(page.iter().all(|&b| b == fill), "{what}: expected every byte {fill}");
}

fn page_request(timeline: TimelineId, block: u32, lsn: Lsn, request_id: u64) -> pb::GetPageRequest {
    pb::GetPageRequest {
        timeline: Some(timeline_ref(TENANT, timeline)),
        key: Key::page(block).0,
        read_lsn: lsn.0,
        not_modified_since: 0,
        request_id,
    }
}

async fn get_page(pages: &mut Pages, timeline: TimelineId, block: u32, lsn: Lsn) -> Result<Bytes, tonic::Status> {
    let response = pages
        .get_page(page_request(timeline, block, lsn, 77))
        .await?
        .into_inner();
    assert_eq!(response.request_id, 77, "the response carries the request id");
    Ok(response.page)
}

async fn get_page_code(pages: &mut Pages, timeline: TimelineId, block: u32, lsn: Lsn) -> Code {
    get_page(pages, timeline, block, lsn)
        .await
        .expect_err("the read is refused")
        .code()
}

async fn create_tenant(admin: &mut Admin, tenant: TenantId) {
    admin
        .create_tenant(pb::TenantRequest {
            tenant_id: tenant.to_string(),
        })
        .await
        .expect("create tenant");
}

async fn create_root(admin: &mut Admin, timeline: TimelineId, start_lsn: Lsn) -> pb::TimelineInfo {
    admin
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline_ref(TENANT, timeline)),
            ancestor_timeline_id: String::new(),
            ancestor_lsn: 0,
            start_lsn: start_lsn.0,
        })
        .await
        .expect("create root timeline")
        .into_inner()
}

async fn branch(
    admin: &mut Admin,
    timeline: TimelineId,
    ancestor: TimelineId,
    lsn: Lsn,
) -> Result<pb::TimelineInfo, tonic::Status> {
    Ok(admin
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline_ref(TENANT, timeline)),
            ancestor_timeline_id: ancestor.to_string(),
            ancestor_lsn: lsn.0,
            start_lsn: 0,
        })
        .await?
        .into_inner())
}

async fn db_size(pages: &mut Pages, timeline: TimelineId, lsn: Lsn) -> Result<u32, tonic::Status> {
    Ok(pages
        .get_db_size(pb::GetDbSizeRequest {
            timeline: Some(timeline_ref(TENANT, timeline)),
            read_lsn: lsn.0,
        })
        .await?
        .into_inner()
        .db_size_pages)
}

/// Opens a `GetPages` stream; returns its request sender and response stream.
async fn open_page_stream(
    pages: &mut Pages,
) -> (
    mpsc::Sender<pb::GetPageBatch>,
    tonic::Streaming<pb::GetPageResponseBatch>,
) {
    let (tx, rx) = mpsc::channel(16);
    let responses = pages
        .get_pages(ReceiverStream::new(rx))
        .await
        .expect("open page stream")
        .into_inner();
    (tx, responses)
}

async fn next_batch(responses: &mut tonic::Streaming<pb::GetPageResponseBatch>) -> Vec<pb::GetPageResult> {
    tokio::time::timeout(WAIT, responses.next())
        .await
        .expect("a response batch in time")
        .expect("the stream is open")
        .expect("a response batch")
        .results
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after the epoch")
        .as_micros() as u64
}

/// A tenant with a root timeline `MAIN` holding three records; returns their end LSNs. Page 0 is 1 then 2;
/// page 1 is 1 then 3.
async fn three_records(server: &Server, admin: &mut Admin) -> [Lsn; 3] {
    create_tenant(admin, TENANT).await;
    create_root(admin, MAIN, START).await;
    let manager = &server.manager;
    let e1 = ingest(manager, TENANT, MAIN, &record(1_000, 2, &[(0, 1), (1, 1)]));
    let e2 = ingest(manager, TENANT, MAIN, &record(2_000, 2, &[(0, 2)]));
    let e3 = ingest(manager, TENANT, MAIN, &record(3_000, 3, &[(1, 3)]));
    [e1, e2, e3]
}

#[tokio::test]
async fn pages_read_back_at_several_lsns_unary_and_batched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [e1, e2, e3] = three_records(&server, &mut admin).await;
    // (lsn, block, expected fill); block 2 at e3 was never written but is inside the database: zeros.
    let expected = [
        (e1, 0, 1),
        (e1, 1, 1),
        (e2, 0, 2),
        (e2, 1, 1),
        (e3, 0, 2),
        (e3, 1, 3),
        (e3, 2, 0),
    ];
    for (lsn, block, fill) in expected {
        let page = get_page(&mut pages, MAIN, block, lsn).await.expect("page");
        assert_page(&page, fill, &format!("block {block} at {lsn}"));
    }
    assert_eq!(db_size(&mut pages, MAIN, e1).await.expect("size"), 2);
    assert_eq!(db_size(&mut pages, MAIN, e3).await.expect("size"), 3);
    // Outside the database at that LSN, below the timeline's start, a hint past the read LSN.
    assert_eq!(get_page_code(&mut pages, MAIN, 2, e2).await, Code::NotFound);
    assert_eq!(
        get_page_code(&mut pages, MAIN, 0, Lsn(START.0 - 1)).await,
        Code::FailedPrecondition
    );
    let mut hint_ahead = page_request(MAIN, 0, e2, 1);
    hint_ahead.not_modified_since = e3.0;
    let status = pages.get_page(hint_ahead).await.expect_err("hint past read_lsn");
    assert_eq!(status.code(), Code::InvalidArgument);
    // A hint at or below read_lsn is accepted and changes nothing.
    let mut hint = page_request(MAIN, 0, e3, 1);
    hint.not_modified_since = e2.0;
    assert_page(
        &pages.get_page(hint).await.expect("page").into_inner().page,
        2,
        "with a hint",
    );

    // The same reads batched, with ids matched, plus requests that fail each in its own way.
    let (tx, mut responses) = open_page_stream(&mut pages).await;
    let mut requests: Vec<pb::GetPageRequest> = expected
        .iter()
        .enumerate()
        .map(|(i, &(lsn, block, _))| page_request(MAIN, block, lsn, 100 + i as u64))
        .collect();
    requests.push(page_request(TimelineId(0x999), 0, e1, 200));
    let mut malformed = page_request(MAIN, 0, e1, 201);
    if let Some(timeline) = malformed.timeline.as_mut() {
        timeline.tenant_id = timeline.tenant_id.to_uppercase().replace('0', "Z");
    }
    requests.push(malformed);
    requests.push(page_request(MAIN, 2, e2, 202));
    requests.reverse();
    tx.send(pb::GetPageBatch { requests }).await.expect("send batch");
    let results = next_batch(&mut responses).await;
    assert_eq!(results.len(), expected.len() + 3, "one result per request");
    for result in results {
        match (result.request_id, result.result) {
            (id @ 100..=199, Some(PageOutcome::Page(page))) => {
                let (lsn, block, fill) = expected[(id - 100) as usize];
                assert_page(&page, fill, &format!("batched block {block} at {lsn}"));
            }
            (200, Some(PageOutcome::Error(error))) => assert_eq!(page_error_code(&error), Code::NotFound),
            (201, Some(PageOutcome::Error(error))) => {
                assert_eq!(page_error_code(&error), Code::InvalidArgument);
                assert!(error.message.contains("tenant_id"), "{}", error.message);
            }
            (202, Some(PageOutcome::Error(error))) => assert_eq!(page_error_code(&error), Code::NotFound),
            other => panic!("unexpected result {other:?}"),
        }
    }

    // A batch over the limit ends the stream with INVALID_ARGUMENT.
    let requests = (0..=pageserver::page_service::BATCH_REQUESTS_MAX as u64)
        .map(|id| page_request(MAIN, 0, e1, id))
        .collect();
    tx.send(pb::GetPageBatch { requests }).await.expect("send batch");
    let status = tokio::time::timeout(WAIT, responses.next())
        .await
        .expect("an answer in time")
        .expect("the stream reports")
        .expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);

    // Timeline state.
    let info = admin
        .get_timeline_info(timeline_ref(TENANT, MAIN))
        .await
        .expect("info")
        .into_inner();
    assert_eq!(
        (info.start_lsn, info.last_record_lsn, info.ancestor_timeline_id.as_str()),
        (START.0, e3.0, "")
    );
    assert_eq!(info.logical_size_bytes, 3 * PAGE_SIZE_BYTES as u64);
    assert_eq!(info.tenant_id, TENANT.to_string());
    server.stop().await;
}

#[tokio::test]
async fn branches_read_their_parent_as_of_the_branch_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [e1, e2, e3] = three_records(&server, &mut admin).await;
    let child = TimelineId(0x2);
    let info = branch(&mut admin, child, MAIN, e1).await.expect("branch at e1");
    assert_eq!(
        (info.ancestor_timeline_id.clone(), info.ancestor_lsn, info.start_lsn),
        (MAIN.to_string(), e1.0, e1.0)
    );
    assert_page(
        &get_page(&mut pages, child, 0, e1).await.expect("page"),
        1,
        "child at e1",
    );
    assert_page(
        &get_page(&mut pages, MAIN, 0, e2).await.expect("page"),
        2,
        "parent at e2",
    );
    // The child's own history goes on from its branch point.
    let c1 = ingest(&server.manager, TENANT, child, &record(4_000, 2, &[(0, 9)]));
    assert_page(
        &get_page(&mut pages, child, 0, c1).await.expect("page"),
        9,
        "child after its write",
    );
    assert_page(
        &get_page(&mut pages, child, 1, c1).await.expect("page"),
        1,
        "child, parent's page",
    );
    assert_page(
        &get_page(&mut pages, MAIN, 0, e3).await.expect("page"),
        2,
        "parent unchanged",
    );
    // Latest: at the parent's last record.
    let latest = branch(&mut admin, TimelineId(0x3), MAIN, Lsn(0))
        .await
        .expect("branch at latest");
    assert_eq!(latest.start_lsn, e3.0);
    assert_page(
        &get_page(&mut pages, TimelineId(0x3), 1, e3).await.expect("page"),
        3,
        "latest branch",
    );

    let ahead = branch(&mut admin, TimelineId(0x4), MAIN, Lsn(e3.0 + 1)).await;
    assert_eq!(ahead.expect_err("ahead").code(), Code::OutOfRange);
    let below = branch(&mut admin, TimelineId(0x4), MAIN, Lsn(START.0 - 1)).await;
    assert_eq!(below.expect_err("before start").code(), Code::FailedPrecondition);
    let exists = branch(&mut admin, child, MAIN, e1).await;
    assert_eq!(exists.expect_err("exists").code(), Code::AlreadyExists);
    // Asked again with a branch point ahead (a retry after a restart, before the WAL is ingested again): the
    // timeline exists, which is the answer, not "ahead" (read as a creation that will never be).
    let exists_ahead = branch(&mut admin, child, MAIN, Lsn(e3.0 + 1)).await;
    assert_eq!(exists_ahead.expect_err("exists").code(), Code::AlreadyExists);
    let orphan = branch(&mut admin, TimelineId(0x4), TimelineId(0x777), e1).await;
    assert_eq!(orphan.expect_err("no ancestor").code(), Code::NotFound);
    let tenant_again = admin
        .create_tenant(pb::TenantRequest {
            tenant_id: TENANT.to_string(),
        })
        .await;
    assert_eq!(tenant_again.expect_err("exists").code(), Code::AlreadyExists);

    let mut timelines: Vec<String> = admin
        .list_timelines(pb::TenantRequest {
            tenant_id: TENANT.to_string(),
        })
        .await
        .expect("list")
        .into_inner()
        .timelines
        .into_iter()
        .map(|t| t.timeline_id)
        .collect();
    timelines.sort();
    assert_eq!(timelines, [MAIN, child, TimelineId(0x3)].map(|t| t.to_string()));

    // The parent cannot go while it has children; once they are gone it can.
    let refused = admin.delete_timeline(timeline_ref(TENANT, MAIN)).await;
    assert_eq!(refused.expect_err("has children").code(), Code::FailedPrecondition);
    assert_page(
        &get_page(&mut pages, MAIN, 0, e3).await.expect("page"),
        2,
        "parent kept",
    );
    for timeline in [child, TimelineId(0x3), MAIN] {
        admin
            .delete_timeline(timeline_ref(TENANT, timeline))
            .await
            .expect("delete");
    }
    assert_eq!(get_page_code(&mut pages, MAIN, 0, e3).await, Code::NotFound);
    admin
        .delete_tenant(pb::TenantRequest {
            tenant_id: TENANT.to_string(),
        })
        .await
        .expect("delete tenant");
    server.stop().await;
}

#[tokio::test]
async fn reads_wait_for_ingest_until_their_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [e1, _, e3] = three_records(&server, &mut admin).await;
    let manager = Arc::clone(&server.manager);

    // A unary read ahead of ingest is answered when the record arrives during the wait.
    let fourth = record(4_000, 3, &[(2, 4)]);
    let e4 = next_end(&manager, TENANT, MAIN, &fourth);
    let waiting = {
        let mut pages = pages.clone();
        tokio::spawn(async move { get_page(&mut pages, MAIN, 2, e4).await })
    };
    let size_waiting = {
        let mut pages = pages.clone();
        tokio::spawn(async move { db_size(&mut pages, MAIN, e4).await })
    };
    // Both reads are waiting (exactly: each holds a subscription to the timeline's ingest), not answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    while manager.waiting_reads() < 2 {
        assert!(Instant::now() < deadline, "the reads never waited");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!waiting.is_finished(), "the read waits for ingest");
    ingest(&manager, TENANT, MAIN, &fourth);
    let page = waiting.await.expect("join").expect("answered after ingest");
    assert_page(&page, 4, "page written during the wait");
    assert_eq!(size_waiting.await.expect("join").expect("size"), 3);

    // With a short deadline and no ingest: DEADLINE_EXCEEDED, a little before the deadline.
    let mut request = tonic::Request::new(page_request(MAIN, 0, Lsn(e4.0 + 1), 5));
    request.set_timeout(Duration::from_millis(300));
    let began = Instant::now();
    let status = pages.get_page(request).await.expect_err("times out");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        began.elapsed() >= Duration::from_millis(200),
        "it waited: {:?}",
        began.elapsed()
    );
    let mut request = tonic::Request::new(pb::GetDbSizeRequest {
        timeline: Some(timeline_ref(TENANT, MAIN)),
        read_lsn: e4.0 + 1,
    });
    request.set_timeout(Duration::from_millis(300));
    let status = pages.get_db_size(request).await.expect_err("times out");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");

    // A batch: the ready requests are answered at once, the waiting one when its record arrives.
    let fifth = record(5_000, 3, &[(0, 5)]);
    let e5 = next_end(&manager, TENANT, MAIN, &fifth);
    let (tx, mut responses) = open_page_stream(&mut pages).await;
    let requests = vec![
        page_request(MAIN, 0, e5, 1),
        page_request(MAIN, 0, e1, 2),
        page_request(MAIN, 1, e3, 3),
    ];
    tx.send(pb::GetPageBatch { requests }).await.expect("send");
    let ready = next_batch(&mut responses).await;
    let mut ready_ids: Vec<u64> = ready.iter().map(|r| r.request_id).collect();
    ready_ids.sort_unstable();
    assert_eq!(ready_ids, [2, 3], "the ready requests do not wait for the other");
    // Another batch is served while the first one waits.
    tx.send(pb::GetPageBatch {
        requests: vec![page_request(MAIN, 2, e4, 4)],
    })
    .await
    .expect("send");
    let later = next_batch(&mut responses).await;
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].request_id, 4);
    ingest(&manager, TENANT, MAIN, &fifth);
    let waited = next_batch(&mut responses).await;
    assert_eq!(waited.len(), 1);
    assert_eq!(waited[0].request_id, 1);
    match &waited[0].result {
        Some(PageOutcome::Page(page)) => assert_page(page, 5, "batched read after ingest"),
        other => panic!("unexpected {other:?}"),
    }
    // The client ends its side: the stream ends once everything is answered.
    drop(tx);
    let end = tokio::time::timeout(WAIT, responses.next())
        .await
        .expect("the stream ends");
    assert!(end.is_none(), "{end:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_batched_read_past_its_deadline_gets_deadline_exceeded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [_, _, e3] = three_records(&server, &mut admin).await;
    let (tx, rx) = mpsc::channel(4);
    let mut request = tonic::Request::new(ReceiverStream::new(rx));
    request.set_timeout(Duration::from_millis(300));
    let mut responses = pages.get_pages(request).await.expect("open").into_inner();
    tx.send(pb::GetPageBatch {
        requests: vec![page_request(MAIN, 0, Lsn(e3.0 + 1), 1)],
    })
    .await
    .expect("send");
    let results = next_batch(&mut responses).await;
    match &results[..] {
        [pb::GetPageResult {
            request_id: 1,
            result: Some(PageOutcome::Error(error)),
        }] => assert_eq!(page_error_code(error), Code::DeadlineExceeded),
        other => panic!("unexpected {other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn unknown_and_malformed_names_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [e1, _, _] = three_records(&server, &mut admin).await;
    let unknown_tenant = pb::TimelineRef {
        tenant_id: TenantId(0xdead).to_string(),
        timeline_id: MAIN.to_string(),
    };
    let unknown_timeline = timeline_ref(TENANT, TimelineId(0xdead));
    let malformed = pb::TimelineRef {
        tenant_id: "ABC".into(),
        timeline_id: MAIN.to_string(),
    };
    for (timeline, code) in [
        (unknown_tenant, Code::NotFound),
        (unknown_timeline, Code::NotFound),
        (malformed, Code::InvalidArgument),
    ] {
        let mut request = page_request(MAIN, 0, e1, 1);
        request.timeline = Some(timeline.clone());
        assert_eq!(pages.get_page(request).await.expect_err("page").code(), code);
        let size = pages
            .get_db_size(pb::GetDbSizeRequest {
                timeline: Some(timeline.clone()),
                read_lsn: e1.0,
            })
            .await;
        assert_eq!(size.expect_err("size").code(), code);
        let lookup = pages
            .lsn_for_timestamp(pb::LsnForTimestampRequest {
                timeline: Some(timeline.clone()),
                timestamp_us: 1_500,
            })
            .await;
        assert_eq!(lookup.expect_err("lookup").code(), code);
        let info = admin.get_timeline_info(timeline.clone()).await;
        assert_eq!(info.expect_err("info").code(), code);
        let lease = admin
            .lease_lsn(pb::LeaseLsnRequest {
                timeline: Some(timeline.clone()),
                lsn: e1.0,
                duration_ms: 1_000,
            })
            .await;
        assert_eq!(lease.expect_err("lease").code(), code);
        let delete = admin.delete_timeline(timeline.clone()).await;
        assert_eq!(delete.expect_err("delete").code(), code);
    }
    let no_timeline = pages
        .get_page(pb::GetPageRequest {
            timeline: None,
            ..page_request(MAIN, 0, e1, 1)
        })
        .await;
    assert_eq!(no_timeline.expect_err("unnamed").code(), Code::InvalidArgument);
    let meta_key = pages
        .get_page(pb::GetPageRequest {
            key: storage::DB_SIZE_KEY.0,
            ..page_request(MAIN, 0, e1, 1)
        })
        .await;
    assert_eq!(meta_key.expect_err("not a page").code(), Code::InvalidArgument);
    for tenant_id in [TenantId(0xdead).to_string(), "xyz".to_string()] {
        let code = if tenant_id == "xyz" {
            Code::InvalidArgument
        } else {
            Code::NotFound
        };
        let request = || pb::TenantRequest {
            tenant_id: tenant_id.clone(),
        };
        assert_eq!(admin.delete_tenant(request()).await.expect_err("delete").code(), code);
        assert_eq!(admin.list_timelines(request()).await.expect_err("list").code(), code);
    }
    let root_in_unknown_tenant = admin
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(pb::TimelineRef {
                tenant_id: TenantId(0xdead).to_string(),
                timeline_id: MAIN.to_string(),
            }),
            ancestor_timeline_id: String::new(),
            ancestor_lsn: 0,
            start_lsn: START.0,
        })
        .await;
    assert_eq!(root_in_unknown_tenant.expect_err("no tenant").code(), Code::NotFound);
    let again = admin
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline_ref(TENANT, MAIN)),
            ancestor_timeline_id: String::new(),
            ancestor_lsn: 0,
            start_lsn: START.0,
        })
        .await;
    assert_eq!(again.expect_err("exists").code(), Code::AlreadyExists);
    server.stop().await;
}

#[tokio::test]
async fn reads_below_the_gc_cutoff_are_failed_precondition_and_leases_hold_it_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = TimelineConfig {
        gc_horizon_bytes: 0,
        pitr_interval_ms: 0,
        ..TimelineConfig::default()
    };
    let server = start(open_manager(dir.path(), conf)).await;
    let (mut pages, mut admin) = server.clients().await;
    let [e1, e2, e3] = three_records(&server, &mut admin).await;
    let leased = TimelineId(0x2);
    create_root(&mut admin, leased, START).await;
    let l1 = ingest(&server.manager, TENANT, leased, &record(1_000, 1, &[(0, 7)]));
    let l2 = ingest(&server.manager, TENANT, leased, &record(2_000, 1, &[(0, 8)]));
    let lease = admin
        .lease_lsn(pb::LeaseLsnRequest {
            timeline: Some(timeline_ref(TENANT, leased)),
            lsn: l1.0,
            duration_ms: 60_000,
        })
        .await
        .expect("lease")
        .into_inner();
    let now_ms = now_us() / 1000;
    assert!(
        lease.valid_until_ms > now_ms + 50_000 && lease.valid_until_ms <= now_ms + 60_000,
        "{} vs now {now_ms}",
        lease.valid_until_ms
    );

    let gc_now_us = now_us();
    for timeline in [MAIN, leased] {
        server
            .manager
            .timeline(TENANT, timeline)
            .expect("timeline")
            .gc(gc_now_us)
            .expect("gc");
    }
    assert_eq!(get_page_code(&mut pages, MAIN, 0, e1).await, Code::FailedPrecondition);
    assert_eq!(get_page_code(&mut pages, MAIN, 0, e2).await, Code::FailedPrecondition);
    assert_page(
        &get_page(&mut pages, MAIN, 0, e3).await.expect("page"),
        2,
        "at the cutoff",
    );
    assert_eq!(
        db_size(&mut pages, MAIN, e1).await.expect_err("size").code(),
        Code::FailedPrecondition
    );
    let info = admin
        .get_timeline_info(timeline_ref(TENANT, MAIN))
        .await
        .expect("info")
        .into_inner();
    assert_eq!(info.gc_cutoff_lsn, e3.0);
    let below = branch(&mut admin, TimelineId(0x3), MAIN, e1).await;
    assert_eq!(below.expect_err("below the cutoff").code(), Code::FailedPrecondition);
    let lease_below = admin
        .lease_lsn(pb::LeaseLsnRequest {
            timeline: Some(timeline_ref(TENANT, MAIN)),
            lsn: e1.0,
            duration_ms: 1_000,
        })
        .await;
    assert_eq!(lease_below.expect_err("below").code(), Code::FailedPrecondition);
    // The leased LSN stays readable.
    assert_page(
        &get_page(&mut pages, leased, 0, l1).await.expect("leased"),
        7,
        "leased LSN",
    );
    assert_page(&get_page(&mut pages, leased, 0, l2).await.expect("latest"), 8, "latest");
    server.stop().await;
}

#[tokio::test]
async fn timestamps_sizes_and_leases_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [e1, e2, e3] = three_records(&server, &mut admin).await;
    let child = TimelineId(0x2);
    branch(&mut admin, child, MAIN, e2).await.expect("branch");
    let c1 = ingest(&server.manager, TENANT, child, &record(5_000, 4, &[(3, 6)]));
    let lookup = |timeline: TimelineId, timestamp_us: u64| {
        let mut pages = pages.clone();
        async move {
            pages
                .lsn_for_timestamp(pb::LsnForTimestampRequest {
                    timeline: Some(timeline_ref(TENANT, timeline)),
                    timestamp_us,
                })
                .await
                .map(|r| {
                    let r = r.into_inner();
                    (r.timeline_id, Lsn(r.lsn))
                })
        }
    };
    assert_eq!(lookup(MAIN, 1_000).await.expect("exact"), (MAIN.to_string(), e1));
    assert_eq!(lookup(MAIN, 2_500).await.expect("between"), (MAIN.to_string(), e2));
    assert_eq!(lookup(MAIN, 9_999).await.expect("after"), (MAIN.to_string(), e3));
    assert_eq!(lookup(child, 6_000).await.expect("child"), (child.to_string(), c1));
    // Below the child's first commit, the answer is on the parent below the branch point.
    assert_eq!(lookup(child, 1_500).await.expect("ancestor"), (MAIN.to_string(), e1));
    let before = lookup(MAIN, 999).await.expect_err("before history");
    assert_eq!(before.code(), Code::FailedPrecondition);

    assert_eq!(db_size(&mut pages, child, c1).await.expect("size"), 4);
    assert_eq!(db_size(&mut pages, child, e2).await.expect("size"), 2);
    assert_eq!(
        db_size(&mut pages, child, e1).await.expect_err("before start").code(),
        Code::FailedPrecondition
    );

    let lease = |timeline: TimelineId, lsn: Lsn, duration_ms: u64| {
        let mut admin = admin.clone();
        async move {
            admin
                .lease_lsn(pb::LeaseLsnRequest {
                    timeline: Some(timeline_ref(TENANT, timeline)),
                    lsn: lsn.0,
                    duration_ms,
                })
                .await
                .map(|r| r.into_inner().valid_until_ms)
        }
    };
    let now_ms = now_us() / 1000;
    let until = lease(MAIN, e2, u64::MAX).await.expect("capped lease");
    let max_ms = pageserver::management::LEASE_DURATION_MS_MAX;
    assert!(
        until >= now_ms + max_ms && until <= now_ms + max_ms + 10_000,
        "{until} vs {now_ms}"
    );
    assert_eq!(
        lease(MAIN, e2, 0).await.expect_err("zero").code(),
        Code::InvalidArgument
    );
    assert_eq!(
        lease(MAIN, Lsn(e3.0 + 1), 1_000).await.expect_err("ahead").code(),
        Code::OutOfRange
    );
    assert_eq!(
        lease(child, e1, 1_000).await.expect_err("before start").code(),
        Code::FailedPrecondition
    );
    server.stop().await;
}

fn layer_files(dir: &Path, timeline: TimelineId) -> Vec<PathBuf> {
    let timeline_dir = dir
        .join("tenants")
        .join(TENANT.to_string())
        .join("timelines")
        .join(timeline.to_string());
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&timeline_dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("l0_")))
        .collect();
    paths.sort();
    paths
}

#[tokio::test]
async fn a_corrupt_layer_is_data_loss_and_other_timelines_keep_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let healthy = TimelineId(0x2);
    let (damaged_end, healthy_end) = {
        let manager = open_manager(dir.path(), TimelineConfig::default());
        manager.create_tenant(TENANT).expect("tenant");
        let mut ends = Vec::new();
        for timeline in [MAIN, healthy] {
            manager
                .create_timeline(
                    TENANT,
                    timeline,
                    pageserver::tenants::NewTimeline::Root { start_lsn: START },
                )
                .expect("timeline");
            let end = ingest(&manager, TENANT, timeline, &record(1_000, 1, &[(0, 0x5a)]));
            manager
                .timeline(TENANT, timeline)
                .expect("timeline")
                .checkpoint()
                .expect("checkpoint");
            ends.push(end);
        }
        (ends[0], ends[1])
    };
    let layers = layer_files(dir.path(), MAIN);
    assert_eq!(layers.len(), 1, "one L0 layer: {layers:?}");
    let mut bytes = std::fs::read(&layers[0]).expect("read layer");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&layers[0], &bytes).expect("write layer");
    let layer_name = layers[0].file_name().expect("name").to_string_lossy().into_owned();

    // A fresh manager opens the layer again (the old one had it mapped and its pages cached).
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, _admin) = server.clients().await;
    let status = get_page(&mut pages, MAIN, 0, damaged_end).await.expect_err("corrupt");
    assert_eq!(status.code(), Code::DataLoss, "{status:?}");
    assert!(
        status.message().contains(&layer_name),
        "names the file: {}",
        status.message()
    );
    assert_page(
        &get_page(&mut pages, healthy, 0, healthy_end).await.expect("healthy"),
        0x5a,
        "another timeline",
    );
    // Batched: the same codes per request; the server goes on serving.
    let (tx, mut responses) = open_page_stream(&mut pages).await;
    tx.send(pb::GetPageBatch {
        requests: vec![
            page_request(MAIN, 0, damaged_end, 1),
            page_request(healthy, 0, healthy_end, 2),
        ],
    })
    .await
    .expect("send");
    let mut results = next_batch(&mut responses).await;
    results.sort_by_key(|r| r.request_id);
    match &results[..] {
        [pb::GetPageResult {
            request_id: 1,
            result: Some(PageOutcome::Error(error)),
        }, pb::GetPageResult {
            request_id: 2,
            result: Some(PageOutcome::Page(page)),
        }] => {
            assert_eq!(page_error_code(error), Code::DataLoss);
            assert_page(page, 0x5a, "batched healthy read");
        }
        other => panic!("unexpected {other:?}"),
    }
    let status = get_page(&mut pages, MAIN, 0, damaged_end)
        .await
        .expect_err("still corrupt");
    assert_eq!(status.code(), Code::DataLoss);
    assert_page(
        &get_page(&mut pages, healthy, 0, healthy_end).await.expect("healthy"),
        0x5a,
        "still served",
    );
    server.stop().await;
}

#[tokio::test]
async fn shutdown_ends_waiting_reads_with_unavailable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [_, _, e3] = three_records(&server, &mut admin).await;
    let waiting = {
        let mut pages = pages.clone();
        tokio::spawn(async move { get_page(&mut pages, MAIN, 0, Lsn(e3.0 + 1)).await })
    };
    let (tx, mut responses) = open_page_stream(&mut pages).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let began = Instant::now();
    server.stop().await;
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "prompt: {:?}",
        began.elapsed()
    );
    let status = waiting.await.expect("join").expect_err("ended");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let end = tokio::time::timeout(WAIT, responses.next())
        .await
        .expect("the stream ends");
    assert!(!matches!(end, Some(Ok(_))), "{end:?}");
    drop(tx);
}

#[tokio::test]
async fn a_sealed_ancestor_is_flushed_to_its_end_refuses_branches_past_it_and_says_it_is_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let [e1, e2, e3] = three_records(&server, &mut admin).await;
    let code =
        |result: Result<tonic::Response<pb::SealTimelineResponse>, tonic::Status>| result.expect_err("refused").code();
    assert_eq!(
        code(admin.seal_timeline(timeline_ref(TENANT, MAIN)).await),
        Code::FailedPrecondition,
        "nothing is branched from it"
    );
    assert_eq!(
        code(admin.seal_timeline(timeline_ref(TENANT, TimelineId(0x77))).await),
        Code::NotFound
    );
    let restored = TimelineId(0x2);
    branch(&mut admin, restored, MAIN, e2).await.expect("restored at e2");
    let before = admin
        .get_timeline_info(timeline_ref(TENANT, MAIN))
        .await
        .expect("info")
        .into_inner();
    assert!(before.disk_consistent_lsn < e2.0 && before.sealed_lsn == 0);
    let sealed = admin
        .seal_timeline(timeline_ref(TENANT, MAIN))
        .await
        .expect("seal")
        .into_inner();
    let info = sealed.info.expect("info");
    assert_eq!(sealed.end_lsn, e2.0, "its child's branch point");
    assert!(
        sealed.durable,
        "no remote storage: the local layers are what a restart reads"
    );
    assert!(info.disk_consistent_lsn >= e2.0);
    assert_eq!(info.sealed_lsn, e2.0);
    assert_eq!(
        branch(&mut admin, TimelineId(0x3), MAIN, e3)
            .await
            .expect_err("past the end")
            .code(),
        Code::OutOfRange
    );
    branch(&mut admin, TimelineId(0x3), MAIN, e1)
        .await
        .expect("at or before the end");
    assert_page(
        &get_page(&mut pages, restored, 0, e2).await.expect("page"),
        2,
        "the restored branch reads its sealed ancestor",
    );
    server.stop().await;
    // Restarted: still sealed, and its children still read it, with no WAL re-fed.
    let server = start(open_manager(dir.path(), TimelineConfig::default())).await;
    let (mut pages, mut admin) = server.clients().await;
    let info = admin
        .get_timeline_info(timeline_ref(TENANT, MAIN))
        .await
        .expect("info")
        .into_inner();
    assert_eq!(info.sealed_lsn, e2.0);
    assert_page(
        &get_page(&mut pages, restored, 0, e2).await.expect("page"),
        2,
        "after a restart",
    );
    server.stop().await;
}
