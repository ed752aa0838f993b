//! `cambium branches …`, and how a branch argument is found: a `br_…` id as it is, a name through its
//! database's list (names are unique within a database).

use reqwest::Method;
use serde_json::{json, Value};

use super::args::{BranchRef, BranchesCommand};
use super::error::{ApiFailure, ClientError};
use super::http::LIST_ITEMS_MAX;
use super::{body_with, items_max, point_field, segment, unwrap, Context};

/// `cambium branches …`.
pub(crate) async fn run(context: &Context, command: BranchesCommand) -> Result<(), ClientError> {
    let api = &context.api;
    match command {
        BranchesCommand::List { database, list } => {
            let path = format!("/v1/databases/{}/branches", segment(&database)?);
            context.show_list(api.list(&path, "branches", items_max(&list)).await?)
        }
        BranchesCommand::Get(branch) => {
            let id = resolve(context, &branch.branch, branch.database.as_deref()).await?;
            context.show(&unwrap(api.get(&branch_path(&id, "")?).await?))
        }
        BranchesCommand::Create {
            name,
            database,
            parent,
            at,
            fields,
        } => {
            let mut named = vec![("name".to_owned(), json!(name))];
            if let Some(parent) = parent {
                named.push((
                    "parent_branch_id".to_owned(),
                    json!(resolve(context, &parent, Some(&database)).await?),
                ));
            }
            if let Some(at) = at {
                named.push(point_field("parent", &at));
            }
            let named = named.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let path = format!("/v1/databases/{}/branches", segment(&database)?);
            context.show(&unwrap(
                api.send(Method::POST, &path, &body_with(named, &fields)?).await?,
            ))
        }
        BranchesCommand::Update { branch, name, fields } => {
            let id = resolve(context, &branch.branch, branch.database.as_deref()).await?;
            let body = body_with(name.map(|n| ("name", json!(n))).into_iter().collect(), &fields)?;
            context.show(&unwrap(api.send(Method::PATCH, &branch_path(&id, "")?, &body).await?))
        }
        BranchesCommand::Promote(branch) => {
            let id = resolve(context, &branch.branch, branch.database.as_deref()).await?;
            let body = json!({ "is_default": true });
            context.show(&unwrap(api.send(Method::PATCH, &branch_path(&id, "")?, &body).await?))
        }
        BranchesCommand::Restore {
            branch,
            to,
            no_preserve,
            wait,
        } => {
            let id = resolve(context, &branch.branch, branch.database.as_deref()).await?;
            let (field, point) = point_field("target", &to);
            let mut body = json!({ field: point });
            if no_preserve {
                body["preserve"] = json!(false);
            }
            let reply = api.send(Method::POST, &branch_path(&id, "/restore")?, &body).await?;
            context.show_operation_result(reply, &wait).await
        }
        BranchesCommand::Delete(BranchRef { branch, database }) => {
            let id = resolve(context, &branch, database.as_deref()).await?;
            api.call(Method::DELETE, &branch_path(&id, "")?, None).await?;
            context.show_deleted(&id)
        }
    }
}

/// `/v1/branches/{id}{rest}`.
fn branch_path(id: &str, rest: &str) -> Result<String, ClientError> {
    Ok(format!("/v1/branches/{}{rest}", segment(id)?))
}

/// The id of the branch `branch` names: a `br_…` id as it is; a name looked up among `database`'s branches
/// (404, exit 5, when none has it; a usage error without `database`).
pub(crate) async fn resolve(context: &Context, branch: &str, database: Option<&str>) -> Result<String, ClientError> {
    if branch.starts_with("br_") {
        return Ok(branch.to_owned());
    }
    let Some(database) = database else {
        return Err(ClientError::Usage(format!(
            "{branch:?} is not a branch id (br_…): give --database DB to look it up by name"
        )));
    };
    let path = format!("/v1/databases/{}/branches", segment(database)?);
    let (branches, _) = context.api.list(&path, "branches", LIST_ITEMS_MAX).await?;
    branches
        .iter()
        .find(|b| b.get("name").and_then(Value::as_str) == Some(branch))
        .and_then(|b| b.get("id").and_then(Value::as_str))
        .map(str::to_owned)
        .ok_or_else(|| {
            ClientError::Api(ApiFailure {
                status: 404,
                code: "not_found".to_owned(),
                message: format!("database {database} has no branch named {branch:?}"),
                request_id: None,
            })
        })
}
