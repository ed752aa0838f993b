//! Dates, times, timestamps and intervals: PostgreSQL's input forms parsed, its output forms printed.
//!
//! Stored forms are PostgreSQL's ISO output (`2024-01-02`, `03:04:05.5`, `2024-01-02 03:04:05`, and for
//! `timestamptz` the instant in UTC, `2024-01-02 01:04:05+00`), so stored text sorts in time order for years
//! 1–9999 and prints as PostgreSQL prints it with `DateStyle = ISO` and `TimeZone = UTC`.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;

use crate::error::{PgError, DATETIME_FIELD_OVERFLOW, INVALID_DATETIME_FORMAT};

/// Microseconds in a second.
const MICROS_PER_SECOND: i64 = 1_000_000;
/// Microseconds in a day.
pub const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

fn bad(type_name: &str, text: &str) -> PgError {
    PgError::new(
        INVALID_DATETIME_FORMAT,
        format!("invalid input syntax for type {type_name}: \"{text}\""),
    )
}

fn overflow(text: &str) -> PgError {
    PgError::new(
        DATETIME_FIELD_OVERFLOW,
        format!("date/time field value out of range: \"{text}\""),
    )
}

/// A zone written after a timestamp.
#[derive(Clone, Debug)]
pub enum Zone {
    /// A fixed offset (`+02`, `-05:30`, `Z`, `UTC`).
    Offset(Offset),
    /// A named zone (`Europe/Paris`).
    Named(TimeZone),
}

/// Parses `YYYY-MM-DD[( |T)HH:MM[:SS[.frac]]][ ][zone]` into its civil date-time and the zone written, if
/// any. `epoch` is 1970-01-01 00:00:00.
pub fn parse_timestamp(text: &str, type_name: &str) -> Result<(DateTime, Option<Zone>), PgError> {
    let trimmed = text.trim();
    if trimmed.eq_ignore_ascii_case("epoch") {
        return Ok((
            DateTime::constant(1970, 1, 1, 0, 0, 0, 0),
            Some(Zone::Offset(Offset::UTC)),
        ));
    }
    let (date, rest) = split_ordered_date(trimmed)
        .or_else(|| split_date(trimmed))
        .or_else(|| split_compact_date(trimmed))
        .or_else(|| split_named_month_date(trimmed))
        .ok_or_else(|| bad(type_name, text))?;
    let date = make_date(date, text)?;
    let rest = rest.trim_start_matches(['T', 't', ' ']);
    if rest.is_empty() {
        return Ok((date.to_datetime(Time::midnight()), None));
    }
    let time_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(rest.len());
    let (time_text, zone_text) = rest.split_at(time_end);
    let mut time = if time_text.is_empty() {
        Time::midnight()
    } else {
        parse_time_fields(time_text).ok_or_else(|| bad(type_name, text))??
    };
    // `1:45 pm`: a 12-hour clock.
    let mut zone_text = zone_text.trim();
    let meridiem = zone_text.get(..2).map(str::to_ascii_lowercase);
    if let Some(m @ ("am" | "pm")) = meridiem.as_deref() {
        let hour = time.hour();
        if !(1..=12).contains(&hour) {
            return Err(overflow(text));
        }
        let hour24 = match (m, hour) {
            ("am", 12) => 0,
            ("am", h) => h,
            ("pm", 12) => 12,
            (_, h) => h + 12,
        };
        time = time.with().hour(hour24).build().map_err(|_| overflow(text))?;
        zone_text = zone_text[2..].trim();
    }
    let zone = if zone_text.is_empty() {
        None
    } else {
        Some(parse_zone(zone_text).ok_or_else(|| bad(type_name, text))?)
    };
    Ok((date.to_datetime(time), zone))
}

/// The order of a date's numeric fields when the first has at most two digits (`DateStyle`'s `MDY`,
/// `DMY`, `YMD`); a first field of three or more digits is always the year.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DateOrder {
    /// `01/02/2024` is January 2 (PostgreSQL's default).
    #[default]
    Mdy,
    /// `01/02/2024` is February 1.
    Dmy,
    /// `24/01/02` is 2024-01-02.
    Ymd,
}

