//! Transactions larger than one frame: a *group* of WAL frames, parts first and the commit last.
//!
//! ```text
//! part   body = 2: u8 | 1: u8 (part)   | group_lsn: u64 | entry_count: u32 | (key: u64 | value)*
//! commit body = 2: u8 | 2: u8 (commit) | group_lsn: u64 | commit_ts_us: u64 | db_size_pages: u32
//!               | entry_count: u32 | (key: u64 | value)*
//! ```
//!
//! `group_lsn` is the start LSN of the group's first part, so a reader that resumes at or before it sees the
//! whole group. The group's changes are every part's entries in order, then the commit's, all visible at the
//! commit's end LSN and nowhere before; a group whose commit never comes (its writer died, a new writer took
//! over, another group's record follows) changes nothing. A version 1 record is a commit with no parts.

use bytes::Bytes;

use super::{
    check_frame, decode_entries, encode_entries, entries_len, finish_frame, validate_entries, WalDecodeError,
    WalEncodeError, WalRecord, BODY_VERSION, FRAME_HEADER_BYTES,
};
use crate::codec::{put_u32, put_u64, Reader};
use crate::key::Key;
use crate::lsn::Lsn;
use crate::value::Value;

/// The body version of a group's frames.
pub const GROUP_BODY_VERSION: u8 = 2;
const KIND_PART: u8 = 1;
const KIND_COMMIT: u8 = 2;
/// version, kind, group LSN.
const GROUP_HEADER_BYTES: usize = 1 + 1 + 8;

/// One part of a group: changes that become visible only with the group's commit.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WalPart {
    /// The start LSN of the group's first part.
    pub group_lsn: Lsn,
    /// Changed pages (page keys only), applied in order.
    pub entries: Vec<(Key, Value)>,
}

/// One decoded WAL frame: a commit (alone, or closing a group) or a part of a group.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum WalFrame {
    /// A commit. `group_lsn` is `None` for a transaction of one frame (body version 1), else the group it
    /// closes (the start LSN of the group's first part).
    Commit {
        /// The group this commit closes, if any.
        group_lsn: Option<Lsn>,
        /// The commit's own fields and the last of the group's entries.
        record: WalRecord,
    },
    /// A part of the group that started at its `group_lsn`.
    Part(WalPart),
}

impl WalPart {
    fn body_len(&self) -> usize {
        GROUP_HEADER_BYTES + entries_len(&self.entries)
    }

    /// The length of the whole frame.
    pub fn frame_len(&self) -> u64 {
        (FRAME_HEADER_BYTES + self.body_len()) as u64
    }

    /// Checks every entry (page keys only, values valid for their key) and the bounds.
    pub fn validate(&self) -> Result<(), WalEncodeError> {
        validate_entries(&self.entries, self.body_len())
    }

    /// The framed part, after validating it (page keys, values, bounds).
    pub fn to_frame(&self) -> Result<Bytes, WalEncodeError> {
        self.validate()?;
        let mut out = Vec::with_capacity(self.frame_len() as usize);
        put_u32(&mut out, 0);
        put_u32(&mut out, 0);
        out.push(GROUP_BODY_VERSION);
        out.push(KIND_PART);
        put_u64(&mut out, self.group_lsn.0);
        encode_entries(&mut out, &self.entries);
        finish_frame(&mut out, 0, self.body_len());
        Ok(Bytes::from(out))
    }
}

impl WalRecord {
    /// The length of this record's frame as the commit of a group.
    pub fn group_commit_frame_len(&self) -> u64 {
        (FRAME_HEADER_BYTES + GROUP_HEADER_BYTES + 8 + 4 + entries_len(&self.entries)) as u64
    }

    /// This record framed as the commit that closes the group started at `group_lsn` (body version 2).
    pub fn to_group_commit_frame(&self, group_lsn: Lsn) -> Result<Bytes, WalEncodeError> {
        let body_len = self.group_commit_frame_len() as usize - FRAME_HEADER_BYTES;
        validate_entries(&self.entries, body_len)?;
        let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body_len);
        put_u32(&mut out, 0);
        put_u32(&mut out, 0);
        out.push(GROUP_BODY_VERSION);
        out.push(KIND_COMMIT);
        put_u64(&mut out, group_lsn.0);
        put_u64(&mut out, self.commit_ts_us);
        put_u32(&mut out, self.db_size_pages);
        encode_entries(&mut out, &self.entries);
        finish_frame(&mut out, 0, body_len);
        Ok(Bytes::from(out))
    }
}

impl WalFrame {
    /// Decodes the frame at the start of `bytes`, which begins at `lsn`, of either body version. Returns the
    /// frame and its length. Values are zero-copy slices of `bytes`.
    pub fn decode(bytes: &Bytes, lsn: Lsn) -> Result<(WalFrame, u64), WalDecodeError> {
        let body = check_frame(bytes, lsn)?;
        let frame_len = body.end as u64;
        let frame =
            Self::decode_body(bytes, &bytes[body]).map_err(|reason| WalDecodeError::Malformed { lsn, reason })?;
        Ok((frame, frame_len))
    }

