//! The control file ([`FileControl`]): a timeline's [`ControlState`] in the newer of two slots, updated in place
//! (the other slot, one write and one fdatasync) and checked (magic, version, length, crc) on load. The format
//! and the crash argument are in the [module above](super).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cambium_types::codec::{u32_at, u64_at};
use cambium_types::fsio::{self, Durability};
use safekeeper_core::protocol::{ControlState, ControlStore, StoreError};

use super::{
    corrupt, from_fsio, io_error, DeferredDir, CONTROL_FILE_BYTES_MAX, CONTROL_FILE_NAME, CONTROL_FORMAT_VERSION,
    CONTROL_FORMAT_VERSION_WHOLE, CONTROL_HEADER_BYTES, CONTROL_MAGIC, CONTROL_SLOT_BYTES_MIN,
    CONTROL_SLOT_HEADER_BYTES,
};

/// The control file of a timeline directory, written by [`ControlStore::persist`]: in place while the file is
/// known (opened with [`FileControl::open`] or written by this store) and the state fits its slot; otherwise
/// the whole file, atomically.
#[derive(Debug)]
pub struct FileControl {
    dir: PathBuf,
    path: PathBuf,
    durability: Durability,
    /// A timeline created without files (`create_timeline_deferred`): its directory, made by the next persist
    /// (unless its WAL store did it first) and made durable right after the control file is written.
    pub(super) deferred: Option<Arc<DeferredDir>>,
    poisoned: bool,
    /// Where the file's newest state is, once known: `None` until this store opened or wrote a two-slot file
    /// (then the next persist writes the whole file).
    slots: Option<Slots>,
    /// The file, open for the in-place writes (opened by the first of them after a whole-file write or open).
    file: Option<File>,
}

/// The two slots of a control file and which one holds its newest state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slots {
    /// Bytes per slot (the file is two of them).
    pub(super) slot_bytes: u64,
    /// The slot (0 or 1) holding the state with the highest sequence number.
    pub(super) newest: u64,
    /// That state's sequence number.
    pub(super) seq: u64,
}

impl FileControl {
    /// The control file of `dir` (not read: see [`FileControl::open`]). Its first persist writes the whole file.
    pub fn new(dir: &Path, durability: Durability) -> FileControl {
        FileControl {
            dir: dir.to_path_buf(),
            path: dir.join(CONTROL_FILE_NAME),
            durability,
            deferred: None,
            poisoned: false,
            slots: None,
            file: None,
        }
    }

    /// Reads and checks the control file of `dir`, and the store that updates it in place: `None` if there is
    /// none; `Corrupt` as [`FileControl::load`].
    pub fn open(dir: &Path, durability: Durability) -> Result<Option<(ControlState, FileControl)>, StoreError> {
        let Some((state, slots)) = read(dir)? else {
            return Ok(None);
        };
        let mut control = FileControl::new(dir, durability);
        control.slots = slots;
        Ok(Some((state, control)))
    }

    /// The directory is `deferred` (shared with the WAL store): the next persist makes it if need be, and makes
    /// it durable.
    pub(super) fn defer_dir(&mut self, deferred: Arc<DeferredDir>) {
        self.deferred = Some(deferred);
    }

    /// The control file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads and checks the control file of `dir`: `None` if there is none; `Corrupt` if neither slot holds a
    /// state whose magic, version, length, crc and JSON body are right (or the file is not two slots long, or, in
    /// the older one-state format, that state is wrong). Of two good slots the one with the higher sequence
    /// number is the state.
    pub fn load(dir: &Path) -> Result<Option<ControlState>, StoreError> {
        Ok(read(dir)?.map(|(state, _)| state))
    }
}

impl FileControl {
    /// Writes the first control file of a timeline directory being created: whole wherever it is seen, but
    /// durable only once the caller fsyncs the directory (which it does once for this file and the first
    /// segment: see `create_timeline`).
    pub(super) fn persist_first(&mut self, state: &ControlState) -> Result<(), StoreError> {
        assert!(!self.poisoned, "a new control file's store is not poisoned");
        let written = encode_whole(state, 1, &self.path).and_then(|(bytes, slots)| {
            fsio::write_then_rename(&self.path, &bytes, self.durability)
                .map(|()| slots)
                .map_err(from_fsio)
        });
        match written {
            Ok(slots) => {
                self.slots = Some(slots);
                Ok(())
            }
            Err(error) => {
                self.poisoned = true;
                Err(error)
            }
        }
    }

    /// Writes the whole file (temp, fsync, rename, fsync of the directory; a deferred directory made first and
    /// made durable after), `state` in slot 0 and slot 1 zeroed.
    fn write_whole(&mut self, state: &ControlState) -> Result<(), StoreError> {
        let seq = self.slots.map_or(1, |slots| slots.seq + 1);
        let (bytes, slots) = encode_whole(state, seq, &self.path)?;
        let deferred = self.deferred.clone();
        // `write_atomic` fsyncs the control file's own directory: those above it follow.
        let durable = deferred
            .as_ref()
            .map_or(Ok(()), |dir| dir.make())
            .and_then(|()| fsio::write_atomic(&self.path, &bytes, self.durability).map_err(from_fsio))
            .and_then(|()| deferred.as_ref().map_or(Ok(true), |dir| dir.make_durable(true)))?;
        assert!(
            durable,
            "a deferred directory is made before its control file is written"
        );
        self.deferred = None;
        self.file = None;
        self.slots = Some(slots);
        Ok(())
    }

