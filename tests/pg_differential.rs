//! Differential test against PostgreSQL 15 (issue 11): every statement of `tests/pgdiff/corpus/*.sql` runs in
//! order through Cambium, and its outcome is compared with the one recorded from a real PostgreSQL 15 in
//! `tests/pgdiff/expected/*.json`. A ratchet (`tests/pgdiff/known_differences.txt`) lists the statements that
//! differ today; the test fails when any statement's classification moves off that list, up or down, so the
//! dialect layer can only raise the score and each gain is written down.
//!
//! **Corpus format** (no SQL parsing): a statement is the lines from its first line up to the first line that
//! ends with `;` (trailing whitespace ignored). Between statements, blank lines and lines starting with `--`
//! are skipped; inside a statement every line is kept verbatim. A statement whose own lines would end with
//! `;` (a function body) is written on one line. Statements are numbered from 1 in each file. Each file is a
//! scenario run in order on one session in a fresh database.
//!
//! A plan (`EXPLAIN …`) is the engine's own: only its shape is compared (the `QUERY PLAN` column and at least one
//! line, or the error class).
//!
//! **Outcome** of a statement, through tokio-postgres `simple_query` (text format, what psql shows): `Ok` with
//! the column names and rows (`NULL` as JSON `null`; a statement without a result set has no columns and no
//! rows), or `Error` with its SQLSTATE. A statement that takes longer than [`STATEMENT_TIMEOUT`] is the error
//! `TIMEOUT`; a connection that fails without a SQLSTATE is `NO_SQLSTATE`. After either the session is
//! replaced by a fresh one, so one hang does not take the rest of the file with it.
//!
//! **Modes.**
//! - Record (`PGDIFF_RECORD_URL=postgres://…`, a real PostgreSQL 15 reachable through that URL with a user
//!   that may create databases; `scripts/pgdiff-record.sh` starts one in a temporary directory): each file
//!   runs in a database `pgdiff_<file stem>` made afresh, and its outcomes go to `expected/<stem>.json`.
//! - Compare (default; no PostgreSQL needed): `cambium up`, one database per file over the HTTP API, every
//!   statement classified as `same` or one of the [`Category`] differences. The score and a full report
//!   (`$CARGO_TARGET_DIR/pgdiff-report.txt`, else `target/pgdiff-report.txt`) are written every run; the test
//!   fails when a classification differs from `known_differences.txt`. `PGDIFF_UPDATE=1` rewrites that file
//!   from this run instead. `PGDIFF_FILTER=<substring>` runs only the matching corpus files (the ratchet is
//!   then checked for those files only).

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

use common::api::Up;

/// Longest a statement may run before its outcome is `TIMEOUT`.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Mismatches printed in the failure message (all of them are in the report).
const MISMATCHES_PRINTED_MAX: usize = 60;

/// Compact JSON of a value (a `macro_rules!` so the `serde::Serialize` bound needs no dependency on serde).
macro_rules! to_json {
    ($value:expr) => {
        serde_json::to_string($value).expect("serialize")
    };
}

fn pgdiff_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pgdiff")
}

// ---- the corpus ----

/// One corpus file: its name (`NN_topic.sql`) and statements in order.
struct CorpusFile {
    name: String,
    statements: Vec<String>,
}

impl CorpusFile {
    /// `NN_topic`.
    fn stem(&self) -> &str {
        self.name.strip_suffix(".sql").expect("a .sql name")
    }
}

/// Splits a corpus file into statements (the format is in the module comment).
fn split_statements(name: &str, text: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        let skipped = line.trim_start().is_empty() || line.trim_start().starts_with("--");
        if current.is_empty() && skipped {
            continue;
        }
        current.push(line);
        if line.ends_with(';') {
            statements.push(current.join("\n"));
            current.clear();
        }
    }
    assert!(
        current.is_empty(),
        "{name}: the last statement has no line ending with ';': {current:?}"
    );
    statements
}

