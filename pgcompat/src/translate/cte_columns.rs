//! A CTE's columns named as PostgreSQL names them, where SQLite would differ.
//!
//! - **A column list shorter than the query** (`WITH t(a) AS (SELECT 1, 2)`): PostgreSQL names the first
//!   columns from the list and the others as the query names them; SQLite wants one name per column, so the
//!   list is completed with the query's own names ([`complete_column_lists`]). A list longer than the query
//!   is PostgreSQL's 42P10.
//! - **Columns of the same name** (`WITH t AS (SELECT 1, 2)`: two `?column?`): PostgreSQL keeps both names
//!   when `*` reads them; SQLite makes a CTE's names unique (`?column?:1`) and `*` shows those. So a CTE
//!   whose names repeat gets unique ones of its own, and every `*` over it (in the main query and in later
//!   CTEs) is spelled out, each column aliased back to its PostgreSQL name ([`expand_repeated_names`]). A
//!   `*` this cannot spell out (over a table, a subquery, a `USING` or `NATURAL` join) is left as it is.

use std::collections::HashSet;

use sqlparser::ast::{
    Expr, Ident, JoinConstraint, JoinOperator, ObjectName, ObjectNamePart, Query, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableAliasColumnDef, TableFactor, WildcardAdditionalOptions,
};

use crate::error::{PgError, INVALID_COLUMN_REFERENCE};

/// Most columns one CTE may name (PostgreSQL's limit on a relation's columns).
const CTE_COLUMNS_MAX: usize = 1600;

/// Completes each CTE's column list that is shorter than its query with the query's own names; a longer one
/// is 42P10. A query whose first SELECT has a `*` is left alone (its width is not known here).
pub(crate) fn complete_column_lists(query: &mut Query) -> Result<(), PgError> {
    let Some(with) = &mut query.with else {
        return Ok(());
    };
    for cte in &mut with.cte_tables {
        if cte.alias.columns.is_empty() {
            continue;
        }
        let listed = cte.alias.columns.len();
        let Some(width) = first_select_items(&cte.query).and_then(plain_width) else {
            continue;
        };
        if listed > width {
            return Err(PgError::new(
                INVALID_COLUMN_REFERENCE,
                format!(
                    "WITH query \"{}\" has {width} columns available but {listed} columns specified",
                    cte.alias.name.value
                ),
            ));
        }
        if listed == width {
            continue;
        }
        super::names::name_columns(&mut cte.query);
        let names = output_names(&cte.query).unwrap_or_default();
        for name in names.into_iter().skip(listed) {
            cte.alias.columns.push(TableAliasColumnDef {
                name: Ident::with_quote('"', name),
                data_type: None,
            });
        }
    }
    Ok(())
}

/// A CTE's columns: the names PostgreSQL gives them and the (unique) names SQLite knows them by.
struct KnownCte {
    /// The CTE's name, folded.
    name: String,
    /// `(PostgreSQL name, SQLite name)` per column, in order.
    columns: Vec<(String, String)>,
}

/// Makes the names of each CTE whose column names repeat unique, and spells out every `*` over such a CTE
/// with its columns aliased to their PostgreSQL names. Runs after the columns are named (`names`).
pub(crate) fn expand_repeated_names(query: &mut Query) {
    let Some(with) = &mut query.with else {
        return;
    };
    let mut known: Vec<KnownCte> = Vec::new();
    let mut any_repeated = false;
    for cte in &mut with.cte_tables {
        if any_repeated {
            expand_in_body(cte.query.body.as_mut(), &known);
        }
        let name = fold(&cte.alias.name);
        let names = if cte.alias.columns.is_empty() {
            output_names(&cte.query)
        } else {
            Some(cte.alias.columns.iter().map(|c| c.name.value.clone()).collect())
        };
        // A CTE of unknown columns hides any earlier one of its name.
        known.retain(|k| k.name != name);
        let Some(names) = names.filter(|n| n.len() <= CTE_COLUMNS_MAX) else {
            continue;
        };
        let unique = unique_names(&names);
        if unique != names {
            any_repeated = true;
            rename_outputs(cte, &unique);
        }
        known.push(KnownCte {
            name,
            columns: names.into_iter().zip(unique).collect(),
        });
    }
    if any_repeated {
        expand_in_body(query.body.as_mut(), &known);
    }
}

