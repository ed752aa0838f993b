//! SQLite values as PostgreSQL types: integer → int8, real → float8, text → text, blob → bytea.
//!
//! A PostgreSQL column has one type; a SQLite column has a declared type (maybe none) and values of any
//! storage class. The column type comes from the declared type's affinity, else from the values seen;
//! values that do not fit the column type are converted the way SQLite's own casts would, or refused.

use pgwire::api::portal::{Format, Portal};
use pgwire::api::results::{DataRowEncoder, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;
use rusqlite::types::Value;

use super::error::{SqlError, FEATURE_NOT_SUPPORTED, INVALID_TEXT_REPRESENTATION};

/// The PostgreSQL type for a declared SQLite column type, by SQLite's affinity rules
/// (<https://sqlite.org/datatype3.html#determination_of_column_affinity>). `None` for NUMERIC affinity
/// (and no declared type at all), whose values decide.
pub(crate) fn type_of_declared(declared: &str) -> Option<Type> {
    let upper = declared.to_ascii_uppercase();
    if upper.contains("INT") {
        Some(Type::INT8)
    } else if upper.contains("CHAR") || upper.contains("CLOB") || upper.contains("TEXT") {
        Some(Type::TEXT)
    } else if upper.contains("BLOB") {
        Some(Type::BYTEA)
    } else if upper.contains("REAL") || upper.contains("FLOA") || upper.contains("DOUB") {
        Some(Type::FLOAT8)
    } else {
        None
    }
}

/// The PostgreSQL type for a column whose declared type does not decide: the storage class of its
/// non-NULL values if they agree, else text.
pub(crate) fn type_of_values<'a>(values: impl Iterator<Item = &'a Value>) -> Type {
    let mut found: Option<Type> = None;
    for value in values {
        let ty = match value {
            Value::Null => continue,
            Value::Integer(_) => Type::INT8,
            Value::Real(_) => Type::FLOAT8,
            Value::Text(_) => Type::TEXT,
            Value::Blob(_) => Type::BYTEA,
        };
        match &found {
            None => found = Some(ty),
            Some(existing) if *existing == ty => {}
            Some(_) => return Type::TEXT,
        }
    }
    found.unwrap_or(Type::TEXT)
}

/// Encodes one result row, each value converted to its column's type.
pub(crate) fn encode_row(
    encoder: &mut DataRowEncoder,
    fields: &[FieldInfo],
    row: &[Value],
) -> Result<DataRow, SqlError> {
    assert_eq!(fields.len(), row.len(), "row width differs from its fields");
    for (field, value) in fields.iter().zip(row) {
        encode_value(encoder, field.datatype(), value)?;
    }
    Ok(encoder.take_row())
}

fn encode_value(encoder: &mut DataRowEncoder, ty: &Type, value: &Value) -> Result<(), SqlError> {
    let result = match (ty, value) {
        (_, Value::Null) => encoder.encode_field(&None::<i64>),
        (&Type::INT8, _) => encoder.encode_field(&as_int8(value)?),
        (&Type::FLOAT8, _) => encoder.encode_field(&as_float8(value)?),
        (&Type::BYTEA, Value::Blob(bytes)) => encoder.encode_field(&bytes.as_slice()),
        (&Type::BYTEA, _) => encoder.encode_field(&as_text(value).into_bytes()),
        (_, Value::Text(text)) => encoder.encode_field(&text.as_str()),
        (_, _) => encoder.encode_field(&as_text(value)),
    };
    result.map_err(|e| SqlError::new(INVALID_TEXT_REPRESENTATION, e.to_string()))
}

fn as_int8(value: &Value) -> Result<i64, SqlError> {
    let refused = || {
        SqlError::new(
            INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type bigint: {:?}", as_text(value)),
        )
    };
    match value {
        Value::Integer(i) => Ok(*i),
        // The range check is exact: both bounds are powers of two, representable as f64.
        Value::Real(f) if f.fract() == 0.0 && *f >= -(2f64.powi(63)) && *f < 2f64.powi(63) => Ok(*f as i64),
        Value::Text(text) => text.trim().parse().map_err(|_| refused()),
        _ => Err(refused()),
    }
}

fn as_float8(value: &Value) -> Result<f64, SqlError> {
    match value {
        Value::Integer(i) => Ok(*i as f64),
        Value::Real(f) => Ok(*f),
        Value::Text(text) => text.trim().parse().map_err(|_| {
            SqlError::new(
                INVALID_TEXT_REPRESENTATION,
                format!("invalid input syntax for type double precision: {text:?}"),
            )
        }),
        _ => Err(SqlError::new(
            INVALID_TEXT_REPRESENTATION,
            "a blob is not a double precision value",
        )),
    }
}

