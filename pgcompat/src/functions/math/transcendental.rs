//! Numeric and double precision `sqrt`, `exp`, `ln`, `log` and `power` at PostgreSQL's result scales,
//! computed in fixed point with guard digits.

use num_bigint::{BigInt, Sign};
use rusqlite::types::Value;

use super::big::pow10;
use super::*;
use crate::error::{
    PgError, DIVISION_BY_ZERO, INVALID_ARGUMENT_FOR_LOG, INVALID_ARGUMENT_FOR_POWER, NUMERIC_VALUE_OUT_OF_RANGE,
};
use crate::functions::SessionState;
use crate::value::numeric::INTEGER_DIGITS_MAX;

pub(super) fn clamp_scale(scale: i64) -> i64 {
    scale.clamp(0, MAX_DISPLAY_SCALE)
}

pub(super) fn sqrt(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let negative = || {
        PgError::new(
            INVALID_ARGUMENT_FOR_POWER,
            "cannot take square root of a negative number",
        )
    };
    match num(a, 0)? {
        None => Ok(Value::Null),
        Some(Num::Dec(b)) => {
            if b.is_negative() {
                return Err(negative());
            }
            let weight = if b.is_zero() { 0 } else { b.pg_weight() };
            let sweight = (weight + 1) * 4 / 2 - 1;
            let rscale = clamp_scale((MIN_SIG_DIGITS - sweight).max(b.scale));
            Ok(dec(sqrt_at(&b, rscale)))
        }
        Some(other) => {
            let x = as_f64(&other);
            if x < 0.0 {
                return Err(negative());
            }
            Ok(crate::value::float_value(x.sqrt()))
        }
    }
}

/// `sqrt(x)` of a non-negative `x`, rounded half away from zero to `rscale` digits.
pub(crate) fn sqrt_at(x: &Big, rscale: i64) -> Big {
    // isqrt(m · 10^(2w − s)) = sqrt(x) · 10^w.
    let mut w = rscale + GUARD_DIGITS;
    if 2 * w < x.scale {
        w = (x.scale + 1) / 2;
    }
    let root = x.at_scale(2 * w).sqrt();
    Big { m: root, scale: w }.round_to(rscale, Rounding::HalfAway)
}

pub(super) fn exp(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    match num(a, 0)? {
        None => Ok(Value::Null),
        Some(Num::Dec(b)) => {
            let val = (b.to_f64() * PG_LOG10_E).clamp(-2000.0, 2000.0);
            let rscale = clamp_scale((MIN_SIG_DIGITS - val as i64).max(b.scale));
            big_exp(&b, rscale).map(dec)
        }
        Some(other) => {
            let x = as_f64(&other);
            let result = x.exp();
            checked_float(result, x.is_finite(), x == f64::NEG_INFINITY)
        }
    }
}

/// `exp(x)` rounded to `rscale` digits; 22003 past numeric's range.
pub(super) fn big_exp(x: &Big, rscale: i64) -> Result<Big, PgError> {
    let approx = x.to_f64() * PG_LOG10_E;
    if approx > (INTEGER_DIGITS_MAX as f64) {
        return Err(PgError::new(
            NUMERIC_VALUE_OUT_OF_RANGE,
            "value overflows numeric format",
        ));
    }
    if approx < -(rscale as f64) - 2.0 {
        return Ok(Big {
            m: BigInt::default(),
            scale: rscale,
        });
    }
    let weight = approx.max(0.0).ceil() as i64;
    let w = rscale + weight + GUARD_DIGITS + 8;
    let fixed = exp_fixed(&x.at_scale(w), w);
    Ok(Big { m: fixed, scale: w }.round_to(rscale, Rounding::HalfAway))
}

/// `exp(x)` for `x` in fixed point at `w` digits.
pub(super) fn exp_fixed(x: &BigInt, w: i64) -> BigInt {
    let one = pow10(w);
    let negative = x.sign() == Sign::Minus;
    let mut r = BigInt::from(x.magnitude().clone());
    // Halve until below 0.01, sum the Taylor series, then square back.
    let small = &one / 100u8;
    let mut halvings = 0u32;
    while r > small {
        r /= 2u8;
        halvings += 1;
    }
    let extra = i64::from(halvings) / 3 + 2;
    let w2 = w + extra;
    let one2 = pow10(w2);
    let r2 = r * pow10(extra);
    let mut sum = one2.clone();
    let mut term = one2.clone();
    let mut n = 1u32;
    loop {
        term = (&term * &r2) / &one2 / n;
        if term.sign() == Sign::NoSign {
            break;
        }
        sum += &term;
        n += 1;
    }
    for _ in 0..halvings {
        sum = (&sum * &sum) / &one2;
    }
    let result = sum / pow10(extra);
    if negative {
        (&one * &one) / result
    } else {
        result
    }
}

