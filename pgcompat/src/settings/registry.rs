//! The run-time parameters a session knows (PostgreSQL 15's names, defaults, units and kinds), and how a
//! value given to `SET` is checked, normalized and shown.
//!
//! Each parameter says what Cambium does with it ([`Effect`]): enforced (the compute or this layer acts on
//! it), accepted (planner and logging knobs whose value cannot change a result, kept and shown back), or
//! limited to the values that behave as in PostgreSQL (a value outside them is refused with 0A000 rather
//! than accepted and silently ignored).

use crate::error::{PgError, CANT_CHANGE_RUNTIME_PARAM, FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE};

/// The kind of a parameter's value, as `pg_settings.vartype` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarType {
    /// `on`/`off`.
    Bool,
    /// An integer, in the parameter's unit if it has one.
    Integer,
    /// A floating-point number.
    Real,
    /// Free text.
    String,
    /// One of a list of words.
    Enum,
}

impl VarType {
    /// The name `pg_settings.vartype` shows.
    pub fn name(self) -> &'static str {
        match self {
            VarType::Bool => "bool",
            VarType::Integer => "integer",
            VarType::Real => "real",
            VarType::String => "string",
            VarType::Enum => "enum",
        }
    }
}

/// Who may change a parameter, as `pg_settings.context` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Fixed at build or initdb time; never settable.
    Internal,
    /// Fixed at server start.
    Postmaster,
    /// Fixed at server start or reload.
    Sighup,
    /// Settable by a superuser (every Cambium role is one).
    Superuser,
    /// Settable by any session.
    User,
}

impl Context {
    /// The name `pg_settings.context` shows.
    pub fn name(self) -> &'static str {
        match self {
            Context::Internal => "internal",
            Context::Postmaster => "postmaster",
            Context::Sighup => "sighup",
            Context::Superuser => "superuser",
            Context::User => "user",
        }
    }

    /// Whether `SET` may change it.
    fn settable(self) -> bool {
        matches!(self, Context::Superuser | Context::User)
    }
}

/// What Cambium does with a parameter's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Acted on: the value changes behaviour as in PostgreSQL.
    Enforced,
    /// Kept and shown back; no value of it can change a query's result here (planner costs, logging).
    Accepted,
    /// Only these values (normalized) behave as in PostgreSQL; others are refused with 0A000.
    Only(&'static [&'static str]),
}

/// The unit of an integer parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
    /// Kibibytes.
    Kb,
    /// Blocks of 8 KiB.
    Blocks8Kb,
}

impl Unit {
    /// The name `pg_settings.unit` shows.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Kb => "kB",
            Unit::Blocks8Kb => "8kB",
        }
    }

    fn is_time(self) -> bool {
        matches!(self, Unit::Ms | Unit::S)
    }

    /// How many of the smallest unit of its kind (ms for time, kB for memory) one of this unit is.
    fn base_size(self) -> i64 {
        match self {
            Unit::Ms | Unit::Kb => 1,
            Unit::S => 1000,
            Unit::Blocks8Kb => 8,
        }
    }
}

/// One run-time parameter.
#[derive(Debug, Clone, Copy)]
pub struct Guc {
    /// Its name as PostgreSQL spells it (`DateStyle`, `statement_timeout`); looked up case-insensitively.
    pub name: &'static str,
    /// Its value at session start, normalized (integers in their unit).
    pub default: &'static str,
    /// The kind of value.
    pub vartype: VarType,
    /// The unit of an integer value.
    pub unit: Option<Unit>,
    /// Who may change it.
    pub context: Context,
    /// `pg_settings.category`.
    pub category: &'static str,
    /// `pg_settings.short_desc`.
    pub short_desc: &'static str,
    /// Bounds of an integer or real value.
    pub range: Option<(f64, f64)>,
    /// The words an enum takes.
    pub choices: &'static [&'static str],
    /// What Cambium does with it.
    pub effect: Effect,
}

const fn guc(name: &'static str, default: &'static str, vartype: VarType, context: Context) -> Guc {
    Guc {
        name,
        default,
        vartype,
        unit: None,
        context,
        category: "Client Connection Defaults / Statement Behavior",
        short_desc: "",
        range: None,
        choices: &[],
        effect: Effect::Accepted,
    }
}

