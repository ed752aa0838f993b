//! The operations worker: runs `create_database` and `restore_branch` operations in the background.
//!
//! Bounds: at most [`QUEUED_MAX`] operations wait or run at once (one more is refused with 429 *before* its row
//! is written: a caller [`Worker::reserve`]s a slot, writes the row, then submits), and at most
//! [`RUNNING_MAX`] run at the same time. Every run ends in [`Control::finish`], so an operation is never left
//! `running` by the worker; after a crash, [`Control::resume`] hands the ones left `running` back to it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::Semaphore;

use crate::control::Control;
use crate::error::ApiError;

/// Operations waiting or running, at most.
pub const QUEUED_MAX: usize = 256;
/// Operations running at once, at most.
pub const RUNNING_MAX: usize = 8;

/// The worker; owned by [`Control`].
#[derive(Debug)]
pub(crate) struct Worker {
    control: Weak<Control>,
    queued: Arc<AtomicUsize>,
    running: Arc<Semaphore>,
}

/// A reserved place in the worker's queue: [`Slot::submit`] it, or drop it to give it back.
#[must_use = "a slot is given back when dropped"]
pub(crate) struct Slot<'a> {
    worker: &'a Worker,
    submitted: bool,
}

impl Worker {
    pub(crate) fn new(control: Weak<Control>) -> Worker {
        Worker {
            control,
            queued: Arc::new(AtomicUsize::new(0)),
            running: Arc::new(Semaphore::new(RUNNING_MAX)),
        }
    }

    /// Reserves a place for one operation, or refuses with 429 when [`QUEUED_MAX`] are queued.
    pub(crate) fn reserve(&self) -> Result<Slot<'_>, ApiError> {
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
        let (control, queued, running) = (
            self.control.clone(),
            Arc::clone(&self.queued),
            Arc::clone(&self.running),
        );
        tokio::spawn(async move {
            let _permit = running.acquire_owned().await;
            if let Some(control) = control.upgrade() {
                run(&control, &id).await;
            }
            queued.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

impl Slot<'_> {
    /// Runs operation `id` (its row is written) in the background.
    pub(crate) fn submit(mut self, id: String) {
        self.submitted = true;
        self.worker.spawn(id);
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if !self.submitted {
            self.worker.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Runs operation `id` to its end.
async fn run(control: &Arc<Control>, id: &str) {
    let operation_id = id.to_owned();
    let operation = match control.blocking(move |store| store.operation(&operation_id)).await {
        Ok(Some(operation)) => operation,
        Ok(None) => return, // deleted with its project
        Err(error) => {
            tracing::error!(operation = %id, ?error, "an operation could not be read");
            return;
        }
    };
    let delay_ms = control.config().operation_delay_ms;
    if delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
    }
    tracing::info!(operation = %operation.id, action = %operation.action, "operation running");
    let outcome = match operation.action.as_str() {
        "create_database" => control.run_create_database(&operation).await,
        "restore_branch" => control.run_restore(&operation).await,
        other => Err(format!("unknown action {other:?}")),
    };
    control.finish(&operation, outcome).await;
}
