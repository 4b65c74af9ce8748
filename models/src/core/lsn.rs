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

    /// Parses `hi/lo`, each half one to eight hexadecimal digits of either case, as `pg_lsn`
    /// input does (`pg_lsn_in_internal`, `src/backend/utils/adt/pg_lsn.c`).
    pub fn parse(text: &str) -> Option<Lsn> {
        let (hi, lo) = text.trim().split_once('/')?;
        let half = |part: &str| {
            let valid = (1..=8).contains(&part.len()) && part.bytes().all(|byte| byte.is_ascii_hexdigit());
            if valid { u32::from_str_radix(part, 16).ok() } else { None }
        };
        Some(Lsn((u64::from(half(hi)?) << 32) | u64::from(half(lo)?)))
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
        assert_eq!(Lsn(0x16_B374_D848).to_string(), "16/B374D848");
    }

    #[test]
    fn reads_either_case() {
        assert_eq!(Lsn::parse("16/b374d848"), Some(Lsn(0x16_B374_D848)));
        assert_eq!(Lsn::parse("0/0"), Some(Lsn::INVALID));
    }

    #[test]
    fn rejects_what_pg_lsn_rejects() {
        for bad in ["", "16B3748", "0", "0/", "/1", "/0", "0/G", "g/0", "123456789/0", "+1/0", "0/+1", "0/0/0"] {
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
