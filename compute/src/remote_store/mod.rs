//! `RemotePageStore`: a [`PageStore`] that reads pages from the pageserver and commits through the
//! safekeepers (DESIGN §1, §5).
//!
//! - **Start.** [`RemotePageStore::start`] starts a [`WalProposer`] and campaigns: the epoch start LSN it wins
//!   with is where this compute's history begins, so it is the first read LSN. The database size at that LSN
//!   comes from `GetDbSize` and is kept in memory from then on.
//! - **Reads** are at a [`Snapshot`]: an LSN this store committed (or its epoch start). The host's memory
//!   cache first, then a page prefetched for this read, then the host's local file cache, else `GetPage` at
//!   the snapshot's LSN, with a deadline (`crate::cache`: cached pages are facts keyed by timeline, block and
//!   LSN range; this store, the branch's only writer, tells the cache which blocks its commits change, which
//!   lets a cached page serve later snapshots, and reads of a new or restored branch fall through to its
//!   ancestor's pages at the branch point). The ancestry comes from the pageserver's `GetTimelineInfo`, asked
//!   while the store campaigns. Reads in order are prefetched on one `GetPages` stream (`prefetch`), asked for
//!   by the VFS ([`PageStore::prefetch`]).
//! - **Commits.** One [`WalRecord`] of pages (byte-range deltas where little changed), handed to the proposer
//!   and acknowledged after the commit lock is released (`in_flight`: commits overlap, DESIGN §5 early lock
//!   release), or for a transaction past one part (`part_bytes_max`) a group of parts and a commit record, each
//!   with its own deadline (`commit`). Once acknowledged its end LSN becomes the read LSN and the cache and size are updated. On any error
//!   after the record may have been sent (a timeout is ambiguous, a newer proposer fenced this one) the store
//!   is failed: every later call fails too, because guessing whether the record is there would be a lie
//!   (DESIGN §5). The caller restarts the compute from what the safekeepers committed.
//!
//! - **Read-only at an LSN.** [`RemotePageStore::start_read_only`] starts no proposer: reads are `GetPage` at
//!   that fixed LSN (time travel) and every commit is refused, leaving the store usable.
//!
//! **Threading.** The `PageStore` methods block: SQLite calls them synchronously. They must be called from
//! blocking threads (`spawn_blocking` threads or plain threads), not from async code. The gRPC work runs on a
//! small multi-thread runtime owned by the store, never on the caller's runtime (the caller's runtime may be
//! a current-thread one whose only thread is the caller, and `Handle::block_on` from inside a runtime panics).
//! The caller waits on a std channel with a timeout: inside `block_in_place` if it is a worker of a
//! multi-thread runtime (so that runtime moves the worker's other tasks elsewhere), as is anywhere else (a
//! current-thread runtime stalls for at most the timeout; it cannot deadlock because the work runs elsewhere).
//!
//! The store is this file; its page cache is `page_cache`, and the byte-range deltas its commits send are
//! [`page_delta`]'s (`delta`).

mod commit;
mod delta;
mod election;
mod in_flight;
mod prefetch;
mod read;
mod resources;

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use cambium_types::{Lsn, TenantId, TimelineId, PAGE_SIZE_BYTES};
use parking_lot::{Condvar, Mutex};
use proto::pageserver as pb;
use proto::pageserver::page_service_client::PageServiceClient;
use tokio::runtime::RuntimeFlavor;
use tonic::transport::Channel;
use walproposer::{WalProposer, WalProposerConfig, WalProposerError};

use crate::cache::{HostCache, TimelineCache, ENTRY_BYTES};
use crate::dirty_pages::DirtyPages;
use crate::page_store::{validate_commit, PageStore, PageStoreError, Snapshot};
use election::{Election, Writer};
use prefetch::Prefetcher;

pub use delta::page_delta;
pub use prefetch::PrefetchConfig;
pub use resources::SharedResources;
use resources::{pageserver_endpoint, OwnedRuntime, StoreRuntime};

/// Pages of one commit put into the cache, at most (the last ones written; the commit holds them meanwhile).
pub const COMMIT_CACHED_PAGES_MAX: usize = 4096;

/// How many times one page read is asked for when each attempt runs out of time waiting (each attempt
/// is bounded by `get_page_timeout_ms`): 12 × 10 s by default, what applying a 4 GiB transaction may take.
pub const GET_PAGE_ATTEMPTS_MAX: u32 = 12;

/// New branches' elections run in the background at once in this process, at most (`start_new_branch`, and
/// `campaign` after `start_new_branch_deferred`: their stores return before them, so the host's bound on
/// background starts does not bound them); the rest wait their turn, first come first served. A new timeline's
/// first vote makes its directory on each safekeeper, and `Elected` writes its control file again.
pub const BACKGROUND_ELECTIONS_MAX: usize = 4;

