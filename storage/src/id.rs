//! `TimelineId`: the internal 128-bit name of a timeline.

use std::fmt;
use std::str::FromStr;

/// A timeline's id: 128 bits, printed as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimelineId(pub u128);

/// A tenant's id (a database of the API): 128 bits, printed as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TenantId(pub u128);

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
                if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(ParseTimelineIdError {
                        input: s.chars().take(64).collect(),
                    });
                }
                u128::from_str_radix(s, 16)
                    .map($name)
                    .map_err(|_| ParseTimelineIdError { input: s.to_string() })
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
}
