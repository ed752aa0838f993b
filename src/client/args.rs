//! The client commands and their flags (clap): one subcommand per resource of the `/v1` API with the verbs it
//! has, `psql`, `connection-string`, `request` (any call, for routes this version does not name) and
//! `completions`. The flags every client command shares (where the API is, the key, the output format) are
//! global, so they go anywhere on the line (`cambium branches list -o json --database db_…`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::error::EXIT_CODES_HELP;
use super::output::Format;

/// Where the API is, how to authenticate, and how to print.
#[derive(Args, Debug, Clone)]
pub(crate) struct ClientArgs {
    /// The `/v1` API's base URL.
    #[arg(
        long,
        global = true,
        env = "CAMBIUM_API_URL",
        default_value = "http://127.0.0.1:8420"
    )]
    pub(crate) api_url: String,
    /// An API key (`cmb_…`). Without it, the key is read from `--api-key-file`.
    #[arg(long, global = true, env = "CAMBIUM_API_KEY", hide_env_values = true)]
    pub(crate) api_key: Option<String>,
    /// The file holding the API key when none is given: by default the one a `cambium up` in this directory
    /// wrote.
    #[arg(
        long,
        global = true,
        env = "CAMBIUM_API_KEY_FILE",
        default_value = ".cambium/api_key"
    )]
    pub(crate) api_key_file: PathBuf,
    /// A PEM certificate to trust for an HTTPS API besides the system's roots (`up --api-tls-cert`'s).
    #[arg(long, global = true, env = "CAMBIUM_API_CA_CERT")]
    pub(crate) api_ca_cert: Option<PathBuf>,
    /// How results print on stdout: tables for people, JSON or YAML for programs (the resource without the
    /// API's wrapping key; a list as an array of every page).
    #[arg(long, short = 'o', global = true, env = "CAMBIUM_OUTPUT", value_enum, default_value_t = Format::Table)]
    pub(crate) output: Format,
    /// Print only this field of the result, as plain text, one line per item of a list: a dot path such as
    /// `database.id`, for scripts (`DB=$(cambium databases create orders --project P --field database.id)`).
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) field: Option<String>,
    /// Where the client keeps the database passwords it was shown (a creation's, a reset's), for `psql` and
    /// `connection-string`. Default: `$XDG_CONFIG_HOME/cambium`, else `~/.config/cambium`.
    #[arg(long, global = true, env = "CAMBIUM_CONFIG_DIR")]
    pub(crate) config_dir: Option<PathBuf>,
}

/// `--wait` and its bound.
#[derive(Args, Debug, Clone)]
pub(crate) struct WaitArgs {
    /// Wait for the operation to end (a spinner on stderr when it is a terminal), print it as it ended, and exit
    /// 10 if it failed.
    #[arg(long)]
    pub(crate) wait: bool,
    /// How long `--wait` waits before giving up (exit 11; the operation goes on).
    #[arg(long, env = "CAMBIUM_WAIT_TIMEOUT_S", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) wait_timeout_s: u64,
}

/// Fields a create or update sends besides its named flags, so fields the API gains are settable at once.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct Fields {
    /// A request field, `FIELD=VALUE`, repeatable. VALUE is JSON when it parses as JSON (`true`, `3`, `null`,
    /// `{"env":"dev"}`), else a string.
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub(crate) set: Vec<String>,
}

/// How many items a list shows.
#[derive(Args, Debug, Clone)]
pub(crate) struct ListArgs {
    /// Show at most this many (default: every page, up to 10 000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) limit: Option<u64>,
}

/// A branch: its id, or its name with `--database`.
#[derive(Args, Debug, Clone)]
pub(crate) struct BranchRef {
    /// `br_…`, or the branch's name with `--database`.
    pub(crate) branch: String,
    /// The database whose branch BRANCH names (needed when BRANCH is a name).
    #[arg(long)]
    pub(crate) database: Option<String>,
}

