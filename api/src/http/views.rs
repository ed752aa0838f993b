//! The resources as the API shows them (the seed's field names and wrapping keys), and the request bodies.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::control::{Control, Password, SchemaDiff};
use crate::store::audit::AuditEntry;
use crate::store::databases::{Branch, Database, SuspendReason};
use crate::store::labels::Labels;
use crate::store::operations::{Action, Operation};
use crate::store::Project;

/// A project.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProjectView {
    /// `proj_…`.
    id: String,
    name: String,
    /// ISO 8601 UTC.
    created_at: String,
    /// String labels (at most 64); `?label=key:value` filters listings on them.
    labels: Labels,
}

impl From<Project> for ProjectView {
    fn from(project: Project) -> ProjectView {
        ProjectView {
            id: project.id,
            name: project.name,
            created_at: project.created_at,
            labels: project.labels,
        }
    }
}

/// `{project}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProjectEnvelope {
    pub(crate) project: ProjectView,
}

/// `{projects, next_cursor}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProjectList {
    pub(crate) projects: Vec<ProjectView>,
    pub(crate) next_cursor: Option<String>,
}

/// A database (its compute endpoint is the same resource).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DatabaseView {
    /// `db_…`.
    id: String,
    project_id: String,
    name: String,
    /// `provisioning`, `active`, `suspended` or `failed`.
    status: String,
    region: String,
    default_branch_id: String,
    /// Connects to the default branch, read-write. With the password (`postgresql://cambium:<password>@…`) only
    /// in the responses of the database's creation and of `reset_password`: the password is stored nowhere, so
    /// every other response has `postgresql://cambium@host:port/db_…?sslmode=prefer`, and the client gives
    /// the password separately (`PGPASSWORD`, a `.pgpass` file, or its driver's password setting).
    connection_uri: String,
    /// ISO 8601 UTC.
    created_at: String,
    /// String labels (at most 64); `?label=key:value` filters listings on them.
    labels: Labels,
    /// Seconds without a session after which the database is suspended (scale to zero; the next connection
    /// resumes it); 0: never.
    suspend_timeout_seconds: u32,
    /// Why it is suspended, when it is: `idle` (no session for `suspend_timeout_seconds`; a connection wakes
    /// it) or `api` (`POST …/suspend`; it refuses sessions until `POST …/resume`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "idle")]
    suspend_reason: Option<&'static str>,
}

impl DatabaseView {
    /// The database as every response but its creation and a password reset shows it: no password.
    pub(crate) fn new(control: &Control, database: Database) -> DatabaseView {
        let connection_uri = control.connection_uri(&database.id);
        DatabaseView::with_uri(database, connection_uri)
    }

    /// The database with `password` in its connection string: the response that made the password.
    pub(crate) fn with_password(control: &Control, database: Database, password: &Password) -> DatabaseView {
        let connection_uri = control.connection_uri_with_password(&database.id, password);
        DatabaseView::with_uri(database, connection_uri)
    }

    fn with_uri(database: Database, connection_uri: String) -> DatabaseView {
        DatabaseView {
            connection_uri,
            id: database.id,
            project_id: database.project_id,
            name: database.name,
            status: database.status.as_str().to_owned(),
            region: database.region,
            default_branch_id: database.default_branch_id,
            created_at: database.created_at,
            labels: database.labels,
            suspend_timeout_seconds: database.suspend_timeout_seconds,
            suspend_reason: database.suspend_reason.map(SuspendReason::as_str),
        }
    }
}

/// `{database}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DatabaseEnvelope {
    pub(crate) database: DatabaseView,
}

/// `{database, operation}`: a created database and its `create_database` operation.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CreatedDatabaseEnvelope {
    pub(crate) database: DatabaseView,
    pub(crate) operation: OperationView,
}

/// `{databases, next_cursor}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DatabaseList {
    pub(crate) databases: Vec<DatabaseView>,
    pub(crate) next_cursor: Option<String>,
}

