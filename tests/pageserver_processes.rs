//! End to end in real processes: three `cambium safekeeper`s, one `cambium pageserver` following them, and a
//! proposer writing WAL records of page images and deltas.
//!
//! Proves: pages read back over gRPC at every commit LSN equal a model; a branch at a past LSN reads its
//! parent as of then; after `kill -9` of the pageserver in the middle of ingest and a restart, everything reads
//! the same (it re-ingests from its `disk_consistent_lsn`); after a safekeeper is killed, new commits still
//! reach the pageserver (it follows another). With `--remote`: after the pageserver reports a
//! `remote_consistent_lsn`, `kill -9` and a wiped data directory lose nothing: restarted with the same
//! remote, it rebuilds its tenant from there, re-ingests the rest from the safekeepers, and every page at every
//! LSN (on a branch too) reads as before.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::api::free_port;
use common::Process;
use proto::pageserver as ps;
use proto::safekeeper as sk;
use storage::{Key, Lsn, Patch, TenantId, TimelineId, Value, WalRecord, PAGE_SIZE_BYTES};
use walproposer::{WalProposer, WalProposerConfig};

const START: Lsn = Lsn(0x100_0000);
const BLOCKS: u32 = 6;

/// Every page after each commit: end LSN -> block -> page.
#[derive(Default)]
struct Model {
    pages: BTreeMap<u32, Vec<u8>>,
    history: Vec<(Lsn, BTreeMap<u32, Vec<u8>>)>,
}

impl Model {
    /// The next record: an image or a small patch of each of a few blocks.
    fn next_record(&mut self, n: u64) -> WalRecord {
        let mut entries = Vec::new();
        for block in [(n % BLOCKS as u64) as u32, ((n * 7 + 3) % BLOCKS as u64) as u32] {
            if entries.iter().any(|(k, _): &(Key, Value)| k.block() == block) {
                continue;
            }
            let page = self.pages.entry(block).or_insert_with(|| vec![0; PAGE_SIZE_BYTES]);
            let value = if n % 5 == 0 || n < BLOCKS as u64 {
                page.fill((n % 251) as u8);
                Value::Image(Bytes::copy_from_slice(page))
            } else {
                let offset = (n * 37 % 8000) as usize;
                let data = format!("n{n}");
                page[offset..offset + data.len()].copy_from_slice(data.as_bytes());
                Value::Delta(vec![Patch {
                    offset: offset as u16,
                    data: Bytes::from(data),
                }])
            };
            entries.push((Key::page(block), value));
        }
        WalRecord {
            commit_ts_us: n + 1,
            db_size_pages: BLOCKS,
            entries,
        }
    }

    fn committed(&mut self, end: Lsn) {
        self.history.push((end, self.pages.clone()));
    }
}

/// Fields drop in order: the processes are killed before their directories go.
struct Cluster {
    safekeepers: Vec<Process>,
    pageserver: Process,
    tenant: TenantId,
    timeline: TimelineId,
    _root: tempfile::TempDir,
}

impl Cluster {
    /// A cluster whose pageserver serves metrics on `metrics_port`.
    async fn start_with_metrics(metrics_port: u16) -> Cluster {
        Cluster::start_with(move |_| vec!["--metrics-listen".into(), format!("127.0.0.1:{metrics_port}")]).await
    }

