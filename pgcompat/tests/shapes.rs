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
        .map(|t| comparable(&t))
        .map_err(|e| match e {
            pgcompat::TranslateError::Sql(e) => e.code.to_owned(),
            other => other.to_string(),
        })
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
