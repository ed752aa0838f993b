//! `cambium projects|databases|operations|endpoints …`: each verb one call (a database's creation with `--wait`
//! also follows its operation), printed through the [`Context`].

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::args::{DatabasesCommand, EndpointsCommand, OperationsCommand, ProjectsCommand};
use super::error::ClientError;
use super::{body_with, items_max, segment, unwrap, wait, Context};

/// `cambium projects …`.
pub(crate) async fn projects(context: &Context, command: ProjectsCommand) -> Result<(), ClientError> {
    let api = &context.api;
    match command {
        ProjectsCommand::List(list) => context.show_list(api.list("/v1/projects", "projects", items_max(&list)).await?),
        ProjectsCommand::Get { project } => {
            context.show(&unwrap(api.get(&format!("/v1/projects/{}", segment(&project)?)).await?))
        }
        ProjectsCommand::Create { name, fields } => {
            let body = body_with(vec![("name", json!(name))], &fields)?;
            context.show(&unwrap(api.send(Method::POST, "/v1/projects", &body).await?))
        }
        ProjectsCommand::Update { project, name, fields } => {
            let body = body_with(name.map(|n| ("name", json!(n))).into_iter().collect(), &fields)?;
            let path = format!("/v1/projects/{}", segment(&project)?);
            context.show(&unwrap(api.send(Method::PATCH, &path, &body).await?))
        }
        ProjectsCommand::Delete { project } => {
            api.call(Method::DELETE, &format!("/v1/projects/{}", segment(&project)?), None)
                .await?;
            context.show_deleted(&project)
        }
    }
}

/// `cambium databases …`.
pub(crate) async fn databases(context: &Context, command: DatabasesCommand) -> Result<(), ClientError> {
    let api = &context.api;
    match command {
        DatabasesCommand::List { project, list } => {
            let path = format!("/v1/projects/{}/databases", segment(&project)?);
            context.show_list(api.list(&path, "databases", items_max(&list)).await?)
        }
        DatabasesCommand::Get { database } => context.show(&unwrap(api.get(&database_path(&database, "")?).await?)),
        DatabasesCommand::Create {
            name,
            project,
            region,
            fields,
            wait,
        } => {
            let mut named = vec![("name", json!(name))];
            if let Some(region) = region {
                named.push(("region", json!(region)));
            }
            let path = format!("/v1/projects/{}/databases", segment(&project)?);
            let mut reply = api.send(Method::POST, &path, &body_with(named, &fields)?).await?;
            context.passwords.remember_from(&reply["database"])?;
            if !wait.wait {
                return context.show(&reply);
            }
            let ended = wait::wait(api, &reply["operation"], Duration::from_secs(wait.wait_timeout_s)).await?;
            // The database as it is now (active), with the connection string as created (its password).
            if let Some(id) = reply["database"]["id"].as_str() {
                let mut now = unwrap(api.get(&database_path(id, "")?).await?);
                now["connection_uri"] = reply["database"]["connection_uri"].clone();
                reply["database"] = now;
            }
            reply["operation"] = ended.clone();
            context.show(&reply)?;
            wait::check_finished(&ended)
        }
        DatabasesCommand::Update { database, name, fields } => {
            let body = body_with(name.map(|n| ("name", json!(n))).into_iter().collect(), &fields)?;
            context.show(&unwrap(
                api.send(Method::PATCH, &database_path(&database, "")?, &body).await?,
            ))
        }
        DatabasesCommand::Delete { database } => {
            api.call(Method::DELETE, &database_path(&database, "")?, None).await?;
            context.show_deleted(&database)
        }
        DatabasesCommand::Resume { database } => post_database(context, &database, "/resume").await,
        DatabasesCommand::Suspend { database } => post_database(context, &database, "/suspend").await,
        DatabasesCommand::ResetPassword { database } => {
            let reply = api
                .call(Method::POST, &database_path(&database, "/reset_password")?, None)
                .await?
                .unwrap_or(Value::Null);
            context.passwords.remember_from(&reply["database"])?;
            context.show(&unwrap(reply))
        }
        DatabasesCommand::Endpoints { database } => {
            context.show(&unwrap(api.get(&database_path(&database, "/endpoints")?).await?))
        }
        DatabasesCommand::Health { database } => {
            context.show(&unwrap(api.get(&database_path(&database, "/health")?).await?))
        }
    }
}

/// `/v1/databases/{database}{rest}`.
fn database_path(database: &str, rest: &str) -> Result<String, ClientError> {
    Ok(format!("/v1/databases/{}{rest}", segment(database)?))
}

/// A bodiless POST of a database action (`/resume`, `/suspend`), the database printed.
async fn post_database(context: &Context, database: &str, action: &str) -> Result<(), ClientError> {
    let reply = context
        .api
        .call(Method::POST, &database_path(database, action)?, None)
        .await?
        .unwrap_or(Value::Null);
    context.show(&unwrap(reply))
}

/// `cambium operations …`.
pub(crate) async fn operations(context: &Context, command: OperationsCommand) -> Result<(), ClientError> {
    let api = &context.api;
    match command {
        OperationsCommand::List { project, list } => {
            let path = format!("/v1/projects/{}/operations", segment(&project)?);
            context.show_list(api.list(&path, "operations", items_max(&list)).await?)
        }
        OperationsCommand::Get { operation } => context.show(&unwrap(
            api.get(&format!("/v1/operations/{}", segment(&operation)?)).await?,
        )),
        OperationsCommand::Wait {
            operation,
            wait_timeout_s,
        } => {
            let now = unwrap(api.get(&format!("/v1/operations/{}", segment(&operation)?)).await?);
            let ended = wait::wait(api, &now, Duration::from_secs(wait_timeout_s)).await?;
            context.show(&ended)?;
            wait::check_finished(&ended)
        }
    }
}

/// `cambium endpoints …`.
pub(crate) async fn endpoints(context: &Context, command: EndpointsCommand) -> Result<(), ClientError> {
    match command {
        EndpointsCommand::List { database } => context.show(&unwrap(
            context.api.get(&database_path(&database, "/endpoints")?).await?,
        )),
    }
}
