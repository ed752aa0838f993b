//! Operations: asynchronous work and its outcome.
//!
//! **Invariant:** an operation moves only from `running` to `finished` or `failed`, once
//! ([`Store::finish_operation`] changes only a running one); a failed one carries its `error`.
//!
//! What an operation does is an [`Action`] with typed parameters, fixed when it is created. A row keeps it in
//! two columns, as rows always have: `action`, the action's name (`create_database`, `restore_branch`), and
//! `params`, its parameters as a JSON object (`{}` for a creation; the ids, the LSN and the names of a
//! restore, ids as 32 lowercase hex digits and the LSN as `X/Y`). [`Action`] writes exactly that text and
//! reads it back ([`Operation::work`]), so rows written before the type existed run as they are and no
//! migration was needed; a row whose action or parameters cannot be read fails its operation with
//! [`ActionError`], never the listing or the resume that reads it.

use crate::store::sql::{params, OptionalExtension, Row, Transaction};
use cambium_types::{Lsn, TimelineId};
use serde::{Deserialize, Serialize};

use super::leases::Lease;
use super::{has_project, new_id, now, AccountId, Page, Store, StoreError};

/// What an operation does, with the parameters fixed when it was created (so a run resumed after a crash does
/// the same work).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `create_database`: the database's storage, then its compute, a SQL check, then `active`. The database
    /// and its root timeline are the operation's database and its row's; no parameters.
    CreateDatabase,
    /// `restore_branch`: the branch moved to a new timeline at a point of its history.
    RestoreBranch(RestoreParams),
    /// `reset_branch`: the branch moved to a new timeline at its parent's latest state (the parameters are a
    /// restore's, the source being the parent's timeline); its `parent_lsn` becomes that point.
    ResetBranch(RestoreParams),
    /// `delete_branch`: the expiry sweep deleting a branch whose `expires_at` has passed.
    DeleteBranch(DeleteBranchParams),
    /// `suspend_database`: the idle sweep suspended the database (no session for its timeout). Recorded
    /// `finished` with the change it reports, so never run by the worker.
    SuspendDatabase(DatabaseStateParams),
    /// `resume_database`: a session woke a database suspended for idleness. Recorded `finished`, like
    /// [`Action::SuspendDatabase`].
    ResumeDatabase(DatabaseStateParams),
    /// `move_pageserver`: the database's tenant moved to another pageserver (an admin's operation; issue 17
    /// item 2, `control::pageserver_move`).
    MovePageserver(MovePageserverParams),
    /// `failover_pageserver`: the database's tenant re-placed on a live pageserver after its own was lost (started
    /// by the loss probe; issue 17 item 5, `control::pageserver_loss`). The parameters are a move's: `from` the
    /// column as read (the lost pageserver), `to` the live one chosen.
    FailoverPageserver(MovePageserverParams),
}

/// The parameters of a `move_pageserver` operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MovePageserverParams {
    /// The database's `pageserver` column when the move was asked (`None`: `NULL`, the first configured one):
    /// the switch is conditional on it.
    pub from: Option<String>,
    /// The pageserver it moves to (its address, as configured).
    pub to: String,
}

/// The parameters of a `suspend_database` or `resume_database` operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseStateParams {
    /// Why, for people: how long it was idle, or what woke it.
    pub reason: String,
}

/// The parameters of a `delete_branch` operation (the expiry sweep's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteBranchParams {
    /// The branch to delete.
    pub branch_id: String,
    /// Its `expires_at` when the sweep found it expired: a branch whose expiry changed since is not deleted.
    pub expires_at: String,
}

/// The parameters of a `restore_branch` operation. Serialized as the JSON object its rows have always held
/// (the field order and spelling are the format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreParams {
    /// The restored branch.
    pub branch_id: String,
    /// The timeline the branch is on before the restore.
    pub old_timeline_id: TimelineId,
    /// The timeline that holds the restore point (the branch's, or an ancestor's).
    pub source_timeline_id: TimelineId,
    /// The restore point, on `source_timeline_id`.
    pub target_lsn: Lsn,
    /// The branch's new timeline, branched from `source_timeline_id` at `target_lsn` (chosen up front, so a
    /// resumed run makes the same one).
    pub new_timeline_id: TimelineId,
    /// The name of the branch that keeps the state before the restore; `None` keeps none.
    pub preserved_name: Option<String>,
    /// That branch's id (chosen up front, like the timeline).
    pub preserved_id: String,
}