    fn decode_body(source: &Bytes, body: &[u8]) -> Result<WalFrame, String> {
        let mut reader = Reader::new(body);
        let short = || "body is truncated".to_string();
        match reader.u8().ok_or_else(short)? {
            BODY_VERSION => {
                let record = WalRecord::decode_commit_fields(&mut reader, source)?;
                Ok(WalFrame::Commit {
                    group_lsn: None,
                    record,
                })
            }
            GROUP_BODY_VERSION => {
                let kind = reader.u8().ok_or_else(short)?;
                let group_lsn = Lsn(reader.u64().ok_or_else(short)?);
                match kind {
                    KIND_PART => Ok(WalFrame::Part(WalPart {
                        group_lsn,
                        entries: decode_entries(&mut reader, source)?,
                    })),
                    KIND_COMMIT => Ok(WalFrame::Commit {
                        group_lsn: Some(group_lsn),
                        record: WalRecord::decode_commit_fields(&mut reader, source)?,
                    }),
                    other => Err(format!("unknown group frame kind {other}")),
                }
            }
            version => Err(format!("unknown record version {version}")),
        }
    }
}

/// Decodes consecutive frames of either version from `bytes`, the first at `start_lsn`. Stops at the first
/// error, returning the frames decoded so far with their start LSNs and frame lengths, and the error (`None`
/// when `bytes` ended on a frame boundary).
pub fn decode_wal_frames(bytes: &Bytes, start_lsn: Lsn) -> (Vec<(Lsn, WalFrame, u64)>, Option<WalDecodeError>) {
    let mut frames = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let lsn = Lsn(start_lsn.0 + offset as u64);
        match WalFrame::decode(&bytes.slice(offset..), lsn) {
            Ok((frame, frame_len)) => {
                frames.push((lsn, frame, frame_len));
                offset += frame_len as usize;
            }
            Err(e) => return (frames, Some(e)),
        }
    }
    (frames, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::PAGE_SIZE_BYTES;
    use proptest::prelude::*;

    fn image(byte: u8) -> Value {
        Value::Image(Bytes::from(vec![byte; PAGE_SIZE_BYTES]))
    }

    fn arb_entries() -> impl Strategy<Value = Vec<(Key, Value)>> {
        proptest::collection::vec((0u32..50, any::<u8>()), 0..5)
            .prop_map(|e| e.into_iter().map(|(b, v)| (Key::page(b), image(v))).collect())
    }

    proptest! {
        #[test]
        fn parts_and_group_commits_round_trip(group in any::<u64>(), entries in arb_entries(), ts in any::<u64>(),
                                              size in any::<u32>()) {
            let part = WalPart { group_lsn: Lsn(group), entries: entries.clone() };
            let frame = part.to_frame().expect("encodes");
            prop_assert_eq!(frame.len() as u64, part.frame_len());
            let (decoded, len) = WalFrame::decode(&frame, Lsn(9)).expect("decodes");
            prop_assert_eq!(len, part.frame_len());
            prop_assert_eq!(decoded, WalFrame::Part(part));
            // A version 2 frame is not a version 1 record.
            prop_assert!(WalRecord::decode(&frame, Lsn(9)).is_err());

            let record = WalRecord { commit_ts_us: ts, db_size_pages: size, entries };
            let frame = record.to_group_commit_frame(Lsn(group)).expect("encodes");
            prop_assert_eq!(frame.len() as u64, record.group_commit_frame_len());
            let (decoded, _) = WalFrame::decode(&frame, Lsn(9)).expect("decodes");
            prop_assert_eq!(decoded, WalFrame::Commit { group_lsn: Some(Lsn(group)), record: record.clone() });
            // A version 1 record decodes as a commit with no group.
            let (decoded, _) = WalFrame::decode(&record.to_frame().expect("encodes"), Lsn(9)).expect("decodes");
            prop_assert_eq!(decoded, WalFrame::Commit { group_lsn: None, record });
        }

        #[test]
        fn any_group_body_decodes_or_errors(body in proptest::collection::vec(any::<u8>(), 0..120)) {
            let mut framed = Vec::new();
            let mut with_version = vec![GROUP_BODY_VERSION];
            with_version.extend_from_slice(&body);
            framed.extend_from_slice(&(with_version.len() as u32).to_le_bytes());
            framed.extend_from_slice(&crc32fast::hash(&with_version).to_le_bytes());
            framed.extend_from_slice(&with_version);
            let _ = WalFrame::decode(&Bytes::from(framed), Lsn(0));
        }
    }

    #[test]
    fn consecutive_frames_of_both_versions() {
        let part = WalPart {
            group_lsn: Lsn(100),
            entries: vec![(Key::page(1), image(1))],
        };
        let commit = WalRecord {
            commit_ts_us: 5,
            db_size_pages: 2,
            entries: vec![],
        };
        let mut bytes = part.to_frame().expect("encodes").to_vec();
        bytes.extend_from_slice(&commit.to_group_commit_frame(Lsn(100)).expect("encodes"));
        bytes.extend_from_slice(&commit.to_frame().expect("encodes"));
        let (frames, error) = decode_wal_frames(&Bytes::from(bytes), Lsn(100));
        assert!(error.is_none());
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[1].0, Lsn(100 + part.frame_len()));
        assert!(matches!(frames[2].1, WalFrame::Commit { group_lsn: None, .. }));
    }

    #[test]
    fn an_unknown_kind_is_malformed() {
        let part = WalPart {
            group_lsn: Lsn(1),
            entries: vec![],
        };
        let mut bytes = part.to_frame().expect("encodes").to_vec();
        bytes[FRAME_HEADER_BYTES + 1] = 7;
        let crc = crc32fast::hash(&bytes[FRAME_HEADER_BYTES..]);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            WalFrame::decode(&Bytes::from(bytes), Lsn(0)),
            Err(WalDecodeError::Malformed { .. })
        ));
    }
}
