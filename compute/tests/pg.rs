//! The PostgreSQL wire protocol end to end: an in-process server on 127.0.0.1:0 over SQLite files in a
//! temporary directory, driven by `tokio-postgres` (and by `psql` when it is installed). Proves command
//! tags and row counts, simple multi-statement queries, prepared statements with typed parameters,
//! transactions, SQLSTATEs of errors with the session usable afterwards, and password refusal.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use compute::pg::{serve, FileSessionFactory};
use tokio::sync::oneshot;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

struct Server {
    addr: SocketAddr,
    _dir: tempfile::TempDir,
    _stop: oneshot::Sender<()>,
}

async fn start() -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let passwords = HashMap::from([("alice".to_owned(), "secret".to_owned())]);
    let factory = Arc::new(FileSessionFactory::new(dir.path(), passwords));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(listener, factory, async move {
        let _ = stopped.await;
    }));
    Server {
        addr,
        _dir: dir,
        _stop: stop,
    }
}

async fn connect_as(server: &Server, password: &str) -> Result<Client, tokio_postgres::Error> {
    let config = format!(
        "host=127.0.0.1 port={} user=alice password={password} dbname=test",
        server.addr.port()
    );
    let (client, connection) = tokio_postgres::connect(&config, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn connect(server: &Server) -> Client {
    connect_as(server, "secret").await.expect("connect")
}

/// The row counts of a simple query's command tags, in order.
async fn tags(client: &Client, sql: &str) -> Vec<u64> {
    client
        .simple_query(sql)
        .await
        .expect("simple query")
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(n),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn row_counts_of_writes() {
    let server = start().await;
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT)")
        .await
        .expect("create");
    let n = client
        .execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", &[])
        .await
        .expect("insert");
    assert_eq!(n, 3);
    let n = client
        .execute("UPDATE t SET name = 'z' WHERE id >= 2", &[])
        .await
        .expect("update");
    assert_eq!(n, 2);
    let n = client.execute("DELETE FROM t WHERE id = 1", &[]).await.expect("delete");
    assert_eq!(n, 1);
    let rows = client
        .query("SELECT id, name FROM t ORDER BY id", &[])
        .await
        .expect("select");
    let got: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![(2, "z".to_owned()), (3, "z".to_owned())]);
}

#[tokio::test]
async fn simple_multi_statement_query() {
    let server = start().await;
    let client = connect(&server).await;
    let counts = tags(
        &client,
        "CREATE TABLE m (x BIGINT); INSERT INTO m VALUES (1), (2); UPDATE m SET x = x + 1; \
         SELECT x FROM m ORDER BY x; DELETE FROM m",
    )
    .await;
    assert_eq!(counts, vec![0, 2, 2, 2, 2]);
    let messages = client
        .simple_query("SELECT 1 AS one, 'two' AS two, NULL AS three")
        .await
        .expect("select");
    let row = messages
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })
        .expect("a row");
    assert_eq!(row.get(0), Some("1"));
    assert_eq!(row.get(1), Some("two"));
    assert_eq!(row.get(2), None);
}

