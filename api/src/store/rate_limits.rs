//! The rate limit's shared counts (migration 12, `rate_limit_counts`): for each API process (its lease owner
//! id), account and one-second window, how many requests the process admitted. Each process publishes its own
//! rows every ~200 ms and reads the others' (`http::limits`), so processes sharing PostgreSQL metadata share
//! each account's limit without a metadata write per request. Rows older than a few windows are deleted by
//! whichever process publishes next, so the table holds at most processes × active accounts × a few windows.

use super::sql::{params, TransactionBehavior};
use super::{AccountId, Store, StoreError};

/// Rows a process publishes in one call at most; the rest wait for the next.
pub const PUBLISHED_ROWS_MAX: usize = 1_000;

/// Rows one read returns at most (the newest windows first): a bound on what a reader holds.
pub const READ_ROWS_MAX: usize = 10_000;

/// One process's admitted requests for one account in one window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateCount {
    /// The process (its [`Store::lease_owner`]).
    pub owner: String,
    /// The account.
    pub account: AccountId,
    /// The window's start, in ms since the Unix epoch (a multiple of the window's length).
    pub window_ms: u64,
    /// Requests admitted in it so far.
    pub count: u64,
}

impl Store {
    /// Publishes this process's `counts` (account, window start, requests admitted in it: each replaces what
    /// was published for its window), deletes every process's rows of windows before `delete_before_ms`, and
    /// returns the other processes' rows of windows from `since_ms` on.
    pub fn exchange_rate_counts(
        &self,
        counts: &[(AccountId, u64, u64)],
        since_ms: u64,
        delete_before_ms: u64,
    ) -> Result<Vec<RateCount>, StoreError> {
        assert!(
            counts.len() <= PUBLISHED_ROWS_MAX,
            "{} rows, at most {PUBLISHED_ROWS_MAX}",
            counts.len()
        );
        let mut conn = self.conn()?;
        if !counts.is_empty() {
            // One transaction: one commit (one fsync on PostgreSQL) for the batch. Not an immediate one: each
            // row is this process's alone, so no other writer needs excluding.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
            for (account, window_ms, count) in counts {
                tx.execute(
                    "INSERT INTO rate_limit_counts (owner, account_id, window_ms, count) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (owner, account_id, window_ms) DO UPDATE SET count = excluded.count",
                    params![self.owner, account.0, window_ms, count],
                )?;
            }
            tx.commit()?;
        }
        conn.execute(
            "DELETE FROM rate_limit_counts WHERE window_ms < ?1",
            params![delete_before_ms],
        )?;
        let limit = i64::try_from(READ_ROWS_MAX).unwrap_or(i64::MAX);
        let mut stmt = conn.prepare(
            "SELECT owner, account_id, window_ms, count FROM rate_limit_counts
             WHERE window_ms >= ?1 AND owner <> ?2 ORDER BY window_ms DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![since_ms, self.owner, limit], |row| {
            Ok(RateCount {
                owner: row.get(0)?,
                account: AccountId(row.get(1)?),
                window_ms: row.get(2)?,
                count: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use super::*;

    #[test]
    fn counts_are_exchanged_between_stores_and_old_windows_go() {
        crate::store::scenarios::on_sqlite(counts_are_exchanged_between_stores_and_old_windows_go_on);
    }

    /// Two stores on one metadata (two processes): each sees the other's counts, never its own; a count
    /// published again replaces the old one; windows before the cut are deleted, whoever published them.
    pub(crate) fn counts_are_exchanged_between_stores_and_old_windows_go_on(open: crate::store::scenarios::Open<'_>) {
        let (a, b) = (open(), open());
        let account = AccountId("acct_1".to_owned());
        let other = AccountId("acct_2".to_owned());
        assert_eq!(
            a.exchange_rate_counts(&[(account.clone(), 1_000, 3)], 0, 0).unwrap(),
            []
        );
        let seen = b
            .exchange_rate_counts(&[(account.clone(), 2_000, 1), (other.clone(), 2_000, 7)], 0, 0)
            .unwrap();
        assert_eq!(
            seen,
            [RateCount {
                owner: a.lease_owner().to_owned(),
                account: account.clone(),
                window_ms: 1_000,
                count: 3,
            }]
        );
        a.exchange_rate_counts(&[(account.clone(), 1_000, 5)], 0, 0).unwrap();
        let mut seen = a.exchange_rate_counts(&[], 0, 0).unwrap();
        seen.sort_by(|x, y| x.account.0.cmp(&y.account.0));
        let counts: Vec<(&str, u64, u64)> = seen
            .iter()
            .map(|r| (r.account.0.as_str(), r.window_ms, r.count))
            .collect();
        assert_eq!(counts, [("acct_1", 2_000, 1), ("acct_2", 2_000, 7)]);
        assert!(seen.iter().all(|r| r.owner == b.lease_owner()));
        let replaced = b.exchange_rate_counts(&[], 0, 0).unwrap();
        assert_eq!(replaced[0].count, 5, "the newer count replaced the old");
        // Reading from a window on skips older ones; deleting before it removes them for every reader.
        assert_eq!(b.exchange_rate_counts(&[], 2_000, 0).unwrap(), []);
        a.exchange_rate_counts(&[], 0, 2_000).unwrap();
        assert_eq!(b.exchange_rate_counts(&[], 0, 0).unwrap(), []);
        assert_eq!(
            a.exchange_rate_counts(&[], 0, 0).unwrap().len(),
            2,
            "b's windows were not before the cut"
        );
    }
}
