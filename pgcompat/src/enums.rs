//! Enum types as the layer keeps them: one row of `_cambium_enums` per type inside the database (its name and
//! its labels with their sort orders), so enum types branch and time-travel with the data.
//!
//! A value of an enum type is stored as its label's text, in a column whose collation is the type's
//! (`pg_enum_<oid>`, registered on each session's connection from these rows), so `=`, `<`, `ORDER BY`,
//! `min`/`max` and indexes follow the declaration order as in PostgreSQL. Labels are checked where a value
//! meets the type (`functions::cast`: 22P02 `invalid input value for enum`).
//!
//! OIDs: a type's is [`ENUM_OID_BASE`] plus [`ENUM_OID_STRIDE`] times its row's never-reused id; its array
//! type's is one more, its labels' two more plus their creation index. Relations' OIDs stay far below.

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::quote_literal;
use crate::error::{PgError, DUPLICATE_OBJECT, INVALID_PARAMETER_VALUE};

/// The catalog table of enum types.
pub const ENUMS_TABLE: &str = "_cambium_enums";

/// The statement that makes the table (inside the DDL's transaction). `labels` is a JSON array of
/// `[label, sort order]` in creation order.
pub const CREATE_ENUMS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_enums (\
     id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, labels TEXT NOT NULL)";

/// The first enum type OID.
pub const ENUM_OID_BASE: u32 = 0x6000_0000;
/// OIDs between two enum types: the type, its array type and up to [`LABELS_MAX`] labels.
pub const ENUM_OID_STRIDE: u32 = 1024;
/// Most labels an enum type has (each needs an OID of the type's range).
pub const LABELS_MAX: usize = 1000;
/// Longest label, in bytes (PostgreSQL's `NAMEDATALEN - 1`).
pub const LABEL_BYTES_MAX: usize = 63;

/// The collation of an enum type's columns and casts.
pub fn collation_name(oid: u32) -> String {
    format!("pg_enum_{oid}")
}

/// An enum type: its OID, name and labels in creation order with their sort orders.
#[derive(Clone, Debug, PartialEq)]
pub struct EnumType {
    /// The type's OID.
    pub oid: u32,
    /// Its name.
    pub name: String,
    labels: Vec<(String, f64)>,
}

/// Where `ALTER TYPE … ADD VALUE` puts the new label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// After the last.
    Last,
    /// `BEFORE label`.
    Before(String),
    /// `AFTER label`.
    After(String),
}

fn check_label(label: &str) -> Result<(), PgError> {
    if label.is_empty() || label.len() > LABEL_BYTES_MAX {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            format!("invalid enum label \"{label}\""),
        ));
    }
    Ok(())
}