#[tokio::test]
async fn prepared_statements_with_parameters() {
    let server = start().await;
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE p (i BIGINT, f DOUBLE PRECISION, s TEXT, b BLOB)")
        .await
        .expect("create");
    let insert = client
        .prepare_typed(
            "INSERT INTO p VALUES ($1, $2, $3, $4)",
            &[Type::INT8, Type::FLOAT8, Type::TEXT, Type::BYTEA],
        )
        .await
        .expect("prepare");
    let blob: &[u8] = &[0, 1, 255];
    client
        .execute(&insert, &[&7i64, &2.5f64, &"seven", &blob])
        .await
        .expect("insert");
    client
        .execute(
            &insert,
            &[&None::<i64>, &None::<f64>, &None::<String>, &None::<Vec<u8>>],
        )
        .await
        .expect("insert nulls");
    // Parameters out of order, each typed by the column it is compared with (as PostgreSQL infers them).
    let rows = client
        .query("SELECT i, f, s, b FROM p WHERE s = $2 AND i = $1", &[&7i64, &"seven"])
        .await
        .expect("select");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i64>(0), 7);
    assert_eq!(rows[0].get::<_, f64>(1), 2.5);
    assert_eq!(rows[0].get::<_, &str>(2), "seven");
    assert_eq!(rows[0].get::<_, Vec<u8>>(3), blob.to_vec());
    let rows = client
        .query("SELECT i, f, s, b FROM p WHERE i IS NULL", &[])
        .await
        .expect("select nulls");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, Option<i64>>(0), None);
    assert_eq!(rows[0].get::<_, Option<f64>>(1), None);
    assert_eq!(rows[0].get::<_, Option<&str>>(2), None);
    assert_eq!(rows[0].get::<_, Option<Vec<u8>>>(3), None);
    // Expression columns are typed as PostgreSQL types them (count is bigint, a decimal literal numeric).
    let row = client
        .query_one("SELECT count(*), 1.5::float8, 'x' FROM p", &[])
        .await
        .expect("expressions");
    assert_eq!(row.get::<_, i64>(0), 2);
    assert_eq!(row.get::<_, f64>(1), 1.5);
    assert_eq!(row.get::<_, &str>(2), "x");
    // A bare parameter column has the type the client gave the parameter (psycopg's `SELECT %s`), text when
    // it gave none; bytes come back as the same bytes.
    let echo = client
        .prepare_typed(
            "SELECT $1, $2 AS b, $3, $4",
            &[Type::INT8, Type::BYTEA, Type::BOOL, Type::UNKNOWN],
        )
        .await
        .expect("prepare echo");
    assert_eq!(
        echo.columns().iter().map(|c| c.type_().clone()).collect::<Vec<_>>(),
        vec![Type::INT8, Type::BYTEA, Type::BOOL, Type::TEXT]
    );
    let bytes: &[u8] = &[0, 1, 39, 92, 255];
    let row = client
        .query_one(&echo, &[&1_099_511_627_779i64, &bytes, &true, &"t"])
        .await
        .expect("echo");
    assert_eq!(row.get::<_, i64>(0), 1_099_511_627_779);
    assert_eq!(row.get::<_, Vec<u8>>(1), bytes.to_vec());
    assert!(row.get::<_, bool>(2));
    assert_eq!(row.get::<_, &str>(3), "t");
}

#[tokio::test]
async fn transactions_commit_and_roll_back() {
    let server = start().await;
    let mut client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE tx (x BIGINT)")
        .await
        .expect("create");
    client
        .batch_execute("BEGIN; INSERT INTO tx VALUES (1); ROLLBACK")
        .await
        .expect("rolled back");
    client
        .batch_execute("BEGIN; INSERT INTO tx VALUES (2); COMMIT")
        .await
        .expect("committed");
    let t = client.transaction().await.expect("begin");
    t.execute("INSERT INTO tx VALUES (3)", &[]).await.expect("insert");
    t.rollback().await.expect("rollback");
    let rows = client.query("SELECT x FROM tx", &[]).await.expect("select");
    let got: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, vec![2]);
    // A block's first statement writes what it reads from the catalog, in a session that has not read the
    // catalog yet: the block starts over as the writer and the catalog views it made come back.
    let fresh = connect(&server).await;
    fresh.simple_query("BEGIN").await.expect("begin");
    fresh
        .simple_query("INSERT INTO tx SELECT count(*) FROM pg_catalog.pg_class WHERE relname = 'tx'")
        .await
        .expect("insert from the catalog");
    fresh.simple_query("COMMIT").await.expect("commit");
    let rows = client.query("SELECT x FROM tx ORDER BY x", &[]).await.expect("select");
    let got: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, vec![1, 2]);
}

