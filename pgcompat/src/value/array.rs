//! Arrays in PostgreSQL's text form (`{1,2,NULL}`, `{"a b",c}`, `{{1,2},{3,4}}`): parsed into elements,
//! each checked by its type's input, and printed back in the canonical form that is also the stored form.
//! A multidimensional array is rectangular (PostgreSQL's rule) and at most [`DIMENSIONS_MAX`] deep; most
//! functions read one-dimensional arrays ([`parse`]), the shape-aware ones read [`Shaped`].

use jiff::tz::TimeZone;
use rusqlite::types::Value;

use crate::error::PgError;
use crate::types::PgType;

/// Most elements accepted in one array.
pub const ELEMENTS_MAX: usize = 1 << 20;
/// Most dimensions of an array (PostgreSQL's `MAXDIM`).
pub const DIMENSIONS_MAX: usize = 6;

/// An array of any number of dimensions: its lengths per dimension (none for an empty array) and its
/// elements in row-major order, each `None` for NULL.
#[derive(Clone, Debug, PartialEq)]
pub struct Shaped {
    /// The length of each dimension, outermost first.
    pub dims: Vec<usize>,
    /// The elements, the last dimension varying fastest.
    pub elements: Vec<Option<String>>,
}

impl Shaped {
    /// A one-dimensional array of these elements.
    pub fn flat(elements: Vec<Option<String>>) -> Shaped {
        let dims = if elements.is_empty() {
            Vec::new()
        } else {
            vec![elements.len()]
        };
        Shaped { dims, elements }
    }

    /// The canonical text (`{{1,2},{3,4}}`).
    pub fn format(&self) -> String {
        if self.dims.is_empty() {
            return "{}".to_owned();
        }
        let mut out = String::new();
        self.write(&mut out, 0, 0);
        out
    }

    /// Writes dimension `level` starting at element `start`; returns the elements written.
    fn write(&self, out: &mut String, level: usize, start: usize) -> usize {
        if level + 1 == self.dims.len() {
            let end = start + self.dims[level];
            out.push_str(&format(&self.elements[start..end]));
            return self.dims[level];
        }
        out.push('{');
        let mut written = 0;
        for i in 0..self.dims[level] {
            if i > 0 {
                out.push(',');
            }
            written += self.write(out, level + 1, start + written);
        }
        out.push('}');
        written
    }
}

/// Parses an array's text of any number of dimensions; `None` if it is not one, is not rectangular, or
/// passes [`DIMENSIONS_MAX`] or [`ELEMENTS_MAX`].
pub fn parse_shaped(text: &str) -> Option<Shaped> {
    let text = text.trim();
    if !text.starts_with("{{") {
        return parse(text).map(Shaped::flat);
    }
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    // Split the outer level at its top-level commas, each part an array one dimension less.
    let mut parts = Vec::new();
    let (mut depth, mut quoted, mut escaped, mut start) = (0usize, false, false, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '{' if !quoted => depth += 1,
            '}' if !quoted => depth = depth.checked_sub(1)?,
            ',' if !quoted && depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut dims: Option<Vec<usize>> = None;
    let mut elements = Vec::new();
    for part in &parts {
        let sub = parse_shaped(part.trim())?;
        if sub.dims.is_empty() {
            return None;
        }
        match &dims {
            None => dims = Some(sub.dims.clone()),
            Some(d) if *d != sub.dims => return None,
            Some(_) => {}
        }
        elements.extend(sub.elements);
        if elements.len() > ELEMENTS_MAX {
            return None;
        }
    }
    let mut all = vec![parts.len()];
    all.extend(dims?);
    if all.len() > DIMENSIONS_MAX {
        return None;
    }
    Some(Shaped { dims: all, elements })
}

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
    let shaped = parse_shaped(text).ok_or_else(|| {
        PgError::new(
            crate::error::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })?;
    let element_type = ty.element();
    let printed = shaped
        .elements
        .iter()
        .map(|e| match e {
            None => Ok(None),
            Some(text) => {
                let stored = super::input(element_type, text, tz)?;
                Ok(super::output(element_type, &stored, tz))
            }
        })
        .collect::<Result<Vec<_>, PgError>>()?;
    Ok(Shaped {
        dims: shaped.dims,
        elements: printed,
    }
    .format())
}

/// The stored values of an array's elements, every dimension flattened in row-major order (for
/// `unnest`, `ANY` and binary output).
pub fn stored_elements(ty: PgType, text: &str, tz: &TimeZone) -> Result<Vec<Value>, PgError> {
    let elements = parse_shaped(text).map(|s| s.elements).ok_or_else(|| {
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
        assert_eq!(
            input(PgType::INT4.array(), "{{1, 2}, {3,NULL}}", &utc).expect("valid"),
            "{{1,2},{3,NULL}}"
        );
        assert!(input(PgType::INT4.array(), "{{1,2},{3}}", &utc).is_err());
        assert!(input(PgType::INT4.array(), "{{1,2},3}", &utc).is_err());
        assert_eq!(parse_shaped(r#"{{"a,}",b},{c,d}}"#).map(|s| s.dims), Some(vec![2, 2]));
    }
}
