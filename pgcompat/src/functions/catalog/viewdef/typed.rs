//! A view's expressions as PostgreSQL's parser leaves them for ruleutils to print: column references resolved
//! to their FROM item, literals typed, and the implicit casts PostgreSQL's operator and function resolution
//! adds written out (`price > 100` on a numeric column is `price > (100)::numeric`).

use sqlparser::ast::{
    BinaryOperator as B, CastKind, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, UnaryOperator,
    Value,
};

pub(super) use super::resolve::common_type;
use super::resolve::{resolve, same_type};
use crate::types::PgType;

/// A value's type as far as the deparser knows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Ty {
    Known(PgType),
    /// An untyped string literal (PostgreSQL's `unknown`), typed by where it is used.
    Unknown,
    /// Not known to the deparser (no implicit cast is added against it).
    Opaque,
}

impl Ty {
    pub(super) fn known(self) -> Option<PgType> {
        match self {
            Ty::Known(t) => Some(t),
            _ => None,
        }
    }
}

/// How a sublink reads its query.
#[derive(Clone, Debug)]
pub(super) enum SubLinkKind {
    Exists,
    Expr,
    /// `x IN (SELECT …)`: `(x IN ( SELECT …))`.
    In(Box<Node>),
}

/// A window function's `OVER (PARTITION BY … ORDER BY …)`.
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub(super) partition: Vec<Node>,
    /// Each key and what follows it (` DESC`, ` NULLS FIRST`).
    pub(super) order: Vec<(Node, String)>,
}

/// An expression node, as ruleutils prints it.
#[derive(Clone, Debug)]
pub(super) enum Node {
    /// A column of a FROM item (`prefix.name`).
    Var {
        prefix: String,
        name: String,
    },
    /// A constant of a type: its text as written (unquoted), whether it was a string literal.
    Const {
        text: String,
        ty: Ty,
        null: bool,
    },
    /// `(left op right)` or `(op right)`.
    Op {
        op: String,
        left: Option<Box<Node>>,
        right: Box<Node>,
    },
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    /// A function, aggregate or window function call (`name(args)`, `count(*)`, `… OVER (…)`).
    Func {
        name: String,
        args: Vec<Node>,
        star: bool,
        distinct: bool,
        over: Option<Window>,
        filter: Option<Box<Node>>,
    },
    /// A call ruleutils prints in SQL syntax: `COALESCE(…)`, `NULLIF(…)`, `GREATEST(…)`, `LEAST(…)`.
    Special {
        name: &'static str,
        args: Vec<Node>,
    },
    /// A keyword function (`CURRENT_DATE`, `CURRENT_TIMESTAMP`, `CURRENT_USER`).
    Keyword(String),
    /// `(arg)::type`, written or added by PostgreSQL's resolution.
    Cast {
        arg: Box<Node>,
        to: String,
    },
    /// `(arg IS [NOT] NULL)`.
    NullTest {
        arg: Box<Node>,
        not: bool,
    },
    /// `(arg IS [NOT] TRUE|FALSE|UNKNOWN)`.
    BoolTest {
        arg: Box<Node>,
        test: &'static str,
    },
    Case {
        operand: Option<Box<Node>>,
        whens: Vec<(Node, Node)>,
        otherwise: Box<Node>,
    },
    /// `(left op ANY|ALL (array))`.
    ArrayOp {
        left: Box<Node>,
        op: String,
        all: bool,
        array: Box<Node>,
    },
    /// `ARRAY[…]`.
    Array(Vec<Node>),
    /// A subquery in an expression, printed by the query deparser.
    SubLink {
        kind: SubLinkKind,
        query: Box<sqlparser::ast::Query>,
        negated: bool,
    },
}

/// What an expression reads its columns from: each FROM item's reference name and columns with their types.
pub(super) trait Scope {
    /// The FROM item (its reference name) and type of a column written `qualifier.name` or `name`.
    fn column(&self, qualifier: Option<&str>, name: &str) -> Option<(String, Ty)>;
    /// A type's name as printed (enum types by the path).
    fn type_name(&self, ty: PgType) -> String;
    /// A typed literal's text in its type's output form (`'2024-01-01'::timestamp` is `2024-01-01 00:00:00`).
    fn canonical(&self, ty: PgType, text: &str) -> Option<String>;
}

