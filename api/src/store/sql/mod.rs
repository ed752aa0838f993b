//! The store's SQL seam: one [`Connection`] over either metadata backend, SQLite (rusqlite, the default: a file in
//! the data directory) or PostgreSQL (tokio-postgres, `--metadata postgresql://…`), with the few calls the store
//! makes (run a statement, read one row or all rows, a transaction) and owned rows of four kinds of [`Value`].
//!
//! Every statement is written once, in the subset both dialects accept, with SQLite's `?N` placeholders; on
//! PostgreSQL they become `$N` and the migrations' DDL is translated (see [`postgres`]). Where the dialects differ
//! in what a statement can say (JSON functions), the store asks [`Connection::dialect`] and picks the text.
//!
//! **Invariant:** a [`TransactionBehavior::Immediate`] transaction is the only writer of the metadata while it is
//! open: SQLite's `BEGIN IMMEDIATE` takes the database's write lock; on PostgreSQL it takes one transaction-scoped
//! advisory lock ([`postgres::WRITER_LOCK_KEY`]) that every immediate transaction of every process takes first,
//! so a count-then-insert (a quota) or a check-then-insert (one running operation per branch) holds across
//! processes as it does across threads. A single statement outside a transaction relies on the backend's own
//! atomicity (and PostgreSQL's row locks).

pub(crate) mod postgres;

use std::cell::Cell;
use std::fmt;

/// A result of the seam.
pub type Result<T, E = SqlError> = std::result::Result<T, E>;

/// An error of a metadata backend, or of reading what it returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed, or the connection to it did.
    #[error("postgresql: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// The connection to PostgreSQL could not be made or is gone.
    #[error("postgresql connection: {0}")]
    Connection(String),
    /// A statement that must return a row returned none.
    #[error("the query returned no row")]
    NoRow,
    /// A column held a value of another kind than the store wrote there.
    #[error("column {index}: {message}")]
    Column {
        /// The column's index in the row.
        index: usize,
        /// What was wrong.
        message: String,
    },
    /// A parameter cannot be stored (an integer beyond `i64`).
    #[error("parameter: {0}")]
    Parameter(String),
    /// A statement could not be translated to PostgreSQL.
    #[error("statement not translated: {0}")]
    Translate(String),
}

impl SqlError {
    /// A column error: column `index` held something else than expected.
    pub fn column(index: usize, message: impl fmt::Display) -> SqlError {
        SqlError::Column {
            index,
            message: message.to_string(),
        }
    }

    /// Whether this is a uniqueness violation (a duplicate key), on either backend.
    pub fn is_unique_violation(&self) -> bool {
        match self {
            SqlError::Sqlite(rusqlite::Error::SqliteFailure(code, _)) => {
                code.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            }
            SqlError::Postgres(error) => error.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION),
            _ => false,
        }
    }

    /// Whether the metadata server was out of reach (the connection could not be made, broke, or timed out at
    /// the socket; the server shutting down or refusing connections), rather than a statement failing: a
    /// retry later may work, so the API says 503, not 500.
    pub fn is_connection_loss(&self) -> bool {
        match self {
            SqlError::Connection(_) => true,
            SqlError::Postgres(error) => {
                let io = std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>());
                let code = error.code().map(tokio_postgres::error::SqlState::code);
                // Class 08: connection exception; 57P01-57P03: shutdown, crash shutdown, cannot connect now.
                error.is_closed()
                    || io
                    || code.is_some_and(|code| code.starts_with("08") || ["57P01", "57P02", "57P03"].contains(&code))
            }
            _ => false,
        }
    }
}

/// Which backend a connection speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// A value in a row or a parameter: the four kinds the metadata holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer (SQLite INTEGER; PostgreSQL bigint, integer, smallint or boolean).
    Integer(i64),
    /// Text.
    Text(String),
    /// Bytes (SQLite BLOB; PostgreSQL bytea).
    Blob(Vec<u8>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Integer(_) => "an integer",
            Value::Text(_) => "text",
            Value::Blob(_) => "bytes",
        }
    }
}

/// A Rust value that can be a statement's parameter.
pub trait ToSql {
    /// The value bound; an error if it cannot be stored.
    fn to_value(&self) -> Result<Value>;
}

impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_value(&self) -> Result<Value> {
        (**self).to_value()
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn to_value(&self) -> Result<Value> {
        match self {
            Some(value) => value.to_value(),
            None => Ok(Value::Null),
        }
    }
}

impl ToSql for str {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Text(self.to_owned()))
    }
}

impl ToSql for String {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Text(self.clone()))
    }
}

impl ToSql for [u8] {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Blob(self.to_vec()))
    }
}

