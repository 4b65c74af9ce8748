//! Units and triggers: `5min`, `16MB`, `snapshot-scan-started + 200ms`.

use handoff_models::spec::Moment;
use handoff_models::spec::Trigger;

/// A whole number and what follows it: `16MB` → (16, "MB"). A number too large for a `u64`
/// reads as `u64::MAX`, out of every range.
fn number_unit(text: &str) -> Option<(u64, &str)> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if digits == 0 {
        return None;
    }
    let number = text[..digits].parse().unwrap_or(u64::MAX);
    Some((number, text[digits..].trim_start()))
}

/// PostgreSQL's time units, in milliseconds, and memory units, in bytes.
pub(super) const DURATIONS: [(&str, u64); 5] =
    [("ms", 1), ("s", 1_000), ("min", 60_000), ("h", 3_600_000), ("d", 86_400_000)];
pub(super) const SIZES: [(&str, u64); 5] =
    [("B", 1), ("kB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40)];

/// `5min` → 300 000 (ms); `16MB` → 16 777 216 (bytes). A value too large for a `u64` reads as
/// `u64::MAX`, out of every range (so that the message gives the range, not a syntax).
pub(super) fn with_unit(text: &str, units: &[(&str, u64)]) -> Option<u64> {
    let (number, unit) = number_unit(text)?;
    units.iter().find(|(name, _)| *name == unit).map(|(_, scale)| number.saturating_mul(*scale))
}

pub(super) fn duration_ms(text: &str) -> Option<u64> {
    with_unit(text, &DURATIONS)
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
