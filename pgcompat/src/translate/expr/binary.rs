//! Binary operators whose meaning depends on the operand types: arithmetic, `||`, comparisons of typed
//! values, the JSON and array operators.

use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator};

use super::*;
use crate::error::PgError;
use crate::types::{Base, PgType};

impl Rewriter<'_> {
    /// The two sides of a comparison (`=`, `<`, `IS [NOT] DISTINCT FROM`, …) of types `lt` and `rt`, typed as
    /// PostgreSQL types them: a `$n` parameter learns the other side's type, and an untyped string is read as
    /// it.
    pub(super) fn type_compared_sides(
        &mut self,
        left: &mut Expr,
        right: &mut Expr,
        lt: Option<PgType>,
        rt: Option<PgType>,
    ) {
        self.learn_param(right, lt);
        self.learn_param(left, rt);
        if is_string_literal(right) {
            coerce_literals(lt, std::iter::once(right));
        }
        if is_string_literal(left) {
            coerce_literals(rt, std::iter::once(left));
        }
    }
    pub(super) fn rewrite_binary(
        &mut self,
        left: &mut Box<Expr>,
        op: &BinaryOperator,
        right: &mut Box<Expr>,
    ) -> Result<Option<Expr>, PgError> {
        use BinaryOperator as B;
        let lt = self.typer.infer(left);
        let rt = self.typer.infer(right);
        // A `$n` operand of the containment and key operators is typed as PostgreSQL resolves it: the other
        // side's type for `@>`, `<@` and `&&` (`doc @> $1` takes a jsonb, `tags && $1` an array), text for `?`,
        // text[] for `?|`, `?&`, `#>`, `#>>` and `#-`. A driver that sends typed values (asyncpg encodes a
        // parameter by its described type) needs it.
        match op {
            B::AtArrow | B::ArrowAt | B::PGOverlap => {
                self.learn_param(right, lt);
                self.learn_param(left, rt);
            }
            B::Question => self.learn_param(right, Some(PgType::TEXT)),
            B::QuestionPipe | B::QuestionAnd | B::HashArrow | B::HashLongArrow | B::HashMinus => {
                self.learn_param(right, Some(PgType::TEXT.array()));
            }
            _ => {}
        }
        Ok(match op {
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq
                if lt.is_some_and(|t| t.base() == Base::Interval) && rt.is_some_and(|t| t.base() == Base::Interval) =>
            {
                // Intervals compare by their length (a month is 30 days), not by their text.
                let compare = call("pg_interval_cmp", vec![take(left), take(right)]);
                Some(Expr::BinaryOp {
                    left: Box::new(compare),
                    op: op.clone(),
                    right: Box::new(Expr::value(number("0"))),
                })
            }
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq => {
                self.type_compared_sides(left, right, lt, rt);
                let (lt, rt) = (self.typer.infer(left), self.typer.infer(right));
                self.typed_comparison(left, op, right, lt, rt)
            }
            B::StringConcat
                if [left.as_ref(), right.as_ref()]
                    .into_iter()
                    .any(|side| crate::translate::catalog_refs::name_as_text(side).is_some()) =>
            {
                // A regclass or regtype operand is concatenated as the name it prints, not as its OID; the
                // operation is then typed again over the texts.
                for side in [left.as_mut(), right.as_mut()] {
                    if let Some(text) = crate::translate::catalog_refs::name_as_text(side) {
                        *side = text;
                    }
                }
                return self.rewrite_binary(left, op, right);
            }
            B::StringConcat if lt.is_some_and(PgType::is_array) || rt.is_some_and(PgType::is_array) => {
                // Array concatenation: array || array, array || element, element || array.
                let l_array = lt.is_some_and(PgType::is_array) || is_string_literal(left);
                let r_array = rt.is_some_and(PgType::is_array) || is_string_literal(right);
                let name = match (l_array, r_array) {
                    (true, true) => "array_cat",
                    (true, false) => "array_append",
                    _ => "array_prepend",
                };
                let array = if lt.is_some_and(PgType::is_array) { lt } else { rt };
                let types = match name {
                    "array_cat" => [array, array],
                    "array_append" => [array, rt],
                    _ => [lt, array],
                };
                Some(crate::functions::typed_expr(
                    name,
                    &types,
                    vec![take(left), take(right)],
                ))
            }
            B::StringConcat
                if lt.is_some_and(|t| t.base() == Base::Bytea && !t.is_array())
                    || rt.is_some_and(|t| t.base() == Base::Bytea && !t.is_array()) =>
            {
                Some(call("pg_bytea_concat", vec![take(left), take(right)]))
            }
            B::StringConcat if lt.is_some_and(|t| t.base() == Base::Jsonb) => {
                Some(call("pg_jsonb_concat", vec![take(left), take(right)]))
            }
            B::StringConcat
                if [lt, rt]
                    .iter()
                    .any(|t| t.is_some_and(|t| !t.is_array() && matches!(t.base(), Base::Bool | Base::Bpchar))) =>
            {
                // A boolean concatenated prints as `true`/`false` (its text cast), not SQLite's 1/0; a
                // char(n) loses its padding (its cast to text).
                let as_text = |e: Expr, t: Option<PgType>| match t {
                    Some(t) if t.base() == Base::Bool && !t.is_array() => cast_call(e, PgType::TEXT, Some(t)),
                    Some(t) if t.base() == Base::Bpchar && !t.is_array() => call("rtrim", vec![e, string(" ")]),
                    _ => e,
                };
                Some(Expr::BinaryOp {
                    left: Box::new(as_text(take(left), lt)),
                    op: B::StringConcat,
                    right: Box::new(as_text(take(right), rt)),
                })
            }
            B::LongArrow => Some(call("pg_json_get", vec![take(left), take(right), string("text")])),
            B::Minus if lt.is_some_and(|t| t.base() == Base::Jsonb) => {
                Some(call("pg_jsonb_delete", vec![take(left), take(right)]))
            }
            B::Plus | B::Minus | B::Multiply | B::Divide
                if is_string_literal(left) != is_string_literal(right)
                    && (if is_string_literal(left) { rt } else { lt }).is_some_and(PgType::is_numeric) =>
            {
                // An untyped string in arithmetic with a number is read as that number's type (`'a' + 1`
                // is 22P02, as in PostgreSQL), and the operation is then typed again.
                let ty = if is_string_literal(left) { rt } else { lt };
                coerce_literals(ty, [left.as_mut(), right.as_mut()].into_iter());
                return self.rewrite_binary(left, op, right);
            }
            B::Plus | B::Minus | B::Multiply | B::Divide
                if lt.is_some_and(|t| t.base() == Base::Interval && !t.is_array())
                    != rt.is_some_and(|t| t.base() == Base::Interval && !t.is_array())
                    && (matches!(op, B::Multiply | B::Divide))
                    && lt.or(rt).is_some() =>
            {
                // interval * number, number * interval, interval / number.
                let (interval, factor) = if lt.is_some_and(|t| t.base() == Base::Interval) {
                    (take(left), take(right))
                } else if matches!(op, B::Multiply) {
                    (take(right), take(left))
                } else {
                    return Err(operator_error(op, lt, rt));
                };
                let sign = if matches!(op, B::Multiply) { "*" } else { "/" };
                Some(call("pg_interval_scale", vec![interval, string(sign), factor]))
            }
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo
                if !arithmetic_operands(
                    lt.filter(|_| !is_string_literal(left)),
                    rt.filter(|_| !is_string_literal(right)),
                ) =>
            {
                return Err(operator_error(op, lt, rt));
            }
            B::Plus | B::Minus | B::Multiply | B::Divide
                if arithmetic_type(lt, op, rt).is_some_and(|t| matches!(t.base(), Base::Float4 | Base::Float8)) =>
            {
                let sign = match op {
                    B::Plus => "+",
                    B::Minus => "-",
                    B::Multiply => "*",
                    _ => "/",
                };
                let result = arithmetic_type(lt, op, rt).map_or("float8".to_owned(), PgType::catalog_text);
                Some(call(
                    "pg_float_arith",
                    vec![take(left), string(sign), take(right), string(&result)],
                ))
            }
            B::Plus | B::Minus | B::Multiply => {
                self.learn_param(right, lt);
                self.learn_param(left, rt);
                let (lt, rt) = (lt.or(rt), rt.or(lt));
                match (lt, rt) {
                    (Some(l), Some(r)) if datetime_result(l, op, r).is_some() => {
                        let result = datetime_result(l, op, r).expect("checked above");
                        let sign = if matches!(op, B::Plus) { "+" } else { "-" };
                        Some(call(
                            "pg_datetime_arith",
                            vec![
                                take(left),
                                string(sign),
                                take(right),
                                string(&result.catalog_text()),
                                string(&l.catalog_text()),
                                string(&r.catalog_text()),
                            ],
                        ))
                    }
                    (Some(l), Some(r)) if l.is_integer() && r.is_integer() => {
                        let result = arithmetic_type(Some(l), op, Some(r)).expect("integers");
                        let bits = match result.base() {
                            Base::Int2 => 16,
                            Base::Int4 => 32,
                            _ => 64,
                        };
                        let inner = Expr::BinaryOp {
                            left: Box::new(take(left)),
                            op: op.clone(),
                            right: Box::new(take(right)),
                        };
                        Some(call(
                            "pg_int",
                            vec![Expr::Nested(Box::new(inner)), Expr::value(number(&bits.to_string()))],
                        ))
                    }
                    (Some(l), Some(r))
                        if (l.base() == Base::Numeric || r.base() == Base::Numeric)
                            && arithmetic_type(Some(l), op, Some(r)) == Some(PgType::NUMERIC) =>
                    {
                        let name = match op {
                            B::Plus => "pg_numeric_add",
                            B::Minus => "pg_numeric_sub",
                            _ => "pg_numeric_mul",
                        };
                        Some(call(name, vec![take(left), take(right)]))
                    }
                    _ => None,
                }
            }
            B::Divide if arithmetic_type(lt, op, rt) == Some(PgType::NUMERIC) => {
                Some(call("pg_numeric_div", vec![take(left), take(right)]))
            }
            B::Divide | B::Modulo => {
                let name = if matches!(op, B::Divide) { "pg_div" } else { "pg_mod" };
                let both_int = lt.is_some_and(PgType::is_integer) && rt.is_some_and(PgType::is_integer);
                let mode = if both_int { "int" } else { "any" };
                Some(call(name, vec![take(left), take(right), string(mode)]))
            }
            B::PGRegexMatch | B::PGRegexIMatch | B::PGRegexNotMatch | B::PGRegexNotIMatch => {
                let flags = if matches!(op, B::PGRegexIMatch | B::PGRegexNotIMatch) {
                    "i"
                } else {
                    ""
                };
                let negated = matches!(op, B::PGRegexNotMatch | B::PGRegexNotIMatch);
                Some(negate_if(
                    negated,
                    call("pg_regex", vec![take(left), take(right), string(flags)]),
                ))
            }
            B::Arrow => Some(call("pg_json_get", vec![take(left), take(right), string("json")])),
            B::AtArrow | B::ArrowAt | B::PGOverlap
                if lt.is_some_and(PgType::is_array) || rt.is_some_and(PgType::is_array) =>
            {
                let element = lt.or(rt).map_or(PgType::TEXT, PgType::element);
                let (name, a, b) = match op {
                    B::AtArrow => ("pg_array_contains_all", take(left), take(right)),
                    B::ArrowAt => ("pg_array_contains_all", take(right), take(left)),
                    _ => ("pg_array_overlap", take(left), take(right)),
                };
                Some(call(name, vec![a, b, string(&element.catalog_text())]))
            }
            B::AtArrow => Some(call("pg_jsonb_contains", vec![take(left), take(right)])),
            B::ArrowAt => Some(call("pg_jsonb_contains", vec![take(right), take(left)])),
            B::Question => Some(call("pg_jsonb_has_key", vec![take(left), take(right)])),
            B::QuestionPipe => Some(call("pg_jsonb_has_keys", vec![take(left), take(right), string("any")])),
            B::QuestionAnd => Some(call("pg_jsonb_has_keys", vec![take(left), take(right), string("all")])),
            B::HashArrow => Some(call("pg_jsonb_path", vec![take(left), take(right), string("jsonb")])),
            B::HashLongArrow => Some(call("pg_jsonb_path", vec![take(left), take(right), string("text")])),
            B::HashMinus => Some(call("pg_jsonb_delete_path", vec![take(left), take(right)])),
            B::PGStartsWith => Some(call("starts_with", vec![take(left), take(right)])),
            B::Overlaps => Some(overlaps(left, right)?),
            B::PGLikeMatch | B::PGNotLikeMatch => {
                let like = Expr::Like {
                    negated: matches!(op, B::PGNotLikeMatch),
                    any: false,
                    expr: Box::new(take(left)),
                    pattern: Box::new(take(right)),
                    escape_char: None,
                };
                Some(like)
            }
            B::PGILikeMatch | B::PGNotILikeMatch => Some(negate_if(
                matches!(op, B::PGNotILikeMatch),
                call("pg_ilike", vec![take(left), take(right)]),
            )),
            B::PGExp => Some(crate::functions::typed_expr(
                "pow",
                &[lt, rt],
                vec![take(left), take(right)],
            )),
            B::PGBitwiseXor => {
                // a # b = (a | b) & ~(a & b): SQLite has no XOR operator.
                let (a, b) = (take(left), take(right));
                let or = Expr::BinaryOp {
                    left: Box::new(a.clone()),
                    op: B::BitwiseOr,
                    right: Box::new(b.clone()),
                };
                let and = Expr::BinaryOp {
                    left: Box::new(a),
                    op: B::BitwiseAnd,
                    right: Box::new(b),
                };
                Some(Expr::BinaryOp {
                    left: Box::new(Expr::Nested(Box::new(or))),
                    op: B::BitwiseAnd,
                    right: Box::new(Expr::UnaryOp {
                        op: UnaryOperator::BitwiseNot,
                        expr: Box::new(Expr::Nested(Box::new(and))),
                    }),
                })
            }
            _ => None,
        })
    }

    /// A comparison whose operands SQLite would compare by storage rather than by value: a numeric (kept
    /// as its exact text) against another number where no column's affinity or collation converts
    /// either, `char(n)` values (trailing spaces do not count), jsonb values (numbers by value).
    fn typed_comparison(
        &mut self,
        left: &mut Box<Expr>,
        op: &BinaryOperator,
        right: &mut Box<Expr>,
        lt: Option<PgType>,
        rt: Option<PgType>,
    ) -> Option<Expr> {
        let base = |t: Option<PgType>| t.filter(|t| !t.is_array()).map(PgType::base);
        let compare = |function: &str, a: Expr, b: Expr| Expr::BinaryOp {
            left: Box::new(call(function, vec![a, b])),
            op: op.clone(),
            right: Box::new(Expr::value(number("0"))),
        };
        let (lb, rb) = (base(lt), base(rt));
        if lb == Some(Base::Jsonb)
            && rb == Some(Base::Jsonb)
            && matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq)
        {
            let equal = call("pg_jsonb_eq", vec![take(left), take(right)]);
            return Some(negate_if(matches!(op, BinaryOperator::NotEq), equal));
        }
        if lb == Some(Base::Bpchar) || rb == Some(Base::Bpchar) {
            if lt.is_some_and(PgType::is_string) && rt.is_some_and(PgType::is_string) {
                let trimmed = |e: Expr| call("rtrim", vec![e, string(" ")]);
                return Some(Expr::BinaryOp {
                    left: Box::new(trimmed(take(left))),
                    op: op.clone(),
                    right: Box::new(trimmed(take(right))),
                });
            }
            return None;
        }
        let numeric = |t: Option<PgType>| t.is_some_and(|t| !t.is_array() && t.is_numeric());
        let text_number = lb == Some(Base::Numeric) || rb == Some(Base::Numeric);
        let is_column = |e: &Expr| matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
        if numeric(lt) && numeric(rt) && text_number && !is_column(left) && !is_column(right) {
            return Some(compare("pg_numeric_cmp", take(left), take(right)));
        }
        None
    }
}

