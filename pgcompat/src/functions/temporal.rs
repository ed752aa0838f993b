//! Date/time operators and field functions: `extract`/`date_part`, `date_trunc`, `+`/`-` between dates,
//! timestamps and intervals, `AT TIME ZONE` and `age` (the `to_char` family is in `time`).

use std::sync::Arc;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Unit;
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{flags_pure, flags_session, owned, raise, type_arg, SessionState};
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::types::{Base, PgType};
use crate::value::{self, datetime, numeric::Decimal};

pub(super) fn install_datetime(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_extract", 3, flags_pure(), move |ctx| {
        let field: String = ctx.get(0)?;
        let value = owned(ctx.get_raw(1));
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        extract(&field, &value, ty, &s.time_zone()).map_err(raise)
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_date_part", 3, flags_pure(), move |ctx| {
        let field: String = ctx.get(0)?;
        let value = owned(ctx.get_raw(1));
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        match extract(&field.to_ascii_lowercase(), &value, ty, &s.time_zone()).map_err(raise)? {
            Value::Text(t) => Ok(Value::Real(t.parse().unwrap_or(f64::NAN))),
            other => Ok(other),
        }
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_date_trunc", 3, flags_pure(), move |ctx| {
        let field: String = ctx.get(0)?;
        let value = owned(ctx.get_raw(1));
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        date_trunc(&field.to_ascii_lowercase(), &value, ty, &s.time_zone()).map_err(raise)
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_datetime_arith", 6, flags_pure(), move |ctx| {
        let left = owned(ctx.get_raw(0));
        let op: String = ctx.get(1)?;
        let right = owned(ctx.get_raw(2));
        let (Some(result), Some(lt), Some(rt)) = (type_arg(ctx, 3)?, type_arg(ctx, 4)?, type_arg(ctx, 5)?) else {
            return Ok(Value::Null);
        };
        datetime_arith(left, op == "-", right, result, lt, rt, &s.time_zone()).map_err(raise)
    })?;
    conn.create_aggregate_function("pg_interval_sum", 1, flags_pure(), IntervalSum { average: false })?;
    conn.create_aggregate_function("pg_interval_avg", 1, flags_pure(), IntervalSum { average: true })?;
    conn.create_scalar_function("pg_interval_scale", 3, flags_pure(), |ctx| {
        let factor = match ctx.get_raw(2) {
            rusqlite::types::ValueRef::Integer(i) => Some(i as f64),
            rusqlite::types::ValueRef::Real(f) => Some(f),
            rusqlite::types::ValueRef::Text(t) => {
                Some(value::parse_float8(&String::from_utf8_lossy(t)).map_err(raise)?)
            }
            _ => None,
        };
        let (Some(text), Some(factor)) = (ctx.get::<Option<String>>(0)?, factor) else {
            return Ok(None);
        };
        let op: String = ctx.get(1)?;
        let interval = datetime::Interval::parse(&text).map_err(raise)?;
        scale_interval(interval, &op, factor)
            .map(|iv| Some(iv.format()))
            .map_err(raise)
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_at_time_zone", 3, flags_pure(), move |ctx| {
        let value = owned(ctx.get_raw(0));
        let Some(zone) = ctx.get::<Option<String>>(1)? else {
            return Ok(Value::Null);
        };
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        at_time_zone(value, &zone, ty, &s.time_zone()).map_err(raise)
    })?;
    conn.create_scalar_function("pg_age", -1, flags_session(), move |ctx| {
        let tz = state.time_zone();
        let read = |i: usize| -> rusqlite::Result<Option<DateTime>> {
            match ctx.get::<Option<String>>(i)? {
                None => Ok(None),
                Some(text) => local_of(&Value::Text(text), PgType::new(Base::Timestamp), &tz)
                    .map(Some)
                    .map_err(raise),
            }
        };
        let (later, earlier) = if ctx.len() >= 2 {
            (read(0)?, read(1)?)
        } else {
            // age(x) is measured from today's midnight.
            let midnight = tz
                .to_datetime(state.now())
                .date()
                .to_datetime(jiff::civil::Time::midnight());
            (Some(midnight), read(0)?)
        };
        let (Some(later), Some(earlier)) = (later, earlier) else {
            return Ok(None);
        };
        Ok(Some(age(later, earlier).format()))
    })?;
    Ok(())
}

