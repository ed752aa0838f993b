//! Each timeline's safekeeper set (issue 17 item 3, migration 14): the addresses of the safekeepers that hold its
//! WAL, as a JSON list in `timeline_safekeepers`, one row per timeline.
//!
//! A set is recorded *before* the timeline is made on the storage (so the storage is made on a recorded set, and
//! a creation retried after a crash reuses it) and is the only thing a replacement changes (one conditional
//! update). A timeline with no row (made before sets existed) is on the first three configured safekeepers
//! (`safekeeper_sets::default_set`). A row whose timeline row was never written (a branch creation cut short) is
//! counted by nothing and costs one row.

use std::collections::HashMap;

use cambium_types::TimelineId;

use super::sql::{params, OptionalExtension};
use super::{Store, StoreError};

fn set_to_sql(set: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(set).map_err(|e| StoreError::Corrupt(format!("a safekeeper set as JSON: {e}")))
}

fn set_from_sql(text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("safekeeper set {text:?}: {e}")))
}

impl Store {
    /// The recorded set of `timeline`; `None` if it has none (the default set).
    pub fn timeline_safekeepers(&self, timeline: TimelineId) -> Result<Option<Vec<String>>, StoreError> {
        let conn = self.conn()?;
        let text: Option<String> = conn
            .query_row(
                "SELECT safekeepers FROM timeline_safekeepers WHERE timeline_id = ?1",
                [timeline.to_string()],
                |row| row.get(0),
            )
            .optional()?;
        text.as_deref().map(set_from_sql).transpose()
    }

    /// Records `set` for `timeline` of database `database_id` unless it has one; returns the recorded set (the
    /// one given, or the one recorded before).
    pub fn record_timeline_safekeepers(
        &self,
        database_id: &str,
        timeline: TimelineId,
        set: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let text = set_to_sql(set)?;
        {
            let conn = self.conn()?;
            conn.execute(
                "INSERT INTO timeline_safekeepers (timeline_id, database_id, safekeepers) VALUES (?1, ?2, ?3)
                 ON CONFLICT (timeline_id) DO NOTHING",
                params![timeline.to_string(), database_id, text],
            )?;
        }
        self.timeline_safekeepers(timeline)?
            .ok_or_else(|| StoreError::Corrupt(format!("timeline {timeline}'s set vanished after its insert")))
    }

    /// Moves `timeline` from set `old` to set `new` if its set is still `old` (`old` is `None` for a timeline with
    /// no recorded set, then recorded for database `database_id`); returns whether it moved. One statement: two
    /// replacements racing change it once.
    pub fn replace_timeline_safekeepers(
        &self,
        database_id: &str,
        timeline: TimelineId,
        old: Option<&[String]>,
        new: &[String],
    ) -> Result<bool, StoreError> {
        let new_text = set_to_sql(new)?;
        let conn = self.conn()?;
        let changed = match old {
            Some(old) => conn.execute(
                "UPDATE timeline_safekeepers SET safekeepers = ?1 WHERE timeline_id = ?2 AND safekeepers = ?3",
                params![new_text, timeline.to_string(), set_to_sql(old)?],
            )?,
            None => conn.execute(
                "INSERT INTO timeline_safekeepers (timeline_id, database_id, safekeepers) VALUES (?1, ?2, ?3)
                 ON CONFLICT (timeline_id) DO NOTHING",
                params![timeline.to_string(), database_id, new_text],
            )?,
        };
        Ok(changed == 1)
    }

