//! DDL: tables made with SQLite storage types for their PostgreSQL types (recorded in the catalog in the
//! same transaction), serial and identity keys as SQLite's `INTEGER PRIMARY KEY AUTOINCREMENT`, names
//! folded to lower case as PostgreSQL folds them, and the index, view and drop forms migrations send.

use rusqlite::Connection;
use sqlparser::ast::{
    ColumnDef, ColumnOption, CreateTable, CreateView, Expr, GeneratedAs, Ident, ObjectName, ObjectType, TableConstraint,
};

use super::expr::{coerce_call, last_part, Rewriter, Scope};
use super::{droppable, Kind, Translation};
use crate::catalog::{self, quote_ident, Catalog, CREATE_COLUMNS_TABLE};
use crate::error::PgError;
use crate::types::{Base, PgType, Storage, Written};

/// The collation numeric columns get, so comparisons and ORDER BY go by value (see `value::numeric`).
pub const NUMERIC_COLLATION: &str = "pg_numeric";

pub(super) fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

pub(crate) fn fold_name(name: &ObjectName) -> String {
    // Callers resolve the schema first (`translate::schema`).
    match name.0.last() {
        Some(sqlparser::ast::ObjectNamePart::Identifier(ident)) => fold(ident),
        _ => last_part(name),
    }
}

pub(crate) fn ddl(tag: &str, mut steps: Vec<String>) -> Translation {
    steps.insert(0, CREATE_COLUMNS_TABLE.to_owned());
    Translation {
        primary: steps.len().min(2) - 1,
        steps,
        columns: None,
        params: Vec::new(),
        kind: Kind::Other(tag.to_owned()),
        uses_now: false,
        foreign_keys_off: false,
        param_columns: Vec::new(),
        captures: Vec::new(),
        bound: None,
        notices: Vec::new(),
        column_origins: false,
    }
}

/// A column's PostgreSQL type and, for a serial or identity column, the sequence that fills it.
pub(super) struct ColumnType {
    pub(super) ty: PgType,
    pub(super) generator: Option<Generator>,
}

/// How a serial or identity column is filled: its sequence's options and kind.
pub(super) struct Generator {
    /// `a` (GENERATED ALWAYS AS IDENTITY), `d` (BY DEFAULT), empty for serial.
    pub(super) identity: &'static str,
    pub(super) options: Vec<sqlparser::ast::SequenceOptions>,
}

pub(super) fn column_type(catalog: &Catalog, def: &ColumnDef) -> Result<ColumnType, PgError> {
    let identity = def.options.iter().find_map(|o| match &o.option {
        ColumnOption::Generated {
            generated_as,
            generation_expr: None,
            sequence_options,
            ..
        } => Some(Generator {
            identity: if matches!(generated_as, GeneratedAs::Always) {
                "a"
            } else {
                "d"
            },
            options: sequence_options.clone().unwrap_or_default(),
        }),
        _ => None,
    });
    match super::enums::resolve(catalog, &def.data_type) {
        Written::Type(ty) => {
            if identity.is_some() && !ty.is_integer() {
                return Err(PgError::new(
                    crate::error::DATATYPE_MISMATCH,
                    format!(
                        "identity column type must be smallint, integer, or bigint (column \"{}\")",
                        fold(&def.name)
                    ),
                ));
            }
            Ok(ColumnType {
                ty,
                generator: identity,
            })
        }
        Written::Serial(serial) => Ok(ColumnType {
            ty: serial.column_type(),
            generator: Some(Generator {
                identity: "",
                options: Vec::new(),
            }),
        }),
        Written::Custom(name) => Err(PgError::new(
            crate::error::UNDEFINED_OBJECT,
            format!("type \"{name}\" does not exist"),
        )),
        Written::Unsupported(name) => Err(PgError::unsupported(format!("the column type {name}"))),
    }
}

