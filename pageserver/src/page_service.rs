//! The page service (`cambium.pageserver.v1.PageService`) over a [`TenantManager`]: pages, database sizes and
//! timestamp lookups of any timeline at any retained LSN.
//!
//! **Waiting for ingest.** A read at an LSN the pageserver has not ingested yet waits until the WAL receiver
//! gets there ([`TenantManager::wait_for_lsn`]), bounded by the call's deadline (its `grpc-timeout`) less a
//! margin ([`DEADLINE_MARGIN_MS_MAX`]) and by [`WAIT_LSN_TIMEOUT_MS_MAX`]; a call without a deadline waits
//! [`WAIT_LSN_TIMEOUT_MS_DEFAULT`]. Running out of time is `DEADLINE_EXCEEDED`. The margin exists because
//! tonic's own deadline timers (the client's and the server's) end a call with `CANCELLED`, not
//! `DEADLINE_EXCEEDED`: the service answers a little before them so the client gets the precise code.
//!
//! **Reads run inline.** The engine's reads are synchronous but never wait on the network or a lock held
//! across I/O: a hit is a cache lookup and a copy, a miss reads mmapped layer files. So they run in the async
//! functions directly rather than paying a `spawn_blocking` hop per page.
//!
//! **GetPages** answers each batch of requests with one result per request (a page, or a `PageError` carrying
//! the code the unary call would return). The requests that can be answered at once are answered first, in one
//! response batch; the ones whose LSN is not yet ingested wait concurrently and are answered together in a
//! second response batch when the last of them is done. While a batch waits, later batches are read and
//! served (up to [`PAGE_STREAM_WAITING_BATCHES_MAX`] waiting batches per stream). So a request batch gets one
//! or two response batches, and the client matches results to requests by `request_id`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use proto::pageserver as pb;
use proto::pageserver::page_service_server::{PageService, PageServiceServer};
use storage::{Key, Lsn, StorageError, TenantId, Timeline, TimelineId};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status, Streaming};

use crate::convert::{self, status_from_error, status_from_storage, Operation};
use crate::limits::MESSAGE_BYTES_MAX;
use crate::tenants::TenantManager;

/// How long a read waits for ingest when its call has no deadline.
pub const WAIT_LSN_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// The longest a read waits for ingest, whatever the call's deadline.
pub const WAIT_LSN_TIMEOUT_MS_MAX: u64 = 30_000;
/// A read with a deadline stops waiting this much before it (at most a fifth of the whole timeout), so its
/// `DEADLINE_EXCEEDED` reaches the client before the client's own timer ends the call with `CANCELLED`.
pub const DEADLINE_MARGIN_MS_MAX: u64 = 100;
/// Most requests in one `GetPageBatch`; a larger batch ends the stream with `INVALID_ARGUMENT`.
pub const BATCH_REQUESTS_MAX: usize = 1024;
/// Batches of one `GetPages` stream waiting for ingest at once; beyond it the stream stops reading requests
/// until one is answered.
pub const PAGE_STREAM_WAITING_BATCHES_MAX: usize = 16;
/// Response batches queued for a `GetPages` client before the stream stops serving.
pub const PAGE_STREAM_CHANNEL_BATCHES: usize = 16;

/// When reads of one call stop waiting for ingest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitLimit {
    /// The call's deadline, less the margin, and at most [`WAIT_LSN_TIMEOUT_MS_MAX`] after the call began.
    Until(Instant),
    /// The call has no deadline: each read waits up to this long.
    Each(Duration),
}

impl WaitLimit {
    fn from_metadata(metadata: &MetadataMap, now: Instant) -> WaitLimit {
        match convert::call_timeout(metadata) {
            Some(timeout) => WaitLimit::Until(now + wait_budget(timeout)),
            None => WaitLimit::Each(Duration::from_millis(WAIT_LSN_TIMEOUT_MS_DEFAULT)),
        }
    }

    /// How long a read that starts waiting at `now` may wait.
    fn budget(self, now: Instant) -> Duration {
        match self {
            WaitLimit::Until(deadline) => deadline.saturating_duration_since(now),
            WaitLimit::Each(budget) => budget,
        }
    }
}

/// How long a read may wait for ingest in a call whose timeout is `timeout`: the timeout less the margin,
/// capped by [`WAIT_LSN_TIMEOUT_MS_MAX`].
pub fn wait_budget(timeout: Duration) -> Duration {
    let margin = (timeout / 5).min(Duration::from_millis(DEADLINE_MARGIN_MS_MAX));
    timeout
        .saturating_sub(margin)
        .min(Duration::from_millis(WAIT_LSN_TIMEOUT_MS_MAX))
}

