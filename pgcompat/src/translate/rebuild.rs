//! `ALTER TABLE` forms SQLite cannot do in place (ALTER COLUMN TYPE / SET|DROP DEFAULT / SET|DROP NOT NULL,
//! ADD|DROP CONSTRAINT, an ADD COLUMN SQLite's own refuses: see [`adds_what_sqlite_cannot`]), done the way SQLite
//! documents: a new table with the changed definition, the rows
//! copied (converted to a new type where one changes), the old table dropped, the new one renamed, its
//! indexes and triggers made again — all in the one savepoint the compute runs the steps in.
//!
//! Dropping a table that other tables reference would run their `ON DELETE` actions (SQLite deletes the rows
//! first when foreign keys are on). When every referencing key is `NO ACTION` (Django's, Rails's, most ORMs'),
//! the rebuild drops and re-creates the table under its own name with the checks deferred to the commit, so
//! it works inside a transaction block too; otherwise it is marked and the compute runs it with foreign keys
//! off, which SQLite allows only outside a transaction block.

use rusqlite::Connection;
use sqlparser::ast::{
    AlterColumnOperation, AlterTableOperation, ColumnOption, ColumnOptionDef, CreateTable, DataType, Expr, Ident,
    ObjectName, Statement, TableConstraint,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use super::expr::{coerce_call, Rewriter};
use crate::catalog::{self, quote_ident, quote_literal, Catalog};
use crate::error::{PgError, UNDEFINED_OBJECT, UNDEFINED_TABLE};
use crate::types::{Base, PgType, Written};

/// Whether an ALTER TABLE operation needs a rebuild.
pub(crate) fn needs_rebuild(operation: &AlterTableOperation) -> bool {
    matches!(
        operation,
        AlterTableOperation::AlterColumn { .. }
            | AlterTableOperation::AddConstraint { .. }
            | AlterTableOperation::DropConstraint { .. }
            | AlterTableOperation::ValidateConstraint { .. }
    ) || adds_what_sqlite_cannot(operation)
}

/// Whether an `ADD COLUMN` is one SQLite's `ALTER TABLE … ADD COLUMN` refuses (<https://sqlite.org/lang_altertable.html>):
/// a default that is not a literal (`now()`, `gen_random_uuid()`: PostgreSQL evaluates it for each existing row),
/// a generated column (stored), `PRIMARY KEY` or `UNIQUE`, `NOT NULL` without a non-NULL literal default. The
/// rebuild's new table has the column, and its copy of the rows leaves it out, so SQLite evaluates its default
/// (or its expression) for each row as PostgreSQL does.
pub(crate) fn adds_what_sqlite_cannot(operation: &AlterTableOperation) -> bool {
    let AlterTableOperation::AddColumn { column_def, .. } = operation else {
        return false;
    };
    let literal = |e: &Expr| match e {
        Expr::Value(_) => true,
        Expr::UnaryOp { expr, .. } | Expr::Cast { expr, .. } => matches!(expr.as_ref(), Expr::Value(_)),
        _ => false,
    };
    let null = |e: &Expr| {
        matches!(e, Expr::Value(v) if v.value == sqlparser::ast::Value::Null)
            || matches!(e, Expr::Cast { expr, .. } if matches!(expr.as_ref(), Expr::Value(v) if v.value == sqlparser::ast::Value::Null))
    };
    let options = || column_def.options.iter().map(|o| &o.option);
    let serial = matches!(
        column_def.data_type.to_string().to_ascii_lowercase().as_str(),
        "serial" | "serial4" | "bigserial" | "serial8" | "smallserial" | "serial2"
    );
    let default = options().find_map(|o| match o {
        ColumnOption::Default(e) => Some(e),
        _ => None,
    });
    let not_null = options().any(|o| matches!(o, ColumnOption::NotNull));
    serial
        || default.is_some_and(|e| !literal(e))
        || (not_null && default.is_none_or(null))
        || options().any(|o| {
            matches!(
                o,
                ColumnOption::Generated { .. } | ColumnOption::PrimaryKey(_) | ColumnOption::Unique(_)
            )
        })
}

/// The rebuild of `table` with `operations` applied: its SQLite steps, and whether other tables reference it.
pub(crate) struct Rebuild {
    pub(crate) steps: Vec<String>,
    pub(crate) referenced: bool,
}

fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

fn sqlite_type(ty: PgType) -> DataType {
    DataType::Custom(
        ObjectName::from(vec![Ident::new(ty.storage().sqlite_type())]),
        Vec::new(),
    )
}

fn internal(message: impl std::fmt::Display) -> PgError {
    PgError::new(crate::error::INTERNAL_ERROR, format!("rebuilding a table: {message}"))
}

/// Plans the rebuild.
pub(crate) fn rebuild(
    conn: &Connection,
    catalog: &Catalog,
    table: &str,
    operations: &mut [AlterTableOperation],
) -> Result<Rebuild, PgError> {
    plan(conn, catalog, table, Edit::Operations(operations))
}

/// Plans the rebuild of `table` without its foreign keys to `referenced` (`DROP TABLE referenced CASCADE`
/// drops them, as PostgreSQL drops the constraints that depend on a dropped table).
pub(crate) fn drop_references(
    conn: &Connection,
    catalog: &Catalog,
    table: &str,
    referenced: &str,
) -> Result<Rebuild, PgError> {
    plan(conn, catalog, table, Edit::DropReferencesTo(referenced))
}

/// What a rebuild changes in the table's definition.
enum Edit<'a> {
    /// ALTER TABLE operations.
    Operations(&'a mut [AlterTableOperation]),
    /// Every foreign key (table constraint or column `REFERENCES`) to this table removed.
    DropReferencesTo(&'a str),
}

fn references(foreign_table: &ObjectName, referenced: &str) -> bool {
    foreign_table
        .0
        .last()
        .and_then(|part| part.as_ident())
        .is_some_and(|ident| ident.value.eq_ignore_ascii_case(referenced))
}

fn drop_references_to(create: &mut CreateTable, referenced: &str) {
    create
        .constraints
        .retain(|c| !matches!(c, TableConstraint::ForeignKey(fk) if references(&fk.foreign_table, referenced)));
    for column in &mut create.columns {
        column.options.retain(
            |option| !matches!(&option.option, ColumnOption::ForeignKey(fk) if references(&fk.foreign_table, referenced)),
        );
    }
}

fn plan(conn: &Connection, catalog: &Catalog, table: &str, edit: Edit<'_>) -> Result<Rebuild, PgError> {
    let sql: Option<String> = conn
        .query_row(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE NOCASE",
            [table],
            |row| row.get(0),
        )
        .ok();
    let Some(sql) = sql else {
        return Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{table}\" does not exist"),
        ));
    };
    let mut parsed = Parser::parse_sql(&SQLiteDialect {}, &sql).map_err(internal)?;
    let Some(Statement::CreateTable(mut create)) = parsed.pop() else {
        return Err(internal("the table's definition is not a CREATE TABLE"));
    };
    let columns: Vec<String> = create.columns.iter().map(|c| c.name.value.clone()).collect();
    let mut copies: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
    let mut records = Vec::new();
    // Steps before the swap: the sequence of a serial column being added, which its default reads.
    let mut prelude = Vec::new();
    // Columns added with a value the copy computes for each row (a serial column's `nextval`, which SQLite
    // would not evaluate as a default: the layer's INSERTs write it themselves).
    let mut added: Vec<(String, String)> = Vec::new();
    let mut rewriter = Rewriter::new(catalog);
    rewriter.typer.scopes.push(super::expr::Scope::of_table(table));
    match edit {
        Edit::Operations(operations) => {
            for operation in operations.iter_mut() {
                apply(
                    conn,
                    &mut rewriter,
                    (&mut prelude, &mut added),
                    catalog,
                    table,
                    &mut create,
                    &columns,
                    &mut copies,
                    &mut records,
                    operation,
                )?;
            }
        }
        Edit::DropReferencesTo(referenced) => drop_references_to(&mut create, referenced),
    }
    // A generated column is computed by the new table, never copied (SQLite refuses a value for one); a column
    // added by the edit is not among `columns`, so its default fills it.
    let (columns, copies): (Vec<String>, Vec<String>) = columns
        .into_iter()
        .zip(copies)
        .filter(|(name, _)| {
            !create.columns.iter().any(|c| {
                c.name.value.eq_ignore_ascii_case(name)
                    && c.options
                        .iter()
                        .any(|o| matches!(o.option, ColumnOption::Generated { .. }))
            })
        })
        .unzip();
    let (columns, copies): (Vec<String>, Vec<String>) = (
        columns
            .into_iter()
            .chain(added.iter().map(|(c, _)| c.clone()))
            .collect(),
        copies.into_iter().chain(added.into_iter().map(|(_, v)| v)).collect(),
    );
    let temporary = format!("_cambium_rebuild_{}", table.to_ascii_lowercase());
    let again = indexes_and_triggers(conn, table)?;
    let referenced = Referenced::of(conn, table);
    let mut steps = prelude;
    steps.extend(if referenced == Referenced::WithoutActions {
        swap_deferred(create, table, &temporary, &columns, &copies)
    } else {
        swap_renamed(create, table, &temporary, &columns, &copies)
    });
    steps.extend(again);
    steps.extend(records);
    Ok(Rebuild {
        steps,
        referenced: referenced == Referenced::WithActions,
    })
}