/// `age(a, b)`: years, months and days between two date-times, the rest as time, as PostgreSQL counts it.
fn age(a: DateTime, b: DateTime) -> datetime::Interval {
    let span = a.since((Unit::Year, b)).unwrap_or_default();
    let micros = i64::from(span.get_hours()) * 3_600_000_000
        + span.get_minutes() * 60_000_000
        + span.get_seconds() * 1_000_000
        + span.get_milliseconds() * 1000
        + span.get_microseconds();
    datetime::Interval {
        months: span.get_years() as i32 * 12 + span.get_months(),
        days: span.get_days() + span.get_weeks() * 7,
        micros,
    }
}

fn local_of(value: &Value, ty: PgType, tz: &TimeZone) -> Result<DateTime, PgError> {
    let text = match value {
        Value::Text(t) => t.clone(),
        other => value::output(PgType::TEXT, other, tz).unwrap_or_default(),
    };
    match ty.base() {
        Base::Timestamptz => {
            let ts = datetime::parse_timestamptz(&text, tz)?;
            Ok(tz.to_datetime(ts))
        }
        Base::Time => {
            let t = datetime::parse_time(&text)?;
            Ok(jiff::civil::Date::constant(2000, 1, 1).to_datetime(t))
        }
        _ => datetime::parse_timestamp(&text, "timestamp").map(|(dt, _)| dt),
    }
}

fn extract(field: &str, value: &Value, ty: PgType, tz: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    let field = field.to_ascii_lowercase();
    if ty.base() == Base::Interval {
        let text = value::output(ty, value, tz).unwrap_or_default();
        let iv = datetime::Interval::parse(&text)?;
        let number = match field.as_str() {
            "epoch" => {
                // PostgreSQL counts a year as 365.25 days and a month as 30 in an interval's epoch.
                let years = i64::from(iv.months / 12);
                let months = i64::from(iv.months % 12);
                let micros = years * 31_557_600_000_000
                    + months * 30 * datetime::MICROS_PER_DAY
                    + i64::from(iv.days) * datetime::MICROS_PER_DAY
                    + iv.micros;
                return Ok(Value::Text(decimal_micros(micros)));
            }
            "year" | "years" => i64::from(iv.months / 12),
            "month" | "months" => i64::from(iv.months % 12),
            "day" | "days" => i64::from(iv.days),
            "hour" | "hours" => iv.micros / 3_600_000_000,
            "minute" | "minutes" => iv.micros / 60_000_000 % 60,
            "second" | "seconds" => return Ok(Value::Text(decimal_micros(iv.micros % 60_000_000))),
            _ => return Err(PgError::unsupported(format!("EXTRACT({field}) of an interval"))),
        };
        return Ok(Value::Text(number.to_string()));
    }
    if field == "epoch" && ty.base() == Base::Timestamptz {
        let text = value::output(ty, value, tz).unwrap_or_default();
        let ts = datetime::parse_timestamptz(&text, tz)?;
        return Ok(Value::Text(decimal_micros(ts.as_microsecond())));
    }
    let dt = local_of(value, ty, tz)?;
    let number: i64 = match field.as_str() {
        "year" | "years" => i64::from(dt.year()),
        "month" | "months" => i64::from(dt.month()),
        "day" | "days" => i64::from(dt.day()),
        "hour" | "hours" => i64::from(dt.hour()),
        "minute" | "minutes" => i64::from(dt.minute()),
        "second" | "seconds" => {
            let micros = i64::from(dt.second()) * 1_000_000 + i64::from(dt.subsec_nanosecond() / 1000);
            return Ok(Value::Text(decimal_micros(micros)));
        }
        "dow" => i64::from(dt.weekday().to_sunday_zero_offset()),
        "isodow" => i64::from(dt.weekday().to_monday_one_offset()),
        "doy" => i64::from(dt.day_of_year()),
        "quarter" => i64::from((dt.month() - 1) / 3 + 1),
        "week" => i64::from(dt.date().iso_week_date().week()),
        "decade" => i64::from(dt.year()) / 10,
        "century" => (i64::from(dt.year()) + 99) / 100,
        "millennium" => (i64::from(dt.year()) + 999) / 1000,
        "epoch" => {
            let ts = TimeZone::UTC
                .to_timestamp(dt)
                .map_err(|_| PgError::out_of_range("timestamp"))?;
            return Ok(Value::Text(decimal_micros(ts.as_microsecond())));
        }
        "milliseconds" => {
            let micros = i64::from(dt.second()) * 1_000_000 + i64::from(dt.subsec_nanosecond() / 1000);
            return Ok(Value::Text(
                Decimal::parse(&format!("{}e-3", micros))
                    .map_or_else(|| micros.to_string(), |d| d.rescale(3).to_text()),
            ));
        }
        "microseconds" => i64::from(dt.second()) * 1_000_000 + i64::from(dt.subsec_nanosecond() / 1000),
        _ => return Err(PgError::unsupported(format!("EXTRACT({field})"))),
    };
    Ok(Value::Text(number.to_string()))
}

