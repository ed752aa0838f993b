//! `x op ANY|ALL (…)` over an array or a subquery, and `[NOT] LIKE|ILIKE ANY|ALL (patterns)`, with
//! PostgreSQL's three-valued answers.

use sqlparser::ast::{BinaryOperator, Expr};

use super::*;
use crate::error::PgError;
use crate::types::Base;

/// The pattern matches `ANY`/`ALL` may quantify.
#[derive(Clone, Copy)]
enum Pattern {
    Like,
    ILike,
}

impl Rewriter<'_> {
    /// `x op ANY (…)` and `x op ALL (…)` over an array or a subquery, with PostgreSQL's three-valued
    /// answer: for ANY, true if some comparison is true, else NULL if some is NULL, else false; for ALL,
    /// false if some comparison is false, else NULL if some is NULL, else true.
    pub(super) fn quantified(
        &mut self,
        left: &mut Box<Expr>,
        op: &BinaryOperator,
        right: &mut Box<Expr>,
        all: bool,
    ) -> Result<Expr, PgError> {
        self.quantified_by(left, op, right, all, None, false)
    }

    /// `x [NOT] LIKE|ILIKE ANY|ALL (patterns)`.
    pub(super) fn quantified_like(&mut self, expr: &mut Expr) -> Result<Option<Expr>, PgError> {
        let (negated, left, pattern, kind) = match expr {
            Expr::Like {
                negated, expr, pattern, ..
            } => (*negated, expr, pattern, Pattern::Like),
            Expr::ILike {
                negated, expr, pattern, ..
            } => (*negated, expr, pattern, Pattern::ILike),
            _ => return Ok(None),
        };
        // `ILIKE ALL (…)` reaches here as a call of `all`.
        let (mut right, all) = match pattern.as_ref() {
            Expr::Function(f) if last_part(&f.name).eq_ignore_ascii_case("all") => match plain_args(f).as_slice() {
                [arg] => (Box::new((*arg).clone()), true),
                _ => return Err(PgError::unsupported("this LIKE ALL form")),
            },
            Expr::Nested(inner) => (inner.clone(), false),
            other => (Box::new(other.clone()), false),
        };
        let mut left = left.clone();
        self.quantified_by(&mut left, &BinaryOperator::Eq, &mut right, all, Some(kind), negated)
            .map(Some)
    }

    fn quantified_by(
        &mut self,
        left: &mut Box<Expr>,
        op: &BinaryOperator,
        right: &mut Box<Expr>,
        all: bool,
        pattern: Option<Pattern>,
        negated: bool,
    ) -> Result<Expr, PgError> {
        if !matches!(
            op,
            BinaryOperator::Eq
                | BinaryOperator::NotEq
                | BinaryOperator::Lt
                | BinaryOperator::LtEq
                | BinaryOperator::Gt
                | BinaryOperator::GtEq
        ) {
            return Err(PgError::unsupported(format!("ANY/ALL with {op}")));
        }
        let left_type = self.typer.infer(left);
        let q = fresh_name("q");
        let (source, value, element) = match right.as_ref() {
            Expr::Subquery(query) => {
                let element = self.typer.infer(right).or(left_type);
                (
                    format!("(WITH {q} (v) AS ({query}) SELECT v FROM {q}) AS {q}"),
                    format!("{q}.v"),
                    element,
                )
            }
            _ => {
                let element = self
                    .typer
                    .infer(right)
                    .filter(|t| t.is_array())
                    .map(PgType::element)
                    .or(left_type)
                    .unwrap_or(PgType::TEXT);
                let text = element.catalog_text();
                (
                    format!("json_each(pg_array_to_json({right}, '{text}')) AS {q}"),
                    format!("pg_cast({q}.value, '{text}', '')"),
                    Some(element),
                )
            }
        };
        let numeric = [left_type, element]
            .iter()
            .any(|t| t.is_some_and(|t| t.base() == Base::Numeric && !t.is_array()));
        let comparison = match (pattern, numeric) {
            (Some(Pattern::Like), _) => format!("{left} LIKE {value}"),
            (Some(Pattern::ILike), _) => format!("pg_ilike({left}, {value})"),
            (None, true) => format!("pg_numeric_cmp({left}, {value}) {op} 0"),
            (None, false) => format!("{left} {op} {value}"),
        };
        let comparison = if negated {
            format!("NOT ({comparison})")
        } else {
            comparison
        };
        let decided = if all {
            format!("NOT ({comparison})")
        } else {
            comparison.clone()
        };
        let sql = format!(
            "CASE WHEN EXISTS (SELECT 1 FROM {source} WHERE {decided}) THEN {first} \
             WHEN EXISTS (SELECT 1 FROM {source} WHERE ({comparison}) IS NULL) THEN NULL ELSE {last} END",
            first = if all { "false" } else { "true" },
            last = if all { "true" } else { "false" },
        );
        sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
            .try_with_sql(&sql)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting ANY/ALL: {e}")))
    }
}

/// A name for a subquery alias the rewrite adds, unique in the process.
fn fresh_name(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        "_pgc_{prefix}_{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}
