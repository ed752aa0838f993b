//! SQL over the PostgreSQL wire protocol lands in the page store: a `tokio-postgres` client talks to the pg
//! front, whose sessions are VFS connections on a registered database over a `MemoryPageStore`. Each
//! committed statement is one commit of the store; a fresh connection reads it back; an unregistered database
//! name is refused rather than opened as a local file.

use std::collections::HashMap;
use std::sync::Arc;

use compute::page_store::MemoryPageStore;
use compute::pg::{serve, VfsSessionFactory};
use tokio_postgres::types::Type;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_over_the_wire_commits_to_the_page_store() {
    let store = Arc::new(MemoryPageStore::new());
    compute::vfs::register_database("wire_db", store.clone()).expect("register");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let factory = Arc::new(VfsSessionFactory::new(HashMap::from([(
        "app".to_string(),
        "secret".to_string(),
    )])));
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, factory, async move {
        let _ = stop_rx.await;
    }));

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

    let _ = stop.send(());
    let _ = server.await;
    compute::vfs::unregister_database("wire_db");
}
