//! Cambium's storage engine: every version of every page, keyed by `(Key, Lsn)` in layer files.
//!
//! A [`Tenant`] holds [`Timeline`]s. A timeline ingests committed [`WalRecord`]s into an in-memory layer,
//! freezes and flushes it to L0 delta layer files, compacts L0 into key-partitioned L1 layers and image
//! layers, and answers [`Timeline::get_page`] at any LSN it keeps by applying deltas to the newest image,
//! falling through to its ancestor below its branch point. Branching writes one log entry: O(1) whatever the
//! size. GC drops layers no retained LSN needs. [`Timeline::lsn_for_timestamp`] maps a time to an LSN.
//! A tenant opened with a [`LayerFetcher`] fetches the layers its metadata names but its disk lacks on first
//! use ([`fetch`]).
//!
//! **Boundary:** this crate does no networking and depends on no other Cambium crate but `cambium-types` (the
//! shared types and codecs, re-exported here under their old paths); the pageserver wraps it (and implements
//! the fetcher over its remote storage).

pub mod branch_log;
pub mod cache;
pub mod config;
pub mod error;
pub mod formats;
pub mod layer;
pub mod metadata;
mod mmap;
pub mod tenant;
pub mod timeline;
mod timestamps;

// The shared types and codecs live in `cambium-types` (one definition each); re-exported under their old paths
// for the engine's own code and for callers that already depend on the engine.
use cambium_types::codec;
pub use cambium_types::{fsio, id, key, lsn, value, wal};

pub use cache::PageCache;
pub use config::TimelineConfig;
pub use error::{Result, StorageError};
pub use fsio::Durability;
pub use id::{TenantId, TimelineId, TimelineKey};
pub use key::{Key, DB_SIZE_KEY, PAGE_SIZE_BYTES};
pub use layer::fetch::{FetchError, LayerFetcher};
pub use lsn::Lsn;
pub use tenant::{BranchPoint, Tenant};
pub use timeline::{CompactionOutcome, GcOutcome, ReadStats, Timeline, TimelineInfo, TimestampLsn};
pub use value::{Patch, Value};
pub use wal::WalRecord;
