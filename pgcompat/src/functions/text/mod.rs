//! String functions as PostgreSQL has them: lengths, `translate`, quoting (`quote_ident` quotes only when
//! PostgreSQL would), `md5`, regular expressions with PostgreSQL's replacement syntax (`\1`, `\&`) and flags,
//! splitting to and joining from arrays, `encode`/`decode`, `concat`, `format` and `to_hex`.

mod crypto;
mod encoding;
mod formatting;
mod patterns;
mod quote;

use std::sync::Arc;

use rusqlite::types::Value;
use rusqlite::Connection;

use super::{check_size, define, value_text, Args, Purity};
use crate::error::{PgError, PROGRAM_LIMIT_EXCEEDED};
use crate::functions::SessionState;
use crate::types::{Base, PgType};
use crate::value::array;
use encoding::{char_to_encoding, convert_from, convert_to, decode, encode, encoding_to_char};
use formatting::{concat, format};
use patterns::{regexp_match, regexp_matches_json, regexp_replace, regexp_split, regexp_substring, similar_to};
pub(super) use quote::{quote_ident, quote_literal};

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
    define(conn, state, "pg_encoding_to_char", 1, Purity::Pure, encoding_to_char)?;
    define(conn, state, "pg_char_to_encoding", 1, Purity::Pure, char_to_encoding)?;
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
    // sha224(bytea) … sha512(bytea): the digest's bytes.
    define(conn, state, "sha224", 1, Purity::Pure, |a, _| {
        Ok(digest::<sha2::Sha224>(a))
    })?;
    define(conn, state, "sha256", 1, Purity::Pure, |a, _| {
        Ok(digest::<sha2::Sha256>(a))
    })?;
    define(conn, state, "sha384", 1, Purity::Pure, |a, _| {
        Ok(digest::<sha2::Sha384>(a))
    })?;
    define(conn, state, "sha512", 1, Purity::Pure, |a, _| {
        Ok(digest::<sha2::Sha512>(a))
    })?;
    crypto::install(conn, state)?;
    for n in [3, 4] {
        define(conn, state, "regexp_replace", n, Purity::Pure, regexp_replace)?;
    }
    for n in [2, 3] {
        define(conn, state, "regexp_match", n, Purity::Pure, regexp_match)?;
        define(
            conn,
            state,
            "pg_regexp_matches_json",
            n,
            Purity::Pure,
            regexp_matches_json,
        )?;
        define(conn, state, "pg_similar", n, Purity::Pure, similar_to)?;
        define(conn, state, "pg_regexp_substring", 2, Purity::Pure, regexp_substring)?;
        define(conn, state, "regexp_split_to_array", n, Purity::Pure, regexp_split)?;
        define(conn, state, "string_to_array", n, Purity::Pure, string_to_array)?;
        define(conn, state, "array_to_string", n, Purity::Pure, array_to_string)?;
    }
    define(conn, state, "encode", 2, Purity::Pure, encode)?;
    define(conn, state, "convert_to", 2, Purity::Pure, convert_to)?;
    define(conn, state, "convert_from", 2, Purity::Pure, convert_from)?;
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
        "pg_similar" => PgType::BOOL,
        "pg_regexp_substring" | "convert_from" => PgType::TEXT,
        "convert_to" | "sha224" | "sha256" | "sha384" | "sha512" | "digest" | "hmac" | "gen_random_bytes" => {
            PgType::BYTEA
        }
        "decode" => PgType::BYTEA,
        _ => return None,
    })
}

/// Argument `i` as bytes (a text's UTF-8, a bytea's bytes).
/// The SHA-2 digest `D` of the first argument's bytes, as a bytea (NULL for NULL).
fn digest<D: sha2::Digest>(a: &Args<'_, '_>) -> Value {
    bytes(a, 0).map_or(Value::Null, |b| Value::Blob(D::digest(&b).to_vec()))
}

pub(super) fn bytes(a: &Args<'_, '_>, i: usize) -> Option<Vec<u8>> {
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
