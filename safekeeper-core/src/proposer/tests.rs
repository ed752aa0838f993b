//! The proposer against acceptors whose WAL starts late (a replica rebuilt from a peer, or WAL removed below
//! the pageserver's horizon), acceptors that keep refusing, and an acceptor that lost its disk. A tiny
//! deterministic network: every request is answered at once, appends are synced at once, and a node is up,
//! down (no answer) or missing the timeline (`NOT_FOUND` to everything).

use super::*;
use crate::acceptor::Acceptor;
use crate::dispatch::{serve, Served};
use crate::memstore::{MemControl, MemWal};
use crate::protocol::{ControlState, TermHistory, TermSwitch};
use cambium_types::{Key, Patch, Value, WalRecord};
use std::collections::VecDeque;

const START: Lsn = Lsn(0x100);
const TIMEOUT_MS: u64 = 100;

enum Node {
    Up(Acceptor<MemWal, MemControl>),
    Down,
    Missing,
    /// Takes votes and elections but refuses every append (a store that failed).
    FailedStore(Acceptor<MemWal, MemControl>),
}

struct Net {
    nodes: Vec<Node>,
    /// Every request sent, in order.
    sent: Vec<Envelope>,
}

impl Net {
    /// Delivers `out` and everything it leads to, at `now_ms`, until nothing more is sent.
    fn run(&mut self, proposer: &mut Proposer, out: Vec<Envelope>, now_ms: u64) {
        let mut queue: VecDeque<Envelope> = out.into();
        while let Some(envelope) = queue.pop_front() {
            assert!(self.sent.len() < 100_000, "the proposer never settles");
            self.sent.push(envelope.clone());
            let reply = match &mut self.nodes[envelope.to] {
                Node::Down => continue,
                Node::Missing => Reply::Refused(Refusal::Other("NotFound: no such timeline".into())),
                Node::Up(acceptor) => match serve(acceptor, envelope.request) {
                    Served::Reply(reply) => reply,
                    Served::NeedsSync => Reply::Append(acceptor.sync().expect("sync")),
                },
                Node::FailedStore(_) if matches!(envelope.request, Request::Append(_)) => {
                    Reply::Refused(Refusal::Other("Internal: safekeeper storage failure".into()))
                }
                Node::FailedStore(acceptor) => match serve(acceptor, envelope.request) {
                    Served::Reply(reply) => reply,
                    Served::NeedsSync => unreachable!("appends are refused above"),
                },
            };
            queue.extend(proposer.on_reply(envelope.id, reply, now_ms));
        }
    }

    fn acceptor(&self, index: usize) -> &Acceptor<MemWal, MemControl> {
        match &self.nodes[index] {
            Node::Up(acceptor) => acceptor,
            _ => panic!("node {index} is not up"),
        }
    }

    /// Requests sent to `to` since `from` (an index into `sent`).
    fn sent_to(&self, to: usize, from: usize) -> Vec<&Request> {
        self.sent[from..]
            .iter()
            .filter(|e| e.to == to)
            .map(|e| &e.request)
            .collect()
    }
}

fn frame(seed: u8) -> Bytes {
    WalRecord {
        commit_ts_us: u64::from(seed),
        db_size_pages: 1,
        entries: vec![(
            Key::page(0),
            Value::Delta(vec![Patch {
                offset: 0,
                data: Bytes::from(vec![seed; 20]),
            }]),
        )],
    }
    .to_frame()
    .expect("encodes")
}

/// Ten frames and the LSN after each.
fn wal() -> (Vec<u8>, Vec<Lsn>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for seed in 0..10 {
        bytes.extend_from_slice(&frame(seed));
        ends.push(Lsn(START.0 + bytes.len() as u64));
    }
    (bytes, ends)
}

/// An acceptor elected in term 1 holding `wal[oldest - START .. flush - START]` from `oldest`.
fn acceptor(wal: &[u8], oldest: Lsn, flush: Lsn, commit: Lsn) -> Node {
    let bytes = wal[(oldest.0 - START.0) as usize..(flush.0 - START.0) as usize].to_vec();
    let control = ControlState {
        term: 1,
        history: TermHistory(vec![TermSwitch { term: 1, lsn: START }]),
        commit_lsn: commit,
        timeline_start_lsn: START,
        remote_consistent_lsn: oldest,
    };
    Node::Up(Acceptor::new(control, MemWal::with_durable(oldest, bytes), MemControl::default()).expect("acceptor"))
}

