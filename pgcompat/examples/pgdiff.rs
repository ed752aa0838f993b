//! Runs the statements of a recorded differential-test file (`tests/pgdiff/expected/*.json`) through the
//! dialect layer on an in-memory SQLite database and reports which answers differ from PostgreSQL's.
//! For people working on the layer: `cargo run -p cambium-pgcompat --example pgdiff -- FILE.json [-v]`.
//! It runs the layer alone (no compute, no session settings), so it is a guide, not the differential test.

use pgcompat::{value, Dialect, Translated};
use rusqlite::types::Value;
use rusqlite::Connection;

/// What a statement gave: columns and rows, or an error's SQLSTATE.
#[derive(Debug, PartialEq)]
enum Outcome {
    Rows(Vec<String>, Vec<Vec<Option<String>>>),
    Error(String),
}

fn run(conn: &Connection, dialect: &mut Dialect, sql: &str) -> Outcome {
    let translated = match dialect.translate(conn, sql) {
        Ok(t) => t,
        Err(pgcompat::TranslateError::Sql(e)) => return Outcome::Error(format!("{} {}", e.code, e)),
        Err(e) => return Outcome::Error(format!("translate: {e}")),
    };
    let Translated::Statements(list) = &*translated else {
        return match conn.execute_batch(sql) {
            Ok(()) => Outcome::Rows(Vec::new(), Vec::new()),
            Err(e) => Outcome::Error(format!("passthrough: {e}")),
        };
    };
    let mut last = Outcome::Rows(Vec::new(), Vec::new());
    for t in list {
        if t.steps.len() != 1 {
            for step in &t.steps {
                if let Err(e) = conn.execute_batch(step) {
                    return Outcome::Error(pgcompat::error_of(&e.to_string()).map_or(e.to_string(), |p| p.to_string()));
                }
            }
            last = Outcome::Rows(Vec::new(), Vec::new());
            continue;
        }
        let mut stmt = match conn.prepare(&t.steps[0]) {
            Ok(s) => s,
            Err(e) => return Outcome::Error(format!("prepare: {e} in {}", t.steps[0])),
        };
        let types = dialect.column_types(&stmt, Some(t));
        let names: Vec<String> = if stmt.column_count() == 0 || !matches!(t.kind, pgcompat::Kind::Select) {
            Vec::new()
        } else {
            stmt.column_names().iter().map(|s| s.to_string()).collect()
        };
        let width = stmt.column_count();
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        loop {
            match rows.next() {
                Ok(Some(row)) => {
                    let mut r = Vec::new();
                    for (i, ty) in types.iter().enumerate().take(width) {
                        let v: Value = match row.get(i) {
                            Ok(v) => v,
                            Err(e) => return Outcome::Error(e.to_string()),
                        };
                        if v == Value::Null {
                            r.push(None);
                            continue;
                        }
                        let ty = ty.unwrap_or(pgcompat::PgType::TEXT);
                        r.push(value::output(ty, &v, &dialect.state().time_zone()));
                    }
                    out.push(r);
                }
                Ok(None) => break,
                Err(e) => {
                    return Outcome::Error(pgcompat::error_of(&e.to_string()).map_or(e.to_string(), |p| p.to_string()))
                }
            }
        }
        last = Outcome::Rows(
            if names.is_empty() { Vec::new() } else { names },
            if width == 0 { Vec::new() } else { out },
        );
    }
    last
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let verbose = args.iter().any(|a| a == "-v");
    let text = std::fs::read_to_string(&args[1])?;
    let file: serde_json::Value = serde_json::from_str(&text)?;
    let conn = Connection::open_in_memory()?;
    let mut dialect = Dialect::new(&conn, "cambium", "cambium", 1)?;
    let (mut same, mut total) = (0, 0);
    for statement in file["statements"].as_array().ok_or("no statements")? {
        let sql = statement["sql"].as_str().ok_or("no sql")?;
        let expected = if let Some(code) = statement.get("error") {
            Outcome::Error(code.as_str().unwrap_or_default().to_owned())
        } else {
            let columns = statement["columns"].as_array().map_or_else(Vec::new, |c| {
                c.iter().map(|v| v.as_str().unwrap_or_default().to_owned()).collect()
            });
            let rows = statement["rows"].as_array().map_or_else(Vec::new, |rows| {
                rows.iter()
                    .map(|r| {
                        r.as_array()
                            .map_or_else(Vec::new, |r| r.iter().map(|v| v.as_str().map(str::to_owned)).collect())
                    })
                    .collect()
            });
            Outcome::Rows(columns, rows)
        };
        let got = run(&conn, &mut dialect, sql);
        total += 1;
        let ok = match (&expected, &got) {
            (Outcome::Error(a), Outcome::Error(b)) => b.starts_with(a.as_str()),
            (a, b) => a == b,
        };
        if ok {
            same += 1;
        } else {
            let n = &statement["n"];
            let short: String = sql.chars().take(if verbose { 2000 } else { 100 }).collect();
            println!("#{n} DIFF {short}\n   want {expected:?}\n   got  {got:?}");
        }
    }
    println!("{same}/{total} identical");
    Ok(())
}
