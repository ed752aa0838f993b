//! Running one prepared SQLite statement under PostgreSQL's transaction rules, and turning its rows into
//! wire rows of their PostgreSQL types. Everything here blocks; `session` calls it.

use std::borrow::Cow;
use std::sync::Arc;

use pgcompat::catalog::ColumnOrigin;
use pgcompat::value::OutputStyle;
use pgcompat::PgType;
use pgwire::api::portal::Format;
use pgwire::api::results::FieldFormat;
use rusqlite::types::Value;
use rusqlite::{Connection, Statement};

use super::error::{
    SqlError, IN_FAILED_SQL_TRANSACTION, NO_ACTIVE_SQL_TRANSACTION, PROGRAM_LIMIT_EXCEEDED, PROTOCOL_VIOLATION,
};
use super::session::Outcome;
use super::types;

/// Most rows one statement may return: results are built in memory before they are sent.
pub(crate) const RESULT_ROWS_MAX: usize = 1_000_000;
/// Most bytes of values one statement may return, for the same reason.
pub(crate) const RESULT_BYTES_MAX: usize = 256 << 20;

/// Where the session is with respect to a transaction block, as PostgreSQL sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxState {
    Idle,
    InBlock,
    /// An error happened inside the block: everything but ROLLBACK/COMMIT is refused with 25P02.
    Failed,
}

/// What a statement is, which picks its command tag and its transaction effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Begin,
    Commit,
    Rollback,
    RollbackTo,
    Insert,
    Update,
    Delete,
    Other(String),
}

impl From<&pgcompat::Kind> for Kind {
    fn from(kind: &pgcompat::Kind) -> Kind {
        match kind {
            pgcompat::Kind::Select => Kind::Other("SELECT".to_owned()),
            pgcompat::Kind::Insert => Kind::Insert,
            pgcompat::Kind::Update => Kind::Update,
            pgcompat::Kind::Delete => Kind::Delete,
            pgcompat::Kind::Lock { .. } => Kind::Other("LOCK TABLE".to_owned()),
            pgcompat::Kind::Vacuum => Kind::Other("VACUUM".to_owned()),
            pgcompat::Kind::Begin { .. } => Kind::Begin,
            pgcompat::Kind::Commit => Kind::Commit,
            pgcompat::Kind::Rollback => Kind::Rollback,
            pgcompat::Kind::RollbackTo => Kind::RollbackTo,
            pgcompat::Kind::Prepare { .. } => Kind::Other("PREPARE".to_owned()),
            pgcompat::Kind::Execute { .. } => Kind::Other("EXECUTE".to_owned()),
            pgcompat::Kind::Deallocate(_) => Kind::Other("DEALLOCATE".to_owned()),
            pgcompat::Kind::DiscardAll => Kind::Other("DISCARD ALL".to_owned()),
            pgcompat::Kind::Declare { .. } => Kind::Other("DECLARE CURSOR".to_owned()),
            pgcompat::Kind::Fetch { move_only: false, .. } => Kind::Other("FETCH".to_owned()),
            pgcompat::Kind::Fetch { move_only: true, .. } => Kind::Other("MOVE".to_owned()),
            pgcompat::Kind::Close(_) => Kind::Other("CLOSE CURSOR".to_owned()),
            pgcompat::Kind::CopyFrom { .. } | pgcompat::Kind::CopyTo { .. } => Kind::Other("COPY".to_owned()),
            pgcompat::Kind::Listen(_) => Kind::Other("LISTEN".to_owned()),
            pgcompat::Kind::Unlisten(_) => Kind::Other("UNLISTEN".to_owned()),
            pgcompat::Kind::Notify { .. } => Kind::Other("NOTIFY".to_owned()),
            pgcompat::Kind::ExplainAnalyze { .. } => Kind::Other("EXPLAIN".to_owned()),
            pgcompat::Kind::Other(tag) => Kind::Other(tag.clone()),
        }
    }
}

/// How the result columns of a statement are typed: what the dialect layer knows per column, what an
/// earlier Describe told the client, and the session's zone for printing.
pub(crate) struct Typing<'a> {
    /// Per column, the layer's type (`None`: unknown).
    pub(crate) known: Vec<Option<PgType>>,
    /// The types a Describe gave the client, so execution agrees.
    pub(crate) hints: Option<&'a [PgType]>,
    /// Per column, the table column it is (`Dialect::column_origins`); empty: none known.
    pub(crate) origins: Vec<Option<ColumnOrigin>>,
    /// The session's zone and display parameters, for printing.
    pub(crate) style: &'a OutputStyle,
}

