//! The WAL record: one committed transaction, framed with its length and crc32.
//!
//! ```text
//! frame = body_len: u32 | crc32(body): u32 | body
//! body  = version: u8 | commit_ts_us: u64 | db_size_pages: u32 | entry_count: u32 | (key: u64 | value)*
//! ```
//! All integers little-endian. A record's LSN is the offset of its frame; the next frame starts at
//! `lsn + FRAME_HEADER_BYTES + body_len`. Its changes become visible at that end LSN (the commit LSN).
//!
//! A transaction too large for one frame travels as a *group* (body version 2, [`group`]): parts, then one
//! commit, all naming the group by the start LSN of its first part; nothing of it is visible before the
//! commit's end LSN. A version 1 record is a commit with no parts, so WAL written before groups existed
//! decodes unchanged. [`WalFrame::decode`] reads both; [`WalRecord::decode`] only version 1.

mod group;

pub use group::{decode_wal_frames, WalFrame, WalPart, GROUP_BODY_VERSION};

use bytes::Bytes;

use crate::codec::{put_u32, put_u64, Reader};
use crate::key::{Key, DB_SIZE_KEY};
use crate::lsn::Lsn;
use crate::value::{Value, ValueError};

/// Bytes of the frame header (length and crc).
pub const FRAME_HEADER_BYTES: usize = 8;
/// Largest accepted body: bounds the memory one record may claim.
pub const RECORD_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Most entries in one record.
pub const RECORD_ENTRIES_MAX: usize = 1 << 20;
const BODY_VERSION: u8 = 1;

/// One committed transaction's changes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WalRecord {
    /// Commit time, microseconds since the Unix epoch.
    pub commit_ts_us: u64,
    /// The database size in pages after this transaction.
    pub db_size_pages: u32,
    /// The changed keys and their new versions. Page keys only; the size travels in `db_size_pages`.
    pub entries: Vec<(Key, Value)>,
}

/// Why a WAL frame does not decode. Every variant names the LSN of the frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalDecodeError {
    /// Fewer bytes than the frame header or the body length claims.
    #[error("truncated WAL record at {lsn}: needs {needed_bytes} bytes, {available_bytes} available")]
    Truncated {
        /// Frame start.
        lsn: Lsn,
        /// Bytes the frame claims.
        needed_bytes: usize,
        /// Bytes present.
        available_bytes: usize,
    },
    /// A body length over the bound.
    #[error("WAL record at {lsn} claims {body_bytes} bytes, more than {RECORD_BODY_BYTES_MAX}")]
    TooLarge {
        /// Frame start.
        lsn: Lsn,
        /// Claimed body length.
        body_bytes: usize,
    },
    /// The crc does not match the body.
    #[error("WAL record at {lsn} fails its crc (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        /// Frame start.
        lsn: Lsn,
        /// crc in the header.
        stored: u32,
        /// crc of the body.
        computed: u32,
    },
    /// The body is malformed.
    #[error("malformed WAL record at {lsn}: {reason}")]
    Malformed {
        /// Frame start.
        lsn: Lsn,
        /// What is wrong.
        reason: String,
    },
}

/// Why a record cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalEncodeError {
    /// An entry breaks the value rules of its key.
    #[error("entry for key {key}: {source}")]
    BadValue {
        /// The key.
        key: Key,
        /// The rule broken.
        source: ValueError,
    },
    /// A key outside the main file (metadata keys are the engine's, not the writer's).
    #[error("entry for key {0}: records carry main-file pages only")]
    NotAPage(Key),
    /// Too many entries or too many bytes.
    #[error("record of {entries} entries and {body_bytes} bytes is over the bounds")]
    TooLarge {
        /// Entries.
        entries: usize,
        /// Body bytes.
        body_bytes: usize,
    },
}

impl WalRecord {
    /// Checks every entry: page keys only, values valid for their key, within the size bounds.
    pub fn validate(&self) -> Result<(), WalEncodeError> {
        validate_entries(&self.entries, self.body_len())
    }

    fn body_len(&self) -> usize {
        1 + 8 + 4 + entries_len(&self.entries)
    }

    /// The length of the whole frame: the distance from this record's LSN to the next one's.
    pub fn frame_len(&self) -> u64 {
        (FRAME_HEADER_BYTES + self.body_len()) as u64
    }

