//! The proposer over gRPC: what a compute uses to make each commit durable on a quorum of safekeepers.
//!
//! [`WalProposer::start`] spawns a driver task that owns the sans-IO [`Proposer`] and one connection task per
//! safekeeper. [`WalProposer::elect`] campaigns; [`WalProposer::append`] proposes one record and returns once
//! it is committed (durable on a majority in this term), or fails: fenced by a newer proposer, or no
//! confirmation within `commit_timeout_ms` (then the record's fate is unknown: the caller must not guess,
//! DESIGN.md §5).
//!
//! Bounds: commands and replies travel on bounded channels; each connection takes at most
//! `peer_queue_max` requests (beyond, requests are dropped and the proposer resends after its timeout);
//! at most `queued_appends_max` records wait for backlog room; every RPC has `request_timeout_ms`.
//!
//! A broken append stream is reported to the proposer ([`Proposer::on_connection_lost`]): the safekeeper's
//! earlier acknowledgements stop counting until it is elected again from its state, so a safekeeper that lost
//! its disk (and was rebuilt by `PullTimeline`) is never credited with WAL it no longer holds. HTTP/2
//! keepalive pings ([`KEEPALIVE_INTERVAL_MS`], [`KEEPALIVE_TIMEOUT_MS`]) break the connection to a host that
//! vanished without closing it, well within a safekeeper's pull quiet period (`safekeeper::node::PULL_QUIET_PERIOD_MS`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cambium_types::{Lsn, TenantId, TimelineId};
use parking_lot::Mutex;
use proto::safekeeper as pb;
use proto::safekeeper::safekeeper_client::SafekeeperClient;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Endpoint;

use crate::transport::{self, LocalPeer, LocalSafekeepers, PeerService};
use crate::wire;
use safekeeper_core::proposer::{Envelope, ProposeError, Proposer, ProposerConfig, Refusal, Reply, Request, Status};
use safekeeper_core::protocol::{AppendResponse, Term, VoteResponse};

/// Largest gRPC message accepted from a safekeeper.
const MESSAGE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// HTTP/2 keepalive pings to each safekeeper, idle or not.
pub const KEEPALIVE_INTERVAL_MS: u64 = 5_000;
/// A keepalive ping unanswered for this long breaks the connection (and is reported as lost).
pub const KEEPALIVE_TIMEOUT_MS: u64 = 10_000;

/// What the connection tasks tell the driver.
enum Incoming {
    /// The reply to request `id`.
    Reply(u64, Reply),
    /// The append stream to safekeeper `peer` ended.
    Lost(usize),
}

/// How to reach the safekeepers and how long to wait.
#[derive(Clone, Debug)]
pub struct WalProposerConfig {
    /// Safekeeper addresses (`host:port` or `http://host:port`).
    pub safekeepers: Vec<String>,
    /// The tenant.
    pub tenant_id: TenantId,
    /// The timeline.
    pub timeline_id: TimelineId,
    /// Where the timeline's WAL starts.
    pub timeline_start_lsn: Lsn,
    /// The protocol's bounds and timeouts (`acceptor_count` is set from `safekeepers`).
    pub proposer: ProposerConfig,
    /// Connecting to a safekeeper gives up after this long (the proposer retries later).
    pub connect_timeout_ms: u64,
    /// `append` gives up waiting for its commit after this long.
    pub commit_timeout_ms: u64,
    /// `elect` gives up after this long.
    pub election_timeout_ms: u64,
    /// The driver's clock tick.
    pub tick_interval_ms: u64,
    /// Records waiting for backlog room, at most.
    pub queued_appends_max: usize,
    /// Requests queued for one safekeeper connection, at most.
    pub peer_queue_max: usize,
    /// Safekeepers served in this process: those among `safekeepers` are called directly, not over TCP.
    pub local: LocalSafekeepers,
}

impl WalProposerConfig {
    /// Defaults for a timeline: 2 s request timeout, 5 s commit timeout, 10 s election timeout.
    pub fn new(
        safekeepers: Vec<String>,
        tenant_id: TenantId,
        timeline_id: TimelineId,
        timeline_start_lsn: Lsn,
    ) -> Self {
        WalProposerConfig {
            proposer: ProposerConfig {
                acceptor_count: safekeepers.len(),
                ..ProposerConfig::default()
            },
            safekeepers,
            tenant_id,
            timeline_id,
            timeline_start_lsn,
            connect_timeout_ms: 1_000,
            commit_timeout_ms: 5_000,
            election_timeout_ms: 10_000,
            tick_interval_ms: 20,
            queued_appends_max: 4096,
            peer_queue_max: 4096,
            local: LocalSafekeepers::none(),
        }
    }
}

