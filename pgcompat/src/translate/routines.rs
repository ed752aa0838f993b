//! `CREATE FUNCTION … LANGUAGE sql` and `DROP FUNCTION` (kept in `_cambium_functions`, see
//! [`crate::routines`]), and calls of those functions inlined before a statement's expressions are
//! rewritten: `add_one(41)` becomes `CAST((CAST(41 AS integer) + 1) AS integer)` for a body `SELECT a + 1`,
//! and a body that reads tables becomes a scalar subquery (its first row, NULL when it has none — what a
//! SQL function returning a scalar gives). Other languages, set-returning functions, argument defaults and
//! OUT parameters are 0A000.

use sqlparser::ast::{
    ArgMode, CreateFunction, CreateFunctionBody, DataType, DropFunction, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, FunctionBehavior, FunctionReturnType, ObjectName, Query, SetExpr, Statement, Value,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::{Catalog, BUMP_SCHEMA_VERSION};
use crate::error::{PgError, UNDEFINED_FUNCTION};
use crate::routines::{self, Routine, CREATE_FUNCTIONS_TABLE};
use crate::types::PgType;

use super::{Kind, Translation};

/// 42723.
const DUPLICATE_FUNCTION: &str = "42723";
/// 42725.
const AMBIGUOUS_FUNCTION: &str = "42725";
/// 54001: a function that calls itself, directly or not, past this depth.
const STATEMENT_TOO_COMPLEX: &str = "54001";
/// Deepest nesting of inlined calls.
const INLINE_DEPTH_MAX: usize = 32;

fn steps(tag: &str, steps: Vec<String>) -> Translation {
    Translation {
        primary: steps.len().saturating_sub(1),
        steps,
        columns: None,
        params: Vec::new(),
        kind: Kind::Other(tag.to_owned()),
        uses_now: false,
        foreign_keys_off: false,
        param_columns: Vec::new(),
        captures: Vec::new(),
        bound: None,
        notices: Vec::new(),
        column_origins: false,
    }
}

/// `name(type, …)` as PostgreSQL's messages write a function.
fn signature(name: &str, types: &[PgType], catalog: &Catalog) -> String {
    let types: Vec<String> = types.iter().map(|t| super::enums::display_name(catalog, *t)).collect();
    let (_, bare) = crate::schemas::split_sqlite_name(name, catalog.schemas());
    format!("{bare}({})", types.join(", "))
}

/// `CREATE [OR REPLACE] FUNCTION … LANGUAGE sql`.
pub(crate) fn create(catalog: &Catalog, create: &CreateFunction) -> Result<Translation, PgError> {
    let language = create.language.as_ref().map(|l| l.value.to_ascii_lowercase());
    if language.as_deref() != Some("sql") {
        let language = language.unwrap_or_else(|| "sql".to_owned());
        return Err(PgError::unsupported(format!("CREATE FUNCTION in language {language}")));
    }
    if create.temporary || create.or_alter || create.using.is_some() {
        return Err(PgError::unsupported("this form of CREATE FUNCTION"));
    }
    let returns = match &create.return_type {
        Some(FunctionReturnType::DataType(DataType::Custom(name, _)))
            if name.to_string().eq_ignore_ascii_case("void") =>
        {
            return Err(PgError::unsupported("functions returning void"))
        }
        Some(FunctionReturnType::DataType(DataType::Table(_))) | Some(FunctionReturnType::SetOf(_)) => {
            return Err(PgError::unsupported("set-returning SQL functions"))
        }
        Some(FunctionReturnType::DataType(ty)) => super::enums::written_type(catalog, ty)?,
        None => return Err(PgError::unsupported("functions without RETURNS")),
    };
    let mut args = Vec::new();
    for arg in create.args.iter().flatten() {
        if !matches!(arg.mode, None | Some(ArgMode::In)) {
            return Err(PgError::unsupported("OUT and INOUT function parameters"));
        }
        if arg.default_expr.is_some() {
            return Err(PgError::unsupported("function parameter defaults"));
        }
        let name = arg.name.as_ref().map(super::schema::fold_ident).unwrap_or_default();
        args.push((name, super::enums::written_type(catalog, &arg.data_type)?));
    }
    let body = body_text(create.function_body.as_ref())?;
    body_query(&body)?;
    let name = super::schema::created(catalog, &create.name)?;
    let types: Vec<PgType> = args.iter().map(|(_, t)| *t).collect();
    let existing = catalog
        .routines()
        .iter()
        .find(|r| r.name.eq_ignore_ascii_case(&name) && r.takes(&types));
    let mut list = vec![CREATE_FUNCTIONS_TABLE.to_owned()];
    match existing {
        Some(old) if create.or_replace => list.push(routines::delete_sql(old.id)),
        Some(_) => {
            return Err(PgError::new(
                DUPLICATE_FUNCTION,
                format!(
                    "function {} already exists with same argument types",
                    signature(&name, &types, catalog)
                ),
            ))
        }
        None => {}
    }
    if catalog.routines().len() as i64 >= routines::FUNCTIONS_MAX {
        return Err(PgError::new(crate::error::PROGRAM_LIMIT_EXCEEDED, "too many functions"));
    }
    let volatility = match create.behavior {
        Some(FunctionBehavior::Immutable) => "i",
        Some(FunctionBehavior::Stable) => "s",
        _ => "v",
    };
    let routine = Routine {
        id: 0,
        name,
        args,
        returns,
        volatility: volatility.to_owned(),
        body,
    };
    list.push(routines::insert_sql(&routine));
    list.extend(BUMP_SCHEMA_VERSION.iter().map(|s| (*s).to_owned()));
    Ok(steps("CREATE FUNCTION", list))
}

/// The body's text: `AS '…'` (any quoting) or `RETURN expr` (as `SELECT expr`).
fn body_text(body: Option<&CreateFunctionBody>) -> Result<String, PgError> {
    let text = |expr: &Expr| match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => Some(s.clone()),
            Value::DollarQuotedString(d) => Some(d.value.clone()),
            _ => None,
        },
        _ => None,
    };
    match body {
        Some(CreateFunctionBody::AsBeforeOptions {
            body,
            link_symbol: None,
        })
        | Some(CreateFunctionBody::AsAfterOptions(body)) => {
            text(body).ok_or_else(|| PgError::unsupported("this form of function body"))
        }
        Some(CreateFunctionBody::Return(expr)) => Ok(format!("SELECT {expr}")),
        _ => Err(PgError::unsupported("this form of function body")),
    }
}

