//! Materialized views: a table made and filled as `CREATE TABLE … AS` makes one (its columns named and typed
//! as the query's), whose defining query (as PostgreSQL text) is kept in `_cambium_matviews` so that
//! `REFRESH MATERIALIZED VIEW` empties and fills it again, in the steps of one statement (all or nothing,
//! readers see the old rows or the new). `DROP MATERIALIZED VIEW` drops both. `CONCURRENTLY` changes
//! nothing here (SQLite readers never wait for the writer); `WITH NO DATA` (an unpopulated view) and a
//! column list are refused with 0A000.

use rusqlite::{Connection, OptionalExtension};
use sqlparser::ast::{CreateView, ObjectName, ObjectType, RefreshMaterializedView, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::{Kind, Translation};
use crate::catalog::{quote_ident, quote_literal, Catalog};
use crate::error::{PgError, SYNTAX_ERROR, UNDEFINED_TABLE, WRONG_OBJECT_TYPE};

/// The table of the materialized views' definitions (a `_cambium_` name: hidden from the catalog views).
pub const MATVIEWS_TABLE: &str = "_cambium_matviews";

const CREATE_MATVIEWS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_matviews \
     (name TEXT PRIMARY KEY, definition TEXT NOT NULL) WITHOUT ROWID";

/// `CREATE MATERIALIZED VIEW [IF NOT EXISTS] name AS query`.
pub(super) fn create(conn: &Connection, catalog: &Catalog, view: &mut CreateView) -> Result<Translation, PgError> {
    if !view.columns.is_empty() {
        return Err(PgError::unsupported("column names in CREATE MATERIALIZED VIEW"));
    }
    if view.or_replace {
        return Err(PgError::new(
            SYNTAX_ERROR,
            "syntax error at or near \"MATERIALIZED\": a materialized view cannot be replaced",
        ));
    }
    let definition = view.query.to_string();
    let text = format!(
        "CREATE TABLE {}{} AS {definition}",
        if view.if_not_exists { "IF NOT EXISTS " } else { "" },
        view.name
    );
    let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &text)
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("CREATE MATERIALIZED VIEW: {e}")))?;
    let Some(Statement::CreateTable(mut create)) = parsed.pop() else {
        return Err(PgError::new(
            crate::error::INTERNAL_ERROR,
            "CREATE MATERIALIZED VIEW made no CREATE TABLE",
        ));
    };
    let table = super::schema::created(catalog, &view.name)?;
    let mut translation = super::create_as::create_table_as(conn, catalog, &mut create)?;
    if translation.steps.is_empty() {
        // IF NOT EXISTS, and it exists.
        return Ok(translation);
    }
    translation.steps.push(CREATE_MATVIEWS_TABLE.to_owned());
    translation.steps.push(format!(
        "INSERT OR REPLACE INTO {MATVIEWS_TABLE} (name, definition) VALUES ({}, {})",
        quote_literal(&table),
        quote_literal(&definition)
    ));
    Ok(translation)
}

/// `REFRESH MATERIALIZED VIEW [CONCURRENTLY] name [WITH DATA]`.
pub(super) fn refresh(
    conn: &Connection,
    catalog: &Catalog,
    refresh: &RefreshMaterializedView,
) -> Result<Translation, PgError> {
    if refresh.with_data == Some(false) {
        return Err(PgError::unsupported("REFRESH MATERIALIZED VIEW … WITH NO DATA"));
    }
    let name = &refresh.name;
    // PostgreSQL answers a REFRESH of another kind of relation 0A000 (a DROP, 42809).
    let table = matview(conn, catalog, name)
        .map_err(|e| match e.code == WRONG_OBJECT_TYPE {
            true => PgError::new(crate::error::FEATURE_NOT_SUPPORTED, e.message),
            false => e,
        })?
        .ok_or_else(|| not_found(name))?;
    let definition: String = conn
        .query_row(
            &format!("SELECT definition FROM {MATVIEWS_TABLE} WHERE name = ?1"),
            [&table],
            |row| row.get(0),
        )
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("reading the view's query: {e}")))?;
    let query = Parser::parse_sql(&PostgreSqlDialect {}, &definition)
        .ok()
        .and_then(|mut parsed| parsed.pop())
        .ok_or_else(|| {
            PgError::new(
                crate::error::INTERNAL_ERROR,
                format!("the stored query of materialized view \"{table}\" does not parse"),
            )
        })?;
    let select = super::translate_statement(conn, catalog, query)?
        .ok_or_else(|| PgError::unsupported("this materialized view's query"))?;
    let [sql] = select.steps.as_slice() else {
        return Err(PgError::unsupported("this materialized view's query"));
    };
    let steps = vec![
        format!("DELETE FROM {}", quote_ident(&table)),
        format!("INSERT INTO {} {sql}", quote_ident(&table)),
    ];
    Ok(Translation {
        primary: steps.len() - 1,
        steps,
        columns: None,
        params: Vec::new(),
        kind: Kind::Other("REFRESH MATERIALIZED VIEW".to_owned()),
        uses_now: select.uses_now,
        foreign_keys_off: false,
        param_columns: Vec::new(),
        captures: Vec::new(),
        bound: None,
        notices: Vec::new(),
        column_origins: false,
    })
}

/// `DROP MATERIALIZED VIEW [IF EXISTS] name, …`: each table and its definition.
pub(super) fn drop(
    conn: &Connection,
    catalog: &Catalog,
    if_exists: bool,
    names: &[ObjectName],
    cascade: bool,
) -> Result<Translation, PgError> {
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        match matview(conn, catalog, name)? {
            Some(_) => found.push(name.clone()),
            None if if_exists => {}
            None => return Err(not_found(name)),
        }
    }
    let mut translation = super::ddl::drop(catalog, ObjectType::Table, if_exists, &found, cascade)?;
    for name in &found {
        let table = super::ddl::table_name(catalog, name)?;
        translation.steps.push(format!(
            "DELETE FROM {MATVIEWS_TABLE} WHERE name = {}",
            quote_literal(&table)
        ));
    }
    translation.kind = Kind::Other("DROP MATERIALIZED VIEW".to_owned());
    Ok(translation)
}

/// The SQLite table of materialized view `name`: `None` if no relation has the name, 42809 if one that is not
/// a materialized view has.
fn matview(conn: &Connection, catalog: &Catalog, name: &ObjectName) -> Result<Option<String>, PgError> {
    let Ok(table) = super::ddl::table_name(catalog, name) else {
        return Ok(None);
    };
    let internal = |e: rusqlite::Error| PgError::new(crate::error::INTERNAL_ERROR, e.to_string());
    let listed: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [MATVIEWS_TABLE],
            |row| row.get(0),
        )
        .optional()
        .map_err(internal)?;
    let is_matview = listed.is_some()
        && conn
            .query_row(
                &format!("SELECT 1 FROM {MATVIEWS_TABLE} WHERE name = ?1"),
                [&table],
                |row| row.get::<_, i64>(0),
            )
            .optional()
            .map_err(internal)?
            .is_some();
    if is_matview {
        return Ok(Some(table));
    }
    if super::ddl::table_exists(conn, &table) {
        return Err(PgError::new(
            WRONG_OBJECT_TYPE,
            format!("\"{table}\" is not a materialized view"),
        ));
    }
    Ok(None)
}

fn not_found(name: &ObjectName) -> PgError {
    PgError::new(
        UNDEFINED_TABLE,
        format!("materialized view \"{}\" does not exist", super::expr::last_part(name)),
    )
}