#[tokio::test]
async fn errors_carry_sqlstates_and_the_session_survives() {
    let server = start().await;
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE e (id BIGINT PRIMARY KEY, v TEXT NOT NULL)")
        .await
        .expect("create");
    client
        .execute("INSERT INTO e VALUES (1, 'a')", &[])
        .await
        .expect("insert");
    let cases: [(&str, &SqlState); 4] = [
        ("SELEC 1", &SqlState::SYNTAX_ERROR),
        ("SELECT * FROM missing", &SqlState::UNDEFINED_TABLE),
        ("INSERT INTO e VALUES (1, 'b')", &SqlState::UNIQUE_VIOLATION),
        ("INSERT INTO e VALUES (2, NULL)", &SqlState::NOT_NULL_VIOLATION),
    ];
    for (sql, code) in cases {
        let simple = client.batch_execute(sql).await.expect_err(sql);
        assert_eq!(simple.code(), Some(code), "simple {sql}: {simple:?}");
        let extended = client.execute(sql, &[]).await.expect_err(sql);
        assert_eq!(extended.code(), Some(code), "extended {sql}: {extended:?}");
        let one = client.query_one("SELECT 1", &[]).await.expect("usable");
        assert_eq!(one.get::<_, i32>(0), 1, "integer literals are int4, as in PostgreSQL");
    }
    // A multi-statement query runs up to its error and no further, and is one transaction (PostgreSQL's
    // implicit block): what it did before the error is undone.
    let error = client
        .batch_execute("INSERT INTO e VALUES (5, 'x'); SELEC; INSERT INTO e VALUES (6, 'y')")
        .await
        .expect_err("syntax");
    assert_eq!(error.code(), Some(&SqlState::SYNTAX_ERROR));
    let ids: Vec<i64> = client
        .query("SELECT id FROM e ORDER BY id", &[])
        .await
        .expect("select")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, vec![1]);
}

#[tokio::test]
async fn failed_transaction_refuses_until_rollback() {
    let server = start().await;
    let client = connect(&server).await;
    // (Two texts: in one, the BEGIN would make the CREATE part of the block rolled back below.)
    client
        .batch_execute("CREATE TABLE f (id BIGINT PRIMARY KEY)")
        .await
        .expect("create");
    client
        .batch_execute("BEGIN; INSERT INTO f VALUES (1)")
        .await
        .expect("begin");
    let error = client
        .batch_execute("INSERT INTO f VALUES (1)")
        .await
        .expect_err("duplicate");
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION));
    let error = client.batch_execute("SELECT 1").await.expect_err("aborted");
    assert_eq!(error.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    let error = client.query("SELECT 1", &[]).await.expect_err("aborted, extended");
    assert_eq!(error.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    // COMMIT of a failed transaction rolls it back, as in PostgreSQL.
    client.batch_execute("COMMIT").await.expect("commit");
    let count: i64 = client
        .query_one("SELECT count(*) FROM f", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 0);
}

#[tokio::test]
async fn wrong_password_is_refused() {
    let server = start().await;
    let Err(error) = connect_as(&server, "wrong").await else {
        panic!("a wrong password must be refused");
    };
    assert_eq!(error.code(), Some(&SqlState::INVALID_PASSWORD), "{error:?}");
    // The server still serves the right password afterwards.
    let client = connect(&server).await;
    client.simple_query("SELECT 1").await.expect("select");
}

#[tokio::test]
async fn invalid_database_name_is_refused() {
    let server = start().await;
    let config = format!(
        "host=127.0.0.1 port={} user=alice password=secret dbname=../x",
        server.addr.port()
    );
    let Err(error) = tokio_postgres::connect(&config, NoTls).await else {
        panic!("an invalid database name must be refused");
    };
    assert_eq!(error.code(), Some(&SqlState::INVALID_CATALOG_NAME), "{error:?}");
}

#[tokio::test]
async fn psql_selects_one() {
    if std::process::Command::new("psql").arg("--version").output().is_err() {
        eprintln!("psql not installed: skipped");
        return;
    }
    let server = start().await;
    let url = format!("postgresql://alice:secret@127.0.0.1:{}/test", server.addr.port());
    let output = tokio::process::Command::new("psql")
        .args([url.as_str(), "-X", "-A", "-t", "-c", "select 1"])
        .output()
        .await
        .expect("run psql");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.trim(), "1");
}

#[tokio::test]
async fn explain_analyze_runs_the_statement_with_its_parameters() {
    let server = start().await;
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE x (id BIGINT PRIMARY KEY, v TEXT); INSERT INTO x VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        )
        .await
        .expect("setup");
    // Extended protocol, a parameter: the plan, the rows the statement gave on its first line, the time last.
    let lines: Vec<String> = client
        .query("EXPLAIN ANALYZE SELECT * FROM x WHERE id < $1", &[&3i64])
        .await
        .expect("explain analyze")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(lines[0].ends_with("(actual rows=2 loops=1)"), "{lines:?}");
    assert!(
        lines.last().is_some_and(|l| l.starts_with("Execution Time: ")),
        "{lines:?}"
    );
    // An analyzed UPDATE updates, as in PostgreSQL.
    let lines = client
        .query("EXPLAIN ANALYZE UPDATE x SET v = $1 WHERE id >= $2", &[&"z", &2i64])
        .await
        .expect("explain analyze update");
    assert!(lines[0].get::<_, String>(0).ends_with("(actual rows=2 loops=1)"));
    let updated: i64 = client
        .query_one("SELECT count(*) FROM x WHERE v = 'z'", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(updated, 2);
    // A plain EXPLAIN with a parameter: described with it, planned without running.
    let plan = client
        .query("EXPLAIN SELECT * FROM x WHERE id = $1", &[&1i64])
        .await
        .expect("explain");
    assert!(!plan.is_empty());
}

