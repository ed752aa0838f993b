//! Reads PostgreSQL statements (one per line) from stdin and runs them through the dialect layer on an
//! in-memory SQLite database, printing each translation and its rows as PostgreSQL would print them.
//! For people working on the layer: `cargo run -p cambium-pgcompat --example repl`.

use std::io::BufRead;

use pgcompat::{value, Dialect, Translated};
use rusqlite::types::Value;
use rusqlite::Connection;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::open_in_memory()?;
    let mut dialect = Dialect::new(&conn, "repl", "cambium", 1)?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        println!("> {line}");
        let translated = match dialect.translate(&conn, &line) {
            Ok(t) => t,
            Err(e) => {
                println!("  translate error: {e}");
                continue;
            }
        };
        let Translated::Statements(list) = &*translated else {
            println!("  passthrough");
            continue;
        };
        for t in list {
            for step in &t.steps {
                println!("  sqlite: {step}");
            }
            if t.steps.is_empty() {
                continue;
            }
            let sql = &t.steps[t.primary];
            if t.steps.len() > 1 {
                // Several steps: run them in order, as the compute does (in one savepoint there).
                for step in &t.steps {
                    if let Err(e) = conn.execute_batch(step) {
                        let shown = pgcompat::error_of(&e.to_string()).map_or(e.to_string(), |p| p.to_string());
                        println!("  error in {step}: {shown}");
                        break;
                    }
                }
                continue;
            }
            let mut stmt = match conn.prepare(sql) {
                Ok(s) => s,
                Err(e) => {
                    println!("  error: {e}");
                    continue;
                }
            };
            let types = dialect.column_types(&stmt, Some(t));
            let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
            let width = names.len();
            let mut rows = stmt.raw_query();
            println!("  columns: {names:?} {types:?}");
            loop {
                match rows.next() {
                    Ok(Some(row)) => {
                        let mut out = Vec::new();
                        for (i, ty) in types.iter().enumerate().take(width) {
                            let v: Value = row.get(i)?;
                            let ty = ty.unwrap_or(pgcompat::PgType::TEXT);
                            out.push(value::output(ty, &v, &dialect.state().time_zone()));
                        }
                        println!("  row: {out:?}");
                    }
                    Ok(None) => break,
                    Err(e) => {
                        println!(
                            "  error: {}",
                            pgcompat::error_of(&e.to_string()).map_or(e.to_string(), |p| p.to_string())
                        );
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}
