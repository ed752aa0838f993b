//! SQLite's sqllogictest corpus through the `cambium` VFS on a `RemotePageStore` in real processes: three
//! `cambium safekeeper`s and one `cambium pageserver`.
//!
//! Every `*.test` file under `../shared/sqllogictest/` (relative to the workspace root), or under `$SLT_DIR`
//! when set, runs on a fresh database: a new timeline on the safekeepers and the pageserver, a new
//! `RemotePageStore`, registered under a new name. Records are parsed and run by the `sqllogictest` crate
//! (engine name `sqlite` for `onlyif`/`skipif`) over a `DB` adapter on `compute::vfs::open_connection`.
//!
//! What the runner adds to the crate, as the corpus README requires:
//! - CRLF is normalized to LF, and a trailing `# comment` on an `onlyif`/`skipif` line is dropped.
//! - `halt` stops a file only when the conditions in front of it select engine `sqlite` (the crate halts
//!   unconditionally, and a file starting with `onlyif mssql` + `halt` is meant to stop only on mssql).
//! - Values are formatted by the record's type string, as SQLite's own runner does: `I` as an integer,
//!   `R` as `%.3f`, `T` as text with `(empty)` for an empty string and `@` for unprintable characters;
//!   `NULL` for NULL. The adapter learns the expected types from the runner loop before each query.
//! - Results are compared value-wise (one value a line); the crate does sort modes and the
//!   `hash-threshold` MD5 (`N values hashing to <md5>`), with a default threshold of 8 (the corpus's
//!   `select*.test` files have no `hash-threshold` line but hashed results).
//! - Multi-statement SQL (`INSERT ...; DROP INDEX ...;`) runs with `execute_batch`.
//! - As SQLite's own runner, an SQLITE_ERROR while stepping a prepared query (sum()'s "integer overflow")
//!   ends its rows instead of failing it; I/O and other VFS errors still fail, and so does a failed store or
//!   a file whose commits never moved the store's read LSN.
//!
//! All 27 files (about 102,000 records) run by default: about 22 s in a debug build, so no subset is
//! needed. `SLT_FILTER=<substring>` runs only the files whose path contains it. Per-file results (records
//! run, pass or fail, time) are printed; run with `--nocapture` to see them:
//!
//! ```text
//! cargo test --test sqllogictest -- --nocapture
//! SLT_FILTER=evidence/ cargo test --test sqllogictest -- --nocapture
//! ```
//!
//! The test fails if any file fails, naming the file, the record and the expected vs actual result.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::Process;
use compute::remote_store::{RemotePageStore, RemotePageStoreConfig};
use compute::rusqlite::types::ValueRef;
use compute::rusqlite::{self, Connection};
use compute::vfs::{open_connection, register_database, unregister_database};
use proto::pageserver as ps;
use proto::safekeeper as sk;
use sqllogictest::{DBOutput, DefaultColumnType, Record, RecordOutput, Runner};
use storage::{Lsn, TenantId, TimelineId};

const START: Lsn = Lsn(0x100_0000);
const ENGINE: &str = "sqlite";
/// Failures shown per file (all are counted).
const SHOWN_FAILURES: usize = 5;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Fields drop in order: the processes are killed before their directory goes.
struct Cluster {
    safekeepers: Vec<Process>,
    pageserver: Process,
    tenant: TenantId,
    _root: tempfile::TempDir,
}

impl Cluster {
    /// Three safekeepers and a pageserver following them, with the tenant created.
    async fn start() -> TestResult<Cluster> {
        let root = tempfile::tempdir()?;
        let safekeepers: Vec<Process> = (1..=3)
            .map(|id| Process::safekeeper(id, &root.path().join(format!("sk{id}"))))
            .collect();
        let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
        let pageserver = Process::start(vec![
            "pageserver".into(),
            "--data-dir".into(),
            root.path().join("pageserver").display().to_string(),
            "--safekeepers".into(),
            addresses.join(","),
        ]);
        let tenant = TenantId(0x51);
        let mut management =
            ps::management_client::ManagementClient::connect(format!("http://{}", pageserver.address)).await?;
        management
            .create_tenant(ps::TenantRequest {
                tenant_id: tenant.to_string(),
            })
            .await?;
        Ok(Cluster {
            safekeepers,
            pageserver,
            tenant,
            _root: root,
        })
    }