/// Renders a column of `table` for SQLite; `table_primary_key` when the table's one-column primary key is
/// this column, `sequence` the sequence a serial or identity column takes its values from. A primary key
/// carries its name (PostgreSQL's `<table>_pkey` unless one is given), so it keeps it when the table is
/// renamed, as PostgreSQL's does.
pub(super) fn render_column(
    rewriter: &mut Rewriter<'_>,
    table: &str,
    def: &mut ColumnDef,
    column: &ColumnType,
    table_primary_key: bool,
    sequence: Option<&str>,
) -> Result<String, PgError> {
    let name = fold(&def.name);
    let inline_primary_key = def
        .options
        .iter()
        .any(|o| matches!(o.option, ColumnOption::PrimaryKey(_)));
    let primary_key = inline_primary_key || table_primary_key;
    let mut out = format!("{} {}", quote_ident(&name), column.ty.storage().sqlite_type());
    // Default constraint names take the table's own name, not its schema.
    let (_, own) = super::schema::schema_of(rewriter.typer.catalog, table);
    if primary_key {
        let given = def.options.iter().find_map(|o| match o.option {
            ColumnOption::PrimaryKey(_) => o.name.as_ref().map(fold),
            _ => None,
        });
        let constraint = given.unwrap_or_else(|| format!("{own}_pkey"));
        // An INTEGER PRIMARY KEY is the rowid: no second index. PostgreSQL primary keys are NOT NULL
        // (SQLite's, but for INTEGER ones, are not).
        out.push_str(&format!(
            " CONSTRAINT {} PRIMARY KEY NOT NULL",
            quote_ident(&constraint)
        ));
    }
    if let Some(sequence) = sequence {
        if !primary_key {
            out.push_str(" NOT NULL");
        }
        out.push_str(&format!(" DEFAULT ({})", super::sequence::nextval_default(sequence)));
    }
    for option in &mut def.options {
        match &mut option.option {
            ColumnOption::NotNull if !primary_key && sequence.is_none() => out.push_str(" NOT NULL"),
            ColumnOption::NotNull | ColumnOption::Null | ColumnOption::PrimaryKey(_) => {}
            ColumnOption::Default(expr) => {
                rewriter.rewrite_expr(expr)?;
                let value = coerce_call(expr.clone(), column.ty);
                out.push_str(&format!(" DEFAULT ({value})"));
            }
            // Constraints carry PostgreSQL's names from the start, so a renamed table keeps them.
            ColumnOption::Unique(_) => {
                let constraint = option.name.as_ref().map_or_else(|| format!("{own}_{name}_key"), fold);
                out.push_str(&format!(" CONSTRAINT {} UNIQUE", quote_ident(&constraint)));
            }
            ColumnOption::ForeignKey(fk) => {
                let constraint = option.name.as_ref().map_or_else(|| format!("{own}_{name}_fkey"), fold);
                out.push_str(&format!(" CONSTRAINT {}", quote_ident(&constraint)));
                out.push(' ');
                out.push_str(&references(
                    rewriter.typer.catalog,
                    table,
                    &fk.foreign_table,
                    &fk.referred_columns,
                    fk.on_delete.as_ref(),
                    fk.on_update.as_ref(),
                    fk.characteristics.as_ref(),
                )?);
            }
            ColumnOption::Check(check) => {
                rewriter.rewrite_expr(check.expr.as_mut())?;
                out.push_str(&format!(" CHECK ({})", check.expr));
            }
            ColumnOption::Generated {
                generation_expr: Some(expr),
                ..
            } => {
                rewriter.rewrite_expr(expr)?;
                // Stored in the column's type, as an assignment would store it (`numeric(8,2)` rounds).
                let value = coerce_call(expr.clone(), column.ty);
                out.push_str(&format!(" GENERATED ALWAYS AS ({value}) STORED"));
            }
            ColumnOption::Generated { .. } => {}
            ColumnOption::Collation(name) => {
                let collation = name.to_string().to_ascii_lowercase().replace('"', "");
                if collation != "c" && collation != "default" && collation != "pg_catalog.default" {
                    return Err(PgError::unsupported(format!("the collation {collation}")));
                }
            }
            ColumnOption::Comment(_) => {}
            other => return Err(PgError::unsupported(format!("the column option {other}"))),
        }
    }
    if column.ty.storage() == Storage::Text && column.ty.base() == Base::Numeric && !column.ty.is_array() {
        out.push_str(&format!(" COLLATE {NUMERIC_COLLATION}"));
    }
    if let Some(collation) = super::enums::column_collation(column.ty) {
        out.push_str(&collation);
    }
    Ok(out)
}

