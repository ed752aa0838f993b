//! `to_date` and `to_timestamp`: text read by a date-time format.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, DATETIME_FIELD_OVERFLOW, INVALID_DATETIME_FORMAT};
use crate::functions::SessionState;
use crate::value::datetime::{self};

/// The fields `to_date`/`to_timestamp` read from `text` by `format`.
pub(super) fn parse_by_format(text: &str, format: &str) -> Result<DateTime, PgError> {
    let mut year: Option<i64> = None;
    let (mut month, mut day, mut hour, mut minute, mut second, mut micros) = (1i64, 1i64, 0i64, 0i64, 0i64, 0i64);
    let mut pm: Option<bool> = None;
    let mut doy: Option<i64> = None;
    let mut input = text;
    let mut rest = format;
    let bad_value = |value: &str, pattern: &str| {
        PgError::new(
            INVALID_DATETIME_FORMAT,
            format!("invalid value \"{value}\" for \"{pattern}\""),
        )
    };
    while !rest.is_empty() {
        let body = rest
            .strip_prefix("FM")
            .or_else(|| rest.strip_prefix("fm"))
            .unwrap_or(rest);
        if let Some(quoted) = body.strip_prefix('"') {
            let end = quoted.find('"').map_or(quoted.len(), |e| e + 1);
            let literal = quoted.get(..end.saturating_sub(1)).unwrap_or("");
            for _ in literal.chars() {
                let mut chars = input.chars();
                chars.next();
                input = chars.as_str();
            }
            rest = quoted.get(end..).unwrap_or("");
            continue;
        }
        let found = PATTERNS.iter().find(|p| starts_with_ignore_case(body, p));
        let Some(pattern) = found else {
            // A separator in the format skips one separator (or space) of the input.
            let mut chars = rest.chars();
            let c = chars.next().unwrap_or(' ');
            rest = chars.as_str();
            if c.is_whitespace() {
                input = input.trim_start();
            } else if input.starts_with(|i: char| !i.is_ascii_alphanumeric()) {
                let mut i = input.chars();
                i.next();
                input = i.as_str();
            }
            continue;
        };
        rest = &body[pattern.len()..];
        input = input.trim_start();
        let upper = pattern.to_ascii_uppercase();
        if matches!(upper.as_str(), "AM" | "PM" | "A.M." | "P.M.") {
            let word_len = upper.len().min(input.len());
            let word = input.get(..word_len).unwrap_or("").to_ascii_uppercase();
            pm = Some(word.starts_with('P'));
            input = input.get(word_len..).unwrap_or("");
            continue;
        }
        if matches!(upper.as_str(), "MONTH" | "MON" | "DAY" | "DY") {
            let names: Vec<&str> = if upper.starts_with("MON") {
                MONTHS.to_vec()
            } else {
                DAYS.to_vec()
            };
            let found = names.iter().enumerate().find_map(|(i, n)| {
                let name = if upper.len() == 3 || upper == "DY" { &n[..3] } else { n };
                starts_with_ignore_case(input, name).then_some((i, name.len()))
            });
            let Some((i, len)) = found else {
                let word: String = input.chars().take_while(|c| c.is_alphabetic()).collect();
                return Err(bad_value(&word, pattern));
            };
            if upper.starts_with("MON") {
                month = i as i64 + 1;
            }
            input = &input[len..];
            continue;
        }
        let (_, width) = pattern_number(&upper, &Fields::default());
        let width = match upper.as_str() {
            "YYYY" | "IYYY" | "J" | "SSSS" | "SSSSS" => usize::MAX,
            "HH24" | "HH12" | "HH" => 2,
            _ => width,
        };
        let negative = input.starts_with('-');
        let digits_from = usize::from(negative);
        let len = input[digits_from..]
            .bytes()
            .take(width)
            .take_while(u8::is_ascii_digit)
            .count();
        let token = &input[..digits_from + len];
        if len == 0 {
            let word: String = input.chars().take(width.min(8)).collect();
            return Err(bad_value(&word, pattern));
        }
        let n: i64 = token.parse().map_err(|_| bad_value(token, pattern))?;
        input = &input[digits_from + len..];
        match upper.as_str() {
            "YYYY" | "IYYY" => year = Some(n),
            "YYY" | "IYY" => year = Some(if n < 100 { n + 2000 } else { n + 1000 }),
            "YY" | "IY" => year = Some(if n < 70 { n + 2000 } else { n + 1900 }),
            "Y" => year = Some(n + 2000),
            "MM" => month = n,
            "DD" => day = n,
            "DDD" => doy = Some(n),
            "HH24" | "HH" | "HH12" => hour = n,
            "MI" => minute = n,
            "SS" => second = n,
            "MS" => micros = n * 1000,
            "US" => micros = n,
            "SSSS" | "SSSSS" => {
                hour = n / 3600;
                minute = n / 60 % 60;
                second = n % 60;
            }
            _ => {}
        }
    }
    if let Some(pm) = pm {
        if !(1..=12).contains(&hour) {
            return Err(PgError::new(
                DATETIME_FIELD_OVERFLOW,
                format!("hour \"{hour}\" is invalid for the 12-hour clock"),
            ));
        }
        hour = hour % 12 + if pm { 12 } else { 0 };
    }
    let year = year.unwrap_or(1);
    let overflow = || PgError::new(DATETIME_FIELD_OVERFLOW, "date/time field value out of range");
    let to_i16 = |v: i64| i16::try_from(v).map_err(|_| overflow());
    let to_i8 = |v: i64| i8::try_from(v).map_err(|_| overflow());
    let date = match doy {
        Some(d) => Date::new(to_i16(year)?, 1, 1)
            .ok()
            .and_then(|jan1| jan1.checked_add(jiff::Span::new().days(d - 1)).ok())
            .ok_or_else(overflow)?,
        None => Date::new(to_i16(year)?, to_i8(month)?, to_i8(day)?).map_err(|_| overflow())?,
    };
    let time = Time::new(
        to_i8(hour)?,
        to_i8(minute)?,
        to_i8(second)?,
        i32::try_from(micros * 1000).map_err(|_| overflow())?,
    )
    .map_err(|_| overflow())?;
    Ok(date.to_datetime(time))
}

