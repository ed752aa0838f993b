//! Pageserver placement (issue 17 item 2): the pageserver each database's tenant lives on (migration 15,
//! `databases.pageserver`).
//!
//! The column holds the pageserver's gRPC address exactly as the API processes are configured with it
//! (`--pageservers`). `NULL` means the first configured pageserver: rows from before placement, when one
//! pageserver held every tenant, and a database whose creation was cut short between its row and its placement
//! (its storage is made by the creation's work, which reads the placement first, so the two always agree). A
//! new database is placed by [`choose_pageserver`] (the live pageserver holding the least, by its databases'
//! sizes and count in the metadata); a move changes the column with one conditional `UPDATE` ([`Store::move_pageserver`]).

use cambium_types::TenantId;

use super::sql::{params, OptionalExtension};
use super::{Store, StoreError};

/// Where one database's tenant lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageserverPlacement {
    /// The database.
    pub database_id: String,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The pageserver's address; `None`: the first configured one.
    pub pageserver: Option<String>,
}

/// What one pageserver holds, as the metadata says: its databases and their size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageserverLoad {
    /// The pageserver's address; `None`: the first configured one (a `NULL` column).
    pub pageserver: Option<String>,
    /// Databases placed on it.
    pub databases: u64,
    /// The weight of those databases: each one's logical size (its branches' latest samples, summed), counted as
    /// at least [`DATABASE_WEIGHT_FLOOR_BYTES`].
    pub weight_bytes: u64,
}

/// The least a database weighs in placement, however small or unsampled: each database also costs a pageserver
/// its WAL ingest, its timelines and its computes' reads, so a thousand empty ones are not free.
pub const DATABASE_WEIGHT_FLOOR_BYTES: u64 = 64 * 1024 * 1024;

/// How far back consumption buckets are read for a branch's latest logical size (samples come every minute).
const SIZE_SAMPLE_AGE_MAX_HOURS: i64 = 2;

/// The configured pageserver a new database goes to: among those `live` (same order as `configured`), the one
/// holding the least weight according to `placed` (the databases placed on each, by size: see
/// [`PageserverLoad`]; `None` counting for the first configured one), then the fewest databases; ties go to the
/// earlier one in `configured`. `None` if no pageserver is live.
pub fn choose_pageserver(configured: &[String], live: &[bool], placed: &[PageserverLoad]) -> Option<usize> {
    let load = |index: usize| -> (u64, u64) {
        placed
            .iter()
            .filter(|load| match &load.pageserver {
                Some(address) => *address == configured[index],
                None => index == 0,
            })
            .fold((0, 0), |(weight, databases), load| {
                (weight.saturating_add(load.weight_bytes), databases + load.databases)
            })
    };
    (0..configured.len())
        .filter(|&index| live.get(index).copied().unwrap_or(false))
        .min_by_key(|&index| (load(index), index))
}

