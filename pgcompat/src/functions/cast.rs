//! Casts and assignments with PostgreSQL's checks: `pg_cast` (an explicit cast) and `pg_coerce` (an
//! assignment to a typed column).

use std::sync::Arc;

use jiff::tz::TimeZone;
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{flags_pure, owned, raise, type_arg, SessionState};
use crate::error::PgError;
use crate::types::{Base, PgType};
use crate::value::{self, datetime, numeric::Decimal};

pub(super) fn install_casts(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let cast_state = state.clone();
    conn.create_scalar_function("pg_cast", 3, flags_pure(), move |ctx| {
        let value = owned(ctx.get_raw(0));
        let Some(target) = type_arg(ctx, 1)? else {
            return Ok(value);
        };
        let source = type_arg(ctx, 2)?;
        super::enums::check(&cast_state, target, &value).map_err(raise)?;
        cast(value, target, source, &cast_state.time_zone()).map_err(raise)
    })?;
    conn.create_scalar_function("pg_coerce", 2, flags_pure(), move |ctx| {
        let value = owned(ctx.get_raw(0));
        let Some(target) = type_arg(ctx, 1)? else {
            return Ok(value);
        };
        super::enums::check(&state, target, &value).map_err(raise)?;
        value::coerce(target, value, &state.time_zone()).map_err(raise)
    })?;
    Ok(())
}

/// An explicit cast (`x::type`, `CAST(x AS type)`): like an assignment, but a string cut to `varchar(n)`
/// silently, booleans and numbers as text the way PostgreSQL prints them, and date/time conversions
/// through the session's zone.
pub fn cast(value: Value, target: PgType, source: Option<PgType>, tz: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    // An array to an array of another element type: each element cast (`ARRAY[1.1, 2]::int[]` rounds).
    if let (true, Some(source), Value::Text(text)) = (target.is_array(), source.filter(|s| s.is_array()), &value) {
        if source.element() != target.element() {
            return cast_array(text, source.element(), target.element(), tz);
        }
    }
    if target.is_string() {
        let text = match (&value, source) {
            (Value::Integer(i), Some(s)) if s.base() == Base::Bool && !s.is_array() => {
                if *i != 0 { "true" } else { "false" }.to_owned()
            }
            (v, Some(s)) => value::output(s, v, tz).unwrap_or_default(),
            (Value::Real(f), None) => value::format_float8(*f),
            (v, None) => value::output(PgType::TEXT, v, tz).unwrap_or_default(),
        };
        // char(n) → text or varchar drops the padding.
        let text = match source {
            Some(s) if s.base() == Base::Bpchar && !s.is_array() && target.base() != Base::Bpchar => {
                text.trim_end_matches(' ').to_owned()
            }
            _ => text,
        };
        let text = match target.modifier() {
            crate::types::Modifier::Length(n) if matches!(target.base(), Base::Varchar | Base::Bpchar) => {
                text.chars().take(n as usize).collect()
            }
            _ => text,
        };
        return value::coerce(target, Value::Text(text), tz);
    }
    match (source.map(|s| (s.base(), s.is_array())), target.base(), &value) {
        (Some((Base::Numeric, false)), Base::Int2 | Base::Int4 | Base::Int8, Value::Text(_) | Value::Real(_)) => {
            // numeric → integer rounds half away from zero.
            let text = match &value {
                Value::Real(f) => value::format_float8(*f),
                Value::Text(t) => t.clone(),
                _ => String::new(),
            };
            let d = Decimal::parse(&text).ok_or_else(|| PgError::invalid_input("numeric", &text))?;
            let rounded = d.rescale(0).to_text();
            value::coerce(target, Value::Text(rounded), tz)
        }
        (Some((Base::Timestamptz, false)), Base::Date | Base::Timestamp | Base::Time, Value::Text(text)) => {
            let ts = datetime::stored_timestamptz(text).ok_or_else(|| PgError::invalid_input("timestamptz", text))?;
            let local = tz.to_datetime(ts);
            value::coerce(target, Value::Text(datetime::format_timestamp(local)), tz)
        }
        (Some((Base::Timestamp | Base::Date, false)), Base::Timestamptz, Value::Text(text)) => {
            let (dt, _) = datetime::parse_timestamp(text, "timestamp")?;
            let ts = tz.to_timestamp(dt).map_err(|_| PgError::out_of_range("timestamp"))?;
            Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
        }
        (Some((Base::Bool, false)), Base::Int4 | Base::Int8 | Base::Int2, Value::Integer(i)) => {
            Ok(Value::Integer(i64::from(*i != 0)))
        }
        (_, Base::Bool, Value::Real(_)) => Err(PgError::new(
            crate::error::CANNOT_COERCE,
            "cannot cast type double precision to boolean",
        )),
        _ => value::coerce(target, value, tz),
    }
}

/// The elements of an array's text cast one by one from `from` to `to`, printed back as an array of `to`.
fn cast_array(text: &str, from: PgType, to: PgType, tz: &TimeZone) -> Result<Value, PgError> {
    let elements = value::array::stored_elements(from.array(), text, tz)?;
    let mut printed = Vec::with_capacity(elements.len());
    for element in elements {
        let cast_value = cast(element, to, Some(from), tz)?;
        printed.push(value::output(to, &cast_value, tz));
    }
    Ok(Value::Text(value::array::format(&printed)))
}
