//! `/v1/projects/{id}/webhooks`: a project's webhooks and their delivery logs (issue 15). What is sent, how it is
//! signed and retried is `crate::webhooks`; the queue and log are `store::webhooks`.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::views::ErrorEnvelope;
use super::{object_body, parse_id, AppState, ListParams};
use crate::error::ApiError;
use crate::store::webhooks::{Attempt, Delivery, Webhook, WebhookEvent, WEBHOOKS_PER_PROJECT_MAX};
use crate::store::AccountId;

/// The longest webhook URL, in bytes.
const URL_LEN_MAX_BYTES: usize = 2_048;

/// An event a webhook may subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub(crate) enum EventName {
    /// An operation ended `finished`; the body is `{"operation": …}`.
    #[serde(rename = "operation.finished")]
    OperationFinished,
    /// An operation ended `failed`; the body is `{"operation": …}`.
    #[serde(rename = "operation.failed")]
    OperationFailed,
    /// A branch was created; `{"branch": …}`.
    #[serde(rename = "branch.created")]
    BranchCreated,
    /// A branch was deleted by a call; `{"branch": …}` as it was.
    #[serde(rename = "branch.deleted")]
    BranchDeleted,
    /// A branch was deleted by its expiry; `{"branch": …}` as it was.
    #[serde(rename = "branch.expired")]
    BranchExpired,
    /// A branch was restored; `{"branch": …}` after the restore.
    #[serde(rename = "branch.restored")]
    BranchRestored,
}

impl From<EventName> for WebhookEvent {
    fn from(name: EventName) -> WebhookEvent {
        match name {
            EventName::OperationFinished => WebhookEvent::OperationFinished,
            EventName::OperationFailed => WebhookEvent::OperationFailed,
            EventName::BranchCreated => WebhookEvent::BranchCreated,
            EventName::BranchDeleted => WebhookEvent::BranchDeleted,
            EventName::BranchExpired => WebhookEvent::BranchExpired,
            EventName::BranchRestored => WebhookEvent::BranchRestored,
        }
    }
}

/// The most event names one subscription lists: one of each kind (the `maxItems` of `events`).
const EVENTS_MAX: usize = 6;

/// Subscribes a URL to a project's events.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateWebhook {
    /// Where deliveries are POSTed: `http` or `https`, at most 2 048 bytes. Redirects are not followed.
    #[schema(max_length = 2048, example = "https://ci.example.com/cambium")]
    url: String,
    /// The events to receive (at least one, at most [`EVENTS_MAX`] names; repeats count once).
    #[schema(min_items = 1, max_items = 6)]
    events: Vec<EventName>,
}

/// A webhook.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WebhookView {
    /// `wh_…`.
    id: String,
    project_id: String,
    url: String,
    events: Vec<String>,
    /// The id of the signing key, named as `k=` in each delivery's `Cambium-Signature`.
    signing_key_id: String,
    /// The signing secret (HMAC-SHA256 key), only in the response that created the webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
    /// ISO 8601 UTC.
    created_at: String,
}

impl WebhookView {
    fn new(webhook: Webhook, show_secret: ShowSecret) -> WebhookView {
        WebhookView {
            id: webhook.id,
            project_id: webhook.project_id,
            url: webhook.url,
            events: webhook.events.iter().map(|e| e.as_str().to_owned()).collect(),
            signing_key_id: webhook.key_id,
            secret: (show_secret == ShowSecret::Yes).then_some(webhook.secret),
            created_at: webhook.created_at,
        }
    }
}

/// Whether a response shows the signing secret (only the creation's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShowSecret {
    Yes,
    No,
}

/// `{webhook}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WebhookEnvelope {
    webhook: WebhookView,
}

/// `{webhooks}`, oldest first (a project has at most 10).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WebhookList {
    webhooks: Vec<WebhookView>,
}

/// One attempt at a delivery.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AttemptView {
    /// ISO 8601 UTC: when it started.
    at: String,
    /// The receiver's HTTP status; absent if it did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    status_code: Option<u16>,
    /// Why no answer came; absent if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    duration_ms: u64,
}

impl From<Attempt> for AttemptView {
    fn from(attempt: Attempt) -> AttemptView {
        AttemptView {
            at: attempt.at,
            status_code: attempt.status_code,
            error: attempt.error,
            duration_ms: attempt.duration_ms,
        }
    }
}

/// A delivery of one event to one webhook.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveryView {
    /// `dlv_…`: the `Cambium-Delivery` header, the same on every attempt.
    id: String,
    webhook_id: String,
    /// The event name.
    event: String,
    /// `pending` (another attempt is due), `delivered` (a 2XX came) or `failed` (the attempts ran out).
    status: String,
    /// The last attempt's HTTP status, if it got one.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_status_code: Option<u16>,
    /// Every attempt, oldest first.
    attempts: Vec<AttemptView>,
    /// When the next attempt is due (ISO 8601 UTC), while pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_attempt_at: Option<String>,
    /// ISO 8601 UTC: when the event happened.
    created_at: String,
    /// ISO 8601 UTC: the last change.
    updated_at: String,
}

impl From<Delivery> for DeliveryView {
    fn from(delivery: Delivery) -> DeliveryView {
        DeliveryView {
            id: delivery.id,
            webhook_id: delivery.webhook_id,
            event: delivery.event,
            status: delivery.status.as_str().to_owned(),
            last_status_code: delivery.attempts.last().and_then(|a| a.status_code),
            attempts: delivery.attempts.into_iter().map(Into::into).collect(),
            next_attempt_at: delivery.next_attempt_at,
            created_at: delivery.created_at,
            updated_at: delivery.updated_at,
        }
    }
}

/// `{deliveries, next_cursor}`, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveryList {
    deliveries: Vec<DeliveryView>,
    next_cursor: Option<String>,
}

