//! The WAL receiver: one task per timeline that follows the safekeeper with the highest commit LSN, streams
//! committed WAL from the timeline's `last_record_lsn` (so after a restart it resumes at
//! `disk_consistent_lsn`), ingests it, and fails over to another safekeeper when its stream breaks, or when it
//! brings nothing new for `STALL_AFTER_MS` while another safekeeper has committed past what was ingested (a
//! safekeeper whose disk filled up stays connected but stops advancing).
//!
//! Bounds: each state query and connection attempt has a timeout; reconnects back off up to
//! `reconnect_backoff_max_ms`; ingest pauses while `frozen_layers_max` frozen layers wait for a flush, so
//! memory stays bounded when the disk is slower than the WAL.
//!
//! With remote storage, each receiver also reports the timeline's `remote_consistent_lsn` to every safekeeper
//! (`ReportHorizons`) every `horizons_report_interval_ms`, whenever it passed what that safekeeper last
//! acknowledged; the safekeepers may then remove WAL below `min(commit_lsn, remote_consistent_lsn)`. That LSN
//! means "durable in object storage", where a rebuild finds it (see [`crate::remote`]). Without remote
//! storage nothing is reported: local durability alone would let the safekeepers delete WAL that exists only
//! on this pageserver's disk, so they keep all WAL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proto::safekeeper as pb;
use proto::safekeeper::safekeeper_client::SafekeeperClient;
use storage::{Lsn, TenantId, Timeline};
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint};

use crate::remote::RemoteConsistentLsns;
use crate::tenants::TenantManager;

/// Largest WAL message accepted from a safekeeper.
const MESSAGE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Where the safekeepers are and how patient to be.
#[derive(Clone, Debug)]
pub struct WalReceiverConfig {
    /// Safekeeper addresses (`host:port` or `http://host:port`).
    pub safekeepers: Vec<String>,
    /// A state query or connection attempt gives up after this long.
    pub request_timeout_ms: u64,
    /// The longest pause between reconnection attempts.
    pub reconnect_backoff_max_ms: u64,
    /// Ingest waits while this many frozen layers are not yet flushed.
    pub frozen_layers_max: usize,
    /// With remote storage: where the timelines' `remote_consistent_lsn`s are, to report them to the
    /// safekeepers. `None`: report nothing.
    pub remote_consistent_lsns: Option<Arc<RemoteConsistentLsns>>,
    /// How often `remote_consistent_lsn` is checked and, if it advanced, reported.
    pub horizons_report_interval_ms: u64,
    /// The channels every timeline's short calls share (clones of this config share them).
    pub channels: SharedChannels,
}

/// One lazily connected channel per safekeeper, shared by every timeline's short calls (state queries, horizon
/// reports), so an idle timeline's periodic checks cost a request on a connection already open, not a TCP and
/// HTTP/2 handshake each (3 connects every 2 s per idle timeline before). HTTP/2 keepalive finds a connection
/// that went silent (a partition) and the channel connects again. A WAL stream, which stays open for as long as
/// the timeline is followed, gets a channel of its own (a server bounds the streams of one connection).
#[derive(Clone, Debug, Default)]
pub struct SharedChannels(Arc<parking_lot::Mutex<HashMap<String, Channel>>>);

impl SharedChannels {
    /// The shared channel to `address`, made on first use.
    fn get(&self, address: &str, timeout: Duration) -> Result<Channel, ReceiveError> {
        let mut channels = self.0.lock();
        if let Some(channel) = channels.get(address) {
            return Ok(channel.clone());
        }
        let channel = endpoint(address, timeout)?.connect_lazy();
        channels.insert(address.to_owned(), channel.clone());
        Ok(channel)
    }
}

impl WalReceiverConfig {
    /// Defaults for these safekeepers.
    pub fn new(safekeepers: Vec<String>) -> WalReceiverConfig {
        WalReceiverConfig {
            safekeepers,
            request_timeout_ms: 2_000,
            reconnect_backoff_max_ms: 2_000,
            frozen_layers_max: 4,
            remote_consistent_lsns: None,
            horizons_report_interval_ms: 1_000,
            channels: SharedChannels::default(),
        }
    }
}

