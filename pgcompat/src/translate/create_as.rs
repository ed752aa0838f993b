//! `CREATE TABLE name AS query`: the table made as `CREATE TABLE` makes one, its columns named and typed as
//! the query's result columns (the types the translator infers for them), then filled by the query, in the
//! steps of one statement.

use rusqlite::Connection;
use sqlparser::ast::{CreateTable, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::{Kind, Translation};
use crate::catalog::{quote_ident, Catalog};
use crate::error::PgError;
use crate::types::Base;

/// The steps of `CREATE TABLE … AS query` (`create.query` is set).
pub(crate) fn create_table_as(
    conn: &Connection,
    catalog: &Catalog,
    create: &mut CreateTable,
) -> Result<Translation, PgError> {
    let Some(query) = create.query.take() else {
        return Err(PgError::new(
            crate::error::SYNTAX_ERROR,
            "CREATE TABLE … AS without a query",
        ));
    };
    if !create.columns.is_empty() {
        return Err(PgError::unsupported("column names in CREATE TABLE … AS"));
    }
    let table = super::schema::created(catalog, &create.name)?;
    if super::ddl::table_exists(conn, &table) {
        if create.if_not_exists {
            let mut nothing = Translation::single(String::new(), Kind::Other("CREATE TABLE AS".to_owned()));
            nothing.steps.clear();
            return Ok(nothing);
        }
        return Err(PgError::new(
            crate::error::DUPLICATE_TABLE,
            format!("relation \"{table}\" already exists"),
        ));
    }
    let select = super::translate_statement(conn, catalog, Statement::Query(query))?
        .ok_or_else(|| PgError::unsupported("this query in CREATE TABLE … AS"))?;
    let [sql] = select.steps.as_slice() else {
        return Err(PgError::unsupported("this query in CREATE TABLE … AS"));
    };
    let names: Vec<String> = conn
        .prepare(sql)
        .map_err(|e| {
            crate::functions::error_of(&e.to_string())
                .unwrap_or_else(|| PgError::new(crate::error::SYNTAX_ERROR, e.to_string()))
        })?
        .column_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let types = select.columns.clone().unwrap_or_default();
    let mut definitions = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let ty = types.get(index).copied().flatten().ok_or_else(|| {
            PgError::unsupported(format!(
                "CREATE TABLE … AS with column \"{name}\" of a type Cambium cannot tell"
            ))
        })?;
        if matches!(ty.base(), Base::Enum(_)) {
            return Err(PgError::unsupported("CREATE TABLE … AS with a column of an enum type"));
        }
        definitions.push(format!("{} {}", quote_ident(name), ty.sql_name()));
    }
    let text = format!("CREATE TABLE {} ({})", quote_ident(&table), definitions.join(", "));
    let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &text)
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("CREATE TABLE … AS: {e}")))?;
    let Some(Statement::CreateTable(mut made)) = parsed.pop() else {
        return Err(PgError::new(
            crate::error::INTERNAL_ERROR,
            "CREATE TABLE … AS made no CREATE TABLE",
        ));
    };
    made.temporary = create.temporary;
    let mut translation = super::ddl::create_table(conn, catalog, &mut made)?;
    let columns: Vec<String> = names.iter().map(|n| quote_ident(n)).collect();
    translation.steps.push(format!(
        "INSERT INTO {} ({}) {sql}",
        quote_ident(&table),
        columns.join(", ")
    ));
    // The INSERT's count is the statement's (`SELECT 3`, PostgreSQL's tag).
    translation.primary = translation.steps.len() - 1;
    translation.params = select.params;
    translation.uses_now |= select.uses_now;
    translation.kind = Kind::Other("SELECT".to_owned());
    Ok(translation)
}