/// PostgreSQL spellings SQLite does not know, rewritten at the start of a query the dialect layer passes
/// through as written: `START TRANSACTION [modes]` and `BEGIN [TRANSACTION] ISOLATION LEVEL …` become
/// `BEGIN`. SQLite transactions are serializable, so dropping the modes only ever strengthens them.
pub(crate) fn passthrough_text(sql: &str) -> Cow<'_, str> {
    let words = leading_words(sql, 3);
    let is_start = words.first().is_some_and(|w| w == "START") && words.get(1).is_some_and(|w| w == "TRANSACTION");
    let is_begin_with_modes = words.first().is_some_and(|w| w == "BEGIN")
        && words
            .get(1)
            .is_some_and(|w| matches!(w.as_str(), "ISOLATION" | "READ" | "TRANSACTION" | "WORK"))
        && !(words.get(1).is_some_and(|w| w == "TRANSACTION") && words.len() == 2);
    if !(is_start || is_begin_with_modes) {
        return Cow::Borrowed(sql);
    }
    let rest = sql.split_once(';').map_or("", |(_, rest)| rest);
    Cow::Owned(format!("BEGIN;{rest}"))
}

/// 25P02.
pub(crate) fn aborted() -> SqlError {
    SqlError::new(
        IN_FAILED_SQL_TRANSACTION,
        "current transaction is aborted, commands ignored until end of transaction block",
    )
}

/// After an error, a transaction block (ours, or one SQLite still has open) is failed.
pub(crate) fn tx_after_error(conn: &Connection, tx: TxState) -> TxState {
    if tx != TxState::Idle || !conn.is_autocommit() {
        TxState::Failed
    } else {
        TxState::Idle
    }
}

/// Runs one prepared statement under the transaction rules, updating the transaction state.
pub(crate) fn run(
    conn: &Connection,
    tx: &mut TxState,
    stmt: &mut Statement<'_>,
    params: &[Value],
    format: &Format,
    kind: &Kind,
    typing: &Typing<'_>,
) -> Result<Outcome, SqlError> {
    if *tx == TxState::Failed {
        return match kind {
            Kind::Commit | Kind::Rollback => {
                if !conn.is_autocommit() {
                    conn.execute_batch("ROLLBACK")?;
                }
                *tx = TxState::Idle;
                Ok(Outcome::TxEnd("ROLLBACK".to_owned()))
            }
            Kind::RollbackTo => {
                // Still failed if this fails: the state is left as it is.
                bind(stmt, params)?;
                stmt.raw_execute()?;
                *tx = TxState::InBlock;
                Ok(Outcome::Command("ROLLBACK".to_owned()))
            }
            _ => Err(aborted()),
        };
    }
    if *kind == Kind::Begin && !conn.is_autocommit() {
        // PostgreSQL answers BEGIN inside a transaction block with a warning and success.
        return Ok(Outcome::TxStart("BEGIN".to_owned()));
    }
    if conn.is_autocommit() && needs_block(kind) {
        return Err(SqlError::new(
            NO_ACTIVE_SQL_TRANSACTION,
            format!("{} can only be used in transaction blocks", block_only_name(kind)),
        ));
    }
    if matches!(kind, Kind::Commit | Kind::Rollback) && conn.is_autocommit() {
        // PostgreSQL answers COMMIT or ROLLBACK outside a transaction with a warning and success.
        *tx = TxState::Idle;
        let tag = if *kind == Kind::Commit { "COMMIT" } else { "ROLLBACK" };
        return Ok(Outcome::TxEnd(tag.to_owned()));
    }
    match execute(stmt, params, format, kind, typing) {
        Ok(outcome) => {
            *tx = if conn.is_autocommit() {
                TxState::Idle
            } else {
                TxState::InBlock
            };
            Ok(outcome)
        }
        Err(error) => {
            // A COMMIT that failed and after which SQLite holds no transaction (it rolled back: a commit refused
            // by the store, 54000 over the transaction limit) ended the transaction, as a failed COMMIT does in
            // PostgreSQL: the session is idle, not in a failed block.
            *tx = if *kind == Kind::Commit && conn.is_autocommit() {
                TxState::Idle
            } else {
                tx_after_error(conn, *tx)
            };
            Err(error)
        }
    }
}

/// `SAVEPOINT`, `RELEASE` and `ROLLBACK TO` act on a transaction block; outside one PostgreSQL refuses them
/// (25P01) where SQLite would open a transaction.
fn needs_block(kind: &Kind) -> bool {
    match kind {
        Kind::RollbackTo => true,
        Kind::Other(tag) => tag == "SAVEPOINT" || tag == "RELEASE",
        _ => false,
    }
}

