//! String functions as PostgreSQL has them: lengths, `translate`, quoting (`quote_ident` quotes only when
//! PostgreSQL would), `md5`, regular expressions with PostgreSQL's replacement syntax (`\1`, `\&`) and flags,
//! splitting to and joining from arrays, `encode`/`decode`, `concat`, `format` and `to_hex`.

use std::sync::Arc;

use base64::Engine;
use rusqlite::types::Value;
use rusqlite::Connection;

use super::{check_size, define, value_text, Args, Purity};
use crate::error::{
    PgError, INVALID_PARAMETER_VALUE, INVALID_REGULAR_EXPRESSION, NULL_VALUE_NOT_ALLOWED, PROGRAM_LIMIT_EXCEEDED,
};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::array;

/// Largest compiled regular expression (bytes of its program), so a hostile pattern cannot take the memory.
const REGEX_SIZE_MAX: usize = 1 << 20;
/// Base64 lines are cut at this many characters, as PostgreSQL's `encode(…, 'base64')` cuts them.
const BASE64_LINE_CHARS: usize = 76;

/// PostgreSQL 15's keywords that are not unreserved: `quote_ident` quotes them.
const KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "both",
    "case",
    "cast",
    "char",
    "character",
    "check",
    "coalesce",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "dec",
    "decimal",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "exists",
    "extract",
    "false",
    "fetch",
    "float",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "greatest",
    "group",
    "grouping",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "inout",
    "int",
    "integer",
    "intersect",
    "interval",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "least",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "national",
    "natural",
    "nchar",
    "none",
    "normalize",
    "not",
    "notnull",
    "null",
    "nullif",
    "numeric",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "out",
    "outer",
    "overlaps",
    "overlay",
    "placing",
    "position",
    "precision",
    "primary",
    "real",
    "references",
    "returning",
    "right",
    "row",
    "select",
    "session_user",
    "setof",
    "similar",
    "smallint",
    "some",
    "substring",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "time",
    "timestamp",
    "to",
    "trailing",
    "treat",
    "trim",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "values",
    "varchar",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
    "xmlattributes",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlnamespaces",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
    "xmltable",
];

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    for name in ["char_length", "character_length"] {
        define(conn, state, name, 1, Purity::Pure, |a, _| {
            Ok(a.text(0)
                .map_or(Value::Null, |t| Value::Integer(t.chars().count() as i64)))
        })?;
    }
    define(conn, state, "octet_length", 1, Purity::Pure, |a, _| {
        Ok(bytes(a, 0).map_or(Value::Null, |b| Value::Integer(b.len() as i64)))
    })?;
    define(conn, state, "bit_length", 1, Purity::Pure, |a, _| {
        Ok(bytes(a, 0).map_or(Value::Null, |b| Value::Integer(b.len() as i64 * 8)))
    })?;
    define(conn, state, "ascii", 1, Purity::Pure, |a, _| {
        Ok(a.text(0).map_or(Value::Null, |t| {
            Value::Integer(t.chars().next().map_or(0, |c| i64::from(u32::from(c))))
        }))
    })?;
    define(conn, state, "translate", 3, Purity::Pure, translate)?;
    define(conn, state, "quote_ident", 1, Purity::Pure, |a, _| {
        Ok(a.text(0).map_or(Value::Null, |t| Value::Text(quote_ident(&t))))
    })?;
    define(conn, state, "quote_literal", 1, Purity::Pure, |a, s| {
        Ok(typed_text(a, 0, s).map_or(Value::Null, |t| Value::Text(quote_literal(&t))))
    })?;
    define(conn, state, "quote_nullable", 1, Purity::Pure, |a, s| {
        Ok(Value::Text(
            typed_text(a, 0, s).map_or_else(|| "NULL".to_owned(), |t| quote_literal(&t)),
        ))
    })?;
    define(conn, state, "md5", 1, Purity::Pure, |a, _| {
        use md5::Digest;
        Ok(bytes(a, 0).map_or(Value::Null, |b| {
            Value::Text(md5::Md5::digest(&b).iter().map(|x| format!("{x:02x}")).collect())
        }))
    })?;
    for n in [3, 4] {
        define(conn, state, "regexp_replace", n, Purity::Pure, regexp_replace)?;
    }
    for n in [2, 3] {
        define(conn, state, "regexp_match", n, Purity::Pure, regexp_match)?;
        define(conn, state, "regexp_split_to_array", n, Purity::Pure, regexp_split)?;
        define(conn, state, "string_to_array", n, Purity::Pure, string_to_array)?;
        define(conn, state, "array_to_string", n, Purity::Pure, array_to_string)?;
    }
    define(conn, state, "encode", 2, Purity::Pure, encode)?;
    define(conn, state, "decode", 2, Purity::Pure, decode)?;
    define(conn, state, "concat", -1, Purity::Pure, |a, s| concat(a, s, 0, ""))?;
    define(conn, state, "concat_ws", -1, Purity::Pure, |a, s| {
        let Some(separator) = a.text(0) else {
            return Ok(Value::Null);
        };
        concat(a, s, 1, &separator)
    })?;
    define(conn, state, "format", -1, Purity::Pure, format)?;
    define(conn, state, "to_hex", 1, Purity::Pure, |a, _| {
        Ok(match a.int(0)? {
            None => Value::Null,
            Some(v) if a.ty(0).is_some_and(|t| matches!(t.base(), Base::Int4 | Base::Int2)) => {
                Value::Text(format!("{:x}", v as i32))
            }
            Some(v) => Value::Text(format!("{v:x}")),
        })
    })?;
    Ok(())
}

