//! A throwaway PostgreSQL 15 server for tests: `initdb` in a temp dir, trust authentication for user `cambium`,
//! listening on 127.0.0.1 at a free port, stopped (`-m immediate`) and deleted on drop. For tests `fsync` is off;
//! [`TestPostgres::start_durable`] keeps PostgreSQL's default (on), for benches that compare it with SQLite's
//! `synchronous = FULL`. Run as the `postgres` user
//! when the tests run as root (PostgreSQL refuses root). The binaries are `$PG_BIN` or
//! `/usr/lib/postgresql/15/bin`; where they are absent, [`TestPostgres::start`] says so and gives `None`, and the
//! test that wanted one passes having printed why it checked nothing.
//!
//! [`TestPostgres::start_in_netns`] runs it inside a network namespace instead, listening on that namespace's
//! address, for tests that partition it from the hosts that use it (`tests/common/netns.rs`).
//! [`TestPostgres::kill9`] and [`TestPostgres::restart`] crash it (kill -9 of its processes) and start it again on
//! the same port and data directory, for tests of the metadata server's loss.
//!
//! Shared, by path, between the `api` crate's unit tests and the workspace's black-box tests.

#![allow(dead_code)] // each test crate uses a part
#![allow(clippy::unwrap_used, clippy::expect_used)] // test set-up: a failure is a panic with the reason

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running PostgreSQL server, stopped on drop.
pub struct TestPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    server_user: Option<String>,
    /// The address it listens on (127.0.0.1, or the namespace's).
    listen_ip: String,
    /// The network namespace its tools and server run in, if any.
    netns: Option<String>,
    /// The server's options (`pg_ctl start -o`), to start it again the same way ([`TestPostgres::restart`]).
    options: String,
}

impl TestPostgres {
    /// Starts a server with `fsync` off, or `None` (with a message on stderr) if PostgreSQL 15 is not installed.
    pub fn start() -> Option<TestPostgres> {
        TestPostgres::start_with_fsync("off")
    }

    /// [`TestPostgres::start`] with `fsync` on (PostgreSQL's default): a commit is durable, as it is in the
    /// control metadata's SQLite (`synchronous = FULL`); what a bench comparing the two needs.
    pub fn start_durable() -> Option<TestPostgres> {
        TestPostgres::start_with_fsync("on")
    }

    /// [`TestPostgres::start`] inside network namespace `netns`, listening on `ip` (an address of that namespace)
    /// at a fixed port, 5432 (the namespace has nothing else on it).
    pub fn start_in_netns(netns: &str, ip: &str) -> Option<TestPostgres> {
        TestPostgres::start_with("off", Some((netns, ip)))
    }

    fn start_with_fsync(fsync: &str) -> Option<TestPostgres> {
        TestPostgres::start_with(fsync, None)
    }