    /// A new timeline on every safekeeper and the pageserver, and a `RemotePageStore` over it.
    async fn new_store(&self, timeline: TimelineId) -> TestResult<Arc<RemotePageStore>> {
        for s in &self.safekeepers {
            let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address)).await?;
            client
                .create_timeline(sk::CreateTimelineRequest {
                    timeline: Some(sk::TimelineRef {
                        tenant_id: self.tenant.to_string(),
                        timeline_id: timeline.to_string(),
                    }),
                    start_lsn: START.0,
                })
                .await?;
        }
        let mut management =
            ps::management_client::ManagementClient::connect(format!("http://{}", self.pageserver.address)).await?;
        management
            .create_timeline(ps::CreateTimelineRequest {
                timeline: Some(ps::TimelineRef {
                    tenant_id: self.tenant.to_string(),
                    timeline_id: timeline.to_string(),
                }),
                ancestor_timeline_id: String::new(),
                ancestor_lsn: 0,
                start_lsn: START.0,
            })
            .await?;
        let mut config = RemotePageStoreConfig::new(
            self.safekeepers.iter().map(|s| s.address.clone()).collect(),
            self.pageserver.address.clone(),
            self.tenant,
            timeline,
            START,
        );
        config.get_page_timeout_ms = 20_000;
        config.commit_timeout_ms = 10_000;
        Ok(RemotePageStore::start(config).await?)
    }
}

/// The `sqllogictest` `DB` adapter: one connection through the VFS, and the type string of the query about
/// to run (set by the runner loop), which drives formatting as in SQLite's own runner.
struct SqliteDb {
    connection: Connection,
    expected_types: Arc<Mutex<Vec<DefaultColumnType>>>,
}

impl sqllogictest::DB for SqliteDb {
    type Error = rusqlite::Error;
    type ColumnType = DefaultColumnType;

    fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, rusqlite::Error> {
        let expected = self
            .expected_types
            .lock()
            .map(|types| types.clone())
            .unwrap_or_default();
        let mut statement = match self.connection.prepare(sql) {
            Ok(statement) => statement,
            Err(rusqlite::Error::MultipleStatement) => {
                self.connection.execute_batch(sql)?;
                return Ok(DBOutput::StatementComplete(0));
            }
            Err(error) => return Err(error),
        };
        let columns = statement.column_count();
        if columns == 0 {
            let changed = statement.raw_execute()?;
            return Ok(DBOutput::StatementComplete(changed as u64));
        }
        let types: Vec<DefaultColumnType> = (0..columns)
            .map(|i| expected.get(i).cloned().unwrap_or(DefaultColumnType::Any))
            .collect();
        let mut rows = statement.raw_query();
        let mut out = Vec::new();
        // As SQLite's own runner: an error while stepping a query that prepared (such as sum()'s "integer
        // overflow") ends its rows without failing it. Only SQLITE_ERROR: an I/O or corruption error from
        // the VFS still fails the query.
        loop {
            let row = match rows.next() {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(rusqlite::Error::SqliteFailure(error, _)) if error.code == rusqlite::ErrorCode::Unknown => break,
                Err(error) => return Err(error),
            };
            let mut values = Vec::with_capacity(columns);
            for (i, column_type) in types.iter().enumerate() {
                values.push(format_value(row.get_ref(i)?, column_type));
            }
            out.push(values);
        }
        Ok(DBOutput::Rows { types, rows: out })
    }

    fn engine_name(&self) -> &str {
        ENGINE
    }
}

