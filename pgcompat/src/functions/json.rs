//! JSON functions with PostgreSQL 15's results: building (`json[b]_build_object`, `json[b]_build_array`,
//! `to_json[b]`, the `json[b]_agg` and `json[b]_object_agg` aggregates), inspecting (`json[b]_typeof`,
//! `json[b]_array_length`, `json[b]_extract_path[_text]`), editing (`jsonb_set`, `jsonb_insert`,
//! `jsonb_strip_nulls`), `jsonb_pretty`, and the bodies of the `@>`, `<@` and `?` operators.
//!
//! A SQL value becomes JSON by its PostgreSQL type (the typed call of `extra` says it): booleans, stored
//! 0 and 1, become `true` and `false`; numbers stay numbers; `json` and `jsonb` values are embedded; dates
//! and timestamps take their ISO 8601 form; arrays become JSON arrays; anything else is a string. `json`
//! results keep PostgreSQL's spacing (`{"a" : 1}`, `[1,2]` for a SQL array); `jsonb` results are in the
//! normalized form of [`crate::value::json`] (keys sorted, the last duplicate kept).

use std::sync::Arc;

use jiff::tz::TimeZone;
use rusqlite::functions::{Aggregate, Context};
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{check_size, define, raise, value_text, Args, Purity};
use crate::error::{PgError, INVALID_PARAMETER_VALUE, INVALID_TEXT_REPRESENTATION};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::json::Node as J;
use crate::value::json::Parser;
use crate::value::numeric::Decimal;

/// Which of the two JSON types a function builds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    Json,
    Jsonb,
}

/// JSON text parsed; 22P02 if it is not JSON.
fn parse(text: &str) -> Result<J, PgError> {
    match crate::value::json::parse_node(text) {
        Some(node) => Ok(node),
        None => Err(PgError::new(
            INVALID_TEXT_REPRESENTATION,
            "invalid input syntax for type json",
        )),
    }
}

/// The top-level children of a JSON text, each as the text it was written with (for `json` paths).
enum RawChildren<'a> {
    Obj(Vec<(String, &'a str)>),
    Arr(Vec<&'a str>),
    Scalar,
}

fn raw_children(text: &str) -> Option<RawChildren<'_>> {
    let mut p = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    p.skip_ws();
    let child = |p: &mut Parser<'_>| -> Option<(usize, usize)> {
        p.skip_ws();
        let start = p.at;
        p.value(1)?;
        Some((start, p.at))
    };
    match p.bytes.get(p.at)? {
        b'[' => {
            p.at += 1;
            let mut items = Vec::new();
            p.skip_ws();
            if p.bytes.get(p.at) == Some(&b']') {
                return Some(RawChildren::Arr(items));
            }
            loop {
                let (s, e) = child(&mut p)?;
                items.push(text.get(s..e)?);
                p.skip_ws();
                match p.bytes.get(p.at)? {
                    b',' => p.at += 1,
                    _ => return Some(RawChildren::Arr(items)),
                }
            }
        }
        b'{' => {
            p.at += 1;
            let mut fields = Vec::new();
            p.skip_ws();
            if p.bytes.get(p.at) == Some(&b'}') {
                return Some(RawChildren::Obj(fields));
            }
            loop {
                p.skip_ws();
                let key = p.string()?;
                p.skip_ws();
                p.at += 1;
                let (s, e) = child(&mut p)?;
                fields.push((key, text.get(s..e)?));
                p.skip_ws();
                match p.bytes.get(p.at)? {
                    b',' => p.at += 1,
                    _ => return Some(RawChildren::Obj(fields)),
                }
            }
        }
        _ => Some(RawChildren::Scalar),
    }
}

fn write_string(out: &mut String, s: &str) {
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// jsonb's text: keys sorted (shorter first, then bytewise), the last duplicate kept, `", "` and `": "`.
fn write_jsonb(out: &mut String, node: &J) {
    match node {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => out.push_str(n),
        J::String(s) => write_string(out, s),
        J::Raw(r) => match parse(r) {
            Ok(node) => write_jsonb(out, &node),
            Err(_) => out.push_str("null"),
        },
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_jsonb(out, item);
            }
            out.push(']');
        }
        J::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in sorted_fields(fields).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, key);
                out.push_str(": ");
                write_jsonb(out, value);
            }
            out.push('}');
        }
    }
}

/// An object's fields as jsonb keeps them: the last of duplicate keys, sorted shorter first then bytewise.
fn sorted_fields(fields: &[(String, J)]) -> Vec<(&String, &J)> {
    let mut kept: Vec<(&String, &J)> = Vec::with_capacity(fields.len());
    for (key, value) in fields {
        match kept.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => kept.push((key, value)),
        }
    }
    kept.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())));
    kept
}

/// A value inside a `json` result: SQL arrays compact (`[1,2]`), as PostgreSQL's `array_to_json`.
fn write_json(out: &mut String, node: &J) {
    match node {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => out.push_str(n),
        J::String(s) => write_string(out, s),
        J::Raw(r) => out.push_str(r),
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        J::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_json(out, value);
            }
            out.push('}');
        }
    }
}

