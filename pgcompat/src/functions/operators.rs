//! Array and jsonb operators: array construction, `@>`/`<@`/`&&`, subscripts, `->`/`->>`/`#>`, `||`, `-`,
//! `?|`/`?&`, interval comparison, and the `array_agg` aggregate.

use std::sync::Arc;

use rusqlite::functions::{Aggregate, Context};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use super::{flags_pure, owned, raise, type_arg, SessionState};
use crate::error::PgError;
use crate::types::PgType;
use crate::value::{self, datetime};

pub(super) fn install_arrays(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_array", -1, flags_pure(), move |ctx| {
        let Some(element) = type_arg(ctx, 0)? else {
            return Ok(Value::Null);
        };
        let tz = s.time_zone();
        if element.is_array() {
            // ARRAY[ARRAY[1, 2], ARRAY[3, 4]]: one dimension more.
            let rows: Vec<Value> = (1..ctx.len()).map(|i| owned(ctx.get_raw(i))).collect();
            return nest(element, rows, &tz).map_err(raise);
        }
        let mut printed = Vec::with_capacity(ctx.len().saturating_sub(1));
        for i in 1..ctx.len() {
            let stored = value::coerce(element, owned(ctx.get_raw(i)), &tz).map_err(raise)?;
            printed.push(value::output(element, &stored, &tz));
        }
        Ok(Value::Text(value::array::format(&printed)))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_array_contains", 3, flags_pure(), move |ctx| {
        let Some(array) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let needle = owned(ctx.get_raw(1));
        if matches!(needle, Value::Null) {
            return Ok(None);
        }
        let element = type_arg(ctx, 2)?.unwrap_or(PgType::TEXT);
        let tz = s.time_zone();
        let elements = value::array::stored_elements(element.array(), &array, &tz).map_err(raise)?;
        let needle = value::coerce(element, needle, &tz).map_err(raise)?;
        let key = value::output(element, &needle, &tz);
        let mut saw_null = false;
        for e in &elements {
            if matches!(e, Value::Null) {
                saw_null = true;
            } else if value::output(element, e, &tz) == key {
                return Ok(Some(true));
            }
        }
        Ok(if saw_null { None } else { Some(false) })
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_array_get", 3, flags_pure(), move |ctx| {
        let (Some(array), Some(index)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<i64>>(1)?) else {
            return Ok(Value::Null);
        };
        let element = type_arg(ctx, 2)?.unwrap_or(PgType::TEXT);
        let elements = value::array::stored_elements(element.array(), &array, &s.time_zone()).map_err(raise)?;
        // PostgreSQL arrays count from 1; out of range is NULL.
        Ok(usize::try_from(index - 1)
            .ok()
            .and_then(|i| elements.get(i).cloned())
            .unwrap_or(Value::Null))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_array_to_json", 2, flags_pure(), move |ctx| {
        let Some(array) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let element = type_arg(ctx, 1)?.unwrap_or(PgType::TEXT);
        let items = array_json_items(&array, element, &s.time_zone()).map_err(raise)?;
        Ok(Some(serde_json::Value::Array(items).to_string()))
    })?;
    for (name, all) in [("pg_array_contains_all", true), ("pg_array_overlap", false)] {
        let s = state.clone();
        conn.create_scalar_function(name, 3, flags_pure(), move |ctx| {
            let (Some(a), Some(b)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
                return Ok(None);
            };
            let element = type_arg(ctx, 2)?.unwrap_or(PgType::TEXT);
            let tz = s.time_zone();
            let printed = |text: &str| -> rusqlite::Result<Vec<Option<String>>> {
                let values = value::array::stored_elements(element.array(), text, &tz).map_err(raise)?;
                Ok(values.iter().map(|v| value::output(element, v, &tz)).collect())
            };
            let (a, b) = (printed(&a)?, printed(&b)?);
            // NULL elements never match, as in PostgreSQL.
            let found = |x: &Option<String>| x.is_some() && a.contains(x);
            Ok(Some(if all { b.iter().all(found) } else { b.iter().any(found) }))
        })?;
    }
    conn.create_scalar_function("pg_jsonb_path", 3, flags_pure(), |ctx| {
        let (Some(doc), Some(path)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let as_text = ctx.get::<String>(2)? == "text";
        let steps = text_array(&path)?;
        value::json::get_path(&doc, &steps, as_text).map_err(raise)
    })?;
    conn.create_scalar_function("pg_json_get", 3, flags_pure(), |ctx| {
        let Some(doc) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let key = match ctx.get_raw(1) {
            ValueRef::Null => return Ok(None),
            ValueRef::Integer(i) => i.to_string(),
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => return Ok(None),
        };
        let as_text = ctx.get::<String>(2)? == "text";
        value::json::get_path(&doc, &[key], as_text).map_err(raise)
    })?;
    conn.create_scalar_function("pg_jsonb_concat", 2, flags_pure(), |ctx| {
        let (Some(a), Some(b)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        value::json::concat(&a, &b).map(Some).map_err(raise)
    })?;
    conn.create_scalar_function("pg_jsonb_delete", 2, flags_pure(), |ctx| {
        let Some(doc) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let result = match ctx.get_raw(1) {
            ValueRef::Null => return Ok(None),
            ValueRef::Integer(i) => value::json::delete(&doc, &[], Some(i)),
            ValueRef::Text(t) => {
                let text = String::from_utf8_lossy(t).into_owned();
                let keys = if text.starts_with('{') && text.ends_with('}') {
                    text_array(&text)?
                } else {
                    vec![text]
                };
                value::json::delete(&doc, &keys, None)
            }
            _ => return Ok(None),
        };
        result.map(Some).map_err(raise)
    })?;
    conn.create_scalar_function("pg_interval_cmp", 2, flags_pure(), |ctx| {
        let (Some(a), Some(b)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let a = datetime::Interval::parse(&a).map_err(raise)?;
        let b = datetime::Interval::parse(&b).map_err(raise)?;
        Ok(Some(a.total_micros().cmp(&b.total_micros()) as i64))
    })?;
    conn.create_scalar_function("pg_jsonb_delete_path", 2, flags_pure(), |ctx| {
        let (Some(doc), Some(path)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        value::json::delete_path(&doc, &text_array(&path)?)
            .map(Some)
            .map_err(raise)
    })?;
    conn.create_scalar_function("pg_jsonb_has_keys", 3, flags_pure(), |ctx| {
        let (Some(doc), Some(keys)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let all = ctx.get::<String>(2)? == "all";
        let keys = text_array(&keys)?;
        let mut found = keys.iter().map(|k| value::json::has_key(&doc, k));
        let result = if all {
            found.try_fold(true, |acc, f| f.map(|f| acc && f))
        } else {
            found.try_fold(false, |acc, f| f.map(|f| acc || f))
        };
        result.map(Some).map_err(raise)
    })?;
    conn.create_aggregate_function("pg_array_agg", 2, flags_pure(), ArrayAgg { state: state.clone() })?;
    // `array_agg(DISTINCT x)` and `string_agg(DISTINCT x, sep)`: SQLite's DISTINCT takes one argument, so
    // the arguments come packed in one JSON array (`[type, x]`, `[x, sep]`).
    conn.create_aggregate_function("pg_array_agg_packed", 1, flags_pure(), PackedArrayAgg { state })?;
    conn.create_aggregate_function("pg_string_agg_packed", 1, flags_pure(), PackedStringAgg)?;
    conn.create_scalar_function("pg_jsonb_norm", 1, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        value::json::normalize_jsonb(&text).map(Some).map_err(raise)
    })?;
    Ok(())
}

/// The elements of a `text[]` literal (`{a,b,0}`), for JSON paths and key lists.
fn text_array(text: &str) -> rusqlite::Result<Vec<String>> {
    let elements = value::array::parse(text).ok_or_else(|| {
        raise(PgError::new(
            crate::error::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        ))
    })?;
    Ok(elements.into_iter().map(Option::unwrap_or_default).collect())
}

/// `array_agg(x)`: the values in the order given, as an array of their type.
struct ArrayAgg {
    state: Arc<SessionState>,
}

impl Aggregate<(Option<PgType>, Vec<Option<String>>), Option<String>> for ArrayAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<(Option<PgType>, Vec<Option<String>>)> {
        Ok((None, Vec::new()))
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut (Option<PgType>, Vec<Option<String>>)) -> rusqlite::Result<()> {
        // An array argument keeps its type: the result is one dimension more (`finalize`).
        let argument = type_arg(ctx, 0)?.unwrap_or(PgType::TEXT);
        acc.0 = Some(argument);
        let element = if argument.is_array() {
            argument
        } else {
            argument.element()
        };
        if acc.1.len() >= value::array::ELEMENTS_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "array size exceeds the maximum allowed",
            )));
        }
        let tz = self.state.time_zone();
        let stored = value::coerce(element, owned(ctx.get_raw(1)), &tz).map_err(raise)?;
        acc.1.push(value::output(element, &stored, &tz));
        Ok(())
    }

    fn finalize(
        &self,
        _: &mut Context<'_>,
        acc: Option<(Option<PgType>, Vec<Option<String>>)>,
    ) -> rusqlite::Result<Option<String>> {
        let Some((argument, values)) = acc.filter(|(_, v)| !v.is_empty()) else {
            return Ok(None);
        };
        match argument {
            Some(array) if array.is_array() => {
                let rows = values.into_iter().map(|v| v.map_or(Value::Null, Value::Text)).collect();
                match nest(array, rows, &self.state.time_zone()).map_err(raise)? {
                    Value::Text(text) => Ok(Some(text)),
                    _ => Ok(None),
                }
            }
            _ => Ok(Some(value::array::format(&values))),
        }
    }
}

