//! PostgreSQL types on the wire: result columns described with the OID of their PostgreSQL type (from the
//! dialect layer, `pgcompat`), values printed in text or binary as PostgreSQL prints them, and parameters
//! read from their text or binary form into the stored SQLite value of their type.
//!
//! Where the layer knows no type (SQL in SQLite's own dialect, a column of a table made before the layer
//! recorded types), the column's SQLite declared type decides by affinity, else its values.

use bytes::{BufMut, Bytes, BytesMut};
use jiff::tz::TimeZone;
use pgcompat::types::{Base, PgType};
use pgcompat::value::{self, OutputStyle};
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;
use rusqlite::types::Value;

use super::error::{SqlError, INVALID_TEXT_REPRESENTATION};
use super::exec::Column;

/// The type for a declared SQLite column type, by SQLite's affinity rules
/// (<https://sqlite.org/datatype3.html#determination_of_column_affinity>). `None` for NUMERIC affinity
/// (and no declared type at all), whose values decide.
pub(crate) fn type_of_declared(declared: &str) -> Option<PgType> {
    let upper = declared.to_ascii_uppercase();
    if upper.contains("INT") {
        Some(PgType::INT8)
    } else if upper.contains("CHAR") || upper.contains("CLOB") || upper.contains("TEXT") {
        Some(PgType::TEXT)
    } else if upper.contains("BLOB") {
        Some(PgType::BYTEA)
    } else if upper.contains("REAL") || upper.contains("FLOA") || upper.contains("DOUB") {
        Some(PgType::FLOAT8)
    } else {
        None
    }
}

/// The type for a column whose declared type does not decide: the storage class of its non-NULL values if
/// they agree, else text.
pub(crate) fn type_of_values<'a>(values: impl Iterator<Item = &'a Value>) -> PgType {
    let mut found: Option<PgType> = None;
    for value in values {
        let ty = match value {
            Value::Null => continue,
            Value::Integer(_) => PgType::INT8,
            Value::Real(_) => PgType::FLOAT8,
            Value::Text(_) => PgType::TEXT,
            Value::Blob(_) => PgType::BYTEA,
        };
        match &found {
            None => found = Some(ty),
            Some(existing) if *existing == ty => {}
            Some(_) => return PgType::TEXT,
        }
    }
    found.unwrap_or(PgType::TEXT)
}

/// The pgwire type of a PostgreSQL type (its OID and name).
pub(crate) fn wire_type(ty: PgType) -> Type {
    Type::from_oid(ty.oid()).unwrap_or_else(|| match ty.base() {
        // An enum type of the database: its own OID, which a client looks up in pg_type as it would on
        // PostgreSQL (its values travel as their labels' text).
        Base::Enum(_) => Type::new(
            format!("enum_{}", ty.oid()),
            ty.oid(),
            Type::TEXT.kind().clone(),
            "public".to_owned(),
        ),
        _ => Type::TEXT,
    })
}

/// Field descriptions for result columns, in the client's requested formats: each one's name, type (its OID,
/// `typlen` and modifier), and the table OID and column number of the table column it is (zeros for an
/// expression, as PostgreSQL sends).
pub(crate) fn fields(columns: &[Column], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            // An OID travels as the 32 bits of an unsigned integer; pgwire's field is signed.
            let table = column.origin.map(|o| i32::from_ne_bytes(o.table_oid.to_ne_bytes()));
            let number = column.origin.map(|o| o.attnum);
            FieldInfo::new(
                column.name.clone(),
                table,
                number,
                wire_type(column.ty),
                format.format_for(index),
            )
            .with_type_size(column.ty.type_length())
            // A table column's modifier (`varchar(20)`) is its attribute's, as PostgreSQL sends it. An
            // expression's follows rules of its own in PostgreSQL (a `coalesce` of a `varchar(20)` and a literal
            // has none), which the types here do not model: -1, "none", as before.
            .with_type_modifier(column.origin.map_or(-1, |_| column.ty.type_modifier()))
        })
        .collect()
}

/// The type a parameter is taken as when neither the client nor the statement says: text, like
/// PostgreSQL's `unknown`; the dialect layer's assignment rules convert it where it is used.
pub(crate) const PARAMETER_TYPE_DEFAULT: PgType = PgType::TEXT;

/// Encodes one result row: each value in its column's type and format.
pub(crate) fn encode_row(
    columns: &[PgType],
    formats: &[FieldFormat],
    row: &[Value],
    style: &OutputStyle,
) -> Result<DataRow, SqlError> {
    assert_eq!(columns.len(), row.len(), "row width differs from its columns");
    assert_eq!(columns.len(), formats.len(), "formats width differs from its columns");
    let mut data = BytesMut::with_capacity(16 * row.len());
    for ((ty, format), value) in columns.iter().zip(formats).zip(row) {
        if matches!(value, Value::Null) {
            data.put_i32(-1);
            continue;
        }
        let bytes = match format {
            FieldFormat::Text => value::output_styled(*ty, value, style).unwrap_or_default().into_bytes(),
            FieldFormat::Binary => value::encode_binary(*ty, value, &style.tz).map_err(SqlError::from)?,
        };
        let len = i32::try_from(bytes.len())
            .map_err(|_| SqlError::new(super::error::PROGRAM_LIMIT_EXCEEDED, "a value is over 2 GiB"))?;
        data.put_i32(len);
        data.put_slice(&bytes);
    }
    let field_count = i16::try_from(row.len())
        .map_err(|_| SqlError::new(super::error::PROGRAM_LIMIT_EXCEEDED, "a row has over 32767 columns"))?;
    Ok(DataRow::new(data, field_count))
}