impl ToSql for Vec<u8> {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Blob(self.clone()))
    }
}

impl ToSql for bool {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Integer(i64::from(*self)))
    }
}

impl ToSql for Value {
    fn to_value(&self) -> Result<Value> {
        Ok(self.clone())
    }
}

macro_rules! integer_to_sql {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_value(&self) -> Result<Value> {
                i64::try_from(*self)
                    .map(Value::Integer)
                    .map_err(|_| SqlError::Parameter(format!("{self} does not fit a 64-bit integer")))
            }
        }
    )*};
}
integer_to_sql!(i64, i32, u16, u32, u64, usize);

/// A statement's parameters, bound in order to `?1`, `?2`, …
pub trait Params {
    /// The values, in order.
    fn values(self) -> Result<Vec<Value>>;
}

impl Params for &[&dyn ToSql] {
    fn values(self) -> Result<Vec<Value>> {
        self.iter().map(|value| value.to_value()).collect()
    }
}

impl Params for [&dyn ToSql; 0] {
    fn values(self) -> Result<Vec<Value>> {
        Ok(Vec::new())
    }
}

macro_rules! array_params {
    ($($n:literal),*) => {$(
        impl<T: ToSql> Params for [T; $n] {
            fn values(self) -> Result<Vec<Value>> {
                self.iter().map(ToSql::to_value).collect()
            }
        }
    )*};
}
array_params!(1, 2, 3, 4, 5, 6, 7, 8);

/// A list of parameters of any types: `params![id, name, 3]`.
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::store::sql::ToSql]
    };
    ($($param:expr),+ $(,)?) => {
        &[$(&$param as &dyn $crate::store::sql::ToSql),+] as &[&dyn $crate::store::sql::ToSql]
    };
}
pub(crate) use params;

/// A Rust value a column can be read as.
pub trait FromSql: Sized {
    /// `value` as this type, or why not.
    fn from_value(value: Value) -> std::result::Result<Self, String>;
}

impl<T: FromSql> FromSql for Option<T> {
    fn from_value(value: Value) -> std::result::Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            value => T::from_value(value).map(Some),
        }
    }
}

impl FromSql for Value {
    fn from_value(value: Value) -> std::result::Result<Self, String> {
        Ok(value)
    }
}

impl FromSql for String {
    fn from_value(value: Value) -> std::result::Result<Self, String> {
        match value {
            Value::Text(text) => Ok(text),
            other => Err(format!("expected text, found {}", other.kind())),
        }
    }
}

impl FromSql for Vec<u8> {
    fn from_value(value: Value) -> std::result::Result<Self, String> {
        match value {
            Value::Blob(bytes) => Ok(bytes),
            // SQLite keeps what a statement gave it: text written into a BLOB column stays text.
            Value::Text(text) => Ok(text.into_bytes()),
            other => Err(format!("expected bytes, found {}", other.kind())),
        }
    }
}

impl FromSql for bool {
    fn from_value(value: Value) -> std::result::Result<Self, String> {
        match value {
            Value::Integer(n) => Ok(n != 0),
            other => Err(format!("expected a boolean integer, found {}", other.kind())),
        }
    }
}

macro_rules! integer_from_sql {
    ($($t:ty),*) => {$(
        impl FromSql for $t {
            fn from_value(value: Value) -> std::result::Result<Self, String> {
                match value {
                    Value::Integer(n) => <$t>::try_from(n).map_err(|_| format!("{n} is out of range")),
                    other => Err(format!("expected an integer, found {}", other.kind())),
                }
            }
        }
    )*};
}
integer_from_sql!(i64, i32, u16, u32, u64);

/// One row of a result.
#[derive(Debug)]
pub struct Row<'a> {
    values: &'a [Value],
}

/// What names a column of a row: its index.
pub trait ColumnIndex {
    /// The index, from 0.
    fn index(self) -> usize;
}

impl ColumnIndex for usize {
    fn index(self) -> usize {
        self
    }
}

impl Row<'_> {
    /// Column `index` as `T`; [`SqlError::Column`] if there is no such column or it holds another kind.
    pub fn get<I: ColumnIndex, T: FromSql>(&self, index: I) -> Result<T> {
        let index = index.index();
        let value = self
            .values
            .get(index)
            .ok_or_else(|| SqlError::column(index, format!("the row has {} columns", self.values.len())))?;
        T::from_value(value.clone()).map_err(|message| SqlError::column(index, message))
    }
}

/// Turns a missing row into `None`.
pub trait OptionalExtension<T> {
    /// `Ok(None)` for [`SqlError::NoRow`], else as it is.
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(SqlError::NoRow) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// How a transaction starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionBehavior {
    /// Reads see each statement's latest committed state; writes lock as they go (SQLite `BEGIN DEFERRED`,
    /// PostgreSQL `BEGIN` at READ COMMITTED).
    Deferred,
    /// The only writer from its start (see the module's invariant).
    Immediate,
}