fn jsonb_text(node: &J) -> Result<Value, PgError> {
    let mut out = String::new();
    write_jsonb(&mut out, node);
    check_size(out.len())?;
    Ok(Value::Text(out))
}

fn json_text(node: &J) -> String {
    let mut out = String::new();
    write_json(&mut out, node);
    out
}

/// A number's text as JSON: NaN and the infinities become strings, as in PostgreSQL.
fn number(text: String) -> J {
    let lower = text.to_ascii_lowercase();
    if lower.contains("nan") || lower.contains("inf") {
        J::String(text)
    } else {
        J::Number(text)
    }
}

/// A date, timestamp or timestamptz printed as PostgreSQL prints it in JSON (ISO 8601, `T`, `+HH:MM`).
fn iso_datetime(text: &str, base: Base) -> String {
    if text.contains("infinity") || base == Base::Date {
        return text.to_owned();
    }
    let mut out = text.replacen(' ', "T", 1);
    if base == Base::Timestamptz {
        // The offset after the time: `+00` → `+00:00`.
        if let Some(at) = out.rfind(['+', '-']).filter(|at| *at > 10) {
            if out.len() - at == 3 {
                out.push_str(":00");
            }
        }
    }
    out
}

/// An element of a SQL array (its text form) as JSON, by the element's type.
fn element_node(text: &str, base: Base, flavor: Flavor) -> Result<J, PgError> {
    Ok(match base {
        Base::Int2 | Base::Int4 | Base::Int8 | Base::Numeric | Base::Float4 | Base::Float8 | Base::Oid => {
            number(text.to_owned())
        }
        Base::Bool => J::Bool(crate::value::parse_bool(text)?),
        Base::Json | Base::Jsonb => match flavor {
            Flavor::Json => J::Raw(text.to_owned()),
            Flavor::Jsonb => parse(text)?,
        },
        Base::Date | Base::Timestamp | Base::Timestamptz => J::String(iso_datetime(text, base)),
        _ => J::String(text.to_owned()),
    })
}

/// A SQL value of type `ty` (unknown: read from the SQLite value) as JSON.
fn to_node(value: &Value, ty: Option<PgType>, tz: &TimeZone, flavor: Flavor) -> Result<J, PgError> {
    if matches!(value, Value::Null) {
        return Ok(J::Null);
    }
    let Some(ty) = ty else {
        return Ok(match value {
            Value::Integer(i) => J::Number(i.to_string()),
            Value::Real(f) => number(crate::value::format_float8(*f)),
            other => J::String(value_text(other).unwrap_or_default()),
        });
    };
    let text = crate::value::output(ty, value, tz).unwrap_or_default();
    if ty.is_array() {
        let elements = crate::value::array::parse(&text)
            .ok_or_else(|| PgError::unsupported("a multidimensional array as JSON"))?;
        let items = elements
            .iter()
            .map(|e| match e {
                None => Ok(J::Null),
                Some(t) => element_node(t, ty.base(), flavor),
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(J::Array(items));
    }
    element_node(&text, ty.base(), flavor)
}

/// Whether a value of `ty` may be a jsonb object key (scalars only).
fn scalar_key(ty: Option<PgType>) -> bool {
    ty.is_none_or(|t| !t.is_array() && !matches!(t.base(), Base::Json | Base::Jsonb))
}

/// The key of an object: argument `i` as text; 22023 if NULL.
fn key_text(args: &Args<'_, '_>, i: usize, tz: &TimeZone) -> Result<String, PgError> {
    let value = args.value(i);
    if matches!(value, Value::Null) {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            format!("argument {} cannot be null", i + 1),
        ));
    }
    Ok(match args.ty(i) {
        Some(t) => crate::value::output(t, &value, tz).unwrap_or_default(),
        None => value_text(&value).unwrap_or_default(),
    })
}

fn build_object(args: &Args<'_, '_>, state: &SessionState, flavor: Flavor) -> Result<Value, PgError> {
    if args.len() % 2 != 0 {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "argument list must have even number of elements",
        ));
    }
    let tz = state.time_zone();
    let mut fields = Vec::with_capacity(args.len() / 2);
    let mut bytes = 0;
    for i in (0..args.len()).step_by(2) {
        if flavor == Flavor::Jsonb && !scalar_key(args.ty(i)) {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                "key value must be scalar, not array, composite, or json",
            ));
        }
        let key = key_text(args, i, &tz)?;
        let value = to_node(&args.value(i + 1), args.ty(i + 1), &tz, flavor)?;
        bytes += key.len();
        check_size(bytes)?;
        fields.push((key, value));
    }
    match flavor {
        Flavor::Jsonb => jsonb_text(&J::Object(fields)),
        Flavor::Json => {
            let mut out = String::from("{");
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(&mut out, key);
                out.push_str(" : ");
                write_json(&mut out, value);
                check_size(out.len())?;
            }
            out.push('}');
            Ok(Value::Text(out))
        }
    }
}

