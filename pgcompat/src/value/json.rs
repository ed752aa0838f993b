//! JSON input checked and `jsonb`'s normalized text: keys sorted (shorter first, then bytewise), the last of
//! duplicate keys kept, `", "` and `": "` between items, numbers as written.

use crate::error::PgError;

/// Deepest nesting accepted, so hostile input cannot exhaust the stack.
pub const DEPTH_MAX: usize = 512;

/// A parsed JSON value, numbers kept as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number, its text as written.
    Number(String),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<Node>),
    /// An object's fields in the order written.
    Object(Vec<(String, Node)>),
    /// A `json` value embedded as written (in `json` results built from `json` inputs only).
    Raw(String),
}

/// A JSON reader over bytes: `at` is where it stands (for callers that want the text of each value).
pub(crate) struct Parser<'a> {
    /// The JSON text.
    pub(crate) bytes: &'a [u8],
    /// The position of the next byte to read.
    pub(crate) at: usize,
}

impl Parser<'_> {
    /// Steps over whitespace.
    pub(crate) fn skip_ws(&mut self) {
        while self.at < self.bytes.len() && matches!(self.bytes[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    /// Reads one value at nesting `depth`; `None` if malformed or deeper than [`DEPTH_MAX`].
    pub(crate) fn value(&mut self, depth: usize) -> Option<Node> {
        if depth > DEPTH_MAX {
            return None;
        }
        self.skip_ws();
        let c = *self.bytes.get(self.at)?;
        match c {
            b'n' => self.word("null").map(|()| Node::Null),
            b't' => self.word("true").map(|()| Node::Bool(true)),
            b'f' => self.word("false").map(|()| Node::Bool(false)),
            b'"' => self.string().map(Node::String),
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Some(Node::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.skip_ws();
                    match self.bytes.get(self.at)? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Some(Node::Array(items));
                        }
                        _ => return None,
                    }
                }
            }
            b'{' => {
                self.at += 1;
                let mut fields: Vec<(String, Node)> = Vec::new();
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Some(Node::Object(fields));
                }
                loop {
                    self.skip_ws();
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return None;
                    }
                    let key = self.string()?;
                    self.skip_ws();
                    if self.bytes.get(self.at) != Some(&b':') {
                        return None;
                    }
                    self.at += 1;
                    let value = self.value(depth + 1)?;
                    fields.push((key, value));
                    self.skip_ws();
                    match self.bytes.get(self.at)? {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            return Some(Node::Object(fields));
                        }
                        _ => return None,
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                while self.at < self.bytes.len()
                    && matches!(self.bytes[self.at], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    self.at += 1;
                }
                let text = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
                // Checked with serde_json's number grammar.
                serde_json::from_str::<serde_json::Number>(text).ok()?;
                Some(Node::Number(text.to_owned()))
            }
            _ => None,
        }
    }

    fn word(&mut self, word: &str) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word.as_bytes()).then(|| self.at = end)
    }

    /// A string token, unescaped.
    pub(crate) fn string(&mut self) -> Option<String> {
        let start = self.at;
        self.at += 1;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    break;
                }
                b'\\' => self.at += 2,
                c if c < 0x20 => return None,
                _ => self.at += 1,
            }
        }
        let raw = std::str::from_utf8(self.bytes.get(start..self.at)?).ok()?;
        serde_json::from_str::<String>(raw).ok()
    }
}

/// Parses JSON text (the whole of it); `None` if it is not JSON or nests deeper than [`DEPTH_MAX`].
pub(crate) fn parse_node(text: &str) -> Option<Node> {
    parse(text)
}

fn parse(text: &str) -> Option<Node> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    let node = parser.value(0)?;
    parser.skip_ws();
    (parser.at == parser.bytes.len()).then_some(node)
}

/// `json` input: the text kept as written once checked.
pub fn check_json(text: &str) -> Result<(), PgError> {
    parse(text)
        .map(|_| ())
        .ok_or_else(|| PgError::invalid_input("json", text))
}

