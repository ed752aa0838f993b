//! Sequence-filled columns in DML and DDL: the rules of identity columns (a value for a `GENERATED ALWAYS`
//! one only with `OVERRIDING SYSTEM VALUE`, 428C9 otherwise; `OVERRIDING USER VALUE`), the sequence columns an
//! INSERT leaves out written into it (SQLite never evaluates an `INTEGER PRIMARY KEY`'s default, so the
//! sequence is read where PostgreSQL reads it), and `ALTER COLUMN … ADD GENERATED … AS IDENTITY`.

use rusqlite::Connection;
use sqlparser::ast::{
    AlterTableOperation, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GeneratedAs, Ident, ObjectName, Query,
    SelectItem, SetExpr,
};

use crate::catalog::Catalog;
use crate::error::PgError;
use crate::types::PgType;

/// Whether a column default (SQLite's text of it) takes a value from a sequence.
pub(crate) fn is_sequence_default(text: &str) -> Option<Expr> {
    let expr = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    calls_nextval(&expr).then_some(expr)
}

fn calls_nextval(expr: &Expr) -> bool {
    match expr {
        Expr::Nested(inner) => calls_nextval(inner),
        Expr::Function(f) => {
            f.name.to_string().eq_ignore_ascii_case("pg_nextval")
                || match &f.args {
                    FunctionArguments::List(list) => list
                        .args
                        .iter()
                        .any(|a| matches!(a, FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if calls_nextval(e))),
                    _ => false,
                }
        }
        _ => false,
    }
}

/// The columns of `table` left out of an INSERT whose default takes a sequence value, with that default:
/// SQLite evaluates no default for an `INTEGER PRIMARY KEY` (it picks a rowid), so the INSERT names them.
fn omitted_sequence_defaults(
    conn: &Connection,
    catalog: &Catalog,
    table: &str,
    named: &[String],
) -> Vec<(String, Expr)> {
    catalog
        .sequence_defaults(conn, table, || sequence_defaults(conn, table))
        .iter()
        .filter(|(name, _)| !named.iter().any(|n| n.eq_ignore_ascii_case(name)))
        .cloned()
        .collect()
}

/// Every column of `table` whose default takes a value from a sequence, with the default.
fn sequence_defaults(conn: &Connection, table: &str) -> Vec<(String, Expr)> {
    let Ok(mut stmt) = conn.prepare_cached("SELECT name, dflt_value FROM pragma_table_info(?1)") else {
        return Vec::new();
    };
    let rows = stmt.query_map([table], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
    });
    let Ok(rows) = rows else {
        return Vec::new();
    };
    rows.filter_map(Result::ok)
        .filter_map(|(name, default)| default.as_deref().and_then(is_sequence_default).map(|e| (name, e)))
        .collect()
}

