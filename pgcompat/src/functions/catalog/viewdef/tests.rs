//! Views made through the layer, their definitions read back with `pg_get_viewdef` and `pg_views`, checked
//! against what PostgreSQL 15 prints for the same views (from the differential corpus' recordings and
//! PostgreSQL's own `pg_dump` of them).

use rusqlite::Connection;

use crate::{Dialect, Translated};

/// Runs statements through the layer; the first column of the last one's first row.
fn run(conn: &Connection, dialect: &mut Dialect, sql: &str) -> Option<String> {
    let translated = dialect.translate(conn, sql).expect("translates");
    let Translated::Statements(list) = &*translated else {
        panic!("passed through: {sql}");
    };
    let mut last = None;
    for t in list {
        if t.steps.len() != 1 || t.columns.is_none() && !t.steps[0].starts_with("SELECT") {
            for step in &t.steps {
                conn.execute_batch(step).expect("step runs");
            }
            continue;
        }
        last = conn
            .query_row(&t.steps[0], [], |row| row.get::<_, Option<String>>(0))
            .expect("one row");
    }
    last
}

fn setup() -> (Connection, Dialect) {
    let conn = Connection::open_in_memory().expect("opens");
    let mut dialect = Dialect::new(&conn, "shop", "cambium", 1).expect("dialect");
    for sql in [
        "CREATE TABLE items (id serial PRIMARY KEY, name text, price numeric(10,2))",
        "CREATE TABLE customers (id serial PRIMARY KEY, email varchar(200))",
        "CREATE TABLE orders (id serial PRIMARY KEY, customer_id int NOT NULL)",
        "CREATE TABLE order_items (order_id int, quantity int, unit_price numeric(10,2))",
        "CREATE TABLE tickets (id serial PRIMARY KEY, title text, prio int, done boolean)",
    ] {
        run(&conn, &mut dialect, sql);
    }
    (conn, dialect)
}

fn definition(conn: &Connection, dialect: &mut Dialect, view: &str, pretty: bool) -> String {
    let sql = format!("SELECT pg_get_viewdef('{view}'::regclass, {pretty})");
    run(conn, dialect, &sql).expect("a definition")
}

#[test]
fn views_print_as_postgresql_15_prints_them() {
    let (conn, mut d) = setup();
    run(
        &conn,
        &mut d,
        "CREATE VIEW cheap_items AS SELECT id, name FROM items WHERE price < 10",
    );
    assert_eq!(
        definition(&conn, &mut d, "cheap_items", false),
        " SELECT items.id,\n    items.name\n   FROM items\n  WHERE (items.price < (10)::numeric);"
    );
    assert_eq!(
        definition(&conn, &mut d, "cheap_items", true),
        " SELECT items.id,\n    items.name\n   FROM items\n  WHERE items.price < 10::numeric;"
    );
    run(
        &conn,
        &mut d,
        "CREATE VIEW open_tickets AS SELECT t.id, t.title, t.prio FROM tickets t WHERE NOT t.done \
         ORDER BY t.prio DESC, t.id",
    );
    assert_eq!(
        definition(&conn, &mut d, "open_tickets", false),
        " SELECT t.id,\n    t.title,\n    t.prio\n   FROM tickets t\n  WHERE (NOT t.done)\n  ORDER BY t.prio DESC, t.id;"
    );
    run(
        &conn,
        &mut d,
        "CREATE VIEW order_totals AS SELECT o.id AS order_id, c.email, sum(i.quantity * i.unit_price) AS total \
         FROM orders o JOIN customers c ON c.id = o.customer_id JOIN order_items i ON i.order_id = o.id \
         GROUP BY o.id, c.email",
    );
    assert_eq!(
        definition(&conn, &mut d, "order_totals", false),
        " SELECT o.id AS order_id,\n    c.email,\n    sum(((i.quantity)::numeric * i.unit_price)) AS total\n   \
         FROM ((orders o\n     JOIN customers c ON ((c.id = o.customer_id)))\n     JOIN order_items i ON \
         ((i.order_id = o.id)))\n  GROUP BY o.id, c.email;"
    );
}

#[test]
fn literals_tests_and_case_print_with_their_types() {
    let (conn, mut d) = setup();
    run(
        &conn,
        &mut d,
        "CREATE VIEW v AS SELECT id, CASE WHEN done THEN 'y' ELSE 'n' END AS flag FROM tickets \
         WHERE title LIKE 'a%' AND prio IN (1, 2) AND id BETWEEN 1 AND 5 AND title IS NOT NULL",
    );
    assert_eq!(
        definition(&conn, &mut d, "v", false),
        " SELECT tickets.id,\n        CASE\n            WHEN tickets.done THEN 'y'::text\n            \
         ELSE 'n'::text\n        END AS flag\n   FROM tickets\n  WHERE ((tickets.title ~~ 'a%'::text) AND \
         (tickets.prio = ANY (ARRAY[1, 2])) AND ((tickets.id >= 1) AND (tickets.id <= 5)) AND \
         (tickets.title IS NOT NULL));"
    );
    // varchar has no operators of its own: PostgreSQL compares it as text.
    run(
        &conn,
        &mut d,
        "CREATE VIEW w AS SELECT email FROM customers WHERE email = 'a@b'",
    );
    assert_eq!(
        definition(&conn, &mut d, "w", false),
        " SELECT customers.email\n   FROM customers\n  WHERE ((customers.email)::text = 'a@b'::text);"
    );
}

#[test]
fn relations_off_the_path_are_qualified() {
    let (conn, mut d) = setup();
    run(&conn, &mut d, "CREATE VIEW all_items AS SELECT * FROM items");
    d.state()
        .update_settings(|s| s.set("search_path", Some("''"), crate::settings::Scope::Session))
        .expect("sets");
    assert_eq!(
        definition(&conn, &mut d, "public.all_items", false),
        " SELECT items.id,\n    items.name,\n    items.price\n   FROM public.items;"
    );
}

#[test]
fn a_view_whose_text_sqlite_rewrote_shows_that_text() {
    let (conn, mut d) = setup();
    run(&conn, &mut d, "CREATE VIEW named AS SELECT name FROM items");
    run(&conn, &mut d, "ALTER TABLE items RENAME TO goods");
    let shown = definition(&conn, &mut d, "named", false);
    assert!(shown.contains("goods"), "{shown}");
}
