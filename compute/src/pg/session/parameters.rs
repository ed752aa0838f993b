//! The session's side of run-time parameters (`pgcompat::settings`): the settings' transaction opened and ended
//! around each call, `BEGIN`'s modes applied, `SET`/`SHOW`/`RESET` run, startup parameters read.

use super::*;

impl Session {
    /// Opens the settings' transaction of a call made outside a transaction block (each such statement is
    /// its own transaction); inside a block the block's is open already.
    pub(super) fn before_statement(&mut self) {
        self.dialect.state().update_settings(|settings| settings.begin());
    }

    /// Publishes what the connection enforces after each call: the transaction state and the timeouts. A
    /// call that leaves no transaction open ends the settings' transaction: committed if the call succeeded
    /// (`SET LOCAL`s end), rolled back if it failed (its `SET`s are undone).
    pub(super) fn after_statement(&mut self, succeeded: bool) {
        let in_transaction = self.tx != TxState::Idle || !self.conn.is_autocommit();
        self.dialect.state().set_in_block(in_transaction);
        if !in_transaction {
            self.cursors.end_transaction(succeeded);
            // Sequence values a rolled-back transaction took stay taken, as in PostgreSQL.
            if let Err(error) = self.dialect.settle_sequences(&self.conn) {
                tracing::warn!(%error, database = %self.database, "storing sequence values again failed");
            }
            self.dialect.state().end_transaction(succeeded);
            // What a migration's last DDL made is shared before the session goes (a hint: errors only delay it).
            if let Err(error) = self.dialect.share_catalog_after_schema_change(&self.conn) {
                tracing::debug!(%error, database = %self.database, "reading the changed catalog to share it failed");
            }
        }
        let state = self.dialect.state();
        let (statement_timeout_ms, idle_timeout_ms) = state.update_settings(|settings| {
            if !in_transaction {
                settings.end(if succeeded { TxEnd::Commit } else { TxEnd::Rollback });
            }
            (
                settings.ms(settings::STATEMENT_TIMEOUT),
                settings.ms(settings::IDLE_IN_TRANSACTION_TIMEOUT),
            )
        });
        let shared = &self.shared;
        shared.in_transaction.store(in_transaction, Ordering::SeqCst);
        shared
            .statement_timeout_ms
            .store(statement_timeout_ms, Ordering::SeqCst);
        shared
            .idle_in_transaction_timeout_ms
            .store(idle_timeout_ms, Ordering::SeqCst);
    }

    /// Whether the open transaction may not write (`BEGIN READ ONLY`, `SET TRANSACTION READ ONLY`,
    /// `default_transaction_read_only`).
    pub(super) fn read_only(&self) -> bool {
        self.dialect
            .state()
            .read_settings(|settings| settings.is_on(settings::TRANSACTION_READ_ONLY))
    }

    /// The settings' side of a transaction statement that succeeded: `BEGIN`'s modes set the transaction's
    /// parameters; `COMMIT` and `ROLLBACK` end the settings' transaction and open the next statement's.
    pub(super) fn after_transaction_statement(&mut self, kind: &pgcompat::Kind, was_failed: bool) {
        if matches!(kind, pgcompat::Kind::Commit | pgcompat::Kind::Rollback) {
            let committed = !was_failed && *kind == pgcompat::Kind::Commit;
            self.cursors.end_transaction(committed);
            self.dialect.state().end_transaction(committed);
        }
        self.dialect.state().update_settings(|settings| match kind {
            pgcompat::Kind::Begin { modes } => {
                for (name, value) in modes {
                    if let Err(error) = settings.set(name, Some(value), Scope::Local) {
                        tracing::warn!(%error, name, "a transaction mode was not applied");
                    }
                }
            }
            pgcompat::Kind::Commit | pgcompat::Kind::Rollback => {
                let end = if was_failed || *kind == pgcompat::Kind::Rollback {
                    TxEnd::Rollback
                } else {
                    TxEnd::Commit
                };
                settings.end(end);
                settings.begin();
            }
            _ => {}
        });
    }

    /// Prepares the calling thread for this session's statements (its `DateStyle` field order, which date
    /// input reads per thread).
    pub(crate) fn enter_thread(&self) {
        self.dialect.state().enter_thread();
    }

    /// Tells the dialect whether a transaction block is open (deferred constraints are deferred only inside
    /// one; leaving one forgets its `SET CONSTRAINTS`).
    pub(super) fn sync_block(&self) {
        let in_block = self.tx != TxState::Idle || !self.conn.is_autocommit();
        self.dialect.state().set_in_block(in_block);
    }

    /// `SET CONSTRAINTS`: the modes set, and the deferrable constraints it makes immediate checked now.
    fn set_constraints(&mut self, names: Option<&[String]>, deferred: bool) -> Result<Outcome, SqlError> {
        let checks = match self.dialect.set_constraints(&self.conn, names, deferred) {
            Ok(checks) => checks,
            Err(pgcompat::TranslateError::Sql(error)) => return Err(SqlError::from(error)),
            Err(pgcompat::TranslateError::Sqlite(error)) => return Err(SqlError::from(error)),
        };
        for check in checks {
            self.conn.execute_batch(&check)?;
        }
        Ok(Outcome::Command("SET CONSTRAINTS".to_owned()))
    }

