//! Read-only memory maps of immutable files. The only `unsafe` of the storage crate lives here.

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{io_err, Result};

/// A read-only map of a whole file.
pub(crate) struct MappedFile {
    map: Option<Arc<memmap2::Mmap>>,
}

/// A map shared by the [`Bytes`] sliced from it ([`MappedFile::slice`]), which keep it mapped.
struct SharedMap(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl MappedFile {
    /// Maps the file at `path`. An empty file maps to an empty slice.
    pub(crate) fn open(path: &Path) -> Result<MappedFile> {
        let file = File::open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        if len == 0 {
            return Ok(MappedFile { map: None });
        }
        // SAFETY: the engine maps only its own layer and index files, which are written once to a temp name,
        // fsynced and renamed into place, and never modified or truncated afterwards (they are only unlinked,
        // which keeps an existing mapping valid). So the mapped bytes do not change under us. Another process
        // truncating the file would be outside this contract (SIGBUS), as it would be for any mmap reader.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err(path))?;
        Ok(MappedFile {
            map: Some(Arc::new(map)),
        })
    }

    /// The bytes of `range` as [`Bytes`] that share the map (no copy; they keep the file mapped while they
    /// live, which an unlinked file allows). Panics if `range` is outside the file, as slicing would.
    pub(crate) fn slice(&self, range: Range<usize>) -> Bytes {
        match &self.map {
            Some(map) => Bytes::from_owner(SharedMap(Arc::clone(map))).slice(range),
            None => Bytes::new().slice(range),
        }
    }

    /// The file's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |map| &map[..])
    }
}
