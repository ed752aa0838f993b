//! The DML half of statement translation: INSERT's column defaults and coercions, UPDATE's assignments,
//! `DELETE … USING`, and the parameter and output types a DML statement's query implies.

use super::*;

/// What rewriting an UPDATE or DELETE found: its result types (`RETURNING`), parameters, and whether it reads
/// the clock; the statement itself is rewritten in place.
pub(super) struct DmlRewrite {
    columns: Option<Vec<Option<PgType>>>,
    params: Vec<Option<PgType>>,
    uses_now: bool,
    /// See [`Translation::column_origins`].
    column_origins: bool,
}

impl DmlRewrite {
    /// The translation running `sql` (the rewritten statement's text) as `kind`.
    pub(super) fn into_translation(self, sql: String, kind: Kind) -> Translation {
        Translation {
            steps: vec![sql],
            primary: 0,
            columns: self.columns,
            params: self.params,
            kind,
            uses_now: self.uses_now,
            foreign_keys_off: false,
            param_columns: Vec::new(),
            captures: Vec::new(),
            bound: None,
            notices: Vec::new(),
            column_origins: self.column_origins,
        }
    }
}

/// An UPDATE rewritten for SQLite: its target resolved (`ONLY` dropped, `AS` before the alias), `FROM` items,
/// identity columns checked, assignments rewritten, defaulted and coerced to the columns' types.
pub(super) fn rewrite_update_statement(
    conn: &Connection,
    catalog: &Catalog,
    update: &mut sqlparser::ast::Update,
) -> Result<DmlRewrite, PgError> {
    let (table, alias) = match &mut update.table.relation {
        TableFactor::Table {
            name,
            alias,
            inheritance,
            ..
        } => {
            // `UPDATE ONLY t`: no table inherits from another.
            *inheritance = None;
            schema::rewrite_relation(catalog, name, alias, &[])?;
            // SQLite wants `AS` before an UPDATE's alias.
            if let Some(alias) = alias {
                alias.explicit = true;
            }
            (last_part(name), alias.as_ref().map(|a| a.name.value.clone()))
        }
        other => return Err(PgError::unsupported(format!("UPDATE of {other}"))),
    };
    if let Some(returning) = &mut update.returning {
        names::name_items(returning);
    }
    let from: Vec<sqlparser::ast::TableWithJoins> = match &mut update.from {
        Some(
            sqlparser::ast::UpdateTableFromKind::AfterSet(tables)
            | sqlparser::ast::UpdateTableFromKind::BeforeSet(tables),
        ) => {
            schema::rewrite_from_items(catalog, tables)?;
            // FROM items SQLite lacks (`(VALUES …) AS v(a, b)`, the bulk update's form; `generate_series`), as a
            // query's FROM has them rewritten.
            let rewriter = Rewriter::new(catalog);
            for from in tables.iter_mut() {
                for factor in std::iter::once(&mut from.relation).chain(from.joins.iter_mut().map(|j| &mut j.relation))
                {
                    if let Some(replacement) = super::tables::rewrite_factor(&rewriter, factor)? {
                        *factor = replacement;
                    }
                }
            }
            tables.clone()
        }
        None => Vec::new(),
    };
    let mut rewriter = Rewriter::new(catalog);
    rewriter
        .typer
        .scopes
        .push(Scope::of_target(&table, alias.as_deref(), &from));
    identity::check_identity_update(catalog, &table, &update.assignments)?;
    rewrite_update(&mut rewriter, update)?;
    defaults_of_assignments(conn, &table, &mut update.assignments);
    coerce_assignments(&mut rewriter, catalog, &table, &mut update.assignments);
    let columns = update.returning.as_ref().map(|r| item_types(&rewriter.typer, r));
    Ok(DmlRewrite {
        columns,
        params: rewriter.params,
        uses_now: rewriter.uses_now,
        column_origins: from.is_empty() && returning_origins(catalog, &table, update.returning.as_deref()),
    })
}