    /// Appends the framed record to `out` after validating it.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WalEncodeError> {
        self.validate()?;
        let frame_start = out.len();
        out.reserve(self.frame_len() as usize);
        put_u32(out, 0);
        put_u32(out, 0);
        out.push(BODY_VERSION);
        put_u64(out, self.commit_ts_us);
        put_u32(out, self.db_size_pages);
        encode_entries(out, &self.entries);
        finish_frame(out, frame_start, self.body_len());
        Ok(())
    }

    /// The framed record as new bytes.
    pub fn to_frame(&self) -> Result<Bytes, WalEncodeError> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(Bytes::from(out))
    }

    /// Decodes the frame at the start of `bytes`, which begins at `lsn`. Returns the record and the frame
    /// length. Values are zero-copy slices of `bytes`.
    /// A version 2 frame (a group's part or commit) is `Malformed` here: read those with [`WalFrame::decode`].
    pub fn decode(bytes: &Bytes, lsn: Lsn) -> Result<(WalRecord, u64), WalDecodeError> {
        let body = check_frame(bytes, lsn)?;
        let frame_len = body.end as u64;
        let record =
            Self::decode_body(bytes, &bytes[body]).map_err(|reason| WalDecodeError::Malformed { lsn, reason })?;
        Ok((record, frame_len))
    }

    fn decode_body(source: &Bytes, body: &[u8]) -> Result<WalRecord, String> {
        let mut reader = Reader::new(body);
        let short = || "body is truncated".to_string();
        let version = reader.u8().ok_or_else(short)?;
        if version != BODY_VERSION {
            return Err(format!("unknown record version {version}"));
        }
        Self::decode_commit_fields(&mut reader, source)
    }

    /// The fields of a commit after its version (and, in a group, its kind and group): time, size, entries.
    fn decode_commit_fields(reader: &mut Reader<'_>, source: &Bytes) -> Result<WalRecord, String> {
        let short = || "body is truncated".to_string();
        let commit_ts_us = reader.u64().ok_or_else(short)?;
        let db_size_pages = reader.u32().ok_or_else(short)?;
        let entries = decode_entries(reader, source)?;
        Ok(WalRecord {
            commit_ts_us,
            db_size_pages,
            entries,
        })
    }
}

/// Checks entries (page keys only, values valid for their key) and the bounds of a body of `body_bytes`.
fn validate_entries(entries: &[(Key, Value)], body_bytes: usize) -> Result<(), WalEncodeError> {
    for (key, value) in entries {
        if !key.is_page() {
            return Err(WalEncodeError::NotAPage(*key));
        }
        value
            .validate(*key)
            .map_err(|source| WalEncodeError::BadValue { key: *key, source })?;
    }
    if entries.len() > RECORD_ENTRIES_MAX || body_bytes > RECORD_BODY_BYTES_MAX {
        return Err(WalEncodeError::TooLarge {
            entries: entries.len(),
            body_bytes,
        });
    }
    Ok(())
}

/// Encoded bytes of `entry_count | (key | value)*`.
fn entries_len(entries: &[(Key, Value)]) -> usize {
    4 + entries.iter().map(|(_, v)| 8 + v.encoded_len()).sum::<usize>()
}

/// Appends `entry_count | (key | value)*`; the entries were validated (the count fits u32).
fn encode_entries(out: &mut Vec<u8>, entries: &[(Key, Value)]) {
    put_u32(
        out,
        u32::try_from(entries.len()).expect("validated entry count fits u32"),
    );
    for (key, value) in entries {
        put_u64(out, key.0);
        value.encode(out);
    }
}

