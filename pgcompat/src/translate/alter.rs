//! `ALTER TABLE`: the forms SQLite can do in place (rename, add or drop a column, defaults it can keep), the
//! others by a rebuild of the table (`rebuild`), with the recorded types following every change.

use rusqlite::Connection;
use sqlparser::ast::{AlterTable, AlterTableOperation, ColumnDef, ColumnOption, Expr, RenameTableNameKind};

use super::ddl::{column_type, ddl, fold, fold_name, render_column, table_exists, table_name};
use super::expr::{coerce_call, Rewriter, Scope};
use super::Translation;
use crate::catalog::{self, quote_ident, Catalog};
use crate::error::PgError;
use crate::types::PgType;

/// `ALTER TABLE`: the forms SQLite can do in place, the others by a rebuild. `identity_sequence` is the
/// `SEQUENCE NAME` of an `ADD GENERATED … AS IDENTITY` (read before sqlparser, which does not know it).
pub(crate) fn alter_table(
    conn: &Connection,
    catalog: &Catalog,
    alter: &mut AlterTable,
    identity_sequence: Option<&str>,
) -> Result<Translation, PgError> {
    let table = table_name(catalog, &alter.name)?;
    if !table_exists(conn, &table) {
        let only_owner = alter
            .operations
            .iter()
            .all(|o| matches!(o, AlterTableOperation::OwnerTo { .. }));
        // pg_dump gives views and sequences their owner with ALTER TABLE: one role owns everything.
        if only_owner && relation_exists(conn, &table) {
            return Ok(ddl("ALTER TABLE", vec!["SELECT NULL WHERE 0".to_owned()]));
        }
        if alter.if_exists {
            return Ok(ddl("ALTER TABLE", Vec::new()));
        }
        return Err(PgError::new(
            crate::error::UNDEFINED_TABLE,
            format!("relation \"{table}\" does not exist"),
        ));
    }
    if let Some(steps) = super::deferrable::alter(catalog, &table, &alter.operations) {
        return Ok(ddl("ALTER TABLE", steps?));
    }
    // `ADD COLUMN IF NOT EXISTS` of a column the table has, `DROP COLUMN IF EXISTS` of one it lacks: PostgreSQL's
    // NOTICEs (the operation is skipped).
    let (_, own) = super::schema::schema_of(catalog, &table);
    let notices: Vec<String> = alter
        .operations
        .iter()
        .filter_map(|operation| match operation {
            AlterTableOperation::AddColumn {
                if_not_exists: true,
                column_def,
                ..
            } if has_column(conn, &table, &fold(&column_def.name)) => Some(vec![format!(
                "column \"{}\" of relation \"{own}\" already exists, skipping",
                fold(&column_def.name)
            )]),
            AlterTableOperation::DropColumn {
                column_names,
                if_exists: true,
                ..
            } => Some(
                column_names
                    .iter()
                    .map(fold)
                    .filter(|name| !has_column(conn, &table, name))
                    .map(|name| format!("column \"{name}\" of relation \"{own}\" does not exist, skipping"))
                    .collect(),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    if alter.operations.iter().any(super::rebuild::needs_rebuild) {
        // A rebuild adds any column too (its new table has it).
        let rebuilt = |o: &AlterTableOperation| {
            super::rebuild::needs_rebuild(o) || matches!(o, AlterTableOperation::AddColumn { .. })
        };
        if !alter.operations.iter().all(rebuilt) {
            return Err(PgError::unsupported(
                "ALTER TABLE mixing ALTER COLUMN or constraints with other changes (run them as separate statements)",
            ));
        }
        let mut steps = Vec::new();
        for operation in &mut alter.operations {
            steps.extend(super::identity::add_identity(
                conn,
                catalog,
                &table,
                operation,
                identity_sequence,
            )?);
        }
        let plan = super::rebuild::rebuild(conn, catalog, &table, &mut alter.operations)?;
        steps.extend(plan.steps);
        let mut translation = ddl("ALTER TABLE", steps);
        translation.foreign_keys_off = plan.referenced;
        translation.notices = notices;
        return Ok(translation);
    }
    let mut steps = alter_in_place(conn, catalog, &table, &mut alter.operations)?;
    if steps.is_empty() {
        steps.push("SELECT NULL WHERE 0".to_owned());
    }
    let mut translation = ddl("ALTER TABLE", steps);
    translation.notices = notices;
    Ok(translation)
}

/// Whether `table` has a column of this name (a generated one too, which `pragma_table_info` hides).
fn has_column(conn: &Connection, table: &str, column: &str) -> bool {
    conn.prepare_cached("SELECT 1 FROM pragma_table_xinfo(?1) WHERE name = ?2 COLLATE NOCASE")
        .and_then(|mut s| s.exists([table, column]))
        .unwrap_or(false)
}

/// Whether a relation of any kind has this name.
fn relation_exists(conn: &Connection, name: &str) -> bool {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?1 COLLATE NOCASE)",
        [name],
        |row| row.get(0),
    )
    .unwrap_or(false)
}

/// `RENAME COLUMN a TO b` and `RENAME TO t`: SQLite's rename, the recorded types and the owners of the
/// table's sequences following it.
fn rename(catalog: &Catalog, table: &str, operation: &AlterTableOperation) -> Vec<String> {
    let mut steps = Vec::new();
    match operation {
        AlterTableOperation::RenameColumn {
            old_column_name,
            new_column_name,
        } => {
            let (from, to) = (fold(old_column_name), fold(new_column_name));
            steps.push(format!(
                "ALTER TABLE {} RENAME COLUMN {} TO {}",
                quote_ident(table),
                quote_ident(&from),
                quote_ident(&to)
            ));
            steps.push(catalog::rename_column(table, &from, &to));
            steps.extend(super::sequence::rename_owner(catalog, table, Some((&from, &to)), table));
        }
        AlterTableOperation::RenameTable { table_name } => {
            let (RenameTableNameKind::As(name) | RenameTableNameKind::To(name)) = table_name;
            // The table stays in its schema.
            let to = crate::schemas::sqlite_name(&super::schema::schema_of(catalog, table).0, &fold_name(name));
            steps.push(format!(
                "ALTER TABLE {} RENAME TO {}",
                quote_ident(table),
                quote_ident(&to)
            ));
            steps.push(catalog::rename_table(table, &to));
            steps.extend(super::comment::rename_relation(catalog, table, &to));
            steps.extend(super::sequence::rename_owner(catalog, table, None, &to));
        }
        _ => {}
    }
    steps
}

/// A column's `DEFAULT` when it is a literal (`7`, `'dd'`, `-1.5`, `NULL`, `'x'::text`): taken out of the
/// definition and given back as the SQLite literal of its value converted to the column's type.
fn constant_default(
    conn: &Connection,
    rewriter: &mut Rewriter<'_>,
    def: &mut ColumnDef,
    ty: PgType,
) -> Result<Option<String>, PgError> {
    let literal = |e: &Expr| match e {
        Expr::Value(_) => true,
        Expr::UnaryOp { expr, .. } => matches!(expr.as_ref(), Expr::Value(_)),
        Expr::Cast { expr, .. } => matches!(expr.as_ref(), Expr::Value(_)),
        _ => false,
    };
    let Some(position) = def
        .options
        .iter()
        .position(|o| matches!(&o.option, ColumnOption::Default(e) if literal(e)))
    else {
        return Ok(None);
    };
    let ColumnOption::Default(mut expr) = def.options.remove(position).option else {
        return Ok(None);
    };
    rewriter.rewrite_expr(&mut expr)?;
    let value: rusqlite::types::Value = conn
        .query_row(&format!("SELECT {}", coerce_call(expr, ty)), [], |row| row.get(0))
        .map_err(|e| {
            crate::functions::error_of(&e.to_string())
                .unwrap_or_else(|| PgError::new(crate::error::INVALID_TEXT_REPRESENTATION, e.to_string()))
        })?;
    Ok(Some(match value {
        rusqlite::types::Value::Null => "NULL".to_owned(),
        rusqlite::types::Value::Integer(i) => i.to_string(),
        rusqlite::types::Value::Real(f) => format!("{f:?}"),
        rusqlite::types::Value::Text(t) => catalog::quote_literal(&t),
        rusqlite::types::Value::Blob(b) => format!("X'{}'", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
    }))
}

/// The `ALTER TABLE` operations SQLite does in place (columns added, dropped, renamed; the table renamed).
fn alter_in_place(
    conn: &Connection,
    catalog: &Catalog,
    table: &str,
    operations: &mut [AlterTableOperation],
) -> Result<Vec<String>, PgError> {
    let mut steps = Vec::new();
    let mut rewriter = Rewriter::new(catalog);
    rewriter.typer.scopes.push(Scope::of_table(table));
    let exists = |column: &str| has_column(conn, table, column);
    for operation in operations {
        match operation {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                ..
            } => {
                let name = fold(&column_def.name);
                if *if_not_exists && exists(&name) {
                    continue;
                }
                let column = column_type(catalog, column_def)?;
                if column.generator.is_some() {
                    return Err(PgError::unsupported("adding a serial or identity column"));
                }
                // SQLite adds a column to a table with rows only with a constant default: a literal one is
                // converted now and written as its stored value (the rows take it, as in PostgreSQL).
                let constant = constant_default(conn, &mut rewriter, column_def, column.ty)?;
                let mut rendered = render_column(&mut rewriter, table, column_def, &column, false, None)?;
                if let Some(literal) = constant {
                    rendered.push_str(&format!(" DEFAULT {literal}"));
                }
                steps.push(format!("ALTER TABLE {} ADD COLUMN {rendered}", quote_ident(table)));
                steps.push(catalog::record_column(table, &name, column.ty));
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for column in column_names.iter() {
                    let name = fold(column);
                    if *if_exists && !exists(&name) {
                        continue;
                    }
                    steps.push(format!(
                        "ALTER TABLE {} DROP COLUMN {}",
                        quote_ident(table),
                        quote_ident(&name)
                    ));
                    steps.push(catalog::forget_column(table, &name));
                    steps.extend(super::sequence::drop_owned(catalog, table, Some(&name)));
                }
            }
            AlterTableOperation::RenameColumn { .. } | AlterTableOperation::RenameTable { .. } => {
                steps.extend(rename(catalog, table, operation));
            }
            AlterTableOperation::OwnerTo { .. } => {}
            other => return Err(PgError::unsupported(format!("ALTER TABLE … {other}"))),
        }
    }
    Ok(steps)
}
