//! `cambium up` (the whole service in one process) and `cambium api` (the API and computes, against storage
//! services elsewhere), and `cambium keys`.
//!
//! `up` lays its data directory out as `safekeeper-{1,2,3}/`, `pageserver/`, `metadata.sqlite` (the control
//! metadata) and `api_key` (the admin key, written on first start). The directory and those subdirectories are
//! mode 0700, the metadata and the key 0600; an install with looser modes is tightened at start (`api::files`).
//! The parts talk gRPC over
//! loopback on ports picked at start, exactly as separate hosts would; only the API (8420) and PostgreSQL
//! (5433) ports are fixed. Ctrl-C stops the API, then the computes, the pageserver (which checkpoints) and the
//! safekeepers, in that order.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use api::backend::{Backend, BackendConfig};
use api::control::{Control, ControlConfig};
use api::http::{HttpConfig, ServeConfig};
use api::store::{AccountId, MetadataLocation, Store};
use compute::host::{ComputeHost, HostConfig};
use safekeeper::filestore::FileStoreConfig;
use safekeeper::node::{NodeConfig, SafekeeperNode};

/// The region code of a single-host deployment.
pub const LOCAL_REGION: &str = "local";
/// Safekeepers `up` runs.
const SAFEKEEPERS: u64 = 3;
/// How long a stopping safekeeper waits for in-flight requests.
const SAFEKEEPER_CLOSE_TIMEOUT_MS: u64 = 5_000;
/// Bound of one control-plane call to the storage.
const BACKEND_REQUEST_TIMEOUT_MS: u64 = 10_000;
/// Bound of connecting to a storage service.
const BACKEND_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Bound of one replica repair (`PullTimeline`): it copies a timeline's WAL.
const BACKEND_PULL_TIMEOUT_MS: u64 = 600_000;

/// What `up` and `api` share.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// The data directory.
    pub data_dir: PathBuf,
    /// The PostgreSQL URL of the control metadata; `None`: `metadata.sqlite` in the data directory.
    pub metadata: Option<String>,
    /// The metadata's connection pool.
    pub metadata_pool: api::store::pool::PoolConfig,
    /// The API's listen address.
    pub listen: String,
    /// The PostgreSQL listen address.
    pub pg_listen: String,
    /// Requests a second per account (0: no limit).
    pub rate_limit_per_s: u32,
    /// The compute host's page caches.
    pub cache: compute::cache::HostCacheConfig,
    /// How far ahead the compute's stores prefetch.
    pub prefetch: compute::remote_store::PrefetchConfig,
    /// Fault injection for tests: the worker waits this long before each operation.
    pub operation_delay_ms: u64,
    /// Fault injection for tests (`api::faults`).
    pub faults: api::faults::Faults,
    /// Per-account limits.
    pub quotas: api::control::Quotas,
    /// A branch's store with no session for this long is stopped (0: never).
    pub idle_store_timeout_ms: u64,
    /// When a defined branch's store starts (in the background at once, or on its first session).
    pub branch_stores: compute::host::BranchStoreStart,
    /// The API's connection limits.
    pub http: HttpLimits,
    /// The PostgreSQL listener's session defaults and TLS.
    pub pg: PgOptions,
    /// The reconciler (replica repair, half-done deletions).
    pub reconcile: api::reconcile::ReconcileConfig,
    /// A pageserver that answers no probe for this long has its databases re-placed on a live one (0: never;
    /// `api::control::pageserver_loss`).
    pub pageserver_dead_after_ms: u64,
    /// The branch expiry sweep.
    pub expiry: api::control::expiry::ExpiryConfig,
    /// The webhook sender's retries.
    pub webhooks: api::webhooks::WebhookConfig,
    /// The consumption sampler.
    pub consumption: api::consumption::ConsumptionConfig,
    /// `up` only, for tests: the safekeepers' pull quiet period instead of the default
    /// (`safekeeper::node::PULL_QUIET_PERIOD_MS`).
    pub pull_quiet_period_ms: Option<u64>,
    /// Where this process is reached (`api` only; `up` uses its bound addresses).
    pub advertise: Advertise,
}

/// Where other processes reach this one, and the address in connection strings; each defaults to the bound
/// address.
#[derive(Debug, Clone, Default)]
pub struct Advertise {
    /// The PostgreSQL `host:port` proxies reach this compute host at.
    pub pg: Option<String>,
    /// The `/v1` base URL the other API processes forward requests to.
    pub api_url: Option<String>,
    /// The `host:port` in connection strings (the proxies').
    pub connection_address: Option<String>,
}

