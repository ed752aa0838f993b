//! Number formats (`9`, `0`, `D`, `G`, `S`, `MI`, `PL`, `SG`, `PR`, `FM`, `TH`): `to_char` of numbers and
//! `to_number`.

use rusqlite::types::Value;

use super::*;
use crate::error::PgError;
use crate::value::numeric::Decimal;

/// A number format (`9`, `0`, `.`/`D`, `,`/`G`, `S`, `MI`, `PL`, `SG`, `PR`, `FM`, `TH`) parsed.
#[derive(Default)]
pub(super) struct NumFormat {
    /// The integer part's items: a digit (`true` for `0`) or a group separator.
    int: Vec<NumItem>,
    frac: Vec<NumItem>,
    point: bool,
    fill: bool,
    sign: SignAt,
    ordinal: Option<bool>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum NumItem {
    Nine,
    Zero,
    Group,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum SignAt {
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

pub(super) fn parse_num_format(format: &str) -> Result<NumFormat, PgError> {
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
pub(super) fn format_number(value: &Decimal, format: &str) -> Result<String, PgError> {
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
pub(super) fn decimal_of(value: &Value) -> Result<Option<Decimal>, PgError> {
    let text = match value {
        Value::Null => return Ok(None),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => crate::value::format_float8(*f),
        other => super::super::value_text(other).unwrap_or_default(),
    };
    Decimal::parse(text.trim())
        .map(Some)
        .ok_or_else(|| PgError::invalid_input("numeric", &text))
}

/// `to_number(text, format)`: the digits, point and sign of `text` read by the format's positions.
pub(super) fn to_number(text: &str, format: &str) -> Result<Value, PgError> {
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