fn build_array(args: &Args<'_, '_>, state: &SessionState, flavor: Flavor) -> Result<Value, PgError> {
    let tz = state.time_zone();
    let items = (0..args.len())
        .map(|i| to_node(&args.value(i), args.ty(i), &tz, flavor))
        .collect::<Result<Vec<_>, _>>()?;
    match flavor {
        Flavor::Jsonb => jsonb_text(&J::Array(items)),
        Flavor::Json => {
            let texts: Vec<String> = items.iter().map(json_text).collect();
            let out = format!("[{}]", texts.join(", "));
            check_size(out.len())?;
            Ok(Value::Text(out))
        }
    }
}

fn to_json_of(args: &Args<'_, '_>, state: &SessionState, flavor: Flavor) -> Result<Value, PgError> {
    let value = args.value(0);
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    let node = to_node(&value, args.ty(0), &state.time_zone(), flavor)?;
    match flavor {
        Flavor::Jsonb => jsonb_text(&node),
        Flavor::Json => Ok(Value::Text(json_text(&node))),
    }
}

/// Argument `i` parsed as JSON; `None` for NULL.
fn json_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<J>, PgError> {
    args.text(i).map(|t| parse(&t)).transpose()
}

fn type_of(args: &Args<'_, '_>) -> Result<Value, PgError> {
    let Some(node) = json_arg(args, 0)? else {
        return Ok(Value::Null);
    };
    let name = match node {
        J::Null => "null",
        J::Bool(_) => "boolean",
        J::Number(_) => "number",
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) | J::Raw(_) => "object",
    };
    Ok(Value::Text(name.to_owned()))
}

fn array_length(args: &Args<'_, '_>) -> Result<Value, PgError> {
    match json_arg(args, 0)? {
        None => Ok(Value::Null),
        Some(J::Array(items)) => Ok(Value::Integer(items.len() as i64)),
        Some(J::Object(_)) => Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "cannot get array length of a non-array",
        )),
        Some(_) => Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "cannot get array length of a scalar",
        )),
    }
}

/// The path arguments of `json[b]_extract_path`: `None` if one is NULL (the result is then NULL).
fn variadic_path(args: &Args<'_, '_>) -> Option<Vec<String>> {
    (1..args.len()).map(|i| args.text(i)).collect()
}

/// The index an array path step names (negative counts from the end); `None` if out of range or not one.
fn array_index(step: &str, len: usize) -> Option<usize> {
    let index: i64 = step.trim().parse().ok()?;
    let len = len as i64;
    let at = if index < 0 { len + index } else { index };
    (0..len).contains(&at).then_some(at as usize)
}

fn extract_jsonb(args: &Args<'_, '_>, as_text: bool) -> Result<Value, PgError> {
    let (Some(doc), Some(path)) = (json_arg(args, 0)?, variadic_path(args)) else {
        return Ok(Value::Null);
    };
    let mut node = &doc;
    for step in &path {
        node = match node {
            J::Object(fields) => match fields.iter().rev().find(|(k, _)| k == step) {
                Some((_, v)) => v,
                None => return Ok(Value::Null),
            },
            J::Array(items) => match array_index(step, items.len()) {
                Some(at) => &items[at],
                None => return Ok(Value::Null),
            },
            _ => return Ok(Value::Null),
        };
    }
    match (node, as_text) {
        (J::Null, true) => Ok(Value::Null),
        (J::String(s), true) => Ok(Value::Text(s.clone())),
        (other, _) => jsonb_text(other),
    }
}

fn extract_json(args: &Args<'_, '_>, as_text: bool) -> Result<Value, PgError> {
    let (Some(doc), Some(path)) = (args.text(0), variadic_path(args)) else {
        return Ok(Value::Null);
    };
    parse(&doc)?;
    let mut raw: &str = doc.as_str();
    for step in &path {
        raw = match raw_children(raw) {
            Some(RawChildren::Obj(fields)) => match fields.into_iter().rev().find(|(k, _)| k == step) {
                Some((_, v)) => v,
                None => return Ok(Value::Null),
            },
            Some(RawChildren::Arr(items)) => match array_index(step, items.len()) {
                Some(at) => items[at],
                None => return Ok(Value::Null),
            },
            _ => return Ok(Value::Null),
        };
    }
    if !as_text {
        return Ok(Value::Text(raw.trim().to_owned()));
    }
    Ok(match parse(raw)? {
        J::Null => Value::Null,
        J::String(s) => Value::Text(s),
        _ => Value::Text(raw.trim().to_owned()),
    })
}

/// How `jsonb_set` and `jsonb_insert` place the new value (PostgreSQL's `JB_PATH_*` operations).
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    /// `jsonb_set(…, create => false)`: replace only.
    Replace,
    /// `jsonb_set`: replace, or add at the last step.
    Create,
    /// `jsonb_insert`: before the element named.
    InsertBefore,
    /// `jsonb_insert(…, insert_after => true)`.
    InsertAfter,
}

