//! PostgreSQL's binary wire format for each supported type: stored values encoded for result columns a
//! client asked in binary, and binary parameters decoded to stored values. Every decoder checks lengths and
//! ranges: a malformed parameter is 22P03, never a panic.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use rusqlite::types::Value;

use super::datetime::{self, Interval, MICROS_PER_DAY};
use super::numeric::Decimal;
use crate::error::{PgError, INVALID_BINARY_REPRESENTATION};
use crate::types::{Base, PgType};

const PG_EPOCH_DATE: Date = Date::constant(2000, 1, 1);

fn bad(ty: PgType) -> PgError {
    PgError::new(
        INVALID_BINARY_REPRESENTATION,
        format!("incorrect binary data format for a {} parameter", ty.sql_name()),
    )
}

fn stored_text(ty: PgType, value: &Value, tz: &TimeZone) -> String {
    super::output(ty, value, tz).unwrap_or_default()
}

/// A stored value (not NULL) in the binary format of `ty`.
pub fn encode_binary(ty: PgType, value: &Value, tz: &TimeZone) -> Result<Vec<u8>, PgError> {
    if ty.is_array() {
        return encode_array(ty, value, tz);
    }
    let int = || -> Result<i64, PgError> {
        match value {
            Value::Integer(i) => Ok(*i),
            Value::Real(f) => Ok(f.round_ties_even() as i64),
            Value::Text(t) => t.trim().parse().map_err(|_| PgError::invalid_input(&ty.sql_name(), t)),
            _ => Err(PgError::invalid_input(&ty.sql_name(), "blob")),
        }
    };
    let float = || -> Result<f64, PgError> {
        match value {
            Value::Integer(i) => Ok(*i as f64),
            Value::Real(f) => Ok(*f),
            Value::Text(t) => t.trim().parse().map_err(|_| PgError::invalid_input(&ty.sql_name(), t)),
            _ => Err(PgError::invalid_input(&ty.sql_name(), "blob")),
        }
    };
    // infinity and -infinity: PostgreSQL's wire forms are the extreme values.
    if let Value::Text(t) = value {
        let infinite = match t.as_str() {
            "infinity" => Some(true),
            "-infinity" => Some(false),
            _ => None,
        };
        match (ty.base(), infinite) {
            (Base::Date, Some(up)) => return Ok(if up { i32::MAX } else { i32::MIN }.to_be_bytes().to_vec()),
            (Base::Timestamp | Base::Timestamptz, Some(up)) => {
                return Ok(if up { i64::MAX } else { i64::MIN }.to_be_bytes().to_vec())
            }
            _ => {}
        }
    }
    let out = match ty.base() {
        Base::Bool => vec![u8::from(stored_text(ty, value, tz) == "t")],
        Base::Int2 => (int()? as i16).to_be_bytes().to_vec(),
        Base::Int4 => (int()? as i32).to_be_bytes().to_vec(),
        Base::Int8 => int()?.to_be_bytes().to_vec(),
        Base::Oid => (int()? as u32).to_be_bytes().to_vec(),
        Base::Float4 => (float()? as f32).to_be_bytes().to_vec(),
        Base::Float8 => float()?.to_be_bytes().to_vec(),
        Base::Bytea => match value {
            Value::Blob(b) => b.clone(),
            Value::Text(t) => t.as_bytes().to_vec(),
            other => stored_text(PgType::TEXT, other, tz).into_bytes(),
        },
        Base::Text | Base::Varchar | Base::Bpchar | Base::Name | Base::Json | Base::Regclass | Base::Enum(_) => {
            stored_text(ty, value, tz).into_bytes()
        }
        // One byte: the text's first (PostgreSQL's `"char"` keeps one).
        Base::Char => stored_text(ty, value, tz).into_bytes().into_iter().take(1).collect(),
        Base::Jsonb => {
            let mut out = vec![1u8];
            out.extend_from_slice(stored_text(ty, value, tz).as_bytes());
            out
        }
        Base::Uuid => {
            let text = stored_text(ty, value, tz);
            let hex: String = text.chars().filter(|c| *c != '-').collect();
            (0..16)
                .map(|i| hex.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| PgError::invalid_input("uuid", &text))?
        }
        Base::Date => {
            let date = datetime::parse_date(&stored_text(ty, value, tz))?;
            let days = date
                .since(PG_EPOCH_DATE)
                .map_err(|_| PgError::out_of_range("date"))?
                .get_days();
            days.to_be_bytes().to_vec()
        }
        Base::Time => {
            let time = datetime::parse_time(&stored_text(ty, value, tz))?;
            datetime::time_micros(time).to_be_bytes().to_vec()
        }
        Base::Timetz => {
            let text = stored_text(ty, value, tz);
            let (time, offset) =
                datetime::stored_timetz(&text).ok_or_else(|| PgError::invalid_input("timetz", &text))?;
            // PostgreSQL's wire form: microseconds, then the zone as seconds *west* of UTC.
            let mut out = datetime::time_micros(time).to_be_bytes().to_vec();
            out.extend_from_slice(&(-offset).to_be_bytes());
            out
        }
        Base::Timestamp => {
            let (dt, _) = datetime::parse_timestamp(&stored_text(ty, value, tz), "timestamp")?;
            micros_since_epoch(dt)?.to_be_bytes().to_vec()
        }
        Base::Timestamptz => {
            let text = match value {
                Value::Text(t) => t.clone(),
                other => stored_text(ty, other, tz),
            };
            let ts = datetime::stored_timestamptz(&text).ok_or_else(|| PgError::invalid_input("timestamptz", &text))?;
            let dt = TimeZone::UTC.to_datetime(ts);
            micros_since_epoch(dt)?.to_be_bytes().to_vec()
        }
        Base::Interval => {
            let iv = Interval::parse(&stored_text(ty, value, tz))?;
            let mut out = iv.micros.to_be_bytes().to_vec();
            out.extend_from_slice(&iv.days.to_be_bytes());
            out.extend_from_slice(&iv.months.to_be_bytes());
            out
        }
        Base::Numeric => encode_numeric(&stored_text(ty, value, tz))?,
    };
    Ok(out)
}