/// `ln(x)` in fixed point at `w` digits, for `x > 0`.
pub(super) fn ln_fixed(x: &Big, w: i64) -> BigInt {
    // x = y · 10^k with y in [0.1, 1); ln x = 64 · ln(y^(1/64)) + k · ln 10.
    let k = x.decimal_weight() + 1;
    let work = w + GUARD_DIGITS + k.unsigned_abs().to_string().len() as i64;
    let y = Big {
        m: x.m.clone(),
        scale: x.scale + k,
    }
    .at_scale(work);
    let ln_y = ln_near_one(y, work);
    let ln10 = if k == 0 {
        BigInt::default()
    } else {
        ln_near_one(pow10(work + 1), work)
    };
    (ln_y + ln10 * k) / pow10(work - w)
}

/// `ln(y)` for a fixed-point `y` (at `w` digits) between 0.1 and 10.
pub(super) fn ln_near_one(y: BigInt, w: i64) -> BigInt {
    let one = pow10(w);
    let mut y = y;
    for _ in 0..6 {
        y = (&y * &one).sqrt();
    }
    // ln y = 2 · atanh(z), z = (y − 1)/(y + 1).
    let z = ((&y - &one) * &one) / (&y + &one);
    let z2 = (&z * &z) / &one;
    let mut sum = BigInt::default();
    let mut power = z;
    let mut n = 1u32;
    loop {
        let term = &power / n;
        if term.sign() == Sign::NoSign {
            break;
        }
        sum += term;
        power = (&power * &z2) / &one;
        n += 2;
    }
    sum * 128u8
}

/// PostgreSQL's `estimate_ln_dweight`: the decimal weight of `ln(x)`.
pub(super) fn ln_dweight(x: &Big) -> i64 {
    let point_nine = Big {
        m: BigInt::from(9u8),
        scale: 1,
    };
    let one_point_one = Big {
        m: BigInt::from(11u8),
        scale: 1,
    };
    if x.cmp_value(&point_nine).is_ge() && x.cmp_value(&one_point_one).is_le() {
        let diff = Big {
            m: &x.m - pow10(x.scale),
            scale: x.scale,
        };
        return if diff.is_zero() { 0 } else { diff.decimal_weight() };
    }
    if x.is_zero() {
        return 0;
    }
    let digits = x.m.magnitude().to_string();
    let lead: f64 = digits[..digits.len().min(15)].parse().unwrap_or(1.0);
    let exponent = digits.len().min(15) as i64 - 1 - x.decimal_weight();
    let ln = lead.ln() - exponent as f64 * std::f64::consts::LN_10;
    ln.abs().log10() as i64
}

pub(super) fn check_log_argument(x: &Big) -> Result<(), PgError> {
    if x.is_zero() {
        return Err(PgError::new(INVALID_ARGUMENT_FOR_LOG, "cannot take logarithm of zero"));
    }
    if x.is_negative() {
        return Err(PgError::new(
            INVALID_ARGUMENT_FOR_LOG,
            "cannot take logarithm of a negative number",
        ));
    }
    Ok(())
}

pub(super) fn ln_or_log10(a: &Args<'_, '_>, log10: bool) -> Result<Value, PgError> {
    match num(a, 0)? {
        None => Ok(Value::Null),
        Some(Num::Dec(b)) if log10 => big_log(&Big::from_int(10), &b).map(dec),
        Some(Num::Dec(b)) => {
            check_log_argument(&b)?;
            let rscale = clamp_scale((MIN_SIG_DIGITS - ln_dweight(&b)).max(b.scale));
            let w = rscale + GUARD_DIGITS;
            Ok(dec(Big {
                m: ln_fixed(&b, w),
                scale: w,
            }
            .round_to(rscale, Rounding::HalfAway)))
        }
        Some(other) => {
            let x = as_f64(&other);
            if x == 0.0 {
                return Err(PgError::new(INVALID_ARGUMENT_FOR_LOG, "cannot take logarithm of zero"));
            }
            if x < 0.0 {
                return Err(PgError::new(
                    INVALID_ARGUMENT_FOR_LOG,
                    "cannot take logarithm of a negative number",
                ));
            }
            Ok(crate::value::float_value(if log10 { x.log10() } else { x.ln() }))
        }
    }
}

pub(super) fn big_log(base: &Big, x: &Big) -> Result<Big, PgError> {
    check_log_argument(base)?;
    check_log_argument(x)?;
    let (db, dx) = (ln_dweight(base), ln_dweight(x));
    let rscale = clamp_scale((MIN_SIG_DIGITS - (dx - db)).max(base.scale).max(x.scale));
    let w = rscale + GUARD_DIGITS + (-db).max(0) + dx.max(0);
    let ln_base = ln_fixed(base, w);
    if ln_base.sign() == Sign::NoSign {
        return Err(PgError::new(DIVISION_BY_ZERO, "division by zero"));
    }
    let ln_x = ln_fixed(x, w);
    Ok(Big {
        m: (ln_x * pow10(w)) / ln_base,
        scale: w,
    }
    .round_to(rscale, Rounding::HalfAway))
}

