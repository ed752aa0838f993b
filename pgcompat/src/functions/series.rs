//! The JSON arrays and objects that set-returning functions rewritten as `json_each` items iterate
//! (`translate::srf`): `generate_series` values (`pg_series_json`), and the checks that a JSON value is
//! the container a function expects (`pg_json_array`, `pg_json_object`), with PostgreSQL's errors.
//!
//! A series is bounded: at most [`SERIES_ELEMENTS_MAX`] values (54000 beyond), since it is built whole.

use std::sync::Arc;

use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use super::{flags_pure, flags_session, owned, raise, type_arg, SessionState};
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::types::{Base, PgType};
use crate::value::{self, datetime, numeric::Decimal};

/// Most values one `generate_series` in a SELECT list or a lateral position produces.
pub const SERIES_ELEMENTS_MAX: usize = 1 << 20;

pub(super) fn install_series(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    for n in [3, 4] {
        let s = state.clone();
        conn.create_scalar_function("pg_series_json", n, flags_session(), move |ctx| {
            let Some(ty) = type_arg(ctx, 0)? else {
                return Ok(None);
            };
            let args: Vec<Value> = (1..ctx.len()).map(|i| owned(ctx.get_raw(i))).collect();
            if args.iter().any(|v| matches!(v, Value::Null)) {
                return Ok(None);
            }
            series(ty, &args, &s.time_zone()).map(Some).map_err(raise)
        })?;
    }
    conn.create_scalar_function("pg_arrays_zip_json", -1, flags_session(), move |ctx| {
        let tz = state.time_zone();
        let mut columns: Vec<Vec<serde_json::Value>> = Vec::with_capacity(ctx.len() / 2);
        for pair in 0..ctx.len() / 2 {
            let element = type_arg(ctx, pair * 2 + 1)?.unwrap_or(PgType::TEXT);
            let items = match ctx.get::<Option<String>>(pair * 2)? {
                Some(array) => super::operators::array_json_items(&array, element, &tz).map_err(raise)?,
                None => Vec::new(),
            };
            columns.push(items);
        }
        Ok(zip(columns).to_string())
    })?;
    conn.create_scalar_function("pg_json_array", 1, flags_pure(), |ctx| {
        container(ctx.get_raw(0), b'[', "cannot extract elements from")
    })?;
    conn.create_scalar_function("pg_json_object", 1, flags_pure(), |ctx| {
        container(ctx.get_raw(0), b'{', "cannot deconstruct")
    })?;
    Ok(())
}

/// The JSON text if its top level opens with `open`, else 22023 naming what it is.
fn container(value: ValueRef<'_>, open: u8, message: &str) -> rusqlite::Result<Option<String>> {
    let text = match value {
        ValueRef::Null => return Ok(None),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        other => return Err(raise(PgError::invalid_input("json", &format!("{other:?}")))),
    };
    let first = text.bytes().find(|b| !b.is_ascii_whitespace());
    if first == Some(open) {
        return Ok(Some(text));
    }
    let what = match first {
        Some(b'[') => "an array",
        Some(b'{') => "an object",
        _ => "a scalar",
    };
    Err(raise(PgError::new(
        INVALID_PARAMETER_VALUE,
        format!("{message} {what}"),
    )))
}

/// `unnest(a, b, …)`'s rows: the i-th elements side by side, the shorter arrays padded with NULLs.
fn zip(columns: Vec<Vec<serde_json::Value>>) -> serde_json::Value {
    let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::with_capacity(rows);
    for i in 0..rows {
        let row: Vec<serde_json::Value> = columns
            .iter()
            .map(|c| c.get(i).cloned().unwrap_or(serde_json::Value::Null))
            .collect();
        out.push(serde_json::Value::Array(row));
    }
    serde_json::Value::Array(out)
}

fn too_many() -> PgError {
    PgError::new(
        crate::error::PROGRAM_LIMIT_EXCEEDED,
        format!("generate_series of more than {SERIES_ELEMENTS_MAX} values in this position"),
    )
}

