//! LISTEN/NOTIFY and advisory locks between two real sessions of one database on a real `cambium up`,
//! through tokio-postgres (its connection polled for asynchronous messages). Proves a committed NOTIFY
//! reaches a listener that sits idle, a rolled-back one never does, and an advisory lock held by one
//! session makes the other wait until `lock_timeout` (55P03) or until it is released.

mod common;

use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::{AsyncMessage, NoTls};

use common::api::{connect, Up};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_and_advisory_locks_cross_sessions() {
    let up = Up::start();
    let project = up.create_project("notify").await;
    let database = up.create_database(&project, "notify-db").await;
    let uri = database["connection_uri"].as_str().expect("uri").to_owned();

    let (listener, mut connection) = tokio_postgres::connect(&uri, NoTls).await.expect("listener connects");
    let (sender, mut received) = futures::channel::mpsc::unbounded();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(notification) = message {
                let _ = sender.unbounded_send((notification.channel().to_owned(), notification.payload().to_owned()));
            }
        }
    });
    listener.batch_execute("LISTEN jobs").await.expect("listens");

    let notifier = connect(&uri).await.expect("notifier connects");
    notifier
        .batch_execute("BEGIN; NOTIFY jobs, 'never'; ROLLBACK")
        .await
        .expect("rolled back");
    notifier.batch_execute("NOTIFY jobs, 'first'").await.expect("notify");
    notifier
        .batch_execute("BEGIN; SELECT pg_notify('jobs', 'second'); SELECT pg_notify('other', 'unheard'); COMMIT")
        .await
        .expect("pg_notify");
    let mut got = Vec::new();
    for _ in 0..2 {
        let next = tokio::time::timeout(Duration::from_secs(10), received.next())
            .await
            .expect("a notification reaches the idle listener");
        got.push(next.expect("stream open"));
    }
    assert_eq!(
        got,
        [
            ("jobs".to_owned(), "first".to_owned()),
            ("jobs".to_owned(), "second".to_owned())
        ]
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), received.next())
            .await
            .is_err(),
        "nothing from the rolled-back transaction or an unheard channel"
    );

    // Advisory locks.
    let holder = connect(&uri).await.expect("connects");
    holder
        .batch_execute("SELECT pg_advisory_lock(42)")
        .await
        .expect("locks");
    notifier.batch_execute("SET lock_timeout = '200ms'").await.expect("set");
    let error = notifier
        .batch_execute("SELECT pg_advisory_lock(42)")
        .await
        .expect_err("held by the other session");
    assert_eq!(error.code().map(|c| c.code()), Some("55P03"), "{error}");
    let tried = notifier
        .query_one("SELECT pg_try_advisory_lock(42)", &[])
        .await
        .expect("try");
    assert!(!tried.get::<_, bool>(0));
    drop(holder);
    // The holder's session ends with its connection: the lock goes with it.
    let mut granted = false;
    for _ in 0..50 {
        let row = notifier
            .query_one("SELECT pg_try_advisory_lock(42)", &[])
            .await
            .expect("try");
        if row.get::<_, bool>(0) {
            granted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(granted, "a closed session's advisory locks are released");
}
