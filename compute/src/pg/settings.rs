//! Session settings: `SET`, `SHOW` and `RESET` of the run-time parameters a session has, parsed with
//! `sqlparser` (PostgreSQL dialect). The ones with an effect here are `statement_timeout` and
//! `idle_in_transaction_session_timeout` (enforced by the connection, `pg::mod`); the others clients set at
//! connect time (`application_name`, `DateStyle`, `search_path`, …) are kept and shown back. An unknown name
//! is 42704, as in PostgreSQL, unless it is a custom `prefix.name` option, which PostgreSQL accepts too.
//!
//! `SET LOCAL` lasts until the end of the transaction. Unlike PostgreSQL, a plain `SET` inside a transaction
//! that is rolled back is not undone.

use std::collections::BTreeMap;

use sqlparser::ast::{ContextModifier, Expr, Reset, Set, Statement, Value};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::error::{SqlError, FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, SYNTAX_ERROR, UNDEFINED_OBJECT};

/// `statement_timeout`.
pub(crate) const STATEMENT_TIMEOUT: &str = "statement_timeout";
/// `idle_in_transaction_session_timeout`.
pub(crate) const IDLE_IN_TRANSACTION_TIMEOUT: &str = "idle_in_transaction_session_timeout";

/// Longest timeout accepted, in milliseconds (PostgreSQL's limit: `INT_MAX` ms).
const TIMEOUT_MS_MAX: u64 = i32::MAX as u64;

/// A parsed `SET`, `SHOW` or `RESET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `SET [SESSION | LOCAL] name { = | TO } value`; `None` is `DEFAULT`.
    Set {
        name: String,
        value: Option<String>,
        local: bool,
    },
    /// `SHOW name` (`SHOW ALL` is refused for now).
    Show(String),
    /// `RESET name`, or `RESET ALL` (`None`).
    Reset(Option<String>),
}

/// Whether `sql` starts with `SET`, `SHOW` or `RESET`: then it is parsed with [`parse`] instead of going to
/// SQLite, which has none of them.
pub(crate) fn is_setting_statement(first_word: &str) -> bool {
    matches!(first_word, "SET" | "SHOW" | "RESET")
}

/// Parses one `SET`, `SHOW` or `RESET` statement.
pub(crate) fn parse(sql: &str) -> Result<Command, SqlError> {
    let statements = Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .map_err(|error| SqlError::new(SYNTAX_ERROR, error.to_string()))?;
    let [statement] = statements.as_slice() else {
        return Err(SqlError::new(
            FEATURE_NOT_SUPPORTED,
            "SET, SHOW and RESET must be sent as statements of their own",
        ));
    };
    match statement {
        Statement::Set(Set::SingleAssignment {
            scope,
            hivevar: false,
            variable,
            values,
        }) => {
            let name = variable.to_string().to_ascii_lowercase();
            let value = match values.as_slice() {
                [Expr::Identifier(ident)]
                    if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("default") =>
                {
                    None
                }
                values => Some(values.iter().map(value_text).collect::<Result<Vec<_>, _>>()?.join(", ")),
            };
            Ok(Command::Set {
                name,
                value,
                local: *scope == Some(ContextModifier::Local),
            })
        }
        Statement::Set(Set::SetTimeZone { local, value }) => Ok(Command::Set {
            name: "timezone".to_owned(),
            value: Some(value_text(value)?),
            local: *local,
        }),
        Statement::ShowVariable { variable } => {
            let name = variable
                .iter()
                .map(|ident| ident.value.to_ascii_lowercase())
                .collect::<Vec<_>>()
                .join(" ");
            match name.as_str() {
                "all" => Err(SqlError::new(FEATURE_NOT_SUPPORTED, "SHOW ALL is not supported yet")),
                "time zone" => Ok(Command::Show("timezone".to_owned())),
                _ => Ok(Command::Show(name)),
            }
        }
        Statement::Reset(reset) => match &reset.reset {
            Reset::ALL => Ok(Command::Reset(None)),
            Reset::ConfigurationParameter(name) => Ok(Command::Reset(Some(name.to_string().to_ascii_lowercase()))),
            Reset::SessionAuthorization => Err(SqlError::new(
                FEATURE_NOT_SUPPORTED,
                "RESET SESSION AUTHORIZATION is not supported",
            )),
        },
        other => Err(SqlError::new(
            FEATURE_NOT_SUPPORTED,
            format!("{} is not supported", first_words(&other.to_string())),
        )),
    }
}