/// A DELETE rewritten for SQLite: its target resolved, `USING` as a rowid subquery, the condition and
/// `RETURNING` rewritten.
pub(super) fn rewrite_delete_statement(
    catalog: &Catalog,
    delete: &mut sqlparser::ast::Delete,
) -> Result<DmlRewrite, PgError> {
    let tables = match &mut delete.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    let (table, alias) = match tables.first_mut().map(|t| &mut t.relation) {
        Some(TableFactor::Table {
            name,
            alias,
            inheritance,
            ..
        }) => {
            *inheritance = None;
            schema::rewrite_relation(catalog, name, alias, &[])?;
            if let Some(alias) = alias {
                alias.explicit = true;
            }
            (last_part(name), alias.as_ref().map(|a| a.name.value.clone()))
        }
        _ => return Err(PgError::unsupported("this DELETE form")),
    };
    if let Some(using) = delete.using.take() {
        delete.selection = Some(delete_using(&table, alias.as_deref(), &using, delete.selection.take())?);
    }
    if let Some(returning) = &mut delete.returning {
        names::name_items(returning);
    }
    let mut rewriter = Rewriter::new(catalog);
    rewriter
        .typer
        .scopes
        .push(Scope::of_target(&table, alias.as_deref(), &[]));
    if let Some(selection) = &mut delete.selection {
        rewriter.rewrite_expr(selection)?;
    }
    if let Some(returning) = &mut delete.returning {
        rewriter.rewrite_returning(returning, alias.as_deref().unwrap_or(&table))?;
    }
    let columns = delete.returning.as_ref().map(|r| item_types(&rewriter.typer, r));
    Ok(DmlRewrite {
        columns,
        params: rewriter.params,
        uses_now: rewriter.uses_now,
        // `USING` became a subquery of the condition: the RETURNING list reads the target alone.
        column_origins: returning_origins(catalog, &table, delete.returning.as_deref()),
    })
}

/// `DELETE FROM t USING u WHERE c` as SQLite can run it: `DELETE FROM t WHERE rowid IN (SELECT t.rowid FROM
/// t, u WHERE c)` (the subquery is rewritten with the rest of the statement).
pub(super) fn delete_using(
    table: &str,
    alias: Option<&str>,
    using: &[sqlparser::ast::TableWithJoins],
    selection: Option<Expr>,
) -> Result<Expr, PgError> {
    let key = quote_ident(alias.unwrap_or(table));
    let target = match alias {
        Some(alias) => format!("{} AS {}", quote_ident(table), quote_ident(alias)),
        None => quote_ident(table),
    };
    let using: Vec<String> = using.iter().map(ToString::to_string).collect();
    let condition = selection.map_or_else(|| "true".to_owned(), |s| s.to_string());
    let sql = format!(
        "rowid IN (SELECT {key}.rowid FROM {target}, {} WHERE {condition})",
        using.join(", ")
    );
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting DELETE … USING: {e}")))
}

pub(super) fn translate_insert(
    conn: &Connection,
    catalog: &Catalog,
    insert: &mut Insert,
    overriding: Option<sqlparser::ast::InsertOverriding>,
) -> Result<Translation, PgError> {
    let table = match &mut insert.table {
        TableObject::TableName(name) => {
            let mut alias = None;
            schema::rewrite_relation(catalog, name, &mut alias, &[])?;
            if insert.table_alias.is_none() {
                insert.table_alias = alias.map(|a| sqlparser::ast::TableAliasWithoutColumns {
                    explicit: true,
                    alias: a.name,
                });
            }
            last_part(name)
        }
        TableObject::TableFunction(_) | TableObject::TableQuery(_) => {
            return Err(PgError::unsupported("INSERT into a function"))
        }
    };
    if let Some(returning) = &mut insert.returning {
        names::name_items(returning);
    }
    let reads_xmax = upsert::returning_xmax(insert);
    let mut rewriter = Rewriter::new(catalog);
    let alias = insert.table_alias.as_ref().map(|a| a.alias.value.clone());
    rewriter
        .typer
        .scopes
        .push(Scope::of_target(&table, alias.as_deref(), &[]));
    if let Some(source) = &mut insert.source {
        rewriter.rewrite_query(source.as_mut())?;
    }
    if let Some(returning) = &mut insert.returning {
        rewriter.rewrite_items(returning)?;
    }
    if let Some(sqlparser::ast::OnInsert::OnConflict(conflict)) = &mut insert.on {
        if let sqlparser::ast::OnConflictAction::DoUpdate(update) = &mut conflict.action {
            for assignment in &mut update.assignments {
                rewriter.rewrite_expr(&mut assignment.value)?;
            }
            if let Some(selection) = &mut update.selection {
                rewriter.rewrite_expr(selection)?;
            }
        }
    }
    let mut columns: Vec<String> = if insert.columns.is_empty() {
        table_columns(conn, &table)
    } else {
        insert.columns.iter().map(last_part).collect()
    };
    check_values_width(insert, columns.len())?;
    // VALUES shorter than the table fill its first columns, the rest take their defaults (PostgreSQL's
    // rule); SQLite wants every column, so the list is made explicit.
    if insert.columns.is_empty() {
        if let Some(SetExpr::Values(values)) = insert.source.as_deref().map(|q| q.body.as_ref()) {
            let width = values.rows.first().map_or(0, |r| r.content.len());
            if width > 0 && width < columns.len() {
                columns.truncate(width);
                insert.columns = columns
                    .iter()
                    .map(|c| sqlparser::ast::ObjectName::from(vec![sqlparser::ast::Ident::with_quote('"', c.clone())]))
                    .collect();
            }
        }
    }
    identity::check_identity(catalog, &table, &columns, insert, overriding)?;
    upsert::prepare(conn, &table, &columns, insert)?;
    let types: Vec<Option<PgType>> = columns.iter().map(|c| catalog.column_type(&table, c)).collect();
    if let Some(source) = &mut insert.source {
        substitute_defaults(conn, &table, source, &columns);
        coerce_source(&mut rewriter, source, &types);
    }
    identity::fill_omitted(conn, catalog, &table, insert, &columns)?;
    if reads_xmax {
        upsert::mark_updates(insert);
    }
    let columns_out = insert.returning.as_ref().map(|r| item_types(&rewriter.typer, r));
    Ok(Translation {
        steps: vec![Statement::Insert(insert.clone()).to_string()],
        primary: 0,
        columns: columns_out,
        params: rewriter.params,
        kind: Kind::Insert,
        uses_now: rewriter.uses_now,
        foreign_keys_off: false,
        param_columns: Vec::new(),
        captures: Vec::new(),
        bound: None,
        notices: Vec::new(),
        column_origins: returning_origins(catalog, &table, insert.returning.as_deref()),
    })
}

