//! `--wait`: following an operation to its end by long-polling `GET /v1/operations/{id}?wait=…`, with a
//! spinner on stderr while it runs — drawn only when stderr is a terminal (indicatif hides it otherwise), so a
//! script's output and logs carry no progress characters.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use super::error::ClientError;
use super::http::Api;

/// The longest single long-poll, in seconds (the API cuts waits at 60 s; a shorter one keeps the spinner's
/// status fresh and a lost connection cheap).
pub(crate) const LONG_POLL_S: u64 = 10;
/// How often the spinner redraws.
const TICK_MS: u64 = 120;

/// The `id` of an operation object.
fn id_of(operation: &Value) -> Result<String, ClientError> {
    operation
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ClientError::Local(format!("an operation without an id: {operation}")))
}

/// Whether an operation object has ended (`finished` or `failed`; anything but `running`).
fn has_ended(operation: &Value) -> bool {
    operation.get("status").and_then(Value::as_str) != Some("running")
}

/// Follows `operation` until it ends or `timeout` passes; the ended operation as the API last showed it.
/// A spinner names it on a terminal meanwhile. Out of time: [`ClientError::WaitTimedOut`].
pub(crate) async fn wait(api: &Api, operation: &Value, timeout: Duration) -> Result<Value, ClientError> {
    let id = id_of(operation)?;
    let mut current = operation.clone();
    if has_ended(&current) {
        return Ok(current);
    }
    let action = current
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("operation")
        .to_owned();
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    spinner.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message(format!("{action} {id} running"));
    spinner.enable_steady_tick(Duration::from_millis(TICK_MS));
    let started = Instant::now();
    let result = loop {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            break Err(ClientError::WaitTimedOut {
                id: id.clone(),
                waited_s: started.elapsed().as_secs(),
            });
        }
        let poll_ms = left.min(Duration::from_secs(LONG_POLL_S)).as_millis().max(1);
        let reply = match api.get(&format!("/v1/operations/{id}?wait={poll_ms}ms")).await {
            Ok(reply) => reply,
            Err(error) => break Err(error),
        };
        match reply.get("operation") {
            Some(operation) => current = operation.clone(),
            None => {
                break Err(ClientError::Local(format!(
                    "GET /v1/operations/{id} answered no operation"
                )))
            }
        }
        if has_ended(&current) {
            break Ok(current);
        }
    };
    spinner.finish_and_clear();
    result
}

/// `Ok` for a finished operation, [`ClientError::OperationFailed`] with its `error` for a failed one.
pub(crate) fn check_finished(operation: &Value) -> Result<(), ClientError> {
    match operation.get("status").and_then(Value::as_str) {
        Some("failed") => Err(ClientError::OperationFailed {
            id: id_of(operation)?,
            message: operation
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .to_owned(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_a_failed_operation_is_an_error() {
        assert!(check_finished(&json!({"id": "op_1", "status": "finished"})).is_ok());
        match check_finished(&json!({"id": "op_1", "status": "failed", "error": "the project was deleted"})) {
            Err(ClientError::OperationFailed { id, message }) => {
                assert_eq!(id, "op_1");
                assert_eq!(message, "the project was deleted");
            }
            other => panic!("{other:?}"),
        }
        assert!(has_ended(&json!({"status": "failed"})));
        assert!(!has_ended(&json!({"status": "running"})));
    }
}
