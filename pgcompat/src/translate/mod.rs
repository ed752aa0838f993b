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
mod expand_array;
mod explain;
pub(crate) mod expr;
pub(crate) mod grouping_sets;
pub(crate) mod identity;
mod indexes;
mod lateral;
mod lateral_join;
mod lateral_srf;
mod like;
mod lock;
mod maintenance;
mod matview;
pub mod modifying_cte;
pub(crate) mod names;
mod prepare;
pub(crate) mod query_rules;
pub(crate) mod rebuild;
pub(crate) mod routines;
pub(crate) mod schema;
mod schema_move;
mod select;
pub(crate) mod sequence;
mod set_all;
pub(crate) mod split;
pub(crate) mod srf;
pub(crate) mod tables;
mod tablesample;
pub(crate) mod token_forms;
mod translation;
mod truncate;
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
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::catalog::{quote_ident, Catalog};
use crate::error::PgError;
use crate::types::PgType;
use dml::{output_types, param_columns, translate_insert};
pub use explain::analyzed_plan;
use expr::{coerce_call, last_part, Rewriter, Scope, Typer};
pub use split::split_statements;
pub use translation::{Bound, Capture, Kind, Translated, Translation};

/// Translates a query text (one or several statements) against the catalog.
///
/// The text is tokenized once: its first word picks the forms read from the tokens before the parser
/// (`FETCH`/`MOVE`, `VACUUM`/`ANALYZE`, `LOCK`), and the parser reads the same tokens (tokenizing took four
/// times what parsing did for pgbench's short statements).
pub fn translate(conn: &Connection, catalog: &Catalog, sql: &str) -> Result<Translated, PgError> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql).tokenize_with_location();
    let first_word = tokens.as_ref().ok().and_then(|tokens| first_word(tokens));
    let expands_arrays = tokens.as_ref().is_ok_and(|tokens| {
        tokens
            .iter()
            .any(|t| matches!(&t.token, Token::Word(w) if w.value.eq_ignore_ascii_case("_pg_expandarray")))
    });
    let is = |word: &str| first_word.is_some_and(|first| first.eq_ignore_ascii_case(word));
    if is("fetch") || is("move") {
        if let Some(fetch) = cursor::parse_fetch(sql) {
            return Ok(Translated::Statements(vec![fetch?]));
        }
    }
    if is("vacuum") || is("analyze") || is("analyse") {
        if let Some(maintenance) = maintenance::parse(conn, catalog, sql) {
            return Ok(Translated::Statements(vec![maintenance?]));
        }
    }
    // (In a text of several statements LOCK is read by itself, each statement translated alone.)
    if is("lock") && !tokens.as_ref().is_ok_and(|tokens| split::several_statements(tokens)) {
        if let Some(lock) = lock::parse(conn, catalog, sql) {
            return Ok(Translated::Statements(vec![lock?]));
        }
    }
    let parsed = tokens.map_err(ParserError::from).and_then(|tokens| {
        Parser::new(&dialect)
            .with_tokens_with_locations(tokens)
            .parse_statements()
    });
    let mut statements = match parsed {
        Ok(statements) => statements,
        Err(_) => {
            if let Some(refused) = maintenance::refused_in_a_batch(sql) {
                return Err(refused);
            }
            if let Some(rewritten) = token_forms::rewrite(sql) {
                return translate(conn, catalog, &rewritten);
            }
            return Ok(match unparsed::translate(conn, catalog, sql)? {
                Some(translation) => Translated::Statements(vec![translation]),
                None => Translated::Passthrough,
            });
        }
    };
    if expands_arrays {
        for statement in &mut statements {
            if let Statement::Query(query) = statement {
                expand_array::rewrite(query)?;
            }
        }
    }
    if statements.len() > 1 && statements.iter().any(|s| matches!(s, Statement::Vacuum(_))) {
        // One implicit transaction block, which VACUUM refuses (a lone one is read by `maintenance` above).
        return Err(maintenance::in_a_transaction_block());
    }
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

