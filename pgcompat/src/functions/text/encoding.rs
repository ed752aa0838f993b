//! `encode` and `decode` (`hex`, `base64`, `escape`); the encoding names and numbers
//! (`pg_encoding_to_char`, `pg_char_to_encoding`).

use base64::Engine;
use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;

/// Base64 lines are cut at this many characters, as PostgreSQL's `encode(…, 'base64')` cuts them.
pub(super) const BASE64_LINE_CHARS: usize = 76;

pub(super) fn encode(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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

pub(super) fn decode(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
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

pub(super) fn unescape_bytea(text: &str) -> Result<Vec<u8>, PgError> {
    if text.starts_with("\\x") || text.starts_with("\\X") {
        // `decode(…, 'escape')` reads `\x…` as the characters it is, not as hex.
        let mut out = b"\\".to_vec();
        out.extend(crate::value::parse_bytea(&text[1..])?);
        return Ok(out);
    }
    crate::value::parse_bytea(text)
}

/// The encodings `convert_to`/`convert_from` accept: the database's own (UTF8) and its aliases; others 0A000.
fn check_encoding(name: &str) -> Result<(), PgError> {
    let normalized: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_uppercase();
    if matches!(normalized.as_str(), "UTF8" | "UNICODE" | "SQLASCII") {
        return Ok(());
    }
    Err(PgError::unsupported(format!(
        "converting to or from the encoding {name}"
    )))
}

/// `convert_to(text, encoding)`: the text's bytes in that encoding.
pub(super) fn convert_to(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(text), Some(encoding)) = (a.text(0), a.text(1)) else {
        return Ok(Value::Null);
    };
    check_encoding(&encoding)?;
    Ok(Value::Blob(text.into_bytes()))
}

/// `convert_from(bytea, encoding)`: the bytes read as text in that encoding (22021 for bytes that are not).
pub(super) fn convert_from(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (Some(bytes), Some(encoding)) = (bytes(a, 0), a.text(1)) else {
        return Ok(Value::Null);
    };
    check_encoding(&encoding)?;
    String::from_utf8(bytes).map(Value::Text).map_err(|_| {
        PgError::new(
            crate::error::CHARACTER_NOT_IN_REPERTOIRE,
            "invalid byte sequence for encoding \"UTF8\"",
        )
    })
}

/// PostgreSQL's server and client encodings, indexed by their number (`pg_enc`).
const ENCODING_NAMES: [&str; 42] = [
    "SQL_ASCII",
    "EUC_JP",
    "EUC_CN",
    "EUC_KR",
    "EUC_TW",
    "EUC_JIS_2004",
    "UTF8",
    "MULE_INTERNAL",
    "LATIN1",
    "LATIN2",
    "LATIN3",
    "LATIN4",
    "LATIN5",
    "LATIN6",
    "LATIN7",
    "LATIN8",
    "LATIN9",
    "LATIN10",
    "WIN1256",
    "WIN1258",
    "WIN866",
    "WIN874",
    "KOI8R",
    "WIN1251",
    "WIN1252",
    "ISO_8859_5",
    "ISO_8859_6",
    "ISO_8859_7",
    "ISO_8859_8",
    "WIN1250",
    "WIN1253",
    "WIN1254",
    "WIN1255",
    "WIN1257",
    "KOI8U",
    "SJIS",
    "BIG5",
    "GBK",
    "UHC",
    "GB18030",
    "JOHAB",
    "SHIFT_JIS_2004",
];

/// `pg_encoding_to_char(int)`: the encoding's name, empty for a number that names none.
pub(super) fn encoding_to_char(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    Ok(match a.int(0)? {
        None => Value::Null,
        Some(number) => Value::Text(
            usize::try_from(number)
                .ok()
                .and_then(|i| ENCODING_NAMES.get(i))
                .map_or_else(String::new, |name| (*name).to_owned()),
        ),
    })
}

/// `pg_char_to_encoding(name)`: the encoding's number, -1 for a name that is none; compared as
/// PostgreSQL compares them (letters and digits only, any case; `unicode` is UTF8).
pub(super) fn char_to_encoding(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let Some(name) = a.text(0) else {
        return Ok(Value::Null);
    };
    let clean = |n: &str| -> String {
        n.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let wanted = match clean(&name).as_str() {
        "unicode" => "utf8".to_owned(),
        other => other.to_owned(),
    };
    let number = ENCODING_NAMES
        .iter()
        .position(|candidate| clean(candidate) == wanted)
        .map_or(-1, |i| i as i64);
    Ok(Value::Integer(number))
}
