//! The safekeeper's gRPC service (`cambium.safekeeper.v1.Safekeeper`) over a [`SafekeeperNode`], and
//! [`serve`], which runs it on a listener until a shutdown signal.
//!
//! Every request is validated (ids, term histories, sizes) before it reaches the acceptor, and the acceptor
//! validates before it writes: a refused request changes nothing on disk. The proposer's requests (`GetState`,
//! `Vote`, `Elected`, `Append`, `ReadWal`) reach the acceptor through `safekeeper_core::dispatch::apply`, the
//! same mapping the deterministic simulation drives; only the conversions from and to the wire are this
//! module's. Statuses follow the contract in the
//! header of `proto/proto/safekeeper.proto` (see [`crate::convert::status_from_acceptor`]).
//!
//! **Append** is a bidirectional stream and the group-commit point: the task serving it takes one message,
//! then every further message already received on the stream (without waiting, up to
//! [`APPEND_BATCH_MESSAGES_MAX`] messages or [`APPEND_BATCH_BYTES_MAX`] bytes), writes them all, makes them
//! durable with one `sync` (one fdatasync) and acknowledges each, in order, with the same flush and commit
//! LSN. While a batch is written, the messages arriving are read ahead into the next batch (within the same
//! limits, so at most two batches per stream are in memory); the node counts them all
//! ([`SafekeeperNode::appends_pending`]). A refused message ends the stream with its status, after the messages before it are acknowledged;
//! the messages after it are not written.
//!
//! **StreamWal** sends committed WAL from the requested LSN in chunks of at most [`STREAM_WAL_CHUNK_BYTES_MAX`]
//! (or one larger frame), then waits for the timeline's commit LSN to move and goes on, until the client goes
//! away or the node shuts down.
//!
//! **PullTimeline** rebuilds a timeline from its peers ([`crate::pull`]); **CopyWal** is what it reads them
//! with: durable WAL (committed or not) of a range, in chunks of at most [`STREAM_WAL_CHUNK_BYTES_MAX`], then
//! the stream ends.
//!
//! **DeleteTimeline** and **DeleteTenant** remove timelines durably (see [`crate::node`]); the `Append` and
//! `StreamWal` streams open on a deleted timeline end with `NOT_FOUND` ("... was deleted").

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cambium_types::Lsn;
use proto::safekeeper as pb;
use proto::safekeeper::safekeeper_server::{Safekeeper, SafekeeperServer};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

use crate::convert::{self, status_from_acceptor, status_from_read_error};
use crate::node::{NodeError, SafekeeperNode, Timeline};
use safekeeper_core::dispatch::{self, Served, READ_BYTES_MAX};
use safekeeper_core::proposer::{Reply, Request as ProtocolRequest};
use safekeeper_core::protocol::{AcceptorError, VoteRequest};

mod append;

use append::{append_stream, AppendRequests};

/// A proposer in this process hands its append messages over as they are: the same stream as over gRPC, with
/// the same bound on a message (one over it ends the stream, as tonic's decoder would).
impl walproposer::InProcessAppend for SafekeeperService {
    fn open_append(
        &self,
        requests: mpsc::Receiver<pb::AppendRequest>,
    ) -> Result<walproposer::transport::AppendAcks, Status> {
        let inbound = ReceiverStream::new(requests).map(|message| {
            if message.data.len() > MESSAGE_BYTES_MAX {
                return Err(Status::out_of_range(format!(
                    "append of {} bytes is over the message bound of {MESSAGE_BYTES_MAX} bytes",
                    message.data.len()
                )));
            }
            Ok(message)
        });
        self.open_append_stream(inbound)
    }
}

