//! The type catalog kept inside each database: the PostgreSQL type of every column, recorded by the DDL the
//! layer translates, so it branches, restores and time-travels with the data.
//!
//! It is one table, `_cambium_columns`, made by the first DDL that needs it. A session keeps it in memory and
//! reloads it when SQLite's `schema_version` moves; every change to it is made in the same transaction as a
//! change to the SQLite schema, so the version always moves with it.

use std::collections::HashMap;

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension};

use crate::enums::EnumCatalog;

use crate::types::PgType;

/// The catalog table.
pub const COLUMNS_TABLE: &str = "_cambium_columns";

/// The statement that makes the catalog table (run inside the DDL's transaction).
pub const CREATE_COLUMNS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_columns (\
     table_name TEXT NOT NULL, column_name TEXT NOT NULL, type TEXT NOT NULL, \
     PRIMARY KEY (table_name, column_name)) WITHOUT ROWID";

/// Statements that move SQLite's `schema_version` and change nothing else, for DDL that changes only the
/// layer's catalog rows (an `ALTER SEQUENCE … OWNED BY`): translations and catalog snapshots follow that
/// version, so they are made again after it.
pub const BUMP_SCHEMA_VERSION: [&str; 2] = [
    "DROP VIEW IF EXISTS _cambium_schema_bump",
    "CREATE VIEW _cambium_schema_bump AS SELECT 1",
];

/// Whether a table name belongs to the layer (its catalog, the TEMP views of `pg_catalog`, which would
/// shadow a table of the same name) or to SQLite, hidden from the client's catalog views.
pub fn is_internal_table(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("_cambium_") || lower.starts_with("sqlite_") || lower.starts_with(crate::pg_catalog::VIEW_PREFIX)
}

/// One table's columns and their types, in column order of their recording.
#[derive(Clone, Debug, Default)]
pub struct TableTypes {
    columns: Vec<(String, PgType)>,
    /// Each recorded column's PostgreSQL column number (SQLite's `cid + 1`), `None` if the table has no such
    /// column now (a row of the type catalog left behind).
    attnums: Vec<Option<i16>>,
}

impl TableTypes {
    /// The type of a column (names compared as SQLite does, ASCII case-insensitively).
    pub fn column(&self, name: &str) -> Option<PgType> {
        self.columns
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(name))
            .map(|(_, t)| *t)
    }

    /// Every recorded column and its type, in the table's column order.
    pub fn columns(&self) -> &[(String, PgType)] {
        &self.columns
    }

    /// The PostgreSQL column number (`pg_attribute.attnum`, from 1) of a recorded column.
    pub fn attnum(&self, name: &str) -> Option<i16> {
        let index = self.columns.iter().position(|(c, _)| c.eq_ignore_ascii_case(name))?;
        self.attnums.get(index).copied().flatten()
    }
}

/// Where a result column comes from in PostgreSQL's terms: the OID of its table (`pg_class.oid`) and its
/// column number (`pg_attribute.attnum`), what a RowDescription carries for a column that is a table's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnOrigin {
    /// The table's OID, as `pg_class` shows it.
    pub table_oid: u32,
    /// The column's number, from 1.
    pub attnum: i16,
}

/// What the translator needs to know of a sequence (its state is read where it is used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceEntry {
    /// The sequence's name.
    pub name: String,
    /// `OWNED BY` table and column (a serial or identity column's sequence), names as SQLite has them.
    pub owner: Option<(String, String)>,
    /// `a` (GENERATED ALWAYS) or `d` (BY DEFAULT) for an identity column's sequence, else empty.
    pub identity: String,
}

