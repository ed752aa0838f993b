//! Aggregates: `bool_and`, `bool_or`, `every`, and the variance family (`stddev`, `stddev_samp`,
//! `stddev_pop`, `variance`, `var_samp`, `var_pop`): exact numerics at PostgreSQL's result scale for
//! integer and numeric input, PostgreSQL's Youngs–Cramer doubles for double precision input.

use std::sync::Arc;

use rusqlite::functions::{Aggregate, Context};
use rusqlite::types::Value;
use rusqlite::Connection;

use super::math::{sqrt_at, Big};
use super::{owned, raise, Args};
use crate::error::PgError;
use crate::functions::SessionState;
use crate::types::{Base, PgType};

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, _state: &Arc<SessionState>) -> rusqlite::Result<()> {
    let flags = super::super::flags_pure();
    conn.create_aggregate_function("bool_and", 1, flags, BoolAgg { and: true })?;
    conn.create_aggregate_function("every", 1, flags, BoolAgg { and: true })?;
    conn.create_aggregate_function("bool_or", 1, flags, BoolAgg { and: false })?;
    for (name, kind) in [
        ("stddev", Kind::StddevSamp),
        ("stddev_samp", Kind::StddevSamp),
        ("stddev_pop", Kind::StddevPop),
        ("variance", Kind::VarSamp),
        ("var_samp", Kind::VarSamp),
        ("var_pop", Kind::VarPop),
    ] {
        conn.create_aggregate_function(name, 1, flags, Variance { kind, typed: false })?;
        conn.create_aggregate_function(
            format!("pg_t_{name}").as_str(),
            2,
            flags,
            Variance { kind, typed: true },
        )?;
    }
    Ok(())
}

/// The result type of a function of this file.
pub(super) fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    Some(match name {
        "bool_and" | "bool_or" | "every" => PgType::BOOL,
        "stddev" | "stddev_samp" | "stddev_pop" | "variance" | "var_samp" | "var_pop" => {
            match args.first().copied().flatten().map(PgType::base) {
                Some(Base::Float4 | Base::Float8) => PgType::FLOAT8,
                _ => PgType::NUMERIC,
            }
        }
        _ => return None,
    })
}

/// `bool_and`/`every` (`and`) and `bool_or`: NULLs skipped, NULL when no row had a value.
struct BoolAgg {
    and: bool,
}

impl Aggregate<Option<bool>, Option<bool>> for BoolAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Option<bool>> {
        Ok(None)
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Option<bool>) -> rusqlite::Result<()> {
        let value = match owned(ctx.get_raw(0)) {
            Value::Null => return Ok(()),
            Value::Integer(i) => i != 0,
            Value::Real(f) => f != 0.0,
            Value::Text(t) => crate::value::parse_bool(&t).map_err(raise)?,
            Value::Blob(b) => crate::value::parse_bool(&String::from_utf8_lossy(&b)).map_err(raise)?,
        };
        *acc = Some(match *acc {
            None => value,
            Some(old) if self.and => old && value,
            Some(old) => old || value,
        });
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Option<bool>>) -> rusqlite::Result<Option<bool>> {
        Ok(acc.flatten())
    }
}

#[derive(Clone, Copy)]
enum Kind {
    StddevSamp,
    StddevPop,
    VarSamp,
    VarPop,
}

impl Kind {
    fn sample(self) -> bool {
        matches!(self, Kind::StddevSamp | Kind::VarSamp)
    }

    fn stddev(self) -> bool {
        matches!(self, Kind::StddevSamp | Kind::StddevPop)
    }
}

/// The running sums: exact (count, Σx, Σx²) for numerics, PostgreSQL's (N, Sx, Sxx) for doubles.
enum Sums {
    Empty,
    Exact { n: i64, sum: Big, sum_squares: Big },
    Float { n: f64, sx: f64, sxx: f64 },
}

struct Variance {
    kind: Kind,
    typed: bool,
}

