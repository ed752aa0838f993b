//! `Key`: which page (or metadata value) a version belongs to.

use std::fmt;

/// Size of a database page in bytes. Every page image of the main-file key space has exactly this length.
pub const PAGE_SIZE_BYTES: usize = 8192;

/// The key space of the SQLite main file: block `n` holds page number `n + 1`.
pub const SPACE_MAIN: u32 = 0;
/// The key space of engine metadata (the database size in pages, …).
pub const SPACE_META: u32 = 1;

/// A storage key: `(space << 32) | block`.
///
/// Keys order first by space, then by block, so a key range of one space is contiguous.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Key(pub u64);

/// The key holding the database size in pages (a 4-byte little-endian image).
pub const DB_SIZE_KEY: Key = Key::new(SPACE_META, 0);

impl Key {
    /// The smallest key.
    pub const MIN: Key = Key(0);
    /// The largest key.
    pub const MAX: Key = Key(u64::MAX);

    /// The key of `block` in `space`.
    pub const fn new(space: u32, block: u32) -> Key {
        Key(((space as u64) << 32) | block as u64)
    }

    /// The key of main-file block `block` (page number `block + 1`).
    pub const fn page(block: u32) -> Key {
        Key::new(SPACE_MAIN, block)
    }

    /// The key space.
    pub const fn space(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The block within the space.
    pub const fn block(self) -> u32 {
        (self.0 & 0xffff_ffff) as u32
    }

    /// Whether this key is a page of the main file (fixed-size page images and byte-range deltas).
    pub const fn is_page(self) -> bool {
        self.space() == SPACE_MAIN
    }

    /// The next key, saturating at `Key::MAX`.
    pub fn next(self) -> Key {
        Key(self.0.saturating_add(1))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.space(), self.block())
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

// Serialized as plain integers (layer descriptors in the engine's metadata).
impl serde::Serialize for Key {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <u64 as serde::Deserialize>::deserialize(deserializer).map(Key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_round_trip() {
        let key = Key::new(7, 0xdead_beef);
        assert_eq!(key.space(), 7);
        assert_eq!(key.block(), 0xdead_beef);
        assert!(Key::page(3) < Key::page(4));
        assert!(Key::page(u32::MAX) < DB_SIZE_KEY);
        assert!(Key::page(9).is_page());
        assert!(!DB_SIZE_KEY.is_page());
    }
}