/// A snapshot of the catalog at one `schema_version`.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    schema_version: i64,
    tables: Arc<HashMap<String, TableTypes>>,
    sequences: Vec<SequenceEntry>,
    /// The SQL functions of `CREATE FUNCTION`.
    routines: Arc<Vec<crate::routines::Routine>>,
    /// The deferrable UNIQUE constraints.
    deferrable: Arc<Vec<crate::deferrable::DeferrableUnique>>,
    enums: Arc<EnumCatalog>,
    /// The schemas other than `public`.
    schemas: Arc<Vec<crate::schemas::SchemaEntry>>,
    /// The SQLite names (lower case) of every table, view and index, with SQLite's type of each.
    relations: Arc<HashMap<String, String>>,
    /// The `sqlite_schema` rowid of every table, by SQLite name (lower case): its OID's source (see
    /// `pg_catalog`'s module doc).
    table_rowids: Arc<HashMap<String, i64>>,
    /// The session's effective `search_path` (existing schemas, in order), set before each translation;
    /// `None`: never set, PostgreSQL's default (`public`).
    search_path: Option<Arc<Vec<String>>>,
    /// Per table (as an INSERT names it, lower case): its columns whose default takes a value from a sequence,
    /// with the main and temp schema versions they were read at (see [`Catalog::sequence_defaults`]).
    sequence_defaults: Arc<parking_lot::Mutex<HashMap<String, SequenceDefaults>>>,
}

/// The schema versions (main, temp) a table's sequence defaults were read at, and the defaults.
type SequenceDefaults = ((i64, i64), Arc<Vec<(String, sqlparser::ast::Expr)>>);

/// Tables whose sequence defaults are kept at once; past it the cache starts again empty.
const SEQUENCE_DEFAULTS_CACHED_MAX: usize = 1024;

impl Catalog {
    /// The columns of `table` whose default takes a value from a sequence, as `read` finds them, kept while
    /// neither the main nor the temp schema changes (an INSERT asks at every translation; `read` queries
    /// `pragma_table_info` and parses every default). The versions are read at each call, so the answer is the
    /// database's now, even at a statement that translates with the catalog as last seen.
    pub(crate) fn sequence_defaults(
        &self,
        conn: &Connection,
        table: &str,
        read: impl FnOnce() -> Vec<(String, sqlparser::ast::Expr)>,
    ) -> Arc<Vec<(String, sqlparser::ast::Expr)>> {
        let version = |sql: &str| {
            conn.prepare_cached(sql)
                .and_then(|mut stmt| stmt.query_row([], |row| row.get::<_, i64>(0)))
                .ok()
        };
        let (Some(main), Some(temp)) = (
            version("PRAGMA main.schema_version"),
            version("PRAGMA temp.schema_version"),
        ) else {
            return Arc::new(read());
        };
        let key = table.to_ascii_lowercase();
        if let Some((versions, defaults)) = self.sequence_defaults.lock().get(&key) {
            if *versions == (main, temp) {
                return Arc::clone(defaults);
            }
        }
        let defaults = Arc::new(read());
        let mut cache = self.sequence_defaults.lock();
        if cache.len() >= SEQUENCE_DEFAULTS_CACHED_MAX {
            cache.clear();
        }
        cache.insert(key, ((main, temp), Arc::clone(&defaults)));
        defaults
    }

    /// The types of a table's columns, if any were recorded.
    pub fn table(&self, name: &str) -> Option<&TableTypes> {
        self.tables.get(&name.to_ascii_lowercase())
    }

    /// The type of `table.column`, if recorded.
    pub fn column_type(&self, table: &str, column: &str) -> Option<PgType> {
        self.table(table).and_then(|t| t.column(column))
    }

    /// The OID and column number `pg_class` and `pg_attribute` show for `table.column` (SQLite names of the
    /// main database), if it is a recorded column of a table of the client's (not the layer's).
    pub fn column_origin(&self, table: &str, column: &str) -> Option<ColumnOrigin> {
        if is_internal_table(table) {
            return None;
        }
        let rowid = *self.table_rowids.get(&table.to_ascii_lowercase())?;
        let attnum = self.table(table)?.attnum(column)?;
        let oid = crate::pg_catalog::RELATION_OID_BASE.checked_add(rowid.checked_mul(64)?)?;
        Some(ColumnOrigin {
            table_oid: u32::try_from(oid).ok()?,
            attnum,
        })
    }

    /// The sequence of this name (compared as SQLite compares names, ASCII case-insensitively).
    pub fn sequence(&self, name: &str) -> Option<&SequenceEntry> {
        self.sequences.iter().find(|s| s.name.eq_ignore_ascii_case(name))
    }

