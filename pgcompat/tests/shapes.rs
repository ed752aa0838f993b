//! A statement translated from a learned shape (`pgcompat::shapes`: the template of texts that differ only in
//! their integer literals) is exactly what the translator gives for its text, for every value, including the
//! values the translator treats apart (positions, `0`, `1`, limits), and shapes whose translation consumes a
//! value are never filled in.

mod common;

use common::{ok, setup};
use pgcompat::{translate, Dialect, Translated};
use rusqlite::Connection;

/// Values each shape is tried with, in order: the second learns the shape, the rest are filled in.
const VALUES: &[u32] = &[3, 5, 0, 1, 2, 7, 42, 2_147_483_647, 10, 0, 1, 4];

fn direct(conn: &Connection, dialect: &Dialect, sql: &str) -> Result<String, String> {
    translate::translate(conn, dialect.catalog(), sql)
        .map(|t| comparable(&t))
        .map_err(|e| e.code.to_owned())
}

fn via_dialect(conn: &Connection, dialect: &mut Dialect, sql: &str) -> Result<String, String> {
    dialect
        .translate(conn, sql)
        .map(|t| comparable(&without_bound(&t)))
        .map_err(|e| match e {
            pgcompat::TranslateError::Sql(e) => e.code.to_owned(),
            other => other.to_string(),
        })
}

