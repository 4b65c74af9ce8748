//! Units and triggers: `5min`, `16MB`, `snapshot-scan-started + 200ms`.

use handoff_models::core::units;
use handoff_models::scenario::spec::Moment;
use handoff_models::scenario::spec::Trigger;

/// `5min` → 300 000 (ms); `16MB` → 16 777 216 (bytes), as [`units::parse`] reads them, a unit
/// required. A value too large for a `u64` reads as `u64::MAX`, out of every range (so that the
/// message gives the range, not a syntax).
pub(super) fn with_unit(text: &str, table: &[(&str, u64)]) -> Option<u64> {
    match units::parse(text, table, None) {
        Ok(value) => Some(value),
        Err(units::UnitError::TooLarge) => Some(u64::MAX),
        Err(_) => None,
    }
}

pub(super) fn duration_ms(text: &str) -> Option<u64> {
    with_unit(text, &units::TIME_UNITS_MS)
}

pub(super) const DURATION_UNITS: &str = "ms, s, min, h, d";

const TRIGGER_FORMS: &str = "expected a time like \"30s\" (ms, s, min, h, d) or a moment like \
    \"snapshot-scan-started\", \"streaming-started#2 + 1s\"";

/// `30s`, `2500ms`, `snapshot-scan-started`, `streaming-started#2 + 1s`.
pub(super) fn parse_trigger(text: &str) -> Result<Trigger, String> {
    let trimmed = text.trim();
    let invalid = || format!("invalid trigger `{text}`; {TRIGGER_FORMS}");
    if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        return duration_ms(trimmed).map(|at_ms| Trigger::At { at_ms }).ok_or_else(invalid);
    }
    let (head, plus) = match trimmed.split_once('+') {
        Some((head, plus)) => (head.trim(), Some(plus.trim())),
        None => (trimmed, None),
    };
    let (name, occurrence) = match head.split_once('#') {
        Some((name, occurrence)) => (name.trim(), Some(occurrence.trim())),
        None => (head, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(invalid());
    }
    let Some(moment) = Moment::parse(name) else { return Err(unknown_moment(name)) };
    let occurrence = match occurrence {
        None => 1,
        Some(n) => match n.parse::<u32>() {
            Ok(count) if count >= 1 && n.chars().all(|c| c.is_ascii_digit()) => count,
            _ => return Err(format!("occurrence `#{n}` must be a whole number from 1 to {}", u32::MAX)),
        },
    };
    let plus_ms = match plus {
        None => 0,
        Some(delay) => duration_ms(delay).ok_or_else(|| {
            format!("`{delay}` is not a delay; expected a duration like \"200ms\" ({DURATION_UNITS})")
        })?,
    };
    Ok(Trigger::After { moment, occurrence, plus_ms })
}

pub(super) fn unknown_moment(name: &str) -> String {
    let names: Vec<&str> = Moment::ALL.iter().map(|moment| moment.name()).collect();
    format!("unknown moment `{name}`; the moments are {}", names.join(", "))
}
