//! Mathematical functions with PostgreSQL's types and errors: integer arguments that PostgreSQL sends to
//! `double precision` (`round(5)`, `sqrt(2)`) give doubles; numeric ones are exact, at PostgreSQL's result
//! scales (`sqrt(2.0)` has 15 digits after the point, `exp(1.0)` 16), computed in fixed point with guard
//! digits (`num-bigint`) and rounded half away from zero.

mod big;
mod discrete;
mod transcendental;

use std::sync::Arc;

use num_bigint::{BigInt, Sign};
use rusqlite::types::Value;
use rusqlite::Connection;

pub(super) use big::Big;
use big::Rounding;
use discrete::{extreme, factorial, gcd_lcm, random, width_bucket};
pub(super) use transcendental::sqrt_at;
use transcendental::{clamp_scale, exp, ln_or_log10, log_base, power, sqrt};

use super::{define, Args, Purity};
use crate::error::{PgError, DIVISION_BY_ZERO, NUMERIC_VALUE_OUT_OF_RANGE};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::format_float8;
use crate::value::numeric::{Decimal, INTEGER_DIGITS_MAX};

/// PostgreSQL's `NUMERIC_MIN_SIG_DIGITS`: significant digits of a numeric transcendental result.
const MIN_SIG_DIGITS: i64 = 16;
/// PostgreSQL's `NUMERIC_MAX_DISPLAY_SCALE`.
const MAX_DISPLAY_SCALE: i64 = 1000;
/// Extra digits carried through fixed-point computations before the final rounding.
const GUARD_DIGITS: i64 = 12;
/// log10(e) as PostgreSQL writes it in its numeric scale estimates (0.434294481903252, not `LOG10_E`: the
/// estimates must truncate as PostgreSQL's do).
#[allow(clippy::approx_constant)]
const PG_LOG10_E: f64 = 0.434_294_481_903_252;
/// Largest `n` of `factorial(n)` (PostgreSQL's own limit: larger ones overflow numeric).
const FACTORIAL_MAX: i64 = 32_177;

/// A number as PostgreSQL's function resolution sees it.
#[derive(Clone, Debug)]
enum Num {
    Int(i64),
    Float(f64),
    Dec(Big),
}

/// Argument `i` as PostgreSQL would type it: by the inferred type where the translator knew one, else by
/// the SQLite value (numeric text is a numeric).
fn num(args: &Args<'_, '_>, i: usize) -> Result<Option<Num>, PgError> {
    let value = args.value(i);
    let base = args.ty(i).map(PgType::base);
    Ok(Some(match (base, value) {
        (_, Value::Null) => return Ok(None),
        (Some(Base::Float4 | Base::Float8), Value::Integer(v)) => Num::Float(v as f64),
        (Some(Base::Float4 | Base::Float8), Value::Real(f)) => Num::Float(f),
        (Some(Base::Float4 | Base::Float8), Value::Text(t)) => Num::Float(parse_float(&t)?),
        (Some(Base::Numeric), Value::Integer(v)) => Num::Dec(Big::from_int(v)),
        (Some(Base::Numeric), Value::Real(f)) => Num::Dec(Big::parse(&format_float8(f))?),
        (_, Value::Integer(v)) => Num::Int(v),
        (_, Value::Real(f)) => Num::Float(f),
        (_, Value::Text(t)) => match Decimal::parse(&t) {
            Some(d) => Num::Dec(Big::from_decimal(&d)),
            None => Num::Float(parse_float(&t).map_err(|_| PgError::invalid_input("numeric", &t))?),
        },
        (_, Value::Blob(b)) => return Err(PgError::invalid_input("numeric", &String::from_utf8_lossy(&b))),
    }))
}

fn parse_float(text: &str) -> Result<f64, PgError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "nan" => Ok(f64::NAN),
        "infinity" | "inf" | "+infinity" => Ok(f64::INFINITY),
        "-infinity" | "-inf" => Ok(f64::NEG_INFINITY),
        t => t.parse().map_err(|_| PgError::invalid_input("double precision", text)),
    }
}

fn as_f64(n: &Num) -> f64 {
    match n {
        Num::Int(i) => *i as f64,
        Num::Float(f) => *f,
        Num::Dec(b) => b.to_f64(),
    }
}

