//! Schema diff: a database's schema read from one SQLite connection (a branch at a point: the control plane opens
//! it read-only through the compute host's time travel), and the differences between two such schemas as a list
//! of changes and as a unified diff of their DDL.
//!
//! What a schema is here: the user's tables (columns with their PostgreSQL types from the dialect layer's
//! `_cambium_columns` when it has them, else SQLite's declared type; `NOT NULL`, defaults, the primary key),
//! indexes, views and triggers, as SQLite's `sqlite_schema` holds them; the dialect layer's and SQLite's own
//! objects (`_cambium_*`, `sqlite_*`, `_pgc_*`, and views over `_cambium_*` such as sequences) are left out.
//! Indexes, views and triggers are compared and shown by the SQL SQLite keeps for them (the dialect layer's
//! translation of what was run); tables by their rendered columns and, for constraints beyond columns, their SQL.
//!
//! The unified diff is `diff -U0` of the two DDL documents (objects sorted by kind then name, one block each):
//! each changed object is one hunk with exact line numbers, so it applies with `patch`.
//!
//! **Bounded:** a schema of more than [`OBJECTS_MAX`] objects or [`DDL_BYTES_MAX`] bytes of DDL is refused
//! ([`SchemaDiffError::TooLarge`]) rather than read whole.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rusqlite::{params, Connection, OptionalExtension};

/// Objects a schema may have to be diffed.
pub const OBJECTS_MAX: usize = 10_000;
/// DDL bytes a schema may have to be diffed.
pub const DDL_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Why a schema could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaDiffError {
    /// SQLite failed reading the schema.
    #[error("reading the schema: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The schema is past the bounds.
    #[error("the schema is too large to diff: {0}")]
    TooLarge(String),
}

/// The kind of a schema object, in the order the DDL document lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A table.
    Table,
    /// A column of a table (in a change only).
    Column,
    /// An index.
    Index,
    /// A view.
    View,
    /// A trigger.
    Trigger,
}

impl Kind {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Table => "table",
            Kind::Column => "column",
            Kind::Index => "index",
            Kind::View => "view",
            Kind::Trigger => "trigger",
        }
    }
}

/// A column as the diff compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its definition after the name: type, `NOT NULL`, `DEFAULT …`, `PRIMARY KEY`.
    pub definition: String,
}

/// One object of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// What it is.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// The table it belongs to (itself for a table).
    pub table: String,
    /// Its columns (tables only), in order.
    pub columns: Vec<Column>,
    /// The SQL SQLite keeps for it.
    pub sql: String,
}

impl Object {
    /// Its DDL block, ending with a newline.
    pub fn ddl(&self) -> String {
        if self.kind != Kind::Table {
            return format!("{};\n", self.sql.trim_end_matches(';'));
        }
        let mut ddl = format!("CREATE TABLE {} (\n", quote(&self.name));
        for (i, column) in self.columns.iter().enumerate() {
            let comma = if i + 1 < self.columns.len() { "," } else { "" };
            let _ = writeln!(ddl, "    {} {}{comma}", quote(&column.name), column.definition);
        }
        ddl.push_str(");\n");
        ddl
    }
}

/// A schema: its objects by (kind, name).
pub type Schema = BTreeMap<(Kind, String), Object>;

/// `name` as an identifier: bare if it is a plain lower-case one, else double-quoted.
fn quote(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// Whether an object named `name` with `sql` belongs to the dialect layer or SQLite, not the user.
fn is_internal(name: &str, sql: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("_cambium_")
        || lower.starts_with("sqlite_")
        || lower.starts_with("_pgc_")
        || sql.contains("_cambium_")
}

/// The schema `connection` sees.
pub fn read_schema(connection: &Connection) -> Result<Schema, SchemaDiffError> {
    let has_types = connection
        .query_row(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_cambium_columns'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    let mut statement = connection.prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY type, name LIMIT ?1",
    )?;
    let limit = i64::try_from(OBJECTS_MAX + 1).unwrap_or(i64::MAX);
    let rows = statement.query_map([limit], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    let mut schema = Schema::new();
    let mut ddl_bytes = 0usize;
    for row in rows {
        let (kind, name, table, sql) = row?;
        if schema.len() >= OBJECTS_MAX {
            return Err(SchemaDiffError::TooLarge(format!("more than {OBJECTS_MAX} objects")));
        }
        let kind = match kind.as_str() {
            "table" => Kind::Table,
            "index" => Kind::Index,
            "view" => Kind::View,
            "trigger" => Kind::Trigger,
            _ => continue,
        };
        if is_internal(&name, &sql) {
            continue;
        }
        ddl_bytes += sql.len();
        if ddl_bytes > DDL_BYTES_MAX {
            return Err(SchemaDiffError::TooLarge(format!(
                "more than {DDL_BYTES_MAX} bytes of DDL"
            )));
        }
        let columns = if kind == Kind::Table {
            read_columns(connection, &name, has_types)?
        } else {
            Vec::new()
        };
        let object = Object {
            kind,
            name: name.clone(),
            table,
            columns,
            sql,
        };
        schema.insert((kind, name), object);
    }
    Ok(schema)
}

/// The columns of `table`, with their PostgreSQL types where the dialect layer recorded them.
fn read_columns(connection: &Connection, table: &str, has_types: bool) -> Result<Vec<Column>, SchemaDiffError> {
    let mut statement =
        connection.prepare("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1) ORDER BY cid")?;
    let rows = statement.query_map([table], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, bool>(2)?,
            row.get::<_, Option<String>>(3)?,
            row.get::<_, i64>(4)?,
        ))
    })?;
    let mut columns = Vec::new();
    for row in rows {
        let (name, declared, not_null, default, primary_key) = row?;
        let pg_type: Option<String> = if has_types {
            connection
                .query_row(
                    "SELECT type FROM _cambium_columns WHERE table_name = ?1 AND column_name = ?2",
                    params![table, name],
                    |row| row.get(0),
                )
                .optional()?
        } else {
            None
        };
        let mut definition = pg_type.unwrap_or(declared);
        if not_null {
            definition.push_str(" NOT NULL");
        }
        if let Some(default) = default {
            let _ = write!(definition, " DEFAULT {default}");
        }
        if primary_key > 0 {
            definition.push_str(" PRIMARY KEY");
        }
        columns.push(Column {
            name,
            definition: definition.trim().to_owned(),
        });
    }
    Ok(columns)
}

