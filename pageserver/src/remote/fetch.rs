//! Layers on demand: the engine's [`LayerFetcher`] over [`RemoteStorage`]. A tenant opened with remote storage
//! configured (rebuilt with its small files only, or present locally) fetches a layer the first time a read,
//! compaction or GC needs it and the local disk lacks it (see `storage::layer::fetch` for the engine's side: one
//! fetch per layer at a time, size and every checksum verified, fsync, rename into place).
//!
//! # Threading
//!
//! The engine calls [`LayerFetcher::fetch`] synchronously from whatever thread needs the layer: a blocking-pool
//! thread (compaction, GC, management calls), but also a tokio worker thread, because the page service calls
//! `Timeline::get_page` inline in its async handlers. object_store is async. So:
//!
//! - The download runs on a runtime of its own, owned by the [`LayerDownloader`] (one worker thread, named
//!   `layer-download`), never on the caller's runtime. The caller's runtime may be a current-thread one whose
//!   only thread is the caller: a download spawned there could never run while the caller waits (a deadlock),
//!   and `Handle::block_on` from inside a runtime panics. On a runtime of its own the download makes progress
//!   whatever the calling thread is doing.
//! - The caller waits on a std channel with a timeout. On a worker of a multi-thread runtime it waits inside
//!   `tokio::task::block_in_place`, so that worker's other tasks move to other workers meanwhile. On a
//!   current-thread runtime (`block_in_place` would panic there) it simply blocks: that runtime stalls for at
//!   most the timeout, it cannot deadlock. Outside any runtime it blocks.
//! - Not only the download blocks: concurrent first readers of a missing layer wait for the engine's
//!   per-layer fetch lock while one of them downloads. The engine runs that whole section through
//!   [`LayerFetcher::block`], which this fetcher implements with the same `block_in_place`, so waiting readers
//!   do not hold the runtime's workers either (without it, a few readers of one missing layer would stall
//!   every worker, and with them every other request, for the length of a download).
//! - Bounds: at most `layer_downloads_in_flight_max` downloads at once (a semaphore; each download also takes
//!   one of the store's `requests_in_flight_max` request slots, so uploads are never starved of all of them),
//!   and each download, waiting for its slot and retries included, gives up after `layer_download_timeout_ms`.
//!   The caller stops waiting shortly after that in any case (and the download is aborted).
//! - Nothing here holds a lock across the wait; the engine holds only the per-layer fetch lock.
//!
//! The downloader's runtime is shut down in the background when the last tenant using it goes, so dropping a
//! tenant manager inside an async context is fine.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use storage::layer::desc::LayerDesc;
use storage::{FetchError, LayerFetcher, TenantId, TimelineId};
use tokio::runtime::{Runtime, RuntimeFlavor};
use tokio::sync::Semaphore;

use super::store::{RemoteError, RemoteStorage};
use crate::tenants::LayerFetchers;

/// Worker threads of the download runtime: the work is waiting on the network and the disk (file writes go to
/// the runtime's blocking pool).
const WORKER_THREADS: usize = 1;
/// How much longer than the download's own timeout the caller waits before giving up on it.
const WAIT_MARGIN: Duration = Duration::from_secs(2);

/// Downloads layers for the engine's fetchers on a runtime of its own; see the module doc.
pub struct LayerDownloader {
    /// `Some` until dropped.
    runtime: Option<Runtime>,
    remote: Arc<RemoteStorage>,
    permits: Arc<Semaphore>,
    timeout: Duration,
}

