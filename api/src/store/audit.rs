//! The audit log: one row per mutating `/v1` call that concerns a project — who (the key id, never the secret),
//! what (method and path), when, and the result (the HTTP status), with the request id to match a client's logs.
//!
//! **Bounded:** each project keeps its newest [`AUDIT_ENTRIES_PER_PROJECT_MAX`] entries, none older than
//! [`AUDIT_RETENTION_DAYS`] days; both are enforced when an entry is added (so a quiet project's old entries go
//! with its next call), and a project's entries go with the project.

use crate::store::sql::{params, Row};

use super::{has_project, new_id, now, timestamp_text, AccountId, Page, Store, StoreError};

/// Entries a project keeps, at most (the oldest go first).
pub const AUDIT_ENTRIES_PER_PROJECT_MAX: u32 = 10_000;
/// How long an entry is kept, at most.
pub const AUDIT_RETENTION_DAYS: i64 = 90;

/// One audited call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// `aud_<ULID>` (creation order).
    pub id: String,
    /// The project the call concerned.
    pub project_id: String,
    /// The key that made it (`key_…`).
    pub key_id: String,
    /// `POST`, `PATCH` or `DELETE`.
    pub method: String,
    /// The request path (ids only; no query).
    pub path: String,
    /// The response's HTTP status.
    pub status: u16,
    /// The response's `X-Request-Id`.
    pub request_id: String,
    /// ISO 8601 UTC.
    pub created_at: String,
}

/// What [`Store::record_audit`] writes: an entry but its id and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAuditEntry {
    /// The project the call concerned.
    pub project_id: String,
    /// The key that made it.
    pub key_id: String,
    /// The method.
    pub method: String,
    /// The path.
    pub path: String,
    /// The response's status.
    pub status: u16,
    /// The response's request id.
    pub request_id: String,
}

const AUDIT_COLUMNS: &str = "id, project_id, key_id, method, path, status, request_id, created_at";

fn audit_row(row: &Row<'_>) -> crate::store::sql::Result<AuditEntry> {
    Ok(AuditEntry {
        id: row.get(0)?,
        project_id: row.get(1)?,
        key_id: row.get(2)?,
        method: row.get(3)?,
        path: row.get(4)?,
        status: row.get(5)?,
        request_id: row.get(6)?,
        created_at: row.get(7)?,
    })
}

impl Store {
    /// Adds `entry` to its project's log and drops the project's entries past the bounds, in one transaction.
    pub fn record_audit(&self, entry: &NewAuditEntry) -> Result<AuditEntry, StoreError> {
        let (ms, created_at) = now();
        let entry = AuditEntry {
            id: new_id("aud_", ms),
            project_id: entry.project_id.clone(),
            key_id: entry.key_id.clone(),
            method: entry.method.clone(),
            path: entry.path.clone(),
            status: entry.status,
            request_id: entry.request_id.clone(),
            created_at,
        };
        let cutoff = jiff::Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_hours(AUDIT_RETENTION_DAYS * 24))
            .map(timestamp_text)
            .unwrap_or_default();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(crate::store::sql::TransactionBehavior::Immediate)?;
        tx.execute(
            &format!("INSERT INTO audit_log ({AUDIT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
            params![
                entry.id,
                entry.project_id,
                entry.key_id,
                entry.method,
                entry.path,
                entry.status,
                entry.request_id,
                entry.created_at
            ],
        )?;
        tx.execute(
            "DELETE FROM audit_log WHERE project_id = ?1 AND (created_at < ?2 OR id <= (
                 SELECT id FROM audit_log WHERE project_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?3))",
            params![entry.project_id, cutoff, AUDIT_ENTRIES_PER_PROJECT_MAX],
        )?;
        tx.commit()?;
        Ok(entry)
    }

    /// Up to `limit` entries of `account`'s project `project_id`, newest first, older than `before`; `None` if
    /// there is no such project.
    pub fn list_audit(
        &self,
        account: &AccountId,
        project_id: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Option<Page<AuditEntry>>, StoreError> {
        assert!(limit > 0, "limit {limit}");
        let conn = self.conn()?;
        if !has_project(&conn, account, project_id)? {
            return Ok(None);
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE project_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
        ))?;
        // One extra row says whether another page follows; `~` sorts after every id character.
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let items = stmt
            .query_map(params![project_id, before.unwrap_or("~"), fetch], audit_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Page::from_one_extra(items, limit, |e| e.id.clone())))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use super::*;
    use crate::store::labels::Labels;

    fn entry(project_id: &str, n: u16) -> NewAuditEntry {
        NewAuditEntry {
            project_id: project_id.to_owned(),
            key_id: "key_1".to_owned(),
            method: "POST".to_owned(),
            path: format!("/v1/projects/{project_id}/databases"),
            status: n,
            request_id: format!("req_{n}"),
        }
    }

    #[test]
    fn entries_list_newest_first_by_project_and_old_ones_go() {
        crate::store::scenarios::on_sqlite(entries_list_newest_first_by_project_and_old_ones_go_on);
    }

    /// [`entries_list_newest_first_by_project_and_old_ones_go`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn entries_list_newest_first_by_project_and_old_ones_go_on(open: crate::store::scenarios::Open<'_>) {
        let store = open();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let other = store.create_project(&account, "q", 10, &Labels::new()).unwrap();
        for n in 0..5 {
            store.record_audit(&entry(&project.id, 200 + n)).unwrap();
        }
        store.record_audit(&entry(&other.id, 201)).unwrap();
        let page = store.list_audit(&account, &project.id, None, 3).unwrap().unwrap();
        let statuses: Vec<u16> = page.items.iter().map(|e| e.status).collect();
        assert_eq!(statuses, [204, 203, 202]);
        let rest = store
            .list_audit(&account, &project.id, page.next_after.as_deref(), 3)
            .unwrap()
            .unwrap();
        assert_eq!(rest.items.iter().map(|e| e.status).collect::<Vec<_>>(), [201, 200]);
        assert_eq!(rest.next_after, None);
        let stranger = store.create_account().unwrap();
        assert_eq!(store.list_audit(&stranger, &project.id, None, 3).unwrap(), None);
        // An entry older than the retention goes with the next one added.
        store
            .conn()
            .unwrap()
            .execute(
                "UPDATE audit_log SET created_at = '2000-01-01T00:00:00.000Z' WHERE status = 200",
                [],
            )
            .unwrap();
        store.record_audit(&entry(&project.id, 205)).unwrap();
        let all = store.list_audit(&account, &project.id, None, 100).unwrap().unwrap();
        assert_eq!(all.items.len(), 5);
        assert!(all.items.iter().all(|e| e.status != 200));
        // Deleting the project takes its entries.
        store.delete_project(&account, &project.id).unwrap();
        let left: i64 = store
            .conn()
            .unwrap()
            .query_row("SELECT count(*) FROM audit_log", [], |row| row.get(0))
            .unwrap();
        assert_eq!(left, 1);
    }
}