/// A value as SQLite's sqllogictest runner prints it for a column of type `column_type`.
fn format_value(value: ValueRef<'_>, column_type: &DefaultColumnType) -> String {
    match (value, column_type) {
        (ValueRef::Null, _) => "NULL".to_owned(),
        (value, DefaultColumnType::Integer) => as_integer(value).to_string(),
        (value, DefaultColumnType::FloatingPoint) => format_real(as_real(value)),
        (ValueRef::Integer(i), DefaultColumnType::Any) => i.to_string(),
        (ValueRef::Real(r), DefaultColumnType::Any) => format_real(r),
        (value, _) => {
            let text = as_text(value);
            if text.is_empty() {
                "(empty)".to_owned()
            } else {
                text.chars()
                    .map(|c| if (' '..='~').contains(&c) { c } else { '@' })
                    .collect()
            }
        }
    }
}

/// `%.3f` as SQLite's printf does it: at most 16 significant digits, the rest zeros.
fn format_real(r: f64) -> String {
    if !r.is_finite() || r.abs() < 1e13 {
        return format!("{r:.3}");
    }
    // 16 significant digits: d.ddddddddddddddde<exp>, exp >= 13.
    let scientific = format!("{:.15e}", r.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: usize = exponent.parse().unwrap_or(0);
    let integer_digits = exponent + 1;
    let (integer, fraction) = if integer_digits >= digits.len() {
        (
            format!("{digits}{}", "0".repeat(integer_digits - digits.len())),
            String::new(),
        )
    } else {
        (digits[..integer_digits].to_owned(), digits[integer_digits..].to_owned())
    };
    let sign = if r < 0.0 { "-" } else { "" };
    format!("{sign}{integer}.{fraction:0<3.3}")
}

/// `sqlite3_column_int64`: reals truncate, text gives its leading integer (else 0).
fn as_integer(value: ValueRef<'_>) -> i64 {
    match value {
        ValueRef::Integer(i) => i,
        ValueRef::Real(r) => r as i64,
        ValueRef::Text(t) | ValueRef::Blob(t) => {
            let text = String::from_utf8_lossy(t);
            let text = text.trim_start();
            let end = text
                .char_indices()
                .take_while(|&(i, c)| c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+')))
                .count();
            text[..end].parse().unwrap_or(0)
        }
        ValueRef::Null => 0,
    }
}

/// `sqlite3_column_double`: text gives its leading number (else 0).
fn as_real(value: ValueRef<'_>) -> f64 {
    match value {
        ValueRef::Integer(i) => i as f64,
        ValueRef::Real(r) => r,
        ValueRef::Text(t) | ValueRef::Blob(t) => {
            let text = String::from_utf8_lossy(t);
            let text = text.trim();
            (1..=text.len())
                .rev()
                .filter(|&end| text.is_char_boundary(end))
                .find_map(|end| text[..end].parse::<f64>().ok())
                .unwrap_or(0.0)
        }
        ValueRef::Null => 0.0,
    }
}

/// `sqlite3_column_text`: reals as SQLite prints them (`%!.15g`, with `.0` for whole numbers).
fn as_text(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) if r.fract() == 0.0 && r.abs() < 1e15 => format!("{r:.1}"),
        ValueRef::Real(r) => format!("{r}"),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Null => String::new(),
    }
}

/// Value-wise comparison: every actual value on its own line, as the corpus lists them.
fn value_wise_validator(normalizer: sqllogictest::Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    let actual: Vec<String> = actual.iter().flatten().map(normalizer).collect();
    let expected: Vec<String> = expected.iter().map(normalizer).collect();
    actual == expected
}

/// CRLF to LF; no trailing `# comment` on condition lines (the crate's parser rejects them); and `halt`
/// decided here: conditions right in front of a `halt` that skip engine `sqlite` drop both, else the `halt`
/// stays without them (the crate's parser would carry them over to the next statement).
fn normalize_script(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut conditions: Vec<(String, bool)> = Vec::new();
    for line in script.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let tokens: Vec<&str> = line.split('#').next().unwrap_or("").split_whitespace().collect();
        match tokens.as_slice() {
            [kind @ ("onlyif" | "skipif"), label, ..] => {
                let skips = if *kind == "onlyif" {
                    *label != ENGINE
                } else {
                    *label == ENGINE
                };
                conditions.push((format!("{kind} {label}\n"), skips));
                continue;
            }
            ["halt"] => {
                if !conditions.iter().any(|(_, skips)| *skips) {
                    out.push_str("halt\n");
                }
            }
            _ => {
                for (condition, _) in &conditions {
                    out.push_str(condition);
                }
                out.push_str(line);
                out.push('\n');
            }
        }
        conditions.clear();
    }
    for (condition, _) in &conditions {
        out.push_str(condition);
    }
    out
}

