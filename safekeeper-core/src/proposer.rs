//! The proposer: the writer's side of the protocol (the compute runs one per timeline). Sans-IO: it emits
//! [`Envelope`]s for the acceptors and consumes their [`Reply`]s and clock ticks; a driver (the gRPC client in
//! production, the simulator in tests) moves the messages.
//!
//! 1. **Campaign.** Ask every acceptor for its state; with a majority, take `term = max(term) + 1` and ask for
//!    votes. With a majority of votes, the voter with the highest `(last log term, flush LSN)` is the donor: the
//!    new WAL continues at the donor's flush LSN (the *epoch start*), and the history is the donor's plus
//!    `(term, epoch start)`.
//! 2. **Lead.** Each acceptor gets `Elected` with the LSN where its WAL stops agreeing with the new history,
//!    truncates there, and then receives appends: WAL below the proposer's buffer is read from a peer that
//!    already agrees with this term (the donor at first), the rest comes from the buffer of new records.
//! 3. **Commit.** `commit_lsn` is the highest LSN durable on a majority of acceptors *in this term*, and never
//!    below the epoch start (Raft's rule: older terms' WAL commits only through the current term's).
//! 4. **Fencing.** A reply carrying a higher term ends the leadership: nothing more is proposed, the caller
//!    gets [`ProposeError::Fenced`].
//!
//! **Acceptors whose WAL starts late.** An acceptor removes WAL below the pageserver's horizon, and a replica
//! rebuilt by `PullTimeline` holds WAL only from its source's oldest LSN: its state says where
//! (`AcceptorState::oldest_lsn`, at most its commit LSN). Its term history is its source's, so its divergence
//! point is found as for any acceptor, and never falls below its commit LSN (nor, then, below its oldest
//! LSN). A catch-up read is sent only to a streaming peer that retains the WAL asked for; a source that
//! refuses one is not asked again for that position. When no streaming peer retains what a lagging acceptor
//! needs, it stays out of the commit count (it is not fed, so its flush LSN does not move) and is re-elected
//! from its state every `request_timeout_ms`, which picks it up once it has been rebuilt.
//!
//! **Lost acceptors.** A driver reports a broken connection ([`Proposer::on_connection_lost`]): the
//! acceptor's acknowledgements stop counting until it is elected again from the state it reports then (a
//! process that lost its disk must not be credited with what it acknowledged before). An acceptor that
//! refuses twice, for a reason other than a gap, without acknowledging an append in between (a missing
//! timeline answers every request with `NOT_FOUND`; a failed store refuses every append) is asked again only
//! after `request_timeout_ms`, not at once.
//!
//! Bounds: one request of each kind in flight per acceptor for the campaign, `in_flight_bytes_max` of
//! unacknowledged appends per acceptor, `backlog_bytes_max` of uncommitted WAL in the buffer, and every request
//! times out after `request_timeout_ms` (then it is resent from the last acknowledged point).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use cambium_types::Lsn;

use crate::protocol::{
    divergence_lsn, AcceptorState, AppendRequest, AppendResponse, ElectedRequest, Term, TermHistory, TermSwitch,
    VoteRequest, VoteResponse,
};

/// Tuning of a proposer.
#[derive(Clone, Debug)]
pub struct ProposerConfig {
    /// Number of acceptors (3 in production).
    pub acceptor_count: usize,
    /// A request unanswered for this long is considered lost.
    pub request_timeout_ms: u64,
    /// A campaign that has not won after this long fails.
    pub election_timeout_ms: u64,
    /// Unacknowledged append bytes in flight to one acceptor.
    pub in_flight_bytes_max: usize,
    /// Largest append message.
    pub append_bytes_max: usize,
    /// Largest amount of uncommitted WAL held; `propose` refuses beyond it.
    pub backlog_bytes_max: usize,
}

impl Default for ProposerConfig {
    fn default() -> Self {
        ProposerConfig {
            acceptor_count: 3,
            request_timeout_ms: 2_000,
            election_timeout_ms: 10_000,
            in_flight_bytes_max: 8 * 1024 * 1024,
            append_bytes_max: 1024 * 1024,
            backlog_bytes_max: 64 * 1024 * 1024,
        }
    }
}

/// A request to an acceptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// What do you have?
    GetState,
    /// Vote for this term.
    Vote(VoteRequest),
    /// This term was won.
    Elected(ElectedRequest),
    /// Append WAL.
    Append(AppendRequest),
    /// Send up to `max_bytes` of whole frames of durable WAL from `start_lsn` (for catching another up), if
    /// still in `term`'s election (so the WAL read is that term's).
    ReadWal {
        /// The proposer's term.
        term: Term,
        /// First LSN.
        start_lsn: Lsn,
        /// Size bound.
        max_bytes: usize,
    },
}