/// How an object or column differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Only in the target.
    Added,
    /// Only in the base.
    Removed,
    /// In both, different.
    Changed,
}

impl ChangeKind {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        }
    }
}

/// One difference from the base schema to the target schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What kind of object.
    pub kind: Kind,
    /// Its name (a column's is `table.column`).
    pub name: String,
    /// The table it belongs to.
    pub table: String,
    /// Added, removed or changed.
    pub change: ChangeKind,
    /// Its DDL (a column's definition) in the base; `None` when added.
    pub base: Option<String>,
    /// Its DDL (a column's definition) in the target; `None` when removed.
    pub target: Option<String>,
}

/// The changes from `base` to `target`: objects added, removed or changed, and for tables in both, their columns
/// added, removed or changed (a table whose columns are the same but whose SQL differs — a constraint — is a
/// changed table).
pub fn changes(base: &Schema, target: &Schema) -> Vec<Change> {
    let mut changes = Vec::new();
    for (key, object) in base {
        if !target.contains_key(key) {
            changes.push(object_change(object, ChangeKind::Removed, Some(object), None));
        }
    }
    for (key, object) in target {
        match base.get(key) {
            None => changes.push(object_change(object, ChangeKind::Added, None, Some(object))),
            Some(old) if old.kind == Kind::Table => {
                let columns = column_changes(old, object);
                if columns.is_empty() && old.sql != object.sql {
                    changes.push(object_change(object, ChangeKind::Changed, Some(old), Some(object)));
                }
                changes.extend(columns);
            }
            Some(old) if old.sql != object.sql => {
                changes.push(object_change(object, ChangeKind::Changed, Some(old), Some(object)));
            }
            Some(_) => {}
        }
    }
    changes.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    changes
}

fn object_change(object: &Object, change: ChangeKind, base: Option<&Object>, target: Option<&Object>) -> Change {
    Change {
        kind: object.kind,
        name: object.name.clone(),
        table: object.table.clone(),
        change,
        base: base.map(Object::ddl),
        target: target.map(Object::ddl),
    }
}

/// The column changes of a table in both schemas.
fn column_changes(base: &Object, target: &Object) -> Vec<Change> {
    let find = |object: &Object, name: &str| object.columns.iter().find(|c| c.name == name).cloned();
    let change = |name: &str, change, old: Option<Column>, new: Option<Column>| Change {
        kind: Kind::Column,
        name: format!("{}.{name}", target.name),
        table: target.name.clone(),
        change,
        base: old.map(|c| c.definition),
        target: new.map(|c| c.definition),
    };
    let mut changes = Vec::new();
    for column in &base.columns {
        if find(target, &column.name).is_none() {
            changes.push(change(&column.name, ChangeKind::Removed, Some(column.clone()), None));
        }
    }
    for column in &target.columns {
        match find(base, &column.name) {
            None => changes.push(change(&column.name, ChangeKind::Added, None, Some(column.clone()))),
            Some(old) if old.definition != column.definition => {
                changes.push(change(
                    &column.name,
                    ChangeKind::Changed,
                    Some(old),
                    Some(column.clone()),
                ));
            }
            Some(_) => {}
        }
    }
    changes
}

