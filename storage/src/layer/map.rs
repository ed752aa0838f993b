//! The layer map: a timeline's on-disk layers, and the search for the layer that holds a key's next version.

use std::sync::Arc;

use crate::key::Key;
use crate::layer::file::LayerFile;
use crate::lsn::Lsn;

/// An immutable set of on-disk layers. Updates build a new map and swap it in, so readers never block.
#[derive(Default, Clone)]
pub(crate) struct LayerMap {
    /// Delta layers, newest `lsn_range.start` first.
    deltas: Vec<Arc<LayerFile>>,
    /// Image layers, newest LSN first.
    images: Vec<Arc<LayerFile>>,
}

/// The next place a read must look, going back in LSN order.
pub(crate) enum NextLayer<'a> {
    /// Read the deltas of this layer below `end`; continue below its start.
    Delta(&'a Arc<LayerFile>),
    /// Read the deltas of `delta` (if any) above the image's LSN, then the image: the read ends there.
    Image {
        image: &'a Arc<LayerFile>,
        delta: Option<&'a Arc<LayerFile>>,
    },
    /// No layer holds anything for the key below `end`.
    None,
}

impl LayerMap {
    /// A map of these layers.
    pub(crate) fn new(layers: impl IntoIterator<Item = Arc<LayerFile>>) -> LayerMap {
        let (mut images, mut deltas): (Vec<_>, Vec<_>) = layers.into_iter().partition(|l| l.desc().is_image());
        deltas.sort_by_key(|l| std::cmp::Reverse((l.desc().lsn_range.start, l.desc().key_range.start)));
        images.sort_by_key(|l| std::cmp::Reverse((l.desc().lsn_range.start, l.desc().key_range.start)));
        LayerMap { deltas, images }
    }

    /// Every layer.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<LayerFile>> {
        self.deltas.iter().chain(self.images.iter())
    }

    /// Number of layers.
    pub(crate) fn len(&self) -> usize {
        self.deltas.len() + self.images.len()
    }

    /// Where the versions of `key` below `end` continue.
    pub(crate) fn search(&self, key: Key, end: Lsn) -> NextLayer<'_> {
        let delta = self
            .deltas
            .iter()
            .find(|l| l.desc().covers_key(key) && l.desc().lsn_range.start < end);
        let image = self
            .images
            .iter()
            .find(|l| l.desc().covers_key(key) && l.desc().lsn_range.start < end);
        match (image, delta) {
            (Some(image), delta) if delta.is_none_or(|d| image.desc().lsn_range.start >= d.desc().lsn_range.start) => {
                // The delta (if any) starts at or below the image: only its part above the image matters.
                let delta = delta.filter(|d| d.desc().lsn_range.end > image.desc().lsn_range.end);
                NextLayer::Image { image, delta }
            }
            (_, Some(delta)) => NextLayer::Delta(delta),
            (_, None) => NextLayer::None,
        }
    }
}