fn as_big(n: &Num) -> Result<Big, PgError> {
    match n {
        Num::Int(i) => Ok(Big::from_int(*i)),
        Num::Float(f) if f.is_finite() => Big::parse(&format_float8(*f)),
        Num::Float(f) => Err(PgError::unsupported(format!("the numeric value {}", format_float8(*f)))),
        Num::Dec(b) => Ok(b.clone()),
    }
}

fn dec(b: Big) -> Value {
    Value::Text(b.to_text())
}

/// 22003 for a double result that overflowed or underflowed, as PostgreSQL checks it.
fn checked_float(result: f64, inputs_finite: bool, may_be_zero: bool) -> Result<Value, PgError> {
    if result.is_infinite() && inputs_finite {
        return Err(PgError::new(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow"));
    }
    if result == 0.0 && !may_be_zero {
        return Err(PgError::new(
            NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: underflow",
        ));
    }
    Ok(crate::value::float_value(result))
}

fn int_type_name(args: &Args<'_, '_>, i: usize) -> &'static str {
    match args.ty(i).map(PgType::base) {
        Some(Base::Int2) => "smallint",
        Some(Base::Int4) => "integer",
        _ => "bigint",
    }
}

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    define(conn, state, "round", 1, Purity::Pure, |a, _| {
        round_like(a, Rounding::HalfAway)
    })?;
    define(conn, state, "round", 2, Purity::Pure, |a, _| {
        round_like(a, Rounding::HalfAway)
    })?;
    define(conn, state, "trunc", 1, Purity::Pure, |a, _| {
        round_like(a, Rounding::Trunc)
    })?;
    define(conn, state, "trunc", 2, Purity::Pure, |a, _| {
        round_like(a, Rounding::Trunc)
    })?;
    for name in ["ceil", "ceiling"] {
        define(conn, state, name, 1, Purity::Pure, |a, _| round_like(a, Rounding::Ceil))?;
    }
    define(conn, state, "floor", 1, Purity::Pure, |a, _| {
        round_like(a, Rounding::Floor)
    })?;
    define(conn, state, "abs", 1, Purity::Pure, abs)?;
    define(conn, state, "sign", 1, Purity::Pure, sign)?;
    define(conn, state, "mod", 2, Purity::Pure, modulo)?;
    define(conn, state, "div", 2, Purity::Pure, div)?;
    for name in ["power", "pow"] {
        define(conn, state, name, 2, Purity::Pure, power)?;
    }
    define(conn, state, "sqrt", 1, Purity::Pure, sqrt)?;
    define(conn, state, "cbrt", 1, Purity::Pure, |a, _| float1(a, glibc_cbrt))?;
    define(conn, state, "exp", 1, Purity::Pure, exp)?;
    define(conn, state, "ln", 1, Purity::Pure, |a, _| ln_or_log10(a, false))?;
    for name in ["log", "log10"] {
        define(conn, state, name, 1, Purity::Pure, |a, _| ln_or_log10(a, true))?;
    }
    define(conn, state, "log", 2, Purity::Pure, log_base)?;
    define(conn, state, "pi", 0, Purity::Pure, |_, _| {
        Ok(Value::Real(std::f64::consts::PI))
    })?;
    // PostgreSQL divides and multiplies by its RADIANS_PER_DEGREE constant (not Rust's to_degrees).
    define(conn, state, "degrees", 1, Purity::Pure, |a, _| {
        float1(a, |x| x / 0.017_453_292_519_943_295)
    })?;
    define(conn, state, "radians", 1, Purity::Pure, |a, _| {
        float1(a, |x| x * 0.017_453_292_519_943_295)
    })?;
    define(conn, state, "sin", 1, Purity::Pure, |a, _| float1(a, f64::sin))?;
    define(conn, state, "cos", 1, Purity::Pure, |a, _| float1(a, f64::cos))?;
    define(conn, state, "tan", 1, Purity::Pure, |a, _| float1(a, f64::tan))?;
    define(conn, state, "cot", 1, Purity::Pure, |a, _| float1(a, |x| 1.0 / x.tan()))?;
    define(conn, state, "asin", 1, Purity::Pure, |a, _| inverse_trig(a, f64::asin))?;
    define(conn, state, "acos", 1, Purity::Pure, |a, _| inverse_trig(a, f64::acos))?;
    define(conn, state, "atan", 1, Purity::Pure, |a, _| float1(a, f64::atan))?;
    define(conn, state, "atan2", 2, Purity::Pure, |a, _| {
        let (Some(y), Some(x)) = (num(a, 0)?, num(a, 1)?) else {
            return Ok(Value::Null);
        };
        Ok(Value::Real(as_f64(&y).atan2(as_f64(&x))))
    })?;
    define(conn, state, "gcd", 2, Purity::Pure, |a, _| gcd_lcm(a, false))?;
    define(conn, state, "lcm", 2, Purity::Pure, |a, _| gcd_lcm(a, true))?;
    define(conn, state, "width_bucket", 4, Purity::Pure, width_bucket)?;
    for name in ["greatest", "least"] {
        let greatest = name == "greatest";
        define(
            conn,
            state,
            name,
            -1,
            Purity::Pure,
            if greatest {
                |a, _| extreme(a, true)
            } else {
                |a, _| extreme(a, false)
            },
        )?;
    }
    define(conn, state, "factorial", 1, Purity::Pure, factorial)?;
    define(conn, state, "random", 0, Purity::Volatile, |_, _| random())?;
    Ok(())
}

