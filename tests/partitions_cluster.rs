//! Every part of a deployment lost in turn, partitioned and killed, while one workload runs (issue 17 item 5).
//!
//! Each part is a host of its own on one test network (`common::netns`: a network namespace with its own address,
//! made and removed by the test): the metadata PostgreSQL 15 (`meta`), two `cambium api` compute hosts on it
//! (`api1`, `api2`), two `cambium pageserver`s sharing one remote directory (`ps1`, `ps2`), four `cambium
//! safekeeper`s (`sk1`..`sk4`: each timeline on 3 of them, so one can be replaced) and two `cambium proxy`s
//! (`px1`, `px2`). Failure thresholds are short (`--pageserver-dead-after-ms 2000`, `--safekeeper-dead-after-ms
//! 3000`, the host lease as it is: 15 s, fenced after 10 s; `--pg-idle-in-transaction-timeout-ms 10000`, so a
//! transaction a proxy cut off leaves open does not hold the write lock for the default 10 min). The bank
//! workload of `common::bank` runs on one database for the whole test, half its clients through each proxy.
//!
//! Then, in turn, for each part that matters to that database (a safekeeper of its set, the pageserver holding
//! it, the compute host serving it, a proxy, the metadata server): a partition (the host cut from every other
//! host, silently: frames to nowhere) long enough for the system to react (the safekeeper replaced in the set,
//! the database failed over to the other pageserver, taken over by the other compute host, the workload carried
//! by the other proxy, the compute host serving it fenced), then healed; and a kill -9, the reaction, a restart in the
//! same namespace on the same address. After each, the workload must make progress again. One step kills the
//! compute host serving the database and the pageserver holding it at once; meanwhile `/v1` on the surviving
//! API process answers (the database read, a branch of a database placed on it, then a branch of the bank
//! database once taken over, read through the proxy).
//!
//! It proves, beside that progress:
//! - no split-brain writer: a watch connects straight to both compute hosts' PostgreSQL ports every second and
//!   never finds both serving the database; the host cut off fenced itself before the other took over;
//! - every acknowledged transfer is in the final state, no half transfer, the total conserved (`bank::check`);
//! - at the end the database is served by exactly one host, the one the metadata places it on.
//!
//! A timeline of the phases (what was cut or killed, how long until the system reacted and until transfers
//! were acknowledged again) is printed; run with `--nocapture` to see it. Skipped, saying why, where network
//! namespaces cannot be made or PostgreSQL 15 is absent.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::api::{connect, password_of, request, with_password};
use common::bank::{self, Bank};
use common::netns::Net;
use common::postgres::TestPostgres;
use common::{Logs, Process};
use serde_json::Value;

/// The PostgreSQL port of each compute host (its namespace has nothing else on it).
const PG_PORT: u16 = 5433;
/// What the API processes are told: a pageserver silent this long is lost.
const PAGESERVER_DEAD_AFTER_MS: &str = "2000";
/// What the API processes are told: a safekeeper silent this long is dead.
const SAFEKEEPER_DEAD_AFTER_MS: &str = "3000";
/// What the API processes are told: a transaction idle this long is rolled back (see its use).
const IDLE_IN_TRANSACTION_TIMEOUT_MS: &str = "10000";
/// A compute host cut off or killed: the other takes its databases over within this (the host lease, 15 s, plus
/// a lease period, 3 s, plus the slack of a loaded machine).
const TAKEOVER_BOUND: Duration = Duration::from_secs(40);
/// A compute host cut from the metadata stops serving within this (it fences after 10 s unrenewed).
const FENCE_BOUND: Duration = Duration::from_secs(25);
/// A lost pageserver's databases are on the other within this (2 s dead, then the attach).
const FAILOVER_BOUND: Duration = Duration::from_secs(40);
/// A dead safekeeper is out of the database's set within this (3 s dead, a fence, the new set recorded). A silent
/// one takes longest: each reconciler round waits out the probe's bound (3 s) on it, so it is judged dead a round
/// or two after it went silent (~7 s seen; 31 to 41 s when the probe and each copy's check waited out the
/// backend's 10 s request bound).
const REPLACEMENT_BOUND: Duration = Duration::from_secs(60);
/// How long a proxy stays cut off or dead, at least.
const PROXY_LOSS: Duration = Duration::from_secs(5);
/// A `/v1` call on the surviving API process answers within this.
const CALL_BOUND: Duration = Duration::from_secs(30);
/// The period of the split-brain watch.
const WATCH_PERIOD: Duration = Duration::from_secs(1);

/// Fields drop in order: the processes, then the metadata server, then the network, then the files.
struct Deployment {
    apis: Vec<Process>,
    proxies: Vec<Process>,
    pageservers: Vec<Process>,
    safekeepers: Vec<Process>,
    server: TestPostgres,
    url: String,
    net: Net,
    key: String,
    _logs: Logs,
    root: tempfile::TempDir,
}

