//! The ordered-set aggregates (`percentile_cont`, `percentile_disc`, `mode`), which the translator calls as
//! `pg_percentile_cont(fraction, value, descending)`, `pg_percentile_disc(…)` and `pg_mode(value, descending)`
//! from `f(fraction) WITHIN GROUP (ORDER BY value [DESC])`. The values are kept (at most
//! [`ORDERED_SET_VALUES_MAX`]) and sorted when the group ends: numbers by value, anything else as text.

use std::cmp::Ordering;

use rusqlite::functions::{Aggregate, Context};
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{flags_pure, owned, raise};
use crate::error::PgError;
use crate::value::numeric::Decimal;

/// Most values one ordered-set aggregate keeps for its group.
pub const ORDERED_SET_VALUES_MAX: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Continuous,
    Discrete,
    Mode,
}

struct OrderedSet {
    kind: Kind,
}

/// A group's values, the fraction asked for and the sort direction.
#[derive(Default)]
struct State {
    values: Vec<Value>,
    fraction: Option<f64>,
    descending: bool,
}

pub(super) fn install_ordered_set(conn: &Connection) -> rusqlite::Result<()> {
    let flags = flags_pure();
    conn.create_aggregate_function("pg_percentile_cont", 3, flags, OrderedSet { kind: Kind::Continuous })?;
    conn.create_aggregate_function("pg_percentile_disc", 3, flags, OrderedSet { kind: Kind::Discrete })?;
    conn.create_aggregate_function("pg_mode", 2, flags, OrderedSet { kind: Kind::Mode })?;
    Ok(())
}

/// Orders two values as PostgreSQL orders their (shared) type: numbers by value, else as text.
fn compare(a: &Value, b: &Value) -> Ordering {
    let number = |v: &Value| -> Option<Decimal> {
        match v {
            Value::Integer(i) => Decimal::parse(&i.to_string()),
            Value::Real(f) => Decimal::parse(&crate::value::format_float8(*f)),
            Value::Text(t) => Decimal::parse(t),
            _ => None,
        }
    };
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x.cmp_value(&y),
        _ => text_of(a).cmp(&text_of(b)),
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => crate::value::format_float8(*f),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Null => String::new(),
    }
}

fn as_f64(v: &Value) -> Result<f64, PgError> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Real(f) => Ok(*f),
        Value::Text(t) => crate::value::parse_float8(t),
        _ => Err(PgError::invalid_input("double precision", "blob")),
    }
}

impl Aggregate<State, Value> for OrderedSet {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<State> {
        Ok(State::default())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut State) -> rusqlite::Result<()> {
        let (value_at, descending_at) = if self.kind == Kind::Mode { (0, 1) } else { (1, 2) };
        if self.kind != Kind::Mode && acc.fraction.is_none() {
            let fraction = match owned(ctx.get_raw(0)) {
                Value::Null => return Ok(()),
                other => as_f64(&other).map_err(raise)?,
            };
            if !(0.0..=1.0).contains(&fraction) {
                return Err(raise(PgError::new(
                    crate::error::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!("percentile value {fraction} is not between 0 and 1"),
                )));
            }
            acc.fraction = Some(fraction);
        }
        acc.descending = ctx.get::<i64>(descending_at)? != 0;
        let value = owned(ctx.get_raw(value_at));
        if matches!(value, Value::Null) {
            return Ok(());
        }
        if acc.values.len() >= ORDERED_SET_VALUES_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!("more than {ORDERED_SET_VALUES_MAX} values in one ordered-set aggregate"),
            )));
        }
        acc.values.push(value);
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<State>) -> rusqlite::Result<Value> {
        let Some(mut state) = acc.filter(|s| !s.values.is_empty()) else {
            return Ok(Value::Null);
        };
        state.values.sort_by(compare);
        if state.descending {
            state.values.reverse();
        }
        let values = &state.values;
        let fraction = state.fraction.unwrap_or(0.5);
        match self.kind {
            Kind::Mode => Ok(mode(values)),
            Kind::Discrete => {
                // The first value whose position reaches the fraction of the group.
                let at = ((fraction * values.len() as f64).ceil() as usize).max(1) - 1;
                Ok(values[at.min(values.len() - 1)].clone())
            }
            Kind::Continuous => {
                let position = fraction * (values.len() - 1) as f64;
                let (low, high) = (position.floor() as usize, position.ceil() as usize);
                let (a, b) = (
                    as_f64(&values[low]).map_err(raise)?,
                    as_f64(&values[high]).map_err(raise)?,
                );
                Ok(crate::value::float_value(a + (b - a) * (position - low as f64)))
            }
        }
    }
}

/// The most frequent of sorted values, the first in sort order among equals.
fn mode(values: &[Value]) -> Value {
    let (mut best, mut best_count) = (&values[0], 0);
    let mut run_start = 0;
    for i in 1..=values.len() {
        if i == values.len() || compare(&values[i], &values[run_start]) != Ordering::Equal {
            if i - run_start > best_count {
                best = &values[run_start];
                best_count = i - run_start;
            }
            run_start = i;
        }
    }
    best.clone()
}
