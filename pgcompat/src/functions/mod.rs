//! The SQL functions the rewritten statements call, registered on a SQLite connection: casts and
//! assignments with PostgreSQL's checks, checked integer arithmetic and division, the session's functions
//! (`now()`, `version()`, …), date/time functions, case-sensitive `LIKE`, `ILIKE`, regular expressions,
//! arrays and jsonb operators, and the `pg_numeric` collation.
//!
//! A function raises a PostgreSQL error by returning a SQLite error whose message carries the SQLSTATE
//! ([`raise`]); [`error_of`] reads it back on the other side.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Unit};
use parking_lot::RwLock;
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

mod catalog;
mod extra;

pub(crate) use extra::{takes_types, typed_call, typed_expr};

use crate::error::{PgError, DIVISION_BY_ZERO, INVALID_PARAMETER_VALUE, NUMERIC_VALUE_OUT_OF_RANGE};
use crate::types::{Base, PgType};
use crate::value::{self, datetime, numeric::Decimal};

/// The prefix of a SQLite error message that carries a PostgreSQL error: `pgcompat:22012:division by zero`.
const ERROR_PREFIX: &str = "pgcompat:";

/// The version string `version()` reports: PostgreSQL 15 (so pg_dump 15 and drivers accept the server) and
/// what runs underneath.
pub const VERSION: &str = "PostgreSQL 15.0 (Cambium; SQLite engine) on x86_64-pc-linux-gnu, 64-bit";

/// A PostgreSQL error raised inside a SQL function.
pub fn raise(error: PgError) -> rusqlite::Error {
    rusqlite::Error::UserFunctionError(format!("{ERROR_PREFIX}{}:{}", error.code, error.message).into())
}

/// The PostgreSQL error a SQLite error message carries, if a function of this layer raised it.
pub fn error_of(message: &str) -> Option<PgError> {
    let at = message.find(ERROR_PREFIX)?;
    let rest = &message[at + ERROR_PREFIX.len()..];
    let (code, text) = rest.split_once(':')?;
    let code = crate::error::intern_code(code)?;
    Some(PgError::new(code, text))
}

/// What the session's functions read: the zone, the transaction's timestamp, who and where.
#[derive(Debug)]
pub struct SessionState {
    time_zone: RwLock<TimeZone>,
    /// The session's run-time parameters; `time_zone` follows their `TimeZone`.
    settings: parking_lot::Mutex<crate::settings::Settings>,
    /// The transaction timestamp (`now()`), microseconds since the Unix epoch.
    now_micros: AtomicI64,
    database: String,
    user: String,
    backend_pid: i32,
}

impl SessionState {
    /// A session's state; `now()` is the current time until a statement or transaction starts.
    pub fn new(database: &str, user: &str, backend_pid: i32) -> SessionState {
        SessionState {
            time_zone: RwLock::new(TimeZone::UTC),
            settings: parking_lot::Mutex::new(crate::settings::Settings::new()),
            now_micros: AtomicI64::new(Timestamp::now().as_microsecond()),
            database: database.to_owned(),
            user: user.to_owned(),
            backend_pid,
        }
    }

    /// The session's `TimeZone`.
    pub fn time_zone(&self) -> TimeZone {
        self.time_zone.read().clone()
    }

    /// Reads the session's run-time parameters.
    pub fn read_settings<R>(&self, read: impl FnOnce(&crate::settings::Settings) -> R) -> R {
        read(&self.settings.lock())
    }

    /// Changes the session's run-time parameters; the zone functions use follows `TimeZone`.
    pub fn update_settings<R>(&self, update: impl FnOnce(&mut crate::settings::Settings) -> R) -> R {
        let mut settings = self.settings.lock();
        let result = update(&mut settings);
        let zone = settings
            .raw(crate::settings::TIME_ZONE)
            .and_then(crate::settings::zone_of)
            .unwrap_or(TimeZone::UTC);
        drop(settings);
        *self.time_zone.write() = zone;
        result
    }

