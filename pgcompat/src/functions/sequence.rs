//! The sequence functions: `nextval`, `currval`, `setval`, `lastval` (the translator calls them `pg_nextval`
//! and so on, with the sequence as text or OID).
//!
//! `nextval` and `setval` write the sequence's row of `_cambium_sequences` on the connection the calling
//! statement runs on, inside that statement's transaction, whatever the statement is (a `SELECT`, a column
//! default an `INSERT` evaluates per row, a `RETURNING` list): a SQLite function has no other way to write,
//! and a second connection would be a second transaction. That needs the connection handle SQLite gives the
//! function (`sqlite3_context_db_handle`), which rusqlite hands out only as `unsafe`; [`on_connection`] is
//! the one place it is taken (see its SAFETY comment). The values a session was given (`currval`,
//! `lastval`) are the session's, in [`SequenceSession`], as in PostgreSQL.
//!
//! **Boundary:** a value is handed out only by a committed write of the row, in the transaction of the
//! statement that asked for it; a rolled-back transaction gives its values back (PostgreSQL's do not come
//! back; see ARCHITECTURE.md).

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};

use super::{raise, SessionState};
use crate::error::{PgError, OBJECT_NOT_IN_PREREQUISITE_STATE, UNDEFINED_TABLE};
use crate::sequence::Sequence;
use crate::types::PgType;

/// Most sequences whose last value a session remembers; past it the memory is emptied (`currval` is then
/// 55000 for the ones forgotten). A session that touches this many sequences is not a real workload.
const REMEMBERED_SEQUENCES_MAX: usize = 65_536;

/// What a session was given by its sequences: `currval` per sequence (by its never-reused id), and the
/// sequence `lastval` reads.
#[derive(Debug, Default)]
pub struct SequenceSession {
    given: HashMap<i64, Given>,
    last_used: Option<i64>,
    /// Sequences `nextval` moved since the session last held no transaction: their moves may yet be rolled
    /// back ([`settle`]).
    unsettled: Vec<i64>,
}

/// The last value a session got from one sequence, and the state the sequence had before `nextval` moved
/// it there (`None` after a `setval`).
#[derive(Clone, Copy, Debug)]
struct Given {
    value: i64,
    before: Option<(i64, bool)>,
}

impl SequenceSession {
    fn remember(&mut self, id: i64, given: Given) {
        if self.given.len() >= REMEMBERED_SEQUENCES_MAX && !self.given.contains_key(&id) {
            self.given.clear();
        }
        self.given.insert(id, given);
    }

    fn last_value(&self, id: i64) -> Option<i64> {
        self.given.get(&id).map(|g| g.value)
    }

    /// The state `nextval` steps from: the database's, unless it is exactly the state this session's last
    /// `nextval` of the sequence moved away from, which means that move was rolled back (its statement
    /// failed, or its transaction rolled back) and nothing moved the sequence since; then the value this
    /// session was given. So a session never gets the same value twice, as in PostgreSQL, and a key that
    /// collides with an explicitly inserted one is passed at the next try instead of forever.
    fn resume(&self, id: i64, sequence: &mut Sequence) {
        let Some(Given {
            value,
            before: Some(before),
        }) = self.given.get(&id).copied()
        else {
            return;
        };
        if (sequence.last_value, sequence.is_called) == before && before != (value, true) {
            sequence.last_value = value;
            sequence.is_called = true;
        }
    }

    /// Forgets every value (`DISCARD SEQUENCES`).
    fn discard(&mut self) {
        self.given.clear();
        self.last_used = None;
    }
}

/// The result type of a sequence function.
pub(super) fn result_type(name: &str) -> Option<PgType> {
    matches!(name, "pg_nextval" | "pg_currval" | "pg_setval" | "pg_lastval").then_some(PgType::INT8)
}

