//! Data-modifying statements in WITH (`WITH moved AS (DELETE … RETURNING *) INSERT … SELECT … FROM moved`).
//! SQLite takes INSERT, UPDATE and DELETE only at the top of a statement, so each data-modifying CTE becomes
//! a step of its own that runs first, once, whose RETURNING rows the session keeps in a TEMP table
//! ([`Capture`]); the main statement then reads that table under the CTE's name, and a last step drops it.
//! The session runs all of it in one savepoint: all or nothing, as one PostgreSQL statement.
//!
//! PostgreSQL runs the sub-statements and the main one on one snapshot, so none sees another's changes
//! to a table; run in order, a later one would. A statement where that could show (a part reading or
//! changing a table an earlier part changes) is refused with 0A000 rather than answered differently.

use rusqlite::Connection;
use sqlparser::ast::{
    Expr, FromTable, Ident, ObjectName, ObjectNamePart, Query, Select, SelectItem, SetExpr, Statement, TableAlias,
    TableFactor, TableObject,
};

use super::walk::{self, Hooks};
use super::{Capture, Translation};
use crate::catalog::{quote_ident, Catalog};
use crate::error::PgError;

/// Prefix of the TEMP tables that hold a data-modifying CTE's rows while its statement runs (a `_cambium_`
/// name, hidden from the catalog views).
pub const TABLE_PREFIX: &str = "_cambium_cte_";

/// Whether `query` has INSERT, UPDATE or DELETE in its WITH.
pub(super) fn has_modifying_cte(query: &Query) -> bool {
    query
        .with
        .as_ref()
        .is_some_and(|with| with.cte_tables.iter().any(|cte| modifying(&cte.query).is_some()))
}

fn modifying(query: &Query) -> Option<&Statement> {
    match query.body.as_ref() {
        SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) => Some(s),
        _ => None,
    }
}

fn refuse(what: &str) -> PgError {
    PgError::unsupported(format!(
        "{what} in a statement with INSERT, UPDATE or DELETE inside WITH"
    ))
}

/// The statement of `query` (which [`has_modifying_cte`]) as steps: each data-modifying CTE captured, the
/// main statement over the captured rows, the TEMP tables dropped.
pub(super) fn translate(conn: &Connection, catalog: &Catalog, mut query: Query) -> Result<Translation, PgError> {
    let Some(mut with) = query.with.take() else {
        return Err(refuse("a missing WITH"));
    };
    if with.recursive {
        return Err(refuse("WITH RECURSIVE"));
    }
    let mut parts: Vec<(String, Statement)> = Vec::new();
    let mut kept = Vec::new();
    for cte in std::mem::take(&mut with.cte_tables) {
        match modifying(&cte.query) {
            Some(statement) => {
                if !cte.alias.columns.is_empty() {
                    return Err(refuse("column names for a data-modifying WITH query"));
                }
                parts.push((folded(&cte.alias.name), statement.clone()));
            }
            None => kept.push(cte),
        }
    }
    with.cte_tables = kept;
    let with = (!with.cte_tables.is_empty()).then_some(with);
    let mut main = main_statement(query, with)?;
    let mut steps = Vec::new();
    let mut captures = Vec::new();
    let mut params: Vec<Option<crate::types::PgType>> = Vec::new();
    let mut uses_now = false;
    let mut renames: Vec<(String, String)> = Vec::new();
    let mut changed: Vec<String> = Vec::new();
    for (name, mut statement) in parts {
        let (target, reads) = relations(&mut statement, &renames)?;
        if reads
            .iter()
            .chain(std::iter::once(&target))
            .any(|r| changed.contains(r))
        {
            return Err(refuse("a part reading or changing a table an earlier part changes"));
        }
        let has_returning = returning(&statement).is_some();
        let inner = super::translate_statement(conn, catalog, statement)?.ok_or_else(|| refuse("this statement"))?;
        merge_params(&mut params, &inner.params);
        uses_now |= inner.uses_now;
        let offset = steps.len();
        if has_returning {
            let table = format!("{TABLE_PREFIX}{name}");
            captures.push(Capture {
                step: offset + inner.primary,
                table: table.clone(),
            });
            renames.push((name, table));
        }
        steps.extend(inner.steps);
        changed.push(target);
    }
    let (target, reads) = relations(&mut main, &renames)?;
    let main_reads_target = !matches!(main, Statement::Insert(_));
    if reads.iter().any(|r| changed.contains(r)) || (main_reads_target && changed.contains(&target)) {
        return Err(refuse("a main statement reading a table a WITH query changes"));
    }
    let outer = super::translate_statement(conn, catalog, main)?.ok_or_else(|| refuse("this main statement"))?;
    merge_params(&mut params, &outer.params);
    let primary = steps.len() + outer.primary;
    steps.extend(outer.steps);
    for capture in &captures {
        steps.push(format!("DROP TABLE IF EXISTS temp.{}", quote_ident(&capture.table)));
    }
    Ok(Translation {
        steps,
        primary,
        columns: outer.columns,
        params,
        kind: outer.kind,
        uses_now: uses_now || outer.uses_now,
        foreign_keys_off: false,
        param_columns: outer.param_columns,
        captures,
        bound: None,
        notices: Vec::new(),
        column_origins: false,
    })
}

