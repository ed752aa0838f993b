//! The SQL functions over a session's parameters: `current_setting(name [, missing_ok])`,
//! `set_config(name, value, is_local)`, and `pg_settings_json()`, the rows the `pg_settings` view reads
//! (current values, so the view is exact for the session that reads it).

use std::sync::Arc;

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::Connection;

use super::{Scope, SettingRow};
use crate::error::{PgError, NULL_VALUE_NOT_ALLOWED};
use crate::functions::{raise, SessionState};

/// Registers the functions on `conn`. They are not deterministic: they read and change session state.
pub(crate) fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8;
    for arity in [1, 2] {
        let s = state.clone();
        conn.create_scalar_function("current_setting", arity, flags, move |ctx| {
            let Some(name) = text_arg(ctx, 0)? else {
                return Ok(None);
            };
            let missing_ok = arity == 2 && ctx.get::<Option<bool>>(1)?.unwrap_or(false);
            s.read_settings(|settings| settings.current(&name, missing_ok))
                .map_err(raise)
        })?;
    }
    let s = state.clone();
    conn.create_scalar_function("set_config", 3, flags, move |ctx| {
        let name = text_arg(ctx, 0)?.ok_or_else(|| null_argument("parameter name"))?;
        let value = text_arg(ctx, 1)?.unwrap_or_default();
        let scope = match ctx.get::<Option<bool>>(2)? {
            Some(true) => Scope::Local,
            _ => Scope::Session,
        };
        s.update_settings(|settings| {
            settings.set(&name, Some(&value), scope)?;
            settings.current(&name, false)
        })
        .map_err(raise)
    })?;
    conn.create_scalar_function("pg_settings_json", 0, flags, move |_| {
        Ok(state.read_settings(|settings| rows_json(&settings.rows())))
    })?;
    Ok(())
}

fn text_arg(ctx: &Context<'_>, index: usize) -> rusqlite::Result<Option<String>> {
    ctx.get::<Option<String>>(index)
}

fn null_argument(what: &str) -> rusqlite::Error {
    raise(PgError::new(
        NULL_VALUE_NOT_ALLOWED,
        format!("NULL value for {what} not allowed"),
    ))
}

/// The rows of `pg_settings` as a JSON array of objects (read with `json_each` by the view).
fn rows_json(rows: &[SettingRow]) -> String {
    let array: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let guc = row.guc;
            let bound = |pick: fn((f64, f64)) -> f64| {
                guc.and_then(|g| g.range)
                    .map(|range| crate::value::format_float8(pick(range)))
            };
            serde_json::json!({
                "name": row.name,
                "setting": row.setting,
                "unit": guc.and_then(|g| g.unit).map(|u| u.name()),
                "category": guc.map_or("Customized Options", |g| g.category),
                "short_desc": guc.map_or("", |g| g.short_desc),
                "context": guc.map_or("user", |g| g.context.name()),
                "vartype": guc.map_or("string", |g| g.vartype.name()),
                "source": if Some(row.setting.as_str()) == guc.map(|g| g.default) { "default" } else { "session" },
                "min_val": bound(|(min, _)| min),
                "max_val": bound(|(_, max)| max),
                "boot_val": guc.map_or("", |g| g.default),
                "reset_val": row.reset_value,
            })
        })
        .collect();
    serde_json::Value::Array(array).to_string()
}
