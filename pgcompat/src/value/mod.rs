//! Values between PostgreSQL and SQLite: a PostgreSQL text (or binary) input becomes the stored SQLite value
//! of its type ([`input`], [`decode_binary`]), a SQLite value of a known type is made the stored form of
//! that type ([`coerce`]), and a stored value is printed as PostgreSQL prints it ([`output`],
//! [`encode_binary`]).

pub mod array;
pub mod binary;
pub mod datetime;
pub mod json;
pub mod numeric;
pub mod style;

use jiff::tz::TimeZone;
use rusqlite::types::Value;

use crate::error::{PgError, STRING_DATA_RIGHT_TRUNCATION};
use crate::types::{Base, Modifier, PgType};

pub use binary::{decode_binary, encode_binary};
pub use style::{output_styled, ByteaOutput, IntervalStyle, OutputStyle};

/// The stored SQLite value of a PostgreSQL text input of type `ty`, checked as PostgreSQL checks it
/// (22P02 bad syntax, 22003 out of range, 22001 too long, 22007/22008 bad dates). `tz` is the session's
/// `TimeZone`, for `timestamptz` text without a zone.
pub fn input(ty: PgType, text: &str, tz: &TimeZone) -> Result<Value, PgError> {
    if ty.is_array() {
        return array::input(ty, text, tz).map(Value::Text);
    }
    if let Some(instant) = special_instant(ty, text, tz) {
        return input(ty, &instant, tz);
    }
    if let Some(infinite) = infinity(ty, text) {
        return Ok(Value::Text(infinite.to_owned()));
    }
    let value = match ty.base() {
        Base::Bool => Value::Integer(i64::from(parse_bool(text)?)),
        Base::Int2 => Value::Integer(parse_int(text, i64::from(i16::MIN), i64::from(i16::MAX), "smallint")?),
        Base::Int4 => Value::Integer(parse_int(text, i64::from(i32::MIN), i64::from(i32::MAX), "integer")?),
        Base::Int8 => Value::Integer(parse_int(text, i64::MIN, i64::MAX, "bigint")?),
        Base::Oid => Value::Integer(parse_int(text, 0, i64::from(u32::MAX), "oid")?),
        Base::Float4 | Base::Float8 => float_value(parse_float(text, ty)?),
        Base::Numeric => Value::Text(parse_numeric(text, ty.modifier())?),
        // An enum's label is checked against the database's labels where the session's catalog is known
        // (`functions::cast`); here it is its text.
        Base::Text | Base::Name | Base::Regclass | Base::Enum(_) => Value::Text(text.to_owned()),
        // `"char"` keeps the first byte (a character of one byte, as the catalogs' codes are).
        Base::Char => Value::Text(text.chars().take(1).collect()),
        Base::Varchar => Value::Text(check_length(text, ty)?),
        Base::Bpchar => Value::Text(check_length(text, ty)?),
        Base::Bytea => Value::Blob(parse_bytea(text)?),
        Base::Date => Value::Text(datetime::format_date(datetime::parse_date(text)?)),
        Base::Time => {
            let time = datetime::parse_time(text)?;
            let time = match fraction_rounding(ty) {
                Some(round) => time.round(round).map_err(|_| PgError::out_of_range("time"))?,
                None => time,
            };
            Value::Text(datetime::format_time(time))
        }
        Base::Timetz => {
            let stored = datetime::parse_timetz(text, tz)?;
            match (fraction_rounding(ty), datetime::stored_timetz(&stored)) {
                (Some(round), Some((time, offset))) => {
                    let time = time
                        .round(round)
                        .map_err(|_| PgError::out_of_range("time with time zone"))?;
                    Value::Text(datetime::format_timetz(time, offset))
                }
                _ => Value::Text(stored),
            }
        }
        Base::Timestamp => {
            let (dt, _) = datetime::parse_timestamp(text, "timestamp")?;
            let dt = match fraction_rounding(ty) {
                Some(round) => dt.round(round).map_err(|_| PgError::out_of_range("timestamp"))?,
                None => dt,
            };
            Value::Text(datetime::format_timestamp(dt))
        }
        Base::Timestamptz => {
            let ts = datetime::parse_timestamptz(text, tz)?;
            let ts = match fraction_rounding(ty) {
                Some(round) => ts
                    .round(jiff::TimestampRound::new().smallest(round.0).increment(round.1))
                    .map_err(|_| PgError::out_of_range("timestamp with time zone"))?,
                None => ts,
            };
            Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC))
        }
        Base::Interval => Value::Text(datetime::Interval::parse(text)?.format()),
        Base::Uuid => Value::Text(parse_uuid(text)?),
        Base::Json => {
            json::check_json(text)?;
            Value::Text(text.to_owned())
        }
        Base::Jsonb => Value::Text(json::normalize_jsonb(text)?),
    };
    Ok(value)
}

