//! The deployment examples in `deploy/` stay true to the binary: every `deploy/config/<role>*.toml` is accepted
//! by `cambium <role> --config` (an unknown key is an error naming it, so a renamed or removed flag fails here),
//! and every systemd unit runs a role with one of those files.

use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// The role a config file is for: its name up to the first `-` or `.` (`api-standby.toml` is for `api`).
fn role_of(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).expect("a file name");
    name.split(['-', '.']).next().expect("a role").to_owned()
}

#[test]
fn every_example_config_is_accepted_by_its_command() {
    let mut configs: Vec<PathBuf> = std::fs::read_dir(deploy_dir().join("config"))
        .expect("deploy/config")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    configs.sort();
    let roles: Vec<String> = configs.iter().map(|p| role_of(p)).collect();
    for role in ["safekeeper", "pageserver", "api"] {
        assert!(
            roles.iter().any(|r| r == role),
            "no example config for `cambium {role}`"
        );
    }
    for (config, role) in configs.iter().zip(&roles) {
        // `--help` after the file is applied: the keys are checked, nothing is started.
        let output = Command::new(env!("CARGO_BIN_EXE_cambium"))
            .arg(role)
            .arg("--config")
            .arg(config)
            .arg("--help")
            .env_remove("CAMBIUM_CONFIG")
            .output()
            .expect("run cambium");
        assert!(
            output.status.success(),
            "`cambium {role} --config {}` refused it: {}",
            config.display(),
            String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or("")
        );
    }
}

#[test]
fn every_systemd_unit_runs_a_role_with_an_example_config() {
    let units = deploy_dir().join("systemd");
    let mut seen = 0;
    for entry in std::fs::read_dir(&units).expect("deploy/systemd") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "service") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).expect("a unit");
        let exec = text
            .lines()
            .find_map(|line| line.strip_prefix("ExecStart="))
            .unwrap_or_else(|| panic!("{} has no ExecStart", path.display()));
        let words: Vec<&str> = exec.split_whitespace().collect();
        let [_, role, "--config", config] = words[..] else {
            panic!(
                "{}: ExecStart is not `cambium <role> --config <file>`: {exec}",
                path.display()
            );
        };
        let file = Path::new(config).file_name().expect("a file name");
        assert!(
            deploy_dir().join("config").join(file).is_file(),
            "{}: {config} is not one of deploy/config",
            path.display()
        );
        assert_eq!(
            role_of(Path::new(file)),
            role,
            "{}: the config is another role's",
            path.display()
        );
    }
    assert!(seen >= 3, "a unit per role");
}
