//! [`serve`]: the pageserver's gRPC server, the page service and the management service on one listener,
//! until a shutdown signal.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tonic::transport::server::TcpIncoming;

use crate::management::ManagementHandler;
use crate::page_service::PageServiceHandler;
use crate::remote::{RemoteConsistentLsns, UploadQueue};
use crate::tenants::TenantManager;

pub use crate::limits::{
    CONNECTION_REQUESTS_MAX, HTTP2_CONNECTION_WINDOW_BYTES, HTTP2_KEEPALIVE_INTERVAL_MS, HTTP2_KEEPALIVE_TIMEOUT_MS,
    HTTP2_STREAMS_MAX, HTTP2_STREAM_WINDOW_BYTES, MESSAGE_BYTES_MAX, SHUTDOWN_GRACE_MS,
};

/// Serves the page service and the management service over `manager` on `listener` until `shutdown`
/// completes; then ends waiting reads and open page streams with `UNAVAILABLE`, lets connections finish for
/// up to [`SHUTDOWN_GRACE_MS`], and returns.
pub async fn serve(
    manager: Arc<TenantManager>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    serve_with_remote(manager, None, listener, shutdown).await
}

/// As [`serve`], with the management service reporting the `remote_consistent_lsn`s of remote storage and
/// queueing uploads on its uploader's queue (`None`: no remote storage).
pub async fn serve_with_remote(
    manager: Arc<TenantManager>,
    remote: Option<(Arc<RemoteConsistentLsns>, Arc<UploadQueue>)>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    // TcpIncoming is tonic's listener stream with per-socket options: without TCP_NODELAY a small GetPage
    // response can wait out Nagle's algorithm against the client's delayed ACKs.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let server = tonic::transport::Server::builder()
        .concurrency_limit_per_connection(CONNECTION_REQUESTS_MAX)
        .max_concurrent_streams(HTTP2_STREAMS_MAX)
        .initial_stream_window_size(HTTP2_STREAM_WINDOW_BYTES)
        .initial_connection_window_size(HTTP2_CONNECTION_WINDOW_BYTES)
        .http2_keepalive_interval(Some(Duration::from_millis(HTTP2_KEEPALIVE_INTERVAL_MS)))
        .http2_keepalive_timeout(Some(Duration::from_millis(HTTP2_KEEPALIVE_TIMEOUT_MS)))
        .add_service(PageServiceHandler::new(Arc::clone(&manager), shutdown_rx).into_server())
        .add_service(ManagementHandler::new(manager).with_remote(remote).into_server())
        .serve_with_incoming_shutdown(incoming, async {
            let _ = stop_rx.await;
        });
    let mut server: Pin<Box<_>> = Box::pin(server);
    tokio::select! {
        result = &mut server => return result,
        () = shutdown => {}
    }
    tracing::info!("pageserver gRPC shutting down");
    shutdown_tx.send_replace(true);
    let _ = stop_tx.send(());
    match tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), server).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!("connections still open after {SHUTDOWN_GRACE_MS} ms; closing them");
            Ok(())
        }
    }
}
