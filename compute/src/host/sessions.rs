//! The listener's [`SessionFactory`]: whose credentials a name takes, the per-database and per-account session
//! caps, and opening a name (a branch, an alias, or a time-travel form), saying why when it cannot.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use super::branches::Resolved;
use super::tenants::SessionActivity;
use super::HostShared;
use crate::pg::{Admission, ScramVerifier, SessionError, SessionFactory};
use crate::vfs;

/// Open sessions per key (a database's tenant, an account), shared with the places taken from it.
type Counts<K> = Arc<parking_lot::Mutex<HashMap<K, usize>>>;

/// One session's place in a [`Counts`], given back when dropped.
struct Place<K: Eq + Hash> {
    key: K,
    counts: Counts<K>,
}

impl<K: Eq + Hash> Drop for Place<K> {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(open) = counts.get_mut(&self.key) {
            assert!(*open > 0, "a session let go of a place nobody held");
            *open -= 1;
            if *open == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// Takes a place for `key` if fewer than `max` are taken; else how many are.
fn take_place<K: Eq + Hash + Clone>(counts: &Counts<K>, key: K, max: usize) -> Result<Place<K>, usize> {
    assert!(max > 0, "a cap of 0 means no cap and takes no place");
    {
        let mut taken = counts.lock();
        let open = taken.entry(key.clone()).or_insert(0);
        if *open >= max {
            return Err(*open);
        }
        *open += 1;
    }
    Ok(Place {
        key,
        counts: Arc::clone(counts),
    })
}

/// A session error carrying `message` (SQLite's "cannot open").
pub(super) fn cannot_open(message: String) -> SessionError {
    let code = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN);
    SessionError::Open(rusqlite::Error::SqliteFailure(code, Some(message)))
}

impl SessionFactory for HostShared {
    fn verifier(&self, user: &str, database: &str) -> Option<Arc<ScramVerifier>> {
        let name = database.split_once('@').map_or(database, |(name, _)| name);
        if self.refusals_without_credentials.read().contains(name) {
            return None;
        }
        match self.credentials.read().get(name) {
            // A name with its own credentials accepts only them.
            Some((own_user, verifier)) => (own_user == user).then(|| verifier.clone()),
            None => self.vfs.verifier(user, database),
        }
    }

    fn admit(&self, database: &str) -> Result<Option<Admission>, SessionError> {
        let requested = database.split_once('@').map_or(database, |(name, _)| name);
        let Resolved::Branch(branch) = self.resolve(requested) else {
            // Refused or unknown: `open` says why.
            return Ok(None);
        };
        let tenant = branch.target.tenant_id;
        let per_database = match self.config.connections_per_database_max {
            0 => None,
            max => Some(take_place(&self.sessions_per_tenant, tenant, max).map_err(|open| {
                SessionError::TooManyConnections {
                    database: database.to_owned(),
                    open,
                    max,
                }
            })?),
        };
        let owner = self.owners.read().get(&tenant).cloned();
        // On a refusal here the database's place (taken above) is dropped, so given back.
        let per_account = match (owner, self.config.connections_per_account_max) {
            (None, _) | (Some(_), 0) => None,
            (Some(account), max) => Some(take_place(&self.sessions_per_account, account, max).map_err(|open| {
                SessionError::TooManyConnectionsForAccount {
                    database: database.to_owned(),
                    open,
                    max,
                }
            })?),
        };
        // Always: the tenant's idle clock stops while the session is open.
        let activity = SessionActivity::begin(&self.tenants, tenant);
        Ok(Some(Admission::new((per_database, per_account, activity))))
    }

    fn open(&self, user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
        self.open_sharing(user, database).map(|(conn, _)| conn)
    }

    /// The branch's sessions share a catalog per store; a time-travel session reads its own.
    fn open_sharing(
        &self,
        user: &str,
        database: &str,
    ) -> Result<(rusqlite::Connection, Option<Arc<pgcompat::catalog::SharedCatalog>>), SessionError> {
        let (requested, time_travel) = match database.split_once('@') {
            Some((requested, text)) => (requested, Some(text)),
            None => (database, None),
        };
        let branch = match self.resolve(requested) {
            Resolved::Branch(branch) => branch,
            Resolved::Refused(reason) => return Err(cannot_open(format!("{database}: {reason}"))),
            Resolved::Unknown => return Err(SessionError::InvalidDatabaseName(database.to_owned())),
        };
        if let Some(text) = time_travel {
            return self
                .open_time_travel(user, database, &branch, text)
                .map(|conn| (conn, None));
        }
        // Held until the connection has the database open, so the idle-store reaper cannot stop the store
        // between its start and this open.
        let starting = branch.starting.lock();
        let store = self
            .ensure_started_holding(&branch, &starting)
            .map_err(|e| cannot_open(format!("{database}: {e}")))?;
        // A new branch's election overlaps this session's first statements (its reads never wait for it).
        store.campaign();
        // The store's, under `starting` as the store is: a store replaced later comes with a catalog of its own.
        let catalog = Arc::clone(&branch.state.lock().catalog);
        // Opening reads page 1: if the store fails (or is closed) meanwhile, say why, not just "disk I/O error".
        vfs::clear_store_error();
        let opened = self
            .vfs
            .open(user, &branch.name)
            .map_err(|error| match vfs::take_store_error() {
                Some(store_error) => cannot_open(format!("{database}: {store_error}")),
                None => error,
            });
        drop(starting);
        opened.map(|conn| (conn, Some(catalog)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_capped_per_key_and_given_back_when_dropped() {
        let counts: Counts<&'static str> = Arc::default();
        let first = take_place(&counts, "a", 2).expect("room");
        let second = take_place(&counts, "a", 2).expect("room");
        assert_eq!(
            take_place(&counts, "a", 2).err(),
            Some(2),
            "full, and says how many are open"
        );
        let other = take_place(&counts, "b", 2).expect("another key has its own room");
        drop(first);
        let third = take_place(&counts, "a", 2).expect("a dropped place is given back");
        drop((second, third, other));
        assert!(
            counts.lock().is_empty(),
            "no key is kept once its places are all given back"
        );
    }
}