/// A node and its type.
pub(super) struct Typed {
    pub(super) node: Node,
    pub(super) ty: Ty,
}

/// Why an expression is not deparsed (the caller falls back to the text as written).
#[derive(Debug)]
pub(super) struct Unsupported;

type Result<T> = std::result::Result<T, Unsupported>;

fn typed(node: Node, ty: Ty) -> Typed {
    Typed { node, ty }
}

fn text_of(parts: &[sqlparser::ast::Ident]) -> Vec<String> {
    parts.iter().map(crate::translate::schema::fold_ident).collect()
}

/// An expression typed and with PostgreSQL's implicit casts.
pub(super) fn build(expr: &Expr, scope: &dyn Scope) -> Result<Typed> {
    Ok(match expr {
        Expr::Nested(inner) => build(inner, scope)?,
        Expr::Identifier(ident) => column(scope, None, &crate::translate::schema::fold_ident(ident))?,
        Expr::CompoundIdentifier(parts) => {
            let parts = text_of(parts);
            match parts.as_slice() {
                [.., qualifier, name] => column(scope, Some(qualifier), name)?,
                _ => return Err(Unsupported),
            }
        }
        Expr::Value(value) => literal(&value.value)?,
        Expr::TypedString(ts) => {
            let ty = data_type(&ts.data_type)?;
            let text = ts.value.value.clone().into_string().ok_or(Unsupported)?;
            constant_of(scope, ty, &text)
        }
        Expr::Cast {
            kind: CastKind::DoubleColon | CastKind::Cast,
            expr,
            data_type: target,
            ..
        } => cast(build(expr, scope)?, data_type(target)?, scope),
        Expr::UnaryOp { op, expr: inner } => unary(op, inner, scope)?,
        Expr::BinaryOp { left, op, right } => binary(left, op, right, scope)?,
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => case(operand.as_deref(), conditions, else_result.as_deref(), scope)?,
        Expr::Function(f) => super::calls::function(f, scope)?,
        Expr::Subquery(query) => typed(
            Node::SubLink {
                kind: SubLinkKind::Expr,
                query: query.clone(),
                negated: false,
            },
            Ty::Opaque,
        ),
        Expr::Array(array) => {
            let items = array.elem.iter().map(|e| build(e, scope)).collect::<Result<Vec<_>>>()?;
            let common = common_type(items.iter().map(|i| i.ty));
            let nodes = items.into_iter().map(|i| coerce(i, common, scope)).collect();
            typed(Node::Array(nodes), Ty::Known(common.array()))
        }
        other => typed(predicate(other, scope)?, Ty::Known(PgType::BOOL)),
    })
}

/// `x::type`: a string literal is folded into a constant of the type (as the parser does), anything else
/// keeps its cast.
fn cast(inner: Typed, to: PgType, scope: &dyn Scope) -> Typed {
    match (&inner.node, inner.ty) {
        (Node::Const { text, null: false, .. }, Ty::Unknown) => constant_of(scope, to, &text.clone()),
        (Node::Const { null: true, .. }, _) => typed(
            Node::Const {
                text: String::new(),
                ty: Ty::Known(to),
                null: true,
            },
            Ty::Known(to),
        ),
        _ => typed(
            Node::Cast {
                arg: Box::new(inner.node),
                to: scope.type_name(to),
            },
            Ty::Known(to),
        ),
    }
}

