//! The `/v1` HTTP API: projects, databases, branches, endpoints and operations over the pageserver,
//! safekeepers and computes, with bearer keys and control metadata in SQLite. Built in issue 6.
//!
//! First slice: accounts, API keys ([`auth`]) and projects, in a SQLite [`store`] served over
//! [`http`].

pub mod auth;
pub mod http;
mod ids;
pub mod store;
