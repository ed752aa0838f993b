//! The `cambium` command line.
//!
//! `up` runs the whole service in one process ([`up`]); `api`, `safekeeper`, `pageserver` and `compute` each
//! run one part. Each prints one stdout line saying where it listens; SIGINT or SIGTERM stops it. `keys` manages
//! API keys. `demo` drives the storage engine directly (a database's worth of pages on disk, branched, read on
//! both sides); `inspect` and `verify` examine a tenant directory.
//!
//! Logs go to stderr (filtered by `RUST_LOG`); stdout carries only what a command reports.

#![forbid(unsafe_code)]

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use safekeeper::filestore::FileStoreConfig;
use safekeeper::node::{NodeConfig, SafekeeperNode};
mod config;
mod up;

use storage::{
    BranchPoint, Key, Lsn, PageCache, Patch, Tenant, TimelineConfig, TimelineId, Value, WalRecord, PAGE_SIZE_BYTES,
};

#[derive(Parser)]
#[command(
    name = "cambium",
    version,
    about = "Databases with instant copy-on-write branches and point-in-time restore"
)]
struct Cli {
    /// A TOML file of settings for the command (one key per flag; flags and `CAMBIUM_…` variables win).
    #[arg(long, global = true, env = "CAMBIUM_CONFIG")]
    config: Option<PathBuf>,
    /// Log lines on stderr as text for people or as JSON objects for machines (level filter: `RUST_LOG`).
    #[arg(long, global = true, env = "CAMBIUM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    /// Open files (descriptors) the process may use. Default: as many as the system's hard limit allows (the
    /// soft limit is raised to it). New sessions and branches are refused before the process runs out.
    #[arg(long, global = true, env = "CAMBIUM_MAX_OPEN_FILES", value_parser = clap::value_parser!(u64).range(64..))]
    max_open_files: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

/// How log lines look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Text for people.
    Human,
    /// One JSON object per line.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the whole service in one process: the `/v1` API, the PostgreSQL listener, a pageserver and three
    /// safekeepers (gRPC over loopback). Prints one line saying where, and where the admin API key is; Ctrl-C
    /// stops it cleanly, and `up` again on the same data directory finds everything.
    Up {
        /// Data directory (made if missing).
        #[arg(long, env = "CAMBIUM_DATA_DIR", default_value = ".cambium")]
        data_dir: PathBuf,
        /// The API's address.
        #[arg(long, env = "CAMBIUM_LISTEN", default_value = "127.0.0.1:8420")]
        listen: String,
        /// The PostgreSQL address.
        #[arg(long, env = "CAMBIUM_PG_LISTEN", default_value = "127.0.0.1:5433")]
        pg_listen: String,
        /// Remote storage for the pageserver's layers (see `cambium pageserver --remote`).
        #[arg(long, env = "CAMBIUM_REMOTE")]
        remote: Option<String>,
        /// API requests a second per account (0: no limit).
        #[arg(long, env = "CAMBIUM_RATE_LIMIT", default_value_t = 1_000)]
        rate_limit: u32,
        /// Pages cached per branch, at most (8 KiB each).
        #[arg(long, env = "CAMBIUM_PAGE_CACHE_PAGES", default_value_t = 4096)]
        page_cache_pages: usize,
        /// Fault injection for tests: wait this long before running each operation.
        #[arg(long, env = "CAMBIUM_OPERATION_DELAY_MS", default_value_t = 0, hide = true)]
        operation_delay_ms: u64,
        /// Fault injection for tests: pauses and failures of control-plane steps (`api::faults`), e.g.
        /// `branch_create_pause_ms=1500,resume_check_fails=1`.
        #[arg(long, env = "CAMBIUM_FAULTS", default_value = "", hide = true)]
        faults: api::faults::Faults,
        /// Stop a branch's compute store after this long with no session (0: never); the next session
        /// starts it again.
        #[arg(long, env = "CAMBIUM_IDLE_STORE_TIMEOUT_MS", default_value_t = 300_000)]
        idle_store_timeout_ms: u64,
        /// Fault injection for tests: the safekeepers' quiet period after a start, during which they rebuild no
        /// timeline they lack (default 30 s: longer than a proposer's election timeout, so no campaign still
        /// counts a vote their lost copy gave).
        #[arg(long, env = "CAMBIUM_SAFEKEEPER_PULL_QUIET_PERIOD_MS", hide = true)]
        safekeeper_pull_quiet_period_ms: Option<u64>,
        #[command(flatten)]
        reconcile: ReconcileArgs,
        #[command(flatten)]
        http: HttpArgs,
        #[command(flatten)]
        pg: PgArgs,
        #[command(flatten)]
        quotas: QuotaArgs,
    },
    /// Runs the `/v1` API and the PostgreSQL listener against a pageserver and safekeepers run elsewhere.
    Api {
        /// Data directory for the control metadata (made if missing).
        #[arg(long, env = "CAMBIUM_DATA_DIR", default_value = ".cambium")]
        data_dir: PathBuf,
        /// The API's address.
        #[arg(long, env = "CAMBIUM_LISTEN", default_value = "127.0.0.1:8420")]
        listen: String,
        /// The PostgreSQL address.
        #[arg(long, env = "CAMBIUM_PG_LISTEN", default_value = "127.0.0.1:5433")]
        pg_listen: String,
        /// The pageserver, `host:port`.
        #[arg(long, env = "CAMBIUM_PAGESERVER")]
        pageserver: String,
        /// The safekeepers, comma-separated `host:port`.
        #[arg(long, env = "CAMBIUM_SAFEKEEPERS", value_delimiter = ',', required = true)]
        safekeepers: Vec<String>,
        /// API requests a second per account (0: no limit).
        #[arg(long, env = "CAMBIUM_RATE_LIMIT", default_value_t = 1_000)]
        rate_limit: u32,
        /// Pages cached per branch, at most (8 KiB each).
        #[arg(long, env = "CAMBIUM_PAGE_CACHE_PAGES", default_value_t = 4096)]
        page_cache_pages: usize,
        #[command(flatten)]
        reconcile: ReconcileArgs,
        #[command(flatten)]
        http: HttpArgs,
        #[command(flatten)]
        pg: PgArgs,
        #[command(flatten)]
        quotas: QuotaArgs,
    },
    /// Manages API keys in a data directory: create, list, revoke.
    Keys {
        /// Data directory.
        #[arg(long, env = "CAMBIUM_DATA_DIR", default_value = ".cambium")]
        data_dir: PathBuf,
        #[command(subcommand)]
        command: up::KeysCommand,
    },
    /// Writes a database of pages into a tenant, branches it, writes on both sides, restarts and reads back.
    Demo {
        /// Tenant directory (made if missing; must be empty or absent). Default: a new
        /// `.cambium/demo-<unix seconds>` each run, so the command can be repeated.
        #[arg(long, env = "CAMBIUM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Pages to write (8 KiB each).
        #[arg(long, default_value_t = 4096)]
        pages: u32,
    },
    /// Prints every timeline of a tenant directory.
    Inspect {
        /// Tenant directory.
        #[arg(long, env = "CAMBIUM_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Checks every layer file of a tenant directory (every checksum); exits non-zero on damage.
    Verify {
        /// Tenant directory.
        #[arg(long, env = "CAMBIUM_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Runs a safekeeper: the gRPC service that makes WAL durable, over a data directory. Prints one line,
    /// `cambium safekeeper <id> listening on <address>`, once it accepts connections; stops cleanly on SIGINT
    /// or SIGTERM.
    Safekeeper {
        /// This safekeeper's id (for logs).
        #[arg(long, env = "CAMBIUM_SAFEKEEPER_ID")]
        id: u64,
        /// Address to listen on (`127.0.0.1:0` picks a free port; the line printed says which).
        #[arg(long, env = "CAMBIUM_LISTEN", default_value = "127.0.0.1:7676")]
        listen: String,
        /// Data directory (made if missing); one process at a time (it holds a `LOCK` file).
        #[arg(long, env = "CAMBIUM_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Runs a pageserver: pages of any branch at any LSN over gRPC, WAL ingested from the safekeepers.
    Pageserver {
        /// Address to listen on (`127.0.0.1:0` picks a free port; the line printed says which).
        #[arg(long, env = "CAMBIUM_LISTEN", default_value = "127.0.0.1:7677")]
        listen: String,
        /// Data directory (made if missing).
        #[arg(long, env = "CAMBIUM_DATA_DIR")]
        data_dir: PathBuf,
        /// The safekeepers, comma-separated `host:port`.
        #[arg(long, env = "CAMBIUM_SAFEKEEPERS", value_delimiter = ',')]
        safekeepers: Vec<String>,
        /// Remote storage for layers and timeline indexes: `file:///abs/path` or a plain path (a local
        /// directory), or `s3://bucket/prefix` (configured from `AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`,
        /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`). Tenants missing locally are rebuilt from it
        /// at start. Without it, the local disk is the only copy and the safekeepers keep all WAL.
        #[arg(long, env = "CAMBIUM_REMOTE")]
        remote: Option<String>,
        /// Freeze a timeline's in-memory layer (and flush it) once it holds this many bytes of WAL.
        #[arg(long, env = "CAMBIUM_CHECKPOINT_DISTANCE_BYTES", default_value_t = TimelineConfig::default().checkpoint_distance_bytes)]
        checkpoint_distance_bytes: u64,
        /// Freeze a timeline's in-memory layer (and flush it) once it has held data this long.
        #[arg(long, env = "CAMBIUM_CHECKPOINT_TIMEOUT_MS", default_value_t = TimelineConfig::default().checkpoint_timeout_ms)]
        checkpoint_timeout_ms: u64,
        /// Serve Prometheus metrics at `http://ADDR/metrics` (off when absent).
        #[arg(long, env = "CAMBIUM_METRICS_LISTEN")]
        metrics_listen: Option<String>,
    },
    /// Runs a compute for one database: SQLite over the pageserver and the safekeepers, spoken to over the
    /// PostgreSQL wire protocol. The database name of a connection picks the branch (`NAME`, or `NAME@LSN`
    /// read-only at that LSN). Prints one line, `cambium compute listening on <address>`; stops on SIGINT or
    /// SIGTERM.
    Compute {
        /// PostgreSQL address to listen on (`127.0.0.1:0` picks a free port; the line printed says which).
        #[arg(long, env = "CAMBIUM_LISTEN", default_value = "127.0.0.1:5433")]
        listen: String,
        /// The safekeepers, comma-separated `host:port`.
        #[arg(long, env = "CAMBIUM_SAFEKEEPERS", value_delimiter = ',', required = true)]
        safekeepers: Vec<String>,
        /// The pageserver, `host:port`.
        #[arg(long, env = "CAMBIUM_PAGESERVER")]
        pageserver: String,
        /// The tenant id (32 hex digits).
        #[arg(long, env = "CAMBIUM_TENANT")]
        tenant: storage::TenantId,
        /// A branch served: `NAME=TIMELINE_ID:START_LSN` (`db_x=<32 hex>:0/1000000`); repeat for more
        /// (comma-separated in the environment variable).
        #[arg(long = "branch", env = "CAMBIUM_BRANCHES", value_delimiter = ',', required = true, value_parser = parse_branch)]
        branches: Vec<compute::compute::BranchConfig>,
        /// A user: `USER=PASSWORD`; repeat for more (comma-separated in the environment variable).
        #[arg(long = "password", env = "CAMBIUM_PASSWORDS", value_delimiter = ',', required = true, value_parser = parse_password)]
        passwords: Vec<(String, String)>,
        /// Pages cached per branch, at most (8 KiB each).
        #[arg(long, env = "CAMBIUM_PAGE_CACHE_PAGES", default_value_t = 4096)]
        page_cache_pages: usize,
    },
}

/// The API's limits against clients that hold connections (`up` and `api`).
#[derive(Debug, Clone, clap::Args)]
struct HttpArgs {
    /// API connections served at once; past it a new connection gets 503 and is closed at once.
    #[arg(long, env = "CAMBIUM_HTTP_CONNECTIONS_MAX", default_value_t = 1_024,
        value_parser = clap::value_parser!(u32).range(1..))]
    http_connections_max: u32,
    /// A request head must arrive within this long of its first byte, or the connection is closed.
    #[arg(long, env = "CAMBIUM_HTTP_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(1..))]
    http_header_read_timeout_ms: u64,
    /// A request body must arrive within this long of its head's end, or the request is refused with 408.
    #[arg(long, env = "CAMBIUM_HTTP_BODY_READ_TIMEOUT_MS", default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(1..))]
    http_body_read_timeout_ms: u64,
    /// A connection with no request in flight and none arriving is closed after this long.
    #[arg(long, env = "CAMBIUM_HTTP_KEEP_ALIVE_TIMEOUT_MS", default_value_t = 5_000,
        value_parser = clap::value_parser!(u64).range(1..))]
    http_keep_alive_timeout_ms: u64,
}

