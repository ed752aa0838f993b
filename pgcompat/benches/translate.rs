//! The PostgreSQL dialect layer's cost per statement: translation of statements applications send, from the
//! session's cache (what a hot or prepared statement pays) and from text every time (a statement seen once),
//! over a plain in-memory SQLite connection with a typed table.
//!
//! Target (issue "PostgreSQL compatibility"): ≤ 5 µs per cached statement.
//!
//! `cargo bench -p cambium-pgcompat --bench translate`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use pgcompat::Dialect;
use rusqlite::Connection;

/// Statements as ORMs and applications send them.
const STATEMENTS: &[(&str, &str)] = &[
    ("point_select", "SELECT id, email, created_at FROM users WHERE id = $1"),
    (
        "orm_insert",
        "INSERT INTO users (email, name, active, balance, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING users.id",
    ),
    (
        "report",
        "SELECT name, count(*) AS n, sum(balance), avg(balance) FROM users WHERE active AND created_at > now() - interval '7 days' GROUP BY name ORDER BY n DESC LIMIT 10",
    ),
    ("pgbench_update", "UPDATE users SET balance = balance + $1 WHERE id = $2"),
];

fn setup() -> (Connection, Dialect) {
    let conn = Connection::open_in_memory().expect("memory database");
    let mut dialect = Dialect::new(&conn, "bench", "cambium", 1).expect("dialect");
    let create = "CREATE TABLE users (id serial PRIMARY KEY, email varchar(200) NOT NULL UNIQUE, name text, \
                  active boolean NOT NULL DEFAULT true, balance numeric(12,2) NOT NULL DEFAULT 0, \
                  created_at timestamptz NOT NULL DEFAULT now())";
    let translated = dialect.translate(&conn, create).expect("translates");
    if let pgcompat::Translated::Statements(list) = &*translated {
        for step in &list[0].steps {
            conn.execute_batch(step).expect("creates");
        }
    }
    (conn, dialect)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("translate");
    for (name, sql) in STATEMENTS {
        let (conn, mut dialect) = setup();
        dialect.translate(&conn, sql).expect("translates");
        group.bench_function(format!("{name}/cached"), |b| {
            b.iter(|| dialect.translate(&conn, std::hint::black_box(sql)).expect("translates"))
        });
        group.bench_function(format!("{name}/uncached"), |b| {
            b.iter_batched(
                setup,
                |(conn, mut dialect)| dialect.translate(&conn, sql).expect("translates"),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
