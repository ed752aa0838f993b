//! UNIQUE constraints declared `DEFERRABLE`, which SQLite cannot defer: such a constraint is a plain index
//! named as the constraint (its table and columns, kept current by SQLite through renames) and two triggers
//! (after INSERT, after UPDATE of its columns) that count the rows holding the new row's key. A second row
//! is a violation: raised at once (23505) while the constraint is checked immediately, noted in the
//! session's [`Modes`] while it is deferred (`INITIALLY DEFERRED`, or `SET CONSTRAINTS … DEFERRED` in a
//! transaction block). The noted constraints are checked again, over the whole table, at `SET CONSTRAINTS …
//! IMMEDIATE` and at `COMMIT` (which fails with 23505 and rolls back, as PostgreSQL's does).
//!
//! The triggers' names carry the constraint's name and initial mode: `_cambium_unique_d_ins:<name>` (`d`
//! initially deferred, `i` initially immediate), so the catalog reads the constraints back from
//! `sqlite_schema` alone.
//!
//! Documented difference: a deferrable constraint checked immediately is checked row by row (as SQLite
//! checks a non-deferrable one), not at the end of the statement as PostgreSQL checks it, so an `UPDATE`
//! that passes through a duplicate key (`SET k = k + 1`) fails where PostgreSQL's succeeds.

use std::collections::{BTreeSet, HashMap};

use rusqlite::Connection;

use crate::catalog::{quote_ident, quote_literal};

/// What every trigger of a deferrable constraint's name starts with.
pub const TRIGGER_PREFIX: &str = "_cambium_unique_";
/// Most constraints one transaction notes for checking at its end (past it, every deferrable constraint
/// of the database is checked).
pub const PENDING_MAX: usize = 1024;

/// One deferrable UNIQUE constraint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeferrableUnique {
    /// The constraint's name, which is its index's SQLite name.
    pub name: String,
    /// Its table's SQLite name.
    pub table: String,
    /// Its columns, in key order.
    pub columns: Vec<String>,
    /// `INITIALLY DEFERRED`.
    pub initially_deferred: bool,
}

impl DeferrableUnique {
    fn trigger_name(&self, event: &str) -> String {
        let mode = if self.initially_deferred { 'd' } else { 'i' };
        format!("{TRIGGER_PREFIX}{mode}_{event}:{}", self.name)
    }

    /// The statements that make the constraint on an existing table (its index, then its triggers).
    pub fn create_sql(&self) -> Vec<String> {
        let columns: Vec<String> = self.columns.iter().map(|c| quote_ident(c)).collect();
        let table = quote_ident(&self.table);
        let same_key: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{0} = NEW.{0}", quote_ident(c)))
            .collect();
        let check = format!(
            "SELECT pg_unique_row({}, {}, (SELECT count(*) FROM {table} WHERE {}), {}); ",
            quote_literal(&self.name),
            i64::from(self.initially_deferred),
            same_key.join(" AND "),
            self.key_text("NEW.")
        );
        vec![
            format!(
                "CREATE INDEX {} ON {table} ({})",
                quote_ident(&self.name),
                columns.join(", ")
            ),
            format!(
                "CREATE TRIGGER {} AFTER INSERT ON {table} BEGIN {check}END",
                quote_ident(&self.trigger_name("ins"))
            ),
            format!(
                "CREATE TRIGGER {} AFTER UPDATE OF {} ON {table} BEGIN {check}END",
                quote_ident(&self.trigger_name("upd")),
                columns.join(", ")
            ),
        ]
    }

    /// An SQL expression giving PostgreSQL's `Key (a, b)=(1, 2)` text of a row (`prefix`: `NEW.` in a
    /// trigger, empty over the table).
    fn key_text(&self, prefix: &str) -> String {
        let names = self.columns.join(", ");
        let placeholders = vec!["%s"; self.columns.len()].join(", ");
        let values: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{prefix}{}", quote_ident(c)))
            .collect();
        format!(
            "printf({}, {})",
            quote_literal(&format!("({names})=({placeholders})")),
            values.join(", ")
        )
    }

    /// The statement that checks the whole table: it fails with 23505 naming the first duplicate key.
    pub fn check_sql(&self) -> String {
        let columns: Vec<String> = self.columns.iter().map(|c| quote_ident(c)).collect();
        let not_null: Vec<String> = columns.iter().map(|c| format!("{c} IS NOT NULL")).collect();
        format!(
            "SELECT pg_unique_violation({}, {}) FROM (SELECT {cols} FROM {} WHERE {} GROUP BY {cols} \
             HAVING count(*) > 1 LIMIT 1)",
            quote_literal(&self.name),
            self.key_text(""),
            quote_ident(&self.table),
            not_null.join(" AND "),
            cols = columns.join(", ")
        )
    }
}

