//! The PostgreSQL backend of the seam: a tokio-postgres client driven from the store's blocking calls, the
//! rewrite of SQLite's `?N` placeholders to `$N`, and the translation of the migrations' SQLite DDL.
//!
//! The store's calls block (async callers already run them in `spawn_blocking`, as SQLite needs). The client's
//! futures only exchange messages with its connection task, which does the socket I/O on a thread of its own
//! with a one-thread tokio runtime; a call waits on its future with `futures::executor::block_on`, so it works
//! from any thread, inside a runtime or not (no nested `Runtime::block_on`, which is why this and not the
//! `postgres` crate, whose blocking client owns a runtime per call site and panics inside another one).
//!
//! **Boundary:** both the SQL texts and the values are the store's own: a statement is tokenized by `sqlparser`
//! only to rename its placeholders (`?3` → `$3`); its other tokens are written back as they were. The DDL translation maps column
//! types (SQLite `INTEGER` → `bigint`, `BLOB` → `bytea`), gives every `TEXT` column the `"C"` collation (ids and
//! timestamps compare and sort bytewise, as in SQLite, whatever the server's locale), and gives every table the
//! `rowid` SQLite gives it implicitly (a `bigserial`), so `ORDER BY rowid` means creation order on both.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use sqlparser::ast::{
    AlterTableOperation, ColumnDef, ColumnOption, ColumnOptionDef, DataType, Ident, ObjectName, Statement,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};

use super::{Result, SqlError, Value};

/// The advisory lock every immediate transaction takes first (`cambium\0` in ASCII), so that they run one at a
/// time across every process on the metadata database.
pub(crate) const WRITER_LOCK_KEY: i64 = 0x6361_6d62_6975_6d00;

/// How long connecting may take.
const CONNECT_TIMEOUT_MS: u64 = 10_000;

/// How long data sent to the server may stay unacknowledged before the connection is closed (`TCP_USER_TIMEOUT`):
/// a silent partition fails a call in bounded time instead of after the kernel's retransmissions (~15 min).
const TCP_USER_TIMEOUT_MS: u64 = 10_000;

/// Keepalive probes on an idle connection, or one waiting for a reply: the first after this much silence…
const KEEPALIVE_IDLE_MS: u64 = 5_000;
/// …then one every this long, and the connection closed after [`KEEPALIVE_RETRIES`] unanswered: a server gone
/// silent while a statement runs is found in ~11 s (a statement that merely runs long keeps the server's kernel
/// answering the probes, so `statement_timeout` still bounds it).
const KEEPALIVE_INTERVAL_MS: u64 = 2_000;
/// See [`KEEPALIVE_INTERVAL_MS`].
const KEEPALIVE_RETRIES: u32 = 3;

/// How long a statement waits for a lock (the writer lock, a row) before it fails, as SQLite's busy timeout.
const LOCK_TIMEOUT_MS: u64 = 5_000;

/// How long one statement may run.
const STATEMENT_TIMEOUT_MS: u64 = 30_000;

/// Prepared statements kept per connection; the store's texts are a fixed set well under this, and the cache
/// starts over if it ever fills.
const STATEMENTS_CACHED_MAX: usize = 1_024;

/// A connection to PostgreSQL for blocking callers.
pub(crate) struct Client {
    client: tokio_postgres::Client,
    statements: RefCell<HashMap<String, tokio_postgres::Statement>>,
}