impl Guc {
    const fn unit(mut self, unit: Unit, min: f64, max: f64) -> Guc {
        self.unit = Some(unit);
        self.range = Some((min, max));
        self
    }

    const fn range(mut self, min: f64, max: f64) -> Guc {
        self.range = Some((min, max));
        self
    }

    const fn choices(mut self, choices: &'static [&'static str]) -> Guc {
        self.choices = choices;
        self
    }

    const fn effect(mut self, effect: Effect) -> Guc {
        self.effect = effect;
        self
    }

    const fn about(mut self, category: &'static str, short_desc: &'static str) -> Guc {
        self.category = category;
        self.short_desc = short_desc;
        self
    }
}

use Context::{Internal, Postmaster, Sighup, Superuser, User};
use VarType::{Bool, Enum, Integer, Real, String as Text};

const PRESET: &str = "Preset Options";
const LOCALE: &str = "Client Connection Defaults / Locale and Formatting";
const STATEMENT: &str = "Client Connection Defaults / Statement Behavior";
const PLANNER: &str = "Query Tuning / Planner Method Configuration";
const COSTS: &str = "Query Tuning / Planner Cost Constants";
const MEMORY: &str = "Resource Usage / Memory";
const LOGGING: &str = "Reporting and Logging / What to Log";
const COMPAT: &str = "Version and Platform Compatibility / Previous PostgreSQL Versions";
const ISOLATION_LEVELS: &[&str] = &["serializable", "repeatable read", "read committed", "read uncommitted"];
const MESSAGE_LEVELS: &[&str] = &[
    "debug5", "debug4", "debug3", "debug2", "debug1", "log", "notice", "warning", "error",
];
const INT_MAX: f64 = i32::MAX as f64;

