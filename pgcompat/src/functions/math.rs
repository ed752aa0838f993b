//! Mathematical functions with PostgreSQL's types and errors: integer arguments that PostgreSQL sends to
//! `double precision` (`round(5)`, `sqrt(2)`) give doubles; numeric ones are exact, at PostgreSQL's result
//! scales (`sqrt(2.0)` has 15 digits after the point, `exp(1.0)` 16), computed in fixed point with guard
//! digits (`num-bigint`) and rounded half away from zero.

use std::sync::Arc;

use num_bigint::{BigInt, Sign};
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{define, Args, Purity};
use crate::error::{
    PgError, DIVISION_BY_ZERO, INVALID_ARGUMENT_FOR_LOG, INVALID_ARGUMENT_FOR_POWER, INVALID_ARGUMENT_FOR_WIDTH_BUCKET,
    NUMERIC_VALUE_OUT_OF_RANGE,
};
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

/// An exact decimal: `m / 10^scale`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Big {
    /// The digits, signed.
    pub(super) m: BigInt,
    /// Digits after the point.
    pub(super) scale: i64,
}

fn pow10(n: i64) -> BigInt {
    BigInt::from(10u8).pow(u32::try_from(n.max(0)).unwrap_or(0))
}

impl Big {
    fn from_decimal(d: &Decimal) -> Big {
        let digits = format!("{}{}", d.int, d.frac);
        let m = BigInt::parse_bytes(if digits.is_empty() { b"0" } else { digits.as_bytes() }, 10).unwrap_or_default();
        Big {
            m: if d.negative { -m } else { m },
            scale: d.frac.len() as i64,
        }
    }

    /// `a + b` at the larger scale.
    pub(super) fn add(&self, other: &Big) -> Big {
        let scale = self.scale.max(other.scale);
        Big {
            m: self.at_scale(scale) + other.at_scale(scale),
            scale,
        }
    }

    /// `a − b` at the larger scale.
    pub(super) fn sub(&self, other: &Big) -> Big {
        let scale = self.scale.max(other.scale);
        Big {
            m: self.at_scale(scale) - other.at_scale(scale),
            scale,
        }
    }

    /// `a · b`, exact.
    pub(super) fn mul(&self, other: &Big) -> Big {
        Big {
            m: &self.m * &other.m,
            scale: self.scale + other.scale,
        }
    }