/// `jsonb` input: the normalized text.
pub fn normalize_jsonb(text: &str) -> Result<String, PgError> {
    let node = parse(text).ok_or_else(|| PgError::invalid_input("json", text))?;
    let mut out = String::with_capacity(text.len());
    write_node(&mut out, node);
    Ok(out)
}

/// A JSON number as jsonb keeps it: a numeric, printed as numeric prints (`1e3` is `1000`, `-0` is `0`, `1.000`
/// keeps its scale).
pub(crate) fn jsonb_number(text: &str) -> String {
    super::numeric::Decimal::parse(text).map_or_else(|| text.to_owned(), |d| d.to_text())
}

fn write_string(out: &mut String, s: &str) {
    out.push_str(&serde_json::to_string(s).expect("a string serializes"));
}

fn write_node(out: &mut String, node: Node) {
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Node::Number(n) => out.push_str(&jsonb_number(&n)),
        Node::Raw(n) => out.push_str(&n),
        Node::String(s) => write_string(out, &s),
        Node::Array(items) => {
            out.push('[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_node(out, item);
            }
            out.push(']');
        }
        Node::Object(fields) => {
            // The last of duplicate keys wins; keys sorted shorter first, then bytewise.
            let mut kept: Vec<(String, Node)> = Vec::with_capacity(fields.len());
            for (key, value) in fields {
                match kept.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => kept.push((key, value)),
                }
            }
            kept.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())));
            out.push('{');
            for (i, (key, value)) in kept.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, &key);
                out.push_str(": ");
                write_node(out, value);
            }
            out.push('}');
        }
    }
}

fn to_text(node: Node) -> String {
    let mut out = String::new();
    write_node(&mut out, node);
    out
}

/// What `#>` / `#>>` give: the element at `path` (object keys, array indexes; negative indexes count
/// from the end), as normalized jsonb text (`as_text`: a string unquoted, `null` as SQL NULL).
pub fn get_path(text: &str, path: &[String], as_text: bool) -> Result<Option<String>, PgError> {
    let mut node = parse(text).ok_or_else(|| PgError::invalid_input("json", text))?;
    for step in path {
        node = match node {
            Node::Object(fields) => match fields.into_iter().rev().find(|(k, _)| k == step) {
                Some((_, value)) => value,
                None => return Ok(None),
            },
            Node::Array(mut items) => {
                let Ok(index) = step.parse::<i64>() else {
                    return Ok(None);
                };
                let len = items.len() as i64;
                let at = if index < 0 { len + index } else { index };
                if at < 0 || at >= len {
                    return Ok(None);
                }
                items.swap_remove(at as usize)
            }
            _ => return Ok(None),
        };
    }
    Ok(match (node, as_text) {
        (Node::Null, true) => None,
        (Node::String(s), true) => Some(s),
        (other, _) => Some(to_text(other)),
    })
}

/// What `#-` gives: the jsonb with the element at `path` removed (unchanged if there is none).
pub fn delete_path(text: &str, path: &[String]) -> Result<String, PgError> {
    fn remove(node: &mut Node, path: &[String]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        match node {
            Node::Object(fields) => {
                if rest.is_empty() {
                    fields.retain(|(k, _)| k != first);
                } else if let Some((_, child)) = fields.iter_mut().rev().find(|(k, _)| k == first) {
                    remove(child, rest);
                }
            }
            Node::Array(items) => {
                let Ok(index) = first.parse::<i64>() else {
                    return;
                };
                let len = items.len() as i64;
                let at = if index < 0 { len + index } else { index };
                if at < 0 || at >= len {
                    return;
                }
                if rest.is_empty() {
                    items.remove(at as usize);
                } else {
                    remove(&mut items[at as usize], rest);
                }
            }
            _ => {}
        }
    }
    let mut node = parse(text).ok_or_else(|| PgError::invalid_input("json", text))?;
    remove(&mut node, path);
    Ok(to_text(node))
}