    /// The sequences owned by a column of `table` (all columns when `column` is `None`).
    pub fn owned_sequences<'a>(
        &'a self,
        table: &'a str,
        column: Option<&'a str>,
    ) -> impl Iterator<Item = &'a SequenceEntry> + 'a {
        self.sequences.iter().filter(move |s| {
            s.owner.as_ref().is_some_and(|(t, c)| {
                t.eq_ignore_ascii_case(table) && column.is_none_or(|column| c.eq_ignore_ascii_case(column))
            })
        })
    }

    /// The (table, column) pairs whose recorded type passes `wanted`.
    pub fn columns_of_type<'a>(
        &'a self,
        wanted: impl Fn(PgType) -> bool + 'a,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.tables
            .iter()
            .flat_map(|(table, types)| types.columns.iter().map(move |(column, ty)| (table, column, *ty)))
            .filter(move |(_, _, ty)| wanted(*ty))
            .map(|(table, column, _)| (table.as_str(), column.as_str()))
    }

    /// This snapshot with one more enum type (made by a statement before it in the same text).
    pub fn add_enum(&mut self, ty: crate::enums::EnumType) {
        let mut enums = (*self.enums).clone();
        enums.add(ty);
        self.enums = Arc::new(enums);
    }

    /// The database's enum types.
    pub fn enums(&self) -> &Arc<EnumCatalog> {
        &self.enums
    }

    /// The SQL functions of `CREATE FUNCTION`.
    pub fn routines(&self) -> &[crate::routines::Routine] {
        &self.routines
    }

    /// The deferrable UNIQUE constraints.
    pub fn deferrable_uniques(&self) -> &[crate::deferrable::DeferrableUnique] {
        &self.deferrable
    }

    /// Whether any sequence exists (so `_cambium_sequences` does).
    pub fn has_sequences(&self) -> bool {
        !self.sequences.is_empty()
    }

    /// The schemas other than `public`.
    pub fn schemas(&self) -> &Arc<Vec<crate::schemas::SchemaEntry>> {
        &self.schemas
    }

    /// Whether a schema exists (`public` always does).
    pub fn schema_exists(&self, name: &str) -> bool {
        name == crate::schemas::PUBLIC || self.schemas.iter().any(|s| s.name == name)
    }

    /// Whether a table, view (so a sequence) or index of this SQLite name exists.
    pub fn relation_exists(&self, sqlite_name: &str) -> bool {
        self.relations.contains_key(&sqlite_name.to_ascii_lowercase())
    }

    /// SQLite's kind (`table`, `view`, `index`) of the relation of this SQLite name, if it exists.
    pub fn relation_kind(&self, sqlite_name: &str) -> Option<&str> {
        self.relations
            .get(&sqlite_name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// This snapshot with one more relation (made by a statement before it in the same text); `kind` is
    /// SQLite's (`table`, `view`, `index`).
    pub fn add_relation(&mut self, sqlite_name: &str, kind: &str) {
        Arc::make_mut(&mut self.relations).insert(sqlite_name.to_ascii_lowercase(), kind.to_owned());
    }

    /// Whether the relation of this SQLite name is an index.
    pub fn relation_is_index(&self, sqlite_name: &str) -> bool {
        self.relations
            .get(&sqlite_name.to_ascii_lowercase())
            .is_some_and(|t| t == "index")
    }

    /// The SQLite names (lower case) of every table, view and index.
    pub fn relation_names(&self) -> impl Iterator<Item = &str> {
        self.relations.keys().map(String::as_str)
    }

    /// The effective `search_path` the translation resolves unqualified names with.
    pub fn search_path(&self) -> &[String] {
        static DEFAULT: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec![crate::schemas::PUBLIC.to_owned()]);
        self.search_path.as_deref().map_or(DEFAULT.as_slice(), Vec::as_slice)
    }

    /// Sets the effective `search_path` (existing schemas, in order) for the translations that follow.
    pub fn set_search_path(&mut self, path: Vec<String>) {
        if self.search_path.as_deref() != Some(&path) {
            self.search_path = Some(Arc::new(path));
        }
    }

    /// The `schema_version` this snapshot was read at.
    pub fn schema_version(&self) -> i64 {
        self.schema_version
    }

    /// Reads the catalog if `schema_version` moved since this snapshot; returns whether it did.
    pub fn refresh(&mut self, conn: &Connection) -> rusqlite::Result<bool> {
        self.refresh_shared(conn, None)
    }

    /// [`Catalog::refresh`], taking the snapshot from `shared` (the catalog of the connection's database that
    /// another session read) when it is of the version this connection sees, and leaving one there when it reads
    /// its own. Only outside a transaction and with no TEMP object made on the connection: a snapshot read inside
    /// a transaction may hold the transaction's own schema changes (gone if it rolls back), and a TEMP table
    /// shadows the catalog's tables for this connection alone.
    pub fn refresh_shared(&mut self, conn: &Connection, shared: Option<&SharedCatalog>) -> rusqlite::Result<bool> {
        let version: i64 = conn
            .prepare_cached("PRAGMA schema_version")?
            .query_row([], |row| row.get(0))?;
        if version == self.schema_version && version != 0 {
            return Ok(false);
        }
        let search_path = std::mem::take(&mut self.search_path);
        let shared = match shared {
            Some(shared) if version != 0 && conn.is_autocommit() && temp_schema_version(conn)? == 0 => Some(shared),
            _ => None,
        };
        *self = match shared {
            Some(shared) => match shared.get(version) {
                Some(catalog) => catalog,
                None => {
                    // Read in one transaction, at one version: each query would otherwise see the database as
                    // of its own start, and a schema change committed in between would leave a snapshot that
                    // holds some of it under the older version, for every session that takes it.
                    conn.execute_batch("BEGIN DEFERRED")?;
                    let loaded = conn
                        .prepare_cached("PRAGMA schema_version")
                        .and_then(|mut stmt| stmt.query_row([], |row| row.get::<_, i64>(0)))
                        .and_then(|version| Catalog::load(conn, version));
                    let ended = conn.execute_batch(if loaded.is_ok() { "COMMIT" } else { "ROLLBACK" });
                    if ended.is_err() && !conn.is_autocommit() {
                        // Never leave the session inside a transaction it did not begin.
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    let catalog = loaded?;
                    ended?;
                    shared.put(&catalog);
                    catalog
                }
            },
            None => Catalog::load(conn, version)?,
        };
        self.search_path = search_path;
        Ok(true)
    }

    fn load(conn: &Connection, schema_version: i64) -> rusqlite::Result<Catalog> {
        let exists: Option<i64> = conn
            .prepare_cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_cambium_columns'")?
            .query_row([], |row| row.get(0))
            .optional()?;
        let mut tables: HashMap<String, TableTypes> = HashMap::new();
        if exists.is_some() {
            // In each table's own column order (`SELECT *`'s, and PostgreSQL's attnum order), not the key's.
            let mut stmt = conn.prepare_cached(
                "SELECT c.table_name, c.column_name, c.type, p.cid FROM _cambium_columns AS c \
                 LEFT JOIN pragma_table_xinfo(c.table_name) AS p ON p.name = c.column_name COLLATE NOCASE \
                 ORDER BY c.table_name, p.cid",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let table: String = row.get(0)?;
                let column: String = row.get(1)?;
                let text: String = row.get(2)?;
                let cid: Option<i64> = row.get(3)?;
                // A type this version does not know is left untyped (its values decide), never an error.
                if let Some(ty) = PgType::from_catalog(&text) {
                    let entry = tables.entry(table.to_ascii_lowercase()).or_default();
                    entry.columns.push((column, ty));
                    entry.attnums.push(cid.and_then(|cid| i16::try_from(cid + 1).ok()));
                }
            }
        }
        let sequences = load_sequences(conn)?;
        let routines = Arc::new(crate::routines::load(conn)?);
        let deferrable = Arc::new(crate::deferrable::load(conn)?);
        let enums = Arc::new(EnumCatalog::load(conn)?);
        let schemas = Arc::new(crate::schemas::load(conn)?);
        let mut relations = HashMap::new();
        let mut table_rowids = HashMap::new();
        let mut stmt = conn.prepare_cached(
            "SELECT name, type, rowid FROM main.sqlite_schema WHERE type IN ('table', 'view', 'index')",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let name = row.get::<_, String>(0)?.to_ascii_lowercase();
            let kind: String = row.get(1)?;
            if kind == "table" {
                table_rowids.insert(name.clone(), row.get::<_, i64>(2)?);
            }
            relations.insert(name, kind);
        }
        Ok(Catalog {
            schema_version,
            tables: Arc::new(tables),
            sequences,
            routines,
            deferrable,
            enums,
            schemas,
            relations: Arc::new(relations),
            table_rowids: Arc::new(table_rowids),
            search_path: None,
            sequence_defaults: Arc::default(),
        })
    }
}

/// The schema version of the connection's TEMP schema: 0 while no TEMP object was ever made on it.
fn temp_schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA temp.schema_version")?
        .query_row([], |row| row.get(0))
}

