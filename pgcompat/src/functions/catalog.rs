//! The functions psql and the ORMs call on the catalog (`format_type`, `pg_get_userbyid`,
//! `pg_table_is_visible`, privileges, sizes…) and the pure helpers the catalog views of
//! [`crate::pg_catalog`] are built with (`_pgc_constraints` reads a `CREATE TABLE` text, `_pgc_default` turns
//! a stored default back into PostgreSQL's text). Functions that must look something up in the catalog
//! (`pg_get_indexdef`, `pg_get_constraintdef`, `pg_get_viewdef`, `to_regclass`, `::regclass`) are rewritten
//! by the translator into subqueries on the views instead.

use std::sync::Arc;

use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;
use serde_json::json;
use sqlparser::ast::{
    ColumnOption, CreateTable, Expr, Ident, ObjectName, ReferentialAction, Statement, TableConstraint,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use super::{flags_pure, flags_session, raise, SessionState};
use crate::error::PgError;
use crate::types::{Base, Modifier, PgType};

/// The OID PostgreSQL gives the owner of `public` (`pg_database_owner`).
const DATABASE_OWNER_OID: i64 = 6171;
/// The session user's OID.
const USER_OID: i64 = 10;
/// What the size functions answer: one page (the layer has no per-relation sizes).
const RELATION_SIZE_ESTIMATE_BYTES: i64 = 8192;

/// Most `CREATE TABLE` texts whose readings are remembered; the memo is emptied when it is full.
const PARSED_TABLES_MAX: usize = 4096;

/// A `CREATE TABLE` text's readings by (table, text): its constraints as JSON and its serial column.
type Memo = std::collections::HashMap<(String, String), Arc<(String, Option<String>)>>;

/// What [`constraints`] and [`serial_column`] read from a `CREATE TABLE` text, remembered by the text: the
/// views call them for every row of every join that reads `pg_constraint` or `pg_attribute`, and a join of
/// two such views would parse each table's text once per row of the other.
fn parsed_table(table: &str, sql: &str) -> Arc<(String, Option<String>)> {
    static MEMO: std::sync::OnceLock<parking_lot::Mutex<Memo>> = std::sync::OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    let key = (table.to_owned(), sql.to_owned());
    if let Some(hit) = memo.lock().get(&key) {
        return hit.clone();
    }
    let parsed = Arc::new((constraints(table, sql), serial_column(sql)));
    let mut memo = memo.lock();
    if memo.len() >= PARSED_TABLES_MAX {
        memo.clear();
    }
    memo.insert(key, parsed.clone());
    parsed
}

/// Registers the catalog functions on `conn`.
pub(crate) fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    install_helpers(conn)?;
    conn.create_scalar_function("format_type", 2, flags_pure(), |ctx| {
        let Some(oid) = ctx.get::<Option<i64>>(0)? else {
            return Ok(None);
        };
        let typmod = ctx.get::<Option<i64>>(1)?.unwrap_or(-1);
        Ok(Some(format_type(oid, typmod)))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_get_userbyid", 1, flags_session(), move |ctx| {
        let oid = ctx.get::<Option<i64>>(0)?;
        Ok(oid.map(|oid| match oid {
            USER_OID => s.user.clone(),
            DATABASE_OWNER_OID => "pg_database_owner".to_owned(),
            other => format!("unknown (OID={other})"),
        }))
    })?;
    conn.create_scalar_function("pg_encoding_to_char", 1, flags_pure(), |ctx| {
        Ok(match ctx.get::<Option<i64>>(0)? {
            Some(6) => "UTF8",
            Some(0) => "SQL_ASCII",
            _ => "",
        })
    })?;
    for name in ["pg_get_expr"] {
        for n in [2, 3] {
            conn.create_scalar_function(name, n, flags_pure(), |ctx| ctx.get::<Option<String>>(0))?;
        }
    }
    for name in ["pg_table_is_visible", "pg_type_is_visible", "pg_function_is_visible"] {
        conn.create_scalar_function(name, 1, flags_pure(), |_| Ok(true))?;
    }
    for name in [
        "has_table_privilege",
        "has_schema_privilege",
        "has_database_privilege",
        "has_column_privilege",
        "has_sequence_privilege",
        "has_function_privilege",
        "pg_has_role",
    ] {
        for n in [2, 3, 4] {
            conn.create_scalar_function(name, n, flags_pure(), |_| Ok(true))?;
        }
    }
    for (name, n) in [
        ("obj_description", 1),
        ("obj_description", 2),
        ("col_description", 2),
        ("shobj_description", 2),
        ("pg_get_function_result", 1),
        ("pg_get_function_arguments", 1),
        ("pg_get_function_identity_arguments", 1),
        ("pg_get_statisticsobjdef_columns", 1),
        ("pg_get_partkeydef", 1),
    ] {
        conn.create_scalar_function(name, n, flags_pure(), |_| Ok(None::<String>))?;
    }
    conn.create_scalar_function("pg_relation_is_publishable", 1, flags_pure(), |_| Ok(false))?;
    conn.create_scalar_function("pg_is_in_recovery", 0, flags_pure(), |_| Ok(false))?;
    // `x IN (SELECT pg_partition_ancestors(x) …)`: a relation that is no partition is its own only ancestor.
    conn.create_scalar_function("pg_partition_ancestors", 1, flags_pure(), |ctx| ctx.get::<Value>(0))?;
    for name in [
        "pg_relation_size",
        "pg_total_relation_size",
        "pg_table_size",
        "pg_indexes_size",
        "pg_database_size",
    ] {
        for n in [1, 2] {
            conn.create_scalar_function(name, n, flags_pure(), |_| Ok(RELATION_SIZE_ESTIMATE_BYTES))?;
        }
    }
    conn.create_scalar_function("pg_size_pretty", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<i64>>(0)?.map(size_pretty))
    })?;
    conn.create_scalar_function("current_schemas", 1, flags_pure(), |ctx| {
        Ok(if ctx.get::<bool>(0)? {
            "{pg_catalog,public}"
        } else {
            "{public}"
        })
    })?;
    Ok(())
}

