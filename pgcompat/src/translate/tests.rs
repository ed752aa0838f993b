//! The rewrites checked end to end: a PostgreSQL statement through the layer over an in-memory SQLite
//! database, its first row printed as PostgreSQL prints it, against PostgreSQL 15's answer.

use super::Translation;
use crate::functions::testing::{check, check_errors, row_after};
use crate::types::PgType;

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

/// A memory database and its dialect after `setup` (each statement translated and run), and the translation
/// of `sql` there.
fn translated_after(setup: &[&str], sql: &str) -> (rusqlite::Connection, crate::Dialect, Translation) {
    let conn = rusqlite::Connection::open_in_memory().expect("memory database");
    let mut dialect = crate::Dialect::new(&conn, "db", "user", 1).expect("installs");
    for statement in setup {
        let translated = dialect.translate(&conn, statement).expect("translates");
        let crate::Translated::Statements(list) = &*translated else {
            panic!("not a statement: {statement}");
        };
        for t in list {
            for step in &t.steps {
                conn.execute_batch(step).expect("runs");
            }
        }
    }
    let translated = dialect.translate(&conn, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let crate::Translated::Statements(list) = &*translated else {
        panic!("not a statement: {sql}");
    };
    let translation = list[0].clone();
    (conn, dialect, translation)
}

/// Every row of `sql` after `setup`, each column printed as PostgreSQL prints it.
fn rows_after(setup: &[&str], sql: &str) -> Vec<Vec<Option<String>>> {
    let (conn, dialect, translation) = translated_after(setup, sql);
    let t = &translation;
    let mut stmt = conn
        .prepare(&t.steps[0])
        .unwrap_or_else(|e| panic!("{}: {e}", t.steps[0]));
    let types = dialect.column_types(&stmt, Some(t));
    let width = stmt.column_count();
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next().expect("a row") {
        let values = (0..width)
            .map(|i| {
                let v: rusqlite::types::Value = row.get(i).expect("a value");
                let ty = types.get(i).copied().flatten().unwrap_or(crate::PgType::TEXT);
                crate::value::output(ty, &v, &dialect.state().time_zone())
            })
            .collect();
        out.push(values);
    }
    out
}

fn texts(rows: &[&[&str]]) -> Vec<Vec<Option<String>>> {
    rows.iter()
        .map(|r| r.iter().map(|v| (*v != "NULL").then(|| (*v).to_owned())).collect())
        .collect()
}

#[test]
fn set_returning_functions_join_laterally() {
    let docs = [
        "CREATE TABLE docs (id int PRIMARY KEY, body jsonb)",
        r#"INSERT INTO docs VALUES (1, '{"tags": ["x", "y"]}'), (2, '{"tags": ["y"]}')"#,
    ];
    assert_eq!(
        rows_after(
            &docs,
            "SELECT d.id, t.tag FROM docs d, jsonb_array_elements_text(d.body -> 'tags') AS t(tag) ORDER BY d.id, t.tag"
        ),
        texts(&[&["1", "x"], &["1", "y"], &["2", "y"]])
    );
    assert_eq!(
        rows_after(
            &docs,
            "SELECT tag, count(*) FROM docs, jsonb_array_elements_text(body -> 'tags') AS tag GROUP BY tag ORDER BY tag"
        ),
        texts(&[&["x", "1"], &["y", "2"]])
    );
    assert_eq!(
        rows_after(
            &[],
            r#"SELECT key, value FROM jsonb_each('{"b": 2, "a": {"x": 1}}') ORDER BY key"#
        ),
        texts(&[&["a", r#"{"x": 1}"#], &["b", "2"]])
    );
    assert_eq!(
        rows_after(&[], r#"SELECT * FROM jsonb_each_text('{"a": "s", "c": null}')"#),
        texts(&[&["a", "s"], &["c", "NULL"]])
    );
    assert_eq!(
        rows_after(
            &[],
            r#"SELECT value FROM jsonb_array_elements('[3, "x"]') WITH ORDINALITY AS e(value, n) ORDER BY n DESC"#
        ),
        texts(&[&[r#""x""#], &["3"]])
    );
    assert_eq!(
        rows_after(
            &[],
            "SELECT a, b FROM unnest(ARRAY[1, 2, 3], ARRAY['x', 'y']) AS t(a, b) ORDER BY a"
        ),
        texts(&[&["1", "x"], &["2", "y"], &["3", "NULL"]])
    );
    assert_eq!(
        rows_after(&[], "SELECT unnest(ARRAY[2, 1]) AS u ORDER BY u"),
        texts(&[&["1"], &["2"]])
    );
    assert_eq!(
        rows_after(&[], "SELECT generate_series(1, 3, 2)"),
        texts(&[&["1"], &["3"]])
    );
    assert_eq!(
        rows_after(
            &[],
            "SELECT x FROM regexp_split_to_table('one two  three', '\\s+') AS x ORDER BY x"
        ),
        texts(&[&["one"], &["three"], &["two"]])
    );
    check_errors(&[("* FROM jsonb_array_elements('{\"a\": 1}')", "22023")]);
}

#[test]
fn numeric_results_keep_their_order_through_a_cte() {
    assert_eq!(
        rows_after(
            &[
                "CREATE TABLE t (g int, n numeric)",
                "INSERT INTO t VALUES (1, 9.5), (2, 10), (3, 100.25)"
            ],
            "WITH s AS (SELECT g, sum(n) AS total FROM t GROUP BY g) SELECT total FROM s ORDER BY total DESC"
        ),
        texts(&[&["100.25"], &["10"], &["9.5"]])
    );
}

#[test]
fn upserts_resolve_their_conflict_target_as_postgres_does() {
    let setup = [
        "CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL, hits int NOT NULL DEFAULT 0)",
        "INSERT INTO settings VALUES ('tz', 'UTC')",
        "CREATE TABLE pageviews (path text, day date, n int, UNIQUE (path, day))",
    ];
    let run = |sql: &str| row_after(&setup, sql);
    assert_eq!(
        run("INSERT INTO settings VALUES ('tz', 'x') ON CONFLICT ON CONSTRAINT settings_pkey DO UPDATE SET value = 'again' RETURNING value")
            .expect("runs"),
        [Some("again".to_owned())]
    );
    assert_eq!(
        run("INSERT INTO settings VALUES ('a', 'x') ON CONFLICT (value) DO NOTHING").map_err(|e| e.code),
        Err("42P10")
    );
    assert_eq!(
        run(
            "INSERT INTO settings VALUES ('b', 'x'), ('b', 'y') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )
        .map_err(|e| e.code),
        Err("21000")
    );
    assert_eq!(
        run("INSERT INTO settings VALUES ('t', 'x') ON CONFLICT ON CONSTRAINT nothing DO NOTHING").map_err(|e| e.code),
        Err("42704")
    );
    assert_eq!(
        rows_after(
            &[
                setup[2],
                "INSERT INTO pageviews SELECT '/a', '2024-01-01', g FROM generate_series(1, 3) AS g ON CONFLICT (path, day) DO NOTHING",
            ],
            "SELECT path, n FROM pageviews"
        ),
        texts(&[&["/a", "1"]])
    );
}

#[test]
fn delete_using_deletes_the_rows_the_join_finds() {
    let setup = [
        "CREATE TABLE dept (id int PRIMARY KEY, name text)",
        "CREATE TABLE emp (id int PRIMARY KEY, name text, dept_id int)",
        "INSERT INTO dept VALUES (1, 'eng'), (2, 'empty')",
        "INSERT INTO emp VALUES (1, 'ann', 1), (2, 'eve', 2), (3, 'bob', 2)",
        "DELETE FROM emp USING dept WHERE emp.dept_id = dept.id AND dept.name = 'empty'",
    ];
    assert_eq!(
        rows_after(&setup, "SELECT name FROM emp ORDER BY id"),
        texts(&[&["ann"]])
    );
}

#[test]
fn any_and_all_answer_with_three_values() {
    check(&[
        ("2 > ALL (ARRAY[1, 2])", Some("f")),
        ("3 > ALL (ARRAY[1, 2])", Some("t")),
        ("3 < ALL (ARRAY[4, NULL])", None),
        ("1.5 > ANY (ARRAY[1.49, 2])", Some("t")),
        ("1 = ANY (ARRAY[]::int[])", Some("f")),
        ("1 > ALL (SELECT 0 UNION SELECT -1)", Some("t")),
        ("'b' = ANY (SELECT 'a' UNION SELECT 'b')", Some("t")),
    ]);
}

#[test]
fn limit_offset_and_fetch_as_sqlite_takes_them() {
    let setup = ["CREATE TABLE t (id int)", "INSERT INTO t VALUES (1), (2), (3)"];
    assert_eq!(
        rows_after(&setup, "SELECT id FROM t ORDER BY id OFFSET 2"),
        texts(&[&["3"]])
    );
    assert_eq!(
        rows_after(&setup, "SELECT id FROM t ORDER BY id FETCH FIRST 2 ROWS ONLY"),
        texts(&[&["1"], &["2"]])
    );
    assert_eq!(
        rows_after(&setup, "SELECT id FROM t ORDER BY id DESC FETCH FIRST ROW ONLY"),
        texts(&[&["3"]])
    );
    assert_eq!(
        row_after(&setup, "INSERT INTO t (id) VALUES (1, 2)").map_err(|e| e.code),
        Err("42601")
    );
}

#[test]
fn queries_follow_postgres_grouping_and_set_operation_rules() {
    let setup = [
        "CREATE TABLE parent (id int PRIMARY KEY, name text, n int)",
        "INSERT INTO parent VALUES (1, 'one', 5)",
    ];
    let code = |sql: &str| row_after(&setup, sql).map(|_| "ok").unwrap_or_else(|e| e.code);
    assert_eq!(code("SELECT name, count(*) FROM parent"), "42803");
    assert_eq!(code("SELECT name, count(*) FROM parent GROUP BY n"), "42803");
    assert_eq!(code("SELECT name, count(*) FROM parent GROUP BY id"), "ok");
    assert_eq!(code("SELECT name, count(*) FROM parent GROUP BY name"), "ok");
    assert_eq!(code("SELECT name, count(*) FROM parent GROUP BY 1"), "ok");
    assert_eq!(code("SELECT count(*), max(n) FROM parent"), "ok");
    assert_eq!(code("SELECT 1 UNION SELECT 'a'"), "22P02");
    assert_eq!(
        row_after(&setup, "SELECT 1 UNION SELECT '2' ORDER BY 1 DESC").expect("runs"),
        [Some("2".to_owned())]
    );
}

#[test]
fn times_round_to_their_precision_and_carry_zones() {
    check(&[
        ("'2024-01-01 10:00:00.5'::timestamp(0)", Some("2024-01-01 10:00:01")),
        ("'10:00:00.123456'::time(2)", Some("10:00:00.12")),
        (
            "'2024-01-01 10:00:00.125+00'::timestamptz(2)",
            Some("2024-01-01 10:00:00.13+00"),
        ),
        ("pg_typeof(current_time)", Some("time with time zone")),
        ("pg_typeof(localtime)", Some("time without time zone")),
        ("'12:00:00.5+02'::timetz", Some("12:00:00.5+02")),
        ("'12:00 -05:30'::time with time zone", Some("12:00:00-05:30")),
    ]);
}

#[test]
fn distinct_on_grouping_sets_and_numeric_windows() {
    let setup = [
        "CREATE TABLE emp (id int PRIMARY KEY, dept_id int, name text, salary numeric(10,2))",
        "INSERT INTO emp VALUES (1, 1, 'ann', 120000), (2, 1, 'bob', 95000), (3, 2, 'cat', 70000.5), (4, 2, 'dan', NULL), (5, NULL, 'eve', 50000)",
    ];
    assert_eq!(
        rows_after(
            &setup,
            "SELECT DISTINCT ON (dept_id) dept_id, name FROM emp ORDER BY dept_id, salary DESC NULLS LAST, id"
        ),
        texts(&[&["1", "ann"], &["2", "cat"], &["NULL", "eve"]])
    );
    assert_eq!(
        rows_after(
            &setup,
            "SELECT dept_id, count(*) FROM emp GROUP BY ROLLUP (dept_id) ORDER BY dept_id NULLS LAST"
        ),
        texts(&[&["1", "2"], &["2", "2"], &["NULL", "5"], &["NULL", "1"]])
    );
    assert_eq!(
        rows_after(
            &setup,
            "SELECT count(*), grouping(dept_id) FROM emp GROUP BY GROUPING SETS ((dept_id), ()) HAVING count(*) > 2"
        ),
        texts(&[&["5", "1"]])
    );
    assert_eq!(
        rows_after(
            &setup,
            "SELECT id, sum(salary) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM emp ORDER BY id"
        ),
        texts(&[
            &["1", "120000.00"],
            &["2", "215000.00"],
            &["3", "165000.50"],
            &["4", "70000.50"],
            &["5", "50000.00"]
        ])
    );
    assert_eq!(
        rows_after(
            &setup,
            "SELECT id, avg(salary) OVER (PARTITION BY dept_id) FROM emp WHERE dept_id = 1 ORDER BY id"
        ),
        texts(&[&["1", "107500.000000000000"], &["2", "107500.000000000000"]])
    );
}

#[test]
fn string_forms_and_operators_postgres_has() {
    check(&[
        ("overlay('Txxxxas' PLACING 'hom' FROM 2 FOR 4)", Some("Thomas")),
        ("overlay('abcdef' PLACING 'XY' FROM 3)", Some("abXYef")),
        ("'abc' SIMILAR TO 'a(b|x)c'", Some("t")),
        ("'a.c' SIMILAR TO 'a_c'", Some("t")),
        ("'abc' SIMILAR TO 'a.c'", Some("f")),
        ("'abc' NOT SIMILAR TO '%c'", Some("f")),
        ("|/ 25", Some("5")),
        ("@ -5", Some("5")),
        ("make_interval(days => 10, hours => 2)", Some("10 days 02:00:00")),
        ("make_interval(mins => 5)", Some("00:05:00")),
        (
            "(DATE '2024-01-01', DATE '2024-01-10') OVERLAPS (DATE '2024-01-09', DATE '2024-01-20')",
            Some("t"),
        ),
        (
            "(DATE '2024-01-01', DATE '2024-01-10') OVERLAPS (DATE '2024-01-10', DATE '2024-01-20')",
            Some("f"),
        ),
    ]);
    check_errors(&[
        ("make_interval(fortnights => 1)", "42883"),
        ("'a' SIMILAR TO 'a' ESCAPE 'xy'", "22025"),
    ]);
    assert_eq!(
        rows_after(&[], "SELECT regexp_matches('a1b2', '[0-9]', 'g') AS m ORDER BY 1"),
        texts(&[&["{1}"], &["{2}"]])
    );
    assert_eq!(
        rows_after(
            &[],
            "SELECT string_agg(DISTINCT x, '|' ORDER BY x) FROM (VALUES ('b'), ('a'), ('b')) AS t(x)"
        ),
        texts(&[&["a|b"]])
    );
    assert_eq!(
        rows_after(
            &[],
            "SELECT array_agg(DISTINCT x ORDER BY x DESC) FROM (VALUES (2), (1), (2)) AS t(x)"
        ),
        texts(&[&["{2,1}"]])
    );
    assert_eq!(
        rows_after(
            &["CREATE TABLE d (id int)", "INSERT INTO d VALUES (2), (1)"],
            "TABLE d ORDER BY id"
        ),
        texts(&[&["1"], &["2"]])
    );
}

#[test]
fn ctes_returning_aliases_and_more_value_forms() {
    assert_eq!(
        rows_after(
            &[],
            "WITH RECURSIVE days(d) AS (SELECT DATE '2024-04-01' UNION ALL SELECT d + 1 FROM days WHERE d < DATE '2024-04-03') SELECT d FROM days ORDER BY d"
        ),
        texts(&[&["2024-04-01"], &["2024-04-02"], &["2024-04-03"]])
    );
    assert_eq!(
        rows_after(
            &[
                "CREATE TABLE c (id int PRIMARY KEY, country text)",
                "CREATE TABLE o (id int PRIMARY KEY, cid int, status text)",
                "INSERT INTO c VALUES (1, 'uk'), (2, 'us')",
                "INSERT INTO o VALUES (1, 1, 'new'), (2, 2, 'new')",
            ],
            "UPDATE o AS x SET status = 'vip' FROM c WHERE c.id = x.cid AND c.country = 'uk' RETURNING x.id, x.status"
        ),
        texts(&[&["1", "vip"]])
    );
    assert_eq!(
        rows_after(
            &[
                "CREATE TABLE posts (id int PRIMARY KEY, tags text[])",
                "INSERT INTO posts VALUES (5, '{x,y}'), (6, '{z}')"
            ],
            "SELECT array_agg(t ORDER BY t) FROM posts, unnest(tags) AS t WHERE id = 5"
        ),
        texts(&[&["{x,y}"]])
    );
    check(&[
        ("'\\x00ff'::bytea || '\\x01'::bytea", Some("\\x00ff01")),
        ("substring('abc123def' FROM '[0-9]+')", Some("123")),
        ("substring('foo.bar' FROM '\\.(.*)$')", Some("bar")),
        ("convert_from(convert_to('héllo', 'UTF8'), 'UTF8')", Some("héllo")),
        ("'today'::date = current_date", Some("t")),
        ("'NaN'::numeric = 'NaN'::numeric", Some("t")),
        ("0.1::float4 + 0.2::float4", Some("0.3")),
        ("pg_typeof(NOT EXISTS (SELECT 1))", Some("boolean")),
    ]);
    assert_eq!(
        rows_after(
            &[],
            "SELECT sum(x), avg(x) FROM (VALUES (INTERVAL '1 hour'), (INTERVAL '30 minutes'), (INTERVAL '1 day')) AS t(x)"
        ),
        texts(&[&["1 day 01:30:00", "08:30:00"]])
    );
}

#[test]
fn date_inputs_postgres_reads() {
    check(&[
        ("'infinity'::timestamp > TIMESTAMP '9999-01-01'", Some("t")),
        ("'-infinity'::date < DATE '0001-01-01'", Some("t")),
        ("isfinite('infinity'::date)", Some("f")),
        ("'20240517'::date", Some("2024-05-17")),
        ("'May 17, 2024'::date", Some("2024-05-17")),
        ("'17-May-2024'::date", Some("2024-05-17")),
        ("'2024-05-17 1:45 pm'::timestamp", Some("2024-05-17 13:45:00")),
        ("'12:30 am'::time", Some("00:30:00")),
        ("'2024-05-17T13:45:12Z'::timestamptz", Some("2024-05-17 13:45:12+00")),
        (
            "'2024-05-17 13:45:12.123456789'::timestamp",
            Some("2024-05-17 13:45:12.123457"),
        ),
    ]);
    check_errors(&[("'Smarch 1, 2024'::date", "22007"), ("'13:00 pm'::time", "22008")]);
}

#[test]
fn whole_rows_slices_array_casts_and_quantified_patterns() {
    assert_eq!(
        rows_after(&[], "SELECT row_to_json(r) FROM (SELECT 1 AS id, 'x' AS name) AS r"),
        texts(&[&[r#"{"id":1,"name":"x"}"#]])
    );
    assert_eq!(
        rows_after(
            &[],
            "SELECT jsonb_agg(t ORDER BY t.id DESC) FROM (VALUES (1, 'a'), (2, 'b')) AS t(id, name)"
        ),
        texts(&[&[r#"[{"id": 2, "name": "b"}, {"id": 1, "name": "a"}]"#]])
    );
    assert_eq!(
        rows_after(
            &[],
            "SELECT jsonb_agg(x ORDER BY x DESC) FROM generate_series(1, 3) AS x"
        ),
        texts(&[&["[3, 2, 1]"]])
    );
    check(&[
        ("(ARRAY[1, 2, 3])[2:3]", Some("{2,3}")),
        ("(ARRAY[1, 2, 3])[:2]", Some("{1,2}")),
        ("(ARRAY[1, 2, 3])[3:1]", Some("{}")),
        ("ARRAY[1.5, 2.4]::int[]", Some("{2,2}")),
        ("ARRAY['t', 'f']::bool[]", Some("{t,f}")),
        ("'x' LIKE ANY (ARRAY['%x', 'y%'])", Some("t")),
        ("'abc' ILIKE ALL (ARRAY['A%', '%C'])", Some("t")),
        ("'abc' LIKE ALL (ARRAY['a%', 'x%'])", Some("f")),
    ]);
    check_errors(&[("100::money", "0A000"), ("jsonb_path_exists('{}', '$.a')", "0A000")]);
}

#[test]
fn ordered_set_aggregates_and_system_columns() {
    assert_eq!(
        rows_after(
            &[],
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x), percentile_disc(0.5) WITHIN GROUP (ORDER BY x), \
             mode() WITHIN GROUP (ORDER BY x), percentile_cont(0.25) WITHIN GROUP (ORDER BY x DESC) \
             FROM (VALUES (1.5), (2), (2), (10)) AS t(x)"
        ),
        texts(&[&["2", "2", "2", "4"]])
    );
    assert_eq!(
        row_after(&["CREATE TABLE t (id int PRIMARY KEY)"], "SELECT xmax FROM t").map_err(|e| e.code),
        Err("0A000")
    );
    assert_eq!(
        row_after(
            &[
                "CREATE TABLE t (id int PRIMARY KEY, xmin int)",
                "INSERT INTO t VALUES (1, 2)"
            ],
            "SELECT xmin FROM t"
        )
        .expect("a column of that name is the column"),
        [Some("2".to_owned())]
    );
}

#[test]
fn encodings_are_named_and_numbered_as_postgresql_does() {
    check(&[
        ("pg_encoding_to_char(6)", Some("UTF8")),
        ("pg_encoding_to_char(8)", Some("LATIN1")),
        ("pg_encoding_to_char(99)", Some("")),
        ("pg_char_to_encoding('utf-8')", Some("6")),
        ("pg_char_to_encoding('SQL_ASCII')", Some("0")),
        ("pg_char_to_encoding('nonsense')", Some("-1")),
    ]);
}

#[test]
fn what_cannot_be_answered_is_refused_by_name() {
    check_errors(&[
        ("txid_current()", "0A000"),
        ("pg_current_xact_id()", "0A000"),
        ("inet_server_addr()", "0A000"),
    ]);
}

#[test]
fn prepared_statements_keep_their_column_names_and_are_listed() {
    let conn = rusqlite::Connection::open_in_memory().expect("memory database");
    let mut dialect = crate::Dialect::new(&conn, "db", "user", 1).expect("installs");
    let translated = dialect
        .translate(&conn, "PREPARE p (int, text[]) AS SELECT $1 + 1, $2[1], $1 AS one")
        .expect("translates");
    let crate::Translated::Statements(list) = &*translated else {
        panic!("not a statement");
    };
    let crate::Kind::Prepare { statement, source, .. } = &list[0].kind else {
        panic!("not a PREPARE: {:?}", list[0].kind);
    };
    assert_eq!(source, "PREPARE p (INT, TEXT[]) AS SELECT $1 + 1, $2[1], $1 AS one");
    let mut names = |sql: &str| {
        let translated = dialect.translate(&conn, sql).expect("translates");
        let crate::Translated::Statements(list) = &*translated else {
            panic!("not a statement: {sql}");
        };
        let stmt = conn.prepare(&list[0].steps[0]).expect("prepares");
        stmt.column_names().iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let executed = statement.replace("$1", "1").replace("$2", "'{a}'");
    assert_eq!(names(&executed), ["?column?", "?column?", "one"], "{statement}");
    dialect
        .state()
        .set_prepared_statements(vec![crate::functions::PreparedStatementRow {
            name: "p".to_owned(),
            statement: source.clone(),
            prepared_at: std::time::SystemTime::UNIX_EPOCH,
            parameter_types: vec![
                Some(crate::PgType::INT4),
                Some(crate::PgType::new(crate::Base::Varchar)),
                None,
            ],
        }]);
    let sql = "SELECT name, parameter_types::text, prepare_time FROM pg_prepared_statements";
    let translated = dialect.translate(&conn, sql).expect("translates");
    let crate::Translated::Statements(list) = &*translated else {
        panic!("not a statement: {sql}");
    };
    let row = conn
        .query_row(&list[0].steps[0], [], |row| {
            Ok([
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ])
        })
        .expect("one row");
    assert_eq!(
        row,
        ["p", "{integer,\"character varying\",unknown}", "1970-01-01 00:00:00+00"]
    );
}

#[test]
fn exists_without_columns_and_grouping_by_a_set_returning_function() {
    check(&[("EXISTS (SELECT FROM (VALUES (1)) AS v(x) WHERE x = 1)", Some("t"))]);
    assert_eq!(
        rows_after(
            &[],
            "SELECT regexp_split_to_table('a b a', ' ') AS w, count(1) FROM (VALUES (1)) AS v(x) GROUP BY w ORDER BY w"
        ),
        [
            [Some("a".to_owned()), Some("2".to_owned())],
            [Some("b".to_owned()), Some("1".to_owned())]
        ]
    );
    check_errors(&[("unnest(array_agg(x)) FROM (VALUES (1)) AS v(x) GROUP BY x", "0A000")]);
}

#[test]
fn a_ctes_columns_are_named_as_postgresql_names_them() {
    assert_eq!(
        rows_after(
            &[],
            "WITH w AS (SELECT x, count(1), row_number() OVER (ORDER BY x) FROM (VALUES (1)) AS v(x) GROUP BY x) \
             SELECT x, count, row_number FROM w"
        ),
        [[Some("1".to_owned()), Some("1".to_owned()), Some("1".to_owned())]]
    );
}

#[test]
fn regtype_arrays_hold_oids_and_print_names() {
    check(&[
        ("23::oid = ANY ('{int,int8,int2}'::regtype[])", Some("t")),
        ("25::oid = ANY ('{int,int8,int2}'::regtype[])", Some("f")),
        ("'{int,text}'::regtype[]::text[]", Some("{integer,text}")),
        (
            "COALESCE(NULL::regtype[], '23 1043'::regtype[])::text[]",
            Some("{integer,\"character varying\"}"),
        ),
    ]);
}

/// The translation of `sql` after `setup` (each setup statement translated and run first).
fn translation_after(setup: &[&str], sql: &str) -> Translation {
    translated_after(setup, sql).2
}

#[test]
fn a_wildcard_over_ctes_and_catalog_views_is_typed_without_running_the_query() {
    // asyncpg's type introspection, in short: `*` over a recursive CTE of pg_type columns, with a `$1`. A
    // Describe cannot run it to look at values, so its columns were all text before.
    let t = translation_after(
        &[],
        "WITH RECURSIVE tree(oid, name, elem, depth) AS ( \
           SELECT t.oid, t.typname, t.typelem, 0 FROM pg_type t WHERE t.oid = any($1::oid[]) \
           UNION ALL SELECT t.oid, t.typname, t.typelem, tree.depth + 1 FROM pg_type t, tree WHERE t.oid = tree.elem) \
         SELECT DISTINCT *, elem::regtype::text AS elem_name FROM tree ORDER BY depth DESC",
    );
    assert_eq!(
        t.columns,
        Some(vec![
            Some(PgType::OID),
            Some(PgType::NAME),
            Some(PgType::OID),
            Some(PgType::INT4),
            Some(PgType::TEXT)
        ])
    );
    assert_eq!(t.params, vec![Some(PgType::OID.array())]);
    // `q.*` of one relation, beside a column of another.
    let t = translation_after(
        &["CREATE TABLE items (id bigint PRIMARY KEY, name text)"],
        "WITH w AS (SELECT id, name FROM items) SELECT w.*, n.nspname FROM w, pg_namespace n",
    );
    assert_eq!(
        t.columns,
        Some(vec![Some(PgType::INT8), Some(PgType::TEXT), Some(PgType::NAME)])
    );
    // A wildcard over a table is left to SQLite's column metadata; one over a join with USING is not typed.
    let t = translation_after(
        &["CREATE TABLE items (id bigint PRIMARY KEY, name text)"],
        "SELECT * FROM items, pg_am",
    );
    assert_eq!(t.columns, None);
    let t = translation_after(
        &[],
        "WITH a AS (SELECT 1 AS k), b AS (SELECT 1 AS k, 'x' AS v) SELECT * FROM a JOIN b USING (k)",
    );
    assert_eq!(t.columns, None);
}

#[test]
fn a_parameter_of_the_containment_and_key_operators_takes_postgresqls_type() {
    let setup = ["CREATE TABLE docs (id int PRIMARY KEY, doc jsonb, tags text[])"];
    for (sql, want) in [
        (
            "SELECT id FROM docs WHERE doc @> $1",
            PgType::new(crate::types::Base::Jsonb),
        ),
        (
            "SELECT id FROM docs WHERE $1 <@ doc",
            PgType::new(crate::types::Base::Jsonb),
        ),
        ("SELECT id FROM docs WHERE tags && $1", PgType::TEXT.array()),
        ("SELECT id FROM docs WHERE tags @> $1", PgType::TEXT.array()),
        ("SELECT id FROM docs WHERE doc ? $1", PgType::TEXT),
        ("SELECT id FROM docs WHERE doc ?| $1", PgType::TEXT.array()),
        ("SELECT doc #>> $1 FROM docs", PgType::TEXT.array()),
    ] {
        assert_eq!(translation_after(&setup, sql).params, vec![Some(want)], "{sql}");
    }
}

#[test]
fn enum_arrays_are_types_whose_elements_are_labels() {
    let setup = ["CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')"];
    let t = translation_after(&setup, "SELECT $1::mood[]");
    assert!(t.params[0].is_some_and(|ty| ty.is_array()), "{:?}", t.params);
    let rows = rows_after(
        &setup,
        "SELECT '{ok,happy}'::mood[] AS m, 'ok' = ANY('{sad,ok}'::mood[]) AS has",
    );
    assert_eq!(rows, [[Some("{ok,happy}".to_owned()), Some("t".to_owned())]]);
}

#[test]
fn move_forward_reads_the_portal_name_and_count() {
    use super::cursor::move_forward;
    assert_eq!(
        move_forward("MOVE FORWARD 10 __asyncpg_portal_4a__"),
        Some(("__asyncpg_portal_4a__".to_owned(), Some(10)))
    );
    assert_eq!(move_forward("move 3 in c"), Some(("c".to_owned(), Some(3))));
    assert_eq!(
        move_forward("MOVE FORWARD ALL FROM \"C\""),
        Some(("C".to_owned(), None))
    );
    assert_eq!(move_forward("MOVE NEXT c"), Some(("c".to_owned(), Some(1))));
    for other in [
        "MOVE BACKWARD 2 c",
        "MOVE -1 c",
        "FETCH 2 c",
        "MOVE ABSOLUTE 3 c",
        "MOVE 1 c; MOVE 1 c",
        "SELECT 1",
    ] {
        assert_eq!(move_forward(other), None, "{other}");
    }
}

#[test]
fn the_origins_of_result_columns_are_offered_only_where_postgresql_gives_them() {
    let setup = [
        "CREATE TABLE t (id int PRIMARY KEY, v varchar(20))",
        "CREATE TABLE u (id int PRIMARY KEY)",
        "CREATE VIEW tv AS SELECT id, v FROM t",
    ];
    for (sql, offered) in [
        ("SELECT id, v FROM t", true),
        ("SELECT s.v FROM (SELECT v FROM t) s", true),
        ("WITH q AS (SELECT v FROM t) SELECT v FROM q", true),
        ("SELECT id FROM t UNION SELECT id FROM u", false),
        ("(SELECT id FROM t) EXCEPT (SELECT id FROM u)", false),
        ("SELECT (SELECT v FROM t LIMIT 1)", false),
        ("SELECT v FROM tv", false),
        ("SELECT t.v FROM t JOIN (SELECT id FROM tv) w ON w.id = t.id", false),
        ("INSERT INTO u VALUES (1) RETURNING id", true),
        ("INSERT INTO u VALUES (1) RETURNING (SELECT max(v) FROM t)", false),
        ("UPDATE t SET v = 'x' RETURNING v", true),
        ("UPDATE t SET v = 'x' FROM u WHERE u.id = t.id RETURNING t.v", false),
        ("DELETE FROM t RETURNING id", true),
        ("DELETE FROM t", false),
    ] {
        assert_eq!(translation_after(&setup, sql).column_origins, offered, "{sql}");
    }
    // PostgreSQL has no max(varchar): the aggregate is max(text).
    let t = translation_after(&setup, "SELECT max(v), min(v), max(id) FROM t");
    assert_eq!(
        t.columns,
        Some(vec![Some(PgType::TEXT), Some(PgType::TEXT), Some(PgType::INT4)])
    );
}