pub(super) fn log_base(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(b), Some(x)) = (num(a, 0)?, num(a, 1)?) else {
        return Ok(Value::Null);
    };
    big_log(&as_big(&b)?, &as_big(&x)?).map(dec)
}

pub(super) fn power(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(x), Some(y)) = (num(a, 0)?, num(a, 1)?) else {
        return Ok(Value::Null);
    };
    if matches!(x, Num::Dec(_)) || matches!(y, Num::Dec(_)) {
        return big_power(&as_big(&x)?, &as_big(&y)?).map(dec);
    }
    let (x, y) = (as_f64(&x), as_f64(&y));
    if x == 0.0 && y < 0.0 {
        return Err(PgError::new(
            INVALID_ARGUMENT_FOR_POWER,
            "zero raised to a negative power is undefined",
        ));
    }
    if x < 0.0 && y.fract() != 0.0 && y.is_finite() {
        return Err(PgError::new(
            INVALID_ARGUMENT_FOR_POWER,
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    let result = x.powf(y);
    checked_float(
        result,
        x.is_finite() && y.is_finite(),
        x == 0.0 || !x.is_finite() || !y.is_finite(),
    )
}

pub(super) fn big_power(x: &Big, y: &Big) -> Result<Big, PgError> {
    if x.is_zero() && y.is_negative() {
        return Err(PgError::new(
            INVALID_ARGUMENT_FOR_POWER,
            "zero raised to a negative power is undefined",
        ));
    }
    if x.is_negative() && !y.is_integral() {
        return Err(PgError::new(
            INVALID_ARGUMENT_FOR_POWER,
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    let overflow = || PgError::new(NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format");
    if y.is_integral() {
        let n = y.round_to(0, Rounding::Trunc).m;
        if let Ok(n) = i32::try_from(&n) {
            let rscale = clamp_scale(MIN_SIG_DIGITS.max(x.scale));
            if x.is_zero() {
                return Ok(Big {
                    m: BigInt::from(u8::from(n == 0)),
                    scale: 0,
                }
                .round_to(rscale, Rounding::Trunc));
            }
            let digits = x.m.magnitude().to_string().len() as i64;
            let result_weight = (x.decimal_weight() + 1) * i64::from(n);
            if result_weight > INTEGER_DIGITS_MAX as i64 {
                return Err(overflow());
            }
            if digits * i64::from(n.unsigned_abs()) <= 200_000 {
                let p = x.m.pow(n.unsigned_abs());
                let scale = x.scale * i64::from(n.unsigned_abs());
                if n >= 0 {
                    return Ok(Big { m: p, scale }.round_to(rscale, Rounding::HalfAway));
                }
                // 1 / x^|n| = 10^scale / p.
                let w = rscale + GUARD_DIGITS;
                let q = pow10(w + scale) / p;
                return Ok(Big { m: q, scale: w }.round_to(rscale, Rounding::HalfAway));
            }
        }
    }
    if x.is_zero() {
        let rscale = clamp_scale(MIN_SIG_DIGITS.max(x.scale).max(y.scale));
        return Ok(Big {
            m: BigInt::default(),
            scale: rscale,
        });
    }
    let sign_negative = x.is_negative() && (y.round_to(0, Rounding::Trunc).m % 2u8).sign() != Sign::NoSign;
    let abs_x = Big {
        m: BigInt::from(x.m.magnitude().clone()),
        scale: x.scale,
    };
    let ln_x = ln_fixed(&abs_x, 20);
    let val = (Big { m: ln_x, scale: 20 }.to_f64() * y.to_f64()) * PG_LOG10_E;
    if val > INTEGER_DIGITS_MAX as f64 {
        return Err(overflow());
    }
    let rscale = clamp_scale(
        (MIN_SIG_DIGITS - val.clamp(-2000.0, 2000.0) as i64)
            .max(x.scale)
            .max(y.scale),
    );
    let weight = val.max(0.0).ceil() as i64;
    let w = rscale + weight + GUARD_DIGITS + 8 + y.decimal_weight().max(0);
    let ln_full = ln_fixed(&abs_x, w + y.scale);
    let product = Big {
        m: ln_full * &y.m,
        scale: w + 2 * y.scale,
    }
    .at_scale(w);
    let result = Big {
        m: exp_fixed(&product, w),
        scale: w,
    }
    .round_to(rscale, Rounding::HalfAway);
    Ok(if sign_negative {
        Big {
            m: -result.m,
            scale: result.scale,
        }
    } else {
        result
    })
}