/// A connection whose NOTICE and WARNING messages are collected, as (severity, SQLSTATE, message).
async fn connect_with_notices(
    server: &Server,
) -> (
    Client,
    futures::channel::mpsc::UnboundedReceiver<(String, String, String)>,
) {
    use futures::StreamExt;
    let config = format!(
        "host=127.0.0.1 port={} user=alice password=secret dbname=test",
        server.addr.port()
    );
    let (client, mut connection) = tokio_postgres::connect(&config, NoTls).await.expect("connect");
    let (sender, received) = futures::channel::mpsc::unbounded();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notice(notice) = message {
                let _ = sender.unbounded_send((
                    notice.severity().to_owned(),
                    notice.code().code().to_owned(),
                    notice.message().to_owned(),
                ));
            }
        }
    });
    (client, received)
}

/// The notices that arrived so far (the query that sent them has answered, so they came before it).
fn notices_so_far(
    received: &mut futures::channel::mpsc::UnboundedReceiver<(String, String, String)>,
) -> Vec<(String, String, String)> {
    let mut got = Vec::new();
    while let Ok(notice) = received.try_recv() {
        got.push(notice);
    }
    got
}

#[tokio::test]
async fn notices_and_warnings_reach_the_client_as_postgresql_sends_them() {
    let server = start().await;
    let (client, mut received) = connect_with_notices(&server).await;
    let notice = |message: &str| ("NOTICE".to_owned(), "00000".to_owned(), message.to_owned());
    let warning = |code: &str, message: &str| ("WARNING".to_owned(), code.to_owned(), message.to_owned());
    client
        .batch_execute("DROP TABLE IF EXISTS nothere")
        .await
        .expect("drop");
    client.batch_execute("CREATE TABLE t (id int)").await.expect("create");
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS t (id int)")
        .await
        .expect("create again");
    client
        .batch_execute("DROP INDEX IF EXISTS nix; DROP TABLE IF EXISTS t, gone")
        .await
        .expect("drops");
    assert_eq!(
        notices_so_far(&mut received),
        [
            notice("table \"nothere\" does not exist, skipping"),
            notice("relation \"t\" already exists, skipping"),
            notice("index \"nix\" does not exist, skipping"),
            notice("table \"gone\" does not exist, skipping"),
        ]
    );
    // The same text again, with the table gone now: translated again (DDL is never cached), so it notices.
    client
        .batch_execute("DROP TABLE IF EXISTS t, gone")
        .await
        .expect("drops again");
    assert_eq!(
        notices_so_far(&mut received),
        [
            notice("table \"t\" does not exist, skipping"),
            notice("table \"gone\" does not exist, skipping")
        ]
    );
    // An ADD COLUMN IF NOT EXISTS of a column the table has (a generated one too), and plpgsql, which every
    // database has.
    client
        .batch_execute(
            "CREATE TABLE g (a int, b int GENERATED ALWAYS AS (a * 2) STORED); \
             ALTER TABLE g ADD COLUMN IF NOT EXISTS b int; ALTER TABLE g ADD COLUMN IF NOT EXISTS c int; \
             ALTER TABLE g DROP COLUMN IF EXISTS nothere; \
             CREATE EXTENSION IF NOT EXISTS plpgsql; CREATE EXTENSION IF NOT EXISTS pgcrypto",
        )
        .await
        .expect("add columns, extensions");
    assert_eq!(
        notices_so_far(&mut received),
        [
            notice("column \"b\" of relation \"g\" already exists, skipping"),
            notice("column \"nothere\" of relation \"g\" does not exist, skipping"),
            notice("extension \"plpgsql\" already exists, skipping"),
        ]
    );
    client.batch_execute("COMMIT").await.expect("commit outside a block");
    client.batch_execute("BEGIN").await.expect("begin");
    client.batch_execute("BEGIN").await.expect("begin again");
    client.batch_execute("ROLLBACK").await.expect("rollback");
    client
        .batch_execute("SELECT 1; COMMIT")
        .await
        .expect("commit of an implicit block");
    assert_eq!(
        notices_so_far(&mut received),
        [
            warning("25P01", "there is no transaction in progress"),
            warning("25001", "there is already a transaction in progress"),
            warning("25P01", "there is no transaction in progress"),
        ]
    );
    // Through the extended protocol too.
    client
        .execute("DROP TABLE IF EXISTS nothere", &[])
        .await
        .expect("drop, extended");
    assert_eq!(
        notices_so_far(&mut received),
        [notice("table \"nothere\" does not exist, skipping")]
    );
    // `client_min_messages` filters them: `warning` keeps warnings only, `error` none.
    client
        .batch_execute("SET client_min_messages = warning")
        .await
        .expect("set");
    client
        .batch_execute("DROP TABLE IF EXISTS nothere; COMMIT")
        .await
        .expect("quiet drop");
    assert_eq!(
        notices_so_far(&mut received),
        [warning("25P01", "there is no transaction in progress")]
    );
    client
        .batch_execute("SET client_min_messages = error")
        .await
        .expect("set");
    client
        .batch_execute("DROP TABLE IF EXISTS nothere; COMMIT")
        .await
        .expect("silent");
    assert_eq!(notices_so_far(&mut received), []);
}

