//! Branches: a database's named lines of history, each on one timeline; listing, rename, promotion, and the
//! deletion of a subtree.

use crate::store::sql::{params, OptionalExtension, Row, Transaction, TransactionBehavior};
use cambium_types::{Lsn, TimelineId};

use super::timelines::{insert_timeline, TimelineRow};
use super::{lsn_from_sql, lsn_to_sql, page, parse_column, Database};
use crate::store::audit::{insert_audit, AuditEntry, NewAuditEntry};
use crate::store::labels::{label_condition, labels_column, labels_to_sql, LabelFilter, Labels};
use crate::store::{conflict_on_unique, webhooks, AccountId, Page, Store, StoreError};

/// A branch row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// `br_<ULID>`.
    pub id: String,
    /// The database it belongs to.
    pub database_id: String,
    /// Unique within the database.
    pub name: String,
    /// The branch it was forked from; `None` for a database's first branch.
    pub parent_branch_id: Option<String>,
    /// The point of the parent it was forked at; `None` for a database's first branch.
    pub parent_lsn: Option<Lsn>,
    /// The timeline that holds its data now (a restore moves it to a new one).
    pub timeline_id: TimelineId,
    /// ISO 8601 UTC.
    pub created_at: String,
    /// Whether deletion, restore, reset and expiry are refused (until it is unprotected).
    pub protected: bool,
    /// When the expiry sweep deletes it (ISO 8601 UTC, three fractional digits, so the text sorts as the time);
    /// `None`: never.
    pub expires_at: Option<String>,
    /// Its labels.
    pub labels: Labels,
}

pub(super) const BRANCH_COLUMNS: &str =
    "id, database_id, name, parent_branch_id, parent_lsn, timeline_id, created_at, protected, expires_at, labels";

pub(super) fn branch_row(row: &Row<'_>) -> crate::store::sql::Result<Branch> {
    Ok(Branch {
        id: row.get(0)?,
        database_id: row.get(1)?,
        name: row.get(2)?,
        parent_branch_id: row.get(3)?,
        parent_lsn: row.get::<_, Option<i64>>(4)?.map(lsn_from_sql).transpose()?,
        timeline_id: parse_column(row, 5)?,
        created_at: row.get(6)?,
        protected: row.get(7)?,
        expires_at: row.get(8)?,
        labels: labels_column(row, 9)?,
    })
}

pub(super) fn insert_branch(tx: &Transaction<'_>, branch: &Branch) -> Result<(), StoreError> {
    tx.execute(
        &format!("INSERT INTO branches ({BRANCH_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
        params![
            branch.id,
            branch.database_id,
            branch.name,
            branch.parent_branch_id,
            branch.parent_lsn.map(lsn_to_sql).transpose()?,
            branch.timeline_id.to_string(),
            branch.created_at,
            branch.protected,
            branch.expires_at,
            labels_to_sql(&branch.labels)
        ],
    )
    .map_err(|e| conflict_on_unique(e, &format!("a branch named {:?} exists in this database", branch.name)))?;
    Ok(())
}

/// What [`Store::update_branch`] changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BranchUpdate {
    /// A new name.
    pub name: Option<String>,
    /// Protect or unprotect.
    pub protected: Option<bool>,
    /// A new expiry (`Some(None)` clears it), as stored text.
    pub expires_at: Option<Option<String>>,
    /// Make it the database's default branch.
    pub promote: bool,
    /// New labels, replacing all.
    pub labels: Option<Labels>,
}

/// The message of a refusal of `what` (deletion, restore, reset, expiry) because `branch` is protected: it names
/// the protection and how to lift it.
pub fn protection_refuses(branch: &Branch, what: &str) -> String {
    format!(
        "branch {} ({:?}) is protected, which refuses its {what}: unprotect it first (PATCH /v1/branches/{} with \
         {{\"protected\": false}})",
        branch.id, branch.name, branch.id
    )
}

/// What [`Store::insert_branch`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInserted {
    /// The creation's audit entry, if one was given.
    pub audit: Option<AuditEntry>,
    /// How many deliveries of the creation's event are held for its timeline (released when it is confirmed).
    pub held: usize,
    /// How many deliveries held for the earlier creations it confirmed (`confirmed`) it released: due now.
    pub released: usize,
}

