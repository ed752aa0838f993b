//! One-dimensional arrays in PostgreSQL's text form (`{1,2,NULL}`, `{"a b",c}`): parsed into elements,
//! each checked by its type's input, and printed back in the canonical form that is also the stored form.

use jiff::tz::TimeZone;
use rusqlite::types::Value;

use crate::error::PgError;
use crate::types::PgType;

/// Most elements accepted in one array.
pub const ELEMENTS_MAX: usize = 1 << 20;

/// The elements of an array's text form, `None` for NULL; `None` if it is not one (nested arrays are
/// refused by the caller).
pub fn parse(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Some(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let element = if chars.peek() == Some(&'"') {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => s.push(chars.next()?),
                    c => s.push(c),
                }
            }
            Some(s)
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if c == '{' || c == '}' || c == '"' {
                    return None;
                }
                if c == '\\' {
                    chars.next();
                    s.push(chars.next()?);
                    continue;
                }
                s.push(c);
                chars.next();
            }
            let s = s.trim_end().to_owned();
            if s.is_empty() {
                return None;
            }
            if s.eq_ignore_ascii_case("null") {
                None
            } else {
                Some(s)
            }
        };
        out.push(element);
        if out.len() > ELEMENTS_MAX {
            return None;
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            None => return Some(out),
            Some(',') => continue,
            Some(_) => return None,
        }
    }
}

/// Prints elements (already in their output form) as PostgreSQL prints an array.
pub fn format(elements: &[Option<String>]) -> String {
    let mut out = String::from("{");
    for (i, element) in elements.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match element {
            None => out.push_str("NULL"),
            Some(text) => {
                let quote = text.is_empty()
                    || text.eq_ignore_ascii_case("null")
                    || text
                        .chars()
                        .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
                if quote {
                    out.push('"');
                    for c in text.chars() {
                        if c == '"' || c == '\\' {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                    out.push('"');
                } else {
                    out.push_str(text);
                }
            }
        }
    }
    out.push('}');
    out
}

/// An array input of type `ty` (an array type) as its stored text.
pub fn input(ty: PgType, text: &str, tz: &TimeZone) -> Result<String, PgError> {
    assert!(ty.is_array(), "array input of a scalar type {ty}");
    let elements = parse(text).ok_or_else(|| {
        PgError::new(
            crate::error::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })?;
    let element_type = ty.element();
    let printed = elements
        .iter()
        .map(|e| match e {
            None => Ok(None),
            Some(text) => {
                let stored = super::input(element_type, text, tz)?;
                Ok(super::output(element_type, &stored, tz))
            }
        })
        .collect::<Result<Vec<_>, PgError>>()?;
    Ok(format(&printed))
}

/// The stored values of an array's elements (for `unnest`, `ANY` and binary output).
pub fn stored_elements(ty: PgType, text: &str, tz: &TimeZone) -> Result<Vec<Value>, PgError> {
    let elements = parse(text).ok_or_else(|| {
        PgError::new(
            crate::error::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })?;
    elements
        .into_iter()
        .map(|e| match e {
            None => Ok(Value::Null),
            Some(text) => super::input(ty.element(), &text, tz),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Base;

    #[test]
    fn arrays_round_trip_as_postgres_prints_them() {
        let utc = TimeZone::UTC;
        assert_eq!(
            input(PgType::INT4.array(), "{1, 2 ,NULL}", &utc).expect("valid"),
            "{1,2,NULL}"
        );
        assert_eq!(
            input(PgType::TEXT.array(), r#"{"a b",c,"",  "x\"y" ,"null"}"#, &utc).expect("valid"),
            r#"{"a b",c,"","x\"y","null"}"#
        );
        assert_eq!(input(PgType::BOOL.array(), "{true,f}", &utc).expect("valid"), "{t,f}");
        assert_eq!(input(PgType::INT4.array(), "{}", &utc).expect("valid"), "{}");
        assert!(input(PgType::INT4.array(), "{1,x}", &utc).is_err());
        assert!(input(PgType::INT4.array(), "1,2", &utc).is_err());
        assert!(input(PgType::new(Base::Text).array(), "{{a}}", &utc).is_err());
    }
}