/// Why an acceptor refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It promised a higher term.
    StaleTerm {
        /// That term.
        current: Term,
    },
    /// It has not heard of this term's election.
    NotElected,
    /// The append starts past its WAL end.
    Gap {
        /// Its WAL end.
        write_lsn: Lsn,
    },
    /// Anything else (bad input, storage failure, unknown timeline).
    Other(String),
}

/// An acceptor's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Answer to `GetState`.
    State(AcceptorState),
    /// Answer to `Vote`.
    Vote(VoteResponse),
    /// `Elected` was applied.
    Elected,
    /// Append acknowledged after a sync.
    Append(AppendResponse),
    /// WAL read for `ReadWal`.
    Wal {
        /// Where it starts.
        start_lsn: Lsn,
        /// Whole frames.
        data: Bytes,
    },
    /// The request was refused.
    Refused(Refusal),
}

/// A request addressed to acceptor `to`, tagged with an id its reply must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Acceptor index.
    pub to: usize,
    /// Request id.
    pub id: u64,
    /// The request.
    pub request: Request,
}

/// Why a record was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// Not (yet) the leader.
    #[error("the proposer is not elected")]
    NotLeader,
    /// Another proposer won a higher term; this one never writes again.
    #[error("fenced: another proposer won term {term}")]
    Fenced {
        /// The higher term.
        term: Term,
    },
    /// Too much uncommitted WAL; retry after commits advance.
    #[error("backlog full: {backlog_bytes} uncommitted bytes")]
    Backpressure {
        /// Uncommitted bytes held.
        backlog_bytes: usize,
    },
    /// The record is not one valid frame.
    #[error("not a single valid WAL frame")]
    BadFrame,
}

/// Where the proposer stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not started.
    Idle,
    /// Campaigning for a term.
    Campaigning,
    /// Elected for `term`; WAL continues at `epoch_start_lsn`.
    Leader {
        /// The term.
        term: Term,
        /// Where this term's WAL begins.
        epoch_start_lsn: Lsn,
    },
    /// Fenced by a higher term.
    Fenced {
        /// The higher term.
        term: Term,
    },
    /// The campaign failed (no majority in time).
    Failed(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    State,
    Vote,
    Elected,
    Append {
        end_lsn: Lsn,
    },
    /// A catch-up read for `peer` at `start_lsn` (sent to another acceptor).
    Read {
        peer: usize,
        start_lsn: Lsn,
    },
}

/// Whether `kind` is a catch-up read on behalf of `peer`.
fn is_read_for(kind: Kind, peer: usize) -> bool {
    matches!(kind, Kind::Read { peer: target, .. } if target == peer)
}

struct Outstanding {
    to: usize,
    kind: Kind,
    sent_ms: u64,
}

struct Campaign {
    started_ms: u64,
    term: Option<Term>,
    states: Vec<Option<AcceptorState>>,
    votes: Vec<Option<VoteResponse>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Its state is needed to compute where it diverges.
    NeedState,
    /// `GetState` or `Elected` is in flight.
    Waiting,
    /// Elected in this term: appends flow.
    Streaming,
    /// It refused again and again (its timeline may be missing): asked again after `until_ms`.
    Backoff {
        /// When to ask for its promise again.
        until_ms: u64,
    },
}

struct Peer {
    stage: Stage,
    /// Durable on this acceptor in this term (meaningful once streaming).
    flush_lsn: Lsn,
    /// Next byte to send.
    next_lsn: Lsn,
    in_flight_bytes: usize,
    /// The commit LSN last sent to this acceptor: when it falls behind and no WAL is left to send, an empty
    /// append carries the new one (safekeepers stream only committed WAL, so they must learn of commits).
    sent_commit_lsn: Lsn,
    /// The lowest LSN it serves (from its state when it was elected; it only grows): catch-up reads below it
    /// are sent to another peer.
    oldest_lsn: Lsn,
    /// Sources (by index) that refused a catch-up read for this acceptor at `read_refused_at`.
    read_refused_by: Vec<bool>,
    read_refused_at: Lsn,
    /// Since when no streaming peer retains the WAL this acceptor needs next.
    stuck_since_ms: Option<u64>,
    /// Its being stuck was logged (once until it makes progress again).
    stuck_reported: bool,
    /// Refusals in a row (other than gaps) since it last acknowledged an append.
    refusals_in_a_row: u32,
}

impl Peer {
    fn new(acceptor_count: usize) -> Peer {
        Peer {
            stage: Stage::NeedState,
            flush_lsn: Lsn(0),
            next_lsn: Lsn(0),
            in_flight_bytes: 0,
            sent_commit_lsn: Lsn(0),
            oldest_lsn: Lsn(0),
            read_refused_by: vec![false; acceptor_count],
            read_refused_at: Lsn(0),
            stuck_since_ms: None,
            stuck_reported: false,
            refusals_in_a_row: 0,
        }
    }
}

struct Leader {
    term: Term,
    history: TermHistory,
    epoch_start_lsn: Lsn,
    /// Frames not yet committed (and possibly some committed ones), contiguous from `buffer_start_lsn`.
    frames: VecDeque<(Lsn, Bytes)>,
    buffer_start_lsn: Lsn,
    end_lsn: Lsn,
    peers: Vec<Peer>,
}

