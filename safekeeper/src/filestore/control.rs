//! The control file ([`FileControl`]): a timeline's [`ControlState`], replaced atomically (temp, fsync, rename,
//! fsync of the directory) and checked (magic, version, length, crc) on load. The format is in the
//! [module above](super).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cambium_types::codec::u32_at;
use cambium_types::fsio::{self, Durability};
use safekeeper_core::protocol::{ControlState, ControlStore, StoreError};

use super::{
    corrupt, from_fsio, io_error, DeferredDir, CONTROL_FILE_BYTES_MAX, CONTROL_FILE_NAME, CONTROL_FORMAT_VERSION,
    CONTROL_HEADER_BYTES, CONTROL_MAGIC,
};

/// The control file of a timeline directory, replaced atomically by [`ControlStore::persist`].
#[derive(Debug)]
pub struct FileControl {
    dir: PathBuf,
    path: PathBuf,
    durability: Durability,
    /// A timeline created without files (`create_timeline_deferred`): its directory, made by the next persist
    /// (unless its WAL store did it first) and made durable right after the control file is written.
    pub(super) deferred: Option<Arc<DeferredDir>>,
    poisoned: bool,
}

impl FileControl {
    /// The control file of `dir` (not read: see [`FileControl::load`]).
    pub fn new(dir: &Path, durability: Durability) -> FileControl {
        FileControl {
            dir: dir.to_path_buf(),
            path: dir.join(CONTROL_FILE_NAME),
            durability,
            deferred: None,
            poisoned: false,
        }
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

    /// Reads and checks the control file of `dir`: `None` if there is none; `Corrupt` if its magic, version,
    /// length, crc or JSON body is wrong.
    pub fn load(dir: &Path) -> Result<Option<ControlState>, StoreError> {
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
}

impl FileControl {
    /// Writes the first control file of a timeline directory being created: whole wherever it is seen, but
    /// durable only once the caller fsyncs the directory (which it does once for this file and the first
    /// segment: see `create_timeline`).
    pub(super) fn persist_first(&mut self, state: &ControlState) -> Result<(), StoreError> {
        assert!(!self.poisoned, "a new control file's store is not poisoned");
        let bytes = encode_control(state);
        fsio::write_then_rename(&self.path, &bytes, self.durability).map_err(|error| {
            self.poisoned = true;
            from_fsio(error)
        })
    }
}

impl ControlStore for FileControl {
    fn persist(&mut self, state: &ControlState) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        let bytes = encode_control(state);
        let deferred = self.deferred.clone();
        // `write_atomic` fsyncs the control file's own directory: those above it follow.
        let written = deferred
            .as_ref()
            .map_or(Ok(()), |dir| dir.make())
            .and_then(|()| fsio::write_atomic(&self.path, &bytes, self.durability).map_err(from_fsio))
            .and_then(|()| deferred.as_ref().map_or(Ok(true), |dir| dir.make_durable(true)));
        written
            .map(|durable| {
                assert!(
                    durable,
                    "a deferred directory is made before its control file is written"
                );
                self.deferred = None;
            })
            .map_err(|error| {
                tracing::error!(dir = %self.dir.display(), %error, "control file write failed; poisoned");
                self.poisoned = true;
                error
            })
    }
}

/// The control file's bytes for `state`.
fn encode_control(state: &ControlState) -> Vec<u8> {
    if let Err(error) = state.history.validate() {
        panic!("persisting a control state with a {error}");
    }
    let body = serde_json::to_vec(state).expect("ControlState is plain data that serializes to JSON");
    let body_len = u32::try_from(body.len()).expect("a control state is far smaller than 4 GiB");
    let mut out = Vec::with_capacity(CONTROL_HEADER_BYTES + body.len());
    out.extend_from_slice(CONTROL_MAGIC);
    out.extend_from_slice(&CONTROL_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Parses and checks control file bytes (untrusted: every failure is `Corrupt`).
fn decode_control(bytes: &[u8], path: &Path) -> Result<ControlState, StoreError> {
    if bytes.len() as u64 > CONTROL_FILE_BYTES_MAX {
        return Err(corrupt(path, 0, format!("longer than {CONTROL_FILE_BYTES_MAX} bytes")));
    }
    if bytes.len() < CONTROL_HEADER_BYTES {
        return Err(corrupt(
            path,
            0,
            format!("{} bytes, shorter than the header", bytes.len()),
        ));
    }
    if &bytes[..8] != CONTROL_MAGIC {
        return Err(corrupt(path, 0, "bad magic"));
    }
    let version = u32_at(bytes, 8);
    if version != CONTROL_FORMAT_VERSION {
        return Err(corrupt(path, 8, format!("unknown format version {version}")));
    }
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
    let state: ControlState = serde_json::from_slice(body)
        .map_err(|e| corrupt(path, CONTROL_HEADER_BYTES as u64, format!("bad JSON body: {e}")))?;
    state
        .history
        .validate()
        .map_err(|e| corrupt(path, CONTROL_HEADER_BYTES as u64, e.to_string()))?;
    Ok(state)
}
