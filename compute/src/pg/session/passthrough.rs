//! SQL the dialect layer passes through: run as SQLite's own dialect, statement by statement.

use super::*;

impl Session {
    /// SQL the dialect layer does not parse, run as SQLite's own (each statement of the text in turn).
    pub(super) fn run_passthrough(&mut self, sql: &str) -> (Vec<Outcome>, Option<SqlError>) {
        let mut outcomes = Vec::new();
        let sql = exec::passthrough_text(sql);
        let mut batch = Batch::new(&self.conn, &sql);
        let style = self.dialect.state().output_style();
        loop {
            if self.shared.stopped().is_some() {
                self.tx = tx_after_error(&self.conn, self.tx);
                return (outcomes, Some(SqlError::new(QUERY_CANCELED, "")));
            }
            let mut stmt = match batch.next() {
                Ok(Some(stmt)) => stmt,
                Ok(None) => return (outcomes, None),
                Err(error) => {
                    let error = if self.tx == TxState::Failed {
                        aborted()
                    } else {
                        SqlError::from(error)
                    };
                    self.tx = tx_after_error(&self.conn, self.tx);
                    return (outcomes, Some(error));
                }
            };
            let kind = exec::kind_of(&stmt.expanded_sql().unwrap_or_default());
            if let Err(error) = check_read_only(self.read_only(), &stmt, &kind) {
                self.tx = tx_after_error(&self.conn, self.tx);
                return (outcomes, Some(error));
            }
            let typing = Typing {
                known: self.dialect.column_types(&stmt, None),
                hints: None,
                style: &style,
                origins: Vec::new(),
            };
            match exec::run(
                &self.conn,
                &mut self.tx,
                &mut stmt,
                &[],
                &Format::UnifiedText,
                &kind,
                &typing,
            ) {
                Ok(outcome) => outcomes.push(outcome),
                Err(error) => return (outcomes, Some(error)),
            }
        }
    }

    pub(super) fn execute_passthrough(
        &mut self,
        sql: &str,
        params: &RawParams,
        format: &Format,
        hints: Option<&[PgType]>,
    ) -> Result<Outcome, SqlError> {
        let tz = self.dialect.state().time_zone();
        let style = self.dialect.state().output_style();
        let values = params.decode(&[], &tz)?;
        let mut stmt = match self.conn.prepare(&exec::passthrough_text(sql)) {
            Ok(stmt) => stmt,
            Err(error) => {
                let error = if self.tx == TxState::Failed {
                    aborted()
                } else {
                    SqlError::from(error)
                };
                self.tx = tx_after_error(&self.conn, self.tx);
                return Err(error);
            }
        };
        let kind = exec::kind_of(&stmt.expanded_sql().unwrap_or_default());
        if self.tx != TxState::Failed {
            if let Err(error) = check_read_only(self.read_only(), &stmt, &kind) {
                self.tx = tx_after_error(&self.conn, self.tx);
                return Err(error);
            }
        }
        let typing = Typing {
            known: self.dialect.column_types(&stmt, None),
            hints,
            style: &style,
            origins: Vec::new(),
        };
        exec::run(&self.conn, &mut self.tx, &mut stmt, &values, format, &kind, &typing)
    }
}
