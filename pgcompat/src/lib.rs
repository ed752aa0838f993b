//! Cambium's PostgreSQL dialect layer over SQLite.
//!
//! A PostgreSQL statement text goes in ([`Dialect::translate`]); out come the SQLite statements that do the
//! same, the PostgreSQL types of their parameters and result columns, and what kind of statement it was.
//! Values travel in PostgreSQL's text and binary forms ([`value`]); the types of columns live in a catalog
//! table inside the database ([`catalog`]), so they branch, restore and time-travel with the data.
//!
//! The layer depends on no other Cambium crate: it works over any `rusqlite::Connection`, which is how it
//! is tested and benchmarked alone. The compute's PostgreSQL front calls it for every statement.
//!
//! **Boundary:** no networking, no storage; SQLite is reached only through the connection given.

// One `unsafe` call, reviewed: the connection handle a sequence function writes through (see
// `functions::sequence::on_connection`). Everything else stays safe code.
#![deny(unsafe_code)]

pub mod advisory;
pub mod catalog;
pub mod copy;
pub mod deferrable;
pub mod enums;
pub mod error;
pub mod functions;
pub mod notify;
pub mod pg_catalog;
pub mod routines;
pub mod schemas;
pub mod sequence;
pub mod settings;
pub mod shapes;
pub mod translate;
pub mod types;
pub mod value;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use rusqlite::{Connection, Statement};

pub use catalog::Catalog;
pub use error::PgError;
pub use functions::SessionState;
pub use translate::{Bound, Capture, Kind, Translated, Translation};
pub use types::{Base, PgType};

/// Most translations a session keeps (by statement text); the oldest goes first.
pub const TRANSLATIONS_MAX: usize = 512;
/// Most transaction-control texts a session keeps translated (savepoint names vary: ORMs number them).
pub const CONTROL_TEXTS_MAX: usize = 64;
/// Longest statement text cached; longer ones are translated every time (bulk INSERTs).
pub const CACHED_SQL_BYTES_MAX: usize = 16 << 10;
/// Highest parameter number (`$n`) the layer types (PostgreSQL's protocol allows 65535).
pub const PARAMS_MAX: usize = 65_535;
/// Largest value a function of the layer builds (the compute limits SQLite's own values to the same).
pub const VALUE_BYTES_MAX: usize = 256 << 20;

/// The effective `search_path` of a session, kept while the setting's text and the schemas stay the same.
#[derive(Debug, Default)]
struct PathMemo {
    /// The setting's text it was computed from (`None`: never computed).
    raw: Option<String>,
    schemas: Arc<Vec<schemas::SchemaEntry>>,
    /// The path's names, NUL-separated.
    key: Arc<str>,
}

/// One session's dialect state: its catalog snapshot, its translation cache, and what its functions read.
#[derive(Debug)]
pub struct Dialect {
    state: Arc<SessionState>,
    catalog: Catalog,
    /// Translations by the effective `search_path` they were made under (its names NUL-separated; names hold
    /// no NUL), then by statement text: a translation is never used under another path.
    cache: HashMap<Arc<str>, HashMap<String, Arc<Translated>>>,
    /// (path, text) of each cached translation, oldest first.
    order: VecDeque<(Arc<str>, String)>,
    /// The effective `search_path` as last computed, and what it was computed from.
    path: PathMemo,
    /// Translations reused across texts that differ only in integer literals (`shapes`), cleared and keyed
    /// as `cache` is.
    shapes: shapes::Shapes,
    /// How texts of each form were cut before (not cleared with the catalog: it is the tokenizer's).
    shape_memo: shapes::ShapeMemo,
    /// Transaction control (`BEGIN`, `COMMIT`, `SAVEPOINT s`, …) by text: translated without the catalog, so
    /// kept across schema changes; emptied when [`CONTROL_TEXTS_MAX`] is reached.
    control: HashMap<String, Arc<Translated>>,
    /// Translations made by filling a learned shape's template.
    shape_fills: u64,
    /// The catalog version the cached translations were made at.
    cache_version: i64,
    /// The database's commit version as the caller last gave it ([`Dialect::set_commit_version`]).
    commit_version: Option<u64>,
    /// The commit version at the catalog's last read outside a transaction; `None` after a read inside one
    /// (which may have seen the transaction's own schema changes, gone if it rolls back).
    catalog_read_at: Option<u64>,
    /// The catalog this session's database shares among its sessions ([`Dialect::share_catalog`]).
    shared_catalog: Option<Arc<catalog::SharedCatalog>>,
    /// A statement that may change the schema was translated since the last
    /// [`Dialect::share_catalog_after_schema_change`] outside a transaction.
    schema_may_have_changed: bool,
}

