//! Sequences as the layer keeps them: one row of `_cambium_sequences` per sequence inside the database (its
//! definition and its state), so sequences branch, restore and time-travel with the data; and a SQLite view of
//! the sequence's name over that row, so the name is taken in the relations' namespace as PostgreSQL takes it
//! (a table and a sequence cannot share a name), `SELECT last_value, is_called FROM s` reads it, every
//! CREATE or DROP moves SQLite's `schema_version` (which the translation cache and the catalog snapshot
//! follow), and the sequence's OID is its view's, in creation order with the tables.
//!
//! This module holds the pure rules: the defaults and checks of `CREATE`/`ALTER SEQUENCE` options with
//! PostgreSQL's messages, `nextval` (bounds, `CYCLE`) and `setval`. The SQL functions are in
//! `functions::sequence`, the statements in `translate::sequence`.

use crate::catalog::{quote_ident, quote_literal};
use crate::error::{PgError, INVALID_PARAMETER_VALUE, NUMERIC_VALUE_OUT_OF_RANGE, SEQUENCE_GENERATOR_LIMIT_EXCEEDED};
use crate::types::{Base, PgType};

/// The catalog table of sequences.
pub const SEQUENCES_TABLE: &str = "_cambium_sequences";

/// The statement that makes the table (run inside the DDL's transaction). `id` is never reused
/// (AUTOINCREMENT), so a session's `currval` of a dropped sequence never answers for a new one of the same
/// name; `owner_table`/`owner_column` are `OWNED BY` (a serial or identity column's sequence); `identity` is
/// `a` (ALWAYS) or `d` (BY DEFAULT) for an identity column's sequence, else empty.
pub const CREATE_SEQUENCES_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_sequences (\
     id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, type TEXT NOT NULL, \
     start_value INTEGER NOT NULL, increment_by INTEGER NOT NULL, min_value INTEGER NOT NULL, \
     max_value INTEGER NOT NULL, cache_size INTEGER NOT NULL, cycle INTEGER NOT NULL, \
     last_value INTEGER NOT NULL, is_called INTEGER NOT NULL, \
     owner_table TEXT, owner_column TEXT, identity TEXT NOT NULL DEFAULT '')";

/// The PostgreSQL types of the columns a sequence's view shows, recorded in `_cambium_columns` with the table
/// so `SELECT last_value, is_called FROM s` is typed as PostgreSQL types it.
pub const RECORDED_COLUMNS: &[(&str, PgType)] = &[("last_value", PgType::INT8), ("is_called", PgType::BOOL)];

/// A sequence's definition and state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequence {
    /// Its name (as SQLite and the catalog views show it).
    pub name: String,
    /// `smallint`, `integer` or `bigint`.
    pub data_type: PgType,
    /// `START WITH`.
    pub start: i64,
    /// `INCREMENT BY`, never 0.
    pub increment: i64,
    /// `MINVALUE`, below `max`.
    pub min: i64,
    /// `MAXVALUE`.
    pub max: i64,
    /// `CACHE` (kept and shown; every value is handed out from the database, so it changes nothing).
    pub cache: i64,
    /// `CYCLE`.
    pub cycle: bool,
    /// The last value handed out, or the next one when `is_called` is false.
    pub last_value: i64,
    /// Whether `last_value` was handed out.
    pub is_called: bool,
}

/// The options a `CREATE SEQUENCE`, `ALTER SEQUENCE` or identity column gives; `None` where not given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `AS type`.
    pub data_type: Option<PgType>,
    /// `INCREMENT [BY] n`.
    pub increment: Option<i64>,
    /// `MINVALUE n` (`Some(None)`: `NO MINVALUE`).
    pub min: Option<Option<i64>>,
    /// `MAXVALUE n` (`Some(None)`: `NO MAXVALUE`).
    pub max: Option<Option<i64>>,
    /// `START [WITH] n`.
    pub start: Option<i64>,
    /// `RESTART [[WITH] n]` (`Some(None)`: restart at the start value).
    pub restart: Option<Option<i64>>,
    /// `CACHE n`.
    pub cache: Option<i64>,
    /// `[NO] CYCLE`.
    pub cycle: Option<bool>,
}