/// The helpers the catalog views call (all pure).
fn install_helpers(conn: &Connection) -> rusqlite::Result<()> {
    let flags: FunctionFlags = flags_pure();
    conn.create_scalar_function("_pgc_serial", 2, flags, |ctx| {
        let table: String = ctx.get(0)?;
        Ok(ctx
            .get::<Option<String>>(1)?
            .and_then(|sql| parsed_table(&table, &sql).1.clone()))
    })?;
    conn.create_scalar_function("_pgc_identity", 1, flags, |ctx| {
        let sql = ctx.get::<Option<String>>(0)?.unwrap_or_default();
        Ok(if sql.contains(crate::pg_catalog::IDENTITY_ALWAYS_MARKER) {
            "a"
        } else if sql.contains(crate::pg_catalog::IDENTITY_BY_DEFAULT_MARKER) {
            "d"
        } else {
            ""
        })
    })?;
    conn.create_scalar_function("_pgc_constraints", 2, flags, |ctx| {
        let table: String = ctx.get(0)?;
        let sql = ctx.get::<Option<String>>(1)?.unwrap_or_default();
        Ok(parsed_table(&table, &sql).0.clone())
    })?;
    conn.create_scalar_function("_pgc_type_oid", 2, flags, |ctx| {
        let pg = ctx.get::<Option<String>>(0)?;
        let declared = ctx.get::<Option<String>>(1)?.unwrap_or_default();
        Ok(i64::from(column_type(pg.as_deref(), &declared).oid()))
    })?;
    conn.create_scalar_function("_pgc_typmod", 1, flags, |ctx| {
        let ty = ctx.get::<Option<String>>(0)?.and_then(|t| PgType::from_catalog(&t));
        Ok(ty.map_or(-1, typmod))
    })?;
    conn.create_scalar_function("_pgc_default", 2, flags, |ctx| {
        let Some(stored) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let ty = ctx.get::<Option<String>>(1)?.and_then(|t| PgType::from_catalog(&t));
        Ok(Some(default_text(&stored, ty)))
    })?;
    conn.create_scalar_function("_pgc_ident", 1, flags, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|s| quote_ident(&s)))
    })?;
    conn.create_scalar_function("_pgc_view_body", 1, flags, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|sql| view_body(&sql)))
    })?;
    conn.create_scalar_function("_pgc_rule", 1, flags, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|code| {
            match code.as_str() {
                "r" => "RESTRICT",
                "c" => "CASCADE",
                "n" => "SET NULL",
                "d" => "SET DEFAULT",
                _ => "NO ACTION",
            }
            .to_owned()
        }))
    })?;
    conn.create_scalar_function("_pgc_column_info", 3, flags, |ctx| {
        let oid = ctx.get::<Option<i64>>(0)?.unwrap_or(0);
        let typmod = ctx.get::<Option<i64>>(1)?.unwrap_or(-1);
        let field: String = ctx.get(2)?;
        Ok(column_info(oid, typmod, &field))
    })?;
    conn.create_scalar_function("_pgc_relname", 1, flags, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Text(t) => Some(relation_name(&String::from_utf8_lossy(t))),
            _ => None,
        })
    })?;
    conn.create_scalar_function("_pgc_regclass", 2, flags, |ctx| {
        let found = ctx.get::<Option<i64>>(1)?;
        match ctx.get_raw(0) {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(oid) => Ok(Some(oid)),
            ValueRef::Text(t) => {
                let text = String::from_utf8_lossy(t).into_owned();
                if let Some(oid) = found.or_else(|| catalog_relation_oid(&relation_name(&text))) {
                    return Ok(Some(oid));
                }
                if let Ok(oid) = text.trim().parse::<i64>() {
                    return Ok(Some(oid));
                }
                Err(raise(PgError::new(
                    crate::error::UNDEFINED_TABLE,
                    format!("relation \"{text}\" does not exist"),
                )))
            }
            _ => Err(raise(PgError::new(
                crate::error::DATATYPE_MISMATCH,
                "cannot cast this value to regclass",
            ))),
        }
    })?;
    conn.create_scalar_function("_pgc_regtype", 1, flags, |ctx| match ctx.get_raw(0) {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(oid) => Ok(Some(oid)),
        ValueRef::Text(t) => {
            let text = String::from_utf8_lossy(t).into_owned();
            let name = text.trim().trim_matches('"');
            if name.eq_ignore_ascii_case("char") || name == "\"char\"" {
                return Ok(Some(18));
            }
            match PgType::from_name(name).or_else(|| name.parse::<u32>().ok().and_then(PgType::from_oid)) {
                Some(ty) => Ok(Some(i64::from(ty.oid()))),
                None => Err(raise(PgError::new(
                    crate::error::UNDEFINED_OBJECT,
                    format!("type \"{text}\" does not exist"),
                ))),
            }
        }
        _ => Err(raise(PgError::new(
            crate::error::DATATYPE_MISMATCH,
            "cannot cast this value to regtype",
        ))),
    })?;
    Ok(())
}