/// The result type of a function of this file.
pub(super) fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    let first = args.first().copied().flatten();
    let kind = |t: Option<PgType>| t.map(PgType::base);
    let numeric_if_any = || {
        if args.iter().any(|t| kind(*t) == Some(Base::Numeric)) {
            PgType::NUMERIC
        } else {
            PgType::FLOAT8
        }
    };
    Some(match name {
        "round" | "trunc" | "ceil" | "ceiling" | "floor" | "sign" | "sqrt" | "exp" | "ln" | "log10" => {
            match (kind(first), args.len()) {
                (_, 2) => PgType::NUMERIC,
                (Some(Base::Numeric), _) => PgType::NUMERIC,
                _ => PgType::FLOAT8,
            }
        }
        "log" if args.len() == 2 => PgType::NUMERIC,
        "log" => match kind(first) {
            Some(Base::Numeric) => PgType::NUMERIC,
            _ => PgType::FLOAT8,
        },
        "power" | "pow" => numeric_if_any(),
        "abs" => match kind(first) {
            Some(Base::Int2 | Base::Int4 | Base::Int8 | Base::Numeric | Base::Float4 | Base::Float8) => first?,
            _ => return None,
        },
        "mod" | "gcd" | "lcm" => {
            if args.iter().all(|t| t.is_some_and(PgType::is_integer)) {
                let int8 = args.iter().any(|t| kind(*t) == Some(Base::Int8));
                if int8 {
                    PgType::INT8
                } else {
                    PgType::INT4
                }
            } else {
                PgType::NUMERIC
            }
        }
        "div" | "factorial" => PgType::NUMERIC,
        "cbrt" | "pi" | "degrees" | "radians" | "sin" | "cos" | "tan" | "cot" | "asin" | "acos" | "atan" | "atan2"
        | "random" => PgType::FLOAT8,
        "width_bucket" => PgType::INT4,
        "greatest" | "least" => {
            let known: Vec<PgType> = args.iter().flatten().copied().collect();
            if known.iter().any(|t| t.base() == Base::Numeric) && known.iter().all(|t| t.is_numeric()) {
                PgType::NUMERIC
            } else if known.iter().any(|t| matches!(t.base(), Base::Float4 | Base::Float8))
                && known.iter().all(|t| t.is_numeric())
            {
                PgType::FLOAT8
            } else {
                return known.first().copied();
            }
        }
        _ => return None,
    })
}

fn round_like(a: &Args<'_, '_>, mode: Rounding) -> Result<Value, PgError> {
    let Some(x) = num(a, 0)? else {
        return Ok(Value::Null);
    };
    if a.len() == 2 {
        let Some(digits) = a.int(1)? else {
            return Ok(Value::Null);
        };
        let b = as_big(&x)?;
        let digits = digits.clamp(-(INTEGER_DIGITS_MAX as i64), MAX_DISPLAY_SCALE * 16);
        return Ok(dec(b.round_to(digits, mode)));
    }
    match x {
        Num::Dec(b) => Ok(dec(b.round_to(0, mode))),
        other => {
            let f = as_f64(&other);
            Ok(Value::Real(match mode {
                // PostgreSQL's dround is rint: half to even.
                Rounding::HalfAway => f.round_ties_even(),
                Rounding::Trunc => f.trunc(),
                Rounding::Ceil => f.ceil(),
                Rounding::Floor => f.floor(),
            }))
        }
    }
}

