//! Webhooks (issue 15): per project, URLs subscribed to events, and the durable queue and log of their deliveries.
//!
//! A delivery is a row from the moment its event happens: `pending` with the time of its next attempt, then
//! `delivered` (a 2XX answer) or `failed` (its attempts ran out). Each attempt is kept in the row (time, HTTP
//! status or error, duration), so the row is both the queue and the log; a restart finds the pending rows and the
//! sender (`crate::webhooks`) goes on with them.
//!
//! **Bounded:** a project has at most [`WEBHOOKS_PER_PROJECT_MAX`] webhooks; a webhook keeps its newest
//! [`DELIVERIES_PER_WEBHOOK_MAX`] deliveries (older ones go when a new one is queued, pending or not, and the
//! loss of a pending one is logged); a body is at most [`DELIVERY_BODY_BYTES_MAX`]; a delivery holds at most
//! [`ATTEMPTS_PER_DELIVERY_MAX`] attempts. A webhook's deliveries go with it, and a project's webhooks with it.

use crate::store::sql::{params, OptionalExtension, Row, Transaction, TransactionBehavior};
use cambium_types::TimelineId;
use serde::{Deserialize, Serialize};

use super::{check_quota, has_project, new_id, now, AccountId, Page, Store, StoreError};

/// Webhooks a project may have.
pub const WEBHOOKS_PER_PROJECT_MAX: u32 = 10;
/// Deliveries a webhook keeps, newest first.
pub const DELIVERIES_PER_WEBHOOK_MAX: u32 = 1_000;
/// The largest event body, in bytes (a resource is a few KiB at most: 64 labels of 1 KiB bound a branch).
pub const DELIVERY_BODY_BYTES_MAX: usize = 256 * 1024;
/// Attempts a delivery may make, at most, whatever the configuration says.
pub const ATTEMPTS_PER_DELIVERY_MAX: u32 = 20;

/// What a webhook may subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookEvent {
    /// An operation ended `finished`; the body is `{"operation": …}`.
    OperationFinished,
    /// An operation ended `failed`; the body is `{"operation": …}`.
    OperationFailed,
    /// A branch was created; the body is `{"branch": …}`.
    BranchCreated,
    /// A branch was deleted by a call (with its subtree: one event per branch); `{"branch": …}` as it was.
    BranchDeleted,
    /// A branch was deleted by expiry; `{"branch": …}` as it was.
    BranchExpired,
    /// A branch was restored to an earlier point; `{"branch": …}` after it.
    BranchRestored,
}

impl WebhookEvent {
    /// Every event, in the order the API documents them.
    pub const ALL: [WebhookEvent; 6] = [
        WebhookEvent::OperationFinished,
        WebhookEvent::OperationFailed,
        WebhookEvent::BranchCreated,
        WebhookEvent::BranchDeleted,
        WebhookEvent::BranchExpired,
        WebhookEvent::BranchRestored,
    ];

    /// The event's name in the API, the metadata and the `Cambium-Event` header.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::OperationFinished => "operation.finished",
            WebhookEvent::OperationFailed => "operation.failed",
            WebhookEvent::BranchCreated => "branch.created",
            WebhookEvent::BranchDeleted => "branch.deleted",
            WebhookEvent::BranchExpired => "branch.expired",
            WebhookEvent::BranchRestored => "branch.restored",
        }
    }

    /// The event named `name`, if there is one.
    pub fn parse(name: &str) -> Option<WebhookEvent> {
        WebhookEvent::ALL.into_iter().find(|event| event.as_str() == name)
    }
}

/// A webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// `wh_<ULID>`.
    pub id: String,
    /// Its project.
    pub project_id: String,
    /// Where deliveries are POSTed (`http` or `https`).
    pub url: String,
    /// The events it receives, at least one, no duplicates.
    pub events: Vec<WebhookEvent>,
    /// The HMAC-SHA256 key its deliveries are signed with (`whsec_…`).
    pub secret: String,
    /// The id of that key (`whk_<ULID>`), named in each signature.
    pub key_id: String,
    /// ISO 8601 UTC.
    pub created_at: String,
}

