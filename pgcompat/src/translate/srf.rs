//! Set-returning functions as FROM items SQLite can join laterally: each one becomes SQLite's table-valued
//! `json_each` over a JSON array (or object) the function's arguments make, under a fresh alias, and its
//! PostgreSQL columns become expressions over `json_each`'s columns (`key`, `value`, `type`, `fullkey`,
//! and the hidden `json`). A table-valued function may read the columns of the FROM items before it, so
//! `FROM docs d, jsonb_array_elements_text(d.body -> 'tags') AS t(tag)` and `CROSS JOIN LATERAL unnest(x)`
//! work as they do in PostgreSQL, which a derived table (no LATERAL in SQLite) could not.
//!
//! The rewriter keeps each such item's columns ([`FunctionTable`]) in the scope of its SELECT: a
//! reference to one (`t.tag`, `value`) is replaced by its expression, and `SELECT *` is spelled out. A
//! set-returning function in a SELECT list (`SELECT unnest(a) FROM t`) moves into the FROM the same way.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, TableAlias, TableFactor};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::expr::{last_part, Typer};

mod grouping;
mod list;
mod record;

use crate::catalog::quote_ident;
use crate::error::PgError;
use crate::types::{Base, PgType};
pub(crate) use list::projection;

/// The prefix of the aliases given to the `json_each` items made here.
pub(crate) const ALIAS_PREFIX: &str = "_pgc_fn_";

/// One column of a set-returning function in FROM: its PostgreSQL name, the expression that computes it
/// over the `json_each` item, and its type.
#[derive(Clone, Debug)]
pub(crate) struct FunctionColumn {
    pub(crate) name: String,
    pub(crate) expr: Expr,
    pub(crate) ty: Option<PgType>,
}

/// A set-returning function in FROM, rewritten: the alias SQLite knows it by, the one PostgreSQL
/// statements use, and its columns.
#[derive(Clone, Debug)]
pub(crate) struct FunctionTable {
    pub(crate) sqlite_alias: String,
    pub(crate) alias: String,
    pub(crate) columns: Vec<FunctionColumn>,
}

impl FunctionTable {
    /// The column `name`, if this table has it; a function of one column is also its table's alias (`SELECT
    /// e FROM jsonb_array_elements(…) e`, whose column PostgreSQL names `value`).
    pub(crate) fn column(&self, name: &str) -> Option<&FunctionColumn> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .or_else(|| match self.columns.as_slice() {
                [only] if self.alias.eq_ignore_ascii_case(name) => Some(only),
                _ => None,
            })
    }
}

/// What a function's `json_each` iterates and how its rows become columns.
enum Shape {
    /// `json[b]_each[_text]`: `key`, `value`.
    Each { jsonb: bool, text: bool },
    /// `json[b]_array_elements[_text]`: `value`.
    Elements { jsonb: bool, text: bool },
    /// `json[b]_object_keys`: the key.
    Keys,
    /// Elements of a JSON array the layer built, read back as `element`.
    Values { element: PgType },
    /// `generate_subscripts(array, 1)`: positions from 1.
    Subscripts,
    /// `unnest(a, b, …)`: rows of elements side by side, each read back as its element type.
    Zip { elements: Vec<PgType> },
}

impl Shape {
    /// Whether the rows come from an array (so `WITH ORDINALITY` is the position).
    fn over_array(&self) -> bool {
        !matches!(self, Shape::Each { .. } | Shape::Keys)
    }

    /// Whether the function returns one (non-composite) column, which a bare table alias names.
    fn scalar(&self) -> bool {
        // `json[b]_array_elements[_text]` declare their column (`OUT value`): an alias does not rename it.
        !matches!(self, Shape::Each { .. } | Shape::Elements { .. } | Shape::Zip { .. })
    }
}

fn fresh_alias() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{ALIAS_PREFIX}{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn parse_expr(sql: &str) -> Result<Expr, PgError> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| {
            PgError::new(
                crate::error::INTERNAL_ERROR,
                format!("rewriting a function in FROM: {e}"),
            )
        })
}

