//! Every compute host re-pointed after a database's pageserver changes (a `move_pageserver` or a
//! `failover_pageserver` switched `databases.pageserver`; issue 17 items 2 and 5).
//!
//! The column is the truth; a compute host learns it in two ways, and both only make it read the column:
//! - **Told.** The process that switched the column re-points its own computes at once and sends the database's
//!   compute host, if that is another process, `POST /internal/databases/{id}/pageserver` at the `/v1` URL it
//!   registered (the channel requests are forwarded on), at most [`TELL_ATTEMPTS_MAX`] tries of
//!   [`TELL_TIMEOUT_MS`] each, [`TELL_FIRST_WAIT_MS`] doubling between them (under 5 s in all; a move waits
//!   for it before its source detaches). The request names no pageserver: the host reads the column itself
//!   ([`Control::follow_pageserver`]), so the route needs no key: all it can make a host do is follow the
//!   metadata, one indexed read for a database it serves.
//! - **Asks.** Every placement round (the heartbeat, every `LEASE_PERIOD_MS`, 3 s) a host compares the column of
//!   each database it serves with where its computes read, and re-points those that differ
//!   ([`Control::follow_pageservers`]); a host that could not be told (down, partitioned, slow) follows there,
//!   and one that adopts a database (a failover of compute hosts) reads the column as it serves it.
//!
//! The column is read and the computes re-pointed under one lock per process (`Control::repoint`), so a read of
//! the column from before a switch can never be applied after a read from after it: a host's computes end on
//! the newest placement. (`ComputeHost::set_pageserver` re-points the running stores, sessions staying open.)
//!
//! **Invariant:** a compute never gets a page older than its read point from a pageserver, whichever it reads
//! from. Every `GetPage` carries the LSN the store reads at (its last acknowledged commit, or a snapshot's), and
//! a pageserver answers only once its `last_record_lsn` has reached that LSN (`page_service`: a bounded wait,
//! then `DEADLINE_EXCEEDED`), so a pageserver that is behind, having lost the tenant or not, answers the right
//! versions late or answers nothing; page versions at an LSN never change, whoever ingested them. One that no
//! longer holds the tenant (the move's source after its detach) answers `NOT_FOUND`, which the store retries
//! for 5 s (`remote_store`), longer than a placement round, and never takes for an empty page. The move tells
//! the hosts before the source detaches, so in the usual case nothing is even retried.

use std::sync::OnceLock;
use std::time::Duration;

use cambium_types::TenantId;

use super::Control;
use crate::error::ApiError;

/// Tries of telling another compute host, at most.
pub const TELL_ATTEMPTS_MAX: u32 = 4;
/// The bound of one try (connecting included).
pub const TELL_TIMEOUT_MS: u64 = 1_000;
/// The wait after the first failed try; it doubles (100, 200, 400 ms).
pub const TELL_FIRST_WAIT_MS: u64 = 100;

/// The path a compute host is told on.
pub fn tell_path(database_id: &str) -> String {
    format!("/internal/databases/{database_id}/pageserver")
}

/// The HTTP client hosts are told through (built once; `None` if it cannot be built, logged).
fn client() -> Option<&'static reqwest::Client> {
    static CLIENT: OnceLock<Option<reqwest::Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // reqwest is built with rustls and no bundled provider; the process's default may already be set.
            let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
            let built = reqwest::Client::builder()
                .timeout(Duration::from_millis(TELL_TIMEOUT_MS))
                .connect_timeout(Duration::from_millis(TELL_TIMEOUT_MS))
                .redirect(reqwest::redirect::Policy::none())
                .user_agent("cambium-repoint")
                .build();
            match built {
                Ok(client) => Some(client),
                Err(error) => {
                    tracing::error!(%error, "the HTTP client for re-pointing compute hosts could not be built");
                    None
                }
            }
        })
        .as_ref()
}

/// What a compute host answered when told.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Followed {
    /// Whether it serves the database.
    pub served_here: bool,
    /// The pageserver its computes read the database from now (when served there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pageserver: Option<String>,
    /// How many of its stores were re-pointed.
    pub stores_repointed: usize,
}

impl Control {
    /// After this process switched database `database_id`'s (`tenant`'s) placement to pageserver `to`: its backend
    /// and computes follow now, then the database's compute host, if another process, is told (see the module
    /// doc; a host not reached follows at its next placement round). Returns how many local stores were
    /// re-pointed.
    pub(super) async fn repoint_everywhere(
        &self,
        database_id: &str,
        tenant: TenantId,
        to: &str,
    ) -> Result<usize, String> {
        self.backend.remember_placement(tenant, to).map_err(|e| e.to_string())?;
        let repointed = {
            let _held = self.repoint.lock().await;
            self.host
                .set_pageserver(tenant, to)
                .map_err(|e| format!("re-pointing the computes at {to}: {e}"))?
        };
        self.tell_compute_host(database_id).await;
        Ok(repointed)
    }

