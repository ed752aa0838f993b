//! The rows of the `pg_type` view: the types the layer supports, their arrays, and a few internal ones.

use crate::types::{Base, PgType};

pub(super) const TYPE_COLUMNS_NAMES: &str =
    "oid, typname, typlen, typbyval, typcategory, typelem, typarray, typcollation, typinput, typoutput, typtype, typnamespace";

/// The types the layer supports (and `char`), as a VALUES list for the `pg_type` view.
pub(super) fn type_rows() -> String {
    let mut rows = vec![
        "(27, 'tid', 6, 0, 'U', 0, 1010, 0, 'tidin', 'tidout', 'b', 11)".to_owned(),
        "(28, 'xid', 4, 1, 'U', 0, 1011, 0, 'xidin', 'xidout', 'b', 11)".to_owned(),
        "(29, 'cid', 4, 1, 'U', 0, 1012, 0, 'cidin', 'cidout', 'b', 11)".to_owned(),
    ];
    for base in Base::ALL {
        let scalar = PgType::new(base);
        let array = scalar.array();
        let len = scalar.type_length();
        let (byval, category) = match base {
            Base::Bool => (1, 'B'),
            Base::Int2 | Base::Int4 | Base::Oid | Base::Regclass | Base::Int8 | Base::Float4 | Base::Float8 => (1, 'N'),
            Base::Numeric => (0, 'N'),
            Base::Text | Base::Varchar | Base::Bpchar | Base::Name => (0, 'S'),
            Base::Date | Base::Time | Base::Timestamp | Base::Timestamptz => (1, 'D'),
            Base::Timetz => (0, 'D'),
            Base::Interval => (0, 'T'),
            Base::Uuid | Base::Bytea | Base::Json | Base::Jsonb => (0, 'U'),
            Base::Char => (1, 'Z'),
            // Not among `Base::ALL`: enum types' rows come from the database's enums.
            Base::Enum(_) => (1, 'E'),
        };
        let collation = if matches!(base, Base::Text | Base::Varchar | Base::Bpchar | Base::Name) {
            100
        } else {
            0
        };
        let name = scalar.internal_name();
        // PostgreSQL's I/O functions: `int4in`, but `numeric_in`, `timestamp_in`.
        let separator = match base {
            Base::Numeric
            | Base::Date
            | Base::Time
            | Base::Timestamp
            | Base::Timestamptz
            | Base::Interval
            | Base::Uuid
            | Base::Json
            | Base::Jsonb => "_",
            _ => "",
        };
        rows.push(format!(
            "({}, '{name}', {len}, {byval}, '{category}', 0, {}, {collation}, '{name}{separator}in', '{name}{separator}out', 'b', 11)",
            scalar.oid(),
            array.oid()
        ));
        rows.push(format!(
            "({}, '_{name}', -1, 0, 'A', {}, 0, {collation}, 'array_in', 'array_out', 'b', 11)",
            array.oid(),
            scalar.oid()
        ));
    }
    // The database's enum types and their arrays, from `_cambium_enums` (see `crate::enums` for the OIDs).
    format!(
        "VALUES {} UNION ALL SELECT {base} + e.id * {stride}, {bare}, 4, 1, 'E', 0, {base} + e.id * {stride} + 1, 0, \
         'enum_in', 'enum_out', 'e', {nsp} FROM _pgc_enumdefs e {join} \
         UNION ALL SELECT {base} + e.id * {stride} + 1, '_' || {bare}, -1, 0, 'A', {base} + e.id * {stride}, 0, 0, \
         'array_in', 'array_out', 'b', {nsp} FROM _pgc_enumdefs e {join}",
        rows.join(", "),
        base = crate::enums::ENUM_OID_BASE,
        stride = crate::enums::ENUM_OID_STRIDE,
        // A type of another schema than `public` is stored as `schema.name` (see `crate::schemas`).
        join = "LEFT JOIN _pgc_nspdefs n ON n.name = substr(e.name, 1, max(instr(e.name, '.') - 1, 0))",
        bare = "CASE WHEN n.name IS NULL THEN e.name ELSE substr(e.name, length(n.name) + 2) END",
        nsp = "coalesce(1593835520 + n.id, 2200)",
    )
}
