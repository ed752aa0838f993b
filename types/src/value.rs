//! Page values (whole images and byte-range deltas), their encoding, and redo.
//!
//! Redo is pure: [`reconstruct`] applies a chain of deltas to a base image, with no I/O.

use bytes::Bytes;

use crate::codec::{put_u16, put_u32, Reader};
use crate::key::{Key, PAGE_SIZE_BYTES};

/// Most patches one delta may carry.
pub const PATCHES_PER_DELTA_MAX: usize = 4096;

/// One byte-range patch: write `data` at `offset`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Patch {
    /// Byte offset within the page.
    pub offset: u16,
    /// The new bytes.
    pub data: Bytes,
}

/// One version of a key.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Value {
    /// The whole value; needs no older version ("will init"). Page keys carry exactly `PAGE_SIZE_BYTES`.
    Image(Bytes),
    /// Byte-range patches over the previous version (a page of zeros when there is none).
    Delta(Vec<Patch>),
}

/// Why a value is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The encoding is short or carries an unknown tag.
    #[error("malformed value encoding: {0}")]
    Malformed(&'static str),
    /// A page image of the wrong size.
    #[error("page image of {len} bytes, expected {PAGE_SIZE_BYTES}")]
    BadImageSize {
        /// Its length.
        len: usize,
    },
    /// A patch that reaches past the end of the page.
    #[error("patch at offset {offset} of {len} bytes reaches past the {PAGE_SIZE_BYTES}-byte page")]
    PatchOutOfBounds {
        /// Patch offset.
        offset: usize,
        /// Patch length.
        len: usize,
    },
    /// A delta on a key that only takes images.
    #[error("delta on metadata key {0}, which takes images only")]
    DeltaOnMetadata(Key),
    /// Too many patches or an empty delta.
    #[error("delta with {0} patches (must be 1..={PATCHES_PER_DELTA_MAX})")]
    PatchCount(usize),
}

const TAG_IMAGE: u8 = 1;
const TAG_DELTA: u8 = 2;

impl Value {
    /// Whether a read can stop at this version.
    pub fn will_init(&self) -> bool {
        matches!(self, Value::Image(_))
    }

    /// Checks the value against the rules of `key`'s space: page images are page-sized, patches stay inside the
    /// page, metadata keys take images of at most a page.
    pub fn validate(&self, key: Key) -> Result<(), ValueError> {
        match self {
            Value::Image(bytes) if key.is_page() && bytes.len() != PAGE_SIZE_BYTES => {
                Err(ValueError::BadImageSize { len: bytes.len() })
            }
            Value::Image(bytes) if bytes.len() > PAGE_SIZE_BYTES => Err(ValueError::BadImageSize { len: bytes.len() }),
            Value::Image(_) => Ok(()),
            Value::Delta(_) if !key.is_page() => Err(ValueError::DeltaOnMetadata(key)),
            Value::Delta(patches) => {
                if patches.is_empty() || patches.len() > PATCHES_PER_DELTA_MAX {
                    return Err(ValueError::PatchCount(patches.len()));
                }
                for patch in patches {
                    let offset = patch.offset as usize;
                    if offset + patch.data.len() > PAGE_SIZE_BYTES {
                        return Err(ValueError::PatchOutOfBounds {
                            offset,
                            len: patch.data.len(),
                        });
                    }
                }
                Ok(())
            }
        }
    }

    /// Bytes that [`Value::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        match self {
            Value::Image(bytes) => 1 + 4 + bytes.len(),
            Value::Delta(patches) => 1 + 2 + patches.iter().map(|p| 4 + p.data.len()).sum::<usize>(),
        }
    }

    /// Appends the encoding: `tag: u8`, then for an image `len: u32 | bytes`, for a delta
    /// `count: u16 | (offset: u16 | len: u16 | bytes)*`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Image(bytes) => {
                out.push(TAG_IMAGE);
                put_u32(out, u32::try_from(bytes.len()).expect("validated image fits u32"));
                out.extend_from_slice(bytes);
            }
            Value::Delta(patches) => {
                out.push(TAG_DELTA);
                put_u16(
                    out,
                    u16::try_from(patches.len()).expect("validated patch count fits u16"),
                );
                for patch in patches {
                    put_u16(out, patch.offset);
                    put_u16(
                        out,
                        u16::try_from(patch.data.len()).expect("validated patch fits the page"),
                    );
                    out.extend_from_slice(&patch.data);
                }
            }
        }
    }

    /// Decodes one value from the reader. `source` is the buffer the reader reads, so the value's bytes are
    /// zero-copy slices of it. The value is validated against `key`.
    pub(crate) fn decode(reader: &mut Reader<'_>, source: &Bytes, key: Key) -> Result<Value, ValueError> {
        let short = ValueError::Malformed("value is truncated");
        let slice_of = |bytes: &[u8]| source.slice_ref(bytes);
        let value = match reader.u8().ok_or(short.clone())? {
            TAG_IMAGE => {
                let len = reader.u32().ok_or(short.clone())? as usize;
                if len > PAGE_SIZE_BYTES {
                    return Err(ValueError::BadImageSize { len });
                }
                Value::Image(slice_of(reader.take(len).ok_or(short)?))
            }
            TAG_DELTA => {
                let count = reader.u16().ok_or(short.clone())? as usize;
                if count == 0 || count > PATCHES_PER_DELTA_MAX {
                    return Err(ValueError::PatchCount(count));
                }
                let mut patches = Vec::with_capacity(count);
                for _ in 0..count {
                    let offset = reader.u16().ok_or(short.clone())?;
                    let len = reader.u16().ok_or(short.clone())? as usize;
                    let data = slice_of(reader.take(len).ok_or(short.clone())?);
                    patches.push(Patch { offset, data });
                }
                Value::Delta(patches)
            }
            _ => return Err(ValueError::Malformed("unknown value tag")),
        };
        value.validate(key)?;
        Ok(value)
    }

    /// Decodes a value that fills `bytes` exactly.
    pub fn decode_exact(bytes: &Bytes, key: Key) -> Result<Value, ValueError> {
        let mut reader = Reader::new(bytes);
        let value = Value::decode(&mut reader, bytes, key)?;
        if reader.remaining() != 0 {
            return Err(ValueError::Malformed("trailing bytes after value"));
        }
        Ok(value)
    }
}

