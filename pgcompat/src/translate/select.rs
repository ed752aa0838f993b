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
    if let Some(translation) = statement_with_queries(conn, catalog, query)? {
        return Ok(translation);
    }
    // Before the passes, which may make a set operation of a plain query (grouping sets) or the other way round.
    let is_set_operation = is_set_operation(query.body.as_ref());
    let selects_subquery = selects_subquery(query.body.as_ref());
    expand_table_form(query)?;
    tablesample::rewrite(query)?;
    // Row locks: SQLite transactions are serializable and a writer excludes every other writer, so
    // FOR UPDATE/SHARE add nothing (a conflicting writer gets 40001 at its commit).
    query.locks.clear();
    check_query_grouping(conn, query.body.as_ref())?;
    cte_columns::complete_column_lists(query)?;
    names::name_columns(query);
    // After naming: the left side's names name the result.
    set_all::rewrite(query)?;
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
        bound: None,
        notices: Vec::new(),
        column_origins: !is_set_operation && !selects_subquery && !rewriter.reads_view,
    })
}

/// Whether a query's SELECT list holds a scalar subquery (see [`items_select_subquery`]).
fn selects_subquery(body: &SetExpr) -> bool {
    match body {
        SetExpr::Select(select) => items_select_subquery(&select.projection),
        SetExpr::Query(inner) => selects_subquery(inner.body.as_ref()),
        _ => false,
    }
}

/// Whether a SELECT or RETURNING list holds a scalar subquery: PostgreSQL gives such a column no origin,
/// SQLite the subquery's column's.
pub(super) fn items_select_subquery(items: &[SelectItem]) -> bool {
    fn is_subquery(expr: &Expr) -> bool {
        match expr {
            Expr::Subquery(_) => true,
            Expr::Nested(inner) => is_subquery(inner),
            _ => false,
        }
    }
    items.iter().any(|item| match item {
        SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => is_subquery(expr),
        _ => false,
    })
}

/// Whether a query's body is a set operation (`UNION`, `INTERSECT`, `EXCEPT`), through parentheses.
fn is_set_operation(body: &SetExpr) -> bool {
    match body {
        SetExpr::SetOperation { .. } => true,
        SetExpr::Query(inner) => is_set_operation(inner.body.as_ref()),
        _ => false,
    }
}

/// `WITH q AS (…) INSERT|UPDATE|DELETE …` (its WITH plain queries): the statement translated as it is alone,
/// its WITH as a query's (SQLite takes a WITH before each of them too). An INSERT's WITH becomes its source
/// query's, the only part that can read it. `None` for anything else.
fn statement_with_queries(
    conn: &Connection,
    catalog: &Catalog,
    query: &mut Box<Query>,
) -> Result<Option<Translation>, PgError> {
    if !matches!(
        query.body.as_ref(),
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_)
    ) {
        return Ok(None);
    }
    let Some(mut with) = query.with.take() else {
        return Ok(None);
    };
    if let SetExpr::Insert(Statement::Insert(insert)) = query.body.as_mut() {
        if let Some(source) = insert.source.as_mut().filter(|source| source.with.is_none()) {
            source.with = Some(with);
            let overriding = insert.overriding.take();
            return translate_insert(conn, catalog, insert, overriding).map(Some);
        }
        query.with = Some(with);
        return Ok(None);
    }
    // The WITH's queries rewritten as a query's (over a placeholder body), then put before the statement.
    let mut holder = Box::new(Query {
        with: Some(with),
        ..*Parser::parse_sql(&PostgreSqlDialect {}, "SELECT 1")
            .ok()
            .and_then(|mut parsed| match parsed.pop() {
                Some(Statement::Query(query)) => Some(query),
                _ => None,
            })
            .ok_or_else(|| PgError::new(crate::error::INTERNAL_ERROR, "parsing a placeholder query"))?
    });
    let queries = translate_query(conn, catalog, &mut holder)?;
    with = holder
        .with
        .take()
        .ok_or_else(|| PgError::new(crate::error::INTERNAL_ERROR, "the WITH of a statement went missing"))?;
    let (mut translation, statement) = match query.body.as_mut() {
        SetExpr::Update(Statement::Update(update)) => {
            let rewritten = dml::rewrite_update_statement(conn, catalog, update)?;
            (
                rewritten.into_translation(String::new(), Kind::Update),
                update.to_string(),
            )
        }
        SetExpr::Delete(Statement::Delete(delete)) => {
            let rewritten = dml::rewrite_delete_statement(catalog, delete)?;
            (
                rewritten.into_translation(String::new(), Kind::Delete),
                delete.to_string(),
            )
        }
        _ => {
            return Err(PgError::unsupported("this statement after WITH"));
        }
    };
    translation.steps = vec![format!("{with} {statement}")];
    translation.uses_now |= queries.uses_now;
    // A parameter typed by either part keeps that type.
    if translation.params.len() < queries.params.len() {
        translation.params.resize(queries.params.len(), None);
    }
    for (slot, ty) in translation.params.iter_mut().zip(&queries.params) {
        if slot.is_none() {
            *slot = *ty;
        }
    }
    Ok(Some(translation))
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
