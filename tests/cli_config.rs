//! `--config FILE`: settings from a TOML file reach the command, the command line wins over the file, and an
//! unknown key is refused by name.

mod common;

use common::api::request;
use common::Process;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_sets_flags_and_the_command_line_wins() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("from-file");
    let config = root.path().join("cambium.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\npg-listen = \"127.0.0.1:0\"\nrate_limit = 2\nlisten = \"127.0.0.1:1\"\n",
            data_dir.display().to_string()
        ),
    )
    .expect("write the config");
    // `Process::start` adds `--listen 127.0.0.1:0`, which must win over the file's unusable port 1.
    let up = Process::start(vec!["--config".into(), config.display().to_string(), "up".into()]);
    let key = std::fs::read_to_string(data_dir.join("api_key")).expect("the key is in the file's data_dir");
    let mut limited = 0;
    for _ in 0..10 {
        let reply = request(&up.address, "GET", "/v1/projects", Some(key.trim()), None, &[]).await;
        if reply.status == 429 {
            limited += 1;
        }
    }
    assert!(limited > 0, "rate_limit = 2 from the file applies");

    std::fs::write(&config, "data_dri = \"x\"\n").expect("write");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cambium"))
        .args(["--config", &config.display().to_string(), "up"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("data_dri"), "{stderr}");
}