fn micros_since_epoch(dt: DateTime) -> Result<i64, PgError> {
    let epoch = PG_EPOCH_DATE.to_datetime(jiff::civil::Time::midnight());
    let span = dt.duration_since(epoch);
    i64::try_from(span.as_micros()).map_err(|_| PgError::out_of_range("timestamp"))
}

fn datetime_from_micros(micros: i64) -> Option<DateTime> {
    let epoch = PG_EPOCH_DATE.to_datetime(jiff::civil::Time::midnight());
    epoch.checked_add(jiff::SignedDuration::from_micros(micros)).ok()
}

fn encode_numeric(text: &str) -> Result<Vec<u8>, PgError> {
    let mut out = Vec::new();
    if text == "NaN" {
        for v in [0u16, 0, 0xC000, 0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        return Ok(out);
    }
    let d = Decimal::parse(text).ok_or_else(|| PgError::invalid_input("numeric", text))?;
    let dscale = u16::try_from(d.frac.len()).map_err(|_| PgError::out_of_range("numeric"))?;
    // Base-10000 digit groups aligned on the point.
    let int_pad = (4 - d.int.len() % 4) % 4;
    let int = format!("{}{}", "0".repeat(int_pad), d.int);
    let frac_pad = (4 - d.frac.len() % 4) % 4;
    let frac = format!("{}{}", d.frac, "0".repeat(frac_pad));
    let mut groups: Vec<i16> = int
        .as_bytes()
        .chunks(4)
        .chain(frac.as_bytes().chunks(4))
        .map(|c| {
            std::str::from_utf8(c)
                .expect("ASCII digits")
                .parse::<i16>()
                .expect("four digits")
        })
        .collect();
    let mut weight = i16::try_from(int.len() / 4).map_err(|_| PgError::out_of_range("numeric"))? - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let ndigits = u16::try_from(groups.len()).map_err(|_| PgError::out_of_range("numeric"))?;
    let sign: u16 = if d.negative { 0x4000 } else { 0 };
    out.extend_from_slice(&ndigits.to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&dscale.to_be_bytes());
    for g in groups {
        out.extend_from_slice(&g.to_be_bytes());
    }
    Ok(out)
}

fn decode_numeric(bytes: &[u8], ty: PgType) -> Result<String, PgError> {
    let word = |i: usize| -> Result<u16, PgError> {
        bytes
            .get(2 * i..2 * i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| bad(ty))
    };
    let ndigits = usize::from(word(0)?);
    let weight = word(1)? as i16;
    let sign = word(2)?;
    let dscale = usize::from(word(3)?);
    if bytes.len() != 8 + 2 * ndigits || dscale > super::numeric::SCALE_MAX {
        return Err(bad(ty));
    }
    if sign == 0xC000 {
        return Ok("NaN".to_owned());
    }
    if sign != 0 && sign != 0x4000 {
        return Err(bad(ty));
    }
    let mut digits = String::new();
    for i in 0..ndigits {
        let g = word(4 + i)?;
        if g > 9999 {
            return Err(bad(ty));
        }
        digits.push_str(&format!("{g:04}"));
    }
    // The point sits after (weight + 1) groups.
    let point = (i64::from(weight) + 1) * 4;
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    };
    let d = Decimal::parse(&text).ok_or_else(|| bad(ty))?;
    let mut d = d.rescale(dscale);
    d.negative = sign == 0x4000 && !d.is_zero();
    Ok(d.to_text())
}