/// One page read, parsed and validated.
#[derive(Clone, Copy, Debug)]
struct PageRead {
    request_id: u64,
    tenant: TenantId,
    timeline: TimelineId,
    key: Key,
    lsn: Lsn,
}

/// Parses a page request: ids strictly, the key must be a page of the main file, and `not_modified_since`
/// (a hint the server does not need: it serves the version valid at `read_lsn`) must not be past `read_lsn`.
fn parse_page_request(request: &pb::GetPageRequest) -> Result<PageRead, Status> {
    let (tenant, timeline) = convert::timeline_key(request.timeline.as_ref())?;
    let key = Key(request.key);
    if !key.is_page() {
        return Err(Status::invalid_argument(format!(
            "key {key} is not a page of the main file (space 0)"
        )));
    }
    if request.not_modified_since > request.read_lsn {
        return Err(Status::invalid_argument(format!(
            "not_modified_since {} is past read_lsn {}",
            Lsn(request.not_modified_since),
            Lsn(request.read_lsn)
        )));
    }
    Ok(PageRead {
        request_id: request.request_id,
        tenant,
        timeline,
        key,
        lsn: Lsn(request.read_lsn),
    })
}

/// Completes when the server shuts down (or the signal's sender is gone, which is a shutdown too).
async fn shutdown_signalled(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|&down| down).await;
}

fn shutting_down() -> Status {
    Status::unavailable("the pageserver is shutting down")
}

/// Waits until `timeline` has ingested up to `lsn`, for at most `budget`, or until shutdown.
async fn wait_for_lsn(
    manager: &TenantManager,
    shutdown: &mut watch::Receiver<bool>,
    tenant: TenantId,
    timeline: &Timeline,
    lsn: Lsn,
    budget: Duration,
) -> Result<(), Status> {
    if timeline.wal_end_lsn() >= lsn {
        return Ok(());
    }
    let waited = tokio::select! {
        waited = manager.wait_for_lsn(tenant, timeline, lsn, budget) => waited,
        () = shutdown_signalled(shutdown) => return Err(shutting_down()),
    };
    match waited {
        Ok(()) => Ok(()),
        Err(error) => {
            // A deletion of the timeline ends the wait early; report that rather than a timeout.
            if let Err(gone) = manager.timeline(tenant, timeline.id()) {
                return Err(status_from_error(&gone, Operation::Read));
            }
            Err(status_from_error(&error, Operation::Read))
        }
    }
}

/// Reads a page whose LSN is ingested.
fn read_page(timeline: &Timeline, read: &PageRead) -> Result<Bytes, Status> {
    let started = std::time::Instant::now();
    let result = timeline.get_page(read.key, read.lsn);
    crate::metrics::METRICS.get_page_seconds.observe(started.elapsed());
    result.map_err(|e| {
        crate::metrics::METRICS
            .get_page_errors_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        status_from_storage(&e, Operation::Read)
    })
}

/// The database size at an ingested `lsn`, refused below the timeline's start or GC cutoff as page reads are
/// (the engine's `db_size_at` does not check, and below the cutoff its answer could be wrong).
fn read_db_size(timeline: &Timeline, lsn: Lsn) -> Result<u32, StorageError> {
    if lsn < timeline.start_lsn() {
        return Err(StorageError::LsnBeforeStart {
            timeline: timeline.id(),
            lsn,
            start_lsn: timeline.start_lsn(),
        });
    }
    let gc_cutoff = timeline.gc_cutoff_lsn();
    if lsn < gc_cutoff {
        return Err(StorageError::LsnBelowGcCutoff { lsn, gc_cutoff });
    }
    timeline.db_size_at(lsn).map_err(|error| {
        // GC may have moved the cutoff past `lsn` during the read and removed a layer under it.
        let gc_cutoff = timeline.gc_cutoff_lsn();
        if lsn < gc_cutoff {
            return StorageError::LsnBelowGcCutoff { lsn, gc_cutoff };
        }
        error
    })
}

fn page_result(request_id: u64, result: Result<Bytes, Status>) -> pb::GetPageResult {
    let result = match result {
        Ok(page) => pb::get_page_result::Result::Page(page),
        Err(status) => pb::get_page_result::Result::Error(convert::page_error(&status)),
    };
    pb::GetPageResult {
        request_id,
        result: Some(result),
    }
}

/// Waits for a read's LSN, then reads it.
async fn wait_and_read(
    manager: Arc<TenantManager>,
    mut shutdown: watch::Receiver<bool>,
    timeline: Arc<Timeline>,
    read: PageRead,
    budget: Duration,
) -> pb::GetPageResult {
    let waited = wait_for_lsn(&manager, &mut shutdown, read.tenant, &timeline, read.lsn, budget).await;
    page_result(read.request_id, waited.and_then(|()| read_page(&timeline, &read)))
}

