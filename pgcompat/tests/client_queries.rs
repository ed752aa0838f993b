//! Queries that drivers and tools send on their own (psycopg's type lookup, SQLAlchemy's inspector,
//! pg_dump's object lists, drizzle-kit's introspection), answered as PostgreSQL 15 answers them.

mod common;

use common::{ok, run, setup};

fn rows(sql: &str, setup_sql: &[&str]) -> Vec<Vec<Option<String>>> {
    let (conn, mut d) = setup();
    for statement in setup_sql {
        ok(&conn, &mut d, statement);
    }
    run(&conn, &mut d, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn cells(rows: &[Vec<Option<String>>]) -> Vec<Vec<&str>> {
    rows.iter()
        .map(|r| r.iter().map(|c| c.as_deref().unwrap_or("NULL")).collect())
        .collect()
}

#[test]
fn to_regtype_finds_built_in_and_database_types() {
    let got = rows(
        "SELECT to_regtype('int4'), to_regtype('integer')::oid, to_regtype('hstore') IS NULL, \
         to_regtype('text[]'), to_regtype('mood')",
        &["CREATE TYPE mood AS ENUM ('sad', 'ok')"],
    );
    assert_eq!(cells(&got), vec![vec!["integer", "23", "t", "text[]", "mood"]]);
    // psycopg 3's TypeInfo.fetch: no row for a type the database lacks, one for a type it has.
    let query = "SELECT typname AS name, oid, typarray AS array_oid, oid::regtype::text AS regtype, \
                 typdelim AS delimiter FROM pg_type t WHERE t.oid = to_regtype('{}') ORDER BY t.oid";
    assert!(rows(&query.replace("{}", "hstore"), &[]).is_empty());
    assert_eq!(
        cells(&rows(&query.replace("{}", "uuid"), &[])),
        vec![vec!["uuid", "2950", "2951", "uuid", ","]]
    );
}

#[test]
fn system_columns_of_the_catalogs() {
    let got = rows("SELECT x.tableoid, x.oid, x.extname FROM pg_extension x; ", &[]);
    assert_eq!(cells(&got), vec![vec!["3079", "13526", "plpgsql"]]);
    let got = rows(
        "SELECT tableoid, nspname FROM pg_namespace WHERE nspname = 'public'",
        &[],
    );
    assert_eq!(cells(&got), vec![vec!["2615", "public"]]);
    let got = rows("SELECT 'integer'::regtype::oid, pg_collation_is_visible(100)", &[]);
    assert_eq!(cells(&got), vec![vec!["23", "t"]]);
}

#[test]
fn several_set_returning_functions_run_side_by_side() {
    let got = rows("SELECT unnest(ARRAY[1, 2]), unnest(ARRAY['a', 'b', 'c'])", &[]);
    assert_eq!(cells(&got), vec![vec!["1", "a"], vec!["2", "b"], vec!["NULL", "c"]]);
    assert!(rows("SELECT unnest(ARRAY[]::int[]), unnest(ARRAY[]::int[])", &[]).is_empty());
    // SQLAlchemy's primary-key columns in key order, per row of a table.
    let got = rows(
        "SELECT id, unnest(a) AS attnum, generate_subscripts(a, 1) AS ord FROM t ORDER BY 1, 3",
        &[
            "CREATE TABLE t (id int, a int[])",
            "INSERT INTO t VALUES (1, '{5,6}'), (2, '{7}'), (3, '{}')",
        ],
    );
    assert_eq!(
        cells(&got),
        vec![vec!["1", "5", "1"], vec!["1", "6", "2"], vec!["2", "7", "1"]]
    );
    let (conn, mut d) = setup();
    assert_eq!(
        run(
            &conn,
            &mut d,
            "SELECT jsonb_each('{\"a\": 1}'::jsonb), unnest(ARRAY[1])"
        ),
        Err("0A000".to_owned())
    );
}

#[test]
fn catalogs_of_features_cambium_lacks_are_empty() {
    assert!(rows(
        "SELECT pg_catalog.pg_opclass.oid, pg_catalog.pg_opclass.opcname FROM pg_catalog.pg_opclass \
         WHERE NOT pg_catalog.pg_opclass.opcdefault",
        &[]
    )
    .is_empty());
    assert!(rows("SELECT schemaname, tablename, policyname AS name FROM pg_policies", &[]).is_empty());
}

#[test]
fn index_keys_are_vectors_in_key_order() {
    let setup_sql = [
        "CREATE TABLE t (a int, b int, c int, PRIMARY KEY (c, a))",
        "CREATE INDEX ti ON t (b, a)",
    ];
    let got = rows(
        "SELECT i.indkey, i.indkey[0], i.indkey[1] FROM pg_index i ORDER BY 1",
        &setup_sql,
    );
    assert_eq!(cells(&got), vec![vec!["2 1", "2", "1"], vec!["3 1", "3", "1"]]);
    // SQLAlchemy's inspector: a key's columns with their positions, from 0 as PostgreSQL numbers them.
    let got = rows(
        "SELECT unnest(pg_catalog.pg_index.indkey) AS attnum, \
         generate_subscripts(pg_catalog.pg_index.indkey, 1) AS ord FROM pg_catalog.pg_index ORDER BY 1, 2",
        &setup_sql,
    );
    assert_eq!(
        cells(&got),
        vec![vec!["1", "1"], vec!["1", "1"], vec!["2", "0"], vec!["3", "0"]]
    );
}

#[test]
fn pg_dump_reads_what_it_needs() {
    // A `name` is subscripted as characters from 0; options become rows; default ACLs as PostgreSQL 15
    // spells them (the differential test's 14_orm_catalog has them against PostgreSQL).
    let got = rows(
        "SELECT typname[0] = '_', acldefault('n', 10) IS NULL, acldefault('f', 6171) FROM pg_type \
         WHERE typname = '_int4'",
        &[],
    );
    assert_eq!(
        cells(&got),
        vec![vec![
            "t",
            "f",
            "{=X/pg_database_owner,pg_database_owner=X/pg_database_owner}"
        ]]
    );
    let got = rows(
        "SELECT option_name, option_value FROM pg_options_to_table(ARRAY['a=1', 'b=x=y'])",
        &[],
    );
    assert_eq!(cells(&got), vec![vec!["a", "1"], vec!["b", "x=y"]]);
    let (conn, mut d) = setup();
    ok(&conn, &mut d, "CREATE TABLE users (id int)");
    ok(&conn, &mut d, "BEGIN");
    ok(&conn, &mut d, "LOCK TABLE public.users IN ACCESS SHARE MODE");
    ok(&conn, &mut d, "COMMIT");
    assert_eq!(
        run(&conn, &mut d, "LOCK TABLE nosuch IN ACCESS SHARE MODE"),
        Err("42P01".to_owned())
    );
}