/// A SQLite value produced by an expression, made the stored form of `ty` (an integer into a `numeric`
/// column becomes its text; a text into an integer column is parsed, as PostgreSQL's assignment of an
/// unknown literal would).
pub fn coerce(ty: PgType, value: Value, tz: &TimeZone) -> Result<Value, PgError> {
    match (&value, ty.storage()) {
        (Value::Null, _) => Ok(Value::Null),
        (Value::Text(text), _) => input(ty, text, tz),
        (Value::Integer(i), _) if ty.is_array() => Err(PgError::invalid_input(&ty.sql_name(), &i.to_string())),
        (Value::Integer(i), _) => match ty.base() {
            Base::Bool => Ok(Value::Integer(i64::from(*i != 0))),
            Base::Int2 => range(*i, i64::from(i16::MIN), i64::from(i16::MAX), "smallint"),
            Base::Int4 => range(*i, i64::from(i32::MIN), i64::from(i32::MAX), "integer"),
            Base::Int8 => Ok(value),
            Base::Float4 | Base::Float8 => Ok(Value::Real(*i as f64)),
            Base::Bytea => Ok(Value::Blob(i.to_string().into_bytes())),
            _ => input(ty, &i.to_string(), tz),
        },
        (Value::Real(f), _) => match ty.base() {
            Base::Float4 | Base::Float8 => Ok(value),
            Base::Int2 | Base::Int4 | Base::Int8 => {
                // PostgreSQL rounds half to even when a float becomes an integer.
                let rounded = f.round_ties_even();
                if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&rounded) {
                    return Err(PgError::out_of_range(&ty.sql_name()));
                }
                coerce(ty, Value::Integer(rounded as i64), tz)
            }
            _ => input(ty, &format_float8(*f), tz),
        },
        (Value::Blob(bytes), _) => match ty.base() {
            Base::Bytea => Ok(value),
            _ => {
                let text = String::from_utf8_lossy(bytes).into_owned();
                input(ty, &text, tz)
            }
        },
    }
}

/// PostgreSQL's special date/time inputs that name a moment relative to now (`now`, `today`, `tomorrow`,
/// `yesterday`) as the text of that moment in the session's zone; `None` for any other input.
fn special_instant(ty: PgType, text: &str, tz: &TimeZone) -> Option<String> {
    if !matches!(
        ty.base(),
        Base::Date | Base::Time | Base::Timetz | Base::Timestamp | Base::Timestamptz
    ) {
        return None;
    }
    let word = text.trim().to_ascii_lowercase();
    let now = jiff::Timestamp::now();
    let midnight = |days: i64| -> Option<String> {
        let date = tz
            .to_datetime(now)
            .date()
            .checked_add(jiff::Span::new().days(days))
            .ok()?;
        Some(format!("{} 00:00:00", datetime::format_date(date)))
    };
    match word.as_str() {
        "now" => Some(datetime::format_timestamptz(now, tz)),
        "today" => midnight(0),
        "tomorrow" => midnight(1),
        "yesterday" => midnight(-1),
        _ => None,
    }
}

/// `infinity` and `-infinity` of a date or timestamp, stored as those words: as text they order after and
/// before every ISO date, as PostgreSQL orders them.
pub(crate) fn infinity(ty: PgType, text: &str) -> Option<&'static str> {
    if !matches!(ty.base(), Base::Date | Base::Timestamp | Base::Timestamptz) || ty.is_array() {
        return None;
    }
    match text.trim().to_ascii_lowercase().as_str() {
        "infinity" | "+infinity" => Some("infinity"),
        "-infinity" => Some("-infinity"),
        _ => None,
    }
}

