//! The `make_*` constructors, `justify_*`, `date_bin`, `timeofday` and `pg_sleep`.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, DATETIME_FIELD_OVERFLOW, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::datetime::{self, Interval, MICROS_PER_DAY};

/// Argument `i` as a double (seconds of `make_time`…); `None` for NULL.
/// Argument `i` as a double (seconds of `make_time`…); `None` for NULL.
pub(super) fn float_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<f64>, PgError> {
    match args.value(i) {
        Value::Null => Ok(None),
        Value::Integer(v) => Ok(Some(v as f64)),
        Value::Real(f) => Ok(Some(f)),
        other => {
            let text = super::super::value_text(&other).unwrap_or_default();
            text.trim()
                .parse()
                .map(Some)
                .map_err(|_| PgError::invalid_input("double precision", &text))
        }
    }
}

pub(super) fn make_date_of(y: i64, m: i64, d: i64) -> Result<Date, PgError> {
    let bad = || {
        PgError::new(
            DATETIME_FIELD_OVERFLOW,
            format!("date field value out of range: {y}-{m:02}-{d:02}"),
        )
    };
    // Negative years are BC: year -1 is 1 BC, proleptic year 0.
    let year = if y < 0 { y + 1 } else { y };
    if y == 0 {
        return Err(bad());
    }
    Date::new(
        i16::try_from(year).map_err(|_| bad())?,
        i8::try_from(m).map_err(|_| bad())?,
        i8::try_from(d).map_err(|_| bad())?,
    )
    .map_err(|_| bad())
}

pub(super) fn make_time_of(h: i64, m: i64, sec: f64) -> Result<Time, PgError> {
    let bad = || {
        PgError::new(
            DATETIME_FIELD_OVERFLOW,
            format!(
                "time field value out of range: {h}:{m:02}:{:02}",
                crate::value::format_float8(sec)
            ),
        )
    };
    let micros = (sec * 1e6).round();
    if !(0.0..=60e6).contains(&micros) || !(0..=24).contains(&h) || !(0..=59).contains(&m) {
        return Err(bad());
    }
    let micros = micros as i64;
    if h == 24 && (m != 0 || micros != 0) {
        return Err(bad());
    }
    if micros == 60_000_000 {
        return Err(bad());
    }
    Time::new(
        h as i8 % 24,
        m as i8,
        (micros / 1_000_000) as i8,
        (micros % 1_000_000 * 1000) as i32,
    )
    .map_err(|_| bad())
}

/// `make_date`, `make_timestamp`, `make_timestamptz`: the date-time of the first six arguments (three for
/// a date); `None` if one is NULL.
pub(super) fn make_datetime(args: &Args<'_, '_>, with_time: bool) -> Result<Option<DateTime>, PgError> {
    let (Some(y), Some(m), Some(d)) = (args.int(0)?, args.int(1)?, args.int(2)?) else {
        return Ok(None);
    };
    let date = make_date_of(y, m, d)?;
    if !with_time {
        return Ok(Some(date.to_datetime(Time::midnight())));
    }
    let (Some(h), Some(mi), Some(s)) = (args.int(3)?, args.int(4)?, float_arg(args, 5)?) else {
        return Ok(None);
    };
    let time = make_time_of(h, mi, s)?;
    Ok(Some(date.to_datetime(time)))
}

pub(super) fn make_interval(args: &Args<'_, '_>) -> Result<Value, PgError> {
    let mut ints = [0i64; 6];
    for (i, slot) in ints.iter_mut().enumerate() {
        if i < args.len() {
            let Some(v) = args.int(i)? else {
                return Ok(Value::Null);
            };
            *slot = v;
        }
    }
    let secs = if args.len() > 6 {
        let Some(s) = float_arg(args, 6)? else {
            return Ok(Value::Null);
        };
        s
    } else {
        0.0
    };
    let [years, months, weeks, days, hours, mins] = ints;
    let overflow = || PgError::out_of_range("interval");
    let months = years
        .checked_mul(12)
        .and_then(|y| y.checked_add(months))
        .and_then(|m| i32::try_from(m).ok())
        .ok_or_else(overflow)?;
    let days = weeks
        .checked_mul(7)
        .and_then(|w| w.checked_add(days))
        .and_then(|d| i32::try_from(d).ok())
        .ok_or_else(overflow)?;
    let secs_micros = (secs * 1e6).round();
    if !secs_micros.is_finite() || secs_micros.abs() > 9.2e18 {
        return Err(overflow());
    }
    let micros = hours
        .checked_mul(3_600_000_000)
        .and_then(|h| mins.checked_mul(60_000_000).and_then(|m| h.checked_add(m)))
        .and_then(|t| t.checked_add(secs_micros as i64))
        .ok_or_else(overflow)?;
    Ok(Value::Text(Interval { months, days, micros }.format()))
}

pub(super) fn interval_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<Interval>, PgError> {
    args.text(i).map(|t| Interval::parse(&t)).transpose()
}

pub(super) fn justify_days(mut iv: Interval) -> Interval {
    let whole = iv.days / 30;
    iv.days -= whole * 30;
    iv.months += whole;
    if iv.months > 0 && iv.days < 0 {
        iv.days += 30;
        iv.months -= 1;
    } else if iv.months < 0 && iv.days > 0 {
        iv.days -= 30;
        iv.months += 1;
    }
    iv
}

