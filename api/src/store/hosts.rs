//! Compute placement (issue 17 item 4): the registry of compute hosts and the host each database is placed on
//! (migration 13).
//!
//! Every `cambium api` process is a compute host. It registers under its store's owner id (the id its operation
//! leases carry, new at each start) with the PostgreSQL address proxies reach it at and the `/v1` URL its peers
//! forward requests to, and renews a heartbeat lease ([`HOST_LEASE_MS`]) with its operation leases. A host is
//! *live* while its lease has not expired.
//!
//! `databases.compute_host` names the host a database is placed on. A new database is placed on the host that
//! creates it ([`Store::create_database`]; the API sends a creation to the live host with the fewest databases).
//! A database whose host is not live, or that has no host (rows from before placement), is re-placed by whichever
//! live process sees it first ([`Store::replace_orphans`]): each move is one conditional `UPDATE` of the row
//! (`WHERE compute_host = <the dead host>`), so of two processes moving it exactly one does.
//!
//! On SQLite one process owns the metadata: registering places every database on it and forgets the other hosts
//! (all of them a dead process's, as with operation leases), so `cambium up` behaves as before placement.

use super::leases::later;
use super::sql::{params, Dialect, OptionalExtension};
use super::{timestamp_text, Store, StoreError};
use crate::store::leases::OPERATION_LEASE_MS;

/// How long a host's heartbeat lasts without renewal: past it, its databases are re-placed.
pub const HOST_LEASE_MS: u64 = OPERATION_LEASE_MS;

/// Databases one [`Store::replace_orphans`] moves, at most (the rest next round).
pub const REPLACED_PER_ROUND_MAX: usize = 256;

/// A registered compute host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeHostRow {
    /// Its id (its store's lease owner id, `api_…`).
    pub id: String,
    /// `host:port` of its PostgreSQL listener, as proxies reach it.
    pub pg_address: String,
    /// The base URL of its `/v1` API (`http://host:port`), as its peers reach it.
    pub api_url: String,
    /// Whether its heartbeat lease has not expired.
    pub live: bool,
    /// The secret its `/internal/` routes take (`Authorization: Bearer …`); empty for a host registered before
    /// migration 17, which then takes no internal call.
    pub internal_token: String,
}

/// A database moved off a host that is not live (or had none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// The database.
    pub database_id: String,
    /// The host it was placed on, if any.
    pub from: Option<String>,
    /// The live host it is placed on now.
    pub to: String,
}

/// Where one database is placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The database.
    pub database_id: String,
    /// Its tenant (`TenantId` text).
    pub tenant_id: String,
    /// The host it is placed on, if any.
    pub host: Option<String>,
    /// The pageserver its tenant is on (`databases.pageserver`; `None`: the first configured one).
    pub pageserver: Option<String>,
}

fn now_text() -> String {
    timestamp_text(jiff::Timestamp::now())
}

impl Store {
    /// The secret this process's `/internal/` routes take, registered with it ([`ComputeHostRow::internal_token`]).
    pub fn internal_token(&self) -> &str {
        &self.internal_token
    }

