//! Defensive SQLite: what a client's SQL may not do to the database file, the process or the host.
//!
//! Every session's connection is hardened once its own setup (page size, journal, `query_only` for time
//! travel) is done, so the client can undo none of it:
//!
//! - `SQLITE_DBCONFIG_DEFENSIVE`: no writes to the schema table or shadow tables even with
//!   `writable_schema`, no `PRAGMA journal_mode=OFF`, no direct b-tree edits.
//! - An authorizer that allows every statement but these, refused with 42501 and a message naming the
//!   feature: PRAGMAs outside an allowlist (anything that changes the file format, the page size, the journal,
//!   locking, durability, the schema's integrity or process-wide limits, or that writes files), `ATTACH` of a
//!   file (so `VACUUM INTO 'path'` too, which attaches its target; plain `VACUUM` attaches an unnamed
//!   temporary database and stays allowed, keeping the page size since that cannot be changed), `DETACH` of
//!   what was not attached, and `load_extension`.
//! - Hard limits on one value's size, one statement's length and the expression depth, so one statement
//!   cannot take unbounded memory (`sqlite3_limit`).
//!
//! The authorizer runs on the thread that prepares the statement; the reason of its last refusal is noted
//! for that thread ([`take_refusal`]) so the session reports it instead of SQLite's "not authorized".

use std::cell::RefCell;

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::Connection;

/// Longest string or blob value, in bytes (SQLite's default is 1 GB).
pub(crate) const VALUE_BYTES_MAX: i32 = 256 << 20;
/// Longest SQL statement text, in bytes.
pub(crate) const SQL_BYTES_MAX: i32 = 16 << 20;
/// Deepest expression tree.
pub(crate) const EXPR_DEPTH_MAX: i32 = 1000;
/// Compiled statements a session's connection keeps for reuse (rusqlite's LRU statement cache; its default is
/// 16): a few KiB each, so at most ~32 × 5 KiB per session.
pub(crate) const STATEMENTS_CACHED_MAX: usize = 32;

/// PRAGMAs a client may run, with or without a value. Each only reads, or changes this connection's own
/// behaviour within bounds SQLite keeps (`foreign_keys`, `case_sensitive_like`, …), or sets an application
/// field of the header (`user_version`, `application_id`).
const PRAGMAS_ANY: &[&str] = &[
    "analysis_limit",
    "application_id",
    "automatic_index",
    "case_sensitive_like",
    "cell_size_check",
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "defer_foreign_keys",
    "foreign_key_check",
    "foreign_key_list",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "incremental_vacuum",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "legacy_alter_table",
    "module_list",
    "optimize",
    "page_count",
    "pragma_list",
    "quick_check",
    "recursive_triggers",
    "reverse_unordered_selects",
    "secure_delete",
    "shrink_memory",
    "table_info",
    "table_list",
    "table_xinfo",
    "user_version",
];

/// PRAGMAs a client may read but not set: setting them would change the file format, durability, locking
/// or safety checks, or process-wide state.
const PRAGMAS_READ_ONLY: &[&str] = &[
    "auto_vacuum",
    "busy_timeout",
    "cache_size",
    "cache_spill",
    "encoding",
    "ignore_check_constraints",
    "journal_mode",
    "journal_size_limit",
    "locking_mode",
    "max_page_count",
    "mmap_size",
    "page_size",
    "query_only",
    "schema_version",
    "synchronous",
    "temp_store",
    "trusted_schema",
];

thread_local! {
    /// Why the authorizer last refused a statement on this thread.
    static LAST_REFUSAL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The reason of the authorizer's last refusal on this thread, taken.
pub(crate) fn take_refusal() -> Option<String> {
    LAST_REFUSAL.with(|last| last.borrow_mut().take())
}

/// Hardens `conn` for a client (see the module doc). Call it after the connection's own setup.
pub(crate) fn harden(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, VALUE_BYTES_MAX)?;
    conn.set_limit(Limit::SQLITE_LIMIT_SQL_LENGTH, SQL_BYTES_MAX)?;
    conn.set_limit(Limit::SQLITE_LIMIT_EXPR_DEPTH, EXPR_DEPTH_MAX)?;
    // The authorizer runs when a statement is compiled: a cached statement was authorized then, and what it
    // decides depends on the statement alone (`refusal`), never on the session's state.
    conn.set_prepared_statement_cache_capacity(STATEMENTS_CACHED_MAX);
    conn.authorizer(Some(authorize))?;
    Ok(())
}

