//! [`RemoteStorage`]: an object store (a local directory or S3) under a root prefix, with a timeout on every
//! request, bounded retries with exponential backoff, and at most `requests_in_flight_max` requests at once.
//!
//! Retries are ours, not the S3 client's (its own are turned off), so both backends behave the same: a
//! transient failure (a timeout, a connection or server error, a truncated download) is retried; a definite
//! answer (not found, refused, bad configuration, a local file error) is not.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart};
use storage::{StorageError, TenantId, TimelineId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use super::files::{BRANCH_LOG_FILE, TIMELINES_DIR};

/// The prefix under the root that holds the tenants.
const TENANTS_DIR: &str = "tenants";
/// The object naming a tenant's owner, under its prefix.
const OWNER_FILE: &str = "owner";

/// Timeouts, retries and bounds of remote requests.
#[derive(Clone, Debug)]
pub struct RemoteConfig {
    /// One request (or, for a streamed transfer, one chunk or one part) gives up after this long.
    pub request_timeout_ms: u64,
    /// Retries of a failed request after the first attempt, at most.
    pub retries_max: u32,
    /// The first pause before a retry; it doubles each time.
    pub retry_backoff_initial_ms: u64,
    /// The longest pause before a retry.
    pub retry_backoff_max_ms: u64,
    /// Requests in flight at once, at most (a streamed transfer counts as one).
    pub requests_in_flight_max: usize,
    /// Files up to this size are uploaded in one request (read into memory); larger ones in parts.
    pub single_put_bytes_max: u64,
    /// Part size of a multipart upload (S3 needs at least 5 MiB).
    pub multipart_part_bytes: usize,
    /// Parts of one multipart upload in flight at once, at most.
    pub multipart_parts_in_flight_max: usize,
    /// An on-demand layer download (waiting for a slot, retries included) gives up after this long, and the
    /// read that needed it fails.
    pub layer_download_timeout_ms: u64,
    /// On-demand layer downloads in flight at once, at most (each also takes one of the
    /// `requests_in_flight_max` request slots).
    pub layer_downloads_in_flight_max: usize,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            request_timeout_ms: 30_000,
            retries_max: 5,
            retry_backoff_initial_ms: 100,
            retry_backoff_max_ms: 5_000,
            requests_in_flight_max: 8,
            single_put_bytes_max: 16 * 1024 * 1024,
            multipart_part_bytes: 8 * 1024 * 1024,
            multipart_parts_in_flight_max: 2,
            layer_download_timeout_ms: 60_000,
            layer_downloads_in_flight_max: 4,
        }
    }
}

/// Why a remote operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The remote storage URL cannot be used.
    #[error("bad remote storage URL {url}: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The object store refused or failed a request.
    #[error("remote {op} of {key}: {source}")]
    Store {
        /// The operation (`get`, `put`, `list`, ...).
        op: &'static str,
        /// The object or prefix.
        key: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// A request took longer than `request_timeout_ms`.
    #[error("remote {op} of {key} timed out after {timeout_ms} ms")]
    Timeout {
        /// The operation.
        op: &'static str,
        /// The object or prefix.
        key: String,
        /// The timeout.
        timeout_ms: u64,
    },
    /// An object's (or a file's) bytes fail their checks.
    #[error("corrupt {what}: {reason}")]
    Corrupt {
        /// The object key or local path.
        what: String,
        /// What check failed.
        reason: String,
    },
    /// A local file system error.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The storage engine refused or failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The local metadata is older than the remote one: uploading it would move the remote copy back.
    #[error("timeline {timeline}: local disk_consistent_lsn {local} is behind the remote {remote}")]
    LocalBehindRemote {
        /// The timeline.
        timeline: TimelineId,
        /// The local metadata's `disk_consistent_lsn`.
        local: storage::Lsn,
        /// The remote metadata's.
        remote: storage::Lsn,
    },
    /// A task running the operation failed.
    #[error("remote task failed: {0}")]
    Task(String),
    /// The local files did not hold still or disagree with each other.
    #[error("local state: {0}")]
    LocalState(String),
}