/// Why an election or an append failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WalProposerError {
    /// No majority answered in time.
    #[error("election failed: {0}")]
    ElectionFailed(String),
    /// A newer proposer won `term`; this one never writes again.
    #[error("fenced: another proposer won term {term}")]
    Fenced {
        /// The newer term.
        term: Term,
    },
    /// `append` before a successful `elect`.
    #[error("the proposer is not elected")]
    NotElected,
    /// The commit was not confirmed in time: the record may or may not be committed.
    #[error("commit not confirmed within {timeout_ms} ms: the record may or may not be committed")]
    CommitTimeout {
        /// The timeout.
        timeout_ms: u64,
    },
    /// The record is not one valid WAL frame.
    #[error("the record is not one valid WAL frame")]
    BadRecord,
    /// Too many records are waiting for backlog room.
    #[error("too many appends are waiting")]
    Overloaded,
    /// A safekeeper address does not parse.
    #[error("bad safekeeper address {0:?}")]
    BadAddress(String),
    /// The driver has stopped.
    #[error("the proposer has shut down")]
    Shutdown,
}

enum Command {
    Elect {
        respond: oneshot::Sender<Result<(Term, Lsn), WalProposerError>>,
    },
    Append {
        frame: Bytes,
        respond: oneshot::Sender<Result<Lsn, WalProposerError>>,
    },
}

/// A running proposer for one timeline.
pub struct WalProposer {
    commands: mpsc::Sender<Command>,
    commit_lsn: watch::Receiver<Lsn>,
    commit_timeout_ms: u64,
    election_timeout_ms: u64,
    driver: tokio::task::JoinHandle<()>,
}

impl WalProposer {
    /// Connects (lazily) to the safekeepers and starts the driver. Does not campaign.
    pub fn start(config: WalProposerConfig) -> Result<WalProposer, WalProposerError> {
        let mut endpoints = Vec::with_capacity(config.safekeepers.len());
        for address in &config.safekeepers {
            endpoints.push(peer_endpoint(address, &config)?);
        }
        let mut proposer_config = config.proposer.clone();
        proposer_config.acceptor_count = endpoints.len();
        let timeline = pb::TimelineRef {
            tenant_id: config.tenant_id.to_string(),
            timeline_id: config.timeline_id.to_string(),
        };
        let (reply_tx, reply_rx) = mpsc::channel(config.peer_queue_max * endpoints.len().max(1));
        let request_timeout = Duration::from_millis(proposer_config.request_timeout_ms);
        let peers: Vec<mpsc::Sender<Envelope>> = endpoints
            .into_iter()
            .enumerate()
            .map(|(index, (service, local))| {
                let (tx, rx) = mpsc::channel(config.peer_queue_max);
                let peer = PeerConnection::new(
                    index,
                    service,
                    local,
                    timeline.clone(),
                    reply_tx.clone(),
                    request_timeout,
                );
                tokio::spawn(peer.run(rx));
                tx
            })
            .collect();
        let (commands_tx, commands_rx) = mpsc::channel(config.queued_appends_max.max(16));
        let (commit_tx, commit_rx) = watch::channel(config.timeline_start_lsn);
        let driver = Driver {
            proposer: Proposer::new(proposer_config, config.timeline_start_lsn),
            peers,
            electing: Vec::new(),
            waiters: BTreeMap::new(),
            queued: VecDeque::new(),
            queued_max: config.queued_appends_max,
            commit_tx,
            started: Instant::now(),
        };
        let handle = tokio::spawn(driver.run(commands_rx, reply_rx, Duration::from_millis(config.tick_interval_ms)));
        Ok(WalProposer {
            commands: commands_tx,
            commit_lsn: commit_rx,
            commit_timeout_ms: config.commit_timeout_ms,
            election_timeout_ms: config.election_timeout_ms,
            driver: handle,
        })
    }

