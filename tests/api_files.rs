//! Secrets at rest (issue 13): the data directory `cambium up` creates, and the directories it creates in it, are
//! mode 0700; the metadata (key hashes, database password verifiers), its `-wal` and `-shm`, and the admin key are 0600.
//! Checked on a fresh start, and on a restart after every one of them was loosened (an install from before the
//! modes were enforced), which `up` tightens. The test process's umask is left as it is (typically 022, which
//! leaves group and other bits that `up` must take away itself).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::api::Up;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// The directories and files with secrets, with the mode each must have.
fn secret_paths(data_dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut paths = vec![(data_dir.to_owned(), 0o700), (data_dir.join("pageserver"), 0o700)];
    for id in 1..=3 {
        paths.push((data_dir.join(format!("safekeeper-{id}")), 0o700));
    }
    paths.push((data_dir.join("api_key"), 0o600));
    paths.push((data_dir.join("metadata.sqlite"), 0o600));
    for suffix in ["-wal", "-shm"] {
        let path = data_dir.join(format!("metadata.sqlite{suffix}"));
        if path.exists() {
            paths.push((path, 0o600));
        }
    }
    paths
}

fn assert_modes(data_dir: &Path) {
    let paths = secret_paths(data_dir);
    assert!(paths.len() >= 7, "{paths:?}");
    for (path, expected) in paths {
        assert_eq!(
            mode(&path),
            expected,
            "{} is {:o}, not {expected:o}",
            path.display(),
            mode(&path)
        );
    }
}

#[test]
fn up_keeps_its_secrets_to_its_user_on_a_fresh_start_and_after_a_chmod() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("cambium");
    let mut up = Up::start_in(&data_dir, &[]);
    assert_modes(&data_dir);
    assert!(
        data_dir.join("metadata.sqlite-wal").exists(),
        "the metadata is in WAL mode: its -wal is checked too"
    );

    // An older install: everything readable by everyone.
    up.process.kill9();
    for (path, expected) in secret_paths(&data_dir) {
        let loose = if expected == 0o700 { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loose)).expect("chmod");
    }
    up.process.restart();
    assert_modes(&data_dir);
    // The key still works after the restart.
    let key = std::fs::read_to_string(data_dir.join("api_key")).expect("key");
    assert_eq!(key.trim(), up.key);
}