/// Writes the length and crc of the frame that starts at `frame_start` in `out` (the body follows its header).
fn finish_frame(out: &mut [u8], frame_start: usize, expected_body_len: usize) {
    let body_start = frame_start + FRAME_HEADER_BYTES;
    let body_len = out.len() - body_start;
    assert_eq!(
        body_len, expected_body_len,
        "encoded body length must match the computed one"
    );
    let crc = crc32fast::hash(&out[body_start..]);
    out[frame_start..frame_start + 4].copy_from_slice(&(body_len as u32).to_le_bytes());
    out[frame_start + 4..frame_start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Reads `entry_count | (key | value)*` to the end of the body: page keys only, nothing after the entries.
fn decode_entries(reader: &mut Reader<'_>, source: &Bytes) -> Result<Vec<(Key, Value)>, String> {
    let short = || "body is truncated".to_string();
    let count = reader.u32().ok_or_else(short)? as usize;
    if count > RECORD_ENTRIES_MAX || count > reader.remaining() / 9 {
        return Err(format!("entry count {count} does not fit the body"));
    }
    let mut entries = Vec::with_capacity(count);
    for index in 0..count {
        let key = Key(reader.u64().ok_or_else(short)?);
        if !key.is_page() {
            return Err(format!("entry {index}: key {key} is not a main-file page"));
        }
        let value = Value::decode(reader, source, key).map_err(|e| format!("entry {index} ({key}): {e}"))?;
        entries.push((key, value));
    }
    if reader.remaining() != 0 {
        return Err(format!("{} trailing bytes after {count} entries", reader.remaining()));
    }
    Ok(entries)
}

/// Checks a frame's header and crc at the start of `bytes` (which begins at `lsn`); returns the body's range.
fn check_frame(bytes: &Bytes, lsn: Lsn) -> Result<std::ops::Range<usize>, WalDecodeError> {
    let truncated = |needed_bytes| WalDecodeError::Truncated {
        lsn,
        needed_bytes,
        available_bytes: bytes.len(),
    };
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(truncated(FRAME_HEADER_BYTES));
    }
    let body_len = crate::codec::u32_at(bytes, 0) as usize;
    let stored = crate::codec::u32_at(bytes, 4);
    if body_len > RECORD_BODY_BYTES_MAX {
        return Err(WalDecodeError::TooLarge {
            lsn,
            body_bytes: body_len,
        });
    }
    let frame_len = FRAME_HEADER_BYTES + body_len;
    if bytes.len() < frame_len {
        return Err(truncated(frame_len));
    }
    let computed = crc32fast::hash(&bytes[FRAME_HEADER_BYTES..frame_len]);
    if computed != stored {
        return Err(WalDecodeError::Checksum { lsn, stored, computed });
    }
    Ok(FRAME_HEADER_BYTES..frame_len)
}

/// Decodes consecutive frames from `bytes`, the first at `start_lsn`. Stops at the first error, returning the
/// records decoded so far with their start LSNs, and the error (`None` when `bytes` ended on a frame boundary).
pub fn decode_frames(bytes: &Bytes, start_lsn: Lsn) -> (Vec<(Lsn, WalRecord)>, Option<WalDecodeError>) {
    let mut records = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let lsn = Lsn(start_lsn.0 + offset as u64);
        match WalRecord::decode(&bytes.slice(offset..), lsn) {
            Ok((record, frame_len)) => {
                records.push((lsn, record));
                offset += frame_len as usize;
            }
            Err(e) => return (records, Some(e)),
        }
    }
    (records, None)
}

/// Checks the framing of consecutive frames in `bytes` (the first at `start_lsn`): each frame's length bound,
/// completeness and crc, without parsing bodies. Returns the length of the valid prefix (a whole number of
/// frames) and the error that stopped the scan, if any (`None`: `bytes` is whole frames).
pub fn scan_frames(bytes: &[u8], start_lsn: Lsn) -> (usize, Option<WalDecodeError>) {
    let mut offset = 0usize;
    while offset < bytes.len() {
        let lsn = Lsn(start_lsn.0 + offset as u64);
        let rest = &bytes[offset..];
        if rest.len() < FRAME_HEADER_BYTES {
            let error = WalDecodeError::Truncated {
                lsn,
                needed_bytes: FRAME_HEADER_BYTES,
                available_bytes: rest.len(),
            };
            return (offset, Some(error));
        }
        let body_len = crate::codec::u32_at(rest, 0) as usize;
        if body_len > RECORD_BODY_BYTES_MAX {
            return (
                offset,
                Some(WalDecodeError::TooLarge {
                    lsn,
                    body_bytes: body_len,
                }),
            );
        }
        // An empty body has crc 0, so eight zero bytes (a zero-filled tail after a crash) would pass the crc.
        if body_len == 0 {
            let error = WalDecodeError::Malformed {
                lsn,
                reason: "empty frame".into(),
            };
            return (offset, Some(error));
        }
        let frame_len = FRAME_HEADER_BYTES + body_len;
        if rest.len() < frame_len {
            let error = WalDecodeError::Truncated {
                lsn,
                needed_bytes: frame_len,
                available_bytes: rest.len(),
            };
            return (offset, Some(error));
        }
        let stored = crate::codec::u32_at(rest, 4);
        let computed = crc32fast::hash(&rest[FRAME_HEADER_BYTES..frame_len]);
        if stored != computed {
            return (offset, Some(WalDecodeError::Checksum { lsn, stored, computed }));
        }
        offset += frame_len;
    }
    (offset, None)
}

