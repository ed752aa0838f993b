//! Enum types in statements: `CREATE TYPE … AS ENUM`, `ALTER TYPE … ADD VALUE | RENAME VALUE | RENAME TO`,
//! `DROP TYPE`, a type name written in a column definition or a cast resolved to the database's enum type,
//! and `enum_range`/`enum_first`/`enum_last`. The model is [`crate::enums`].

use sqlparser::ast::{
    AlterType, AlterTypeAddValuePosition, AlterTypeOperation, DataType, Expr, Ident, ObjectName,
    UserDefinedTypeRepresentation,
};

use super::{Kind, Translation};
use crate::catalog::{self, quote_literal, Catalog};
use crate::enums::{self, EnumType, Position, CREATE_ENUMS_TABLE};
use crate::error::{PgError, DEPENDENT_OBJECTS_STILL_EXIST, DUPLICATE_OBJECT, UNDEFINED_OBJECT};
use crate::types::{self, Base, PgType, Written};

fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

/// The stored name of a type being made: in its schema, or the first schema of the `search_path`.
fn new_type_name(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    let (schema, name) = super::schema::split_name(name)?;
    let schema = match schema {
        Some(schema) => schema,
        None => super::schema::creation_schema(catalog)?,
    };
    super::schema::qualified(catalog, &schema, &name)
}

/// The stored name of an existing type: in its schema, or the first schema of the `search_path` that has
/// one of the name (as written when none has).
fn type_name(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    match super::schema::split_name(name)? {
        (Some(schema), name) => super::schema::qualified(catalog, &schema, &name),
        (None, name) => Ok(on_path(catalog, &name).unwrap_or(name)),
    }
}

/// The stored name of the enum type an unqualified name reaches through the `search_path`.
fn on_path(catalog: &Catalog, name: &str) -> Option<String> {
    catalog
        .search_path()
        .iter()
        .map(|schema| crate::schemas::sqlite_name(schema, name))
        .find(|stored| catalog.enums().by_name(stored).is_some())
}

fn steps_translation(tag: &str, steps: Vec<String>) -> Translation {
    let mut translation = Translation::single(String::new(), Kind::Other(tag.to_owned()));
    translation.steps = steps;
    translation
}

/// What a written type is, the database's enum types included: `Custom` names that are none stay `Custom`.
pub(crate) fn resolve(catalog: &Catalog, data_type: &DataType) -> Written {
    // An array of an enum type (`mood[]`, asyncpg's `= any($1::mood[])`): the element resolved as a type.
    if let DataType::Array(
        sqlparser::ast::ArrayElemTypeDef::AngleBracket(element)
        | sqlparser::ast::ArrayElemTypeDef::SquareBracket(element, _)
        | sqlparser::ast::ArrayElemTypeDef::Parenthesis(element),
    ) = data_type
    {
        if let Written::Type(ty) = resolve(catalog, element) {
            if matches!(ty.base(), Base::Enum(_)) {
                return Written::Type(if ty.is_array() { ty } else { ty.array() });
            }
        }
    }
    match types::from_data_type(data_type) {
        Written::Custom(name) => {
            let stored = match name.split_once('.') {
                Some((schema, bare)) if schema == crate::schemas::PUBLIC => Some(bare.to_owned()),
                Some(_) => Some(name.clone()),
                None => on_path(catalog, &name),
            };
            match stored.as_deref().and_then(|stored| catalog.enums().by_name(stored)) {
                Some(ty) => Written::Type(PgType::new(Base::Enum(ty.oid))),
                None => Written::Custom(name),
            }
        }
        other => other,
    }
}

/// The type a cast or a column names (42704 for a name that is no type).
pub(crate) fn written_type(catalog: &Catalog, data_type: &DataType) -> Result<PgType, PgError> {
    match resolve(catalog, data_type) {
        Written::Type(ty) => Ok(ty),
        Written::Serial(_) => Err(PgError::new(
            UNDEFINED_OBJECT,
            format!("type \"{data_type}\" does not exist"),
        )),
        Written::Custom(name) => Err(PgError::new(
            UNDEFINED_OBJECT,
            format!("type \"{name}\" does not exist"),
        )),
        Written::Unsupported(name) => Err(PgError::unsupported(format!("the type {name}"))),
    }
}