/// Applies `patches` to `page` in order. Assumes the patches were validated (they fit the page).
pub fn apply_delta(page: &mut [u8], patches: &[Patch]) {
    for patch in patches {
        let start = patch.offset as usize;
        page[start..start + patch.data.len()].copy_from_slice(&patch.data);
    }
}

/// Rebuilds a value from `base` (the newest image, or `None` for a page never written: zeros) and the deltas
/// above it, given newest first as a reader gathers them.
///
/// Every value must have been validated for its key, so this cannot fail.
pub fn reconstruct(base: Option<&Bytes>, deltas_newest_first: &[Value]) -> Bytes {
    if deltas_newest_first.is_empty() {
        if let Some(image) = base {
            return image.clone();
        }
    }
    let mut page = match base {
        Some(image) => image.to_vec(),
        None => vec![0u8; PAGE_SIZE_BYTES],
    };
    for value in deltas_newest_first.iter().rev() {
        match value {
            Value::Delta(patches) => apply_delta(&mut page, patches),
            Value::Image(_) => unreachable!("reads stop at an image, so none is above the base"),
        }
    }
    Bytes::from(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), PAGE_SIZE_BYTES).prop_map(|v| Value::Image(Bytes::from(v))),
            proptest::collection::vec((0u16..8000, proptest::collection::vec(any::<u8>(), 0..100)), 1..8).prop_map(
                |patches| Value::Delta(
                    patches
                        .into_iter()
                        .map(|(offset, data)| Patch {
                            offset,
                            data: Bytes::from(data)
                        })
                        .collect()
                )
            ),
        ]
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(value in arb_value()) {
            let mut out = Vec::new();
            value.encode(&mut out);
            prop_assert_eq!(out.len(), value.encoded_len());
            let decoded = Value::decode_exact(&Bytes::from(out), Key::page(1)).expect("valid value decodes");
            prop_assert_eq!(decoded, value);
        }

        #[test]
        fn decode_of_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Value::decode_exact(&Bytes::from(bytes.clone()), Key::page(1));
            let _ = Value::decode_exact(&Bytes::from(bytes), crate::key::DB_SIZE_KEY);
        }
    }

    #[test]
    fn reconstruct_applies_oldest_delta_first() {
        let base = Bytes::from(vec![1u8; PAGE_SIZE_BYTES]);
        let older = Value::Delta(vec![Patch {
            offset: 0,
            data: Bytes::from_static(b"ab"),
        }]);
        let newer = Value::Delta(vec![Patch {
            offset: 1,
            data: Bytes::from_static(b"Z"),
        }]);
        let page = reconstruct(Some(&base), &[newer, older]);
        assert_eq!(&page[..3], b"aZ\x01");
        let zeros = reconstruct(None, &[]);
        assert!(zeros.iter().all(|&b| b == 0));
    }

    #[test]
    fn validation_rules() {
        let short = Value::Image(Bytes::from_static(b"abc"));
        assert!(short.validate(Key::page(0)).is_err());
        assert!(short.validate(crate::key::DB_SIZE_KEY).is_ok());
        let out_of_page = Value::Delta(vec![Patch {
            offset: 8190,
            data: Bytes::from_static(b"abc"),
        }]);
        assert_eq!(
            out_of_page.validate(Key::page(0)),
            Err(ValueError::PatchOutOfBounds { offset: 8190, len: 3 })
        );
        assert!(Value::Delta(vec![]).validate(Key::page(0)).is_err());
    }
}
