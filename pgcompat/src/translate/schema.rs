//! Schemas in statements: names resolved to the SQLite names of [`crate::schemas`] (a qualified name by its
//! schema, an unqualified one through the session's `search_path`: the first schema on it holding the
//! relation, and the first schema on it for a relation being made), and `CREATE`/`DROP`/`ALTER SCHEMA`.

use sqlparser::ast::{Ident, ObjectName, ObjectNamePart, TableAlias};

use crate::catalog::{quote_literal, Catalog, BUMP_SCHEMA_VERSION};
use crate::error::{PgError, INVALID_SCHEMA_NAME, UNDEFINED_TABLE};
use crate::schemas::{self, PUBLIC};

use super::{Kind, Translation};

/// An identifier as PostgreSQL keeps it: unquoted folded to lower case, quoted as written.
pub(crate) fn fold_ident(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

/// A name's parts, folded.
pub(crate) fn folded_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => fold_ident(ident),
            other => other.to_string(),
        })
        .collect()
}

/// A possibly qualified name as (schema if given, name), folded; a database name before the schema is
/// accepted (there is one database a session sees).
pub(crate) fn split_name(name: &ObjectName) -> Result<(Option<String>, String), PgError> {
    let mut parts = folded_parts(name);
    let Some(last) = parts.pop() else {
        return Err(PgError::new(crate::error::SYNTAX_ERROR, "an empty name"));
    };
    match parts.len() {
        0 => Ok((None, last)),
        1 | 2 => Ok((parts.pop(), last)),
        _ => Err(PgError::new(
            crate::error::SYNTAX_ERROR,
            format!("improper qualified name (too many dotted names): {name}"),
        )),
    }
}

fn no_schema(schema: &str) -> PgError {
    PgError::new(INVALID_SCHEMA_NAME, format!("schema \"{schema}\" does not exist"))
}

/// The SQLite name of relation `name` of a schema that must exist.
pub(crate) fn qualified(catalog: &Catalog, schema: &str, name: &str) -> Result<String, PgError> {
    if !catalog.schema_exists(schema) {
        return Err(no_schema(schema));
    }
    Ok(schemas::sqlite_name(schema, name))
}

/// A SQLite name read back as (schema, the relation's own name).
pub(crate) fn schema_of<'a>(catalog: &Catalog, sqlite: &'a str) -> (String, &'a str) {
    let (schema, name) = schemas::split_sqlite_name(sqlite, catalog.schemas());
    (schema.to_owned(), name)
}

/// The SQLite name an unqualified relation name reaches through the `search_path`, if any schema on it
/// holds one.
pub(crate) fn on_path(catalog: &Catalog, name: &str) -> Option<String> {
    catalog
        .search_path()
        .iter()
        .map(|schema| schemas::sqlite_name(schema, name))
        .find(|sqlite| catalog.relation_exists(sqlite))
}

/// The SQLite name of an existing relation named in a statement (read, altered or dropped). An unqualified
/// name found on no schema of the path stays as written (a CTE, or a missing relation SQLite reports),
/// except that a `public` relation off the path is not reached (42P01).
pub(crate) fn existing(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    match split_name(name)? {
        (Some(schema), name) => qualified(catalog, &schema, &name),
        (None, name) => match on_path(catalog, &name) {
            Some(found) => Ok(found),
            None => not_on_path(catalog, name),
        },
    }
}

/// An unqualified name no schema of the path holds: as written, or 42P01 when that would reach a `public`
/// relation the path leaves out.
pub(crate) fn not_on_path(catalog: &Catalog, name: String) -> Result<String, PgError> {
    let public_on_path = catalog.search_path().iter().any(|s| s == PUBLIC);
    if !public_on_path && catalog.relation_exists(&name) {
        return Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{name}\" does not exist"),
        ));
    }
    Ok(name)
}

/// The schema an unqualified object is made in: the first schema of the path (3F000 when none exists).
pub(crate) fn creation_schema(catalog: &Catalog) -> Result<String, PgError> {
    catalog
        .search_path()
        .first()
        .cloned()
        .ok_or_else(|| PgError::new(INVALID_SCHEMA_NAME, "no schema has been selected to create in"))
}