/// Microseconds as a decimal number of seconds with six digits after the point (`12.500000`), PostgreSQL's
/// form for `extract(second …)` and `extract(epoch …)`.
fn decimal_micros(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}{}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

fn date_trunc(field: &str, value: &Value, ty: PgType, tz: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    let dt = local_of(value, ty, tz)?;
    let date = dt.date();
    let (y, mo, d) = (date.year(), date.month(), date.day());
    let truncated = match field {
        "microseconds" => dt,
        "milliseconds" => dt
            .with()
            .subsec_nanosecond(dt.subsec_nanosecond() / 1_000_000 * 1_000_000)
            .build()
            .map_err(|_| PgError::out_of_range("timestamp"))?,
        "second" => DateTime::new(y, mo, d, dt.hour(), dt.minute(), dt.second(), 0)
            .map_err(|_| PgError::out_of_range("timestamp"))?,
        "minute" => {
            DateTime::new(y, mo, d, dt.hour(), dt.minute(), 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        "hour" => DateTime::new(y, mo, d, dt.hour(), 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "day" => DateTime::new(y, mo, d, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "week" => {
            let monday = date
                .checked_sub(jiff::Span::new().days(i64::from(date.weekday().to_monday_zero_offset())))
                .map_err(|_| PgError::out_of_range("timestamp"))?;
            monday.to_datetime(jiff::civil::Time::midnight())
        }
        "month" => DateTime::new(y, mo, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "quarter" => {
            DateTime::new(y, (mo - 1) / 3 * 3 + 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        "year" => DateTime::new(y, 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "decade" => {
            DateTime::new(y - y.rem_euclid(10), 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        "century" => {
            DateTime::new((y - 1) / 100 * 100 + 1, 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        _ => {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!("unit \"{field}\" not recognized for type {}", ty.sql_name()),
            ))
        }
    };
    match ty.base() {
        Base::Timestamptz => {
            let ts = tz
                .to_timestamp(truncated)
                .map_err(|_| PgError::out_of_range("timestamp"))?;
            Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
        }
        _ => Ok(Value::Text(datetime::format_timestamp(truncated))),
    }
}

fn datetime_arith(
    left: Value,
    minus: bool,
    right: Value,
    result: PgType,
    lt: PgType,
    rt: PgType,
    tz: &TimeZone,
) -> Result<Value, PgError> {
    if matches!(left, Value::Null) || matches!(right, Value::Null) {
        return Ok(Value::Null);
    }
    let text = |v: &Value, t: PgType| value::output(t, v, tz).unwrap_or_default();
    let interval_of = |v: &Value, t: PgType| datetime::Interval::parse(&text(v, t));
    let int_of = |v: &Value| -> Result<i64, PgError> {
        match v {
            Value::Integer(i) => Ok(*i),
            other => text(other, PgType::INT8)
                .trim()
                .parse()
                .map_err(|_| PgError::invalid_input("integer", &text(other, PgType::INT8))),
        }
    };
    let add_interval = |dt: DateTime, iv: datetime::Interval, sign: i64| -> Result<DateTime, PgError> {
        let span = jiff::Span::new()
            .try_months(i64::from(iv.months) * sign)
            .and_then(|s| s.try_days(i64::from(iv.days) * sign))
            .map_err(|_| PgError::out_of_range("timestamp"))?;
        let dt = dt.checked_add(span).map_err(|_| PgError::out_of_range("timestamp"))?;
        dt.checked_add(jiff::SignedDuration::from_micros(iv.micros * sign))
            .map_err(|_| PgError::out_of_range("timestamp"))
    };
    let sign = if minus { -1 } else { 1 };
    use Base::*;
    let out = match (lt.base(), rt.base()) {
        (Date, Int2 | Int4 | Int8) | (Int2 | Int4 | Int8, Date) => {
            let (date_value, n) = if lt.base() == Date {
                (&left, int_of(&right)?)
            } else {
                (&right, int_of(&left)?)
            };
            let date = datetime::parse_date(&text(date_value, PgType::new(Date)))?;
            let date = date
                .checked_add(
                    jiff::Span::new()
                        .try_days(n * sign)
                        .map_err(|_| PgError::out_of_range("date"))?,
                )
                .map_err(|_| PgError::out_of_range("date"))?;
            Value::Text(datetime::format_date(date))
        }
        (Date, Date) => {
            let a = datetime::parse_date(&text(&left, lt))?;
            let b = datetime::parse_date(&text(&right, rt))?;
            Value::Integer(i64::from(
                a.since(b).map_err(|_| PgError::out_of_range("date"))?.get_days(),
            ))
        }
        (Timestamp | Timestamptz | Date, Timestamp | Timestamptz | Date) => {
            let a = local_of(&left, lt, &TimeZone::UTC)?;
            let b = local_of(&right, rt, &TimeZone::UTC)?;
            let micros =
                i64::try_from(a.duration_since(b).as_micros()).map_err(|_| PgError::out_of_range("interval"))?;
            // PostgreSQL folds whole days out of the difference of two timestamps.
            let days = micros / datetime::MICROS_PER_DAY;
            Value::Text(
                datetime::Interval {
                    months: 0,
                    days: days as i32,
                    micros: micros - days * datetime::MICROS_PER_DAY,
                }
                .format(),
            )
        }
        (Interval, Interval) => {
            let a = interval_of(&left, lt)?;
            let b = interval_of(&right, rt)?;
            let b = if minus { b.negate() } else { b };
            Value::Text(
                datetime::Interval {
                    months: a.months + b.months,
                    days: a.days + b.days,
                    micros: a.micros + b.micros,
                }
                .format(),
            )
        }
        (Date | Timestamp | Timestamptz | Time, Interval) | (Interval, Date | Timestamp | Timestamptz) => {
            let (point, point_type, iv) = if rt.base() == Interval {
                (&left, lt, interval_of(&right, rt)?)
            } else {
                (&right, rt, interval_of(&left, lt)?)
            };
            let zone = if point_type.base() == Timestamptz {
                tz.clone()
            } else {
                TimeZone::UTC
            };
            let dt = local_of(point, point_type, &zone)?;
            let moved = add_interval(dt, iv, sign)?;
            match result.base() {
                Timestamptz => {
                    let ts = zone
                        .to_timestamp(moved)
                        .map_err(|_| PgError::out_of_range("timestamp"))?;
                    Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC))
                }
                Time => Value::Text(datetime::format_time(moved.time())),
                _ => Value::Text(datetime::format_timestamp(moved)),
            }
        }
        (Time, Time) => {
            let a = datetime::time_micros(datetime::parse_time(&text(&left, lt))?);
            let b = datetime::time_micros(datetime::parse_time(&text(&right, rt))?);
            Value::Text(
                datetime::Interval {
                    months: 0,
                    days: 0,
                    micros: a - b,
                }
                .format(),
            )
        }
        (Date, Time) => {
            let date = datetime::parse_date(&text(&left, lt))?;
            let time = datetime::parse_time(&text(&right, rt))?;
            Value::Text(datetime::format_timestamp(date.to_datetime(time)))
        }
        _ => {
            return Err(PgError::unsupported(format!(
                "{} {} {}",
                lt.sql_name(),
                if minus { "-" } else { "+" },
                rt.sql_name()
            )))
        }
    };
    Ok(out)
}

pub(super) fn at_time_zone(value: Value, zone: &str, ty: PgType, session: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    let tz = match datetime::parse_zone(zone) {
        Some(datetime::Zone::Offset(o)) => TimeZone::fixed(o),
        Some(datetime::Zone::Named(tz)) => tz,
        None => {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!("time zone \"{zone}\" not recognized"),
            ))
        }
    };
    let text = value::output(ty, &value, session).unwrap_or_default();
    match ty.base() {
        // timestamptz AT TIME ZONE z: the local time in z (a timestamp).
        Base::Timestamptz => {
            let ts = datetime::parse_timestamptz(&text, session)?;
            Ok(Value::Text(datetime::format_timestamp(tz.to_datetime(ts))))
        }
        // timestamp AT TIME ZONE z: that local time in z, as an instant (a timestamptz).
        _ => {
            let (dt, _) = datetime::parse_timestamp(&text, "timestamp")?;
            let ts = tz.to_timestamp(dt).map_err(|_| PgError::out_of_range("timestamp"))?;
            Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
        }
    }
}

/// `interval * factor` and `interval / factor` as PostgreSQL 15 computes them (`interval_mul`,
/// `interval_div`): months and days scaled and truncated, their fractions carried down to days and time
/// (a month is 30 days), rounded to the microsecond.
pub(super) fn scale_interval(iv: datetime::Interval, op: &str, factor: f64) -> Result<datetime::Interval, PgError> {
    let divide = op == "/";
    if divide && factor == 0.0 {
        return Err(PgError::new(crate::error::DIVISION_BY_ZERO, "division by zero"));
    }
    let scale = |x: f64| if divide { x / factor } else { x * factor };
    let out_of_range = || PgError::out_of_range("interval");
    let to_i32 = |x: f64| -> Result<i32, PgError> {
        if x.is_nan() || x < f64::from(i32::MIN) || x >= -f64::from(i32::MIN) {
            return Err(out_of_range());
        }
        Ok(x as i32)
    };
    let round_micros = |x: f64| (x * 1e6).round_ties_even() / 1e6;
    let months = to_i32(scale(f64::from(iv.months)))?;
    let mut days = to_i32(scale(f64::from(iv.days)))?;
    let month_remainder_days = round_micros((scale(f64::from(iv.months)) - f64::from(months)) * 30.0);
    let mut sec_remainder = round_micros(
        (scale(f64::from(iv.days)) - f64::from(days) + month_remainder_days - month_remainder_days.trunc()) * 86_400.0,
    );
    if sec_remainder.abs() >= 86_400.0 {
        let whole_days = (sec_remainder / 86_400.0).trunc();
        days = days.checked_add(to_i32(whole_days)?).ok_or_else(out_of_range)?;
        sec_remainder -= whole_days * 86_400.0;
    }
    days = days
        .checked_add(to_i32(month_remainder_days.trunc())?)
        .ok_or_else(out_of_range)?;
    let micros = (scale(iv.micros as f64) + sec_remainder * 1e6).round_ties_even();
    if micros.is_nan() || micros.abs() >= 9.2e18 {
        return Err(out_of_range());
    }
    Ok(datetime::Interval {
        months,
        days,
        micros: micros as i64,
    })
}

/// A timestamp (or timestamptz) value of `ty` plus `step`, in its stored form.
pub(super) fn add_interval(ty: PgType, v: Value, step: datetime::Interval, tz: &TimeZone) -> Result<Value, PgError> {
    datetime_arith(
        v,
        false,
        Value::Text(step.format()),
        ty,
        ty,
        PgType::new(Base::Interval),
        tz,
    )
}

/// `sum` and `avg` of intervals: months, days and microseconds summed apart (PostgreSQL's interval
/// addition); the average divided as `interval / count`.
struct IntervalSum {
    average: bool,
}

impl rusqlite::functions::Aggregate<(Option<datetime::Interval>, u64), Option<String>> for IntervalSum {
    fn init(&self, _: &mut rusqlite::functions::Context<'_>) -> rusqlite::Result<(Option<datetime::Interval>, u64)> {
        Ok((None, 0))
    }

    fn step(
        &self,
        ctx: &mut rusqlite::functions::Context<'_>,
        acc: &mut (Option<datetime::Interval>, u64),
    ) -> rusqlite::Result<()> {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(());
        };
        let iv = datetime::Interval::parse(&text).map_err(raise)?;
        let out_of_range = || raise(PgError::out_of_range("interval"));
        acc.0 = Some(match acc.0.take() {
            None => iv,
            Some(sum) => datetime::Interval {
                months: sum.months.checked_add(iv.months).ok_or_else(out_of_range)?,
                days: sum.days.checked_add(iv.days).ok_or_else(out_of_range)?,
                micros: sum.micros.checked_add(iv.micros).ok_or_else(out_of_range)?,
            },
        });
        acc.1 += 1;
        Ok(())
    }

    fn finalize(
        &self,
        _: &mut rusqlite::functions::Context<'_>,
        acc: Option<(Option<datetime::Interval>, u64)>,
    ) -> rusqlite::Result<Option<String>> {
        let Some((Some(sum), count)) = acc else {
            return Ok(None);
        };
        if !self.average {
            return Ok(Some(sum.format()));
        }
        scale_interval(sum, "/", count as f64)
            .map(|iv| Some(iv.format()))
            .map_err(raise)
    }
}
