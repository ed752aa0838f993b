//! The `cambium` command line.
//!
//! `up` runs the whole service in one process ([`up`]); `api`, `safekeeper`, `pageserver` and `compute` each
//! run one part. Each prints one stdout line saying where it listens; SIGINT or SIGTERM stops it. `keys` manages
//! API keys. `projects`, `databases`, `branches`, `operations`, `endpoints`, `psql`, `connection-string`,
//! `request` and `completions` are the client of the `/v1` API ([`client`]). `demo` drives the storage engine directly (a database's worth of pages on disk, branched, read on
//! both sides); `inspect` and `verify` examine a tenant directory.
//!
//! Logs go to stderr (filtered by `RUST_LOG`); stdout carries only what a command reports.
//!
//! The files: `cli` the subcommands and flags, this one the dispatch and what every command shares (logs, the
//! open files limit, the runtime and the shutdown signal), [`up`] `up`, `api` and `keys`, `services` the
//! storage and compute parts run alone, `tenant_dir` the engine commands, [`config`] `--config FILE`.

#![forbid(unsafe_code)]

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

mod cli;
mod client;
mod config;
mod services;
mod tenant_dir;
mod up;

use cli::{Cli, Command, LogFormat};

/// Sets the soft limit on open files to `wanted`, or raises it to the hard limit: descriptors are budgeted
/// (`compute::fds`), and a low default soft limit (often 1024) would make that budget needlessly small.
fn set_open_files_limit(wanted: Option<u64>) {
    let result = match rlimit::Resource::NOFILE.get() {
        Ok((_soft, hard)) => {
            let soft = wanted.map_or(hard, |wanted| wanted.min(hard));
            rlimit::Resource::NOFILE.set(soft, hard).map(|()| soft)
        }
        Err(error) => Err(error),
    };
    match result {
        Ok(soft) => tracing::debug!(open_files_max = soft, "open files limit set"),
        Err(error) => tracing::warn!(%error, "could not set the open files limit"),
    }
}

/// Logs on stderr in `format`, through `filter`.
fn init_logs(format: LogFormat, filter: tracing_subscriber::EnvFilter) {
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Human => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
}