    /// Starts the cluster; the pageserver gets the extra arguments `extra(root)` returns.
    async fn start_with(extra: impl FnOnce(&std::path::Path) -> Vec<String>) -> Cluster {
        let root = tempfile::tempdir().expect("tempdir");
        let safekeepers: Vec<Process> = (1..=3)
            .map(|id| Process::safekeeper(id, &root.path().join(format!("sk{id}"))))
            .collect();
        let (tenant, timeline) = (TenantId(0xA), TimelineId(0xB));
        for s in &safekeepers {
            let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address))
                .await
                .expect("connect safekeeper");
            client
                .create_timeline(sk::CreateTimelineRequest {
                    timeline: Some(sk::TimelineRef {
                        tenant_id: tenant.to_string(),
                        timeline_id: timeline.to_string(),
                    }),
                    start_lsn: START.0,
                })
                .await
                .expect("create safekeeper timeline");
        }
        let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
        let mut args: Vec<String> = vec![
            "pageserver".into(),
            "--data-dir".into(),
            root.path().join("pageserver").display().to_string(),
            "--safekeepers".into(),
            addresses.join(","),
        ];
        args.extend(extra(root.path()));
        let pageserver = Process::start(args);
        let cluster = Cluster {
            safekeepers,
            pageserver,
            tenant,
            timeline,
            _root: root,
        };
        let mut management = cluster.management().await;
        management
            .create_tenant(ps::TenantRequest {
                tenant_id: tenant.to_string(),
            })
            .await
            .expect("create tenant");
        management
            .create_timeline(ps::CreateTimelineRequest {
                timeline: Some(cluster.timeline_ref(timeline)),
                ancestor_timeline_id: String::new(),
                ancestor_lsn: 0,
                start_lsn: START.0,
            })
            .await
            .expect("create timeline");
        cluster
    }

    fn timeline_ref(&self, timeline: TimelineId) -> ps::TimelineRef {
        ps::TimelineRef {
            tenant_id: self.tenant.to_string(),
            timeline_id: timeline.to_string(),
        }
    }

    async fn management(&self) -> ps::management_client::ManagementClient<tonic::transport::Channel> {
        ps::management_client::ManagementClient::connect(format!("http://{}", self.pageserver.address))
            .await
            .expect("connect pageserver")
    }

    async fn pages(&self) -> ps::page_service_client::PageServiceClient<tonic::transport::Channel> {
        ps::page_service_client::PageServiceClient::connect(format!("http://{}", self.pageserver.address))
            .await
            .expect("connect pageserver")
    }

    fn proposer(&self) -> WalProposer {
        let addresses = self.safekeepers.iter().map(|s| s.address.clone()).collect();
        let mut config = WalProposerConfig::new(addresses, self.tenant, self.timeline, START);
        config.proposer.request_timeout_ms = 300;
        config.connect_timeout_ms = 300;
        WalProposer::start(config).expect("proposer")
    }

    /// Reads every block at every LSN of the model on `timeline` (up to `upto`) and compares.
    async fn check(&self, timeline: TimelineId, model: &[(Lsn, BTreeMap<u32, Vec<u8>>)], what: &str) {
        let mut client = self.pages().await;
        for (lsn, pages) in model {
            for block in 0..BLOCKS {
                let mut request = tonic::Request::new(ps::GetPageRequest {
                    timeline: Some(self.timeline_ref(timeline)),
                    key: Key::page(block).0,
                    read_lsn: lsn.0,
                    not_modified_since: 0,
                    request_id: 0,
                });
                request.set_timeout(Duration::from_secs(20));
                let page = client
                    .get_page(request)
                    .await
                    .unwrap_or_else(|s| panic!("{what}: block {block} at {lsn}: {s}"));
                let page = page.into_inner().page;
                let expected = pages.get(&block).cloned().unwrap_or_else(|| vec![0; PAGE_SIZE_BYTES]);
                assert!(
                    page[..] == expected[..],
                    "{what}: block {block} at {lsn} differs from the model"
                );
            }
        }
    }
}

