//! The safekeeper server: makes WAL durable on disk and serves the protocol over gRPC. DESIGN.md section 3 is
//! the specification.
//!
//! The protocol itself is `cambium-safekeeper-core` (sans-IO): this crate gives it file stores
//! ([`filestore`]), a data directory of timelines ([`node`]), the gRPC service ([`service`], which maps every
//! protocol request through `safekeeper_core::dispatch::serve`, as the simulation does) and replica repair
//! ([`pull`]). The client side (the walproposer a compute uses) is `cambium-walproposer`, which does not link
//! this crate.

#![forbid(unsafe_code)]

pub mod convert;
pub mod filestore;
pub mod node;
pub mod pull;
pub mod service;