/// Per-account quotas of `up` and `api` (`api::control::Quotas`); past one, 403 `quota_exceeded`.
#[derive(clap::Args)]
struct QuotaArgs {
    /// Projects one account may have.
    #[arg(long, env = "CAMBIUM_PROJECTS_PER_ACCOUNT_MAX", default_value_t = 100,
        value_parser = clap::value_parser!(u32).range(1..))]
    projects_per_account_max: u32,
    /// Databases one account may have, across its projects.
    #[arg(long, env = "CAMBIUM_DATABASES_PER_ACCOUNT_MAX", default_value_t = 100,
        value_parser = clap::value_parser!(u32).range(1..))]
    databases_per_account_max: u32,
    /// Branches one database may have, its default branch and those restores keep included.
    #[arg(long, env = "CAMBIUM_BRANCHES_PER_DATABASE_MAX", default_value_t = 500,
        value_parser = clap::value_parser!(u32).range(1..))]
    branches_per_database_max: u32,
}

impl QuotaArgs {
    fn quotas(&self) -> api::control::Quotas {
        api::control::Quotas {
            projects_per_account_max: self.projects_per_account_max,
            databases_per_account_max: self.databases_per_account_max,
            branches_per_database_max: self.branches_per_database_max,
        }
    }
}

impl HttpArgs {
    fn limits(&self) -> up::HttpLimits {
        up::HttpLimits {
            connections_max: self.http_connections_max,
            header_read_timeout_ms: self.http_header_read_timeout_ms,
            body_read_timeout_ms: self.http_body_read_timeout_ms,
            keep_alive_timeout_ms: self.http_keep_alive_timeout_ms,
        }
    }
}