/// Where a delivery is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Waiting for its next attempt.
    Pending,
    /// A 2XX answer came.
    Delivered,
    /// Its attempts ran out without one.
    Failed,
}

impl DeliveryStatus {
    /// The status as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<DeliveryStatus> {
        [
            DeliveryStatus::Pending,
            DeliveryStatus::Delivered,
            DeliveryStatus::Failed,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }
}

/// One attempt at a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// When it started, ISO 8601 UTC.
    pub at: String,
    /// The receiver's HTTP status, if it answered.
    pub status_code: Option<u16>,
    /// Why no answer came (connection refused, timeout), if none did.
    pub error: Option<String>,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
}

/// A delivery: the queue entry and its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// `dlv_<ULID>`.
    pub id: String,
    /// Its webhook.
    pub webhook_id: String,
    /// Its event.
    pub event: String,
    /// The JSON body sent.
    pub body: String,
    /// Where it is.
    pub status: DeliveryStatus,
    /// Its attempts, oldest first.
    pub attempts: Vec<Attempt>,
    /// When the next attempt is due, while pending.
    pub next_attempt_at: Option<String>,
    /// ISO 8601 UTC.
    pub created_at: String,
    /// ISO 8601 UTC: the last change.
    pub updated_at: String,
}

/// A pending delivery with what sending it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueDelivery {
    /// The delivery.
    pub delivery: Delivery,
    /// Its webhook's URL.
    pub url: String,
    /// Its webhook's signing key.
    pub secret: String,
    /// That key's id.
    pub key_id: String,
}

const WEBHOOK_COLUMNS: &str = "id, project_id, url, events, secret, key_id, created_at";
const DELIVERY_COLUMNS: &str = "id, webhook_id, event, body, status, attempts, next_attempt_at, created_at, updated_at";

fn corrupt(what: String) -> crate::store::sql::SqlError {
    crate::store::sql::SqlError::column(0, what)
}

fn webhook_row(row: &Row<'_>) -> crate::store::sql::Result<Webhook> {
    let events: String = row.get(3)?;
    let names: Vec<String> =
        serde_json::from_str(&events).map_err(|e| corrupt(format!("webhook events {events:?}: {e}")))?;
    let events = names
        .iter()
        .map(|name| WebhookEvent::parse(name).ok_or_else(|| corrupt(format!("webhook event {name:?}"))))
        .collect::<crate::store::sql::Result<Vec<_>>>()?;
    Ok(Webhook {
        id: row.get(0)?,
        project_id: row.get(1)?,
        url: row.get(2)?,
        events,
        secret: row.get(4)?,
        key_id: row.get(5)?,
        created_at: row.get(6)?,
    })
}

fn delivery_row(row: &Row<'_>) -> crate::store::sql::Result<Delivery> {
    let status: String = row.get(4)?;
    let attempts: String = row.get(5)?;
    Ok(Delivery {
        id: row.get(0)?,
        webhook_id: row.get(1)?,
        event: row.get(2)?,
        body: row.get(3)?,
        status: DeliveryStatus::parse(&status).ok_or_else(|| corrupt(format!("delivery status {status:?}")))?,
        attempts: serde_json::from_str(&attempts).map_err(|e| corrupt(format!("delivery attempts: {e}")))?,
        next_attempt_at: row.get(6)?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
    })
}

/// Deletes every delivery and webhook of `project_id` (with the project).
pub(crate) fn delete_project_webhooks(tx: &Transaction<'_>, project_id: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM webhook_deliveries WHERE project_id = ?1", [project_id])?;
    tx.execute("DELETE FROM webhooks WHERE project_id = ?1", [project_id])?;
    Ok(())
}