    /// Marks the start of a transaction: `now()` is this instant until the next one.
    pub fn start_transaction(&self) {
        self.now_micros
            .store(Timestamp::now().as_microsecond(), Ordering::SeqCst);
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_microsecond(self.now_micros.load(Ordering::SeqCst)).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

fn flags_pure() -> FunctionFlags {
    FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC | FunctionFlags::SQLITE_INNOCUOUS
}

fn flags_session() -> FunctionFlags {
    FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS
}

fn owned(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        // Text that is not UTF-8 (SQLite does not check) is kept, its bad bytes replaced.
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

fn type_arg(ctx: &Context<'_>, index: usize) -> rusqlite::Result<Option<PgType>> {
    let text: String = ctx.get(index)?;
    if text.is_empty() {
        return Ok(None);
    }
    PgType::from_catalog(&text).map(Some).ok_or_else(|| {
        raise(PgError::new(
            crate::error::UNDEFINED_OBJECT,
            format!("type \"{text}\" does not exist"),
        ))
    })
}

/// Registers every function and the `pg_numeric` collation on `conn`, reading `state` for the session's.
pub fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    conn.create_collation("pg_numeric", value::numeric::collate)?;
    install_casts(conn, state.clone())?;
    install_arithmetic(conn)?;
    install_session(conn, state.clone())?;
    install_strings(conn)?;
    install_datetime(conn, state.clone())?;
    install_arrays(conn, state.clone())?;
    extra::install(conn, state.clone())?;
    catalog::install(conn, state.clone())?;
    crate::settings::install_functions(conn, state)?;
    Ok(())
}

/// The result type of a function the layer registers, by name and argument types (`None` where unknown);
/// the translator's typer asks this for calls it has no rule of its own for.
pub fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    extra::result_type(name, args)
}

fn install_casts(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let cast_state = state.clone();
    conn.create_scalar_function("pg_cast", 3, flags_pure(), move |ctx| {
        let value = owned(ctx.get_raw(0));
        let Some(target) = type_arg(ctx, 1)? else {
            return Ok(value);
        };
        let source = type_arg(ctx, 2)?;
        cast(value, target, source, &cast_state.time_zone()).map_err(raise)
    })?;
    conn.create_scalar_function("pg_coerce", 2, flags_pure(), move |ctx| {
        let value = owned(ctx.get_raw(0));
        let Some(target) = type_arg(ctx, 1)? else {
            return Ok(value);
        };
        value::coerce(target, value, &state.time_zone()).map_err(raise)
    })?;
    Ok(())
}

/// An explicit cast (`x::type`, `CAST(x AS type)`): like an assignment, but a string cut to `varchar(n)`
/// silently, booleans and numbers as text the way PostgreSQL prints them, and date/time conversions
/// through the session's zone.
pub fn cast(value: Value, target: PgType, source: Option<PgType>, tz: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    if target.is_string() {
        let text = match (&value, source) {
            (Value::Integer(i), Some(s)) if s.base() == Base::Bool && !s.is_array() => {
                if *i != 0 { "true" } else { "false" }.to_owned()
            }
            (v, Some(s)) => value::output(s, v, tz).unwrap_or_default(),
            (Value::Real(f), None) => value::format_float8(*f),
            (v, None) => value::output(PgType::TEXT, v, tz).unwrap_or_default(),
        };
        let text = match target.modifier() {
            crate::types::Modifier::Length(n) if target.base() == Base::Varchar => {
                text.chars().take(n as usize).collect()
            }
            _ => text,
        };
        return value::coerce(target, Value::Text(text), tz);
    }
    match (source.map(|s| (s.base(), s.is_array())), target.base(), &value) {
        (Some((Base::Numeric, false)), Base::Int2 | Base::Int4 | Base::Int8, Value::Text(_) | Value::Real(_)) => {
            // numeric → integer rounds half away from zero.
            let text = match &value {
                Value::Real(f) => value::format_float8(*f),
                Value::Text(t) => t.clone(),
                _ => String::new(),
            };
            let d = Decimal::parse(&text).ok_or_else(|| PgError::invalid_input("numeric", &text))?;
            let rounded = d.rescale(0).to_text();
            value::coerce(target, Value::Text(rounded), tz)
        }
        (Some((Base::Timestamptz, false)), Base::Date | Base::Timestamp | Base::Time, Value::Text(text)) => {
            let ts = datetime::stored_timestamptz(text).ok_or_else(|| PgError::invalid_input("timestamptz", text))?;
            let local = tz.to_datetime(ts);
            value::coerce(target, Value::Text(datetime::format_timestamp(local)), tz)
        }
        (Some((Base::Timestamp | Base::Date, false)), Base::Timestamptz, Value::Text(text)) => {
            let (dt, _) = datetime::parse_timestamp(text, "timestamp")?;
            let ts = tz.to_timestamp(dt).map_err(|_| PgError::out_of_range("timestamp"))?;
            Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
        }
        (Some((Base::Bool, false)), Base::Int4 | Base::Int8 | Base::Int2, Value::Integer(i)) => {
            Ok(Value::Integer(i64::from(*i != 0)))
        }
        (_, Base::Bool, Value::Real(_)) => Err(PgError::new(
            crate::error::CANNOT_COERCE,
            "cannot cast type double precision to boolean",
        )),
        _ => value::coerce(target, value, tz),
    }
}

fn install_arithmetic(conn: &Connection) -> rusqlite::Result<()> {
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
    conn.create_aggregate_function("pg_numeric_sum", 1, flags_pure(), NumericSum { average: false })?;
    conn.create_aggregate_function("pg_numeric_avg", 1, flags_pure(), NumericSum { average: true })?;
    Ok(())
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
            Ok(Value::Real(if modulo { x % y } else { x / y }))
        }
    }
}

/// Exact `sum`/`avg` of numeric values (PostgreSQL's `avg` of integers is numeric too).
struct NumericSum {
    average: bool,
}

impl Aggregate<(Option<Decimal>, u64), Value> for NumericSum {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<(Option<Decimal>, u64)> {
        Ok((None, 0))
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut (Option<Decimal>, u64)) -> rusqlite::Result<()> {
        if let Some(d) = decimal_of(ctx.get_raw(0))? {
            acc.0 = Some(match acc.0.take() {
                Some(sum) => sum.add(&d),
                None => d,
            });
            acc.1 += 1;
        }
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<(Option<Decimal>, u64)>) -> rusqlite::Result<Value> {
        let Some((Some(sum), count)) = acc else {
            return Ok(Value::Null);
        };
        if !self.average {
            return Ok(Value::Text(sum.to_text()));
        }
        // PostgreSQL's division scale: 16 significant digits less the quotient's weight in base-10000
        // digits, never fewer than the dividend's.
        let count_decimal = Decimal::parse(&count.to_string()).expect("a count is a number");
        let scale = division_scale(&sum, &count_decimal);
        Ok(Value::Text(divide_decimal(&sum, count, scale).to_text()))
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

fn install_session(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_now", 0, flags_session(), move |_| {
        Ok(datetime::format_timestamptz(s.now(), &TimeZone::UTC))
    })?;
    conn.create_scalar_function("pg_clock_timestamp", 0, flags_session(), |_| {
        Ok(datetime::format_timestamptz(Timestamp::now(), &TimeZone::UTC))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_date", 0, flags_session(), move |_| {
        Ok(datetime::format_date(s.time_zone().to_datetime(s.now()).date()))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_localtimestamp", 0, flags_session(), move |_| {
        Ok(datetime::format_timestamp(s.time_zone().to_datetime(s.now())))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_time", 0, flags_session(), move |_| {
        Ok(datetime::format_time(s.time_zone().to_datetime(s.now()).time()))
    })?;
    conn.create_scalar_function("pg_version", 0, flags_pure(), |_| Ok(VERSION))?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_database", 0, flags_session(), move |_| {
        Ok(s.database.clone())
    })?;
    conn.create_scalar_function("pg_current_schema", 0, flags_pure(), |_| Ok("public"))?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_user", 0, flags_session(), move |_| Ok(s.user.clone()))?;
    conn.create_scalar_function("pg_backend_pid", 0, flags_session(), move |_| Ok(state.backend_pid))?;
    for name in ["gen_random_uuid", "uuid_generate_v4"] {
        conn.create_scalar_function(name, 0, FunctionFlags::SQLITE_UTF8, |_| random_uuid().map_err(raise))?;
    }
    Ok(())
}