impl Options {
    /// The options as JSON text (what an `ALTER SEQUENCE` step carries to the function that applies them at
    /// run time, to the state the sequence has then).
    pub fn to_json(&self) -> String {
        let opt = |v: Option<i64>| v.map_or(serde_json::Value::Null, serde_json::Value::from);
        let nested = |v: Option<Option<i64>>| match v {
            None => serde_json::Value::Null,
            Some(inner) => serde_json::json!({ "value": opt(inner) }),
        };
        serde_json::json!({
            "type": self.data_type.map(|t| t.internal_name()),
            "increment": opt(self.increment),
            "min": nested(self.min),
            "max": nested(self.max),
            "start": opt(self.start),
            "restart": nested(self.restart),
            "cache": opt(self.cache),
            "cycle": self.cycle,
        })
        .to_string()
    }

    /// Reads [`Options::to_json`] back; `None` for text it did not write.
    pub fn from_json(text: &str) -> Option<Options> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let int = |key: &str| value.get(key).and_then(serde_json::Value::as_i64);
        let nested = |key: &str| {
            value
                .get(key)
                .filter(|v| !v.is_null())
                .map(|v| v.get("value").and_then(serde_json::Value::as_i64))
        };
        let data_type = match value.get("type").and_then(serde_json::Value::as_str) {
            Some(name) => Some(PgType::from_name(name)?),
            None => None,
        };
        Some(Options {
            data_type,
            increment: int("increment"),
            min: nested("min"),
            max: nested("max"),
            start: int("start"),
            restart: nested("restart"),
            cache: int("cache"),
            cycle: value.get("cycle").and_then(serde_json::Value::as_bool),
        })
    }
}

/// The bounds of a sequence type.
fn type_bounds(ty: PgType) -> (i64, i64) {
    match ty.base() {
        Base::Int2 => (i64::from(i16::MIN), i64::from(i16::MAX)),
        Base::Int4 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    }
}

/// The type a sequence may have (`AS type`): 22023 for any but the integers.
pub fn sequence_type(ty: PgType) -> Result<PgType, PgError> {
    if ty.is_integer() {
        Ok(PgType::new(ty.base()))
    } else {
        Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "sequence type must be smallint, integer, or bigint",
        ))
    }
}

fn invalid(message: String) -> PgError {
    PgError::new(INVALID_PARAMETER_VALUE, message)
}

impl Sequence {
    /// A new sequence from its options, with PostgreSQL's defaults and checks (`CREATE SEQUENCE`).
    pub fn create(name: &str, options: &Options) -> Result<Sequence, PgError> {
        let data_type = options.data_type.map_or(Ok(PgType::INT8), sequence_type)?;
        let mut sequence = Sequence {
            name: name.to_owned(),
            data_type,
            start: 0,
            increment: 1,
            min: 0,
            max: 0,
            cache: 1,
            cycle: false,
            last_value: 0,
            is_called: false,
        };
        sequence.apply(options, true)?;
        Ok(sequence)
    }

    /// This sequence changed by `ALTER SEQUENCE` options, with PostgreSQL's checks.
    pub fn alter(&self, options: &Options) -> Result<Sequence, PgError> {
        let mut sequence = self.clone();
        sequence.apply(options, false)?;
        Ok(sequence)
    }

