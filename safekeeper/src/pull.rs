//! Replica repair (`PullTimeline`): makes this safekeeper's copy of a timeline a faithful replica of the most
//! advanced of its peers, so a timeline whose creation failed here, whose disk was lost, or which fell behind
//! the WAL its peers retain, is served again by three safekeepers.
//!
//! # What is copied, and why from the most advanced of *all* the other safekeepers
//!
//! The request names every other safekeeper of the timeline, and every one must answer. A committed record is
//! durable on a majority; if this node's copy is lost, the majority may have been this node and one other, so
//! the record may be on a single peer. Of a set of acceptors that forms a majority with or without this node,
//! the one at the highest `(last log term, flush LSN)` holds every committed record (Raft's "at least as
//! up-to-date" argument, the same one donor selection rests on). The replica copies that peer's WAL from its
//! oldest retained LSN to its flush LSN, its term history up to the flush LSN and its commit LSN; its
//! promised term is the highest any of them (and this node, if it knows the timeline) promised, so it never
//! grants a vote one of them refused.
//!
//! A timeline that exists here is replaced only if it is behind that peer in the same order; then every
//! record it holds is either in the copy (the same term's WAL at the same LSNs) or an uncommitted tail that the
//! next election would truncate anyway, and its commit LSN is within the copy (checked again under the
//! timeline's lock when the replica is installed). One at least as far is left alone: success, nothing
//! copied, so the call is idempotent.
//!
//! A copy that was lost may have promised a term to a campaign still counting that vote; such a campaign ends
//! within the proposers' election timeout, so a node rebuilds a timeline it does not know only after its
//! quiet period (`node::PULL_QUIET_PERIOD_MS` since it opened).
//!
//! # Consistency of the copy
//!
//! The WAL is read with `CopyWal` from the chosen peer's state taken first. The peer may truncate its WAL
//! meanwhile (a new term's election) and rewrite it: after the copy its state is read again, and the copy is
//! kept only if its term history below the copied flush LSN is unchanged and its WAL still reaches it. A
//! truncation below the copied end always changes that part of the history (the new term enters it, and
//! terms only grow), so unchanged history means the bytes copied are the bytes of the first state.
//!
//! # Durability and crashes
//!
//! The replica is written into a staging directory (WAL segments fdatasynced, then the control file,
//! atomically) and then installed by renames under the node's creation lock (see [`crate::node`]): a crash
//! leaves either nothing served (the staging directory is removed at open) or the complete replica.
//!
//! # Bounds
//!
//! At most [`PULL_SOURCES_MAX`] sources; each state query and each WAL chunk must arrive within
//! [`PULL_RPC_TIMEOUT_MS`]; the whole pull within [`PULL_DURATION_MAX_MS`]; one chunk (about 1 MiB, or one
//! larger frame) in memory at a time; one pull per timeline at a time. The pull runs in its own task: a caller
//! that goes away does not cut it short half way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cambium_types::Lsn;
use proto::safekeeper as pb;
use proto::safekeeper::safekeeper_client::SafekeeperClient;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::convert::{self, TimelineKey};
use crate::filestore::ReplicaWriter;
use crate::node::{Installed, LocalCopy, NodeError, SafekeeperNode};
use crate::service::{status_from_node, MESSAGE_BYTES_MAX};
use safekeeper_core::protocol::{AcceptorState, ControlState, Term};

/// Most sources a pull names.
pub const PULL_SOURCES_MAX: usize = 8;
/// Longest source address accepted.
pub const SOURCE_ADDRESS_BYTES_MAX: usize = 256;
/// Each request to a source (a state, the start of the copy, each WAL chunk) must be answered within this.
pub const PULL_RPC_TIMEOUT_MS: u64 = 10_000;
/// Connecting to a source gives up after this long.
pub const PULL_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// A whole pull gives up after this long.
pub const PULL_DURATION_MAX_MS: u64 = 60 * 60 * 1000;