/// A value in PostgreSQL's text form (bytea as `\x…` hex).
fn as_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => f.to_string(),
        Value::Text(text) => text.clone(),
        Value::Blob(bytes) => {
            let mut out = String::with_capacity(2 + bytes.len() * 2);
            out.push_str("\\x");
            for byte in bytes {
                out.push_str(&format!("{byte:02x}"));
            }
            out
        }
    }
}

/// Field descriptions for result columns of the given types, in the client's requested formats.
pub(crate) fn fields(columns: &[(String, Type)], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(index, (name, ty))| FieldInfo::new(name.clone(), None, None, ty.clone(), format.format_for(index)))
        .collect()
}

/// The type a parameter is taken as when the client gives none: text, like PostgreSQL's `unknown`;
/// SQLite's column affinity then converts it on insert and comparison.
pub(crate) const PARAMETER_TYPE_DEFAULT: Type = Type::TEXT;

/// The bound parameters of a portal as SQLite values, in PostgreSQL numbering (`$1` is index 0).
pub(crate) fn parameters(portal: &Portal<String>) -> Result<Vec<Value>, SqlError> {
    (0..portal.parameter_len())
        .map(|index| {
            let ty = portal
                .statement
                .parameter_types
                .get(index)
                .cloned()
                .flatten()
                .unwrap_or(PARAMETER_TYPE_DEFAULT);
            parameter(portal, index, &ty)
        })
        .collect()
}

fn parameter(portal: &Portal<String>, index: usize, ty: &Type) -> Result<Value, SqlError> {
    let invalid = |e: pgwire::error::PgWireError| {
        SqlError::new(INVALID_TEXT_REPRESENTATION, format!("parameter ${}: {e}", index + 1))
    };
    let value = match *ty {
        Type::INT8 => portal.parameter::<i64>(index, ty).map_err(invalid)?.map(Value::Integer),
        Type::INT4 => portal
            .parameter::<i32>(index, ty)
            .map_err(invalid)?
            .map(|v| Value::Integer(v.into())),
        Type::INT2 => portal
            .parameter::<i16>(index, ty)
            .map_err(invalid)?
            .map(|v| Value::Integer(v.into())),
        Type::BOOL => portal
            .parameter::<bool>(index, ty)
            .map_err(invalid)?
            .map(|v| Value::Integer(v.into())),
        Type::FLOAT8 => portal.parameter::<f64>(index, ty).map_err(invalid)?.map(Value::Real),
        Type::FLOAT4 => portal
            .parameter::<f32>(index, ty)
            .map_err(invalid)?
            .map(|v| Value::Real(v.into())),
        Type::BYTEA => portal
            .parameter::<Vec<u8>>(index, ty)
            .map_err(invalid)?
            .map(Value::Blob),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            portal.parameter::<String>(index, ty).map_err(invalid)?.map(Value::Text)
        }
        _ => {
            return Err(SqlError::new(
                FEATURE_NOT_SUPPORTED,
                format!("parameter ${} has unsupported type {}", index + 1, ty.name()),
            ));
        }
    };
    Ok(value.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_follow_affinity() {
        assert_eq!(type_of_declared("INTEGER"), Some(Type::INT8));
        assert_eq!(type_of_declared("varchar(10)"), Some(Type::TEXT));
        assert_eq!(type_of_declared("BLOB"), Some(Type::BYTEA));
        assert_eq!(type_of_declared("double precision"), Some(Type::FLOAT8));
        assert_eq!(type_of_declared("NUMERIC"), None);
    }

    #[test]
    fn value_types_agree_or_fall_back_to_text() {
        let ints = [Value::Null, Value::Integer(1), Value::Integer(2)];
        assert_eq!(type_of_values(ints.iter()), Type::INT8);
        let mixed = [Value::Integer(1), Value::Real(2.5)];
        assert_eq!(type_of_values(mixed.iter()), Type::TEXT);
        assert_eq!(type_of_values([Value::Null].iter()), Type::TEXT);
    }

    #[test]
    fn conversions_refuse_what_does_not_fit() {
        assert_eq!(as_int8(&Value::Text(" 42".into())), Ok(42));
        assert_eq!(as_int8(&Value::Real(3.0)), Ok(3));
        assert!(as_int8(&Value::Real(3.5)).is_err());
        assert!(as_int8(&Value::Real(f64::NAN)).is_err());
        assert_eq!(as_text(&Value::Blob(vec![0, 255])), "\\x00ff");
    }
}
