//! The layer's one error: a PostgreSQL SQLSTATE and a message, as PostgreSQL would word it.

use std::fmt;

/// An error for the client: its SQLSTATE and message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PgError {
    /// The five-character SQLSTATE.
    pub code: &'static str,
    /// The message, worded as PostgreSQL words it where it has one.
    pub message: String,
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.message, self.code)
    }
}

impl PgError {
    /// An error with this code and message.
    pub fn new(code: &'static str, message: impl Into<String>) -> PgError {
        PgError {
            code,
            message: message.into(),
        }
    }

    /// 0A000: a feature the layer does not support, named.
    pub fn unsupported(feature: impl fmt::Display) -> PgError {
        PgError::new(FEATURE_NOT_SUPPORTED, format!("{feature} is not supported by Cambium"))
    }

    /// 22P02 in PostgreSQL's words.
    pub fn invalid_input(type_name: &str, text: &str) -> PgError {
        PgError::new(
            INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type {type_name}: \"{text}\""),
        )
    }

    /// 22003 in PostgreSQL's words.
    pub fn out_of_range(type_name: &str) -> PgError {
        PgError::new(NUMERIC_VALUE_OUT_OF_RANGE, format!("{type_name} out of range"))
    }
}

/// successful_completion is never an error; the codes below are the ones the layer raises.
/// feature_not_supported
pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
/// syntax_error
pub const SYNTAX_ERROR: &str = "42601";
/// undefined_function
pub const UNDEFINED_FUNCTION: &str = "42883";
/// undefined_object (types, sequences given by name)
pub const UNDEFINED_OBJECT: &str = "42704";
/// undefined_table
pub const UNDEFINED_TABLE: &str = "42P01";
/// undefined_column
pub const UNDEFINED_COLUMN: &str = "42703";
/// duplicate_object
pub const DUPLICATE_OBJECT: &str = "42710";
/// duplicate_table
pub const DUPLICATE_TABLE: &str = "42P07";
/// duplicate_column
pub const DUPLICATE_COLUMN: &str = "42701";
/// external_routine_exception (pgcrypto's code for an argument out of its range)
pub const EXTERNAL_ROUTINE_EXCEPTION: &str = "39000";
/// datatype_mismatch
pub const DATATYPE_MISMATCH: &str = "42804";
/// invalid_text_representation
pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
/// invalid_datetime_format
pub const INVALID_DATETIME_FORMAT: &str = "22007";
/// datetime_field_overflow
pub const DATETIME_FIELD_OVERFLOW: &str = "22008";
/// numeric_value_out_of_range
pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
/// division_by_zero
pub const DIVISION_BY_ZERO: &str = "22012";
/// string_data_right_truncation
pub const STRING_DATA_RIGHT_TRUNCATION: &str = "22001";
/// invalid_parameter_value
pub const INVALID_PARAMETER_VALUE: &str = "22023";
/// object_not_in_prerequisite_state (currval before nextval)
pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
/// sequence_generator_limit_exceeded
pub const SEQUENCE_GENERATOR_LIMIT_EXCEEDED: &str = "2200H";
/// read_only_sql_transaction
pub const READ_ONLY_SQL_TRANSACTION: &str = "25006";
/// invalid_binary_representation
pub const INVALID_BINARY_REPRESENTATION: &str = "22P03";
/// dependent_objects_still_exist
pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "2BP01";
/// invalid_schema_name
pub const INVALID_SCHEMA_NAME: &str = "3F000";
/// duplicate_schema
pub const DUPLICATE_SCHEMA: &str = "42P06";
/// invalid_table_definition
pub const INVALID_TABLE_DEFINITION: &str = "42P16";
/// not_null_violation
pub const NOT_NULL_VIOLATION: &str = "23502";
/// reserved_name
pub const RESERVED_NAME: &str = "42939";
/// cannot_coerce
pub const CANNOT_COERCE: &str = "42846";
/// invalid_regular_expression
pub const INVALID_REGULAR_EXPRESSION: &str = "2201B";
/// program_limit_exceeded
pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
/// invalid_argument_for_logarithm
pub const INVALID_ARGUMENT_FOR_LOG: &str = "2201E";
/// invalid_argument_for_power_function
pub const INVALID_ARGUMENT_FOR_POWER: &str = "2201F";
/// invalid_argument_for_width_bucket_function
pub const INVALID_ARGUMENT_FOR_WIDTH_BUCKET: &str = "2201G";
/// null_value_not_allowed
pub const NULL_VALUE_NOT_ALLOWED: &str = "22004";
/// character_not_in_repertoire
pub const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";
/// array_subscript_error
pub const ARRAY_SUBSCRIPT_ERROR: &str = "2202E";
/// invalid_escape_sequence
pub const INVALID_ESCAPE_SEQUENCE: &str = "22025";
/// internal_error
pub const INTERNAL_ERROR: &str = "XX000";