/// How other tables reference the rebuilt one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Referenced {
    /// No other table references it.
    No,
    /// Only by foreign keys with `ON DELETE NO ACTION`: their checks can wait for the new table.
    WithoutActions,
    /// By a foreign key whose `ON DELETE` acts (CASCADE, SET NULL, SET DEFAULT) or checks at once (RESTRICT):
    /// dropping the old table would run it, so foreign keys must be off.
    WithActions,
}

impl Referenced {
    fn of(conn: &Connection, table: &str) -> Referenced {
        let actions: Result<Vec<String>, rusqlite::Error> = conn
            .prepare(
                "SELECT f.on_delete FROM sqlite_schema AS s, pragma_foreign_key_list(s.name) AS f \
                 WHERE s.type = 'table' AND f.\"table\" = ?1 COLLATE NOCASE AND s.name <> ?1 COLLATE NOCASE",
            )
            .and_then(|mut stmt| stmt.query_map([table], |row| row.get::<_, String>(0))?.collect());
        match actions {
            Ok(actions) if actions.is_empty() => Referenced::No,
            Ok(actions) if actions.iter().all(|a| a.eq_ignore_ascii_case("NO ACTION")) => Referenced::WithoutActions,
            // Unknown counts as the careful case.
            _ => Referenced::WithActions,
        }
    }
}

