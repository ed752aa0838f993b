//! Building and taking apart expressions: calls, literals, casts (`pg_cast`, `pg_coerce`), written types
//! and schema-qualified names.

use sqlparser::ast::{
    DateTimeField, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments, Ident,
    ObjectName, ObjectNamePart, UnaryOperator, Value, ValueWithSpan,
};

use crate::error::{PgError, UNDEFINED_OBJECT};
use crate::types::{self, PgType, Written};

/// The plain expression arguments of a call (`f(a, b)`), none for `*` or named arguments.
pub(crate) fn plain_args(function: &Function) -> Vec<&Expr> {
    match &function.args {
        FunctionArguments::List(list) => list
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A call of a function by name.
pub(crate) fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: Vec::new(),
        }),
        within_group: Vec::new(),
        filter: None,
        null_treatment: None,
        over: None,
    })
}

/// A string literal expression.
pub(crate) fn string(text: &str) -> Expr {
    Expr::Value(Value::SingleQuotedString(text.to_owned()).into())
}

/// The type a written data type names, or the error PostgreSQL gives for it.
pub(crate) fn written_type(data_type: &sqlparser::ast::DataType) -> Result<PgType, PgError> {
    match types::from_data_type(data_type) {
        Written::Type(ty) => Ok(ty),
        Written::Serial(_) => Err(PgError::new(
            UNDEFINED_OBJECT,
            format!("type \"{data_type}\" does not exist"),
        )),
        Written::Custom(name) => Err(PgError::new(
            UNDEFINED_OBJECT,
            format!("type \"{name}\" does not exist"),
        )),
        Written::Unsupported(name) => Err(PgError::unsupported(format!("the type {name}"))),
    }
}

/// A relation name with its schema: `public.t` is `t` (the one schema there is); any other schema does not
/// exist (3F000), never silently the same table as `t`.
pub(crate) fn strip_public(name: &mut ObjectName) -> Result<(), PgError> {
    if name.0.len() < 2 {
        return Ok(());
    }
    let schema = match &name.0[name.0.len() - 2] {
        ObjectNamePart::Identifier(ident) if ident.quote_style.is_some() => ident.value.clone(),
        ObjectNamePart::Identifier(ident) => ident.value.to_ascii_lowercase(),
        other => other.to_string(),
    };
    if schema != "public" {
        return Err(PgError::new(
            crate::error::INVALID_SCHEMA_NAME,
            format!("schema \"{schema}\" does not exist"),
        ));
    }
    let last = name.0.pop().expect("a name of two parts has a last part");
    *name = ObjectName(vec![last]);
    Ok(())
}

pub(super) fn take(expr: &mut Expr) -> Expr {
    std::mem::replace(expr, Expr::value(Value::Null))
}

pub(super) fn number(text: &str) -> Value {
    Value::Number(text.to_owned(), false)
}

pub(super) fn negate_if(negated: bool, expr: Expr) -> Expr {
    if negated {
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(expr),
        }
    } else {
        expr
    }
}

pub(super) fn is_string_literal(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Value(ValueWithSpan {
            value: Value::SingleQuotedString(_),
            ..
        })
    )
}

/// String literals among `exprs` read as `ty` (when `ty` is not a string type).
pub(super) fn coerce_literals<'e>(ty: Option<PgType>, exprs: impl Iterator<Item = &'e mut Expr>) {
    let Some(ty) = ty.filter(|t| !t.is_string()) else {
        return;
    };
    for expr in exprs {
        if is_string_literal(expr) {
            let literal = take(expr);
            *expr = cast_call(literal, ty, Some(PgType::TEXT));
        }
    }
}

/// `pg_cast(x, 'target', 'source')`.
pub(crate) fn cast_call(expr: Expr, target: PgType, source: Option<PgType>) -> Expr {
    let source = source.map_or_else(String::new, PgType::catalog_text);
    call("pg_cast", vec![expr, string(&target.catalog_text()), string(&source)])
}

/// `pg_coerce(x, 'type')`: a value assigned to a column of that type.
pub(crate) fn coerce_call(expr: Expr, ty: PgType) -> Expr {
    call(
        "pg_coerce",
        vec![expr, Expr::value(Value::SingleQuotedString(ty.catalog_text()))],
    )
}

pub(super) fn field_unit(field: &DateTimeField) -> String {
    field.to_string().to_ascii_lowercase()
}
