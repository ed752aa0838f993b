//! `SET`, `SHOW` and `RESET` statements parsed with `sqlparser` (PostgreSQL dialect) into what they do to a
//! session's [`Settings`](super::Settings), including the spellings that are settings in disguise:
//! `SET TIME ZONE`, `SET NAMES`, `SET TRANSACTION …`, `SET SESSION CHARACTERISTICS AS TRANSACTION …`.

use sqlparser::ast::{
    ContextModifier, Expr, Reset, Set, Statement, TransactionAccessMode, TransactionIsolationLevel, TransactionMode,
    Value,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::Scope;
use crate::error::{PgError, FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, SYNTAX_ERROR};

/// A parsed `SET`, `SHOW` or `RESET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Assignments, in order; a `None` value is `DEFAULT`. `SET TRANSACTION` gives several.
    Set {
        /// `(name, value)` pairs.
        assignments: Vec<(String, Option<String>)>,
        /// How long they last.
        scope: Scope,
    },
    /// `SHOW name`.
    Show(String),
    /// `SHOW ALL`.
    ShowAll,
    /// `RESET name`, or `RESET ALL` (`None`).
    Reset(Option<String>),
    /// `SET CONSTRAINTS {ALL | names} {DEFERRED | IMMEDIATE}` (`None`: ALL).
    SetConstraints {
        /// The constraints named (without their schema), or `None` for ALL.
        names: Option<Vec<String>>,
        /// DEFERRED (else IMMEDIATE).
        deferred: bool,
    },
}

/// Whether a statement starting with `first_word` (uppercase) is one [`parse`] takes.
pub fn is_setting_statement(first_word: &str) -> bool {
    matches!(first_word, "SET" | "SHOW" | "RESET")
}

/// `SET CONSTRAINTS {ALL | name, …} {DEFERRED | IMMEDIATE}` (which sqlparser does not read), read with its
/// tokenizer: `None` when the statement is not one; names folded, their schema dropped.
fn set_constraints(sql: &str) -> Option<Result<Command, PgError>> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut tokens = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon));
    let keyword = |t: Option<Token>| match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    if keyword(tokens.next()).as_deref() != Some("SET") || keyword(tokens.next()).as_deref() != Some("CONSTRAINTS") {
        return None;
    }
    let rest: Vec<Token> = tokens.collect();
    let syntax = || Some(Err(PgError::new(SYNTAX_ERROR, "syntax error in SET CONSTRAINTS")));
    let Some((mode, list)) = rest.split_last() else {
        return syntax();
    };
    let deferred = match keyword(Some(mode.clone())).as_deref() {
        Some("DEFERRED") => true,
        Some("IMMEDIATE") => false,
        _ => return syntax(),
    };
    if matches!(list, [Token::Word(w)] if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("all")) {
        return Some(Ok(Command::SetConstraints { names: None, deferred }));
    }
    let mut names = Vec::new();
    let mut expect_name = true;
    for token in list {
        match (token, expect_name) {
            (Token::Word(w), true) => {
                names.push(if w.quote_style.is_some() {
                    w.value.clone()
                } else {
                    w.value.to_ascii_lowercase()
                });
                expect_name = false;
            }
            // `schema.name`: the name is what follows the dot.
            (Token::Period, false) => {
                names.pop();
                expect_name = true;
            }
            (Token::Comma, false) => expect_name = true,
            _ => return syntax(),
        }
    }
    if expect_name || names.is_empty() {
        return syntax();
    }
    Some(Ok(Command::SetConstraints {
        names: Some(names),
        deferred,
    }))
}

