//! Cambium's shared types and codecs: what every crate that speaks of pages, WAL or timelines needs, and
//! nothing of the engine.
//!
//! - [`lsn`]: WAL positions ([`Lsn`]).
//! - [`key`]: page keys ([`Key`]) and the page size.
//! - [`id`]: tenant and timeline ids and the one parser every crate uses for them.
//! - [`value`]: page versions (images, byte-range deltas) and their pure reconstruction.
//! - [`wal`]: the WAL record and its frame codec.
//! - [`codec`]: the bounds-checked little-endian reader for untrusted bytes.
//! - [`fsio`]: write-temp-fsync-rename and durable directories.
//!
//! **Boundary:** this crate depends on no other Cambium crate, does no networking, and holds no engine state;
//! `storage`, the safekeeper, the pageserver, the compute and the API all depend on it, never the reverse.
//! Each type here has exactly one definition: other crates re-export it, they never copy it.

#![forbid(unsafe_code)]

pub mod codec;
pub mod fsio;
pub mod id;
pub mod key;
pub mod lsn;
pub mod value;
pub mod wal;

pub use fsio::Durability;
pub use id::{TenantId, TimelineId, TimelineKey};
pub use key::{Key, DB_SIZE_KEY, PAGE_SIZE_BYTES};
pub use lsn::Lsn;
pub use value::{Patch, Value};
pub use wal::WalRecord;
