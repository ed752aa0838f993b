//! The `Append` stream, the group-commit point (see the [module above](super) for the contract): batches of
//! appends taken as they arrive, written through [`dispatch::apply`] and made durable by one sync each, read
//! ahead while the previous batch is written, and counted in [`SafekeeperNode::appends_pending`].

use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt};
use proto::safekeeper as pb;
use safekeeper_core::dispatch::{self, Served};
use safekeeper_core::proposer::Request as ProtocolRequest;
use safekeeper_core::protocol::{AcceptorError, AppendRequest, AppendResponse};
use tokio::sync::mpsc;
use tonic::Status;

use super::{
    shutdown_signalled, status_from_node, timeline_deleted, unexpected_reply, APPEND_BATCH_BYTES_MAX,
    APPEND_BATCH_MESSAGES_MAX,
};
use crate::convert::{self, status_from_acceptor, TimelineKey};
use crate::node::{NodeError, SafekeeperNode, Timeline};

type AppendSender = mpsc::Sender<Result<pb::AppendResponse, Status>>;

/// What an append stream reads its requests from: a gRPC stream ([`tonic::Streaming`]), or a proposer in this
/// process handing its messages over as they are.
pub(super) trait AppendRequests:
    Stream<Item = Result<pb::AppendRequest, Status>> + Unpin + Send + 'static
{
}

impl<S: Stream<Item = Result<pb::AppendRequest, Status>> + Unpin + Send + 'static> AppendRequests for S {}

/// What writing one batch of appends gave.
struct BatchOutcome {
    /// Request ids of the appends written (and covered by `ack` if it is `Ok`).
    written: Vec<u64>,
    /// The sync after them (`None` if none was written).
    ack: Option<Result<AppendResponse, AcceptorError>>,
    /// The append that was refused, which ends the stream.
    refused: Option<AcceptorError>,
}

/// Appends taken from one stream and not yet written, counted in the node's gauge
/// ([`SafekeeperNode::appends_pending`]) until they are written or the stream ends.
struct PendingAppends<'a> {
    messages: Vec<pb::AppendRequest>,
    bytes: usize,
    /// How many of this stream's appends the gauge counts (`messages` and the batch being written).
    counted: usize,
    gauge: &'a std::sync::atomic::AtomicUsize,
}

