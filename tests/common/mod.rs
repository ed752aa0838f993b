//! Helpers shared by the process tests: real `cambium` processes started, killed with -9 and restarted.
#![allow(dead_code)]

pub mod api;
pub mod bank;
pub mod cluster;
pub mod faults;
pub mod netns;
#[path = "../../api/src/testing_postgres.rs"]
pub mod postgres;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Says that a test, or a part of one, is skipped and why: `SKIPPED: {what}` written to the process's standard
/// error itself, outside the test harness's capture, so `cargo test` shows it for a test that passes too (a
/// skip that only `--nocapture` shows would pass unseen in CI).
pub fn skipped(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {what}");
}

/// Log files whose last lines are printed if the test fails (when this is dropped while panicking).
pub struct Logs(pub Vec<PathBuf>);

impl Drop for Logs {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for path in &self.0 {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(60)..].join("\n");
            eprintln!("---- {} (last 60 lines)\n{tail}", path.display());
        }
    }
}

/// A `cambium <subcommand>` process and what it needs to be restarted the same way.
pub struct Process {
    args: Vec<String>,
    /// Environment variables set for it (its restarts' too).
    envs: Vec<(String, String)>,
    /// Where its stderr goes (appended across restarts); `None`: /dev/null.
    stderr_log: Option<PathBuf>,
    /// Where it listens (read from its one stdout line).
    pub address: String,
    /// The network namespace it runs in (`common::netns`); `None`: the test's own.
    netns: Option<String>,
    child: Option<Child>,
}

/// Spawns `cambium <args> --listen <address>` (in network namespace `netns`, if given, through `ip netns exec`,
/// which execs it: the child is the `cambium` process itself) and waits for the line that says where it listens.
fn spawn(
    netns: Option<&str>,
    args: &[String],
    envs: &[(String, String)],
    address: &str,
    stderr_log: Option<&Path>,
) -> (Child, String) {
    // Without a log file, stderr goes to an unnamed temporary file so a process that dies before it says where
    // it listens can be told apart from one that hangs: its last lines go into the panic.
    let (stderr_file, kept) = match stderr_log {
        Some(path) => (
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap_or_else(|e| panic!("open {}: {e}", path.display())),
            None,
        ),
        None => {
            let file = tempfile::tempfile().expect("a temporary file for stderr");
            let kept = file.try_clone().expect("clone the stderr file");
            (file, Some(kept))
        }
    };
    let stderr = Stdio::from(stderr_file);
    let cambium = env!("CARGO_BIN_EXE_cambium");
    let mut command = match netns {
        Some(netns) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", netns, cambium]);
            command
        }
        None => Command::new(cambium),
    };
    let mut child = command
        .args(args)
        .args(["--listen", address])
        .envs(envs.iter().map(|(name, value)| (name, value)))
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn cambium");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let address = line
        .split("listening on ")
        .nth(1)
        .and_then(|a| a.split_whitespace().next())
        // `cambium up` says `http://…` (or `https://…`): the address is what follows.
        .map(|a| {
            a.trim_start_matches("http://")
                .trim_start_matches("https://")
                .to_string()
        })
        .unwrap_or_else(|| {
            // Its stdout closed: it is exiting, or has (a second at most to reap it).
            let mut status = None;
            for _ in 0..100 {
                status = child.try_wait().ok().flatten();
                if status.is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let stderr = match (kept, stderr_log) {
                (Some(mut file), _) => {
                    use std::io::{Read, Seek};
                    let mut text = String::new();
                    let _ = file.seek(std::io::SeekFrom::Start(0));
                    let _ = file.read_to_string(&mut text);
                    text
                }
                (None, Some(path)) => std::fs::read_to_string(path).unwrap_or_default(),
                (None, None) => String::new(),
            };
            let lines: Vec<&str> = stderr.lines().collect();
            let tail = lines[lines.len().saturating_sub(30)..].join("\n");
            panic!("{args:?} did not report its address: {line:?} (exit: {status:?}); stderr's last lines:\n{tail}")
        });
    (child, address)
}

