//! The functions that read the session's `search_path` against the database's schemas: `current_schema()`,
//! `current_schemas(bool)`, and the helpers the catalog views resolve names and visibility with.

use std::sync::Arc;

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use super::{flags_pure, flags_session, SessionState};

/// Installs the functions on a session's connection.
pub(super) fn install(conn: &Connection, state: Arc<SessionState>) -> rusqlite::Result<()> {
    let s = state.clone();
    conn.create_scalar_function("pg_current_schema", 0, flags_session(), move |_| {
        Ok(s.effective_search_path().into_iter().next())
    })?;
    let s = state.clone();
    conn.create_scalar_function("current_schemas", 1, flags_session(), move |ctx| {
        let implicit = ctx.get::<Option<bool>>(0)?;
        let Some(implicit) = implicit else {
            return Ok(None);
        };
        let mut names = Vec::new();
        if implicit {
            names.push("pg_catalog".to_owned());
        }
        names.extend(s.effective_search_path());
        Ok(Some(text_array(&names)))
    })?;
    // The position of a schema on the effective path (`pg_catalog` first, as PostgreSQL searches it), NULL
    // when it is not on it.
    conn.create_scalar_function("_pgc_path_pos", 1, flags_session(), move |ctx| {
        let ValueRef::Text(name) = ctx.get_raw(0) else {
            return Ok(None);
        };
        let name = String::from_utf8_lossy(name);
        if name == "pg_catalog" {
            return Ok(Some(0_i64));
        }
        let path = state.effective_search_path();
        Ok(path
            .iter()
            .position(|p| *p == name)
            .and_then(|i| i64::try_from(i + 1).ok()))
    })?;
    // The schema a relation name written as text gives (`app.t` → `app`), NULL when unqualified.
    conn.create_scalar_function("_pgc_relnsp", 1, flags_pure(), |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Text(t) => {
                let mut parts = super::catalog::split_qualified(String::from_utf8_lossy(t).trim());
                parts.pop();
                parts.pop()
            }
            _ => None,
        })
    })?;
    Ok(())
}

/// A text array's PostgreSQL text form: elements quoted where they must be.
fn text_array(names: &[String]) -> String {
    let items: Vec<String> = names
        .iter()
        .map(|n| {
            let plain = !n.is_empty()
                && !n.eq_ignore_ascii_case("null")
                && !n
                    .chars()
                    .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
            if plain {
                n.clone()
            } else {
                format!("\"{}\"", n.replace('\\', "\\\\").replace('"', "\\\""))
            }
        })
        .collect();
    format!("{{{}}}", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_of_names_quote_as_postgresql_does() {
        assert_eq!(text_array(&["pg_catalog".into(), "app".into()]), "{pg_catalog,app}");
        assert_eq!(text_array(&["Mixed Case".into()]), "{\"Mixed Case\"}");
        assert_eq!(text_array(&[]), "{}");
    }
}
