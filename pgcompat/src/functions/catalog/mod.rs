//! The functions psql and the ORMs call on the catalog (`format_type`, `pg_get_userbyid`,
//! `pg_table_is_visible`, privileges, sizes…) and the pure helpers the catalog views of
//! [`crate::pg_catalog`] are built with (`_pgc_constraints` reads a `CREATE TABLE` text, `_pgc_default` turns
//! a stored default back into PostgreSQL's text). Functions that must look something up in the catalog
//! (`pg_get_indexdef`, `pg_get_constraintdef`, `pg_get_viewdef`, `to_regclass`, `::regclass`) are rewritten
//! by the translator into subqueries on the views instead.

mod constraints;
mod deparse;
pub(super) mod helpers;
pub(crate) mod names;
pub(crate) mod session_objects;
#[cfg(test)]
mod tests;
pub(crate) mod viewdef;

use std::sync::Arc;

use rusqlite::types::Value;
use rusqlite::Connection;

use super::{flags_pure, flags_session, raise, SessionState};
use crate::error::PgError;
use crate::types::{Base, Modifier, PgType};

pub(crate) use deparse::quote_ident as pg_quote_ident;
pub(in crate::functions) use helpers::split_qualified;

/// The OID PostgreSQL gives the owner of `public` (`pg_database_owner`).
const DATABASE_OWNER_OID: i64 = 6171;
/// The session user's OID.
const USER_OID: i64 = 10;
/// What the size functions answer: one page (the layer has no per-relation sizes).
const RELATION_SIZE_ESTIMATE_BYTES: i64 = 8192;

