//! Control metadata in SQLite: accounts, API keys, projects ([`mod@self`]); databases, branches and timelines
//! ([`databases`]); operations ([`operations`]); idempotent responses ([`idempotency`]); webhooks and their
//! deliveries ([`webhooks`]); consumption buckets ([`consumption`]).
//!
//! The schema is versioned by a `schema_version` table; each migration runs in its own transaction
//! together with the version bump, so a crash leaves the schema at a whole version. Every state change
//! is one transaction. Calls block: async callers run them in `spawn_blocking`.
//!
//! **Invariant:** a project row is visible only through its `account_id`; every project query filters on
//! it, so another account's project is indistinguishable from a missing one.

use std::path::Path;

use pool::{Pool, PoolConfig, Pooled};
use sql::{params, Connection, OptionalExtension, SqlError, Transaction, TransactionBehavior};

use crate::{files, ids};

pub mod audit;
pub mod consumption;
pub mod databases;
pub mod hosts;
pub mod idempotency;
pub mod keys;
pub mod labels;
pub mod leases;
pub mod operations;
pub mod pageservers;
pub mod pool;
pub mod rate_limits;
pub mod sql;
pub mod timeline_sets;

#[cfg(test)]
pub(crate) mod scenarios;
pub mod webhooks;

pub use keys::{ApiKey, KeyScope};
use labels::{filter_params, label_condition, labels_column, labels_to_sql, LabelFilter, Labels};

/// One schema migration: SQL, or code for what SQL cannot do.
enum Migration {
    Sql(&'static str),
    Code(fn(&Transaction<'_>) -> Result<(), StoreError>),
}

/// Migrations in order; migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[Migration] = &[
    Migration::Sql(
        "
    CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL
    );
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id),
        hash BLOB NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        revoked_at TEXT
    );
    CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id),
        name TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX projects_by_account ON projects(account_id, id);