/// The rounding a `time(p)`, `timestamp(p)` or `timestamptz(p)` with `p` < 6 applies to the seconds'
/// fraction (half away from zero, as PostgreSQL rounds positive times): the unit and increment.
fn fraction_rounding(ty: PgType) -> Option<(jiff::Unit, i64)> {
    let Modifier::Length(p) = ty.modifier() else {
        return None;
    };
    Some(match p {
        0 => (jiff::Unit::Second, 1),
        1 => (jiff::Unit::Millisecond, 100),
        2 => (jiff::Unit::Millisecond, 10),
        3 => (jiff::Unit::Millisecond, 1),
        4 => (jiff::Unit::Microsecond, 100),
        5 => (jiff::Unit::Microsecond, 10),
        _ => return None,
    })
}

fn range(value: i64, min: i64, max: i64, type_name: &str) -> Result<Value, PgError> {
    if value < min || value > max {
        return Err(PgError::out_of_range(type_name));
    }
    Ok(Value::Integer(value))
}

/// A stored value printed as PostgreSQL prints a value of `ty` in text format; `None` for NULL.
pub fn output(ty: PgType, value: &Value, tz: &TimeZone) -> Option<String> {
    let text = match value {
        Value::Null => return None,
        Value::Integer(i) => match ty.base() {
            Base::Bool if !ty.is_array() => if *i != 0 { "t" } else { "f" }.to_owned(),
            Base::Bytea if !ty.is_array() => hex_bytea(i.to_string().as_bytes()),
            _ => i.to_string(),
        },
        Value::Real(f) => match ty.base() {
            Base::Float4 if !ty.is_array() => format_float4(*f as f32),
            Base::Bool if !ty.is_array() => if *f != 0.0 { "t" } else { "f" }.to_owned(),
            _ => format_float8(*f),
        },
        Value::Text(text) => match ty.base() {
            Base::Timestamptz if !ty.is_array() && !is_utc(tz) => match datetime::stored_timestamptz(text) {
                Some(ts) => datetime::format_timestamptz(ts, tz),
                None => text.clone(),
            },
            Base::Bytea if !ty.is_array() => hex_bytea(text.as_bytes()),
            Base::Bool if !ty.is_array() => match parse_bool(text) {
                Ok(b) => if b { "t" } else { "f" }.to_owned(),
                Err(_) => text.clone(),
            },
            _ => text.clone(),
        },
        Value::Blob(bytes) => match ty.base() {
            Base::Bytea => hex_bytea(bytes),
            _ => String::from_utf8_lossy(bytes).into_owned(),
        },
    };
    Some(text)
}

fn is_utc(tz: &TimeZone) -> bool {
    tz.to_fixed_offset().is_ok_and(|o| o.seconds() == 0)
}

/// `\x` and lower-case hex, PostgreSQL's default `bytea_output`.
pub fn hex_bytea(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("\\x");
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// `boolean` input.
pub fn parse_bool(text: &str) -> Result<bool, PgError> {
    let t = text.trim().to_ascii_lowercase();
    match t.as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Ok(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Ok(false),
        _ => Err(PgError::invalid_input("boolean", text)),
    }
}

fn parse_int(text: &str, min: i64, max: i64, type_name: &str) -> Result<i64, PgError> {
    let t = text.trim();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_') || digits.starts_with('_') {
        return Err(PgError::invalid_input(type_name, text));
    }
    let clean: String = t.chars().filter(|c| *c != '_').collect();
    let value: i128 = clean.parse().map_err(|_| {
        PgError::new(
            crate::error::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("value \"{text}\" is out of range for type {type_name}"),
        )
    })?;
    if value < i128::from(min) || value > i128::from(max) {
        return Err(PgError::new(
            crate::error::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("value \"{text}\" is out of range for type {type_name}"),
        ));
    }
    Ok(value as i64)
}

/// A `double precision` or `real` as SQLite holds it: a REAL, except `NaN`, which SQLite would turn into
/// NULL: it is the text `NaN` (which SQLite orders after every number, and equal to itself, as PostgreSQL
/// orders `NaN`).
pub fn float_value(value: f64) -> Value {
    if value.is_nan() {
        Value::Text("NaN".to_owned())
    } else {
        Value::Real(value)
    }
}

/// `double precision` input (`NaN`, `Infinity`, `-inf` included); 22P02 for anything else.
pub fn parse_float8(text: &str) -> Result<f64, PgError> {
    parse_float(text, PgType::FLOAT8)
}

