//! `TimelineId`: the internal 128-bit name of a timeline.

use std::fmt;
use std::str::FromStr;

/// A timeline's id: 128 bits, printed as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimelineId(pub u128);

/// A tenant's id (a database of the API): 128 bits, printed as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TenantId(pub u128);

/// The one parser of ids: exactly 32 lowercase hex digits (the form ids are printed in), or `None`. Every
/// crate parses ids from files and the wire with it, so they agree on what an id is.
pub fn parse_lower_hex(text: &str) -> Option<u128> {
    let well_formed = text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return None;
    }
    u128::from_str_radix(text, 16).ok()
}

/// A timeline's full name: its tenant and its id (timeline ids are unique only within a tenant's storage
/// on the safekeepers and the pageserver).
pub type TimelineKey = (TenantId, TimelineId);

macro_rules! hex_id_impls {
    ($name:ident) => {
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:032x}", self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = ParseTimelineIdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_lower_hex(s).map($name).ok_or_else(|| ParseTimelineIdError {
                    input: s.chars().take(64).collect(),
                })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

hex_id_impls!(TimelineId);
hex_id_impls!(TenantId);

impl TenantId {
    /// A fresh random id.
    pub fn generate() -> TenantId {
        TenantId(TimelineId::generate().0)
    }
}

impl TimelineId {
    /// A fresh id from the system's randomness mixed with the clock; unique with overwhelming probability.
    pub fn generate() -> TimelineId {
        use std::collections::hash_map::RandomState;
        use std::hash::{BuildHasher, Hasher};
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut high = RandomState::new().build_hasher();
        high.write_u128(nanos);
        let mut low = RandomState::new().build_hasher();
        low.write_u64(high.finish());
        TimelineId(((high.finish() as u128) << 64) | low.finish() as u128)
    }
}

/// Why a string is not a 32-hex-digit id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid id {input:?}: expected 32 hex digits")]
pub struct ParseTimelineIdError {
    input: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_uniqueness() {
        let a = TimelineId::generate();
        let b = TimelineId::generate();
        assert_ne!(a, b);
        assert_eq!(a.to_string().len(), 32);
        assert_eq!(a.to_string().parse::<TimelineId>(), Ok(a));
        assert!("xyz".parse::<TimelineId>().is_err());
        assert!("+0000000000000000000000000000001".parse::<TimelineId>().is_err());
    }

    /// One parser, one form: the printed one. Upper case, short, long and signed spellings are refused by
    /// every crate alike (issue 14: three parsers used to disagree on case).
    #[test]
    fn only_32_lowercase_hex_digits_parse() {
        let id = TenantId(0xABCDEF);
        assert_eq!(id.to_string().parse::<TenantId>(), Ok(id));
        assert_eq!(parse_lower_hex("00000000000000000000000000abcdef"), Some(0xABCDEF));
        for bad in [
            "00000000000000000000000000ABCDEF",
            "0000000000000000000000000000abc",
            "000000000000000000000000000000abc",
            "-0000000000000000000000000000abc",
            "",
        ] {
            assert_eq!(parse_lower_hex(bad), None, "{bad}");
            assert!(bad.parse::<TenantId>().is_err(), "{bad}");
        }
    }
}