/// The reconciler (`up` and `api`).
#[derive(Debug, Clone, clap::Args)]
struct ReconcileArgs {
    /// The wait between rounds of the reconciler, which rebuilds safekeeper copies of timelines that are
    /// missing, broken or hopelessly behind and reports timelines on fewer than three healthy copies.
    #[arg(long, env = "CAMBIUM_RECONCILE_PERIOD_MS", default_value_t = api::reconcile::RECONCILE_PERIOD_MS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(100..))]
    reconcile_period_ms: u64,
}

impl ReconcileArgs {
    fn config(&self) -> api::reconcile::ReconcileConfig {
        api::reconcile::ReconcileConfig {
            period_ms: self.reconcile_period_ms,
        }
    }
}

/// The PostgreSQL listener's session defaults and TLS (`up` and `api`).
#[derive(Debug, Clone, clap::Args)]
struct PgArgs {
    /// Each session's default `statement_timeout` in milliseconds (0: none); sessions change theirs with SET.
    #[arg(long, env = "CAMBIUM_PG_STATEMENT_TIMEOUT_MS", default_value_t = 0)]
    pg_statement_timeout_ms: u64,
    /// Each session's default `idle_in_transaction_session_timeout` in milliseconds (0: none): a transaction
    /// left idle that long is rolled back and its connection ended, so it cannot hold the write lock forever.
    #[arg(long, env = "CAMBIUM_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS", default_value_t = 600_000)]
    pg_idle_in_transaction_timeout_ms: u64,
    /// PEM certificate (chain) for TLS on the PostgreSQL listener; with `--pg-tls-key`. Without them a
    /// self-signed certificate is made once in `<data dir>/tls/`.
    #[arg(long, env = "CAMBIUM_PG_TLS_CERT", requires = "pg_tls_key")]
    pg_tls_cert: Option<PathBuf>,
    /// PEM private key of `--pg-tls-cert`.
    #[arg(long, env = "CAMBIUM_PG_TLS_KEY", requires = "pg_tls_cert")]
    pg_tls_key: Option<PathBuf>,
    /// Sessions one database may have open at once, over all its branches (0: no limit but the listener's
    /// 1024); past it a connection gets FATAL 53300.
    #[arg(long, env = "CAMBIUM_PG_CONNECTIONS_PER_DATABASE_MAX",
        default_value_t = compute::host::CONNECTIONS_PER_DATABASE_MAX_DEFAULT)]
    pg_connections_per_database_max: usize,
}