/// The SQLite name of a relation being made.
pub(crate) fn created(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    let (schema, name) = split_name(name)?;
    let schema = match schema {
        Some(schema) => schema,
        None => creation_schema(catalog)?,
    };
    if schema == PUBLIC {
        // A `public` name that would read back as another schema's relation.
        if let Some((prefix, _)) = name.split_once('.') {
            if catalog.schema_exists(prefix) {
                return Err(PgError::unsupported(format!(
                    "a relation of schema public named \"{name}\" while a schema \"{prefix}\" exists"
                )));
            }
        }
    }
    qualified(catalog, &schema, &name)
}

/// The SQLite name and SQLite kind of the relation a statement makes, if it makes one.
pub(crate) fn created_relation(
    catalog: &Catalog,
    statement: &sqlparser::ast::Statement,
) -> Option<(String, &'static str)> {
    use sqlparser::ast::Statement;
    match statement {
        Statement::CreateTable(create) => Some((created(catalog, &create.name).ok()?, "table")),
        Statement::CreateView(view) => Some((created(catalog, &view.name).ok()?, "view")),
        Statement::CreateSequence { name, .. } => Some((created(catalog, name).ok()?, "view")),
        Statement::CreateIndex(index) => {
            let table = existing(catalog, &index.table_name).ok()?;
            let name = super::ddl::fold_name(index.name.as_ref()?);
            Some((schemas::sqlite_name(&schema_of(catalog, &table).0, &name), "index"))
        }
        _ => None,
    }
}

/// A relation name of a FROM item or DML target rewritten to its SQLite name: one quoted identifier for a
/// relation of a schema other than `public`, aliased by its own name (unless aliased already) so that
/// `t.col` still reads it; a `public` relation's name loses its qualification only. `ctes` are the CTE
/// names in scope, which an unqualified name reaches first.
pub(crate) fn rewrite_relation(
    catalog: &Catalog,
    name: &mut ObjectName,
    alias: &mut Option<TableAlias>,
    ctes: &[String],
) -> Result<(), PgError> {
    let (schema, bare) = split_name(name)?;
    if schema.is_none() && ctes.iter().any(|c| c.eq_ignore_ascii_case(&bare)) {
        return Ok(());
    }
    if let Some(schema) = schema.as_deref().filter(|s| !catalog.schema_exists(s)) {
        // A relation read or written in a schema that does not exist is a missing relation to PostgreSQL.
        return Err(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{schema}.{bare}\" does not exist"),
        ));
    }
    let sqlite = existing(catalog, name)?;
    set_sqlite_name(name, alias, &sqlite, &bare);
    Ok(())
}

/// The relations of FROM items outside a query's walk (`UPDATE … FROM`) rewritten to their SQLite names.
pub(crate) fn rewrite_from_items(
    catalog: &Catalog,
    tables: &mut [sqlparser::ast::TableWithJoins],
) -> Result<(), PgError> {
    for table in tables {
        let factors = std::iter::once(&mut table.relation).chain(table.joins.iter_mut().map(|j| &mut j.relation));
        for factor in factors {
            if let sqlparser::ast::TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } = factor
            {
                rewrite_relation(catalog, name, alias, &[])?;
            }
        }
    }
    Ok(())
}

/// Points `name` at the SQLite name `sqlite` of a relation whose own name is `bare`.
pub(crate) fn set_sqlite_name(name: &mut ObjectName, alias: &mut Option<TableAlias>, sqlite: &str, bare: &str) {
    let last = name
        .0
        .pop()
        .unwrap_or_else(|| ObjectNamePart::Identifier(Ident::new(bare)));
    if sqlite == bare {
        *name = ObjectName(vec![last]);
        return;
    }
    *name = ObjectName::from(vec![Ident::with_quote('"', sqlite)]);
    if alias.is_none() {
        *alias = Some(TableAlias {
            explicit: true,
            name: Ident::with_quote('"', bare),
            columns: Vec::new(),
            at: None,
        });
    }
}