/// Whether SQLite's origins of a RETURNING list's columns are PostgreSQL's: the list of a statement on a table
/// (not a view) without scalar subqueries (PostgreSQL gives those none).
fn returning_origins(catalog: &Catalog, table: &str, returning: Option<&[SelectItem]>) -> bool {
    returning.is_some_and(|items| !super::select::items_select_subquery(items))
        && catalog.relation_kind(table) == Some("table")
}

/// 42601 for VALUES rows wider than the target columns, or narrower than a column list given.
pub(super) fn check_values_width(insert: &Insert, columns: usize) -> Result<(), PgError> {
    let Some(SetExpr::Values(values)) = insert.source.as_deref().map(|q| q.body.as_ref()) else {
        return Ok(());
    };
    for row in &values.rows {
        if row.content.len() > columns && columns > 0 {
            return Err(PgError::new(
                crate::error::SYNTAX_ERROR,
                "INSERT has more expressions than target columns",
            ));
        }
        if row.content.len() < columns && !insert.columns.is_empty() {
            return Err(PgError::new(
                crate::error::SYNTAX_ERROR,
                "INSERT has more target columns than expressions",
            ));
        }
    }
    Ok(())
}

pub(super) fn rewrite_update(rewriter: &mut Rewriter<'_>, update: &mut sqlparser::ast::Update) -> Result<(), PgError> {
    for assignment in &mut update.assignments {
        rewriter.rewrite_expr(&mut assignment.value)?;
    }
    if let Some(selection) = &mut update.selection {
        rewriter.rewrite_expr(selection)?;
    }
    if let Some(returning) = &mut update.returning {
        let target = match &update.table.relation {
            TableFactor::Table { name, alias, .. } => {
                alias.as_ref().map_or_else(|| last_part(name), |a| a.name.value.clone())
            }
            _ => String::new(),
        };
        rewriter.rewrite_returning(returning, &target)?;
    }
    Ok(())
}

/// `VALUES (DEFAULT, …)`: SQLite has no `DEFAULT` inside VALUES, so each `DEFAULT` becomes the column's
/// default expression (SQLite's text of it, from the table's definition), or NULL where it has none (which a
/// serial key turns into the next id, as SQLite's rowid does).
pub(super) fn substitute_defaults(conn: &Connection, table: &str, source: &mut Query, columns: &[String]) {
    let SetExpr::Values(values) = source.body.as_mut() else {
        return;
    };
    let is_default = |e: &Expr| matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
    for row in &mut values.rows {
        for (value, column) in row.content.iter_mut().zip(columns) {
            if is_default(value) {
                *value = column_default(conn, table, column);
            }
        }
    }
}

/// A column's default as an expression (NULL if it has none).
pub(super) fn column_default(conn: &Connection, table: &str, column: &str) -> Expr {
    let default: Option<String> = conn
        .prepare_cached("SELECT dflt_value FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE")
        .and_then(|mut s| s.query_row([table, column], |r| r.get(0)))
        .ok()
        .flatten();
    default
        .and_then(|text| {
            Parser::new(&PostgreSqlDialect {})
                .try_with_sql(&text)
                .and_then(|mut p| p.parse_expr())
                .ok()
        })
        .unwrap_or_else(|| Expr::value(Value::Null))
}

