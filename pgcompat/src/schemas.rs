//! Schemas (namespaces) as kept inside the database, and how a relation of a schema is named in SQLite.
//!
//! **Mapping.** One database file holds every schema (the file is served page by page, so no `ATTACH`): a
//! relation of the schema `public` keeps its bare name as SQLite's name (so databases made before schemas
//! existed, and every client that never names one, are unchanged), and a relation `t` of any other schema
//! `s` is the SQLite object named `s.t` — one identifier holding the dot, always quoted. Indexes, the
//! sequences of serial columns (`s.t_c_seq`) and enum types (`_cambium_enums.name`) follow the same rule, so
//! every catalog table of the layer (`_cambium_columns`, `_cambium_sequences`, `_cambium_enums`) keys them by
//! that name unchanged. A name is read back as (schema, name) by its first dot when the part before it is a
//! schema of `_cambium_schemas`; schema names may not hold a dot, and a `public` relation may not be named
//! `s.x` for a schema `s`, so the reading is never ambiguous.
//!
//! **Invariant:** the schemas other than `public` are the rows of `_cambium_schemas` (written in the DDL's
//! transaction, so they branch, restore and time-travel with the data); a schema's OID is
//! [`SCHEMA_OID_BASE`] plus its row's never-reused id, stable for the schema's life (a rename keeps it).

use rusqlite::{Connection, OptionalExtension};

use crate::catalog::quote_literal;

/// The table of schemas.
pub const SCHEMAS_TABLE: &str = "_cambium_schemas";

/// The statement that makes the schemas table (inside the DDL's transaction). `AUTOINCREMENT`: an id, so an
/// OID, is never given to a second schema.
pub const CREATE_SCHEMAS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_schemas (\
     id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, owner TEXT NOT NULL)";

/// The schema every database has (PostgreSQL's fixed OID 2200); its relations keep their bare names.
pub const PUBLIC: &str = "public";
/// The OID of `public`.
pub const PUBLIC_OID: i64 = 2200;
/// The first OID of a schema of `_cambium_schemas` (below enum types' OIDs, far above relations').
pub const SCHEMA_OID_BASE: i64 = 0x5F00_0000;
/// Most schemas a database has (each needs an OID below the enum types').
pub const SCHEMAS_MAX: i64 = 0x00FF_FFFF;
/// Most entries of a `search_path` the layer reads.
pub const SEARCH_PATH_ENTRIES_MAX: usize = 64;

/// One schema other than `public`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaEntry {
    /// Its row's id.
    pub id: i64,
    /// Its name, as PostgreSQL keeps it (folded when written unquoted).
    pub name: String,
    /// Its owner's name.
    pub owner: String,
}

impl SchemaEntry {
    /// The schema's OID.
    pub fn oid(&self) -> i64 {
        SCHEMA_OID_BASE + self.id
    }
}

/// Every schema of the database other than `public` (none while the table does not exist).
pub fn load(conn: &Connection) -> rusqlite::Result<Vec<SchemaEntry>> {
    let exists: Option<i64> = conn
        .prepare_cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_cambium_schemas'")?
        .query_row([], |row| row.get(0))
        .optional()?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached("SELECT id, name, owner FROM _cambium_schemas ORDER BY id")?;
    let rows = stmt.query_map([], |row| {
        Ok(SchemaEntry {
            id: row.get(0)?,
            name: row.get(1)?,
            owner: row.get(2)?,
        })
    })?;
    rows.collect()
}

/// The SQLite name of relation `name` of schema `schema`.
pub fn sqlite_name(schema: &str, name: &str) -> String {
    if schema == PUBLIC {
        name.to_owned()
    } else {
        format!("{schema}.{name}")
    }
}

/// A SQLite name read back as (schema, name), given the schemas that exist.
pub fn split_sqlite_name<'a>(sqlite: &'a str, schemas: &[SchemaEntry]) -> (&'a str, &'a str) {
    if let Some((schema, name)) = sqlite.split_once('.') {
        if schemas.iter().any(|s| s.name == schema) {
            return (schema, name);
        }
    }
    (PUBLIC, sqlite)
}