impl Client {
    /// Connects to `url` (a `postgresql://` URL or `key=value` pairs) without TLS, and sets the session's
    /// timeouts and the socket's (so no call waits on a silent server for longer than about
    /// [`TCP_USER_TIMEOUT_MS`] plus the keepalive probes, whatever the network does).
    pub(crate) fn connect(url: &str) -> Result<Client> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| SqlError::Connection(format!("the metadata URL is not a PostgreSQL one: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS));
        }
        config
            .tcp_user_timeout(Duration::from_millis(TCP_USER_TIMEOUT_MS))
            .keepalives(true)
            .keepalives_idle(Duration::from_millis(KEEPALIVE_IDLE_MS))
            .keepalives_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
            .keepalives_retries(KEEPALIVE_RETRIES);
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("metadata-postgres".to_owned())
            .spawn(move || drive(&config, &sender))
            .map_err(|e| SqlError::Connection(format!("starting the connection's thread: {e}")))?;
        let client = receiver
            .recv_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS * 2))
            .map_err(|_| SqlError::Connection("no connection in time".to_owned()))??;
        let client = Client {
            client,
            statements: RefCell::new(HashMap::new()),
        };
        client.batch_execute(&format!(
            "SET lock_timeout = {LOCK_TIMEOUT_MS}; SET statement_timeout = {STATEMENT_TIMEOUT_MS}; \
             SET TIME ZONE 'UTC'"
        ))?;
        Ok(client)
    }

    /// Whether the connection to the server is gone (its task ended: the server closed it, or it failed).
    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Runs `sql`, statements without parameters.
    pub(crate) fn batch_execute(&self, sql: &str) -> Result<()> {
        Ok(futures::executor::block_on(self.client.batch_execute(sql))?)
    }

    /// Begins a transaction that holds the writer lock ([`WRITER_LOCK_KEY`]) until it ends.
    pub(crate) fn begin_writer(&self) -> Result<()> {
        self.batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock({WRITER_LOCK_KEY})"))
    }

    /// Runs one statement with `?N` placeholders; returns how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, values: &[Value]) -> Result<usize> {
        let statement = self.statement(sql)?;
        let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let changed = futures::executor::block_on(self.client.execute(&statement, &params))?;
        usize::try_from(changed).map_err(|_| SqlError::Parameter(format!("{changed} rows changed")))
    }

    /// The rows of one statement with `?N` placeholders (the first `rows_max`, if given).
    pub(crate) fn query(&self, sql: &str, values: &[Value], rows_max: Option<usize>) -> Result<Vec<Vec<Value>>> {
        let statement = self.statement(sql)?;
        let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let rows = futures::executor::block_on(self.client.query(&statement, &params))?;
        let count = rows_max.unwrap_or(rows.len()).min(rows.len());
        rows[..count]
            .iter()
            .map(|row| {
                (0..row.len())
                    .map(|index| Ok(row.try_get::<_, Value>(index)?))
                    .collect()
            })
            .collect()
    }

    /// `sql` prepared on this connection, from the cache if it was before.
    fn statement(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let text = dollar_placeholders(sql)?;
        let statement = futures::executor::block_on(self.client.prepare(&text))?;
        let mut statements = self.statements.borrow_mut();
        if statements.len() >= STATEMENTS_CACHED_MAX {
            statements.clear();
        }
        statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

/// The connection's thread: connects, hands the client over, then does the connection's I/O until the client is
/// dropped or the connection fails.
fn drive(config: &tokio_postgres::Config, sender: &std::sync::mpsc::SyncSender<Result<tokio_postgres::Client>>) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            // The receiver may be gone (timed out); then nobody waits for this answer.
            let _ = sender.send(Err(SqlError::Connection(format!("a runtime for the connection: {e}"))));
            return;
        }
    };
    runtime.block_on(async {
        match config.connect(tokio_postgres::NoTls).await {
            Ok((client, connection)) => {
                if sender.send(Ok(client)).is_err() {
                    return;
                }
                if let Err(error) = connection.await {
                    tracing::error!(%error, "the metadata's PostgreSQL connection failed");
                }
            }
            Err(error) => {
                // As above: a receiver that gave up no longer needs the error.
                let _ = sender.send(Err(SqlError::Postgres(error)));
            }
        }
    });
}

/// `sql` with every `?N` placeholder written `$N`; the rest is the same tokens (`!=` is written `<>`).
pub(crate) fn dollar_placeholders(sql: &str) -> Result<String> {
    let tokens = Tokenizer::new(&SQLiteDialect {}, sql)
        .with_unescape(false)
        .tokenize()
        .map_err(|e| SqlError::Translate(format!("{e}: {sql}")))?;
    let mut out = String::with_capacity(sql.len());
    for token in tokens {
        match token {
            Token::Placeholder(name) => match name.strip_prefix('?') {
                Some(number) if !number.is_empty() => {
                    out.push('$');
                    out.push_str(number);
                }
                _ => return Err(SqlError::Translate(format!("placeholder {name:?} is not ?N: {sql}"))),
            },
            token => out.push_str(&token.to_string()),
        }
    }
    Ok(out)
}

