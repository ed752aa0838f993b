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
//!
//! One job per file: this one holds databases and the row helpers the others share; `branches` the branches;
//! `timelines` the timeline rows and which of them the storage must still hold; `restore` the rows' change
//! of a restore.

mod branches;
mod restore;
mod suspension;
mod timelines;

use std::sync::Arc;

use crate::store::sql::{params, OptionalExtension, Row, SqlError, Transaction, TransactionBehavior};
use cambium_types::{Lsn, TenantId};
use compute::pg::ScramVerifier;

use super::labels::{filter_params, label_condition, labels_column, labels_to_sql, LabelFilter, Labels};
use super::operations::{insert_operation, Action, NewOperation, Operation};
use super::{check_quota, conflict_on_unique, has_project, new_id, now, AccountId, Page, Store, StoreError};
use branches::insert_branch;
use timelines::insert_timeline;

pub use branches::{protection_refuses, Branch, BranchInserted, BranchUpdate};
pub use restore::RestoreChange;
pub use suspension::{SuspendReason, SUSPEND_TIMEOUT_SECONDS_DEFAULT, SUSPEND_TIMEOUT_SECONDS_MAX};
pub use timelines::{LiveTimeline, TimelineRow};

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
    /// Its labels.
    pub labels: Labels,
    /// Seconds without a session after which it is suspended for idleness (0: never).
    pub suspend_timeout_seconds: u32,
    /// Why it is suspended; `None` unless its status is [`DatabaseStatus::Suspended`].
    pub suspend_reason: Option<SuspendReason>,
}

impl Database {
    /// Whether its names serve sessions: it is active, or suspended for idleness (a session wakes it). A database
    /// suspended by the API, or not made, refuses them.
    pub fn serves_sessions(&self) -> bool {
        match self.status {
            DatabaseStatus::Active => true,
            DatabaseStatus::Suspended => self.suspend_reason == Some(SuspendReason::Idle),
            DatabaseStatus::Provisioning | DatabaseStatus::Failed => false,
        }
    }
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
    /// Its labels.
    pub labels: Labels,
    /// Seconds without a session after which it is suspended for idleness (0: never).
    pub suspend_timeout_seconds: u32,
}

/// `INTEGER` column value of an LSN.
pub(crate) fn lsn_to_sql(lsn: Lsn) -> Result<i64, StoreError> {
    i64::try_from(lsn.0).map_err(|_| StoreError::Corrupt(format!("LSN {lsn} does not fit the store")))
}

fn lsn_from_sql(value: i64) -> crate::store::sql::Result<Lsn> {
    u64::try_from(value)
        .map(Lsn)
        .map_err(|_| SqlError::column(0, format!("LSN {value} is negative")))
}

fn parse_column<T: std::str::FromStr>(row: &Row<'_>, index: usize) -> crate::store::sql::Result<T> {
    let text: String = row.get(index)?;
    text.parse()
        .map_err(|_| crate::store::sql::SqlError::column(index, format!("malformed id {text:?}")))
}

const DATABASE_COLUMNS: &str = "id, project_id, account_id, name, region, status, tenant_id, default_branch_id, \
     password_verifier, created_at, labels, suspend_timeout_seconds, suspended_reason";

/// A database row, its `status` and `suspended_reason` columns still to be read by [`finish_database`].
type RawDatabase = (Database, (String, Option<String>));

fn database_row(row: &Row<'_>) -> crate::store::sql::Result<RawDatabase> {
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
            labels: labels_column(row, 10)?,
            suspend_timeout_seconds: row.get(11)?,
            suspend_reason: None,
        },
        (status, row.get(12)?),
    ))
}

/// A `password_verifier` column: PostgreSQL's text form of a SCRAM-SHA-256 verifier.
fn verifier_column(row: &Row<'_>, index: usize) -> crate::store::sql::Result<ScramVerifier> {
    let text: String = row.get(index)?;
    ScramVerifier::parse(&text).map_err(|error| crate::store::sql::SqlError::column(index, Box::new(error)))
}

fn finish_database((mut database, (status, reason)): RawDatabase) -> Result<Database, StoreError> {
    database.status = DatabaseStatus::parse(&status)?;
    database.suspend_reason = SuspendReason::of_row(database.status, reason.as_deref())?;
    Ok(database)
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
    // Creations' events still held (their confirmation failed) are due now: those branches were made.
    let (_, at) = now();
    tx.execute(
        "UPDATE webhook_deliveries SET next_attempt_at = ?2, updated_at = ?2, held_for_timeline = NULL
         WHERE held_for_timeline IN (SELECT timeline_id FROM timelines WHERE database_id = ?1)",
        params![id, at],
    )?;
    tx.execute("DELETE FROM branches WHERE database_id = ?1", [id])?;
    tx.execute("DELETE FROM timelines WHERE database_id = ?1", [id])?;
    tx.execute("DELETE FROM timeline_safekeepers WHERE database_id = ?1", [id])?;
    tx.execute("DELETE FROM databases WHERE id = ?1", [id])?;
    Ok(())
}

