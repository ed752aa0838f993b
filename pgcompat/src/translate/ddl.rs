//! DDL: tables made with SQLite storage types for their PostgreSQL types (recorded in the catalog in the
//! same transaction), serial and identity keys as SQLite's `INTEGER PRIMARY KEY AUTOINCREMENT`, names
//! folded to lower case as PostgreSQL folds them, and the index, view and drop forms migrations send.

use rusqlite::Connection;
use sqlparser::ast::{
    AlterTable, AlterTableOperation, ColumnDef, ColumnOption, CreateIndex, CreateTable, CreateView, Expr, GeneratedAs,
    Ident, ObjectName, ObjectType, RenameTableNameKind, TableConstraint,
};

use super::expr::{coerce_call, last_part, Rewriter, Scope};
use super::{droppable, Kind, Translation};
use crate::catalog::{self, quote_ident, Catalog, CREATE_COLUMNS_TABLE};
use crate::error::PgError;
use crate::types::{self, Base, PgType, Storage, Written};

/// The collation numeric columns get, so comparisons and ORDER BY go by value (see `value::numeric`).
pub const NUMERIC_COLLATION: &str = "pg_numeric";

fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

fn fold_name(name: &ObjectName) -> String {
    // Callers check the schema first (`checked_name`).
    match name.0.last() {
        Some(sqlparser::ast::ObjectNamePart::Identifier(ident)) => fold(ident),
        _ => last_part(name),
    }
}

fn ddl(tag: &str, mut steps: Vec<String>) -> Translation {
    steps.insert(0, CREATE_COLUMNS_TABLE.to_owned());
    Translation {
        primary: steps.len().min(2) - 1,
        steps,
        columns: None,
        params: Vec::new(),
        kind: Kind::Other(tag.to_owned()),
        uses_now: false,
        foreign_keys_off: false,
    }
}

/// A column's PostgreSQL type and whether it is filled from a sequence (serial, identity).
struct ColumnType {
    ty: PgType,
    generated_key: bool,
    /// The name the key's PRIMARY KEY gets for an identity column: it tells the catalog views an identity
    /// (`ALWAYS`/`BY DEFAULT`) from a serial, which SQLite's schema otherwise shows alike; a constraint
    /// name, unlike a comment, survives the parse and render of a table rebuild.
    identity_marker: Option<&'static str>,
}

fn column_type(def: &ColumnDef) -> Result<ColumnType, PgError> {
    let identity = def.options.iter().find_map(|o| match &o.option {
        ColumnOption::Generated {
            generated_as: GeneratedAs::Always,
            generation_expr: None,
            ..
        } => Some(crate::pg_catalog::IDENTITY_ALWAYS_MARKER),
        ColumnOption::Generated {
            generated_as: GeneratedAs::ByDefault,
            generation_expr: None,
            ..
        } => Some(crate::pg_catalog::IDENTITY_BY_DEFAULT_MARKER),
        _ => None,
    });
    match types::from_data_type(&def.data_type) {
        Written::Type(ty) => Ok(ColumnType {
            ty,
            generated_key: identity.is_some(),
            identity_marker: identity,
        }),
        Written::Serial(serial) => Ok(ColumnType {
            ty: serial.column_type(),
            generated_key: true,
            identity_marker: None,
        }),
        Written::Custom(name) => Err(PgError::new(
            crate::error::UNDEFINED_OBJECT,
            format!("type \"{name}\" does not exist"),
        )),
        Written::Unsupported(name) => Err(PgError::unsupported(format!("the column type {name}"))),
    }
}

