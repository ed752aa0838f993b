//! A session's cursors (`DECLARE`, `FETCH`, `MOVE`, `CLOSE`): the query runs when the cursor is declared
//! and its rows are kept (within the limits of any result: `exec::RESULT_ROWS_MAX` rows and
//! `exec::RESULT_BYTES_MAX` bytes), then handed out by position as PostgreSQL does. A cursor sees its
//! transaction's snapshot either way, so reading the rows at once changes no answer; it changes memory use,
//! which the limits bound.
//!
//! Positions follow PostgreSQL: 0 is before the first row, `n + 1` after the last, rows are 1..=n.

use std::collections::HashMap;

use pgcompat::translate::cursor::CursorMove;
use rusqlite::types::Value;

use super::error::{SqlError, OBJECT_NOT_IN_PREREQUISITE_STATE, PROGRAM_LIMIT_EXCEEDED};
use super::exec::Columns;

/// Most cursors one session keeps open.
pub(crate) const CURSORS_MAX: usize = 256;

/// invalid_cursor_name
const INVALID_CURSOR_NAME: &str = "34000";
/// duplicate_cursor
const DUPLICATE_CURSOR: &str = "42P03";

/// One open cursor.
pub(crate) struct Cursor {
    pub(crate) columns: Columns,
    rows: Vec<Vec<Value>>,
    /// 0 before the first row, `rows.len() + 1` after the last.
    position: usize,
    /// `NO SCROLL`: backward moves are refused.
    no_scroll: bool,
    /// `WITH HOLD`: kept when its transaction commits.
    hold: bool,
    /// Declared in the open transaction: dropped if it rolls back, even with `WITH HOLD`.
    declared_in_open_transaction: bool,
    /// The `DECLARE` that opened it (for `pg_cursors`; empty until [`Cursor::declared_by`]).
    statement: String,
    /// When it was opened.
    created_at: std::time::SystemTime,
}

impl Cursor {
    /// A cursor over `rows`, before its first row.
    pub(crate) fn new(columns: Columns, rows: Vec<Vec<Value>>, scroll: Option<bool>, hold: bool) -> Cursor {
        assert!(
            rows.iter().all(|row| row.len() == columns.len()),
            "every row has one value per column ({})",
            columns.len()
        );
        Cursor {
            columns,
            rows,
            position: 0,
            no_scroll: scroll == Some(false),
            hold,
            declared_in_open_transaction: true,
            statement: String::new(),
            created_at: std::time::SystemTime::now(),
        }
    }

    /// The cursor, with the `DECLARE` statement that opened it (what `pg_cursors` shows).
    pub(crate) fn declared_by(mut self, statement: String) -> Cursor {
        self.statement = statement;
        self
    }

    /// Moves as `direction` says and returns the rows passed over (what `FETCH` returns, in order).
    pub(crate) fn step(&mut self, name: &str, direction: CursorMove) -> Result<Vec<Vec<Value>>, SqlError> {
        let indexes = self.indexes(name, direction)?;
        Ok(indexes.into_iter().map(|i| self.rows[i - 1].clone()).collect())
    }

    /// The 1-based row numbers `direction` passes over, the position left where PostgreSQL leaves it.
    fn indexes(&mut self, name: &str, direction: CursorMove) -> Result<Vec<usize>, SqlError> {
        let count = self.rows.len();
        let backward = match direction {
            CursorMove::Backward(_) => true,
            CursorMove::Absolute(n) => n < 0 || usize::try_from(n).is_ok_and(|n| n < self.position),
            CursorMove::Relative(n) => n < 0,
            CursorMove::Forward(_) => false,
        };
        if backward && self.no_scroll {
            return Err(SqlError::new(
                OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("cursor \"{name}\" can only scan forward"),
            ));
        }
        let mut out = Vec::new();
        match direction {
            CursorMove::Forward(limit) => {
                let limit = limit.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(0));
                while out.len() < limit && self.position <= count {
                    self.position += 1;
                    if self.position <= count {
                        out.push(self.position);
                    }
                }
            }
            CursorMove::Backward(limit) => {
                let limit = limit.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(0));
                while out.len() < limit && self.position > 0 {
                    self.position -= 1;
                    if self.position >= 1 {
                        out.push(self.position);
                    }
                }
            }
            CursorMove::Absolute(n) => {
                self.position = absolute_position(n, count);
                if (1..=count).contains(&self.position) {
                    out.push(self.position);
                }
            }
            CursorMove::Relative(n) => {
                let target = i128::try_from(self.position).unwrap_or(i128::MAX) + i128::from(n);
                self.position = usize::try_from(target.clamp(0, count as i128 + 1)).unwrap_or(0);
                if (1..=count).contains(&self.position) {
                    out.push(self.position);
                }
            }
        }
        Ok(out)
    }
}

/// Where `ABSOLUTE n` puts a cursor over `count` rows.
fn absolute_position(n: i64, count: usize) -> usize {
    let count_i = count as i128;
    let target = if n >= 0 {
        i128::from(n)
    } else {
        count_i + 1 + i128::from(n)
    };
    usize::try_from(target.clamp(0, count_i + 1)).unwrap_or(0)
}

/// A session's open cursors, by name.
#[derive(Default)]
pub(crate) struct Cursors {
    open: HashMap<String, Cursor>,
}