impl PgArgs {
    fn options(&self) -> up::PgOptions {
        up::PgOptions {
            session_defaults: compute::pg::SessionDefaults {
                statement_timeout_ms: self.pg_statement_timeout_ms,
                idle_in_transaction_timeout_ms: self.pg_idle_in_transaction_timeout_ms,
            },
            tls_cert_and_key: self.pg_tls_cert.clone().zip(self.pg_tls_key.clone()),
            connections_per_database_max: self.pg_connections_per_database_max,
        }
    }
}

/// Parses `NAME=TIMELINE_ID:START_LSN`.
fn parse_branch(text: &str) -> Result<compute::compute::BranchConfig, String> {
    let (name, rest) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=TIMELINE_ID:START_LSN"))?;
    let (timeline, lsn) = rest
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not NAME=TIMELINE_ID:START_LSN"))?;
    Ok(compute::compute::BranchConfig {
        name: name.to_owned(),
        timeline_id: timeline.parse().map_err(|_| format!("bad timeline id {timeline:?}"))?,
        start_lsn: lsn.parse().map_err(|_| format!("bad LSN {lsn:?}"))?,
    })
}

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

/// Parses `USER=PASSWORD`.
fn parse_password(text: &str) -> Result<(String, String), String> {
    let (user, password) = text.split_once('=').ok_or_else(|| "not USER=PASSWORD".to_owned())?;
    Ok((user.to_owned(), password.to_owned()))
}