/// The PostgreSQL listener's settings (`up` and `api`).
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Each new session's `statement_timeout` and `idle_in_transaction_session_timeout`.
    pub session_defaults: compute::pg::SessionDefaults,
    /// A PEM certificate and key for TLS; without them a self-signed pair is made once in `<data dir>/tls/`.
    pub tls_cert_and_key: Option<(PathBuf, PathBuf)>,
    /// Sessions one database may have open at once (0: no limit but the listener's).
    pub connections_per_database_max: usize,
    /// Sessions the databases of one account may have open at once (0: no limit but the listener's).
    pub connections_per_account_max: usize,
    /// How large transactions are carried (`--transaction-bytes-max`, `--dirty-memory-bytes-max`).
    pub transactions: compute::remote_store::TransactionConfig,
}

/// The TLS of the PostgreSQL listener: the configured certificate, or the self-signed one of `data_dir`
/// (made on first start for `localhost` and the listen host), with that self-signed certificate's path: the
/// CA certificate clients verify the server with (`sslrootcert`).
fn pg_tls(options: &ApiOptions) -> Result<(compute::pg::tls::ServerTls, Option<PathBuf>)> {
    let self_signed = options.pg.tls_cert_and_key.is_none();
    let (cert, key) = match &options.pg.tls_cert_and_key {
        Some((cert, key)) => (cert.clone(), key.clone()),
        None => {
            let mut names = vec!["localhost".to_owned()];
            if let Some((host, _port)) = options.pg_listen.rsplit_once(':') {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                if !names.iter().any(|name| name == host) {
                    names.push(host.to_owned());
                }
            }
            compute::pg::tls::ensure_self_signed(&options.data_dir.join("tls"), &names)
                .context("making the PostgreSQL listener's self-signed certificate")?
        }
    };
    let tls = compute::pg::tls::acceptor(&cert, &key).context("loading the PostgreSQL listener's certificate")?;
    Ok((tls, self_signed.then_some(cert)))
}

/// The API's connection settings: its limits against clients that hold connections (see `api::http::serve`)
/// and its optional TLS.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// API connections at once; more are refused with 503.
    pub connections_max: u32,
    /// From a request head's first byte to its end.
    pub header_read_timeout_ms: u64,
    /// From a request head's end to its body's end.
    pub body_read_timeout_ms: u64,
    /// An idle connection is closed after this long.
    pub keep_alive_timeout_ms: u64,
    /// A PEM certificate and key for HTTPS on the API; without them it serves plain HTTP.
    pub tls_cert_and_key: Option<(PathBuf, PathBuf)>,
}

/// A storage side running in this process: three safekeepers and a pageserver.
struct LocalStorage {
    safekeepers: Vec<(Arc<SafekeeperNode>, tokio::task::JoinHandle<()>)>,
    safekeeper_addresses: Vec<String>,
    /// The same safekeepers' services, for the compute to call without TCP.
    local_safekeepers: walproposer::LocalSafekeepers,
    pageserver: tokio::task::JoinHandle<()>,
    pageserver_address: String,
    /// The same pageserver's management service, for the control plane to call without TCP.
    local_pageserver: walproposer::PeerService,
    stop: tokio::sync::watch::Sender<bool>,
}

async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

