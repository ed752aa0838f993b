//! Responses kept for `Idempotency-Key` retries: per account and key, the request it answered (method and
//! path) and the response (status and body). Kept for [`IDEMPOTENCY_TTL_S`]; older ones are dropped as new
//! ones are stored.

use rusqlite::{params, OptionalExtension};

use super::{now, timestamp_text, AccountId, Store, StoreError};

/// How long a stored response is replayed.
pub const IDEMPOTENCY_TTL_S: i64 = 24 * 3600;

/// A stored response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The method of the request it answered.
    pub method: String,
    /// The path of the request it answered.
    pub path: String,
    /// SHA-256 of the body of the request it answered.
    pub request_hash: Vec<u8>,
    /// HTTP status.
    pub status: u16,
    /// The body, JSON.
    pub body: Vec<u8>,
}

impl Store {
    /// The response stored for `account`'s `key`, if there is a live one.
    pub fn idempotent_response(&self, account: &AccountId, key: &str) -> Result<Option<StoredResponse>, StoreError> {
        let conn = self.conn();
        let cutoff = cutoff();
        Ok(conn
            .query_row(
                "SELECT method, path, status, body, request_hash FROM idempotency_keys
                 WHERE account_id = ?1 AND key = ?2 AND created_at >= ?3",
                params![account.0, key, cutoff],
                |row| {
                    Ok(StoredResponse {
                        method: row.get(0)?,
                        path: row.get(1)?,
                        status: row.get(2)?,
                        body: row.get(3)?,
                        request_hash: row.get::<_, Option<Vec<u8>>>(4)?.unwrap_or_default(),
                    })
                },
            )
            .optional()?)
    }

    /// Stores `response` for `account`'s `key` (replacing an expired one), and drops expired ones.
    pub fn store_idempotent_response(
        &self,
        account: &AccountId,
        key: &str,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let (_, created_at) = now();
        let cutoff = cutoff();
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute("DELETE FROM idempotency_keys WHERE created_at < ?1", [cutoff])?;
        tx.execute(
            "INSERT OR REPLACE INTO idempotency_keys
                 (account_id, key, method, path, status, body, created_at, request_hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                account.0,
                key,
                response.method,
                response.path,
                response.status,
                response.body,
                created_at,
                response.request_hash
            ],
        )?;
        tx.commit()?;
        Ok(())
    }
}

/// The oldest `created_at` still replayed, in the same ISO 8601 form (which sorts as text).
fn cutoff() -> String {
    let now = jiff::Timestamp::now();
    timestamp_text(
        now.checked_sub(jiff::SignedDuration::from_secs(IDEMPOTENCY_TTL_S))
            .unwrap_or(now),
    )
}