/// A compute endpoint: the database as a compute.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointView {
    /// Equal to the database id.
    id: String,
    database_id: String,
    region: String,
    /// `active` when it serves; otherwise the database's status.
    status: String,
    host: String,
    port: u16,
    /// Without the password, as the database's outside its creation and `reset_password`.
    connection_uri: String,
}

impl EndpointView {
    pub(crate) fn new(control: &Control, database: &Database) -> EndpointView {
        EndpointView {
            id: database.id.clone(),
            database_id: database.id.clone(),
            region: database.region.clone(),
            status: database.status.as_str().to_owned(),
            host: control.config().pg_host.clone(),
            port: control.config().pg_port,
            connection_uri: control.connection_uri(&database.id),
        }
    }
}

/// `{endpoints}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndpointList {
    pub(crate) endpoints: Vec<EndpointView>,
}

/// A branch.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BranchView {
    /// `br_…`.
    id: String,
    database_id: String,
    name: String,
    /// Absent on a database's first branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_branch_id: Option<String>,
    /// The parent's LSN the branch was forked at (`X/Y` hex); absent on a database's first branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_lsn: Option<String>,
    is_default: bool,
    /// Connects to this branch, read-write: `postgresql://cambium@host:port/br_…?sslmode=prefer`, with no
    /// password; it takes the database's password (given by its creation or `reset_password`).
    connection_uri: String,
    /// ISO 8601 UTC.
    created_at: String,
    /// `true` refuses the branch's deletion (and its database's), restore, reset and expiry with 409 until it is
    /// unprotected.
    protected: bool,
    /// When the expiry sweep deletes the branch (ISO 8601 UTC); absent: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    /// String labels (at most 64); `?label=key:value` filters listings on them.
    labels: Labels,
}

impl BranchView {
    pub(crate) fn new(control: &Control, branch: Branch, database: &Database) -> BranchView {
        BranchView {
            connection_uri: control.connection_uri(&branch.id),
            is_default: database.default_branch_id == branch.id,
            id: branch.id,
            database_id: branch.database_id,
            name: branch.name,
            parent_branch_id: branch.parent_branch_id,
            parent_lsn: branch.parent_lsn.map(|lsn| lsn.to_string()),
            created_at: branch.created_at,
            protected: branch.protected,
            expires_at: branch.expires_at,
            labels: branch.labels,
        }
    }
}

/// `{branch}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BranchEnvelope {
    pub(crate) branch: BranchView,
}

/// `{branches, next_cursor}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BranchList {
    pub(crate) branches: Vec<BranchView>,
    pub(crate) next_cursor: Option<String>,
}

/// An operation.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OperationView {
    /// `op_…`.
    id: String,
    project_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    database_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    branch_id: Option<String>,
    /// `create_database`, `restore_branch`, `reset_branch`, `delete_branch` (the expiry of a branch),
    /// `suspend_database` (no session for the database's `suspend_timeout_seconds`) or `resume_database` (a
    /// session woke a database suspended that way).
    action: String,
    /// `running`, `finished` or `failed`.
    status: String,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Why it happened, for `suspend_database` (how long the database was idle) and `resume_database` (what
    /// woke it).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// ISO 8601 UTC.
    created_at: String,
    /// ISO 8601 UTC: the last status change.
    updated_at: String,
}

impl From<Operation> for OperationView {
    fn from(operation: Operation) -> OperationView {
        let reason = match operation.work() {
            Ok(Action::SuspendDatabase(params) | Action::ResumeDatabase(params)) => Some(params.reason),
            _ => None,
        };
        OperationView {
            reason,
            id: operation.id,
            project_id: operation.project_id,
            database_id: operation.database_id,
            branch_id: operation.branch_id,
            action: operation.action,
            status: operation.status.as_str().to_owned(),
            error: operation.error,
            created_at: operation.created_at,
            updated_at: operation.updated_at,
        }
    }
}

/// `{operation}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OperationEnvelope {
    pub(crate) operation: OperationView,
}

/// `{operations, next_cursor}`, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OperationList {
    pub(crate) operations: Vec<OperationView>,
    pub(crate) next_cursor: Option<String>,
}