/// Why an operation row's action could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// No action has this name.
    #[error("unknown action {0:?}")]
    Unknown(String),
    /// The parameters are not the action's.
    #[error("malformed parameters: {0}")]
    Params(#[from] serde_json::Error),
}

impl Action {
    /// The name of [`Action::CreateDatabase`] in the `action` column and the API.
    pub const CREATE_DATABASE: &'static str = "create_database";
    /// The name of [`Action::RestoreBranch`] in the `action` column and the API.
    pub const RESTORE_BRANCH: &'static str = "restore_branch";
    /// The name of [`Action::ResetBranch`] in the `action` column and the API.
    pub const RESET_BRANCH: &'static str = "reset_branch";
    /// The name of [`Action::DeleteBranch`] in the `action` column and the API.
    pub const DELETE_BRANCH: &'static str = "delete_branch";
    /// The name of [`Action::SuspendDatabase`] in the `action` column and the API.
    pub const SUSPEND_DATABASE: &'static str = "suspend_database";
    /// The name of [`Action::ResumeDatabase`] in the `action` column and the API.
    pub const RESUME_DATABASE: &'static str = "resume_database";
    /// The name of [`Action::MovePageserver`] in the `action` column and the API.
    pub const MOVE_PAGESERVER: &'static str = "move_pageserver";
    /// The name of [`Action::FailoverPageserver`] in the `action` column and the API.
    pub const FAILOVER_PAGESERVER: &'static str = "failover_pageserver";

    /// Its name, as the `action` column and the API spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Action::CreateDatabase => Action::CREATE_DATABASE,
            Action::RestoreBranch(_) => Action::RESTORE_BRANCH,
            Action::ResetBranch(_) => Action::RESET_BRANCH,
            Action::DeleteBranch(_) => Action::DELETE_BRANCH,
            Action::SuspendDatabase(_) => Action::SUSPEND_DATABASE,
            Action::ResumeDatabase(_) => Action::RESUME_DATABASE,
            Action::MovePageserver(_) => Action::MOVE_PAGESERVER,
            Action::FailoverPageserver(_) => Action::FAILOVER_PAGESERVER,
        }
    }

    /// Its parameters as the `params` column holds them.
    pub fn params_json(&self) -> String {
        match self {
            // No parameters: an empty object.
            Action::CreateDatabase => "{}".to_owned(),
            // Serializing a struct of strings, ids and an LSN (each written as a string) cannot fail: serde_json
            // fails only on non-string map keys and on `Serialize` impls that report errors, and these have
            // neither.
            Action::RestoreBranch(params) | Action::ResetBranch(params) => {
                serde_json::to_string(params).expect("restore parameters always serialize")
            }
            // Two strings: as above.
            Action::DeleteBranch(params) => serde_json::to_string(params).expect("delete parameters always serialize"),
            // One string: as above.
            Action::SuspendDatabase(params) | Action::ResumeDatabase(params) => {
                serde_json::to_string(params).expect("suspension parameters always serialize")
            }
            // Two strings: as above.
            Action::MovePageserver(params) | Action::FailoverPageserver(params) => {
                serde_json::to_string(params).expect("move parameters always serialize")
            }
        }
    }

    /// The action a row holds: its `action` and `params` columns.
    pub fn decode(name: &str, params: &str) -> Result<Action, ActionError> {
        match name {
            Action::CREATE_DATABASE => {
                // An object, whatever it holds (the work takes nothing from it; rows hold `{}`).
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(params)?;
                Ok(Action::CreateDatabase)
            }
            Action::RESTORE_BRANCH => Ok(Action::RestoreBranch(serde_json::from_str(params)?)),
            Action::RESET_BRANCH => Ok(Action::ResetBranch(serde_json::from_str(params)?)),
            Action::DELETE_BRANCH => Ok(Action::DeleteBranch(serde_json::from_str(params)?)),
            Action::SUSPEND_DATABASE => Ok(Action::SuspendDatabase(serde_json::from_str(params)?)),
            Action::RESUME_DATABASE => Ok(Action::ResumeDatabase(serde_json::from_str(params)?)),
            Action::MOVE_PAGESERVER => Ok(Action::MovePageserver(serde_json::from_str(params)?)),
            Action::FAILOVER_PAGESERVER => Ok(Action::FailoverPageserver(serde_json::from_str(params)?)),
            other => Err(ActionError::Unknown(other.to_owned())),
        }
    }
}

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
    /// `create_database`, `restore_branch`, `reset_branch`, `delete_branch`, `suspend_database`,
    /// `resume_database`, `move_pageserver` or `failover_pageserver`: the name of its [`Action`], as the row holds
    /// it (see [`Operation::work`]).
    pub action: String,
    /// Where it is.
    pub status: OperationStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// The action's parameters, JSON, as the row holds them (see [`Operation::work`]).
    pub params: String,
    /// ISO 8601 UTC.
    pub created_at: String,
    /// ISO 8601 UTC: the last status change.
    pub updated_at: String,
}

