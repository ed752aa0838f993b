//! PostgreSQL's binary `COPY` format (`FORMAT BINARY`), read tuple by tuple from the bytes a client streams
//! ([`BinaryReader`]) and written ([`header`], [`write_tuple`]). Pure: the fields are each column type's
//! binary form (`value::decode_binary` / `encode_binary`), which the session converts.
//!
//! Layout (all integers big-endian): the 11-byte signature `PGCOPY\n\377\r\n\0`, a 32-bit flags word (no
//! flag is supported: bit 16 is "with OIDs", which PostgreSQL 12 removed, and bits 17–31 are critical), a
//! 32-bit length and that many bytes of header extension (skipped); then per tuple a 16-bit field count and
//! per field a 32-bit length (`-1`: NULL) and that many bytes; a field count of `-1` ends the data. The
//! end marker is optional: the client's `CopyDone` between tuples ends it too, as in PostgreSQL.

use crate::error::{PgError, BAD_COPY_FILE_FORMAT};

use super::{FIELDS_MAX, RECORD_BYTES_MAX};

/// The format's signature, the first bytes of the data.
pub const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// Signature, flags and extension length.
const HEADER_FIXED_BYTES: usize = 19;

/// One tuple's fields in their binary form, `None` for NULL.
pub type Tuple = Vec<Option<Vec<u8>>>;

/// Reads tuples from the bytes of a binary `COPY FROM STDIN` as they arrive.
#[derive(Debug, Default)]
pub struct BinaryReader {
    /// Bytes received and not yet read.
    pending: Vec<u8>,
    /// Where the unread bytes of `pending` start.
    read_at: usize,
    /// The header has been read.
    header_read: bool,
    /// The end marker was seen: later bytes are ignored.
    ended: bool,
    /// Tuples read so far (for error messages).
    tuples: u64,
}

impl BinaryReader {
    /// A reader at the start of the data.
    pub fn new() -> BinaryReader {
        BinaryReader::default()
    }

    /// The number of the tuple [`BinaryReader::next_tuple`] reads next (1-based, for error context).
    pub fn tuple_number(&self) -> u64 {
        self.tuples + 1
    }

    /// Takes more bytes; a tuple longer than [`RECORD_BYTES_MAX`] is an error.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), PgError> {
        if self.ended {
            return Ok(());
        }
        // What was read is dropped before more comes in, so `pending` holds at most one partial tuple.
        self.pending.drain(..self.read_at);
        self.read_at = 0;
        self.pending.extend_from_slice(bytes);
        if self.pending.len() > RECORD_BYTES_MAX.saturating_add(HEADER_FIXED_BYTES) {
            return Err(PgError::new(
                crate::error::PROGRAM_LIMIT_EXCEEDED,
                format!("a binary COPY tuple is longer than {RECORD_BYTES_MAX} bytes"),
            ));
        }
        Ok(())
    }

    /// The next complete tuple, if the bytes so far hold one. With `at_end` (the client said CopyDone), bytes
    /// left that make no whole tuple are an error.
    pub fn next_tuple(&mut self, at_end: bool) -> Result<Option<Tuple>, PgError> {
        if self.ended {
            return Ok(None);
        }
        if !self.header_read {
            match self.read_header()? {
                Some(consumed) => {
                    self.read_at += consumed;
                    self.header_read = true;
                }
                None if at_end => return Err(bad("COPY file signature not recognized")),
                None => return Ok(None),
            }
        }
        match parse_tuple(&self.pending[self.read_at..])? {
            Parsed::Tuple(tuple, consumed) => {
                self.read_at += consumed;
                self.tuples += 1;
                Ok(Some(tuple))
            }
            Parsed::End => {
                self.ended = true;
                self.pending = Vec::new();
                self.read_at = 0;
                Ok(None)
            }
            Parsed::Incomplete if at_end && self.read_at < self.pending.len() => {
                Err(bad("unexpected EOF in COPY data"))
            }
            Parsed::Incomplete => Ok(None),
        }
    }

    /// The header's length when it is all there (checked), `None` while it is not.
    fn read_header(&self) -> Result<Option<usize>, PgError> {
        let bytes = &self.pending[self.read_at..];
        let compared = bytes.len().min(SIGNATURE.len());
        if bytes[..compared] != SIGNATURE[..compared] {
            return Err(bad("COPY file signature not recognized"));
        }
        let (Some(flags), Some(extension)) = (be_u32(bytes, 11), be_u32(bytes, 15)) else {
            return Ok(None);
        };
        if flags & (1 << 16) != 0 {
            return Err(bad("COPY with OIDs is not supported"));
        }
        if flags >> 17 != 0 {
            return Err(bad("unrecognized critical flags in COPY file header"));
        }
        let extension = usize::try_from(extension).map_err(|_| bad("invalid COPY file header (extension length)"))?;
        if extension > RECORD_BYTES_MAX {
            return Err(bad("invalid COPY file header (extension length)"));
        }
        let total = HEADER_FIXED_BYTES + extension;
        Ok((bytes.len() >= total).then_some(total))
    }
}