/// substring_error
pub const SUBSTRING_ERROR: &str = "22011";
/// unique_violation
pub const UNIQUE_VIOLATION: &str = "23505";
/// wrong_object_type
pub const WRONG_OBJECT_TYPE: &str = "42809";
/// generated_always (a value given for a `GENERATED ALWAYS AS IDENTITY` column)
pub const GENERATED_ALWAYS: &str = "428C9";
/// cant_change_runtime_param
pub const CANT_CHANGE_RUNTIME_PARAM: &str = "55P02";
/// bad_copy_file_format
pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
/// lock_not_available
pub const LOCK_NOT_AVAILABLE: &str = "55P03";
/// query_canceled
pub const QUERY_CANCELED: &str = "57014";
/// deadlock_detected
pub const DEADLOCK_DETECTED: &str = "40P01";
/// active_sql_transaction (a statement that cannot run inside a transaction block)
pub const ACTIVE_SQL_TRANSACTION: &str = "25001";

/// invalid_column_reference
pub const INVALID_COLUMN_REFERENCE: &str = "42P10";
/// cardinality_violation
pub const CARDINALITY_VIOLATION: &str = "21000";
/// grouping_error
pub const GROUPING_ERROR: &str = "42803";
/// datatype_mismatch in a set operation or CASE: cannot match types
pub const INDETERMINATE_DATATYPE: &str = "42P18";

/// Every code the layer raises, so a code read back from a SQLite message is one of ours.
const CODES: &[&str] = &[
    FEATURE_NOT_SUPPORTED,
    SYNTAX_ERROR,
    UNDEFINED_FUNCTION,
    UNDEFINED_OBJECT,
    UNDEFINED_TABLE,
    UNDEFINED_COLUMN,
    DUPLICATE_OBJECT,
    DUPLICATE_TABLE,
    DUPLICATE_COLUMN,
    EXTERNAL_ROUTINE_EXCEPTION,
    DATATYPE_MISMATCH,
    INVALID_TEXT_REPRESENTATION,
    INVALID_DATETIME_FORMAT,
    DATETIME_FIELD_OVERFLOW,
    NUMERIC_VALUE_OUT_OF_RANGE,
    DIVISION_BY_ZERO,
    STRING_DATA_RIGHT_TRUNCATION,
    INVALID_PARAMETER_VALUE,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
    READ_ONLY_SQL_TRANSACTION,
    INVALID_BINARY_REPRESENTATION,
    DEPENDENT_OBJECTS_STILL_EXIST,
    INVALID_SCHEMA_NAME,
    DUPLICATE_SCHEMA,
    INVALID_TABLE_DEFINITION,
    NOT_NULL_VIOLATION,
    RESERVED_NAME,
    CANNOT_COERCE,
    INVALID_REGULAR_EXPRESSION,
    PROGRAM_LIMIT_EXCEEDED,
    INVALID_ARGUMENT_FOR_LOG,
    INVALID_ARGUMENT_FOR_POWER,
    INVALID_ARGUMENT_FOR_WIDTH_BUCKET,
    NULL_VALUE_NOT_ALLOWED,
    CHARACTER_NOT_IN_REPERTOIRE,
    ARRAY_SUBSCRIPT_ERROR,
    INVALID_ESCAPE_SEQUENCE,
    INTERNAL_ERROR,
    CANT_CHANGE_RUNTIME_PARAM,
    BAD_COPY_FILE_FORMAT,
    LOCK_NOT_AVAILABLE,
    QUERY_CANCELED,
    DEADLOCK_DETECTED,
    ACTIVE_SQL_TRANSACTION,
    SUBSTRING_ERROR,
    INVALID_COLUMN_REFERENCE,
    CARDINALITY_VIOLATION,
    GROUPING_ERROR,
    INDETERMINATE_DATATYPE,
    WRONG_OBJECT_TYPE,
    GENERATED_ALWAYS,
    UNIQUE_VIOLATION,
];

/// The layer's static code equal to `code`, if it is one.
pub fn intern_code(code: &str) -> Option<&'static str> {
    CODES.iter().copied().find(|c| *c == code)
}