/// A packed aggregate argument: the JSON array its arguments were packed in.
fn unpack(ctx: &Context<'_>) -> rusqlite::Result<Vec<serde_json::Value>> {
    let text: String = ctx.get(0)?;
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Array(items)) => Ok(items),
        _ => Err(raise(PgError::new(
            crate::error::INTERNAL_ERROR,
            "a packed aggregate argument is not a JSON array",
        ))),
    }
}

/// A JSON scalar back as the SQLite value it was packed from.
fn unpacked_value(item: &serde_json::Value) -> Value {
    match item {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Integer(i64::from(*b)),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Value::Integer)
            .or_else(|| n.as_f64().map(Value::Real))
            .unwrap_or(Value::Null),
        serde_json::Value::String(s) => Value::Text(s.clone()),
        other => Value::Text(other.to_string()),
    }
}

/// `array_agg(DISTINCT x)` over `[type, x]` packs.
struct PackedArrayAgg {
    state: Arc<SessionState>,
}

impl Aggregate<Vec<Option<String>>, Option<String>> for PackedArrayAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Vec<Option<String>>> {
        Ok(Vec::new())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Vec<Option<String>>) -> rusqlite::Result<()> {
        let items = unpack(ctx)?;
        let element = items
            .first()
            .and_then(|t| t.as_str())
            .and_then(PgType::from_catalog)
            .unwrap_or(PgType::TEXT)
            .element();
        if acc.len() >= value::array::ELEMENTS_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "array size exceeds the maximum allowed",
            )));
        }
        let tz = self.state.time_zone();
        let raw = items.get(1).map_or(Value::Null, unpacked_value);
        let stored = value::coerce(element, raw, &tz).map_err(raise)?;
        acc.push(value::output(element, &stored, &tz));
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Vec<Option<String>>>) -> rusqlite::Result<Option<String>> {
        Ok(acc.filter(|v| !v.is_empty()).map(|v| value::array::format(&v)))
    }
}

