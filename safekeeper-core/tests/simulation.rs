//! Deterministic, seeded simulation of proposers and three acceptors.
//!
//! One thread, a discrete-event queue, simulated time. The network drops, delays (so reorders) and duplicates
//! messages; acceptors crash (losing unsynced WAL, sometimes leaving a torn prefix of it) and restart; new
//! proposers start campaigns while older ones are still writing (failover mid-stream). An acceptor loses its
//! disk (one at a time; the proposers see its connection break) and answers `NOT_FOUND` until, after the
//! quiet period (the proposers' election timeout), it is rebuilt from the most advanced of the other two as
//! `PullTimeline` does: their highest term, the source's history and commit LSN, and its WAL from a frame
//! boundary at or below every other acceptor's commit LSN (so the replica's WAL usually starts above the
//! timeline's start, as after the pageserver's horizon). A lost disk may take one of only two copies of a
//! committed record with it: the rebuild must restore it. After every event:
//! - the committed WAL prefix only ever grows and never changes;
//! - a majority of acceptors hold it durably, counting a lost disk as one (that failure is being repaired),
//!   and WAL below a replica's first LSN as held (it is what the other acceptors keep, and what the pageserver
//!   has made durable); no acceptor holds different bytes below its own commit LSN;
//! - every record a proposer saw committed is in it, at its LSN, byte for byte;
//! - at most one proposer is ever leader of a term.
//!
//! At the end the network heals and the last proposer must commit new records (liveness).
//!
//! `SIM_SEEDS=N` runs N seeds (default 60); `SIM_SEED=S` replays one. A failure names its seed.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use bytes::Bytes;
use cambium_types::{Key, Lsn, Patch, Value, WalRecord};
use safekeeper_core::acceptor::Acceptor;
use safekeeper_core::dispatch::{serve, Served};
use safekeeper_core::memstore::{MemControl, MemWal};
use safekeeper_core::proposer::{Envelope, ProposeError, Proposer, ProposerConfig, Refusal, Reply, Status};
use safekeeper_core::protocol::{ControlState, Term, WalStore};

const ACCEPTORS: usize = 3;
const START: Lsn = Lsn(0x1000);
/// The proposers' election timeout, and so the quiet period before a lost acceptor is rebuilt.
const ELECTION_TIMEOUT_MS: u64 = 2_000;

/// What the runs exercised, summed over seeds, so the test fails if the simulation stops reaching a fault.
#[derive(Default, Debug)]
struct Coverage {
    terms_led: usize,
    crashes: usize,
    torn_crashes: usize,
    proposers_fenced: usize,
    catch_up_reads: usize,
    truncating_elections: usize,
    committed_bytes: usize,
    /// Acceptors rebuilt from a peer after losing their disk.
    rebuilds: usize,
    /// Of those, the ones whose WAL starts above the timeline's start.
    rebuilds_starting_late: usize,
}

/// SplitMix64: small, seedable, good enough for choosing events.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

enum Event {
    /// A request arrives at an acceptor.
    ToAcceptor {
        proposer: usize,
        envelope: Envelope,
    },
    /// A reply arrives at a proposer.
    ToProposer {
        proposer: usize,
        id: u64,
        reply: Reply,
    },
    /// An acceptor syncs its written appends and acknowledges them.
    Sync {
        acceptor: usize,
    },
    Tick,
    Crash {
        acceptor: usize,
    },
    Restart {
        acceptor: usize,
    },
    /// The acceptor's disk is lost: its timeline is gone (it answers `NOT_FOUND`).
    LoseDisk {
        acceptor: usize,
    },
    /// The acceptor's timeline is rebuilt from its peers (`PullTimeline`).
    Rebuild {
        acceptor: usize,
    },
    NewProposer,
    Propose,
}