/// A value of an enum type carries the type's collation, so comparisons and ORDER BY follow the labels'
/// order wherever it goes (a column of the type has it as its own).
pub(crate) fn with_collation(expr: Expr, ty: PgType) -> Expr {
    match ty.base() {
        Base::Enum(oid) if !ty.is_array() => Expr::Collate {
            expr: Box::new(Expr::Nested(Box::new(expr))),
            collation: ObjectName::from(vec![Ident::with_quote('"', enums::collation_name(oid))]),
        },
        _ => expr,
    }
}

/// The SQLite column type and collation clause of an enum column.
pub(crate) fn column_collation(ty: PgType) -> Option<String> {
    match ty.base() {
        Base::Enum(oid) if !ty.is_array() => Some(format!(
            " COLLATE {}",
            catalog::quote_ident(&enums::collation_name(oid))
        )),
        _ => None,
    }
}

/// The name `pg_typeof` and `format_type` print for a type.
pub(crate) fn display_name(catalog: &Catalog, ty: PgType) -> String {
    match ty.base() {
        Base::Enum(oid) => {
            let name = catalog
                .enums()
                .by_oid(oid)
                .map_or_else(|| oid.to_string(), |t| t.name.clone());
            if ty.is_array() {
                format!("{name}[]")
            } else {
                name
            }
        }
        _ => ty.sql_name(),
    }
}

/// Whether a relation or type of this name exists (a new type's name must be free).
fn name_taken(conn: &rusqlite::Connection, catalog: &Catalog, name: &str) -> bool {
    catalog.enums().by_name(name).is_some()
        || PgType::from_name(name).is_some()
        || conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ?1 COLLATE NOCASE)",
                [name],
                |row| row.get(0),
            )
            .unwrap_or(false)
}

/// `CREATE TYPE name AS ENUM (labels)`; other kinds of type are refused (0A000).
pub(crate) fn create(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    name: &ObjectName,
    representation: Option<&UserDefinedTypeRepresentation>,
) -> Result<(Translation, EnumType), PgError> {
    let Some(UserDefinedTypeRepresentation::Enum { labels }) = representation else {
        return Err(PgError::unsupported("CREATE TYPE other than AS ENUM"));
    };
    let name = new_type_name(catalog, name)?;
    if name_taken(conn, catalog, &name) {
        return Err(PgError::new(
            DUPLICATE_OBJECT,
            format!("type \"{name}\" already exists"),
        ));
    }
    let labels: Vec<String> = labels.iter().map(|l| l.value.clone()).collect();
    let oid = enums::oid_of(next_id(conn, catalog)).ok_or_else(|| {
        PgError::new(
            crate::error::PROGRAM_LIMIT_EXCEEDED,
            "no OID left for another enum type",
        )
    })?;
    let ty = EnumType::create(oid, &name, &labels)?;
    let mut steps = vec![CREATE_ENUMS_TABLE.to_owned(), enums::insert_sql(&ty)];
    steps.extend(catalog::BUMP_SCHEMA_VERSION.iter().map(|s| (*s).to_owned()));
    Ok((steps_translation("CREATE TYPE", steps), ty))
}

/// The id a new enum type's row takes: past every id the table ever gave (AUTOINCREMENT's record, so a
/// dropped type's OID is never reused) and every type the catalog knows (made earlier in the same text).
fn next_id(conn: &rusqlite::Connection, catalog: &Catalog) -> i64 {
    let given: i64 = conn
        .query_row(
            "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = '_cambium_enums'), 0)",
            [],
            |row| row.get(0),
        )
        .unwrap_or(0);
    let known = catalog.enums().all().map(|t| enums::id_of(t.oid)).max().unwrap_or(0);
    given.max(known) + 1
}

fn existing<'a>(catalog: &'a Catalog, name: &ObjectName) -> Result<&'a EnumType, PgError> {
    let name = type_name(catalog, name)?;
    catalog
        .enums()
        .by_name(&name)
        .map(AsRef::as_ref)
        .ok_or_else(|| PgError::new(UNDEFINED_OBJECT, format!("type \"{name}\" does not exist")))
}