fn authorize(context: AuthContext<'_>) -> Authorization {
    match refusal(&context.action) {
        None => Authorization::Allow,
        Some(reason) => {
            LAST_REFUSAL.with(|last| *last.borrow_mut() = Some(reason));
            Authorization::Deny
        }
    }
}

/// Why `action` is refused, or `None` if it is allowed.
fn refusal(action: &AuthAction<'_>) -> Option<String> {
    match action {
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            let allowed = PRAGMAS_ANY.contains(&name.as_str())
                || (pragma_value.is_none() && PRAGMAS_READ_ONLY.contains(&name.as_str()));
            (!allowed).then(|| match pragma_value {
                Some(_) if PRAGMAS_READ_ONLY.contains(&name.as_str()) => {
                    format!("PRAGMA {name} can be read but not set on Cambium")
                }
                _ => format!("PRAGMA {name} is not allowed on Cambium"),
            })
        }
        // Plain VACUUM attaches an unnamed temporary database; anything else names a file on the host.
        AuthAction::Attach { filename: "" } => None,
        AuthAction::Attach { .. } => {
            Some("ATTACH of a database file (and VACUUM INTO) is not allowed on Cambium".to_owned())
        }
        AuthAction::Function { function_name } if function_name.eq_ignore_ascii_case("load_extension") => {
            Some("load_extension is not allowed on Cambium".to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hardened() -> Connection {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (x INTEGER)").expect("create");
        harden(&conn).expect("harden");
        conn
    }

    fn refused(conn: &Connection, sql: &str) -> String {
        take_refusal();
        let error = conn.execute_batch(sql).expect_err(sql);
        assert_eq!(
            crate::pg::error::SqlError::from(error).code,
            crate::pg::error::INSUFFICIENT_PRIVILEGE,
            "{sql}"
        );
        take_refusal().unwrap_or_default()
    }

    #[test]
    fn file_format_journal_locking_and_schema_pragmas_are_refused() {
        let conn = hardened();
        for sql in [
            "PRAGMA page_size=16384",
            "PRAGMA journal_mode=DELETE",
            "PRAGMA journal_mode=OFF",
            "PRAGMA locking_mode=EXCLUSIVE",
            "PRAGMA synchronous=OFF",
            "PRAGMA writable_schema=ON",
            "PRAGMA schema_version=99",
            "PRAGMA auto_vacuum=FULL",
            "PRAGMA query_only=OFF",
            "PRAGMA mmap_size=1000000000",
            "PRAGMA hard_heap_limit=1",
            "PRAGMA temp_store_directory='/tmp'",
            "PRAGMA main.page_size=4096",
        ] {
            let reason = refused(&conn, sql);
            assert!(reason.contains("PRAGMA"), "{sql}: {reason}");
        }
    }

    #[test]
    fn reading_and_harmless_pragmas_work() -> rusqlite::Result<()> {
        let conn = hardened();
        let _: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
        let _: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
        conn.execute_batch("PRAGMA foreign_keys=ON; PRAGMA user_version=7;")?;
        let ok: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        assert_eq!(ok, "ok");
        conn.query_row("SELECT count(*) FROM pragma_table_info('t')", [], |row| {
            row.get::<_, i64>(0)
        })?;
        Ok(())
    }

    #[test]
    fn files_and_extensions_are_refused_but_vacuum_works() -> rusqlite::Result<()> {
        let conn = hardened();
        let dir = std::env::temp_dir().join(format!("cambium-defend-{}", std::process::id()));
        let target = dir.join("copy.db");
        let path = target.to_string_lossy();
        assert!(refused(&conn, &format!("ATTACH '{path}' AS other")).contains("ATTACH"));
        assert!(refused(&conn, &format!("VACUUM INTO '{path}'")).contains("VACUUM INTO"));
        assert!(!target.exists(), "nothing was written");
        assert!(refused(&conn, "SELECT load_extension('x')").contains("load_extension"));
        conn.execute_batch("VACUUM")?;
        Ok(())
    }

    #[test]
    fn the_schema_table_cannot_be_written() {
        let conn = hardened();
        let error = conn
            .execute_batch("UPDATE sqlite_master SET sql = 'garbage'")
            .expect_err("refused");
        assert!(error.to_string().contains("may not be modified"), "{error}");
    }
}
