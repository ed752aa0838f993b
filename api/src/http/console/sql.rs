//! `POST /console/sql`: runs the console's SQL on a branch of the key's account (and of its project, for a key
//! limited to one), or on a branch as of a point in time (read-only; all a read-only key may do), as any
//! PostgreSQL client would: through this process's own PostgreSQL listener, with the
//! database's password the user gives (the API keeps only its verifier), in the simple query protocol. So the
//! console sees exactly what psql sees: the dialect, the types' text, the errors and their SQLSTATEs.
//!
//! Bounded: a connection within [`CONNECT_TIMEOUT_S`], the whole query within [`QUERY_TIMEOUT_S`] (then the
//! connection is dropped, which stops the statement on the server), at most [`ROWS_MAX`] rows and
//! [`RESULT_BYTES_MAX`] bytes of values kept (the rest counted, not kept). A SQL error is a result (200, with the
//! statements that ran before it), not an API error: the request itself succeeded.

use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Request, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio_postgres::SimpleQueryMessage;

use super::super::{authenticate, bearer, parse_id, AppState};
use crate::control::PG_USER;
use crate::error::ApiError;

/// How long connecting and authenticating may take.
const CONNECT_TIMEOUT_S: u64 = 10;
/// How long a query may run, all its statements together.
const QUERY_TIMEOUT_S: u64 = 30;
/// Rows kept, over all statements.
const ROWS_MAX: usize = 1_000;
/// Bytes of values kept, over all statements.
const RESULT_BYTES_MAX: usize = 1024 * 1024;
/// The longest point in time after `@` (an RFC 3339 time or an LSN).
const POINT_LEN_MAX: usize = 64;

/// What to run, where.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SqlRequest {
    /// `br_…` of the key's account.
    branch_id: String,
    /// A point in the branch's history (RFC 3339 time or `X/Y` LSN): the branch read-only as of then.
    at: Option<String>,
    /// The database's password.
    password: String,
    /// One or more statements.
    query: String,
}

/// The outcome: each statement's columns and rows (values as PostgreSQL's text), then the error that stopped
/// the query, if one did.
#[derive(Debug, Serialize, Default)]
pub(crate) struct SqlResponse {
    statements: Vec<StatementResult>,
    /// Rows or bytes left out past the bounds.
    truncated: bool,
    error: Option<SqlError>,
}

/// One statement's result.
#[derive(Debug, Serialize, Default)]
struct StatementResult {
    /// Empty for a statement that returns no rows.
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
    /// Rows returned or changed.
    row_count: u64,
}

/// A PostgreSQL error.
#[derive(Debug, Serialize)]
struct SqlError {
    /// The SQLSTATE (`42P01`), or empty when the connection failed without one.
    sqlstate: String,
    message: String,
}

/// `POST /console/sql` with `Authorization: Bearer <key>`.
pub(crate) async fn run(State(state): State<AppState>, request: Request) -> Result<Json<SqlResponse>, ApiError> {
    let caller = authenticate(&state, bearer(&request)).await?;
    let body = axum::body::to_bytes(request.into_body(), super::super::REQUEST_BODY_BYTES_MAX)
        .await
        .map_err(|_| ApiError::InvalidRequest("the body is malformed or too large".to_owned()))?;
    let parsed: Result<Json<SqlRequest>, JsonRejection> = Json::from_bytes(&body);
    let Json(body) = parsed?;
    let branch_id = parse_id(body.branch_id, "br_")?;
    // The branch must be the account's, and in the key's project if it is limited to one (else 404, as
    // everywhere); a read-only key reads only at a point in time, which is read-only by construction.
    let (_, database) = state.control.get_branch(&caller.account, &branch_id).await?;
    if caller
        .scope
        .project_id
        .as_deref()
        .is_some_and(|project| project != database.project_id)
    {
        return Err(ApiError::NotFound);
    }
    if caller.scope.read_only && body.at.is_none() {
        return Err(ApiError::Forbidden(format!(
            "key {} is read-only: its SQL runs only at a point in time (`at`)",
            caller.key_id
        )));
    }
    let name = match &body.at {
        Some(point) if point.is_empty() || point.len() > POINT_LEN_MAX || point.chars().any(char::is_control) => {
            return Err(ApiError::InvalidRequest(format!(
                "`at` must be a time or an LSN, not {point:?}"
            )))
        }
        Some(point) => format!("{branch_id}@{point}"),
        None => branch_id,
    };
    let mut config = tokio_postgres::Config::new();
    config
        .host(&state.control.config().pg_host)
        .port(state.control.config().pg_port)
        .user(PG_USER)
        .password(&body.password)
        .dbname(&name)
        .application_name("cambium-console")
        .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_S));
    Ok(Json(execute(&config, &body.query).await?))
}

