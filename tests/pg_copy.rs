//! `COPY … FROM STDIN` / `TO STDOUT` and cursors against a real `cambium up`, through two real clients:
//! tokio-postgres (extended protocol: `copy_in` as a sink, `copy_out` as a stream) and psql (simple
//! protocol: `\copy` in and out, text and CSV). Proves the rows arrive typed and exact, a bad row rolls the
//! whole copy back (nothing half-loaded), a copy inside a transaction block is undone with it, and a held
//! cursor outlives its transaction while a plain one does not.

mod common;

use std::process::Command;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};

use common::api::{connect, Up};

/// A row per `CopyData` message, as psql and pgbench send them: the compute gathers messages into batches
/// (`COPY_BATCH_BYTES`), so a copy of many messages must arrive whole, one that fails past several batches must
/// leave nothing, and a copy the client abandons with data still gathered must leave none of it for the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_row_per_message_is_whole_and_an_abandoned_one_leaves_nothing_behind() {
    let up = Up::start();
    let project = up.create_project("copy-rows").await;
    let database = up.create_database(&project, "copy-rows-db").await;
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();
    let client = connect(&uri).await.expect("connects");
    client
        .batch_execute("CREATE TABLE t (id bigint PRIMARY KEY, v text NOT NULL)")
        .await
        .expect("table");
    let count_between = |low: i64, high: i64| {
        let client = &client;
        async move {
            client
                .query_one("SELECT count(*) FROM t WHERE id BETWEEN $1 AND $2", &[&low, &high])
                .await
                .expect("count")
                .get::<_, i64>(0)
        }
    };

    // 30000 messages of ~45 bytes: past several batches.
    let sink = client.copy_in("COPY t FROM STDIN").await.expect("copy starts");
    futures::pin_mut!(sink);
    for id in 1..=30_000i64 {
        sink.send(Bytes::from(format!("{id}\trow number {id} of the copy\n")))
            .await
            .expect("data");
    }
    assert_eq!(sink.finish().await.expect("copy ends"), 30_000);
    let row = client
        .query_one("SELECT count(*), sum(id)::text, min(v) FROM t", &[])
        .await
        .expect("row");
    assert_eq!(row.get::<_, i64>(0), 30_000);
    assert_eq!(row.get::<_, String>(1), (30_000i64 * 30_001 / 2).to_string());
    assert_eq!(row.get::<_, String>(2), "row number 1 of the copy");

    // A bad row after 20000 good ones (several batches handed over already): the whole copy is undone.
    let sink = client.copy_in("COPY t FROM STDIN").await.expect("copy starts");
    futures::pin_mut!(sink);
    for id in 40_001..=60_000i64 {
        sink.send(Bytes::from(format!("{id}\tgood\n"))).await.expect("data");
    }
    sink.send(Bytes::from_static(b"not-a-number\tbad\n"))
        .await
        .expect("data");
    for id in 60_001..=60_010i64 {
        sink.send(Bytes::from(format!("{id}\tafter\n"))).await.expect("data");
    }
    let error = sink.finish().await.expect_err("a bad bigint");
    assert_eq!(error.code().map(|c| c.code()), Some("22P02"), "{error}");
    assert_eq!(count_between(40_001, 60_010).await, 0, "nothing of a failed copy stays");

    // Rows gathered and never handed over, then the client gives up (CopyFail): none of them reach the next copy.
    {
        let sink = client.copy_in("COPY t FROM STDIN").await.expect("copy starts");
        futures::pin_mut!(sink);
        for id in 100_001..=100_100i64 {
            sink.send(Bytes::from(format!("{id}\tabandoned\n")))
                .await
                .expect("data");
        }
        // Dropped without `finish`: tokio-postgres aborts the copy.
    }
    let sink = client.copy_in("COPY t FROM STDIN").await.expect("copy starts");
    futures::pin_mut!(sink);
    for id in 200_001..=200_005i64 {
        sink.send(Bytes::from(format!("{id}\tnext\n"))).await.expect("data");
    }
    assert_eq!(sink.finish().await.expect("copy ends"), 5);
    assert_eq!(count_between(100_001, 100_100).await, 0, "the abandoned rows are gone");
    assert_eq!(count_between(200_001, 200_005).await, 5);
    assert_eq!(count_between(1, 1_000_000).await, 30_005);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_and_out_through_tokio_postgres() {
    let up = Up::start();
    let project = up.create_project("copy").await;
    let database = up.create_database(&project, "copy-db").await;
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();
    let client = connect(&uri).await.expect("connects");
    client
        .batch_execute("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(10,2), at timestamptz)")
        .await
        .expect("table");

    let sink = client
        .copy_in("COPY items (id, name, price, at) FROM STDIN")
        .await
        .expect("copy starts");
    futures::pin_mut!(sink);
    let mut text = String::new();
    for id in 1..=2000 {
        text.push_str(&format!(
            "{id}\tname {id} with a tab\\there\t{id}.50\t2024-01-02 03:04:05+02\n"
        ));
    }
    text.push_str("2001\t\\N\t\\N\t\\N\n");
    // Sent in uneven chunks: a record may be cut anywhere.
    for chunk in text.as_bytes().chunks(777) {
        sink.send(Bytes::copy_from_slice(chunk)).await.expect("data");
    }
    let rows = sink.finish().await.expect("copy ends");
    assert_eq!(rows, 2001);
    let row = client
        .query_one("SELECT name, price::text, at::text FROM items WHERE id = 7", &[])
        .await
        .expect("row");
    assert_eq!(row.get::<_, String>(0), "name 7 with a tab\there");
    assert_eq!(row.get::<_, String>(1), "7.50");
    assert_eq!(row.get::<_, String>(2), "2024-01-02 01:04:05+00");
    let nulls = client
        .query_one(
            "SELECT count(*) FROM items WHERE id = 2001 AND name IS NULL AND price IS NULL",
            &[],
        )
        .await
        .expect("count");
    assert_eq!(nulls.get::<_, i64>(0), 1);

    // A bad value on the last line: the whole copy is rolled back.
    let sink = client.copy_in("COPY items FROM STDIN").await.expect("copy starts");
    futures::pin_mut!(sink);
    sink.send(Bytes::from_static(
        b"3001\ta\t1.00\t2024-01-01 00:00+00\n3002\tb\tnot-a-number\t\\N\n",
    ))
    .await
    .expect("data");
    let error = sink.finish().await.expect_err("bad numeric");
    assert_eq!(error.code().map(|c| c.code()), Some("22P02"), "{error}");
    let count = client
        .query_one("SELECT count(*) FROM items WHERE id > 3000", &[])
        .await
        .expect("count");
    assert_eq!(count.get::<_, i64>(0), 0, "nothing of a failed copy stays");

    // Out, as CSV with a header.
    let stream = client
        .copy_out(
            "COPY (SELECT id, name FROM items WHERE id IN (1, 2001) ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)",
        )
        .await
        .expect("copy out");
    let chunks: Vec<Bytes> = stream.map(|chunk| chunk.expect("chunk")).collect().await;
    let out: Vec<u8> = chunks.concat();
    assert_eq!(
        String::from_utf8(out).expect("utf8"),
        "id,name\n1,name 1 with a tab\there\n2001,\n"
    );

    // Cursors: a plain one ends with its transaction, a held one outlives the commit.
    client
        .batch_execute(
            "BEGIN; DECLARE plain CURSOR FOR SELECT id FROM items ORDER BY id; \
             DECLARE held CURSOR WITH HOLD FOR SELECT id FROM items ORDER BY id DESC",
        )
        .await
        .expect("declared");
    let first = client.query("FETCH 2 FROM plain", &[]).await.expect("fetch");
    assert_eq!(first.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>(), [1, 2]);
    client.batch_execute("COMMIT").await.expect("commit");
    assert!(client.query("FETCH 1 FROM plain", &[]).await.is_err());
    let held = client.query("FETCH 1 FROM held", &[]).await.expect("held");
    assert_eq!(held[0].get::<_, i64>(0), 2001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_copies_in_and_out_in_text_and_csv() {
    if Command::new("psql").arg("--version").output().is_err() {
        eprintln!("psql is not installed: skipped");
        return;
    }
    let up = Up::start();
    let project = up.create_project("psqlcopy").await;
    let database = up.create_database(&project, "psql-copy").await;
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let csv_in = dir.path().join("in.csv");
    std::fs::write(&csv_in, "id,note\n1,\"hello, world\"\n2,\"two\nlines\"\n3,\n").expect("write");
    let csv_out = dir.path().join("out.csv");
    let script = format!(
        "CREATE TABLE notes (id int PRIMARY KEY, note text);\n\
         \\copy notes FROM '{}' WITH (FORMAT csv, HEADER)\n\
         \\copy notes TO '{}' WITH (FORMAT csv)\n\
         BEGIN;\n\\copy notes FROM STDIN\n4\tfour\n\\.\nROLLBACK;\n\
         SELECT count(*) FROM notes;\n",
        csv_in.display(),
        csv_out.display()
    );
    let output = Command::new("psql")
        .args([uri.as_str(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At"])
        .env("PGCONNECT_TIMEOUT", "20")
        .arg("-c")
        .arg("SELECT 1")
        .output()
        .expect("psql runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut child = Command::new("psql")
        .args([uri.as_str(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql starts");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(script.as_bytes()).expect("script");
    }
    let output = child.wait_with_output().expect("psql ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.trim(), "3", "the rolled-back copy left nothing");
    assert_eq!(
        std::fs::read_to_string(&csv_out).expect("out"),
        "1,\"hello, world\"\n2,\"two\nlines\"\n3,\n"
    );
}
