//! The pageserver: serves pages of any branch at any LSN over gRPC from the storage engine, ingests WAL from
//! the safekeepers, and runs flush, compaction and GC in the background. DESIGN.md sections 1, 2 and 4.

#![forbid(unsafe_code)]

pub mod background;
pub mod convert;
pub mod limits;
pub mod management;
pub mod metrics;
pub mod page_service;
pub mod remote;
pub mod runner;
pub mod server;
pub mod tenants;
pub mod wal_receiver;