/// Registers the functions.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    // Not deterministic (each call may give another value), not innocuous (they write): SQLite calls them
    // once per row and keeps them out of anything the schema would run on its own (CHECK, indexes).
    let flags = FunctionFlags::SQLITE_UTF8;
    let s = state.clone();
    conn.create_scalar_function("pg_nextval", 1, flags, move |ctx| {
        on_connection(ctx, |conn| nextval(conn, &s, ctx))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_currval", 1, flags, move |ctx| {
        on_connection(ctx, |conn| {
            let (id, sequence) = find(conn, ctx.get_raw(0))?;
            s.sequences.lock().last_value(id).ok_or_else(|| {
                PgError::new(
                    OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!(
                        "currval of sequence \"{}\" is not yet defined in this session",
                        sequence.name
                    ),
                )
                .into()
            })
        })
    })?;
    for arity in [2, 3] {
        let s = state.clone();
        conn.create_scalar_function("pg_setval", arity, flags, move |ctx| {
            let value: Option<i64> = ctx.get(1)?;
            let is_called: Option<bool> = if arity == 3 { ctx.get(2)? } else { Some(true) };
            let (Some(value), Some(is_called)) = (value, is_called) else {
                return Ok(None);
            };
            on_connection(ctx, |conn| setval(conn, &s, ctx.get_raw(0), value, is_called).map(Some))
        })?;
    }
    conn.create_scalar_function("pg_alter_sequence", 2, flags, move |ctx| {
        let options: String = ctx.get(1)?;
        on_connection(ctx, |conn| alter(conn, ctx.get_raw(0), &options))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_discard_sequences", 0, flags, move |_| {
        s.sequences.lock().discard();
        Ok(None::<i64>)
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_lastval", 0, flags, move |ctx| {
        on_connection(ctx, |conn| {
            let not_yet = || {
                PgError::new(
                    OBJECT_NOT_IN_PREREQUISITE_STATE,
                    "lastval is not yet defined in this session",
                )
            };
            let id = s.sequences.lock().last_used.ok_or_else(not_yet)?;
            let exists: Option<i64> = conn
                .query_row("SELECT 1 FROM _cambium_sequences WHERE id = ?1", [id], |row| row.get(0))
                .optional()
                .map_err(sqlite)?;
            exists.ok_or_else(not_yet)?;
            Ok(s.sequences.lock().last_value(id).ok_or_else(not_yet)?)
        })
    })?;
    Ok(())
}

/// A failure of SQLite under a sequence function, carried as a PostgreSQL error so the statement reports it.
#[derive(Debug)]
enum Failure {
    Pg(PgError),
    Sqlite(rusqlite::Error),
}

impl From<PgError> for Failure {
    fn from(error: PgError) -> Failure {
        Failure::Pg(error)
    }
}

fn sqlite(error: rusqlite::Error) -> Failure {
    Failure::Sqlite(error)
}

/// Runs `f` on the connection the calling statement runs on. SQLite's own errors (busy, read-only, I/O) are
/// returned as they are, so the statement fails with their codes as any write would.
fn on_connection<T>(ctx: &Context<'_>, f: impl FnOnce(&Connection) -> Result<T, Failure>) -> rusqlite::Result<T> {
    // SAFETY: the handle is the connection this function was called on, valid for the whole call (SQLite
    // runs a function only inside a statement of a live connection), and the `ConnectionRef` does not
    // outlive the call nor leave this thread. Through it we only prepare, run and finalize our own statements
    // on `_cambium_sequences`, which SQLite allows inside a function; we never close the connection, change
    // its settings, or touch the statement that called us.
    #[allow(unsafe_code)]
    let conn = unsafe { ctx.get_connection() }?;
    match f(&conn) {
        Ok(value) => Ok(value),
        Err(Failure::Pg(error)) => Err(raise(error)),
        Err(Failure::Sqlite(error)) => Err(error),
    }
}