fn encode_array(ty: PgType, value: &Value, tz: &TimeZone) -> Result<Vec<u8>, PgError> {
    let text = stored_text(PgType::TEXT, value, tz);
    let dims = super::array::parse_shaped(&text).map(|s| s.dims).unwrap_or_default();
    let elements = super::array::stored_elements(ty, &text, tz)?;
    let element_type = ty.element();
    let has_null = elements.iter().any(|v| matches!(v, Value::Null));
    let mut out = Vec::new();
    let ndim = i32::try_from(dims.len()).map_err(|_| PgError::out_of_range("array"))?;
    out.extend_from_slice(&ndim.to_be_bytes());
    out.extend_from_slice(&i32::from(has_null).to_be_bytes());
    out.extend_from_slice(&element_type.oid().to_be_bytes());
    for dim in &dims {
        let len = i32::try_from(*dim).map_err(|_| PgError::out_of_range("array"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
    }
    for element in &elements {
        if matches!(element, Value::Null) {
            out.extend_from_slice(&(-1i32).to_be_bytes());
            continue;
        }
        let bytes = encode_binary(element_type, element, tz)?;
        let len = i32::try_from(bytes.len()).map_err(|_| PgError::out_of_range("array"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

fn decode_array(ty: PgType, bytes: &[u8], tz: &TimeZone) -> Result<Value, PgError> {
    let mut at = 0usize;
    let next_i32 = |at: &mut usize| -> Result<i32, PgError> {
        let b = bytes.get(*at..*at + 4).ok_or_else(|| bad(ty))?;
        *at += 4;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let ndim = next_i32(&mut at)?;
    let _has_null = next_i32(&mut at)?;
    let _element_oid = next_i32(&mut at)?;
    let ndim = usize::try_from(ndim).map_err(|_| bad(ty))?;
    if ndim > super::array::DIMENSIONS_MAX {
        return Err(bad(ty));
    }
    let mut dims = Vec::with_capacity(ndim);
    let mut count = 1usize;
    for _ in 0..ndim {
        let len = usize::try_from(next_i32(&mut at)?).map_err(|_| bad(ty))?;
        let _lower = next_i32(&mut at)?;
        count = count.checked_mul(len).ok_or_else(|| bad(ty))?;
        if count > super::array::ELEMENTS_MAX {
            return Err(bad(ty));
        }
        dims.push(len);
    }
    let count = if ndim == 0 { 0 } else { count };
    let mut printed = Vec::with_capacity(count);
    for _ in 0..count {
        let len = next_i32(&mut at)?;
        if len == -1 {
            printed.push(None);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| bad(ty))?;
        let element = bytes.get(at..at.saturating_add(len)).ok_or_else(|| bad(ty))?;
        at += len;
        let stored = decode_binary(ty.element(), element, tz)?;
        printed.push(super::output(ty.element(), &stored, tz));
    }
    if at != bytes.len() {
        return Err(bad(ty));
    }
    if dims.contains(&0) {
        dims.clear();
    }
    Ok(Value::Text(
        super::array::Shaped {
            dims,
            elements: printed,
        }
        .format(),
    ))
}

/// A binary parameter of type `ty` as its stored value.
pub fn decode_binary(ty: PgType, bytes: &[u8], tz: &TimeZone) -> Result<Value, PgError> {
    if ty.is_array() {
        return decode_array(ty, bytes, tz);
    }
    let fixed = |n: usize| -> Result<&[u8], PgError> {
        if bytes.len() == n {
            Ok(bytes)
        } else {
            Err(bad(ty))
        }
    };
    let text = || std::str::from_utf8(bytes).map_err(|_| bad(ty));
    let value = match ty.base() {
        Base::Bool => Value::Integer(i64::from(fixed(1)?[0] != 0)),
        Base::Int2 => Value::Integer(i64::from(i16::from_be_bytes(fixed(2)?.try_into().expect("2 bytes")))),
        Base::Int4 => Value::Integer(i64::from(i32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes")))),
        Base::Int8 => Value::Integer(i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"))),
        Base::Oid => Value::Integer(i64::from(u32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes")))),
        Base::Float4 => super::float_value(f64::from(f32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes")))),
        Base::Float8 => super::float_value(f64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"))),
        Base::Bytea => Value::Blob(bytes.to_vec()),
        Base::Text
        | Base::Name
        | Base::Regclass
        | Base::Varchar
        | Base::Bpchar
        | Base::Json
        | Base::Enum(_)
        | Base::Char => super::input(ty, text()?, tz)?,
        Base::Jsonb => {
            let (version, body) = bytes.split_first().ok_or_else(|| bad(ty))?;
            if *version != 1 {
                return Err(bad(ty));
            }
            super::input(ty, std::str::from_utf8(body).map_err(|_| bad(ty))?, tz)?
        }
        Base::Uuid => {
            let b = fixed(16)?;
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            super::input(ty, &hex, tz)?
        }
        Base::Date => {
            let days = i32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes"));
            if days == i32::MAX || days == i32::MIN {
                return Ok(Value::Text(
                    if days == i32::MAX { "infinity" } else { "-infinity" }.to_owned(),
                ));
            }
            let date = PG_EPOCH_DATE
                .checked_add(jiff::Span::new().try_days(days).map_err(|_| bad(ty))?)
                .map_err(|_| bad(ty))?;
            Value::Text(datetime::format_date(date))
        }
        Base::Time => {
            let micros = i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"));
            if !(0..MICROS_PER_DAY).contains(&micros) {
                return Err(bad(ty));
            }
            let dt = datetime_from_micros(micros).ok_or_else(|| bad(ty))?;
            Value::Text(datetime::format_time(dt.time()))
        }
        Base::Timetz => {
            let raw = fixed(12)?;
            let micros = i64::from_be_bytes(raw[..8].try_into().expect("8 bytes"));
            let west = i32::from_be_bytes(raw[8..].try_into().expect("4 bytes"));
            if !(0..=MICROS_PER_DAY).contains(&micros) || west.unsigned_abs() > 15 * 3600 + 59 * 60 {
                return Err(bad(ty));
            }
            let dt = datetime_from_micros(micros % MICROS_PER_DAY).ok_or_else(|| bad(ty))?;
            Value::Text(datetime::format_timetz(dt.time(), -west))
        }
        Base::Timestamp | Base::Timestamptz
            if matches!(
                bytes
                    .get(..8)
                    .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes"))),
                Some(i64::MAX | i64::MIN)
            ) =>
        {
            let micros = i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"));
            Value::Text(if micros == i64::MAX { "infinity" } else { "-infinity" }.to_owned())
        }
        Base::Timestamp => {
            let micros = i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"));
            let dt = datetime_from_micros(micros).ok_or_else(|| bad(ty))?;
            Value::Text(datetime::format_timestamp(dt))
        }
        Base::Timestamptz => {
            let micros = i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"));
            let dt = datetime_from_micros(micros).ok_or_else(|| bad(ty))?;
            let ts: Timestamp = TimeZone::UTC.to_timestamp(dt).map_err(|_| bad(ty))?;
            Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC))
        }
        Base::Interval => {
            let b = fixed(16)?;
            let iv = Interval {
                micros: i64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
                days: i32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
                months: i32::from_be_bytes(b[12..].try_into().expect("4 bytes")),
            };
            Value::Text(iv.format())
        }
        Base::Numeric => Value::Text(decode_numeric(bytes, ty)?),
    };
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Base;

    fn round_trip(ty: PgType, text: &str) {
        let utc = TimeZone::UTC;
        let stored = super::super::input(ty, text, &utc).expect("valid input");
        let bytes = encode_binary(ty, &stored, &utc).expect("encodes");
        let back = decode_binary(ty, &bytes, &utc).expect("decodes");
        assert_eq!(back, stored, "{ty} {text}");
    }

    #[test]
    fn binary_round_trips() {
        round_trip(PgType::INT4, "-42");
        round_trip(PgType::BOOL, "t");
        round_trip(PgType::NUMERIC, "-12345.6789");
        round_trip(PgType::NUMERIC, "0.0001");
        round_trip(PgType::NUMERIC, "100000000");
        round_trip(PgType::NUMERIC, "0.00");
        round_trip(PgType::new(Base::Date), "1999-12-31");
        round_trip(PgType::new(Base::Timestamp), "2024-01-02 03:04:05.123456");
        round_trip(PgType::TIMESTAMPTZ, "1970-01-01 00:00:00+00");
        round_trip(PgType::new(Base::Interval), "1 year 2 mons 3 days 04:05:06");
        round_trip(PgType::new(Base::Uuid), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
        round_trip(PgType::new(Base::Jsonb), r#"{"a": 1}"#);
        round_trip(PgType::INT4.array(), "{1,NULL,3}");
        round_trip(PgType::TEXT.array(), r#"{"a b",c}"#);
    }

    #[test]
    fn numeric_binary_matches_postgres_layout() {
        // 12345.6789 → ndigits 3, weight 1, digits [1, 2345, 6789], dscale 4.
        let bytes = encode_numeric("12345.6789").expect("encodes");
        assert_eq!(bytes, [0, 3, 0, 1, 0, 0, 0, 4, 0, 1, 0x09, 0x29, 0x1a, 0x85]);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_or_error(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let utc = TimeZone::UTC;
            for ty in [PgType::BOOL, PgType::INT4, PgType::NUMERIC, PgType::TIMESTAMPTZ, PgType::new(Base::Interval),
                       PgType::new(Base::Jsonb), PgType::INT4.array(), PgType::new(Base::Date), PgType::new(Base::Time)] {
                let _ = decode_binary(ty, &bytes, &utc);
            }
        }
    }
}
