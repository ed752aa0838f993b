//! ALTER TABLE forms that rebuild a table others reference, inside a transaction block as migration tools
//! run them (Django's `contenttypes.0002` drops a NOT NULL of a table `auth_permission` references): the
//! rows of both tables survive, the references stay enforced, and `ON DELETE` actions never run.

mod common;

use common::{ok, one, run, setup};
use pgcompat::{Dialect, Translated};
use rusqlite::Connection;

fn parent_and_child(on_delete: &str) -> (Connection, Dialect) {
    let (conn, mut d) = setup();
    conn.execute_batch("PRAGMA foreign_keys = ON").expect("foreign keys on");
    ok(
        &conn,
        &mut d,
        "CREATE TABLE kinds (id serial PRIMARY KEY, app text NOT NULL, name text NOT NULL)",
    );
    ok(
        &conn,
        &mut d,
        &format!(
            "CREATE TABLE perms (id serial PRIMARY KEY, kind_id integer NOT NULL REFERENCES kinds (id) {on_delete} \
             DEFERRABLE INITIALLY DEFERRED, code text)"
        ),
    );
    ok(
        &conn,
        &mut d,
        "INSERT INTO kinds (app, name) VALUES ('auth', 'user'), ('auth', 'group')",
    );
    ok(
        &conn,
        &mut d,
        "INSERT INTO perms (kind_id, code) VALUES (1, 'add'), (1, 'change'), (2, 'add')",
    );
    (conn, d)
}

fn foreign_keys_off(conn: &Connection, d: &mut Dialect, sql: &str) -> bool {
    let translated = d.translate(conn, sql).expect("translates");
    let Translated::Statements(list) = &*translated else {
        panic!("passed through: {sql}");
    };
    list.iter().any(|t| t.foreign_keys_off)
}

#[test]
fn a_referenced_table_is_rebuilt_inside_a_transaction_block() {
    let (conn, mut d) = parent_and_child("");
    let alter = "ALTER TABLE kinds ALTER COLUMN name DROP NOT NULL";
    assert!(
        !foreign_keys_off(&conn, &mut d, alter),
        "NO ACTION keys need no foreign keys off"
    );
    ok(&conn, &mut d, "BEGIN");
    ok(&conn, &mut d, alter);
    ok(&conn, &mut d, "INSERT INTO kinds (app, name) VALUES ('admin', NULL)");
    ok(&conn, &mut d, "COMMIT");
    assert_eq!(one(&conn, &mut d, "SELECT count(*) FROM perms"), "3");
    assert_eq!(
        one(
            &conn,
            &mut d,
            "SELECT string_agg(app || '.' || coalesce(name, '-'), ',' ORDER BY id) FROM kinds"
        ),
        "auth.user,auth.group,admin.-"
    );
    assert_eq!(
        one(
            &conn,
            &mut d,
            "SELECT is_nullable FROM information_schema.columns WHERE table_name = 'kinds' AND column_name = 'name'"
        ),
        "YES"
    );
    // The reference is still enforced, against the new table.
    ok(&conn, &mut d, "BEGIN");
    ok(&conn, &mut d, "DELETE FROM kinds WHERE id = 1");
    assert!(
        run(&conn, &mut d, "COMMIT").is_err(),
        "a deleted referenced key fails the commit"
    );
    ok(&conn, &mut d, "ROLLBACK");
    assert_eq!(one(&conn, &mut d, "SELECT count(*) FROM kinds"), "3");
    assert!(run(&conn, &mut d, "INSERT INTO perms (kind_id, code) VALUES (99, 'x')").is_err());
}

#[test]
fn a_failed_rebuild_inside_a_block_leaves_both_tables() {
    let (conn, mut d) = parent_and_child("");
    // A constraint the rows break: the copy fails, and the rollback leaves both tables as they were.
    ok(&conn, &mut d, "BEGIN");
    assert!(run(&conn, &mut d, "ALTER TABLE kinds ADD CONSTRAINT low CHECK (id < 2)").is_err());
    ok(&conn, &mut d, "ROLLBACK");
    assert_eq!(one(&conn, &mut d, "SELECT count(*) FROM kinds"), "2");
    assert_eq!(one(&conn, &mut d, "SELECT count(*) FROM perms"), "3");
}

#[test]
fn a_table_referenced_with_an_on_delete_action_needs_foreign_keys_off() {
    for action in ["ON DELETE CASCADE", "ON DELETE SET NULL", "ON DELETE RESTRICT"] {
        let (conn, mut d) = parent_and_child(action);
        let alter = "ALTER TABLE kinds ALTER COLUMN name DROP NOT NULL";
        assert!(
            foreign_keys_off(&conn, &mut d, alter),
            "{action}: dropping the old table would run it"
        );
    }
}