/// Every corpus file, by name, kept to those matching `PGDIFF_FILTER` if set.
fn load_corpus() -> Vec<CorpusFile> {
    let dir = pgdiff_dir().join("corpus");
    let filter = std::env::var("PGDIFF_FILTER").unwrap_or_default();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".sql") && name.contains(filter.as_str()))
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no corpus file in {} matches {filter:?}",
        dir.display()
    );
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(&name)).expect("read a corpus file");
            let statements = split_statements(&name, &text);
            CorpusFile { name, statements }
        })
        .collect()
}

// ---- outcomes ----

/// What one statement did.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Ok {
        columns: Vec<String>,
        rows: Vec<Vec<Option<String>>>,
    },
    Error {
        sqlstate: String,
    },
}

impl Outcome {
    fn from_json(value: &Value) -> Outcome {
        if let Some(sqlstate) = value.get("error") {
            let sqlstate = sqlstate.as_str().expect("error is a SQLSTATE string").to_owned();
            return Outcome::Error { sqlstate };
        }
        let columns = value["columns"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c.as_str().expect("a column name").to_owned())
            .collect();
        let rows = value["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|row| {
                row.as_array()
                    .expect("a row")
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .collect();
        Outcome::Ok { columns, rows }
    }

    /// The JSON fields of this outcome, one row per line, indented by `indent`.
    fn write_json(&self, out: &mut String, indent: &str) {
        match self {
            Outcome::Error { sqlstate } => {
                let _ = write!(out, "{indent}\"error\": {}", json_string(sqlstate));
            }
            Outcome::Ok { columns, rows } => {
                let _ = write!(out, "{indent}\"columns\": {},\n{indent}\"rows\": [", to_json!(columns));
                for (index, row) in rows.iter().enumerate() {
                    let comma = if index + 1 < rows.len() { "," } else { "" };
                    let _ = write!(out, "\n{indent}  {}{comma}", to_json!(row));
                }
                if !rows.is_empty() {
                    let _ = write!(out, "\n{indent}");
                }
                out.push(']');
            }
        }
    }

    /// One line for reports.
    fn brief(&self) -> String {
        match self {
            Outcome::Error { sqlstate } => format!("error {sqlstate}"),
            Outcome::Ok { columns, rows } => {
                let mut text = format!("ok columns {} rows {}", to_json!(columns), to_json!(rows));
                if text.len() > 600 {
                    let cut = (0..=600).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
                    text.truncate(cut);
                    text.push_str(" …");
                }
                text
            }
        }
    }
}

fn json_string(text: &str) -> String {
    to_json!(text)
}

/// A session that runs statements and replaces itself after a timeout or a lost connection.
struct Session {
    config: Config,
    client: Client,
}

impl Session {
    async fn open(config: Config) -> Session {
        let client = connect(&config).await;
        Session { config, client }
    }

