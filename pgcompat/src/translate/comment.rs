//! `COMMENT ON TABLE|COLUMN|VIEW|INDEX … IS '…' | NULL`: the text kept in `_cambium_comments` inside the
//! database.

use sqlparser::ast::ObjectName;

use super::ddl::{ddl, fold_name};
use super::Translation;
use crate::catalog;
use crate::error::PgError;

/// The table that keeps `COMMENT ON` text (for `obj_description` and `\\d+`).
pub const CREATE_COMMENTS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_comments (\
     kind TEXT NOT NULL, object TEXT NOT NULL, sub TEXT NOT NULL DEFAULT '', comment TEXT NOT NULL, \
     PRIMARY KEY (kind, object, sub)) WITHOUT ROWID";

/// `COMMENT ON TABLE|COLUMN|VIEW|INDEX … IS '…' | NULL`.
pub(crate) fn comment(
    object_type: sqlparser::ast::CommentObject,
    name: &ObjectName,
    text: Option<&str>,
) -> Result<Translation, PgError> {
    use sqlparser::ast::CommentObject;
    let (kind, object, sub) = match object_type {
        CommentObject::Column => {
            let parts: Vec<String> = name
                .0
                .iter()
                .map(|p| p.to_string().trim_matches('"').to_ascii_lowercase())
                .collect();
            match parts.as_slice() {
                [.., table, column] => ("column", table.clone(), column.clone()),
                _ => return Err(PgError::unsupported("COMMENT ON COLUMN without a table")),
            }
        }
        CommentObject::Table
        | CommentObject::View
        | CommentObject::Index
        | CommentObject::Schema
        | CommentObject::Database => (
            if matches!(object_type, CommentObject::Column) {
                "column"
            } else {
                "relation"
            },
            fold_name(name),
            String::new(),
        ),
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
