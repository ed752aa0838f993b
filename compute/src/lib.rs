//! The compute: SQLite whose database file is a VFS over the pageserver (reads) and the safekeepers (commits),
//! spoken to over the PostgreSQL wire protocol. Built in issue 5.
pub mod cache;
pub mod compute;
pub mod dirty_pages;
pub mod error;
pub mod fds;
pub mod host;
pub mod metrics;
pub mod page_store;
pub mod pg;
pub mod remote_store;
pub mod vfs;

/// The SQLite bindings the compute uses, for callers of `vfs::open_connection`.
pub use rusqlite;