impl SetOp {
    fn creates(self) -> bool {
        !matches!(self, SetOp::Replace)
    }

    fn inserts(self) -> bool {
        matches!(self, SetOp::InsertBefore | SetOp::InsertAfter)
    }
}

/// PostgreSQL's `setPath` over a container: the path followed, `new` placed by `op` at its last step.
fn set_path(node: &mut J, path: &[String], level: usize, new: &J, op: SetOp) -> Result<(), PgError> {
    let last = level + 1 == path.len();
    let Some(step) = path.get(level) else {
        return Ok(());
    };
    match node {
        J::Object(fields) => {
            let found = fields.iter().rposition(|(k, _)| k == step);
            match found {
                Some(at) if last => {
                    if op.inserts() {
                        return Err(PgError::new(INVALID_PARAMETER_VALUE, "cannot replace existing key"));
                    }
                    fields[at].1 = new.clone();
                }
                Some(at) => set_path(&mut fields[at].1, path, level + 1, new, op)?,
                None if last && op.creates() => fields.push((step.clone(), new.clone())),
                None => {}
            }
        }
        J::Array(items) => {
            let index: i64 = step.parse().map_err(|_| {
                PgError::new(
                    INVALID_TEXT_REPRESENTATION,
                    format!("path element at position {} is not an integer: \"{step}\"", level + 1),
                )
            })?;
            let len = items.len() as i64;
            // `None`: before the start (prepend when creating).
            let at = if index < 0 {
                (-index <= len).then_some(len + index)
            } else {
                Some(index.min(len))
            };
            match at {
                Some(at) if at < len => {
                    let at = at as usize;
                    if last {
                        match op {
                            SetOp::Replace | SetOp::Create => items[at] = new.clone(),
                            SetOp::InsertBefore => items.insert(at, new.clone()),
                            SetOp::InsertAfter => items.insert(at + 1, new.clone()),
                        }
                    } else {
                        set_path(&mut items[at], path, level + 1, new, op)?;
                    }
                }
                None if last && op.creates() => items.insert(0, new.clone()),
                Some(_) if last && op.creates() => items.push(new.clone()),
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

/// A `text[]` argument's elements (`None` for a NULL array; NULL elements never match a key).
fn path_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<Vec<String>>, PgError> {
    let Some(text) = args.text(i) else {
        return Ok(None);
    };
    let elements = crate::value::array::parse(&text).ok_or_else(|| PgError::invalid_input("text[]", &text))?;
    // A NULL step matches nothing: PostgreSQL leaves the document as it is past it.
    Ok(Some(elements.into_iter().map_while(|e| e).collect()))
}

fn set_or_insert(args: &Args<'_, '_>, op: SetOp) -> Result<Value, PgError> {
    let (Some(mut doc), Some(path), Some(new)) = (json_arg(args, 0)?, path_arg(args, 1)?, json_arg(args, 2)?) else {
        return Ok(Value::Null);
    };
    let op = if args.len() > 3 {
        let Some(flag) = args.value(3).into_bool()? else {
            return Ok(Value::Null);
        };
        match op {
            SetOp::Create | SetOp::Replace => {
                if flag {
                    SetOp::Create
                } else {
                    SetOp::Replace
                }
            }
            _ if flag => SetOp::InsertAfter,
            _ => SetOp::InsertBefore,
        }
    } else {
        op
    };
    if !matches!(doc, J::Object(_) | J::Array(_)) {
        return Err(PgError::new(INVALID_PARAMETER_VALUE, "cannot set path in scalar"));
    }
    set_path(&mut doc, &path, 0, &new, op)?;
    jsonb_text(&doc)
}

trait IntoBool {
    fn into_bool(self) -> Result<Option<bool>, PgError>;
}

impl IntoBool for Value {
    fn into_bool(self) -> Result<Option<bool>, PgError> {
        Ok(match self {
            Value::Null => None,
            Value::Integer(i) => Some(i != 0),
            Value::Real(f) => Some(f != 0.0),
            other => Some(crate::value::parse_bool(&value_text(&other).unwrap_or_default())?),
        })
    }
}

fn strip_nulls(node: &mut J) {
    match node {
        J::Object(fields) => {
            fields.retain(|(_, v)| *v != J::Null);
            fields.iter_mut().for_each(|(_, v)| strip_nulls(v));
        }
        J::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// `jsonb_pretty`: four spaces a level, an empty container's brackets on two lines.
fn pretty(out: &mut String, node: &J, level: usize) {
    let indent = |out: &mut String, n: usize| out.extend(std::iter::repeat_n("    ", n));
    match node {
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i > 0 { ",\n" } else { "\n" });
                indent(out, level + 1);
                pretty(out, item, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push(']');
        }
        J::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in sorted_fields(fields).into_iter().enumerate() {
                out.push_str(if i > 0 { ",\n" } else { "\n" });
                indent(out, level + 1);
                write_string(out, key);
                out.push_str(": ");
                pretty(out, value, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push('}');
        }
        scalar => write_jsonb(out, scalar),
    }
}

fn numbers_equal(a: &str, b: &str) -> bool {
    match (Decimal::parse(a), Decimal::parse(b)) {
        (Some(x), Some(y)) => x.cmp_value(&y).is_eq(),
        _ => a.parse::<f64>().ok() == b.parse::<f64>().ok(),
    }
}

fn scalars_equal(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => numbers_equal(x, y),
        _ => a == b,
    }
}

/// PostgreSQL's `JsonbDeepContains`: whether `a` contains `b`.
fn contains(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Object(af), J::Object(bf)) => sorted_fields(bf).into_iter().all(|(key, bv)| {
            let Some((_, av)) = af.iter().rev().find(|(k, _)| k == key) else {
                return false;
            };
            match (av, bv) {
                (J::Object(_), J::Object(_)) | (J::Array(_), J::Array(_)) => contains(av, bv),
                (J::Object(_) | J::Array(_), _) | (_, J::Object(_) | J::Array(_)) => false,
                _ => scalars_equal(av, bv),
            }
        }),
        (J::Array(ai), J::Array(bi)) => bi.iter().all(|bv| match bv {
            J::Object(_) | J::Array(_) => ai.iter().any(|av| {
                matches!((av, bv), (J::Object(_), J::Object(_)) | (J::Array(_), J::Array(_))) && contains(av, bv)
            }),
            _ => ai.iter().any(|av| scalars_equal(av, bv)),
        }),
        (J::Object(_), _) | (_, J::Object(_)) => false,
        (J::Array(_), _) | (_, J::Array(_)) => false,
        _ => scalars_equal(a, b),
    }
}

/// The `@>` body: like [`contains`], with a top-level scalar on the right found among an array's elements.
fn contains_top(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Array(items), J::Null | J::Bool(_) | J::Number(_) | J::String(_)) => {
            items.iter().any(|i| scalars_equal(i, b))
        }
        _ => contains(a, b),
    }
}

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    define(conn, state, "jsonb_build_object", -1, Purity::Pure, |a, s| {
        build_object(a, s, Flavor::Jsonb)
    })?;
    define(conn, state, "json_build_object", -1, Purity::Pure, |a, s| {
        build_object(a, s, Flavor::Json)
    })?;
    define(conn, state, "jsonb_build_array", -1, Purity::Pure, |a, s| {
        build_array(a, s, Flavor::Jsonb)
    })?;
    define(conn, state, "json_build_array", -1, Purity::Pure, |a, s| {
        build_array(a, s, Flavor::Json)
    })?;
    // A timestamptz becomes JSON in the session's zone.
    define(conn, state, "to_jsonb", 1, Purity::Volatile, |a, s| {
        to_json_of(a, s, Flavor::Jsonb)
    })?;
    define(conn, state, "to_json", 1, Purity::Volatile, |a, s| {
        to_json_of(a, s, Flavor::Json)
    })?;
    for name in ["jsonb_typeof", "json_typeof"] {
        define(conn, state, name, 1, Purity::Pure, |a, _| type_of(a))?;
    }
    for name in ["jsonb_array_length", "json_array_length"] {
        define(conn, state, name, 1, Purity::Pure, |a, _| array_length(a))?;
    }
    define(conn, state, "jsonb_extract_path", -1, Purity::Pure, |a, _| {
        extract_jsonb(a, false)
    })?;
    define(conn, state, "jsonb_extract_path_text", -1, Purity::Pure, |a, _| {
        extract_jsonb(a, true)
    })?;
    define(conn, state, "json_extract_path", -1, Purity::Pure, |a, _| {
        extract_json(a, false)
    })?;
    define(conn, state, "json_extract_path_text", -1, Purity::Pure, |a, _| {
        extract_json(a, true)
    })?;
    for arity in [3, 4] {
        define(conn, state, "jsonb_set", arity, Purity::Pure, |a, _| {
            set_or_insert(a, SetOp::Create)
        })?;
        define(conn, state, "jsonb_insert", arity, Purity::Pure, |a, _| {
            set_or_insert(a, SetOp::InsertBefore)
        })?;
    }
    define(conn, state, "jsonb_strip_nulls", 1, Purity::Pure, |a, _| {
        let Some(mut node) = json_arg(a, 0)? else {
            return Ok(Value::Null);
        };
        strip_nulls(&mut node);
        jsonb_text(&node)
    })?;
    define(conn, state, "jsonb_pretty", 1, Purity::Pure, |a, _| {
        let Some(node) = json_arg(a, 0)? else {
            return Ok(Value::Null);
        };
        let mut out = String::new();
        pretty(&mut out, &node, 0);
        check_size(out.len())?;
        Ok(Value::Text(out))
    })?;
    define(conn, state, "pg_jsonb_contains", 2, Purity::Pure, |a, _| {
        let (Some(x), Some(y)) = (json_arg(a, 0)?, json_arg(a, 1)?) else {
            return Ok(Value::Null);
        };
        Ok(Value::Integer(i64::from(contains_top(&x, &y))))
    })?;
    define(conn, state, "pg_jsonb_has_key", 2, Purity::Pure, |a, _| {
        let (Some(doc), Some(key)) = (a.text(0), a.text(1)) else {
            return Ok(Value::Null);
        };
        Ok(Value::Integer(i64::from(crate::value::json::has_key(&doc, &key)?)))
    })?;
    install_aggregates(conn, state)
}