/// The boolean forms: tests, BETWEEN, IN, LIKE, EXISTS.
fn predicate(expr: &Expr, scope: &dyn Scope) -> Result<Node> {
    let test = |inner: &Expr, test: &'static str| -> Result<Node> {
        let arg = coerce(build(inner, scope)?, PgType::BOOL, scope);
        Ok(Node::BoolTest {
            arg: Box::new(arg),
            test,
        })
    };
    Ok(match expr {
        Expr::IsNull(inner) | Expr::IsNotNull(inner) => Node::NullTest {
            arg: Box::new(build(inner, scope)?.node),
            not: matches!(expr, Expr::IsNotNull(_)),
        },
        Expr::IsTrue(inner) => test(inner, "IS TRUE")?,
        Expr::IsNotTrue(inner) => test(inner, "IS NOT TRUE")?,
        Expr::IsFalse(inner) => test(inner, "IS FALSE")?,
        Expr::IsNotFalse(inner) => test(inner, "IS NOT FALSE")?,
        Expr::IsUnknown(inner) => test(inner, "IS UNKNOWN")?,
        Expr::IsNotUnknown(inner) => test(inner, "IS NOT UNKNOWN")?,
        Expr::Between {
            expr: inner,
            negated,
            low,
            high,
        } => {
            // `a BETWEEN x AND y` is `a >= x AND a <= y` (`NOT BETWEEN`: `a < x OR a > y`).
            let (lo, hi) = if *negated { (B::Lt, B::Gt) } else { (B::GtEq, B::LtEq) };
            let first = binary(inner, &lo, low, scope)?.node;
            let second = binary(inner, &hi, high, scope)?.node;
            if *negated {
                Node::Or(vec![first, second])
            } else {
                Node::And(vec![first, second])
            }
        }
        Expr::In {
            expr: inner,
            target: sqlparser::ast::InTarget::List(list),
            negated,
            ..
        } => in_list(inner, list, *negated, scope)?.node,
        Expr::In {
            expr: inner,
            target: sqlparser::ast::InTarget::Subquery(subquery),
            negated,
            ..
        } => Node::SubLink {
            kind: SubLinkKind::In(Box::new(build(inner, scope)?.node)),
            query: subquery.clone(),
            negated: *negated,
        },
        Expr::Like {
            negated,
            expr: inner,
            pattern,
            escape_char: None,
            any: false,
        } => {
            let op = if *negated { "!~~" } else { "~~" };
            operator(op, build(inner, scope)?, build(pattern, scope)?, scope).node
        }
        Expr::ILike {
            negated,
            expr: inner,
            pattern,
            escape_char: None,
            any: false,
        } => {
            let op = if *negated { "!~~*" } else { "~~*" };
            operator(op, build(inner, scope)?, build(pattern, scope)?, scope).node
        }
        Expr::Exists { subquery, negated } => Node::SubLink {
            kind: SubLinkKind::Exists,
            query: subquery.clone(),
            negated: *negated,
        },
        _ => return Err(Unsupported),
    })
}

fn column(scope: &dyn Scope, qualifier: Option<&str>, name: &str) -> Result<Typed> {
    let (prefix, ty) = scope.column(qualifier, name).ok_or(Unsupported)?;
    Ok(typed(
        Node::Var {
            prefix,
            name: name.to_owned(),
        },
        ty,
    ))
}

/// A literal as the parser types it: integers `integer` (`bigint`, `numeric` when larger), other numbers
/// `numeric`, strings `unknown`.
fn literal(value: &Value) -> Result<Typed> {
    let constant = |text: String, ty: Ty| typed(Node::Const { text, ty, null: false }, ty);
    Ok(match value {
        Value::Number(n, _) => {
            let ty = if n.parse::<i32>().is_ok() {
                PgType::INT4
            } else if n.parse::<i64>().is_ok() {
                PgType::INT8
            } else {
                PgType::NUMERIC
            };
            constant(n.clone(), Ty::Known(ty))
        }
        Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => constant(s.clone(), Ty::Unknown),
        Value::Boolean(b) => constant(b.to_string(), Ty::Known(PgType::BOOL)),
        Value::Null => typed(
            Node::Const {
                text: String::new(),
                ty: Ty::Unknown,
                null: true,
            },
            Ty::Unknown,
        ),
        _ => return Err(Unsupported),
    })
}

/// A constant of `ty` from its text (the folded `'x'::type`), in the type's output form where known.
pub(super) fn constant_of(scope: &dyn Scope, ty: PgType, text: &str) -> Typed {
    let text = scope.canonical(ty, text).unwrap_or_else(|| text.to_owned());
    typed(
        Node::Const {
            text,
            ty: Ty::Known(ty),
            null: false,
        },
        Ty::Known(ty),
    )
}

/// The type a written data type names (enum types and others the layer does not know: unsupported).
pub(super) fn data_type(data_type: &DataType) -> Result<PgType> {
    match crate::types::from_data_type(data_type) {
        crate::types::Written::Type(ty) => Ok(ty),
        _ => Err(Unsupported),
    }
}

