//! Disk faults give clear errors, never wrong data, and recover (issue 7), with real processes.
//!
//! The bank workload of `tests/faults.rs` (`common::bank`: four clients, transfers, every acknowledged one
//! checked at the end with the total and `PRAGMA integrity_check`) runs against the deployment of
//! `common::faults` while one disk misbehaves. The storage processes' stderr goes to files, which the tests
//! read: the error must be logged, and no process may panic.
//!
//! - **A safekeeper's disk fills up** (its data directory on a small tmpfs): commits go on with the other two,
//!   the full one logs "No space left on device" and poisons the timeline's store (it takes no more writes, by
//!   design: a failed write or fsync is never retried) but stays up. Space given back (`mount -o remount`), a
//!   restart reopens it from what is durable; it catches up, and then carries the quorum when another one is
//!   killed.
//! - **The pageserver's disk fills up** (its data directory on a small tmpfs, small checkpoint distance so it
//!   flushes often): the flush fails, the timeline is poisoned (it ingests no more WAL, so reads at newer LSNs
//!   wait and fail), the process stays up; commits are safe on the safekeepers. Space given back and the
//!   pageserver restarted (a poisoned timeline is reloaded from durable state), everything acknowledged is
//!   there.
//! - **A layer file is corrupt**: the pageserver killed, bytes flipped in its newest uploaded layer file,
//!   restarted: reads that touch the file fail with an error naming the file (the pageserver does not re-fetch a
//!   corrupt layer from remote storage: ARCHITECTURE.md "Not built yet"). The file deleted locally and the
//!   pageserver restarted, it is fetched again from remote storage on first use and everything is there.
//! - **A safekeeper's WAL segment is corrupt** in the middle, below the commit LSN its control file holds: the
//!   safekeeper refuses that timeline at start (logged as `Corrupt` naming the segment and offset; the file is
//!   left as it was, not cut as if the damage were a torn tail) and serves nothing of it, never the damaged
//!   WAL; commits go on with the other two.
//!
//! The tmpfs tests need `mount` (root): without it they print "SKIPPED: …" and pass.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::bank::{read_state_once, Outcome, Run, ACCOUNTS, INITIAL_BALANCE};
use common::faults::{files_under, pause, Deployment, DeploymentConfig};

/// The first layers reach the remote storage within this long.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// A disk fills up within this long.
const FILL_TIMEOUT: Duration = Duration::from_secs(240);
/// A logged line appears within this long.
const LOG_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a full disk stays full once the error is logged.
const FULL_DURATION: Duration = Duration::from_secs(3);
/// How long the pageserver's disk stays full once the error is logged (its in-memory layers fill meanwhile).
const PAGESERVER_FULL_DURATION: Duration = Duration::from_secs(10);
/// Free space left on a tmpfs beyond what its process holds when the load starts.
const HEADROOM_KIB: u64 = 3 * 1024;
/// The size a tmpfs grows to when space is given back.
const ROOMY_KIB: u64 = 256 * 1024;
/// What the kernel says for ENOSPC.
const NO_SPACE: &str = "No space left on device";

/// A tmpfs mounted on a directory, unmounted on drop.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_kib` on `dir` (created); `Err` with the reason if this machine does not allow it.
    fn mount(dir: &Path, size_kib: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kib}k"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir: dir.to_path_buf() })
    }

    /// Mounts one or prints why the test is skipped.
    fn mount_or_skip(dir: &Path, size_kib: u64, test: &str) -> Option<Tmpfs> {
        match Tmpfs::mount(dir, size_kib) {
            Ok(tmpfs) => Some(tmpfs),
            Err(reason) => {
                common::skipped(&format!("{test}: cannot mount a tmpfs ({reason})"));
                None
            }
        }
    }

    fn resize(&self, size_kib: u64) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size_kib}k")])
            .arg(&self.dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {} to {size_kib} KiB", self.dir.display());
    }

    /// (used, available) KiB.
    fn usage_kib(&self) -> (u64, u64) {
        let output = Command::new("df")
            .args(["-k", "--output=used,avail"])
            .arg(&self.dir)
            .output()
            .expect("run df");
        let text = String::from_utf8_lossy(&output.stdout);
        let numbers: Vec<u64> = text
            .lines()
            .nth(1)
            .unwrap_or_default()
            .split_whitespace()
            .map(|n| n.parse().expect("df prints numbers"))
            .collect();
        assert_eq!(numbers.len(), 2, "df output: {text}");
        (numbers[0], numbers[1])
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // The processes using it are gone by now (declared after it, dropped before); lazily if not.
        let unmounted = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits (bounded) for `needle` in the log at `path`; the log.
async fn wait_for_log(path: &Path, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let log = read_log(path);
        if log.contains(needle) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} not logged in {} within {timeout:?}; the log's end:\n{}",
            path.display(),
            tail(&log)
        );
        pause().await;
    }
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn assert_no_panic(path: &Path) {
    let log = read_log(path);
    assert!(
        !log.contains("panicked"),
        "{} shows a panic:\n{}",
        path.display(),
        tail(&log)
    );
}

