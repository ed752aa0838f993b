//! Where the control plane's metadata store calls run: a call that may wait (a write's flush, a PostgreSQL round
//! trip, a wait for a pooled connection) on tokio's blocking pool; a SQLite read on the calling thread when its
//! connection is idle.
//!
//! The hand-off to the blocking pool costs a thread's wake-up, ~50 µs per call on this project's 2-core VM
//! (measured: a branch creation's key check 67-71 → 24-29 µs and its reads 96-101 → 45 µs inline, the same run), more
//! than the read itself. A SQLite read in WAL mode never waits for a writer, so run on an async worker it holds
//! that thread for the read's CPU alone; with the connection lent to another call it gives up at once
//! ([`pool::without_waiting`]) and goes to the blocking pool.

use std::sync::Arc;

use crate::error::ApiError;
use crate::store::{pool, sql::Dialect, Store, StoreError};

/// Runs store call `f`, which only reads: on this thread if the store is SQLite and a connection is idle for
/// every connection `f` takes, else (PostgreSQL metadata, or a connection in use) on the blocking pool as
/// [`blocking`] does, where it may wait. `f` may run twice (first here, given up, then on the pool): it must not
/// write, and a write would wait for a flush on this thread.
pub async fn read<T, F>(store: &Arc<Store>, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: Fn(&Store) -> Result<T, StoreError> + Send + 'static,
{
    if store.dialect() == Dialect::Sqlite {
        let began = std::time::Instant::now();
        let here = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool::without_waiting(|| f(store))));
        match here {
            Ok(Err(StoreError::WouldWait)) => {}
            Ok(result) => {
                crate::stages::record("store_calls_inside", began.elapsed());
                return Ok(result?);
            }
            Err(_) => {
                tracing::error!("a metadata read panicked");
                return Err(ApiError::Internal);
            }
        }
    }
    blocking(store, f).await
}

/// Runs store call `f` on the blocking pool; a panic in it is [`ApiError::Internal`].
pub async fn blocking<T, F>(store: &Arc<Store>, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
{
    let store = Arc::clone(store);
    let call = move || {
        let began = std::time::Instant::now();
        let result = f(&store);
        (result, began.elapsed())
    };
    match tokio::task::spawn_blocking(call).await {
        Ok((result, took)) => {
            // What the calls spent in the store itself (the rest of their stages is the hand-off).
            crate::stages::record("store_calls_inside", took);
            Ok(result?)
        }
        Err(error) => {
            tracing::error!(%error, "metadata store task failed");
            Err(ApiError::Internal)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use std::time::Duration;

    use super::*;

    /// Runs `f` and says on which thread it ran.
    fn thread_of(store: &Store) -> Result<std::thread::ThreadId, StoreError> {
        store.schema_version()?;
        Ok(std::thread::current().id())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_read_runs_here_when_the_connection_is_idle_and_on_the_pool_when_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let here = std::thread::current().id();
        assert_eq!(read(&store, thread_of).await.unwrap(), here);
        assert_ne!(blocking(&store, thread_of).await.unwrap(), here);

        // The (only) connection lent elsewhere: the read waits for it on the pool, not on this thread.
        let held = Arc::clone(&store);
        let (lent, lent_rx) = std::sync::mpsc::channel();
        let (give_back, give_back_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let conn = held.conn().unwrap();
            lent.send(()).unwrap();
            give_back_rx.recv().unwrap();
            drop(conn);
        });
        lent_rx.recv().unwrap();
        let mut reading = Box::pin(read(&store, thread_of));
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut reading)
                .await
                .is_err(),
            "the read did not wait for the lent connection"
        );
        give_back.send(()).unwrap();
        let ran_on = tokio::time::timeout(Duration::from_secs(5), reading)
            .await
            .expect("the read ends once the connection is back")
            .unwrap();
        assert_ne!(ran_on, here);
        holder.join().unwrap();

        // A read that fails is its error; one that panics is an internal error, and the store goes on.
        let failed = read(&store, |_| Err::<(), _>(StoreError::Conflict("no".to_owned()))).await;
        assert!(matches!(failed, Err(ApiError::Conflict(_))), "{failed:?}");
        let panicked = read(&store, |_| -> Result<(), StoreError> { panic!("a read that panics") }).await;
        assert!(matches!(panicked, Err(ApiError::Internal)), "{panicked:?}");
        assert_eq!(read(&store, thread_of).await.unwrap(), here);
    }
}