/// The body as one query (0A000 for anything else: several statements, DML).
fn body_query(body: &str) -> Result<Box<Query>, PgError> {
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, body.trim().trim_end_matches(';'))
        .map_err(|e| PgError::new(crate::error::SYNTAX_ERROR, e.to_string()))?;
    match (statements.pop(), statements.is_empty()) {
        (Some(Statement::Query(query)), true) => Ok(query),
        _ => Err(PgError::unsupported("SQL functions whose body is not one SELECT")),
    }
}

/// `DROP FUNCTION [IF EXISTS] name[(types)], …`.
pub(crate) fn drop(catalog: &Catalog, drop: &DropFunction) -> Result<Translation, PgError> {
    let mut list = Vec::new();
    for desc in &drop.func_desc {
        let name = super::schema::created(catalog, &desc.name)?;
        let types = desc
            .args
            .as_ref()
            .map(|args| {
                args.iter()
                    .map(|a| super::enums::written_type(catalog, &a.data_type))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let found: Vec<&Routine> = catalog
            .routines()
            .iter()
            .filter(|r| r.name.eq_ignore_ascii_case(&name) && types.as_deref().is_none_or(|t| r.takes(t)))
            .collect();
        match found.as_slice() {
            [one] => list.push(routines::delete_sql(one.id)),
            [] if drop.if_exists => {}
            [] => {
                let shown = match &types {
                    Some(types) => signature(&name, types, catalog),
                    None => crate::schemas::split_sqlite_name(&name, catalog.schemas()).1.to_owned(),
                };
                return Err(PgError::new(
                    UNDEFINED_FUNCTION,
                    format!("function {shown} does not exist"),
                ));
            }
            _ => {
                return Err(PgError::new(
                    AMBIGUOUS_FUNCTION,
                    format!("function name \"{}\" is not unique", desc.name),
                ))
            }
        }
    }
    if !list.is_empty() {
        list.extend(BUMP_SCHEMA_VERSION.iter().map(|s| (*s).to_owned()));
    }
    Ok(steps("DROP FUNCTION", list))
}

/// The function a call names: by its schema, or the first schema of the path holding a function of that
/// name taking that many arguments.
fn resolve<'a>(catalog: &'a Catalog, name: &ObjectName, arity: usize) -> Option<&'a Routine> {
    let parts = super::schema::folded_parts(name);
    let candidates = |sqlite: String| {
        catalog
            .routines()
            .iter()
            .find(move |r| r.name.eq_ignore_ascii_case(&sqlite) && r.args.len() == arity)
    };
    match parts.as_slice() {
        [schema, bare] => candidates(crate::schemas::sqlite_name(schema, bare)),
        [bare] => catalog
            .search_path()
            .iter()
            .find_map(|schema| candidates(crate::schemas::sqlite_name(schema, bare))),
        _ => None,
    }
}