    /// Campaigns until elected. Returns the term and the LSN where this term's WAL starts (everything before
    /// it is the history the new writer must build on).
    pub async fn elect(&self) -> Result<(Term, Lsn), WalProposerError> {
        let (respond, response) = oneshot::channel();
        self.commands
            .send(Command::Elect { respond })
            .await
            .map_err(|_| WalProposerError::Shutdown)?;
        let timeout = Duration::from_millis(self.election_timeout_ms);
        match tokio::time::timeout(timeout, response).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(WalProposerError::Shutdown),
            Err(_) => Err(WalProposerError::ElectionFailed("timed out".into())),
        }
    }

    /// Appends one record (a single WAL frame) and waits until it is committed. Returns its end LSN.
    pub async fn append(&self, frame: Bytes) -> Result<Lsn, WalProposerError> {
        let (respond, response) = oneshot::channel();
        self.commands
            .send(Command::Append { frame, respond })
            .await
            .map_err(|_| WalProposerError::Shutdown)?;
        let timeout_ms = self.commit_timeout_ms;
        match tokio::time::timeout(Duration::from_millis(timeout_ms), response).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(WalProposerError::Shutdown),
            Err(_) => Err(WalProposerError::CommitTimeout { timeout_ms }),
        }
    }

    /// Hands one record (a single WAL frame) to the driver at once, without waiting: records handed over one
    /// after another get consecutive LSNs in that order (the driver takes commands in order; concurrent
    /// [`WalProposer::append`] calls promise no order), so a caller that hands over in order knows each
    /// record's end LSN. The returned future resolves as `append` does: the record's end LSN once committed,
    /// or why not, within `commit_timeout_ms` counted from this call. Refused with
    /// [`WalProposerError::Overloaded`] when the command queue is full and [`WalProposerError::Shutdown`] when
    /// the driver stopped: then nothing was handed over. Callable from any thread; the future needs a tokio
    /// runtime with timers.
    pub fn submit(
        &self,
        frame: Bytes,
    ) -> Result<impl std::future::Future<Output = Result<Lsn, WalProposerError>> + Send + 'static, WalProposerError>
    {
        self.submit_within(frame, self.commit_timeout_ms)
    }

    /// [`WalProposer::submit`] with its own deadline, `timeout_ms` from this call: for a record handed over
    /// behind others of the same writer (the parts of one transaction in flight), whose commit can come only
    /// after theirs.
    pub fn submit_within(
        &self,
        frame: Bytes,
        timeout_ms: u64,
    ) -> Result<impl std::future::Future<Output = Result<Lsn, WalProposerError>> + Send + 'static, WalProposerError>
    {
        let (respond, response) = oneshot::channel();
        self.commands
            .try_send(Command::Append { frame, respond })
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => WalProposerError::Overloaded,
                mpsc::error::TrySendError::Closed(_) => WalProposerError::Shutdown,
            })?;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
        Ok(async move {
            match tokio::time::timeout_at(deadline, response).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(WalProposerError::Shutdown),
                Err(_) => Err(WalProposerError::CommitTimeout { timeout_ms }),
            }
        })
    }

    /// The highest LSN known committed.
    pub fn commit_lsn(&self) -> Lsn {
        *self.commit_lsn.borrow()
    }
}

