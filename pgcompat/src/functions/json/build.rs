//! Building JSON from SQL values by their PostgreSQL types: `to_json[b]`, `json[b]_build_object`,
//! `json[b]_build_array`.

use jiff::tz::TimeZone;
use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::json::Node as J;

/// A date, timestamp or timestamptz printed as PostgreSQL prints it in JSON (ISO 8601, `T`, `+HH:MM`).
pub(super) fn iso_datetime(text: &str, base: Base) -> String {
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
pub(super) fn element_node(text: &str, base: Base, flavor: Flavor) -> Result<J, PgError> {
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
pub(super) fn to_node(value: &Value, ty: Option<PgType>, tz: &TimeZone, flavor: Flavor) -> Result<J, PgError> {
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
pub(super) fn scalar_key(ty: Option<PgType>) -> bool {
    ty.is_none_or(|t| !t.is_array() && !matches!(t.base(), Base::Json | Base::Jsonb))
}

/// The key of an object: argument `i` as text; 22023 if NULL.
pub(super) fn key_text(args: &Args<'_, '_>, i: usize, tz: &TimeZone) -> Result<String, PgError> {
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

pub(super) fn build_object(args: &Args<'_, '_>, state: &SessionState, flavor: Flavor) -> Result<Value, PgError> {
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

pub(super) fn build_array(args: &Args<'_, '_>, state: &SessionState, flavor: Flavor) -> Result<Value, PgError> {
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

pub(super) fn to_json_of(args: &Args<'_, '_>, state: &SessionState, flavor: Flavor) -> Result<Value, PgError> {
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

/// A whole row as `row_to_json` prints it: `{"id":1,"name":"x"}` (keys and values alternate in the call).
pub(super) fn row_json(args: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
    let tz = state.time_zone();
    let mut fields = Vec::with_capacity(args.len() / 2);
    for i in (0..args.len()).step_by(2) {
        let key = key_text(args, i, &tz)?;
        let value = to_node(&args.value(i + 1), args.ty(i + 1), &tz, Flavor::Json)?;
        fields.push((key, value));
    }
    let mut out = String::new();
    write_json(&mut out, &J::Object(fields));
    check_size(out.len())?;
    Ok(Value::Text(out))
}
