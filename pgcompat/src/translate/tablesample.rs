//! `FROM t TABLESAMPLE BERNOULLI (p)` (and `SYSTEM (p)`): each row of `t` kept with probability `p` percent,
//! as a derived table `(SELECT * FROM t WHERE random() * 100 < p) AS t` made before the other query passes
//! (which then resolve `t` and rewrite `random()` as in any query). `SYSTEM` samples blocks in PostgreSQL;
//! here it samples rows like `BERNOULLI`: the same expected share of the table, each row independently
//! (PostgreSQL only promises an approximate share for either). `REPEATABLE (seed)` is refused (0A000): a
//! repeatable sample needs a per-row pseudo-random function of the seed that SQLite's `random()` is not.
//! A literal percentage outside 0..=100 is 2202H, as in PostgreSQL.
//!
//! FROM items of the query, its CTEs, derived tables and nested joins are rewritten; a sampled table inside
//! an expression's subquery (`WHERE x IN (SELECT … TABLESAMPLE …)`) is still refused by the rewrite.

use sqlparser::ast::{
    Expr, ObjectNamePart, Query, SetExpr, TableAlias, TableFactor, TableSample, TableSampleKind, TableSampleMethod,
    TableWithJoins, Value,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::error::{PgError, SYNTAX_ERROR};

/// PostgreSQL's SQLSTATE for a sample percentage out of range (`invalid_tablesample_argument`).
const INVALID_TABLESAMPLE_ARGUMENT: &str = "2202H";

/// Rewrites every sampled table in the query's FROM items.
pub(super) fn rewrite(query: &mut Query) -> Result<(), PgError> {
    if let Some(with) = &mut query.with {
        for cte in &mut with.cte_tables {
            rewrite(&mut cte.query)?;
        }
    }
    set_expr(&mut query.body)
}

fn set_expr(body: &mut SetExpr) -> Result<(), PgError> {
    match body {
        SetExpr::Select(select) => {
            for from in &mut select.from {
                table_with_joins(from)?;
            }
            Ok(())
        }
        SetExpr::Query(query) => rewrite(query),
        SetExpr::SetOperation { left, right, .. } => {
            set_expr(left)?;
            set_expr(right)
        }
        _ => Ok(()),
    }
}

fn table_with_joins(from: &mut TableWithJoins) -> Result<(), PgError> {
    factor(&mut from.relation)?;
    for join in &mut from.joins {
        factor(&mut join.relation)?;
    }
    Ok(())
}

fn factor(factor: &mut TableFactor) -> Result<(), PgError> {
    match factor {
        TableFactor::Derived { subquery, .. } => rewrite(subquery),
        TableFactor::NestedJoin { table_with_joins, .. } => self::table_with_joins(table_with_joins),
        TableFactor::Table {
            name,
            alias,
            sample: sample @ Some(_),
            ..
        } => {
            let Some(TableSampleKind::BeforeTableAlias(sample) | TableSampleKind::AfterTableAlias(sample)) =
                sample.take()
            else {
                return Ok(());
            };
            let condition = condition(&sample)?;
            let alias = alias.take().or_else(|| match name.0.last() {
                Some(ObjectNamePart::Identifier(ident)) => Some(TableAlias {
                    explicit: true,
                    name: ident.clone(),
                    columns: Vec::new(),
                    at: None,
                }),
                _ => None,
            });
            let text = format!("SELECT * FROM {name} WHERE {condition}");
            let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &text)
                .map_err(|e| PgError::new(SYNTAX_ERROR, e.to_string()))?;
            let Some(sqlparser::ast::Statement::Query(subquery)) = parsed.pop() else {
                return Err(PgError::new(SYNTAX_ERROR, "TABLESAMPLE of a table that is not one"));
            };
            *factor = TableFactor::Derived {
                lateral: false,
                subquery,
                alias,
                sample: None,
            };
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The row filter of a sample: `random() * 100 < p`.
fn condition(sample: &TableSample) -> Result<String, PgError> {
    if sample.seed.is_some() {
        return Err(PgError::unsupported("TABLESAMPLE … REPEATABLE"));
    }
    match sample.name {
        Some(TableSampleMethod::Bernoulli | TableSampleMethod::System) => {}
        Some(other) => {
            return Err(PgError::new(
                crate::error::UNDEFINED_OBJECT,
                format!(
                    "tablesample method {} does not exist",
                    other.to_string().to_ascii_lowercase()
                ),
            ))
        }
        None => return Err(PgError::new(SYNTAX_ERROR, "TABLESAMPLE needs a method")),
    }
    let Some(quantity) = &sample.quantity else {
        return Err(PgError::new(SYNTAX_ERROR, "TABLESAMPLE needs a percentage"));
    };
    if quantity.unit.is_some() || sample.bucket.is_some() || sample.offset.is_some() {
        return Err(PgError::new(
            SYNTAX_ERROR,
            format!("syntax error at or near \"{quantity}\""),
        ));
    }
    if let Some(percent) = literal(&quantity.value) {
        if !(0.0..=100.0).contains(&percent) {
            return Err(PgError::new(
                INVALID_TABLESAMPLE_ARGUMENT,
                "sample percentage must be between 0 and 100",
            ));
        }
    }
    Ok(format!("random() * 100 < ({})::float8", quantity.value))
}

/// A numeric literal's value (a leading minus included).
fn literal(expr: &Expr) -> Option<f64> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::Number(text, _) => text.parse().ok(),
            _ => None,
        },
        Expr::UnaryOp {
            op: sqlparser::ast::UnaryOperator::Minus,
            expr,
        } => literal(expr).map(|v| -v),
        Expr::Nested(inner) => literal(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::functions::testing::row_after;

    const SETUP: &[&str] = &[
        "CREATE TABLE t (id int PRIMARY KEY, v text)",
        "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 2000) g",
    ];

    fn one(sql: &str) -> String {
        row_after(SETUP, sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .next()
            .flatten()
            .expect("a value")
    }

    #[test]
    fn a_sample_keeps_about_its_share_of_the_rows() {
        assert_eq!(one("SELECT count(*) FROM t TABLESAMPLE BERNOULLI (100)"), "2000");
        assert_eq!(one("SELECT count(*) FROM t TABLESAMPLE SYSTEM (0)"), "0");
        let half: i64 = one("SELECT count(*) FROM t TABLESAMPLE BERNOULLI (50)")
            .parse()
            .expect("a count");
        // 2000 rows at 50 %: more than 12 standard deviations (22.4) from 1000 is 1e-30 likely.
        assert!((700..=1300).contains(&half), "{half}");
        // Aliases, joins and CTEs keep working; the sampled table's columns are its own.
        assert_eq!(
            one(
                "WITH s AS (SELECT x.id FROM t AS x TABLESAMPLE BERNOULLI (100) JOIN t y ON y.id = x.id) \
                 SELECT count(*) FROM s"
            ),
            "2000"
        );
        assert_eq!(
            one("SELECT max(t.v) FROM t TABLESAMPLE BERNOULLI (100) WHERE t.id < 10"),
            "v9"
        );
    }

    #[test]
    fn bad_samples_are_refused() {
        for (sql, code) in [
            ("SELECT * FROM t TABLESAMPLE BERNOULLI (101)", "2202H"),
            ("SELECT * FROM t TABLESAMPLE BERNOULLI (-1)", "2202H"),
            ("SELECT * FROM t TABLESAMPLE BERNOULLI (5) REPEATABLE (1)", "0A000"),
        ] {
            match row_after(SETUP, sql) {
                Ok(row) => panic!("{sql}: expected {code}, got {row:?}"),
                Err(e) => assert_eq!(e.code, code, "{sql}: {e}"),
            }
        }
    }
}
