//! Consumption (issue 15): what each branch holds and does, in hourly buckets, from the samples the consumption
//! sampler (`crate::consumption`) takes of the pageserver and the compute host.
//!
//! A bucket (branch, hour) holds the branch's logical size at the hour's last sample, the WAL written on it during
//! the hour (bytes), and how long its compute was running (ms). WAL written is the growth of the branch's
//! timeline's last record LSN since the previous sample, which a per-branch cursor (its timeline and LSN then)
//! remembers; after a restore moves the branch to a new timeline, what that timeline holds past its start is new.
//!
//! **Bounded:** buckets older than [`CONSUMPTION_RETENTION_DAYS`] go at each recording, so a branch has at most
//! 24 × that many; a cursor goes with its branch's last bucket (a deleted branch's, once they aged out); a project's
//! buckets go with it.

use crate::store::sql::{params, OptionalExtension};

use super::{has_project, AccountId, Store, StoreError};

/// How long buckets are kept.
pub const CONSUMPTION_RETENTION_DAYS: i64 = 90;

/// One sample of a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchSample {
    /// Its project.
    pub project_id: String,
    /// Its database.
    pub database_id: String,
    /// The branch.
    pub branch_id: String,
    /// Its timeline now (32 hex digits).
    pub timeline_id: String,
    /// Where that timeline's own WAL starts.
    pub start_lsn: u64,
    /// The timeline's last record LSN, as the pageserver has ingested it.
    pub last_record_lsn: u64,
    /// Its logical size, as the pageserver reports it.
    pub logical_size_bytes: u64,
    /// How long its compute ran since the previous sample, in ms (0 if it is stopped).
    pub compute_active_ms: u64,
}

/// A branch's consumption over a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchUsage {
    /// Its database.
    pub database_id: String,
    /// The branch (possibly deleted since).
    pub branch_id: String,
    /// Its logical size at the range's last sample.
    pub logical_size_bytes: u64,
    /// The WAL written on it in the range.
    pub written_bytes: u64,
    /// How long its compute ran in the range, in ms.
    pub compute_active_ms: u64,
}

fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl Store {
    /// Adds `samples` to their branches' buckets of `hour` (`YYYY-MM-DDTHH:00:00Z`), moves the cursors, and drops
    /// buckets older than `cutoff_hour` and the cursors of branches with no bucket left; one transaction.
    pub fn record_consumption(
        &self,
        hour: &str,
        cutoff_hour: &str,
        samples: &[BranchSample],
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(crate::store::sql::TransactionBehavior::Immediate)?;
        for sample in samples {
            let cursor: Option<(String, i64)> = tx
                .query_row(
                    "SELECT timeline_id, last_lsn FROM consumption_cursors WHERE branch_id = ?1",
                    [&sample.branch_id],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            let since = match cursor {
                Some((timeline, lsn)) if timeline == sample.timeline_id => from_sql(lsn),
                _ => sample.start_lsn,
            };
            let written_bytes = sample.last_record_lsn.saturating_sub(since);
            tx.execute(
                "INSERT INTO consumption_cursors (branch_id, timeline_id, last_lsn) VALUES (?1, ?2, ?3)
                 ON CONFLICT (branch_id) DO UPDATE SET timeline_id = excluded.timeline_id, last_lsn = excluded.last_lsn",
                params![sample.branch_id, sample.timeline_id, to_sql(sample.last_record_lsn)],
            )?;
            tx.execute(
                "INSERT INTO consumption (branch_id, hour, project_id, database_id, logical_size_bytes, written_bytes,
                     compute_active_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (branch_id, hour) DO UPDATE SET logical_size_bytes = excluded.logical_size_bytes,
                     written_bytes = consumption.written_bytes + excluded.written_bytes,
                     compute_active_ms = consumption.compute_active_ms + excluded.compute_active_ms",
                params![
                    sample.branch_id,
                    hour,
                    sample.project_id,
                    sample.database_id,
                    to_sql(sample.logical_size_bytes),
                    to_sql(written_bytes),
                    to_sql(sample.compute_active_ms)
                ],
            )?;
        }
        tx.execute("DELETE FROM consumption WHERE hour < ?1", [cutoff_hour])?;
        tx.execute(
            "DELETE FROM consumption_cursors WHERE branch_id NOT IN (SELECT branch_id FROM consumption)",
            [],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The consumption of each branch of `account`'s project `project_id` in the buckets whose hour is in
    /// `[from_hour, to)`, by database and branch id; `None` if there is no such project.
    pub fn project_consumption(
        &self,
        account: &AccountId,
        project_id: &str,
        from_hour: &str,
        to: &str,
    ) -> Result<Option<Vec<BranchUsage>>, StoreError> {
        let conn = self.conn()?;
        if !has_project(&conn, account, project_id)? {
            return Ok(None);
        }
        let mut stmt = conn.prepare(
            "SELECT database_id, branch_id, CAST(sum(written_bytes) AS BIGINT), CAST(sum(compute_active_ms) AS BIGINT),
                 (SELECT logical_size_bytes FROM consumption last WHERE last.branch_id = c.branch_id
                      AND last.hour >= ?2 AND last.hour < ?3 ORDER BY last.hour DESC LIMIT 1)
             FROM consumption c WHERE project_id = ?1 AND hour >= ?2 AND hour < ?3
             GROUP BY database_id, branch_id ORDER BY database_id, branch_id",
        )?;
        let rows = stmt
            .query_map(params![project_id, from_hour, to], |row| {
                Ok(BranchUsage {
                    database_id: row.get(0)?,
                    branch_id: row.get(1)?,
                    written_bytes: from_sql(row.get(2)?),
                    compute_active_ms: from_sql(row.get(3)?),
                    logical_size_bytes: from_sql(row.get(4)?),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(rows))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use super::*;
    use crate::store::labels::Labels;

    fn sample(project_id: &str, timeline: &str, lsn: u64, size: u64, active_ms: u64) -> BranchSample {
        BranchSample {
            project_id: project_id.to_owned(),
            database_id: "db_1".to_owned(),
            branch_id: "br_1".to_owned(),
            timeline_id: timeline.to_owned(),
            start_lsn: 100,
            last_record_lsn: lsn,
            logical_size_bytes: size,
            compute_active_ms: active_ms,
        }
    }

    #[test]
    fn buckets_add_wal_growth_and_compute_time_and_keep_the_last_size() {
        crate::store::scenarios::on_sqlite(buckets_add_wal_growth_and_compute_time_and_keep_the_last_size_on);
    }

    /// [`buckets_add_wal_growth_and_compute_time_and_keep_the_last_size`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn buckets_add_wal_growth_and_compute_time_and_keep_the_last_size_on(
        open: crate::store::scenarios::Open<'_>,
    ) {
        let store = open();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let p = project.id.as_str();
        let (h1, h2) = ("2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z");
        store
            .record_consumption(h1, "2000", &[sample(p, "t1", 150, 8192, 0)])
            .unwrap();
        store
            .record_consumption(h1, "2000", &[sample(p, "t1", 170, 16384, 500)])
            .unwrap();
        // A restore: a new timeline, whose WAL past its start is new.
        store
            .record_consumption(h2, "2000", &[sample(p, "t2", 130, 8192, 1000)])
            .unwrap();
        let all = store
            .project_consumption(&account, p, h1, "2026-01-01T12:00:00Z")
            .unwrap()
            .unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(
            (
                all[0].written_bytes,
                all[0].compute_active_ms,
                all[0].logical_size_bytes
            ),
            (100, 1500, 8192)
        );
        let first = store.project_consumption(&account, p, h1, h2).unwrap().unwrap();
        assert_eq!((first[0].written_bytes, first[0].logical_size_bytes), (70, 16384));
        assert!(store
            .project_consumption(&account, p, "2025", h1)
            .unwrap()
            .unwrap()
            .is_empty());
        let stranger = store.create_account().unwrap();
        assert_eq!(store.project_consumption(&stranger, p, h1, h2).unwrap(), None);
        // Old buckets go, and a cursor with its branch's last bucket.
        store.record_consumption(h2, h2, &[]).unwrap();
        let left = store.project_consumption(&account, p, "2000", "3000").unwrap().unwrap();
        assert_eq!(left[0].written_bytes, 30);
        store.record_consumption(h2, "3000", &[]).unwrap();
        assert!(store
            .project_consumption(&account, p, "2000", "3000")
            .unwrap()
            .unwrap()
            .is_empty());
        let cursors: i64 = store
            .conn()
            .unwrap()
            .query_row("SELECT count(*) FROM consumption_cursors", [], |row| row.get(0))
            .unwrap();
        assert_eq!(cursors, 0);
    }
}
