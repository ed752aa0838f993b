//! `INSERT … ON CONFLICT` made what SQLite runs the way PostgreSQL would: `ON CONFLICT ON CONSTRAINT name`
//! becomes the constraint's columns; a conflict target no unique key of the table matches is PostgreSQL's
//! 42P10 (SQLite's own error would carry no SQLSTATE); a `DO UPDATE` whose VALUES rows repeat a key as
//! literals is 21000, as PostgreSQL refuses to update one row twice (SQLite would update it twice); and an
//! `INSERT … SELECT` gets the `WHERE true` SQLite's grammar needs before `ON CONFLICT`.
//!
//! `RETURNING … xmax` of an `ON CONFLICT DO UPDATE` (the idiom `(xmax = 0) AS inserted`, true for a row
//! inserted, false for one updated) reads `pg_upsert_xmax(rowid)`: the `DO UPDATE SET`'s first value is
//! wrapped in `pg_upsert_mark(rowid, value)`, which notes the updated row for the statement (SQLite computes
//! a row's RETURNING values right after that row's change, so the mark is there when its RETURNING reads it;
//! the compute clears the marks at each statement's start). `xmax` is 1 for an updated row (PostgreSQL's is
//! the updating transaction's id: any nonzero number). A reference in a shape not rewritten here is left to
//! fail as an unknown column, never read wrongly.
//!
//! The unique keys of a table are its primary key and UNIQUE constraints with PostgreSQL's names (read
//! from its `CREATE TABLE` text by `_pgc_constraints`) and its unique indexes.

use rusqlite::Connection;
use sqlparser::ast::{
    ConflictTarget, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Insert, OnConflictAction, OnInsert,
    SelectItem, SetExpr,
};

use super::expr::call;
use crate::error::PgError;

/// A unique key of a table: its constraint's (or index's) name and columns.
#[derive(Debug, PartialEq)]
struct UniqueKey {
    name: String,
    columns: Vec<String>,
}