fn random_uuid() -> Result<String, PgError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| PgError::new(crate::error::INTERNAL_ERROR, "could not generate random values"))?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// `LIKE` as PostgreSQL matches: case-sensitive, `%` and `_`, backslash the default escape. Greedy with
/// backtracking to the last `%` only, so any pattern costs at most O(text × pattern) (no exponential
/// blow-up on hostile patterns: a SQL function cannot be interrupted).
pub fn like(text: &str, pattern: &str, escape: Option<char>) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Token {
        Literal(char),
        One,
        Many,
    }
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(literal) => tokens.push(Token::Literal(literal)),
                // A trailing escape matches nothing (PostgreSQL raises; matching nothing is the safe answer).
                None => return false,
            }
        } else if c == '%' {
            if tokens.last() != Some(&Token::Many) {
                tokens.push(Token::Many);
            }
        } else if c == '_' {
            tokens.push(Token::One);
        } else {
            tokens.push(Token::Literal(c));
        }
    }
    let text: Vec<char> = text.chars().collect();
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Token::Many) => {
                star = Some((p, t));
                p += 1;
            }
            Some(Token::One) => {
                t += 1;
                p += 1;
            }
            Some(Token::Literal(c)) if *c == text[t] => {
                t += 1;
                p += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(|token| *token == Token::Many)
}

fn install_strings(conn: &Connection) -> rusqlite::Result<()> {
    // SQLite calls like(pattern, text[, escape]) for the LIKE operator.
    for n in [2, 3] {
        conn.create_scalar_function("like", n, flags_pure(), move |ctx| {
            let (Some(pattern), Some(text)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
                return Ok(None);
            };
            let escape = if n == 3 {
                ctx.get::<Option<String>>(2)?.and_then(|e| e.chars().next())
            } else {
                Some('\\')
            };
            Ok(Some(like(&text, &pattern, escape)))
        })?;
        conn.create_scalar_function("pg_ilike", n, flags_pure(), move |ctx| {
            let (Some(text), Some(pattern)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
                return Ok(None);
            };
            let escape = if n == 3 {
                ctx.get::<Option<String>>(2)?.and_then(|e| e.chars().next())
            } else {
                Some('\\')
            };
            Ok(Some(like(&text.to_lowercase(), &pattern.to_lowercase(), escape)))
        })?;
    }
    conn.create_scalar_function("pg_regex", 3, flags_pure(), |ctx| {
        let (Some(text), Some(pattern)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let flags: String = ctx.get(2)?;
        let regex = ctx.get_or_create_aux(
            1,
            |_| -> Result<regex::Regex, Box<dyn std::error::Error + Send + Sync>> {
                regex::RegexBuilder::new(&pattern)
                    .case_insensitive(flags.contains('i'))
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| {
                        format!(
                            "{ERROR_PREFIX}{}:invalid regular expression: {e}",
                            crate::error::INVALID_REGULAR_EXPRESSION
                        )
                        .into()
                    })
            },
        )?;
        Ok(Some(regex.is_match(&text)))
    })?;
    conn.create_scalar_function("left", 2, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let n: i64 = ctx.get(1)?;
        let count = text.chars().count() as i64;
        let take = if n >= 0 { n.min(count) } else { (count + n).max(0) };
        Ok(Some(text.chars().take(take as usize).collect::<String>()))
    })?;
    conn.create_scalar_function("right", 2, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let n: i64 = ctx.get(1)?;
        let count = text.chars().count() as i64;
        let take = if n >= 0 { n.min(count) } else { (count + n).max(0) };
        Ok(Some(text.chars().skip((count - take) as usize).collect::<String>()))
    })?;
    conn.create_scalar_function("repeat", 2, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let n: i64 = ctx.get(1)?;
        let total = text.len().saturating_mul(n.max(0) as usize);
        if total > crate::VALUE_BYTES_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "requested length too large",
            )));
        }
        Ok(Some(text.repeat(n.max(0) as usize)))
    })?;
    // SQLite's lower/upper fold ASCII only; PostgreSQL's (in a UTF-8 locale) fold every letter.
    conn.create_scalar_function("lower", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| t.to_lowercase()))
    })?;
    conn.create_scalar_function("upper", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| t.to_uppercase()))
    })?;
    for n in [2, 3] {
        // PostgreSQL's substr: positions before 1 count (substr('hello', -1, 3) is 'h'); bytes for bytea.
        conn.create_scalar_function("substr", n, flags_pure(), move |ctx| {
            let start = match ctx.get::<Option<i64>>(1)? {
                Some(s) => s,
                None => return Ok(Value::Null),
            };
            let count = if n == 3 {
                match ctx.get::<Option<i64>>(2)? {
                    Some(c) if c < 0 => {
                        return Err(raise(PgError::new(
                            crate::error::SUBSTRING_ERROR,
                            "negative substring length not allowed",
                        )))
                    }
                    Some(c) => Some(c),
                    None => return Ok(Value::Null),
                }
            } else {
                None
            };
            let end = count.map(|c| start.saturating_add(c));
            let from = start.max(1) - 1;
            let window = |len: usize| -> (usize, usize) {
                let from = usize::try_from(from).unwrap_or(usize::MAX).min(len);
                let to = end
                    .map_or(len, |e| usize::try_from((e - 1).max(0)).unwrap_or(0).min(len))
                    .max(from);
                (from, to)
            };
            Ok(match ctx.get_raw(0) {
                ValueRef::Null => Value::Null,
                ValueRef::Blob(b) => {
                    let (from, to) = window(b.len());
                    Value::Blob(b[from..to].to_vec())
                }
                other => {
                    let text = match other {
                        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                        ValueRef::Integer(i) => i.to_string(),
                        ValueRef::Real(f) => value::format_float8(f),
                        _ => String::new(),
                    };
                    let chars: Vec<char> = text.chars().collect();
                    let (from, to) = window(chars.len());
                    Value::Text(chars[from..to].iter().collect())
                }
            })
        })?;
    }
    conn.create_scalar_function("reverse", 1, flags_pure(), |ctx| {
        Ok(ctx
            .get::<Option<String>>(0)?
            .map(|t| t.chars().rev().collect::<String>()))
    })?;
    conn.create_scalar_function("starts_with", 2, flags_pure(), |ctx| {
        let (Some(text), Some(prefix)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        Ok(Some(text.starts_with(&prefix)))
    })?;
    conn.create_scalar_function("initcap", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| {
            let mut out = String::with_capacity(t.len());
            let mut start = true;
            for c in t.chars() {
                if c.is_alphanumeric() {
                    if start {
                        out.extend(c.to_uppercase());
                    } else {
                        out.extend(c.to_lowercase());
                    }
                    start = false;
                } else {
                    out.push(c);
                    start = true;
                }
            }
            out
        }))
    })?;
    for (name, left) in [("lpad", true), ("rpad", false)] {
        for n in [2, 3] {
            conn.create_scalar_function(name, n, flags_pure(), move |ctx| {
                let Some(text) = ctx.get::<Option<String>>(0)? else {
                    return Ok(None);
                };
                let width = usize::try_from(ctx.get::<i64>(1)?.max(0)).unwrap_or(0);
                if width > crate::VALUE_BYTES_MAX {
                    return Err(raise(PgError::new(
                        crate::error::PROGRAM_LIMIT_EXCEEDED,
                        "requested length too large",
                    )));
                }
                let fill: Vec<char> = if n == 3 {
                    ctx.get::<String>(2)?.chars().collect()
                } else {
                    vec![' ']
                };
                let chars: Vec<char> = text.chars().collect();
                if chars.len() >= width || fill.is_empty() {
                    return Ok(Some(chars.into_iter().take(width).collect::<String>()));
                }
                let pad: String = fill.iter().cycle().take(width - chars.len()).collect();
                Ok(Some(if left {
                    format!("{pad}{text}")
                } else {
                    format!("{text}{pad}")
                }))
            })?;
        }
    }
    conn.create_scalar_function("split_part", 3, flags_pure(), |ctx| {
        let (Some(text), Some(delimiter)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let n: i64 = ctx.get(2)?;
        if n == 0 {
            return Err(raise(PgError::new(
                INVALID_PARAMETER_VALUE,
                "field position must not be zero",
            )));
        }
        let parts: Vec<&str> = if delimiter.is_empty() {
            vec![text.as_str()]
        } else {
            text.split(delimiter.as_str()).collect()
        };
        let index = if n > 0 { n - 1 } else { parts.len() as i64 + n };
        Ok(Some(
            usize::try_from(index)
                .ok()
                .and_then(|i| parts.get(i))
                .map_or("", |s| s)
                .to_owned(),
        ))
    })?;
    conn.create_scalar_function("btrim", -1, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let chars: Vec<char> = if ctx.len() > 1 {
            ctx.get::<String>(1)?.chars().collect()
        } else {
            vec![' ']
        };
        Ok(Some(text.trim_matches(|c| chars.contains(&c)).to_owned()))
    })?;
    conn.create_scalar_function("to_hex", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<i64>>(0)?.map(|v| format!("{v:x}")))
    })?;
    conn.create_scalar_function("chr", 1, flags_pure(), |ctx| {
        let code: i64 = ctx.get(0)?;
        u32::try_from(code)
            .ok()
            .filter(|c| *c != 0)
            .and_then(char::from_u32)
            .map(String::from)
            .ok_or_else(|| {
                raise(PgError::new(
                    crate::error::PROGRAM_LIMIT_EXCEEDED,
                    format!("requested character too large for encoding: {code}"),
                ))
            })
    })?;
    Ok(())
}

