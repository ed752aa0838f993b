//! What the safekeeper's integration tests share.

use bytes::Bytes;
use cambium_types::Lsn;
use safekeeper::node::Timeline;
use safekeeper_core::protocol::{AppendRequest, ElectedRequest, TermHistory, TermSwitch, VoteRequest};

/// Has `timeline` (its WAL starting at `start`, never voted) vote for term 1 (asserted granted, `what` in the
/// message), be elected, append `data` (whole frames) at `start` and sync it; returns the flush LSN.
pub fn vote_elect_append(timeline: &Timeline, start: Lsn, data: Bytes, what: &str) -> Lsn {
    timeline
        .run_blocking(|acceptor| {
            assert!(acceptor.vote(VoteRequest { term: 1 }).expect("vote").granted, "{what}");
            acceptor
                .elected(ElectedRequest {
                    term: 1,
                    history: TermHistory::default().with(TermSwitch { term: 1, lsn: start }),
                    start_streaming_at: start,
                })
                .expect("elected");
            acceptor
                .append(&AppendRequest {
                    term: 1,
                    begin_lsn: start,
                    data,
                    commit_lsn: start,
                })
                .expect("append");
            acceptor.sync().expect("sync").flush_lsn
        })
        .expect("run")
}