fn install_aggregates(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    let flags = super::super::flags_session();
    for (name, flavor) in [("jsonb_agg", Flavor::Jsonb), ("json_agg", Flavor::Json)] {
        for typed in [false, true] {
            let agg = ArrayAgg {
                flavor,
                typed,
                state: state.clone(),
            };
            let (registered, arity) = if typed {
                (format!("pg_t_{name}"), 2)
            } else {
                (name.to_owned(), 1)
            };
            conn.create_aggregate_function(registered.as_str(), arity, flags, agg)?;
        }
    }
    for (name, flavor) in [("jsonb_object_agg", Flavor::Jsonb), ("json_object_agg", Flavor::Json)] {
        for typed in [false, true] {
            let agg = ObjectAgg {
                flavor,
                typed,
                state: state.clone(),
            };
            let (registered, arity) = if typed {
                (format!("pg_t_{name}"), 3)
            } else {
                (name.to_owned(), 2)
            };
            conn.create_aggregate_function(registered.as_str(), arity, flags, agg)?;
        }
    }
    Ok(())
}

/// The running state of a JSON aggregate: its items and their approximate text size.
struct Items<T> {
    items: Vec<T>,
    bytes: usize,
}

impl<T> Default for Items<T> {
    fn default() -> Items<T> {
        Items {
            items: Vec::new(),
            bytes: 0,
        }
    }
}