fn unary(op: &UnaryOperator, inner: &Expr, scope: &dyn Scope) -> Result<Typed> {
    Ok(match op {
        UnaryOperator::Not => {
            let arg = coerce(build(inner, scope)?, PgType::BOOL, scope);
            typed(Node::Not(Box::new(arg)), Ty::Known(PgType::BOOL))
        }
        UnaryOperator::Minus => {
            // A negative number literal is one constant (`'-5'::integer`, as ruleutils prints it).
            if let Expr::Value(v) = inner {
                if let Value::Number(n, _) = &v.value {
                    let negative = literal(&Value::Number(format!("-{n}"), false))?;
                    return Ok(negative);
                }
            }
            let arg = build(inner, scope)?;
            let ty = arg.ty;
            typed(
                Node::Op {
                    op: "-".to_owned(),
                    left: None,
                    right: Box::new(arg.node),
                },
                ty,
            )
        }
        UnaryOperator::Plus => build(inner, scope)?,
        _ => return Err(Unsupported),
    })
}

fn binary(left: &Expr, op: &B, right: &Expr, scope: &dyn Scope) -> Result<Typed> {
    match op {
        B::And | B::Or => {
            let mut args = Vec::new();
            // `a AND b AND c` is one list, as the grammar makes it: a left operand of the same operator is
            // flattened into it (a right one, or a BETWEEN's, stays nested).
            let mut left_side = left;
            while let Expr::Nested(inner) = left_side {
                left_side = inner;
            }
            let left_node = coerce(build(left_side, scope)?, PgType::BOOL, scope);
            let same_op = matches!(left_side, Expr::BinaryOp { op: left_op, .. } if left_op == op);
            match left_node {
                Node::And(inner) | Node::Or(inner) if same_op => args.extend(inner),
                other => args.push(other),
            }
            args.push(coerce(build(right, scope)?, PgType::BOOL, scope));
            let node = if matches!(op, B::And) {
                Node::And(args)
            } else {
                Node::Or(args)
            };
            Ok(typed(node, Ty::Known(PgType::BOOL)))
        }
        _ => {
            let name = operator_name(op).ok_or(Unsupported)?;
            Ok(operator(name, build(left, scope)?, build(right, scope)?, scope))
        }
    }
}

fn operator_name(op: &B) -> Option<&'static str> {
    Some(match op {
        B::Eq => "=",
        B::NotEq => "<>",
        B::Lt => "<",
        B::LtEq => "<=",
        B::Gt => ">",
        B::GtEq => ">=",
        B::Plus => "+",
        B::Minus => "-",
        B::Multiply => "*",
        B::Divide => "/",
        B::Modulo => "%",
        B::StringConcat => "||",
        B::Arrow => "->",
        B::LongArrow => "->>",
        B::HashArrow => "#>",
        B::HashLongArrow => "#>>",
        B::AtArrow => "@>",
        B::ArrowAt => "<@",
        B::Question => "?",
        B::PGRegexMatch => "~",
        B::PGRegexIMatch => "~*",
        B::PGRegexNotMatch => "!~",
        B::PGRegexNotIMatch => "!~*",
        B::PGLikeMatch => "~~",
        B::PGNotLikeMatch => "!~~",
        B::PGILikeMatch => "~~*",
        B::PGNotILikeMatch => "!~~*",
        _ => return None,
    })
}

/// `left op right` with the casts PostgreSQL's operator resolution adds.
pub(super) fn operator(op: &str, left: Typed, right: Typed, scope: &dyn Scope) -> Typed {
    let (lt, rt, result) = resolve(op, left.ty, right.ty);
    let left = convert(left, lt, scope);
    let right = convert(right, rt, scope);
    typed(
        Node::Op {
            op: op.to_owned(),
            left: Some(Box::new(left)),
            right: Box::new(right),
        },
        result,
    )
}

/// A node converted to the type its operator or function takes: an untyped literal becomes a constant of
/// it, another type gets an implicit cast; `None` leaves it as it is.
fn convert(value: Typed, to: Option<PgType>, scope: &dyn Scope) -> Node {
    match to {
        Some(to) => coerce(value, to, scope),
        None => value.node,
    }
}

