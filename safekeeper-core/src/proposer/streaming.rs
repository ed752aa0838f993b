//! Streaming in the leader's term: the commit rule, and what each acceptor is sent next (catch-up read from a
//! peer below the buffer, frames from the buffer above it, an empty append carrying a new commit LSN).

use bytes::Bytes;
use cambium_types::Lsn;

use super::leader::Stage;
use super::{majority, Envelope, Kind, Phase, Proposer, Request};
use crate::protocol::AppendRequest;

impl Proposer {
    /// Commit = the highest LSN durable on a majority of acceptors streaming in this term, if at least the
    /// epoch start.
    pub(super) fn advance_commit(&mut self) {
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
    pub(super) fn pump(&mut self, peer: usize, out: &mut Vec<Envelope>) {
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
}
