//! The acceptor: one safekeeper's side of the protocol for one timeline, over a [`WalStore`] and a
//! [`ControlStore`]. Sans-IO: the caller feeds it requests and decides when to [`Acceptor::sync`] (group
//! commit: any number of appends, one sync, one acknowledgement).
//!
//! Rules (DESIGN.md §3):
//! - a vote is granted for a term higher than any promised, and the promise is durable before the answer;
//! - an `Elected` of a term at least the promised one truncates the WAL where it diverges from the winner's
//!   (never below the commit LSN) and adopts the winner's history, WAL truncation first, control file second;
//! - an append is accepted only in the promised term after its `Elected`, only as whole valid frames, only
//!   contiguous with the WAL (overlap with what is already there is skipped: same term, same bytes);
//! - the acknowledged `flush_lsn` is always durable; `commit_lsn` never passes it and never goes back.

use bytes::Bytes;
use cambium_types::wal::scan_frames;
use cambium_types::Lsn;

use crate::protocol::{
    AcceptorError, AcceptorState, AppendRequest, AppendResponse, ControlState, ControlStore, ElectedRequest, Term,
    VoteRequest, VoteResponse, WalStore,
};

/// Largest append accepted in one request.
pub const APPEND_BYTES_MAX: usize = 16 * 1024 * 1024;
/// The commit LSN is persisted once it has moved this far since the last persist (it is a lower bound, so a
/// stale one after a crash only delays streaming until the proposer sends it again).
pub const COMMIT_PERSIST_DISTANCE_BYTES: u64 = 1024 * 1024;

/// One timeline's acceptor.
pub struct Acceptor<W: WalStore, C: ControlStore> {
    control: ControlState,
    wal: W,
    store: C,
    /// The highest commit LSN a proposer has sent since the last sync.
    proposed_commit_lsn: Lsn,
    persisted_commit_lsn: Lsn,
}

impl<W: WalStore, C: ControlStore> Acceptor<W, C> {
    /// An acceptor over its recovered state. Fails if the WAL ends before the durable commit LSN (lost WAL).
    pub fn new(control: ControlState, wal: W, store: C) -> Result<Self, AcceptorError> {
        if wal.flush_lsn() < control.commit_lsn {
            return Err(AcceptorError::Storage(crate::protocol::StoreError::Corrupt {
                path: "wal".into(),
                offset: wal.flush_lsn().0,
                reason: format!(
                    "WAL ends at {} before the commit LSN {}",
                    wal.flush_lsn(),
                    control.commit_lsn
                ),
            }));
        }
        let persisted_commit_lsn = control.commit_lsn;
        Ok(Acceptor {
            proposed_commit_lsn: control.commit_lsn,
            persisted_commit_lsn,
            control,
            wal,
            store,
        })
    }

    /// What this acceptor has.
    pub fn state(&self) -> AcceptorState {
        let flush_lsn = self.wal.flush_lsn();
        AcceptorState {
            term: self.control.term,
            history: self.control.history.up_to(flush_lsn),
            flush_lsn,
            commit_lsn: self.control.commit_lsn,
            timeline_start_lsn: self.control.timeline_start_lsn,
            oldest_lsn: self.wal.oldest_lsn(),
            remote_consistent_lsn: self.control.remote_consistent_lsn,
        }
    }

    /// The durable control state (for tests and reports).
    pub fn control(&self) -> &ControlState {
        &self.control
    }

    fn persist(&mut self) -> Result<(), AcceptorError> {
        self.store.persist(&self.control)?;
        self.persisted_commit_lsn = self.control.commit_lsn;
        Ok(())
    }

    /// Grants `request.term` if it is higher than any term promised, durably.
    pub fn vote(&mut self, request: VoteRequest) -> Result<VoteResponse, AcceptorError> {
        let granted = request.term > self.control.term;
        if granted {
            self.control.term = request.term;
            self.persist()?;
        }
        Ok(VoteResponse {
            granted,
            state: self.state(),
        })
    }

