//! The safekeeper's gRPC service end to end, in process: a `SafekeeperNode` over a temp directory served on
//! 127.0.0.1:0, driven by the generated tonic client.
//!
//! Proves: timelines are created idempotently; vote, elected and pipelined appends round-trip, and appends that
//! arrive together share one sync (group commit: the same flush LSN on each acknowledgement); `ReadWal` serves
//! a term's WAL; `StreamWal` returns committed WAL and tails later commits; every bad input gets its precise
//! status and metadata and leaves the timeline's files byte-for-byte unchanged (stale term, unelected term,
//! gap, bad crc, torn frame, unknown timeline, malformed ids and histories, reads out of range); a restarted
//! node finds its timelines with the same flush LSN, and open streams do not hold a shutdown up; the lock file keeps a second node off the directory.
//! Deletion: a deleted timeline's open `Append` and `StreamWal` streams end with `NOT_FOUND`, later requests get
//! `NOT_FOUND`, its directory is gone, a second deletion succeeds and a creation afterwards starts afresh at
//! its own start LSN; a tenant's deletion removes every timeline of it and its directory and no other tenant's;
//! tombstones left by a deletion cut short are removed at open and never load.
//! Replica repair (`PullTimeline`): a timeline missing on one node is copied from the most advanced of its peers
//! (WAL from that peer's oldest retained LSN, its history and commit LSN, the highest promised term) and then
//! votes, is elected and takes appends with its WAL byte for byte equal to the peer's; one behind past what its
//! peers retain is replaced, one as far is left alone (idempotent: no file changes); every bad pull gets its
//! precise status with no file written; a source that stops mid-stream leaves nothing served and a retry
//! completes; staging directories left by a crash are installed or removed at open; a `WalProposer` takes in a
//! replica pulled mid-run and commits with it.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cambium_types::{Durability, Key, Lsn, Patch, TenantId, TimelineId, Value, WalRecord};
use proto::safekeeper as pb;
use proto::safekeeper::safekeeper_client::SafekeeperClient;
use safekeeper::convert::{metadata_u64, CURRENT_TERM_METADATA, NOT_ELECTED_METADATA, WRITE_LSN_METADATA};
use safekeeper::filestore::FileStoreConfig;
use safekeeper::node::{NodeConfig, NodeError, SafekeeperNode, LOCK_FILE_NAME};
use safekeeper::service::{serve, MESSAGE_BYTES_MAX};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::Code;

const START: Lsn = Lsn(0x100);
const TENANT: TenantId = TenantId(0xabc);
const TIMELINE: TimelineId = TimelineId(0x123);
const WAIT: Duration = Duration::from_secs(10);

type Client = SafekeeperClient<Channel>;

struct Server {
    node: Arc<SafekeeperNode>,
    address: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

fn open_node(dir: &Path) -> Result<SafekeeperNode, NodeError> {
    SafekeeperNode::open(NodeConfig {
        node_id: 1,
        data_dir: dir.to_path_buf(),
        store: FileStoreConfig {
            segment_size_bytes: 4096,
            durability: Durability::Fsync,
        },
    })
}

async fn start(dir: &Path) -> Server {
    let node = Arc::new(open_node(dir).expect("open node"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(Arc::clone(&node), listener, async {
        let _ = stopped.await;
    }));
    Server {
        node,
        address,
        stop,
        task,
    }
}

impl Server {
    async fn client(&self) -> Client {
        SafekeeperClient::connect(format!("http://{}", self.address))
            .await
            .expect("connect")
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX)
    }

    /// Stops serving and closes the node; returns whether the lock file was released.
    async fn stop(self) -> bool {
        let _ = self.stop.send(());
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("server stops")
            .expect("server task")
            .expect("serve");
        self.node.close(WAIT).await
    }
}

fn timeline_ref() -> pb::TimelineRef {
    pb::TimelineRef {
        tenant_id: TENANT.to_string(),
        timeline_id: TIMELINE.to_string(),
    }
}

fn frame(seed: u8) -> Bytes {
    WalRecord {
        commit_ts_us: u64::from(seed),
        db_size_pages: 1,
        entries: vec![(
            Key::page(0),
            Value::Delta(vec![Patch {
                offset: u16::from(seed) % 64,
                data: Bytes::from(vec![seed; 40 + usize::from(seed)]),
            }]),
        )],
    }
    .to_frame()
    .expect("encodes")
}

fn end_of(begin: Lsn, data: &[u8]) -> Lsn {
    Lsn(begin.0 + data.len() as u64)
}

async fn create(client: &mut Client) -> pb::AcceptorState {
    client
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline_ref()),
            start_lsn: START.0,
        })
        .await
        .expect("create timeline")
        .into_inner()
        .state
        .expect("state")
}

async fn state(client: &mut Client) -> pb::AcceptorState {
    client.get_state(timeline_ref()).await.expect("get state").into_inner()
}

/// Votes for `term` and announces its election with the history `[(term, at)]` plus `earlier`.
async fn elect(client: &mut Client, term: u64, earlier: &[(u64, u64)], at: Lsn) {
    let granted = client
        .vote(pb::VoteRequest {
            timeline: Some(timeline_ref()),
            term,
        })
        .await
        .expect("vote")
        .into_inner()
        .granted;
    assert!(granted, "vote for term {term}");
    let mut history: Vec<pb::TermSwitch> = earlier
        .iter()
        .map(|&(term, lsn)| pb::TermSwitch { term, lsn })
        .collect();
    history.push(pb::TermSwitch { term, lsn: at.0 });
    client
        .elected(pb::ElectedRequest {
            timeline: Some(timeline_ref()),
            term,
            history,
            start_streaming_at: at.0,
        })
        .await
        .expect("elected");
}

fn append_message(request_id: u64, term: u64, begin: Lsn, data: Bytes, commit: Lsn) -> pb::AppendRequest {
    pb::AppendRequest {
        timeline: (request_id == 0).then(timeline_ref),
        request_id,
        term,
        begin_lsn: begin.0,
        data,
        commit_lsn: commit.0,
    }
}

/// Sends `messages` on one append stream and collects the acknowledgements and the status that ended it.
async fn append_all(
    client: &mut Client,
    messages: Vec<pb::AppendRequest>,
) -> (Vec<pb::AppendResponse>, Option<tonic::Status>) {
    let mut responses = client
        .append(tokio_stream::iter(messages))
        .await
        .expect("append stream opens")
        .into_inner();
    let mut acks = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, responses.next())
            .await
            .expect("append answer")
        {
            Some(Ok(ack)) => acks.push(ack),
            Some(Err(status)) => return (acks, Some(status)),
            None => return (acks, None),
        }
    }
}

