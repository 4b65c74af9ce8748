//! Log sequence numbers, printed the way PostgreSQL prints them.
//!
//! An LSN is an unsigned 64-bit byte position in the WAL stream (`XLogRecPtr`), shown as two
//! hexadecimal halves, `hi/lo`: `0/16B3748` (`XLogRecPtr`, printed with
//! `LSN_FORMAT_ARGS` as `%X/%X`; `src/include/access/xlogdefs.h`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A WAL position in bytes. `Lsn::INVALID` (0/0) means "no position", as in PostgreSQL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// `InvalidXLogRecPtr`: 0/0.
    pub const INVALID: Lsn = Lsn(0);

    pub fn is_valid(self) -> bool {
        self.0 != 0
    }

    /// Parses `hi/lo` in hexadecimal, as `pg_lsn` input does.
    pub fn parse(text: &str) -> Option<Lsn> {
        let (hi, lo) = text.trim().split_once('/')?;
        if hi.is_empty() || lo.is_empty() || hi.len() > 8 || lo.len() > 8 {
            return None;
        }
        let hi = u32::from_str_radix(hi, 16).ok()?;
        let lo = u32::from_str_radix(lo, 16).ok()?;
        Some(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

impl Serialize for Lsn {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Lsn {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Lsn::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("`{text}` is not an LSN like 0/16B3748")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prints_like_postgres() {
        assert_eq!(Lsn(0x16B3748).to_string(), "0/16B3748");
        assert_eq!(Lsn((1 << 32) | 0xA0).to_string(), "1/A0");
        assert_eq!(Lsn::INVALID.to_string(), "0/0");
    }

    #[test]
    fn rejects_what_pg_lsn_rejects() {
        for bad in ["", "16B3748", "0/", "/1", "0/G", "123456789/0"] {
            assert_eq!(Lsn::parse(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn parse_inverts_display(value: u64) {
            prop_assert_eq!(Lsn::parse(&Lsn(value).to_string()), Some(Lsn(value)));
        }
    }
}