/// `names` with each repeat renamed `<name>:<n>` (the first `n` that no other column has).
fn unique_names(names: &[String]) -> Vec<String> {
    let taken: HashSet<&str> = names.iter().map(String::as_str).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut made: Vec<String> = Vec::with_capacity(names.len());
    let mut extra: HashSet<String> = HashSet::new();
    for name in names {
        if seen.insert(name.as_str()) {
            made.push(name.clone());
            continue;
        }
        let renamed = (1..=names.len())
            .map(|n| format!("{name}:{n}"))
            .find(|candidate| !taken.contains(candidate.as_str()) && !extra.contains(candidate))
            .expect("one of names.len() candidates is free: fewer names than that are taken");
        extra.insert(renamed.clone());
        made.push(renamed);
    }
    made
}

/// Gives the CTE the SQLite names `unique`: in its column list if it has one, else as its first SELECT's
/// aliases.
fn rename_outputs(cte: &mut sqlparser::ast::Cte, unique: &[String]) {
    if !cte.alias.columns.is_empty() {
        for (column, name) in cte.alias.columns.iter_mut().zip(unique) {
            column.name = Ident::with_quote('"', name.clone());
        }
        return;
    }
    if let Some(items) = first_select_items_mut(&mut cte.query) {
        for (item, name) in items.iter_mut().zip(unique) {
            if let SelectItem::ExprWithAlias { alias, .. } = item {
                *alias = Ident::with_quote('"', name.clone());
            }
        }
    }
}

/// Spells out `*` over the known CTEs in every SELECT of a query body (not in nested subqueries).
fn expand_in_body(body: &mut SetExpr, known: &[KnownCte]) {
    match body {
        SetExpr::Select(select) => {
            let Some(relations) = relations_of(&select.from, known) else {
                return;
            };
            let mut items = Vec::with_capacity(select.projection.len());
            for item in std::mem::take(&mut select.projection) {
                match &item {
                    SelectItem::Wildcard(options) if plain(options) => {
                        items.extend(relations.iter().flat_map(|(q, k)| spelled_out(q, k)));
                    }
                    SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), options)
                        if plain(options) =>
                    {
                        match relations.iter().find(|(q, _)| qualifier_is(name, q)) {
                            Some((q, k)) => items.extend(spelled_out(q, k)),
                            None => items.push(item),
                        }
                    }
                    _ => items.push(item),
                }
            }
            select.projection = items;
        }
        SetExpr::SetOperation { left, right, .. } => {
            expand_in_body(left, known);
            expand_in_body(right, known);
        }
        _ => {}
    }
}

/// The FROM items as `(qualifier, CTE)` when every one is a known CTE read by name (no column aliases) and
/// no join merges columns (`USING`, `NATURAL`); `None` when a `*` over them cannot be spelled out.
fn relations_of<'a>(
    from: &[sqlparser::ast::TableWithJoins],
    known: &'a [KnownCte],
) -> Option<Vec<(Ident, &'a KnownCte)>> {
    let mut relations = Vec::new();
    for table in from {
        for join in &table.joins {
            if merges_columns(&join.join_operator) {
                return None;
            }
        }
        for factor in std::iter::once(&table.relation).chain(table.joins.iter().map(|j| &j.relation)) {
            let TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } = factor
            else {
                return None;
            };
            let [ObjectNamePart::Identifier(ident)] = name.0.as_slice() else {
                return None;
            };
            let cte = known.iter().rev().find(|k| k.name == fold(ident))?;
            let qualifier = match alias {
                Some(alias) if !alias.columns.is_empty() => return None,
                Some(alias) => alias.name.clone(),
                None => ident.clone(),
            };
            relations.push((qualifier, cte));
        }
    }
    // Worth it only when one of them has a repeated name.
    relations
        .iter()
        .any(|(_, k)| k.columns.iter().any(|(pg, sqlite)| pg != sqlite))
        .then_some(relations)
}

/// Whether a join's `*` merges columns of its two sides (`USING`, `NATURAL`): its width is not theirs summed.
pub(super) fn merges_columns(operator: &JoinOperator) -> bool {
    let constraint = match operator {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => c,
        _ => return false,
    };
    matches!(
        constraint,
        JoinConstraint::Using(_) | JoinConstraint::UsingAlias(..) | JoinConstraint::Natural
    )
}

/// `q."<sqlite name>" AS "<PostgreSQL name>"` for each column of the CTE.
fn spelled_out(qualifier: &Ident, cte: &KnownCte) -> Vec<SelectItem> {
    cte.columns
        .iter()
        .map(|(pg, sqlite)| SelectItem::ExprWithAlias {
            expr: Expr::CompoundIdentifier(vec![qualifier.clone(), Ident::with_quote('"', sqlite.clone())]),
            alias: Ident::with_quote('"', pg.clone()),
        })
        .collect()
}

fn qualifier_is(name: &ObjectName, qualifier: &Ident) -> bool {
    matches!(name.0.as_slice(), [ObjectNamePart::Identifier(ident)] if fold(ident) == fold(qualifier))
}

