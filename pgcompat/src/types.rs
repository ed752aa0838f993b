//! PostgreSQL types as the dialect layer knows them: their OIDs and names, how a value of each is stored in
//! SQLite (the column's storage type), and how a type written in SQL (`varchar(20)`, `timestamp with time
//! zone`, `int[]`) maps onto one.

use std::fmt;

use sqlparser::ast::{ArrayElemTypeDef, CharacterLength, DataType, ExactNumberInfo, TimezoneInfo};

/// A PostgreSQL base type the layer supports. Arrays are [`PgType::array`] of one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Base {
    /// `boolean`
    Bool,
    /// `smallint`
    Int2,
    /// `integer`
    Int4,
    /// `bigint`
    Int8,
    /// `numeric` / `decimal`: stored as its exact text
    Numeric,
    /// `real`
    Float4,
    /// `double precision`
    Float8,
    /// `text`
    Text,
    /// `varchar(n)`
    Varchar,
    /// `char(n)`
    Bpchar,
    /// `name` (catalog identifiers)
    Name,
    /// `bytea`
    Bytea,
    /// `date`
    Date,
    /// `time`
    Time,
    /// `time with time zone` (`timetz`): stored as its text, `HH:MM:SS[.frac]±HH[:MM]`
    Timetz,
    /// `timestamp`
    Timestamp,
    /// `timestamptz`
    Timestamptz,
    /// `interval`
    Interval,
    /// `uuid`
    Uuid,
    /// `json`
    Json,
    /// `jsonb`
    Jsonb,
    /// `oid`
    Oid,
    /// `regclass`, `regtype`, `regproc`: printed as names
    Regclass,
    /// `"char"`: one byte, the type of the catalogs' kind columns (`relkind`, `typtype`)
    Char,
    /// A user-defined enum type of the database, by its OID (its name and labels are the database's:
    /// `crate::enums`). Stored as its label's text.
    Enum(u32),
}

impl Base {
    /// Every base type the layer supports.
    pub const ALL: [Base; 24] = [
        Base::Bool,
        Base::Int2,
        Base::Int4,
        Base::Int8,
        Base::Numeric,
        Base::Float4,
        Base::Float8,
        Base::Text,
        Base::Varchar,
        Base::Bpchar,
        Base::Name,
        Base::Bytea,
        Base::Date,
        Base::Time,
        Base::Timetz,
        Base::Timestamp,
        Base::Timestamptz,
        Base::Interval,
        Base::Uuid,
        Base::Json,
        Base::Jsonb,
        Base::Oid,
        Base::Regclass,
        Base::Char,
    ];
}

/// A PostgreSQL type: a base, maybe an array of it, with its type modifier (`varchar(20)` → 20,
/// `numeric(10,2)` → precision and scale).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PgType {
    base: Base,
    array: bool,
    modifier: Modifier,
}

/// A type's modifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Modifier {
    /// None given.
    #[default]
    None,
    /// A length (`varchar(n)`, `char(n)`) or a precision (`timestamp(3)`).
    Length(u32),
    /// `numeric(precision, scale)`.
    Numeric {
        /// Total digits.
        precision: u32,
        /// Digits after the point.
        scale: u32,
    },
}

/// How a value of a type is stored in SQLite, which decides the column's declared type there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// SQLite INTEGER (booleans as 0/1).
    Integer,
    /// SQLite REAL.
    Real,
    /// SQLite TEXT in the type's canonical text form (numeric, dates and times, uuid, json, arrays).
    Text,
    /// SQLite BLOB.
    Blob,
}

impl Storage {
    /// The SQLite declared type that gives this storage its affinity.
    pub fn sqlite_type(self) -> &'static str {
        match self {
            Storage::Integer => "INTEGER",
            Storage::Real => "REAL",
            Storage::Text => "TEXT",
            Storage::Blob => "BLOB",
        }
    }
}

impl PgType {
    /// The base type, no modifier, not an array.
    pub const fn new(base: Base) -> PgType {
        PgType {
            base,
            array: false,
            modifier: Modifier::None,
        }
    }

