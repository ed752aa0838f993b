//! The command line's definitions: the subcommands and their flags (each with its `CAMBIUM_…` variable, which
//! `--config FILE` fills), the flag groups `up` and `api` share, and the parsers of flag values. What each
//! subcommand does is elsewhere: `main` dispatches, [`crate::up`] runs `up`, `api` and `keys`, `services` the
//! storage and compute parts alone, `tenant_dir` the engine commands over a tenant directory, and the client's
//! commands (`projects`, `branches`, `psql`, …) are defined and run in [`crate::client`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use storage::TimelineConfig;

use crate::up;

#[derive(Parser)]
#[command(
    name = "cambium",
    version,
    about = "Databases with instant copy-on-write branches and point-in-time restore",
    after_help = crate::client::EXIT_CODES_HELP
)]
pub(crate) struct Cli {
    /// A TOML file of settings for the command (one key per flag; flags and `CAMBIUM_…` variables win).
    #[arg(long, global = true, env = "CAMBIUM_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Log lines on stderr as text for people or as JSON objects for machines (level filter: `RUST_LOG`).
    #[arg(long, global = true, env = "CAMBIUM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human)]
    pub(crate) log_format: LogFormat,
    /// Open files (descriptors) the process may use. Default: as many as the system's hard limit allows (the
    /// soft limit is raised to it). New sessions and branches are refused before the process runs out.
    #[arg(long, global = true, env = "CAMBIUM_MAX_OPEN_FILES", value_parser = clap::value_parser!(u64).range(64..))]
    pub(crate) max_open_files: Option<u64>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How log lines look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Text for people.
    Human,
    /// One JSON object per line.
    Json,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Runs the whole service in one process: the `/v1` API, the PostgreSQL listener, a pageserver and three
    /// safekeepers (gRPC over loopback). Prints one line saying where, and where the admin API key is; Ctrl-C
    /// stops it cleanly, and `up` again on the same data directory finds everything.
    Up {
        /// Data directory (made if missing).
        #[arg(long, env = "CAMBIUM_DATA_DIR", default_value = ".cambium")]
        data_dir: PathBuf,
        /// The control metadata in a PostgreSQL database (`postgresql://user@host:port/database`, no TLS) instead
        /// of `metadata.sqlite` in the data directory; several `cambium api` processes may share one.
        #[arg(long, env = "CAMBIUM_METADATA")]
        metadata: Option<String>,
        #[command(flatten)]
        metadata_pool: MetadataPoolArgs,
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
        #[command(flatten)]
        cache: CacheArgs,
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
        /// The control metadata in a PostgreSQL database (`postgresql://user@host:port/database`, no TLS) instead
        /// of `metadata.sqlite` in the data directory; several `cambium api` processes may share one.
        #[arg(long, env = "CAMBIUM_METADATA")]
        metadata: Option<String>,
        #[command(flatten)]
        metadata_pool: MetadataPoolArgs,
        /// The API's address.
        #[arg(long, env = "CAMBIUM_LISTEN", default_value = "127.0.0.1:8420")]
        listen: String,
        /// The PostgreSQL address.
        #[arg(long, env = "CAMBIUM_PG_LISTEN", default_value = "127.0.0.1:5433")]
        pg_listen: String,
        /// The pageservers, comma-separated `host:port` (`--pageserver` is the same flag): each database's
        /// tenant is placed on one, the first also holding the databases from before placement. Several need one
        /// shared `--remote` for moves.
        #[arg(
            long = "pageservers",
            visible_alias = "pageserver",
            env = "CAMBIUM_PAGESERVERS",
            value_delimiter = ',',
            required = true
        )]
        pageservers: Vec<String>,
        /// The safekeepers, comma-separated `host:port`.
        #[arg(long, env = "CAMBIUM_SAFEKEEPERS", value_delimiter = ',', required = true)]
        safekeepers: Vec<String>,
        /// The PostgreSQL address (`host:port`) proxies reach this compute host at, as registered in the metadata
        /// (default: the address the PostgreSQL listener is bound to; set it when listening on 0.0.0.0).
        #[arg(long, env = "CAMBIUM_ADVERTISE_PG")]
        advertise_pg: Option<String>,
        /// The base URL (`http://host:port`) the other API processes forward this host's requests to (default:
        /// the address the API is bound to, `https://` with `--api-tls-cert`).
        #[arg(long, env = "CAMBIUM_ADVERTISE_API")]
        advertise_api: Option<String>,
        /// The `host:port` in the connection strings the API shows (default: the PostgreSQL listener's; with
        /// several compute hosts, the address of the `cambium proxy`s).
        #[arg(long, env = "CAMBIUM_CONNECTION_ADDRESS")]
        connection_address: Option<String>,
        /// API requests a second per account (0: no limit).
        #[arg(long, env = "CAMBIUM_RATE_LIMIT", default_value_t = 1_000)]
        rate_limit: u32,
        /// Stop a branch's compute store after this long with no session (0: never); the next session
        /// starts it again.
        #[arg(long, env = "CAMBIUM_IDLE_STORE_TIMEOUT_MS", default_value_t = 300_000)]
        idle_store_timeout_ms: u64,
        /// Fault injection for tests: wait this long before running each operation.
        #[arg(long, env = "CAMBIUM_OPERATION_DELAY_MS", default_value_t = 0, hide = true)]
        operation_delay_ms: u64,
        /// Fault injection for tests: pauses and failures of control-plane steps (`api::faults`), as `up`'s.
        #[arg(long, env = "CAMBIUM_FAULTS", default_value = "", hide = true)]
        faults: api::faults::Faults,
        #[command(flatten)]
        cache: CacheArgs,
        #[command(flatten)]
        reconcile: ReconcileArgs,
        #[command(flatten)]
        http: HttpArgs,
        #[command(flatten)]
        pg: PgArgs,
        #[command(flatten)]
        quotas: QuotaArgs,
    },
    /// Routes PostgreSQL connections to the compute host serving each database (several `cambium api` processes
    /// on shared PostgreSQL metadata): TLS terminated here, the database name resolved through the metadata, the
    /// session relayed to its host. Prints one line, `cambium proxy listening on <address>`.
    Proxy {
        /// The PostgreSQL address clients connect to (`127.0.0.1:0` picks a free port; the line printed says which).
        #[arg(long, env = "CAMBIUM_PROXY_LISTEN", default_value = "127.0.0.1:5432")]
        listen: String,
        /// The control metadata (`postgresql://user@host:port/database`), as the API processes were given it.
        #[arg(long, env = "CAMBIUM_METADATA")]
        metadata: String,
        /// Directory for the self-signed certificate made when no `--tls-cert` is given.
        #[arg(long, env = "CAMBIUM_DATA_DIR", default_value = ".cambium-proxy")]
        data_dir: PathBuf,
        /// PEM certificate (chain) for TLS with clients; with `--tls-key`. Without them a self-signed pair is made
        /// once in the data directory.
        #[arg(long, env = "CAMBIUM_PROXY_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key of `--tls-cert`.
        #[arg(long, env = "CAMBIUM_PROXY_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Client connections at once; more get FATAL 53300.
        #[arg(long, env = "CAMBIUM_PROXY_CONNECTIONS_MAX", default_value_t = 1024)]
        connections_max: usize,
        /// How long a connection waits for a database whose compute host is being replaced, in milliseconds.
        #[arg(long, env = "CAMBIUM_PROXY_FAILOVER_WAIT_MS", default_value_t = 30_000)]
        failover_wait_ms: u64,
    },
    /// Manages API keys in a data directory: create, list, revoke.
    Keys {
        /// Data directory.
        #[arg(long, env = "CAMBIUM_DATA_DIR", default_value = ".cambium")]
        data_dir: PathBuf,
        /// The control metadata in a PostgreSQL database (`postgresql://…`), as `up`/`api --metadata` gave it.
        #[arg(long, env = "CAMBIUM_METADATA")]
        metadata: Option<String>,
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
        /// Fault injection for tests: the quiet period after a start, during which this safekeeper rebuilds no
        /// timeline it lacks (`PullTimeline`), instead of the default 30 s.
        #[arg(long, env = "CAMBIUM_SAFEKEEPER_PULL_QUIET_PERIOD_MS", hide = true)]
        pull_quiet_period_ms: Option<u64>,
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
        /// This pageserver's id among several sharing one `--remote` (keep it across restarts and disk
        /// replacements): each tenant it uploads is marked with it, and at start it rebuilds only the tenants
        /// marked with it (without an id: only unmarked ones), never another pageserver's.
        #[arg(long, env = "CAMBIUM_PAGESERVER_ID")]
        id: Option<String>,
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
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// The client of the `/v1` API: `projects`, `databases`, `branches`, `operations`, `endpoints`, `psql`,
    /// `connection-string`, `request`, `completions`.
    #[command(flatten)]
    Client(crate::client::ClientCommand),
}

