//! Responses kept for `Idempotency-Key` retries: per account and key, the request it answered (method and
//! path) and the response (status and body). Kept for [`IDEMPOTENCY_TTL_S`]; older ones are dropped as new
//! ones are stored.
//!
//! **Invariant:** a stored body holds no password: every `scheme://user:password@…` in it is stored as
//! `scheme://user@…` ([`redact_passwords`], applied by the store itself whatever the caller passes). A replay
//! of a response that carried a password (a database's creation, a password reset) gives it without: a
//! password is shown once, and a client that lost it resets it.

//!
//! A key whose first request is running is *reserved* in the metadata (`idempotency_reservations`), so that every
//! API process sharing it sees the reservation: a retry sent to another process while the first runs is refused
//! (409) rather than run a second time. A reservation names the process holding it and carries a lease
//! ([`RESERVATION_LEASE_MS`], renewed while the request runs): a killed process's reservation stops counting
//! when its lease expires (on SQLite at once, as every other process's there is a dead one's).
//!
//! **Invariant:** a key's request runs at most once while its response is kept: a process reserves the key and
//! only then looks for a stored response ([`Store::reserve_idempotency_key`], one transaction), and stores the
//! response and lets go of the reservation in one transaction ([`Store::store_idempotent_response`]). So a
//! reservation can only be taken once the previous holder's response is stored, and the lookup after it sees it.

use crate::store::sql::{params, Connection, Dialect, OptionalExtension, Transaction};

use super::leases::later;
use super::{now, timestamp_text, AccountId, Store, StoreError};

/// How long a stored response is replayed.
pub const IDEMPOTENCY_TTL_S: i64 = 24 * 3600;

/// How long a reservation lasts without renewal; its holder renews it every third of this while its request runs.
pub const RESERVATION_LEASE_MS: u64 = 15_000;

/// What reserving a key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// A response is stored for the key: it is the answer (no reservation is held).
    Stored(StoredResponse),
    /// This process holds the key now: run the request, then store its response or release the key.
    Reserved,
    /// A live process (this one or another) holds the key: its first request is still running.
    Held,
}

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
        stored_response(&*self.conn()?, account, key)
    }

    /// Reserves `account`'s `key` for this process unless a live process holds it, and looks for its stored
    /// response after reserving (the order the module's invariant needs). A reservation whose lease expired, or
    /// on SQLite any other process's, is taken over.
    pub fn reserve_idempotency_key(&self, account: &AccountId, key: &str) -> Result<Reservation, StoreError> {
        let now = jiff::Timestamp::now();
        let expires_at = later(now, RESERVATION_LEASE_MS);
        let now = timestamp_text(now);
        let mut conn = self.conn()?;
        let exclusive = conn.dialect() == Dialect::Sqlite;
        let tx = conn.transaction()?;
        tx.execute(
            "DELETE FROM idempotency_reservations
             WHERE account_id = ?1 AND key = ?2 AND owner <> ?3 AND (expires_at < ?4 OR ?5 <> 0)",
            params![account.0, key, self.owner, now, exclusive],
        )?;
        let reserved = tx.execute(
            "INSERT INTO idempotency_reservations (account_id, key, owner, expires_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (account_id, key) DO NOTHING",
            params![account.0, key, self.owner, expires_at],
        )? == 1;
        let reservation = match stored_response(&tx, account, key)? {
            Some(stored) => {
                if reserved {
                    // A stored response is final: the key need not be held to replay it.
                    release(&tx, account, key, &self.owner)?;
                }
                Reservation::Stored(stored)
            }
            None if reserved => Reservation::Reserved,
            None => Reservation::Held,
        };
        tx.commit()?;
        Ok(reservation)
    }

    /// Extends this process's reservation of `account`'s `key`; whether it still held it.
    pub fn renew_idempotency_reservation(&self, account: &AccountId, key: &str) -> Result<bool, StoreError> {
        let expires_at = later(jiff::Timestamp::now(), RESERVATION_LEASE_MS);
        let conn = self.conn()?;
        let changed = conn.execute(
            "UPDATE idempotency_reservations SET expires_at = ?4 WHERE account_id = ?1 AND key = ?2 AND owner = ?3",
            params![account.0, key, self.owner, expires_at],
        )?;
        Ok(changed == 1)
    }

    /// Lets go of this process's reservation of `account`'s `key` (nothing if it holds none): its request ended
    /// without a response to keep.
    pub fn release_idempotency_key(&self, account: &AccountId, key: &str) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        release(&tx, account, key, &self.owner)?;
        tx.commit()?;
        Ok(())
    }

    /// Stores `response` for `account`'s `key` (replacing an expired one), lets go of this process's reservation
    /// of the key in the same transaction, and drops expired responses.
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
        release(&tx, account, key, &self.owner)?;
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
/// The response stored for `account`'s `key`, if there is a live one.
fn stored_response(conn: &Connection, account: &AccountId, key: &str) -> Result<Option<StoredResponse>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT method, path, status, body, request_hash FROM idempotency_keys
             WHERE account_id = ?1 AND key = ?2 AND created_at >= ?3",
            params![account.0, key, cutoff()],
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

