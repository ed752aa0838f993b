//! Modes of the files that hold secrets: the data directory and what `up` creates in it are `0700`, the metadata
//! (API key hashes, every database's password verifier) and the admin key are `0600`. New ones are created so;
//! existing ones (an install from before this was enforced, or a `chmod` by hand) are tightened at start.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Creates directory `path` (and missing parents) with mode `0700`, or takes group and other permissions away
/// from an existing one.
pub fn private_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path)?;
    restrict(path, 0o700)
}

/// Takes away every permission of file `path` but the owner's read and write, if it exists.
pub fn private_file(path: &Path) -> io::Result<()> {
    match restrict(path, 0o600) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Clears the bits of `path`'s mode outside `allowed`, if any are set.
fn restrict(path: &Path, allowed: u32) -> io::Result<()> {
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    if mode & !allowed == 0 {
        return Ok(());
    }
    tracing::warn!(
        path = %path.display(),
        from = format!("{mode:o}"),
        to = format!("{:o}", mode & allowed),
        "tightening the mode of a file that holds secrets"
    );
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & allowed))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn loose_modes_are_tightened_and_tight_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);

        let file = dir.join("f");
        private_file(&file).unwrap(); // absent: nothing to do
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        private_file(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
        private_file(&file).unwrap();
        assert_eq!(mode(&file), 0o400, "tighter than 0600 stays");
    }
}
