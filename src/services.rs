//! The parts that also run alone: `cambium safekeeper`, `cambium pageserver` and `cambium compute`, each on a
//! runtime of its own, printing the one stdout line that says where it listens and stopping on SIGINT or
//! SIGTERM.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use safekeeper::filestore::FileStoreConfig;
use safekeeper::node::{NodeConfig, SafekeeperNode};

use crate::shutdown_signal;

/// How long a stopping safekeeper waits for in-flight requests before it exits anyway.
const SAFEKEEPER_CLOSE_TIMEOUT_MS: u64 = 5_000;

/// Runs `cambium pageserver` with `config`, its layers also in remote storage `remote` if given.
pub(crate) fn run_pageserver(
    listen: &str,
    metrics_listen: Option<&str>,
    mut config: pageserver::runner::PageserverConfig,
    remote: Option<&str>,
    id: Option<String>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("pageserver")
        .build()
        .context("starting the tokio runtime")?;
    if let Some(url) = remote {
        let storage = pageserver::remote::RemoteStorage::from_url(url, Default::default())
            .with_context(|| format!("opening remote storage {url}"))?
            .with_owner(id);
        config.remote = Some(Arc::new(storage));
    }
    runtime.block_on(serve_pageserver(listen, metrics_listen, config))
}

/// Runs `cambium compute` with `config`.
pub(crate) fn run_compute(config: compute::compute::ComputeConfig) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("compute")
        .build()
        .context("starting the tokio runtime")?;
    let result = runtime.block_on(serve_compute(config));
    // The stores' runtimes shut down in the background; do not wait on blocking SQLite calls.
    runtime.shutdown_timeout(Duration::from_secs(5));
    result
}

async fn serve_compute(config: compute::compute::ComputeConfig) -> Result<()> {
    // Handlers first: a signal sent right after the line below is read must stop us cleanly.
    let shutdown = shutdown_signal()?;
    let compute = compute::compute::Compute::start(config)
        .await
        .context("starting the compute")?;
    let address = compute.address();
    tracing::info!("listening on {address}");
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "cambium compute listening on {address}").context("writing to stdout")?;
        stdout.flush().context("flushing stdout")?;
    }
    shutdown.await;
    compute.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// Runs `cambium safekeeper` `id` over `data_dir`.
pub(crate) fn run_safekeeper(
    id: u64,
    listen: &str,
    data_dir: PathBuf,
    pull_quiet_period_ms: Option<u64>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("safekeeper")
        .build()
        .context("starting the tokio runtime")?;
    let result = runtime.block_on(serve_safekeeper(id, listen, data_dir, pull_quiet_period_ms));
    // Dropping the runtime waits for blocking tasks (an fdatasync in progress) and drops every task, so the
    // last references to the node go and its lock file is removed before the process exits.
    drop(runtime);
    result
}

async fn serve_safekeeper(id: u64, listen: &str, data_dir: PathBuf, pull_quiet_period_ms: Option<u64>) -> Result<()> {
    let config = NodeConfig {
        node_id: id,
        data_dir: data_dir.clone(),
        store: FileStoreConfig::default(),
    };
    let node = tokio::task::spawn_blocking(move || SafekeeperNode::open(config))
        .await
        .context("opening the safekeeper node")?
        .with_context(|| format!("opening the safekeeper data directory {}", data_dir.display()))?;
    if let Some(ms) = pull_quiet_period_ms {
        node.set_pull_quiet_period(std::time::Duration::from_millis(ms));
    }
    let node = Arc::new(node);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let address = listener.local_addr().context("reading the bound address")?;
    // Handlers first: a signal sent right after the line below is read must stop us cleanly.
    let shutdown = shutdown_signal()?;
    tracing::info!(node = id, data_dir = %data_dir.display(), "listening on {address}");
    {
        // The one line of stdout: tests and supervisors read the bound port from it (`--listen ...:0`).
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "cambium safekeeper {id} listening on {address}").context("writing to stdout")?;
        stdout.flush().context("flushing stdout")?;
    }
    safekeeper::service::serve(Arc::clone(&node), listener, shutdown)
        .await
        .context("serving gRPC")?;
    if !node.close(Duration::from_millis(SAFEKEEPER_CLOSE_TIMEOUT_MS)).await {
        tracing::warn!(
            node = id,
            "requests outlived the close timeout; the lock goes when the runtime stops"
        );
    }
    tracing::info!(node = id, "stopped");
    Ok(())
}

