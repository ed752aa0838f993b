//! SQL over the PostgreSQL wire protocol lands in the page store: a `tokio-postgres` client talks to the pg
//! front, whose sessions are VFS connections on a registered database over a `MemoryPageStore`. Each
//! committed statement is one commit of the store; a fresh connection reads it back; an unregistered database
//! name is refused rather than opened as a local file.

mod common;

use common::VfsServer;
use tokio_postgres::types::Type;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_over_the_wire_commits_to_the_page_store() {
    let served = VfsServer::start("wire_db").await;
    let (port, store) = (served.port, served.store.clone());

    let connect = |database: &str| format!("host=127.0.0.1 port={port} user=app password=secret dbname={database}");
    let (client, connection) = tokio_postgres::connect(&connect("wire_db"), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT)")
        .await
        .expect("create");
    let before = store.commit_count();
    // Parameters are typed by the client here: the server describes untyped `$N` as text for now.
    let insert = client
        .prepare_typed(
            "INSERT INTO t (id, name) VALUES ($1, $2), ($3, $4)",
            &[Type::INT8, Type::TEXT, Type::INT8, Type::TEXT],
        )
        .await
        .expect("prepare");
    let inserted = client
        .execute(&insert, &[&1i64, &"one", &2i64, &"two"])
        .await
        .expect("insert");
    assert_eq!(inserted, 2);
    assert_eq!(
        store.commit_count(),
        before + 1,
        "one committed statement, one commit of the store"
    );
    drop(client);

    let (client, connection) = tokio_postgres::connect(&connect("wire_db"), tokio_postgres::NoTls)
        .await
        .expect("reconnect");
    tokio::spawn(connection);
    let rows = client
        .query("SELECT name FROM t ORDER BY id", &[])
        .await
        .expect("select");
    let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(names, ["one", "two"]);

    let refused = tokio_postgres::connect(&connect("not_registered"), tokio_postgres::NoTls).await;
    assert!(refused.is_err(), "an unregistered database must not open");
    assert!(
        !std::path::Path::new("not_registered").exists(),
        "no local file was created"
    );

    served.stop().await;
}

/// A session skips reading the schema version while its store's latest commit has not moved, and answers a
/// Describe from its last answer while the translation is the same: neither may hide a schema change, made by
/// another session or by its own transaction that rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_changes_are_seen_by_the_next_statement_and_describe() {
    let served = VfsServer::start("schema_db").await;
    let config = format!(
        "host=127.0.0.1 port={} user=app password=secret dbname=schema_db",
        served.port
    );
    let (a, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls)
        .await
        .expect("connect a");
    tokio::spawn(connection);
    let (b, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls)
        .await
        .expect("connect b");
    tokio::spawn(connection);
    let column_types = |statement: &tokio_postgres::Statement| {
        statement
            .columns()
            .iter()
            .map(|c| (c.name().to_owned(), c.type_().clone()))
            .collect::<Vec<_>>()
    };

    a.batch_execute("CREATE TABLE t (a int4); INSERT INTO t VALUES (1)")
        .await
        .expect("create");
    let select = a.prepare("SELECT * FROM t").await.expect("prepare");
    assert_eq!(column_types(&select), [("a".to_owned(), Type::INT4)]);
    // Described twice, the second from the session's cache.
    let select = a.prepare("SELECT * FROM t").await.expect("prepare again");
    assert_eq!(column_types(&select), [("a".to_owned(), Type::INT4)]);
    assert_eq!(a.query(&select, &[]).await.expect("query").len(), 1);

    b.batch_execute("ALTER TABLE t ADD COLUMN at timestamptz")
        .await
        .expect("alter");
    let select = a.prepare("SELECT * FROM t").await.expect("prepare after the change");
    assert_eq!(
        column_types(&select),
        [("a".to_owned(), Type::INT4), ("at".to_owned(), Type::TIMESTAMPTZ)],
        "another session's column, typed from the catalog"
    );

    // A's own schema change, rolled back: nothing was committed, yet the catalog it read inside must go.
    a.batch_execute("BEGIN; ALTER TABLE t ADD COLUMN flag bool; SELECT flag FROM t")
        .await
        .expect("alter inside a transaction");
    let inside = a.prepare("SELECT * FROM t").await.expect("prepare inside");
    assert_eq!(inside.columns().len(), 3);
    a.batch_execute("ROLLBACK").await.expect("rollback");
    let select = a.prepare("SELECT * FROM t").await.expect("prepare after the rollback");
    assert_eq!(
        column_types(&select),
        [("a".to_owned(), Type::INT4), ("at".to_owned(), Type::TIMESTAMPTZ)]
    );
    let error = a
        .prepare("SELECT flag FROM t")
        .await
        .expect_err("the rolled-back column is gone");
    let message = error.as_db_error().map(|e| e.message().to_owned()).unwrap_or_default();
    assert!(message.contains("flag"), "{error:?}");

    drop((a, b));
    served.stop().await;
}