/// The type of a column: its recorded PostgreSQL type, else the one its SQLite declared type suggests.
fn column_type(recorded: Option<&str>, declared: &str) -> PgType {
    if let Some(ty) = recorded.and_then(PgType::from_catalog) {
        return ty;
    }
    let upper = declared.to_ascii_uppercase();
    if upper.contains("INT") {
        PgType::INT8
    } else if upper.contains("REAL") || upper.contains("FLOA") || upper.contains("DOUB") {
        PgType::FLOAT8
    } else if upper.contains("BLOB") {
        PgType::BYTEA
    } else if upper.contains("NUM") || upper.contains("DEC") {
        PgType::NUMERIC
    } else {
        PgType::TEXT
    }
}

/// PostgreSQL's `atttypmod` of a type.
fn typmod(ty: PgType) -> i64 {
    match (ty.base(), ty.modifier()) {
        (Base::Varchar | Base::Bpchar, Modifier::Length(n)) => i64::from(n) + 4,
        (_, Modifier::Length(n)) => i64::from(n),
        (_, Modifier::Numeric { precision, scale }) => ((i64::from(precision) << 16) | i64::from(scale)) + 4,
        (_, Modifier::None) => -1,
    }
}

/// The modifier a typmod stands for, for a type of `base`.
fn modifier_of(base: Base, typmod: i64) -> Modifier {
    match base {
        Base::Varchar | Base::Bpchar if typmod >= 4 => Modifier::Length(u32::try_from(typmod - 4).unwrap_or(0)),
        Base::Numeric if typmod >= 4 => {
            let packed = typmod - 4;
            Modifier::Numeric {
                precision: u32::try_from((packed >> 16) & 0xffff).unwrap_or(0),
                scale: u32::try_from(packed & 0xffff).unwrap_or(0),
            }
        }
        Base::Time | Base::Timestamp | Base::Timestamptz if typmod >= 0 => {
            Modifier::Length(u32::try_from(typmod).unwrap_or(0))
        }
        _ => Modifier::None,
    }
}

/// `format_type(oid, typmod)`.
pub(crate) fn format_type(oid: i64, typmod: i64) -> String {
    if oid == 18 {
        return "\"char\"".to_owned();
    }
    let Some(ty) = u32::try_from(oid).ok().and_then(PgType::from_oid) else {
        return "???".to_owned();
    };
    let element = ty.element();
    let modified = element.with_modifier(modifier_of(element.base(), typmod));
    let modified = if ty.is_array() { modified.array() } else { modified };
    if ty.base() == Base::Bpchar && typmod < 0 && !ty.is_array() {
        return "bpchar".to_owned();
    }
    modified.sql_name()
}