/// The result type of a function of this file.
pub(super) fn result_type(name: &str, _args: &[Option<PgType>]) -> Option<PgType> {
    Some(match name {
        "char_length" | "character_length" | "octet_length" | "bit_length" | "ascii" => PgType::INT4,
        "translate" | "quote_ident" | "quote_literal" | "quote_nullable" | "md5" | "regexp_replace" | "encode"
        | "concat" | "concat_ws" | "format" | "to_hex" | "array_to_string" => PgType::TEXT,
        "regexp_match" | "regexp_split_to_array" | "string_to_array" => PgType::TEXT.array(),
        "decode" => PgType::BYTEA,
        _ => return None,
    })
}

/// Argument `i` as bytes (a text's UTF-8, a bytea's bytes).
fn bytes(a: &Args<'_, '_>, i: usize) -> Option<Vec<u8>> {
    match a.value(i) {
        Value::Null => None,
        Value::Blob(b) => Some(b),
        other => value_text(&other).map(String::into_bytes),
    }
}

/// Argument `i` as PostgreSQL would print it as text, by its inferred type (`t` for true).
fn typed_text(a: &Args<'_, '_>, i: usize, state: &SessionState) -> Option<String> {
    let value = a.value(i);
    match a.ty(i) {
        Some(ty) => crate::value::output(ty, &value, &state.time_zone()),
        None => match value {
            Value::Blob(b) => Some(crate::value::hex_bytea(&b)),
            other => value_text(&other),
        },
    }
}

fn translate(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(from), Some(to)) = (a.text(0), a.text(1), a.text(2)) else {
        return Ok(Value::Null);
    };
    let from: Vec<char> = from.chars().collect();
    let to: Vec<char> = to.chars().collect();
    let out: String = text
        .chars()
        .filter_map(|c| match from.iter().position(|f| *f == c) {
            Some(at) => to.get(at).copied(),
            None => Some(c),
        })
        .collect();
    Ok(Value::Text(out))
}

