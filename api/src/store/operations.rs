//! Operations: asynchronous work and its outcome.
//!
//! **Invariant:** an operation moves only from `running` to `finished` or `failed`, once
//! ([`Store::finish_operation`] changes only a running one); a failed one carries its `error`.

use rusqlite::{params, OptionalExtension, Row, Transaction};

use super::{new_id, now, AccountId, Page, Store, StoreError};

/// Where an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationStatus {
    /// In progress.
    Running,
    /// Completed (terminal).
    Finished,
    /// Did not complete (terminal); see the `error`.
    Failed,
}

impl OperationStatus {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationStatus::Running => "running",
            OperationStatus::Finished => "finished",
            OperationStatus::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Result<OperationStatus, StoreError> {
        Ok(match text {
            "running" => OperationStatus::Running,
            "finished" => OperationStatus::Finished,
            "failed" => OperationStatus::Failed,
            other => return Err(StoreError::Corrupt(format!("operation status {other:?}"))),
        })
    }
}

/// An operation row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// `op_<ULID>`.
    pub id: String,
    /// The owning project.
    pub project_id: String,
    /// The owning account.
    pub account_id: AccountId,
    /// The database it works on.
    pub database_id: Option<String>,
    /// The branch it works on.
    pub branch_id: Option<String>,
    /// `create_database` or `restore_branch`.
    pub action: String,
    /// Where it is.
    pub status: OperationStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// The work's parameters, JSON, fixed when it was created so a resumed run does the same work.
    pub params: String,
    /// ISO 8601 UTC.
    pub created_at: String,
    /// ISO 8601 UTC: the last status change.
    pub updated_at: String,
}

/// The fields of a new operation.
#[derive(Debug, Clone, Copy)]
pub struct NewOperation<'a> {
    /// The owning project.
    pub project_id: &'a str,
    /// The owning account.
    pub account_id: &'a AccountId,
    /// The database it works on.
    pub database_id: Option<&'a str>,
    /// The branch it works on.
    pub branch_id: Option<&'a str>,
    /// Its action.
    pub action: &'a str,
    /// Its parameters, JSON.
    pub params: &'a str,
}

const COLUMNS: &str =
    "id, project_id, account_id, database_id, branch_id, action, status, error, params, created_at, updated_at";

fn operation_row(row: &Row<'_>) -> rusqlite::Result<(Operation, String)> {
    Ok((
        Operation {
            id: row.get(0)?,
            project_id: row.get(1)?,
            account_id: AccountId(row.get(2)?),
            database_id: row.get(3)?,
            branch_id: row.get(4)?,
            action: row.get(5)?,
            status: OperationStatus::Running,
            error: row.get(7)?,
            params: row.get(8)?,
            created_at: row.get(9)?,
            updated_at: row.get(10)?,
        },
        row.get(6)?,
    ))
}

fn finish_row((mut operation, status): (Operation, String)) -> Result<Operation, StoreError> {
    operation.status = OperationStatus::parse(&status)?;
    Ok(operation)
}

