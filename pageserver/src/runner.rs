//! Runs a whole pageserver: the tenants, a WAL receiver per timeline, the background loop and the gRPC
//! services, until shutdown. With remote storage, [`open`] first rebuilds the tenants the local disk lacks from
//! it (their small files only) and opens every tenant with a layer fetcher (layers missing locally are
//! downloaded on first use), and [`run`] keeps the remote copy up to date (an uploader task; receivers report
//! `remote_consistent_lsn`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use storage::{PageCache, TenantId, TimelineConfig, TimelineId};
use tokio::sync::watch;

use proto::pageserver::management_server::ManagementServer;

use crate::background::{self, BackgroundConfig};
use crate::management::ManagementHandler;
use crate::remote::{self, LayerDownloader, RemoteStorage, Uploader, UploaderConfig};
use crate::tenants::{PageserverError, TenantManager};
use crate::wal_receiver::{self, WalReceiverConfig};

/// Everything a pageserver needs.
#[derive(Clone, Debug)]
pub struct PageserverConfig {
    /// Where tenants live.
    pub data_dir: PathBuf,
    /// Flush, compaction and GC knobs of every timeline.
    pub timeline: TimelineConfig,
    /// Pages in the shared page cache.
    pub page_cache_pages: usize,
    /// The safekeepers to follow.
    pub receiver: WalReceiverConfig,
    /// Background work intervals.
    pub background: BackgroundConfig,
    /// How often the receivers are matched to the current timelines.
    pub receiver_sync_interval_ms: u64,
    /// Remote storage for layers and timeline indexes; `None`: the local disk is the only copy.
    pub remote: Option<Arc<RemoteStorage>>,
    /// How uploads to remote storage are paced.
    pub uploader: UploaderConfig,
}

impl PageserverConfig {
    /// Defaults for a data directory and a set of safekeepers (a 512 MiB page cache).
    pub fn new(data_dir: PathBuf, safekeepers: Vec<String>) -> PageserverConfig {
        PageserverConfig {
            data_dir,
            timeline: TimelineConfig::default(),
            page_cache_pages: 64 * 1024,
            receiver: WalReceiverConfig::new(safekeepers),
            background: BackgroundConfig::default(),
            receiver_sync_interval_ms: 200,
            remote: None,
            uploader: UploaderConfig::default(),
        }
    }
}

/// Opens the tenants (blocking work, on the blocking pool). With remote storage, the tenants it holds and the
/// local disk does not are rebuilt first (see [`remote::rebuild`]), and every tenant fetches the layers its
/// disk lacks on demand (see [`LayerDownloader`]).
pub async fn open(config: &PageserverConfig) -> Result<Arc<TenantManager>, PageserverError> {
    let remote_error = |e: remote::RemoteError| PageserverError::Io {
        path: config.data_dir.clone(),
        source: std::io::Error::other(e),
    };
    let downloader = match &config.remote {
        Some(remote) => {
            let rebuilt = remote::rebuild(&config.data_dir, remote, config.timeline.durability)
                .await
                .map_err(remote_error)?;
            if !rebuilt.is_empty() {
                tracing::info!(tenants = ?rebuilt, "rebuilt tenants from remote storage; layers come on demand");
            }
            Some(LayerDownloader::new(Arc::clone(remote)).map_err(remote_error)?)
        }
        None => None,
    };
    let data_dir = config.data_dir.clone();
    let timeline = config.timeline.clone();
    let cache = Arc::new(PageCache::new(config.page_cache_pages));
    let opened = tokio::task::spawn_blocking(move || match downloader {
        Some(downloader) => TenantManager::open_with_fetchers(&data_dir, timeline, cache, downloader.fetchers()),
        None => TenantManager::open(&data_dir, timeline, cache),
    })
    .await;
    match opened {
        Ok(result) => result.map(|manager| {
            if let Some(remote) = &config.remote {
                manager.set_remote(Arc::clone(remote));
            }
            Arc::new(manager)
        }),
        Err(join) => Err(PageserverError::Io {
            path: config.data_dir.clone(),
            source: std::io::Error::other(join),
        }),
    }
}

/// Serves until `shutdown` resolves: gRPC on `listener`, a receiver per timeline, background work.
pub async fn run(
    manager: Arc<TenantManager>,
    config: PageserverConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    run_with_local(manager, config, listener, shutdown, None).await
}

