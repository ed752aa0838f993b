//! More of PostgreSQL's built-in functions (math, strings, JSON, dates, aggregates), registered beside the
//! core ones of `functions`.
//!
//! Many of them mean different things for different argument types (`round(2.5)` is `3` for a numeric and
//! `2` for a double precision; `to_json(true)` is `true`, not `1`, though booleans are stored as 0 and 1),
//! and a SQLite value alone does not say which. So the translator rewrites a call of such a function
//! ([`takes_types`]) to `pg_t_<name>('<type>;<type>;…', args…)`, the first argument naming the PostgreSQL
//! type it inferred for each argument (empty where it knows none). Each function is registered twice:
//! under its own name (types unknown: read from the SQLite value: INTEGER an integer, REAL a double
//! precision, TEXT that reads as a number a numeric) and under the typed name.

use std::sync::Arc;

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::Value;
use rusqlite::Connection;
use sqlparser::ast::{Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName};

use super::{owned, raise, SessionState};
use crate::error::PgError;
use crate::types::PgType;

#[path = "aggregates.rs"]
mod aggregates;
#[path = "arrays.rs"]
mod arrays;
#[path = "json/mod.rs"]
mod json;
#[path = "math/mod.rs"]
mod math;
#[path = "text/mod.rs"]
mod text;
#[path = "time/mod.rs"]
mod time;

/// The prefix of a function's typed name (`pg_t_round`).
const TYPED_PREFIX: &str = "pg_t_";
/// Separates the types in a typed call's first argument (a type's own text may hold a comma).
const TYPES_SEPARATOR: char = ';';

/// The functions whose calls the translator rewrites to their typed form.
const TYPED: &[&str] = &[
    // math
    "round",
    "trunc",
    "ceil",
    "ceiling",
    "floor",
    "abs",
    "sign",
    "mod",
    "div",
    "power",
    "pow",
    "sqrt",
    "cbrt",
    "exp",
    "ln",
    "log",
    "log10",
    "greatest",
    "least",
    "gcd",
    "lcm",
    "width_bucket",
    "factorial",
    // strings
    "concat",
    "concat_ws",
    "format",
    "quote_literal",
    "quote_nullable",
    "array_to_string",
    "to_hex",
    // json
    "to_json",
    "to_jsonb",
    "json_build_object",
    "jsonb_build_object",
    "json_build_array",
    "jsonb_build_array",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "pg_row_json",
    // dates
    "to_char",
    "isfinite",
    "date_bin",
    // arrays
    "array_length",
    "array_upper",
    "array_lower",
    "cardinality",
    "array_ndims",
    "array_dims",
    "array_append",
    "array_prepend",
    "array_cat",
    "array_remove",
    "array_replace",
    "array_position",
    "array_positions",
    "array_fill",
    "pg_array_slice",
    "pg_array_set",
    // aggregates
    "stddev",
    "stddev_samp",
    "stddev_pop",
    "variance",
    "var_samp",
    "var_pop",
];

/// Whether the translator rewrites calls of `name` to the typed form.
pub(crate) fn takes_types(name: &str) -> bool {
    TYPED.contains(&name)
}

/// The typed form of a call: `pg_t_<name>('<types>', args…)`, keeping its `ORDER BY`, `FILTER` and `OVER`.
pub(crate) fn typed_call(function: &Function, name: &str, types: &[Option<PgType>]) -> Expr {
    // Only these names are registered in the typed form ([`define`]).
    debug_assert!(
        takes_types(name),
        "a typed call of {name}, which is not registered typed"
    );
    let text: Vec<String> = types
        .iter()
        .map(|t| t.map_or_else(String::new, PgType::catalog_text))
        .collect();
    let mut typed = function.clone();
    typed.name = ObjectName::from(vec![Ident::new(format!("{TYPED_PREFIX}{name}"))]);
    let types_arg =
        Expr::Value(sqlparser::ast::Value::SingleQuotedString(text.join(&TYPES_SEPARATOR.to_string())).into());
    match &mut typed.args {
        FunctionArguments::List(list) => list
            .args
            .insert(0, FunctionArg::Unnamed(FunctionArgExpr::Expr(types_arg))),
        _ => {
            typed.args = FunctionArguments::List(sqlparser::ast::FunctionArgumentList {
                duplicate_treatment: None,
                args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(types_arg))],
                clauses: Vec::new(),
            })
        }
    }
    Expr::Function(typed)
}