/// A portal's bound parameters as the client sent them.
#[derive(Clone, Debug)]
pub(crate) struct RawParams {
    /// Each value, `None` for NULL.
    pub(crate) values: Vec<Option<Bytes>>,
    /// Their formats.
    pub(crate) formats: Format,
    /// The types the client gave when it prepared the statement (`None`: unspecified).
    pub(crate) client_types: Vec<Option<Type>>,
}

impl RawParams {
    /// No parameters.
    #[cfg(test)]
    pub(crate) fn none() -> RawParams {
        RawParams {
            values: Vec::new(),
            formats: Format::UnifiedText,
            client_types: Vec::new(),
        }
    }

    /// The type of parameter `index`: the client's, else the one the statement's use gives it.
    pub(crate) fn type_of(&self, index: usize, learned: &[Option<PgType>]) -> Option<PgType> {
        let client = self
            .client_types
            .get(index)
            .cloned()
            .flatten()
            .filter(|t| t.oid() != 0 && *t != Type::UNKNOWN)
            .and_then(|t| PgType::from_oid(t.oid()));
        client.or_else(|| learned.get(index).copied().flatten())
    }

    /// The parameters as stored SQLite values of their types, in PostgreSQL numbering (`$1` is index 0).
    pub(crate) fn decode(&self, learned: &[Option<PgType>], tz: &TimeZone) -> Result<Vec<Value>, SqlError> {
        (0..self.values.len())
            .map(|index| {
                let Some(bytes) = &self.values[index] else {
                    return Ok(Value::Null);
                };
                let ty = self.type_of(index, learned);
                let named =
                    |e: pgcompat::PgError| SqlError::new(e.code, format!("parameter ${}: {}", index + 1, e.message));
                match self.formats.format_for(index) {
                    FieldFormat::Text => {
                        let text = std::str::from_utf8(bytes).map_err(|_| {
                            SqlError::new(
                                INVALID_TEXT_REPRESENTATION,
                                format!("parameter ${} is not valid UTF-8", index + 1),
                            )
                        })?;
                        match ty {
                            Some(ty) if ty.base() != Base::Text => value::input(ty, text, tz).map_err(named),
                            _ => Ok(Value::Text(text.to_owned())),
                        }
                    }
                    // A parameter of no type is text, as Describe told the client (PostgreSQL's rule too).
                    FieldFormat::Binary => {
                        value::decode_binary(ty.unwrap_or(PARAMETER_TYPE_DEFAULT), bytes, tz).map_err(named)
                    }
                }
            })
            .collect()
    }
}

impl From<pgcompat::PgError> for SqlError {
    fn from(error: pgcompat::PgError) -> SqlError {
        SqlError::new(error.code, error.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_follow_affinity() {
        assert_eq!(type_of_declared("INTEGER"), Some(PgType::INT8));
        assert_eq!(type_of_declared("varchar(10)"), Some(PgType::TEXT));
        assert_eq!(type_of_declared("BLOB"), Some(PgType::BYTEA));
        assert_eq!(type_of_declared("double precision"), Some(PgType::FLOAT8));
        assert_eq!(type_of_declared("NUMERIC"), None);
    }

    #[test]
    fn value_types_agree_or_fall_back_to_text() {
        let ints = [Value::Null, Value::Integer(1), Value::Integer(2)];
        assert_eq!(type_of_values(ints.iter()), PgType::INT8);
        let mixed = [Value::Integer(1), Value::Real(2.5)];
        assert_eq!(type_of_values(mixed.iter()), PgType::TEXT);
        assert_eq!(type_of_values([Value::Null].iter()), PgType::TEXT);
    }

    #[test]
    fn rows_encode_in_text_and_binary() {
        let row = encode_row(
            &[PgType::BOOL, PgType::INT4, PgType::TEXT],
            &[FieldFormat::Text, FieldFormat::Binary, FieldFormat::Text],
            &[Value::Integer(1), Value::Integer(7), Value::Null],
            &OutputStyle::with_zone(TimeZone::UTC),
        )
        .expect("encodes");
        assert_eq!(row.field_count, 3);
        assert_eq!(
            &row.data[..],
            &[0, 0, 0, 1, b't', 0, 0, 0, 4, 0, 0, 0, 7, 255, 255, 255, 255]
        );
    }

    #[test]
    fn parameters_decode_by_their_types() {
        let raw = RawParams {
            values: vec![
                Some(Bytes::from_static(b"t")),
                Some(Bytes::from_static(&[0, 0, 0, 5])),
                None,
            ],
            formats: Format::Individual(vec![0, 1, 0]),
            client_types: vec![None, Some(Type::INT4), None],
        };
        let values = raw.decode(&[Some(PgType::BOOL)], &TimeZone::UTC).expect("decodes");
        assert_eq!(values, vec![Value::Integer(1), Value::Integer(5), Value::Null]);
        let bad = RawParams {
            values: vec![Some(Bytes::from_static(&[1]))],
            formats: Format::UnifiedBinary,
            client_types: vec![Some(Type::INT4)],
        };
        assert!(bad.decode(&[], &TimeZone::UTC).is_err());
    }
}
