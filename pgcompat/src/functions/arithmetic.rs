//! Checked integer arithmetic, `/` and `%` with PostgreSQL's rules, and exact numeric multiplication,
//! division, `sum` and `avg` (PostgreSQL's result scales).

use rusqlite::functions::{Aggregate, Context, WindowAggregate};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use super::{flags_pure, owned, raise};
use crate::error::{PgError, DIVISION_BY_ZERO, NUMERIC_VALUE_OUT_OF_RANGE};
use crate::value::{self, numeric::Decimal};

pub(super) fn install_arithmetic(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function("pg_int", 2, flags_pure(), |ctx| {
        let bits: i64 = ctx.get(1)?;
        let value = owned(ctx.get_raw(0));
        let type_name = match bits {
            16 => "smallint",
            32 => "integer",
            _ => "bigint",
        };
        match value {
            Value::Null => Ok(Value::Null),
            Value::Integer(i) => {
                let fits = match bits {
                    16 => i16::try_from(i).is_ok(),
                    32 => i32::try_from(i).is_ok(),
                    _ => true,
                };
                if fits {
                    Ok(Value::Integer(i))
                } else {
                    Err(raise(PgError::out_of_range(type_name)))
                }
            }
            // SQLite made a float of an integer operation that overflowed 64 bits.
            Value::Real(_) => Err(raise(PgError::out_of_range(type_name))),
            other => Ok(other),
        }
    })?;
    for (name, modulo) in [("pg_div", false), ("pg_mod", true)] {
        conn.create_scalar_function(name, 3, flags_pure(), move |ctx| {
            let a = owned(ctx.get_raw(0));
            let b = owned(ctx.get_raw(1));
            divide(a, b, modulo).map_err(raise)
        })?;
    }
    for (name, negate) in [("pg_numeric_add", false), ("pg_numeric_sub", true)] {
        conn.create_scalar_function(name, 2, flags_pure(), move |ctx| {
            let (Some(a), Some(b)) = (decimal_of(ctx.get_raw(0))?, decimal_of(ctx.get_raw(1))?) else {
                return Ok(Value::Null);
            };
            let mut b = b;
            if negate && !b.is_zero() {
                b.negative = !b.negative;
            }
            Ok(Value::Text(a.add(&b).to_text()))
        })?;
    }
    for n in [3, 4] {
        // pg_float_arith(a, op, b[, 'float4']): a real result is computed and rounded as a real.
        conn.create_scalar_function("pg_float_arith", n, flags_pure(), move |ctx| {
            let (a, b) = (ctx.get_raw(0), ctx.get_raw(2));
            if matches!(a, ValueRef::Null) || matches!(b, ValueRef::Null) {
                return Ok(Value::Null);
            }
            let op: String = ctx.get(1)?;
            let real = n == 4 && ctx.get::<String>(3)? == "float4";
            let result = float_arith(float_of(a)?, &op, float_of(b)?).map_err(raise)?;
            match result {
                Value::Real(f) if real => {
                    let single = f as f32;
                    if single.is_infinite() && f.is_finite() {
                        return Err(raise(PgError::new(
                            NUMERIC_VALUE_OUT_OF_RANGE,
                            "value out of range: overflow",
                        )));
                    }
                    Ok(Value::Real(f64::from(single)))
                }
                other => Ok(other),
            }
        })?;
    }
    conn.create_scalar_function("pg_numeric_cmp", 2, flags_pure(), |ctx| {
        compare_numbers(ctx.get_raw(0), ctx.get_raw(1))
    })?;
    conn.create_scalar_function("pg_numeric_mul", 2, flags_pure(), |ctx| {
        let (Some(a), Some(b)) = (decimal_of(ctx.get_raw(0))?, decimal_of(ctx.get_raw(1))?) else {
            return Ok(Value::Null);
        };
        Ok(Value::Text(multiply_decimal(&a, &b).to_text()))
    })?;
    conn.create_scalar_function("pg_numeric_div", 2, flags_pure(), |ctx| {
        let (Some(a), Some(b)) = (decimal_of(ctx.get_raw(0))?, decimal_of(ctx.get_raw(1))?) else {
            return Ok(Value::Null);
        };
        divide_decimals(&a, &b).map(|d| Value::Text(d.to_text())).map_err(raise)
    })?;
    // Window functions too (`sum(x) OVER (…)`): a value leaves the frame by its inverse.
    conn.create_window_function("pg_numeric_sum", 1, flags_pure(), NumericSum { average: false })?;
    conn.create_window_function("pg_numeric_avg", 1, flags_pure(), NumericSum { average: true })?;
    Ok(())
}