impl Drop for WalProposer {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

struct Driver {
    proposer: Proposer,
    peers: Vec<mpsc::Sender<Envelope>>,
    electing: Vec<oneshot::Sender<Result<(Term, Lsn), WalProposerError>>>,
    /// Records proposed and not yet committed, by end LSN.
    waiters: BTreeMap<Lsn, oneshot::Sender<Result<Lsn, WalProposerError>>>,
    /// Records waiting for backlog room, oldest first.
    queued: VecDeque<(Bytes, oneshot::Sender<Result<Lsn, WalProposerError>>)>,
    queued_max: usize,
    commit_tx: watch::Sender<Lsn>,
    started: Instant,
}

impl Driver {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut replies: mpsc::Receiver<Incoming>,
        tick_interval: Duration,
    ) {
        let mut tick = tokio::time::interval(tick_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // A quiescent proposer's tick would do nothing: an idle branch sleeps until a command or a reply.
            let ticking = !self.proposer.is_quiescent();
            tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => self.on_command(command),
                    None => return,
                },
                Some(incoming) = replies.recv() => {
                    let out = match incoming {
                        Incoming::Reply(id, reply) => self.proposer.on_reply(id, reply, self.now_ms()),
                        Incoming::Lost(peer) => self.proposer.on_connection_lost(peer, self.now_ms()),
                    };
                    self.route(out);
                }
                _ = tick.tick(), if ticking => {
                    let out = self.proposer.tick(self.now_ms());
                    self.route(out);
                }
            }
            self.after_step();
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Elect { respond } => {
                match self.proposer.status() {
                    Status::Leader { term, epoch_start_lsn } => {
                        let _ = respond.send(Ok((term, epoch_start_lsn)));
                        return;
                    }
                    Status::Fenced { term } => {
                        let _ = respond.send(Err(WalProposerError::Fenced { term }));
                        return;
                    }
                    Status::Campaigning => {}
                    Status::Idle | Status::Failed(_) => {
                        let out = self.proposer.start_campaign(self.now_ms());
                        self.route(out);
                    }
                }
                self.electing.push(respond);
            }
            Command::Append { frame, respond } => {
                if !self.queued.is_empty() {
                    self.enqueue(frame, respond);
                } else {
                    self.propose(frame, respond);
                }
            }
        }
    }

    fn enqueue(&mut self, frame: Bytes, respond: oneshot::Sender<Result<Lsn, WalProposerError>>) {
        if self.queued.len() >= self.queued_max {
            let _ = respond.send(Err(WalProposerError::Overloaded));
        } else {
            self.queued.push_back((frame, respond));
        }
    }

    fn propose(&mut self, frame: Bytes, respond: oneshot::Sender<Result<Lsn, WalProposerError>>) {
        match self.proposer.propose(frame.clone()) {
            Ok((end_lsn, out)) => {
                self.waiters.insert(end_lsn, respond);
                self.route(out);
            }
            Err(ProposeError::Backpressure { .. }) => self.enqueue(frame, respond),
            Err(ProposeError::Fenced { term }) => {
                let _ = respond.send(Err(WalProposerError::Fenced { term }));
            }
            Err(ProposeError::NotLeader) => {
                let _ = respond.send(Err(WalProposerError::NotElected));
            }
            Err(ProposeError::BadFrame) => {
                let _ = respond.send(Err(WalProposerError::BadRecord));
            }
        }
    }

    fn route(&mut self, out: Vec<Envelope>) {
        for envelope in out {
            // A full queue means the connection is stuck: dropping is safe, the proposer resends on timeout.
            let _ = self.peers[envelope.to].try_send(envelope);
        }
    }

    fn after_step(&mut self) {
        let commit_lsn = self.proposer.commit_lsn();
        if *self.commit_tx.borrow() != commit_lsn {
            let _ = self.commit_tx.send(commit_lsn);
        }
        while let Some(entry) = self.waiters.first_entry() {
            if *entry.key() > commit_lsn {
                break;
            }
            let (end_lsn, respond) = entry.remove_entry();
            let _ = respond.send(Ok(end_lsn));
        }
        match self.proposer.status() {
            Status::Leader { term, epoch_start_lsn } => {
                for respond in self.electing.drain(..) {
                    let _ = respond.send(Ok((term, epoch_start_lsn)));
                }
                while let Some((frame, respond)) = self.queued.pop_front() {
                    match self.proposer.propose(frame.clone()) {
                        Err(ProposeError::Backpressure { .. }) => {
                            self.queued.push_front((frame, respond));
                            break;
                        }
                        other => {
                            self.queued.push_front((frame, respond));
                            let (frame, respond) = self.queued.pop_front().expect("pushed above");
                            match other {
                                Ok((end_lsn, out)) => {
                                    self.waiters.insert(end_lsn, respond);
                                    self.route(out);
                                }
                                Err(_) => self.propose(frame, respond),
                            }
                        }
                    }
                }
            }
            Status::Fenced { term } => {
                let error = WalProposerError::Fenced { term };
                self.fail_all(&error);
            }
            Status::Failed(reason) => {
                for respond in self.electing.drain(..) {
                    let _ = respond.send(Err(WalProposerError::ElectionFailed(reason.clone())));
                }
            }
            Status::Idle | Status::Campaigning => {}
        }
    }

    fn fail_all(&mut self, error: &WalProposerError) {
        for respond in self.electing.drain(..) {
            let _ = respond.send(Err(error.clone()));
        }
        for (_, respond) in std::mem::take(&mut self.waiters) {
            let _ = respond.send(Err(error.clone()));
        }
        for (_, respond) in self.queued.drain(..) {
            let _ = respond.send(Err(error.clone()));
        }
    }
}

