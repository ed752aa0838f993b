//! `COMMENT ON TABLE|VIEW|INDEX|SEQUENCE|COLUMN|SCHEMA|TYPE|DATABASE … IS '…' | NULL`: the text kept in
//! `_cambium_comments` inside the database (so it branches, restores and time-travels with the data), keyed by
//! the object's kind and stored name (a relation's SQLite name, see `crate::schemas`); `pg_description`,
//! `obj_description` and `col_description` read it back by OID (`crate::pg_catalog`).

use sqlparser::ast::{CommentObject, ObjectName};

use super::ddl::ddl;
use super::Translation;
use crate::catalog::{self, Catalog};
use crate::error::{PgError, UNDEFINED_COLUMN, UNDEFINED_OBJECT, UNDEFINED_TABLE};

/// The table that keeps `COMMENT ON` text. `kind`: `relation`, `column` (`sub` the column), `schema`,
/// `type`, `database`; `object`: the stored name.
pub const CREATE_COMMENTS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_comments (\
     kind TEXT NOT NULL, object TEXT NOT NULL, sub TEXT NOT NULL DEFAULT '', comment TEXT NOT NULL, \
     PRIMARY KEY (kind, object, sub)) WITHOUT ROWID";

/// The comments table's name.
const COMMENTS_TABLE: &str = "_cambium_comments";

/// `COMMENT ON … IS '…' | NULL`.
pub(crate) fn comment(
    catalog: &Catalog,
    object_type: CommentObject,
    name: &ObjectName,
    text: Option<&str>,
) -> Result<Translation, PgError> {
    let (kind, object, sub) = match object_type {
        CommentObject::Column => column(catalog, name)?,
        CommentObject::Table
        | CommentObject::View
        | CommentObject::Index
        | CommentObject::Sequence
        | CommentObject::MaterializedView
        | CommentObject::ForeignTable => ("relation", relation(catalog, name)?, String::new()),
        CommentObject::Schema => {
            let schema = super::schema::folded_parts(name).join(".");
            if !catalog.schema_exists(&schema) {
                return Err(PgError::new(
                    crate::error::INVALID_SCHEMA_NAME,
                    format!("schema \"{schema}\" does not exist"),
                ));
            }
            ("schema", schema, String::new())
        }
        CommentObject::Type => ("type", enum_type(catalog, name)?, String::new()),
        CommentObject::Database => ("database", super::schema::folded_parts(name).join("."), String::new()),
        other => return Err(PgError::unsupported(format!("COMMENT ON {other}"))),
    };
    let step = match text {
        Some(text) => format!(
            "INSERT OR REPLACE INTO _cambium_comments (kind, object, sub, comment) VALUES ({}, {}, {}, {})",
            catalog::quote_literal(kind),
            catalog::quote_literal(&object),
            catalog::quote_literal(&sub),
            catalog::quote_literal(text)
        ),
        None => format!(
            "DELETE FROM _cambium_comments WHERE kind = {} AND object = {} AND sub = {}",
            catalog::quote_literal(kind),
            catalog::quote_literal(&object),
            catalog::quote_literal(&sub)
        ),
    };
    Ok(ddl("COMMENT", vec![CREATE_COMMENTS_TABLE.to_owned(), step]))
}

/// The stored name of an existing relation (42P01 when there is none).
fn relation(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    let stored = super::schema::existing(catalog, name)?;
    if !catalog.relation_exists(&stored) {
        return Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{name}\" does not exist"),
        ));
    }
    Ok(stored.to_ascii_lowercase())
}

/// `table.column` (the table possibly qualified): the table's stored name and the column.
fn column(catalog: &Catalog, name: &ObjectName) -> Result<(&'static str, String, String), PgError> {
    let Some((column, table)) = name.0.split_last() else {
        return Err(PgError::unsupported("COMMENT ON COLUMN without a table"));
    };
    if table.is_empty() {
        return Err(PgError::new(
            crate::error::SYNTAX_ERROR,
            "column name must be qualified",
        ));
    }
    let table = relation(catalog, &ObjectName(table.to_vec()))?;
    let column = super::schema::folded_parts(&ObjectName(vec![column.clone()])).join(".");
    let known = catalog.table(&table).is_none_or(|t| t.column(&column).is_some());
    if !known {
        return Err(PgError::new(
            UNDEFINED_COLUMN,
            format!("column \"{column}\" of relation \"{table}\" does not exist"),
        ));
    }
    Ok(("column", table, column))
}

/// The stored name of an existing enum type.
fn enum_type(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    let (schema, bare) = super::schema::split_name(name)?;
    let candidates: Vec<String> = match schema {
        Some(schema) => vec![super::schema::qualified(catalog, &schema, &bare)?],
        None => catalog
            .search_path()
            .iter()
            .map(|s| crate::schemas::sqlite_name(s, &bare))
            .collect(),
    };
    candidates
        .into_iter()
        .find(|stored| catalog.enums().by_name(stored).is_some())
        .ok_or_else(|| PgError::new(UNDEFINED_OBJECT, format!("type \"{name}\" does not exist")))
}

/// The steps that forget the comments of a relation being dropped (none while no comment was ever made).
pub(crate) fn forget_relation(catalog: &Catalog, sqlite_name: &str) -> Option<String> {
    catalog.relation_exists(COMMENTS_TABLE).then(|| {
        format!(
            "DELETE FROM _cambium_comments WHERE kind IN ('relation', 'column') AND object = {}",
            catalog::quote_literal(&sqlite_name.to_ascii_lowercase())
        )
    })
}

/// The step that moves a relation's comments to its new name.
pub(crate) fn rename_relation(catalog: &Catalog, from: &str, to: &str) -> Option<String> {
    catalog.relation_exists(COMMENTS_TABLE).then(|| {
        format!(
            "UPDATE _cambium_comments SET object = {} WHERE kind IN ('relation', 'column') AND object = {}",
            catalog::quote_literal(&to.to_ascii_lowercase()),
            catalog::quote_literal(&from.to_ascii_lowercase())
        )
    })
}

/// The step that forgets a schema's comment.
pub(crate) fn forget_schema(catalog: &Catalog, schema: &str) -> Option<String> {
    catalog.relation_exists(COMMENTS_TABLE).then(|| {
        format!(
            "DELETE FROM _cambium_comments WHERE kind = 'schema' AND object = {}",
            catalog::quote_literal(schema)
        )
    })
}

/// The step that moves a schema's comment to its new name.
pub(crate) fn rename_schema(catalog: &Catalog, from: &str, to: &str) -> Option<String> {
    catalog.relation_exists(COMMENTS_TABLE).then(|| {
        format!(
            "UPDATE _cambium_comments SET object = {} WHERE kind = 'schema' AND object = {}",
            catalog::quote_literal(to),
            catalog::quote_literal(from)
        )
    })
}
