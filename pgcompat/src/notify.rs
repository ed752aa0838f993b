//! `LISTEN`, `UNLISTEN`, `NOTIFY` and `pg_notify` between the sessions of one database in this process,
//! with PostgreSQL's transaction rules: a `NOTIFY` is sent when its transaction commits (never if it rolls
//! back), identical notifications of one transaction are sent once, and `LISTEN`/`UNLISTEN` take effect at
//! commit. A session receives the notifications of channels it listens on, its own included.
//!
//! Each listening session has a bounded queue ([`QUEUE_MAX`]); the connection drains it and sends the
//! notifications to its client when the session is outside a transaction. A client that never reads lets
//! its queue fill: the oldest notifications are then dropped, counted, and logged by the caller — a
//! notification is a signal, and one slow listener must not stop every writer (PostgreSQL instead fails the
//! notifying commits once its 8 GB queue is full).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use parking_lot::Mutex;

use crate::error::{PgError, INVALID_PARAMETER_VALUE, PROGRAM_LIMIT_EXCEEDED};

/// Most notifications waiting for one session's client.
pub const QUEUE_MAX: usize = 10_000;
/// Longest payload, in bytes (PostgreSQL's limit).
pub const PAYLOAD_BYTES_MAX: usize = 7999;
/// Most notifications one transaction may send.
pub const PENDING_MAX: usize = 10_000;
/// Most channels one session may listen on.
pub const CHANNELS_MAX: usize = 1024;

/// One notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The sending session's backend pid.
    pub sender_pid: i32,
    /// The channel.
    pub channel: String,
    /// The payload (may be empty).
    pub payload: String,
}

/// What a transaction will do at commit.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pending {
    Listen(String),
    Unlisten(Option<String>),
}

/// A session's side of the notifications.
pub struct Notifier {
    database: String,
    pid: i32,
    listener: Arc<Listener>,
    /// `NOTIFY`s of the open transaction, in order, without duplicates.
    outgoing: Mutex<Vec<(String, String)>>,
    /// `LISTEN`/`UNLISTEN`s of the open transaction.
    pending: Mutex<Vec<Pending>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("database", &self.database)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// The receiving end of one session: the channels it listens on and its queue.
pub struct Listener {
    channels: Mutex<HashSet<String>>,
    queue: Mutex<VecDeque<Notification>>,
    dropped: AtomicU64,
    waker: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

impl Listener {
    /// Takes every queued notification, oldest first.
    pub fn take(&self) -> Vec<Notification> {
        self.queue.lock().drain(..).collect()
    }

    /// Whether notifications wait.
    pub fn has_pending(&self) -> bool {
        !self.queue.lock().is_empty()
    }

    /// How many notifications were dropped because the queue was full (and resets the count).
    pub fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::SeqCst)
    }

    /// Sets what is called when a notification arrives.
    pub fn set_waker(&self, waker: Arc<dyn Fn() + Send + Sync>) {
        *self.waker.lock() = Some(waker);
    }

    fn deliver(&self, notification: &Notification) {
        if !self.channels.lock().contains(&notification.channel) {
            return;
        }
        {
            let mut queue = self.queue.lock();
            if queue.len() >= QUEUE_MAX {
                queue.pop_front();
                self.dropped.fetch_add(1, Ordering::SeqCst);
            }
            queue.push_back(notification.clone());
        }
        if let Some(waker) = self.waker.lock().clone() {
            waker();
        }
    }
}

/// The listeners of each database.
static HUB: LazyLock<Mutex<HashMap<String, Vec<Weak<Listener>>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

impl Notifier {
    /// Backend `pid`'s notifier on `database`, registered with the database's listeners.
    pub fn new(database: &str, pid: i32) -> Notifier {
        let listener = Arc::new(Listener {
            channels: Mutex::new(HashSet::new()),
            queue: Mutex::new(VecDeque::new()),
            dropped: AtomicU64::new(0),
            waker: Mutex::new(None),
        });
        let mut hub = HUB.lock();
        let listeners = hub.entry(database.to_owned()).or_default();
        listeners.retain(|weak| weak.strong_count() > 0);
        listeners.push(Arc::downgrade(&listener));
        Notifier {
            database: database.to_owned(),
            pid,
            listener,
            outgoing: Mutex::new(Vec::new()),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The session's receiving end.
    pub fn listener(&self) -> &Arc<Listener> {
        &self.listener
    }

    /// `LISTEN channel` (at commit).
    pub fn listen(&self, channel: &str) -> Result<(), PgError> {
        if self.listener.channels.lock().len() >= CHANNELS_MAX {
            return Err(PgError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("a session may listen on at most {CHANNELS_MAX} channels"),
            ));
        }
        self.pending.lock().push(Pending::Listen(channel.to_owned()));
        Ok(())
    }

    /// `UNLISTEN channel`, or `UNLISTEN *` (`None`), at commit.
    pub fn unlisten(&self, channel: Option<&str>) {
        self.pending.lock().push(Pending::Unlisten(channel.map(str::to_owned)));
    }

    /// `NOTIFY channel, payload` (sent at commit).
    pub fn notify(&self, channel: &str, payload: &str) -> Result<(), PgError> {
        if channel.is_empty() {
            return Err(PgError::new(INVALID_PARAMETER_VALUE, "channel name cannot be empty"));
        }
        if channel.len() > 63 {
            return Err(PgError::new(INVALID_PARAMETER_VALUE, "channel name too long"));
        }
        if payload.len() > PAYLOAD_BYTES_MAX {
            return Err(PgError::new(INVALID_PARAMETER_VALUE, "payload string too long"));
        }
        let mut outgoing = self.outgoing.lock();
        let entry = (channel.to_owned(), payload.to_owned());
        if outgoing.contains(&entry) {
            return Ok(());
        }
        if outgoing.len() >= PENDING_MAX {
            return Err(PgError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("a transaction may send at most {PENDING_MAX} notifications"),
            ));
        }
        outgoing.push(entry);
        Ok(())
    }