/// Largest gRPC message accepted or sent. An append carries at most `acceptor::APPEND_BYTES_MAX` (16 MiB) of
/// WAL; this leaves room for the envelope and makes an oversized append a clear `INVALID_ARGUMENT` from the
/// acceptor rather than a transport error, up to this size.
pub const MESSAGE_BYTES_MAX: usize = 32 * 1024 * 1024;
/// Most appends written under one sync.
pub const APPEND_BATCH_MESSAGES_MAX: usize = 256;
/// Most WAL bytes written under one sync (a batch stops growing once it reaches this).
pub const APPEND_BATCH_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Acknowledgements queued for an append stream's client before the stream stops reading appends.
pub const APPEND_RESPONSE_CHANNEL_MESSAGES: usize = 1024;
/// Largest chunk `StreamWal` sends (a single larger frame is sent whole).
pub const STREAM_WAL_CHUNK_BYTES_MAX: usize = 1024 * 1024;
/// Chunks queued for a `StreamWal` client before the stream stops reading WAL.
pub const STREAM_WAL_CHANNEL_CHUNKS: usize = 16;
/// After the shutdown signal, how long open connections get to finish before they are cut.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;
/// HTTP/2 flow-control window of one stream: how much a proposer may pipeline on an append stream while a
/// sync runs (matches the proposer's default `in_flight_bytes_max`, so a whole in-flight window can land in
/// one group commit).
pub const HTTP2_STREAM_WINDOW_BYTES: u32 = 8 * 1024 * 1024;
/// HTTP/2 flow-control window of one connection (all its streams).
pub const HTTP2_CONNECTION_WINDOW_BYTES: u32 = 16 * 1024 * 1024;
/// HTTP/2 keepalive pings on idle connections, so a vanished client's streams end.
pub const HTTP2_KEEPALIVE_INTERVAL_MS: u64 = 10_000;
/// A keepalive ping unanswered for this long closes the connection.
pub const HTTP2_KEEPALIVE_TIMEOUT_MS: u64 = 20_000;

/// The gRPC service over one node.
#[derive(Clone, Debug)]
pub struct SafekeeperService {
    node: Arc<SafekeeperNode>,
}

impl SafekeeperService {
    /// A service over `node`.
    pub fn new(node: Arc<SafekeeperNode>) -> SafekeeperService {
        SafekeeperService { node }
    }

    /// The tonic server for this service, with the message size limits set.
    pub fn into_server(self) -> SafekeeperServer<SafekeeperService> {
        SafekeeperServer::new(self)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX)
    }

    /// This service as a proposer in this process calls it: the tonic server for its unary calls and its append
    /// stream called directly (`walproposer::LocalSafekeepers`).
    pub fn into_local(
        self,
    ) -> (
        SafekeeperServer<SafekeeperService>,
        Arc<dyn walproposer::InProcessAppend>,
    ) {
        let append = Arc::new(SafekeeperService {
            node: Arc::clone(&self.node),
        });
        (self.into_server(), append)
    }

    /// Starts serving one append stream read from `inbound` (a task on the current runtime); its
    /// acknowledgements, or the status that ended it, come on the returned channel.
    fn open_append_stream<S: AppendRequests>(&self, inbound: S) -> Result<walproposer::transport::AppendAcks, Status> {
        self.check_running()?;
        let (tx, rx) = mpsc::channel(APPEND_RESPONSE_CHANNEL_MESSAGES);
        tokio::spawn(append_stream(Arc::clone(&self.node), inbound, tx));
        Ok(rx)
    }

    fn check_running(&self) -> Result<(), Status> {
        if self.node.is_shut_down() {
            return Err(status_from_node(&NodeError::ShuttingDown));
        }
        Ok(())
    }

    /// The timeline a request names.
    fn timeline(&self, timeline: Option<&pb::TimelineRef>) -> Result<Arc<Timeline>, Status> {
        self.check_running()?;
        let key = convert::timeline_key(timeline)?;
        self.node.timeline(key).map_err(|e| status_from_node(&e))
    }
}