/// The text's first token past whitespace and comments, if it is an unquoted word.
fn first_word(tokens: &[TokenWithSpan]) -> Option<&str> {
    match tokens
        .iter()
        .map(|t| &t.token)
        .find(|t| !matches!(t, Token::Whitespace(_)))?
    {
        Token::Word(word) if word.quote_style.is_none() => Some(&word.value),
        _ => None,
    }
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
        Statement::Query(query) => select::translate_query(conn, catalog, query)?,
        // `ANALYZE t (a)` among other statements of a text (a lone one is read by `maintenance` first).
        Statement::Analyze(_) => match maintenance::parse(conn, catalog, &statement.to_string()) {
            Some(translation) => translation?,
            None => return Ok(None),
        },
        Statement::Insert(insert) => {
            // OVERRIDING: checked against the identity columns, then SQLite takes the values as given.
            let overriding = insert.overriding.take();
            translate_insert(conn, catalog, insert, overriding)?
        }
        Statement::Update(update) => {
            let rewritten = dml::rewrite_update_statement(conn, catalog, update)?;
            rewritten.into_translation(statement.to_string(), Kind::Update)
        }
        Statement::Delete(delete) => {
            let rewritten = dml::rewrite_delete_statement(catalog, delete)?;
            rewritten.into_translation(statement.to_string(), Kind::Delete)
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
        } => drop_statement(conn, catalog, *object_type, *if_exists, names, *cascade)?,
        Statement::CreateIndex(index) => indexes::create_index(catalog, index)?,
        Statement::AlterIndex {
            name,
            operation: sqlparser::ast::AlterIndexOperation::RenameIndex { index_name },
        } => {
            let index = ddl::table_name(catalog, name)?;
            let to = indexes::renamed(catalog, &index, index_name)?;
            indexes::rename_index(conn, &index, &to, false)?
        }
        Statement::CreateView(view) if view.materialized => matview::create(conn, catalog, view)?,
        Statement::RefreshMaterializedView(refresh) => matview::refresh(conn, catalog, refresh)?,
        Statement::CreateView(view) => ddl::create_view(catalog, view)?,
        Statement::Truncate(truncate) => truncate::truncate(conn, catalog, truncate)?,
        Statement::StartTransaction {
            modes,
            transaction,
            modifier: None,
            statements,
            ..
        } if statements.is_empty() => match transaction {
            Some(BeginTransactionKind::Transaction | BeginTransactionKind::Work) | None => {
                let modes = crate::settings::command::transaction_modes(modes);
                Translation::single("BEGIN".to_owned(), Kind::Begin { modes })
            }
            Some(_) => return Ok(None),
        },
        Statement::Commit { chain: false, .. } => Translation::single("COMMIT".to_owned(), Kind::Commit),
        Statement::Rollback {
            chain: false,
            savepoint,
        } => rollback(savepoint.as_ref()),
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
        Statement::CreateExtension(ext) => create_extension(&ext.name.value, ext.if_not_exists)?,
        Statement::Prepare {
            name,
            data_types,
            statement: inner,
        } => prepare::prepare(name, data_types, inner)?,
        Statement::Execute {
            name: Some(name),
            parameters,
            using,
            into,
            ..
        } if using.is_empty() && into.is_empty() => prepare::execute(name, parameters),
        Statement::Deallocate { name, .. } => prepare::deallocate(name),
        Statement::Declare { stmts, .. } => match cursor::declare(stmts)? {
            Some(t) => t,
            None => return Ok(None),
        },
        Statement::Close { cursor } => cursor::close(cursor),
        Statement::Discard { object_type } => match discard(*object_type) {
            Some(t) => t,
            None => return Ok(None),
        },
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
        // SQLite's plan of the translation, as its own steps (see `explain`).
        Statement::Explain {
            analyze,
            query_plan: false,
            estimate: false,
            statement: inner,
            format,
            options,
            ..
        } => explain::explain(conn, catalog, *analyze, format.as_ref(), options.as_deref(), inner)?,
        Statement::Explain { .. } | Statement::ExplainTable { .. } => return Err(PgError::unsupported("EXPLAIN")),
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
        // One role exists, owning everything: privileges change nothing.
        Statement::Grant(_) => bare(Kind::Other("GRANT".to_owned())),
        Statement::Revoke(_) => bare(Kind::Other("REVOKE".to_owned())),
        _ => return Ok(None),
    };
    Ok(Some(translation))
}

