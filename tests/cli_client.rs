//! The command-line client (`cambium projects|databases|branches|operations|endpoints|psql|connection-string|
//! request|completions`) black-box against a real `cambium up`: every command run as a process, its
//! `--output json` parsed and checked against what the API holds, `--output yaml` and tables read back, and the
//! exit codes a script relies on (0, 2 usage, 3 unreachable, 4 unauthenticated, 5 not found, 6 conflict,
//! 7 invalid, 11 a `--wait` that gave up), with the API's message and request id on stderr. The SQL steps use
//! `psql` through `cambium psql`; without psql they are skipped (said on stderr) and the rest still runs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::api::Up;
use serde_json::Value;

/// The client pointed at `up`, with a password store of its own.
struct Client<'a> {
    up: &'a Up,
    config_dir: PathBuf,
}

impl Client<'_> {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cambium"));
        command.args(args);
        self.environment(&mut command);
        command
    }

    /// The client's environment on `command` (cambium itself, or a program that runs it).
    fn environment(&self, command: &mut Command) {
        command
            .env("CAMBIUM_API_URL", format!("http://{}", self.up.process.address))
            .env("CAMBIUM_API_KEY_FILE", self.up.data_dir.join("api_key"))
            .env("CAMBIUM_CONFIG_DIR", &self.config_dir)
            .env_remove("CAMBIUM_API_KEY")
            .env_remove("CAMBIUM_OUTPUT")
            .env_remove("CAMBIUM_CONFIG")
            .env_remove("PGPASSWORD");
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run cambium")
    }

    /// Runs `args` (a success) and returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "cambium {args:?} exited {:?}: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("utf-8")
    }

    /// Runs `args -o json` (a success) and parses its stdout.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.ok(&all);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("cambium {args:?}: {e}: {text}"))
    }

    /// Runs `args`, which must fail with `code`; its stderr.
    fn fails(&self, args: &[&str], code: i32) -> String {
        let output = self.run(args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(code), "cambium {args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "nothing on stdout when failing: {output:?}");
        stderr
    }
}

fn has_psql() -> bool {
    Command::new("psql")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key} in {value}"))
}

/// An API error on stderr: its message, the HTTP status and code, and the request id.
fn assert_api_error(stderr: &str, status: u16, code: &str) {
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(&format!("HTTP {status}, {code}, request req_")),
        "{stderr}"
    );
}

#[test]
fn every_command_prints_what_the_api_holds_and_exits_as_documented() {
    let up = Up::start();
    let root = tempfile::tempdir().expect("tempdir");
    let cli = Client {
        up: &up,
        config_dir: root.path().join("config"),
    };
    let project = projects(&cli);
    let database = databases(&cli, &project, root.path());
    let branch = branches(&cli, &database);
    if has_psql() {
        sql_and_restore(&cli, &database, &branch);
    } else {
        common::skipped("the psql steps (no psql on this machine)");
    }
    operations_and_requests(&cli, &project, &database, &branch);
    exit_codes(&cli, &database);
    completions(&cli);
    // Deletions last: a database, then its project; both gone afterwards.
    let deleted = cli.json(&["databases", "delete", &database]);
    assert_eq!(deleted, serde_json::json!({"id": database, "deleted": true}));
    cli.fails(&["databases", "get", &database], 5);
    cli.json(&["projects", "delete", &project]);
    let stderr = cli.fails(&["projects", "get", &project], 5);
    assert_api_error(&stderr, 404, "not_found");
}

