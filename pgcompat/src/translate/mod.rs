//! A PostgreSQL query text translated to SQLite statements: parsed with `sqlparser`'s PostgreSQL dialect,
//! each statement rewritten (expressions in `expr`, DDL in `ddl`, names in `names`), with what the
//! caller needs to run it and type its results.

mod alter;
pub(crate) mod catalog_refs;
pub(crate) mod comment;
pub(crate) mod create_as;
mod cte_columns;
pub mod cursor;
pub(crate) mod ddl;
mod deferrable;
pub(crate) mod dependents;
pub(crate) mod distinct_on;
mod dml;
pub(crate) mod enums;
pub(crate) mod expr;
pub(crate) mod grouping_sets;
pub(crate) mod identity;
mod indexes;
mod lateral;
mod lateral_srf;
mod lock;
mod maintenance;
pub mod modifying_cte;
pub(crate) mod names;
mod prepare;
pub(crate) mod query_rules;
pub(crate) mod rebuild;
pub(crate) mod routines;
pub(crate) mod schema;
mod schema_move;
pub(crate) mod sequence;
pub(crate) mod srf;
pub(crate) mod tables;
pub(crate) mod token_forms;
mod translation;
pub(crate) mod unparsed;
pub(crate) mod upsert;
mod vectors;
mod view_source;
pub(crate) mod walk;

#[cfg(test)]
mod tests;

use rusqlite::Connection;
use sqlparser::ast::{
    Assignment, AssignmentTarget, BeginTransactionKind, Expr, FromTable, Insert, ObjectType, Query, SelectItem,
    SetExpr, Statement, TableFactor, TableObject, Value, ValueWithSpan,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::{quote_ident, Catalog};
use crate::error::PgError;
use crate::types::PgType;
use dml::{
    coerce_assignments, defaults_of_assignments, delete_using, item_types, output_types, param_columns, rewrite_update,
    translate_insert,
};
use expr::{coerce_call, last_part, Rewriter, Scope, Typer};
pub use translation::{Capture, Kind, Translated, Translation};

/// Translates a query text (one or several statements) against the catalog.
pub fn translate(conn: &Connection, catalog: &Catalog, sql: &str) -> Result<Translated, PgError> {
    if let Some(fetch) = cursor::parse_fetch(sql) {
        return Ok(Translated::Statements(vec![fetch?]));
    }
    if let Some(maintenance) = maintenance::parse(sql) {
        return Ok(Translated::Statements(vec![maintenance]));
    }
    if let Some(lock) = lock::parse(conn, catalog, sql) {
        return Ok(Translated::Statements(vec![lock?]));
    }
    let statements = match Parser::parse_sql(&PostgreSqlDialect {}, sql) {
        Ok(statements) => statements,
        Err(_) => {
            if let Some(rewritten) = token_forms::rewrite(sql) {
                return translate(conn, catalog, &rewritten);
            }
            return Ok(match unparsed::translate(conn, catalog, sql)? {
                Some(translation) => Translated::Statements(vec![translation]),
                None => Translated::Passthrough,
            });
        }
    };
    let mut out = Vec::with_capacity(statements.len());
    // The catalog as the text's own DDL leaves it, for the statements after it (`CREATE TYPE` then a table
    // with a column of the type, in one text).
    let mut local = std::borrow::Cow::Borrowed(catalog);
    for statement in statements {
        if let Statement::CreateType { name, representation } = &statement {
            let (translation, created) = enums::create(conn, &local, name, representation.as_ref())?;
            crate::functions::enums::register_collation(conn, &created)
                .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("registering a collation: {e}")))?;
            local.to_mut().add_enum(created);
            out.push(translation);
            continue;
        }
        // A relation the statement makes is found by the statements after it (unqualified names resolve
        // through the search_path against the relations that exist).
        let created = schema::created_relation(&local, &statement);
        match translate_statement(conn, &local, statement)? {
            Some(translation) => out.push(translation),
            None => return Ok(Translated::Passthrough),
        }
        if let Some((name, kind)) = created {
            local.to_mut().add_relation(&name, kind);
        }
    }
    // Any statement (a query, or DML with a subquery) may read the catalog views: they are made now.
    if out
        .iter()
        .any(|t| t.steps.iter().any(|s| catalog_refs::reads_catalog(s)))
    {
        crate::pg_catalog::ensure(conn)
            .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("making the catalog views: {e}")))?;
    }
    Ok(Translated::Statements(out))
}

