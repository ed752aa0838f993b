//! How the proposer reaches one safekeeper: a gRPC channel over TCP, or the safekeeper's gRPC service called in
//! this process.
//!
//! Both carry the same service contract (`safekeeper.proto`): the same messages, statuses and metadata, the
//! same append stream. The in-process one skips HTTP/2 framing, flow control, the connection tasks and the
//! loopback TCP round trip, which on a small machine are most of a commit's CPU when the safekeepers share
//! the compute's process (as in `cambium up`). A safekeeper elsewhere is always reached over gRPC.
//!
//! The append stream, a commit's path, goes further in process: the proposer hands its messages to the
//! safekeeper's stream as they are ([`InProcessAppend`]), never encoding them to protobuf and decoding them
//! back; the unary calls (a campaign's few) go through the service.
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

use proto::safekeeper as pb;
use tokio::sync::mpsc;
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

/// The acknowledgements of an append stream opened in process, or the status that ended it (the stream then
/// closes).
pub type AppendAcks = mpsc::Receiver<Result<pb::AppendResponse, tonic::Status>>;

/// A safekeeper's `Append` stream served in this process, the messages handed over as they are.
///
/// Guarantees (the implementor's): the same contract as the service's `Append` over gRPC (`safekeeper.proto`):
/// the same acknowledgements in the same order, the same refusal statuses with their metadata, the stream ended
/// by a status on a refusal and closed when the requests' sender is dropped.
pub trait InProcessAppend: Send + Sync + 'static {
    /// Opens one append stream fed by `requests`. Called within the runtime the safekeepers serve on, so the
    /// tasks it spawns run there. Fails with the status the service would (e.g. the node is shutting down).
    fn open_append(&self, requests: mpsc::Receiver<pb::AppendRequest>) -> Result<AppendAcks, tonic::Status>;
}

/// One safekeeper served in this process: its service for the unary calls, its append stream called directly.
#[derive(Clone)]
pub struct LocalPeer {
    service: PeerService,
    append: Arc<dyn InProcessAppend>,
    runtime: tokio::runtime::Handle,
}

impl LocalPeer {
    /// The service for the unary calls (each call run on the safekeepers' runtime).
    pub fn service(&self) -> PeerService {
        self.service.clone()
    }

    /// Opens an append stream on the safekeepers' runtime (see [`InProcessAppend::open_append`]).
    pub fn open_append(&self, requests: mpsc::Receiver<pb::AppendRequest>) -> Result<AppendAcks, tonic::Status> {
        let _runtime = self.runtime.enter();
        self.append.open_append(requests)
    }
}

/// The safekeepers served in this process, by the address each also serves on over TCP.
///
/// Guarantees: a proposer configured with an address found here calls that safekeeper in process (its service
/// for unary calls, its append stream directly); any other address is reached over gRPC. Cheap to clone
/// (shared).
#[derive(Clone, Default)]
pub struct LocalSafekeepers {
    peers: Arc<BTreeMap<String, LocalPeer>>,
}

impl std::fmt::Debug for LocalSafekeepers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSafekeepers")
            .field("addresses", &self.peers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl LocalSafekeepers {
    /// No safekeeper in this process: every address is reached over gRPC.
    pub fn none() -> LocalSafekeepers {
        LocalSafekeepers::default()
    }

    /// The given safekeepers, each the one serving `address`: its service (e.g. `SafekeeperServer::new(service)`)
    /// and its append stream, every call run on `runtime` (the one the safekeepers serve on).
    pub fn new<S>(
        runtime: tokio::runtime::Handle,
        services: impl IntoIterator<Item = (String, S, Arc<dyn InProcessAppend>)>,
    ) -> LocalSafekeepers
    where
        S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let peers = services
            .into_iter()
            .map(|(address, service, append)| {
                let peer = LocalPeer {
                    service: in_process(service, runtime.clone()),
                    append,
                    runtime: runtime.clone(),
                };
                (address, peer)
            })
            .collect();
        LocalSafekeepers { peers: Arc::new(peers) }
    }

    /// The safekeeper in this process serving `address`, if it is one of these.
    pub fn get(&self, address: &str) -> Option<LocalPeer> {
        let address = address.strip_prefix("http://").unwrap_or(address);
        self.peers.get(address).cloned()
    }

    /// How many safekeepers are in this process.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
}

/// `service` with each call bounded by `timeout`: a call that has no response by then fails with a
/// [`TransportError`] (what a gRPC channel's own timeout does for a call over TCP; an in-process service has
/// none).
pub fn bounded(service: PeerService, timeout: std::time::Duration) -> PeerService {
    BoxCloneSyncService::new(tower::service_fn(move |request: http::Request<Body>| {
        let call = service.clone().oneshot(request);
        async move {
            match tokio::time::timeout(timeout, call).await {
                Ok(response) => response,
                Err(_) => Err(TransportError(
                    format!(
                        "no response from the in-process safekeeper within {} ms",
                        timeout.as_millis()
                    )
                    .into(),
                )),
            }
        }
    }))
}

/// A tonic service called in this process, each call spawned on `runtime` (the one the service would serve on
/// behind its TCP listener), as a [`PeerService`]: the same contract as over gRPC without HTTP/2, TCP or
/// connection tasks. Used for the co-located safekeepers, and by `cambium up` for its pageserver's management
/// service.
pub fn in_process<S>(service: S, runtime: tokio::runtime::Handle) -> PeerService
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
pub fn over_grpc(channel: tonic::transport::Channel) -> PeerService {
    BoxCloneSyncService::new(channel.map_err(|error| TransportError(Box::new(error))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call to an in-process service that never answers fails once its bound passes (a gRPC channel's own
    /// timeout does this over TCP); one that answers in time gets its response.
    #[tokio::test]
    async fn a_bounded_call_that_gets_no_response_fails_at_its_bound() {
        let silent: PeerService = BoxCloneSyncService::new(tower::service_fn(|_request: http::Request<Body>| {
            std::future::pending::<Result<http::Response<Body>, TransportError>>()
        }));
        let bound = std::time::Duration::from_millis(50);
        let started = std::time::Instant::now();
        let error = bounded(silent, bound)
            .oneshot(http::Request::new(Body::empty()))
            .await
            .expect_err("no response");
        assert!(started.elapsed() >= bound, "failed only at the bound");
        assert!(error.to_string().contains("within 50 ms"), "{error}");
        let answering: PeerService =
            BoxCloneSyncService::new(tower::service_fn(|_request: http::Request<Body>| async {
                Ok::<_, TransportError>(http::Response::new(Body::empty()))
            }));
        let response = bounded(answering, bound)
            .oneshot(http::Request::new(Body::empty()))
            .await
            .expect("answered");
        assert_eq!(response.status(), http::StatusCode::OK);
    }
}