    /// `a / b` rounded half away from zero to `rscale` digits (`b` not zero).
    pub(super) fn div(&self, other: &Big, rscale: i64) -> Big {
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
    pub(super) fn div_scale(&self, other: &Big) -> i64 {
        let (w1, d1) = self.first_group();
        let (w2, d2) = other.first_group();
        let mut qweight = w1 - w2;
        if d1 <= d2 {
            qweight -= 1;
        }
        clamp_scale((MIN_SIG_DIGITS - qweight * 4).max(self.scale).max(other.scale))
    }

    /// The base-10000 weight and value of the leading digit group (0, 0 for zero).
    fn first_group(&self) -> (i64, u32) {
        if self.is_zero() {
            return (0, 0);
        }
        let weight = self.pg_weight();
        let digits = self.m.magnitude().to_string();
        let lead = (self.decimal_weight() - 4 * weight + 1) as usize;
        (weight, digits[..lead.min(digits.len())].parse().unwrap_or(0))
    }

    /// An integer.
    pub(super) fn from_int(i: i64) -> Big {
        Big {
            m: BigInt::from(i),
            scale: 0,
        }
    }

    /// Numeric text; 22P02 if it is not a number.
    pub(super) fn parse(text: &str) -> Result<Big, PgError> {
        Decimal::parse(text)
            .map(|d| Big::from_decimal(&d))
            .ok_or_else(|| PgError::invalid_input("numeric", text))
    }

    /// The canonical numeric text.
    pub(super) fn to_text(&self) -> String {
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

    fn is_zero(&self) -> bool {
        self.m.sign() == Sign::NoSign
    }

    fn is_negative(&self) -> bool {
        self.m.sign() == Sign::Minus
    }

    fn is_integral(&self) -> bool {
        self.scale <= 0 || (&self.m % pow10(self.scale)).sign() == Sign::NoSign
    }

    /// The mantissa at a larger or equal scale.
    fn at_scale(&self, scale: i64) -> BigInt {
        if scale >= self.scale {
            &self.m * pow10(scale - self.scale)
        } else {
            &self.m / pow10(self.scale - scale)
        }
    }

    /// Rounded (by `mode`) to `scale` digits after the point; a negative scale rounds to tens, hundreds…
    /// and leaves scale 0.
    fn round_to(&self, scale: i64, mode: Rounding) -> Big {
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

    fn to_f64(&self) -> f64 {
        self.to_text().parse().unwrap_or(f64::NAN)
    }

    /// The decimal exponent of the leading digit (`floor(log10(|x|))`), for non-zero values.
    fn decimal_weight(&self) -> i64 {
        self.m.magnitude().to_string().len() as i64 - 1 - self.scale
    }

    /// PostgreSQL's base-10000 weight of the leading digit group.
    fn pg_weight(&self) -> i64 {
        self.decimal_weight().div_euclid(4)
    }

    fn cmp_value(&self, other: &Big) -> std::cmp::Ordering {
        let scale = self.scale.max(other.scale);
        self.at_scale(scale).cmp(&other.at_scale(scale))
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Rounding {
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
fn round_div(n: &BigInt, d: &BigInt, mode: Rounding) -> BigInt {
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
    Ok(Value::Real(result))
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
    Ok(Value::Real(result))
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
    Ok(Value::Real(f(x)))
}

fn clamp_scale(scale: i64) -> i64 {
    scale.clamp(0, MAX_DISPLAY_SCALE)
}

fn sqrt(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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
            Ok(Value::Real(x.sqrt()))
        }
    }
}

/// `sqrt(x)` of a non-negative `x`, rounded half away from zero to `rscale` digits.
pub(super) fn sqrt_at(x: &Big, rscale: i64) -> Big {
    // isqrt(m · 10^(2w − s)) = sqrt(x) · 10^w.
    let mut w = rscale + GUARD_DIGITS;
    if 2 * w < x.scale {
        w = (x.scale + 1) / 2;
    }
    let root = x.at_scale(2 * w).sqrt();
    Big { m: root, scale: w }.round_to(rscale, Rounding::HalfAway)
}

fn exp(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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
fn big_exp(x: &Big, rscale: i64) -> Result<Big, PgError> {
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
fn exp_fixed(x: &BigInt, w: i64) -> BigInt {
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
fn ln_fixed(x: &Big, w: i64) -> BigInt {
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
fn ln_near_one(y: BigInt, w: i64) -> BigInt {
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
fn ln_dweight(x: &Big) -> i64 {
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

fn check_log_argument(x: &Big) -> Result<(), PgError> {
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

fn ln_or_log10(a: &Args<'_, '_>, log10: bool) -> Result<Value, PgError> {
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
            Ok(Value::Real(if log10 { x.log10() } else { x.ln() }))
        }
    }
}

fn big_log(base: &Big, x: &Big) -> Result<Big, PgError> {
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

fn log_base(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(b), Some(x)) = (num(a, 0)?, num(a, 1)?) else {
        return Ok(Value::Null);
    };
    big_log(&as_big(&b)?, &as_big(&x)?).map(dec)
}

fn power(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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

fn big_power(x: &Big, y: &Big) -> Result<Big, PgError> {
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

fn gcd_lcm(a: &Args<'_, '_>, lcm: bool) -> Result<Value, PgError> {
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

fn gcd_u128(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn gcd_big(mut a: BigInt, mut b: BigInt) -> BigInt {
    while b.sign() != Sign::NoSign {
        let r = &a % &b;
        a = b;
        b = r;
    }
    a
}

fn width_bucket(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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

fn bucket_value(bucket: i64) -> Result<Value, PgError> {
    if bucket > i64::from(i32::MAX) {
        return Err(PgError::out_of_range("integer"));
    }
    Ok(Value::Integer(bucket))
}

/// `greatest`/`least`: NULLs ignored; numbers compared as numbers, everything else as its text.
fn extreme(a: &Args<'_, '_>, greatest: bool) -> Result<Value, PgError> {
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
                    _ => super::value_text(&value).cmp(&super::value_text(best_value)),
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

fn compare_nums(a: &Num, b: &Num) -> Result<std::cmp::Ordering, PgError> {
    Ok(match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(y),
        (Num::Dec(_), _) | (_, Num::Dec(_)) if !matches!(a, Num::Float(_)) && !matches!(b, Num::Float(_)) => {
            as_big(a)?.cmp_value(&as_big(b)?)
        }
        _ => as_f64(a).total_cmp(&as_f64(b)),
    })
}

fn factorial(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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
fn random() -> Result<Value, PgError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 8];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| PgError::new(crate::error::INTERNAL_ERROR, "could not generate random values"))?;
    let bits = u64::from_le_bytes(bytes) >> 11;
    Ok(Value::Real(bits as f64 / (1u64 << 53) as f64))
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