    /// The proposer of `request.term` won: truncate where our WAL diverges from its, adopt its history.
    pub fn elected(&mut self, request: ElectedRequest) -> Result<(), AcceptorError> {
        request
            .history
            .validate()
            .map_err(|e| AcceptorError::Invalid(e.to_string()))?;
        if request.term < self.control.term {
            return Err(AcceptorError::StaleTerm {
                got: request.term,
                current: self.control.term,
            });
        }
        if request.history.last_term() != request.term {
            return Err(AcceptorError::Invalid(format!(
                "history of the winner of term {} ends in term {}",
                request.term,
                request.history.last_term()
            )));
        }
        if self.control.term == request.term && self.control.history.last_term() == request.term {
            // This election was applied already (the message was duplicated or re-sent). Appends of this term
            // may have been acknowledged since, so truncating now could drop acknowledged WAL: never do.
            if self.control.history != request.history {
                return Err(AcceptorError::Invalid(format!(
                    "a second history for term {}: ours {:?}, now {:?}",
                    request.term, self.control.history, request.history
                )));
            }
            return Ok(());
        }
        let flush_lsn = self.wal.sync()?;
        let start = request.start_streaming_at;
        if start > flush_lsn {
            return Err(AcceptorError::Invalid(format!(
                "start_streaming_at {start} is past the WAL end {flush_lsn}"
            )));
        }
        if start < self.control.commit_lsn {
            return Err(AcceptorError::Invalid(format!(
                "start_streaming_at {start} would truncate WAL committed up to {}",
                self.control.commit_lsn
            )));
        }
        if start < self.wal.oldest_lsn() {
            // Below the commit LSN too, unless the oldest LSN passed it, which the stores never let happen:
            // refused rather than asserted, since a replica's state came from a peer.
            return Err(AcceptorError::Invalid(format!(
                "start_streaming_at {start} is below the oldest WAL {} held here",
                self.wal.oldest_lsn()
            )));
        }
        // Our WAL below `start` must be the winner's: the same terms starting at the same places.
        let ours: Vec<_> = self
            .control
            .history
            .up_to(flush_lsn)
            .0
            .into_iter()
            .filter(|s| s.lsn < start)
            .collect();
        let theirs: Vec<_> = request.history.0.iter().copied().filter(|s| s.lsn < start).collect();
        if ours != theirs {
            return Err(AcceptorError::Invalid(format!(
                "histories disagree below {start}: ours {ours:?}, the winner's {theirs:?}"
            )));
        }
        if start < flush_lsn {
            tracing::info!(term = request.term, from = %start, to = %flush_lsn, "truncating a divergent WAL tail");
            self.wal.truncate(start)?;
        }
        self.control.term = request.term;
        self.control.history = request.history;
        self.persist()
    }

    /// Writes an append (not yet durable: call [`Acceptor::sync`] before acknowledging).
    pub fn append(&mut self, request: &AppendRequest) -> Result<(), AcceptorError> {
        if request.term < self.control.term {
            return Err(AcceptorError::StaleTerm {
                got: request.term,
                current: self.control.term,
            });
        }
        if request.term > self.control.term || self.control.history.last_term() != request.term {
            return Err(AcceptorError::NotElected { term: request.term });
        }
        if request.data.len() > APPEND_BYTES_MAX {
            return Err(AcceptorError::Invalid(format!(
                "append of {} bytes",
                request.data.len()
            )));
        }
        if request.begin_lsn < self.control.timeline_start_lsn {
            return Err(AcceptorError::Invalid(format!(
                "append at {} before the timeline start",
                request.begin_lsn
            )));
        }
        let write_lsn = self.wal.write_lsn();
        if request.begin_lsn > write_lsn {
            return Err(AcceptorError::Gap {
                begin_lsn: request.begin_lsn,
                write_lsn,
            });
        }
        if let (_, Some(error)) = scan_frames(&request.data, request.begin_lsn) {
            return Err(AcceptorError::BadFrame(error));
        }
        let end_lsn = Lsn(request.begin_lsn.0 + request.data.len() as u64);
        if end_lsn > write_lsn {
            let skip = (write_lsn.0 - request.begin_lsn.0) as usize;
            if !is_frame_boundary(&request.data, skip) {
                return Err(AcceptorError::Invalid(format!(
                    "the WAL end {write_lsn} falls inside a frame of the append"
                )));
            }
            self.wal.write(write_lsn, &request.data[skip..])?;
        }
        self.proposed_commit_lsn = self.proposed_commit_lsn.max(request.commit_lsn);
        Ok(())
    }