/// An `information_schema.columns` field of a column of type `oid` and modifier `typmod`.
fn column_info(oid: i64, typmod: i64, field: &str) -> Option<Value> {
    let ty = u32::try_from(oid).ok().and_then(PgType::from_oid)?;
    let base = ty.base();
    let modifier = modifier_of(base, typmod);
    let int = |v: i64| Some(Value::Integer(v));
    if ty.is_array() {
        return (field == "data_type").then(|| Value::Text("ARRAY".to_owned()));
    }
    match field {
        "data_type" => Some(Value::Text(PgType::new(base).sql_name())),
        "character_maximum_length" => match (base, modifier) {
            (Base::Varchar | Base::Bpchar, Modifier::Length(n)) => int(i64::from(n)),
            _ => None,
        },
        "character_octet_length" => match (base, modifier) {
            (Base::Varchar | Base::Bpchar, Modifier::Length(n)) => int(i64::from(n) * 4),
            (Base::Varchar | Base::Bpchar | Base::Text, _) => int(1_073_741_824),
            _ => None,
        },
        "numeric_precision" => match (base, modifier) {
            (Base::Int2, _) => int(16),
            (Base::Int4, _) => int(32),
            (Base::Int8, _) => int(64),
            (Base::Float4, _) => int(24),
            (Base::Float8, _) => int(53),
            (Base::Numeric, Modifier::Numeric { precision, .. }) => int(i64::from(precision)),
            _ => None,
        },
        "numeric_precision_radix" => match base {
            Base::Int2 | Base::Int4 | Base::Int8 | Base::Float4 | Base::Float8 => int(2),
            Base::Numeric => int(10),
            _ => None,
        },
        "numeric_scale" => match (base, modifier) {
            (Base::Int2 | Base::Int4 | Base::Int8, _) => int(0),
            (Base::Numeric, Modifier::Numeric { scale, .. }) => int(i64::from(scale)),
            _ => None,
        },
        "datetime_precision" => match (base, modifier) {
            (Base::Date, _) => int(0),
            (Base::Time | Base::Timestamp | Base::Timestamptz, Modifier::Length(n)) => int(i64::from(n)),
            (Base::Time | Base::Timestamp | Base::Timestamptz | Base::Interval, _) => int(6),
            _ => None,
        },
        _ => None,
    }
}

/// `pg_size_pretty(bigint)`, PostgreSQL's units and rounding.
fn size_pretty(bytes: i64) -> String {
    const LIMIT: i64 = 10 * 1024;
    let half_rounded = |x: i64| (x + x.signum()) / 2;
    if bytes.abs() < LIMIT {
        return format!("{bytes} bytes");
    }
    let mut size = bytes >> 9;
    for unit in ["kB", "MB", "GB", "TB"] {
        if size.abs() < LIMIT * 2 || unit == "TB" {
            return format!("{} {unit}", half_rounded(size));
        }
        size >>= 10;
    }
    format!("{} PB", half_rounded(size))
}

/// PostgreSQL's `quote_ident`: quoted unless all lower-case letters, digits and `_` not starting with a
/// digit, and not a reserved word.
pub(crate) fn quote_ident(name: &str) -> String {
    const RESERVED: &[&str] = &[
        "all",
        "and",
        "any",
        "array",
        "as",
        "asc",
        "both",
        "case",
        "cast",
        "check",
        "collate",
        "column",
        "constraint",
        "create",
        "default",
        "desc",
        "distinct",
        "do",
        "else",
        "end",
        "except",
        "false",
        "for",
        "foreign",
        "from",
        "grant",
        "group",
        "having",
        "in",
        "into",
        "is",
        "join",
        "leading",
        "limit",
        "not",
        "null",
        "offset",
        "on",
        "or",
        "order",
        "primary",
        "references",
        "select",
        "table",
        "then",
        "to",
        "trailing",
        "true",
        "union",
        "unique",
        "user",
        "using",
        "when",
        "where",
        "with",
    ];
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain && !RESERVED.contains(&name) {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// The relation a regclass text names: schema dropped, quotes removed (else folded to lower case).
fn relation_name(text: &str) -> String {
    split_qualified(text.trim()).pop().unwrap_or_default()
}

fn split_qualified(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                current.push('"');
                chars.next();
            }
            '"' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '.' if !quoted => {
                parts.push(if was_quoted {
                    current.clone()
                } else {
                    current.to_ascii_lowercase()
                });
                current.clear();
                was_quoted = false;
            }
            c => current.push(c),
        }
    }
    parts.push(if was_quoted {
        current
    } else {
        current.to_ascii_lowercase()
    });
    parts
}