/// Why a pull failed. Each maps to a precise gRPC status ([`status_from_pull`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PullError {
    /// The request is malformed: no source, too many, a duplicate, an address that does not parse
    /// (INVALID_ARGUMENT).
    #[error("bad sources: {0}")]
    BadSources(String),
    /// A source could not be reached, or did not answer in time, or failed (UNAVAILABLE).
    #[error("source {address} is unavailable: {reason}")]
    Unavailable {
        /// The source.
        address: String,
        /// What happened.
        reason: String,
    },
    /// A source does not have the timeline (NOT_FOUND).
    #[error("source {address} has no timeline {}/{}", .key.0, .key.1)]
    SourceLacksTimeline {
        /// The source.
        address: String,
        /// The timeline.
        key: TimelineKey,
    },
    /// The sources (or this node) disagree about the timeline, or a source's state or answers contradict
    /// themselves (FAILED_PRECONDITION).
    #[error("inconsistent sources: {0}")]
    Inconsistent(String),
    /// The source's WAL changed during the copy (truncated, or removed below the copy's start): retry
    /// (ABORTED).
    #[error("the source's WAL changed during the copy ({0}); retry")]
    Changed(String),
    /// Copied WAL that is not whole valid frames (DATA_LOSS).
    #[error("WAL copied from {address} is bad at {lsn}: {reason}")]
    BadWal {
        /// The source.
        address: String,
        /// Where.
        lsn: Lsn,
        /// What failed.
        reason: String,
    },
    /// The pull took longer than [`PULL_DURATION_MAX_MS`] (DEADLINE_EXCEEDED).
    #[error("the pull took longer than {PULL_DURATION_MAX_MS} ms")]
    TooLong,
    /// This node refused or failed (its own status: `ABORTED` for a pull already running, `UNAVAILABLE` in
    /// the quiet period, `INTERNAL` for storage).
    #[error(transparent)]
    Node(#[from] NodeError),
}

impl From<safekeeper_core::protocol::StoreError> for PullError {
    fn from(error: safekeeper_core::protocol::StoreError) -> Self {
        PullError::Node(NodeError::Acceptor(error.into()))
    }
}

/// The status reporting `error` (the contract in `safekeeper.proto`).
pub fn status_from_pull(error: &PullError) -> Status {
    match error {
        PullError::BadSources(_) => Status::invalid_argument(error.to_string()),
        PullError::Unavailable { .. } => Status::unavailable(error.to_string()),
        PullError::SourceLacksTimeline { .. } => Status::not_found(error.to_string()),
        PullError::Inconsistent(_) => Status::failed_precondition(error.to_string()),
        PullError::Changed(_) => Status::aborted(error.to_string()),
        PullError::BadWal { .. } => Status::data_loss(error.to_string()),
        PullError::TooLong => Status::deadline_exceeded(error.to_string()),
        PullError::Node(error) => status_from_node(error),
    }
}

/// What a pull did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullOutcome {
    /// The timeline's state here afterwards.
    pub state: AcceptorState,
    /// Whether WAL was copied and installed.
    pub copied: bool,
    /// The source copied from, if any.
    pub source: Option<String>,
    /// WAL bytes copied.
    pub copied_bytes: u64,
}

/// One source: its address as given and a client.
struct Source {
    address: String,
    client: SafekeeperClient<Channel>,
}

/// Parses the source addresses (`host:port` or a URI); `BadSources` for none, too many, a duplicate, or one that
/// does not parse. Connects lazily.
fn sources_from(addresses: &[String]) -> Result<Vec<Source>, PullError> {
    if addresses.is_empty() {
        return Err(PullError::BadSources("no source named".into()));
    }
    if addresses.len() > PULL_SOURCES_MAX {
        return Err(PullError::BadSources(format!(
            "{} sources, more than {PULL_SOURCES_MAX}",
            addresses.len()
        )));
    }
    let mut sources: Vec<Source> = Vec::with_capacity(addresses.len());
    for address in addresses {
        let shown: String = address.chars().take(64).collect();
        if address.is_empty() || address.len() > SOURCE_ADDRESS_BYTES_MAX {
            return Err(PullError::BadSources(format!(
                "source address {shown:?} is empty or too long"
            )));
        }
        if sources.iter().any(|s| s.address == *address) {
            return Err(PullError::BadSources(format!("source {shown:?} is named twice")));
        }
        let uri = if address.contains("://") {
            address.clone()
        } else {
            format!("http://{address}")
        };
        let endpoint = Endpoint::from_shared(uri)
            .ok()
            .filter(|endpoint| endpoint.uri().host().is_some() && endpoint.uri().port_u16().is_some())
            .ok_or_else(|| PullError::BadSources(format!("source address {shown:?} is not host:port")))?
            .connect_timeout(Duration::from_millis(PULL_CONNECT_TIMEOUT_MS))
            .tcp_nodelay(true);
        let client = SafekeeperClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        sources.push(Source {
            address: address.clone(),
            client,
        });
    }
    Ok(sources)
}