/// The client's subcommands, flattened into `cambium`'s.
#[derive(Subcommand, Debug)]
pub(crate) enum ClientCommand {
    /// Projects: list, get, create, update, delete (client of the `/v1` API).
    #[command(after_help = EXIT_CODES_HELP)]
    Projects {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: ProjectsCommand,
    },
    /// Databases: list, get, create, update, delete, resume, suspend, reset-password, endpoints, health.
    #[command(after_help = EXIT_CODES_HELP)]
    Databases {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: DatabasesCommand,
    },
    /// Branches: list, get, create, update, promote, restore, delete.
    #[command(after_help = EXIT_CODES_HELP)]
    Branches {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: BranchesCommand,
    },
    /// Operations: list, get, wait.
    #[command(after_help = EXIT_CODES_HELP)]
    Operations {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: OperationsCommand,
    },
    /// Compute endpoints: list (a database is its endpoint; see `databases resume|suspend`).
    #[command(after_help = EXIT_CODES_HELP)]
    Endpoints {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: EndpointsCommand,
    },
    /// Opens psql on a branch (`br_…`, a database's `db_…` for its default branch, or a name with `--database`),
    /// read-write; `BRANCH@TIME` (RFC 3339) or `BRANCH@LSN` read-only as of that point. Exits with psql's code.
    #[command(after_help = EXIT_CODES_HELP)]
    Psql {
        #[command(flatten)]
        client: ClientArgs,
        /// `br_…`, `db_…` or a branch name (with `--database`), optionally `@TIME` or `@LSN`.
        target: String,
        /// The database whose branch TARGET names.
        #[arg(long)]
        database: Option<String>,
        /// The psql program.
        #[arg(long, env = "CAMBIUM_PSQL", default_value = "psql")]
        psql: PathBuf,
        /// Arguments for psql, after `--` (`-- -c 'SELECT 1'`).
        #[arg(last = true)]
        psql_args: Vec<String>,
    },
    /// Prints a branch's connection string (as `psql` takes it), with the database's password when this client
    /// was shown it (by `databases create` or `databases reset-password`).
    #[command(name = "connection-string", after_help = EXIT_CODES_HELP)]
    ConnectionString {
        #[command(flatten)]
        client: ClientArgs,
        /// `br_…`, `db_…` or a branch name (with `--database`), optionally `@TIME` or `@LSN`.
        target: String,
        /// The database whose branch TARGET names.
        #[arg(long)]
        database: Option<String>,
        /// Leave the password out even when it is known.
        #[arg(long)]
        no_password: bool,
    },
    /// Any `/v1` call: `cambium request POST /v1/branches/br_…/restore --data '{"target_lsn":"0/1"}'`. Prints
    /// the response body whole.
    #[command(after_help = EXIT_CODES_HELP)]
    Request {
        #[command(flatten)]
        client: ClientArgs,
        /// GET, POST, PATCH, DELETE, …
        method: String,
        /// The path from `/v1` on, with its query (`/v1/projects?limit=5`).
        path: String,
        /// The JSON body.
        #[arg(long)]
        data: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Prints a completion script for SHELL (`source <(cambium completions bash)`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// `cambium projects …`.
#[derive(Subcommand, Debug)]
pub(crate) enum ProjectsCommand {
    /// Lists the projects.
    List(ListArgs),
    /// Shows a project.
    Get {
        /// `proj_…`.
        project: String,
    },
    /// Creates a project.
    Create {
        /// Its name.
        name: String,
        #[command(flatten)]
        fields: Fields,
    },
    /// Renames a project (or sets other fields with `--set`).
    Update {
        /// `proj_…`.
        project: String,
        /// The new name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: Fields,
    },
    /// Deletes a project with its databases and their data. Irreversible.
    Delete {
        /// `proj_…`.
        project: String,
    },
}

/// `cambium databases …`.
#[derive(Subcommand, Debug)]
pub(crate) enum DatabasesCommand {
    /// Lists a project's databases.
    List {
        /// `proj_…`.
        #[arg(long)]
        project: String,
        #[command(flatten)]
        list: ListArgs,
    },
    /// Shows a database.
    Get {
        /// `db_…`.
        database: String,
    },
    /// Creates a database (with its default branch `main`); prints its connection string with the password,
    /// which is shown only now (the client keeps it for `psql` and `connection-string`).
    Create {
        /// Its name.
        name: String,
        /// `proj_…`.
        #[arg(long)]
        project: String,
        /// The region (this deployment's when absent).
        #[arg(long)]
        region: Option<String>,
        #[command(flatten)]
        fields: Fields,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Renames a database (or sets other fields with `--set`).
    Update {
        /// `db_…`.
        database: String,
        /// The new name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: Fields,
    },
    /// Deletes a database, its branches and their data. Irreversible.
    Delete {
        /// `db_…`.
        database: String,
    },
    /// Starts the database's compute.
    Resume {
        /// `db_…`.
        database: String,
    },
    /// Stops the database's compute; its data stays.
    Suspend {
        /// `db_…`.
        database: String,
    },
    /// Makes a new password (new sessions need it at once); prints it once and keeps it for `psql`.
    ResetPassword {
        /// `db_…`.
        database: String,
    },
    /// Lists the database's compute endpoints.
    Endpoints {
        /// `db_…`.
        database: String,
    },
    /// Shows whether the database's WAL has its three healthy safekeeper copies.
    Health {
        /// `db_…`.
        database: String,
    },
}

/// `cambium branches …`.
#[derive(Subcommand, Debug)]
pub(crate) enum BranchesCommand {
    /// Lists a database's branches.
    List {
        /// `db_…`.
        #[arg(long)]
        database: String,
        #[command(flatten)]
        list: ListArgs,
    },
    /// Shows a branch.
    Get(BranchRef),
    /// Forks a branch, instantly whatever the size: from the parent's latest state, or as of `--at`.
    Create {
        /// Its name (unique in the database).
        name: String,
        /// `db_…`.
        #[arg(long)]
        database: String,
        /// The parent branch (`br_…` or a name); the database's default branch when absent.
        #[arg(long)]
        parent: Option<String>,
        /// The parent's point to fork at: an RFC 3339 time (`2026-11-22T13:00:00Z`) or an LSN (`0/16B3748`).
        #[arg(long)]
        at: Option<String>,
        #[command(flatten)]
        fields: Fields,
    },
    /// Renames a branch (or sets other fields with `--set`).
    Update {
        #[command(flatten)]
        branch: BranchRef,
        /// The new name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: Fields,
    },
    /// Makes a branch its database's default branch (what the `db_…` connection string serves).
    Promote(BranchRef),
    /// Restores a branch to a point in its history: same id, name and connection string; the state before is
    /// kept as a branch `<name>_before_restore_<time>` unless `--no-preserve`.
    Restore {
        #[command(flatten)]
        branch: BranchRef,
        /// The point: an RFC 3339 time (`2026-11-22T13:00:00Z`) or an LSN (`0/16B3748`).
        #[arg(long)]
        to: String,
        /// Keep no branch of the state before the restore.
        #[arg(long)]
        no_preserve: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Deletes a branch and every branch forked from it. Irreversible.
    Delete(BranchRef),
}

/// `cambium operations …`.
#[derive(Subcommand, Debug)]
pub(crate) enum OperationsCommand {
    /// Lists a project's operations, newest first.
    List {
        /// `proj_…`.
        #[arg(long)]
        project: String,
        #[command(flatten)]
        list: ListArgs,
    },
    /// Shows an operation.
    Get {
        /// `op_…`.
        operation: String,
    },
    /// Waits for an operation to end and shows it (exit 10 if it failed, 11 if it is still running at the end).
    Wait {
        /// `op_…`.
        operation: String,
        /// How long to wait.
        #[arg(long, env = "CAMBIUM_WAIT_TIMEOUT_S", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
        wait_timeout_s: u64,
    },
}

/// `cambium endpoints …`.
#[derive(Subcommand, Debug)]
pub(crate) enum EndpointsCommand {
    /// Lists a database's compute endpoints.
    List {
        /// `db_…`.
        #[arg(long)]
        database: String,
    },
}
