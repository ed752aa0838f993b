//! Responses kept for `Idempotency-Key` retries: per account and key, the request it answered (method and
//! path) and the response (status and body). Kept for [`IDEMPOTENCY_TTL_S`]; older ones are dropped as new
//! ones are stored.
//!
//! **Invariant:** a stored body holds no password: every `scheme://user:password@…` in it is stored as
//! `scheme://user@…` ([`redact_passwords`], applied by the store itself whatever the caller passes). A replay
//! of a response that carried a password (a database's creation, a password reset) gives it without: a
//! password is shown once, and a client that lost it resets it.

use crate::store::sql::{params, OptionalExtension, Transaction};

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
        let conn = self.conn()?;
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
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        tx.execute("DELETE FROM idempotency_keys WHERE created_at < ?1", [cutoff])?;
        tx.execute(
            "INSERT INTO idempotency_keys
                 (account_id, key, method, path, status, body, created_at, request_hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (account_id, key) DO UPDATE SET method = excluded.method, path = excluded.path,
                 status = excluded.status, body = excluded.body, created_at = excluded.created_at,
                 request_hash = excluded.request_hash",
            params![
                account.0,
                key,
                response.method,
                response.path,
                response.status,
                redact_passwords(&response.body),
                created_at,
                response.request_hash
            ],
        )?;
        tx.commit()?;
        Ok(())
    }
}

/// `body` with the password of every URL in it removed: `scheme://user:password@host…` becomes
/// `scheme://user@host…`. Works on the bytes, so on any format (JSON escapes none of the characters involved);
/// a password, like the API's, cannot contain `/`, `?`, `#`, `"`, a backslash or a space.
pub fn redact_passwords(body: &[u8]) -> Vec<u8> {
    const SEPARATOR: &[u8] = b"://";
    let mut redacted = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        let (before, after) = rest.split_at(at + SEPARATOR.len());
        redacted.extend_from_slice(before);
        // The authority (`user:password@host:port`) ends where the path, query or fragment starts, or the text
        // around the URL does.
        let end = after
            .iter()
            .position(|b| matches!(b, b'/' | b'?' | b'#' | b'"' | b'\\') || b.is_ascii_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.iter().rposition(|b| *b == b'@') {
            Some(at_sign) => {
                let userinfo = &authority[..at_sign];
                let user_end = userinfo.iter().position(|b| *b == b':').unwrap_or(userinfo.len());
                redacted.extend_from_slice(&userinfo[..user_end]);
                redacted.extend_from_slice(&authority[at_sign..]);
            }
            None => redacted.extend_from_slice(authority),
        }
        rest = &after[end..];
    }
    redacted.extend_from_slice(rest);
    redacted
}

/// Removes the passwords from every stored body (migration 4: older versions stored them).
pub(crate) fn redact_stored_responses(tx: &Transaction<'_>) -> Result<(), StoreError> {
    let rows = {
        let mut stmt = tx.prepare("SELECT rowid, body FROM idempotency_keys")?;
        let rows = stmt.query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, Vec<u8>>(1)?)))?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    for (rowid, body) in rows {
        let redacted = redact_passwords(&body);
        if redacted != body {
            tx.execute(
                "UPDATE idempotency_keys SET body = ?2 WHERE rowid = ?1",
                params![rowid, redacted],
            )?;
        }
    }
    Ok(())
}

/// The oldest `created_at` still replayed, in the same ISO 8601 form (which sorts as text).
fn cutoff() -> String {
    let now = jiff::Timestamp::now();
    timestamp_text(
        now.checked_sub(jiff::SignedDuration::from_secs(IDEMPOTENCY_TTL_S))
            .unwrap_or(now),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_removed_from_urls_and_nothing_else_changes() {
        for (body, expected) in [
            (
                r#"{"connection_uri":"postgresql://cambium:s3cret@127.0.0.1:5433/db_1?sslmode=disable"}"#,
                r#"{"connection_uri":"postgresql://cambium@127.0.0.1:5433/db_1?sslmode=disable"}"#,
            ),
            (
                r#"["postgres://u:p@h/x", "postgresql://u@h/y", "http://h:80/z", "a://:p@h"]"#,
                r#"["postgres://u@h/x", "postgresql://u@h/y", "http://h:80/z", "a://@h"]"#,
            ),
            ("postgresql://u:p@h", "postgresql://u@h"),
            ("no url: a:b@c", "no url: a:b@c"),
            ("", ""),
            ("://", "://"),
            ("x://u:p", "x://u:p"),
        ] {
            assert_eq!(
                String::from_utf8(redact_passwords(body.as_bytes())).expect("utf-8"),
                expected,
                "{body}"
            );
        }
    }
}
