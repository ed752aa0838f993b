//! Wire contracts: the `.proto` files under `proto/proto/` and the tonic/prost code generated from them at
//! build time with `protox` (no system `protoc`). Only the service crates use these types; core types are
//! converted at their edges.

#![forbid(unsafe_code)]

/// The safekeeper service (`cambium.safekeeper.v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod safekeeper {
    tonic::include_proto!("cambium.safekeeper.v1");
}

/// The pageserver's page and management services (`cambium.pageserver.v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pageserver {
    tonic::include_proto!("cambium.pageserver.v1");
}