    /// Whether `presented` is this process's internal token, compared in constant time.
    pub fn is_internal_token(&self, presented: &str) -> bool {
        let (a, b) = (presented.as_bytes(), self.internal_token.as_bytes());
        !b.is_empty() && a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// Registers this process as a compute host reachable at `pg_address` (PostgreSQL) and `api_url` (`/v1`),
    /// with a fresh heartbeat lease. A host registered with the same two addresses is taken to be this process's
    /// previous run (a restart on the same ports): its databases are placed on this one and its row goes, so a
    /// restart serves them at once (the addresses must therefore be each host's own). On SQLite, also places
    /// every database on it and forgets every other host.
    pub fn register_host(&self, pg_address: &str, api_url: &str) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now();
        let mut conn = self.conn()?;
        let sqlite = conn.dialect() == Dialect::Sqlite;
        let tx = conn.transaction_with_behavior(super::sql::TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM compute_hosts WHERE id = ?1", [&self.owner])?;
        tx.execute(
            "INSERT INTO compute_hosts (id, pg_address, api_url, lease_expires_at, started_at, internal_token)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                self.owner,
                pg_address,
                api_url,
                later(now, HOST_LEASE_MS),
                timestamp_text(now),
                self.internal_token
            ],
        )?;
        if sqlite {
            tx.execute("DELETE FROM compute_hosts WHERE id <> ?1", [&self.owner])?;
            tx.execute("UPDATE databases SET compute_host = ?1", [&self.owner])?;
        } else {
            // A host registered with these same addresses is this process's previous run (this one has bound
            // them): its databases are this one's at once, without waiting out its lease.
            tx.execute(
                "UPDATE databases SET compute_host = ?1 WHERE compute_host IN
                   (SELECT id FROM compute_hosts WHERE id <> ?1 AND pg_address = ?2 AND api_url = ?3)",
                params![self.owner, pg_address, api_url],
            )?;
            tx.execute(
                "DELETE FROM compute_hosts WHERE id <> ?1 AND pg_address = ?2 AND api_url = ?3",
                params![self.owner, pg_address, api_url],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Renews this host's heartbeat lease; `false` if its row is gone (its databases were re-placed while it was
    /// unheard of: it registers again as a new, empty host).
    pub fn renew_host(&self) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        let changed = conn.execute(
            "UPDATE compute_hosts SET lease_expires_at = ?2 WHERE id = ?1",
            params![self.owner, later(jiff::Timestamp::now(), HOST_LEASE_MS)],
        )?;
        Ok(changed == 1)
    }

    /// Every registered host, live or not, by id.
    pub fn compute_hosts(&self) -> Result<Vec<ComputeHostRow>, StoreError> {
        let now = now_text();
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT id, pg_address, api_url, lease_expires_at >= ?1, internal_token FROM compute_hosts ORDER BY id",
        )?;
        let rows = stmt.query_map([&now], |row| {
            Ok(ComputeHostRow {
                id: row.get(0)?,
                pg_address: row.get(1)?,
                api_url: row.get(2)?,
                live: row.get(3)?,
                internal_token: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The live host with the fewest databases placed on it (ties: the lowest id), if any.
    pub fn least_loaded_host(&self) -> Result<Option<ComputeHostRow>, StoreError> {
        let now = now_text();
        let conn = self.conn()?;
        let row = conn
            .query_row(
                "SELECT h.id, h.pg_address, h.api_url, h.internal_token,
                        (SELECT count(*) FROM databases d WHERE d.compute_host = h.id) AS placed
                 FROM compute_hosts h WHERE h.lease_expires_at >= ?1
                 ORDER BY placed, h.id LIMIT 1",
                [&now],
                |row| {
                    Ok(ComputeHostRow {
                        id: row.get(0)?,
                        pg_address: row.get(1)?,
                        api_url: row.get(2)?,
                        live: true,
                        internal_token: row.get(3)?,
                    })
                },
            )
            .optional()?;
        Ok(row)
    }

    /// The host database `database_id` is placed on, if it exists and has one.
    pub fn host_of_database(&self, database_id: &str) -> Result<Option<ComputeHostRow>, StoreError> {
        self.host_where("d.id = ?1", database_id)
    }

    /// The host the database of branch `branch_id` is placed on, if the branch exists and its database has one.
    pub fn host_of_branch(&self, branch_id: &str) -> Result<Option<ComputeHostRow>, StoreError> {
        self.host_where("d.id = (SELECT database_id FROM branches WHERE id = ?1)", branch_id)
    }

    fn host_where(&self, condition: &str, id: &str) -> Result<Option<ComputeHostRow>, StoreError> {
        let now = now_text();
        let conn = self.conn()?;
        let row = conn
            .query_row(
                &format!(
                    "SELECT h.id, h.pg_address, h.api_url, h.lease_expires_at >= ?2, h.internal_token
                     FROM databases d JOIN compute_hosts h ON h.id = d.compute_host WHERE {condition}"
                ),
                params![id, now],
                |row| {
                    Ok(ComputeHostRow {
                        id: row.get(0)?,
                        pg_address: row.get(1)?,
                        api_url: row.get(2)?,
                        live: row.get(3)?,
                        internal_token: row.get(4)?,
                    })
                },
            )
            .optional()?;
        Ok(row)
    }

    /// Every database's placement, by id.
    pub fn placements(&self) -> Result<Vec<Placement>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare("SELECT id, tenant_id, compute_host, pageserver FROM databases ORDER BY id")?;
        let rows = stmt.query_map([], |row| {
            Ok(Placement {
                database_id: row.get(0)?,
                tenant_id: row.get(1)?,
                host: row.get(2)?,
                pageserver: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Re-places up to [`REPLACED_PER_ROUND_MAX`] databases whose host is not live (or that have none) on live
    /// hosts, each on the one with the fewest databases at that moment; returns the moves this call made (a
    /// database another process moved first is left to it). Then forgets hosts that are not live and hold no
    /// database. Nothing moves if no host is live.
    pub fn replace_orphans(&self) -> Result<Vec<Replacement>, StoreError> {
        let now = now_text();
        let mut loads: Vec<(String, i64)> = {
            let conn = self.conn()?;
            let mut stmt = conn.prepare(
                "SELECT h.id, (SELECT count(*) FROM databases d WHERE d.compute_host = h.id)
                 FROM compute_hosts h WHERE h.lease_expires_at >= ?1 ORDER BY h.id",
            )?;
            let rows = stmt.query_map([&now], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        if loads.is_empty() {
            return Ok(Vec::new());
        }
        let orphans: Vec<(String, Option<String>)> = {
            let conn = self.conn()?;
            let limit = i64::try_from(REPLACED_PER_ROUND_MAX).unwrap_or(i64::MAX);
            let mut stmt = conn.prepare(
                "SELECT id, compute_host FROM databases
                 WHERE compute_host IS NULL
                    OR compute_host NOT IN (SELECT id FROM compute_hosts WHERE lease_expires_at >= ?1)
                 ORDER BY id LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![now, limit], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut moves = Vec::new();
        for (database_id, from) in orphans {
            let Some(target) = loads.iter_mut().min_by_key(|(id, placed)| (*placed, id.clone())) else {
                break;
            };
            let conn = self.conn()?;
            let changed = match &from {
                Some(from) => conn.execute(
                    "UPDATE databases SET compute_host = ?2 WHERE id = ?1 AND compute_host = ?3",
                    params![database_id, target.0, from],
                )?,
                None => conn.execute(
                    "UPDATE databases SET compute_host = ?2 WHERE id = ?1 AND compute_host IS NULL",
                    params![database_id, target.0],
                )?,
            };
            if changed == 1 {
                target.1 += 1;
                moves.push(Replacement {
                    database_id,
                    from,
                    to: target.0.clone(),
                });
            }
        }
        let conn = self.conn()?;
        conn.execute(
            "DELETE FROM compute_hosts WHERE lease_expires_at < ?1
               AND NOT EXISTS (SELECT 1 FROM databases d WHERE d.compute_host = compute_hosts.id)",
            [&now],
        )?;
        Ok(moves)
    }

    /// Where connection name `name` (`db_…` or `br_…`, without a time-travel suffix) is served: the PostgreSQL
    /// address of the live host its database is placed on, or why there is none.
    pub fn lookup_name(&self, name: &str) -> Result<NameLookup, StoreError> {
        let placed: Option<Option<String>> = {
            let conn = self.conn()?;
            conn.query_row(
                "SELECT compute_host FROM databases
                 WHERE id = ?1 OR id = (SELECT database_id FROM branches WHERE id = ?1)",
                [name],
                |row| row.get(0),
            )
            .optional()?
        };
        let Some(placed) = placed else {
            return Ok(NameLookup::Unknown);
        };
        let host = if name.starts_with("br_") {
            self.host_of_branch(name)?
        } else {
            self.host_of_database(name)?
        };
        Ok(match host {
            Some(host) if host.live && placed.as_deref() == Some(host.id.as_str()) => NameLookup::Live(host.pg_address),
            _ => NameLookup::NotLive,
        })
    }
}

/// What [`Store::lookup_name`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameLookup {
    /// Served by the live host at this PostgreSQL address.
    Live(String),
    /// A database or branch whose host is not live (or that has none yet): re-placed within a lease.
    NotLive,
    /// No database or branch has this name.
    Unknown,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::databases::{NewDatabase, TimelineRow};
    use crate::store::labels::Labels;
    use crate::store::scenarios::Open;

    #[test]
    fn a_dead_hosts_databases_move_to_a_live_one() {
        crate::store::scenarios::on_sqlite(a_dead_hosts_databases_move_to_a_live_one_on);
    }

    /// Two hosts on one metadata: a database is placed on its creator and found by its names; when the creator's
    /// lease expires the other moves it once and the dead host's row goes. On SQLite the second registration
    /// takes everything at once (one process owns SQLite metadata).
    pub(crate) fn a_dead_hosts_databases_move_to_a_live_one_on(open: Open<'_>) {
        let first = open();
        first.register_host("first:5432", "http://first").unwrap();
        let account = first.create_account().unwrap();
        let project = first.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let verifier = compute::pg::ScramVerifier::from_password("pw", compute::pg::scram::ITERATIONS_DEFAULT).unwrap();
        let new = NewDatabase {
            project_id: project.id.clone(),
            name: "d".to_owned(),
            region: "local".to_owned(),
            tenant_id: "0123456789abcdef0123456789abcdef".parse().unwrap(),
            timeline: TimelineRow {
                timeline_id: "1".repeat(32).parse().unwrap(),
                ancestor_timeline_id: None,
                start_lsn: cambium_types::Lsn(0x0100_0000),
            },
            branch_name: "main".to_owned(),
            password_verifier: Arc::new(verifier),
            labels: Labels::new(),
            suspend_timeout_seconds: 300,
        };
        let created = first.create_database(&account, &new, 10).unwrap().unwrap();
        let (database, branch) = (created.database.id.clone(), created.branch.id.clone());
        let at_first = NameLookup::Live("first:5432".to_owned());
        assert_eq!(first.lookup_name(&database).unwrap(), at_first);
        assert_eq!(first.lookup_name(&branch).unwrap(), at_first);
        assert_eq!(first.lookup_name("db_none").unwrap(), NameLookup::Unknown);
        assert_eq!(first.lookup_name("br_none").unwrap(), NameLookup::Unknown);
        let second = open();
        second.register_host("second:5432", "http://second").unwrap();
        let at_second = NameLookup::Live("second:5432".to_owned());
        if second.dialect() == Dialect::Sqlite {
            assert_eq!(second.lookup_name(&database).unwrap(), at_second);
            assert_eq!(second.compute_hosts().unwrap().len(), 1);
            return;
        }
        assert_eq!(second.least_loaded_host().unwrap().unwrap().id, second.lease_owner());
        assert!(second.replace_orphans().unwrap().is_empty(), "the first is live");
        second
            .conn()
            .unwrap()
            .execute(
                "UPDATE compute_hosts SET lease_expires_at = ?2 WHERE id = ?1",
                params![first.lease_owner(), "2000-01-01T00:00:00.000Z"],
            )
            .unwrap();
        assert_eq!(second.lookup_name(&database).unwrap(), NameLookup::NotLive);
        let moves = second.replace_orphans().unwrap();
        assert_eq!(
            moves,
            vec![Replacement {
                database_id: database.clone(),
                from: Some(first.lease_owner().to_owned()),
                to: second.lease_owner().to_owned(),
            }]
        );
        assert!(first.replace_orphans().unwrap().is_empty(), "moved once");
        assert_eq!(second.lookup_name(&branch).unwrap(), at_second);
        assert!(
            !first.renew_host().unwrap(),
            "the dead host's row went with its last database"
        );
        first.register_host("first:5432", "http://first").unwrap();
        assert_eq!(
            second.placements().unwrap()[0].host.as_deref(),
            Some(second.lease_owner())
        );
        // A restart of the second on its addresses takes its databases at once.
        let restarted = open();
        restarted.register_host("second:5432", "http://second").unwrap();
        assert_eq!(
            restarted.placements().unwrap()[0].host.as_deref(),
            Some(restarted.lease_owner())
        );
        assert_eq!(restarted.lookup_name(&database).unwrap(), at_second);
        assert_eq!(restarted.compute_hosts().unwrap().len(), 2);
    }

    #[test]
    fn a_host_registers_renews_and_is_least_loaded_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.register_host("127.0.0.1:5432", "http://127.0.0.1:8420").unwrap();
        assert!(store.renew_host().unwrap());
        let hosts = store.compute_hosts().unwrap();
        assert_eq!(hosts.len(), 1);
        assert!(hosts[0].live);
        assert_eq!(hosts[0].id, store.lease_owner());
        let least = store.least_loaded_host().unwrap().unwrap();
        assert_eq!(least.id, store.lease_owner());
        assert_eq!(least.pg_address, "127.0.0.1:5432");
        // A second registration (same process) keeps one row.
        store.register_host("127.0.0.1:5433", "http://127.0.0.1:8421").unwrap();
        assert_eq!(store.compute_hosts().unwrap().len(), 1);
        assert!(store.replace_orphans().unwrap().is_empty());
    }

    #[test]
    fn registering_on_sqlite_forgets_other_hosts() {
        let dir = tempfile::tempdir().unwrap();
        {
            let first = Store::open(dir.path()).unwrap();
            first.register_host("a:1", "http://a:2").unwrap();
        }
        let second = Store::open(dir.path()).unwrap();
        second.register_host("b:1", "http://b:2").unwrap();
        let hosts = second.compute_hosts().unwrap();
        assert_eq!(hosts.len(), 1);
        assert_eq!(hosts[0].pg_address, "b:1");
    }
}
