//! Read-only memory maps of immutable files. The only `unsafe` of the storage crate lives here.

use std::fs::File;
use std::path::Path;

use crate::error::{io_err, Result};

/// A read-only map of a whole file.
pub(crate) struct MappedFile {
    map: Option<memmap2::Mmap>,
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
        Ok(MappedFile { map: Some(map) })
    }

    /// The file's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}