/// Every file of a directory tree and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_vote_elect_append_with_group_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;

    let created = create(&mut client).await;
    assert_eq!(
        (created.flush_lsn, created.timeline_start_lsn, created.term),
        (START.0, START.0, 0)
    );
    assert_eq!(
        create(&mut client).await,
        created,
        "creation is idempotent for the same start"
    );
    let other_start = client
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline_ref()),
            start_lsn: START.0 + 8,
        })
        .await
        .expect_err("another start LSN");
    assert_eq!(other_start.code(), Code::AlreadyExists);

    elect(&mut client, 1, &[], START).await;

    // One append alone, acknowledged after its sync.
    let first = frame(1);
    let (acks, status) = append_all(&mut client, vec![append_message(0, 1, START, first.clone(), START)]).await;
    assert!(status.is_none(), "{status:?}");
    let mut end = end_of(START, &first);
    assert_eq!(acks.len(), 1);
    assert_eq!((acks[0].request_id, acks[0].flush_lsn, acks[0].term), (0, end.0, 1));

    // Pipelined appends while the acceptor is busy (its lock held by a slow "fsync"): they pile up on the
    // stream and are written under one or two syncs, not eight. The lock is held until the service has
    // received all eight (its gauge of pending appends), so nothing depends on timing: whatever the first
    // batch took, the rest arrived while it waited and forms the second.
    let timeline = server.node.timeline((TENANT, TIMELINE)).expect("timeline");
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        timeline
            .run_blocking(|_| {
                locked_tx.send(()).expect("signal");
                release_rx.recv().expect("release");
            })
            .expect("run")
    });
    locked_rx.recv().expect("lock held");
    assert_eq!(
        server.node.appends_pending(),
        0,
        "nothing pending before the stream opens"
    );
    let (tx, rx) = mpsc::channel(64);
    let mut responses = client
        .append(ReceiverStream::new(rx))
        .await
        .expect("append stream")
        .into_inner();
    let mut expected_ends = Vec::new();
    for i in 0..8u64 {
        let data = frame(10 + i as u8);
        let begin = end;
        end = end_of(begin, &data);
        expected_ends.push(end);
        let mut message = append_message(i, 1, begin, data, START);
        message.request_id = 100 + i;
        message.timeline = (i == 0).then(timeline_ref);
        tx.send(message).await.expect("send");
    }
    let all_in = async {
        while server.node.appends_pending() < 8 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(WAIT, all_in)
        .await
        .expect("the service received all eight appends");
    assert_eq!(server.node.appends_pending(), 8);
    release_tx.send(()).expect("release the lock");
    let mut acks = Vec::new();
    while acks.len() < 8 {
        let ack = tokio::time::timeout(WAIT, responses.next())
            .await
            .expect("ack in time")
            .expect("stream open")
            .expect("ack");
        acks.push(ack);
    }
    holder.join().expect("holder");
    let ids: Vec<u64> = acks.iter().map(|a| a.request_id).collect();
    assert_eq!(
        ids,
        (100..108).collect::<Vec<_>>(),
        "acknowledged in order, each with its own id"
    );
    for (ack, expected_end) in acks.iter().zip(&expected_ends) {
        assert!(ack.flush_lsn >= expected_end.0, "acknowledged only once durable");
    }
    assert_eq!(acks[7].flush_lsn, end.0);
    let mut flushes: Vec<u64> = acks.iter().map(|a| a.flush_lsn).collect();
    flushes.dedup();
    assert!(
        flushes.len() <= 2,
        "eight pipelined appends took {} syncs: {flushes:?}",
        flushes.len()
    );
    assert_eq!(server.node.appends_pending(), 0, "every append written");

    // The commit LSN rides on a later (here empty) append.
    tx.send(append_message(200, 1, end, Bytes::new(), end))
        .await
        .expect("send");
    let ack = responses.next().await.expect("open").expect("ack");
    assert_eq!((ack.request_id, ack.commit_lsn, ack.flush_lsn), (200, end.0, end.0));
    drop(tx);
    assert!(
        responses.next().await.is_none(),
        "the stream ends when the client ends it"
    );

    let now = state(&mut client).await;
    assert_eq!((now.flush_lsn, now.commit_lsn, now.term), (end.0, end.0, 1));
    assert_eq!(now.history, vec![pb::TermSwitch { term: 1, lsn: START.0 }]);

    // ReadWal serves the term's WAL from a frame boundary.
    let chunk = client
        .read_wal(pb::ReadWalRequest {
            timeline: Some(timeline_ref()),
            term: 1,
            start_lsn: START.0,
            max_bytes: 1 << 20,
        })
        .await
        .expect("read wal")
        .into_inner();
    assert_eq!(chunk.start_lsn, START.0);
    assert_eq!(chunk.data.len() as u64, end.0 - START.0);
    assert_eq!(&chunk.data[..first.len()], &first[..]);
    assert!(server.stop().await, "the lock file is released");
    assert!(!dir.path().join(LOCK_FILE_NAME).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_wal_sends_committed_wal_and_tails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    create(&mut client).await;
    elect(&mut client, 1, &[], START).await;

    let (a, b) = (frame(1), frame(2));
    let end_a = end_of(START, &a);
    let end_b = end_of(end_a, &b);
    // Both written; only `a` committed (the second append carries the commit of the first).
    let (acks, status) = append_all(
        &mut client,
        vec![
            append_message(0, 1, START, a.clone(), START),
            append_message(1, 1, end_a, b.clone(), end_a),
        ],
    )
    .await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(acks.last().expect("acks").flush_lsn, end_b.0);
    assert_eq!(state(&mut client).await.commit_lsn, end_a.0);

    let mut wal = client
        .stream_wal(pb::StreamWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: START.0,
        })
        .await
        .expect("stream wal")
        .into_inner();
    let chunk = tokio::time::timeout(WAIT, wal.next())
        .await
        .expect("chunk in time")
        .expect("open")
        .expect("chunk");
    assert_eq!((chunk.start_lsn, chunk.commit_lsn), (START.0, end_a.0));
    assert_eq!(chunk.data, a, "only committed WAL is streamed");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), wal.next())
            .await
            .is_err(),
        "nothing more until a commit"
    );

    // Commit `b` and a new frame `c`: the stream tails them.
    let c = frame(3);
    let end_c = end_of(end_b, &c);
    let (_, status) = append_all(
        &mut client,
        vec![
            append_message(0, 1, end_b, c.clone(), end_b),
            append_message(1, 1, end_c, Bytes::new(), end_c),
        ],
    )
    .await;
    assert!(status.is_none(), "{status:?}");
    let mut tailed = Vec::new();
    let mut next = end_a.0;
    while next < end_c.0 {
        let chunk = tokio::time::timeout(WAIT, wal.next())
            .await
            .expect("tailed chunk in time")
            .expect("open")
            .expect("chunk");
        assert_eq!(chunk.start_lsn, next, "chunks are contiguous");
        next += chunk.data.len() as u64;
        tailed.extend_from_slice(&chunk.data);
    }
    assert_eq!(tailed, [b.as_ref(), c.as_ref()].concat());

    // A stream from a later committed LSN starts there.
    let mut from_b = client
        .stream_wal(pb::StreamWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: end_b.0,
        })
        .await
        .expect("stream wal")
        .into_inner();
    let chunk = from_b.next().await.expect("open").expect("chunk");
    assert_eq!((chunk.start_lsn, chunk.data), (end_b.0, c));

    // On shutdown, tailing streams end with UNAVAILABLE rather than keeping the server up.
    assert!(server.stop().await, "streams let go of the node");
    let ended = tokio::time::timeout(WAIT, wal.next())
        .await
        .expect("stream ends on shutdown");
    assert!(
        matches!(&ended, None | Some(Err(_))),
        "the tail ends with the server: {ended:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_precise_statuses_and_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    create(&mut client).await;
    elect(&mut client, 1, &[], START).await;
    let good = frame(1);
    let end = end_of(START, &good);
    let (_, status) = append_all(&mut client, vec![append_message(0, 1, START, good.clone(), START)]).await;
    assert!(status.is_none(), "{status:?}");
    // Term 2 elected at the end of term 1's WAL: term 1 is stale from here on.
    elect(&mut client, 2, &[(1, START.0)], end).await;

    let before_state = state(&mut client).await;
    let before_files = snapshot(dir.path());
    let next = frame(2);

    let expect_append = |message: pb::AppendRequest, code: Code| {
        let mut client = client.clone();
        async move {
            let (acks, status) = append_all(&mut client, vec![message]).await;
            assert!(acks.is_empty(), "nothing acknowledged: {acks:?}");
            let status = status.expect("the stream ends with a status");
            assert_eq!(status.code(), code, "{status:?}");
            status
        }
    };
    let stale = expect_append(append_message(0, 1, end, next.clone(), end), Code::FailedPrecondition).await;
    assert_eq!(metadata_u64(&stale, CURRENT_TERM_METADATA), Some(2));
    let unelected = expect_append(append_message(0, 7, end, next.clone(), end), Code::FailedPrecondition).await;
    assert_eq!(metadata_u64(&unelected, NOT_ELECTED_METADATA), Some(1));
    let gap = expect_append(append_message(0, 2, end.next(), next.clone(), end), Code::OutOfRange).await;
    assert_eq!(metadata_u64(&gap, WRITE_LSN_METADATA), Some(end.0));
    let mut bad_crc = next.to_vec();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0x5a;
    expect_append(append_message(0, 2, end, Bytes::from(bad_crc), end), Code::DataLoss).await;
    expect_append(
        append_message(0, 2, end, next.slice(..next.len() - 3), end),
        Code::InvalidArgument,
    )
    .await;
    let mut nameless = append_message(0, 2, end, next.clone(), end);
    nameless.timeline = None;
    expect_append(nameless, Code::InvalidArgument).await;
    let mut unknown = append_message(0, 2, end, next.clone(), end);
    unknown.timeline = Some(pb::TimelineRef {
        tenant_id: TENANT.to_string(),
        timeline_id: TimelineId(0x999).to_string(),
    });
    expect_append(unknown, Code::NotFound).await;
    let mut malformed = append_message(0, 2, end, next.clone(), end);
    malformed.timeline = Some(pb::TimelineRef {
        tenant_id: TENANT.to_string().to_uppercase(),
        timeline_id: TIMELINE.to_string(),
    });
    expect_append(malformed, Code::InvalidArgument).await;

    // Unary requests.
    let unknown_ref = pb::TimelineRef {
        tenant_id: TenantId(0x777).to_string(),
        timeline_id: TIMELINE.to_string(),
    };
    assert_eq!(
        client.get_state(unknown_ref.clone()).await.expect_err("unknown").code(),
        Code::NotFound
    );
    for malformed in [
        "",
        "xyz",
        "0123456789abcdef0123456789abcdef0",
        "0123456789ABCDEF0123456789ABCDEF",
    ] {
        let bad = pb::TimelineRef {
            tenant_id: malformed.into(),
            timeline_id: TIMELINE.to_string(),
        };
        let status = client.get_state(bad.clone()).await.expect_err("malformed tenant id");
        assert_eq!(status.code(), Code::InvalidArgument, "{malformed:?}");
        let status = client
            .create_timeline(pb::CreateTimelineRequest {
                timeline: Some(pb::TimelineRef {
                    tenant_id: TENANT.to_string(),
                    timeline_id: malformed.into(),
                }),
                start_lsn: START.0,
            })
            .await
            .expect_err("malformed timeline id");
        assert_eq!(status.code(), Code::InvalidArgument, "{malformed:?}");
    }
    let status = client
        .create_timeline(pb::CreateTimelineRequest {
            timeline: None,
            start_lsn: START.0,
        })
        .await
        .expect_err("no timeline");
    assert_eq!(status.code(), Code::InvalidArgument);
    let status = client
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline_ref()),
            start_lsn: START.0 + 1,
        })
        .await
        .expect_err("another start");
    assert_eq!(status.code(), Code::AlreadyExists);
    // A vote for a term not above the promised one is refused without an error and without a write.
    let vote = client
        .vote(pb::VoteRequest {
            timeline: Some(timeline_ref()),
            term: 2,
        })
        .await
        .expect("vote")
        .into_inner();
    assert!(!vote.granted);
    let vote = client
        .vote(pb::VoteRequest {
            timeline: Some(unknown_ref.clone()),
            term: 9,
        })
        .await
        .expect_err("unknown");
    assert_eq!(vote.code(), Code::NotFound);
    let elected = |term: u64, history: Vec<(u64, u64)>, at: Lsn| pb::ElectedRequest {
        timeline: Some(timeline_ref()),
        term,
        history: history
            .into_iter()
            .map(|(term, lsn)| pb::TermSwitch { term, lsn })
            .collect(),
        start_streaming_at: at.0,
    };
    let status = client
        .elected(elected(1, vec![(1, START.0)], START))
        .await
        .expect_err("stale");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(metadata_u64(&status, CURRENT_TERM_METADATA), Some(2));
    let status = client
        .elected(elected(3, vec![(3, START.0), (1, end.0)], START))
        .await
        .expect_err("malformed history");
    assert_eq!(status.code(), Code::InvalidArgument);
    let status = client
        .elected(elected(2, vec![(1, START.0), (2, START.0)], START))
        .await
        .expect_err("a second history for an adopted term");
    assert_eq!(status.code(), Code::InvalidArgument);
    let read = |term: u64, start: Lsn| pb::ReadWalRequest {
        timeline: Some(timeline_ref()),
        term,
        start_lsn: start.0,
        max_bytes: 1 << 20,
    };
    let status = client.read_wal(read(1, START)).await.expect_err("stale read");
    assert_eq!(status.code(), Code::FailedPrecondition);
    let status = client.read_wal(read(5, START)).await.expect_err("unelected read");
    assert_eq!(metadata_u64(&status, NOT_ELECTED_METADATA), Some(1));
    let status = client.read_wal(read(2, end.next())).await.expect_err("past the end");
    assert_eq!(status.code(), Code::OutOfRange);
    let status = client
        .stream_wal(pb::StreamWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: START.0 - 1,
        })
        .await
        .expect_err("before the start");
    assert_eq!(status.code(), Code::OutOfRange);
    assert_eq!(
        state(&mut client).await,
        before_state,
        "no refused request changed the state"
    );
    assert_eq!(snapshot(dir.path()), before_files, "no refused request changed a file");

    // A horizon past this safekeeper's (lazily persisted) commit LSN is kept, but WAL is removed only below
    // both, so nothing readable goes.
    client
        .report_horizons(pb::HorizonsRequest {
            timeline: Some(timeline_ref()),
            remote_consistent_lsn: end.0 + 1000,
        })
        .await
        .expect("a horizon past the commit LSN is accepted");
    assert_eq!(
        state(&mut client).await,
        pb::AcceptorState {
            remote_consistent_lsn: end.0 + 1000,
            ..before_state.clone()
        },
        "the horizon is recorded, and removes nothing above the commit LSN"
    );

    // A good append followed by a bad one on the same stream: the good one is written and acknowledged, the
    // stream ends with the bad one's status, and what follows it is not written.
    let after = frame(3);
    let end_next = end_of(end, &next);
    let (acks, status) = append_all(
        &mut client,
        vec![
            append_message(0, 2, end, next.clone(), end),
            append_message(1, 2, end_next.next(), after.clone(), end),
            append_message(2, 2, end_next, after.clone(), end),
        ],
    )
    .await;
    let status = status.expect("ends with the refusal");
    assert_eq!(status.code(), Code::OutOfRange);
    assert_eq!(acks.iter().map(|a| a.request_id).collect::<Vec<_>>(), vec![0]);
    assert_eq!(acks[0].flush_lsn, end_next.0);
    assert_eq!(state(&mut client).await.flush_lsn, end_next.0);
    assert!(server.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_finds_its_timelines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    create(&mut client).await;
    elect(&mut client, 1, &[], START).await;
    let mut messages = Vec::new();
    let mut end = START;
    for i in 0..40u8 {
        // Enough WAL for several 4 KiB segments.
        let data = frame(i + 60);
        messages.push(append_message(u64::from(i), 1, end, data.clone(), end));
        end = end_of(end, &data);
    }
    let (acks, status) = append_all(&mut client, messages).await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(acks.last().expect("acks").flush_lsn, end.0);
    let before = state(&mut client).await;
    // An append stream left open by its client does not hold the shutdown up: it ends with UNAVAILABLE.
    let (tx, rx) = mpsc::channel(4);
    tx.send(append_message(0, 1, end, Bytes::new(), START))
        .await
        .expect("send");
    let mut open_stream = client
        .append(ReceiverStream::new(rx))
        .await
        .expect("append stream")
        .into_inner();
    open_stream.next().await.expect("open").expect("ack");
    let stopping = std::time::Instant::now();
    assert!(server.stop().await);
    assert!(
        stopping.elapsed() < Duration::from_millis(safekeeper::service::SHUTDOWN_GRACE_MS / 2),
        "shutdown took {:?}",
        stopping.elapsed()
    );
    match open_stream.next().await {
        Some(Err(status)) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
        other => panic!("the open append stream must end with UNAVAILABLE: {other:?}"),
    }
    drop((tx, client));

    let server = start(dir.path()).await;
    let mut client = server.client().await;
    let after = state(&mut client).await;
    assert_eq!(after.flush_lsn, end.0);
    assert_eq!((after.term, &after.history), (before.term, &before.history));
    let chunk = client
        .read_wal(pb::ReadWalRequest {
            timeline: Some(timeline_ref()),
            term: 1,
            start_lsn: START.0,
            max_bytes: 1 << 20,
        })
        .await
        .expect("read")
        .into_inner();
    assert_eq!(
        chunk.data.len() as u64,
        end.0 - START.0,
        "all WAL read back across segments"
    );
    assert!(server.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_file_keeps_a_second_node_off_the_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = open_node(dir.path()).expect("first node");
    assert!(dir.path().join(LOCK_FILE_NAME).exists());
    match open_node(dir.path()) {
        Err(NodeError::Locked { .. }) => {}
        other => panic!("a second node on the same directory: {other:?}"),
    }
    assert!(Arc::new(first).close(WAIT).await, "released");
    assert!(!dir.path().join(LOCK_FILE_NAME).exists());
    let again = open_node(dir.path()).expect("reopened after release");
    drop(again);
    assert!(
        !dir.path().join(LOCK_FILE_NAME).exists(),
        "dropping a node releases its lock"
    );
}

fn timeline_ref_of(tenant: TenantId, timeline: TimelineId) -> pb::TimelineRef {
    pb::TimelineRef {
        tenant_id: tenant.to_string(),
        timeline_id: timeline.to_string(),
    }
}

async fn create_at(client: &mut Client, timeline: pb::TimelineRef, start: Lsn) -> pb::AcceptorState {
    client
        .create_timeline(pb::CreateTimelineRequest {
            timeline: Some(timeline),
            start_lsn: start.0,
        })
        .await
        .expect("create timeline")
        .into_inner()
        .state
        .expect("state")
}

/// The next item of a stream, which must be an error: its status.
async fn ended_with<T: std::fmt::Debug>(stream: &mut tonic::Streaming<T>) -> tonic::Status {
    match tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("stream ends in time")
    {
        Some(Err(status)) => status,
        other => panic!("the stream must end with an error status: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_timeline_ends_its_streams_and_can_be_created_afresh() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    create(&mut client).await;
    elect(&mut client, 1, &[], START).await;
    let a = frame(1);
    let end_a = end_of(START, &a);
    let (_, status) = append_all(&mut client, vec![append_message(0, 1, START, a, end_a)]).await;
    assert!(status.is_none(), "{status:?}");

    // A tailing StreamWal and an open Append stream.
    let mut wal = client
        .stream_wal(pb::StreamWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: START.0,
        })
        .await
        .expect("stream wal")
        .into_inner();
    tokio::time::timeout(WAIT, wal.next())
        .await
        .expect("chunk in time")
        .expect("open")
        .expect("chunk");
    let (tx, rx) = mpsc::channel(4);
    tx.send(append_message(0, 1, end_a, Bytes::new(), end_a))
        .await
        .expect("send");
    let mut appends = client
        .append(ReceiverStream::new(rx))
        .await
        .expect("append stream")
        .into_inner();
    appends.next().await.expect("open").expect("ack");

    client.delete_timeline(timeline_ref()).await.expect("delete");
    let status = ended_with(&mut wal).await;
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(status.message().contains("was deleted"), "{status:?}");
    let status = ended_with(&mut appends).await;
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    drop(tx);
    let status = client.get_state(timeline_ref()).await.expect_err("deleted");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    let tenant_dir = dir.path().join(TENANT.to_string());
    assert!(!tenant_dir.join(TIMELINE.to_string()).exists(), "the directory is gone");
    let left: Vec<_> = std::fs::read_dir(&tenant_dir)
        .expect("tenant dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "no tombstone left: {left:?}");

    // Idempotent, including a timeline that never existed.
    client.delete_timeline(timeline_ref()).await.expect("delete again");
    client
        .delete_timeline(timeline_ref_of(TenantId(0xdead), TimelineId(0xbeef)))
        .await
        .expect("delete of nothing");
    let status = client
        .delete_timeline(pb::TimelineRef {
            tenant_id: "nope".into(),
            timeline_id: TIMELINE.to_string(),
        })
        .await
        .expect_err("malformed");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    // Created again at another start LSN: a fresh timeline, no trace of the old WAL.
    let fresh_start = Lsn(0x5000);
    let fresh = create_at(&mut client, timeline_ref(), fresh_start).await;
    assert_eq!(
        (fresh.timeline_start_lsn, fresh.flush_lsn, fresh.commit_lsn, fresh.term),
        (fresh_start.0, fresh_start.0, fresh_start.0, 0)
    );
    assert!(
        server.stop().await,
        "streams of the deleted timeline let go of the node"
    );

    // And after a restart the fresh one is what loads.
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    assert_eq!(state(&mut client).await.timeline_start_lsn, fresh_start.0);
    assert!(server.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_deletion_removes_every_timeline_of_it_and_no_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    let other_tenant = TenantId(0xfff);
    let ours = [TimelineId(1), TimelineId(2), TimelineId(3)];
    for timeline in ours {
        create_at(&mut client, timeline_ref_of(TENANT, timeline), START).await;
    }
    create_at(&mut client, timeline_ref_of(other_tenant, TimelineId(1)), START).await;
    // ListTimelines names every timeline held, for the control plane's reconciler.
    let listed = client
        .list_timelines(pb::ListTimelinesRequest {})
        .await
        .expect("list")
        .into_inner()
        .timelines;
    let mut expected: Vec<pb::TimelineRef> = ours.iter().map(|t| timeline_ref_of(TENANT, *t)).collect();
    expected.push(timeline_ref_of(other_tenant, TimelineId(1)));
    expected.sort_by(|a, b| (&a.tenant_id, &a.timeline_id).cmp(&(&b.tenant_id, &b.timeline_id)));
    assert_eq!(listed, expected);

    client
        .delete_tenant(pb::DeleteTenantRequest {
            tenant_id: TENANT.to_string(),
        })
        .await
        .expect("delete tenant");
    for timeline in ours {
        let status = client
            .get_state(timeline_ref_of(TENANT, timeline))
            .await
            .expect_err("deleted");
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
    }
    assert!(
        !dir.path().join(TENANT.to_string()).exists(),
        "the tenant directory is gone"
    );
    client
        .get_state(timeline_ref_of(other_tenant, TimelineId(1)))
        .await
        .expect("another tenant is untouched");
    assert_eq!(server.node.timeline_keys(), vec![(other_tenant, TimelineId(1))]);

    client
        .delete_tenant(pb::DeleteTenantRequest {
            tenant_id: TENANT.to_string(),
        })
        .await
        .expect("delete again");
    let status = client
        .delete_tenant(pb::DeleteTenantRequest {
            tenant_id: "ABC".into(),
        })
        .await
        .expect_err("malformed");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // A timeline of the deleted tenant can be created again.
    create_at(&mut client, timeline_ref_of(TENANT, TimelineId(1)), Lsn(0x200)).await;
    assert!(server.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_left_by_a_deletion_cut_short_are_removed_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    create(&mut client).await;
    let other = TimelineId(0x456);
    create_at(&mut client, timeline_ref_of(TENANT, other), START).await;
    let gone_tenant = TenantId(0x777);
    create_at(&mut client, timeline_ref_of(gone_tenant, TimelineId(1)), START).await;
    // Each writes, so that it has a directory (a timeline has none until its first write).
    for timeline in [timeline_ref(), timeline_ref_of(gone_tenant, TimelineId(1))] {
        let vote = pb::VoteRequest {
            timeline: Some(timeline),
            term: 1,
        };
        assert!(client.vote(vote).await.expect("vote").into_inner().granted);
    }
    // What a crash after the rename and before the removal leaves: a timeline tombstone and a tenant one, each
    // deletion's record in the creation log (it goes before the rename). Made here by deleting, then putting
    // back the directories, as they were, under their tombstone names.
    let tenant_dir = dir.path().join(TENANT.to_string());
    let saved = tempfile::tempdir().expect("tempdir");
    copy_dir(&tenant_dir.join(TIMELINE.to_string()), &saved.path().join("timeline"));
    copy_tree(&dir.path().join(gone_tenant.to_string()), &saved.path().join("tenant"));
    client.delete_timeline(timeline_ref()).await.expect("delete");
    client
        .delete_tenant(pb::DeleteTenantRequest {
            tenant_id: gone_tenant.to_string(),
        })
        .await
        .expect("delete tenant");
    assert!(server.stop().await);
    let timeline_tombstone = tenant_dir.join(format!("{TIMELINE}{}", safekeeper::node::TOMBSTONE_SUFFIX));
    copy_dir(&saved.path().join("timeline"), &timeline_tombstone);
    let tenant_tombstone = dir
        .path()
        .join(format!("{gone_tenant}{}", safekeeper::node::TOMBSTONE_SUFFIX));
    copy_tree(&saved.path().join("tenant"), &tenant_tombstone);

    let server = start(dir.path()).await;
    assert!(!timeline_tombstone.exists(), "timeline tombstone removed at open");
    assert!(!tenant_tombstone.exists(), "tenant tombstone removed at open");
    assert_eq!(
        server.node.timeline_keys(),
        vec![(TENANT, other)],
        "tombstones never load"
    );
    let mut client = server.client().await;
    let status = client.get_state(timeline_ref()).await.expect_err("deleted");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    // A tombstone in the way of a later deletion is cleared by it.
    std::fs::create_dir_all(tenant_dir.join(format!("{other}{}", safekeeper::node::TOMBSTONE_SUFFIX)))
        .expect("stray tombstone");
    client
        .delete_timeline(timeline_ref_of(TENANT, other))
        .await
        .expect("delete over a stray tombstone");
    let left: Vec<_> = std::fs::read_dir(&tenant_dir)
        .expect("tenant dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "nothing left: {left:?}");
    assert!(server.stop().await);
}

/// Issue 13 (finding 5): idle timelines let their open segment files go, so a node with many timelines does not
/// hold a descriptor for each. (Appending after the release, the segment taken up again in place, is
/// `filestore`'s unit test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timelines_let_their_segment_files_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = open_node(dir.path()).expect("open");
    const TIMELINES: u64 = 50;
    let count_fds = || std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
    let before = count_fds();
    for i in 0..TIMELINES {
        let timeline = node
            .create_timeline_blocking((TenantId(0xF0), TimelineId(u128::from(i) + 1)), START)
            .expect("create");
        // A timeline has no segment file until it writes.
        common::vote_elect_append(&timeline, START, frame(1), "an idle timeline");
    }
    let with_files = count_fds();
    assert_eq!(
        node.release_idle_files(std::time::Duration::from_secs(3600)),
        0,
        "not idle long enough"
    );
    let released = node.release_idle_files(std::time::Duration::ZERO);
    assert_eq!(released, TIMELINES as usize);
    let after = count_fds();
    eprintln!("descriptors: {before} before, {with_files} with {TIMELINES} timelines, {after} after the release");
    assert_eq!(node.release_idle_files(std::time::Duration::ZERO), 0, "nothing left");
}

// ---------------------------------------------------------------------------------------------------------------
// Replica repair (issue 13): PullTimeline.

/// A node serving with no quiet period (no proposer holds a vote of a lost copy in these tests).
async fn start_pulling(dir: &Path) -> Server {
    let server = start(dir).await;
    server.node.set_pull_quiet_period(Duration::ZERO);
    server
}

fn address_of(server: &Server) -> String {
    server.address.to_string()
}

async fn pull_from(client: &mut Client, sources: Vec<String>) -> Result<pb::PullTimelineResponse, tonic::Status> {
    client
        .pull_timeline(pb::PullTimelineRequest {
            timeline: Some(timeline_ref()),
            sources,
        })
        .await
        .map(|response| response.into_inner())
}

/// The durable WAL of `[start, end)` read through `CopyWal`.
async fn copy_all(client: &mut Client, start: u64, end: u64) -> Vec<u8> {
    let mut chunks = client
        .copy_wal(pb::CopyWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: start,
            end_lsn: end,
        })
        .await
        .expect("copy wal")
        .into_inner();
    let mut out = Vec::new();
    while let Some(chunk) = chunks.message().await.expect("chunk") {
        assert_eq!(chunk.start_lsn, start + out.len() as u64, "contiguous chunks");
        out.extend_from_slice(&chunk.data);
    }
    assert_eq!(out.len() as u64, end - start, "the whole range");
    out
}

/// Appends `frames` at `begin` in `term`, then an empty append carrying `commit` (or the end). Returns the end.
async fn append_frames(client: &mut Client, term: u64, begin: Lsn, frames: &[Bytes], commit: Option<Lsn>) -> Lsn {
    let mut messages = Vec::new();
    let mut end = begin;
    for (i, data) in frames.iter().enumerate() {
        messages.push(append_message(i as u64, term, end, data.clone(), begin));
        end = end_of(end, data);
    }
    messages.push(append_message(
        frames.len() as u64,
        term,
        end,
        Bytes::new(),
        commit.unwrap_or(end),
    ));
    let (acks, status) = append_all(client, messages).await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(acks.last().expect("acks").flush_lsn, end.0);
    end
}

async fn report_horizon(client: &mut Client, lsn: Lsn) -> pb::HorizonsResponse {
    client
        .report_horizons(pb::HorizonsRequest {
            timeline: Some(timeline_ref()),
            remote_consistent_lsn: lsn.0,
        })
        .await
        .expect("report horizons")
        .into_inner()
}

/// A timeline missing on C is pulled from A and B after A took more appends than B and both removed old WAL:
/// C becomes a copy of A (WAL from A's oldest LSN, history, commit LSN, term), then votes, is elected and takes
/// appends like any timeline, its WAL reading back identical to A's; a second pull copies nothing and changes
/// no file; a restart finds the replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_timeline_is_pulled_from_the_most_advanced_peer_and_serves_like_any() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let a = start_pulling(dirs[0].path()).await;
    let b = start_pulling(dirs[1].path()).await;
    let c = start_pulling(dirs[2].path()).await;
    let (mut ca, mut cb, mut cc) = (a.client().await, b.client().await, c.client().await);
    for client in [&mut ca, &mut cb] {
        create(client).await;
        elect(client, 1, &[], START).await;
    }
    let frames: Vec<Bytes> = (0..60u8).map(|i| frame(i + 20)).collect();
    let end_b = append_frames(&mut cb, 1, START, &frames[..40], None).await;
    let end_a = append_frames(&mut ca, 1, START, &frames, Some(end_b)).await;
    // The pageserver made WAL durable up to the middle: A and B remove whole segments below it.
    let horizon = end_of(START, &frames[..45].concat());
    for client in [&mut ca, &mut cb] {
        let removed = report_horizon(client, horizon).await;
        assert!(removed.oldest_lsn > START.0, "old segments removed: {removed:?}");
    }
    let state_a = state(&mut ca).await;
    assert_eq!((state_a.flush_lsn, state_a.commit_lsn), (end_a.0, end_b.0));
    assert!(state_a.oldest_lsn > START.0 && state_a.oldest_lsn <= horizon.0);
    // B promised a higher term than A (a campaign it lost): the replica must not grant it again.
    let vote = cb
        .vote(pb::VoteRequest {
            timeline: Some(timeline_ref()),
            term: 3,
        })
        .await
        .expect("vote")
        .into_inner();
    assert!(vote.granted);

    let pulled = pull_from(&mut cc, vec![address_of(&b), address_of(&a)])
        .await
        .expect("pull");
    assert!(pulled.copied, "{pulled:?}");
    assert_eq!(pulled.source, address_of(&a), "the most advanced source");
    assert_eq!(pulled.copied_bytes, end_a.0 - state_a.oldest_lsn);
    let replica = state(&mut cc).await;
    assert_eq!(pulled.state, Some(replica.clone()));
    assert_eq!(
        replica,
        pb::AcceptorState {
            term: 3,
            ..state_a.clone()
        },
        "A's WAL range, history and commit LSN; the highest promised term"
    );
    assert_eq!(
        copy_all(&mut cc, replica.oldest_lsn, replica.flush_lsn).await,
        copy_all(&mut ca, replica.oldest_lsn, replica.flush_lsn).await,
        "the replica's WAL is A's"
    );
    let status = cc
        .copy_wal(pb::CopyWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: START.0,
            end_lsn: replica.flush_lsn,
        })
        .await
        .expect_err("below the replica's oldest LSN");
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    // StreamWal serves its committed WAL too.
    let mut wal = cc
        .stream_wal(pb::StreamWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: replica.oldest_lsn,
        })
        .await
        .expect("stream wal")
        .into_inner();
    let chunk = tokio::time::timeout(WAIT, wal.next())
        .await
        .expect("chunk in time")
        .expect("open")
        .expect("chunk");
    assert_eq!(chunk.start_lsn, replica.oldest_lsn);
    drop(wal);

    // Idempotent: nothing copied, no file changed.
    let files = snapshot(dirs[2].path());
    let again = pull_from(&mut cc, vec![address_of(&a), address_of(&b)])
        .await
        .expect("pull again");
    assert!(!again.copied, "{again:?}");
    assert_eq!(again.copied_bytes, 0);
    assert_eq!(snapshot(dirs[2].path()), files, "a second pull changes no file");

    // The replica refuses the term B promised, then takes a new term's election and appends like any
    // timeline; A takes the same, and the two WALs stay byte for byte equal.
    let refused = cc
        .vote(pb::VoteRequest {
            timeline: Some(timeline_ref()),
            term: 3,
        })
        .await
        .expect("vote")
        .into_inner();
    assert!(!refused.granted, "term 3 was promised by B: never granted again");
    let more: Vec<Bytes> = (0..10u8).map(|i| frame(i + 100)).collect();
    for client in [&mut ca, &mut cc] {
        elect(client, 4, &[(1, START.0)], end_a).await;
        let end = append_frames(client, 4, end_a, &more, None).await;
        assert_eq!(end, end_of(end_a, &more.concat()));
    }
    let after_a = state(&mut ca).await;
    let after_c = state(&mut cc).await;
    assert_eq!(
        (after_c.flush_lsn, after_c.commit_lsn, &after_c.history),
        (after_a.flush_lsn, after_a.commit_lsn, &after_a.history)
    );
    assert_eq!(
        copy_all(&mut cc, replica.oldest_lsn, after_c.flush_lsn).await,
        copy_all(&mut ca, replica.oldest_lsn, after_a.flush_lsn).await
    );

    // A restart finds the replica as it was.
    drop(cc);
    assert!(c.stop().await);
    let c = start(dirs[2].path()).await;
    let mut cc = c.client().await;
    let restarted = state(&mut cc).await;
    assert_eq!(
        restarted,
        pb::AcceptorState {
            commit_lsn: restarted.commit_lsn,
            ..after_c.clone()
        }
    );
    assert!(
        restarted.commit_lsn >= replica.commit_lsn,
        "the commit LSN is persisted lazily, but never below the replica's"
    );
    for server in [a, b, c] {
        assert!(server.stop().await);
    }
}

/// A timeline that exists on C but never wrote has no directory (a creation makes no file): a pull replaces
/// it with A's copy (the staging directory renamed into place), and C's creation log then records the copy's
/// directory, so that losing it later reads as a lost copy, not as a timeline to make again empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeline_that_never_wrote_is_replaced_by_a_pull_and_its_directory_logged() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let a = start_pulling(dirs[0].path()).await;
    let c = start_pulling(dirs[1].path()).await;
    let (mut ca, mut cc) = (a.client().await, c.client().await);
    create(&mut ca).await;
    elect(&mut ca, 1, &[], START).await;
    let frames: Vec<Bytes> = (0..5u8).map(|i| frame(i + 10)).collect();
    let end = append_frames(&mut ca, 1, START, &frames, Some(START)).await;
    create(&mut cc).await;
    let timeline_dir = dirs[1].path().join(TENANT.to_string()).join(TIMELINE.to_string());
    assert!(!timeline_dir.exists(), "no directory before the first write");
    let pulled = pull_from(&mut cc, vec![address_of(&a)]).await.expect("pull");
    assert!(pulled.copied, "{pulled:?}");
    assert_eq!(state(&mut cc).await.flush_lsn, end.0);
    assert!(timeline_dir.join("control").is_file(), "the replica is in place");
    drop(cc);
    assert!(c.stop().await);
    std::fs::remove_dir_all(&timeline_dir).expect("lose the copy");
    let c = start(dirs[1].path()).await;
    assert!(
        c.node.timeline_keys().is_empty(),
        "a lost copy of a pulled replica is not made again empty"
    );
    for server in [a, c] {
        assert!(server.stop().await);
    }
}