fn first_words(sql: &str) -> String {
    sql.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// A `SET` value as PostgreSQL reads it: a number, a string or a bare word.
fn value_text(expr: &Expr) -> Result<String, SqlError> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(number, _) => Ok(number.clone()),
            Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => Ok(text.clone()),
            Value::Boolean(flag) => Ok(if *flag { "on" } else { "off" }.to_owned()),
            other => Ok(other.to_string()),
        },
        Expr::Identifier(ident) => Ok(ident.value.clone()),
        Expr::UnaryOp { op, expr } => Ok(format!("{op}{}", value_text(expr)?)),
        other => Err(SqlError::new(
            INVALID_PARAMETER_VALUE,
            format!("invalid value for a parameter: {other}"),
        )),
    }
}

/// A duration setting's value in milliseconds: a bare number is milliseconds; `us`, `ms`, `s`, `min`, `h`
/// and `d` units are accepted as in PostgreSQL; 0 turns the timeout off.
pub(crate) fn parse_timeout_ms(name: &str, value: &str) -> Result<u64, SqlError> {
    let invalid = || {
        SqlError::new(
            INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"{name}\": \"{value}\""),
        )
    };
    let text = value.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| invalid())?;
    let unit_ms = match unit.trim() {
        "" | "ms" => 1.0,
        "us" => 0.001,
        "s" => 1_000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return Err(invalid()),
    };
    let ms = (number * unit_ms).round();
    if !(0.0..=TIMEOUT_MS_MAX as f64).contains(&ms) {
        return Err(SqlError::new(
            INVALID_PARAMETER_VALUE,
            format!("{value} is outside the valid range for parameter \"{name}\" (0 .. {TIMEOUT_MS_MAX})"),
        ));
    }
    Ok(ms as u64)
}

/// The settings of one session, with their defaults.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    values: BTreeMap<String, String>,
    defaults: BTreeMap<String, String>,
    /// Values `SET LOCAL` replaced, restored when the transaction ends.
    local_undo: Vec<(String, String)>,
}

