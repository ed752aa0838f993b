//! Unit tests of the catalog functions and helpers.

use super::constraints::{constraints, serial_column};
use super::deparse::quote_ident;
use super::helpers::relation_name;
use super::{format_type, size_pretty};

#[test]
fn sizes_print_as_postgresql_does() {
    assert_eq!(size_pretty(1024), "1024 bytes");
    assert_eq!(size_pretty(10_485_760), "10 MB");
    assert_eq!(size_pretty(20_480), "20 kB");
}

#[test]
fn format_type_reads_type_modifiers() {
    assert_eq!(format_type(23, -1), "integer");
    assert_eq!(format_type(1043, 44), "character varying(40)");
    assert_eq!(format_type(1700, 655_366), "numeric(10,2)");
    assert_eq!(format_type(1184, -1), "timestamp with time zone");
    assert_eq!(format_type(1009, -1), "text[]");
    assert_eq!(format_type(2279, -1), "trigger");
    assert_eq!(super::helpers::builtin_type_oid("trigger"), Some(2279));
    assert_eq!(super::helpers::builtin_type_oid("\"void\""), Some(2278));
    assert_eq!(
        super::helpers::regtype_array("{int,int8,int2}").map_err(|e| e.code),
        Ok("{23,20,21}".to_owned())
    );
    assert_eq!(
        super::helpers::regtype_array("23 25").map_err(|e| e.code),
        Ok("{23,25}".to_owned())
    );
    assert_eq!(
        super::helpers::regtype_array("").map_err(|e| e.code),
        Ok("{}".to_owned())
    );
    assert_eq!(
        super::helpers::regtype_array("{nosuch}").map_err(|e| e.code),
        Err("42704")
    );
}

#[test]
fn constraints_get_postgresql_names() {
    let sql = "CREATE TABLE \"items\" (\"id\" INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, \"name\" TEXT NOT NULL, \
               \"owner\" INTEGER REFERENCES \"users\" ON DELETE CASCADE, UNIQUE (\"name\"))";
    let json: serde_json::Value = serde_json::from_str(&constraints("items", sql)).expect("json");
    let names: Vec<&str> = json
        .as_array()
        .expect("array")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["items_pkey", "items_name_key", "items_owner_fkey"]);
    assert_eq!(serial_column(sql).as_deref(), Some("id"));
    let checked = "CREATE TABLE \"t\" (\"price\" TEXT CHECK (price >= 0) COLLATE pg_numeric, \
                   CONSTRAINT \"c2\" CHECK (price < pg_cast('1000.5', 'numeric', '')))";
    let json: serde_json::Value = serde_json::from_str(&constraints("t", checked)).expect("json");
    let defs: Vec<&str> = json
        .as_array()
        .expect("array")
        .iter()
        .map(|c| c["def"].as_str().expect("def"))
        .collect();
    assert_eq!(defs, ["CHECK (price >= 0::numeric)", "CHECK (price < 1000.5)"]);
}

#[test]
fn identifiers_quote_as_postgresql_does() {
    assert_eq!(quote_ident("items"), "items");
    assert_eq!(quote_ident("Post_id_seq"), "\"Post_id_seq\"");
    assert_eq!(quote_ident("user"), "\"user\"");
    assert_eq!(relation_name("public.\"Post\""), "Post");
    assert_eq!(relation_name("public.Items"), "items");
}

#[test]
fn pretty_expressions_lose_only_parentheses_around_all_of_them() {
    use super::strip_outer_parentheses as strip;
    assert_eq!(strip("(a * 2)"), "a * 2");
    assert_eq!(strip("((a * 2))"), "(a * 2)");
    assert_eq!(strip("(a) + (b)"), "(a) + (b)");
    assert_eq!(strip("upper(c)"), "upper(c)");
    assert_eq!(strip("('(' || x || ')')"), "'(' || x || ')'");
    assert_eq!(strip("(')' || x)"), "')' || x");
    assert_eq!(strip("()"), "");
    assert_eq!(strip("("), "(");
}

#[test]
fn a_generated_columns_expression_reads_as_postgresql_prints_it() {
    let sql = "CREATE TABLE \"g\" (\"a\" INTEGER, \"b\" INTEGER GENERATED ALWAYS AS (pg_coerce(pg_int((\"a\" * 2), 32), 'int4')) STORED, \
               \"d\" TEXT GENERATED ALWAYS AS (pg_coerce(pg_div(\"a\", 3.0, 'any'), 'numeric(8,2)')) STORED, \
               \"e\" TEXT GENERATED ALWAYS AS (upper(\"c\")) STORED)";
    assert_eq!(
        super::constraints::generation_expression(sql, "b").as_deref(),
        Some("(a * 2)")
    );
    assert_eq!(
        super::constraints::generation_expression(sql, "d").as_deref(),
        Some("(a / 3.0)")
    );
    assert_eq!(
        super::constraints::generation_expression(sql, "e").as_deref(),
        Some("upper(c)")
    );
    assert_eq!(super::constraints::generation_expression(sql, "a"), None);
}
