//! API key rows: the hash of each secret (never the secret), the account it acts for, and its scope (a project,
//! read-only, an expiry; migration 7). Checking a request against the scope is the HTTP layer's (`http::scope`).

use crate::store::sql::{params, OptionalExtension, Row};

use super::{new_id, now, timestamp_text, AccountId, Store, StoreError};

/// What a key may do beyond its account's bounds. The default is an unscoped key: every project of its account,
/// every call, no expiry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyScope {
    /// The only project it sees (`proj_…`); others are 404 to it, and it cannot create projects.
    pub project_id: Option<String>,
    /// Only reads: every mutating call is 403.
    pub read_only: bool,
    /// When it stops authenticating (ISO 8601 UTC, as stored); `None`: never.
    pub expires_at: Option<String>,
}

/// An API key row; the secret itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// `key_<ULID>`.
    pub id: String,
    /// The account the key acts for.
    pub account_id: AccountId,
    /// ISO 8601 UTC.
    pub created_at: String,
    /// When the key was revoked, if it was.
    pub revoked_at: Option<String>,
    /// What it may do.
    pub scope: KeyScope,
}

/// The stored `expires_at` of a key that expires `after` from now; `None` if that is past what a time holds.
pub fn expiry_after(after: std::time::Duration) -> Option<String> {
    let after = jiff::SignedDuration::try_from(after).ok()?;
    jiff::Timestamp::now().checked_add(after).ok().map(timestamp_text)
}

const KEY_COLUMNS: &str = "id, account_id, created_at, revoked_at, project_id, read_only, expires_at";

fn key_row(row: &Row<'_>) -> crate::store::sql::Result<ApiKey> {
    Ok(ApiKey {
        id: row.get(0)?,
        account_id: AccountId(row.get(1)?),
        created_at: row.get(2)?,
        revoked_at: row.get(3)?,
        scope: KeyScope {
            project_id: row.get(4)?,
            read_only: row.get(5)?,
            expires_at: row.get(6)?,
        },
    })
}

impl Store {
    /// Stores a key for `account` with `scope` by the hash of its secret; returns the key id.
    pub fn insert_key(&self, account: &AccountId, hash: &[u8], scope: &KeyScope) -> Result<String, StoreError> {
        let (ms, created_at) = now();
        let id = new_id("key_", ms);
        let conn = self.conn()?;
        conn.execute(
            "INSERT INTO api_keys (id, account_id, hash, created_at, project_id, read_only, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id,
                account.0,
                hash,
                created_at,
                scope.project_id,
                scope.read_only,
                scope.expires_at
            ],
        )?;
        Ok(id)
    }

    /// The key whose secret hashes to `hash`, revoked, expired or not.
    pub fn key_by_hash(&self, hash: &[u8]) -> Result<Option<ApiKey>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?1"),
                [hash],
                key_row,
            )
            .optional()?)
    }

    /// Revokes key `id`; returns whether a not-yet-revoked key was revoked.
    pub fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let (_, revoked_at) = now();
        let conn = self.conn()?;
        let changed = conn.execute(
            "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            params![id, revoked_at],
        )?;
        Ok(changed == 1)
    }

    /// Every key, revoked or not, oldest first.
    pub fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id"))?;
        let rows = stmt.query_map([], key_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