impl Store {
    /// The pageserver the database of `tenant` is placed on: `Some(None)` for the first configured one (a
    /// `NULL` column), `None` if no database has this tenant.
    pub fn pageserver_of_tenant(&self, tenant: TenantId) -> Result<Option<Option<String>>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                "SELECT pageserver FROM databases WHERE tenant_id = ?1",
                [tenant.to_string()],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// The `pageserver` column of database `database_id`: `Some(None)` for `NULL` (the first configured one),
    /// `None` if there is no such database.
    pub fn pageserver_of_database(&self, database_id: &str) -> Result<Option<Option<String>>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row("SELECT pageserver FROM databases WHERE id = ?1", [database_id], |row| {
                row.get(0)
            })
            .optional()?)
    }

    /// What each pageserver holds, as the column says (`None`: the first configured one): its databases and their
    /// weight ([`PageserverLoad`]), sizes from the consumption samples of the last
    /// [`SIZE_SAMPLE_AGE_MAX_HOURS`] hours (a branch's largest there: sizes change slowly, and balance is
    /// approximate anyway).
    pub fn pageserver_loads(&self) -> Result<Vec<PageserverLoad>, StoreError> {
        let now = jiff::Timestamp::now();
        let since = now
            .checked_sub(jiff::SignedDuration::from_hours(SIZE_SAMPLE_AGE_MAX_HOURS))
            .unwrap_or(now);
        let since_hour = format!("{}:00:00Z", since.strftime("%Y-%m-%dT%H"));
        let floor = i64::try_from(DATABASE_WEIGHT_FLOOR_BYTES).expect("the floor fits an i64");
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT d.pageserver, count(*),
                    CAST(COALESCE(sum(CASE WHEN s.bytes > CAST(?1 AS BIGINT) THEN s.bytes ELSE CAST(?1 AS BIGINT) END), 0)
                         AS BIGINT)
             FROM databases d
             LEFT JOIN (SELECT database_id, CAST(sum(size) AS BIGINT) AS bytes
                        FROM (SELECT branch_id, database_id, max(logical_size_bytes) AS size FROM consumption
                              WHERE hour >= ?2 GROUP BY branch_id, database_id) b
                        GROUP BY database_id) s ON s.database_id = d.id
             GROUP BY d.pageserver",
        )?;
        let rows = stmt.query_map(params![floor, since_hour], |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })?;
        let rows: Vec<(Option<String>, i64, i64)> = rows.collect::<Result<_, _>>()?;
        Ok(rows
            .into_iter()
            .map(|(pageserver, databases, weight)| PageserverLoad {
                pageserver,
                databases: u64::try_from(databases).unwrap_or(0),
                weight_bytes: u64::try_from(weight).unwrap_or(0),
            })
            .collect())
    }

    /// Every database's pageserver, by database id.
    pub fn pageserver_placements(&self) -> Result<Vec<PageserverPlacement>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare("SELECT id, tenant_id, pageserver FROM databases ORDER BY id")?;
        let rows = stmt.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<String>>(2)?,
            ))
        })?;
        let rows: Vec<(String, String, Option<String>)> = rows.collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(database_id, tenant, pageserver)| {
                let tenant_id = tenant
                    .parse::<TenantId>()
                    .map_err(|_| StoreError::Corrupt(format!("database {database_id} has tenant id {tenant:?}")))?;
                Ok(PageserverPlacement {
                    database_id,
                    tenant_id,
                    pageserver,
                })
            })
            .collect()
    }

    /// Places database `database_id` on pageserver `to` if it is on `from` now (`None`: the column is `NULL`);
    /// returns whether it changed (false: the database is gone or was placed elsewhere meanwhile).
    pub fn move_pageserver(&self, database_id: &str, from: Option<&str>, to: &str) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        let changed = match from {
            Some(from) => conn.execute(
                "UPDATE databases SET pageserver = ?2 WHERE id = ?1 AND pageserver = ?3",
                params![database_id, to, from],
            )?,
            None => conn.execute(
                "UPDATE databases SET pageserver = ?2 WHERE id = ?1 AND pageserver IS NULL",
                params![database_id, to],
            )?,
        };
        Ok(changed == 1)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn configured() -> Vec<String> {
        vec!["ps1:1".to_owned(), "ps2:2".to_owned(), "ps3:3".to_owned()]
    }

    /// `databases` small databases (each at the floor) on `address`.
    fn small(address: Option<&str>, databases: u64) -> PageserverLoad {
        PageserverLoad {
            pageserver: address.map(str::to_owned),
            databases,
            weight_bytes: databases * DATABASE_WEIGHT_FLOOR_BYTES,
        }
    }

    #[test]
    fn the_least_loaded_live_pageserver_is_chosen() {
        let placed = vec![
            small(None, 2),
            small(Some("ps1:1"), 1),
            small(Some("ps2:2"), 2),
            small(Some("ps3:3"), 4),
        ];
        // NULL rows count for the first: ps1 holds 3, ps2 2, ps3 4.
        assert_eq!(choose_pageserver(&configured(), &[true, true, true], &placed), Some(1));
        // ps2 down: ps1 (3) beats ps3 (4).
        assert_eq!(choose_pageserver(&configured(), &[true, false, true], &placed), Some(0));
        assert_eq!(
            choose_pageserver(&configured(), &[false, false, true], &placed),
            Some(2)
        );
        assert_eq!(choose_pageserver(&configured(), &[false, false, false], &placed), None);
    }

    #[test]
    fn size_weighs_before_the_count() {
        let gib = 1024 * 1024 * 1024;
        // ps1: one database of 10 GiB; ps2: three small ones; ps3: three small ones and one of 1 GiB.
        let placed = vec![
            PageserverLoad {
                pageserver: Some("ps1:1".to_owned()),
                databases: 1,
                weight_bytes: 10 * gib,
            },
            small(Some("ps2:2"), 3),
            PageserverLoad {
                pageserver: Some("ps3:3".to_owned()),
                databases: 4,
                weight_bytes: 3 * DATABASE_WEIGHT_FLOOR_BYTES + gib,
            },
        ];
        assert_eq!(choose_pageserver(&configured(), &[true, true, true], &placed), Some(1));
        assert_eq!(choose_pageserver(&configured(), &[true, false, true], &placed), Some(2));
        // Equal weight: the fewer databases.
        let placed = vec![
            PageserverLoad {
                pageserver: Some("ps1:1".to_owned()),
                databases: 2,
                weight_bytes: 2 * gib,
            },
            PageserverLoad {
                pageserver: Some("ps2:2".to_owned()),
                databases: 1,
                weight_bytes: 2 * gib,
            },
        ];
        assert_eq!(choose_pageserver(&configured(), &[true, true, false], &placed), Some(1));
    }

    #[test]
    fn ties_go_to_the_first_configured_and_unknown_addresses_count_for_none() {
        assert_eq!(choose_pageserver(&configured(), &[true, true, true], &[]), Some(0));
        let placed = vec![small(Some("gone:9"), 7), small(Some("ps1:1"), 1)];
        assert_eq!(choose_pageserver(&configured(), &[true, true, true], &placed), Some(1));
        // A missing liveness answer is not live.
        assert_eq!(choose_pageserver(&configured(), &[false], &placed), None);
    }

    #[test]
    fn a_pageservers_weight_is_its_databases_sizes() {
        crate::store::scenarios::on_sqlite(a_pageservers_weight_is_its_databases_sizes_on);
    }

    /// Two databases on the first pageserver, one sampled at 1 GiB (its largest sample of the last hours), one
    /// never sampled (the floor); samples older than that window do not count.
    #[allow(clippy::unwrap_used)] // a test failure is a panic
    pub(crate) fn a_pageservers_weight_is_its_databases_sizes_on(open: crate::store::scenarios::Open<'_>) {
        use std::sync::Arc;

        use crate::store::consumption::BranchSample;
        use crate::store::databases::{NewDatabase, TimelineRow};
        use crate::store::labels::Labels;

        let store = open();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let verifier =
            Arc::new(compute::pg::ScramVerifier::from_password("pw", compute::pg::scram::ITERATIONS_DEFAULT).unwrap());
        let mut created = Vec::new();
        for (name, digit) in [("a", '1'), ("b", '2')] {
            let new = NewDatabase {
                project_id: project.id.clone(),
                name: name.to_owned(),
                region: "local".to_owned(),
                tenant_id: digit.to_string().repeat(32).parse().unwrap(),
                timeline: TimelineRow {
                    timeline_id: digit.to_string().repeat(32).parse().unwrap(),
                    ancestor_timeline_id: None,
                    start_lsn: cambium_types::Lsn(0x0100_0000),
                },
                branch_name: "main".to_owned(),
                password_verifier: Arc::clone(&verifier),
                labels: Labels::new(),
                suspend_timeout_seconds: 300,
            };
            created.push(store.create_database(&account, &new, 10).unwrap().unwrap());
        }
        assert_eq!(store.pageserver_loads().unwrap(), vec![small(None, 2)]);
        let gib: u64 = 1024 * 1024 * 1024;
        let sample = |size: u64| BranchSample {
            project_id: project.id.clone(),
            database_id: created[0].database.id.clone(),
            branch_id: created[0].branch.id.clone(),
            timeline_id: "1".repeat(32),
            start_lsn: 0x0100_0000,
            last_record_lsn: 0x0100_0000,
            logical_size_bytes: size,
            compute_active_ms: 0,
        };
        let hour = |hours_ago: i64| {
            let at = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(hours_ago);
            format!("{}:00:00Z", at.strftime("%Y-%m-%dT%H"))
        };
        store
            .record_consumption(&hour(5), "2000-01-01T00:00:00Z", &[sample(50 * gib)])
            .unwrap();
        store
            .record_consumption(&hour(1), "2000-01-01T00:00:00Z", &[sample(gib / 2)])
            .unwrap();
        store
            .record_consumption(&hour(0), "2000-01-01T00:00:00Z", &[sample(gib)])
            .unwrap();
        let loads = store.pageserver_loads().unwrap();
        assert_eq!(
            loads,
            vec![PageserverLoad {
                pageserver: None,
                databases: 2,
                weight_bytes: gib + DATABASE_WEIGHT_FLOOR_BYTES,
            }]
        );
    }

    #[test]
    #[allow(clippy::unwrap_used)] // a test failure is a panic
    fn placement_is_recorded_and_moved_conditionally() {
        use std::sync::Arc;

        use crate::store::databases::{NewDatabase, TimelineRow};
        use crate::store::labels::Labels;

        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let verifier = compute::pg::ScramVerifier::from_password("pw", compute::pg::scram::ITERATIONS_DEFAULT).unwrap();
        let tenant: TenantId = "0123456789abcdef0123456789abcdef".parse().unwrap();
        let new = NewDatabase {
            project_id: project.id.clone(),
            name: "d".to_owned(),
            region: "local".to_owned(),
            tenant_id: tenant,
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
        let database = store.create_database(&account, &new, 10).unwrap().unwrap().database.id;
        assert_eq!(store.pageserver_of_tenant(tenant).unwrap(), Some(None));
        assert_eq!(
            store.pageserver_of_tenant("f".repeat(32).parse().unwrap()).unwrap(),
            None
        );
        assert_eq!(store.pageserver_loads().unwrap(), vec![small(None, 1)]);
        // From NULL only while it is NULL.
        assert!(!store.move_pageserver(&database, Some("ps1:1"), "ps2:2").unwrap());
        assert!(store.move_pageserver(&database, None, "ps2:2").unwrap());
        assert!(!store.move_pageserver(&database, None, "ps1:1").unwrap());
        assert_eq!(
            store.pageserver_of_tenant(tenant).unwrap(),
            Some(Some("ps2:2".to_owned()))
        );
        assert!(store.move_pageserver(&database, Some("ps2:2"), "ps1:1").unwrap());
        assert_eq!(store.pageserver_loads().unwrap(), vec![small(Some("ps1:1"), 1)]);
        let placements = store.pageserver_placements().unwrap();
        assert_eq!(
            placements,
            vec![PageserverPlacement {
                database_id: database.clone(),
                tenant_id: tenant,
                pageserver: Some("ps1:1".to_owned()),
            }]
        );
        let placements = store.placements().unwrap();
        assert_eq!(placements[0].pageserver.as_deref(), Some("ps1:1"), "{placements:?}");

        // A failover is started only on a database no operation runs on, and then one at a time.
        use crate::store::operations::{Action, MovePageserverParams, NewOperation};
        let action = Action::FailoverPageserver(MovePageserverParams {
            from: Some("ps1:1".to_owned()),
            to: "ps2:2".to_owned(),
        });
        let new = NewOperation {
            project_id: &project.id,
            account_id: &account,
            database_id: Some(database.as_str()),
            branch_id: None,
            action: &action,
        };
        while let Some(running) = store.running_operation_on_database(&database).unwrap() {
            assert!(store.start_operation_on_idle_database(&new).unwrap().is_none());
            store.finish_operation(&running, Ok(())).unwrap();
        }
        let started = store.start_operation_on_idle_database(&new).unwrap().expect("started");
        assert_eq!(started.work().unwrap(), action);
        assert!(
            store.start_operation_on_idle_database(&new).unwrap().is_none(),
            "one at a time"
        );
        store.finish_operation(&started.id, Err("lost".to_owned())).unwrap();
        assert!(store.start_operation_on_idle_database(&new).unwrap().is_some());
    }
}