/// The OIDs of the catalog relations queries name as `'pg_class'::regclass`.
fn catalog_relation_oid(name: &str) -> Option<i64> {
    Some(match name {
        "pg_class" => 1259,
        "pg_type" => 1247,
        "pg_attribute" => 1249,
        "pg_proc" => 1255,
        "pg_namespace" => 2615,
        "pg_constraint" => 2606,
        "pg_index" => 2610,
        "pg_attrdef" => 2604,
        "pg_depend" => 2608,
        "pg_description" => 2609,
        "pg_database" => 1262,
        "pg_authid" => 1260,
        "pg_am" => 2601,
        "pg_trigger" => 2620,
        "pg_rewrite" => 2618,
        "pg_extension" => 3079,
        "pg_collation" => 3456,
        "pg_enum" => 3501,
        "pg_sequence" => 2224,
        _ => return None,
    })
}

/// The body of a `CREATE VIEW … AS body` text.
fn view_body(sql: &str) -> String {
    let upper = sql.to_ascii_uppercase();
    upper
        .find(" AS ")
        .and_then(|i| sql.get(i + 4..))
        .map_or_else(|| sql.to_owned(), |body| format!(" {};", body.trim()))
}

fn parse_create_table(sql: &str) -> Option<CreateTable> {
    let mut statements = Parser::parse_sql(&SQLiteDialect {}, sql).ok()?;
    match statements.pop()? {
        Statement::CreateTable(create) => Some(create),
        _ => None,
    }
}

/// The column of a `CREATE TABLE` text that is `AUTOINCREMENT` (a serial or identity key).
fn serial_column(sql: &str) -> Option<String> {
    if !sql.to_ascii_uppercase().contains("AUTOINCREMENT") {
        return None;
    }
    let create = parse_create_table(sql)?;
    create
        .columns
        .iter()
        .find(|c| c.to_string().to_ascii_uppercase().contains("AUTOINCREMENT"))
        .map(|c| c.name.value.clone())
}

fn ident_text(ident: &Ident) -> String {
    ident.value.clone()
}

fn object_last(name: &ObjectName) -> String {
    match name.0.last() {
        Some(sqlparser::ast::ObjectNamePart::Identifier(ident)) => ident.value.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn action_code(action: Option<&ReferentialAction>) -> &'static str {
    match action {
        Some(ReferentialAction::Restrict) => "r",
        Some(ReferentialAction::Cascade) => "c",
        Some(ReferentialAction::SetNull) => "n",
        Some(ReferentialAction::SetDefault) => "d",
        _ => "a",
    }
}

fn action_text(code: &str) -> &'static str {
    match code {
        "r" => "RESTRICT",
        "c" => "CASCADE",
        "n" => "SET NULL",
        "d" => "SET DEFAULT",
        _ => "NO ACTION",
    }
}

fn cols_text(cols: &[String]) -> String {
    cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ")
}

/// One constraint read from a `CREATE TABLE` text.
struct Constraint {
    name: Option<String>,
    kind: char,
    cols: Vec<String>,
    ref_table: Option<String>,
    ref_cols: Vec<String>,
    on_update: &'static str,
    on_delete: &'static str,
    check: Option<String>,
}

