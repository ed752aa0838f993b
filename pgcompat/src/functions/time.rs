//! Date and time functions with PostgreSQL 15's results: `to_char` (dates, times, timestamps, intervals
//! and numbers), `to_number`, `to_date`, `to_timestamp`, the `make_*` constructors, `justify_*`,
//! `isfinite`, `timezone`, `date_bin`, `timeofday` and `pg_sleep`.
//!
//! `pg_sleep` sleeps in slices of at most [`SLEEP_SLICE_MS`] and at most [`SLEEP_SECONDS_MAX`] a call; it
//! runs inside a SQLite function, so it is not interruptible: a cancel request takes effect when it returns.

use std::sync::Arc;

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{define, Args, Purity};
use crate::error::{PgError, DATETIME_FIELD_OVERFLOW, INVALID_DATETIME_FORMAT, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::datetime::{self, Interval, MICROS_PER_DAY};
use crate::value::numeric::Decimal;

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

/// The fields a date-time format reads.
#[derive(Default)]
struct Fields {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
    doy: i64,
    /// 0 Sunday … 6 Saturday.
    dow: i64,
    iso_year: i64,
    iso_week: i64,
    iso_dow: i64,
    julian: i64,
    /// An interval: hours are not wrapped at 24.
    interval: bool,
}

fn fields_of(dt: DateTime) -> Fields {
    let date = dt.date();
    let iso = date.iso_week_date();
    Fields {
        year: i64::from(dt.year()),
        month: i64::from(dt.month()),
        day: i64::from(dt.day()),
        hour: i64::from(dt.hour()),
        minute: i64::from(dt.minute()),
        second: i64::from(dt.second()),
        micros: i64::from(dt.subsec_nanosecond() / 1000),
        doy: i64::from(dt.day_of_year()),
        dow: i64::from(dt.weekday().to_sunday_zero_offset()),
        iso_year: i64::from(iso.year()),
        iso_week: i64::from(iso.week()),
        iso_dow: i64::from(dt.weekday().to_monday_one_offset()),
        julian: julian_day(date),
        interval: false,
    }
}

fn interval_fields(iv: Interval) -> Fields {
    let seconds = iv.micros / 1_000_000;
    Fields {
        year: i64::from(iv.months / 12),
        month: i64::from(iv.months % 12),
        day: i64::from(iv.days),
        hour: seconds / 3600,
        minute: seconds / 60 % 60,
        second: seconds % 60,
        micros: iv.micros % 1_000_000,
        interval: true,
        ..Fields::default()
    }
}

/// The Julian day number of a date.
fn julian_day(date: Date) -> i64 {
    let epoch = Date::constant(2000, 1, 1);
    let days = date.since(epoch).map(|s| i64::from(s.get_days())).unwrap_or(0);
    2_451_545 + days
}

fn ordinal_suffix(n: i64, upper: bool) -> &'static str {
    let n = n.abs();
    let s = match (n % 100, n % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    };
    match (upper, s) {
        (false, s) => s,
        (true, "st") => "ST",
        (true, "nd") => "ND",
        (true, "rd") => "RD",
        (true, _) => "TH",
    }
}

/// A name in the case its pattern was written in (`MONTH`, `Month`, `month`), padded to `width` unless FM.
fn cased(name: &str, pattern: &str, width: usize, fill: bool) -> String {
    let text = if pattern.chars().all(|c| c.is_ascii_uppercase()) {
        name.to_ascii_uppercase()
    } else if pattern.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.to_ascii_lowercase()
    } else {
        name.to_owned()
    };
    if fill {
        format!("{text:<width$}")
    } else {
        text
    }
}

/// One date-time pattern's output; `None` for a number (which may take `TH`).
fn pattern_text(pattern: &str, f: &Fields, fill: bool) -> Result<String, i64> {
    let month_name = MONTHS[(f.month.clamp(1, 12) - 1) as usize];
    let day_name = DAYS[f.dow.clamp(0, 6) as usize];
    let hour12 = match f.hour % 12 {
        0 => 12,
        h => h,
    };
    let pm = f.hour % 24 >= 12;
    Ok(match pattern {
        "AM" | "PM" => (if pm { "PM" } else { "AM" }).to_owned(),
        "am" | "pm" => (if pm { "pm" } else { "am" }).to_owned(),
        "A.M." | "P.M." => (if pm { "P.M." } else { "A.M." }).to_owned(),
        "a.m." | "p.m." => (if pm { "p.m." } else { "a.m." }).to_owned(),
        "MONTH" | "Month" | "month" => cased(month_name, pattern, 9, fill),
        "MON" | "Mon" | "mon" => cased(&month_name[..3], pattern, 3, false),
        "DAY" | "Day" | "day" => cased(day_name, pattern, 9, fill),
        "DY" | "Dy" | "dy" => cased(&day_name[..3], pattern, 3, false),
        "HH" | "HH12" => return Err(if f.interval { f.hour % 12 } else { hour12 }),
        _ => return Err(0),
    })
}