/// How to reach the safekeeper at `address`: in this process if [`WalProposerConfig::local`] has it (its service,
/// and the peer for its append stream), else a lazily connected gRPC channel with keepalive.
fn peer_endpoint(
    address: &str,
    config: &WalProposerConfig,
) -> Result<(PeerService, Option<LocalPeer>), WalProposerError> {
    if let Some(local) = config.local.get(address) {
        return Ok((local.service(), Some(local)));
    }
    let uri = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    let endpoint = Endpoint::from_shared(uri)
        .map_err(|_| WalProposerError::BadAddress(address.to_owned()))?
        .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
        .http2_keep_alive_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
        .keep_alive_timeout(Duration::from_millis(KEEPALIVE_TIMEOUT_MS))
        .keep_alive_while_idle(true)
        .tcp_nodelay(true);
    Ok((transport::over_grpc(endpoint.connect_lazy()), None))
}

/// One safekeeper connection: unary calls in their own tasks, appends on one long-lived stream.
struct PeerConnection {
    /// Its index among the safekeepers.
    index: usize,
    client: SafekeeperClient<PeerService>,
    /// The safekeeper in this process, whose append stream is opened directly.
    local: Option<LocalPeer>,
    timeline: pb::TimelineRef,
    replies: mpsc::Sender<Incoming>,
    request_timeout: Duration,
    stream: Option<AppendStream>,
}

/// An append stream's acknowledgements, over gRPC or in process.
type AckStream = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::AppendResponse, tonic::Status>> + Send>>;

struct AppendStream {
    requests: mpsc::Sender<pb::AppendRequest>,
    /// Ids sent and not yet acknowledged, oldest first: a stream error is reported for the oldest.
    unacked: Arc<Mutex<VecDeque<u64>>>,
}

impl PeerConnection {
    fn new(
        index: usize,
        channel: PeerService,
        local: Option<LocalPeer>,
        timeline: pb::TimelineRef,
        replies: mpsc::Sender<Incoming>,
        request_timeout: Duration,
    ) -> PeerConnection {
        let client = SafekeeperClient::new(channel)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        PeerConnection {
            index,
            client,
            local,
            timeline,
            replies,
            request_timeout,
            stream: None,
        }
    }

    async fn run(mut self, mut requests: mpsc::Receiver<Envelope>) {
        // The append stream opens now, while the proposer campaigns, not on the first commit (an HTTP/2 stream
        // and a server task per safekeeper are off the first commit's path). If it fails, the first append
        // opens another.
        self.stream = Some(self.open_stream());
        while let Some(envelope) = requests.recv().await {
            match envelope.request {
                Request::Append(append) => {
                    let message = pb::AppendRequest {
                        timeline: Some(self.timeline.clone()),
                        request_id: envelope.id,
                        term: append.term,
                        begin_lsn: append.begin_lsn.0,
                        data: append.data,
                        commit_lsn: append.commit_lsn.0,
                    };
                    self.send_append(envelope.id, message);
                }
                request => {
                    let mut client = self.client.clone();
                    let timeline = self.timeline.clone();
                    let replies = self.replies.clone();
                    let timeout = self.request_timeout;
                    tokio::spawn(async move {
                        let reply = match tokio::time::timeout(timeout, unary(&mut client, timeline, request)).await {
                            Ok(reply) => reply,
                            // No answer: the proposer's own timeout resends.
                            Err(_) => return,
                        };
                        if let Some(reply) = reply {
                            let _ = replies.send(Incoming::Reply(envelope.id, reply)).await;
                        }
                    });
                }
            }
        }
    }

    fn send_append(&mut self, id: u64, message: pb::AppendRequest) {
        let alive = self.stream.as_ref().is_some_and(|s| !s.requests.is_closed());
        if !alive {
            self.stream = Some(self.open_stream());
        }
        let stream = self.stream.as_ref().expect("opened above");
        stream.unacked.lock().push_back(id);
        if stream.requests.try_send(message).is_err() {
            // Full or closed: the append is lost; the proposer resends after its timeout.
            stream.unacked.lock().retain(|&x| x != id);
        }
    }

