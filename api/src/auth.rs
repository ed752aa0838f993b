//! API keys: `cmb_` and 43 base64url characters (256 random bits), shown once at creation and stored
//! only as a SHA-256 hash. A plain hash is enough: the secret has full entropy, so there is nothing to
//! guess or precompute, and a lookup by hash needs no per-key salt. A key may be scoped (one project,
//! read-only, an expiry: [`KeyScope`]); an expired key is refused like a revoked one.

use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};

use crate::store::{timestamp_text, AccountId, KeyScope, Store, StoreError};

/// The prefix of every key secret.
pub const KEY_PREFIX: &str = "cmb_";
/// Random bytes in a key secret.
const KEY_RANDOM_BYTES: usize = 32;
/// The longest secret worth hashing; longer ones are refused unhashed.
const KEY_LEN_MAX: usize = 128;

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A newly created key: its id and the secret, which is shown once and never stored.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// `key_<ULID>`, for listing and revoking.
    pub id: String,
    /// `cmb_…`, the bearer token.
    pub secret: String,
}

/// The SHA-256 of `secret`, as stored in `api_keys.hash`.
pub fn hash_secret(secret: &str) -> Vec<u8> {
    digest::digest(&digest::SHA256, secret.as_bytes()).as_ref().to_vec()
}

/// Who a request's key is: its account, its id (what the audit log names) and its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The account it acts for.
    pub account: AccountId,
    /// `key_…`.
    pub key_id: String,
    /// What it may do.
    pub scope: KeyScope,
}

/// Creates a key for `account` limited to `scope`.
pub fn create_key(store: &Store, account: &AccountId, scope: &KeyScope) -> Result<NewKey, StoreError> {
    let mut random = [0u8; KEY_RANDOM_BYTES];
    // SystemRandom fails only if the OS has no randomness source: nothing can run then.
    SystemRandom::new()
        .fill(&mut random)
        .unwrap_or_else(|_| panic!("the OS random source failed"));
    let secret = format!("{KEY_PREFIX}{}", base64url(&random));
    let id = store.insert_key(account, &hash_secret(&secret), scope)?;
    Ok(NewKey { id, secret })
}

/// Who `secret` is, or `None` if the key is malformed, unknown, revoked or expired.
pub fn authenticate(store: &Store, secret: &str) -> Result<Option<Caller>, StoreError> {
    if !secret.starts_with(KEY_PREFIX) || secret.len() > KEY_LEN_MAX {
        return Ok(None);
    }
    let Some(key) = store.key_by_hash(&hash_secret(secret))? else {
        return Ok(None);
    };
    let now = timestamp_text(jiff::Timestamp::now());
    let expired = key.scope.expires_at.as_deref().is_some_and(|at| at <= now.as_str());
    if key.revoked_at.is_some() || expired {
        return Ok(None);
    }
    Ok(Some(Caller {
        account: key.account_id,
        key_id: key.id,
        scope: key.scope,
    }))
}

/// Unpadded base64url.
fn base64url(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(BASE64URL[((n >> (18 - 6 * i)) & 0x3F) as usize]));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
mod tests {
    use super::*;

    #[test]
    fn keys_authenticate_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let account = store.create_account().unwrap();
        let key = create_key(&store, &account, &KeyScope::default()).unwrap();
        assert!(key.secret.starts_with("cmb_"));
        assert_eq!(key.secret.len(), 4 + 43);
        let caller = authenticate(&store, &key.secret).unwrap().unwrap();
        assert_eq!((caller.account, caller.key_id), (account.clone(), key.id.clone()));
        assert_eq!(authenticate(&store, "cmb_nope").unwrap(), None);
        assert_eq!(authenticate(&store, "nope").unwrap(), None);
        assert!(store.revoke_key(&key.id).unwrap());
        assert!(!store.revoke_key(&key.id).unwrap());
        assert_eq!(authenticate(&store, &key.secret).unwrap(), None);
    }

    #[test]
    fn a_scoped_key_carries_its_scope_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let account = store.create_account().unwrap();
        let in_an_hour = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_hours(1))
            .unwrap();
        let scope = KeyScope {
            project_id: Some("proj_1".to_owned()),
            read_only: true,
            expires_at: Some(timestamp_text(in_an_hour)),
        };
        let key = create_key(&store, &account, &scope).unwrap();
        assert_eq!(authenticate(&store, &key.secret).unwrap().unwrap().scope, scope);
        let expired = KeyScope {
            expires_at: Some("2000-01-01T00:00:00.000Z".to_owned()),
            ..KeyScope::default()
        };
        let key = create_key(&store, &account, &expired).unwrap();
        assert_eq!(authenticate(&store, &key.secret).unwrap(), None);
        assert_eq!(store.keys().unwrap()[1].scope, expired);
    }

    #[test]
    fn base64url_matches_known_vectors() {
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(&[0xFF, 0xFE]), "__4");
    }
}