impl Settings {
    /// The settings a new session starts with; the timeouts are the server's defaults, in milliseconds.
    pub(crate) fn new(statement_timeout_ms: u64, idle_in_transaction_timeout_ms: u64) -> Settings {
        let defaults: BTreeMap<String, String> = [
            (STATEMENT_TIMEOUT, format_ms(statement_timeout_ms)),
            (IDLE_IN_TRANSACTION_TIMEOUT, format_ms(idle_in_transaction_timeout_ms)),
            ("lock_timeout", "0".to_owned()),
            ("application_name", String::new()),
            ("client_encoding", "UTF8".to_owned()),
            ("datestyle", "ISO, MDY".to_owned()),
            ("timezone", "UTC".to_owned()),
            ("search_path", "\"$user\", public".to_owned()),
            ("extra_float_digits", "1".to_owned()),
            ("standard_conforming_strings", "on".to_owned()),
            ("intervalstyle", "postgres".to_owned()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
        Settings {
            values: defaults.clone(),
            defaults,
            local_undo: Vec::new(),
        }
    }

    /// The current value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A timeout setting in milliseconds (0: off).
    pub(crate) fn timeout_ms(&self, name: &str) -> u64 {
        self.get(name)
            .and_then(|value| parse_timeout_ms(name, value).ok())
            .unwrap_or(0)
    }

    /// Sets `name` (checked), or back to its default with `None`.
    pub(crate) fn set(&mut self, name: &str, value: Option<String>, local: bool) -> Result<(), SqlError> {
        let value = match value {
            Some(value) => {
                self.check(name, &value)?;
                match name {
                    // Shown as PostgreSQL shows them: in the largest unit that divides them (`5s`, `1234ms`).
                    STATEMENT_TIMEOUT | IDLE_IN_TRANSACTION_TIMEOUT | "lock_timeout" => {
                        format_ms(parse_timeout_ms(name, &value)?)
                    }
                    _ => value,
                }
            }
            None => self.default_of(name)?,
        };
        let previous = self.values.insert(name.to_owned(), value).unwrap_or_default();
        if local {
            self.local_undo.push((name.to_owned(), previous));
        }
        Ok(())
    }

    /// `RESET name` or `RESET ALL`.
    pub(crate) fn reset(&mut self, name: Option<&str>) -> Result<(), SqlError> {
        match name {
            Some(name) => self.set(name, None, false),
            None => {
                self.values = self.defaults.clone();
                Ok(())
            }
        }
    }

    /// Ends the transaction's `SET LOCAL`s.
    pub(crate) fn end_transaction(&mut self) {
        while let Some((name, previous)) = self.local_undo.pop() {
            self.values.insert(name, previous);
        }
    }

    fn default_of(&self, name: &str) -> Result<String, SqlError> {
        match self.defaults.get(name) {
            Some(value) => Ok(value.clone()),
            None if name.contains('.') => Ok(String::new()),
            None => Err(unknown(name)),
        }
    }

    fn check(&self, name: &str, value: &str) -> Result<(), SqlError> {
        match name {
            STATEMENT_TIMEOUT | IDLE_IN_TRANSACTION_TIMEOUT | "lock_timeout" => {
                parse_timeout_ms(name, value).map(|_| ())
            }
            "client_encoding" if !matches!(value.to_ascii_uppercase().as_str(), "UTF8" | "UTF-8" | "UNICODE") => {
                Err(SqlError::new(
                    FEATURE_NOT_SUPPORTED,
                    format!("client_encoding {value} is not supported; use UTF8"),
                ))
            }
            "search_path" => {
                // Only `public` exists: a path naming another schema would make unqualified names mean
                // tables Cambium does not have, so it is refused rather than silently ignored.
                let other = value
                    .split(',')
                    .map(|part| part.trim().trim_matches('"').trim_matches('\''))
                    .find(|schema| !matches!(*schema, "public" | "$user" | "pg_catalog" | ""));
                match other {
                    Some(schema) => Err(SqlError::new(
                        FEATURE_NOT_SUPPORTED,
                        format!("search_path with schema \"{schema}\": only the schema public exists in Cambium"),
                    )),
                    None => Ok(()),
                }
            }
            _ if self.defaults.contains_key(name) || name.contains('.') => Ok(()),
            _ => Err(unknown(name)),
        }
    }
}

/// A duration in milliseconds as PostgreSQL prints a time setting: `0`, `1234ms`, `5s`, `10min`, `2h`, `1d`.
fn format_ms(ms: u64) -> String {
    if ms == 0 {
        return "0".to_owned();
    }
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

fn unknown(name: &str) -> SqlError {
    SqlError::new(
        UNDEFINED_OBJECT,
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_show_and_reset_parse() {
        assert_eq!(
            parse("SET statement_timeout = 5000"),
            Ok(Command::Set {
                name: STATEMENT_TIMEOUT.to_owned(),
                value: Some("5000".to_owned()),
                local: false
            })
        );
        assert_eq!(
            parse("set local statement_timeout to '1s'"),
            Ok(Command::Set {
                name: STATEMENT_TIMEOUT.to_owned(),
                value: Some("1s".to_owned()),
                local: true
            })
        );
        assert_eq!(
            parse("SET statement_timeout TO DEFAULT"),
            Ok(Command::Set {
                name: STATEMENT_TIMEOUT.to_owned(),
                value: None,
                local: false
            })
        );
        assert_eq!(
            parse("SHOW statement_timeout"),
            Ok(Command::Show(STATEMENT_TIMEOUT.to_owned()))
        );
        assert_eq!(parse("RESET ALL"), Ok(Command::Reset(None)));
        assert_eq!(
            parse("RESET application_name"),
            Ok(Command::Reset(Some("application_name".to_owned())))
        );
        assert!(parse("SET").is_err());
    }

    #[test]
    fn timeouts_take_postgresql_units() {
        for (text, ms) in [
            ("0", 0),
            ("250", 250),
            ("5s", 5_000),
            ("5 s", 5_000),
            ("1min", 60_000),
            ("2h", 7_200_000),
            ("1500us", 2),
        ] {
            assert_eq!(parse_timeout_ms(STATEMENT_TIMEOUT, text), Ok(ms), "{text}");
        }
        for text in ["", "-1", "five", "5 parsecs", "99999999999"] {
            assert!(parse_timeout_ms(STATEMENT_TIMEOUT, text).is_err(), "{text}");
        }
    }

    #[test]
    fn settings_check_names_values_and_local_scope() -> Result<(), SqlError> {
        let mut settings = Settings::new(0, 60_000);
        assert_eq!(settings.timeout_ms(IDLE_IN_TRANSACTION_TIMEOUT), 60_000);
        settings.set(STATEMENT_TIMEOUT, Some("2s".to_owned()), false)?;
        assert_eq!(settings.timeout_ms(STATEMENT_TIMEOUT), 2_000);
        settings.set(STATEMENT_TIMEOUT, Some("10".to_owned()), true)?;
        assert_eq!(settings.timeout_ms(STATEMENT_TIMEOUT), 10);
        settings.end_transaction();
        assert_eq!(
            settings.timeout_ms(STATEMENT_TIMEOUT),
            2_000,
            "SET LOCAL ends with the transaction"
        );
        assert_eq!(
            settings
                .set("no_such_thing", Some("1".to_owned()), false)
                .map_err(|e| e.code),
            Err(UNDEFINED_OBJECT)
        );
        settings.set("myapp.tenant", Some("7".to_owned()), false)?;
        assert_eq!(settings.get("myapp.tenant"), Some("7"));
        assert!(settings.set(STATEMENT_TIMEOUT, Some("soon".to_owned()), false).is_err());
        settings.reset(None)?;
        assert_eq!(settings.timeout_ms(STATEMENT_TIMEOUT), 0);
        Ok(())
    }
}