/// Whether `+ - * / %` can apply to operands of these types (unknown types are given the benefit of the
/// doubt): numbers, dates and times, intervals. Text, booleans, json, arrays and uuids have no arithmetic
/// in PostgreSQL.
fn arithmetic_operands(lt: Option<PgType>, rt: Option<PgType>) -> bool {
    let usable = |t: Option<PgType>| match t {
        None => true,
        Some(t) if t.is_array() => false,
        Some(t) => !matches!(
            t.base(),
            Base::Bool
                | Base::Json
                | Base::Jsonb
                | Base::Uuid
                | Base::Bytea
                | Base::Varchar
                | Base::Bpchar
                | Base::Text
        ),
    };
    usable(lt) && usable(rt)
}

/// 42883 for an operator PostgreSQL has no version of for these operand types.
fn operator_error(op: &BinaryOperator, lt: Option<PgType>, rt: Option<PgType>) -> PgError {
    let name = |t: Option<PgType>| t.map_or_else(|| "unknown".to_owned(), |t| t.sql_name());
    PgError::new(
        crate::error::UNDEFINED_FUNCTION,
        format!("operator does not exist: {} {op} {}", name(lt), name(rt)),
    )
}

/// `(s1, e1) OVERLAPS (s2, e2)` over dates and timestamps (their stored texts order as they do): each
/// period is put in order, is half-open (`s <= t < e`) unless a single instant, and the two overlap when
/// one starts inside the other or both start together.
fn overlaps(left: &mut Box<Expr>, right: &mut Box<Expr>) -> Result<Expr, PgError> {
    let (Expr::Tuple(a), Expr::Tuple(b)) = (left.as_ref(), right.as_ref()) else {
        return Err(PgError::unsupported("OVERLAPS of anything but two (start, end) pairs"));
    };
    let ([s1, e1], [s2, e2]) = (a.as_slice(), b.as_slice()) else {
        return Err(PgError::unsupported("OVERLAPS of anything but two (start, end) pairs"));
    };
    let (lo1, hi1) = (
        call("min", vec![s1.clone(), e1.clone()]),
        call("max", vec![s1.clone(), e1.clone()]),
    );
    let (lo2, hi2) = (
        call("min", vec![s2.clone(), e2.clone()]),
        call("max", vec![s2.clone(), e2.clone()]),
    );
    let sql = format!("CASE WHEN {lo1} = {lo2} THEN true WHEN {lo1} > {lo2} THEN {lo1} < {hi2} ELSE {lo2} < {hi1} END");
    sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting OVERLAPS: {e}")))
}