impl DateOrder {
    /// The order a `DateStyle` value (`ISO, DMY`) names.
    pub fn of_datestyle(value: &str) -> DateOrder {
        let upper = value.to_ascii_uppercase();
        if upper.contains("DMY") {
            DateOrder::Dmy
        } else if upper.contains("YMD") {
            DateOrder::Ymd
        } else {
            DateOrder::Mdy
        }
    }
}

thread_local! {
    /// The `DateStyle` field order of the session whose statement runs on this thread (see
    /// [`set_date_order`]).
    static DATE_ORDER: std::cell::Cell<DateOrder> = const { std::cell::Cell::new(DateOrder::Mdy) };
}

/// Sets the field order dates are read with on this thread: the session's `DateStyle`, set by its
/// `SessionState` whenever its settings change and by the caller when a session's call starts on a thread.
/// Date input is a pure function of its text and this order; nothing else reads it.
pub fn set_date_order(order: DateOrder) {
    DATE_ORDER.with(|cell| cell.set(order));
}

/// A leading date of three numeric fields separated by `/`, `-` or `.` whose first field has at most two
/// digits (`01/02/2024`, `1-2-24`), read in the session's `DateStyle` order; a two-digit year is 1970–2069,
/// as PostgreSQL reads it.
fn split_ordered_date(text: &str) -> Option<((i64, i64, i64), &str)> {
    let mut fields = [(0i64, 0usize); 3];
    let mut rest = text;
    let mut separator = None;
    for (i, field) in fields.iter_mut().enumerate() {
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if end == 0 || end > 4 {
            return None;
        }
        *field = (rest[..end].parse().ok()?, end);
        rest = &rest[end..];
        if i < 2 {
            let sep = rest.chars().next().filter(|c| matches!(c, '/' | '-' | '.'))?;
            if separator.is_some_and(|s| s != sep) {
                return None;
            }
            separator = Some(sep);
            rest = &rest[1..];
        }
    }
    if fields[0].1 > 2 {
        return None;
    }
    let year = |(value, digits): (i64, usize)| match digits {
        1 | 2 if value < 70 => value + 2000,
        1 | 2 => value + 1900,
        _ => value,
    };
    let date = match DATE_ORDER.with(std::cell::Cell::get) {
        DateOrder::Mdy => (year(fields[2]), fields[0].0, fields[1].0),
        DateOrder::Dmy => (year(fields[2]), fields[1].0, fields[0].0),
        DateOrder::Ymd => (year(fields[0]), fields[1].0, fields[2].0),
    };
    Some((date, rest))
}

/// Splits a leading `Y-M-D` into its fields and the rest.
fn split_date(text: &str) -> Option<((i64, i64, i64), &str)> {
    let mut fields = [0i64; 3];
    let mut rest = text;
    for (i, field) in fields.iter_mut().enumerate() {
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if end == 0 || end > 9 {
            return None;
        }
        *field = rest[..end].parse().ok()?;
        rest = &rest[end..];
        if i < 2 {
            rest = rest.strip_prefix('-')?;
        }
    }
    Some(((fields[0], fields[1], fields[2]), rest))
}

/// `YYYYMMDD` followed by the rest (a time after a space or `T`).
fn split_compact_date(text: &str) -> Option<((i64, i64, i64), &str)> {
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if end != 8 {
        return None;
    }
    let digits = &text[..end];
    Some((
        (
            digits[..4].parse().ok()?,
            digits[4..6].parse().ok()?,
            digits[6..].parse().ok()?,
        ),
        &text[end..],
    ))
}