impl<'a> PendingAppends<'a> {
    fn new(gauge: &'a std::sync::atomic::AtomicUsize) -> PendingAppends<'a> {
        PendingAppends {
            messages: Vec::new(),
            bytes: 0,
            counted: 0,
            gauge,
        }
    }

    /// Whether a batch may take another message ([`APPEND_BATCH_MESSAGES_MAX`], [`APPEND_BATCH_BYTES_MAX`]).
    fn has_room(&self) -> bool {
        self.messages.len() < APPEND_BATCH_MESSAGES_MAX && self.bytes < APPEND_BATCH_BYTES_MAX
    }

    fn push(&mut self, message: pb::AppendRequest) {
        self.bytes += message.data.len();
        self.messages.push(message);
        self.counted += 1;
        self.gauge.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The messages gathered so far, as the next batch (still counted until [`PendingAppends::written`]).
    fn take_batch(&mut self) -> Vec<pb::AppendRequest> {
        self.bytes = 0;
        std::mem::take(&mut self.messages)
    }

    /// A batch of `count` messages was written (or refused): no longer pending.
    fn written(&mut self, count: usize) {
        assert!(
            count <= self.counted,
            "{count} appends written, {} counted",
            self.counted
        );
        self.counted -= count;
        self.gauge.fetch_sub(count, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for PendingAppends<'_> {
    fn drop(&mut self) {
        self.gauge.fetch_sub(self.counted, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Takes whatever messages have already arrived on the stream, without waiting, while the batch has room.
/// Returns whether the stream ended (by the client or with an error).
fn gather_arrived<S: AppendRequests>(inbound: &mut S, pending: &mut PendingAppends<'_>) -> bool {
    while pending.has_room() {
        match inbound.next().now_or_never() {
            Some(Some(Ok(message))) => pending.push(message),
            Some(Some(Err(status))) => {
                tracing::debug!(%status, "append stream failed on the client side");
                return true;
            }
            Some(None) => return true,
            None => return false,
        }
    }
    false
}

/// Serves one append stream until the client ends it, a request is refused, or the node shuts down.
///
/// While a batch is written (waiting for the acceptor's lock, then writing and syncing), the messages that
/// arrive are read ahead into the next batch, up to the batch limits; so the next batch is everything that
/// arrived meanwhile, and [`SafekeeperNode::appends_pending`] counts what the server has received.
pub(super) async fn append_stream<S: AppendRequests>(node: Arc<SafekeeperNode>, mut inbound: S, tx: AppendSender) {
    let mut shutdown = node.subscribe_shutdown();
    let mut timeline: Option<Arc<Timeline>> = None;
    let mut pending = PendingAppends::new(node.appends_pending_gauge());
    let mut inbound_ended = false;
    loop {
        if pending.messages.is_empty() {
            if inbound_ended {
                return;
            }
            let first = tokio::select! {
                message = inbound.next() => message,
                () = shutdown_signalled(&mut shutdown) => {
                    let _ = tx.send(Err(status_from_node(&NodeError::ShuttingDown))).await;
                    return;
                }
                () = timeline_deleted(timeline.as_ref()) => {
                    let key = timeline.as_ref().map(|t| t.key());
                    if let Some(key) = key {
                        let _ = tx.send(Err(status_from_node(&NodeError::Deleted { key }))).await;
                    }
                    return;
                }
                () = tx.closed() => return,
            };
            match first {
                None => return,
                Some(Err(status)) => {
                    tracing::debug!(%status, "append stream failed on the client side");
                    return;
                }
                Some(Ok(message)) => pending.push(message),
            }
        }
        // Group commit: take whatever else has already arrived, without waiting.
        if !inbound_ended {
            inbound_ended = gather_arrived(&mut inbound, &mut pending);
        }
        let batch = pending.take_batch();
        let batch_len = batch.len();
        let (appends, refusal) = resolve_batch(&node, &mut timeline, batch);
        if let (Some(target), false) = (&timeline, appends.is_empty()) {
            let write = target.run(move |acceptor| write_batch(acceptor, appends));
            tokio::pin!(write);
            // Read ahead while the batch is written: what arrives meanwhile is the next batch.
            let outcome = loop {
                tokio::select! {
                    biased;
                    outcome = &mut write => break outcome,
                    message = inbound.next(), if !inbound_ended && pending.has_room() => match message {
                        Some(Ok(message)) => pending.push(message),
                        Some(Err(status)) => {
                            tracing::debug!(%status, "append stream failed on the client side");
                            inbound_ended = true;
                        }
                        None => inbound_ended = true,
                    },
                }
            };
            pending.written(batch_len);
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(error) => {
                    let _ = tx.send(Err(status_from_node(&error))).await;
                    return;
                }
            };
            match outcome.ack {
                Some(Ok(ack)) => {
                    tracing::trace!(appends = outcome.written.len(), flush_lsn = %ack.flush_lsn, "group commit");
                    for request_id in outcome.written {
                        let response = convert::append_response_to_proto(request_id, &ack);
                        if tx.send(Ok(response)).await.is_err() {
                            return;
                        }
                    }
                }
                Some(Err(error)) => {
                    let _ = tx.send(Err(status_from_acceptor(&error))).await;
                    return;
                }
                None => {}
            }
            if let Some(error) = outcome.refused {
                tracing::debug!(%error, "append refused; ending the stream");
                let _ = tx.send(Err(status_from_acceptor(&error))).await;
                return;
            }
        } else {
            pending.written(batch_len);
        }
        if let Some(status) = refusal {
            let _ = tx.send(Err(status)).await;
            return;
        }
    }
}

/// Checks the timeline each message names (the first must name one; later ones may omit it but not change
/// it). Returns the appends up to the first bad message, and that message's status.
fn resolve_batch(
    node: &SafekeeperNode,
    timeline: &mut Option<Arc<Timeline>>,
    batch: Vec<pb::AppendRequest>,
) -> (Vec<(u64, AppendRequest)>, Option<Status>) {
    let mut appends = Vec::with_capacity(batch.len());
    for message in batch {
        match (&message.timeline, &*timeline) {
            (None, None) => {
                return (
                    appends,
                    Some(Status::invalid_argument(
                        "the first append of a stream must name its timeline",
                    )),
                )
            }
            (None, Some(_)) => {}
            (Some(named), current) => {
                let key: TimelineKey = match convert::timeline_key(Some(named)) {
                    Ok(key) => key,
                    Err(status) => return (appends, Some(status)),
                };
                match current {
                    Some(current) if current.key() == key => {}
                    Some(current) => {
                        return (
                            appends,
                            Some(Status::invalid_argument(format!(
                                "an append stream serves one timeline: this one is {}/{}, not {}/{}",
                                current.key().0,
                                current.key().1,
                                key.0,
                                key.1
                            ))),
                        )
                    }
                    None => match node.timeline(key) {
                        Ok(found) => *timeline = Some(found),
                        Err(error) => return (appends, Some(status_from_node(&error))),
                    },
                }
            }
        }
        let request_id = message.request_id;
        appends.push((request_id, convert::append_from_proto(message)));
    }
    (appends, None)
}

/// Writes the appends in order through [`dispatch::apply`] until one is refused, then syncs once if anything
/// was written (the group commit: one fdatasync acknowledges the whole batch).
fn write_batch(acceptor: &mut crate::node::FileAcceptor, appends: Vec<(u64, AppendRequest)>) -> BatchOutcome {
    let mut written = Vec::with_capacity(appends.len());
    let mut refused = None;
    for (request_id, append) in appends {
        match dispatch::apply(acceptor, ProtocolRequest::Append(append)) {
            Ok(Served::NeedsSync) => written.push(request_id),
            Ok(Served::Reply(reply)) => unexpected_reply("Append", &reply),
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    let ack = (!written.is_empty()).then(|| acceptor.sync());
    BatchOutcome { written, ack, refused }
}
