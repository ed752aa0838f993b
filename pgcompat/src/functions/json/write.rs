//! JSON output: `jsonb`'s normalized form, `json`'s spacing kept, and the raw children of a `json` text.

use rusqlite::types::Value;

use super::*;
use crate::error::PgError;
use crate::value::json::Node as J;
use crate::value::json::Parser;

/// The top-level children of a JSON text, each as the text it was written with (for `json` paths).
pub(super) enum RawChildren<'a> {
    Obj(Vec<(String, &'a str)>),
    Arr(Vec<&'a str>),
    Scalar,
}

pub(super) fn raw_children(text: &str) -> Option<RawChildren<'_>> {
    let mut p = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    p.skip_ws();
    let child = |p: &mut Parser<'_>| -> Option<(usize, usize)> {
        p.skip_ws();
        let start = p.at;
        p.value(1)?;
        Some((start, p.at))
    };
    match p.bytes.get(p.at)? {
        b'[' => {
            p.at += 1;
            let mut items = Vec::new();
            p.skip_ws();
            if p.bytes.get(p.at) == Some(&b']') {
                return Some(RawChildren::Arr(items));
            }
            loop {
                let (s, e) = child(&mut p)?;
                items.push(text.get(s..e)?);
                p.skip_ws();
                match p.bytes.get(p.at)? {
                    b',' => p.at += 1,
                    _ => return Some(RawChildren::Arr(items)),
                }
            }
        }
        b'{' => {
            p.at += 1;
            let mut fields = Vec::new();
            p.skip_ws();
            if p.bytes.get(p.at) == Some(&b'}') {
                return Some(RawChildren::Obj(fields));
            }
            loop {
                p.skip_ws();
                let key = p.string()?;
                p.skip_ws();
                p.at += 1;
                let (s, e) = child(&mut p)?;
                fields.push((key, text.get(s..e)?));
                p.skip_ws();
                match p.bytes.get(p.at)? {
                    b',' => p.at += 1,
                    _ => return Some(RawChildren::Obj(fields)),
                }
            }
        }
        _ => Some(RawChildren::Scalar),
    }
}

pub(super) fn write_string(out: &mut String, s: &str) {
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// jsonb's text: keys sorted (shorter first, then bytewise), the last duplicate kept, `", "` and `": "`.
pub(super) fn write_jsonb(out: &mut String, node: &J) {
    match node {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => out.push_str(&crate::value::json::jsonb_number(n)),
        J::String(s) => write_string(out, s),
        J::Raw(r) => match parse(r) {
            Ok(node) => write_jsonb(out, &node),
            Err(_) => out.push_str("null"),
        },
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_jsonb(out, item);
            }
            out.push(']');
        }
        J::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in sorted_fields(fields).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, key);
                out.push_str(": ");
                write_jsonb(out, value);
            }
            out.push('}');
        }
    }
}

/// An object's fields as jsonb keeps them: the last of duplicate keys, sorted shorter first then bytewise.
pub(super) fn sorted_fields(fields: &[(String, J)]) -> Vec<(&String, &J)> {
    let mut kept: Vec<(&String, &J)> = Vec::with_capacity(fields.len());
    for (key, value) in fields {
        match kept.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => kept.push((key, value)),
        }
    }
    kept.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())));
    kept
}

/// A value inside a `json` result: SQL arrays compact (`[1,2]`), as PostgreSQL's `array_to_json`.
pub(super) fn write_json(out: &mut String, node: &J) {
    match node {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => out.push_str(n),
        J::String(s) => write_string(out, s),
        J::Raw(r) => out.push_str(r),
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        J::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_json(out, value);
            }
            out.push('}');
        }
    }
}

pub(super) fn jsonb_text(node: &J) -> Result<Value, PgError> {
    let mut out = String::new();
    write_jsonb(&mut out, node);
    check_size(out.len())?;
    Ok(Value::Text(out))
}

pub(super) fn json_text(node: &J) -> String {
    let mut out = String::new();
    write_json(&mut out, node);
    out
}

/// A number's text as JSON: NaN and the infinities become strings, as in PostgreSQL.
pub(super) fn number(text: String) -> J {
    let lower = text.to_ascii_lowercase();
    if lower.contains("nan") || lower.contains("inf") {
        J::String(text)
    } else {
        J::Number(text)
    }
}