/// A timeline that exists on C but is behind A past what A retains (C was elected in term 1, took a few
/// appends, and fell behind while A and B went on and removed old WAL) is replaced by A's copy; a timeline at
/// least as far as every source is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeline_behind_is_replaced_and_one_as_far_is_left_alone() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let a = start_pulling(dirs[0].path()).await;
    let b = start_pulling(dirs[1].path()).await;
    let c = start_pulling(dirs[2].path()).await;
    let (mut ca, mut cb, mut cc) = (a.client().await, b.client().await, c.client().await);
    let frames: Vec<Bytes> = (0..50u8).map(|i| frame(i + 30)).collect();
    let mut end = START;
    for client in [&mut ca, &mut cb, &mut cc] {
        create(client).await;
        elect(client, 1, &[], START).await;
        end = append_frames(client, 1, START, &frames[..5], None).await;
    }
    let behind = end;
    for client in [&mut ca, &mut cb] {
        end = append_frames(client, 1, behind, &frames[5..], None).await;
        report_horizon(client, end).await;
    }
    let state_a = state(&mut ca).await;
    assert!(
        state_a.oldest_lsn > behind.0,
        "A no longer has the WAL C needs: {state_a:?}"
    );
    // C's stream from its own position would be refused by A: it can only be rebuilt.
    let status = ca
        .copy_wal(pb::CopyWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: behind.0,
            end_lsn: end.0,
        })
        .await
        .expect_err("removed");
    assert_eq!(status.code(), Code::OutOfRange);

    // A stream open on C's old copy ends when the copy is replaced.
    let mut old_stream = cc
        .stream_wal(pb::StreamWalRequest {
            timeline: Some(timeline_ref()),
            start_lsn: behind.0,
        })
        .await
        .expect("stream wal")
        .into_inner();
    let pulled = pull_from(&mut cc, vec![address_of(&a), address_of(&b)])
        .await
        .expect("pull");
    assert!(pulled.copied, "{pulled:?}");
    let replica = state(&mut cc).await;
    assert_eq!(replica, state_a);
    let status = ended_with(&mut old_stream).await;
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert_eq!(
        copy_all(&mut cc, replica.oldest_lsn, replica.flush_lsn).await,
        copy_all(&mut ca, replica.oldest_lsn, replica.flush_lsn).await
    );
    let tenant_dir = dirs[2].path().join(TENANT.to_string());
    let mut names: Vec<_> = std::fs::read_dir(&tenant_dir)
        .expect("tenant dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![TIMELINE.to_string()],
        "no staging directory or tombstone left"
    );

    // A is at least as far as B and C: nothing to do, nothing changed.
    let files = snapshot(dirs[0].path());
    let kept = pull_from(&mut ca, vec![address_of(&b), address_of(&c)])
        .await
        .expect("pull");
    assert!(!kept.copied, "{kept:?}");
    assert_eq!(kept.state, Some(state_a));
    assert_eq!(snapshot(dirs[0].path()), files);
    for server in [a, b, c] {
        assert!(server.stop().await);
    }
}