/// The error for a status a source answered with.
fn from_source_status(address: &str, key: TimelineKey, status: &Status) -> PullError {
    match status.code() {
        Code::NotFound => PullError::SourceLacksTimeline {
            address: address.to_string(),
            key,
        },
        Code::InvalidArgument | Code::Unimplemented | Code::FailedPrecondition => PullError::Inconsistent(format!(
            "source {address} refused: {:?}: {}",
            status.code(),
            status.message()
        )),
        _ => PullError::Unavailable {
            address: address.to_string(),
            reason: format!("{:?}: {}", status.code(), status.message()),
        },
    }
}

/// The state of `key` on `source`, validated (history well formed, LSNs ordered).
async fn source_state(source: &Source, key: TimelineKey) -> Result<AcceptorState, PullError> {
    let mut client = source.client.clone();
    let timeout = Duration::from_millis(PULL_RPC_TIMEOUT_MS);
    let answer = tokio::time::timeout(timeout, client.get_state(convert::timeline_ref(key)))
        .await
        .map_err(|_| PullError::Unavailable {
            address: source.address.clone(),
            reason: format!("no state within {PULL_RPC_TIMEOUT_MS} ms"),
        })?
        .map_err(|status| from_source_status(&source.address, key, &status))?;
    let state = convert::state_from_proto(&answer.into_inner())
        .map_err(|status| PullError::Inconsistent(format!("source {}: {}", source.address, status.message())))?;
    let ordered = state.timeline_start_lsn <= state.oldest_lsn
        && state.oldest_lsn <= state.commit_lsn
        && state.commit_lsn <= state.flush_lsn
        && state.flush_lsn.0 <= u64::MAX / 2
        && state.history.last_term() <= state.term;
    if !ordered {
        return Err(PullError::Inconsistent(format!(
            "source {} reports an impossible state: start {}, oldest {}, commit {}, flush {}, term {}, history ending in term {}",
            source.address,
            state.timeline_start_lsn,
            state.oldest_lsn,
            state.commit_lsn,
            state.flush_lsn,
            state.term,
            state.history.last_term()
        )));
    }
    Ok(state)
}

/// Runs `f` on a blocking thread.
async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Result<R, PullError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| PullError::Node(NodeError::ShuttingDown))
}

/// Pulls `key` from `addresses` into `node` (see the module doc). Runs in a task of its own.
pub async fn pull_timeline(
    node: Arc<SafekeeperNode>,
    key: TimelineKey,
    addresses: Vec<String>,
) -> Result<PullOutcome, PullError> {
    let sources = sources_from(&addresses)?;
    tokio::spawn(async move {
        let deadline = Duration::from_millis(PULL_DURATION_MAX_MS);
        match tokio::time::timeout(deadline, pull(&node, key, &sources)).await {
            Ok(result) => result,
            Err(_) => {
                let cleanup = Arc::clone(&node);
                let _ = blocking(move || cleanup.discard_staging_blocking(key)).await;
                Err(PullError::TooLong)
            }
        }
    })
    .await
    .map_err(|_| PullError::Node(NodeError::ShuttingDown))?
}