static BACKGROUND_ELECTIONS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(BACKGROUND_ELECTIONS_MAX);

/// How much longer than an operation's own timeout the caller waits before giving up on it.
const WAIT_MARGIN: Duration = Duration::from_secs(2);

/// Where the store's database lives and how long to wait.
#[derive(Clone, Debug)]
pub struct RemotePageStoreConfig {
    /// Safekeeper addresses (`host:port` or `http://host:port`).
    pub safekeepers: Vec<String>,
    /// The pageserver's address (`host:port` or `http://host:port`).
    pub pageserver: String,
    /// The tenant.
    pub tenant_id: TenantId,
    /// The timeline (the branch this compute writes).
    pub timeline_id: TimelineId,
    /// Where the timeline's WAL starts.
    pub timeline_start_lsn: Lsn,
    /// Connecting to a safekeeper or the pageserver gives up after this long.
    pub connect_timeout_ms: u64,
    /// One request to a safekeeper is considered lost after this long (the proposer resends).
    pub safekeeper_request_timeout_ms: u64,
    /// Campaigning at start gives up after this long.
    pub election_timeout_ms: u64,
    /// A commit not confirmed by a majority after this long fails, ambiguously.
    pub commit_timeout_ms: u64,
    /// The deadline of one `GetPage` or `GetDbSize` (including the pageserver's wait for the read LSN).
    pub get_page_timeout_ms: u64,
    /// The host's page caches, shared with the host's other stores; `None`: a cache of its own, in memory, of
    /// `page_cache_capacity_pages`.
    pub cache: Option<Arc<HostCache>>,
    /// Pages cached in memory when the store has a cache of its own (`cache` is `None`).
    pub page_cache_capacity_pages: usize,
    /// How far ahead reads in order are prefetched.
    pub prefetch: PrefetchConfig,
    /// The runtime and pageserver connection of the host's stores; `None`: a runtime (two threads) and a
    /// connection of the store's own.
    pub shared: Option<Arc<SharedResources>>,
    /// How large transactions are carried.
    pub transactions: TransactionConfig,
    /// Those of `safekeepers` served in this process, called directly rather than over TCP.
    pub local_safekeepers: walproposer::LocalSafekeepers,
}

/// How a store carries transactions of any size (`commit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransactionConfig {
    /// Largest transaction, in bytes of pages written; a larger one is refused before anything is sent
    /// ([`PageStoreError::TooLarge`], SQLSTATE 54000).
    pub transaction_bytes_max: usize,
    /// A transaction's WAL travels in frames of about this many bytes (a part of a group, or one record).
    pub part_bytes_max: usize,
    /// Parts of one transaction appended and not yet acknowledged, at most.
    pub appends_in_flight_max: usize,
    /// Bytes of a transaction's pages the VFS keeps in memory; the rest goes to a temporary file.
    pub dirty_memory_bytes_max: usize,
}

impl Default for TransactionConfig {
    /// Transactions up to 4 GiB in parts of 8 MiB (4 in flight), 64 MiB of a transaction's pages in memory.
    fn default() -> Self {
        TransactionConfig {
            transaction_bytes_max: TRANSACTION_BYTES_MAX_DEFAULT,
            part_bytes_max: PART_BYTES_MAX_DEFAULT,
            appends_in_flight_max: 4,
            dirty_memory_bytes_max: crate::dirty_pages::DIRTY_MEMORY_BYTES_MAX_DEFAULT,
        }
    }
}

/// The default [`TransactionConfig::transaction_bytes_max`] (4 GiB).
pub const TRANSACTION_BYTES_MAX_DEFAULT: usize = 4 << 30;
/// The default [`TransactionConfig::part_bytes_max`] (8 MiB): each part is one WAL frame in one append to
/// each safekeeper, well under their message limit (`safekeeper::service::MESSAGE_BYTES_MAX`, 32 MiB) and the
/// record bound (`cambium_types::wal::RECORD_BODY_BYTES_MAX`, 64 MiB).
pub const PART_BYTES_MAX_DEFAULT: usize = 8 << 20;

