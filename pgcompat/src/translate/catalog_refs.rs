//! References to `pg_catalog` and `information_schema` rewritten to the catalog views of
//! [`crate::pg_catalog`]: FROM items (aliased by their PostgreSQL name, so `pg_class.relname` still
//! resolves), `pg_catalog.`-qualified column references, `::regclass`/`::regtype` casts (to the OID where
//! compared, to the name where printed, cast to text or concatenated), and the functions that look objects up
//! (`pg_get_indexdef`, `pg_get_constraintdef`, `pg_get_viewdef`, `to_regclass`, `pg_get_serial_sequence`).

use sqlparser::ast::{
    BinaryOperator, Expr, Function, Ident, ObjectName, ObjectNamePart, OrderByKind, Query, SelectItem, SetExpr,
    TableAlias, TableFactor, Value, ValueWithSpan,
};

use crate::pg_catalog;

/// The name of the function a `::regclass` cast becomes.
const REGCLASS: &str = "_pgc_regclass";
/// The name of the function a `::regtype` cast becomes.
const REGTYPE: &str = "_pgc_regtype";
/// The name of the function a `::regtype[]` cast becomes (an array of the types' OIDs).
const REGTYPE_ARRAY: &str = "_pgc_regtype_array";

/// Whether a schema name is one of the catalog schemas.
fn is_catalog_schema(name: &str) -> bool {
    name.eq_ignore_ascii_case("pg_catalog") || name.eq_ignore_ascii_case("information_schema")
}

/// A FROM item naming a catalog relation, pointed at its view; `None` for anything else.
pub(crate) fn rewrite_table(factor: &TableFactor) -> Option<TableFactor> {
    if let Some(ancestors) = partition_ancestors(factor) {
        return Some(ancestors);
    }
    let TableFactor::Table {
        name,
        alias,
        args: None,
        ..
    } = factor
    else {
        return None;
    };
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(ident) => ident.value.to_ascii_lowercase(),
            other => other.to_string().to_ascii_lowercase(),
        })
        .collect();
    let view = pg_catalog::view_for(&parts)?;
    let mut replaced = factor.clone();
    if let TableFactor::Table {
        name: new_name,
        alias: new_alias,
        ..
    } = &mut replaced
    {
        *new_name = ObjectName::from(vec![Ident::new(view)]);
        if alias.is_none() {
            let plain = parts.last().cloned().unwrap_or_default();
            *new_alias = Some(TableAlias {
                explicit: true,
                name: Ident::new(plain),
                columns: Vec::new(),
                at: None,
            });
        }
    }
    Some(replaced)
}

/// `pg_partition_ancestors(rel) [WITH ORDINALITY] AS a(relid, depth)` (psql's `\d` asks it of a table's
/// triggers): a relation that is no partition is its own only ancestor, so one row, at depth 1.
fn partition_ancestors(factor: &TableFactor) -> Option<TableFactor> {
    let TableFactor::Table {
        name,
        alias,
        args: Some(args),
        with_ordinality,
        ..
    } = factor
    else {
        return None;
    };
    let function = match name.0.last()? {
        ObjectNamePart::Identifier(ident) => ident.value.to_ascii_lowercase(),
        _ => return None,
    };
    if function != "pg_partition_ancestors" {
        return None;
    }
    let [sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(relation))] = args.args.as_slice()
    else {
        return None;
    };
    let names: Vec<String> = alias
        .as_ref()
        .map(|a| a.columns.iter().map(|c| c.name.value.clone()).collect())
        .unwrap_or_default();
    let column = |i: usize, default: &str| crate::catalog::quote_ident(names.get(i).map_or(default, String::as_str));
    let mut items = vec![format!("{relation} AS {}", column(0, "relid"))];
    if *with_ordinality {
        items.push(format!("1 AS {}", column(1, "ordinality")));
    }
    let alias_name = alias
        .as_ref()
        .map_or("pg_partition_ancestors", |a| a.name.value.as_str());
    let sql = format!(
        "SELECT * FROM (SELECT {}) AS {}",
        items.join(", "),
        crate::catalog::quote_ident(alias_name)
    );
    let query = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .ok()?;
    match *query.body {
        SetExpr::Select(select) => select.from.into_iter().next().map(|t| t.relation),
        _ => None,
    }
}

