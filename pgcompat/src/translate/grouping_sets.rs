//! `GROUP BY ROLLUP (…)`, `CUBE (…)` and `GROUPING SETS (…)`, which SQLite lacks, as a `UNION ALL` of one
//! grouped SELECT per grouping set. In the branch of a set, a grouping column outside it reads NULL (as
//! PostgreSQL's does), and `GROUPING(a, b)` is that branch's bit mask; the totals come first, as from
//! PostgreSQL's hashed grouping-sets plan. The query's ORDER BY and LIMIT then
//! apply to the union, whose result columns are the SELECT's (named already, by `names`).
//!
//! At most [`GROUPING_SETS_MAX`] sets (a CUBE of n columns has 2^n).

use sqlparser::ast::{Expr, GroupByExpr, Query, Select, SelectItem, SetExpr, SetOperator, SetQuantifier};

use super::expr::last_part;
use crate::error::PgError;

/// Most grouping sets one GROUP BY may expand to.
pub const GROUPING_SETS_MAX: usize = 64;

/// The grouping sets of a GROUP BY list (`None` when it has no ROLLUP, CUBE or GROUPING SETS).
fn sets_of(group_by: &[Expr]) -> Result<Option<Vec<Vec<Expr>>>, PgError> {
    if !group_by
        .iter()
        .any(|e| matches!(e, Expr::Rollup(_) | Expr::Cube(_) | Expr::GroupingSets(_)))
    {
        return Ok(None);
    }
    // The product of each item's sets: a plain item is one set of itself.
    let mut sets: Vec<Vec<Expr>> = vec![Vec::new()];
    for item in group_by {
        let choices: Vec<Vec<Expr>> = match item {
            Expr::Rollup(parts) => (0..=parts.len()).rev().map(|n| parts[..n].concat()).collect(),
            Expr::Cube(parts) => {
                if parts.len() > 6 {
                    return Err(PgError::unsupported("CUBE of more than 6 columns"));
                }
                let mut out = Vec::new();
                for mask in (0..1u32 << parts.len()).rev() {
                    let chosen: Vec<Expr> = parts
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << (parts.len() - 1 - i)) != 0)
                        .flat_map(|(_, p)| p.clone())
                        .collect();
                    out.push(chosen);
                }
                out
            }
            Expr::GroupingSets(parts) => parts.clone(),
            plain => vec![vec![plain.clone()]],
        };
        let mut next = Vec::with_capacity(sets.len() * choices.len());
        for set in &sets {
            for choice in &choices {
                let mut combined = set.clone();
                combined.extend(choice.iter().cloned());
                next.push(combined);
            }
        }
        if next.len() > GROUPING_SETS_MAX {
            return Err(PgError::unsupported(format!(
                "more than {GROUPING_SETS_MAX} grouping sets"
            )));
        }
        sets = next;
    }
    Ok(Some(sets))
}

/// Whether two grouping expressions are the same (column references by their column name).
fn same(a: &Expr, b: &Expr) -> bool {
    let column = |e: &Expr| match e {
        Expr::Identifier(i) => Some(i.value.to_ascii_lowercase()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.to_ascii_lowercase()),
        _ => None,
    };
    match (column(a), column(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.to_string() == b.to_string(),
    }
}

/// `expr` in the branch of grouping set `set` (all grouping columns `all`): grouped-away columns NULL,
/// `GROUPING(…)` its mask. Aggregate arguments are left alone.
fn in_branch(expr: &Expr, set: &[Expr], all: &[Expr]) -> Expr {
    if all.iter().any(|g| same(g, expr)) && !set.iter().any(|g| same(g, expr)) {
        return Expr::value(sqlparser::ast::Value::Null);
    }
    match expr {
        Expr::Function(f) if last_part(&f.name).eq_ignore_ascii_case("grouping") => {
            let args = super::expr::plain_args(f);
            let mut mask = 0u64;
            for arg in &args {
                mask = (mask << 1) | u64::from(!set.iter().any(|g| same(g, arg)));
            }
            Expr::value(sqlparser::ast::Value::Number(mask.to_string(), false))
        }
        Expr::Function(_) => expr.clone(),
        Expr::BinaryOp { left, op, right } => Expr::BinaryOp {
            left: Box::new(in_branch(left, set, all)),
            op: op.clone(),
            right: Box::new(in_branch(right, set, all)),
        },
        Expr::Nested(inner) => Expr::Nested(Box::new(in_branch(inner, set, all))),
        Expr::Cast { expr: inner, .. } => {
            let mut cast = expr.clone();
            if let Expr::Cast { expr: slot, .. } = &mut cast {
                **slot = in_branch(inner, set, all);
            }
            cast
        }
        Expr::Case {
            case_token,
            end_token,
            operand,
            conditions,
            else_result,
        } => Expr::Case {
            case_token: case_token.clone(),
            end_token: end_token.clone(),
            operand: operand.as_ref().map(|o| Box::new(in_branch(o, set, all))),
            conditions: conditions
                .iter()
                .map(|c| sqlparser::ast::CaseWhen {
                    condition: in_branch(&c.condition, set, all),
                    result: in_branch(&c.result, set, all),
                })
                .collect(),
            else_result: else_result.as_ref().map(|e| Box::new(in_branch(e, set, all))),
        },
        other => other.clone(),
    }
}

fn branch(select: &Select, set: &[Expr], all: &[Expr]) -> Select {
    let mut branch = select.clone();
    for item in &mut branch.projection {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
            *e = in_branch(e, set, all);
        }
    }
    branch.having = select.having.as_ref().map(|h| in_branch(h, set, all));
    branch.group_by = GroupByExpr::Expressions(set.to_vec(), Vec::new());
    branch
}

/// Rewrites a query whose SELECT groups by grouping sets; other queries are left alone.
pub(crate) fn rewrite(query: &mut Query) -> Result<(), PgError> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return Ok(());
    };
    let GroupByExpr::Expressions(group_by, _) = &select.group_by else {
        return Ok(());
    };
    let Some(sets) = sets_of(group_by)? else {
        return Ok(());
    };
    if select.distinct.is_some() {
        return Err(PgError::unsupported("DISTINCT with grouping sets"));
    }
    let mut all: Vec<Expr> = Vec::new();
    for set in &sets {
        for g in set {
            if !all.iter().any(|a| same(a, g)) {
                all.push(g.clone());
            }
        }
    }
    // The smallest sets first, as PostgreSQL's hashed plan for them emits the totals first.
    let mut body: Option<SetExpr> = None;
    for set in sets.iter().rev() {
        let next = SetExpr::Select(Box::new(branch(select, set, &all)));
        body = Some(match body {
            None => next,
            Some(left) => SetExpr::SetOperation {
                op: SetOperator::Union,
                set_quantifier: SetQuantifier::All,
                left: Box::new(left),
                right: Box::new(next),
            },
        });
    }
    if let Some(body) = body {
        *query.body = body;
    }
    Ok(())
}