/// The typed form of a call the translator builds itself (`x ^ y` is `pow(x, y)`).
pub(crate) fn typed_expr(name: &str, types: &[Option<PgType>], args: Vec<Expr>) -> Expr {
    let Expr::Function(function) = crate::translate::expr::call(name, args) else {
        unreachable!("call builds a function call");
    };
    typed_call(&function, name, types)
}

/// Registers the functions of this module.
pub(super) fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    math::install(conn, &state)?;
    text::install(conn, &state)?;
    json::install(conn, &state)?;
    time::install(conn, &state)?;
    aggregates::install(conn, &state)?;
    arrays::install(conn, &state)?;
    Ok(())
}

/// The result type of a function of this module.
pub(super) fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    let (name, args) = match name.strip_prefix(TYPED_PREFIX) {
        Some(plain) => (plain, args.get(1..).unwrap_or_default()),
        None => (name, args),
    };
    math::result_type(name, args)
        .or_else(|| text::result_type(name, args))
        .or_else(|| json::result_type(name, args))
        .or_else(|| time::result_type(name, args))
        .or_else(|| aggregates::result_type(name, args))
        .or_else(|| arrays::result_type(name, args))
}

/// The arguments of one call: their values, and the PostgreSQL types the translator inferred (typed form).
pub(super) struct Args<'c, 'a> {
    ctx: &'c Context<'a>,
    first: usize,
    types: Vec<Option<PgType>>,
}

impl<'c, 'a> Args<'c, 'a> {
    /// The arguments of a call of the plain name (`typed` false) or of the typed name.
    pub(super) fn of(ctx: &'c Context<'a>, typed: bool) -> rusqlite::Result<Args<'c, 'a>> {
        if !typed {
            return Ok(Args {
                ctx,
                first: 0,
                types: Vec::new(),
            });
        }
        let text: String = ctx.get::<Option<String>>(0)?.unwrap_or_default();
        let types = text.split(TYPES_SEPARATOR).map(PgType::from_catalog).collect();
        Ok(Args { ctx, first: 1, types })
    }

    /// How many arguments.
    pub(super) fn len(&self) -> usize {
        self.ctx.len().saturating_sub(self.first)
    }

    /// Argument `i` (NULL past the end).
    pub(super) fn value(&self, i: usize) -> Value {
        if i >= self.len() {
            return Value::Null;
        }
        owned(self.ctx.get_raw(self.first + i))
    }

    /// The type the translator inferred for argument `i`.
    pub(super) fn ty(&self, i: usize) -> Option<PgType> {
        self.types.get(i).copied().flatten()
    }

    /// Argument `i` as text (numbers printed as PostgreSQL prints them); `None` for NULL.
    pub(super) fn text(&self, i: usize) -> Option<String> {
        value_text(&self.value(i))
    }

    /// Argument `i` as an integer: 22P02 if it is not one.
    pub(super) fn int(&self, i: usize) -> Result<Option<i64>, PgError> {
        match self.value(i) {
            Value::Null => Ok(None),
            Value::Integer(v) => Ok(Some(v)),
            Value::Real(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Ok(Some(f as i64)),
            other => {
                let text = value_text(&other).unwrap_or_default();
                text.trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| PgError::invalid_input("integer", &text))
            }
        }
    }
}

/// A value as text: integers and doubles as PostgreSQL prints them, blobs read as UTF-8.
pub(super) fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::Integer(i) => Some(i.to_string()),
        Value::Real(f) => Some(crate::value::format_float8(*f)),
        Value::Text(t) => Some(t.clone()),
        Value::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

/// A function body: the call's arguments and the session, to the result or a PostgreSQL error.
pub(super) type Body = fn(&Args<'_, '_>, &SessionState) -> Result<Value, PgError>;

/// How a function behaves for SQLite's planner.
#[derive(Clone, Copy)]
pub(super) enum Purity {
    /// Same arguments, same result.
    Pure,
    /// Reads the session (its zone) or the clock, or is random.
    Volatile,
}