/// Whether `name` is a set-returning function this module rewrites (in FROM or a SELECT list).
pub(crate) fn handles(name: &str) -> bool {
    matches!(
        name,
        "jsonb_each"
            | "json_each"
            | "jsonb_each_text"
            | "json_each_text"
            | "jsonb_array_elements"
            | "json_array_elements"
            | "jsonb_array_elements_text"
            | "json_array_elements_text"
            | "jsonb_object_keys"
            | "json_object_keys"
            | "unnest"
            | "regexp_split_to_table"
            | "regexp_matches"
            | "generate_subscripts"
            | "generate_series"
            | "pg_options_to_table"
    ) || record::is_record_function(name).is_some()
}

/// The `json_each` source and shape of a call of `name` with (rewritten) `args`.
fn source(typer: &Typer<'_>, name: &str, args: &[&Expr]) -> Result<(String, Shape), PgError> {
    let (min, max) = match name {
        "unnest" => (1, usize::MAX),
        "regexp_split_to_table" | "regexp_matches" | "generate_subscripts" | "generate_series" => (2, 3),
        _ => (1, 1),
    };
    if args.len() < min || args.len() > max {
        return Err(PgError::new(
            crate::error::UNDEFINED_FUNCTION,
            format!("function {name} with {} arguments does not exist", args.len()),
        ));
    }
    if name == "pg_options_to_table" {
        // `name=value` options as a JSON object, each member a row (`option_name`, `option_value`).
        return Ok((
            format!("pg_options_json({})", args[0]),
            Shape::Each {
                jsonb: false,
                text: true,
            },
        ));
    }
    if name.starts_with("json") {
        json_source(typer, name, args[0])
    } else {
        array_source(typer, name, args)
    }
}

/// The JSON set-returning functions: their one argument made the JSON flavor they take.
fn json_source(typer: &Typer<'_>, name: &str, arg: &Expr) -> Result<(String, Shape), PgError> {
    let jsonb = name.starts_with("jsonb");
    let text = name.ends_with("_text");
    let flavor = if jsonb { "jsonb" } else { "json" };
    let json = json_argument(typer, arg, flavor);
    Ok(match name {
        "jsonb_each" | "json_each" | "jsonb_each_text" | "json_each_text" => (json, Shape::Each { jsonb, text }),
        "jsonb_array_elements" | "json_array_elements" | "jsonb_array_elements_text" | "json_array_elements_text" => {
            (format!("pg_json_array({json})"), Shape::Elements { jsonb, text })
        }
        "jsonb_object_keys" | "json_object_keys" => (format!("pg_json_object({json})"), Shape::Keys),
        other => return Err(PgError::unsupported(format!("the set-returning function {other} here"))),
    })
}

/// `arg` made the JSON flavor (`json` or `jsonb`) a function takes, from whatever type it has.
fn json_argument(typer: &Typer<'_>, arg: &Expr, flavor: &str) -> String {
    let source = typer.infer(arg).map_or_else(String::new, PgType::catalog_text);
    format!("pg_cast({arg}, '{flavor}', '{source}')")
}