const MONTH_NAMES: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// A date written with its month's name (`May 17, 2024`, `17-May-2024`, `17 May 2024`, `2024-May-17`),
/// followed by the rest (a time after a space).
fn split_named_month_date(text: &str) -> Option<((i64, i64, i64), &str)> {
    let mut month = None;
    let mut numbers: Vec<(i64, usize)> = Vec::new();
    let mut at = 0;
    let bytes = text.as_bytes();
    // Three fields: the month's name and two numbers, separated by spaces, commas, dashes or slashes.
    while at < bytes.len() && (month.is_none() || numbers.len() < 2) {
        let c = bytes[at] as char;
        if c.is_ascii_alphabetic() {
            let end = text[at..]
                .find(|c: char| !c.is_ascii_alphabetic())
                .map_or(text.len(), |e| at + e);
            let word = text[at..end].to_ascii_lowercase();
            let index = MONTH_NAMES.iter().position(|m| word.starts_with(m))?;
            if month.is_some() {
                return None;
            }
            month = Some(index as i64 + 1);
            at = end;
        } else if c.is_ascii_digit() {
            let end = text[at..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(text.len(), |e| at + e);
            numbers.push((text[at..end].parse().ok()?, end - at));
            at = end;
        } else if matches!(c, ' ' | ',' | '-' | '/' | '.') {
            at += 1;
        } else {
            return None;
        }
    }
    let month = month?;
    let [(a, a_len), (b, _)] = numbers.as_slice() else {
        return None;
    };
    // The year is the number written with more than two digits, else the last one.
    let (year, day) = if *a_len > 2 { (*a, *b) } else { (*b, *a) };
    Some(((year, month, day), &text[at..]))
}

fn make_date((year, month, day): (i64, i64, i64), text: &str) -> Result<Date, PgError> {
    let year = i16::try_from(year).map_err(|_| overflow(text))?;
    let month = i8::try_from(month).map_err(|_| overflow(text))?;
    let day = i8::try_from(day).map_err(|_| overflow(text))?;
    Date::new(year, month, day).map_err(|_| overflow(text))
}

/// `HH:MM[:SS[.frac]]`; `None` if malformed, `Some(Err)` if out of range.
fn parse_time_fields(text: &str) -> Option<Result<Time, PgError>> {
    let mut parts = text.split(':');
    let digits = |t: &str| !t.is_empty() && t.len() <= 9 && t.bytes().all(|b| b.is_ascii_digit());
    let hour = parts.next().filter(|t| digits(t))?;
    let hour: i64 = hour.parse().ok()?;
    let minute = parts.next().filter(|t| digits(t))?;
    let minute: i64 = minute.parse().ok()?;
    let (second, micros) = match parts.next() {
        None => (0, 0),
        Some(sec) => {
            let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
            if !digits(whole) {
                return None;
            }
            let whole: i64 = whole.parse().ok()?;
            if !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Rounded to microseconds, as PostgreSQL does.
            let mut digits: String = frac.chars().take(7).collect();
            while digits.len() < 7 {
                digits.push('0');
            }
            let tenths: i64 = digits.parse().ok()?;
            (whole, (tenths + 5) / 10)
        }
    };
    if parts.next().is_some() {
        return None;
    }
    let total = ((hour * 60 + minute) * 60 + second) * MICROS_PER_SECOND + micros;
    if hour > 24 || minute > 59 || second > 60 || total > MICROS_PER_DAY {
        return Some(Err(overflow(text)));
    }
    // 24:00:00 is allowed by PostgreSQL for `time` only; a timestamp rolls it over (not supported here).
    let total = total.min(MICROS_PER_DAY - 1);
    Some(Ok(time_from_micros(total)))
}

/// Parses a zone: `Z`, `UTC`, `GMT`, `+HH`, `+HHMM`, `+HH:MM[:SS]`, or an IANA name.
pub fn parse_zone(text: &str) -> Option<Zone> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("z") || text.eq_ignore_ascii_case("utc") || text.eq_ignore_ascii_case("gmt") {
        return Some(Zone::Offset(Offset::UTC));
    }
    if let Some(sign) = text.chars().next().filter(|c| *c == '+' || *c == '-') {
        let body = &text[1..];
        let digits: String = body.chars().filter(char::is_ascii_digit).collect();
        if digits.len() != body.chars().filter(|c| *c != ':').count() {
            return None;
        }
        let (h, m, s) = match (body.contains(':'), digits.len()) {
            (true, _) => {
                let mut it = body.split(':');
                let h: i32 = it.next()?.parse().ok()?;
                let m: i32 = it.next().unwrap_or("0").parse().ok()?;
                let s: i32 = it.next().unwrap_or("0").parse().ok()?;
                (h, m, s)
            }
            (false, 1 | 2) => (digits.parse().ok()?, 0, 0),
            (false, 4) => (digits[..2].parse().ok()?, digits[2..].parse().ok()?, 0),
            _ => return None,
        };
        if h > 15 || m > 59 || s > 59 {
            return None;
        }
        let seconds = (h * 3600 + m * 60 + s) * if sign == '-' { -1 } else { 1 };
        return Offset::from_seconds(seconds).ok().map(Zone::Offset);
    }
    TimeZone::get(text).ok().map(Zone::Named)
}