/// `quote_ident`: the name as is when PostgreSQL would read it back unquoted, else in double quotes.
pub(super) fn quote_ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !KEYWORDS.contains(&name);
    if plain {
        return name.to_owned();
    }
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `quote_literal`: single quotes doubled; with backslashes, an `E'…'` string with them doubled.
pub(super) fn quote_literal(text: &str) -> String {
    let body = text.replace('\'', "''");
    if text.contains('\\') {
        format!("E'{}'", body.replace('\\', "\\\\"))
    } else {
        format!("'{body}'")
    }
}

/// A PostgreSQL regular expression with its flags, compiled; 2201B for a bad one, 22023 for a bad flag.
fn compile(pattern: &str, flags: &str) -> Result<(regex::Regex, bool), PgError> {
    let mut builder = regex::RegexBuilder::new(pattern);
    builder.size_limit(REGEX_SIZE_MAX);
    let mut global = false;
    for flag in flags.chars() {
        match flag {
            'g' => global = true,
            'i' => {
                builder.case_insensitive(true);
            }
            'c' => {
                builder.case_insensitive(false);
            }
            'n' | 'm' => {
                builder.multi_line(true);
                builder.dot_matches_new_line(false);
            }
            's' => {
                builder.dot_matches_new_line(true);
            }
            'x' => {
                builder.ignore_whitespace(true);
            }
            other => {
                return Err(PgError::new(
                    INVALID_PARAMETER_VALUE,
                    format!("invalid regular expression option: \"{other}\""),
                ))
            }
        }
    }
    let regex = builder
        .build()
        .map_err(|e| PgError::new(INVALID_REGULAR_EXPRESSION, format!("invalid regular expression: {e}")))?;
    Ok((regex, global))
}

fn regexp_replace(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(pattern), Some(replacement)) = (a.text(0), a.text(1), a.text(2)) else {
        return Ok(Value::Null);
    };
    let flags = if a.len() > 3 {
        match a.text(3) {
            Some(f) => f,
            None => return Ok(Value::Null),
        }
    } else {
        String::new()
    };
    let (regex, global) = compile(&pattern, &flags)?;
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for captures in regex.captures_iter(&text) {
        let Some(whole) = captures.get(0) else { continue };
        out.push_str(&text[last..whole.start()]);
        expand(&mut out, &replacement, &captures);
        check_size(out.len())?;
        last = whole.end();
        if !global {
            break;
        }
    }
    out.push_str(&text[last..]);
    Ok(Value::Text(out))
}

/// PostgreSQL's replacement text: `\1`…`\9` a group, `\&` the whole match, `\\` a backslash.
fn expand(out: &mut String, replacement: &str, captures: &regex::Captures<'_>) {
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some(d @ '1'..='9') => {
                chars.next();
                let group = d as usize - '0' as usize;
                out.push_str(captures.get(group).map_or("", |m| m.as_str()));
            }
            Some('&') => {
                chars.next();
                out.push_str(captures.get(0).map_or("", |m| m.as_str()));
            }
            Some('\\') => {
                chars.next();
                out.push('\\');
            }
            _ => out.push('\\'),
        }
    }
}

fn flags_arg(a: &Args<'_, '_>, i: usize) -> Option<String> {
    if a.len() > i {
        a.text(i)
    } else {
        Some(String::new())
    }
}

fn regexp_match(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(pattern), Some(flags)) = (a.text(0), a.text(1), flags_arg(a, 2)) else {
        return Ok(Value::Null);
    };
    if flags.contains('g') {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "regexp_match() does not support the \"global\" option",
        ));
    }
    let (regex, _) = compile(&pattern, &flags)?;
    let Some(captures) = regex.captures(&text) else {
        return Ok(Value::Null);
    };
    let groups: Vec<Option<String>> = if captures.len() == 1 {
        vec![captures.get(0).map(|m| m.as_str().to_owned())]
    } else {
        (1..captures.len())
            .map(|i| captures.get(i).map(|m| m.as_str().to_owned()))
            .collect()
    };
    Ok(Value::Text(array::format(&groups)))
}

