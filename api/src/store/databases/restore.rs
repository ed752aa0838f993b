//! The rows' change of a restore: the branch moved onto its new timeline, and its old state kept as a branch
//! that takes over its children when asked; one transaction, idempotent.

use crate::store::sql::{params, OptionalExtension, Transaction, TransactionBehavior};
use cambium_types::{Lsn, TimelineId};

use super::branches::{branch_row, insert_branch, Branch, BRANCH_COLUMNS};
use super::lsn_to_sql;
use super::timelines::{insert_timeline, TimelineRow};
use crate::store::{now, Store, StoreError};

/// How a restore changes the rows, applied by [`Store::apply_restore`].
#[derive(Debug, Clone)]
pub struct RestoreChange {
    /// The restored branch.
    pub branch_id: String,
    /// The timeline it must be on when the change applies (else someone else moved it: nothing changes).
    pub old_timeline_id: TimelineId,
    /// The new timeline, branched at the restore point.
    pub new_timeline: TimelineRow,
    /// The name of the branch that keeps the state before the restore; `None` when not preserved.
    pub preserved_name: Option<String>,
    /// The preserved branch's id (fixed up front so a retried restore makes the same one).
    pub preserved_id: String,
    /// The branch's new `parent_lsn` (a reset: the parent's point it now starts from); `None` keeps it.
    pub new_parent_lsn: Option<Lsn>,
}

impl Store {
    /// Moves a branch onto its restored timeline and, if asked, keeps its old timeline as a new branch that takes
    /// over its children; one transaction. Returns the preserved branch, or `None` if it was not preserved or the
    /// change was applied before (a retried operation: the branch is already on the new timeline).
    pub fn apply_restore(&self, change: &RestoreChange) -> Result<Option<Branch>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let branch = tx
            .query_row(
                &format!("SELECT {BRANCH_COLUMNS} FROM branches WHERE id = ?1"),
                [&change.branch_id],
                branch_row,
            )
            .optional()?
            .ok_or_else(|| StoreError::Conflict("the branch was deleted during the restore".to_owned()))?;
        if branch.timeline_id == change.new_timeline.timeline_id {
            return Ok(None);
        }
        if branch.timeline_id != change.old_timeline_id {
            return Err(StoreError::Conflict("the branch changed during the restore".to_owned()));
        }
        insert_timeline(&tx, &branch.database_id, &change.new_timeline)?;
        tx.execute(
            "UPDATE branches SET timeline_id = ?2 WHERE id = ?1",
            params![branch.id, change.new_timeline.timeline_id.to_string()],
        )?;
        if let Some(lsn) = change.new_parent_lsn {
            tx.execute(
                "UPDATE branches SET parent_lsn = ?2 WHERE id = ?1",
                params![branch.id, lsn_to_sql(lsn)?],
            )?;
        }
        let preserved = match &change.preserved_name {
            None => None,
            Some(base) => {
                let name = unique_branch_name(&tx, &branch.database_id, base)?;
                let preserved = Branch {
                    id: change.preserved_id.clone(),
                    database_id: branch.database_id.clone(),
                    name,
                    parent_branch_id: branch.parent_branch_id.clone(),
                    parent_lsn: branch.parent_lsn,
                    timeline_id: change.old_timeline_id,
                    created_at: now().1,
                    // A backup: neither the protection, the expiry nor the labels of the branch it was taken from (a
                    // listing by label finds the branches the user made).
                    protected: false,
                    expires_at: None,
                    labels: crate::store::labels::Labels::new(),
                };
                insert_branch(&tx, &preserved)?;
                // The children forked from the old history: they now hang off the branch that keeps it.
                tx.execute(
                    "UPDATE branches SET parent_branch_id = ?2 WHERE parent_branch_id = ?1 AND id != ?2",
                    params![branch.id, preserved.id],
                )?;
                Some(preserved)
            }
        };
        tx.commit()?;
        Ok(preserved)
    }
}

/// `base`, or `base_2`, `base_3`… : the first name not taken in the database.
fn unique_branch_name(tx: &Transaction<'_>, database_id: &str, base: &str) -> Result<String, StoreError> {
    const TRIES_MAX: usize = 1_000;
    for n in 1..=TRIES_MAX {
        let name = if n == 1 { base.to_owned() } else { format!("{base}_{n}") };
        let taken = tx
            .query_row(
                "SELECT 1 FROM branches WHERE database_id = ?1 AND name = ?2",
                params![database_id, name],
                |_| Ok(()),
            )
            .optional()?;
        if taken.is_none() {
            return Ok(name);
        }
    }
    Err(StoreError::Conflict(format!("no free name like {base:?}")))
}