enum Backend {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

/// A connection to the metadata: SQLite or PostgreSQL.
pub struct Connection {
    backend: Backend,
    /// Whether a transaction this connection began has not ended yet (committed or rolled back): one that stays
    /// set after its [`Transaction`] is gone (a rollback failed) makes the connection unfit for reuse
    /// ([`Connection::is_reusable`]).
    in_transaction: Cell<bool>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Connection({:?})", self.dialect())
    }
}

impl Connection {
    /// A connection over an open SQLite connection.
    pub fn sqlite(conn: rusqlite::Connection) -> Connection {
        conn.set_prepared_statement_cache_capacity(SQLITE_STATEMENTS_CACHED_MAX);
        Connection {
            backend: Backend::Sqlite(conn),
            in_transaction: Cell::new(false),
        }
    }

    /// A connection to the PostgreSQL server at `url` (`postgresql://user@host:port/database`).
    pub fn postgres(url: &str) -> Result<Connection> {
        Ok(Connection {
            backend: Backend::Postgres(postgres::Client::connect(url)?),
            in_transaction: Cell::new(false),
        })
    }

    /// Whether another caller may use this connection as it is: no transaction left open (a failed rollback)
    /// and, on PostgreSQL, the connection to the server still up. A pool drops one that is not and makes another.
    pub fn is_reusable(&self) -> bool {
        match &self.backend {
            // SQLite says itself whether a transaction is open (it ends some on errors of its own).
            Backend::Sqlite(conn) => conn.is_autocommit(),
            Backend::Postgres(client) => !self.in_transaction.get() && !client.is_closed(),
        }
    }

    /// The SQLite connection, for what only SQLite has (pragmas, checkpoints); `None` on PostgreSQL.
    pub fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.backend {
            Backend::Sqlite(conn) => Some(conn),
            Backend::Postgres(_) => None,
        }
    }

    /// Which backend this is.
    pub fn dialect(&self) -> Dialect {
        match &self.backend {
            Backend::Sqlite(_) => Dialect::Sqlite,
            Backend::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs `sql` (one statement); returns how many rows it changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        let values = params.values()?;
        match &self.backend {
            Backend::Sqlite(conn) => Ok(conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(values.iter()))?),
            Backend::Postgres(client) => client.execute(sql, &values),
        }
    }

    /// Runs SQLite DDL (statements separated by `;`); on PostgreSQL it is translated first (column types, a
    /// `rowid`, collation: see [`postgres::translate_ddl`]).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Backend::Postgres(client) => client.batch_execute(&postgres::translate_ddl(sql)?),
        }
    }

    /// The first row of `sql`'s result through `f`; [`SqlError::NoRow`] if there is none.
    pub fn query_row<T>(&self, sql: &str, params: impl Params, f: impl FnOnce(&Row<'_>) -> Result<T>) -> Result<T> {
        let rows = self.rows(sql, params.values()?, Some(1))?;
        let first = rows.first().ok_or(SqlError::NoRow)?;
        f(&Row { values: first })
    }

    /// `sql`, to run with [`Statement::query_map`].
    pub fn prepare(&self, sql: &str) -> Result<Statement<'_>> {
        Ok(Statement {
            conn: self,
            sql: sql.to_owned(),
        })
    }

    /// Starts a [`TransactionBehavior::Deferred`] transaction.
    pub fn transaction(&mut self) -> Result<Transaction<'_>> {
        self.transaction_with_behavior(TransactionBehavior::Deferred)
    }

    /// Starts a transaction; it rolls back when dropped uncommitted.
    pub fn transaction_with_behavior(&mut self, behavior: TransactionBehavior) -> Result<Transaction<'_>> {
        self.in_transaction.set(true);
        let begun = match (&self.backend, behavior) {
            (Backend::Sqlite(conn), TransactionBehavior::Deferred) => sqlite_control(conn, "BEGIN DEFERRED"),
            (Backend::Sqlite(conn), TransactionBehavior::Immediate) => sqlite_control(conn, "BEGIN IMMEDIATE"),
            (Backend::Postgres(client), TransactionBehavior::Deferred) => client.batch_execute("BEGIN"),
            (Backend::Postgres(client), TransactionBehavior::Immediate) => client.begin_writer(),
        };
        if let Err(error) = begun {
            // On PostgreSQL `BEGIN` may have run and the writer lock's wait failed after it (`lock_timeout`): the
            // transaction is then open and aborted, and every later statement on the connection would fail until
            // it is rolled back.
            match &self.backend {
                Backend::Sqlite(conn) if conn.is_autocommit() => self.in_transaction.set(false),
                // Logged by `end_transaction`; a connection it cannot roll back is not reused.
                _ => drop(self.end_transaction("ROLLBACK")),
            }
            return Err(error);
        }
        Ok(Transaction { conn: self, open: true })
    }

    /// Ends the open transaction with `sql` (`COMMIT` or `ROLLBACK`); the connection is out of its transaction
    /// only if that worked, and a failed `COMMIT` is rolled back (SQLite leaves a busy COMMIT's transaction open).
    fn end_transaction(&self, sql: &str) -> Result<()> {
        let ended = self.finish(sql);
        match &ended {
            Ok(()) => self.in_transaction.set(false),
            Err(_) if sql != "ROLLBACK" => match self.finish("ROLLBACK") {
                Ok(()) => self.in_transaction.set(false),
                Err(error) => tracing::debug!(%error, "no transaction to roll back after a failed commit"),
            },
            Err(error) => {
                // PostgreSQL answers a ROLLBACK with no transaction open with a warning, not an error, so this is
                // a connection that failed: a pool replaces it (`is_reusable`).
                tracing::warn!(%error, "a metadata transaction's rollback failed");
            }
        }
        ended
    }

    /// Every row of `sql` (up to `rows_max`, if given), as owned values.
    fn rows(&self, sql: &str, values: Vec<Value>, rows_max: Option<usize>) -> Result<Vec<Vec<Value>>> {
        match &self.backend {
            Backend::Sqlite(conn) => sqlite_rows(conn, sql, &values, rows_max),
            Backend::Postgres(client) => client.query(sql, &values, rows_max),
        }
    }

    fn finish(&self, sql: &str) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(conn) => sqlite_control(conn, sql),
            Backend::Postgres(client) => client.batch_execute(sql),
        }
    }
}