fn index_columns(columns: &[sqlparser::ast::IndexColumn]) -> Result<Vec<String>, PgError> {
    columns
        .iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(ident) => Ok(quote_ident(&fold(ident))),
            other => Err(PgError::unsupported(format!(
                "an index or key on the expression {other}"
            ))),
        })
        .collect()
}

/// The SQLite name of an existing relation a statement names (see `translate::schema`).
pub(crate) fn table_name(catalog: &Catalog, name: &ObjectName) -> Result<String, PgError> {
    super::schema::existing(catalog, name)
}

/// A temporary table's name: SQLite's temp schema stands for PostgreSQL's `pg_temp`, searched first as
/// PostgreSQL searches it, so the name stays bare whatever the `search_path`.
pub(super) fn temporary_name(name: &ObjectName) -> Result<String, PgError> {
    match super::schema::split_name(name)? {
        (None, bare) => Ok(bare),
        (Some(schema), bare) if schema == "pg_temp" => Ok(bare),
        (Some(_), _) => Err(PgError::new(
            crate::error::INVALID_TABLE_DEFINITION,
            "cannot create temporary relation in non-temporary schema",
        )),
    }
}

/// The folded names of an index's or key's plain columns.
fn folded_columns(columns: &[sqlparser::ast::IndexColumn]) -> Vec<String> {
    columns
        .iter()
        .filter_map(|c| match &c.column.expr {
            Expr::Identifier(ident) => Some(fold(ident)),
            _ => None,
        })
        .collect()
}

/// `CREATE TABLE`. A serial or identity column gets its sequence, made in the same steps.
pub(crate) fn create_table(
    conn: &Connection,
    catalog: &Catalog,
    create: &mut CreateTable,
) -> Result<Translation, PgError> {
    if create.query.is_some() {
        return Err(PgError::unsupported("CREATE TABLE … AS"));
    }
    // `(id int, LIKE source)`: sqlparser reads the `LIKE` item as a column of that name.
    let like_item = create
        .columns
        .iter()
        .any(|c| c.name.quote_style.is_none() && c.name.value.eq_ignore_ascii_case("like"));
    if create.like.is_some() || like_item {
        return super::like::create_like_text(
            conn,
            catalog,
            &sqlparser::ast::Statement::CreateTable(create.clone()).to_string(),
        );
    }
    let table = if create.temporary {
        temporary_name(&create.name)?
    } else {
        super::schema::created(catalog, &create.name)?
    };
    refuse_shadowing(conn, &table, create.temporary)?;
    if catalog::is_internal_table(&table) {
        return Err(PgError::new(
            crate::error::RESERVED_NAME,
            format!("the name \"{table}\" is reserved for Cambium's catalog"),
        ));
    }
    let deferrable = super::deferrable::extract(catalog, &table, create)?;
    // The table exists: nothing is made (no sequences either), and its recorded types stay.
    let exists = create.if_not_exists && table_exists(conn, &table);
    let mut rewriter = Rewriter::new(catalog);
    rewriter.typer.scopes.push(Scope::of_table(&table));
    // A one-column table primary key on a serial column becomes that column's INTEGER PRIMARY KEY.
    let table_pk_column = single_primary_key(&create.constraints);
    let mut parts = Vec::new();
    let mut records = Vec::new();
    let mut sequence_steps = Vec::new();
    let mut pk_absorbed = false;
    for def in &mut create.columns {
        let column = column_type(catalog, def)?;
        let name = fold(&def.name);
        let absorb = table_pk_column.as_deref() == Some(name.as_str()) && column.generator.is_some();
        pk_absorbed |= absorb;
        let sequence = match (&column.generator, exists) {
            (Some(generator), false) => {
                let (sequence, steps) = super::sequence::column_sequence(
                    conn,
                    &table,
                    &name,
                    column.ty,
                    &generator.options,
                    None,
                    generator.identity,
                )?;
                sequence_steps.extend(steps);
                Some(sequence)
            }
            _ => None,
        };
        parts.push(render_column(
            &mut rewriter,
            &table,
            def,
            &column,
            absorb,
            sequence.as_deref(),
        )?);
        records.push(catalog::record_column(&table, &name, column.ty));
    }
    parts.extend(render_constraints(
        &mut rewriter,
        &table,
        &mut create.constraints,
        pk_absorbed,
    )?);
    let sql = format!(
        "CREATE {}TABLE {}{} ({})",
        if create.temporary { "TEMP " } else { "" },
        if create.if_not_exists { "IF NOT EXISTS " } else { "" },
        quote_ident(&table),
        parts.join(", ")
    );
    let mut steps = vec![sql];
    if exists {
        let mut translation = ddl("CREATE TABLE", steps);
        let shown = crate::schemas::split_sqlite_name(&table, catalog.schemas())
            .1
            .to_owned();
        translation
            .notices
            .push(format!("relation \"{shown}\" already exists, skipping"));
        return Ok(translation);
    }
    steps.extend(records);
    steps.extend(sequence_steps);
    steps.extend(
        deferrable
            .iter()
            .flat_map(crate::deferrable::DeferrableUnique::create_sql),
    );
    Ok(ddl("CREATE TABLE", steps))
}

