//! Scoped keys and the audit log on the request path (issue 15), between the key check and the handlers.
//!
//! For each `/v1` request this finds the project the path concerns (`/v1/projects/{id}…`, and through the
//! metadata `/v1/databases/{id}…`, `/v1/branches/{id}…`, `/v1/operations/{id}`), then:
//! - a **read-only** key gets 403 `forbidden` on every mutating call (anything but GET and HEAD);
//! - a **project** key gets 404 on anything of another project (as another account's resource is 404: it sees
//!   nothing else) and 403 on creating a project; `GET /v1/projects` shows it only its project (the handler);
//! - every mutating call whose project is known is **audited** after it ran: key id, method, path, status and
//!   request id (`store::audit`; a creation's project is read from its 201 body). A deleted project takes its
//!   log with it, so its own deletion is not recorded. A handler that supports it (branch creation, restore)
//!   writes the entry in its own metadata transaction, committed with the change ([`audit::in_request`]);
//!   otherwise, or if the response's status is not the one it wrote, the entry is written after the response
//!   is made: a crash in between loses that entry, never the call's effect, and a failed write is logged, never
//!   the call's error.

use axum::body::{to_bytes, Body};
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use super::{AppState, RequestId};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::audit::{self, NewAuditEntry};
use crate::store::{AccountId, Store, StoreError};

/// The largest creation response read back for its project id (a project is a few hundred bytes).
const CREATED_BODY_BYTES_MAX: usize = 64 * 1024;

/// Whether `method` changes something (what a read-only key may not do and what the audit log records).
fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD)
}

/// The project of the resource `/v1/<kind>/<id>…` names, as `account` sees it; `None` when the path names none or
/// the resource does not exist (the handler answers 404 then). A store call: the key check makes it in the same
/// hand-off to the blocking pool as its own read ([`Scoped`]).
pub(crate) fn project_of(store: &Store, account: &AccountId, path: &str) -> Result<Option<String>, StoreError> {
    let mut segments = path.trim_start_matches('/').split('/');
    let (Some("v1"), Some(kind), Some(id)) = (segments.next(), segments.next(), segments.next()) else {
        return Ok(None);
    };
    let project = match kind {
        "projects" => store.get_project(account, id)?.map(|p| p.id),
        "databases" => store.get_database(account, id)?.map(|d| d.project_id),
        "branches" => store.get_branch(account, id)?.map(|(_, d)| d.project_id),
        "operations" => store.get_operation(account, id)?.map(|o| o.project_id),
        _ => None,
    };
    Ok(project)
}

/// The project of the request's path ([`project_of`]), read by the key check with the key, in the request's
/// extensions for this layer.
#[derive(Debug, Clone)]
pub(crate) struct Scoped(pub(crate) Option<String>);

/// The refusal `caller`'s scope gives a `method` call to `route` concerning `project`, if any.
fn refusal(caller: &Caller, method: &Method, route: &str, project: Option<&str>) -> Option<ApiError> {
    if caller.scope.read_only && is_mutating(method) {
        return Some(ApiError::Forbidden(format!(
            "key {} is read-only: it cannot {method} {route}",
            caller.key_id
        )));
    }
    let scope = caller.scope.project_id.as_deref()?;
    if route == "/v1/projects" {
        return (*method == Method::POST).then(|| {
            ApiError::Forbidden(format!(
                "key {} is limited to project {scope}: it cannot create projects",
                caller.key_id
            ))
        });
    }
    (project != Some(scope)).then_some(ApiError::NotFound)
}

/// The middleware; see the module doc.
pub(crate) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        tracing::error!("the scope layer ran without a caller");
        return Err(ApiError::Internal);
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let project = match request.extensions().get::<Scoped>() {
        Some(Scoped(project)) => project.clone(),
        None => {
            let (account, path) = (caller.account.clone(), path.clone());
            state
                .control
                .blocking(move |store| project_of(store, &account, &path))
                .await?
        }
    };
    crate::stages::mark("scope");
    let mut committed = None;
    let mut response = match refusal(&caller, &method, &route, project.as_deref()) {
        Some(error) => {
            if matches!(error, ApiError::NotFound) {
                return Err(error);
            }
            axum::response::IntoResponse::into_response(error)
        }
        None => match &project {
            Some(project_id) if is_mutating(&method) => {
                let entry = NewAuditEntry {
                    project_id: project_id.clone(),
                    key_id: caller.key_id.clone(),
                    method: method.to_string(),
                    path: path.clone(),
                    status: 0,
                    request_id: request_id.clone(),
                };
                let (response, written) = audit::in_request(entry, next.run(request)).await;
                crate::stages::mark("handler_rest");
                committed = written;
                response
            }
            _ => next.run(request).await,
        },
    };
    if !is_mutating(&method) {
        return Ok(response);
    }
    let status = response.status();
    if committed == Some(status.as_u16()) {
        // The handler wrote the entry with its change, in one transaction.
        return Ok(response);
    }
    let project = match project {
        Some(_) if route == "/v1/projects/{id}" && method == Method::DELETE && status.is_success() => None,
        Some(project) => Some(project),
        None if route == "/v1/projects" && status.is_success() => {
            let (parts, body) = response.into_parts();
            let bytes = to_bytes(body, CREATED_BODY_BYTES_MAX)
                .await
                .map_err(|_| ApiError::Internal)?;
            let created = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v["project"]["id"].as_str().map(str::to_owned));
            response = Response::from_parts(parts, Body::from(bytes));
            created
        }
        None => None,
    };
    if let Some(project_id) = project {
        let entry = NewAuditEntry {
            project_id,
            key_id: caller.key_id,
            method: method.to_string(),
            path,
            status: status.as_u16(),
            request_id,
        };
        if let Err(error) = state.control.blocking(move |store| store.record_audit(&entry)).await {
            tracing::error!(?error, "an audit entry could not be written");
        }
        crate::stages::mark("audit");
    }
    Ok(response)
}
