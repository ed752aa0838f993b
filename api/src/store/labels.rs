//! Labels: a small string map on projects, databases and branches, kept as a JSON object in each table's
//! `labels` column (migration 6), and the `?label=key:value` filter of their listings.
//!
//! The bounds are the HTTP layer's to check (`http::labels`) before anything is stored; a stored value that is not
//! a JSON object of strings is [`StoreError::Corrupt`]-like (a row conversion error), never a panic.

use std::collections::BTreeMap;

use crate::store::sql::{params, Dialect, Row};

use super::{AccountId, Store, StoreError};

/// A resource's labels, sorted by key.
pub type Labels = BTreeMap<String, String>;

/// A listing's label filter: resources with label `key`, and if `value` is given, with that value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelFilter {
    /// The label's key.
    pub key: String,
    /// Its value; `None` matches any.
    pub value: Option<String>,
}

/// The SQL condition of a listing that binds the filter as `?4` (key, NULL for no filter) and `?5` (value, NULL
/// for any) and reads the row's `labels` column, in `dialect`: the JSON functions differ (and PostgreSQL must be
/// told the parameters' type where `IS NULL` alone would not say it).
pub(crate) fn label_condition(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "(?4 IS NULL OR EXISTS (SELECT 1 FROM json_each(labels) \
             WHERE json_each.key = ?4 AND (?5 IS NULL OR json_each.value = ?5)))"
        }
        Dialect::Postgres => {
            "(CAST(?4 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM jsonb_each_text(CAST(labels AS JSONB)) AS l \
             WHERE l.key = ?4 AND (CAST(?5 AS TEXT) IS NULL OR l.value = ?5)))"
        }
    }
}

/// `filter` as the `?4` and `?5` parameters of [`LABEL_CONDITION`].
pub(crate) fn filter_params(filter: Option<&LabelFilter>) -> (Option<&str>, Option<&str>) {
    match filter {
        Some(filter) => (Some(filter.key.as_str()), filter.value.as_deref()),
        None => (None, None),
    }
}

/// `labels` as the column stores them: a JSON object.
pub(crate) fn labels_to_sql(labels: &Labels) -> String {
    // A map of strings to strings always serializes.
    serde_json::to_string(labels).expect("a string map serializes")
}

/// The `labels` column at `index` of `row`.
pub(crate) fn labels_column(row: &Row<'_>, index: usize) -> crate::store::sql::Result<Labels> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text).map_err(|error| crate::store::sql::SqlError::column(index, Box::new(error)))
}

/// A resource that has labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Labelled {
    /// A project (`proj_…`).
    Project,
    /// A database (`db_…`).
    Database,
    /// A branch (`br_…`).
    Branch,
}

impl Store {
    /// Replaces the labels of `account`'s `kind` resource `id`; returns whether it exists.
    pub fn set_labels(
        &self,
        account: &AccountId,
        kind: Labelled,
        id: &str,
        labels: &Labels,
    ) -> Result<bool, StoreError> {
        let sql = match kind {
            Labelled::Project => "UPDATE projects SET labels = ?3 WHERE id = ?1 AND account_id = ?2",
            Labelled::Database => "UPDATE databases SET labels = ?3 WHERE id = ?1 AND account_id = ?2",
            Labelled::Branch => {
                "UPDATE branches SET labels = ?3 WHERE id = ?1
                 AND database_id IN (SELECT id FROM databases WHERE account_id = ?2)"
            }
        };
        let conn = self.conn()?;
        let changed = conn.execute(sql, params![id, account.0, labels_to_sql(labels)])?;
        Ok(changed == 1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
pub(crate) mod tests {
    use super::*;

    #[test]
    fn listings_filter_on_a_key_or_a_key_and_value() {
        crate::store::scenarios::on_sqlite(listings_filter_on_a_key_or_a_key_and_value_on);
    }

    /// [`listings_filter_on_a_key_or_a_key_and_value`] on the store `open` opens (SQLite here, PostgreSQL in `scenarios`).
    pub(crate) fn listings_filter_on_a_key_or_a_key_and_value_on(open: crate::store::scenarios::Open<'_>) {
        let store = open();
        let account = store.create_account().unwrap();
        let mut ids = Vec::new();
        for (name, labels) in [
            ("a", vec![("env", "preview"), ("pr", "12")]),
            ("b", vec![("env", "prod")]),
            ("c", vec![]),
        ] {
            let labels: Labels = labels.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
            let project = store.create_project(&account, name, 10, &labels).unwrap();
            assert_eq!(project.labels, labels);
            ids.push(project.id);
        }
        let names = |filter: Option<LabelFilter>| {
            store
                .list_projects(&account, None, 10, filter.as_ref())
                .unwrap()
                .items
                .into_iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
        };
        let filter = |key: &str, value: Option<&str>| {
            Some(LabelFilter {
                key: key.to_owned(),
                value: value.map(str::to_owned),
            })
        };
        assert_eq!(names(None), ["a", "b", "c"]);
        assert_eq!(names(filter("env", None)), ["a", "b"]);
        assert_eq!(names(filter("env", Some("prod"))), ["b"]);
        assert_eq!(names(filter("env", Some(""))), Vec::<String>::new());
        assert_eq!(names(filter("pr", Some("12"))), ["a"]);
        // A key with JSON path characters is a plain key.
        assert_eq!(names(filter("$.env", None)), Vec::<String>::new());
        let relabelled: Labels = [("env".to_owned(), "prod".to_owned())].into();
        assert!(store
            .set_labels(&account, Labelled::Project, &ids[2], &relabelled)
            .unwrap());
        assert_eq!(names(filter("env", Some("prod"))), ["b", "c"]);
        let stranger = store.create_account().unwrap();
        assert!(!store
            .set_labels(&stranger, Labelled::Project, &ids[2], &Labels::new())
            .unwrap());
        drop(store);
        let store = open();
        assert_eq!(
            store.get_project(&account, &ids[2]).unwrap().unwrap().labels,
            relabelled
        );
    }
}
