//! Enum types on a session's connection: each type's collation (its labels' declaration order), the label
//! check of a value cast or assigned to the type, and `enum_range`/`enum_first`/`enum_last` (called as
//! `pg_enum_range(oid …)` and so on by the translator, which knows the argument's type).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::types::Value;
use rusqlite::Connection;

use super::{flags_session, raise, SessionState};
use crate::enums::{collation_name, EnumCatalog, EnumType};
use crate::error::{PgError, CANNOT_COERCE, INVALID_TEXT_REPRESENTATION};
use crate::types::{Base, PgType};

/// Takes the database's enum types for this session (after the catalog was read again): its functions see
/// them, and each type's collation is registered on the connection with the type's order.
pub(crate) fn install_catalog(
    conn: &Connection,
    state: &SessionState,
    enums: &Arc<EnumCatalog>,
) -> rusqlite::Result<()> {
    *state.enums.write() = enums.clone();
    for ty in enums.all() {
        register_collation(conn, ty)?;
    }
    Ok(())
}

/// Registers one type's collation on the connection (also for a type a text is making, before the
/// statements after it in that text run: a table made with a column of the type names the collation).
pub(crate) fn register_collation(conn: &Connection, ty: &EnumType) -> rusqlite::Result<()> {
    let orders: HashMap<String, f64> = ty.sort_orders();
    conn.create_collation(collation_name(ty.oid).as_str(), move |a: &str, b: &str| {
        compare(&orders, a, b)
    })
}

/// Labels in their sort order; one the type does not know (a row read by a session whose catalog is older
/// than the label) after every known one, by its text.
fn compare(orders: &HashMap<String, f64>, a: &str, b: &str) -> Ordering {
    match (orders.get(a), orders.get(b)) {
        (Some(x), Some(y)) => x.total_cmp(y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The type's name for messages, as `format_type` prints it.
pub(crate) fn type_name(state: &SessionState, oid: u32) -> Option<String> {
    state.enums.read().by_oid(oid).map(|t| t.name.clone())
}

/// A value meeting an enum type (a cast or an assignment): a label of the type (22P02 otherwise), never a
/// number (42846). A type the session does not know yet lets the text through.
pub(crate) fn check(state: &SessionState, target: PgType, value: &Value) -> Result<(), PgError> {
    let Base::Enum(oid) = target.base() else {
        return Ok(());
    };
    let enums = state.enums.read();
    let Some(ty) = enums.by_oid(oid) else {
        return Ok(());
    };
    if target.is_array() {
        // An array of the type: each element a label (the array's own syntax is the cast's to check).
        let Value::Text(text) = value else {
            return Ok(());
        };
        let Some(elements) = crate::value::array::parse(text) else {
            return Ok(());
        };
        return match elements.iter().flatten().find(|label| !ty.has(label)) {
            Some(label) => Err(PgError::new(
                INVALID_TEXT_REPRESENTATION,
                format!("invalid input value for enum {}: \"{label}\"", ty.name),
            )),
            None => Ok(()),
        };
    }
    match value {
        Value::Null => Ok(()),
        Value::Text(text) if ty.has(text) => Ok(()),
        Value::Text(text) => Err(PgError::new(
            INVALID_TEXT_REPRESENTATION,
            format!("invalid input value for enum {}: \"{text}\"", ty.name),
        )),
        Value::Integer(_) => Err(PgError::new(
            CANNOT_COERCE,
            format!("cannot cast type integer to {}", ty.name),
        )),
        _ => Err(PgError::new(
            CANNOT_COERCE,
            format!("cannot cast this value to {}", ty.name),
        )),
    }
}

fn with_type<T>(state: &SessionState, oid: i64, f: impl FnOnce(&EnumType) -> T) -> rusqlite::Result<T> {
    let enums = state.enums.read();
    let ty = u32::try_from(oid)
        .ok()
        .and_then(|oid| enums.by_oid(oid))
        .ok_or_else(|| {
            raise(PgError::new(
                crate::error::UNDEFINED_OBJECT,
                format!("type with OID {oid} does not exist"),
            ))
        })?;
    Ok(f(ty))
}

/// An array's text of labels, as PostgreSQL prints an enum array (an element quoted when it is empty,
/// `NULL`, or holds a delimiter, a quote, a backslash or white space).
fn array_text(labels: &[&str]) -> String {
    let items: Vec<String> = labels
        .iter()
        .map(|l| {
            let plain = !l.is_empty()
                && !l.eq_ignore_ascii_case("null")
                && !l
                    .chars()
                    .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
            if plain {
                (*l).to_owned()
            } else {
                format!("\"{}\"", l.replace('\\', "\\\\").replace('"', "\\\""))
            }
        })
        .collect();
    format!("{{{}}}", items.join(","))
}

/// The result type of an enum function called on the type `oid` (the translator's typer asks).
pub(super) fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    let _ = args;
    matches!(name, "pg_enum_range" | "pg_enum_first" | "pg_enum_last").then_some(PgType::TEXT)
}

/// Registers the enum functions.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_enum_range", 1, flags_session(), move |ctx| {
        let oid: i64 = ctx.get(0)?;
        with_type(&s, oid, |t| array_text(&t.sorted()))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_enum_range", 3, flags_session(), move |ctx| {
        let oid: i64 = ctx.get(0)?;
        let low: Option<String> = ctx.get(1)?;
        let high: Option<String> = ctx.get(2)?;
        with_type(&s, oid, |t| {
            let sorted = t.sorted();
            let from = low
                .as_deref()
                .and_then(|l| sorted.iter().position(|x| *x == l))
                .unwrap_or(0);
            let to = high
                .as_deref()
                .and_then(|h| sorted.iter().position(|x| *x == h))
                .unwrap_or(sorted.len().saturating_sub(1));
            array_text(sorted.get(from..=to).unwrap_or_default())
        })
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_enum_first", 1, flags_session(), move |ctx| {
        let oid: i64 = ctx.get(0)?;
        with_type(&s, oid, |t| t.sorted().first().map(|l| (*l).to_owned()))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_enum_last", 1, flags_session(), move |ctx| {
        let oid: i64 = ctx.get(0)?;
        with_type(&s, oid, |t| t.sorted().last().map(|l| (*l).to_owned()))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_labels_sort_after_known_ones() {
        let orders: HashMap<String, f64> = [("b".to_owned(), 1.0), ("a".to_owned(), 2.0)].into_iter().collect();
        assert_eq!(compare(&orders, "b", "a"), Ordering::Less);
        assert_eq!(compare(&orders, "a", "zz"), Ordering::Less);
        assert_eq!(compare(&orders, "zz", "yy"), Ordering::Greater);
        assert_eq!(array_text(&["sad", "a b", "ok"]), "{sad,\"a b\",ok}");
    }
}