/// Files under `dir`, recursively, whose name satisfies `keep`.
fn find_files(dir: &Path, keep: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            found.extend(find_files(&path, keep));
        } else if entry.file_name().to_str().is_some_and(keep) {
            found.push(path);
        }
    }
    found.sort();
    found
}

fn is_layer_name(name: &str) -> bool {
    (name.starts_with("l0_") || name.starts_with("l1_") || name.starts_with("img_")) && !name.contains('.')
}

/// The end LSN of a layer file name `{kind}_{keys}_{lsn_start}-{lsn_end}`.
fn layer_end_lsn(name: &str) -> u64 {
    let lsns = name.rsplit('_').next().expect("a layer name has parts");
    let end = lsns.split('-').nth(1).expect("an LSN range");
    u64::from_str_radix(end, 16).expect("hex LSN")
}

fn file_name(path: &Path) -> String {
    path.file_name().expect("a file").to_string_lossy().into_owned()
}

/// Flips `count` bytes of `path` starting at `offset`.
fn flip_bytes(path: &Path, offset: u64, count: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for corruption");
    let mut bytes = vec![0u8; count as usize];
    file.read_exact_at(&mut bytes, offset).expect("read bytes to flip");
    for byte in &mut bytes {
        *byte ^= 0xFF;
    }
    file.write_all_at(&bytes, offset).expect("write flipped bytes");
    file.sync_all().expect("fsync");
}

