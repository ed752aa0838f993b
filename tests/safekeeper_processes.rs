//! Real-process tests of the safekeepers: three `cambium safekeeper` processes on loopback, a proposer
//! (`walproposer::WalProposer`) appending through them, and `kill -9`.
//!
//! Proves: commits go on with one safekeeper killed; with two killed, appends fail with a clear, bounded
//! timeout and nothing acknowledged is lost; once they are back, commits resume; a second proposer that wins
//! a higher term fences the first. Every acknowledged record is then read back from a majority's WAL.

mod common;

use std::time::Duration;

use common::Process;

use bytes::Bytes;
use proto::safekeeper as pb;
use storage::{Key, Lsn, Patch, TenantId, TimelineId, Value, WalRecord};
use walproposer::{WalProposer, WalProposerConfig, WalProposerError};

const START: Lsn = Lsn(0x100_0000);

struct Cluster {
    _root: tempfile::TempDir,
    safekeepers: Vec<Process>,
    tenant_id: TenantId,
    timeline_id: TimelineId,
}

impl Cluster {
    async fn start() -> Cluster {
        let root = tempfile::tempdir().expect("tempdir");
        let safekeepers: Vec<Process> = (1..=3)
            .map(|id| Process::safekeeper(id, &root.path().join(format!("sk{id}"))))
            .collect();
        let cluster = Cluster {
            _root: root,
            safekeepers,
            tenant_id: TenantId(7),
            timeline_id: TimelineId(9),
        };
        for sk in &cluster.safekeepers {
            let mut client = cluster.client(sk).await;
            client
                .create_timeline(pb::CreateTimelineRequest {
                    timeline: Some(cluster.timeline_ref()),
                    start_lsn: START.0,
                })
                .await
                .expect("create timeline");
        }
        cluster
    }

    fn timeline_ref(&self) -> pb::TimelineRef {
        pb::TimelineRef {
            tenant_id: self.tenant_id.to_string(),
            timeline_id: self.timeline_id.to_string(),
        }
    }

    async fn client(&self, sk: &Process) -> pb::safekeeper_client::SafekeeperClient<tonic::transport::Channel> {
        pb::safekeeper_client::SafekeeperClient::connect(format!("http://{}", sk.address))
            .await
            .expect("connect")
    }

    fn proposer(&self, commit_timeout_ms: u64) -> WalProposer {
        let addresses = self.safekeepers.iter().map(|s| s.address.clone()).collect();
        let mut config = WalProposerConfig::new(addresses, self.tenant_id, self.timeline_id, START);
        config.commit_timeout_ms = commit_timeout_ms;
        config.proposer.request_timeout_ms = 300;
        config.connect_timeout_ms = 300;
        WalProposer::start(config).expect("proposer starts")
    }

    /// The WAL of safekeeper `i` from the start, as far as it has it durably.
    async fn wal_of(&self, i: usize) -> Vec<u8> {
        let mut client = self.client(&self.safekeepers[i]).await;
        let state = client.get_state(self.timeline_ref()).await.expect("state").into_inner();
        let mut wal = Vec::new();
        let mut at = START.0;
        while at < state.flush_lsn {
            let chunk = client
                .read_wal(pb::ReadWalRequest {
                    timeline: Some(self.timeline_ref()),
                    term: state.term,
                    start_lsn: at,
                    max_bytes: 1 << 20,
                })
                .await
                .expect("read wal")
                .into_inner();
            assert!(!chunk.data.is_empty(), "read at {at} made no progress");
            at += chunk.data.len() as u64;
            wal.extend_from_slice(&chunk.data);
        }
        wal
    }
}

fn record(tag: &str) -> Bytes {
    WalRecord {
        commit_ts_us: 1,
        db_size_pages: 1,
        entries: vec![(
            Key::page(0),
            Value::Delta(vec![Patch {
                offset: 0,
                data: Bytes::from(tag.to_string()),
            }]),
        )],
    }
    .to_frame()
    .expect("valid record")
}

