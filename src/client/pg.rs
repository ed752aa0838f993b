//! `cambium psql` and `cambium connection-string`, and the passwords they use.
//!
//! The API shows a database's password once (its creation, a reset) and keeps only a verifier, so the client
//! keeps the passwords it was shown: `<config dir>/passwords.json`, `{"db_…": "…"}`, mode 0600 in a 0700
//! directory, replaced atomically. `psql` hands the password to psql in `PGPASSWORD` (its environment only, never
//! its command line, which other users can read); with no password kept, psql's own `PGPASSWORD`, `.pgpass` or
//! prompt apply.
//!
//! A target is `br_…`, `db_…` (the database's default branch) or a branch name with `--database`, and may end in
//! `@<RFC 3339 time>` or `@<LSN>`: the branch read-only as of that point (the connection string's database name
//! `br_…@…`, percent-encoded).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::ClientError;
use super::{branches, segment, Context};

/// The largest passwords file read, in bytes (a password is 32 characters; this is thousands of databases).
const PASSWORDS_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// Whether `text` is an LSN: two groups of 1 to 8 hex digits around a `/`.
pub(crate) fn is_lsn(text: &str) -> bool {
    let hex = |s: &str| (1..=8).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit());
    text.split_once('/').is_some_and(|(high, low)| hex(high) && hex(low))
}

/// The passwords this client was shown, by database id.
pub(crate) struct Passwords {
    /// `None` when no config directory could be named (no `HOME`): nothing is kept.
    file: Option<PathBuf>,
}

impl Passwords {
    /// The store in `dir`, or in `$XDG_CONFIG_HOME/cambium`, else `$HOME/.config/cambium`.
    pub(crate) fn new(dir: Option<PathBuf>) -> Result<Passwords, ClientError> {
        let dir = dir.or_else(|| {
            let xdg = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from);
            xdg.or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
                .map(|base| base.join("cambium"))
        });
        Ok(Passwords {
            file: dir.map(|dir| dir.join("passwords.json")),
        })
    }

    /// Every kept password (none when there is no file yet).
    fn load(&self) -> Result<BTreeMap<String, String>, ClientError> {
        let Some(file) = &self.file else {
            return Ok(BTreeMap::new());
        };
        let bytes = match std::fs::File::open(file) {
            Ok(opened) => {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(opened, PASSWORDS_FILE_BYTES_MAX + 1),
                    &mut bytes,
                )
                .map_err(|e| local(file, &e))?;
                bytes
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(local(file, &e)),
        };
        if bytes.len() as u64 > PASSWORDS_FILE_BYTES_MAX {
            return Err(ClientError::Local(format!(
                "{} is larger than {PASSWORDS_FILE_BYTES_MAX} bytes",
                file.display()
            )));
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::Local(format!("{} is not a passwords file: {e}", file.display())))
    }

    /// The password kept for `database_id`.
    pub(crate) fn get(&self, database_id: &str) -> Result<Option<String>, ClientError> {
        Ok(self.load()?.remove(database_id))
    }

    /// Keeps the password in `database`'s `connection_uri` (a creation's or reset's answer), if it has one.
    pub(crate) fn remember_from(&self, database: &Value) -> Result<(), ClientError> {
        let (Some(id), Some(uri)) = (
            database.get("id").and_then(Value::as_str),
            database.get("connection_uri").and_then(Value::as_str),
        ) else {
            return Ok(());
        };
        let Some(password) = password_of(uri) else {
            return Ok(());
        };
        let Some(file) = &self.file else {
            eprintln!("note: no HOME or --config-dir, so the password is not kept: save it now");
            return Ok(());
        };
        let mut all = self.load()?;
        all.insert(id.to_owned(), password);
        write_private(file, &serde_json::to_vec_pretty(&all).unwrap_or_default())
    }
}

/// `path` written with `bytes` atomically (a temporary file renamed over it), mode 0600, its directory made
/// 0700 if missing.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), ClientError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| local(dir, &e))?;
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(|e| local(&temporary, &e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| local(&temporary, &e))?;
    std::fs::rename(&temporary, path).map_err(|e| local(path, &e))
}

fn local(path: &Path, error: &std::io::Error) -> ClientError {
    ClientError::Local(format!("{}: {error}", path.display()))
}

/// The password of a `postgresql://user:password@…` URI, if it has one.
fn password_of(uri: &str) -> Option<String> {
    let userinfo = uri.strip_prefix("postgresql://")?.split_once('@')?.0;
    userinfo.split_once(':').map(|(_, password)| password.to_owned())
}

/// Whether `connection-string` prints the password it knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PasswordUse {
    /// Put it in the URI.
    Include,
    /// Leave it out.
    Leave,
}

/// What a target resolved to: the connection string to connect with (no password) and its database.
struct Resolved {
    uri: String,
    database_id: String,
}

/// Resolves `target` (see the module doc) through the API.
async fn resolve(context: &Context, target: &str, database: Option<&str>) -> Result<Resolved, ClientError> {
    let (name, point) = match target.split_once('@') {
        Some((name, point)) if !point.is_empty() => (name, Some(point)),
        Some(_) => {
            return Err(ClientError::Usage(format!(
                "{target:?}: nothing after @ (a time or an LSN)"
            )))
        }
        None => (target, None),
    };
    let resource = if name.starts_with("db_") {
        let reply = context.api.get(&format!("/v1/databases/{}", segment(name)?)).await?;
        let mut database = reply["database"].clone();
        database["database_id"] = database["id"].clone();
        database
    } else {
        let id = branches::resolve(context, name, database).await?;
        context.api.get(&format!("/v1/branches/{}", segment(&id)?)).await?["branch"].clone()
    };
    let field = |key: &str| {
        resource
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ClientError::Local(format!("{name} has no `{key}`: {resource}")))
    };
    let mut uri = field("connection_uri")?;
    if let Some(point) = point {
        uri = with_database_name(&uri, &format!("{}@{point}", field("id")?))?;
    }
    Ok(Resolved {
        uri,
        database_id: field("database_id")?,
    })
}

