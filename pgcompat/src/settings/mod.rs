//! A session's run-time parameters (`SET`, `SHOW`, `RESET`, `set_config`, `current_setting`,
//! `pg_settings`) with PostgreSQL's transaction rules: a `SET` made inside a transaction that rolls back is
//! undone; `SET LOCAL` (and `set_config(…, true)`) lasts until the end of the transaction; outside a
//! transaction block every statement is its own transaction, so `SET LOCAL` there has no lasting effect.
//!
//! Which parameters exist, their defaults, units and checks are in [`registry`]; a name with a dot
//! (`myapp.tenant_id`) is a custom parameter, as in PostgreSQL: it exists from its first `SET`, and then
//! stays (with the empty value) even if that `SET` is rolled back.
//!
//! Savepoints do not restore settings: `ROLLBACK TO SAVEPOINT` keeps the parameters a rolled-back part of
//! the transaction set (PostgreSQL restores them). A documented difference.

pub mod command;
mod functions;
pub mod registry;

use std::collections::BTreeMap;

use crate::error::{PgError, UNDEFINED_OBJECT};
use registry::{Guc, GUCS};

pub use command::{is_setting_statement, parse, Command};
pub(crate) use functions::install as install_functions;

/// `transaction_read_only`.
pub const TRANSACTION_READ_ONLY: &str = "transaction_read_only";
/// `default_transaction_read_only`.
pub const DEFAULT_TRANSACTION_READ_ONLY: &str = "default_transaction_read_only";
/// `transaction_isolation`.
pub const TRANSACTION_ISOLATION: &str = "transaction_isolation";
/// `statement_timeout`.
pub const STATEMENT_TIMEOUT: &str = "statement_timeout";
/// `idle_in_transaction_session_timeout`.
pub const IDLE_IN_TRANSACTION_TIMEOUT: &str = "idle_in_transaction_session_timeout";
/// `TimeZone` (by its key: parameters are kept under their lowercase names).
pub const TIME_ZONE: &str = "timezone";
/// The parameter naming the schemas unqualified names are looked up in (and made in).
pub const SEARCH_PATH: &str = "search_path";

/// Most custom (`prefix.name`) parameters one session may create.
pub const CUSTOM_SETTINGS_MAX: usize = 1024;
/// Longest value a parameter may be given, in bytes.
pub const VALUE_BYTES_MAX: usize = 64 * 1024;

/// How long a `SET` lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Until changed again (undone if its transaction rolls back).
    Session,
    /// Until the end of the current transaction.
    Local,
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxEnd {
    /// Committed: session-level `SET`s stay, local ones end.
    Commit,
    /// Rolled back: every `SET` of the transaction is undone.
    Rollback,
}

/// One row of `pg_settings` / `SHOW ALL`.
#[derive(Debug, Clone)]
pub struct SettingRow {
    /// The parameter's name.
    pub name: String,
    /// Its value as stored (integers in their unit).
    pub setting: String,
    /// Its value as `SHOW` prints it.
    pub shown: String,
    /// The parameter's definition (`None` for a custom one).
    pub guc: Option<&'static Guc>,
    /// The value `RESET` returns to.
    pub reset_value: String,
}

/// The parameters of one session. Keys are lowercase names.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Current values.
    values: BTreeMap<String, String>,
    /// What the values will be after the current transaction commits (current minus `SET LOCAL`s).
    session: BTreeMap<String, String>,
    /// The values `RESET` returns to: the defaults, the server's and the client's startup choices.
    reset: BTreeMap<String, String>,
    /// What the open transaction changed, to undo it at its end; `None` outside a transaction. Kept as the
    /// changes only (not a copy of every parameter): a transaction begins and ends with every statement.
    tx: Option<TxChanges>,
    /// Keys whose current value may differ from `session` (`SET LOCAL`, a transaction's own parameters);
    /// made equal again when a transaction ends.
    diverged: std::collections::BTreeSet<String>,
}

/// The changes of the open transaction.
#[derive(Debug, Clone, Default)]
struct TxChanges {
    /// The `session` values of the keys the transaction changed there, as it found them (restored on rollback).
    session_before: BTreeMap<String, String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings::new()
    }
}

impl Settings {
    /// Every parameter at its PostgreSQL default.
    pub fn new() -> Settings {
        let values: BTreeMap<String, String> = GUCS
            .iter()
            .map(|guc| (guc.name.to_ascii_lowercase(), guc.default.to_owned()))
            .collect();
        Settings {
            session: values.clone(),
            reset: values.clone(),
            values,
            tx: None,
            diverged: std::collections::BTreeSet::new(),
        }
    }

