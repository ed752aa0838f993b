//! Array functions on one-dimensional arrays (the only ones the layer stores, see `value::array`), as
//! PostgreSQL 15 gives them: `array_length`, `cardinality`, `array_upper`, `array_lower`, `array_ndims`,
//! `array_dims`, `array_append`, `array_prepend`, `array_cat`, `array_remove`, `array_replace`,
//! `array_position`, `array_positions`, `array_fill`.
//!
//! An array travels as its canonical text (`{1,2,NULL}`); an element is compared and printed in the
//! canonical text of the element type, which the typed call says (else the other argument's, else text).
//! A dimension other than 1 has no bounds (NULL), as for any one-dimensional array in PostgreSQL.

use std::sync::Arc;

use rusqlite::types::Value;
use rusqlite::Connection;

use super::{check_size, define, Args, Purity};
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;
use crate::types::PgType;
use crate::value::{self, array};

/// An array argument's elements (`None` for SQL NULL).
fn elements(args: &Args<'_, '_>, i: usize) -> Result<Option<Vec<Option<String>>>, PgError> {
    let Some(text) = args.text(i) else {
        return Ok(None);
    };
    array::parse(&text).map(Some).ok_or_else(|| {
        PgError::new(
            crate::error::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })
}

/// The element type of the call: the array argument's, else the element argument's, else text.
fn element_type(args: &Args<'_, '_>, array_at: usize, element_at: Option<usize>) -> PgType {
    args.ty(array_at)
        .filter(|t| t.is_array())
        .map(PgType::element)
        .or_else(|| element_at.and_then(|i| args.ty(i)).filter(|t| !t.is_array()))
        .unwrap_or(PgType::TEXT)
}

/// Argument `i` as an element of type `ty`, in canonical text (`None` for NULL).
fn element(args: &Args<'_, '_>, i: usize, ty: PgType, state: &SessionState) -> Result<Option<String>, PgError> {
    let tz = state.time_zone();
    let stored = value::coerce(ty, args.value(i), &tz)?;
    Ok(value::output(ty, &stored, &tz))
}

fn array_value(items: &[Option<String>]) -> Result<Value, PgError> {
    let text = array::format(items);
    check_size(text.len())?;
    Ok(Value::Text(text))
}

/// An array argument of any number of dimensions (`None` for SQL NULL).
fn shaped(args: &Args<'_, '_>, i: usize) -> Result<Option<array::Shaped>, PgError> {
    let Some(text) = args.text(i) else {
        return Ok(None);
    };
    array::parse_shaped(&text).map(Some).ok_or_else(|| {
        PgError::new(
            crate::error::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })
}

/// The bound functions' common shape: the length of dimension `args[1]` given to `f`; NULL for a NULL
/// array or a dimension it does not have.
fn bound(args: &Args<'_, '_>, f: fn(usize) -> i64) -> Result<Value, PgError> {
    let (Some(array), Some(dimension)) = (shaped(args, 0)?, args.int(1)?) else {
        return Ok(Value::Null);
    };
    let length = usize::try_from(dimension)
        .ok()
        .and_then(|d| d.checked_sub(1))
        .and_then(|d| array.dims.get(d));
    Ok(length.map_or(Value::Null, |n| Value::Integer(f(*n))))
}

fn length(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    bound(a, |n| n as i64)
}

fn upper(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    bound(a, |n| n as i64)
}

fn lower(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    bound(a, |_| 1)
}

fn cardinality(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    Ok(shaped(a, 0)?.map_or(Value::Null, |array| Value::Integer(array.elements.len() as i64)))
}

fn ndims(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    Ok(match shaped(a, 0)? {
        Some(array) if !array.dims.is_empty() => Value::Integer(array.dims.len() as i64),
        _ => Value::Null,
    })
}

fn dims(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    Ok(match shaped(a, 0)? {
        Some(array) if !array.dims.is_empty() => Value::Text(array.dims.iter().map(|n| format!("[1:{n}]")).collect()),
        _ => Value::Null,
    })
}

fn append(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    let ty = element_type(a, 0, Some(1));
    let mut items = elements(a, 0)?.unwrap_or_default();
    items.push(element(a, 1, ty, s)?);
    array_value(&items)
}

fn prepend(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    let ty = element_type(a, 1, Some(0));
    let mut items = vec![element(a, 0, ty, s)?];
    items.extend(elements(a, 1)?.unwrap_or_default());
    array_value(&items)
}

/// `array_cat`: two arrays of one shape but the first dimension end to end; an array of one dimension less
/// appended (or prepended) as one more row; 2202E for shapes that do not fit.
fn cat(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let (x, y) = match (shaped(a, 0)?, shaped(a, 1)?) {
        (None, None) => return Ok(Value::Null),
        (Some(x), None) => return Ok(Value::Text(x.format())),
        (None, Some(y)) => return Ok(Value::Text(y.format())),
        (Some(x), Some(y)) => (x, y),
    };
    if x.dims.is_empty() {
        return Ok(Value::Text(y.format()));
    }
    if y.dims.is_empty() {
        return Ok(Value::Text(x.format()));
    }
    let mismatch = || {
        PgError::new(
            crate::error::ARRAY_SUBSCRIPT_ERROR,
            "cannot concatenate incompatible arrays",
        )
    };
    let dims = if x.dims.len() == y.dims.len() {
        if x.dims[1..] != y.dims[1..] {
            return Err(mismatch());
        }
        let mut dims = x.dims.clone();
        dims[0] += y.dims[0];
        dims
    } else if x.dims.len() == y.dims.len() + 1 && x.dims[1..] == y.dims[..] {
        let mut dims = x.dims.clone();
        dims[0] += 1;
        dims
    } else if y.dims.len() == x.dims.len() + 1 && y.dims[1..] == x.dims[..] {
        let mut dims = y.dims.clone();
        dims[0] += 1;
        dims
    } else {
        return Err(mismatch());
    };
    let mut elements = x.elements;
    elements.extend(y.elements);
    let text = array::Shaped { dims, elements }.format();
    check_size(text.len())?;
    Ok(Value::Text(text))
}

fn remove(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    let ty = element_type(a, 0, Some(1));
    let Some(items) = elements(a, 0)? else {
        return Ok(Value::Null);
    };
    let gone = element(a, 1, ty, s)?;
    let kept: Vec<Option<String>> = items.into_iter().filter(|e| *e != gone).collect();
    array_value(&kept)
}

fn replace(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    let ty = element_type(a, 0, Some(1));
    let Some(items) = elements(a, 0)? else {
        return Ok(Value::Null);
    };
    let (old, new) = (element(a, 1, ty, s)?, element(a, 2, ty, s)?);
    let replaced: Vec<Option<String>> = items
        .into_iter()
        .map(|e| if e == old { new.clone() } else { e })
        .collect();
    array_value(&replaced)
}

/// The 1-based positions of `args[1]` in the array (NULL is found by NULL, as `IS NOT DISTINCT FROM`).
fn positions_of(a: &Args<'_, '_>, s: &SessionState, from: usize) -> Result<Option<Vec<i64>>, PgError> {
    let ty = element_type(a, 0, Some(1));
    let Some(items) = elements(a, 0)? else {
        return Ok(None);
    };
    let wanted = element(a, 1, ty, s)?;
    Ok(Some(
        items
            .iter()
            .enumerate()
            .skip(from)
            .filter(|(_, e)| **e == wanted)
            .map(|(i, _)| i as i64 + 1)
            .collect(),
    ))
}

fn position(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    let start = match a.len() {
        3 => match a.int(2)? {
            Some(start) => usize::try_from(start.max(1) - 1).unwrap_or(0),
            None => return Ok(Value::Null),
        },
        _ => 0,
    };
    Ok(match positions_of(a, s, start)? {
        Some(found) => found.first().map_or(Value::Null, |p| Value::Integer(*p)),
        None => Value::Null,
    })
}

fn positions(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    Ok(match positions_of(a, s, 0)? {
        Some(found) => {
            let items: Vec<Option<String>> = found.iter().map(|p| Some(p.to_string())).collect();
            array_value(&items)?
        }
        None => Value::Null,
    })
}

/// `array[lower:upper]` (either bound left out: the array's own), 1-based and inclusive; an empty array when
/// the bounds select nothing.
fn slice(a: &Args<'_, '_>, _: &SessionState) -> Result<Value, PgError> {
    let Some(items) = elements(a, 0)? else {
        return Ok(Value::Null);
    };
    let len = items.len() as i64;
    let lower = match a.value(1) {
        Value::Null => 1,
        _ => a.int(1)?.unwrap_or(1),
    }
    .max(1);
    let upper = match a.value(2) {
        Value::Null => len,
        _ => a.int(2)?.unwrap_or(len),
    }
    .min(len);
    if lower > upper {
        return array_value(&[]);
    }
    let from = usize::try_from(lower - 1).unwrap_or(0);
    let to = usize::try_from(upper).unwrap_or(0);
    array_value(&items[from..to])
}

/// `UPDATE … SET a[i] = v` (made `a = pg_array_set(a, i, v)`): element `i` of a one-dimensional array
/// replaced, the array grown with NULLs to reach it; a NULL array becomes `{v}` at 1.
fn set(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    let ty = element_type(a, 0, Some(2));
    let mut items = elements(a, 0)?.unwrap_or_default();
    let Some(index) = a.int(1)? else {
        return Err(PgError::new(
            crate::error::ARRAY_SUBSCRIPT_ERROR,
            "array subscript in assignment must not be null",
        ));
    };
    let position = usize::try_from(index)
        .ok()
        .and_then(|i| i.checked_sub(1))
        .ok_or_else(|| PgError::unsupported("array subscripts below 1"))?;
    if position >= array::ELEMENTS_MAX {
        return Err(PgError::new(
            crate::error::PROGRAM_LIMIT_EXCEEDED,
            "array size exceeds the maximum allowed",
        ));
    }
    if items.len() <= position {
        items.resize(position + 1, None);
    }
    items[position] = element(a, 2, ty, s)?;
    array_value(&items)
}

fn fill(a: &Args<'_, '_>, s: &SessionState) -> Result<Value, PgError> {
    let Some(dimensions) = elements(a, 1)? else {
        return Err(PgError::new(
            crate::error::NULL_VALUE_NOT_ALLOWED,
            "dimension array or low bound array cannot be null",
        ));
    };
    if dimensions.is_empty() || dimensions.len() > array::DIMENSIONS_MAX {
        return Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            "wrong number of array subscripts",
        ));
    }
    let too_large = || {
        PgError::new(
            crate::error::PROGRAM_LIMIT_EXCEEDED,
            "array size exceeds the maximum allowed",
        )
    };
    let mut dims = Vec::with_capacity(dimensions.len());
    let mut count = 1usize;
    for length in &dimensions {
        let length: i64 = length
            .as_deref()
            .unwrap_or_default()
            .trim()
            .parse()
            .map_err(|_| PgError::new(INVALID_PARAMETER_VALUE, "invalid array dimension"))?;
        let length = usize::try_from(length).map_err(|_| too_large())?;
        count = count.checked_mul(length).ok_or_else(too_large)?;
        if count > array::ELEMENTS_MAX {
            return Err(too_large());
        }
        dims.push(length);
    }
    let ty = a.ty(0).unwrap_or(PgType::TEXT);
    let item = element(a, 0, ty, s)?;
    if count == 0 {
        return Ok(Value::Text("{}".to_owned()));
    }
    let text = array::Shaped {
        dims,
        elements: vec![item; count],
    }
    .format();
    check_size(text.len())?;
    Ok(Value::Text(text))
}

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    define(conn, state, "array_length", 2, Purity::Pure, length)?;
    define(conn, state, "array_upper", 2, Purity::Pure, upper)?;
    define(conn, state, "array_lower", 2, Purity::Pure, lower)?;
    define(conn, state, "cardinality", 1, Purity::Pure, cardinality)?;
    define(conn, state, "array_ndims", 1, Purity::Pure, ndims)?;
    define(conn, state, "array_dims", 1, Purity::Pure, dims)?;
    // The element's text can depend on the session's zone (a timestamptz element).
    define(conn, state, "array_append", 2, Purity::Volatile, append)?;
    define(conn, state, "array_prepend", 2, Purity::Volatile, prepend)?;
    define(conn, state, "array_cat", 2, Purity::Pure, cat)?;
    define(conn, state, "array_remove", 2, Purity::Volatile, remove)?;
    define(conn, state, "array_replace", 3, Purity::Volatile, replace)?;
    define(conn, state, "array_position", 2, Purity::Volatile, position)?;
    define(conn, state, "array_position", 3, Purity::Volatile, position)?;
    define(conn, state, "array_positions", 2, Purity::Volatile, positions)?;
    define(conn, state, "array_fill", 2, Purity::Volatile, fill)?;
    define(conn, state, "pg_array_slice", 3, Purity::Pure, slice)?;
    define(conn, state, "pg_array_set", 3, Purity::Volatile, set)?;
    Ok(())
}