fn regexp_split(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(pattern), Some(flags)) = (a.text(0), a.text(1), flags_arg(a, 2)) else {
        return Ok(Value::Null);
    };
    if flags.contains('g') {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "regexp_split_to_array() does not support the \"global\" option",
        ));
    }
    let (regex, _) = compile(&pattern, &flags)?;
    let mut parts = Vec::new();
    let mut start = 0;
    for m in regex.find_iter(&text) {
        // PostgreSQL ignores empty matches at either end and right after the previous match.
        if m.start() == m.end() && (m.start() == 0 || m.start() == text.len() || m.start() == start) {
            continue;
        }
        parts.push(Some(text[start..m.start()].to_owned()));
        start = m.end();
        if parts.len() > array::ELEMENTS_MAX {
            return Err(PgError::new(
                PROGRAM_LIMIT_EXCEEDED,
                "array size exceeds the maximum allowed",
            ));
        }
    }
    parts.push(Some(text[start..].to_owned()));
    Ok(Value::Text(array::format(&parts)))
}

fn string_to_array(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let Some(text) = a.text(0) else {
        return Ok(Value::Null);
    };
    let null = if a.len() > 2 { a.text(2) } else { None };
    if text.is_empty() {
        return Ok(Value::Text("{}".to_owned()));
    }
    let parts: Vec<&str> = match a.text(1) {
        None => text.char_indices().map(|(i, c)| &text[i..i + c.len_utf8()]).collect(),
        Some(sep) if sep.is_empty() => vec![text.as_str()],
        Some(sep) => text.split(sep.as_str()).collect(),
    };
    if parts.len() > array::ELEMENTS_MAX {
        return Err(PgError::new(
            PROGRAM_LIMIT_EXCEEDED,
            "array size exceeds the maximum allowed",
        ));
    }
    let elements: Vec<Option<String>> = parts
        .into_iter()
        .map(|p| {
            if null.as_deref() == Some(p) {
                None
            } else {
                Some(p.to_owned())
            }
        })
        .collect();
    Ok(Value::Text(array::format(&elements)))
}

fn array_to_string(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(separator)) = (a.text(0), a.text(1)) else {
        return Ok(Value::Null);
    };
    let null = if a.len() > 2 { a.text(2) } else { None };
    let elements = array::parse(&text).ok_or_else(|| PgError::invalid_input("text[]", &text))?;
    let mut out = String::new();
    let mut first = true;
    for element in elements {
        let Some(piece) = element.or_else(|| null.clone()) else {
            continue;
        };
        if !first {
            out.push_str(&separator);
        }
        first = false;
        out.push_str(&piece);
        check_size(out.len())?;
    }
    Ok(Value::Text(out))
}

fn encode(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(data), Some(format)) = (bytes(a, 0), a.text(1)) else {
        return Ok(Value::Null);
    };
    check_size(data.len().saturating_mul(4))?;
    let out = match format.to_ascii_lowercase().as_str() {
        "hex" => data.iter().map(|b| format!("{b:02x}")).collect(),
        "base64" => {
            let flat = base64::engine::general_purpose::STANDARD.encode(&data);
            let lines: Vec<&str> = flat
                .as_bytes()
                .chunks(BASE64_LINE_CHARS)
                .map(|c| std::str::from_utf8(c).unwrap_or_default())
                .collect();
            lines.join("\n")
        }
        "escape" => {
            let mut out = String::with_capacity(data.len());
            for b in data {
                match b {
                    0 | 0x80..=0xff => out.push_str(&format!("\\{b:03o}")),
                    b'\\' => out.push_str("\\\\"),
                    _ => out.push(char::from(b)),
                }
            }
            out
        }
        _ => {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!("unrecognized encoding: \"{format}\""),
            ))
        }
    };
    Ok(Value::Text(out))
}

