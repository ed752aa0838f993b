//! The README's quickstarts, run as written against a real `cambium up` (its URL and key file swapped for this
//! test's): the curl one and the command-line client's. Every command in each works, and the restore brings the
//! deleted row back. Needs `bash`, `curl` and `psql`; where one is missing the test says so and passes without
//! running (the API and SQL paths they use are covered by `api_user_story` and `cli_client` regardless).

mod common;

use std::process::Command;

use common::api::Up;

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The shell block between the `<!-- {marker}:begin` and `<!-- {marker}:end -->` markers.
fn quickstart(marker: &str) -> String {
    let readme = include_str!("../README.md");
    let begin = readme
        .find(&format!("<!-- {marker}:begin"))
        .expect("the quickstart begins");
    let end = readme
        .find(&format!("<!-- {marker}:end -->"))
        .expect("the quickstart ends");
    let block = &readme[begin..end];
    let code = block.split_once("```sh\n").expect("a sh block").1;
    code.split_once("```").expect("the block closes").0.to_owned()
}

#[test]
fn the_readme_quickstart_runs_as_written() {
    let missing: Vec<&str> = ["bash", "curl", "psql"].into_iter().filter(|t| !has(t)).collect();
    if !missing.is_empty() {
        common::skipped(&format!("the quickstart needs {missing:?}, which this machine lacks"));
        return;
    }
    let up = Up::start();
    let script = quickstart("quickstart")
        .replace("http://127.0.0.1:8420", &format!("http://{}", up.process.address))
        .replace(".cambium/api_key", &up.data_dir.join("api_key").display().to_string());
    let output = Command::new("timeout")
        .args(["120", "bash", "-euo", "pipefail", "-c", &script])
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the quickstart failed:\n{stdout}\n{stderr}");
    // Both operations finished.
    assert_eq!(stdout.matches(r#""status":"finished""#).count(), 2, "{stdout}");
    // The branch saw both rows; the last query (after the restore) shows the deleted row again.
    assert!(stdout.contains("pear"), "{stdout}");
    let after_delete = stdout.rsplit("DELETE 1").next().expect("the delete ran");
    assert!(
        after_delete.contains("apple") && after_delete.contains("(1 row)"),
        "{stdout}"
    );
}

#[test]
fn the_readme_cli_quickstart_runs_as_written() {
    let missing: Vec<&str> = ["bash", "psql"].into_iter().filter(|t| !has(t)).collect();
    if !missing.is_empty() {
        common::skipped(&format!("the quickstart needs {missing:?}, which this machine lacks"));
        return;
    }
    let up = Up::start();
    let config = tempfile::tempdir().expect("tempdir");
    // `cambium` is this build's binary; the API's URL and key file are this test's, through the variables the
    // README names (its block relies on their defaults).
    let script = format!(
        "cambium() {{ {:?} \"$@\"; }}\n{}",
        env!("CARGO_BIN_EXE_cambium"),
        quickstart("cli-quickstart")
    );
    let output = Command::new("timeout")
        .args(["120", "bash", "-euo", "pipefail", "-c", &script])
        .env("CAMBIUM_API_URL", format!("http://{}", up.process.address))
        .env("CAMBIUM_API_KEY_FILE", up.data_dir.join("api_key"))
        .env("CAMBIUM_CONFIG_DIR", config.path())
        .env_remove("CAMBIUM_API_KEY")
        .env_remove("PGPASSWORD")
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the CLI quickstart failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("pear"), "the branch saw both rows: {stdout}");
    let after_delete = stdout.rsplit("DELETE 1").next().expect("the delete ran");
    // Time travel saw the row before the restore; the restore brought it back; the kept branch is listed.
    assert!(
        after_delete.contains("rows_before") && after_delete.contains("finished"),
        "{stdout}"
    );
    assert!(
        after_delete.contains("apple") && after_delete.contains("(1 row)"),
        "{stdout}"
    );
    assert!(after_delete.contains("main_before_restore_"), "{stdout}");
}

#[test]
fn the_readme_preview_branch_workflow_runs_as_written() {
    let missing: Vec<&str> = ["bash", "curl", "psql", "jq"].into_iter().filter(|t| !has(t)).collect();
    if !missing.is_empty() {
        common::skipped(&format!(
            "the preview workflow needs {missing:?}, which this machine lacks"
        ));
        return;
    }
    let up = Up::start();
    let script = quickstart("preview")
        .replace("http://127.0.0.1:8420", &format!("http://{}", up.process.address))
        .replace(".cambium/api_key", &up.data_dir.join("api_key").display().to_string());
    let output = Command::new("timeout")
        .args(["120", "bash", "-euo", "pipefail", "-c", &script])
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the preview workflow failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains(r#"{"name":"main","protected":true}"#), "{stdout}");
    assert!(
        stdout.contains("+    name varchar(80)"),
        "the diff shows the column: {stdout}"
    );
    assert!(
        stdout.contains(r#"+CREATE INDEX "users_email" ON "users""#),
        "the diff shows the index: {stdout}"
    );
    assert!(stdout.contains("finished"), "{stdout}");
    assert!(stdout.contains("changes against main after the reset: 0"), "{stdout}");
    assert_eq!(stdout.matches(": 204").count(), 1, "one branch deleted: {stdout}");
}
