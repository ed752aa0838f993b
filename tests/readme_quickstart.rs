//! The README's quickstart, run as written against a real `cambium up` (its URL and key file swapped for this
//! test's): every command in it works, and the restore brings the deleted row back. Needs `bash`, `curl` and
//! `psql`; where one is missing the test says so and passes without running (the API and SQL paths it uses are
//! covered by `api_user_story` regardless).

mod common;

use std::process::Command;

use common::api::Up;

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The shell block between the quickstart markers.
fn quickstart() -> String {
    block("quickstart")
}

/// The shell block between the `<!-- NAME:begin` and `<!-- NAME:end -->` markers.
fn block(name: &str) -> String {
    let readme = include_str!("../README.md");
    let begin = readme.find(&format!("<!-- {name}:begin")).expect("the block begins");
    let end = readme.find(&format!("<!-- {name}:end -->")).expect("the block ends");
    let block = &readme[begin..end];
    let code = block.split_once("```sh\n").expect("a sh block").1;
    code.split_once("```").expect("the block closes").0.to_owned()
}

#[test]
fn the_readme_quickstart_runs_as_written() {
    let missing: Vec<&str> = ["bash", "curl", "psql"].into_iter().filter(|t| !has(t)).collect();
    if !missing.is_empty() {
        eprintln!("SKIPPED: the quickstart needs {missing:?}, which this machine lacks");
        return;
    }
    let up = Up::start();
    let script = quickstart()
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
fn the_readme_preview_branch_workflow_runs_as_written() {
    let missing: Vec<&str> = ["bash", "curl", "psql", "jq"].into_iter().filter(|t| !has(t)).collect();
    if !missing.is_empty() {
        eprintln!("SKIPPED: the preview workflow needs {missing:?}, which this machine lacks");
        return;
    }
    let up = Up::start();
    let script = block("preview")
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