/// Records on `tx` that the storage holds `timeline` (no longer storage pending) and releases the deliveries
/// held for its creation; how many were released.
fn confirm_on(tx: &Transaction<'_>, timeline: TimelineId) -> Result<usize, StoreError> {
    tx.execute(
        "UPDATE timelines SET storage_pending = 0 WHERE timeline_id = ?1",
        [timeline.to_string()],
    )?;
    webhooks::release_held(tx, timeline)
}

impl Store {
    /// Up to `limit` branches of `account`'s database `database_id` after `after` (and labels matching `filter`,
    /// if given), in creation order; `None` if there is no such database.
    pub fn list_branches(
        &self,
        account: &AccountId,
        database_id: &str,
        after: Option<&str>,
        limit: usize,
        filter: Option<&LabelFilter>,
    ) -> Result<Option<Page<Branch>>, StoreError> {
        if self.get_database(account, database_id)?.is_none() {
            return Ok(None);
        }
        let conn = self.conn()?;
        let sql = format!(
            "SELECT {BRANCH_COLUMNS} FROM branches
             WHERE database_id = ?1 AND id > ?2 AND {} ORDER BY id LIMIT ?3",
            label_condition(conn.dialect())
        );
        Ok(Some(page(
            &conn,
            &sql,
            database_id,
            after,
            limit,
            filter,
            branch_row,
            |b| b.id.clone(),
        )?))
    }

    /// How many branches database `database_id` has, its default branch included.
    pub fn branch_count(&self, database_id: &str) -> Result<i64, StoreError> {
        let conn = self.conn()?;
        Ok(conn.query_row(
            "SELECT count(*) FROM branches WHERE database_id = ?1",
            [database_id],
            |row| row.get(0),
        )?)
    }