/// `url` if it is an absolute `http` or `https` URL with a host, at most [`URL_LEN_MAX_BYTES`].
fn checked_url(url: String) -> Result<String, ApiError> {
    if url.len() > URL_LEN_MAX_BYTES {
        return Err(ApiError::InvalidRequest(format!(
            "`url` must be at most {URL_LEN_MAX_BYTES} bytes"
        )));
    }
    let parsed = reqwest::Url::parse(&url).map_err(|e| ApiError::InvalidRequest(format!("`url` {url:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::InvalidRequest(format!(
            "`url` {url:?} must be an http or https URL with a host"
        )));
    }
    Ok(url)
}

/// A new signing secret: `whsec_` and 32 random bytes in hex.
fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    // SystemRandom fails only if the OS has no randomness source: nothing can run then.
    SystemRandom::new()
        .fill(&mut bytes)
        .unwrap_or_else(|_| panic!("the OS random source failed"));
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("whsec_{hex}")
}

/// Lists the project's webhooks (without their secrets).
#[utoipa::path(get, path = "/v1/projects/{id}/webhooks", tag = "webhooks",
    params(("id" = String, Path, description = "project id")),
    responses((status = 200, body = WebhookList), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(project_id): Path<String>,
) -> Result<Json<WebhookList>, ApiError> {
    let project_id = parse_id(project_id, "proj_")?;
    let webhooks = state
        .control
        .blocking(move |store| store.list_webhooks(&account, &project_id))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(WebhookList {
        webhooks: webhooks
            .into_iter()
            .map(|w| WebhookView::new(w, ShowSecret::No))
            .collect(),
    }))
}

/// Subscribes a URL to the project's events (at most 10 webhooks a project). The response alone shows the signing
/// secret: each delivery is a POST of the resource as the API returns it, with `Cambium-Signature:
/// t=<unix seconds>,k=<signing_key_id>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the secret>`, `Cambium-Event`,
/// `Cambium-Delivery` and `Cambium-Webhook`; a non-2XX answer is retried with exponential backoff (by default 10
/// attempts over about 8.5 minutes).
#[utoipa::path(post, path = "/v1/projects/{id}/webhooks", tag = "webhooks",
    params(("id" = String, Path, description = "project id")), request_body = CreateWebhook,
    responses((status = 201, body = WebhookEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(project_id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<WebhookEnvelope>), ApiError> {
    let project_id = parse_id(project_id, "proj_")?;
    let body: CreateWebhook = object_body(body)?;
    let url = checked_url(body.url)?;
    // As the schema says (`maxItems`): a longer list is refused even if its repeats would fit.
    if body.events.len() > EVENTS_MAX {
        return Err(ApiError::InvalidRequest(format!(
            "`events` names at most {EVENTS_MAX} events"
        )));
    }
    let mut events: Vec<WebhookEvent> = Vec::new();
    for event in body.events.into_iter().map(WebhookEvent::from) {
        if !events.contains(&event) {
            events.push(event);
        }
    }
    if events.is_empty() {
        return Err(ApiError::InvalidRequest(
            "`events` must name at least one event".to_owned(),
        ));
    }
    let secret = new_secret();
    let webhook = state
        .control
        .blocking(move |store| store.create_webhook(&account, &project_id, &url, &events, &secret))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok((
        StatusCode::CREATED,
        Json(WebhookEnvelope {
            webhook: WebhookView::new(webhook, ShowSecret::Yes),
        }),
    ))
}

/// Gets a webhook (without its secret).
#[utoipa::path(get, path = "/v1/projects/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = String, Path, description = "project id"), ("webhook_id" = String, Path)),
    responses((status = 200, body = WebhookEnvelope), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path((project_id, id)): Path<(String, String)>,
) -> Result<Json<WebhookEnvelope>, ApiError> {
    let (project_id, id) = (parse_id(project_id, "proj_")?, parse_id(id, "wh_")?);
    let webhook = state
        .control
        .blocking(move |store| store.get_webhook(&account, &project_id, &id))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(WebhookEnvelope {
        webhook: WebhookView::new(webhook, ShowSecret::No),
    }))
}

/// Deletes a webhook with its delivery log; its pending deliveries are not sent.
#[utoipa::path(delete, path = "/v1/projects/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = String, Path, description = "project id"), ("webhook_id" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path((project_id, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let (project_id, id) = (parse_id(project_id, "proj_")?, parse_id(id, "wh_")?);
    let deleted = state
        .control
        .blocking(move |store| store.delete_webhook(&account, &project_id, &id))
        .await?;
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound)
    }
}

/// The webhook's delivery log, newest first: each event's delivery with its status and every attempt's HTTP
/// status (the newest 1 000 deliveries are kept).
#[utoipa::path(get, path = "/v1/projects/{id}/webhooks/{webhook_id}/deliveries", tag = "webhooks",
    params(("id" = String, Path, description = "project id"), ("webhook_id" = String, Path), ListParams),
    responses((status = 200, body = DeliveryList), (status = "4XX", body = ErrorEnvelope)))]
pub(crate) async fn deliveries(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path((project_id, id)): Path<(String, String)>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<DeliveryList>, ApiError> {
    let (project_id, id) = (parse_id(project_id, "proj_")?, parse_id(id, "wh_")?);
    let (limit, before) = params?.checked()?;
    let page = state
        .control
        .blocking(move |store| store.list_deliveries(&account, &project_id, &id, before.as_deref(), limit))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(DeliveryList {
        deliveries: page.items.into_iter().map(Into::into).collect(),
        next_cursor: page.next_after,
    }))
}

const _: () = assert!(
    WEBHOOKS_PER_PROJECT_MAX == 10,
    "the API documents 10 webhooks a project"
);