/// [`run`], also handing `local` the management service it serves (the same handler, with the same remote
/// storage), for a caller in this process to call without TCP (`cambium up`'s control plane).
pub async fn run_with_local(
    manager: Arc<TenantManager>,
    mut config: PageserverConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    local: Option<tokio::sync::oneshot::Sender<ManagementServer<ManagementHandler>>>,
) -> Result<(), tonic::transport::Error> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let uploader = config
        .remote
        .clone()
        .map(|remote| Uploader::new(Arc::clone(&manager), remote, config.uploader.clone()));
    let upload_queue = uploader.as_ref().map(Uploader::queue);
    let remote_consistent_lsns = uploader.as_ref().map(Uploader::remote_consistent_lsns);
    let remote = remote_consistent_lsns.clone().zip(upload_queue.clone());
    if let Some(local) = local {
        // The receiver is gone only if the caller stopped waiting: then nobody calls in process.
        let _ = local.send(
            ManagementHandler::new(Arc::clone(&manager))
                .with_remote(remote.clone())
                .into_server(),
        );
    }
    config.receiver.remote_consistent_lsns = remote_consistent_lsns.clone();
    let uploader = uploader.map(|uploader| tokio::spawn(uploader.run(stop_rx.clone())));
    let background = tokio::spawn(background::run(
        Arc::clone(&manager),
        config.background.clone(),
        upload_queue,
        stop_rx.clone(),
    ));
    let receivers = tokio::spawn(supervise_receivers(Arc::clone(&manager), config.clone(), stop_rx));
    let served = crate::server::serve_with_remote(Arc::clone(&manager), remote, listener, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = receivers.await;
    let _ = background.await;
    let uploader = match uploader {
        Some(task) => match task.await {
            Ok(uploader) => Some(uploader),
            // A panic is our bug: carry it on (STYLE 8).
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        },
        None => None,
    };
    // Flush what was ingested so a clean restart does not have to re-fetch it.
    let flushed = tokio::task::spawn_blocking(move || {
        for tenant_id in manager.tenant_ids() {
            if let Ok(tenant) = manager.tenant(tenant_id) {
                for timeline in tenant.timelines() {
                    if let Err(e) = timeline.checkpoint() {
                        tracing::warn!(timeline = %timeline.id(), error = %e, "checkpoint at shutdown failed");
                    }
                }
            }
        }
    });
    let _ = flushed.await;
    if let Some(mut uploader) = uploader {
        // Upload what the checkpoint wrote, so a rebuild after this clean stop re-fetches little WAL.
        let timeout = Duration::from_millis(uploader.config().shutdown_upload_timeout_ms);
        match tokio::time::timeout(timeout, uploader.upload_all()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "upload at shutdown failed"),
            Err(_) => tracing::warn!("upload at shutdown timed out"),
        }
    }
    served
}

/// A running receiver: how to stop it, its task, and the timeline object it ingests into.
type Receiver = (watch::Sender<bool>, tokio::task::JoinHandle<()>, Arc<storage::Timeline>);

/// Keeps exactly one receiver running per existing timeline that is not sealed, ingesting into the timeline object the tenant
/// serves now: a tenant detached and attached again between two rounds (moved away and back) has new timeline
/// objects, and the old one's receiver (its files gone, so failing) is stopped for a new one.
async fn supervise_receivers(manager: Arc<TenantManager>, config: PageserverConfig, mut stop: watch::Receiver<bool>) {
    let mut running: HashMap<(TenantId, TimelineId), Receiver> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(config.receiver_sync_interval_ms.max(1)));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        let mut live = Vec::new();
        for tenant_id in manager.tenant_ids() {
            let Ok(tenant) = manager.tenant(tenant_id) else {
                continue;
            };
            for timeline in tenant.timelines() {
                // A sealed timeline's WAL is needed by no one (its receiver, if running, is stopped below).
                if timeline.sealed_lsn().is_some() {
                    continue;
                }
                let key = (tenant_id, timeline.id());
                live.push(key);
                match running.get(&key) {
                    Some((_, _, followed)) if Arc::ptr_eq(followed, &timeline) => continue,
                    Some(_) => {
                        if let Some((receiver_stop, _, _)) = running.remove(&key) {
                            let _ = receiver_stop.send(true);
                        }
                    }
                    None => {}
                }
                let (receiver_stop, receiver_stop_rx) = watch::channel(false);
                let task = tokio::spawn(wal_receiver::run(
                    Arc::clone(&manager),
                    tenant_id,
                    Arc::clone(&timeline),
                    config.receiver.clone(),
                    receiver_stop_rx,
                ));
                running.insert(key, (receiver_stop, task, timeline));
            }
        }
        running.retain(|key, (receiver_stop, _, _)| {
            let keep = live.contains(key);
            if !keep {
                let _ = receiver_stop.send(true);
            }
            keep
        });
    }
    for (_, (receiver_stop, task, _)) in running {
        let _ = receiver_stop.send(true);
        let _ = task.await;
    }
}
