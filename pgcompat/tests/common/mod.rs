//! The harness of pgcompat's integration tests: statements run on a plain SQLite connection as the compute
//! runs them (several steps in one savepoint, one step as a query), outcomes as PostgreSQL prints them.
#![allow(dead_code)]

use pgcompat::{error_of, value, Dialect, PgType, Translated};
use rusqlite::types::Value;
use rusqlite::Connection;

/// The outcome of one statement: its rows as PostgreSQL prints them, or its SQLSTATE. Outside a transaction
/// the session's sequence values are settled after it, as the compute does after each statement.
pub fn run(conn: &Connection, dialect: &mut Dialect, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    let outcome = run_statement(conn, dialect, sql);
    dialect.settle_sequences(conn).expect("settles");
    outcome
}

pub fn run_statement(conn: &Connection, dialect: &mut Dialect, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    let translated = dialect.translate(conn, sql).map_err(|e| match e {
        pgcompat::TranslateError::Sql(e) => e.code.to_owned(),
        other => other.to_string(),
    })?;
    let Translated::Statements(list) = &*translated else {
        return Err(format!("passed through: {sql}"));
    };
    let code = |e: rusqlite::Error| error_of(&e.to_string()).map_or_else(|| e.to_string(), |p| p.code.to_owned());
    let mut out = Vec::new();
    for t in list {
        if t.steps.len() != 1 {
            conn.execute_batch("SAVEPOINT s").map_err(code)?;
            for step in &t.steps {
                if let Err(e) = conn.execute_batch(step) {
                    conn.execute_batch("ROLLBACK TO s; RELEASE s").map_err(code)?;
                    return Err(code(e));
                }
            }
            conn.execute_batch("RELEASE s").map_err(code)?;
            continue;
        }
        let mut stmt = conn.prepare(&t.steps[0]).map_err(code)?;
        let types = dialect.column_types(&stmt, Some(t));
        let width = stmt.column_count();
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next().map_err(code)? {
            let mut r = Vec::new();
            for (i, ty) in types.iter().enumerate().take(width) {
                let v: Value = row.get(i).map_err(code)?;
                r.push(match v {
                    Value::Null => None,
                    v => value::output(ty.unwrap_or(PgType::TEXT), &v, &dialect.state().time_zone()),
                });
            }
            out.push(r);
        }
    }
    Ok(out)
}

/// The one value a statement answers.
pub fn one(conn: &Connection, dialect: &mut Dialect, sql: &str) -> String {
    let rows = run(conn, dialect, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.first()
        .and_then(|r| r.first().cloned().flatten())
        .unwrap_or_else(|| panic!("{sql}: no value"))
}

pub fn ok(conn: &Connection, dialect: &mut Dialect, sql: &str) {
    run(conn, dialect, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

pub fn setup() -> (Connection, Dialect) {
    let conn = Connection::open_in_memory().expect("opens");
    let dialect = Dialect::new(&conn, "shop", "cambium", 1).expect("dialect");
    (conn, dialect)
}