    /// Makes every written append durable and reports how far the WAL is durable and committed.
    pub fn sync(&mut self) -> Result<AppendResponse, AcceptorError> {
        let flush_lsn = self.wal.sync()?;
        let commit_lsn = self.control.commit_lsn.max(self.proposed_commit_lsn.min(flush_lsn));
        assert!(
            commit_lsn <= flush_lsn,
            "commit {commit_lsn} past the durable WAL end {flush_lsn}"
        );
        self.control.commit_lsn = commit_lsn;
        if commit_lsn.0 - self.persisted_commit_lsn.0 >= COMMIT_PERSIST_DISTANCE_BYTES {
            self.persist()?;
        }
        Ok(AppendResponse {
            term: self.control.term,
            flush_lsn,
            commit_lsn,
        })
    }

    /// Whole frames from `start_lsn` up to the durable end, at most about `max_bytes`, for the proposer of
    /// `term` catching other acceptors up from this one. Served only while this acceptor is in that term's
    /// election, so the WAL read is that term's WAL (a newer term may have replaced it otherwise).
    pub fn read_wal_in_term(&self, term: Term, start_lsn: Lsn, max_bytes: usize) -> Result<Bytes, AcceptorError> {
        if term < self.control.term {
            return Err(AcceptorError::StaleTerm {
                got: term,
                current: self.control.term,
            });
        }
        if term > self.control.term || self.control.history.last_term() != term {
            return Err(AcceptorError::NotElected { term });
        }
        self.read(start_lsn, self.wal.flush_lsn(), max_bytes)
    }

    /// Whole durable frames from `start_lsn` up to `end_lsn`, committed or not, at most about `max_bytes`: what a
    /// peer copies to make a replica (`PullTimeline`). `Invalid` if `end_lsn` is past the durable end (the WAL
    /// was truncated since the peer read its state) or `start_lsn` is outside the WAL.
    pub fn read_durable(&self, start_lsn: Lsn, end_lsn: Lsn, max_bytes: usize) -> Result<Bytes, AcceptorError> {
        let flush_lsn = self.wal.flush_lsn();
        if end_lsn > flush_lsn {
            return Err(AcceptorError::Invalid(format!(
                "read up to {end_lsn} past the durable WAL end {flush_lsn}"
            )));
        }
        self.read(start_lsn, end_lsn, max_bytes)
    }

    /// Whole committed frames from `start_lsn`, at most about `max_bytes` (for the pageserver).
    pub fn read_committed(&self, start_lsn: Lsn, max_bytes: usize) -> Result<Bytes, AcceptorError> {
        self.read(start_lsn, self.control.commit_lsn, max_bytes)
    }

    fn read(&self, start_lsn: Lsn, end_lsn: Lsn, max_bytes: usize) -> Result<Bytes, AcceptorError> {
        if start_lsn < self.wal.oldest_lsn() || start_lsn > end_lsn {
            return Err(AcceptorError::Invalid(format!(
                "read at {start_lsn} outside the available WAL {}..{end_lsn}",
                self.wal.oldest_lsn()
            )));
        }
        Ok(self.wal.read(start_lsn, end_lsn, max_bytes)?)
    }

    /// Records the pageserver's durable point and removes WAL below `min(commit_lsn, remote_consistent_lsn)`.
    pub fn set_remote_consistent_lsn(&mut self, lsn: Lsn) -> Result<(), AcceptorError> {
        if lsn <= self.control.remote_consistent_lsn {
            return Ok(());
        }
        // The commit LSN here may lag (it is persisted lazily, and the pageserver may follow another
        // safekeeper): keep the report, and remove only below both.
        self.control.remote_consistent_lsn = lsn;
        self.persist()?;
        let horizon = self.control.commit_lsn.min(lsn);
        self.wal.remove_below(horizon)?;
        Ok(())
    }