impl LocalStorage {
    async fn start(data_dir: &Path, remote: Option<&str>, pull_quiet_period_ms: Option<u64>) -> Result<LocalStorage> {
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let mut safekeepers = Vec::new();
        let mut safekeeper_addresses = Vec::new();
        let mut local_services = Vec::new();
        for id in 1..=SAFEKEEPERS {
            let dir = data_dir.join(format!("safekeeper-{id}"));
            api::files::private_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let config = NodeConfig {
                node_id: id,
                data_dir: dir.clone(),
                store: FileStoreConfig::default(),
            };
            let node = tokio::task::spawn_blocking(move || SafekeeperNode::open(config))
                .await
                .context("opening a safekeeper")?
                .with_context(|| format!("opening the safekeeper data directory {}", dir.display()))?;
            let node = Arc::new(node);
            if let Some(ms) = pull_quiet_period_ms {
                node.set_pull_quiet_period(Duration::from_millis(ms));
            }
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .context("listening for a safekeeper")?;
            let address = listener.local_addr().context("reading the bound address")?.to_string();
            let (service, append) = safekeeper::service::SafekeeperService::new(Arc::clone(&node)).into_local();
            local_services.push((address.clone(), service, append));
            safekeeper_addresses.push(address);
            let served = Arc::clone(&node);
            let shutdown = stopped(stop_rx.clone());
            let task = tokio::spawn(async move {
                if let Err(error) = safekeeper::service::serve(served, listener, shutdown).await {
                    tracing::error!(%error, "a safekeeper stopped serving");
                }
            });
            safekeepers.push((node, task));
        }
        let pageserver_dir = data_dir.join("pageserver");
        api::files::private_dir(&pageserver_dir).with_context(|| format!("creating {}", pageserver_dir.display()))?;
        let mut config = pageserver::runner::PageserverConfig::new(pageserver_dir, safekeeper_addresses.clone());
        if let Some(url) = remote {
            let storage = pageserver::remote::RemoteStorage::from_url(url, Default::default())
                .with_context(|| format!("opening remote storage {url}"))?;
            config.remote = Some(Arc::new(storage));
        }
        let manager = pageserver::runner::open(&config)
            .await
            .context("opening the pageserver data directory")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("listening for the pageserver")?;
        let pageserver_address = listener.local_addr().context("reading the bound address")?.to_string();
        let shutdown = stopped(stop_rx);
        let (local_tx, local_rx) = tokio::sync::oneshot::channel();
        let pageserver = tokio::spawn(async move {
            let served = pageserver::runner::run_with_local(manager, config, listener, shutdown, Some(local_tx)).await;
            if let Err(error) = served {
                tracing::error!(%error, "the pageserver stopped serving");
            }
        });
        let management = local_rx
            .await
            .context("the pageserver stopped before it started serving")?;
        let local_pageserver = walproposer::in_process(management, tokio::runtime::Handle::current());
        Ok(LocalStorage {
            safekeepers,
            safekeeper_addresses,
            local_safekeepers: walproposer::LocalSafekeepers::new(tokio::runtime::Handle::current(), local_services),
            pageserver,
            pageserver_address,
            local_pageserver,
            stop,
        })
    }

    /// Stops the pageserver (it checkpoints), then the safekeepers.
    async fn stop(self) {
        // The in-process services hold the nodes: let go of them so `close` sees the nodes free.
        drop(self.local_safekeepers);
        drop(self.local_pageserver);
        let _ = self.stop.send(true);
        let _ = self.pageserver.await;
        for (node, task) in self.safekeepers {
            let _ = task.await;
            if !node.close(Duration::from_millis(SAFEKEEPER_CLOSE_TIMEOUT_MS)).await {
                tracing::warn!("a safekeeper's requests outlived the close timeout");
            }
        }
    }
}

/// Opens the metadata (in `data_dir`, or at the PostgreSQL URL `metadata`) and, on first start (no account yet),
/// creates the admin account and its key, written to `<data_dir>/api_key` (mode 0600, write-temp-fsync-rename).
/// Returns the store and the key file's path. On shared PostgreSQL metadata only the process that created the
/// admin account has the key file.
fn open_store(
    data_dir: &Path,
    metadata: Option<&str>,
    pool: api::store::pool::PoolConfig,
) -> Result<(Arc<Store>, PathBuf)> {
    api::files::private_dir(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let location = match metadata {
        Some(url) => MetadataLocation::Postgres(url.to_owned()),
        None => MetadataLocation::DataDir(data_dir.to_owned()),
    };
    let store = Store::open_at_with(&location, pool).context("opening the control metadata")?;
    let key_path = data_dir.join("api_key");
    api::files::private_file(&key_path).with_context(|| format!("setting the mode of {}", key_path.display()))?;
    // One process creates the admin account even when several start at once on shared metadata.
    if let Some(account) = store.create_first_account().context("creating the admin account")? {
        let key = api::auth::create_key(&store, &account, &api::store::KeyScope::default())
            .context("creating the admin key")?;
        write_secret(&key_path, &key.secret)?;
    }
    Ok((Arc::new(store), key_path))
}

/// Writes `secret` to `path` durably with mode 0600.
fn write_secret(path: &Path, secret: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let temp = path.with_extension("tmp");
    // A temporary file left by a crash keeps its mode if opened again: start from a new one.
    match std::fs::remove_file(&temp) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(error).with_context(|| format!("removing {}", temp.display()))
        }
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .with_context(|| format!("creating {}", temp.display()))?;
    writeln!(file, "{secret}").context("writing the key")?;
    file.sync_all().context("syncing the key")?;
    std::fs::rename(&temp, path).with_context(|| format!("renaming to {}", path.display()))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", dir.display()))?;
    }
    Ok(())
}