fn decode(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(format)) = (a.text(0), a.text(1)) else {
        return Ok(Value::Null);
    };
    let bad = |m: String| PgError::new(INVALID_PARAMETER_VALUE, m);
    let out = match format.to_ascii_lowercase().as_str() {
        "hex" => {
            let digits: Vec<char> = text
                .chars()
                .filter(|c| !matches!(c, ' ' | '\t' | '\n' | '\r'))
                .collect();
            let mut out = Vec::with_capacity(digits.len() / 2);
            for pair in digits.chunks(2) {
                let value = |c: char| {
                    c.to_digit(16)
                        .ok_or_else(|| bad(format!("invalid hexadecimal digit: \"{c}\"")))
                };
                let high = value(pair[0])?;
                let Some(&low) = pair.get(1) else {
                    return Err(bad("invalid hexadecimal data: odd number of digits".to_owned()));
                };
                out.push((high * 16 + value(low)?) as u8);
            }
            out
        }
        "base64" => {
            let clean: String = text
                .chars()
                .filter(|c| !matches!(c, ' ' | '\t' | '\n' | '\r'))
                .collect();
            if let Some(c) = clean
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
            {
                return Err(bad(format!(
                    "invalid symbol \"{c}\" found while decoding base64 sequence"
                )));
            }
            base64::engine::general_purpose::STANDARD
                .decode(clean.as_bytes())
                .map_err(|_| bad("invalid base64 end sequence".to_owned()))?
        }
        "escape" => unescape_bytea(&text)?,
        _ => return Err(bad(format!("unrecognized encoding: \"{format}\""))),
    };
    Ok(Value::Blob(out))
}

fn unescape_bytea(text: &str) -> Result<Vec<u8>, PgError> {
    if text.starts_with("\\x") || text.starts_with("\\X") {
        // `decode(…, 'escape')` reads `\x…` as the characters it is, not as hex.
        let mut out = b"\\".to_vec();
        out.extend(crate::value::parse_bytea(&text[1..])?);
        return Ok(out);
    }
    crate::value::parse_bytea(text)
}

fn concat(a: &Args<'_, '_>, state: &SessionState, from: usize, separator: &str) -> Result<Value, PgError> {
    let mut out = String::new();
    let mut first = true;
    for i in from..a.len() {
        let Some(piece) = typed_text(a, i, state) else { continue };
        if !first {
            out.push_str(separator);
        }
        first = false;
        out.push_str(&piece);
        check_size(out.len())?;
    }
    Ok(Value::Text(out))
}