/// SQLite DDL as PostgreSQL DDL: column types mapped, `TEXT` columns with the `"C"` collation, and a `rowid` on
/// each new table (see the module's boundary).
pub(crate) fn translate_ddl(sql: &str) -> Result<String> {
    let statements =
        Parser::parse_sql(&SQLiteDialect {}, sql).map_err(|e| SqlError::Translate(format!("{e}: {sql}")))?;
    let mut out = Vec::with_capacity(statements.len());
    for mut statement in statements {
        match &mut statement {
            Statement::CreateTable(create) => {
                create.columns.iter_mut().for_each(translate_column);
                create.columns.insert(
                    0,
                    ColumnDef {
                        name: Ident::new("rowid"),
                        data_type: DataType::Custom(ObjectName::from(vec![Ident::new("bigserial")]), Vec::new()),
                        options: Vec::new(),
                    },
                );
            }
            Statement::AlterTable(alter) => {
                for operation in &mut alter.operations {
                    if let AlterTableOperation::AddColumn { column_def, .. } = operation {
                        translate_column(column_def);
                    }
                }
            }
            _ => {}
        }
        out.push(statement.to_string());
    }
    Ok(out.join(";\n"))
}

fn translate_column(column: &mut ColumnDef) {
    match column.data_type {
        DataType::Integer(_) | DataType::Int(_) => column.data_type = DataType::BigInt(None),
        DataType::Blob(_) => column.data_type = DataType::Bytea,
        DataType::Text => column.options.push(ColumnOptionDef {
            name: None,
            option: ColumnOption::Collation(ObjectName::from(vec![Ident::with_quote('"', "C")])),
        }),
        _ => {}
    }
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> std::result::Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(n) => match *ty {
                Type::INT8 => n.to_sql(ty, out),
                Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*n)?.to_sql(ty, out),
                Type::BOOL => (*n != 0).to_sql(ty, out),
                _ => Err(format!("an integer for a parameter of type {ty}").into()),
            },
            Value::Text(text) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => text.as_str().to_sql(ty, out),
                _ => Err(format!("text for a parameter of type {ty}").into()),
            },
            Value::Blob(bytes) => match *ty {
                Type::BYTEA => bytes.as_slice().to_sql(ty, out),
                _ => Err(format!("bytes for a parameter of type {ty}").into()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<Value, BoxError> {
        Ok(match *ty {
            Type::INT8 => Value::Integer(i64::from_sql(ty, raw)?),
            Type::INT4 => Value::Integer(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT2 => Value::Integer(i64::from(i16::from_sql(ty, raw)?)),
            Type::BOOL => Value::Integer(i64::from(bool::from_sql(ty, raw)?)),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                Value::Text(String::from_sql(ty, raw)?)
            }
            Type::BYTEA => Value::Blob(Vec::<u8>::from_sql(ty, raw)?),
            _ => return Err(format!("a column of type {ty}, which the metadata never holds").into()),
        })
    }

    fn from_sql_null(_: &Type) -> std::result::Result<Value, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_renamed_and_nothing_else_changes() {
        assert_eq!(
            dollar_placeholders("SELECT a FROM t WHERE b = ?2 AND c != '?1' AND d < '~' LIMIT ?10").unwrap(),
            "SELECT a FROM t WHERE b = $2 AND c <> '?1' AND d < '~' LIMIT $10"
        );
        assert_eq!(
            dollar_placeholders("SELECT 'it''s', \"x\"\n FROM t").unwrap(),
            "SELECT 'it''s', \"x\"\n FROM t"
        );
        assert!(matches!(dollar_placeholders("SELECT ?"), Err(SqlError::Translate(_))));
    }

    #[test]
    fn ddl_gets_postgresql_types_a_rowid_and_bytewise_text() {
        let ddl = translate_ddl(
            "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0, b BLOB);
             CREATE INDEX t_n ON t(n) WHERE n = 1;
             ALTER TABLE t ADD COLUMN m INTEGER;
             ALTER TABLE t DROP COLUMN b",
        )
        .unwrap();
        assert_eq!(
            ddl,
            "CREATE TABLE t (rowid bigserial, id TEXT PRIMARY KEY COLLATE \"C\", n BIGINT NOT NULL DEFAULT 0, \
             b BYTEA);\nCREATE INDEX t_n ON t(n) WHERE n = 1;\nALTER TABLE t ADD COLUMN m BIGINT;\n\
             ALTER TABLE t DROP COLUMN b"
        );
    }
}