/// `DROP …`: a schema, tables (with what depends on them under CASCADE), or the other droppable objects.
fn drop_statement(
    conn: &Connection,
    catalog: &Catalog,
    object_type: ObjectType,
    if_exists: bool,
    names: &[sqlparser::ast::ObjectName],
    cascade: bool,
) -> Result<Translation, PgError> {
    let what = match object_type {
        ObjectType::Table => Some("table"),
        ObjectType::View => Some("view"),
        ObjectType::Index => Some("index"),
        ObjectType::Sequence => Some("sequence"),
        ObjectType::MaterializedView => Some("materialized view"),
        _ => None,
    };
    let notices = match what {
        Some(what) if if_exists => ddl::missing_notices(conn, catalog, what, names),
        _ => Vec::new(),
    };
    let mut translation = drop_objects(conn, catalog, object_type, if_exists, names, cascade)?;
    translation.notices.extend(notices);
    Ok(translation)
}

/// [`drop_statement`] but for its notices.
fn drop_objects(
    conn: &Connection,
    catalog: &Catalog,
    object_type: ObjectType,
    if_exists: bool,
    names: &[sqlparser::ast::ObjectName],
    cascade: bool,
) -> Result<Translation, PgError> {
    match object_type {
        ObjectType::Schema => schema::drop(catalog, names, if_exists, cascade),
        ObjectType::MaterializedView => matview::drop(conn, catalog, if_exists, names, cascade),
        ObjectType::Table => {
            let tables = names
                .iter()
                .map(|n| ddl::table_name(catalog, n))
                .collect::<Result<Vec<_>, _>>()?;
            let plan = dependents::plan_drop(conn, &tables, cascade)?;
            let drop = ddl::drop(catalog, object_type, if_exists, names, cascade)?;
            drop_with_dependents(conn, catalog, plan, drop)
        }
        _ => ddl::drop(catalog, object_type, if_exists, names, cascade),
    }
}

/// `ROLLBACK`, or `ROLLBACK TO savepoint`.
fn rollback(savepoint: Option<&sqlparser::ast::Ident>) -> Translation {
    match savepoint {
        None => Translation::single("ROLLBACK".to_owned(), Kind::Rollback),
        Some(name) => Translation::single(format!("ROLLBACK TO {}", quote_ident(&name.value)), Kind::RollbackTo),
    }
}

/// `CREATE EXTENSION name`: for an extension whose functions exist (pgcrypto's `gen_random_uuid`, `digest`,
/// `hmac`, `gen_random_bytes`; uuid-ossp's `uuid_generate_v4`), a command that does nothing, as on a fresh
/// PostgreSQL database where it was not made yet (nothing records it: made twice, it does not say it exists);
/// `plpgsql` exists in every PostgreSQL database (`pg_extension` lists it): 42710, or a NOTICE with
/// `IF NOT EXISTS`. Any other is refused with 0A000.
fn create_extension(name: &str, if_not_exists: bool) -> Result<Translation, PgError> {
    let name = name.to_ascii_lowercase();
    match name.as_str() {
        "plpgsql" if if_not_exists => {
            let mut translation = bare(Kind::Other("CREATE EXTENSION".to_owned()));
            translation
                .notices
                .push(format!("extension \"{name}\" already exists, skipping"));
            Ok(translation)
        }
        "plpgsql" => Err(PgError::new(
            crate::error::DUPLICATE_OBJECT,
            format!("extension \"{name}\" already exists"),
        )),
        "pgcrypto" | "uuid-ossp" => Ok(bare(Kind::Other("CREATE EXTENSION".to_owned()))),
        _ => Err(PgError::unsupported(format!("the extension {name}"))),
    }
}

/// `DISCARD SEQUENCES` and `DISCARD ALL`; `None` for the other forms (SQLite is given the text).
fn discard(object_type: sqlparser::ast::DiscardObject) -> Option<Translation> {
    match object_type {
        sqlparser::ast::DiscardObject::SEQUENCES => {
            // Two steps, so the caller runs them as a command (a one-step SELECT would answer a row).
            let mut t = Translation::single(String::new(), Kind::Other("DISCARD SEQUENCES".to_owned()));
            t.steps = vec![
                "SELECT pg_discard_sequences()".to_owned(),
                "SELECT 1 WHERE 0".to_owned(),
            ];
            Some(t)
        }
        sqlparser::ast::DiscardObject::ALL => Some(bare(Kind::DiscardAll)),
        _ => None,
    }
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
