//! Reading JSON: `json[b]_typeof`, `json[b]_array_length`, `json[b]_extract_path[_text]`, and the
//! containment behind `@>` and `<@`.

use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::value::json::Node as J;
use crate::value::numeric::Decimal;

/// Argument `i` parsed as JSON; `None` for NULL.
pub(super) fn json_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<J>, PgError> {
    args.text(i).map(|t| parse(&t)).transpose()
}

pub(super) fn type_of(args: &Args<'_, '_>) -> Result<Value, PgError> {
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

pub(super) fn array_length(args: &Args<'_, '_>) -> Result<Value, PgError> {
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
pub(super) fn variadic_path(args: &Args<'_, '_>) -> Option<Vec<String>> {
    (1..args.len()).map(|i| args.text(i)).collect()
}

/// The index an array path step names (negative counts from the end); `None` if out of range or not one.
pub(super) fn array_index(step: &str, len: usize) -> Option<usize> {
    let index: i64 = step.trim().parse().ok()?;
    let len = len as i64;
    let at = if index < 0 { len + index } else { index };
    (0..len).contains(&at).then_some(at as usize)
}

pub(super) fn extract_jsonb(args: &Args<'_, '_>, as_text: bool) -> Result<Value, PgError> {
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

pub(super) fn extract_json(args: &Args<'_, '_>, as_text: bool) -> Result<Value, PgError> {
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

pub(super) fn numbers_equal(a: &str, b: &str) -> bool {
    match (Decimal::parse(a), Decimal::parse(b)) {
        (Some(x), Some(y)) => x.cmp_value(&y).is_eq(),
        _ => a.parse::<f64>().ok() == b.parse::<f64>().ok(),
    }
}

pub(super) fn scalars_equal(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => numbers_equal(x, y),
        _ => a == b,
    }
}

/// jsonb equality: the same structure, object keys compared as sets, numbers by value (`1` = `1.0`).
pub(super) fn deep_equal(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Object(af), J::Object(bf)) => {
            let (af, bf) = (sorted_fields(af), sorted_fields(bf));
            af.len() == bf.len()
                && af
                    .iter()
                    .zip(&bf)
                    .all(|((ka, va), (kb, vb))| ka == kb && deep_equal(va, vb))
        }
        (J::Array(ai), J::Array(bi)) => ai.len() == bi.len() && ai.iter().zip(bi).all(|(x, y)| deep_equal(x, y)),
        _ => scalars_equal(a, b),
    }
}

/// PostgreSQL's `JsonbDeepContains`: whether `a` contains `b`.
pub(super) fn contains(a: &J, b: &J) -> bool {
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
pub(super) fn contains_top(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Array(items), J::Null | J::Bool(_) | J::Number(_) | J::String(_)) => {
            items.iter().any(|i| scalars_equal(i, b))
        }
        _ => contains(a, b),
    }
}