/// The page service over a tenant manager.
#[derive(Clone)]
pub struct PageServiceHandler {
    manager: Arc<TenantManager>,
    shutdown: watch::Receiver<bool>,
}

impl PageServiceHandler {
    /// A service over `manager`. Waits and streams end with `UNAVAILABLE` once `shutdown` turns `true` (or its
    /// sender is dropped).
    pub fn new(manager: Arc<TenantManager>, shutdown: watch::Receiver<bool>) -> PageServiceHandler {
        PageServiceHandler { manager, shutdown }
    }

    /// The tonic server for this service, with the message size limits set.
    pub fn into_server(self) -> PageServiceServer<PageServiceHandler> {
        PageServiceServer::new(self)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX)
    }

    fn timeline(&self, tenant: TenantId, timeline: TimelineId) -> Result<Arc<Timeline>, Status> {
        self.manager
            .timeline(tenant, timeline)
            .map_err(|e| status_from_error(&e, Operation::Read))
    }

    /// Answers what a batch can answer now; returns those results and the waits for the rest.
    fn start_batch(
        &self,
        requests: &[pb::GetPageRequest],
        limit: WaitLimit,
    ) -> (Vec<pb::GetPageResult>, Vec<impl Future<Output = pb::GetPageResult>>) {
        let budget = limit.budget(Instant::now());
        let mut ready = Vec::with_capacity(requests.len());
        let mut waiting = Vec::new();
        for request in requests {
            let found =
                parse_page_request(request).and_then(|read| Ok((read, self.timeline(read.tenant, read.timeline)?)));
            match found {
                Err(status) => ready.push(page_result(request.request_id, Err(status))),
                Ok((read, timeline)) if timeline.wal_end_lsn() >= read.lsn => {
                    ready.push(page_result(read.request_id, read_page(&timeline, &read)));
                }
                Ok((read, timeline)) => waiting.push(wait_and_read(
                    Arc::clone(&self.manager),
                    self.shutdown.clone(),
                    timeline,
                    read,
                    budget,
                )),
            }
        }
        (ready, waiting)
    }
}

type PageBatchSender = mpsc::Sender<Result<pb::GetPageResponseBatch, Status>>;

/// Serves one `GetPages` stream until the client ends it (and every wait is answered), the client goes away,
/// a batch is refused, or the server shuts down.
async fn page_stream(
    handler: PageServiceHandler,
    mut inbound: Streaming<pb::GetPageBatch>,
    tx: PageBatchSender,
    limit: WaitLimit,
) {
    let mut shutdown = handler.shutdown.clone();
    let mut waiting = FuturesUnordered::new();
    let mut inbound_open = true;
    loop {
        if !inbound_open && waiting.is_empty() {
            return;
        }
        let can_read = inbound_open && waiting.len() < PAGE_STREAM_WAITING_BATCHES_MAX;
        tokio::select! {
            message = inbound.next(), if can_read => match message {
                None => inbound_open = false,
                Some(Err(status)) => {
                    tracing::debug!(%status, "page stream failed on the client side");
                    return;
                }
                Some(Ok(batch)) => {
                    if batch.requests.len() > BATCH_REQUESTS_MAX {
                        let status = Status::invalid_argument(format!(
                            "a batch of {} requests, more than {BATCH_REQUESTS_MAX}",
                            batch.requests.len()
                        ));
                        let _ = tx.send(Err(status)).await;
                        return;
                    }
                    let (ready, pending) = handler.start_batch(&batch.requests, limit);
                    if !ready.is_empty() && tx.send(Ok(pb::GetPageResponseBatch { results: ready })).await.is_err() {
                        return;
                    }
                    if !pending.is_empty() {
                        waiting.push(futures::future::join_all(pending));
                    }
                }
            },
            Some(results) = waiting.next(), if !waiting.is_empty() => {
                if tx.send(Ok(pb::GetPageResponseBatch { results })).await.is_err() {
                    return;
                }
            }
            () = tx.closed() => return,
            () = shutdown_signalled(&mut shutdown) => {
                let _ = tx.try_send(Err(shutting_down()));
                return;
            }
        }
    }
}

#[tonic::async_trait]
impl PageService for PageServiceHandler {
    async fn get_page(&self, request: Request<pb::GetPageRequest>) -> Result<Response<pb::GetPageResponse>, Status> {
        let limit = WaitLimit::from_metadata(request.metadata(), Instant::now());
        let read = parse_page_request(request.get_ref())?;
        let timeline = self.timeline(read.tenant, read.timeline)?;
        let budget = limit.budget(Instant::now());
        let mut shutdown = self.shutdown.clone();
        wait_for_lsn(&self.manager, &mut shutdown, read.tenant, &timeline, read.lsn, budget).await?;
        let page = read_page(&timeline, &read)?;
        Ok(Response::new(pb::GetPageResponse {
            request_id: read.request_id,
            page,
        }))
    }