impl Operation {
    /// What it does: its [`Action`], read from the row's `action` and `params`.
    pub fn work(&self) -> Result<Action, ActionError> {
        Action::decode(&self.action, &self.params)
    }
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
    /// What it does.
    pub action: &'a Action,
}

const COLUMNS: &str =
    "id, project_id, account_id, database_id, branch_id, action, status, error, params, created_at, updated_at";

fn operation_row(row: &Row<'_>) -> crate::store::sql::Result<(Operation, String)> {
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

/// Inserts a `running` operation inside `tx`, leased to the inserting process (`lease`).
pub(crate) fn insert_operation(
    tx: &Transaction<'_>,
    new: &NewOperation<'_>,
    lease: &Lease,
) -> Result<Operation, StoreError> {
    let (ms, created_at) = now();
    let operation = Operation {
        id: new_id("op_", ms),
        project_id: new.project_id.to_owned(),
        account_id: new.account_id.clone(),
        database_id: new.database_id.map(str::to_owned),
        branch_id: new.branch_id.map(str::to_owned),
        action: new.action.name().to_owned(),
        status: OperationStatus::Running,
        error: None,
        params: new.action.params_json(),
        updated_at: created_at.clone(),
        created_at,
    };
    tx.execute(
        &format!(
            "INSERT INTO operations ({COLUMNS}, lease_owner, lease_expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
        ),
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
            operation.updated_at,
            lease.owner,
            lease.expires_at
        ],
    )?;
    Ok(operation)
}

impl Store {
    /// Creates a `running` operation, unless one is already running on the same branch (then
    /// [`StoreError::Conflict`]): one transaction, so two concurrent requests cannot both start one.
    pub fn start_operation(&self, new: &NewOperation<'_>) -> Result<Operation, StoreError> {
        self.start_operation_audited(new, None)
    }

