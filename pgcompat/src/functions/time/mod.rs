//! Date and time functions with PostgreSQL 15's results: `to_char` (dates, times, timestamps, intervals
//! and numbers), `to_number`, `to_date`, `to_timestamp`, the `make_*` constructors, `justify_*`,
//! `isfinite`, `timezone`, `date_bin`, `timeofday` and `pg_sleep`.
//!
//! `pg_sleep` sleeps in slices of at most [`SLEEP_SLICE_MS`] and at most [`SLEEP_SECONDS_MAX`] a call; it
//! runs inside a SQLite function, so it is not interruptible: a cancel request takes effect when it returns.

mod format;
mod make;
mod number;
mod parse;

use std::sync::Arc;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{define, Args, Purity};
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::datetime::{self, Interval};
use format::{
    fields_of, format_datetime, interval_fields, ordinal_suffix, pattern_number, starts_with_ignore_case, Fields,
};
use make::{
    date_bin, datetime_type, float_arg, interval_arg, justify_days, justify_hours, justify_interval, make_datetime,
    make_interval, make_time_of, pg_sleep, timeofday,
};
use number::{decimal_of, format_number, to_number};
use parse::{to_date, to_timestamp};

/// Longest slice `pg_sleep` sleeps at once.
pub(crate) const SLEEP_SLICE_MS: u64 = 100;
/// Longest one `pg_sleep` call may sleep (longer ones fail with 22023).
pub(crate) const SLEEP_SECONDS_MAX: f64 = 60.0;
/// Longest `to_char` format accepted, so the output stays bounded.
const FORMAT_BYTES_MAX: usize = 64 << 10;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// The date-time patterns, longest first where one is a prefix of another.
const PATTERNS: &[&str] = &[
    "HH24", "HH12", "HH", "MI", "SSSSS", "SSSS", "SS", "MS", "US", "AM", "PM", "am", "pm", "A.M.", "P.M.", "a.m.",
    "p.m.", "IYYY", "IYY", "IY", "YYYY", "YYY", "YY", "Y", "MONTH", "Month", "month", "MON", "Mon", "mon", "MM", "DAY",
    "Day", "day", "DY", "Dy", "dy", "DDD", "DD", "D", "IW", "ID", "WW", "W", "Q", "CC", "J",
];