/// Every bad pull request gets its precise status, and nothing is written: malformed ids, no source, a
/// duplicate or malformed address, an unreachable source, a source lacking the timeline, sources disagreeing
/// on the start LSN, a node inside its quiet period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pull_requests_get_precise_statuses_and_change_nothing() {
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let a = start_pulling(dirs[0].path()).await;
    let b = start_pulling(dirs[1].path()).await;
    let c = start_pulling(dirs[2].path()).await;
    let (mut ca, mut cb, mut cc) = (a.client().await, b.client().await, c.client().await);
    create(&mut ca).await;
    elect(&mut ca, 1, &[], START).await;
    append_frames(&mut ca, 1, START, &[frame(1), frame(2)], None).await;
    let before = snapshot(dirs[2].path());
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").to_string()
    };

    let expect = |result: Result<pb::PullTimelineResponse, tonic::Status>, code: Code, what: &str| {
        let status = result.expect_err(what);
        assert_eq!(status.code(), code, "{what}: {status:?}");
        status
    };
    for (tenant, timeline) in [
        ("ABC".to_string(), TIMELINE.to_string()),
        (TENANT.to_string(), "".to_string()),
        (TENANT.to_string(), "0123456789abcdef0123456789abcdeg".to_string()),
    ] {
        let result = cc
            .pull_timeline(pb::PullTimelineRequest {
                timeline: Some(pb::TimelineRef {
                    tenant_id: tenant,
                    timeline_id: timeline,
                }),
                sources: vec![address_of(&a)],
            })
            .await
            .map(|r| r.into_inner());
        expect(result, Code::InvalidArgument, "malformed id");
    }
    let result = cc
        .pull_timeline(pb::PullTimelineRequest {
            timeline: None,
            sources: vec![address_of(&a)],
        })
        .await
        .map(|r| r.into_inner());
    expect(result, Code::InvalidArgument, "no timeline");
    expect(pull_from(&mut cc, vec![]).await, Code::InvalidArgument, "no source");
    expect(
        pull_from(&mut cc, vec![address_of(&a), address_of(&a)]).await,
        Code::InvalidArgument,
        "a duplicate",
    );
    for bad in ["not an address", "127.0.0.1", "http://", "ftp:////x"] {
        expect(
            pull_from(&mut cc, vec![address_of(&a), bad.to_string()]).await,
            Code::InvalidArgument,
            bad,
        );
    }
    expect(
        pull_from(&mut cc, vec![address_of(&a); 9]).await,
        Code::InvalidArgument,
        "too many sources",
    );
    let status = expect(
        pull_from(&mut cc, vec![address_of(&a), closed_port.clone()]).await,
        Code::Unavailable,
        "an unreachable source",
    );
    assert!(status.message().contains(&closed_port), "{status:?}");
    let status = expect(
        pull_from(&mut cc, vec![address_of(&a), address_of(&b)]).await,
        Code::NotFound,
        "a source lacking the timeline",
    );
    assert!(status.message().contains(&address_of(&b)), "{status:?}");
    // B has the timeline at another start LSN.
    create_at(&mut cb, timeline_ref(), Lsn(START.0 + 0x1000)).await;
    expect(
        pull_from(&mut cc, vec![address_of(&a), address_of(&b)]).await,
        Code::FailedPrecondition,
        "sources disagreeing on the start",
    );
    // A node inside its quiet period does not rebuild what it does not know.
    let fresh = start(dirs[3].path()).await;
    let mut cf = fresh.client().await;
    let status = expect(
        pull_from(&mut cf, vec![address_of(&a)]).await,
        Code::Unavailable,
        "quiet period",
    );
    assert!(status.message().contains("quiet period"), "{status:?}");
    assert_eq!(
        snapshot(dirs[3].path()).keys().count(),
        2,
        "only the lock file and the (empty) creation log: {:?}",
        snapshot(dirs[3].path()).keys()
    );

    assert_eq!(snapshot(dirs[2].path()), before, "no refused pull wrote a file");
    assert_eq!(
        cc.get_state(timeline_ref()).await.expect_err("still missing").code(),
        Code::NotFound
    );
    for server in [a, b, c, fresh] {
        assert!(server.stop().await);
    }
}