/// The status that reports a node error, as the service contract specifies.
pub fn status_from_node(error: &NodeError) -> Status {
    match error {
        NodeError::NotFound { .. } | NodeError::Deleted { .. } => Status::not_found(error.to_string()),
        NodeError::AlreadyExists { .. } => Status::already_exists(error.to_string()),
        NodeError::Acceptor(error) => status_from_acceptor(error),
        NodeError::ShuttingDown | NodeError::QuietPeriod { .. } => Status::unavailable(error.to_string()),
        NodeError::PullInProgress { .. } => Status::aborted(error.to_string()),
        NodeError::Broken { .. } | NodeError::Io { .. } | NodeError::Locked { .. } => convert::internal(error),
    }
}

/// The status for a node error of a read: a start outside the available WAL is `OUT_OF_RANGE`.
fn status_from_node_read(error: &NodeError) -> Status {
    match error {
        NodeError::Acceptor(error) => status_from_read_error(error),
        other => status_from_node(other),
    }
}

/// Completes when `timeline` is deleted; never if there is none.
async fn timeline_deleted(timeline: Option<&Arc<Timeline>>) {
    match timeline {
        Some(timeline) => timeline.deleted().await,
        None => std::future::pending().await,
    }
}

/// Completes when the node shuts down (or is dropped).
async fn shutdown_signalled(shutdown: &mut watch::Receiver<bool>) {
    // An error means the node is gone, which is a shutdown too.
    let _ = shutdown.wait_for(|&down| down).await;
}

/// Runs one protocol request on `timeline`'s acceptor through [`dispatch::apply`] (the mapping the simulation
/// drives) and gives the reply with the acceptor's commit LSN after it (read under the same lock). A refusal is
/// the acceptor's error, reported by `status` (the read or the write mapping of the contract).
async fn apply(
    timeline: &Arc<Timeline>,
    request: ProtocolRequest,
    status: fn(&AcceptorError) -> Status,
) -> Result<(Reply, Lsn), Status> {
    let what = request_name(&request);
    let (served, commit_lsn) = timeline
        .run(move |acceptor| {
            let served = dispatch::apply(acceptor, request);
            (served, acceptor.control().commit_lsn)
        })
        .await
        .map_err(|e| status_from_node(&e))?;
    match served.map_err(|e| status(&e))? {
        Served::Reply(reply) => Ok((reply, commit_lsn)),
        // Appends go through `write_batch`, which syncs them as a group.
        Served::NeedsSync => panic!("dispatch answered {what} with NeedsSync, which only appends may"),
    }
}

/// The name of a protocol request, for messages.
fn request_name(request: &ProtocolRequest) -> &'static str {
    match request {
        ProtocolRequest::GetState => "GetState",
        ProtocolRequest::Vote(_) => "Vote",
        ProtocolRequest::Elected(_) => "Elected",
        ProtocolRequest::Append(_) => "Append",
        ProtocolRequest::ReadWal { .. } => "ReadWal",
    }
}

/// A reply of another kind than its request's: the dispatch mapping broke its contract (our bug).
fn unexpected_reply(request: &str, reply: &Reply) -> ! {
    panic!("dispatch answered {request} with {reply:?}")
}

#[tonic::async_trait]
impl Safekeeper for SafekeeperService {
    async fn create_timeline(
        &self,
        request: Request<pb::CreateTimelineRequest>,
    ) -> Result<Response<pb::CreateTimelineResponse>, Status> {
        self.check_running()?;
        let request = request.into_inner();
        let key = convert::timeline_key(request.timeline.as_ref())?;
        let start_lsn = Lsn(request.start_lsn);
        if start_lsn > convert::TIMELINE_START_LSN_MAX {
            return Err(Status::invalid_argument(format!(
                "start_lsn {start_lsn} is past {}",
                convert::TIMELINE_START_LSN_MAX
            )));
        }
        let timeline = self
            .node
            .create_timeline(key, start_lsn)
            .await
            .map_err(|e| status_from_node(&e))?;
        let state = timeline.state().await.map_err(|e| status_from_node(&e))?;
        Ok(Response::new(pb::CreateTimelineResponse {
            state: Some(convert::state_to_proto(&state)),
        }))
    }

