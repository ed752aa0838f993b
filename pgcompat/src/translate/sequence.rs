//! Sequences in statements: `CREATE`/`ALTER`/`DROP SEQUENCE`, the sequence of a serial or identity column,
//! the calls `nextval`/`currval`/`setval`/`lastval`, and `INSERT`s that leave such a column out (SQLite never
//! evaluates the default of an `INTEGER PRIMARY KEY`, so the default is written into the statement). The
//! model and its rules are [`crate::sequence`]; the functions that hand values out are
//! `functions::sequence`.

use rusqlite::Connection;
use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, ObjectNamePart, Query,
    SelectItem, SequenceOptions, SetExpr, UnaryOperator, Value, ValueWithSpan,
};

use super::{Kind, Translation};
use crate::catalog::{self, quote_literal, Catalog};
use crate::error::{
    PgError, DEPENDENT_OBJECTS_STILL_EXIST, DUPLICATE_TABLE, INVALID_SCHEMA_NAME, UNDEFINED_COLUMN, UNDEFINED_TABLE,
};
use crate::sequence::{self, Options, Sequence, CREATE_SEQUENCES_TABLE};
use crate::types::{self, PgType, Written};

/// The function the translator calls for each sequence function of PostgreSQL.
fn function_for(name: &str) -> Option<&'static str> {
    Some(match name {
        "nextval" => "pg_nextval",
        "currval" => "pg_currval",
        "setval" => "pg_setval",
        "lastval" => "pg_lastval",
        _ => return None,
    })
}

/// A relation name split into its folded parts (`public.t`, `"T"`); the relation's own name when the schema
/// is `public` or not given, 3F000 for another schema.
pub(crate) fn relation_name(name: &ObjectName) -> Result<String, PgError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) if ident.quote_style.is_some() => ident.value.clone(),
            ObjectNamePart::Identifier(ident) => ident.value.to_ascii_lowercase(),
            other => other.to_string(),
        })
        .collect();
    match parts.as_slice() {
        [name] => Ok(name.clone()),
        [schema, name] if schema == "public" => Ok(name.clone()),
        [.., schema, _] => Err(PgError::new(
            INVALID_SCHEMA_NAME,
            format!("schema \"{schema}\" does not exist"),
        )),
        [] => Err(PgError::new(UNDEFINED_TABLE, "relation \"\" does not exist")),
    }
}

fn literal(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(ValueWithSpan {
            value: Value::SingleQuotedString(text),
            ..
        }) => Some(text),
        _ => None,
    }
}

/// `nextval('s')`, `nextval('public.s'::regclass)`, `setval(pg_get_serial_sequence('t', 'id'), 5)` and the
/// others as the layer's functions. A sequence named by a literal is passed as its name (so the call can sit
/// in a column default, where SQLite allows no subquery); anything else is passed as computed (a text is
/// read as a name, an integer as an OID).
pub(crate) fn rewrite_call(name: &str, function: &Function) -> Result<Option<Expr>, PgError> {
    let Some(target) = function_for(name) else {
        return Ok(None);
    };
    let FunctionArguments::List(list) = &function.args else {
        if name == "lastval" {
            return Ok(Some(call(target, Vec::new())));
        }
        return Ok(None);
    };
    let mut args: Vec<Expr> = list
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e.clone()),
            other => Err(PgError::unsupported(format!("the argument {other} of {name}()"))),
        })
        .collect::<Result<_, _>>()?;
    let arity_ok = match name {
        "lastval" => args.is_empty(),
        "setval" => args.len() == 2 || args.len() == 3,
        _ => args.len() == 1,
    };
    if !arity_ok {
        return Err(PgError::new(
            crate::error::UNDEFINED_FUNCTION,
            format!("function {name} with {} arguments does not exist", args.len()),
        ));
    }
    if let Some(first) = args.first_mut() {
        // `'s'::regclass` was rewritten to a lookup whose first argument is the text.
        let inner = match first {
            Expr::Function(f) if f.name.to_string() == "_pgc_regclass" => match &f.args {
                FunctionArguments::List(l) => match l.args.first() {
                    Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(e))) => Some(e.clone()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        if let Some(inner) = inner.filter(|e| literal(e).is_some()) {
            *first = inner;
        }
        if let Some(text) = literal(first) {
            *first = Expr::value(Value::SingleQuotedString(normalized_name(text)?));
        }
    }
    Ok(Some(call(target, args)))
}

/// A sequence name written in a literal, as the one form the layer stores (`public.s` and `s` are `s`;
/// `"S"` stays quoted), so a stored default reads back as PostgreSQL prints it.
fn normalized_name(text: &str) -> Result<String, PgError> {
    let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_object_name(false));
    match parsed {
        Ok(name) => Ok(crate::functions::quote_ident_pg(&relation_name(&name)?)),
        // Not a name SQL could write: left for the function to refuse at run time.
        Err(_) => Ok(text.to_owned()),
    }
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    })
}