/// A source that stops part way through the copy (here a proxy in front of A that forwards the first frame and
/// ends the stream): the pull fails with ABORTED, nothing is served and no staging directory is left; a retry
/// from the real sources completes. What a crash would leave is handled at open: a staging directory without
/// its control file is removed; a complete one with no timeline beside it (an install cut between its renames)
/// is installed; a complete one beside the timeline is removed and the timeline kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_cut_short_leaves_nothing_served_and_a_retry_completes() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let a = start_pulling(dirs[0].path()).await;
    let b = start_pulling(dirs[1].path()).await;
    let c = start_pulling(dirs[2].path()).await;
    let (mut ca, mut cb, mut cc) = (a.client().await, b.client().await, c.client().await);
    let frames: Vec<Bytes> = (0..30u8).map(|i| frame(i + 50)).collect();
    for client in [&mut ca, &mut cb] {
        create(client).await;
        elect(client, 1, &[], START).await;
    }
    append_frames(&mut cb, 1, START, &frames[..10], None).await;
    let end = append_frames(&mut ca, 1, START, &frames, None).await;
    let proxy = CuttingProxy::start(a.client().await).await;

    let status = pull_from(&mut cc, vec![proxy.address.clone(), address_of(&b)])
        .await
        .expect_err("cut short");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert_eq!(
        cc.get_state(timeline_ref()).await.expect_err("nothing served").code(),
        Code::NotFound
    );
    let staging = dirs[2]
        .path()
        .join(TENANT.to_string())
        .join(format!("{TIMELINE}{}", safekeeper::node::STAGING_SUFFIX));
    assert!(!staging.exists(), "the staging directory is removed");

    let pulled = pull_from(&mut cc, vec![address_of(&a), address_of(&b)])
        .await
        .expect("retry");
    assert!(pulled.copied);
    assert_eq!(state(&mut cc).await.flush_lsn, end.0);
    let expected = state(&mut cc).await;
    drop(cc);
    assert!(c.stop().await);

    // What a crash leaves. An install cut between its renames: the complete replica under the staging name,
    // no timeline directory.
    let timeline_dir = dirs[2].path().join(TENANT.to_string()).join(TIMELINE.to_string());
    std::fs::rename(&timeline_dir, &staging).expect("rename");
    let c = start(dirs[2].path()).await;
    let mut cc = c.client().await;
    assert_eq!(state(&mut cc).await, expected, "installed at open");
    assert!(!staging.exists());
    drop(cc);
    assert!(c.stop().await);

    // A complete staging directory beside the timeline (an install that had not begun): removed, the timeline
    // kept. And a copy cut short (segments, no control file) under another timeline's staging name: removed,
    // not served.
    copy_dir(&timeline_dir, &staging);
    let other = TimelineId(0x456);
    let other_staging = dirs[2]
        .path()
        .join(TENANT.to_string())
        .join(format!("{other}{}", safekeeper::node::STAGING_SUFFIX));
    copy_dir(&timeline_dir, &other_staging);
    std::fs::remove_file(other_staging.join(safekeeper::filestore::CONTROL_FILE_NAME)).expect("remove control");
    let c = start(dirs[2].path()).await;
    let mut cc = c.client().await;
    assert_eq!(state(&mut cc).await, expected);
    assert!(
        !staging.exists() && !other_staging.exists(),
        "staging directories removed"
    );
    assert_eq!(
        c.node.timeline_keys(),
        vec![(TENANT, TIMELINE)],
        "a partial copy is never served"
    );
    drop(cc);
    for server in [a, b, c] {
        assert!(server.stop().await);
    }
    drop(proxy);
}