/// The sequence a function argument names: text (`'s'`, `'public.s'`, `'"S"'`) or its OID.
fn find(conn: &Connection, arg: ValueRef<'_>) -> Result<(i64, Sequence), Failure> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_cambium_sequences'",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(sqlite)?;
    let select = format!("SELECT id, {} FROM _cambium_sequences", Sequence::COLUMNS);
    let read = |row: &rusqlite::Row<'_>| Ok((row.get::<_, i64>(0)?, Sequence::from_row(row, 1)?));
    let (found, shown) = match arg {
        ValueRef::Integer(oid) => {
            let found = match exists {
                Some(_) => conn
                    .query_row(
                        &format!(
                            "{select} WHERE name = (SELECT name FROM sqlite_schema WHERE type = 'view' \
                             AND {} + 64 * rowid = ?1)",
                            crate::pg_catalog::RELATION_OID_BASE
                        ),
                        [oid],
                        read,
                    )
                    .optional()
                    .map_err(sqlite)?,
                None => None,
            };
            (found, oid.to_string())
        }
        ValueRef::Text(bytes) => {
            let text = String::from_utf8_lossy(bytes).into_owned();
            let name = sequence_name(&text)?;
            let found = match exists {
                Some(_) => conn
                    .query_row(&format!("{select} WHERE name = ?1 COLLATE NOCASE"), [&name], read)
                    .optional()
                    .map_err(sqlite)?,
                None => None,
            };
            (found, name)
        }
        _ => return Err(PgError::new(UNDEFINED_TABLE, "relation does not exist").into()),
    };
    found.ok_or_else(|| {
        Failure::Pg(PgError::new(
            UNDEFINED_TABLE,
            format!("relation \"{shown}\" does not exist"),
        ))
    })
}

/// The SQLite name of the sequence a text names, PostgreSQL's way (`public.s`, `"S"`, `S` is `s`, `app.s` is
/// the sequence `s` of schema `app`, see `crate::schemas`).
fn sequence_name(text: &str) -> Result<String, PgError> {
    let mut parts = super::catalog::helpers::split_qualified(text.trim());
    let name = parts.pop().unwrap_or_default();
    match parts.as_slice() {
        [] => Ok(name),
        [.., schema] => Ok(crate::schemas::sqlite_name(schema, &name)),
    }
}

/// A sequence as the running statement last left it, kept by SQLite with the call's constant argument for
/// that statement's run (auxiliary data), so a statement that takes many values reads the row once.
struct StatementCache(parking_lot::Mutex<Option<(i64, Sequence)>>);

fn nextval(conn: &Connection, state: &SessionState, ctx: &Context<'_>) -> Result<i64, Failure> {
    let cache = ctx.get_aux::<StatementCache>(0).map_err(sqlite)?;
    let cached = cache.as_ref().and_then(|c| c.0.lock().clone());
    let (mut id, mut sequence) = match cached {
        Some(known) => known,
        None => find(conn, ctx.get_raw(0))?,
    };
    let mut before = (sequence.last_value, sequence.is_called);
    state.sequences.lock().resume(id, &mut sequence);
    let mut value = sequence.next_value()?;
    // Written only over the state it was stepped from: a row another call of the statement moved (a setval)
    // is read again.
    let written = conn
        .execute(
            "UPDATE _cambium_sequences SET last_value = ?1, is_called = 1 \
             WHERE id = ?2 AND last_value = ?3 AND is_called = ?4",
            [value, id, sequence.last_value, i64::from(sequence.is_called)],
        )
        .map_err(sqlite)?;
    if written == 0 {
        let (fresh_id, fresh) = find(conn, ctx.get_raw(0))?;
        (id, sequence) = (fresh_id, fresh);
        before = (sequence.last_value, sequence.is_called);
        value = sequence.next_value()?;
        conn.execute(
            "UPDATE _cambium_sequences SET last_value = ?1, is_called = 1 WHERE id = ?2",
            [value, id],
        )
        .map_err(sqlite)?;
    }
    let stepped = Sequence {
        last_value: value,
        is_called: true,
        ..sequence
    };
    match cache {
        Some(cache) => *cache.0.lock() = Some((id, stepped)),
        None => {
            // SQLite keeps it only when the argument is a constant; otherwise the next call reads the row.
            ctx.set_aux(0, StatementCache(parking_lot::Mutex::new(Some((id, stepped)))))
                .map_err(sqlite)?;
        }
    }
    remember_nextval(state, id, value, before);
    Ok(value)
}