/// Where a database is, from the metadata (indexes into the deployment's processes).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    /// The compute host it is placed on (`None`: on none, or on a host that is neither API process).
    host: Option<usize>,
    pageserver: usize,
    /// The safekeepers of its default branch's timeline.
    safekeepers: Vec<usize>,
    tenant: String,
}

fn env(level: &str) -> Vec<(String, String)> {
    vec![("RUST_LOG".to_owned(), level.to_owned())]
}

impl Deployment {
    /// Everything started; `None` (having said why) where namespaces or PostgreSQL are missing.
    async fn start() -> Option<Deployment> {
        let names = [
            "meta", "api1", "api2", "ps1", "ps2", "sk1", "sk2", "sk3", "sk4", "px1", "px2",
        ];
        let net = match Net::create(&names) {
            Ok(net) => net,
            Err(reason) => {
                common::skipped(&format!("network namespaces cannot be made here: {reason}"));
                return None;
            }
        };
        let meta = net.host("meta").clone();
        let server = TestPostgres::start_in_netns(&meta.netns, &meta.ip)?;
        let url = server.create_database("metadata");
        let root = tempfile::tempdir().expect("tempdir");
        let log = |name: &str| root.path().join(format!("{name}.log"));
        let start = |name: &str, args: Vec<String>, level: &str| {
            let host = net.host(name);
            Process::start_in_with_env(&host.netns, &host.ip, args, &log(name), env(level))
        };
        let safekeepers: Vec<Process> = (1..=4u32)
            .map(|id| {
                let mut args = Process::safekeeper_args(id, &root.path().join(format!("sk{id}")));
                // A replacement pulls onto a safekeeper that started with the test.
                args.extend(["--pull-quiet-period-ms".into(), "0".into()]);
                start(&format!("sk{id}"), args, "warn")
            })
            .collect();
        let safekeeper_list = safekeepers
            .iter()
            .map(|s| s.address.clone())
            .collect::<Vec<_>>()
            .join(",");
        let remote = format!("file://{}", root.path().join("remote").display());
        let pageservers: Vec<Process> = (1..=2)
            .map(|n| {
                let args = vec![
                    "pageserver".into(),
                    "--data-dir".into(),
                    root.path().join(format!("ps{n}")).display().to_string(),
                    "--safekeepers".into(),
                    safekeeper_list.clone(),
                    "--remote".into(),
                    remote.clone(),
                    "--id".into(),
                    format!("ps{n}"),
                    "--checkpoint-timeout-ms".into(),
                    common::faults::CHECKPOINT_TIMEOUT_MS.into(),
                ];
                start(&format!("ps{n}"), args, "info")
            })
            .collect();
        let pageserver_list = pageservers
            .iter()
            .map(|p| p.address.clone())
            .collect::<Vec<_>>()
            .join(",");
        let proxies: Vec<Process> = (1..=2)
            .map(|n| {
                let args = vec![
                    "proxy".into(),
                    "--metadata".into(),
                    url.clone(),
                    "--data-dir".into(),
                    root.path().join(format!("px{n}")).display().to_string(),
                    "--failover-wait-ms".into(),
                    "20000".into(),
                ];
                start(&format!("px{n}"), args, "info")
            })
            .collect();
        let apis: Vec<Process> = (1..=2)
            .map(|n| {
                let name = format!("api{n}");
                let ip = net.host(&name).ip.clone();
                let args = vec![
                    "api".into(),
                    "--data-dir".into(),
                    root.path().join(&name).display().to_string(),
                    "--pg-listen".into(),
                    format!("{ip}:{PG_PORT}"),
                    "--pageservers".into(),
                    pageserver_list.clone(),
                    "--safekeepers".into(),
                    safekeeper_list.clone(),
                    "--metadata".into(),
                    url.clone(),
                    "--connection-address".into(),
                    proxies[0].address.clone(),
                    "--reconcile-period-ms".into(),
                    "500".into(),
                    "--safekeeper-dead-after-ms".into(),
                    SAFEKEEPER_DEAD_AFTER_MS.into(),
                    "--pageserver-dead-after-ms".into(),
                    PAGESERVER_DEAD_AFTER_MS.into(),
                    // A proxy cut off mid-transaction leaves its session's transaction open on the host, holding
                    // the database's one write lock until this timeout ends it (nothing else tells the host: no
                    // TCP keepalive on compute sessions); at the default (10 min) every other writer waits that long.
                    "--pg-idle-in-transaction-timeout-ms".into(),
                    IDLE_IN_TRANSACTION_TIMEOUT_MS.into(),
                ];
                start(&name, args, "info")
            })
            .collect();
        let key = std::fs::read_to_string(root.path().join("api1").join("api_key"))
            .expect("the admin key")
            .trim()
            .to_owned();
        let logs = names[1..].iter().map(|name| log(name)).collect();
        Some(Deployment {
            apis,
            proxies,
            pageservers,
            safekeepers,
            server,
            url,
            net,
            key,
            _logs: Logs(logs),
            root,
        })
    }