/// The default that fills a serial or identity column from its sequence.
pub(crate) fn nextval_default(sequence: &str) -> Expr {
    call(
        "pg_nextval",
        vec![Expr::value(Value::SingleQuotedString(
            crate::functions::quote_ident_pg(sequence),
        ))],
    )
}

fn integer(expr: &Expr) -> Result<i64, PgError> {
    let bad = || {
        PgError::new(
            crate::error::SYNTAX_ERROR,
            format!("syntax error at or near \"{expr}\""),
        )
    };
    match expr {
        Expr::Value(ValueWithSpan {
            value: Value::Number(text, _),
            ..
        }) => text.parse::<i64>().map_err(|_| bad()),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } => integer(inner)?.checked_neg().ok_or_else(bad),
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr: inner,
        } => integer(inner),
        _ => Err(bad()),
    }
}

/// Options as sqlparser reads them (`CREATE SEQUENCE`, identity columns) as the model's, and `OWNED BY`.
pub(crate) fn options_of(list: &[SequenceOptions]) -> Result<(Options, Option<Option<ObjectName>>), PgError> {
    let mut options = Options::default();
    let mut owned_by = None;
    for option in list {
        match option {
            SequenceOptions::DataType(data_type) => {
                options.data_type = Some(match types::from_data_type(data_type) {
                    Written::Type(ty) => sequence::sequence_type(ty)?,
                    _ => sequence::sequence_type(PgType::TEXT)?,
                });
            }
            SequenceOptions::IncrementBy(e, _) => options.increment = Some(integer(e)?),
            SequenceOptions::MinValue(e) => options.min = Some(e.as_ref().map(integer).transpose()?),
            SequenceOptions::MaxValue(e) => options.max = Some(e.as_ref().map(integer).transpose()?),
            SequenceOptions::StartWith(e, _) => options.start = Some(integer(e)?),
            SequenceOptions::Cache(e) => options.cache = Some(integer(e)?),
            // sqlparser's flag is "NO": `NO CYCLE` is `Cycle(true)`.
            SequenceOptions::Cycle(no) => options.cycle = Some(!no),
            SequenceOptions::OwnedBy(owner) => owned_by = Some(owner.clone()),
        }
    }
    Ok((options, owned_by))
}

fn steps_translation(tag: &str, steps: Vec<String>) -> Translation {
    let mut translation = Translation::single(String::new(), Kind::Other(tag.to_owned()));
    translation.steps = steps;
    translation
}

/// The steps that make the sequences table (once) with the types of what its views show.
pub(crate) fn table_steps() -> Vec<String> {
    let mut steps = vec![
        catalog::CREATE_COLUMNS_TABLE.to_owned(),
        CREATE_SEQUENCES_TABLE.to_owned(),
    ];
    for (column, ty) in sequence::RECORDED_COLUMNS {
        steps.push(catalog::record_column(sequence::SEQUENCES_TABLE, column, *ty));
    }
    steps
}

/// Whether a relation (table, view, index or sequence) of this name exists.
fn relation_exists(conn: &Connection, name: &str) -> bool {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?1 COLLATE NOCASE)",
        [name],
        |row| row.get(0),
    )
    .unwrap_or(false)
}

/// `OWNED BY t.c` checked: the table and column exist (names as SQLite has them).
pub(crate) fn owner_of(conn: &Connection, name: &ObjectName) -> Result<(String, String), PgError> {
    let parts: Vec<ObjectNamePart> = name.0.clone();
    let Some((column, table)) = parts.split_last() else {
        return Err(PgError::new(UNDEFINED_TABLE, "OWNED BY names no column"));
    };
    if table.is_empty() {
        return Err(PgError::new(
            crate::error::INVALID_PARAMETER_VALUE,
            "invalid OWNED BY option",
        ));
    }
    let table = relation_name(&ObjectName(table.to_vec()))?;
    let column = relation_name(&ObjectName(vec![column.clone()]))?;
    let found: Option<(String, String)> = conn
        .query_row(
            "SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' AND m.name = ?1 COLLATE NOCASE AND p.name = ?2 COLLATE NOCASE",
            [&table, &column],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .ok();
    match found {
        Some(owner) => Ok(owner),
        None if relation_exists(conn, &table) => Err(PgError::new(
            UNDEFINED_COLUMN,
            format!("column \"{column}\" of relation \"{table}\" does not exist"),
        )),
        None => Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{table}\" does not exist"),
        )),
    }
}