/// The catalog snapshot of one database as its sessions last read it, for the next session to take instead of
/// reading its own (a fresh connection's first statement read the whole catalog: 0.3-0.9 ms). One per database
/// *and store*: versions are comparable only along one line of commits, so the compute makes a new one whenever a
/// branch's store is replaced (a restore, a restart), and never shares one between branches, whose versions
/// diverge after the branch point. Holds the newest version given; see [`Catalog::refresh_shared`] for when it
/// is read and written.
#[derive(Debug, Default)]
pub struct SharedCatalog {
    latest: parking_lot::Mutex<Option<Catalog>>,
}

impl SharedCatalog {
    /// The snapshot of `version`, if that is the one held: a copy with the session's own parts empty (its
    /// `search_path`, its memo of sequence defaults, which is keyed by the TEMP schema's version too).
    fn get(&self, version: i64) -> Option<Catalog> {
        let latest = self.latest.lock();
        let catalog = latest.as_ref().filter(|catalog| catalog.schema_version == version)?;
        Some(Catalog {
            search_path: None,
            sequence_defaults: Arc::default(),
            ..catalog.clone()
        })
    }

    /// A new shared catalog holding what this one holds, for a branch made from this one's database at a point
    /// of the same line of commits: versions are comparable along it, so a snapshot of the version the branch
    /// sees is the branch's catalog. The two are apart from then on.
    pub fn copy_for_branch(&self) -> SharedCatalog {
        SharedCatalog {
            latest: parking_lot::Mutex::new(self.latest.lock().clone()),
        }
    }