    /// Every timeline row's recorded set (`None`: the default set), for counting what each safekeeper holds.
    pub fn all_timeline_safekeepers(&self) -> Result<HashMap<TimelineId, Option<Vec<String>>>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT t.timeline_id, s.safekeepers FROM timelines t
             LEFT JOIN timeline_safekeepers s ON s.timeline_id = t.timeline_id",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
        })?;
        let mut sets = HashMap::new();
        for row in rows {
            let (id, text) = row?;
            let id: TimelineId = id
                .parse()
                .map_err(|_| StoreError::Corrupt(format!("timeline id {id:?}")))?;
            sets.insert(id, text.as_deref().map(set_from_sql).transpose()?);
        }
        Ok(sets)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use std::sync::Arc;

    use cambium_types::{Lsn, TimelineId};

    use crate::store::databases::{NewDatabase, TimelineRow};
    use crate::store::labels::Labels;
    use crate::store::scenarios::Open;

    fn set(members: &[&str]) -> Vec<String> {
        members.iter().map(|m| (*m).to_owned()).collect()
    }

    #[test]
    fn a_set_is_recorded_once_and_moved_only_from_what_it_is() {
        crate::store::scenarios::on_sqlite(a_set_is_recorded_once_and_moved_only_from_what_it_is_on);
    }

    pub(crate) fn a_set_is_recorded_once_and_moved_only_from_what_it_is_on(open: Open<'_>) {
        let store = open();
        let account = store.create_account().unwrap();
        let project = store.create_project(&account, "p", 10, &Labels::new()).unwrap();
        let verifier = compute::pg::ScramVerifier::from_password("pw", compute::pg::scram::ITERATIONS_DEFAULT).unwrap();
        let root: TimelineId = "1".repeat(32).parse().unwrap();
        let new = NewDatabase {
            project_id: project.id.clone(),
            name: "d".to_owned(),
            region: "local".to_owned(),
            tenant_id: "0123456789abcdef0123456789abcdef".parse().unwrap(),
            timeline: TimelineRow {
                timeline_id: root,
                ancestor_timeline_id: None,
                start_lsn: Lsn(0x0100_0000),
            },
            branch_name: "main".to_owned(),
            password_verifier: Arc::new(verifier),
            labels: Labels::new(),
            suspend_timeout_seconds: 300,
        };
        let database = store.create_database(&account, &new, 10).unwrap().unwrap().database;
        // No set recorded: the default (None), and counted as such.
        assert_eq!(store.timeline_safekeepers(root).unwrap(), None);
        assert_eq!(store.all_timeline_safekeepers().unwrap().get(&root), Some(&None));
        // Recorded once: a second record (a retried creation) gets the first.
        let first = set(&["a", "b", "c"]);
        assert_eq!(
            store.record_timeline_safekeepers(&database.id, root, &first).unwrap(),
            first
        );
        assert_eq!(
            store
                .record_timeline_safekeepers(&database.id, root, &set(&["c", "d", "e"]))
                .unwrap(),
            first
        );
        assert_eq!(
            store.all_timeline_safekeepers().unwrap().get(&root),
            Some(&Some(first.clone()))
        );
        // Moved only from what it is.
        let moved = set(&["a", "d", "c"]);
        assert!(!store
            .replace_timeline_safekeepers(&database.id, root, Some(&set(&["x", "y", "z"])), &moved)
            .unwrap());
        assert!(store
            .replace_timeline_safekeepers(&database.id, root, Some(&first), &moved)
            .unwrap());
        assert!(!store
            .replace_timeline_safekeepers(&database.id, root, Some(&first), &moved)
            .unwrap());
        assert_eq!(open().timeline_safekeepers(root).unwrap(), Some(moved));
        // A set for a timeline with no row yet (a branch being made) is counted by nothing; a timeline with no
        // recorded set moves from the default once.
        let child: TimelineId = "2".repeat(32).parse().unwrap();
        assert!(store
            .replace_timeline_safekeepers(&database.id, child, None, &first)
            .unwrap());
        assert!(!store
            .replace_timeline_safekeepers(&database.id, child, None, &first)
            .unwrap());
        assert!(!store.all_timeline_safekeepers().unwrap().contains_key(&child));
        // Forgotten with the timeline.
        store.remove_timeline(child).unwrap();
        assert_eq!(store.timeline_safekeepers(child).unwrap(), None);
    }
}