/// One difference between two schemas.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SchemaChangeView {
    /// `table`, `column`, `index`, `view` or `trigger`.
    kind: String,
    /// The object's name; a column's is `table.column`.
    name: String,
    /// The table it belongs to (a table's own name for a table; a view's for a view).
    table: String,
    /// `added`, `removed` or `changed`.
    change: String,
    /// Its DDL (a column's definition) in the base; absent when added.
    #[serde(skip_serializing_if = "Option::is_none")]
    base: Option<String>,
    /// Its DDL (a column's definition) in the branch; absent when removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

/// The schema differences from a base branch at a point to a branch at a point.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SchemaDiffView {
    /// The branch diffed.
    branch_id: String,
    /// The point of the branch whose schema was read (`X/Y`).
    lsn: String,
    /// The base branch.
    base_branch_id: String,
    /// The point of the base whose schema was read (`X/Y`).
    base_lsn: String,
    /// The differences, by kind then name; empty when the schemas are the same.
    changes: Vec<SchemaChangeView>,
    /// A unified diff (`diff -U0`) of the two schemas' DDL, from `<base>@<base_lsn>` to `<branch>@<lsn>`; empty
    /// when they are the same.
    diff: String,
}

impl From<SchemaDiff> for SchemaDiffView {
    fn from(diff: SchemaDiff) -> SchemaDiffView {
        SchemaDiffView {
            branch_id: diff.branch_id,
            lsn: diff.lsn.to_string(),
            base_branch_id: diff.base_branch_id,
            base_lsn: diff.base_lsn.to_string(),
            changes: diff
                .changes
                .into_iter()
                .map(|c| SchemaChangeView {
                    kind: c.kind.as_str().to_owned(),
                    name: c.name,
                    table: c.table,
                    change: c.change.as_str().to_owned(),
                    base: c.base,
                    target: c.target,
                })
                .collect(),
            diff: diff.diff,
        }
    }
}

/// `{schema_diff}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SchemaDiffEnvelope {
    pub(crate) schema_diff: SchemaDiffView,
}

/// One audited call.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AuditEntryView {
    /// `aud_…`.
    id: String,
    project_id: String,
    /// The key that made the call (`key_…`; never its secret).
    key_id: String,
    /// `POST`, `PATCH` or `DELETE`.
    method: String,
    /// The request path.
    path: String,
    /// The response's HTTP status.
    status: u16,
    /// The response's `X-Request-Id`.
    request_id: String,
    /// ISO 8601 UTC.
    created_at: String,
}

impl From<AuditEntry> for AuditEntryView {
    fn from(entry: AuditEntry) -> AuditEntryView {
        AuditEntryView {
            id: entry.id,
            project_id: entry.project_id,
            key_id: entry.key_id,
            method: entry.method,
            path: entry.path,
            status: entry.status,
            request_id: entry.request_id,
            created_at: entry.created_at,
        }
    }
}

/// `{audit_entries, next_cursor}`, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AuditList {
    pub(crate) audit_entries: Vec<AuditEntryView>,
    pub(crate) next_cursor: Option<String>,
}

/// The error envelope.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorEnvelope {
    error: ErrorBody,
}

/// An error.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    /// `invalid_request`, `unauthenticated`, `forbidden`, `quota_exceeded`, `not_found`, `method_not_allowed`,
    /// `request_timeout`, `conflict`, `unprocessable`, `rate_limited`, `unavailable` or `internal`.
    code: String,
    message: String,
    /// Also in the `X-Request-Id` header.
    request_id: String,
}

/// Creates a project.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateProject {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub(crate) name: String,
    /// String labels: at most 64; keys of 1 to 63 ASCII letters, digits, `_ . - /` starting with a letter or
    /// digit; values of at most 255 characters.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub(crate) labels: Option<Labels>,
}

/// Renames a project and/or replaces its labels.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateProject {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub(crate) name: Option<String>,
    /// Replaces all the labels (an empty object removes them); bounds as on create.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub(crate) labels: Option<Labels>,
}

