//! `LayerDesc`: what a layer file covers, and its file name.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::key::Key;
use crate::lsn::Lsn;

/// The kind of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// A delta layer written by a flush: every key the frozen in-memory layer held, one LSN range.
    L0,
    /// A delta layer written by compaction: one key partition over the LSN range of the L0 layers it merged.
    L1,
    /// An image layer: the value of every existing key of its range at one LSN.
    Image,
}

/// The ranges a layer covers. Both ranges are half-open: a delta layer holds versions with
/// `lsn_range.start <= lsn < lsn_range.end`; an image layer at LSN `x` has `lsn_range = x..x+1`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LayerDesc {
    /// Kind.
    pub kind: LayerKind,
    /// Keys covered.
    pub key_range: Range<Key>,
    /// LSNs covered.
    pub lsn_range: Range<Lsn>,
    /// File size, for accounting and remote downloads.
    pub size_bytes: u64,
}

impl LayerDesc {
    /// The file name: kind, key range and LSN range in fixed-width hex, so names sort and never collide.
    pub fn file_name(&self) -> String {
        let kind = match self.kind {
            LayerKind::L0 => "l0",
            LayerKind::L1 => "l1",
            LayerKind::Image => "img",
        };
        format!(
            "{kind}_{:016X}-{:016X}_{:016X}-{:016X}",
            self.key_range.start.0, self.key_range.end.0, self.lsn_range.start.0, self.lsn_range.end.0
        )
    }

    /// Whether this is an image layer.
    pub fn is_image(&self) -> bool {
        self.kind == LayerKind::Image
    }

    /// The image LSN (image layers), or the newest LSN a version may have (delta layers).
    pub fn max_lsn(&self) -> Lsn {
        Lsn(self.lsn_range.end.0 - 1)
    }

    /// Whether `key` is in the key range.
    pub fn covers_key(&self, key: Key) -> bool {
        self.key_range.start <= key && key < self.key_range.end
    }
}