fn parse_float(text: &str, ty: PgType) -> Result<f64, PgError> {
    let t = text.trim().to_ascii_lowercase();
    let type_name = if ty.base() == Base::Float4 {
        "real"
    } else {
        "double precision"
    };
    let value = match t.as_str() {
        "nan" => f64::NAN,
        "infinity" | "inf" | "+infinity" | "+inf" => f64::INFINITY,
        "-infinity" | "-inf" => f64::NEG_INFINITY,
        _ => {
            if !t
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'-' | b'+'))
            {
                return Err(PgError::invalid_input(type_name, text));
            }
            let v: f64 = t.parse().map_err(|_| PgError::invalid_input(type_name, text))?;
            if v.is_infinite() || (ty.base() == Base::Float4 && (v as f32).is_infinite()) {
                return Err(PgError::new(
                    crate::error::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!("\"{text}\" is out of range for type {type_name}"),
                ));
            }
            v
        }
    };
    Ok(if ty.base() == Base::Float4 {
        f64::from(value as f32)
    } else {
        value
    })
}

fn parse_numeric(text: &str, modifier: Modifier) -> Result<String, PgError> {
    if text.trim().eq_ignore_ascii_case("nan") {
        return Ok("NaN".to_owned());
    }
    let decimal = numeric::Decimal::parse(text).ok_or_else(|| PgError::invalid_input("numeric", text))?;
    let decimal = match modifier {
        Modifier::Numeric { precision, scale } => decimal.apply_modifier(precision, scale)?,
        _ => decimal,
    };
    Ok(decimal.to_text())
}

fn check_length(text: &str, ty: PgType) -> Result<String, PgError> {
    let Modifier::Length(max) = ty.modifier() else {
        return Ok(text.to_owned());
    };
    let max = max as usize;
    let count = text.chars().count();
    if count > max {
        // PostgreSQL accepts the value when only spaces are past the limit, and cuts them.
        let cut: String = text.chars().take(max).collect();
        if text.chars().skip(max).all(|c| c == ' ') {
            return Ok(cut);
        }
        return Err(PgError::new(
            STRING_DATA_RIGHT_TRUNCATION,
            format!("value too long for type {}", ty.sql_name()),
        ));
    }
    if ty.base() == Base::Bpchar && count < max {
        return Ok(format!("{text}{}", " ".repeat(max - count)));
    }
    Ok(text.to_owned())
}

/// `bytea` input: `\\x` hex, or the escape format.
pub(crate) fn parse_bytea(text: &str) -> Result<Vec<u8>, PgError> {
    if let Some(hex) = text.strip_prefix("\\x").or_else(|| text.strip_prefix("\\X")) {
        let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if digits.len() % 2 != 0 {
            return Err(PgError::invalid_input("bytea", text));
        }
        return digits
            .chunks(2)
            .map(|pair| {
                let s = std::str::from_utf8(pair).map_err(|_| PgError::invalid_input("bytea", text))?;
                u8::from_str_radix(s, 16).map_err(|_| PgError::invalid_input("bytea", text))
            })
            .collect();
    }
    // The escape format: `\\` is a backslash, `\NNN` an octal byte, anything else itself.
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
        } else if bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let octal = bytes
                .get(i + 1..i + 4)
                .ok_or_else(|| PgError::invalid_input("bytea", text))?;
            let s = std::str::from_utf8(octal).map_err(|_| PgError::invalid_input("bytea", text))?;
            out.push(u8::from_str_radix(s, 8).map_err(|_| PgError::invalid_input("bytea", text))?);
            i += 4;
        }
    }
    Ok(out)
}

fn parse_uuid(text: &str) -> Result<String, PgError> {
    let t = text.trim();
    let t = t.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or(t);
    let hex: String = t.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(PgError::invalid_input("uuid", text));
    }
    let h = hex.to_ascii_lowercase();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// A `double precision` as PostgreSQL prints it: the shortest text that reads back exactly, in
/// exponent form below 1e-4 and from 1e15 (`1e+20`, `1.5e-05`), `NaN`, `Infinity`.
pub fn format_float8(value: f64) -> String {
    format_float(value, format!("{value:e}"), 15)
}