/// Every parameter a session knows, sorted by lowercase name (checked by a test).
pub static GUCS: &[Guc] = &[
    guc("application_name", "", Text, User)
        .effect(Effect::Enforced)
        .about(LOGGING, "Sets the application name to be reported in statistics and logs."),
    guc("array_nulls", "on", Bool, User)
        .effect(Effect::Only(&["on"]))
        .about(COMPAT, "Enable input of NULL elements in arrays."),
    guc("backslash_quote", "safe_encoding", Enum, User)
        .choices(&["safe_encoding", "on", "off"])
        .effect(Effect::Only(&["safe_encoding", "off"]))
        .about(COMPAT, "Sets whether \"\\'\" is allowed in string literals."),
    guc("block_size", "8192", Integer, Internal)
        .range(8192.0, 8192.0)
        .about(PRESET, "Shows the size of a disk block."),
    guc("bytea_output", "hex", Enum, User)
        .choices(&["escape", "hex"])
        .effect(Effect::Enforced)
        .about(STATEMENT, "Sets the output format for bytea."),
    guc("check_function_bodies", "on", Bool, User).about(STATEMENT, "Check routine bodies during CREATE FUNCTION and CREATE PROCEDURE."),
    guc("client_encoding", "UTF8", Text, User)
        .effect(Effect::Only(&["UTF8"]))
        .about(LOCALE, "Sets the client's character set encoding."),
    guc("client_min_messages", "notice", Enum, User)
        .choices(MESSAGE_LEVELS)
        .about(STATEMENT, "Sets the message levels that are sent to the client."),
    guc("cpu_operator_cost", "0.0025", Real, User)
        .range(0.0, 1.79769e308)
        .about(COSTS, "Sets the planner's estimate of the cost of processing each operator or function call."),
    guc("cpu_tuple_cost", "0.01", Real, User)
        .range(0.0, 1.79769e308)
        .about(COSTS, "Sets the planner's estimate of the cost of processing each tuple (row)."),
    guc("DateStyle", "ISO, MDY", Text, User)
        .effect(Effect::Only(&["ISO, MDY", "ISO, DMY", "ISO, YMD"]))
        .about(LOCALE, "Sets the display format for date and time values."),
    guc("deadlock_timeout", "1000", Integer, Superuser)
        .unit(Unit::Ms, 1.0, INT_MAX)
        .about("Lock Management", "Sets the time to wait on a lock before checking for deadlock."),
    guc("default_table_access_method", "heap", Text, User).about(STATEMENT, "Sets the default table access method for new tables."),
    guc("default_tablespace", "", Text, User).about(STATEMENT, "Sets the default tablespace to create tables and indexes in."),
    guc("default_text_search_config", "pg_catalog.english", Text, User).about(LOCALE, "Sets default text search configuration."),
    guc("default_transaction_deferrable", "off", Bool, User).about(STATEMENT, "Sets the default deferrable status of new transactions."),
    guc("default_transaction_isolation", "read committed", Enum, User)
        .choices(ISOLATION_LEVELS)
        .about(STATEMENT, "Sets the transaction isolation level of each new transaction."),
    guc("default_transaction_read_only", "off", Bool, User)
        .effect(Effect::Enforced)
        .about(STATEMENT, "Sets the default read-only status of new transactions."),
    guc("effective_cache_size", "524288", Integer, User)
        .unit(Unit::Blocks8Kb, 1.0, INT_MAX)
        .about(COSTS, "Sets the planner's assumption about the total size of the data caches."),
    guc("enable_hashjoin", "on", Bool, User).about(PLANNER, "Enables the planner's use of hash join plans."),
    guc("enable_indexscan", "on", Bool, User).about(PLANNER, "Enables the planner's use of index-scan plans."),
    guc("enable_mergejoin", "on", Bool, User).about(PLANNER, "Enables the planner's use of merge join plans."),
    guc("enable_nestloop", "on", Bool, User).about(PLANNER, "Enables the planner's use of nested-loop join plans."),
    guc("enable_seqscan", "on", Bool, User).about(PLANNER, "Enables the planner's use of sequential-scan plans."),
    guc("enable_sort", "on", Bool, User).about(PLANNER, "Enables the planner's use of explicit sort steps."),
    guc("escape_string_warning", "on", Bool, User).about(COMPAT, "Warn about backslash escapes in ordinary string literals."),
    guc("extra_float_digits", "1", Integer, User)
        .range(-15.0, 3.0)
        .effect(Effect::Only(&["1", "2", "3"]))
        .about(LOCALE, "Sets the number of digits displayed for floating-point values."),
    guc("idle_in_transaction_session_timeout", "0", Integer, User)
        .unit(Unit::Ms, 0.0, INT_MAX)
        .effect(Effect::Enforced)
        .about(STATEMENT, "Sets the maximum allowed idle time between queries, when in a transaction."),
    guc("idle_session_timeout", "0", Integer, User)
        .unit(Unit::Ms, 0.0, INT_MAX)
        .effect(Effect::Only(&["0"]))
        .about(STATEMENT, "Sets the maximum allowed idle time between queries, when not in a transaction."),
    guc("in_hot_standby", "off", Bool, Internal).about(PRESET, "Shows whether hot standby is currently active."),
    guc("integer_datetimes", "on", Bool, Internal).about(PRESET, "Shows whether datetimes are integer based."),
    guc("IntervalStyle", "postgres", Enum, User)
        .choices(&["postgres", "postgres_verbose", "sql_standard", "iso_8601"])
        .effect(Effect::Only(&["postgres", "iso_8601"]))
        .about(LOCALE, "Sets the display format for interval values."),
    guc("is_superuser", "on", Bool, Internal).about(PRESET, "Shows whether the current user is a superuser."),
    guc("jit", "on", Bool, User).about("Query Tuning / Other Planner Options", "Allow JIT compilation."),
    guc("lc_collate", "C.UTF-8", Text, Internal).about(PRESET, "Shows the collation order locale."),
    guc("lc_ctype", "C.UTF-8", Text, Internal).about(PRESET, "Shows the character classification and case conversion locale."),
    guc("lc_messages", "C.UTF-8", Text, Superuser).about(LOCALE, "Sets the language in which messages are displayed."),
    guc("lc_monetary", "C.UTF-8", Text, User)
        .effect(Effect::Only(&["C.UTF-8", "C", "POSIX"]))
        .about(LOCALE, "Sets the locale for formatting monetary amounts."),
    guc("lc_numeric", "C.UTF-8", Text, User)
        .effect(Effect::Only(&["C.UTF-8", "C", "POSIX"]))
        .about(LOCALE, "Sets the locale for formatting numbers."),
    guc("lc_time", "C.UTF-8", Text, User)
        .effect(Effect::Only(&["C.UTF-8", "C", "POSIX"]))
        .about(LOCALE, "Sets the locale for formatting date and time values."),
    guc("lock_timeout", "0", Integer, User)
        .unit(Unit::Ms, 0.0, INT_MAX)
        .about(STATEMENT, "Sets the maximum allowed duration of any wait for a lock."),
    guc("log_min_duration_statement", "-1", Integer, Superuser)
        .unit(Unit::Ms, -1.0, INT_MAX)
        .about(LOGGING, "Sets the minimum execution time above which all statements will be logged."),
    guc("log_statement", "none", Enum, Superuser)
        .choices(&["none", "ddl", "mod", "all"])
        .about(LOGGING, "Sets the type of statements logged."),
    guc("maintenance_work_mem", "65536", Integer, User)
        .unit(Unit::Kb, 1024.0, INT_MAX)
        .about(MEMORY, "Sets the maximum memory to be used for maintenance operations."),
    guc("max_connections", "100", Integer, Postmaster)
        .range(1.0, 262143.0)
        .about("Connections and Authentication / Connection Settings", "Sets the maximum number of concurrent connections."),
    guc("max_function_args", "100", Integer, Internal)
        .range(100.0, 100.0)
        .about(PRESET, "Shows the maximum number of function arguments."),
    guc("max_identifier_length", "63", Integer, Internal)
        .range(63.0, 63.0)
        .about(PRESET, "Shows the maximum identifier length."),
    guc("max_index_keys", "32", Integer, Internal)
        .range(32.0, 32.0)
        .about(PRESET, "Shows the maximum number of index keys."),
    guc("max_parallel_workers_per_gather", "2", Integer, User)
        .range(0.0, 1024.0)
        .about("Resource Usage / Asynchronous Behavior", "Sets the maximum number of parallel processes per executor node."),
    guc("max_stack_depth", "2048", Integer, Superuser)
        .unit(Unit::Kb, 100.0, INT_MAX)
        .about(MEMORY, "Sets the maximum stack depth, in kilobytes."),
    guc("password_encryption", "scram-sha-256", Enum, User)
        .choices(&["md5", "scram-sha-256"])
        .effect(Effect::Only(&["scram-sha-256"]))
        .about("Connections and Authentication / Authentication", "Chooses the algorithm for encrypting passwords."),
    guc("random_page_cost", "4", Real, User)
        .range(0.0, 1.79769e308)
        .about(COSTS, "Sets the planner's estimate of the cost of a nonsequentially fetched disk page."),
    guc("restrict_nonsystem_relation_kind", "", Text, User).about(STATEMENT, "Prohibits access to non-system relations of specified kinds."),
    guc("row_security", "on", Bool, User).about(STATEMENT, "Enable row security."),
    guc("search_path", "\"$user\", public", Text, User)
        .effect(Effect::Enforced)
        .about(STATEMENT, "Sets the schema search order for names that are not schema-qualified."),
    guc("seq_page_cost", "1", Real, User)
        .range(0.0, 1.79769e308)
        .about(COSTS, "Sets the planner's estimate of the cost of a sequentially fetched disk page."),
    guc("server_encoding", "UTF8", Text, Internal).about(PRESET, "Shows the server (database) character set encoding."),
    guc("server_version", "15.0", Text, Internal).about(PRESET, "Shows the server version."),
    guc("server_version_num", "150000", Integer, Internal)
        .range(150000.0, 150000.0)
        .about(PRESET, "Shows the server version as an integer."),
    guc("session_replication_role", "origin", Enum, Superuser)
        .choices(&["origin", "replica", "local"])
        .effect(Effect::Only(&["origin", "local"]))
        .about(STATEMENT, "Sets the session's behavior for triggers and rewrite rules."),
    guc("shared_buffers", "16384", Integer, Postmaster)
        .unit(Unit::Blocks8Kb, 16.0, 1073741823.0)
        .about(MEMORY, "Sets the number of shared memory buffers used by the server."),
    guc("ssl", "off", Bool, Sighup).about("Connections and Authentication / SSL", "Enables SSL connections."),
    guc("standard_conforming_strings", "on", Bool, User)
        .effect(Effect::Only(&["on"]))
        .about(COMPAT, "Causes '...' strings to treat backslashes literally."),
    guc("statement_timeout", "0", Integer, User)
        .unit(Unit::Ms, 0.0, INT_MAX)
        .effect(Effect::Enforced)
        .about(STATEMENT, "Sets the maximum allowed duration of any statement."),
    guc("synchronize_seqscans", "on", Bool, User).about(COMPAT, "Enable synchronized sequential scans."),
    guc("temp_buffers", "1024", Integer, User)
        .unit(Unit::Blocks8Kb, 100.0, 1073741823.0)
        .about(MEMORY, "Sets the maximum number of temporary buffers used by each session."),
    guc("TimeZone", "UTC", Text, User)
        .effect(Effect::Enforced)
        .about(LOCALE, "Sets the time zone for displaying and interpreting time stamps."),
    guc("transaction_deferrable", "off", Bool, User).about(STATEMENT, "Whether to defer a read-only serializable transaction until it can be executed with no possible serialization failures."),
    guc("transaction_isolation", "read committed", Enum, User)
        .choices(ISOLATION_LEVELS)
        .about(STATEMENT, "Sets the current transaction's isolation level."),
    guc("transaction_read_only", "off", Bool, User)
        .effect(Effect::Enforced)
        .about(STATEMENT, "Sets the current transaction's read-only status."),
    guc("transform_null_equals", "off", Bool, User)
        .effect(Effect::Only(&["off"]))
        .about(COMPAT, "Treats \"expr=NULL\" as \"expr IS NULL\"."),
    guc("work_mem", "4096", Integer, User)
        .unit(Unit::Kb, 64.0, INT_MAX)
        .about(MEMORY, "Sets the maximum memory to be used for query workspaces."),
    guc("xmloption", "content", Enum, User)
        .choices(&["content", "document"])
        .about(STATEMENT, "Sets whether XML data in implicit parsing and serialization operations is to be considered as documents or content fragments."),
];

