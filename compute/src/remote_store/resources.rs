//! Where a store's network work runs: a runtime of its own (a store started alone), or the runtime and the
//! pageserver connections every store of a host shares ([`SharedResources`]: one per pageserver, made when a
//! store first reads from it), so that a store costs no threads and no pageserver connection of its own (a host
//! with a thousand branches would otherwise run two thousand threads).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};
use tonic::transport::{Channel, Endpoint};

use super::RemoteStoreError;

/// Worker threads of a store's own runtime, and of a host's shared one: the work is waiting on the network.
pub const WORKER_THREADS: usize = 2;

/// A runtime, shut down without waiting when dropped (dropping a runtime blocks, which panics inside an async
/// context, and a store may well be dropped there).
#[derive(Debug)]
pub(crate) struct OwnedRuntime(Option<Runtime>);

impl OwnedRuntime {
    pub(crate) fn new(thread_name: &str) -> Result<OwnedRuntime, RemoteStoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .max_blocking_threads(1)
            .thread_name(thread_name)
            .enable_all()
            .build()
            .map_err(|e| RemoteStoreError::Runtime(e.to_string()))?;
        Ok(OwnedRuntime(Some(runtime)))
    }

    fn handle(&self) -> &Handle {
        match &self.0 {
            Some(runtime) => runtime.handle(),
            None => unreachable!("the runtime is taken only in drop"),
        }
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The runtime and the pageserver connections the stores of one host share.
#[derive(Debug)]
pub struct SharedResources {
    /// Pageserver address → the connection every store reading from it shares.
    channels: parking_lot::Mutex<HashMap<String, Channel>>,
    connect_timeout_ms: u64,
    /// Last field: dropped after the channels that live on it.
    runtime: OwnedRuntime,
}

impl SharedResources {
    /// A runtime of [`WORKER_THREADS`] threads and a (lazy) connection to `pageserver` (`host:port` or a URI);
    /// connections to other pageservers are made when a store first asks for one.
    pub fn new(pageserver: &str, connect_timeout_ms: u64) -> Result<Arc<SharedResources>, RemoteStoreError> {
        let runtime = OwnedRuntime::new("compute-stores")?;
        let shared = SharedResources {
            channels: parking_lot::Mutex::new(HashMap::new()),
            connect_timeout_ms,
            runtime,
        };
        shared.channel(pageserver)?;
        Ok(Arc::new(shared))
    }

    /// The shared (lazy) connection to `pageserver`, made now if it is the first store to read from it.
    pub(crate) fn channel(&self, pageserver: &str) -> Result<Channel, RemoteStoreError> {
        let mut channels = self.channels.lock();
        if let Some(channel) = channels.get(pageserver) {
            return Ok(channel.clone());
        }
        let endpoint = pageserver_endpoint(pageserver, self.connect_timeout_ms)?;
        // `connect_lazy` spawns the connection's worker on the current runtime: this one.
        let channel = {
            let _entered = self.runtime.handle().enter();
            endpoint.connect_lazy()
        };
        channels.insert(pageserver.to_owned(), channel.clone());
        Ok(channel)
    }
}

/// Where one store's network work runs (see the module doc).
#[derive(Debug)]
pub(crate) enum StoreRuntime {
    Own(OwnedRuntime),
    Shared(Arc<SharedResources>),
}

impl StoreRuntime {
    /// The runtime's handle (what `spawn` is called on).
    pub(crate) fn get(&self) -> &Handle {
        match self {
            StoreRuntime::Own(runtime) => runtime.handle(),
            StoreRuntime::Shared(shared) => shared.runtime.handle(),
        }
    }

    /// The host's shared connection to `pageserver`; `None` for a store with a runtime of its own.
    pub(crate) fn shared_channel(&self, pageserver: &str) -> Option<Channel> {
        match self {
            StoreRuntime::Shared(shared) => shared.channel(pageserver).ok(),
            StoreRuntime::Own(_) => None,
        }
    }
}

/// HTTP/2 flow-control window of one stream from the pageserver (a `GetPages` stream has a prefetch window and
/// more of pages in flight on it).
pub const PAGESERVER_STREAM_WINDOW_BYTES: u32 = 8 << 20;
/// HTTP/2 flow-control window of the whole connection to the pageserver.
pub const PAGESERVER_CONNECTION_WINDOW_BYTES: u32 = 16 << 20;

/// The pageserver's endpoint: `host:port` or a URI, with a connect timeout, no Nagle delay, and flow-control
/// windows that let prefetched pages stream without waiting for window updates.
pub(crate) fn pageserver_endpoint(pageserver: &str, connect_timeout_ms: u64) -> Result<Endpoint, RemoteStoreError> {
    let uri = if pageserver.contains("://") {
        pageserver.to_owned()
    } else {
        format!("http://{pageserver}")
    };
    Ok(Endpoint::from_shared(uri)
        .map_err(|_| RemoteStoreError::BadAddress(pageserver.to_owned()))?
        .connect_timeout(Duration::from_millis(connect_timeout_ms))
        .tcp_nodelay(true)
        .initial_stream_window_size(PAGESERVER_STREAM_WINDOW_BYTES)
        .initial_connection_window_size(PAGESERVER_CONNECTION_WINDOW_BYTES))
}