/// The statement's name in PostgreSQL's 25P01 message.
fn block_only_name(kind: &Kind) -> &str {
    match kind {
        Kind::RollbackTo => "ROLLBACK TO SAVEPOINT",
        Kind::Other(tag) if tag == "RELEASE" => "RELEASE SAVEPOINT",
        Kind::Other(tag) => tag,
        _ => "",
    }
}

/// Runs one statement (bound to `params`) and gives its outcome: rows, or its command tag.
pub(crate) fn execute(
    stmt: &mut Statement<'_>,
    params: &[Value],
    format: &Format,
    kind: &Kind,
    typing: &Typing<'_>,
) -> Result<Outcome, SqlError> {
    bind(stmt, params)?;
    if stmt.column_count() == 0 {
        let changed = stmt.raw_execute()?;
        return Ok(match kind {
            Kind::Begin => Outcome::TxStart("BEGIN".to_owned()),
            Kind::Commit => Outcome::TxEnd("COMMIT".to_owned()),
            Kind::Rollback => Outcome::TxEnd("ROLLBACK".to_owned()),
            Kind::RollbackTo => Outcome::Command("ROLLBACK".to_owned()),
            Kind::Insert => Outcome::Command(format!("INSERT 0 {changed}")),
            Kind::Update => Outcome::Command(format!("UPDATE {changed}")),
            Kind::Delete => Outcome::Command(format!("DELETE {changed}")),
            Kind::Other(tag) => Outcome::Command(tag.clone()),
        });
    }
    let (columns, values) = query_values(stmt, typing)?;
    rows_outcome(columns, &values, format, kind, typing.style)
}

/// One result column as a RowDescription describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Column {
    /// Its name.
    pub(crate) name: String,
    /// Its PostgreSQL type.
    pub(crate) ty: PgType,
    /// The table column it is (table OID, column number), `None` where PostgreSQL sends zeros.
    pub(crate) origin: Option<ColumnOrigin>,
}

impl Column {
    /// A column that is no table's (an expression, a command's own output).
    pub(crate) fn computed(name: impl Into<String>, ty: PgType) -> Column {
        Column {
            name: name.into(),
            ty,
            origin: None,
        }
    }
}

/// Result columns, in order.
pub(crate) type Columns = Vec<Column>;

/// Runs a bound statement that returns rows: its columns, typed as `typing` says (else by the declared
/// type, else by the values), and every row (bounded by [`RESULT_ROWS_MAX`] and [`RESULT_BYTES_MAX`]).
pub(crate) fn query_values(
    stmt: &mut Statement<'_>,
    typing: &Typing<'_>,
) -> Result<(Columns, Vec<Vec<Value>>), SqlError> {
    let names = names(stmt);
    let declared = declared_types(stmt);
    let values = collect_rows(stmt, names.len())?;
    let columns: Columns = names
        .into_iter()
        .zip(declared)
        .enumerate()
        .map(|(i, (name, declared))| {
            let ty = typing
                .known
                .get(i)
                .copied()
                .flatten()
                .or_else(|| typing.hints.and_then(|h| h.get(i).copied()))
                .or(declared)
                .unwrap_or_else(|| types::type_of_values(values.iter().map(|row| &row[i])));
            Column {
                name,
                ty,
                origin: typing.origins.get(i).copied().flatten(),
            }
        })
        .collect();
    Ok((columns, values))
}

/// Rows of the given columns as an outcome with its tag.
pub(crate) fn rows_outcome(
    columns: Columns,
    values: &[Vec<Value>],
    format: &Format,
    kind: &Kind,
    style: &OutputStyle,
) -> Result<Outcome, SqlError> {
    let fields = Arc::new(types::fields(&columns, format));
    let column_types: Vec<PgType> = columns.iter().map(|column| column.ty).collect();
    let formats: Vec<FieldFormat> = (0..columns.len()).map(|i| format.format_for(i)).collect();
    let rows = values
        .iter()
        .map(|row| types::encode_row(&column_types, &formats, row, style))
        .collect::<Result<Vec<_>, _>>()?;
    let tag = match kind {
        Kind::Insert => "INSERT 0",
        Kind::Update => "UPDATE",
        Kind::Delete => "DELETE",
        _ => "SELECT",
    };
    Ok(Outcome::Rows {
        fields,
        rows,
        tag: tag.to_owned(),
    })
}