fn install_datetime(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_extract", 3, flags_pure(), move |ctx| {
        let field: String = ctx.get(0)?;
        let value = owned(ctx.get_raw(1));
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        extract(&field, &value, ty, &s.time_zone()).map_err(raise)
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_date_part", 3, flags_pure(), move |ctx| {
        let field: String = ctx.get(0)?;
        let value = owned(ctx.get_raw(1));
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        match extract(&field.to_ascii_lowercase(), &value, ty, &s.time_zone()).map_err(raise)? {
            Value::Text(t) => Ok(Value::Real(t.parse().unwrap_or(f64::NAN))),
            other => Ok(other),
        }
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_date_trunc", 3, flags_pure(), move |ctx| {
        let field: String = ctx.get(0)?;
        let value = owned(ctx.get_raw(1));
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        date_trunc(&field.to_ascii_lowercase(), &value, ty, &s.time_zone()).map_err(raise)
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_datetime_arith", 6, flags_pure(), move |ctx| {
        let left = owned(ctx.get_raw(0));
        let op: String = ctx.get(1)?;
        let right = owned(ctx.get_raw(2));
        let (Some(result), Some(lt), Some(rt)) = (type_arg(ctx, 3)?, type_arg(ctx, 4)?, type_arg(ctx, 5)?) else {
            return Ok(Value::Null);
        };
        datetime_arith(left, op == "-", right, result, lt, rt, &s.time_zone()).map_err(raise)
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_at_time_zone", 3, flags_pure(), move |ctx| {
        let value = owned(ctx.get_raw(0));
        let Some(zone) = ctx.get::<Option<String>>(1)? else {
            return Ok(Value::Null);
        };
        let Some(ty) = type_arg(ctx, 2)? else {
            return Ok(Value::Null);
        };
        at_time_zone(value, &zone, ty, &s.time_zone()).map_err(raise)
    })?;
    conn.create_scalar_function("pg_age", -1, flags_session(), move |ctx| {
        let tz = state.time_zone();
        let read = |i: usize| -> rusqlite::Result<Option<DateTime>> {
            match ctx.get::<Option<String>>(i)? {
                None => Ok(None),
                Some(text) => local_of(&Value::Text(text), PgType::new(Base::Timestamp), &tz)
                    .map(Some)
                    .map_err(raise),
            }
        };
        let (later, earlier) = if ctx.len() >= 2 {
            (read(0)?, read(1)?)
        } else {
            // age(x) is measured from today's midnight.
            let midnight = tz
                .to_datetime(state.now())
                .date()
                .to_datetime(jiff::civil::Time::midnight());
            (Some(midnight), read(0)?)
        };
        let (Some(later), Some(earlier)) = (later, earlier) else {
            return Ok(None);
        };
        Ok(Some(age(later, earlier).format()))
    })?;
    Ok(())
}

