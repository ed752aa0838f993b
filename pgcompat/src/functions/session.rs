//! The session's functions: `now()` and its relatives, `version()`, `current_database()`, `current_user`,
//! `pg_backend_pid()`, `gen_random_uuid()`.

use std::sync::Arc;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use rusqlite::Connection;

use super::{flags_pure, flags_session, raise, SessionState, VERSION};
use crate::error::PgError;
use crate::value::datetime;
use rusqlite::functions::FunctionFlags;

pub(super) fn install_session(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    install_upsert_marks(conn, &state)?;
    let s = state.clone();
    conn.create_scalar_function("pg_inet_server_port", 0, flags_session(), move |_| {
        Ok(s.addresses.read().map(|(server, _)| i64::from(server.port())))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_inet_client_port", 0, flags_session(), move |_| {
        Ok(s.addresses.read().map(|(_, client)| i64::from(client.port())))
    })?;
    for name in ["pg_now", "pg_current_timestamp"] {
        let s = state.clone();
        conn.create_scalar_function(name, 0, flags_session(), move |_| {
            Ok(datetime::format_timestamptz(s.now(), &TimeZone::UTC))
        })?;
    }
    conn.create_scalar_function("pg_clock_timestamp", 0, flags_session(), |_| {
        Ok(datetime::format_timestamptz(Timestamp::now(), &TimeZone::UTC))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_date", 0, flags_session(), move |_| {
        Ok(datetime::format_date(s.time_zone().to_datetime(s.now()).date()))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_localtimestamp", 0, flags_session(), move |_| {
        Ok(datetime::format_timestamp(s.time_zone().to_datetime(s.now())))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_time", 0, flags_session(), move |_| {
        Ok(datetime::format_time(s.time_zone().to_datetime(s.now()).time()))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_timetz", 0, flags_session(), move |_| {
        let now = s.now();
        let tz = s.time_zone();
        let offset = tz.to_offset(now).seconds();
        Ok(datetime::format_timetz(tz.to_datetime(now).time(), offset))
    })?;
    conn.create_scalar_function("pg_version", 0, flags_pure(), |_| Ok(VERSION))?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_database", 0, flags_session(), move |_| {
        Ok(s.database.clone())
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_current_user", 0, flags_session(), move |_| Ok(s.user.clone()))?;
    conn.create_scalar_function("pg_backend_pid", 0, flags_session(), move |_| Ok(state.backend_pid))?;
    for name in ["gen_random_uuid", "uuid_generate_v4"] {
        // Innocuous (no side effect), so a column default may call it: `DEFAULT gen_random_uuid()`.
        conn.create_scalar_function(
            name,
            0,
            FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS,
            |_| random_uuid().map_err(raise),
        )?;
    }
    Ok(())
}

fn random_uuid() -> Result<String, PgError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| PgError::new(crate::error::INTERNAL_ERROR, "could not generate random values"))?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// `pg_upsert_mark(rowid, value)` (in an upsert's `DO UPDATE SET`: the row `rowid` was updated; gives `value`
/// back) and `pg_upsert_xmax(rowid)` (in its RETURNING: PostgreSQL's `xmax` there, 0 for an inserted row, a
/// nonzero transaction id, 1, for an updated one).
fn install_upsert_marks(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_upsert_mark", 2, flags_session(), move |ctx| {
        let rowid: i64 = ctx.get(0)?;
        let mut marks = s.upsert_updated.lock();
        if marks.len() >= super::UPSERT_MARKS_MAX && !marks.contains(&rowid) {
            return Err(raise(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "an INSERT … ON CONFLICT DO UPDATE whose RETURNING reads xmax may update at most {} rows",
                    super::UPSERT_MARKS_MAX
                ),
            )));
        }
        marks.insert(rowid);
        Ok(super::owned(ctx.get_raw(1)))
    })?;
    let s = state.clone();
    conn.create_scalar_function("pg_upsert_xmax", 1, flags_session(), move |ctx| {
        let rowid: i64 = ctx.get(0)?;
        Ok(i64::from(s.upsert_updated.lock().contains(&rowid)))
    })
}