/// Inlines the calls of SQL functions in a query (nothing to do when the database has none).
pub(crate) fn inline_query(catalog: &Catalog, query: &mut Query) -> Result<(), PgError> {
    if catalog.routines().is_empty() {
        return Ok(());
    }
    super::walk::query(&mut Inliner { catalog, depth: 0 }, query)
}

/// Inlines the calls of SQL functions in an expression.
pub(crate) fn inline_expr(catalog: &Catalog, expr: &mut Expr) -> Result<(), PgError> {
    if catalog.routines().is_empty() {
        return Ok(());
    }
    super::walk::expr(&mut Inliner { catalog, depth: 0 }, expr)
}

/// Inlines the calls of SQL functions in select items.
pub(crate) fn inline_items(catalog: &Catalog, items: &mut [sqlparser::ast::SelectItem]) -> Result<(), PgError> {
    if catalog.routines().is_empty() {
        return Ok(());
    }
    super::walk::items(&mut Inliner { catalog, depth: 0 }, items)
}

struct Inliner<'a> {
    catalog: &'a Catalog,
    depth: usize,
}

impl super::walk::Hooks for Inliner<'_> {
    fn enter_select(&mut self, _: &sqlparser::ast::Select) {}

    fn leave_select(&mut self) {}

    fn table_factor(&mut self, _: &mut sqlparser::ast::TableFactor) -> Result<(), PgError> {
        Ok(())
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        let Expr::Function(call) = expr else {
            return Ok(());
        };
        let FunctionArguments::List(list) = &call.args else {
            return Ok(());
        };
        let args: Option<Vec<Expr>> = list
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                _ => None,
            })
            .collect();
        let Some(args) = args else {
            return Ok(());
        };
        if call.over.is_some() || call.filter.is_some() || list.duplicate_treatment.is_some() {
            return Ok(());
        }
        let Some(routine) = resolve(self.catalog, &call.name, args.len()) else {
            return Ok(());
        };
        if self.depth >= INLINE_DEPTH_MAX {
            return Err(PgError::new(
                STATEMENT_TOO_COMPLEX,
                format!("function {} calls itself too deeply", call.name),
            ));
        }
        let mut replacement = inlined(self.catalog, routine, &args)?;
        let mut inner = Inliner {
            catalog: self.catalog,
            depth: self.depth + 1,
        };
        super::walk::expr(&mut inner, &mut replacement)?;
        *expr = replacement;
        Ok(())
    }
}

/// A type as a cast writes it (an enum type by its name in the database).
fn cast_type(catalog: &Catalog, ty: PgType) -> Result<DataType, PgError> {
    let name = super::enums::display_name(catalog, ty);
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&name)
        .and_then(|mut p| p.parse_data_type())
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("type {name}: {e}")))
}

fn cast(expr: Expr, data_type: DataType) -> Expr {
    Expr::Cast {
        kind: sqlparser::ast::CastKind::Cast,
        expr: Box::new(Expr::Nested(Box::new(expr))),
        data_type,
        format: None,
    }
}