/// A numeric date-time pattern: its value and zero-padded width.
fn pattern_number(pattern: &str, f: &Fields) -> (i64, usize) {
    let hour12 = match f.hour % 12 {
        0 if !f.interval => 12,
        h => h,
    };
    match pattern {
        "HH24" => (f.hour, 2),
        "HH" | "HH12" => (hour12, 2),
        "MI" => (f.minute, 2),
        "SS" => (f.second, 2),
        "SSSS" | "SSSSS" => (f.hour * 3600 + f.minute * 60 + f.second, 1),
        "MS" => (f.micros / 1000, 3),
        "US" => (f.micros, 6),
        "YYYY" => (f.year, 4),
        "YYY" => (f.year % 1000, 3),
        "YY" => (f.year % 100, 2),
        "Y" => (f.year % 10, 1),
        "IYYY" => (f.iso_year, 4),
        "IYY" => (f.iso_year % 1000, 3),
        "IY" => (f.iso_year % 100, 2),
        "MM" => (f.month, 2),
        "DDD" => (f.doy, 3),
        "DD" => (f.day, 2),
        "D" => (f.dow + 1, 1),
        "ID" => (f.iso_dow, 1),
        "IW" => (f.iso_week, 2),
        "WW" => ((f.doy - 1) / 7 + 1, 2),
        "W" => ((f.day - 1) / 7 + 1, 1),
        "Q" => ((f.month - 1) / 3 + 1, 1),
        "CC" => {
            let cc = if f.year > 0 {
                (f.year + 99) / 100
            } else {
                f.year / 100 - 1
            };
            (cc, 2)
        }
        "J" => (f.julian, 1),
        _ => (0, 1),
    }
}

/// `to_char` of a date, time, timestamp or interval's fields.
fn format_datetime(format: &str, f: &Fields) -> String {
    let mut out = String::with_capacity(format.len() * 2);
    let mut rest = format;
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            // Quoted text, with backslash escapes.
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            out.push(next);
                        }
                    }
                    c => out.push(c),
                }
            }
            rest = quoted.get(end..).unwrap_or("");
            continue;
        }
        if let Some(escaped) = rest.strip_prefix('\\') {
            let mut chars = escaped.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
            continue;
        }
        let (fill, body) = match rest.strip_prefix("FM").or_else(|| rest.strip_prefix("fm")) {
            Some(b) => (false, b),
            None => (true, rest),
        };
        let found = PATTERNS
            .iter()
            .find(|p| body.starts_with(**p) || (is_numeric_pattern(p) && starts_with_ignore_case(body, p)));
        let Some(pattern) = found else {
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
            continue;
        };
        rest = &body[pattern.len()..];
        match pattern_text(pattern, f, fill) {
            Ok(text) => out.push_str(&text),
            Err(_) => {
                let (n, width) = pattern_number(pattern, f);
                if fill {
                    let sign = if n < 0 { "-" } else { "" };
                    out.push_str(&format!("{sign}{:0width$}", n.abs()));
                } else {
                    out.push_str(&n.to_string());
                }
                let suffix = if rest.starts_with("TH") {
                    Some(true)
                } else if rest.starts_with("th") {
                    Some(false)
                } else {
                    None
                };
                if let Some(upper) = suffix {
                    out.push_str(ordinal_suffix(n, upper));
                    rest = &rest[2..];
                }
            }
        }
    }
    out
}

fn is_numeric_pattern(p: &str) -> bool {
    !matches!(
        p,
        "AM" | "PM"
            | "am"
            | "pm"
            | "A.M."
            | "P.M."
            | "a.m."
            | "p.m."
            | "MONTH"
            | "Month"
            | "month"
            | "MON"
            | "Mon"
            | "mon"
            | "DAY"
            | "Day"
            | "day"
            | "DY"
            | "Dy"
            | "dy"
    )
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len()).is_some_and(|t| t.eq_ignore_ascii_case(prefix))
}

