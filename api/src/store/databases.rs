//! Databases, their branches, and the timelines behind the branches.
//!
//! **Invariants** (each change below is one transaction, so they hold between transactions):
//! - A database has exactly one default branch (`databases.default_branch_id`), and it exists.
//! - Every branch points at a timeline row of its database. Branch names are unique within a database.
//! - A timeline row exists for every timeline of the database that may still be on the pageserver: a row
//!   goes only after the pageserver deleted the timeline (see [`Store::unreferenced_timelines`]).
//! - A database row is visible only through its `account_id`, like a project.
//! - A database's password is never stored: only its SCRAM-SHA-256 verifier (PostgreSQL's text form), which can
//!   check a password but not give it back.

use std::sync::Arc;

use cambium_types::{Lsn, TenantId, TimelineId};
use compute::pg::ScramVerifier;
use rusqlite::{params, OptionalExtension, Row, Transaction, TransactionBehavior};

use super::operations::{insert_operation, NewOperation, Operation};
use super::{check_quota, conflict_on_unique, new_id, now, AccountId, Page, Store, StoreError};

/// Where a database is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseStatus {
    /// Its `create_database` operation is running.
    Provisioning,
    /// Its compute serves it.
    Active,
    /// Its compute is stopped; the data is kept.
    Suspended,
    /// Its `create_database` operation failed; it can only be deleted.
    Failed,
}

impl DatabaseStatus {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DatabaseStatus::Provisioning => "provisioning",
            DatabaseStatus::Active => "active",
            DatabaseStatus::Suspended => "suspended",
            DatabaseStatus::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Result<DatabaseStatus, StoreError> {
        Ok(match text {
            "provisioning" => DatabaseStatus::Provisioning,
            "active" => DatabaseStatus::Active,
            "suspended" => DatabaseStatus::Suspended,
            "failed" => DatabaseStatus::Failed,
            other => return Err(StoreError::Corrupt(format!("database status {other:?}"))),
        })
    }
}

/// A database row: a tenant on the pageserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    /// `db_<ULID>`.
    pub id: String,
    /// The owning project.
    pub project_id: String,
    /// The owning account.
    pub account_id: AccountId,
    /// Unique within the project.
    pub name: String,
    /// Region code of its compute.
    pub region: String,
    /// Where it is in its life.
    pub status: DatabaseStatus,
    /// Its tenant on the pageserver.
    pub tenant_id: TenantId,
    /// The branch `db_…` connections get.
    pub default_branch_id: String,
    /// The SCRAM-SHA-256 verifier of the password of its connection strings (the password itself is never kept).
    pub password_verifier: Arc<ScramVerifier>,
    /// ISO 8601 UTC.
    pub created_at: String,
}

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

/// A timeline row: one timeline of a database on the pageserver and the safekeepers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineRow {
    /// The timeline.
    pub timeline_id: TimelineId,
    /// The timeline it was branched from; `None` for a root.
    pub ancestor_timeline_id: Option<TimelineId>,
    /// The branch point (or a root's WAL start): its history at and below this LSN is the ancestor's.
    pub start_lsn: Lsn,
}

/// What [`Store::create_database`] made.
#[derive(Debug, Clone)]
pub struct CreatedDatabase {
    /// The database, `provisioning`.
    pub database: Database,
    /// Its default branch.
    pub branch: Branch,
    /// The `create_database` operation, `running`.
    pub operation: Operation,
}

/// The fields of a new database.
#[derive(Debug, Clone)]
pub struct NewDatabase {
    /// The owning project.
    pub project_id: String,
    /// Its name.
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The root timeline of its default branch.
    pub timeline: TimelineRow,
    /// The default branch's name.
    pub branch_name: String,
    /// The SCRAM-SHA-256 verifier of its password.
    pub password_verifier: Arc<ScramVerifier>,
}

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
}

/// A timeline the storage must hold (see [`Store::live_timelines`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTimeline {
    /// Its database.
    pub database_id: String,
    /// Its database's tenant.
    pub tenant_id: TenantId,
    /// The timeline.
    pub timeline_id: TimelineId,
}

/// A timeline row `t` that something still needs: a branch is on it or a timeline is branched from it.
const LIVE_CONDITION: &str = "EXISTS (SELECT 1 FROM branches b WHERE b.timeline_id = t.timeline_id)
    OR EXISTS (SELECT 1 FROM timelines c WHERE c.ancestor_timeline_id = t.timeline_id)";

/// `INTEGER` column value of an LSN.
pub(crate) fn lsn_to_sql(lsn: Lsn) -> Result<i64, StoreError> {
    i64::try_from(lsn.0).map_err(|_| StoreError::Corrupt(format!("LSN {lsn} does not fit the store")))
}