/// The compute's page caches and prefetching (`up`, `api` and `compute`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CacheArgs {
    /// Bytes of pages the compute keeps in memory for all its branches together (default: an eighth of the
    /// machine's memory, between 64 MiB and 8 GiB); past it pages are evicted across branches, least
    /// recently used first (CLOCK), to the file cache.
    #[arg(long, env = "CAMBIUM_PAGE_CACHE_BYTES")]
    page_cache_bytes: Option<usize>,
    /// Bytes of the local file cache, where pages evicted from memory go (0: none). Sparse: disk is used as it
    /// fills.
    #[arg(long, env = "CAMBIUM_FILE_CACHE_BYTES", default_value_t = compute::cache::FILE_CACHE_BYTES_DEFAULT)]
    file_cache_bytes: u64,
    /// The local file cache's file (default: `<data dir>/compute/file_cache`; `compute`, which has no data
    /// directory, keeps no file cache without it). It outlives restarts: its pages stay valid.
    #[arg(long, env = "CAMBIUM_FILE_CACHE_PATH")]
    file_cache_path: Option<PathBuf>,
    /// Pages requested ahead of a reader that reads in order (a scan), on the pageserver stream (0: none).
    #[arg(long, env = "CAMBIUM_PREFETCH_WINDOW_PAGES",
        default_value_t = compute::remote_store::PrefetchConfig::default().window_pages)]
    prefetch_window_pages: u32,
    /// Start a new (or restored) branch's store on its first session instead of in the background as soon as
    /// the branch is made (which lets the first query skip the store's start: the election and the database
    /// size).
    #[arg(long, env = "CAMBIUM_LAZY_BRANCH_STORES")]
    lazy_branch_stores: bool,
}

