//! Events for webhooks: what the control plane does that a project's webhooks may subscribe to, queued as
//! deliveries in the metadata (`store::webhooks`) and sent by `crate::webhooks`.
//!
//! Each body is the resource as the API returns it (`{"operation": …}`, `{"branch": …}`, the views of `GET`). An
//! event is queued after the change it reports is committed; a crash in between loses the event, never the change,
//! and a failure to queue is logged, never the change's error. Except `branch.created`: its deliveries are queued
//! in the branch row's own transaction, held until the storage is known to hold the branch's timeline and
//! released in the transaction that records it, or taken back with the creation (`control::branches`), so a
//! crash never loses one nor sends one for a branch that was never made.

use super::Control;
use crate::http::views::{BranchEnvelope, BranchView, OperationEnvelope, OperationView};
use crate::store::databases::{Branch, Database};
use crate::store::operations::{Operation, OperationStatus};
use crate::store::webhooks::WebhookEvent;

impl Control {
    /// Queues `operation.finished` or `operation.failed` for `operation` as it ended (nothing while it runs).
    pub(super) async fn emit_operation(&self, operation: Operation) {
        let event = match operation.status {
            OperationStatus::Finished => WebhookEvent::OperationFinished,
            OperationStatus::Failed => WebhookEvent::OperationFailed,
            OperationStatus::Running => return,
        };
        let project_id = operation.project_id.clone();
        let body = serde_json::to_string(&OperationEnvelope {
            operation: OperationView::from(operation),
        });
        self.emit(project_id, event, body).await;
    }

    /// The body of an event about `branch` of `database` (`{"branch": …}`); `None`, logged, if it cannot be
    /// written.
    pub(super) fn branch_event_body(&self, branch: Branch, database: &Database) -> Option<String> {
        let body = serde_json::to_string(&BranchEnvelope {
            branch: BranchView::new(self, branch, database),
        });
        body.map_err(|error| tracing::error!(%error, "an event body could not be written"))
            .ok()
    }

    /// Queues `event` for `branch` of `database`, the branch as it is given (as it was, for a deletion).
    pub(super) async fn emit_branch(&self, event: WebhookEvent, branch: Branch, database: &Database) {
        let body = serde_json::to_string(&BranchEnvelope {
            branch: BranchView::new(self, branch, database),
        });
        self.emit(database.project_id.clone(), event, body).await;
    }

    async fn emit(&self, project_id: String, event: WebhookEvent, body: Result<String, serde_json::Error>) {
        // Most projects have no webhook: a read (on this thread for SQLite metadata) tells, and spares them the
        // queue's write transaction and its hand-off. A webhook made after this read is as if made after the
        // event, which it may as well have been.
        let asked = project_id.clone();
        match self.read(move |store| store.project_has_webhooks(&asked)).await {
            Ok(false) => return,
            Ok(true) => {}
            Err(error) => {
                tracing::error!(?error, event = event.as_str(), "webhook deliveries could not be queued");
                return;
            }
        }
        let body = match body {
            Ok(body) => body,
            Err(error) => {
                tracing::error!(%error, event = event.as_str(), "an event body could not be written");
                return;
            }
        };
        match self
            .blocking(move |store| store.enqueue_deliveries(&project_id, event, &body))
            .await
        {
            Ok(0) => {}
            Ok(_) => self.webhook_wake.notify_one(),
            Err(error) => tracing::error!(?error, event = event.as_str(), "webhook deliveries could not be queued"),
        }
    }
}