/// The main statement without the data-modifying CTEs: an INSERT, UPDATE or DELETE itself (an INSERT's
/// query taking the remaining CTEs), else the query.
fn main_statement(mut query: Query, with: Option<sqlparser::ast::With>) -> Result<Statement, PgError> {
    let body = std::mem::replace(
        query.body.as_mut(),
        SetExpr::Values(sqlparser::ast::Values {
            explicit_row: false,
            value_keyword: false,
            rows: Vec::new(),
        }),
    );
    match body {
        SetExpr::Insert(Statement::Insert(mut insert)) => {
            if let Some(with) = with {
                match insert.source.as_mut() {
                    Some(source) if source.with.is_none() => source.with = Some(with),
                    _ => return Err(refuse("an INSERT without a query beside other WITH queries")),
                }
            }
            Ok(Statement::Insert(insert))
        }
        SetExpr::Update(statement) | SetExpr::Delete(statement) => {
            if with.is_some() {
                return Err(refuse("UPDATE or DELETE beside other WITH queries"));
            }
            Ok(statement)
        }
        SetExpr::Insert(_) => Err(refuse("this INSERT")),
        body => {
            *query.body = body;
            query.with = with;
            Ok(Statement::Query(Box::new(query)))
        }
    }
}

fn returning(statement: &Statement) -> Option<&Vec<SelectItem>> {
    match statement {
        Statement::Insert(insert) => insert.returning.as_ref(),
        Statement::Update(update) => update.returning.as_ref(),
        Statement::Delete(delete) => delete.returning.as_ref(),
        _ => None,
    }
}

fn merge_params(into: &mut Vec<Option<crate::types::PgType>>, from: &[Option<crate::types::PgType>]) {
    if into.len() < from.len() {
        into.resize(from.len(), None);
    }
    for (slot, ty) in into.iter_mut().zip(from) {
        if slot.is_none() {
            *slot = *ty;
        }
    }
}

/// A name as PostgreSQL folds it: unquoted lower-case.
fn folded(ident: &Ident) -> String {
    match ident.quote_style {
        None => ident.value.to_ascii_lowercase(),
        Some(_) => ident.value.clone(),
    }
}

fn folded_last(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => folded(ident),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// A statement's target table and the tables it reads (an UPDATE's or DELETE's target among them, an
/// INSERT's only where its query reads it), with references to the captured CTEs renamed to their tables.
fn relations(statement: &mut Statement, renames: &[(String, String)]) -> Result<(String, Vec<String>), PgError> {
    let mut hooks = Relations {
        renames,
        read: Vec::new(),
    };
    let target = match statement {
        Statement::Insert(insert) => {
            let TableObject::TableName(name) = &insert.table else {
                return Err(refuse("INSERT into a function"));
            };
            let target = folded_last(name);
            if let Some(source) = insert.source.as_mut() {
                walk::query(&mut hooks, source)?;
            }
            if let Some(items) = insert.returning.as_mut() {
                walk::items(&mut hooks, items)?;
            }
            target
        }
        Statement::Update(update) => {
            walk::from_item(&mut hooks, &mut update.table)?;
            let target = hooks.read.first().cloned().unwrap_or_default();
            if let Some(
                sqlparser::ast::UpdateTableFromKind::AfterSet(tables)
                | sqlparser::ast::UpdateTableFromKind::BeforeSet(tables),
            ) = update.from.as_mut()
            {
                for table in tables {
                    walk::from_item(&mut hooks, table)?;
                }
            }
            for assignment in &mut update.assignments {
                walk::expr(&mut hooks, &mut assignment.value)?;
            }
            if let Some(selection) = update.selection.as_mut() {
                walk::expr(&mut hooks, selection)?;
            }
            if let Some(items) = update.returning.as_mut() {
                walk::items(&mut hooks, items)?;
            }
            target
        }
        Statement::Delete(delete) => {
            let (FromTable::WithFromKeyword(tables) | FromTable::WithoutKeyword(tables)) = &mut delete.from;
            for table in tables {
                walk::from_item(&mut hooks, table)?;
            }
            let target = hooks.read.first().cloned().unwrap_or_default();
            for table in delete.using.iter_mut().flatten() {
                walk::from_item(&mut hooks, table)?;
            }
            if let Some(selection) = delete.selection.as_mut() {
                walk::expr(&mut hooks, selection)?;
            }
            if let Some(items) = delete.returning.as_mut() {
                walk::items(&mut hooks, items)?;
            }
            target
        }
        Statement::Query(query) => {
            walk::query(&mut hooks, query)?;
            String::new()
        }
        _ => return Err(refuse("this statement")),
    };
    Ok((target, hooks.read))
}

/// Collects the tables a statement names, renaming the captured CTEs' references to their TEMP tables.
struct Relations<'a> {
    renames: &'a [(String, String)],
    read: Vec<String>,
}