    /// Before a COMMIT of a transaction block: the deferrable constraints the block violated while they
    /// were deferred checked. A violation fails the COMMIT and rolls the block back, as in PostgreSQL.
    pub(super) fn check_deferred_constraints(&mut self) -> Result<(), SqlError> {
        let checks = match self.dialect.commit_checks(&self.conn) {
            Ok(checks) => Ok(checks),
            Err(pgcompat::TranslateError::Sql(error)) => Err(SqlError::from(error)),
            Err(pgcompat::TranslateError::Sqlite(error)) => Err(SqlError::from(error)),
        };
        let failed = match checks {
            Ok(checks) => checks
                .iter()
                .find_map(|check| self.conn.execute_batch(check).err().map(SqlError::from)),
            Err(error) => Some(error),
        };
        let Some(error) = failed else {
            return Ok(());
        };
        if !self.conn.is_autocommit() {
            if let Err(undo) = self.conn.execute_batch("ROLLBACK") {
                tracing::warn!(%undo, "rolling back after a failed deferred check failed");
            }
        }
        self.tx = TxState::Idle;
        self.after_transaction_statement(&pgcompat::Kind::Rollback, true);
        self.sync_block();
        Err(error)
    }

    /// `SET`, `SHOW` or `RESET` (see `settings`).
    pub(super) fn run_setting(&mut self, sql: &str, format: &Format) -> Result<Outcome, SqlError> {
        if self.tx == TxState::Failed {
            return Err(aborted());
        }
        self.sync_block();
        let state = self.dialect.state().clone();
        let result = match settings::parse(sql)? {
            Command::Set { assignments, scope } => state
                .update_settings(|settings| {
                    assignments
                        .iter()
                        .try_for_each(|(name, value)| settings.set(name, value.as_deref(), scope))
                })
                .map(|()| Outcome::Command("SET".to_owned()))
                .map_err(SqlError::from),
            Command::SetConstraints { names, deferred } => self.set_constraints(names.as_deref(), deferred),
            Command::Reset(name) => state
                .update_settings(|settings| settings.reset(name.as_deref()))
                .map(|()| Outcome::Command("RESET".to_owned()))
                .map_err(SqlError::from),
            Command::Show(name) => match state.read_settings(|settings| settings.show(&name)) {
                Ok((name, value)) => show_outcome(vec![name], vec![vec![value]], format),
                Err(error) => Err(SqlError::from(error)),
            },
            Command::ShowAll => {
                let rows = state.read_settings(|settings| {
                    settings
                        .rows()
                        .into_iter()
                        .map(|row| {
                            let description = row.guc.map_or("", |g| g.short_desc).to_owned();
                            vec![row.name, row.shown, description]
                        })
                        .collect()
                });
                let names = ["name", "setting", "description"].map(str::to_owned).to_vec();
                show_outcome(names, rows, format)
            }
        };
        if result.is_err() && self.tx == TxState::InBlock {
            self.tx = TxState::Failed;
        }
        result
    }
}

/// The zone a `TimeZone` setting names (`UTC`, `Europe/Paris`), if known.
/// The rows of a `SHOW`, all text, tagged `SHOW`.
pub(super) fn show_outcome(names: Vec<String>, rows: Vec<Vec<String>>, format: &Format) -> Result<Outcome, SqlError> {
    let rows: Vec<Vec<Value>> = rows
        .into_iter()
        .map(|row| row.into_iter().map(Value::Text).collect())
        .collect();
    let columns = names
        .into_iter()
        .map(|name| exec::Column::computed(name, PgType::TEXT))
        .collect();
    let outcome = exec::rows_outcome(
        columns,
        &rows,
        format,
        &Kind::Other("SHOW".to_owned()),
        &pgcompat::value::OutputStyle::with_zone(jiff::tz::TimeZone::UTC),
    )?;
    Ok(match outcome {
        Outcome::Rows { fields, rows, .. } => Outcome::Rows {
            fields,
            rows,
            tag: "SHOW".to_owned(),
        },
        other => other,
    })
}

/// The settings a client's startup packet asks for: its parameters other than who and where, and each
/// `-c name=value` (or `--name=value`) of its `options`.
pub(super) fn startup_settings(startup: &[(String, String)]) -> Vec<(String, String)> {
    let mut settings = Vec::new();
    for (name, value) in startup {
        match name.as_str() {
            "user" | "database" | "replication" => {}
            "options" => {
                let mut words = value.split_whitespace();
                while let Some(word) = words.next() {
                    let assignment = match word {
                        "-c" => words.next(),
                        _ => word.strip_prefix("-c").or_else(|| word.strip_prefix("--")),
                    };
                    if let Some((name, value)) = assignment.and_then(|a| a.split_once('=')) {
                        settings.push((name.replace('-', "_"), value.to_owned()));
                    }
                }
            }
            _ => settings.push((name.clone(), value.clone())),
        }
    }
    settings
}