/// The shared durable-file helpers fail as the engine does (`StorageError::Io`), so callers see one error shape.
impl From<storage::fsio::IoError> for RemoteError {
    fn from(error: storage::fsio::IoError) -> RemoteError {
        RemoteError::Storage(StorageError::from(error))
    }
}

impl RemoteError {
    /// Whether trying again may succeed.
    fn is_transient(&self) -> bool {
        use object_store::Error as E;
        match self {
            RemoteError::Timeout { .. } | RemoteError::Corrupt { .. } => true,
            RemoteError::Store { source, .. } => !matches!(
                source,
                E::NotFound { .. }
                    | E::AlreadyExists { .. }
                    | E::Precondition { .. }
                    | E::NotModified { .. }
                    | E::InvalidPath { .. }
                    | E::NotSupported { .. }
                    | E::NotImplemented { .. }
                    | E::PermissionDenied { .. }
                    | E::Unauthenticated { .. }
                    | E::UnknownConfigurationKey { .. }
            ),
            _ => false,
        }
    }

    /// Whether this is the store saying the object does not exist.
    fn is_not_found(&self) -> bool {
        matches!(
            self,
            RemoteError::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }
        )
    }

    /// Whether this is a local file that does not exist (any more).
    pub(crate) fn is_local_not_found(&self) -> bool {
        match self {
            RemoteError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            RemoteError::Storage(StorageError::Io { source, .. }) => source.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }
}

/// An I/O error on `path`.
pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RemoteError + '_ {
    move |source| RemoteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs blocking work on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, RemoteError> + Send + 'static,
) -> Result<T, RemoteError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RemoteError::Task(e.to_string()))?
}

/// `Some(value)`, or `None` if the store said the object does not exist.
fn found<T>(result: Result<T, RemoteError>) -> Result<Option<T>, RemoteError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// An object store under a root prefix; see the module doc.
pub struct RemoteStorage {
    store: Arc<dyn ObjectStore>,
    root: ObjectPath,
    description: String,
    config: RemoteConfig,
    permits: Semaphore,
    /// This pageserver's id among several sharing the remote (`--id`): written as each tenant's `owner`
    /// object before its first upload, and the only owner whose tenants a rebuild takes (`super::download`).
    owner: Option<String>,
}

impl fmt::Debug for RemoteStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteStorage")
            .field("store", &self.description)
            .field("config", &self.config)
            .finish()
    }
}

impl RemoteStorage {
    /// Opens `url`: `file:///abs/path` or a plain path (a local directory, created if missing, every write
    /// fsynced), or `s3://bucket/prefix` configured from the process environment (`AWS_ENDPOINT`,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`, and the other `AWS_*`
    /// variables `object_store` knows).
    pub fn from_url(url: &str, config: RemoteConfig) -> Result<RemoteStorage, RemoteError> {
        RemoteStorage::from_url_and_env(url, std::env::vars(), config)
    }

