//! The core string functions: case-sensitive `LIKE` (SQLite's `like` replaced), `ILIKE`, the regular
//! expression operators, and the string functions whose SQLite namesakes differ from PostgreSQL's.

use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use super::{flags_pure, raise, ERROR_PREFIX};
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::value::{self};

/// `LIKE` as PostgreSQL matches: case-sensitive, `%` and `_`, backslash the default escape. Greedy with
/// backtracking to the last `%` only, so any pattern costs at most O(text × pattern) (no exponential
/// blow-up on hostile patterns: a SQL function cannot be interrupted).
pub fn like(text: &str, pattern: &str, escape: Option<char>) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Token {
        Literal(char),
        One,
        Many,
    }
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(literal) => tokens.push(Token::Literal(literal)),
                // A trailing escape matches nothing (PostgreSQL raises; matching nothing is the safe answer).
                None => return false,
            }
        } else if c == '%' {
            if tokens.last() != Some(&Token::Many) {
                tokens.push(Token::Many);
            }
        } else if c == '_' {
            tokens.push(Token::One);
        } else {
            tokens.push(Token::Literal(c));
        }
    }
    let text: Vec<char> = text.chars().collect();
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Token::Many) => {
                star = Some((p, t));
                p += 1;
            }
            Some(Token::One) => {
                t += 1;
                p += 1;
            }
            Some(Token::Literal(c)) if *c == text[t] => {
                t += 1;
                p += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(|token| *token == Token::Many)
}

/// The escape character of `LIKE … ESCAPE e`: none for an empty string, 22025 for more than one character.
fn escape_of(escape: Option<&str>) -> rusqlite::Result<Option<char>> {
    let Some(escape) = escape else {
        return Ok(None);
    };
    let mut chars = escape.chars();
    match (chars.next(), chars.next()) {
        (first, None) => Ok(first),
        _ => Err(raise(PgError::new(
            crate::error::INVALID_ESCAPE_SEQUENCE,
            "invalid escape string",
        ))),
    }
}