impl Hooks for Relations<'_> {
    fn enter_select(&mut self, _: &Select) {}

    fn leave_select(&mut self) {}

    fn expr(&mut self, _: &mut Expr) -> Result<(), PgError> {
        Ok(())
    }

    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError> {
        let TableFactor::Table { name, alias, .. } = factor else {
            return Ok(());
        };
        let folded_name = folded_last(name);
        let renamed = match name.0.as_slice() {
            [ObjectNamePart::Identifier(ident)] => self
                .renames
                .iter()
                .find(|(cte, _)| *cte == folded(ident))
                .map(|(_, table)| (ident.clone(), table.clone())),
            _ => None,
        };
        match renamed {
            Some((ident, table)) => {
                if alias.is_none() {
                    *alias = Some(TableAlias {
                        explicit: true,
                        at: None,
                        name: ident,
                        columns: Vec::new(),
                    });
                }
                *name = ObjectName::from(vec![Ident::with_quote('"', table)]);
            }
            None => self.read.push(folded_name),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    fn translate(conn: &rusqlite::Connection, sql: &str) -> Result<crate::Translation, crate::PgError> {
        let mut dialect = crate::Dialect::new(conn, "db", "user", 1).expect("installs");
        let translated = match dialect.translate(conn, sql) {
            Ok(translated) => translated,
            Err(crate::TranslateError::Sql(error)) => return Err(error),
            Err(other) => panic!("{other}"),
        };
        let crate::Translated::Statements(list) = &*translated else {
            panic!("not a statement: {sql}");
        };
        Ok(list[0].clone())
    }

    fn database() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().expect("memory database");
        conn.execute_batch(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER); CREATE TABLE u (id INTEGER, n INTEGER)",
        )
        .expect("tables");
        conn
    }

    #[test]
    fn each_modifying_cte_is_a_captured_step_before_the_main_statement() {
        let conn = database();
        let sql = "WITH gone AS (DELETE FROM t WHERE n > 1 RETURNING id, n) INSERT INTO u SELECT id, n FROM gone \
                   RETURNING id";
        let translation = translate(&conn, sql).expect("translates");
        assert_eq!(translation.captures.len(), 1);
        assert_eq!(translation.captures[0].step, 0);
        assert_eq!(translation.primary, 1);
        assert_eq!(translation.kind, crate::Kind::Insert);
        assert!(
            translation.steps[0].starts_with("DELETE FROM t"),
            "{:?}",
            translation.steps
        );
        assert!(
            translation.steps[1].contains("\"_cambium_cte_gone\" AS gone"),
            "{:?}",
            translation.steps
        );
        assert!(
            translation.steps[2].starts_with("DROP TABLE IF EXISTS temp."),
            "{:?}",
            translation.steps
        );
    }

    #[test]
    fn parts_that_could_see_each_others_changes_are_refused() {
        let conn = database();
        for sql in [
            "WITH gone AS (DELETE FROM t RETURNING id) SELECT count(*) FROM t",
            "WITH a AS (DELETE FROM t RETURNING id), b AS (UPDATE t SET n = 1 RETURNING id) SELECT 1",
            "WITH a AS (INSERT INTO t (n) VALUES (1) RETURNING id) UPDATE t SET n = 2 WHERE id IN (SELECT id FROM a)",
        ] {
            let error = translate(&conn, sql).expect_err(sql);
            assert_eq!(error.code, crate::error::FEATURE_NOT_SUPPORTED, "{sql}");
        }
        assert!(translate(
            &conn,
            "WITH a AS (DELETE FROM t RETURNING id) SELECT count(*) FROM u, a"
        )
        .is_ok());
    }
}
