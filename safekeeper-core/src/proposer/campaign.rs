//! The campaign: every acceptor's state, a term above all of them, votes from a majority, and the donor whose
//! WAL the new term continues.

use std::collections::VecDeque;

use super::leader::{Leader, Peer};
use super::{majority, Envelope, Kind, Outstanding, Phase, Proposer, Reply, Request};
use crate::protocol::{AcceptorState, Term, TermSwitch, VoteRequest, VoteResponse};

/// A campaign in progress: the states and votes gathered, and the term once a majority of states chose it.
pub(super) struct Campaign {
    pub(super) started_ms: u64,
    pub(super) term: Option<Term>,
    pub(super) states: Vec<Option<AcceptorState>>,
    pub(super) votes: Vec<Option<VoteResponse>>,
}

impl Proposer {
    pub(super) fn on_campaign_reply(&mut self, request: Outstanding, reply: Reply, out: &mut Vec<Envelope>) {
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

    pub(super) fn become_leader(&mut self, term: Term, out: &mut Vec<Envelope>) {
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
}