    fn open_stream(&self) -> AppendStream {
        let (requests, requests_rx) = mpsc::channel::<pb::AppendRequest>(1024);
        let unacked = Arc::new(Mutex::new(VecDeque::new()));
        let mut client = self.client.clone();
        let local = self.local.clone();
        let replies = self.replies.clone();
        let pending = Arc::clone(&unacked);
        let index = self.index;
        tokio::spawn(async move {
            let opened: Result<AckStream, tonic::Status> = match local {
                Some(local) => local
                    .open_append(requests_rx)
                    .map(|acks| Box::pin(ReceiverStream::new(acks)) as AckStream),
                None => client
                    .append(ReceiverStream::new(requests_rx))
                    .await
                    .map(|response| Box::pin(response.into_inner()) as AckStream),
            };
            let mut inbound = match opened {
                Ok(inbound) => inbound,
                Err(status) => {
                    report_stream_error(&pending, &replies, &status).await;
                    let _ = replies.send(Incoming::Lost(index)).await;
                    return;
                }
            };
            loop {
                match inbound.next().await.transpose() {
                    Ok(Some(ack)) => {
                        pending.lock().retain(|&x| x != ack.request_id);
                        let reply = Reply::Append(AppendResponse {
                            term: ack.term,
                            flush_lsn: Lsn(ack.flush_lsn),
                            commit_lsn: Lsn(ack.commit_lsn),
                        });
                        if replies.send(Incoming::Reply(ack.request_id, reply)).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(status) => {
                        report_stream_error(&pending, &replies, &status).await;
                        break;
                    }
                }
            }
            // Whatever ended it (the safekeeper went away, refused, or was rebuilt), what it acknowledged on
            // this stream is no longer vouched for.
            let _ = replies.send(Incoming::Lost(index)).await;
        });
        AppendStream { requests, unacked }
    }
}

/// A stream that failed reports its status against the oldest unacknowledged append (the one the safekeeper
/// refused; later ones were never processed and will time out and be resent).
async fn report_stream_error(pending: &Mutex<VecDeque<u64>>, replies: &mpsc::Sender<Incoming>, status: &tonic::Status) {
    let oldest = pending.lock().pop_front();
    if let Some(id) = oldest {
        let _ = replies
            .send(Incoming::Reply(id, Reply::Refused(refusal_from_status(status))))
            .await;
    }
}

/// Maps a safekeeper's error status back to the protocol's refusal (see `safekeeper.proto`).
pub fn refusal_from_status(status: &tonic::Status) -> Refusal {
    let metadata_u64 = |key: &str| wire::metadata_u64(status, key);
    match status.code() {
        tonic::Code::FailedPrecondition => {
            if let Some(current) = metadata_u64(wire::CURRENT_TERM_METADATA) {
                return Refusal::StaleTerm { current };
            }
            if status.metadata().get(wire::NOT_ELECTED_METADATA).is_some() {
                return Refusal::NotElected;
            }
            Refusal::Other(status.message().to_string())
        }
        tonic::Code::OutOfRange => match metadata_u64(wire::WRITE_LSN_METADATA) {
            Some(write_lsn) => Refusal::Gap {
                write_lsn: Lsn(write_lsn),
            },
            None => Refusal::Other(status.message().to_string()),
        },
        code => Refusal::Other(format!("{code:?}: {}", status.message())),
    }
}

/// One unary call; `None` when the connection failed (the proposer resends after its timeout).
async fn unary(
    client: &mut SafekeeperClient<PeerService>,
    timeline: pb::TimelineRef,
    request: Request,
) -> Option<Reply> {
    let result = match request {
        Request::GetState => client
            .get_state(timeline)
            .await
            .and_then(|r| wire::state_from_proto(&r.into_inner()).map(Reply::State)),
        Request::Vote(vote) => client
            .vote(pb::VoteRequest {
                timeline: Some(timeline),
                term: vote.term,
            })
            .await
            .and_then(|r| {
                let r = r.into_inner();
                let state = wire::state_from_proto(&r.state.unwrap_or_default())?;
                Ok(Reply::Vote(VoteResponse {
                    granted: r.granted,
                    state,
                }))
            }),
        Request::Elected(elected) => client
            .elected(pb::ElectedRequest {
                timeline: Some(timeline),
                term: elected.term,
                history: wire::history_to_proto(&elected.history),
                start_streaming_at: elected.start_streaming_at.0,
            })
            .await
            .map(|_| Reply::Elected),
        Request::ReadWal {
            term,
            start_lsn,
            max_bytes,
        } => client
            .read_wal(pb::ReadWalRequest {
                timeline: Some(timeline),
                term,
                start_lsn: start_lsn.0,
                max_bytes: max_bytes as u64,
            })
            .await
            .map(|r| {
                let chunk = r.into_inner();
                Reply::Wal {
                    start_lsn: Lsn(chunk.start_lsn),
                    data: chunk.data,
                }
            }),
        Request::Append(_) => unreachable!("appends travel on the stream"),
    };
    match result {
        Ok(reply) => Some(reply),
        Err(status) if status.code() == tonic::Code::Unavailable || status.code() == tonic::Code::Unknown => None,
        Err(status) => Some(Reply::Refused(refusal_from_status(&status))),
    }
}
