//! What a client command prints on stdout: the API's resources as a table for people, or as JSON or YAML for
//! programs. Rendering works over any JSON value, not fixed structs, so a field the API adds shows up in every
//! format without a change here.
//!
//! Tables: a list of objects is one row per object with a column per key (identifying fields first, times last:
//! [`ordered`]); an
//! object is a two-column field/value table; an object whose values are all objects (a database with its
//! operation) is one such table per member, titled. Nested values in a cell are `key=value` pairs (an object of
//! scalars, such as labels) or compact JSON.

use comfy_table::{presets, ContentArrangement, Table};
use serde_json::Value;

use super::error::ClientError;

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Tables for people.
    Table,
    /// Pretty-printed JSON: the resource (or the list of resources) without the API's wrapping key.
    Json,
    /// YAML of the same value as `json`.
    Yaml,
}

/// `value` rendered in `format`, ending with a newline.
pub(crate) fn render(value: &Value, format: Format) -> Result<String, ClientError> {
    match format {
        Format::Json => serde_json::to_string_pretty(value)
            .map(|text| text + "\n")
            .map_err(|e| ClientError::Local(format!("writing JSON: {e}"))),
        Format::Yaml => serde_norway::to_string(value).map_err(|e| ClientError::Local(format!("writing YAML: {e}"))),
        Format::Table => Ok(table(value)),
    }
}

/// What a command prints: the whole result in a format, or one field of it.
#[derive(Clone, Debug)]
pub(crate) enum Show {
    /// The result in this format.
    Whole(Format),
    /// The field at this dot path, as plain text ([`pick`]).
    Field(String),
}

/// Prints `value` on stdout as `show` says.
pub(crate) fn print(value: &Value, show: &Show) -> Result<(), ClientError> {
    match show {
        Show::Whole(format) => write_stdout(render(value, *format)?.as_bytes()),
        Show::Field(path) => write_stdout(pick(value, path)?.as_bytes()),
    }
}

/// The field at the dot `path` of `value` (of each item, for a list), one line each: a string as it is, null
/// as an empty line, anything else as compact JSON. A field that is not there is an error naming it.
pub(crate) fn pick(value: &Value, path: &str) -> Result<String, ClientError> {
    let items = match value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut out = String::new();
    for item in items {
        let found = path
            .split('.')
            .try_fold(item, |at, key| at.get(key))
            .ok_or_else(|| ClientError::Local(format!("no field {path:?} in the result: {item}")))?;
        match found {
            Value::String(text) => out.push_str(text),
            Value::Null => {}
            other => out.push_str(&other.to_string()),
        }
        out.push('\n');
    }
    Ok(out)
}

/// Writes `bytes` to stdout. A closed pipe (`cambium … | head`) is not a failure: the reader has what it wanted.
pub(crate) fn write_stdout(bytes: &[u8]) -> Result<(), ClientError> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(ClientError::Local(format!("writing stdout: {e}"))),
        _ => Ok(()),
    }
}

/// `value` as tables (see the module doc).
fn table(value: &Value) -> String {
    match value {
        Value::Array(items) if items.is_empty() => "(none)\n".to_owned(),
        Value::Array(items) if items.iter().all(Value::is_object) => rows(items),
        Value::Object(members) if !members.is_empty() && members.values().all(Value::is_object) => {
            let mut out = String::new();
            for (name, member) in members {
                out.push_str(&format!("{name}:\n{}", table(member)));
            }
            out
        }
        Value::Object(members) => {
            let mut table = new_table();
            table.set_header(["field", "value"]);
            for name in ordered(members.keys().map(String::as_str)) {
                table.add_row([name.to_owned(), cell(&members[name])]);
            }
            format!("{table}\n")
        }
        other => format!("{}\n", cell(other)),
    }
}