",
    ),
    Migration::Sql(
        "
    CREATE TABLE databases (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        account_id TEXT NOT NULL REFERENCES accounts(id),
        name TEXT NOT NULL,
        region TEXT NOT NULL,
        status TEXT NOT NULL,
        tenant_id TEXT NOT NULL UNIQUE,
        default_branch_id TEXT NOT NULL,
        password TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (project_id, name)
    );
    CREATE INDEX databases_by_project ON databases(project_id, id);
    CREATE TABLE timelines (
        timeline_id TEXT PRIMARY KEY,
        database_id TEXT NOT NULL,
        ancestor_timeline_id TEXT,
        start_lsn INTEGER NOT NULL
    );
    CREATE INDEX timelines_by_database ON timelines(database_id);
    CREATE TABLE branches (
        id TEXT PRIMARY KEY,
        database_id TEXT NOT NULL REFERENCES databases(id),
        name TEXT NOT NULL,
        parent_branch_id TEXT,
        parent_lsn INTEGER,
        timeline_id TEXT NOT NULL REFERENCES timelines(timeline_id),
        created_at TEXT NOT NULL,
        UNIQUE (database_id, name)
    );
    CREATE INDEX branches_by_database ON branches(database_id, id);
    CREATE TABLE operations (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        account_id TEXT NOT NULL,
        database_id TEXT,
        branch_id TEXT,
        action TEXT NOT NULL,
        status TEXT NOT NULL,
        error TEXT,
        params TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX operations_by_project ON operations(project_id, id);
    CREATE INDEX operations_running ON operations(status) WHERE status = 'running';
    CREATE TABLE idempotency_keys (
        account_id TEXT NOT NULL,
        key TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        status INTEGER NOT NULL,
        body BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (account_id, key)
    );
",
    ),
    Migration::Sql(
        "
    ALTER TABLE idempotency_keys ADD COLUMN request_hash BLOB;
",
    ),
    // Passwords at rest (issue 13): each database keeps only the SCRAM-SHA-256 verifier of its password, and
    // stored responses lose the passwords in their connection strings.
    Migration::Code(forget_passwords),
    // The branch workflow (issue 15): protected branches and branches that expire. `expires_at` is ISO 8601 UTC
    // text with three fractional digits (as `created_at`), so it sorts as the time and the expiry sweep reads
    // the index in time order.
    Migration::Sql(
        "
    ALTER TABLE branches ADD COLUMN protected INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE branches ADD COLUMN expires_at TEXT;
    CREATE INDEX branches_by_expiry ON branches(expires_at) WHERE expires_at IS NOT NULL;
",
    ),
    // Labels (issue 15): a JSON object of strings on projects, databases and branches.
    Migration::Sql(
        "
    ALTER TABLE projects ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE databases ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE branches ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
",
    ),
    // Scoped keys and the audit log (issue 15): a key limited to one project and/or to reading, with an optional
    // expiry; one row per mutating call, by project.
    Migration::Sql(
        "
    ALTER TABLE api_keys ADD COLUMN project_id TEXT;
    ALTER TABLE api_keys ADD COLUMN read_only INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
    CREATE TABLE audit_log (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        key_id TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        status INTEGER NOT NULL,
        request_id TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX audit_by_project ON audit_log(project_id, id);
",
    ),
    // Webhooks (issue 15): subscriptions per project, and their deliveries, which are both the durable queue
    // (`pending` with the next attempt's time) and the log (every attempt's status code, as JSON).
    Migration::Sql(
        "
    CREATE TABLE webhooks (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        secret TEXT NOT NULL,
        key_id TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX webhooks_by_project ON webhooks(project_id, id);
    CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        webhook_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        event TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts TEXT NOT NULL,
        next_attempt_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX deliveries_by_webhook ON webhook_deliveries(webhook_id, id);
    CREATE INDEX deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';
",
    ),
    // Consumption (issue 15): hourly buckets per branch (logical size, WAL written, compute time), and each
    // branch's cursor (its timeline and last record LSN at the previous sample) that WAL written is measured from.
    Migration::Sql(
        "
    CREATE TABLE consumption (
        branch_id TEXT NOT NULL,
        hour TEXT NOT NULL,
        project_id TEXT NOT NULL,
        database_id TEXT NOT NULL,
        logical_size_bytes INTEGER NOT NULL,
        written_bytes INTEGER NOT NULL,
        compute_active_ms INTEGER NOT NULL,
        PRIMARY KEY (branch_id, hour)
    );
    CREATE INDEX consumption_by_project ON consumption(project_id, hour);
    CREATE INDEX consumption_by_hour ON consumption(hour);
    CREATE TABLE consumption_cursors (
        branch_id TEXT PRIMARY KEY,
        timeline_id TEXT NOT NULL,
        last_lsn INTEGER NOT NULL
    );
",
    ),
    // Scale to zero (`databases::suspension`): every database, existing ones included, is suspended after five
    // minutes without a session unless told otherwise; a suspension from before this reads as the API's.
    Migration::Sql(
        "
    ALTER TABLE databases ADD COLUMN suspend_timeout_seconds INTEGER NOT NULL DEFAULT 300;
    ALTER TABLE databases ADD COLUMN suspended_reason TEXT;
",
    ),
    // Operation leases (issue 17, `leases`): the API process running each operation and until when, so processes
    // sharing PostgreSQL metadata run an operation once and take over a dead one's.
    Migration::Sql(
        "
    ALTER TABLE operations ADD COLUMN lease_owner TEXT;
    ALTER TABLE operations ADD COLUMN lease_expires_at TEXT;
",
    ),
    // The shared rate limit (issue 17, `rate_limits`): the requests each API process admitted per account in each
    // one-second window, published every ~200 ms, so processes sharing the metadata share each account's limit.
    Migration::Sql(
        "
    CREATE TABLE rate_limit_counts (
        owner TEXT NOT NULL,
        account_id TEXT NOT NULL,
        window_ms INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (owner, account_id, window_ms)
    );
    CREATE INDEX rate_limit_counts_by_window ON rate_limit_counts(window_ms);
",
    ),
    // Compute placement (issue 17 item 4, `hosts`): the registry of compute hosts (each `cambium api`, with the
    // addresses proxies and peers reach it at and a heartbeat lease) and the host each database is placed on.
    Migration::Sql(
        "
    CREATE TABLE compute_hosts (
        id TEXT PRIMARY KEY,
        pg_address TEXT NOT NULL,
        api_url TEXT NOT NULL,
        lease_expires_at TEXT NOT NULL,
        started_at TEXT NOT NULL
    );
    ALTER TABLE databases ADD COLUMN compute_host TEXT;
    CREATE INDEX databases_by_compute_host ON databases(compute_host);
",
    ),
    // Safekeeper sets (issue 17 item 3, `timeline_sets`): the safekeepers that hold each timeline's WAL, a JSON
    // list of addresses; a timeline without a row is on the first three configured.
    Migration::Sql(
        "
    CREATE TABLE timeline_safekeepers (
        timeline_id TEXT PRIMARY KEY,
        database_id TEXT NOT NULL,
        safekeepers TEXT NOT NULL
    );
    CREATE INDEX timeline_safekeepers_by_database ON timeline_safekeepers(database_id);
",
    ),
    // Pageserver placement (issue 17 item 2, `pageservers`): the pageserver each database's tenant lives on (its
    // gRPC address as configured; NULL: the first configured pageserver, where every tenant lived before).
    Migration::Sql(
        "
    ALTER TABLE databases ADD COLUMN pageserver TEXT;
",
    ),
    // Branch creation overlapped with its storage (issue 12 item 7): a timeline whose row was written at once with
    // its creation on the storage, not yet known to be there (`control::branches`: completed before it is served).
    Migration::Sql(
        "
    ALTER TABLE timelines ADD COLUMN storage_pending INTEGER NOT NULL DEFAULT 0;
",
    ),
    // The secret a compute host's peers present on its `/internal/` routes (issue 17: the re-point after a
    // pageserver move), new at each registration, read from here by the peers, never shown through `/v1`.
    Migration::Sql(
        "
    ALTER TABLE compute_hosts ADD COLUMN internal_token TEXT NOT NULL DEFAULT '';
",
    ),
    // `Idempotency-Key` reservations shared by the API processes on one metadata database (issue 17 item 1,
    // `idempotency`): the key whose first request is running, the process running it and its lease.
    Migration::Sql(
        "
    CREATE TABLE idempotency_reservations (
        account_id TEXT NOT NULL,
        key TEXT NOT NULL,
        owner TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        PRIMARY KEY (account_id, key)
    );
",
    ),
    // Retired timelines (issue 12): an ancestor no branch is on (a branch's old timeline after a restore without
    // `preserve`), sealed on the pageserver with everything its children read durable there; its safekeeper
    // copies are not needed, and any left is a leftover the reconciler deletes (`control::branches`).
    Migration::Sql(
        "
    ALTER TABLE timelines ADD COLUMN retired INTEGER NOT NULL DEFAULT 0;
",
    ),
    // Webhook deliveries queued in a branch creation's own transaction (issue 12): held (not due, not listed) for
    // the creation's timeline until the storage is known to hold it, then released in the transaction that
    // records that; taken back with the creation.
    Migration::Sql(
        "
    ALTER TABLE webhook_deliveries ADD COLUMN held_for_timeline TEXT;
    CREATE INDEX deliveries_held ON webhook_deliveries(held_for_timeline) WHERE held_for_timeline IS NOT NULL;
",
    ),
    // The audit log's per-project sequence numbers (issue 12): an entry's place in its project's log, so the
    // entries past the count bound are an index range, not a walk back through the newest 10 000.
    Migration::Sql(
        "
    ALTER TABLE audit_log ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    UPDATE audit_log SET seq = numbered.n FROM (
        SELECT id, row_number() OVER (PARTITION BY project_id ORDER BY id) AS n FROM audit_log
    ) AS numbered WHERE audit_log.id = numbered.id;
    CREATE INDEX audit_by_project_seq ON audit_log(project_id, seq);
",
    ),
];

/// The columns [`project_row`] reads.
const PROJECT_COLUMNS: &str = "id, account_id, name, created_at, labels";

/// The metadata's file name in the data directory.
pub const METADATA_FILE: &str = "metadata.sqlite";
/// The bytes of a SQLite WAL file's header.
const WAL_HEADER_BYTES: u64 = 32;
/// The bytes of a SQLite WAL frame's header (the page follows it).
const WAL_FRAME_HEADER_BYTES: u64 = 24;
/// Frames of zeros written past what the WAL holds at an automatic checkpoint: the commit that passes it.
const WAL_SLACK_FRAMES: u64 = 64;
/// The zeros written at a time when the WAL is preallocated.
const WAL_ZEROS_CHUNK_BYTES: usize = 1 << 20;

/// How long a statement waits for a lock held by another connection.
const BUSY_TIMEOUT_MS: u64 = 5_000;

/// An error from the metadata store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The metadata database (SQLite or PostgreSQL) failed, or held a value of the wrong kind.
    #[error("metadata database: {0}")]
    Sql(#[from] SqlError),
    /// The database holds something this code cannot have written.
    #[error("corrupt metadata: {0}")]
    Corrupt(String),
    /// A uniqueness rule refused the change (a duplicate name).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The metadata file could not be created or its mode set.
    #[error("metadata file: {0}")]
    Io(#[from] std::io::Error),
    /// A quota refused the change; the message names the limit and the count.
    #[error("quota exceeded: {0}")]
    QuotaExceeded(String),
    /// No metadata connection could be had in time (all in use past the pool's wait, or the metadata server
    /// out of reach); retrying later may work.
    #[error("metadata unavailable: {0}")]
    Unavailable(String),
    /// A call made without waiting ([`pool::without_waiting`]) found no idle connection; the caller runs it
    /// again where it may wait. Never the outcome of a call that may wait.
    #[error("metadata: no idle connection for a call that may not wait")]
    WouldWait,
}

/// [`StoreError::QuotaExceeded`] unless `count` of `what` (plural) in `scope` is below `max`.
pub(crate) fn check_quota(count: i64, max: u32, what: &str, scope: &str) -> Result<(), StoreError> {
    if count < i64::from(max) {
        return Ok(());
    }
    Err(StoreError::QuotaExceeded(format!(
        "{scope} has {count} {what}, and its quota is {max}: delete one before creating another"
    )))
}

/// Whether `account` has project `project_id` (read on `conn`, which may be a transaction's).
pub(crate) fn has_project(conn: &Connection, account: &AccountId, project_id: &str) -> Result<bool, StoreError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM projects WHERE account_id = ?1 AND id = ?2",
            params![account.0, project_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// `error` as [`StoreError::Conflict`] with `message` if it is a uniqueness violation.
pub(crate) fn conflict_on_unique(error: SqlError, message: &str) -> StoreError {
    if error.is_unique_violation() {
        StoreError::Conflict(message.to_owned())
    } else {
        StoreError::Sql(error)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> StoreError {
        StoreError::Sql(SqlError::Sqlite(error))
    }
}

/// An account: the owner of keys and projects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccountId(pub String);

/// A project row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// `proj_<ULID>`.
    pub id: String,
    /// The owning account.
    pub account_id: AccountId,
    /// The user-chosen name.
    pub name: String,
    /// ISO 8601 UTC.
    pub created_at: String,
    /// Its labels.
    pub labels: Labels,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The rows, in id (creation) order.
    pub items: Vec<T>,
    /// The id to pass as the next `after`, or `None` at the end.
    pub next_after: Option<String>,
}

impl<T> Page<T> {
    /// The page made from up to `limit + 1` rows read in listing order: the extra row, if it came, only says
    /// that another page follows, which starts after the last row kept (named by `id`).
    pub(crate) fn from_one_extra(mut items: Vec<T>, limit: usize, id: impl Fn(&T) -> String) -> Page<T> {
        let next_after = if items.len() > limit {
            items.truncate(limit);
            items.last().map(id)
        } else {
            None
        };
        Page { items, next_after }
    }
}

/// Where the metadata is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataLocation {
    /// `metadata.sqlite` in this data directory (the default).
    DataDir(std::path::PathBuf),
    /// A PostgreSQL database, by its URL, which several processes may share.
    Postgres(String),
}

/// The metadata store: a bounded pool of connections (SQLite or PostgreSQL; [`pool`]).
#[derive(Debug)]
pub struct Store {
    pool: Pool,
    /// Which backend the pool's connections speak to.
    dialect: sql::Dialect,
    /// This process's lease owner id ([`leases`]).
    owner: String,
    /// The secret this process's peers present on its `/internal/` routes ([`Store::internal_token`]).
    internal_token: String,
}

/// `conn` (to the metadata file) with the settings every connection needs: the busy timeout, and the
/// per-connection pragmas (the journal mode is the file's, set once by [`Store::open_sqlite`]).
fn sqlite_session(conn: rusqlite::Connection) -> Result<Connection, rusqlite::Error> {
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    Ok(Connection::sqlite(conn))
}

/// Now, as the ISO 8601 UTC string stored in `created_at` columns.
pub(crate) fn now() -> (u64, String) {
    let now = jiff::Timestamp::now();
    let ms = u64::try_from(now.as_millisecond()).unwrap_or(0);
    (ms, timestamp_text(now))
}

/// `timestamp` as stored: ISO 8601 UTC with exactly three fractional digits, so the text sorts as the time.
pub(crate) fn timestamp_text(timestamp: jiff::Timestamp) -> String {
    format!("{timestamp:.3}")
}

/// A new lease owner id: one per opened store (one per process).
fn new_owner() -> String {
    new_id("api_", now().0)
}

/// A new secret for a host's `/internal/` routes: 32 random bytes in hex.
fn new_internal_token() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    // SystemRandom fails only if the OS has no randomness source: nothing can run then.
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .unwrap_or_else(|_| panic!("the OS random source failed"));
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new id with `prefix`.
pub(crate) fn new_id(prefix: &str, now_ms: u64) -> String {
    format!("{prefix}{}", ids::new_ulid(now_ms))
}

impl Store {
    /// Opens (creating if needed) `metadata.sqlite` in `data_dir` and brings its schema up to date.
    ///
    /// It holds key hashes and every database's password verifier: the file is created `0600` (SQLite gives its
    /// `-wal` and `-shm` the same mode), and an existing one, or its `-wal` and `-shm`, looser than that is
    /// tightened. Deleted content is overwritten (`secure_delete`), and after a migration the WAL is checkpointed
    /// and truncated, so what a migration erases (the passwords of older versions) is gone from the files.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        Store::open_sqlite(data_dir, PoolConfig::SQLITE_DEFAULT)
    }

    /// [`Store::open`] with at most `pool`'s connections. Each is a connection to the one file in WAL mode:
    /// readers beside one writer (`BEGIN IMMEDIATE` takes SQLite's write lock, waiting up to the busy timeout).
    pub fn open_sqlite(data_dir: &Path, pool: PoolConfig) -> Result<Store, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = data_dir.join(METADATA_FILE);
        // An empty file is an empty SQLite database; creating it here is what sets its mode.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)?;
        let conn = rusqlite::Connection::open(&path)?;
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // After the journal mode, so the `-wal` and `-shm` files exist if they ever will.
        for suffix in ["", "-wal", "-shm"] {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            files::private_file(Path::new(&name))?;
        }
        let first = sqlite_session(conn)?;
        let connect = Box::new(move || -> Result<Connection, SqlError> {
            Ok(sqlite_session(rusqlite::Connection::open(&path)?)?)
        });
        let store = Store {
            dialect: first.dialect(),
            pool: Pool::new(pool, first, connect),
            owner: new_owner(),
            internal_token: new_internal_token(),
        };
        if store.migrate()? {
            store.checkpoint()?;
        }
        let mut wal = data_dir.join(METADATA_FILE).into_os_string();
        wal.push("-wal");
        if let Err(error) = store.preallocate_wal(Path::new(&wal)) {
            tracing::warn!(%error, "the metadata's WAL was not preallocated: its commits append to it until it cycles");
        }
        Ok(store)
    }

    /// Opens the metadata in the PostgreSQL database at `url` (`postgresql://user@host:port/database`, no TLS)
    /// and brings its schema up to date: the same migrations as SQLite's, translated, each in a transaction that
    /// holds the writer lock, so processes that start together migrate once. Several processes may use one
    /// database at once (see [`sql`]'s invariant).
    pub fn open_postgres(url: &str) -> Result<Store, StoreError> {
        Store::open_postgres_with(url, PoolConfig::POSTGRES_DEFAULT)
    }

    /// [`Store::open_postgres`] with at most `pool`'s connections, each a session of its own on the server.
    pub fn open_postgres_with(url: &str, pool: PoolConfig) -> Result<Store, StoreError> {
        let first = Connection::postgres(url)?;
        let url = url.to_owned();
        let store = Store {
            dialect: first.dialect(),
            pool: Pool::new(pool, first, Box::new(move || Connection::postgres(&url))),
            owner: new_owner(),
            internal_token: new_internal_token(),
        };
        store.migrate()?;
        Ok(store)
    }

    /// Opens the metadata where `location` says.
    pub fn open_at(location: &MetadataLocation) -> Result<Store, StoreError> {
        let pool = match location {
            MetadataLocation::DataDir(_) => PoolConfig::SQLITE_DEFAULT,
            MetadataLocation::Postgres(_) => PoolConfig::POSTGRES_DEFAULT,
        };
        Store::open_at_with(location, pool)
    }

    /// Opens the metadata where `location` says with at most `pool`'s connections.
    pub fn open_at_with(location: &MetadataLocation, pool: PoolConfig) -> Result<Store, StoreError> {
        match location {
            MetadataLocation::DataDir(dir) => Store::open_sqlite(dir, pool),
            MetadataLocation::Postgres(url) => Store::open_postgres_with(url, pool),
        }
    }

    /// Which backend holds the metadata: on PostgreSQL several processes may share it.
    pub fn dialect(&self) -> sql::Dialect {
        self.dialect
    }

    /// A connection of the pool for one call (its statements or its transaction), given back when dropped;
    /// [`StoreError::Unavailable`] if none is free within the pool's wait. A panic while holding it rolled back
    /// its transaction (dropped uncommitted).
    pub(crate) fn conn(&self) -> Result<Pooled<'_>, StoreError> {
        self.pool.get()
    }

    /// The schema version after migrations.
    pub fn schema_version(&self) -> Result<usize, StoreError> {
        let conn = self.conn()?;
        let version: i64 = conn.query_row("SELECT version FROM schema_version", [], |row| row.get(0))?;
        usize::try_from(version).map_err(|_| StoreError::Corrupt(format!("schema version {version}")))
    }

    /// Copies the WAL into the database file and truncates it (what a migration rewrote is then only in the
    /// file, where `secure_delete` zeroed what it freed). Another connection reading (`cambium keys`) can keep it
    /// from finishing: that is logged, and the next migration or SQLite's own checkpoints finish it.
    fn checkpoint(&self) -> Result<(), StoreError> {
        let conn = self.conn()?;
        let Some(conn) = conn.as_sqlite() else {
            return Ok(());
        };
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
        if busy != 0 {
            tracing::warn!("the metadata's WAL could not be truncated after a migration: another connection reads it");
        }
        Ok(())
    }

    /// Writes zeros past the end of the WAL file, as far as the WAL grows between SQLite's automatic checkpoints
    /// (`wal_autocheckpoint` frames and [`WAL_SLACK_FRAMES`]), so that commits overwrite blocks inside the
    /// file's size and their fsync writes the frames alone, not the inode and block map too: a WAL that starts
    /// empty (every process start; after a migration's truncation) otherwise grows by appends until its first
    /// checkpoint, and an append at the file's end costs ~2.5× an overwrite on this project's disk (the
    /// branch creation's metadata commit appends ~45 KiB). SQLite reads no WAL byte past its last valid frame
    /// (a frame carries the header's salts and a running checksum, which zeros never match), and keeps stale
    /// bytes there itself after every restart of the log. Done under SQLite's write lock (an empty `BEGIN
    /// IMMEDIATE`), so no writer in any process appends meanwhile; readers never look past the valid frames.
    fn preallocate_wal(&self, wal: &Path) -> Result<(), StoreError> {
        use std::os::unix::fs::FileExt;
        let conn = self.conn()?;
        let Some(conn) = conn.as_sqlite() else {
            return Ok(());
        };
        let page_bytes: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
        let autocheckpoint_frames: i64 = conn.query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))?;
        let (Ok(page_bytes), Ok(frames)) = (u64::try_from(page_bytes), u64::try_from(autocheckpoint_frames)) else {
            return Ok(());
        };
        if frames == 0 || page_bytes == 0 {
            return Ok(());
        }
        let target_bytes = WAL_HEADER_BYTES + (frames + WAL_SLACK_FRAMES) * (page_bytes + WAL_FRAME_HEADER_BYTES);
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let extended = (|| -> Result<(), std::io::Error> {
            let file = match std::fs::OpenOptions::new().write(true).open(wal) {
                Ok(file) => file,
                // No WAL yet: SQLite makes it with its first write, and the next open fills it.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(error) => return Err(error),
            };
            let mut at = file.metadata()?.len();
            let zeros = vec![0u8; WAL_ZEROS_CHUNK_BYTES];
            while at < target_bytes {
                let len = (target_bytes - at).min(zeros.len() as u64) as usize;
                file.write_all_at(&zeros[..len], at)?;
                at += len as u64;
            }
            file.sync_data()
        })();
        if let Err(error) = conn.execute_batch("COMMIT") {
            // An empty transaction's commit failing leaves it open: the connection goes back to the pool without it.
            let _ = conn.execute_batch("ROLLBACK");
            return Err(error.into());
        }
        Ok(extended?)
    }

    /// Applies the migrations the schema lacks; returns whether it applied any.
    fn migrate(&self) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
        let existing: Option<i64> = tx
            .query_row("SELECT version FROM schema_version", [], |row| row.get(0))
            .optional()?;
        if existing.is_none() {
            tx.execute("INSERT INTO schema_version (version) VALUES (0)", [])?;
        }
        tx.commit()?;
        let mut applied = false;
        loop {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let version: i64 = tx.query_row("SELECT version FROM schema_version", [], |row| row.get(0))?;
            let version =
                usize::try_from(version).map_err(|_| StoreError::Corrupt(format!("schema version {version}")))?;
            if version > MIGRATIONS.len() {
                return Err(StoreError::Corrupt(format!(
                    "schema version {version} is newer than this binary's {}",
                    MIGRATIONS.len()
                )));
            }
            let Some(migration) = MIGRATIONS.get(version) else {
                return Ok(applied);
            };
            match migration {
                Migration::Sql(sql) => tx.execute_batch(sql)?,
                Migration::Code(code) => code(&tx)?,
            }
            applied = true;
            let next =
                i64::try_from(version + 1).map_err(|_| StoreError::Corrupt(format!("schema version {version}")))?;
            tx.execute("UPDATE schema_version SET version = ?1", [next])?;
            tx.commit()?;
        }
    }

    /// Creates an account.
    pub fn create_account(&self) -> Result<AccountId, StoreError> {
        let (ms, created_at) = now();
        let id = new_id("acct_", ms);
        let conn = self.conn()?;
        conn.execute(
            "INSERT INTO accounts (id, created_at) VALUES (?1, ?2)",
            params![id, created_at],
        )?;
        Ok(AccountId(id))
    }

    /// Creates the first account (the admin one) if there is no account yet, and returns it; `None` if there is
    /// one already. The check and the insert are one immediate transaction, so of several processes starting at
    /// once on one metadata database exactly one creates it.
    pub fn create_first_account(&self) -> Result<Option<AccountId>, StoreError> {
        let (ms, created_at) = now();
        let id = new_id("acct_", ms);
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let count: i64 = tx.query_row("SELECT count(*) FROM accounts", [], |row| row.get(0))?;
        if count > 0 {
            return Ok(None);
        }
        tx.execute(
            "INSERT INTO accounts (id, created_at) VALUES (?1, ?2)",
            params![id, created_at],
        )?;
        tx.commit()?;
        Ok(Some(AccountId(id)))
    }

    /// Creates a project named `name` for `account`, unless it has `projects_max` already
    /// ([`StoreError::QuotaExceeded`]); the count and the insert are one transaction.
    pub fn create_project(
        &self,
        account: &AccountId,
        name: &str,
        projects_max: u32,
        labels: &Labels,
    ) -> Result<Project, StoreError> {
        let (ms, created_at) = now();
        let project = Project {
            id: new_id("proj_", ms),
            account_id: account.clone(),
            name: name.to_owned(),
            created_at,
            labels: labels.clone(),
        };
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let count: i64 = tx.query_row(
            "SELECT count(*) FROM projects WHERE account_id = ?1",
            [&account.0],
            |row| row.get(0),
        )?;
        check_quota(count, projects_max, "projects", "the account")?;
        tx.execute(
            &format!("INSERT INTO projects ({PROJECT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"),
            params![
                project.id,
                account.0,
                project.name,
                project.created_at,
                labels_to_sql(&project.labels)
            ],
        )?;
        tx.commit()?;
        Ok(project)
    }

    /// Up to `limit` of `account`'s projects with ids after `after` (and labels matching `filter`, if given), in
    /// id (creation) order.
    pub fn list_projects(
        &self,
        account: &AccountId,
        after: Option<&str>,
        limit: usize,
        filter: Option<&LabelFilter>,
    ) -> Result<Page<Project>, StoreError> {
        assert!(limit > 0, "limit {limit}");
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {PROJECT_COLUMNS} FROM projects
             WHERE account_id = ?1 AND id > ?2 AND {} ORDER BY id LIMIT ?3",
            label_condition(conn.dialect())
        ))?;
        // One extra row says whether another page follows.
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let (key, value) = filter_params(filter);
        let items = stmt
            .query_map(params![account.0, after.unwrap_or(""), fetch, key, value], project_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::from_one_extra(items, limit, |p| p.id.clone()))
    }

    /// `account`'s project `id`.
    pub fn get_project(&self, account: &AccountId, id: &str) -> Result<Option<Project>, StoreError> {
        let conn = self.conn()?;
        let project = conn
            .query_row(
                &format!("SELECT {PROJECT_COLUMNS} FROM projects WHERE account_id = ?1 AND id = ?2"),
                params![account.0, id],
                project_row,
            )
            .optional()?;
        Ok(project)
    }

    /// Renames `account`'s project `id`; `None` if there is no such project.
    pub fn rename_project(&self, account: &AccountId, id: &str, name: &str) -> Result<Option<Project>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let changed = tx.execute(
            "UPDATE projects SET name = ?3 WHERE account_id = ?1 AND id = ?2",
            params![account.0, id, name],
        )?;
        let project = if changed == 1 {
            Some(tx.query_row(
                &format!("SELECT {PROJECT_COLUMNS} FROM projects WHERE id = ?1"),
                [id],
                project_row,
            )?)
        } else {
            None
        };
        tx.commit()?;
        Ok(project)
    }

    /// Deletes `account`'s project `id` with its databases, branches, timelines and operations, in one
    /// transaction; returns the deleted databases (their storage is the caller's to delete), or `None` if there
    /// is no such project.
    pub fn delete_project(
        &self,
        account: &AccountId,
        id: &str,
    ) -> Result<Option<Vec<databases::Database>>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !has_project(&tx, account, id)? {
            return Ok(None);
        }
        let deleted = databases::databases_of_project(&tx, id)?;
        for database in &deleted {
            databases::delete_database_rows(&tx, &database.id)?;
        }
        tx.execute("DELETE FROM operations WHERE project_id = ?1", [id])?;
        tx.execute("DELETE FROM audit_log WHERE project_id = ?1", [id])?;
        webhooks::delete_project_webhooks(&tx, id)?;
        tx.execute("DELETE FROM consumption WHERE project_id = ?1", [id])?;
        tx.execute("DELETE FROM projects WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(Some(deleted))
    }

    /// The admin account: the first one, which `cambium up` creates on its first start (ids are ULIDs, so id
    /// order is creation order). It alone may read `/metrics`, which counts every account's databases.
    pub fn admin_account(&self) -> Result<Option<AccountId>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row("SELECT id FROM accounts ORDER BY id LIMIT 1", [], |row| {
                Ok(AccountId(row.get(0)?))
            })
            .optional()?)
    }

    /// Every account, oldest first.
    pub fn accounts(&self) -> Result<Vec<AccountId>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare("SELECT id FROM accounts ORDER BY id")?;
        let rows = stmt.query_map([], |row| Ok(AccountId(row.get(0)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Migration 4: each database's password is replaced by its SCRAM-SHA-256 verifier (PostgreSQL's text form,
/// computed from the stored password), the column that held the password is dropped, and the responses kept for
/// `Idempotency-Key` retries lose the passwords of their connection strings.
fn forget_passwords(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch("ALTER TABLE databases ADD COLUMN password_verifier TEXT NOT NULL DEFAULT ''")?;
    let rows = {
        let mut stmt = tx.prepare("SELECT id, password FROM databases")?;
        let rows = stmt.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    for (id, password) in rows {
        let verifier = compute::pg::ScramVerifier::from_password(&password, compute::pg::scram::ITERATIONS_DEFAULT)
            .map_err(|e| StoreError::Corrupt(format!("no verifier for database {id}'s password: {e}")))?;
        tx.execute(
            "UPDATE databases SET password_verifier = ?2 WHERE id = ?1",
            params![id, verifier.to_string()],
        )?;
    }
    tx.execute_batch("ALTER TABLE databases DROP COLUMN password")?;
    idempotency::redact_stored_responses(tx)?;
    Ok(())
}

fn project_row(row: &sql::Row<'_>) -> crate::store::sql::Result<Project> {
    Ok(Project {
        id: row.get(0)?,
        account_id: AccountId(row.get(1)?),
        name: row.get(2)?,
        created_at: row.get(3)?,
        labels: labels_column(row, 4)?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use super::*;

    #[test]
    fn migrations_apply_once_and_reopen() {
        crate::store::scenarios::on_sqlite(migrations_apply_once_and_reopen_on);
    }

    /// [`migrations_apply_once_and_reopen`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn migrations_apply_once_and_reopen_on(open: crate::store::scenarios::Open<'_>) {
        let store = open();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len());
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "a", 10, &Labels::new()).unwrap();
        drop(store);
        let store = open();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len());
        assert_eq!(store.get_project(&account, &project.id).unwrap(), Some(project));
    }

    #[test]
    fn the_wal_is_preallocated_under_the_writer_lock_and_loses_no_commit() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join(format!("{METADATA_FILE}-wal"));
        let wal_len = || std::fs::metadata(&wal).unwrap().len();
        let first = Store::open(dir.path()).unwrap();
        // 1000 frames (SQLite's default automatic checkpoint) and the slack, of 4096-byte pages.
        let preallocated = WAL_HEADER_BYTES + (1000 + WAL_SLACK_FRAMES) * (4096 + WAL_FRAME_HEADER_BYTES);
        assert_eq!(wal_len(), preallocated, "zeros up to the automatic checkpoint's size");
        let account = first.create_account().unwrap();
        let mut projects = Vec::new();
        for n in 0..20 {
            projects.push(
                first
                    .create_project(&account, &format!("p{n}"), 100, &Labels::new())
                    .unwrap(),
            );
        }
        assert_eq!(wal_len(), preallocated, "the commits overwrite the zeros");
        // A second store (another process's, in effect) opens while the first's commits are only in the WAL:
        // its preallocation writes past the file's end only, under the writer lock.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&wal)
            .unwrap()
            .set_len(preallocated / 2)
            .unwrap();
        let second = Store::open(dir.path()).unwrap();
        assert_eq!(wal_len(), preallocated, "extended again");
        for project in &projects {
            assert_eq!(
                second.get_project(&account, &project.id).unwrap().as_ref(),
                Some(project)
            );
        }
        projects.push(
            second
                .create_project(&account, "from the second", 100, &Labels::new())
                .unwrap(),
        );
        projects.push(
            first
                .create_project(&account, "from the first", 100, &Labels::new())
                .unwrap(),
        );
        drop(first);
        drop(second);
        let reopened = Store::open(dir.path()).unwrap();
        for project in &projects {
            assert_eq!(
                reopened.get_project(&account, &project.id).unwrap().as_ref(),
                Some(project)
            );
        }
        let conn = reopened.conn().unwrap();
        let check: String = conn
            .as_sqlite()
            .unwrap()
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }

    #[test]
    fn the_audit_sequence_migration_numbers_existing_entries() {
        crate::store::scenarios::on_sqlite(the_audit_sequence_migration_numbers_existing_entries_on);
    }

    /// Entries written before the audit log's sequence numbers (migration 21) get their places in their project's
    /// log, in id order, and the next entry follows them.
    pub(crate) fn the_audit_sequence_migration_numbers_existing_entries_on(open: crate::store::scenarios::Open<'_>) {
        let store = open();
        let account = store.create_account().unwrap();
        let p = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let q = store.create_project(&account, "q", 10, &Labels::new()).unwrap();
        let entry = |project: &str, status: u16| audit::NewAuditEntry {
            project_id: project.to_owned(),
            key_id: "key_1".to_owned(),
            method: "POST".to_owned(),
            path: "/".to_owned(),
            status,
            request_id: format!("req_{status}"),
        };
        for (project, status) in [(&p.id, 200), (&q.id, 201), (&p.id, 202), (&p.id, 203), (&q.id, 204)] {
            store.record_audit(&entry(project, status)).unwrap();
        }
        // As before the migration: no sequence column, the schema one version behind.
        store
            .conn()
            .unwrap()
            .execute_batch(
                "DROP INDEX audit_by_project_seq;
                 ALTER TABLE audit_log DROP COLUMN seq;
                 UPDATE schema_version SET version = version - 1;",
            )
            .unwrap();
        drop(store);
        let store = open();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len());
        store.record_audit(&entry(&p.id, 205)).unwrap();
        let places = |project: &str| -> Vec<(i64, i64)> {
            let conn = store.conn().unwrap();
            let mut stmt = conn
                .prepare("SELECT status, seq FROM audit_log WHERE project_id = ?1 ORDER BY id")
                .unwrap();
            stmt.query_map([project], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(places(&p.id), [(200, 1), (202, 2), (203, 3), (205, 4)]);
        assert_eq!(places(&q.id), [(201, 1), (204, 2)]);
    }

    #[test]
    fn the_first_account_is_made_once_by_racing_stores() {
        crate::store::scenarios::on_sqlite(the_first_account_is_made_once_by_racing_stores_on);
    }

    #[test]
    fn a_quota_holds_when_one_stores_calls_race() {
        crate::store::scenarios::on_sqlite(a_quota_holds_when_one_stores_calls_race_on);
    }

    /// Calls of one store race on its pool's connections to make projects against a quota: the count and the
    /// insert of each are one immediate transaction, which excludes the others on every connection, so exactly
    /// the quota's worth are made.
    pub(crate) fn a_quota_holds_when_one_stores_calls_race_on(open: crate::store::scenarios::Open<'_>) {
        const RACERS: usize = 8;
        const PROJECTS_MAX: u32 = 3;
        let store = open();
        let account = store.create_account().unwrap();
        let barrier = std::sync::Barrier::new(RACERS);
        let made = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..RACERS)
                .map(|i| {
                    let (store, account, barrier) = (&store, &account, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        match store.create_project(account, &format!("p{i}"), PROJECTS_MAX, &Labels::new()) {
                            Ok(_) => 1,
                            Err(StoreError::QuotaExceeded(_)) => 0,
                            Err(other) => panic!("racer {i}: {other}"),
                        }
                    })
                })
                .collect();
            racers.into_iter().map(|racer| racer.join().unwrap()).sum::<u32>()
        });
        assert_eq!(made, PROJECTS_MAX, "projects made past the quota");
        let listed = store.list_projects(&account, None, 100, None).unwrap();
        assert_eq!(listed.items.len(), 3);
    }

    /// Stores opened on one metadata (as by several API processes starting at once) race to make the first
    /// account: exactly one makes it, and later calls make none.
    pub(crate) fn the_first_account_is_made_once_by_racing_stores_on(open: crate::store::scenarios::Open<'_>) {
        let stores: Vec<Store> = (0..4).map(|_| open()).collect();
        let barrier = std::sync::Barrier::new(stores.len());
        let made: Vec<Option<AccountId>> = std::thread::scope(|scope| {
            let racers: Vec<_> = stores
                .iter()
                .map(|store| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        store.create_first_account().unwrap()
                    })
                })
                .collect();
            racers.into_iter().map(|racer| racer.join().unwrap()).collect()
        });
        let made: Vec<AccountId> = made.into_iter().flatten().collect();
        assert_eq!(made.len(), 1, "one store makes the first account");
        assert_eq!(stores[0].accounts().unwrap(), made);
        assert_eq!(stores[1].create_first_account().unwrap(), None);
    }

    /// Every byte of the metadata's files.
    fn file_bytes(dir: &Path) -> Vec<u8> {
        let mut bytes = Vec::new();
        for suffix in ["", "-wal", "-shm"] {
            if let Ok(read) = std::fs::read(dir.join(format!("{METADATA_FILE}{suffix}"))) {
                bytes.extend(read);
            }
        }
        bytes
    }

    fn contains(haystack: &[u8], needle: &str) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    #[test]
    fn the_password_migration_keeps_verifiers_and_erases_every_password() {
        const PASSWORD: &str = "OldPlaintextPassword0123456789ab";
        let dir = tempfile::tempdir().unwrap();
        {
            // A metadata file as version 3 left it, with a database's password in its row and in a stored
            // response, and its content partly in the WAL.
            let conn = rusqlite::Connection::open(dir.path().join(METADATA_FILE)).unwrap();
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (3);",
            )
            .unwrap();
            for migration in &MIGRATIONS[..3] {
                let Migration::Sql(sql) = migration else {
                    panic!("the first three are SQL")
                };
                conn.execute_batch(sql).unwrap();
            }
            conn.execute_batch(&format!(
                "INSERT INTO accounts VALUES ('acct_1', '2026-01-01T00:00:00.000Z');
                 INSERT INTO projects VALUES ('proj_1', 'acct_1', 'p', '2026-01-01T00:00:00.000Z');
                 INSERT INTO databases VALUES ('db_1', 'proj_1', 'acct_1', 'd', 'local', 'active',
                     '0123456789abcdef0123456789abcdef', 'br_1', '{PASSWORD}', '2026-01-01T00:00:00.000Z');
                 INSERT INTO idempotency_keys VALUES ('acct_1', 'k', 'POST', '/v1/projects/proj_1/databases', 201,
                     CAST('{{\"connection_uri\":\"postgresql://cambium:{PASSWORD}@127.0.0.1:5433/db_1?sslmode=disable\"}}' AS BLOB),
                     '2999-01-01T00:00:00.000Z', X'00');"
            ))
            .unwrap();
        }
        assert!(
            contains(&file_bytes(dir.path()), PASSWORD),
            "the set-up wrote the password"
        );
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len());
        let database = store.database("db_1").unwrap().expect("the database");
        let verifier = database.password_verifier.to_string();
        assert!(verifier.starts_with("SCRAM-SHA-256$4096:"), "{verifier}");
        assert_eq!(
            compute::pg::ScramVerifier::parse(&verifier).unwrap(),
            *database.password_verifier
        );
        let stored = store
            .idempotent_response(&AccountId("acct_1".to_owned()), "k")
            .unwrap()
            .expect("the stored response");
        assert_eq!(
            String::from_utf8(stored.body).unwrap(),
            r#"{"connection_uri":"postgresql://cambium@127.0.0.1:5433/db_1?sslmode=disable"}"#
        );
        assert!(
            !contains(&file_bytes(dir.path()), PASSWORD),
            "a password is left in the files"
        );
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.database("db_1").unwrap().expect("the database"), database);
    }
}