impl std::fmt::Debug for LayerDownloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerDownloader")
            .field("remote", &self.remote)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl LayerDownloader {
    /// A downloader from `remote`, with its runtime started.
    pub fn new(remote: Arc<RemoteStorage>) -> Result<Arc<LayerDownloader>, RemoteError> {
        let config = remote.config();
        let downloads_max = config.layer_downloads_in_flight_max.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            // File writes of the downloads in flight, plus a little slack; more queue (they never wait on
            // each other).
            .max_blocking_threads(downloads_max + 2)
            .thread_name("layer-download")
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Task(format!("starting the layer download runtime: {e}")))?;
        Ok(Arc::new(LayerDownloader {
            runtime: Some(runtime),
            timeout: Duration::from_millis(config.layer_download_timeout_ms),
            permits: Arc::new(Semaphore::new(downloads_max)),
            remote,
        }))
    }

    /// The fetcher of one tenant.
    pub fn fetcher(self: &Arc<Self>, tenant: TenantId) -> Arc<dyn LayerFetcher> {
        Arc::new(RemoteLayerFetcher {
            tenant,
            downloader: Arc::clone(self),
        })
    }

    /// Fetchers for every tenant, for [`crate::tenants::TenantManager::open_with_fetchers`].
    pub fn fetchers(self: &Arc<Self>) -> LayerFetchers {
        let downloader = Arc::clone(self);
        Arc::new(move |tenant| downloader.fetcher(tenant))
    }

    /// Downloads the layer into `destination`, waiting (bounded) from whatever thread this is.
    fn download(
        &self,
        tenant: TenantId,
        timeline: TimelineId,
        layer: &LayerDesc,
        destination: &Path,
    ) -> Result<(), FetchError> {
        let runtime = self.runtime.as_ref().expect("the runtime lives until drop");
        let key = self.remote.timeline_key(tenant, timeline, &layer.file_name());
        let (tx, rx) = mpsc::sync_channel(1);
        let task = {
            let (remote, permits, timeout) = (Arc::clone(&self.remote), Arc::clone(&self.permits), self.timeout);
            let (destination, size_bytes) = (destination.to_path_buf(), layer.size_bytes);
            runtime.spawn(async move {
                let download = async {
                    // The semaphore is never closed; were it, going on without a permit is still correct.
                    let _permit = permits.acquire().await.ok();
                    remote.get_to_path(&key, &destination, size_bytes).await
                };
                let result = tokio::time::timeout(timeout, download).await.unwrap_or_else(|_| {
                    Err(RemoteError::Timeout {
                        op: "layer download",
                        key: key.to_string(),
                        timeout_ms: timeout.as_millis() as u64,
                    })
                });
                // The caller may have stopped waiting; then nobody needs the answer.
                let _ = tx.send(result);
            })
        };
        let received = wait_blocking(|| rx.recv_timeout(self.timeout + WAIT_MARGIN));
        match received {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(FetchError::new(format!("download from remote storage: {e}"))),
            Err(RecvTimeoutError::Timeout) => {
                task.abort();
                Err(FetchError::new(format!(
                    "download from remote storage gave no answer within {} ms",
                    (self.timeout + WAIT_MARGIN).as_millis()
                )))
            }
            Err(RecvTimeoutError::Disconnected) => Err(FetchError::new(
                "download from remote storage cancelled: the downloader is shutting down",
            )),
        }
    }
}

impl Drop for LayerDownloader {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside an async context: shut it down without waiting.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `wait` (which blocks) from any thread: inside `block_in_place` on a multi-thread runtime, so the
/// runtime moves this worker's other tasks elsewhere; as is anywhere else (see the module doc).
fn wait_blocking<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
        _ => wait(),
    }
}

/// One tenant's [`LayerFetcher`]: downloads `<root>/tenants/<tenant>/timelines/<timeline>/<layer>`.
struct RemoteLayerFetcher {
    tenant: TenantId,
    downloader: Arc<LayerDownloader>,
}

impl LayerFetcher for RemoteLayerFetcher {
    fn fetch(&self, timeline: TimelineId, layer: &LayerDesc, destination: &Path) -> Result<(), FetchError> {
        self.downloader.download(self.tenant, timeline, layer, destination)
    }

    fn block(&self, work: &mut dyn FnMut()) {
        wait_blocking(work);
    }
}