    type GetPagesStream = ReceiverStream<Result<pb::GetPageResponseBatch, Status>>;

    async fn get_pages(
        &self,
        request: Request<Streaming<pb::GetPageBatch>>,
    ) -> Result<Response<Self::GetPagesStream>, Status> {
        let limit = WaitLimit::from_metadata(request.metadata(), Instant::now());
        let (tx, rx) = mpsc::channel(PAGE_STREAM_CHANNEL_BATCHES);
        tokio::spawn(page_stream(self.clone(), request.into_inner(), tx, limit));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn get_db_size(
        &self,
        request: Request<pb::GetDbSizeRequest>,
    ) -> Result<Response<pb::GetDbSizeResponse>, Status> {
        let limit = WaitLimit::from_metadata(request.metadata(), Instant::now());
        let request = request.into_inner();
        let (tenant, timeline_id) = convert::timeline_key(request.timeline.as_ref())?;
        let timeline = self.timeline(tenant, timeline_id)?;
        let lsn = Lsn(request.read_lsn);
        let budget = limit.budget(Instant::now());
        let mut shutdown = self.shutdown.clone();
        wait_for_lsn(&self.manager, &mut shutdown, tenant, &timeline, lsn, budget).await?;
        let db_size_pages = read_db_size(&timeline, lsn).map_err(|e| status_from_storage(&e, Operation::Read))?;
        Ok(Response::new(pb::GetDbSizeResponse { db_size_pages }))
    }

    async fn lsn_for_timestamp(
        &self,
        request: Request<pb::LsnForTimestampRequest>,
    ) -> Result<Response<pb::LsnForTimestampResponse>, Status> {
        let request = request.into_inner();
        let (tenant, timeline_id) = convert::timeline_key(request.timeline.as_ref())?;
        let timeline = self.timeline(tenant, timeline_id)?;
        let found = timeline
            .lsn_for_timestamp(request.timestamp_us)
            .map_err(|e| status_from_storage(&e, Operation::Read))?;
        Ok(Response::new(pb::LsnForTimestampResponse {
            timeline_id: found.timeline_id.to_string(),
            lsn: found.lsn.0,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_budgets_leave_a_margin_and_are_capped() {
        assert_eq!(wait_budget(Duration::from_millis(100)), Duration::from_millis(80));
        assert_eq!(wait_budget(Duration::from_secs(5)), Duration::from_millis(4_900));
        assert_eq!(
            wait_budget(Duration::from_secs(3600)),
            Duration::from_millis(WAIT_LSN_TIMEOUT_MS_MAX)
        );
        assert_eq!(wait_budget(Duration::ZERO), Duration::ZERO);
        let now = Instant::now();
        let mut metadata = MetadataMap::new();
        assert_eq!(
            WaitLimit::from_metadata(&metadata, now),
            WaitLimit::Each(Duration::from_millis(WAIT_LSN_TIMEOUT_MS_DEFAULT))
        );
        metadata.insert(convert::GRPC_TIMEOUT_METADATA, "1S".parse().expect("ascii"));
        let limit = WaitLimit::from_metadata(&metadata, now);
        assert_eq!(limit, WaitLimit::Until(now + Duration::from_millis(900)));
        assert_eq!(
            limit.budget(now + Duration::from_millis(400)),
            Duration::from_millis(500)
        );
        assert_eq!(limit.budget(now + Duration::from_secs(2)), Duration::ZERO);
    }

    #[test]
    fn page_requests_are_validated() {
        let good = pb::GetPageRequest {
            timeline: Some(pb::TimelineRef {
                tenant_id: TenantId(1).to_string(),
                timeline_id: TimelineId(2).to_string(),
            }),
            key: 5,
            read_lsn: 100,
            not_modified_since: 100,
            request_id: 9,
        };
        let read = parse_page_request(&good).expect("valid");
        assert_eq!((read.request_id, read.key, read.lsn), (9, Key::page(5), Lsn(100)));
        let ahead = pb::GetPageRequest {
            not_modified_since: 101,
            ..good.clone()
        };
        assert_eq!(
            parse_page_request(&ahead).expect_err("hint past read_lsn").code(),
            tonic::Code::InvalidArgument
        );
        let meta = pb::GetPageRequest {
            key: storage::DB_SIZE_KEY.0,
            ..good.clone()
        };
        assert_eq!(
            parse_page_request(&meta).expect_err("not a page").code(),
            tonic::Code::InvalidArgument
        );
        let unnamed = pb::GetPageRequest { timeline: None, ..good };
        assert_eq!(
            parse_page_request(&unnamed).expect_err("no timeline").code(),
            tonic::Code::InvalidArgument
        );
    }
}