struct Node {
    live: Option<Acceptor<MemWal, MemControl>>,
    /// The disk while the node is down.
    disk: Option<(MemWal, MemControl)>,
    /// Appends written since the last sync: (proposer, request id).
    unsynced: Vec<(usize, u64)>,
    sync_scheduled: bool,
    /// Its disk was lost and it has not been rebuilt yet: it holds nothing and answers `NOT_FOUND`.
    lost: bool,
}

struct Sim {
    rng: Rng,
    now_ms: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: HashMap<u64, Event>,
    nodes: Vec<Node>,
    proposers: Vec<Proposer>,
    /// Frames each proposer was told are committed: (start LSN, frame).
    acknowledged: Vec<(Lsn, Bytes)>,
    /// Frames proposed and not yet seen committed, per proposer: end LSN -> (start, frame).
    pending: Vec<BTreeMap<Lsn, (Lsn, Bytes)>>,
    committed: Vec<u8>,
    leaders: HashMap<Term, usize>,
    record_seq: u64,
    drop_percent: u64,
    duplicate_percent: u64,
    healed: bool,
    /// Proposers that are gone (their computes died): they send and receive nothing.
    stopped: Vec<bool>,
    coverage: Coverage,
    /// In the healed phase, records are proposed only until then.
    proposing_until: u64,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed);
        let drop_percent = rng.below(20);
        let duplicate_percent = rng.below(10);
        let nodes = (0..ACCEPTORS)
            .map(|_| Node {
                live: Some(
                    Acceptor::new(ControlState::new(START), MemWal::new(START), MemControl::default())
                        .expect("acceptor"),
                ),
                disk: None,
                unsynced: Vec::new(),
                sync_scheduled: false,
                lost: false,
            })
            .collect();
        Sim {
            rng,
            now_ms: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            nodes,
            proposers: Vec::new(),
            acknowledged: Vec::new(),
            pending: Vec::new(),
            committed: Vec::new(),
            leaders: HashMap::new(),
            record_seq: 0,
            drop_percent,
            duplicate_percent,
            healed: false,
            stopped: Vec::new(),
            coverage: Coverage::default(),
            proposing_until: u64::MAX,
        }
    }

    fn at(&mut self, delay_ms: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((self.now_ms + delay_ms, self.seq)));
        self.events.insert(self.seq, event);
    }

    fn net_delay(&mut self) -> u64 {
        if self.healed {
            1 + self.rng.below(3)
        } else {
            1 + self.rng.below(40)
        }
    }

    fn send_all(&mut self, proposer: usize, envelopes: Vec<Envelope>) {
        for envelope in envelopes {
            if !self.healed && self.rng.chance(self.drop_percent) {
                continue;
            }
            if !self.healed && self.rng.chance(self.duplicate_percent) {
                let delay = self.net_delay();
                self.at(
                    delay,
                    Event::ToAcceptor {
                        proposer,
                        envelope: envelope.clone(),
                    },
                );
            }
            let delay = self.net_delay();
            self.at(delay, Event::ToAcceptor { proposer, envelope });
        }
    }

    fn reply(&mut self, proposer: usize, id: u64, reply: Reply) {
        if !self.healed && self.rng.chance(self.drop_percent) {
            return;
        }
        let delay = self.net_delay();
        self.at(delay, Event::ToProposer { proposer, id, reply });
    }

    fn new_record(&mut self, proposer: usize) -> Bytes {
        self.record_seq += 1;
        let tag = format!("p{proposer}-r{}", self.record_seq);
        let record = WalRecord {
            commit_ts_us: self.record_seq,
            db_size_pages: 1,
            entries: vec![(
                Key::page(0),
                Value::Delta(vec![Patch {
                    offset: 0,
                    data: Bytes::from(tag),
                }]),
            )],
        };
        record.to_frame().expect("valid record")
    }

    fn start_proposer(&mut self) {
        let config = ProposerConfig {
            acceptor_count: ACCEPTORS,
            request_timeout_ms: 150,
            election_timeout_ms: ELECTION_TIMEOUT_MS,
            in_flight_bytes_max: 2_000,
            append_bytes_max: 600,
            backlog_bytes_max: 8_000,
        };
        let mut proposer = Proposer::new(config, START);
        let out = proposer.start_campaign(self.now_ms);
        self.proposers.push(proposer);
        self.pending.push(BTreeMap::new());
        self.stopped.push(false);
        let index = self.proposers.len() - 1;
        self.send_all(index, out);
    }

    fn trace(&self, what: impl FnOnce() -> String) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("t={:>6} {}", self.now_ms, what());
        }
    }

    fn handle(&mut self, event: Event) -> Result<(), String> {
        match &event {
            Event::ToAcceptor { proposer, envelope } => match &envelope.request {
                safekeeper_core::proposer::Request::Elected(e) => self.trace(|| {
                    format!(
                        "p{proposer} -> a{} Elected term {} start {} history {:?}",
                        envelope.to, e.term, e.start_streaming_at, e.history.0
                    )
                }),
                safekeeper_core::proposer::Request::Vote(v) => {
                    self.trace(|| format!("p{proposer} -> a{} #{} Vote {}", envelope.to, envelope.id, v.term))
                }
                safekeeper_core::proposer::Request::GetState => self.trace(|| {
                    format!(
                        "p{proposer} -> a{} #{} GetState (flush now {})",
                        envelope.to,
                        envelope.id,
                        self.nodes[envelope.to]
                            .live
                            .as_ref()
                            .map(|l| l.state().flush_lsn)
                            .unwrap_or(Lsn(0))
                    )
                }),
                safekeeper_core::proposer::Request::ReadWal { term, start_lsn, .. } => {
                    self.trace(|| format!("p{proposer} -> a{} ReadWal term {term} at {start_lsn}", envelope.to))
                }
                safekeeper_core::proposer::Request::Append(a) => self.trace(|| {
                    format!(
                        "p{proposer} -> a{} Append term {} {}..{} (durable len {})",
                        envelope.to,
                        a.term,
                        a.begin_lsn,
                        Lsn(a.begin_lsn.0 + a.data.len() as u64),
                        self.nodes[envelope.to]
                            .live
                            .as_ref()
                            .map(|l| l.wal().durable_bytes().len())
                            .unwrap_or(0)
                    )
                }),
            },
            Event::ToProposer { proposer, id, reply } => match reply {
                Reply::State(st) => {
                    self.trace(|| format!("a? -> p{proposer} #{id} State term {} flush {}", st.term, st.flush_lsn))
                }
                Reply::Vote(v) => self.trace(|| {
                    format!(
                        "a? -> p{proposer} #{id} Vote granted {} term {} flush {}",
                        v.granted, v.state.term, v.state.flush_lsn
                    )
                }),
                Reply::Refused(r) => self.trace(|| format!("a? -> p{proposer} #{id} Refused {r:?}")),
                _ => {}
            },
            Event::Crash { acceptor } => self.trace(|| format!("crash a{acceptor}")),
            Event::LoseDisk { acceptor } => self.trace(|| format!("a{acceptor} loses its disk")),
            Event::Rebuild { acceptor } => self.trace(|| format!("rebuild a{acceptor}")),
            Event::Restart { acceptor } => self.trace(|| format!("restart a{acceptor}")),
            Event::NewProposer => self.trace(|| format!("new proposer p{}", self.proposers.len())),
            _ => {}
        }
        match event {
            Event::ToProposer { proposer, .. } | Event::ToAcceptor { proposer, .. } if self.stopped[proposer] => {}
            Event::ToAcceptor { proposer, envelope } => {
                if let safekeeper_core::proposer::Request::Elected(elected) = &envelope.request {
                    let flush = self.nodes[envelope.to]
                        .live
                        .as_ref()
                        .map_or(Lsn(0), |l| l.state().flush_lsn);
                    if elected.start_streaming_at < flush {
                        self.coverage.truncating_elections += 1;
                    }
                }
                if let safekeeper_core::proposer::Request::ReadWal { .. } = &envelope.request {
                    self.coverage.catch_up_reads += 1;
                }
                if self.nodes[envelope.to].lost {
                    let refusal = Refusal::Other("NotFound: timeline not found".into());
                    self.reply(proposer, envelope.id, Reply::Refused(refusal));
                    return self.check();
                }
                let Some(acceptor) = self.nodes[envelope.to].live.as_mut() else {
                    return Ok(());
                };
                match serve(acceptor, envelope.request) {
                    Served::Reply(reply) => self.reply(proposer, envelope.id, reply),
                    Served::NeedsSync => {
                        let node = &mut self.nodes[envelope.to];
                        node.unsynced.push((proposer, envelope.id));
                        if !node.sync_scheduled {
                            node.sync_scheduled = true;
                            let delay = 1 + self.rng.below(5);
                            self.at(delay, Event::Sync { acceptor: envelope.to });
                        }
                    }
                }
            }
            Event::Sync { acceptor } => {
                let node = &mut self.nodes[acceptor];
                node.sync_scheduled = false;
                let Some(live) = node.live.as_mut() else { return Ok(()) };
                let ack = live.sync().map_err(|e| format!("sync failed: {e}"))?;
                let waiting = std::mem::take(&mut node.unsynced);
                for (proposer, id) in waiting {
                    self.reply(proposer, id, Reply::Append(ack));
                }
            }
            Event::ToProposer { proposer, id, reply } => {
                let out = self.proposers[proposer].on_reply(id, reply, self.now_ms);
                self.send_all(proposer, out);
                self.after_proposer_step(proposer)?;
            }
            Event::Tick => {
                for p in (0..self.proposers.len())
                    .filter(|&p| !self.stopped[p])
                    .collect::<Vec<_>>()
                {
                    let out = self.proposers[p].tick(self.now_ms);
                    self.send_all(p, out);
                    if matches!(self.proposers[p].status(), Status::Failed(_)) && p + 1 == self.proposers.len() {
                        let out = self.proposers[p].start_campaign(self.now_ms);
                        self.send_all(p, out);
                    }
                    self.after_proposer_step(p)?;
                }
                self.at(10, Event::Tick);
            }
            Event::Propose if self.healed && self.now_ms > self.proposing_until => {}
            Event::Propose => {
                for p in (0..self.proposers.len())
                    .filter(|&p| !self.stopped[p])
                    .collect::<Vec<_>>()
                {
                    if !matches!(self.proposers[p].status(), Status::Leader { .. }) {
                        continue;
                    }
                    let frame = self.new_record(p);
                    match self.proposers[p].propose(frame.clone()) {
                        Ok((end, out)) => {
                            let start = Lsn(end.0 - frame.len() as u64);
                            self.pending[p].insert(end, (start, frame));
                            self.send_all(p, out);
                        }
                        Err(
                            ProposeError::Backpressure { .. } | ProposeError::NotLeader | ProposeError::Fenced { .. },
                        ) => {}
                        Err(e) => return Err(format!("propose failed: {e}")),
                    }
                }
                let delay = 1 + self.rng.below(8);
                self.at(delay, Event::Propose);
            }
            Event::Crash { acceptor } => {
                let node = &mut self.nodes[acceptor];
                if let Some(live) = node.live.take() {
                    let (mut wal, control) = live.into_parts();
                    let torn = if self.rng.chance(50) {
                        self.rng.below(200) as usize
                    } else {
                        0
                    };
                    self.coverage.crashes += 1;
                    if torn > 0 && wal.pending_bytes() > 0 {
                        self.coverage.torn_crashes += 1;
                    }
                    wal.crash(torn);
                    node.disk = Some((wal, control));
                    node.unsynced.clear();
                    let down_ms = 20 + self.rng.below(400);
                    self.at(down_ms, Event::Restart { acceptor });
                }
            }
            Event::Restart { acceptor } => {
                let node = &mut self.nodes[acceptor];
                if let Some((wal, control)) = node.disk.take() {
                    let state = control.state.clone().unwrap_or_else(|| ControlState::new(START));
                    node.live = Some(Acceptor::new(state, wal, control).map_err(|e| format!("restart failed: {e}"))?);
                }
            }
            Event::LoseDisk { acceptor } => self.lose_disk(acceptor),
            Event::Rebuild { acceptor } => {
                let others_up = (0..ACCEPTORS).all(|a| a == acceptor || self.nodes[a].live.is_some());
                if !others_up {
                    // PullTimeline needs every other safekeeper to answer: retry later.
                    self.at(100, Event::Rebuild { acceptor });
                    return self.check();
                }
                self.rebuild(acceptor);
            }
            Event::NewProposer => self.start_proposer(),
        }
        self.check()
    }

    /// Whether acceptor `a` durably holds the whole committed prefix (below its first LSN, it counts as held).
    fn holds_committed(&self, a: usize) -> bool {
        let (oldest, bytes) = self.durable_range(a);
        let committed_end = START.0 + self.committed.len() as u64;
        if self.nodes[a].lost || oldest.0 > committed_end || oldest.0 + (bytes.len() as u64) < committed_end {
            return self.committed.is_empty() && !self.nodes[a].lost;
        }
        let below = (committed_end - oldest.0) as usize;
        bytes[..below] == self.committed[(oldest.0 - START.0) as usize..]
    }

    /// One failure at a time: a disk is never lost while another lost one waits for its rebuild.
    fn lose_disk(&mut self, acceptor: usize) {
        if self.nodes.iter().any(|n| n.lost) {
            return;
        }
        let node = &mut self.nodes[acceptor];
        node.live = None;
        node.disk = None;
        node.unsynced.clear();
        node.lost = true;
        // Its connections break: the proposers stop counting what it acknowledged.
        for p in (0..self.proposers.len())
            .filter(|&p| !self.stopped[p])
            .collect::<Vec<_>>()
        {
            let out = self.proposers[p].on_connection_lost(acceptor, self.now_ms);
            self.send_all(p, out);
        }
        // The quiet period: any campaign that counted its lost votes is over by then.
        let delay = ELECTION_TIMEOUT_MS + 1 + self.rng.below(500);
        self.at(delay, Event::Rebuild { acceptor });
    }

    /// What `PullTimeline` does, over the other two acceptors' states and durable WAL.
    fn rebuild(&mut self, acceptor: usize) {
        if !self.nodes[acceptor].lost {
            return;
        }
        let others: Vec<usize> = (0..ACCEPTORS).filter(|&a| a != acceptor).collect();
        let states: Vec<_> = others
            .iter()
            .map(|&a| self.nodes[a].live.as_ref().expect("checked up").state())
            .collect();
        let best = (0..states.len())
            .rev()
            .max_by_key(|&i| states[i].log_position())
            .expect("two sources");
        let term = states.iter().map(|s| s.term).max().unwrap_or(0);
        let source = self.nodes[others[best]].live.as_ref().expect("checked up");
        let copy = &states[best];
        // The copy starts at a frame boundary at or below every other acceptor's commit LSN (in memory and as
        // persisted: truncation never goes below it), so no acceptor ever needs WAL below it from the replica,
        // as when the source removed WAL below the pageserver's horizon.
        let bound = others
            .iter()
            .flat_map(|&a| {
                let live = self.nodes[a].live.as_ref().expect("checked up");
                let persisted = live.control_store().state.as_ref().map_or(START, |s| s.commit_lsn);
                [live.control().commit_lsn, persisted]
            })
            .chain(std::iter::once(copy.commit_lsn))
            .min()
            .expect("values");
        let bytes = source.wal().durable_bytes();
        let source_oldest = source.wal().oldest_lsn();
        let mut boundaries = vec![source_oldest];
        let mut at = 0usize;
        while at < bytes.len() {
            let body = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("a frame header")) as usize;
            at += cambium_types::wal::FRAME_HEADER_BYTES + body;
            if source_oldest.0 + at as u64 <= bound.0 {
                boundaries.push(Lsn(source_oldest.0 + at as u64));
            }
        }
        let oldest = boundaries[self.rng.below(boundaries.len() as u64) as usize];
        let copied = bytes[(oldest.0 - source_oldest.0) as usize..].to_vec();
        let control = ControlState {
            term,
            history: copy.history.clone(),
            commit_lsn: copy.commit_lsn,
            timeline_start_lsn: START,
            remote_consistent_lsn: oldest,
        };
        let wal = MemWal::with_durable(oldest, copied);
        let store = MemControl {
            state: Some(control.clone()),
        };
        self.trace(|| format!("a{acceptor} rebuilt from a{} from {oldest}: {copy:?}", others[best]));
        let node = &mut self.nodes[acceptor];
        node.live = Some(Acceptor::new(control, wal, store).expect("a faithful copy opens"));
        node.lost = false;
        self.coverage.rebuilds += 1;
        if oldest > START {
            self.coverage.rebuilds_starting_late += 1;
        }
    }

    fn after_proposer_step(&mut self, p: usize) -> Result<(), String> {
        if let Status::Leader { term, .. } = self.proposers[p].status() {
            if let Some(&other) = self.leaders.get(&term) {
                if other != p {
                    return Err(format!("proposers {other} and {p} both lead term {term}"));
                }
            }
            if self.leaders.insert(term, p).is_none() {
                self.coverage.terms_led += 1;
            }
        }
        let commit = self.proposers[p].commit_lsn();
        if commit.0 > START.0 + self.committed.len() as u64 {
            let lens = self.durable_ends();
            self.trace(|| {
                format!(
                    "p{p} commit {commit} ({}) durable lens {lens:?}",
                    self.proposers[p].describe()
                )
            });
            self.extend_committed(commit, p)?;
        }
        let done: Vec<Lsn> = self.pending[p].range(..=commit).map(|(end, _)| *end).collect();
        for end in done {
            let (start, frame) = self.pending[p].remove(&end).expect("listed above");
            self.acknowledged.push((start, frame));
        }
        Ok(())
    }

    /// The acceptor's durable WAL and the LSN it starts at (nothing, for a lost disk).
    fn durable_range(&self, acceptor: usize) -> (Lsn, &[u8]) {
        let node = &self.nodes[acceptor];
        match (&node.live, &node.disk) {
            (Some(live), _) => (live.wal().oldest_lsn(), live.wal().durable_bytes()),
            (None, Some((wal, _))) => (wal.oldest_lsn(), wal.durable_bytes()),
            (None, None) => {
                assert!(node.lost, "a node is live, or has its disk, or lost it");
                (START, &[])
            }
        }
    }

    /// The durable length of each acceptor's WAL, from the timeline's start.
    fn durable_ends(&self) -> Vec<u64> {
        (0..ACCEPTORS)
            .map(|a| {
                let (oldest, bytes) = self.durable_range(a);
                oldest.0 - START.0 + bytes.len() as u64
            })
            .collect()
    }

    /// The proposer says `commit` is committed: a majority must hold the same bytes up to it (below a
    /// replica's first LSN, what the others hold).
    fn extend_committed(&mut self, commit: Lsn, p: usize) -> Result<(), String> {
        let committed_end = START.0 + self.committed.len() as u64;
        let mut candidates: HashMap<&[u8], Vec<usize>> = HashMap::new();
        for a in 0..ACCEPTORS {
            let (oldest, bytes) = self.durable_range(a);
            if self.nodes[a].lost || oldest.0 > committed_end || oldest.0 + (bytes.len() as u64) < commit.0 {
                continue;
            }
            let extension = &bytes[(committed_end - oldest.0) as usize..(commit.0 - oldest.0) as usize];
            candidates.entry(extension).or_default().push(a);
        }
        let Some((extension, holders)) = candidates
            .into_iter()
            .find(|(_, holders)| holders.len() > ACCEPTORS / 2)
        else {
            return Err(format!(
                "proposer {p} committed {commit} but no majority holds the same WAL up to it"
            ));
        };
        let extension = extension.to_vec();
        if let Some(a) = holders.iter().find(|&&a| !self.holds_committed(a)) {
            return Err(format!(
                "the committed prefix changed when proposer {p} committed {commit} (acceptor {a})"
            ));
        }
        self.committed.extend_from_slice(&extension);
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        let len = self.committed.len();
        let holding = (0..ACCEPTORS).filter(|&a| self.holds_committed(a)).count();
        let lost = self.nodes.iter().filter(|n| n.lost).count();
        if holding + lost < ACCEPTORS / 2 + 1 {
            return Err(format!(
                "only {holding} acceptors hold the committed prefix of {len} bytes"
            ));
        }
        for a in 0..ACCEPTORS {
            let (oldest, durable) = self.durable_range(a);
            let node = &self.nodes[a];
            let commit = match (&node.live, &node.disk) {
                (Some(live), _) => live.control().commit_lsn,
                (None, Some((_, control))) => control.state.as_ref().map_or(START, |s| s.commit_lsn),
                _ => START,
            };
            let upto = ((commit.0 - START.0) as usize).min(len);
            let from = (oldest.0 - START.0) as usize;
            if from > upto {
                return Err(format!(
                    "acceptor {a} holds WAL only from {oldest}, above its commit LSN {commit}"
                ));
            }
            if durable.len() < upto - from || durable[..upto - from] != self.committed[from..upto] {
                return Err(format!(
                    "acceptor {a} disagrees with the committed WAL below its commit LSN {commit}"
                ));
            }
        }
        for (start, frame) in &self.acknowledged {
            let from = (start.0 - START.0) as usize;
            if self.committed.get(from..from + frame.len()) != Some(&frame[..]) {
                return Err(format!("acknowledged record at {start} is not in the committed WAL"));
            }
        }
        Ok(())
    }

    fn run(&mut self, steps: usize) -> Result<(), String> {
        self.start_proposer();
        self.at(10, Event::Tick);
        self.at(5, Event::Propose);
        for step in 0..steps {
            if !self.healed && step % 50 == 0 {
                match self.rng.below(10) {
                    0..=2 => {
                        let acceptor = self.rng.below(ACCEPTORS as u64) as usize;
                        let delay = self.rng.below(30);
                        self.at(delay, Event::Crash { acceptor });
                    }
                    3 if self.proposers.len() < 6 => {
                        let delay = self.rng.below(30);
                        self.at(delay, Event::NewProposer);
                    }
                    4 => {
                        let acceptor = self.rng.below(ACCEPTORS as u64) as usize;
                        let delay = self.rng.below(30);
                        self.at(delay, Event::LoseDisk { acceptor });
                    }
                    _ => {}
                }
            }
            let Some(Reverse((time, seq))) = self.queue.pop() else {
                break;
            };
            self.now_ms = time;
            let event = self.events.remove(&seq).expect("queued events are stored");
            self.handle(event)
                .map_err(|e| format!("at step {step}, t={}ms: {e}", self.now_ms))?;
        }
        self.heal_and_check_progress()
    }

    /// Liveness: with every node up and a quiet network, the newest proposer (or a fresh one) commits again.
    fn heal_and_check_progress(&mut self) -> Result<(), String> {
        self.healed = true;
        for a in 0..ACCEPTORS {
            if self.nodes[a].live.is_none() && !self.nodes[a].lost {
                self.handle(Event::Restart { acceptor: a })?;
            }
        }
        self.stopped.iter_mut().for_each(|s| *s = true);
        // Every old proposer is gone, so no campaign can count a lost acceptor's votes: rebuild it now.
        for a in 0..ACCEPTORS {
            if self.nodes[a].lost {
                self.handle(Event::Rebuild { acceptor: a })?;
            }
        }
        self.start_proposer();
        let last = self.proposers.len() - 1;
        // Stop proposing after a while, so the final commit has no later record to carry it.
        self.proposing_until = self.now_ms + 2_000;
        let deadline = self.now_ms + 20_000;
        let before = self.acknowledged.len();
        while self.now_ms < deadline {
            let Some(Reverse((time, seq))) = self.queue.pop() else {
                break;
            };
            self.now_ms = time;
            let event = self.events.remove(&seq).expect("queued events are stored");
            if matches!(
                event,
                Event::Crash { .. } | Event::NewProposer | Event::LoseDisk { .. } | Event::Rebuild { .. }
            ) {
                continue;
            }
            self.handle(event)?;
            let progressed = self.acknowledged.len() > before + 5;
            // The safekeepers stream only WAL they know is committed, so they must learn every commit, even
            // the last one, with no later record to carry it.
            let commit = self.proposers[last].commit_lsn();
            let informed = (0..ACCEPTORS)
                .filter(|&a| {
                    self.nodes[a]
                        .live
                        .as_ref()
                        .is_some_and(|l| l.control().commit_lsn >= commit)
                })
                .count();
            let settled = self.now_ms > self.proposing_until + 1_000;
            if progressed
                && settled
                && informed == ACCEPTORS
                && matches!(self.proposers[last].status(), Status::Leader { .. })
            {
                return Ok(());
            }
        }
        let states: Vec<String> = (0..ACCEPTORS)
            .map(|a| format!("{:?}", self.nodes[a].live.as_ref().map(|l| l.state())))
            .collect();
        Err(format!(
            "no progress after healing: {}; acceptors {states:?}",
            self.proposers[last].describe()
        ))
    }
}

