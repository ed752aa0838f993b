//! DDL of deferrable UNIQUE constraints (`crate::deferrable`): taken out of a `CREATE TABLE` (SQLite's own
//! UNIQUE cannot be deferred) and made as an index and triggers after it; `ALTER TABLE … ADD CONSTRAINT …
//! UNIQUE … DEFERRABLE` (the rows checked first) and `DROP CONSTRAINT` of one. A deferrable PRIMARY KEY is
//! 0A000.

use sqlparser::ast::{
    AlterTableOperation, ColumnOption, ConstraintCharacteristics, CreateTable, DeferrableInitial, Expr, IndexColumn,
    TableConstraint,
};

use crate::catalog::{quote_ident, Catalog};
use crate::deferrable::{DeferrableUnique, TRIGGER_PREFIX};
use crate::error::PgError;

use super::schema::fold_ident;

/// `Some(initially deferred)` for `DEFERRABLE` characteristics.
fn deferrable(characteristics: Option<&ConstraintCharacteristics>) -> Option<bool> {
    let c = characteristics?;
    (c.deferrable == Some(true)).then_some(c.initially == Some(DeferrableInitial::Deferred))
}

fn plain_columns(columns: &[IndexColumn]) -> Result<Vec<String>, PgError> {
    columns
        .iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(ident) => Ok(fold_ident(ident)),
            other => Err(PgError::unsupported(format!(
                "a deferrable key on the expression {other}"
            ))),
        })
        .collect()
}

/// The constraint's SQLite name: its own name in its table's schema, as indexes are named.
fn constraint(catalog: &Catalog, table: &str, name: String, columns: Vec<String>, deferred: bool) -> DeferrableUnique {
    let (schema, _) = super::schema::schema_of(catalog, table);
    DeferrableUnique {
        name: crate::schemas::sqlite_name(&schema, &name),
        table: table.to_owned(),
        columns,
        initially_deferred: deferred,
    }
}

/// Takes the deferrable UNIQUE constraints out of a `CREATE TABLE` of the SQLite table `table`, for
/// [`DeferrableUnique::create_sql`] after the table is made.
pub(crate) fn extract(
    catalog: &Catalog,
    table: &str,
    create: &mut CreateTable,
) -> Result<Vec<DeferrableUnique>, PgError> {
    let (_, own) = super::schema::schema_of(catalog, table);
    let mut found = Vec::new();
    for def in &mut create.columns {
        let column = fold_ident(&def.name);
        let mut kept = Vec::with_capacity(def.options.len());
        for option in std::mem::take(&mut def.options) {
            match &option.option {
                ColumnOption::PrimaryKey(pk) if deferrable(pk.characteristics.as_ref()).is_some() => {
                    return Err(PgError::unsupported("deferrable primary keys"));
                }
                ColumnOption::Unique(u) => match deferrable(u.characteristics.as_ref()) {
                    Some(deferred) => {
                        let name = option
                            .name
                            .as_ref()
                            .map_or_else(|| format!("{own}_{column}_key"), fold_ident);
                        found.push(constraint(catalog, table, name, vec![column.clone()], deferred));
                    }
                    None => kept.push(option),
                },
                _ => kept.push(option),
            }
        }
        def.options = kept;
    }
    let mut kept = Vec::with_capacity(create.constraints.len());
    for table_constraint in std::mem::take(&mut create.constraints) {
        match &table_constraint {
            TableConstraint::PrimaryKey(pk) if deferrable(pk.characteristics.as_ref()).is_some() => {
                return Err(PgError::unsupported("deferrable primary keys"));
            }
            TableConstraint::Unique(u) => match deferrable(u.characteristics.as_ref()) {
                Some(deferred) => found.push(unique(catalog, table, own, u, deferred)?),
                None => kept.push(table_constraint),
            },
            _ => kept.push(table_constraint),
        }
    }
    create.constraints = kept;
    Ok(found)
}

fn unique(
    catalog: &Catalog,
    table: &str,
    own: &str,
    u: &sqlparser::ast::UniqueConstraint,
    deferred: bool,
) -> Result<DeferrableUnique, PgError> {
    let columns = plain_columns(&u.columns)?;
    let name = u
        .name
        .as_ref()
        .map_or_else(|| format!("{own}_{}_key", columns.join("_")), fold_ident);
    Ok(constraint(catalog, table, name, columns, deferred))
}

/// `ALTER TABLE` that adds or drops a deferrable UNIQUE constraint (its only operation): the steps, or
/// `None` for any other ALTER TABLE.
pub(crate) fn alter(
    catalog: &Catalog,
    table: &str,
    operations: &[AlterTableOperation],
) -> Option<Result<Vec<String>, PgError>> {
    let [operation] = operations else {
        return None;
    };
    match operation {
        AlterTableOperation::AddConstraint {
            constraint: TableConstraint::Unique(u),
            ..
        } => {
            let deferred = deferrable(u.characteristics.as_ref())?;
            let (_, own) = super::schema::schema_of(catalog, table);
            Some(unique(catalog, table, own, u, deferred).map(|c| {
                // The rows must already be unique, as PostgreSQL's index build requires (23505).
                let mut steps = c.create_sql();
                steps.push(c.check_sql());
                steps
            }))
        }
        AlterTableOperation::DropConstraint { name, .. } => {
            let (schema, _) = super::schema::schema_of(catalog, table);
            let sqlite = crate::schemas::sqlite_name(&schema, &fold_ident(name));
            let found = catalog
                .deferrable_uniques()
                .iter()
                .find(|c| c.name == sqlite && c.table.eq_ignore_ascii_case(table))?;
            let mode = if found.initially_deferred { 'd' } else { 'i' };
            Some(Ok(vec![
                format!(
                    "DROP TRIGGER {}",
                    quote_ident(&format!("{TRIGGER_PREFIX}{mode}_ins:{}", found.name))
                ),
                format!(
                    "DROP TRIGGER {}",
                    quote_ident(&format!("{TRIGGER_PREFIX}{mode}_upd:{}", found.name))
                ),
                format!("DROP INDEX {}", quote_ident(&found.name)),
            ]))
        }
        _ => None,
    }
}