fn abs(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    Ok(match num(a, 0)? {
        None => Value::Null,
        Some(Num::Int(i)) => {
            let limit = match int_type_name(a, 0) {
                "smallint" => i64::from(i16::MAX),
                "integer" => i64::from(i32::MAX),
                _ => i64::MAX,
            };
            match i.checked_abs().filter(|v| *v <= limit) {
                Some(v) => Value::Integer(v),
                None => return Err(PgError::out_of_range(int_type_name(a, 0))),
            }
        }
        Some(Num::Float(f)) => Value::Real(f.abs()),
        Some(Num::Dec(b)) => dec(Big {
            m: BigInt::from(b.m.magnitude().clone()),
            scale: b.scale,
        }),
    })
}

fn sign(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    Ok(match num(a, 0)? {
        None => Value::Null,
        Some(Num::Dec(b)) => Value::Text(
            match b.m.sign() {
                Sign::Minus => "-1",
                Sign::NoSign => "0",
                Sign::Plus => "1",
            }
            .to_owned(),
        ),
        Some(other) => {
            let f = as_f64(&other);
            Value::Real(if f > 0.0 {
                1.0
            } else if f < 0.0 {
                -1.0
            } else {
                0.0
            })
        }
    })
}

fn modulo(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(x), Some(y)) = (num(a, 0)?, num(a, 1)?) else {
        return Ok(Value::Null);
    };
    if let (Num::Int(x), Num::Int(y)) = (&x, &y) {
        if *y == 0 {
            return Err(PgError::new(DIVISION_BY_ZERO, "division by zero"));
        }
        // i64::MIN % -1 overflows in Rust; PostgreSQL answers 0.
        return Ok(Value::Integer(x.checked_rem(*y).unwrap_or(0)));
    }
    let (x, y) = (as_big(&x)?, as_big(&y)?);
    if y.is_zero() {
        return Err(PgError::new(DIVISION_BY_ZERO, "division by zero"));
    }
    let scale = x.scale.max(y.scale);
    let (n, d) = (x.at_scale(scale), y.at_scale(scale));
    Ok(dec(Big {
        m: &n - (&n / &d) * &d,
        scale,
    }))
}

fn div(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(x), Some(y)) = (num(a, 0)?, num(a, 1)?) else {
        return Ok(Value::Null);
    };
    let (x, y) = (as_big(&x)?, as_big(&y)?);
    if y.is_zero() {
        return Err(PgError::new(DIVISION_BY_ZERO, "division by zero"));
    }
    let scale = x.scale.max(y.scale);
    Ok(dec(Big {
        m: x.at_scale(scale) / y.at_scale(scale),
        scale: 0,
    }))
}