/// The steps that make one sequence: the table (once), its view, its row.
pub(crate) fn create_steps(sequence: &Sequence, owner: Option<(&str, &str)>, identity: &str) -> Vec<String> {
    let mut steps = table_steps();
    steps.push(sequence::create_view_sql(&sequence.name));
    steps.push(sequence.insert_sql(owner, identity));
    steps
}

/// `CREATE SEQUENCE [IF NOT EXISTS] name options`.
pub(crate) fn create(
    conn: &Connection,
    name: &ObjectName,
    if_not_exists: bool,
    temporary: bool,
    list: &[SequenceOptions],
) -> Result<Translation, PgError> {
    if temporary {
        return Err(PgError::unsupported("CREATE TEMPORARY SEQUENCE"));
    }
    let name = relation_name(name)?;
    if catalog::is_internal_table(&name) {
        return Err(PgError::new(
            crate::error::RESERVED_NAME,
            format!("the name \"{name}\" is reserved for Cambium's catalog"),
        ));
    }
    let (options, owned_by) = options_of(list)?;
    let sequence = Sequence::create(&name, &options)?;
    if relation_exists(conn, &name) {
        if if_not_exists {
            return Ok(steps_translation("CREATE SEQUENCE", Vec::new()));
        }
        return Err(PgError::new(
            DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        ));
    }
    let owner = match owned_by.flatten() {
        Some(owner) => Some(owner_of(conn, &owner)?),
        None => None,
    };
    let steps = create_steps(&sequence, owner.as_ref().map(|(t, c)| (t.as_str(), c.as_str())), "");
    Ok(steps_translation("CREATE SEQUENCE", steps))
}

/// `DROP SEQUENCE [IF EXISTS] a, b [CASCADE]`. A sequence a column owns goes only with `CASCADE` (its
/// default then reads a missing sequence; PostgreSQL would drop the default too).
pub(crate) fn drop(
    catalog: &Catalog,
    if_exists: bool,
    names: &[ObjectName],
    cascade: bool,
) -> Result<Translation, PgError> {
    let mut steps = Vec::new();
    for name in names {
        let name = relation_name(name)?;
        let Some(entry) = catalog.sequence(&name) else {
            if if_exists {
                continue;
            }
            return Err(PgError::new(
                UNDEFINED_TABLE,
                format!("sequence \"{name}\" does not exist"),
            ));
        };
        if let (Some((table, column)), false) = (&entry.owner, cascade) {
            return Err(PgError::new(
                DEPENDENT_OBJECTS_STILL_EXIST,
                format!(
                    "cannot drop sequence {} because other objects depend on it: default value for column {column} of table {table}",
                    entry.name
                ),
            ));
        }
        steps.extend(sequence::drop_sql(&entry.name));
    }
    Ok(steps_translation("DROP SEQUENCE", steps))
}

/// The steps that forget the sequences a table (or one column of it) owns, when it goes.
pub(crate) fn drop_owned(catalog: &Catalog, table: &str, column: Option<&str>) -> Vec<String> {
    catalog
        .owned_sequences(table, column)
        .flat_map(|s| sequence::drop_sql(&s.name))
        .collect()
}

/// The steps that follow a table's or column's new name in the owners of its sequences.
pub(crate) fn rename_owner(
    catalog: &Catalog,
    table: &str,
    column: Option<(&str, &str)>,
    new_table: &str,
) -> Vec<String> {
    if catalog.owned_sequences(table, None).next().is_none() {
        return Vec::new();
    }
    match column {
        None => vec![format!(
            "UPDATE _cambium_sequences SET owner_table = {} WHERE owner_table = {} COLLATE NOCASE",
            quote_literal(new_table),
            quote_literal(table)
        )],
        Some((from, to)) => vec![format!(
            "UPDATE _cambium_sequences SET owner_column = {} WHERE owner_table = {} COLLATE NOCASE \
             AND owner_column = {} COLLATE NOCASE",
            quote_literal(to),
            quote_literal(table),
            quote_literal(from)
        )],
    }
}