/// The constraints of a `CREATE TABLE` text as a JSON array (`[]` when the text does not parse): each with
/// its PostgreSQL name (given, else made as PostgreSQL makes it), kind (`p u f c`), columns, referenced
/// table and columns, actions and `pg_get_constraintdef` text (`{REFCOLS}` standing for referenced columns
/// left implicit, which the view fills from the referenced table's key).
fn constraints(table: &str, sql: &str) -> String {
    let Some(create) = parse_create_table(sql) else {
        return "[]".to_owned();
    };
    // DDL gives numeric columns the `pg_numeric` collation: how the text tells them.
    let numeric: Vec<String> = create
        .columns
        .iter()
        .filter(|c| {
            c.options.iter().any(|o| {
                matches!(&o.option, ColumnOption::Collation(name) if name.to_string().eq_ignore_ascii_case("pg_numeric"))
            })
        })
        .map(|c| ident_text(&c.name))
        .collect();
    let expression_text = |expr: &Expr| expression_text(expr, &numeric);
    let mut list: Vec<Constraint> = Vec::new();
    for column in &create.columns {
        let col = ident_text(&column.name);
        for option in &column.options {
            // The name DDL gives an identity key's PRIMARY KEY marks it; it is no constraint name.
            let name = option
                .name
                .as_ref()
                .map(ident_text)
                .filter(|n| !n.starts_with("_cambium_identity_"));
            let single = vec![col.clone()];
            match &option.option {
                ColumnOption::PrimaryKey(_) => list.push(Constraint::keyed(name, 'p', single)),
                ColumnOption::Unique(_) => list.push(Constraint::keyed(name, 'u', single)),
                ColumnOption::ForeignKey(fk) => list.push(Constraint {
                    name,
                    kind: 'f',
                    cols: single,
                    ref_table: Some(object_last(&fk.foreign_table)),
                    ref_cols: fk.referred_columns.iter().map(ident_text).collect(),
                    on_update: action_code(fk.on_update.as_ref()),
                    on_delete: action_code(fk.on_delete.as_ref()),
                    check: None,
                }),
                ColumnOption::Check(check) => {
                    let mut c = Constraint::keyed(name, 'c', single);
                    c.check = Some(expression_text(&check.expr));
                    list.push(c);
                }
                _ => {}
            }
        }
    }
    for constraint in &create.constraints {
        let index_cols = |cols: &[sqlparser::ast::IndexColumn]| -> Vec<String> {
            cols.iter()
                .map(|c| match &c.column.expr {
                    Expr::Identifier(ident) => ident.value.clone(),
                    other => other.to_string(),
                })
                .collect()
        };
        match constraint {
            TableConstraint::PrimaryKey(pk) => list.push(Constraint::keyed(
                pk.name.as_ref().map(ident_text),
                'p',
                index_cols(&pk.columns),
            )),
            TableConstraint::Unique(u) => list.push(Constraint::keyed(
                u.name.as_ref().map(ident_text),
                'u',
                index_cols(&u.columns),
            )),
            TableConstraint::ForeignKey(fk) => list.push(Constraint {
                name: fk.name.as_ref().map(ident_text),
                kind: 'f',
                cols: fk.columns.iter().map(ident_text).collect(),
                ref_table: Some(object_last(&fk.foreign_table)),
                ref_cols: fk.referred_columns.iter().map(ident_text).collect(),
                on_update: action_code(fk.on_update.as_ref()),
                on_delete: action_code(fk.on_delete.as_ref()),
                check: None,
            }),
            TableConstraint::Check(check) => {
                let text = expression_text(&check.expr);
                let cols = first_column(&check.expr).into_iter().collect();
                let mut c = Constraint::keyed(check.name.as_ref().map(ident_text), 'c', cols);
                c.check = Some(text);
                list.push(c);
            }
            _ => {}
        }
    }
    // PostgreSQL lists the primary key first among what a table declares; order by kind as it names them.
    list.sort_by_key(|c| match c.kind {
        'p' => 0,
        'u' => 1,
        'f' => 2,
        _ => 3,
    });
    let items: Vec<serde_json::Value> = list.iter().map(|c| c.to_json(table)).collect();
    serde_json::Value::Array(items).to_string()
}

impl Constraint {
    fn keyed(name: Option<String>, kind: char, cols: Vec<String>) -> Constraint {
        Constraint {
            name,
            kind,
            cols,
            ref_table: None,
            ref_cols: Vec::new(),
            on_update: " ",
            on_delete: " ",
            check: None,
        }
    }

    fn to_json(&self, table: &str) -> serde_json::Value {
        let suffix = match self.kind {
            'p' => "pkey",
            'u' => "key",
            'f' => "fkey",
            _ => "check",
        };
        let name = self.name.clone().unwrap_or_else(|| match self.kind {
            'p' => format!("{table}_pkey"),
            _ if self.cols.is_empty() => format!("{table}_{suffix}"),
            _ => format!("{table}_{}_{suffix}", self.cols.join("_")),
        });
        let def = match self.kind {
            'p' => format!("PRIMARY KEY ({})", cols_text(&self.cols)),
            'u' => format!("UNIQUE ({})", cols_text(&self.cols)),
            'f' => {
                let refs = if self.ref_cols.is_empty() {
                    "{REFCOLS}".to_owned()
                } else {
                    cols_text(&self.ref_cols)
                };
                let mut def = format!(
                    "FOREIGN KEY ({}) REFERENCES {}({refs})",
                    cols_text(&self.cols),
                    quote_ident(self.ref_table.as_deref().unwrap_or_default())
                );
                if self.on_update != "a" {
                    def.push_str(&format!(" ON UPDATE {}", action_text(self.on_update)));
                }
                if self.on_delete != "a" {
                    def.push_str(&format!(" ON DELETE {}", action_text(self.on_delete)));
                }
                def
            }
            _ => format!("CHECK ({})", self.check.as_deref().unwrap_or_default()),
        };
        json!({
            "name": name,
            "type": self.kind.to_string(),
            "cols": self.cols,
            "ref_table": self.ref_table,
            "ref_cols": self.ref_cols,
            "upd": self.on_update,
            "del": self.on_delete,
            "def": def,
        })
    }
}

