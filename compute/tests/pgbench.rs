//! `pgbench -n -f script.sql` runs a custom script against the compute's PostgreSQL front (sessions on a VFS
//! database over a `MemoryPageStore`) in simple, extended and prepared query modes, and the database ends in
//! the state the transactions imply. Skipped (with a message) when `pgbench` is not installed.

mod common;

use std::process::Command;

use common::VfsServer;

const ACCOUNTS: i64 = 20;
const TRANSACTIONS_PER_MODE: i64 = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbench_runs_a_custom_script_in_every_query_mode() {
    if Command::new("pgbench").arg("--version").output().is_err() {
        eprintln!("pgbench is not installed: skipping");
        return;
    }
    let served = VfsServer::start("bench_db").await;
    let port = served.port;

    let dsn = format!("host=127.0.0.1 port={port} user=app password=secret dbname=bench_db");
    let (client, connection) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
        .await
        .expect("create");
    for id in 1..=ACCOUNTS {
        client
            .batch_execute(&format!("INSERT INTO accounts VALUES ({id}, 0)"))
            .await
            .expect("insert");
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.sql");
    std::fs::write(
        &script,
        format!(
            "\\set id random(1, {ACCOUNTS})\nBEGIN;\nUPDATE accounts SET balance = balance + 1 WHERE id = :id;\n\
             SELECT balance FROM accounts WHERE id = :id;\nCOMMIT;\n"
        ),
    )
    .expect("script");
    for mode in ["simple", "extended", "prepared"] {
        let script = script.clone();
        let output = tokio::task::spawn_blocking(move || {
            Command::new("pgbench")
                .args([
                    "-n",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-U",
                    "app",
                    "-M",
                    mode,
                ])
                .args(["-t", &TRANSACTIONS_PER_MODE.to_string(), "-f"])
                .arg(&script)
                .arg("bench_db")
                .env("PGPASSWORD", "secret")
                .output()
                .expect("run pgbench")
        })
        .await
        .expect("join");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "pgbench -M {mode} failed:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains(&format!(
                "number of transactions actually processed: {TRANSACTIONS_PER_MODE}/"
            )),
            "pgbench -M {mode} did not process every transaction:\n{stdout}\n{stderr}"
        );
    }

    let total: i64 = client
        .query_one("SELECT sum(balance) FROM accounts", &[])
        .await
        .expect("sum")
        .get(0);
    assert_eq!(total, 3 * TRANSACTIONS_PER_MODE, "every pgbench transaction added one");
    served.stop().await;
}
