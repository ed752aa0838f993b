//! `DECLARE`, `FETCH` and `MOVE` on a session (the cursors themselves: `pg::cursor`).

use super::*;

impl Session {
    /// The columns of the SQL cursor `name` (34000 if there is none): what a protocol-level Describe of the
    /// portal of that name answers (PostgreSQL's cursors are portals; psycopg's server-side cursors ask).
    pub(crate) fn cursor_columns(&mut self, name: &str) -> Result<exec::Columns, SqlError> {
        Ok(self.cursors.get(name)?.columns.clone())
    }

    /// Whether the session has an open SQL cursor `name`.
    pub(crate) fn has_cursor(&mut self, name: &str) -> bool {
        self.cursors.get(name).is_ok()
    }

    /// `DECLARE name CURSOR FOR query`: the query runs now, in the transaction's snapshot, and the cursor
    /// keeps its rows (see `cursor`).
    pub(super) fn declare_cursor(
        &mut self,
        name: &str,
        query: &str,
        scroll: Option<bool>,
        hold: bool,
    ) -> Result<Outcome, SqlError> {
        if !hold && self.tx == TxState::Idle && self.conn.is_autocommit() {
            return self.fail(SqlError::new(
                NO_ACTIVE_SQL_TRANSACTION,
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        let translated = self.translate(query)?;
        let translation = match &*translated {
            Translated::Statements(list) => match list.as_slice() {
                [t] if t.steps.len() == 1 && t.kind == pgcompat::Kind::Select => t.clone(),
                _ => {
                    return self.fail(SqlError::new(
                        FEATURE_NOT_SUPPORTED,
                        "a cursor's query must be one SELECT",
                    ))
                }
            },
            Translated::Passthrough => {
                return self.fail(SqlError::new(SYNTAX_ERROR, "a cursor's query must be one SELECT"));
            }
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
                    origins: self.dialect.column_origins(&stmt, Some(&translation)),
                };
                exec::query_values(&mut stmt, &typing)
            });
        let declared = read.and_then(|(columns, rows)| {
            let cursor = Cursor::new(columns, rows, scroll, hold).declared_by(declare_text(name, query, scroll, hold));
            self.cursors.declare(name, cursor)
        });
        match declared {
            Ok(()) => Ok(Outcome::Command("DECLARE CURSOR".to_owned())),
            Err(error) => self.fail(error),
        }
    }

    /// `FETCH` or `MOVE` on an open cursor.
    pub(super) fn fetch_cursor(
        &mut self,
        name: &str,
        direction: pgcompat::translate::cursor::CursorMove,
        move_only: bool,
        format: &Format,
    ) -> Result<Outcome, SqlError> {
        let style = self.dialect.state().output_style();
        let fetched = self.cursors.get(name).and_then(|cursor| {
            let rows = cursor.step(name, direction)?;
            Ok((cursor.columns.clone(), rows))
        });
        let (columns, rows) = match fetched {
            Ok(fetched) => fetched,
            Err(error) => return self.fail(error),
        };
        if move_only {
            return Ok(Outcome::Command(format!("MOVE {}", rows.len())));
        }
        match exec::rows_outcome(columns, &rows, format, &Kind::Other("FETCH".to_owned()), &style) {
            Ok(Outcome::Rows { fields, rows, .. }) => Ok(Outcome::Rows {
                fields,
                rows,
                tag: "FETCH".to_owned(),
            }),
            Ok(other) => Ok(other),
            Err(error) => self.fail(error),
        }
    }
}

/// The `DECLARE` statement of a cursor, as Cambium's parser prints it (what `pg_cursors` shows).
fn declare_text(name: &str, query: &str, scroll: Option<bool>, hold: bool) -> String {
    let scroll = match scroll {
        Some(true) => " SCROLL",
        Some(false) => " NO SCROLL",
        None => "",
    };
    let hold = if hold { " WITH HOLD" } else { "" };
    format!("DECLARE {name}{scroll} CURSOR{hold} FOR {query}")
}
