//! The leader's view of each acceptor: its election in the leader's term (promise, then `Elected` from a state
//! taken after it), the replies to what it was sent, back-off after repeated refusals, lost connections.

use std::collections::VecDeque;

use bytes::Bytes;
use cambium_types::Lsn;

use super::{is_read_for, Envelope, Kind, Outstanding, Phase, Proposer, Refusal, Reply, Request};
use crate::protocol::{divergence_lsn, AcceptorState, AppendRequest, ElectedRequest, Term, TermHistory, VoteRequest};

/// Where one acceptor is in the leader's term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
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

/// The leader's view of one acceptor.
pub(super) struct Peer {
    pub(super) stage: Stage,
    /// Durable on this acceptor in this term (meaningful once streaming).
    pub(super) flush_lsn: Lsn,
    /// Next byte to send.
    pub(super) next_lsn: Lsn,
    pub(super) in_flight_bytes: usize,
    /// The commit LSN last sent to this acceptor: when it falls behind and no WAL is left to send, an empty
    /// append carries the new one (safekeepers stream only committed WAL, so they must learn of commits).
    pub(super) sent_commit_lsn: Lsn,
    /// The lowest LSN it serves (from its state when it was elected; it only grows): catch-up reads below it
    /// are sent to another peer.
    pub(super) oldest_lsn: Lsn,
    /// Sources (by index) that refused a catch-up read for this acceptor at `read_refused_at`.
    pub(super) read_refused_by: Vec<bool>,
    pub(super) read_refused_at: Lsn,
    /// Since when no streaming peer retains the WAL this acceptor needs next.
    pub(super) stuck_since_ms: Option<u64>,
    /// Its being stuck was logged (once until it makes progress again).
    pub(super) stuck_reported: bool,
    /// Refusals in a row (other than gaps) since it last acknowledged an append.
    pub(super) refusals_in_a_row: u32,
}

impl Peer {
    pub(super) fn new(acceptor_count: usize) -> Peer {
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

/// The leader's state for its term: its history, the buffer of uncommitted frames, every acceptor's view.
pub(super) struct Leader {
    pub(super) term: Term,
    pub(super) history: TermHistory,
    pub(super) epoch_start_lsn: Lsn,
    /// Frames not yet committed (and possibly some committed ones), contiguous from `buffer_start_lsn`.
    pub(super) frames: VecDeque<(Lsn, Bytes)>,
    pub(super) buffer_start_lsn: Lsn,
    pub(super) end_lsn: Lsn,
    pub(super) peers: Vec<Peer>,
}

impl Proposer {
    /// Asks `peer` to promise our term. Its WAL can be judged only from a state taken *after* that promise:
    /// before it, an older proposer may still append (and commit) there.
    pub(super) fn request_promise(&mut self, peer: usize, out: &mut Vec<Envelope>) {
        let Phase::Leader(leader) = &mut self.phase else { return };
        leader.peers[peer].stage = Stage::Waiting;
        let term = leader.term;
        self.send(out, peer, Kind::Vote, Request::Vote(VoteRequest { term }));
    }

    pub(super) fn send_elected(&mut self, peer: usize, state: &AcceptorState, out: &mut Vec<Envelope>) {
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

    pub(super) fn on_leader_reply(&mut self, request: Outstanding, reply: Reply, out: &mut Vec<Envelope>) {
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

    pub(super) fn in_flight_of(&self, peer: usize) -> usize {
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

    pub(super) fn refresh_in_flight(&mut self, peer: usize) {
        let in_flight = self.in_flight_of(peer);
        if let Phase::Leader(leader) = &mut self.phase {
            leader.peers[peer].in_flight_bytes = in_flight;
        }
    }

    /// Whether a catch-up read for `peer` is in flight (from whichever source).
    pub(super) fn is_reading(&self, peer: usize) -> bool {
        self.outstanding.values().any(|o| is_read_for(o.kind, peer))
    }

    /// Drops the appends to `peer` and the catch-up reads for it.
    pub(super) fn forget_appends_to(&mut self, peer: usize) {
        self.outstanding
            .retain(|_, o| !((o.to == peer && matches!(o.kind, Kind::Append { .. })) || is_read_for(o.kind, peer)));
        if let Phase::Leader(leader) = &mut self.phase {
            leader.peers[peer].in_flight_bytes = 0;
            // What was sent may be lost: tell the commit LSN again with the next append.
            leader.peers[peer].sent_commit_lsn = Lsn(0);
        }
    }

    pub(super) fn reset_peer(&mut self, peer: usize, out: &mut Vec<Envelope>) {
        self.forget_peer(peer);
        self.request_promise(peer, out);
    }

    /// Drops what is in flight to `peer` and for it. Reads sent to it on behalf of others stay: they are
    /// answered or time out on their own.
    pub(super) fn forget_peer(&mut self, peer: usize) {
        self.outstanding
            .retain(|_, o| !((o.to == peer && !matches!(o.kind, Kind::Read { .. })) || is_read_for(o.kind, peer)));
        if let Phase::Leader(leader) = &mut self.phase {
            let p = &mut leader.peers[peer];
            p.in_flight_bytes = 0;
            p.stuck_since_ms = None;
        }
    }

    /// Leaves `peer` alone until `until_ms` (it is not streaming meanwhile, so it does not count for commits).
    pub(super) fn back_off(&mut self, peer: usize, until_ms: u64) {
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

    /// Asks backed-off peers for their promise again once their time has come, and re-elects peers that have
    /// been stuck (no source for their next WAL) for a request timeout: they may have been rebuilt since.
    pub(super) fn retry_waiting_peers(&mut self, out: &mut Vec<Envelope>) {
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