impl CacheArgs {
    /// The host's cache configuration; the file cache in `data_dir` unless a path was given.
    pub(crate) fn config(&self, data_dir: Option<&std::path::Path>) -> compute::cache::HostCacheConfig {
        let path = self
            .file_cache_path
            .clone()
            .or_else(|| data_dir.map(|dir| dir.join("compute").join("file_cache")));
        compute::cache::HostCacheConfig {
            memory_budget_bytes: self
                .page_cache_bytes
                .unwrap_or_else(compute::cache::memory_budget_bytes_default),
            file: path
                .filter(|_| self.file_cache_bytes > 0)
                .map(|path| compute::cache::FileCacheConfig {
                    path,
                    size_bytes: self.file_cache_bytes,
                }),
        }
    }

    /// When a defined branch's store starts.
    pub(crate) fn branch_stores(&self) -> compute::host::BranchStoreStart {
        if self.lazy_branch_stores {
            compute::host::BranchStoreStart::FirstSession
        } else {
            compute::host::BranchStoreStart::WhenDefined
        }
    }

    /// How far ahead stores prefetch.
    pub(crate) fn prefetch(&self) -> compute::remote_store::PrefetchConfig {
        compute::remote_store::PrefetchConfig {
            window_pages: self.prefetch_window_pages,
            ..Default::default()
        }
    }
}

/// The API's limits against clients that hold connections, and its optional TLS (`up` and `api`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct HttpArgs {
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
    /// PEM certificate (chain) for HTTPS on the API; with `--api-tls-key`. Without them the API speaks plain
    /// HTTP (meant for loopback).
    #[arg(long, env = "CAMBIUM_API_TLS_CERT", requires = "api_tls_key")]
    api_tls_cert: Option<PathBuf>,
    /// PEM private key of `--api-tls-cert`.
    #[arg(long, env = "CAMBIUM_API_TLS_KEY", requires = "api_tls_cert")]
    api_tls_key: Option<PathBuf>,
}