    /// Keeps `catalog` unless a newer version is held.
    fn put(&self, catalog: &Catalog) {
        let mut latest = self.latest.lock();
        if latest
            .as_ref()
            .is_none_or(|held| held.schema_version <= catalog.schema_version)
        {
            *latest = Some(Catalog {
                search_path: None,
                sequence_defaults: Arc::default(),
                ..catalog.clone()
            });
        }
    }
}

fn load_sequences(conn: &Connection) -> rusqlite::Result<Vec<SequenceEntry>> {
    let exists: Option<i64> = conn
        .prepare_cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_cambium_sequences'")?
        .query_row([], |row| row.get(0))
        .optional()?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached("SELECT name, owner_table, owner_column, identity FROM _cambium_sequences")?;
    let rows = stmt.query_map([], |row| {
        let table: Option<String> = row.get(1)?;
        let column: Option<String> = row.get(2)?;
        Ok(SequenceEntry {
            name: row.get(0)?,
            owner: table.zip(column),
            identity: row.get(3)?,
        })
    })?;
    rows.collect()
}

/// The SQL that records `table.column` as `ty` (inside the DDL's transaction).
pub fn record_column(table: &str, column: &str, ty: PgType) -> String {
    format!(
        "INSERT OR REPLACE INTO _cambium_columns (table_name, column_name, type) VALUES ({}, {}, {})",
        quote_literal(&table.to_ascii_lowercase()),
        quote_literal(column),
        quote_literal(&ty.catalog_text())
    )
}

/// The SQL that forgets a table's columns.
pub fn forget_table(table: &str) -> String {
    format!(
        "DELETE FROM _cambium_columns WHERE table_name = {}",
        quote_literal(&table.to_ascii_lowercase())
    )
}

