//! `numeric`: exact decimals kept as canonical text (`-12.50`, `NaN`), their input rules, type modifier,
//! comparison (the `pg_numeric` collation) and arithmetic enough for sums and averages.

use std::cmp::Ordering;

use crate::error::{PgError, NUMERIC_VALUE_OUT_OF_RANGE};

/// Most digits before the point PostgreSQL accepts in a numeric; past it the value is refused.
pub const INTEGER_DIGITS_MAX: usize = 131_072;
/// Most digits after the point.
pub const SCALE_MAX: usize = 16_383;

/// A decimal split into its parts: sign, digits before and after the point (no leading zeros before,
/// trailing zeros after are kept: they are the value's scale).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decimal {
    /// Negative (never for zero).
    pub negative: bool,
    /// Digits before the point, no leading zeros ("" for zero).
    pub int: String,
    /// Digits after the point, as many as the scale.
    pub frac: String,
}

impl Decimal {
    /// Parses numeric input text (`  -1.50 `, `1e3`, `.5`, `+7`); `None` if it is not a number. `NaN` is
    /// handled by the callers.
    pub fn parse(text: &str) -> Option<Decimal> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => {
                let exp: i64 = rest[at + 1..].parse().ok()?;
                (&rest[..at], exp)
            }
            None => (rest, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if exponent.unsigned_abs() > (INTEGER_DIGITS_MAX + SCALE_MAX) as u64 {
            return None;
        }
        let mut digits = format!("{int}{frac}");
        let mut point = int.len() as i64 + exponent;
        // Scale after the exponent: PostgreSQL keeps max(0, digits after the point − exponent).
        let scale = (frac.len() as i64 - exponent).max(0) as usize;
        if point < 0 {
            digits = "0".repeat(point.unsigned_abs() as usize) + &digits;
            point = 0;
        }
        let point = point as usize;
        if digits.len() < point {
            digits.push_str(&"0".repeat(point - digits.len()));
        }
        let (int, frac) = digits.split_at(point);
        let mut frac = frac.to_owned();
        frac.truncate(scale);
        while frac.len() < scale {
            frac.push('0');
        }
        let int = int.trim_start_matches('0').to_owned();
        let mut decimal = Decimal { negative, int, frac };
        if decimal.is_zero() {
            decimal.negative = false;
        }
        Some(decimal)
    }

    /// Whether every digit is zero.
    pub fn is_zero(&self) -> bool {
        self.int.bytes().all(|b| b == b'0') && self.frac.bytes().all(|b| b == b'0')
    }

    /// Rounded (half away from zero) or padded to `scale` digits after the point.
    pub fn rescale(&self, scale: usize) -> Decimal {
        let mut out = self.clone();
        if out.frac.len() <= scale {
            while out.frac.len() < scale {
                out.frac.push('0');
            }
            return out;
        }
        let round_up = out.frac.as_bytes()[scale] >= b'5';
        out.frac.truncate(scale);
        if round_up {
            let mut digits: Vec<u8> = format!("{}{}", out.int, out.frac).into_bytes();
            let mut i = digits.len();
            loop {
                if i == 0 {
                    digits.insert(0, b'1');
                    break;
                }
                i -= 1;
                if digits[i] == b'9' {
                    digits[i] = b'0';
                } else {
                    digits[i] += 1;
                    break;
                }
            }
            let int_len = digits.len() - scale;
            let text = String::from_utf8(digits).expect("digits are ASCII");
            out.int = text[..int_len].trim_start_matches('0').to_owned();
            out.frac = text[int_len..].to_owned();
        }
        if out.is_zero() {
            out.negative = false;
        }
        out
    }

    /// Applies `numeric(precision, scale)`: rounds to the scale, refuses with 22003 when the integer digits
    /// do not fit.
    pub fn apply_modifier(&self, precision: u32, scale: u32) -> Result<Decimal, PgError> {
        let out = self.rescale(scale as usize);
        let int_digits_max = precision.saturating_sub(scale) as usize;
        if out.int.len() > int_digits_max {
            return Err(PgError::new(
                NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "numeric field overflow: a field with precision {precision}, scale {scale} must round to an \
                     absolute value less than 10^{int_digits_max}"
                ),
            ));
        }
        Ok(out)
    }

    /// The canonical text (`-12.50`, `0.5`, `0`).
    pub fn to_text(&self) -> String {
        let mut out = String::with_capacity(self.int.len() + self.frac.len() + 2);
        if self.negative {
            out.push('-');
        }
        if self.int.is_empty() {
            out.push('0');
        } else {
            out.push_str(&self.int);
        }
        if !self.frac.is_empty() {
            out.push('.');
            out.push_str(&self.frac);
        }
        out
    }

    /// Compares two values by magnitude and sign (scale does not matter: 1.0 = 1.00).
    pub fn cmp_value(&self, other: &Decimal) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => return Ordering::Greater,
            (true, false) => return Ordering::Less,
            _ => {}
        }
        let magnitude = self
            .int
            .len()
            .cmp(&other.int.len())
            .then_with(|| self.int.cmp(&other.int))
            .then_with(|| {
                let width = self.frac.len().max(other.frac.len());
                let pad = |s: &str| format!("{s:0<width$}");
                pad(&self.frac).cmp(&pad(&other.frac))
            });
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    /// The sum of two values, at the larger scale.
    pub fn add(&self, other: &Decimal) -> Decimal {
        let scale = self.frac.len().max(other.frac.len());
        let a = self.rescale(scale);
        let b = other.rescale(scale);
        let digits_a = format!("{}{}", a.int, a.frac);
        let digits_b = format!("{}{}", b.int, b.frac);
        let (negative, digits) = if a.negative == b.negative {
            (a.negative, add_digits(&digits_a, &digits_b))
        } else {
            match cmp_digits(&digits_a, &digits_b) {
                Ordering::Less => (b.negative, sub_digits(&digits_b, &digits_a)),
                _ => (a.negative, sub_digits(&digits_a, &digits_b)),
            }
        };
        let digits = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = digits.split_at(digits.len() - scale);
        let mut out = Decimal {
            negative,
            int: int.trim_start_matches('0').to_owned(),
            frac: frac.to_owned(),
        };
        if out.is_zero() {
            out.negative = false;
        }
        out
    }
}