async fn pull(node: &Arc<SafekeeperNode>, key: TimelineKey, sources: &[Source]) -> Result<PullOutcome, PullError> {
    let started = Instant::now();
    let _exclusive = node.begin_pull(key)?;
    let local = {
        let node = Arc::clone(node);
        blocking(move || node.local_for_pull(key)).await??
    };
    let states = futures::future::join_all(sources.iter().map(|source| source_state(source, key))).await;
    let states: Vec<AcceptorState> = states.into_iter().collect::<Result<_, _>>()?;
    let start_lsn = states[0].timeline_start_lsn;
    let local_start = match &local {
        LocalCopy::Ready(state) => Some(state.timeline_start_lsn),
        LocalCopy::Missing | LocalCopy::Broken { .. } => None,
    };
    if let Some(other) = states
        .iter()
        .map(|s| s.timeline_start_lsn)
        .chain(local_start)
        .find(|&lsn| lsn != start_lsn)
    {
        return Err(PullError::Inconsistent(format!(
            "the timeline starts at {start_lsn} on one safekeeper and at {other} on another"
        )));
    }
    // The most advanced source; the first named on ties.
    let best = (0..states.len())
        .rev()
        .max_by_key(|&i| states[i].log_position())
        .expect("at least one source");
    let source = &sources[best];
    let copy = &states[best];
    if let LocalCopy::Ready(here) = &local {
        if here.log_position() >= copy.log_position() {
            tracing::info!(
                tenant = %key.0,
                timeline = %key.1,
                flush_lsn = %here.flush_lsn,
                "pull: the timeline here is at least as far as every source; nothing to copy"
            );
            return Ok(PullOutcome {
                state: here.clone(),
                copied: false,
                source: None,
                copied_bytes: 0,
            });
        }
    }
    let local_term = match &local {
        LocalCopy::Ready(state) => state.term,
        LocalCopy::Broken { term } => term.unwrap_or(0),
        LocalCopy::Missing => 0,
    };
    let term: Term = states.iter().map(|s| s.term).max().unwrap_or(0).max(local_term);
    tracing::info!(
        tenant = %key.0,
        timeline = %key.1,
        source = %source.address,
        oldest_lsn = %copy.oldest_lsn,
        flush_lsn = %copy.flush_lsn,
        commit_lsn = %copy.commit_lsn,
        term,
        local = ?local,
        "pull: copying the timeline from the most advanced source"
    );
    let staging = {
        let node = Arc::clone(node);
        blocking(move || node.prepare_staging_blocking(key)).await??
    };
    let result = copy_and_install(node, key, source, copy, term, staging).await;
    if result.is_err() {
        let node = Arc::clone(node);
        blocking(move || node.discard_staging_blocking(key)).await?;
    }
    let (state, copied_bytes) = result?;
    let Some(copied_bytes) = copied_bytes else {
        return Ok(PullOutcome {
            state,
            copied: false,
            source: None,
            copied_bytes: 0,
        });
    };
    tracing::info!(
        tenant = %key.0,
        timeline = %key.1,
        source = %source.address,
        copied_bytes,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "pull: replica installed"
    );
    Ok(PullOutcome {
        state,
        copied: true,
        source: Some(source.address.clone()),
        copied_bytes,
    })
}

/// Copies the WAL, checks the source did not change under the copy, writes the control file and installs.
/// Returns the state served afterwards and the bytes copied (`None` if the timeline here caught up meanwhile and
/// the replica was dropped).
async fn copy_and_install(
    node: &Arc<SafekeeperNode>,
    key: TimelineKey,
    source: &Source,
    copy: &AcceptorState,
    term: Term,
    staging: std::path::PathBuf,
) -> Result<(AcceptorState, Option<u64>), PullError> {
    let config = *node.store_config();
    let oldest_lsn = copy.oldest_lsn;
    let writer = blocking(move || ReplicaWriter::create(&staging, oldest_lsn, &config)).await??;
    let (writer, copied_bytes) = copy_wal(source, key, copy.oldest_lsn, copy.flush_lsn, writer).await?;
    let after = source_state(source, key).await?;
    let below = |state: &AcceptorState| -> Vec<_> {
        let end = copy.flush_lsn;
        state.history.0.iter().copied().filter(|s| s.lsn < end).collect()
    };
    if after.timeline_start_lsn != copy.timeline_start_lsn
        || after.flush_lsn < copy.flush_lsn
        || below(&after) != below(copy)
    {
        return Err(PullError::Changed(format!(
            "it ended at {} in term {} when the copy began, and at {} in term {} after it",
            copy.flush_lsn,
            copy.last_log_term(),
            after.flush_lsn,
            after.last_log_term()
        )));
    }
    let control = ControlState {
        term: term.max(after.term),
        history: copy.history.clone(),
        commit_lsn: copy.commit_lsn,
        timeline_start_lsn: copy.timeline_start_lsn,
        remote_consistent_lsn: copy.remote_consistent_lsn.max(copy.timeline_start_lsn),
    };
    blocking(move || writer.finish(&control)).await??;
    let position = copy.log_position();
    let installed = {
        let node = Arc::clone(node);
        blocking(move || node.install_pull_blocking(key, position)).await??
    };
    let timeline = match installed {
        Installed::Replaced(timeline) => timeline,
        Installed::NotNeeded(timeline) => {
            let state = timeline.state().await?;
            return Ok((state, None));
        }
    };
    let state = timeline.state().await?;
    Ok((state, Some(copied_bytes)))
}

