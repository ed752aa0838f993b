//! Scale to zero in the rows: each database's `suspend_timeout_seconds` and why it is suspended
//! (`suspended_reason`), and the two changes of the idle sweep, each one transaction with its operation row
//! (recorded `finished`, since the work is done when it is written): a suspension for idleness
//! (`suspend_database`) and the wake of a database suspended that way (`resume_database`).
//!
//! **Invariant:** `suspended_reason` is `api` or `idle` on a suspended database and `NULL` on any other; a row
//! from before the column (`NULL` on a suspended database) reads as `api`, the suspension that refuses
//! sessions.

use crate::store::sql::{params, OptionalExtension, TransactionBehavior};

use super::{finish_database, Database, DatabaseStatus, DATABASE_COLUMNS};
use crate::store::operations::{
    insert_operation, Action, DatabaseStateParams, NewOperation, Operation, OperationStatus,
};
use crate::store::{AccountId, Store, StoreError};

/// The `suspend_timeout_seconds` of a database created without one: five minutes.
pub const SUSPEND_TIMEOUT_SECONDS_DEFAULT: u32 = 300;
/// The largest `suspend_timeout_seconds`: seven days (0, never, is the way to keep a database up for good).
pub const SUSPEND_TIMEOUT_SECONDS_MAX: u32 = 7 * 24 * 3600;

/// Why a database is suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspendReason {
    /// `POST /v1/databases/{id}/suspend`: it refuses sessions until resumed.
    Api,
    /// No session for its `suspend_timeout_seconds`: its stores are stopped, and a session wakes it.
    Idle,
}

impl SuspendReason {
    /// The API and column spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SuspendReason::Api => "api",
            SuspendReason::Idle => "idle",
        }
    }

    /// The reason a row with `status` and `suspended_reason` column `column` holds.
    pub(super) fn of_row(status: DatabaseStatus, column: Option<&str>) -> Result<Option<SuspendReason>, StoreError> {
        match (status, column) {
            (DatabaseStatus::Suspended, None | Some("api")) => Ok(Some(SuspendReason::Api)),
            (DatabaseStatus::Suspended, Some("idle")) => Ok(Some(SuspendReason::Idle)),
            (_, None) => Ok(None),
            (status, Some(other)) => Err(StoreError::Corrupt(format!(
                "suspended_reason {other:?} on a database {}",
                status.as_str()
            ))),
        }
    }
}

impl Store {
    /// Sets `account`'s database `id`'s `suspend_timeout_seconds`; returns whether it exists.
    pub fn set_suspend_timeout(&self, account: &AccountId, id: &str, seconds: u32) -> Result<bool, StoreError> {
        assert!(
            seconds <= SUSPEND_TIMEOUT_SECONDS_MAX,
            "suspend timeout {seconds} s is above {SUSPEND_TIMEOUT_SECONDS_MAX}"
        );
        let conn = self.conn()?;
        let changed = conn.execute(
            "UPDATE databases SET suspend_timeout_seconds = ?3 WHERE account_id = ?1 AND id = ?2",
            params![account.0, id, seconds],
        )?;
        Ok(changed == 1)
    }

    /// The databases the idle sweep watches, in creation order: the active ones with a suspend timeout, and the
    /// ones suspended for idleness (to see them woken).
    pub fn databases_to_watch(&self) -> Result<Vec<Database>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases
             WHERE (status = 'active' AND suspend_timeout_seconds > 0)
                OR (status = 'suspended' AND suspended_reason = 'idle')
             ORDER BY id"
        ))?;
        let rows = stmt.query_map([], super::database_row)?;
        rows.map(|row| finish_database(row?)).collect()
    }

    /// Records that active database `id` was suspended for idleness (`reason` says how long it was idle), with
    /// its finished `suspend_database` operation; `None` (nothing changed) if it is not active or has no
    /// suspend timeout any more.
    pub fn suspend_for_idleness(&self, id: &str, reason: &str) -> Result<Option<Operation>, StoreError> {
        self.change_suspension(
            id,
            "UPDATE databases SET status = 'suspended', suspended_reason = 'idle'
             WHERE id = ?1 AND status = 'active' AND suspend_timeout_seconds > 0",
            &Action::SuspendDatabase(DatabaseStateParams {
                reason: reason.to_owned(),
            }),
        )
    }

    /// Records that database `id`, suspended for idleness, woke (`reason` says why), with its finished
    /// `resume_database` operation; `None` (nothing changed) if it is not suspended for idleness.
    pub fn wake_from_idleness(&self, id: &str, reason: &str) -> Result<Option<Operation>, StoreError> {
        self.change_suspension(
            id,
            "UPDATE databases SET status = 'active', suspended_reason = NULL
             WHERE id = ?1 AND status = 'suspended' AND suspended_reason = 'idle'",
            &Action::ResumeDatabase(DatabaseStateParams {
                reason: reason.to_owned(),
            }),
        )
    }

    /// Runs `update` (`?1` = `id`) and, if it changed the row, records `action` as a finished operation on the
    /// database: one transaction.
    fn change_suspension(&self, id: &str, update: &str, action: &Action) -> Result<Option<Operation>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if tx.execute(update, [id])? != 1 {
            return Ok(None);
        }
        let owner: Option<(String, String)> = tx
            .query_row(
                "SELECT project_id, account_id FROM databases WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((project_id, account_id)) = owner else {
            return Ok(None);
        };
        let mut operation = insert_operation(
            &tx,
            &NewOperation {
                project_id: &project_id,
                account_id: &AccountId(account_id),
                database_id: Some(id),
                branch_id: None,
                action,
            },
            &self.new_lease(),
        )?;
        tx.execute(
            "UPDATE operations SET status = ?2 WHERE id = ?1",
            params![operation.id, OperationStatus::Finished.as_str()],
        )?;
        operation.status = OperationStatus::Finished;
        tx.commit()?;
        Ok(Some(operation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_read_only_on_a_suspended_row() {
        assert_eq!(
            SuspendReason::of_row(DatabaseStatus::Suspended, None).expect("a row from before the column"),
            Some(SuspendReason::Api),
            "a suspension from before the column refuses sessions"
        );
        assert_eq!(
            SuspendReason::of_row(DatabaseStatus::Suspended, Some("idle")).expect("idle"),
            Some(SuspendReason::Idle)
        );
        assert_eq!(
            SuspendReason::of_row(DatabaseStatus::Active, None).expect("active"),
            None
        );
        assert!(SuspendReason::of_row(DatabaseStatus::Active, Some("idle")).is_err());
        assert!(SuspendReason::of_row(DatabaseStatus::Suspended, Some("nap")).is_err());
    }
}