/// `format(fmt, …)`: `%s`, `%I`, `%L` and `%%`, with `n$` positions, `-` and widths (`*` too).
fn format(a: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
    let Some(fmt) = a.text(0) else {
        return Ok(Value::Null);
    };
    let bad = |m: &str| PgError::new(INVALID_PARAMETER_VALUE, m.to_owned());
    let chars: Vec<char> = fmt.chars().collect();
    let mut out = String::new();
    let mut next_arg = 1;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        i += 1;
        if chars.get(i) == Some(&'%') {
            out.push('%');
            i += 1;
            continue;
        }
        let number = |i: &mut usize| -> Option<usize> {
            let start = *i;
            while chars.get(*i).is_some_and(char::is_ascii_digit) {
                *i += 1;
            }
            (start != *i).then(|| {
                chars[start..*i]
                    .iter()
                    .collect::<String>()
                    .parse()
                    .unwrap_or(usize::MAX)
            })
        };
        // [n$]
        let save = i;
        let mut position = number(&mut i);
        if position.is_some() && chars.get(i) == Some(&'$') {
            i += 1;
        } else {
            position = None;
            i = save;
        }
        let mut left = false;
        if chars.get(i) == Some(&'-') {
            left = true;
            i += 1;
        }
        let mut width: Option<i64> = None;
        if chars.get(i) == Some(&'*') {
            i += 1;
            let w = a.int(next_arg)?.unwrap_or(0);
            next_arg += 1;
            if w < 0 {
                left = true;
            }
            width = Some(w.abs());
        } else if let Some(w) = number(&mut i) {
            width = Some(i64::try_from(w).unwrap_or(i64::MAX));
        }
        let Some(&kind) = chars.get(i) else {
            return Err(bad("unterminated format() type specifier"));
        };
        i += 1;
        let index = match position {
            Some(0) => return Err(bad("format specifies argument 0, but arguments are numbered from 1")),
            Some(p) => p,
            None => next_arg,
        };
        next_arg = index + 1;
        if index >= a.len() {
            return Err(bad("too few arguments for format()"));
        }
        let value = typed_text(a, index, state);
        let piece = match kind {
            's' => value.unwrap_or_default(),
            'I' => match value {
                Some(v) => quote_ident(&v),
                None => {
                    return Err(PgError::new(
                        NULL_VALUE_NOT_ALLOWED,
                        "null values cannot be formatted as an SQL identifier",
                    ))
                }
            },
            'L' => value.map_or_else(|| "NULL".to_owned(), |v| quote_literal(&v)),
            other => return Err(bad(&format!("unrecognized format() type specifier \"{other}\""))),
        };
        let width = usize::try_from(width.unwrap_or(0)).unwrap_or(usize::MAX);
        check_size(width)?;
        let pad = width.saturating_sub(piece.chars().count());
        if left {
            out.push_str(&piece);
            out.push_str(&" ".repeat(pad));
        } else {
            out.push_str(&" ".repeat(pad));
            out.push_str(&piece);
        }
        check_size(out.len())?;
    }
    Ok(Value::Text(out))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, check_errors};

    #[test]
    fn lengths_quoting_and_hashes() {
        check(&[
            ("char_length('héllo')", Some("5")),
            ("character_length('héllo')", Some("5")),
            ("octet_length('héllo')", Some("6")),
            ("bit_length('héllo')", Some("48")),
            ("ascii('é')", Some("233")),
            ("ascii('')", Some("0")),
            ("ascii(NULL)", None),
            ("translate('12345', '143', 'ax')", Some("a2x5")),
            ("translate('abc', '', 'x')", Some("abc")),
            ("quote_ident('foo')", Some("foo")),
            ("quote_ident('Foo')", Some("\"Foo\"")),
            ("quote_ident('select')", Some("\"select\"")),
            ("quote_ident('a\"b')", Some("\"a\"\"b\"")),
            ("quote_ident('_x1')", Some("_x1")),
            ("quote_ident('1x')", Some("\"1x\"")),
            ("quote_ident('ÿ')", Some("\"ÿ\"")),
            ("quote_ident('')", Some("\"\"")),
            ("quote_literal('O''Reilly')", Some("'O''Reilly'")),
            ("quote_literal(E'a\\\\b')", Some("E'a\\\\b'")),
            ("quote_literal(42)", Some("'42'")),
            ("quote_nullable(NULL)", Some("NULL")),
            ("quote_nullable('x')", Some("'x'")),
            ("md5('abc')", Some("900150983cd24fb0d6963f7d28e17f72")),
            ("md5('')", Some("d41d8cd98f00b204e9800998ecf8427e")),
            ("md5(NULL)", None),
            ("to_hex(255)", Some("ff")),
            ("to_hex(-1)", Some("ffffffff")),
            ("to_hex(9223372036854775807)", Some("7fffffffffffffff")),
            ("lpad('hi', 5, 'xy')", Some("xyxhi")),
            ("rpad('hello', 3)", Some("hel")),
            ("lpad('hi', -1)", Some("")),
        ]);
    }

    #[test]
    fn regular_expressions() {
        check(&[
            ("regexp_replace('Thomas', '.[mN]a.', 'M')", Some("ThM")),
            (
                "regexp_replace('foobarbaz', 'b(..)', 'X\\1Y', 'g')",
                Some("fooXarYXazY"),
            ),
            ("regexp_replace('AbcAbc', 'a', 'x', 'gi')", Some("xbcxbc")),
            ("regexp_replace('abc', 'b', '\\&\\&')", Some("abbc")),
            ("regexp_replace('x.y.z', '\\.', '-', 'g')", Some("x-y-z")),
            ("regexp_match('foobarbequebaz', '(bar)(beque)')", Some("{bar,beque}")),
            ("regexp_match('foobar', 'x')", None),
            ("regexp_match('abc', 'b')", Some("{b}")),
            ("regexp_match('ABC', 'b', 'i')", Some("{B}")),
            (
                "regexp_split_to_array('hello world  x', '\\s+')",
                Some("{hello,world,x}"),
            ),
            ("regexp_split_to_array('a1b2c', '\\d')", Some("{a,b,c}")),
            ("regexp_split_to_array('', ',')", Some("{\"\"}")),
            ("regexp_split_to_array('abc', '')", Some("{a,b,c}")),
        ]);
        check_errors(&[
            ("regexp_replace('a', '(', 'b')", "2201B"),
            ("regexp_replace('a', 'a', 'b', 'z')", "22023"),
        ]);
    }

    #[test]
    fn arrays_and_encodings() {
        check(&[
            ("string_to_array('xx~^~yy~^~zz', '~^~', 'yy')", Some("{xx,NULL,zz}")),
            ("string_to_array('a,b', '')", Some("{\"a,b\"}")),
            ("string_to_array('abc', NULL)", Some("{a,b,c}")),
            ("string_to_array('', ',')", Some("{}")),
            ("string_to_array(NULL, ',')", None),
            ("array_to_string(ARRAY[1, NULL, 3], ',', '*')", Some("1,*,3")),
            ("array_to_string(ARRAY[1, NULL, 3], ',')", Some("1,3")),
            ("array_to_string(ARRAY['a b', 'c'], '-')", Some("a b-c")),
            ("array_to_string(ARRAY[true, false], ',')", Some("t,f")),
            ("encode('\\x0001ff'::bytea, 'hex')", Some("0001ff")),
            ("encode('hello'::bytea, 'base64')", Some("aGVsbG8=")),
            ("encode(E'a\\\\000b\\\\\\\\'::bytea, 'escape')", Some("a\\000b\\\\")),
            ("decode('0001ff', 'hex')", Some("\\x0001ff")),
            ("decode('aGVsbG8=', 'base64')", Some("\\x68656c6c6f")),
            ("decode('a\\000b', 'escape')", Some("\\x610062")),
            (
                "encode(repeat('x', 60)::bytea, 'base64')",
                Some("eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4\neHh4"),
            ),
        ]);
        check_errors(&[
            ("decode('zz', 'hex')", "22023"),
            ("decode('a', 'hex')", "22023"),
            ("decode('!!', 'base64')", "22023"),
            ("encode('x'::bytea, 'foo')", "22023"),
        ]);
    }

    #[test]
    fn concat_and_format() {
        check(&[
            ("concat('a', NULL, 1, true)", Some("a1t")),
            ("concat_ws(',', 'a', NULL, 'b', '2.50'::numeric)", Some("a,b,2.50")),
            (
                "format('%s|%I|%L|%%|%L', 'x', 'A b', 'O''R', NULL)",
                Some("x|\"A b\"|'O''R'|%|NULL"),
            ),
            ("format('%s', true)", Some("t")),
            ("format('%1$s %1$s, %2$L', 'a', 'b')", Some("a a, 'b'")),
            ("format('[%5s][%-5s]', 'ab', 'cd')", Some("[   ab][cd   ]")),
            ("format('%I', 'abc')", Some("abc")),
        ]);
        check_errors(&[("format('%s %s', 'a')", "22023"), ("format('%z', 1)", "22023")]);
    }
}
