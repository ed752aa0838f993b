//! The rewrites checked end to end: a PostgreSQL statement through the layer over an in-memory SQLite
//! database, its first row printed as PostgreSQL prints it, against PostgreSQL 15's answer.

use crate::functions::testing::{check, check_errors, row_after};

#[test]
fn columns_are_named_as_postgres_names_them() {
    let names = |sql: &str| {
        let conn = rusqlite::Connection::open_in_memory().expect("memory database");
        let mut dialect = crate::Dialect::new(&conn, "db", "user", 1).expect("installs");
        let translated = dialect.translate(&conn, sql).expect("translates");
        let crate::Translated::Statements(list) = &*translated else {
            panic!("not a statement: {sql}");
        };
        let stmt = conn.prepare(&list[0].steps[0]).expect("prepares");
        stmt.column_names().iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(names("SELECT 'on'::boolean::text, 1::int4"), ["text", "int4"]);
    assert_eq!(
        names("SELECT (ARRAY[1, 2])[1], (regexp_match('a', 'a'))[1]"),
        ["array", "regexp_match"]
    );
    assert_eq!(
        names("SELECT trim(LEADING '0' FROM '01'), trim(TRAILING 'x' FROM 'ax'), trim(' a ')"),
        ["ltrim", "rtrim", "btrim"]
    );
    assert_eq!(names("SELECT TIMESTAMP '2024-01-01'::timestamptz"), ["timestamptz"]);
}

#[test]
fn numbers_compare_by_value_whatever_their_storage() {
    check(&[
        ("3 = 3.0", Some("t")),
        ("10.5 > 9", Some("t")),
        ("'10'::numeric > '9'::numeric", Some("t")),
        ("1.5::float8 = 1.5", Some("t")),
        ("'NaN'::float8 > 1e300::float8", Some("t")),
        ("'NaN'::float8", Some("NaN")),
        ("'NaN'::float8 + 1", Some("NaN")),
        ("(-9223372036854775808)::bigint", Some("-9223372036854775808")),
        ("pg_typeof(-2147483649)", Some("bigint")),
    ]);
    assert_eq!(
        row_after(
            &["CREATE TABLE t (n numeric)", "INSERT INTO t VALUES (10), (9.5), (100)"],
            "WITH s AS (SELECT sum(n) AS total FROM t) SELECT total > 20 FROM s",
        )
        .expect("runs"),
        [Some("t".to_owned())]
    );
}

#[test]
fn arithmetic_checks_its_operand_types() {
    check_errors(&[
        ("'a' + 1", "22P02"),
        ("'{\"a\": 1}'::jsonb + 1", "42883"),
        ("'{1,2}'::int[] + 1", "42883"),
        ("true + 1", "42883"),
        ("1e308::float8 * 10", "22003"),
        ("-9223372036854775808::bigint", "22003"),
        ("1::float8 / 0", "22012"),
    ]);
    check(&[("'2' + 1", Some("3")), ("1.5::float8 * 2", Some("3"))]);
}

#[test]
fn intervals_scale_and_negate() {
    check(&[
        ("INTERVAL '1 day' * 3", Some("3 days")),
        ("INTERVAL '1 hour' / 4", Some("00:15:00")),
        ("-INTERVAL '5 minutes'", Some("-00:05:00")),
        ("7 * INTERVAL '1 week'", Some("49 days")),
        ("INTERVAL '1 month' * 1.5", Some("1 mon 15 days")),
        ("DATE '2024-01-01' + 7 * INTERVAL '1 week'", Some("2024-02-19 00:00:00")),
    ]);
}

#[test]
fn char_n_ignores_its_padding_when_compared() {
    check(&[
        ("'abc'::char(5) = 'abc'", Some("t")),
        ("'abc'::varchar(5) = 'abc  '", Some("f")),
        ("'{\"a\": 1}'::jsonb = '{\"a\": 1.0}'::jsonb", Some("t")),
        ("'[1, 2]'::jsonb <> '[2, 1]'::jsonb", Some("t")),
    ]);
}

#[test]
fn pg_typeof_keeps_an_aggregate_query_one_row() {
    let row = row_after(
        &["CREATE TABLE t (n int)", "INSERT INTO t VALUES (1), (2)"],
        "SELECT pg_typeof(count(*)), count(*) FROM t",
    )
    .expect("runs");
    assert_eq!(row, [Some("bigint".to_owned()), Some("2".to_owned())]);
}