fn collect_rows(stmt: &mut Statement<'_>, width: usize) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = rows.next()? {
        let values = (0..width)
            .map(|i| row.get::<_, Value>(i))
            .collect::<Result<Vec<_>, _>>()?;
        bytes += values
            .iter()
            .map(|v| match v {
                Value::Text(t) => t.len(),
                Value::Blob(b) => b.len(),
                _ => 8,
            })
            .sum::<usize>();
        out.push(values);
        if out.len() > RESULT_ROWS_MAX || bytes > RESULT_BYTES_MAX {
            return Err(SqlError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("result exceeds {RESULT_ROWS_MAX} rows or {RESULT_BYTES_MAX} bytes; add a LIMIT"),
            ));
        }
    }
    Ok(out)
}

/// The result column names of a statement.
pub(crate) fn names(stmt: &Statement<'_>) -> Vec<String> {
    stmt.column_names().into_iter().map(str::to_owned).collect()
}

/// The types SQLite's declared column types give by affinity.
pub(crate) fn declared_types(stmt: &Statement<'_>) -> Vec<Option<PgType>> {
    stmt.columns()
        .iter()
        .map(|c| c.decl_type().and_then(types::type_of_declared))
        .collect()
}

/// The PostgreSQL number (1-based) of each SQLite parameter, in SQLite's order: `$N` and `?N` name
/// theirs, a bare `?` is its position.
pub(crate) fn parameter_numbers(stmt: &Statement<'_>) -> Result<Vec<usize>, SqlError> {
    (1..=stmt.parameter_count())
        .map(|index| match stmt.parameter_name(index) {
            None => Ok(index),
            Some(name) => name
                .strip_prefix('$')
                .or_else(|| name.strip_prefix('?'))
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| SqlError::new(PROTOCOL_VIOLATION, format!("parameter {name} is not of the form $N"))),
        })
        .collect()
}

pub(crate) fn bind(stmt: &mut Statement<'_>, params: &[Value]) -> Result<(), SqlError> {
    let numbers = parameter_numbers(stmt)?;
    for (index, number) in numbers.into_iter().enumerate() {
        let value = params.get(number - 1).ok_or_else(|| {
            SqlError::new(
                PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but the statement uses ${number}",
                    params.len()
                ),
            )
        })?;
        stmt.raw_bind_parameter(index + 1, value)?;
    }
    Ok(())
}

/// The statement's kind from its first keywords, past whitespace and comments (for SQL the dialect layer
/// passes through).
pub(crate) fn kind_of(sql: &str) -> Kind {
    let words = leading_words(sql, 4);
    let word = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    match word(0) {
        "BEGIN" => Kind::Begin,
        "COMMIT" | "END" => Kind::Commit,
        "ROLLBACK" if word(1) == "TO" || (word(1) == "TRANSACTION" && word(2) == "TO") => Kind::RollbackTo,
        "ROLLBACK" => Kind::Rollback,
        "INSERT" | "REPLACE" => Kind::Insert,
        "UPDATE" => Kind::Update,
        "DELETE" => Kind::Delete,
        "CREATE" | "DROP" | "ALTER" => {
            let object = words[1..]
                .iter()
                .find(|w| !matches!(w.as_str(), "UNIQUE" | "TEMP" | "TEMPORARY" | "VIRTUAL"))
                .map(String::as_str)
                .unwrap_or("");
            Kind::Other(format!("{} {object}", word(0)).trim_end().to_owned())
        }
        other => Kind::Other(other.to_owned()),
    }
}

/// The first `count` keywords of a statement, upper case, past comments.
pub(crate) fn leading_words(sql: &str, count: usize) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = sql;
    while words.len() < count {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
            continue;
        }
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        words.push(rest[..end].to_ascii_uppercase());
        rest = &rest[end..];
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_begin_spellings_become_begin() {
        assert_eq!(passthrough_text("START TRANSACTION"), "BEGIN;");
        assert_eq!(
            passthrough_text("begin isolation level serializable; select 1"),
            "BEGIN; select 1"
        );
        assert_eq!(passthrough_text("BEGIN TRANSACTION"), "BEGIN TRANSACTION");
        assert_eq!(passthrough_text("SELECT 1"), "SELECT 1");
    }

    #[test]
    fn kinds_come_from_leading_keywords() {
        assert_eq!(kind_of("  -- hi\n begin"), Kind::Begin);
        assert_eq!(kind_of("/* x */ insert into t values (1)"), Kind::Insert);
        assert_eq!(kind_of("rollback to sp"), Kind::RollbackTo);
        assert_eq!(
            kind_of("create unique index i on t(x)"),
            Kind::Other("CREATE INDEX".to_owned())
        );
        assert_eq!(kind_of("select 1"), Kind::Other("SELECT".to_owned()));
        assert_eq!(kind_of(""), Kind::Other(String::new()));
    }
}
