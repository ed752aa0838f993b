//! Branches: a database's named lines of history, each on one timeline; listing, rename, promotion, and the
//! deletion of a subtree.

use cambium_types::{Lsn, TimelineId};
use rusqlite::{params, OptionalExtension, Row, Transaction, TransactionBehavior};

use super::timelines::{insert_timeline, TimelineRow};
use super::{lsn_from_sql, lsn_to_sql, page, parse_column, Database};
use crate::store::{conflict_on_unique, AccountId, Page, Store, StoreError};

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
}

pub(super) const BRANCH_COLUMNS: &str = "id, database_id, name, parent_branch_id, parent_lsn, timeline_id, created_at";

pub(super) fn branch_row(row: &Row<'_>) -> rusqlite::Result<Branch> {
    Ok(Branch {
        id: row.get(0)?,
        database_id: row.get(1)?,
        name: row.get(2)?,
        parent_branch_id: row.get(3)?,
        parent_lsn: row.get::<_, Option<i64>>(4)?.map(lsn_from_sql).transpose()?,
        timeline_id: parse_column(row, 5)?,
        created_at: row.get(6)?,
    })
}

pub(super) fn insert_branch(tx: &Transaction<'_>, branch: &Branch) -> Result<(), StoreError> {
    tx.execute(
        &format!("INSERT INTO branches ({BRANCH_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
        params![
            branch.id,
            branch.database_id,
            branch.name,
            branch.parent_branch_id,
            branch.parent_lsn.map(lsn_to_sql).transpose()?,
            branch.timeline_id.to_string(),
            branch.created_at
        ],
    )
    .map_err(|e| conflict_on_unique(e, &format!("a branch named {:?} exists in this database", branch.name)))?;
    Ok(())
}

impl Store {
    /// Up to `limit` branches of `account`'s database `database_id` after `after`, in creation order; `None` if
    /// there is no such database.
    pub fn list_branches(
        &self,
        account: &AccountId,
        database_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Option<Page<Branch>>, StoreError> {
        if self.get_database(account, database_id)?.is_none() {
            return Ok(None);
        }
        let conn = self.conn();
        let sql =
            format!("SELECT {BRANCH_COLUMNS} FROM branches WHERE database_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3");
        Ok(Some(page(&conn, &sql, database_id, after, limit, branch_row, |b| {
            b.id.clone()
        })?))
    }

    /// How many branches database `database_id` has, its default branch included.
    pub fn branch_count(&self, database_id: &str) -> Result<i64, StoreError> {
        let conn = self.conn();
        Ok(conn.query_row(
            "SELECT count(*) FROM branches WHERE database_id = ?1",
            [database_id],
            |row| row.get(0),
        )?)
    }

    /// Every branch of database `database_id`, in creation order.
    pub fn branches_of(&self, database_id: &str) -> Result<Vec<Branch>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {BRANCH_COLUMNS} FROM branches WHERE database_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map([database_id], branch_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// `account`'s branch `id` with its database.
    pub fn get_branch(&self, account: &AccountId, id: &str) -> Result<Option<(Branch, Database)>, StoreError> {
        let branch = {
            let conn = self.conn();
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
        let conn = self.conn();
        Ok(conn
            .query_row(
                &format!("SELECT {BRANCH_COLUMNS} FROM branches WHERE id = ?1"),
                [id],
                branch_row,
            )
            .optional()?)
    }

    /// Adds `branch` on its new `timeline`, in one transaction; [`StoreError::Conflict`] for a duplicate name.
    pub fn insert_branch(&self, branch: &Branch, timeline: &TimelineRow) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        insert_timeline(&tx, &branch.database_id, timeline)?;
        insert_branch(&tx, branch)?;
        tx.commit()?;
        Ok(())
    }

    /// Renames branch `id`; [`StoreError::Conflict`] for a duplicate name.
    pub fn rename_branch(&self, id: &str, name: &str) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute("UPDATE branches SET name = ?2 WHERE id = ?1", params![id, name])
            .map_err(|e| conflict_on_unique(e, &format!("a branch named {name:?} exists in this database")))?;
        Ok(())
    }

    /// Makes branch `id` the default of its database.
    pub fn promote_branch(&self, id: &str) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute(
            "UPDATE databases SET default_branch_id = ?1
             WHERE id = (SELECT database_id FROM branches WHERE id = ?1)",
            [id],
        )?;
        Ok(())
    }

    /// Deletes branch `id` and every branch forked from it (transitively), in one transaction; returns the
    /// deleted branches. Refuses ([`StoreError::Conflict`]) if the subtree holds the database's default branch.
    pub fn delete_branch_subtree(&self, id: &str) -> Result<Vec<Branch>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut stmt = tx.prepare(&format!(
            "WITH RECURSIVE subtree(id) AS (
                 SELECT ?1 UNION SELECT b.id FROM branches b JOIN subtree s ON b.parent_branch_id = s.id
             )
             SELECT {BRANCH_COLUMNS} FROM branches WHERE id IN (SELECT id FROM subtree) ORDER BY id"
        ))?;
        let subtree = stmt.query_map([id], branch_row)?.collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
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
        }
        tx.commit()?;
        Ok(subtree)
    }
}
