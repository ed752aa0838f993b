//! Binary operators whose meaning depends on the operand types: arithmetic, `||`, comparisons of typed
//! values, the JSON and array operators.

use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator};

use super::*;
use crate::error::PgError;
use crate::types::{Base, PgType};

impl Rewriter<'_> {
    pub(super) fn rewrite_binary(
        &mut self,
        left: &mut Box<Expr>,
        op: &BinaryOperator,
        right: &mut Box<Expr>,
    ) -> Result<Option<Expr>, PgError> {
        use BinaryOperator as B;
        let lt = self.typer.infer(left);
        let rt = self.typer.infer(right);
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
                self.learn_param(right, lt);
                self.learn_param(left, rt);
                // An untyped string compared with a typed value is read as that type, as PostgreSQL does.
                if is_string_literal(right) {
                    coerce_literals(lt, std::iter::once(right.as_mut()));
                }
                if is_string_literal(left) {
                    coerce_literals(rt, std::iter::once(left.as_mut()));
                }
                None
            }
            B::StringConcat if lt.is_some_and(|t| t.base() == Base::Jsonb) => {
                Some(call("pg_jsonb_concat", vec![take(left), take(right)]))
            }
            B::StringConcat
                if lt.is_some_and(|t| t.base() == Base::Bool) || rt.is_some_and(|t| t.base() == Base::Bool) =>
            {
                // A boolean concatenated prints as `true`/`false` (its text cast), not SQLite's 1/0.
                let as_text = |e: Expr, t: Option<PgType>| match t {
                    Some(t) if t.base() == Base::Bool => cast_call(e, PgType::TEXT, Some(t)),
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
}