impl Dialect {
    /// Installs the layer's functions and collation on `conn` for a session of `user` on `database`.
    pub fn new(conn: &Connection, database: &str, user: &str, backend_pid: i32) -> rusqlite::Result<Dialect> {
        let state = Arc::new(SessionState::new(database, user, backend_pid));
        functions::install(conn, state.clone())?;
        // The catalog's TEMP views are made when a statement first reads them, but a read-only connection
        // (time travel sets `query_only` before the session starts) could not make them then: they are made
        // now, `query_only` lifted for that moment. It guards the database file; TEMP views live in the
        // connection's memory, and nothing else runs in between.
        let query_only: bool = conn.pragma_query_value(None, "query_only", |row| row.get(0))?;
        if query_only {
            conn.pragma_update(None, "query_only", false)?;
            let made = pg_catalog::ensure(conn);
            conn.pragma_update(None, "query_only", true)?;
            made?;
        }
        Ok(Dialect {
            state,
            catalog: Catalog::default(),
            cache: HashMap::new(),
            order: VecDeque::new(),
            path: PathMemo::default(),
            shapes: shapes::Shapes::default(),
            shape_memo: shapes::ShapeMemo::default(),
            control: HashMap::new(),
            shape_fills: 0,
            cache_version: -1,
            commit_version: None,
            catalog_read_at: None,
            shared_catalog: None,
            schema_may_have_changed: false,
        })
    }

    /// Takes catalog snapshots from `shared`, and leaves them there, from now on (see
    /// [`catalog::Catalog::refresh_shared`]). The caller guarantees every connection given the same `shared`
    /// reads the same database along one line of commits (one branch's store).
    pub fn share_catalog(&mut self, shared: Arc<catalog::SharedCatalog>) {
        self.shared_catalog = Some(shared);
    }

    /// Call when the session holds no transaction (after a call outside a block, or a block's end): if a
    /// statement translated since may have changed the schema, reads the catalog now and leaves it in the shared
    /// catalog, so the next session of the database, or a branch made from it meanwhile, need not (a migration's
    /// session usually ends right after its last DDL; the schema a multi-statement text makes inside its implicit
    /// transaction is never shared from within it). Does nothing without a shared catalog; costs what the
    /// session's next statement would have paid anyway.
    pub fn share_catalog_after_schema_change(&mut self, conn: &Connection) -> Result<(), TranslateError> {
        if self.shared_catalog.is_none() || !conn.is_autocommit() || !self.schema_may_have_changed {
            return Ok(());
        }
        self.schema_may_have_changed = false;
        self.refresh(conn)
    }

    /// What the session's functions read (its zone, its transaction timestamp).
    pub fn state(&self) -> &Arc<SessionState> {
        &self.state
    }

    /// How many translations this session made by filling a learned shape's template (`shapes`).
    pub fn shape_fills(&self) -> u64 {
        self.shape_fills
    }

    /// How many texts this session cut into their shapes from its memo of their form, without tokenizing.
    pub fn shapes_cut_from_memo(&self) -> u64 {
        self.shape_memo.hits()
    }

    /// The catalog as of the last translation.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Gives the database's commit version for the next [`Dialect::translate`] only: a number that changes
    /// with every commit to the database by any connection, read just before that call (for the compute, its
    /// store's latest commit LSN). While it stays where it was at the catalog's last read outside a
    /// transaction, a statement outside one needs no read of the schema version (a read transaction of its
    /// own in SQLite, a fifth of a one-row autocommit statement's work). Not given: read every time.
    pub fn set_commit_version(&mut self, version: Option<u64>) {
        self.commit_version = version;
    }

    /// Reads the catalog again if the schema changed.
    pub fn refresh(&mut self, conn: &Connection) -> Result<(), TranslateError> {
        self.refresh_at(conn, None)
    }