    fn start_with(fsync: &str, netns: Option<(&str, &str)>) -> Option<TestPostgres> {
        let bin = std::env::var_os("PG_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
        if !bin.join("initdb").exists() || !bin.join("pg_ctl").exists() {
            // Outside the test harness's capture, so `cargo test` shows the skip for a passing test too.
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("SKIPPED: no PostgreSQL 15 binaries in {} (set PG_BIN)\n", bin.display()),
            );
            return None;
        }
        // PostgreSQL refuses to run as root: then the server runs as `postgres`.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
            .unwrap_or(false);
        let server_user = root.then(|| "postgres".to_owned());
        let dir = tempfile::tempdir().expect("a temp dir for PostgreSQL");
        if let Some(user) = &server_user {
            let status = Command::new("chown").arg(user).arg(dir.path()).status().expect("chown");
            assert!(status.success(), "chown {user} {}", dir.path().display());
        }
        let port = match netns {
            Some(_) => 5432,
            None => std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free port")
                .port(),
        };
        let mut server = TestPostgres {
            dir,
            bin,
            port,
            server_user,
            listen_ip: netns.map_or("127.0.0.1", |(_, ip)| ip).to_owned(),
            netns: netns.map(|(netns, _)| netns.to_owned()),
            options: String::new(),
        };
        let data = server.data_dir();
        server.run(
            "initdb",
            &[
                "-D",
                path_str(&data),
                "-U",
                "cambium",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
        );
        if server.netns.is_some() {
            // Its clients are other namespaces' hosts: trust them as initdb trusts loopback.
            let hba = data.join("pg_hba.conf");
            let mut rules = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
            rules.push_str("host all all 0.0.0.0/0 trust\n");
            std::fs::write(&hba, rules).expect("write pg_hba.conf");
        }
        server.options = format!(
            "-c listen_addresses={} -c unix_socket_directories={} -p {port} -c fsync={fsync} \
             -c max_connections=50",
            server.listen_ip,
            path_str(server.dir.path())
        );
        server.pg_ctl_start();
        Some(server)
    }

    /// `pg_ctl start` on the data directory with the server's options, waiting (60 s at most) until it accepts
    /// connections.
    fn pg_ctl_start(&self) {
        let data = self.data_dir();
        let log = self.dir.path().join("server.log");
        let args = [
            "-D",
            path_str(&data),
            "-l",
            path_str(&log),
            "-w",
            "-t",
            "60",
            "start",
            "-o",
            &self.options,
        ];
        let out = self
            .command("pg_ctl")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running pg_ctl: {e}"));
        if !out.status.success() {
            // Why is in the server's log, which goes with the temp dir.
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            panic!(
                "pg_ctl {args:?} failed: {}{}\nthe server's log ends:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                lines[lines.len().saturating_sub(20)..].join("\n")
            );
        }
    }

    /// kill -9 of the server, as the crash of its host: the postmaster and every process it started (each by its
    /// process id), nothing flushed, no shutdown checkpoint. Returns once they are gone (reaped or zombies),
    /// within 10 s. [`TestPostgres::restart`] starts it again.
    pub fn kill9(&self) {
        let pid_file = self.data_dir().join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file).expect("read postmaster.pid: the server runs");
        let postmaster: u32 = text
            .lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .unwrap_or_else(|| panic!("no process id in postmaster.pid: {text:?}"));
        // Stopped first, so it forks no backend between the listing of its children and the kill (one it forked
        // then would outlive it, attached to its shared memory, and the restart would refuse to start).
        signal(&[postmaster], "-STOP");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while stat_of(postmaster).is_some_and(|(state, _)| state != 'T') {
            assert!(
                std::time::Instant::now() < deadline,
                "the PostgreSQL postmaster {postmaster} did not stop in 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut victims = children_of(postmaster);
        victims.push(postmaster);
        signal(&victims, "-9");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while victims.iter().any(|pid| running(*pid)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the killed PostgreSQL processes {victims:?} still run after 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // What a reboot of its host would leave: no lock file naming a process (here a zombie may keep the id
        // alive, if nothing reaps it, and PostgreSQL would refuse to start over it).
        std::fs::remove_file(&pid_file).expect("remove postmaster.pid");
    }

    /// Starts the server again after [`TestPostgres::kill9`], on the same address, port and data directory (crash
    /// recovery first); returns once it accepts connections.
    pub fn restart(&self) {
        assert!(
            !self.data_dir().join("postmaster.pid").exists(),
            "restart a killed server"
        );
        self.pg_ctl_start();
    }

    /// The URL of database `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgresql://cambium@{}:{}/{database}", self.listen_ip, self.port)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        let port = self.port.to_string();
        let host = self.listen_ip.clone();
        self.run("createdb", &["-h", &host, "-p", &port, "-U", "cambium", name]);
        self.url(name)
    }

    /// Gives user `cambium` the password `password` and makes TCP connections authenticate with SCRAM-SHA-256
    /// (PostgreSQL 15's default password method) instead of trust, as a real server's clients do: for benches
    /// that compare what a connection costs. The server reloads its `pg_hba.conf` before this returns.
    pub fn require_password(&self, password: &str) {
        let port = self.port.to_string();
        let host = self.listen_ip.clone();
        let sql = format!("ALTER ROLE cambium PASSWORD '{}'", password.replace('\'', "''"));
        self.run(
            "psql",
            &["-h", &host, "-p", &port, "-U", "cambium", "-d", "postgres", "-qc", &sql],
        );
        let hba = self.data_dir().join("pg_hba.conf");
        let rules = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        let rules: Vec<String> = rules
            .lines()
            .map(|line| match line.strip_suffix("trust") {
                Some(rest) if line.starts_with("host") => format!("{rest}scram-sha-256"),
                _ => line.to_owned(),
            })
            .collect();
        std::fs::write(&hba, rules.join("\n") + "\n").expect("write pg_hba.conf");
        let data = self.data_dir();
        self.run("pg_ctl", &["-D", path_str(&data), "reload"]);
        // A reload is a signal: wait until a connection without the password is refused.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let trusted = self
                .command("psql")
                .args([
                    "-h", &host, "-p", &port, "-U", "cambium", "-d", "postgres", "-w", "-qc", "SELECT 1",
                ])
                .env_remove("PGPASSWORD")
                .output()
                .is_ok_and(|out| out.status.success());
            if !trusted {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "PostgreSQL still trusts TCP connections 10 s after the reload"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `tool` from PostgreSQL's binaries, as the server's user, in the server's namespace.
    fn command(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        let mut command = match &self.netns {
            Some(netns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", netns]);
                command
            }
            None => Command::new("env"),
        };
        if let Some(user) = &self.server_user {
            command.args(["runuser", "-u", user, "--"]);
        }
        command.arg(&program);
        command
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let mut command = self.command(tool);
        let out = command
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let data = self.data_dir();
        if data.join("postmaster.pid").exists() {
            let mut command = self.command("pg_ctl");
            // Best effort: a server that will not stop is reported, and the temp dir goes anyway.
            if let Err(error) = command
                .args(["-D", path_str(&data), "-m", "immediate", "-w", "stop"])
                .output()
            {
                eprintln!("stopping the test PostgreSQL: {error}");
            }
        }
    }
}

/// Sends `signal` (`-STOP`, `-9`) to each of `pids`. A process that exited by itself meanwhile makes `kill` fail
/// for it alone: the status is not checked.
fn signal(pids: &[u32], signal: &str) {
    let mut command = Command::new("kill");
    command.arg(signal);
    for pid in pids {
        command.arg(pid.to_string());
    }
    let _ = command.output().expect("run kill");
}

/// The processes whose parent is `parent` (from `/proc`).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(parent))
        .collect()
}

/// Process `pid`'s parent and state, from `/proc/<pid>/stat` (`pid (comm) state ppid …`; the command may hold
/// spaces and parentheses, so the fields are read after the last `)`).
fn stat_of(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

fn parent_of(pid: u32) -> Option<u32> {
    stat_of(pid).map(|(_, parent)| parent)
}

/// Whether process `pid` runs (exists and is not a zombie).
fn running(pid: u32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}