/// Creates a database.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateDatabase {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub(crate) name: String,
    /// This deployment's region when absent (the only one accepted).
    #[schema(pattern = r"^[a-z0-9-]{1,64}$")]
    pub(crate) region: Option<String>,
    /// String labels: at most 64; keys of 1 to 63 ASCII letters, digits, `_ . - /` starting with a letter or
    /// digit; values of at most 255 characters.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub(crate) labels: Option<Labels>,
    /// Seconds without a session before the database is suspended (the next connection resumes it): 300 when
    /// absent, 0 never, at most 604800 (7 days).
    #[schema(minimum = 0, maximum = 604800)]
    pub(crate) suspend_timeout_seconds: Option<u32>,
}

/// Renames a database, replaces its labels and/or sets its suspend timeout.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateDatabase {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub(crate) name: Option<String>,
    /// Replaces all the labels (an empty object removes them); bounds as on create.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub(crate) labels: Option<Labels>,
    /// Seconds without a session before the database is suspended; bounds as on create. A database suspended
    /// for idleness stays so until a connection or `POST …/resume`.
    #[schema(minimum = 0, maximum = 604800)]
    pub(crate) suspend_timeout_seconds: Option<u32>,
}

/// Creates a branch: from the parent's latest state, or at `parent_lsn` or `parent_timestamp` (not both).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBranch {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub(crate) name: String,
    /// The database's default branch when absent.
    #[schema(pattern = r"^br_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub(crate) parent_branch_id: Option<String>,
    /// `X/Y` hex.
    #[schema(pattern = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$", example = "0/16B3748")]
    pub(crate) parent_lsn: Option<String>,
    /// RFC 3339; the newest commit at or before it, or the database as created if it had none yet (422 before
    /// the database was created or in the future).
    #[schema(format = DateTime)]
    pub(crate) parent_timestamp: Option<String>,
    /// Refuse deletion, restore, reset and expiry (default `false`).
    pub(crate) protected: Option<bool>,
    /// RFC 3339: when the branch is deleted by the expiry sweep; in the future, at most 365 days ahead (else 422).
    #[schema(format = DateTime)]
    pub(crate) expires_at: Option<String>,
    /// String labels: at most 64; keys of 1 to 63 ASCII letters, digits, `_ . - /` starting with a letter or
    /// digit; values of at most 255 characters.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub(crate) labels: Option<Labels>,
}

/// Renames and/or promotes a branch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateBranch {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub(crate) name: Option<String>,
    /// `true` makes it the database's default branch.
    pub(crate) is_default: Option<bool>,
    /// Protect (`true`) or unprotect (`false`) the branch.
    pub(crate) protected: Option<bool>,
    /// RFC 3339: a new expiry (in the future, at most 365 days ahead); `null` clears it; absent keeps it. The
    /// default branch cannot expire.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub(crate) expires_at: Option<Option<String>>,
    /// Replaces all the labels (an empty object removes them); bounds as on create.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub(crate) labels: Option<Labels>,
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or a value (`Some(Some(_))`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Resets a branch to its parent's latest state.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetBranch {
    /// Keep the state before the reset as a branch `<name>_before_reset_<time>` (default `false`: a preview
    /// branch is reset often, and each kept state would count against the branch quota).
    pub(crate) preserve: Option<bool>,
}

/// Restores a branch to `target_lsn` or `target_timestamp` (exactly one).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RestoreBranch {
    /// `X/Y` hex.
    #[schema(pattern = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$", example = "0/16B3748")]
    pub(crate) target_lsn: Option<String>,
    /// RFC 3339; the newest commit at or before it, or the database as created if it had none yet (422 before
    /// the database was created or in the future).
    #[schema(format = DateTime)]
    pub(crate) target_timestamp: Option<String>,
    /// Keep the state before the restore as a branch `<name>_before_restore_<time>` (default `true`).
    pub(crate) preserve: Option<bool>,
}
