//! The webhook sender: POSTs the deliveries the metadata holds `pending` (`store::webhooks`), signed, and records
//! each attempt; a failed attempt is retried with exponential backoff until [`WebhookConfig::attempts_max`].
//!
//! **Signature.** Each request carries `Cambium-Signature: t=<unix seconds>,k=<key id>,v1=<hex>`, where `<hex>` is
//! HMAC-SHA256 under the webhook's secret of `<t>.<body>` (the timestamp, a dot, the exact body bytes), as
//! [`sign`] computes it. A receiver recomputes it, compares in constant time, and refuses old timestamps (a
//! replay). `Cambium-Event`, `Cambium-Delivery` (the delivery id, the same on every retry: deliveries are at
//! least once, so receivers deduplicate on it) and `Cambium-Webhook` name what it is.
//!
//! **Durable and bounded.** The queue is the metadata: an event's deliveries are rows before anything is sent,
//! an attempt is recorded after it ends, and the sender reads what is due each round, so a restart goes on where
//! the last process stopped (an attempt cut short by the crash is made again). A round sends at most
//! [`DELIVERIES_PER_ROUND_MAX`] at once, each within [`WebhookConfig::request_timeout_ms`]; redirects are not
//! followed; a 2XX answer delivers, anything else (or no answer) is retried after
//! `first_retry_wait_ms * 2^(attempts - 1)`, at most [`RETRY_WAIT_MAX_MS`], until the attempts run out
//! (`failed`). With the defaults (10 attempts from 1 s) a delivery is given up about 8.5 minutes after its event.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use hmac::{KeyInit, Mac};
use tokio::sync::Notify;

use crate::control::Control;
use crate::store::webhooks::{Attempt, DeliveryStatus, DueDelivery, ATTEMPTS_PER_DELIVERY_MAX};
use crate::store::{now, timestamp_text};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "cambium-signature";
/// The event name header.
pub const EVENT_HEADER: &str = "cambium-event";
/// The delivery id header (the same on every attempt).
pub const DELIVERY_HEADER: &str = "cambium-delivery";
/// The webhook id header.
pub const WEBHOOK_HEADER: &str = "cambium-webhook";
/// Deliveries sent at once, at most.
pub const DELIVERIES_PER_ROUND_MAX: usize = 16;
/// The longest wait between two attempts.
pub const RETRY_WAIT_MAX_MS: u64 = 3_600_000;
/// The longest wait between two looks at the queue when nothing wakes the sender.
const IDLE_POLL_MS: u64 = 1_000;
/// The longest error message kept for an attempt.
const ERROR_LEN_MAX: usize = 512;

/// How the sender behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookConfig {
    /// The wait after a delivery's first failed attempt; it doubles after each one.
    pub first_retry_wait_ms: u64,
    /// Attempts a delivery makes before it is `failed`, 1..=[`ATTEMPTS_PER_DELIVERY_MAX`].
    pub attempts_max: u32,
    /// How long one attempt may take, connection included.
    pub request_timeout_ms: u64,
}

impl Default for WebhookConfig {
    fn default() -> WebhookConfig {
        WebhookConfig {
            first_retry_wait_ms: 1_000,
            attempts_max: 10,
            request_timeout_ms: 10_000,
        }
    }
}

/// The sender could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The configuration is out of its bounds.
    #[error("webhook configuration: {0}")]
    Config(String),
    /// The HTTP client could not be built.
    #[error("webhook HTTP client: {0}")]
    Client(String),
}