async fn serve_pageserver(
    listen: &str,
    metrics_listen: Option<&str>,
    config: pageserver::runner::PageserverConfig,
) -> Result<()> {
    anyhow::ensure!(
        !config.receiver.safekeepers.is_empty(),
        "--safekeepers names no safekeeper"
    );
    let data_dir = config.data_dir.clone();
    let manager = pageserver::runner::open(&config)
        .await
        .with_context(|| format!("opening the pageserver data directory {}", data_dir.display()))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let address = listener.local_addr().context("reading the bound address")?;
    // One signal stops both the gRPC services and the metrics endpoint.
    let signal = shutdown_signal()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        signal.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut stop: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stop.wait_for(|stopped| *stopped).await;
    };
    if let Some(metrics_listen) = metrics_listen {
        let metrics_listener = tokio::net::TcpListener::bind(metrics_listen)
            .await
            .with_context(|| format!("listening for metrics on {metrics_listen}"))?;
        let metrics_address = metrics_listener.local_addr().context("reading the metrics address")?;
        tracing::info!("metrics at http://{metrics_address}/metrics");
        tokio::spawn(pageserver::metrics::serve(
            Arc::clone(&manager),
            metrics_listener,
            stopped(stop_rx.clone()),
        ));
    }
    let shutdown = stopped(stop_rx);
    tracing::info!(data_dir = %data_dir.display(), "listening on {address}");
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "cambium pageserver listening on {address}").context("writing to stdout")?;
        stdout.flush().context("flushing stdout")?;
    }
    pageserver::runner::run(manager, config, listener, shutdown)
        .await
        .context("serving gRPC")?;
    tracing::info!("stopped");
    Ok(())
}

/// What `cambium proxy` is given.
#[derive(Debug, Clone)]
pub(crate) struct ProxyOptions {
    pub(crate) listen: String,
    pub(crate) metadata: String,
    pub(crate) data_dir: PathBuf,
    pub(crate) tls_cert_and_key: Option<(PathBuf, PathBuf)>,
    pub(crate) connections_max: usize,
    pub(crate) failover_wait_ms: u64,
}

/// `cambium proxy` (`api::proxy`) until `shutdown`.
pub(crate) async fn proxy(options: ProxyOptions, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    let (cert, key) = match &options.tls_cert_and_key {
        Some(pair) => pair.clone(),
        None => {
            api::files::private_dir(&options.data_dir)
                .with_context(|| format!("creating {}", options.data_dir.display()))?;
            let mut names = vec!["localhost".to_owned()];
            if let Some((host, _port)) = options.listen.rsplit_once(':') {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                if host != "localhost" {
                    names.push(host.to_owned());
                }
            }
            compute::pg::tls::ensure_self_signed(&options.data_dir.join("tls"), &names)
                .context("making the proxy's self-signed certificate")?
        }
    };
    let mut tls = compute::pg::tls::server_config(&cert, &key).context("loading the proxy's certificate")?;
    // PostgreSQL 17's direct TLS negotiation asks for this protocol name.
    tls.alpn_protocols = vec![b"postgresql".to_vec()];
    let metadata = options.metadata.clone();
    let store = tokio::task::spawn_blocking(move || api::store::Store::open_postgres(&metadata))
        .await
        .context("opening the control metadata")?
        .context("opening the control metadata")?;
    let listener = tokio::net::TcpListener::bind(&options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    let address = listener.local_addr().context("reading the bound address")?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "cambium proxy listening on {address}").context("writing to stdout")?;
        stdout.flush().context("flushing stdout")?;
    }
    let config = api::proxy::ProxyConfig {
        tls: Some(api::proxy::tls_acceptor(tls)),
        connections_max: options.connections_max,
        failover_wait_ms: options.failover_wait_ms,
        ..api::proxy::ProxyConfig::default()
    };
    api::proxy::serve(listener, Arc::new(store), config, shutdown).await;
    Ok(())
}