    async fn get_state(&self, request: Request<pb::TimelineRef>) -> Result<Response<pb::AcceptorState>, Status> {
        let timeline = self.timeline(Some(request.get_ref()))?;
        match apply(&timeline, ProtocolRequest::GetState, status_from_acceptor)
            .await?
            .0
        {
            Reply::State(state) => Ok(Response::new(convert::state_to_proto(&state))),
            other => unexpected_reply("GetState", &other),
        }
    }

    async fn vote(&self, request: Request<pb::VoteRequest>) -> Result<Response<pb::VoteResponse>, Status> {
        let request = request.into_inner();
        let timeline = self.timeline(request.timeline.as_ref())?;
        let vote = VoteRequest { term: request.term };
        let response = match apply(&timeline, ProtocolRequest::Vote(vote), status_from_acceptor)
            .await?
            .0
        {
            Reply::Vote(response) => response,
            other => unexpected_reply("Vote", &other),
        };
        tracing::info!(
            node = self.node.node_id(),
            tenant = %timeline.key().0,
            timeline = %timeline.key().1,
            term = vote.term,
            granted = response.granted,
            "vote"
        );
        Ok(Response::new(pb::VoteResponse {
            granted: response.granted,
            state: Some(convert::state_to_proto(&response.state)),
        }))
    }

    async fn elected(&self, request: Request<pb::ElectedRequest>) -> Result<Response<pb::ElectedResponse>, Status> {
        let request = request.into_inner();
        let timeline = self.timeline(request.timeline.as_ref())?;
        let elected = convert::elected_from_proto(&request)?;
        let (term, start) = (elected.term, elected.start_streaming_at);
        match apply(&timeline, ProtocolRequest::Elected(elected), status_from_acceptor)
            .await?
            .0
        {
            Reply::Elected => {}
            other => unexpected_reply("Elected", &other),
        }
        tracing::info!(
            node = self.node.node_id(),
            tenant = %timeline.key().0,
            timeline = %timeline.key().1,
            term,
            start_streaming_at = %start,
            "elected"
        );
        Ok(Response::new(pb::ElectedResponse {}))
    }

    type AppendStream = ReceiverStream<Result<pb::AppendResponse, Status>>;

    async fn append(
        &self,
        request: Request<Streaming<pb::AppendRequest>>,
    ) -> Result<Response<Self::AppendStream>, Status> {
        let acks = self.open_append_stream(request.into_inner())?;
        Ok(Response::new(ReceiverStream::new(acks)))
    }

    async fn read_wal(&self, request: Request<pb::ReadWalRequest>) -> Result<Response<pb::WalChunk>, Status> {
        let request = request.into_inner();
        let timeline = self.timeline(request.timeline.as_ref())?;
        let (term, start_lsn) = (request.term, Lsn(request.start_lsn));
        // `dispatch::apply` bounds the read by `READ_BYTES_MAX` too; the bound is repeated here so a reader of
        // this RPC sees it.
        let max_bytes = usize::try_from(request.max_bytes)
            .unwrap_or(usize::MAX)
            .min(READ_BYTES_MAX);
        let read = ProtocolRequest::ReadWal {
            term,
            start_lsn,
            max_bytes,
        };
        let (data, commit_lsn) = match apply(&timeline, read, status_from_read_error).await? {
            (Reply::Wal { data, .. }, commit_lsn) => (data, commit_lsn),
            (other, _) => unexpected_reply("ReadWal", &other),
        };
        Ok(Response::new(pb::WalChunk {
            start_lsn: start_lsn.0,
            data,
            commit_lsn: commit_lsn.0,
        }))
    }

    type StreamWalStream = ReceiverStream<Result<pb::WalChunk, Status>>;

