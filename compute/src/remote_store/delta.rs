//! Byte-range deltas of a page: what a commit sends instead of the whole page when little of it changed.

use bytes::Bytes;
use cambium_types::value::PATCHES_PER_DELTA_MAX;
use cambium_types::Patch;

/// Bytes of unchanged data worth carrying inside a patch rather than starting a new one (a patch header is 4).
const PATCH_GAP_MERGE_BYTES: usize = 8;

/// The byte ranges of `new` that differ from `old` (same length), as patches, if they encode smaller than the
/// whole page; `None` when the page should go whole (also when nothing changed: a delta needs a patch).
pub fn page_delta(old: &[u8], new: &[u8]) -> Option<Vec<Patch>> {
    if old.len() != new.len() || new.len() > usize::from(u16::MAX) {
        return None;
    }
    let mut patches: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < new.len() {
        // Unchanged bytes are most of a page: passed a word at a time.
        i += equal_prefix_bytes(&old[i..], &new[i..]);
        if i == new.len() {
            break;
        }
        let start = i;
        while i < new.len() && old[i] != new[i] {
            i += 1;
        }
        match patches.last_mut() {
            Some((_, end)) if start - *end <= PATCH_GAP_MERGE_BYTES => *end = i,
            _ => patches.push((start, i)),
        }
    }
    let encoded_bytes: usize = 2 + patches.iter().map(|(s, e)| 4 + (e - s)).sum::<usize>();
    if patches.is_empty() || patches.len() > PATCHES_PER_DELTA_MAX || encoded_bytes >= 4 + new.len() {
        return None;
    }
    Some(
        patches
            .into_iter()
            .map(|(start, end)| Patch {
                offset: u16::try_from(start).expect("offsets fit u16: the page is at most 64 KiB"),
                data: Bytes::copy_from_slice(&new[start..end]),
            })
            .collect(),
    )
}

/// How many leading bytes of `a` and `b` (the same length) are equal, compared eight at a time.
fn equal_prefix_bytes(a: &[u8], b: &[u8]) -> usize {
    debug_assert_eq!(a.len(), b.len());
    let word = |chunk: &[u8]| u64::from_ne_bytes(chunk.try_into().expect("chunks_exact(8) gives 8 bytes"));
    let mut at = 0;
    for (word_a, word_b) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        if word(word_a) != word(word_b) {
            break;
        }
        at += 8;
    }
    at + a[at..].iter().zip(&b[at..]).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The delta found a byte at a time (what `page_delta` did before it compared words).
    fn reference_delta(old: &[u8], new: &[u8]) -> Option<Vec<(usize, Vec<u8>)>> {
        if old.len() != new.len() || new.len() > usize::from(u16::MAX) {
            return None;
        }
        let mut patches: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < new.len() {
            if old[i] == new[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < new.len() && old[i] != new[i] {
                i += 1;
            }
            match patches.last_mut() {
                Some((_, end)) if start - *end <= PATCH_GAP_MERGE_BYTES => *end = i,
                _ => patches.push((start, i)),
            }
        }
        let encoded_bytes: usize = 2 + patches.iter().map(|(s, e)| 4 + (e - s)).sum::<usize>();
        if patches.is_empty() || patches.len() > PATCHES_PER_DELTA_MAX || encoded_bytes >= 4 + new.len() {
            return None;
        }
        Some(patches.into_iter().map(|(s, e)| (s, new[s..e].to_vec())).collect())
    }

    proptest! {
        /// Comparing words finds exactly the patches a byte-at-a-time walk finds: edits anywhere (the ends,
        /// across word boundaries, runs), pages of any length.
        #[test]
        fn the_word_walk_finds_what_the_byte_walk_finds(
            len in 0usize..600,
            seed in any::<u8>(),
            edits in proptest::collection::vec((any::<u16>(), 1usize..20, any::<u8>()), 0..12),
        ) {
            let old: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
            let mut new = old.clone();
            for (at, run, value) in edits {
                if len == 0 {
                    break;
                }
                let start = usize::from(at) % len;
                for byte in new.iter_mut().skip(start).take(run) {
                    *byte = byte.wrapping_add(value.max(1));
                }
            }
            let got = page_delta(&old, &new).map(|patches| {
                patches.into_iter().map(|p| (usize::from(p.offset), p.data.to_vec())).collect::<Vec<_>>()
            });
            prop_assert_eq!(got, reference_delta(&old, &new));
        }
    }
    use cambium_types::{Key, Value, PAGE_SIZE_BYTES};

    fn apply(old: &[u8], patches: &[Patch]) -> Vec<u8> {
        let mut page = old.to_vec();
        cambium_types::value::apply_delta(&mut page, patches);
        page
    }

    #[test]
    fn a_small_change_travels_as_a_small_delta() {
        let old = vec![7u8; PAGE_SIZE_BYTES];
        let mut new = old.clone();
        new[24..28].copy_from_slice(&[1, 2, 3, 4]); // the file change counter, say
        new[8000] = 9;
        new[8005] = 9; // merged with the previous run: the gap is small
        let patches = page_delta(&old, &new).expect("a delta");
        assert_eq!(patches.len(), 2);
        assert_eq!(apply(&old, &patches), new);
        let encoded: usize = 2 + patches.iter().map(|p| 4 + p.data.len()).sum::<usize>();
        assert!(encoded < 32, "{encoded} bytes for 6 changed bytes");
        assert!(page_delta(&old, &old).is_none(), "nothing changed: no delta");
        let different: Vec<u8> = (0..PAGE_SIZE_BYTES).map(|i| (i % 251) as u8).collect();
        assert!(page_delta(&old, &different).is_none(), "a rewritten page goes whole");
    }

    #[test]
    fn deltas_always_rebuild_the_new_page() {
        // A deterministic spread of edits: any delta returned must rebuild `new` exactly.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200 {
            let old: Vec<u8> = (0..PAGE_SIZE_BYTES).map(|_| next() as u8).collect();
            let mut new = old.clone();
            for _ in 0..(next() % 64) {
                let at = (next() % PAGE_SIZE_BYTES as u64) as usize;
                new[at] = next() as u8;
            }
            if let Some(patches) = page_delta(&old, &new) {
                assert_eq!(apply(&old, &patches), new);
                assert!(Value::Delta(patches).validate(Key::page(0)).is_ok());
            }
        }
    }
}
