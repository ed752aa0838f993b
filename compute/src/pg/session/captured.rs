//! Statements the dialect made of steps some of whose rows are kept for the next ones (data-modifying
//! CTEs, `pgcompat::Capture`): every step in one savepoint, all or nothing, the primary step's rows or
//! count the statement's outcome.

use super::*;

/// Most rows one captured step may return (as many as one result may hold).
const CAPTURED_ROWS_MAX: usize = exec::RESULT_ROWS_MAX;

impl Session {
    /// Runs a translation with captures (see the module comment).
    pub(super) fn run_captured(
        &mut self,
        translation: &Translation,
        params: &[Value],
        format: &Format,
        hints: Option<&[PgType]>,
        kind: &Kind,
    ) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        if self.read_only() {
            self.tx = tx_after_error(&self.conn, self.tx);
            return Err(read_only_error(match kind {
                Kind::Insert => "INSERT",
                Kind::Update => "UPDATE",
                Kind::Delete => "DELETE",
                _ => "SELECT",
            }));
        }
        let outer = self.tx;
        let result = self
            .conn
            .execute_batch("SAVEPOINT pgcompat_statement")
            .map_err(SqlError::from)
            .and_then(|()| {
                let outcome = self.captured_steps(translation, params, format, hints, kind)?;
                self.conn.execute_batch("RELEASE pgcompat_statement")?;
                Ok(outcome)
            });
        match result {
            Ok(outcome) => {
                self.tx = if self.conn.is_autocommit() {
                    TxState::Idle
                } else {
                    TxState::InBlock
                };
                Ok(outcome)
            }
            Err(error) => {
                if !self.conn.is_autocommit() {
                    let undo = self
                        .conn
                        .execute_batch("ROLLBACK TO pgcompat_statement; RELEASE pgcompat_statement");
                    if let Err(undo) = undo {
                        tracing::warn!(%undo, "undoing a failed statement's savepoint failed");
                    }
                }
                self.tx = if outer == TxState::Idle && self.conn.is_autocommit() {
                    TxState::Idle
                } else {
                    TxState::Failed
                };
                Err(error)
            }
        }
    }

    fn captured_steps(
        &self,
        translation: &Translation,
        params: &[Value],
        format: &Format,
        hints: Option<&[PgType]>,
        kind: &Kind,
    ) -> Result<Outcome, SqlError> {
        let style = self.dialect.state().output_style();
        let mut outcome = None;
        for (index, step) in translation.steps.iter().enumerate() {
            if let Some(capture) = translation.captures.iter().find(|c| c.step == index) {
                capture_rows(&self.conn, step, &capture.table, params)?;
            } else if index == translation.primary {
                let mut stmt = self.conn.prepare(step)?;
                let typing = Typing {
                    known: self.dialect.column_types(&stmt, Some(translation)),
                    hints,
                    style: &style,
                    origins: self.dialect.column_origins(&stmt, Some(translation)),
                };
                outcome = Some(exec::execute(&mut stmt, params, format, kind, &typing)?);
            } else {
                let mut stmt = self.conn.prepare(step)?;
                exec::bind(&mut stmt, params)?;
                stmt.raw_execute()?;
            }
        }
        outcome.ok_or_else(|| SqlError::new(INTERNAL_ERROR, "a statement's primary step is missing"))
    }
}

/// Makes the TEMP table of each capture (for Describe, which prepares the primary step that reads them);
/// the highest parameter number the captured steps use.
pub(super) fn make_capture_tables(conn: &Connection, translation: &Translation) -> Result<usize, SqlError> {
    let mut count = 0;
    for capture in &translation.captures {
        let step = translation
            .steps
            .get(capture.step)
            .ok_or_else(|| SqlError::new(INTERNAL_ERROR, "a captured step is missing"))?;
        make_capture_table(conn, step, &capture.table)?;
        let stmt = conn.prepare(step)?;
        count = count.max(exec::parameter_numbers(&stmt)?.into_iter().max().unwrap_or(0));
    }
    Ok(count)
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Makes (again) `table` with one untyped column per result column of `step`; the number of columns.
fn make_capture_table(conn: &Connection, step: &str, table: &str) -> Result<usize, SqlError> {
    let stmt = conn.prepare(step)?;
    let columns: Vec<String> = stmt.column_names().into_iter().map(quoted).collect();
    drop(stmt);
    if columns.is_empty() {
        return Err(SqlError::new(
            FEATURE_NOT_SUPPORTED,
            "a data-modifying WITH query without RETURNING columns",
        ));
    }
    let table = quoted(table);
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS temp.{table}; CREATE TEMP TABLE {table} ({})",
        columns.join(", ")
    ))?;
    Ok(columns.len())
}

/// Runs `step` and keeps its rows in `table` (made afresh).
fn capture_rows(conn: &Connection, step: &str, table: &str, params: &[Value]) -> Result<(), SqlError> {
    let width = make_capture_table(conn, step, table)?;
    let mut stmt = conn.prepare(step)?;
    exec::bind(&mut stmt, params)?;
    let placeholders: Vec<String> = (1..=width).map(|i| format!("?{i}")).collect();
    let mut insert = conn.prepare(&format!(
        "INSERT INTO temp.{} VALUES ({})",
        quoted(table),
        placeholders.join(", ")
    ))?;
    let mut rows = stmt.raw_query();
    let mut count = 0usize;
    while let Some(row) = rows.next()? {
        count += 1;
        if count > CAPTURED_ROWS_MAX {
            return Err(SqlError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("a data-modifying WITH query returned more than {CAPTURED_ROWS_MAX} rows"),
            ));
        }
        for i in 0..width {
            insert.raw_bind_parameter(i + 1, row.get::<_, Value>(i)?)?;
        }
        insert.raw_execute()?;
    }
    Ok(())
}
