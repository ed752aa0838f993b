//! SQL functions made with `CREATE FUNCTION … LANGUAGE sql`, kept in `_cambium_functions` inside the
//! database (one row each: name, arguments, result type, volatility, body), so they branch, restore and
//! time-travel with the data. A call is inlined by the translator (`translate::routines`): the body's
//! `SELECT`, its parameters replaced by the call's arguments, as PostgreSQL itself inlines simple SQL
//! functions.
//!
//! **Invariant:** a function's OID is [`FUNCTION_OID_BASE`] plus its row's never-reused id (`AUTOINCREMENT`),
//! between the schemas' OIDs and the enum types'.

use rusqlite::{Connection, OptionalExtension};

use crate::catalog::quote_literal;
use crate::types::PgType;

/// The table of functions.
pub const FUNCTIONS_TABLE: &str = "_cambium_functions";

/// The statement that makes the functions table (inside the DDL's transaction).
pub const CREATE_FUNCTIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS _cambium_functions (\
     id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, args TEXT NOT NULL, returns TEXT NOT NULL, \
     volatility TEXT NOT NULL, body TEXT NOT NULL)";

/// The first OID of a function (below the schemas' `0x5F00_0000`).
pub const FUNCTION_OID_BASE: i64 = 0x5E00_0000;

/// Most functions a database keeps (each needs an OID below the schemas').
pub const FUNCTIONS_MAX: i64 = 0x00FF_FFFF;

/// One SQL function.
#[derive(Clone, Debug, PartialEq)]
pub struct Routine {
    /// Its row's id.
    pub id: i64,
    /// Its name as a relation's SQLite name is made (`f`, or `s.f` in a schema other than `public`).
    pub name: String,
    /// Its arguments: name (empty when unnamed) and type.
    pub args: Vec<(String, PgType)>,
    /// Its result type.
    pub returns: PgType,
    /// `i`, `s` or `v` (PostgreSQL's `provolatile`).
    pub volatility: String,
    /// Its body: one `SELECT` in PostgreSQL's dialect.
    pub body: String,
}

impl Routine {
    /// The function's OID.
    pub fn oid(&self) -> i64 {
        FUNCTION_OID_BASE + self.id
    }

    /// The arguments as JSON (`[["a", "int4"]]`), as the table keeps them.
    pub fn args_json(&self) -> String {
        let list: Vec<serde_json::Value> = self
            .args
            .iter()
            .map(|(name, ty)| serde_json::json!([name, ty.catalog_text()]))
            .collect();
        serde_json::Value::Array(list).to_string()
    }

    /// Whether it takes arguments of exactly these types.
    pub fn takes(&self, types: &[PgType]) -> bool {
        self.args.len() == types.len() && self.args.iter().zip(types).all(|((_, a), b)| a == b)
    }
}

/// Arguments read back from their JSON (`None`: not that shape, or a type this version does not know).
pub fn args_from_json(json: &str) -> Option<Vec<(String, PgType)>> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    value
        .as_array()?
        .iter()
        .map(|pair| {
            let name = pair.get(0)?.as_str()?.to_owned();
            let ty = PgType::from_catalog(pair.get(1)?.as_str()?)?;
            Some((name, ty))
        })
        .collect()
}

/// Every function of the database (none while the table does not exist); a row this version cannot read
/// is skipped, never an error.
pub fn load(conn: &Connection) -> rusqlite::Result<Vec<Routine>> {
    let exists: Option<i64> = conn
        .prepare_cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_cambium_functions'")?
        .query_row([], |row| row.get(0))
        .optional()?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt =
        conn.prepare_cached("SELECT id, name, args, returns, volatility, body FROM _cambium_functions ORDER BY id")?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
            row.get::<_, String>(4)?,
            row.get::<_, String>(5)?,
        ))
    })?;
    let mut routines = Vec::new();
    for row in rows {
        let (id, name, args, returns, volatility, body) = row?;
        let (Some(args), Some(returns)) = (args_from_json(&args), PgType::from_catalog(&returns)) else {
            continue;
        };
        routines.push(Routine {
            id,
            name,
            args,
            returns,
            volatility,
            body,
        });
    }
    Ok(routines)
}

/// The statement that stores a new function.
pub fn insert_sql(routine: &Routine) -> String {
    format!(
        "INSERT INTO _cambium_functions (name, args, returns, volatility, body) VALUES ({}, {}, {}, {}, {})",
        quote_literal(&routine.name),
        quote_literal(&routine.args_json()),
        quote_literal(&routine.returns.catalog_text()),
        quote_literal(&routine.volatility),
        quote_literal(&routine.body)
    )
}

/// The statement that forgets a function.
pub fn delete_sql(id: i64) -> String {
    format!("DELETE FROM _cambium_functions WHERE id = {id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_round_trip_through_their_table() {
        let conn = Connection::open_in_memory().expect("memory");
        assert_eq!(load(&conn).expect("loads"), Vec::new());
        let routine = Routine {
            id: 1,
            name: "app.add_one".to_owned(),
            args: vec![("a".to_owned(), PgType::INT4), (String::new(), PgType::TEXT)],
            returns: PgType::INT8,
            volatility: "i".to_owned(),
            body: "SELECT a + 1 WHERE 'it''s' <> ''".to_owned(),
        };
        conn.execute_batch(CREATE_FUNCTIONS_TABLE).expect("table");
        conn.execute_batch(&insert_sql(&routine)).expect("insert");
        assert_eq!(load(&conn).expect("loads"), vec![routine.clone()]);
        assert!(routine.takes(&[PgType::INT4, PgType::TEXT]));
        assert!(!routine.takes(&[PgType::INT4]));
        assert_eq!(routine.oid(), FUNCTION_OID_BASE + 1);
        conn.execute_batch(&delete_sql(1)).expect("delete");
        assert_eq!(load(&conn).expect("loads"), Vec::new());
    }
}