/// Registers `body` as `name` with `arity` arguments (`-1`: any), and as its typed name `pg_t_<name>` (one more
/// argument, the types) if the translator rewrites its calls to that ([`takes_types`]).
pub(super) fn define(
    conn: &Connection,
    state: &Arc<SessionState>,
    name: &str,
    arity: i32,
    purity: Purity,
    body: Body,
) -> rusqlite::Result<()> {
    let flags = match purity {
        Purity::Pure => super::flags_pure(),
        Purity::Volatile => FunctionFlags::SQLITE_UTF8,
    };
    // The typed name is called only for the names the translator rewrites ([`takes_types`]): registering it for
    // the others would cost every session's start a function each (a connection registers ~500).
    let forms: &[bool] = if takes_types(name) { &[false, true] } else { &[false] };
    for &typed in forms {
        let s = state.clone();
        let n = if typed && arity >= 0 { arity + 1 } else { arity };
        let registered = if typed {
            format!("{TYPED_PREFIX}{name}")
        } else {
            name.to_owned()
        };
        conn.create_scalar_function(registered.as_str(), n, flags, move |ctx| {
            let args = Args::of(ctx, typed)?;
            body(&args, &s).map_err(raise)
        })?;
    }
    Ok(())
}

/// 54000 when an output would pass [`crate::VALUE_BYTES_MAX`].
pub(super) fn check_size(bytes: usize) -> Result<(), PgError> {
    if bytes > crate::VALUE_BYTES_MAX {
        return Err(PgError::new(
            crate::error::PROGRAM_LIMIT_EXCEEDED,
            "result exceeds the maximum value size",
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testing {
    //! Runs one PostgreSQL statement through the whole layer and prints its first row as PostgreSQL would.

    use rusqlite::types::Value;
    use rusqlite::Connection;

    use crate::error::PgError;
    use crate::{value, Dialect, PgType, Translated};

    /// The first row of `sql` (run after `setup`), each column printed as PostgreSQL prints it.
    pub(crate) fn row_after(setup: &[&str], sql: &str) -> Result<Vec<Option<String>>, PgError> {
        let conn = Connection::open_in_memory().expect("memory database");
        let mut dialect = Dialect::new(&conn, "db", "user", 1).expect("installs");
        let mut last = Vec::new();
        for statement in setup.iter().chain(std::iter::once(&sql)) {
            last = run(&conn, &mut dialect, statement)?;
        }
        Ok(last)
    }

    fn run(conn: &Connection, dialect: &mut Dialect, sql: &str) -> Result<Vec<Option<String>>, PgError> {
        let translated = dialect.translate(conn, sql).map_err(|e| match e {
            crate::TranslateError::Sql(e) => e,
            crate::TranslateError::Sqlite(e) => panic!("{sql}: {e}"),
        })?;
        let Translated::Statements(list) = &*translated else {
            panic!("not a statement: {sql}");
        };
        let pg = |e: rusqlite::Error| crate::error_of(&e.to_string()).unwrap_or_else(|| panic!("{sql}: {e}"));
        let mut out = Vec::new();
        // Steps run in order, as the compute runs them; the primary one's first row is the answer.
        for t in list {
            for (i, step) in t.steps.iter().enumerate() {
                if i != t.primary {
                    conn.execute_batch(step).map_err(pg)?;
                    continue;
                }
                let mut stmt = conn.prepare(step).map_err(pg)?;
                let types = dialect.column_types(&stmt, Some(t));
                let width = stmt.column_count();
                let mut rows = stmt.raw_query();
                out.clear();
                if let Some(row) = rows.next().map_err(pg)? {
                    for (i, ty) in types.iter().enumerate().take(width) {
                        let v: Value = row.get(i).expect("a value");
                        out.push(value::output(
                            ty.unwrap_or(PgType::TEXT),
                            &v,
                            &dialect.state().time_zone(),
                        ));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The one column of the first row of `sql`, as PostgreSQL prints it (`None` for NULL).
    pub(crate) fn one(sql: &str) -> Option<String> {
        row_after(&[], sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .next()
            .flatten()
    }

    /// The SQLSTATE `sql` fails with.
    pub(crate) fn code(sql: &str) -> &'static str {
        match row_after(&[], sql) {
            Ok(row) => panic!("{sql}: expected an error, got {row:?}"),
            Err(e) => e.code,
        }
    }

    /// Asserts each `(sql, PostgreSQL's output)`.
    pub(crate) fn check(cases: &[(&str, Option<&str>)]) {
        for (sql, want) in cases {
            assert_eq!(one(&format!("SELECT {sql}")).as_deref(), *want, "SELECT {sql}");
        }
    }

    /// Asserts each `(sql, PostgreSQL's SQLSTATE)`.
    pub(crate) fn check_errors(cases: &[(&str, &str)]) {
        for (sql, want) in cases {
            assert_eq!(code(&format!("SELECT {sql}")), *want, "SELECT {sql}");
        }
    }
}