/// The parameter called `name` (any case).
pub fn find(name: &str) -> Option<&'static Guc> {
    let lower = name.to_ascii_lowercase();
    GUCS.binary_search_by(|guc| cmp_lower(guc.name, &lower))
        .ok()
        .map(|at| &GUCS[at])
}

fn cmp_lower(name: &str, lower: &str) -> std::cmp::Ordering {
    name.bytes().map(|b| b.to_ascii_lowercase()).cmp(lower.bytes())
}

impl Guc {
    /// `value` checked and normalized as `SET` stores it, or the error `SET` gives.
    pub fn normalize(&self, value: &str) -> Result<String, PgError> {
        if !self.context.settable() {
            return Err(PgError::new(
                CANT_CHANGE_RUNTIME_PARAM,
                format!("parameter \"{}\" cannot be changed", self.name),
            ));
        }
        let normalized = match self.vartype {
            VarType::Bool => parse_bool(value)
                .map(|on| if on { "on" } else { "off" }.to_owned())
                .ok_or_else(|| {
                    PgError::new(
                        INVALID_PARAMETER_VALUE,
                        format!("parameter \"{}\" requires a Boolean value", self.name),
                    )
                })?,
            VarType::Integer => self.parse_integer(value)?.to_string(),
            VarType::Real => self.parse_real(value)?,
            VarType::Enum => {
                let lower = value.trim().to_ascii_lowercase();
                match self.choices.iter().find(|choice| **choice == lower) {
                    Some(choice) => (*choice).to_owned(),
                    None => return Err(self.invalid(value)),
                }
            }
            VarType::String => self.normalize_text(value)?,
        };
        if let Effect::Only(values) = self.effect {
            if !values.contains(&normalized.as_str()) {
                return Err(PgError::new(
                    FEATURE_NOT_SUPPORTED,
                    format!(
                        "{} = {value} is not supported by Cambium (supported: {})",
                        self.name,
                        values.join(", ")
                    ),
                ));
            }
        }
        Ok(normalized)
    }