    /// As [`RemoteStorage::from_url`], with the `AWS_*` settings taken from `env` instead of the process
    /// environment.
    pub fn from_url_and_env(
        url: &str,
        env: impl IntoIterator<Item = (String, String)>,
        config: RemoteConfig,
    ) -> Result<RemoteStorage, RemoteError> {
        let bad = |reason: &str| RemoteError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket"));
            }
            return RemoteStorage::s3(url, bucket, prefix, env, config);
        }
        let dir = match url.strip_prefix("file://") {
            Some(path) if path.starts_with('/') => PathBuf::from(path),
            Some(_) => return Err(bad("a file URL needs an absolute path (file:///...)")),
            None if url.contains("://") => return Err(bad("unknown scheme (file:// or s3://)")),
            None if url.is_empty() => return Err(bad("empty")),
            None => PathBuf::from(url),
        };
        std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        let store = LocalFileSystem::new_with_prefix(&dir)
            .map_err(|source| RemoteError::Store {
                op: "open",
                key: dir.display().to_string(),
                source,
            })?
            .with_fsync(true)
            .with_automatic_cleanup(true);
        Ok(RemoteStorage::from_store(Arc::new(store), "", config))
    }

    fn s3(
        url: &str,
        bucket: &str,
        prefix: &str,
        env: impl IntoIterator<Item = (String, String)>,
        config: RemoteConfig,
    ) -> Result<RemoteStorage, RemoteError> {
        // reqwest's rustls has no bundled crypto provider here (so no aws-lc-sys in the build): use ring.
        // An error only means a provider is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = Duration::from_millis(config.request_timeout_ms);
        // Our timeouts bound each request and each chunk of a streamed body; the client's whole-request timeout
        // would cut a long download, so it is off. Client options first: `AWS_ALLOW_HTTP` below amends them.
        let mut builder = AmazonS3Builder::new()
            .with_client_options(
                ClientOptions::new()
                    .with_timeout_disabled()
                    .with_connect_timeout(timeout),
            )
            .with_retry(RetryConfig {
                max_retries: 0,
                retry_timeout: timeout,
                ..RetryConfig::default()
            });
        for (key, value) in env {
            if !key.starts_with("AWS_") {
                continue;
            }
            if let Ok(config_key) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(config_key, value);
            }
        }
        let store = builder
            .with_bucket_name(bucket)
            .build()
            .map_err(|source| RemoteError::Store {
                op: "open",
                key: url.to_string(),
                source,
            })?;
        Ok(RemoteStorage::from_store(Arc::new(store), prefix, config))
    }

    /// Uses `store`, with every object under `prefix` (`a/b`, or empty for the store's root).
    pub fn from_store(store: Arc<dyn ObjectStore>, prefix: &str, config: RemoteConfig) -> RemoteStorage {
        let root = ObjectPath::from_iter(prefix.split('/').filter(|part| !part.is_empty()));
        let description = format!("{store} under '{root}'");
        RemoteStorage {
            store,
            root,
            description,
            permits: Semaphore::new(config.requests_in_flight_max.max(1)),
            config,
            owner: None,
        }
    }

    /// The same remote, used by the pageserver with id `owner` among several sharing it: each tenant it uploads
    /// is marked as its own (`tenants/<tenant>/owner`), and a rebuild at start takes only the tenants marked so.
    pub fn with_owner(mut self, owner: Option<String>) -> RemoteStorage {
        self.owner = owner.filter(|id| !id.is_empty());
        self
    }

    /// This pageserver's id, if it has one ([`RemoteStorage::with_owner`]).
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// The timeouts and bounds.
    pub fn config(&self) -> &RemoteConfig {
        &self.config
    }

    // ------------------------------------------------------------------ layout

    /// `<root>/tenants`.
    pub(crate) fn tenants_prefix(&self) -> ObjectPath {
        self.root.clone().join(TENANTS_DIR)
    }

    /// `<root>/tenants/<tenant>`.
    pub(crate) fn tenant_prefix(&self, tenant: TenantId) -> ObjectPath {
        self.tenants_prefix().join(tenant.to_string().as_str())
    }

    /// `<root>/tenants/<tenant>/branches.log`.
    pub(crate) fn branch_log_key(&self, tenant: TenantId) -> ObjectPath {
        self.tenant_prefix(tenant).join(BRANCH_LOG_FILE)
    }

    /// `<root>/tenants/<tenant>/owner`: the id of the pageserver that uploads the tenant.
    pub(crate) fn owner_key(&self, tenant: TenantId) -> ObjectPath {
        self.tenant_prefix(tenant).join(OWNER_FILE)
    }

    /// `<root>/tenants/<tenant>/timelines/<timeline>`.
    pub(crate) fn timeline_prefix(&self, tenant: TenantId, timeline: TimelineId) -> ObjectPath {
        self.tenant_prefix(tenant)
            .join(TIMELINES_DIR)
            .join(timeline.to_string().as_str())
    }

    /// `<root>/tenants/<tenant>/timelines/<timeline>/<name>`.
    pub(crate) fn timeline_key(&self, tenant: TenantId, timeline: TimelineId, name: &str) -> ObjectPath {
        self.timeline_prefix(tenant, timeline).join(name)
    }

    // ------------------------------------------------------------------ requests

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// Runs one request under the request timeout.
    async fn timed<T>(
        &self,
        op: &'static str,
        key: &ObjectPath,
        request: impl Future<Output = object_store::Result<T>>,
    ) -> Result<T, RemoteError> {
        match tokio::time::timeout(self.timeout(), request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(RemoteError::Store {
                op,
                key: key.to_string(),
                source,
            }),
            Err(_) => Err(RemoteError::Timeout {
                op,
                key: key.to_string(),
                timeout_ms: self.config.request_timeout_ms,
            }),
        }
    }

    /// Runs `attempt` until it succeeds, fails for good, or `retries_max` retries failed; each attempt holds
    /// one of the `requests_in_flight_max` permits.
    async fn retry<T, F, Fut>(&self, op: &'static str, key: &ObjectPath, mut attempt: F) -> Result<T, RemoteError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RemoteError>>,
    {
        let mut backoff_ms = self.config.retry_backoff_initial_ms.max(1);
        let mut retries = 0u32;
        loop {
            let result = {
                // The semaphore is never closed; were it, going on without a permit is still correct.
                let _permit = self.permits.acquire().await.ok();
                attempt().await
            };
            match result {
                Ok(value) => return Ok(value),
                Err(e) if retries < self.config.retries_max && e.is_transient() => {
                    retries += 1;
                    tracing::warn!(op, key = %key, retries, error = %e, "remote request failed; retrying");
                    tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                    backoff_ms = (backoff_ms * 2).min(self.config.retry_backoff_max_ms.max(1));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The object's bytes, or `None` if it does not exist.
    pub(crate) async fn get_bytes(&self, key: &ObjectPath) -> Result<Option<Bytes>, RemoteError> {
        let this = self;
        let fetched = self
            .retry("get", key, move || async move {
                let result = this.timed("get", key, this.store.get(key)).await?;
                this.timed("get", key, result.bytes()).await
            })
            .await;
        found(fetched)
    }

    /// The object's size, or `None` if it does not exist.
    pub(crate) async fn head_size(&self, key: &ObjectPath) -> Result<Option<u64>, RemoteError> {
        let this = self;
        let meta = self
            .retry("head", key, move || async move {
                this.timed("head", key, this.store.head(key)).await
            })
            .await;
        Ok(found(meta)?.map(|meta| meta.size))
    }

    /// Writes the object (atomically: readers see the old bytes or the new).
    pub(crate) async fn put_bytes(&self, key: &ObjectPath, bytes: Bytes) -> Result<(), RemoteError> {
        let this = self;
        self.retry("put", key, move || {
            let payload = PutPayload::from_bytes(bytes.clone());
            async move { this.timed("put", key, this.store.put(key, payload)).await.map(|_| ()) }
        })
        .await
    }

    /// Uploads the local file `path` of `size_bytes` bytes: in one request if it is small, in parts streamed
    /// from the file otherwise (memory stays bounded whatever the layer's size).
    pub(crate) async fn put_file(&self, key: &ObjectPath, path: &Path, size_bytes: u64) -> Result<(), RemoteError> {
        let check_size = |len: u64| {
            if len == size_bytes {
                Ok(())
            } else {
                Err(RemoteError::Corrupt {
                    what: path.display().to_string(),
                    reason: format!("holds {len} bytes, its descriptor says {size_bytes}"),
                })
            }
        };
        if size_bytes <= self.config.single_put_bytes_max {
            let owned = path.to_path_buf();
            let bytes = blocking(move || std::fs::read(&owned).map_err(io_error(&owned))).await?;
            check_size(bytes.len() as u64)?;
            return self.put_bytes(key, Bytes::from(bytes)).await;
        }
        let this = self;
        self.retry("put", key, move || async move {
            let sent = this.put_multipart_once(key, path).await?;
            check_size(sent)
        })
        .await
    }

    /// One multipart upload of the file; returns the bytes sent. Aborted on failure.
    async fn put_multipart_once(&self, key: &ObjectPath, path: &Path) -> Result<u64, RemoteError> {
        let mut file = tokio::fs::File::open(path).await.map_err(io_error(path))?;
        let upload = self.timed("put", key, self.store.put_multipart(key)).await?;
        let part_bytes = self.config.multipart_part_bytes.max(1);
        let mut writer = WriteMultipart::new_with_chunk_size(upload, part_bytes);
        let sent = async {
            let mut buffer = vec![0u8; part_bytes];
            let mut sent = 0u64;
            loop {
                let mut filled = 0usize;
                while filled < buffer.len() {
                    let read = file.read(&mut buffer[filled..]).await.map_err(io_error(path))?;
                    if read == 0 {
                        break;
                    }
                    filled += read;
                }
                if filled == 0 {
                    return Ok(sent);
                }
                let parts_max = self.config.multipart_parts_in_flight_max.max(1);
                self.timed("put", key, writer.wait_for_capacity(parts_max)).await?;
                writer.write(&buffer[..filled]);
                sent += filled as u64;
            }
        }
        .await;
        match sent {
            Ok(sent) => {
                self.timed("put", key, writer.finish()).await?;
                Ok(sent)
            }
            Err(e) => {
                if let Err(abort) = self.timed("abort", key, writer.abort()).await {
                    tracing::warn!(key = %key, error = %abort, "could not abort a multipart upload");
                }
                Err(e)
            }
        }
    }

    /// Downloads the object into `path` (created or truncated), checking it has `size_bytes` bytes. The file is
    /// neither synced nor renamed: the caller (the engine, for a layer fetched on demand) checks it, syncs it
    /// and renames it into place. A missing object is an error: the caller knows it must exist.
    pub(crate) async fn get_to_path(&self, key: &ObjectPath, path: &Path, size_bytes: u64) -> Result<(), RemoteError> {
        let this = self;
        self.retry("get", key, move || async move {
            this.get_to_path_once(key, path, size_bytes).await
        })
        .await
    }

    async fn get_to_path_once(&self, key: &ObjectPath, path: &Path, size_bytes: u64) -> Result<(), RemoteError> {
        let corrupt = |reason: String| RemoteError::Corrupt {
            what: key.to_string(),
            reason,
        };
        let result = self.timed("get", key, self.store.get(key)).await?;
        if result.meta.size != size_bytes {
            return Err(corrupt(format!(
                "holds {} bytes, expected {size_bytes}",
                result.meta.size
            )));
        }
        let mut stream = result.into_stream();
        let mut file = tokio::fs::File::create(path).await.map_err(io_error(path))?;
        let mut written = 0u64;
        while let Some(chunk) = self
            .timed("get", key, stream.next().map(Ok::<_, object_store::Error>))
            .await?
        {
            let chunk = chunk.map_err(|source| RemoteError::Store {
                op: "get",
                key: key.to_string(),
                source,
            })?;
            written += chunk.len() as u64;
            if written > size_bytes {
                return Err(corrupt(format!("longer than the expected {size_bytes} bytes")));
            }
            file.write_all(&chunk).await.map_err(io_error(path))?;
        }
        if written != size_bytes {
            return Err(corrupt(format!("ended after {written} of {size_bytes} bytes")));
        }
        file.flush().await.map_err(io_error(path))
    }

    /// The names of the "directories" right under `prefix`.
    pub(crate) async fn list_dirs(&self, prefix: &ObjectPath) -> Result<Vec<String>, RemoteError> {
        let this = self;
        let listed = self
            .retry("list", prefix, move || async move {
                this.timed("list", prefix, this.store.list_with_delimiter(Some(prefix)))
                    .await
            })
            .await?;
        Ok(listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    /// Every object under `prefix` (recursively) with its size.
    pub(crate) async fn list_objects(&self, prefix: &ObjectPath) -> Result<Vec<(ObjectPath, u64)>, RemoteError> {
        let this = self;
        self.retry("list", prefix, move || async move {
            let mut stream = this.store.list(Some(prefix));
            let mut objects = Vec::new();
            while let Some(meta) = this
                .timed("list", prefix, stream.next().map(Ok::<_, object_store::Error>))
                .await?
            {
                let meta = meta.map_err(|source| RemoteError::Store {
                    op: "list",
                    key: prefix.to_string(),
                    source,
                })?;
                objects.push((meta.location, meta.size));
            }
            Ok(objects)
        })
        .await
    }

    /// Deletes the object; a missing one is fine.
    pub(crate) async fn delete(&self, key: &ObjectPath) -> Result<(), RemoteError> {
        let this = self;
        let deleted = self
            .retry("delete", key, move || async move {
                this.timed("delete", key, this.store.delete(key)).await
            })
            .await;
        found(deleted).map(|_| ())
    }
}