/// Asserts the process still runs, or else that it exited with a message in its log; and that it never panicked.
fn assert_alive_or_clean_exit(process: &mut common::Process, log: &Path, what: &str) {
    if let Some(status) = process.exit_status() {
        let text = read_log(log);
        assert!(
            text.contains("ERROR"),
            "{what} exited ({status}) without an error in its log:\n{}",
            tail(&text)
        );
        eprintln!("{what} exited ({status}) after logging: {}", tail(&text));
    }
    assert_no_panic(log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_safekeeper_disk_keeps_commits_going_and_recovers_with_space() {
    let root = tempfile::tempdir().expect("tempdir");
    let mount_dir = root.path().join("sk1_tmpfs");
    let Some(tmpfs) = Tmpfs::mount_or_skip(&mount_dir, HEADROOM_KIB, "full safekeeper disk") else {
        return;
    };
    let started = Instant::now();
    let logs = root.path().join("logs");
    std::fs::create_dir_all(&logs).expect("log dir");
    let mut deployment = Deployment::start_with(DeploymentConfig {
        safekeeper_dirs: [Some(mount_dir.join("data")), None, None],
        log_dir: Some(logs.clone()),
        ..DeploymentConfig::default()
    });
    let log = logs.join("sk1.log");
    let api = deployment.client();
    let run = Run::start(&api, "full safekeeper disk").await;
    // Commits go on while the disk fills: two safekeepers are a majority.
    let deadline = Instant::now() + FILL_TIMEOUT;
    while !read_log(&log).contains(NO_SPACE) {
        assert!(
            Instant::now() < deadline,
            "the safekeeper's disk did not fill within {FILL_TIMEOUT:?}: {:?} KiB used/available",
            tmpfs.usage_kib()
        );
        run.bank.progress(50, "while the safekeeper's disk fills").await;
    }
    let full_at = Instant::now();
    let text = wait_for_log(&log, "poisoned", LOG_TIMEOUT).await;
    eprintln!(
        "full safekeeper disk: full after {:.1} s ({:?} KiB used/available); it logged:\n{}",
        (full_at - started).as_secs_f64(),
        tmpfs.usage_kib(),
        text.lines()
            .filter(|l| l.contains(NO_SPACE))
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
    );
    run.bank.progress(100, "with the safekeeper's disk full").await;
    tokio::time::sleep(FULL_DURATION).await;
    assert_alive_or_clean_exit(&mut deployment.safekeepers[0], &log, "the full safekeeper");

    // Space back. The store is poisoned until reopened (STYLE 18): restart it.
    tmpfs.resize(ROOMY_KIB);
    deployment.safekeepers[0].kill9();
    deployment.safekeepers[0].restart();
    run.bank.progress(100, "after the safekeeper got space back").await;
    // It caught up: the majority is now it and the third one.
    deployment.safekeepers[1].kill9();
    run.bank
        .progress(100, "with the recovered safekeeper in the majority")
        .await;
    deployment.safekeepers[1].restart();
    assert_no_panic(&log);
    run.finish(&api).await;
    drop(deployment);
    drop(tmpfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pageserver_disk_gives_errors_not_wrong_data_and_recovers_with_space() {
    let root = tempfile::tempdir().expect("tempdir");
    let mount_dir = root.path().join("pageserver_tmpfs");
    let Some(tmpfs) = Tmpfs::mount_or_skip(&mount_dir, HEADROOM_KIB, "full pageserver disk") else {
        return;
    };
    let started = Instant::now();
    let logs = root.path().join("logs");
    std::fs::create_dir_all(&logs).expect("log dir");
    let mut deployment = Deployment::start_with(DeploymentConfig {
        pageserver_dir: Some(mount_dir.join("data")),
        pageserver_args: vec!["--checkpoint-distance-bytes".into(), "65536".into()],
        log_dir: Some(logs.clone()),
        ..DeploymentConfig::default()
    });
    let log = logs.join("pageserver.log");
    let api = deployment.client();
    let run = Run::start(&api, "full pageserver disk").await;
    // Fill it: the load goes on until the flushes fail (then reads at newer LSNs stall: no progress asserted).
    let deadline = Instant::now() + FILL_TIMEOUT;
    while !read_log(&log).contains(NO_SPACE) {
        assert!(
            Instant::now() < deadline,
            "the pageserver's disk did not fill within {FILL_TIMEOUT:?}: {:?} KiB used/available; recent \
             errors: {:?}",
            tmpfs.usage_kib(),
            run.bank.recent_errors()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let full_at = Instant::now();
    wait_for_log(&log, "poisoned", LOG_TIMEOUT).await;
    let attempts_when_full = run.bank.attempts().len();
    tokio::time::sleep(PAGESERVER_FULL_DURATION).await;
    let text = read_log(&log);
    eprintln!(
        "full pageserver disk: full after {:.1} s ({:?} KiB used/available); it logged:\n{}\nclients saw: {:?}",
        (full_at - started).as_secs_f64(),
        tmpfs.usage_kib(),
        text.lines()
            .filter(|l| l.contains(NO_SPACE))
            .take(3)
            .collect::<Vec<_>>()
            .join("\n"),
        run.bank.recent_errors()
    );
    let attempts = run.bank.attempts();
    eprintln!(
        "full pageserver disk: {} transfers attempted in the {PAGESERVER_FULL_DURATION:?} it stayed full",
        attempts.len() - attempts_when_full
    );
    // The failures meanwhile say why: the page store (reads wait for WAL the poisoned timeline no longer
    // ingests, then time out naming the LSNs), or the write lock (55P03) for the sessions queued behind a
    // writer whose read waits.
    for attempt in &attempts[attempts_when_full..] {
        if let Outcome::Unknown(error) | Outcome::NotCommitted(error) = &attempt.outcome {
            assert!(
                [
                    "page store unavailable",
                    "no answer within",
                    "could not obtain the write lock"
                ]
                .iter()
                .any(|reason| error.contains(reason)),
                "an unclear error with the pageserver's disk full: {error}"
            );
        }
    }
    assert_alive_or_clean_exit(&mut deployment.pageserver, &log, "the full pageserver");

    // Space back; a poisoned timeline takes writes again only once reloaded: restart the pageserver.
    tmpfs.resize(ROOMY_KIB);
    deployment.pageserver.kill9();
    deployment.pageserver.restart();
    run.bank.progress(100, "after the pageserver got space back").await;
    assert_no_panic(&log);
    run.finish(&api).await;
    drop(deployment);
    drop(tmpfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_layer_file_fails_reads_naming_it_and_is_fetched_again_once_deleted() {
    let root = tempfile::tempdir().expect("tempdir");
    let logs = root.path().join("logs");
    std::fs::create_dir_all(&logs).expect("log dir");
    let mut deployment = Deployment::start_with(DeploymentConfig {
        log_dir: Some(logs.clone()),
        ..DeploymentConfig::default()
    });
    let log = logs.join("pageserver.log");
    let api = deployment.client();
    let run = Run::start(&api, "corrupt layer").await;
    let deadline = Instant::now() + UPLOAD_TIMEOUT;
    while files_under(&deployment.remote_dir) < 3 {
        assert!(Instant::now() < deadline, "nothing uploaded within {UPLOAD_TIMEOUT:?}");
        pause().await;
    }
    run.bank.progress(100, "after the first uploads").await;
    // The newest layer file that is also in the remote storage: reads at the latest LSN descend through it.
    deployment.pageserver.kill9();
    let remote_names: Vec<String> = find_files(&deployment.remote_dir, &is_layer_name)
        .iter()
        .map(|p| file_name(p))
        .collect();
    let victim = find_files(&deployment.pageserver_dir, &is_layer_name)
        .into_iter()
        .filter(|p| remote_names.contains(&file_name(p)))
        .max_by_key(|p| layer_end_lsn(&file_name(p)))
        .expect("an uploaded layer file");
    let victim_name = file_name(&victim);
    let len = std::fs::metadata(&victim).expect("layer size").len();
    // Bytes of the blobs (the middle) and of the footer (checked when the file is first opened).
    flip_bytes(&victim, len / 2, 4);
    flip_bytes(&victim, len - 20, 4);
    deployment.pageserver.restart();

    // Reads that touch it fail, naming it (the clients' transfers, or a fresh session's reads); a read that
    // succeeds (it touched no corrupt byte) is right.
    let deadline = Instant::now() + LOG_TIMEOUT * 2;
    let error = loop {
        let fresh = read_state_once(&run.database.uri).await;
        if let Ok(state) = &fresh {
            assert_eq!(state.integrity, "ok", "a read past the corrupt layer");
            assert_eq!(
                state.balances.iter().sum::<i64>(),
                ACCOUNTS * INITIAL_BALANCE,
                "the total"
            );
        }
        let named = |e: &String| e.contains(&victim_name);
        if let Some(error) = fresh.as_ref().err().filter(|e| named(e)) {
            break error.clone();
        }
        if let Some(error) = run.bank.recent_errors().into_iter().find(named) {
            break error;
        }
        assert!(
            Instant::now() < deadline,
            "no read failed naming {victim_name} within {:?}; a fresh read: {:?}; clients saw: {:?}",
            LOG_TIMEOUT * 2,
            fresh.map(|s| s.ledger.len()),
            run.bank.recent_errors()
        );
        pause().await;
    };
    eprintln!("corrupt layer: a read failed with: {error}");
    wait_for_log(&log, &victim_name, LOG_TIMEOUT).await;
    assert_alive_or_clean_exit(&mut deployment.pageserver, &log, "the pageserver with a corrupt layer");

    // Repair: delete the local copy; the pageserver fetches the layer from the remote storage on first use.
    deployment.pageserver.kill9();
    std::fs::remove_file(&victim).expect("delete the corrupt layer");
    deployment.pageserver.restart();
    run.bank.progress(100, "after the corrupt layer was deleted").await;
    // A read inside the layer's LSN range needs it (reads at the latest LSN may no longer descend that far,
    // and the transfers' working set may all be in the compute's cache): a time-travel session to the layer's
    // last LSN reads every page there, fetching the layer, and is right.
    let inside = layer_end_lsn(&victim_name) - 1;
    // In a URI, the name's `@` and `/` are percent-encoded.
    let (base, query) = run.database.uri.split_once('?').unwrap_or((&run.database.uri, ""));
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    let as_of = format!("{base}%40{:X}%2F{:X}{query}", inside >> 32, inside & 0xFFFF_FFFF);
    let state = read_state_once(&as_of)
        .await
        .expect("a full read inside the layer after the repair");
    assert_eq!(state.integrity, "ok");
    assert_eq!(
        state.balances.iter().sum::<i64>(),
        ACCOUNTS * INITIAL_BALANCE,
        "the total"
    );
    assert!(
        victim.exists(),
        "{victim_name} was fetched again from the remote storage"
    );
    assert_no_panic(&log);
    run.finish(&api).await;
}

/// The commit LSN a safekeeper control file holds (`magic | version | body_len | crc | JSON`).
fn control_commit_lsn(control: &Path) -> u64 {
    let dir = control.parent().expect("a timeline directory");
    let state = safekeeper::filestore::FileControl::load(dir)
        .expect("a readable control file")
        .expect("a control file");
    state.commit_lsn.0
}

/// The offset in `segment` of the body of the frame that holds `offset` (frames: `len u32 | crc u32 | body`).
fn frame_body_at(segment: &[u8], offset: usize) -> (usize, usize) {
    let mut at = 0;
    while at + 8 <= segment.len() {
        let len = u32::from_le_bytes(segment[at..at + 4].try_into().expect("4 bytes")) as usize;
        if at + 8 + len > offset {
            return (at + 8, len);
        }
        at += 8 + len;
    }
    panic!("no frame at {offset} in a segment of {}", segment.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_wal_segment_is_refused_and_commits_go_on() {
    let root = tempfile::tempdir().expect("tempdir");
    let logs = root.path().join("logs");
    std::fs::create_dir_all(&logs).expect("log dir");
    let sk1_dir = root.path().join("sk1");
    let mut deployment = Deployment::start_with(DeploymentConfig {
        safekeeper_dirs: [Some(sk1_dir.clone()), None, None],
        log_dir: Some(logs.clone()),
        ..DeploymentConfig::default()
    });
    let log = logs.join("sk1.log");
    let api = deployment.client();
    let run = Run::start(&api, "corrupt wal").await;
    // Enough WAL that the control file holds a commit LSN well past the start (it is persisted every MiB).
    let deadline = Instant::now() + FILL_TIMEOUT;
    let (control, segment, start, commit) = loop {
        let busiest = find_files(&sk1_dir, &|name| name == "control")
            .into_iter()
            .map(|control| {
                let start = find_files(control.parent().expect("a dir"), &|n| n.ends_with(".seg"))
                    .first()
                    .map(|seg| {
                        (
                            seg.clone(),
                            u64::from_str_radix(&file_name(seg)[..16], 16).expect("hex"),
                        )
                    });
                (control_commit_lsn(&control), control, start)
            })
            .max_by_key(|(commit, ..)| *commit);
        if let Some((commit, control, Some((segment, start)))) = busiest {
            if commit >= start + 1024 * 1024 {
                break (control, segment, start, commit);
            }
        }
        assert!(
            Instant::now() < deadline,
            "not 1 MiB of committed WAL within {FILL_TIMEOUT:?}"
        );
        run.bank.progress(50, "while the WAL grows").await;
    };
    deployment.safekeepers[0].kill9();
    // Re-read: the commit LSN persisted last before the kill.
    let commit = control_commit_lsn(&control).max(commit);
    let bytes = std::fs::read(&segment).expect("read the segment");
    let (body, body_len) = frame_body_at(&bytes, ((commit - start) / 2) as usize);
    assert!(body_len > 0 && body + body_len < bytes.len(), "a frame in the middle");
    flip_bytes(&segment, (body + body_len / 2) as u64, 1);
    eprintln!(
        "corrupt wal: flipped a byte of the frame body at {body} of {} ({} bytes; commit LSN {:#x} at {})",
        file_name(&segment),
        bytes.len(),
        commit,
        commit - start
    );
    deployment.safekeepers[0].restart();

    let text = wait_for_log(&log, "timeline failed to load", LOG_TIMEOUT).await;
    let line = text
        .lines()
        .find(|l| l.contains("timeline failed to load"))
        .expect("the line");
    eprintln!("corrupt wal: the safekeeper logged: {line}");
    assert!(line.contains("corrupt"), "{line}");
    assert!(
        line.contains(&file_name(&segment)),
        "the error names the segment: {line}"
    );
    assert!(line.contains("nothing cut"), "{line}");
    assert_eq!(
        std::fs::read(&segment).expect("read the segment").len(),
        bytes.len(),
        "the valid frames after the damage are kept"
    );
    // Commits go on with the other two.
    run.bank
        .progress(100, "with the corrupt safekeeper refusing the timeline")
        .await;
    assert_alive_or_clean_exit(
        &mut deployment.safekeepers[0],
        &log,
        "the safekeeper with a corrupt segment",
    );
    run.finish(&api).await;
}
