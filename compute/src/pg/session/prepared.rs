//! SQL-level `EXECUTE name (args)` of a statement `PREPARE`d on the session.

use super::*;

/// A statement `PREPARE`d on the session.
#[derive(Clone, Debug)]
pub(super) struct PreparedSql {
    /// Its PostgreSQL text, each parameter cast to its declared type.
    sql: String,
    /// The declared parameter types.
    types: Vec<PgType>,
    /// The `PREPARE` statement (what `pg_prepared_statements` shows).
    source: String,
    /// The parameter types `pg_prepared_statements` shows (see [`Session::listed_parameter_types`]).
    listed_types: Vec<Option<PgType>>,
    prepared_at: std::time::SystemTime,
}

impl PreparedSql {
    /// A statement prepared now.
    pub(super) fn new(sql: &str, types: &[PgType], source: &str, listed_types: Vec<Option<PgType>>) -> PreparedSql {
        PreparedSql {
            sql: sql.to_owned(),
            types: types.to_vec(),
            source: source.to_owned(),
            listed_types,
            prepared_at: std::time::SystemTime::now(),
        }
    }
}

impl Session {
    /// The parameter types of a prepared statement as `pg_prepared_statements` shows them: the declared
    /// ones, then those the statement's use of its parameters implies (PostgreSQL infers undeclared types
    /// when it prepares), `None` (`unknown`) where nothing does.
    pub(super) fn listed_parameter_types(&mut self, sql: &str, declared: &[PgType]) -> Vec<Option<PgType>> {
        let inferred = match self.dialect.translate(&self.conn, sql).as_deref() {
            Ok(Translated::Statements(list)) => list.first().map(|t| t.params.clone()).unwrap_or_default(),
            _ => Vec::new(),
        };
        (0..declared.len().max(inferred.len()))
            .map(|i| declared.get(i).copied().or_else(|| inferred.get(i).copied().flatten()))
            .collect()
    }

    /// Publishes the session's prepared statements and cursors to the dialect, for `pg_prepared_statements`
    /// and `pg_cursors` (nothing to do while there are none and none were published).
    pub(super) fn publish_session_objects(&mut self) {
        let none = self.prepared.is_empty() && self.cursors.is_empty();
        if none && !self.objects_published {
            return;
        }
        self.objects_published = !none;
        let mut prepared: Vec<_> = self
            .prepared
            .iter()
            .map(|(name, p)| pgcompat::functions::PreparedStatementRow {
                name: name.clone(),
                statement: p.source.clone(),
                prepared_at: p.prepared_at,
                parameter_types: p.listed_types.clone(),
            })
            .collect();
        prepared.sort_by(|a, b| a.name.cmp(&b.name));
        let state = self.dialect.state();
        state.set_prepared_statements(prepared);
        state.set_cursors(self.cursors.rows());
    }

    /// `EXECUTE name (args)`: the arguments evaluated (as a `SELECT` of them), made the declared parameter
    /// types, and the prepared statement run with them.
    pub(super) fn execute_prepared(
        &mut self,
        name: &str,
        args: &[String],
        format: &Format,
    ) -> Result<Outcome, SqlError> {
        let Some(PreparedSql { sql, types, .. }) = self.prepared.get(name).cloned() else {
            return self.fail(SqlError::new(
                INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{name}\" does not exist"),
            ));
        };
        let tz = self.dialect.state().time_zone();
        let mut values = Vec::with_capacity(args.len());
        if !args.is_empty() {
            let select = format!("SELECT {}", args.join(", "));
            let translated = self.translate(&select)?;
            let Translated::Statements(list) = &*translated else {
                return self.fail(SqlError::new(SYNTAX_ERROR, "EXECUTE arguments are not expressions"));
            };
            let [evaluate] = list.as_slice() else {
                return self.fail(SqlError::new(SYNTAX_ERROR, "EXECUTE arguments are not expressions"));
            };
            let row = self.conn.prepare(&evaluate.steps[0]).and_then(|mut stmt| {
                let width = stmt.column_count();
                stmt.query_row([], |row| {
                    (0..width)
                        .map(|i| row.get::<_, Value>(i))
                        .collect::<Result<Vec<_>, _>>()
                })
            });
            match row {
                Ok(row) => values = row,
                Err(error) => return self.fail(SqlError::from(error)),
            }
        }
        if values.len() != types.len() && !types.is_empty() {
            return self.fail(SqlError::new(
                SYNTAX_ERROR,
                format!(
                    "wrong number of parameters for prepared statement \"{name}\": expected {}, got {}",
                    types.len(),
                    values.len()
                ),
            ));
        }
        for (value, ty) in values.iter_mut().zip(&types) {
            match pgcompat::value::coerce(*ty, std::mem::replace(value, Value::Null), &tz) {
                Ok(coerced) => *value = coerced,
                Err(error) => return self.fail(SqlError::from(error)),
            }
        }
        let translated = self.translate(&sql)?;
        let Translated::Statements(list) = &*translated else {
            return self.fail(SqlError::new(
                FEATURE_NOT_SUPPORTED,
                "EXECUTE of a statement in SQLite's own dialect",
            ));
        };
        let [translation] = list.as_slice() else {
            return self.fail(SqlError::new(SYNTAX_ERROR, "a prepared statement holds one statement"));
        };
        let param_types: Vec<Option<PgType>> = types.iter().copied().map(Some).collect();
        self.run_translation(translation, &values, &param_types, format, None)
    }
}