impl Cursors {
    /// Opens `cursor` as `name` (42P03 if one is open under that name).
    pub(crate) fn declare(&mut self, name: &str, cursor: Cursor) -> Result<(), SqlError> {
        if self.open.contains_key(name) {
            return Err(SqlError::new(
                DUPLICATE_CURSOR,
                format!("cursor \"{name}\" already exists"),
            ));
        }
        if self.open.len() >= CURSORS_MAX {
            return Err(SqlError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("more than {CURSORS_MAX} open cursors; CLOSE some"),
            ));
        }
        self.open.insert(name.to_owned(), cursor);
        Ok(())
    }

    /// The cursor called `name` (34000 if there is none).
    pub(crate) fn get(&mut self, name: &str) -> Result<&mut Cursor, SqlError> {
        self.open
            .get_mut(name)
            .ok_or_else(|| SqlError::new(INVALID_CURSOR_NAME, format!("cursor \"{name}\" does not exist")))
    }

    /// `CLOSE name` (34000 if there is none), or `CLOSE ALL`.
    pub(crate) fn close(&mut self, name: Option<&str>) -> Result<(), SqlError> {
        match name {
            None => self.open.clear(),
            Some(name) => {
                if self.open.remove(name).is_none() {
                    return Err(SqlError::new(
                        INVALID_CURSOR_NAME,
                        format!("cursor \"{name}\" does not exist"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether no cursor is open.
    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The open cursors as `pg_cursors` shows them, by name.
    pub(crate) fn rows(&self) -> Vec<pgcompat::functions::CursorRow> {
        let mut rows: Vec<_> = self
            .open
            .iter()
            .map(|(name, cursor)| pgcompat::functions::CursorRow {
                name: name.clone(),
                statement: cursor.statement.clone(),
                holdable: cursor.hold,
                scrollable: !cursor.no_scroll,
                created_at: cursor.created_at,
            })
            .collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }

    /// The open transaction ended: cursors without `WITH HOLD` close; on rollback, so do the ones it
    /// declared.
    pub(crate) fn end_transaction(&mut self, committed: bool) {
        self.open
            .retain(|_, cursor| cursor.hold && (committed || !cursor.declared_in_open_transaction));
        for cursor in self.open.values_mut() {
            cursor.declared_in_open_transaction = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(count: i64, scroll: Option<bool>) -> Cursor {
        let rows = (1..=count).map(|n| vec![Value::Integer(n)]).collect();
        Cursor::new(
            vec![super::super::exec::Column::computed("n", pgcompat::PgType::INT8)],
            rows,
            scroll,
            false,
        )
    }

    fn fetch(cursor: &mut Cursor, direction: CursorMove) -> Vec<i64> {
        cursor
            .step("c", direction)
            .expect("moves")
            .into_iter()
            .map(|row| match row[0] {
                Value::Integer(n) => n,
                _ => unreachable!("integers only"),
            })
            .collect()
    }

    #[test]
    fn fetches_walk_the_rows_as_postgresql_does() {
        let mut c = numbers(10, None);
        assert_eq!(fetch(&mut c, CursorMove::Forward(Some(1))), [1]);
        assert_eq!(fetch(&mut c, CursorMove::Forward(Some(3))), [2, 3, 4]);
        assert_eq!(fetch(&mut c, CursorMove::Forward(Some(2))), [5, 6]);
        assert_eq!(
            fetch(&mut c, CursorMove::Forward(Some(2))),
            [7, 8],
            "MOVE 2 passes over two rows"
        );
        assert_eq!(fetch(&mut c, CursorMove::Forward(Some(1))), [9]);
        assert_eq!(fetch(&mut c, CursorMove::Forward(None)), [10]);
        assert_eq!(fetch(&mut c, CursorMove::Forward(Some(1))), Vec::<i64>::new());
        assert_eq!(
            fetch(&mut c, CursorMove::Backward(Some(1))),
            [10],
            "after the end, PRIOR is the last row"
        );

        let mut s = numbers(5, Some(true));
        assert_eq!(fetch(&mut s, CursorMove::Absolute(-1)), [5]);
        assert_eq!(fetch(&mut s, CursorMove::Backward(Some(1))), [4]);
        assert_eq!(fetch(&mut s, CursorMove::Absolute(1)), [1]);
        assert_eq!(fetch(&mut s, CursorMove::Absolute(3)), [3]);
        assert_eq!(fetch(&mut s, CursorMove::Relative(-1)), [2]);
        assert_eq!(fetch(&mut s, CursorMove::Relative(0)), [2]);
        assert_eq!(fetch(&mut s, CursorMove::Backward(Some(5))), [1]);
        assert_eq!(fetch(&mut s, CursorMove::Absolute(99)), Vec::<i64>::new());
        assert_eq!(
            fetch(&mut s, CursorMove::Relative(i64::MIN)),
            Vec::<i64>::new(),
            "no overflow"
        );
    }

    #[test]
    fn no_scroll_cursors_only_go_forward_and_transactions_close_cursors() {
        let mut c = numbers(3, Some(false));
        assert!(c.step("c", CursorMove::Forward(Some(2))).is_ok());
        assert!(c.step("c", CursorMove::Backward(Some(1))).is_err());
        let mut cursors = Cursors::default();
        cursors.declare("plain", numbers(1, None)).expect("declared");
        let mut held = numbers(1, None);
        held.hold = true;
        cursors.declare("held", held).expect("declared");
        assert!(
            cursors.declare("held", numbers(1, None)).is_err(),
            "one cursor per name"
        );
        cursors.end_transaction(true);
        assert!(cursors.get("plain").is_err());
        assert!(cursors.get("held").is_ok());
        cursors.end_transaction(false);
        assert!(
            cursors.get("held").is_ok(),
            "a held cursor of a committed transaction survives later rollbacks"
        );
        assert!(cursors.close(Some("nope")).is_err());
    }
}
