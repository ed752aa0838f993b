//! PostgreSQL's `int2vector` and `oidvector` catalog columns (`pg_index.indkey`, `pg_proc.proargtypes`, …):
//! printed as numbers separated by spaces (`1 2`), kept so by the catalog views, yet arrays to SQL, with
//! subscripts from 0. A reference to one (recognized by its catalog and column, as nothing else has these
//! types) is made a real array where SQL treats it as one: `unnest(indkey)`, `generate_subscripts(indkey, 1)`
//! (0 to n - 1) and `indkey[i]` (SQLAlchemy's inspector and psql read key columns so).

use sqlparser::ast::Expr;

use super::expr::Typer;

/// `(catalog, column)` of every vector column the catalog views have.
const VECTOR_COLUMNS: &[(&str, &str)] = &[
    ("pg_index", "indkey"),
    ("pg_index", "indclass"),
    ("pg_index", "indcollation"),
    ("pg_index", "indoption"),
    ("pg_proc", "proargtypes"),
    ("pg_trigger", "tgattr"),
    ("pg_partitioned_table", "partattrs"),
    ("pg_partitioned_table", "partclass"),
    ("pg_partitioned_table", "partcollation"),
    ("pg_statistic_ext", "stxkeys"),
];

/// Whether `expr` is a reference to a vector column of a catalog in scope.
pub(crate) fn is_vector(typer: &Typer<'_>, expr: &Expr) -> bool {
    let (qualifier, column) = match expr {
        Expr::Identifier(column) => (None, column),
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [qualifier, column] => (Some(qualifier.value.as_str()), column),
            [.., table, column] => (Some(table.value.as_str()), column),
            _ => return false,
        },
        _ => return false,
    };
    let Some(table) = typer.table_named(qualifier) else {
        return false;
    };
    // A derived table or CTE that passes one through.
    if let Some(cte) = typer.ctes.iter().rev().find(|c| c.name.eq_ignore_ascii_case(table)) {
        return cte.vectors.iter().any(|v| v.eq_ignore_ascii_case(&column.value));
    }
    let table = table.strip_prefix(crate::pg_catalog::VIEW_PREFIX).unwrap_or(table);
    VECTOR_COLUMNS
        .iter()
        .any(|(t, c)| t.eq_ignore_ascii_case(table) && c.eq_ignore_ascii_case(&column.value))
}

/// The vector as an array's text (`{1,2}`).
pub(crate) fn as_array(expr: &Expr) -> Expr {
    super::expr::call("pg_vector_to_array", vec![expr.clone()])
}