pub(super) fn to_timestamp(args: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
    let tz = state.time_zone();
    if args.len() >= 2 {
        let (Some(text), Some(format)) = (args.text(0), args.text(1)) else {
            return Ok(Value::Null);
        };
        let dt = parse_by_format(&text, &format)?;
        let ts = tz.to_timestamp(dt).map_err(|_| PgError::out_of_range("timestamp"))?;
        return Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)));
    }
    let seconds = match args.value(0) {
        Value::Null => return Ok(Value::Null),
        Value::Integer(i) => i as f64,
        Value::Real(f) => f,
        other => {
            let text = super::super::value_text(&other).unwrap_or_default();
            let t = text.trim().to_ascii_lowercase();
            match t.as_str() {
                "infinity" => return Ok(Value::Text("infinity".to_owned())),
                "-infinity" => return Ok(Value::Text("-infinity".to_owned())),
                _ => t
                    .parse()
                    .map_err(|_| PgError::invalid_input("double precision", &text))?,
            }
        }
    };
    if seconds.is_nan() {
        return Err(PgError::new(DATETIME_FIELD_OVERFLOW, "timestamp cannot be NaN"));
    }
    if seconds.is_infinite() {
        return Ok(Value::Text(
            if seconds > 0.0 { "infinity" } else { "-infinity" }.to_owned(),
        ));
    }
    let micros = (seconds * 1e6).round();
    let ts = (micros.abs() < 9.2e18)
        .then(|| Timestamp::from_microsecond(micros as i64).ok())
        .flatten()
        .ok_or_else(|| {
            PgError::new(
                DATETIME_FIELD_OVERFLOW,
                format!("timestamp out of range: \"{}\"", crate::value::format_float8(seconds)),
            )
        })?;
    Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
}

pub(super) fn to_date(args: &Args<'_, '_>) -> Result<Value, PgError> {
    let (Some(text), Some(format)) = (args.text(0), args.text(1)) else {
        return Ok(Value::Null);
    };
    let dt = parse_by_format(&text, &format)?;
    Ok(Value::Text(datetime::format_date(dt.date())))
}
