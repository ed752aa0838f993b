//! Editing jsonb: `jsonb_set`, `jsonb_insert`, `jsonb_strip_nulls`, and `jsonb_pretty`.

use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_PARAMETER_VALUE, INVALID_TEXT_REPRESENTATION};
use crate::value::json::Node as J;

/// How `jsonb_set` and `jsonb_insert` place the new value (PostgreSQL's `JB_PATH_*` operations).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum SetOp {
    /// `jsonb_set(…, create => false)`: replace only.
    Replace,
    /// `jsonb_set`: replace, or add at the last step.
    Create,
    /// `jsonb_insert`: before the element named.
    InsertBefore,
    /// `jsonb_insert(…, insert_after => true)`.
    InsertAfter,
}

impl SetOp {
    fn creates(self) -> bool {
        !matches!(self, SetOp::Replace)
    }

    fn inserts(self) -> bool {
        matches!(self, SetOp::InsertBefore | SetOp::InsertAfter)
    }
}

/// PostgreSQL's `setPath` over a container: the path followed, `new` placed by `op` at its last step.
pub(super) fn set_path(node: &mut J, path: &[String], level: usize, new: &J, op: SetOp) -> Result<(), PgError> {
    let last = level + 1 == path.len();
    let Some(step) = path.get(level) else {
        return Ok(());
    };
    match node {
        J::Object(fields) => {
            let found = fields.iter().rposition(|(k, _)| k == step);
            match found {
                Some(at) if last => {
                    if op.inserts() {
                        return Err(PgError::new(INVALID_PARAMETER_VALUE, "cannot replace existing key"));
                    }
                    fields[at].1 = new.clone();
                }
                Some(at) => set_path(&mut fields[at].1, path, level + 1, new, op)?,
                None if last && op.creates() => fields.push((step.clone(), new.clone())),
                None => {}
            }
        }
        J::Array(items) => {
            let index: i64 = step.parse().map_err(|_| {
                PgError::new(
                    INVALID_TEXT_REPRESENTATION,
                    format!("path element at position {} is not an integer: \"{step}\"", level + 1),
                )
            })?;
            let len = items.len() as i64;
            // `None`: before the start (prepend when creating).
            let at = if index < 0 {
                (-index <= len).then_some(len + index)
            } else {
                Some(index.min(len))
            };
            match at {
                Some(at) if at < len => {
                    let at = at as usize;
                    if last {
                        match op {
                            SetOp::Replace | SetOp::Create => items[at] = new.clone(),
                            SetOp::InsertBefore => items.insert(at, new.clone()),
                            SetOp::InsertAfter => items.insert(at + 1, new.clone()),
                        }
                    } else {
                        set_path(&mut items[at], path, level + 1, new, op)?;
                    }
                }
                None if last && op.creates() => items.insert(0, new.clone()),
                Some(_) if last && op.creates() => items.push(new.clone()),
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

/// A `text[]` argument's elements (`None` for a NULL array; NULL elements never match a key).
pub(super) fn path_arg(args: &Args<'_, '_>, i: usize) -> Result<Option<Vec<String>>, PgError> {
    let Some(text) = args.text(i) else {
        return Ok(None);
    };
    let elements = crate::value::array::parse(&text).ok_or_else(|| PgError::invalid_input("text[]", &text))?;
    // A NULL step matches nothing: PostgreSQL leaves the document as it is past it.
    Ok(Some(elements.into_iter().map_while(|e| e).collect()))
}

pub(super) fn set_or_insert(args: &Args<'_, '_>, op: SetOp) -> Result<Value, PgError> {
    let (Some(mut doc), Some(path), Some(new)) = (json_arg(args, 0)?, path_arg(args, 1)?, json_arg(args, 2)?) else {
        return Ok(Value::Null);
    };
    let op = if args.len() > 3 {
        let Some(flag) = args.value(3).into_bool()? else {
            return Ok(Value::Null);
        };
        match op {
            SetOp::Create | SetOp::Replace => {
                if flag {
                    SetOp::Create
                } else {
                    SetOp::Replace
                }
            }
            _ if flag => SetOp::InsertAfter,
            _ => SetOp::InsertBefore,
        }
    } else {
        op
    };
    if !matches!(doc, J::Object(_) | J::Array(_)) {
        return Err(PgError::new(INVALID_PARAMETER_VALUE, "cannot set path in scalar"));
    }
    set_path(&mut doc, &path, 0, &new, op)?;
    jsonb_text(&doc)
}

pub(super) trait IntoBool {
    fn into_bool(self) -> Result<Option<bool>, PgError>;
}

impl IntoBool for Value {
    fn into_bool(self) -> Result<Option<bool>, PgError> {
        Ok(match self {
            Value::Null => None,
            Value::Integer(i) => Some(i != 0),
            Value::Real(f) => Some(f != 0.0),
            other => Some(crate::value::parse_bool(&value_text(&other).unwrap_or_default())?),
        })
    }
}

pub(super) fn strip_nulls(node: &mut J) {
    match node {
        J::Object(fields) => {
            fields.retain(|(_, v)| *v != J::Null);
            fields.iter_mut().for_each(|(_, v)| strip_nulls(v));
        }
        J::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// `jsonb_pretty`: four spaces a level, an empty container's brackets on two lines.
pub(super) fn pretty(out: &mut String, node: &J, level: usize) {
    let indent = |out: &mut String, n: usize| out.extend(std::iter::repeat_n("    ", n));
    match node {
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i > 0 { ",\n" } else { "\n" });
                indent(out, level + 1);
                pretty(out, item, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push(']');
        }
        J::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in sorted_fields(fields).into_iter().enumerate() {
                out.push_str(if i > 0 { ",\n" } else { "\n" });
                indent(out, level + 1);
                write_string(out, key);
                out.push_str(": ");
                pretty(out, value, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push('}');
        }
        scalar => write_jsonb(out, scalar),
    }
}