/// `projects create|get|list|update`, in JSON, YAML and tables; the id of a project.
fn projects(cli: &Client) -> String {
    let project = cli.json(&["projects", "create", "shop"]);
    let id = str_of(&project, "id").to_owned();
    assert!(id.starts_with("proj_") && project["name"] == "shop", "{project}");
    assert_eq!(cli.json(&["projects", "get", &id]), project);
    let renamed = cli.json(&["projects", "update", &id, "--name", "store"]);
    assert_eq!(renamed["name"], "store");
    assert_eq!(renamed["id"], project["id"]);
    cli.json(&["projects", "create", "other"]);
    let listed = cli.json(&["projects", "list"]);
    let names: Vec<&str> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|p| str_of(p, "name"))
        .collect();
    assert_eq!(names, ["store", "other"], "oldest first");
    let limited = cli.run(&["projects", "list", "--limit", "1", "-o", "json"]);
    let first: Value = serde_json::from_slice(&limited.stdout).expect("json");
    assert_eq!(first.as_array().map(Vec::len), Some(1));
    assert!(String::from_utf8_lossy(&limited.stderr).contains("showing the first 1"));
    // YAML is the same value; a table shows every field.
    let yaml: Value = serde_norway::from_str(&cli.ok(&["projects", "get", &id, "-o", "yaml"])).expect("yaml");
    assert_eq!(yaml, renamed);
    let table = cli.ok(&["projects", "list"]);
    for text in ["id", "name", "created_at", id.as_str(), "store", "other"] {
        assert!(table.contains(text), "{text} in\n{table}");
    }
    id
}