    /// `boolean`
    pub const BOOL: PgType = PgType::new(Base::Bool);
    /// `integer`
    pub const INT4: PgType = PgType::new(Base::Int4);
    /// `bigint`
    pub const INT8: PgType = PgType::new(Base::Int8);
    /// `smallint`
    pub const INT2: PgType = PgType::new(Base::Int2);
    /// `numeric`
    pub const NUMERIC: PgType = PgType::new(Base::Numeric);
    /// `double precision`
    pub const FLOAT8: PgType = PgType::new(Base::Float8);
    /// `text`
    pub const TEXT: PgType = PgType::new(Base::Text);
    /// `bytea`
    pub const BYTEA: PgType = PgType::new(Base::Bytea);
    /// `timestamptz`
    pub const TIMESTAMPTZ: PgType = PgType::new(Base::Timestamptz);
    /// `name`
    pub const NAME: PgType = PgType::new(Base::Name);
    /// `oid`
    pub const OID: PgType = PgType::new(Base::Oid);

    /// This type with a modifier.
    pub fn with_modifier(self, modifier: Modifier) -> PgType {
        PgType { modifier, ..self }
    }

    /// An array of this type's base.
    pub fn array(self) -> PgType {
        PgType { array: true, ..self }
    }

    /// The element type of an array, the type itself otherwise.
    pub fn element(self) -> PgType {
        PgType { array: false, ..self }
    }

    /// The base type.
    pub fn base(self) -> Base {
        self.base
    }

    /// Whether this is an array type.
    pub fn is_array(self) -> bool {
        self.array
    }

    /// The modifier.
    pub fn modifier(self) -> Modifier {
        self.modifier
    }

    /// PostgreSQL's `pg_type.typlen`: the width of a fixed-width type in bytes, -1 for a variable-width
    /// one (every array).
    pub fn type_length(self) -> i16 {
        if self.array {
            return -1;
        }
        match self.base {
            Base::Bool | Base::Char => 1,
            Base::Int2 => 2,
            Base::Int4 | Base::Oid | Base::Regclass | Base::Float4 | Base::Date | Base::Enum(_) => 4,
            Base::Int8 | Base::Float8 | Base::Time | Base::Timestamp | Base::Timestamptz => 8,
            Base::Timetz => 12,
            Base::Interval | Base::Uuid => 16,
            Base::Name => 64,
            Base::Numeric | Base::Text | Base::Varchar | Base::Bpchar | Base::Bytea | Base::Json | Base::Jsonb => -1,
        }
    }

    /// PostgreSQL's type modifier (`atttypmod`) of the type: -1 without one, `n + 4` for `varchar(n)` and
    /// `char(n)`, `(precision << 16 | scale) + 4` for `numeric(p, s)`, the precision of a time type.
    pub fn type_modifier(self) -> i32 {
        let packed = match (self.base, self.modifier) {
            (Base::Varchar | Base::Bpchar, Modifier::Length(n)) => i64::from(n) + 4,
            (_, Modifier::Length(n)) => i64::from(n),
            (_, Modifier::Numeric { precision, scale }) => ((i64::from(precision) << 16) | i64::from(scale)) + 4,
            (_, Modifier::None) => -1,
        };
        i32::try_from(packed).unwrap_or(-1)
    }

    /// PostgreSQL's OID of the type (arrays: the array type's OID).
    pub fn oid(self) -> u32 {
        let (scalar, array) = match self.base {
            Base::Bool => (16, 1000),
            Base::Bytea => (17, 1001),
            Base::Name => (19, 1003),
            Base::Int8 => (20, 1016),
            Base::Int2 => (21, 1005),
            Base::Int4 => (23, 1007),
            Base::Text => (25, 1009),
            Base::Oid => (26, 1028),
            Base::Json => (114, 199),
            Base::Float4 => (700, 1021),
            Base::Float8 => (701, 1022),
            Base::Bpchar => (1042, 1014),
            Base::Varchar => (1043, 1015),
            Base::Date => (1082, 1182),
            Base::Time => (1083, 1183),
            Base::Timetz => (1266, 1270),
            Base::Timestamp => (1114, 1115),
            Base::Timestamptz => (1184, 1185),
            Base::Interval => (1186, 1187),
            Base::Numeric => (1700, 1231),
            Base::Uuid => (2950, 2951),
            Base::Jsonb => (3802, 3807),
            Base::Regclass => (2205, 2210),
            Base::Char => (18, 1002),
            Base::Enum(oid) => (oid, oid + 1),
        };
        if self.array {
            array
        } else {
            scalar
        }
    }

    /// The type with this OID, if the layer supports it (arrays included).
    pub fn from_oid(oid: u32) -> Option<PgType> {
        Base::ALL.iter().find_map(|base| {
            let scalar = PgType::new(*base);
            if scalar.oid() == oid {
                Some(scalar)
            } else if scalar.array().oid() == oid {
                Some(scalar.array())
            } else {
                None
            }
        })
    }