/// The metadata's connection pool of `up` and `api` (`api::store::pool`).
#[derive(clap::Args)]
pub(crate) struct MetadataPoolArgs {
    /// Connections to the control metadata open at most. Default: 8 on PostgreSQL (`--metadata`), where each
    /// statement is a round trip and several overlap; 1 on SQLite, in process, where more did not pay.
    #[arg(long, env = "CAMBIUM_METADATA_CONNECTIONS_MAX",
        value_parser = clap::value_parser!(u32).range(1..=1_000))]
    metadata_connections_max: Option<u32>,
    /// How long a call waits for a metadata connection when all are in use; past it the request gets 503.
    #[arg(long, env = "CAMBIUM_METADATA_CONNECTION_WAIT_MS",
        default_value_t = api::store::pool::CONNECTION_WAIT_MS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(1..))]
    metadata_connection_wait_ms: u64,
}

impl MetadataPoolArgs {
    /// The pool's bounds; `metadata` says which backend's default size applies.
    pub(crate) fn config(&self, metadata: Option<&str>) -> api::store::pool::PoolConfig {
        use api::store::pool::PoolConfig;
        let default = if metadata.is_some() {
            PoolConfig::POSTGRES_DEFAULT
        } else {
            PoolConfig::SQLITE_DEFAULT
        };
        PoolConfig {
            connections_max: self.metadata_connections_max.unwrap_or(default.connections_max),
            connection_wait_ms: self.metadata_connection_wait_ms,
        }
    }
}

/// Per-account quotas of `up` and `api` (`api::control::Quotas`); past one, 403 `quota_exceeded`.
#[derive(clap::Args)]
pub(crate) struct QuotaArgs {
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
    pub(crate) fn quotas(&self) -> api::control::Quotas {
        api::control::Quotas {
            projects_per_account_max: self.projects_per_account_max,
            databases_per_account_max: self.databases_per_account_max,
            branches_per_database_max: self.branches_per_database_max,
        }
    }
}

impl HttpArgs {
    pub(crate) fn limits(&self) -> up::HttpLimits {
        up::HttpLimits {
            connections_max: self.http_connections_max,
            header_read_timeout_ms: self.http_header_read_timeout_ms,
            body_read_timeout_ms: self.http_body_read_timeout_ms,
            keep_alive_timeout_ms: self.http_keep_alive_timeout_ms,
            tls_cert_and_key: self.api_tls_cert.clone().zip(self.api_tls_key.clone()),
        }
    }
}

/// The reconciler, the branch expiry sweep, the webhook sender and the consumption sampler (`up` and `api`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ReconcileArgs {
    /// The wait between rounds of the reconciler, which rebuilds safekeeper copies of timelines that are
    /// missing, broken or hopelessly behind and reports timelines on fewer than three healthy copies.
    #[arg(long, env = "CAMBIUM_RECONCILE_PERIOD_MS", default_value_t = api::reconcile::RECONCILE_PERIOD_MS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(100..))]
    reconcile_period_ms: u64,
    /// A safekeeper that has answered none of the reconciler's probes for this long is dead: each timeline on
    /// it gets another safekeeper in its place (its writer fenced, the new set recorded, the copy pulled from
    /// the survivors). Only with more than three safekeepers.
    #[arg(long, env = "CAMBIUM_SAFEKEEPER_DEAD_AFTER_MS", default_value_t = api::safekeeper_sets::DEAD_AFTER_MS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(100..))]
    safekeeper_dead_after_ms: u64,
    /// A pageserver (of several) that has answered none of the probes for this long is lost: each database on
    /// it is re-placed on a live one, which attaches its tenant from the remote storage and the safekeepers'
    /// WAL (0: never).
    #[arg(long, env = "CAMBIUM_PAGESERVER_DEAD_AFTER_MS", default_value_t = 60_000)]
    pageserver_dead_after_ms: u64,
    /// The wait between sweeps of the branch expiry, which deletes branches whose `expires_at` has passed: how
    /// late after it a branch may go.
    #[arg(long, env = "CAMBIUM_BRANCH_EXPIRY_PERIOD_MS", default_value_t = api::control::expiry::EXPIRY_PERIOD_MS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(100..))]
    branch_expiry_period_ms: u64,
    /// The wait after a webhook delivery's first failed attempt; it doubles after each failed one (at most an
    /// hour).
    #[arg(long, env = "CAMBIUM_WEBHOOK_FIRST_RETRY_MS", default_value_t = api::webhooks::WebhookConfig::default().first_retry_wait_ms,
        value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    webhook_first_retry_ms: u64,
    /// Attempts a webhook delivery makes before it is `failed`.
    #[arg(long, env = "CAMBIUM_WEBHOOK_ATTEMPTS_MAX", default_value_t = api::webhooks::WebhookConfig::default().attempts_max,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(api::store::webhooks::ATTEMPTS_PER_DELIVERY_MAX)))]
    webhook_attempts_max: u32,
    /// The wait between consumption samples (each branch's logical size, WAL written and compute time, added to
    /// hourly buckets): how finely compute time is measured.
    #[arg(long, env = "CAMBIUM_CONSUMPTION_PERIOD_MS", default_value_t = api::consumption::CONSUMPTION_PERIOD_MS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(100..))]
    consumption_period_ms: u64,
}