/// The set-returning functions over arrays and other values, each made a JSON array to iterate.
fn array_source(typer: &Typer<'_>, name: &str, args: &[&Expr]) -> Result<(String, Shape), PgError> {
    let element_of = |arg: &Expr| typer.infer(arg).map_or(PgType::TEXT, PgType::element);
    let list: Vec<String> = args.iter().map(ToString::to_string).collect();
    if args.len() == 1 && name == "unnest" && super::vectors::is_vector(typer, args[0]) {
        return Ok((
            format!("pg_array_to_json({}, 'int8')", super::vectors::as_array(args[0])),
            Shape::Values { element: PgType::INT8 },
        ));
    }
    if args.len() == 2 && name == "generate_subscripts" && super::vectors::is_vector(typer, args[0]) {
        // A vector's subscripts run from 0.
        let array = super::vectors::as_array(args[0]);
        return Ok((
            format!(
                "CASE WHEN {dim} = 1 THEN pg_series_json('{}', 0, coalesce(array_length({array}, 1), 0) - 1) END",
                PgType::INT4.catalog_text(),
                dim = args[1]
            ),
            Shape::Values { element: PgType::INT4 },
        ));
    }
    Ok(match name {
        "unnest" if args.len() > 1 => {
            let elements: Vec<PgType> = args.iter().map(|a| element_of(a)).collect();
            let pairs: Vec<String> = args
                .iter()
                .zip(&elements)
                .map(|(a, e)| format!("{a}, '{}'", e.catalog_text()))
                .collect();
            (
                format!("pg_arrays_zip_json({})", pairs.join(", ")),
                Shape::Zip { elements },
            )
        }
        "unnest" => {
            let element = element_of(args[0]);
            (
                format!("pg_array_to_json({}, '{}')", args[0], element.catalog_text()),
                Shape::Values { element },
            )
        }
        "regexp_split_to_table" => (
            format!("pg_array_to_json(regexp_split_to_array({}), 'text')", list.join(", ")),
            Shape::Values { element: PgType::TEXT },
        ),
        "regexp_matches" => (
            format!("pg_regexp_matches_json({})", list.join(", ")),
            Shape::Values {
                element: PgType::TEXT.array(),
            },
        ),
        "generate_subscripts" if args.len() == 3 => {
            return Err(PgError::unsupported("generate_subscripts in reverse"));
        }
        // A dimension given as a parameter (SQLAlchemy's) or another one than 1: the series of its bounds.
        "generate_subscripts" if args[1].to_string() != "1" => (
            format!(
                "pg_series_json('{}', array_lower({array}, {dim}), array_upper({array}, {dim}))",
                PgType::INT4.catalog_text(),
                array = args[0],
                dim = args[1]
            ),
            Shape::Values { element: PgType::INT4 },
        ),
        "generate_subscripts" => {
            let element = element_of(args[0]);
            (
                format!("pg_array_to_json({}, '{}')", args[0], element.catalog_text()),
                Shape::Subscripts,
            )
        }
        "generate_series" => {
            let types: Vec<Option<PgType>> = args.iter().map(|a| typer.infer(a)).collect();
            let element = series_type(&types)?;
            (
                format!("pg_series_json('{}', {})", element.catalog_text(), list.join(", ")),
                Shape::Values { element },
            )
        }
        other => return Err(PgError::unsupported(format!("the set-returning function {other} here"))),
    })
}

/// The element type of `generate_series` over arguments of these types (integers, numerics, timestamps).
fn series_type(types: &[Option<PgType>]) -> Result<PgType, PgError> {
    let bases: Vec<Base> = types.iter().take(2).flatten().map(|t| t.base()).collect();
    if bases
        .iter()
        .any(|b| matches!(b, Base::Timestamp | Base::Timestamptz | Base::Date))
    {
        // Dates alone take the `timestamptz` form (date's preferred cast), as PostgreSQL resolves them.
        return Ok(
            if bases.contains(&Base::Timestamptz) || bases.iter().all(|b| *b == Base::Date) {
                PgType::TIMESTAMPTZ
            } else {
                PgType::new(Base::Timestamp)
            },
        );
    }
    if types.iter().flatten().any(|t| t.base() == Base::Numeric) {
        return Ok(PgType::NUMERIC);
    }
    if types.iter().flatten().any(|t| t.base() == Base::Int8) {
        return Ok(PgType::INT8);
    }
    Ok(PgType::INT4)
}

