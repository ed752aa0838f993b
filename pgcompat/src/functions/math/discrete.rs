//! `gcd`/`lcm`, `width_bucket`, `greatest`/`least`, `factorial` and `random`.

use num_bigint::{BigInt, Sign};
use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_ARGUMENT_FOR_WIDTH_BUCKET, NUMERIC_VALUE_OUT_OF_RANGE};
use crate::functions::SessionState;

pub(super) fn gcd_lcm(a: &Args<'_, '_>, lcm: bool) -> Result<Value, PgError> {
    let (Some(x), Some(y)) = (num(a, 0)?, num(a, 1)?) else {
        return Ok(Value::Null);
    };
    if let (Num::Int(x), Num::Int(y)) = (&x, &y) {
        let name = if int_type_name(a, 0) == "bigint" || int_type_name(a, 1) == "bigint" || a.ty(0).is_none() {
            "bigint"
        } else {
            "integer"
        };
        let limit = if name == "integer" {
            i128::from(i32::MAX)
        } else {
            i128::from(i64::MAX)
        };
        let g = gcd_u128(x.unsigned_abs().into(), y.unsigned_abs().into());
        let result: i128 = if lcm {
            if *x == 0 || *y == 0 {
                0
            } else {
                (i128::from(*x) / g as i128 * i128::from(*y)).abs()
            }
        } else {
            g as i128
        };
        if result > limit {
            return Err(PgError::out_of_range(name));
        }
        return Ok(Value::Integer(result as i64));
    }
    let (x, y) = (as_big(&x)?, as_big(&y)?);
    let scale = x.scale.max(y.scale);
    let (mx, my) = (
        BigInt::from(x.at_scale(scale).magnitude().clone()),
        BigInt::from(y.at_scale(scale).magnitude().clone()),
    );
    let g = gcd_big(mx.clone(), my.clone());
    let m = if !lcm {
        g
    } else if g.sign() == Sign::NoSign {
        BigInt::default()
    } else {
        // lcm(a/10^s, b/10^s) = (a·b/g)/10^s.
        mx / &g * my
    };
    Ok(dec(Big { m, scale }))
}

pub(super) fn gcd_u128(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

pub(super) fn gcd_big(mut a: BigInt, mut b: BigInt) -> BigInt {
    while b.sign() != Sign::NoSign {
        let r = &a % &b;
        a = b;
        b = r;
    }
    a
}

pub(super) fn width_bucket(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(op), Some(lo), Some(hi)) = (num(a, 0)?, num(a, 1)?, num(a, 2)?) else {
        return Ok(Value::Null);
    };
    let Some(count) = a.int(3)? else {
        return Ok(Value::Null);
    };
    let bad = |m: &str| PgError::new(INVALID_ARGUMENT_FOR_WIDTH_BUCKET, m.to_owned());
    if count <= 0 {
        return Err(bad("count must be greater than zero"));
    }
    let any_dec = [&op, &lo, &hi].iter().any(|n| matches!(n, Num::Dec(_)));
    if !any_dec {
        let (op, lo, hi) = (as_f64(&op), as_f64(&lo), as_f64(&hi));
        if op.is_nan() || lo.is_nan() || hi.is_nan() {
            return Err(bad("operand, lower bound, and upper bound cannot be NaN"));
        }
        if !lo.is_finite() || !hi.is_finite() {
            return Err(bad("lower and upper bounds must be finite"));
        }
        if lo == hi {
            return Err(bad("lower bound cannot equal upper bound"));
        }
        let n = count as f64;
        let bucket = if lo < hi {
            if op < lo {
                0.0
            } else if op >= hi {
                n + 1.0
            } else {
                ((n * (op - lo) / (hi - lo)).floor() + 1.0).min(n)
            }
        } else if op > lo {
            0.0
        } else if op <= hi {
            n + 1.0
        } else {
            ((n * (lo - op) / (lo - hi)).floor() + 1.0).min(n)
        };
        return bucket_value(bucket as i64);
    }
    let (op, lo, hi) = (as_big(&op)?, as_big(&lo)?, as_big(&hi)?);
    let scale = op.scale.max(lo.scale).max(hi.scale);
    let (o, l, h) = (op.at_scale(scale), lo.at_scale(scale), hi.at_scale(scale));
    if l == h {
        return Err(bad("lower bound cannot equal upper bound"));
    }
    let n = BigInt::from(count);
    let bucket = if l < h {
        if o < l {
            BigInt::default()
        } else if o >= h {
            &n + 1
        } else {
            (&n * (&o - &l)) / (&h - &l) + 1
        }
    } else if o > l {
        BigInt::default()
    } else if o <= h {
        &n + 1
    } else {
        (&n * (&l - &o)) / (&l - &h) + 1
    };
    bucket_value(i64::try_from(&bucket).unwrap_or(i64::MAX))
}