/// Parses one `SET`, `SHOW` or `RESET` statement.
pub fn parse(sql: &str) -> Result<Command, PgError> {
    if let Some(command) = set_constraints(sql) {
        return command;
    }
    let statements =
        Parser::parse_sql(&PostgreSqlDialect {}, sql).map_err(|error| PgError::new(SYNTAX_ERROR, error.to_string()))?;
    let [statement] = statements.as_slice() else {
        return Err(PgError::new(
            FEATURE_NOT_SUPPORTED,
            "SET, SHOW and RESET must be sent as statements of their own",
        ));
    };
    match statement {
        Statement::Set(set) => parse_set(set),
        Statement::ShowVariable { variable } => {
            let words: Vec<String> = variable.iter().map(|ident| ident.value.to_ascii_lowercase()).collect();
            Ok(match words.join(" ").as_str() {
                "all" => Command::ShowAll,
                "time zone" => Command::Show("timezone".to_owned()),
                "transaction isolation level" => Command::Show(super::TRANSACTION_ISOLATION.to_owned()),
                // `SHOW myapp.tenant_id`: the parser gives the dotted name's parts.
                _ => Command::Show(words.join(".")),
            })
        }
        Statement::Reset(reset) => match &reset.reset {
            Reset::ALL => Ok(Command::Reset(None)),
            Reset::ConfigurationParameter(name) => Ok(Command::Reset(Some(name.to_string().to_ascii_lowercase()))),
            Reset::SessionAuthorization => Err(PgError::new(
                FEATURE_NOT_SUPPORTED,
                "RESET SESSION AUTHORIZATION is not supported",
            )),
        },
        other => Err(PgError::new(
            FEATURE_NOT_SUPPORTED,
            format!("{} is not supported", first_words(&other.to_string())),
        )),
    }
}

fn parse_set(set: &Set) -> Result<Command, PgError> {
    match set {
        Set::SingleAssignment {
            scope,
            hivevar: false,
            variable,
            values,
        } => {
            let name = variable.to_string().to_ascii_lowercase();
            let value = match values.as_slice() {
                [Expr::Identifier(ident)]
                    if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("default") =>
                {
                    None
                }
                values if name == super::SEARCH_PATH => Some(
                    values
                        .iter()
                        .map(path_entry_text)
                        .collect::<Result<Vec<_>, _>>()?
                        .join(", "),
                ),
                values => Some(values.iter().map(value_text).collect::<Result<Vec<_>, _>>()?.join(", ")),
            };
            Ok(Command::Set {
                assignments: vec![(name, value)],
                scope: scope_of(*scope == Some(ContextModifier::Local)),
            })
        }
        Set::SetTimeZone { local, value } => {
            let value = match value {
                Expr::Value(v) if matches!(v.value, Value::Number(..)) => {
                    return Err(PgError::new(
                        FEATURE_NOT_SUPPORTED,
                        "a time zone given as a number of hours is not supported; use a zone name such as 'UTC' or 'Europe/Paris'",
                    ))
                }
                Expr::Identifier(ident) if ident.value.eq_ignore_ascii_case("local") || ident.value.eq_ignore_ascii_case("default") => None,
                value => Some(value_text(value)?),
            };
            Ok(Command::Set {
                assignments: vec![("timezone".to_owned(), value)],
                scope: scope_of(*local),
            })
        }
        Set::SetNames { charset_name, .. } => Ok(Command::Set {
            assignments: vec![("client_encoding".to_owned(), Some(charset_name.value.clone()))],
            scope: Scope::Session,
        }),
        Set::SetTransaction {
            modes,
            snapshot: None,
            session,
        } => {
            let assignments = transaction_modes(modes)
                .into_iter()
                .map(|(name, value)| {
                    let name = if *session {
                        format!("default_{name}")
                    } else {
                        name.to_owned()
                    };
                    (name, Some(value.to_owned()))
                })
                .collect();
            Ok(Command::Set {
                assignments,
                scope: if *session { Scope::Session } else { Scope::Local },
            })
        }
        other => Err(PgError::new(
            FEATURE_NOT_SUPPORTED,
            format!("{} is not supported", first_words(&other.to_string())),
        )),
    }
}