enum Phase {
    Idle,
    Campaign(Campaign),
    Leader(Leader),
    Fenced(Term),
    Failed(String),
}

/// The proposer state machine for one timeline.
pub struct Proposer {
    config: ProposerConfig,
    timeline_start_lsn: Lsn,
    phase: Phase,
    outstanding: BTreeMap<u64, Outstanding>,
    next_id: u64,
    commit_lsn: Lsn,
    now_ms: u64,
}

fn majority(count: usize) -> usize {
    count / 2 + 1
}

impl Proposer {
    /// A proposer for a timeline whose WAL starts at `timeline_start_lsn`.
    pub fn new(config: ProposerConfig, timeline_start_lsn: Lsn) -> Proposer {
        assert!(config.acceptor_count >= 1, "a proposer needs acceptors");
        Proposer {
            config,
            timeline_start_lsn,
            phase: Phase::Idle,
            outstanding: BTreeMap::new(),
            next_id: 1,
            commit_lsn: timeline_start_lsn,
            now_ms: 0,
        }
    }

    /// Where it stands.
    pub fn status(&self) -> Status {
        match &self.phase {
            Phase::Idle => Status::Idle,
            Phase::Campaign(_) => Status::Campaigning,
            Phase::Leader(leader) => Status::Leader {
                term: leader.term,
                epoch_start_lsn: leader.epoch_start_lsn,
            },
            Phase::Fenced(term) => Status::Fenced { term: *term },
            Phase::Failed(reason) => Status::Failed(reason.clone()),
        }
    }

    /// The highest LSN known committed (durable on a majority in this term).
    pub fn commit_lsn(&self) -> Lsn {
        self.commit_lsn
    }

    /// The end of the WAL proposed so far (the commit point of the last record), once elected.
    pub fn end_lsn(&self) -> Option<Lsn> {
        match &self.phase {
            Phase::Leader(leader) => Some(leader.end_lsn),
            _ => None,
        }
    }

    /// A one-line description of the leader's view of each acceptor, for logs and test failures.
    pub fn describe(&self) -> String {
        match &self.phase {
            Phase::Leader(leader) => {
                let peers: Vec<String> = leader
                    .peers
                    .iter()
                    .map(|p| {
                        format!(
                            "{:?} flush={} next={} in_flight={}",
                            p.stage, p.flush_lsn, p.next_lsn, p.in_flight_bytes
                        )
                    })
                    .collect();
                format!(
                    "term {} epoch {} buffer {}..{} commit {} outstanding {} peers [{}]",
                    leader.term,
                    leader.epoch_start_lsn,
                    leader.buffer_start_lsn,
                    leader.end_lsn,
                    self.commit_lsn,
                    self.outstanding.len(),
                    peers.join("; ")
                )
            }
            _ => format!("{:?}", self.status()),
        }
    }

    /// Requests in flight (for drivers and tests).
    pub fn outstanding_count(&self) -> usize {
        self.outstanding.len()
    }

    fn send(&mut self, out: &mut Vec<Envelope>, to: usize, kind: Kind, request: Request) {
        let id = self.next_id;
        self.next_id += 1;
        self.outstanding.insert(
            id,
            Outstanding {
                to,
                kind,
                sent_ms: self.now_ms,
            },
        );
        out.push(Envelope { to, id, request });
    }

    /// Starts (or restarts) a campaign: asks every acceptor for its state.
    pub fn start_campaign(&mut self, now_ms: u64) -> Vec<Envelope> {
        self.now_ms = self.now_ms.max(now_ms);
        if let Phase::Fenced(_) = self.phase {
            return Vec::new();
        }
        self.outstanding.clear();
        let n = self.config.acceptor_count;
        self.phase = Phase::Campaign(Campaign {
            started_ms: self.now_ms,
            term: None,
            states: vec![None; n],
            votes: vec![None; n],
        });
        let mut out = Vec::new();
        for to in 0..n {
            self.send(&mut out, to, Kind::State, Request::GetState);
        }
        out
    }

    /// Takes one record (a single whole frame). Returns its end LSN: it is committed once `commit_lsn()`
    /// reaches it.
    pub fn propose(&mut self, frame: Bytes) -> Result<(Lsn, Vec<Envelope>), ProposeError> {
        let leader = match &mut self.phase {
            Phase::Leader(leader) => leader,
            Phase::Fenced(term) => return Err(ProposeError::Fenced { term: *term }),
            _ => return Err(ProposeError::NotLeader),
        };
        match cambium_types::wal::scan_frames(&frame, leader.end_lsn) {
            (valid, None) if valid == frame.len() && !frame.is_empty() => {}
            _ => return Err(ProposeError::BadFrame),
        }
        let backlog_bytes = (leader.end_lsn.0 - self.commit_lsn.max(leader.buffer_start_lsn).0) as usize;
        if backlog_bytes + frame.len() > self.config.backlog_bytes_max {
            return Err(ProposeError::Backpressure { backlog_bytes });
        }
        let start = leader.end_lsn;
        leader.end_lsn = Lsn(start.0 + frame.len() as u64);
        leader.frames.push_back((start, frame));
        let end = leader.end_lsn;
        let mut out = Vec::new();
        for peer in 0..self.config.acceptor_count {
            self.pump(peer, &mut out);
        }
        Ok((end, out))
    }

