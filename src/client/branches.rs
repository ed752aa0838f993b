//! `cambium branches …`, and how a branch argument is found: a `br_…` id as it is, a name through its
//! database's list (names are unique within a database).

use reqwest::Method;
use serde_json::{json, Map, Value};

use super::args::{BranchRef, BranchWorkflowArgs, BranchesCommand};
use super::error::{ApiFailure, ClientError};
use super::http::LIST_ITEMS_MAX;
use super::output::{render, write_stdout, Format, Show};
use super::{body_with, encoded, items_max, pg, point_field, segment, unwrap, Context};

/// `cambium branches …`.
pub(crate) async fn run(context: &Context, command: BranchesCommand) -> Result<(), ClientError> {
    let api = &context.api;
    match command {
        BranchesCommand::List { database, label, list } => {
            let mut path = format!("/v1/databases/{}/branches", segment(&database)?);
            if let Some(label) = label {
                path.push_str(&format!("?label={}", encoded(&label)));
            }
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
            workflow,
            labels,
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
            named.extend(workflow_fields(&workflow));
            if !labels.is_empty() {
                named.push(("labels".to_owned(), labels_of(&labels)?));
            }
            let named = named.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let path = format!("/v1/databases/{}/branches", segment(&database)?);
            context.show(&unwrap(
                api.send(Method::POST, &path, &body_with(named, &fields)?).await?,
            ))
        }
        BranchesCommand::Update {
            branch,
            name,
            workflow,
            fields,
        } => {
            let id = resolve(context, &branch.branch, branch.database.as_deref()).await?;
            let mut named: Vec<(String, Value)> = name.map(|n| ("name".to_owned(), json!(n))).into_iter().collect();
            named.extend(workflow_fields(&workflow));
            let named = named.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let body = body_with(named, &fields)?;
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
        BranchesCommand::Reset { branch, preserve, wait } => {
            let id = resolve(context, &branch.branch, branch.database.as_deref()).await?;
            let body = json!({ "preserve": preserve });
            let reply = api.send(Method::POST, &branch_path(&id, "/reset")?, &body).await?;
            context.show_operation_result(reply, &wait).await
        }
        BranchesCommand::SchemaDiff {
            branch,
            base,
            at,
            base_at,
        } => schema_diff(context, &branch, base.as_deref(), at.as_deref(), base_at.as_deref()).await,
        BranchesCommand::Delete(BranchRef { branch, database }) => {
            let id = resolve(context, &branch, database.as_deref()).await?;
            api.call(Method::DELETE, &branch_path(&id, "")?, None).await?;
            context.show_deleted(&id)
        }
    }
}

/// The request fields `--protected` and `--expires-at` name (`none` clears the expiry: `null`).
fn workflow_fields(workflow: &BranchWorkflowArgs) -> Vec<(String, Value)> {
    let mut fields = Vec::new();
    if let Some(protected) = workflow.protected {
        fields.push(("protected".to_owned(), json!(protected)));
    }
    if let Some(expires_at) = &workflow.expires_at {
        let value = if expires_at == "none" {
            Value::Null
        } else {
            json!(expires_at)
        };
        fields.push(("expires_at".to_owned(), value));
    }
    fields
}

/// `--label KEY=VALUE`s as the API's labels object (the API checks the keys and values; a repeated key keeps the
/// last).
fn labels_of(labels: &[String]) -> Result<Value, ClientError> {
    let mut object = Map::new();
    for text in labels {
        let (key, value) = text
            .split_once('=')
            .filter(|(key, _)| !key.is_empty())
            .ok_or_else(|| ClientError::Usage(format!("--label {text:?} is not KEY=VALUE")))?;
        object.insert(key.to_owned(), json!(value));
    }
    Ok(Value::Object(object))
}

/// `cambium branches schema-diff`: as a table, the changes then the unified diff (or `no schema changes`); in
/// JSON or YAML, or with `--field`, the API's diff object.
async fn schema_diff(
    context: &Context,
    branch: &BranchRef,
    base: Option<&str>,
    at: Option<&str>,
    base_at: Option<&str>,
) -> Result<(), ClientError> {
    let id = resolve(context, &branch.branch, branch.database.as_deref()).await?;
    let mut query = Vec::new();
    if let Some(base) = base {
        let base_id = resolve(context, base, branch.database.as_deref()).await?;
        query.push(format!("base_branch_id={}", encoded(&base_id)));
    }
    for (prefix, point) in [("", at), ("base_", base_at)] {
        if let Some(point) = point {
            let suffix = if pg::is_lsn(point) { "lsn" } else { "timestamp" };
            query.push(format!("{prefix}{suffix}={}", encoded(point)));
        }
    }
    let mut path = branch_path(&id, "/schema_diff")?;
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let diff = unwrap(context.api.get(&path).await?);
    if !matches!(context.show, Show::Whole(Format::Table)) {
        return context.show(&diff);
    }
    let changes = diff.get("changes").cloned().unwrap_or(Value::Array(Vec::new()));
    let text = diff.get("diff").and_then(Value::as_str).unwrap_or_default();
    let out = match changes.as_array() {
        Some(list) if list.is_empty() => "no schema changes\n".to_owned(),
        _ => format!("{}{text}", render(&changes, Format::Table)?),
    };
    write_stdout(out.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_key_value_pairs_and_anything_else_is_a_usage_error() {
        let labels = labels_of(&["pr=42".to_owned(), "query=a=b".to_owned(), "empty=".to_owned()]).expect("labels");
        assert_eq!(labels, json!({"pr": "42", "query": "a=b", "empty": ""}));
        for bad in ["pr", "=42"] {
            assert!(
                matches!(labels_of(&[bad.to_owned()]), Err(ClientError::Usage(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn none_clears_the_expiry_and_absent_flags_send_nothing() {
        let cleared = BranchWorkflowArgs {
            protected: Some(false),
            expires_at: Some("none".to_owned()),
        };
        assert_eq!(
            workflow_fields(&cleared),
            [
                ("protected".to_owned(), json!(false)),
                ("expires_at".to_owned(), Value::Null)
            ]
        );
        let set = BranchWorkflowArgs {
            protected: None,
            expires_at: Some("2026-11-22T13:00:00Z".to_owned()),
        };
        assert_eq!(
            workflow_fields(&set),
            [("expires_at".to_owned(), json!("2026-11-22T13:00:00Z"))]
        );
        let none = BranchWorkflowArgs {
            protected: None,
            expires_at: None,
        };
        assert!(workflow_fields(&none).is_empty());
    }
}