/// `string_agg(DISTINCT x, sep)` over `[x, sep]` packs: NULLs skipped, each later value after its
/// separator.
struct PackedStringAgg;

impl Aggregate<Option<String>, Option<String>> for PackedStringAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Option<String>> {
        Ok(None)
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Option<String>) -> rusqlite::Result<()> {
        let items = unpack(ctx)?;
        let text = |i: usize| match items.get(i).map(unpacked_value) {
            Some(Value::Text(t)) => Some(t),
            Some(Value::Integer(n)) => Some(n.to_string()),
            Some(Value::Real(f)) => Some(value::format_float8(f)),
            _ => None,
        };
        let Some(item) = text(0) else {
            return Ok(());
        };
        let out = match acc.take() {
            None => item,
            Some(mut so_far) => {
                so_far.push_str(&text(1).unwrap_or_default());
                so_far.push_str(&item);
                so_far
            }
        };
        if out.len() > crate::VALUE_BYTES_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "string_agg result exceeds the maximum value size",
            )));
        }
        *acc = Some(out);
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Option<String>>) -> rusqlite::Result<Option<String>> {
        Ok(acc.flatten())
    }
}

/// The elements of an array's text as JSON values: integers as numbers, doubles as numbers (NULL if not
/// finite), anything else as its PostgreSQL text.
pub(super) fn array_json_items(
    array: &str,
    element: PgType,
    tz: &jiff::tz::TimeZone,
) -> Result<Vec<serde_json::Value>, PgError> {
    let elements = value::array::stored_elements(element.array(), array, tz)?;
    Ok(elements
        .iter()
        .map(|v| match v {
            Value::Null => serde_json::Value::Null,
            Value::Integer(i) => serde_json::Value::from(*i),
            Value::Real(f) => {
                serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, serde_json::Value::Number)
            }
            other => serde_json::Value::String(value::output(element, other, tz).unwrap_or_default()),
        })
        .collect())
}