fn main() -> Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    config::apply::<Cli>(&args)?;
    let cli = Cli::parse_from(args);
    let is_client = matches!(cli.command, Command::Client(_));
    let filter = if is_client {
        // The client prints its own errors; its logs stay off unless RUST_LOG asks.
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"))
    } else {
        tracing_subscriber::EnvFilter::from_default_env()
    };
    init_logs(cli.log_format, filter);
    if !is_client {
        set_open_files_limit(cli.max_open_files);
    }
    match cli.command {
        // The exit code says what kind of failure it was (a contract with scripts), so the client exits here.
        Command::Client(command) => std::process::exit(client::run(command)),
        Command::Up {
            data_dir,
            metadata,
            metadata_pool,
            listen,
            pg_listen,
            remote,
            rate_limit,
            cache,
            operation_delay_ms,
            faults,
            idle_store_timeout_ms,
            safekeeper_pull_quiet_period_ms,
            reconcile,
            http,
            pg,
            quotas,
        } => {
            let cache_config = cache.config(Some(&data_dir));
            let options = up::ApiOptions {
                metadata_pool: metadata_pool.config(metadata.as_deref()),
                data_dir,
                metadata,
                listen,
                pg_listen,
                rate_limit_per_s: rate_limit,
                cache: cache_config,
                prefetch: cache.prefetch(),
                branch_stores: cache.branch_stores(),
                operation_delay_ms,
                faults,
                idle_store_timeout_ms,
                http: http.limits(),
                pg: pg.options(),
                quotas: quotas.quotas(),
                reconcile: reconcile.config(),
                pageserver_dead_after_ms: reconcile.pageserver_dead_after_ms(),
                expiry: reconcile.expiry_config(),
                webhooks: reconcile.webhook_config(),
                consumption: reconcile.consumption_config(),
                pull_quiet_period_ms: safekeeper_pull_quiet_period_ms,
                advertise: up::Advertise::default(),
            };
            run_service("up", |shutdown| up::up(options, remote, shutdown))
        }
        Command::Api {
            data_dir,
            metadata,
            metadata_pool,
            listen,
            pg_listen,
            pageservers,
            safekeepers,
            advertise_pg,
            advertise_api,
            connection_address,
            rate_limit,
            cache,
            idle_store_timeout_ms,
            operation_delay_ms,
            faults,
            reconcile,
            http,
            pg,
            quotas,
        } => {
            let cache_config = cache.config(Some(&data_dir));
            let options = up::ApiOptions {
                metadata_pool: metadata_pool.config(metadata.as_deref()),
                data_dir,
                metadata,
                listen,
                pg_listen,
                rate_limit_per_s: rate_limit,
                cache: cache_config,
                prefetch: cache.prefetch(),
                branch_stores: cache.branch_stores(),
                operation_delay_ms,
                faults,
                idle_store_timeout_ms,
                http: http.limits(),
                pg: pg.options(),
                quotas: quotas.quotas(),
                reconcile: reconcile.config(),
                pageserver_dead_after_ms: reconcile.pageserver_dead_after_ms(),
                expiry: reconcile.expiry_config(),
                webhooks: reconcile.webhook_config(),
                consumption: reconcile.consumption_config(),
                pull_quiet_period_ms: None,
                advertise: up::Advertise {
                    pg: advertise_pg,
                    api_url: advertise_api,
                    connection_address,
                },
            };
            run_service("api", |shutdown| up::api(options, pageservers, safekeepers, shutdown))
        }
        Command::Keys {
            data_dir,
            metadata,
            command,
        } => up::keys(&data_dir, metadata.as_deref(), command),
        Command::Demo { data_dir, pages } => {
            let data_dir = data_dir.unwrap_or_else(|| {
                let seconds = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                PathBuf::from(format!(".cambium/demo-{seconds}"))
            });
            tenant_dir::demo(&data_dir, pages)
        }
        Command::Inspect { data_dir } => tenant_dir::inspect(&data_dir),
        Command::Verify { data_dir } => tenant_dir::verify(&data_dir),
        Command::Safekeeper {
            id,
            listen,
            data_dir,
            pull_quiet_period_ms,
        } => services::run_safekeeper(id, &listen, data_dir, pull_quiet_period_ms),
        Command::Pageserver {
            listen,
            data_dir,
            safekeepers,
            remote,
            id,
            checkpoint_distance_bytes,
            checkpoint_timeout_ms,
            metrics_listen,
        } => {
            let mut config = pageserver::runner::PageserverConfig::new(data_dir, safekeepers);
            config.timeline.checkpoint_distance_bytes = checkpoint_distance_bytes;
            config.timeline.checkpoint_timeout_ms = checkpoint_timeout_ms;
            services::run_pageserver(&listen, metrics_listen.as_deref(), config, remote.as_deref(), id)
        }
        Command::Proxy {
            listen,
            metadata,
            data_dir,
            tls_cert,
            tls_key,
            connections_max,
            failover_wait_ms,
        } => {
            let options = services::ProxyOptions {
                listen,
                metadata,
                data_dir,
                tls_cert_and_key: tls_cert.zip(tls_key),
                connections_max,
                failover_wait_ms,
            };
            run_service("proxy", |shutdown| services::proxy(options, shutdown))
        }
        Command::Compute {
            listen,
            safekeepers,
            pageserver,
            tenant,
            branches,
            passwords,
            cache,
        } => services::run_compute(compute::compute::ComputeConfig {
            listen,
            safekeepers,
            pageserver,
            tenant_id: tenant,
            branches,
            passwords: passwords.into_iter().collect(),
            cache: cache.config(None),
        }),
    }
}

/// Runs `serve` (given the shutdown signal) on a fresh runtime, then stops the runtime without waiting long on
/// blocking work (SQLite calls of sessions still open).
fn run_service<F, Fut>(name: &str, serve: F) -> Result<()>
where
    F: FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()
        .context("starting the tokio runtime")?;
    let result = runtime.block_on(async {
        // Handlers first: a signal sent right after the line printed must stop us cleanly.
        let shutdown = shutdown_signal()?;
        serve(Box::pin(shutdown)).await
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    result
}

/// Completes on the first SIGINT or SIGTERM.
fn shutdown_signal() -> Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
        }
    })
}
