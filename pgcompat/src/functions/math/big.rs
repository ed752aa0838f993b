//! Exact decimals for the numeric functions: [`Big`] (`m / 10^scale` over `num-bigint`) and rounding by
//! mode.

use num_bigint::{BigInt, Sign};

use super::*;
use crate::error::PgError;
use crate::value::numeric::Decimal;

/// An exact decimal: `m / 10^scale`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Big {
    /// The digits, signed.
    pub(crate) m: BigInt,
    /// Digits after the point.
    pub(crate) scale: i64,
}

pub(super) fn pow10(n: i64) -> BigInt {
    BigInt::from(10u8).pow(u32::try_from(n.max(0)).unwrap_or(0))
}

impl Big {
    pub(crate) fn from_decimal(d: &Decimal) -> Big {
        let digits = format!("{}{}", d.int, d.frac);
        let m = BigInt::parse_bytes(if digits.is_empty() { b"0" } else { digits.as_bytes() }, 10).unwrap_or_default();
        Big {
            m: if d.negative { -m } else { m },
            scale: d.frac.len() as i64,
        }
    }

    /// `a + b` at the larger scale.
    pub(crate) fn add(&self, other: &Big) -> Big {
        let scale = self.scale.max(other.scale);
        Big {
            m: self.at_scale(scale) + other.at_scale(scale),
            scale,
        }
    }

    /// `a − b` at the larger scale.
    pub(crate) fn sub(&self, other: &Big) -> Big {
        let scale = self.scale.max(other.scale);
        Big {
            m: self.at_scale(scale) - other.at_scale(scale),
            scale,
        }
    }

    /// `a · b`, exact.
    pub(crate) fn mul(&self, other: &Big) -> Big {
        Big {
            m: &self.m * &other.m,
            scale: self.scale + other.scale,
        }
    }

    /// `a / b` rounded half away from zero to `rscale` digits (`b` not zero).
    pub(crate) fn div(&self, other: &Big, rscale: i64) -> Big {
        let shift = rscale + other.scale - self.scale;
        let (n, d) = if shift >= 0 {
            (&self.m * pow10(shift), other.m.clone())
        } else {
            (self.m.clone(), &other.m * pow10(-shift))
        };
        let (n, d) = if d.sign() == Sign::Minus { (-n, -d) } else { (n, d) };
        Big {
            m: round_div(&n, &d, Rounding::HalfAway),
            scale: rscale,
        }
    }

    /// PostgreSQL's `select_div_scale`: the scale of `a / b`.
    pub(crate) fn div_scale(&self, other: &Big) -> i64 {
        let (w1, d1) = self.first_group();
        let (w2, d2) = other.first_group();
        let mut qweight = w1 - w2;
        if d1 <= d2 {
            qweight -= 1;
        }
        clamp_scale((MIN_SIG_DIGITS - qweight * 4).max(self.scale).max(other.scale))
    }

    /// The base-10000 weight and value of the leading digit group (0, 0 for zero).
    pub(crate) fn first_group(&self) -> (i64, u32) {
        if self.is_zero() {
            return (0, 0);
        }
        let weight = self.pg_weight();
        let digits = self.m.magnitude().to_string();
        let lead = (self.decimal_weight() - 4 * weight + 1) as usize;
        (weight, digits[..lead.min(digits.len())].parse().unwrap_or(0))
    }

    /// An integer.
    pub(crate) fn from_int(i: i64) -> Big {
        Big {
            m: BigInt::from(i),
            scale: 0,
        }
    }

    /// Numeric text; 22P02 if it is not a number.
    pub(crate) fn parse(text: &str) -> Result<Big, PgError> {
        Decimal::parse(text)
            .map(|d| Big::from_decimal(&d))
            .ok_or_else(|| PgError::invalid_input("numeric", text))
    }

    /// The canonical numeric text.
    pub(crate) fn to_text(&self) -> String {
        let negative = self.m.sign() == Sign::Minus;
        let digits = self.m.magnitude().to_string();
        let scale = self.scale.max(0) as usize;
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        let zero = self.m.sign() == Sign::NoSign;
        format!(
            "{}{int}{}{frac}",
            if negative && !zero { "-" } else { "" },
            if scale > 0 { "." } else { "" }
        )
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.m.sign() == Sign::NoSign
    }

    pub(crate) fn is_negative(&self) -> bool {
        self.m.sign() == Sign::Minus
    }

    pub(crate) fn is_integral(&self) -> bool {
        self.scale <= 0 || (&self.m % pow10(self.scale)).sign() == Sign::NoSign
    }

    /// The mantissa at a larger or equal scale.
    pub(crate) fn at_scale(&self, scale: i64) -> BigInt {
        if scale >= self.scale {
            &self.m * pow10(scale - self.scale)
        } else {
            &self.m / pow10(self.scale - scale)
        }
    }

    /// Rounded (by `mode`) to `scale` digits after the point; a negative scale rounds to tens, hundreds…
    /// and leaves scale 0.
    pub(crate) fn round_to(&self, scale: i64, mode: Rounding) -> Big {
        if scale >= self.scale {
            return Big {
                m: self.at_scale(scale.max(0)),
                scale: scale.max(0),
            };
        }
        let divisor = pow10(self.scale - scale);
        let q = round_div(&self.m, &divisor, mode);
        if scale >= 0 {
            Big { m: q, scale }
        } else {
            Big {
                m: q * pow10(-scale),
                scale: 0,
            }
        }
    }

    pub(crate) fn to_f64(&self) -> f64 {
        self.to_text().parse().unwrap_or(f64::NAN)
    }

    /// The decimal exponent of the leading digit (`floor(log10(|x|))`), for non-zero values.
    pub(crate) fn decimal_weight(&self) -> i64 {
        self.m.magnitude().to_string().len() as i64 - 1 - self.scale
    }

    /// PostgreSQL's base-10000 weight of the leading digit group.
    pub(crate) fn pg_weight(&self) -> i64 {
        self.decimal_weight().div_euclid(4)
    }

    pub(crate) fn cmp_value(&self, other: &Big) -> std::cmp::Ordering {
        let scale = self.scale.max(other.scale);
        self.at_scale(scale).cmp(&other.at_scale(scale))
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Rounding {
    /// Half away from zero (numeric's rounding).
    HalfAway,
    /// Toward zero.
    Trunc,
    /// Toward +∞.
    Ceil,
    /// Toward −∞.
    Floor,
}

/// `n / d` rounded by `mode` (`d` positive).
pub(super) fn round_div(n: &BigInt, d: &BigInt, mode: Rounding) -> BigInt {
    let q = n / d;
    let r = n - &q * d;
    if r.sign() == Sign::NoSign {
        return q;
    }
    let negative = n.sign() == Sign::Minus;
    match mode {
        Rounding::Trunc => q,
        Rounding::Ceil if negative => q,
        Rounding::Ceil => q + 1,
        Rounding::Floor if negative => q - 1,
        Rounding::Floor => q,
        Rounding::HalfAway => {
            let twice = r.magnitude() * 2u8;
            if &twice >= d.magnitude() {
                if negative {
                    q - 1
                } else {
                    q + 1
                }
            } else {
                q
            }
        }
    }
}
