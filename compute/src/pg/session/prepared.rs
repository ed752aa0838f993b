//! SQL-level `EXECUTE name (args)` of a statement `PREPARE`d on the session.

use super::*;

impl Session {
    /// `EXECUTE name (args)`: the arguments evaluated (as a `SELECT` of them), made the declared parameter
    /// types, and the prepared statement run with them.
    pub(super) fn execute_prepared(
        &mut self,
        name: &str,
        args: &[String],
        format: &Format,
    ) -> Result<Outcome, SqlError> {
        let Some((sql, types)) = self.prepared.get(name).cloned() else {
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