fn to_char(args: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
    let value = args.value(0);
    let (false, Some(format)) = (matches!(value, Value::Null), args.text(1)) else {
        return Ok(Value::Null);
    };
    if format.len() > FORMAT_BYTES_MAX {
        return Err(PgError::new(crate::error::PROGRAM_LIMIT_EXCEEDED, "format too long"));
    }
    let tz = state.time_zone();
    let ty = args.ty(0).unwrap_or(match value {
        Value::Integer(_) => PgType::INT8,
        Value::Real(_) => PgType::FLOAT8,
        _ => PgType::new(Base::Timestamp),
    });
    let text = crate::value::output(ty, &value, &tz).unwrap_or_default();
    let out = match ty.base() {
        Base::Interval => format_datetime(&format, &interval_fields(Interval::parse(&text)?)),
        Base::Date | Base::Timestamp | Base::Timestamptz => {
            if text.contains("infinity") {
                return Ok(Value::Null);
            }
            let (dt, _) = datetime::parse_timestamp(&text, "timestamp")?;
            format_datetime(&format, &fields_of(dt))
        }
        Base::Time => {
            let time = datetime::parse_time(&text)?;
            format_datetime(&format, &fields_of(Date::constant(2000, 1, 1).to_datetime(time)))
        }
        _ => {
            let Some(d) = decimal_of(&value)? else {
                return Ok(Value::Null);
            };
            format_number(&d, &format)?
        }
    };
    super::check_size(out.len())?;
    Ok(Value::Text(out))
}

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    // The session's zone matters to a timestamptz argument.
    define(conn, state, "to_char", 2, Purity::Volatile, to_char)?;
    define(conn, state, "to_number", 2, Purity::Pure, |a, _| {
        let (Some(text), Some(format)) = (a.text(0), a.text(1)) else {
            return Ok(Value::Null);
        };
        to_number(&text, &format)
    })?;
    define(conn, state, "to_date", 2, Purity::Pure, |a, _| to_date(a))?;
    for arity in [1, 2] {
        define(conn, state, "to_timestamp", arity, Purity::Volatile, to_timestamp)?;
    }
    define(conn, state, "make_date", 3, Purity::Pure, |a, _| {
        Ok(make_datetime(a, false)?.map_or(Value::Null, |dt| Value::Text(datetime::format_date(dt.date()))))
    })?;
    define(conn, state, "make_time", 3, Purity::Pure, |a, _| {
        let (Some(h), Some(m), Some(s)) = (a.int(0)?, a.int(1)?, float_arg(a, 2)?) else {
            return Ok(Value::Null);
        };
        Ok(Value::Text(datetime::format_time(make_time_of(h, m, s)?)))
    })?;
    define(conn, state, "make_timestamp", 6, Purity::Pure, |a, _| {
        Ok(make_datetime(a, true)?.map_or(Value::Null, |dt| Value::Text(datetime::format_timestamp(dt))))
    })?;
    for arity in [6, 7] {
        define(conn, state, "make_timestamptz", arity, Purity::Volatile, |a, s| {
            let Some(dt) = make_datetime(a, true)? else {
                return Ok(Value::Null);
            };
            let tz = if a.len() > 6 {
                let Some(zone) = a.text(6) else {
                    return Ok(Value::Null);
                };
                match datetime::parse_zone(&zone) {
                    Some(datetime::Zone::Offset(o)) => TimeZone::fixed(o),
                    Some(datetime::Zone::Named(tz)) => tz,
                    None => {
                        return Err(PgError::new(
                            INVALID_PARAMETER_VALUE,
                            format!("time zone \"{zone}\" not recognized"),
                        ))
                    }
                }
            } else {
                s.time_zone()
            };
            let ts = tz.to_timestamp(dt).map_err(|_| PgError::out_of_range("timestamp"))?;
            Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
        })?;
    }
    define(conn, state, "make_interval", -1, Purity::Pure, |a, _| make_interval(a))?;
    define(conn, state, "justify_days", 1, Purity::Pure, |a, _| {
        Ok(interval_arg(a, 0)?.map_or(Value::Null, |iv| Value::Text(justify_days(iv).format())))
    })?;
    define(conn, state, "justify_hours", 1, Purity::Pure, |a, _| {
        Ok(interval_arg(a, 0)?.map_or(Value::Null, |iv| Value::Text(justify_hours(iv).format())))
    })?;
    define(conn, state, "justify_interval", 1, Purity::Pure, |a, _| {
        Ok(interval_arg(a, 0)?.map_or(Value::Null, |iv| Value::Text(justify_interval(iv).format())))
    })?;
    define(conn, state, "isfinite", 1, Purity::Pure, |a, _| {
        Ok(a.text(0).map_or(Value::Null, |t| {
            Value::Integer(i64::from(!t.to_ascii_lowercase().contains("infinity")))
        }))
    })?;
    define(conn, state, "timezone", 2, Purity::Volatile, |a, s| {
        let Some(zone) = a.text(0) else {
            return Ok(Value::Null);
        };
        super::super::temporal::at_time_zone(a.value(1), &zone, datetime_type(a, 1), &s.time_zone())
    })?;
    define(conn, state, "date_bin", 3, Purity::Volatile, date_bin)?;
    define(conn, state, "timeofday", 0, Purity::Volatile, |_, s| {
        Ok(Value::Text(timeofday(s)))
    })?;
    define(conn, state, "pg_sleep", 1, Purity::Volatile, |a, _| pg_sleep(a))?;
    Ok(())
}