/// Deletes `owner`'s reservation of `account`'s `key`, if it holds one.
fn release(tx: &Transaction<'_>, account: &AccountId, key: &str, owner: &str) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM idempotency_reservations WHERE account_id = ?1 AND key = ?2 AND owner = ?3",
        params![account.0, key, owner],
    )?;
    Ok(())
}

fn cutoff() -> String {
    let now = jiff::Timestamp::now();
    timestamp_text(
        now.checked_sub(jiff::SignedDuration::from_secs(IDEMPOTENCY_TTL_S))
            .unwrap_or(now),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)] // a test failure is a panic

    use super::*;
    use crate::store::scenarios::Open;

    fn response(body: &str) -> StoredResponse {
        StoredResponse {
            method: "POST".to_owned(),
            path: "/v1/projects".to_owned(),
            request_hash: vec![1, 2, 3],
            status: 201,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_key_is_reserved_by_one_process_until_its_response_is_stored() {
        crate::store::scenarios::on_sqlite(a_key_is_reserved_by_one_process_until_its_response_is_stored_on);
    }

    /// Two stores on one metadata database stand for two API processes.
    pub(crate) fn a_key_is_reserved_by_one_process_until_its_response_is_stored_on(open: Open<'_>) {
        let (first, second) = (open(), open());
        let shared = first.dialect() == Dialect::Postgres;
        let account = first.create_account().unwrap();

        assert_eq!(
            first.reserve_idempotency_key(&account, "k").unwrap(),
            Reservation::Reserved
        );
        // A retry in the same process while the first runs.
        assert_eq!(first.reserve_idempotency_key(&account, "k").unwrap(), Reservation::Held);
        if shared {
            // A retry on another process sharing the metadata: held there too, and it cannot renew what it lacks.
            assert_eq!(
                second.reserve_idempotency_key(&account, "k").unwrap(),
                Reservation::Held
            );
            assert!(!second.renew_idempotency_reservation(&account, "k").unwrap());
            assert!(first.renew_idempotency_reservation(&account, "k").unwrap());
            first
                .store_idempotent_response(&account, "k", &response("one"))
                .unwrap();
            // Stored and let go in one step: the other process replays, and holds nothing after.
            assert_eq!(
                second.reserve_idempotency_key(&account, "k").unwrap(),
                Reservation::Stored(response("one"))
            );
            assert!(!second.renew_idempotency_reservation(&account, "k").unwrap());
        } else {
            // On SQLite one process owns the metadata: another store's reservation is a dead process's.
            assert_eq!(
                second.reserve_idempotency_key(&account, "k").unwrap(),
                Reservation::Reserved
            );
            assert!(!first.renew_idempotency_reservation(&account, "k").unwrap());
            second
                .store_idempotent_response(&account, "k", &response("one"))
                .unwrap();
            assert_eq!(
                first.reserve_idempotency_key(&account, "k").unwrap(),
                Reservation::Stored(response("one"))
            );
        }

        // A request that failed lets go: the next try runs.
        assert_eq!(
            first.reserve_idempotency_key(&account, "r").unwrap(),
            Reservation::Reserved
        );
        second.release_idempotency_key(&account, "r").unwrap(); // not its reservation: nothing happens
        assert_eq!(first.reserve_idempotency_key(&account, "r").unwrap(), Reservation::Held);
        first.release_idempotency_key(&account, "r").unwrap();
        assert_eq!(
            second.reserve_idempotency_key(&account, "r").unwrap(),
            Reservation::Reserved
        );

        // A killed process's reservation counts until its lease expires, then is taken over.
        assert_eq!(
            first.reserve_idempotency_key(&account, "d").unwrap(),
            Reservation::Reserved
        );
        if shared {
            assert_eq!(
                second.reserve_idempotency_key(&account, "d").unwrap(),
                Reservation::Held
            );
        }
        first
            .conn()
            .unwrap()
            .execute(
                "UPDATE idempotency_reservations SET expires_at = ?1 WHERE key = 'd'",
                params!["2000-01-01T00:00:00.000Z"],
            )
            .unwrap();
        assert_eq!(
            second.reserve_idempotency_key(&account, "d").unwrap(),
            Reservation::Reserved
        );
        if shared {
            assert_eq!(first.reserve_idempotency_key(&account, "d").unwrap(), Reservation::Held);
        }
        // Keys are per account.
        let other = first.create_account().unwrap();
        assert_eq!(
            first.reserve_idempotency_key(&other, "d").unwrap(),
            Reservation::Reserved
        );
    }

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