/// The first column an expression mentions (PostgreSQL names a table CHECK after it).
fn first_column(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(ident.value.clone()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.clone()),
        Expr::BinaryOp { left, right, .. } => first_column(left).or_else(|| first_column(right)),
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } => first_column(inner),
        Expr::Function(f) => match &f.args {
            sqlparser::ast::FunctionArguments::List(list) => list.args.iter().find_map(|a| match a {
                sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => first_column(e),
                _ => None,
            }),
            _ => None,
        },
        _ => None,
    }
}

/// A stored (translated) expression as PostgreSQL text: the layer's casts and calls undone where it knows
/// them (`pg_coerce(x, t)` is `x`, `pg_cast(x, t, s)` is `x::t`, `pg_now()` is `now()`), quotes dropped from
/// plain identifiers.
/// An integer compared with a numeric column reads `0::numeric`, as PostgreSQL prints the cast it added.
fn expression_text(expr: &Expr, numeric_columns: &[String]) -> String {
    let mut expr = expr.clone();
    undo(&mut expr);
    cast_integers(&mut expr, numeric_columns);
    expr.to_string()
}

fn cast_integers(expr: &mut Expr, numeric_columns: &[String]) {
    let is_numeric =
        |e: &Expr| matches!(e, Expr::Identifier(i) if numeric_columns.iter().any(|c| c.eq_ignore_ascii_case(&i.value)));
    let as_numeric = |e: &mut Expr| {
        if let Expr::Value(v) = e {
            if let sqlparser::ast::Value::Number(n, _) = &v.value {
                if n.bytes().all(|b| b.is_ascii_digit()) {
                    *e = Expr::Identifier(Ident::new(format!("{n}::numeric")));
                }
            }
        }
    };
    match expr {
        Expr::BinaryOp { left, op, right } => {
            use sqlparser::ast::BinaryOperator as B;
            if matches!(op, B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq) {
                if is_numeric(left) {
                    as_numeric(right);
                } else if is_numeric(right) {
                    as_numeric(left);
                }
            }
            cast_integers(left, numeric_columns);
            cast_integers(right, numeric_columns);
        }
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } => cast_integers(inner, numeric_columns),
        _ => {}
    }
}

