//! The operations worker: runs `create_database`, `restore_branch`, `reset_branch` and `delete_branch`
//! operations in the background.
//!
//! The worker knows operations, not the control plane: it reads an operation's row, decodes its [`Action`] and
//! hands the work to an [`OperationRunner`] (the control plane implements it), then has the runner record the
//! end. So the control plane depends on the worker and never the reverse.
//!
//! Bounds: at most [`QUEUED_MAX`] operations wait or run at once (one more is refused with 429 *before* its row
//! is written: a caller [`Worker::reserve`]s a slot, writes the row, then submits), and at most
//! [`RUNNING_MAX`] run at the same time. Every run ends in [`OperationRunner::finish_operation`], so an
//! operation is never left `running` by the worker; after a crash, the control plane hands the ones left
//! `running` back to it ([`Worker::resume`]).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::store::operations::{Action, DeleteBranchParams, MovePageserverParams, Operation, RestoreParams};

/// Operations waiting or running, at most.
pub const QUEUED_MAX: usize = 256;
/// Operations running at once, at most.
pub const RUNNING_MAX: usize = 8;

/// What the worker needs to run operations: their rows, their work, and a place to record how they ended.
pub(crate) trait OperationRunner: Send + Sync + 'static {
    /// Operation `id` as the store holds it now; `None` if it is gone (deleted with its project).
    fn load_operation(&self, id: &str) -> impl Future<Output = Result<Option<Operation>, ApiError>> + Send;

    /// How long to wait before running each operation: fault injection for tests, 0 in production.
    fn operation_delay_ms(&self) -> u64;

    /// The work of `create_database` `operation`; `Err` says why it failed. Every step is idempotent, so a run
    /// resumed after a crash redoes what was done and finishes.
    fn run_create_database(&self, operation: &Operation) -> impl Future<Output = Result<(), String>> + Send;

    /// The work of `restore_branch` `operation` with its `params`; `Err` says why it failed (and then nothing
    /// was restored). Idempotent, like a creation.
    fn run_restore_branch(
        &self,
        operation: &Operation,
        params: RestoreParams,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// The work of `reset_branch` `operation`: a restore onto the parent's latest state (`params`), which also
    /// moves the branch's `parent_lsn`. Idempotent, like a restore.
    fn run_reset_branch(
        &self,
        operation: &Operation,
        params: RestoreParams,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// The work of `delete_branch` `operation` (an expired branch); `Err` says why it was not deleted.
    /// Idempotent: a branch already gone is a success.
    fn run_delete_branch(
        &self,
        operation: &Operation,
        params: DeleteBranchParams,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// The work of `move_pageserver` `operation`: the database's tenant moved to `params.to`; `Err` says why
    /// it was not (rolled back). Idempotent: a run resumed after a crash finishes or rolls back.
    fn run_move_pageserver(
        &self,
        operation: &Operation,
        params: MovePageserverParams,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// The work of `failover_pageserver` `operation`: the database's tenant re-placed from a lost pageserver on
    /// `params.to`; `Err` says why it was not (the loss probe starts another). Idempotent: a run resumed after a
    /// crash finishes.
    fn run_failover_pageserver(
        &self,
        operation: &Operation,
        params: MovePageserverParams,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Records the end of `operation`: `finished` on `Ok`, `failed` with the message on `Err`.
    fn finish_operation(&self, operation: &Operation, outcome: Result<(), String>) -> impl Future<Output = ()> + Send;
}

/// The worker of runner `R`, which owns it (the worker holds it weakly, so dropping the runner ends the
/// operations that have not started).
#[derive(Debug)]
pub(crate) struct Worker<R> {
    runner: Weak<R>,
    queued: Arc<AtomicUsize>,
    running: Arc<Semaphore>,
}

/// A reserved place in the worker's queue: [`Slot::submit`] it, or drop it to give it back.
#[must_use = "a slot is given back when dropped"]
pub(crate) struct Slot<'a, R: OperationRunner> {
    worker: &'a Worker<R>,
    submitted: bool,
}

impl<R: OperationRunner> Worker<R> {
    /// A worker running operations through `runner`, nothing queued.
    pub(crate) fn new(runner: Weak<R>) -> Worker<R> {
        Worker {
            runner,
            queued: Arc::new(AtomicUsize::new(0)),
            running: Arc::new(Semaphore::new(RUNNING_MAX)),
        }
    }

    /// Reserves a place for one operation, or refuses with 429 when [`QUEUED_MAX`] are queued.
    pub(crate) fn reserve(&self) -> Result<Slot<'_, R>, ApiError> {
        let reserved = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued < QUEUED_MAX).then_some(queued + 1)
            })
            .is_ok();
        if !reserved {
            return Err(ApiError::RateLimited(format!(
                "{QUEUED_MAX} operations are in progress; retry later"
            )));
        }
        Ok(Slot {
            worker: self,
            submitted: false,
        })
    }

    /// Operations queued or running.
    pub(crate) fn in_progress(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Queues an operation found `running` after a restart (no reservation: it was admitted before).
    pub(crate) fn resume(&self, id: String) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.spawn(id);
    }

    fn spawn(&self, id: String) {
        let (runner, queued, running) = (self.runner.clone(), Arc::clone(&self.queued), Arc::clone(&self.running));
        tokio::spawn(async move {
            let _permit = running.acquire_owned().await;
            if let Some(runner) = runner.upgrade() {
                run(&*runner, &id).await;
            }
            queued.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

impl<R: OperationRunner> Slot<'_, R> {
    /// Runs operation `id` (its row is written) in the background.
    pub(crate) fn submit(mut self, id: String) {
        self.submitted = true;
        self.worker.spawn(id);
    }
}

impl<R: OperationRunner> Drop for Slot<'_, R> {
    fn drop(&mut self) {
        if !self.submitted {
            self.worker.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Runs operation `id` to its end. A row whose action cannot be read fails its operation, saying why.
async fn run<R: OperationRunner>(runner: &R, id: &str) {
    let operation = match runner.load_operation(id).await {
        Ok(Some(operation)) => operation,
        Ok(None) => return, // deleted with its project
        Err(error) => {
            tracing::error!(operation = %id, ?error, "an operation could not be read");
            return;
        }
    };
    let action = operation.action.clone();
    let name = || format!("operation {action}");
    crate::stages::timed(name, |succeeded: &bool| *succeeded, run_loaded(runner, operation)).await;
}

/// [`run`] once the operation is read.
async fn run_loaded<R: OperationRunner>(runner: &R, operation: Operation) -> bool {
    crate::stages::mark("load");
    let delay_ms = runner.operation_delay_ms();
    if delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
    }
    tracing::info!(operation = %operation.id, action = %operation.action, "operation running");
    let outcome = match operation.work() {
        Ok(Action::CreateDatabase) => runner.run_create_database(&operation).await,
        Ok(Action::RestoreBranch(params)) => runner.run_restore_branch(&operation, params).await,
        Ok(Action::ResetBranch(params)) => runner.run_reset_branch(&operation, params).await,
        Ok(Action::DeleteBranch(params)) => runner.run_delete_branch(&operation, params).await,
        Ok(Action::MovePageserver(params)) => runner.run_move_pageserver(&operation, params).await,
        Ok(Action::FailoverPageserver(params)) => runner.run_failover_pageserver(&operation, params).await,
        // Written `finished` with the change they report: one found running was not written by this code.
        Ok(Action::SuspendDatabase(_) | Action::ResumeDatabase(_)) => {
            Err("a suspension or wake is recorded when done; there is nothing to run".to_owned())
        }
        Err(error) => Err(error.to_string()),
    };
    let succeeded = outcome.is_ok();
    runner.finish_operation(&operation, outcome).await;
    succeeded
}