    async fn run(&mut self, sql: &str) -> Outcome {
        let outcome = match tokio::time::timeout(STATEMENT_TIMEOUT, self.client.simple_query(sql)).await {
            Err(_elapsed) => {
                // Best effort: stop the statement on the server side, then start over on a fresh session.
                let _ =
                    tokio::time::timeout(Duration::from_secs(2), self.client.cancel_token().cancel_query(NoTls)).await;
                Outcome::Error {
                    sqlstate: "TIMEOUT".to_owned(),
                }
            }
            Ok(Err(error)) => Outcome::Error {
                sqlstate: match error.code() {
                    Some(code) => code.code().to_owned(),
                    None => "NO_SQLSTATE".to_owned(),
                },
            },
            Ok(Ok(messages)) => outcome_of(messages),
        };
        let lost =
            matches!(&outcome, Outcome::Error { sqlstate } if sqlstate == "TIMEOUT" || sqlstate == "NO_SQLSTATE");
        if lost || self.client.is_closed() {
            self.client = connect(&self.config).await;
        }
        outcome
    }
}

async fn connect(config: &Config) -> Client {
    let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
        .await
        .unwrap_or_else(|_| panic!("connect to {:?} in time", config.get_dbname()))
        .unwrap_or_else(|e| panic!("connect to {:?}: {e:?}", config.get_dbname()));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// The columns of the statement's result set (none without one) and its rows in order.
fn outcome_of(messages: Vec<SimpleQueryMessage>) -> Outcome {
    let mut columns = Vec::new();
    let mut rows = Vec::new();
    for message in messages {
        match message {
            SimpleQueryMessage::RowDescription(description) => {
                columns = description.iter().map(|c| c.name().to_owned()).collect();
            }
            SimpleQueryMessage::Row(row) => {
                rows.push((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect());
            }
            _ => {}
        }
    }
    Outcome::Ok { columns, rows }
}

async fn run_file(file: &CorpusFile, config: Config) -> Vec<Outcome> {
    let mut session = Session::open(config).await;
    let mut outcomes = Vec::with_capacity(file.statements.len());
    for sql in &file.statements {
        outcomes.push(session.run(sql).await);
    }
    outcomes
}

// ---- expected outcomes ----

fn expected_path(file: &CorpusFile) -> PathBuf {
    pgdiff_dir().join("expected").join(format!("{}.json", file.stem()))
}

fn write_expected(file: &CorpusFile, server_version: &str, outcomes: &[Outcome]) {
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\n  \"file\": {},\n  \"recorded_with\": {},\n  \"statements\": [",
        json_string(&file.name),
        json_string(server_version)
    );
    for (index, (sql, outcome)) in file.statements.iter().zip(outcomes).enumerate() {
        let _ = write!(
            out,
            "\n    {{\n      \"n\": {},\n      \"sql\": {},\n",
            index + 1,
            json_string(sql)
        );
        outcome.write_json(&mut out, "      ");
        out.push_str("\n    }");
        if index + 1 < outcomes.len() {
            out.push(',');
        }
    }
    out.push_str("\n  ]\n}\n");
    let path = expected_path(file);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create expected/");
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The recorded outcomes of `file`, checked to be for exactly its statements.
fn read_expected(file: &CorpusFile) -> Vec<Outcome> {
    let path = expected_path(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e}; record it with scripts/pgdiff-record.sh", path.display()));
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let entries = json["statements"].as_array().expect("statements");
    assert_eq!(
        entries.len(),
        file.statements.len(),
        "{} has {} statements, {} {}: the corpus changed, record again with scripts/pgdiff-record.sh",
        file.name,
        file.statements.len(),
        path.display(),
        entries.len()
    );
    entries
        .iter()
        .zip(&file.statements)
        .enumerate()
        .map(|(index, (entry, sql))| {
            assert_eq!(
                entry["sql"].as_str(),
                Some(sql.as_str()),
                "{}:{}: the statement changed since it was recorded; record again with scripts/pgdiff-record.sh",
                file.name,
                index + 1
            );
            Outcome::from_json(entry)
        })
        .collect()
}

// ---- classification and the ratchet ----

/// How a statement's Cambium outcome differs from PostgreSQL's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Category {
    Same,
    /// Cambium raised an error where PostgreSQL did not.
    ErrorWherePgOk,
    /// Cambium succeeded where PostgreSQL raised an error: a silent wrong result.
    OkWherePgError,
    /// Both succeeded with different rows: a silent wrong result.
    WrongRows,
    /// Same rows, different column names.
    WrongColumns,
    /// Both raised errors of different SQLSTATE classes.
    WrongSqlstate,
}

const CATEGORIES: [Category; 6] = [
    Category::Same,
    Category::ErrorWherePgOk,
    Category::OkWherePgError,
    Category::WrongRows,
    Category::WrongColumns,
    Category::WrongSqlstate,
];

impl Category {
    fn name(self) -> &'static str {
        match self {
            Category::Same => "same",
            Category::ErrorWherePgOk => "error_where_pg_ok",
            Category::OkWherePgError => "ok_where_pg_error",
            Category::WrongRows => "wrong_rows",
            Category::WrongColumns => "wrong_columns",
            Category::WrongSqlstate => "wrong_sqlstate",
        }
    }

    fn parse(name: &str) -> Option<Category> {
        CATEGORIES.into_iter().find(|c| c.name() == name)
    }

    fn is_silent_wrong(self) -> bool {
        matches!(self, Category::OkWherePgError | Category::WrongRows)
    }

    /// [`Category::classify`], except that a plan (`EXPLAIN`) is the engine's own: its shape (the `QUERY PLAN`
    /// column, or the error class) is compared, not its lines.
    fn classify_statement(sql: &str, postgres: &Outcome, cambium: &Outcome) -> Category {
        let explain = sql
            .trim_start()
            .get(..8)
            .is_some_and(|start| start.eq_ignore_ascii_case("explain "));
        match (postgres, cambium) {
            (Outcome::Ok { columns, .. }, Outcome::Ok { columns: got, rows }) if explain => {
                if columns != got {
                    Category::WrongColumns
                } else if rows.is_empty() {
                    Category::WrongRows
                } else {
                    Category::Same
                }
            }
            _ => Category::classify(postgres, cambium),
        }
    }

    fn classify(postgres: &Outcome, cambium: &Outcome) -> Category {
        match (postgres, cambium) {
            (
                Outcome::Ok { columns, rows },
                Outcome::Ok {
                    columns: columns_got,
                    rows: rows_got,
                },
            ) => {
                if rows != rows_got {
                    Category::WrongRows
                } else if columns != columns_got {
                    Category::WrongColumns
                } else {
                    Category::Same
                }
            }
            (Outcome::Ok { .. }, Outcome::Error { .. }) => Category::ErrorWherePgOk,
            (Outcome::Error { .. }, Outcome::Ok { .. }) => Category::OkWherePgError,
            (Outcome::Error { sqlstate }, Outcome::Error { sqlstate: got }) => {
                if sqlstate.get(..2) == got.get(..2) {
                    Category::Same
                } else {
                    Category::WrongSqlstate
                }
            }
        }
    }
}

/// A statement: corpus file name and its number there (from 1).
type StatementId = (String, usize);

fn known_path() -> PathBuf {
    pgdiff_dir().join("known_differences.txt")
}

const KNOWN_HEADER: &str = "\
# Statements of tests/pgdiff/corpus whose outcome on Cambium differs from PostgreSQL 15's today, with how.
# tests/pg_differential.rs fails when this list and a run disagree in either direction;
# `PGDIFF_UPDATE=1 cargo test --test pg_differential` rewrites it. Format: <file>:<statement number> <category>
";

fn read_known() -> BTreeMap<StatementId, Category> {
    let text = std::fs::read_to_string(known_path()).unwrap_or_default();
    let mut known = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.split_once(' ').and_then(|(place, category)| {
            let (file, number) = place.rsplit_once(':')?;
            Some(((file.to_owned(), number.parse().ok()?), Category::parse(category)?))
        });
        let (id, category) = parsed.unwrap_or_else(|| panic!("known_differences.txt: a bad line {line:?}"));
        known.insert(id, category);
    }
    known
}

