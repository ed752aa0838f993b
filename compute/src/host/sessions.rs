//! The listener's [`SessionFactory`]: whose credentials a name takes, the per-database session cap, and
//! opening a session on a name (a branch, an alias, or a time-travel form), saying why when it cannot.

use std::collections::HashMap;
use std::sync::Arc;

use cambium_types::TenantId;

use super::branches::Resolved;
use super::HostShared;
use crate::pg::{ScramVerifier, SessionError, SessionFactory};
use crate::vfs;

/// One session's place in [`HostShared::sessions_per_tenant`], given back when dropped.
struct TenantSession {
    tenant: TenantId,
    counts: Arc<parking_lot::Mutex<HashMap<TenantId, usize>>>,
}

impl Drop for TenantSession {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(open) = counts.get_mut(&self.tenant) {
            assert!(*open > 0, "a session let go of a place nobody held");
            *open -= 1;
            if *open == 0 {
                counts.remove(&self.tenant);
            }
        }
    }
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

    fn admit(&self, database: &str) -> Result<Option<crate::pg::Admission>, SessionError> {
        let max = self.config.connections_per_database_max;
        let requested = database.split_once('@').map_or(database, |(name, _)| name);
        let Resolved::Branch(branch) = self.resolve(requested) else {
            // Refused or unknown: `open` says why.
            return Ok(None);
        };
        if max == 0 {
            return Ok(None);
        }
        let tenant = branch.target.tenant_id;
        {
            let mut counts = self.sessions_per_tenant.lock();
            let open = counts.entry(tenant).or_insert(0);
            if *open >= max {
                return Err(SessionError::TooManyConnections {
                    database: database.to_owned(),
                    open: *open,
                    max,
                });
            }
            *open += 1;
        }
        Ok(Some(crate::pg::Admission::new(TenantSession {
            tenant,
            counts: Arc::clone(&self.sessions_per_tenant),
        })))
    }

    fn open(&self, user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
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
            return self.open_time_travel(user, database, &branch, text);
        }
        // Held until the connection has the database open, so the idle-store reaper cannot stop the store
        // between its start and this open.
        let starting = branch.starting.lock();
        self.ensure_started_holding(&branch, &starting)
            .map_err(|e| cannot_open(format!("{database}: {e}")))?;
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
        opened
    }
}