impl EnumType {
    /// A new type (`CREATE TYPE name AS ENUM (labels)`): labels checked, sorted as given.
    pub fn create(oid: u32, name: &str, labels: &[String]) -> Result<EnumType, PgError> {
        if labels.len() > LABELS_MAX {
            return Err(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!("an enum type has at most {LABELS_MAX} labels"),
            ));
        }
        let mut made = EnumType {
            oid,
            name: name.to_owned(),
            labels: Vec::with_capacity(labels.len()),
        };
        for (index, label) in labels.iter().enumerate() {
            check_label(label)?;
            if made.has(label) {
                // PostgreSQL's words: the unique index of `pg_enum` refuses the second.
                return Err(PgError::new(
                    crate::error::UNIQUE_VIOLATION,
                    "duplicate key value violates unique constraint \"pg_enum_typid_label_index\"",
                ));
            }
            made.labels.push((label.clone(), (index + 1) as f64));
        }
        Ok(made)
    }

    /// Whether `label` is one of the type's.
    pub fn has(&self, label: &str) -> bool {
        self.labels.iter().any(|(l, _)| l == label)
    }

    /// The labels in sort order.
    pub fn sorted(&self) -> Vec<&str> {
        let mut labels: Vec<&(String, f64)> = self.labels.iter().collect();
        labels.sort_by(|a, b| a.1.total_cmp(&b.1));
        labels.into_iter().map(|(l, _)| l.as_str()).collect()
    }

    /// Each label with its creation index and sort order (for `pg_enum`).
    pub fn labels(&self) -> &[(String, f64)] {
        &self.labels
    }

    /// The sort order of each label, for the type's collation.
    pub fn sort_orders(&self) -> HashMap<String, f64> {
        self.labels.iter().cloned().collect()
    }

    /// `ALTER TYPE … ADD VALUE [IF NOT EXISTS] label [BEFORE|AFTER other]`: the type with the label, or
    /// `None` when it exists and `if_not_exists` (PostgreSQL's notice, nothing changed).
    pub fn add_value(
        &self,
        label: &str,
        position: &Position,
        if_not_exists: bool,
    ) -> Result<Option<EnumType>, PgError> {
        check_label(label)?;
        if self.has(label) {
            if if_not_exists {
                return Ok(None);
            }
            return Err(PgError::new(
                DUPLICATE_OBJECT,
                format!("enum label \"{label}\" already exists"),
            ));
        }
        if self.labels.len() >= LABELS_MAX {
            return Err(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!("an enum type has at most {LABELS_MAX} labels"),
            ));
        }
        let orders: Vec<f64> = {
            let mut o: Vec<f64> = self.labels.iter().map(|(_, s)| *s).collect();
            o.sort_by(f64::total_cmp);
            o
        };
        let order_of = |neighbor: &str| -> Result<f64, PgError> {
            self.labels
                .iter()
                .find(|(l, _)| l == neighbor)
                .map(|(_, s)| *s)
                .ok_or_else(|| {
                    PgError::new(
                        INVALID_PARAMETER_VALUE,
                        format!("\"{neighbor}\" is not an existing enum label"),
                    )
                })
        };
        let sort = match position {
            Position::Last => orders.last().map_or(1.0, |m| m + 1.0),
            Position::Before(neighbor) => {
                let at = order_of(neighbor)?;
                let below = orders.iter().rev().find(|o| **o < at).copied();
                below.map_or(at - 1.0, |b| (b + at) / 2.0)
            }
            Position::After(neighbor) => {
                let at = order_of(neighbor)?;
                let above = orders.iter().find(|o| **o > at).copied();
                above.map_or(at + 1.0, |a| (a + at) / 2.0)
            }
        };
        let mut added = self.clone();
        added.labels.push((label.to_owned(), sort));
        Ok(Some(added))
    }

    /// `ALTER TYPE … RENAME VALUE from TO to`.
    pub fn rename_value(&self, from: &str, to: &str) -> Result<EnumType, PgError> {
        check_label(to)?;
        if !self.has(from) {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!("\"{from}\" is not an existing enum label"),
            ));
        }
        if self.has(to) {
            return Err(PgError::new(
                DUPLICATE_OBJECT,
                format!("enum label \"{to}\" already exists"),
            ));
        }
        let mut renamed = self.clone();
        for (label, _) in &mut renamed.labels {
            if label == from {
                *label = to.to_owned();
            }
        }
        Ok(renamed)
    }

    /// The labels as the table keeps them.
    pub fn labels_json(&self) -> String {
        serde_json::Value::Array(self.labels.iter().map(|(l, s)| serde_json::json!([l, s])).collect()).to_string()
    }

    /// A type read from its row; `None` for text this version did not write.
    pub fn from_row(id: i64, name: &str, labels: &str) -> Option<EnumType> {
        let parsed: serde_json::Value = serde_json::from_str(labels).ok()?;
        let labels = parsed
            .as_array()?
            .iter()
            .map(|pair| Some((pair.get(0)?.as_str()?.to_owned(), pair.get(1)?.as_f64()?)))
            .collect::<Option<Vec<_>>>()?;
        Some(EnumType {
            oid: oid_of(id)?,
            name: name.to_owned(),
            labels,
        })
    }

    /// The statement that stores this type's labels over its row.
    pub fn update_sql(&self) -> String {
        format!(
            "UPDATE _cambium_enums SET labels = {} WHERE name = {}",
            quote_literal(&self.labels_json()),
            quote_literal(&self.name)
        )
    }
}

