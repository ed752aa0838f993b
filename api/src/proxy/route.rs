//! Names to compute hosts, and the relay between a client and its host.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::startup::{base_name, BackendKey};
use super::{Io, Shared};
use crate::store::hosts::NameLookup;
use crate::store::Store;

/// Names a [`Resolver`] remembers, at most (past it the cache starts over).
const CACHE_ENTRIES_MAX: usize = 10_000;
/// The wait between tries while a database's host is being replaced.
const RETRY_WAIT_MS: u64 = 250;
/// The largest message read whole while a session opens (authentication, parameters, key data); a larger one is
/// passed on as bytes and ends the watch for the backend key.
const GREETING_MESSAGE_BYTES_MAX: usize = 64 * 1024;
/// How long one direction of a relay may outlive the other before the connection is closed.
const RELAY_LINGER_MS: u64 = 5_000;
/// How often a relayed session checks that its host still serves its database (through the resolver's cache,
/// so one metadata read per name per cache period at most).
const PLACEMENT_CHECK_MS: u64 = 1_000;

/// Resolves connection names to the PostgreSQL address of the live host serving them, through the metadata,
/// remembering each for a short while.
pub struct Resolver {
    store: Arc<Store>,
    ttl: Duration,
    cache: Mutex<HashMap<String, (String, Instant)>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Resolver {
    /// A resolver over `store` remembering answers for `ttl`.
    pub fn new(store: Arc<Store>, ttl: Duration) -> Resolver {
        Resolver {
            store,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The PostgreSQL addresses of every live compute host, from the metadata.
    pub async fn live_host_addresses(&self) -> Result<Vec<String>, String> {
        let store = Arc::clone(&self.store);
        let hosts = tokio::task::spawn_blocking(move || store.compute_hosts())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(hosts
            .into_iter()
            .filter(|host| host.live)
            .map(|host| host.pg_address)
            .collect())
    }

    /// Where `name` (no time-travel suffix) is served; from the cache unless `fresh`.
    pub async fn lookup(&self, name: &str, fresh: bool) -> Result<NameLookup, String> {
        if !fresh {
            if let Some((address, at)) = self.cache.lock().get(name) {
                if at.elapsed() < self.ttl {
                    return Ok(NameLookup::Live(address.clone()));
                }
            }
        }
        let store = Arc::clone(&self.store);
        let owned = name.to_owned();
        let found = tokio::task::spawn_blocking(move || store.lookup_name(&owned))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let mut cache = self.cache.lock();
        match &found {
            NameLookup::Live(address) => {
                if cache.len() >= CACHE_ENTRIES_MAX {
                    cache.clear();
                }
                cache.insert(name.to_owned(), (address.clone(), Instant::now()));
            }
            NameLookup::NotLive | NameLookup::Unknown => {
                cache.remove(name);
            }
        }
        Ok(found)
    }
}

/// Why a connection is refused: an ErrorResponse's SQLSTATE and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) sqlstate: &'static str,
    pub(super) message: String,
}

/// A connection to the host serving `database` (a connection name, maybe with `@…`), with the host's address:
/// re-resolved when a connect fails, waiting up to the failover wait for a database whose host is not live.
pub(super) async fn connect(shared: &Shared, database: &str) -> Result<(TcpStream, String), Refusal> {
    let name = base_name(database);
    let deadline = Instant::now() + Duration::from_millis(shared.config.failover_wait_ms);
    let connect_timeout = Duration::from_millis(shared.config.connect_timeout_ms);
    let mut fresh = false;
    loop {
        let why = match shared.resolver.lookup(name, fresh).await {
            Ok(NameLookup::Unknown) => {
                return Err(Refusal {
                    sqlstate: "3D000",
                    message: format!("database \"{database}\" does not exist"),
                })
            }
            Ok(NameLookup::Live(address)) => {
                match tokio::time::timeout(connect_timeout, TcpStream::connect(&address)).await {
                    Ok(Ok(stream)) => {
                        let _ = stream.set_nodelay(true);
                        if let Err(error) = compute::pg::keepalive::configure(&stream) {
                            tracing::warn!(%address, %error, "keepalive could not be set on a host connection");
                        }
                        return Ok((stream, address));
                    }
                    Ok(Err(error)) => format!("its compute host {address} refused: {error}"),
                    Err(_) => format!("its compute host {address} did not answer"),
                }
            }
            Ok(NameLookup::NotLive) => "its compute host is being replaced".to_owned(),
            Err(error) => format!("the control metadata could not be read: {error}"),
        };
        if Instant::now() >= deadline {
            return Err(Refusal {
                sqlstate: "57P03",
                message: format!("database \"{database}\" cannot be reached now ({why}); retry"),
            });
        }
        tracing::debug!(%database, %why, "retrying a connection");
        fresh = true;
        tokio::time::sleep(Duration::from_millis(RETRY_WAIT_MS)).await;
    }
}

/// Replays `startup` to the host, then copies bytes both ways until either side ends, noting the session's
/// backend key for cancel requests while it lasts. A session whose database is no longer served by its host
/// (re-placed elsewhere, or the host's lease lapsed: it has fenced itself, or is frozen and will be fenced) is
/// closed, so its client reconnects to the new host at once instead of waiting on a dead one until its own
/// timeouts.
pub(super) async fn relay(
    shared: &Shared,
    client: Box<dyn Io>,
    host: (TcpStream, String),
    database: &str,
    startup: &[u8],
) {
    let (mut host, address) = host;
    if host.write_all(startup).await.is_err() {
        return;
    }
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut host_read, mut host_write) = host.into_split();
    let key: Mutex<Option<BackendKey>> = Mutex::new(None);
    let upstream = async {
        let _ = tokio::io::copy(&mut client_read, &mut host_write).await;
        let _ = host_write.shutdown().await;
    };
    let downstream = async {
        if let Ok(Some(found)) = greet(&mut host_read, &mut client_write).await {
            shared.sessions.lock().insert(found, address.clone());
            *key.lock() = Some(found);
        }
        let _ = tokio::io::copy(&mut host_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    let moved = placement_lost(shared, base_name(database), &address);
    tokio::pin!(upstream);
    tokio::pin!(downstream);
    tokio::pin!(moved);
    let linger = Duration::from_millis(RELAY_LINGER_MS);
    tokio::select! {
        () = &mut upstream => { let _ = tokio::time::timeout(linger, &mut downstream).await; }
        () = &mut downstream => { let _ = tokio::time::timeout(linger, &mut upstream).await; }
        why = &mut moved => {
            tracing::info!(%database, host = %address, why, "closed a session whose host no longer serves its database");
        }
    }
    let noted = key.lock().take();
    if let Some(found) = noted {
        shared.sessions.lock().remove(&found);
    }
}

/// Resolves once `name` is no longer served at `address` (answered by the resolver: another live host, or no live
/// host), saying which; a metadata read that fails changes nothing.
async fn placement_lost(shared: &Shared, name: &str, address: &str) -> &'static str {
    // Each session checks at its own offset in the period, so the sessions of one database do not all miss the
    // resolver's cache at once when it expires (the first to miss refreshes it for the others).
    let offset_ms = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new().build_hasher().finish() % PLACEMENT_CHECK_MS
    };
    let first = tokio::time::Instant::now() + Duration::from_millis(PLACEMENT_CHECK_MS + offset_ms);
    let mut check = tokio::time::interval_at(first, Duration::from_millis(PLACEMENT_CHECK_MS));
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        check.tick().await;
        match shared.resolver.lookup(name, false).await {
            Ok(NameLookup::Live(now)) if now != address => return "re-placed on another host",
            Ok(NameLookup::NotLive) => return "its host's lease lapsed",
            Ok(NameLookup::Unknown) => return "the database is gone",
            Ok(NameLookup::Live(_)) | Err(_) => {}
        }
    }
}