fn proposer() -> Proposer {
    Proposer::new(
        ProposerConfig {
            acceptor_count: 3,
            request_timeout_ms: TIMEOUT_MS,
            election_timeout_ms: 10 * TIMEOUT_MS,
            in_flight_bytes_max: 1 << 20,
            append_bytes_max: 100,
            backlog_bytes_max: 1 << 20,
        },
        START,
    )
}

fn elect(proposer: &mut Proposer, net: &mut Net) -> (Term, Lsn) {
    let out = proposer.start_campaign(0);
    net.run(proposer, out, 0);
    match proposer.status() {
        Status::Leader { term, epoch_start_lsn } => (term, epoch_start_lsn),
        other => panic!("not elected: {other:?}"),
    }
}

fn reads_below(requests: &[&Request], lsn: Lsn) -> usize {
    requests
        .iter()
        .filter(|r| matches!(r, Request::ReadWal { start_lsn, .. } if *start_lsn < lsn))
        .count()
}

#[test]
fn catch_up_reads_go_only_to_peers_that_retain_the_wal() {
    let (bytes, ends) = wal();
    let (end, five, two) = (ends[9], ends[4], ends[1]);
    // 0 has everything; 1 lags at two frames; 2 is a replica whose WAL starts at five frames.
    let mut net = Net {
        nodes: vec![
            acceptor(&bytes, START, end, end),
            acceptor(&bytes, START, two, two),
            acceptor(&bytes, five, end, end),
        ],
        sent: Vec::new(),
    };
    let mut proposer = proposer();
    let (_, epoch_start) = elect(&mut proposer, &mut net);
    assert_eq!(epoch_start, end);
    assert_eq!(
        reads_below(&net.sent_to(2, 0), five),
        0,
        "never asked the replica for WAL it lacks"
    );
    assert!(
        reads_below(&net.sent_to(0, 0), five) > 0,
        "the lagging acceptor was caught up from 0"
    );
    assert_eq!(net.acceptor(1).state().flush_lsn, end);
    assert_eq!(net.acceptor(1).wal().durable_bytes(), &bytes[..]);
    let (record_end, out) = proposer.propose(frame(42)).expect("propose");
    net.run(&mut proposer, out, 1);
    assert_eq!(proposer.commit_lsn(), record_end);
}

/// When the only peer ahead of a lagging acceptor is a replica that lacks the WAL it needs, the proposer
/// does not ask the replica for it, does not count the lagging acceptor for commits (nothing is committed
/// that a majority does not hold), and once the acceptor is rebuilt from the replica it is elected again
/// from its new state after a request timeout and commits go on.
#[test]
fn a_peer_no_one_can_catch_up_waits_safely_until_it_is_rebuilt() {
    let (bytes, ends) = wal();
    let (end, five, two) = (ends[9], ends[4], ends[1]);
    let mut net = Net {
        nodes: vec![
            Node::Down,
            acceptor(&bytes, START, two, two),
            acceptor(&bytes, five, end, end),
        ],
        sent: Vec::new(),
    };
    let mut proposer = proposer();
    let (term, epoch_start) = elect(&mut proposer, &mut net);
    assert_eq!(epoch_start, end, "the replica is the donor");
    let (record_end, out) = proposer.propose(frame(42)).expect("propose");
    net.run(&mut proposer, out, 1);
    assert_eq!(
        reads_below(&net.sent_to(2, 0), five),
        0,
        "never asked the replica for WAL it lacks"
    );
    assert_eq!(net.acceptor(1).state().flush_lsn, two, "no one can catch it up");
    assert_eq!(
        net.acceptor(2).state().flush_lsn,
        record_end,
        "the replica took the new record"
    );
    assert!(
        proposer.commit_lsn() < record_end,
        "one acceptor holds the record: not committed ({})",
        proposer.describe()
    );
    // Nothing is retried in a loop while it waits.
    let quiet_from = net.sent.len();
    let out = proposer.tick(TIMEOUT_MS / 2);
    net.run(&mut proposer, out, TIMEOUT_MS / 2);
    assert_eq!(net.sent_to(1, quiet_from).len(), 0);

    // Acceptor 1 is rebuilt from the replica (what PullTimeline does): its WAL starts at five frames.
    let replica = net.acceptor(2);
    let control = replica.control().clone();
    let copy = MemWal::with_durable(five, replica.wal().durable_bytes().to_vec());
    net.nodes[1] = Node::Up(Acceptor::new(control, copy, MemControl::default()).expect("rebuilt"));
    let out = proposer.tick(2 * TIMEOUT_MS);
    net.run(&mut proposer, out, 2 * TIMEOUT_MS);
    assert_eq!(proposer.commit_lsn(), record_end, "{}", proposer.describe());
    let (next_end, out) = proposer.propose(frame(43)).expect("propose");
    net.run(&mut proposer, out, 2 * TIMEOUT_MS);
    assert_eq!(proposer.commit_lsn(), next_end);
    assert_eq!(net.acceptor(1).state().history.last_term(), term);
    assert_eq!(
        net.acceptor(1).wal().durable_bytes(),
        net.acceptor(2).wal().durable_bytes()
    );
}