/// The values an INSERT gives each column made that column's stored form.
pub(super) fn coerce_source(rewriter: &mut Rewriter<'_>, source: &mut Query, types: &[Option<PgType>]) {
    match source.body.as_mut() {
        SetExpr::Values(values) => {
            for row in &mut values.rows {
                for (value, ty) in row.content.iter_mut().zip(types) {
                    rewriter.learn_param(value, *ty);
                    if let Some(ty) = ty {
                        if !matches!(value, Expr::Value(ValueWithSpan { value: Value::Null, .. })) {
                            let inner = std::mem::replace(value, Expr::value(Value::Null));
                            *value = coerce_call(inner, *ty);
                        }
                    }
                }
            }
        }
        SetExpr::Select(select) => {
            for (item, ty) in select.projection.iter_mut().zip(types) {
                let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
                    return;
                };
                if let Some(ty) = ty {
                    let inner = std::mem::replace(e, Expr::value(Value::Null));
                    *e = coerce_call(inner, *ty);
                }
            }
        }
        _ => {}
    }
}

/// `SET col = DEFAULT`: SQLite has no DEFAULT there, so the column's default expression (SQLite's text of
/// it, from the table's definition) takes its place, or NULL.
pub(super) fn defaults_of_assignments(conn: &Connection, table: &str, assignments: &mut [Assignment]) {
    for assignment in assignments {
        let AssignmentTarget::ColumnName(name) = &assignment.target else {
            continue;
        };
        let is_default = matches!(&assignment.value, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
        if !is_default {
            continue;
        }
        let column = last_part(name);
        let default: Option<String> = conn
            .prepare_cached("SELECT dflt_value FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE")
            .and_then(|mut s| s.query_row([table, column.as_str()], |r| r.get(0)))
            .ok()
            .flatten();
        assignment.value = match default.and_then(|text| {
            Parser::new(&PostgreSqlDialect {})
                .try_with_sql(&text)
                .and_then(|mut p| p.parse_expr())
                .ok()
        }) {
            Some(expr) => expr,
            None => Expr::value(Value::Null),
        };
    }
}

pub(super) fn coerce_assignments(
    rewriter: &mut Rewriter<'_>,
    catalog: &Catalog,
    table: &str,
    assignments: &mut [Assignment],
) {
    for assignment in assignments {
        let AssignmentTarget::ColumnName(name) = &assignment.target else {
            continue;
        };
        let ty = catalog.column_type(table, &last_part(name));
        rewriter.learn_param(&assignment.value, ty);
        if let Some(ty) = ty {
            let is_default = matches!(&assignment.value, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
            if is_default {
                continue;
            }
            let inner = std::mem::replace(&mut assignment.value, Expr::value(Value::Null));
            assignment.value = coerce_call(inner, ty);
        }
    }
}

/// The columns of a table in order (PRAGMA table_info), for an INSERT without a column list.
pub(super) fn table_columns(conn: &Connection, table: &str) -> Vec<String> {
    let Ok(mut stmt) = conn.prepare_cached("SELECT name FROM pragma_table_info(?1)") else {
        return Vec::new();
    };
    stmt.query_map([table], |row| row.get::<_, String>(0))
        .map(|rows| rows.filter_map(Result::ok).collect())
        .unwrap_or_default()
}

pub(super) fn item_types(typer: &Typer<'_>, items: &[SelectItem]) -> Vec<Option<PgType>> {
    items
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => typer.infer(e),
            _ => None,
        })
        .collect()
}