/// The unique keys of `table`.
fn unique_keys(conn: &Connection, table: &str) -> Vec<UniqueKey> {
    let mut keys = Vec::new();
    let declared: Option<String> = conn
        .prepare_cached("SELECT _pgc_constraints(name, sql) FROM sqlite_schema WHERE type = 'table' AND name = ?1")
        .and_then(|mut s| s.query_row([table], |r| r.get(0)))
        .ok();
    if let Some(serde_json::Value::Array(items)) = declared.and_then(|j| serde_json::from_str(&j).ok()) {
        for item in items {
            if !matches!(item["type"].as_str(), Some("p" | "u")) {
                continue;
            }
            let columns = item["cols"]
                .as_array()
                .map(|c| c.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            keys.push(UniqueKey {
                name: item["name"].as_str().unwrap_or_default().to_owned(),
                columns,
            });
        }
    }
    let indexes: Vec<String> = conn
        .prepare_cached(
            "SELECT name FROM pragma_index_list(?1) WHERE \"unique\" AND origin = 'c' AND NOT partial ORDER BY seq",
        )
        .and_then(|mut s| {
            s.query_map([table], |r| r.get::<_, String>(0))
                .map(|rows| rows.filter_map(Result::ok).collect())
        })
        .unwrap_or_default();
    for name in indexes {
        let columns: Vec<String> = conn
            .prepare_cached("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
            .and_then(|mut s| {
                s.query_map([name.as_str()], |r| r.get::<_, Option<String>>(0))
                    .map(|rows| rows.filter_map(Result::ok).flatten().collect())
            })
            .unwrap_or_default();
        keys.push(UniqueKey { name, columns });
    }
    keys
}

fn same_columns(key: &[String], target: &[String]) -> bool {
    key.len() == target.len() && key.iter().all(|k| target.iter().any(|t| t.eq_ignore_ascii_case(k)))
}

/// Makes an `INSERT … ON CONFLICT` into `table` (columns `columns`, in the order the VALUES give them)
/// what SQLite runs as PostgreSQL would; nothing for an INSERT without ON CONFLICT.
pub(crate) fn prepare(conn: &Connection, table: &str, columns: &[String], insert: &mut Insert) -> Result<(), PgError> {
    let Some(OnInsert::OnConflict(conflict)) = &mut insert.on else {
        return Ok(());
    };
    let keys = unique_keys(conn, table);
    let target: Option<Vec<String>> = match &mut conflict.conflict_target {
        None => None,
        Some(ConflictTarget::OnConstraint(name)) => {
            let name = super::expr::last_part(name);
            let Some(key) = keys.iter().find(|k| k.name == name) else {
                return Err(PgError::new(
                    crate::error::UNDEFINED_OBJECT,
                    format!("constraint \"{name}\" for table \"{table}\" does not exist"),
                ));
            };
            conflict.conflict_target = Some(ConflictTarget::Columns {
                columns: key.columns.iter().map(|c| Ident::with_quote('"', c.clone())).collect(),
                predicate: None,
            });
            Some(key.columns.clone())
        }
        Some(ConflictTarget::Columns { columns, predicate }) => {
            let target: Vec<String> = columns.iter().map(|c| c.value.clone()).collect();
            if predicate.is_none() && !keys.iter().any(|k| same_columns(&k.columns, &target)) {
                return Err(PgError::new(
                    crate::error::INVALID_COLUMN_REFERENCE,
                    "there is no unique or exclusion constraint matching the ON CONFLICT specification",
                ));
            }
            Some(target)
        }
    };
    let updates = matches!(conflict.action, OnConflictAction::DoUpdate(_));
    if let (true, Some(target), Some(source)) = (updates, &target, insert.source.as_deref()) {
        check_repeated_keys(source.body.as_ref(), columns, target)?;
    }
    // SQLite reads `SELECT … FROM t ON CONFLICT` as a join constraint unless the SELECT has a WHERE.
    if let Some(source) = insert.source.as_deref_mut() {
        if let SetExpr::Select(select) = source.body.as_mut() {
            if select.selection.is_none() {
                select.selection = Some(Expr::value(sqlparser::ast::Value::Boolean(true)));
            }
        }
    }
    Ok(())
}

/// 21000 when two VALUES rows give the same literals for the conflict target's columns.
fn check_repeated_keys(body: &SetExpr, columns: &[String], target: &[String]) -> Result<(), PgError> {
    let SetExpr::Values(values) = body else {
        return Ok(());
    };
    let positions: Option<Vec<usize>> = target
        .iter()
        .map(|t| columns.iter().position(|c| c.eq_ignore_ascii_case(t)))
        .collect();
    let Some(positions) = positions else {
        return Ok(());
    };
    let mut seen: Vec<Vec<String>> = Vec::with_capacity(values.rows.len());
    for row in &values.rows {
        let key: Option<Vec<String>> = positions
            .iter()
            .map(|&p| match row.content.get(p) {
                Some(Expr::Value(v))
                    if !matches!(
                        v.value,
                        sqlparser::ast::Value::Null | sqlparser::ast::Value::Placeholder(_)
                    ) =>
                {
                    Some(v.value.to_string())
                }
                _ => None,
            })
            .collect();
        let Some(key) = key else { continue };
        if seen.contains(&key) {
            return Err(PgError::new(
                crate::error::CARDINALITY_VIOLATION,
                "ON CONFLICT DO UPDATE command cannot affect row a second time",
            ));
        }
        seen.push(key);
    }
    Ok(())
}

/// Whether `insert` is an `ON CONFLICT DO UPDATE` whose RETURNING reads `xmax`; if so, its references are made
/// `pg_upsert_xmax(rowid)` (call before the RETURNING is rewritten, and [`mark_updates`] after the `DO
/// UPDATE SET` is).
pub(crate) fn returning_xmax(insert: &mut Insert) -> bool {
    let updates =
        matches!(&insert.on, Some(OnInsert::OnConflict(c)) if matches!(c.action, OnConflictAction::DoUpdate(_)));
    let Some(returning) = insert.returning.as_mut().filter(|_| updates) else {
        return false;
    };
    let mut found = false;
    for item in returning.iter_mut() {
        match item {
            SelectItem::UnnamedExpr(expr) => {
                if is_xmax(expr) {
                    // Named as PostgreSQL names the column.
                    *item = SelectItem::ExprWithAlias {
                        expr: xmax_call(),
                        alias: Ident::with_quote('"', "xmax"),
                    };
                    found = true;
                } else {
                    found |= replace_xmax(expr);
                }
            }
            SelectItem::ExprWithAlias { expr, .. } => found |= replace_xmax(expr),
            _ => {}
        }
    }
    found
}

/// Wraps the first `DO UPDATE SET` value in `pg_upsert_mark(rowid, value)`.
pub(crate) fn mark_updates(insert: &mut Insert) {
    if let Some(OnInsert::OnConflict(conflict)) = &mut insert.on {
        if let OnConflictAction::DoUpdate(update) = &mut conflict.action {
            if let Some(first) = update.assignments.first_mut() {
                let value = std::mem::replace(&mut first.value, Expr::value(sqlparser::ast::Value::Null));
                first.value = call("pg_upsert_mark", vec![Expr::Identifier(Ident::new("rowid")), value]);
            }
        }
    }
}

fn xmax_call() -> Expr {
    call("pg_upsert_xmax", vec![Expr::Identifier(Ident::new("rowid"))])
}

/// `xmax` or `t.xmax`, unquoted or quoted in lower case.
fn is_xmax(expr: &Expr) -> bool {
    let named = |ident: &Ident| {
        if ident.quote_style.is_some() {
            ident.value == "xmax"
        } else {
            ident.value.eq_ignore_ascii_case("xmax")
        }
    };
    match expr {
        Expr::Identifier(ident) => named(ident),
        Expr::CompoundIdentifier(parts) => parts.len() == 2 && parts.last().is_some_and(named),
        _ => false,
    }
}

/// Replaces `xmax` in the expression shapes the idioms use; whether any was.
fn replace_xmax(expr: &mut Expr) -> bool {
    if is_xmax(expr) {
        *expr = xmax_call();
        return true;
    }
    match expr {
        Expr::BinaryOp { left, right, .. } => replace_xmax(left) | replace_xmax(right),
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsFalse(expr) => replace_xmax(expr),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let mut found = operand.as_deref_mut().is_some_and(replace_xmax);
            for when in conditions.iter_mut() {
                found |= replace_xmax(&mut when.condition);
                found |= replace_xmax(&mut when.result);
            }
            found | else_result.as_deref_mut().is_some_and(replace_xmax)
        }
        Expr::Function(f) => match &mut f.args {
            FunctionArguments::List(list) => list.args.iter_mut().fold(false, |found, arg| match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => found | replace_xmax(e),
                _ => found,
            }),
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod xmax_tests {
    use crate::Translated;

    /// Every row `sql` returns after `setup`, each value as SQLite gives it (text).
    fn rows(setup: &[&str], sql: &str) -> Vec<Vec<String>> {
        let conn = rusqlite::Connection::open_in_memory().expect("memory database");
        let mut dialect = crate::Dialect::new(&conn, "db", "user", 1).expect("installs");
        let mut last = Vec::new();
        for statement in setup.iter().chain(std::iter::once(&sql)) {
            dialect.state().start_statement();
            let translated = dialect
                .translate(&conn, statement)
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
            let Translated::Statements(list) = &*translated else {
                panic!("not a statement: {statement}");
            };
            for t in list {
                let mut stmt = conn
                    .prepare(&t.steps[t.primary])
                    .unwrap_or_else(|e| panic!("{statement}: {e}"));
                let width = stmt.column_count();
                let mut out = Vec::new();
                let mut result = stmt.raw_query();
                while let Some(row) = result.next().unwrap_or_else(|e| panic!("{statement}: {e}")) {
                    out.push(
                        (0..width)
                            .map(|i| match row.get::<_, rusqlite::types::Value>(i).expect("a value") {
                                rusqlite::types::Value::Integer(v) => v.to_string(),
                                rusqlite::types::Value::Text(v) => v,
                                other => format!("{other:?}"),
                            })
                            .collect(),
                    );
                }
                last = out;
            }
        }
        last
    }

    #[test]
    fn xmax_tells_inserted_rows_from_updated_ones() {
        let setup = [
            "CREATE TABLE t (id int PRIMARY KEY, name text)",
            "INSERT INTO t VALUES (1, 'a'), (3, 'c')",
        ];
        let got = rows(
            &setup,
            "INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'z'), (4, 'w') ON CONFLICT (id) DO UPDATE \
             SET name = EXCLUDED.name RETURNING id, (xmax = 0) AS inserted, t.xmax <> 0, xmax",
        );
        let expected: Vec<Vec<String>> = [
            ["1", "0", "1", "1"],
            ["2", "1", "0", "0"],
            ["3", "0", "1", "1"],
            ["4", "1", "0", "0"],
        ]
        .iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect();
        assert_eq!(got, expected);
        // A later statement's inserted row reusing an updated row's rowid is not taken for updated.
        let later = [
            "CREATE TABLE t (id int PRIMARY KEY, name text)",
            "INSERT INTO t VALUES (1, 'a')",
            "INSERT INTO t VALUES (1, 'b') ON CONFLICT (id) DO UPDATE SET name = 'u' RETURNING xmax = 0",
            "DELETE FROM t",
        ];
        assert_eq!(
            rows(
                &later,
                "INSERT INTO t VALUES (1, 'c') ON CONFLICT (id) DO UPDATE SET name = 'v' RETURNING xmax = 0"
            ),
            vec![vec!["1".to_owned()]]
        );
    }
}