#[test]
fn a_peer_that_keeps_refusing_is_asked_again_only_after_the_timeout() {
    let (bytes, ends) = wal();
    let end = ends[9];
    let mut net = Net {
        nodes: vec![
            acceptor(&bytes, START, end, end),
            acceptor(&bytes, START, end, end),
            Node::Missing,
        ],
        sent: Vec::new(),
    };
    let mut proposer = proposer();
    elect(&mut proposer, &mut net);
    let asked = net.sent_to(2, 0).len();
    assert!(asked <= 4, "{asked} requests to a timeline that is missing");
    let from = net.sent.len();
    let out = proposer.tick(TIMEOUT_MS - 1);
    net.run(&mut proposer, out, TIMEOUT_MS - 1);
    assert_eq!(net.sent_to(2, from).len(), 0, "backing off");
    let out = proposer.tick(TIMEOUT_MS);
    net.run(&mut proposer, out, TIMEOUT_MS);
    assert_eq!(net.sent_to(2, from).len(), 1, "asked once again after the timeout");
    // Commits go on with the other two.
    let (record_end, out) = proposer.propose(frame(42)).expect("propose");
    net.run(&mut proposer, out, TIMEOUT_MS);
    assert_eq!(proposer.commit_lsn(), record_end);
}

/// An acceptor that takes elections but refuses every append is not re-elected in a loop either.
#[test]
fn a_peer_that_takes_elections_but_refuses_appends_backs_off() {
    let (bytes, ends) = wal();
    let end = ends[9];
    let failed = match acceptor(&bytes, START, end, end) {
        Node::Up(acceptor) => Node::FailedStore(acceptor),
        _ => unreachable!("an acceptor"),
    };
    let mut net = Net {
        nodes: vec![
            acceptor(&bytes, START, end, end),
            acceptor(&bytes, START, end, end),
            failed,
        ],
        sent: Vec::new(),
    };
    let mut proposer = proposer();
    elect(&mut proposer, &mut net);
    let from = net.sent.len();
    let (record_end, out) = proposer.propose(frame(42)).expect("propose");
    net.run(&mut proposer, out, 1);
    assert_eq!(proposer.commit_lsn(), record_end);
    let asked = net.sent_to(2, from).len();
    assert!(asked <= 6, "{asked} requests to an acceptor whose store failed");
}

/// An acceptor that acknowledged a record and then lost its disk must not be counted for it: once its
/// connection is reported lost, the record commits only when a majority of live copies hold it.
#[test]
fn a_lost_connection_stops_counting_what_the_peer_acknowledged() {
    let (bytes, ends) = wal();
    let end = ends[9];
    let mut net = Net {
        nodes: (0..3).map(|_| acceptor(&bytes, START, end, end)).collect(),
        sent: Vec::new(),
    };
    let mut proposer = proposer();
    elect(&mut proposer, &mut net);
    // Only acceptor 2 takes the record.
    let held: Vec<Node> = (0..2)
        .map(|i| std::mem::replace(&mut net.nodes[i], Node::Down))
        .collect();
    let (record_end, out) = proposer.propose(frame(42)).expect("propose");
    net.run(&mut proposer, out, 1);
    assert!(proposer.commit_lsn() < record_end);
    // Acceptor 2 loses its disk (its timeline is gone); its connection breaks.
    net.nodes[2] = Node::Missing;
    let out = proposer.on_connection_lost(2, 2);
    net.run(&mut proposer, out, 2);
    // Acceptor 0 comes back and takes the record: one copy, not committed.
    let mut held = held.into_iter();
    net.nodes[0] = held.next().expect("node 0");
    let out = proposer.tick(TIMEOUT_MS + 2);
    net.run(&mut proposer, out, TIMEOUT_MS + 2);
    assert_eq!(net.acceptor(0).state().flush_lsn, record_end);
    assert!(
        proposer.commit_lsn() < record_end,
        "counted the acknowledgement of a lost disk: {}",
        proposer.describe()
    );
    // With acceptor 1 back, it is.
    net.nodes[1] = held.next().expect("node 1");
    let out = proposer.tick(2 * TIMEOUT_MS + 4);
    net.run(&mut proposer, out, 2 * TIMEOUT_MS + 4);
    assert_eq!(proposer.commit_lsn(), record_end, "{}", proposer.describe());
}