/// `cambium api`'s idle-store timeout (as `up`'s default).
const IDLE_STORE_TIMEOUT_MS_DEFAULT: u64 = 300_000;

/// How long a stopping safekeeper waits for in-flight requests before it exits anyway.
const SAFEKEEPER_CLOSE_TIMEOUT_MS: u64 = 5_000;

fn main() -> Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    config::apply::<Cli>(&args)?;
    let cli = Cli::parse_from(args);
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Human => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    set_open_files_limit(cli.max_open_files);
    match cli.command {
        Command::Up {
            data_dir,
            listen,
            pg_listen,
            remote,
            rate_limit,
            page_cache_pages,
            operation_delay_ms,
            faults,
            idle_store_timeout_ms,
            safekeeper_pull_quiet_period_ms,
            reconcile,
            http,
            pg,
            quotas,
        } => {
            let options = up::ApiOptions {
                data_dir,
                listen,
                pg_listen,
                rate_limit_per_s: rate_limit,
                page_cache_pages,
                operation_delay_ms,
                faults,
                idle_store_timeout_ms,
                http: http.limits(),
                pg: pg.options(),
                quotas: quotas.quotas(),
                reconcile: reconcile.config(),
                pull_quiet_period_ms: safekeeper_pull_quiet_period_ms,
            };
            run_service("up", |shutdown| up::up(options, remote, shutdown))
        }
        Command::Api {
            data_dir,
            listen,
            pg_listen,
            pageserver,
            safekeepers,
            rate_limit,
            page_cache_pages,
            reconcile,
            http,
            pg,
            quotas,
        } => {
            let options = up::ApiOptions {
                data_dir,
                listen,
                pg_listen,
                rate_limit_per_s: rate_limit,
                page_cache_pages,
                operation_delay_ms: 0,
                faults: api::faults::Faults::default(),
                idle_store_timeout_ms: IDLE_STORE_TIMEOUT_MS_DEFAULT,
                http: http.limits(),
                pg: pg.options(),
                quotas: quotas.quotas(),
                reconcile: reconcile.config(),
                pull_quiet_period_ms: None,
            };
            run_service("api", |shutdown| up::api(options, pageserver, safekeepers, shutdown))
        }
        Command::Keys { data_dir, command } => up::keys(&data_dir, command),
        Command::Demo { data_dir, pages } => {
            let data_dir = data_dir.unwrap_or_else(|| {
                let seconds = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                PathBuf::from(format!(".cambium/demo-{seconds}"))
            });
            demo(&data_dir, pages)
        }
        Command::Inspect { data_dir } => inspect(&data_dir),
        Command::Verify { data_dir } => verify(&data_dir),
        Command::Safekeeper { id, listen, data_dir } => run_safekeeper(id, &listen, data_dir),
        Command::Pageserver {
            listen,
            data_dir,
            safekeepers,
            remote,
            checkpoint_distance_bytes,
            checkpoint_timeout_ms,
            metrics_listen,
        } => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("pageserver")
                .build()
                .context("starting the tokio runtime")?;
            let mut config = pageserver::runner::PageserverConfig::new(data_dir, safekeepers);
            config.timeline.checkpoint_distance_bytes = checkpoint_distance_bytes;
            config.timeline.checkpoint_timeout_ms = checkpoint_timeout_ms;
            if let Some(url) = remote {
                let storage = pageserver::remote::RemoteStorage::from_url(&url, Default::default())
                    .with_context(|| format!("opening remote storage {url}"))?;
                config.remote = Some(Arc::new(storage));
            }
            runtime.block_on(serve_pageserver(&listen, metrics_listen.as_deref(), config))
        }
        Command::Compute {
            listen,
            safekeepers,
            pageserver,
            tenant,
            branches,
            passwords,
            page_cache_pages,
        } => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("compute")
                .build()
                .context("starting the tokio runtime")?;
            let config = compute::compute::ComputeConfig {
                listen,
                safekeepers,
                pageserver,
                tenant_id: tenant,
                branches,
                passwords: passwords.into_iter().collect(),
                page_cache_capacity_pages: page_cache_pages,
            };
            let result = runtime.block_on(serve_compute(config));
            // The stores' runtimes shut down in the background; do not wait on blocking SQLite calls.
            runtime.shutdown_timeout(Duration::from_secs(5));
            result
        }
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