impl RemotePageStoreConfig {
    /// Defaults: 1 s connect, 2 s safekeeper request, 10 s election, 5 s commit (per append: each part of a
    /// large transaction has its own), 10 s `GetPage`, 4096 cached pages (32 MiB), transactions up to 4 GiB in
    /// parts of 8 MiB (4 in flight), 64 MiB of a transaction's pages in memory; prefetching 256 pages ahead.
    pub fn new(
        safekeepers: Vec<String>,
        pageserver: String,
        tenant_id: TenantId,
        timeline_id: TimelineId,
        timeline_start_lsn: Lsn,
    ) -> Self {
        RemotePageStoreConfig {
            safekeepers,
            pageserver,
            tenant_id,
            timeline_id,
            timeline_start_lsn,
            connect_timeout_ms: 1_000,
            safekeeper_request_timeout_ms: 2_000,
            election_timeout_ms: 10_000,
            commit_timeout_ms: 5_000,
            get_page_timeout_ms: 10_000,
            cache: None,
            page_cache_capacity_pages: 4096,
            prefetch: PrefetchConfig::default(),
            shared: None,
            transactions: TransactionConfig::default(),
            local_safekeepers: walproposer::LocalSafekeepers::none(),
        }
    }

    fn proposer_config(&self) -> WalProposerConfig {
        let mut config = WalProposerConfig::new(
            self.safekeepers.clone(),
            self.tenant_id,
            self.timeline_id,
            self.timeline_start_lsn,
        );
        config.proposer.request_timeout_ms = self.safekeeper_request_timeout_ms;
        config.proposer.election_timeout_ms = self.election_timeout_ms;
        config.connect_timeout_ms = self.connect_timeout_ms;
        config.commit_timeout_ms = self.commit_timeout_ms;
        config.election_timeout_ms = self.election_timeout_ms;
        config.local = self.local_safekeepers.clone();
        // Room for the parts of one transaction in flight to each safekeeper at once (and one more waiting), so
        // their transfer and the safekeepers' writes overlap instead of taking turns.
        let parts_bytes = self
            .transactions
            .part_bytes_max
            .saturating_mul(self.transactions.appends_in_flight_max);
        config.proposer.in_flight_bytes_max = config.proposer.in_flight_bytes_max.max(parts_bytes);
        config.proposer.backlog_bytes_max = config
            .proposer
            .backlog_bytes_max
            .max(parts_bytes.saturating_add(self.transactions.part_bytes_max));
        config
    }
}

/// Why a [`RemotePageStore`] could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteStoreError {
    /// The store's runtime could not be started.
    #[error("starting the store runtime: {0}")]
    Runtime(String),
    /// The pageserver address does not parse.
    #[error("bad pageserver address {0:?}")]
    BadAddress(String),
    /// Starting the proposer or the election failed.
    #[error("proposer: {0}")]
    Proposer(#[from] WalProposerError),
    /// The pageserver did not give the database size at the epoch start.
    #[error("pageserver: {0}")]
    Pageserver(String),
}

/// A [`PageStore`] over the pageserver (reads) and the safekeepers (commits); see the module doc.
pub struct RemotePageStore {
    timeline: pb::TimelineRef,
    timeline_id: TimelineId,
    prefetcher: Arc<Prefetcher>,
    /// The pageserver reads go to (its address and client); re-pointed when the database moves
    /// ([`RemotePageStore::repoint`]).
    pages: parking_lot::RwLock<(String, PageServiceClient<Channel>)>,
    /// The proposer (`Arc` so the runtime's tasks can hold it while the caller waits), or the election that will
    /// give it, or none: read-only at a fixed LSN.
    writer: Writer,
    /// A new branch's campaign until it begins ([`RemotePageStore::campaign`]).
    campaign: Mutex<Option<Campaign>>,
    /// How long a commit waits for an election under way ([`Writer::Electing`]) before it fails the store.
    election_wait: Duration,
    get_page_timeout: Duration,
    commit_timeout: Duration,
    transaction_bytes_max: usize,
    part_bytes_max: usize,
    appends_in_flight_max: usize,
    dirty_memory_bytes_max: usize,
    /// Pages of one commit put into the cache, at most.
    cache_capacity_pages: usize,
    cache: Arc<HostCache>,
    /// `Arc`: the tasks that take the proposer's acknowledgements update it (`in_flight`).
    state: Arc<Mutex<State>>,
    /// Notified whenever `state`'s acknowledged LSN moves or the store fails.
    acknowledged: Arc<Condvar>,
    /// Held while a commit is built and handed to the proposer: commits are handed over one at a time, in
    /// LSN order (a commit of one record is acknowledged after the lock is released: `in_flight`).
    committing: Mutex<()>,
    /// Last field: dropped after the proposer and the channel that live on it.
    runtime: StoreRuntime,
}

impl std::fmt::Debug for RemotePageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("RemotePageStore")
            .field("timeline", &self.timeline)
            .field("read_lsn", &state.read_lsn)
            .field("db_size_pages", &state.db_size_pages)
            .field("failed", &state.failed)
            .finish()
    }
}