/// `age(a, b)`: years, months and days between two date-times, the rest as time, as PostgreSQL counts it.
fn age(a: DateTime, b: DateTime) -> datetime::Interval {
    let span = a.since((Unit::Year, b)).unwrap_or_default();
    let micros = i64::from(span.get_hours()) * 3_600_000_000
        + span.get_minutes() * 60_000_000
        + span.get_seconds() * 1_000_000
        + span.get_milliseconds() * 1000
        + span.get_microseconds();
    datetime::Interval {
        months: span.get_years() as i32 * 12 + span.get_months(),
        days: span.get_days() + span.get_weeks() * 7,
        micros,
    }
}

fn local_of(value: &Value, ty: PgType, tz: &TimeZone) -> Result<DateTime, PgError> {
    let text = match value {
        Value::Text(t) => t.clone(),
        other => value::output(PgType::TEXT, other, tz).unwrap_or_default(),
    };
    match ty.base() {
        Base::Timestamptz => {
            let ts = datetime::parse_timestamptz(&text, tz)?;
            Ok(tz.to_datetime(ts))
        }
        Base::Time => {
            let t = datetime::parse_time(&text)?;
            Ok(jiff::civil::Date::constant(2000, 1, 1).to_datetime(t))
        }
        _ => datetime::parse_timestamp(&text, "timestamp").map(|(dt, _)| dt),
    }
}

fn extract(field: &str, value: &Value, ty: PgType, tz: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    let field = field.to_ascii_lowercase();
    if ty.base() == Base::Interval {
        let text = value::output(ty, value, tz).unwrap_or_default();
        let iv = datetime::Interval::parse(&text)?;
        let number = match field.as_str() {
            "epoch" => {
                // PostgreSQL counts a year as 365.25 days and a month as 30 in an interval's epoch.
                let years = i64::from(iv.months / 12);
                let months = i64::from(iv.months % 12);
                let micros = years * 31_557_600_000_000
                    + months * 30 * datetime::MICROS_PER_DAY
                    + i64::from(iv.days) * datetime::MICROS_PER_DAY
                    + iv.micros;
                return Ok(Value::Text(decimal_micros(micros)));
            }
            "year" | "years" => i64::from(iv.months / 12),
            "month" | "months" => i64::from(iv.months % 12),
            "day" | "days" => i64::from(iv.days),
            "hour" | "hours" => iv.micros / 3_600_000_000,
            "minute" | "minutes" => iv.micros / 60_000_000 % 60,
            "second" | "seconds" => return Ok(Value::Text(decimal_micros(iv.micros % 60_000_000))),
            _ => return Err(PgError::unsupported(format!("EXTRACT({field}) of an interval"))),
        };
        return Ok(Value::Text(number.to_string()));
    }
    if field == "epoch" && ty.base() == Base::Timestamptz {
        let text = value::output(ty, value, tz).unwrap_or_default();
        let ts = datetime::parse_timestamptz(&text, tz)?;
        return Ok(Value::Text(decimal_micros(ts.as_microsecond())));
    }
    let dt = local_of(value, ty, tz)?;
    let number: i64 = match field.as_str() {
        "year" | "years" => i64::from(dt.year()),
        "month" | "months" => i64::from(dt.month()),
        "day" | "days" => i64::from(dt.day()),
        "hour" | "hours" => i64::from(dt.hour()),
        "minute" | "minutes" => i64::from(dt.minute()),
        "second" | "seconds" => {
            let micros = i64::from(dt.second()) * 1_000_000 + i64::from(dt.subsec_nanosecond() / 1000);
            return Ok(Value::Text(decimal_micros(micros)));
        }
        "dow" => i64::from(dt.weekday().to_sunday_zero_offset()),
        "isodow" => i64::from(dt.weekday().to_monday_one_offset()),
        "doy" => i64::from(dt.day_of_year()),
        "quarter" => i64::from((dt.month() - 1) / 3 + 1),
        "week" => i64::from(dt.date().iso_week_date().week()),
        "decade" => i64::from(dt.year()) / 10,
        "century" => (i64::from(dt.year()) + 99) / 100,
        "millennium" => (i64::from(dt.year()) + 999) / 1000,
        "epoch" => {
            let ts = TimeZone::UTC
                .to_timestamp(dt)
                .map_err(|_| PgError::out_of_range("timestamp"))?;
            return Ok(Value::Text(decimal_micros(ts.as_microsecond())));
        }
        "milliseconds" => {
            let micros = i64::from(dt.second()) * 1_000_000 + i64::from(dt.subsec_nanosecond() / 1000);
            return Ok(Value::Text(
                Decimal::parse(&format!("{}e-3", micros))
                    .map_or_else(|| micros.to_string(), |d| d.rescale(3).to_text()),
            ));
        }
        "microseconds" => i64::from(dt.second()) * 1_000_000 + i64::from(dt.subsec_nanosecond() / 1000),
        _ => return Err(PgError::unsupported(format!("EXTRACT({field})"))),
    };
    Ok(Value::Text(number.to_string()))
}

/// Microseconds as a decimal number of seconds with six digits after the point (`12.500000`), PostgreSQL's
/// form for `extract(second …)` and `extract(epoch …)`.
fn decimal_micros(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}{}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

