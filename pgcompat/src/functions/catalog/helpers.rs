//! The helper functions the catalog views of [`crate::pg_catalog`] are built with (`_pgc_*`, all pure): what a
//! `CREATE TABLE` text declares, a stored default as PostgreSQL prints it, regclass and regtype input.

use std::sync::Arc;

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

use super::constraints::{constraints, generation_expression, serial_column};
use super::deparse::{default_text, quote_ident, Names};
use super::names::Namer;
use super::{column_info, column_type, typmod};
use crate::error::PgError;
use crate::functions::{flags_pure, flags_session, raise};
use crate::types::PgType;

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

/// The helpers the catalog views call (all pure).
pub(super) fn install(conn: &Connection, state: Arc<crate::functions::SessionState>) -> rusqlite::Result<()> {
    let flags: FunctionFlags = flags_pure();
    conn.create_scalar_function("_pgc_serial", 2, flags, |ctx| {
        let table: String = ctx.get(0)?;
        Ok(ctx
            .get::<Option<String>>(1)?
            .and_then(|sql| parsed_table(&table, &sql).1.clone()))
    })?;
    // A generated column's expression (`pg_attrdef.adbin`): (the table's `CREATE TABLE` text, the column).
    conn.create_scalar_function("_pgc_generated", 2, flags, |ctx| {
        let (Some(sql), Some(column)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        Ok(generation_expression(&sql, &column))
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
    // The default b-tree operator class of an index key of this type (`pg_index.indclass`; `pg_opclass`
    // lists them): a `varchar` key takes `text_ops`, as in PostgreSQL; 0 for a type without one here.
    conn.create_scalar_function("_pgc_key_opclass", 1, flags, |ctx| {
        let oid = ctx.get::<Option<i64>>(0)?.unwrap_or(0);
        Ok(default_btree_opclass(oid))
    })?;
    conn.create_scalar_function("_pgc_typmod", 1, flags, |ctx| {
        let ty = ctx.get::<Option<String>>(0)?.and_then(|t| PgType::from_catalog(&t));
        Ok(ty.map_or(-1, typmod))
    })?;
    // A stored default as PostgreSQL prints it, its names as the session's `search_path` shows them.
    let s = state.clone();
    conn.create_scalar_function("_pgc_default", 2, flags_session(), move |ctx| {
        let Some(stored) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let ty = ctx.get::<Option<String>>(1)?.and_then(|t| PgType::from_catalog(&t));
        let namer = Namer::of(&s);
        let types = |t: PgType| type_shown(&s, &namer, t);
        let relation = |sqlite: &str| namer.relation(sqlite);
        let names = Names {
            types: &types,
            relation: &relation,
        };
        Ok(Some(default_text(&stored, ty, &names)))
    })?;
    // What `pg_proc` shows of a function's arguments (their JSON as `_cambium_functions` keeps them):
    // `count`, `types` (an oidvector's text), `names` (a text[], NULL when none is named), `identity`
    // (`a integer, b text`, as `pg_get_function_arguments` prints them).
    let s = state.clone();
    conn.create_scalar_function("_pgc_fn_info", 2, flags_session(), move |ctx| {
        let (Some(json), Some(field)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let Some(args) = crate::routines::args_from_json(&json) else {
            return Ok(None);
        };
        Ok(routine_args(&s, &args, &field))
    })?;
    // A relation's SQLite name as deparsed texts print it (`pg_get_constraintdef`'s referenced table).
    let s = state.clone();
    conn.create_scalar_function("_pgc_shown_rel", 1, flags_session(), move |ctx| {
        Ok(ctx
            .get::<Option<String>>(0)?
            .map(|sqlite| Namer::of(&s).relation(&sqlite)))
    })?;
    conn.create_scalar_function("_pgc_ident", 1, flags, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|s| quote_ident(&s)))
    })?;
    conn.create_scalar_function("_pgc_index_keys", 1, flags, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.and_then(|sql| index_keys(&sql)))
    })?;
    // The n-th key (from 1) of a `CREATE INDEX` text, as `pg_get_indexdef(oid, n, …)` prints it (no DESC).
    conn.create_scalar_function("_pgc_index_key", 2, flags, |ctx| {
        let (Some(sql), Some(n)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<i64>>(1)?) else {
            return Ok(None);
        };
        let index = usize::try_from(n).ok().and_then(|n| n.checked_sub(1));
        Ok(index.and_then(|i| index_key_texts(&sql)?.0.into_iter().nth(i).map(|(text, _)| text)))
    })?;
    // A view's definition as PostgreSQL prints it: its SQLite text, whether pretty, the columns' JSON.
    let s = state.clone();
    conn.create_scalar_function("_pgc_viewdef", 3, flags_session(), move |ctx| {
        let Some(sql) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let pretty = ctx.get::<Option<bool>>(1)?.unwrap_or(false);
        let columns = ctx
            .get::<Option<String>>(2)?
            .and_then(|json| super::viewdef::columns_of(&json))
            .unwrap_or_default();
        let namer = Namer::of(&s);
        let env = super::viewdef::Env {
            columns: &columns,
            namer: &namer,
            state: &s,
        };
        Ok(Some(super::viewdef::definition(&sql, pretty, &env)))
    })?;
    // The relations a view reads (SQLite names, a JSON array), for `pg_depend`.
    conn.create_scalar_function("_pgc_view_refs", 1, flags, |ctx| {
        let refs = ctx
            .get::<Option<String>>(0)?
            .map(|sql| crate::translate::dependents::relations_of_view(&sql))
            .unwrap_or_default();
        Ok(serde_json::Value::from(refs).to_string())
    })?;
    // The sequence a stored default's `nextval` reads (its SQLite name), for `pg_depend`.
    conn.create_scalar_function("_pgc_default_seq", 1, flags, |ctx| {
        Ok(ctx
            .get::<Option<String>>(0)?
            .and_then(|stored| super::deparse::default_sequence(&stored)))
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
    // `x::oid` of a regclass or regtype: the number (a call the output naming does not print as a name).
    conn.create_scalar_function("_pgc_oid_of", 1, flags, |ctx| ctx.get::<Option<i64>>(0))?;
    conn.create_scalar_function("_pgc_builtin_type_oid", 1, flags, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.as_deref().and_then(builtin_type_oid))
    })?;
    conn.create_scalar_function("_pgc_regtype_array", 1, flags, |ctx| {
        ctx.get::<Option<String>>(0)?
            .map(|text| regtype_array(&text).map_err(raise))
            .transpose()
    })?;
    conn.create_scalar_function("_pgc_regtype", 1, flags, |ctx| match ctx.get_raw(0) {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(oid) => Ok(Some(oid)),
        ValueRef::Text(t) => {
            let text = String::from_utf8_lossy(t).into_owned();
            match builtin_type_oid(&text) {
                Some(oid) => Ok(Some(oid)),
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

/// A field of `pg_proc` about a function's arguments (see `_pgc_fn_info`).
fn routine_args(
    state: &crate::functions::SessionState,
    args: &[(String, PgType)],
    field: &str,
) -> Option<rusqlite::types::Value> {
    use rusqlite::types::Value;
    let namer = Namer::of(state);
    Some(match field {
        "count" => Value::Integer(i64::try_from(args.len()).unwrap_or(i64::MAX)),
        "types" => Value::Text(
            args.iter()
                .map(|(_, t)| t.oid().to_string())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "names" if args.iter().all(|(n, _)| n.is_empty()) => return None,
        "names" => {
            let names: Vec<String> = args
                .iter()
                .map(|(n, _)| if n.is_empty() { "\"\"".to_owned() } else { n.clone() })
                .collect();
            Value::Text(format!("{{{}}}", names.join(",")))
        }
        "identity" => Value::Text(
            args.iter()
                .map(|(n, t)| {
                    let ty = type_shown(state, &namer, *t);
                    if n.is_empty() {
                        ty
                    } else {
                        format!("{} {ty}", quote_ident(n))
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => return None,
    })
}

/// A type's name as PostgreSQL prints it in a deparsed text: an enum type's as the path shows it.
pub(super) fn type_shown(state: &crate::functions::SessionState, namer: &Namer, ty: PgType) -> String {
    match ty.base() {
        crate::types::Base::Enum(oid) => match crate::functions::enums::type_name(state, oid) {
            Some(name) if ty.is_array() => format!("{}[]", namer.enum_type(&name)),
            Some(name) => namer.enum_type(&name),
            None => ty.sql_name(),
        },
        _ => ty.sql_name(),
    }
}

/// PostgreSQL 15's pseudo-types and their OIDs: no column has one, but function signatures do, and tools
/// compare with them (`prorettype::regtype != 'trigger'::regtype`, pgcli).
pub(super) const PSEUDO_TYPES: &[(&str, i64)] = &[
    ("record", 2249),
    ("cstring", 2275),
    ("any", 2276),
    ("anyarray", 2277),
    ("void", 2278),
    ("trigger", 2279),
    ("language_handler", 2280),
    ("internal", 2281),
    ("anyelement", 2283),
    ("anynonarray", 2776),
    ("anyenum", 3500),
    ("fdw_handler", 3115),
    ("index_am_handler", 325),
    ("tsm_handler", 3310),
    ("table_am_handler", 269),
    ("anyrange", 3831),
    ("event_trigger", 3838),
    ("anycompatible", 5077),
    ("anycompatiblearray", 5078),
    ("anycompatiblenonarray", 5079),
    ("anycompatiblerange", 5080),
    ("anymultirange", 4537),
    ("anycompatiblemultirange", 4538),
];

/// The OID of the built-in type a regtype text names (`int4`, `integer`, `"char"`, `trigger`, an OID as
/// text).
pub(super) fn builtin_type_oid(text: &str) -> Option<i64> {
    let text = text.trim();
    let bare = text.trim_matches('"');
    if let Some((_, oid)) = PSEUDO_TYPES.iter().find(|(name, _)| name.eq_ignore_ascii_case(bare)) {
        return Some(*oid);
    }
    if let Some(element) = text.strip_suffix("[]") {
        let element = element.trim().trim_matches('"');
        return PgType::from_name(element).map(|ty| i64::from(ty.array().oid()));
    }
    let name = text.trim_matches('"');
    if name.eq_ignore_ascii_case("char") {
        return Some(18);
    }
    PgType::from_name(name)
        .or_else(|| name.parse::<u32>().ok().and_then(PgType::from_oid))
        .map(|ty| i64::from(ty.oid()))
}

/// A `regtype[]` from text: an array literal of type names or OIDs (`{int,int8}`), or an `oidvector`'s
/// space-separated OIDs (`pg_proc.proargtypes`); the OIDs as an array literal.
pub(super) fn regtype_array(text: &str) -> Result<String, PgError> {
    let undefined = |name: &str| {
        PgError::new(
            crate::error::UNDEFINED_OBJECT,
            format!("type \"{name}\" does not exist"),
        )
    };
    let elements: Vec<Option<String>> = if text.trim_start().starts_with('{') {
        let Some(names) = crate::value::array::parse(text) else {
            return Err(PgError::new(
                crate::error::INVALID_TEXT_REPRESENTATION,
                format!("malformed array literal: \"{text}\""),
            ));
        };
        names
            .into_iter()
            .map(|name| match name {
                None => Ok(None),
                Some(name) => builtin_type_oid(&name)
                    .map(|oid| Some(oid.to_string()))
                    .ok_or_else(|| undefined(&name)),
            })
            .collect::<Result<_, _>>()?
    } else {
        text.split_whitespace()
            .map(|oid| match oid.parse::<u32>() {
                Ok(oid) => Ok(Some(oid.to_string())),
                Err(_) => Err(undefined(oid)),
            })
            .collect::<Result<_, _>>()?
    };
    Ok(crate::value::array::format(&elements))
}

/// The relation a regclass text names: schema dropped, quotes removed (else folded to lower case).
pub(super) fn relation_name(text: &str) -> String {
    split_qualified(text.trim()).pop().unwrap_or_default()
}

pub(in crate::functions) fn split_qualified(text: &str) -> Vec<String> {
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

/// What follows `USING btree (` in PostgreSQL's text of an index made by `CREATE INDEX`: its keys (a column,
/// a function call, any other expression in parentheses; `DESC` where given), `)`, and its `WHERE`.
/// `None` if the text does not parse.
fn index_keys(sql: &str) -> Option<String> {
    let (keys, predicate) = index_key_texts(sql)?;
    let keys: Vec<String> = keys
        .into_iter()
        .map(|(text, descending)| if descending { format!("{text} DESC") } else { text })
        .collect();
    let mut out = format!("{})", keys.join(", "));
    if let Some(predicate) = predicate {
        out.push_str(&format!(" WHERE ({predicate})"));
    }
    Some(out)
}

/// Each key of an index as PostgreSQL prints it (a column as an identifier, an expression deparsed), and
/// whether it is descending.
type IndexKeys = Vec<(String, bool)>;

/// The keys of a `CREATE INDEX` text ([`IndexKeys`]) and its predicate's text.
fn index_key_texts(sql: &str) -> Option<(IndexKeys, Option<String>)> {
    use sqlparser::ast::{Expr, OrderBySort, Statement};
    let mut parsed = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::SQLiteDialect {}, sql).ok()?;
    let Some(Statement::CreateIndex(index)) = parsed.pop() else {
        return None;
    };
    let keys = index
        .columns
        .iter()
        .map(|key| {
            let expr = match &key.column.expr {
                Expr::Nested(inner) => inner.as_ref(),
                other => other,
            };
            let text = match expr {
                Expr::Identifier(ident) => quote_ident(&ident.value),
                Expr::Function(_) => super::deparse::expression_text(expr, &[]),
                other => format!("({})", super::deparse::expression_text(other, &[])),
            };
            (text, key.column.options.sort == Some(OrderBySort::Desc))
        })
        .collect();
    let predicate = index
        .predicate
        .as_ref()
        .map(|predicate| super::deparse::expression_text(predicate, &[]));
    Some((keys, predicate))
}

/// PostgreSQL 15's default b-tree operator class for keys of the type `oid` (the rows of `pg_opclass`).
fn default_btree_opclass(oid: i64) -> i64 {
    match oid {
        23 => 1978,
        21 => 1979,
        26 => 1981,
        1082 => 3122,
        701 => 3123,
        20 => 3124,
        1700 => 3125,
        25 | 1043 => 3126,
        1184 => 3127,
        1114 => 3128,
        16 => 10003,
        1042 => 10004,
        17 => 10006,
        18 => 10007,
        700 => 10012,
        1186 => 10022,
        19 => 10028,
        1083 => 10038,
        1266 => 10041,
        2950 => 10065,
        3802 => 10088,
        _ => 0,
    }
}
