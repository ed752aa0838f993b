//! `COPY … FROM STDIN` and `COPY … TO STDOUT` on a session (formats: `pgcompat::copy`).
//!
//! **FROM STDIN** is one statement spread over many protocol messages: the `COPY` opens a transaction of
//! its own (or a savepoint inside the client's block), each `CopyData` chunk is cut into records and every
//! complete record inserted at once through the dialect's own `INSERT … VALUES ($1, …)` (so every column's
//! type is checked as an `INSERT` checks it), and `CopyDone` commits (or releases) — all rows or none. The
//! first bad record's error is kept and later data ignored until the client ends the copy, when the error
//! is reported and everything rolled back, as PostgreSQL reports it then.
//!
//! **TO STDOUT** runs the query (within the result limits of any query) and formats each row.

use bytes::Bytes;
use pgcompat::copy::{self, Options, RecordReader};
use pgcompat::{PgType, Translated};
use rusqlite::types::Value;

use super::{Outcome, Session};
use crate::pg::error::{SqlError, BAD_COPY_FILE_FORMAT, FEATURE_NOT_SUPPORTED, QUERY_CANCELED};
use crate::pg::exec::{self, aborted, tx_after_error, TxState, Typing};

/// A `COPY FROM STDIN` under way.
pub(super) struct CopyIn {
    reader: RecordReader,
    /// The SQLite `INSERT` each record runs.
    insert: String,
    /// The PostgreSQL type of each field, in order.
    types: Vec<PgType>,
    /// Rows inserted so far.
    rows: u64,
    /// The first error; later data is ignored.
    error: Option<SqlError>,
    /// The copy began the transaction (outside a block): it commits or rolls it back itself; else it
    /// holds a savepoint in the client's block.
    own_transaction: bool,
}

const COPY_SAVEPOINT: &str = "pgcompat_copy";