/// Runs the API and the compute host against the given storage until `shutdown`; prints one line saying where.
async fn serve_api(
    options: &ApiOptions,
    pageservers: Vec<String>,
    safekeepers: Vec<String>,
    local_safekeepers: walproposer::LocalSafekeepers,
    local_pageserver: Option<walproposer::PeerService>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    what: &str,
) -> Result<()> {
    let (store, key_path) = open_store(&options.data_dir, options.metadata.as_deref(), options.metadata_pool)?;
    let (pg_tls, pg_ca_cert) = pg_tls(options)?;
    let host = ComputeHost::start(HostConfig {
        listen: options.pg_listen.clone(),
        safekeepers: safekeepers.clone(),
        local_safekeepers: local_safekeepers.clone(),
        pageserver: pageservers.first().cloned().unwrap_or_default(),
        passwords: Default::default(),
        cache: options.cache.clone(),
        prefetch: options.prefetch,
        idle_store_timeout_ms: options.idle_store_timeout_ms,
        session_defaults: options.pg.session_defaults,
        tls: Some(pg_tls),
        connections_per_database_max: options.pg.connections_per_database_max,
        connections_per_account_max: options.pg.connections_per_account_max,
        transactions: options.pg.transactions,
        branch_stores: options.branch_stores,
    })
    .await
    .context("starting the PostgreSQL listener")?;
    let pg_address = host.address();
    let host = Arc::new(host);
    let first_pageserver = pageservers.first().cloned().unwrap_or_default();
    let backend = Backend::new(&BackendConfig {
        pageservers,
        safekeepers,
        request_timeout_ms: BACKEND_REQUEST_TIMEOUT_MS,
        connect_timeout_ms: BACKEND_CONNECT_TIMEOUT_MS,
        pull_timeout_ms: BACKEND_PULL_TIMEOUT_MS,
    })
    .context("configuring the storage clients")?
    .with_local_safekeepers(&local_safekeepers);
    let backend = match local_pageserver {
        Some(service) => backend
            .with_local_pageserver(&first_pageserver, service)
            .context("calling the pageserver in process")?,
        None => backend,
    };
    let listener = tokio::net::TcpListener::bind(&options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    let api_address = listener.local_addr().context("reading the bound address")?;
    let api_scheme = if options.http.tls_cert_and_key.is_some() {
        "https"
    } else {
        "http"
    };
    let placement = api::control::placement::PlacementConfig {
        pg_address: options.advertise.pg.clone().unwrap_or_else(|| pg_address.to_string()),
        api_url: options
            .advertise
            .api_url
            .clone()
            .unwrap_or_else(|| format!("{api_scheme}://{api_address}")),
    };
    let (pg_host, pg_port) = match &options.advertise.connection_address {
        Some(address) => split_host_port(address)?,
        None => (pg_address.ip().to_string(), pg_address.port()),
    };
    let control = Control::new(
        store,
        backend,
        Arc::clone(&host),
        ControlConfig {
            region: LOCAL_REGION.to_owned(),
            pg_host,
            pg_port,
            operation_delay_ms: options.operation_delay_ms,
            faults: options.faults.clone(),
            quotas: options.quotas,
            placement,
        },
    );
    control
        .resume()
        .await
        .map_err(|e| anyhow::anyhow!("resuming the control plane: {e:?}"))?;
    let reconciler = api::reconcile::spawn(&control, options.reconcile);
    let pageserver_watch = api::control::pageserver_loss::spawn(&control, options.pageserver_dead_after_ms);
    let expiry = api::control::expiry::spawn(&control, options.expiry);
    let scale_to_zero = api::control::scale_to_zero::spawn(&control);
    let leases = api::control::leases::spawn(&control);
    let webhooks = api::webhooks::spawn(&control, options.webhooks).context("starting the webhook sender")?;
    let consumption = api::consumption::spawn(&control, options.consumption);
    let router = api::http::router(
        Arc::clone(&control),
        &HttpConfig {
            rate_limit_per_s: options.rate_limit_per_s,
            body_read_timeout_ms: options.http.body_read_timeout_ms,
            ..HttpConfig::default()
        },
    );
    let tls = match &options.http.tls_cert_and_key {
        Some((cert, key)) => Some(api::http::ApiTls::from_pem(cert, key).context("loading the API's certificate")?),
        None if !api_address.ip().is_loopback() => {
            tracing::warn!(%api_address, "the API serves plain HTTP on a non-loopback address; give it --api-tls-cert and --api-tls-key");
            None
        }
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let serve_config = ServeConfig {
        connections_max: options.http.connections_max,
        header_read_timeout_ms: options.http.header_read_timeout_ms,
        keep_alive_timeout_ms: options.http.keep_alive_timeout_ms,
        tls,
    };
    {
        // A client verifies the self-signed certificate with it as its CA (libpq and node-postgres:
        // `sslrootcert=<path>`) rather than turning verification off. One line: readers take the first
        // line and may close the pipe.
        let ca_note = pg_ca_cert.as_ref().map_or_else(String::new, |cert| {
            format!(
                "; PostgreSQL TLS certificate (self-signed, for sslrootcert) in {}",
                cert.display()
            )
        });
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "cambium {what} listening on {scheme}://{api_address} (PostgreSQL on {pg_address}); API key in {}{ca_note}",
            key_path.display()
        )
        .context("writing to stdout")?;
        stdout.flush().context("flushing stdout")?;
    }
    api::http::serve(listener, router, &serve_config, shutdown).await;
    reconciler.abort();
    let _ = reconciler.await;
    if let Some(watch) = pageserver_watch {
        watch.abort();
        let _ = watch.await;
    }
    expiry.abort();
    let _ = expiry.await;
    scale_to_zero.abort();
    let _ = scale_to_zero.await;
    leases.abort();
    let _ = leases.await;
    webhooks.abort();
    let _ = webhooks.await;
    consumption.abort();
    let _ = consumption.await;
    drop(control);
    match Arc::try_unwrap(host) {
        Ok(host) => host.stop().await,
        Err(_) => tracing::warn!("the compute host is still referenced; it stops when dropped"),
    }
    Ok(())
}

/// `host:port` (the host may be a name or a bracketed IPv6 address).
fn split_host_port(address: &str) -> Result<(String, u16)> {
    let (host, port) = address
        .rsplit_once(':')
        .with_context(|| format!("{address:?} is not host:port"))?;
    let port = port.parse().with_context(|| format!("{address:?} has no valid port"))?;
    anyhow::ensure!(!host.is_empty(), "{address:?} has no host");
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_owned(), port))
}

