//! Sequences through the dialect layer on a plain SQLite connection, run as the compute runs statements
//! (several steps in one savepoint, one step as a query): serial and identity keys take their values from
//! real sequences kept in the database, the sequence functions answer as PostgreSQL's do, and a sequence's
//! state is the database's (it moves with the transaction that moved it).

mod common;

use common::{ok, one, run, run_statement, setup};
use pgcompat::Dialect;

#[test]
fn serial_keys_take_their_sequence_values() {
    let (conn, mut d) = setup();
    ok(&conn, &mut d, "CREATE TABLE users (id serial PRIMARY KEY, email text)");
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO users (email) VALUES ('a') RETURNING id"),
        "1"
    );
    ok(
        &conn,
        &mut d,
        "INSERT INTO users (email) SELECT 'b' UNION ALL SELECT 'c'",
    );
    assert_eq!(one(&conn, &mut d, "SELECT currval('users_id_seq')"), "3");
    assert_eq!(
        one(&conn, &mut d, "SELECT pg_get_serial_sequence('users', 'id')"),
        "public.users_id_seq"
    );
    // An explicit id does not move the sequence: PostgreSQL's collision comes later, here too.
    ok(&conn, &mut d, "INSERT INTO users (id, email) VALUES (4, 'explicit')");
    assert!(run(&conn, &mut d, "INSERT INTO users (email) VALUES ('d')").is_err());
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO users (email) VALUES ('e') RETURNING id"),
        "5"
    );
    assert_eq!(
        one(
            &conn,
            &mut d,
            "SELECT setval(pg_get_serial_sequence('users', 'id'), 100)"
        ),
        "100"
    );
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO users DEFAULT VALUES RETURNING id").as_str(),
        "101"
    );
}

#[test]
fn sequence_functions_answer_as_postgresql() {
    let (conn, mut d) = setup();
    ok(&conn, &mut d, "CREATE SEQUENCE s INCREMENT BY -1 MINVALUE 1 MAXVALUE 2");
    assert_eq!(run(&conn, &mut d, "SELECT currval('s')"), Err("55000".to_owned()));
    assert_eq!(run(&conn, &mut d, "SELECT lastval()"), Err("55000".to_owned()));
    assert_eq!(
        run(&conn, &mut d, "SELECT nextval('s'), nextval('public.s'::regclass)"),
        Ok(vec![vec![Some("2".to_owned()), Some("1".to_owned())]])
    );
    assert_eq!(run(&conn, &mut d, "SELECT nextval('s')"), Err("2200H".to_owned()));
    assert_eq!(one(&conn, &mut d, "SELECT lastval()"), "1");
    assert_eq!(run(&conn, &mut d, "SELECT nextval('nothing')"), Err("42P01".to_owned()));
    assert_eq!(run(&conn, &mut d, "SELECT setval('s', 7)"), Err("22003".to_owned()));
    assert_eq!(
        run(&conn, &mut d, "SELECT last_value, is_called FROM s"),
        Ok(vec![vec![Some("1".to_owned()), Some("t".to_owned())]])
    );
    assert_eq!(run(&conn, &mut d, "CREATE SEQUENCE s"), Err("42P07".to_owned()));
    ok(&conn, &mut d, "CREATE SEQUENCE IF NOT EXISTS s");
    ok(&conn, &mut d, "DROP SEQUENCE s");
    assert_eq!(run(&conn, &mut d, "SELECT currval('s')"), Err("42P01".to_owned()));
}

#[test]
fn alter_sequence_applies_to_the_state_at_run_time() {
    let (conn, mut d) = setup();
    ok(&conn, &mut d, "CREATE SEQUENCE s");
    // Translated (and cached) before the values move; run after.
    let alter = "ALTER SEQUENCE s INCREMENT BY 10";
    d.translate(&conn, alter).expect("translates");
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "1");
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "2");
    ok(&conn, &mut d, alter);
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "12");
    ok(&conn, &mut d, "ALTER SEQUENCE s RESTART");
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "1");
}