/// `pg_numeric_cmp(a, b)`: -1, 0 or 1 as `a` is less than, equal to or greater than `b` by value, whatever
/// their storage (an integer, a double, a numeric's exact text); NULL when either is. A double compared
/// with anything compares as doubles (PostgreSQL casts a numeric to double precision there); `NaN` is
/// greater than every number and equal to itself, as in PostgreSQL.
fn compare_numbers(a: ValueRef<'_>, b: ValueRef<'_>) -> rusqlite::Result<Option<i64>> {
    let ordering = match (a, b) {
        (ValueRef::Null, _) | (_, ValueRef::Null) => return Ok(None),
        (ValueRef::Integer(x), ValueRef::Integer(y)) => x.cmp(&y),
        (ValueRef::Real(_), _) | (_, ValueRef::Real(_)) => {
            let (x, y) = (float_of(a)?, float_of(b)?);
            match (x.is_nan(), y.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                (false, false) => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
            }
        }
        _ => {
            // numeric `NaN` (its text) is greater than every number and equal to itself.
            let is_nan = |v: ValueRef<'_>| matches!(v, ValueRef::Text(t) if t.eq_ignore_ascii_case(b"nan"));
            match (is_nan(a), is_nan(b)) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                (false, false) => {
                    let (Some(x), Some(y)) = (decimal_of(a)?, decimal_of(b)?) else {
                        return Ok(None);
                    };
                    x.cmp_value(&y)
                }
            }
        }
    };
    Ok(Some(ordering as i64))
}