/// A SQLite name as PostgreSQL prints a relation name qualified by its schema (`app.t`, `"My S"."T"`;
/// a `public` relation bare), for the texts the catalog shows (defaults, constraint definitions). Without
/// the schema list at hand the first dot is taken as the schema's end, which only a `public` relation
/// named with a dot (allowed while no schema has that prefix) is shown wrongly by.
pub fn display_name(sqlite: &str) -> String {
    let quote = crate::functions::quote_ident_pg;
    match sqlite.split_once('.') {
        Some((schema, name)) => format!("{}.{}", quote(schema), quote(name)),
        None => quote(sqlite),
    }
}

/// A `search_path` value's entries in order: unquoted names folded to lower case, quoted ones as written
/// (`"$user"` stays `$user`); at most [`SEARCH_PATH_ENTRIES_MAX`].
pub fn parse_search_path(text: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    let push = |current: &mut String, entries: &mut Vec<String>| {
        let entry = std::mem::take(current);
        if !entry.is_empty() && entries.len() < SEARCH_PATH_ENTRIES_MAX {
            entries.push(entry);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                current.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => push(&mut current, &mut entries),
            c if !quoted && c.is_whitespace() => {}
            c if !quoted => current.push(c.to_ascii_lowercase()),
            c => current.push(c),
        }
    }
    push(&mut current, &mut entries);
    entries
}

/// The schemas a `search_path` names that exist, in order (`$user` is the session user's schema if there is
/// one; a schema named twice counts once): where unqualified names are looked for and made.
pub fn effective_search_path(entries: &[String], user: &str, schemas: &[SchemaEntry]) -> Vec<String> {
    let mut path: Vec<String> = Vec::new();
    for entry in entries {
        let name = if entry == "$user" { user } else { entry.as_str() };
        let exists = name == PUBLIC || schemas.iter().any(|s| s.name == name);
        if exists && !path.iter().any(|p| p == name) {
            path.push(name.to_owned());
        }
    }
    path
}

/// The SQL that records a new schema, owned by `owner` (`None`: the session's user).
pub fn insert_sql(name: &str, owner: Option<&str>) -> String {
    format!(
        "INSERT INTO _cambium_schemas (name, owner) VALUES ({}, {})",
        quote_literal(name),
        owner.map_or_else(|| "pg_current_user()".to_owned(), quote_literal)
    )
}

/// The SQL that forgets a schema.
pub fn delete_sql(name: &str) -> String {
    format!("DELETE FROM _cambium_schemas WHERE name = {}", quote_literal(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64, name: &str) -> SchemaEntry {
        SchemaEntry {
            id,
            name: name.to_owned(),
            owner: "u".to_owned(),
        }
    }

    #[test]
    fn search_path_is_parsed_as_postgresql_reads_it() {
        assert_eq!(parse_search_path("\"$user\", public"), vec!["$user", "public"]);
        assert_eq!(parse_search_path("App,  Public"), vec!["app", "public"]);
        assert_eq!(parse_search_path("\"Mixed Case\",x"), vec!["Mixed Case", "x"]);
        assert!(parse_search_path("").is_empty());
        assert!(parse_search_path("\"\"").is_empty());
    }

    #[test]
    fn effective_path_keeps_existing_schemas_once() {
        let schemas = [entry(1, "app"), entry(2, "alice")];
        let entries = parse_search_path("\"$user\", app, nothing, public, app");
        assert_eq!(effective_search_path(&entries, "bob", &schemas), vec!["app", "public"]);
        assert_eq!(
            effective_search_path(&entries, "alice", &schemas),
            vec!["alice", "app", "public"]
        );
    }

    #[test]
    fn names_split_only_at_a_schema() {
        let schemas = [entry(1, "app")];
        assert_eq!(split_sqlite_name("app.things", &schemas), ("app", "things"));
        assert_eq!(split_sqlite_name("other.things", &schemas), ("public", "other.things"));
        assert_eq!(split_sqlite_name("things", &schemas), ("public", "things"));
        assert_eq!(sqlite_name("public", "t"), "t");
        assert_eq!(sqlite_name("app", "t"), "app.t");
    }
}