#[test]
fn a_sequence_moves_with_its_transaction() {
    let (conn, mut d) = setup();
    ok(&conn, &mut d, "CREATE SEQUENCE s");
    conn.execute_batch("BEGIN").expect("begins");
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "1");
    conn.execute_batch("ROLLBACK").expect("rolls back");
    // Before the session settles, the database's state is the one the rollback restored.
    assert_eq!(
        run_statement(&conn, &mut d, "SELECT is_called FROM s"),
        Ok(vec![vec![Some("f".to_owned())]])
    );
    d.settle_sequences(&conn).expect("settles");
    // Taken values stay taken, as in PostgreSQL.
    assert_eq!(one(&conn, &mut d, "SELECT currval('s')"), "1");
    assert_eq!(
        run(&conn, &mut d, "SELECT last_value, is_called FROM s"),
        Ok(vec![vec![Some("1".to_owned()), Some("t".to_owned())]])
    );
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "2");
    // Several values taken in a rolled-back transaction stay taken.
    conn.execute_batch("BEGIN").expect("begins");
    ok(&conn, &mut d, "SELECT nextval('s') FROM generate_series(1, 3)");
    conn.execute_batch("ROLLBACK").expect("rolls back");
    d.settle_sequences(&conn).expect("settles");
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "6");
    // Another session reads the database's state.
    let mut other = Dialect::new(&conn, "shop", "cambium", 2).expect("dialect");
    ok(&conn, &mut other, "SELECT setval('s', 10)");
    assert_eq!(one(&conn, &mut d, "SELECT nextval('s')"), "11");
    // Calls of one statement see each other's writes, row by row, left to right.
    assert_eq!(
        run(
            &conn,
            &mut d,
            "SELECT nextval('s'), setval('s', 100), nextval('s') FROM generate_series(1, 2)"
        ),
        Ok(vec![
            vec![Some("12".to_owned()), Some("100".to_owned()), Some("101".to_owned())],
            vec![Some("102".to_owned()), Some("100".to_owned()), Some("101".to_owned())],
        ])
    );
}

#[test]
fn identity_columns_keep_their_rules() {
    let (conn, mut d) = setup();
    ok(
        &conn,
        &mut d,
        "CREATE TABLE items (id int GENERATED ALWAYS AS IDENTITY (START WITH 10) PRIMARY KEY, name text)",
    );
    assert_eq!(
        run(&conn, &mut d, "INSERT INTO items (id, name) VALUES (1, 'x')"),
        Err("428C9".to_owned())
    );
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO items (name) VALUES ('y') RETURNING id"),
        "10"
    );
    assert_eq!(
        one(
            &conn,
            &mut d,
            "INSERT INTO items (id, name) OVERRIDING SYSTEM VALUE VALUES (1, 'x') RETURNING id"
        ),
        "1"
    );
    assert_eq!(run(&conn, &mut d, "UPDATE items SET id = 5"), Err("428C9".to_owned()));
    assert_eq!(
        run(&conn, &mut d, "DROP SEQUENCE items_id_seq"),
        Err("2BP01".to_owned())
    );
    ok(&conn, &mut d, "DROP TABLE items");
    assert_eq!(
        run(&conn, &mut d, "SELECT nextval('items_id_seq')"),
        Err("42P01".to_owned())
    );
}

#[test]
fn an_inserts_sequence_columns_follow_schema_changes() {
    let (conn, mut d) = setup();
    ok(&conn, &mut d, "CREATE TABLE items (name text)");
    ok(&conn, &mut d, "INSERT INTO items (name) VALUES ('before')");
    // Made again with a serial column after INSERTs into it were translated: the next one fills it.
    ok(&conn, &mut d, "DROP TABLE items");
    ok(&conn, &mut d, "CREATE TABLE items (id serial, name text)");
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO items (name) VALUES ('after') RETURNING id"),
        "1"
    );
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO items (name) VALUES ('again') RETURNING id"),
        "2"
    );
    // A temp table of another name gets its own columns' defaults, and the table keeps its own.
    ok(&conn, &mut d, "CREATE TEMP TABLE staged (name text, n int DEFAULT 7)");
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO staged (name) VALUES ('temp') RETURNING n"),
        "7"
    );
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO items (name) VALUES ('third') RETURNING id"),
        "3"
    );
}

#[test]
fn a_temporary_table_may_not_hide_a_table_of_the_same_name_nor_the_reverse() {
    let (conn, mut d) = setup();
    ok(&conn, &mut d, "CREATE TABLE items (id serial, price numeric)");
    ok(&conn, &mut d, "INSERT INTO items (price) VALUES (1.5)");
    // The catalog keeps types and sequences by bare name: a hiding temp table would take the table's.
    for sql in [
        "CREATE TEMP TABLE items (name text)",
        "CREATE TEMPORARY TABLE IF NOT EXISTS items (name text)",
        "CREATE TEMP TABLE items AS SELECT 1 AS one",
        "CREATE TEMP TABLE items (LIKE items)",
        "CREATE TEMP TABLE items_id_seq (n int)",
    ] {
        // `CREATE … AS` finds the name taken before it makes anything (42P07): refused either way.
        let code = run(&conn, &mut d, sql).expect_err("refused");
        assert!(code == "0A000" || code == "42P07", "{sql}: {code}");
    }
    ok(&conn, &mut d, "CREATE TEMP TABLE scratch (n int)");
    assert_eq!(
        run(&conn, &mut d, "CREATE TABLE scratch (n int)").expect_err("refused"),
        "0A000",
        "a table named as a temporary table"
    );
    // Nothing changed: the table, its type and its sequence are as they were.
    assert_eq!(
        one(&conn, &mut d, "INSERT INTO items (price) VALUES (2.25) RETURNING id"),
        "2"
    );
    assert_eq!(
        one(&conn, &mut d, "SELECT pg_typeof(price) FROM items WHERE id = 2"),
        "numeric"
    );
    assert_eq!(one(&conn, &mut d, "SELECT count(*) FROM scratch"), "0");
}