/// `a || b` on jsonb: objects merged (the right's keys win), arrays concatenated, a scalar or object joined
/// with an array as one more element.
pub fn concat(a: &str, b: &str) -> Result<String, PgError> {
    let left = parse(a).ok_or_else(|| PgError::invalid_input("json", a))?;
    let right = parse(b).ok_or_else(|| PgError::invalid_input("json", b))?;
    let node = match (left, right) {
        (Node::Object(mut x), Node::Object(y)) => {
            x.extend(y);
            Node::Object(x)
        }
        (Node::Array(mut x), Node::Array(y)) => {
            x.extend(y);
            Node::Array(x)
        }
        (Node::Array(mut x), other) => {
            x.push(other);
            Node::Array(x)
        }
        (other, Node::Array(mut y)) => {
            y.insert(0, other);
            Node::Array(y)
        }
        (x, y) => Node::Array(vec![x, y]),
    };
    Ok(to_text(node))
}

/// `j - key` (object key, or string elements of an array), `j - index` (array element), `j - keys[]`.
pub fn delete(text: &str, keys: &[String], index: Option<i64>) -> Result<String, PgError> {
    let node = parse(text).ok_or_else(|| PgError::invalid_input("json", text))?;
    let node = match (node, index) {
        (Node::Array(mut items), Some(i)) => {
            let len = items.len() as i64;
            let at = if i < 0 { len + i } else { i };
            if (0..len).contains(&at) {
                items.remove(at as usize);
            }
            Node::Array(items)
        }
        (Node::Object(fields), None) => Node::Object(fields.into_iter().filter(|(k, _)| !keys.contains(k)).collect()),
        (Node::Array(items), None) => Node::Array(
            items
                .into_iter()
                .filter(|i| !matches!(i, Node::String(s) if keys.contains(s)))
                .collect(),
        ),
        (other, _) => other,
    };
    Ok(to_text(node))
}

/// Whether a jsonb object has `key` among its keys, or an array has it as a string element (`?`).
pub fn has_key(text: &str, key: &str) -> Result<bool, PgError> {
    Ok(match parse(text).ok_or_else(|| PgError::invalid_input("json", text))? {
        Node::Object(fields) => fields.iter().any(|(k, _)| k == key),
        Node::Array(items) => items.iter().any(|i| matches!(i, Node::String(s) if s == key)),
        Node::String(s) => s == key,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonb_normalizes_as_postgres() {
        assert_eq!(
            normalize_jsonb(r#"{"b":1,"a":[1,2,{"zz":null,"y":true}],"b":2.50}"#).expect("valid"),
            r#"{"a": [1, 2, {"y": true, "zz": null}], "b": 2.50}"#
        );
        assert_eq!(normalize_jsonb(" \"x\\u0041\" ").expect("valid"), "\"xA\"");
        assert!(normalize_jsonb("{a:1}").is_err());
        assert!(normalize_jsonb("[1,]").is_err());
        assert!(normalize_jsonb(&"[".repeat(10_000)).is_err());
        assert!(check_json("{\"a\": 01}").is_err());
    }

    #[test]
    fn paths_navigate_as_postgres() {
        let doc = r#"{"a": {"b": [10, 20.50, "x"]}, "n": null}"#;
        let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            get_path(doc, &path(&["a", "b", "1"]), false).expect("valid"),
            Some("20.50".to_owned())
        );
        assert_eq!(
            get_path(doc, &path(&["a", "b", "-1"]), true).expect("valid"),
            Some("x".to_owned())
        );
        assert_eq!(
            get_path(doc, &path(&["a", "b"]), true).expect("valid"),
            Some("[10, 20.50, \"x\"]".to_owned())
        );
        assert_eq!(get_path(doc, &path(&["n"]), true).expect("valid"), None);
        assert_eq!(get_path(doc, &path(&["zz"]), false).expect("valid"), None);
        assert_eq!(
            delete_path(doc, &path(&["a", "b", "0"])).expect("valid"),
            r#"{"a": {"b": [20.50, "x"]}, "n": null}"#
        );
        assert!(has_key(doc, "n").expect("valid"));
        assert!(!has_key(doc, "b").expect("valid"));
    }
}