/// What reads and commits share, under one lock (never held while waiting on the network).
struct State {
    /// The end of this compute's last commit a quorum acknowledged, or the epoch start.
    read_lsn: Lsn,
    db_size_pages: u32,
    /// The end of the last commit handed to the proposer (`read_lsn` or past it): the latest snapshot.
    head_lsn: Lsn,
    head_db_size_pages: u32,
    /// Commits handed to the proposer and not acknowledged yet, oldest first, with their pages.
    pending: std::collections::VecDeque<in_flight::PendingCommit>,
    /// The page bytes `pending` holds (at most `in_flight::PENDING_BYTES_MAX` past one commit).
    pending_bytes: usize,
    /// Pages of one commit put into the cache at its acknowledgement, at most.
    cache_capacity_pages: usize,
    /// This store's view of the host cache (the commit path updates it: `commit`).
    cache: TimelineCache,
    /// Why the store failed, once it has: every later call fails with it.
    failed: Option<String>,
    /// Whether the failure is a [`RemotePageStore::close`] by its owner rather than one of its own.
    closed: bool,
}

/// How a store starts: writing (a proposer, reads at its own commits) once elected, writing with reads at the
/// timeline's start while it is elected (a branch just created), or read-only at a fixed LSN.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Write,
    NewBranch,
    ReadOnlyAt(Lsn),
}

/// The proposer a store starts with: elected, still to be elected (`Mode::NewBranch`), or none.
enum Starting {
    Elected(Option<Arc<WalProposer>>),
    /// With the microseconds its `GetDbSize` took, counted with the election's once it ends.
    Electing(u128),
}

/// A new branch's campaign not begun yet ([`RemotePageStore::campaign`] begins it).
struct Campaign {
    proposer: WalProposerConfig,
    election: Arc<Election>,
    read_lsn: Lsn,
    db_size_us: u128,
}

impl RemotePageStore {
    /// Starts the proposer, campaigns, and reads the database size at the epoch start. Callable from any async
    /// context: the work runs on the store's own runtime.
    pub async fn start(config: RemotePageStoreConfig) -> Result<Arc<RemotePageStore>, RemoteStoreError> {
        RemotePageStore::start_mode(config, Mode::Write).await
    }

    /// Starts the store of a branch this host has just created, whose timeline has no WAL of its own yet: reads
    /// start at once at the timeline's start LSN (`timeline_start_lsn`, the branch point) while the proposer
    /// campaigns in the background; a commit waits for the election. If the election ends at another LSN (some
    /// other compute wrote the timeline) or fails, the store fails and nothing is committed (`election`).
    ///
    /// The caller guarantees the timeline is new: created for this branch by the same request, no store of it
    /// started before. Any other start must use [`RemotePageStore::start`].
    pub async fn start_new_branch(config: RemotePageStoreConfig) -> Result<Arc<RemotePageStore>, RemoteStoreError> {
        let store = RemotePageStore::start_mode(config, Mode::NewBranch).await?;
        store.campaign();
        Ok(store)
    }

    /// [`RemotePageStore::start_new_branch`] without the campaign: the store reads at the branch point, and its
    /// proposer starts and campaigns only on [`RemotePageStore::campaign`] or the first commit (which then waits
    /// for the whole election). For a host that starts the stores of the branches it creates before anyone
    /// connects: a branch nobody writes costs no election (and its safekeepers no file), and a burst of
    /// creations is not slowed by their elections. The same guarantee is asked of the caller.
    pub async fn start_new_branch_deferred(
        config: RemotePageStoreConfig,
    ) -> Result<Arc<RemotePageStore>, RemoteStoreError> {
        RemotePageStore::start_mode(config, Mode::NewBranch).await
    }

    /// Begins a new branch's campaign in the background unless it has begun (or the store did not start as a
    /// new branch's, or is closed): idempotent, never waits. A host calls it when a session opens on the store,
    /// so the election overlaps the client's first statements.
    pub fn campaign(&self) {
        let Some(campaign) = self.campaign.lock().take() else {
            return;
        };
        if self.state.lock().closed {
            campaign
                .election
                .decide(Err("the store was closed before its election".to_owned()));
            return;
        }
        self.elect_in_background(campaign);
    }

    /// Starts a read-only store at `read_lsn` (time travel): no proposer, no election; every read is `GetPage`
    /// at `read_lsn`, and every commit is refused. The safekeepers in `config` are not used.
    pub async fn start_read_only(
        config: RemotePageStoreConfig,
        read_lsn: Lsn,
    ) -> Result<Arc<RemotePageStore>, RemoteStoreError> {
        RemotePageStore::start_mode(config, Mode::ReadOnlyAt(read_lsn)).await
    }

    /// Whether this store refuses commits (it was started with [`RemotePageStore::start_read_only`]).
    pub fn is_read_only(&self) -> bool {
        matches!(self.writer, Writer::ReadOnly)
    }

