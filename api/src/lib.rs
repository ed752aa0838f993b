//! The `/v1` HTTP API: projects, databases, branches, endpoints and operations over the pageserver,
//! safekeepers and computes, with bearer keys and control metadata in SQLite.
//!
//! - [`store`]: the control metadata (SQLite, migrations, one transaction per change).
//! - [`auth`]: API keys, stored hashed.
//! - [`backend`]: the pageserver and safekeepers over gRPC.
//! - [`control`]: what each call does to the metadata, the storage and the computes.
//! - `worker`: runs operations in the background, bounded.
//! - [`safekeeper_sets`]: which 3 of the N safekeepers hold each timeline, liveness and replacement plans.
//! - [`reconcile`]: the reconciler: replica repair on the safekeepers, half-done deletions finished.
//! - [`webhooks`]: the webhook sender: signed deliveries from the durable queue, retried with backoff.
//! - [`consumption`]: the consumption sampler: each branch's size, WAL written and compute time, hourly.
//! - [`schema_diff`]: a branch's schema read at a point, and the differences between two.
//! - [`http`]: the axum routes, errors, rate limits, idempotency and the OpenAPI document.
//! - [`proxy`]: `cambium proxy`: PostgreSQL connections routed to the compute host of their database.
//! - [`files`]: the modes of the files that hold secrets.
//! - [`faults`]: fault injection for tests.

#![forbid(unsafe_code)]

pub mod auth;
pub mod backend;
pub mod consumption;
pub mod control;
pub mod error;
pub mod faults;
pub mod files;
pub mod http;
mod ids;
pub mod proxy;
pub mod reconcile;
pub mod safekeeper_sets;
pub mod schema_diff;
mod stages;
pub mod store;
#[cfg(test)]
mod testing_postgres;
pub mod webhooks;
mod worker;