/// Streams `[start_lsn, end_lsn)` of the source's durable WAL into `writer`, checking every chunk (contiguous,
/// whole frames with good crcs, within the range). Returns the writer and the bytes copied.
async fn copy_wal(
    source: &Source,
    key: TimelineKey,
    start_lsn: Lsn,
    end_lsn: Lsn,
    mut writer: ReplicaWriter,
) -> Result<(ReplicaWriter, u64), PullError> {
    assert_eq!(
        writer.write_lsn(),
        start_lsn,
        "the replica's WAL starts where the copy does"
    );
    if start_lsn == end_lsn {
        return Ok((writer, 0));
    }
    let timeout = Duration::from_millis(PULL_RPC_TIMEOUT_MS);
    let address = source.address.as_str();
    let unavailable = |reason: String| PullError::Unavailable {
        address: address.to_string(),
        reason,
    };
    let on_status = |status: Status| match status.code() {
        // The WAL asked for is gone (removed below a new horizon) or shorter (truncated): a retry starts over.
        Code::OutOfRange => PullError::Changed(status.message().to_string()),
        _ => from_source_status(address, key, &status),
    };
    let request = pb::CopyWalRequest {
        timeline: Some(convert::timeline_ref(key)),
        start_lsn: start_lsn.0,
        end_lsn: end_lsn.0,
    };
    let mut client = source.client.clone();
    let mut chunks = tokio::time::timeout(timeout, client.copy_wal(request))
        .await
        .map_err(|_| unavailable(format!("CopyWal not answered within {PULL_RPC_TIMEOUT_MS} ms")))?
        .map_err(on_status)?
        .into_inner();
    let mut copied_bytes = 0u64;
    while writer.write_lsn() < end_lsn {
        let at = writer.write_lsn();
        let chunk = tokio::time::timeout(timeout, chunks.message())
            .await
            .map_err(|_| unavailable(format!("no WAL within {PULL_RPC_TIMEOUT_MS} ms at {at}")))?
            .map_err(on_status)?
            .ok_or_else(|| PullError::Changed(format!("the copy stream ended at {at}, before {end_lsn}")))?;
        let chunk_end = Lsn(chunk.start_lsn.saturating_add(chunk.data.len() as u64));
        if chunk.start_lsn != at.0 || chunk.data.is_empty() || chunk_end > end_lsn {
            return Err(PullError::Inconsistent(format!(
                "source {address} sent {} bytes at {} when {at}..{end_lsn} was asked for",
                chunk.data.len(),
                Lsn(chunk.start_lsn)
            )));
        }
        let (valid_bytes, error) = cambium_types::wal::scan_frames(&chunk.data, at);
        if let Some(error) = error {
            return Err(PullError::BadWal {
                address: address.to_string(),
                lsn: Lsn(at.0 + valid_bytes as u64),
                reason: error.to_string(),
            });
        }
        let data = chunk.data;
        copied_bytes += data.len() as u64;
        writer = blocking(move || writer.append(&data).map(|()| writer)).await??;
    }
    Ok((writer, copied_bytes))
}