impl ReconcileArgs {
    pub(crate) fn expiry_config(&self) -> api::control::expiry::ExpiryConfig {
        api::control::expiry::ExpiryConfig {
            period_ms: self.branch_expiry_period_ms,
        }
    }

    pub(crate) fn consumption_config(&self) -> api::consumption::ConsumptionConfig {
        api::consumption::ConsumptionConfig {
            period_ms: self.consumption_period_ms,
        }
    }

    pub(crate) fn webhook_config(&self) -> api::webhooks::WebhookConfig {
        api::webhooks::WebhookConfig {
            first_retry_wait_ms: self.webhook_first_retry_ms,
            attempts_max: self.webhook_attempts_max,
            ..api::webhooks::WebhookConfig::default()
        }
    }

    pub(crate) fn pageserver_dead_after_ms(&self) -> u64 {
        self.pageserver_dead_after_ms
    }

    pub(crate) fn config(&self) -> api::reconcile::ReconcileConfig {
        api::reconcile::ReconcileConfig {
            period_ms: self.reconcile_period_ms,
            safekeeper_dead_after_ms: self.safekeeper_dead_after_ms,
        }
    }
}

/// The PostgreSQL listener's session defaults and TLS (`up` and `api`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PgArgs {
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
    /// Sessions the databases of one account may have open at once, over all of them (0: no limit but the
    /// listener's 1024); past it a connection gets FATAL 53300, so one account cannot take every connection.
    #[arg(long, env = "CAMBIUM_PG_CONNECTIONS_PER_ACCOUNT_MAX",
        default_value_t = compute::host::CONNECTIONS_PER_ACCOUNT_MAX_DEFAULT)]
    pg_connections_per_account_max: usize,
    /// Largest transaction, in bytes of pages written (4 GiB by default); a larger one fails at COMMIT with
    /// SQLSTATE 54000 naming this limit, before anything is sent, and the session goes on.
    #[arg(long, env = "CAMBIUM_TRANSACTION_BYTES_MAX",
        default_value_t = compute::remote_store::TRANSACTION_BYTES_MAX_DEFAULT)]
    transaction_bytes_max: usize,
    /// Bytes of one transaction's pages kept in memory (64 MiB by default); the rest goes to a temporary file.
    #[arg(long, env = "CAMBIUM_DIRTY_MEMORY_BYTES_MAX",
        default_value_t = compute::dirty_pages::DIRTY_MEMORY_BYTES_MAX_DEFAULT)]
    dirty_memory_bytes_max: usize,
}

impl PgArgs {
    pub(crate) fn options(&self) -> up::PgOptions {
        up::PgOptions {
            session_defaults: compute::pg::SessionDefaults {
                statement_timeout_ms: self.pg_statement_timeout_ms,
                idle_in_transaction_timeout_ms: self.pg_idle_in_transaction_timeout_ms,
            },
            tls_cert_and_key: self.pg_tls_cert.clone().zip(self.pg_tls_key.clone()),
            connections_per_database_max: self.pg_connections_per_database_max,
            connections_per_account_max: self.pg_connections_per_account_max,
            transactions: compute::remote_store::TransactionConfig {
                transaction_bytes_max: self.transaction_bytes_max,
                dirty_memory_bytes_max: self.dirty_memory_bytes_max,
                ..Default::default()
            },
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

/// Parses `USER=PASSWORD`.
fn parse_password(text: &str) -> Result<(String, String), String> {
    let (user, password) = text.split_once('=').ok_or_else(|| "not USER=PASSWORD".to_owned())?;
    Ok((user.to_owned(), password.to_owned()))
}