    /// One query on the metadata, on a fresh connection (the server may have been killed since the last),
    /// bounded.
    async fn metadata(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, String> {
        let attempt = async {
            let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            client.query(sql, params).await.map_err(|e| e.to_string())
        };
        tokio::time::timeout(Duration::from_secs(5), attempt)
            .await
            .unwrap_or_else(|_| Err("no answer in 5 s".to_owned()))
    }

    /// Where database `id` is.
    async fn placement(&self, id: &str) -> Result<Placement, String> {
        let rows = self
            .metadata(
                "SELECT d.tenant_id, d.pageserver, h.api_url, s.safekeepers FROM databases d
                 LEFT JOIN compute_hosts h ON h.id = d.compute_host
                 JOIN branches b ON b.id = d.default_branch_id
                 LEFT JOIN timeline_safekeepers s ON s.timeline_id = b.timeline_id
                 WHERE d.id = $1",
                &[&id],
            )
            .await?;
        let row = rows.first().ok_or_else(|| format!("no database {id}"))?;
        let api_url: Option<String> = row.get(2);
        let host = api_url.and_then(|url| {
            self.apis
                .iter()
                .position(|api| url == format!("http://{}", api.address))
        });
        let pageserver = match row.get::<_, Option<String>>(1) {
            None => 0,
            Some(address) => self
                .pageservers
                .iter()
                .position(|p| p.address == address)
                .ok_or_else(|| format!("pageserver {address} is neither"))?,
        };
        let safekeepers = match row.get::<_, Option<String>>(3) {
            None => vec![0, 1, 2],
            Some(set) => {
                let addresses: Vec<String> = serde_json::from_str(&set).map_err(|e| format!("{set}: {e}"))?;
                addresses
                    .iter()
                    .map(|address| {
                        self.safekeepers
                            .iter()
                            .position(|s| s.address == *address)
                            .ok_or_else(|| format!("safekeeper {address} is none of the four"))
                    })
                    .collect::<Result<_, _>>()?
            }
        };
        Ok(Placement {
            host,
            pageserver,
            safekeepers,
            tenant: row.get(0),
        })
    }

    /// Polls database `id`'s placement until `done` holds; panics naming `what` after `bound`. The placement and
    /// how long it took from `since`.
    async fn wait_placement(
        &self,
        id: &str,
        what: &str,
        since: Instant,
        bound: Duration,
        done: impl Fn(&Placement) -> bool,
    ) -> (Placement, Duration) {
        let mut last = Err("not read yet".to_owned());
        loop {
            if let Ok(placement) = &last {
                if done(placement) {
                    return (placement.clone(), since.elapsed());
                }
            }
            assert!(
                since.elapsed() < bound,
                "{what}: not within {bound:?}; the placement: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            last = self.placement(id).await;
        }
    }

    async fn call(&self, via: usize, method: &str, path: &str, body: Option<&str>) -> common::api::Reply {
        let call = request(&self.apis[via].address, method, path, Some(&self.key), body, &[]);
        tokio::time::timeout(CALL_BOUND, call)
            .await
            .unwrap_or_else(|_| panic!("{method} {path} on api{}: no answer in {CALL_BOUND:?}", via + 1))
    }

    async fn wait_operation(&self, via: usize, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let reply = self
                .call(via, "GET", &format!("/v1/operations/{id}?wait=5s"), None)
                .await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let operation = reply.json()["operation"].clone();
            if operation["status"] != "running" {
                return operation;
            }
            assert!(Instant::now() < deadline, "operation {id} still running: {operation}");
        }
    }

    /// A database made through API process `via` (placed where creations go: the host with fewer): its id and
    /// its connection string (naming the first proxy, with the password). A 503 (a process just back from a
    /// partition whose channels to the pageservers fail once before they reconnect) is tried again, for
    /// [`CALL_BOUND`] at most, and said.
    async fn create_database(&self, via: usize, project: &str, name: &str) -> (String, String) {
        let started = Instant::now();
        let mut refusals = Vec::new();
        let reply = loop {
            let reply = self
                .call(
                    via,
                    "POST",
                    &format!("/v1/projects/{project}/databases"),
                    Some(&format!(r#"{{"name":"{name}"}}"#)),
                )
                .await;
            if reply.status != 503 {
                break reply;
            }
            refusals.push(reply.body);
            assert!(
                started.elapsed() < CALL_BOUND,
                "creating {name} through api{}: 503 for {CALL_BOUND:?}: {refusals:?}",
                via + 1
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        if !refusals.is_empty() {
            eprintln!(
                "creating {name} through api{}: {} refusals (503) in {:.1} s before it was accepted; the first: {}",
                via + 1,
                refusals.len(),
                started.elapsed().as_secs_f64(),
                refusals[0]
            );
        }
        assert_eq!(reply.status, 201, "{}", reply.body);
        let created = reply.json();
        let ended = self
            .wait_operation(via, created["operation"]["id"].as_str().expect("operation"))
            .await;
        assert_eq!(ended["status"], "finished", "{ended}");
        (
            created["database"]["id"].as_str().expect("id").to_owned(),
            created["database"]["connection_uri"].as_str().expect("uri").to_owned(),
        )
    }

    /// Waits (bounded) until API process `host` is a live compute host in the registry again (after a partition
    /// its row is dropped with its databases, and it registers anew at its next heartbeat); how long it took.
    async fn wait_registered(&self, host: usize) -> Duration {
        let started = Instant::now();
        let api_url = format!("http://{}", self.apis[host].address);
        loop {
            let now = format!("{:.3}", jiff::Timestamp::now());
            let live = self
                .metadata(
                    "SELECT 1 FROM compute_hosts WHERE api_url = $1 AND lease_expires_at >= $2",
                    &[&api_url, &now],
                )
                .await
                .is_ok_and(|rows| !rows.is_empty());
            if live {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < TAKEOVER_BOUND,
                "api{} is not a live compute host again after {TAKEOVER_BOUND:?}",
                host + 1
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits (bounded) until API process `host` has renewed its lease twice since the call: the second renewal's
    /// call started after the first ended, so after the call began. (A host counts its lease from the start of
    /// the call that renewed it; one that started during a partition and got through after the heal writes a
    /// fresh lease in the metadata while the host's own count is old.)
    async fn wait_renewed(&self, host: usize) {
        let started = Instant::now();
        let api_url = format!("http://{}", self.apis[host].address);
        let mut seen: Vec<String> = Vec::new();
        while seen.len() < 3 {
            let lease = self
                .metadata(
                    "SELECT lease_expires_at FROM compute_hosts WHERE api_url = $1",
                    &[&api_url],
                )
                .await
                .ok()
                .and_then(|rows| rows.first().map(|row| row.get::<_, String>(0)));
            if let Some(lease) = lease {
                if seen.last() != Some(&lease) {
                    seen.push(lease);
                }
            }
            assert!(
                started.elapsed() < TAKEOVER_BOUND,
                "api{} did not renew its lease twice within {TAKEOVER_BOUND:?}: {seen:?}",
                host + 1
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `uri` (naming the first proxy) straight at compute host `host`'s PostgreSQL port, bypassing the proxies.
    fn direct(&self, uri: &str, host: usize) -> String {
        let ip = &self.net.host(&format!("api{}", host + 1)).ip;
        uri.replace(&self.proxies[0].address, &format!("{ip}:{PG_PORT}"))
    }

    /// `uri` (naming the first proxy) through proxy `index`.
    fn through(&self, uri: &str, index: usize) -> String {
        uri.replace(&self.proxies[0].address, &self.proxies[index].address)
    }

    /// Who owns tenant `tenant`'s remote copy (`ps1`, `ps2`), if anyone yet.
    fn remote_owner(&self, tenant: &str) -> Option<String> {
        let path = self
            .root
            .path()
            .join("remote")
            .join("tenants")
            .join(tenant)
            .join("owner");
        std::fs::read_to_string(path).ok().map(|owner| owner.trim().to_owned())
    }
}

/// Whether a new session on `uri` answers `SELECT 1` (within 5 s); the error text if not.
async fn serves(uri: &str) -> Result<(), String> {
    let attempt = async {
        let client = connect(uri).await.map_err(|e| bank::error_text(&e))?;
        client
            .simple_query("SELECT 1")
            .await
            .map(|_| ())
            .map_err(|e| bank::error_text(&e))
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .unwrap_or_else(|_| Err("no answer in 5 s".to_owned()))
}

/// Connects straight to both compute hosts every [`WATCH_PERIOD`] and records each moment both served the
/// database: a split-brain writer.
struct Watch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<WatchReport>,
}

#[derive(Debug, Default)]
struct WatchReport {
    rounds: u64,
    /// Rounds in which each host served it.
    served: [u64; 2],
    /// When (since the watch began) both served it.
    both: Vec<Duration>,
}

impl Watch {
    fn start(direct: [String; 2]) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let began = Instant::now();
                let mut report = WatchReport::default();
                while !stop.load(Ordering::SeqCst) {
                    let (first, second) = tokio::join!(serves(&direct[0]), serves(&direct[1]));
                    report.rounds += 1;
                    for (index, answer) in [&first, &second].into_iter().enumerate() {
                        if answer.is_ok() {
                            report.served[index] += 1;
                        }
                    }
                    if first.is_ok() && second.is_ok() {
                        eprintln!(
                            "SPLIT BRAIN: both compute hosts served the database {:?} after the watch began",
                            began.elapsed()
                        );
                        report.both.push(began.elapsed());
                    }
                    tokio::time::sleep(WATCH_PERIOD).await;
                }
                report
            })
        };
        Watch { stop, task }
    }

    async fn stop(self) -> WatchReport {
        self.stop.store(true, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the watch stops")
            .expect("the watch's task")
    }
}

/// One phase's numbers, for the timeline printed at the end.
struct Phase {
    part: String,
    fault: &'static str,
    /// What the system did, and how long after the fault.
    reaction: String,
    /// How long after the fault transfers were acknowledged again (after the heal or restart).
    resumed: Duration,
    /// How long the part was out.
    out_for: Duration,
}

struct Timeline {
    began: Instant,
    phases: Vec<Phase>,
}

impl Timeline {
    fn record(&mut self, phase: Phase) {
        eprintln!(
            "[{:6.1} s] {} {}: {}; out {:.1} s; transfers acknowledged again {:.1} s after the fault",
            self.began.elapsed().as_secs_f64(),
            phase.part,
            phase.fault,
            phase.reaction,
            phase.out_for.as_secs_f64(),
            phase.resumed.as_secs_f64()
        );
        self.phases.push(phase);
    }

    fn print(&self) {
        eprintln!("timeline ({:.1} s in all):", self.began.elapsed().as_secs_f64());
        eprintln!(
            "  {:<22} {:<12} {:>8} {:>10}  reaction",
            "part", "fault", "out (s)", "resumed (s)"
        );
        for phase in &self.phases {
            eprintln!(
                "  {:<22} {:<12} {:>8.1} {:>10.1}  {}",
                phase.part,
                phase.fault,
                phase.out_for.as_secs_f64(),
                phase.resumed.as_secs_f64(),
                phase.reaction
            );
        }
    }
}

fn name_of(kind: &str, index: usize) -> String {
    format!("{kind}{}", index + 1)
}

/// Transfers each phase waits for after the part is back.
const AFTER: u64 = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_part_partitioned_and_killed_in_turn_loses_nothing_and_never_splits() {
    let began = Instant::now();
    let Some(mut d) = Deployment::start().await else {
        return;
    };
    let mut timeline = Timeline {
        began,
        phases: Vec::new(),
    };
    eprintln!("[{:6.1} s] deployment started", began.elapsed().as_secs_f64());
    let project = d.call(0, "POST", "/v1/projects", Some(r#"{"name":"p"}"#)).await;
    assert_eq!(project.status, 201, "{}", project.body);
    let project = project.json()["project"]["id"].as_str().expect("id").to_owned();
    let (bank_db, bank_uri) = d.create_database(0, &project, "bank").await;
    let (other_db, _) = d.create_database(0, &project, "other").await;
    let bank_at = d.placement(&bank_db).await.expect("the bank's placement");
    let other_at = d.placement(&other_db).await.expect("the other's placement");
    assert!(
        bank_at.host.is_some() && other_at.host.is_some() && bank_at.host != other_at.host,
        "one database on each host: {bank_at:?} {other_at:?}"
    );
    let password = password_of(&bank_uri).expect("a password");
    let uris = [d.through(&bank_uri, 0), d.through(&bank_uri, 1)];
    let seed = bank::seed();
    let workload = Bank::start_through(&uris, seed).await;
    // Clients 0 and 2 go through the first proxy, 1 and 3 through the second.
    let through = [[0u64, 2], [1, 3]];
    workload.progress(20, "at the start").await;
    let watch = Watch::start([d.direct(&bank_uri, 0), d.direct(&bank_uri, 1)]);
    eprintln!(
        "[{:6.1} s] workload running on {bank_db}: {bank_at:?}",
        began.elapsed().as_secs_f64()
    );

    // 1. A safekeeper of the database's set, cut off: replaced in the set by the fourth.
    let at = d.placement(&bank_db).await.expect("placement");
    let victim = at.safekeepers[0];
    let name = name_of("sk", victim);
    d.net.isolate(&name);
    let cut = Instant::now();
    let (_, replaced) = d
        .wait_placement(
            &bank_db,
            &format!("{name} cut off: replaced in the set"),
            cut,
            REPLACEMENT_BOUND,
            |p| !p.safekeepers.contains(&victim),
        )
        .await;
    workload.progress(AFTER, &format!("with {name} cut off")).await;
    d.net.rejoin(&name);
    let out_for = cut.elapsed();
    workload.progress(AFTER, &format!("after {name} rejoined")).await;
    timeline.record(Phase {
        part: format!("{name} (set member)"),
        fault: "partitioned",
        reaction: format!("replaced in the set after {:.1} s", replaced.as_secs_f64()),
        resumed: cut.elapsed(),
        out_for,
    });

    // ... and a member of the new set killed: replaced (by the one back from its partition), restarted.
    let at = d.placement(&bank_db).await.expect("placement");
    let victim = at.safekeepers[0];
    let name = name_of("sk", victim);
    d.safekeepers[victim].kill9();
    let killed = Instant::now();
    let (_, replaced) = d
        .wait_placement(
            &bank_db,
            &format!("{name} killed: replaced in the set"),
            killed,
            REPLACEMENT_BOUND,
            |p| !p.safekeepers.contains(&victim),
        )
        .await;
    workload.progress(AFTER, &format!("with {name} dead")).await;
    d.safekeepers[victim].restart();
    let out_for = killed.elapsed();
    workload.progress(AFTER, &format!("after {name} restarted")).await;
    timeline.record(Phase {
        part: format!("{name} (set member)"),
        fault: "killed",
        reaction: format!("replaced in the set after {:.1} s", replaced.as_secs_f64()),
        resumed: killed.elapsed(),
        out_for,
    });

    // 2. The pageserver holding the database, cut off: failed over to the other.
    let at = d.placement(&bank_db).await.expect("placement");
    let deadline = Instant::now() + Duration::from_secs(20);
    while d.remote_owner(&at.tenant) != Some(name_of("ps", at.pageserver)) {
        assert!(
            Instant::now() < deadline,
            "the remote copy is never marked by its pageserver"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let victim = at.pageserver;
    let name = name_of("ps", victim);
    d.net.isolate(&name);
    let cut = Instant::now();
    let (_, failed_over) = d
        .wait_placement(
            &bank_db,
            &format!("{name} cut off: failed over"),
            cut,
            FAILOVER_BOUND,
            |p| p.pageserver != victim,
        )
        .await;
    workload.progress(AFTER, &format!("with {name} cut off")).await;
    d.net.rejoin(&name);
    let out_for = cut.elapsed();
    workload.progress(AFTER, &format!("after {name} rejoined")).await;
    timeline.record(Phase {
        part: format!("{name} (holder)"),
        fault: "partitioned",
        reaction: format!("failed over after {:.1} s", failed_over.as_secs_f64()),
        resumed: cut.elapsed(),
        out_for,
    });

    // ... and the one holding it now killed: failed over back, restarted.
    let at = d.placement(&bank_db).await.expect("placement");
    let victim = at.pageserver;
    let name = name_of("ps", victim);
    d.pageservers[victim].kill9();
    let killed = Instant::now();
    let (_, failed_over) = d
        .wait_placement(
            &bank_db,
            &format!("{name} killed: failed over"),
            killed,
            FAILOVER_BOUND,
            |p| p.pageserver != victim,
        )
        .await;
    workload.progress(AFTER, &format!("with {name} dead")).await;
    d.pageservers[victim].restart();
    let out_for = killed.elapsed();
    workload.progress(AFTER, &format!("after {name} restarted")).await;
    timeline.record(Phase {
        part: format!("{name} (holder)"),
        fault: "killed",
        reaction: format!("failed over after {:.1} s", failed_over.as_secs_f64()),
        resumed: killed.elapsed(),
        out_for,
    });

    // 3. The compute host serving the database, cut off: it fences itself, then the other takes over.
    let at = d.placement(&bank_db).await.expect("placement");
    let victim = at.host.expect("placed on an API process");
    let name = name_of("api", victim);
    let direct = d.direct(&bank_uri, victim);
    serves(&direct).await.expect("the host serves its database");
    d.net.isolate(&name);
    let cut = Instant::now();
    let mut fenced_after = None;
    let taken_over = loop {
        if fenced_after.is_none() {
            if let Err(error) = serves(&direct).await {
                if error.contains("lease") || error.contains("another compute host") {
                    fenced_after = Some(cut.elapsed());
                }
            }
        }
        if let Ok(placement) = d.placement(&bank_db).await {
            if placement.host == Some(1 - victim) {
                break cut.elapsed();
            }
        }
        assert!(
            cut.elapsed() < TAKEOVER_BOUND,
            "{name} cut off: the other host did not take {bank_db} over within {TAKEOVER_BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let fenced_after = fenced_after
        .unwrap_or_else(|| panic!("{name} still served {bank_db} when the other took it over ({taken_over:?})"));
    assert!(fenced_after < taken_over, "{fenced_after:?} {taken_over:?}");
    // Healed at once: sessions relayed to the host cut off hang (silence) until the heal lets its refusal through,
    // or the client's own statement timeout.
    d.net.rejoin(&name);
    let out_for = cut.elapsed();
    workload.progress(AFTER, &format!("after {name} rejoined")).await;
    let resumed = cut.elapsed();
    d.wait_registered(victim).await;
    let registered = cut.elapsed();
    assert!(
        serves(&direct).await.is_err(),
        "{name} serves {bank_db} again after the partition"
    );
    timeline.record(Phase {
        part: format!("{name} (serving)"),
        fault: "partitioned",
        reaction: format!(
            "fenced itself after {:.1} s, taken over after {:.1} s; back as a new, empty host by {:.1} s",
            fenced_after.as_secs_f64(),
            taken_over.as_secs_f64(),
            registered.as_secs_f64()
        ),
        resumed,
        out_for,
    });

    // ... and the host serving it now killed: the one back from its partition takes both databases over; the
    //     killed one restarted on its addresses is a new, empty host.
    let at = d.placement(&bank_db).await.expect("placement");
    let victim = at.host.expect("placed on an API process");
    let name = name_of("api", victim);
    d.apis[victim].kill9();
    let killed = Instant::now();
    let (_, taken_over) = d
        .wait_placement(
            &bank_db,
            &format!("{name} killed: taken over"),
            killed,
            TAKEOVER_BOUND,
            |p| p.host == Some(1 - victim),
        )
        .await;
    // Every database off it before its restart (one still placed on it would be its again at once).
    d.wait_placement(
        &other_db,
        &format!("{name} killed: the other database taken over"),
        killed,
        TAKEOVER_BOUND,
        |p| p.host == Some(1 - victim),
    )
    .await;
    d.apis[victim].restart();
    let out_for = killed.elapsed();
    workload.progress(AFTER, &format!("after {name} restarted")).await;
    timeline.record(Phase {
        part: format!("{name} (serving)"),
        fault: "killed",
        reaction: format!("taken over after {:.1} s", taken_over.as_secs_f64()),
        resumed: killed.elapsed(),
        out_for,
    });

    // 4. The compute host serving the database and the pageserver holding it, killed at once. A database made
    //    now goes to the other host (it has fewer): `/v1` on that surviving process serves throughout.
    let (side_db, _) = d.create_database(0, &project, "side").await;
    let at = d.placement(&bank_db).await.expect("placement");
    let (host, pageserver) = (at.host.expect("placed"), at.pageserver);
    let survivor = 1 - host;
    let side_at = d.placement(&side_db).await.expect("placement");
    assert_eq!(
        side_at.host,
        Some(survivor),
        "the new database is on the host with fewer"
    );
    let (api_name, ps_name) = (name_of("api", host), name_of("ps", pageserver));
    d.apis[host].kill9();
    d.pageservers[pageserver].kill9();
    let killed = Instant::now();
    let reply = d.call(survivor, "GET", &format!("/v1/databases/{bank_db}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let read_after = killed.elapsed();
    // A branch of the database placed on the survivor (its pageserver may be the lost one: then once failed over).
    let branched = loop {
        let reply = d
            .call(
                survivor,
                "POST",
                &format!("/v1/databases/{side_db}/branches"),
                Some(r#"{"name":"during_the_loss"}"#),
            )
            .await;
        if reply.status == 201 {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < FAILOVER_BOUND,
            "a branch of {side_db} through the survivor: {} {}",
            reply.status,
            reply.body
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let (_, taken_over) = d
        .wait_placement(
            &bank_db,
            &format!("{api_name} and {ps_name} killed: taken over and failed over"),
            killed,
            TAKEOVER_BOUND,
            |p| p.host == Some(survivor) && p.pageserver != pageserver,
        )
        .await;
    // The bank database, now on the survivor: a branch of it, served through the proxy.
    let branch_requested_at = Instant::now();
    let reply = d
        .call(
            survivor,
            "POST",
            &format!("/v1/databases/{bank_db}/branches"),
            Some(r#"{"name":"after_takeover"}"#),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let branch_uri = with_password(
        reply.json()["branch"]["connection_uri"].as_str().expect("uri"),
        &password,
    );
    let branch_state = bank::read_state(&branch_uri, seed, "the branch made during the loss").await;
    let branch_requested = killed.elapsed();
    workload
        .progress(AFTER, &format!("with {api_name} and {ps_name} dead"))
        .await;
    d.apis[host].restart();
    d.pageservers[pageserver].restart();
    let out_for = killed.elapsed();
    workload
        .progress(AFTER, &format!("after {api_name} and {ps_name} restarted"))
        .await;
    timeline.record(Phase {
        part: format!("{api_name} + {ps_name}"),
        fault: "killed",
        reaction: format!(
            "/v1 on api{}: GET in {:.1} s, a branch of its database in {:.1} s; taken over and failed over after \
             {:.1} s, a branch of the bank database by {:.1} s",
            survivor + 1,
            read_after.as_secs_f64(),
            branched.as_secs_f64(),
            taken_over.as_secs_f64(),
            branch_requested.as_secs_f64()
        ),
        resumed: killed.elapsed(),
        out_for,
    });

    // 5. A proxy cut off, then the other killed: the workload goes on through the other one meanwhile.
    d.net.isolate("px1");
    let cut = Instant::now();
    workload
        .progress_of(&through[1], 5, "through px2 with px1 cut off")
        .await;
    tokio::time::sleep(PROXY_LOSS.saturating_sub(cut.elapsed())).await;
    d.net.rejoin("px1");
    let out_for = cut.elapsed();
    workload
        .progress_of(&through[0], 5, "through px1 after it rejoined")
        .await;
    timeline.record(Phase {
        part: "px1".to_owned(),
        fault: "partitioned",
        reaction: "the clients of px2 went on".to_owned(),
        resumed: cut.elapsed(),
        out_for,
    });
    d.proxies[1].kill9();
    let killed = Instant::now();
    workload.progress_of(&through[0], 5, "through px1 with px2 dead").await;
    tokio::time::sleep(PROXY_LOSS.saturating_sub(killed.elapsed())).await;
    d.proxies[1].restart();
    let out_for = killed.elapsed();
    workload
        .progress_of(&through[1], 5, "through px2 after its restart")
        .await;
    timeline.record(Phase {
        part: "px2".to_owned(),
        fault: "killed",
        reaction: "the clients of px1 went on".to_owned(),
        resumed: killed.elapsed(),
        out_for,
    });

    // 6. The metadata server cut off, long enough that the compute hosts fence themselves; healed, they serve
    //    again. Then killed: the same, and restarted on its port and data directory.
    let host = d.placement(&bank_db).await.expect("placement").host.expect("placed");
    let direct = d.direct(&bank_uri, host);
    for fault in ["partitioned", "killed"] {
        // From a fresh renewal (after the partition, the renewal that lets the host serve again may be one whose
        // call started during it, which the fence counts from): the fence below is then timed from the loss.
        d.wait_renewed(host).await;
        match fault {
            "partitioned" => d.net.isolate("meta"),
            _ => d.server.kill9(),
        }
        let lost = Instant::now();
        let fenced = loop {
            if let Err(error) = serves(&direct).await {
                if error.contains("lease") {
                    break lost.elapsed();
                }
            }
            assert!(
                lost.elapsed() < FENCE_BOUND,
                "meta {fault}: api{} did not fence itself within {FENCE_BOUND:?}",
                host + 1
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        match fault {
            "partitioned" => d.net.rejoin("meta"),
            _ => d.server.restart(),
        }
        let out_for = lost.elapsed();
        workload.progress(AFTER, &format!("after meta {fault} came back")).await;
        timeline.record(Phase {
            part: "meta".to_owned(),
            fault,
            reaction: format!("api{} fenced itself after {:.1} s", host + 1, fenced.as_secs_f64()),
            resumed: lost.elapsed(),
            out_for,
        });
    }

    // The end: the watch found no two writers; exactly one host serves the database, the one it is placed on;
    // every acknowledged transfer is there.
    workload.progress(AFTER, "at the end").await;
    let report = watch.stop().await;
    let attempts = workload.stop().await;
    let at = d.placement(&bank_db).await.expect("placement");
    let host = at.host.expect("placed on an API process");
    serves(&d.direct(&bank_uri, host))
        .await
        .expect("the host it is placed on serves it");
    assert!(
        serves(&d.direct(&bank_uri, 1 - host)).await.is_err(),
        "the other host serves {bank_db} too"
    );
    let acknowledged: HashSet<i64> = attempts
        .iter()
        .filter(|a| matches!(a.outcome, bank::Outcome::Acknowledged))
        .map(|a| a.transfer.id)
        .collect();
    let state = bank::read_state(&uris[0], seed, "at the end").await;
    bank::check(&state, &attempts, &acknowledged, seed, "at the end");
    // The branch made during the loss is a consistent cut of the bank: every transfer acknowledged before it was
    // requested, no half transfer, the total conserved.
    let before_branch: HashSet<i64> = attempts
        .iter()
        .filter(|a| matches!(a.outcome, bank::Outcome::Acknowledged) && a.ended < branch_requested_at)
        .map(|a| a.transfer.id)
        .collect();
    bank::check(
        &branch_state,
        &attempts,
        &before_branch,
        seed,
        "the branch made during the loss",
    );
    let count = |f: fn(&bank::Outcome) -> bool| attempts.iter().filter(|a| f(&a.outcome)).count();
    timeline.print();
    eprintln!(
        "seed {seed:#x}: {} acknowledged, {} unknown, {} not committed; {} ledger rows; the split-brain watch: {} \
         rounds, api1 served in {}, api2 in {}, both in {}",
        count(|o| matches!(o, bank::Outcome::Acknowledged)),
        count(|o| matches!(o, bank::Outcome::Unknown(_))),
        count(|o| matches!(o, bank::Outcome::NotCommitted(_))),
        state.ledger.len(),
        report.rounds,
        report.served[0],
        report.served[1],
        report.both.len()
    );
    assert!(
        report.both.is_empty(),
        "both compute hosts served {bank_db} at {:?} (since the watch began)",
        report.both
    );
}