/// A translation the session carries out itself (no SQLite statement).
fn bare(kind: Kind) -> Translation {
    let mut t = Translation::single(String::new(), kind);
    t.steps.clear();
    t
}

/// `COPY … FROM STDIN` or `COPY … TO STDOUT`, for the session to carry out.
fn copy_statement(
    source: &sqlparser::ast::CopySource,
    to: bool,
    target: &sqlparser::ast::CopyTarget,
    options: &[sqlparser::ast::CopyOption],
    legacy: &[sqlparser::ast::CopyLegacyOption],
) -> Result<Translation, PgError> {
    use sqlparser::ast::{CopySource, CopyTarget};
    let options = crate::copy::Options::from_statement(options, legacy)?;
    let kind = match (source, to, target) {
        (_, false, CopyTarget::File { .. } | CopyTarget::Program { .. }) => {
            return Err(crate::copy::refuse_server_side("FROM"))
        }
        (_, true, CopyTarget::File { .. } | CopyTarget::Program { .. }) => {
            return Err(crate::copy::refuse_server_side("TO"))
        }
        (CopySource::Table { table_name, columns }, false, CopyTarget::Stdin) => Kind::CopyFrom {
            table: table_name.to_string(),
            columns: columns.iter().map(ToString::to_string).collect(),
            options,
        },
        (CopySource::Table { table_name, columns }, true, CopyTarget::Stdout) => {
            let list = if columns.is_empty() {
                "*".to_owned()
            } else {
                columns.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            };
            Kind::CopyTo {
                query: format!("SELECT {list} FROM {table_name}"),
                options,
            }
        }
        (CopySource::Query(query), true, CopyTarget::Stdout) => Kind::CopyTo {
            query: query.to_string(),
            options,
        },
        (CopySource::Query(_), false, _) => {
            return Err(PgError::new(
                crate::error::SYNTAX_ERROR,
                "COPY FROM takes a table, not a query",
            ))
        }
        _ => {
            return Err(PgError::new(
                crate::error::SYNTAX_ERROR,
                "COPY FROM goes with STDIN, COPY TO with STDOUT",
            ))
        }
    };
    let mut t = Translation::single(String::new(), kind);
    t.steps.clear();
    Ok(t)
}

/// `DROP TABLE … CASCADE`'s steps after what depends on the tables goes: the views that read them, and the
/// other tables' foreign keys to them (those tables rebuilt without them).
fn drop_with_dependents(
    conn: &Connection,
    catalog: &Catalog,
    plan: dependents::DropPlan,
    drop: Translation,
) -> Result<Translation, PgError> {
    if plan == dependents::DropPlan::default() {
        return Ok(drop);
    }
    let views: Vec<sqlparser::ast::ObjectName> = plan
        .views
        .iter()
        .map(|v| sqlparser::ast::ObjectName::from(vec![sqlparser::ast::Ident::with_quote('"', v.clone())]))
        .collect();
    let mut steps = Vec::new();
    if !views.is_empty() {
        steps.extend(ddl::drop(catalog, ObjectType::View, true, &views, false)?.steps);
    }
    let mut foreign_keys_off = drop.foreign_keys_off;
    for (table, referenced) in &plan.references {
        let rebuilt = rebuild::drop_references(conn, catalog, table, referenced)?;
        foreign_keys_off |= rebuilt.referenced;
        steps.extend(rebuilt.steps);
    }
    steps.extend(drop.steps);
    Ok(Translation {
        steps,
        foreign_keys_off,
        ..drop
    })
}