    /// Every branch of database `database_id`, in creation order.
    pub fn branches_of(&self, database_id: &str) -> Result<Vec<Branch>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {BRANCH_COLUMNS} FROM branches WHERE database_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map([database_id], branch_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// `account`'s branch `id` with its database.
    pub fn get_branch(&self, account: &AccountId, id: &str) -> Result<Option<(Branch, Database)>, StoreError> {
        let branch = {
            let conn = self.conn()?;
            conn.query_row(
                &format!("SELECT {BRANCH_COLUMNS} FROM branches WHERE id = ?1"),
                [id],
                branch_row,
            )
            .optional()?
        };
        let Some(branch) = branch else {
            return Ok(None);
        };
        Ok(self
            .get_database(account, &branch.database_id)?
            .map(|database| (branch, database)))
    }

    /// Branch `id`, whoever owns it.
    pub fn branch(&self, id: &str) -> Result<Option<Branch>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!("SELECT {BRANCH_COLUMNS} FROM branches WHERE id = ?1"),
                [id],
                branch_row,
            )
            .optional()?)
    }

    /// Adds `branch` on its new `timeline`, `audit` (the creation's audit entry) if given, and a delivery of
    /// `event_body` (the `branch.created` event) to each of the project's webhooks subscribed to it, *held* for the
    /// timeline (`webhooks::enqueue_on`), in one transaction; [`StoreError::Conflict`] for a duplicate name.
    /// Returns the audit entry written, how many deliveries are held, and how many held for the confirmed
    /// creations it released.
    ///
    /// The timeline is recorded *storage pending* (written at once with its creation on the storage, which may not
    /// have happened yet): [`Store::pending_timelines_of`] lists it until [`Store::confirm_timelines`] or a later
    /// insertion's `confirmed` (timelines known to be on the storage, cleared in the same transaction) says so.
    pub fn insert_branch(
        &self,
        branch: &Branch,
        timeline: &TimelineRow,
        audit: Option<&NewAuditEntry>,
        event_body: Option<&str>,
        confirmed: &[TimelineId],
    ) -> Result<BranchInserted, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        insert_timeline(&tx, &branch.database_id, timeline)?;
        tx.execute(
            "UPDATE timelines SET storage_pending = 1 WHERE timeline_id = ?1",
            [timeline.timeline_id.to_string()],
        )?;
        insert_branch(&tx, branch)?;
        let entry = audit.map(|entry| insert_audit(&tx, entry)).transpose()?;
        let held = match event_body {
            Some(body) => {
                let project_id: String = tx.query_row(
                    "SELECT project_id FROM databases WHERE id = ?1",
                    [&branch.database_id],
                    |row| row.get(0),
                )?;
                let event = crate::store::webhooks::WebhookEvent::BranchCreated;
                webhooks::enqueue_on(&tx, &project_id, event, body, Some(timeline.timeline_id))?
            }
            None => 0,
        };
        let mut released = 0;
        for id in confirmed {
            released += confirm_on(&tx, *id)?;
        }
        tx.commit()?;
        Ok(BranchInserted {
            audit: entry,
            held,
            released,
        })
    }

    /// Takes back a branch creation whose storage failed: the branch (just made, so without children), its
    /// timeline's row and the creation's audit entry `audit_id`, in one transaction.
    pub fn undo_branch_creation(
        &self,
        branch_id: &str,
        timeline: TimelineId,
        audit_id: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM branches WHERE id = ?1", [branch_id])?;
        tx.execute("DELETE FROM timelines WHERE timeline_id = ?1", [timeline.to_string()])?;
        webhooks::drop_held(&tx, timeline)?;
        if let Some(id) = audit_id {
            tx.execute("DELETE FROM audit_log WHERE id = ?1", [id])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Takes back branch `branch`, whose creation a crash cut before the storage made its timeline (so it was never
    /// acknowledged), with its timeline's row and the creation's audit entry (`POST /v1/databases/{id}/branches`,
    /// 201, the first of its project's entries written at or after the branch's `created_at`: creations on a
    /// database are serialized by its lock, and the entry was written in the row's transaction), in one
    /// transaction.
    pub fn undo_unacknowledged_creation(&self, branch: &Branch, project_id: &str) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let path = format!("/v1/databases/{}/branches", branch.database_id);
        let audit_id = tx
            .query_row(
                "SELECT id FROM audit_log WHERE project_id = ?1 AND method = 'POST' AND path = ?2 AND status = 201
                 AND created_at >= ?3 ORDER BY id LIMIT 1",
                params![project_id, path, branch.created_at],
                |row| row.get::<_, String>(0),
            )
            .optional()?;
        tx.execute("DELETE FROM branches WHERE id = ?1", [&branch.id])?;
        tx.execute(
            "DELETE FROM timelines WHERE timeline_id = ?1",
            [branch.timeline_id.to_string()],
        )?;
        webhooks::drop_held(&tx, branch.timeline_id)?;
        if let Some(id) = audit_id {
            tx.execute("DELETE FROM audit_log WHERE id = ?1", [id])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The timelines of database `database_id` recorded storage pending (see [`Store::insert_branch`]).
    pub fn pending_timelines_of(&self, database_id: &str) -> Result<Vec<TimelineId>, StoreError> {
        let conn = self.conn()?;
        let mut stmt =
            conn.prepare("SELECT timeline_id FROM timelines WHERE database_id = ?1 AND storage_pending = 1")?;
        let ids = stmt
            .query_map([database_id], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        ids.iter()
            .map(|id| {
                id.parse()
                    .map_err(|_| StoreError::Corrupt(format!("timeline id {id:?}")))
            })
            .collect()
    }

    /// Records `timelines` as on the storage (no longer storage pending).
    pub fn confirm_timelines(&self, timelines: &[TimelineId]) -> Result<usize, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut released = 0;
        for id in timelines {
            released += confirm_on(&tx, *id)?;
        }
        tx.commit()?;
        Ok(released)
    }

    /// Applies `update` to branch `id` in one transaction; [`StoreError::Conflict`] for a duplicate name.
    pub fn update_branch(&self, id: &str, update: &BranchUpdate) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(name) = &update.name {
            tx.execute("UPDATE branches SET name = ?2 WHERE id = ?1", params![id, name])
                .map_err(|e| conflict_on_unique(e, &format!("a branch named {name:?} exists in this database")))?;
        }
        if let Some(protected) = update.protected {
            tx.execute(
                "UPDATE branches SET protected = ?2 WHERE id = ?1",
                params![id, protected],
            )?;
        }
        if let Some(expires_at) = &update.expires_at {
            tx.execute(
                "UPDATE branches SET expires_at = ?2 WHERE id = ?1",
                params![id, expires_at],
            )?;
        }
        if let Some(labels) = &update.labels {
            tx.execute(
                "UPDATE branches SET labels = ?2 WHERE id = ?1",
                params![id, labels_to_sql(labels)],
            )?;
        }
        if update.promote {
            tx.execute(
                "UPDATE databases SET default_branch_id = ?1
                 WHERE id = (SELECT database_id FROM branches WHERE id = ?1)",
                [id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Clears branch `id`'s expiry if it is still `expires_at` (the expiry sweep gave up on it: protected, or
    /// with children); returns whether it changed.
    pub fn clear_expiry(&self, id: &str, expires_at: &str) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        let changed = conn.execute(
            "UPDATE branches SET expires_at = NULL WHERE id = ?1 AND expires_at = ?2",
            params![id, expires_at],
        )?;
        Ok(changed == 1)
    }

    /// Up to `limit` branches, of every database, whose `expires_at` is at or before `now` (stored text), the
    /// longest expired first.
    pub fn expired_branches(&self, now: &str, limit: usize) -> Result<Vec<Branch>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {BRANCH_COLUMNS} FROM branches
             WHERE expires_at IS NOT NULL AND expires_at <= ?1 ORDER BY expires_at, id LIMIT ?2"
        ))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![now, limit], branch_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The branches forked from branch `id` (its children, not their descendants), in creation order.
    pub fn children_of(&self, id: &str) -> Result<Vec<Branch>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {BRANCH_COLUMNS} FROM branches WHERE parent_branch_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map([id], branch_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The first protected branch of database `database_id`, if it has one.
    pub fn protected_branch(&self, database_id: &str) -> Result<Option<Branch>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!("SELECT {BRANCH_COLUMNS} FROM branches WHERE database_id = ?1 AND protected <> 0 ORDER BY id"),
                [database_id],
                branch_row,
            )
            .optional()?)
    }

    /// Deletes branch `id` and every branch forked from it (transitively), in one transaction; returns the
    /// deleted branches. Refuses ([`StoreError::Conflict`]) if the subtree holds the database's default branch.
    pub fn delete_branch_subtree(&self, id: &str) -> Result<Vec<Branch>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut stmt = tx.prepare(&format!(
            "WITH RECURSIVE subtree(id) AS (
                 SELECT id FROM branches WHERE id = ?1 UNION SELECT b.id FROM branches b JOIN subtree s ON b.parent_branch_id = s.id
             )
             SELECT {BRANCH_COLUMNS} FROM branches WHERE id IN (SELECT id FROM subtree) ORDER BY id"
        ))?;
        let subtree = stmt.query_map([id], branch_row)?.collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
        if let Some(protected) = subtree.iter().find(|b| b.protected) {
            return Err(StoreError::Conflict(if protected.id == id {
                protection_refuses(protected, "deletion")
            } else {
                format!(
                    "branch {} ({:?}), forked from this one, is protected, which refuses its deletion: unprotect it \
                     first (PATCH /v1/branches/{} with {{\"protected\": false}})",
                    protected.id, protected.name, protected.id
                )
            }));
        }
        for branch in &subtree {
            let default = tx
                .query_row(
                    "SELECT 1 FROM databases WHERE default_branch_id = ?1",
                    [&branch.id],
                    |_| Ok(()),
                )
                .optional()?;
            if default.is_some() {
                return Err(StoreError::Conflict(if branch.id == id {
                    "the default branch of a database cannot be deleted; promote another branch first".to_owned()
                } else {
                    format!(
                        "branch {} ({:?}), forked from this one, is the database's default branch",
                        branch.id, branch.name
                    )
                }));
            }
        }
        for branch in &subtree {
            tx.execute("DELETE FROM branches WHERE id = ?1", [&branch.id])?;
            // A creation's event still held (its confirmation failed) is due now, before the deletion's event,
            // which is queued after this transaction.
            webhooks::release_held(&tx, branch.timeline_id)?;
        }
        tx.commit()?;
        Ok(subtree)
    }
}