/// The hex HMAC-SHA256 under `secret` of `<timestamp_s>.<body>`: the `v1` of [`SIGNATURE_HEADER`].
pub fn sign(secret: &[u8], timestamp_s: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The wait before the next attempt after `attempts_made` (1 or more) failed ones, or `None` if they ran out.
pub fn retry_wait_ms(config: &WebhookConfig, attempts_made: u32) -> Option<u64> {
    assert!(attempts_made >= 1, "no attempt made");
    if attempts_made >= config.attempts_max {
        return None;
    }
    let doublings = (attempts_made - 1).min(63);
    Some(
        config
            .first_retry_wait_ms
            .saturating_mul(1u64 << doublings)
            .min(RETRY_WAIT_MAX_MS),
    )
}

/// Starts the sender for `control`'s deliveries; it runs until `control` is dropped or the task aborted.
pub fn spawn(control: &Arc<Control>, config: WebhookConfig) -> Result<tokio::task::JoinHandle<()>, WebhookError> {
    if !(1..=ATTEMPTS_PER_DELIVERY_MAX).contains(&config.attempts_max) {
        return Err(WebhookError::Config(format!(
            "attempts_max {} is not in 1..={ATTEMPTS_PER_DELIVERY_MAX}",
            config.attempts_max
        )));
    }
    // reqwest is built with rustls and no bundled provider; the process's default may already be set.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(config.request_timeout_ms))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent("cambium-webhooks")
        .build()
        .map_err(|e| WebhookError::Client(e.to_string()))?;
    let wake = control.webhook_wake();
    let control = Arc::downgrade(control);
    Ok(tokio::spawn(async move {
        loop {
            let sent = match round(&control, &client, &config).await {
                Some(sent) => sent,
                None => return,
            };
            if sent == 0 {
                tokio::select! {
                    () = wake.notified() => {}
                    () = tokio::time::sleep(Duration::from_millis(IDLE_POLL_MS)) => {}
                }
            }
        }
    }))
}

/// One round: sends what is due (at most [`DELIVERIES_PER_ROUND_MAX`], at once) and records the attempts;
/// returns how many were sent, or `None` once the control plane is gone.
async fn round(control: &Weak<Control>, client: &reqwest::Client, config: &WebhookConfig) -> Option<usize> {
    let control = control.upgrade()?;
    let (_, at) = now();
    let due = match control
        .blocking(move |store| store.due_deliveries(&at, DELIVERIES_PER_ROUND_MAX))
        .await
    {
        Ok(due) => due,
        Err(error) => {
            tracing::error!(?error, "the webhook deliveries could not be read");
            return Some(0);
        }
    };
    let sent = due.len();
    let attempts = futures::future::join_all(due.iter().map(|d| send(client, d))).await;
    for (due, attempt) in due.into_iter().zip(attempts) {
        record(&control, config, &due, attempt).await;
    }
    Some(sent)
}

/// Records `attempt` at `due`: delivered on a 2XX, else pending until the next attempt or failed.
async fn record(control: &Control, config: &WebhookConfig, due: &DueDelivery, attempt: Attempt) {
    let delivered = attempt.status_code.is_some_and(|code| (200..300).contains(&code));
    let attempts_made = u32::try_from(due.delivery.attempts.len() + 1).unwrap_or(u32::MAX);
    let (status, next) = if delivered {
        (DeliveryStatus::Delivered, None)
    } else {
        match retry_wait_ms(config, attempts_made) {
            Some(wait_ms) => {
                let next = jiff::Timestamp::now()
                    .checked_add(jiff::SignedDuration::from_millis(
                        i64::try_from(wait_ms).unwrap_or(i64::MAX),
                    ))
                    .map(timestamp_text)
                    .unwrap_or_else(|_| now().1);
                (DeliveryStatus::Pending, Some(next))
            }
            None => (DeliveryStatus::Failed, None),
        }
    };
    if status != DeliveryStatus::Pending {
        tracing::info!(delivery = %due.delivery.id, webhook = %due.delivery.webhook_id, status = status.as_str(), attempts_made, "a webhook delivery ended");
    }
    let id = due.delivery.id.clone();
    if let Err(error) = control
        .blocking(move |store| store.record_attempt(&id, &attempt, status, next.as_deref()))
        .await
    {
        tracing::error!(delivery = %due.delivery.id, ?error, "a webhook attempt could not be recorded");
    }
}

/// One attempt at `due`, signed now.
async fn send(client: &reqwest::Client, due: &DueDelivery) -> Attempt {
    let (_, at) = now();
    let started = Instant::now();
    let timestamp_s = jiff::Timestamp::now().as_second();
    let signature = sign(due.secret.as_bytes(), timestamp_s, due.delivery.body.as_bytes());
    let result = client
        .post(&due.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(EVENT_HEADER, &due.delivery.event)
        .header(DELIVERY_HEADER, &due.delivery.id)
        .header(WEBHOOK_HEADER, &due.delivery.webhook_id)
        .header(
            SIGNATURE_HEADER,
            format!("t={timestamp_s},k={},v1={signature}", due.key_id),
        )
        .body(due.delivery.body.clone())
        .send()
        .await;
    let (status_code, error) = match result {
        Ok(response) => (Some(response.status().as_u16()), None),
        Err(error) => {
            let mut message = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            (None, Some(message.chars().take(ERROR_LEN_MAX).collect()))
        }
    };
    Attempt {
        at,
        status_code,
        error,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// What wakes the sender when an event queued deliveries.
pub(crate) fn new_wake() -> Arc<Notify> {
    Arc::new(Notify::new())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_timestamp_and_body() {
        // Python's `hmac.new(b"Jefe", b"1732480000.what do ya want for nothing?", hashlib.sha256).hexdigest()`.
        assert_eq!(
            sign(b"Jefe", 1_732_480_000, b"what do ya want for nothing?"),
            "039aec6459e413f524d35e5c99d6e3908dbdef06a9f4d71d5e14a90737e25409"
        );
        assert_ne!(sign(b"k", 17, b"{}"), sign(b"k", 18, b"{}"));
        assert_ne!(sign(b"k", 17, b"{}"), sign(b"l", 17, b"{}"));
    }

    #[test]
    fn retries_back_off_exponentially_and_stop() {
        let config = WebhookConfig {
            first_retry_wait_ms: 1_000,
            attempts_max: 4,
            request_timeout_ms: 1,
        };
        let waits: Vec<_> = (1..=5).map(|n| retry_wait_ms(&config, n)).collect();
        assert_eq!(waits, [Some(1_000), Some(2_000), Some(4_000), None, None]);
        let long = WebhookConfig {
            attempts_max: 20,
            ..config
        };
        assert_eq!(retry_wait_ms(&long, 19), Some(RETRY_WAIT_MAX_MS));
    }
}