/// A time of day from microseconds since midnight (`0..MICROS_PER_DAY`).
fn time_from_micros(micros: i64) -> Time {
    assert!(
        (0..MICROS_PER_DAY).contains(&micros),
        "time of day out of range: {micros}"
    );
    let nanos = micros * 1000;
    Time::MIN
        .checked_add(jiff::SignedDuration::from_nanos(nanos))
        .expect("a time of day within one day")
}

/// Microseconds since midnight of a time.
pub fn time_micros(time: Time) -> i64 {
    let nanos = time.duration_since(Time::midnight()).as_nanos();
    i64::try_from(nanos / 1000).expect("a day of microseconds fits i64")
}

/// `date` input.
pub fn parse_date(text: &str) -> Result<Date, PgError> {
    let (dt, _) = parse_timestamp(text, "date")?;
    Ok(dt.date())
}

/// `time` input (`HH:MM[:SS[.frac]]`, or a timestamp whose time part is taken).
pub fn parse_time(text: &str) -> Result<Time, PgError> {
    let trimmed = text.trim();
    // `1:45 pm`: a 12-hour clock.
    let lower = trimmed.to_ascii_lowercase();
    if let Some(clock) = lower.strip_suffix("am").or_else(|| lower.strip_suffix("pm")) {
        let time = parse_time(clock).map_err(|_| bad("time", text))?;
        let hour = time.hour();
        if !(1..=12).contains(&hour) {
            return Err(overflow(text));
        }
        let hour24 = match (lower.ends_with("pm"), hour) {
            (false, 12) => 0,
            (false, h) => h,
            (true, 12) => 12,
            (true, h) => h + 12,
        };
        return time.with().hour(hour24).build().map_err(|_| overflow(text));
    }
    match parse_time_fields(trimmed) {
        Some(result) => result,
        None => parse_timestamp(text, "time")
            .map(|(dt, _)| dt.time())
            .map_err(|_| bad("time", text)),
    }
}

/// `time with time zone` input: a time and a zone offset (`12:00+02`, `12:00:00.5 -05:30`, `12:00 UTC`);
/// without one, the session zone's offset now, as PostgreSQL takes it. The stored (and printed) text.
pub fn parse_timetz(text: &str, session: &TimeZone) -> Result<String, PgError> {
    let trimmed = text.trim();
    let split = trimmed
        .char_indices()
        .skip(1)
        .find(|(_, c)| matches!(c, '+' | '-') || c.is_ascii_alphabetic())
        .map(|(i, _)| i);
    let (time_text, zone_text) = match split {
        Some(at) => (trimmed[..at].trim(), Some(trimmed[at..].trim())),
        None => (trimmed, None),
    };
    let time = parse_time(time_text).map_err(|_| bad("time with time zone", text))?;
    let offset = match zone_text {
        None => session.to_offset(Timestamp::now()),
        Some(zone) => match parse_zone(zone) {
            Some(Zone::Offset(offset)) => offset,
            Some(Zone::Named(tz)) => tz.to_offset(Timestamp::now()),
            None => return Err(bad("time with time zone", text)),
        },
    };
    Ok(format_timetz(time, offset.seconds()))
}