/// The SQL that forgets one column.
pub fn forget_column(table: &str, column: &str) -> String {
    format!(
        "DELETE FROM _cambium_columns WHERE table_name = {} AND column_name = {} COLLATE NOCASE",
        quote_literal(&table.to_ascii_lowercase()),
        quote_literal(column)
    )
}

/// The SQL that moves a table's columns to its new name.
pub fn rename_table(from: &str, to: &str) -> String {
    format!(
        "UPDATE _cambium_columns SET table_name = {} WHERE table_name = {}",
        quote_literal(&to.to_ascii_lowercase()),
        quote_literal(&from.to_ascii_lowercase())
    )
}

/// The SQL that renames one column.
pub fn rename_column(table: &str, from: &str, to: &str) -> String {
    format!(
        "UPDATE _cambium_columns SET column_name = {} WHERE table_name = {} AND column_name = {} COLLATE NOCASE",
        quote_literal(to),
        quote_literal(&table.to_ascii_lowercase()),
        quote_literal(from)
    )
}

/// A SQL string literal.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A SQL identifier, always quoted.
pub fn quote_ident(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two connections to one fresh database file (removed when dropped).
    struct Database {
        path: std::path::PathBuf,
    }

    impl Database {
        fn new(name: &str) -> Database {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos();
            let path = std::env::temp_dir().join(format!("pgcompat-{name}-{}-{nanos}.db", std::process::id()));
            let db = Database { path };
            db.connect()
                .execute_batch(&format!(
                    "{CREATE_COLUMNS_TABLE}; CREATE TABLE t (a INTEGER); \
                     INSERT INTO _cambium_columns VALUES ('t', 'a', 'int4');"
                ))
                .expect("schema");
            db
        }

        fn connect(&self) -> Connection {
            Connection::open(&self.path).expect("open")
        }
    }

    impl Drop for Database {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn type_of(catalog: &Catalog) -> Option<String> {
        catalog.column_type("t", "a").map(PgType::catalog_text)
    }

    /// Rewrites the recorded type behind the catalog's back (no schema version move, which the layer's DDL
    /// never does): a session that then shows the old type took the shared snapshot, one that shows the new
    /// type read its own.
    fn retype_quietly(conn: &Connection, ty: &str) {
        conn.execute("UPDATE _cambium_columns SET type = ?1", [ty])
            .expect("retype");
    }

    #[test]
    fn sessions_take_the_shared_snapshot_of_their_version_only() {
        let db = Database::new("shared");
        let shared = SharedCatalog::default();
        let (first, second, third) = (db.connect(), db.connect(), db.connect());
        let mut catalog = Catalog::default();
        assert!(catalog.refresh_shared(&first, Some(&shared)).expect("refresh"));
        assert_eq!(type_of(&catalog).as_deref(), Some("int4"));
        retype_quietly(&first, "int8");
        // Same version: the snapshot is taken, not read.
        let mut taken = Catalog::default();
        assert!(taken.refresh_shared(&second, Some(&shared)).expect("refresh"));
        assert_eq!(type_of(&taken).as_deref(), Some("int4"));
        // Without the shared one a session reads its own.
        let mut own = Catalog::default();
        own.refresh_shared(&third, None).expect("refresh");
        assert_eq!(type_of(&own).as_deref(), Some("int8"));
        // A schema change moves the version: the snapshot held is of the old one, so the next session reads
        // (and leaves) its own.
        first.execute_batch("CREATE TABLE u (b INTEGER)").expect("ddl");
        let mut after = Catalog::default();
        after.refresh_shared(&third, Some(&shared)).expect("refresh");
        assert_eq!(type_of(&after).as_deref(), Some("int8"));
        assert!(after.relation_exists("u"));
        retype_quietly(&first, "text");
        assert!(taken.refresh_shared(&second, Some(&shared)).expect("refresh"));
        assert_eq!(type_of(&taken).as_deref(), Some("int8"));
        assert!(taken.relation_exists("u"));
        // An older version never replaces a newer one.
        shared.put(&catalog);
        assert_eq!(
            shared.get(after.schema_version()).map(|c| type_of(&c)),
            Some(Some("int8".to_owned()))
        );
    }

    /// Translates and runs `sql` on `conn` through `dialect`.
    fn run(dialect: &mut crate::Dialect, conn: &Connection, sql: &str) {
        let translated = dialect.translate(conn, sql).expect("translates");
        let crate::Translated::Statements(list) = &*translated else {
            panic!("not a statement: {sql}");
        };
        for translation in list {
            for step in &translation.steps {
                conn.execute_batch(step).expect("runs");
            }
        }
    }

    #[test]
    fn a_schema_change_is_shared_once_no_transaction_holds_it() {
        let db = Database::new("after-ddl");
        let shared = Arc::new(SharedCatalog::default());
        let (first, second) = (db.connect(), db.connect());
        let mut writer = crate::Dialect::new(&first, "db", "user", 1).expect("installs");
        writer.share_catalog(Arc::clone(&shared));
        let mut reader = crate::Dialect::new(&second, "db", "user", 2).expect("installs");
        reader.share_catalog(Arc::clone(&shared));
        run(&mut writer, &first, "BEGIN");
        run(&mut writer, &first, "CREATE TABLE w (x BIGINT)");
        // Inside the transaction: nothing is shared, nor is the hint spent.
        writer.share_catalog_after_schema_change(&first).expect("share");
        assert!(shared.latest.lock().is_none());
        run(&mut writer, &first, "COMMIT");
        // Once it committed, the session reads the catalog and leaves it for the others.
        writer.share_catalog_after_schema_change(&first).expect("share");
        let version = shared.latest.lock().as_ref().map(Catalog::schema_version);
        assert_eq!(version, Some(writer.catalog().schema_version()));
        retype_quietly(&first, "text");
        reader.refresh(&second).expect("refresh");
        let taken = reader.catalog().column_type("w", "x").map(PgType::catalog_text);
        assert_eq!(taken.as_deref(), Some("int8"), "the reader took the shared snapshot");
        // Without a schema change since, nothing is read again.
        run(&mut writer, &first, "SELECT 1");
        shared.latest.lock().take();
        writer.share_catalog_after_schema_change(&first).expect("share");
        assert!(shared.latest.lock().is_none());
    }

    #[test]
    fn a_transaction_or_a_temp_object_neither_takes_nor_leaves_a_snapshot() {
        let db = Database::new("private");
        let shared = SharedCatalog::default();
        let (first, second) = (db.connect(), db.connect());
        // Inside a transaction with its own schema change, rolled back: nothing of it is left for others.
        first
            .execute_batch(
                "BEGIN; CREATE TABLE gone (x INTEGER); INSERT INTO _cambium_columns VALUES ('gone', 'x', 'int8');",
            )
            .expect("ddl");
        let mut inside = Catalog::default();
        inside.refresh_shared(&first, Some(&shared)).expect("refresh");
        assert!(inside.relation_exists("gone"));
        assert!(inside.table("gone").is_some());
        first.execute_batch("ROLLBACK").expect("rollback");
        assert!(
            shared.latest.lock().is_none(),
            "a snapshot read inside a transaction was shared"
        );
        // A connection with a TEMP object reads its own and leaves none.
        second
            .execute_batch("CREATE TEMP TABLE scratch (y INTEGER)")
            .expect("temp");
        let mut with_temp = Catalog::default();
        with_temp.refresh_shared(&second, Some(&shared)).expect("refresh");
        assert!(
            shared.latest.lock().is_none(),
            "a connection with TEMP objects shared its snapshot"
        );
        // Another connection outside a transaction leaves one, which the TEMP connection does not take.
        let mut plain = Catalog::default();
        plain.refresh_shared(&first, Some(&shared)).expect("refresh");
        assert!(!plain.relation_exists("gone"));
        assert!(shared.latest.lock().is_some());
        retype_quietly(&first, "int8");
        let mut again = Catalog::default();
        again.refresh_shared(&second, Some(&shared)).expect("refresh");
        assert_eq!(type_of(&again).as_deref(), Some("int8"));
    }
}