    /// Handles a reply to request `id`. Replies to unknown (timed out, superseded) requests are ignored.
    pub fn on_reply(&mut self, id: u64, reply: Reply, now_ms: u64) -> Vec<Envelope> {
        self.now_ms = self.now_ms.max(now_ms);
        let mut out = Vec::new();
        let Some(request) = self.outstanding.remove(&id) else {
            return out;
        };
        if let Reply::Refused(Refusal::StaleTerm { current }) = &reply {
            if let Some(term) = self.current_term() {
                if *current >= term && matches!(self.phase, Phase::Leader(_)) {
                    tracing::warn!(term, higher = current, "fenced by a higher term");
                    self.phase = Phase::Fenced(*current);
                    self.outstanding.clear();
                    return out;
                }
            }
        }
        match &mut self.phase {
            Phase::Campaign(_) => self.on_campaign_reply(request, reply, &mut out),
            Phase::Leader(_) => self.on_leader_reply(request, reply, &mut out),
            _ => {}
        }
        out
    }

    fn current_term(&self) -> Option<Term> {
        match &self.phase {
            Phase::Leader(leader) => Some(leader.term),
            Phase::Campaign(campaign) => campaign.term,
            _ => None,
        }
    }

    fn on_campaign_reply(&mut self, request: Outstanding, reply: Reply, out: &mut Vec<Envelope>) {
        let n = self.config.acceptor_count;
        let Phase::Campaign(campaign) = &mut self.phase else {
            return;
        };
        match (request.kind, reply) {
            (Kind::State, Reply::State(state)) if campaign.term.is_none() => {
                campaign.states[request.to] = Some(state);
                let known: Vec<&AcceptorState> = campaign.states.iter().flatten().collect();
                if known.len() >= majority(n) {
                    let term = known.iter().map(|s| s.term).max().unwrap_or(0) + 1;
                    campaign.term = Some(term);
                    self.outstanding.retain(|_, o| o.kind != Kind::State);
                    for to in 0..n {
                        self.send(out, to, Kind::Vote, Request::Vote(VoteRequest { term }));
                    }
                }
            }
            (Kind::Vote, Reply::Vote(vote)) => {
                let Some(term) = campaign.term else { return };
                if !vote.granted {
                    // Someone promised a term at least ours: campaign again above it.
                    if vote.state.term >= term {
                        let restart = self.start_campaign(self.now_ms);
                        out.extend(restart);
                    }
                    return;
                }
                campaign.votes[request.to] = Some(vote);
                if campaign.votes.iter().flatten().count() >= majority(n) {
                    self.become_leader(term, out);
                }
            }
            _ => {}
        }
    }

    fn become_leader(&mut self, term: Term, out: &mut Vec<Envelope>) {
        let Phase::Campaign(campaign) = &self.phase else { return };
        let votes: Vec<(usize, &VoteResponse)> = campaign
            .votes
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
            .collect();
        let (donor, donor_vote) = votes
            .iter()
            .max_by_key(|(i, v)| (v.state.last_log_term(), v.state.flush_lsn, std::cmp::Reverse(*i)))
            .copied()
            .expect("a majority of votes is not empty");
        let epoch_start_lsn = donor_vote.state.flush_lsn;
        let history = donor_vote.state.history.with(TermSwitch {
            term,
            lsn: epoch_start_lsn,
        });
        let vote_states: Vec<Option<AcceptorState>> = campaign
            .votes
            .iter()
            .map(|v| v.as_ref().map(|v| v.state.clone()))
            .collect();
        tracing::info!(term, donor, epoch_start = %epoch_start_lsn, "elected");
        self.commit_lsn = self.commit_lsn.max(donor_vote.state.commit_lsn.min(epoch_start_lsn));
        let peers = (0..self.config.acceptor_count)
            .map(|_| Peer::new(self.config.acceptor_count))
            .collect();
        self.outstanding.clear();
        self.phase = Phase::Leader(Leader {
            term,
            history,
            epoch_start_lsn,
            frames: VecDeque::new(),
            buffer_start_lsn: epoch_start_lsn,
            end_lsn: epoch_start_lsn,
            peers,
        });
        for (peer, state) in vote_states.into_iter().enumerate() {
            match state {
                Some(state) => self.send_elected(peer, &state, out),
                None => self.request_promise(peer, out),
            }
        }
    }