/// `json_agg` / `jsonb_agg`: every value (NULLs as `null`) in a JSON array; NULL over no rows.
struct ArrayAgg {
    flavor: Flavor,
    typed: bool,
    state: Arc<SessionState>,
}

impl Aggregate<Items<J>, Value> for ArrayAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Items<J>> {
        Ok(Items::default())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Items<J>) -> rusqlite::Result<()> {
        let args = Args::of(ctx, self.typed)?;
        let node = to_node(&args.value(0), args.ty(0), &self.state.time_zone(), self.flavor).map_err(raise)?;
        acc.bytes += json_text(&node).len() + 2;
        check_size(acc.bytes).map_err(raise)?;
        acc.items.push(node);
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Items<J>>) -> rusqlite::Result<Value> {
        let Some(acc) = acc.filter(|a| !a.items.is_empty()) else {
            return Ok(Value::Null);
        };
        match self.flavor {
            Flavor::Jsonb => jsonb_text(&J::Array(acc.items)).map_err(raise),
            Flavor::Json => {
                let texts: Vec<String> = acc.items.iter().map(json_text).collect();
                Ok(Value::Text(format!("[{}]", texts.join(", "))))
            }
        }
    }
}

/// `json_object_agg` / `jsonb_object_agg`: key–value pairs in a JSON object; NULL over no rows.
struct ObjectAgg {
    flavor: Flavor,
    typed: bool,
    state: Arc<SessionState>,
}

impl Aggregate<Items<(String, J)>, Value> for ObjectAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Items<(String, J)>> {
        Ok(Items::default())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Items<(String, J)>) -> rusqlite::Result<()> {
        let args = Args::of(ctx, self.typed)?;
        let tz = self.state.time_zone();
        let key = args.value(0);
        if matches!(key, Value::Null) {
            return Err(raise(PgError::new(
                INVALID_PARAMETER_VALUE,
                "field name must not be null",
            )));
        }
        let key = match args.ty(0) {
            Some(t) => crate::value::output(t, &key, &tz).unwrap_or_default(),
            None => value_text(&key).unwrap_or_default(),
        };
        let node = to_node(&args.value(1), args.ty(1), &tz, self.flavor).map_err(raise)?;
        acc.bytes += key.len() + json_text(&node).len() + 6;
        check_size(acc.bytes).map_err(raise)?;
        acc.items.push((key, node));
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Items<(String, J)>>) -> rusqlite::Result<Value> {
        let Some(acc) = acc.filter(|a| !a.items.is_empty()) else {
            return Ok(Value::Null);
        };
        match self.flavor {
            Flavor::Jsonb => jsonb_text(&J::Object(acc.items)).map_err(raise),
            Flavor::Json => {
                let mut out = String::from("{ ");
                for (i, (key, value)) in acc.items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_string(&mut out, key);
                    out.push_str(" : ");
                    write_json(&mut out, value);
                }
                out.push_str(" }");
                Ok(Value::Text(out))
            }
        }
    }
}