    /// PostgreSQL's `init_params`: options over the current values (`creating`: everything not given takes
    /// its default).
    fn apply(&mut self, options: &Options, creating: bool) -> Result<(), PgError> {
        let old_type = self.data_type;
        let (old_low, old_high) = type_bounds(old_type);
        if let Some(ty) = options.data_type {
            self.data_type = sequence_type(ty)?;
        }
        let type_changed = self.data_type != old_type;
        if let Some(increment) = options.increment {
            if increment == 0 {
                return Err(invalid("INCREMENT must not be zero".to_owned()));
            }
            self.increment = increment;
        }
        if let Some(cycle) = options.cycle {
            self.cycle = cycle;
        }
        let (low, high) = type_bounds(self.data_type);
        let ascending = self.increment > 0;
        match options.max {
            Some(Some(max)) => self.max = max,
            Some(None) => self.max = if ascending { high } else { -1 },
            None if creating => self.max = if ascending { high } else { -1 },
            // A maximum that was the old type's own follows the type.
            None if type_changed && (self.max == old_high || self.max > high) => self.max = high,
            None => {}
        }
        match options.min {
            Some(Some(min)) => self.min = min,
            Some(None) => self.min = if ascending { 1 } else { low },
            None if creating => self.min = if ascending { 1 } else { low },
            None if type_changed && (self.min == old_low || self.min < low) => self.min = low,
            None => {}
        }
        let type_name = self.data_type.sql_name();
        if self.max < low || self.max > high {
            return Err(invalid(format!(
                "MAXVALUE ({}) is out of range for sequence data type {type_name}",
                self.max
            )));
        }
        if self.min < low || self.min > high {
            return Err(invalid(format!(
                "MINVALUE ({}) is out of range for sequence data type {type_name}",
                self.min
            )));
        }
        if self.min >= self.max {
            return Err(invalid(format!(
                "MINVALUE ({}) must be less than MAXVALUE ({})",
                self.min, self.max
            )));
        }
        match options.start {
            Some(start) => self.start = start,
            None if creating => self.start = if ascending { self.min } else { self.max },
            None => {}
        }
        if self.start < self.min {
            return Err(invalid(format!(
                "START value ({}) cannot be less than MINVALUE ({})",
                self.start, self.min
            )));
        }
        if self.start > self.max {
            return Err(invalid(format!(
                "START value ({}) cannot be greater than MAXVALUE ({})",
                self.start, self.max
            )));
        }
        match options.restart {
            Some(restart) => {
                self.last_value = restart.unwrap_or(self.start);
                self.is_called = false;
            }
            None if creating => {
                self.last_value = self.start;
                self.is_called = false;
            }
            None => {}
        }
        if self.last_value < self.min {
            return Err(invalid(format!(
                "RESTART value ({}) cannot be less than MINVALUE ({})",
                self.last_value, self.min
            )));
        }
        if self.last_value > self.max {
            return Err(invalid(format!(
                "RESTART value ({}) cannot be greater than MAXVALUE ({})",
                self.last_value, self.max
            )));
        }
        if let Some(cache) = options.cache {
            if cache <= 0 {
                return Err(invalid(format!("CACHE ({cache}) must be greater than zero")));
            }
            self.cache = cache;
        }
        Ok(())
    }

    /// The value `nextval` hands out: the next step, wrapped around with `CYCLE`, 2200H past a bound.
    pub fn next_value(&self) -> Result<i64, PgError> {
        if !self.is_called {
            return Ok(self.last_value);
        }
        let stepped = self.last_value.checked_add(self.increment);
        if self.increment > 0 {
            match stepped {
                Some(next) if next <= self.max => Ok(next),
                _ if self.cycle => Ok(self.min),
                _ => Err(PgError::new(
                    SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                    format!(
                        "nextval: reached maximum value of sequence \"{}\" ({})",
                        self.name, self.max
                    ),
                )),
            }
        } else {
            match stepped {
                Some(next) if next >= self.min => Ok(next),
                _ if self.cycle => Ok(self.max),
                _ => Err(PgError::new(
                    SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                    format!(
                        "nextval: reached minimum value of sequence \"{}\" ({})",
                        self.name, self.min
                    ),
                )),
            }
        }
    }