fn float1(a: &Args<'_, '_>, f: fn(f64) -> f64) -> Result<Value, PgError> {
    let Some(x) = num(a, 0)? else {
        return Ok(Value::Null);
    };
    let x = as_f64(&x);
    let result = f(x);
    if result.is_infinite() && x.is_finite() {
        return Err(PgError::new(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow"));
    }
    Ok(crate::value::float_value(result))
}

/// glibc's `cbrt` (what PostgreSQL calls on Linux), step for step: Rust's own `cbrt` differs from it in the
/// last bit for some inputs (`cbrt(2)`).
// The polynomial's constants are written as glibc writes them, so the rounding is glibc's.
#[allow(clippy::excessive_precision)]
fn glibc_cbrt(x: f64) -> f64 {
    const CBRT2: f64 = 1.259_921_049_894_873_2;
    const SQR_CBRT2: f64 = 1.587_401_051_968_199_5;
    const FACTOR: [f64; 5] = [1.0 / SQR_CBRT2, 1.0 / CBRT2, 1.0, CBRT2, SQR_CBRT2];
    if x == 0.0 || !x.is_finite() {
        return x + x;
    }
    let (xm, xe) = frexp(x.abs());
    let u = 0.354_895_765_043_919_86
        + (1.508_191_937_815_849
            + (-2.114_994_941_673_712_9
                + (2.446_931_225_635_344_3
                    + (-1.834_692_774_836_130_9 + (0.784_932_344_976_639_3 - 0.145_263_899_385_486_38 * xm) * xm)
                        * xm)
                    * xm)
                * xm)
            * xm;
    let t2 = u * u * u;
    let ym = u * (t2 + 2.0 * xm) / (2.0 * t2 + xm) * FACTOR[(2 + xe % 3) as usize];
    let ym = if x > 0.0 { ym } else { -ym };
    ym * 2f64.powi(xe / 3)
}

/// C's `frexp` for finite non-zero values: `x = m · 2^e`, `m` in [0.5, 1).
fn frexp(x: f64) -> (f64, i32) {
    let (x, bias) = if x.abs() < f64::MIN_POSITIVE {
        (x * 2f64.powi(54), -54)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32 - 1022;
    let mantissa = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (mantissa, exponent + bias)
}

fn inverse_trig(a: &Args<'_, '_>, f: fn(f64) -> f64) -> Result<Value, PgError> {
    let Some(x) = num(a, 0)? else {
        return Ok(Value::Null);
    };
    let x = as_f64(&x);
    if !x.is_nan() && !(-1.0..=1.0).contains(&x) {
        return Err(PgError::new(NUMERIC_VALUE_OUT_OF_RANGE, "input is out of range"));
    }
    Ok(crate::value::float_value(f(x)))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, check_errors, one};

    #[test]
    fn rounding_follows_the_argument_type() {
        check(&[
            ("round(2.345, 2)", Some("2.35")),
            ("round(-2.5)", Some("-3")),
            ("round(-2.5::float8)", Some("-2")),
            ("round(2.5::float8)", Some("2")),
            ("round(3.5::float8)", Some("4")),
            ("round(5)", Some("5")),
            ("trunc(-2.7)", Some("-2")),
            ("trunc(2.789, 2)", Some("2.78")),
            ("trunc(2.789::float8)", Some("2")),
            ("round(1234.5678, -2)", Some("1200")),
            ("trunc(1234.5678, -2)", Some("1200")),
            ("round(2.3, 4)", Some("2.3000")),
            ("ceil(-2.5)", Some("-2")),
            ("floor(-2.5)", Some("-3")),
            ("ceil(2.5::float8)", Some("3")),
            ("floor(-2.5::float8)", Some("-3")),
            ("ceil(-0.5)", Some("0")),
            ("round(1e20::float8)", Some("1e+20")),
            ("round('12345678901234567890.5'::numeric)", Some("12345678901234567891")),
            ("round(NULL::numeric, 2)", None),
        ]);
    }

    #[test]
    fn integer_and_numeric_arithmetic() {
        check(&[
            ("mod(-7, 3)", Some("-1")),
            ("mod(7.5, 2)", Some("1.5")),
            ("div(-7.5, 2)", Some("-3")),
            ("div(7, 2)", Some("3")),
            ("abs('-5.50'::numeric)", Some("5.50")),
            ("abs(-2::float8)", Some("2")),
            ("sign(-5)", Some("-1")),
            ("sign(5.5)", Some("1")),
            ("sign(0.0)", Some("0")),
            ("gcd(12, 18)", Some("6")),
            ("gcd(-12, 18)", Some("6")),
            ("lcm(4, 6)", Some("12")),
            ("factorial(5)", Some("120")),
            ("factorial(20)", Some("2432902008176640000")),
            ("greatest(3, NULL, 5)", Some("5")),
            ("greatest(1, 2.5)", Some("2.5")),
            ("least('b', 'a', NULL)", Some("a")),
            ("greatest(NULL::int, NULL)", None),
            ("width_bucket(5.35, 0.024, 10.06, 5)", Some("3")),
            ("width_bucket(5, 0, 10, 5)", Some("3")),
        ]);
        check_errors(&[
            ("mod(5, 0)", "22012"),
            ("div(5, 0)", "22012"),
            ("mod(5.5, 0)", "22012"),
            ("factorial(-1)", "22003"),
            ("width_bucket(5, 0, 10, 0)", "2201G"),
            ("gcd('-9223372036854775808'::bigint, 0)", "22003"),
            ("lcm(9223372036854775807, 2)", "22003"),
            ("abs('-9223372036854775808'::bigint)", "22003"),
        ]);
    }

    #[test]
    fn transcendental_functions_at_postgres_scales() {
        check(&[
            ("sqrt(2)", Some("1.4142135623730951")),
            ("sqrt(2.0)", Some("1.414213562373095")),
            ("sqrt(16)", Some("4")),
            ("sqrt(16.0)", Some("4.000000000000000")),
            ("sqrt(0.0001)", Some("0.01000000000000000")),
            ("sqrt(123456789.123)", Some("11111.11106609056")),
            ("exp(1.0)", Some("2.7182818284590452")),
            ("exp(1)", Some("2.718281828459045")),
            ("exp(2.5)", Some("12.182493960703473")),
            ("exp(0)", Some("1")),
            ("exp(1.5::float8)", Some("4.4816890703380645")),
            ("ln(2.0)", Some("0.6931471805599453")),
            ("ln(2)", Some("0.6931471805599453")),
            ("ln(10)", Some("2.302585092994046")),
            ("ln(0.5)", Some("-0.6931471805599453")),
            ("log(2, 8)", Some("3.0000000000000000")),
            ("log(2.0, 8.0)", Some("3.0000000000000000")),
            ("log10(1000)", Some("3")),
            ("log(100)", Some("2")),
            ("log(1000.0)", Some("3.0000000000000000")),
            ("power(2, 3)", Some("8")),
            ("power(2.0, 3)", Some("8.0000000000000000")),
            ("power(2, 0.5)", Some("1.4142135623730950")),
            ("power(2.5, 2)", Some("6.2500000000000000")),
            ("power(2.0, -2)", Some("0.2500000000000000")),
            ("2 ^ 10", Some("1024")),
            ("2.0 ^ 0.5", Some("1.4142135623730950")),
            ("cbrt(27)", Some("3.0000000000000004")),
            ("cbrt(2)", Some("1.2599210498948734")),
            ("cbrt(3)", Some("1.4422495703074083")),
            ("cbrt(10)", Some("2.1544346900318834")),
            ("cbrt(-2)", Some("-1.2599210498948734")),
            ("cbrt(0.5)", Some("0.7937005259840998")),
        ]);
        check_errors(&[
            ("sqrt(-1)", "2201F"),
            ("sqrt(-1.0)", "2201F"),
            ("ln(0)", "2201E"),
            ("ln(-1.0)", "2201E"),
            ("log(0.0)", "2201E"),
            ("power(0, -1)", "2201F"),
            ("power(0.0, -1)", "2201F"),
            ("power(-8.0, 0.5)", "2201F"),
            ("power(-8, 1.0/3)", "2201F"),
            ("exp(1000)", "22003"),
        ]);
        let big = one("SELECT exp('1000.0'::numeric)").expect("a value");
        assert_eq!(big.len(), 437);
        assert!(
            big.starts_with("197007111401704699388887935224332312531693798532384578995280"),
            "{big}"
        );
        assert!(big.ends_with("9509050047074217568.2"), "{big}");
        check(&[
            ("exp(-10.0)", Some("0.00004539992976248485")),
            ("exp(0.001)", Some("1.0010005001667083")),
            ("ln(1.0001)", Some("0.00009999500033330834")),
            ("ln(1e100)", Some("230.25850929940457")),
            ("log(1.5, 100)", Some("11.3577471745351456")),
            ("power(1.0001, 10000.5)", Some("2.7182818307240536")),
            ("power(10.0, 20)", Some("100000000000000000000.0000000000000000")),
            ("power(0.5, 30)", Some("0.0000000009313226")),
            ("power(2.0, 0)", Some("1.0000000000000000")),
            ("sqrt(0.0)", Some("0.000000000000000")),
            ("ln(123456789012345678901234567890.5)", Some("66.985688719142977")),
            ("power(2, -3.5)", Some("0.08838834764831844")),
        ]);
    }

    #[test]
    fn trigonometry_in_doubles() {
        check(&[
            ("degrees(1)", Some("57.29577951308232")),
            ("radians(180)", Some("3.141592653589793")),
            ("sin(1)", Some("0.8414709848078965")),
            ("cos(1)", Some("0.5403023058681398")),
            ("tan(1)", Some("1.5574077246549023")),
            ("asin(1)", Some("1.5707963267948966")),
            ("acos(0)", Some("1.5707963267948966")),
            ("atan(1)", Some("0.7853981633974483")),
            ("atan2(1, 1)", Some("0.7853981633974483")),
            ("pi()", Some("3.141592653589793")),
        ]);
        check_errors(&[("asin(2)", "22003")]);
        let r: f64 = one("SELECT random()").expect("a value").parse().expect("a double");
        assert!((0.0..1.0).contains(&r), "{r}");
    }
}
