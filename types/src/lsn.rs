//! `Lsn`: a position in a timeline's WAL byte stream.

use std::fmt;
use std::str::FromStr;

/// A log sequence number: the byte position in a timeline's WAL stream.
///
/// Printed as two uppercase hex groups, the high and low 32 bits (`0/16B3748`); parsed from either case.
/// Serialized with serde as that string.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    /// The zero position: before any WAL.
    pub const ZERO: Lsn = Lsn(0);
    /// The largest representable position.
    pub const MAX: Lsn = Lsn(u64::MAX);

    /// The raw byte position.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// `self + bytes`, or `None` on overflow.
    pub fn checked_add(self, bytes: u64) -> Option<Lsn> {
        self.0.checked_add(bytes).map(Lsn)
    }

    /// `self - bytes`, stopping at zero.
    pub fn saturating_sub(self, bytes: u64) -> Lsn {
        Lsn(self.0.saturating_sub(bytes))
    }

    /// The next position (`self + 1`), saturating at `Lsn::MAX`.
    pub fn next(self) -> Lsn {
        Lsn(self.0.saturating_add(1))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

impl fmt::Debug for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a string is not an LSN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid LSN {input:?}: expected two hex groups of at most 8 digits separated by '/', like 0/16B3748")]
pub struct ParseLsnError {
    input: String,
}

fn parse_hex_group(group: &str) -> Option<u64> {
    if group.is_empty() || group.len() > 8 || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(group, 16).ok()
}

impl FromStr for Lsn {
    type Err = ParseLsnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseLsnError {
            input: s.chars().take(64).collect(),
        };
        let (high, low) = s.split_once('/').ok_or_else(err)?;
        let high = parse_hex_group(high).ok_or_else(err)?;
        let low = parse_hex_group(low).ok_or_else(err)?;
        Ok(Lsn((high << 32) | low))
    }
}

impl serde::Serialize for Lsn {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Lsn {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn display_is_two_uppercase_hex_groups() {
        assert_eq!(Lsn(0x16B3748).to_string(), "0/16B3748");
        assert_eq!(Lsn(0x1_0000_00AB).to_string(), "1/AB");
        assert_eq!(Lsn(0).to_string(), "0/0");
        assert_eq!(Lsn::MAX.to_string(), "FFFFFFFF/FFFFFFFF");
    }

    #[test]
    fn parse_accepts_either_case() {
        assert_eq!("0/16b3748".parse::<Lsn>(), Ok(Lsn(0x16B3748)));
        assert_eq!("A/Ff".parse::<Lsn>(), Ok(Lsn(0xA_0000_00FF)));
    }

    #[test]
    fn parse_rejects_malformed() {
        for bad in [
            "zz",
            "1-2",
            "0/",
            "/5",
            "0/1/2",
            "",
            "/",
            "100000000/0",
            "0/100000000",
            "+1/2",
            "1/-2",
            " 0/1",
            "0/1 ",
            "0x1/2",
            "g/1",
        ] {
            assert!(bad.parse::<Lsn>().is_err(), "{bad:?} must not parse");
        }
    }

    #[test]
    fn serde_is_the_string_form() {
        let json = serde_json::to_string(&Lsn(0x16B3748)).expect("serialize");
        assert_eq!(json, "\"0/16B3748\"");
        let back: Lsn = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, Lsn(0x16B3748));
        assert!(serde_json::from_str::<Lsn>("\"0/\"").is_err());
        assert!(serde_json::from_str::<Lsn>("17").is_err());
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(raw in any::<u64>()) {
            let lsn = Lsn(raw);
            prop_assert_eq!(lsn.to_string().parse::<Lsn>(), Ok(lsn));
            prop_assert_eq!(lsn.to_string().to_lowercase().parse::<Lsn>(), Ok(lsn));
        }

        #[test]
        fn parse_never_panics(s in ".{0,24}") {
            let _ = s.parse::<Lsn>();
        }
    }
}