/// A call's replacement: the body with the arguments (cast to the parameters' types) for the parameters,
/// cast to the result type.
///
/// A body that reads tables gets the arguments from a FROM item of its own, `(SELECT arg AS _pgc_p1, …) AS
/// _pgc_args`, evaluated where the call is (a derived table sees the enclosing query, not its siblings), so
/// an argument naming a column of the caller (`name_of(id)`) is not captured by a column of the body's tables.
fn inlined(catalog: &Catalog, routine: &Routine, args: &[Expr]) -> Result<Expr, PgError> {
    let mut body = body_query(&routine.body)?;
    let mut casts = Vec::with_capacity(args.len());
    for ((_, ty), arg) in routine.args.iter().zip(args) {
        casts.push(cast(arg.clone(), cast_type(catalog, *ty)?));
    }
    let returns = cast_type(catalog, routine.returns)?;
    let reads_tables = matches!(body.body.as_ref(), SetExpr::Select(select) if !select.from.is_empty());
    let mut holder_from = None;
    let values: Vec<(String, Expr)> = if reads_tables && !casts.is_empty() {
        let columns: Vec<String> = casts
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} AS \"_pgc_p{}\"", i + 1))
            .collect();
        let holder = format!("SELECT 1 FROM (SELECT {}) AS \"_pgc_args\"", columns.join(", "));
        holder_from = Some(body_query(&holder)?);
        routine
            .args
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let reference = Expr::CompoundIdentifier(vec![
                    sqlparser::ast::Ident::with_quote('"', "_pgc_args"),
                    sqlparser::ast::Ident::with_quote('"', format!("_pgc_p{}", i + 1)),
                ]);
                (name.clone(), reference)
            })
            .collect()
    } else {
        routine.args.iter().map(|(n, _)| n.clone()).zip(casts).collect()
    };
    let shadowed = body_columns(catalog, &body);
    super::walk::query(
        &mut Parameters {
            values: &values,
            shadowed: &shadowed,
        },
        &mut body,
    )?;
    // The arguments' FROM item goes in after the parameters are replaced: its own items are the caller's.
    if let Some(holder) = holder_from {
        if let (SetExpr::Select(select), SetExpr::Select(holder)) = (body.body.as_mut(), holder.body.as_ref()) {
            select.from.splice(0..0, holder.from.iter().cloned());
        }
    }
    // `SELECT expr` alone is the expression itself; anything else a scalar subquery.
    if let SetExpr::Select(select) = body.body.as_ref() {
        let plain = select.from.is_empty()
            && select.selection.is_none()
            && select.having.is_none()
            && body.order_by.is_none()
            && body.limit_clause.is_none()
            && body.with.is_none();
        if let (
            [sqlparser::ast::SelectItem::UnnamedExpr(e) | sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. }],
            true,
        ) = (select.projection.as_slice(), plain)
        {
            return Ok(cast(e.clone(), returns));
        }
    }
    Ok(cast(Expr::Subquery(body), returns))
}

/// The columns of the tables a body's SELECT reads: a name that is a column there is the column, not the
/// parameter of the same name (PostgreSQL's rule for SQL functions).
fn body_columns(catalog: &Catalog, body: &Query) -> Vec<String> {
    let SetExpr::Select(select) = body.body.as_ref() else {
        return Vec::new();
    };
    let mut columns = Vec::new();
    for table in &select.from {
        let factors = std::iter::once(&table.relation).chain(table.joins.iter().map(|j| &j.relation));
        for factor in factors {
            if let sqlparser::ast::TableFactor::Table { name, .. } = factor {
                let Ok(sqlite) = super::schema::existing(catalog, name) else {
                    continue;
                };
                if let Some(types) = catalog.table(&sqlite) {
                    columns.extend(types.columns().iter().map(|(c, _)| c.to_ascii_lowercase()));
                }
            }
        }
    }
    columns
}

/// Puts the arguments in place of the parameters (`$n`, or a parameter's name not qualified by a table and
/// not a column of the body's tables).
struct Parameters<'a> {
    values: &'a [(String, Expr)],
    shadowed: &'a [String],
}

impl super::walk::Hooks for Parameters<'_> {
    fn enter_select(&mut self, _: &sqlparser::ast::Select) {}

    fn leave_select(&mut self) {}

    fn table_factor(&mut self, _: &mut sqlparser::ast::TableFactor) -> Result<(), PgError> {
        Ok(())
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        let value = match expr {
            Expr::Identifier(ident) => {
                let name = super::schema::fold_ident(ident);
                if self.shadowed.contains(&name) {
                    return Ok(());
                }
                self.values
                    .iter()
                    .find(|(n, _)| !n.is_empty() && *n == name)
                    .map(|(_, v)| v)
            }
            Expr::Value(v) => match &v.value {
                Value::Placeholder(p) => p
                    .strip_prefix('$')
                    .and_then(|n| n.parse::<usize>().ok())
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|i| self.values.get(i))
                    .map(|(_, v)| v),
                _ => None,
            },
            _ => None,
        };
        if let Some(value) = value {
            *expr = Expr::Nested(Box::new(value.clone()));
        }
        Ok(())
    }
}
