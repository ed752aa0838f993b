//! Stored (translated) expressions read back as PostgreSQL prints them: the layer's casts and calls undone,
//! identifiers quoted as `quote_ident` does.

use sqlparser::ast::{Expr, Ident, Value, ValueWithSpan};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use crate::types::{Base, Modifier, PgType};

/// PostgreSQL's `quote_ident`: quoted unless all lower-case letters, digits and `_` not starting with a
/// digit, and not a reserved word.
pub(crate) fn quote_ident(name: &str) -> String {
    const RESERVED: &[&str] = &[
        "all",
        "and",
        "any",
        "array",
        "as",
        "asc",
        "both",
        "case",
        "cast",
        "check",
        "collate",
        "column",
        "constraint",
        "create",
        "default",
        "desc",
        "distinct",
        "do",
        "else",
        "end",
        "except",
        "false",
        "for",
        "foreign",
        "from",
        "grant",
        "group",
        "having",
        "in",
        "into",
        "is",
        "join",
        "leading",
        "limit",
        "not",
        "null",
        "offset",
        "on",
        "or",
        "order",
        "primary",
        "references",
        "select",
        "table",
        "then",
        "to",
        "trailing",
        "true",
        "union",
        "unique",
        "user",
        "using",
        "when",
        "where",
        "with",
    ];
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain && !RESERVED.contains(&name) {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A stored (translated) expression as PostgreSQL text: the layer's casts and calls undone where it knows
/// them (`pg_coerce(x, t)` is `x`, `pg_cast(x, t, s)` is `x::t`, `pg_now()` is `now()`), quotes dropped from
/// plain identifiers.
/// An integer compared with a numeric column reads `0::numeric`, as PostgreSQL prints the cast it added.
pub(super) fn expression_text(expr: &Expr, numeric_columns: &[String]) -> String {
    let mut expr = expr.clone();
    let names = Names {
        types: &|t: PgType| t.sql_name(),
        relation: &crate::schemas::display_name,
    };
    undo(&mut expr, &names);
    cast_integers(&mut expr, numeric_columns);
    expr.to_string()
}

fn cast_integers(expr: &mut Expr, numeric_columns: &[String]) {
    let is_numeric =
        |e: &Expr| matches!(e, Expr::Identifier(i) if numeric_columns.iter().any(|c| c.eq_ignore_ascii_case(&i.value)));
    let as_numeric = |e: &mut Expr| {
        if let Expr::Value(v) = e {
            if let sqlparser::ast::Value::Number(n, _) = &v.value {
                if n.bytes().all(|b| b.is_ascii_digit()) {
                    *e = Expr::Identifier(Ident::new(format!("{n}::numeric")));
                }
            }
        }
    };
    match expr {
        Expr::BinaryOp { left, op, right } => {
            use sqlparser::ast::BinaryOperator as B;
            if matches!(op, B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq) {
                if is_numeric(left) {
                    as_numeric(right);
                } else if is_numeric(right) {
                    as_numeric(left);
                }
            }
            cast_integers(left, numeric_columns);
            cast_integers(right, numeric_columns);
        }
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } => cast_integers(inner, numeric_columns),
        _ => {}
    }
}

/// How a deparsed text names types and relations.
pub(super) struct Names<'a> {
    /// A type's name as printed (the database's names for its enum types).
    pub(super) types: &'a dyn Fn(PgType) -> String,
    /// A relation's name as printed, from its SQLite name.
    pub(super) relation: &'a dyn Fn(&str) -> String,
}