    /// The transaction ended: on commit its `LISTEN`s and `UNLISTEN`s take effect and its notifications are
    /// sent; on rollback both are forgotten.
    pub fn end_transaction(&self, committed: bool) {
        let pending = std::mem::take(&mut *self.pending.lock());
        let outgoing = std::mem::take(&mut *self.outgoing.lock());
        if !committed {
            return;
        }
        {
            let mut channels = self.listener.channels.lock();
            for action in pending {
                match action {
                    Pending::Listen(channel) => {
                        channels.insert(channel);
                    }
                    Pending::Unlisten(Some(channel)) => {
                        channels.remove(&channel);
                    }
                    Pending::Unlisten(None) => channels.clear(),
                }
            }
        }
        if outgoing.is_empty() {
            return;
        }
        let listeners: Vec<Arc<Listener>> = HUB
            .lock()
            .get(&self.database)
            .map(|list| list.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default();
        for (channel, payload) in outgoing {
            let notification = Notification {
                sender_pid: self.pid,
                channel,
                payload,
            };
            for listener in &listeners {
                listener.deliver(&notification);
            }
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        let mut hub = HUB.lock();
        if let Some(list) = hub.get_mut(&self.database) {
            list.retain(|weak| weak.strong_count() > 0 && !std::ptr::eq(weak.as_ptr(), Arc::as_ptr(&self.listener)));
            if list.is_empty() {
                hub.remove(&self.database);
            }
        }
    }
}

/// Registers `pg_notify(channel, payload)` on `conn`.
pub(crate) fn install(conn: &rusqlite::Connection, state: Arc<crate::functions::SessionState>) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        "pg_notify",
        2,
        rusqlite::functions::FunctionFlags::SQLITE_UTF8,
        move |ctx| {
            let channel = ctx.get::<Option<String>>(0)?.unwrap_or_default();
            let payload = ctx.get::<Option<String>>(1)?.unwrap_or_default();
            state
                .notifier()
                .notify(&channel, &payload)
                .map_err(crate::functions::raise)?;
            Ok(String::new())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_go_at_commit_to_listeners_once() -> Result<(), PgError> {
        let a = Notifier::new("notify_test_1", 1);
        let b = Notifier::new("notify_test_1", 2);
        let other_database = Notifier::new("notify_test_other", 3);
        b.listen("jobs")?;
        other_database.listen("jobs")?;
        a.notify("jobs", "early")?;
        a.end_transaction(true);
        b.end_transaction(true);
        other_database.end_transaction(true);
        assert!(b.listener().take().is_empty(), "LISTEN takes effect at its commit");

        a.notify("jobs", "x")?;
        a.notify("jobs", "x")?;
        a.notify("jobs", "y")?;
        a.end_transaction(true);
        let got: Vec<String> = b.listener().take().into_iter().map(|n| n.payload).collect();
        assert_eq!(got, ["x", "y"], "duplicates of one transaction are sent once");
        assert!(other_database.listener().take().is_empty());

        a.notify("jobs", "rolled back")?;
        a.end_transaction(false);
        assert!(b.listener().take().is_empty());

        b.unlisten(None);
        b.end_transaction(true);
        a.notify("jobs", "after unlisten")?;
        a.end_transaction(true);
        assert!(b.listener().take().is_empty());
        assert!(a.notify("jobs", &"p".repeat(PAYLOAD_BYTES_MAX + 1)).is_err());
        Ok(())
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts() -> Result<(), PgError> {
        let a = Notifier::new("notify_test_2", 1);
        a.listen("c")?;
        a.end_transaction(true);
        for round in 0..3 {
            for n in 0..QUEUE_MAX / 2 {
                a.notify("c", &format!("{round}-{n}"))?;
            }
            a.end_transaction(true);
        }
        let queued = a.listener().take();
        assert_eq!(queued.len(), QUEUE_MAX);
        assert_eq!(a.listener().take_dropped(), (QUEUE_MAX / 2) as u64);
        assert_eq!(queued[0].payload, "1-0");
        Ok(())
    }
}
