//! `--config FILE` (or `CAMBIUM_CONFIG`): a TOML file of settings for the command being run, one key per flag
//! (`data_dir = ".cambium"` or `data-dir = …`; arrays for list flags: `safekeepers = ["a:1", "b:2"]`), the
//! global flags included (`log_format = "json"`).
//!
//! Precedence, highest first: the command line, the environment (`CAMBIUM_…`, named on each flag), the file.
//! The file is applied by setting, for every key, the flag's environment variable when it is not set already,
//! before the command line is parsed; clap then does the rest. An unknown key, or a key for a flag without an
//! environment variable, is an error naming it (a typo never passes silently).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::CommandFactory;

/// The config file named by `args` (`--config F` / `--config=F`) or the environment, if any.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        if text == "--config" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(path) = text.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("CAMBIUM_CONFIG").map(PathBuf::from)
}

/// The subcommand `args` names (the first argument that is not a flag).
fn subcommand(args: &[OsString]) -> Option<String> {
    let mut iter = args.iter().skip(1);
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        if text == "--config" || text == "--log-format" {
            iter.next();
        } else if !text.starts_with('-') {
            return Some(text.into_owned());
        }
    }
    None
}

/// A TOML value as a flag value: strings as they are, numbers and booleans printed, arrays joined by commas.
fn flag_value(key: &str, value: &toml::Value) -> Result<String> {
    Ok(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| flag_value(key, item))
            .collect::<Result<Vec<_>>>()?
            .join(","),
        other => bail!("setting {key:?}: a {} is not a flag value", other.type_str()),
    })
}

/// Applies the config file, if any, for the command `args` will run; see the module doc.
pub fn apply<C: CommandFactory>(args: &[OsString]) -> Result<()> {
    let Some(path) = config_path(args) else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table = text.parse().with_context(|| format!("parsing {}", path.display()))?;
    let Some(name) = subcommand(args) else {
        return Ok(()); // clap will say a subcommand is missing
    };
    let root = C::command();
    let Some(command) = root.find_subcommand(&name) else {
        return Ok(()); // clap will say it is unknown
    };
    for (key, value) in &table {
        let long = key.replace('_', "-");
        // The command's own flags, then the global ones every command takes (`log_format`, `max_open_files`);
        // not `config` itself.
        let arg = command
            .get_arguments()
            .chain(root.get_arguments().filter(|arg| arg.is_global_set()))
            .filter(|arg| arg.get_long() != Some("config"))
            .find(|arg| arg.get_long() == Some(long.as_str()))
            .with_context(|| format!("{}: `cambium {name}` has no setting {key:?}", path.display()))?;
        let env = arg
            .get_env()
            .with_context(|| format!("{}: setting {key:?} cannot come from a file", path.display()))?;
        if std::env::var_os(env).is_none() {
            // Single-threaded here: main calls this before anything else starts.
            std::env::set_var(env, flag_value(key, value)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_subcommands_are_found_around_global_flags() {
        let args: Vec<OsString> = ["cambium", "--config", "c.toml", "up", "--listen", "x"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(config_path(&args), Some(PathBuf::from("c.toml")));
        assert_eq!(subcommand(&args).as_deref(), Some("up"));
        let args: Vec<OsString> = ["cambium", "api", "--config=d.toml"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(config_path(&args), Some(PathBuf::from("d.toml")));
        assert_eq!(subcommand(&args).as_deref(), Some("api"));
    }

    #[test]
    fn values_become_flag_text() {
        let table: toml::Table = "a = \"x\"\nb = 3\nc = true\nd = [\"p:1\", \"q:2\"]"
            .parse()
            .expect("toml");
        assert_eq!(flag_value("a", &table["a"]).ok().as_deref(), Some("x"));
        assert_eq!(flag_value("b", &table["b"]).ok().as_deref(), Some("3"));
        assert_eq!(flag_value("c", &table["c"]).ok().as_deref(), Some("true"));
        assert_eq!(flag_value("d", &table["d"]).ok().as_deref(), Some("p:1,q:2"));
    }
}