/// Arrays of one shape stacked into an array of one dimension more (`ARRAY[ARRAY[1,2], ARRAY[3,4]]`,
/// `array_agg` of arrays); 2202E when their shapes differ, as PostgreSQL requires them equal.
pub(super) fn nest(array_type: PgType, rows: Vec<Value>, tz: &jiff::tz::TimeZone) -> Result<Value, PgError> {
    let mismatch = || {
        PgError::new(
            crate::error::ARRAY_SUBSCRIPT_ERROR,
            "multidimensional arrays must have array expressions with matching dimensions",
        )
    };
    let mut dims: Option<Vec<usize>> = None;
    let mut elements = Vec::new();
    let mut count = 0;
    for row in rows {
        let Value::Text(text) = value::coerce(array_type, row, tz)? else {
            return Err(mismatch());
        };
        let shaped = value::array::parse_shaped(&text).ok_or_else(mismatch)?;
        match &dims {
            None => dims = Some(shaped.dims.clone()),
            Some(d) if *d != shaped.dims => return Err(mismatch()),
            Some(_) => {}
        }
        elements.extend(shaped.elements);
        count += 1;
        if elements.len() > value::array::ELEMENTS_MAX {
            return Err(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "array size exceeds the maximum allowed",
            ));
        }
    }
    let inner = dims.unwrap_or_default();
    if inner.is_empty() {
        return Ok(Value::Text("{}".to_owned()));
    }
    let mut all = vec![count];
    all.extend(inner);
    if all.len() > value::array::DIMENSIONS_MAX {
        return Err(PgError::new(
            crate::error::PROGRAM_LIMIT_EXCEEDED,
            "number of array dimensions exceeds the maximum allowed",
        ));
    }
    Ok(Value::Text(value::array::Shaped { dims: all, elements }.format()))
}