    /// Whether this store's proposer is elected (always, but for a new branch's store whose election is still
    /// under way, or ended in a failure).
    pub fn is_elected(&self) -> bool {
        match &self.writer {
            Writer::ReadOnly | Writer::Elected(_) => true,
            Writer::Electing(election) => election.wait(Duration::ZERO).is_some_and(|outcome| outcome.is_ok()),
        }
    }

    async fn start_mode(config: RemotePageStoreConfig, mode: Mode) -> Result<Arc<RemotePageStore>, RemoteStoreError> {
        let runtime = match &config.shared {
            Some(shared) => StoreRuntime::Shared(Arc::clone(shared)),
            None => StoreRuntime::Own(OwnedRuntime::new("compute-remote")?),
        };
        let endpoint = pageserver_endpoint(&config.pageserver, config.connect_timeout_ms)?;
        let shared_channel = runtime.shared_channel(&config.pageserver);
        let timeline = pb::TimelineRef {
            tenant_id: config.tenant_id.to_string(),
            timeline_id: config.timeline_id.to_string(),
        };
        let get_page_timeout = Duration::from_millis(config.get_page_timeout_ms);
        let init = {
            let (config, timeline) = (config.clone(), timeline.clone());
            async move {
                // Inside the store's runtime: the proposer's tasks and the channel's worker are spawned on it.
                let channel = shared_channel.unwrap_or_else(|| endpoint.connect_lazy());
                let pages = PageServiceClient::new(channel.clone());
                // Where the timeline comes from, asked while the proposer campaigns.
                let ancestry = read::timeline_ancestry(channel, timeline.clone(), get_page_timeout);
                let started = Instant::now();
                if let Mode::NewBranch = mode {
                    // Reads start at the branch point now; the election runs once the store exists and campaigns.
                    let read_lsn = config.timeline_start_lsn;
                    let (db_size, ancestry) = tokio::join!(
                        get_db_size(pages.clone(), timeline, read_lsn, get_page_timeout),
                        ancestry
                    );
                    let db_size_pages = db_size.map_err(|e| RemoteStoreError::Pageserver(e.to_string()))?;
                    let db_size_us = started.elapsed().as_micros();
                    tracing::info!(?mode, %read_lsn, db_size_pages, ?ancestry, db_size_us,
                        "remote page store reading; its election goes on");
                    return Ok((pages, Starting::Electing(db_size_us), read_lsn, db_size_pages, ancestry));
                }
                let (elected, ancestry) = tokio::join!(elect(&config, mode), ancestry);
                let (proposer, epoch_start_lsn) = elected?;
                let elected_us = started.elapsed().as_micros();
                let db_size_pages = get_db_size(pages.clone(), timeline, epoch_start_lsn, get_page_timeout)
                    .await
                    .map_err(|e| RemoteStoreError::Pageserver(e.to_string()))?;
                let db_size_us = started.elapsed().as_micros() - elected_us;
                crate::metrics::METRICS.record_store_start(elected_us, db_size_us);
                tracing::info!(?mode, read_lsn = %epoch_start_lsn, db_size_pages, ?ancestry, elected_us, db_size_us,
                    "remote page store started");
                Ok::<_, RemoteStoreError>((
                    pages,
                    Starting::Elected(proposer),
                    epoch_start_lsn,
                    db_size_pages,
                    ancestry,
                ))
            }
        };
        // Every step of `init` is bounded (election timeout, GetDbSize and GetTimelineInfo deadlines).
        let (pages, starting, epoch_start_lsn, db_size_pages, ancestry) = runtime
            .get()
            .spawn(init)
            .await
            .map_err(|e| RemoteStoreError::Runtime(format!("start task: {e}")))??;
        let cache = config
            .cache
            .clone()
            .unwrap_or_else(|| HostCache::in_memory(config.page_cache_capacity_pages.saturating_mul(ENTRY_BYTES)));
        if let Some(ancestry) = ancestry {
            cache.record_ancestry(config.timeline_id, ancestry);
        }
        let view = match mode {
            Mode::Write | Mode::NewBranch => cache.writer_view(config.timeline_id, epoch_start_lsn, db_size_pages),
            Mode::ReadOnlyAt(_) => cache.reader_view(config.timeline_id),
        };
        let cache_capacity_pages = (cache.memory_budget_bytes() / ENTRY_BYTES).min(COMMIT_CACHED_PAGES_MAX);
        let (writer, campaign) = match starting {
            Starting::Elected(Some(proposer)) => (Writer::Elected(proposer), None),
            Starting::Elected(None) => (Writer::ReadOnly, None),
            Starting::Electing(db_size_us) => {
                let election = Election::new();
                (
                    Writer::Electing(Arc::clone(&election)),
                    Some(Campaign {
                        proposer: config.proposer_config(),
                        election,
                        read_lsn: epoch_start_lsn,
                        db_size_us,
                    }),
                )
            }
        };
        let store = Arc::new(RemotePageStore {
            timeline,
            timeline_id: config.timeline_id,
            prefetcher: Prefetcher::new(config.prefetch, Arc::clone(&cache), config.timeline_id),
            cache_capacity_pages,
            cache,
            pages: parking_lot::RwLock::new((config.pageserver.clone(), pages)),
            writer,
            campaign: Mutex::new(campaign),
            election_wait: Duration::from_millis(config.election_timeout_ms) + WAIT_MARGIN,
            get_page_timeout,
            commit_timeout: Duration::from_millis(config.commit_timeout_ms),
            transaction_bytes_max: config.transactions.transaction_bytes_max,
            part_bytes_max: config.transactions.part_bytes_max.max(PAGE_SIZE_BYTES),
            appends_in_flight_max: config.transactions.appends_in_flight_max.max(1),
            dirty_memory_bytes_max: config.transactions.dirty_memory_bytes_max,
            state: Arc::new(Mutex::new(State {
                read_lsn: epoch_start_lsn,
                db_size_pages,
                head_lsn: epoch_start_lsn,
                head_db_size_pages: db_size_pages,
                pending: std::collections::VecDeque::new(),
                pending_bytes: 0,
                cache_capacity_pages,
                cache: view,
                failed: None,
                closed: false,
            })),
            acknowledged: Arc::new(Condvar::new()),
            committing: Mutex::new(()),
            runtime,
        });
        Ok(store)
    }