/// `pg_catalog.pg_class.relname` → `pg_class.relname` (the view is aliased `pg_class`).
pub(crate) fn rewrite_compound(parts: &mut Vec<Ident>) -> bool {
    if parts.len() == 3 && is_catalog_schema(&parts[0].value) {
        parts.remove(0);
        return true;
    }
    false
}

/// `OPERATOR(pg_catalog.~)` as the operator it names.
pub(crate) fn plain_operator(op: &BinaryOperator) -> Option<BinaryOperator> {
    let BinaryOperator::PGCustomBinaryOperator(parts) = op else {
        return None;
    };
    Some(match parts.last()?.as_str() {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        "||" => BinaryOperator::StringConcat,
        _ => return None,
    })
}

/// Whether a `COLLATE` names a collation that is SQLite's default order (`default`, `C`, `POSIX`).
pub(crate) fn is_default_collation(collation: &ObjectName) -> bool {
    let last = match collation.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => ident.value.to_ascii_lowercase(),
        _ => return false,
    };
    matches!(last.as_str(), "default" | "c" | "posix")
}

fn parse(sql: &str) -> Option<Expr> {
    sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

fn is_call(expr: &Expr, name: &str) -> bool {
    matches!(expr, Expr::Function(Function { name: n, .. }) if n.to_string() == name)
}

/// Whether an expression is a regtype array: a cast to one, or a `coalesce` of such casts.
fn is_regtype_array(expr: &Expr) -> bool {
    match expr {
        Expr::Function(Function { name, args, .. }) if name.to_string().eq_ignore_ascii_case("coalesce") => {
            let sqlparser::ast::FunctionArguments::List(list) = args else {
                return false;
            };
            !list.args.is_empty()
                && list.args.iter().all(|arg| {
                    matches!(arg, sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e))
                        if is_regtype_array(e))
                })
        }
        Expr::Nested(inner) => is_regtype_array(inner),
        other => is_call(other, REGTYPE_ARRAY),
    }
}

/// A cast the catalog gives meaning to, rewritten; `None` when the cast is not one. `written` is the
/// target type as written, lower case, without `pg_catalog.`.
pub(crate) fn rewrite_cast(inner: &Expr, written: &str) -> Option<Expr> {
    match written {
        "regclass" => parse(&format!("{REGCLASS}({inner}, {})", relation_oid(inner))),
        "regtype" => parse(&format!("{REGTYPE}({inner})")),
        "regtype[]" | "_regtype" => parse(&format!("{REGTYPE_ARRAY}({inner})")),
        // An array of regtypes as text is the types' names (`{integer,text}`).
        "text" | "text[]" | "varchar[]" | "name[]" if is_regtype_array(inner) => {
            parse(&format!("_pgc_regtype_names({inner})"))
        }
        "regproc" | "regprocedure" => Some(inner.clone()),
        "regnamespace" => parse(&format!(
            "coalesce((SELECT _pgc_oid FROM _pgc_nspnames WHERE _pgc_name = {inner}), {inner})"
        )),
        "text" | "varchar" | "character varying" | "name" if is_call(inner, REGCLASS) => parse(&shown_name(inner)),
        "text" | "varchar" | "character varying" | "name" if is_call(inner, REGTYPE) => {
            parse(&format!("format_type({inner}, NULL)"))
        }
        // The number itself, no longer printed as the name.
        "oid" if is_call(inner, REGCLASS) || is_call(inner, REGTYPE) => parse(&format!("_pgc_oid_of({inner})")),
        "int4" | "integer" | "int8" | "bigint" if is_call(inner, REGCLASS) || is_call(inner, REGTYPE) => {
            parse(&format!("CAST({inner} AS {written})"))
        }
        _ => None,
    }
}

/// A `::regclass` or `::regtype` value (possibly parenthesized) as the text its output function prints (the
/// relation's name as `regclass` shows it, the type's `format_type` name), which is what `||` concatenates in
/// PostgreSQL (drizzle-kit finds a serial column by comparing its default with
/// `'nextval(''' || pg_get_serial_sequence(t, c)::regclass || '''::regclass)'`); `None` for any other
/// expression.
pub(crate) fn name_as_text(expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::Nested(inner) => name_as_text(inner),
        other if is_call(other, REGCLASS) || is_call(other, REGTYPE) => rewrite_cast(other, "text"),
        _ => None,
    }
}

