//! Sequences and enum types over the wire, driven by `tokio-postgres` against an in-process server on SQLite
//! files: a serial key's values are never handed out twice even when a statement fails or a transaction rolls
//! back (as PostgreSQL's `nextval` is never undone), sequence functions answer `bigint` to prepared
//! statements, and an enum column is described with its type's own OID, which the client resolves through
//! `pg_type` and `pg_enum` as it does against PostgreSQL.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use compute::pg::{serve, FileSessionFactory};
use tokio::sync::oneshot;
use tokio_postgres::types::{FromSql, Kind, Type};
use tokio_postgres::{Client, NoTls};

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

async fn connect(server: &Server) -> Client {
    let config = format!(
        "host=127.0.0.1 port={} user=alice password=secret dbname=test",
        server.addr.port()
    );
    let (client, connection) = tokio_postgres::connect(&config, NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

/// An enum value as the client reads it: its label.
struct Label(String);

impl<'a> FromSql<'a> for Label {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Label, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Label(std::str::from_utf8(raw)?.to_owned()))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(ty.kind(), Kind::Enum(_))
    }
}

#[tokio::test]
async fn sequence_values_are_never_given_twice() {
    let server = start().await;
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE t (id serial PRIMARY KEY, name text UNIQUE)")
        .await
        .expect("table");
    let insert = "INSERT INTO t (name) VALUES ($1) RETURNING id";
    let id = |row: tokio_postgres::Row| row.get::<_, i32>(0);
    assert_eq!(id(client.query_one(insert, &[&"a"]).await.expect("a")), 1);
    // A failed statement took 2; a rolled-back transaction took 3: neither is given again.
    assert!(client.query_one(insert, &[&"a"]).await.is_err());
    client.batch_execute("BEGIN").await.expect("begin");
    assert_eq!(id(client.query_one(insert, &[&"b"]).await.expect("b")), 3);
    client.batch_execute("ROLLBACK").await.expect("rollback");
    let other = connect(&server).await;
    assert_eq!(id(other.query_one(insert, &[&"c"]).await.expect("c")), 4);
    let next: i64 = client
        .query_one("SELECT nextval('t_id_seq')", &[])
        .await
        .expect("nextval")
        .get(0);
    assert_eq!(next, 5);
    let columns = client
        .prepare("SELECT currval('t_id_seq'), lastval()")
        .await
        .expect("prepares");
    assert_eq!(columns.columns()[0].type_(), &Type::INT8);
}

#[tokio::test]
async fn enum_columns_carry_their_type() {
    let server = start().await;
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); \
             CREATE TABLE diary (id serial PRIMARY KEY, feeling mood NOT NULL)",
        )
        .await
        .expect("schema");
    client
        .batch_execute("INSERT INTO diary (feeling) VALUES ('happy'), ('sad'), ('ok')")
        .await
        .expect("rows");
    let statement = client
        .prepare("SELECT feeling FROM diary ORDER BY feeling")
        .await
        .expect("prepares");
    let ty = statement.columns()[0].type_();
    assert_eq!(ty.name(), "mood");
    assert_eq!(
        ty.kind(),
        &Kind::Enum(vec!["sad".to_owned(), "ok".to_owned(), "happy".to_owned()])
    );
    let labels: Vec<String> = client
        .query(&statement, &[])
        .await
        .expect("rows")
        .into_iter()
        .map(|row| row.get::<_, Label>(0).0)
        .collect();
    assert_eq!(labels, ["sad", "ok", "happy"]);
    let error = client
        .batch_execute("INSERT INTO diary (feeling) VALUES ('angry')")
        .await
        .expect_err("not a label");
    assert_eq!(error.code().map(|c| c.code()), Some("22P02"));
}