    /// The WAL store (for tests and the service's readers).
    pub fn wal(&self) -> &W {
        &self.wal
    }

    /// The control store (for tests: what a crash would leave).
    pub fn control_store(&self) -> &C {
        &self.store
    }

    /// Lets the WAL store release what it holds for appends after `idle_for` without one (its open segment
    /// file); see [`WalStore::release_idle`].
    pub fn release_idle(&mut self, idle_for: std::time::Duration) -> bool {
        self.wal.release_idle(idle_for)
    }

    /// Takes the acceptor apart (a simulated crash keeps the stores' durable parts).
    pub fn into_parts(self) -> (W, C) {
        (self.wal, self.store)
    }
}

/// Whether `offset` is the start of a frame in `data` (whose frames were validated) or its end.
fn is_frame_boundary(data: &[u8], offset: usize) -> bool {
    let mut at = 0usize;
    while at < offset {
        let body_len = u32::from_le_bytes(data[at..at + 4].try_into().expect("validated frame header")) as usize;
        at += cambium_types::wal::FRAME_HEADER_BYTES + body_len;
    }
    at == offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstore::{MemControl, MemWal};
    use crate::protocol::{TermHistory, TermSwitch};
    use cambium_types::{Key, Value, WalRecord};

    const START: Lsn = Lsn(0x100);

    fn frames(count: usize, fill: u8) -> Bytes {
        let mut out = Vec::new();
        for i in 0..count {
            let record = WalRecord {
                commit_ts_us: i as u64,
                db_size_pages: 1,
                entries: vec![(
                    Key::page(0),
                    Value::Delta(vec![cambium_types::Patch {
                        offset: 0,
                        data: Bytes::from(vec![fill; 10]),
                    }]),
                )],
            };
            record.encode(&mut out).expect("encodes");
        }
        Bytes::from(out)
    }

    fn acceptor() -> Acceptor<MemWal, MemControl> {
        Acceptor::new(ControlState::new(START), MemWal::new(START), MemControl::default()).expect("new")
    }

    fn elect(
        a: &mut Acceptor<MemWal, MemControl>,
        term: u64,
        history: &[(u64, u64)],
        start: Lsn,
    ) -> Result<(), AcceptorError> {
        let history = TermHistory(
            history
                .iter()
                .map(|&(term, lsn)| TermSwitch { term, lsn: Lsn(lsn) })
                .collect(),
        );
        a.elected(ElectedRequest {
            term,
            history,
            start_streaming_at: start,
        })
    }

    #[test]
    fn vote_elect_append_sync() {
        let mut a = acceptor();
        assert!(a.vote(VoteRequest { term: 1 }).expect("vote").granted);
        assert!(
            !a.vote(VoteRequest { term: 1 }).expect("vote").granted,
            "a term is promised once"
        );
        let data = frames(3, 1);
        let append = AppendRequest {
            term: 1,
            begin_lsn: START,
            data: data.clone(),
            commit_lsn: START,
        };
        assert!(matches!(a.append(&append), Err(AcceptorError::NotElected { term: 1 })));
        elect(&mut a, 1, &[(1, START.0)], START).expect("elected");
        a.append(&append).expect("append");
        assert_eq!(a.state().flush_lsn, START, "not durable before sync");
        let end = Lsn(START.0 + data.len() as u64);
        let ack = a.sync().expect("sync");
        assert_eq!((ack.flush_lsn, ack.commit_lsn), (end, START));
        // A duplicate is acknowledged without writing; the commit LSN rides on later appends.
        a.append(&AppendRequest {
            commit_lsn: end,
            ..append.clone()
        })
        .expect("duplicate");
        assert_eq!(a.sync().expect("sync").commit_lsn, end);
        assert_eq!(a.read_committed(START, 1 << 20).expect("read"), data);
    }

    #[test]
    fn bad_requests_change_nothing() {
        let mut a = acceptor();
        a.vote(VoteRequest { term: 2 }).expect("vote");
        elect(&mut a, 2, &[(2, START.0)], START).expect("elected");
        let data = frames(2, 7);
        let stale = AppendRequest {
            term: 1,
            begin_lsn: START,
            data: data.clone(),
            commit_lsn: START,
        };
        assert!(matches!(
            a.append(&stale),
            Err(AcceptorError::StaleTerm { got: 1, current: 2 })
        ));
        let gap = AppendRequest {
            term: 2,
            begin_lsn: START.next(),
            data: data.clone(),
            commit_lsn: START,
        };
        assert!(matches!(a.append(&gap), Err(AcceptorError::Gap { .. })));
        let mut bad = data.to_vec();
        bad[12] ^= 0xff;
        let bad_crc = AppendRequest {
            term: 2,
            begin_lsn: START,
            data: Bytes::from(bad),
            commit_lsn: START,
        };
        assert!(matches!(a.append(&bad_crc), Err(AcceptorError::BadFrame(_))));
        let torn = AppendRequest {
            term: 2,
            begin_lsn: START,
            data: data.slice(..data.len() - 1),
            commit_lsn: START,
        };
        assert!(matches!(a.append(&torn), Err(AcceptorError::BadFrame(_))));
        assert_eq!(a.wal().pending_bytes(), 0);
        assert_eq!(a.sync().expect("sync").flush_lsn, START);
        assert!(matches!(
            elect(&mut a, 1, &[(1, START.0)], START),
            Err(AcceptorError::StaleTerm { .. })
        ));
    }

    #[test]
    fn a_repeated_election_never_truncates_acknowledged_wal() {
        let mut a = acceptor();
        a.vote(VoteRequest { term: 1 }).expect("vote");
        elect(&mut a, 1, &[(1, START.0)], START).expect("elected");
        let data = frames(2, 3);
        a.append(&AppendRequest {
            term: 1,
            begin_lsn: START,
            data: data.clone(),
            commit_lsn: START,
        })
        .expect("append");
        let acked = a.sync().expect("sync").flush_lsn;
        // The same Elected again (a network duplicate, or a re-send computed from an older state).
        elect(&mut a, 1, &[(1, START.0)], START).expect("idempotent");
        assert_eq!(a.state().flush_lsn, acked);
        assert!(matches!(
            elect(&mut a, 1, &[(1, START.0 + 1)], START),
            Err(AcceptorError::Invalid(_))
        ));
    }

    #[test]
    fn divergent_tail_is_truncated_but_never_below_commit() {
        let mut a = acceptor();
        a.vote(VoteRequest { term: 1 }).expect("vote");
        elect(&mut a, 1, &[(1, START.0)], START).expect("elected");
        let data = frames(4, 1);
        let frame = data.len() / 4;
        let commit = Lsn(START.0 + frame as u64);
        a.append(&AppendRequest {
            term: 1,
            begin_lsn: START,
            data: data.clone(),
            commit_lsn: commit,
        })
        .expect("append");
        a.sync().expect("sync");
        // A new proposer whose donor had only two frames of term 1.
        let two = Lsn(START.0 + 2 * frame as u64);
        a.vote(VoteRequest { term: 3 }).expect("vote");
        elect(&mut a, 3, &[(1, START.0), (3, two.0)], two).expect("elected");
        assert_eq!(a.state().flush_lsn, two);
        assert_eq!(
            a.state().history.last_term(),
            3,
            "the term starts exactly at the WAL end"
        );
        // Below the commit LSN is refused.
        a.vote(VoteRequest { term: 4 }).expect("vote");
        assert!(matches!(
            elect(&mut a, 4, &[(1, START.0), (4, START.0)], START),
            Err(AcceptorError::Invalid(_))
        ));
        assert_eq!(a.state().flush_lsn, two);
    }
}