/// `from` with its subdirectories copied to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

/// A safekeeper stand-in that forwards `GetState` to a real one and cuts `CopyWal` after its first frame.
struct CuttingProxy {
    address: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct CuttingService {
    upstream: Client,
}

impl CuttingProxy {
    async fn start(upstream: Client) -> CuttingProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let service = proto::safekeeper::safekeeper_server::SafekeeperServer::new(CuttingService { upstream });
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await;
        });
        CuttingProxy { address, task }
    }
}

type ProxyStream<T> = ReceiverStream<Result<T, tonic::Status>>;

fn unimplemented<T>() -> Result<tonic::Response<T>, tonic::Status> {
    Err(tonic::Status::unimplemented("a test proxy"))
}

#[tonic::async_trait]
impl proto::safekeeper::safekeeper_server::Safekeeper for CuttingService {
    async fn create_timeline(
        &self,
        _: tonic::Request<pb::CreateTimelineRequest>,
    ) -> Result<tonic::Response<pb::CreateTimelineResponse>, tonic::Status> {
        unimplemented()
    }
    async fn get_state(
        &self,
        request: tonic::Request<pb::TimelineRef>,
    ) -> Result<tonic::Response<pb::AcceptorState>, tonic::Status> {
        self.upstream.clone().get_state(request.into_inner()).await
    }
    async fn vote(
        &self,
        _: tonic::Request<pb::VoteRequest>,
    ) -> Result<tonic::Response<pb::VoteResponse>, tonic::Status> {
        unimplemented()
    }
    async fn elected(
        &self,
        _: tonic::Request<pb::ElectedRequest>,
    ) -> Result<tonic::Response<pb::ElectedResponse>, tonic::Status> {
        unimplemented()
    }
    type AppendStream = ProxyStream<pb::AppendResponse>;
    async fn append(
        &self,
        _: tonic::Request<tonic::Streaming<pb::AppendRequest>>,
    ) -> Result<tonic::Response<Self::AppendStream>, tonic::Status> {
        unimplemented()
    }
    async fn read_wal(
        &self,
        _: tonic::Request<pb::ReadWalRequest>,
    ) -> Result<tonic::Response<pb::WalChunk>, tonic::Status> {
        unimplemented()
    }
    type StreamWalStream = ProxyStream<pb::WalChunk>;
    async fn stream_wal(
        &self,
        _: tonic::Request<pb::StreamWalRequest>,
    ) -> Result<tonic::Response<Self::StreamWalStream>, tonic::Status> {
        unimplemented()
    }
    async fn report_horizons(
        &self,
        _: tonic::Request<pb::HorizonsRequest>,
    ) -> Result<tonic::Response<pb::HorizonsResponse>, tonic::Status> {
        unimplemented()
    }
    async fn delete_timeline(
        &self,
        _: tonic::Request<pb::TimelineRef>,
    ) -> Result<tonic::Response<pb::DeleteTimelineResponse>, tonic::Status> {
        unimplemented()
    }
    async fn delete_tenant(
        &self,
        _: tonic::Request<pb::DeleteTenantRequest>,
    ) -> Result<tonic::Response<pb::DeleteTenantResponse>, tonic::Status> {
        unimplemented()
    }
    async fn pull_timeline(
        &self,
        _: tonic::Request<pb::PullTimelineRequest>,
    ) -> Result<tonic::Response<pb::PullTimelineResponse>, tonic::Status> {
        unimplemented()
    }
    async fn list_timelines(
        &self,
        _: tonic::Request<pb::ListTimelinesRequest>,
    ) -> Result<tonic::Response<pb::ListTimelinesResponse>, tonic::Status> {
        unimplemented()
    }
    type CopyWalStream = ProxyStream<pb::WalChunk>;
    async fn copy_wal(
        &self,
        request: tonic::Request<pb::CopyWalRequest>,
    ) -> Result<tonic::Response<Self::CopyWalStream>, tonic::Status> {
        let mut upstream = self.upstream.clone().copy_wal(request.into_inner()).await?.into_inner();
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            if let Ok(Some(mut chunk)) = upstream.message().await {
                // The first frame only, then the stream ends as if the source had stopped.
                let body = u32::from_le_bytes(chunk.data[..4].try_into().expect("a frame header")) as usize;
                chunk.data = chunk.data.slice(..cambium_types::wal::FRAME_HEADER_BYTES + body);
                let _ = tx.send(Ok(chunk)).await;
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(rx)))
    }
}

