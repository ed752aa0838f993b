//! The audit log: one row per mutating `/v1` call that concerns a project — who (the key id, never the secret),
//! what (method and path), when, and the result (the HTTP status), with the request id to match a client's logs.
//!
//! **Bounded:** each project keeps its newest [`AUDIT_ENTRIES_PER_PROJECT_MAX`] entries, none older than
//! [`AUDIT_RETENTION_DAYS`] days; both are enforced when an entry is added (so a quiet project's old entries go
//! with its next call), and a project's entries go with the project.
//!
//! **Committed with the change** where the handler supports it ([`claim`]): a branch creation and a restore's
//! operation write their entry in the transaction of their own row, so the change and its entry are committed
//! together or not at all, and the call waits for one flush of the metadata instead of two. Any other call,
//! and every failed one, gets its entry from `http::scope` after the handler, in a transaction of its own.

use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::store::sql::{params, Row, Transaction, TransactionBehavior};

use super::{has_project, new_id, now, AccountId, Page, Store, StoreError};

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

tokio::task_local! {
    /// The audit entry of the `/v1` call being handled, while `http::scope` runs its handler.
    static REQUEST_AUDIT: Arc<Mutex<RequestAudit>>;
}

/// The audit entry of one call and, once a handler committed it in its own transaction, with which status.
#[derive(Debug)]
struct RequestAudit {
    entry: NewAuditEntry,
    committed: Option<u16>,
}

/// Runs `handler` (a call's handler) with `entry` as the call's audit entry, which a store call of the handler
/// may write in its own transaction ([`claim`]); returns the handler's output and the status the entry was
/// committed with, if it was (the caller writes the entry itself otherwise, or if the response's status differs).
pub(crate) async fn in_request<F: Future>(entry: NewAuditEntry, handler: F) -> (F::Output, Option<u16>) {
    let slot = Arc::new(Mutex::new(RequestAudit { entry, committed: None }));
    let output = REQUEST_AUDIT.scope(Arc::clone(&slot), handler).await;
    let committed = slot.lock().committed;
    (output, committed)
}

/// The call's audit entry with the status `status` the handler answers with when the change it is about to commit
/// is made, to be written in the change's own transaction; `None` outside a call that is audited (a test, the
/// worker, an unaudited route). The entry counts as written once [`AuditClaim::committed`] says so.
pub(crate) fn claim(status: u16) -> Option<AuditClaim> {
    REQUEST_AUDIT
        .try_with(|slot| {
            let mut entry = slot.lock().entry.clone();
            entry.status = status;
            AuditClaim {
                entry,
                slot: Arc::clone(slot),
            }
        })
        .ok()
}

/// An audit entry a handler writes in its own metadata transaction ([`claim`]).
#[derive(Debug)]
pub(crate) struct AuditClaim {
    entry: NewAuditEntry,
    slot: Arc<Mutex<RequestAudit>>,
}

impl AuditClaim {
    /// The entry to write.
    pub(crate) fn entry(&self) -> &NewAuditEntry {
        &self.entry
    }