/// One row per object, a column per key.
fn rows(items: &[Value]) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for item in items {
        for key in item.as_object().into_iter().flat_map(|o| o.keys()) {
            if !keys.contains(&key.as_str()) {
                keys.push(key);
            }
        }
    }
    let columns = ordered(keys.into_iter());
    let mut table = new_table();
    table.set_header(columns.iter().copied());
    for item in items {
        table.add_row(
            columns
                .iter()
                .map(|column| item.get(*column).map(cell).unwrap_or_default()),
        );
    }
    format!("{table}\n")
}

/// Fields in the order people read them: the identifying ones first (`id`, `name`, `status`, `action`), times
/// (`…_at`) last, the rest between in the order given (serde_json's, alphabetical).
fn ordered<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    const FIRST: [&str; 4] = ["id", "name", "status", "action"];
    let mut keys: Vec<&str> = keys.collect();
    keys.sort_by_key(|key| match FIRST.iter().position(|first| first == key) {
        Some(position) => position,
        None if key.ends_with("_at") => FIRST.len() + 1,
        None => FIRST.len(),
    });
    keys
}

fn new_table() -> Table {
    let mut table = Table::new();
    // Dynamic: fitted to the terminal's width when stdout is one; as wide as the content when piped.
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table
}

/// A value in a cell: strings bare, null empty, an object of scalars as `key=value` pairs, the rest as JSON.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Object(members) if members.values().all(|v| !v.is_object() && !v.is_array()) => members
            .iter()
            .map(|(k, v)| format!("{k}={}", cell(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_list_is_a_row_per_item_with_every_key_a_column() {
        let items = json!([
            {"id": "br_1", "name": "main", "is_default": true},
            {"id": "br_2", "name": "dev", "parent_lsn": "0/16B3748", "labels": {"env": "dev"}},
        ]);
        let text = render(&items, Format::Table).expect("table");
        let header = text.lines().nth(1).expect("a header line");
        for column in ["id", "name", "is_default", "parent_lsn", "labels"] {
            assert!(header.contains(column), "{column} in {header}");
        }
        assert!(
            text.contains("0/16B3748") && text.contains("env=dev") && text.contains("true"),
            "{text}"
        );
        assert_eq!(render(&json!([]), Format::Table).expect("table"), "(none)\n");
    }

    #[test]
    fn an_object_of_objects_is_a_table_each() {
        let value = json!({"database": {"id": "db_1"}, "operation": {"id": "op_1", "status": "finished"}});
        let text = render(&value, Format::Table).expect("table");
        assert!(text.starts_with("database:\n"), "{text}");
        assert!(
            text.contains("operation:\n") && text.contains("op_1") && text.contains("finished"),
            "{text}"
        );
    }

    #[test]
    fn a_field_is_picked_by_its_path_from_each_item() {
        let created = json!({"database": {"id": "db_1", "labels": {"a": "b"}}, "operation": {"id": "op_1"}});
        assert_eq!(pick(&created, "database.id").expect("found"), "db_1\n");
        assert_eq!(pick(&created, "database.labels").expect("found"), "{\"a\":\"b\"}\n");
        let list = json!([{"id": "br_1", "parent_lsn": null}, {"id": "br_2", "parent_lsn": "0/1"}]);
        assert_eq!(pick(&list, "id").expect("found"), "br_1\nbr_2\n");
        assert_eq!(pick(&list, "parent_lsn").expect("found"), "\n0/1\n");
        assert!(matches!(pick(&created, "database.nope"), Err(ClientError::Local(_))));
    }

    #[test]
    fn json_and_yaml_carry_the_value_whole() {
        let value = json!({"id": "br_1", "protected": false, "labels": {"a": "b"}, "n": 3, "none": null});
        let json: Value = serde_json::from_str(&render(&value, Format::Json).expect("json")).expect("parses");
        assert_eq!(json, value);
        let yaml: Value = serde_norway::from_str(&render(&value, Format::Yaml).expect("yaml")).expect("parses");
        assert_eq!(yaml, value);
    }
}