/// Renders a column for SQLite; `primary_key` when the table's one-column primary key is this column.
fn render_column(
    rewriter: &mut Rewriter<'_>,
    def: &mut ColumnDef,
    column: &ColumnType,
    table_primary_key: bool,
) -> Result<String, PgError> {
    let name = fold(&def.name);
    let inline_primary_key = def
        .options
        .iter()
        .any(|o| matches!(o.option, ColumnOption::PrimaryKey(_)));
    let primary_key = inline_primary_key || table_primary_key;
    if column.generated_key && !primary_key {
        return Err(PgError::unsupported(format!(
            "a serial or identity column that is not the primary key (column \"{name}\")"
        )));
    }
    let mut out = format!("{} {}", quote_ident(&name), column.ty.storage().sqlite_type());
    if column.generated_key {
        if let Some(marker) = column.identity_marker {
            out.push_str(&format!(" CONSTRAINT {}", quote_ident(marker)));
        }
        out.push_str(" PRIMARY KEY AUTOINCREMENT");
    } else if inline_primary_key {
        out.push_str(" PRIMARY KEY");
    }
    if primary_key {
        // PostgreSQL primary keys are NOT NULL (SQLite's, but for INTEGER ones, are not).
        out.push_str(" NOT NULL");
    }
    for option in &mut def.options {
        match &mut option.option {
            ColumnOption::NotNull if !primary_key => out.push_str(" NOT NULL"),
            ColumnOption::NotNull | ColumnOption::Null | ColumnOption::PrimaryKey(_) => {}
            ColumnOption::Default(expr) => {
                rewriter.rewrite_expr(expr)?;
                let value = coerce_call(expr.clone(), column.ty);
                out.push_str(&format!(" DEFAULT ({value})"));
            }
            ColumnOption::Unique(_) => out.push_str(" UNIQUE"),
            ColumnOption::ForeignKey(fk) => {
                let mut text = format!(" REFERENCES {}", quote_ident(&fold_name(&fk.foreign_table)));
                if !fk.referred_columns.is_empty() {
                    let cols: Vec<String> = fk.referred_columns.iter().map(|c| quote_ident(&fold(c))).collect();
                    text.push_str(&format!(" ({})", cols.join(", ")));
                }
                if let Some(action) = &fk.on_delete {
                    text.push_str(&format!(" ON DELETE {action}"));
                }
                if let Some(action) = &fk.on_update {
                    text.push_str(&format!(" ON UPDATE {action}"));
                }
                out.push_str(&text);
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
                out.push_str(&format!(" GENERATED ALWAYS AS ({expr}) STORED"));
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

/// The folded name of a relation in the one schema there is (`public.t` and `t`); 3F000 for another.
/// A table's name as stored: `public.` removed (other schemas refused), folded as PostgreSQL folds it.
pub(crate) fn table_name(name: &ObjectName) -> Result<String, PgError> {
    checked_name(name)
}

fn checked_name(name: &ObjectName) -> Result<String, PgError> {
    let mut name = name.clone();
    super::expr::strip_public(&mut name)?;
    Ok(fold_name(&name))
}

/// `CREATE TABLE`.
pub(crate) fn create_table(catalog: &Catalog, create: &mut CreateTable) -> Result<Translation, PgError> {
    if create.query.is_some() {
        return Err(PgError::unsupported("CREATE TABLE … AS"));
    }
    if create.like.is_some() {
        return Err(PgError::unsupported("CREATE TABLE … LIKE"));
    }
    let table = checked_name(&create.name)?;
    if catalog::is_internal_table(&table) {
        return Err(PgError::new(
            crate::error::RESERVED_NAME,
            format!("the name \"{table}\" is reserved for Cambium's catalog"),
        ));
    }
    let mut rewriter = Rewriter::new(catalog);
    rewriter.typer.scopes.push(Scope::of_table(&table));
    // A one-column table primary key on a serial column becomes that column's INTEGER PRIMARY KEY.
    let mut table_pk_column: Option<String> = None;
    for constraint in &create.constraints {
        if let TableConstraint::PrimaryKey(pk) = constraint {
            if let [only] = pk.columns.as_slice() {
                if let Expr::Identifier(ident) = &only.column.expr {
                    table_pk_column = Some(fold(ident));
                }
            }
        }
    }
    let mut parts = Vec::new();
    let mut records = Vec::new();
    let mut pk_absorbed = false;
    for def in &mut create.columns {
        let column = column_type(def)?;
        let name = fold(&def.name);
        let is_table_pk = table_pk_column.as_deref() == Some(name.as_str());
        let absorb = is_table_pk && column.generated_key;
        if absorb {
            pk_absorbed = true;
        }
        parts.push(render_column(&mut rewriter, def, &column, absorb)?);
        records.push(catalog::record_column(&table, &name, column.ty));
    }
    for constraint in &mut create.constraints {
        let name_clause = |name: &Option<Ident>| {
            name.as_ref()
                .map_or_else(String::new, |n| format!("CONSTRAINT {} ", quote_ident(&fold(n))))
        };
        let text = match constraint {
            TableConstraint::PrimaryKey(_) if pk_absorbed => continue,
            TableConstraint::PrimaryKey(pk) => format!(
                "{}PRIMARY KEY ({})",
                name_clause(&pk.name),
                index_columns(&pk.columns)?.join(", ")
            ),
            TableConstraint::Unique(unique) => format!(
                "{}UNIQUE ({})",
                name_clause(&unique.name),
                index_columns(&unique.columns)?.join(", ")
            ),
            TableConstraint::ForeignKey(fk) => {
                let cols: Vec<String> = fk.columns.iter().map(|c| quote_ident(&fold(c))).collect();
                let mut text = format!(
                    "{}FOREIGN KEY ({}) REFERENCES {}",
                    name_clause(&fk.name),
                    cols.join(", "),
                    quote_ident(&fold_name(&fk.foreign_table))
                );
                if !fk.referred_columns.is_empty() {
                    let referred: Vec<String> = fk.referred_columns.iter().map(|c| quote_ident(&fold(c))).collect();
                    text.push_str(&format!(" ({})", referred.join(", ")));
                }
                if let Some(action) = &fk.on_delete {
                    text.push_str(&format!(" ON DELETE {action}"));
                }
                if let Some(action) = &fk.on_update {
                    text.push_str(&format!(" ON UPDATE {action}"));
                }
                text
            }
            TableConstraint::Check(check) => {
                rewriter.rewrite_expr(check.expr.as_mut())?;
                format!("{}CHECK ({})", name_clause(&check.name), check.expr)
            }
            other => return Err(PgError::unsupported(format!("the table constraint {other}"))),
        };
        parts.push(text);
    }
    let sql = format!(
        "CREATE {}TABLE {}{} ({})",
        if create.temporary { "TEMP " } else { "" },
        if create.if_not_exists { "IF NOT EXISTS " } else { "" },
        quote_ident(&table),
        parts.join(", ")
    );
    let mut steps = vec![sql];
    if create.if_not_exists && catalog.table(&table).is_some() {
        // The table exists: nothing is made, and its recorded types stay.
        return Ok(ddl("CREATE TABLE", steps));
    }
    steps.extend(records);
    Ok(ddl("CREATE TABLE", steps))
}

/// `ALTER TABLE` forms SQLite can do in place.
pub(crate) fn alter_table(
    conn: &Connection,
    catalog: &Catalog,
    alter: &mut AlterTable,
) -> Result<Translation, PgError> {
    let table = fold_name(&alter.name);
    let exists: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE NOCASE)",
            [&table],
            |row| row.get(0),
        )
        .unwrap_or(false);
    if !exists {
        if alter.if_exists {
            return Ok(ddl("ALTER TABLE", Vec::new()));
        }
        return Err(PgError::new(
            crate::error::UNDEFINED_TABLE,
            format!("relation \"{table}\" does not exist"),
        ));
    }
    if alter.operations.iter().any(super::rebuild::needs_rebuild) {
        if !alter.operations.iter().all(super::rebuild::needs_rebuild) {
            return Err(PgError::unsupported(
                "ALTER TABLE mixing ALTER COLUMN or constraints with other changes (run them as separate statements)",
            ));
        }
        let plan = super::rebuild::rebuild(conn, catalog, &table, &mut alter.operations)?;
        let mut translation = ddl("ALTER TABLE", plan.steps);
        translation.foreign_keys_off = plan.referenced;
        return Ok(translation);
    }
    let mut steps = Vec::new();
    let mut rewriter = Rewriter::new(catalog);
    rewriter.typer.scopes.push(Scope::of_table(&table));
    let exists = |column: &str| -> bool {
        conn.prepare_cached("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE")
            .and_then(|mut s| s.exists([table.as_str(), column]))
            .unwrap_or(false)
    };
    for operation in &mut alter.operations {
        match operation {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                ..
            } => {
                let name = fold(&column_def.name);
                if *if_not_exists && exists(&name) {
                    continue;
                }
                let column = column_type(column_def)?;
                if column.generated_key {
                    return Err(PgError::unsupported("adding a serial or identity column"));
                }
                let rendered = render_column(&mut rewriter, column_def, &column, false)?;
                steps.push(format!("ALTER TABLE {} ADD COLUMN {rendered}", quote_ident(&table)));
                steps.push(catalog::record_column(&table, &name, column.ty));
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for column in column_names.iter() {
                    let name = fold(column);
                    if *if_exists && !exists(&name) {
                        continue;
                    }
                    steps.push(format!(
                        "ALTER TABLE {} DROP COLUMN {}",
                        quote_ident(&table),
                        quote_ident(&name)
                    ));
                    steps.push(catalog::forget_column(&table, &name));
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let (from, to) = (fold(old_column_name), fold(new_column_name));
                steps.push(format!(
                    "ALTER TABLE {} RENAME COLUMN {} TO {}",
                    quote_ident(&table),
                    quote_ident(&from),
                    quote_ident(&to)
                ));
                steps.push(catalog::rename_column(&table, &from, &to));
            }
            AlterTableOperation::RenameTable { table_name } => {
                let (RenameTableNameKind::As(name) | RenameTableNameKind::To(name)) = table_name;
                let to = fold_name(name);
                steps.push(format!(
                    "ALTER TABLE {} RENAME TO {}",
                    quote_ident(&table),
                    quote_ident(&to)
                ));
                steps.push(catalog::rename_table(&table, &to));
            }
            AlterTableOperation::OwnerTo { .. } => {}
            other => return Err(PgError::unsupported(format!("ALTER TABLE … {other}"))),
        }
    }
    if steps.is_empty() {
        steps.push("SELECT NULL WHERE 0".to_owned());
    }
    Ok(ddl("ALTER TABLE", steps))
}

/// `DROP TABLE|VIEW|INDEX a, b [CASCADE]`.
pub(crate) fn drop(object_type: ObjectType, if_exists: bool, names: &[ObjectName]) -> Result<Translation, PgError> {
    if !droppable(object_type) {
        return Err(PgError::unsupported(format!("DROP {object_type}")));
    }
    let mut steps = Vec::new();
    for name in names {
        let name = checked_name(name)?;
        steps.push(format!(
            "DROP {object_type} {}{}",
            if if_exists { "IF EXISTS " } else { "" },
            quote_ident(&name)
        ));
        if object_type == ObjectType::Table {
            steps.push(catalog::forget_table(&name));
        }
    }
    Ok(ddl(&format!("DROP {object_type}"), steps))
}

/// `CREATE [UNIQUE] INDEX [CONCURRENTLY] [IF NOT EXISTS] [name] ON t [USING btree] (cols) [WHERE …]`.
pub(crate) fn create_index(catalog: &Catalog, index: &mut CreateIndex) -> Result<Translation, PgError> {
    if let Some(using) = &index.using {
        let method = using.to_string().to_ascii_lowercase();
        if method != "btree" {
            return Err(PgError::unsupported(format!("index method {method}")));
        }
    }
    let table = checked_name(&index.table_name)?;
    let columns = index_columns(&index.columns)?;
    let bare: Vec<String> = index
        .columns
        .iter()
        .filter_map(|c| match &c.column.expr {
            Expr::Identifier(i) => Some(fold(i)),
            _ => None,
        })
        .collect();
    let name = match &index.name {
        Some(name) => fold_name(name),
        // PostgreSQL's default name: table_columns_idx (or _key for unique ones).
        None => format!(
            "{table}_{}_{}",
            bare.join("_"),
            if index.unique { "key" } else { "idx" }
        ),
    };
    let with_order: Vec<String> = index
        .columns
        .iter()
        .zip(columns)
        .map(|(c, col)| match c.column.options.sort {
            Some(sqlparser::ast::OrderBySort::Desc) => format!("{col} DESC"),
            _ => col,
        })
        .collect();
    let mut sql = format!(
        "CREATE {}INDEX {}{} ON {} ({})",
        if index.unique { "UNIQUE " } else { "" },
        if index.if_not_exists { "IF NOT EXISTS " } else { "" },
        quote_ident(&name),
        quote_ident(&table),
        with_order.join(", ")
    );
    if let Some(predicate) = &mut index.predicate {
        let mut rewriter = Rewriter::new(catalog);
        rewriter.typer.scopes.push(Scope::of_table(&table));
        rewriter.rewrite_expr(predicate)?;
        sql.push_str(&format!(" WHERE {predicate}"));
    }
    Ok(Translation::single(sql, Kind::Other("CREATE INDEX".to_owned())))
}

/// `CREATE [OR REPLACE] VIEW`.
pub(crate) fn create_view(catalog: &Catalog, view: &mut CreateView) -> Result<Translation, PgError> {
    if view.materialized {
        return Err(PgError::unsupported("materialized views"));
    }
    let name = checked_name(&view.name)?;
    super::names::name_columns(&mut view.query);
    let mut rewriter = Rewriter::new(catalog);
    rewriter.rewrite_query(view.query.as_mut())?;
    let columns = if view.columns.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = view.columns.iter().map(|c| quote_ident(&fold(&c.name))).collect();
        format!(" ({})", names.join(", "))
    };
    let mut steps = Vec::new();
    if view.or_replace {
        steps.push(format!("DROP VIEW IF EXISTS {}", quote_ident(&name)));
    }
    steps.push(format!(
        "CREATE VIEW {}{}{columns} AS {}",
        if view.if_not_exists { "IF NOT EXISTS " } else { "" },
        quote_ident(&name),
        view.query
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
    })
}

/// The table that keeps `COMMENT ON` text (for `obj_description` and `\\d+`).
pub const CREATE_COMMENTS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_comments (\
     kind TEXT NOT NULL, object TEXT NOT NULL, sub TEXT NOT NULL DEFAULT '', comment TEXT NOT NULL, \
     PRIMARY KEY (kind, object, sub)) WITHOUT ROWID";

/// `COMMENT ON TABLE|COLUMN|VIEW|INDEX … IS '…' | NULL`.
pub(crate) fn comment(
    object_type: sqlparser::ast::CommentObject,
    name: &ObjectName,
    text: Option<&str>,
) -> Result<Translation, PgError> {
    use sqlparser::ast::CommentObject;
    let (kind, object, sub) = match object_type {
        CommentObject::Column => {
            let parts: Vec<String> = name
                .0
                .iter()
                .map(|p| p.to_string().trim_matches('"').to_ascii_lowercase())
                .collect();
            match parts.as_slice() {
                [.., table, column] => ("column", table.clone(), column.clone()),
                _ => return Err(PgError::unsupported("COMMENT ON COLUMN without a table")),
            }
        }
        CommentObject::Table
        | CommentObject::View
        | CommentObject::Index
        | CommentObject::Schema
        | CommentObject::Database => (
            if matches!(object_type, CommentObject::Column) {
                "column"
            } else {
                "relation"
            },
            fold_name(name),
            String::new(),
        ),
        other => return Err(PgError::unsupported(format!("COMMENT ON {other}"))),
    };
    let step = match text {
        Some(text) => format!(
            "INSERT OR REPLACE INTO _cambium_comments (kind, object, sub, comment) VALUES ({}, {}, {}, {})",
            catalog::quote_literal(kind),
            catalog::quote_literal(&object),
            catalog::quote_literal(&sub),
            catalog::quote_literal(text)
        ),
        None => format!(
            "DELETE FROM _cambium_comments WHERE kind = {} AND object = {} AND sub = {}",
            catalog::quote_literal(kind),
            catalog::quote_literal(&object),
            catalog::quote_literal(&sub)
        ),
    };
    Ok(ddl("COMMENT", vec![CREATE_COMMENTS_TABLE.to_owned(), step]))
}