/// `cambium up`.
pub async fn up(
    options: ApiOptions,
    remote: Option<String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    api::files::private_dir(&options.data_dir).with_context(|| format!("creating {}", options.data_dir.display()))?;
    let storage = LocalStorage::start(&options.data_dir, remote.as_deref(), options.pull_quiet_period_ms).await?;
    let served = serve_api(
        &options,
        vec![storage.pageserver_address.clone()],
        storage.safekeeper_addresses.clone(),
        storage.local_safekeepers.clone(),
        Some(storage.local_pageserver.clone()),
        shutdown,
        "up",
    )
    .await;
    storage.stop().await;
    tracing::info!("stopped");
    served
}

/// `cambium api`: `pageservers` in the order placement counts them (the first also holds every database placed
/// nowhere, from before placement).
pub async fn api(
    options: ApiOptions,
    pageservers: Vec<String>,
    safekeepers: Vec<String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    anyhow::ensure!(!safekeepers.is_empty(), "--safekeepers names no safekeeper");
    anyhow::ensure!(!pageservers.is_empty(), "--pageservers names no pageserver");
    let mut seen = std::collections::HashSet::new();
    for address in &pageservers {
        anyhow::ensure!(seen.insert(address), "--pageservers names {address} twice");
    }
    let remote_only = walproposer::LocalSafekeepers::none();
    serve_api(&options, pageservers, safekeepers, remote_only, None, shutdown, "api").await
}