    /// Checks a `setval` value against the bounds (22003 outside them).
    pub fn check_setval(&self, value: i64) -> Result<(), PgError> {
        if value < self.min || value > self.max {
            return Err(PgError::new(
                NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "setval: value {value} is out of bounds for sequence \"{}\" ({}..{})",
                    self.name, self.min, self.max
                ),
            ));
        }
        Ok(())
    }

    /// The statement that stores a new sequence (with its owner and identity kind, if any).
    pub fn insert_sql(&self, owner: Option<(&str, &str)>, identity: &str) -> String {
        let (table, column) = owner.map_or(("NULL".to_owned(), "NULL".to_owned()), |(t, c)| {
            (quote_literal(t), quote_literal(c))
        });
        format!(
            "INSERT INTO _cambium_sequences (name, type, start_value, increment_by, min_value, max_value, \
             cache_size, cycle, last_value, is_called, owner_table, owner_column, identity) \
             VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {table}, {column}, {})",
            quote_literal(&self.name),
            quote_literal(&self.data_type.internal_name()),
            self.start,
            self.increment,
            self.min,
            self.max,
            self.cache,
            i64::from(self.cycle),
            self.last_value,
            i64::from(self.is_called),
            quote_literal(identity)
        )
    }

    /// The statement that stores this sequence's definition and state over its row.
    pub fn update_sql(&self) -> String {
        format!(
            "UPDATE _cambium_sequences SET type = {}, start_value = {}, increment_by = {}, min_value = {}, \
             max_value = {}, cache_size = {}, cycle = {}, last_value = {}, is_called = {} WHERE name = {}",
            quote_literal(&self.data_type.internal_name()),
            self.start,
            self.increment,
            self.min,
            self.max,
            self.cache,
            i64::from(self.cycle),
            self.last_value,
            i64::from(self.is_called),
            quote_literal(&self.name)
        )
    }

    /// The columns of `_cambium_sequences` that [`Sequence::from_row`] reads, in its order.
    pub const COLUMNS: &'static str =
        "name, type, start_value, increment_by, min_value, max_value, cache_size, cycle, last_value, is_called";

    /// A sequence read from a row holding [`Sequence::COLUMNS`] from column `first` on.
    pub fn from_row(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Sequence> {
        let type_name: String = row.get(first + 1)?;
        Ok(Sequence {
            name: row.get(first)?,
            data_type: PgType::from_name(&type_name)
                .filter(|t| t.is_integer())
                .unwrap_or(PgType::INT8),
            start: row.get(first + 2)?,
            increment: row.get(first + 3)?,
            min: row.get(first + 4)?,
            max: row.get(first + 5)?,
            cache: row.get(first + 6)?,
            cycle: row.get(first + 7)?,
            last_value: row.get(first + 8)?,
            is_called: row.get(first + 9)?,
        })
    }
}

/// The view that gives a sequence its name among the relations and shows its state.
pub fn create_view_sql(name: &str) -> String {
    format!(
        "CREATE VIEW {} AS SELECT last_value, 0 AS log_cnt, is_called FROM _cambium_sequences WHERE name = {}",
        quote_ident(name),
        quote_literal(name)
    )
}

/// The steps that forget a sequence: its view and its row.
pub fn drop_sql(name: &str) -> [String; 2] {
    [
        format!("DROP VIEW IF EXISTS {}", quote_ident(name)),
        format!("DELETE FROM _cambium_sequences WHERE name = {}", quote_literal(name)),
    ]
}

