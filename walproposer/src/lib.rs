//! The walproposer: the safekeeper protocol's proposer driven over gRPC ([`client`]) or the safekeeper's service
//! called in this process ([`transport`]), and the Rust side of the safekeeper service's wire contract that
//! both ends share ([`wire`]).
//!
//! **Boundary:** depends on the protocol core (`cambium-safekeeper-core`) and `proto`, never on the safekeeper
//! server (`cambium-safekeeper`): the compute links this crate, not the server's files, node or service.

#![forbid(unsafe_code)]

pub mod client;
pub mod transport;
pub mod wire;

pub use client::{WalProposer, WalProposerConfig, WalProposerError};
pub use transport::{bounded, in_process, over_grpc, InProcessAppend, LocalPeer, LocalSafekeepers, PeerService};