/// The proposer end to end: the timeline's creation failed on C, so a `WalProposer` over A, B and C commits
/// with A and B (C answers `NOT_FOUND` and is asked again only every request timeout, not in a loop); A and B
/// remove old WAL; C is pulled mid-run; the proposer elects C from its state (its WAL starting above the
/// timeline's start), catches it up from A and B and streams to it; then A stops and commits go on with B and
/// C, whose WAL equals B's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposer_takes_in_a_replica_pulled_mid_run() {
    use walproposer::client::{WalProposer, WalProposerConfig};
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let a = start_pulling(dirs[0].path()).await;
    let b = start_pulling(dirs[1].path()).await;
    let c = start_pulling(dirs[2].path()).await;
    let (mut ca, mut cb, mut cc) = (a.client().await, b.client().await, c.client().await);
    create(&mut ca).await;
    create(&mut cb).await;
    let mut config = WalProposerConfig::new(
        vec![address_of(&a), address_of(&b), address_of(&c)],
        TENANT,
        TIMELINE,
        START,
    );
    config.proposer.request_timeout_ms = 200;
    let proposer = WalProposer::start(config).expect("start");
    let (term, epoch_start) = proposer.elect().await.expect("elected with A and B");
    assert_eq!(epoch_start, START);
    let mut end = START;
    for i in 0..60u8 {
        end = proposer.append(frame(i)).await.expect("committed on A and B");
    }
    // The pageserver made the first part durable remotely.
    for client in [&mut ca, &mut cb] {
        let removed = report_horizon(client, end).await;
        assert!(removed.oldest_lsn > START.0, "{removed:?}");
    }
    let pulled = pull_from(&mut cc, vec![address_of(&a), address_of(&b)])
        .await
        .expect("pull");
    assert!(pulled.copied);
    let replica = pulled.state.expect("state");
    assert!(
        replica.oldest_lsn > START.0,
        "the replica's WAL starts late: {replica:?}"
    );
    assert_eq!(replica.term, term);

    for i in 60..90u8 {
        end = proposer.append(frame(i)).await.expect("committed");
    }
    // C is taken in: it reaches the proposer's end.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = state(&mut cc).await;
        if now.flush_lsn == end.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "C never caught up: {now:?}, end {end}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Without A, B and C are the majority.
    drop(ca);
    assert!(a.stop().await);
    for i in 90..100u8 {
        end = proposer.append(frame(i)).await.expect("committed on B and C");
    }
    let (state_b, state_c) = (state(&mut cb).await, state(&mut cc).await);
    assert_eq!(state_c.flush_lsn, end.0);
    assert_eq!(state_c.history, state_b.history);
    assert_eq!(
        copy_all(&mut cc, replica.oldest_lsn, end.0).await,
        copy_all(&mut cb, replica.oldest_lsn, end.0).await
    );
    drop(proposer);
    for server in [b, c] {
        assert!(server.stop().await);
    }
}