impl Store {
    /// Adds a webhook of `url` for `events` to `account`'s project `project_id`, signed with `secret` (whose id it
    /// makes), unless the project has [`WEBHOOKS_PER_PROJECT_MAX`] already; `None` if there is no such project.
    pub fn create_webhook(
        &self,
        account: &AccountId,
        project_id: &str,
        url: &str,
        events: &[WebhookEvent],
        secret: &str,
    ) -> Result<Option<Webhook>, StoreError> {
        assert!(!events.is_empty(), "a webhook without events");
        let (ms, created_at) = now();
        let webhook = Webhook {
            id: new_id("wh_", ms),
            project_id: project_id.to_owned(),
            url: url.to_owned(),
            events: events.to_vec(),
            secret: secret.to_owned(),
            key_id: new_id("whk_", ms),
            created_at,
        };
        let names: Vec<&str> = events.iter().map(|e| e.as_str()).collect();
        let names = serde_json::to_string(&names).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !has_project(&tx, account, project_id)? {
            return Ok(None);
        }
        let count: i64 = tx.query_row(
            "SELECT count(*) FROM webhooks WHERE project_id = ?1",
            [project_id],
            |row| row.get(0),
        )?;
        check_quota(count, WEBHOOKS_PER_PROJECT_MAX, "webhooks", "the project")?;
        tx.execute(
            &format!("INSERT INTO webhooks ({WEBHOOK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            params![
                webhook.id,
                webhook.project_id,
                webhook.url,
                names,
                webhook.secret,
                webhook.key_id,
                webhook.created_at
            ],
        )?;
        tx.commit()?;
        Ok(Some(webhook))
    }