/// `databases create --wait|get|list|update|suspend|resume|reset-password|endpoints|health`, `endpoints list`;
/// the id of a database.
fn databases(cli: &Client, project: &str, root: &Path) -> String {
    let created = cli.json(&["databases", "create", "orders", "--project", project, "--wait"]);
    let database = &created["database"];
    let id = str_of(database, "id").to_owned();
    assert_eq!(created["operation"]["status"], "finished", "{created}");
    assert_eq!(created["operation"]["action"], "create_database");
    assert_eq!(
        database["status"], "active",
        "--wait shows the database as it is now: {created}"
    );
    let uri = str_of(database, "connection_uri");
    assert!(
        common::api::password_of(uri).is_some(),
        "the creation shows the password: {uri}"
    );
    // The client kept it, privately.
    let passwords = root.join("config/passwords.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&passwords)
        .expect("the passwords file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let got = cli.json(&["databases", "get", &id]);
    assert_eq!(got["name"], "orders");
    assert!(common::api::password_of(str_of(&got, "connection_uri")).is_none());
    let listed = cli.json(&["databases", "list", "--project", project]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["id"], got["id"]);
    let renamed = cli.json(&["databases", "update", &id, "--name", "sales"]);
    assert_eq!(renamed["name"], "sales");
    assert_eq!(cli.json(&["databases", "suspend", &id])["status"], "suspended");
    assert_eq!(cli.json(&["databases", "resume", &id])["status"], "active");
    let reset = cli.json(&["databases", "reset-password", &id]);
    let new_password = common::api::password_of(str_of(&reset, "connection_uri")).expect("a new password");
    assert_ne!(Some(new_password.clone()), common::api::password_of(uri));
    let kept = std::fs::read_to_string(&passwords).expect("read");
    assert!(
        kept.contains(&new_password),
        "the reset's password replaced the old one"
    );
    let endpoints = cli.json(&["databases", "endpoints", &id]);
    assert_eq!(endpoints[0]["database_id"], got["id"]);
    assert_eq!(cli.json(&["endpoints", "list", "--database", &id]), endpoints);
    let health = cli.json(&["databases", "health", &id]);
    assert_eq!(health["database_id"], got["id"], "{health}");
    id
}

/// `branches create|get|list|update|promote|reset|delete` by id and by name, `--set`, the workflow flags
/// (`--label`, `--expires-at`, `--protected`, `list --label`); the id of a branch `dev`.
fn branches(cli: &Client, database: &str) -> String {
    let tomorrow = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(24))
        .expect("in range")
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let dev = cli.json(&["branches", "create", "dev", "--database", database]);
    let id = str_of(&dev, "id").to_owned();
    assert!(str_of(&dev, "parent_lsn").contains('/'), "{dev}");
    assert_eq!(cli.json(&["branches", "get", &id]), dev);
    assert_eq!(
        cli.json(&["branches", "get", "dev", "--database", database]),
        dev,
        "by name"
    );
    let at_lsn = cli.json(&[
        "branches",
        "create",
        "at-lsn",
        "--database",
        database,
        "--parent",
        "dev",
        "--at",
        str_of(&dev, "parent_lsn"),
        "--label",
        "pr=42",
        "--expires-at",
        &tomorrow,
    ]);
    assert_eq!(at_lsn["parent_branch_id"], dev["id"]);
    assert_eq!(at_lsn["parent_lsn"], dev["parent_lsn"]);
    assert_eq!(at_lsn["labels"], serde_json::json!({"pr": "42"}), "{at_lsn}");
    assert!(at_lsn["expires_at"].is_string(), "{at_lsn}");
    let renamed = cli.json(&[
        "branches",
        "update",
        "at-lsn",
        "--database",
        database,
        "--set",
        "name=fork",
    ]);
    assert_eq!(renamed["name"], "fork");
    let listed = cli.json(&["branches", "list", "--database", database]);
    let names: Vec<&str> = listed
        .as_array()
        .expect("array")
        .iter()
        .map(|b| str_of(b, "name"))
        .collect();
    assert_eq!(names, ["main", "dev", "fork"]);
    let labelled = cli.json(&["branches", "list", "--database", database, "--label", "pr:42"]);
    assert_eq!(labelled.as_array().map(Vec::len), Some(1), "{labelled}");
    assert_eq!(labelled[0]["name"], "fork");
    let kept = cli.json(&[
        "branches",
        "update",
        "fork",
        "--database",
        database,
        "--expires-at",
        "none",
    ]);
    assert!(kept.get("expires_at").is_none(), "`none` clears the expiry: {kept}");
    // Promote, then back: the database's default branch follows.
    let promoted = cli.json(&["branches", "promote", "fork", "--database", database]);
    assert_eq!(promoted["is_default"], true);
    assert_eq!(
        cli.json(&["databases", "get", database])["default_branch_id"],
        promoted["id"]
    );
    cli.json(&["branches", "promote", "main", "--database", database]);
    // Reset `fork` to its parent's latest state, keeping the state before; protect it, and see the refusal.
    let reset = cli.json(&[
        "branches",
        "reset",
        "fork",
        "--database",
        database,
        "--preserve",
        "--wait",
    ]);
    assert_eq!(reset["status"], "finished", "the operation, unwrapped: {reset}");
    assert_eq!(reset["action"], "reset_branch");
    let kept: Vec<String> = cli
        .json(&["branches", "list", "--database", database])
        .as_array()
        .expect("array")
        .iter()
        .map(|b| str_of(b, "name").to_owned())
        .collect();
    assert!(kept.iter().any(|n| n.starts_with("fork_before_reset_")), "{kept:?}");
    for name in kept.iter().filter(|n| n.starts_with("fork_before_reset_")) {
        cli.json(&["branches", "delete", name, "--database", database]);
    }
    let protected = cli.json(&[
        "branches",
        "update",
        "fork",
        "--database",
        database,
        "--protected",
        "true",
    ]);
    assert_eq!(protected["protected"], true, "{protected}");
    assert_api_error(
        &cli.fails(&["branches", "delete", "fork", "--database", database], 6),
        409,
        "conflict",
    );
    cli.json(&[
        "branches",
        "update",
        "fork",
        "--database",
        database,
        "--set",
        "protected=false",
    ]);
    let deleted = cli.json(&["branches", "delete", "fork", "--database", database]);
    assert_eq!(deleted["deleted"], true);
    cli.fails(&["branches", "get", str_of(&promoted, "id")], 5);
    id
}

/// SQL through `cambium psql` on the database, a branch and a point in time; a restore by time with `--wait`;
/// `connection-string` with and without the password.
fn sql_and_restore(cli: &Client, database: &str, dev: &str) {
    cli.ok(&[
        "psql",
        database,
        "--",
        "-c",
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)",
        "-c",
        "INSERT INTO items VALUES (1, 'apple')",
    ]);
    let count = |target: &str| -> String {
        cli.ok(&[
            "psql",
            target,
            "--database",
            database,
            "--",
            "-At",
            "-c",
            "SELECT count(*) FROM items",
        ])
        .trim()
        .to_owned()
    };
    assert_eq!(count("main"), "1");
    // `dev` was made before the table: it has none.
    let missing = cli.run(&["psql", dev, "--", "-c", "SELECT 1 FROM items"]);
    assert_ne!(missing.status.code(), Some(0), "psql's own exit code");
    // So its schema diff against main has the table removed, as a list and as a diff of the DDL.
    let diff = cli.json(&["branches", "schema-diff", dev, "--base", "main", "--database", database]);
    assert_eq!(diff["changes"].as_array().map(Vec::len), Some(1), "{diff}");
    let change = &diff["changes"][0];
    assert!(
        change["kind"] == "table" && change["name"] == "items" && change["change"] == "removed",
        "{diff}"
    );
    let table = cli.ok(&["branches", "schema-diff", dev, "--base", "main", "--database", database]);
    assert!(table.contains("removed") && table.contains("-CREATE TABLE"), "{table}");
    let none = cli.ok(&[
        "branches",
        "schema-diff",
        "main",
        "--base",
        "main",
        "--database",
        database,
    ]);
    assert_eq!(none, "no schema changes\n");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let before = jiff::Timestamp::now().to_string();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    cli.ok(&["psql", database, "--", "-c", "DELETE FROM items"]);
    assert_eq!(count("main"), "0");
    assert_eq!(count(&format!("main@{before}")), "1", "time travel, read-only");
    let restored = cli.json(&[
        "branches",
        "restore",
        "main",
        "--database",
        database,
        "--to",
        &before,
        "--wait",
    ]);
    assert_eq!(restored["status"], "finished", "{restored}");
    assert_eq!(restored["action"], "restore_branch");
    assert_eq!(count("main"), "1", "the restore brought the row back");
    let names: Vec<String> = cli
        .json(&["branches", "list", "--database", database])
        .as_array()
        .expect("array")
        .iter()
        .map(|b| str_of(b, "name").to_owned())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("main_before_restore_")), "{names:?}");
    // Connection strings: with the kept password, without it, at a point.
    let with = cli.ok(&["connection-string", "main", "--database", database]);
    assert!(common::api::password_of(with.trim()).is_some(), "{with}");
    let without = cli.ok(&["connection-string", database, "--no-password"]);
    assert!(
        without.trim().ends_with(&format!("/{database}?sslmode=prefer")),
        "{without}"
    );
    assert!(common::api::password_of(without.trim()).is_none());
    let at = cli.ok(&["connection-string", &format!("{dev}@0/1"), "--no-password"]);
    assert!(at.contains(&format!("/{dev}%400%2F1?")), "{at}");
}

