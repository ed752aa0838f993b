//! Operations on the control plane's side: the [`OperationRunner`] the worker runs them through (their work is
//! in `databases` and `restore`), the end of an operation (recorded, a failed creation's
//! database marked `failed`), and waiting for it.

use std::future::Future;
use std::time::Duration;

use super::restore::Move;
use super::Control;
use crate::error::ApiError;
use crate::store::databases::{Database, DatabaseStatus};
use crate::store::operations::{
    Action, DeleteBranchParams, MovePageserverParams, Operation, OperationStatus, RestoreParams,
};
use crate::store::AccountId;
use crate::worker::OperationRunner;

impl OperationRunner for Control {
    fn load_operation(&self, id: &str) -> impl Future<Output = Result<Option<Operation>, ApiError>> + Send {
        let id = id.to_owned();
        self.blocking(move |store| store.operation(&id))
    }

    fn operation_delay_ms(&self) -> u64 {
        self.config.operation_delay_ms
    }

    fn run_create_database(&self, operation: &Operation) -> impl Future<Output = Result<(), String>> + Send {
        self.create_database_work(operation)
    }

    fn run_restore_branch(
        &self,
        operation: &Operation,
        params: RestoreParams,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.restore_work(operation, params, Move::Restore)
    }

    fn run_reset_branch(
        &self,
        operation: &Operation,
        params: RestoreParams,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.restore_work(operation, params, Move::Reset)
    }

    fn run_delete_branch(
        &self,
        operation: &Operation,
        params: DeleteBranchParams,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.delete_expired_work(operation, params)
    }

    fn run_move_pageserver(
        &self,
        operation: &Operation,
        params: MovePageserverParams,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.move_pageserver_work(operation, params)
    }

    fn run_failover_pageserver(
        &self,
        operation: &Operation,
        params: MovePageserverParams,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.failover_pageserver_work(operation, params)
    }

    fn finish_operation(&self, operation: &Operation, outcome: Result<(), String>) -> impl Future<Output = ()> + Send {
        self.finish(operation, outcome)
    }
}

impl Control {
    /// Database `id` for an operation's work; `Err` (the operation's error) if it cannot be read or is gone.
    pub(super) async fn database_for_work(&self, id: &str) -> Result<Database, String> {
        let id = id.to_owned();
        self.blocking(move |store| store.database(&id))
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "the database was deleted".to_owned())
    }

    /// Records the end of `operation` and wakes the long-pollers.
    async fn finish(&self, operation: &Operation, outcome: Result<(), String>) {
        if let Err(error) = &outcome {
            tracing::warn!(operation = %operation.id, action = %operation.action, %error, "operation failed");
            if operation.action == Action::CREATE_DATABASE {
                if let Some(database_id) = operation.database_id.clone() {
                    let _held = self.locked(&database_id).await;
                    let id = database_id.clone();
                    let _ = self
                        .blocking(move |store| store.set_database_status(&id, DatabaseStatus::Failed))
                        .await;
                    if let Ok(Some(database)) = self.blocking(move |store| store.database(&database_id)).await {
                        if let Err(error) = self.refuse(&database, DatabaseStatus::Failed).await {
                            tracing::error!(database = %database.id, ?error, "a failed database's names could not be refused");
                        }
                    }
                }
            }
        } else {
            tracing::info!(operation = %operation.id, action = %operation.action, "operation finished");
        }
        let id = operation.id.clone();
        if let Err(error) = self.blocking(move |store| store.finish_operation(&id, outcome)).await {
            tracing::error!(operation = %operation.id, ?error, "an operation's end could not be recorded");
        }
        crate::stages::mark("record_finished");
        self.operation_ended.notify_waiters();
        let id = operation.id.clone();
        match self.blocking(move |store| store.operation(&id)).await {
            Ok(Some(ended)) => self.emit_operation(ended).await,
            Ok(None) => {} // deleted with its project
            Err(error) => tracing::error!(operation = %operation.id, ?error, "an ended operation could not be read"),
        }
    }

    /// `account`'s operation `id`, once it has ended or `wait` has passed, whichever is first.
    pub async fn wait_operation(&self, account: &AccountId, id: &str, wait: Duration) -> Result<Operation, ApiError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before reading, so an end between the read and the wait is not missed.
            let ended = self.operation_ended.notified();
            let (account_id, operation_id) = (account.clone(), id.to_owned());
            let operation = self
                .read(move |store| store.get_operation(&account_id, &operation_id))
                .await?
                .ok_or(ApiError::NotFound)?;
            crate::stages::mark("read_operation");
            if operation.status != OperationStatus::Running || tokio::time::Instant::now() >= deadline {
                return Ok(operation);
            }
            // Woken by an end in this process; an operation another API process runs (on shared metadata) is
            // read again every poll period.
            let poll = (tokio::time::Instant::now() + Duration::from_millis(WAIT_POLL_MS)).min(deadline);
            let _ = tokio::time::timeout_at(poll, ended).await;
            crate::stages::mark("wait");
        }
    }
}

/// How often a long-poll reads the operation again when no end in this process woke it.
const WAIT_POLL_MS: u64 = 250;
