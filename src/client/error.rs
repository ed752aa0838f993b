//! Why a client command failed, and the exit code each reason gives: the codes are a contract scripts rely on
//! (listed in `cambium --help` through [`EXIT_CODES_HELP`], and in the README), so a reason never changes code.

use std::fmt;

/// The exit codes, as `--help` prints them.
pub(crate) const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   success
  1   a failure on this side (a file, psql missing, an answer that is not the API's)
  2   usage: a bad flag, argument or value
  3   the API could not be reached (connection refused, name, TLS, no answer in time)
  4   unauthenticated or forbidden (HTTP 401, 403; quota_exceeded too), or no API key found
  5   not found (HTTP 404)
  6   conflict (HTTP 409): a name taken, the default branch, an operation in progress
  7   invalid request (HTTP 400, 405, 422): a bad LSN or time, a point outside the history
  8   try again later (HTTP 408, 429, 503)
  9   the server failed (HTTP 500 and other 5xx)
  10  the operation waited for ended `failed`
  11  --wait gave up: the operation is still running";

/// An error the API answered with: its envelope (`{"error": {code, message, request_id}}`), or what stood in its
/// place when the answer was not one (a proxy's page, say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiFailure {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The envelope's `code` (`not_found`, `conflict`, …); `http_<status>` when there was no envelope.
    pub(crate) code: String,
    /// The envelope's `message`, or the start of the body.
    pub(crate) message: String,
    /// The envelope's `request_id`, else the `X-Request-Id` header, if any.
    pub(crate) request_id: Option<String>,
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (HTTP {}, {}", self.message, self.status, self.code)?;
        if let Some(id) = &self.request_id {
            write!(f, ", request {id}")?;
        }
        write!(f, ")")
    }
}

/// Why a client command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// A bad argument that clap could not check (a `--set` without `=`, a malformed point in time).
    #[error("{0}")]
    Usage(String),
    /// No API key in the flag, the variable or the key file.
    #[error("no API key: {0}")]
    NoKey(String),
    /// The API was not reached, or did not answer in time.
    #[error("could not reach the API at {url}: {reason}")]
    Unreachable {
        /// What was asked.
        url: String,
        /// Why, as the HTTP client says it.
        reason: String,
    },
    /// The API answered with an error.
    #[error("{0}")]
    Api(ApiFailure),
    /// The operation waited for ended `failed`.
    #[error("operation {id} failed: {message}")]
    OperationFailed {
        /// `op_…`.
        id: String,
        /// The operation's `error`.
        message: String,
    },
    /// `--wait` ran out of time with the operation still running.
    #[error("operation {id} is still running after {waited_s} s (see `cambium operations wait {id}`)")]
    WaitTimedOut {
        /// `op_…`.
        id: String,
        /// How long the client waited.
        waited_s: u64,
    },
    /// A failure on this side: a file, a program to run, an answer that does not parse.
    #[error("{0}")]
    Local(String),
}

impl ClientError {
    /// The process exit code for this error (see [`EXIT_CODES_HELP`]).
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            ClientError::Local(_) => 1,
            ClientError::Usage(_) => 2,
            ClientError::Unreachable { .. } => 3,
            ClientError::NoKey(_) => 4,
            ClientError::Api(failure) => exit_code_of_status(failure.status),
            ClientError::OperationFailed { .. } => 10,
            ClientError::WaitTimedOut { .. } => 11,
        }
    }
}

/// The exit code of an API error by its HTTP status.
fn exit_code_of_status(status: u16) -> i32 {
    match status {
        401 | 403 => 4,
        404 => 5,
        409 => 6,
        408 | 429 | 503 => 8,
        400..=499 => 7,
        500..=599 => 9,
        // A status the API never sends as an error (a redirect a proxy made, say): not the API's answer.
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16) -> ClientError {
        ClientError::Api(ApiFailure {
            status,
            code: "x".to_owned(),
            message: "m".to_owned(),
            request_id: None,
        })
    }

    #[test]
    fn every_status_class_has_its_code() {
        for (status, code) in [
            (400, 7),
            (401, 4),
            (403, 4),
            (404, 5),
            (405, 7),
            (408, 8),
            (409, 6),
            (422, 7),
            (429, 8),
            (500, 9),
            (502, 9),
            (503, 8),
            (302, 1),
        ] {
            assert_eq!(api(status).exit_code(), code, "HTTP {status}");
        }
        let failed = ClientError::OperationFailed {
            id: "op_1".to_owned(),
            message: "m".to_owned(),
        };
        assert_eq!(failed.exit_code(), 10);
        let timed_out = ClientError::WaitTimedOut {
            id: "op_1".to_owned(),
            waited_s: 1,
        };
        assert_eq!(timed_out.exit_code(), 11);
    }

    #[test]
    fn an_api_error_names_its_message_code_and_request() {
        let failure = ApiFailure {
            status: 409,
            code: "conflict".to_owned(),
            message: "the default branch cannot be deleted".to_owned(),
            request_id: Some("req_01".to_owned()),
        };
        assert_eq!(
            failure.to_string(),
            "the default branch cannot be deleted (HTTP 409, conflict, request req_01)"
        );
    }
}