/// `operations list|get|wait`; `request` with and without `--wait`.
fn operations_and_requests(cli: &Client, project: &str, database: &str, dev: &str) {
    let operations = cli.json(&["operations", "list", "--project", project]);
    let actions: Vec<&str> = operations
        .as_array()
        .expect("array")
        .iter()
        .map(|o| str_of(o, "action"))
        .collect();
    assert!(actions.contains(&"create_database"), "{actions:?}");
    let first = str_of(&operations[0], "id");
    assert_eq!(cli.json(&["operations", "get", first]), operations[0]);
    assert_eq!(cli.json(&["operations", "wait", first])["status"], "finished");
    let raw = cli.json(&["request", "GET", &format!("/v1/databases/{database}/branches")]);
    assert!(
        raw["branches"].is_array() && raw.get("next_cursor").is_some(),
        "the body whole: {raw}"
    );
    // A restore of `dev` to the point it was forked at, through `request`, waited for.
    let branch = cli.json(&["branches", "get", dev]);
    let body = format!(
        r#"{{"target_lsn":"{}","preserve":false}}"#,
        str_of(&branch, "parent_lsn")
    );
    let path = format!("/v1/branches/{dev}/restore");
    let reply = cli.json(&["request", "post", &path, "--data", &body, "--wait"]);
    assert_eq!(reply["operation"]["status"], "finished", "{reply}");
    assert_eq!(reply["operation"]["branch_id"], branch["id"]);
}