/// `generate_series(start, stop[, step])` of `ty` as a JSON array (numerics and timestamps as strings, so
/// their text survives `json_each`).
fn series(ty: PgType, args: &[Value], tz: &jiff::tz::TimeZone) -> Result<String, PgError> {
    let text = |v: &Value| value::output(PgType::TEXT, v, tz).unwrap_or_default();
    let out = match ty.base() {
        Base::Int2 | Base::Int4 | Base::Int8 => {
            let int = |v: &Value| match v {
                Value::Integer(i) => Ok(*i),
                other => text(other)
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| PgError::invalid_input("bigint", &text(other))),
            };
            let step = args.get(2).map(int).transpose()?.unwrap_or(1);
            integer_series(int(&args[0])?, int(&args[1])?, step)?
        }
        Base::Numeric => {
            let dec = |v: &Value| Decimal::parse(&text(v)).ok_or_else(|| PgError::invalid_input("numeric", &text(v)));
            let step = args
                .get(2)
                .map(dec)
                .transpose()?
                .unwrap_or_else(|| Decimal::parse("1").expect("one"));
            numeric_series(dec(&args[0])?, &dec(&args[1])?, &step)?
        }
        Base::Timestamp | Base::Timestamptz => {
            let Some(step) = args.get(2) else {
                return Err(PgError::new(
                    crate::error::UNDEFINED_FUNCTION,
                    "function generate_series(timestamp, timestamp) does not exist",
                ));
            };
            let step = datetime::Interval::parse(&text(step))?;
            let stored = |v: &Value| value::coerce(ty, Value::Text(text(v)), tz);
            timestamp_series(ty, stored(&args[0])?, &stored(&args[1])?, step, tz)?
        }
        _ => {
            return Err(PgError::new(
                crate::error::UNDEFINED_FUNCTION,
                format!("function generate_series({}) does not exist", ty.sql_name()),
            ))
        }
    };
    Ok(serde_json::Value::Array(out).to_string())
}

fn zero_step() -> PgError {
    PgError::new(INVALID_PARAMETER_VALUE, "step size cannot equal zero")
}

fn integer_series(start: i64, stop: i64, step: i64) -> Result<Vec<serde_json::Value>, PgError> {
    if step == 0 {
        return Err(zero_step());
    }
    let mut out = Vec::new();
    let mut v = start;
    while (step > 0 && v <= stop) || (step < 0 && v >= stop) {
        if out.len() >= SERIES_ELEMENTS_MAX {
            return Err(too_many());
        }
        out.push(serde_json::Value::from(v));
        let Some(next) = v.checked_add(step) else { break };
        v = next;
    }
    Ok(out)
}

fn numeric_series(start: Decimal, stop: &Decimal, step: &Decimal) -> Result<Vec<serde_json::Value>, PgError> {
    if step.is_zero() {
        return Err(zero_step());
    }
    let ascending = !step.negative;
    let mut out = Vec::new();
    let mut v = start;
    loop {
        let order = v.cmp_value(stop);
        if (ascending && order.is_gt()) || (!ascending && order.is_lt()) {
            return Ok(out);
        }
        if out.len() >= SERIES_ELEMENTS_MAX {
            return Err(too_many());
        }
        out.push(serde_json::Value::String(v.to_text()));
        v = v.add(step);
    }
}

fn timestamp_series(
    ty: PgType,
    start: Value,
    stop: &Value,
    step: datetime::Interval,
    tz: &jiff::tz::TimeZone,
) -> Result<Vec<serde_json::Value>, PgError> {
    if step.months == 0 && step.days == 0 && step.micros == 0 {
        return Err(zero_step());
    }
    let forward = step.total_micros() > 0;
    // The stored forms sort as text in time order (ISO timestamps, UTC for timestamptz).
    let key = |v: &Value| value::output(PgType::TEXT, v, tz).unwrap_or_default();
    let stop_key = key(stop);
    let mut out = Vec::new();
    let mut v = start;
    loop {
        let k = key(&v);
        if (forward && k > stop_key) || (!forward && k < stop_key) {
            return Ok(out);
        }
        if out.len() >= SERIES_ELEMENTS_MAX {
            return Err(too_many());
        }
        out.push(serde_json::Value::String(value::output(ty, &v, tz).unwrap_or_default()));
        v = super::temporal::add_interval(ty, v, step, tz)?;
    }
}
