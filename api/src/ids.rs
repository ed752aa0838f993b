//! Resource ids: a type prefix and a ULID (`proj_01JD…`), so ids sort by creation time.
//!
//! The ULID is 48 bits of Unix milliseconds then 80 random bits, in Crockford base32 (26 characters).
//! Ids made by one process are strictly increasing: within one millisecond (or if the clock steps
//! back) the previous id plus one is used, so list order by id is creation order.

use std::sync::Mutex;

use ring::rand::{SecureRandom, SystemRandom};

/// Crockford base32, the ULID alphabet.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Characters in a ULID.
pub(crate) const ULID_LEN: usize = 26;

/// The last ULID handed out, as a 128-bit number.
static LAST: Mutex<u128> = Mutex::new(0);

/// A new ULID, greater than every one this process made before.
pub(crate) fn new_ulid(now_ms: u64) -> String {
    // The top 6 bytes stay zero for the timestamp; the low 10 are random.
    let mut bytes = [0u8; 16];
    // SystemRandom fails only if the OS has no randomness source: nothing can run then.
    SystemRandom::new()
        .fill(&mut bytes[6..])
        .unwrap_or_else(|_| panic!("the OS random source failed"));
    let mut value = (u128::from(now_ms & 0xFFFF_FFFF_FFFF) << 80) | u128::from_be_bytes(bytes);
    let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if value <= *last {
        value = *last + 1;
    }
    *last = value;
    drop(last);
    encode(value)
}

/// The smallest ULID of millisecond `ms`: every ULID made at an earlier millisecond sorts below it, and one made
/// at `ms` or later (by any process) not.
pub(crate) fn ulid_floor(ms: u64) -> String {
    encode(u128::from(ms & 0xFFFF_FFFF_FFFF) << 80)
}

fn encode(value: u128) -> String {
    (0..ULID_LEN)
        .rev()
        .map(|i| char::from(ALPHABET[((value >> (i * 5)) & 0x1F) as usize]))
        .collect()
}

/// Whether `s` is `prefix` followed by a well-formed ULID.
pub(crate) fn is_id(s: &str, prefix: &str) -> bool {
    match s.strip_prefix(prefix) {
        Some(ulid) => {
            ulid.len() == ULID_LEN
                && ulid.bytes().all(|b| ALPHABET.contains(&b))
                // 26 × 5 = 130 bits: the first character carries only 3.
                && ulid.as_bytes()[0] <= b'7'
        }
        None => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    #[test]
    fn ulids_increase_and_parse() {
        let a = new_ulid(1_700_000_000_000);
        let b = new_ulid(1_700_000_000_000);
        let c = new_ulid(1_600_000_000_000);
        assert!(a < b, "{a} {b}");
        assert!(b < c, "{b} {c}");
        assert!(is_id(&format!("proj_{a}"), "proj_"));
        assert!(!is_id(&a, "proj_"));
        assert!(!is_id("proj_01", "proj_"));
        assert!(encode(0).chars().all(|c| c == '0'));
    }
}