    /// PostgreSQL's internal name (`int4`, `_int4`, `timestamptz`).
    pub fn internal_name(self) -> String {
        let name = match self.base {
            Base::Bool => "bool",
            Base::Int2 => "int2",
            Base::Int4 => "int4",
            Base::Int8 => "int8",
            Base::Numeric => "numeric",
            Base::Float4 => "float4",
            Base::Float8 => "float8",
            Base::Text => "text",
            Base::Varchar => "varchar",
            Base::Bpchar => "bpchar",
            Base::Name => "name",
            Base::Bytea => "bytea",
            Base::Date => "date",
            Base::Time => "time",
            Base::Timetz => "timetz",
            Base::Timestamp => "timestamp",
            Base::Timestamptz => "timestamptz",
            Base::Interval => "interval",
            Base::Uuid => "uuid",
            Base::Json => "json",
            Base::Jsonb => "jsonb",
            Base::Oid => "oid",
            Base::Regclass => "regclass",
            Base::Char => "char",
            // The name is the database's; callers that print it ask the catalog (`crate::enums`).
            Base::Enum(_) => "enum",
        };
        if self.array {
            format!("_{name}")
        } else {
            name.to_owned()
        }
    }

    /// The type as `format_type` prints it (`integer`, `character varying(20)`, `timestamp with time zone`,
    /// `integer[]`).
    pub fn sql_name(self) -> String {
        let base = match self.base {
            Base::Bool => "boolean",
            Base::Int2 => "smallint",
            Base::Int4 => "integer",
            Base::Int8 => "bigint",
            Base::Numeric => "numeric",
            Base::Float4 => "real",
            Base::Float8 => "double precision",
            Base::Text => "text",
            Base::Varchar => "character varying",
            Base::Bpchar => "character",
            Base::Name => "name",
            Base::Bytea => "bytea",
            Base::Date => "date",
            Base::Time => "time without time zone",
            Base::Timetz => "time with time zone",
            Base::Timestamp => "timestamp without time zone",
            Base::Timestamptz => "timestamp with time zone",
            Base::Interval => "interval",
            Base::Uuid => "uuid",
            Base::Json => "json",
            Base::Jsonb => "jsonb",
            Base::Oid => "oid",
            Base::Regclass => "regclass",
            Base::Char => "\"char\"",
            Base::Enum(_) => "enum",
        };
        let modifier = match self.modifier {
            Modifier::None => String::new(),
            Modifier::Length(n) => format!("({n})"),
            Modifier::Numeric { precision, scale } => format!("({precision},{scale})"),
        };
        let mut name = match (self.base, &self.modifier) {
            // The precision of times goes inside their name: `timestamp(3) with time zone`.
            (Base::Time | Base::Timetz | Base::Timestamp | Base::Timestamptz, Modifier::Length(_)) => {
                let (head, tail) = base.split_once(' ').unwrap_or((base, ""));
                format!("{head}{modifier} {tail}").trim_end().to_owned()
            }
            _ => format!("{base}{modifier}"),
        };
        if self.array {
            name.push_str("[]");
        }
        name
    }

    /// How values of this type are stored in SQLite.
    pub fn storage(self) -> Storage {
        if self.array {
            return Storage::Text;
        }
        match self.base {
            Base::Bool | Base::Int2 | Base::Int4 | Base::Int8 | Base::Oid => Storage::Integer,
            Base::Float4 | Base::Float8 => Storage::Real,
            Base::Bytea => Storage::Blob,
            Base::Numeric
            | Base::Text
            | Base::Varchar
            | Base::Bpchar
            | Base::Name
            | Base::Date
            | Base::Time
            | Base::Timetz
            | Base::Timestamp
            | Base::Timestamptz
            | Base::Interval
            | Base::Uuid
            | Base::Json
            | Base::Jsonb
            | Base::Regclass
            | Base::Char
            | Base::Enum(_) => Storage::Text,
        }
    }

    /// Whether values compare and sort as numbers.
    pub fn is_numeric(self) -> bool {
        !self.array
            && matches!(
                self.base,
                Base::Int2 | Base::Int4 | Base::Int8 | Base::Numeric | Base::Float4 | Base::Float8 | Base::Oid
            )
    }