/// Connects with `config` and runs `query`; SQL errors in the response, an unreachable listener as 503.
async fn execute(config: &tokio_postgres::Config, query: &str) -> Result<SqlResponse, ApiError> {
    let connecting = tokio::time::timeout(
        Duration::from_secs(CONNECT_TIMEOUT_S),
        config.connect(tokio_postgres::NoTls),
    );
    let (client, connection) = match connecting.await {
        Ok(Ok(pair)) => pair,
        Ok(Err(error)) if error.as_db_error().is_some() => {
            return Ok(SqlResponse {
                error: Some(sql_error(&error)),
                ..SqlResponse::default()
            })
        }
        Ok(Err(error)) => return Err(ApiError::Unavailable(format!("the SQL listener: {error}"))),
        Err(_) => {
            return Err(ApiError::Unavailable(
                "the SQL listener did not answer in time".to_owned(),
            ))
        }
    };
    // The connection's task ends when the client is dropped (after the query, or at the timeout).
    let connection = tokio::spawn(connection);
    let outcome = tokio::time::timeout(Duration::from_secs(QUERY_TIMEOUT_S), client.simple_query(query)).await;
    drop(client);
    let _ = connection.await;
    match outcome {
        Ok(Ok(messages)) => Ok(collect(messages)),
        Ok(Err(error)) => Ok(SqlResponse {
            error: Some(sql_error(&error)),
            ..SqlResponse::default()
        }),
        Err(_) => Ok(SqlResponse {
            error: Some(SqlError {
                sqlstate: "57014".to_owned(),
                message: format!("the query ran past {QUERY_TIMEOUT_S} s and was stopped"),
            }),
            ..SqlResponse::default()
        }),
    }
}

/// The statements' results from the simple query's messages, within the bounds.
fn collect(messages: Vec<SimpleQueryMessage>) -> SqlResponse {
    let mut response = SqlResponse::default();
    let mut current = StatementResult::default();
    let (mut rows_kept, mut bytes_kept) = (0usize, 0usize);
    for message in messages {
        match message {
            SimpleQueryMessage::RowDescription(columns) => {
                current.columns = columns.iter().map(|c| c.name().to_owned()).collect();
            }
            SimpleQueryMessage::Row(row) => {
                let values: Vec<Option<String>> = (0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect();
                let bytes: usize = values.iter().flatten().map(String::len).sum();
                if rows_kept < ROWS_MAX && bytes_kept + bytes <= RESULT_BYTES_MAX {
                    rows_kept += 1;
                    bytes_kept += bytes;
                    current.rows.push(values);
                } else {
                    response.truncated = true;
                }
            }
            SimpleQueryMessage::CommandComplete(count) => {
                current.row_count = count;
                response.statements.push(std::mem::take(&mut current));
            }
            _ => {}
        }
    }
    response
}

/// A client error as the console shows it: PostgreSQL's SQLSTATE and message when the server sent them.
fn sql_error(error: &tokio_postgres::Error) -> SqlError {
    match error.as_db_error() {
        Some(db) => SqlError {
            sqlstate: db.code().code().to_owned(),
            message: db.message().to_owned(),
        },
        None => SqlError {
            sqlstate: String::new(),
            message: error.to_string(),
        },
    }
}