fn write_known(known: &BTreeMap<StatementId, Category>) {
    let mut out = KNOWN_HEADER.to_owned();
    for ((file, number), category) in known {
        let _ = writeln!(out, "{file}:{number} {}", category.name());
    }
    std::fs::write(known_path(), out).expect("write known_differences.txt");
}

/// One statement's result in a compare run.
struct Compared<'a> {
    file: &'a str,
    number: usize,
    sql: &'a str,
    postgres: Outcome,
    cambium: Outcome,
    category: Category,
}

fn report_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("pgdiff-report.txt")
}

fn describe(compared: &Compared<'_>, label: &str) -> String {
    format!(
        "{}:{} {label}\n  sql:        {}\n  postgresql: {}\n  cambium:    {}\n",
        compared.file,
        compared.number,
        compared.sql.replace('\n', "\n              "),
        compared.postgres.brief(),
        compared.cambium.brief()
    )
}

/// `identical N of M (x.x %), silent wrong K`, then the count of each category.
fn score(results: &[Compared<'_>]) -> String {
    let total = results.len();
    let same = results.iter().filter(|r| r.category == Category::Same).count();
    let silent = results.iter().filter(|r| r.category.is_silent_wrong()).count();
    let percent = if total == 0 {
        0.0
    } else {
        100.0 * same as f64 / total as f64
    };
    let mut text = format!("identical {same} of {total} ({percent:.1} %), silent wrong {silent}\n");
    for category in CATEGORIES {
        let count = results.iter().filter(|r| r.category == category).count();
        let _ = writeln!(text, "  {:<18} {count}", category.name());
    }
    text
}

fn write_report(results: &[Compared<'_>], score_text: &str) {
    let mut report = format!("pg_differential: Cambium against PostgreSQL 15\n\n{score_text}\nper file:\n");
    let mut files: Vec<&str> = results.iter().map(|r| r.file).collect();
    files.dedup();
    for file in &files {
        let of_file: Vec<&Compared<'_>> = results.iter().filter(|r| r.file == *file).collect();
        let same = of_file.iter().filter(|r| r.category == Category::Same).count();
        let _ = writeln!(report, "  {file:<28} {same:>4} of {:>4}", of_file.len());
    }
    report.push_str("\ndifferences:\n\n");
    for result in results.iter().filter(|r| r.category != Category::Same) {
        report.push_str(&describe(result, result.category.name()));
        report.push('\n');
    }
    let path = report_path();
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    std::fs::write(&path, report).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    eprintln!("pg_differential: report in {}", path.display());
}

// ---- the modes ----

async fn record(url: &str, corpus: &[CorpusFile]) {
    let base: Config = url.parse().unwrap_or_else(|e| panic!("PGDIFF_RECORD_URL {url:?}: {e}"));
    let maintenance = connect(&base).await;
    let version = maintenance
        .simple_query("SELECT version()")
        .await
        .expect("SELECT version()")
        .into_iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .expect("a version");
    assert!(
        version.starts_with("PostgreSQL 15"),
        "record against PostgreSQL 15, not {version:?}"
    );
    for file in corpus {
        let database = format!("pgdiff_{}", file.stem());
        // One statement per message: DROP/CREATE DATABASE refuse the implicit transaction of several.
        for sql in [
            format!("DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)"),
            format!("CREATE DATABASE \"{database}\""),
        ] {
            maintenance
                .batch_execute(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        }
        let mut config = base.clone();
        config.dbname(&database);
        let outcomes = run_file(file, config).await;
        write_expected(file, &version, &outcomes);
        maintenance
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)"))
            .await
            .unwrap_or_else(|e| panic!("drop database {database}: {e:?}"));
        eprintln!(
            "pg_differential: recorded {} ({} statements)",
            file.name,
            outcomes.len()
        );
    }
}

async fn compare(corpus: &[CorpusFile]) {
    let expected: Vec<Vec<Outcome>> = corpus.iter().map(read_expected).collect();
    // PostgreSQL's default configuration, so SHOW and pg_settings compare like for like: Cambium's own server
    // default rolls back transactions left idle for 10 minutes (a deployment choice, ARCHITECTURE.md).
    let up = Up::start_with(&["--pg-idle-in-transaction-timeout-ms", "0"]);
    let project = up.create_project("pgdiff").await;
    let mut results = Vec::new();
    for (file, expected) in corpus.iter().zip(expected) {
        let name = format!("pgdiff-{}", file.stem().replace('_', "-"));
        let database = up.create_database(&project, &name).await;
        let uri = up.uri(&database);
        let config: Config = uri.parse().unwrap_or_else(|e| panic!("{uri}: {e}"));
        let outcomes = run_file(file, config).await;
        for (index, (postgres, cambium)) in expected.into_iter().zip(outcomes).enumerate() {
            let category = Category::classify_statement(&file.statements[index], &postgres, &cambium);
            results.push(Compared {
                file: &file.name,
                number: index + 1,
                sql: &file.statements[index],
                postgres,
                cambium,
                category,
            });
        }
        let id = database["id"].as_str().expect("a database id");
        let _ = up.call("DELETE", &format!("/v1/databases/{id}"), None).await;
    }

    let score_text = score(&results);
    // Straight to stderr, not through `eprintln!`, which the test harness captures: the score shows on every run.
    let _ = writeln!(std::io::stderr(), "pg_differential: {score_text}");
    write_report(&results, &score_text);

    let actual: BTreeMap<StatementId, Category> = results
        .iter()
        .filter(|r| r.category != Category::Same)
        .map(|r| ((r.file.to_owned(), r.number), r.category))
        .collect();
    let mut known = read_known();
    if std::env::var_os("PGDIFF_UPDATE").is_some() {
        // Only the files this run covered are replaced (PGDIFF_FILTER).
        known.retain(|(file, _), _| !corpus.iter().any(|f| &f.name == file));
        known.extend(actual);
        write_known(&known);
        eprintln!("pg_differential: rewrote {}", known_path().display());
        return;
    }
    let mut mismatches = Vec::new();
    for result in &results {
        let id = (result.file.to_owned(), result.number);
        let listed = known.get(&id).copied().unwrap_or(Category::Same);
        if listed != result.category {
            mismatches.push(describe(
                result,
                &format!("listed {}, now {}", listed.name(), result.category.name()),
            ));
        }
    }
    for (file, number) in known.keys() {
        let in_corpus = corpus.iter().find(|f| &f.name == file);
        if in_corpus.is_some_and(|f| *number > f.statements.len()) {
            mismatches.push(format!(
                "{file}:{number} is listed but the file has no such statement\n"
            ));
        }
    }
    if !mismatches.is_empty() {
        let shown: Vec<&String> = mismatches.iter().take(MISMATCHES_PRINTED_MAX).collect();
        panic!(
            "{} statements moved off {} (a new difference, a changed category, or one now the same; \
             after checking them, PGDIFF_UPDATE=1 rewrites the list):\n\n{}{}",
            mismatches.len(),
            known_path().display(),
            shown.into_iter().cloned().collect::<Vec<_>>().join("\n"),
            if mismatches.len() > MISMATCHES_PRINTED_MAX {
                "\n… (the rest in the report)"
            } else {
                ""
            }
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cambium_answers_like_postgresql_15() {
    let corpus = load_corpus();
    match std::env::var("PGDIFF_RECORD_URL") {
        Ok(url) if !url.is_empty() => record(&url, &corpus).await,
        _ => compare(&corpus).await,
    }
}

#[test]
fn statements_end_at_a_line_ending_with_a_semicolon() {
    let text = "-- a comment\n\nSELECT 1;\nSELECT\n  2 ;  \n-- between\nSELECT ';'\n-- kept inside\n;\n";
    assert_eq!(
        split_statements("t.sql", text),
        vec!["SELECT 1;", "SELECT\n  2 ;", "SELECT ';'\n-- kept inside\n;"]
    );
}

#[test]
fn classification() {
    let ok = |rows: &[&str]| Outcome::Ok {
        columns: vec!["a".to_owned()],
        rows: rows.iter().map(|r| vec![Some((*r).to_owned())]).collect(),
    };
    let error = |code: &str| Outcome::Error {
        sqlstate: code.to_owned(),
    };
    assert_eq!(Category::classify(&ok(&["1"]), &ok(&["1"])), Category::Same);
    assert_eq!(
        Category::classify_statement("EXPLAIN SELECT 1", &ok(&["Result"]), &ok(&["SCAN CONSTANT ROW"])),
        Category::Same
    );
    assert_eq!(
        Category::classify_statement("EXPLAIN SELECT 1", &ok(&["Result"]), &ok(&[])),
        Category::WrongRows
    );
    assert_eq!(
        Category::classify_statement("SELECT 1", &ok(&["1"]), &ok(&["2"])),
        Category::WrongRows
    );
    assert_eq!(Category::classify(&ok(&["1"]), &ok(&["2"])), Category::WrongRows);
    let renamed = Outcome::Ok {
        columns: vec!["b".to_owned()],
        rows: vec![vec![Some("1".to_owned())]],
    };
    assert_eq!(Category::classify(&ok(&["1"]), &renamed), Category::WrongColumns);
    assert_eq!(
        Category::classify(&ok(&["1"]), &error("42601")),
        Category::ErrorWherePgOk
    );
    assert_eq!(Category::classify(&error("22012"), &ok(&[])), Category::OkWherePgError);
    assert_eq!(Category::classify(&error("23505"), &error("23502")), Category::Same);
    assert_eq!(
        Category::classify(&error("22012"), &error("XX000")),
        Category::WrongSqlstate
    );
    assert_eq!(
        Category::classify(&error("22012"), &error("TIMEOUT")),
        Category::WrongSqlstate
    );
}