/// `double precision` `+ - * /` with PostgreSQL's checks: a finite result out of range is 22003 (overflow,
/// or underflow to zero of a product or quotient of non-zeros), division by zero 22012.
fn float_arith(x: f64, op: &str, y: f64) -> Result<Value, PgError> {
    let result = match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "/" => {
            if y == 0.0 {
                return Err(PgError::new(DIVISION_BY_ZERO, "division by zero"));
            }
            x / y
        }
        other => {
            return Err(PgError::new(
                crate::error::INTERNAL_ERROR,
                format!("pg_float_arith: unknown operator {other}"),
            ))
        }
    };
    if result.is_infinite() && x.is_finite() && y.is_finite() {
        return Err(PgError::new(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow"));
    }
    if result == 0.0 && matches!(op, "*" | "/") && x != 0.0 && y.is_finite() && (op == "/" || y != 0.0) {
        return Err(PgError::new(
            NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: underflow",
        ));
    }
    Ok(value::float_value(result))
}

/// A number as a double (`NaN` and the infinities read from their text forms).
fn float_of(value: ValueRef<'_>) -> rusqlite::Result<f64> {
    match value {
        ValueRef::Integer(i) => Ok(i as f64),
        ValueRef::Real(f) => Ok(f),
        ValueRef::Text(t) => {
            let text = String::from_utf8_lossy(t);
            value::parse_float8(&text).map_err(raise)
        }
        ValueRef::Null | ValueRef::Blob(_) => Err(raise(PgError::invalid_input("double precision", "blob"))),
    }
}

fn decimal_of(value: ValueRef<'_>) -> rusqlite::Result<Option<Decimal>> {
    let text = match value {
        ValueRef::Null => return Ok(None),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => value::format_float8(f),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(_) => return Err(raise(PgError::invalid_input("numeric", "blob"))),
    };
    Decimal::parse(&text)
        .map(Some)
        .ok_or_else(|| raise(PgError::invalid_input("numeric", &text)))
}

/// `/` and `%` with PostgreSQL's rules: division by zero is 22012; integers divide truncating, and
/// `i64::MIN / -1` is out of range.
fn divide(a: Value, b: Value, modulo: bool) -> Result<Value, PgError> {
    let zero = || PgError::new(DIVISION_BY_ZERO, "division by zero");
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => Ok(Value::Null),
        (Value::Integer(x), Value::Integer(y)) => {
            if y == 0 {
                return Err(zero());
            }
            let result = if modulo { x.checked_rem(y) } else { x.checked_div(y) };
            result
                .map(Value::Integer)
                .ok_or_else(|| PgError::new(NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range"))
        }
        (a, b) => {
            let as_f64 = |v: &Value| -> Result<f64, PgError> {
                match v {
                    Value::Integer(i) => Ok(*i as f64),
                    Value::Real(f) => Ok(*f),
                    Value::Text(t) => t.trim().parse().map_err(|_| PgError::invalid_input("numeric", t)),
                    Value::Blob(_) => Err(PgError::invalid_input("numeric", "blob")),
                    Value::Null => Ok(0.0),
                }
            };
            let (x, y) = (as_f64(&a)?, as_f64(&b)?);
            if y == 0.0 {
                return Err(zero());
            }
            Ok(crate::value::float_value(if modulo { x % y } else { x / y }))
        }
    }
}

/// Exact `sum`/`avg` of numeric values (PostgreSQL's `avg` of integers is numeric too), as aggregates and
/// window functions.
struct NumericSum {
    average: bool,
}

/// A running numeric sum: the values in it, and how many of them have each scale (the result's scale is
/// the largest one present, as PostgreSQL's is when values leave a window frame).
#[derive(Default)]
struct SumState {
    sum: Option<Decimal>,
    count: u64,
    scales: std::collections::BTreeMap<usize, u64>,
}

impl NumericSum {
    fn result(&self, state: &SumState) -> Value {
        let (Some(sum), Some((&scale, _))) = (&state.sum, state.scales.last_key_value()) else {
            return Value::Null;
        };
        if state.count == 0 {
            return Value::Null;
        }
        let sum = sum.rescale(scale);
        if !self.average {
            return Value::Text(sum.to_text());
        }
        // PostgreSQL's division scale: 16 significant digits less the quotient's weight in base-10000
        // digits, never fewer than the dividend's.
        let count_decimal = Decimal::parse(&state.count.to_string()).expect("a count is a number");
        let scale = division_scale(&sum, &count_decimal);
        Value::Text(divide_decimal(&sum, state.count, scale).to_text())
    }
}

impl Aggregate<SumState, Value> for NumericSum {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<SumState> {
        Ok(SumState::default())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut SumState) -> rusqlite::Result<()> {
        if let Some(d) = decimal_of(ctx.get_raw(0))? {
            *acc.scales.entry(d.frac.len()).or_default() += 1;
            acc.sum = Some(match acc.sum.take() {
                Some(sum) => sum.add(&d),
                None => d,
            });
            acc.count += 1;
        }
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<SumState>) -> rusqlite::Result<Value> {
        Ok(acc.map_or(Value::Null, |state| self.result(&state)))
    }
}

impl WindowAggregate<SumState, Value> for NumericSum {
    fn value(&self, acc: Option<&mut SumState>) -> rusqlite::Result<Value> {
        Ok(acc.map_or(Value::Null, |state| self.result(state)))
    }

    fn inverse(&self, ctx: &mut Context<'_>, acc: &mut SumState) -> rusqlite::Result<()> {
        let Some(mut d) = decimal_of(ctx.get_raw(0))? else {
            return Ok(());
        };
        if let Some(n) = acc.scales.get_mut(&d.frac.len()) {
            *n -= 1;
            if *n == 0 {
                acc.scales.remove(&d.frac.len());
            }
        }
        if !d.is_zero() {
            d.negative = !d.negative;
        }
        acc.sum = acc.sum.take().map(|sum| sum.add(&d));
        acc.count = acc.count.saturating_sub(1);
        Ok(())
    }
}

/// `a × b`, exact, at the sum of the scales (PostgreSQL's rule).
fn multiply_decimal(a: &Decimal, b: &Decimal) -> Decimal {
    let x: Vec<u32> = format!("{}{}", a.int, a.frac)
        .bytes()
        .rev()
        .map(|c| u32::from(c - b'0'))
        .collect();
    let y: Vec<u32> = format!("{}{}", b.int, b.frac)
        .bytes()
        .rev()
        .map(|c| u32::from(c - b'0'))
        .collect();
    let mut product = vec![0u32; x.len() + y.len() + 1];
    for (i, dx) in x.iter().enumerate() {
        let mut carry = 0u32;
        for (j, dy) in y.iter().enumerate() {
            let cell = product[i + j] + dx * dy + carry;
            product[i + j] = cell % 10;
            carry = cell / 10;
        }
        let mut k = i + y.len();
        while carry > 0 {
            let cell = product[k] + carry;
            product[k] = cell % 10;
            carry = cell / 10;
            k += 1;
        }
    }
    let digits: String = product.iter().rev().map(|d| char::from(b'0' + *d as u8)).collect();
    let scale = a.frac.len() + b.frac.len();
    let (int, frac) = digits.split_at(digits.len() - scale);
    let mut out = Decimal {
        negative: a.negative != b.negative,
        int: int.trim_start_matches('0').to_owned(),
        frac: frac.to_owned(),
    };
    if out.is_zero() {
        out.negative = false;
    }
    out
}

/// `a ÷ b` at PostgreSQL's division scale (16 significant digits less the quotient's weight, at least the
/// operands' scales), rounded half away from zero; 22012 for a zero divisor.
fn divide_decimals(a: &Decimal, b: &Decimal) -> Result<Decimal, PgError> {
    if b.is_zero() {
        return Err(PgError::new(DIVISION_BY_ZERO, "division by zero"));
    }
    let scale = division_scale(a, b);
    // Integers: a·10^(scale+1+sb) / b·10^sa … as digit strings, by long division.
    let b_digits = format!("{}{}", b.int, b.frac).trim_start_matches('0').to_owned();
    let shift = scale + 1 + b.frac.len();
    let a_digits = format!("{}{}{}", a.int, a.frac, "0".repeat(shift.saturating_sub(a.frac.len())));
    let quotient = long_divide(&a_digits, &b_digits);
    // The quotient carries scale + 1 digits after the point (a's fraction was padded to `shift`).
    let frac_len = scale + 1;
    let padded = format!("{quotient:0>width$}", width = frac_len + 1);
    let (int, frac) = padded.split_at(padded.len() - frac_len);
    let exact = Decimal {
        negative: a.negative != b.negative,
        int: int.trim_start_matches('0').to_owned(),
        frac: frac.to_owned(),
    };
    let mut out = exact.rescale(scale);
    if out.is_zero() {
        out.negative = false;
    }
    Ok(out)
}

/// Quotient of two non-negative integers in decimal digits (`divisor` without leading zeros, not zero).
fn long_divide(dividend: &str, divisor: &str) -> String {
    assert!(!divisor.is_empty(), "division by zero digits");
    let mut quotient = String::with_capacity(dividend.len());
    let mut remainder = String::new();
    let greater_or_equal = |a: &str, b: &str| a.len() > b.len() || (a.len() == b.len() && a >= b);
    for c in dividend.chars() {
        remainder.push(c);
        let trimmed = remainder.trim_start_matches('0').to_owned();
        remainder = trimmed;
        let mut digit = 0u8;
        while greater_or_equal(&remainder, divisor) {
            remainder = subtract_digits(&remainder, divisor);
            digit += 1;
        }
        quotient.push(char::from(b'0' + digit));
    }
    let trimmed = quotient.trim_start_matches('0');
    if trimmed.is_empty() {
        "0".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// `a − b` for digit strings with `a ≥ b`, no leading zeros in the result.
fn subtract_digits(a: &str, b: &str) -> String {
    value::numeric::sub_digits(a, b).trim_start_matches('0').to_owned()
}

/// PostgreSQL's scale of `a / b` (`select_div_scale`): 16 significant digits less the quotient's weight,
/// at least either operand's scale, at most 1000.
fn division_scale(a: &Decimal, b: &Decimal) -> usize {
    let mut quotient_weight = base_10000_weight(a) - base_10000_weight(b);
    if first_group(a) <= first_group(b) {
        quotient_weight -= 1;
    }
    (16 - quotient_weight * 4)
        .max(a.frac.len() as i64)
        .max(b.frac.len() as i64)
        .clamp(0, 1000) as usize
}

/// A decimal's leading base-10000 digit (its groups aligned on the point).
fn first_group(d: &Decimal) -> u32 {
    let int_pad = (4 - d.int.len() % 4) % 4;
    let frac_pad = (4 - d.frac.len() % 4) % 4;
    let digits = format!("{}{}{}{}", "0".repeat(int_pad), d.int, d.frac, "0".repeat(frac_pad));
    digits
        .as_bytes()
        .chunks(4)
        .map(|c| {
            std::str::from_utf8(c)
                .ok()
                .and_then(|t| t.parse::<u32>().ok())
                .unwrap_or(0)
        })
        .find(|g| *g != 0)
        .unwrap_or(0)
}

/// The weight of a decimal's leading base-10000 digit (PostgreSQL's `weight`).
fn base_10000_weight(d: &Decimal) -> i64 {
    if !d.int.is_empty() {
        return (d.int.len() as i64 - 1) / 4;
    }
    let zeros = d.frac.bytes().take_while(|b| *b == b'0').count() as i64;
    if zeros == d.frac.len() as i64 {
        return 0;
    }
    -(zeros / 4) - 1
}

/// `d / n` rounded to `scale` digits, by long division on the digits.
fn divide_decimal(d: &Decimal, n: u64, scale: usize) -> Decimal {
    assert!(n > 0, "division of a sum by no rows");
    let extra = scale + 1 - d.frac.len().min(scale + 1);
    let digits = format!("{}{}{}", d.int, d.frac, "0".repeat(extra));
    let mut quotient = String::with_capacity(digits.len());
    let mut remainder: u128 = 0;
    for c in digits.bytes() {
        remainder = remainder * 10 + u128::from(c - b'0');
        quotient.push(char::from(b'0' + (remainder / u128::from(n)) as u8));
        remainder %= u128::from(n);
    }
    let frac_len = d.frac.len() + extra;
    let (int, frac) = quotient.split_at(quotient.len() - frac_len);
    let exact = Decimal {
        negative: d.negative,
        int: int.trim_start_matches('0').to_owned(),
        frac: frac.to_owned(),
    };
    exact.rescale(scale)
}