    /// Asks `peer` to promise our term. Its WAL can be judged only from a state taken *after* that promise:
    /// before it, an older proposer may still append (and commit) there.
    fn request_promise(&mut self, peer: usize, out: &mut Vec<Envelope>) {
        let Phase::Leader(leader) = &mut self.phase else { return };
        leader.peers[peer].stage = Stage::Waiting;
        let term = leader.term;
        self.send(out, peer, Kind::Vote, Request::Vote(VoteRequest { term }));
    }

    fn send_elected(&mut self, peer: usize, state: &AcceptorState, out: &mut Vec<Envelope>) {
        let Phase::Leader(leader) = &mut self.phase else { return };
        let start = divergence_lsn(
            &state.history,
            state.flush_lsn,
            &leader.history,
            leader.end_lsn,
            self.timeline_start_lsn,
        );
        let p = &mut leader.peers[peer];
        p.stage = Stage::Waiting;
        p.flush_lsn = start;
        p.next_lsn = start;
        p.in_flight_bytes = 0;
        p.sent_commit_lsn = Lsn(0);
        p.oldest_lsn = state.oldest_lsn;
        p.read_refused_by.iter_mut().for_each(|refused| *refused = false);
        p.stuck_since_ms = None;
        let request = ElectedRequest {
            term: leader.term,
            history: leader.history.clone(),
            start_streaming_at: start,
        };
        self.send(out, peer, Kind::Elected, Request::Elected(request));
    }

    fn on_leader_reply(&mut self, request: Outstanding, reply: Reply, out: &mut Vec<Envelope>) {
        let peer = request.to;
        match (request.kind, reply) {
            (Kind::Vote, Reply::Vote(vote)) => {
                let Phase::Leader(leader) = &self.phase else { return };
                let term = leader.term;
                if vote.state.term > term {
                    tracing::warn!(term, higher = vote.state.term, "fenced by a higher term");
                    self.phase = Phase::Fenced(vote.state.term);
                    self.outstanding.clear();
                    return;
                }
                // Granted now, or promised to us already (a duplicate): either way the state is post-promise.
                self.send_elected(peer, &vote.state, out);
            }
            (Kind::Elected, Reply::Elected) => {
                let Phase::Leader(leader) = &mut self.phase else { return };
                leader.peers[peer].stage = Stage::Streaming;
                self.advance_commit();
                self.pump(peer, out);
            }
            (Kind::Append { end_lsn }, Reply::Append(ack)) => {
                let Phase::Leader(leader) = &mut self.phase else { return };
                if ack.term != leader.term {
                    return;
                }
                let end_lsn_proposed = leader.end_lsn;
                let p = &mut leader.peers[peer];
                if p.stage != Stage::Streaming {
                    return;
                }
                if ack.flush_lsn > end_lsn_proposed {
                    // More than was ever proposed in this term: the acceptor is confused. Never trust it for a
                    // commit; start its election over.
                    tracing::error!(peer, flush = %ack.flush_lsn, end = %end_lsn_proposed, "acceptor acknowledged WAL never sent");
                    self.reset_peer(peer, out);
                    return;
                }
                p.flush_lsn = p.flush_lsn.max(ack.flush_lsn);
                // An acknowledged append, not just an election, ends a run of refusals: an acceptor that takes
                // elections and refuses every append (a failed store) backs off too.
                p.refusals_in_a_row = 0;
                if ack.flush_lsn < end_lsn {
                    // The acceptor did not keep all of it (it restarted and lost unsynced data): resend.
                    p.next_lsn = p.flush_lsn;
                    self.forget_appends_to(peer);
                }
                self.refresh_in_flight(peer);
                self.advance_commit();
                for peer in 0..self.config.acceptor_count {
                    self.pump(peer, out);
                }
            }
            (Kind::Read { peer: target, .. }, Reply::Wal { start_lsn, data }) => {
                let Phase::Leader(leader) = &mut self.phase else { return };
                let term = leader.term;
                let p = &mut leader.peers[target];
                if p.stage == Stage::Streaming && p.next_lsn == start_lsn && !data.is_empty() {
                    let end_lsn = Lsn(start_lsn.0 + data.len() as u64);
                    p.next_lsn = end_lsn;
                    p.stuck_since_ms = None;
                    p.stuck_reported = false;
                    let append = AppendRequest {
                        term,
                        begin_lsn: start_lsn,
                        data,
                        commit_lsn: self.commit_lsn,
                    };
                    self.send(out, target, Kind::Append { end_lsn }, Request::Append(append));
                    self.refresh_in_flight(target);
                }
                self.pump(target, out);
            }
            (Kind::Append { .. }, Reply::Refused(Refusal::Gap { write_lsn })) => {
                let Phase::Leader(leader) = &mut self.phase else { return };
                let end_lsn_proposed = leader.end_lsn;
                let p = &mut leader.peers[peer];
                if p.stage == Stage::Streaming {
                    if write_lsn > end_lsn_proposed {
                        tracing::error!(peer, write = %write_lsn, end = %end_lsn_proposed, "acceptor reports WAL never sent");
                        self.reset_peer(peer, out);
                        return;
                    }
                    if write_lsn < p.flush_lsn {
                        // It acknowledged more than it now holds: its disk was lost (or it was rebuilt). What
                        // it acknowledged no longer counts; elect it again from what it has.
                        tracing::error!(peer, write = %write_lsn, acknowledged = %p.flush_lsn, "acceptor lost acknowledged WAL");
                        self.reset_peer(peer, out);
                        return;
                    }
                    p.next_lsn = write_lsn.max(p.flush_lsn);
                    self.forget_appends_to(peer);
                    self.pump(peer, out);
                }
            }
            (
                Kind::Read {
                    peer: target,
                    start_lsn,
                },
                Reply::Refused(refusal),
            ) => {
                // The source could not serve it (it may have removed that WAL, or be a replica that never had
                // it): ask another source for this position.
                let Phase::Leader(leader) = &mut self.phase else { return };
                let p = &mut leader.peers[target];
                if p.next_lsn == start_lsn {
                    if p.read_refused_at != start_lsn {
                        p.read_refused_by.iter_mut().for_each(|refused| *refused = false);
                        p.read_refused_at = start_lsn;
                    }
                    p.read_refused_by[peer] = true;
                }
                tracing::debug!(source = peer, peer = target, %start_lsn, ?refusal, "catch-up read refused");
                self.pump(target, out);
            }
            (_, Reply::Refused(refusal)) => {
                // The acceptor lost track of this term's election (or refused for another reason): start it over,
                // at once the first time, after the request timeout when it keeps refusing (a timeline missing
                // there answers everything with NOT_FOUND: re-asking at once would spin).
                let Phase::Leader(leader) = &mut self.phase else { return };
                let p = &mut leader.peers[peer];
                p.refusals_in_a_row = p.refusals_in_a_row.saturating_add(1);
                if p.refusals_in_a_row >= 2 {
                    let until_ms = self.now_ms + self.config.request_timeout_ms;
                    tracing::debug!(peer, ?refusal, until_ms, "acceptor keeps refusing; asking again later");
                    self.back_off(peer, until_ms);
                } else {
                    tracing::debug!(peer, ?refusal, "acceptor refused; re-sending its election");
                    self.reset_peer(peer, out);
                }
            }
            _ => {}
        }
    }

