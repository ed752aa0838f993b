//! A query (`SELECT`, `VALUES`, `TABLE t`, set operations, CTEs) through the query passes in order: names,
//! laterals, `DISTINCT ON`, grouping sets, then the expression rewrite and the output types.

use super::*;

/// The query's translation: one SQLite `SELECT` with its result and parameter types.
pub(super) fn translate_query(
    conn: &Connection,
    catalog: &Catalog,
    query: &mut Box<Query>,
) -> Result<Translation, PgError> {
    if modifying_cte::has_modifying_cte(query) {
        return modifying_cte::translate(conn, catalog, (**query).clone());
    }
    expand_table_form(query)?;
    tablesample::rewrite(query)?;
    // Row locks: SQLite transactions are serializable and a writer excludes every other writer, so
    // FOR UPDATE/SHARE add nothing (a conflicting writer gets 40001 at its commit).
    query.locks.clear();
    check_query_grouping(conn, query.body.as_ref())?;
    cte_columns::complete_column_lists(query)?;
    names::name_columns(query);
    // After naming: a lateral's column keeps its name when its reference becomes a subquery.
    lateral::rewrite(query)?;
    distinct_on::rewrite(query)?;
    grouping_sets::rewrite(query)?;
    names::name_columns(query);
    cte_columns::expand_repeated_names(query);
    let mut rewriter = Rewriter::new(catalog);
    rewriter.rewrite_query(query.as_mut())?;
    query_rules::type_set_operation_literals(catalog, query);
    if rewriter.uses_catalog {
        catalog_refs::name_outputs(query);
    }
    // The derived tables' and CTEs' column types, as the rewrite found them.
    let columns = output_types(catalog, query, &rewriter.typer.ctes, &rewriter.typer.rewritten);
    Ok(Translation {
        steps: vec![query.to_string()],
        primary: 0,
        columns,
        params: rewriter.params,
        kind: Kind::Select,
        uses_now: rewriter.uses_now,
        foreign_keys_off: false,
        param_columns: param_columns(query),
        captures: Vec::new(),
    })
}

/// `TABLE t` is `SELECT * FROM t`.
fn expand_table_form(query: &mut Query) -> Result<(), PgError> {
    let SetExpr::Table(table) = query.body.as_ref() else {
        return Ok(());
    };
    let name = match (&table.schema_name, &table.table_name) {
        (Some(schema), Some(name)) => format!("{schema}.{name}"),
        (None, Some(name)) => name.to_string(),
        _ => return Err(PgError::new(crate::error::SYNTAX_ERROR, "TABLE without a table")),
    };
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &format!("SELECT * FROM {name}"))
        .map_err(|e| PgError::new(crate::error::SYNTAX_ERROR, e.to_string()))?;
    if let Some(Statement::Query(select)) = parsed.into_iter().next() {
        query.body = select.body;
    }
    Ok(())
}
