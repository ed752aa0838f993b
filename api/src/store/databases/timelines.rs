//! Timeline rows: every timeline of a database that may still be on the storage, which of them something
//! still needs (a branch on it, or a timeline branched from it), and which of those need their safekeeper copies
//! (all but the retired: ancestors no branch is on, sealed on the pageserver).

use crate::store::sql::{params, OptionalExtension, Row, Transaction};
use cambium_types::{Lsn, TenantId, TimelineId};

use super::{lsn_from_sql, lsn_to_sql, parse_column};
use crate::store::{Store, StoreError};

/// A timeline row: one timeline of a database on the pageserver and the safekeepers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineRow {
    /// The timeline.
    pub timeline_id: TimelineId,
    /// The timeline it was branched from; `None` for a root.
    pub ancestor_timeline_id: Option<TimelineId>,
    /// The branch point (or a root's WAL start): its history at and below this LSN is the ancestor's.
    pub start_lsn: Lsn,
}

/// A timeline the storage must hold (see [`Store::live_timelines`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTimeline {
    /// Its database.
    pub database_id: String,
    /// Its database's tenant.
    pub tenant_id: TenantId,
    /// The timeline.
    pub timeline_id: TimelineId,
}

/// A timeline row `t` whose safekeeper copies something still needs: a branch is on it, or a timeline is
/// branched from it and it is not retired ([`Store::retire_timeline`]).
const LIVE_CONDITION: &str = "t.retired = 0 AND (EXISTS (SELECT 1 FROM branches b WHERE b.timeline_id = t.timeline_id)
    OR EXISTS (SELECT 1 FROM timelines c WHERE c.ancestor_timeline_id = t.timeline_id))";

pub(super) fn timeline_row(row: &Row<'_>) -> crate::store::sql::Result<TimelineRow> {
    let ancestor: Option<String> = row.get(1)?;
    Ok(TimelineRow {
        timeline_id: parse_column(row, 0)?,
        ancestor_timeline_id: match ancestor {
            Some(_) => Some(parse_column(row, 1)?),
            None => None,
        },
        start_lsn: lsn_from_sql(row.get(2)?)?,
    })
}

pub(super) fn insert_timeline(
    tx: &Transaction<'_>,
    database_id: &str,
    timeline: &TimelineRow,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO timelines (timeline_id, database_id, ancestor_timeline_id, start_lsn) VALUES (?1, ?2, ?3, ?4)",
        params![
            timeline.timeline_id.to_string(),
            database_id,
            timeline.ancestor_timeline_id.map(|t| t.to_string()),
            lsn_to_sql(timeline.start_lsn)?
        ],
    )?;
    Ok(())
}

impl Store {
    /// The timeline rows of database `database_id`.
    pub fn timelines_of(&self, database_id: &str) -> Result<Vec<TimelineRow>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT timeline_id, ancestor_timeline_id, start_lsn FROM timelines WHERE database_id = ?1 ORDER BY rowid",
        )?;
        let rows = stmt.query_map([database_id], timeline_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The timelines of database `database_id` that no branch is on and no timeline is branched from: safe to
    /// delete from the pageserver, children first (call again after deleting to get their ancestors).
    pub fn unreferenced_timelines(&self, database_id: &str) -> Result<Vec<TimelineId>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT timeline_id FROM timelines t WHERE database_id = ?1
               AND NOT EXISTS (SELECT 1 FROM branches b WHERE b.timeline_id = t.timeline_id)
               AND NOT EXISTS (SELECT 1 FROM timelines c WHERE c.ancestor_timeline_id = t.timeline_id)
             ORDER BY rowid",
        )?;
        let rows = stmt.query_map([database_id], |row| parse_column(row, 0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The timelines of database `database_id` that no branch is on and another timeline is branched from, not
    /// retired yet: the ones [`Store::retire_timeline`] is for. In creation order.
    pub fn retirable_timelines(&self, database_id: &str) -> Result<Vec<TimelineId>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT timeline_id FROM timelines t WHERE database_id = ?1 AND retired = 0
               AND NOT EXISTS (SELECT 1 FROM branches b WHERE b.timeline_id = t.timeline_id)
               AND EXISTS (SELECT 1 FROM timelines c WHERE c.ancestor_timeline_id = t.timeline_id)
             ORDER BY rowid",
        )?;
        let rows = stmt.query_map([database_id], |row| parse_column(row, 0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The retired timelines of database `database_id` ([`Store::retire_timeline`]).
    pub fn retired_timelines(&self, database_id: &str) -> Result<Vec<TimelineId>, StoreError> {
        let conn = self.conn()?;
        let mut stmt =
            conn.prepare("SELECT timeline_id FROM timelines WHERE database_id = ?1 AND retired = 1 ORDER BY rowid")?;
        let rows = stmt.query_map([database_id], |row| parse_column(row, 0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records timeline `id` retired: sealed on the pageserver, with everything its children read durable there,
    /// so its safekeeper copies are needed by nothing (any left is a leftover to delete) and the reconciler no
    /// longer repairs them. The row stays: the timeline is still on the pageserver, an ancestor.
    pub fn retire_timeline(&self, id: TimelineId) -> Result<(), StoreError> {
        let conn = self.conn()?;
        conn.execute(
            "UPDATE timelines SET retired = 1 WHERE timeline_id = ?1",
            [id.to_string()],
        )?;
        Ok(())
    }

    /// Every timeline whose safekeeper copies a served database needs (`active` or `suspended`; not one being
    /// made or whose creation failed): those a branch is on or another timeline is branched from, except the
    /// retired (an unreferenced one is a deletion not finished yet). In database order, then creation order.
    pub fn live_timelines(&self) -> Result<Vec<LiveTimeline>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT d.id, d.tenant_id, t.timeline_id FROM timelines t JOIN databases d ON d.id = t.database_id
             WHERE d.status IN ('active', 'suspended') AND ({LIVE_CONDITION})
             ORDER BY d.id, t.rowid"
        ))?;
        let rows = stmt.query_map([], |row| {
            Ok(LiveTimeline {
                database_id: row.get(0)?,
                tenant_id: parse_column(row, 1)?,
                timeline_id: parse_column(row, 2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The timelines of database `database_id` whose safekeeper copies something needs (a branch is on it, or
    /// another timeline is branched from it and it is not retired), whatever the database's status; in creation
    /// order.
    pub fn needed_timelines_of(&self, database_id: &str) -> Result<Vec<TimelineId>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT t.timeline_id FROM timelines t WHERE t.database_id = ?1 AND ({LIVE_CONDITION}) ORDER BY t.rowid"
        ))?;
        let rows = stmt.query_map([database_id], |row| parse_column(row, 0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether timeline `id` is still one [`Store::live_timelines`] would list.
    pub fn is_live_timeline(&self, id: TimelineId) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!(
                    "SELECT 1 FROM timelines t JOIN databases d ON d.id = t.database_id
                     WHERE t.timeline_id = ?1 AND d.status IN ('active', 'suspended') AND ({LIVE_CONDITION})"
                ),
                [id.to_string()],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Forgets timeline `id` (the pageserver deleted it).
    pub fn remove_timeline(&self, id: TimelineId) -> Result<(), StoreError> {
        let conn = self.conn()?;
        conn.execute("DELETE FROM timelines WHERE timeline_id = ?1", [id.to_string()])?;
        conn.execute(
            "DELETE FROM timeline_safekeepers WHERE timeline_id = ?1",
            [id.to_string()],
        )?;
        Ok(())
    }
}
