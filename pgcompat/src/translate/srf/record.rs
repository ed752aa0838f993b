//! `json[b]_to_record(j) AS r(a int, b text, …)` and `json[b]_to_recordset(j) AS r(…)`: a JSON object (one
//! row) or an array of objects (a row each) read as the columns the definition list declares, each member
//! by the column's name, converted from its text as PostgreSQL converts it (a string's value, else the JSON
//! text; `null` and a missing member are NULL). The rows come from `json_each` over the array (a record's
//! object made an array of one), like the other set-returning functions here.

use sqlparser::ast::{Expr, TableAlias, TableFactor};

use super::{fresh_alias, json_argument, json_each_item, parse_expr, FunctionColumn, FunctionTable};
use crate::catalog::quote_ident;
use crate::error::{PgError, SYNTAX_ERROR};
use crate::translate::expr::{written_type, Typer};
use crate::types::{Base, PgType};

/// Whether `name` is one of these functions, and if so whether it returns a set.
pub(super) fn is_record_function(name: &str) -> Option<bool> {
    match name {
        "json_to_record" | "jsonb_to_record" => Some(false),
        "json_to_recordset" | "jsonb_to_recordset" => Some(true),
        _ => None,
    }
}

/// The FROM item and columns of a call of `name` (one of [`is_record_function`]'s) with `args`.
pub(super) fn record_table(
    typer: &Typer<'_>,
    name: &str,
    args: &[&Expr],
    alias: Option<&TableAlias>,
    with_ordinality: bool,
) -> Result<(TableFactor, FunctionTable), PgError> {
    let set = is_record_function(name).unwrap_or(false);
    let [arg] = args else {
        return Err(PgError::new(
            crate::error::UNDEFINED_FUNCTION,
            format!("function {name} with {} arguments does not exist", args.len()),
        ));
    };
    let definitions = alias.map(|a| a.columns.as_slice()).unwrap_or_default();
    if definitions.is_empty() || definitions.iter().any(|d| d.data_type.is_none()) {
        return Err(PgError::new(
            SYNTAX_ERROR,
            "a column definition list is required for functions returning \"record\"",
        ));
    }
    if with_ordinality && !set {
        return Err(PgError::unsupported(format!("{name} WITH ORDINALITY")));
    }
    let flavor = if name.starts_with("jsonb") { "jsonb" } else { "json" };
    let json = json_argument(typer, arg, flavor);
    let rows = if set {
        format!("pg_json_array({json})")
    } else {
        // An array of the one object, its text kept as written (json's members keep their spacing).
        format!("'[' || pg_json_object({json}) || ']'")
    };
    let sqlite_alias = fresh_alias();
    let a = quote_ident(&sqlite_alias);
    let mut columns = Vec::with_capacity(definitions.len() + 1);
    for definition in definitions {
        let data_type = definition
            .data_type
            .as_ref()
            .expect("checked: every definition has a type");
        let ty = written_type(data_type)?;
        // PostgreSQL folds an unquoted name; the member is looked up by the folded name.
        let key = match definition.name.quote_style {
            Some(_) => definition.name.value.clone(),
            None => definition.name.value.to_lowercase(),
        };
        columns.push(FunctionColumn {
            name: key.clone(),
            expr: parse_expr(&member(&a, &key, ty, flavor == "jsonb")?)?,
            ty: Some(ty),
        });
    }
    if with_ordinality {
        columns.push(FunctionColumn {
            name: "ordinality".to_owned(),
            expr: parse_expr(&format!("{a}.key + 1"))?,
            ty: Some(PgType::INT8),
        });
    }
    let table_alias = alias.map_or_else(|| name.to_owned(), |a| a.name.value.clone());
    json_each_item(&rows, sqlite_alias, table_alias, columns)
}

/// The SQL reading member `key` of the object in `a.value` as `ty`; a JSON member's text is jsonb's normal
/// form when the argument is `jsonb`, else as written (`json`).
fn member(a: &str, key: &str, ty: PgType, jsonb: bool) -> Result<String, PgError> {
    if key.contains('"') {
        return Err(PgError::unsupported(format!(
            "the column name {key} in a record's definition"
        )));
    }
    if ty.is_array() {
        return Err(PgError::unsupported(format!(
            "an array column ({key}) in a record's definition"
        )));
    }
    let quoted_key = key.replace('\'', "''");
    let path = format!("'$.\"{quoted_key}\"'");
    let json = if jsonb {
        format!("pg_jsonb_norm({a}.value -> {path})")
    } else {
        format!("pg_json_get(pg_json_get({a}.json, {a}.key, 'json'), '{quoted_key}', 'json')")
    };
    Ok(match ty.base() {
        Base::Json if jsonb => format!("pg_cast({json}, 'json', 'jsonb')"),
        Base::Json => json,
        Base::Jsonb if jsonb => json,
        Base::Jsonb => format!("pg_cast({json}, 'jsonb', 'json')"),
        _ => {
            let text = format!(
                "CASE json_type({a}.value, {path}) WHEN 'null' THEN NULL WHEN 'text' THEN \
                 json_extract({a}.value, {path}) ELSE {json} END"
            );
            if ty.base() == Base::Text {
                text
            } else {
                format!("pg_cast({text}, '{}', 'text')", ty.catalog_text())
            }
        }
    })
}
