//! Durable file writes: write a temp file, fsync it, rename it into place, fsync the directory.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// An I/O error on a path: what every function here fails with. The engine and the services wrap it in their
/// own error enums.
#[derive(Debug, thiserror::Error)]
#[error("I/O error on {}: {source}", path.display())]
pub struct IoError {
    /// The path.
    pub path: PathBuf,
    /// The error.
    #[source]
    pub source: std::io::Error,
}

/// Shorthand for this module's results.
pub type Result<T, E = IoError> = std::result::Result<T, E>;

/// Wraps an `io::Error` with its path.
pub fn io_err<P: Into<PathBuf>>(path: P) -> impl FnOnce(std::io::Error) -> IoError {
    // The path is copied only if the call failed: every write and fsync passes one.
    move |source| IoError {
        path: path.into(),
        source,
    }
}

/// Whether the engine calls fsync. `Off` exists for benchmarks that measure the work apart from the sync; a
/// real deployment always uses `Fsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync files and directories before an operation returns.
    #[default]
    Fsync,
    /// Skip every fsync (benchmarks only: a crash may lose data).
    Off,
}

/// The suffix of temp files; stray ones are removed on load.
pub const TEMP_SUFFIX: &str = ".tmp";

/// The temp path used while writing `path`.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(TEMP_SUFFIX);
    path.with_file_name(name)
}

/// Syncs a file's data (and the metadata needed to read it back).
pub fn sync_file(file: &File, path: &Path, durability: Durability) -> Result<()> {
    if durability == Durability::Fsync {
        file.sync_data().map_err(io_err(path))?;
    }
    Ok(())
}

/// Syncs a directory so a rename or create in it is durable.
pub fn sync_dir(dir: &Path, durability: Durability) -> Result<()> {
    if durability == Durability::Fsync {
        File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))?;
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically: temp file, fsync, rename, fsync of the directory. After a crash the
/// path holds either the old content or the new, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    write_then_rename(path, bytes, durability)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")), durability)
}

/// [`write_atomic`] without its last step: temp file, fsync, rename. The new content is whole wherever the
/// rename is seen, but the rename itself is durable only once the caller fsyncs the directory (one fsync for
/// several files made in it, as a directory being created needs).
pub fn write_then_rename(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    let temp = temp_path(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(io_err(&temp))?;
    file.write_all(bytes).map_err(io_err(&temp))?;
    sync_file(&file, &temp, durability)?;
    drop(file);
    fs::rename(&temp, path).map_err(io_err(path))
}

/// Renames `from` to `to` and syncs the directory of `to`.
pub fn rename_durable(from: &Path, to: &Path, durability: Durability) -> Result<()> {
    fs::rename(from, to).map_err(io_err(to))?;
    sync_dir(to.parent().unwrap_or(Path::new(".")), durability)
}

/// Creates a directory (and missing parents) and makes its entry durable.
pub fn create_dir_durable(dir: &Path, durability: Durability) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent, durability)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("meta");
        write_atomic(&path, b"one", Durability::Fsync).expect("write");
        write_atomic(&path, b"two", Durability::Fsync).expect("write");
        assert_eq!(fs::read(&path).expect("read"), b"two");
        assert!(!temp_path(&path).exists());
    }
}