    /// The webhooks of `account`'s project `project_id` (at most [`WEBHOOKS_PER_PROJECT_MAX`]), oldest first;
    /// `None` if there is no such project.
    pub fn list_webhooks(&self, account: &AccountId, project_id: &str) -> Result<Option<Vec<Webhook>>, StoreError> {
        let conn = self.conn()?;
        if !has_project(&conn, account, project_id)? {
            return Ok(None);
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE project_id = ?1 ORDER BY id"
        ))?;
        let webhooks = stmt
            .query_map([project_id], webhook_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(webhooks))
    }

    /// Webhook `id` of `account`'s project `project_id`.
    pub fn get_webhook(&self, account: &AccountId, project_id: &str, id: &str) -> Result<Option<Webhook>, StoreError> {
        let conn = self.conn()?;
        if !has_project(&conn, account, project_id)? {
            return Ok(None);
        }
        Ok(conn
            .query_row(
                &format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE project_id = ?1 AND id = ?2"),
                params![project_id, id],
                webhook_row,
            )
            .optional()?)
    }

    /// Deletes webhook `id` of `account`'s project `project_id` with its deliveries (pending ones are not sent);
    /// whether there was one.
    pub fn delete_webhook(&self, account: &AccountId, project_id: &str, id: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !has_project(&tx, account, project_id)? {
            return Ok(false);
        }
        let deleted = tx.execute(
            "DELETE FROM webhooks WHERE project_id = ?1 AND id = ?2",
            params![project_id, id],
        )?;
        tx.execute("DELETE FROM webhook_deliveries WHERE webhook_id = ?1", [id])?;
        tx.commit()?;
        Ok(deleted == 1)
    }

    /// Whether project `project_id` has a webhook (subscribed to any event): a read, for skipping the write of
    /// [`Store::enqueue_deliveries`] when nobody listens.
    pub fn project_has_webhooks(&self, project_id: &str) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                "SELECT 1 FROM webhooks WHERE project_id = ?1 LIMIT 1",
                [project_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Queues a delivery of `body` to every webhook of `project_id` subscribed to `event`, due now, and drops
    /// each such webhook's deliveries past [`DELIVERIES_PER_WEBHOOK_MAX`]; one transaction. Returns how many were
    /// queued.
    pub fn enqueue_deliveries(&self, project_id: &str, event: WebhookEvent, body: &str) -> Result<usize, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let queued = enqueue_on(&tx, project_id, event, body, None)?;
        tx.commit()?;
        Ok(queued)
    }

    /// Up to `limit` pending deliveries due at `at` (ISO 8601 UTC as stored) or before, earliest first, with their
    /// webhooks' URLs and keys.
    pub fn due_deliveries(&self, at: &str, limit: usize) -> Result<Vec<DueDelivery>, StoreError> {
        let conn = self.conn()?;
        let columns: Vec<String> = DELIVERY_COLUMNS.split(", ").map(|c| format!("d.{c}")).collect();
        let mut stmt = conn.prepare(&format!(
            "SELECT {}, w.url, w.secret, w.key_id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
             WHERE d.status = 'pending' AND d.next_attempt_at <= ?1 ORDER BY d.next_attempt_at LIMIT ?2",
            columns.join(", ")
        ))?;
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX);
        let due = stmt
            .query_map(params![at, fetch], |row| {
                Ok(DueDelivery {
                    delivery: delivery_row(row)?,
                    url: row.get(9)?,
                    secret: row.get(10)?,
                    key_id: row.get(11)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(due)
    }

    /// Records `attempt` of pending delivery `id`: its new `status`, and when the next attempt is due if it stays
    /// pending. A delivery gone meanwhile (its webhook deleted) is no error.
    pub fn record_attempt(
        &self,
        id: &str,
        attempt: &Attempt,
        status: DeliveryStatus,
        next_attempt_at: Option<&str>,
    ) -> Result<(), StoreError> {
        assert!(
            (status == DeliveryStatus::Pending) == next_attempt_at.is_some(),
            "a pending delivery has a next attempt, an ended one none: {status:?} {next_attempt_at:?}"
        );
        let (_, at) = now();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let attempts: Option<String> = tx
            .query_row(
                "SELECT attempts FROM webhook_deliveries WHERE id = ?1 AND status = 'pending'",
                [id],
                |row| row.get(0),
            )
            .optional()?;
        let Some(attempts) = attempts else {
            return Ok(());
        };
        let mut attempts: Vec<Attempt> =
            serde_json::from_str(&attempts).map_err(|e| StoreError::Corrupt(format!("delivery attempts: {e}")))?;
        attempts.push(attempt.clone());
        let overflow = attempts.len().saturating_sub(ATTEMPTS_PER_DELIVERY_MAX as usize);
        attempts.drain(..overflow);
        let attempts = serde_json::to_string(&attempts).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        tx.execute(
            "UPDATE webhook_deliveries SET status = ?2, attempts = ?3, next_attempt_at = ?4, updated_at = ?5
             WHERE id = ?1",
            params![id, status.as_str(), attempts, next_attempt_at, at],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Up to `limit` deliveries of webhook `webhook_id` of `account`'s project `project_id`, newest first, older
    /// than `before`; `None` if there is no such webhook.
    pub fn list_deliveries(
        &self,
        account: &AccountId,
        project_id: &str,
        webhook_id: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Option<Page<Delivery>>, StoreError> {
        assert!(limit > 0, "limit {limit}");
        if self.get_webhook(account, project_id, webhook_id)?.is_none() {
            return Ok(None);
        }
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries
             WHERE webhook_id = ?1 AND id < ?2 AND held_for_timeline IS NULL
             ORDER BY id DESC LIMIT ?3"
        ))?;
        // One extra row says whether another page follows; `~` sorts after every id character.
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let items = stmt
            .query_map(params![webhook_id, before.unwrap_or("~"), fetch], delivery_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Page::from_one_extra(items, limit, |d| d.id.clone())))
    }
}

/// [`Store::enqueue_deliveries`] on `tx`. With `held_for`, the deliveries are *held* for a branch creation on
/// that timeline: not due (no next attempt) and not listed until [`release_held`] (the creation known made,
/// in the transaction that records it) or gone with [`drop_held`] (the creation taken back).
pub(crate) fn enqueue_on(
    tx: &Transaction<'_>,
    project_id: &str,
    event: WebhookEvent,
    body: &str,
    held_for: Option<TimelineId>,
) -> Result<usize, StoreError> {
    if body.len() > DELIVERY_BODY_BYTES_MAX {
        return Err(StoreError::Corrupt(format!(
            "a {} event body of {} bytes is over {DELIVERY_BODY_BYTES_MAX}",
            event.as_str(),
            body.len()
        )));
    }
    let (ms, at) = now();
    let webhooks = {
        let mut stmt = tx.prepare(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE project_id = ?1"))?;
        let rows = stmt.query_map([project_id], webhook_row)?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    let (next_attempt_at, held) = match held_for {
        Some(timeline) => (None, Some(timeline.to_string())),
        None => (Some(at.clone()), None),
    };
    let mut queued = 0;
    for webhook in webhooks.iter().filter(|w| w.events.contains(&event)) {
        tx.execute(
            &format!(
                "INSERT INTO webhook_deliveries ({DELIVERY_COLUMNS}, project_id, held_for_timeline)
                      VALUES (?1, ?2, ?3, ?4, 'pending', '[]', ?5, ?6, ?6, ?7, ?8)"
            ),
            params![
                new_id("dlv_", ms),
                webhook.id,
                event.as_str(),
                body,
                next_attempt_at,
                at,
                project_id,
                held
            ],
        )?;
        let dropped = tx.execute(
            "DELETE FROM webhook_deliveries WHERE webhook_id = ?1 AND id <= (
                 SELECT id FROM webhook_deliveries WHERE webhook_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
             AND status = 'pending'",
            params![webhook.id, DELIVERIES_PER_WEBHOOK_MAX],
        )?;
        if dropped > 0 {
            tracing::warn!(webhook = %webhook.id, dropped, "pending deliveries dropped: the webhook's log is full");
        }
        tx.execute(
            "DELETE FROM webhook_deliveries WHERE webhook_id = ?1 AND id <= (
                 SELECT id FROM webhook_deliveries WHERE webhook_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
            params![webhook.id, DELIVERIES_PER_WEBHOOK_MAX],
        )?;
        queued += 1;
    }
    Ok(queued)
}

/// Makes the deliveries held for the creation on `timeline` ([`enqueue_on`]) due now, on `tx`; how many.
pub(crate) fn release_held(tx: &Transaction<'_>, timeline: TimelineId) -> Result<usize, StoreError> {
    let (_, at) = now();
    Ok(tx.execute(
        "UPDATE webhook_deliveries SET next_attempt_at = ?2, updated_at = ?2, held_for_timeline = NULL
         WHERE held_for_timeline = ?1",
        params![timeline.to_string(), at],
    )?)
}

/// Deletes the deliveries held for the creation on `timeline` ([`enqueue_on`]), on `tx`: it was taken back.
pub(crate) fn drop_held(tx: &Transaction<'_>, timeline: TimelineId) -> Result<usize, StoreError> {
    Ok(tx.execute(
        "DELETE FROM webhook_deliveries WHERE held_for_timeline = ?1",
        [timeline.to_string()],
    )?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use super::*;
    use crate::store::labels::Labels;

    fn attempt(status_code: u16) -> Attempt {
        Attempt {
            at: "2026-01-01T00:00:00.000Z".to_owned(),
            status_code: Some(status_code),
            error: None,
            duration_ms: 3,
        }
    }

    #[test]
    fn deliveries_queue_by_subscription_and_log_their_attempts() {
        crate::store::scenarios::on_sqlite(deliveries_queue_by_subscription_and_log_their_attempts_on);
    }

    /// [`deliveries_queue_by_subscription_and_log_their_attempts`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn deliveries_queue_by_subscription_and_log_their_attempts_on(open: crate::store::scenarios::Open<'_>) {
        let store = open();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        assert!(!store.project_has_webhooks(&project.id).unwrap());
        let branches = store
            .create_webhook(
                &account,
                &project.id,
                "http://127.0.0.1:1/b",
                &[WebhookEvent::BranchCreated],
                "s1",
            )
            .unwrap()
            .unwrap();
        let operations = store
            .create_webhook(
                &account,
                &project.id,
                "http://127.0.0.1:1/o",
                &[WebhookEvent::OperationFailed],
                "s2",
            )
            .unwrap()
            .unwrap();
        assert!(store.project_has_webhooks(&project.id).unwrap());
        let other = store.create_project(&account, "q", 10, &Labels::new()).unwrap();
        assert!(!store.project_has_webhooks(&other.id).unwrap());
        let stranger = store.create_account().unwrap();
        assert_eq!(store.list_webhooks(&stranger, &project.id).unwrap(), None);
        assert_eq!(store.list_webhooks(&account, &project.id).unwrap().unwrap().len(), 2);
        assert_eq!(
            store
                .enqueue_deliveries(&project.id, WebhookEvent::BranchCreated, "{}")
                .unwrap(),
            1
        );
        assert_eq!(
            store
                .enqueue_deliveries(&project.id, WebhookEvent::BranchDeleted, "{}")
                .unwrap(),
            0
        );
        let due = store.due_deliveries("9999", 10).unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(
            (due[0].url.as_str(), due[0].secret.as_str()),
            ("http://127.0.0.1:1/b", "s1")
        );
        let id = due[0].delivery.id.clone();
        store
            .record_attempt(&id, &attempt(500), DeliveryStatus::Pending, Some("9998"))
            .unwrap();
        assert!(store.due_deliveries("9997", 10).unwrap().is_empty());
        assert_eq!(store.due_deliveries("9998", 10).unwrap().len(), 1);
        store
            .record_attempt(&id, &attempt(204), DeliveryStatus::Delivered, None)
            .unwrap();
        assert!(store.due_deliveries("9999", 10).unwrap().is_empty());
        let log = store
            .list_deliveries(&account, &project.id, &branches.id, None, 10)
            .unwrap()
            .unwrap();
        assert_eq!(log.items.len(), 1);
        assert_eq!(log.items[0].status, DeliveryStatus::Delivered);
        let codes: Vec<_> = log.items[0].attempts.iter().map(|a| a.status_code).collect();
        assert_eq!(codes, [Some(500), Some(204)]);
        // Deleting a webhook takes its deliveries; deleting the project takes the rest.
        assert!(store.delete_webhook(&account, &project.id, &branches.id).unwrap());
        assert!(!store.delete_webhook(&account, &project.id, &branches.id).unwrap());
        store
            .enqueue_deliveries(&project.id, WebhookEvent::OperationFailed, "{}")
            .unwrap();
        store.delete_project(&account, &project.id).unwrap();
        let left: i64 = store
            .conn()
            .unwrap()
            .query_row("SELECT count(*) FROM webhooks", [], |row| row.get(0))
            .unwrap();
        assert_eq!(left, 0);
        assert!(store.due_deliveries("9999", 10).unwrap().is_empty());
        assert_eq!(operations.events, [WebhookEvent::OperationFailed]);
    }

    #[test]
    fn a_project_has_a_bounded_number_of_webhooks() {
        crate::store::scenarios::on_sqlite(a_project_has_a_bounded_number_of_webhooks_on);
    }

    /// [`a_project_has_a_bounded_number_of_webhooks`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn a_project_has_a_bounded_number_of_webhooks_on(open: crate::store::scenarios::Open<'_>) {
        let store = open();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        for _ in 0..WEBHOOKS_PER_PROJECT_MAX {
            store
                .create_webhook(&account, &project.id, "http://h/", &[WebhookEvent::BranchCreated], "s")
                .unwrap()
                .unwrap();
        }
        let refused = store.create_webhook(&account, &project.id, "http://h/", &[WebhookEvent::BranchCreated], "s");
        assert!(matches!(refused, Err(StoreError::QuotaExceeded(_))), "{refused:?}");
    }
}