/// `12:00:00+02`, `12:00:00.5-05:30`: a time and its zone offset in seconds east of UTC.
pub fn format_timetz(time: Time, offset_seconds: i32) -> String {
    let sign = if offset_seconds < 0 { '-' } else { '+' };
    let abs = offset_seconds.unsigned_abs();
    let (h, m, s) = (abs / 3600, abs / 60 % 60, abs % 60);
    let zone = match (m, s) {
        (0, 0) => format!("{sign}{h:02}"),
        (_, 0) => format!("{sign}{h:02}:{m:02}"),
        _ => format!("{sign}{h:02}:{m:02}:{s:02}"),
    };
    format!("{}{zone}", format_time(time))
}

/// A stored `timetz` split into its time and zone offset (seconds east of UTC).
pub fn stored_timetz(text: &str) -> Option<(Time, i32)> {
    let at = text.rfind(['+', '-'])?;
    let time = parse_time(&text[..at]).ok()?;
    let Some(Zone::Offset(offset)) = parse_zone(&text[at..]) else {
        return None;
    };
    Some((time, offset.seconds()))
}

/// The instant a `timestamptz` input names: its zone if written, else `session` (the `TimeZone` setting).
pub fn parse_timestamptz(text: &str, session: &TimeZone) -> Result<Timestamp, PgError> {
    let (dt, zone) = parse_timestamp(text, "timestamp with time zone")?;
    let zoned = match zone {
        Some(Zone::Offset(offset)) => offset.to_timestamp(dt).map_err(|_| overflow(text))?,
        Some(Zone::Named(tz)) => tz.to_timestamp(dt).map_err(|_| overflow(text))?,
        None => session.to_timestamp(dt).map_err(|_| overflow(text))?,
    };
    Ok(zoned)
}