/// The table's indexes and triggers, made again after the swap (SQLite drops them with the table).
fn indexes_and_triggers(conn: &Connection, table: &str) -> Result<Vec<String>, PgError> {
    let mut stmt = conn
        .prepare(
            "SELECT sql FROM sqlite_schema WHERE tbl_name = ?1 COLLATE NOCASE AND type IN ('index', 'trigger') \
             AND sql IS NOT NULL",
        )
        .map_err(internal)?;
    let rows = stmt
        .query_map([table], |row| row.get::<_, String>(0))
        .map_err(internal)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(internal)
}

/// `INSERT INTO into (columns) SELECT values FROM from`; `from` is SQL (quoted by the caller).
fn copy_rows(into: &str, from: &str, columns: &[String], values: &[String]) -> String {
    format!(
        "INSERT INTO {} ({}) SELECT {} FROM {from}",
        quote_ident(into),
        columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", "),
        values.join(", "),
    )
}

/// The swap of SQLite's documented procedure (the indexes, triggers and records follow it): the new definition under a temporary name, the rows copied, the old table
/// dropped, the new one renamed. Dropping a referenced table runs its referencing keys' `ON DELETE` actions,
/// so when it is referenced the compute runs these steps with foreign keys off.
fn swap_renamed(
    mut create: CreateTable,
    table: &str,
    temporary: &str,
    columns: &[String],
    copies: &[String],
) -> Vec<String> {
    create.name = ObjectName::from(vec![Ident::with_quote('"', temporary.to_owned())]);
    vec![
        Statement::CreateTable(create).to_string(),
        copy_rows(temporary, &quote_ident(table), columns, copies),
        format!("DROP TABLE {}", quote_ident(table)),
        // Views (and triggers) that read the table name it, not the temporary table: the rename must leave
        // them as they are (SQLite's own procedure for a generalized ALTER TABLE), not check them against a
        // schema in which the table is missing for that moment.
        "PRAGMA legacy_alter_table = ON".to_owned(),
        format!(
            "ALTER TABLE {} RENAME TO {}",
            quote_ident(temporary),
            quote_ident(table)
        ),
        "PRAGMA legacy_alter_table = OFF".to_owned(),
    ]
}