    /// [`Dialect::refresh`], skipped outside a transaction if `version` (see
    /// [`Dialect::set_commit_version`]) is the one the catalog was last read at outside one.
    fn refresh_at(&mut self, conn: &Connection, version: Option<u64>) -> Result<(), TranslateError> {
        let autocommit = conn.is_autocommit();
        if autocommit && self.cache_version != -1 && version.is_some() && self.catalog_read_at == version {
            return Ok(());
        }
        // The version given was read before the schema version is, so a commit in between is a change the
        // next call sees. Noted once the catalog is read.
        self.catalog_read_at = None;
        let read_at = if autocommit { version } else { None };
        if self
            .catalog
            .refresh_shared(conn, self.shared_catalog.as_deref())
            .map_err(TranslateError::Sqlite)?
        {
            functions::enums::install_catalog(conn, &self.state, self.catalog.enums())
                .map_err(TranslateError::Sqlite)?;
            self.state.set_catalog(&self.catalog);
        }
        if self.catalog.schema_version() != self.cache_version {
            self.cache.clear();
            self.order.clear();
            self.shapes.clear();
            self.cache_version = self.catalog.schema_version();
        }
        self.catalog_read_at = read_at;
        Ok(())
    }

    /// Translates a query text, from the cache when the same text was translated at this schema.
    pub fn translate(&mut self, conn: &Connection, sql: &str) -> Result<Arc<Translated>, TranslateError> {
        let translated = self.translate_text(conn, sql)?;
        if translated.may_change_schema() {
            self.schema_may_have_changed = true;
        }
        Ok(translated)
    }

    fn translate_text(&mut self, conn: &Connection, sql: &str) -> Result<Arc<Translated>, TranslateError> {
        let commit_version = self.commit_version.take();
        // Transaction control needs no catalog, and must work when the database cannot be read (a failed
        // transaction is ended with ROLLBACK even while reads fail).
        if is_transaction_control(sql) {
            if let Some(hit) = self.control.get(sql) {
                return Ok(hit.clone());
            }
            let translated = Arc::new(translate::translate(conn, &Catalog::default(), sql)?);
            if self.control.len() >= CONTROL_TEXTS_MAX {
                self.control.clear();
            }
            self.control.insert(sql.to_owned(), translated.clone());
            return Ok(translated);
        }
        // The first statement after BEGIN reads with the catalog as last seen: reading the schema version
        // there would start the transaction's snapshot before the statement does, widening the window in
        // which another commit makes this transaction's first write refused. Every later statement of the
        // block reads it inside the snapshot the block already has.
        let first_of_block = !conn.is_autocommit()
            && conn
                .transaction_state(Some(rusqlite::MAIN_DB))
                .is_ok_and(|state| state == rusqlite::TransactionState::None);
        if !first_of_block || self.cache_version == -1 {
            self.refresh_at(conn, commit_version)?;
        }
        // Unqualified names resolve through the session's `search_path`: a translation is cached under the
        // path it was made with, so one made under another path is never used.
        let path = self.current_path();
        if let Some(hit) = self.cache.get(&path).and_then(|by_text| by_text.get(sql)) {
            // The catalog views live in the connection's temp schema: a rolled-back transaction that
            // made them took them away, so a cached statement reading them makes them again if needed.
            if let Translated::Statements(list) = hit.as_ref() {
                if list.iter().any(Translation::reads_catalog) {
                    pg_catalog::ensure(conn).map_err(TranslateError::Sqlite)?;
                }
            }
            return Ok(hit.clone());
        }
        // A text like one seen before but for its integer literals: the learned template filled in, or
        // learned now if this is the shape's second sighting (see `shapes`).
        let shape = self.shape_memo.shape_of(sql);
        let known = shape
            .as_ref()
            .and_then(|shape| self.shapes.get(&path, &shape.key).cloned());
        if let (Some(shape), Some(shapes::Known::Learned(template))) = (&shape, &known) {
            let mut filled = template.fill(&shape.values);
            if let ([translation], Some(bound)) = (filled.as_mut_slice(), template.bind(&shape.values)) {
                translation.bound = Some(bound);
            }
            self.shape_fills += 1;
            if filled.iter().any(Translation::reads_catalog) {
                pg_catalog::ensure(conn).map_err(TranslateError::Sqlite)?;
            }
            return Ok(Arc::new(Translated::Statements(filled)));
        }
        let translated = Arc::new(translate::translate(conn, &self.catalog, sql)?);
        if let Some(shape) = shape {
            let next = match known {
                None => Some(shapes::Known::SeenOnce),
                Some(shapes::Known::SeenOnce) => {
                    let catalog = &self.catalog;
                    let template = shapes::Template::learn(&shape, &translated, |text| {
                        translate::translate(conn, catalog, text).ok()
                    });
                    Some(match template {
                        Some(template) => shapes::Known::Learned(Arc::new(template)),
                        None => shapes::Known::Opaque,
                    })
                }
                Some(shapes::Known::Opaque | shapes::Known::Learned(_)) => None,
            };
            if let Some(next) = next {
                let learned = matches!(next, shapes::Known::Learned(_));
                self.shapes.set(path.clone(), shape.key, next);
                // The template serves this shape's texts from now on: they are not kept by text too, where
                // one-off values would push out the texts that repeat.
                if learned {
                    return Ok(translated);
                }
            }
        }
        // DDL is not kept: what it does depends on objects the cache's key does not see (a TEMP table made or
        // dropped leaves the database's schema version as it was), and a DDL text is rarely run twice.
        if sql.len() <= CACHED_SQL_BYTES_MAX && !translated.may_change_schema() {
            if self.order.len() >= TRANSLATIONS_MAX {
                if let Some((oldest_path, oldest)) = self.order.pop_front() {
                    if let Some(by_text) = self.cache.get_mut(&oldest_path) {
                        by_text.remove(&oldest);
                        if by_text.is_empty() {
                            self.cache.remove(&oldest_path);
                        }
                    }
                }
            }
            self.cache
                .entry(path.clone())
                .or_default()
                .insert(sql.to_owned(), translated.clone());
            self.order.push_back((path, sql.to_owned()));
        }
        assert!(self.order.len() <= TRANSLATIONS_MAX, "translation cache over its bound");
        Ok(translated)
    }