    async fn stream_wal(
        &self,
        request: Request<pb::StreamWalRequest>,
    ) -> Result<Response<Self::StreamWalStream>, Status> {
        let request = request.into_inner();
        let timeline = self.timeline(request.timeline.as_ref())?;
        let start_lsn = Lsn(request.start_lsn);
        let oldest_lsn = timeline
            .run(|acceptor| {
                use safekeeper_core::protocol::WalStore;
                acceptor.wal().oldest_lsn()
            })
            .await
            .map_err(|e| status_from_node(&e))?;
        if start_lsn < oldest_lsn {
            return Err(Status::out_of_range(format!(
                "WAL before {oldest_lsn} was removed; asked from {start_lsn}"
            )));
        }
        let (tx, rx) = mpsc::channel(STREAM_WAL_CHANNEL_CHUNKS);
        tokio::spawn(stream_wal(timeline, start_lsn, tx, self.node.subscribe_shutdown()));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn report_horizons(
        &self,
        request: Request<pb::HorizonsRequest>,
    ) -> Result<Response<pb::HorizonsResponse>, Status> {
        let request = request.into_inner();
        let timeline = self.timeline(request.timeline.as_ref())?;
        let lsn = Lsn(request.remote_consistent_lsn);
        let (commit_lsn, oldest_lsn) = timeline
            .run(move |acceptor| {
                use safekeeper_core::protocol::WalStore;
                acceptor.set_remote_consistent_lsn(lsn)?;
                Ok::<_, AcceptorError>((acceptor.control().commit_lsn, acceptor.wal().oldest_lsn()))
            })
            .await
            .map_err(|e| status_from_node(&e))?
            .map_err(|e| status_from_acceptor(&e))?;
        Ok(Response::new(pb::HorizonsResponse {
            commit_lsn: commit_lsn.0,
            oldest_lsn: oldest_lsn.0,
        }))
    }

    async fn delete_timeline(
        &self,
        request: Request<pb::TimelineRef>,
    ) -> Result<Response<pb::DeleteTimelineResponse>, Status> {
        self.check_running()?;
        let key = convert::timeline_key(Some(request.get_ref()))?;
        self.node.delete_timeline(key).await.map_err(|e| status_from_node(&e))?;
        Ok(Response::new(pb::DeleteTimelineResponse {}))
    }

    async fn pull_timeline(
        &self,
        request: Request<pb::PullTimelineRequest>,
    ) -> Result<Response<pb::PullTimelineResponse>, Status> {
        self.check_running()?;
        let request = request.into_inner();
        let key = convert::timeline_key(request.timeline.as_ref())?;
        let outcome = crate::pull::pull_timeline(Arc::clone(&self.node), key, request.sources)
            .await
            .map_err(|e| {
                tracing::warn!(node = self.node.node_id(), tenant = %key.0, timeline = %key.1, error = %e, "pull refused or failed");
                crate::pull::status_from_pull(&e)
            })?;
        Ok(Response::new(pb::PullTimelineResponse {
            state: Some(convert::state_to_proto(&outcome.state)),
            copied: outcome.copied,
            source: outcome.source.unwrap_or_default(),
            copied_bytes: outcome.copied_bytes,
        }))
    }

    type CopyWalStream = ReceiverStream<Result<pb::WalChunk, Status>>;

    async fn copy_wal(&self, request: Request<pb::CopyWalRequest>) -> Result<Response<Self::CopyWalStream>, Status> {
        let request = request.into_inner();
        let timeline = self.timeline(request.timeline.as_ref())?;
        let (start_lsn, end_lsn) = (Lsn(request.start_lsn), Lsn(request.end_lsn));
        if end_lsn < start_lsn {
            return Err(Status::invalid_argument(format!(
                "end_lsn {end_lsn} is before start_lsn {start_lsn}"
            )));
        }
        let (oldest_lsn, flush_lsn) = timeline
            .run(|acceptor| {
                use safekeeper_core::protocol::WalStore;
                (acceptor.wal().oldest_lsn(), acceptor.wal().flush_lsn())
            })
            .await
            .map_err(|e| status_from_node(&e))?;
        if start_lsn < oldest_lsn || end_lsn > flush_lsn {
            return Err(Status::out_of_range(format!(
                "{start_lsn}..{end_lsn} is outside the WAL held here, {oldest_lsn}..{flush_lsn}"
            )));
        }
        let (tx, rx) = mpsc::channel(STREAM_WAL_CHANNEL_CHUNKS);
        tokio::spawn(copy_wal(
            timeline,
            start_lsn,
            end_lsn,
            tx,
            self.node.subscribe_shutdown(),
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn list_timelines(
        &self,
        _request: Request<pb::ListTimelinesRequest>,
    ) -> Result<Response<pb::ListTimelinesResponse>, Status> {
        self.check_running()?;
        let timelines = self
            .node
            .timeline_keys()
            .into_iter()
            .map(|(tenant, timeline)| pb::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: timeline.to_string(),
            })
            .collect();
        Ok(Response::new(pb::ListTimelinesResponse { timelines }))
    }

    async fn delete_tenant(
        &self,
        request: Request<pb::DeleteTenantRequest>,
    ) -> Result<Response<pb::DeleteTenantResponse>, Status> {
        self.check_running()?;
        let tenant = convert::tenant_id(&request.get_ref().tenant_id)?;
        self.node
            .delete_tenant(tenant)
            .await
            .map_err(|e| status_from_node(&e))?;
        Ok(Response::new(pb::DeleteTenantResponse {}))
    }
}

type WalSender = mpsc::Sender<Result<pb::WalChunk, Status>>;

/// Sends `item` unless the client is gone or the node shuts down first; returns whether it was sent.
async fn send_or_stop<T>(
    tx: &mpsc::Sender<Result<T, Status>>,
    item: Result<T, Status>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        sent = tx.send(item) => sent.is_ok(),
        () = shutdown_signalled(shutdown) => false,
    }
}

/// Streams committed WAL of `timeline` from `next_lsn` and tails it.
async fn stream_wal(timeline: Arc<Timeline>, mut next_lsn: Lsn, tx: WalSender, mut shutdown: watch::Receiver<bool>) {
    let mut commits = timeline.subscribe_commit_lsn();
    loop {
        let commit_lsn = *commits.borrow_and_update();
        if next_lsn < commit_lsn {
            let start_lsn = next_lsn;
            let read = timeline
                .run(move |acceptor| {
                    let data = acceptor.read_committed(start_lsn, STREAM_WAL_CHUNK_BYTES_MAX)?;
                    Ok::<_, AcceptorError>((data, acceptor.control().commit_lsn))
                })
                .await;
            let item = match read {
                Ok(Ok((data, commit_lsn))) if !data.is_empty() => {
                    next_lsn = Lsn(start_lsn.0 + data.len() as u64);
                    Ok(pb::WalChunk {
                        start_lsn: start_lsn.0,
                        data,
                        commit_lsn: commit_lsn.0,
                    })
                }
                Ok(Ok(_)) => Err(convert::internal(&format!(
                    "no WAL readable at {start_lsn} below the commit LSN {commit_lsn}"
                ))),
                Ok(Err(error)) => Err(status_from_read_error(&error)),
                Err(error) => Err(status_from_node_read(&error)),
            };
            let failed = item.is_err();
            if !send_or_stop(&tx, item, &mut shutdown).await || failed {
                return;
            }
            continue;
        }
        tokio::select! {
            changed = commits.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tx.closed() => return,
            () = timeline.deleted() => {
                let _ = tx.try_send(Err(status_from_node(&NodeError::Deleted { key: timeline.key() })));
                return;
            }
            () = shutdown_signalled(&mut shutdown) => {
                let _ = tx.try_send(Err(status_from_node(&NodeError::ShuttingDown)));
                return;
            }
        }
    }
}

/// Streams durable WAL of `timeline` from `next_lsn` to `end_lsn`, then ends the stream.
async fn copy_wal(
    timeline: Arc<Timeline>,
    mut next_lsn: Lsn,
    end_lsn: Lsn,
    tx: WalSender,
    mut shutdown: watch::Receiver<bool>,
) {
    while next_lsn < end_lsn {
        let start_lsn = next_lsn;
        let read = timeline
            .run(move |acceptor| {
                let data = acceptor.read_durable(start_lsn, end_lsn, STREAM_WAL_CHUNK_BYTES_MAX)?;
                Ok::<_, AcceptorError>((data, acceptor.control().commit_lsn))
            })
            .await;
        let item = match read {
            Ok(Ok((data, commit_lsn))) if !data.is_empty() => {
                next_lsn = Lsn(start_lsn.0 + data.len() as u64);
                Ok(pb::WalChunk {
                    start_lsn: start_lsn.0,
                    data,
                    commit_lsn: commit_lsn.0,
                })
            }
            Ok(Ok(_)) => Err(Status::out_of_range(format!(
                "no whole frame at {start_lsn} before {end_lsn}: the end is not a frame boundary"
            ))),
            Ok(Err(error)) => Err(status_from_read_error(&error)),
            Err(error) => Err(status_from_node_read(&error)),
        };
        let failed = item.is_err();
        if !send_or_stop(&tx, item, &mut shutdown).await || failed {
            return;
        }
    }
}

/// A timeline with no append for this long lets its open segment file go (issue 13: idle timelines hold no
/// descriptors, so thousands of branches do not exhaust them).
pub const IDLE_SEGMENT_FILE_MS: u64 = 30_000;

/// Lets idle timelines' segment files go every half [`IDLE_SEGMENT_FILE_MS`] while the node lives.
async fn release_idle_files(node: std::sync::Weak<SafekeeperNode>) {
    let idle_for = Duration::from_millis(IDLE_SEGMENT_FILE_MS);
    let mut tick = tokio::time::interval(idle_for / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(node) = node.upgrade() else {
            return;
        };
        // Each timeline's lock may be held across an fdatasync: off the async workers.
        match tokio::task::spawn_blocking(move || node.release_idle_files(idle_for)).await {
            Ok(0) => {}
            Ok(released) => tracing::debug!(released, "let idle segment files go"),
            Err(_) => return,
        }
    }
}

/// Serves `node` on `listener` until `shutdown` completes; then shuts the node down (its streams end with
/// `UNAVAILABLE`), lets open connections finish for up to [`SHUTDOWN_GRACE_MS`], and returns. The node's lock
/// is released by [`SafekeeperNode::close`] (or when its last reference drops).
pub async fn serve(
    node: Arc<SafekeeperNode>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // TcpIncoming is tonic's listener stream with per-socket options: without TCP_NODELAY, small
    // acknowledgements can wait out Nagle's algorithm against the client's delayed ACKs.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let server = tonic::transport::Server::builder()
        .initial_stream_window_size(Some(HTTP2_STREAM_WINDOW_BYTES))
        .initial_connection_window_size(Some(HTTP2_CONNECTION_WINDOW_BYTES))
        .http2_keepalive_interval(Some(Duration::from_millis(HTTP2_KEEPALIVE_INTERVAL_MS)))
        .http2_keepalive_timeout(Some(Duration::from_millis(HTTP2_KEEPALIVE_TIMEOUT_MS)))
        .add_service(SafekeeperService::new(Arc::clone(&node)).into_server())
        .serve_with_incoming_shutdown(incoming, async {
            let _ = stop_rx.await;
        });
    let mut server: Pin<Box<_>> = Box::pin(server);
    let sweeper = tokio::spawn(release_idle_files(Arc::downgrade(&node)));
    tokio::select! {
        result = &mut server => {
            sweeper.abort();
            return result;
        }
        () = shutdown => {}
    }
    sweeper.abort();
    tracing::info!(node = node.node_id(), "shutting down");
    node.shut_down();
    let _ = stop_tx.send(());
    match tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), server).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!(
                node = node.node_id(),
                "connections still open after {SHUTDOWN_GRACE_MS} ms; closing them"
            );
            Ok(())
        }
    }
}