/// `REFERENCES t (cols) [ON DELETE …] [ON UPDATE …]` for SQLite, `t` resolved as a relation name (`own`,
/// the SQLite name of the table being defined, when it names that table).
fn references(
    catalog: &Catalog,
    own: &str,
    table: &ObjectName,
    columns: &[Ident],
    on_delete: Option<&sqlparser::ast::ReferentialAction>,
    on_update: Option<&sqlparser::ast::ReferentialAction>,
    characteristics: Option<&sqlparser::ast::ConstraintCharacteristics>,
) -> Result<String, PgError> {
    let mut referenced = super::schema::existing(catalog, table)?;
    let (own_schema, own_bare) = super::schema::schema_of(catalog, own);
    if table.0.len() == 1 && referenced == fold_name(table) && own_bare.eq_ignore_ascii_case(&referenced) {
        // The table being defined, not yet in the catalog.
        referenced = crate::schemas::sqlite_name(&own_schema, own_bare);
    }
    let mut text = format!("REFERENCES {}", quote_ident(&referenced));
    if !columns.is_empty() {
        let cols: Vec<String> = columns.iter().map(|c| quote_ident(&fold(c))).collect();
        text.push_str(&format!(" ({})", cols.join(", ")));
    }
    if let Some(action) = on_delete {
        text.push_str(&format!(" ON DELETE {action}"));
    }
    if let Some(action) = on_update {
        text.push_str(&format!(" ON UPDATE {action}"));
    }
    // `DEFERRABLE INITIALLY DEFERRED` (Django's and Rails's keys): checked at the commit, in both engines.
    // `DEFERRABLE [INITIALLY IMMEDIATE]` is checked at once in both until `SET CONSTRAINTS` defers it.
    if characteristics
        .is_some_and(|c| c.deferrable == Some(true) && c.initially == Some(sqlparser::ast::DeferrableInitial::Deferred))
    {
        text.push_str(" DEFERRABLE INITIALLY DEFERRED");
    }
    Ok(text)
}