    /// The session's effective `search_path` (its names NUL-separated), computed again only when the
    /// setting's text or the database's schemas changed; the catalog snapshot resolves names with it.
    fn current_path(&mut self) -> Arc<str> {
        let schemas = self.state.schemas();
        let same = Arc::ptr_eq(&schemas, &self.path.schemas)
            && self
                .state
                .read_settings(|s| self.path.raw.as_deref() == Some(s.raw(settings::SEARCH_PATH).unwrap_or_default()));
        if !same {
            let raw = self
                .state
                .read_settings(|s| s.raw(settings::SEARCH_PATH).unwrap_or_default().to_owned());
            let path = self.state.effective_search_path();
            self.path = PathMemo {
                raw: Some(raw),
                schemas,
                key: Arc::from(path.join("\0")),
            };
            self.catalog.set_search_path(path);
        }
        self.path.key.clone()
    }

    /// Call when the session holds no transaction (after each statement outside a block, and after a block
    /// ends): the sequence values a rolled-back transaction or failed statement took are stored again, so
    /// nobody is given them again, as in PostgreSQL (see `functions::sequence::settle`). Cheap when the
    /// session called no `nextval` since the last call.
    pub fn settle_sequences(&self, conn: &Connection) -> rusqlite::Result<()> {
        if !conn.is_autocommit() {
            return Ok(());
        }
        functions::sequence::settle(conn, &self.state)
    }

    /// The statements to run before the open transaction block commits: the checks of the deferrable
    /// UNIQUE constraints it violated while they were deferred (`deferrable`), each failing with 23505 when
    /// a duplicate is left. A failure rolls the block back, as PostgreSQL's failing COMMIT does.
    pub fn commit_checks(&mut self, conn: &Connection) -> Result<Vec<String>, TranslateError> {
        self.refresh(conn)?;
        let modes = self.state.constraint_modes();
        Ok(self
            .catalog
            .deferrable_uniques()
            .iter()
            .filter(|c| modes.is_noted(&c.name))
            .map(deferrable::DeferrableUnique::check_sql)
            .collect())
    }

