//! Regular expressions with PostgreSQL's flags and replacement syntax (`\1`, `\&`): `regexp_replace`,
//! `regexp_match(es)`, `regexp_split_to_array`.

use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_PARAMETER_VALUE, INVALID_REGULAR_EXPRESSION, PROGRAM_LIMIT_EXCEEDED};
use crate::functions::SessionState;
use crate::value::array;

/// Largest compiled regular expression (bytes of its program), so a hostile pattern cannot take the memory.
pub(super) const REGEX_SIZE_MAX: usize = 1 << 20;

/// A PostgreSQL regular expression with its flags, compiled; 2201B for a bad one, 22023 for a bad flag.
pub(super) fn compile(pattern: &str, flags: &str) -> Result<(regex::Regex, bool), PgError> {
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

pub(super) fn regexp_replace(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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
pub(super) fn expand(out: &mut String, replacement: &str, captures: &regex::Captures<'_>) {
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

pub(super) fn flags_arg(a: &Args<'_, '_>, i: usize) -> Option<String> {
    if a.len() > i {
        a.text(i)
    } else {
        Some(String::new())
    }
}

pub(super) fn regexp_match(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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

pub(super) fn regexp_split(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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

/// `regexp_matches(text, pattern[, flags])`'s rows as a JSON array of `text[]` literals: every match with
/// the `g` flag, else the first; each match its capture groups (or the whole match without groups).
pub(super) fn regexp_matches_json(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(pattern), Some(flags)) = (a.text(0), a.text(1), flags_arg(a, 2)) else {
        return Ok(Value::Null);
    };
    let global = flags.contains('g');
    let (regex, _) = compile(&pattern, &flags.replace('g', ""))?;
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for captures in regex.captures_iter(&text) {
        let groups: Vec<Option<String>> = if captures.len() == 1 {
            vec![captures.get(0).map(|m| m.as_str().to_owned())]
        } else {
            (1..captures.len())
                .map(|i| captures.get(i).map(|m| m.as_str().to_owned()))
                .collect()
        };
        rows.push(serde_json::Value::String(array::format(&groups)));
        if !global {
            break;
        }
    }
    let out = serde_json::Value::Array(rows).to_string();
    check_size(out.len())?;
    Ok(Value::Text(out))
}

/// `text SIMILAR TO pattern [ESCAPE e]`: the pattern made a regular expression as PostgreSQL's
/// `similar_to_escape` makes it (`%` any string, `_` any character, the regex operators kept, anchored at both
/// ends, the escape character quoting the next one), then matched.
pub(super) fn similar_to(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(pattern)) = (a.text(0), a.text(1)) else {
        return Ok(Value::Null);
    };
    let escape = match a.len() {
        3 => match a.text(2) {
            None => return Ok(Value::Null),
            Some(e) if e.chars().count() > 1 => {
                return Err(PgError::new(
                    crate::error::INVALID_ESCAPE_SEQUENCE,
                    "invalid escape string",
                ))
            }
            Some(e) => e.chars().next(),
        },
        _ => Some('\\'),
    };
    let mut regex = String::from("^(?:");
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(next) => regex.push_str(&regex::escape(&next.to_string())),
                None => {
                    return Err(PgError::new(
                        crate::error::INVALID_ESCAPE_SEQUENCE,
                        "invalid escape string",
                    ))
                }
            }
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                regex.push('[');
            }
            ']' => {
                in_class = false;
                regex.push(']');
            }
            '%' if !in_class => regex.push_str(".*"),
            '_' if !in_class => regex.push('.'),
            '.' | '^' | '$' if !in_class => {
                regex.push('\\');
                regex.push(c);
            }
            '\\' => regex.push_str("\\\\"),
            other => regex.push(other),
        }
    }
    regex.push_str(")$");
    let (compiled, _) = compile(&regex, "")?;
    Ok(Value::Integer(i64::from(compiled.is_match(&text))))
}

/// `substring(text FROM pattern)`: the first match of the regular expression, or its first parenthesized
/// group when it has one; NULL when nothing matches.
pub(super) fn regexp_substring(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(pattern)) = (a.text(0), a.text(1)) else {
        return Ok(Value::Null);
    };
    let (regex, _) = compile(&pattern, "")?;
    let Some(captures) = regex.captures(&text) else {
        return Ok(Value::Null);
    };
    let found = if captures.len() > 1 {
        captures.get(1)
    } else {
        captures.get(0)
    };
    Ok(found.map_or(Value::Null, |m| Value::Text(m.as_str().to_owned())))
}