fn undo(expr: &mut Expr) {
    let replacement = match expr {
        Expr::Nested(inner) => {
            undo(inner);
            if matches!(inner.as_ref(), Expr::Value(_) | Expr::Identifier(_) | Expr::Function(_)) {
                Some(inner.as_ref().clone())
            } else {
                None
            }
        }
        Expr::Identifier(ident) => {
            if quote_ident(&ident.value) == ident.value {
                ident.quote_style = None;
            }
            None
        }
        Expr::BinaryOp { left, right, .. } => {
            undo(left);
            undo(right);
            None
        }
        Expr::UnaryOp { expr: inner, .. } => {
            undo(inner);
            None
        }
        Expr::Function(f) => {
            let name = f.name.to_string().to_ascii_lowercase();
            let mut args: Vec<Expr> = match &f.args {
                sqlparser::ast::FunctionArguments::List(list) => list
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => {
                            Some(e.clone())
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for a in &mut args {
                undo(a);
            }
            match name.as_str() {
                "pg_coerce" if !args.is_empty() => Some(args.swap_remove(0)),
                "pg_now" => Some(Expr::Identifier(Ident::new("now()"))),
                "pg_current_date" => Some(Expr::Identifier(Ident::new("CURRENT_DATE"))),
                "pg_localtimestamp" => Some(Expr::Identifier(Ident::new("LOCALTIMESTAMP"))),
                // A decimal literal: PostgreSQL prints it as written.
                "pg_cast"
                    if args.len() >= 2
                        && matches!(&args[1], Expr::Value(v) if v.value.to_string() == "'numeric'")
                        && matches!(&args[0], Expr::Value(v) if matches!(&v.value,
                            sqlparser::ast::Value::SingleQuotedString(t) if t.parse::<f64>().is_ok())) =>
                {
                    let text = match &args[0] {
                        Expr::Value(v) => v.value.clone().into_string().unwrap_or_default(),
                        _ => String::new(),
                    };
                    Some(Expr::Identifier(Ident::new(text)))
                }
                "pg_cast" if args.len() >= 2 => {
                    let target = match &args[1] {
                        Expr::Value(v) => v.value.clone().into_string().unwrap_or_default(),
                        _ => String::new(),
                    };
                    let target = PgType::from_catalog(&target).map_or(target, PgType::sql_name);
                    Some(Expr::Identifier(Ident::new(format!("{}::{target}", args[0]))))
                }
                _ => {
                    if let sqlparser::ast::FunctionArguments::List(list) = &mut f.args {
                        for (arg, new) in list
                            .args
                            .iter_mut()
                            .filter_map(|a| match a {
                                sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => {
                                    Some(e)
                                }
                                _ => None,
                            })
                            .zip(args)
                        {
                            *arg = new;
                        }
                    }
                    None
                }
            }
        }
        _ => None,
    };
    if let Some(replacement) = replacement {
        *expr = replacement;
    }
}

/// A column default as stored by the layer, as PostgreSQL prints it (`pg_get_expr`).
fn default_text(stored: &str, ty: Option<PgType>) -> String {
    let parsed = Parser::new(&SQLiteDialect {})
        .try_with_sql(stored)
        .and_then(|mut p| p.parse_expr());
    let Ok(expr) = parsed else {
        return stored.to_owned();
    };
    let mut expr = expr;
    undo(&mut expr);
    match (&expr, ty) {
        (Expr::Value(v), Some(ty)) => match &v.value {
            sqlparser::ast::Value::SingleQuotedString(s) if !ty.is_numeric() => {
                format!(
                    "'{}'::{}",
                    s.replace('\'', "''"),
                    ty.element().with_modifier(Modifier::None).sql_name()
                )
            }
            sqlparser::ast::Value::SingleQuotedString(s) => s.clone(),
            sqlparser::ast::Value::Number(n, _) if ty.base() == Base::Bool && !ty.is_array() => {
                if n == "0" { "false" } else { "true" }.to_owned()
            }
            sqlparser::ast::Value::Boolean(b) => b.to_string(),
            _ => expr.to_string(),
        },
        _ => expr.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_postgresql_does() {
        assert_eq!(size_pretty(1024), "1024 bytes");
        assert_eq!(size_pretty(10_485_760), "10 MB");
        assert_eq!(size_pretty(20_480), "20 kB");
    }

    #[test]
    fn format_type_reads_type_modifiers() {
        assert_eq!(format_type(23, -1), "integer");
        assert_eq!(format_type(1043, 44), "character varying(40)");
        assert_eq!(format_type(1700, 655_366), "numeric(10,2)");
        assert_eq!(format_type(1184, -1), "timestamp with time zone");
        assert_eq!(format_type(1009, -1), "text[]");
    }

    #[test]
    fn constraints_get_postgresql_names() {
        let sql = "CREATE TABLE \"items\" (\"id\" INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, \"name\" TEXT NOT NULL, \
                   \"owner\" INTEGER REFERENCES \"users\" ON DELETE CASCADE, UNIQUE (\"name\"))";
        let json: serde_json::Value = serde_json::from_str(&constraints("items", sql)).expect("json");
        let names: Vec<&str> = json
            .as_array()
            .expect("array")
            .iter()
            .map(|c| c["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, ["items_pkey", "items_name_key", "items_owner_fkey"]);
        assert_eq!(serial_column(sql).as_deref(), Some("id"));
        let checked = "CREATE TABLE \"t\" (\"price\" TEXT CHECK (price >= 0) COLLATE pg_numeric, \
                       CONSTRAINT \"c2\" CHECK (price < pg_cast('1000.5', 'numeric', '')))";
        let json: serde_json::Value = serde_json::from_str(&constraints("t", checked)).expect("json");
        let defs: Vec<&str> = json
            .as_array()
            .expect("array")
            .iter()
            .map(|c| c["def"].as_str().expect("def"))
            .collect();
        assert_eq!(defs, ["CHECK (price >= 0::numeric)", "CHECK (price < 1000.5)"]);
    }

    #[test]
    fn identifiers_quote_as_postgresql_does() {
        assert_eq!(quote_ident("items"), "items");
        assert_eq!(quote_ident("Post_id_seq"), "\"Post_id_seq\"");
        assert_eq!(quote_ident("user"), "\"user\"");
        assert_eq!(relation_name("public.\"Post\""), "Post");
        assert_eq!(relation_name("public.Items"), "items");
    }
}