fn date_trunc(field: &str, value: &Value, ty: PgType, tz: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    let dt = local_of(value, ty, tz)?;
    let date = dt.date();
    let (y, mo, d) = (date.year(), date.month(), date.day());
    let truncated = match field {
        "microseconds" => dt,
        "milliseconds" => dt
            .with()
            .subsec_nanosecond(dt.subsec_nanosecond() / 1_000_000 * 1_000_000)
            .build()
            .map_err(|_| PgError::out_of_range("timestamp"))?,
        "second" => DateTime::new(y, mo, d, dt.hour(), dt.minute(), dt.second(), 0)
            .map_err(|_| PgError::out_of_range("timestamp"))?,
        "minute" => {
            DateTime::new(y, mo, d, dt.hour(), dt.minute(), 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        "hour" => DateTime::new(y, mo, d, dt.hour(), 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "day" => DateTime::new(y, mo, d, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "week" => {
            let monday = date
                .checked_sub(jiff::Span::new().days(i64::from(date.weekday().to_monday_zero_offset())))
                .map_err(|_| PgError::out_of_range("timestamp"))?;
            monday.to_datetime(jiff::civil::Time::midnight())
        }
        "month" => DateTime::new(y, mo, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "quarter" => {
            DateTime::new(y, (mo - 1) / 3 * 3 + 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        "year" => DateTime::new(y, 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?,
        "decade" => {
            DateTime::new(y - y.rem_euclid(10), 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        "century" => {
            DateTime::new((y - 1) / 100 * 100 + 1, 1, 1, 0, 0, 0, 0).map_err(|_| PgError::out_of_range("timestamp"))?
        }
        _ => {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!("unit \"{field}\" not recognized for type {}", ty.sql_name()),
            ))
        }
    };
    match ty.base() {
        Base::Timestamptz => {
            let ts = tz
                .to_timestamp(truncated)
                .map_err(|_| PgError::out_of_range("timestamp"))?;
            Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
        }
        _ => Ok(Value::Text(datetime::format_timestamp(truncated))),
    }
}

fn datetime_arith(
    left: Value,
    minus: bool,
    right: Value,
    result: PgType,
    lt: PgType,
    rt: PgType,
    tz: &TimeZone,
) -> Result<Value, PgError> {
    if matches!(left, Value::Null) || matches!(right, Value::Null) {
        return Ok(Value::Null);
    }
    let text = |v: &Value, t: PgType| value::output(t, v, tz).unwrap_or_default();
    let interval_of = |v: &Value, t: PgType| datetime::Interval::parse(&text(v, t));
    let int_of = |v: &Value| -> Result<i64, PgError> {
        match v {
            Value::Integer(i) => Ok(*i),
            other => text(other, PgType::INT8)
                .trim()
                .parse()
                .map_err(|_| PgError::invalid_input("integer", &text(other, PgType::INT8))),
        }
    };
    let add_interval = |dt: DateTime, iv: datetime::Interval, sign: i64| -> Result<DateTime, PgError> {
        let span = jiff::Span::new()
            .try_months(i64::from(iv.months) * sign)
            .and_then(|s| s.try_days(i64::from(iv.days) * sign))
            .map_err(|_| PgError::out_of_range("timestamp"))?;
        let dt = dt.checked_add(span).map_err(|_| PgError::out_of_range("timestamp"))?;
        dt.checked_add(jiff::SignedDuration::from_micros(iv.micros * sign))
            .map_err(|_| PgError::out_of_range("timestamp"))
    };
    let sign = if minus { -1 } else { 1 };
    use Base::*;
    let out = match (lt.base(), rt.base()) {
        (Date, Int2 | Int4 | Int8) | (Int2 | Int4 | Int8, Date) => {
            let (date_value, n) = if lt.base() == Date {
                (&left, int_of(&right)?)
            } else {
                (&right, int_of(&left)?)
            };
            let date = datetime::parse_date(&text(date_value, PgType::new(Date)))?;
            let date = date
                .checked_add(
                    jiff::Span::new()
                        .try_days(n * sign)
                        .map_err(|_| PgError::out_of_range("date"))?,
                )
                .map_err(|_| PgError::out_of_range("date"))?;
            Value::Text(datetime::format_date(date))
        }
        (Date, Date) => {
            let a = datetime::parse_date(&text(&left, lt))?;
            let b = datetime::parse_date(&text(&right, rt))?;
            Value::Integer(i64::from(
                a.since(b).map_err(|_| PgError::out_of_range("date"))?.get_days(),
            ))
        }
        (Timestamp | Timestamptz | Date, Timestamp | Timestamptz | Date) => {
            let a = local_of(&left, lt, &TimeZone::UTC)?;
            let b = local_of(&right, rt, &TimeZone::UTC)?;
            let micros =
                i64::try_from(a.duration_since(b).as_micros()).map_err(|_| PgError::out_of_range("interval"))?;
            // PostgreSQL folds whole days out of the difference of two timestamps.
            let days = micros / datetime::MICROS_PER_DAY;
            Value::Text(
                datetime::Interval {
                    months: 0,
                    days: days as i32,
                    micros: micros - days * datetime::MICROS_PER_DAY,
                }
                .format(),
            )
        }
        (Interval, Interval) => {
            let a = interval_of(&left, lt)?;
            let b = interval_of(&right, rt)?;
            let b = if minus { b.negate() } else { b };
            Value::Text(
                datetime::Interval {
                    months: a.months + b.months,
                    days: a.days + b.days,
                    micros: a.micros + b.micros,
                }
                .format(),
            )
        }
        (Date | Timestamp | Timestamptz | Time, Interval) | (Interval, Date | Timestamp | Timestamptz) => {
            let (point, point_type, iv) = if rt.base() == Interval {
                (&left, lt, interval_of(&right, rt)?)
            } else {
                (&right, rt, interval_of(&left, lt)?)
            };
            let zone = if point_type.base() == Timestamptz {
                tz.clone()
            } else {
                TimeZone::UTC
            };
            let dt = local_of(point, point_type, &zone)?;
            let moved = add_interval(dt, iv, sign)?;
            match result.base() {
                Timestamptz => {
                    let ts = zone
                        .to_timestamp(moved)
                        .map_err(|_| PgError::out_of_range("timestamp"))?;
                    Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC))
                }
                Time => Value::Text(datetime::format_time(moved.time())),
                _ => Value::Text(datetime::format_timestamp(moved)),
            }
        }
        (Time, Time) => {
            let a = datetime::time_micros(datetime::parse_time(&text(&left, lt))?);
            let b = datetime::time_micros(datetime::parse_time(&text(&right, rt))?);
            Value::Text(
                datetime::Interval {
                    months: 0,
                    days: 0,
                    micros: a - b,
                }
                .format(),
            )
        }
        (Date, Time) => {
            let date = datetime::parse_date(&text(&left, lt))?;
            let time = datetime::parse_time(&text(&right, rt))?;
            Value::Text(datetime::format_timestamp(date.to_datetime(time)))
        }
        _ => {
            return Err(PgError::unsupported(format!(
                "{} {} {}",
                lt.sql_name(),
                if minus { "-" } else { "+" },
                rt.sql_name()
            )))
        }
    };
    Ok(out)
}

fn at_time_zone(value: Value, zone: &str, ty: PgType, session: &TimeZone) -> Result<Value, PgError> {
    if matches!(value, Value::Null) {
        return Ok(Value::Null);
    }
    let tz = match datetime::parse_zone(zone) {
        Some(datetime::Zone::Offset(o)) => TimeZone::fixed(o),
        Some(datetime::Zone::Named(tz)) => tz,
        None => {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!("time zone \"{zone}\" not recognized"),
            ))
        }
    };
    let text = value::output(ty, &value, session).unwrap_or_default();
    match ty.base() {
        // timestamptz AT TIME ZONE z: the local time in z (a timestamp).
        Base::Timestamptz => {
            let ts = datetime::parse_timestamptz(&text, session)?;
            Ok(Value::Text(datetime::format_timestamp(tz.to_datetime(ts))))
        }
        // timestamp AT TIME ZONE z: that local time in z, as an instant (a timestamptz).
        _ => {
            let (dt, _) = datetime::parse_timestamp(&text, "timestamp")?;
            let ts = tz.to_timestamp(dt).map_err(|_| PgError::out_of_range("timestamp"))?;
            Ok(Value::Text(datetime::format_timestamptz(ts, &TimeZone::UTC)))
        }
    }
}

fn install_arrays(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_array", -1, flags_pure(), move |ctx| {
        let Some(element) = type_arg(ctx, 0)? else {
            return Ok(Value::Null);
        };
        let tz = s.time_zone();
        let mut printed = Vec::with_capacity(ctx.len().saturating_sub(1));
        for i in 1..ctx.len() {
            let stored = value::coerce(element, owned(ctx.get_raw(i)), &tz).map_err(raise)?;
            printed.push(value::output(element, &stored, &tz));
        }
        Ok(Value::Text(value::array::format(&printed)))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_array_contains", 3, flags_pure(), move |ctx| {
        let Some(array) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let needle = owned(ctx.get_raw(1));
        if matches!(needle, Value::Null) {
            return Ok(None);
        }
        let element = type_arg(ctx, 2)?.unwrap_or(PgType::TEXT);
        let tz = s.time_zone();
        let elements = value::array::stored_elements(element.array(), &array, &tz).map_err(raise)?;
        let needle = value::coerce(element, needle, &tz).map_err(raise)?;
        let key = value::output(element, &needle, &tz);
        let mut saw_null = false;
        for e in &elements {
            if matches!(e, Value::Null) {
                saw_null = true;
            } else if value::output(element, e, &tz) == key {
                return Ok(Some(true));
            }
        }
        Ok(if saw_null { None } else { Some(false) })
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_array_get", 3, flags_pure(), move |ctx| {
        let (Some(array), Some(index)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<i64>>(1)?) else {
            return Ok(Value::Null);
        };
        let element = type_arg(ctx, 2)?.unwrap_or(PgType::TEXT);
        let elements = value::array::stored_elements(element.array(), &array, &s.time_zone()).map_err(raise)?;
        // PostgreSQL arrays count from 1; out of range is NULL.
        Ok(usize::try_from(index - 1)
            .ok()
            .and_then(|i| elements.get(i).cloned())
            .unwrap_or(Value::Null))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_array_to_json", 2, flags_pure(), move |ctx| {
        let Some(array) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let element = type_arg(ctx, 1)?.unwrap_or(PgType::TEXT);
        let tz = s.time_zone();
        let elements = value::array::stored_elements(element.array(), &array, &tz).map_err(raise)?;
        let items: Vec<serde_json::Value> = elements
            .iter()
            .map(|v| match v {
                Value::Null => serde_json::Value::Null,
                Value::Integer(i) => serde_json::Value::from(*i),
                Value::Real(f) => {
                    serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, serde_json::Value::Number)
                }
                other => serde_json::Value::String(value::output(element, other, &tz).unwrap_or_default()),
            })
            .collect();
        Ok(Some(serde_json::Value::Array(items).to_string()))
    })?;
    for (name, all) in [("pg_array_contains_all", true), ("pg_array_overlap", false)] {
        let s = state.clone();
        conn.create_scalar_function(name, 3, flags_pure(), move |ctx| {
            let (Some(a), Some(b)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
                return Ok(None);
            };
            let element = type_arg(ctx, 2)?.unwrap_or(PgType::TEXT);
            let tz = s.time_zone();
            let printed = |text: &str| -> rusqlite::Result<Vec<Option<String>>> {
                let values = value::array::stored_elements(element.array(), text, &tz).map_err(raise)?;
                Ok(values.iter().map(|v| value::output(element, v, &tz)).collect())
            };
            let (a, b) = (printed(&a)?, printed(&b)?);
            // NULL elements never match, as in PostgreSQL.
            let found = |x: &Option<String>| x.is_some() && a.contains(x);
            Ok(Some(if all { b.iter().all(found) } else { b.iter().any(found) }))
        })?;
    }
    conn.create_scalar_function("pg_jsonb_path", 3, flags_pure(), |ctx| {
        let (Some(doc), Some(path)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let as_text = ctx.get::<String>(2)? == "text";
        let steps = text_array(&path)?;
        value::json::get_path(&doc, &steps, as_text).map_err(raise)
    })?;
    conn.create_scalar_function("pg_json_get", 3, flags_pure(), |ctx| {
        let Some(doc) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let key = match ctx.get_raw(1) {
            ValueRef::Null => return Ok(None),
            ValueRef::Integer(i) => i.to_string(),
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => return Ok(None),
        };
        let as_text = ctx.get::<String>(2)? == "text";
        value::json::get_path(&doc, &[key], as_text).map_err(raise)
    })?;
    conn.create_scalar_function("pg_jsonb_concat", 2, flags_pure(), |ctx| {
        let (Some(a), Some(b)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        value::json::concat(&a, &b).map(Some).map_err(raise)
    })?;
    conn.create_scalar_function("pg_jsonb_delete", 2, flags_pure(), |ctx| {
        let Some(doc) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let result = match ctx.get_raw(1) {
            ValueRef::Null => return Ok(None),
            ValueRef::Integer(i) => value::json::delete(&doc, &[], Some(i)),
            ValueRef::Text(t) => {
                let text = String::from_utf8_lossy(t).into_owned();
                let keys = if text.starts_with('{') && text.ends_with('}') {
                    text_array(&text)?
                } else {
                    vec![text]
                };
                value::json::delete(&doc, &keys, None)
            }
            _ => return Ok(None),
        };
        result.map(Some).map_err(raise)
    })?;
    conn.create_scalar_function("pg_interval_cmp", 2, flags_pure(), |ctx| {
        let (Some(a), Some(b)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let a = datetime::Interval::parse(&a).map_err(raise)?;
        let b = datetime::Interval::parse(&b).map_err(raise)?;
        Ok(Some(a.total_micros().cmp(&b.total_micros()) as i64))
    })?;
    conn.create_scalar_function("pg_jsonb_delete_path", 2, flags_pure(), |ctx| {
        let (Some(doc), Some(path)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        value::json::delete_path(&doc, &text_array(&path)?)
            .map(Some)
            .map_err(raise)
    })?;
    conn.create_scalar_function("pg_jsonb_has_keys", 3, flags_pure(), |ctx| {
        let (Some(doc), Some(keys)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let all = ctx.get::<String>(2)? == "all";
        let keys = text_array(&keys)?;
        let mut found = keys.iter().map(|k| value::json::has_key(&doc, k));
        let result = if all {
            found.try_fold(true, |acc, f| f.map(|f| acc && f))
        } else {
            found.try_fold(false, |acc, f| f.map(|f| acc || f))
        };
        result.map(Some).map_err(raise)
    })?;
    conn.create_aggregate_function("pg_array_agg", 2, flags_pure(), ArrayAgg { state })?;
    conn.create_scalar_function("pg_jsonb_norm", 1, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        value::json::normalize_jsonb(&text).map(Some).map_err(raise)
    })?;
    Ok(())
}

/// The elements of a `text[]` literal (`{a,b,0}`), for JSON paths and key lists.
fn text_array(text: &str) -> rusqlite::Result<Vec<String>> {
    let elements = value::array::parse(text).ok_or_else(|| {
        raise(PgError::new(
            crate::error::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        ))
    })?;
    Ok(elements.into_iter().map(Option::unwrap_or_default).collect())
}

/// `array_agg(x)`: the values in the order given, as an array of their type.
struct ArrayAgg {
    state: Arc<SessionState>,
}

impl Aggregate<(Option<PgType>, Vec<Option<String>>), Option<String>> for ArrayAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<(Option<PgType>, Vec<Option<String>>)> {
        Ok((None, Vec::new()))
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut (Option<PgType>, Vec<Option<String>>)) -> rusqlite::Result<()> {
        let element = type_arg(ctx, 0)?.unwrap_or(PgType::TEXT).element();
        acc.0 = Some(element);
        if acc.1.len() >= value::array::ELEMENTS_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "array size exceeds the maximum allowed",
            )));
        }
        let tz = self.state.time_zone();
        let stored = value::coerce(element, owned(ctx.get_raw(1)), &tz).map_err(raise)?;
        acc.1.push(value::output(element, &stored, &tz));
        Ok(())
    }

    fn finalize(
        &self,
        _: &mut Context<'_>,
        acc: Option<(Option<PgType>, Vec<Option<String>>)>,
    ) -> rusqlite::Result<Option<String>> {
        Ok(acc
            .filter(|(_, v)| !v.is_empty())
            .map(|(_, v)| value::array::format(&v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_is_case_sensitive_with_backslash_escape() {
        assert!(like("abc", "a%", Some('\\')));
        assert!(!like("abc", "A%", Some('\\')));
        assert!(like("a_c", "a\\_c", Some('\\')));
        assert!(!like("abc", "a\\_c", Some('\\')));
        assert!(like("", "%", Some('\\')));
        assert!(like("xyz", "_y_", Some('\\')));
        assert!(!like("xyz", "_y", Some('\\')));
        assert!(like("abcabd", "%ab_", Some('\\')));
        assert!(!like(&"a".repeat(5000), &format!("{}b", "%a".repeat(50)), Some('\\')));
    }

    #[test]
    fn errors_carry_their_sqlstate_through_sqlite() {
        let conn = Connection::open_in_memory().expect("memory database");
        install(&conn, Arc::new(SessionState::new("db", "user", 7))).expect("installs");
        let error = conn
            .query_row("SELECT pg_div(1, 0, 'int')", [], |r| r.get::<_, i64>(0))
            .expect_err("division by zero");
        let pg = error_of(&error.to_string()).expect("a PostgreSQL error");
        assert_eq!(pg.code, DIVISION_BY_ZERO);
        let sum: String = conn
            .query_row(
                "SELECT pg_numeric_sum(x) FROM (SELECT '1.10' AS x UNION ALL SELECT '2.2')",
                [],
                |r| r.get(0),
            )
            .expect("sums");
        assert_eq!(sum, "3.30");
        let product: String = conn
            .query_row("SELECT pg_numeric_mul('1.5', '-2.25')", [], |r| r.get(0))
            .expect("multiplies");
        assert_eq!(product, "-3.375");
        let quotient: String = conn
            .query_row("SELECT pg_numeric_div('7.0', '2')", [], |r| r.get(0))
            .expect("divides");
        assert_eq!(quotient, "3.5000000000000000");
        let third: String = conn
            .query_row("SELECT pg_numeric_div('1', '3')", [], |r| r.get(0))
            .expect("divides");
        assert_eq!(third, "0.33333333333333333333");
        let avg: String = conn
            .query_row(
                "SELECT pg_numeric_avg(x) FROM (SELECT 1 AS x UNION ALL SELECT 2)",
                [],
                |r| r.get(0),
            )
            .expect("averages");
        assert_eq!(avg, "1.5000000000000000");
    }
}
