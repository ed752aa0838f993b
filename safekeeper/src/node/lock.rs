//! The data directory's lock file.
//!
//!
//! Two processes must never open one data directory. The workspace's minimum Rust (1.85) predates
//! `File::try_lock`, and no new dependency is allowed for `flock`, so the lock is a file: `LOCK` holds the
//! owner's pid, its start time (`/proc/<pid>/stat` field 22) and the boot id, and is created atomically with
//! its content (written to a temp file, then hard-linked to `LOCK`, which fails if `LOCK` exists). It is
//! removed when the node is dropped after its last user. A `LOCK` whose owner is provably gone (another boot,
//! or no live process with that pid and start time) is stale and taken over with a warning, so a node killed
//! with `kill -9` restarts without help. Without `/proc`, or if `LOCK` cannot be parsed, the owner is assumed
//! alive and the node refuses to start: remove `LOCK` by hand once no safekeeper runs on the directory.
//! Known gap: two nodes starting at the same instant over the *same stale* lock may both take it over.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{io_error, NodeError, LOCK_FILE_NAME};

/// Who owns a lock file: a process named by its pid, start time and boot.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Owner {
    pid: u32,
    /// Clock ticks after boot at which the process started (`/proc/<pid>/stat` field 22), if known.
    start_ticks: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id`, if known.
    boot_id: Option<String>,
}

impl Owner {
    fn current() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start_ticks: process_start_ticks(pid),
            boot_id: boot_id(),
        }
    }

    fn encode(&self) -> String {
        let mut out = format!("pid {}\n", self.pid);
        if let Some(ticks) = self.start_ticks {
            out.push_str(&format!("start_ticks {ticks}\n"));
        }
        if let Some(boot) = &self.boot_id {
            out.push_str(&format!("boot_id {boot}\n"));
        }
        out
    }

    fn decode(text: &str) -> Option<Owner> {
        let mut pid = None;
        let mut start_ticks = None;
        let mut boot_id = None;
        for line in text.lines() {
            let (name, value) = line.split_once(' ')?;
            match name {
                "pid" => pid = Some(value.parse().ok()?),
                "start_ticks" => start_ticks = Some(value.parse().ok()?),
                "boot_id" => boot_id = Some(value.to_string()),
                _ => return None,
            }
        }
        Some(Owner {
            pid: pid?,
            start_ticks,
            boot_id,
        })
    }

    /// Whether this owner is provably gone (otherwise it is assumed alive).
    fn is_gone(&self) -> bool {
        if let (Some(theirs), Some(ours)) = (&self.boot_id, boot_id()) {
            if *theirs != ours {
                return true;
            }
        }
        if !Path::new("/proc/self/stat").exists() {
            return false;
        }
        match process_start_ticks(self.pid) {
            None => !Path::new(&format!("/proc/{}", self.pid)).exists(),
            Some(now) if self.start_ticks.is_some_and(|then| then != now) => true,
            // Killed but not yet reaped by its parent: a zombie holds no file and writes nothing more, so a
            // restart right after a kill -9 need not wait for the reaping.
            Some(_) => matches!(process_state(self.pid), Some('Z' | 'X')),
        }
    }
}

/// Field 3 of `/proc/<pid>/stat`: the process state (`R`, `S`, `D`, `Z` zombie, `X` dead, …).
fn process_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().next()?.chars().next()
}

fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
}

/// Field 22 of `/proc/<pid>/stat`. The second field (the command) is in parentheses and may hold spaces, so
/// fields are counted after the last `)`, where field 3 begins.
fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_command = &stat[stat.rfind(')')? + 1..];
    after_command.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The data directory's lock file; removed on drop.
#[derive(Debug)]
pub(super) struct DirLock {
    path: PathBuf,
}

impl DirLock {
    pub(super) fn acquire(data_dir: &Path) -> Result<DirLock, NodeError> {
        static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = data_dir.join(LOCK_FILE_NAME);
        let me = Owner::current();
        let temp = data_dir.join(format!(
            "{LOCK_FILE_NAME}.{}.{}.tmp",
            me.pid,
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::File::create(&temp)
            .and_then(|mut file| file.write_all(me.encode().as_bytes()))
            .map_err(io_error(&temp))?;
        let result = Self::link(&temp, &path);
        if let Err(error) = fs::remove_file(&temp) {
            tracing::warn!(path = %temp.display(), %error, "could not remove a lock temp file");
        }
        result?;
        Ok(DirLock { path })
    }

    /// Links `temp` to `path` (atomic: `path` appears with its whole content), taking over a stale lock once.
    fn link(temp: &Path, path: &Path) -> Result<(), NodeError> {
        let mut took_over = false;
        loop {
            match fs::hard_link(temp, path) {
                Ok(()) => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(io_error(path)(error)),
            }
            let text = match fs::read_to_string(path) {
                Ok(text) => text,
                // Its owner just removed it: try again.
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(io_error(path)(error)),
            };
            let holder = Owner::decode(&text);
            let stale = holder.as_ref().is_some_and(Owner::is_gone);
            if !stale || took_over {
                return Err(NodeError::Locked {
                    path: path.to_path_buf(),
                    holder: text.trim().replace('\n', ", "),
                });
            }
            tracing::warn!(path = %path.display(), holder = ?holder, "taking over a stale lock file (its owner is gone)");
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(io_error(path)(error)),
            }
            took_over = true;
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        match fs::remove_file(&self.path) {
            Ok(()) => tracing::info!(path = %self.path.display(), "released the data directory lock"),
            Err(error) => tracing::warn!(path = %self.path.display(), %error, "could not remove the lock file"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_round_trips_and_we_are_alive() {
        let me = Owner::current();
        assert_eq!(Owner::decode(&me.encode()), Some(me.clone()));
        assert!(!me.is_gone(), "this process is alive");
        assert_eq!(Owner::decode("garbage"), None);
        assert_eq!(Owner::decode("pid 12\nsurprise 1\n"), None);
    }

    #[test]
    fn a_lock_of_a_gone_process_is_taken_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(LOCK_FILE_NAME);
        let mut gone = Owner::current();
        gone.start_ticks = gone.start_ticks.map(|t| t + 1);
        gone.boot_id = Some("another-boot".into());
        fs::write(&path, gone.encode()).expect("write");
        let lock = DirLock::acquire(dir.path()).expect("stale lock taken over");
        assert!(DirLock::acquire(dir.path()).is_err(), "held by this process now");
        drop(lock);
        assert!(!path.exists(), "removed on drop");
        fs::write(&path, "not a lock file").expect("write");
        assert!(
            matches!(DirLock::acquire(dir.path()), Err(NodeError::Locked { .. })),
            "an unreadable lock is assumed held"
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temp files left: {leftovers:?}");
    }

    /// Issue 13: a restart within a second or two of a kill -9 found the lock held by the killed process,
    /// still a zombie until its parent reaped it.
    #[test]
    fn a_lock_of_a_killed_unreaped_process_is_taken_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        let owner = Owner {
            pid: child.id(),
            start_ticks: process_start_ticks(child.id()),
            boot_id: boot_id(),
        };
        fs::write(dir.path().join(LOCK_FILE_NAME), owner.encode()).expect("write");
        assert!(
            matches!(DirLock::acquire(dir.path()), Err(NodeError::Locked { .. })),
            "a live owner keeps its lock"
        );
        child.kill().expect("kill -9");
        // Not reaped: a zombie until `wait`. Wait for the kernel to make it one.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_state(child.id()) != Some('Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "no zombie: {:?}",
                process_state(child.id())
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let lock = DirLock::acquire(dir.path()).expect("a zombie's lock is taken over");
        drop(lock);
        child.wait().expect("reap");
    }
}