    /// Whether this is one of the integer types.
    pub fn is_integer(self) -> bool {
        !self.array && matches!(self.base, Base::Int2 | Base::Int4 | Base::Int8)
    }

    /// Whether this is one of the string types.
    pub fn is_string(self) -> bool {
        !self.array && matches!(self.base, Base::Text | Base::Varchar | Base::Bpchar | Base::Name)
    }

    /// The text form this catalog stores (`varchar(20)`, `int4[]`, `numeric(10,2)`), read by
    /// [`PgType::from_catalog`].
    pub fn catalog_text(self) -> String {
        if let Base::Enum(oid) = self.base {
            return format!("{}{oid}{}", ENUM_PREFIX, if self.array { "[]" } else { "" });
        }
        let mut text = self.element().internal_name();
        match self.modifier {
            Modifier::None => {}
            Modifier::Length(n) => text.push_str(&format!("({n})")),
            Modifier::Numeric { precision, scale } => text.push_str(&format!("({precision},{scale})")),
        }
        if self.array {
            text.push_str("[]");
        }
        text
    }

    /// Reads [`PgType::catalog_text`] back; `None` for text this version does not know.
    pub fn from_catalog(text: &str) -> Option<PgType> {
        let (text, array) = match text.strip_suffix("[]") {
            Some(element) => (element, true),
            None => (text, false),
        };
        if let Some(oid) = text.strip_prefix(ENUM_PREFIX) {
            let oid: u32 = oid.parse().ok()?;
            return Some(PgType {
                base: Base::Enum(oid),
                array,
                modifier: Modifier::None,
            });
        }
        let (name, modifier) = match text.split_once('(') {
            Some((name, rest)) => {
                let inner = rest.strip_suffix(')')?;
                let modifier = match inner.split_once(',') {
                    Some((p, s)) => Modifier::Numeric {
                        precision: p.trim().parse().ok()?,
                        scale: s.trim().parse().ok()?,
                    },
                    None => Modifier::Length(inner.trim().parse().ok()?),
                };
                (name, modifier)
            }
            None => (text, Modifier::None),
        };
        let base = base_by_name(name)?;
        Some(PgType { base, array, modifier })
    }

    /// The type of a type name as written in a cast or a column definition (`int`, `int4`, `varchar`,
    /// `timestamptz`, `serial` is not one: see [`Serial`]). `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<PgType> {
        let lower = name.to_ascii_lowercase();
        let lower = lower.strip_prefix("pg_catalog.").unwrap_or(&lower);
        if let Some(element) = lower.strip_prefix('_') {
            return base_by_name(element).map(|b| PgType::new(b).array());
        }
        base_by_name(lower).map(PgType::new)
    }
}

/// The catalog text of an enum type: this and its OID (`enum:1610613760`).
const ENUM_PREFIX: &str = "enum:";

impl fmt::Display for PgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sql_name())
    }
}

fn base_by_name(name: &str) -> Option<Base> {
    Some(match name {
        "bool" | "boolean" => Base::Bool,
        "int2" | "smallint" => Base::Int2,
        "int" | "int4" | "integer" => Base::Int4,
        "int8" | "bigint" => Base::Int8,
        "numeric" | "decimal" => Base::Numeric,
        "float4" | "real" => Base::Float4,
        "float8" | "double precision" | "float" => Base::Float8,
        "text" => Base::Text,
        "varchar" | "character varying" => Base::Varchar,
        "bpchar" | "char" | "character" => Base::Bpchar,
        "name" => Base::Name,
        "bytea" => Base::Bytea,
        "date" => Base::Date,
        "time" | "time without time zone" => Base::Time,
        "timetz" | "time with time zone" => Base::Timetz,
        "timestamp" | "timestamp without time zone" => Base::Timestamp,
        "timestamptz" | "timestamp with time zone" => Base::Timestamptz,
        "interval" => Base::Interval,
        "uuid" => Base::Uuid,
        "json" => Base::Json,
        "jsonb" => Base::Jsonb,
        "oid" => Base::Oid,
        "regclass" | "regtype" | "regproc" | "regprocedure" | "regnamespace" => Base::Regclass,
        _ => return None,
    })
}