impl Aggregate<Sums, Value> for Variance {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Sums> {
        Ok(Sums::Empty)
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Sums) -> rusqlite::Result<()> {
        let args = Args::of(ctx, self.typed)?;
        let value = args.value(0);
        if matches!(value, Value::Null) {
            return Ok(());
        }
        let float = match args.ty(0) {
            Some(t) => matches!(t.base(), Base::Float4 | Base::Float8),
            None => matches!(value, Value::Real(_)),
        };
        if float {
            let x = match value {
                Value::Integer(i) => i as f64,
                Value::Real(f) => f,
                other => {
                    let text = super::value_text(&other).unwrap_or_default();
                    text.trim()
                        .parse()
                        .map_err(|_| raise(PgError::invalid_input("double precision", &text)))?
                }
            };
            let (mut n, mut sx, mut sxx) = match acc {
                Sums::Float { n, sx, sxx } => (*n, *sx, *sxx),
                _ => (0.0, 0.0, 0.0),
            };
            let previous = n;
            n += 1.0;
            sx += x;
            if previous > 0.0 {
                let tmp = x * n - sx;
                sxx += tmp * tmp / (n * previous);
            } else {
                sxx = 0.0;
            }
            *acc = Sums::Float { n, sx, sxx };
            return Ok(());
        }
        let x = match value {
            Value::Integer(i) => Big::from_int(i),
            Value::Real(f) => Big::parse(&crate::value::format_float8(f)).map_err(raise)?,
            other => Big::parse(&super::value_text(&other).unwrap_or_default()).map_err(raise)?,
        };
        let square = x.mul(&x);
        *acc = match std::mem::replace(acc, Sums::Empty) {
            Sums::Exact { n, sum, sum_squares } => Sums::Exact {
                n: n + 1,
                sum: sum.add(&x),
                sum_squares: sum_squares.add(&square),
            },
            _ => Sums::Exact {
                n: 1,
                sum: x,
                sum_squares: square,
            },
        };
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Sums>) -> rusqlite::Result<Value> {
        let sample = self.kind.sample();
        match acc.unwrap_or(Sums::Empty) {
            Sums::Empty => Ok(Value::Null),
            Sums::Float { n, sxx, .. } => {
                if sample && n <= 1.0 {
                    return Ok(Value::Null);
                }
                let variance = sxx / if sample { n - 1.0 } else { n };
                Ok(crate::value::float_value(if self.kind.stddev() {
                    variance.sqrt()
                } else {
                    variance
                }))
            }
            Sums::Exact { n, sum, sum_squares } => {
                if sample && n <= 1 {
                    return Ok(Value::Null);
                }
                let count = Big::from_int(n);
                // PostgreSQL: (N·Σx² − (Σx)²) / (N·(N − 1)) or / N², at select_div_scale's scale.
                let numerator = count.mul(&sum_squares).sub(&sum.mul(&sum));
                if numerator.m.sign() != num_bigint::Sign::Plus {
                    return Ok(Value::Text("0".to_owned()));
                }
                let denominator = Big::from_int(n).mul(&Big::from_int(if sample { n - 1 } else { n }));
                let rscale = numerator.div_scale(&denominator);
                let variance = numerator.div(&denominator, rscale);
                let result = if self.kind.stddev() {
                    sqrt_at(&variance, rscale)
                } else {
                    variance
                };
                Ok(Value::Text(result.to_text()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::row_after;

    fn row(setup: &[&str], sql: &str) -> Vec<Option<String>> {
        row_after(setup, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn some(values: &[&str]) -> Vec<Option<String>> {
        values.iter().map(|v| Some((*v).to_owned())).collect()
    }

    #[test]
    fn boolean_aggregates_skip_nulls() {
        let setup = [
            "CREATE TABLE t (x boolean)",
            "INSERT INTO t VALUES (true), (false), (NULL)",
        ];
        assert_eq!(
            row(&setup, "SELECT bool_and(x), bool_or(x), every(x) FROM t"),
            some(&["f", "t", "f"])
        );
        assert_eq!(
            row(&setup, "SELECT bool_and(x), bool_or(x) FROM t WHERE x"),
            some(&["t", "t"])
        );
        assert_eq!(row(&setup, "SELECT bool_and(x) FROM t WHERE x IS NULL"), vec![None]);
    }

    #[test]
    fn variance_family_matches_postgres() {
        let all = "SELECT stddev(x), stddev_samp(x), stddev_pop(x), variance(x), var_samp(x), var_pop(x) FROM t";
        let ints = ["CREATE TABLE t (x int)", "INSERT INTO t VALUES (1), (2), (4)"];
        assert_eq!(
            row(&ints, all),
            some(&[
                "1.5275252316519467",
                "1.5275252316519467",
                "1.2472191289246471",
                "2.3333333333333333",
                "2.3333333333333333",
                "1.5555555555555556"
            ])
        );
        let floats = ["CREATE TABLE t (x float8)", "INSERT INTO t VALUES (1.5), (2.5), (4)"];
        assert_eq!(
            row(&floats, "SELECT stddev(x), variance(x), var_pop(x) FROM t"),
            some(&["1.2583057392117916", "1.5833333333333333", "1.0555555555555556"])
        );
        let numerics = [
            "CREATE TABLE t (x numeric)",
            "INSERT INTO t VALUES ('1.50'), ('2.5'), (4)",
        ];
        assert_eq!(
            row(&numerics, "SELECT stddev(x), variance(x), var_pop(x) FROM t"),
            some(&["1.2583057392117916", "1.5833333333333333", "1.05555555555555555556"])
        );
        let single = ["CREATE TABLE t (x int)", "INSERT INTO t VALUES (1)"];
        assert_eq!(
            row(&single, "SELECT stddev(x), var_pop(x) FROM t"),
            vec![None, Some("0".to_owned())]
        );
    }
}