/// A `real` as PostgreSQL prints it (exponent form from 1e6).
pub fn format_float4(value: f32) -> String {
    format_float(f64::from(value), format!("{value:e}"), 6)
}

fn format_float(value: f64, scientific: String, digits_max: i32) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let (mantissa, exponent) = scientific.split_once('e').expect("`{:e}` has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` has an integer exponent");
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if exponent < -4 || exponent >= digits_max {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{point}e{exp_sign}{:02}", exponent.abs());
    }
    if exponent < 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-exponent - 1) as usize));
    }
    let point = exponent as usize + 1;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_postgres() {
        assert_eq!(format_float8(1.5), "1.5");
        assert_eq!(format_float8(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_float8(1e20), "1e+20");
        assert_eq!(format_float8(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(format_float8(100.0), "100");
        assert_eq!(format_float8(0.00001), "1e-05");
        assert_eq!(format_float8(0.0001), "0.0001");
        assert_eq!(format_float8(-2.5), "-2.5");
        assert_eq!(format_float4(1234567.0), "1.234567e+06");
        assert_eq!(format_float4(0.1), "0.1");
    }

    #[test]
    fn inputs_check_as_postgres() {
        let utc = TimeZone::UTC;
        assert_eq!(input(PgType::BOOL, " YES ", &utc), Ok(Value::Integer(1)));
        assert_eq!(input(PgType::BOOL, "maybe", &utc).map_err(|e| e.code), Err("22P02"));
        assert_eq!(
            input(PgType::INT4, "2147483648", &utc).map_err(|e| e.code),
            Err("22003")
        );
        assert_eq!(input(PgType::INT4, "12abc", &utc).map_err(|e| e.code), Err("22P02"));
        assert_eq!(input(PgType::INT2, " -7 ", &utc), Ok(Value::Integer(-7)));
        let varchar3 = PgType::new(Base::Varchar).with_modifier(Modifier::Length(3));
        assert_eq!(input(varchar3, "abcd", &utc).map_err(|e| e.code), Err("22001"));
        assert_eq!(input(varchar3, "abc  ", &utc), Ok(Value::Text("abc".into())));
        let char3 = PgType::new(Base::Bpchar).with_modifier(Modifier::Length(3));
        assert_eq!(input(char3, "a", &utc), Ok(Value::Text("a  ".into())));
        assert_eq!(input(PgType::BYTEA, "\\x4142", &utc), Ok(Value::Blob(b"AB".to_vec())));
        assert_eq!(
            input(PgType::new(Base::Uuid), "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", &utc),
            Ok(Value::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()))
        );
        assert_eq!(
            input(PgType::TIMESTAMPTZ, "2024-01-02 03:04:05+01", &utc),
            Ok(Value::Text("2024-01-02 02:04:05+00".into()))
        );
    }

    #[test]
    fn outputs_print_as_postgres() {
        let utc = TimeZone::UTC;
        assert_eq!(output(PgType::BOOL, &Value::Integer(1), &utc).as_deref(), Some("t"));
        assert_eq!(
            output(PgType::BYTEA, &Value::Blob(vec![0xde, 0xad]), &utc).as_deref(),
            Some("\\xdead")
        );
        assert_eq!(
            output(PgType::FLOAT8, &Value::Real(1e20), &utc).as_deref(),
            Some("1e+20")
        );
        assert_eq!(output(PgType::INT4, &Value::Null, &utc), None);
    }

    proptest::proptest! {
        #[test]
        fn any_text_input_is_a_value_or_an_error(text in ".{0,40}") {
            let utc = TimeZone::UTC;
            for ty in [PgType::BOOL, PgType::INT4, PgType::NUMERIC, PgType::FLOAT8, PgType::BYTEA, PgType::TIMESTAMPTZ,
                       PgType::new(Base::Interval), PgType::new(Base::Jsonb), PgType::INT4.array(), PgType::new(Base::Date),
                       PgType::new(Base::Time), PgType::new(Base::Timestamp), PgType::new(Base::Uuid)] {
                let _ = input(ty, &text, &utc);
            }
        }

        #[test]
        fn floats_read_back_exactly(value in proptest::num::f64::NORMAL) {
            let text = format_float8(value);
            proptest::prop_assert_eq!(text.parse::<f64>().ok(), Some(value));
        }
    }
}