    /// Writes `state` into the slot that does not hold the newest state, and fdatasyncs: the file's length never
    /// changes, so no metadata needs to reach the disk. A crash part way leaves that slot torn and the other
    /// one whole, which is then the state (the write was not acknowledged).
    fn write_in_place(&mut self, slots: Slots, state: &ControlState) -> Result<(), StoreError> {
        let seq = slots.seq + 1;
        let bytes = encode_slot(state, seq);
        if bytes.len() as u64 > slots.slot_bytes {
            // Outgrew its slot: a new file of larger slots.
            return self.write_whole(state);
        }
        let next = 1 - slots.newest;
        let file = match &mut self.file {
            Some(file) => file,
            empty => empty.insert(
                OpenOptions::new()
                    .write(true)
                    .open(&self.path)
                    .map_err(io_error(&self.path))?,
            ),
        };
        file.write_all_at(&bytes, next * slots.slot_bytes)
            .map_err(io_error(&self.path))?;
        fsio::sync_file(file, &self.path, self.durability).map_err(from_fsio)?;
        self.slots = Some(Slots {
            newest: next,
            seq,
            ..slots
        });
        Ok(())
    }
}

impl ControlStore for FileControl {
    fn persist(&mut self, state: &ControlState) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        let written = match self.slots {
            Some(slots) if self.deferred.is_none() => self.write_in_place(slots, state),
            _ => self.write_whole(state),
        };
        written.map_err(|error| {
            tracing::error!(dir = %self.dir.display(), %error, "control file write failed; poisoned");
            self.poisoned = true;
            error
        })
    }
}

/// The control state in `dir` and, for a two-slot file, its slots.
fn read(dir: &Path) -> Result<Option<(ControlState, Option<Slots>)>, StoreError> {
    let path = dir.join(CONTROL_FILE_NAME);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error(&path)(error)),
    };
    let mut bytes = Vec::new();
    file.take(CONTROL_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error(&path))?;
    decode_control(&bytes, &path).map(Some)
}

/// The JSON body of `state`.
fn encode_body(state: &ControlState) -> Vec<u8> {
    if let Err(error) = state.history.validate() {
        panic!("persisting a control state with a {error}");
    }
    serde_json::to_vec(state).expect("ControlState is plain data that serializes to JSON")
}

/// One slot's bytes (header and body, no padding) for `state` with sequence number `seq`.
fn encode_slot(state: &ControlState, seq: u64) -> Vec<u8> {
    let body = encode_body(state);
    let body_len = u32::try_from(body.len()).expect("a control state is far smaller than 4 GiB");
    let mut out = Vec::with_capacity(CONTROL_SLOT_HEADER_BYTES + body.len());
    out.extend_from_slice(CONTROL_MAGIC);
    out.extend_from_slice(&CONTROL_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&slot_crc(seq, &body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// The crc of a slot: over its sequence number, body length and body, so a slot whose header is from one write
/// and body from another never checks.
fn slot_crc(seq: u64, body: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq.to_le_bytes());
    hasher.update(&(body.len() as u64).to_le_bytes());
    hasher.update(body);
    hasher.finalize()
}

/// A whole two-slot file for `state` with sequence number `seq`: `state` in slot 0, slot 1 zeros; slots of
/// [`CONTROL_SLOT_BYTES_MIN`], or the next power of two that holds the state.
/// A state whose file would pass [`CONTROL_FILE_BYTES_MAX`] (which a load refuses) is an `InvalidInput` error,
/// and nothing is written.
fn encode_whole(state: &ControlState, seq: u64, path: &Path) -> Result<(Vec<u8>, Slots), StoreError> {
    let slot = encode_slot(state, seq);
    let slot_bytes = (slot.len() as u64).next_power_of_two().max(CONTROL_SLOT_BYTES_MIN);
    if 2 * slot_bytes > CONTROL_FILE_BYTES_MAX {
        return Err(StoreError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "a control state of {} bytes needs a file over {CONTROL_FILE_BYTES_MAX} bytes",
                    slot.len()
                ),
            ),
        });
    }
    let mut bytes = vec![0; usize::try_from(2 * slot_bytes).expect("at most CONTROL_FILE_BYTES_MAX")];
    bytes[..slot.len()].copy_from_slice(&slot);
    Ok((
        bytes,
        Slots {
            slot_bytes,
            newest: 0,
            seq,
        },
    ))
}