/// `2024-01-02`.
pub fn format_date(date: Date) -> String {
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

/// `03:04:05` or `03:04:05.5` (trailing zeros of the fraction dropped).
pub fn format_time(time: Time) -> String {
    let micros = time.subsec_nanosecond() / 1000;
    let mut out = format!("{:02}:{:02}:{:02}", time.hour(), time.minute(), time.second());
    if micros > 0 {
        let frac = format!("{micros:06}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out
}

/// `2024-01-02 03:04:05[.frac]`.
pub fn format_timestamp(dt: DateTime) -> String {
    format!("{} {}", format_date(dt.date()), format_time(dt.time()))
}

/// An instant as PostgreSQL prints a `timestamptz` in zone `tz`: `2024-01-02 03:04:05+00`, `…+05:30`.
pub fn format_timestamptz(ts: Timestamp, tz: &TimeZone) -> String {
    let offset = tz.to_offset(ts);
    let dt = offset.to_datetime(ts);
    let seconds = offset.seconds();
    let sign = if seconds < 0 { '-' } else { '+' };
    let abs = seconds.unsigned_abs();
    let (h, m, s) = (abs / 3600, abs / 60 % 60, abs % 60);
    let zone = match (m, s) {
        (0, 0) => format!("{sign}{h:02}"),
        (_, 0) => format!("{sign}{h:02}:{m:02}"),
        _ => format!("{sign}{h:02}:{m:02}:{s:02}"),
    };
    format!("{}{zone}", format_timestamp(dt))
}

/// A stored `timestamptz` read back as an instant.
pub fn stored_timestamptz(text: &str) -> Option<Timestamp> {
    parse_timestamptz(text, &TimeZone::UTC).ok()
}

/// A PostgreSQL interval: months, days and microseconds, kept apart as PostgreSQL keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    /// Months (years are 12).
    pub months: i32,
    /// Days.
    pub days: i32,
    /// Microseconds.
    pub micros: i64,
}

impl Interval {
    /// Parses PostgreSQL's interval input: `1 year 2 mons 3 days 04:05:06`, `2 hours 30 minutes`,
    /// `1 day ago`, `-1 week`, `10:00`, `P1Y2M3DT4H5M6S`.
    pub fn parse(text: &str) -> Result<Interval, PgError> {
        let bad = || PgError::invalid_input("interval", text);
        let trimmed = text.trim();
        if let Some(iso) = trimmed.strip_prefix('P') {
            return parse_iso_interval(iso).ok_or_else(bad);
        }
        let mut out = Interval::default();
        let mut tokens = trimmed.split_whitespace().peekable();
        let mut ago = false;
        let mut seen = false;
        while let Some(token) = tokens.next() {
            let token = token.trim_start_matches('@');
            if token.is_empty() {
                continue;
            }
            if token.eq_ignore_ascii_case("ago") {
                ago = true;
                continue;
            }
            if token.contains(':') {
                let (negative, body) = match token.strip_prefix('-') {
                    Some(b) => (true, b),
                    None => (false, token.strip_prefix('+').unwrap_or(token)),
                };
                let micros = parse_clock(body).ok_or_else(bad)?;
                out.micros = out
                    .micros
                    .checked_add(if negative { -micros } else { micros })
                    .ok_or_else(bad)?;
                seen = true;
                continue;
            }
            let number: f64 = token.parse().map_err(|_| bad())?;
            let unit = match tokens.peek() {
                Some(u) if !u.contains(':') && u.parse::<f64>().is_err() && !u.eq_ignore_ascii_case("ago") => {
                    tokens.next().map(str::to_ascii_lowercase)
                }
                _ => None,
            };
            let unit = unit.unwrap_or_else(|| "second".to_owned());
            add_unit(&mut out, number, unit.trim_end_matches(',')).ok_or_else(bad)?;
            seen = true;
        }
        if !seen {
            return Err(bad());
        }
        if ago {
            out = out.negate();
        }
        Ok(out)
    }

    /// The interval with every field negated.
    pub fn negate(self) -> Interval {
        Interval {
            months: self.months.saturating_neg(),
            days: self.days.saturating_neg(),
            micros: self.micros.saturating_neg(),
        }
    }

    /// PostgreSQL's `postgres` interval style: `1 year 2 mons 3 days 04:05:06`, `-00:00:01`, `00:00:00`.
    pub fn format(&self) -> String {
        let mut parts = Vec::new();
        let years = self.months / 12;
        let months = self.months % 12;
        let plural = |n: i32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        if years != 0 {
            parts.push(plural(years, "year", "years"));
        }
        if months != 0 {
            parts.push(plural(months, "mon", "mons"));
        }
        if self.days != 0 {
            parts.push(plural(self.days, "day", "days"));
        }
        if self.micros != 0 || parts.is_empty() {
            let negative = self.micros < 0;
            let abs = self.micros.unsigned_abs();
            let total_seconds = abs / 1_000_000;
            let frac = abs % 1_000_000;
            let mut clock = format!(
                "{}{:02}:{:02}:{:02}",
                if negative { "-" } else { "" },
                total_seconds / 3600,
                total_seconds / 60 % 60,
                total_seconds % 60
            );
            if frac > 0 {
                let text = format!("{frac:06}");
                clock.push('.');
                clock.push_str(text.trim_end_matches('0'));
            }
            parts.push(clock);
        }
        parts.join(" ")
    }

    /// For comparisons and sorting: PostgreSQL's rule, a month is 30 days and a day 24 hours.
    pub fn total_micros(&self) -> i128 {
        (i128::from(self.months) * 30 + i128::from(self.days)) * i128::from(MICROS_PER_DAY) + i128::from(self.micros)
    }
}

fn parse_clock(text: &str) -> Option<i64> {
    let mut parts = text.split(':');
    let hours: i64 = parts.next()?.parse().ok()?;
    // Bounded so the microseconds fit (PostgreSQL: interval field out of range).
    if hours.abs() > 1_000_000 {
        return None;
    }
    let minutes: i64 = parts.next()?.parse().ok()?;
    let seconds: f64 = match parts.next() {
        Some(s) => s.parse().ok()?,
        None => 0.0,
    };
    if parts.next().is_some() || minutes > 59 || !(0.0..60.0).contains(&seconds) {
        return None;
    }
    Some((hours * 3600 + minutes * 60) * MICROS_PER_SECOND + (seconds * 1e6).round() as i64)
}

/// A field value as an `i32`, `None` past its range (never saturated).
fn fit(value: f64) -> Option<i32> {
    (value.abs() < 2_147_483_648.0).then_some(value as i32)
}

fn add_unit(out: &mut Interval, number: f64, unit: &str) -> Option<()> {
    // Bounded first, so every product below fits its field (PostgreSQL: interval field out of range).
    if !number.is_finite() || number.abs() > 1e12 {
        return None;
    }
    let whole = number.trunc();
    let frac = number - whole;
    let micros = |n: f64| (n * 1e6).round() as i64;
    match unit {
        "millennium" | "millennia" | "millenniums" => out.months = out.months.checked_add(fit(number * 12000.0)?)?,
        "century" | "centuries" => out.months = out.months.checked_add(fit(number * 1200.0)?)?,
        "decade" | "decades" => out.months = out.months.checked_add(fit(number * 120.0)?)?,
        "year" | "years" | "y" | "yr" | "yrs" => out.months = out.months.checked_add(fit((number * 12.0).round())?)?,
        "month" | "months" | "mon" | "mons" => {
            out.months = out.months.checked_add(fit(whole)?)?;
            out.days = out.days.checked_add(fit(frac * 30.0)?)?;
        }
        "week" | "weeks" | "w" => {
            let days = number * 7.0;
            out.days = out.days.checked_add(fit(days.trunc())?)?;
            out.micros = out.micros.checked_add(micros((days - days.trunc()) * 86_400.0))?;
        }
        "day" | "days" | "d" => {
            out.days = out.days.checked_add(fit(whole)?)?;
            out.micros = out.micros.checked_add(micros(frac * 86_400.0))?;
        }
        "hour" | "hours" | "h" | "hr" | "hrs" => out.micros = out.micros.checked_add(micros(number * 3600.0))?,
        "minute" | "minutes" | "min" | "mins" | "m" => out.micros = out.micros.checked_add(micros(number * 60.0))?,
        "second" | "seconds" | "sec" | "secs" | "s" => out.micros = out.micros.checked_add(micros(number))?,
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => {
            out.micros = out.micros.checked_add(micros(number / 1000.0))?
        }
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" => {
            out.micros = out.micros.checked_add(number.round() as i64)?
        }
        _ => return None,
    }
    Some(())
}

fn parse_iso_interval(text: &str) -> Option<Interval> {
    let mut out = Interval::default();
    let mut in_time = false;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            'T' => in_time = true,
            '0'..='9' | '.' | '-' => number.push(c),
            _ => {
                let n: f64 = number.parse().ok()?;
                number.clear();
                let unit = match (in_time, c) {
                    (false, 'Y') => "year",
                    (false, 'M') => "month",
                    (false, 'W') => "week",
                    (false, 'D') => "day",
                    (true, 'H') => "hour",
                    (true, 'M') => "minute",
                    (true, 'S') => "second",
                    _ => return None,
                };
                add_unit(&mut out, n, unit)?;
            }
        }
    }
    number.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn numeric_dates_follow_the_date_order() {
        let date = |text: &str| parse_date(text).map(format_date).map_err(|e| e.code);
        set_date_order(DateOrder::Mdy);
        assert_eq!(date("01/02/2024"), Ok("2024-01-02".to_owned()));
        assert_eq!(date("1-2-24"), Ok("2024-01-02".to_owned()));
        assert_eq!(date("12.31.99"), Ok("1999-12-31".to_owned()));
        assert_eq!(date("2024-01-02"), Ok("2024-01-02".to_owned()));
        assert!(date("13/01/2024").is_err());
        set_date_order(DateOrder::Dmy);
        assert_eq!(date("01/02/2024"), Ok("2024-02-01".to_owned()));
        assert_eq!(
            date("2024-01-02"),
            Ok("2024-01-02".to_owned()),
            "a long first field is the year"
        );
        set_date_order(DateOrder::Ymd);
        assert_eq!(date("24/01/02"), Ok("2024-01-02".to_owned()));
        set_date_order(DateOrder::Mdy);
        assert!(date("01/02-2024").is_err(), "one separator");
    }

    use super::*;

    #[test]
    fn timestamps_parse_and_print_as_postgres() {
        let (dt, zone) = parse_timestamp("2024-01-02 03:04:05.500", "timestamp").expect("valid");
        assert!(zone.is_none());
        assert_eq!(format_timestamp(dt), "2024-01-02 03:04:05.5");
        let (dt, _) = parse_timestamp("2024-01-02T03:04", "timestamp").expect("valid");
        assert_eq!(format_timestamp(dt), "2024-01-02 03:04:00");
        let ts = parse_timestamptz("2024-01-02 03:04:05+02", &TimeZone::UTC).expect("valid");
        assert_eq!(format_timestamptz(ts, &TimeZone::UTC), "2024-01-02 01:04:05+00");
        let ts = parse_timestamptz("2024-01-02 03:04:05-05:30", &TimeZone::UTC).expect("valid");
        assert_eq!(format_timestamptz(ts, &TimeZone::UTC), "2024-01-02 08:34:05+00");
        let ts = parse_timestamptz("2024-06-01 12:00:00Z", &TimeZone::UTC).expect("valid");
        assert_eq!(
            format_timestamptz(ts, &TimeZone::fixed(Offset::constant(2))),
            "2024-06-01 14:00:00+02"
        );
        assert!(parse_timestamp("2024-13-01", "timestamp").is_err());
        assert!(parse_timestamp("yesterday-ish", "timestamp").is_err());
        assert_eq!(
            parse_date("2024-02-29").map(format_date).expect("leap day"),
            "2024-02-29"
        );
        assert!(parse_date("2023-02-29").is_err());
        assert_eq!(
            parse_time("23:59:59.999999").map(format_time).expect("valid"),
            "23:59:59.999999"
        );
    }

    #[test]
    fn intervals_parse_and_print_as_postgres() {
        let cases = [
            ("1 day", "1 day"),
            ("2 hours 30 minutes", "02:30:00"),
            ("1 year 2 months 3 days 04:05:06", "1 year 2 mons 3 days 04:05:06"),
            ("1 day ago", "-1 days"),
            ("-1 week", "-7 days"),
            ("90 seconds", "00:01:30"),
            ("P1Y2M3DT4H5M6S", "1 year 2 mons 3 days 04:05:06"),
            ("1.5 days", "1 day 12:00:00"),
            ("0", "00:00:00"),
        ];
        for (input, output) in cases {
            assert_eq!(Interval::parse(input).expect(input).format(), output, "{input}");
        }
        assert!(Interval::parse("1 fortnight").is_err());
        // Out-of-range fields are errors, never an overflow.
        for hostile in [
            "inf years",
            "NaN days",
            "9999999999999 years 9999999999999 years",
            "99999999999999999:00",
            "2147483647 mons 1 year",
        ] {
            assert!(Interval::parse(hostile).is_err(), "{hostile}");
        }
        assert!(parse_time("-1:00").is_err());
        assert!(parse_time("-99999999999:00").is_err());
        assert!(Interval::parse("").is_err());
    }
}