    /// Makes `value` the session's starting and `RESET` value of `name` (the server's defaults and the
    /// client's startup parameters), checked like `SET`.
    pub fn set_initial(&mut self, name: &str, value: &str) -> Result<(), PgError> {
        let (key, normalized) = self.checked(name, Some(value))?;
        self.reset.insert(key.clone(), normalized.clone());
        self.session.insert(key.clone(), normalized.clone());
        self.values.insert(key, normalized);
        Ok(())
    }

    /// The stored value of `name` (integers in their unit), if it exists.
    pub fn raw(&self, name: &str) -> Option<&str> {
        // Most callers name a parameter by its key already (the constants here): no lowercase copy for them.
        if !name.bytes().any(|byte| byte.is_ascii_uppercase()) {
            return self.values.get(name).map(String::as_str);
        }
        self.values.get(&name.to_ascii_lowercase()).map(String::as_str)
    }

    /// A Boolean parameter's value (false if unknown).
    pub fn is_on(&self, name: &str) -> bool {
        self.raw(name) == Some("on")
    }

    /// A time parameter in milliseconds (0 if unknown or off).
    pub fn ms(&self, name: &str) -> u64 {
        self.raw(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    }

    /// `SHOW name`: the parameter's display name and value, or 42704.
    pub fn show(&self, name: &str) -> Result<(String, String), PgError> {
        let key = name.to_ascii_lowercase();
        let value = self.values.get(&key).ok_or_else(|| unrecognized(name))?;
        Ok(match registry::find(&key) {
            Some(guc) => (guc.name.to_owned(), guc.show(value)),
            None => (key, value.clone()),
        })
    }

    /// `current_setting(name [, missing_ok])`: the value `SHOW` prints; `None` for a missing parameter when
    /// `missing_ok`.
    pub fn current(&self, name: &str, missing_ok: bool) -> Result<Option<String>, PgError> {
        match self.show(name) {
            Ok((_, value)) => Ok(Some(value)),
            Err(_) if missing_ok => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// `SET name = value` (`None`: `DEFAULT`) for `scope`.
    pub fn set(&mut self, name: &str, value: Option<&str>, scope: Scope) -> Result<(), PgError> {
        let (key, normalized) = self.checked(name, value)?;
        if !self.session.contains_key(&key) {
            // A custom parameter appears with the empty value, and stays even if this transaction rolls
            // back (as PostgreSQL's placeholder does).
            self.session.insert(key.clone(), String::new());
            self.reset.insert(key.clone(), String::new());
        }
        if scope == Scope::Session {
            self.set_session(&key, normalized.clone());
        }
        if scope == Scope::Local {
            self.diverged.insert(key.clone());
        }
        self.values.insert(key, normalized);
        Ok(())
    }

    /// `session`'s value of `key` set, its value before noted for a rollback of the open transaction.
    fn set_session(&mut self, key: &str, value: String) {
        let before = self.session.insert(key.to_owned(), value).unwrap_or_default();
        if let Some(tx) = &mut self.tx {
            tx.session_before.entry(key.to_owned()).or_insert(before);
        }
    }

    /// `RESET name`, or `RESET ALL` (`None`).
    pub fn reset(&mut self, name: Option<&str>) -> Result<(), PgError> {
        match name {
            Some(name) => self.set(name, None, Scope::Session),
            None => {
                let settable: Vec<String> = self
                    .reset
                    .keys()
                    .filter(|key| registry::find(key).is_none_or(|guc| guc.normalize(guc.default).is_ok()))
                    .cloned()
                    .collect();
                for key in settable {
                    let value = self.reset[&key].clone();
                    self.set_session(&key, value.clone());
                    self.values.insert(key, value);
                }
                Ok(())
            }
        }
    }

    /// Starts a transaction (explicit, or the implicit one of a statement outside a block); does nothing if
    /// one is open. The transaction's own parameters start from their defaults.
    pub fn begin(&mut self) {
        if self.tx.is_some() {
            return;
        }
        for (own, default) in [
            (TRANSACTION_READ_ONLY, DEFAULT_TRANSACTION_READ_ONLY),
            (TRANSACTION_ISOLATION, "default_transaction_isolation"),
            ("transaction_deferrable", "default_transaction_deferrable"),
        ] {
            // Outside a transaction every value is the session's, so one equal to its default needs no
            // change now and no restoring at the end (the usual case: no allocation per statement).
            if self.values.get(own) == self.values.get(default) {
                continue;
            }
            if let Some(value) = self.values.get(default).cloned() {
                self.values.insert(own.to_owned(), value);
                self.diverged.insert(own.to_owned());
            }
        }
        self.tx = Some(TxChanges::default());
    }

    /// Whether a transaction is open.
    pub fn in_transaction(&self) -> bool {
        self.tx.is_some()
    }

    /// Ends the open transaction (nothing if none is open).
    pub fn end(&mut self, end: TxEnd) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        let mut diverged = std::mem::take(&mut self.diverged);
        if end == TxEnd::Rollback {
            diverged.extend(tx.session_before.keys().cloned());
            self.session.extend(tx.session_before);
        }
        // Every other key's value is the session's already.
        for key in diverged {
            match self.session.get(&key) {
                Some(value) => self.values.insert(key, value.clone()),
                None => self.values.remove(&key),
            };
        }
    }

    /// Every parameter, by name, for `pg_settings` and `SHOW ALL`.
    pub fn rows(&self) -> Vec<SettingRow> {
        let mut rows: Vec<SettingRow> = self
            .values
            .iter()
            .map(|(key, value)| {
                let guc = registry::find(key);
                SettingRow {
                    name: guc.map_or_else(|| key.clone(), |g| g.name.to_owned()),
                    setting: value.clone(),
                    shown: guc.map_or_else(|| value.clone(), |g| g.show(value)),
                    guc,
                    reset_value: self.reset.get(key).cloned().unwrap_or_default(),
                }
            })
            .collect();
        rows.sort_by_key(|row| row.name.to_ascii_lowercase());
        rows
    }

    /// The lowercase key and the normalized value `SET name = value` stores, or its error.
    fn checked(&self, name: &str, value: Option<&str>) -> Result<(String, String), PgError> {
        let key = name.to_ascii_lowercase();
        if let Some(value) = value {
            if value.len() > VALUE_BYTES_MAX {
                return Err(PgError::new(
                    crate::error::INVALID_PARAMETER_VALUE,
                    format!("value for parameter \"{name}\" is longer than {VALUE_BYTES_MAX} bytes"),
                ));
            }
        }
        match registry::find(&key) {
            Some(guc) => {
                let normalized = match value {
                    Some(value) => guc.normalize(value)?,
                    None => self.reset.get(&key).cloned().unwrap_or_else(|| guc.default.to_owned()),
                };
                Ok((key, normalized))
            }
            None if is_custom_name(&key) => {
                if !self.values.contains_key(&key)
                    && self.values.keys().filter(|k| registry::find(k).is_none()).count() >= CUSTOM_SETTINGS_MAX
                {
                    return Err(PgError::new(
                        crate::error::PROGRAM_LIMIT_EXCEEDED,
                        format!("too many custom parameters (at most {CUSTOM_SETTINGS_MAX} per session)"),
                    ));
                }
                let normalized = match value {
                    Some(value) => value.to_owned(),
                    None => self.reset.get(&key).cloned().unwrap_or_default(),
                };
                Ok((key, normalized))
            }
            None => Err(unrecognized(name)),
        }
    }
}

/// The zone a `TimeZone` value names: `UTC` (and its aliases), an IANA name, or a POSIX-style offset
/// (`'+05:30'`), which PostgreSQL reads as hours *west* of Greenwich (`'+05:30'` shows times as `-05:30`).
pub fn zone_of(name: &str) -> Option<jiff::tz::TimeZone> {
    let trimmed = name.trim();
    if ["utc", "gmt", "z", "zulu", "etc/utc", "uct", "universal"].contains(&trimmed.to_ascii_lowercase().as_str()) {
        return Some(jiff::tz::TimeZone::UTC);
    }
    if let Some(sign) = trimmed.chars().next().filter(|c| *c == '+' || *c == '-') {
        let mut parts = trimmed[1..].split(':');
        let mut field = |max: i32| -> Option<i32> {
            match parts.next() {
                None => Some(0),
                Some(part) if !part.is_empty() && part.len() <= 2 && part.bytes().all(|b| b.is_ascii_digit()) => {
                    part.parse().ok().filter(|v| *v <= max)
                }
                Some(_) => None,
            }
        };
        let (hours, minutes, seconds) = (field(15)?, field(59)?, field(59)?);
        if parts.next().is_some() {
            return None;
        }
        let west_seconds = hours * 3600 + minutes * 60 + seconds;
        let east_seconds = if sign == '+' { -west_seconds } else { west_seconds };
        return jiff::tz::Offset::from_seconds(east_seconds)
            .ok()
            .map(jiff::tz::TimeZone::fixed);
    }
    if trimmed.is_empty() || trimmed.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    jiff::tz::TimeZone::get(trimmed).ok()
}

/// Whether `name` is a custom parameter's (`prefix.name`, both parts identifiers).
fn is_custom_name(name: &str) -> bool {
    let mut parts = name.split('.');
    let valid = |part: &str| {
        !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$') && part.len() <= 63
    };
    let first = parts.next().is_some_and(valid);
    let second = parts.next().is_some_and(valid);
    first && second && parts.all(valid)
}

fn unrecognized(name: &str) -> PgError {
    PgError::new(
        UNDEFINED_OBJECT,
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The semantics the change tracking must keep, as plainly as they can be written: a copy of the
    /// session's values when a transaction begins, put back on rollback; the current values become the
    /// session's at the end.
    #[derive(Debug)]
    struct Model {
        values: BTreeMap<String, String>,
        session: BTreeMap<String, String>,
        reset: BTreeMap<String, String>,
        at_begin: Option<BTreeMap<String, String>>,
    }

    impl Model {
        fn new() -> Model {
            let s = Settings::new();
            Model {
                values: s.values.clone(),
                session: s.session.clone(),
                reset: s.reset.clone(),
                at_begin: None,
            }
        }

        fn set(&mut self, key: &str, value: &str, scope: Scope) {
            if !self.session.contains_key(key) {
                self.session.insert(key.to_owned(), String::new());
                self.reset.insert(key.to_owned(), String::new());
                if let Some(at_begin) = &mut self.at_begin {
                    at_begin.insert(key.to_owned(), String::new());
                }
            }
            if scope == Scope::Session {
                self.session.insert(key.to_owned(), value.to_owned());
            }
            self.values.insert(key.to_owned(), value.to_owned());
        }

        fn begin(&mut self) {
            if self.at_begin.is_none() {
                self.at_begin = Some(self.session.clone());
                for (own, default) in [
                    (TRANSACTION_READ_ONLY, DEFAULT_TRANSACTION_READ_ONLY),
                    (TRANSACTION_ISOLATION, "default_transaction_isolation"),
                    ("transaction_deferrable", "default_transaction_deferrable"),
                ] {
                    if let Some(value) = self.values.get(default).cloned() {
                        self.values.insert(own.to_owned(), value);
                    }
                }
            }
        }

        fn end(&mut self, end: TxEnd) {
            if let Some(at_begin) = self.at_begin.take() {
                if end == TxEnd::Rollback {
                    self.session = at_begin;
                }
                self.values = self.session.clone();
            }
        }
    }

    proptest::proptest! {
        /// Random transactions of SET, SET LOCAL, RESET and RESET ALL, committed or rolled back, leave the
        /// same values as the model after every step.
        #[test]
        fn change_tracking_matches_the_copying_model(ops in proptest::collection::vec((0u8..6, 0usize..4, 0usize..3), 1..60)) {
            const KEYS: [&str; 4] = ["application_name", "myapp.tenant", DEFAULT_TRANSACTION_READ_ONLY, "search_path"];
            const VALUES: [[&str; 3]; 4] = [["a", "b", "c"], ["1", "2", "3"], ["on", "off", "on"], ["public", "app", "x, y"]];
            let mut settings = Settings::new();
            let mut model = Model::new();
            for (op, key, value) in ops {
                match op {
                    0 => { settings.begin(); model.begin(); }
                    1 => { settings.end(TxEnd::Commit); model.end(TxEnd::Commit); }
                    2 => { settings.end(TxEnd::Rollback); model.end(TxEnd::Rollback); }
                    3 | 4 => {
                        let scope = if op == 3 { Scope::Session } else { Scope::Local };
                        let stored = settings.set(KEYS[key], Some(VALUES[key][value]), scope).map(|()| settings.values[KEYS[key]].clone());
                        proptest::prop_assert!(stored.is_ok(), "{:?}", stored);
                        model.set(KEYS[key], &stored.unwrap_or_default(), scope);
                    }
                    _ if key == 0 => {
                        settings.reset(None).map_err(|e| proptest::test_runner::TestCaseError::fail(e.message))?;
                        let keys: Vec<String> = model.reset.keys().filter(|k| registry::find(k).is_none_or(|g| g.normalize(g.default).is_ok())).cloned().collect();
                        for k in keys {
                            let v = model.reset[&k].clone();
                            model.session.insert(k.clone(), v.clone());
                            model.values.insert(k, v);
                        }
                    }
                    _ => {
                        settings.reset(Some(KEYS[key])).map_err(|e| proptest::test_runner::TestCaseError::fail(e.message))?;
                        let default = settings.values[KEYS[key]].clone();
                        model.set(KEYS[key], &default, Scope::Session);
                    }
                }
                proptest::prop_assert_eq!(&settings.values, &model.values);
                proptest::prop_assert_eq!(&settings.session, &model.session);
                proptest::prop_assert_eq!(settings.in_transaction(), model.at_begin.is_some());
            }
        }
    }

    #[test]
    fn a_rolled_back_set_is_undone_and_set_local_ends_with_its_transaction() -> Result<(), PgError> {
        let mut s = Settings::new();
        s.begin();
        s.set("application_name", Some("kept"), Scope::Session)?;
        s.end(TxEnd::Commit);
        assert_eq!(s.current("application_name", false)?.as_deref(), Some("kept"));

        s.begin();
        s.set("application_name", Some("rolled-back"), Scope::Session)?;
        s.end(TxEnd::Rollback);
        assert_eq!(s.current("application_name", false)?.as_deref(), Some("kept"));

        s.begin();
        s.set("statement_timeout", Some("2s"), Scope::Session)?;
        s.set("statement_timeout", Some("10"), Scope::Local)?;
        assert_eq!(s.ms(STATEMENT_TIMEOUT), 10);
        s.end(TxEnd::Commit);
        assert_eq!(s.ms(STATEMENT_TIMEOUT), 2000, "SET LOCAL ends, the plain SET stays");
        assert_eq!(
            s.show("statement_timeout")?,
            ("statement_timeout".to_owned(), "2s".to_owned())
        );
        Ok(())
    }

    #[test]
    fn custom_parameters_exist_from_their_first_set() -> Result<(), PgError> {
        let mut s = Settings::new();
        assert_eq!(s.show("myapp.user_id").map_err(|e| e.code), Err(UNDEFINED_OBJECT));
        assert_eq!(s.current("myapp.user_id", true)?, None);
        s.begin();
        s.set("MyApp.User_Id", Some("7"), Scope::Local)?;
        assert_eq!(s.current("myapp.user_id", false)?.as_deref(), Some("7"));
        s.end(TxEnd::Rollback);
        assert_eq!(
            s.current("myapp.user_id", false)?.as_deref(),
            Some(""),
            "the placeholder stays"
        );
        assert_eq!(
            s.set("nodots", Some("1"), Scope::Session).map_err(|e| e.code),
            Err(UNDEFINED_OBJECT)
        );
        Ok(())
    }

    #[test]
    fn transaction_parameters_start_from_their_defaults() -> Result<(), PgError> {
        let mut s = Settings::new();
        s.set(DEFAULT_TRANSACTION_READ_ONLY, Some("on"), Scope::Session)?;
        s.begin();
        assert!(s.is_on(TRANSACTION_READ_ONLY));
        s.set(TRANSACTION_READ_ONLY, Some("off"), Scope::Local)?;
        s.end(TxEnd::Commit);
        s.begin();
        assert!(s.is_on(TRANSACTION_READ_ONLY));
        s.end(TxEnd::Commit);
        Ok(())
    }

    #[test]
    fn posix_offsets_count_west_of_greenwich() {
        let offset = |name| {
            zone_of(name)
                .and_then(|tz| tz.to_fixed_offset().ok())
                .map(|o| o.seconds())
        };
        assert_eq!(offset("+05:30"), Some(-(5 * 3600 + 30 * 60)));
        assert_eq!(offset("-2"), Some(2 * 3600));
        assert_eq!(offset("UTC"), Some(0));
        assert!(zone_of("+99").is_none());
        assert!(zone_of("+1:2:3:4").is_none());
        assert!(zone_of("Mars/Olympus").is_none());
        assert!(zone_of("Europe/Paris").is_some());
    }

    #[test]
    fn reset_returns_to_the_initial_values() -> Result<(), PgError> {
        let mut s = Settings::new();
        s.set_initial("statement_timeout", "30s")?;
        s.set_initial("application_name", "psql")?;
        s.set("statement_timeout", Some("1s"), Scope::Session)?;
        s.set("application_name", Some("x"), Scope::Session)?;
        s.reset(Some("statement_timeout"))?;
        assert_eq!(s.ms(STATEMENT_TIMEOUT), 30_000);
        s.reset(None)?;
        assert_eq!(s.current("application_name", false)?.as_deref(), Some("psql"));
        s.set("statement_timeout", None, Scope::Session)?;
        assert_eq!(s.ms(STATEMENT_TIMEOUT), 30_000);
        Ok(())
    }
}