fn run_safekeeper(id: u64, listen: &str, data_dir: PathBuf) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("safekeeper")
        .build()
        .context("starting the tokio runtime")?;
    let result = runtime.block_on(serve_safekeeper(id, listen, data_dir));
    // Dropping the runtime waits for blocking tasks (an fdatasync in progress) and drops every task, so the
    // last references to the node go and its lock file is removed before the process exits.
    drop(runtime);
    result
}

async fn serve_safekeeper(id: u64, listen: &str, data_dir: PathBuf) -> Result<()> {
    let config = NodeConfig {
        node_id: id,
        data_dir: data_dir.clone(),
        store: FileStoreConfig::default(),
    };
    let node = tokio::task::spawn_blocking(move || SafekeeperNode::open(config))
        .await
        .context("opening the safekeeper node")?
        .with_context(|| format!("opening the safekeeper data directory {}", data_dir.display()))?;
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

fn open_tenant(dir: &Path) -> Result<Tenant> {
    Tenant::open(dir, TimelineConfig::default(), Arc::new(PageCache::new(16 * 1024)))
        .with_context(|| format!("opening tenant at {}", dir.display()))
}

fn page_record(ts_us: u64, db_size_pages: u32, blocks: std::ops::Range<u32>, fill: u8) -> WalRecord {
    let entries = blocks
        .map(|b| (Key::page(b), Value::Image(Bytes::from(vec![fill; PAGE_SIZE_BYTES]))))
        .collect();
    WalRecord {
        commit_ts_us: ts_us,
        db_size_pages,
        entries,
    }
}

fn demo(dir: &Path, pages: u32) -> Result<()> {
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        anyhow::bail!("{} is not empty; pass an empty or new --data-dir", dir.display());
    }
    let tenant = open_tenant(dir)?;
    let main_id = TimelineId::generate();
    let main = tenant.create_timeline(main_id, Lsn(0x100_0000))?;
    let started = Instant::now();
    let mut lsn = main.start_lsn();
    for chunk_start in (0..pages).step_by(64) {
        let chunk_end = (chunk_start + 64).min(pages);
        lsn = main.ingest_record(lsn, &page_record(1, chunk_end, chunk_start..chunk_end, 1))?;
    }
    main.checkpoint()?;
    println!(
        "wrote {pages} pages ({} MiB) in {:?}, up to LSN {lsn}",
        pages as u64 * 8 / 1024,
        started.elapsed()
    );

    let started = Instant::now();
    let branch_id = TimelineId::generate();
    let branch = tenant.branch(branch_id, main_id, BranchPoint::Latest)?;
    println!(
        "branched {branch_id} at {} in {:?}",
        branch.start_lsn(),
        started.elapsed()
    );

    let patch = Value::Delta(vec![Patch {
        offset: 0,
        data: Bytes::from_static(b"branch"),
    }]);
    let branch_lsn = branch.ingest_record(
        branch.start_lsn(),
        &WalRecord {
            commit_ts_us: 2,
            db_size_pages: pages,
            entries: vec![(Key::page(0), patch)],
        },
    )?;
    let main_lsn = main.ingest_record(lsn, &page_record(3, pages, 0..1, 9))?;
    branch.checkpoint()?;
    main.checkpoint()?;
    drop((main, branch));
    drop(tenant);

    let tenant = open_tenant(dir)?;
    let main = tenant.timeline(main_id)?;
    let branch = tenant.timeline(branch_id)?;
    let on_branch = branch.get_page(Key::page(0), branch_lsn)?;
    let on_main = main.get_page(Key::page(0), main_lsn)?;
    let before = main.get_page(Key::page(0), lsn)?;
    anyhow::ensure!(
        &on_branch[..6] == b"branch" && on_branch[6] == 1,
        "branch page is wrong"
    );
    anyhow::ensure!(on_main[0] == 9 && before[0] == 1, "main pages are wrong");
    println!(
        "after restart: branch page 1 starts {:?}, main page 1 is {} now and {} at {lsn}",
        String::from_utf8_lossy(&on_branch[..6]),
        on_main[0],
        before[0]
    );
    inspect(dir)
}