/// PostgreSQL's name for the sequence of a serial or identity column: `<table>_<column>_seq`, each part cut
/// so the whole fits 63 bytes (the longer part first, as PostgreSQL's `makeObjectName` does).
pub fn serial_name(table: &str, column: &str) -> String {
    const NAME_BYTES_MAX: usize = 63;
    let mut table = table.to_owned();
    let mut column = column.to_owned();
    let overhead = "__seq".len();
    while table.len() + column.len() + overhead > NAME_BYTES_MAX {
        let longer = if table.len() >= column.len() {
            &mut table
        } else {
            &mut column
        };
        let mut cut = longer.len() - 1;
        while !longer.is_char_boundary(cut) {
            cut -= 1;
        }
        longer.truncate(cut);
    }
    format!("{table}_{column}_seq")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(options: Options) -> Result<Sequence, PgError> {
        Sequence::create("s", &options)
    }

    #[test]
    fn defaults_follow_the_direction_and_type() {
        let up = create(Options::default()).expect("valid");
        assert_eq!(
            (up.min, up.max, up.start, up.last_value, up.is_called),
            (1, i64::MAX, 1, 1, false)
        );
        let down = create(Options {
            increment: Some(-1),
            data_type: Some(PgType::INT4),
            ..Options::default()
        })
        .expect("valid");
        assert_eq!((down.min, down.max, down.start), (i64::from(i32::MIN), -1, -1));
    }

    #[test]
    fn nextval_steps_cycles_and_stops_at_the_bounds() {
        let mut countdown = create(Options {
            increment: Some(-1),
            min: Some(Some(1)),
            max: Some(Some(3)),
            start: Some(3),
            ..Options::default()
        })
        .expect("valid");
        let mut got = Vec::new();
        for _ in 0..3 {
            let next = countdown.next_value().expect("in range");
            got.push(next);
            countdown.last_value = next;
            countdown.is_called = true;
        }
        assert_eq!(got, [3, 2, 1]);
        let error = countdown.next_value().expect_err("below the minimum");
        assert_eq!(error.code, SEQUENCE_GENERATOR_LIMIT_EXCEEDED);
        assert_eq!(error.message, "nextval: reached minimum value of sequence \"s\" (1)");
        let cycler = Sequence {
            last_value: 2,
            is_called: true,
            ..create(Options {
                min: Some(Some(1)),
                max: Some(Some(2)),
                cycle: Some(true),
                ..Options::default()
            })
            .expect("valid")
        };
        assert_eq!(cycler.next_value(), Ok(1));
        let top = Sequence {
            last_value: i64::MAX,
            is_called: true,
            ..create(Options::default()).expect("valid")
        };
        assert_eq!(
            top.next_value().expect_err("overflow").code,
            SEQUENCE_GENERATOR_LIMIT_EXCEEDED
        );
    }

    #[test]
    fn bad_options_get_postgresql_errors() {
        let cases = [
            (
                Options {
                    increment: Some(0),
                    ..Options::default()
                },
                "INCREMENT must not be zero",
            ),
            (
                Options {
                    min: Some(Some(5)),
                    max: Some(Some(5)),
                    ..Options::default()
                },
                "MINVALUE (5) must be less than MAXVALUE (5)",
            ),
            (
                Options {
                    start: Some(0),
                    ..Options::default()
                },
                "START value (0) cannot be less than MINVALUE (1)",
            ),
            (
                Options {
                    data_type: Some(PgType::INT2),
                    max: Some(Some(100_000)),
                    ..Options::default()
                },
                "MAXVALUE (100000) is out of range for sequence data type smallint",
            ),
            (
                Options {
                    cache: Some(0),
                    ..Options::default()
                },
                "CACHE (0) must be greater than zero",
            ),
        ];
        for (options, message) in cases {
            let error = create(options).expect_err(message);
            assert_eq!((error.code, error.message.as_str()), (INVALID_PARAMETER_VALUE, message));
        }
        assert!(sequence_type(PgType::TEXT).is_err());
    }

    #[test]
    fn alter_restarts_and_follows_a_new_type() {
        let s = create(Options::default()).expect("valid");
        let restarted = s
            .alter(&Options {
                restart: Some(Some(10)),
                ..Options::default()
            })
            .expect("valid");
        assert_eq!((restarted.last_value, restarted.is_called), (10, false));
        let narrowed = s
            .alter(&Options {
                data_type: Some(PgType::INT4),
                ..Options::default()
            })
            .expect("valid");
        assert_eq!(narrowed.max, i64::from(i32::MAX));
        assert!(s.check_setval(0).is_err());
        assert!(s.check_setval(1).is_ok());
    }

    #[test]
    fn options_round_trip_through_json() {
        let options = Options {
            data_type: Some(PgType::INT4),
            increment: Some(-2),
            min: Some(None),
            max: Some(Some(9)),
            start: None,
            restart: Some(None),
            cache: Some(3),
            cycle: Some(true),
        };
        assert_eq!(Options::from_json(&options.to_json()), Some(options));
        assert_eq!(
            Options::from_json(&Options::default().to_json()),
            Some(Options::default())
        );
    }

    #[test]
    fn serial_names_fit_63_bytes() {
        assert_eq!(serial_name("users", "id"), "users_id_seq");
        let long = "t".repeat(70);
        let name = serial_name(&long, "id");
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("_id_seq"));
    }
}
