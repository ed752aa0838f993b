//! `concat`, `concat_ws` and `format` (`%s`, `%I`, `%L`, positions, widths).

use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED};
use crate::functions::SessionState;

pub(super) fn concat(a: &Args<'_, '_>, state: &SessionState, from: usize, separator: &str) -> Result<Value, PgError> {
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
pub(super) fn format(a: &Args<'_, '_>, state: &SessionState) -> Result<Value, PgError> {
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