/// The relations (SQLite names, lower case) of a schema.
fn relations_of<'a>(catalog: &'a Catalog, schema: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let prefix = format!("{}.", schema.to_ascii_lowercase());
    catalog.relation_names().filter(move |n| n.starts_with(&prefix))
}

fn schema_ddl(tag: &str, mut steps: Vec<String>) -> Translation {
    steps.insert(0, schemas::CREATE_SCHEMAS_TABLE.to_owned());
    steps.extend(BUMP_SCHEMA_VERSION.iter().map(|s| (*s).to_owned()));
    let mut t = Translation::single(String::new(), Kind::Other(tag.to_owned()));
    t.steps = steps;
    t
}

/// `CREATE SCHEMA [IF NOT EXISTS] name [AUTHORIZATION role]`.
pub(crate) fn create(
    catalog: &Catalog,
    schema_name: &sqlparser::ast::SchemaName,
    if_not_exists: bool,
) -> Result<Translation, PgError> {
    use sqlparser::ast::SchemaName;
    let (name, owner) = match schema_name {
        SchemaName::Simple(name) => (folded_parts(name).join("."), None),
        SchemaName::NamedAuthorization(name, role) => (folded_parts(name).join("."), role_name(role)),
        // `AUTHORIZATION CURRENT_USER` alone names the schema after the user: not known here.
        SchemaName::UnnamedAuthorization(role) => match role_name(role) {
            Some(role) => (role.clone(), Some(role)),
            None => {
                return Err(PgError::unsupported(
                    "CREATE SCHEMA AUTHORIZATION CURRENT_USER without a name",
                ))
            }
        },
    };
    check_new_name(&name)?;
    if catalog.schema_exists(&name) {
        if if_not_exists {
            return Ok(super::bare(Kind::Other("CREATE SCHEMA".to_owned())));
        }
        return Err(PgError::new(
            crate::error::DUPLICATE_SCHEMA,
            format!("schema \"{name}\" already exists"),
        ));
    }
    if let Some(clash) = relations_of(catalog, &name).next() {
        return Err(PgError::unsupported(format!(
            "a schema \"{name}\" while the relation \"{clash}\" of schema public has its name as a prefix"
        )));
    }
    if catalog.schemas().len() as i64 >= schemas::SCHEMAS_MAX {
        return Err(PgError::new(crate::error::PROGRAM_LIMIT_EXCEEDED, "too many schemas"));
    }
    Ok(schema_ddl(
        "CREATE SCHEMA",
        vec![schemas::insert_sql(&name, owner.as_deref())],
    ))
}

/// A role named in `AUTHORIZATION`; `None` for `CURRENT_USER`/`SESSION_USER` (the session's user).
fn role_name(role: &Ident) -> Option<String> {
    let folded = fold_ident(role);
    let current =
        role.quote_style.is_none() && matches!(folded.as_str(), "current_user" | "session_user" | "current_role");
    (!current).then_some(folded)
}

fn check_new_name(name: &str) -> Result<(), PgError> {
    if name.contains('.') {
        return Err(PgError::unsupported(format!(
            "a schema name holding a dot (\"{name}\")"
        )));
    }
    if name.starts_with("pg_") {
        return Err(PgError::new(
            crate::error::RESERVED_NAME,
            format!("unacceptable schema name \"{name}\""),
        ));
    }
    if name == "information_schema" || crate::catalog::is_internal_table(name) {
        return Err(PgError::new(
            crate::error::RESERVED_NAME,
            format!("the schema name \"{name}\" is reserved"),
        ));
    }
    Ok(())
}

/// `DROP SCHEMA [IF EXISTS] a, b [CASCADE | RESTRICT]`: a schema holding objects is refused (2BP01) unless
/// CASCADE, which drops its tables, views, sequences and enum types first.
pub(crate) fn drop(
    catalog: &Catalog,
    names: &[ObjectName],
    if_exists: bool,
    cascade: bool,
) -> Result<Translation, PgError> {
    let mut steps = Vec::new();
    for name in names {
        let name = folded_parts(name).join(".");
        if name == PUBLIC {
            return Err(PgError::unsupported("dropping the schema public"));
        }
        if !catalog.schema_exists(&name) {
            if if_exists {
                continue;
            }
            return Err(no_schema(&name));
        }
        let objects = contents(catalog, &name);
        if !objects.is_empty() && !cascade {
            return Err(PgError::new(
                crate::error::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("cannot drop schema {name} because other objects depend on it"),
            ));
        }
        steps.extend(drop_contents(catalog, &objects)?);
        steps.extend(super::comment::forget_schema(catalog, &name));
        steps.push(schemas::delete_sql(&name));
    }
    Ok(schema_ddl("DROP SCHEMA", steps))
}