/// Every deferrable UNIQUE constraint of the database, read from its triggers and indexes.
pub fn load(conn: &Connection) -> rusqlite::Result<Vec<DeferrableUnique>> {
    let mut stmt = conn.prepare_cached(
        "SELECT t.name, i.tbl_name FROM main.sqlite_schema t JOIN main.sqlite_schema i ON i.type = 'index' \
         AND i.name = substr(t.name, 23) WHERE t.type = 'trigger' AND t.name LIKE '\\_cambium\\_unique\\__\\_ins:%' \
         ESCAPE '\\' ORDER BY i.rowid",
    )?;
    let rows = stmt.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?;
    let mut list = Vec::new();
    for row in rows {
        let (trigger, table) = row?;
        let Some(name) = trigger.get(22..) else {
            continue;
        };
        let initially_deferred = trigger.as_bytes().get(16) == Some(&b'd');
        let mut columns_stmt = conn.prepare_cached("SELECT name FROM pragma_index_info(?1, 'main') ORDER BY seqno")?;
        let columns = columns_stmt
            .query_map([name], |row| row.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        list.push(DeferrableUnique {
            name: name.to_owned(),
            table,
            columns,
            initially_deferred,
        });
    }
    Ok(list)
}

/// A session's constraint modes for the open transaction (`SET CONSTRAINTS`), and the deferrable
/// constraints it saw violated while deferred.
#[derive(Debug, Default)]
pub struct Modes {
    /// `SET CONSTRAINTS ALL …`: deferred or not, for every constraint not named since.
    all: Option<bool>,
    /// `SET CONSTRAINTS name …`.
    named: HashMap<String, bool>,
    /// Constraints to check before the transaction ends.
    noted: BTreeSet<String>,
    /// More than [`PENDING_MAX`] were noted: every constraint is to be checked.
    overflow: bool,
    /// Whether a transaction block is open (outside one, a statement is its own transaction: nothing is
    /// deferred past it).
    in_block: bool,
}

impl Modes {
    /// Whether the constraint is deferred now.
    pub fn deferred(&self, name: &str, initially_deferred: bool) -> bool {
        if !self.in_block {
            return false;
        }
        self.named.get(name).copied().or(self.all).unwrap_or(initially_deferred)
    }

    /// `SET CONSTRAINTS {ALL | names} {DEFERRED | IMMEDIATE}` (nothing outside a transaction block, as
    /// PostgreSQL warns and does nothing).
    pub fn set(&mut self, names: Option<&[String]>, deferred: bool) {
        if !self.in_block {
            return;
        }
        match names {
            None => {
                self.all = Some(deferred);
                self.named.clear();
            }
            Some(names) => {
                for name in names {
                    self.named.insert(name.clone(), deferred);
                }
            }
        }
    }

    /// Notes a constraint violated while deferred.
    pub fn note(&mut self, name: &str) {
        if self.noted.len() < PENDING_MAX {
            self.noted.insert(name.to_owned());
        } else {
            self.overflow = true;
        }
    }

    /// Whether the constraint was noted (or too many were to tell).
    pub fn is_noted(&self, name: &str) -> bool {
        self.overflow || self.noted.contains(name)
    }

    /// The constraint checked and found whole.
    pub fn clear(&mut self, name: &str) {
        self.noted.remove(name);
    }

    /// Whether a transaction block is open; leaving one forgets the block's modes and notes.
    pub fn set_in_block(&mut self, in_block: bool) {
        if !in_block {
            *self = Modes::default();
        }
        self.in_block = in_block;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_follow_set_constraints_inside_a_block_only() {
        let mut modes = Modes::default();
        modes.set(None, true);
        assert!(!modes.deferred("k", false), "outside a block nothing is deferred");
        assert!(!modes.deferred("k", true), "outside a block nothing is deferred");
        modes.set_in_block(true);
        assert!(modes.deferred("k", true));
        modes.set(None, true);
        assert!(modes.deferred("k", false));
        modes.set(Some(&["k".to_owned()]), false);
        assert!(!modes.deferred("k", false));
        assert!(modes.deferred("other", false));
        modes.note("k");
        assert!(modes.is_noted("k") && !modes.is_noted("other"));
        modes.set_in_block(false);
        assert!(!modes.is_noted("k"));
    }

    #[test]
    fn a_constraint_is_read_back_from_its_triggers() {
        let conn = Connection::open_in_memory().expect("memory");
        crate::functions::install(&conn, std::sync::Arc::new(crate::SessionState::new("d", "u", 1))).expect("install");
        conn.execute_batch("CREATE TABLE \"app.pair\" (id, a, b)")
            .expect("table");
        let constraint = DeferrableUnique {
            name: "app.pair_a_b_key".to_owned(),
            table: "app.pair".to_owned(),
            columns: vec!["a".to_owned(), "b".to_owned()],
            initially_deferred: true,
        };
        for sql in constraint.create_sql() {
            conn.execute_batch(&sql).expect("creates");
        }
        assert_eq!(load(&conn).expect("loads"), vec![constraint.clone()]);
        conn.execute_batch("INSERT INTO \"app.pair\" VALUES (1, 1, 1), (2, 1, NULL), (3, 1, NULL)")
            .expect("no duplicate: NULLs are distinct");
        conn.execute_batch(&constraint.check_sql()).expect("whole");
        let duplicate = conn.execute_batch("INSERT INTO \"app.pair\" VALUES (4, 1, 1)");
        let error = duplicate.expect_err("outside a block a deferred constraint is checked at once");
        assert_eq!(crate::error_of(&error.to_string()).map(|e| e.code), Some("23505"));
    }
}
