//! JSON functions with PostgreSQL 15's results: building (`json[b]_build_object`, `json[b]_build_array`,
//! `to_json[b]`, the `json[b]_agg` and `json[b]_object_agg` aggregates), inspecting (`json[b]_typeof`,
//! `json[b]_array_length`, `json[b]_extract_path[_text]`), editing (`jsonb_set`, `jsonb_insert`,
//! `jsonb_strip_nulls`), `jsonb_pretty`, and the bodies of the `@>`, `<@` and `?` operators.
//!
//! A SQL value becomes JSON by its PostgreSQL type (the typed call of `extra` says it): booleans, stored
//! 0 and 1, become `true` and `false`; numbers stay numbers; `json` and `jsonb` values are embedded; dates
//! and timestamps take their ISO 8601 form; arrays become JSON arrays; anything else is a string. `json`
//! results keep PostgreSQL's spacing (`{"a" : 1}`, `[1,2]` for a SQL array); `jsonb` results are in the
//! normalized form of [`crate::value::json`] (keys sorted, the last duplicate kept).

mod aggregates;
mod build;
mod edit;
mod inspect;
mod write;

use std::sync::Arc;

use rusqlite::types::Value;
use rusqlite::Connection;

use super::{check_size, define, raise, value_text, Args, Purity};
use crate::error::{PgError, INVALID_TEXT_REPRESENTATION};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::json::Node as J;
use aggregates::{ArrayAgg, ObjectAgg};
use build::{build_array, build_object, row_json, to_json_of, to_node};
use edit::{pretty, set_or_insert, strip_nulls, SetOp};
use inspect::{array_length, contains_top, deep_equal, extract_json, extract_jsonb, json_arg, type_of};
use write::{
    json_text, jsonb_text, number, raw_children, sorted_fields, write_json, write_jsonb, write_string, RawChildren,
};

/// Which of the two JSON types a function builds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    Json,
    Jsonb,
}

/// JSON text parsed; 22P02 if it is not JSON.
fn parse(text: &str) -> Result<J, PgError> {
    match crate::value::json::parse_node(text) {
        Some(node) => Ok(node),
        None => Err(PgError::new(
            INVALID_TEXT_REPRESENTATION,
            "invalid input syntax for type json",
        )),
    }
}

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    define(conn, state, "jsonb_build_object", -1, Purity::Pure, |a, s| {
        build_object(a, s, Flavor::Jsonb)
    })?;
    define(conn, state, "json_build_object", -1, Purity::Pure, |a, s| {
        build_object(a, s, Flavor::Json)
    })?;
    define(conn, state, "jsonb_build_array", -1, Purity::Pure, |a, s| {
        build_array(a, s, Flavor::Jsonb)
    })?;
    define(conn, state, "json_build_array", -1, Purity::Pure, |a, s| {
        build_array(a, s, Flavor::Json)
    })?;
    // A timestamptz becomes JSON in the session's zone.
    define(conn, state, "to_jsonb", 1, Purity::Volatile, |a, s| {
        to_json_of(a, s, Flavor::Jsonb)
    })?;
    define(conn, state, "to_json", 1, Purity::Volatile, |a, s| {
        to_json_of(a, s, Flavor::Json)
    })?;
    for name in ["jsonb_typeof", "json_typeof"] {
        define(conn, state, name, 1, Purity::Pure, |a, _| type_of(a))?;
    }
    for name in ["jsonb_array_length", "json_array_length"] {
        define(conn, state, name, 1, Purity::Pure, |a, _| array_length(a))?;
    }
    define(conn, state, "jsonb_extract_path", -1, Purity::Pure, |a, _| {
        extract_jsonb(a, false)
    })?;
    define(conn, state, "jsonb_extract_path_text", -1, Purity::Pure, |a, _| {
        extract_jsonb(a, true)
    })?;
    define(conn, state, "json_extract_path", -1, Purity::Pure, |a, _| {
        extract_json(a, false)
    })?;
    define(conn, state, "json_extract_path_text", -1, Purity::Pure, |a, _| {
        extract_json(a, true)
    })?;
    for arity in [3, 4] {
        define(conn, state, "jsonb_set", arity, Purity::Pure, |a, _| {
            set_or_insert(a, SetOp::Create)
        })?;
        define(conn, state, "jsonb_insert", arity, Purity::Pure, |a, _| {
            set_or_insert(a, SetOp::InsertBefore)
        })?;
    }
    define(conn, state, "jsonb_strip_nulls", 1, Purity::Pure, |a, _| {
        let Some(mut node) = json_arg(a, 0)? else {
            return Ok(Value::Null);
        };
        strip_nulls(&mut node);
        jsonb_text(&node)
    })?;
    define(conn, state, "jsonb_pretty", 1, Purity::Pure, |a, _| {
        let Some(node) = json_arg(a, 0)? else {
            return Ok(Value::Null);
        };
        let mut out = String::new();
        pretty(&mut out, &node, 0);
        check_size(out.len())?;
        Ok(Value::Text(out))
    })?;
    define(conn, state, "pg_jsonb_contains", 2, Purity::Pure, |a, _| {
        let (Some(x), Some(y)) = (json_arg(a, 0)?, json_arg(a, 1)?) else {
            return Ok(Value::Null);
        };
        Ok(Value::Integer(i64::from(contains_top(&x, &y))))
    })?;
    define(conn, state, "pg_row_json", -1, Purity::Volatile, row_json)?;
    define(conn, state, "pg_jsonb_eq", 2, Purity::Pure, |a, _| {
        let (Some(x), Some(y)) = (json_arg(a, 0)?, json_arg(a, 1)?) else {
            return Ok(Value::Null);
        };
        Ok(Value::Integer(i64::from(deep_equal(&x, &y))))
    })?;
    define(conn, state, "pg_jsonb_has_key", 2, Purity::Pure, |a, _| {
        let (Some(doc), Some(key)) = (a.text(0), a.text(1)) else {
            return Ok(Value::Null);
        };
        Ok(Value::Integer(i64::from(crate::value::json::has_key(&doc, &key)?)))
    })?;
    install_aggregates(conn, state)
}

