//! Sizes and times written the way `postgresql.conf` writes them: a whole number, then a unit,
//! case-sensitive (`16MB`, `512kB`, `1GB`; `200ms`, `30s`, `5min`, `1h`, `1d`), as PostgreSQL's
//! GUC parser reads them (`parse_int` with `memory_unit_conversion_table` and
//! `time_unit_conversion_table`, `src/backend/utils/misc/guc.c`), and printed back in the largest
//! unit that is exact. Every reader of the project (scenario files, conformance workloads, the
//! command line) uses these, and words its own messages around [`UnitError`].

use std::fmt;

/// Memory units, in bytes.
pub const SIZE_UNITS: [(&str, u64); 5] = [("B", 1), ("kB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40)];
/// Time units, in milliseconds.
pub const TIME_UNITS_MS: [(&str, u64); 5] =
    [("ms", 1), ("s", 1_000), ("min", 60_000), ("h", 3_600_000), ("d", 86_400_000)];
/// Time units from the second up, in seconds (settings kept in seconds, like
/// `checkpoint_timeout`).
pub const TIME_UNITS_S: [(&str, u64); 4] = [("s", 1), ("min", 60), ("h", 3_600), ("d", 86_400)];

/// The unit names of a table, for messages: `B, kB, MB, GB, TB`.
pub fn unit_names(units: &[(&str, u64)]) -> String {
    units.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// Why a text is not a value with a unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitError {
    /// It does not start with a whole number.
    NotANumber,
    /// The number is followed by something that is not one of the units (empty when a unit is
    /// required and missing).
    UnknownUnit(String),
    /// The value does not fit in 64 bits.
    TooLarge,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitError::NotANumber => write!(f, "not a whole number"),
            UnitError::UnknownUnit(unit) if unit.is_empty() => write!(f, "no unit"),
            UnitError::UnknownUnit(unit) => write!(f, "unknown unit `{unit}`"),
            UnitError::TooLarge => write!(f, "too large"),
        }
    }
}

/// Reads `text` as a whole number and one of `units`, spaces allowed around and between them;
/// with `bare_scale`, a bare number is taken in that scale (`Some(1)`: bytes, seconds), without
/// it a bare number is an error. The unit is checked before the size.
pub fn parse(text: &str, units: &[(&str, u64)], bare_scale: Option<u64>) -> Result<u64, UnitError> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if digits == 0 {
        return Err(UnitError::NotANumber);
    }
    let number: Option<u64> = text[..digits].parse().ok();
    let unit = text[digits..].trim_start();
    let scale = match (unit, bare_scale) {
        ("", Some(scale)) => scale,
        _ => match units.iter().find(|(name, _)| *name == unit) {
            Some((_, scale)) => *scale,
            None => return Err(UnitError::UnknownUnit(unit.to_string())),
        },
    };
    number.and_then(|number| number.checked_mul(scale)).ok_or(UnitError::TooLarge)
}

/// A size: `16MB` → 16 777 216 bytes. A unit is required.
pub fn size_bytes(text: &str) -> Result<u64, UnitError> {
    parse(text, &SIZE_UNITS, None)
}

/// A time: `5min` → 300 000 ms. A unit is required.
pub fn duration_ms(text: &str) -> Result<u64, UnitError> {
    parse(text, &TIME_UNITS_MS, None)
}

/// `value` in the largest of `units` that is exact (`zero` for 0): `5min`, `90s`, `1500ms`.
fn largest_exact(value: u64, units: &[(&str, u64)], zero: &str) -> String {
    if value == 0 {
        return zero.to_owned();
    }
    let exact = units.iter().rev().find(|(_, scale)| value.is_multiple_of(*scale));
    exact.map_or_else(|| value.to_string(), |(unit, scale)| format!("{}{unit}", value / scale))
}

/// A size the way the project's files write it: `16MB`, `64GB`, `512kB`, `1536B`, `0B`
/// (terabytes are written as gigabytes).
pub fn size_text(bytes: u64) -> String {
    largest_exact(bytes, &SIZE_UNITS[..4], "0B")
}

/// A time in the largest exact unit: `5min`, `90s`, `1500ms`, `0s`.
pub fn duration_text(ms: u64) -> String {
    largest_exact(ms, &TIME_UNITS_MS, "0s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_postgresql_conf_writes() {
        assert_eq!(size_bytes("16MB"), Ok(16 << 20));
        assert_eq!(size_bytes(" 512 kB "), Ok(512 << 10));
        assert_eq!(size_bytes("1TB"), Ok(1 << 40));
        assert_eq!(duration_ms("5min"), Ok(300_000));
        assert_eq!(duration_ms("1d"), Ok(86_400_000));
        assert_eq!(parse("300", &TIME_UNITS_S, Some(1)), Ok(300));
        assert_eq!(parse("2h", &TIME_UNITS_S, Some(1)), Ok(7_200));
    }

    #[test]
    fn says_what_is_wrong() {
        assert_eq!(size_bytes("MB"), Err(UnitError::NotANumber));
        assert_eq!(size_bytes("-1MB"), Err(UnitError::NotANumber));
        assert_eq!(size_bytes("16mb"), Err(UnitError::UnknownUnit("mb".into())));
        assert_eq!(size_bytes("16"), Err(UnitError::UnknownUnit(String::new())));
        assert_eq!(size_bytes("1.5GB"), Err(UnitError::UnknownUnit(".5GB".into())));
        assert_eq!(size_bytes("99999999999TB"), Err(UnitError::TooLarge));
        assert_eq!(size_bytes("99999999999999999999999MB"), Err(UnitError::TooLarge));
        // The unit is judged before the size.
        assert_eq!(size_bytes("99999999999999999999999parsecs"), Err(UnitError::UnknownUnit("parsecs".into())));
        assert_eq!(parse("500ms", &TIME_UNITS_S, Some(1)), Err(UnitError::UnknownUnit("ms".into())));
    }

    #[test]
    fn prints_in_the_largest_exact_unit() {
        assert_eq!(size_text(3 << 20), "3MB");
        assert_eq!(size_text(1 << 40), "1024GB");
        assert_eq!(size_text(1536), "1536B");
        assert_eq!(size_text(0), "0B");
        assert_eq!(duration_text(300_000), "5min");
        assert_eq!(duration_text(1_500), "1500ms");
        assert_eq!(duration_text(0), "0s");
    }
}