    fn normalize_text(&self, value: &str) -> Result<String, PgError> {
        match self.name {
            "client_encoding" => {
                let upper = value.trim().to_ascii_uppercase();
                match upper.as_str() {
                    "UTF8" | "UTF-8" | "UNICODE" => Ok("UTF8".to_owned()),
                    _ => Ok(upper),
                }
            }
            "DateStyle" => normalize_datestyle(value).ok_or_else(|| self.invalid(value)),
            "TimeZone" => match super::zone_of(value) {
                Some(_) => Ok(value.trim().to_owned()),
                None => Err(self.invalid(value)),
            },
            _ => Ok(value.to_owned()),
        }
    }

    fn parse_integer(&self, value: &str) -> Result<i64, PgError> {
        let text = value.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
            .unwrap_or(text.len());
        let (number, unit_text) = text.split_at(split);
        let number: f64 = number.parse().map_err(|_| self.invalid(value))?;
        let unit_text = unit_text.trim();
        let scaled = match (self.unit, unit_text) {
            (_, "") => number,
            (Some(unit), given) => {
                let given_base = unit_base_size(unit, given).ok_or_else(|| self.invalid(value))?;
                number * given_base as f64 / unit.base_size() as f64
            }
            (None, _) => return Err(self.invalid(value)),
        };
        let rounded = scaled.round();
        let (min, max) = self.range.unwrap_or((i64::MIN as f64, i64::MAX as f64));
        if !rounded.is_finite() || rounded < min || rounded > max {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!(
                    "{value} is outside the valid range for parameter \"{}\" ({min} .. {max})",
                    self.name
                ),
            ));
        }
        Ok(rounded as i64)
    }

    fn parse_real(&self, value: &str) -> Result<String, PgError> {
        let number: f64 = value.trim().parse().map_err(|_| self.invalid(value))?;
        let (min, max) = self.range.unwrap_or((f64::MIN, f64::MAX));
        if !number.is_finite() || number < min || number > max {
            return Err(PgError::new(
                INVALID_PARAMETER_VALUE,
                format!("{value} is outside the valid range for parameter \"{}\"", self.name),
            ));
        }
        Ok(crate::value::format_float8(number))
    }

    fn invalid(&self, value: &str) -> PgError {
        PgError::new(
            INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"{}\": \"{value}\"", self.name),
        )
    }

    /// A normalized value as `SHOW` prints it: integers with a unit in the largest unit that divides them
    /// (`5s`, `4MB`), everything else as stored.
    pub fn show(&self, value: &str) -> String {
        match (self.unit, value.parse::<i64>()) {
            (Some(unit), Ok(number)) => show_with_unit(unit, number),
            _ => value.to_owned(),
        }
    }
}