/// PostgreSQL's built-in types the layer does not have: named in a cast or a column, they are 0A000 (a
/// feature missing), not 42704 (a type that does not exist).
const UNSUPPORTED_BUILTINS: &[&str] = &[
    "money",
    "point",
    "line",
    "lseg",
    "box",
    "path",
    "polygon",
    "circle",
    "inet",
    "cidr",
    "macaddr",
    "macaddr8",
    "bit",
    "varbit",
    "bit varying",
    "tsvector",
    "tsquery",
    "xml",
    "int4range",
    "int8range",
    "numrange",
    "tsrange",
    "tstzrange",
    "daterange",
    "int4multirange",
    "int8multirange",
    "nummultirange",
    "tsmultirange",
    "tstzmultirange",
    "datemultirange",
    "pg_lsn",
    "txid_snapshot",
    "pg_snapshot",
    "jsonpath",
    "record",
];

/// A serial pseudo-type: an integer column filled from a sequence made for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serial {
    /// `smallserial`
    Small,
    /// `serial`
    Regular,
    /// `bigserial`
    Big,
}

impl Serial {
    /// The integer type the column gets.
    pub fn column_type(self) -> PgType {
        match self {
            Serial::Small => PgType::INT2,
            Serial::Regular => PgType::INT4,
            Serial::Big => PgType::INT8,
        }
    }
}

/// What a column type written in SQL is: a type, a serial, or one the layer does not support (its name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// A supported type.
    Type(PgType),
    /// A serial pseudo-type.
    Serial(Serial),
    /// A user-defined enum type of the database (its name, lower case).
    Custom(String),
    /// Unsupported, with its SQL spelling.
    Unsupported(String),
}