/// The translation without its literals-as-parameters form (`Translation::bound`, which only a filled
/// template has; the test below runs it against the text).
fn without_bound(translated: &Translated) -> Translated {
    match translated {
        Translated::Statements(list) => Translated::Statements(
            list.iter()
                .map(|t| pgcompat::Translation {
                    bound: None,
                    ..t.clone()
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The translation printed with the names the translator numbers process-wide (`_cambium_series_12`,
/// `_pgc_fn_3`) numbered `N`: two translations of one text differ only there.
fn comparable(translated: &Translated) -> String {
    let text = format!("{translated:?}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = ["_cambium_", "_pgc_"].iter().filter_map(|p| rest.find(p)).min() {
        let (before, name) = rest.split_at(at);
        out.push_str(before);
        let word_end = name
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(name.len());
        let word = &name[..word_end];
        out.push_str(word.trim_end_matches(|c: char| c.is_ascii_digit()));
        out.push('N');
        rest = &name[word_end..];
    }
    out.push_str(rest);
    out
}

fn schema(conn: &Connection, d: &mut Dialect) {
    ok(conn, d, "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL DEFAULT 0, name text, tags int[], price numeric(12,2), made timestamptz DEFAULT now())");
    ok(
        conn,
        d,
        "CREATE TABLE history (id serial PRIMARY KEY, account int, delta int, at timestamptz)",
    );
    ok(conn, d, "INSERT INTO accounts (id, balance, name, tags, price) VALUES (1, 10, 'a', '{1,2,3}', 1.5), (2, 20, 'b', '{4}', 2.25)");
}

/// Statements with `{}` where each literal goes (each the same value in one run, or one apart).
const SHAPES: &[&str] = &[
    "UPDATE accounts SET balance = balance + {} WHERE id = {}",
    "UPDATE accounts SET balance = balance + -{} WHERE id = {}",
    "SELECT balance FROM accounts WHERE id = {}",
    "INSERT INTO history (account, delta, at) VALUES ({}, -{}, CURRENT_TIMESTAMP)",
    "INSERT INTO accounts (id, balance) VALUES ({}, {}) ON CONFLICT (id) DO UPDATE SET balance = excluded.balance + {}",
    "DELETE FROM history WHERE id IN ({}, {}, {}) RETURNING id",
    "SELECT id, name FROM accounts ORDER BY {}",
    "SELECT id, name FROM accounts ORDER BY {} DESC LIMIT {} OFFSET {}",
    "SELECT name, count(*) FROM accounts GROUP BY {}",
    "SELECT DISTINCT ON ({}) id, name FROM accounts ORDER BY {}",
    "SELECT * FROM accounts LIMIT {}",
    "SELECT * FROM accounts FETCH FIRST {} ROWS ONLY",
    "SELECT tags[{}] FROM accounts WHERE id = {}",
    "SELECT tags[{}:{}] FROM accounts",
    "SELECT {}",
    "SELECT {} + {}, {} / {}, {} % {}",
    "SELECT {}::text, {}::numeric(12,{}), CAST({} AS varchar({}))",
    "SELECT round(price, {}), substr(name, {}, {}) FROM accounts",
    "SELECT * FROM generate_series({}, {})",
    "SELECT * FROM generate_series(1, 3) g(x) WHERE x > {}",
    "SELECT now() - interval '{} days'",
    "SELECT * FROM accounts a, LATERAL (SELECT * FROM history h WHERE h.account = a.id LIMIT {}) l",
    "SELECT * FROM accounts TABLESAMPLE SYSTEM ({})",
    "SELECT CASE WHEN balance > {} THEN 'big' ELSE 'small' END FROM accounts",
    "SELECT * FROM accounts WHERE id BETWEEN {} AND {}",
    "SELECT * FROM accounts WHERE name = '{} items' AND id = {}",
    "SELECT 'x' || {} || 'y', {} = 1000000007",
    "SELECT {} FROM accounts WHERE id = {} FOR UPDATE",
    "WITH moved AS (UPDATE accounts SET balance = balance - {} WHERE id = {} RETURNING *) SELECT * FROM moved",
    "SELECT ARRAY[{}, {}], '{{1,2}}'::int[] @> ARRAY[{}]",
    "SELECT * FROM accounts WHERE id = ANY(ARRAY[{}, {}])",
    "SELECT extract(year FROM made) > {} FROM accounts",
    "SELECT to_char({}, '999')",
    "SELECT {}::boolean",
    "SELECT lpad('a', {}, 'x'), repeat('ab', {})",
    "SELECT pg_sleep(0) WHERE {} = {}",
    "SELECT *\nFROM accounts\n-- a comment with {} in it\nWHERE id = {}",
    "EXPLAIN SELECT * FROM accounts WHERE id = {}",
    "SELECT 1 FROM accounts WHERE id = $1 AND balance > {}",
    "SELECT ({} , {})",
    "SELECT {}.5, 1.{}, {}e2",
];

fn fill(shape: &str, values: &[u32]) -> String {
    let mut out = String::new();
    let mut parts = shape.split("{}").peekable();
    let mut i = 0;
    while let Some(part) = parts.next() {
        out.push_str(&part.replace("{{", "{").replace("}}", "}"));
        if parts.peek().is_some() {
            out.push_str(&values[i % values.len()].to_string());
            i += 1;
        }
    }
    out
}

#[test]
fn a_filled_shape_is_what_the_translator_gives_for_every_value() {
    let (conn, mut d) = setup();
    schema(&conn, &mut d);
    let mut filled_shapes = 0;
    for shape in SHAPES {
        let before = d.shape_fills();
        for (round, value) in VALUES.iter().enumerate() {
            // The same value everywhere, then the value and its neighbours (positions differ from each other).
            for values in [vec![*value], vec![*value, value.saturating_add(1), value / 2]] {
                let sql = fill(shape, &values);
                let expected = direct(&conn, &d, &sql);
                let got = via_dialect(&conn, &mut d, &sql);
                assert_eq!(got, expected, "round {round}: {sql}");
            }
        }
        if d.shape_fills() > before {
            filled_shapes += 1;
        }
    }
    // Most of these shapes carry their literals through (30 of 41 when this was written): the comparison above
    // is of filled templates, not of the translator with itself.
    assert!(filled_shapes >= 25, "only {filled_shapes} shapes were filled in");
}

#[test]
fn the_pgbench_statements_are_filled_from_their_shapes() {
    let (conn, mut d) = setup();
    schema(&conn, &mut d);
    let statements = [
        "UPDATE accounts SET balance = balance + -{} WHERE id = {}",
        "SELECT balance FROM accounts WHERE id = {}",
        "INSERT INTO history (account, delta, at) VALUES ({}, {}, CURRENT_TIMESTAMP)",
    ];
    for (i, value) in [11u32, 12, 13, 14, 15].iter().enumerate() {
        for statement in statements {
            let sql = fill(statement, &[*value, value + 100]);
            assert_eq!(via_dialect(&conn, &mut d, &sql), direct(&conn, &d, &sql), "{sql}");
        }
        // The first round sees each shape once, the second learns it, the rest are filled in.
        assert_eq!(
            d.shape_fills(),
            (i.saturating_sub(1) * statements.len()) as u64,
            "after round {i}"
        );
    }
    // A change of the catalog forgets the shapes: the next round learns them again.
    ok(&conn, &mut d, "CREATE TABLE other (x int)");
    let before = d.shape_fills();
    for value in [21u32, 22] {
        for statement in statements {
            let sql = fill(statement, &[value, value + 100]);
            assert_eq!(via_dialect(&conn, &mut d, &sql), direct(&conn, &d, &sql), "{sql}");
        }
    }
    assert_eq!(d.shape_fills(), before, "seen once, then learned: nothing filled yet");
    // And its rows are right: the UPDATE moved the balance.
    ok(&conn, &mut d, "UPDATE accounts SET balance = 100 WHERE id = 1");
    for value in [3u32, 4, 5] {
        ok(
            &conn,
            &mut d,
            &format!("UPDATE accounts SET balance = balance + -{value} WHERE id = 1"),
        );
    }
    assert_eq!(
        common::one(&conn, &mut d, "SELECT balance FROM accounts WHERE id = 1"),
        "88"
    );
}

#[test]
fn a_shape_whose_translation_takes_a_value_apart_is_never_filled() {
    let (conn, mut d) = setup();
    schema(&conn, &mut d);
    // ORDER BY a position: the translation does not carry the literal through (or differs by value).
    for value in [1u32, 2, 1, 2, 1] {
        let sql = format!("SELECT id, name FROM accounts ORDER BY {value}");
        assert_eq!(via_dialect(&conn, &mut d, &sql), direct(&conn, &d, &sql), "{sql}");
    }
    let rows = common::run(&conn, &mut d, "SELECT id, name FROM accounts ORDER BY 2 DESC").expect("runs");
    assert_eq!(rows[0][1].as_deref(), Some("b"));
}

#[test]
fn transaction_control_is_translated_once_per_text_and_kept_within_its_bound() {
    let (conn, mut d) = setup();
    let begin = d.translate(&conn, "BEGIN").expect("translates");
    assert!(std::sync::Arc::ptr_eq(
        &begin,
        &d.translate(&conn, "BEGIN").expect("translates")
    ));
    // Across a schema change too: transaction control reads no catalog.
    ok(&conn, &mut d, "CREATE TABLE t (x int)");
    assert!(std::sync::Arc::ptr_eq(
        &begin,
        &d.translate(&conn, "BEGIN").expect("translates")
    ));
    // Numbered savepoints (as ORMs name them) past the bound: each still translates to its own name.
    for i in 0..pgcompat::CONTROL_TEXTS_MAX * 2 {
        let sql = format!("SAVEPOINT s{i}");
        let Translated::Statements(list) = &*d.translate(&conn, &sql).expect("translates") else {
            panic!("{sql} passed through");
        };
        assert_eq!(list[0].steps, vec![format!("SAVEPOINT \"s{i}\"")]);
    }
}

/// Runs `step` with `values` bound to `?1…` inside a savepoint rolled back after it (so a write leaves the
/// tables as they were): its rows, or its error.
fn rows_of(conn: &Connection, step: &str, values: &[i64]) -> Result<Vec<Vec<rusqlite::types::Value>>, String> {
    conn.execute_batch("SAVEPOINT probe").expect("savepoint");
    let result = (|| {
        let mut stmt = conn.prepare(step)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push((0..width).map(|i| row.get(i)).collect::<Result<Vec<_>, _>>()?);
        }
        Ok::<_, rusqlite::Error>(out)
    })()
    .map_err(|e| e.to_string());
    conn.execute_batch("ROLLBACK TO probe; RELEASE probe")
        .expect("rollback to");
    result
}

/// A filled text's literals-as-parameters form (`Translation::bound`) answers exactly as its text does, for
/// every value, and is made for the statements whose literals sit where a parameter means the same (the
/// pgbench statements among them); never for a position (`ORDER BY 1`) or a result column (`SELECT 5`).
#[test]
fn the_literals_as_parameters_answer_as_the_text_does() {
    let (conn, mut d) = setup();
    schema(&conn, &mut d);
    let mut bound_shapes = Vec::new();
    for shape in SHAPES {
        let mut bound_seen = false;
        for value in VALUES {
            for values in [vec![*value], vec![*value, value.saturating_add(1), value / 2]] {
                let sql = fill(shape, &values);
                let Ok(translated) = d.translate(&conn, &sql) else {
                    continue;
                };
                let Translated::Statements(list) = &*translated else {
                    continue;
                };
                let [translation] = list.as_slice() else {
                    continue;
                };
                let Some(bound) = &translation.bound else {
                    continue;
                };
                bound_seen = true;
                assert!(!bound.values.is_empty(), "{sql}: {bound:?}");
                assert_eq!(
                    rows_of(&conn, &bound.step, &bound.values),
                    rows_of(&conn, &translation.steps[0], &[]),
                    "{sql}\n  bound: {} {:?}\n  text:  {}",
                    bound.step,
                    bound.values,
                    translation.steps[0]
                );
            }
        }
        if bound_seen {
            bound_shapes.push(*shape);
        }
    }
    for pgbench in [
        "UPDATE accounts SET balance = balance + -{} WHERE id = {}",
        "SELECT balance FROM accounts WHERE id = {}",
        "INSERT INTO history (account, delta, at) VALUES ({}, -{}, CURRENT_TIMESTAMP)",
    ] {
        assert!(
            bound_shapes.contains(&pgbench),
            "{pgbench} not bound; bound: {bound_shapes:#?}"
        );
    }
    for never in [
        "SELECT id, name FROM accounts ORDER BY {}",
        "SELECT {}",
        "SELECT name, count(*) FROM accounts GROUP BY {}",
    ] {
        assert!(!bound_shapes.contains(&never), "{never} bound");
    }
    // The bound text is the same for every value: SQLite compiles it once.
    let texts: std::collections::HashSet<String> = [5u32, 6, 7]
        .iter()
        .map(|v| {
            let sql = format!("SELECT balance FROM accounts WHERE id = {v}");
            match &*d.translate(&conn, &sql).expect("translate") {
                Translated::Statements(list) => list[0].bound.as_ref().map(|b| b.step.clone()).unwrap_or_default(),
                other => panic!("{other:?}"),
            }
        })
        .collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
}