fn lsn_from_sql(value: i64) -> rusqlite::Result<Lsn> {
    u64::try_from(value)
        .map(Lsn)
        .map_err(|_| rusqlite::Error::IntegralValueOutOfRange(0, value))
}

fn parse_column<T: std::str::FromStr>(row: &Row<'_>, index: usize) -> rusqlite::Result<T> {
    let text: String = row.get(index)?;
    text.parse().map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Text,
            format!("malformed id {text:?}").into(),
        )
    })
}

const DATABASE_COLUMNS: &str =
    "id, project_id, account_id, name, region, status, tenant_id, default_branch_id, password_verifier, created_at";
const BRANCH_COLUMNS: &str = "id, database_id, name, parent_branch_id, parent_lsn, timeline_id, created_at";

fn database_row(row: &Row<'_>) -> rusqlite::Result<(Database, String)> {
    let status: String = row.get(5)?;
    Ok((
        Database {
            id: row.get(0)?,
            project_id: row.get(1)?,
            account_id: AccountId(row.get(2)?),
            name: row.get(3)?,
            region: row.get(4)?,
            status: DatabaseStatus::Provisioning,
            tenant_id: parse_column(row, 6)?,
            default_branch_id: row.get(7)?,
            password_verifier: Arc::new(verifier_column(row, 8)?),
            created_at: row.get(9)?,
        },
        status,
    ))
}

/// A `password_verifier` column: PostgreSQL's text form of a SCRAM-SHA-256 verifier.
fn verifier_column(row: &Row<'_>, index: usize) -> rusqlite::Result<ScramVerifier> {
    let text: String = row.get(index)?;
    ScramVerifier::parse(&text)
        .map_err(|error| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(error)))
}

fn finish_database((mut database, status): (Database, String)) -> Result<Database, StoreError> {
    database.status = DatabaseStatus::parse(&status)?;
    Ok(database)
}

fn branch_row(row: &Row<'_>) -> rusqlite::Result<Branch> {
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

fn timeline_row(row: &Row<'_>) -> rusqlite::Result<TimelineRow> {
    let ancestor: Option<String> = row.get(1)?;
    Ok(TimelineRow {
        timeline_id: parse_column(row, 0)?,
        ancestor_timeline_id: match ancestor {
            Some(_) => Some(parse_column(row, 1)?),
            None => None,
        },
        start_lsn: lsn_from_sql(row.get(2)?)?,
    })
}

/// The databases of project `project_id`.
pub(crate) fn databases_of_project(tx: &Transaction<'_>, project_id: &str) -> Result<Vec<Database>, StoreError> {
    let mut stmt = tx.prepare(&format!(
        "SELECT {DATABASE_COLUMNS} FROM databases WHERE project_id = ?1 ORDER BY id"
    ))?;
    let rows = stmt.query_map([project_id], database_row)?;
    rows.map(|row| finish_database(row?)).collect()
}

/// Deletes every row of database `id` but its operations.
pub(crate) fn delete_database_rows(tx: &Transaction<'_>, id: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM branches WHERE database_id = ?1", [id])?;
    tx.execute("DELETE FROM timelines WHERE database_id = ?1", [id])?;
    tx.execute("DELETE FROM databases WHERE id = ?1", [id])?;
    Ok(())
}

fn insert_timeline(tx: &Transaction<'_>, database_id: &str, timeline: &TimelineRow) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO timelines (timeline_id, database_id, ancestor_timeline_id, start_lsn) VALUES (?1, ?2, ?3, ?4)",
        params![
            timeline.timeline_id.to_string(),
            database_id,
            timeline.ancestor_timeline_id.map(|t| t.to_string()),
            lsn_to_sql(timeline.start_lsn)?
        ],
    )?;
    Ok(())
}

