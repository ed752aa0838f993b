//! `/v1/projects`.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};

use super::labels::{self, LabelParams};
use super::views::{AuditList, CreateProject, ProjectEnvelope, ProjectList, ProjectView, UpdateProject};
use super::{object_body, parse_id, parse_name, AppState, ListParams};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::labels::Labelled;
use crate::store::{AccountId, Page};

/// Lists the account's projects, oldest first; `?label=` keeps those with a label. A key limited to a project sees
/// that project only.
#[utoipa::path(get, path = "/v1/projects", tag = "projects", params(ListParams, LabelParams),
    responses((status = 200, body = ProjectList), (status = "4XX", body = super::views::ErrorEnvelope)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    params: Result<Query<ListParams>, QueryRejection>,
    label: Result<Query<LabelParams>, QueryRejection>,
) -> Result<Json<ProjectList>, ApiError> {
    let (limit, after) = params?.checked()?;
    let filter = label?.filter()?;
    let (account, only) = (caller.account, caller.scope.project_id);
    let page = state
        .control
        .blocking(move |store| {
            let Some(only) = only else {
                return store.list_projects(&account, after.as_deref(), limit, filter.as_ref());
            };
            // A project key: its project, if it is past the cursor and has the label.
            let project = store.get_project(&account, &only)?.filter(|p| {
                after.as_deref().is_none_or(|after| p.id.as_str() > after)
                    && filter.as_ref().is_none_or(|f| {
                        p.labels
                            .get(&f.key)
                            .is_some_and(|v| f.value.as_ref().is_none_or(|want| want == v))
                    })
            });
            Ok(Page {
                items: project.into_iter().collect(),
                next_after: None,
            })
        })
        .await?;
    Ok(Json(ProjectList {
        projects: page.items.into_iter().map(ProjectView::from).collect(),
        next_cursor: page.next_after,
    }))
}

/// Creates a project.
#[utoipa::path(post, path = "/v1/projects", tag = "projects", request_body = CreateProject,
    responses((status = 201, body = ProjectEnvelope), (status = "4XX", body = super::views::ErrorEnvelope)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<ProjectEnvelope>), ApiError> {
    let body: CreateProject = object_body(body)?;
    let name = parse_name(body.name)?;
    let labels = labels::checked(body.labels.unwrap_or_default())?;
    let projects_max = state.control.config().quotas.projects_per_account_max;
    let project = state
        .control
        .blocking(move |store| store.create_project(&account, &name, projects_max, &labels))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ProjectEnvelope {
            project: project.into(),
        }),
    ))
}

/// Gets a project.
#[utoipa::path(get, path = "/v1/projects/{id}", tag = "projects", params(("id" = String, Path)),
    responses((status = 200, body = ProjectEnvelope), (status = "4XX", body = super::views::ErrorEnvelope)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<Json<ProjectEnvelope>, ApiError> {
    let id = parse_id(id, "proj_")?;
    let project = state
        .control
        .blocking(move |store| store.get_project(&account, &id))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(ProjectEnvelope {
        project: project.into(),
    }))
}

/// Renames a project and/or replaces its labels.
#[utoipa::path(patch, path = "/v1/projects/{id}", tag = "projects", params(("id" = String, Path)),
    request_body = UpdateProject,
    responses((status = 200, body = ProjectEnvelope), (status = "4XX", body = super::views::ErrorEnvelope)))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Json<ProjectEnvelope>, ApiError> {
    let id = parse_id(id, "proj_")?;
    let body: UpdateProject = object_body(body)?;
    let name = body.name.map(parse_name).transpose()?;
    let labels = body.labels.map(labels::checked).transpose()?;
    let project = state
        .control
        .blocking(move |store| {
            if let Some(labels) = labels {
                store.set_labels(&account, Labelled::Project, &id, &labels)?;
            }
            match name {
                Some(name) => store.rename_project(&account, &id, &name),
                None => store.get_project(&account, &id),
            }
        })
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(ProjectEnvelope {
        project: project.into(),
    }))
}

/// Deletes a project with its databases and their storage. Irreversible.
#[utoipa::path(delete, path = "/v1/projects/{id}", tag = "projects", params(("id" = String, Path)),
    responses((status = 204), (status = "4XX", body = super::views::ErrorEnvelope)))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(id, "proj_")?;
    state.control.delete_project(&account, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The project's audit log, newest first: every mutating call that concerned it — the key (id only), method, path,
/// status, request id and time. Kept for 90 days, at most 10 000 entries.
#[utoipa::path(get, path = "/v1/projects/{id}/audit", tag = "projects",
    params(("id" = String, Path, description = "project id"), ListParams),
    responses((status = 200, body = AuditList), (status = "4XX", body = super::views::ErrorEnvelope)))]
pub(crate) async fn audit(
    State(state): State<AppState>,
    Extension(account): Extension<AccountId>,
    Path(project_id): Path<String>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<AuditList>, ApiError> {
    let project_id = parse_id(project_id, "proj_")?;
    let (limit, before) = params?.checked()?;
    let page = state
        .control
        .blocking(move |store| store.list_audit(&account, &project_id, before.as_deref(), limit))
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(AuditList {
        audit_entries: page.items.into_iter().map(Into::into).collect(),
        next_cursor: page.next_after,
    }))
}