/// A call of a function that looks an object up in the catalog, as a subquery on the views.
pub(crate) fn rewrite_call(name: &str, args: &[&Expr]) -> Option<Expr> {
    let sql = match (name, args) {
        ("pg_get_indexdef", [oid]) => format!("(SELECT _pgc_def FROM _pgc_indexdefs WHERE _pgc_oid = {oid})"),
        // Column k > 0: that key, a column's name as an identifier or an expression's text; '' past the last.
        // Pretty, names are as the search path shows them (the table without `public.`).
        ("pg_get_indexdef", [oid, column, pretty]) => format!(
            "(SELECT CASE WHEN {column} = 0 THEN CASE WHEN {pretty} THEN replace(_pgc_def, ' ON public.', ' ON ') \
             ELSE _pgc_def END \
             WHEN {column} BETWEEN 1 AND json_array_length(_pgc_keys) \
             THEN coalesce(_pgc_ident(json_extract(_pgc_keys, '$[' || ({column} - 1) || ']')), \
             _pgc_index_key(_pgc_sql, {column})) ELSE '' END \
             FROM _pgc_indexdefs WHERE _pgc_oid = {oid})"
        ),
        ("pg_get_function_result", [oid]) => format!("(SELECT _pgc_result FROM _pgc_fnlookups WHERE _pgc_oid = {oid})"),
        ("pg_get_function_arguments" | "pg_get_function_identity_arguments", [oid]) => {
            format!("(SELECT _pgc_args FROM _pgc_fnlookups WHERE _pgc_oid = {oid})")
        }
        ("pg_get_constraintdef", [oid] | [oid, _]) => {
            format!("(SELECT _pgc_def FROM _pgc_condefs WHERE _pgc_oid = {oid})")
        }
        ("pg_get_viewdef", [view] | [view, _]) => {
            // A second argument is `pretty` (a wrap column, with it, is pretty too).
            let pretty = args.get(1).map_or_else(|| "0".to_owned(), |p| format!("{p}"));
            format!(
                "(SELECT _pgc_viewdef(_pgc_sql, {pretty}, (SELECT _pgc_json FROM _pgc_viewcols)) FROM _pgc_viewdefs \
                 WHERE _pgc_oid = {view} OR _pgc_name = _pgc_relname({view}))"
            )
        }
        // A built-in type by any of its names, else a type of the database (an enum) by its name; NULL if none.
        ("to_regtype", [text]) => format!(
            "{REGTYPE}(coalesce(_pgc_builtin_type_oid({text}), \
             (SELECT _pgc_oid FROM _pgc_typnames WHERE _pgc_name = {text})))"
        ),
        ("to_regclass", [text]) => shown_name(&relation_oid(text)),
        ("pg_get_serial_sequence", [table, column]) => format!(
            "(SELECT _pgc_ident(_pgc_nsp) || '.' || _pgc_ident(_pgc_bare) FROM _pgc_seqnames \
             WHERE _pgc_tbloid = {} AND _pgc_col = {column})",
            relation_oid(table)
        ),
        ("obj_description", [oid, class]) => format!(
            "(SELECT _pgc_desc FROM _pgc_descs WHERE _pgc_oid = {oid} AND _pgc_sub = 0 AND _pgc_class = \
             CASE {class} WHEN 'pg_class' THEN 1259 WHEN 'pg_namespace' THEN 2615 WHEN 'pg_type' THEN 1247 ELSE 0 END)"
        ),
        ("obj_description", [oid]) => {
            format!("(SELECT _pgc_desc FROM _pgc_descs WHERE _pgc_oid = {oid} AND _pgc_sub = 0 LIMIT 1)")
        }
        ("col_description", [oid, column]) => format!(
            "(SELECT _pgc_desc FROM _pgc_descs WHERE _pgc_oid = {oid} AND _pgc_class = 1259 AND _pgc_sub = {column})"
        ),
        ("pg_table_is_visible", [oid]) => {
            // The registered function gives its argument as a boolean: the call keeps its name, so its type.
            format!("pg_table_is_visible(coalesce((SELECT _pgc_visible FROM _pgc_relnames WHERE _pgc_oid = {oid}), 1))")
        }
        _ => return None,
    };
    parse(&sql)
}