/// The types of a SELECT list with wildcards (`*`, `q.*`), where every relation a wildcard covers has known
/// columns: a CTE's or a derived table's as the rewrite typed them, a `pg_catalog` view's. `None` if a wildcard
/// covers anything else (a table: SQLite's column metadata types its columns), a join with `USING` or
/// `NATURAL` (its `*` merges columns), or a relation of unknown width. The caller checks the width against the
/// prepared statement's.
fn wildcard_item_types(typer: &Typer<'_>, select: &sqlparser::ast::Select) -> Option<Vec<Option<PgType>>> {
    use sqlparser::ast::SelectItemQualifiedWildcardKind;
    // Each relation of the FROM list in order: the name a qualifier uses, and its columns' types.
    let mut relations: Vec<(String, Vec<Option<PgType>>)> = Vec::new();
    for from in &select.from {
        for (factor, join) in
            std::iter::once((&from.relation, None)).chain(from.joins.iter().map(|j| (&j.relation, Some(j))))
        {
            if join.is_some_and(|join| super::cte_columns::merges_columns(&join.join_operator)) {
                return None;
            }
            let (key, columns) = match factor {
                TableFactor::Table {
                    name,
                    alias,
                    args: None,
                    ..
                } => {
                    let table = last_part(name);
                    let columns = match typer.ctes.iter().rev().find(|c| c.name.eq_ignore_ascii_case(&table)) {
                        Some(cte) => cte.columns.iter().map(|(_, ty)| *ty).collect(),
                        None => crate::pg_catalog::column_types(&table)?,
                    };
                    (alias.as_ref().map_or(table, |a| a.name.value.clone()), columns)
                }
                TableFactor::Derived { alias: Some(alias), .. } => {
                    let derived = typer
                        .ctes
                        .iter()
                        .rev()
                        .find(|c| c.name.eq_ignore_ascii_case(&alias.name.value))?;
                    (
                        alias.name.value.clone(),
                        derived.columns.iter().map(|(_, ty)| *ty).collect(),
                    )
                }
                _ => return None,
            };
            relations.push((key, columns));
        }
    }
    let mut types = Vec::new();
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) => {
                for (_, columns) in &relations {
                    types.extend(columns.iter().copied());
                }
            }
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                let key = last_part(name);
                let (_, columns) = relations.iter().find(|(k, _)| k.eq_ignore_ascii_case(&key))?;
                types.extend(columns.iter().copied());
            }
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => types.push(typer.infer(e)),
            _ => return None,
        }
    }
    Some(types)
}

/// The result columns of a query that are a bare `$n` (of its first branch, which names and types a set
/// operation's columns), with the parameter's index from 0.
pub(super) fn param_columns(query: &Query) -> Vec<(usize, usize)> {
    let mut body = query.body.as_ref();
    let select = loop {
        match body {
            SetExpr::Select(select) => break select,
            SetExpr::SetOperation { left, .. } => body = left.as_ref(),
            SetExpr::Query(inner) => body = inner.body.as_ref(),
            _ => return Vec::new(),
        }
    };
    let parameter = |expr: &Expr| match expr {
        Expr::Value(sqlparser::ast::ValueWithSpan {
            value: sqlparser::ast::Value::Placeholder(name),
            ..
        }) => name
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=crate::PARAMS_MAX).contains(n))
            .map(|n| n - 1),
        _ => None,
    };
    if select
        .projection
        .iter()
        .any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)))
    {
        // A wildcard's width is the table's: the items' positions are not the columns'.
        return Vec::new();
    }
    select
        .projection
        .iter()
        .enumerate()
        .filter_map(|(column, item)| match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                parameter(expr).map(|p| (column, p))
            }
            _ => None,
        })
        .collect()
}

/// `rewritten`: the columns of the set-returning functions the rewrite replaced (their types).
pub(super) fn output_types(
    catalog: &Catalog,
    query: &Query,
    ctes: &[expr::CteTable],
    rewritten: &[crate::translate::srf::FunctionColumn],
) -> Option<Vec<Option<PgType>>> {
    let mut body = query.body.as_ref();
    loop {
        match body {
            SetExpr::Select(select) => {
                // `SELECT * FROM pg_class`: the view's columns, typed (SQLite's metadata cannot type them).
                if let ([SelectItem::Wildcard(_)], [from]) = (select.projection.as_slice(), select.from.as_slice()) {
                    if let (TableFactor::Table { name, .. }, true) = (&from.relation, from.joins.is_empty()) {
                        return crate::pg_catalog::column_types(&last_part(name));
                    }
                }
                let typer = Typer {
                    catalog,
                    scopes: vec![Scope::of_select(select)],
                    ctes: ctes.to_vec(),
                    rewritten: rewritten.to_vec(),
                };
                if select
                    .projection
                    .iter()
                    .any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)))
                {
                    return wildcard_item_types(&typer, select);
                }
                return Some(item_types(&typer, &select.projection));
            }
            SetExpr::SetOperation { left, right, .. } => {
                // A column's type is the first branch's that knows it (a branch may give NULL there).
                let query_of = |body: &SetExpr| Query {
                    body: Box::new(body.clone()),
                    ..query.clone()
                };
                let (l, r) = (
                    output_types(catalog, &query_of(left), ctes, rewritten)?,
                    output_types(catalog, &query_of(right), ctes, rewritten)?,
                );
                return Some(
                    l.iter()
                        .zip(r.iter().chain(std::iter::repeat(&None)))
                        .map(|(a, b)| a.or(*b))
                        .collect(),
                );
            }
            SetExpr::Query(q) => body = q.body.as_ref(),
            _ => return None,
        }
    }
}
