//! Sequences in statements: `CREATE`/`ALTER`/`DROP SEQUENCE`, the sequence of a serial or identity column,
//! the calls `nextval`/`currval`/`setval`/`lastval`, and `INSERT`s that leave such a column out (SQLite never
//! evaluates the default of an `INTEGER PRIMARY KEY`, so the default is written into the statement). The
//! model and its rules are [`crate::sequence`]; the functions that hand values out are
//! `functions::sequence`.

use rusqlite::Connection;
use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, ObjectName, ObjectNamePart, SequenceOptions,
    UnaryOperator, Value, ValueWithSpan,
};

use super::expr::call;
use super::{Kind, Translation};
use crate::catalog::{self, quote_literal, Catalog};
use crate::error::{PgError, DEPENDENT_OBJECTS_STILL_EXIST, DUPLICATE_TABLE, UNDEFINED_COLUMN, UNDEFINED_TABLE};
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

/// The SQLite name of an existing relation a sequence statement names (see `translate::schema`).
pub(crate) fn relation_name(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    super::schema::existing(catalog, name)
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
pub(crate) fn rewrite_call(catalog: &Catalog, name: &str, function: &Function) -> Result<Option<Expr>, PgError> {
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
            *first = Expr::value(Value::SingleQuotedString(normalized_name(catalog, text)?));
        }
    }
    Ok(Some(call(target, args)))
}

/// A sequence name written in a literal, as the one form the layer stores (`public.s` and `s` are `s`;
/// `"S"` stays quoted), so a stored default reads back as PostgreSQL prints it.
fn normalized_name(catalog: &Catalog, text: &str) -> Result<String, PgError> {
    let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_object_name(false));
    match parsed {
        Ok(name) => Ok(crate::functions::quote_ident_pg(&relation_name(catalog, &name)?)),
        // Not a name SQL could write: left for the function to refuse at run time.
        Err(_) => Ok(text.to_owned()),
    }
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
pub(crate) fn owner_of(conn: &Connection, catalog: &Catalog, name: &ObjectName) -> Result<(String, String), PgError> {
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
    let table = relation_name(catalog, &ObjectName(table.to_vec()))?;
    let column = match column {
        ObjectNamePart::Identifier(ident) => super::schema::fold_ident(ident),
        other => other.to_string(),
    };
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
    catalog: &Catalog,
    name: &ObjectName,
    if_not_exists: bool,
    temporary: bool,
    list: &[SequenceOptions],
) -> Result<Translation, PgError> {
    if temporary {
        return Err(PgError::unsupported("CREATE TEMPORARY SEQUENCE"));
    }
    let name = super::schema::created(catalog, name)?;
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
        Some(owner) => Some(owner_of(conn, catalog, &owner)?),
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
        let name = relation_name(catalog, name)?;
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
                .filter_map(|d| super::identity::is_sequence_default(&d))
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
                        // A stored default names its sequence in the normalized form (`normalized_name`).
                        && literal(e).is_some_and(|t| {
                            t.trim_matches('"').replace("\"\"", "\"").eq_ignore_ascii_case(name)
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