/// A leader with nothing in flight and every acceptor streaming is quiescent, and then a tick at any later time
/// sends nothing; anything in flight, a campaign or an acceptor down makes it not quiescent, and its ticks then do
/// the work they exist for.
#[test]
fn quiescent_means_a_tick_would_do_nothing() {
    let (bytes, ends) = wal();
    let end = ends[9];
    let mut net = Net {
        nodes: (0..3).map(|_| acceptor(&bytes, START, end, end)).collect(),
        sent: Vec::new(),
    };
    let mut proposer = proposer();
    assert!(proposer.is_quiescent(), "idle before the campaign");
    let out = proposer.start_campaign(0);
    assert!(!proposer.is_quiescent(), "campaigning");
    net.run(&mut proposer, out, 0);
    assert!(proposer.is_quiescent(), "elected and settled: {}", proposer.describe());
    let (record_end, out) = proposer.propose(frame(7)).expect("propose");
    assert!(!proposer.is_quiescent(), "an append in flight");
    net.run(&mut proposer, out, 1);
    assert_eq!(proposer.commit_lsn(), record_end);
    assert!(proposer.is_quiescent(), "committed everywhere: {}", proposer.describe());
    let sent = net.sent.len();
    for later_ms in [2, TIMEOUT_MS * 10, TIMEOUT_MS * 1000] {
        let out = proposer.tick(later_ms);
        assert!(
            out.is_empty(),
            "a quiescent proposer's tick at {later_ms} ms sent {out:?}"
        );
        assert!(proposer.is_quiescent());
    }
    assert_eq!(net.sent.len(), sent);
    // An acceptor down: the append to it stays unanswered, so it is not quiescent, and its tick does the work of
    // a timeout (here a catch-up read for the acceptor that did not answer).
    net.nodes[2] = Node::Down;
    let now_ms = TIMEOUT_MS * 1000 + 1;
    let (_, out) = proposer.propose(frame(8)).expect("propose");
    net.run(&mut proposer, out, now_ms);
    assert!(
        !proposer.is_quiescent(),
        "an append unanswered: {}",
        proposer.describe()
    );
    let out = proposer.tick(now_ms + TIMEOUT_MS);
    assert!(!out.is_empty(), "the tick after the timeout sent nothing");
}

/// Delivers `out` like [`Net::run`], the proposer's acceptor `i` being `nodes[members[i]]` (a safekeeper set of
/// a larger deployment).
fn run_on(nodes: &mut [Node], members: [usize; 3], proposer: &mut Proposer, out: Vec<Envelope>, now_ms: u64) {
    let mut queue: VecDeque<Envelope> = out.into();
    let mut delivered = 0;
    while let Some(envelope) = queue.pop_front() {
        delivered += 1;
        assert!(delivered < 100_000, "the proposer never settles");
        let reply = match &mut nodes[members[envelope.to]] {
            Node::Down => continue,
            Node::Missing => Reply::Refused(Refusal::Other("NotFound: no such timeline".into())),
            Node::Up(acceptor) | Node::FailedStore(acceptor) => match serve(acceptor, envelope.request) {
                Served::Reply(reply) => reply,
                Served::NeedsSync => Reply::Append(acceptor.sync().expect("sync")),
            },
        };
        queue.extend(proposer.on_reply(envelope.id, reply, now_ms));
    }
}

/// Ticks `proposer` through `ticks` request timeouts from `from_ms`, delivering on `members`; the time after.
fn settle(nodes: &mut [Node], members: [usize; 3], proposer: &mut Proposer, from_ms: u64, ticks: u64) -> u64 {
    let mut now = from_ms;
    for _ in 0..ticks {
        now += TIMEOUT_MS;
        let out = proposer.tick(now);
        run_on(nodes, members, proposer, out, now);
    }
    now
}

fn up(nodes: &[Node], index: usize) -> &Acceptor<MemWal, MemControl> {
    match &nodes[index] {
        Node::Up(acceptor) => acceptor,
        _ => panic!("node {index} is not up"),
    }
}