/// A node converted to `to` (see [`convert`]): to the type itself, as resolution converts, without a
/// modifier (`numeric`, not `numeric(10,2)`).
pub(super) fn coerce(value: Typed, to: PgType, scope: &dyn Scope) -> Node {
    let to = to.with_modifier(crate::types::Modifier::None);
    match (value.node, value.ty) {
        (Node::Const { text, null, .. }, Ty::Unknown) => Node::Const {
            text: if null {
                text
            } else {
                scope.canonical(to, &text).unwrap_or(text)
            },
            ty: Ty::Known(to),
            null,
        },
        (node, Ty::Known(from)) if !same_type(from, to) => Node::Cast {
            arg: Box::new(node),
            to: scope.type_name(to),
        },
        (node, _) => node,
    }
}

fn in_list(inner: &Expr, list: &[Expr], negated: bool, scope: &dyn Scope) -> Result<Typed> {
    let left = build(inner, scope)?;
    let items = list.iter().map(|e| build(e, scope)).collect::<Result<Vec<_>>>()?;
    let element = common_type(std::iter::once(left.ty).chain(items.iter().map(|i| i.ty)));
    let elements: Vec<Node> = items.into_iter().map(|i| coerce(i, element, scope)).collect();
    let op = if negated { "<>" } else { "=" };
    let (lt, et, _) = resolve(op, left.ty, Ty::Known(element));
    let left = convert(left, lt, scope);
    let mut array = Node::Array(elements);
    if let Some(to) = et {
        array = Node::Cast {
            arg: Box::new(array),
            to: scope.type_name(to.array()),
        };
    }
    Ok(typed(
        Node::ArrayOp {
            left: Box::new(left),
            op: op.to_owned(),
            all: negated,
            array: Box::new(array),
        },
        Ty::Known(PgType::BOOL),
    ))
}

fn case(
    operand: Option<&Expr>,
    conditions: &[sqlparser::ast::CaseWhen],
    otherwise: Option<&Expr>,
    scope: &dyn Scope,
) -> Result<Typed> {
    let operand = operand.map(|o| build(o, scope)).transpose()?;
    let mut tests = Vec::new();
    let mut results = Vec::new();
    for when in conditions {
        let test = build(&when.condition, scope)?;
        let test = match &operand {
            Some(o) => {
                let to = common_type([o.ty, test.ty].into_iter());
                coerce(test, to, scope)
            }
            None => coerce(test, PgType::BOOL, scope),
        };
        tests.push(test);
        results.push(build(&when.result, scope)?);
    }
    let otherwise = otherwise.map(|e| build(e, scope)).transpose()?;
    let result = common_type(results.iter().chain(otherwise.iter()).map(|r| r.ty));
    // No ELSE is `ELSE NULL` of the CASE's type.
    let otherwise = otherwise.unwrap_or_else(|| {
        typed(
            Node::Const {
                text: String::new(),
                ty: Ty::Known(result),
                null: true,
            },
            Ty::Known(result),
        )
    });
    let whens = tests
        .into_iter()
        .zip(results)
        .map(|(t, r)| (t, coerce(r, result, scope)))
        .collect();
    Ok(typed(
        Node::Case {
            operand: operand.map(|o| Box::new(o.node)),
            whens,
            otherwise: Box::new(coerce(otherwise, result, scope)),
        },
        Ty::Known(result),
    ))
}

/// A call's plain arguments (`None`: a form the deparser does not print, such as named arguments).
pub(super) fn plain_args(args: &FunctionArguments) -> Option<(Vec<&Expr>, bool, bool)> {
    match args {
        FunctionArguments::None => Some((Vec::new(), false, false)),
        FunctionArguments::List(list) => {
            if !list.clauses.is_empty() {
                return None;
            }
            let distinct = matches!(
                list.duplicate_treatment,
                Some(sqlparser::ast::DuplicateTreatment::Distinct)
            );
            let mut star = false;
            let mut exprs = Vec::new();
            for arg in &list.args {
                match arg {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => exprs.push(e),
                    FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => star = true,
                    _ => return None,
                }
            }
            Some((exprs, star, distinct))
        }
        FunctionArguments::Subquery(_) => None,
    }
}