/// `ALTER TYPE name ADD VALUE [IF NOT EXISTS] l [BEFORE|AFTER m] | RENAME VALUE a TO b | RENAME TO n`.
pub(crate) fn alter(catalog: &Catalog, alter: &AlterType) -> Result<Translation, PgError> {
    let ty = existing(catalog, &alter.name)?;
    let mut steps = Vec::new();
    match &alter.operation {
        AlterTypeOperation::AddValue(add) => {
            let position = match &add.position {
                None => Position::Last,
                Some(AlterTypeAddValuePosition::Before(l)) => Position::Before(l.value.clone()),
                Some(AlterTypeAddValuePosition::After(l)) => Position::After(l.value.clone()),
            };
            if let Some(added) = ty.add_value(&add.value.value, &position, add.if_not_exists)? {
                steps.push(added.update_sql());
            }
        }
        AlterTypeOperation::RenameValue(rename) => {
            let renamed = ty.rename_value(&rename.from.value, &rename.to.value)?;
            steps.push(renamed.update_sql());
            // Values are stored as their labels: the rows that hold the old one are rewritten.
            for (table, column) in catalog.columns_of_type(|t| matches!(t.base(), Base::Enum(oid) if oid == ty.oid)) {
                steps.push(format!(
                    "UPDATE {table} SET {column} = {to} WHERE {column} = {from}",
                    table = catalog::quote_ident(table),
                    column = catalog::quote_ident(column),
                    to = quote_literal(&rename.to.value),
                    from = quote_literal(&rename.from.value),
                ));
            }
        }
        AlterTypeOperation::Rename(rename) => {
            let to = fold(&rename.new_name);
            if catalog.enums().by_name(&to).is_some() {
                return Err(PgError::new(DUPLICATE_OBJECT, format!("type \"{to}\" already exists")));
            }
            steps.push(format!(
                "UPDATE _cambium_enums SET name = {} WHERE name = {}",
                quote_literal(&to),
                quote_literal(&ty.name)
            ));
        }
    }
    if !steps.is_empty() {
        steps.extend(catalog::BUMP_SCHEMA_VERSION.iter().map(|s| (*s).to_owned()));
    }
    Ok(steps_translation("ALTER TYPE", steps))
}

/// `DROP TYPE [IF EXISTS] a, b`: a type a column still has is not dropped (2BP01; with CASCADE, 0A000:
/// dropping the columns is not done).
pub(crate) fn drop(
    catalog: &Catalog,
    if_exists: bool,
    names: &[ObjectName],
    cascade: bool,
) -> Result<Translation, PgError> {
    let mut steps = Vec::new();
    for name in names {
        let folded = type_name(catalog, name)?;
        let Some(ty) = catalog.enums().by_name(&folded) else {
            if if_exists {
                continue;
            }
            return Err(PgError::new(
                UNDEFINED_OBJECT,
                format!("type \"{folded}\" does not exist"),
            ));
        };
        let column = catalog
            .columns_of_type(|t| matches!(t.base(), Base::Enum(oid) if oid == ty.oid))
            .next();
        if let Some((table, column)) = column {
            if cascade {
                return Err(PgError::unsupported("DROP TYPE … CASCADE of a type columns have"));
            }
            return Err(PgError::new(
                DEPENDENT_OBJECTS_STILL_EXIST,
                format!(
                    "cannot drop type {} because other objects depend on it: column {column} of table {table}",
                    ty.name
                ),
            ));
        }
        steps.push(format!(
            "DELETE FROM _cambium_enums WHERE name = {}",
            quote_literal(&ty.name)
        ));
    }
    if !steps.is_empty() {
        steps.extend(catalog::BUMP_SCHEMA_VERSION.iter().map(|s| (*s).to_owned()));
    }
    Ok(steps_translation("DROP TYPE", steps))
}

/// `enum_range(x)`, `enum_range(a, b)`, `enum_first(x)`, `enum_last(x)` on a value of an enum type (the type
/// is what counts: `NULL::mood` is the usual argument), as calls on the type's OID.
pub(crate) fn rewrite_call(name: &str, args: &[Expr], types: &[Option<PgType>]) -> Option<Expr> {
    let oid = types.iter().flatten().find_map(|t| match t.base() {
        Base::Enum(oid) if !t.is_array() => Some(oid),
        _ => None,
    })?;
    let function = match (name, args.len()) {
        ("enum_range", 1) => format!("pg_enum_range({oid})"),
        ("enum_range", 2) => format!("pg_enum_range({oid}, {}, {})", args[0], args[1]),
        ("enum_first", 1) => format!("pg_enum_first({oid})"),
        ("enum_last", 1) => format!("pg_enum_last({oid})"),
        _ => return None,
    };
    let expr = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(&function)
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    if name == "enum_range" {
        return Some(expr);
    }
    let ty = PgType::new(Base::Enum(oid));
    Some(with_collation(super::expr::coerce_call(expr, ty), ty))
}