/// A `*` without Snowflake's or ClickHouse's additions.
fn plain(options: &WildcardAdditionalOptions) -> bool {
    options.opt_ilike.is_none()
        && options.opt_exclude.is_none()
        && options.opt_except.is_none()
        && options.opt_replace.is_none()
        && options.opt_rename.is_none()
        && options.opt_alias.is_none()
}

fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

/// The items of a query's first SELECT (the one that names its columns).
fn first_select_items(query: &Query) -> Option<&[SelectItem]> {
    let mut body = query.body.as_ref();
    loop {
        match body {
            SetExpr::Select(select) => return Some(&select.projection),
            SetExpr::SetOperation { left, .. } => body = left.as_ref(),
            SetExpr::Query(q) => body = q.body.as_ref(),
            _ => return None,
        }
    }
}

fn first_select_items_mut(query: &mut Query) -> Option<&mut Vec<SelectItem>> {
    let mut body = query.body.as_mut();
    loop {
        match body {
            SetExpr::Select(select) => return Some(&mut select.projection),
            SetExpr::SetOperation { left, .. } => body = left.as_mut(),
            SetExpr::Query(q) => body = q.body.as_mut(),
            _ => return None,
        }
    }
}

/// How many columns the items make, `None` with a `*`.
fn plain_width(items: &[SelectItem]) -> Option<usize> {
    items
        .iter()
        .all(|i| matches!(i, SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }))
        .then_some(items.len())
}

/// The names of a query's columns once they are named (`names`), `None` with a `*`.
fn output_names(query: &Query) -> Option<Vec<String>> {
    first_select_items(query)?
        .iter()
        .map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Some(fold(ident)),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().map(fold),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::Statement;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn query(sql: &str) -> Query {
        match Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses").remove(0) {
            Statement::Query(q) => *q,
            other => panic!("not a query: {other}"),
        }
    }

    fn named(sql: &str) -> Result<String, PgError> {
        let mut q = query(sql);
        complete_column_lists(&mut q)?;
        super::super::names::name_columns(&mut q);
        expand_repeated_names(&mut q);
        Ok(q.to_string())
    }

    #[test]
    fn a_short_column_list_is_completed_with_the_query_names() -> Result<(), PgError> {
        let sql = named("WITH t(a) AS (SELECT 1, 2, x FROM u) SELECT * FROM t")?;
        assert!(sql.starts_with("WITH t (a, \"?column?\", \"x\") AS"), "{sql}");
        Ok(())
    }

    #[test]
    fn a_long_column_list_is_42p10() {
        let error = named("WITH t(a, b, c) AS (SELECT 1, 2) SELECT * FROM t").expect_err("too many names");
        assert_eq!(error.code, INVALID_COLUMN_REFERENCE, "{error:?}");
    }

    #[test]
    fn repeated_names_read_through_a_star_keep_their_name() -> Result<(), PgError> {
        let sql = named("WITH t AS (SELECT 1, 'x'::text, 2 + 3) SELECT * FROM t")?;
        assert!(sql.contains("2 + 3 AS \"?column?:1\""), "{sql}");
        assert!(
            sql.ends_with(
                "SELECT t.\"?column?\" AS \"?column?\", t.\"text\" AS \"text\", t.\"?column?:1\" AS \"?column?\" FROM t"
            ),
            "{sql}"
        );
        Ok(())
    }

    #[test]
    fn a_later_cte_and_a_qualified_star_are_spelled_out_too() -> Result<(), PgError> {
        let sql = named("WITH t AS (SELECT 1, 2), u AS (SELECT * FROM t) SELECT x.*, 3 FROM u AS x")?;
        assert!(
            sql.contains("u AS (SELECT t.\"?column?\" AS \"?column?\", t.\"?column?:1\" AS \"?column?:1\" FROM t)"),
            "{sql}"
        );
        assert!(
            sql.ends_with("SELECT x.\"?column?\" AS \"?column?\", x.\"?column?:1\" AS \"?column?\", 3 AS \"?column?\" FROM u AS x"),
            "{sql}"
        );
        Ok(())
    }

    #[test]
    fn unique_names_and_unknown_relations_are_left_alone() -> Result<(), PgError> {
        let plain = "WITH t AS (SELECT 1 AS a, 2 AS b) SELECT * FROM t";
        assert!(named(plain)?.ends_with("SELECT * FROM t"));
        let joined = named("WITH t AS (SELECT 1, 2) SELECT * FROM t JOIN items ON true")?;
        assert!(joined.ends_with("SELECT * FROM t JOIN items ON true"), "{joined}");
        Ok(())
    }
}