/// What a schema holds, as the names DROP would take.
struct Contents {
    tables: Vec<ObjectName>,
    views: Vec<ObjectName>,
    sequences: Vec<ObjectName>,
    types: Vec<ObjectName>,
}

impl Contents {
    fn is_empty(&self) -> bool {
        self.tables.is_empty() && self.views.is_empty() && self.sequences.is_empty() && self.types.is_empty()
    }
}

fn quoted_name(sqlite: &str) -> ObjectName {
    ObjectName::from(vec![Ident::with_quote('"', sqlite)])
}

fn contents(catalog: &Catalog, schema: &str) -> Contents {
    let mut found = Contents {
        tables: Vec::new(),
        views: Vec::new(),
        sequences: Vec::new(),
        types: Vec::new(),
    };
    let prefix = format!("{schema}.");
    for name in relations_of(catalog, schema) {
        if catalog.sequence(name).is_some() {
            // A serial column's sequence goes with its table.
            if catalog.sequence(name).is_some_and(|s| s.owner.is_none()) {
                found.sequences.push(quoted_name(name));
            }
        } else if catalog.table(name).is_some() {
            found.tables.push(quoted_name(name));
        } else if !catalog.relation_is_index(name) {
            found.views.push(quoted_name(name));
        }
    }
    for ty in catalog.enums().all() {
        if ty.name.starts_with(&prefix) {
            found.types.push(quoted_name(&ty.name));
        }
    }
    found
}

fn drop_contents(catalog: &Catalog, objects: &Contents) -> Result<Vec<String>, PgError> {
    use sqlparser::ast::ObjectType;
    let mut steps = Vec::new();
    // Views first (they may read the tables), types last (columns of the tables have them).
    if !objects.views.is_empty() {
        steps.extend(super::ddl::drop(catalog, ObjectType::View, true, &objects.views, true)?.steps);
    }
    if !objects.tables.is_empty() {
        steps.extend(super::ddl::drop(catalog, ObjectType::Table, true, &objects.tables, true)?.steps);
    }
    if !objects.sequences.is_empty() {
        steps.extend(super::sequence::drop(catalog, true, &objects.sequences, true)?.steps);
    }
    if !objects.types.is_empty() {
        steps.extend(drop_types_sql(&objects.types));
    }
    Ok(steps)
}

fn drop_types_sql(types: &[ObjectName]) -> Vec<String> {
    types
        .iter()
        .map(|name| {
            format!(
                "DELETE FROM _cambium_enums WHERE name = {}",
                quote_literal(&folded_parts(name).join("."))
            )
        })
        .collect()
}

/// `ALTER SCHEMA name RENAME TO new`, `ALTER SCHEMA name OWNER TO role` (other forms: 0A000).
pub(crate) fn alter(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    alter: &sqlparser::ast::AlterSchema,
) -> Result<Translation, PgError> {
    use sqlparser::ast::AlterSchemaOperation;
    let from = folded_parts(&alter.name).join(".");
    if let [AlterSchemaOperation::OwnerTo { .. }] = alter.operations.as_slice() {
        // pg_dump gives every schema its owner: one role owns everything.
        if !catalog.schema_exists(&from) {
            return Err(no_schema(&from));
        }
        return Ok(super::bare(Kind::Other("ALTER SCHEMA".to_owned())));
    }
    let [AlterSchemaOperation::Rename { name: to }] = alter.operations.as_slice() else {
        return Err(PgError::unsupported(format!("{alter}")));
    };
    let to = folded_parts(to).join(".");
    if from == PUBLIC {
        return Err(PgError::unsupported("renaming the schema public"));
    }
    if !catalog.schema_exists(&from) {
        return Err(no_schema(&from));
    }
    check_new_name(&to)?;
    if catalog.schema_exists(&to) {
        return Err(PgError::new(
            crate::error::DUPLICATE_SCHEMA,
            format!("schema \"{to}\" already exists"),
        ));
    }
    let mut steps = super::schema_move::rename_schema(conn, catalog, &from, &to)?;
    steps.extend(super::comment::rename_schema(catalog, &from, &to));
    steps.push(format!(
        "UPDATE _cambium_schemas SET name = {} WHERE name = {}",
        quote_literal(&to),
        quote_literal(&from)
    ));
    Ok(schema_ddl("ALTER SCHEMA", steps))
}