pub(super) fn bucket_value(bucket: i64) -> Result<Value, PgError> {
    if bucket > i64::from(i32::MAX) {
        return Err(PgError::out_of_range("integer"));
    }
    Ok(Value::Integer(bucket))
}

/// `greatest`/`least`: NULLs ignored; numbers compared as numbers, everything else as its text.
pub(super) fn extreme(a: &Args<'_, '_>, greatest: bool) -> Result<Value, PgError> {
    let mut best: Option<(Value, Option<Num>)> = None;
    for i in 0..a.len() {
        let value = a.value(i);
        if matches!(value, Value::Null) {
            continue;
        }
        let is_number = match a.ty(i) {
            Some(t) => t.is_numeric() && !t.is_array(),
            None => matches!(value, Value::Integer(_) | Value::Real(_)),
        };
        let key = if is_number { num(a, i)? } else { None };
        let better = match &best {
            None => true,
            Some((best_value, best_key)) => {
                let order = match (&key, best_key) {
                    (Some(k), Some(b)) => compare_nums(k, b)?,
                    _ => super::super::value_text(&value).cmp(&super::super::value_text(best_value)),
                };
                if greatest {
                    order.is_gt()
                } else {
                    order.is_lt()
                }
            }
        };
        if better {
            best = Some((value, key));
        }
    }
    Ok(match best {
        None => Value::Null,
        // A numeric result keeps its text form (a double literal given as numeric stays exact).
        Some((_, Some(Num::Dec(b)))) => dec(b),
        Some((v, _)) => v,
    })
}

pub(super) fn compare_nums(a: &Num, b: &Num) -> Result<std::cmp::Ordering, PgError> {
    Ok(match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(y),
        (Num::Dec(_), _) | (_, Num::Dec(_)) if !matches!(a, Num::Float(_)) && !matches!(b, Num::Float(_)) => {
            as_big(a)?.cmp_value(&as_big(b)?)
        }
        _ => as_f64(a).total_cmp(&as_f64(b)),
    })
}

pub(super) fn factorial(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let Some(n) = a.int(0)? else {
        return Ok(Value::Null);
    };
    if n < 0 {
        return Err(PgError::new(
            NUMERIC_VALUE_OUT_OF_RANGE,
            "factorial of a negative number is undefined",
        ));
    }
    if n > FACTORIAL_MAX {
        return Err(PgError::new(
            NUMERIC_VALUE_OUT_OF_RANGE,
            "value overflows numeric format",
        ));
    }
    let mut product = BigInt::from(1u8);
    for k in 2..=n {
        product *= k;
    }
    Ok(dec(Big { m: product, scale: 0 }))
}

/// `random()`: a double in [0, 1) from the system's secure randomness.
pub(super) fn random() -> Result<Value, PgError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 8];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| PgError::new(crate::error::INTERNAL_ERROR, "could not generate random values"))?;
    let bits = u64::from_le_bytes(bytes) >> 11;
    Ok(Value::Real(bits as f64 / (1u64 << 53) as f64))
}