/// The result type of a function of this file.
pub(super) fn result_type(name: &str, _args: &[Option<PgType>]) -> Option<PgType> {
    Some(match name {
        "jsonb_build_object" | "jsonb_build_array" | "to_jsonb" | "jsonb_agg" | "jsonb_object_agg" | "jsonb_set"
        | "jsonb_insert" | "jsonb_strip_nulls" | "jsonb_extract_path" => PgType::new(Base::Jsonb),
        "json_build_object" | "json_build_array" | "to_json" | "json_agg" | "json_object_agg" | "json_extract_path" => {
            PgType::new(Base::Json)
        }
        "jsonb_typeof" | "json_typeof" | "jsonb_pretty" | "jsonb_extract_path_text" | "json_extract_path_text" => {
            PgType::TEXT
        }
        "jsonb_array_length" | "json_array_length" => PgType::INT4,
        "pg_jsonb_contains" | "pg_jsonb_has_key" => PgType::BOOL,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, check_errors, row_after};

    #[test]
    fn builds_as_postgres() {
        check(&[
            (
                "jsonb_build_object('id', 1, 'name', 'x', 'tags', ARRAY['a', 'b'], 'nothing', NULL)",
                Some(r#"{"id": 1, "name": "x", "tags": ["a", "b"], "nothing": null}"#),
            ),
            ("json_build_object('b', 1, 'a', 2)", Some(r#"{"b" : 1, "a" : 2}"#)),
            (
                "json_build_array(1, 'two', NULL, true)",
                Some(r#"[1, "two", null, true]"#),
            ),
            ("jsonb_build_array(1.50, 'x')", Some(r#"[1.50, "x"]"#)),
            (
                "json_build_object('a', json '[1, 2]', 'b', ARRAY[1,2], 'c', true)",
                Some(r#"{"a" : [1, 2], "b" : [1,2], "c" : true}"#),
            ),
            ("json_build_array(ARRAY[1,2])", Some("[[1,2]]")),
            ("jsonb_build_object()", Some("{}")),
            ("to_jsonb('text'::text)", Some(r#""text""#)),
            ("to_jsonb(42)", Some("42")),
            ("to_jsonb(true)", Some("true")),
            ("to_jsonb(ARRAY[1, 2])", Some("[1, 2]")),
            ("to_json(ARRAY['a', 'b'])", Some(r#"["a","b"]"#)),
            ("to_json('a\"b'::text)", Some(r#""a\"b""#)),
            ("to_jsonb(NULL::text)", None),
            ("to_jsonb(DATE '2024-01-02')", Some(r#""2024-01-02""#)),
            (
                "to_jsonb(TIMESTAMPTZ '2024-01-02 03:04:05+00')",
                Some(r#""2024-01-02T03:04:05+00:00""#),
            ),
            (
                "to_json(TIMESTAMP '2024-01-02 03:04:05.5')",
                Some(r#""2024-01-02T03:04:05.5""#),
            ),
            ("to_jsonb(1.10::numeric)", Some("1.10")),
        ]);
        check_errors(&[
            ("json_build_object(1)", "22023"),
            ("json_build_object(NULL, 1)", "22023"),
            ("jsonb_build_object(ARRAY[1], 1)", "22023"),
        ]);
    }

    #[test]
    fn inspects_as_postgres() {
        check(&[
            ("jsonb_typeof('{}')", Some("object")),
            ("jsonb_typeof('[]')", Some("array")),
            ("jsonb_typeof('\"s\"')", Some("string")),
            ("jsonb_typeof('true')", Some("boolean")),
            ("jsonb_typeof('null')", Some("null")),
            ("json_typeof('1.5')", Some("number")),
            ("jsonb_array_length('[1, 2, [3]]')", Some("3")),
            ("json_array_length('[]')", Some("0")),
            ("jsonb_extract_path('{\"a\": {\"b\": 7}}', 'a', 'b')", Some("7")),
            ("jsonb_extract_path_text('{\"a\": {\"b\": 7}}', 'a', 'b')", Some("7")),
            ("jsonb_extract_path('{\"a\": {\"b\": 7}}', 'a')", Some(r#"{"b": 7}"#)),
            ("json_extract_path_text('{\"a\": \"z\"}', 'a')", Some("z")),
            ("json_extract_path('{\"a\": {\"b\":1}}', 'a')", Some(r#"{"b":1}"#)),
            ("json_extract_path('[1, [2,  3]]', '-1')", Some("[2,  3]")),
            ("jsonb_extract_path('{\"a\": 1}', 'x')", None),
            ("jsonb_extract_path('{\"a\": 1}', NULL)", None),
        ]);
        check_errors(&[
            ("jsonb_typeof('x')", "22P02"),
            ("jsonb_array_length('1')", "22023"),
            ("jsonb_array_length('{}')", "22023"),
        ]);
    }

    #[test]
    fn edits_as_postgres() {
        check(&[
            (
                "jsonb_set('{\"a\": 1, \"b\": {\"c\": 2}}', '{b,c}', '3')",
                Some(r#"{"a": 1, "b": {"c": 3}}"#),
            ),
            (
                "jsonb_set('{\"a\": 1}', '{z}', '\"new\"')",
                Some(r#"{"a": 1, "z": "new"}"#),
            ),
            ("jsonb_set('[1, 2]', '{0}', '9')", Some("[9, 2]")),
            ("jsonb_set('[1, 2]', '{-5}', '9')", Some("[9, 1, 2]")),
            ("jsonb_set('[1, 2]', '{7}', '9')", Some("[1, 2, 9]")),
            ("jsonb_set('[1, 2]', '{7}', '9', false)", Some("[1, 2]")),
            ("jsonb_set('{\"a\":1}', '{a,b}', '2')", Some(r#"{"a": 1}"#)),
            ("jsonb_set('{\"a\":1}', '{}', '2')", Some(r#"{"a": 1}"#)),
            ("jsonb_set('{\"a\":1}', '{a}', NULL)", None),
            (
                "jsonb_insert('{\"a\": [1, 2]}', '{a,1}', '99')",
                Some(r#"{"a": [1, 99, 2]}"#),
            ),
            (
                "jsonb_insert('{\"a\": [1, 2]}', '{a,1}', '99', true)",
                Some(r#"{"a": [1, 2, 99]}"#),
            ),
            ("jsonb_insert('{\"a\": 1}', '{b}', '2')", Some(r#"{"a": 1, "b": 2}"#)),
            (
                "jsonb_strip_nulls('{\"a\": 1, \"b\": null, \"c\": [null]}')",
                Some(r#"{"a": 1, "c": [null]}"#),
            ),
        ]);
        check_errors(&[
            ("jsonb_set('[1]', '{x}', '1')", "22P02"),
            ("jsonb_set('1', '{x}', '1')", "22023"),
            ("jsonb_insert('{\"a\":1}', '{a}', '1')", "22023"),
        ]);
    }

    #[test]
    fn pretty_prints_as_postgres() {
        check(&[
            (
                "jsonb_pretty('{\"a\": [1, {\"b\": 2}], \"c\": {}, \"d\": []}')",
                Some("{\n    \"a\": [\n        1,\n        {\n            \"b\": 2\n        }\n    ],\n    \"c\": {\n    },\n    \"d\": [\n    ]\n}"),
            ),
            ("jsonb_pretty('\"x\"')", Some("\"x\"")),
        ]);
    }

    #[test]
    fn containment_and_keys_as_postgres() {
        check(&[
            ("'{\"a\": 1, \"b\": 2}'::jsonb @> '{\"a\": 1}'", Some("t")),
            ("'{\"a\": 1}'::jsonb <@ '{\"a\": 1, \"b\": 2}'", Some("t")),
            ("'[1, 2, 3]'::jsonb @> '[3, 1]'", Some("t")),
            ("'[1, 2, 3]'::jsonb @> '1'", Some("t")),
            ("'{\"a\": [1, 2]}'::jsonb @> '{\"a\": 1}'", Some("f")),
            ("'[[1]]'::jsonb @> '[1]'", Some("f")),
            ("'[[1, 2]]'::jsonb @> '[[2]]'", Some("t")),
            ("'{\"a\": 1.0}'::jsonb @> '{\"a\": 1}'", Some("t")),
            (
                "'{\"tags\": [\"x\", \"y\"]}'::jsonb @> '{\"tags\": [\"y\"]}'",
                Some("t"),
            ),
            ("'\"a\"'::jsonb @> '[\"a\"]'", Some("f")),
            ("'{\"a\": 1, \"b\": 2}'::jsonb ? 'a'", Some("t")),
            ("'{\"a\": 1}'::jsonb ? 'z'", Some("f")),
            ("'[\"x\", \"y\"]'::jsonb ? 'x'", Some("t")),
            ("'{\"a\": 1}'::jsonb ? NULL", None),
        ]);
    }

    #[test]
    fn aggregates_as_postgres() {
        let row = |sql: &str| row_after(&[], sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let some = |v: &[&str]| v.iter().map(|s| Some((*s).to_owned())).collect::<Vec<_>>();
        assert_eq!(
            row("SELECT jsonb_object_agg(k, v ORDER BY k) FROM (VALUES ('a', 1), ('b', 2)) AS t(k, v)"),
            some(&[r#"{"a": 1, "b": 2}"#])
        );
        assert_eq!(
            row("SELECT jsonb_agg(x ORDER BY x), json_agg(x ORDER BY x DESC) FROM (VALUES (3), (1), (2)) AS t(x)"),
            some(&["[1, 2, 3]", "[3, 2, 1]"])
        );
        assert_eq!(
            row("SELECT json_object_agg(x, x = 1) FROM (VALUES (1), (2)) AS t(x)"),
            some(&[r#"{ "1" : true, "2" : false }"#])
        );
        assert_eq!(
            row("SELECT json_agg(x) FROM (VALUES (1), (NULL)) AS t(x) WHERE false"),
            vec![None]
        );
        assert_eq!(
            row_after(&[], "SELECT jsonb_object_agg(NULL, 1)").map_err(|e| e.code),
            Err("22023")
        );
    }
}
