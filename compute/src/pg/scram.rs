//! SCRAM-SHA-256 verifiers: what the server keeps instead of a password (RFC 5802, RFC 7677), in PostgreSQL's
//! text form `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64), so a stored credential
//! can neither be replayed as a password nor turned back into one.

use std::fmt;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramSecret};
use ring::rand::{SecureRandom, SystemRandom};

/// PostgreSQL's default iteration count.
pub const ITERATIONS_DEFAULT: usize = 4096;
/// Bytes of random salt.
const SALT_BYTES: usize = 16;
/// Fewest iterations accepted from a stored verifier (RFC 7677 asks for at least 4096).
const ITERATIONS_MIN: usize = 4096;
/// Most iterations accepted from a stored verifier: bounds the work one authentication can cost.
const ITERATIONS_MAX: usize = 1 << 20;

/// Why a verifier could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifierError {
    /// The system's random source failed.
    #[error("no randomness for a salt")]
    Random,
    /// The text is not a SCRAM-SHA-256 verifier.
    #[error("not a SCRAM-SHA-256 verifier: {0}")]
    Malformed(&'static str),
}

/// A SCRAM-SHA-256 verifier of one password.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramVerifier {
    salt: Vec<u8>,
    iterations: usize,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl fmt::Debug for ScramVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys stay out of logs.
        f.debug_struct("ScramVerifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramVerifier {
    /// The verifier of `password` with a fresh random salt and `iterations` (PBKDF2 work: milliseconds).
    pub fn from_password(password: &str, iterations: usize) -> Result<ScramVerifier, VerifierError> {
        let mut salt = vec![0u8; SALT_BYTES];
        SystemRandom::new().fill(&mut salt).map_err(|_| VerifierError::Random)?;
        let salted = gen_salted_password(password, &salt, iterations);
        match ScramSecret::verifier_from_salted_password(salt, salted, iterations) {
            ScramSecret::Verifier {
                salt,
                iterations,
                stored_key,
                server_key,
            } => Ok(ScramVerifier {
                salt,
                iterations,
                stored_key,
                server_key,
            }),
            ScramSecret::SaltedPassword { .. } => unreachable!("verifier_from_salted_password makes a verifier"),
        }
    }

    /// Reads PostgreSQL's text form.
    pub fn parse(text: &str) -> Result<ScramVerifier, VerifierError> {
        let rest = text
            .strip_prefix("SCRAM-SHA-256$")
            .ok_or(VerifierError::Malformed("no SCRAM-SHA-256$ prefix"))?;
        let (iterations_salt, keys) = rest.split_once('$').ok_or(VerifierError::Malformed("no keys"))?;
        let (iterations, salt) = iterations_salt
            .split_once(':')
            .ok_or(VerifierError::Malformed("no salt"))?;
        let (stored_key, server_key) = keys.split_once(':').ok_or(VerifierError::Malformed("no server key"))?;
        let iterations: usize = iterations.parse().map_err(|_| VerifierError::Malformed("iterations"))?;
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return Err(VerifierError::Malformed("iterations out of range"));
        }
        let decode = |part: &str, what| STANDARD.decode(part).map_err(|_| VerifierError::Malformed(what));
        let verifier = ScramVerifier {
            salt: decode(salt, "salt")?,
            iterations,
            stored_key: decode(stored_key, "stored key")?,
            server_key: decode(server_key, "server key")?,
        };
        if verifier.stored_key.len() != 32 || verifier.server_key.len() != 32 || verifier.salt.is_empty() {
            return Err(VerifierError::Malformed("key or salt length"));
        }
        Ok(verifier)
    }

    /// The secret pgwire's SCRAM exchange checks a client's proof against.
    pub(crate) fn secret(&self) -> ScramSecret {
        ScramSecret::Verifier {
            salt: self.salt.clone(),
            iterations: self.iterations,
            stored_key: self.stored_key.clone(),
            server_key: self.server_key.clone(),
        }
    }
}

impl fmt::Display for ScramVerifier {
    /// PostgreSQL's text form (what `pg_authid.rolpassword` holds).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }
}

/// Verifiers of a fixed user → password map, made once.
pub(crate) fn verifiers_of(
    passwords: &std::collections::HashMap<String, String>,
) -> std::collections::HashMap<String, Arc<ScramVerifier>> {
    passwords
        .iter()
        .filter_map(
            |(user, password)| match ScramVerifier::from_password(password, ITERATIONS_DEFAULT) {
                Ok(verifier) => Some((user.clone(), Arc::new(verifier))),
                Err(error) => {
                    tracing::error!(%user, %error, "no verifier for a configured user: it cannot log in");
                    None
                }
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_bad_text_is_refused() -> Result<(), VerifierError> {
        let verifier = ScramVerifier::from_password("secret", ITERATIONS_DEFAULT)?;
        let text = verifier.to_string();
        assert!(text.starts_with("SCRAM-SHA-256$4096:"), "{text}");
        assert!(!text.contains("secret"));
        assert_eq!(ScramVerifier::parse(&text)?, verifier);
        for bad in [
            "",
            "md5abc",
            "SCRAM-SHA-256$4096:c2FsdA==",
            "SCRAM-SHA-256$1:c2FsdA==$AAAA:AAAA",
            "SCRAM-SHA-256$4096:c2FsdA==$!!!:AAAA",
            "SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",
        ] {
            assert!(ScramVerifier::parse(bad).is_err(), "{bad}");
        }
        let again = ScramVerifier::from_password("secret", ITERATIONS_DEFAULT)?;
        assert_ne!(again, verifier, "each verifier has its own salt");
        Ok(())
    }
}