/// One statement; `None` when the layer does not handle its kind and the text goes to SQLite as written.
fn translate_statement(
    conn: &Connection,
    catalog: &Catalog,
    mut statement: Statement,
) -> Result<Option<Translation>, PgError> {
    let translation = match &mut statement {
        Statement::Query(query) => {
            if modifying_cte::has_modifying_cte(query) {
                return modifying_cte::translate(conn, catalog, (**query).clone()).map(Some);
            }
            // `TABLE t` is `SELECT * FROM t`.
            if let SetExpr::Table(table) = query.body.as_ref() {
                let name = match (&table.schema_name, &table.table_name) {
                    (Some(schema), Some(name)) => format!("{schema}.{name}"),
                    (None, Some(name)) => name.to_string(),
                    _ => return Err(PgError::new(crate::error::SYNTAX_ERROR, "TABLE without a table")),
                };
                let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &format!("SELECT * FROM {name}"))
                    .map_err(|e| PgError::new(crate::error::SYNTAX_ERROR, e.to_string()))?;
                if let Some(Statement::Query(select)) = parsed.into_iter().next() {
                    query.body = select.body;
                }
            }
            // Row locks: SQLite transactions are serializable and a writer excludes every other writer, so
            // FOR UPDATE/SHARE add nothing (a conflicting writer gets 40001 at its commit).
            query.locks.clear();
            check_query_grouping(conn, query.body.as_ref())?;
            cte_columns::complete_column_lists(query)?;
            names::name_columns(query);
            // After naming: a lateral's column keeps its name when its reference becomes a subquery.
            lateral::rewrite(query)?;
            distinct_on::rewrite(query)?;
            grouping_sets::rewrite(query)?;
            names::name_columns(query);
            cte_columns::expand_repeated_names(query);
            let mut rewriter = Rewriter::new(catalog);
            rewriter.rewrite_query(query.as_mut())?;
            query_rules::type_set_operation_literals(catalog, query);
            if rewriter.uses_catalog {
                catalog_refs::name_outputs(query);
            }
            // The derived tables' and CTEs' column types, as the rewrite found them.
            let columns = output_types(catalog, query, &rewriter.typer.ctes);
            Translation {
                steps: vec![query.to_string()],
                primary: 0,
                columns,
                params: rewriter.params,
                kind: Kind::Select,
                uses_now: rewriter.uses_now,
                foreign_keys_off: false,
                param_columns: param_columns(query),
                captures: Vec::new(),
            }
        }
        Statement::Insert(insert) => {
            // OVERRIDING: checked against the identity columns, then SQLite takes the values as given.
            let overriding = insert.overriding.take();
            translate_insert(conn, catalog, insert, overriding)?
        }
        Statement::Update(update) => {
            let (table, alias) = match &mut update.table.relation {
                TableFactor::Table {
                    name,
                    alias,
                    inheritance,
                    ..
                } => {
                    // `UPDATE ONLY t`: no table inherits from another.
                    *inheritance = None;
                    schema::rewrite_relation(catalog, name, alias, &[])?;
                    // SQLite wants `AS` before an UPDATE's alias.
                    if let Some(alias) = alias {
                        alias.explicit = true;
                    }
                    (last_part(name), alias.as_ref().map(|a| a.name.value.clone()))
                }
                other => return Err(PgError::unsupported(format!("UPDATE of {other}"))),
            };
            if let Some(returning) = &mut update.returning {
                names::name_items(returning);
            }
            if let Some(
                sqlparser::ast::UpdateTableFromKind::AfterSet(tables)
                | sqlparser::ast::UpdateTableFromKind::BeforeSet(tables),
            ) = &mut update.from
            {
                schema::rewrite_from_items(catalog, tables)?;
            }
            let from: Vec<sqlparser::ast::TableWithJoins> = match &update.from {
                Some(
                    sqlparser::ast::UpdateTableFromKind::AfterSet(tables)
                    | sqlparser::ast::UpdateTableFromKind::BeforeSet(tables),
                ) => tables.clone(),
                None => Vec::new(),
            };
            let mut rewriter = Rewriter::new(catalog);
            rewriter
                .typer
                .scopes
                .push(Scope::of_target(&table, alias.as_deref(), &from));
            identity::check_identity_update(catalog, &table, &update.assignments)?;
            rewrite_update(&mut rewriter, update)?;
            defaults_of_assignments(conn, &table, &mut update.assignments);
            coerce_assignments(&mut rewriter, catalog, &table, &mut update.assignments);
            let columns = update.returning.as_ref().map(|r| item_types(&rewriter.typer, r));
            Translation {
                steps: vec![statement.to_string()],
                primary: 0,
                columns,
                params: rewriter.params,
                kind: Kind::Update,
                uses_now: rewriter.uses_now,
                foreign_keys_off: false,
                param_columns: Vec::new(),
                captures: Vec::new(),
            }
        }
        Statement::Delete(delete) => {
            let tables = match &mut delete.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
            };
            let (table, alias) = match tables.first_mut().map(|t| &mut t.relation) {
                Some(TableFactor::Table {
                    name,
                    alias,
                    inheritance,
                    ..
                }) => {
                    *inheritance = None;
                    schema::rewrite_relation(catalog, name, alias, &[])?;
                    if let Some(alias) = alias {
                        alias.explicit = true;
                    }
                    (last_part(name), alias.as_ref().map(|a| a.name.value.clone()))
                }
                _ => return Err(PgError::unsupported("this DELETE form")),
            };
            if let Some(using) = delete.using.take() {
                delete.selection = Some(delete_using(&table, alias.as_deref(), &using, delete.selection.take())?);
            }
            if let Some(returning) = &mut delete.returning {
                names::name_items(returning);
            }
            let mut rewriter = Rewriter::new(catalog);
            rewriter
                .typer
                .scopes
                .push(Scope::of_target(&table, alias.as_deref(), &[]));
            if let Some(selection) = &mut delete.selection {
                rewriter.rewrite_expr(selection)?;
            }
            if let Some(returning) = &mut delete.returning {
                rewriter.rewrite_returning(returning, alias.as_deref().unwrap_or(&table))?;
            }
            let columns = delete.returning.as_ref().map(|r| item_types(&rewriter.typer, r));
            Translation {
                steps: vec![statement.to_string()],
                primary: 0,
                columns,
                params: rewriter.params,
                kind: Kind::Delete,
                uses_now: rewriter.uses_now,
                foreign_keys_off: false,
                param_columns: Vec::new(),
                captures: Vec::new(),
            }
        }
        Statement::CreateTable(create) if create.query.is_some() => create_as::create_table_as(conn, catalog, create)?,
        Statement::CreateTable(create) => ddl::create_table(conn, catalog, create)?,
        Statement::AlterTable(alter) => alter::alter_table(conn, catalog, alter, None)?,
        Statement::Drop {
            object_type,
            if_exists,
            names,
            cascade,
            ..
        } => {
            if *object_type == ObjectType::Schema {
                return Ok(Some(schema::drop(catalog, names, *if_exists, *cascade)?));
            }
            if *object_type == ObjectType::Table {
                let tables = names
                    .iter()
                    .map(|n| ddl::table_name(catalog, n))
                    .collect::<Result<Vec<_>, _>>()?;
                let plan = dependents::plan_drop(conn, &tables, *cascade)?;
                drop_with_dependents(
                    conn,
                    catalog,
                    plan,
                    ddl::drop(catalog, *object_type, *if_exists, names, *cascade)?,
                )?
            } else {
                ddl::drop(catalog, *object_type, *if_exists, names, *cascade)?
            }
        }
        Statement::CreateIndex(index) => indexes::create_index(catalog, index)?,
        Statement::AlterIndex {
            name,
            operation: sqlparser::ast::AlterIndexOperation::RenameIndex { index_name },
        } => {
            let index = ddl::table_name(catalog, name)?;
            let to = indexes::renamed(catalog, &index, index_name)?;
            indexes::rename_index(conn, &index, &to, false)?
        }
        Statement::CreateView(view) => ddl::create_view(catalog, view)?,
        Statement::Truncate(truncate) => {
            let tables = truncate
                .table_names
                .iter()
                .map(|target| ddl::table_name(catalog, &target.name))
                .collect::<Result<Vec<_>, _>>()?;
            let cascade = matches!(truncate.cascade, Some(sqlparser::ast::CascadeOption::Cascade));
            let emptied = dependents::truncate_order(conn, &tables, cascade)?;
            let mut steps: Vec<String> = emptied
                .iter()
                .map(|name| format!("DELETE FROM {}", quote_ident(name)))
                .collect();
            // RESTART IDENTITY: the sequences the emptied tables' columns own start again (as `ALTER
            // SEQUENCE … RESTART` does: the next value is the start).
            if matches!(truncate.identity, Some(sqlparser::ast::TruncateIdentityOption::Restart)) {
                for table in &emptied {
                    for sequence in catalog.owned_sequences(table, None) {
                        steps.push(format!(
                            "UPDATE _cambium_sequences SET last_value = start_value, is_called = 0 WHERE name = {}",
                            crate::catalog::quote_literal(&sequence.name)
                        ));
                    }
                }
            }
            let mut t = Translation::single(String::new(), Kind::Other("TRUNCATE TABLE".to_owned()));
            t.steps = steps;
            t
        }
        Statement::StartTransaction {
            modes,
            transaction,
            modifier: None,
            statements,
            ..
        } if statements.is_empty() => {
            if matches!(
                transaction,
                Some(BeginTransactionKind::Transaction | BeginTransactionKind::Work) | None
            ) {
                let modes = crate::settings::command::transaction_modes(modes);
                Translation::single("BEGIN".to_owned(), Kind::Begin { modes })
            } else {
                return Ok(None);
            }
        }
        Statement::Commit { chain: false, .. } => Translation::single("COMMIT".to_owned(), Kind::Commit),
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => Translation::single("ROLLBACK".to_owned(), Kind::Rollback),
        Statement::Rollback {
            chain: false,
            savepoint: Some(name),
        } => Translation::single(format!("ROLLBACK TO {}", quote_ident(&name.value)), Kind::RollbackTo),
        Statement::Savepoint { name } => Translation::single(
            format!("SAVEPOINT {}", quote_ident(&name.value)),
            Kind::Other("SAVEPOINT".to_owned()),
        ),
        Statement::ReleaseSavepoint { name } => Translation::single(
            format!("RELEASE {}", quote_ident(&name.value)),
            Kind::Other("RELEASE".to_owned()),
        ),
        Statement::CreateSchema {
            schema_name,
            if_not_exists,
            ..
        } => schema::create(catalog, schema_name, *if_not_exists)?,
        Statement::AlterSchema(alter) => schema::alter(conn, catalog, alter)?,
        Statement::CreateExtension(ext) => {
            let name = ext.name.value.to_ascii_lowercase();
            // The functions these extensions are installed for (`gen_random_uuid`, `uuid_generate_v4`) exist.
            if matches!(name.as_str(), "pgcrypto" | "uuid-ossp" | "plpgsql") {
                Translation::single(
                    "SELECT NULL WHERE 0".to_owned(),
                    Kind::Other("CREATE EXTENSION".to_owned()),
                )
            } else {
                return Err(PgError::unsupported(format!("the extension {name}")));
            }
        }
        Statement::Prepare {
            name,
            data_types,
            statement: inner,
        } => {
            let types = data_types
                .iter()
                .map(expr::written_type)
                .collect::<Result<Vec<_>, _>>()?;
            let source = match data_types.as_slice() {
                [] => format!("PREPARE {name} AS {inner}"),
                declared => {
                    let declared: Vec<String> = declared.iter().map(ToString::to_string).collect();
                    format!("PREPARE {name} ({}) AS {inner}", declared.join(", "))
                }
            };
            let mut t = Translation::single(
                String::new(),
                Kind::Prepare {
                    name: name.value.to_ascii_lowercase(),
                    statement: prepare::typed_statement(inner, data_types),
                    types,
                    source,
                },
            );
            t.steps.clear();
            t
        }
        Statement::Execute {
            name: Some(name),
            parameters,
            using,
            into,
            ..
        } if using.is_empty() && into.is_empty() => {
            let mut t = Translation::single(
                String::new(),
                Kind::Execute {
                    name: last_part(name).to_ascii_lowercase(),
                    args: parameters.iter().map(ToString::to_string).collect(),
                },
            );
            t.steps.clear();
            t
        }
        Statement::Deallocate { name, .. } => {
            let target = (!name.value.eq_ignore_ascii_case("all") || name.quote_style.is_some())
                .then(|| name.value.to_ascii_lowercase());
            let mut t = Translation::single(String::new(), Kind::Deallocate(target));
            t.steps.clear();
            t
        }
        Statement::Declare { stmts, .. } => match cursor::declare(stmts)? {
            Some(t) => t,
            None => return Ok(None),
        },
        Statement::Close { cursor } => cursor::close(cursor),
        Statement::Discard {
            object_type: sqlparser::ast::DiscardObject::SEQUENCES,
        } => {
            // Two steps, so the caller runs them as a command (a one-step SELECT would answer a row).
            let mut t = Translation::single(String::new(), Kind::Other("DISCARD SEQUENCES".to_owned()));
            t.steps = vec![
                "SELECT pg_discard_sequences()".to_owned(),
                "SELECT 1 WHERE 0".to_owned(),
            ];
            t
        }
        Statement::Discard {
            object_type: sqlparser::ast::DiscardObject::ALL,
        } => {
            let mut t = Translation::single(String::new(), Kind::DiscardAll);
            t.steps.clear();
            t
        }
        Statement::Comment {
            object_type,
            object_name,
            comment,
            ..
        } => comment::comment(catalog, *object_type, object_name, comment.as_deref())?,
        Statement::LISTEN { channel } => bare(Kind::Listen(channel.value.clone())),
        Statement::UNLISTEN { channel } => bare(Kind::Unlisten(
            (channel.quote_style.is_some() || channel.value != "*").then(|| channel.value.clone()),
        )),
        Statement::NOTIFY { channel, payload } => bare(Kind::Notify {
            channel: channel.value.clone(),
            payload: payload.clone().unwrap_or_default(),
        }),
        Statement::Explain { .. } | Statement::ExplainTable { .. } => {
            // SQLite's plans are not PostgreSQL's; printing them as if they were would mislead.
            return Err(PgError::unsupported("EXPLAIN"));
        }
        Statement::CreateFunction(create) => routines::create(catalog, create)?,
        Statement::DropFunction(drop) => routines::drop(catalog, drop)?,
        Statement::CreateTrigger(_) => return Err(PgError::unsupported("CREATE TRIGGER in PostgreSQL syntax")),
        Statement::Copy {
            source,
            to,
            target,
            options,
            legacy_options,
            ..
        } => copy_statement(source, *to, target, options, legacy_options)?,
        Statement::CreateSequence {
            temporary,
            if_not_exists,
            name,
            sequence_options,
        } => sequence::create(conn, catalog, name, *if_not_exists, *temporary, sequence_options)?,
        Statement::CreateType { name, representation } => {
            enums::create(conn, catalog, name, representation.as_ref())?.0
        }
        Statement::AlterType(alter) => enums::alter(catalog, alter)?,
        Statement::Grant(_) | Statement::Revoke(_) => {
            let tag = if matches!(statement, Statement::Grant(_)) {
                "GRANT"
            } else {
                "REVOKE"
            };
            // One role exists, owning everything: privileges change nothing.
            Translation::single("SELECT NULL WHERE 0".to_owned(), Kind::Other(tag.to_owned()))
        }
        _ => return Ok(None),
    };
    Ok(Some(translation))
}

/// The grouping rule (`query_rules`) on every SELECT of a query body.
fn check_query_grouping(conn: &Connection, body: &SetExpr) -> Result<(), PgError> {
    match body {
        SetExpr::Select(select) => query_rules::check_grouping(conn, select),
        SetExpr::SetOperation { left, right, .. } => {
            check_query_grouping(conn, left)?;
            check_query_grouping(conn, right)
        }
        SetExpr::Query(q) => check_query_grouping(conn, q.body.as_ref()),
        _ => Ok(()),
    }
}

/// Whether the object type of a DROP is one the layer handles.
pub(crate) fn droppable(object_type: ObjectType) -> bool {
    matches!(object_type, ObjectType::Table | ObjectType::View | ObjectType::Index)
}