    /// Starts the proposer of a store that already reads at the campaign's `read_lsn` (`Mode::NewBranch`) and
    /// runs its election on the store's runtime, then decides the campaign's election: the proposer if it won
    /// with its epoch starting at `read_lsn`, else the store fails. The campaign's `db_size_us` (how long the
    /// start's `GetDbSize` took) is counted with the election in the metrics.
    fn elect_in_background(&self, campaign: Campaign) {
        let Campaign {
            proposer,
            election,
            read_lsn,
            db_size_us,
        } = campaign;
        let (state, acknowledged) = (Arc::clone(&self.state), Arc::clone(&self.acknowledged));
        let timeline_id = self.timeline_id;
        let started = Instant::now();
        self.runtime.get().spawn(async move {
            // Never closed: the permit always comes, in turn.
            let permit = BACKGROUND_ELECTIONS.acquire().await;
            let elected = match WalProposer::start(proposer) {
                Ok(proposer) => {
                    let proposer = Arc::new(proposer);
                    proposer.elect().await.map(|won| (won, proposer))
                }
                Err(error) => Err(error),
            };
            let outcome = match elected {
                Ok(((term, epoch_start_lsn), proposer)) if epoch_start_lsn == read_lsn => {
                    let elected_us = started.elapsed().as_micros();
                    crate::metrics::METRICS.record_store_start(elected_us, db_size_us);
                    tracing::info!(timeline = %timeline_id, term, epoch_start = %epoch_start_lsn, elected_us,
                        "elected while reading");
                    Ok(proposer)
                }
                Ok(((_, epoch_start_lsn), _)) => Err(format!(
                    "the new branch's WAL goes on past its branch point {read_lsn} (to {epoch_start_lsn}): another \
                     compute wrote it; reconnect"
                )),
                Err(error) => Err(format!("the new branch's election failed: {error}; reconnect")),
            };
            drop(permit);
            if let Err(reason) = &outcome {
                tracing::error!(timeline = %timeline_id, %reason, "remote page store failed");
                state.lock().failed.get_or_insert_with(|| reason.clone());
                acknowledged.notify_all();
            }
            election.decide(outcome);
        });
    }

    /// The end LSN of this store's last commit a quorum acknowledged, or the epoch start (commits handed to
    /// the proposer and not acknowledged yet are past it).
    pub fn read_lsn(&self) -> Lsn {
        self.state.lock().read_lsn
    }

    /// The client of the pageserver reads go to now.
    pub(crate) fn pages(&self) -> PageServiceClient<Channel> {
        self.pages.read().1.clone()
    }

    /// The address of the pageserver reads go to now.
    pub fn pageserver(&self) -> String {
        self.pages.read().0.clone()
    }

    /// Sends every read from now on to the pageserver at `address` over `channel` (the database moved there):
    /// a read in flight finishes on the old one or, refused there, is asked again of this one; the prefetch
    /// stream is opened again on it. The new pageserver holds every page version the old one did (the move
    /// waited for it to ingest as far), so nothing cached changes.
    pub fn repoint(&self, address: &str, channel: Channel) {
        *self.pages.write() = (address.to_owned(), PageServiceClient::new(channel));
        self.prefetcher.reset_stream();
        tracing::info!(timeline = %self.timeline.timeline_id, pageserver = %address, "remote page store re-pointed");
    }