/// The type a parsed SQL data type names.
pub fn from_data_type(data_type: &DataType) -> Written {
    let length = |l: &Option<CharacterLength>| match l {
        Some(CharacterLength::IntegerLength { length, .. }) => {
            u32::try_from(*length).map_or(Modifier::None, Modifier::Length)
        }
        _ => Modifier::None,
    };
    let precision = |p: &Option<u64>| {
        p.and_then(|p| u32::try_from(p).ok())
            .map_or(Modifier::None, Modifier::Length)
    };
    let ty = match data_type {
        DataType::Bool | DataType::Boolean => PgType::BOOL,
        DataType::SmallInt(_) | DataType::Int2(_) => PgType::INT2,
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) | DataType::MediumInt(_) => PgType::INT4,
        DataType::BigInt(_) | DataType::Int8(_) => PgType::INT8,
        DataType::Numeric(info) | DataType::Decimal(info) | DataType::Dec(info) => {
            let modifier = match info {
                ExactNumberInfo::None => Modifier::None,
                ExactNumberInfo::Precision(p) => Modifier::Numeric {
                    precision: u32::try_from(*p).unwrap_or(u32::MAX),
                    scale: 0,
                },
                ExactNumberInfo::PrecisionAndScale(p, s) => Modifier::Numeric {
                    precision: u32::try_from(*p).unwrap_or(u32::MAX),
                    scale: u32::try_from(*s).unwrap_or(u32::MAX),
                },
            };
            PgType::NUMERIC.with_modifier(modifier)
        }
        DataType::Real | DataType::Float4 => PgType::new(Base::Float4),
        DataType::Float(info) => match info {
            ExactNumberInfo::Precision(p) if *p <= 24 => PgType::new(Base::Float4),
            _ => PgType::FLOAT8,
        },
        DataType::Double(_) | DataType::DoublePrecision | DataType::Float8 => PgType::FLOAT8,
        DataType::Text | DataType::String(_) => PgType::TEXT,
        DataType::Varchar(l) | DataType::CharacterVarying(l) | DataType::CharVarying(l) => {
            PgType::new(Base::Varchar).with_modifier(length(l))
        }
        DataType::Char(l) | DataType::Character(l) => {
            // `char` alone is `char(1)`.
            let modifier = match length(l) {
                Modifier::None => Modifier::Length(1),
                m => m,
            };
            PgType::new(Base::Bpchar).with_modifier(modifier)
        }
        // `BLOB` is SQLite's spelling: kept working as `bytea` (an extension; PostgreSQL has no BLOB).
        DataType::Bytea | DataType::Blob(_) => PgType::BYTEA,
        DataType::Date => PgType::new(Base::Date),
        DataType::Time(p, tz) => match tz {
            TimezoneInfo::WithTimeZone | TimezoneInfo::Tz => PgType::new(Base::Timetz).with_modifier(precision(p)),
            _ => PgType::new(Base::Time).with_modifier(precision(p)),
        },
        DataType::Timestamp(p, tz) => match tz {
            TimezoneInfo::WithTimeZone | TimezoneInfo::Tz => PgType::TIMESTAMPTZ.with_modifier(precision(p)),
            _ => PgType::new(Base::Timestamp).with_modifier(precision(p)),
        },
        DataType::TimestampNtz(p) => PgType::new(Base::Timestamp).with_modifier(precision(p)),
        DataType::Interval { .. } => PgType::new(Base::Interval),
        DataType::Uuid => PgType::new(Base::Uuid),
        DataType::JSON => PgType::new(Base::Json),
        DataType::JSONB => PgType::new(Base::Jsonb),
        DataType::Regclass => PgType::new(Base::Regclass),
        DataType::Array(element) => {
            let inner = match element {
                ArrayElemTypeDef::AngleBracket(t)
                | ArrayElemTypeDef::SquareBracket(t, _)
                | ArrayElemTypeDef::Parenthesis(t) => t,
                _ => return Written::Unsupported(data_type.to_string()),
            };
            return match from_data_type(inner) {
                Written::Type(t) if !t.is_array() => Written::Type(t.array()),
                // `int[][]` is `int[]`: PostgreSQL ignores the dimensions a type declares.
                Written::Type(t) => Written::Type(t),
                _ => Written::Unsupported(data_type.to_string()),
            };
        }
        DataType::Custom(name, modifiers) => {
            let text = name.to_string().to_ascii_lowercase().replace('"', "");
            let text = text.strip_prefix("pg_catalog.").unwrap_or(&text).to_owned();
            match text.as_str() {
                "serial" | "serial4" => return Written::Serial(Serial::Regular),
                "bigserial" | "serial8" => return Written::Serial(Serial::Big),
                "smallserial" | "serial2" => return Written::Serial(Serial::Small),
                "timestamptz" => PgType::TIMESTAMPTZ,
                _ => match PgType::from_name(&text) {
                    Some(ty) => {
                        let number = |m: &sqlparser::ast::TypeModifier| -> Result<u32, ()> {
                            match m {
                                sqlparser::ast::TypeModifier::Number(n, _) => n.parse().map_err(|_| ()),
                                _ => Err(()),
                            }
                        };
                        let modifier = match modifiers.as_slice() {
                            [n] => number(n).map_or(Modifier::None, Modifier::Length),
                            [p, s] => match (number(p), number(s)) {
                                (Ok(precision), Ok(scale)) => Modifier::Numeric { precision, scale },
                                _ => Modifier::None,
                            },
                            _ => Modifier::None,
                        };
                        ty.with_modifier(modifier)
                    }
                    None if UNSUPPORTED_BUILTINS.contains(&text.as_str()) => return Written::Unsupported(text),
                    // A type of the database (an enum): its name folded as PostgreSQL folds names, a quoted
                    // part kept as written (Prisma's `"Role"`).
                    None => {
                        let folded: Vec<String> = name
                            .0
                            .iter()
                            .map(|part| match part.as_ident() {
                                Some(ident) if ident.quote_style.is_some() => ident.value.clone(),
                                Some(ident) => ident.value.to_ascii_lowercase(),
                                None => part.to_string().to_ascii_lowercase(),
                            })
                            .collect();
                        return Written::Custom(folded.join("."));
                    }
                },
            }
        }
        other => return Written::Unsupported(other.to_string()),
    };
    Written::Type(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_text_round_trips() {
        let types = [
            PgType::INT4,
            PgType::NUMERIC.with_modifier(Modifier::Numeric {
                precision: 10,
                scale: 2,
            }),
            PgType::new(Base::Varchar).with_modifier(Modifier::Length(20)),
            PgType::TEXT.array(),
            PgType::TIMESTAMPTZ.with_modifier(Modifier::Length(3)),
        ];
        for ty in types {
            assert_eq!(
                PgType::from_catalog(&ty.catalog_text()),
                Some(ty),
                "{}",
                ty.catalog_text()
            );
        }
    }

    #[test]
    fn format_type_names() {
        assert_eq!(
            PgType::new(Base::Varchar)
                .with_modifier(Modifier::Length(20))
                .sql_name(),
            "character varying(20)"
        );
        assert_eq!(
            PgType::TIMESTAMPTZ.with_modifier(Modifier::Length(3)).sql_name(),
            "timestamp(3) with time zone"
        );
        assert_eq!(PgType::INT4.array().sql_name(), "integer[]");
        assert_eq!(PgType::INT4.array().oid(), 1007);
    }
}