/// What `cambium keys` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum KeysCommand {
    /// Creates a key and prints its secret (shown once). By default for the admin account (the first one, which
    /// `up` creates; its keys also read `/metrics`).
    Create {
        /// For a new account of its own, which sees none of the others' projects.
        #[arg(long)]
        new_account: bool,
        /// For this account (`acct_…`).
        #[arg(long, conflicts_with = "new_account")]
        account: Option<String>,
        /// Limited to this project (`proj_…`, of the key's account): it sees nothing else (404) and cannot create
        /// projects.
        #[arg(long, conflicts_with = "new_account")]
        project: Option<String>,
        /// Only reads: every mutating call is 403.
        #[arg(long)]
        read_only: bool,
        /// Stops working after this long: a number and a unit, `s`, `m`, `h` or `d` (`30d`, `12h`); at most 3650
        /// days.
        #[arg(long, value_parser = parse_expires_in)]
        expires_in: Option<std::time::Duration>,
    },
    /// Lists the keys: id, account, created, revoked, project, read-only, expires.
    List,
    /// Revokes a key by id (`key_…`); requests with it get 401 from then on.
    Revoke {
        /// The key id.
        id: String,
    },
}

/// `cambium keys`, on the metadata in `data_dir`, or in the PostgreSQL database `metadata` (also while `up` runs:
/// either backend serializes the writers).
pub fn keys(data_dir: &Path, metadata: Option<&str>, command: KeysCommand) -> Result<()> {
    let store = match metadata {
        Some(url) => Store::open_postgres(url).context("opening the control metadata")?,
        None => {
            anyhow::ensure!(
                data_dir.join(api::store::METADATA_FILE).exists(),
                "no Cambium metadata in {} (run `cambium up` there first)",
                data_dir.display()
            );
            Store::open(data_dir).context("opening the control metadata")?
        }
    };
    let mut stdout = std::io::stdout().lock();
    match command {
        KeysCommand::Create {
            new_account,
            account,
            project,
            read_only,
            expires_in,
        } => {
            let account = if new_account {
                store.create_account()?
            } else if let Some(account) = account {
                let known = store.accounts()?.into_iter().any(|a| a.0 == account);
                anyhow::ensure!(known, "no account {account}");
                AccountId(account)
            } else {
                store
                    .admin_account()?
                    .context("no account yet: run `cambium up` first")?
            };
            if let Some(project) = &project {
                anyhow::ensure!(
                    store.get_project(&account, project)?.is_some(),
                    "account {} has no project {project}",
                    account.0
                );
            }
            let expires_at = match expires_in {
                Some(after) => Some(api::store::keys::expiry_after(after).context("the expiry is out of range")?),
                None => None,
            };
            let scope = api::store::KeyScope {
                project_id: project,
                read_only,
                expires_at,
            };
            let key = api::auth::create_key(&store, &account, &scope)?;
            writeln!(stdout, "{}", key.secret)?;
            eprintln!("created key {} for account {}", key.id, account.0);
        }
        KeysCommand::List => {
            for key in store.keys()? {
                writeln!(
                    stdout,
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    key.id,
                    key.account_id.0,
                    key.created_at,
                    key.revoked_at.as_deref().unwrap_or("-"),
                    key.scope.project_id.as_deref().unwrap_or("-"),
                    if key.scope.read_only { "read-only" } else { "read-write" },
                    key.scope.expires_at.as_deref().unwrap_or("-")
                )?;
            }
        }
        KeysCommand::Revoke { id } => {
            anyhow::ensure!(store.revoke_key(&id)?, "no unrevoked key {id}");
            writeln!(stdout, "revoked {id}")?;
        }
    }
    Ok(())
}

/// The longest `--expires-in`.
const KEY_EXPIRY_DAYS_MAX: u64 = 3_650;

/// `--expires-in`: a positive number and a unit (`s`, `m`, `h`, `d`), at most [`KEY_EXPIRY_DAYS_MAX`] days.
fn parse_expires_in(text: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("expected a number and a unit like 30d, 12h, 90m or 3600s, not {text:?}");
    let unit_s = match text.chars().last() {
        Some('s') => 1,
        Some('m') => 60,
        Some('h') => 3_600,
        Some('d') => 86_400,
        _ => return Err(bad()),
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let count: u64 = digits.parse().map_err(|_| bad())?;
    let seconds = count * unit_s;
    if seconds == 0 || seconds > KEY_EXPIRY_DAYS_MAX * 86_400 {
        return Err(format!(
            "{text:?} must be more than 0 and at most {KEY_EXPIRY_DAYS_MAX} days"
        ));
    }
    Ok(std::time::Duration::from_secs(seconds))
}