/// The swap for a table referenced only by `ON DELETE NO ACTION` keys, which works inside a transaction
/// block (where SQLite cannot switch foreign keys off): the rows kept aside in a temporary table, the old
/// table dropped and the new one created under the same name (no rename, so the referencing keys keep
/// naming it), the rows copied back. With the checks deferred to the commit, dropping the old table counts
/// the referencing rows as violations and inserting their keys into the new table counts them off again:
/// a key the new table lacks fails the commit, never silently.
fn swap_deferred(
    create: CreateTable,
    table: &str,
    temporary: &str,
    columns: &[String],
    copies: &[String],
) -> Vec<String> {
    let aside = format!(
        "CREATE TEMP TABLE {} AS SELECT {} FROM {}",
        quote_ident(temporary),
        copies
            .iter()
            .zip(columns)
            .map(|(value, column)| format!("{value} AS {}", quote_ident(column)))
            .collect::<Vec<_>>()
            .join(", "),
        quote_ident(table)
    );
    let identity: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
    vec![
        // In the connection's temporary database: the rows kept aside never reach the WAL.
        aside,
        // Reset by SQLite at the end of the transaction.
        "PRAGMA defer_foreign_keys = ON".to_owned(),
        format!("DROP TABLE {}", quote_ident(table)),
        Statement::CreateTable(create).to_string(),
        copy_rows(table, &format!("temp.{}", quote_ident(temporary)), columns, &identity),
        format!("DROP TABLE temp.{}", quote_ident(temporary)),
    ]
}

