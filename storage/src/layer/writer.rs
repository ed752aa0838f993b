//! Writing a layer file (the format is in `file`'s doc): entries in `(key, lsn)` order into a temp file, then
//! the index and footer, fsync, rename into place.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::codec::{put_u32, put_u64};
use crate::error::{io_err, Result};
use crate::fsio::{sync_file, temp_path, Durability};
use crate::key::Key;
use crate::layer::desc::LayerDesc;
use crate::lsn::Lsn;
use crate::value::Value;

use super::file::{encode_summary, LayerFile, FOOTER_BYTES, FOOTER_MAGIC, SUMMARY_BYTES};

/// Writes one layer file. Entries must come in strictly increasing `(key, lsn)` order, inside the ranges.
pub(crate) struct LayerWriter {
    desc: LayerDesc,
    final_path: PathBuf,
    temp_path: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    index: Vec<u8>,
    entry_count: u64,
    last: Option<(Key, Lsn)>,
    scratch: Vec<u8>,
    durability: Durability,
}

impl LayerWriter {
    /// Starts writing the layer `desc` in `dir` (its `size_bytes` is filled in by `finish`).
    pub(crate) fn new(dir: &Path, desc: LayerDesc, durability: Durability) -> Result<LayerWriter> {
        assert!(
            desc.key_range.start < desc.key_range.end,
            "empty key range {:?}",
            desc.key_range
        );
        assert!(
            desc.lsn_range.start < desc.lsn_range.end,
            "empty LSN range {:?}",
            desc.lsn_range
        );
        let final_path = dir.join(desc.file_name());
        let temp_path = temp_path(&final_path);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp_path)
            .map_err(io_err(&temp_path))?;
        let mut out = BufWriter::with_capacity(256 * 1024, file);
        // The summary is rewritten by `finish` once the entry count is known.
        out.write_all(&[0u8; SUMMARY_BYTES]).map_err(io_err(&temp_path))?;
        Ok(LayerWriter {
            desc,
            final_path,
            temp_path,
            out,
            offset: SUMMARY_BYTES as u64,
            index: Vec::new(),
            entry_count: 0,
            last: None,
            scratch: Vec::new(),
            durability,
        })
    }

    /// Appends one version.
    pub(crate) fn put(&mut self, key: Key, lsn: Lsn, value: &Value) -> Result<()> {
        assert!(self.desc.covers_key(key), "key {key} outside {:?}", self.desc.key_range);
        assert!(
            self.desc.lsn_range.start <= lsn && lsn < self.desc.lsn_range.end,
            "lsn {lsn} outside {:?}",
            self.desc.lsn_range
        );
        assert!(
            self.last < Some((key, lsn)),
            "entries out of order: {:?} then {key}@{lsn}",
            self.last
        );
        assert!(
            !self.desc.is_image() || value.will_init(),
            "image layers hold images only"
        );
        self.last = Some((key, lsn));
        self.scratch.clear();
        value.encode(&mut self.scratch);
        let crc = crc32fast::hash(&self.scratch);
        self.scratch.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&self.scratch).map_err(io_err(&self.temp_path))?;
        put_u64(&mut self.index, key.0);
        put_u64(&mut self.index, lsn.0);
        put_u64(&mut self.index, self.offset);
        put_u32(
            &mut self.index,
            u32::try_from(self.scratch.len()).expect("a value is at most a page plus framing"),
        );
        self.offset += self.scratch.len() as u64;
        self.entry_count += 1;
        Ok(())
    }

    /// The key range of the layer being written.
    pub(crate) fn desc_key_range(&self) -> &std::ops::Range<Key> {
        &self.desc.key_range
    }

    /// Writes index and footer, fsyncs and renames into place. The directory is not synced: the caller syncs
    /// it once (the atomic metadata write that names this layer does so) before relying on the layer.
    pub(crate) fn finish(mut self) -> Result<LayerFile> {
        let path = self.temp_path.clone();
        let index_offset = self.offset;
        self.out.write_all(&self.index).map_err(io_err(&path))?;
        let mut footer = Vec::with_capacity(FOOTER_BYTES);
        put_u64(&mut footer, index_offset);
        put_u64(&mut footer, self.entry_count);
        put_u32(&mut footer, crc32fast::hash(&self.index));
        let footer_crc = crc32fast::hash(&footer);
        put_u32(&mut footer, footer_crc);
        footer.extend_from_slice(FOOTER_MAGIC);
        assert_eq!(footer.len(), FOOTER_BYTES);
        self.out.write_all(&footer).map_err(io_err(&path))?;
        let mut file = self.out.into_inner().map_err(|e| io_err(&path)(e.into_error()))?;
        let summary = encode_summary(&self.desc, self.entry_count);
        use std::io::{Seek, SeekFrom};
        file.seek(SeekFrom::Start(0)).map_err(io_err(&path))?;
        file.write_all(&summary).map_err(io_err(&path))?;
        sync_file(&file, &path, self.durability)?;
        let size_bytes = index_offset + self.index.len() as u64 + FOOTER_BYTES as u64;
        drop(file);
        std::fs::rename(&self.temp_path, &self.final_path).map_err(io_err(&self.final_path))?;
        let mut desc = self.desc;
        desc.size_bytes = size_bytes;
        Ok(LayerFile::new(self.final_path, desc))
    }
}