/// A number format (`9`, `0`, `.`/`D`, `,`/`G`, `S`, `MI`, `PL`, `SG`, `PR`, `FM`, `TH`) parsed.
#[derive(Default)]
struct NumFormat {
    /// The integer part's items: a digit (`true` for `0`) or a group separator.
    int: Vec<NumItem>,
    frac: Vec<NumItem>,
    point: bool,
    fill: bool,
    sign: SignAt,
    ordinal: Option<bool>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum NumItem {
    Nine,
    Zero,
    Group,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum SignAt {
    /// A `-` or space before the first digit.
    #[default]
    Default,
    /// `S` before the number: `+` or `-`.
    LeadingS,
    /// `S` after it.
    TrailingS,
    /// `MI` after it: `-` or space.
    TrailingMinus,
    /// `PR`: `<…>` or spaces.
    Angle,
}

fn parse_num_format(format: &str) -> Result<NumFormat, PgError> {
    let mut f = NumFormat {
        fill: true,
        ..NumFormat::default()
    };
    let mut rest = format;
    let mut seen_digit = false;
    while !rest.is_empty() {
        let upper = rest.to_ascii_uppercase();
        let take = |n: usize, rest: &mut &str| *rest = &rest[n..];
        if upper.starts_with("FM") {
            f.fill = false;
            take(2, &mut rest);
        } else if upper.starts_with("PR") {
            f.sign = SignAt::Angle;
            take(2, &mut rest);
        } else if upper.starts_with("MI") {
            f.sign = SignAt::TrailingMinus;
            take(2, &mut rest);
        } else if upper.starts_with("TH") {
            f.ordinal = Some(rest.starts_with("TH"));
            take(2, &mut rest);
        } else {
            let c = rest.as_bytes()[0];
            match c.to_ascii_uppercase() {
                b'9' | b'0' => {
                    let item = if c == b'0' { NumItem::Zero } else { NumItem::Nine };
                    if f.point {
                        f.frac.push(item);
                    } else {
                        f.int.push(item);
                    }
                    seen_digit = true;
                }
                b'.' | b'D' => {
                    if f.point {
                        return Err(PgError::new(crate::error::SYNTAX_ERROR, "multiple decimal points"));
                    }
                    f.point = true;
                }
                b',' | b'G' if !f.point => f.int.push(NumItem::Group),
                b'S' => {
                    f.sign = if seen_digit {
                        SignAt::TrailingS
                    } else {
                        SignAt::LeadingS
                    }
                }
                _ => {}
            }
            let width = rest.chars().next().map_or(1, char::len_utf8);
            take(width, &mut rest);
        }
    }
    Ok(f)
}

/// `to_char(number, format)`.
fn format_number(value: &Decimal, format: &str) -> Result<String, PgError> {
    let f = parse_num_format(format)?;
    let frac_digits = f.frac.len();
    let rounded = value.rescale(frac_digits);
    let negative = rounded.negative && !rounded.is_zero();
    let int_digits: String = rounded.int.trim_start_matches('0').to_owned();
    let frac: String = format!("{:0<frac_digits$}", rounded.frac)
        .chars()
        .take(frac_digits)
        .collect();
    let positions = f.int.iter().filter(|i| **i != NumItem::Group).count();
    let overflow = int_digits.len() > positions;
    // A zero integer part shows its `0` only when the format has no decimal point.
    let int_digits = if int_digits.is_empty() && !f.point && positions > 0 {
        "0".to_owned()
    } else {
        int_digits
    };
    let mut body = String::new();
    let mut blanks = 0usize;
    let mut visible = false;
    let mut digit_index = 0usize;
    let first_digit = positions.saturating_sub(int_digits.len());
    let first_zero = f
        .int
        .iter()
        .filter(|i| **i != NumItem::Group)
        .position(|i| *i == NumItem::Zero);
    for item in &f.int {
        match item {
            NumItem::Group => {
                if visible {
                    body.push(',');
                } else {
                    blanks += 1;
                }
            }
            _ => {
                if digit_index >= first_digit || first_zero.is_some_and(|z| digit_index >= z) {
                    visible = true;
                }
                if visible {
                    let c = if overflow {
                        '#'
                    } else {
                        let at = digit_index as i64 - first_digit as i64;
                        usize::try_from(at)
                            .ok()
                            .and_then(|at| int_digits.as_bytes().get(at))
                            .map_or('0', |b| *b as char)
                    };
                    body.push(c);
                } else {
                    blanks += 1;
                }
                digit_index += 1;
            }
        }
    }
    if f.point {
        body.push('.');
        let mut digits: Vec<char> = if overflow {
            vec!['#'; frac_digits]
        } else {
            frac.chars().collect()
        };
        if !f.fill {
            // FM drops the trailing zeros of `9` positions.
            while !digits.is_empty()
                && digits.last() == Some(&'0')
                && f.frac.get(digits.len() - 1) == Some(&NumItem::Nine)
            {
                digits.pop();
            }
        }
        body.extend(digits);
    }
    let (lead, trail) = match f.sign {
        SignAt::Default => (
            if negative {
                "-"
            } else if f.fill {
                " "
            } else {
                ""
            },
            "",
        ),
        SignAt::LeadingS => (if negative { "-" } else { "+" }, ""),
        SignAt::TrailingS => ("", if negative { "-" } else { "+" }),
        SignAt::TrailingMinus => ("", if negative { "-" } else { " " }),
        SignAt::Angle if negative => ("<", ">"),
        SignAt::Angle => (if f.fill { " " } else { "" }, if f.fill { " " } else { "" }),
    };
    let mut out = String::new();
    if f.fill {
        out.extend(std::iter::repeat_n(' ', blanks));
    }
    out.push_str(lead);
    out.push_str(&body);
    out.push_str(trail);
    if let Some(upper) = f.ordinal {
        let n: i64 = int_digits.parse().unwrap_or(0);
        out.push_str(ordinal_suffix(n, upper));
    }
    Ok(out)
}

/// A value of a number type as an exact decimal.
fn decimal_of(value: &Value) -> Result<Option<Decimal>, PgError> {
    let text = match value {
        Value::Null => return Ok(None),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => crate::value::format_float8(*f),
        other => super::value_text(other).unwrap_or_default(),
    };
    Decimal::parse(text.trim())
        .map(Some)
        .ok_or_else(|| PgError::invalid_input("numeric", &text))
}

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

/// `to_number(text, format)`: the digits, point and sign of `text` read by the format's positions.
fn to_number(text: &str, format: &str) -> Result<Value, PgError> {
    let f = parse_num_format(format)?;
    let mut digits = String::new();
    let mut negative = false;
    let mut seen_point = false;
    let int_max = f.int.iter().filter(|i| **i != NumItem::Group).count();
    let mut int_count = 0;
    let mut frac_count = 0;
    for c in text.chars() {
        match c {
            '0'..='9' if !seen_point && int_count < int_max => {
                digits.push(c);
                int_count += 1;
            }
            '0'..='9' if seen_point && frac_count < f.frac.len() => {
                digits.push(c);
                frac_count += 1;
            }
            '.' if f.point && !seen_point => {
                seen_point = true;
                digits.push('.');
            }
            '-' | '<' => negative = true,
            _ => {}
        }
    }
    if digits.trim_matches('.').is_empty() {
        return Err(PgError::invalid_input("numeric", " "));
    }
    let d = Decimal::parse(&format!("{}{digits}", if negative { "-" } else { "" }))
        .ok_or_else(|| PgError::invalid_input("numeric", text))?;
    Ok(Value::Text(d.rescale(f.frac.len()).to_text()))
}

/// The fields `to_date`/`to_timestamp` read from `text` by `format`.
fn parse_by_format(text: &str, format: &str) -> Result<DateTime, PgError> {
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

fn to_timestamp(args: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
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
            let text = super::value_text(&other).unwrap_or_default();
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

fn to_date(args: &Args<'_, '_>) -> Result<Value, PgError> {
    let (Some(text), Some(format)) = (args.text(0), args.text(1)) else {
        return Ok(Value::Null);
    };
    let dt = parse_by_format(&text, &format)?;
    Ok(Value::Text(datetime::format_date(dt.date())))
}

/// Argument `i` as a double (seconds of `make_time`…); `None` for NULL.
fn float_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<f64>, PgError> {
    match args.value(i) {
        Value::Null => Ok(None),
        Value::Integer(v) => Ok(Some(v as f64)),
        Value::Real(f) => Ok(Some(f)),
        other => {
            let text = super::value_text(&other).unwrap_or_default();
            text.trim()
                .parse()
                .map(Some)
                .map_err(|_| PgError::invalid_input("double precision", &text))
        }
    }
}

fn make_date_of(y: i64, m: i64, d: i64) -> Result<Date, PgError> {
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

fn make_time_of(h: i64, m: i64, sec: f64) -> Result<Time, PgError> {
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
fn make_datetime(args: &Args<'_, '_>, with_time: bool) -> Result<Option<DateTime>, PgError> {
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

fn make_interval(args: &Args<'_, '_>) -> Result<Value, PgError> {
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

fn interval_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<Interval>, PgError> {
    args.text(i).map(|t| Interval::parse(&t)).transpose()
}

fn justify_days(mut iv: Interval) -> Interval {
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

fn justify_hours(mut iv: Interval) -> Interval {
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

fn justify_interval(mut iv: Interval) -> Interval {
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
fn datetime_type(args: &Args<'_, '_>, i: usize) -> PgType {
    args.ty(i).unwrap_or_else(|| match args.text(i) {
        Some(t) if t.trim_end().ends_with("+00") => PgType::TIMESTAMPTZ,
        _ => PgType::new(Base::Timestamp),
    })
}

fn date_bin(args: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
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

fn timeofday(state: &SessionState) -> String {
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

fn pg_sleep(args: &Args<'_, '_>) -> Result<Value, PgError> {
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
        super::super::at_time_zone(a.value(1), &zone, datetime_type(a, 1), &s.time_zone())
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