/// The documented exit codes, with the API's message and request id on stderr.
fn exit_codes(cli: &Client, database: &str) {
    let main = str_of(&cli.json(&["databases", "get", database]), "default_branch_id").to_owned();
    // 6: the default branch cannot be deleted.
    let stderr = cli.fails(&["branches", "delete", &main], 6);
    assert_api_error(&stderr, 409, "conflict");
    assert!(stderr.contains("default branch"), "{stderr}");
    // 7: a malformed time; an LSN ahead of the branch (422); an unknown field through --set.
    assert_api_error(
        &cli.fails(&["branches", "restore", &main, "--to", "yesterday"], 7),
        400,
        "invalid_request",
    );
    assert_api_error(
        &cli.fails(&["branches", "restore", &main, "--to", "FF/0"], 7),
        422,
        "unprocessable",
    );
    assert_api_error(
        &cli.fails(&["projects", "create", "x", "--set", "bogus=1"], 7),
        400,
        "invalid_request",
    );
    // 5: not found, by id and by name.
    cli.fails(&["branches", "get", "br_01M87CGNR8ZNS8NGNC6A67KENX"], 5);
    let stderr = cli.fails(&["branches", "get", "nope", "--database", database], 5);
    assert!(stderr.contains("no branch named \"nope\""), "{stderr}");
    // 4: a wrong key, a missing key file.
    let stderr = cli.fails(&["projects", "list", "--api-key", "cmb_wrong"], 4);
    assert_api_error(&stderr, 401, "unauthenticated");
    cli.fails(&["projects", "list", "--api-key-file", "/nonexistent/api_key"], 4);
    // 3: nothing listens there.
    let port = common::api::free_port();
    let stderr = cli.fails(
        &["projects", "list", "--api-url", &format!("http://127.0.0.1:{port}")],
        3,
    );
    assert!(stderr.contains("could not reach the API"), "{stderr}");
    // 2: usage, by clap and by the client.
    cli.fails(&["projects", "lst"], 2);
    cli.fails(&["projects", "create", "x", "--set", "novalue"], 2);
    cli.fails(&["branches", "get", "dev"], 2);
    cli.fails(&["projects", "list", "--api-url", "127.0.0.1:8420"], 2);
    cli.fails(&["request", "GET", "/elsewhere"], 2);
}

/// `completions SHELL` prints a script naming the commands.
fn completions(cli: &Client) {
    for shell in ["bash", "zsh", "fish"] {
        let script = cli.ok(&["completions", shell]);
        assert!(
            script.contains("cambium") && script.contains("branches") && script.contains("restore"),
            "{shell}"
        );
    }
    cli.fails(&["completions", "tcsh"], 2);
}

#[test]
fn wait_gives_up_with_11_and_operations_wait_follows_to_the_end() {
    let up = Up::start_with(&["--operation-delay-ms", "3000"]);
    let root = tempfile::tempdir().expect("tempdir");
    let cli = Client {
        up: &up,
        config_dir: root.path().join("config"),
    };
    let project = str_of(&cli.json(&["projects", "create", "slow"]), "id").to_owned();
    let args = [
        "databases",
        "create",
        "d",
        "--project",
        &project,
        "--wait",
        "--wait-timeout-s",
        "1",
    ];
    let stderr = cli.fails(&args, 11);
    assert!(stderr.contains("still running after 1 s"), "{stderr}");
    let operation = str_of(&cli.json(&["operations", "list", "--project", &project])[0], "id").to_owned();
    assert!(stderr.contains(&operation), "{stderr}");
    let ended = cli.json(&["operations", "wait", &operation]);
    assert_eq!(ended["status"], "finished", "{ended}");
    // Piped, `--wait` draws no progress: stderr stays empty on success.
    let output = cli.run(&[
        "databases",
        "create",
        "e",
        "--project",
        &project,
        "--wait",
        "-o",
        "json",
    ]);
    assert!(output.status.success());
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    // On a terminal (util-linux's `script` gives it one) the spinner names the operation while it runs.
    if Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let line = format!(
            "{} databases create f --project {project} --wait --field operation.status",
            env!("CARGO_BIN_EXE_cambium")
        );
        let mut script = Command::new("script");
        script.args(["-qec", &line, "/dev/null"]);
        cli.environment(&mut script);
        let transcript = script.output().expect("run script");
        let text = String::from_utf8_lossy(&transcript.stdout);
        assert!(transcript.status.success(), "{text}");
        assert!(
            text.contains("create_database op_") && text.contains(" running ("),
            "{text}"
        );
        assert!(text.trim_end().ends_with("finished"), "{text}");
    } else {
        common::skipped("the terminal check (no `script` on this machine)");
    }
}