impl Session {
    /// `COPY table [(columns)] FROM STDIN`: prepares the insert and opens the copy's transaction.
    pub(super) fn start_copy_in(
        &mut self,
        table: &str,
        columns: &[String],
        options: &Options,
    ) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        if self.read_only() {
            return self.fail(super::read_only_error("COPY"));
        }
        let width = if columns.is_empty() {
            self.table_width(table)?
        } else {
            columns.len()
        };
        let list = if columns.is_empty() {
            String::new()
        } else {
            format!(" ({})", columns.join(", "))
        };
        let placeholders: Vec<String> = (1..=width).map(|n| format!("${n}")).collect();
        // COPY FROM writes identity columns as given, GENERATED ALWAYS ones too (PostgreSQL's rule; pg_dump
        // relies on it).
        let insert_text = format!(
            "INSERT INTO {table}{list} OVERRIDING SYSTEM VALUE VALUES ({})",
            placeholders.join(", ")
        );
        let translated = self.translate(&insert_text)?;
        let (insert, types) = match &*translated {
            Translated::Statements(list) => match list.as_slice() {
                [t] if t.steps.len() == 1 => {
                    let types = (0..width)
                        .map(|i| t.params.get(i).copied().flatten().unwrap_or(PgType::TEXT))
                        .collect();
                    (t.steps[0].clone(), types)
                }
                _ => return self.fail(SqlError::new(FEATURE_NOT_SUPPORTED, format!("COPY into {table}"))),
            },
            Translated::Passthrough => {
                return self.fail(SqlError::new(FEATURE_NOT_SUPPORTED, format!("COPY into {table}")))
            }
        };
        let own_transaction = self.conn.is_autocommit();
        let open = if own_transaction {
            "BEGIN"
        } else {
            "SAVEPOINT pgcompat_copy"
        };
        if let Err(error) = self.conn.execute_batch(open) {
            return self.fail(SqlError::from(error));
        }
        if own_transaction {
            self.dialect.state().start_transaction();
        }
        self.copy_in = Some(CopyIn {
            reader: RecordReader::new(options.clone()),
            insert,
            types,
            rows: 0,
            error: None,
            own_transaction,
        });
        Ok(Outcome::CopyIn { columns: width })
    }

    /// How many columns `table` has (a `COPY` without a column list fills them all, in order).
    fn table_width(&mut self, table: &str) -> Result<usize, SqlError> {
        let translated = self.translate(&format!("SELECT * FROM {table} LIMIT 0"))?;
        let step = match &*translated {
            Translated::Statements(list) if list.len() == 1 && list[0].steps.len() == 1 => list[0].steps[0].clone(),
            _ => return self.fail(SqlError::new(FEATURE_NOT_SUPPORTED, format!("COPY into {table}"))),
        };
        let width = self.conn.prepare(&step).map(|stmt| stmt.column_count());
        match width {
            Ok(width) => Ok(width),
            Err(error) => self.fail(SqlError::from(error)),
        }
    }

    /// One `CopyData` chunk: its complete records inserted. Errors are kept for `CopyDone`.
    pub(crate) fn copy_data(&mut self, data: &[u8]) {
        let Some(mut copy) = self.copy_in.take() else {
            return;
        };
        if copy.error.is_none() {
            if let Err(error) = copy.reader.push(data).map_err(SqlError::from) {
                copy.error = Some(error);
            } else {
                copy.error = self.insert_records(&mut copy, false).err();
            }
        }
        self.copy_in = Some(copy);
    }

    /// `CopyDone`: the last record inserted, the copy committed; the number of rows, or the copy's error
    /// (everything rolled back).
    pub(crate) fn copy_done(&mut self) -> Result<u64, SqlError> {
        let Some(mut copy) = self.copy_in.take() else {
            return Err(SqlError::new(BAD_COPY_FILE_FORMAT, "no COPY in progress"));
        };
        if copy.error.is_none() {
            copy.error = self.insert_records(&mut copy, true).err();
        }
        let result = match copy.error.take() {
            Some(error) => Err(error),
            None => {
                let finish = if copy.own_transaction {
                    "COMMIT".to_owned()
                } else {
                    format!("RELEASE {COPY_SAVEPOINT}")
                };
                self.conn
                    .execute_batch(&finish)
                    .map(|()| copy.rows)
                    .map_err(SqlError::from)
            }
        };
        if result.is_err() {
            self.roll_back_copy(&copy);
        }
        self.after_copy(result.is_ok());
        result
    }

    /// `CopyFail`: the client gave up; everything rolled back.
    pub(crate) fn copy_fail(&mut self, message: &str) -> SqlError {
        if let Some(copy) = self.copy_in.take() {
            self.roll_back_copy(&copy);
            self.after_copy(false);
        }
        SqlError::new(QUERY_CANCELED, format!("COPY from stdin failed: {message}"))
    }

    /// Ends a copy the client abandoned by sending another statement (a protocol error on its side).
    pub(super) fn abandon_copy(&mut self) {
        if let Some(copy) = self.copy_in.take() {
            self.roll_back_copy(&copy);
            self.after_copy(false);
        }
    }

    fn roll_back_copy(&mut self, copy: &CopyIn) {
        let undo = if copy.own_transaction {
            "ROLLBACK".to_owned()
        } else {
            format!("ROLLBACK TO {COPY_SAVEPOINT}; RELEASE {COPY_SAVEPOINT}")
        };
        if !self.conn.is_autocommit() {
            if let Err(error) = self.conn.execute_batch(&undo) {
                tracing::warn!(%error, "rolling back a failed COPY failed");
            }
        }
    }

    /// The transaction state after a copy: outside a block the copy's own transaction is over; inside, a
    /// failed copy fails the block as any failed statement does.
    fn after_copy(&mut self, succeeded: bool) {
        self.tx = if succeeded {
            if self.conn.is_autocommit() {
                TxState::Idle
            } else {
                TxState::InBlock
            }
        } else {
            tx_after_error(&self.conn, self.tx)
        };
    }

    /// Inserts every complete record the reader holds (with `at_end`, also a last unterminated one).
    fn insert_records(&mut self, copy: &mut CopyIn, at_end: bool) -> Result<(), SqlError> {
        let tz = self.dialect.state().time_zone();
        let mut stmt = self.conn.prepare_cached(&copy.insert)?;
        while let Some(record) = copy.reader.next_record(at_end)? {
            let line = copy.reader.line() - 1;
            if record.len() != copy.types.len() {
                let message = if record.len() < copy.types.len() {
                    format!("missing data for a column (COPY line {line})")
                } else {
                    format!("extra data after last expected column (COPY line {line})")
                };
                return Err(SqlError::new(BAD_COPY_FILE_FORMAT, message));
            }
            let values = record
                .into_iter()
                .zip(&copy.types)
                .map(|(field, ty)| match field {
                    None => Ok(Value::Null),
                    Some(text) => pgcompat::value::input(*ty, &text, &tz).map_err(SqlError::from),
                })
                .collect::<Result<Vec<_>, _>>()?;
            exec::bind(&mut stmt, &values)?;
            stmt.raw_execute()?;
            copy.rows += 1;
        }
        Ok(())
    }

    /// `COPY table|(query) TO STDOUT`: the query's rows, formatted.
    pub(super) fn copy_out(&mut self, query: &str, options: &Options) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        let translated = self.translate(query)?;
        let translation = match &*translated {
            Translated::Statements(list) => match list.as_slice() {
                [t] if t.steps.len() == 1 && t.kind == pgcompat::Kind::Select => t.clone(),
                _ => return self.fail(SqlError::new(FEATURE_NOT_SUPPORTED, "COPY TO of this statement")),
            },
            Translated::Passthrough => return self.fail(SqlError::new(FEATURE_NOT_SUPPORTED, "COPY TO of this query")),
        };
        if self.conn.is_autocommit() {
            self.dialect.state().start_transaction();
        }
        let style = self.dialect.state().output_style();
        let read = self
            .conn
            .prepare(&translation.steps[0])
            .map_err(SqlError::from)
            .and_then(|mut stmt| {
                let typing = Typing {
                    known: self.dialect.column_types(&stmt, Some(&translation)),
                    hints: None,
                    style: &style,
                };
                exec::query_values(&mut stmt, &typing)
            });
        let (columns, rows) = match read {
            Ok(read) => read,
            Err(error) => return self.fail(error),
        };
        let mut data: Vec<Bytes> = Vec::with_capacity(rows.len() + 1);
        let mut header = options.header.then(|| {
            let names: Vec<String> = columns.iter().map(|(name, _)| name.clone()).collect();
            copy::header_line(&names, options)
        });
        for row in &rows {
            let fields: Vec<Option<String>> = row
                .iter()
                .zip(&columns)
                .map(|(value, (_, ty))| match value {
                    Value::Null => None,
                    value => Some(pgcompat::value::output_styled(*ty, value, &style).unwrap_or_default()),
                })
                .collect();
            let line = copy::write_record(&fields, options);
            // The header travels with the first row: the client counts rows by data messages.
            let chunk = match header.take() {
                Some(mut header) => {
                    header.push_str(&line);
                    header
                }
                None => line,
            };
            data.push(Bytes::from(chunk));
        }
        if let Some(header) = header {
            data.push(Bytes::from(header));
        }
        Ok(Outcome::CopyOut {
            columns: columns.len(),
            data,
        })
    }
}
