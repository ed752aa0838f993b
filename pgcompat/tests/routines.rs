//! SQL functions (`CREATE FUNCTION … LANGUAGE sql`) through the dialect layer on a plain SQLite connection:
//! calls are inlined and answer as PostgreSQL's do (arguments converted to the parameters' types, the first
//! row of a body that reads tables, NULL when it has none, a caller's column never captured by the body's),
//! `pg_proc` and psql's `\df` list them, and the DDL's errors are PostgreSQL's.

mod common;

use common::{ok, one, run, setup};

#[test]
fn sql_functions_are_inlined_where_they_are_called() {
    let (conn, mut d) = setup();
    ok(
        &conn,
        &mut d,
        "CREATE FUNCTION add_one(a integer) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT a + 1'",
    );
    assert_eq!(one(&conn, &mut d, "SELECT add_one(41)"), "42");
    assert_eq!(one(&conn, &mut d, "SELECT add_one(add_one('1'))"), "3");
    ok(&conn, &mut d, "CREATE TABLE t (id int, v text)");
    ok(&conn, &mut d, "INSERT INTO t VALUES (1, 'x'), (2, 'y')");
    ok(
        &conn,
        &mut d,
        "CREATE FUNCTION name_of(id int) RETURNS text AS $$ SELECT v FROM t WHERE t.id = $1 $$ LANGUAGE sql STABLE",
    );
    let rows = run(&conn, &mut d, "SELECT id, name_of(id), name_of(3) FROM t ORDER BY id").expect("runs");
    let expected = vec![
        vec![Some("1".to_owned()), Some("x".to_owned()), None],
        vec![Some("2".to_owned()), Some("y".to_owned()), None],
    ];
    assert_eq!(rows, expected);
    assert_eq!(
        one(&conn, &mut d, "SELECT count(*) FROM t WHERE name_of(id) = 'y'"),
        "1"
    );
}

#[test]
fn psql_lists_the_functions_and_ddl_errors_are_postgresqls() {
    let (conn, mut d) = setup();
    ok(
        &conn,
        &mut d,
        "CREATE FUNCTION add_one(a integer) RETURNS integer LANGUAGE sql AS 'SELECT a + 1'",
    );
    let df = "SELECT n.nspname, p.proname, pg_catalog.pg_get_function_result(p.oid), \
              pg_catalog.pg_get_function_arguments(p.oid), p.proargnames FROM pg_catalog.pg_proc p \
              LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname <> 'pg_catalog'";
    let rows = run(&conn, &mut d, df).expect("runs");
    let expected: Vec<Option<String>> = ["public", "add_one", "integer", "a integer", "{a}"]
        .iter()
        .map(|s| Some((*s).to_owned()))
        .collect();
    assert_eq!(rows, vec![expected]);
    let duplicate = "CREATE FUNCTION add_one(a integer) RETURNS integer LANGUAGE sql AS 'SELECT a'";
    assert_eq!(run(&conn, &mut d, duplicate), Err("42723".to_owned()));
    ok(
        &conn,
        &mut d,
        "CREATE OR REPLACE FUNCTION add_one(a integer) RETURNS integer LANGUAGE sql AS 'SELECT $1 + 2'",
    );
    assert_eq!(one(&conn, &mut d, "SELECT add_one(1)"), "3");
    let plpgsql = "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$";
    assert_eq!(run(&conn, &mut d, plpgsql), Err("0A000".to_owned()));
    let setof = "CREATE FUNCTION g() RETURNS SETOF int LANGUAGE sql AS 'SELECT 1'";
    assert_eq!(run(&conn, &mut d, setof), Err("0A000".to_owned()));
    ok(&conn, &mut d, "DROP FUNCTION add_one(integer)");
    assert!(run(&conn, &mut d, "SELECT add_one(1)").is_err());
    assert_eq!(run(&conn, &mut d, "DROP FUNCTION add_one"), Err("42883".to_owned()));
    ok(&conn, &mut d, "DROP FUNCTION IF EXISTS add_one");
}
