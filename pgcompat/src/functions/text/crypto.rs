//! pgcrypto's hashing and randomness, which apps call once `CREATE EXTENSION pgcrypto` succeeded:
//! `digest(data, type)` and `hmac(data, key, type)` over MD5, SHA-1 and SHA-2 (PostgreSQL's pgcrypto built
//! with OpenSSL offers these names; case does not matter), and `gen_random_bytes(n)` for 1 to 1024 bytes from
//! the system's generator. `gen_random_uuid()` is in `session`.

use std::sync::Arc;

use hmac::{KeyInit, Mac};
use rusqlite::types::Value;
use rusqlite::Connection;

use super::super::{define, Purity};
use super::bytes;
use crate::error::{PgError, EXTERNAL_ROUTINE_EXCEPTION, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;

/// The most bytes `gen_random_bytes` gives at once (pgcrypto's bound).
const RANDOM_BYTES_MAX: i64 = 1024;

/// Registers the functions of this file.
pub(super) fn install(conn: &Connection, state: &Arc<SessionState>) -> rusqlite::Result<()> {
    define(conn, state, "digest", 2, Purity::Pure, |a, _| {
        let (Some(data), Some(algorithm)) = (bytes(a, 0), a.text(1)) else {
            return Ok(Value::Null);
        };
        Ok(Value::Blob(digest(&data, &algorithm)?))
    })?;
    define(conn, state, "hmac", 3, Purity::Pure, |a, _| {
        let (Some(data), Some(key), Some(algorithm)) = (bytes(a, 0), bytes(a, 1), a.text(2)) else {
            return Ok(Value::Null);
        };
        Ok(Value::Blob(hmac(&data, &key, &algorithm)?))
    })?;
    define(conn, state, "gen_random_bytes", 1, Purity::Volatile, |a, _| {
        let Some(count) = a.int(0)? else {
            return Ok(Value::Null);
        };
        Ok(Value::Blob(random_bytes(count)?))
    })?;
    Ok(())
}

fn unknown_algorithm(name: &str) -> PgError {
    PgError::new(
        INVALID_PARAMETER_VALUE,
        format!("Cannot use \"{name}\": No such hash algorithm"),
    )
}

/// The digest of `data` by the algorithm named `name`.
fn digest(data: &[u8], name: &str) -> Result<Vec<u8>, PgError> {
    use sha2::Digest;
    Ok(match name.to_ascii_lowercase().as_str() {
        "md5" => md5::Md5::digest(data).to_vec(),
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "sha224" => sha2::Sha224::digest(data).to_vec(),
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        _ => return Err(unknown_algorithm(name)),
    })
}

/// The HMAC of `data` with `key` over the algorithm named `name`.
fn hmac(data: &[u8], key: &[u8], name: &str) -> Result<Vec<u8>, PgError> {
    fn mac<M: Mac + KeyInit>(data: &[u8], key: &[u8]) -> Vec<u8> {
        let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }
    Ok(match name.to_ascii_lowercase().as_str() {
        "md5" => mac::<hmac::Hmac<md5::Md5>>(data, key),
        "sha1" => mac::<hmac::Hmac<sha1::Sha1>>(data, key),
        "sha224" => mac::<hmac::Hmac<sha2::Sha224>>(data, key),
        "sha256" => mac::<hmac::Hmac<sha2::Sha256>>(data, key),
        "sha384" => mac::<hmac::Hmac<sha2::Sha384>>(data, key),
        "sha512" => mac::<hmac::Hmac<sha2::Sha512>>(data, key),
        _ => return Err(unknown_algorithm(name)),
    })
}

/// `count` random bytes; 39000 outside 1 to [`RANDOM_BYTES_MAX`].
fn random_bytes(count: i64) -> Result<Vec<u8>, PgError> {
    use ring::rand::SecureRandom;
    if !(1..=RANDOM_BYTES_MAX).contains(&count) {
        return Err(PgError::new(EXTERNAL_ROUTINE_EXCEPTION, "Length not in range"));
    }
    let mut out = vec![0u8; usize::try_from(count).expect("at most 1024")];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .map_err(|_| PgError::new(crate::error::INTERNAL_ERROR, "could not generate random values"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn digests_and_macs_are_the_published_values() {
        // RFC 1321, FIPS 180 and RFC 2202/4231 vectors.
        assert_eq!(
            hex(&digest(b"abc", "md5").expect("md5")),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(
            hex(&digest(b"abc", "SHA1").expect("sha1")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(&digest(b"abc", "sha256").expect("sha256")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&hmac(b"what do ya want for nothing?", b"Jefe", "sha256").expect("hmac")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac(b"what do ya want for nothing?", b"Jefe", "md5").expect("hmac md5")),
            "750c783e6ab0b503eaa86e310a5db738"
        );
        assert!(digest(b"abc", "whirlpool").is_err());
        assert!(hmac(b"abc", b"k", "").is_err());
    }

    #[test]
    fn random_bytes_are_bounded() {
        assert_eq!(random_bytes(1).expect("one").len(), 1);
        assert_eq!(random_bytes(1024).expect("max").len(), 1024);
        assert!(random_bytes(0).is_err());
        assert!(random_bytes(1025).is_err());
        assert_ne!(random_bytes(32).expect("a"), random_bytes(32).expect("b"));
    }
}