impl Process {
    /// Sends `signal` (`-STOP`, `-CONT`) to the running process.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().expect("running").to_string();
        let status = Command::new("kill").args([signal, &pid]).status().expect("kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Starts `cambium <args>` on a free loopback port.
    pub fn start(args: Vec<String>) -> Process {
        let (child, address) = spawn(None, &args, &[], "127.0.0.1:0", None);
        Process {
            args,
            envs: Vec::new(),
            stderr_log: None,
            address,
            netns: None,
            child: Some(child),
        }
    }

    /// Starts `cambium <args>` in the test's own namespace on a free port of `ip` (an address of this namespace
    /// other than loopback, such as a test network's gateway, `common::netns::Net::gateway_ip`, so hosts in
    /// namespaces reach it).
    pub fn start_at(ip: &str, args: Vec<String>) -> Process {
        let (child, address) = spawn(None, &args, &[], &format!("{ip}:0"), None);
        Process {
            args,
            envs: Vec::new(),
            stderr_log: None,
            address,
            netns: None,
            child: Some(child),
        }
    }

    /// Starts `cambium <args>` in network namespace `netns` on a free port of `ip` (an address of that namespace),
    /// its stderr appended to `stderr_log` if given.
    pub fn start_in(netns: &str, ip: &str, args: Vec<String>, stderr_log: Option<&Path>) -> Process {
        let (child, address) = spawn(Some(netns), &args, &[], &format!("{ip}:0"), stderr_log);
        Process {
            args,
            envs: Vec::new(),
            stderr_log: stderr_log.map(Path::to_path_buf),
            address,
            netns: Some(netns.to_owned()),
            child: Some(child),
        }
    }

    /// [`Process::start_in`] with environment variables `envs` set (`RUST_LOG`, say), for its restarts too, and its
    /// stderr appended to `stderr_log`.
    pub fn start_in_with_env(
        netns: &str,
        ip: &str,
        args: Vec<String>,
        stderr_log: &Path,
        envs: Vec<(String, String)>,
    ) -> Process {
        let (child, address) = spawn(Some(netns), &args, &envs, &format!("{ip}:0"), Some(stderr_log));
        Process {
            args,
            envs,
            stderr_log: Some(stderr_log.to_path_buf()),
            address,
            netns: Some(netns.to_owned()),
            child: Some(child),
        }
    }

    /// Starts `cambium <args>` on a free loopback port with its stderr appended to `stderr_log` (its restarts'
    /// too), for tests that check what it logged.
    pub fn start_logged(args: Vec<String>, stderr_log: &Path) -> Process {
        Process::start_logged_with_env(args, stderr_log, Vec::new())
    }

    /// [`Process::start_logged`] with environment variables `envs` set (`RUST_LOG`, say), for its restarts too.
    pub fn start_logged_with_env(args: Vec<String>, stderr_log: &Path, envs: Vec<(String, String)>) -> Process {
        let (child, address) = spawn(None, &args, &envs, "127.0.0.1:0", Some(stderr_log));
        Process {
            args,
            envs,
            stderr_log: Some(stderr_log.to_path_buf()),
            address,
            netns: None,
            child: Some(child),
        }
    }

    /// The arguments of a safekeeper with data in `dir`.
    pub fn safekeeper_args(id: u32, dir: &Path) -> Vec<String> {
        vec![
            "safekeeper".into(),
            "--id".into(),
            id.to_string(),
            "--data-dir".into(),
            dir.display().to_string(),
        ]
    }

    /// How it ended, if it exited by itself (it is then no longer running); `None` while it runs.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().expect("try_wait")?;
        self.child = None;
        Some(status)
    }

    /// A safekeeper with data in `dir`.
    pub fn safekeeper(id: u32, dir: &Path) -> Process {
        Process::start(Process::safekeeper_args(id, dir))
    }

    /// Its arguments, to change before a [`Process::restart`] (a fault injection left out, say).
    pub fn args_mut(&mut self) -> &mut Vec<String> {
        &mut self.args
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// Whether it runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// kill -9, and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("reap");
        }
    }

    /// Starts it again with the same arguments on the same address.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart a killed process");
        let (child, address) = spawn(
            self.netns.as_deref(),
            &self.args,
            &self.envs,
            &self.address,
            self.stderr_log.as_deref(),
        );
        assert_eq!(address, self.address);
        self.child = Some(child);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A fresh directory path under `root`.
pub fn dir(root: &Path, name: &str) -> PathBuf {
    root.join(name)
}

/// The timelines of `tenant` (its id in hex) that the safekeeper with data directory `safekeeper_dir` holds:
/// those its creation log names (a timeline has no directory until it first writes) and any directory with a
/// control file (a replica pulled there, or a copy put there by hand). Empty if it holds none.
pub fn safekeeper_timelines(safekeeper_dir: &Path, tenant: &str) -> std::collections::BTreeSet<String> {
    let mut held: std::collections::BTreeSet<String> = safekeeper::node::logged_timelines(safekeeper_dir)
        .unwrap_or_else(|e| panic!("reading the creation log of {}: {e}", safekeeper_dir.display()))
        .into_keys()
        .filter(|(logged_tenant, _)| logged_tenant.to_string() == tenant)
        .map(|(_, timeline)| timeline.to_string())
        .collect();
    if let Ok(entries) = std::fs::read_dir(safekeeper_dir.join(tenant)) {
        held.extend(
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.path().join(safekeeper::filestore::CONTROL_FILE_NAME).is_file())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())),
        );
    }
    held
}

/// The tenants (ids in hex) that the safekeeper with data directory `safekeeper_dir` holds a timeline of, by its
/// creation log or a tenant directory.
pub fn safekeeper_tenants(safekeeper_dir: &Path) -> std::collections::BTreeSet<String> {
    let mut held: std::collections::BTreeSet<String> = safekeeper::node::logged_timelines(safekeeper_dir)
        .unwrap_or_else(|e| panic!("reading the creation log of {}: {e}", safekeeper_dir.display()))
        .into_keys()
        .map(|(tenant, _)| tenant.to_string())
        .collect();
    if let Ok(entries) = std::fs::read_dir(safekeeper_dir) {
        held.extend(
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.path().is_dir())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())),
        );
    }
    held
}
