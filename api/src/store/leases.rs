//! Operation leases: which API process runs a `running` operation, and until when (migration 11).
//!
//! Several `cambium api` processes may share PostgreSQL metadata. Each [`Store`] has its own owner id, made when it
//! opens (one per process); an operation is leased to the process that creates it from the moment its row is
//! written, that process renews the leases of its operations ([`Store::renew_leases`]), and another takes over an
//! operation only once its lease has expired ([`Store::claim_operation`]): a killed process's operations are run
//! again by a live one after at most [`OPERATION_LEASE_MS`].
//!
//! **Invariant:** a claim is one `UPDATE` of the row, which PostgreSQL runs under the row's lock and re-checks
//! after a concurrent one commits, so of two processes claiming an expired operation exactly one gets it. A
//! process stalled past its lease may still be running an operation another has taken over: operation steps are
//! idempotent and [`Store::finish_operation`] changes only a running operation, so the two runs end it once.
//!
//! Only the compute host a database is placed on (`hosts`) claims its operations: they change what that host
//! serves. An operation of a database with no placement, or of none, may be claimed by any process.
//!
//! On SQLite one process owns the metadata: every lease it finds at start is a dead process's, claimed at once.

use super::sql::{params, Dialect};
use super::{timestamp_text, Store, StoreError};

/// How long a lease lasts without renewal.
pub const OPERATION_LEASE_MS: u64 = 15_000;

/// Operations one [`Store::claimable_operations`] lists, at most.
pub const CLAIMABLE_PER_SCAN_MAX: usize = 64;

/// A lease as an operation row stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    /// The owning process's id.
    pub(crate) owner: String,
    /// ISO 8601 UTC, three fractional digits (sorts as the time).
    pub(crate) expires_at: String,
}

/// `timestamp` moved `ms` later (capped at the largest time).
pub(crate) fn later(timestamp: jiff::Timestamp, ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    timestamp_text(
        timestamp
            .checked_add(jiff::SignedDuration::from_millis(ms))
            .unwrap_or(jiff::Timestamp::MAX),
    )
}

impl Store {
    /// This store's (this process's) lease owner id.
    pub fn lease_owner(&self) -> &str {
        &self.owner
    }

    /// A lease for this process from now.
    pub(crate) fn new_lease(&self) -> Lease {
        Lease {
            owner: self.owner.clone(),
            expires_at: later(jiff::Timestamp::now(), OPERATION_LEASE_MS),
        }
    }

    /// Leases running operation `id` to this process, if nobody holds it: no lease, or another process's that
    /// expired (on SQLite: any other process's). Returns whether this process now holds it; `false` for one it
    /// already held (so a second run in this process is never started) or that is no longer running.
    pub fn claim_operation(&self, id: &str) -> Result<bool, StoreError> {
        let now = timestamp_text(jiff::Timestamp::now());
        let lease = self.new_lease();
        let conn = self.conn()?;
        let exclusive = conn.dialect() == Dialect::Sqlite;
        let changed = conn.execute(
            "UPDATE operations SET lease_owner = ?2, lease_expires_at = ?3
             WHERE id = ?1 AND status = 'running'
               AND (lease_owner IS NULL OR (lease_owner <> ?2 AND (lease_expires_at < ?4 OR ?5 <> 0)))
               AND NOT EXISTS (SELECT 1 FROM databases d WHERE d.id = operations.database_id
                                 AND d.compute_host IS NOT NULL AND d.compute_host <> ?2)",
            params![id, lease.owner, lease.expires_at, now, exclusive],
        )?;
        Ok(changed == 1)
    }

    /// Extends the leases of every running operation this process holds; returns how many.
    pub fn renew_leases(&self) -> Result<usize, StoreError> {
        let lease = self.new_lease();
        let conn = self.conn()?;
        Ok(conn.execute(
            "UPDATE operations SET lease_expires_at = ?2 WHERE lease_owner = ?1 AND status = 'running'",
            params![lease.owner, lease.expires_at],
        )?)
    }

    /// Up to [`CLAIMABLE_PER_SCAN_MAX`] running operations that another process could have held but nobody does
    /// now (no lease, or another's that expired), oldest first.
    pub fn claimable_operations(&self) -> Result<Vec<String>, StoreError> {
        let now = timestamp_text(jiff::Timestamp::now());
        let conn = self.conn()?;
        let limit = i64::try_from(CLAIMABLE_PER_SCAN_MAX).unwrap_or(i64::MAX);
        let mut stmt = conn.prepare(
            "SELECT id FROM operations WHERE status = 'running'
               AND (lease_owner IS NULL OR (lease_owner <> ?1 AND lease_expires_at < ?2))
               AND NOT EXISTS (SELECT 1 FROM databases d WHERE d.id = operations.database_id
                                 AND d.compute_host IS NOT NULL AND d.compute_host <> ?1)
             ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![self.owner, now, limit], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