/// How many prepared statements a SQLite connection keeps (its statement cache, least recently used out): more
/// than the store's distinct statements, so each is parsed once per connection, not once per call (parsing was
/// ~7 % of a branch creation's CPU).
const SQLITE_STATEMENTS_CACHED_MAX: usize = 512;

/// Runs one transaction-control statement (`BEGIN …`, `COMMIT`, `ROLLBACK`) from the statement cache.
fn sqlite_control(conn: &rusqlite::Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)?.raw_execute()?;
    Ok(())
}

fn sqlite_rows(
    conn: &rusqlite::Connection,
    sql: &str,
    values: &[Value],
    rows_max: Option<usize>,
) -> Result<Vec<Vec<Value>>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let columns = stmt.column_count();
    let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        if rows_max.is_some_and(|max| out.len() >= max) {
            break;
        }
        let mut values = Vec::with_capacity(columns);
        for index in 0..columns {
            values.push(match row.get_ref(index)? {
                rusqlite::types::ValueRef::Null => Value::Null,
                rusqlite::types::ValueRef::Integer(n) => Value::Integer(n),
                rusqlite::types::ValueRef::Text(text) => Value::Text(
                    String::from_utf8(text.to_vec()).map_err(|_| SqlError::column(index, "text is not UTF-8"))?,
                ),
                rusqlite::types::ValueRef::Blob(bytes) => Value::Blob(bytes.to_vec()),
                rusqlite::types::ValueRef::Real(_) => return Err(SqlError::column(index, "a real number")),
            });
        }
        out.push(values);
    }
    Ok(out)
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Integer(n) => ValueRef::Integer(*n),
            Value::Text(text) => ValueRef::Text(text.as_bytes()),
            Value::Blob(bytes) => ValueRef::Blob(bytes),
        }))
    }
}

/// A statement to run for all its rows.
pub struct Statement<'c> {
    conn: &'c Connection,
    sql: String,
}

impl Statement<'_> {
    /// Every row of the statement through `f`.
    pub fn query_map<T>(
        &mut self,
        params: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let rows = self.conn.rows(&self.sql, params.values()?, None)?;
        Ok(rows
            .iter()
            .map(|values| f(&Row { values }))
            .collect::<Vec<_>>()
            .into_iter())
    }
}

/// An open transaction: the connection's calls run inside it; it rolls back unless [`Transaction::commit`]ted.
pub struct Transaction<'c> {
    conn: &'c Connection,
    open: bool,
}

impl Transaction<'_> {
    /// Commits it.
    pub fn commit(mut self) -> Result<()> {
        self.open = false;
        self.conn.end_transaction("COMMIT")
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            // A rollback that fails is logged and leaves the connection unfit for reuse (`is_reusable`).
            drop(self.conn.end_transaction("ROLLBACK"));
        }
    }
}