    fn in_flight_of(&self, peer: usize) -> usize {
        let Phase::Leader(leader) = &self.phase else { return 0 };
        let flush = leader.peers[peer].flush_lsn;
        self.outstanding
            .values()
            .filter(|o| o.to == peer)
            .filter_map(|o| match o.kind {
                Kind::Append { end_lsn } => Some(end_lsn.0.saturating_sub(flush.0) as usize),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    fn refresh_in_flight(&mut self, peer: usize) {
        let in_flight = self.in_flight_of(peer);
        if let Phase::Leader(leader) = &mut self.phase {
            leader.peers[peer].in_flight_bytes = in_flight;
        }
    }

    /// Whether a catch-up read for `peer` is in flight (from whichever source).
    fn is_reading(&self, peer: usize) -> bool {
        self.outstanding.values().any(|o| is_read_for(o.kind, peer))
    }

    /// Drops the appends to `peer` and the catch-up reads for it.
    fn forget_appends_to(&mut self, peer: usize) {
        self.outstanding
            .retain(|_, o| !((o.to == peer && matches!(o.kind, Kind::Append { .. })) || is_read_for(o.kind, peer)));
        if let Phase::Leader(leader) = &mut self.phase {
            leader.peers[peer].in_flight_bytes = 0;
            // What was sent may be lost: tell the commit LSN again with the next append.
            leader.peers[peer].sent_commit_lsn = Lsn(0);
        }
    }

    fn reset_peer(&mut self, peer: usize, out: &mut Vec<Envelope>) {
        self.forget_peer(peer);
        self.request_promise(peer, out);
    }

    /// Drops what is in flight to `peer` and for it. Reads sent to it on behalf of others stay: they are
    /// answered or time out on their own.
    fn forget_peer(&mut self, peer: usize) {
        self.outstanding
            .retain(|_, o| !((o.to == peer && !matches!(o.kind, Kind::Read { .. })) || is_read_for(o.kind, peer)));
        if let Phase::Leader(leader) = &mut self.phase {
            let p = &mut leader.peers[peer];
            p.in_flight_bytes = 0;
            p.stuck_since_ms = None;
        }
    }

    /// Leaves `peer` alone until `until_ms` (it is not streaming meanwhile, so it does not count for commits).
    fn back_off(&mut self, peer: usize, until_ms: u64) {
        self.forget_peer(peer);
        if let Phase::Leader(leader) = &mut self.phase {
            leader.peers[peer].stage = Stage::Backoff { until_ms };
        }
    }

    /// The connection to acceptor `peer` broke (its process may have died, or lost its disk and been rebuilt):
    /// its acknowledgements stop counting until it is elected again from the state it reports then. Replies
    /// still in flight from it (an `Elected` computed from its old state) are ignored.
    pub fn on_connection_lost(&mut self, peer: usize, now_ms: u64) -> Vec<Envelope> {
        self.now_ms = self.now_ms.max(now_ms);
        let mut out = Vec::new();
        if let Phase::Leader(leader) = &self.phase {
            let in_play = leader
                .peers
                .get(peer)
                .is_some_and(|p| matches!(p.stage, Stage::Streaming | Stage::Waiting));
            if in_play {
                tracing::info!(
                    peer,
                    "connection to the acceptor lost; electing it again from its state"
                );
                self.reset_peer(peer, &mut out);
            }
        }
        out
    }

    /// Commit = the highest LSN durable on a majority of acceptors streaming in this term, if at least the
    /// epoch start.
    fn advance_commit(&mut self) {
        let Phase::Leader(leader) = &mut self.phase else { return };
        let mut flushed: Vec<Lsn> = leader
            .peers
            .iter()
            .filter(|p| p.stage == Stage::Streaming)
            .map(|p| p.flush_lsn)
            .collect();
        let needed = majority(self.config.acceptor_count);
        if flushed.len() < needed {
            return;
        }
        flushed.sort_unstable_by(|a, b| b.cmp(a));
        let candidate = flushed[needed - 1];
        if candidate >= leader.epoch_start_lsn && candidate > self.commit_lsn {
            assert!(
                candidate <= leader.end_lsn,
                "commit {candidate} past the proposed end {}",
                leader.end_lsn
            );
            self.commit_lsn = candidate;
            // Committed frames are on a majority; lagging acceptors catch up by reading from a peer.
            while leader
                .frames
                .front()
                .is_some_and(|(lsn, frame)| lsn.0 + frame.len() as u64 <= candidate.0)
            {
                let (lsn, frame) = leader.frames.pop_front().expect("checked above");
                leader.buffer_start_lsn = Lsn(lsn.0 + frame.len() as u64);
            }
        }
    }

    /// Sends what `peer` may take now: catch-up from another acceptor below the buffer, frames from the buffer
    /// above it, within the in-flight bound.
    fn pump(&mut self, peer: usize, out: &mut Vec<Envelope>) {
        let reading = self.is_reading(peer);
        let Phase::Leader(leader) = &mut self.phase else { return };
        let term = leader.term;
        let p = &leader.peers[peer];
        if p.stage != Stage::Streaming || reading {
            return;
        }
        if p.next_lsn < leader.buffer_start_lsn {
            // Read from the streaming peer with the most durable WAL in this term that still has what is needed
            // (not removed, or not missing from a rebuilt replica) and has not refused it already.
            let next = p.next_lsn;
            let refused = |i: usize| p.read_refused_at == next && p.read_refused_by[i];
            let holders: Vec<usize> = (0..leader.peers.len())
                .filter(|&i| i != peer && leader.peers[i].stage == Stage::Streaming && leader.peers[i].flush_lsn > next)
                .collect();
            let source = holders
                .iter()
                .copied()
                .filter(|&i| leader.peers[i].oldest_lsn <= next && !refused(i))
                .max_by_key(|&i| leader.peers[i].flush_lsn);
            match source {
                Some(source) => {
                    let max_bytes = self.config.append_bytes_max;
                    self.send(
                        out,
                        source,
                        Kind::Read { peer, start_lsn: next },
                        Request::ReadWal {
                            term,
                            start_lsn: next,
                            max_bytes,
                        },
                    );
                }
                None if !holders.is_empty() => {
                    // Every peer past this point removed the WAL at it (or refused it): this acceptor cannot be
                    // caught up from them. It stays out of the commit count until it is rebuilt.
                    let now_ms = self.now_ms;
                    let p = &mut leader.peers[peer];
                    if p.stuck_since_ms.is_none() {
                        p.stuck_since_ms = Some(now_ms);
                    }
                    if !p.stuck_reported {
                        p.stuck_reported = true;
                        tracing::warn!(
                            peer,
                            %next,
                            "no streaming peer retains the WAL this acceptor needs: it stays behind until it is \
                             rebuilt (PullTimeline)"
                        );
                    }
                }
                None => {}
            }
            return;
        }
        loop {
            let Phase::Leader(leader) = &mut self.phase else { return };
            let p = &leader.peers[peer];
            if p.in_flight_bytes >= self.config.in_flight_bytes_max {
                return;
            }
            if p.next_lsn >= leader.end_lsn {
                if p.sent_commit_lsn < self.commit_lsn {
                    // Nothing left to send, but the acceptor has not heard of the latest commit.
                    let begin_lsn = p.next_lsn;
                    leader.peers[peer].sent_commit_lsn = self.commit_lsn;
                    let append = AppendRequest {
                        term,
                        begin_lsn,
                        data: Bytes::new(),
                        commit_lsn: self.commit_lsn,
                    };
                    self.send(out, peer, Kind::Append { end_lsn: begin_lsn }, Request::Append(append));
                }
                return;
            }
            let first = leader.frames.partition_point(|(lsn, _)| *lsn < p.next_lsn);
            if leader.frames.get(first).is_none_or(|(lsn, _)| *lsn != p.next_lsn) {
                // A position reported by the acceptor that is not a record boundary of ours: start over with it.
                tracing::error!(peer, position = %p.next_lsn, "acceptor position is not a record boundary");
                self.reset_peer(peer, out);
                return;
            }
            let mut data = Vec::new();
            for (_, frame) in leader.frames.range(first..) {
                if !data.is_empty() && data.len() + frame.len() > self.config.append_bytes_max {
                    break;
                }
                data.extend_from_slice(frame);
            }
            let begin_lsn = p.next_lsn;
            let end_lsn = Lsn(begin_lsn.0 + data.len() as u64);
            let p = &mut leader.peers[peer];
            p.next_lsn = end_lsn;
            p.in_flight_bytes += data.len();
            p.sent_commit_lsn = self.commit_lsn;
            let append = AppendRequest {
                term,
                begin_lsn,
                data: Bytes::from(data),
                commit_lsn: self.commit_lsn,
            };
            self.send(out, peer, Kind::Append { end_lsn }, Request::Append(append));
        }
    }

    /// Advances the clock: lost requests are resent from the last acknowledged point; a campaign past its
    /// deadline fails.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Envelope> {
        self.now_ms = self.now_ms.max(now_ms);
        let mut out = Vec::new();
        if let Phase::Campaign(campaign) = &self.phase {
            if self.now_ms.saturating_sub(campaign.started_ms) >= self.config.election_timeout_ms {
                self.phase = Phase::Failed("no majority answered before the election timeout".into());
                self.outstanding.clear();
                return out;
            }
        }
        let timeout = self.config.request_timeout_ms;
        let expired: Vec<(u64, usize, Kind)> = self
            .outstanding
            .iter()
            .filter(|(_, o)| self.now_ms.saturating_sub(o.sent_ms) >= timeout)
            .map(|(&id, o)| (id, o.to, o.kind))
            .collect();
        for (id, to, kind) in expired {
            if self.outstanding.remove(&id).is_none() {
                continue;
            }
            match (&mut self.phase, kind) {
                (Phase::Campaign(_), Kind::State) => self.send(&mut out, to, Kind::State, Request::GetState),
                (Phase::Campaign(campaign), Kind::Vote) => {
                    if let Some(term) = campaign.term {
                        self.send(&mut out, to, Kind::Vote, Request::Vote(VoteRequest { term }));
                    }
                }
                (Phase::Leader(_), Kind::Append { .. }) => {
                    // Resend everything after the last acknowledged point.
                    if let Phase::Leader(leader) = &mut self.phase {
                        let p = &mut leader.peers[to];
                        p.next_lsn = p.flush_lsn;
                    }
                    self.forget_appends_to(to);
                    self.pump(to, &mut out);
                }
                (Phase::Leader(_), Kind::Read { peer, .. }) => self.pump(peer, &mut out),
                (Phase::Leader(_), Kind::State | Kind::Vote | Kind::Elected) => self.reset_peer(to, &mut out),
                _ => {}
            }
        }
        self.retry_waiting_peers(&mut out);
        out
    }

    /// Asks backed-off peers for their promise again once their time has come, and re-elects peers that have
    /// been stuck (no source for their next WAL) for a request timeout: they may have been rebuilt since.
    fn retry_waiting_peers(&mut self, out: &mut Vec<Envelope>) {
        let Phase::Leader(leader) = &self.phase else { return };
        let now_ms = self.now_ms;
        let timeout = self.config.request_timeout_ms;
        let due: Vec<usize> = leader
            .peers
            .iter()
            .enumerate()
            .filter(|(_, p)| match p.stage {
                Stage::Backoff { until_ms } => now_ms >= until_ms,
                Stage::Streaming => p
                    .stuck_since_ms
                    .is_some_and(|since| now_ms.saturating_sub(since) >= timeout),
                Stage::NeedState | Stage::Waiting => false,
            })
            .map(|(i, _)| i)
            .collect();
        for peer in due {
            if self.is_reading(peer) {
                continue;
            }
            self.reset_peer(peer, out);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The proposer against acceptors whose WAL starts late (a replica rebuilt from a peer, or WAL removed below
    //! the pageserver's horizon), acceptors that keep refusing, and an acceptor that lost its disk. A tiny
    //! deterministic network: every request is answered at once, appends are synced at once, and a node is up,
    //! down (no answer) or missing the timeline (`NOT_FOUND` to everything).

    use super::*;
    use crate::acceptor::Acceptor;
    use crate::dispatch::{serve, Served};
    use crate::memstore::{MemControl, MemWal};
    use crate::protocol::ControlState;
    use cambium_types::{Key, Patch, Value, WalRecord};

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
}
