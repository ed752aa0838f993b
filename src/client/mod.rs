//! The command-line client of the `/v1` API: `cambium projects|databases|branches|operations|endpoints …`,
//! `psql`, `connection-string`, `request` and `completions`.
//!
//! Every command is one or a few HTTP calls ([`http`]) whose JSON is printed as the API gave it, without its
//! wrapping key ([`output`]: a table, JSON or YAML), so fields the API adds show up unchanged; `--set FIELD=VALUE`
//! sends fields no flag names, and `request` makes any call. Operations are followed with `--wait` ([`wait`]).
//! Errors go to stderr with the API's message, code and request id, and the exit code says what kind of failure
//! it was ([`error::EXIT_CODES_HELP`], a contract). `psql` and `connection-string` ([`pg`]) use the passwords
//! this client was shown, kept in a file of its own.
//!
//! The files: `args` the clap definitions, this one the dispatch and what commands share, `resources` projects,
//! databases, operations and endpoints, `branches` branches, `pg` connection strings, psql and the passwords.

use clap::CommandFactory;
use serde_json::{Map, Value};

mod args;
mod branches;
mod error;
mod http;
mod output;
mod pg;
mod resources;
mod wait;

pub(crate) use args::ClientCommand;
pub(crate) use error::EXIT_CODES_HELP;

use args::{ClientArgs, Fields, WaitArgs};
use error::ClientError;
use http::Api;

/// Runs a client command and returns the process's exit code (0, or the error's after printing it on stderr).
pub(crate) fn run(command: ClientCommand) -> i32 {
    if let ClientCommand::Completions { shell } = command {
        let mut cli = crate::cli::Cli::command();
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cli, "cambium", &mut script);
        return match output::write_stdout(&script) {
            Ok(()) => 0,
            Err(error) => {
                eprintln!("error: {error}");
                error.exit_code()
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the tokio runtime: {error}");
            return 1;
        }
    };
    match runtime.block_on(dispatch(command)) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("error: {error}");
            error.exit_code()
        }
    }
}

/// What every client command works with.
pub(crate) struct Context {
    api: Api,
    show: output::Show,
    passwords: pg::Passwords,
}

impl Context {
    fn new(args: &ClientArgs) -> Result<Context, ClientError> {
        let endpoint = http::Endpoint {
            url: args.api_url.clone(),
            key: args.api_key.clone(),
            key_file: args.api_key_file.clone(),
            ca_cert: args.api_ca_cert.clone(),
        };
        Ok(Context {
            api: Api::new(&endpoint)?,
            show: match &args.field {
                Some(path) => output::Show::Field(path.clone()),
                None => output::Show::Whole(args.output),
            },
            passwords: pg::Passwords::new(args.config_dir.clone())?,
        })
    }

    /// Prints `value` in the chosen format (or its chosen field).
    fn show(&self, value: &Value) -> Result<(), ClientError> {
        output::print(value, &self.show)
    }

    /// Prints what a deletion leaves: the id, deleted.
    fn show_deleted(&self, id: &str) -> Result<(), ClientError> {
        self.show(&serde_json::json!({ "id": id, "deleted": true }))
    }

    /// Prints a list, saying on stderr when more items were left than shown.
    fn show_list(&self, (items, more): (Vec<Value>, bool)) -> Result<(), ClientError> {
        if more {
            eprintln!("note: showing the first {}; --limit shows up to 10000", items.len());
        }
        self.show(&Value::Array(items))
    }

    /// `reply` printed as an operation's result: with `--wait`, its `operation` followed to the end and put
    /// back first; a failed one is exit 10 after printing.
    async fn show_operation_result(&self, mut reply: Value, wait: &WaitArgs) -> Result<(), ClientError> {
        if !wait.wait {
            return self.show(&unwrap(reply));
        }
        let operation = reply
            .get("operation")
            .cloned()
            .ok_or_else(|| ClientError::Local(format!("no operation to wait for in {reply}")))?;
        let ended = wait::wait(
            &self.api,
            &operation,
            std::time::Duration::from_secs(wait.wait_timeout_s),
        )
        .await?;
        reply["operation"] = ended.clone();
        self.show(&unwrap(reply))?;
        wait::check_finished(&ended)
    }
}

async fn dispatch(command: ClientCommand) -> Result<(), ClientError> {
    match command {
        ClientCommand::Projects { client, command } => resources::projects(&Context::new(&client)?, command).await,
        ClientCommand::Databases { client, command } => resources::databases(&Context::new(&client)?, command).await,
        ClientCommand::Branches { client, command } => branches::run(&Context::new(&client)?, command).await,
        ClientCommand::Operations { client, command } => resources::operations(&Context::new(&client)?, command).await,
        ClientCommand::Endpoints { client, command } => resources::endpoints(&Context::new(&client)?, command).await,
        ClientCommand::Psql {
            client,
            target,
            database,
            psql,
            psql_args,
        } => pg::psql(&Context::new(&client)?, &target, database.as_deref(), &psql, &psql_args).await,
        ClientCommand::ConnectionString {
            client,
            target,
            database,
            no_password,
        } => {
            let context = Context::new(&client)?;
            let password = if no_password {
                pg::PasswordUse::Leave
            } else {
                pg::PasswordUse::Include
            };
            pg::connection_string(&context, &target, database.as_deref(), password).await
        }
        ClientCommand::Request {
            client,
            method,
            path,
            data,
            wait,
        } => request(&Context::new(&client)?, &method, &path, data.as_deref(), &wait).await,
        ClientCommand::Completions { .. } => Ok(()), // answered in `run`, before any runtime
    }
}