pub(super) fn justify_hours(mut iv: Interval) -> Interval {
    let whole = iv.micros / MICROS_PER_DAY;
    iv.micros -= whole * MICROS_PER_DAY;
    iv.days += whole as i32;
    if iv.days > 0 && iv.micros < 0 {
        iv.micros += MICROS_PER_DAY;
        iv.days -= 1;
    } else if iv.days < 0 && iv.micros > 0 {
        iv.micros -= MICROS_PER_DAY;
        iv.days += 1;
    }
    iv
}

pub(super) fn justify_interval(mut iv: Interval) -> Interval {
    let whole_day = iv.micros / MICROS_PER_DAY;
    iv.micros -= whole_day * MICROS_PER_DAY;
    iv.days += whole_day as i32;
    let whole_month = iv.days / 30;
    iv.days -= whole_month * 30;
    iv.months += whole_month;
    if iv.months > 0 && (iv.days < 0 || (iv.days == 0 && iv.micros < 0)) {
        iv.days += 30;
        iv.months -= 1;
    } else if iv.months < 0 && (iv.days > 0 || (iv.days == 0 && iv.micros > 0)) {
        iv.days -= 30;
        iv.months += 1;
    }
    if iv.days > 0 && iv.micros < 0 {
        iv.micros += MICROS_PER_DAY;
        iv.days -= 1;
    } else if iv.days < 0 && iv.micros > 0 {
        iv.micros -= MICROS_PER_DAY;
        iv.days += 1;
    }
    iv
}

/// The type of a date-time argument: the translator's, else read from the stored text (a timestamptz is
/// stored with its `+00`).
pub(super) fn datetime_type(args: &Args<'_, '_>, i: usize) -> PgType {
    args.ty(i).unwrap_or_else(|| match args.text(i) {
        Some(t) if t.trim_end().ends_with("+00") => PgType::TIMESTAMPTZ,
        _ => PgType::new(Base::Timestamp),
    })
}

pub(super) fn date_bin(args: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
    let (Some(stride), Some(_), Some(_)) = (interval_arg(args, 0)?, args.text(1), args.text(2)) else {
        return Ok(Value::Null);
    };
    if stride.months != 0 {
        return Err(PgError::new(
            crate::error::FEATURE_NOT_SUPPORTED,
            "timestamps cannot be binned into intervals containing months or years",
        ));
    }
    let stride_micros = i64::from(stride.days) * MICROS_PER_DAY + stride.micros;
    if stride_micros <= 0 {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "stride must be greater than zero",
        ));
    }
    let ty = datetime_type(args, 1);
    let tz = state.time_zone();
    let instant = |i: usize| -> Result<i64, PgError> {
        let text = crate::value::output(datetime_type(args, i), &args.value(i), &tz).unwrap_or_default();
        if datetime_type(args, i).base() == Base::Timestamptz {
            Ok(datetime::parse_timestamptz(&text, &tz)?.as_microsecond())
        } else {
            let (dt, _) = datetime::parse_timestamp(&text, "timestamp")?;
            TimeZone::UTC
                .to_timestamp(dt)
                .map(|t| t.as_microsecond())
                .map_err(|_| PgError::out_of_range("timestamp"))
        }
    };
    let (source, origin) = (instant(1)?, instant(2)?);
    let delta = source - origin;
    let binned = origin + delta.div_euclid(stride_micros) * stride_micros;
    let ts = Timestamp::from_microsecond(binned).map_err(|_| PgError::out_of_range("timestamp"))?;
    Ok(Value::Text(match ty.base() {
        Base::Timestamptz => datetime::format_timestamptz(ts, &TimeZone::UTC),
        _ => datetime::format_timestamp(TimeZone::UTC.to_datetime(ts)),
    }))
}

pub(super) fn timeofday(state: &SessionState) -> String {
    let tz = state.time_zone();
    let now = Timestamp::now();
    let zoned = now.to_zoned(tz.clone());
    let abbreviation = tz.to_offset_info(now).abbreviation().to_owned();
    format!(
        "{} {:06} {} {}",
        zoned.strftime("%a %b %d %H:%M:%S."),
        zoned.subsec_nanosecond() / 1000,
        zoned.year(),
        abbreviation
    )
    .replace(". ", ".")
}

pub(super) fn pg_sleep(args: &Args<'_, '_>) -> Result<Value, PgError> {
    let Some(seconds) = float_arg(args, 0)? else {
        return Ok(Value::Null);
    };
    if seconds > SLEEP_SECONDS_MAX {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            format!("pg_sleep of more than {SLEEP_SECONDS_MAX} seconds is not supported"),
        ));
    }
    if seconds.is_nan() || seconds <= 0.0 {
        return Ok(Value::Text(String::new()));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds);
    loop {
        let now = std::time::Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep((deadline - now).min(std::time::Duration::from_millis(SLEEP_SLICE_MS)));
    }
    // `void` prints as an empty string.
    Ok(Value::Text(String::new()))
}