/// How many of `unit`'s base (ms or kB) the unit word `given` is, if it is a unit of the same kind.
fn unit_base_size(unit: Unit, given: &str) -> Option<i64> {
    if unit.is_time() {
        match given {
            "ms" => Some(1),
            "s" => Some(1000),
            "min" => Some(60_000),
            "h" => Some(3_600_000),
            "d" => Some(86_400_000),
            _ => None,
        }
    } else {
        match given {
            "kB" => Some(1),
            "MB" => Some(1 << 10),
            "GB" => Some(1 << 20),
            "TB" => Some(1 << 30),
            _ => None,
        }
    }
}

fn show_with_unit(unit: Unit, number: i64) -> String {
    if number <= 0 {
        return number.to_string();
    }
    let base = number.saturating_mul(unit.base_size());
    let scales: &[(&str, i64)] = if unit.is_time() {
        &[
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("min", 60_000),
            ("s", 1000),
            ("ms", 1),
        ]
    } else {
        &[("TB", 1 << 30), ("GB", 1 << 20), ("MB", 1 << 10), ("kB", 1)]
    };
    let (name, size) = scales
        .iter()
        .find(|(_, size)| base % size == 0)
        .copied()
        .unwrap_or(("", 1));
    format!("{}{name}", base / size)
}