    /// Tells database `database_id`'s compute host, if another live process, to follow its placement; bounded,
    /// logged, never an error (the host's own placement round is the fallback).
    async fn tell_compute_host(&self, database_id: &str) {
        let id = database_id.to_owned();
        let host = match self.blocking(move |store| store.host_of_database(&id)).await {
            Ok(Some(host)) => host,
            // On no host: the one that adopts it reads the column as it serves it.
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(database = %database_id, ?error, "reading the database's compute host to re-point it; it follows at its next round");
                return;
            }
        };
        if host.id == self.host_id() {
            return;
        }
        if !host.live {
            tracing::info!(database = %database_id, host = %host.id, "the database's compute host is not live; whoever adopts it reads the placement");
            return;
        }
        let Some(client) = client() else {
            return;
        };
        let url = format!("{}{}", host.api_url.trim_end_matches('/'), tell_path(database_id));
        let mut wait_ms = TELL_FIRST_WAIT_MS;
        let mut last_error = String::new();
        for attempt in 1..=TELL_ATTEMPTS_MAX {
            match client.post(&url).bearer_auth(&host.internal_token).send().await {
                Ok(response) if response.status().is_success() => {
                    let answer = response
                        .text()
                        .await
                        .map(|body| serde_json::from_str::<Followed>(&body).map_err(|e| e.to_string()));
                    tracing::info!(database = %database_id, host = %host.id, attempt, ?answer, "told the database's compute host to follow its pageserver");
                    return;
                }
                Ok(response) => last_error = format!("answered {}", response.status()),
                Err(error) => last_error = error.to_string(),
            }
            if attempt < TELL_ATTEMPTS_MAX {
                tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                wait_ms *= 2;
            }
        }
        tracing::warn!(
            database = %database_id, host = %host.id, url = %url, error = %last_error,
            "the database's compute host was not reached; it follows its pageserver at its next placement round"
        );
    }

    /// What `POST /internal/databases/{id}/pageserver` does: if database `database_id` is served here, its
    /// computes read from the pageserver its column names now (read afresh).
    pub async fn follow_pageserver(&self, database_id: &str) -> Result<Followed, ApiError> {
        let Some(tenant) = self.placement.tenant_here(database_id) else {
            return Ok(Followed {
                served_here: false,
                pageserver: None,
                stores_repointed: 0,
            });
        };
        let (pageserver, stores_repointed) = self.point_at_placed_pageserver(database_id, tenant).await?;
        Ok(Followed {
            served_here: true,
            pageserver: Some(pageserver),
            stores_repointed,
        })
    }

    /// Database `database_id`'s pageserver column (`None`: the first configured pageserver); `NotFound` if the
    /// database is gone.
    pub(super) async fn pageserver_column(&self, database_id: &str) -> Result<Option<String>, ApiError> {
        let id = database_id.to_owned();
        self.blocking(move |store| store.pageserver_of_database(&id))
            .await?
            .ok_or(ApiError::NotFound)
    }

    /// Reads database `database_id`'s pageserver column and points this host's computes of `tenant` at it (with
    /// the backend); returns the address and how many stores were re-pointed.
    pub(super) async fn point_at_placed_pageserver(
        &self,
        database_id: &str,
        tenant: TenantId,
    ) -> Result<(String, usize), ApiError> {
        let _held = self.repoint.lock().await;
        let column = self.pageserver_column(database_id).await?;
        let address = self.placed_address(column)?;
        if self.host.pageserver_of(tenant) == address {
            return Ok((address, 0));
        }
        self.backend.remember_placement(tenant, &address)?;
        let repointed = self
            .host
            .set_pageserver(tenant, &address)
            .map_err(|e| ApiError::Unavailable(format!("pointing the compute at pageserver {address}: {e}")))?;
        Ok((address, repointed))
    }

    /// The address a `databases.pageserver` value names (`None`: the first configured pageserver).
    fn placed_address(&self, column: Option<String>) -> Result<String, ApiError> {
        match column {
            Some(address) => Ok(address),
            None => self
                .backend
                .pageserver_addresses()
                .into_iter()
                .next()
                .ok_or_else(|| ApiError::Unavailable("no pageserver is configured".to_owned())),
        }
    }

    /// A placement round's step 5 (`placement`): each database served here whose computes read from another
    /// pageserver than `placed` (database id, its column as the round read it) says is re-pointed, reading the
    /// column again under the lock.
    pub(super) async fn follow_pageservers(&self, placed: &[(String, Option<String>)]) {
        for (database_id, column) in placed {
            let Some(tenant) = self.placement.tenant_here(database_id) else {
                continue;
            };
            let Ok(address) = self.placed_address(column.clone()) else {
                return;
            };
            if self.host.pageserver_of(tenant) == address {
                continue;
            }
            match self.point_at_placed_pageserver(database_id, tenant).await {
                Ok((address, repointed)) => tracing::warn!(
                    database = %database_id, pageserver = %address, repointed,
                    "the database's computes read from another pageserver than its placement; re-pointed"
                ),
                Err(error) => {
                    tracing::warn!(database = %database_id, ?error, "re-pointing a database's computes; next round")
                }
            }
        }
    }
}