pub(super) fn install_strings(conn: &Connection) -> rusqlite::Result<()> {
    // bytea || bytea: the bytes one after the other (SQLite's `||` would make text of them).
    conn.create_scalar_function("pg_bytea_concat", 2, flags_pure(), |ctx| {
        let bytes = |i: usize| -> rusqlite::Result<Option<Vec<u8>>> {
            Ok(match ctx.get_raw(i) {
                rusqlite::types::ValueRef::Null => None,
                rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => Some(b.to_vec()),
                rusqlite::types::ValueRef::Integer(n) => Some(n.to_string().into_bytes()),
                rusqlite::types::ValueRef::Real(f) => Some(crate::value::format_float8(f).into_bytes()),
            })
        };
        let (Some(mut a), Some(b)) = (bytes(0)?, bytes(1)?) else {
            return Ok(None);
        };
        if a.len() + b.len() > crate::VALUE_BYTES_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "result exceeds the maximum value size",
            )));
        }
        a.extend_from_slice(&b);
        Ok(Some(a))
    })?;
    // SQLite calls like(pattern, text[, escape]) for the LIKE operator.
    for n in [2, 3] {
        conn.create_scalar_function("like", n, flags_pure(), move |ctx| {
            let (Some(pattern), Some(text)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
                return Ok(None);
            };
            let escape = if n == 3 {
                escape_of(ctx.get::<Option<String>>(2)?.as_deref())?
            } else {
                Some('\\')
            };
            Ok(Some(like(&text, &pattern, escape)))
        })?;
        conn.create_scalar_function("pg_ilike", n, flags_pure(), move |ctx| {
            let (Some(text), Some(pattern)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
                return Ok(None);
            };
            let escape = if n == 3 {
                escape_of(ctx.get::<Option<String>>(2)?.as_deref())?
            } else {
                Some('\\')
            };
            Ok(Some(like(&text.to_lowercase(), &pattern.to_lowercase(), escape)))
        })?;
    }
    conn.create_scalar_function("pg_regex", 3, flags_pure(), |ctx| {
        let (Some(text), Some(pattern)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let flags: String = ctx.get(2)?;
        let regex = ctx.get_or_create_aux(
            1,
            |_| -> Result<regex::Regex, Box<dyn std::error::Error + Send + Sync>> {
                regex::RegexBuilder::new(&pattern)
                    .case_insensitive(flags.contains('i'))
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| {
                        format!(
                            "{ERROR_PREFIX}{}:invalid regular expression: {e}",
                            crate::error::INVALID_REGULAR_EXPRESSION
                        )
                        .into()
                    })
            },
        )?;
        Ok(Some(regex.is_match(&text)))
    })?;
    conn.create_scalar_function("left", 2, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let n: i64 = ctx.get(1)?;
        let count = text.chars().count() as i64;
        let take = if n >= 0 { n.min(count) } else { (count + n).max(0) };
        Ok(Some(text.chars().take(take as usize).collect::<String>()))
    })?;
    conn.create_scalar_function("right", 2, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let n: i64 = ctx.get(1)?;
        let count = text.chars().count() as i64;
        let take = if n >= 0 { n.min(count) } else { (count + n).max(0) };
        Ok(Some(text.chars().skip((count - take) as usize).collect::<String>()))
    })?;
    conn.create_scalar_function("repeat", 2, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let n: i64 = ctx.get(1)?;
        let total = text.len().saturating_mul(n.max(0) as usize);
        if total > crate::VALUE_BYTES_MAX {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                "requested length too large",
            )));
        }
        Ok(Some(text.repeat(n.max(0) as usize)))
    })?;
    // SQLite's lower/upper fold ASCII only; PostgreSQL's (in a UTF-8 locale) fold every letter.
    conn.create_scalar_function("lower", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| map_chars(&t, char::to_lowercase)))
    })?;
    conn.create_scalar_function("upper", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| map_chars(&t, char::to_uppercase)))
    })?;
    for n in [2, 3] {
        // PostgreSQL's substr: positions before 1 count (substr('hello', -1, 3) is 'h'); bytes for bytea.
        conn.create_scalar_function("substr", n, flags_pure(), move |ctx| {
            let start = match ctx.get::<Option<i64>>(1)? {
                Some(s) => s,
                None => return Ok(Value::Null),
            };
            let count = if n == 3 {
                match ctx.get::<Option<i64>>(2)? {
                    Some(c) if c < 0 => {
                        return Err(raise(PgError::new(
                            crate::error::SUBSTRING_ERROR,
                            "negative substring length not allowed",
                        )))
                    }
                    Some(c) => Some(c),
                    None => return Ok(Value::Null),
                }
            } else {
                None
            };
            let end = count.map(|c| start.saturating_add(c));
            let from = start.max(1) - 1;
            let window = |len: usize| -> (usize, usize) {
                let from = usize::try_from(from).unwrap_or(usize::MAX).min(len);
                let to = end
                    .map_or(len, |e| usize::try_from((e - 1).max(0)).unwrap_or(0).min(len))
                    .max(from);
                (from, to)
            };
            Ok(match ctx.get_raw(0) {
                ValueRef::Null => Value::Null,
                ValueRef::Blob(b) => {
                    let (from, to) = window(b.len());
                    Value::Blob(b[from..to].to_vec())
                }
                other => {
                    let text = match other {
                        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                        ValueRef::Integer(i) => i.to_string(),
                        ValueRef::Real(f) => value::format_float8(f),
                        _ => String::new(),
                    };
                    let chars: Vec<char> = text.chars().collect();
                    let (from, to) = window(chars.len());
                    Value::Text(chars[from..to].iter().collect())
                }
            })
        })?;
    }
    conn.create_scalar_function("reverse", 1, flags_pure(), |ctx| {
        Ok(ctx
            .get::<Option<String>>(0)?
            .map(|t| t.chars().rev().collect::<String>()))
    })?;
    conn.create_scalar_function("starts_with", 2, flags_pure(), |ctx| {
        let (Some(text), Some(prefix)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        Ok(Some(text.starts_with(&prefix)))
    })?;
    conn.create_scalar_function("initcap", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| {
            let mut out = String::with_capacity(t.len());
            let mut start = true;
            for c in t.chars() {
                if c.is_alphanumeric() {
                    if start {
                        out.extend(c.to_uppercase());
                    } else {
                        out.extend(c.to_lowercase());
                    }
                    start = false;
                } else {
                    out.push(c);
                    start = true;
                }
            }
            out
        }))
    })?;
    for (name, left) in [("lpad", true), ("rpad", false)] {
        for n in [2, 3] {
            conn.create_scalar_function(name, n, flags_pure(), move |ctx| {
                let Some(text) = ctx.get::<Option<String>>(0)? else {
                    return Ok(None);
                };
                let width = usize::try_from(ctx.get::<i64>(1)?.max(0)).unwrap_or(0);
                if width > crate::VALUE_BYTES_MAX {
                    return Err(raise(PgError::new(
                        crate::error::PROGRAM_LIMIT_EXCEEDED,
                        "requested length too large",
                    )));
                }
                let fill: Vec<char> = if n == 3 {
                    ctx.get::<String>(2)?.chars().collect()
                } else {
                    vec![' ']
                };
                let chars: Vec<char> = text.chars().collect();
                if chars.len() >= width || fill.is_empty() {
                    return Ok(Some(chars.into_iter().take(width).collect::<String>()));
                }
                let pad: String = fill.iter().cycle().take(width - chars.len()).collect();
                Ok(Some(if left {
                    format!("{pad}{text}")
                } else {
                    format!("{text}{pad}")
                }))
            })?;
        }
    }
    conn.create_scalar_function("split_part", 3, flags_pure(), |ctx| {
        let (Some(text), Some(delimiter)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?) else {
            return Ok(None);
        };
        let n: i64 = ctx.get(2)?;
        if n == 0 {
            return Err(raise(PgError::new(
                INVALID_PARAMETER_VALUE,
                "field position must not be zero",
            )));
        }
        let parts: Vec<&str> = if delimiter.is_empty() {
            vec![text.as_str()]
        } else {
            text.split(delimiter.as_str()).collect()
        };
        let index = if n > 0 { n - 1 } else { parts.len() as i64 + n };
        Ok(Some(
            usize::try_from(index)
                .ok()
                .and_then(|i| parts.get(i))
                .map_or("", |s| s)
                .to_owned(),
        ))
    })?;
    conn.create_scalar_function("btrim", -1, flags_pure(), |ctx| {
        let Some(text) = ctx.get::<Option<String>>(0)? else {
            return Ok(None);
        };
        let chars: Vec<char> = if ctx.len() > 1 {
            ctx.get::<String>(1)?.chars().collect()
        } else {
            vec![' ']
        };
        Ok(Some(text.trim_matches(|c| chars.contains(&c)).to_owned()))
    })?;
    conn.create_scalar_function("to_hex", 1, flags_pure(), |ctx| {
        Ok(ctx.get::<Option<i64>>(0)?.map(|v| format!("{v:x}")))
    })?;
    conn.create_scalar_function("chr", 1, flags_pure(), |ctx| {
        let code: i64 = ctx.get(0)?;
        u32::try_from(code)
            .ok()
            .filter(|c| *c != 0)
            .and_then(char::from_u32)
            .map(String::from)
            .ok_or_else(|| {
                raise(PgError::new(
                    crate::error::PROGRAM_LIMIT_EXCEEDED,
                    format!("requested character too large for encoding: {code}"),
                ))
            })
    })?;
    Ok(())
}

/// Case mapping as PostgreSQL does it under a libc UTF-8 locale (`towupper`/`towlower`): character by
/// character, a character whose mapping is more than one character (`ß` → `SS`) kept as it is.
pub(super) fn map_chars<I: Iterator<Item = char>>(text: &str, map: impl Fn(char) -> I) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let mut mapped = map(c);
        match (mapped.next(), mapped.next()) {
            (Some(one), None) => out.push(one),
            _ => out.push(c),
        }
    }
    out
}