/// `diff -U0` of the DDL documents of `base` and `target`, labelled `base_label` and `target_label`; empty when
/// they are the same.
pub fn unified_diff(base: &Schema, target: &Schema, base_label: &str, target_label: &str) -> String {
    let mut hunks = String::new();
    // Line numbers (1-based) of the next line of each document.
    let (mut base_line, mut target_line) = (1usize, 1usize);
    let mut keys: Vec<&(Kind, String)> = base.keys().chain(target.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let old = base.get(key).map(Object::ddl).unwrap_or_default();
        let new = target.get(key).map(Object::ddl).unwrap_or_default();
        let (old_lines, new_lines) = (old.lines().count(), new.lines().count());
        if old != new {
            // diff's convention: an empty side names the line before it.
            let old_start = if old_lines == 0 { base_line - 1 } else { base_line };
            let new_start = if new_lines == 0 { target_line - 1 } else { target_line };
            let _ = writeln!(hunks, "@@ -{old_start},{old_lines} +{new_start},{new_lines} @@");
            for line in old.lines() {
                let _ = writeln!(hunks, "-{line}");
            }
            for line in new.lines() {
                let _ = writeln!(hunks, "+{line}");
            }
        }
        base_line += old_lines;
        target_line += new_lines;
    }
    if hunks.is_empty() {
        return hunks;
    }
    format!("--- {base_label}\n+++ {target_label}\n{hunks}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    fn schema(sql: &str) -> Schema {
        let connection = Connection::open_in_memory().unwrap();
        connection.execute_batch(sql).unwrap();
        read_schema(&connection).unwrap()
    }

    const BASE: &str = "
        CREATE TABLE _cambium_columns (table_name TEXT NOT NULL, column_name TEXT NOT NULL, type TEXT NOT NULL,
            PRIMARY KEY (table_name, column_name)) WITHOUT ROWID;
        INSERT INTO _cambium_columns VALUES ('users', 'id', 'bigint'), ('users', 'email', 'text');
        CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL);
        CREATE TABLE gone (x INTEGER);
        CREATE INDEX users_email ON users (email);
        CREATE VIEW seq AS SELECT * FROM _cambium_columns;
    ";

    #[test]
    fn changes_name_tables_columns_indexes_views_and_triggers() {
        let base = schema(BASE);
        assert_eq!(
            base.keys().map(|(_, n)| n.as_str()).collect::<Vec<_>>(),
            ["gone", "users", "users_email"],
            "internal objects are left out"
        );
        assert_eq!(
            base[&(Kind::Table, "users".to_owned())].columns[0].definition,
            "bigint PRIMARY KEY"
        );
        let target = schema(&format!(
            "{BASE}
            DROP TABLE gone;
            DROP INDEX users_email;
            CREATE UNIQUE INDEX users_email ON users (email);
            ALTER TABLE users ADD COLUMN name TEXT DEFAULT 'x';
            INSERT INTO _cambium_columns VALUES ('users', 'name', 'character varying(20)');
            CREATE TABLE posts (id INTEGER PRIMARY KEY, body TEXT);
            CREATE VIEW v AS SELECT id FROM users;
            CREATE TRIGGER t AFTER INSERT ON users BEGIN SELECT 1; END;"
        ));
        let all = changes(&base, &target);
        let found: Vec<(&str, &str, &str)> = all
            .iter()
            .map(|c| (c.kind.as_str(), c.change.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("table", "removed", "gone"),
                ("table", "added", "posts"),
                ("column", "added", "users.name"),
                ("index", "changed", "users_email"),
                ("view", "added", "v"),
                ("trigger", "added", "t"),
            ]
        );
        let column = changes(&base, &target)
            .into_iter()
            .find(|c| c.kind == Kind::Column)
            .unwrap();
        assert_eq!(column.target.as_deref(), Some("character varying(20) DEFAULT 'x'"));
        assert!(changes(&target, &target).is_empty());
        assert_eq!(unified_diff(&target, &target, "a", "b"), "");
    }

    #[test]
    fn the_unified_diff_has_exact_line_numbers() {
        let base = schema("CREATE TABLE a (x INTEGER); CREATE TABLE c (z INTEGER);");
        let target = schema("CREATE TABLE a (x INTEGER); CREATE TABLE b (y TEXT); CREATE TABLE c (z INTEGER, w TEXT);");
        let diff = unified_diff(&base, &target, "base", "target");
        assert_eq!(
            diff,
            "--- base\n+++ target\n\
             @@ -3,0 +4,3 @@\n+CREATE TABLE b (\n+    y TEXT\n+);\n\
             @@ -4,3 +7,4 @@\n-CREATE TABLE c (\n-    z INTEGER\n-);\n+CREATE TABLE c (\n+    z INTEGER,\n+    w TEXT\n+);\n"
        );
    }

    #[test]
    fn names_that_need_quotes_get_them() {
        assert_eq!(quote("users"), "users");
        assert_eq!(quote("Users"), "\"Users\"");
        assert_eq!(quote("s.t"), "\"s.t\"");
        assert_eq!(quote("a\"b"), "\"a\"\"b\"");
    }
}