/// The result type of a function of this file.
pub(super) fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    Some(match name {
        "to_char" | "timeofday" => PgType::TEXT,
        "to_number" => PgType::NUMERIC,
        "to_date" | "make_date" => PgType::new(Base::Date),
        "to_timestamp" | "make_timestamptz" => PgType::TIMESTAMPTZ,
        "make_time" => PgType::new(Base::Time),
        "make_timestamp" => PgType::new(Base::Timestamp),
        "make_interval" | "justify_days" | "justify_hours" | "justify_interval" => PgType::new(Base::Interval),
        "isfinite" => PgType::BOOL,
        "timezone" => match args.get(1).copied().flatten().map(PgType::base) {
            Some(Base::Timestamptz) => PgType::new(Base::Timestamp),
            _ => PgType::TIMESTAMPTZ,
        },
        "date_bin" => args.get(1).copied().flatten().unwrap_or(PgType::new(Base::Timestamp)),
        "pg_sleep" => PgType::TEXT,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, check_errors};

    #[test]
    fn to_char_dates_as_postgres() {
        check(&[
            (
                "to_char(TIMESTAMP '2024-05-07 08:09:10', 'YYYY-MM-DD HH24:MI:SS')",
                Some("2024-05-07 08:09:10"),
            ),
            ("to_char(DATE '2024-05-07', 'DD/MM/YYYY')", Some("07/05/2024")),
            (
                "to_char(TIMESTAMP '2024-05-07 20:09:10', 'HH12:MI AM')",
                Some("08:09 PM"),
            ),
            ("to_char(DATE '2024-05-07', 'Mon DD, YYYY')", Some("May 07, 2024")),
            ("to_char(DATE '2024-05-07', 'FMMonth FMDD')", Some("May 7")),
            ("to_char(DATE '2024-05-07', 'Day')", Some("Tuesday  ")),
            ("to_char(DATE '2024-05-07', 'Dy')", Some("Tue")),
            ("to_char(DATE '2024-05-07', 'IYYY-IW')", Some("2024-19")),
            ("to_char(INTERVAL '3 hours 5 minutes', 'HH24:MI')", Some("03:05")),
            (
                "to_char(TIMESTAMP '2024-05-01 09:00', 'YYYY-MM-DD\"T\"HH24:MI:SS')",
                Some("2024-05-01T09:00:00"),
            ),
            (
                "to_char(DATE '2024-05-01', 'FMDDth \"of\" FMMonth')",
                Some("1st of May"),
            ),
            (
                "to_char(DATE '2024-05-07', 'MONTH|month|DY|dy|Q|WW|DDD|D')",
                Some("MAY      |may      |TUE|tue|2|19|128|3"),
            ),
            (
                "to_char(TIMESTAMP '2024-05-07 00:00:01.5', 'HH12 am MS US')",
                Some("12 am 500 500000"),
            ),
        ]);
    }

    #[test]
    fn to_char_numbers_as_postgres() {
        check(&[
            ("to_char(0.5, '9.99')", Some("  .50")),
            ("to_char(0, '999')", Some("   0")),
            ("to_char(12, 'FM99.99')", Some("12.")),
            ("to_char(12.3, '99.99')", Some(" 12.30")),
            ("to_char(-12, 'S999')", Some(" -12")),
            ("to_char(12, 'S999')", Some(" +12")),
            ("to_char(-12, '999PR')", Some(" <12>")),
            ("to_char(12, '999MI')", Some(" 12 ")),
            ("to_char(12345, '999')", Some(" ###")),
            ("to_char(1234567, '9,999,999')", Some(" 1,234,567")),
            ("to_char(123, '9,999')", Some("   123")),
            ("to_char(-0.5, 'FM0.00')", Some("-0.50")),
            ("to_char(5, 'FM9th')", Some("5th")),
            ("to_char(-123, 'FM999')", Some("-123")),
            ("to_char(3, '000')", Some(" 003")),
            ("to_char(1234.5, 'FM9G999D99')", Some("1,234.5")),
            ("to_char(12, '9999S')", Some("  12+")),
            ("to_char(-0.1, '99.9')", Some("  -.1")),
            ("to_number('12,454.8-', '99G999D9S')", Some("-12454.8")),
            ("to_number('1 234.56', '9 999.99')", Some("1234.56")),
        ]);
    }

    #[test]
    fn parses_and_makes_as_postgres() {
        check(&[
            ("to_date('2024-05-07', 'YYYY-MM-DD')", Some("2024-05-07")),
            ("to_date('07/05/2024', 'DD/MM/YYYY')", Some("2024-05-07")),
            ("to_date('May 7 2024', 'Mon DD YYYY')", Some("2024-05-07")),
            (
                "to_timestamp('2024-05-07 08:09', 'YYYY-MM-DD HH24:MI')",
                Some("2024-05-07 08:09:00+00"),
            ),
            (
                "to_timestamp('2024-05-07 08:09 PM', 'YYYY-MM-DD HH:MI AM')",
                Some("2024-05-07 20:09:00+00"),
            ),
            ("to_timestamp(0)", Some("1970-01-01 00:00:00+00")),
            ("to_timestamp(1700000000)", Some("2023-11-14 22:13:20+00")),
            ("to_timestamp(1.5)", Some("1970-01-01 00:00:01.5+00")),
            ("make_date(2024, 2, 29)", Some("2024-02-29")),
            ("make_time(8, 15, 30.5)", Some("08:15:30.5")),
            ("make_timestamp(2024, 1, 2, 3, 4, 5)", Some("2024-01-02 03:04:05")),
            (
                "make_timestamptz(2024, 1, 2, 3, 4, 5, 'UTC')",
                Some("2024-01-02 03:04:05+00"),
            ),
            (
                "make_timestamptz(2024, 7, 1, 12, 0, 0, 'Europe/Berlin')",
                Some("2024-07-01 10:00:00+00"),
            ),
            (
                "make_interval(1, 2, 1, 3, 4, 5, 6.5)",
                Some("1 year 2 mons 10 days 04:05:06.5"),
            ),
            ("make_interval(0, 0, 0, 10, 2)", Some("10 days 02:00:00")),
        ]);
        check_errors(&[
            ("make_date(2024, 2, 30)", "22008"),
            ("make_time(25, 0, 0)", "22008"),
            ("to_date('2024-13-01', 'YYYY-MM-DD')", "22008"),
            ("to_date('x', 'YYYY')", "22007"),
        ]);
    }

    #[test]
    fn intervals_and_the_rest_as_postgres() {
        check(&[
            ("justify_hours(INTERVAL '36 hours')", Some("1 day 12:00:00")),
            ("justify_days(INTERVAL '45 days')", Some("1 mon 15 days")),
            ("justify_interval(INTERVAL '1 month -1 hour')", Some("29 days 23:00:00")),
            ("isfinite(DATE '2024-01-01')", Some("t")),
            ("isfinite(INTERVAL '1 day')", Some("t")),
            (
                "timezone('UTC', TIMESTAMP '2024-01-01 00:00')",
                Some("2024-01-01 00:00:00+00"),
            ),
            (
                "date_bin(INTERVAL '15 minutes', TIMESTAMP '2024-01-01 10:37:00', TIMESTAMP '2000-01-01')",
                Some("2024-01-01 10:30:00"),
            ),
            ("pg_sleep(0.01)", Some("")),
        ]);
        check_errors(&[
            ("pg_sleep(61)", "22023"),
            (
                "date_bin(INTERVAL '0 minutes', TIMESTAMP '2024-01-01', TIMESTAMP '2000-01-01')",
                "22023",
            ),
        ]);
    }
}