/// Records a value `nextval` gave: `currval`, `lastval`, and the state the sequence had before this session
/// first moved it since it last settled (what a rollback returns it to).
fn remember_nextval(state: &SessionState, id: i64, value: i64, before: (i64, bool)) {
    let mut session = state.sequences.lock();
    let moved_already = session.unsettled.contains(&id);
    let before = match session.given.get(&id) {
        Some(given) if moved_already => given.before,
        _ => Some(before),
    };
    session.remember(id, Given { value, before });
    session.last_used = Some(id);
    if !moved_already && session.unsettled.len() < REMEMBERED_SEQUENCES_MAX {
        session.unsettled.push(id);
    }
}

/// Once the session holds no transaction: each sequence whose last `nextval` move in this session was rolled
/// back (its row still holds the state that move started from) is moved again, in a transaction of its own,
/// so the values handed out are not handed out again by anyone — PostgreSQL's `nextval` is never undone by a
/// rollback. A sequence another session moved since, or a `setval`, is left as it is.
pub(crate) fn settle(conn: &Connection, state: &SessionState) -> rusqlite::Result<()> {
    let pending: Vec<(i64, Given)> = {
        let mut session = state.sequences.lock();
        let ids = std::mem::take(&mut session.unsettled);
        ids.into_iter()
            .filter_map(|id| session.given.get(&id).map(|g| (id, *g)))
            .collect()
    };
    for (id, given) in pending {
        let Some((before_value, before_called)) = given.before else {
            continue;
        };
        let now: Option<(i64, bool)> = conn
            .query_row(
                "SELECT last_value, is_called FROM _cambium_sequences WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        if now == Some((before_value, before_called)) {
            conn.execute(
                "UPDATE _cambium_sequences SET last_value = ?1, is_called = 1 \
                 WHERE id = ?2 AND last_value = ?3 AND is_called = ?4",
                [given.value, id, before_value, i64::from(before_called)],
            )?;
        }
    }
    Ok(())
}

/// `ALTER SEQUENCE` options applied to the sequence as it is now (its state may have moved since the
/// statement was translated).
fn alter(conn: &Connection, arg: ValueRef<'_>, options: &str) -> Result<Option<i64>, Failure> {
    let (_, sequence) = find(conn, arg)?;
    let options = crate::sequence::Options::from_json(options)
        .ok_or_else(|| PgError::new(crate::error::INTERNAL_ERROR, "unreadable ALTER SEQUENCE options"))?;
    let altered = sequence.alter(&options)?;
    conn.execute(&altered.update_sql(), []).map_err(sqlite)?;
    Ok(None)
}

fn setval(
    conn: &Connection,
    state: &SessionState,
    arg: ValueRef<'_>,
    value: i64,
    is_called: bool,
) -> Result<i64, Failure> {
    let (id, sequence) = find(conn, arg)?;
    sequence.check_setval(value)?;
    conn.execute(
        "UPDATE _cambium_sequences SET last_value = ?1, is_called = ?2 WHERE id = ?3",
        [value, i64::from(is_called), id],
    )
    .map_err(sqlite)?;
    // PostgreSQL's `currval` follows `setval` only when the value counts as handed out.
    if is_called {
        state.sequences.lock().remember(id, Given { value, before: None });
    } else if let Some(given) = state.sequences.lock().given.get_mut(&id) {
        given.before = None;
    }
    Ok(value)
}
