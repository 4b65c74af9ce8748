//! Values as TOML: triggers, durations and sizes with their largest exact unit, keys and strings.

use super::overrides::is_bare;
use handoff_models::scenario::spec::Trigger;

/// `30s`, `2500ms`, `snapshot-scan-started + 200ms`, `change-acked#3 + 1500ms`.
pub(super) fn trigger_text(trigger: &Trigger) -> String {
    match *trigger {
        Trigger::At { at_ms } => duration_text(at_ms),
        Trigger::After { moment, occurrence, plus_ms } => {
            let mut text = moment.name().to_owned();
            if occurrence != 1 {
                text.push_str(&format!("#{occurrence}"));
            }
            if plus_ms > 0 {
                text.push_str(&format!(" + {}", duration_text(plus_ms)));
            }
            text
        }
    }
}

/// `5min`, `90s`, `1500ms`, `0s`; `16MB`, `64GB`, `1536B`: the largest unit that is exact.
pub(super) use handoff_models::core::units::{duration_text, size_text};

/// A float that reads back as the same value: Rust's shortest form (`1.0`, `2.5`, `1e-7`).
pub(super) fn float_text(value: f64) -> String {
    format!("{value:?}")
}

/// A key: bare when it can be, else a quoted string (`"snapshot.mode"`).
pub(super) fn toml_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(is_bare) { key.to_owned() } else { basic_string(key) }
}

/// A string: a multi-line basic string if it has a line break, else a basic string.
pub(super) fn toml_string(text: &str) -> String {
    if text.contains('\n') { multi_line_string(text) } else { basic_string(text) }
}

/// `["a", "b"]`.
pub(super) fn toml_strings<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> String {
    let texts: Vec<String> = texts.into_iter().map(|text| toml_string(text.as_ref())).collect();
    format!("[{}]", texts.join(", "))
}

pub(super) fn basic_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => push_escaped(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// `"""` and a line break (which TOML drops), then the text with its line breaks. A quote is
/// escaped when another quote or the end follows it, so no `"""` ends the string early.
fn multi_line_string(text: &str) -> String {
    let mut out = String::from("\"\"\"\n");
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if matches!(chars.peek(), Some('"') | None) => out.push_str("\\\""),
            '"' | '\n' => out.push(c),
            c => push_escaped(&mut out, c),
        }
    }
    out.push_str("\"\"\"");
    out
}

/// A character of a basic string: backslashes and control characters (but tabs) escaped.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push('\t'),
        c if c.is_control() && u32::from(c) < 0x80 => out.push_str(&format!("\\u{:04X}", u32::from(c))),
        c => out.push(c),
    }
}