fn insert_branch(tx: &Transaction<'_>, branch: &Branch) -> Result<(), StoreError> {
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

/// Up to `limit` rows after `after` from `sql`, which selects with `?1` = scope, `?2` = after, `?3` = limit.
fn page<T>(
    tx: &rusqlite::Connection,
    sql: &str,
    scope: &str,
    after: Option<&str>,
    limit: usize,
    row: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    id: impl Fn(&T) -> String,
) -> Result<Page<T>, StoreError> {
    assert!(limit > 0, "limit {limit}");
    let mut stmt = tx.prepare(sql)?;
    // One extra row says whether another page follows.
    let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
    let mut items = stmt
        .query_map(params![scope, after.unwrap_or(""), fetch], row)?
        .collect::<Result<Vec<_>, _>>()?;
    let next_after = if items.len() > limit {
        items.truncate(limit);
        items.last().map(id)
    } else {
        None
    };
    Ok(Page { items, next_after })
}

impl Store {
    /// Creates a database with its default branch, root timeline and `create_database` operation, in one
    /// transaction. `None` if `account` has no such project; [`StoreError::Conflict`] for a duplicate name;
    /// [`StoreError::QuotaExceeded`] if the account has `databases_max` already.
    pub fn create_database(
        &self,
        account: &AccountId,
        new: &NewDatabase,
        operation_params: &str,
        databases_max: u32,
    ) -> Result<Option<CreatedDatabase>, StoreError> {
        let (ms, created_at) = now();
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let project = tx
            .query_row(
                "SELECT 1 FROM projects WHERE account_id = ?1 AND id = ?2",
                params![account.0, new.project_id],
                |_| Ok(()),
            )
            .optional()?;
        if project.is_none() {
            return Ok(None);
        }
        let count: i64 = tx.query_row(
            "SELECT count(*) FROM databases WHERE account_id = ?1",
            [&account.0],
            |row| row.get(0),
        )?;
        check_quota(count, databases_max, "databases", "the account")?;
        let database = Database {
            id: new_id("db_", ms),
            project_id: new.project_id.clone(),
            account_id: account.clone(),
            name: new.name.clone(),
            region: new.region.clone(),
            status: DatabaseStatus::Provisioning,
            tenant_id: new.tenant_id,
            default_branch_id: new_id("br_", ms),
            password_verifier: Arc::clone(&new.password_verifier),
            created_at: created_at.clone(),
        };
        let branch = Branch {
            id: database.default_branch_id.clone(),
            database_id: database.id.clone(),
            name: new.branch_name.clone(),
            parent_branch_id: None,
            parent_lsn: None,
            timeline_id: new.timeline.timeline_id,
            created_at,
        };
        tx.execute(
            &format!("INSERT INTO databases ({DATABASE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
            params![
                database.id,
                database.project_id,
                account.0,
                database.name,
                database.region,
                database.status.as_str(),
                database.tenant_id.to_string(),
                database.default_branch_id,
                database.password_verifier.to_string(),
                database.created_at
            ],
        )
        .map_err(|e| conflict_on_unique(e, &format!("a database named {:?} exists in this project", new.name)))?;
        insert_timeline(&tx, &database.id, &new.timeline)?;
        insert_branch(&tx, &branch)?;
        let operation = insert_operation(
            &tx,
            &NewOperation {
                project_id: &database.project_id,
                account_id: account,
                database_id: Some(&database.id),
                branch_id: Some(&branch.id),
                action: "create_database",
                params: operation_params,
            },
        )?;
        tx.commit()?;
        Ok(Some(CreatedDatabase {
            database,
            branch,
            operation,
        }))
    }

    /// Up to `limit` databases of `account`'s project `project_id` after `after`, in creation order; `None` if
    /// there is no such project.
    pub fn list_databases(
        &self,
        account: &AccountId,
        project_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Option<Page<Database>>, StoreError> {
        let conn = self.conn();
        let project = conn
            .query_row(
                "SELECT 1 FROM projects WHERE account_id = ?1 AND id = ?2",
                params![account.0, project_id],
                |_| Ok(()),
            )
            .optional()?;
        if project.is_none() {
            return Ok(None);
        }
        let sql =
            format!("SELECT {DATABASE_COLUMNS} FROM databases WHERE project_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3");
        let raw = page(&conn, &sql, project_id, after, limit, database_row, |(d, _)| {
            d.id.clone()
        })?;
        let items = raw.items.into_iter().map(finish_database).collect::<Result<_, _>>()?;
        Ok(Some(Page {
            items,
            next_after: raw.next_after,
        }))
    }

    /// `account`'s database `id`.
    pub fn get_database(&self, account: &AccountId, id: &str) -> Result<Option<Database>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                &format!("SELECT {DATABASE_COLUMNS} FROM databases WHERE account_id = ?1 AND id = ?2"),
                params![account.0, id],
                database_row,
            )
            .optional()?;
        row.map(finish_database).transpose()
    }

    /// Database `id`, whoever owns it (for the control plane's own work).
    pub fn database(&self, id: &str) -> Result<Option<Database>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                &format!("SELECT {DATABASE_COLUMNS} FROM databases WHERE id = ?1"),
                [id],
                database_row,
            )
            .optional()?;
        row.map(finish_database).transpose()
    }

    /// Every database, in creation order (for starting computes and reconciling storage).
    pub fn all_databases(&self) -> Result<Vec<Database>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("SELECT {DATABASE_COLUMNS} FROM databases ORDER BY id"))?;
        let rows = stmt.query_map([], database_row)?;
        rows.map(|row| finish_database(row?)).collect()
    }

    /// Renames `account`'s database `id`; `None` if there is no such database.
    pub fn rename_database(&self, account: &AccountId, id: &str, name: &str) -> Result<Option<Database>, StoreError> {
        {
            let conn = self.conn();
            conn.execute(
                "UPDATE databases SET name = ?3 WHERE account_id = ?1 AND id = ?2",
                params![account.0, id, name],
            )
            .map_err(|e| conflict_on_unique(e, &format!("a database named {name:?} exists in this project")))?;
        }
        self.get_database(account, id)
    }

    /// Replaces database `id`'s password verifier; returns whether it exists.
    pub fn set_password_verifier(&self, id: &str, verifier: &ScramVerifier) -> Result<bool, StoreError> {
        let conn = self.conn();
        let changed = conn.execute(
            "UPDATE databases SET password_verifier = ?2 WHERE id = ?1",
            params![id, verifier.to_string()],
        )?;
        Ok(changed == 1)
    }

    /// Sets database `id`'s status; returns whether it exists.
    pub fn set_database_status(&self, id: &str, status: DatabaseStatus) -> Result<bool, StoreError> {
        let conn = self.conn();
        let changed = conn.execute(
            "UPDATE databases SET status = ?2 WHERE id = ?1",
            params![id, status.as_str()],
        )?;
        Ok(changed == 1)
    }

    /// Deletes `account`'s database `id` with its branches and timelines, in one transaction; returns it (its
    /// storage is the caller's to delete), or `None` if there is no such database.
    pub fn delete_database(&self, account: &AccountId, id: &str) -> Result<Option<Database>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row = tx
            .query_row(
                &format!("SELECT {DATABASE_COLUMNS} FROM databases WHERE account_id = ?1 AND id = ?2"),
                params![account.0, id],
                database_row,
            )
            .optional()?;
        let Some(database) = row.map(finish_database).transpose()? else {
            return Ok(None);
        };
        delete_database_rows(&tx, id)?;
        tx.commit()?;
        Ok(Some(database))
    }

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

    /// The timeline rows of database `database_id`.
    pub fn timelines_of(&self, database_id: &str) -> Result<Vec<TimelineRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT timeline_id, ancestor_timeline_id, start_lsn FROM timelines WHERE database_id = ?1 ORDER BY rowid",
        )?;
        let rows = stmt.query_map([database_id], timeline_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
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

    /// The timelines of database `database_id` that no branch is on and no timeline is branched from: safe to
    /// delete from the pageserver, children first (call again after deleting to get their ancestors).
    pub fn unreferenced_timelines(&self, database_id: &str) -> Result<Vec<TimelineId>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT timeline_id FROM timelines t WHERE database_id = ?1
               AND NOT EXISTS (SELECT 1 FROM branches b WHERE b.timeline_id = t.timeline_id)
               AND NOT EXISTS (SELECT 1 FROM timelines c WHERE c.ancestor_timeline_id = t.timeline_id)
             ORDER BY rowid",
        )?;
        let rows = stmt.query_map([database_id], |row| parse_column(row, 0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every timeline the storage must hold for a served database (`active` or `suspended`; not one being made
    /// or whose creation failed): those a branch is on or another timeline is branched from (an unreferenced one
    /// is a deletion not finished yet). In database order, then creation order.
    pub fn live_timelines(&self) -> Result<Vec<LiveTimeline>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT d.id, d.tenant_id, t.timeline_id FROM timelines t JOIN databases d ON d.id = t.database_id
             WHERE d.status IN ('active', 'suspended') AND ({LIVE_CONDITION})
             ORDER BY d.id, t.rowid"
        ))?;
        let rows = stmt.query_map([], |row| {
            Ok(LiveTimeline {
                database_id: row.get(0)?,
                tenant_id: parse_column(row, 1)?,
                timeline_id: parse_column(row, 2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether timeline `id` is still one [`Store::live_timelines`] would list.
    pub fn is_live_timeline(&self, id: TimelineId) -> Result<bool, StoreError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                &format!(
                    "SELECT 1 FROM timelines t JOIN databases d ON d.id = t.database_id
                     WHERE t.timeline_id = ?1 AND d.status IN ('active', 'suspended') AND ({LIVE_CONDITION})"
                ),
                [id.to_string()],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Forgets timeline `id` (the pageserver deleted it).
    pub fn remove_timeline(&self, id: TimelineId) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute("DELETE FROM timelines WHERE timeline_id = ?1", [id.to_string()])?;
        Ok(())
    }

    /// Moves a branch onto its restored timeline and, if asked, keeps its old timeline as a new branch that takes
    /// over its children; one transaction. Returns the preserved branch, or `None` if it was not preserved or the
    /// change was applied before (a retried operation: the branch is already on the new timeline).
    pub fn apply_restore(&self, change: &RestoreChange) -> Result<Option<Branch>, StoreError> {
        let mut conn = self.conn();
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