    /// [`Store::start_operation`] writing `audit` (the request's audit entry) in the same transaction, if given:
    /// the operation and its entry are committed together or not at all.
    pub fn start_operation_audited(
        &self,
        new: &NewOperation<'_>,
        audit: Option<&crate::store::audit::NewAuditEntry>,
    ) -> Result<Operation, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(crate::store::sql::TransactionBehavior::Immediate)?;
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
        let operation = insert_operation(&tx, new, &self.new_lease())?;
        if let Some(entry) = audit {
            crate::store::audit::insert_audit(&tx, entry)?;
        }
        tx.commit()?;
        Ok(operation)
    }

    /// Starts operation `new` (it must name a database) unless an operation runs on its database: `None` then.
    /// The check and the insert are one immediate transaction, so of several API processes starting one at once
    /// (each judging a pageserver lost) exactly one does.
    pub fn start_operation_on_idle_database(&self, new: &NewOperation<'_>) -> Result<Option<Operation>, StoreError> {
        let database_id = new
            .database_id
            .ok_or_else(|| StoreError::Conflict("the operation names no database".to_owned()))?;
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(crate::store::sql::TransactionBehavior::Immediate)?;
        let running = tx
            .query_row(
                "SELECT id FROM operations WHERE database_id = ?1 AND status = 'running' LIMIT 1",
                [database_id],
                |row| row.get::<_, String>(0),
            )
            .optional()?;
        if running.is_some() {
            return Ok(None);
        }
        let operation = insert_operation(&tx, new, &self.new_lease())?;
        tx.commit()?;
        Ok(Some(operation))
    }

    /// `account`'s operation `id`.
    pub fn get_operation(&self, account: &AccountId, id: &str) -> Result<Option<Operation>, StoreError> {
        let conn = self.conn()?;
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
        let conn = self.conn()?;
        if !has_project(&conn, account, project_id)? {
            return Ok(None);
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM operations WHERE project_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
        ))?;
        // One extra row says whether another page follows; `~` sorts after every id character.
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let items = stmt
            .query_map(params![project_id, before.unwrap_or("~"), fetch], operation_row)?
            .map(|row| finish_row(row?))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Page::from_one_extra(items, limit, |o| o.id.clone())))
    }

    /// Operation `id`, whoever owns it.
    pub fn operation(&self, id: &str) -> Result<Option<Operation>, StoreError> {
        let conn = self.conn()?;
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
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM operations WHERE status = 'running' ORDER BY id"
        ))?;
        let rows = stmt.query_map([], operation_row)?;
        rows.map(|row| finish_row(row?)).collect()
    }

    /// The id of a running operation on branch `branch_id`, if any.
    pub fn running_operation_on_branch(&self, branch_id: &str) -> Result<Option<String>, StoreError> {
        self.running_operation_where("branch_id", branch_id)
    }

    /// The id of a running operation on database `database_id`, if any.
    pub fn running_operation_on_database(&self, database_id: &str) -> Result<Option<String>, StoreError> {
        self.running_operation_where("database_id", database_id)
    }

    /// The id of a running operation whose `column` (a column name of this module, never input) is `value`.
    fn running_operation_where(&self, column: &'static str, value: &str) -> Result<Option<String>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!("SELECT id FROM operations WHERE {column} = ?1 AND status = 'running' LIMIT 1"),
                [value],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// A running operation on database `database_id` other than `operation_id`, if any.
    pub fn other_running_operation_on_database(
        &self,
        database_id: &str,
        operation_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                "SELECT id FROM operations WHERE database_id = ?1 AND status = 'running' AND id != ?2 LIMIT 1",
                params![database_id, operation_id],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// How many operations of the action named `action` ([`Action::name`]) run on database `database_id`.
    pub fn running_operations_on_database(&self, database_id: &str, action: &str) -> Result<i64, StoreError> {
        let conn = self.conn()?;
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
        let conn = self.conn()?;
        let changed = conn.execute(
            "UPDATE operations SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1 AND status = 'running'",
            params![id, status.as_str(), error, updated_at],
        )?;
        Ok(changed == 1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    //! The typed actions against the rows the store has always held: rows written as the code before
    //! [`Action`] wrote them (literal text below) load and decode to the same work, the typed actions write
    //! that very text, and a row that cannot be read fails its own operation only.

    use super::*;

    const ROOT: &str = "0123456789abcdef0123456789abcdef";
    const NEW: &str = "fedcba9876543210fedcba9876543210";
    /// A `restore_branch` row's `params` as the code before the typed action wrote it (`serde_json` of a struct
    /// of strings: the timeline ids' and the LSN's `to_string()`).
    const RESTORE_PARAMS_V1: &str = "{\"branch_id\":\"br_1\",\"old_timeline_id\":\"0123456789abcdef0123456789abcdef\",\
        \"source_timeline_id\":\"0123456789abcdef0123456789abcdef\",\"target_lsn\":\"0/1000A28\",\
        \"new_timeline_id\":\"fedcba9876543210fedcba9876543210\",\
        \"preserved_name\":\"main_before_restore_20260101T000000Z\",\"preserved_id\":\"br_2\"}";

    fn restore_params() -> RestoreParams {
        RestoreParams {
            branch_id: "br_1".to_owned(),
            old_timeline_id: ROOT.parse().unwrap(),
            source_timeline_id: ROOT.parse().unwrap(),
            target_lsn: Lsn(0x100_0A28),
            new_timeline_id: NEW.parse().unwrap(),
            preserved_name: Some("main_before_restore_20260101T000000Z".to_owned()),
            preserved_id: "br_2".to_owned(),
        }
    }

    /// A store with an account and a project, and a running operation row inserted as old code inserted it.
    fn store_with_rows(
        open: crate::store::scenarios::Open<'_>,
        rows: &[(&str, &str, &str)],
    ) -> (Store, AccountId, String) {
        let store = open();
        let account = store.create_account().unwrap();
        let project = store
            .create_project(&account, "p", 10, &crate::store::labels::Labels::new())
            .unwrap();
        {
            let conn = store.conn().unwrap();
            for (id, action, params) in rows {
                conn.execute(
                    &format!("INSERT INTO operations ({COLUMNS}) VALUES (?1, ?2, ?3, 'db_1', 'br_1', ?4, 'running', NULL, ?5, ?6, ?6)"),
                    params![id, project.id, account.0, action, params, "2026-01-01T00:00:00.000Z"],
                )
                .unwrap();
            }
        }
        (store, account, project.id)
    }

    #[test]
    fn rows_written_before_the_typed_action_run_as_they_are() {
        crate::store::scenarios::on_sqlite(rows_written_before_the_typed_action_run_as_they_are_on);
    }

    /// [`rows_written_before_the_typed_action_run_as_they_are`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn rows_written_before_the_typed_action_run_as_they_are_on(open: crate::store::scenarios::Open<'_>) {
        let (store, _, _) = store_with_rows(
            open,
            &[
                ("op_1", "create_database", "{}"),
                ("op_2", "restore_branch", RESTORE_PARAMS_V1),
                (
                    "op_3",
                    "restore_branch",
                    &RESTORE_PARAMS_V1.replace("\"main_before_restore_20260101T000000Z\"", "null"),
                ),
            ],
        );
        let running = store.running_operations().unwrap();
        let work: Vec<Action> = running.iter().map(|operation| operation.work().unwrap()).collect();
        let mut unpreserved = restore_params();
        unpreserved.preserved_name = None;
        assert_eq!(
            work,
            [
                Action::CreateDatabase,
                Action::RestoreBranch(restore_params()),
                Action::RestoreBranch(unpreserved)
            ]
        );
    }

    #[test]
    fn typed_actions_write_the_text_old_rows_hold() {
        assert_eq!(Action::CreateDatabase.name(), "create_database");
        assert_eq!(Action::CreateDatabase.params_json(), "{}");
        let restore = Action::RestoreBranch(restore_params());
        assert_eq!(restore.name(), "restore_branch");
        assert_eq!(restore.params_json(), RESTORE_PARAMS_V1);
        assert_eq!(Action::decode(restore.name(), &restore.params_json()).unwrap(), restore);
    }

    #[test]
    fn reset_and_expiry_actions_round_trip_and_refuse_foreign_parameters() {
        let reset = Action::ResetBranch(restore_params());
        assert_eq!(reset.name(), "reset_branch");
        assert_eq!(
            reset.params_json(),
            RESTORE_PARAMS_V1,
            "a reset's parameters are a restore's"
        );
        assert_eq!(Action::decode(reset.name(), &reset.params_json()).unwrap(), reset);
        let delete = Action::DeleteBranch(DeleteBranchParams {
            branch_id: "br_01JD0000000000000000000000".to_owned(),
            expires_at: "2026-01-01T00:00:00.000Z".to_owned(),
        });
        assert_eq!(delete.name(), "delete_branch");
        assert_eq!(
            delete.params_json(),
            r#"{"branch_id":"br_01JD0000000000000000000000","expires_at":"2026-01-01T00:00:00.000Z"}"#
        );
        assert_eq!(Action::decode(delete.name(), &delete.params_json()).unwrap(), delete);
        assert!(matches!(
            Action::decode(Action::DELETE_BRANCH, RESTORE_PARAMS_V1),
            Err(ActionError::Params(_))
        ));
        assert!(matches!(
            Action::decode(Action::RESET_BRANCH, "{}"),
            Err(ActionError::Params(_))
        ));
    }

    #[test]
    fn suspension_actions_round_trip_with_their_reason() {
        for action in [
            Action::SuspendDatabase(DatabaseStateParams {
                reason: "idle: no session for 301 s".to_owned(),
            }),
            Action::ResumeDatabase(DatabaseStateParams {
                reason: "a session woke it".to_owned(),
            }),
        ] {
            assert!(
                action.params_json().starts_with(r#"{"reason":"#),
                "{}",
                action.params_json()
            );
            assert_eq!(Action::decode(action.name(), &action.params_json()).unwrap(), action);
        }
        assert_eq!(Action::SUSPEND_DATABASE, "suspend_database");
        assert_eq!(Action::RESUME_DATABASE, "resume_database");
        assert!(matches!(
            Action::decode(Action::SUSPEND_DATABASE, "{}"),
            Err(ActionError::Params(_))
        ));
    }

    #[test]
    fn a_new_operation_is_stored_as_its_action_says() {
        crate::store::scenarios::on_sqlite(a_new_operation_is_stored_as_its_action_says_on);
    }

    /// [`a_new_operation_is_stored_as_its_action_says`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn a_new_operation_is_stored_as_its_action_says_on(open: crate::store::scenarios::Open<'_>) {
        let (store, account, project_id) = store_with_rows(open, &[]);
        let action = Action::RestoreBranch(restore_params());
        let started = store
            .start_operation(&NewOperation {
                project_id: &project_id,
                account_id: &account,
                database_id: Some("db_1"),
                branch_id: Some("br_1"),
                action: &action,
            })
            .unwrap();
        let (name, params): (String, String) = store
            .conn()
            .unwrap()
            .query_row(
                "SELECT action, params FROM operations WHERE id = ?1",
                [&started.id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert_eq!((name.as_str(), params.as_str()), ("restore_branch", RESTORE_PARAMS_V1));
        assert_eq!(store.operation(&started.id).unwrap().unwrap().work().unwrap(), action);
        assert_eq!(
            store
                .running_operations_on_database("db_1", Action::RESTORE_BRANCH)
                .unwrap(),
            1
        );
    }

    #[test]
    fn a_row_that_cannot_be_read_fails_its_operation_not_the_listing() {
        crate::store::scenarios::on_sqlite(a_row_that_cannot_be_read_fails_its_operation_not_the_listing_on);
    }

    /// [`a_row_that_cannot_be_read_fails_its_operation_not_the_listing`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn a_row_that_cannot_be_read_fails_its_operation_not_the_listing_on(
        open: crate::store::scenarios::Open<'_>,
    ) {
        let (store, account, project_id) = store_with_rows(
            open,
            &[
                ("op_1", "drop_everything", "{}"),
                ("op_2", "restore_branch", "{\"branch_id\":\"br_1\"}"),
                (
                    "op_3",
                    "restore_branch",
                    &RESTORE_PARAMS_V1.replace("0/1000A28", "not an LSN"),
                ),
                ("op_4", "create_database", "[]"),
            ],
        );
        let listed = store.list_operations(&account, &project_id, None, 10).unwrap().unwrap();
        assert_eq!(listed.items.len(), 4, "every row is listed");
        let errors: Vec<String> = store
            .running_operations()
            .unwrap()
            .iter()
            .map(|operation| operation.work().unwrap_err().to_string())
            .collect();
        assert_eq!(errors[0], "unknown action \"drop_everything\"");
        for error in &errors[1..] {
            assert!(error.starts_with("malformed parameters: "), "{error}");
        }
        assert!(errors[2].contains("not an LSN"), "{}", errors[2]);
    }
}