fn inspect(dir: &Path) -> Result<()> {
    let tenant = open_tenant(dir)?;
    let mut timelines = tenant.timelines();
    timelines.sort_by_key(|t| t.start_lsn());
    for timeline in timelines {
        let info = timeline.info();
        let ancestor = info
            .ancestor
            .map(|(id, lsn)| format!("{id}@{lsn}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{} ancestor={} start={} last_record={} disk_consistent={} gc_cutoff={} size={} pages layers={} ({} bytes)",
            info.timeline_id,
            ancestor,
            info.start_lsn,
            info.last_record_lsn,
            info.disk_consistent_lsn,
            info.gc_cutoff_lsn,
            info.db_size_pages,
            info.layer_count,
            info.layer_bytes
        );
    }
    Ok(())
}

fn verify(dir: &Path) -> Result<()> {
    let tenant = open_tenant(dir)?;
    let mut damaged = 0usize;
    let mut checked = 0usize;
    for timeline in tenant.timelines() {
        for desc in timeline.layer_descs() {
            let file = storage::layer::file::LayerFile::open_for_verify(timeline.dir().join(desc.file_name()), desc);
            checked += 1;
            if let Err(e) = file.verify() {
                damaged += 1;
                eprintln!("{e}");
            }
        }
    }
    println!("checked {checked} layer files, {damaged} damaged");
    anyhow::ensure!(damaged == 0, "{damaged} damaged layer files");
    Ok(())
}