/// `ALTER SEQUENCE from RENAME TO to`: the view under the new name, the row renamed. Column defaults name
/// their sequence, so a renamed sequence a default reads is refused (PostgreSQL's defaults hold the OID).
pub(crate) fn rename_steps(conn: &Connection, from: &str, to: &str) -> Result<Vec<String>, PgError> {
    if relation_exists(conn, to) {
        return Err(PgError::new(
            DUPLICATE_TABLE,
            format!("relation \"{to}\" already exists"),
        ));
    }
    let read_by_default: bool = conn
        .prepare("SELECT p.dflt_value FROM sqlite_schema m JOIN pragma_table_info(m.name) p WHERE m.type = 'table' AND p.dflt_value IS NOT NULL")
        .and_then(|mut stmt| {
            let defaults = stmt.query_map([], |row| row.get::<_, String>(0))?;
            Ok(defaults
                .filter_map(Result::ok)
                .filter_map(|d| is_sequence_default(&d))
                .any(|e| reads_sequence(&e, from)))
        })
        .unwrap_or(false);
    if read_by_default {
        return Err(PgError::unsupported(format!(
            "renaming the sequence \"{from}\", which a column default reads"
        )));
    }
    Ok(vec![
        format!("DROP VIEW {}", crate::catalog::quote_ident(from)),
        sequence::create_view_sql(to),
        format!(
            "UPDATE _cambium_sequences SET name = {} WHERE name = {}",
            quote_literal(to),
            quote_literal(from)
        ),
    ])
}

/// Whether an expression calls `pg_nextval` on the sequence `name`.
fn reads_sequence(expr: &Expr, name: &str) -> bool {
    match expr {
        Expr::Nested(inner) => reads_sequence(inner, name),
        Expr::Function(f) => match &f.args {
            FunctionArguments::List(list) => list.args.iter().any(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                    (f.name.to_string().eq_ignore_ascii_case("pg_nextval")
                        && literal(e).is_some_and(|t| {
                            normalized_name(t).is_ok_and(|n| n.trim_matches('"').eq_ignore_ascii_case(name))
                        }))
                        || reads_sequence(e, name)
                }
                _ => false,
            }),
            _ => false,
        },
        _ => false,
    }
}

/// An identity or serial column's sequence, made with the table: its name (`SEQUENCE NAME`, else PostgreSQL's
/// `<table>_<column>_seq` made unique) and its steps.
pub(crate) fn column_sequence(
    conn: &Connection,
    table: &str,
    column: &str,
    column_type: PgType,
    list: &[SequenceOptions],
    sequence_name: Option<&str>,
    identity: &str,
) -> Result<(String, Vec<String>), PgError> {
    let (mut options, _) = options_of(list)?;
    options.data_type = Some(options.data_type.unwrap_or(column_type));
    let name = match sequence_name {
        Some(name) => name.to_owned(),
        None => unique_name(conn, &sequence::serial_name(table, column)),
    };
    if relation_exists(conn, &name) {
        return Err(PgError::new(
            DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        ));
    }
    let sequence = Sequence::create(&name, &options)?;
    let steps = create_steps(&sequence, Some((table, column)), identity);
    Ok((name, steps))
}

/// `name`, else `name1`, `name2`… (PostgreSQL's `ChooseRelationName`), whichever no relation has.
fn unique_name(conn: &Connection, name: &str) -> String {
    const ATTEMPTS_MAX: u32 = 1000;
    if !relation_exists(conn, name) {
        return name.to_owned();
    }
    (1..ATTEMPTS_MAX)
        .map(|n| format!("{name}{n}"))
        .find(|candidate| !relation_exists(conn, candidate))
        .unwrap_or_else(|| name.to_owned())
}

/// Whether a column default (SQLite's text of it) takes a value from a sequence.
fn is_sequence_default(text: &str) -> Option<Expr> {
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
fn omitted_sequence_defaults(conn: &Connection, table: &str, named: &[String]) -> Vec<(String, Expr)> {
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
        .filter(|(name, _)| !named.iter().any(|n| n.eq_ignore_ascii_case(name)))
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
    table: &str,
    insert: &mut sqlparser::ast::Insert,
    columns: &[String],
) -> Result<(), PgError> {
    let named: &[String] = if insert.source.is_some() { columns } else { &[] };
    let defaults = omitted_sequence_defaults(conn, table, named);
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