/// A result column's name, and the (table, column) names its RowDescription points at.
type Origin = (String, Option<(String, String)>);

/// Each result column of `sql` as a Describe gives it: its name and, when the RowDescription names a table
/// column, that table's `pg_class.relname` and the column's `pg_attribute.attname` (looked up by the OID and
/// number it carries, so they must agree with the catalog).
async fn described_origins(client: &Client, sql: &str) -> Vec<Origin> {
    let statement = client.prepare(sql).await.expect("prepare");
    let mut out = Vec::new();
    for column in statement.columns() {
        let origin = match (column.table_oid(), column.column_id()) {
            (Some(table), Some(number)) if table != 0 => {
                assert!(
                    number > 0,
                    "{sql}: column {} names table {table} with number {number}",
                    column.name()
                );
                let row = client
                    .query_one(
                        "SELECT c.relname::text, a.attname::text FROM pg_class c \
                         JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.oid = $1 AND a.attnum = $2",
                        &[&table, &number],
                    )
                    .await
                    .expect("the table OID and column number are in the catalog");
                Some((row.get(0), row.get(1)))
            }
            (table, number) => {
                assert!(
                    table.unwrap_or(0) == 0 && number.unwrap_or(0) == 0,
                    "{sql}: column {} has a number without a table",
                    column.name()
                );
                None
            }
        };
        out.push((column.name().to_owned(), origin));
    }
    out
}