fn install_aggregates(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    let flags = super::super::flags_session();
    for (name, flavor) in [("jsonb_agg", Flavor::Jsonb), ("json_agg", Flavor::Json)] {
        for typed in [false, true] {
            let agg = ArrayAgg {
                flavor,
                typed,
                state: state.clone(),
            };
            let (registered, arity) = if typed {
                (format!("pg_t_{name}"), 2)
            } else {
                (name.to_owned(), 1)
            };
            conn.create_aggregate_function(registered.as_str(), arity, flags, agg)?;
        }
    }
    for (name, flavor) in [("jsonb_object_agg", Flavor::Jsonb), ("json_object_agg", Flavor::Json)] {
        for typed in [false, true] {
            let agg = ObjectAgg {
                flavor,
                typed,
                state: state.clone(),
            };
            let (registered, arity) = if typed {
                (format!("pg_t_{name}"), 3)
            } else {
                (name.to_owned(), 2)
            };
            conn.create_aggregate_function(registered.as_str(), arity, flags, agg)?;
        }
    }
    Ok(())
}

/// The result type of a function of this file.
pub(super) fn result_type(name: &str, _args: &[Option<PgType>]) -> Option<PgType> {
    Some(match name {
        "jsonb_build_object" | "jsonb_build_array" | "to_jsonb" | "jsonb_agg" | "jsonb_object_agg" | "jsonb_set"
        | "jsonb_insert" | "jsonb_strip_nulls" | "jsonb_extract_path" => PgType::new(Base::Jsonb),
        "json_build_object" | "json_build_array" | "to_json" | "json_agg" | "json_object_agg" | "json_extract_path"
        | "pg_row_json" => PgType::new(Base::Json),
        "jsonb_typeof" | "json_typeof" | "jsonb_pretty" | "jsonb_extract_path_text" | "json_extract_path_text" => {
            PgType::TEXT
        }
        "jsonb_array_length" | "json_array_length" => PgType::INT4,
        "pg_jsonb_contains" | "pg_jsonb_has_key" | "pg_jsonb_eq" => PgType::BOOL,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, check_errors, row_after};

    #[test]
    fn builds_as_postgres() {
        check(&[
            (
                "jsonb_build_object('id', 1, 'name', 'x', 'tags', ARRAY['a', 'b'], 'nothing', NULL)",
                Some(r#"{"id": 1, "name": "x", "tags": ["a", "b"], "nothing": null}"#),
            ),
            ("json_build_object('b', 1, 'a', 2)", Some(r#"{"b" : 1, "a" : 2}"#)),
            (
                "json_build_array(1, 'two', NULL, true)",
                Some(r#"[1, "two", null, true]"#),
            ),
            ("jsonb_build_array(1.50, 'x')", Some(r#"[1.50, "x"]"#)),
            (
                "json_build_object('a', json '[1, 2]', 'b', ARRAY[1,2], 'c', true)",
                Some(r#"{"a" : [1, 2], "b" : [1,2], "c" : true}"#),
            ),
            ("json_build_array(ARRAY[1,2])", Some("[[1,2]]")),
            ("jsonb_build_object()", Some("{}")),
            ("to_jsonb('text'::text)", Some(r#""text""#)),
            ("to_jsonb(42)", Some("42")),
            ("to_jsonb(true)", Some("true")),
            ("to_jsonb(ARRAY[1, 2])", Some("[1, 2]")),
            ("to_json(ARRAY['a', 'b'])", Some(r#"["a","b"]"#)),
            ("to_json('a\"b'::text)", Some(r#""a\"b""#)),
            ("to_jsonb(NULL::text)", None),
            ("to_jsonb(DATE '2024-01-02')", Some(r#""2024-01-02""#)),
            (
                "to_jsonb(TIMESTAMPTZ '2024-01-02 03:04:05+00')",
                Some(r#""2024-01-02T03:04:05+00:00""#),
            ),
            (
                "to_json(TIMESTAMP '2024-01-02 03:04:05.5')",
                Some(r#""2024-01-02T03:04:05.5""#),
            ),
            ("to_jsonb(1.10::numeric)", Some("1.10")),
        ]);
        check_errors(&[
            ("json_build_object(1)", "22023"),
            ("json_build_object(NULL, 1)", "22023"),
            ("jsonb_build_object(ARRAY[1], 1)", "22023"),
        ]);
    }

    #[test]
    fn inspects_as_postgres() {
        check(&[
            ("jsonb_typeof('{}')", Some("object")),
            ("jsonb_typeof('[]')", Some("array")),
            ("jsonb_typeof('\"s\"')", Some("string")),
            ("jsonb_typeof('true')", Some("boolean")),
            ("jsonb_typeof('null')", Some("null")),
            ("json_typeof('1.5')", Some("number")),
            ("jsonb_array_length('[1, 2, [3]]')", Some("3")),
            ("json_array_length('[]')", Some("0")),
            ("jsonb_extract_path('{\"a\": {\"b\": 7}}', 'a', 'b')", Some("7")),
            ("jsonb_extract_path_text('{\"a\": {\"b\": 7}}', 'a', 'b')", Some("7")),
            ("jsonb_extract_path('{\"a\": {\"b\": 7}}', 'a')", Some(r#"{"b": 7}"#)),
            ("json_extract_path_text('{\"a\": \"z\"}', 'a')", Some("z")),
            ("json_extract_path('{\"a\": {\"b\":1}}', 'a')", Some(r#"{"b":1}"#)),
            ("json_extract_path('[1, [2,  3]]', '-1')", Some("[2,  3]")),
            ("jsonb_extract_path('{\"a\": 1}', 'x')", None),
            ("jsonb_extract_path('{\"a\": 1}', NULL)", None),
        ]);
        check_errors(&[
            ("jsonb_typeof('x')", "22P02"),
            ("jsonb_array_length('1')", "22023"),
            ("jsonb_array_length('{}')", "22023"),
        ]);
    }

    #[test]
    fn edits_as_postgres() {
        check(&[
            (
                "jsonb_set('{\"a\": 1, \"b\": {\"c\": 2}}', '{b,c}', '3')",
                Some(r#"{"a": 1, "b": {"c": 3}}"#),
            ),
            (
                "jsonb_set('{\"a\": 1}', '{z}', '\"new\"')",
                Some(r#"{"a": 1, "z": "new"}"#),
            ),
            ("jsonb_set('[1, 2]', '{0}', '9')", Some("[9, 2]")),
            ("jsonb_set('[1, 2]', '{-5}', '9')", Some("[9, 1, 2]")),
            ("jsonb_set('[1, 2]', '{7}', '9')", Some("[1, 2, 9]")),
            ("jsonb_set('[1, 2]', '{7}', '9', false)", Some("[1, 2]")),
            ("jsonb_set('{\"a\":1}', '{a,b}', '2')", Some(r#"{"a": 1}"#)),
            ("jsonb_set('{\"a\":1}', '{}', '2')", Some(r#"{"a": 1}"#)),
            ("jsonb_set('{\"a\":1}', '{a}', NULL)", None),
            (
                "jsonb_insert('{\"a\": [1, 2]}', '{a,1}', '99')",
                Some(r#"{"a": [1, 99, 2]}"#),
            ),
            (
                "jsonb_insert('{\"a\": [1, 2]}', '{a,1}', '99', true)",
                Some(r#"{"a": [1, 2, 99]}"#),
            ),
            ("jsonb_insert('{\"a\": 1}', '{b}', '2')", Some(r#"{"a": 1, "b": 2}"#)),
            (
                "jsonb_strip_nulls('{\"a\": 1, \"b\": null, \"c\": [null]}')",
                Some(r#"{"a": 1, "c": [null]}"#),
            ),
        ]);
        check_errors(&[
            ("jsonb_set('[1]', '{x}', '1')", "22P02"),
            ("jsonb_set('1', '{x}', '1')", "22023"),
            ("jsonb_insert('{\"a\":1}', '{a}', '1')", "22023"),
        ]);
    }

    #[test]
    fn pretty_prints_as_postgres() {
        check(&[
            (
                "jsonb_pretty('{\"a\": [1, {\"b\": 2}], \"c\": {}, \"d\": []}')",
                Some("{\n    \"a\": [\n        1,\n        {\n            \"b\": 2\n        }\n    ],\n    \"c\": {\n    },\n    \"d\": [\n    ]\n}"),
            ),
            ("jsonb_pretty('\"x\"')", Some("\"x\"")),
        ]);
    }

    #[test]
    fn containment_and_keys_as_postgres() {
        check(&[
            ("'{\"a\": 1, \"b\": 2}'::jsonb @> '{\"a\": 1}'", Some("t")),
            ("'{\"a\": 1}'::jsonb <@ '{\"a\": 1, \"b\": 2}'", Some("t")),
            ("'[1, 2, 3]'::jsonb @> '[3, 1]'", Some("t")),
            ("'[1, 2, 3]'::jsonb @> '1'", Some("t")),
            ("'{\"a\": [1, 2]}'::jsonb @> '{\"a\": 1}'", Some("f")),
            ("'[[1]]'::jsonb @> '[1]'", Some("f")),
            ("'[[1, 2]]'::jsonb @> '[[2]]'", Some("t")),
            ("'{\"a\": 1.0}'::jsonb @> '{\"a\": 1}'", Some("t")),
            (
                "'{\"tags\": [\"x\", \"y\"]}'::jsonb @> '{\"tags\": [\"y\"]}'",
                Some("t"),
            ),
            ("'\"a\"'::jsonb @> '[\"a\"]'", Some("f")),
            ("'{\"a\": 1, \"b\": 2}'::jsonb ? 'a'", Some("t")),
            ("'{\"a\": 1}'::jsonb ? 'z'", Some("f")),
            ("'[\"x\", \"y\"]'::jsonb ? 'x'", Some("t")),
            ("'{\"a\": 1}'::jsonb ? NULL", None),
        ]);
    }

    #[test]
    fn aggregates_as_postgres() {
        let row = |sql: &str| row_after(&[], sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let some = |v: &[&str]| v.iter().map(|s| Some((*s).to_owned())).collect::<Vec<_>>();
        assert_eq!(
            row("SELECT jsonb_object_agg(k, v ORDER BY k) FROM (VALUES ('a', 1), ('b', 2)) AS t(k, v)"),
            some(&[r#"{"a": 1, "b": 2}"#])
        );
        assert_eq!(
            row("SELECT jsonb_agg(x ORDER BY x), json_agg(x ORDER BY x DESC) FROM (VALUES (3), (1), (2)) AS t(x)"),
            some(&["[1, 2, 3]", "[3, 2, 1]"])
        );
        assert_eq!(
            row("SELECT json_object_agg(x, x = 1) FROM (VALUES (1), (2)) AS t(x)"),
            some(&[r#"{ "1" : true, "2" : false }"#])
        );
        assert_eq!(
            row("SELECT json_agg(x) FROM (VALUES (1), (NULL)) AS t(x) WHERE false"),
            vec![None]
        );
        assert_eq!(
            row_after(&[], "SELECT jsonb_object_agg(NULL, 1)").map_err(|e| e.code),
            Err("22023")
        );
    }
}