/// Parses and checks control file bytes (untrusted: every failure is `Corrupt`): a two-slot file, or one of the
/// older one-state format (then no slots).
fn decode_control(bytes: &[u8], path: &Path) -> Result<(ControlState, Option<Slots>), StoreError> {
    if bytes.len() as u64 > CONTROL_FILE_BYTES_MAX {
        return Err(corrupt(path, 0, format!("longer than {CONTROL_FILE_BYTES_MAX} bytes")));
    }
    if bytes.len() >= CONTROL_HEADER_BYTES
        && &bytes[..8] == CONTROL_MAGIC
        && u32_at(bytes, 8) == CONTROL_FORMAT_VERSION_WHOLE
    {
        return decode_whole_v1(bytes, path).map(|state| (state, None));
    }
    let len = bytes.len() as u64;
    if len % 2 != 0 || len / 2 < CONTROL_SLOT_BYTES_MIN {
        return Err(corrupt(
            path,
            0,
            format!("{len} bytes: not two slots of at least {CONTROL_SLOT_BYTES_MIN}"),
        ));
    }
    let slot_bytes = len / 2;
    let half = usize::try_from(slot_bytes).expect("at most CONTROL_FILE_BYTES_MAX");
    let first = decode_slot(&bytes[..half]);
    let second = decode_slot(&bytes[half..]);
    let (newest, seq, state) = match (first, second) {
        (Ok((seq0, state0)), Ok((seq1, state1))) => {
            if seq0 == seq1 {
                return Err(corrupt(path, 8 + 4, format!("both slots hold sequence number {seq0}")));
            }
            if seq0 > seq1 {
                (0, seq0, state0)
            } else {
                (1, seq1, state1)
            }
        }
        (Ok((seq, state)), Err(_)) => (0, seq, state),
        (Err(_), Ok((seq, state))) => (1, seq, state),
        (Err((offset0, reason0)), Err((offset1, reason1))) => {
            return Err(corrupt(
                path,
                offset0,
                format!(
                    "no good slot: slot 0 {reason0}; slot 1 (at offset {}) {reason1}",
                    slot_bytes + offset1
                ),
            ))
        }
    };
    Ok((
        state,
        Some(Slots {
            slot_bytes,
            newest,
            seq,
        }),
    ))
}

/// One slot's state and sequence number, or where in the slot and why it is not one.
fn decode_slot(slot: &[u8]) -> Result<(u64, ControlState), (u64, String)> {
    if slot.len() < CONTROL_SLOT_HEADER_BYTES {
        return Err((0, "shorter than its header".to_owned()));
    }
    if &slot[..8] != CONTROL_MAGIC {
        return Err((0, "bad magic".to_owned()));
    }
    let version = u32_at(slot, 8);
    if version != CONTROL_FORMAT_VERSION {
        return Err((8, format!("unknown format version {version}")));
    }
    let seq = u64_at(slot, 12);
    let body_len = u32_at(slot, 20) as usize;
    let Some(body) = slot.get(CONTROL_SLOT_HEADER_BYTES..CONTROL_SLOT_HEADER_BYTES + body_len) else {
        return Err((20, format!("body length {body_len} past the slot's end")));
    };
    let stored = u32_at(slot, 24);
    let computed = slot_crc(seq, body);
    if stored != computed {
        return Err((
            24,
            format!("crc mismatch (stored {stored:#010x}, computed {computed:#010x})"),
        ));
    }
    let state = decode_body(body).map_err(|reason| (CONTROL_SLOT_HEADER_BYTES as u64, reason))?;
    Ok((seq, state))
}

/// A control state's JSON body, checked.
fn decode_body(body: &[u8]) -> Result<ControlState, String> {
    let state: ControlState = serde_json::from_slice(body).map_err(|e| format!("bad JSON body: {e}"))?;
    state.history.validate().map_err(|e| e.to_string())?;
    Ok(state)
}

/// A file of the older one-state format (version 1: the header and the body, nothing else; replaced whole).
fn decode_whole_v1(bytes: &[u8], path: &Path) -> Result<ControlState, StoreError> {
    let body_len = u32_at(bytes, 12) as usize;
    let body = &bytes[CONTROL_HEADER_BYTES..];
    if body.len() != body_len {
        return Err(corrupt(
            path,
            12,
            format!("body length {body_len} but {} bytes follow the header", body.len()),
        ));
    }
    let stored = u32_at(bytes, 16);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(corrupt(
            path,
            16,
            format!("crc mismatch (stored {stored:#010x}, computed {computed:#010x})"),
        ));
    }
    decode_body(body).map_err(|reason| corrupt(path, CONTROL_HEADER_BYTES as u64, reason))
}

/// The bytes of a control file of the older one-state format (version 1) for `state`: what an older Cambium
/// wrote, for tests of the upgrade.
#[cfg(test)]
pub(super) fn encode_whole_v1(state: &ControlState) -> Vec<u8> {
    let body = encode_body(state);
    let mut out = Vec::with_capacity(CONTROL_HEADER_BYTES + body.len());
    out.extend_from_slice(CONTROL_MAGIC);
    out.extend_from_slice(&CONTROL_FORMAT_VERSION_WHOLE.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
impl FileControl {
    /// Where the newest state is, as this store knows it.
    pub(super) fn slots(&self) -> Option<Slots> {
        self.slots
    }
}