/// `uri` with its database name (the path) replaced by `name`, percent-encoded.
fn with_database_name(uri: &str, name: &str) -> Result<String, ClientError> {
    let (head, query) = match uri.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (uri, None),
    };
    let authority_end = head
        .strip_prefix("postgresql://")
        .and_then(|rest| rest.find('/'))
        .ok_or_else(|| ClientError::Local(format!("not a postgresql:// connection string: {uri}")))?;
    let mut out = format!("{}/{}", &head[..authority_end + "postgresql://".len()], encode(name));
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

/// Percent-encodes everything but unreserved characters (RFC 3986), as libpq decodes URI parts.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `uri` with `password` put in (percent-encoded).
fn with_password(uri: &str, password: &str) -> String {
    match uri.strip_prefix("postgresql://").and_then(|rest| rest.split_once('@')) {
        Some((user, host)) if !user.contains(':') => format!("postgresql://{user}:{}@{host}", encode(password)),
        _ => uri.to_owned(),
    }
}

/// `cambium connection-string TARGET`: prints the URI (with the kept password unless told not to).
pub(crate) async fn connection_string(
    context: &Context,
    target: &str,
    database: Option<&str>,
    password: PasswordUse,
) -> Result<(), ClientError> {
    let resolved = resolve(context, target, database).await?;
    let uri = match (password, context.passwords.get(&resolved.database_id)?) {
        (PasswordUse::Include, Some(known)) => with_password(&resolved.uri, &known),
        _ => resolved.uri,
    };
    super::output::write_stdout(format!("{uri}\n").as_bytes())
}

/// `cambium psql TARGET [-- ARGS]`: replaces this process with psql on the target (the password, if kept, in
/// its environment), so psql's exit code is the command's. Returns only if psql could not be started.
pub(crate) async fn psql(
    context: &Context,
    target: &str,
    database: Option<&str>,
    program: &Path,
    args: &[String],
) -> Result<(), ClientError> {
    let resolved = resolve(context, target, database).await?;
    let mut command = std::process::Command::new(program);
    command.arg(&resolved.uri).args(args);
    if let Some(password) = context.passwords.get(&resolved.database_id)? {
        if std::env::var_os("PGPASSWORD").is_none() {
            command.env("PGPASSWORD", password);
        }
    }
    let error = command.exec();
    Err(ClientError::Local(format!("running {}: {error}", program.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_are_told_from_times() {
        for lsn in ["0/16B3748", "FFFFFFFF/0", "a/b"] {
            assert!(is_lsn(lsn), "{lsn}");
        }
        for other in ["2026-11-22T13:00:00Z", "0/", "/1", "123456789/0", "0/xyz", "16B3748"] {
            assert!(!is_lsn(other), "{other}");
        }
    }

    #[test]
    fn a_point_in_time_goes_into_the_database_name_encoded() {
        let uri = "postgresql://cambium@127.0.0.1:5433/br_01X?sslmode=prefer";
        assert_eq!(
            with_database_name(uri, "br_01X@0/16B3748").ok().as_deref(),
            Some("postgresql://cambium@127.0.0.1:5433/br_01X%400%2F16B3748?sslmode=prefer")
        );
        assert_eq!(
            with_database_name(uri, "br_01X@2026-11-22T13:00:00Z").ok().as_deref(),
            Some("postgresql://cambium@127.0.0.1:5433/br_01X%402026-11-22T13%3A00%3A00Z?sslmode=prefer")
        );
        assert!(with_database_name("mysql://x/y", "n").is_err());
        assert_eq!(
            with_password(uri, "p@ss"),
            "postgresql://cambium:p%40ss@127.0.0.1:5433/br_01X?sslmode=prefer"
        );
        let with = "postgresql://cambium:secret@127.0.0.1:5433/db_1?sslmode=prefer";
        assert_eq!(password_of(with).as_deref(), Some("secret"));
        assert_eq!(password_of(uri), None);
        assert_eq!(with_password(with, "other"), with, "a password already there stays");
    }

    #[test]
    fn passwords_are_kept_privately_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Passwords::new(Some(dir.path().join("cfg"))).expect("a store");
        assert_eq!(store.get("db_1").expect("read"), None);
        let database = serde_json::json!({"id": "db_1", "connection_uri": "postgresql://cambium:pw1@h:1/db_1"});
        store.remember_from(&database).expect("kept");
        let without = serde_json::json!({"id": "db_2", "connection_uri": "postgresql://cambium@h:1/db_2"});
        store.remember_from(&without).expect("nothing to keep");
        assert_eq!(store.get("db_1").expect("read").as_deref(), Some("pw1"));
        assert_eq!(store.get("db_2").expect("read"), None);
        use std::os::unix::fs::PermissionsExt;
        let file = dir.path().join("cfg/passwords.json");
        let mode = std::fs::metadata(&file).expect("the file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(dir.path().join("cfg"))
            .expect("the dir")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }
}