/// The OID of the relation a text names (`app.t`, `"T"`, or a bare name through the `search_path`), as a
/// subquery; NULL when there is none.
fn relation_oid(text: &Expr) -> String {
    if matches!(text, Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_))) {
        return format!(
            "(SELECT _pgc_oid FROM _pgc_relnames WHERE _pgc_name = _pgc_relname({text}) \
             AND coalesce(_pgc_nsp = _pgc_relnsp({text}), _pgc_pos IS NOT NULL) ORDER BY _pgc_pos LIMIT 1)"
        );
    }
    // Any other text (a subquery such as `pg_get_serial_sequence(…)`'s, a column) is computed once, in a FROM
    // item joined first: written in the WHERE, SQLite evaluated it again for every relation the view has.
    format!(
        "(SELECT _pgc_n._pgc_oid FROM (SELECT {text} AS _pgc_t) AS _pgc_q CROSS JOIN _pgc_relnames AS _pgc_n \
         WHERE _pgc_n._pgc_name = _pgc_relname(_pgc_q._pgc_t) \
         AND coalesce(_pgc_n._pgc_nsp = _pgc_relnsp(_pgc_q._pgc_t), _pgc_n._pgc_pos IS NOT NULL) \
         ORDER BY _pgc_n._pgc_pos LIMIT 1)"
    )
}

/// The name a relation's OID prints as (`regclass` output: bare when the `search_path` reaches it, else
/// qualified). The OID is computed once, in a FROM item joined first (`CROSS JOIN` keeps that order): written
/// in the WHERE, SQLite evaluated it again for every row of the view, seconds when it is a lookup itself
/// (`pg_get_serial_sequence(t, c)::regclass::text`: 4.4 s, 78 ms this way, in a debug build).
fn shown_name(oid: &dyn std::fmt::Display) -> String {
    format!(
        "(SELECT _pgc_r._pgc_shown FROM (SELECT {oid} AS _pgc_v) AS _pgc_q CROSS JOIN _pgc_relshown AS _pgc_r \
         WHERE _pgc_r._pgc_oid = _pgc_q._pgc_v)"
    )
}

/// Result columns that are regclass or regtype values print as names, as PostgreSQL prints them.
pub(crate) fn name_outputs(query: &mut Query) {
    // `ORDER BY n` of such a column orders by the OID, as PostgreSQL does, not by the name printed.
    if let (SetExpr::Select(select), Some(order_by)) = (query.body.as_ref(), query.order_by.as_mut()) {
        if let OrderByKind::Expressions(items) = &mut order_by.kind {
            for item in items {
                let Expr::Value(ValueWithSpan {
                    value: Value::Number(n, _),
                    ..
                }) = &item.expr
                else {
                    continue;
                };
                let Some(position) = n.parse::<usize>().ok().and_then(|p| p.checked_sub(1)) else {
                    continue;
                };
                if let Some(SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) =
                    select.projection.get(position)
                {
                    if is_call(e, REGCLASS) || is_call(e, REGTYPE) {
                        item.expr = e.clone();
                    }
                }
            }
        }
    }
    name_outputs_of(&mut query.body);
}

/// `ARRAY(subquery)`: the subquery's first column aggregated into an array of `element`.
pub(crate) fn array_of_subquery(query: &Query, element: &str) -> Option<Expr> {
    let mut query = query.clone();
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let first = select.projection.first_mut()?;
    let expr = match first {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
        _ => return None,
    };
    *first = SelectItem::ExprWithAlias {
        expr,
        alias: Ident::new("_pgc_v"),
    };
    parse(&format!(
        "(SELECT coalesce(pg_array_agg('{element}', _pgc_v), '{{}}') FROM ({query}))"
    ))
}

fn name_outputs_of(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in &mut select.projection {
                let expr = match item {
                    SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                    _ => continue,
                };
                if let Some(named) = rewrite_cast(expr, "text") {
                    *expr = named;
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_outputs_of(left);
            name_outputs_of(right);
        }
        SetExpr::Query(q) => name_outputs_of(&mut q.body),
        _ => {}
    }
}

/// Whether a rewritten statement text reads the catalog views (a cached translation must find them made).
pub fn reads_catalog(sql: &str) -> bool {
    sql.contains(pg_catalog::VIEW_PREFIX)
}