/// Passes the host's messages to the client up to the first ReadyForQuery or ErrorResponse, returning the
/// BackendKeyData seen on the way.
async fn greet<R, W>(host: &mut R, client: &mut W) -> std::io::Result<Option<BackendKey>>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut key = None;
    loop {
        let mut head = [0u8; 5];
        host.read_exact(&mut head).await?;
        let [kind, l0, l1, l2, l3] = head;
        let length = usize::try_from(u32::from_be_bytes([l0, l1, l2, l3])).unwrap_or(usize::MAX);
        client.write_all(&head).await?;
        if !(4..=GREETING_MESSAGE_BYTES_MAX).contains(&length) {
            // Not one to read whole: the rest goes on as bytes.
            client.flush().await?;
            return Ok(key);
        }
        let mut body = vec![0u8; length - 4];
        host.read_exact(&mut body).await?;
        client.write_all(&body).await?;
        client.flush().await?;
        if let (b'K', [p0, p1, p2, p3, s0, s1, s2, s3]) = (kind, body.as_slice()) {
            key = Some(BackendKey {
                process_id: u32::from_be_bytes([*p0, *p1, *p2, *p3]),
                secret: u32::from_be_bytes([*s0, *s1, *s2, *s3]),
            });
        }
        if kind == b'Z' || kind == b'E' {
            return Ok(key);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    #[tokio::test]
    async fn greeting_passes_messages_and_finds_the_key() {
        let mut from_host = Vec::new();
        from_host.extend_from_slice(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0]); // AuthenticationOk
        from_host.extend_from_slice(&[b'K', 0, 0, 0, 12, 0, 0, 0, 42, 0, 0, 0, 7]);
        from_host.extend_from_slice(&[b'Z', 0, 0, 0, 5, b'I']);
        from_host.extend_from_slice(b"after");
        let mut reader = from_host.as_slice();
        let mut to_client = Vec::new();
        let key = greet(&mut reader, &mut to_client).await.unwrap();
        assert_eq!(
            key,
            Some(BackendKey {
                process_id: 42,
                secret: 7
            })
        );
        assert_eq!(to_client.as_slice(), &from_host[..from_host.len() - 5]);
        assert_eq!(reader, b"after");
    }

    #[tokio::test]
    async fn a_huge_message_ends_the_greeting_without_reading_it() {
        let from_host = [b'D', 0x7f, 0, 0, 0, 1, 2, 3];
        let mut reader = &from_host[..];
        let mut to_client = Vec::new();
        assert_eq!(greet(&mut reader, &mut to_client).await.unwrap(), None);
        assert_eq!(to_client.as_slice(), &from_host[..5]);
        assert_eq!(reader, &[1, 2, 3]);
    }
}