/// Why one streaming attempt ended.
#[derive(Debug, thiserror::Error)]
enum ReceiveError {
    #[error("no safekeeper answered")]
    NoSafekeeper,
    #[error("safekeeper {address}: {status}")]
    Status { address: String, status: tonic::Status },
    #[error("safekeeper {address} sent WAL at {got}, expected {expected}")]
    Misaligned { address: String, got: Lsn, expected: Lsn },
    #[error("ingest failed: {0}")]
    Ingest(#[from] storage::StorageError),
    #[error("bad safekeeper address {0}")]
    BadAddress(String),
    #[error("safekeeper {address} sent nothing past {ingested} while {other} has committed up to {commit_lsn}")]
    Stalled {
        address: String,
        other: String,
        commit_lsn: Lsn,
        ingested: Lsn,
    },
}

/// How often an HTTP/2 connection to a safekeeper is pinged, and how long a ping may go unanswered before the
/// connection counts as broken (a silent partition) and the channel connects again.
const HTTP2_KEEPALIVE_INTERVAL_MS: u64 = 10_000;
const HTTP2_KEEPALIVE_TIMEOUT_MS: u64 = 10_000;

/// How often a stream that brings nothing new is checked against the other safekeepers.
const STALL_CHECK_INTERVAL_MS: u64 = 500;
/// How long a stream may bring nothing new before the other safekeepers are asked whether they are ahead.
const STALL_AFTER_MS: u64 = 2_000;

/// Every safekeeper that answered the state query (all asked at once, each bounded by the request timeout): its
/// address and its commit LSN for the timeline.
async fn commit_lsns(
    config: &WalReceiverConfig,
    timeline_ref: &pb::TimelineRef,
) -> Result<Vec<(String, Lsn)>, ReceiveError> {
    let timeout = Duration::from_millis(config.request_timeout_ms);
    let mut calls = Vec::with_capacity(config.safekeepers.len());
    for address in &config.safekeepers {
        let channel = config.channels.get(address, timeout)?;
        let request = timeline_ref.clone();
        calls.push(async move {
            let mut client = SafekeeperClient::new(channel);
            let state = tokio::time::timeout(timeout, client.get_state(request)).await;
            match state {
                Ok(Ok(state)) => Some((address.clone(), Lsn(state.into_inner().commit_lsn))),
                _ => None,
            }
        });
    }
    Ok(futures::future::join_all(calls).await.into_iter().flatten().collect())
}

fn endpoint(address: &str, timeout: Duration) -> Result<Endpoint, ReceiveError> {
    let uri = if address.contains("://") {
        address.to_string()
    } else {
        format!("http://{address}")
    };
    Ok(Endpoint::from_shared(uri)
        .map_err(|_| ReceiveError::BadAddress(address.to_string()))?
        .connect_timeout(timeout)
        .http2_keep_alive_interval(Duration::from_millis(HTTP2_KEEPALIVE_INTERVAL_MS))
        .keep_alive_timeout(Duration::from_millis(HTTP2_KEEPALIVE_TIMEOUT_MS))
        .keep_alive_while_idle(true)
        .tcp_nodelay(true))
}

/// Runs the receiver of one timeline until `stop` turns true.
pub async fn run(
    manager: Arc<TenantManager>,
    tenant_id: TenantId,
    timeline: Arc<Timeline>,
    config: WalReceiverConfig,
    mut stop: watch::Receiver<bool>,
) {
    let timeline_ref = pb::TimelineRef {
        tenant_id: tenant_id.to_string(),
        timeline_id: timeline.id().to_string(),
    };
    let reporter = config.remote_consistent_lsns.clone().map(|lsns| {
        tokio::spawn(report_horizons(
            lsns,
            tenant_id,
            timeline.id(),
            timeline_ref.clone(),
            config.clone(),
            stop.clone(),
        ))
    });
    receive(&manager, tenant_id, &timeline, &config, &timeline_ref, &mut stop).await;
    if let Some(reporter) = reporter {
        let _ = reporter.await;
    }
}

/// Streams and ingests, reconnecting with backoff, until `stop` turns true.
async fn receive(
    manager: &TenantManager,
    tenant_id: TenantId,
    timeline: &Timeline,
    config: &WalReceiverConfig,
    timeline_ref: &pb::TimelineRef,
    stop: &mut watch::Receiver<bool>,
) {
    let mut backoff_ms = 50u64;
    loop {
        if *stop.borrow() {
            return;
        }
        let attempt = receive_once(manager, tenant_id, timeline, config, timeline_ref, stop);
        match attempt.await {
            Ok(()) => return,
            Err(e) => {
                tracing::info!(tenant = %tenant_id, timeline = %timeline.id(), error = %e, "WAL stream ended; reconnecting");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(backoff_ms)) => {}
            _ = stop.changed() => {}
        }
        backoff_ms = (backoff_ms * 2).min(config.reconnect_backoff_max_ms);
    }
}

/// Picks the safekeeper with the highest commit LSN that has something new, and streams from it. Returns
/// `Ok` only when stopped.
async fn receive_once(
    manager: &TenantManager,
    tenant_id: TenantId,
    timeline: &Timeline,
    config: &WalReceiverConfig,
    timeline_ref: &pb::TimelineRef,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), ReceiveError> {
    let timeout = Duration::from_millis(config.request_timeout_ms);
    let mut best: Option<(Lsn, String)> = None;
    for (address, commit_lsn) in commit_lsns(config, timeline_ref).await? {
        if best.as_ref().is_none_or(|(best_commit, _)| commit_lsn > *best_commit) {
            best = Some((commit_lsn, address));
        }
    }
    let Some((commit_lsn, address)) = best else {
        return Err(ReceiveError::NoSafekeeper);
    };
    // The stream's own connection (see `SharedChannels`).
    let mut client =
        SafekeeperClient::new(endpoint(&address, timeout)?.connect_lazy()).max_decoding_message_size(MESSAGE_BYTES_MAX);
    // Past a pending group's parts (kept across reconnects: committed WAL never changes); after a restart there
    // is none, and `last_record_lsn` is at or before the first part of any group cut short.
    let start_lsn = timeline.wal_end_lsn();
    tracing::debug!(tenant = %tenant_id, timeline = %timeline.id(), %address, %commit_lsn, %start_lsn, "following safekeeper");
    let request = pb::StreamWalRequest {
        timeline: Some(timeline_ref.clone()),
        start_lsn: start_lsn.0,
    };
    let mut stream = match tokio::time::timeout(timeout, client.stream_wal(request)).await {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => return Err(ReceiveError::Status { address, status }),
        Err(_) => {
            return Err(ReceiveError::Status {
                address,
                status: tonic::Status::deadline_exceeded("connect"),
            })
        }
    };
    // A safekeeper can stay connected yet stop advancing (its disk is full, its WAL store poisoned): when the
    // stream brings nothing new for a while, ask the others, and leave it if one of them is ahead.
    let mut stall_check = tokio::time::interval(Duration::from_millis(STALL_CHECK_INTERVAL_MS));
    stall_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Progress is WAL received, parts of a group included: a large transaction's parts move it long before its
    // commit moves `last_record_lsn`.
    let mut progress = (timeline.wal_end_lsn(), tokio::time::Instant::now());
    loop {
        let message = tokio::select! {
            message = stream.message() => message,
            _ = stop.changed() => return Ok(()),
            _ = stall_check.tick() => {
                let ingested = timeline.wal_end_lsn();
                if ingested != progress.0 {
                    progress = (ingested, tokio::time::Instant::now());
                } else if progress.1.elapsed() >= Duration::from_millis(STALL_AFTER_MS) {
                    let ahead = commit_lsns(config, timeline_ref)
                        .await?
                        .into_iter()
                        .filter(|(other, commit_lsn)| *other != address && *commit_lsn > ingested)
                        .max_by_key(|(_, commit_lsn)| *commit_lsn);
                    if let Some((other, commit_lsn)) = ahead {
                        return Err(ReceiveError::Stalled { address, other, commit_lsn, ingested });
                    }
                    progress.1 = tokio::time::Instant::now();
                }
                continue;
            }
        };
        let chunk = match message {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                return Err(ReceiveError::Status {
                    address,
                    status: tonic::Status::unavailable("stream ended"),
                })
            }
            Err(status) => return Err(ReceiveError::Status { address, status }),
        };
        if chunk.data.is_empty() {
            continue;
        }
        let expected = timeline.wal_end_lsn();
        if Lsn(chunk.start_lsn) != expected {
            return Err(ReceiveError::Misaligned {
                address,
                got: Lsn(chunk.start_lsn),
                expected,
            });
        }
        while timeline.frozen_layer_count() >= config.frozen_layers_max {
            // Backpressure: let the background flush catch up.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        timeline.ingest_frames(expected, &chunk.data)?;
        manager.notify_ingested(tenant_id, timeline);
    }
}

/// Reports the timeline's `remote_consistent_lsn` to every safekeeper whenever it passed what that safekeeper
/// last acknowledged, until `stop` turns true. A safekeeper that does not answer (or does not have the
/// timeline yet) is asked again at the next tick.
async fn report_horizons(
    lsns: Arc<RemoteConsistentLsns>,
    tenant_id: TenantId,
    timeline_id: storage::TimelineId,
    timeline_ref: pb::TimelineRef,
    config: WalReceiverConfig,
    mut stop: watch::Receiver<bool>,
) {
    let timeout = Duration::from_millis(config.request_timeout_ms);
    let mut acknowledged: HashMap<String, Lsn> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(config.horizons_report_interval_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = stop.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        if *stop.borrow() {
            return;
        }
        let Some(lsn) = lsns.get(tenant_id, timeline_id) else {
            continue;
        };
        for address in &config.safekeepers {
            if acknowledged.get(address).is_some_and(|&done| done >= lsn) {
                continue;
            }
            let client = match config.channels.get(address, timeout) {
                Ok(channel) => SafekeeperClient::new(channel),
                Err(e) => {
                    tracing::warn!(%address, error = %e, "cannot report horizons");
                    continue;
                }
            };
            let request = pb::HorizonsRequest {
                timeline: Some(timeline_ref.clone()),
                remote_consistent_lsn: lsn.0,
            };
            let mut client = client;
            match tokio::time::timeout(timeout, client.report_horizons(request)).await {
                Ok(Ok(_)) => {
                    tracing::debug!(tenant = %tenant_id, timeline = %timeline_id, %address, %lsn, "reported remote_consistent_lsn");
                    acknowledged.insert(address.clone(), lsn);
                }
                Ok(Err(status)) => {
                    tracing::debug!(tenant = %tenant_id, timeline = %timeline_id, %address, %status, "horizons report refused");
                }
                Err(_) => {
                    tracing::debug!(tenant = %tenant_id, timeline = %timeline_id, %address, "horizons report timed out");
                }
            }
        }
    }
}
