//! Layers: the in-memory layer, layer files (delta and image) and the layer map.

pub mod desc;
pub mod fetch;
pub mod file;
pub(crate) mod inmemory;
pub(crate) mod map;
pub(crate) mod writer;