/// Checks every acknowledged (end LSN, frame) is in the WAL of at least two safekeepers.
async fn assert_acknowledged_present(cluster: &Cluster, acknowledged: &[(Lsn, Bytes)]) {
    let mut holders = vec![0usize; acknowledged.len()];
    for i in 0..cluster.safekeepers.len() {
        if !cluster.safekeepers[i].is_running() {
            continue;
        }
        let wal = cluster.wal_of(i).await;
        for (n, (end, frame)) in acknowledged.iter().enumerate() {
            let from = (end.0 - frame.len() as u64 - START.0) as usize;
            if wal.get(from..from + frame.len()) == Some(&frame[..]) {
                holders[n] += 1;
            }
        }
    }
    for (n, count) in holders.iter().enumerate() {
        assert!(
            *count >= 2,
            "acknowledged record {n} (end {}) is on only {count} safekeepers",
            acknowledged[n].0
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_survive_kill_9_and_resume_after_restart() {
    let mut cluster = Cluster::start().await;
    let proposer = cluster.proposer(1_500);
    let (term, epoch_start) = proposer.elect().await.expect("elected");
    assert_eq!((term, epoch_start), (1, START));
    let mut acknowledged = Vec::new();
    for i in 0..50 {
        let frame = record(&format!("a{i}"));
        let end = proposer.append(frame.clone()).await.expect("commit with all three up");
        acknowledged.push((end, frame));
    }

    cluster.safekeepers[0].kill9();
    for i in 0..50 {
        let frame = record(&format!("b{i}"));
        let end = proposer
            .append(frame.clone())
            .await
            .expect("commit with one safekeeper down");
        acknowledged.push((end, frame));
    }

    cluster.safekeepers[1].kill9();
    let stalled = proposer.append(record("stalled")).await;
    assert!(
        matches!(stalled, Err(WalProposerError::CommitTimeout { timeout_ms: 1_500 })),
        "with two of three down an append must time out clearly, got {stalled:?}"
    );

    cluster.safekeepers[0].restart();
    cluster.safekeepers[1].restart();
    let mut resumed = false;
    for attempt in 0..20 {
        match proposer.append(record(&format!("c{attempt}"))).await {
            Ok(end) => {
                acknowledged.push((end, record(&format!("c{attempt}"))));
                resumed = true;
                break;
            }
            Err(WalProposerError::CommitTimeout { .. }) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(other) => panic!("unexpected error after restart: {other}"),
        }
    }
    assert!(resumed, "commits must resume once two safekeepers are back");
    for i in 0..20 {
        let frame = record(&format!("d{i}"));
        let end = proposer.append(frame.clone()).await.expect("commit after recovery");
        acknowledged.push((end, frame));
    }
    assert_acknowledged_present(&cluster, &acknowledged).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_proposer_fences_the_older_one() {
    let cluster = Cluster::start().await;
    let first = cluster.proposer(2_000);
    first.elect().await.expect("first elected");
    let mut acknowledged = Vec::new();
    for i in 0..10 {
        let frame = record(&format!("first{i}"));
        acknowledged.push((first.append(frame.clone()).await.expect("commit"), frame));
    }
    let second = cluster.proposer(2_000);
    let (term, epoch_start) = second.elect().await.expect("second elected");
    assert_eq!(term, 2);
    assert!(
        epoch_start >= acknowledged.last().expect("appended").0,
        "the new term starts after every acknowledged record"
    );
    let fenced = first.append(record("from the old proposer")).await;
    assert!(
        matches!(fenced, Err(WalProposerError::Fenced { term: 2 })),
        "the old proposer is fenced: {fenced:?}"
    );
    for i in 0..10 {
        let frame = record(&format!("second{i}"));
        acknowledged.push((second.append(frame.clone()).await.expect("commit"), frame));
    }
    assert_acknowledged_present(&cluster, &acknowledged).await;
}