/// Inserts a `running` operation inside `tx`.
pub(crate) fn insert_operation(tx: &Transaction<'_>, new: &NewOperation<'_>) -> Result<Operation, StoreError> {
    let (ms, created_at) = now();
    let operation = Operation {
        id: new_id("op_", ms),
        project_id: new.project_id.to_owned(),
        account_id: new.account_id.clone(),
        database_id: new.database_id.map(str::to_owned),
        branch_id: new.branch_id.map(str::to_owned),
        action: new.action.to_owned(),
        status: OperationStatus::Running,
        error: None,
        params: new.params.to_owned(),
        updated_at: created_at.clone(),
        created_at,
    };
    tx.execute(
        &format!("INSERT INTO operations ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
        params![
            operation.id,
            operation.project_id,
            operation.account_id.0,
            operation.database_id,
            operation.branch_id,
            operation.action,
            operation.status.as_str(),
            operation.error,
            operation.params,
            operation.created_at,
            operation.updated_at
        ],
    )?;
    Ok(operation)
}

impl Store {
    /// Creates a `running` operation, unless one is already running on the same branch (then
    /// [`StoreError::Conflict`]): one transaction, so two concurrent requests cannot both start one.
    pub fn start_operation(&self, new: &NewOperation<'_>) -> Result<Operation, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if let Some(branch_id) = new.branch_id {
            let running = tx
                .query_row(
                    "SELECT id FROM operations WHERE branch_id = ?1 AND status = 'running'",
                    [branch_id],
                    |row| row.get::<_, String>(0),
                )
                .optional()?;
            if let Some(running) = running {
                return Err(StoreError::Conflict(format!(
                    "operation {running} is running on this branch"
                )));
            }
        }
        let operation = insert_operation(&tx, new)?;
        tx.commit()?;
        Ok(operation)
    }

    /// `account`'s operation `id`.
    pub fn get_operation(&self, account: &AccountId, id: &str) -> Result<Option<Operation>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM operations WHERE account_id = ?1 AND id = ?2"),
                params![account.0, id],
                operation_row,
            )
            .optional()?;
        row.map(finish_row).transpose()
    }

    /// Up to `limit` operations of `account`'s project `project_id`, newest first, older than `before`; `None`
    /// if there is no such project.
    pub fn list_operations(
        &self,
        account: &AccountId,
        project_id: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Option<Page<Operation>>, StoreError> {
        assert!(limit > 0, "limit {limit}");
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
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM operations WHERE project_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
        ))?;
        // One extra row says whether another page follows; `~` sorts after every id character.
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let mut items = stmt
            .query_map(params![project_id, before.unwrap_or("~"), fetch], operation_row)?
            .map(|row| finish_row(row?))
            .collect::<Result<Vec<_>, _>>()?;
        let next_after = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|o| o.id.clone())
        } else {
            None
        };
        Ok(Some(Page { items, next_after }))
    }

    /// Operation `id`, whoever owns it.
    pub fn operation(&self, id: &str) -> Result<Option<Operation>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM operations WHERE id = ?1"),
                [id],
                operation_row,
            )
            .optional()?;
        row.map(finish_row).transpose()
    }

    /// Every running operation, oldest first (to resume after a restart).
    pub fn running_operations(&self) -> Result<Vec<Operation>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM operations WHERE status = 'running' ORDER BY id"
        ))?;
        let rows = stmt.query_map([], operation_row)?;
        rows.map(|row| finish_row(row?)).collect()
    }

    /// A running operation on database `database_id`, if any.
    pub fn running_operation_on_database(&self, database_id: &str) -> Result<Option<String>, StoreError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT id FROM operations WHERE database_id = ?1 AND status = 'running' LIMIT 1",
                [database_id],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// How many `action` operations run on database `database_id`.
    pub fn running_operations_on_database(&self, database_id: &str, action: &str) -> Result<i64, StoreError> {
        let conn = self.conn();
        Ok(conn.query_row(
            "SELECT count(*) FROM operations WHERE database_id = ?1 AND action = ?2 AND status = 'running'",
            params![database_id, action],
            |row| row.get(0),
        )?)
    }

    /// Ends running operation `id`: `finished` on `Ok`, `failed` with the message on `Err`. Returns whether it
    /// was running (a terminal operation never changes).
    pub fn finish_operation(&self, id: &str, outcome: Result<(), String>) -> Result<bool, StoreError> {
        let (_, updated_at) = now();
        let (status, error) = match outcome {
            Ok(()) => (OperationStatus::Finished, None),
            Err(error) => (OperationStatus::Failed, Some(error)),
        };
        let conn = self.conn();
        let changed = conn.execute(
            "UPDATE operations SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1 AND status = 'running'",
            params![id, status.as_str(), error, updated_at],
        )?;
        Ok(changed == 1)
    }
}