/// One file's outcome.
struct FileResult {
    path: PathBuf,
    records_run: usize,
    failures: usize,
    shown: Vec<String>,
    seconds: f64,
}

/// Runs one file's records on `database` (a blocking call: SQLite goes through the VFS).
fn run_file(path: &Path, database: &str) -> TestResult<FileResult> {
    let started = Instant::now();
    let script = normalize_script(&std::fs::read_to_string(path)?);
    let records = sqllogictest::parse_with_name::<DefaultColumnType>(&script, path.display().to_string())?;
    let expected_types = Arc::new(Mutex::new(Vec::new()));
    let (types_for_db, name) = (expected_types.clone(), database.to_owned());
    let mut runner = Runner::new(move || {
        let result = open_connection(&name).map(|connection| SqliteDb {
            connection,
            expected_types: types_for_db.clone(),
        });
        std::future::ready(result)
    });
    runner.with_validator(value_wise_validator);
    // SQLite's corpus results were made with a threshold of 8; a `hash-threshold` record overrides it.
    runner.with_hash_threshold(8);
    let (mut records_run, mut failures, mut shown) = (0, 0, Vec::new());
    for record in records {
        if let Record::Halt { .. } = record {
            break;
        }
        let is_sql = matches!(record, Record::Statement { .. } | Record::Query { .. });
        if let Record::Query {
            expected: sqllogictest::QueryExpect::Results { types, .. },
            ..
        } = &record
        {
            if let Ok(mut expected) = expected_types.lock() {
                expected.clone_from(types);
            }
        }
        match runner.run(record) {
            Ok(RecordOutput::Nothing) => {}
            Ok(_) => records_run += usize::from(is_sql),
            Err(error) => {
                records_run += 1;
                failures += 1;
                if shown.len() < SHOWN_FAILURES {
                    shown.push(error.display(false).to_string());
                }
            }
        }
    }
    runner.shutdown();
    Ok(FileResult {
        path: path.to_owned(),
        records_run,
        failures,
        shown,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Every `*.test` file under `dir`, sorted.
fn test_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            test_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "test") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

/// The files whose path contains `$SLT_FILTER`, or all of them.
fn selected(files: Vec<PathBuf>) -> Vec<PathBuf> {
    let filter = std::env::var("SLT_FILTER").ok();
    files
        .into_iter()
        .filter(|path| filter.as_deref().is_none_or(|f| path.display().to_string().contains(f)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_corpus_through_remote_page_store() -> TestResult {
    let root = match std::env::var_os("SLT_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/sqllogictest"),
    };
    let mut files = Vec::new();
    test_files(&root, &mut files)?;
    let files = selected(files);
    assert!(!files.is_empty(), "no *.test files under {}", root.display());

    let started = Instant::now();
    let cluster = Cluster::start().await?;
    let mut results = Vec::new();
    for (index, path) in files.iter().enumerate() {
        let timeline = TimelineId(0x5000 + index as u128);
        let store = cluster.new_store(timeline).await?;
        let database = format!("slt{index}");
        register_database(&database, store.clone())?;
        let path_for_run = path.clone();
        let database_for_run = database.clone();
        let result = tokio::task::spawn_blocking(move || run_file(&path_for_run, &database_for_run)).await?;
        assert!(unregister_database(&database));
        let result = match result {
            Ok(mut result) => {
                if let Some(reason) = store.failure() {
                    result.failures += 1;
                    result.shown.push(format!("the page store failed: {reason}"));
                } else if result.records_run > 0 && store.read_lsn() <= START {
                    result.failures += 1;
                    result.shown.push("no commit reached the safekeepers".to_owned());
                }
                result
            }
            Err(error) => FileResult {
                path: path.clone(),
                records_run: 0,
                failures: 1,
                shown: vec![format!("could not run the file: {error}")],
                seconds: 0.0,
            },
        };
        let relative = result
            .path
            .strip_prefix(&root)
            .unwrap_or(&result.path)
            .display()
            .to_string();
        println!(
            "{} {relative}: {} records run, {} failed, {:.1} s",
            if result.failures == 0 { "PASS" } else { "FAIL" },
            result.records_run,
            result.failures,
            result.seconds
        );
        for shown in &result.shown {
            println!("    {}", shown.replace('\n', "\n    "));
        }
        results.push((relative, result));
    }
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, r)| r.failures > 0)
        .map(|(name, r)| {
            format!(
                "{name} ({} of {} records):\n{}",
                r.failures,
                r.records_run,
                r.shown.join("\n")
            )
        })
        .collect();
    let records: usize = results.iter().map(|(_, r)| r.records_run).sum();
    println!(
        "{} files, {records} records, {} failed files, {:.1} s",
        results.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failed.is_empty(), "sqllogictest files failed:\n{}", failed.join("\n\n"));
    Ok(())
}

#[test]
fn formats_values_as_sqlites_runner() {
    use DefaultColumnType::{FloatingPoint, Integer, Text};
    assert_eq!(format_value(ValueRef::Null, &Integer), "NULL");
    assert_eq!(format_value(ValueRef::Real(2.5), &Integer), "2");
    assert_eq!(format_value(ValueRef::Integer(3), &FloatingPoint), "3.000");
    assert_eq!(format_value(ValueRef::Text(b""), &Text), "(empty)");
    assert_eq!(format_value(ValueRef::Text(b"a\tb"), &Text), "a@b");
    assert_eq!(format_value(ValueRef::Text(b"12abc"), &Integer), "12");
    assert_eq!(format_value(ValueRef::Real(1.0), &Text), "1.0");
    assert_eq!(normalize_script("onlyif sqlite # comment\r\nhalt\r\n"), "halt\n\n");
    assert_eq!(
        normalize_script("onlyif mssql\r\nhalt\r\nskipif mysql # x\r\nstatement ok\r\n"),
        "skipif mysql\nstatement ok\n\n"
    );
    assert_eq!(
        format_value(ValueRef::Real(i64::MIN as f64), &FloatingPoint),
        "-9223372036854776000.000"
    );
    assert_eq!(
        format_value(ValueRef::Real(1.5e13), &FloatingPoint),
        "15000000000000.000"
    );
    assert_eq!(format_value(ValueRef::Real(-0.0005), &FloatingPoint), "-0.001");
}

/// The runner catches wrong results, hashed or not, and a failing statement (on a `MemoryPageStore`).
#[test]
fn reports_mismatches() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("wrong.test");
    let script = "hash-threshold 2\r\n\r\nstatement ok\r\nCREATE TABLE t(a INTEGER, b TEXT)\r\n\r\n\
        statement ok\r\nINSERT INTO t VALUES(1,'x'),(2,''),(3,NULL)\r\n\r\n\
        query IT rowsort\r\nSELECT a, b FROM t WHERE a < 2\r\n----\r\n1\r\nx\r\n\r\n\
        query IT rowsort\r\nSELECT a, b FROM t WHERE a = 2\r\n----\r\n2\r\nwrong\r\n\r\n\
        query I nosort\r\nSELECT a + 0.5 FROM t ORDER BY a\r\n----\r\n3 values hashing to 00000000000000000000000000000000\r\n\r\n\
        query I nosort\r\nSELECT a + 0.5 FROM t ORDER BY a\r\n----\r\n3 values hashing to c0710d6b4f15dfa88f600b0e6b624077\r\n\r\n\
        statement ok\r\nINSERT INTO missing VALUES(1)\r\n";
    std::fs::write(&path, script)?;
    register_database("slt-self-test", Arc::new(compute::page_store::MemoryPageStore::new()))?;
    let result = run_file(&path, "slt-self-test");
    assert!(unregister_database("slt-self-test"));
    let result = result?;
    assert_eq!(result.records_run, 7);
    assert_eq!(result.failures, 3, "{:#?}", result.shown);
    Ok(())
}
