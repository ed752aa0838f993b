//! `to_char` of dates, times, timestamps and intervals: the fields a format reads and its patterns
//! (`YYYY`, `HH24`, `Month`, `FM`, `TH`, …).

use jiff::civil::{Date, DateTime};

use super::*;
use crate::value::datetime::Interval;

/// The fields a date-time format reads.
#[derive(Default)]
pub(super) struct Fields {
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

pub(super) fn fields_of(dt: DateTime) -> Fields {
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

pub(super) fn interval_fields(iv: Interval) -> Fields {
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
pub(super) fn julian_day(date: Date) -> i64 {
    let epoch = Date::constant(2000, 1, 1);
    let days = date.since(epoch).map(|s| i64::from(s.get_days())).unwrap_or(0);
    2_451_545 + days
}

pub(super) fn ordinal_suffix(n: i64, upper: bool) -> &'static str {
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
pub(super) fn cased(name: &str, pattern: &str, width: usize, fill: bool) -> String {
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
pub(super) fn pattern_text(pattern: &str, f: &Fields, fill: bool) -> Result<String, i64> {
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
pub(super) fn pattern_number(pattern: &str, f: &Fields) -> (i64, usize) {
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
pub(super) fn format_datetime(format: &str, f: &Fields) -> String {
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

pub(super) fn is_numeric_pattern(p: &str) -> bool {
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

pub(super) fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len()).is_some_and(|t| t.eq_ignore_ascii_case(prefix))
}