#[tokio::test]
async fn row_descriptions_name_the_table_column_as_postgresql_does() {
    let server = start().await;
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE rd_a (id serial PRIMARY KEY, name varchar(20) NOT NULL, price numeric(10,2)); \
             CREATE TABLE rd_b (id int PRIMARY KEY, note text, qty smallint); \
             CREATE VIEW rd_v AS SELECT id, name FROM rd_a; \
             INSERT INTO rd_a (name, price) VALUES ('x', 1.5); INSERT INTO rd_b VALUES (1, 'n', 2)",
        )
        .await
        .expect("setup");
    let of = |table: &str, column: &str| Some((table.to_owned(), column.to_owned()));
    let named = |pairs: &[(&str, Option<(String, String)>)]| -> Vec<Origin> {
        pairs.iter().map(|(n, o)| ((*n).to_owned(), o.clone())).collect()
    };
    // What PostgreSQL 15 sends for each (checked with node-postgres against both servers).
    let cases: Vec<(&str, Vec<Origin>)> = vec![
        (
            "SELECT * FROM rd_a",
            named(&[
                ("id", of("rd_a", "id")),
                ("name", of("rd_a", "name")),
                ("price", of("rd_a", "price")),
            ]),
        ),
        (
            "SELECT b.qty, a.name, a.id + 1 AS next FROM rd_a a JOIN rd_b b ON b.id = a.id",
            named(&[("qty", of("rd_b", "qty")), ("name", of("rd_a", "name")), ("next", None)]),
        ),
        (
            "SELECT s.name FROM (SELECT name FROM rd_a) s",
            named(&[("name", of("rd_a", "name"))]),
        ),
        (
            "WITH q AS (SELECT price FROM rd_a) SELECT price FROM q",
            named(&[("price", of("rd_a", "price"))]),
        ),
        ("SELECT id FROM rd_a UNION SELECT id FROM rd_b", named(&[("id", None)])),
        ("SELECT (SELECT name FROM rd_a LIMIT 1) AS n", named(&[("n", None)])),
        (
            "SELECT max(name) AS m, count(*) AS c FROM rd_a",
            named(&[("m", None), ("c", None)]),
        ),
        (
            "INSERT INTO rd_b VALUES (2, 'm', 3) RETURNING note, qty * 2 AS twice",
            named(&[("note", of("rd_b", "note")), ("twice", None)]),
        ),
        (
            "UPDATE rd_a SET price = 2 RETURNING price",
            named(&[("price", of("rd_a", "price"))]),
        ),
        // PostgreSQL names the view's column here; Cambium names none (SQLite traces it to the table).
        ("SELECT name FROM rd_v", named(&[("name", None)])),
        // PostgreSQL names pg_class's column; Cambium's catalog relations are views: none.
        (
            "SELECT relname FROM pg_class WHERE relname = 'rd_a'",
            named(&[("relname", None)]),
        ),
    ];
    for (sql, expected) in cases {
        assert_eq!(described_origins(&client, sql).await, expected, "{sql}");
    }
    // A TEMP table is in no catalog relation here: no origin, never another table's.
    client
        .batch_execute("CREATE TEMP TABLE rd_t (z int)")
        .await
        .expect("temp table");
    assert_eq!(
        described_origins(&client, "SELECT z FROM rd_t").await,
        named(&[("z", None)])
    );
    // A table made again gets a new OID, and the descriptions follow it.
    let before = client.prepare("SELECT qty FROM rd_b").await.expect("prepare");
    client
        .batch_execute("DROP TABLE rd_b; CREATE TABLE rd_b (qty smallint, id int)")
        .await
        .expect("remake");
    let after = client.prepare("SELECT qty FROM rd_b").await.expect("prepare");
    assert_ne!(before.columns()[0].table_oid(), after.columns()[0].table_oid());
    assert_eq!(
        described_origins(&client, "SELECT qty FROM rd_b").await,
        named(&[("qty", of("rd_b", "qty"))])
    );
    assert_eq!(after.columns()[0].column_id(), Some(1));
}

#[tokio::test]
async fn a_statement_of_a_text_reads_what_one_before_it_made() {
    let server = start().await;
    let client = connect(&server).await;
    // The ALTER needs the table's definition, which exists only once the CREATE ran.
    client
        .batch_execute(
            "CREATE TABLE made (a int); ALTER TABLE made ADD COLUMN b int DEFAULT 7; INSERT INTO made (a) VALUES (1)",
        )
        .await
        .expect("one text");
    let row = client.query_one("SELECT a, b FROM made", &[]).await.expect("read");
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i32>(1)), (1, 7));
    // An error in a later statement rolls the whole text back, as PostgreSQL's implicit block does.
    let error = client
        .batch_execute("CREATE TABLE gone (a int); ALTER TABLE gone ADD COLUMN b int; SELECT nosuch FROM gone")
        .await
        .expect_err("the last statement fails");
    assert_eq!(error.code(), Some(&SqlState::UNDEFINED_COLUMN));
    let missing = client
        .query("SELECT 1 FROM gone", &[])
        .await
        .expect_err("the text was rolled back");
    assert_eq!(missing.code(), Some(&SqlState::UNDEFINED_TABLE));
}

#[tokio::test]
async fn create_table_as_is_tagged_with_its_row_count() {
    let server = start().await;
    let client = connect(&server).await;
    assert_eq!(
        tags(&client, "CREATE TABLE ca AS SELECT 1 AS x UNION SELECT 2").await,
        [2]
    );
    assert_eq!(
        tags(&client, "CREATE TABLE cb AS SELECT x FROM ca WHERE x > 5").await,
        [0]
    );
    assert_eq!(
        tags(&client, "CREATE MATERIALIZED VIEW cm AS SELECT x FROM ca").await,
        [2]
    );
}
