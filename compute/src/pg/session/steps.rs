//! Statements the dialect made of several SQLite statements (DDL that also records types, table rebuilds):
//! all of them or none, in one savepoint.

use super::*;

impl Session {
    /// A statement the layer made of several SQLite statements (DDL that also records types, TRUNCATE of
    /// several tables): all of them or none, in one savepoint.
    pub(super) fn run_steps(&mut self, translation: &Translation, kind: &Kind) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        let tag = match kind {
            Kind::Other(tag) => tag.clone(),
            _ => String::new(),
        };
        if self.read_only() {
            self.tx = tx_after_error(&self.conn, self.tx);
            return Err(read_only_error(&tag));
        }
        let outer = self.tx;
        let foreign_keys_off = translation.foreign_keys_off;
        if foreign_keys_off && !self.conn.is_autocommit() {
            return self.fail(SqlError::new(
                FEATURE_NOT_SUPPORTED,
                "this ALTER TABLE rebuilds a table that other tables reference with ON DELETE actions (CASCADE, \
                 SET NULL, SET DEFAULT, RESTRICT), which Cambium can do only outside a transaction block",
            ));
        }
        if foreign_keys_off {
            // Outside a transaction (checked above), where SQLite lets foreign keys be switched.
            self.conn.execute_batch("PRAGMA foreign_keys = OFF")?;
        }
        // `CREATE TABLE … AS` and `CREATE MATERIALIZED VIEW`: tagged `SELECT n`, the rows the primary step wrote.
        let mut rows = None;
        let result = self.conn.execute_batch("SAVEPOINT pgcompat_statement").and_then(|()| {
            for (index, step) in translation.steps.iter().enumerate() {
                self.conn.execute_batch(step)?;
                if index == translation.primary && tag == "SELECT" {
                    rows = Some(self.conn.changes());
                }
            }
            self.conn.execute_batch("RELEASE pgcompat_statement")
        });
        let tag = match rows {
            Some(rows) => format!("{tag} {rows}"),
            None => tag,
        };
        if foreign_keys_off {
            if let Err(error) = self.conn.execute_batch("PRAGMA foreign_keys = ON") {
                tracing::warn!(%error, "turning foreign keys back on failed");
            }
        }
        match result {
            Ok(()) => {
                self.tx = if self.conn.is_autocommit() {
                    TxState::Idle
                } else {
                    TxState::InBlock
                };
                Ok(Outcome::Command(tag))
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
                Err(SqlError::from(error))
            }
        }
    }
}