/// The column of a one-column table `PRIMARY KEY (c)`.
fn single_primary_key(constraints: &[TableConstraint]) -> Option<String> {
    constraints.iter().find_map(|constraint| match constraint {
        TableConstraint::PrimaryKey(pk) => match pk.columns.as_slice() {
            [only] => match &only.column.expr {
                Expr::Identifier(ident) => Some(fold(ident)),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

/// Whether a table of this name exists.
/// Refuses (0A000) a table made under the name of a relation on the other side of SQLite's temp schema: a
/// temporary table named as a table, view, index or sequence of the database, or a table named as a
/// temporary table. SQLite keeps them apart (its temp schema, searched first, stands for `pg_temp`), but the
/// catalog keeps a table's column types, sequences and comments by its bare name: one would take the other's
/// (a temporary table's types recorded over the table's, a `DROP` of the temporary table forgetting the
/// table's sequence). PostgreSQL allows it; a clear refusal is better than metadata that silently changes.
pub(super) fn refuse_shadowing(conn: &Connection, table: &str, temporary: bool) -> Result<(), PgError> {
    let other = if temporary { "main" } else { "temp" };
    let exists: bool = conn
        .query_row(
            &format!("SELECT EXISTS (SELECT 1 FROM {other}.sqlite_schema WHERE name = ?1 COLLATE NOCASE)"),
            [table],
            |row| row.get(0),
        )
        .unwrap_or(false);
    if !exists {
        return Ok(());
    }
    Err(PgError::unsupported(if temporary {
        format!("a temporary table named as the relation \"{table}\" (hiding it)")
    } else {
        format!("a table named as the temporary table \"{table}\"")
    }))
}

/// The NOTICE of a `DROP … IF EXISTS` for each of `names` that names nothing of `what` kind (`table`, `view`,
/// `index`, `sequence`): a relation of that SQLite name in the database or among the session's temporary
/// ones, looked up through `conn`. A name that cannot be resolved, or a lookup that fails, makes no notice.
pub(super) fn missing_notices(conn: &Connection, catalog: &Catalog, what: &str, names: &[ObjectName]) -> Vec<String> {
    names
        .iter()
        .filter_map(|written| {
            let name = table_name(catalog, written).ok()?;
            let exists: bool = conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?1 COLLATE NOCASE) \
                     OR EXISTS (SELECT 1 FROM temp.sqlite_schema WHERE name = ?1 COLLATE NOCASE)",
                    [&name],
                    |row| row.get(0),
                )
                .unwrap_or(true);
            let shown = crate::schemas::split_sqlite_name(&name, catalog.schemas()).1.to_owned();
            (!exists).then(|| format!("{what} \"{shown}\" does not exist, skipping"))
        })
        .collect()
}

pub(super) fn table_exists(conn: &Connection, table: &str) -> bool {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE NOCASE)",
        [table],
        |row| row.get(0),
    )
    .unwrap_or(false)
}

/// A table's constraints rendered for SQLite (`pk_absorbed`: the primary key went into its column).
fn render_constraints(
    rewriter: &mut Rewriter<'_>,
    table: &str,
    constraints: &mut [TableConstraint],
    pk_absorbed: bool,
) -> Result<Vec<String>, PgError> {
    let mut parts = Vec::new();
    let (_, own) = super::schema::schema_of(rewriter.typer.catalog, table);
    for constraint in constraints {
        let name_clause = |name: &Option<Ident>| {
            name.as_ref()
                .map_or_else(String::new, |n| format!("CONSTRAINT {} ", quote_ident(&fold(n))))
        };
        let text = match constraint {
            TableConstraint::PrimaryKey(_) if pk_absorbed => continue,
            TableConstraint::PrimaryKey(pk) => format!(
                "CONSTRAINT {} PRIMARY KEY ({})",
                quote_ident(&pk.name.as_ref().map_or_else(|| format!("{own}_pkey"), fold)),
                index_columns(&pk.columns)?.join(", ")
            ),
            TableConstraint::Unique(unique) => {
                let keys = index_columns(&unique.columns)?;
                let default = format!("{own}_{}_key", folded_columns(&unique.columns).join("_"));
                format!(
                    "CONSTRAINT {} UNIQUE ({})",
                    quote_ident(&unique.name.as_ref().map_or(default, fold)),
                    keys.join(", ")
                )
            }
            TableConstraint::ForeignKey(fk) => {
                let cols: Vec<String> = fk.columns.iter().map(|c| quote_ident(&fold(c))).collect();
                let default = format!(
                    "{own}_{}_fkey",
                    fk.columns.iter().map(fold).collect::<Vec<_>>().join("_")
                );
                format!(
                    "CONSTRAINT {} FOREIGN KEY ({}) {}",
                    quote_ident(&fk.name.as_ref().map_or(default, fold)),
                    cols.join(", "),
                    references(
                        rewriter.typer.catalog,
                        table,
                        &fk.foreign_table,
                        &fk.referred_columns,
                        fk.on_delete.as_ref(),
                        fk.on_update.as_ref(),
                        fk.characteristics.as_ref(),
                    )?
                )
            }
            TableConstraint::Check(check) => {
                rewriter.rewrite_expr(check.expr.as_mut())?;
                format!("{}CHECK ({})", name_clause(&check.name), check.expr)
            }
            other => return Err(PgError::unsupported(format!("the table constraint {other}"))),
        };
        parts.push(text);
    }
    Ok(parts)
}

/// `DROP TABLE|VIEW|INDEX|SEQUENCE a, b [CASCADE]`. A table takes the sequences its columns own with it.
pub(crate) fn drop(
    catalog: &Catalog,
    object_type: ObjectType,
    if_exists: bool,
    names: &[ObjectName],
    cascade: bool,
) -> Result<Translation, PgError> {
    if object_type == ObjectType::Sequence {
        return super::sequence::drop(catalog, if_exists, names, cascade);
    }
    if object_type == ObjectType::Type {
        return super::enums::drop(catalog, if_exists, names, cascade);
    }
    if !droppable(object_type) {
        return Err(PgError::unsupported(format!("DROP {object_type}")));
    }
    let mut steps = Vec::new();
    for name in names {
        let name = table_name(catalog, name)?;
        if let Some(sequence) = catalog.sequence(&name) {
            // The sequence's view must not go as a view.
            return Err(PgError::new(
                crate::error::WRONG_OBJECT_TYPE,
                format!(
                    "\"{}\" is not a {}",
                    sequence.name,
                    object_type.to_string().to_ascii_lowercase()
                ),
            ));
        }
        steps.push(format!(
            "DROP {object_type} {}{}",
            if if_exists { "IF EXISTS " } else { "" },
            quote_ident(&name)
        ));
        steps.extend(super::comment::forget_relation(catalog, &name));
        if object_type == ObjectType::Table {
            steps.push(catalog::forget_table(&name));
            steps.extend(super::sequence::drop_owned(catalog, &name, None));
        }
    }
    Ok(ddl(&format!("DROP {object_type}"), steps))
}

/// `CREATE [OR REPLACE] VIEW`.
pub(crate) fn create_view(catalog: &Catalog, view: &mut CreateView) -> Result<Translation, PgError> {
    if view.materialized {
        return Err(PgError::unsupported("materialized views"));
    }
    let name = super::schema::created(catalog, &view.name)?;
    super::names::name_columns(&mut view.query);
    let written = view.query.as_ref().clone();
    let mut rewriter = Rewriter::new(catalog);
    rewriter.rewrite_query(view.query.as_mut())?;
    let column_names: Vec<String> = view.columns.iter().map(|c| fold(&c.name)).collect();
    let columns = if column_names.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = column_names.iter().map(|c| quote_ident(c)).collect();
        format!(" ({})", names.join(", "))
    };
    let body = view.query.to_string();
    let source = super::view_source::source_comment(catalog, &written, &column_names, &body).unwrap_or_default();
    let mut steps = Vec::new();
    if view.or_replace {
        steps.push(format!("DROP VIEW IF EXISTS {}", quote_ident(&name)));
    }
    steps.push(format!(
        "CREATE VIEW {}{}{columns} AS {body}{source}",
        if view.if_not_exists { "IF NOT EXISTS " } else { "" },
        quote_ident(&name),
    ));
    let primary = steps.len() - 1;
    Ok(Translation {
        steps,
        primary,
        columns: None,
        params: Vec::new(),
        kind: Kind::Other("CREATE VIEW".to_owned()),
        uses_now: false,
        foreign_keys_off: false,
        param_columns: Vec::new(),
        captures: Vec::new(),
        bound: None,
        notices: Vec::new(),
        column_origins: false,
    })
}