/// What the bytes at the read position hold.
enum Parsed {
    /// A whole tuple and the bytes it took.
    Tuple(Tuple, usize),
    /// The end marker.
    End,
    /// Not a whole tuple yet.
    Incomplete,
}

fn parse_tuple(bytes: &[u8]) -> Result<Parsed, PgError> {
    let Some(count) = bytes.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]])) else {
        return Ok(Parsed::Incomplete);
    };
    if count == -1 {
        return Ok(Parsed::End);
    }
    let count = usize::try_from(count).map_err(|_| bad(&format!("invalid field count {count}")))?;
    if count > FIELDS_MAX {
        return Err(bad(&format!("more than {FIELDS_MAX} fields in a COPY tuple")));
    }
    let mut at = 2;
    let mut tuple = Vec::with_capacity(count);
    for _ in 0..count {
        let Some(length) = be_u32(bytes, at) else {
            return Ok(Parsed::Incomplete);
        };
        at += 4;
        // A length is signed: -1 is NULL, any other negative one is invalid.
        let length = length as i32;
        if length == -1 {
            tuple.push(None);
            continue;
        }
        let length = usize::try_from(length).map_err(|_| bad(&format!("invalid field size {length}")))?;
        let Some(field) = bytes.get(at..at + length) else {
            return Ok(Parsed::Incomplete);
        };
        tuple.push(Some(field.to_vec()));
        at += length;
    }
    Ok(Parsed::Tuple(tuple, at))
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn bad(message: &str) -> PgError {
    PgError::new(BAD_COPY_FILE_FORMAT, message)
}

/// The header a binary `COPY TO` starts with (no flags, no extension).
pub fn header() -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_FIXED_BYTES);
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out
}

/// One tuple in the binary format. The end marker is the caller's (`-1` as 16 bits).
pub fn write_tuple(fields: &[Option<Vec<u8>>]) -> Result<Vec<u8>, PgError> {
    let count = i16::try_from(fields.len()).map_err(|_| bad("too many fields for a binary COPY tuple"))?;
    let mut out = Vec::with_capacity(2 + fields.iter().map(|f| 4 + f.as_ref().map_or(0, Vec::len)).sum::<usize>());
    out.extend_from_slice(&count.to_be_bytes());
    for field in fields {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(bytes) => {
                let length = i32::try_from(bytes.len()).map_err(|_| bad("a binary COPY field is too long"))?;
                out.extend_from_slice(&length.to_be_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(tuples: &[Tuple], end: bool) -> Vec<u8> {
        let mut out = header();
        for tuple in tuples {
            out.extend(write_tuple(tuple).expect("writes"));
        }
        if end {
            out.extend_from_slice(&(-1i16).to_be_bytes());
        }
        out
    }

    fn read_all(chunks: &[&[u8]]) -> Result<Vec<Tuple>, PgError> {
        let mut reader = BinaryReader::new();
        let mut tuples = Vec::new();
        for chunk in chunks {
            reader.push(chunk)?;
            while let Some(tuple) = reader.next_tuple(false)? {
                tuples.push(tuple);
            }
        }
        while let Some(tuple) = reader.next_tuple(true)? {
            tuples.push(tuple);
        }
        Ok(tuples)
    }

    #[test]
    fn tuples_round_trip_whatever_the_chunking() -> Result<(), PgError> {
        let tuples = vec![
            vec![Some(1i32.to_be_bytes().to_vec()), Some(b"one".to_vec())],
            vec![None, Some(Vec::new())],
        ];
        let bytes = stream(&tuples, true);
        assert_eq!(read_all(&[&bytes])?, tuples);
        let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(read_all(&one_by_one)?, tuples);
        // Without the end marker, CopyDone between tuples ends the data too.
        assert_eq!(read_all(&[&stream(&tuples, false)])?, tuples);
        Ok(())
    }

    #[test]
    fn bad_data_is_22p04() {
        let wrong_signature = b"PGCOPY\nX\r\n\0\0\0\0\0\0\0\0\0".to_vec();
        let mut cut = stream(&[vec![Some(b"abc".to_vec())]], false);
        cut.truncate(cut.len() - 1);
        let mut negative = header();
        negative.extend_from_slice(&1i16.to_be_bytes());
        negative.extend_from_slice(&(-2i32).to_be_bytes());
        let mut oids = header();
        oids[11..15].copy_from_slice(&(1u32 << 16).to_be_bytes());
        for bytes in [wrong_signature, cut, negative, oids, b"PG".to_vec()] {
            let error = read_all(&[&bytes]).expect_err("bad data");
            assert_eq!(error.code, BAD_COPY_FILE_FORMAT, "{error:?}");
        }
    }

    #[test]
    fn bytes_after_the_end_marker_are_ignored() -> Result<(), PgError> {
        let mut bytes = stream(&[vec![None]], true);
        bytes.extend_from_slice(b"trailing");
        assert_eq!(read_all(&[&bytes])?, vec![vec![None]]);
        Ok(())
    }
}