/// `cambium request METHOD PATH [--data JSON] [--wait]`: the body printed whole.
async fn request(
    context: &Context,
    method: &str,
    path: &str,
    data: Option<&str>,
    wait: &WaitArgs,
) -> Result<(), ClientError> {
    let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
        .map_err(|_| ClientError::Usage(format!("{method:?} is not an HTTP method")))?;
    if !path.starts_with("/v1/") {
        return Err(ClientError::Usage(format!(
            "the path must start with /v1/, not {path:?}"
        )));
    }
    let body = data
        .map(serde_json::from_str::<Value>)
        .transpose()
        .map_err(|e| ClientError::Usage(format!("--data is not JSON: {e}")))?;
    let Some(reply) = context.api.call(method, path, body.as_ref()).await? else {
        return Ok(()); // 204: nothing to print
    };
    if !wait.wait {
        return context.show(&reply);
    }
    let Some(operation) = reply.get("operation").cloned() else {
        return Err(ClientError::Usage(format!(
            "--wait: the answer has no operation: {reply}"
        )));
    };
    let ended = wait::wait(
        &context.api,
        &operation,
        std::time::Duration::from_secs(wait.wait_timeout_s),
    )
    .await?;
    let mut reply = reply;
    reply["operation"] = ended.clone();
    context.show(&reply)?;
    wait::check_finished(&ended)
}

/// The resource inside the API's wrapping key (`{"project": {…}}` → `{…}`); anything else as it is.
fn unwrap(value: Value) -> Value {
    match value {
        Value::Object(mut members) if members.len() == 1 => {
            let key = members.keys().next().cloned().unwrap_or_default();
            members.remove(&key).unwrap_or(Value::Null)
        }
        other => other,
    }
}

/// A request body: `named` (the flags' fields), with `--set` fields under them. A named flag wins over a
/// `--set` of the same field.
fn body_with(named: Vec<(&str, Value)>, fields: &Fields) -> Result<Value, ClientError> {
    let mut body = Map::new();
    for text in &fields.set {
        let (name, value) = text
            .split_once('=')
            .filter(|(name, _)| !name.is_empty())
            .ok_or_else(|| ClientError::Usage(format!("--set {text:?} is not FIELD=VALUE")))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        body.insert(name.to_owned(), value);
    }
    for (name, value) in named {
        body.insert(name.to_owned(), value);
    }
    Ok(Value::Object(body))
}

/// An id (or name) as one path segment: letters, digits, `_`, `-` and `.` as they are, every other byte
/// percent-encoded, so no argument can reach another path or add a query. Empty, `.` and `..` (which URLs
/// resolve, encoded or not) are refused.
fn segment(id: &str) -> Result<String, ClientError> {
    if id.is_empty() || id == "." || id == ".." {
        return Err(ClientError::Usage(format!("{id:?} is not an id")));
    }
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    Ok(out)
}

/// The request field a point in time goes in: `<prefix>_lsn` for an LSN (`0/16B3748`), `<prefix>_timestamp`
/// otherwise (the API checks the time and says what is wrong with it).
fn point_field(prefix: &str, point: &str) -> (String, Value) {
    let suffix = if pg::is_lsn(point) { "lsn" } else { "timestamp" };
    (format!("{prefix}_{suffix}"), Value::String(point.to_owned()))
}

/// Items a list shows at most.
fn items_max(list: &args::ListArgs) -> usize {
    list.limit
        .and_then(|limit| usize::try_from(limit).ok())
        .unwrap_or(http::LIST_ITEMS_MAX)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn set_fields_are_json_or_text_and_named_flags_win() {
        let fields = Fields {
            set: vec![
                "protected=true".to_owned(),
                "labels={\"env\":\"dev\"}".to_owned(),
                "name=from-set".to_owned(),
                "note=plain text".to_owned(),
                "empty=".to_owned(),
            ],
        };
        let body = body_with(vec![("name", json!("from-flag"))], &fields).expect("a body");
        assert_eq!(
            body,
            json!({"protected": true, "labels": {"env": "dev"}, "name": "from-flag", "note": "plain text", "empty": ""})
        );
        for bad in ["novalue", "=x"] {
            let fields = Fields {
                set: vec![bad.to_owned()],
            };
            assert!(
                matches!(body_with(vec![], &fields), Err(ClientError::Usage(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn arguments_stay_one_path_segment() {
        assert_eq!(segment("br_01ABC").ok().as_deref(), Some("br_01ABC"));
        assert_eq!(segment("../x?y=1#z").ok().as_deref(), Some("..%2Fx%3Fy%3D1%23z"));
        assert_eq!(segment("é").ok().as_deref(), Some("%C3%A9"));
        for bad in ["", ".", ".."] {
            assert!(matches!(segment(bad), Err(ClientError::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn envelopes_unwrap_and_points_pick_their_field() {
        assert_eq!(unwrap(json!({"project": {"id": "p"}})), json!({"id": "p"}));
        let two = json!({"database": {}, "operation": {}});
        assert_eq!(unwrap(two.clone()), two);
        assert_eq!(point_field("target", "0/16B3748").0, "target_lsn");
        assert_eq!(point_field("parent", "2026-11-22T13:00:00Z").0, "parent_timestamp");
    }
}
