//! How the proposer reaches one safekeeper: a gRPC channel over TCP, or the safekeeper's gRPC service called in
//! this process.
//!
//! Both carry the same service contract (`safekeeper.proto`): the same messages, statuses and metadata, the
//! same append stream. The in-process one skips HTTP/2 framing, flow control, the connection tasks and the
//! loopback TCP round trip, which on a small machine are most of a commit's CPU when the safekeepers share
//! the compute's process (as in `cambium up`). A safekeeper elsewhere is always reached over gRPC.
//!
//! The in-process service is given by whoever owns both ends (the binary), keyed by the address the
//! safekeeper also serves on, so configuration stays a list of addresses ([`LocalSafekeepers`]), with the
//! runtime the safekeepers serve on: every call runs there, as it would behind their TCP listener. The caller's
//! runtime (the compute's, of two workers and one blocking thread) would otherwise run the safekeepers' append
//! streams, and their writes and fdatasyncs, which go to the runtime's blocking pool, would wait in turn on its
//! one blocking thread: three copies of a transaction written one after another (issue 12, bulk load).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use tonic::body::Body;
use tonic::codegen::{http, Service, StdError};
use tower::util::BoxCloneSyncService;
use tower::ServiceExt;

/// One safekeeper's gRPC service as the proposer's client calls it, whichever the transport.
pub type PeerService = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, TransportError>;

/// The transport failed (a gRPC connection could not be made or broke; the in-process one only when the
/// safekeepers' runtime is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("safekeeper transport: {0}")]
pub struct TransportError(#[source] StdError);

/// The safekeepers served in this process, by the address each also serves on over TCP.
///
/// Guarantees: a proposer configured with an address found here calls that service directly; any other
/// address is reached over gRPC. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct LocalSafekeepers {
    services: Arc<BTreeMap<String, PeerService>>,
}

impl std::fmt::Debug for LocalSafekeepers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSafekeepers")
            .field("addresses", &self.services.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl LocalSafekeepers {
    /// No safekeeper in this process: every address is reached over gRPC.
    pub fn none() -> LocalSafekeepers {
        LocalSafekeepers::default()
    }

    /// The given services, each the one serving `address` (e.g. `SafekeeperServer::new(service)`), every call
    /// run on `runtime` (the one the safekeepers serve on).
    pub fn new<S>(runtime: tokio::runtime::Handle, services: impl IntoIterator<Item = (String, S)>) -> LocalSafekeepers
    where
        S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let services = services
            .into_iter()
            .map(|(address, service)| (address, in_process(service, runtime.clone())))
            .collect();
        LocalSafekeepers {
            services: Arc::new(services),
        }
    }

    /// The in-process service for `address`, if it is one of these.
    pub fn get(&self, address: &str) -> Option<PeerService> {
        let address = address.strip_prefix("http://").unwrap_or(address);
        self.services.get(address).cloned()
    }

    /// How many safekeepers are in this process.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }
}

/// A service called in this process, each call spawned on `runtime`, as a [`PeerService`].
fn in_process<S>(service: S, runtime: tokio::runtime::Handle) -> PeerService
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    BoxCloneSyncService::new(tower::service_fn(move |request: http::Request<Body>| {
        let call = runtime.spawn(service.clone().oneshot(request));
        async move {
            match call.await {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(never)) => match never {},
                Err(error) => Err(TransportError(Box::new(error))),
            }
        }
    }))
}

/// A gRPC channel, as a [`PeerService`].
pub(crate) fn over_grpc(channel: tonic::transport::Channel) -> PeerService {
    BoxCloneSyncService::new(channel.map_err(|error| TransportError(Box::new(error))))
}