fn run_seed(seed: u64) -> Result<Coverage, String> {
    let mut sim = Sim::new(seed);
    sim.run(6_000)?;
    sim.coverage.proposers_fenced = sim
        .proposers
        .iter()
        .filter(|p| matches!(p.status(), Status::Fenced { .. }))
        .count();
    sim.coverage.committed_bytes = sim.committed.len();
    Ok(sim.coverage)
}

#[test]
fn simulation_keeps_every_committed_record() {
    if let Ok(seed) = std::env::var("SIM_SEED") {
        let seed: u64 = seed.parse().expect("SIM_SEED is a u64");
        if let Err(e) = run_seed(seed) {
            panic!("seed {seed}: {e}");
        }
        return;
    }
    let seeds: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let base: u64 = 0xC0FFEE;
    let mut total = Coverage::default();
    for i in 0..seeds {
        let seed = base + i;
        match run_seed(seed) {
            Ok(c) => {
                total.terms_led += c.terms_led;
                total.crashes += c.crashes;
                total.torn_crashes += c.torn_crashes;
                total.proposers_fenced += c.proposers_fenced;
                total.catch_up_reads += c.catch_up_reads;
                total.truncating_elections += c.truncating_elections;
                total.committed_bytes += c.committed_bytes;
                total.rebuilds += c.rebuilds;
                total.rebuilds_starting_late += c.rebuilds_starting_late;
            }
            Err(e) => panic!("seed {seed} failed (replay with SIM_SEED={seed}): {e}"),
        }
    }
    eprintln!("coverage over {seeds} seeds: {total:?}");
    if seeds >= 20 {
        let c = &total;
        for (name, count) in [
            ("terms led", c.terms_led),
            ("crashes", c.crashes),
            ("torn crashes", c.torn_crashes),
            ("fenced proposers", c.proposers_fenced),
            ("catch-up reads", c.catch_up_reads),
            ("truncating elections", c.truncating_elections),
            ("rebuilt replicas", c.rebuilds),
            ("rebuilt replicas starting late", c.rebuilds_starting_late),
        ] {
            assert!(count > 0, "the simulation never exercised {name}");
        }
        assert!(
            c.terms_led > seeds as usize,
            "failover is rare: {} terms over {seeds} seeds",
            c.terms_led
        );
    }
}