/// The columns of `shape` over the `json_each` item aliased `a`, with their default names.
fn columns(shape: &Shape, function: &str, a: &str) -> Result<Vec<FunctionColumn>, PgError> {
    let a = quote_ident(a);
    let column = |name: &str, sql: String, ty: Option<PgType>| -> Result<FunctionColumn, PgError> {
        Ok(FunctionColumn {
            name: name.to_owned(),
            expr: parse_expr(&sql)?,
            ty,
        })
    };
    let json_flavor = |jsonb: bool| PgType::new(if jsonb { Base::Jsonb } else { Base::Json });
    // The element as JSON text: jsonb normalized, json as written.
    let element_json = |jsonb: bool| {
        if jsonb {
            format!("pg_jsonb_norm({a}.json -> {a}.fullkey)")
        } else {
            format!("pg_json_get({a}.json, {a}.key, 'json')")
        }
    };
    let element_text = |jsonb: bool| {
        if jsonb {
            format!(
                "CASE {a}.type WHEN 'null' THEN NULL WHEN 'text' THEN {a}.value WHEN 'object' THEN \
                 pg_jsonb_norm({a}.json -> {a}.fullkey) WHEN 'array' THEN pg_jsonb_norm({a}.json -> {a}.fullkey) \
                 ELSE {a}.json -> {a}.fullkey END"
            )
        } else {
            format!("pg_json_get({a}.json, {a}.key, 'text')")
        }
    };
    Ok(match shape {
        Shape::Each { jsonb, text } => {
            let (value, ty) = if *text {
                (element_text(*jsonb), PgType::TEXT)
            } else {
                (element_json(*jsonb), json_flavor(*jsonb))
            };
            vec![
                column("key", format!("{a}.key"), Some(PgType::TEXT))?,
                column("value", value, Some(ty))?,
            ]
        }
        Shape::Elements { jsonb, text } => {
            let (value, ty) = if *text {
                (element_text(*jsonb), PgType::TEXT)
            } else {
                (element_json(*jsonb), json_flavor(*jsonb))
            };
            vec![column("value", value, Some(ty))?]
        }
        Shape::Keys => vec![column(function, format!("{a}.key"), Some(PgType::TEXT))?],
        Shape::Values { element } => vec![column(
            function,
            format!("pg_cast({a}.value, '{}', '')", element.catalog_text()),
            Some(*element),
        )?],
        Shape::Subscripts => vec![column(function, format!("{a}.key + 1"), Some(PgType::INT4))?],
        Shape::Zip { elements } => elements
            .iter()
            .enumerate()
            .map(|(i, element)| {
                column(
                    function,
                    format!(
                        "pg_cast(json_extract({a}.value, '$[{i}]'), '{}', '')",
                        element.catalog_text()
                    ),
                    Some(*element),
                )
            })
            .collect::<Result<_, _>>()?,
    })
}

/// A set-returning function call rewritten as a `json_each` FROM item and its columns, named by `alias`
/// (its column list renames them in order; a bare alias names the one column of a scalar function).
pub(crate) fn function_table(
    typer: &Typer<'_>,
    name: &str,
    args: &[&Expr],
    alias: Option<&TableAlias>,
    with_ordinality: bool,
) -> Result<(TableFactor, FunctionTable), PgError> {
    if record::is_record_function(name).is_some() {
        return record::record_table(typer, name, args, alias, with_ordinality);
    }
    let (source, shape) = source(typer, name, args)?;
    let sqlite_alias = fresh_alias();
    let mut columns = columns(&shape, name, &sqlite_alias)?;
    if name == "pg_options_to_table" {
        for (column, given) in columns.iter_mut().zip(["option_name", "option_value"]) {
            column.name = given.to_owned();
        }
    }
    if with_ordinality {
        if !shape.over_array() {
            return Err(PgError::unsupported(format!("{name} WITH ORDINALITY")));
        }
        columns.push(FunctionColumn {
            name: "ordinality".to_owned(),
            expr: parse_expr(&format!("{}.key + 1", quote_ident(&sqlite_alias)))?,
            ty: Some(PgType::INT8),
        });
    }
    let table_alias = alias.map_or_else(|| name.to_owned(), |a| a.name.value.clone());
    match alias {
        Some(a) if !a.columns.is_empty() => {
            if a.columns.len() > columns.len() {
                return Err(PgError::new(
                    crate::error::SYNTAX_ERROR,
                    format!(
                        "{name} returns {} columns, {} column aliases given",
                        columns.len(),
                        a.columns.len()
                    ),
                ));
            }
            for (column, given) in columns.iter_mut().zip(&a.columns) {
                column.name = given.name.value.clone();
            }
        }
        Some(a) if shape.scalar() => columns[0].name = a.name.value.clone(),
        _ => {}
    }
    json_each_item(&source, sqlite_alias, table_alias, columns)
}

