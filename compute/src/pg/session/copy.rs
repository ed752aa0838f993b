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
//!
//! In the binary format (`FORMAT BINARY`) each field is its column type's binary form, read with
//! `pgcompat::value::decode_binary` and written with `encode_binary`, as binary parameters and results are.

use bytes::Bytes;
use pgcompat::copy::binary::BinaryReader;
use pgcompat::copy::{self, Format, Options, RecordReader};
use pgcompat::{PgType, Translated};
use rusqlite::types::Value;

use super::{Outcome, Session};
use crate::pg::error::{SqlError, BAD_COPY_FILE_FORMAT, FEATURE_NOT_SUPPORTED, QUERY_CANCELED};
use crate::pg::exec::{self, aborted, tx_after_error, TxState, Typing};

/// The reader of a copy's format.
enum Reader {
    /// Text or CSV.
    Text(RecordReader),
    /// Binary.
    Binary(BinaryReader),
}

/// A `COPY FROM STDIN` under way.
pub(super) struct CopyIn {
    reader: Reader,
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
        let binary = options.format == Format::Binary;
        let reader = if binary {
            Reader::Binary(BinaryReader::new())
        } else {
            Reader::Text(RecordReader::new(options.clone()))
        };
        self.copy_in = Some(CopyIn {
            reader,
            insert,
            types,
            rows: 0,
            error: None,
            own_transaction,
        });
        Ok(Outcome::CopyIn { columns: width, binary })
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
            let pushed = match &mut copy.reader {
                Reader::Text(reader) => reader.push(data),
                Reader::Binary(reader) => reader.push(data),
            };
            if let Err(error) = pushed.map_err(SqlError::from) {
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
        while let Some(values) = next_values(&mut copy.reader, &copy.types, &tz, at_end)? {
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
                    origins: Vec::new(),
                };
                exec::query_values(&mut stmt, &typing)
            });
        let (columns, rows) = match read {
            Ok(read) => read,
            Err(error) => return self.fail(error),
        };
        if options.format == Format::Binary {
            let tz = self.dialect.state().time_zone();
            let data = match binary_rows(&columns, &rows, &tz) {
                Ok(data) => data,
                Err(error) => return self.fail(error),
            };
            return Ok(Outcome::CopyOut {
                columns: columns.len(),
                binary: true,
                data,
            });
        }
        let mut data: Vec<Bytes> = Vec::with_capacity(rows.len() + 1);
        let mut header = options.header.then(|| {
            let names: Vec<String> = columns.iter().map(|column| column.name.clone()).collect();
            copy::header_line(&names, options)
        });
        for row in &rows {
            let fields: Vec<Option<String>> = row
                .iter()
                .zip(&columns)
                .map(|(value, exec::Column { ty, .. })| match value {
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
            binary: false,
            data,
        })
    }
}

/// The next complete record's values, typed for the insert; `None` when the reader holds no whole record.
fn next_values(
    reader: &mut Reader,
    types: &[PgType],
    tz: &jiff::tz::TimeZone,
    at_end: bool,
) -> Result<Option<Vec<Value>>, SqlError> {
    match reader {
        Reader::Text(reader) => {
            let Some(record) = reader.next_record(at_end)? else {
                return Ok(None);
            };
            let line = reader.line() - 1;
            if record.len() != types.len() {
                let message = if record.len() < types.len() {
                    format!("missing data for a column (COPY line {line})")
                } else {
                    format!("extra data after last expected column (COPY line {line})")
                };
                return Err(SqlError::new(BAD_COPY_FILE_FORMAT, message));
            }
            let values = record
                .into_iter()
                .zip(types)
                .map(|(field, ty)| match field {
                    None => Ok(Value::Null),
                    Some(text) => pgcompat::value::input(*ty, &text, tz).map_err(SqlError::from),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(values))
        }
        Reader::Binary(reader) => {
            let number = reader.tuple_number();
            let Some(tuple) = reader.next_tuple(at_end)? else {
                return Ok(None);
            };
            if tuple.len() != types.len() {
                return Err(SqlError::new(
                    BAD_COPY_FILE_FORMAT,
                    format!(
                        "row field count is {}, expected {} (COPY tuple {number})",
                        tuple.len(),
                        types.len()
                    ),
                ));
            }
            let values = tuple
                .into_iter()
                .zip(types)
                .map(|(field, ty)| match field {
                    None => Ok(Value::Null),
                    Some(bytes) => pgcompat::value::decode_binary(*ty, &bytes, tz).map_err(SqlError::from),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(values))
        }
    }
}

/// A query's rows in the binary format: the header with the first row (or alone), one chunk per row; the
/// end marker is pgwire's (`CopyResponse` in binary appends it).
fn binary_rows(columns: &[exec::Column], rows: &[Vec<Value>], tz: &jiff::tz::TimeZone) -> Result<Vec<Bytes>, SqlError> {
    let mut data: Vec<Bytes> = Vec::with_capacity(rows.len() + 1);
    let mut header = Some(copy::binary::header());
    for row in rows {
        let fields = row
            .iter()
            .zip(columns)
            .map(|(value, exec::Column { ty, .. })| match value {
                Value::Null => Ok(None),
                value => pgcompat::value::encode_binary(*ty, value, tz).map(Some),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let tuple = copy::binary::write_tuple(&fields)?;
        let chunk = match header.take() {
            Some(mut header) => {
                header.extend_from_slice(&tuple);
                header
            }
            None => tuple,
        };
        data.push(Bytes::from(chunk));
    }
    if let Some(header) = header {
        data.push(Bytes::from(header));
    }
    Ok(data)
}