    /// Why the store failed, if it has (then every call fails).
    pub fn failure(&self) -> Option<String> {
        self.state.lock().failed.clone()
    }

    /// Closes the store on purpose (its owner replaced or stopped serving it): from now on every read and
    /// commit fails with `reason`, as after a failure of its own, and [`RemotePageStore::is_closed`] says so,
    /// so that no owner restarts it. A commit already sent is not cut short: its outcome is reported as it is.
    pub fn close(&self, reason: &str) {
        let mut state = self.state.lock();
        state.failed = Some(reason.to_owned());
        state.closed = true;
        drop(state);
        self.acknowledged.notify_all();
        tracing::info!(timeline = %self.timeline.timeline_id, %reason, "remote page store closed");
    }

    /// Whether [`RemotePageStore::close`] was called (then [`RemotePageStore::failure`] is its reason).
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    fn check_not_failed(&self) -> Result<(), PageStoreError> {
        check_state(&self.state.lock())
    }

    /// Runs `work` on the store's runtime and waits for it (bounded by `timeout` plus a margin) from this
    /// blocking thread; see the module doc.
    fn run<T: Send + 'static>(
        &self,
        timeout: Duration,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, RecvTimeoutError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let task = self.runtime.get().spawn(async move {
            // The caller may have stopped waiting; then nobody needs the answer.
            let _ = tx.send(work.await);
        });
        let received = wait_blocking(|| rx.recv_timeout(timeout + WAIT_MARGIN));
        if received.is_err() {
            task.abort();
        }
        received
    }

    /// The LSN of the newest commit at or before `timestamp_us` (µs since the epoch) on this store's branch:
    /// the timeline holding it (this one, or an ancestor below the branch point) and the LSN. Blocks.
    pub fn lsn_for_timestamp(&self, timestamp_us: u64) -> Result<(TimelineId, Lsn), PageStoreError> {
        let request = pb::LsnForTimestampRequest {
            timeline: Some(self.timeline.clone()),
            timestamp_us,
        };
        let (mut client, timeout) = (self.pages(), self.get_page_timeout);
        // The pageserver answers from what it has ingested: first let it catch up with this compute's commits
        // (GetDbSize at the read LSN waits for that, within its deadline).
        let (waiting_client, timeline, read_lsn) = (client.clone(), self.timeline.clone(), self.read_lsn());
        let work = async move {
            get_db_size(waiting_client, timeline, read_lsn, timeout).await?;
            match tokio::time::timeout(timeout, client.lsn_for_timestamp(request)).await {
                Ok(result) => result,
                Err(_) => Err(tonic::Status::deadline_exceeded("no LsnForTimestamp answer in time")),
            }
        };
        match self.run(timeout, work) {
            Ok(Ok(response)) => {
                let response = response.into_inner();
                let timeline = response.timeline_id.parse::<TimelineId>().map_err(|_| {
                    PageStoreError::Unavailable(format!("the pageserver named timeline {:?}", response.timeline_id))
                })?;
                Ok((timeline, Lsn(response.lsn)))
            }
            Ok(Err(status)) => Err(PageStoreError::Unavailable(format!(
                "no history at timestamp {timestamp_us}: {}",
                status.message()
            ))),
            Err(_) => Err(PageStoreError::Unavailable(
                "LsnForTimestamp gave no answer in time".to_owned(),
            )),
        }
    }

    /// Marks the store failed and returns the error for this call: `Failed` with the first failure's reason,
    /// or `Closed` if the store was closed meanwhile.
    fn fail(&self, reason: String) -> PageStoreError {
        tracing::error!(%reason, "remote page store failed");
        let mut state = self.state.lock();
        state.failed.get_or_insert(reason.clone());
        self.acknowledged.notify_all();
        match check_state(&state) {
            Err(error) => error,
            Ok(()) => unreachable!("the failure was just recorded"),
        }
    }
}

impl PageStore for RemotePageStore {
    /// The latest snapshot: every commit handed to the proposer, acknowledged or not (see `in_flight`: what
    /// was read at it may leave only after [`PageStore::wait_durable`]).
    fn snapshot(&self) -> Result<Snapshot, PageStoreError> {
        let state = self.state.lock();
        check_state(&state)?;
        Ok(Snapshot {
            lsn: state.head_lsn,
            db_size_pages: state.head_db_size_pages,
        })
    }

    fn read_page(&self, block: u32, snapshot: &Snapshot) -> Result<Option<Bytes>, PageStoreError> {
        self.read_page_at(block, snapshot)
    }

    fn prefetch(&self, blocks: &[u32], snapshot: &Snapshot) {
        self.prefetch_at(blocks, snapshot);
    }

