//! The safekeeper: makes WAL durable on a quorum of three before a commit is acknowledged, and the proposer
//! library the compute uses to write through it. DESIGN.md section 3 is the specification.
//!
//! The protocol core is sans-IO: [`acceptor::Acceptor`] runs over the [`protocol::WalStore`] and
//! [`protocol::ControlStore`] traits, and the proposer is a state machine fed with responses and ticks. The
//! deterministic simulation and the gRPC service drive the same code.

#![forbid(unsafe_code)]

pub mod acceptor;
pub mod client;
pub mod convert;
pub mod dispatch;
pub mod filestore;
pub mod memstore;
pub mod node;
pub mod proposer;
pub mod protocol;
pub mod pull;
pub mod service;