/// Up to `limit` rows after `after` from `sql`, which selects with `?1` = scope, `?2` = after, `?3` = limit, and
/// `?4`, `?5` the label filter of [`label_condition`].
#[allow(clippy::too_many_arguments)] // the query's parameters, its row reader and its cursor, each needed
fn page<T>(
    tx: &crate::store::sql::Connection,
    sql: &str,
    scope: &str,
    after: Option<&str>,
    limit: usize,
    filter: Option<&LabelFilter>,
    row: impl FnMut(&Row<'_>) -> crate::store::sql::Result<T>,
    id: impl Fn(&T) -> String,
) -> Result<Page<T>, StoreError> {
    assert!(limit > 0, "limit {limit}");
    let mut stmt = tx.prepare(sql)?;
    // One extra row says whether another page follows.
    let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
    let (key, value) = filter_params(filter);
    let items = stmt
        .query_map(params![scope, after.unwrap_or(""), fetch, key, value], row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page::from_one_extra(items, limit, id))
}

impl Store {
    /// Creates a database with its default branch, root timeline and `create_database` operation, in one
    /// transaction. `None` if `account` has no such project; [`StoreError::Conflict`] for a duplicate name;
    /// [`StoreError::QuotaExceeded`] if the account has `databases_max` already.
    pub fn create_database(
        &self,
        account: &AccountId,
        new: &NewDatabase,
        databases_max: u32,
    ) -> Result<Option<CreatedDatabase>, StoreError> {
        let (ms, created_at) = now();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !has_project(&tx, account, &new.project_id)? {
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
            labels: new.labels.clone(),
            suspend_timeout_seconds: new.suspend_timeout_seconds,
            suspend_reason: None,
        };
        let branch = Branch {
            id: database.default_branch_id.clone(),
            database_id: database.id.clone(),
            name: new.branch_name.clone(),
            parent_branch_id: None,
            parent_lsn: None,
            timeline_id: new.timeline.timeline_id,
            created_at,
            protected: false,
            expires_at: None,
            labels: Labels::new(),
        };
        tx.execute(
            &format!(
                "INSERT INTO databases ({DATABASE_COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, NULL)"
            ),
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
                database.created_at,
                labels_to_sql(&database.labels),
                database.suspend_timeout_seconds
            ],
        )
        .map_err(|e| conflict_on_unique(e, &format!("a database named {:?} exists in this project", new.name)))?;
        // Placed on the host that creates it (the API sends a creation to the live host with the fewest
        // databases: `http::forward`).
        tx.execute(
            "UPDATE databases SET compute_host = ?2 WHERE id = ?1",
            params![database.id, self.owner],
        )?;
        insert_timeline(&tx, &database.id, &new.timeline)?;
        insert_branch(&tx, &branch)?;
        let operation = insert_operation(
            &tx,
            &NewOperation {
                project_id: &database.project_id,
                account_id: account,
                database_id: Some(&database.id),
                branch_id: Some(&branch.id),
                action: &Action::CreateDatabase,
            },
            &self.new_lease(),
        )?;
        tx.commit()?;
        Ok(Some(CreatedDatabase {
            database,
            branch,
            operation,
        }))
    }

    /// Up to `limit` databases of `account`'s project `project_id` after `after` (and labels matching `filter`, if
    /// given), in creation order; `None` if there is no such project.
    pub fn list_databases(
        &self,
        account: &AccountId,
        project_id: &str,
        after: Option<&str>,
        limit: usize,
        filter: Option<&LabelFilter>,
    ) -> Result<Option<Page<Database>>, StoreError> {
        let conn = self.conn()?;
        if !has_project(&conn, account, project_id)? {
            return Ok(None);
        }
        let sql = format!(
            "SELECT {DATABASE_COLUMNS} FROM databases
             WHERE project_id = ?1 AND id > ?2 AND {} ORDER BY id LIMIT ?3",
            label_condition(conn.dialect())
        );
        let raw = page(&conn, &sql, project_id, after, limit, filter, database_row, |(d, _)| {
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
        let conn = self.conn()?;
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
        let conn = self.conn()?;
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
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!("SELECT {DATABASE_COLUMNS} FROM databases ORDER BY id"))?;
        let rows = stmt.query_map([], database_row)?;
        rows.map(|row| finish_database(row?)).collect()
    }

    /// Renames `account`'s database `id`; `None` if there is no such database.
    pub fn rename_database(&self, account: &AccountId, id: &str, name: &str) -> Result<Option<Database>, StoreError> {
        {
            let conn = self.conn()?;
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
        let conn = self.conn()?;
        let changed = conn.execute(
            "UPDATE databases SET password_verifier = ?2 WHERE id = ?1",
            params![id, verifier.to_string()],
        )?;
        Ok(changed == 1)
    }

    /// Sets database `id`'s status; returns whether it exists. `Suspended` here is a suspension by the API
    /// ([`SuspendReason::Api`]); any other status clears the reason.
    pub fn set_database_status(&self, id: &str, status: DatabaseStatus) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        let reason = (status == DatabaseStatus::Suspended).then_some(SuspendReason::Api.as_str());
        let changed = conn.execute(
            "UPDATE databases SET status = ?2, suspended_reason = ?3 WHERE id = ?1",
            params![id, status.as_str(), reason],
        )?;
        Ok(changed == 1)
    }

    /// Deletes `account`'s database `id` with its branches and timelines, in one transaction; returns it (its
    /// storage is the caller's to delete), or `None` if there is no such database.
    pub fn delete_database(&self, account: &AccountId, id: &str) -> Result<Option<Database>, StoreError> {
        let mut conn = self.conn()?;
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
}