    fn prefetch_window_pages(&self) -> u32 {
        self.prefetcher.window_pages()
    }

    fn commit(&self, pages: Vec<(u32, Bytes)>, db_size_pages: u32) -> Result<Snapshot, PageStoreError> {
        let proposer = self.writer()?;
        let committing = self.committing.lock();
        self.check_not_failed()?;
        // Checked before anything is sent: a refused commit leaves nothing behind and the store usable.
        validate_commit(&pages, db_size_pages)?;
        let page_count = pages.len();
        let snapshot = self.commit_pages(&proposer, pages.into_iter().map(Ok), page_count, db_size_pages)?;
        drop(committing);
        // `commit` returns once durable.
        self.wait_acknowledged(snapshot.lsn)?;
        Ok(snapshot)
    }

    fn commit_dirty(&self, pages: &DirtyPages, db_size_pages: u32) -> Result<Snapshot, PageStoreError> {
        let proposer = self.writer()?;
        let _committing = self.committing.lock();
        self.check_not_failed()?;
        let spilled = |e: crate::dirty_pages::SpillError| PageStoreError::Unavailable(e.to_string());
        self.commit_pages(
            &proposer,
            pages.iter().map(|page| page.map_err(spilled)),
            pages.len(),
            db_size_pages,
        )
    }

    fn wait_durable(&self, lsn: Lsn) -> Result<(), PageStoreError> {
        self.wait_acknowledged(lsn)
    }

    fn dirty_memory_bytes_max(&self) -> usize {
        self.dirty_memory_bytes_max
    }
}

impl RemotePageStore {
    /// The proposer, once elected (waiting for an election under way), or the refusal of a read-only store
    /// (before anything is sent: the store stays usable).
    fn writer(&self) -> Result<Arc<WalProposer>, PageStoreError> {
        match &self.writer {
            Writer::ReadOnly => Err(PageStoreError::Unavailable(format!(
                "read-only at LSN {}: commits are refused",
                self.read_lsn()
            ))),
            Writer::Elected(proposer) => Ok(Arc::clone(proposer)),
            Writer::Electing(election) => {
                // A store started with its campaign deferred campaigns on its first commit at the latest.
                self.campaign();
                match wait_blocking(|| election.wait(self.election_wait)) {
                    Some(Ok(proposer)) => Ok(proposer),
                    // The election's task failed the store with the reason.
                    Some(Err(reason)) => Err(self.fail(reason)),
                    None => Err(self.fail(format!(
                        "the new branch's election did not end within {} ms",
                        self.election_wait.as_millis()
                    ))),
                }
            }
        }
    }
}

/// Starts the proposer and campaigns (a writing store), or takes the fixed LSN (a read-only one): the proposer
/// and the LSN reads start at.
async fn elect(
    config: &RemotePageStoreConfig,
    mode: Mode,
) -> Result<(Option<Arc<WalProposer>>, Lsn), RemoteStoreError> {
    match mode {
        Mode::Write | Mode::NewBranch => {
            let proposer = Arc::new(WalProposer::start(config.proposer_config())?);
            let (term, epoch_start_lsn) = proposer.elect().await?;
            tracing::info!(term, epoch_start = %epoch_start_lsn, "elected");
            Ok((Some(proposer), epoch_start_lsn))
        }
        Mode::ReadOnlyAt(read_lsn) => Ok((None, read_lsn)),
    }
}

/// The error every call gets once the store has failed or was closed.
fn check_state(state: &State) -> Result<(), PageStoreError> {
    match (&state.failed, state.closed) {
        (None, _) => Ok(()),
        (Some(reason), false) => Err(PageStoreError::Failed { reason: reason.clone() }),
        (Some(reason), true) => Err(PageStoreError::Closed { reason: reason.clone() }),
    }
}

/// `GetDbSize` at `read_lsn`, with a deadline.
async fn get_db_size(
    mut client: PageServiceClient<Channel>,
    timeline: pb::TimelineRef,
    read_lsn: Lsn,
    timeout: Duration,
) -> Result<u32, tonic::Status> {
    let mut request = tonic::Request::new(pb::GetDbSizeRequest {
        timeline: Some(timeline),
        read_lsn: read_lsn.0,
    });
    request.set_timeout(timeout);
    match tokio::time::timeout(timeout, client.get_db_size(request)).await {
        Ok(response) => Ok(response?.into_inner().db_size_pages),
        Err(_) => Err(tonic::Status::deadline_exceeded("no GetDbSize answer in time")),
    }
}

/// Microseconds since the Unix epoch (0 if the clock is before it).
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Runs `wait` (which blocks) from any thread: inside `block_in_place` on a multi-thread runtime worker, as is
/// anywhere else (see the module doc).
fn wait_blocking<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
        _ => wait(),
    }
}