#[cfg(test)]
mod tests {
    use crate::functions::testing::row_after;

    fn row(setup: &[&str], sql: &str) -> Vec<Option<String>> {
        row_after(setup, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn code(setup: &[&str], sql: &str) -> &'static str {
        match row_after(setup, sql) {
            Ok(row) => panic!("{sql}: answered {row:?}"),
            Err(e) => e.code,
        }
    }

    fn text(values: &[&str]) -> Vec<Option<String>> {
        values.iter().map(|v| Some((*v).to_owned())).collect()
    }

    const TWO_THINGS: &[&str] = &[
        "CREATE TABLE things (what text)",
        "INSERT INTO things VALUES ('public')",
        "CREATE SCHEMA app",
        "CREATE TABLE app.things (what text)",
        "INSERT INTO app.things VALUES ('app')",
    ];

    #[test]
    fn same_named_tables_resolve_through_the_search_path() {
        let mut setup = TWO_THINGS.to_vec();
        assert_eq!(row(&setup, "SELECT what FROM things"), text(&["public"]));
        assert_eq!(row(&setup, "SELECT what FROM app.things"), text(&["app"]));
        // The same text, translated once under each path: never the stale translation.
        setup.extend([
            "SELECT what FROM things",
            "SELECT set_config('search_path', 'app, public', false)",
        ]);
        assert_eq!(row(&setup, "SELECT what FROM things"), text(&["app"]));
        assert_eq!(
            row(&setup, "SELECT current_schema(), current_schemas(true)"),
            text(&["app", "{pg_catalog,app,public}"])
        );
        setup.push("INSERT INTO things VALUES ('second')");
        assert_eq!(row(&setup, "SELECT count(*) FROM app.things"), text(&["2"]));
        assert_eq!(
            row(&setup, "SELECT app.things.what FROM app.things ORDER BY 1 LIMIT 1"),
            text(&["app"])
        );
    }

    #[test]
    fn an_empty_path_finds_and_makes_nothing() {
        let mut setup = TWO_THINGS.to_vec();
        setup.push("SELECT set_config('search_path', '', false)");
        assert_eq!(code(&setup, "SELECT what FROM things"), "42P01");
        assert_eq!(code(&setup, "CREATE TABLE t (x int)"), "3F000");
        assert_eq!(row(&setup, "SELECT what FROM public.things"), text(&["public"]));
        assert_eq!(row(&setup, "SELECT current_schema() IS NULL"), text(&["t"]));
        assert_eq!(code(&setup, "SELECT * FROM nosuch.t"), "42P01");
        assert_eq!(code(&setup, "CREATE TABLE nosuch.t (x int)"), "3F000");
    }

    #[test]
    fn schemas_are_made_refused_and_dropped_as_postgresql_does() {
        let setup = TWO_THINGS.to_vec();
        assert_eq!(code(&setup, "CREATE SCHEMA app"), "42P06");
        assert_eq!(code(&setup, "CREATE SCHEMA pg_x"), "42939");
        assert_eq!(code(&setup, "DROP SCHEMA app"), "2BP01");
        assert_eq!(code(&setup, "DROP SCHEMA nosuch"), "3F000");
        let mut dropped = setup.clone();
        dropped.extend(["CREATE SCHEMA IF NOT EXISTS app", "DROP SCHEMA app CASCADE"]);
        assert_eq!(code(&dropped, "SELECT * FROM app.things"), "42P01");
        assert_eq!(row(&dropped, "SELECT what FROM things"), text(&["public"]));
        assert_eq!(
            row(&dropped, "SELECT count(*) FROM pg_namespace WHERE nspname = 'app'"),
            text(&["0"])
        );
    }

    #[test]
    fn the_catalog_shows_each_relation_in_its_schema() {
        let mut setup = TWO_THINGS.to_vec();
        setup.extend([
            "CREATE SEQUENCE app.counter",
            "CREATE VIEW app.v AS SELECT what FROM app.things",
        ]);
        assert_eq!(
            row(
                &setup,
                "SELECT string_agg(n.nspname || '.' || c.relname, ',' ORDER BY n.nspname, c.relname) \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            ),
            text(&["app.counter,app.things,app.v,public.things"])
        );
        assert_eq!(
            row(&setup, "SELECT 'app.things'::regclass::text, 'things'::regclass::text"),
            text(&["app.things", "things"])
        );
        assert_eq!(
            row(
                &setup,
                "SELECT nextval('app.counter'), to_regclass('app.nothing') IS NULL"
            ),
            text(&["1", "t"])
        );
        assert_eq!(
            row(
                &setup,
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'app'"
            ),
            text(&["2"])
        );
    }

    #[test]
    fn relations_move_between_schemas() {
        let mut setup = TWO_THINGS.to_vec();
        setup.extend([
            "CREATE SCHEMA other",
            "CREATE VIEW app.v AS SELECT what FROM app.things",
            "CREATE INDEX things_what ON app.things (what)",
            "ALTER TABLE app.things SET SCHEMA other",
            "ALTER SCHEMA app RENAME TO renamed",
        ]);
        assert_eq!(row(&setup, "SELECT what FROM renamed.v"), text(&["app"]));
        assert_eq!(
            row(
                &setup,
                "SELECT schemaname, indexname FROM pg_indexes WHERE tablename = 'things'"
            ),
            text(&["other", "things_what"])
        );
        assert_eq!(code(&setup, "SELECT * FROM app.v"), "42P01");
    }

    #[test]
    fn quoted_names_keep_their_case() {
        let setup = [
            "CREATE SCHEMA \"Mixed Case\"",
            "CREATE TABLE \"Mixed Case\".\"Table One\" (\"Id\" int, other int)",
            "INSERT INTO \"Mixed Case\".\"Table One\" VALUES (1, 2)",
        ];
        assert_eq!(
            row(&setup, "SELECT \"Id\", OTHER FROM \"Mixed Case\".\"Table One\""),
            text(&["1", "2"])
        );
        assert_eq!(code(&setup, "SELECT id FROM \"Mixed Case\".\"Table One\""), "42703");
        assert_eq!(code(&setup, "SELECT t.id FROM \"Mixed Case\".\"Table One\" t"), "42703");
        assert_eq!(code(&setup, "SELECT 1 FROM \"mixed case\".\"Table One\""), "42P01");
    }

    #[test]
    fn comments_are_kept_and_read_back() {
        let mut setup = TWO_THINGS.to_vec();
        setup.extend([
            "COMMENT ON TABLE app.things IS 'app things'",
            "COMMENT ON COLUMN app.things.what IS 'what it is'",
            "COMMENT ON SCHEMA app IS 'the app'",
        ]);
        assert_eq!(
            row(
                &setup,
                "SELECT obj_description('app.things'::regclass, 'pg_class'), \
                 col_description('app.things'::regclass, 1), obj_description('things'::regclass, 'pg_class') IS NULL"
            ),
            text(&["app things", "what it is", "t"])
        );
        assert_eq!(
            row(
                &setup,
                "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = 'app'"
            ),
            text(&["the app"])
        );
        assert_eq!(code(&setup, "COMMENT ON TABLE app.nothing IS 'x'"), "42P01");
        setup.extend(["DROP TABLE app.things", "CREATE TABLE app.things (what text)"]);
        assert_eq!(
            row(
                &setup,
                "SELECT obj_description('app.things'::regclass, 'pg_class') IS NULL"
            ),
            text(&["t"])
        );
    }
}
