//! What depends on a table through foreign keys, so `DROP TABLE` and `TRUNCATE` refuse, or cascade, as
//! PostgreSQL does instead of leaving other tables' keys pointing at nothing.
//!
//! Views that read a dropped table are not tracked here (SQLite lets them break); foreign keys are the
//! dependency applications meet.

use rusqlite::Connection;

use crate::error::{PgError, DEPENDENT_OBJECTS_STILL_EXIST, FEATURE_NOT_SUPPORTED, INTERNAL_ERROR};

/// Tables, other than `table` itself, whose foreign keys reference `table`.
fn referencing_tables(conn: &Connection, table: &str) -> Result<Vec<String>, PgError> {
    let failed = |e: rusqlite::Error| PgError::new(INTERNAL_ERROR, format!("reading foreign keys: {e}"));
    let mut stmt = conn
        .prepare_cached(
            "SELECT DISTINCT m.name FROM sqlite_schema m, pragma_foreign_key_list(m.name) f \
             WHERE m.type = 'table' AND f.\"table\" = ?1 COLLATE NOCASE AND m.name <> ?1 COLLATE NOCASE \
             ORDER BY m.name",
        )
        .map_err(failed)?;
    let names = stmt
        .query_map([table], |row| row.get::<_, String>(0))
        .map_err(failed)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed);
    names
}

fn listed(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// `DROP TABLE names`: 2BP01 if a table not dropped with them references one (`CASCADE` then: 0A000,
/// dropping other tables' foreign keys is not supported).
pub(crate) fn check_drop(conn: &Connection, names: &[String], cascade: bool) -> Result<(), PgError> {
    for name in names {
        let outside: Vec<String> = referencing_tables(conn, name)?
            .into_iter()
            .filter(|other| !listed(names, other))
            .collect();
        if let Some(first) = outside.first() {
            return Err(if cascade {
                PgError::new(
                    FEATURE_NOT_SUPPORTED,
                    format!("DROP TABLE {name} CASCADE would drop the foreign keys of {}: not supported; drop those constraints first", outside.join(", ")),
                )
            } else {
                PgError::new(
                    DEPENDENT_OBJECTS_STILL_EXIST,
                    format!(
                        "cannot drop table {name} because other objects depend on it (a foreign key of table {first})"
                    ),
                )
            });
        }
    }
    Ok(())
}

/// The tables `TRUNCATE names` empties, children before parents: with `cascade`, every table that
/// references one of them (transitively); without, 0A000 if such a table is not in the list.
pub(crate) fn truncate_order(conn: &Connection, names: &[String], cascade: bool) -> Result<Vec<String>, PgError> {
    let mut all: Vec<String> = names.to_vec();
    let mut at = 0;
    while at < all.len() {
        let name = all[at].clone();
        for other in referencing_tables(conn, &name)? {
            if listed(&all, &other) {
                continue;
            }
            if !cascade {
                return Err(PgError::new(
                    FEATURE_NOT_SUPPORTED,
                    format!("cannot truncate a table referenced in a foreign key constraint: table {other} references {name} (truncate it too, or use TRUNCATE … CASCADE)"),
                ));
            }
            all.push(other);
        }
        at += 1;
    }
    // Referencing tables were found after what they reference: emptied first.
    all.reverse();
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let conn = Connection::open_in_memory().expect("opens");
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; CREATE TABLE a (id INTEGER PRIMARY KEY); \
             CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a(id)); \
             CREATE TABLE c (id INTEGER PRIMARY KEY, b_id INTEGER REFERENCES b(id), me INTEGER REFERENCES c(id));",
        )
        .expect("schema");
        conn
    }

    #[test]
    fn drops_and_truncates_see_foreign_keys() -> Result<(), PgError> {
        let conn = conn();
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            check_drop(&conn, &names(&["a"]), false).map_err(|e| e.code),
            Err(DEPENDENT_OBJECTS_STILL_EXIST)
        );
        assert_eq!(
            check_drop(&conn, &names(&["a"]), true).map_err(|e| e.code),
            Err(FEATURE_NOT_SUPPORTED)
        );
        check_drop(&conn, &names(&["A", "b", "c"]), false)?;
        check_drop(&conn, &names(&["c"]), false)?;
        assert!(truncate_order(&conn, &names(&["a"]), false).is_err());
        assert_eq!(truncate_order(&conn, &names(&["a"]), true)?, names(&["c", "b", "a"]));
        assert_eq!(truncate_order(&conn, &names(&["c"]), false)?, names(&["c"]));
        Ok(())
    }
}
