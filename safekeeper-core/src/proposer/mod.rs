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
//!
//! One job per file: this one holds the state machine's types, its public calls and the clock ([`tick`]);
//! `messages` what travels between the proposer and the acceptors; `campaign` the election; `leader` each
//! acceptor's election in the leader's term and the replies to it; `streaming` the commit rule and what each
//! acceptor is sent.
//!
//! [`tick`]: Proposer::tick

mod campaign;
mod leader;
mod messages;
mod streaming;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use bytes::Bytes;
use cambium_types::Lsn;

use crate::protocol::{Term, VoteRequest};

use campaign::Campaign;
use leader::Leader;
pub use messages::{Envelope, ProposeError, Refusal, Reply, Request, Status};

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

    /// Whether [`Proposer::tick`] would do nothing now or at any later time until the next reply, connection loss
    /// or proposal: no request in flight, no campaign, and (as leader) every acceptor streaming and none stuck
    /// waiting for WAL. A driver may stop ticking while this holds (a thousand idle branches are not fifty
    /// thousand wake-ups a second); it must tick again once it does not.
    pub fn is_quiescent(&self) -> bool {
        if !self.outstanding.is_empty() {
            return false;
        }
        match &self.phase {
            Phase::Campaign(_) => false,
            Phase::Leader(leader) => leader
                .peers
                .iter()
                .all(|p| p.stage == leader::Stage::Streaming && p.stuck_since_ms.is_none()),
            Phase::Idle | Phase::Fenced(_) | Phase::Failed(_) => true,
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
}