/// The parameters transaction modes set: `transaction_read_only` and `transaction_isolation`, with their
/// values (also what `BEGIN ISOLATION LEVEL … READ ONLY` sets).
pub fn transaction_modes(modes: &[TransactionMode]) -> Vec<(&'static str, &'static str)> {
    modes
        .iter()
        .map(|mode| match mode {
            TransactionMode::AccessMode(TransactionAccessMode::ReadOnly) => (super::TRANSACTION_READ_ONLY, "on"),
            TransactionMode::AccessMode(TransactionAccessMode::ReadWrite) => (super::TRANSACTION_READ_ONLY, "off"),
            TransactionMode::IsolationLevel(level) => (
                super::TRANSACTION_ISOLATION,
                match level {
                    TransactionIsolationLevel::ReadUncommitted => "read uncommitted",
                    TransactionIsolationLevel::ReadCommitted => "read committed",
                    TransactionIsolationLevel::RepeatableRead => "repeatable read",
                    TransactionIsolationLevel::Serializable | TransactionIsolationLevel::Snapshot => "serializable",
                },
            ),
        })
        .collect()
}

fn scope_of(local: bool) -> Scope {
    if local {
        Scope::Local
    } else {
        Scope::Session
    }
}

fn first_words(sql: &str) -> String {
    sql.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// An entry of a `SET search_path` list as PostgreSQL keeps it: an identifier folded, then quoted where it
/// must be (`"$user"`, `"Mixed Case"`); a string as written.
fn path_entry_text(expr: &Expr) -> Result<String, PgError> {
    match expr {
        Expr::Identifier(ident) => {
            let folded = if ident.quote_style.is_some() {
                ident.value.clone()
            } else {
                ident.value.to_ascii_lowercase()
            };
            Ok(crate::functions::quote_ident_pg(&folded))
        }
        other => value_text(other),
    }
}

/// A `SET` value as PostgreSQL reads it: a number, a string or a bare word.
fn value_text(expr: &Expr) -> Result<String, PgError> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(number, _) => Ok(number.clone()),
            Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => Ok(text.clone()),
            Value::Boolean(flag) => Ok(if *flag { "on" } else { "off" }.to_owned()),
            other => Ok(other.to_string()),
        },
        Expr::Identifier(ident) => Ok(ident.value.clone()),
        Expr::UnaryOp { op, expr } => Ok(format!("{op}{}", value_text(expr)?)),
        other => Err(PgError::new(
            INVALID_PARAMETER_VALUE,
            format!("invalid value for a parameter: {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, value: Option<&str>, scope: Scope) -> Command {
        Command::Set {
            assignments: vec![(name.to_owned(), value.map(str::to_owned))],
            scope,
        }
    }

    #[test]
    fn the_spellings_of_set_show_and_reset_parse() {
        assert_eq!(
            parse("SET statement_timeout = 5000"),
            Ok(set("statement_timeout", Some("5000"), Scope::Session))
        );
        assert_eq!(
            parse("set local statement_timeout to '1s'"),
            Ok(set("statement_timeout", Some("1s"), Scope::Local))
        );
        assert_eq!(
            parse("SET statement_timeout TO DEFAULT"),
            Ok(set("statement_timeout", None, Scope::Session))
        );
        assert_eq!(
            parse("SET TIME ZONE 'Europe/Paris'"),
            Ok(set("timezone", Some("Europe/Paris"), Scope::Session))
        );
        assert_eq!(
            parse("SET NAMES 'UTF8'"),
            Ok(set("client_encoding", Some("UTF8"), Scope::Session))
        );
        assert_eq!(
            parse("SHOW TRANSACTION ISOLATION LEVEL"),
            Ok(Command::Show("transaction_isolation".to_owned()))
        );
        assert_eq!(parse("SHOW ALL"), Ok(Command::ShowAll));
        assert_eq!(
            parse("SHOW myapp.tenant_id"),
            Ok(Command::Show("myapp.tenant_id".to_owned()))
        );
        assert_eq!(parse("RESET ALL"), Ok(Command::Reset(None)));
        assert_eq!(
            parse("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY"),
            Ok(Command::Set {
                assignments: vec![
                    ("transaction_isolation".to_owned(), Some("serializable".to_owned())),
                    ("transaction_read_only".to_owned(), Some("on".to_owned())),
                ],
                scope: Scope::Local
            })
        );
        assert_eq!(
            parse("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"),
            Ok(set("default_transaction_read_only", Some("on"), Scope::Session))
        );
        assert!(parse("SET").is_err());
        assert!(parse("SET TIME ZONE 5").is_err());
    }
}
