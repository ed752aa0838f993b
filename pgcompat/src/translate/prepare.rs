//! `PREPARE name (types) AS statement`: the statement kept with each `$n` cast to its declared type, so it
//! is translated as PostgreSQL types it (`$3 + 1` on a `date` parameter is date arithmetic), whatever the
//! arguments of a later `EXECUTE` look like. Result columns are named first, from the statement as written:
//! the casts are not the client's and do not name a column (`$1` stays `?column?`, not `int4`).

use sqlparser::ast::{CastKind, DataType, Expr, Statement, Value};

use crate::error::PgError;

/// The statement's text with its parameters cast to `types` (`$n` beyond them stay as written).
pub(crate) fn typed_statement(statement: &Statement, types: &[DataType]) -> String {
    if types.is_empty() {
        return statement.to_string();
    }
    let mut statement = statement.clone();
    let mut casts = Casts { types };
    // Only casts are added: the walk cannot fail.
    let _ = match &mut statement {
        Statement::Query(query) => {
            super::names::name_columns(query);
            super::walk::query(&mut casts, query)
        }
        Statement::Insert(insert) => {
            if let Some(returning) = &mut insert.returning {
                super::names::name_items(returning);
            }
            match insert.source.as_mut() {
                Some(source) => super::walk::query(&mut casts, source),
                None => Ok(()),
            }
        }
        Statement::Update(update) => {
            if let Some(returning) = &mut update.returning {
                super::names::name_items(returning);
            }
            let mut result = Ok(());
            for assignment in &mut update.assignments {
                result = result.and(super::walk::expr(&mut casts, &mut assignment.value));
            }
            match &mut update.selection {
                Some(selection) => result.and(super::walk::expr(&mut casts, selection)),
                None => result,
            }
        }
        Statement::Delete(delete) => {
            if let Some(returning) = &mut delete.returning {
                super::names::name_items(returning);
            }
            match &mut delete.selection {
                Some(selection) => super::walk::expr(&mut casts, selection),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    };
    statement.to_string()
}

struct Casts<'a> {
    types: &'a [DataType],
}

impl super::walk::Hooks for Casts<'_> {
    fn enter_select(&mut self, _: &sqlparser::ast::Select) {}

    fn leave_select(&mut self) {}

    fn table_factor(&mut self, _: &mut sqlparser::ast::TableFactor) -> Result<(), PgError> {
        Ok(())
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        let Expr::Value(value) = expr else {
            return Ok(());
        };
        let Value::Placeholder(name) = &value.value else {
            return Ok(());
        };
        let Some(ty) = name
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| self.types.get(i))
        else {
            return Ok(());
        };
        *expr = Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(expr.clone()),
            data_type: ty.clone(),
            format: None,
        };
        Ok(())
    }
}

/// `PREPARE name [(types)] AS statement`, for the session to keep.
pub(super) fn prepare(
    name: &sqlparser::ast::Ident,
    data_types: &[DataType],
    inner: &Statement,
) -> Result<super::Translation, PgError> {
    let types = data_types
        .iter()
        .map(super::expr::written_type)
        .collect::<Result<Vec<_>, _>>()?;
    let source = match data_types {
        [] => format!("PREPARE {name} AS {inner}"),
        declared => {
            let declared: Vec<String> = declared.iter().map(ToString::to_string).collect();
            format!("PREPARE {name} ({}) AS {inner}", declared.join(", "))
        }
    };
    Ok(super::bare(super::Kind::Prepare {
        name: name.value.to_ascii_lowercase(),
        statement: typed_statement(inner, data_types),
        types,
        source,
    }))
}

/// `EXECUTE name (args)`, for the session to carry out with the prepared statement.
pub(super) fn execute(name: &sqlparser::ast::ObjectName, parameters: &[Expr]) -> super::Translation {
    super::bare(super::Kind::Execute {
        name: super::expr::last_part(name).to_ascii_lowercase(),
        args: parameters.iter().map(ToString::to_string).collect(),
    })
}

/// `DEALLOCATE name` or `DEALLOCATE ALL` (an unquoted `all`).
pub(super) fn deallocate(name: &sqlparser::ast::Ident) -> super::Translation {
    let target = (!name.value.eq_ignore_ascii_case("all") || name.quote_style.is_some())
        .then(|| name.value.to_ascii_lowercase());
    super::bare(super::Kind::Deallocate(target))
}
