//! The safekeeper protocol core, sans-IO: what makes WAL durable on a quorum of three before a commit is
//! acknowledged. DESIGN.md section 3 is the specification.
//!
//! [`acceptor::Acceptor`] runs over the [`protocol::WalStore`] and [`protocol::ControlStore`] traits, and the
//! proposer ([`proposer::Proposer`]) is a state machine fed with responses and ticks. [`dispatch::serve`] maps a
//! request onto an acceptor for every driver: the deterministic simulation (`tests/simulation.rs`) and the gRPC
//! service of the `safekeeper` crate run the same code.
//!
//! **Boundary:** no networking, no files, no async runtime: no tonic, tokio or protobuf here. The server
//! (`cambium-safekeeper`: file stores, node, gRPC service) and the client (`cambium-walproposer`) depend on this
//! crate, never the reverse.

#![forbid(unsafe_code)]

pub mod acceptor;
pub mod dispatch;
pub mod memstore;
pub mod proposer;
pub mod protocol;