fn cmp_digits(a: &str, b: &str) -> Ordering {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn add_digits(a: &str, b: &str) -> String {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0u8;
    for i in 0..a.len().max(b.len()) {
        let da = if i < a.len() { a[a.len() - 1 - i] - b'0' } else { 0 };
        let db = if i < b.len() { b[b.len() - 1 - i] - b'0' } else { 0 };
        let sum = da + db + carry;
        out.push(b'0' + sum % 10);
        carry = sum / 10;
    }
    if carry > 0 {
        out.push(b'0' + carry);
    }
    out.reverse();
    String::from_utf8(out).expect("digits are ASCII")
}

/// `a − b` for digit strings with `a ≥ b` (leading zeros kept).
pub(crate) fn sub_digits(a: &str, b: &str) -> String {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i8;
    for i in 0..a.len() {
        let da = (a[a.len() - 1 - i] - b'0') as i8;
        let db = if i < b.len() {
            (b[b.len() - 1 - i] - b'0') as i8
        } else {
            0
        };
        let mut d = da - db - borrow;
        borrow = 0;
        if d < 0 {
            d += 10;
            borrow = 1;
        }
        out.push(b'0' + d as u8);
    }
    out.reverse();
    String::from_utf8(out).expect("digits are ASCII")
}

/// The `pg_numeric` collation: numeric text compared by value; `NaN` above every number (as PostgreSQL
/// sorts it); text that is not a number after every number, bytewise.
pub fn collate(a: &str, b: &str) -> Ordering {
    let key = |s: &str| -> (u8, Option<Decimal>) {
        if s.eq_ignore_ascii_case("nan") {
            return (1, None);
        }
        match Decimal::parse(s) {
            Some(d) => (0, Some(d)),
            None => (2, None),
        }
    };
    match (key(a), key(b)) {
        ((0, Some(x)), (0, Some(y))) => x.cmp_value(&y),
        ((ka, _), (kb, _)) if ka != kb => ka.cmp(&kb),
        _ => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Decimal::parse(s).expect("a number").to_text()
    }

    #[test]
    fn input_keeps_the_scale_written() {
        assert_eq!(canon("1.50"), "1.50");
        assert_eq!(canon("  -007.5 "), "-7.5");
        assert_eq!(canon(".5"), "0.5");
        assert_eq!(canon("1e3"), "1000");
        assert_eq!(canon("1.5e1"), "15");
        assert_eq!(canon("1.23e-1"), "0.123");
        assert_eq!(canon("-0.00"), "0.00");
        assert!(Decimal::parse("1.2.3").is_none());
        assert!(Decimal::parse("abc").is_none());
        assert!(Decimal::parse("").is_none());
        assert!(Decimal::parse("-").is_none());
    }

    #[test]
    fn modifiers_round_half_away_and_refuse_overflow() {
        let d = Decimal::parse("2.345").expect("a number");
        assert_eq!(d.apply_modifier(10, 2).expect("fits").to_text(), "2.35");
        let d = Decimal::parse("-2.345").expect("a number");
        assert_eq!(d.apply_modifier(10, 2).expect("fits").to_text(), "-2.35");
        let d = Decimal::parse("9.999").expect("a number");
        assert_eq!(d.apply_modifier(4, 2).expect("fits").to_text(), "10.00");
        assert!(d.apply_modifier(3, 2).is_err());
        assert_eq!(
            Decimal::parse("7")
                .expect("n")
                .apply_modifier(5, 2)
                .expect("fits")
                .to_text(),
            "7.00"
        );
    }

    #[test]
    fn collation_orders_by_value() {
        assert_eq!(collate("9.50", "10"), Ordering::Less);
        assert_eq!(collate("-10", "-9.5"), Ordering::Less);
        assert_eq!(collate("1.0", "1.00"), Ordering::Equal);
        assert_eq!(collate("NaN", "1e100"), Ordering::Greater);
    }

    #[test]
    fn sums_are_exact() {
        let a = Decimal::parse("1.10").expect("n");
        let b = Decimal::parse("2.2").expect("n");
        assert_eq!(a.add(&b).to_text(), "3.30");
        let c = Decimal::parse("-5.25").expect("n");
        assert_eq!(a.add(&c).to_text(), "-4.15");
        assert_eq!(c.add(&Decimal::parse("5.25").expect("n")).to_text(), "0.00");
    }

    proptest::proptest! {
        #[test]
        fn collation_agrees_with_integers(a in -100_000i64..100_000, b in -100_000i64..100_000, sa in 0usize..4, sb in 0usize..4) {
            let text = |v: i64, scale: usize| {
                let d = Decimal::parse(&v.to_string()).expect("integer");
                d.rescale(scale).to_text()
            };
            proptest::prop_assert_eq!(collate(&text(a, sa), &text(b, sb)), a.cmp(&b));
            let sum = Decimal::parse(&a.to_string()).expect("n").add(&Decimal::parse(&b.to_string()).expect("n"));
            proptest::prop_assert_eq!(sum.to_text(), (a + b).to_string());
        }
    }
}