async fn write(proposer: &WalProposer, model: &mut Model, from: u64, count: u64) {
    for n in from..from + count {
        let record = model.next_record(n);
        let end = proposer
            .append(record.to_frame().expect("frame"))
            .await
            .expect("commit");
        model.committed(end);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_survive_restarts_branches_and_failover() {
    let metrics_port = free_port();
    let mut cluster = Cluster::start_with_metrics(metrics_port).await;
    let proposer = cluster.proposer();
    proposer.elect().await.expect("elected");
    let mut model = Model::default();
    write(&proposer, &mut model, 0, 40).await;
    cluster
        .check(cluster.timeline, &model.history, "after the first writes")
        .await;
    let metrics = scrape(metrics_port).await;
    let last = model.history.last().expect("written").0;
    for expected in [
        "cambium_pageserver_get_page_seconds_count".to_string(),
        format!(
            "cambium_pageserver_last_record_lsn{{tenant_id=\"{}\",timeline_id=\"{}\"}} {}",
            cluster.tenant, cluster.timeline, last.0
        ),
        "cambium_pageserver_layers_visited_total".to_string(),
        "cambium_pageserver_upload_queue_length 0".to_string(),
        "cambium_pageserver_ingest_lag_bytes".to_string(),
    ] {
        assert!(metrics.contains(&expected), "/metrics lacks {expected:?}:\n{metrics}");
    }

    // A branch at a past LSN reads its parent as of then.
    let (branch_lsn, branch_pages) = model.history[15].clone();
    let branch = TimelineId(0xC);
    cluster
        .management()
        .await
        .create_timeline(ps::CreateTimelineRequest {
            timeline: Some(cluster.timeline_ref(branch)),
            ancestor_timeline_id: cluster.timeline.to_string(),
            ancestor_lsn: branch_lsn.0,
            start_lsn: 0,
        })
        .await
        .expect("branch");
    cluster
        .check(branch, &[(branch_lsn, branch_pages.clone())], "on the branch")
        .await;

    // kill -9 the pageserver while it ingests, then restart it: it re-ingests from disk_consistent_lsn.
    let writer = async {
        write(&proposer, &mut model, 40, 40).await;
        model
    };
    let killer = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cluster.pageserver.kill9();
    };
    let (mut model, ()) = tokio::join!(writer, killer);
    cluster.pageserver.restart();
    cluster
        .check(cluster.timeline, &model.history, "after kill -9 and restart")
        .await;
    cluster
        .check(branch, &[(branch_lsn, branch_pages)], "the branch after restart")
        .await;

    // Kill a safekeeper: commits go on through the other two and reach the pageserver.
    cluster.safekeepers[0].kill9();
    write(&proposer, &mut model, 80, 20).await;
    let tail: Vec<_> = model.history[80..].to_vec();
    cluster.check(cluster.timeline, &tail, "after a safekeeper died").await;
    cluster.safekeepers[1].kill9();
    cluster.safekeepers[1].restart();
    cluster.safekeepers[0].restart();
    write(&proposer, &mut model, 100, 10).await;
    let tail: Vec<_> = model.history[100..].to_vec();
    cluster
        .check(cluster.timeline, &tail, "after another safekeeper restarted")
        .await;
}

/// The `remote_consistent_lsn` a safekeeper's control file records (0 while it has none).
fn safekeeper_remote_consistent_lsn(control: &std::path::Path) -> Lsn {
    let dir = control.parent().expect("a timeline directory");
    match safekeeper::filestore::FileControl::load(dir).expect("a readable control file") {
        Some(state) => state.remote_consistent_lsn,
        None => Lsn(0),
    }
}

impl Cluster {
    async fn remote_consistent_lsn(&self) -> Lsn {
        let info = self
            .management()
            .await
            .get_timeline_info(self.timeline_ref(self.timeline))
            .await
            .expect("timeline info")
            .into_inner();
        assert!(info.remote_consistent_lsn <= info.disk_consistent_lsn);
        Lsn(info.remote_consistent_lsn)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pageserver_rebuilds_from_remote_storage_after_losing_its_disk() {
    let mut cluster = Cluster::start_with(|root| {
        vec![
            "--remote".into(),
            format!("file://{}", root.join("remote").display()),
            // Flush (and so upload) a few times a second, whatever the WAL volume.
            "--checkpoint-timeout-ms".into(),
            "200".into(),
        ]
    })
    .await;
    assert_eq!(cluster.remote_consistent_lsn().await, START, "nothing uploaded yet");
    let proposer = cluster.proposer();
    proposer.elect().await.expect("elected");
    let mut model = Model::default();
    write(&proposer, &mut model, 0, 40).await;
    cluster.check(cluster.timeline, &model.history, "ingested").await;
    let (branch_lsn, branch_pages) = model.history[15].clone();
    let branch = TimelineId(0xC);
    cluster
        .management()
        .await
        .create_timeline(ps::CreateTimelineRequest {
            timeline: Some(cluster.timeline_ref(branch)),
            ancestor_timeline_id: cluster.timeline.to_string(),
            ancestor_lsn: branch_lsn.0,
            start_lsn: 0,
        })
        .await
        .expect("branch");

    // Wait until everything written so far is in remote storage.
    let target = model.history[39].0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let uploaded = loop {
        let lsn = cluster.remote_consistent_lsn().await;
        if lsn >= target {
            break lsn;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "remote_consistent_lsn {lsn} never reached {target}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The safekeepers hear of it (and may remove WAL below it): their control files record it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for id in 1..=3 {
        let control = cluster
            ._root
            .path()
            .join(format!("sk{id}"))
            .join(cluster.tenant.to_string())
            .join(cluster.timeline.to_string())
            .join("control");
        loop {
            let recorded = safekeeper_remote_consistent_lsn(&control);
            if recorded >= uploaded {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "safekeeper {id} records remote_consistent_lsn {recorded}, not {uploaded}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // More commits, some of them only on the safekeepers when the pageserver dies.
    write(&proposer, &mut model, 40, 20).await;
    cluster
        .check(cluster.timeline, &model.history, "before the crash")
        .await;

    cluster.pageserver.kill9();
    let data_dir = cluster._root.path().join("pageserver");
    std::fs::remove_dir_all(&data_dir).expect("wipe the pageserver's disk");
    cluster.pageserver.restart();
    cluster
        .check(cluster.timeline, &model.history, "rebuilt from remote storage")
        .await;
    cluster
        .check(branch, &[(branch_lsn, branch_pages)], "the branch, rebuilt")
        .await;
    assert!(cluster.remote_consistent_lsn().await >= uploaded);
    // It goes on ingesting.
    write(&proposer, &mut model, 60, 10).await;
    let tail: Vec<_> = model.history[60..].to_vec();
    cluster.check(cluster.timeline, &tail, "after the rebuild").await;
}

/// `GET /metrics` over plain HTTP/1.1.
async fn scrape(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to metrics");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("response");
    assert!(response.starts_with("HTTP/1.1 200"), "metrics answered {response:?}");
    response
}