/// The in-process transport carries the same contract as gRPC: a proposer calling three safekeepers' services
/// in this process commits, and its records are the ones a gRPC client reads back; a newer proposer over gRPC
/// fences it (the refusal's term travels as the same status metadata); a safekeeper whose node shuts down is
/// lost to it and the other two still commit for the newer one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposer_calling_its_safekeepers_in_process_keeps_the_contract() {
    use walproposer::client::{WalProposer, WalProposerConfig, WalProposerError};
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let mut servers = Vec::new();
    for dir in &dirs {
        servers.push(start(dir.path()).await);
    }
    let mut clients = Vec::new();
    for server in &servers {
        let mut client = server.client().await;
        create(&mut client).await;
        clients.push(client);
    }
    let addresses: Vec<String> = servers.iter().map(address_of).collect();
    let local = walproposer::LocalSafekeepers::new(
        tokio::runtime::Handle::current(),
        servers.iter().map(|server| {
            let (service, append) = safekeeper::service::SafekeeperService::new(Arc::clone(&server.node)).into_local();
            (address_of(server), service, append)
        }),
    );
    assert_eq!(local.len(), 3);
    assert!(local.get(&format!("http://{}", addresses[0])).is_some());
    let mut config = WalProposerConfig::new(addresses.clone(), TENANT, TIMELINE, START);
    config.proposer.request_timeout_ms = 200;
    config.local = local;
    let in_process = WalProposer::start(config).expect("start");
    let (term, _) = in_process.elect().await.expect("elected in process");
    let mut end = START;
    for i in 0..20u8 {
        end = in_process.append(frame(i)).await.expect("committed in process");
    }
    // What was committed in process is what the safekeepers serve over gRPC.
    let written = copy_all(&mut clients[0], START.0, end.0).await;
    assert_eq!(written, copy_all(&mut clients[1], START.0, end.0).await);
    assert!(!written.is_empty());

    let mut config = WalProposerConfig::new(addresses, TENANT, TIMELINE, START);
    config.proposer.request_timeout_ms = 200;
    let over_grpc = WalProposer::start(config).expect("start");
    let (newer, newer_start) = over_grpc.elect().await.expect("elected over gRPC");
    assert!(newer > term);
    assert_eq!(
        newer_start, end,
        "the newer proposer builds on what was committed in process"
    );
    match in_process.append(frame(200)).await {
        Err(WalProposerError::Fenced { term }) => assert_eq!(term, newer),
        other => panic!("the older proposer should be fenced, got {other:?}"),
    }
    // Its in-process services hold the nodes; they go with it.
    drop(in_process);

    // A node that shuts down is lost; the other two commit.
    let first = servers.remove(0);
    drop(clients.remove(0));
    assert!(first.stop().await);
    for i in 20..25u8 {
        end = over_grpc.append(frame(i)).await.expect("committed on two");
    }
    assert_eq!(state(&mut clients[0]).await.flush_lsn, end.0);
    drop(over_grpc);
    for server in servers {
        assert!(server.stop().await);
    }
}

/// An append stream opened in process (`InProcessAppend`, the proposer's messages handed over as they are)
/// keeps the stream's contract: acknowledgements in order, a refusal as the status gRPC gives (with its
/// metadata) ending the stream, a message over the bound ending it with nothing written, and a node that shut
/// down refusing to open one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_stream_opened_in_process_keeps_the_streams_contract() {
    use walproposer::InProcessAppend;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let mut client = server.client().await;
    create(&mut client).await;
    elect(&mut client, 1, &[], START).await;
    let service = safekeeper::service::SafekeeperService::new(Arc::clone(&server.node));

    // Two appends are acknowledged in order; a third that leaves a gap is refused as over gRPC.
    let (requests, requests_rx) = mpsc::channel(8);
    let mut acks = service.open_append(requests_rx).expect("opens");
    let (first, second) = (frame(1), frame(2));
    let middle = end_of(START, &first);
    let end = end_of(middle, &second);
    requests
        .send(append_message(0, 1, START, first, START))
        .await
        .expect("send");
    requests
        .send(append_message(1, 1, middle, second, START))
        .await
        .expect("send");
    for (request_id, flush_lsn) in [(0, middle), (1, end)] {
        let ack = tokio::time::timeout(WAIT, acks.recv())
            .await
            .expect("an answer")
            .expect("open")
            .expect("acknowledged");
        assert_eq!((ack.request_id, ack.term), (request_id, 1));
        assert!(ack.flush_lsn >= flush_lsn.0, "{} < {flush_lsn}", ack.flush_lsn);
    }
    let past_end = Lsn(end.0 + 8);
    requests
        .send(append_message(2, 1, past_end, frame(3), START))
        .await
        .expect("send");
    let status = tokio::time::timeout(WAIT, acks.recv())
        .await
        .expect("an answer")
        .expect("open")
        .expect_err("a gap is refused");
    assert_eq!(status.code(), Code::OutOfRange);
    assert_eq!(metadata_u64(&status, WRITE_LSN_METADATA), Some(end.0));
    assert!(
        tokio::time::timeout(WAIT, acks.recv()).await.expect("ends").is_none(),
        "the refusal ends the stream"
    );
    assert_eq!(state(&mut client).await.flush_lsn, end.0);

    // A message over the bound ends the stream before anything of it is written.
    let (requests, requests_rx) = mpsc::channel(8);
    let mut acks = service.open_append(requests_rx).expect("opens");
    let oversized = Bytes::from(vec![0u8; MESSAGE_BYTES_MAX + 1]);
    requests
        .send(append_message(0, 1, end, oversized, START))
        .await
        .expect("send");
    assert!(
        tokio::time::timeout(WAIT, acks.recv()).await.expect("ends").is_none(),
        "an oversized message ends the stream unanswered"
    );
    assert_eq!(state(&mut client).await.flush_lsn, end.0);

    // A node that shut down opens no stream.
    server.node.shut_down();
    let (_requests, requests_rx) = mpsc::channel(8);
    let refused = service.open_append(requests_rx).expect_err("a shut-down node refuses");
    assert_eq!(refused.code(), Code::Unavailable);
    drop((client, service));
    assert!(server.stop().await);
}