/// The OID of the type whose row has this id (`None` past the OID space).
pub fn oid_of(id: i64) -> Option<u32> {
    let id = u32::try_from(id).ok()?;
    id.checked_mul(ENUM_OID_STRIDE)?.checked_add(ENUM_OID_BASE)
}

/// The statement that stores a new type (its id, and so its OID, given by the table).
pub fn insert_sql(name: &str, labels: &EnumType) -> String {
    format!(
        "INSERT INTO _cambium_enums (name, labels) VALUES ({}, {})",
        quote_literal(name),
        quote_literal(&labels.labels_json())
    )
}

/// The enum types of a database at one `schema_version`.
#[derive(Clone, Debug, Default)]
pub struct EnumCatalog {
    by_oid: HashMap<u32, Arc<EnumType>>,
}

impl EnumCatalog {
    /// The types read from `_cambium_enums` (if it exists).
    pub fn load(conn: &rusqlite::Connection) -> rusqlite::Result<EnumCatalog> {
        let exists: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_cambium_enums')",
            [],
            |row| row.get(0),
        )?;
        let mut by_oid = HashMap::new();
        if exists {
            let mut stmt = conn.prepare_cached("SELECT id, name, labels FROM _cambium_enums")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let (id, name, labels): (i64, String, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
                // A row this version cannot read is left out (its columns read as text), never an error.
                if let Some(ty) = EnumType::from_row(id, &name, &labels) {
                    by_oid.insert(ty.oid, Arc::new(ty));
                }
            }
        }
        Ok(EnumCatalog { by_oid })
    }

    /// The type with this OID.
    pub fn by_oid(&self, oid: u32) -> Option<&Arc<EnumType>> {
        self.by_oid.get(&oid)
    }

    /// The type of this name (as folded).
    pub fn by_name(&self, name: &str) -> Option<&Arc<EnumType>> {
        self.by_oid.values().find(|t| t.name == name)
    }

    /// Every type.
    pub fn all(&self) -> impl Iterator<Item = &Arc<EnumType>> {
        self.by_oid.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mood() -> EnumType {
        EnumType::create(
            ENUM_OID_BASE,
            "mood",
            &["sad".to_owned(), "ok".to_owned(), "happy".to_owned()],
        )
        .expect("valid")
    }

    #[test]
    fn added_labels_sort_where_asked() {
        let m = mood();
        let m = m
            .add_value("meh", &Position::Before("ok".to_owned()), false)
            .expect("valid")
            .expect("added");
        let m = m
            .add_value("ecstatic", &Position::Last, false)
            .expect("valid")
            .expect("added");
        let m = m
            .add_value("low", &Position::After("sad".to_owned()), false)
            .expect("valid")
            .expect("added");
        let m = m
            .add_value("awful", &Position::Before("sad".to_owned()), false)
            .expect("valid")
            .expect("added");
        assert_eq!(m.sorted(), ["awful", "sad", "low", "meh", "ok", "happy", "ecstatic"]);
        assert_eq!(m.add_value("ok", &Position::Last, true), Ok(None));
        assert_eq!(
            m.add_value("ok", &Position::Last, false).map_err(|e| e.code),
            Err(DUPLICATE_OBJECT)
        );
        assert_eq!(
            m.add_value("x", &Position::After("nope".to_owned()), false)
                .map_err(|e| e.code),
            Err(INVALID_PARAMETER_VALUE)
        );
        let read = EnumType::from_row(0, "mood", &m.labels_json()).expect("reads back");
        assert_eq!(read.sorted(), m.sorted());
    }

    #[test]
    fn labels_are_checked() {
        assert!(EnumType::create(ENUM_OID_BASE, "e", &["a".to_owned(), "a".to_owned()]).is_err());
        assert!(EnumType::create(ENUM_OID_BASE, "e", &["x".repeat(64)]).is_err());
        assert_eq!(
            mood().rename_value("ok", "fine").expect("valid").sorted(),
            ["sad", "fine", "happy"]
        );
        assert_eq!(oid_of(1), Some(ENUM_OID_BASE + ENUM_OID_STRIDE));
        assert_eq!(oid_of(i64::MAX), None);
    }
}