/// The database size key's value for `db_size_pages`.
pub fn db_size_value(db_size_pages: u32) -> (Key, Value) {
    (
        DB_SIZE_KEY,
        Value::Image(Bytes::copy_from_slice(&db_size_pages.to_le_bytes())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::PAGE_SIZE_BYTES;
    use crate::value::Patch;
    use proptest::prelude::*;

    fn arb_record() -> impl Strategy<Value = WalRecord> {
        let value = prop_oneof![
            any::<u8>().prop_map(|b| Value::Image(Bytes::from(vec![b; PAGE_SIZE_BYTES]))),
            proptest::collection::vec((0u16..8100, proptest::collection::vec(any::<u8>(), 0..40)), 1..4).prop_map(
                |p| Value::Delta(
                    p.into_iter()
                        .map(|(offset, d)| Patch {
                            offset,
                            data: Bytes::from(d)
                        })
                        .collect()
                )
            ),
        ];
        (
            any::<u64>(),
            any::<u32>(),
            proptest::collection::vec((0u32..100, value), 0..6),
        )
            .prop_map(|(commit_ts_us, db_size_pages, entries)| WalRecord {
                commit_ts_us,
                db_size_pages,
                entries: entries.into_iter().map(|(b, v)| (Key::page(b), v)).collect(),
            })
    }

    proptest! {
        #[test]
        fn round_trip(record in arb_record()) {
            let frame = record.to_frame().expect("valid record encodes");
            prop_assert_eq!(frame.len() as u64, record.frame_len());
            let (decoded, len) = WalRecord::decode(&frame, Lsn(100)).expect("decodes");
            prop_assert_eq!(len, record.frame_len());
            prop_assert_eq!(decoded, record);
        }

        #[test]
        fn any_bytes_decode_or_error(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = WalRecord::decode(&Bytes::from(bytes.clone()), Lsn(0));
            // Also with a valid crc, so the body parser sees the garbage.
            let mut framed = Vec::new();
            framed.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            framed.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
            framed.extend_from_slice(&bytes);
            let _ = WalRecord::decode(&Bytes::from(framed), Lsn(0));
        }

        #[test]
        fn flipped_byte_is_detected(record in arb_record(), position in any::<prop::sample::Index>(), bit in 0u8..8) {
            let frame = record.to_frame().expect("encodes");
            let mut bytes = frame.to_vec();
            let at = position.index(bytes.len());
            bytes[at] ^= 1 << bit;
            prop_assert!(WalRecord::decode(&Bytes::from(bytes), Lsn(7)).is_err());
        }
    }

    #[test]
    fn consecutive_frames_and_truncated_tail() {
        let a = WalRecord {
            commit_ts_us: 1,
            db_size_pages: 1,
            entries: vec![],
        };
        let b = WalRecord {
            commit_ts_us: 2,
            db_size_pages: 2,
            entries: vec![(Key::page(1), Value::Image(Bytes::from(vec![3; PAGE_SIZE_BYTES])))],
        };
        let mut buf = Vec::new();
        a.encode(&mut buf).expect("encodes");
        b.encode(&mut buf).expect("encodes");
        let full = Bytes::from(buf);
        let (records, err) = decode_frames(&full, Lsn(1000));
        assert!(err.is_none());
        assert_eq!(records[0].0, Lsn(1000));
        assert_eq!(records[1].0, Lsn(1000 + a.frame_len()));
        let (records, err) = decode_frames(&full.slice(..full.len() - 1), Lsn(1000));
        assert_eq!(records.len(), 1);
        match err {
            Some(WalDecodeError::Truncated { lsn, .. }) => {
                assert_eq!(lsn, Lsn(1000 + a.frame_len()))
            }
            other => panic!("expected a truncation error, got {other:?}"),
        }
    }

    #[test]
    fn scan_frames_finds_the_valid_prefix() {
        let a = WalRecord {
            commit_ts_us: 1,
            db_size_pages: 1,
            entries: vec![],
        };
        let mut buf = Vec::new();
        a.encode(&mut buf).expect("encodes");
        a.encode(&mut buf).expect("encodes");
        let frame = a.frame_len() as usize;
        assert_eq!(scan_frames(&buf, Lsn(0)), (2 * frame, None));
        let (valid, error) = scan_frames(&buf[..2 * frame - 1], Lsn(10));
        assert_eq!(valid, frame);
        assert!(matches!(error, Some(WalDecodeError::Truncated { lsn, .. }) if lsn == Lsn(10 + frame as u64)));
        buf[frame + 9] ^= 1;
        assert!(matches!(scan_frames(&buf, Lsn(0)), (v, Some(WalDecodeError::Checksum { .. })) if v == frame));
        let zeros = [0u8; 16];
        assert!(matches!(
            scan_frames(&zeros, Lsn(0)),
            (0, Some(WalDecodeError::Malformed { .. }))
        ));
    }

    proptest! {
        #[test]
        fn scan_frames_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let (valid, _) = scan_frames(&bytes, Lsn(0));
            prop_assert!(valid <= bytes.len());
        }
    }

    #[test]
    fn metadata_keys_are_refused() {
        let record = WalRecord {
            commit_ts_us: 0,
            db_size_pages: 0,
            entries: vec![(DB_SIZE_KEY, Value::Image(Bytes::from_static(b"1234")))],
        };
        assert!(matches!(record.to_frame(), Err(WalEncodeError::NotAPage(_))));
    }
}
