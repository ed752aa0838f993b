//! Text output under the session's display parameters: `IntervalStyle` and `bytea_output` change how a
//! result value is printed to the client (PostgreSQL applies them in the types' output functions), while
//! the stored forms and every value the layer prints for itself stay in the default styles.

use jiff::tz::TimeZone;
use rusqlite::types::Value;

use super::datetime::Interval;
use crate::types::{Base, PgType};

/// `IntervalStyle`: the forms Cambium prints (`postgres`, the default, and `iso_8601`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IntervalStyle {
    /// `1 year 2 mons 3 days 04:05:06`.
    #[default]
    Postgres,
    /// `P1Y2M3DT4H5M6S`.
    Iso8601,
}

/// `bytea_output`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ByteaOutput {
    /// `\x` and lower-case hex.
    #[default]
    Hex,
    /// Printable ASCII as itself, a backslash doubled, other bytes as `\ooo` octal.
    Escape,
}

/// How result values are printed to a client: the session's zone and display parameters.
#[derive(Clone, Debug)]
pub struct OutputStyle {
    /// `TimeZone`, for `timestamptz`.
    pub tz: TimeZone,
    /// `IntervalStyle`.
    pub interval: IntervalStyle,
    /// `bytea_output`.
    pub bytea: ByteaOutput,
}

impl OutputStyle {
    /// PostgreSQL's default styles in `tz`.
    pub fn with_zone(tz: TimeZone) -> OutputStyle {
        OutputStyle {
            tz,
            interval: IntervalStyle::default(),
            bytea: ByteaOutput::default(),
        }
    }
}

/// A stored value printed as PostgreSQL prints a result value of `ty` in text format under `style`;
/// `None` for NULL. Equal to [`super::output`] in the default styles.
pub fn output_styled(ty: PgType, value: &Value, style: &OutputStyle) -> Option<String> {
    if !ty.is_array() {
        match (ty.base(), value) {
            (Base::Interval, Value::Text(text)) if style.interval == IntervalStyle::Iso8601 => {
                if let Ok(interval) = Interval::parse(text) {
                    return Some(iso_8601(&interval));
                }
            }
            (Base::Bytea, Value::Blob(bytes)) if style.bytea == ByteaOutput::Escape => {
                return Some(escape_bytea(bytes));
            }
            (Base::Bytea, Value::Text(text)) if style.bytea == ByteaOutput::Escape => {
                return Some(escape_bytea(text.as_bytes()));
            }
            _ => {}
        }
    }
    super::output(ty, value, &style.tz)
}

/// PostgreSQL's `iso_8601` interval style (`EncodeInterval`): `P` with the non-zero date fields, `T` and
/// the non-zero time fields, each with its own sign; `PT0S` for zero.
pub fn iso_8601(interval: &Interval) -> String {
    let years = interval.months / 12;
    let months = interval.months % 12;
    let hours = interval.micros / 3_600_000_000;
    let minutes = interval.micros / 60_000_000 % 60;
    let micros = interval.micros % 60_000_000;
    if years == 0 && months == 0 && interval.days == 0 && interval.micros == 0 {
        return "PT0S".to_owned();
    }
    let mut out = String::from("P");
    for (value, unit) in [
        (i64::from(years), 'Y'),
        (i64::from(months), 'M'),
        (i64::from(interval.days), 'D'),
    ] {
        if value != 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    if interval.micros != 0 {
        out.push('T');
    }
    for (value, unit) in [(hours, 'H'), (minutes, 'M')] {
        if value != 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    if micros != 0 {
        if micros < 0 {
            out.push('-');
        }
        let abs = micros.unsigned_abs();
        out.push_str(&(abs / 1_000_000).to_string());
        let fraction = abs % 1_000_000;
        if fraction != 0 {
            out.push('.');
            out.push_str(format!("{fraction:06}").trim_end_matches('0'));
        }
        out.push('S');
    }
    out
}

/// PostgreSQL's `escape` form of bytea.
pub fn escape_bytea(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &byte in bytes {
        match byte {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(byte)),
            _ => out.push_str(&format!("\\{byte:03o}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(text: &str) -> String {
        iso_8601(&Interval::parse(text).expect("an interval"))
    }

    #[test]
    fn intervals_print_in_iso_8601_as_postgresql_does() {
        assert_eq!(iso("1 day 2 hours 3 minutes"), "P1DT2H3M");
        assert_eq!(iso("1 year 2 months"), "P1Y2M");
        assert_eq!(iso("0 seconds"), "PT0S");
        assert_eq!(iso("-1 day -00:00:01.5"), "P-1DT-1.5S");
        assert_eq!(iso("-90 minutes"), "PT-1H-30M");
        assert_eq!(iso("3 seconds"), "PT3S");
    }

    #[test]
    fn bytea_escape_keeps_printable_ascii_and_octals_the_rest() {
        assert_eq!(escape_bytea(b"ab"), "ab");
        assert_eq!(escape_bytea(&[0, b'\\', 0xff, b'\'']), "\\000\\\\\\377'");
    }

    #[test]
    fn default_styles_print_as_output_does() {
        let style = OutputStyle::with_zone(TimeZone::UTC);
        let blob = Value::Blob(vec![0xde, 0xad]);
        assert_eq!(output_styled(PgType::BYTEA, &blob, &style).as_deref(), Some("\\xdead"));
        let escaped = OutputStyle {
            bytea: ByteaOutput::Escape,
            ..style
        };
        assert_eq!(
            output_styled(PgType::BYTEA, &blob, &escaped).as_deref(),
            Some("\\336\\255")
        );
    }
}