/// The `json_each` FROM item over `source` under `sqlite_alias`, and its table of `columns`.
fn json_each_item(
    source: &str,
    sqlite_alias: String,
    alias: String,
    columns: Vec<FunctionColumn>,
) -> Result<(TableFactor, FunctionTable), PgError> {
    let factor = parse_factor(&format!(
        "SELECT * FROM json_each({source}) AS {}",
        quote_ident(&sqlite_alias)
    ))?;
    // A column's expression stands where its references were: an operator's in parentheses, so that an
    // operator around the reference binds as written (`ordinality || 'x'` is not `key + (1 || 'x')`).
    let columns = columns
        .into_iter()
        .map(|mut column| {
            if matches!(column.expr, Expr::BinaryOp { .. } | Expr::UnaryOp { .. }) {
                column.expr = Expr::Nested(Box::new(column.expr));
            }
            column
        })
        .collect();
    Ok((
        factor,
        FunctionTable {
            sqlite_alias,
            alias,
            columns,
        },
    ))
}

/// The FROM item of `SELECT * FROM <item>`.
fn parse_factor(sql: &str) -> Result<TableFactor, PgError> {
    let internal = |what: &str| {
        PgError::new(
            crate::error::INTERNAL_ERROR,
            format!("rewriting a function in FROM: {what}"),
        )
    };
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).map_err(|e| internal(&e.to_string()))?;
    let Some(sqlparser::ast::Statement::Query(query)) = statements.pop() else {
        return Err(internal("no query"));
    };
    let sqlparser::ast::SetExpr::Select(mut select) = *query.body else {
        return Err(internal("no SELECT"));
    };
    select.from.pop().map(|t| t.relation).ok_or_else(|| internal("no FROM"))
}

/// The plain arguments of a table function (named ones are refused: none of these functions has any).
fn plain(args: &[FunctionArg]) -> Result<Vec<&Expr>, PgError> {
    args.iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
            other => Err(PgError::unsupported(format!(
                "the argument {other} of a set-returning function"
            ))),
        })
        .collect()
}

/// The rewrite of a FROM item that is a set-returning function this module handles, if it is one.
/// `generate_series` with constant arguments is left to `tables` (a recursive CTE, unbounded).
pub(crate) fn from_item(
    typer: &Typer<'_>,
    factor: &TableFactor,
) -> Result<Option<(TableFactor, FunctionTable)>, PgError> {
    match factor {
        TableFactor::Table {
            name,
            args: Some(args),
            alias,
            with_ordinality,
            ..
        } => {
            let function = last_part(name).to_ascii_lowercase();
            if !handles(&function) {
                return Ok(None);
            }
            let args = plain(&args.args)?;
            // An integer or timestamp series in FROM stays a recursive CTE (`tables`), unbounded; a
            // numeric one is built here, for numeric addition.
            if function == "generate_series" {
                let types: Vec<Option<PgType>> = args.iter().map(|a| typer.infer(a)).collect();
                if series_type(&types)? != PgType::NUMERIC {
                    return Ok(None);
                }
            }
            function_table(typer, &function, &args, alias.as_ref(), *with_ordinality).map(Some)
        }
        TableFactor::Function {
            name,
            args,
            alias,
            with_ordinality,
            ..
        } => {
            let function = last_part(name).to_ascii_lowercase();
            if !handles(&function) {
                return Err(PgError::unsupported(format!("the function {function} in FROM")));
            }
            let args = plain(args)?;
            function_table(typer, &function, &args, alias.as_ref(), *with_ordinality).map(Some)
        }
        TableFactor::UNNEST {
            alias,
            array_exprs,
            with_ordinality,
            with_offset: false,
            ..
        } => {
            let arrays: Vec<&Expr> = array_exprs.iter().collect();
            function_table(typer, "unnest", &arrays, alias.as_ref(), *with_ordinality).map(Some)
        }
        _ => Ok(None),
    }
}