/// An INSERT's identity columns checked before its values are filled in: a value for a `GENERATED ALWAYS`
/// one needs `OVERRIDING SYSTEM VALUE` (428C9 otherwise); `OVERRIDING USER VALUE` makes the given values
/// the column's default. `columns` are the columns the INSERT fills, in order.
pub(crate) fn check_identity(
    catalog: &Catalog,
    table: &str,
    columns: &[String],
    insert: &mut sqlparser::ast::Insert,
    overriding: Option<sqlparser::ast::InsertOverriding>,
) -> Result<(), PgError> {
    use sqlparser::ast::InsertOverriding;
    let is_default = |e: &Expr| matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
    if insert.source.is_none() {
        // `DEFAULT VALUES` gives no value to any column.
        return Ok(());
    }
    for entry in catalog.owned_sequences(table, None).filter(|s| !s.identity.is_empty()) {
        let Some((_, column)) = &entry.owner else {
            continue;
        };
        let Some(position) = columns.iter().position(|c| c.eq_ignore_ascii_case(column)) else {
            continue;
        };
        let values = insert.source.as_deref_mut().and_then(|q| match q.body.as_mut() {
            SetExpr::Values(values) => Some(values),
            _ => None,
        });
        match (overriding, values) {
            (Some(InsertOverriding::System), _) => {}
            (Some(InsertOverriding::User), Some(values)) => {
                for row in &mut values.rows {
                    if let Some(value) = row.content.get_mut(position) {
                        *value = Expr::Identifier(Ident::new("DEFAULT"));
                    }
                }
            }
            (_, values) if entry.identity == "a" => {
                let all_default = values.is_some_and(|v| {
                    v.rows
                        .iter()
                        .all(|row| row.content.get(position).is_none_or(&is_default))
                });
                if !all_default {
                    return Err(PgError::new(
                        crate::error::GENERATED_ALWAYS,
                        format!("cannot insert a non-DEFAULT value into column \"{column}\""),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// An UPDATE may set a `GENERATED ALWAYS` identity column only to DEFAULT (428C9).
pub(crate) fn check_identity_update(
    catalog: &Catalog,
    table: &str,
    assignments: &[sqlparser::ast::Assignment],
) -> Result<(), PgError> {
    for assignment in assignments {
        let sqlparser::ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
            continue;
        };
        let column = super::expr::last_part(name);
        let always = catalog.owned_sequences(table, Some(&column)).any(|s| s.identity == "a");
        let is_default = matches!(&assignment.value, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
        if always && !is_default {
            return Err(PgError::new(
                crate::error::GENERATED_ALWAYS,
                format!("column \"{column}\" can only be updated to DEFAULT"),
            ));
        }
    }
    Ok(())
}

/// The omitted columns of an INSERT that take a sequence value, written into it (after its values are
/// rewritten): to each VALUES row or around its query, and a `DEFAULT VALUES` made a VALUES row.
pub(crate) fn fill_omitted(
    conn: &Connection,
    catalog: &Catalog,
    table: &str,
    insert: &mut sqlparser::ast::Insert,
    columns: &[String],
) -> Result<(), PgError> {
    let named: &[String] = if insert.source.is_some() { columns } else { &[] };
    let defaults = omitted_sequence_defaults(conn, catalog, table, named);
    if defaults.is_empty() {
        return Ok(());
    }
    if insert.columns.is_empty() && insert.source.is_some() {
        insert.columns = columns
            .iter()
            .map(|c| ObjectName::from(vec![Ident::with_quote('"', c.clone())]))
            .collect();
    }
    insert.columns.extend(
        defaults
            .iter()
            .map(|(c, _)| ObjectName::from(vec![Ident::with_quote('"', c.clone())])),
    );
    match insert.source.as_deref_mut() {
        Some(source) => add_to_source(source, &defaults),
        None => {
            let row: Vec<String> = defaults.iter().map(|(_, e)| e.to_string()).collect();
            let values = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql(&format!("VALUES ({})", row.join(", ")))
                .and_then(|mut p| p.parse_query())
                .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting an INSERT: {e}")))?;
            insert.source = Some(values);
            Ok(())
        }
    }
}

/// Adds the omitted sequence columns to an INSERT's source: to each VALUES row, or around a query.
fn add_to_source(source: &mut Query, defaults: &[(String, Expr)]) -> Result<(), PgError> {
    match source.body.as_mut() {
        SetExpr::Values(values) => {
            for row in &mut values.rows {
                row.content.extend(defaults.iter().map(|(_, e)| e.clone()));
            }
        }
        SetExpr::Select(select)
            if select.distinct.is_none()
                && matches!(&select.group_by, sqlparser::ast::GroupByExpr::Expressions(e, _) if e.is_empty()) =>
        {
            select
                .projection
                .extend(defaults.iter().map(|(_, e)| SelectItem::UnnamedExpr(e.clone())));
        }
        _ => {
            let inner = source.clone();
            let mut items = vec!["_pgc_src.*".to_owned()];
            items.extend(defaults.iter().map(|(_, e)| e.to_string()));
            let wrapped = format!("SELECT {} FROM ({inner}) AS _pgc_src", items.join(", "));
            let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql(&wrapped)
                .and_then(|mut p| p.parse_query())
                .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting an INSERT: {e}")))?;
            *source = *parsed;
        }
    }
    Ok(())
}

/// `ALTER COLUMN c ADD GENERATED … AS IDENTITY [(options)]`: the column's sequence is made (its steps
/// returned) and the operation becomes the default that reads it, which the rebuild sets.
pub(crate) fn add_identity(
    conn: &Connection,
    catalog: &Catalog,
    table: &str,
    operation: &mut AlterTableOperation,
    identity_sequence: Option<&str>,
) -> Result<Vec<String>, PgError> {
    let AlterTableOperation::AlterColumn { column_name, op } = operation else {
        return Ok(Vec::new());
    };
    let sqlparser::ast::AlterColumnOperation::AddGenerated {
        generated_as,
        sequence_options,
    } = op
    else {
        return Ok(Vec::new());
    };
    let column = if column_name.quote_style.is_some() {
        column_name.value.clone()
    } else {
        column_name.value.to_ascii_lowercase()
    };
    let declared: Option<String> = conn
        .query_row(
            "SELECT type FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE",
            [table, column.as_str()],
            |row| row.get(0),
        )
        .ok();
    if declared.is_none() {
        return Err(PgError::new(
            crate::error::UNDEFINED_COLUMN,
            format!("column \"{column}\" of relation \"{table}\" does not exist"),
        ));
    }
    let identity = if matches!(generated_as, Some(GeneratedAs::Always)) {
        "a"
    } else {
        "d"
    };
    let ty = catalog
        .column_type(table, &column)
        .filter(|t| t.is_integer())
        .unwrap_or(PgType::INT8);
    let (sequence, steps) = super::sequence::column_sequence(
        conn,
        table,
        &column,
        ty,
        sequence_options.as_deref().unwrap_or_default(),
        identity_sequence,
        identity,
    )?;
    *op = sqlparser::ast::AlterColumnOperation::SetDefault {
        value: super::sequence::nextval_default(&sequence),
    };
    Ok(steps)
}