/// Registers the catalog functions on `conn`.
pub(crate) fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    helpers::install(conn, state.clone())?;
    session_objects::install(conn, state.clone())?;
    let s = state.clone();
    conn.create_scalar_function("format_type", 2, flags_session(), move |ctx| {
        let Some(oid) = ctx.get::<Option<i64>>(0)? else {
            return Ok(None);
        };
        let typmod = ctx.get::<Option<i64>>(1)?.unwrap_or(-1);
        Ok(Some(session_format_type(&s, oid, typmod)))
    })?;
    // A regtype array (OIDs) as the types' names, as PostgreSQL prints one.
    let s = state.clone();
    conn.create_scalar_function("_pgc_regtype_names", 1, flags_session(), move |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let Some(oids) = crate::value::array::parse(&text) else {
            return Err(raise(PgError::new(
                crate::error::INVALID_TEXT_REPRESENTATION,
                format!("malformed array literal: \"{text}\""),
            )));
        };
        let names: Vec<Option<String>> = oids
            .into_iter()
            .map(|oid| {
                oid.and_then(|oid| oid.parse::<i64>().ok())
                    .map(|oid| session_format_type(&s, oid, -1))
            })
            .collect();
        Ok(Some(crate::value::array::format(&names)))
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
    // Privileges are not modelled: every object has its default ACL, which the catalogs show as NULL (as
    // PostgreSQL does for an object never granted on); `acldefault` spells that default as PostgreSQL 15 does.
    let s = state.clone();
    conn.create_scalar_function("acldefault", 2, flags_session(), move |ctx| {
        let (Some(kind), Some(owner)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<i64>>(1)?) else {
            return Ok(None);
        };
        let owner = match owner {
            USER_OID => s.user.clone(),
            DATABASE_OWNER_OID => "pg_database_owner".to_owned(),
            other => format!("{other}"),
        };
        default_acl(&kind, &owner).map(Some).ok_or_else(|| {
            rusqlite::Error::UserFunctionError(Box::new(crate::error::PgError::new(
                crate::error::INTERNAL_ERROR,
                format!("unrecognized object type abbreviation: {kind}"),
            )))
        })
    })?;
    // A catalog's `int2vector`/`oidvector` text (`1 2`) as an array's (`{1,2}`).
    conn.create_scalar_function("pg_vector_to_array", 1, flags_pure(), |ctx| {
        Ok(ctx
            .get::<Option<String>>(0)?
            .map(|text| format!("{{{}}}", text.split_whitespace().collect::<Vec<_>>().join(","))))
    })?;
    // `pg_options_to_table`'s rows: a `text[]` of `name=value` options as a JSON object.
    conn.create_scalar_function("pg_options_json", 1, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let elements = crate::value::array::parse(&text).ok_or_else(|| {
            rusqlite::Error::UserFunctionError(Box::new(crate::error::PgError::new(
                crate::error::INVALID_TEXT_REPRESENTATION,
                format!("malformed array literal: \"{text}\""),
            )))
        })?;
        let mut object = serde_json::Map::new();
        for option in elements.into_iter().flatten() {
            let (name, value) = option.split_once('=').unwrap_or((option.as_str(), ""));
            object.insert(name.to_owned(), serde_json::Value::String(value.to_owned()));
        }
        Ok(Some(serde_json::Value::Object(object).to_string()))
    })?;
    // The stored text is PostgreSQL's (see `deparse`); pretty, without the parentheses around the whole
    // expression, as PostgreSQL prints it (psql's `\d` asks so: `generated always as (a * 2) stored`).
    conn.create_scalar_function("pg_get_expr", 2, flags_pure(), |ctx| ctx.get::<Option<String>>(0))?;
    conn.create_scalar_function("pg_get_expr", 3, flags_pure(), |ctx| {
        let text = ctx.get::<Option<String>>(0)?;
        let pretty = ctx.get::<Option<bool>>(2)?.unwrap_or(false);
        Ok(text.map(|text| {
            if pretty {
                strip_outer_parentheses(&text).to_owned()
            } else {
                text
            }
        }))
    })?;
    // `pg_table_is_visible(oid)` is rewritten to this call on the relation's visibility (`catalog_refs`).
    conn.create_scalar_function("pg_table_is_visible", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<i64>>(0)?.map(|visible| visible != 0))
    })?;
    for name in [
        "pg_type_is_visible",
        "pg_function_is_visible",
        // Every collation is pg_catalog's, which is always on the search path.
        "pg_collation_is_visible",
    ] {
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
        // `pg_trigger` is empty: no trigger has a definition to print.
        ("pg_get_triggerdef", 1),
        ("pg_get_triggerdef", 2),
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
    i64::from(ty.type_modifier())
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
/// `format_type(oid, typmod)` in a session: an enum type (or its array) of the database's by its name,
/// qualified where the path does not reach it; a built-in one as [`format_type`] names it.
fn session_format_type(s: &SessionState, oid: i64, typmod: i64) -> String {
    let enum_name = u32::try_from(oid).ok().and_then(|oid| {
        let is_array = oid % crate::enums::ENUM_OID_STRIDE == 1;
        super::enums::type_name(s, if is_array { oid - 1 } else { oid }).map(|name| {
            let shown = names::Namer::of(s).enum_type(&name);
            if is_array {
                format!("{shown}[]")
            } else {
                shown
            }
        })
    });
    enum_name.unwrap_or_else(|| format_type(oid, typmod))
}

pub(crate) fn format_type(oid: i64, typmod: i64) -> String {
    // No type (`format_type(0, NULL)`, `0::regtype`): PostgreSQL prints a dash.
    if oid == 0 {
        return "-".to_owned();
    }
    if oid == 18 {
        return "\"char\"".to_owned();
    }
    if let Some((name, _)) = helpers::PSEUDO_TYPES.iter().find(|(_, o)| *o == oid) {
        return (*name).to_owned();
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
    if oid >= i64::from(crate::enums::ENUM_OID_BASE) {
        return (field == "data_type").then(|| Value::Text("USER-DEFINED".to_owned()));
    }
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

/// PostgreSQL 15's default ACL of an object of `kind` (`acldefault`'s letter) owned by `owner`, as text.
fn default_acl(kind: &str, owner: &str) -> Option<String> {
    let owner_only = |privileges: &str| format!("{{{owner}={privileges}/{owner}}}");
    let public_too = |public: &str, own: &str| format!("{{={public}/{owner},{owner}={own}/{owner}}}");
    Some(match kind {
        "n" => owner_only("UC"),
        "r" => owner_only("arwdDxt"),
        "s" => owner_only("rwU"),
        "f" => public_too("X", "X"),
        "l" | "T" => public_too("U", "U"),
        "d" => public_too("Tc", "CTc"),
        "F" | "S" => owner_only("U"),
        "L" => owner_only("rw"),
        "t" => owner_only("C"),
        "c" => "{}".to_owned(),
        _ => return None,
    })
}

/// `text` without one pair of parentheses that encloses all of it (`(a * 2)` → `a * 2`; `(a) + (b)` stays),
/// outside quotes.
fn strip_outer_parentheses(text: &str) -> &str {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'(') || bytes.last() != Some(&b')') {
        return text;
    }
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'\'' | b'"' => quote = Some(b),
                b'(' => depth += 1,
                b')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && i + 1 < bytes.len() {
                        return text;
                    }
                }
                _ => {}
            },
        }
    }
    &text[1..text.len() - 1]
}