/// PostgreSQL's Boolean spellings for a setting (unique prefixes of `true`, `false`, `yes`, `no`, `on`,
/// `off`, and `1`/`0`).
fn parse_bool(value: &str) -> Option<bool> {
    let lower = value.trim().to_ascii_lowercase();
    let word = lower.as_str();
    let prefix_of = |full: &str, min_len: usize| word.len() >= min_len && full.starts_with(word);
    if word == "1" || prefix_of("true", 1) || prefix_of("yes", 1) || prefix_of("on", 2) {
        Some(true)
    } else if word == "0" || prefix_of("false", 1) || prefix_of("no", 1) || prefix_of("off", 2) {
        Some(false)
    } else {
        None
    }
}

/// `DateStyle` normalized as PostgreSQL shows it (`ISO, MDY`): an output style and an input order, either
/// of which may be left out (kept from the default).
fn normalize_datestyle(value: &str) -> Option<String> {
    let mut style = "ISO";
    let mut order = "MDY";
    for part in value.split([',', ' ']).map(str::trim).filter(|p| !p.is_empty()) {
        match part.to_ascii_uppercase().as_str() {
            "ISO" => style = "ISO",
            "SQL" => style = "SQL",
            "POSTGRES" => style = "Postgres",
            "GERMAN" => style = "German",
            "MDY" | "US" | "NONEURO" | "NONEUROPEAN" => order = "MDY",
            "DMY" | "EURO" | "EUROPEAN" => order = "DMY",
            "YMD" => order = "YMD",
            _ => return None,
        }
    }
    Some(format!("{style}, {order}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_for_lookup() {
        for pair in GUCS.windows(2) {
            assert!(
                pair[0].name.to_ascii_lowercase() < pair[1].name.to_ascii_lowercase(),
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        assert_eq!(find("datestyle").map(|g| g.name), Some("DateStyle"));
        assert_eq!(find("TIMEZONE").map(|g| g.name), Some("TimeZone"));
        assert!(find("no_such").is_none());
    }

    #[test]
    fn defaults_are_valid_values_of_their_parameter() {
        for guc in GUCS.iter().filter(|g| g.context.settable()) {
            assert_eq!(guc.normalize(guc.default).as_deref(), Ok(guc.default), "{}", guc.name);
        }
    }

    #[test]
    fn values_are_checked_and_normalized() {
        let get = |name| find(name).expect("known");
        assert_eq!(get("statement_timeout").normalize("5s").as_deref(), Ok("5000"));
        assert_eq!(get("statement_timeout").normalize("1500us").ok(), None);
        assert_eq!(get("statement_timeout").show("5000"), "5s");
        assert_eq!(get("statement_timeout").show("1234"), "1234ms");
        assert_eq!(get("work_mem").normalize("64MB").as_deref(), Ok("65536"));
        assert_eq!(get("work_mem").show("4096"), "4MB");
        assert_eq!(get("temp_buffers").show("1024"), "8MB");
        assert_eq!(get("effective_cache_size").show("524288"), "4GB");
        assert_eq!(get("row_security").normalize("false").as_deref(), Ok("off"));
        assert_eq!(
            get("row_security").normalize("maybe").map_err(|e| e.code),
            Err(INVALID_PARAMETER_VALUE)
        );
        assert_eq!(get("DateStyle").normalize("iso").as_deref(), Ok("ISO, MDY"));
        assert_eq!(
            get("DateStyle").normalize("German").map_err(|e| e.code),
            Err(FEATURE_NOT_SUPPORTED)
        );
        assert_eq!(get("client_encoding").normalize("utf-8").as_deref(), Ok("UTF8"));
        assert_eq!(
            get("client_encoding").normalize("LATIN1").map_err(|e| e.code),
            Err(FEATURE_NOT_SUPPORTED)
        );
        assert_eq!(
            get("server_version").normalize("16").map_err(|e| e.code),
            Err(CANT_CHANGE_RUNTIME_PARAM)
        );
        assert_eq!(
            get("statement_timeout").normalize("-1").map_err(|e| e.code),
            Err(INVALID_PARAMETER_VALUE)
        );
        assert_eq!(
            get("transaction_isolation").normalize("SERIALIZABLE").as_deref(),
            Ok("serializable")
        );
        assert_eq!(
            get("TimeZone").normalize("Mars/Base").map_err(|e| e.code),
            Err(INVALID_PARAMETER_VALUE)
        );
        assert_eq!(get("random_page_cost").normalize("1.1").as_deref(), Ok("1.1"));
    }
}