    /// Records that the transaction holding the entry committed: `http::scope` writes no other for the call
    /// unless its response's status is not the entry's.
    pub(crate) fn committed(self) {
        self.slot.lock().committed = Some(self.entry.status);
    }
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

/// Adds `entry` to its project's log inside `tx` and drops the project's entries past the bounds: the entry is
/// committed with whatever else `tx` writes, or not at all.
pub(crate) fn insert_audit(tx: &Transaction<'_>, entry: &NewAuditEntry) -> Result<AuditEntry, StoreError> {
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
    // Entries older than the retention, as ids: an id made at an earlier millisecond sorts below the floor of the
    // cutoff's (ids are time-ordered), so the deletion is a range of the (project, id) index, not a read of every
    // entry of the project (which took ~1.5 ms a write at 10 000 entries).
    let retention_ms = u64::try_from(AUDIT_RETENTION_DAYS * 24 * 3_600_000).expect("a positive retention");
    let cutoff = format!("aud_{}", crate::ids::ulid_floor(ms.saturating_sub(retention_ms)));
    // Its place in the project's log: one past the newest's (an index lookup).
    let seq: i64 = tx.query_row(
        "SELECT coalesce(max(seq), 0) + 1 FROM audit_log WHERE project_id = ?1",
        [&entry.project_id],
        |row| row.get(0),
    )?;
    tx.execute(
        &format!("INSERT INTO audit_log ({AUDIT_COLUMNS}, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
        params![
            entry.id,
            entry.project_id,
            entry.key_id,
            entry.method,
            entry.path,
            entry.status,
            entry.request_id,
            entry.created_at,
            seq
        ],
    )?;
    tx.execute(
        "DELETE FROM audit_log WHERE project_id = ?1 AND id < ?2",
        params![entry.project_id, cutoff],
    )?;
    // Past the count: the places `AUDIT_ENTRIES_PER_PROJECT_MAX` or more behind this one (fewer are kept if
    // entries were taken back in between: at most the bound, never more).
    tx.execute(
        "DELETE FROM audit_log WHERE project_id = ?1 AND seq <= ?2",
        params![entry.project_id, seq - i64::from(AUDIT_ENTRIES_PER_PROJECT_MAX)],
    )?;
    Ok(entry)
}

impl Store {
    /// Adds `entry` to its project's log and drops the project's entries past the bounds, in one transaction of
    /// its own (what `http::scope` does for a call whose handler wrote no entry in its own transaction).
    pub fn record_audit(&self, entry: &NewAuditEntry) -> Result<AuditEntry, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let entry = insert_audit(&tx, entry)?;
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
    fn a_change_and_its_audit_entry_commit_together() {
        crate::store::scenarios::on_sqlite(a_change_and_its_audit_entry_commit_together_on);
    }

    /// The entries of `project_id` with `status`, read from a fresh store.
    fn entries_with(
        open: crate::store::scenarios::Open<'_>,
        account: &AccountId,
        project_id: &str,
        status: u16,
    ) -> usize {
        let page = open().list_audit(account, project_id, None, 100).unwrap().unwrap();
        page.items.iter().filter(|e| e.status == status).count()
    }

    /// A branch row and a restore's operation are committed with their audit entry or not at all: a refused
    /// change writes no entry, and an entry that cannot be written (its table renamed away for the test) leaves
    /// no change.
    pub(crate) fn a_change_and_its_audit_entry_commit_together_on(open: crate::store::scenarios::Open<'_>) {
        use crate::store::databases::{NewDatabase, TimelineRow};
        use crate::store::operations::{Action, NewOperation, RestoreParams};
        use cambium_types::{Lsn, TimelineId};

        let store = open();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let verifier = compute::pg::ScramVerifier::from_password("pw", compute::pg::scram::ITERATIONS_DEFAULT).unwrap();
        let root = TimelineRow {
            timeline_id: TimelineId(1),
            ancestor_timeline_id: None,
            start_lsn: Lsn(0x0100_0000),
        };
        let new = NewDatabase {
            project_id: project.id.clone(),
            name: "d".to_owned(),
            region: "local".to_owned(),
            tenant_id: "0123456789abcdef0123456789abcdef".parse().unwrap(),
            timeline: root,
            branch_name: "main".to_owned(),
            password_verifier: std::sync::Arc::new(verifier),
            labels: Labels::new(),
            suspend_timeout_seconds: 300,
        };
        let created = store.create_database(&account, &new, 10).unwrap().unwrap();
        let child_timeline = |n: u128| TimelineRow {
            timeline_id: TimelineId(n),
            ancestor_timeline_id: Some(root.timeline_id),
            start_lsn: Lsn(0x0200_0000),
        };
        let mut child = created.branch.clone();
        child.id = format!("{}x", created.branch.id);
        child.name = "child".to_owned();
        child.parent_branch_id = Some(created.branch.id.clone());
        child.parent_lsn = Some(Lsn(0x0200_0000));
        child.timeline_id = TimelineId(2);
        let mut audit = entry(&project.id, 201);

        // Committed together.
        store
            .insert_branch(&child, &child_timeline(2), Some(&audit), None, &[])
            .unwrap();
        assert!(open().branch(&child.id).unwrap().is_some());
        assert_eq!(entries_with(open, &account, &project.id, 201), 1);

        // A refused change (a duplicate name) writes no entry.
        let mut twin = child.clone();
        twin.id.push('y');
        twin.timeline_id = TimelineId(3);
        assert!(matches!(
            store.insert_branch(&twin, &child_timeline(3), Some(&audit), None, &[]),
            Err(StoreError::Conflict(_))
        ));
        assert_eq!(entries_with(open, &account, &project.id, 201), 1);

        // An entry that cannot be written leaves no branch.
        let hide = |hidden: bool| {
            let (from, to) = if hidden {
                ("audit_log", "audit_log_away")
            } else {
                ("audit_log_away", "audit_log")
            };
            store
                .conn()
                .unwrap()
                .execute(&format!("ALTER TABLE {from} RENAME TO {to}"), [])
                .unwrap();
        };
        let mut third = child.clone();
        third.id.push('z');
        third.name = "third".to_owned();
        third.timeline_id = TimelineId(4);
        hide(true);
        assert!(store
            .insert_branch(&third, &child_timeline(4), Some(&audit), None, &[])
            .is_err());
        hide(false);
        assert_eq!(open().branch(&third.id).unwrap(), None);
        assert!(open()
            .timelines_of(&created.database.id)
            .unwrap()
            .iter()
            .all(|t| t.timeline_id != TimelineId(4)));
        assert_eq!(entries_with(open, &account, &project.id, 201), 1);

        // A restore's operation: the same, both ways.
        audit.status = 202;
        let action = Action::RestoreBranch(RestoreParams {
            branch_id: child.id.clone(),
            old_timeline_id: child.timeline_id,
            source_timeline_id: child.timeline_id,
            target_lsn: Lsn(0x0200_0000),
            new_timeline_id: TimelineId(5),
            preserved_name: None,
            preserved_id: format!("{}k", child.id),
        });
        let operation = NewOperation {
            project_id: &project.id,
            account_id: &account,
            database_id: Some(&created.database.id),
            branch_id: Some(&child.id),
            action: &action,
        };
        hide(true);
        assert!(store.start_operation_audited(&operation, Some(&audit)).is_err());
        hide(false);
        let restores = || {
            open()
                .running_operations_on_database(&created.database.id, Action::RESTORE_BRANCH)
                .unwrap()
        };
        assert_eq!(restores(), 0);
        assert_eq!(entries_with(open, &account, &project.id, 202), 0);
        let started = store.start_operation_audited(&operation, Some(&audit)).unwrap();
        assert_eq!(restores(), 1);
        assert_eq!(entries_with(open, &account, &project.id, 202), 1);
        // A second one on the same branch is refused, and so is its entry.
        assert!(matches!(
            store.start_operation_audited(&operation, Some(&audit)),
            Err(StoreError::Conflict(_))
        ));
        assert_eq!(entries_with(open, &account, &project.id, 202), 1);
        assert_eq!(restores(), 1);
        assert!(open().running_operations().unwrap().iter().any(|o| o.id == started.id));
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
        // An entry older than the retention goes with the next one added (made in 2000: its time and its id's).
        let old_id = format!("aud_{}", crate::ids::ulid_floor(946_684_800_000));
        store
            .conn()
            .unwrap()
            .execute(
                "UPDATE audit_log SET created_at = '2000-01-01T00:00:00.000Z', id = ?1
                 WHERE status = 200 AND project_id = ?2",
                [&old_id, &project.id],
            )
            .unwrap();
        // One made just inside the retention stays.
        let recent_ms = now().0 - u64::try_from(AUDIT_RETENTION_DAYS - 1).unwrap() * 24 * 3_600_000;
        let recent_id = format!("aud_{}", crate::ids::ulid_floor(recent_ms));
        store
            .conn()
            .unwrap()
            .execute(
                "UPDATE audit_log SET id = ?1 WHERE status = 201 AND project_id = ?2",
                [&recent_id, &project.id],
            )
            .unwrap();
        store.record_audit(&entry(&project.id, 205)).unwrap();
        let all = store.list_audit(&account, &project.id, None, 100).unwrap().unwrap();
        assert_eq!(all.items.len(), 5);
        assert!(all.items.iter().all(|e| e.status != 200));
        // Past the count, the oldest go: the project filled to the bound (in one transaction, ids of a second ago
        // and older), then one more entry.
        let first_ms = now().0 - 1_001_000;
        {
            let mut conn = store.conn().unwrap();
            let tx = conn.transaction().unwrap();
            tx.execute("DELETE FROM audit_log WHERE project_id = ?1", [&project.id])
                .unwrap();
            for n in 0..u64::from(AUDIT_ENTRIES_PER_PROJECT_MAX) {
                let id = format!("aud_{}", crate::ids::ulid_floor(first_ms + n));
                tx.execute(
                    &format!(
                        "INSERT INTO audit_log ({AUDIT_COLUMNS}, seq) VALUES (?1, ?2, 'k', 'POST', '/', 200, 'r', 'x', ?3)"
                    ),
                    params![id, project.id, i64::try_from(n + 1).unwrap()],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        let oldest = format!("aud_{}", crate::ids::ulid_floor(first_ms));
        store.record_audit(&entry(&project.id, 206)).unwrap();
        let count = |store: &Store| -> i64 {
            store
                .conn()
                .unwrap()
                .query_row(
                    "SELECT count(*) FROM audit_log WHERE project_id = ?1",
                    [&project.id],
                    |row| row.get(0),
                )
                .unwrap()
        };
        assert_eq!(count(&store), i64::from(AUDIT_ENTRIES_PER_PROJECT_MAX));
        let first: String = store
            .conn()
            .unwrap()
            .query_row(
                "SELECT id FROM audit_log WHERE project_id = ?1 ORDER BY id LIMIT 1",
                [&project.id],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            first,
            format!("aud_{}", crate::ids::ulid_floor(first_ms + 1)),
            "the oldest entry went, and only it"
        );
        assert!(first > oldest);
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