    /// `SET CONSTRAINTS {ALL | names} {DEFERRED | IMMEDIATE}` (names without their schema): the modes set
    /// for the open block (nothing outside one, as PostgreSQL only warns there), and the statements to run
    /// now, the checks of the constraints made immediate that were violated while deferred. Names of other
    /// constraints (deferrable foreign keys, which SQLite checks as it declares them) are accepted and
    /// change nothing.
    pub fn set_constraints(
        &mut self,
        conn: &Connection,
        names: Option<&[String]>,
        deferred: bool,
    ) -> Result<Vec<String>, TranslateError> {
        self.refresh(conn)?;
        let schemas = self.catalog.schemas().clone();
        let bare = |c: &deferrable::DeferrableUnique| schemas::split_sqlite_name(&c.name, &schemas).1.to_owned();
        let affected: Vec<&deferrable::DeferrableUnique> = self
            .catalog
            .deferrable_uniques()
            .iter()
            .filter(|c| names.is_none_or(|names| names.contains(&bare(c))))
            .collect();
        let mut modes = self.state.constraint_modes();
        match names {
            None => modes.set(None, deferred),
            Some(_) => {
                let sqlite: Vec<String> = affected.iter().map(|c| c.name.clone()).collect();
                modes.set(Some(&sqlite), deferred);
            }
        }
        if deferred {
            return Ok(Vec::new());
        }
        Ok(affected
            .into_iter()
            .filter(|c| modes.is_noted(&c.name))
            .map(deferrable::DeferrableUnique::check_sql)
            .collect())
    }

    /// The PostgreSQL type of each result column of a prepared statement: the translation's inferred
    /// type, else the catalog's type of the column it comes from; `None` where neither knows (the caller
    /// then decides from SQLite's declared type or the values).
    pub fn column_types(&self, stmt: &Statement<'_>, translation: Option<&Translation>) -> Vec<Option<PgType>> {
        let count = stmt.column_count();
        let inferred = translation
            .and_then(|t| t.columns.as_ref())
            .filter(|c| c.len() == count);
        (0..count)
            .map(|i| {
                if let Some(ty) = inferred.and_then(|c| c[i]) {
                    return Some(ty);
                }
                let meta = stmt.column_metadata(i).ok().flatten()?;
                let table = meta.1.to_str().ok()?;
                let column = meta.2.to_str().ok()?;
                self.catalog.column_type(table, column)
            })
            .collect()
    }

    /// Each result column's table OID and column number as PostgreSQL's RowDescription gives them, `None` where
    /// it gives zeros: only for a translated plain query of tables ([`Translation::column_origins`]), and only
    /// for a column that is a column of a table of the main database (not an expression, not a TEMP table's,
    /// not the layer's own), which SQLite's column metadata traces through subqueries and CTEs as PostgreSQL
    /// does. The catalog must be the one the statement was translated against.
    pub fn column_origins(
        &self,
        stmt: &Statement<'_>,
        translation: Option<&Translation>,
    ) -> Vec<Option<catalog::ColumnOrigin>> {
        let count = stmt.column_count();
        if !translation.is_some_and(|t| t.column_origins) {
            return vec![None; count];
        }
        // The names SQLite gives are those of the schema, made from the layer's UTF-8 statements.
        stmt.columns_with_metadata()
            .iter()
            .map(|meta| {
                if meta.database_name()? != "main" {
                    return None;
                }
                self.catalog.column_origin(meta.table_name()?, meta.origin_name()?)
            })
            .collect()
    }
}

/// Whether a statement text is only transaction control (`BEGIN`, `COMMIT`, `ROLLBACK`, savepoints), which
/// translates without the catalog.
fn is_transaction_control(sql: &str) -> bool {
    let trimmed = sql.trim_start();
    let word: String = trimmed
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    let single = !trimmed.trim_end().trim_end_matches(';').contains(';');
    single
        && matches!(
            word.as_str(),
            "BEGIN" | "START" | "COMMIT" | "END" | "ROLLBACK" | "ABORT" | "SAVEPOINT" | "RELEASE"
        )
}

/// Why a statement could not be translated.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    /// The statement is wrong or unsupported, in PostgreSQL's terms.
    #[error("{0}")]
    Sql(#[from] PgError),
    /// Reading the schema or the catalog failed in SQLite (an I/O error of the store, a busy database):
    /// the caller explains it like any SQLite error.
    #[error("reading the schema: {0}")]
    Sqlite(rusqlite::Error),
}

/// The PostgreSQL error a SQLite error message carries if one of the layer's functions raised it.
pub fn error_of(message: &str) -> Option<PgError> {
    functions::error_of(message)
}