fn undo(expr: &mut Expr, names: &Names<'_>) {
    let replacement = match expr {
        Expr::Nested(inner) => {
            undo(inner, names);
            if matches!(inner.as_ref(), Expr::Value(_) | Expr::Identifier(_) | Expr::Function(_)) {
                Some(inner.as_ref().clone())
            } else {
                None
            }
        }
        // The collation a cast to an enum type carries goes with the cast.
        Expr::Collate { expr: inner, .. } => {
            undo(inner, names);
            Some(inner.as_ref().clone())
        }
        Expr::Identifier(ident) => {
            if quote_ident(&ident.value) == ident.value {
                ident.quote_style = None;
            }
            None
        }
        Expr::BinaryOp { left, right, .. } => {
            undo(left, names);
            undo(right, names);
            None
        }
        Expr::UnaryOp { expr: inner, .. } => {
            undo(inner, names);
            None
        }
        Expr::Function(f) => {
            let name = f.name.to_string().to_ascii_lowercase();
            let mut args: Vec<Expr> = match &f.args {
                sqlparser::ast::FunctionArguments::List(list) => list
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => {
                            Some(e.clone())
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for a in &mut args {
                undo(a, names);
            }
            match name.as_str() {
                "pg_coerce" if !args.is_empty() => Some(args.swap_remove(0)),
                // Checked arithmetic (`translate::expr::binary`): the operator it checks.
                "pg_int" if args.len() == 2 => Some(args.swap_remove(0)),
                "pg_div" | "pg_mod" | "pg_numeric_add" | "pg_numeric_sub" | "pg_numeric_mul" | "pg_numeric_div"
                    if args.len() >= 2 =>
                {
                    use sqlparser::ast::BinaryOperator as B;
                    let op = match name.as_str() {
                        "pg_div" | "pg_numeric_div" => B::Divide,
                        "pg_mod" => B::Modulo,
                        "pg_numeric_add" => B::Plus,
                        "pg_numeric_sub" => B::Minus,
                        _ => B::Multiply,
                    };
                    let right = args.swap_remove(1);
                    let left = args.swap_remove(0);
                    Some(Expr::Nested(Box::new(Expr::BinaryOp {
                        left: Box::new(left),
                        op,
                        right: Box::new(right),
                    })))
                }
                "pg_nextval" if args.len() == 1 => {
                    // The stored name is the sequence's SQLite name (`"app.s"`): shown as PostgreSQL
                    // qualifies it (`app.s`).
                    let shown = match &args[0] {
                        Expr::Value(ValueWithSpan {
                            value: Value::SingleQuotedString(text),
                            ..
                        }) => {
                            let name = super::helpers::split_qualified(text).join(".");
                            format!("'{}'", (names.relation)(&name).replace('\'', "''"))
                        }
                        other => other.to_string(),
                    };
                    Some(Expr::Identifier(Ident::new(format!("nextval({shown}::regclass)"))))
                }
                "pg_now" => Some(Expr::Identifier(Ident::new("now()"))),
                "pg_current_timestamp" => Some(Expr::Identifier(Ident::new("CURRENT_TIMESTAMP"))),
                "pg_current_date" => Some(Expr::Identifier(Ident::new("CURRENT_DATE"))),
                "pg_localtimestamp" => Some(Expr::Identifier(Ident::new("LOCALTIMESTAMP"))),
                // A decimal literal: PostgreSQL prints it as written.
                "pg_cast"
                    if args.len() >= 2
                        && matches!(&args[1], Expr::Value(v) if v.value.to_string() == "'numeric'")
                        && matches!(&args[0], Expr::Value(v) if matches!(&v.value,
                            sqlparser::ast::Value::SingleQuotedString(t) if t.parse::<f64>().is_ok())) =>
                {
                    let text = match &args[0] {
                        Expr::Value(v) => v.value.clone().into_string().unwrap_or_default(),
                        _ => String::new(),
                    };
                    Some(Expr::Identifier(Ident::new(text)))
                }
                "pg_cast" if args.len() >= 2 => {
                    let target = match &args[1] {
                        Expr::Value(v) => v.value.clone().into_string().unwrap_or_default(),
                        _ => String::new(),
                    };
                    let target = PgType::from_catalog(&target).map_or(target, names.types);
                    Some(Expr::Identifier(Ident::new(format!("{}::{target}", args[0]))))
                }
                _ => {
                    if let sqlparser::ast::FunctionArguments::List(list) = &mut f.args {
                        for (arg, new) in list
                            .args
                            .iter_mut()
                            .filter_map(|a| match a {
                                sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => {
                                    Some(e)
                                }
                                _ => None,
                            })
                            .zip(args)
                        {
                            *arg = new;
                        }
                    }
                    None
                }
            }
        }
        _ => None,
    };
    if let Some(replacement) = replacement {
        *expr = replacement;
    }
}

/// A column default as stored by the layer, as PostgreSQL prints it (`pg_get_expr`).
pub(super) fn default_text(stored: &str, ty: Option<PgType>, names: &Names<'_>) -> String {
    let parsed = Parser::new(&SQLiteDialect {})
        .try_with_sql(stored)
        .and_then(|mut p| p.parse_expr());
    let Ok(expr) = parsed else {
        return stored.to_owned();
    };
    let mut expr = expr;
    undo(&mut expr, names);
    match (&expr, ty) {
        (Expr::Value(v), Some(ty)) => match &v.value {
            sqlparser::ast::Value::SingleQuotedString(s) if !ty.is_numeric() => {
                format!(
                    "'{}'::{}",
                    s.replace('\'', "''"),
                    (names.types)(ty.element().with_modifier(Modifier::None))
                )
            }
            sqlparser::ast::Value::SingleQuotedString(s) => s.clone(),
            sqlparser::ast::Value::Number(n, _) if ty.base() == Base::Bool && !ty.is_array() => {
                if n == "0" { "false" } else { "true" }.to_owned()
            }
            sqlparser::ast::Value::Boolean(b) => b.to_string(),
            _ => expr.to_string(),
        },
        _ => expr.to_string(),
    }
}

/// The SQLite name of the sequence the first `nextval` of a stored default reads, if it has one.
pub(super) fn default_sequence(stored: &str) -> Option<String> {
    let expr = Parser::new(&SQLiteDialect {})
        .try_with_sql(stored)
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    first_nextval(&expr)
}

fn first_nextval(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } | Expr::UnaryOp { expr: inner, .. } => {
            first_nextval(inner)
        }
        Expr::BinaryOp { left, right, .. } => first_nextval(left).or_else(|| first_nextval(right)),
        Expr::Function(f) => {
            let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
                return None;
            };
            let args: Vec<&Expr> = list
                .args
                .iter()
                .filter_map(|a| match a {
                    sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect();
            if f.name.to_string().eq_ignore_ascii_case("pg_nextval") {
                if let [Expr::Value(ValueWithSpan {
                    value: Value::SingleQuotedString(text),
                    ..
                })] = args.as_slice()
                {
                    return Some(super::helpers::split_qualified(text).join("."));
                }
            }
            args.into_iter().find_map(first_nextval)
        }
        _ => None,
    }
}