/// The control plane's replacement of a dead safekeeper in a timeline's set (`api::reconcile::replace_member`),
/// modelled on four acceptors A B C D: the writer on {A,B,C} commits while C is down; D is made a copy of the
/// most advanced of A and B (`PullTimeline`); then A is cut off and C comes back, so the old writer can reach B
/// and C, a majority of the old set, and a new writer on {A,B,D} can reach A and D, a majority of the new one.
/// Without the fence (a vote in a higher term on A and B before the copy) the old writer commits a record on
/// {B,C} that the new writer's election on {A,D} never sees: an acknowledged commit lost. With it, B refuses the
/// old writer (fenced, nothing committed), and the new writer starts past everything committed.
#[test]
fn a_set_replacement_needs_the_fence_on_the_survivors() {
    const A: usize = 0;
    const B: usize = 1;
    const C: usize = 2;
    const D: usize = 3;
    for fence in [false, true] {
        let (bytes, ends) = wal();
        let end = ends[9];
        let mut nodes: Vec<Node> = (0..3).map(|_| acceptor(&bytes, START, end, end)).collect();
        nodes.push(Node::Missing);
        let old_set = [A, B, C];
        let mut old = proposer();
        let out = old.start_campaign(0);
        run_on(&mut nodes, old_set, &mut old, out, 0);
        assert!(matches!(old.status(), Status::Leader { .. }), "{}", old.describe());
        let (first, out) = old.propose(frame(40)).expect("propose");
        run_on(&mut nodes, old_set, &mut old, out, 0);
        assert_eq!(old.commit_lsn(), first);

        // C dies; the old writer commits on A and B.
        let c = std::mem::replace(&mut nodes[C], Node::Down);
        let (second, out) = old.propose(frame(41)).expect("propose");
        run_on(&mut nodes, old_set, &mut old, out, 0);
        let now = settle(&mut nodes, old_set, &mut old, 0, 3);
        assert_eq!(old.commit_lsn(), second, "{}", old.describe());

        // The replacement: the fence (or not), then D copied from the most advanced of A and B.
        let fence_term = up(&nodes, A).control().term.max(up(&nodes, B).control().term) + 1;
        if fence {
            for survivor in [A, B] {
                let Node::Up(acceptor) = &mut nodes[survivor] else {
                    unreachable!("A and B are up")
                };
                match serve(acceptor, Request::Vote(VoteRequest { term: fence_term })) {
                    Served::Reply(Reply::Vote(vote)) => assert!(vote.granted, "{vote:?}"),
                    other => panic!("a vote answered {other:?}"),
                }
            }
        }
        let donor = [A, B]
            .into_iter()
            .max_by_key(|i| {
                let state = up(&nodes, *i).state();
                (state.history.last_term(), state.flush_lsn)
            })
            .expect("two survivors");
        let (control, wal) = {
            let donor = up(&nodes, donor);
            let mut control = donor.control().clone();
            control.term = up(&nodes, A).control().term.max(up(&nodes, B).control().term);
            (control, donor.wal().durable_bytes().to_vec())
        };
        nodes[D] = Node::Up(
            Acceptor::new(control, MemWal::with_durable(START, wal), MemControl::default()).expect("the copy"),
        );

        // A cut off, C back: the old writer tries once more on B and C.
        let a = std::mem::replace(&mut nodes[A], Node::Down);
        nodes[C] = c;
        let third = match old.propose(frame(42)) {
            Ok((third, out)) => {
                run_on(&mut nodes, old_set, &mut old, out, now);
                third
            }
            Err(error) => panic!("the old writer refused to propose: {error:?}"),
        };
        settle(&mut nodes, old_set, &mut old, now, 20);

        // A back, B cut off: the new writer on {A,B,D} is elected on A and D.
        nodes[A] = a;
        nodes[B] = Node::Down;
        let new_set = [A, B, D];
        let mut new = proposer();
        let out = new.start_campaign(0);
        run_on(&mut nodes, new_set, &mut new, out, 0);
        let Status::Leader { term, epoch_start_lsn } = new.status() else {
            panic!("the new writer was not elected: {}", new.describe());
        };
        if fence {
            assert!(
                old.commit_lsn() < third,
                "fenced on B, the old writer committed nothing more ({})",
                old.describe()
            );
            assert!(matches!(old.status(), Status::Fenced { .. }), "{}", old.describe());
            assert!(term > fence_term, "the new writer campaigns above the fence");
            assert!(
                epoch_start_lsn >= second,
                "everything committed is in the new term's WAL"
            );
            let (fourth, out) = new.propose(frame(43)).expect("propose");
            run_on(&mut nodes, new_set, &mut new, out, 0);
            assert_eq!(new.commit_lsn(), fourth, "commits go on on A and D");
        } else {
            // The anomaly the fence prevents: committed on {B,C}, unseen by the election on {A,D}.
            assert_eq!(old.commit_lsn(), third, "{}", old.describe());
            assert!(
                epoch_start_lsn < third,
                "without the fence the committed record is lost"
            );
        }
    }
}