#[allow(clippy::too_many_arguments)]
fn apply(
    conn: &Connection,
    rewriter: &mut Rewriter<'_>,
    (prelude, added): (&mut Vec<String>, &mut Vec<(String, String)>),
    catalog: &Catalog,
    table: &str,
    create: &mut CreateTable,
    columns: &[String],
    copies: &mut [String],
    records: &mut Vec<String>,
    operation: &mut AlterTableOperation,
) -> Result<(), PgError> {
    match operation {
        AlterTableOperation::AlterColumn { column_name, op } => {
            let name = fold(column_name);
            let index = columns
                .iter()
                .position(|c| c.eq_ignore_ascii_case(&name))
                .ok_or_else(|| {
                    PgError::new(
                        crate::error::UNDEFINED_COLUMN,
                        format!("column \"{name}\" of relation \"{table}\" does not exist"),
                    )
                })?;
            let current = catalog.column_type(table, &name);
            let def = &mut create.columns[index];
            match op {
                AlterColumnOperation::SetNotNull => {
                    if !def.options.iter().any(|o| matches!(o.option, ColumnOption::NotNull)) {
                        def.options.push(ColumnOptionDef {
                            name: None,
                            option: ColumnOption::NotNull,
                        });
                    }
                }
                AlterColumnOperation::DropNotNull => {
                    let primary = def
                        .options
                        .iter()
                        .any(|o| matches!(o.option, ColumnOption::PrimaryKey(_)));
                    if !primary {
                        def.options.retain(|o| !matches!(o.option, ColumnOption::NotNull));
                    }
                }
                AlterColumnOperation::SetDefault { value } => {
                    rewriter.rewrite_expr(value)?;
                    let value = match current {
                        Some(ty) => coerce_call(value.clone(), ty),
                        None => value.clone(),
                    };
                    def.options.retain(|o| !matches!(o.option, ColumnOption::Default(_)));
                    def.options.push(ColumnOptionDef {
                        name: None,
                        option: ColumnOption::Default(Expr::Nested(Box::new(value))),
                    });
                }
                AlterColumnOperation::DropDefault => {
                    def.options.retain(|o| !matches!(o.option, ColumnOption::Default(_)));
                }
                AlterColumnOperation::SetDataType { data_type, using, .. } => {
                    let ty = match super::enums::resolve(catalog, data_type) {
                        Written::Type(ty) => ty,
                        Written::Custom(n) => {
                            return Err(PgError::new(UNDEFINED_OBJECT, format!("type \"{n}\" does not exist")))
                        }
                        _ => return Err(PgError::unsupported(format!("ALTER COLUMN … TYPE {data_type}"))),
                    };
                    def.data_type = sqlite_type(ty);
                    // The default is converted to the new type too, as PostgreSQL converts it.
                    for option in &mut def.options {
                        if let ColumnOption::Default(old) = &mut option.option {
                            let converted = coerce_call(old.clone(), ty);
                            *old = Expr::Nested(Box::new(converted));
                        }
                    }
                    def.options.retain(|o| !matches!(o.option, ColumnOption::Collation(_)));
                    if ty.base() == Base::Numeric && !ty.is_array() {
                        def.options.push(ColumnOptionDef {
                            name: None,
                            option: ColumnOption::Collation(ObjectName::from(vec![Ident::new(
                                super::ddl::NUMERIC_COLLATION,
                            )])),
                        });
                    }
                    if let Base::Enum(oid) = ty.base() {
                        def.options.push(ColumnOptionDef {
                            name: None,
                            option: ColumnOption::Collation(ObjectName::from(vec![Ident::with_quote(
                                '"',
                                crate::enums::collation_name(oid),
                            )])),
                        });
                    }
                    let source = match using {
                        Some(expr) => {
                            rewriter.rewrite_expr(expr)?;
                            expr.to_string()
                        }
                        None => quote_ident(&columns[index]),
                    };
                    copies[index] = format!("pg_coerce({source}, {})", quote_literal(&ty.catalog_text()));
                    records.push(catalog::record_column(table, &name, ty));
                }
                other => return Err(PgError::unsupported(format!("ALTER COLUMN … {other}"))),
            }
        }
        AlterTableOperation::AddConstraint { constraint, .. } => {
            if let TableConstraint::Check(check) = constraint {
                rewriter.rewrite_expr(check.expr.as_mut())?;
            }
            match constraint {
                TableConstraint::Unique(u) => u.characteristics = None,
                // `REFERENCES app.t`: SQLite's foreign keys name a table of the same database, by its
                // SQLite name.
                TableConstraint::ForeignKey(fk) => {
                    let referenced = super::schema::existing(rewriter.typer.catalog, &fk.foreign_table)?;
                    fk.foreign_table = ObjectName::from(vec![Ident::with_quote('"', referenced)]);
                }
                TableConstraint::Check(_) | TableConstraint::PrimaryKey(_) => {}
                other => return Err(PgError::unsupported(format!("ADD CONSTRAINT {other}"))),
            }
            create.constraints.push(constraint.clone());
        }
        AlterTableOperation::DropConstraint { name, if_exists, .. } => {
            let wanted = fold(name);
            let before = create.constraints.len();
            create
                .constraints
                .retain(|c| constraint_name(c).is_none_or(|n| n != wanted));
            if create.constraints.len() == before && !*if_exists {
                return Err(PgError::new(
                    UNDEFINED_OBJECT,
                    format!("constraint \"{wanted}\" of relation \"{table}\" does not exist"),
                ));
            }
        }
        // Constraints are checked when added; there is nothing left to validate.
        AlterTableOperation::ValidateConstraint { .. } => {}
        AlterTableOperation::AddColumn {
            if_not_exists,
            column_def,
            ..
        } => {
            let name = fold(&column_def.name);
            let present = create.columns.iter().any(|c| c.name.value.eq_ignore_ascii_case(&name));
            if present && *if_not_exists {
                return Ok(());
            }
            if present {
                return Err(PgError::new(
                    crate::error::DUPLICATE_COLUMN,
                    format!("column \"{name}\" of relation \"{table}\" already exists"),
                ));
            }
            let column = super::ddl::column_type(catalog, column_def)?;
            // A serial column: its sequence made first; the copy fills the existing rows from it in order.
            let sequence = match &column.generator {
                None => None,
                Some(generator) if generator.identity.is_empty() => {
                    let (sequence, steps) =
                        super::sequence::column_sequence(conn, table, &name, column.ty, &generator.options, None, "")?;
                    prelude.extend(steps);
                    added.push((name.clone(), super::sequence::nextval_default(&sequence).to_string()));
                    Some(sequence)
                }
                Some(_) => return Err(PgError::unsupported("adding an identity column")),
            };
            let rendered = super::ddl::render_column(rewriter, table, column_def, &column, false, sequence.as_deref())?;
            let mut parsed =
                Parser::parse_sql(&SQLiteDialect {}, &format!("CREATE TABLE x ({rendered})")).map_err(internal)?;
            let Some(Statement::CreateTable(mut made)) = parsed.pop() else {
                return Err(internal("the new column's definition"));
            };
            let Some(def) = made.columns.pop() else {
                return Err(internal("the new column's definition"));
            };
            // Not among the copied columns: the new table's default (or expression) fills it row by row.
            create.columns.push(def);
            records.push(catalog::record_column(table, &name, column.ty));
        }
        other => return Err(PgError::unsupported(format!("ALTER TABLE … {other}"))),
    }
    Ok(())
}

fn constraint_name(constraint: &TableConstraint) -> Option<String> {
    let name = match constraint {
        TableConstraint::Unique(c) => c.name.as_ref(),
        TableConstraint::PrimaryKey(c) => c.name.as_ref(),
        TableConstraint::ForeignKey(c) => c.name.as_ref(),
        TableConstraint::Check(c) => c.name.as_ref(),
        _ => None,
    };
    name.map(fold)
}