/// The result type of a function of this file.
pub(super) fn result_type(name: &str, args: &[Option<PgType>]) -> Option<PgType> {
    let array_of = |i: usize| args.get(i).copied().flatten().filter(|t| t.is_array());
    let element_of = |i: usize| args.get(i).copied().flatten().filter(|t| !t.is_array());
    Some(match name {
        "array_length" | "array_upper" | "array_lower" | "cardinality" | "array_ndims" | "array_position" => {
            PgType::INT4
        }
        "array_positions" => PgType::INT4.array(),
        "array_dims" => PgType::TEXT,
        "array_append" | "array_remove" | "array_replace" | "array_cat" | "pg_array_slice" | "pg_array_set" => {
            array_of(0)
                .or_else(|| array_of(1))
                .or_else(|| element_of(1).map(PgType::array))
                .unwrap_or(PgType::TEXT.array())
        }
        "array_prepend" => array_of(1)
            .or_else(|| element_of(0).map(PgType::array))
            .unwrap_or(PgType::TEXT.array()),
        "array_fill" => element_of(0).unwrap_or(PgType::TEXT).array(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, check_errors};

    #[test]
    fn array_functions_as_postgres() {
        check(&[
            ("array_length(ARRAY[1, 2, 3], 1)", Some("3")),
            ("array_length('{}'::int[], 1)", None),
            ("array_length(ARRAY[1], 2)", None),
            ("cardinality(ARRAY['a', 'b'])", Some("2")),
            ("array_upper(ARRAY[5, 6], 1)", Some("2")),
            ("array_lower(ARRAY[5, 6], 1)", Some("1")),
            ("array_dims(ARRAY[5, 6])", Some("[1:2]")),
            ("array_append(ARRAY[1, 2], 3)", Some("{1,2,3}")),
            ("array_prepend(0, ARRAY[1])", Some("{0,1}")),
            ("array_cat(ARRAY['a'], ARRAY['b c'])", Some("{a,\"b c\"}")),
            ("array_remove(ARRAY[1, 2, 1], 1)", Some("{2}")),
            ("array_replace(ARRAY[1, 2, 1], 1, 9)", Some("{9,2,9}")),
            ("array_position(ARRAY['a', 'b', 'c'], 'b')", Some("2")),
            ("array_position(ARRAY[1, 2, 1], 1, 2)", Some("3")),
            ("array_positions(ARRAY[1, 2, 1], 1)", Some("{1,3}")),
            ("array_fill(0, ARRAY[3])", Some("{0,0,0}")),
            ("array_append(ARRAY[true], false)", Some("{t,f}")),
            ("ARRAY[[1, 2], [3, 4]]", Some("{{1,2},{3,4}}")),
            ("ARRAY[1, 2] || ARRAY[3]", Some("{1,2,3}")),
            ("ARRAY[1, 2] || 3", Some("{1,2,3}")),
            ("0 || ARRAY[1, 2]", Some("{0,1,2}")),
            ("ARRAY[[1, 2]] || ARRAY[3, 4]", Some("{{1,2},{3,4}}")),
            ("ARRAY[[1, 2]] || ARRAY[[3, 4]]", Some("{{1,2},{3,4}}")),
            ("cardinality(ARRAY[[1, 2], [3, 4]])", Some("4")),
            ("array_dims(ARRAY[[1, 2, 3], [4, 5, 6]])", Some("[1:2][1:3]")),
            ("array_length(ARRAY[[1, 2, 3], [4, 5, 6]], 2)", Some("3")),
            ("array_ndims('{{{1}}}'::int[])", Some("3")),
            ("array_fill('x'::text, ARRAY[2, 2])", Some("{{x,x},{x,x}}")),
        ]);
    }

    #[test]
    fn arrays_of_other_shapes_are_refused_as_postgres_refuses_them() {
        check_errors(&[
            ("ARRAY[[1, 2], [3]]", "2202E"),
            ("ARRAY[[1, 2]] || ARRAY[[1, 2, 3]]", "2202E"),
            ("'{{1,2},{3}}'::int[]", "22P02"),
        ]);
    }
}
